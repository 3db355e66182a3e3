"""The per-tenant state layer of gotry's hosted line, for Python.

Who may write a tenant's ledger (a lease whose epoch fences stale writers) and the tenant
identifiers that every path, metric and prompt cache label is built from. The rules live in
the Rust core that the Node.js and C hosts call too, so they behave the same everywhere; this
package is the Python face of it.

Durable copies of a tenant root (``EpochCopies`` over a ``DurableStore``) are scoped by the
lease's epoch, so a stale holder can cost availability but never make its writes the ones a
new holder restores.

Every call that reaches a lease store or a durable store runs without the GIL, so other
threads keep running while one waits for another process's write lock or copies a tenant
root. Stores, leases, keepers and copies are safe to share between threads.
"""

from ._errors import (
    CopyConflictError,
    DrainTimeoutError,
    DurableStoreUnavailableError,
    FencedError,
    InvalidTenantIdError,
    LeaseHeldError,
    LeaseLostError,
    LeaseStoreUnavailableError,
    ReplicaAtCapacityError,
    RestoreVerificationError,
    RouterClosedError,
    TenantDrainingError,
    TenantStateError,
    TenantStateStorageError,
)
from ._native import (
    ERROR_CODES,
    MAX_LEASE_TTL_MS,
    MIN_LEASE_TTL_MS,
    CopyId,
    CopyListing,
    DirectoryDurableStore,
    DurableStore,
    EpochCopies,
    GcReport,
    HistoryEntry,
    KeeperEvent,
    LeaseGrant,
    LeaseKeeper,
    LeaseRecord,
    LeaseStore,
    ManualClock,
    OrganizationKey,
    RestoreReport,
    ShutdownReport,
    SkippedCopy,
    SqliteLeaseStore,
    TenantLease,
    TickReport,
    WrittenCopy,
    assert_lease_ttl,
    assert_ledger_tenant_id,
    assert_organization_id,
    assert_prompt_cache_partition,
    derive_ledger_tenant_id,
    derive_prompt_cache_partition,
    lease_key_for,
    open_durable_store,
    open_lease_store,
    tenant_root_for,
)

__all__ = [
    "ERROR_CODES",
    "MAX_LEASE_TTL_MS",
    "MIN_LEASE_TTL_MS",
    "CopyConflictError",
    "CopyId",
    "CopyListing",
    "DirectoryDurableStore",
    "DrainTimeoutError",
    "DurableStore",
    "DurableStoreUnavailableError",
    "EpochCopies",
    "FencedError",
    "GcReport",
    "HistoryEntry",
    "InvalidTenantIdError",
    "KeeperEvent",
    "LeaseGrant",
    "LeaseHeldError",
    "LeaseKeeper",
    "LeaseLostError",
    "LeaseRecord",
    "LeaseStore",
    "LeaseStoreUnavailableError",
    "ManualClock",
    "OrganizationKey",
    "ReplicaAtCapacityError",
    "RestoreReport",
    "RestoreVerificationError",
    "RouterClosedError",
    "ShutdownReport",
    "SkippedCopy",
    "SqliteLeaseStore",
    "TenantDrainingError",
    "TenantLease",
    "TenantStateError",
    "TenantStateStorageError",
    "TickReport",
    "WrittenCopy",
    "assert_lease_ttl",
    "assert_ledger_tenant_id",
    "assert_organization_id",
    "assert_prompt_cache_partition",
    "derive_ledger_tenant_id",
    "derive_prompt_cache_partition",
    "lease_key_for",
    "open_durable_store",
    "open_lease_store",
    "tenant_root_for",
]
