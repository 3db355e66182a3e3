"""The per-tenant state layer of gotry's hosted line, for Python.

Who may write a tenant's ledger (a lease whose epoch fences stale writers) and the tenant
identifiers that every path, metric and prompt cache label is built from. The rules live in
the Rust core that the Node.js and C hosts call too, so they behave the same everywhere; this
package is the Python face of it.

Durable copies of a tenant root (``EpochCopies`` over a ``DurableStore``) are scoped by the
lease's epoch, so a stale holder can cost availability but never make its writes the ones a
new holder restores. A file of a tenant root that this process has open elsewhere (a ledger
the host's ``sqlite3`` connection holds) is read only through the host's ``snapshot``
function (``sqlite3_snapshot`` for the standard library's ``sqlite3``); without one its copy
is refused with ``OpenInProcessError``.

``TenantRouter`` serves many tenants from one replica: capacity, open with restore, calls
fenced before and after, background or strict copies, handoff and close.

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
    TenantBusyError,
    OpenInProcessError,
    CallInDoubtError,
    RestoreVerificationError,
    RouterClosedError,
    TenantDrainingError,
    TenantStateError,
    TenantStateStorageError,
)
from ._native import (
    ERROR_CODES,
    MAX_LEASE_TTL_MS,
    METRICS_CONTENT_TYPE,
    MIN_LEASE_TTL_MS,
    CloseReport,
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
    RouterEvent,
    RouterTickReport,
    ShutdownReport,
    SkippedCopy,
    SqliteLeaseStore,
    TenantHandle,
    TenantLease,
    TenantRouter,
    TenantStatus,
    TickReport,
    WrittenCopy,
    assert_lease_ttl,
    assert_ledger_tenant_id,
    assert_organization_id,
    assert_prompt_cache_partition,
    derive_ledger_tenant_id,
    derive_prompt_cache_partition,
    lease_key_for,
    metrics,
    open_durable_store,
    open_lease_store,
    tenant_root_for,
    version,
)
from ._metrics import MetricsCollector
from ._snapshot import sqlite3_snapshot

__version__: str = version()

__all__ = [
    "ERROR_CODES",
    "MAX_LEASE_TTL_MS",
    "METRICS_CONTENT_TYPE",
    "MetricsCollector",
    "MIN_LEASE_TTL_MS",
    "CloseReport",
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
    "TenantBusyError",
    "OpenInProcessError",
    "CallInDoubtError",
    "RestoreReport",
    "RestoreVerificationError",
    "RouterClosedError",
    "RouterEvent",
    "RouterTickReport",
    "ShutdownReport",
    "SkippedCopy",
    "SqliteLeaseStore",
    "TenantDrainingError",
    "TenantHandle",
    "TenantLease",
    "TenantRouter",
    "TenantStateError",
    "TenantStateStorageError",
    "TenantStatus",
    "TickReport",
    "WrittenCopy",
    "assert_lease_ttl",
    "assert_ledger_tenant_id",
    "assert_organization_id",
    "assert_prompt_cache_partition",
    "derive_ledger_tenant_id",
    "derive_prompt_cache_partition",
    "lease_key_for",
    "metrics",
    "open_durable_store",
    "open_lease_store",
    "sqlite3_snapshot",
    "tenant_root_for",
    "version",
]
