"""The holder's side: the fence, the write gate, renewals and releases, and the context manager."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import gotry_tenant_state as gts
from conftest import START_MS


def hold(
    store: gts.LeaseStore, clock: gts.ManualClock, *, replica: str = "a", ttl_ms: int = 1000, margin_ms: int = 100
) -> gts.TenantLease:
    return gts.TenantLease.acquire(
        key="acme/t-1", replica_id=replica, store=store, ttl_ms=ttl_ms, margin_ms=margin_ms, clock=clock
    )


def fence_reason(lease: gts.TenantLease) -> str:
    with pytest.raises(gts.FencedError) as caught:
        lease.assert_held()
    assert caught.value.code == "GOTRY_TENANT_FENCED"
    assert not lease.is_held()
    return caught.value.reason


def test_a_fresh_lease(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    lease = hold(store, clock)
    assert (lease.key, lease.replica_id, lease.epoch, lease.forgotten_at_epoch) == ("acme/t-1", "a", 1, 0)
    assert (lease.ttl_ms, lease.margin_ms) == (1000, 100)
    lease.assert_held()
    assert lease.is_held()
    assert lease.remaining_ms() == 900.0
    assert repr(lease) == "TenantLease(key='acme/t-1', replica_id='a', epoch=1, held=True)"


def test_the_fence_is_ttl_minus_margin_from_before_the_request(
    store: gts.SqliteLeaseStore, clock: gts.ManualClock
) -> None:
    lease = hold(store, clock)
    clock.advance(899)
    lease.assert_held()
    clock.advance(1)
    assert fence_reason(lease) == "lease_expired_locally"
    assert lease.remaining_ms() == 0.0
    # The store still has it for another 100 ms: only the holder stopped early.
    record = store.read("acme/t-1")
    assert record is not None and record.lease_until_ms == START_MS + 1000


def test_a_renewal_after_the_local_fence_makes_the_lease_held_again(
    store: gts.SqliteLeaseStore, clock: gts.ManualClock
) -> None:
    lease = hold(store, clock)
    clock.advance(950)
    assert fence_reason(lease) == "lease_expired_locally"
    lease.renew()
    lease.assert_held()
    assert lease.remaining_ms() == 900.0
    record = store.read("acme/t-1")
    assert record is not None and record.lease_until_ms == START_MS + 950 + 1000


def test_a_refused_renewal_is_terminal(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    lease = hold(store, clock)
    clock.advance(1000)
    with pytest.raises(gts.LeaseLostError):
        lease.renew()
    assert fence_reason(lease) == "lease_lost"
    with pytest.raises(gts.FencedError) as caught:
        lease.renew()
    assert caught.value.reason == "lease_lost"
    lease.release()
    assert [entry.op for entry in store.history()] == ["acquire"]


def test_renew_release_renew_settle_in_call_order(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    lease = hold(store, clock)
    lease.renew()
    lease.release()
    with pytest.raises(gts.FencedError) as caught:
        lease.renew()
    assert caught.value.reason == "lease_released"
    assert fence_reason(lease) == "lease_released"
    assert [entry.op for entry in store.history()] == ["acquire", "renew", "release"]


def test_release_lets_the_next_holder_in_at_once(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    first = hold(store, clock, replica="a")
    with pytest.raises(gts.LeaseHeldError) as caught:
        hold(store, clock, replica="b")
    assert caught.value.record.owner == "a"
    first.release()
    first.release()
    second = hold(store, clock, replica="b")
    assert second.epoch == 2
    assert fence_reason(first) == "lease_released"


def test_a_stale_holder_releases_quietly(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    first = hold(store, clock, replica="a")
    clock.advance(1000)
    second = hold(store, clock, replica="b")
    first.release()
    assert second.is_held()
    record = store.read("acme/t-1")
    assert record is not None and (record.owner, record.epoch) == ("b", 2)


def test_a_grant_consumed_by_the_round_trip_is_handed_back_and_lost(tmp_path: Path) -> None:
    holder_clock = gts.ManualClock(0)
    wall = gts.ManualClock(START_MS)

    def slow_store_clock() -> int:
        # The holder's clock jumps past the whole grant while the store decides.
        holder_clock.advance(5_000)
        return wall.now_ms()

    with gts.SqliteLeaseStore(tmp_path / "leases.db", now_ms=slow_store_clock) as store:
        with pytest.raises(gts.LeaseLostError, match="round trip"):
            hold(store, holder_clock)
        record = store.read("acme/t-1")
        assert record is not None and record.lease_until_ms <= wall.now_ms()
        assert [entry.op for entry in store.history()] == ["acquire", "release"]


def test_an_unavailable_store_leaves_the_deadline_as_it_was(tmp_path: Path, clock: gts.ManualClock) -> None:
    failing = False

    def store_clock() -> int:
        if failing:
            raise TimeoutError("the store's clock could not be read")
        return clock.now_ms()

    with gts.SqliteLeaseStore(tmp_path / "leases.db", now_ms=store_clock) as store:
        lease = hold(store, clock)
        clock.advance(300)
        failing = True
        with pytest.raises(TimeoutError):
            lease.renew()
        assert lease.remaining_ms() == 600.0
        lease.assert_held()
        failing = False
        lease.renew()
        assert lease.remaining_ms() == 900.0


def test_a_closed_store_fails_renewal_but_not_the_holder(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    lease = hold(store, clock)
    store.close()
    with pytest.raises(gts.LeaseStoreUnavailableError):
        lease.renew()
    lease.assert_held()
    clock.advance(900)
    assert fence_reason(lease) == "lease_expired_locally"
    with pytest.raises(gts.LeaseStoreUnavailableError):
        lease.release()
    assert fence_reason(lease) == "lease_released"


def test_mark_forgotten_needs_a_held_lease(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    lease = hold(store, clock)
    record = lease.mark_forgotten()
    assert record.forgotten_at_epoch == 1
    # Fixed for the whole tenure: the holder raised the floor itself.
    assert lease.forgotten_at_epoch == 0
    clock.advance(900)
    with pytest.raises(gts.FencedError):
        lease.mark_forgotten()
    clock.advance(100)
    assert hold(store, clock, replica="b").forgotten_at_epoch == 1


def test_context_manager_releases_on_exit(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    with hold(store, clock) as lease:
        lease.assert_held()
    assert fence_reason(lease) == "lease_released"
    assert hold(store, clock, replica="b").epoch == 2


def test_context_manager_releases_when_the_block_raises(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    with pytest.raises(RuntimeError, match="write failed"):
        with hold(store, clock) as lease:
            raise RuntimeError("write failed")
    assert fence_reason(lease) == "lease_released"
    assert [entry.op for entry in store.history()] == ["acquire", "release"]


def test_a_failed_release_on_exit(store: gts.SqliteLeaseStore, clock: gts.ManualClock) -> None:
    # The block raised: its exception goes on and says that the release failed too.
    with pytest.raises(RuntimeError, match="write failed") as caught:
        with hold(store, clock):
            store.close()
            raise RuntimeError("write failed")
    notes = getattr(caught.value, "__notes__", [])
    assert len(notes) == 1 and "releasing the lease acme/t-1" in notes[0] and "closed" in notes[0]


def test_a_failed_release_on_a_clean_exit_is_raised(tmp_path: Path, clock: gts.ManualClock) -> None:
    store = gts.SqliteLeaseStore(tmp_path / "leases.db", now_ms=clock)
    with pytest.raises(gts.LeaseStoreUnavailableError):
        with hold(store, clock):
            store.close()


class ScriptedClock:
    """A holder's clock written in Python, as a host would pass one."""

    def __init__(self) -> None:
        self.now = 0.0
        self.failure: Exception | None = None

    def now_ms(self) -> float:
        if self.failure is not None:
            raise self.failure
        return self.now


def test_a_python_holder_clock(store: gts.SqliteLeaseStore) -> None:
    clock = ScriptedClock()
    lease = gts.TenantLease.acquire(key="k", replica_id="a", store=store, ttl_ms=1000, margin_ms=0, clock=clock)
    clock.now = 999.5
    assert lease.remaining_ms() == 0.5
    lease.assert_held()
    clock.now = 1000.0
    with pytest.raises(gts.FencedError):
        lease.assert_held()
    clock.now = 10.0
    clock.failure = OSError("clock device gone")
    with pytest.raises(OSError) as caught:
        lease.assert_held()
    assert caught.value is clock.failure
    assert not lease.is_held()


@pytest.mark.parametrize(
    ("reading", "error"),
    [
        (math.nan, gts.FencedError),
        (math.inf, gts.FencedError),
        (-math.inf, gts.FencedError),
        (True, TypeError),
        ("1", TypeError),
    ],
)
def test_a_holder_clock_must_answer_finite_numbers(
    store: gts.SqliteLeaseStore, reading: object, error: type[Exception]
) -> None:
    clock = ScriptedClock()
    lease = gts.TenantLease.acquire(key="k", replica_id="a", store=store, ttl_ms=1000, margin_ms=0, clock=clock)
    clock.now = reading  # type: ignore[assignment]
    with pytest.raises(error):
        lease.assert_held()
    # A NaN must never open the gate, and no reading that is no point in time renews.
    assert not lease.is_held()
    if isinstance(reading, float):
        with pytest.raises(ValueError):
            lease.renew()


def test_a_holder_clock_failing_at_acquire_hands_the_grant_back(store: gts.SqliteLeaseStore) -> None:
    class FailsOnSecondReading:
        readings = 0

        def now_ms(self) -> float:
            self.readings += 1
            if self.readings > 1:
                raise ArithmeticError("second reading")
            return 0.0

    with pytest.raises(ArithmeticError):
        gts.TenantLease.acquire(
            key="k", replica_id="a", store=store, ttl_ms=1000, margin_ms=0, clock=FailsOnSecondReading()
        )
    assert [entry.op for entry in store.history()] == ["acquire", "release"]


def test_a_lease_on_a_store_opened_by_url(tmp_path: Path) -> None:
    with gts.open_lease_store(f"sqlite:{tmp_path}/url.db") as store:
        with gts.TenantLease.acquire(key="k", replica_id="a", store=store, ttl_ms=60_000, margin_ms=1000) as lease:
            lease.assert_held()
            assert 0 < lease.remaining_ms() <= 59_000
            lease.renew()
        assert [entry.op for entry in store.history()] == ["acquire", "renew", "release"]
