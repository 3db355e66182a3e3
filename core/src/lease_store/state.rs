//! What a lease is, as an operator reads it: one answer for every tool that shows leases, so
//! the CLI and any door say the same word for the same record.

use super::{LeaseOp, LeaseRecord, LeaseStore};
use crate::errors::Result;

/// A lease's state on the store's clock. `Held` while unexpired; once it is not, `Forgotten`
/// when its holder marked the copies of its own epoch dead (a successor starts without them),
/// `Released` when the holder gave it back (the log's last operation on the key is that
/// epoch's release), `Expired` otherwise: its holder stopped renewing (it crashed, hung, or
/// lost the store).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaseState {
    Held,
    Expired,
    Released,
    Forgotten,
}

impl LeaseState {
    /// Every state, in the order tools list them.
    pub const ALL: [LeaseState; 4] = [
        LeaseState::Held,
        LeaseState::Expired,
        LeaseState::Released,
        LeaseState::Forgotten,
    ];

    /// The state of `record` at `now_ms` on `store`'s clock. The log is read only for a lease
    /// that is not held, and only its key's.
    pub fn of(store: &dyn LeaseStore, record: &LeaseRecord, now_ms: i64) -> Result<LeaseState> {
        if !record.is_expired_at(now_ms) {
            return Ok(LeaseState::Held);
        }
        if record.forgotten_at_epoch >= record.epoch {
            return Ok(LeaseState::Forgotten);
        }
        // Nothing the store grants comes after a release in the same epoch (renew and forget
        // need an unexpired lease), so a release is the last entry until the next acquire.
        let history = store.history(Some(&record.key))?;
        let released = history.last().is_some_and(|entry| {
            entry.op == LeaseOp::Release && entry.epoch == record.epoch && entry.owner == record.owner
        });
        Ok(if released {
            LeaseState::Released
        } else {
            LeaseState::Expired
        })
    }

    /// The stable word tools print and JSON carries.
    pub const fn as_str(self) -> &'static str {
        match self {
            LeaseState::Held => "held",
            LeaseState::Expired => "expired",
            LeaseState::Released => "released",
            LeaseState::Forgotten => "forgotten",
        }
    }
}

impl std::fmt::Display for LeaseState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::lease_store::sqlite::SqliteLeaseStore;
    use std::sync::Arc;

    #[test]
    fn each_state_of_a_lease_in_its_life() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(1_000));
        let store = SqliteLeaseStore::open(dir.path().join("leases.db"))
            .unwrap()
            .with_clock(clock.clone());
        let state = |now| {
            let record = store.read("o/t").unwrap().unwrap();
            LeaseState::of(&store, &record, now).unwrap()
        };
        store.acquire("o/t", "a", 1_000).unwrap();
        assert_eq!(state(1_999), LeaseState::Held);
        assert_eq!(state(2_000), LeaseState::Expired);
        store.release("o/t", "a", 1).unwrap();
        assert_eq!(state(1_000), LeaseState::Released);
        store.acquire("o/t", "b", 1_000).unwrap();
        store.mark_forgotten("o/t", "b", 2).unwrap();
        assert_eq!(state(5_000), LeaseState::Forgotten);
        assert_eq!(LeaseState::Forgotten.to_string(), "forgotten");
    }
}
