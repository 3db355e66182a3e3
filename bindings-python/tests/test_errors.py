"""The exception classes: the core's code list, the reference's class names and fields,
catching by class or by code, and pickling."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import gotry_tenant_state as gts

# The reference's errors.js, in its order: code and class name.
REFERENCE = [
    ("GOTRY_TENANT_LEASE_HELD", "LeaseHeldError"),
    ("GOTRY_TENANT_LEASE_LOST", "LeaseLostError"),
    ("GOTRY_TENANT_FENCED", "FencedError"),
    ("GOTRY_TENANT_LEASE_STORE_UNAVAILABLE", "LeaseStoreUnavailableError"),
    ("GOTRY_TENANT_ID_INVALID", "InvalidTenantIdError"),
    ("GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE", "DurableStoreUnavailableError"),
    ("GOTRY_TENANT_RESTORE_INVALID", "RestoreVerificationError"),
    ("GOTRY_TENANT_COPY_CONFLICT", "CopyConflictError"),
    ("GOTRY_TENANT_DRAINING", "TenantDrainingError"),
    ("GOTRY_TENANT_DRAIN_TIMEOUT", "DrainTimeoutError"),
    ("GOTRY_TENANT_ROUTER_CLOSED", "RouterClosedError"),
    ("GOTRY_TENANT_REPLICA_AT_CAPACITY", "ReplicaAtCapacityError"),
    ("GOTRY_TENANT_BUSY", "TenantBusyError"),
    ("GOTRY_TENANT_OPEN_IN_PROCESS", "OpenInProcessError"),
    ("GOTRY_TENANT_CALL_IN_DOUBT", "CallInDoubtError"),
]

RECORD = gts.LeaseRecord("acme/t-1", "replica-a", 4, 1234, 2)
SKIPPED = [gts.SkippedCopy(2, 5, "checksum"), gts.SkippedCopy(1, 1, "fold")]


def examples() -> list[gts.TenantStateError]:
    """A fresh instance of every class, with its extra fields, in the reference's order."""
    return [
        gts.LeaseHeldError("held", record=RECORD),
        gts.LeaseLostError("lost"),
        gts.FencedError("fenced", reason="lease_lost"),
        gts.LeaseStoreUnavailableError("busy"),
        gts.InvalidTenantIdError("bad id"),
        gts.DurableStoreUnavailableError("down", backend_code="EROFS"),
        gts.RestoreVerificationError("checksum", skipped=SKIPPED),
        gts.CopyConflictError("two writers"),
        gts.TenantDrainingError("draining"),
        gts.DrainTimeoutError("still running", in_flight=3, timeout_ms=250),
        gts.RouterClosedError("closed"),
        gts.ReplicaAtCapacityError("full", limit=64),
        gts.TenantBusyError("busy", key="acme/t-1", running=2, waited_ms=100),
        gts.OpenInProcessError("open"),
        gts.CallInDoubtError("in doubt", key="acme/t-1", epoch=4),
    ]


def test_error_codes_are_exactly_the_core_registry() -> None:
    assert gts.ERROR_CODES == tuple(code for code, _ in REFERENCE)
    assert len(set(gts.ERROR_CODES)) == 15


def test_every_class_is_the_core_registry_entry_of_its_code() -> None:
    types = gts._native._ERROR_TYPES
    assert [(code, name) for code, name, _, _ in types] == REFERENCE
    for code, name, fields, template in types:
        assert getattr(gts, name).code == code
        assert all(field.isidentifier() for field in fields), (name, fields)
        assert template, name


def test_a_message_built_from_fields_is_the_core_template_of_the_code() -> None:
    """Filled here by hand, so that a class wording its message itself would differ."""
    templates = {code: template for code, _, _, template in gts._native._ERROR_TYPES}
    template = templates["GOTRY_TENANT_LEASE_HELD"]
    expected = (
        template.replace("{record.key}", RECORD.key)
        .replace("{record.owner}", RECORD.owner)
        .replace("{record.epoch}", str(RECORD.epoch))
    )
    assert "{" not in expected
    assert str(gts.LeaseHeldError(record=RECORD)) == expected


def test_every_code_has_its_reference_class() -> None:
    exported = {name: getattr(gts, name) for name in gts.__all__}
    classes = [cls for cls in exported.values() if isinstance(cls, type) and issubclass(cls, gts.TenantStateError)]
    assert {(cls.code, cls.__name__) for cls in classes if cls is not gts.TenantStateError} == set(REFERENCE)
    assert [type(error).__name__ for error in examples()] == [name for _, name in REFERENCE]
    for error in examples():
        assert isinstance(error, Exception)
        assert type(error).__module__ == "gotry_tenant_state"


@pytest.mark.parametrize("index", range(len(REFERENCE)), ids=[name for _, name in REFERENCE])
def test_every_exception_survives_pickling(index: int) -> None:
    error = examples()[index]
    error.add_note("seen on replica-a")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert (copy.code, str(copy), copy.args) == (error.code, str(error), error.args)
    assert vars(copy) == vars(error)
    assert copy.__notes__ == ["seen on replica-a"]


def test_extra_fields_have_the_reference_names_in_snake_case() -> None:
    held, _, fenced, _, _, durable, restore, _, _, drain, _, capacity, busy, _, doubt = examples()
    assert isinstance(busy, gts.TenantBusyError)
    assert (busy.key, busy.running, busy.waited_ms) == ("acme/t-1", 2, 100)
    assert isinstance(doubt, gts.CallInDoubtError)
    assert (doubt.key, doubt.epoch) == ("acme/t-1", 4)
    assert isinstance(held, gts.LeaseHeldError) and held.record == RECORD
    assert isinstance(fenced, gts.FencedError) and fenced.reason == "lease_lost"
    assert isinstance(durable, gts.DurableStoreUnavailableError) and durable.backend_code == "EROFS"
    assert isinstance(restore, gts.RestoreVerificationError) and restore.skipped == SKIPPED
    assert [(s.epoch, s.seq, s.reason) for s in restore.skipped] == [(2, 5, "checksum"), (1, 1, "fold")]
    assert isinstance(drain, gts.DrainTimeoutError) and (drain.in_flight, drain.timeout_ms) == (3, 250)
    assert isinstance(capacity, gts.ReplicaAtCapacityError) and capacity.limit == 64
    assert gts.RestoreVerificationError("no skipped list").skipped == []


def test_lease_held_error_needs_only_its_record_as_in_the_reference() -> None:
    # The reference constructs it from the record alone and builds its message from it.
    error = gts.LeaseHeldError(record=RECORD)
    assert str(error) == "lease acme/t-1 is held by replica-a at epoch 4"
    assert error.args == ("lease acme/t-1 is held by replica-a at epoch 4",)
    assert error.record == RECORD and error.code == "GOTRY_TENANT_LEASE_HELD"
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is gts.LeaseHeldError
    assert (str(copy), copy.args, copy.record) == (str(error), error.args, RECORD)
    assert vars(copy) == vars(error)
    # A message given explicitly still wins.
    assert str(gts.LeaseHeldError("forward to replica-a", record=RECORD)) == "forward to replica-a"
    with pytest.raises(TypeError):
        gts.LeaseHeldError("no record")  # type: ignore[call-arg]


def test_a_raised_lease_held_error_has_the_same_message_as_one_built_from_its_record(
    store: gts.SqliteLeaseStore,
) -> None:
    store.acquire("k", "a", 1000)
    with pytest.raises(gts.LeaseHeldError) as raised:
        store.acquire("k", "b", 1000)
    assert str(raised.value) == str(gts.LeaseHeldError(record=raised.value.record))


def test_raised_errors_are_caught_by_class_or_by_code(store: gts.SqliteLeaseStore) -> None:
    store.acquire("k", "a", 1000)
    try:
        store.acquire("k", "b", 1000)
    except gts.TenantStateError as error:
        assert error.code == "GOTRY_TENANT_LEASE_HELD"
        assert isinstance(error, gts.LeaseHeldError)
        copy = pickle.loads(pickle.dumps(error))
        assert isinstance(copy, gts.LeaseHeldError) and copy.record == error.record
    else:
        pytest.fail("a second owner acquired an unexpired lease")


def test_a_raised_fence_pickles_with_its_reason(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    lease = gts.TenantLease.acquire(key="k", replica_id="a", store=store, ttl_ms=1000, margin_ms=0, clock=clock)
    lease.release()
    with pytest.raises(gts.FencedError) as caught:
        lease.assert_held()
    copy = pickle.loads(pickle.dumps(caught.value))
    assert (type(copy), copy.reason, str(copy)) == (gts.FencedError, "lease_released", str(caught.value))


def test_invalid_arguments_are_plain_value_errors(store: gts.SqliteLeaseStore) -> None:
    with pytest.raises(ValueError) as caught:
        store.acquire("k", "a", 99)
    assert not isinstance(caught.value, gts.TenantStateError)
    assert "100" in str(caught.value)


def test_storage_errors_carry_the_engine_code(tmp_path: Path) -> None:
    error = gts.TenantStateStorageError("disk full", code="SQLITE_FULL")
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.code, str(copy)) == (gts.TenantStateStorageError, "SQLITE_FULL", "disk full")
    # A folder that cannot be created for the store file: the file system's own name for it.
    (tmp_path / "file").write_text("")
    with pytest.raises(gts.TenantStateStorageError) as caught:
        gts.SqliteLeaseStore(tmp_path / "file" / "sub" / "leases.db")
    assert caught.value.code == "ENOTDIR"
