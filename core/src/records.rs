//! The records the layers hand each other and that errors carry: a lease's state, a copy's
//! place, why a restore passed a copy over. Here, under every layer, so that `errors` names
//! them without importing a layer (each layer re-exports its own).

use serde::{Deserialize, Serialize};

/// The state of one tenant's lease.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaseRecord {
    pub key: String,
    pub owner: String,
    pub epoch: i64,
    pub lease_until_ms: i64,
    pub forgotten_at_epoch: i64,
}

impl LeaseRecord {
    /// Whether the lease has run out at `now_ms` on the store's clock: the instant
    /// `lease_until_ms` itself already belongs to the next owner.
    pub fn is_expired_at(&self, now_ms: i64) -> bool {
        self.lease_until_ms <= now_ms
    }
}

/// A copy's place in the order restores follow: epoch first, then sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CopyId {
    pub epoch: i64,
    pub seq: u64,
}

/// Why a restore passed over a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// The manifest is missing a field, does not parse, or contradicts its own place.
    Manifest,
    /// The manifest names another tenant.
    Tenant,
    /// A file is missing or its size or SHA-256 differs from the manifest.
    Checksum,
    /// A SQLite file fails `PRAGMA integrity_check`.
    Integrity,
    /// The host's own check of the restored state refused it.
    Fold,
    /// Written into an older epoch after a later tenure had begun: a stale holder's copy.
    Superseded,
}

impl SkipReason {
    /// The stable string hosts see as `reason`.
    pub const fn as_str(self) -> &'static str {
        match self {
            SkipReason::Manifest => "manifest",
            SkipReason::Tenant => "tenant",
            SkipReason::Checksum => "checksum",
            SkipReason::Integrity => "integrity",
            SkipReason::Fold => "fold",
            SkipReason::Superseded => "superseded",
        }
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A copy a restore passed over, and why.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SkippedCopy {
    /// Which copy: its place in the order restores follow.
    pub id: CopyId,
    pub reason: SkipReason,
}
