"""Two replicas hand one tenant over on a shared SQLite lease file.

Replica A derives the tenant id from the authenticated principal, takes the lease, writes
behind the gate, and hands off; replica B, refused while A holds it, takes over at the next
epoch. A's late write is fenced. Run it: ``python examples/handoff.py``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import gotry_tenant_state as gts


def main() -> int:
    organization = gts.OrganizationKey(b"example organization key, 32+ bytes long")
    tenant = organization.derive_ledger_tenant_id("https://idp.example", "user-42")
    key = gts.lease_key_for("acme", tenant)
    with tempfile.TemporaryDirectory() as state:
        root = gts.tenant_root_for(state, "acme", tenant)
        print(f"tenant {tenant}: lease {key}, state in {root}")
        with gts.SqliteLeaseStore(Path(state) / "gotry-leases.db") as store:
            a = gts.TenantLease.acquire(key=key, replica_id="replica-a", store=store, ttl_ms=10_000, margin_ms=1_000)
            a.assert_held()
            print(f"replica-a holds epoch {a.epoch}, {a.remaining_ms():.0f} ms left on its fence")
            try:
                gts.TenantLease.acquire(key=key, replica_id="replica-b", store=store, ttl_ms=10_000, margin_ms=1_000)
            except gts.LeaseHeldError as held:
                print(f"replica-b refused: held by {held.record.owner} at epoch {held.record.epoch}")
            a.release()
            with gts.TenantLease.acquire(
                key=key, replica_id="replica-b", store=store, ttl_ms=10_000, margin_ms=1_000
            ) as b:
                print(f"replica-b holds epoch {b.epoch}")
                try:
                    a.assert_held()
                except gts.FencedError as fenced:
                    print(f"replica-a's late write is fenced: {fenced.reason}")
            for entry in store.history(key):
                print(f"  {entry.op:<8} {entry.owner} epoch {entry.epoch}")
            return 0 if [e.op for e in store.history(key)] == ["acquire", "release", "acquire", "release"] else 1


if __name__ == "__main__":
    sys.exit(main())
