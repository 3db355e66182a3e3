//! The per-tenant state layer of gotry's hosted line: who may write a tenant's ledger (a
//! lease whose epoch fences stale writers) and the tenant identifiers that every path,
//! metric and prompt cache label is built from.
//!
//! Node.js, Python and C hosts call this crate in-process through their bindings, so each
//! rule lives here once. The behaviour follows gotry's original JavaScript modules, and the
//! SQLite store shares their file format.

pub mod clock;
pub mod durable_store;
pub mod epoch_copies;
pub mod errors;
pub mod ids;
pub mod keeper;
pub mod lease_store;
pub mod metrics;
pub mod paths;
pub(crate) mod plumbing;
pub mod records;
pub mod router;
pub mod secrets;
pub mod tenant_lease;

pub use clock::{
    FixedWallClock, HostClock, ManualClock, MonotonicClock, SystemHostClock, SystemMonotonicClock,
    SystemWallClock, WallClock,
};
pub use durable_store::dir::DirectoryDurableStore;
pub use durable_store::{
    open_durable_store, open_durable_store_read_only, DurableStore, ObjectInfo, PutOutcome,
};
pub use epoch_copies::{
    same_library_snapshot, CopyId, CopyListing, EpochCopies, FoldCheck, GcReport, HostSnapshot,
    RestoreReport, SkipReason, SkippedCopy, WrittenCopy,
};
pub use errors::{Error, ErrorCode, FenceReason, Result};
pub use ids::{
    assert_ledger_tenant_id, assert_organization_id, assert_prompt_cache_partition, derive_ledger_tenant_id,
    derive_prompt_cache_partition, lease_key_for, tenant_root_for, OrganizationKey,
};
pub use keeper::{
    EventHandler, KeeperEvent, KeeperEventKind, KeeperOptions, LeaseKeeper, ShutdownReport, TickReport,
};
pub use lease_store::mysql::{MysqlLeaseStore, MysqlOptions};
#[cfg(feature = "postgres")]
pub use lease_store::postgres::{PostgresLeaseStore, PostgresOptions};
pub use lease_store::sqlite::{SqliteLeaseStore, SqliteOptions};
pub use lease_store::{
    assert_lease_ttl, call_begun_at, open_lease_store, HistoryEntry, LeaseGrant, LeaseOp, LeaseRecord,
    LeaseState, LeaseStore, MAX_LEASE_TTL_MS, MIN_LEASE_TTL_MS,
};
pub use router::{
    default_handoff_timeout, CloseReport, CopyPolicy, Durability, RouterCall, RouterEvent, RouterEventKind,
    RouterOptions, RouterTickReport, TenantHandle, TenantRouter, TenantState, TenantStatus,
    DEFAULT_KEEP_COPIES, DEFAULT_TENANT_METRICS,
};
pub use tenant_lease::{LeaseOptions, TenantLease, Turn};

/// The version of the whole workspace (one number for the crates, the npm packages, the
/// wheel, the C header and its `.pc` file): what every door's `version()` reports, so a host
/// can tell which build it has loaded.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
