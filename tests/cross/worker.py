"""The Python contention worker: the same plan as tests/harness's lease-worker.

    python worker.py --store URL_OR_FILE --owner NAME --keys N --ttl-ms TTL --duration-ms D --acks FILE [--seed S]

Pause up to 4 ms, pick a key at random; acquire it when this worker holds no epoch of it, otherwise renew,
release or mark it forgotten. Every acknowledged operation is appended to the acks file as
one JSON line, flushed before the next call. Refusals and contention are expected; any
other failure ends the worker with status 1.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time

import gotry_tenant_state as gts

EXPECTED = {"GOTRY_TENANT_LEASE_HELD", "GOTRY_TENANT_LEASE_LOST", "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE"}


def main() -> int:
    parser = argparse.ArgumentParser()
    for flag in ("store", "owner", "acks"):
        parser.add_argument(f"--{flag}", required=True)
    for flag in ("keys", "ttl-ms", "duration-ms"):
        parser.add_argument(f"--{flag}", required=True, type=int)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    url = args.store if "://" in args.store else f"sqlite://{args.store}"
    store = gts.open_lease_store(url)
    rng = random.Random(args.seed)
    held: dict[str, int] = {}
    granted = refused = 0
    deadline = time.monotonic() + args.duration_ms / 1000
    with open(args.acks, "a", encoding="utf-8") as acks:
        while time.monotonic() < deadline:
            time.sleep(rng.random() * 0.004)
            key = f"k{rng.randrange(max(args.keys, 1))}"
            epoch = held.get(key)
            try:
                if epoch is None:
                    op, epoch = "acquire", store.acquire(key, args.owner, args.ttl_ms).record.epoch
                    held[key] = epoch
                else:
                    choice = rng.randrange(4)
                    if choice < 2:
                        op = "renew"
                        store.renew(key, args.owner, epoch, args.ttl_ms)
                    elif choice == 2:
                        op = "release"
                        store.release(key, args.owner, epoch)
                        del held[key]
                    else:
                        op = "forget"
                        store.mark_forgotten(key, args.owner, epoch)
            except gts.TenantStateError as error:
                if error.code not in EXPECTED:
                    print(f"worker.py {args.owner}: {key}: unexpected {error.code}: {error}", file=sys.stderr)
                    return 1
                if error.code == "GOTRY_TENANT_LEASE_LOST":
                    held.pop(key, None)
                refused += 1
                continue
            acks.write(json.dumps({"key": key, "op": op, "owner": args.owner, "epoch": epoch}) + "\n")
            acks.flush()
            granted += 1
    print(f"worker.py {args.owner}: granted={granted} refused={refused}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
