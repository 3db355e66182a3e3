"""Each lease store operation through the module, one at a time (the GIL let go around each
call), against one 4 KiB append and ``fdatasync`` of the same disk measured in the same rounds:
what a Python tool that calls the store in a loop waits per call, as a ratio to the disk's own
flush. Printed, not asserted. Run: ``python bench/latency.py [--quick]`` after
``pip install ./bindings-python`` (a release build).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import gotry_tenant_state as gts

KEY = "acme/t-" + "0" * 32


def per_call_us(call: Callable[[int], object], calls: int) -> float:
    start = time.perf_counter()
    for n in range(calls):
        call(n)
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    quick = "--quick" in sys.argv
    calls, rounds = (50, 3) if quick else (300, 5)
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as folder:
        store = gts.SqliteLeaseStore(Path(folder) / "leases.db")
        flushed = os.open(Path(folder) / "flushed", os.O_WRONLY | os.O_CREAT, 0o644)
        block = b"x" * 4096

        def flush(n: int) -> None:
            os.pwrite(flushed, block, (n % 64) * 4096)
            os.fdatasync(flushed)

        grant = store.acquire(KEY, "bench", 60_000)
        epoch = grant.record.epoch
        state = {"epoch": epoch}

        def renew(_: int) -> None:
            store.renew(KEY, "bench", state["epoch"], 60_000)

        def cycle(_: int) -> None:
            store.release(KEY, "bench", state["epoch"])
            state["epoch"] = store.acquire(KEY, "bench", 60_000).record.epoch

        figures: dict[str, list[float]] = {"fdatasync": [], "read": [], "renew": [], "release+acquire": []}
        for _ in range(rounds):
            figures["fdatasync"].append(per_call_us(flush, calls))
            figures["read"].append(per_call_us(lambda _: store.read(KEY), calls))
            figures["renew"].append(per_call_us(renew, calls))
            figures["release+acquire"].append(per_call_us(cycle, calls))
        os.close(flushed)
        median = {name: statistics.median(values) for name, values in figures.items()}
        print(f"lease store from Python, one call at a time (median of {rounds} rounds of {calls})")
        for name, us in median.items():
            ratio = "" if name in ("fdatasync", "read") else f"   {us / median['fdatasync']:.2f} x fdatasync"
            per = " (two operations)" if name == "release+acquire" else ""
            print(f"  {name:<16} {us:9.1f} us{per}{ratio}")


if __name__ == "__main__":
    main()
