"""The overhead of a router call, as ratios to the same call made directly, in one run on
one machine. Printed, not asserted.

- ``router.run(key, fn)`` (enter the call without the GIL, ``fn(handle)`` with it, finish
  without it) against ``fn(handle)`` called directly, for an empty ``fn``: the router's own
  cost per call, and that cost in microseconds.
- The same for an ``fn`` that does what a call of a tenant does at the least: one committed
  row through a ``sqlite3`` connection kept open (WAL, ``synchronous=NORMAL``).
- Four threads calling ``run`` at once against four threads calling ``fn`` directly (the GIL
  is let go and taken back twice per routed call).

Async durability with an interval of an hour, so no copy runs meanwhile. Run:
``python bench/router.py [--quick]`` after ``pip install ./bindings-python`` (a release build).
"""

from __future__ import annotations

import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import gotry_tenant_state as gts

ORG = "acme"
TENANT = "t-" + "0" * 32
THREADS = 4


def per_call_us(call: Callable[[], object], calls: int, rounds: int) -> float:
    """The median of `rounds` runs of `calls` calls, in microseconds per call."""
    call()
    results = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        results.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(results)


def threaded_per_call_us(call: Callable[[], object], calls: int, rounds: int) -> float:
    """`THREADS` threads making `calls` calls each; wall-clock microseconds per call."""
    results = []
    for _ in range(rounds):
        barrier = threading.Barrier(THREADS + 1)

        def work() -> None:
            barrier.wait()
            for _ in range(calls):
                call()

        threads = [threading.Thread(target=work) for _ in range(THREADS)]
        for thread in threads:
            thread.start()
        barrier.wait()
        start = time.perf_counter()
        for thread in threads:
            thread.join()
        results.append((time.perf_counter() - start) / (calls * THREADS) * 1e6)
    return statistics.median(results)


def line(name: str, direct_us: float, routed_us: float) -> None:
    print(
        f"  {name:<34} direct {direct_us:8.2f} us   routed {routed_us:8.2f} us   "
        f"ratio {routed_us / direct_us:7.2f}   overhead {routed_us - direct_us:6.2f} us"
    )


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    calls, rounds = (2_000, 3) if quick else (20_000, 5)
    with tempfile.TemporaryDirectory(prefix="gotry-bench-router-") as folder:
        base = Path(folder)
        store = gts.SqliteLeaseStore(base / "leases.db")
        router = gts.TenantRouter(
            store,
            gts.DirectoryDurableStore(base / "durable"),
            base / "state",
            "bench",
            60_000,
            5_000,
            copy_interval_ms=3_600_000,
        )
        handle = router.open(ORG, TENANT)
        key = handle.key
        sink = [0]

        def empty(h: gts.TenantHandle) -> None:
            sink[0] += 1

        ledger = Path(handle.root) / "gotry-state" / "gotry-state.db"
        ledger.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(ledger, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("CREATE TABLE entries (text TEXT NOT NULL)")
        db_lock = threading.Lock()

        def one_row(h: gts.TenantHandle) -> None:
            with db_lock:
                db.execute("INSERT INTO entries (text) VALUES ('x')")

        print(f"router.run overhead: {calls} calls a round, median of {rounds} rounds")
        line(
            "empty fn",
            per_call_us(lambda: empty(handle), calls, rounds),
            per_call_us(lambda: router.run(key, empty), calls, rounds),
        )
        line(
            "one sqlite3 row (WAL, NORMAL)",
            per_call_us(lambda: one_row(handle), calls, rounds),
            per_call_us(lambda: router.run(key, one_row), calls, rounds),
        )
        threaded_calls = max(calls // THREADS, 1)
        line(
            f"empty fn, {THREADS} threads",
            threaded_per_call_us(lambda: empty(handle), threaded_calls, rounds),
            threaded_per_call_us(lambda: router.run(key, empty), threaded_calls, rounds),
        )
        db.close()
        router.close()
        store.close()


if __name__ == "__main__":
    main()
