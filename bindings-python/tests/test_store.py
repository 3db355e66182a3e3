"""The lease store's rules through the module, its values, and its lifecycle."""

from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path

import pytest

import gotry_tenant_state as gts
from conftest import START_MS


def ops(store: gts.LeaseStore, key: str | None = None) -> list[tuple[str, str, int]]:
    return [(entry.op, entry.owner, entry.epoch) for entry in store.history(key)]


def test_first_acquire_starts_at_epoch_one(store: gts.SqliteLeaseStore) -> None:
    grant = store.acquire("k", "a", 1000)
    assert grant == gts.LeaseGrant(gts.LeaseRecord("k", "a", 1, START_MS + 1000, 0), 1000)
    assert grant.ttl_ms == 1000
    assert store.read("k") == grant.record
    assert store.read("other") is None


def test_the_same_owner_acquiring_its_own_unexpired_lease_is_refused(store: gts.SqliteLeaseStore) -> None:
    record = store.acquire("k", "a", 1000).record
    for owner in ("a", "b"):
        with pytest.raises(gts.LeaseHeldError) as caught:
            store.acquire("k", owner, 1000)
        assert caught.value.code == "GOTRY_TENANT_LEASE_HELD"
        assert caught.value.record == record
        assert "a" in str(caught.value) and "epoch 1" in str(caught.value)
    assert ops(store) == [("acquire", "a", 1)]


def test_acquire_exactly_at_expiry_succeeds(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    first = store.acquire("k", "a", 1000).record
    clock.set(first.lease_until_ms - 1)
    with pytest.raises(gts.LeaseHeldError):
        store.acquire("k", "b", 1000)
    clock.set(first.lease_until_ms)
    second = store.acquire("k", "b", 500).record
    assert (second.owner, second.epoch, second.lease_until_ms) == ("b", 2, first.lease_until_ms + 500)


def test_renew_keeps_the_epoch_and_extends_from_now(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    store.acquire("k", "a", 1000)
    clock.advance(600)
    grant = store.renew("k", "a", 1, 2000)
    assert grant.record == gts.LeaseRecord("k", "a", 1, START_MS + 2600, 0)
    assert grant.ttl_ms == 2000


def test_renew_after_expiry_is_lost(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    store.acquire("k", "a", 1000)
    clock.advance(1000)
    with pytest.raises(gts.LeaseLostError) as caught:
        store.renew("k", "a", 1, 1000)
    assert caught.value.code == "GOTRY_TENANT_LEASE_LOST"
    assert ops(store) == [("acquire", "a", 1)]


def test_renew_by_anyone_but_the_holder_is_lost(store: gts.SqliteLeaseStore) -> None:
    store.acquire("k", "a", 1000)
    with pytest.raises(gts.LeaseLostError):
        store.renew("k", "b", 1, 1000)
    with pytest.raises(gts.LeaseLostError):
        store.renew("k", "a", 2, 1000)
    with pytest.raises(gts.LeaseLostError):
        store.renew("never", "a", 1, 1000)


def test_holder_may_release_after_expiry_and_twice(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    store.acquire("k", "a", 1000)
    clock.advance(5000)
    released = store.release("k", "a", 1)
    # Expired already: the deadline stays where it was, the epoch stays.
    assert released == gts.LeaseRecord("k", "a", 1, START_MS + 1000, 0)
    assert store.release("k", "a", 1) == released
    assert ops(store) == [("acquire", "a", 1), ("release", "a", 1), ("release", "a", 1)]


def test_release_expires_at_once_and_the_next_owner_starts(
    store: gts.SqliteLeaseStore, clock: gts.ManualClock
) -> None:
    store.acquire("k", "a", 60_000)
    clock.advance(10)
    assert store.release("k", "a", 1).lease_until_ms == START_MS + 10
    assert store.acquire("k", "b", 1000).record.epoch == 2


def test_release_by_a_stale_holder_is_lost(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    store.acquire("k", "a", 1000)
    clock.advance(1000)
    store.acquire("k", "b", 1000)
    with pytest.raises(gts.LeaseLostError):
        store.release("k", "a", 1)
    record = store.read("k")
    assert record is not None and (record.owner, record.epoch) == ("b", 2)


def test_forgotten_floor_survives_the_next_acquire(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    store.acquire("k", "a", 1000)
    assert store.mark_forgotten("k", "a", 1).forgotten_at_epoch == 1
    clock.advance(1000)
    with pytest.raises(gts.LeaseLostError):
        store.mark_forgotten("k", "a", 1)
    second = store.acquire("k", "b", 1000).record
    assert (second.epoch, second.forgotten_at_epoch) == (2, 1)
    assert store.release("k", "b", 2).forgotten_at_epoch == 1
    assert ops(store) == [("acquire", "a", 1), ("forget", "a", 1), ("acquire", "b", 2), ("release", "b", 2)]


def test_renew_batch_answers_each_lease_on_its_own(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    store.acquire("k1", "a", 1000)
    store.acquire("k2", "a", 100)
    store.acquire("k3", "b", 1000)
    clock.advance(200)
    answers = store.renew_batch(
        "a", 2000, [("k1", 1), ("k2", 1), ("k3", 1), ("k1", 0), ("", 1), ("never", 1), ("k1", 1)]
    )
    assert [type(answer) for answer in answers] == [
        gts.LeaseGrant,
        gts.LeaseLostError,
        gts.LeaseLostError,
        ValueError,
        ValueError,
        gts.LeaseLostError,
        gts.LeaseGrant,
    ]
    assert answers[0] == gts.LeaseGrant(gts.LeaseRecord("k1", "a", 1, START_MS + 2200, 0), 2000)
    # Renewed twice in one transaction, both logged; nothing else was written.
    assert ops(store) == [("acquire", "a", 1)] * 2 + [("acquire", "b", 1)] + [("renew", "a", 1)] * 2
    assert store.renew_batch("a", 1000, []) == []


def test_renew_batch_refuses_a_bad_call_as_a_whole(tmp_path: Path, clock: gts.ManualClock) -> None:
    store = gts.SqliteLeaseStore(tmp_path / "leases.db", now_ms=clock)
    store.acquire("k1", "a", 1000)
    for owner, ttl, leases in [
        ("a", 99, [("k1", 1)]),
        ("a", True, [("k1", 1)]),
        ("", 1000, [("k1", 1)]),
        ("a", 1000, [(42, 1)]),
        ("a", 1000, [("k1", 1.0)]),
        ("a", 1000, [("k1", 2**64)]),
        ("a", 1000, [("k1",)]),
    ]:
        with pytest.raises(ValueError):
            store.renew_batch(owner, ttl, leases)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        store.renew_batch("a", 1000, 42)  # type: ignore[arg-type]
    assert ops(store) == [("acquire", "a", 1)]
    store.close()
    with pytest.raises(gts.LeaseStoreUnavailableError):
        store.renew_batch("a", 1000, [("k1", 1)])


def test_history_and_list(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    store.acquire("org-a/t1", "a", 1000)
    clock.advance(7)
    store.acquire("org-b/t1", "b", 1000)
    store.renew("org-a/t1", "a", 1, 1000)
    assert store.history("org-a/t1") == [
        gts.HistoryEntry("org-a/t1", "acquire", "a", 1, START_MS),
        gts.HistoryEntry("org-a/t1", "renew", "a", 1, START_MS + 7),
    ]
    assert [entry.key for entry in store.history()] == ["org-a/t1", "org-b/t1", "org-a/t1"]
    assert [record.key for record in store.list("org-a/")] == ["org-a/t1"]
    assert [record.key for record in store.list()] == ["org-a/t1", "org-b/t1"]
    assert store.now_ms() == START_MS + 7


def test_values_are_frozen_compare_by_value_and_print_readably() -> None:
    record = gts.LeaseRecord("acme/t-1", "replica-'a'", 3, 99, 2)
    same = gts.LeaseRecord("acme/t-1", "replica-'a'", 3, 99, 2)
    assert record == same and hash(record) == hash(same)
    assert record != gts.LeaseRecord("acme/t-1", "replica-'a'", 3, 99, 1)
    as_tuple: object = ("acme/t-1", "replica-'a'", 3, 99, 2)
    assert record != as_tuple
    assert len({record, same}) == 1
    assert repr(record) == (
        "LeaseRecord(key='acme/t-1', owner=\"replica-'a'\", epoch=3, lease_until_ms=99, forgotten_at_epoch=2)"
    )
    with pytest.raises(AttributeError):
        record.epoch = 4  # type: ignore[misc]
    grant = gts.LeaseGrant(record, 1000)
    assert repr(grant) == f"LeaseGrant(record={record!r}, ttl_ms=1000)"
    entry = gts.HistoryEntry("k", "forget", "o", 1, 5)
    assert repr(entry) == "HistoryEntry(key='k', op='forget', owner='o', epoch=1, at_ms=5)"
    with pytest.raises(ValueError):
        gts.HistoryEntry("k", "delete", "o", 1, 5)  # type: ignore[arg-type]
    for value in (record, grant, entry):
        copy = pickle.loads(pickle.dumps(value))
        assert copy == value and type(copy) is type(value) and repr(copy) == repr(value)
    match record:
        case gts.LeaseRecord(key, owner, epoch, until, floor):
            assert (key, owner, epoch, until, floor) == ("acme/t-1", "replica-'a'", 3, 99, 2)


def test_a_closed_store_is_unavailable(tmp_path: Path, clock: gts.ManualClock) -> None:
    store = gts.SqliteLeaseStore(tmp_path / "leases.db", now_ms=clock)
    store.acquire("k", "a", 1000)
    store.close()
    store.close()
    with pytest.raises(gts.LeaseStoreUnavailableError) as caught:
        store.read("k")
    assert caught.value.code == "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE"
    with pytest.raises(gts.LeaseStoreUnavailableError):
        store.acquire("k", "b", 1000)


def test_context_manager_closes_also_when_the_block_raises(tmp_path: Path) -> None:
    with gts.SqliteLeaseStore(tmp_path / "a.db") as store:
        store.acquire("k", "a", 1000)
    with pytest.raises(gts.LeaseStoreUnavailableError):
        store.read("k")
    with pytest.raises(KeyError):
        with gts.SqliteLeaseStore(tmp_path / "b.db") as other:
            raise KeyError("boom")
    with pytest.raises(gts.LeaseStoreUnavailableError):
        other.read("k")


def test_the_file_keeps_every_grant_across_opens(tmp_path: Path, clock: gts.ManualClock) -> None:
    path = tmp_path / "nested" / "folders" / "leases.db"
    with gts.SqliteLeaseStore(path, now_ms=clock) as store:
        store.acquire("k", "a", 1000)
        store.release("k", "a", 1)
    with gts.SqliteLeaseStore(path, now_ms=clock) as store:
        assert store.acquire("k", "b", 1000).record.epoch == 2
        assert ops(store) == [("acquire", "a", 1), ("release", "a", 1), ("acquire", "b", 2)]
        assert store.path == str(path)
        assert repr(store) == f"SqliteLeaseStore({str(path)!r})"


def test_the_file_has_the_reference_schema(tmp_path: Path) -> None:
    path = tmp_path / "leases.db"
    gts.SqliteLeaseStore(path).close()
    with sqlite3.connect(path) as connection:
        names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        columns = [row[1] for row in connection.execute("PRAGMA table_info(leases)")]
    assert {"leases", "lease_log", "leases_epoch_forward_only", "leases_never_deleted"} <= names
    assert columns == ["key", "owner", "epoch", "lease_until_ms", "forgotten_at_epoch"]


def test_a_file_that_is_not_sqlite_is_a_storage_error(tmp_path: Path) -> None:
    path = tmp_path / "not-a-db"
    path.write_bytes(b"this is not a database file, not even close " * 100)
    with pytest.raises(gts.TenantStateStorageError) as caught:
        gts.SqliteLeaseStore(path)
    assert caught.value.code == "SQLITE_NOTADB"
    assert not isinstance(caught.value, gts.TenantStateError)
    copy = pickle.loads(pickle.dumps(caught.value))
    assert (type(copy), copy.code, str(copy)) == (gts.TenantStateStorageError, "SQLITE_NOTADB", str(caught.value))


def test_open_lease_store_by_url(tmp_path: Path, clock: gts.ManualClock) -> None:
    path = tmp_path / "url.db"
    store = gts.open_lease_store(f"sqlite://{path}")
    assert isinstance(store, gts.LeaseStore)
    with store:
        store.acquire("k", "a", 60_000)
    with gts.SqliteLeaseStore(path) as same_file:
        with pytest.raises(gts.LeaseHeldError):
            same_file.acquire("k", "b", 1000)
    for bad in ("redis://x", "sqlite://", "no-scheme"):
        with pytest.raises(ValueError):
            gts.open_lease_store(bad)
    with pytest.raises(ValueError):
        gts.open_lease_store(42)  # type: ignore[arg-type]


def test_a_callable_store_clock(tmp_path: Path) -> None:
    readings = iter([5_000, 5_500, 7_000])
    with gts.SqliteLeaseStore(tmp_path / "leases.db", now_ms=lambda: next(readings)) as store:
        assert store.acquire("k", "a", 1000).record.lease_until_ms == 6_000
        assert store.renew("k", "a", 1, 1000).record.lease_until_ms == 6_500
        with pytest.raises(gts.LeaseLostError):
            store.renew("k", "a", 1, 1000)


def test_a_failing_store_clock_raises_its_own_exception_and_writes_nothing(tmp_path: Path) -> None:
    failure = ConnectionResetError("the time server went away")

    def broken() -> int:
        raise failure

    with gts.SqliteLeaseStore(tmp_path / "leases.db", now_ms=broken) as store:
        with pytest.raises(ConnectionResetError) as caught:
            store.acquire("k", "a", 1000)
        assert caught.value is failure
        assert store.history() == []
        assert store.read("k") is None


@pytest.mark.parametrize(
    ("reading", "error"),
    [(1.5, TypeError), (True, TypeError), (None, TypeError), ("5", TypeError), (2**63, ValueError)],
)
def test_a_store_clock_must_answer_integer_milliseconds(
    tmp_path: Path, reading: object, error: type[Exception]
) -> None:
    with gts.SqliteLeaseStore(tmp_path / "leases.db", now_ms=lambda: reading) as store:  # type: ignore[arg-type,return-value]
        with pytest.raises(error):
            store.acquire("k", "a", 1000)
        assert store.history() == []
