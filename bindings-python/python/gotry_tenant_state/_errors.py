"""Typed failures of the tenant-state layer.

Callers branch on the exception class or on ``code`` (the stable ``GOTRY_TENANT_*`` string),
never on messages. Every failure is an availability outcome, never a silent success: a holder
that cannot prove it still owns a tenant stops acknowledging writes for it.

The classes are plain Python so that they construct, pickle and take notes like any other
exception. The native module raises them by the class names the Rust core gives its codes and
checks, the first time it raises one, that each class declares the core's code. It raises them
with the core's message; a message built here (a ``LeaseHeldError`` made from its record) is
the core's template of the code, filled from the fields.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

from ._native import _ERROR_TYPES

if TYPE_CHECKING:
    from ._native import LeaseRecord, SkippedCopy

__all__ = [
    "TenantStateError",
    "LeaseHeldError",
    "LeaseLostError",
    "FencedError",
    "LeaseStoreUnavailableError",
    "InvalidTenantIdError",
    "DurableStoreUnavailableError",
    "RestoreVerificationError",
    "CopyConflictError",
    "TenantDrainingError",
    "DrainTimeoutError",
    "RouterClosedError",
    "ReplicaAtCapacityError",
    "TenantBusyError",
    "OpenInProcessError",
    "CallInDoubtError",
    "TenantStateStorageError",
]


_TEMPLATES = {code: template for code, _, _, template in _ERROR_TYPES}
_PLACE = re.compile(r"\{([^}]*)\}")


def _message_of(code: str, **values: Any) -> str:
    """The core's template of ``code`` with ``values`` (by the core's field names) in its
    ``{field}`` and ``{field.part}`` places; a place whose field is not given stays as it is,
    as in the core's ``fill_template``."""

    def fill(place: re.Match[str]) -> str:
        field, *parts = place[1].split(".")
        if field not in values:
            return place[0]
        value = values[field]
        for part in parts:
            value = getattr(value, part)
        return str(value)

    return _PLACE.sub(fill, _TEMPLATES[code])


def _rebuild(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> BaseException:
    """Unpickles an exception without calling its ``__init__``, whose keyword fields the
    default ``BaseException`` pickling would not pass back."""
    error = cls.__new__(cls, *args)
    error.__dict__.update(state)
    return error


class _Picklable(Exception):
    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


class TenantStateError(_Picklable):
    """Base of the failures that have a ``GOTRY_TENANT_*`` code."""

    code: ClassVar[str]

    def __init__(self, message: str) -> None:
        super().__init__(message)


class LeaseHeldError(TenantStateError):
    """Another holder has an unexpired lease; ``record`` says who, so a router can forward.

    As in the reference (``new LeaseHeldError(record)``), the record alone is enough:
    without a message, it is built from the record's key, owner and epoch."""

    code = "GOTRY_TENANT_LEASE_HELD"

    def __init__(self, message: str | None = None, *, record: LeaseRecord) -> None:
        if message is None:
            message = _message_of(self.code, record=record)
        super().__init__(message)
        self.record = record


class LeaseLostError(TenantStateError):
    """The caller does not hold the lease (expired, taken over, or never held). Terminal for
    that holder."""

    code = "GOTRY_TENANT_LEASE_LOST"


class FencedError(TenantStateError):
    """The write path must not acknowledge: this process cannot prove it still owns the
    tenant. ``reason`` is ``lease_released``, ``lease_lost`` or ``lease_expired_locally``."""

    code = "GOTRY_TENANT_FENCED"

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class LeaseStoreUnavailableError(TenantStateError):
    """The store could not be reached or stayed contended past its busy timeout. A holder
    keeps its local deadline and fails closed when it passes."""

    code = "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE"


class InvalidTenantIdError(TenantStateError):
    """An organization id, tenant id, claim or key is not in its fixed, path-safe form."""

    code = "GOTRY_TENANT_ID_INVALID"


class DurableStoreUnavailableError(TenantStateError):
    """The durable store failed or could not be reached. ``backend_code`` is the backend's
    own name for the failure (an errno name such as ``EROFS`` or ``ENOTDIR``, or an S3
    error code), for an operator to act on; the lease and its gate are not affected."""

    code = "GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE"

    def __init__(self, message: str, *, backend_code: str) -> None:
        super().__init__(message)
        self.backend_code = backend_code


class RestoreVerificationError(TenantStateError):
    """Durable copies exist but none can be trusted; ``skipped`` lists every copy passed
    over, newest first, each a ``SkippedCopy`` with its ``epoch``, ``seq`` and ``reason``."""

    code = "GOTRY_TENANT_RESTORE_INVALID"

    def __init__(self, message: str, *, skipped: list[SkippedCopy] | None = None) -> None:
        super().__init__(message)
        self.skipped: list[SkippedCopy] = [] if skipped is None else skipped


class CopyConflictError(TenantStateError):
    """Something else wrote into this holder's own epoch prefix: the single-writer
    invariant is broken."""

    code = "GOTRY_TENANT_COPY_CONFLICT"


class TenantDrainingError(TenantStateError):
    """The tenant is being handed off; retry on the next owner."""

    code = "GOTRY_TENANT_DRAINING"


class DrainTimeoutError(TenantStateError):
    """A handoff gave up waiting for ``in_flight`` running calls after ``timeout_ms``; the
    tenant serves again and the caller decides what to do."""

    code = "GOTRY_TENANT_DRAIN_TIMEOUT"

    def __init__(self, message: str, *, in_flight: int, timeout_ms: int) -> None:
        super().__init__(message)
        self.in_flight = in_flight
        self.timeout_ms = timeout_ms


class RouterClosedError(TenantStateError):
    """The router was closed; no tenant can be opened through it any more."""

    code = "GOTRY_TENANT_ROUTER_CLOSED"


class ReplicaAtCapacityError(TenantStateError):
    """This replica already serves ``limit`` tenants; the request belongs elsewhere or later."""

    code = "GOTRY_TENANT_REPLICA_AT_CAPACITY"

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class TenantBusyError(TenantStateError):
    """A copy could not read the tenant's files: ``running`` calls kept running for
    ``waited_ms``. Nothing was copied; the calls themselves go on."""

    code = "GOTRY_TENANT_BUSY"

    def __init__(self, message: str, *, key: str, running: int, waited_ms: int) -> None:
        super().__init__(message)
        self.key = key
        self.running = running
        self.waited_ms = waited_ms


class OpenInProcessError(TenantStateError):
    """A file is open through another handle of this process, so the library may not open it
    (SQLite's locks belong to the process): copy with ``snapshot=sqlite3_snapshot``, close the
    host's connections before a restore. Nothing was touched."""

    code = "GOTRY_TENANT_OPEN_IN_PROCESS"


class CallInDoubtError(TenantStateError):
    """A router call's handler ran and returned, but its acknowledgement could not be
    confirmed (the gate closed after it, or in strict durability its copy failed): its write
    may be durable or not; ``__cause__`` says why. Every other failure of ``run`` comes before
    the handler ran: nothing was written, a retry is safe."""

    code = "GOTRY_TENANT_CALL_IN_DOUBT"

    def __init__(self, message: str, *, key: str, epoch: int) -> None:
        super().__init__(message)
        self.key = key
        self.epoch = epoch


class TenantStateStorageError(_Picklable):
    """The storage engine failed for a reason other than contention: a corrupt or foreign
    file, a full disk, a folder that cannot be created. ``code`` is the engine's own name
    for it (SQLite's, such as ``SQLITE_NOTADB``, or ``ENOENT`` for the file system), as the
    reference lets SQLite's errors through. Not a ``TenantStateError``: it has no code of the
    layer's registry, and it calls for an operator rather than for a retry elsewhere."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


# Shown and pickled under the package's name, where users import them from.
for _name in __all__:
    globals()[_name].__module__ = "gotry_tenant_state"
del _name
