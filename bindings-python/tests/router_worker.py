"""One replica of test_router.py's multi-process run (not a test module itself).

For a few seconds: pick a tenant at random, open it (a tenant another replica serves is
skipped), run one to three strict calls that append a row to its ledger, hand it off. Every
tenure and every acknowledged call is written, as one JSON line, to the log, a call with its
epoch and the monotonic times at which it started and ended inside the router.

Arguments: leases.db durable-folder state-root replica-id tenant,tenant,... seconds log seed
"""

from __future__ import annotations

import json
import random
import sys
import time

import gotry_tenant_state as gts
from conftest import append_entry

ORG = "acme"


def main() -> None:
    leases, durable, state_root, replica, tenants, seconds, log_path, seed = sys.argv[1:]
    rng = random.Random(int(seed))
    store = gts.SqliteLeaseStore(leases)
    router = gts.TenantRouter(
        store,
        gts.DirectoryDurableStore(durable),
        state_root,
        replica,
        3_000,
        500,
        durability="strict",
    )
    deadline = time.monotonic() + float(seconds)
    written = 0
    with open(log_path, "a", encoding="utf-8") as log:

        def record(**fields: object) -> None:
            log.write(json.dumps(fields) + "\n")
            log.flush()

        while time.monotonic() < deadline:
            tenant = rng.choice(tenants.split(","))
            try:
                handle = router.open(ORG, tenant)
            except gts.LeaseHeldError:
                time.sleep(rng.uniform(0.002, 0.01))
                continue
            restored = handle.restored_from
            record(
                what="open",
                key=handle.key,
                replica=replica,
                epoch=handle.epoch,
                restored_from=None if restored is None else [restored.epoch, restored.seq],
            )
            for _ in range(rng.randint(1, 3)):
                written += 1
                row = f"{replica}/{handle.epoch}/{written}"

                def call(h: gts.TenantHandle, row: str = row) -> tuple[float, float]:
                    start = time.monotonic()
                    h.lease.assert_held()
                    append_entry(h.root, row)
                    return start, time.monotonic()

                start, end = router.run(handle.key, call)
                record(what="call", key=handle.key, epoch=handle.epoch, row=row, start=start, end=end)
            router.handoff(handle.key)
    report = router.close()
    assert report.failed == [] and report.timed_out == [], report
    store.close()


if __name__ == "__main__":
    main()
