"""How fast the module derives ids and runs store operations, as ratios to baselines
measured in the same run on the same machine.

- derive_ledger_tenant_id against the standard library's hmac doing the same derivation in
  Python, with the same claim checks (and, for reference, without any checks). Target: the
  module at least 3 times as fast.
- OrganizationKey (HMAC state computed once) against a precomputed stdlib hmac object copied
  per derivation, the fastest way to do it in Python.
- Durable store operations (acquire, renew, release on a file) per second, against this
  disk's bound for one durable write: a 4 KiB write + fdatasync loop in the same folder.
- A LeaseKeeper's round through the module (tick() with 1, 100 and 1,000 due leases), per
  lease, against one TenantLease.renew() on the same file. The core's target for 1,000 leases
  a round is at most 1/50 of a single renew.

Run: ``python bench/bench_ids.py [--quick]``.
"""

from __future__ import annotations

import hmac
import os
import sys
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path

import gotry_tenant_state as gts

KEY = b"0123456789abcdef0123456789abcdef"
ISSUER = "https://idp.example"
SUBJECT = "user-1234567890"


def _claim(name: str, value: str) -> bytes:
    if not isinstance(value, str) or not value or "\0" in value:
        raise ValueError(f"{name} must be a non-empty str without NUL")
    encoded = value.encode()  # strict: a lone surrogate raises
    if len(encoded) > 512:
        raise ValueError(f"{name} is longer than 512 bytes")
    return encoded


def stdlib_checked(key: bytes, issuer: str, subject: str) -> str:
    if len(key) < 32:
        raise ValueError("short key")
    message = _claim("issuer", issuer) + b"\0" + _claim("subject", subject)
    return "t-" + hmac.new(key, message, "sha256").hexdigest()[:32]


def stdlib_bare(key: bytes, issuer: str, subject: str) -> str:
    return "t-" + hmac.new(key, issuer.encode() + b"\0" + subject.encode(), "sha256").hexdigest()[:32]


_PRECOMPUTED = hmac.new(KEY, digestmod="sha256")


def stdlib_precomputed(issuer: str, subject: str) -> str:
    mac = _PRECOMPUTED.copy()
    mac.update(_claim("issuer", issuer) + b"\0" + _claim("subject", subject))
    return "t-" + mac.hexdigest()[:32]


def per_call_ns(call: Callable[[], object], number: int) -> float:
    """The best of five runs of `number` calls, in nanoseconds per call."""
    return min(timeit.repeat(call, number=number, repeat=5)) / number * 1e9


def fdatasync_ns(folder: Path, writes: int) -> float:
    path = folder / "fdatasync-probe"
    block = os.urandom(4096)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:

        def one_write() -> None:
            os.pwrite(fd, block, 0)
            os.fdatasync(fd)

        one_write()
        return per_call_ns(one_write, writes)
    finally:
        os.close(fd)
        path.unlink()


def store_op_ns(folder: Path, cycles: int) -> float:
    """Nanoseconds per operation over acquire, renew, release cycles on one key."""
    with gts.SqliteLeaseStore(folder / "bench.db") as store:
        epoch = [0]

        def cycle() -> None:
            epoch[0] = store.acquire("bench/t-1", "replica", 60_000).record.epoch
            store.renew("bench/t-1", "replica", epoch[0], 60_000)
            store.release("bench/t-1", "replica", epoch[0])

        cycle()
        return per_call_ns(cycle, cycles) / 3


def keeper_per_lease_ns(folder: Path, leases: int, rounds: int) -> float:
    """Nanoseconds per lease of a round that renews `leases` leases; the keeper's clock is
    moved by hand so that every round finds all of them due."""
    clock = gts.ManualClock(0)
    with gts.SqliteLeaseStore(folder / f"keeper-{leases}.db") as store:
        keeper = gts.LeaseKeeper(
            store=store, replica_id="replica", ttl_ms=60_000, margin_ms=0, clock=clock, start_thread=False
        )
        for index in range(leases):
            keeper.acquire(f"bench/t-{index}")

        def round_of_all() -> None:
            clock.advance(20_000)
            report = keeper.tick()
            assert report.renewed == leases, report

        round_of_all()
        per_round = per_call_ns(round_of_all, rounds)
        keeper.shutdown()
    return per_round / leases


def single_renew_ns(folder: Path, renewals: int) -> float:
    with gts.SqliteLeaseStore(folder / "single.db") as store:
        lease = gts.TenantLease.acquire(key="bench/t-1", replica_id="replica", store=store, ttl_ms=60_000, margin_ms=0)
        return per_call_ns(lease.renew, renewals)


def main() -> int:
    quick = "--quick" in sys.argv
    derivations = 20_000 if quick else 200_000
    expected = stdlib_checked(KEY, ISSUER, SUBJECT)
    organization = gts.OrganizationKey(KEY)
    assert gts.derive_ledger_tenant_id(KEY, ISSUER, SUBJECT) == expected
    assert organization.derive_ledger_tenant_id(ISSUER, SUBJECT) == expected
    assert stdlib_bare(KEY, ISSUER, SUBJECT) == expected == stdlib_precomputed(ISSUER, SUBJECT)

    module_ns = per_call_ns(lambda: gts.derive_ledger_tenant_id(KEY, ISSUER, SUBJECT), derivations)
    checked_ns = per_call_ns(lambda: stdlib_checked(KEY, ISSUER, SUBJECT), derivations)
    bare_ns = per_call_ns(lambda: stdlib_bare(KEY, ISSUER, SUBJECT), derivations)
    key_ns = per_call_ns(lambda: organization.derive_ledger_tenant_id(ISSUER, SUBJECT), derivations)
    precomputed_ns = per_call_ns(lambda: stdlib_precomputed(ISSUER, SUBJECT), derivations)

    print("derive_ledger_tenant_id, ns per call (best of 5):")
    print(f"  module, key as bytes          {module_ns:8.0f}")
    print(f"  stdlib hmac, same checks      {checked_ns:8.0f}   module is {checked_ns / module_ns:4.1f}x faster")
    print(f"  stdlib hmac, no checks        {bare_ns:8.0f}   module is {bare_ns / module_ns:4.1f}x faster")
    print(f"  module OrganizationKey        {key_ns:8.0f}")
    print(f"  stdlib hmac, precomputed copy {precomputed_ns:8.0f}   module is {precomputed_ns / key_ns:4.1f}x faster")

    with tempfile.TemporaryDirectory(dir=os.environ.get("GOTRY_BENCH_DIR")) as folder:
        sync_ns = fdatasync_ns(Path(folder), 50 if quick else 300)
        op_ns = store_op_ns(Path(folder), 20 if quick else 100)
        renew_ns = single_renew_ns(Path(folder), 20 if quick else 100)
        sizes = (1, 100) if quick else (1, 100, 1_000)
        per_lease = {size: keeper_per_lease_ns(Path(folder), size, 5 if quick else 20) for size in sizes}
    print("durable store, on this disk:")
    print(f"  4 KiB write + fdatasync       {sync_ns / 1e3:8.1f} us   {1e9 / sync_ns:8.0f} /s")
    print(f"  acquire/renew/release (mean)  {op_ns / 1e3:8.1f} us   {1e9 / op_ns:8.0f} ops/s")
    print(f"  store operation / fdatasync   {op_ns / sync_ns:8.2f}x")
    print("LeaseKeeper round through the module, per lease:")
    print(f"  TenantLease.renew(), one lease {renew_ns / 1e3:7.1f} us")
    for size, ns in per_lease.items():
        print(f"  tick() of {size:>5} leases        {ns / 1e3:7.1f} us   1/{renew_ns / ns:.0f} of a single renew")

    ratio = checked_ns / module_ns
    if ratio < 3.0:
        print(f"below target: the module is {ratio:.1f}x the stdlib derivation, the target is 3x")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
