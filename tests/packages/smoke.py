"""A project that pip-installed the wheel: the shared id vectors, one lease taken, renewed
and released on a file store, and the version loaded. Also checked with ``mypy --strict``
against the stubs the wheel ships.

Usage: python smoke.py VECTORS_JSON STATE_DIR EXPECTED_VERSION
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gotry_tenant_state as gts


def main(vectors_path: str, state_dir: str, expected_version: str) -> int:
    assert gts.version() == gts.__version__ == expected_version, gts.version()
    derive = json.loads(Path(vectors_path).read_text(encoding="utf-8"))["derive"]
    for v in derive:
        try:
            key = gts.OrganizationKey(bytes.fromhex(v["key_hex"]))
            got = key.derive_ledger_tenant_id(v["issuer"], v["subject"])
        except gts.TenantStateError as refused:
            assert refused.code == v["expect"].get("error"), (v["note"], refused)
        else:
            assert got == v["expect"].get("ledger_tenant_id"), (v["note"], got)
    lease_key = gts.lease_key_for("acme", derive[0]["expect"]["ledger_tenant_id"])
    with gts.SqliteLeaseStore(Path(state_dir) / "leases-py.db") as store:
        lease = gts.TenantLease.acquire(key=lease_key, replica_id="py", store=store, ttl_ms=30_000, margin_ms=1_000)
        lease.assert_held()
        lease.renew()
        lease.release()
        ops = [entry.op for entry in store.history(lease_key)]
    assert ops == ["acquire", "renew", "release"], ops
    print(f"python {sys.version_info.major}.{sys.version_info.minor}: {len(derive)} vectors, "
          f"{'/'.join(ops)} at epoch {lease.epoch}, version {gts.version()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
