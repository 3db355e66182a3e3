"""The keeper on its own thread, in real time: short TTLs (600 ms, renewed every 200 ms, so a
thread the machine holds back for 300 ms still renews in time) and generous waits for
conditions, never a bound on how long something may take.

What cannot be checked in-process is checked in a child interpreter: a keeper that held the
GIL while waiting for its callback would freeze the whole process, test runner included, so
those runs are children that the test waits for and kills if they never finish (a deadlock
detector with a bound far beyond any machine's slowness, not a timing rule).
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gotry_tenant_state as gts
from conftest import Unraisable, wait_for

TTL_MS, MARGIN_MS = 600, 100
# How long a condition may take before the test gives up on it: many renewal intervals on a
# loaded machine. Reaching it fails the test; being fast never does.
PATIENCE_S = 60.0
# A child that has not finished by then is deadlocked.
DEADLOCK_S = 120.0


def renewals(store: gts.LeaseStore, key: str) -> int:
    return sum(1 for entry in store.history(key) if entry.op == "renew")


def take_over(store: gts.LeaseStore, key: str, epoch: int) -> None:
    store.release(key, "replica-a", epoch)
    store.acquire(key, "replica-b", 600_000)


class Told:
    """An ``on_event`` that keeps each event with the thread it was told on."""

    def __init__(self, then: Callable[[gts.KeeperEvent], None] | None = None) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[gts.KeeperEvent, int]] = []
        self.then = then

    def __call__(self, event: gts.KeeperEvent) -> None:
        with self.lock:
            self.events.append((event, threading.get_ident()))
        if self.then is not None:
            self.then(event)

    def lost(self, key: str) -> list[tuple[gts.KeeperEvent, int]]:
        with self.lock:
            return [(event, thread) for event, thread in self.events if (event.kind, event.key) == ("lost", key)]

    def any_lost(self) -> bool:
        with self.lock:
            return any(event.kind == "lost" for event, _ in self.events)


def start(store: gts.LeaseStore, on_event: Any = None) -> gts.LeaseKeeper:
    return gts.LeaseKeeper(store=store, replica_id="replica-a", ttl_ms=TTL_MS, margin_ms=MARGIN_MS, on_event=on_event)


def test_the_thread_renews_every_lease_at_its_epoch(tmp_path: Path) -> None:
    with gts.SqliteLeaseStore(tmp_path / "leases.db") as store:
        told = Told()
        keeper = start(store, told)
        leases = [keeper.acquire(key) for key in ("a", "b", "c")]
        first_until = {key: store.read(key).lease_until_ms for key in "abc"}  # type: ignore[union-attr]
        wait_for(
            "three renewals of every lease", lambda: all(renewals(store, key) >= 3 for key in "abc"), PATIENCE_S
        )
        for key in "abc":
            record = store.read(key)
            assert record is not None and (record.owner, record.epoch) == ("replica-a", 1)
            assert record.lease_until_ms > first_until[key]
        assert not told.any_lost()
        report = keeper.shutdown()
        assert report.released == ("a", "b", "c")
        assert [lease.is_held() for lease in leases] == [False] * 3
        assert all(store.history(key)[-1].op == "release" for key in "abc")


def test_a_lease_taken_over_is_told_lost_on_the_keeper_s_thread(tmp_path: Path) -> None:
    with gts.SqliteLeaseStore(tmp_path / "leases.db") as store:
        told = Told()
        with start(store, told) as keeper:
            lease = keeper.acquire("k")
            other = keeper.acquire("other")
            take_over(store, "k", lease.epoch)
            wait_for("the loss to be told", lambda: bool(told.lost("k")), PATIENCE_S)
            ((event, thread),) = told.lost("k")
            assert (event.kind, event.key, event.epoch) == ("lost", "k", 1)
            assert isinstance(event.error, gts.LeaseLostError)
            assert thread != threading.get_ident()
            with pytest.raises(gts.FencedError) as caught:
                lease.assert_held()
            assert caught.value.reason == "lease_lost"
            assert keeper.get("k") is None
            renewed = renewals(store, "other")
            wait_for("the other lease to be renewed on", lambda: renewals(store, "other") > renewed, PATIENCE_S)
            assert keeper.get("other") is not None and other.epoch == 1
        assert store.history("k")[-1].owner == "replica-b"


def test_a_raising_callback_does_not_stop_the_keeper(tmp_path: Path, unraisable: Unraisable) -> None:
    def fail(event: gts.KeeperEvent) -> None:
        raise ValueError(f"callback bug on {event.kind} {event.key}")

    with gts.SqliteLeaseStore(tmp_path / "leases.db") as store:
        told = Told(then=fail)
        with start(store, told) as keeper:
            first, second = keeper.acquire("first"), keeper.acquire("second")
            keeper.acquire("survivor")
            take_over(store, "first", first.epoch)
            wait_for("the first loss", lambda: bool(told.lost("first")), PATIENCE_S)
            take_over(store, "second", second.epoch)
            wait_for("the second loss", lambda: bool(told.lost("second")), PATIENCE_S)
            renewed = renewals(store, "survivor")
            wait_for("the survivor to be renewed on", lambda: renewals(store, "survivor") > renewed, PATIENCE_S)
    with unraisable.lock:
        lost = [entry for entry in unraisable.seen if entry[1].startswith("callback bug on lost")]
    assert lost == [(ValueError, "callback bug on lost first"), (ValueError, "callback bug on lost second")]


# Each scenario runs in a child interpreter and prints what it saw; see the module docs.
# The callback is held until the main thread is about to shut down, drop the keeper, or exit
# (an atexit handler registered after the module's own runs before it), then sleeps, letting
# go of the GIL, which it needs back to return: the main thread is waiting for it by then.
_CHILD = """
import atexit, sys, threading, time
import gotry_tenant_state as gts

scenario, path = sys.argv[1], sys.argv[2]
store = gts.SqliteLeaseStore(path)
entered, go, finished = threading.Event(), threading.Event(), threading.Event()
atexit.register(go.set)

def slow(event):
    if event.kind != "lost":
        return
    entered.set()
    go.wait()
    time.sleep(0.2)
    finished.set()
    print("callback finished", flush=True)

keeper = gts.LeaseKeeper(store=store, replica_id="replica-a", ttl_ms=300, margin_ms=50, on_event=slow)
lease = keeper.acquire("k")
keeper.acquire("kept")
store.release("k", "replica-a", lease.epoch)
store.acquire("k", "replica-b", 600_000)
assert entered.wait(60), "the loss was never told"
if scenario != "exit":
    go.set()
if scenario == "shutdown":
    keeper.shutdown()
    print("shutdown returned; callback had finished:", finished.is_set(), flush=True)
elif scenario == "drop":
    del keeper
    print("drop returned; callback had finished:", finished.is_set(), flush=True)
elif scenario == "exit":
    print("exiting", flush=True)
"""


def run_child(scenario: str, path: Path) -> list[str]:
    with subprocess.Popen(
        [sys.executable, "-c", _CHILD, scenario, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            out, err = child.communicate(timeout=DEADLOCK_S)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
            pytest.fail(f"the {scenario} scenario deadlocked; it printed {out!r}")
    assert child.returncode == 0, f"the child failed ({child.returncode}): {err}"
    return out.splitlines()


@pytest.mark.parametrize("scenario", ["shutdown", "drop"])
def test_shutdown_and_drop_wait_for_a_running_callback_without_the_gil(tmp_path: Path, scenario: str) -> None:
    lines = run_child(scenario, tmp_path / "leases.db")
    assert lines == ["callback finished", f"{scenario} returned; callback had finished: True"]
    with gts.SqliteLeaseStore(tmp_path / "leases.db") as store:
        released = "release" in [entry.op for entry in store.history("kept")]
    # Shut down: handed back. Dropped: left to run out.
    assert released == (scenario == "shutdown")


def test_exiting_without_shutdown_waits_for_the_callback_and_releases(tmp_path: Path) -> None:
    lines = run_child("exit", tmp_path / "leases.db")
    assert lines == ["exiting", "callback finished"]
    with gts.SqliteLeaseStore(tmp_path / "leases.db") as store:
        assert store.history("kept")[-1].op == "release"
        record = store.read("kept")
        assert record is not None and record.lease_until_ms <= store.now_ms()
