"""Type stubs of the compiled part of ``gotry_tenant_state``."""

import builtins
import os
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Final, Literal, Protocol, Self, TypeVar, final

# Every pyo3 class has an instance layout of its own, so no class can derive from two of them;
# the two that can be subclassed at all say so, for type checkers and for stubtest.
from typing_extensions import disjoint_base

# The module's own __all__, which pyo3 fills as the module adds each name, in that order.
__all__ = [
    "ERROR_CODES",
    "_ERROR_TYPES",
    "MIN_LEASE_TTL_MS",
    "MAX_LEASE_TTL_MS",
    "_SNAPSHOT_LOCK_WAIT_S",
    "assert_lease_ttl",
    "version",
    "METRICS_CONTENT_TYPE",
    "metrics",
    "assert_organization_id",
    "assert_ledger_tenant_id",
    "assert_prompt_cache_partition",
    "derive_ledger_tenant_id",
    "derive_prompt_cache_partition",
    "lease_key_for",
    "tenant_root_for",
    "open_lease_store",
    "open_durable_store",
    "OrganizationKey",
    "ManualClock",
    "LeaseRecord",
    "LeaseGrant",
    "HistoryEntry",
    "LeaseStore",
    "SqliteLeaseStore",
    "TenantLease",
    "LeaseKeeper",
    "KeeperEvent",
    "TickReport",
    "ShutdownReport",
    "DurableStore",
    "DirectoryDurableStore",
    "EpochCopies",
    "CopyId",
    "SkippedCopy",
    "WrittenCopy",
    "CopyListing",
    "RestoreReport",
    "GcReport",
    "TenantRouter",
    "TenantHandle",
    "TenantStatus",
    "RouterEvent",
    "CloseReport",
    "RouterTickReport",
]

ERROR_CODES: Final[tuple[str, ...]]
"""The ``GOTRY_TENANT_*`` codes of the core, in the core's order."""

_ERROR_TYPES: Final[tuple[tuple[str, str, tuple[str, ...], str], ...]]
"""The core's registry: ``(code, class name, fields, message template)`` per code, in order."""

MIN_LEASE_TTL_MS: Final[int]
MAX_LEASE_TTL_MS: Final[int]
_SNAPSHOT_LOCK_WAIT_S: Final[float]

_KeyBytes = bytes | bytearray | memoryview
_LeaseOpName = Literal["acquire", "renew", "release", "forget"]
_KeeperEventKind = Literal["lost", "fenced_locally", "resumed", "renew_failed"]
_SkipReason = Literal["manifest", "tenant", "checksum", "integrity", "fold", "superseded"]
_TenantState = Literal["opening", "serving", "draining", "lost", "closed"]
_RouterEventKind = Literal["lost", "closed", "copy_failed", "draining", "copied"]
_T = TypeVar("_T")

_Verify = Callable[[str], bool]
"""``verify(path)``: the host's check of a restored folder; False passes the copy over."""

_Snapshot = Callable[[str, str], object]
"""``snapshot(source, image)``: writes a consistent, self-contained image of the SQLite file
``source`` (which this process has open elsewhere) to ``image``, through the library that has
it open; the return value is ignored."""

class _SupportsNowMs(Protocol):
    """A holder's clock: milliseconds on a clock that only moves forward."""

    def now_ms(self) -> float: ...

METRICS_CONTENT_TYPE: Final[str]
"""The media type of ``metrics()``'s text: ``text/plain; version=0.0.4; charset=utf-8``."""

def metrics() -> str:
    """Every metric family of this process (counted in the core), in the Prometheus text format 0.0.4."""

def version() -> str:
    """The version of the native build loaded (the workspace's one version), e.g. ``"0.1.0"``."""

def assert_lease_ttl(ttl_ms: int) -> int:
    """Returns ``ttl_ms`` if it is an int within [MIN_LEASE_TTL_MS, MAX_LEASE_TTL_MS];
    raises ValueError otherwise (a bool or a float is not a TTL)."""

def assert_organization_id(value: object) -> str:
    """Returns ``value`` if it matches ``^[a-z0-9][a-z0-9-]{0,62}$`` to its very end;
    raises InvalidTenantIdError otherwise (also for anything that is not a str)."""

def assert_ledger_tenant_id(value: object) -> str:
    """Returns ``value`` if it is ``t-`` and 32 lowercase hex digits; InvalidTenantIdError otherwise."""

def assert_prompt_cache_partition(value: object) -> str:
    """Returns ``value`` if it is ``pc-`` and 32 lowercase hex digits; InvalidTenantIdError otherwise."""

def derive_ledger_tenant_id(organization_key: _KeyBytes, issuer: str, subject: str) -> str:
    """``t-`` + the first 128 bits of HMAC-SHA256(key, issuer 0x00 subject). The key has at
    least 32 bytes; issuer and subject are non-empty, without NUL, well-formed Unicode of at
    most 512 UTF-8 bytes, and are not normalized. InvalidTenantIdError otherwise."""

def derive_prompt_cache_partition(organization_key: _KeyBytes, ledger_tenant_id: str) -> str:
    """``pc-`` + the first 128 bits of HMAC-SHA256(key, context 0x00 ledger tenant id)."""

def lease_key_for(organization_id: str, ledger_tenant_id: str) -> str:
    """The lease key of one tenant: ``<organization>/<ledger tenant>``."""

def tenant_root_for(state_root: str | os.PathLike[str], organization_id: str, ledger_tenant_id: str) -> str:
    """``<resolved state root>/orgs/<organization>/tenants/<ledger tenant>``, the root
    resolved lexically as Node's ``path.resolve`` does (no symlinks followed)."""

def open_lease_store(url: str) -> LeaseStore:
    """Opens the store a URL names: ``sqlite:///abs/path.db``, ``sqlite:rel/path.db``, or
    ``mysql://user:password@host:3306/database?prefix=gotry_&timeout_ms=2000``, or
    ``postgres://user:password@host:5432/database?prefix=gotry_&timeout_ms=2000`` (also
    ``postgresql://``)."""

def open_durable_store(url: str) -> DurableStore:
    """Opens the durable store a URL names: a folder as ``file:///abs/dir`` or
    ``file:rel/dir``, or an S3-compatible bucket as
    ``s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1`` (credentials from
    the usual AWS environment variables or the URL; never in an error or a repr).
    DurableStoreUnavailableError when it cannot be reached or used, ValueError for a URL of
    no known scheme."""

@final
class OrganizationKey:
    """An organization key with its HMAC state computed once; never printed or pickled."""

    def __new__(cls, key: _KeyBytes) -> Self: ...
    def derive_ledger_tenant_id(self, issuer: str, subject: str) -> str: ...
    def derive_prompt_cache_partition(self, ledger_tenant_id: str) -> str: ...

@final
class ManualClock:
    """A clock that moves only when told to; serves as a store's ``now_ms`` and as a
    holder's ``clock``."""

    def __new__(cls, start_ms: int | None = None) -> Self:
        """``start_ms`` None: the clock starts at 0."""
    def now_ms(self) -> int: ...
    def set(self, now_ms: int) -> None: ...
    def advance(self, delta_ms: int) -> int:
        """Moves the clock (negative deltas too) and returns the new reading."""

@final
class LeaseRecord:
    __match_args__ = ("key", "owner", "epoch", "lease_until_ms", "forgotten_at_epoch")
    def __new__(
        cls, key: str, owner: str, epoch: int, lease_until_ms: int, forgotten_at_epoch: int = 0
    ) -> Self: ...
    @property
    def key(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def lease_until_ms(self) -> int: ...
    @property
    def forgotten_at_epoch(self) -> int: ...

@final
class LeaseGrant:
    __match_args__ = ("record", "ttl_ms")
    def __new__(cls, record: LeaseRecord, ttl_ms: int) -> Self: ...
    @property
    def record(self) -> LeaseRecord: ...
    @property
    def ttl_ms(self) -> int: ...

@final
class HistoryEntry:
    __match_args__ = ("key", "op", "owner", "epoch", "at_ms")
    def __new__(cls, key: str, op: _LeaseOpName, owner: str, epoch: int, at_ms: int) -> Self: ...
    @property
    def key(self) -> str: ...
    @property
    def op(self) -> _LeaseOpName: ...
    @property
    def owner(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def at_ms(self) -> int: ...

@disjoint_base
class LeaseStore:
    """A lease store of the core. Every method that reaches the store releases the GIL."""

    def read(self, key: str) -> LeaseRecord | None: ...
    def acquire(self, key: str, owner: str, ttl_ms: int) -> LeaseGrant: ...
    def renew(self, key: str, owner: str, epoch: int, ttl_ms: int) -> LeaseGrant: ...
    def renew_batch(
        self, owner: str, ttl_ms: int, leases: Iterable[tuple[str, int]]
    ) -> builtins.list[LeaseGrant | Exception]:
        """Renews many leases of ``owner`` in one durable transaction. One answer per
        ``(key, epoch)`` pair, in order: the grant, or the exception that refuses that lease
        alone (returned, not raised). A failure of the store raises."""
    def release(self, key: str, owner: str, epoch: int) -> LeaseRecord: ...
    def mark_forgotten(self, key: str, owner: str, epoch: int) -> LeaseRecord: ...
    def history(self, key: str | None = None) -> builtins.list[HistoryEntry]: ...
    def list(self, prefix: str | None = None) -> builtins.list[LeaseRecord]: ...
    def now_ms(self) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...

@final
class SqliteLeaseStore(LeaseStore):
    def __new__(
        cls,
        path: str | os.PathLike[str],
        now_ms: Callable[[], int] | ManualClock | None = None,
        *,
        busy_timeout_ms: int | None = None,
    ) -> Self: ...
    @property
    def path(self) -> str: ...

@final
class TenantLease:
    @staticmethod
    def acquire(
        *,
        key: str,
        replica_id: str,
        store: LeaseStore,
        ttl_ms: int,
        margin_ms: int,
        clock: _SupportsNowMs | None = None,
    ) -> TenantLease: ...
    @property
    def key(self) -> str: ...
    @property
    def replica_id(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def forgotten_at_epoch(self) -> int: ...
    @property
    def ttl_ms(self) -> int: ...
    @property
    def margin_ms(self) -> int: ...
    def assert_held(self) -> None:
        """The synchronous write gate: raises FencedError unless the lease is held."""
    def is_held(self) -> bool: ...
    def remaining_ms(self) -> float: ...
    def renew(self) -> None: ...
    def release(self) -> None: ...
    def mark_forgotten(self) -> LeaseRecord: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...

@final
class KeeperEvent:
    """Something that happened to a keeper's leases without the host asking. ``kind``:

    - ``"lost"``: the store refused a renewal (``error`` is the LeaseLostError); the keeper
      dropped the lease and its gate answers FencedError(lease_lost).
    - ``"fenced_locally"``: the fence passed before a renewal was granted; the gate answers
      FencedError(lease_expired_locally). Told once, until the lease resumes.
    - ``"resumed"``: a renewal moved a locally fenced lease's fence ahead again.
    - ``"renew_failed"``: renewals could not be made (``error`` is why; ``key`` and
      ``epoch`` are None and ``leases`` counts the leases to be tried again).
    """

    __match_args__ = ("kind", "key", "epoch", "error")
    @property
    def kind(self) -> _KeeperEventKind: ...
    @property
    def key(self) -> str | None: ...
    @property
    def epoch(self) -> int | None: ...
    @property
    def error(self) -> BaseException | None: ...
    @property
    def leases(self) -> int | None: ...

@final
class TickReport:
    """What one ``LeaseKeeper.tick()`` did."""

    @property
    def batches(self) -> int:
        """Store calls made."""
    @property
    def renewed(self) -> int: ...
    @property
    def lost(self) -> int: ...
    @property
    def failed(self) -> int:
        """Due leases not renewed, to be tried again."""
    @property
    def next_due_ms(self) -> float | None:
        """When the next round is due on the keeper's clock; None when nothing is kept."""

@final
class ShutdownReport:
    """What ``LeaseKeeper.shutdown()`` did with each kept lease, each group ordered by key."""

    @property
    def released(self) -> tuple[str, ...]:
        """Released in the store: the next owner may start at once."""
    @property
    def failed(self) -> tuple[tuple[str, BaseException], ...]:
        """Gate closed, but the store could not be told: the lease runs out at its TTL."""
    @property
    def timed_out(self) -> tuple[str, ...]:
        """Not reached before the timeout: no longer renewed, the lease runs out."""

@final
class LeaseKeeper:
    """Keeps many leases of one owner on one store renewed, all that are due in one store
    transaction per ``max_batch`` leases. Each lease is renewed ``ttl_ms * renew_fraction``
    after its last renewal was sent; its fence moves exactly as ``TenantLease.renew()``
    moves it. Rounds run on a thread of the keeper's own, or only when ``tick()`` is called
    (``start_thread=False``). ``on_event`` is called with the GIL held, on that thread; an
    exception it raises goes to ``sys.unraisablehook`` and the keeper carries on. Every
    call that waits for the store releases the GIL. A keeper still alive when the
    interpreter exits is shut down (its leases released) by an ``atexit`` hook."""

    DEFAULT_RENEW_FRACTION: Final[float]
    DEFAULT_MAX_BATCH: Final[int]
    def __new__(
        cls,
        *,
        store: LeaseStore,
        replica_id: str,
        ttl_ms: int,
        margin_ms: int,
        renew_fraction: float | None = None,
        max_batch: int | None = None,
        on_event: Callable[[KeeperEvent], object] | None = None,
        clock: _SupportsNowMs | None = None,
        start_thread: bool = True,
    ) -> Self: ...
    @property
    def replica_id(self) -> str: ...
    @property
    def ttl_ms(self) -> int: ...
    @property
    def margin_ms(self) -> int: ...
    def acquire(self, key: str) -> TenantLease:
        """Acquires ``key`` and keeps it renewed until it is removed, lost, or the keeper
        shuts down. Raises as ``TenantLease.acquire`` does, and LeaseStoreUnavailableError
        once the keeper is shut down."""
    def remove(self, key: str) -> bool:
        """Stops keeping ``key`` and releases it (gate first, then the store); False when
        it was not kept."""
    def get(self, key: str) -> TenantLease | None: ...
    def __len__(self) -> int:
        """Kept leases, counting those closed through their own handle since the last round."""
    def tick(self) -> TickReport:
        """Runs one round if a lease is due; its events reach ``on_event`` before it returns.
        Raises LeaseStoreUnavailableError once shut down, ValueError from ``on_event``."""
    def shutdown(self, timeout_ms: int | None = None) -> ShutdownReport:
        """Stops renewing and releases every kept lease, starting no release after
        ``timeout_ms`` (default: one TTL). ``on_event`` is never called after it returns;
        calling it again reports nothing."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Shuts down. Releases that failed are raised as an exception group after a clean
        block, and noted on the block's exception otherwise."""

@disjoint_base
class DurableStore:
    """A durable store of the core, where copies outlive the replica that wrote them: every
    object created at most once, never replaced. Opening it releases the GIL."""

    @property
    def location(self) -> str:
        """Where the store is, as a URL without any credential."""

@final
class DirectoryDurableStore(DurableStore):
    """The durable store in one folder (a local disk or a shared volume), created when
    missing; DurableStoreUnavailableError with the errno's name as ``backend_code`` when it
    cannot be."""

    def __new__(cls, path: str | os.PathLike[str]) -> Self: ...
    @property
    def path(self) -> str:
        """The folder, made absolute."""

@final
class CopyId:
    """A copy's place in the order restores follow: epoch first, then sequence."""

    __match_args__ = ("epoch", "seq")
    def __new__(cls, epoch: int, seq: int) -> Self: ...
    @property
    def epoch(self) -> int: ...
    @property
    def seq(self) -> int: ...
    def __lt__(self, other: CopyId, /) -> bool: ...
    def __le__(self, other: CopyId, /) -> bool: ...
    def __gt__(self, other: CopyId, /) -> bool: ...
    def __ge__(self, other: CopyId, /) -> bool: ...

@final
class SkippedCopy:
    """A copy a restore passed over, and why: ``manifest`` (missing or unreadable),
    ``tenant`` (another tenant's), ``checksum`` (a file's size or SHA-256 differs),
    ``integrity`` (a SQLite file fails ``PRAGMA integrity_check``), ``fold`` (``verify``
    returned False) or ``superseded`` (written into an older epoch after a later tenure
    began: a stale holder's)."""

    __match_args__ = ("epoch", "seq", "reason")
    def __new__(cls, epoch: int, seq: int, reason: _SkipReason) -> Self: ...
    @property
    def epoch(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def reason(self) -> _SkipReason: ...

@final
class WrittenCopy:
    """A copy taken as written: its manifest is durable and the write gate held after it."""

    __match_args__ = ("epoch", "seq", "files", "bytes")
    def __new__(
        cls,
        epoch: int,
        seq: int,
        files: int,
        bytes: int,
        pieces_uploaded: int = 0,
        bytes_uploaded: int = 0,
        pieces_reused: int = 0,
        bytes_reused: int = 0,
    ) -> Self: ...
    @property
    def epoch(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def files(self) -> int: ...
    @property
    def bytes(self) -> int:
        """Bytes of the files copied (SQLite files as their backup image), the manifest aside."""
    @property
    def pieces_uploaded(self) -> int:
        """Objects this copy stored beside its manifest (bases and deltas too large to ride inline in it)."""
    @property
    def bytes_uploaded(self) -> int:
        """Bytes of all this copy made, those its manifest carries inline included."""
    @property
    def pieces_reused(self) -> int:
        """Objects of earlier copies of the lineage this copy references instead of storing again."""
    @property
    def bytes_reused(self) -> int: ...

@final
class CopyListing:
    """One copy as the store lists it, from names and sizes alone."""

    __match_args__ = ("epoch", "seq", "complete", "objects", "bytes")
    def __new__(cls, epoch: int, seq: int, complete: bool, objects: int, bytes: int) -> Self: ...
    @property
    def epoch(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def complete(self) -> bool:
        """The manifest is there, so the copy exists; whether it verifies only a restore says."""
    @property
    def objects(self) -> int:
        """Objects under the copy's prefix, the manifest included."""
    @property
    def bytes(self) -> int: ...

@final
class RestoreReport:
    """What a restore did."""

    @property
    def restored(self) -> CopyId | None:
        """The copy installed; None for an empty start (no copy to restore: the root is empty)."""
    @property
    def skipped(self) -> builtins.list[SkippedCopy]:
        """Every copy passed over on the way, newest first."""
    @property
    def files(self) -> int:
        """Files now in the tenant root."""
    @property
    def bytes(self) -> int: ...

@final
class GcReport:
    """What a garbage collection kept and deleted, each newest first."""

    @property
    def kept(self) -> builtins.list[CopyId]: ...
    @property
    def deleted(self) -> builtins.list[CopyId]: ...

@final
class EpochCopies:
    """Copies of tenant roots in one durable store, scoped by the lease's epoch: a holder
    writes only under its own epoch's prefix, every object create-only, the manifest last,
    and a restore takes the newest copy that verifies from the epochs between the forgotten
    floor and its own. A holder keeps one ``EpochCopies`` for its whole tenure (it remembers
    what it wrote). Every method releases the GIL; safe to share between threads.

    A file of the tenant root that this process has open through another descriptor (a
    ledger a ``sqlite3`` connection holds, with its WAL) is never opened by the module's own
    SQLite, whose close would drop that connection's locks and could delete its WAL: it is
    read through ``snapshot(source, image)``, called with the GIL on the copy's thread (use
    ``sqlite3_snapshot`` for the standard library's ``sqlite3``; a host using another SQLite
    binding passes a function written with that binding). Without ``snapshot`` such a copy
    is refused with ``OpenInProcessError``; an exception
    ``snapshot`` raises fails the copy and comes out of ``write_copy`` as itself."""

    def __new__(cls, store: DurableStore, *, snapshot: _Snapshot | None = None) -> Self: ...
    def write_copy(self, lease: TenantLease, root: str | os.PathLike[str]) -> WrittenCopy:
        """Writes a complete copy of the tenant root ``root`` (the ledger
        ``gotry-state/gotry-state.db`` and every other file under it) under the lease's
        epoch; SQLite files are read through SQLite's backup API (those this process has open
        elsewhere through ``snapshot``). FencedError when the gate is closed before the first
        object or after the manifest, CopyConflictError when anything in the epoch's prefix
        was not written by this holder, DurableStoreUnavailableError when the store fails,
        OpenInProcessError for a held file without ``snapshot``."""
    def restore(
        self,
        lease: TenantLease,
        root: str | os.PathLike[str],
        *,
        verify: _Verify | None = None,
    ) -> RestoreReport:
        """Restores, at the start of the lease's tenure, the newest copy that verifies
        (manifest, tenant, checksums, SQLite integrity, then ``verify``) in place of
        ``root``, in one step. ``verify(path)`` is called with the GIL for each candidate
        that passed every other check, restored into the folder ``path`` and not yet in
        place: False passes it over (``fold``), an exception it raises comes out of this
        call unchanged. RestoreVerificationError (``skipped``) when copies exist but none
        verifies; an empty start when there is none. A root of which this process still has
        a file open is refused with OpenInProcessError, before
        anything changes: the host would go on writing into a file that is no longer the
        tenant's."""
    def list(self, key: str) -> builtins.list[CopyListing]:
        """Every copy of the tenant ``key`` (``<organization>/<ledger tenant>``), oldest first."""
    def forget_copies(self, lease: TenantLease) -> builtins.list[CopyId]:
        """Deletes every copy of epochs up to the lease's forgotten floor (read from the
        lease store: LeaseLostError unless it still names this holder); returns them."""
    def gc(self, lease: TenantLease, *, keep: int) -> GcReport:
        """Keeps the newest ``keep`` (at least 1) copies that look valid and deletes the
        older ones, never the newest valid copy; checks the lease store as
        ``forget_copies`` does."""

@final
class TenantHandle:
    """A tenant served by a router: one tenure. Equal to another handle of the same tenure."""

    @property
    def key(self) -> str:
        """``<organization>/<ledger tenant>``."""
    @property
    def root(self) -> str:
        """The tenant root under the router's state root."""
    @property
    def epoch(self) -> int: ...
    @property
    def restored_from(self) -> CopyId | None:
        """The copy the tenure started from; None for an empty start."""
    @property
    def lease(self) -> TenantLease:
        """The tenure's lease (kept by the router): ``assert_held()`` is the write gate."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class TenantStatus:
    """One tenant as operators and metrics see it."""

    @property
    def key(self) -> str: ...
    @property
    def state(self) -> _TenantState: ...
    @property
    def epoch(self) -> int:
        """The tenure's epoch; 0 while it is still opening."""
    @property
    def in_flight(self) -> int: ...
    @property
    def last_copy(self) -> CopyId | None:
        """The newest good copy of the tenure, or the one it was restored from."""
    @property
    def writes_since_copy(self) -> int:
        """Calls acknowledged since the last good copy began."""
    @property
    def lag_ms(self) -> int:
        """Milliseconds since the last good copy began (since the tenant opened, before one)."""
    @property
    def last_copy_error(self) -> str | None:
        """Why the last copy failed (``CODE: message``); None after a good one."""

@final
class RouterEvent:
    """Something that happened to a served tenant without the host asking. ``kind``:

    - ``"lost"``: the lease was lost; the tenant refuses calls (FencedError) from now on.
    - ``"closed"``: the tenant's last call ended after a loss or a handoff: its files may be
      closed.
    - ``"copy_failed"``: a background copy failed (``error`` is why); the lag grows until
      one succeeds.
    - ``"draining"``: a handoff (or ``close``) began draining the tenant, before it waits for
      the calls in flight; new calls raise TenantDrainingError from now on. Told once per drain:
      stop routing the tenant's requests here. ``"closed"`` follows when it is released; a
      drain that timed out is the handoff's DrainTimeoutError, and the tenant serves again.
    - ``"copied"``: a background copy (``"async"``) was written (``seq`` is its place in the
      epoch, ``bytes_uploaded`` what it stored): the tenant's writes before it are durable.
      Told once per copy the router writes in the background, never for the copy a
      ``"strict"`` call or a handoff waits for (their own answer says it).
    """

    __match_args__ = ("kind", "key", "epoch", "error")
    @property
    def kind(self) -> _RouterEventKind: ...
    @property
    def key(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def error(self) -> BaseException | None: ...
    @property
    def seq(self) -> int | None:
        """For ``"copied"``: the copy's sequence number in its epoch; None otherwise."""
    @property
    def bytes_uploaded(self) -> int | None:
        """For ``"copied"``: the bytes the copy made and stored; None otherwise."""

@final
class CloseReport:
    """What ``TenantRouter.close()`` did with every tenant."""

    @property
    def handed_off(self) -> builtins.list[str]:
        """Copied and released: the next replica may serve them at once."""
    @property
    def timed_out(self) -> builtins.list[str]:
        """Calls still running at the timeout: nothing was copied for them, and the keeper's
        shutdown then closed their gates (those calls end with FencedError)."""
    @property
    def failed(self) -> builtins.list[tuple[str, Exception]]:
        """``(key, exception)`` of hand-offs whose final copy or release failed."""
    @property
    def keeper(self) -> ShutdownReport:
        """What the keeper's shutdown did with the leases still kept after the hand-offs."""

@final
class RouterTickReport:
    """What one ``TenantRouter.tick()`` did."""

    @property
    def keeper(self) -> TickReport:
        """The keeper's round: leases renewed, lost (each also told as ``lost``), failed."""
    @property
    def copied(self) -> builtins.list[str]:
        """Keys of the tenants copied in the background by this round."""
    @property
    def failed(self) -> builtins.list[str]:
        """Keys of the tenants whose due copy failed; each was also told as ``copy_failed``."""
    @property
    def next_due_ms(self) -> float | None:
        """When the next round is due on the router's clock; None when nothing is kept."""

@final
class TenantRouter:
    """Serves many tenants from one replica: one ``LeaseKeeper`` of its own renews every
    lease it holds, and it writes their copies to ``durable_store``. Each tenant's root is
    ``tenant_root_for(state_root, organization, tenant)``.

    - ``open`` refuses with ReplicaAtCapacityError (``limit``) before the lease or any file
      is touched, answers LeaseHeldError with the holder's ``record``, and otherwise
      acquires the lease and restores the newest valid copy (checked by ``verify``).
    - ``run`` counts a call in flight and checks the write gate before and after it.
    - Copies: ``durability="async"`` copies every tenant written to, in the background,
      ``copy_interval_ms`` after its last good copy (a failing store shows as lag and a
      ``copy_failed`` event); ``"strict"`` makes each call's acknowledgement wait for a copy
      that holds it (DurableStoreUnavailableError refuses it).
    - Files the host has open are read through ``snapshot`` (see ``EpochCopies``).
    - ``on_event(RouterEvent)`` is called with the GIL from the router's threads (or the one
      that ended a call or a handoff); an exception it raises goes to ``sys.unraisablehook``.

    Every timing rule (copy interval, lag, a copy's grace, a drain's timeout) runs on
    ``clock``; with ``start_thread=False`` no thread of the router's runs, and each round runs
    only when ``tick()`` is called.

    ``open``, ``handoff``, ``close``, ``tick``, ``status`` and both ends of ``run`` release
    the GIL.
    Safe to share between threads. The context manager closes on exit (timeout: one TTL);
    a router still alive when the interpreter exits is closed by an ``atexit`` hook. One
    dropped without ``close()`` releases nothing: its leases run out at their TTL."""

    def __new__(
        cls,
        lease_store: LeaseStore,
        durable_store: DurableStore,
        state_root: str | os.PathLike[str],
        replica_id: str,
        ttl_ms: int,
        margin_ms: int,
        *,
        capacity: int | None = None,
        copy_interval_ms: int | None = None,
        durability: Literal["async", "strict"] | None = None,
        verify: _Verify | None = None,
        snapshot: _Snapshot | None = None,
        on_event: Callable[[RouterEvent], object] | None = None,
        clock: _SupportsNowMs | None = None,
        start_thread: bool = True,
        keep_copies: int | None = None,
        tenant_metrics: bool | None = None,
    ) -> Self:
        """``capacity`` None: about a third of the descriptors left after a quarter of the
        process's limit is reserved (256 with the common limit of 1024). ``copy_interval_ms``
        None: 30 s. ``durability`` None: ``"async"``. ``clock``: the router's monotonic clock,
        its holders' and its timing rules' (a ``ManualClock`` in tests), the system's when
        None. ``start_thread=False``: no renewal thread and no copier; rounds run at
        ``tick()``, and nothing renews the leases between two ticks. ``keep_copies``: how many
        copies of each tenant the router keeps, deleting older ones as it writes (a strict
        router writes one per acknowledged write); the core's number when None, every copy
        when 0 (for a host that runs ``EpochCopies.gc`` itself). ``tenant_metrics=True``: ``metrics()``
        (and ``MetricsCollector``) carries a series per tenant this router lists, labelled
        ``replica`` and ``tenant`` (the lease key): its state
        (``gotry_tenant_router_tenant_state{state}`` 1), calls in flight and copy lag in seconds
        and in writes, read at each scrape and gone once the tenant leaves; bounded by
        ``capacity``, off when None (the core's default), since each tenant is a series on the
        metrics server."""
    @property
    def capacity(self) -> int: ...
    @property
    def replica_id(self) -> str: ...
    @property
    def ttl_ms(self) -> int: ...
    @property
    def margin_ms(self) -> int: ...
    def open(self, organization: str, tenant: str) -> TenantHandle:
        """Serves a tenant; the same handle while it is served. ReplicaAtCapacityError,
        LeaseHeldError, TenantDrainingError while it hands off, RouterClosedError after
        ``close``, RestoreVerificationError when its copies exist but none verifies."""
    def run(self, key: str, call: Callable[[TenantHandle], _T]) -> _T:
        """Runs ``call(handle)`` with the GIL as one call of the served tenant ``key`` and
        returns what it returns. Raised before ``call`` ran (nothing was written, a retry is
        safe): RouterClosedError, LeaseLostError (``key`` not served here, or still being
        opened), TenantDrainingError (a handoff), FencedError (the lease was lost). After it
        returned: CallInDoubtError, whose ``__cause__`` says why (FencedError: the gate closed
        meanwhile; in strict mode the copy's failure or TenantBusyError): the write may be
        durable, so the host must not report it as refused. An exception ``call`` raises ends
        the call unacknowledged and propagates unchanged."""
    def handoff(self, key: str, timeout_ms: int | None = None) -> None:
        """Drains ``key`` (new calls: TenantDrainingError; the lease is renewed meanwhile),
        waits at most ``timeout_ms`` (default one TTL) for its running calls, takes a final
        copy and releases the lease. DrainTimeoutError (``in_flight``, ``timeout_ms``) leaves
        it serving with nothing copied or released; a failed copy leaves it serving too."""
    def close(self, timeout_ms: int | None = None) -> CloseReport:
        """Hands every tenant off (each waiting at most ``timeout_ms``, default one TTL),
        stops the copier and shuts the keeper down; every later ``open`` is
        RouterClosedError. Calling it again reports nothing."""
    def tick(self) -> RouterTickReport:
        """Runs one round on the router's clock: the keeper's renewals that are due (a lease
        the store refuses is lost), then the background copies that are due. The round's
        events reach ``on_event`` on this thread before it returns. RouterClosedError after
        ``close``; the clock's error when it cannot be read."""
    def status(self) -> builtins.list[TenantStatus]:
        """Every tenant this replica knows, ordered by key, its lag on the router's clock
        (whose error it raises when it cannot be read)."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Closes with the default timeout. Hand-offs and releases that failed are raised as
        an exception group after a clean block, and noted on the block's exception otherwise."""
