"""The tenant router through Python, on real SQLite lease stores and directory durable
stores: capacity, a held lease, handoff with its data, draining and its timeout, close,
strict and background copies, the GIL, events (and a raising handler), a ledger the host
keeps open, a router without threads ticked on a manual clock, a host clock that raises, the
interpreter's exit, and three processes moving tenants between them."""

from __future__ import annotations

import gc
import json
import pickle
import secrets
import sqlite3
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import gotry_tenant_state as gts
from conftest import LEDGER, Ticker, Unraisable, append_entry, write_lock_held

ORG = "acme"
TTL_MS = 3_000
MARGIN_MS = 500
HERE = Path(__file__).resolve().parent


def new_tenant() -> str:
    return "t-" + secrets.token_hex(16)


class Events:
    """An ``on_event`` that keeps what it was told, as (kind, key, epoch) and whole, and wakes
    whoever waits for an event."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.seen: list[gts.RouterEvent] = []

    def __call__(self, event: gts.RouterEvent) -> None:
        with self.lock:
            self.seen.append(event)
            self.lock.notify_all()

    def told(self) -> list[tuple[str, str, int]]:
        with self.lock:
            return [(e.kind, e.key, e.epoch) for e in self.seen]

    def until(self, told: tuple[str, str, int]) -> None:
        """Returns once ``told`` (kind, key, epoch) was told. The bound keeps a test that would
        hang from hanging; it is no time limit on the router."""
        with self.lock:
            came = self.lock.wait_for(lambda: told in [(e.kind, e.key, e.epoch) for e in self.seen], timeout=30)
        assert came, f"{told} was not told within 30 s"

    def until_many(self, kind: str, count: int) -> None:
        """Returns once ``count`` events of ``kind`` were told, within the same bound."""
        with self.lock:
            came = self.lock.wait_for(lambda: sum(e.kind == kind for e in self.seen) >= count, timeout=30)
        assert came, f"{count} {kind} events were not told within 30 s"


class Site:
    """One lease store and one durable store that replicas share, each replica with a state
    root of its own."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.leases_path = tmp_path / "leases.db"
        self.leases = gts.SqliteLeaseStore(self.leases_path)
        self.durable = gts.DirectoryDurableStore(tmp_path / "durable")
        self.routers: list[gts.TenantRouter] = []

    def router(self, replica: str, **options: Any) -> gts.TenantRouter:
        options.setdefault("capacity", 8)
        router = gts.TenantRouter(
            self.leases, self.durable, self.tmp_path / replica, replica, TTL_MS, MARGIN_MS, **options
        )
        self.routers.append(router)
        return router

    def root(self, replica: str, tenant: str) -> Path:
        return Path(gts.tenant_root_for(self.tmp_path / replica, ORG, tenant))

    def close(self) -> None:
        for router in self.routers:
            router.close(timeout_ms=0)
        self.leases.close()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    opened = Site(tmp_path)
    yield opened
    opened.close()


def append(text: str) -> Callable[[gts.TenantHandle], str]:
    """A call that appends `text` to the tenant's ledger, its connection closed again."""

    def call(handle: gts.TenantHandle) -> str:
        handle.lease.assert_held()
        append_entry(handle.root, text)
        return text

    return call


def entries(root: Path | str) -> list[str]:
    ledger = Path(root) / LEDGER
    if not ledger.exists():
        return []
    with closing(sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)) as db:
        return [row[0] for row in db.execute("SELECT text FROM entries ORDER BY rowid")]


class SlowCall:
    """A call that runs until the test lets it finish, on a thread of its own."""

    def __init__(self, router: gts.TenantRouter, key: str, text: str = "slow") -> None:
        self.inside = threading.Event()
        self.go = threading.Event()
        self.result: list[object] = []
        self._write = append(text)

        def call(handle: gts.TenantHandle) -> str:
            self.inside.set()
            assert self.go.wait(30)
            return self._write(handle)

        def run() -> None:
            try:
                self.result.append(router.run(key, call))
            except BaseException as error:  # noqa: BLE001 - kept for the test to look at
                self.result.append(error)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert self.inside.wait(10), "the slow call never started"

    def finish(self) -> object:
        self.go.set()
        self.thread.join(10)
        assert not self.thread.is_alive()
        return self.result[0]


def state_of(router: gts.TenantRouter, key: str) -> str | None:
    return next((s.state for s in router.status() if s.key == key), None)


# ---- open --------------------------------------------------------------------------------


def test_capacity_is_refused_before_anything_is_touched(site: Site) -> None:
    router = site.router("replica-a", capacity=1)
    assert router.capacity == 1
    first, second = new_tenant(), new_tenant()
    router.open(ORG, first)
    with pytest.raises(gts.ReplicaAtCapacityError) as caught:
        router.open(ORG, second)
    error = caught.value
    assert (error.code, error.limit) == ("GOTRY_TENANT_REPLICA_AT_CAPACITY", 1)
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.limit, str(copy)) == (gts.ReplicaAtCapacityError, 1, str(error))
    # No lease, no file, no copy, no status for the refused tenant.
    second_key = gts.lease_key_for(ORG, second)
    assert site.leases.read(second_key) is None
    assert site.leases.history(second_key) == []
    assert not site.root("replica-a", second).exists()
    assert gts.EpochCopies(site.durable).list(second_key) == []
    assert [s.key for s in router.status()] == [gts.lease_key_for(ORG, first)]
    # The default capacity follows the descriptor limit; zero serves nothing.
    assert site.router("replica-b", capacity=None).capacity >= 1
    with pytest.raises(ValueError, match="capacity"):
        site.router("replica-c", capacity=0)


def test_a_tenant_held_by_another_router_is_lease_held_with_its_owner(site: Site) -> None:
    a, b = site.router("replica-a"), site.router("replica-b")
    tenant = new_tenant()
    handle = a.open(ORG, tenant)
    assert (handle.key, handle.epoch, handle.restored_from) == (gts.lease_key_for(ORG, tenant), 1, None)
    assert handle.root == str(site.root("replica-a", tenant))
    with pytest.raises(gts.LeaseHeldError) as caught:
        b.open(ORG, tenant)
    record = caught.value.record
    assert (record.key, record.owner, record.epoch) == (handle.key, "replica-a", 1)
    assert pickle.loads(pickle.dumps(caught.value)).record == record
    assert not site.root("replica-b", tenant).exists()
    assert b.status() == []
    # Opening a served tenant again gives the same tenure's handle.
    again = a.open(ORG, tenant)
    assert again == handle and hash(again) == hash(handle)
    assert "epoch=1" in repr(handle) and "restored_from=None" in repr(handle)


def test_ids_are_checked_as_everywhere_else(site: Site) -> None:
    router = site.router("replica-a")
    with pytest.raises(gts.InvalidTenantIdError):
        router.open("Acme", new_tenant())
    with pytest.raises(gts.InvalidTenantIdError):
        router.open(ORG, "t-not-hex")
    with pytest.raises(gts.InvalidTenantIdError):
        router.open(ORG, 42)  # type: ignore[arg-type]
    assert router.status() == []


# ---- handoff and run ---------------------------------------------------------------------


def test_a_handoff_carries_the_data_to_the_other_replica(site: Site) -> None:
    events_a = Events()
    a, b = site.router("replica-a", on_event=events_a), site.router("replica-b")
    tenant = new_tenant()
    key = a.open(ORG, tenant).key
    assert a.run(key, append("one")) == "one"
    assert a.run(key, append("two")) == "two"
    (status,) = a.status()
    assert (status.key, status.state, status.epoch, status.in_flight) == (key, "serving", 1, 0)
    assert (status.writes_since_copy, status.last_copy, status.last_copy_error) == (2, None, None)
    assert status.lag_ms >= 0

    a.handoff(key)
    assert a.status() == []
    assert events_a.told() == [("draining", key, 1), ("closed", key, 1)]
    record = site.leases.read(key)
    assert record is not None and record.lease_until_ms <= site.leases.now_ms(), "released at once"
    with pytest.raises(gts.LeaseLostError):
        a.run(key, append("after"))

    handle = b.open(ORG, tenant)
    assert (handle.epoch, handle.restored_from) == (2, gts.CopyId(1, 1))
    assert entries(handle.root) == ["one", "two"]
    b.run(key, append("three"))
    assert b.status()[0].last_copy == gts.CopyId(1, 1)
    b.handoff(key, timeout_ms=1_000)
    handle = a.open(ORG, tenant)
    assert (handle.epoch, handle.restored_from) == (3, gts.CopyId(2, 1))
    assert entries(handle.root) == ["one", "two", "three"]


def test_run_returns_what_the_call_returns_and_lets_its_exception_through(site: Site) -> None:
    router = site.router("replica-a")
    key = router.open(ORG, new_tenant()).key
    assert router.run(key, lambda handle: (handle.key, handle.epoch)) == (key, 1)

    class CallBroke(Exception):
        pass

    raised = CallBroke("the call failed")

    def fail(handle: gts.TenantHandle) -> None:
        raise raised

    with pytest.raises(CallBroke) as caught:
        router.run(key, fail)
    assert caught.value is raised
    # The call ended: not in flight, not counted as a write to copy.
    (status,) = router.status()
    assert (status.in_flight, status.writes_since_copy, status.state) == (0, 1, "serving")
    with pytest.raises(TypeError, match="callable"):
        router.run(key, "not a call")  # type: ignore[arg-type]
    with pytest.raises(gts.LeaseLostError):
        router.run(gts.lease_key_for(ORG, new_tenant()), append("nobody serves it"))
    with pytest.raises(ValueError):
        router.run(42, append("x"))  # type: ignore[arg-type]


def test_a_call_whose_after_check_fails_is_fenced(site: Site) -> None:
    router = site.router("replica-a")
    key = router.open(ORG, new_tenant()).key

    def release_meanwhile(handle: gts.TenantHandle) -> str:
        handle.lease.release()
        return "effects that must not be acknowledged"

    # The handler ran: in doubt, not refused, with the closed gate as its cause.
    with pytest.raises(gts.CallInDoubtError) as caught:
        router.run(key, release_meanwhile)
    cause = caught.value.__cause__
    assert isinstance(cause, gts.FencedError)
    assert (caught.value.code, cause.reason) == ("GOTRY_TENANT_CALL_IN_DOUBT", "lease_released")
    with pytest.raises(gts.FencedError):
        router.run(key, append("later"))


def test_draining_refuses_new_calls_until_the_handoff_is_done(site: Site) -> None:
    events = Events()
    a = site.router("replica-a", on_event=events)
    tenant = new_tenant()
    key = a.open(ORG, tenant).key
    slow = SlowCall(a, key)
    handoff_errors: list[BaseException] = []

    def hand_off() -> None:
        try:
            a.handoff(key, timeout_ms=20_000)
        except BaseException as error:  # noqa: BLE001
            handoff_errors.append(error)

    handing = threading.Thread(target=hand_off)
    handing.start()
    events.until(("draining", key, 1))
    assert state_of(a, key) == "draining"
    with pytest.raises(gts.TenantDrainingError) as caught:
        a.run(key, append("refused"))
    assert caught.value.code == "GOTRY_TENANT_DRAINING"
    with pytest.raises(gts.TenantDrainingError):
        a.open(ORG, tenant)
    with pytest.raises(gts.TenantDrainingError):
        a.handoff(key)
    assert a.status()[0].in_flight == 1
    # The running call finishes and is acknowledged; then the handoff completes.
    assert slow.finish() == "slow"
    handing.join(20)
    assert not handing.is_alive() and handoff_errors == []
    assert a.status() == []
    handle = site.router("replica-b").open(ORG, tenant)
    assert entries(handle.root) == ["slow"]


def test_a_drain_timeout_leaves_the_tenant_serving(site: Site) -> None:
    a = site.router("replica-a")
    tenant = new_tenant()
    key = a.open(ORG, tenant).key
    slow = SlowCall(a, key)
    started = time.monotonic()
    with pytest.raises(gts.DrainTimeoutError) as caught:
        a.handoff(key, timeout_ms=150)
    assert time.monotonic() - started >= 0.14
    error = caught.value
    assert (error.code, error.in_flight, error.timeout_ms) == ("GOTRY_TENANT_DRAIN_TIMEOUT", 1, 150)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.in_flight, copy.timeout_ms) == (1, 150)
    (status,) = a.status()
    assert (status.state, status.in_flight) == ("serving", 1)
    # Serving: new calls run, nothing was copied or released.
    assert a.run(key, append("meanwhile")) == "meanwhile"
    assert gts.EpochCopies(site.durable).list(key) == []
    record = site.leases.read(key)
    assert record is not None and record.owner == "replica-a" and record.lease_until_ms > site.leases.now_ms()
    assert slow.finish() == "slow"
    a.handoff(key)
    assert entries(site.router("replica-b").open(ORG, tenant).root) == ["meanwhile", "slow"]
    with pytest.raises(ValueError, match="timeout_ms"):
        a.handoff(key, timeout_ms=-1)


# ---- close -------------------------------------------------------------------------------


def test_close_hands_every_tenant_off_and_then_refuses(site: Site) -> None:
    first, second = new_tenant(), new_tenant()
    with site.router("replica-a") as router:
        for tenant in (first, second):
            key = router.open(ORG, tenant).key
            router.run(key, append(f"in {tenant}"))
    with pytest.raises(gts.RouterClosedError) as caught:
        router.open(ORG, new_tenant())
    assert caught.value.code == "GOTRY_TENANT_ROUTER_CLOSED"
    assert pickle.loads(pickle.dumps(caught.value)).code == "GOTRY_TENANT_ROUTER_CLOSED"
    # Released, not left to run out: another replica serves both at once, with their data.
    b = site.router("replica-b")
    for tenant in (first, second):
        handle = b.open(ORG, tenant)
        assert (handle.epoch, entries(handle.root)) == (2, [f"in {tenant}"])

    report = b.close(timeout_ms=1_000)
    assert sorted(report.handed_off) == sorted(gts.lease_key_for(ORG, t) for t in (first, second))
    assert (report.timed_out, report.failed) == ([], [])
    assert report.keeper.failed == () and report.keeper.timed_out == ()
    assert "handed_off=[" in repr(report)
    again = b.close()
    assert (again.handed_off, again.timed_out, again.failed) == ([], [], [])
    with pytest.raises(gts.RouterClosedError):
        b.open(ORG, first)


def test_close_reports_a_tenant_whose_calls_outlast_the_timeout(site: Site) -> None:
    a = site.router("replica-a")
    key = a.open(ORG, new_tenant()).key
    slow = SlowCall(a, key)
    report = a.close(timeout_ms=100)
    assert (report.handed_off, report.timed_out, report.failed) == ([], [key], [])
    # The keeper then released the lease: the call still running cannot be acknowledged.
    assert report.keeper.released == (key,)
    # The slow call's own handler checks the gate, so its FencedError is the handler's own.
    result = slow.finish()
    assert isinstance(result, gts.FencedError)
    # The tenant whose drain timed out was closed, not serving, and left with its call.
    assert a.status() == []


def test_the_context_manager_reports_what_it_could_not_hand_off(site: Site) -> None:
    class BlockBroke(Exception):
        pass

    # A store closed under the router: the final copies succeed, the releases cannot.
    store = gts.SqliteLeaseStore(site.leases_path)
    with pytest.raises(BlockBroke) as raised:
        with gts.TenantRouter(store, site.durable, site.tmp_path / "a", "replica-a", TTL_MS, MARGIN_MS) as router:
            key = router.open(ORG, new_tenant()).key
            store.close()
            raise BlockBroke("the block failed")
    notes = getattr(raised.value, "__notes__", [])
    assert len(notes) == 1 and notes[0].startswith(f"handing {key} off on exit failed"), notes

    store = gts.SqliteLeaseStore(site.leases_path)
    with pytest.raises(ExceptionGroup) as group:
        with gts.TenantRouter(store, site.durable, site.tmp_path / "b", "replica-b", TTL_MS, MARGIN_MS) as router:
            key = router.open(ORG, new_tenant()).key
            store.close()
    assert "could not hand 1 of its tenants off" in str(group.value)
    (failure,) = group.value.exceptions
    assert failure.__notes__[0].startswith(f"handing {key} off on exit failed")

    # A clean exit with nothing to report raises nothing, and closes.
    with site.router("replica-c") as router:
        router.open(ORG, new_tenant())
    assert router.status() == []
    with pytest.raises(gts.RouterClosedError):
        router.open(ORG, new_tenant())


# ---- copies ------------------------------------------------------------------------------


@pytest.mark.parametrize(("keep_copies", "most"), [(2, 4), (0, 9)])
def test_keep_copies_bounds_the_copies_a_strict_router_keeps(
    site: Site, keep_copies: int, most: int
) -> None:
    router = site.router(f"replica-{keep_copies}", durability="strict", keep_copies=keep_copies)
    key = router.open(ORG, new_tenant()).key
    copies = gts.EpochCopies(site.durable)
    seen = []
    for n in range(9):
        router.run(key, append(f"row {n}"))
        seen.append(sum(1 for c in copies.list(key) if c.complete))
    # `keep_copies` after a collection, as many more until the next; every one with 0.
    if keep_copies == 0:
        assert max(seen) == most, seen
    else:
        assert keep_copies <= max(seen) <= most, seen


def test_keep_copies_is_a_count(site: Site) -> None:
    with pytest.raises(ValueError, match="keep_copies must not be negative"):
        site.router("replica-x", keep_copies=-1)
    with pytest.raises(ValueError, match="keep_copies must be an int"):
        site.router("replica-y", keep_copies="8")


def test_strict_durability_acknowledges_only_copied_calls(site: Site) -> None:
    events = Events()
    router = site.router("replica-a", durability="strict", on_event=events)
    tenant = new_tenant()
    key = router.open(ORG, tenant).key
    for seq, text in enumerate(["one", "two"], start=1):
        router.run(key, append(text))
        (status,) = router.status()
        assert (status.last_copy, status.writes_since_copy) == (gts.CopyId(1, seq), 0)
    assert [(c.epoch, c.seq, c.complete) for c in gts.EpochCopies(site.durable).list(key)] == [
        (1, 1, True),
        (1, 2, True),
    ]
    assert events.told() == [], "a strict call's copy is told by its answer, not by an event"
    # A durable store that fails refuses the acknowledgement; the tenant goes on serving.
    store_folder = Path(site.durable.path)
    (store_folder / "orgs").rename(store_folder / "orgs-away")
    (store_folder / "orgs").write_text("")
    with pytest.raises(gts.CallInDoubtError) as caught:
        router.run(key, append("not acknowledged"))
    cause = caught.value.__cause__
    assert isinstance(cause, gts.DurableStoreUnavailableError)
    assert cause.backend_code == "ENOTDIR"
    (status,) = router.status()
    assert status.state == "serving"
    assert status.last_copy_error is not None
    assert status.last_copy_error.startswith("GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE")
    (store_folder / "orgs").unlink()
    (store_folder / "orgs-away").rename(store_folder / "orgs")
    router.run(key, append("three"))
    (status,) = router.status()
    assert status.last_copy_error is None
    assert status.last_copy is not None and status.last_copy > gts.CopyId(1, 2)
    # Strict: a copy holds every acknowledged call even when the lease is simply lost.
    site.leases.release(key, "replica-a", 1)
    taken = gts.TenantLease.acquire(key=key, replica_id="auditor", store=site.leases, ttl_ms=TTL_MS, margin_ms=0)
    report = gts.EpochCopies(site.durable).restore(taken, site.root("auditor", tenant))
    assert report.restored == status.last_copy
    assert entries(site.root("auditor", tenant))[-1] == "three"
    with pytest.raises(ValueError, match="durability must be one of"):
        site.router("replica-x", durability="eventual")


def test_async_copies_run_in_the_background_and_report_failures(site: Site) -> None:
    events = Events()
    router = site.router("replica-a", copy_interval_ms=50, on_event=events)
    key = router.open(ORG, new_tenant()).key
    router.run(key, append("one"))
    events.until(("copied", key, 1))
    copied = next(e for e in events.seen if e.kind == "copied")
    assert (copied.seq, copied.error) == (1, None)
    assert copied.bytes_uploaded is not None and copied.bytes_uploaded > 0
    assert f"seq=1, bytes_uploaded={copied.bytes_uploaded}" in repr(copied)
    (status,) = router.status()
    assert (status.last_copy, status.writes_since_copy) == (gts.CopyId(1, 1), 0)

    store_folder = Path(site.durable.path)
    (store_folder / "orgs").rename(store_folder / "orgs-away")
    (store_folder / "orgs").write_text("")
    router.run(key, append("two"))  # acknowledged: the copy is the copier's business
    events.until(("copy_failed", key, 1))
    failed = next(e for e in events.seen if e.kind == "copy_failed")
    assert (failed.key, failed.epoch) == (key, 1)
    assert isinstance(failed.error, gts.DurableStoreUnavailableError)
    assert failed.error.backend_code == "ENOTDIR"
    assert (failed.seq, failed.bytes_uploaded) == (None, None)
    assert "copy_failed" in repr(failed)
    match failed:
        case gts.RouterEvent(kind, event_key, epoch, error):
            assert (kind, event_key, epoch, error) == ("copy_failed", key, 1, failed.error)
    (status,) = router.status()
    assert status.writes_since_copy == 1 and status.last_copy_error is not None
    (store_folder / "orgs").unlink()
    (store_folder / "orgs-away").rename(store_folder / "orgs")
    events.until_many("copied", 2)
    (status,) = router.status()
    assert (status.writes_since_copy, status.last_copy_error) == (0, None)
    second = [e for e in events.seen if e.kind == "copied"][1]
    assert second.seq is not None and second.seq > 1
    assert status.last_copy == gts.CopyId(1, second.seq)


def test_a_router_without_threads_copies_and_renews_only_when_ticked(tmp_path: Path) -> None:
    """The store's manual clock is the router's too: moving it moves every timing rule, and
    nothing happens but at a tick."""
    clock = gts.ManualClock(1_000_000)
    leases = gts.SqliteLeaseStore(tmp_path / "leases.db", now_ms=clock)
    durable = gts.DirectoryDurableStore(tmp_path / "durable")
    events = Events()
    router = gts.TenantRouter(
        leases, durable, tmp_path / "replica-a", "replica-a", TTL_MS, MARGIN_MS,
        copy_interval_ms=1_000, on_event=events, clock=clock, start_thread=False,
    )
    try:
        opened_at = clock.now_ms()
        key = router.open(ORG, new_tenant()).key
        router.run(key, append("one"))
        report = router.tick()
        assert (report.copied, report.failed, report.keeper.batches) == ([], [], 0)
        assert report.next_due_ms == opened_at + 1_000
        clock.advance(999)
        assert router.tick().copied == [], "a moment before the interval"
        clock.advance(1)
        report = router.tick()
        assert (report.copied, report.failed, report.keeper.renewed) == ([key], [], 1)
        assert "RouterTickReport(keeper=TickReport(" in repr(report)
        assert events.told() == [("copied", key, 1)], "told before the tick returned"
        (status,) = router.status()
        assert (status.writes_since_copy, status.lag_ms) == (0, 0)
        clock.advance(250)
        assert router.status()[0].lag_ms == 250, "lag on the router's clock"

        # No tick for a TTL: the lease runs out in the store, and the next tick finds it lost.
        clock.advance(TTL_MS + 1)
        assert events.told() == [("copied", key, 1)], "nothing happens between ticks"
        report = router.tick()
        assert (report.keeper.lost, report.next_due_ms) == (1, None)
        assert events.told() == [("copied", key, 1), ("lost", key, 1), ("closed", key, 1)]
        assert router.status() == []
        router.close()
        with pytest.raises(gts.RouterClosedError):
            router.tick()
    finally:
        router.close(timeout_ms=0)
        leases.close()


def test_a_host_clock_that_raises_fails_what_needs_a_reading_with_its_exception(site: Site) -> None:
    class Clock:
        broken = False

        def now_ms(self) -> float:
            if self.broken:
                raise RuntimeError("the host's clock broke")
            return time.monotonic() * 1000

    clock = Clock()
    router = site.router("replica-a", clock=clock, start_thread=False)
    key = router.open(ORG, new_tenant()).key
    clock.broken = True
    with pytest.raises(RuntimeError, match="the host's clock broke"):
        router.status()
    with pytest.raises(RuntimeError, match="the host's clock broke"):
        router.tick()
    with pytest.raises(RuntimeError, match="the host's clock broke"):
        router.handoff(key, timeout_ms=1_000)
    clock.broken = False
    assert [s.state for s in router.status()] == ["serving"], "nothing changed"


def test_a_ledger_the_host_keeps_open_is_copied_through_its_snapshot(site: Site) -> None:
    """The host keeps one sqlite3 connection per tenant open across calls (uncheckpointed
    WAL rows included) and closes it when the router says the tenant is closed."""
    connections: dict[str, sqlite3.Connection] = {}
    lock = threading.Lock()

    def on_event(event: gts.RouterEvent) -> None:
        if event.kind == "closed":
            with lock:
                connection = connections.pop(event.key, None)
            if connection is not None:
                connection.close()

    def write(text: str) -> Callable[[gts.TenantHandle], None]:
        def call(handle: gts.TenantHandle) -> None:
            with lock:
                db = connections.get(handle.key)
                if db is None:
                    ledger = Path(handle.root) / LEDGER
                    ledger.parent.mkdir(parents=True, exist_ok=True)
                    db = sqlite3.connect(ledger, isolation_level=None, check_same_thread=False)
                    db.execute("PRAGMA journal_mode = WAL")
                    db.execute("PRAGMA wal_autocheckpoint = 0")
                    db.execute("CREATE TABLE IF NOT EXISTS entries (text TEXT NOT NULL)")
                    connections[handle.key] = db
            db.execute("INSERT INTO entries (text) VALUES (?)", (text,))

        return call

    tenant = new_tenant()
    # Without a snapshot function, a strict call cannot be copied: refused, not corrupted.
    plain = site.router("replica-plain", durability="strict", on_event=on_event)
    key = plain.open(ORG, tenant).key
    with pytest.raises(gts.CallInDoubtError) as caught:
        plain.run(key, write("not copied"))
    assert isinstance(caught.value.__cause__, gts.OpenInProcessError)
    wal = site.root("replica-plain", tenant) / f"{LEDGER}-wal"
    assert wal.exists()
    with lock:
        connections.pop(key).close()
    plain.handoff(key)

    a = site.router("replica-a", durability="strict", snapshot=gts.sqlite3_snapshot, on_event=on_event)
    handle = a.open(ORG, tenant)
    assert entries(handle.root) == ["not copied"]
    a.run(handle.key, write("one"))
    a.run(handle.key, write("two"))
    wal = Path(handle.root) / f"{LEDGER}-wal"
    assert wal.exists() and wal.stat().st_size > 0
    assert a.status()[0].last_copy == gts.CopyId(2, 2)
    a.handoff(handle.key)
    with lock:
        assert handle.key not in connections, "closed on the 'closed' event"
    restored = site.router("replica-b").open(ORG, tenant)
    assert entries(restored.root) == ["not copied", "one", "two"]


def test_verify_refusing_every_copy_fails_the_open_and_frees_the_lease(site: Site) -> None:
    a = site.router("replica-a")
    tenant = new_tenant()
    key = a.open(ORG, tenant).key
    a.run(key, append("one"))
    a.handoff(key)
    seen: list[list[str]] = []

    def verify(path: str) -> bool:
        seen.append(entries(path))
        return False

    b = site.router("replica-b", verify=verify)
    with pytest.raises(gts.RestoreVerificationError) as caught:
        b.open(ORG, tenant)
    assert caught.value.skipped == [gts.SkippedCopy(1, 1, "fold")]
    assert seen == [["one"]]
    assert b.status() == []
    # Nothing was served: the next replica may try at once.
    assert entries(site.router("replica-c").open(ORG, tenant).root) == ["one"]
    with pytest.raises(TypeError, match="verify must be a callable"):
        site.router("replica-d", verify=True)


# ---- the GIL, events, collection, exit -------------------------------------------------------


def test_the_gil_is_released_while_open_and_handoff_wait_for_the_store(site: Site) -> None:
    router = site.router("replica-a")
    tenant = new_tenant()
    with Ticker() as ticker:
        with write_lock_held(site.leases_path, seconds=0.6) as holder:
            before = ticker.ticks
            handle = router.open(ORG, tenant)
            during_open = ticker.ticks - before
            opened_at = time.monotonic()
            released_at = holder.wait_released()
        assert opened_at >= released_at, "open waited for the other process's lock"
        router.run(handle.key, append("one"))
        with write_lock_held(site.leases_path, seconds=0.6) as holder:
            before = ticker.ticks
            router.handoff(handle.key)
            during_handoff = ticker.ticks - before
            handed_at = time.monotonic()
            released_at = holder.wait_released()
        assert handed_at >= released_at, "handoff waited for the other process's lock"
    assert during_open >= 10, f"the ticker ran {during_open} times during open"
    assert during_handoff >= 10, f"the ticker ran {during_handoff} times during handoff"


def test_a_stolen_lease_is_told_as_lost_then_closed(site: Site) -> None:
    events = Events()
    router = site.router("replica-a", on_event=events)
    handle = router.open(ORG, new_tenant())
    key = handle.key
    site.leases.release(key, "replica-a", 1)
    site.leases.acquire(key, "thief", 600_000)
    events.until(("lost", key, 1))
    events.until(("closed", key, 1))
    assert events.told() == [("lost", key, 1), ("closed", key, 1)]
    lost = events.seen[0]
    assert (lost.kind, lost.error) == ("lost", None)
    assert not handle.lease.is_held()
    assert router.status() == []
    with pytest.raises(gts.LeaseLostError):
        router.run(key, append("too late"))


def test_a_lost_tenant_with_a_call_running_is_fenced_and_closed_after_it(site: Site) -> None:
    events = Events()
    router = site.router("replica-a", on_event=events)
    key = router.open(ORG, new_tenant()).key
    slow = SlowCall(router, key)
    site.leases.release(key, "replica-a", 1)
    site.leases.acquire(key, "thief", 600_000)
    events.until(("lost", key, 1))
    assert state_of(router, key) == "lost"
    with pytest.raises(gts.FencedError) as caught:
        router.run(key, append("refused"))
    assert caught.value.reason == "lease_lost"
    assert ("closed", key, 1) not in events.told()
    assert isinstance(slow.finish(), gts.FencedError)
    events.until(("closed", key, 1))
    assert router.status() == []


def test_an_exception_in_on_event_goes_to_the_unraisable_hook(site: Site, unraisable: Unraisable) -> None:
    def fail(event: gts.RouterEvent) -> None:
        raise ValueError(f"handler bug on {event.kind} {event.key}")

    router = site.router("replica-a", on_event=fail)
    tenant = new_tenant()
    key = router.open(ORG, tenant).key
    router.run(key, append("one"))
    router.handoff(key)  # told on this thread
    site.router("replica-b").open(ORG, tenant)
    # ...and on the keeper's thread: a lease taken over.
    other = new_tenant()
    other_key = router.open(ORG, other).key
    site.leases.release(other_key, "replica-a", 1)
    site.leases.acquire(other_key, "thief", 600_000)
    unraisable.until(4)
    with unraisable.lock:
        assert unraisable.seen[:2] == [
            (ValueError, f"handler bug on draining {key}"),
            (ValueError, f"handler bug on closed {key}"),
        ]
        assert (ValueError, f"handler bug on lost {other_key}") in unraisable.seen
    # The router carries on.
    third = router.open(ORG, new_tenant())
    assert router.run(third.key, append("still serving")) == "still serving"
    # Closed while the hook is still ours: its handoff is told (and fails) too.
    assert router.close().handed_off == [third.key]
    with unraisable.lock:
        assert unraisable.seen[-2:] == [
            (ValueError, f"handler bug on draining {third.key}"),
            (ValueError, f"handler bug on closed {third.key}"),
        ]


def test_a_router_whose_callback_refers_back_to_it_is_collected(site: Site) -> None:
    holder: dict[str, object] = {}
    cyclic = gts.TenantRouter(
        site.leases,
        site.durable,
        site.tmp_path / "cycle",
        "replica-cycle",
        TTL_MS,
        MARGIN_MS,
        on_event=lambda event: holder,
    )
    holder["router"] = cyclic
    alive = weakref.ref(cyclic)
    del cyclic, holder
    gc.collect()
    assert alive() is None


_EXITING_CHILD = """
import sys
import gotry_tenant_state as gts
store = gts.SqliteLeaseStore(sys.argv[1])
router = gts.TenantRouter(store, gts.DirectoryDurableStore(sys.argv[2]), sys.argv[3], "replica-exit",
                          3000, 500, on_event=lambda event: print("event", event.kind, flush=True))
key = router.open("acme", sys.argv[4]).key
router.run(key, lambda handle: None)
print("exiting", flush=True)
"""


def test_a_router_alive_at_exit_is_closed_by_the_exit_hook(site: Site) -> None:
    tenant = new_tenant()
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            _EXITING_CHILD,
            str(site.leases_path),
            str(site.durable.path),
            str(site.tmp_path / "exit"),
            tenant,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == ["exiting", "event draining", "event closed"]
    key = gts.lease_key_for(ORG, tenant)
    assert site.leases.history(key)[-1].op == "release"
    assert [(c.epoch, c.seq) for c in gts.EpochCopies(site.durable).list(key)] == [(1, 1)]


def test_values_and_arguments(site: Site) -> None:
    router = site.router("replica-a", copy_interval_ms=60_000)
    assert (router.replica_id, router.ttl_ms, router.margin_ms) == ("replica-a", TTL_MS, MARGIN_MS)
    assert repr(router) == f"TenantRouter(replica_id='replica-a', ttl_ms={TTL_MS}, margin_ms={MARGIN_MS}, capacity=8)"
    key = router.open(ORG, new_tenant()).key
    (status,) = router.status()
    again = router.status()[0]
    # Two readings agree on everything but the lag, which moves between them.
    fields = ("key", "state", "epoch", "in_flight", "last_copy", "writes_since_copy", "last_copy_error")
    assert [getattr(status, f) for f in fields] == [getattr(again, f) for f in fields]
    assert status == status and (status.lag_ms == again.lag_ms) == (status == again)
    assert repr(status).startswith(f"TenantStatus(key='{key}', state='serving', epoch=1, in_flight=0")
    cases: list[tuple[dict[str, object], type[Exception]]] = [
        ({"copy_interval_ms": -1}, ValueError),
        ({"copy_interval_ms": 1.5}, ValueError),
        ({"capacity": True}, ValueError),
        ({"durability": 1}, ValueError),
        ({"on_event": 42}, TypeError),
        ({"snapshot": "yes"}, TypeError),
    ]
    for bad, error in cases:
        with pytest.raises(error):
            site.router("replica-bad", **bad)
    with pytest.raises(ValueError):
        gts.TenantRouter(site.leases, site.durable, site.tmp_path / "x", "replica-x", True, MARGIN_MS)
    with pytest.raises(ValueError):
        gts.TenantRouter(site.leases, site.durable, site.tmp_path / "x", "replica-x", 50, MARGIN_MS)
    with pytest.raises(TypeError):
        gts.TenantRouter("sqlite:leases.db", site.durable, site.tmp_path / "x", "r", TTL_MS, MARGIN_MS)  # type: ignore[arg-type]


# ---- three processes -----------------------------------------------------------------------

WORKERS = 3
TENANTS = 3
WORK_SECONDS = 6.0


def test_three_processes_move_tenants_by_handoff_without_overlap_or_loss(tmp_path: Path) -> None:
    """Three replicas in three processes open random tenants, write to them and hand them
    off, for a few seconds. Every call records its epoch and when it ran (monotonic time is
    one clock for every process here): calls of different tenures never overlap, tenures
    follow each other in epoch order, each restores the one before it, and the ledger that
    a fourth replica finally restores holds every acknowledged write in order."""
    leases, durable = tmp_path / "leases.db", tmp_path / "durable"
    gts.SqliteLeaseStore(leases).close()
    gts.DirectoryDurableStore(durable)
    tenants = [new_tenant() for _ in range(TENANTS)]
    logs = [tmp_path / f"worker-{n}.jsonl" for n in range(WORKERS)]
    started = time.monotonic()
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "router_worker.py"),
                str(leases),
                str(durable),
                str(tmp_path / f"replica-{n}"),
                f"replica-{n}",
                ",".join(tenants),
                str(WORK_SECONDS),
                str(logs[n]),
                str(n),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(WORKERS)
    ]
    for worker in workers:
        try:
            _, err = worker.communicate(timeout=25)
        except subprocess.TimeoutExpired:
            for other in workers:
                other.kill()
            pytest.fail("a worker did not finish in time")
        assert worker.returncode == 0, err
    records = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
    calls = [r for r in records if r["what"] == "call"]
    tenures = [r for r in records if r["what"] == "open"]
    auditor_store = gts.SqliteLeaseStore(leases)
    auditor = gts.TenantRouter(
        auditor_store, gts.DirectoryDurableStore(durable), tmp_path / "auditor", "auditor", TTL_MS, MARGIN_MS
    )

    for tenant in tenants:
        key = gts.lease_key_for(ORG, tenant)
        mine = sorted((c for c in calls if c["key"] == key), key=lambda c: c["start"])
        opened = sorted((t for t in tenures if t["key"] == key), key=lambda t: t["epoch"])
        # Tenures: epochs 1..n, each restored from the one before (every tenure copied).
        assert [t["epoch"] for t in opened] == list(range(1, len(opened) + 1))
        assert opened[0]["restored_from"] is None
        assert all(t["restored_from"][0] == t["epoch"] - 1 for t in opened[1:]), opened
        assert len({t["replica"] for t in opened}) >= 2, f"{key} never moved"
        # No two tenures at once: every call of a later epoch starts after every call of
        # the earlier ones ended.
        latest_end: dict[int, float] = {}
        for call in mine:
            earlier = [end for epoch, end in latest_end.items() if epoch < call["epoch"]]
            later = [epoch for epoch in latest_end if epoch > call["epoch"]]
            assert not later, f"a call of epoch {call['epoch']} ran after epoch {later} had begun"
            assert all(end <= call["start"] for end in earlier), f"{key}: tenures overlapped at {call}"
            latest_end[call["epoch"]] = max(latest_end.get(call["epoch"], 0.0), call["end"])
        # Nothing acknowledged was lost, and the order is the order the calls ran in.
        handle = auditor.open(ORG, tenant)
        assert handle.epoch == len(opened) + 1
        assert entries(handle.root) == [c["row"] for c in mine]
    auditor.close()
    auditor_store.close()
    elapsed = time.monotonic() - started
    # A move: a tenure that another replica than the one before it served.
    moves = 0
    for tenant in tenants:
        key = gts.lease_key_for(ORG, tenant)
        owners = [t["replica"] for t in sorted((t for t in tenures if t["key"] == key), key=lambda t: t["epoch"])]
        moves += sum(1 for before, after in zip(owners, owners[1:]) if before != after)
    print(f"{len(tenures)} tenures, {moves} moves between replicas, {len(calls)} acknowledged calls, {elapsed:.1f} s")
    assert elapsed < 30
    assert moves >= 3 * TENANTS, f"only {moves} moves between replicas"
