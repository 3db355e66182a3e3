"""The lease keeper's rules, played with a manual clock and rounds run by ``tick()``: when a
lease is renewed, which leases share a round and a batch, how the fence moves, what is told
to ``on_event`` (and what happens when it raises), removal, shutdown and the context manager.

Every keeper here renews at a quarter of an 800 ms TTL with a 100 ms margin: a lease is due
200 ms after its last renewal was sent, a round takes whatever falls due within the next
100 ms, a failed round is retried 50 ms later, and a fence is 700 ms after a renewal was sent.
"""

from __future__ import annotations

import gc
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gotry_tenant_state as gts
from conftest import START_MS

TTL_MS, MARGIN_MS, FRACTION = 800, 100, 0.25
INTERVAL_MS = 200
USABLE_MS = TTL_MS - MARGIN_MS


class Recorder:
    """An ``on_event`` that keeps what it is told."""

    def __init__(self) -> None:
        self.events: list[gts.KeeperEvent] = []

    def __call__(self, event: gts.KeeperEvent) -> None:
        self.events.append(event)

    def take(self) -> list[tuple[str, str | None, int | None]]:
        taken: list[tuple[str, str | None, int | None]] = [
            (event.kind, event.key, event.epoch) for event in self.events
        ]
        self.events.clear()
        return taken


class Outage:
    """A store clock that fails while the store is down, as an unreachable store would: every
    store call reads it, so each call fails with the exception raised here."""

    def __init__(self, clock: gts.ManualClock) -> None:
        self.clock = clock
        self.down = False
        self.raised: list[ConnectionError] = []

    def __call__(self) -> int:
        if self.down:
            self.raised.append(ConnectionError(f"the store is down (call {len(self.raised) + 1})"))
            raise self.raised[-1]
        return self.clock.now_ms()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def outage(clock: gts.ManualClock) -> Outage:
    return Outage(clock)


@pytest.fixture
def flaky_store(tmp_path: Path, outage: Outage) -> Iterator[gts.SqliteLeaseStore]:
    with gts.SqliteLeaseStore(tmp_path / "flaky.db", now_ms=outage) as opened:
        yield opened


def keeper_on(
    store: gts.LeaseStore, clock: gts.ManualClock, on_event: Any = None, max_batch: int | None = None
) -> gts.LeaseKeeper:
    return gts.LeaseKeeper(
        store=store,
        replica_id="replica-a",
        ttl_ms=TTL_MS,
        margin_ms=MARGIN_MS,
        renew_fraction=FRACTION,
        max_batch=max_batch,
        on_event=on_event,
        clock=clock,
        start_thread=False,
    )


def counts(report: gts.TickReport) -> tuple[int, int, int, int, float | None]:
    return (report.batches, report.renewed, report.lost, report.failed, report.next_due_ms)


def fence_reason(lease: gts.TenantLease) -> str:
    with pytest.raises(gts.FencedError) as caught:
        lease.assert_held()
    return caught.value.reason


def ops(store: gts.LeaseStore, key: str) -> list[tuple[str, str, int]]:
    return [(entry.op, entry.owner, entry.epoch) for entry in store.history(key)]


def take_over(store: gts.LeaseStore, key: str, epoch: int) -> None:
    """Another replica gets the tenant: the holder's row is released behind the keeper's
    back and replica-b acquires the next epoch."""
    store.release(key, "replica-a", epoch)
    assert store.acquire(key, "replica-b", 60_000).record.epoch == epoch + 1


def test_a_lease_is_renewed_when_due_and_not_before(
    store: gts.SqliteLeaseStore, clock: gts.ManualClock, recorder: Recorder
) -> None:
    keeper = keeper_on(store, clock, recorder)
    lease = keeper.acquire("acme/t-1")
    assert (lease.key, lease.replica_id, lease.epoch, lease.ttl_ms, lease.margin_ms) == (
        "acme/t-1",
        "replica-a",
        1,
        TTL_MS,
        MARGIN_MS,
    )
    assert len(keeper) == 1
    assert counts(keeper.tick()) == (0, 0, 0, 0, START_MS + INTERVAL_MS)
    clock.advance(INTERVAL_MS - 1)
    assert counts(keeper.tick()) == (0, 0, 0, 0, START_MS + INTERVAL_MS)
    assert ops(store, "acme/t-1") == [("acquire", "replica-a", 1)]
    clock.advance(1)
    assert counts(keeper.tick()) == (1, 1, 0, 0, START_MS + 2 * INTERVAL_MS)
    # The fence counts from the clock reading taken before the batch was sent.
    assert lease.remaining_ms() == USABLE_MS
    record = store.read("acme/t-1")
    assert record is not None and record.lease_until_ms == START_MS + INTERVAL_MS + TTL_MS
    assert ops(store, "acme/t-1") == [("acquire", "replica-a", 1), ("renew", "replica-a", 1)]
    assert recorder.events == []


def test_a_round_takes_every_lease_due_within_half_an_interval_in_batches(
    store: gts.SqliteLeaseStore, clock: gts.ManualClock
) -> None:
    keeper = keeper_on(store, clock, max_batch=2)
    keeper.acquire("k1")
    clock.advance(60)
    keeper.acquire("k2")
    keeper.acquire("k3")
    clock.advance(90)
    keeper.acquire("k4")
    clock.set(START_MS + INTERVAL_MS)
    # k2 and k3 fall due 60 ms later, within half an interval: they come along, in a second
    # batch of max_batch=2. k4 falls due 150 ms later and waits for its own round.
    assert counts(keeper.tick()) == (2, 3, 0, 0, START_MS + 150 + INTERVAL_MS)
    renewals = {key: [op for op, _, _ in ops(store, key)].count("renew") for key in ("k1", "k2", "k3", "k4")}
    assert renewals == {"k1": 1, "k2": 1, "k3": 1, "k4": 0}
    # Renewed together, the three now share their schedule.
    # k4's round takes the other three along (due 50 ms later), again two to a batch.
    clock.set(START_MS + 150 + INTERVAL_MS)
    assert counts(keeper.tick()) == (2, 4, 0, 0, START_MS + 150 + 2 * INTERVAL_MS)


def test_a_lease_taken_over_is_lost_once_and_the_rest_of_the_batch_is_renewed(
    store: gts.SqliteLeaseStore, clock: gts.ManualClock, recorder: Recorder
) -> None:
    keeper = keeper_on(store, clock, recorder)
    taken = keeper.acquire("taken")
    kept = keeper.acquire("kept")
    take_over(store, "taken", taken.epoch)
    clock.advance(INTERVAL_MS)
    assert counts(keeper.tick()) == (1, 1, 1, 0, START_MS + 2 * INTERVAL_MS)
    (event,) = recorder.events
    assert (event.kind, event.key, event.epoch, event.leases) == ("lost", "taken", 1, None)
    assert isinstance(event.error, gts.LeaseLostError)
    assert event.error.code == "GOTRY_TENANT_LEASE_LOST"
    # By the time the event is told, the gate is closed and the keeper let go of the key.
    assert fence_reason(taken) == "lease_lost"
    assert keeper.get("taken") is None
    assert len(keeper) == 1
    kept.assert_held()
    recorder.events.clear()
    clock.advance(INTERVAL_MS)
    assert counts(keeper.tick()) == (1, 1, 0, 0, START_MS + 3 * INTERVAL_MS)
    assert recorder.events == []
    assert ops(store, "taken")[-1] == ("acquire", "replica-b", 2)


def test_through_an_outage_the_keeper_retries_tells_the_fence_once_and_resumes(
    flaky_store: gts.SqliteLeaseStore, clock: gts.ManualClock, outage: Outage, recorder: Recorder
) -> None:
    keeper = keeper_on(flaky_store, clock, recorder)
    lease = keeper.acquire("acme/t-1")
    outage.down = True
    clock.advance(INTERVAL_MS)
    # The failure leaves the fence where it was and retries a quarter interval later.
    assert counts(keeper.tick()) == (1, 0, 0, 1, START_MS + INTERVAL_MS + 50)
    (failed,) = recorder.events
    assert (failed.kind, failed.key, failed.epoch, failed.leases) == ("renew_failed", None, None, 1)
    # The store's failure is the very exception its clock raised.
    assert failed.error is outage.raised[-1]
    assert lease.remaining_ms() == USABLE_MS - INTERVAL_MS
    recorder.events.clear()
    clock.set(START_MS + USABLE_MS - 40)
    # The next retry is due 50 ms later, but the fence comes first: the keeper wakes there
    # to tell it.
    assert counts(keeper.tick()) == (1, 0, 0, 1, START_MS + USABLE_MS)
    assert recorder.take() == [("renew_failed", None, None)]
    clock.set(START_MS + USABLE_MS)
    assert counts(keeper.tick()) == (0, 0, 0, 0, START_MS + USABLE_MS + 10)
    assert recorder.take() == [("fenced_locally", "acme/t-1", 1)]
    assert fence_reason(lease) == "lease_expired_locally"
    clock.advance(10)
    keeper.tick()
    # Told once: only the retry's failure this time.
    assert recorder.take() == [("renew_failed", None, None)]
    outage.down = False
    clock.advance(50)
    assert counts(keeper.tick()) == (1, 1, 0, 0, START_MS + USABLE_MS + 60 + INTERVAL_MS)
    # The store still had the lease (it runs to START + 800): same epoch, gate open again.
    assert recorder.take() == [("resumed", "acme/t-1", 1)]
    lease.assert_held()
    assert lease.remaining_ms() == USABLE_MS
    assert ops(flaky_store, "acme/t-1") == [("acquire", "replica-a", 1), ("renew", "replica-a", 1)]


def test_a_lease_that_ran_out_during_the_outage_is_lost_for_good(
    flaky_store: gts.SqliteLeaseStore, clock: gts.ManualClock, outage: Outage, recorder: Recorder
) -> None:
    keeper = keeper_on(flaky_store, clock, recorder)
    lease = keeper.acquire("acme/t-1")
    outage.down = True
    clock.advance(INTERVAL_MS)
    keeper.tick()
    clock.set(START_MS + TTL_MS)
    keeper.tick()
    outage.down = False
    clock.advance(50)
    keeper.tick()
    assert recorder.take() == [
        ("renew_failed", None, None),
        ("fenced_locally", "acme/t-1", 1),
        ("renew_failed", None, None),
        ("lost", "acme/t-1", 1),
    ]
    assert fence_reason(lease) == "lease_lost"
    assert len(keeper) == 0


def test_an_exception_in_on_event_is_unraisable_and_the_keeper_carries_on(
    store: gts.SqliteLeaseStore, clock: gts.ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    told: list[str] = []

    def on_event(event: gts.KeeperEvent) -> None:
        told.append(str(event.key))
        raise RuntimeError(f"the host's bug, told about {event.key}")

    keeper = keeper_on(store, clock, on_event)
    first, second = keeper.acquire("first"), keeper.acquire("second")
    survivor = keeper.acquire("survivor")
    take_over(store, "first", first.epoch)
    take_over(store, "second", second.epoch)
    clock.advance(INTERVAL_MS)
    assert counts(keeper.tick())[:4] == (1, 1, 2, 0)
    # Both events were told although the first one raised (in either order: the two leases
    # fell due together)...
    assert sorted(told) == ["first", "second"]
    assert [str(hook.exc_value) for hook in unraisable] == [f"the host's bug, told about {key}" for key in told]
    assert all(hook.exc_type is RuntimeError and hook.object is on_event for hook in unraisable)
    # ...and the keeper goes on renewing.
    clock.advance(INTERVAL_MS)
    assert counts(keeper.tick())[:4] == (1, 1, 0, 0)
    survivor.assert_held()
    assert [op for op, _, _ in ops(store, "survivor")] == ["acquire", "renew", "renew"]


def test_on_event_cannot_run_a_round_of_its_own_keeper(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    refused: list[BaseException] = []
    keeper: gts.LeaseKeeper | None = None

    def on_event(_: gts.KeeperEvent) -> None:
        assert keeper is not None
        try:
            keeper.tick()
        except ValueError as error:
            refused.append(error)

    keeper = keeper_on(store, clock, on_event)
    lease = keeper.acquire("k")
    take_over(store, "k", lease.epoch)
    clock.advance(INTERVAL_MS)
    assert keeper.tick().lost == 1
    assert len(refused) == 1 and "own event handler" in str(refused[0])


def test_remove_releases_and_forgets_the_key(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    keeper = keeper_on(store, clock)
    lease = keeper.acquire("k")
    assert keeper.remove("k") is True
    assert fence_reason(lease) == "lease_released"
    assert keeper.get("k") is None and len(keeper) == 0
    assert [op for op, _, _ in ops(store, "k")] == ["acquire", "release"]
    assert keeper.remove("k") is False
    assert keeper.remove("never kept") is False
    clock.advance(INTERVAL_MS)
    assert counts(keeper.tick()) == (0, 0, 0, 0, None)


def test_get_hands_out_the_kept_lease_itself(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    keeper = keeper_on(store, clock)
    lease = keeper.acquire("k")
    again = keeper.get("k")
    assert again is not None and (again.key, again.epoch) == ("k", 1)
    # One gate behind both handles: closing one closes the other.
    again.release()
    assert fence_reason(lease) == "lease_released"


def test_a_lease_closed_through_its_handle_leaves_at_the_next_round_without_an_event(
    store: gts.SqliteLeaseStore, clock: gts.ManualClock, recorder: Recorder
) -> None:
    keeper = keeper_on(store, clock, recorder)
    with keeper.acquire("k") as lease:
        lease.assert_held()
    assert len(keeper) == 1
    clock.advance(INTERVAL_MS)
    assert counts(keeper.tick()) == (0, 0, 0, 0, None)
    assert len(keeper) == 0 and recorder.events == []
    assert [op for op, _, _ in ops(store, "k")] == ["acquire", "release"]


def test_a_held_key_is_refused_and_not_kept(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    store.acquire("k", "replica-b", 60_000)
    keeper = keeper_on(store, clock)
    with pytest.raises(gts.LeaseHeldError) as caught:
        keeper.acquire("k")
    assert (caught.value.record.owner, caught.value.record.epoch) == ("replica-b", 1)
    assert len(keeper) == 0 and keeper.get("k") is None


def test_shutdown_releases_every_kept_lease(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    keeper = keeper_on(store, clock)
    leases = [keeper.acquire(key) for key in ("c", "a", "b")]
    report = keeper.shutdown()
    assert (report.released, report.failed, report.timed_out) == (("a", "b", "c"), (), ())
    assert [fence_reason(lease) for lease in leases] == ["lease_released"] * 3
    for key in ("a", "b", "c"):
        record = store.read(key)
        assert record is not None and record.lease_until_ms <= clock.now_ms()
    assert len(keeper) == 0
    again = keeper.shutdown()
    assert (again.released, again.failed, again.timed_out) == ((), (), ())
    with pytest.raises(gts.LeaseStoreUnavailableError):
        keeper.acquire("d")
    with pytest.raises(gts.LeaseStoreUnavailableError):
        keeper.tick()
    assert store.read("d") is None


def test_shutdown_reports_releases_that_failed_and_leases_it_did_not_reach(
    flaky_store: gts.SqliteLeaseStore, clock: gts.ManualClock, outage: Outage, tmp_path: Path
) -> None:
    keeper = keeper_on(flaky_store, clock)
    lease = keeper.acquire("k")
    outage.down = True
    report = keeper.shutdown()
    assert (report.released, report.timed_out) == ((), ())
    ((key, error),) = report.failed
    assert key == "k" and error is outage.raised[-1]
    # The gate closed before the store was asked.
    assert fence_reason(lease) == "lease_released"

    outage.down = False
    late = keeper_on(flaky_store, clock)
    unreached = late.acquire("u")
    report = late.shutdown(timeout_ms=0)
    assert (report.released, report.failed, report.timed_out) == ((), (), ("u",))
    # Not released: its gate closes at its fence and the store lets it run out.
    unreached.assert_held()
    assert [op for op, _, _ in ops(flaky_store, "u")] == ["acquire"]
    clock.advance(USABLE_MS)
    assert fence_reason(unreached) == "lease_expired_locally"


def test_the_context_manager_shuts_down(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    with keeper_on(store, clock) as keeper:
        lease = keeper.acquire("k")
    assert fence_reason(lease) == "lease_released"
    assert [op for op, _, _ in ops(store, "k")] == ["acquire", "release"]
    with pytest.raises(gts.LeaseStoreUnavailableError):
        keeper.acquire("k")


def test_failed_releases_on_exit_are_raised_after_a_clean_block(
    flaky_store: gts.SqliteLeaseStore, clock: gts.ManualClock, outage: Outage
) -> None:
    with pytest.raises(ExceptionGroup) as caught:
        with keeper_on(flaky_store, clock) as keeper:
            keeper.acquire("a")
            keeper.acquire("b")
            outage.down = True
    assert "could not release 2" in str(caught.value)
    # The two leases went to the store in one batch, which failed (call 1); each was then
    # tried on its own, and each lease carries the exception of its own call.
    assert list(caught.value.exceptions) == outage.raised[1:]
    notes = [error.__notes__ for error in caught.value.exceptions]
    assert notes == [
        ["releasing the kept lease a on exit failed; it runs out at its TTL"],
        ["releasing the kept lease b on exit failed; it runs out at its TTL"],
    ]


def test_failed_releases_on_exit_are_noted_on_the_block_s_own_exception(
    flaky_store: gts.SqliteLeaseStore, clock: gts.ManualClock, outage: Outage
) -> None:
    with pytest.raises(KeyError) as caught:
        with keeper_on(flaky_store, clock) as keeper:
            keeper.acquire("a")
            outage.down = True
            raise KeyError("the block's own failure")
    assert caught.value.__notes__ == [
        "releasing the kept lease a on exit failed; it runs out at its TTL: the store is down (call 1)"
    ]


def test_events_and_reports_are_frozen_and_readable(
    store: gts.SqliteLeaseStore, clock: gts.ManualClock, recorder: Recorder
) -> None:
    keeper = keeper_on(store, clock, recorder)
    lease = keeper.acquire("k")
    take_over(store, "k", lease.epoch)
    clock.advance(INTERVAL_MS)
    report = keeper.tick()
    assert repr(report) == "TickReport(batches=1, renewed=0, lost=1, failed=0, next_due_ms=None)"
    (event,) = recorder.events
    assert repr(event) == f"KeeperEvent(kind='lost', key='k', epoch=1, error={event.error!r})"
    match event:
        case gts.KeeperEvent("lost", "k", 1, gts.LeaseLostError()):
            pass
        case _:
            pytest.fail(f"the event does not match its fields: {event!r}")
    for target, name in ((event, "kind"), (event, "error"), (report, "lost")):
        with pytest.raises(AttributeError):
            setattr(target, name, None)
    with pytest.raises(TypeError):
        gts.KeeperEvent()
    assert repr(keeper) == "LeaseKeeper(replica_id='replica-a', ttl_ms=800, margin_ms=100, leases=0)"
    assert (keeper.replica_id, keeper.ttl_ms, keeper.margin_ms) == ("replica-a", TTL_MS, MARGIN_MS)
    shutdown = keeper.shutdown()
    assert repr(shutdown) == "ShutdownReport(released=(), failed=(), timed_out=())"


def test_the_defaults_are_the_core_s(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    assert gts.LeaseKeeper.DEFAULT_RENEW_FRACTION == 1 / 3
    assert gts.LeaseKeeper.DEFAULT_MAX_BATCH == 1000
    keeper = gts.LeaseKeeper(
        store=store, replica_id="a", ttl_ms=900, margin_ms=0, clock=clock, start_thread=False
    )
    keeper.acquire("k")
    assert keeper.tick().next_due_ms == START_MS + 900 * gts.LeaseKeeper.DEFAULT_RENEW_FRACTION


def test_a_keeper_in_a_cycle_with_its_callback_is_collected(
    store: gts.SqliteLeaseStore, clock: gts.ManualClock
) -> None:
    class Replica:
        def __init__(self) -> None:
            self.keeper = keeper_on(store, clock, self.on_event)

        def on_event(self, event: gts.KeeperEvent) -> None:
            pass

    replica = Replica()
    lease = replica.keeper.acquire("k")
    collected = weakref.ref(replica.keeper)
    del replica
    gc.collect()
    assert collected() is None
    # Dropped, not shut down: nothing released, the lease simply is not renewed any more.
    assert [op for op, _, _ in ops(store, "k")] == ["acquire"]
    lease.assert_held()


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"ttl_ms": 99}, ValueError),
        ({"ttl_ms": 800.0}, ValueError),
        ({"margin_ms": 800}, ValueError),
        ({"margin_ms": True}, ValueError),
        ({"replica_id": b"replica-a"}, ValueError),
        ({"replica_id": ""}, ValueError),
        ({"replica_id": "r\ud800"}, ValueError),
        ({"renew_fraction": float("nan")}, ValueError),
        ({"renew_fraction": 0.0}, ValueError),
        ({"renew_fraction": 0.9}, ValueError),
        ({"renew_fraction": True}, ValueError),
        ({"renew_fraction": "0.25"}, ValueError),
        ({"max_batch": 0}, ValueError),
        ({"max_batch": -1}, ValueError),
        ({"max_batch": 2.0}, ValueError),
        ({"max_batch": 2**64}, ValueError),
        ({"on_event": 42}, TypeError),
        ({"clock": object()}, TypeError),
        ({"store": "sqlite:leases.db"}, TypeError),
        ({"start_thread": 1}, TypeError),
    ],
)
def test_bad_options_are_refused(
    store: gts.SqliteLeaseStore, clock: gts.ManualClock, options: dict[str, Any], error: type[Exception]
) -> None:
    arguments: dict[str, Any] = {
        "store": store,
        "replica_id": "replica-a",
        "ttl_ms": TTL_MS,
        "margin_ms": MARGIN_MS,
        "renew_fraction": FRACTION,
        "clock": clock,
        "start_thread": False,
    }
    with pytest.raises(error):
        gts.LeaseKeeper(**(arguments | options))


def test_bad_call_arguments_are_refused(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    keeper = keeper_on(store, clock)
    for bad_key in (1, b"k", "", "x" * 201, "\udc00"):
        with pytest.raises(ValueError):
            keeper.acquire(bad_key)  # type: ignore[arg-type]
    # Looking up or removing a key that could never be kept is no error, but a key that is
    # not text at all is.
    for bad_key in (1, b"k", "\udc00"):
        for call in (keeper.remove, keeper.get):
            with pytest.raises(ValueError):
                call(bad_key)  # type: ignore[arg-type]
    assert keeper.get("x" * 201) is None and keeper.remove("") is False
    for bad_timeout in (-1, 1.5, True, "10"):
        with pytest.raises(ValueError):
            keeper.shutdown(bad_timeout)  # type: ignore[arg-type]
    # 200 UTF-16 units fit, counted as JavaScript counts them.
    assert keeper.acquire("\U0001f600" * 100).key == "\U0001f600" * 100
    assert store.read("\U0001f600" * 100) is not None
