//! The lease store: one record per tenant that says which replica may write that tenant's
//! ledger, and at which epoch.
//!
//! The contract is a linearizable compare-and-set per key, decided on the store's clock:
//! `acquire` only when there is no record or it has expired (epoch n -> n + 1); `renew`
//! only for the current, unexpired holder (epoch kept); `release` by the holder of that
//! epoch expires the lease at once (epoch kept, even after expiry); `mark_forgotten` raises
//! the forgotten floor. Epochs never decrease, rows are never deleted, every granted
//! operation is logged. The rules live in [`decide`], once, and every store applies them
//! inside its own transaction.

mod deadline;
pub mod mysql;
#[cfg(feature = "postgres")]
pub mod postgres;
mod server_clock;
pub mod sqlite;
mod state;
mod url;
mod url_parts;

pub use deadline::call_begun_at;
pub(crate) use deadline::Deadline;
pub use state::LeaseState;
pub use url::open_lease_store;

use std::time::Duration;

use crate::errors::{Error, Result};

/// Shortest lease a store grants, in milliseconds.
pub const MIN_LEASE_TTL_MS: i64 = 100;
/// Longest lease a store grants, in milliseconds (ten minutes).
pub const MAX_LEASE_TTL_MS: i64 = 600_000;
/// The latest store clock reading a decision accepts: a deadline a TTL later is still a
/// safe integer in JavaScript (2^53 - 1).
pub const MAX_STORE_CLOCK_MS: i64 = (1 << 53) - 1 - MAX_LEASE_TTL_MS;
/// How long every renewal stays in a store's log; beyond it only the last renewal of each
/// tenure does. Ten minutes is longer than the longest TTL, so an audit of the recent past
/// sees every renewal, and a keeper's log stops growing after ten minutes.
pub const DEFAULT_LOG_RETENTION: Duration = Duration::from_secs(600);

/// The fewest log rows a write examines for pruning; it examines twice the rows it logs when
/// that is more, so pruning keeps pace with any rate of renewals.
pub(crate) const PRUNE_MIN_BATCH: usize = 64;

/// Longest key or owner, in UTF-16 code units (what JS `length` counts, so that every
/// language accepts exactly the strings the reference accepts).
pub const MAX_TEXT_UTF16_UNITS: usize = 200;

pub use crate::records::LeaseRecord;

/// A granted acquire or renew: the record after it, and the TTL it was granted for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaseGrant {
    pub record: LeaseRecord,
    pub ttl_ms: i64,
}

/// The kind of a granted operation, as the log spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaseOp {
    Acquire,
    Renew,
    Release,
    Forget,
}

impl LeaseOp {
    pub const fn as_str(self) -> &'static str {
        match self {
            LeaseOp::Acquire => "acquire",
            LeaseOp::Renew => "renew",
            LeaseOp::Release => "release",
            LeaseOp::Forget => "forget",
        }
    }

    pub fn parse(value: &str) -> Option<LeaseOp> {
        [
            LeaseOp::Acquire,
            LeaseOp::Renew,
            LeaseOp::Release,
            LeaseOp::Forget,
        ]
        .into_iter()
        .find(|op| op.as_str() == value)
    }
}

/// One granted operation in the store's log.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HistoryEntry {
    pub key: String,
    pub op: LeaseOp,
    pub owner: String,
    pub epoch: i64,
    pub at_ms: i64,
}

/// A lease store. Implementations are safe to share between threads; every method blocks
/// until the store answered, so async hosts call them off their event loop. The stores of
/// this crate bound each call by their timeout, counted from when it began (see
/// [`call_begun_at`]), and fail it with LEASE_STORE_UNAVAILABLE once that has passed.
pub trait LeaseStore: Send + Sync {
    /// The record of `key`, if any.
    fn read(&self, key: &str) -> Result<Option<LeaseRecord>>;
    /// Takes the lease when it is free or expired; the epoch moves up by one.
    fn acquire(&self, key: &str, owner: &str, ttl_ms: i64) -> Result<LeaseGrant>;
    /// Extends the unexpired lease of `owner` at `epoch` to `now + ttl_ms`.
    fn renew(&self, key: &str, owner: &str, epoch: i64, ttl_ms: i64) -> Result<LeaseGrant>;
    /// Renews many leases of one owner in one transaction, so a round of renewals costs one
    /// durable write instead of one per lease. Each lease is answered on its own (granted,
    /// or refused for that key alone); a failure of the store fails the whole batch.
    fn renew_batch(
        &self,
        owner: &str,
        ttl_ms: i64,
        leases: &[(&str, i64)],
    ) -> Result<Vec<Result<LeaseGrant>>>;
    /// Expires the lease of `owner` at `epoch` now; allowed after expiry too.
    fn release(&self, key: &str, owner: &str, epoch: i64) -> Result<LeaseRecord>;
    /// Releases many leases of one owner, answered one by one as `renew_batch` answers: what
    /// lets a replica with thousands of tenants hand them all back at shutdown. Stores do it
    /// in one transaction; this default, for stores that cannot, releases them one by one.
    fn release_batch(&self, owner: &str, leases: &[(&str, i64)]) -> Result<Vec<Result<LeaseRecord>>> {
        Ok(leases
            .iter()
            .map(|&(key, epoch)| self.release(key, owner, epoch))
            .collect())
    }
    /// Raises the forgotten floor to `epoch`; only the unexpired holder may.
    fn mark_forgotten(&self, key: &str, owner: &str, epoch: i64) -> Result<LeaseRecord>;
    /// Every granted operation in order, of one key or of all.
    fn history(&self, key: Option<&str>) -> Result<Vec<HistoryEntry>>;
    /// Every record whose key starts with `prefix` (all when empty), ordered by key.
    fn list(&self, prefix: &str) -> Result<Vec<LeaseRecord>>;
    /// The store's clock, as its decisions see it.
    fn now_ms(&self) -> Result<i64>;
    /// Prunes the whole log of renewals beyond the store's retention now, in short
    /// transactions (writes prune as they go; this catches up on a log written before, or
    /// by the reference). Returns the rows deleted. Bounded by the store's timeout like any
    /// call: a log too long for one call fails it as unavailable, keeping what it did, and
    /// the next call goes on from there.
    fn compact_log(&self) -> Result<u64>;
    /// Closes the store; every later call fails with LEASE_STORE_UNAVAILABLE.
    fn close(&self) -> Result<()>;
    /// How many calls the store works on at once. A store on one connection answers 1: its
    /// calls wait for each other anyway, so a host that runs them on threads of its own can
    /// queue them per store and run them back to back on one thread, instead of waking a
    /// thread per call only for it to wait its turn. No limit of its own by default.
    fn concurrent_calls(&self) -> usize {
        usize::MAX
    }
    /// `read` answered at once, or `None` when answering could wait for anything (a lock,
    /// another call, the network): what lets a host whose calling thread must never block (a
    /// JS event loop) answer a read without handing it to another thread and back, and hand
    /// it over only when it must. By default a store cannot tell, and answers `None`.
    fn read_now(&self, key: &str) -> Option<Result<Option<LeaseRecord>>> {
        let _ = key;
        None
    }
}

/// A TTL the store accepts: an integer number of milliseconds within
/// [`MIN_LEASE_TTL_MS`, `MAX_LEASE_TTL_MS`].
pub fn assert_lease_ttl(ttl_ms: i64) -> Result<i64> {
    if (MIN_LEASE_TTL_MS..=MAX_LEASE_TTL_MS).contains(&ttl_ms) {
        Ok(ttl_ms)
    } else {
        Err(Error::invalid_argument(format!(
            "a lease ttl is an integer from {MIN_LEASE_TTL_MS} to {MAX_LEASE_TTL_MS} ms, got {ttl_ms}"
        )))
    }
}

/// A log retention a store accepts, in milliseconds: at most a hundred years, so that a
/// cutoff is always a clock reading.
pub(crate) fn log_retention_ms(retention: Duration) -> Result<i64> {
    i64::try_from(retention.as_millis())
        .ok()
        .filter(|ms| *ms <= 100 * 365 * 86_400_000)
        .ok_or_else(|| Error::invalid_argument("a log retention is at most a hundred years"))
}

/// A key or owner: 1 to 200 UTF-16 code units.
pub fn assert_text<'a>(name: &str, value: &'a str) -> Result<&'a str> {
    let units: usize = value.chars().map(char::len_utf16).sum();
    if units == 0 || units > MAX_TEXT_UTF16_UNITS {
        return Err(Error::invalid_argument(format!(
            "{name} must be 1 to {MAX_TEXT_UTF16_UNITS} UTF-16 code units long, got {units}"
        )));
    }
    Ok(value)
}

/// An epoch a holder can name: 1 or more.
pub fn assert_epoch(epoch: i64) -> Result<i64> {
    if epoch >= 1 {
        Ok(epoch)
    } else {
        Err(Error::invalid_argument(format!(
            "an epoch is a positive integer, got {epoch}"
        )))
    }
}

/// A request to the store, once its arguments passed their checks.
#[derive(Debug, Clone, Copy)]
pub enum Request<'a> {
    Acquire { owner: &'a str, ttl_ms: i64 },
    Renew { owner: &'a str, epoch: i64, ttl_ms: i64 },
    Release { owner: &'a str, epoch: i64 },
    Forget { owner: &'a str, epoch: i64 },
}

impl<'a> Request<'a> {
    /// Checks the arguments as every store must, before anything is read.
    pub fn acquire(key: &str, owner: &'a str, ttl_ms: i64) -> Result<Request<'a>> {
        assert_text("key", key)?;
        assert_text("owner", owner)?;
        assert_lease_ttl(ttl_ms)?;
        Ok(Request::Acquire { owner, ttl_ms })
    }

    pub fn renew(key: &str, owner: &'a str, epoch: i64, ttl_ms: i64) -> Result<Request<'a>> {
        assert_text("key", key)?;
        assert_text("owner", owner)?;
        assert_epoch(epoch)?;
        assert_lease_ttl(ttl_ms)?;
        Ok(Request::Renew { owner, epoch, ttl_ms })
    }

    pub fn release(key: &str, owner: &'a str, epoch: i64) -> Result<Request<'a>> {
        assert_text("key", key)?;
        assert_text("owner", owner)?;
        assert_epoch(epoch)?;
        Ok(Request::Release { owner, epoch })
    }

    pub fn forget(key: &str, owner: &'a str, epoch: i64) -> Result<Request<'a>> {
        assert_text("key", key)?;
        assert_text("owner", owner)?;
        assert_epoch(epoch)?;
        Ok(Request::Forget { owner, epoch })
    }

    pub fn op(&self) -> LeaseOp {
        match self {
            Request::Acquire { .. } => LeaseOp::Acquire,
            Request::Renew { .. } => LeaseOp::Renew,
            Request::Release { .. } => LeaseOp::Release,
            Request::Forget { .. } => LeaseOp::Forget,
        }
    }

    pub fn owner(&self) -> &'a str {
        match *self {
            Request::Acquire { owner, .. }
            | Request::Renew { owner, .. }
            | Request::Release { owner, .. }
            | Request::Forget { owner, .. } => owner,
        }
    }
}

/// The part of a batch that every store shares: each lease's arguments are checked on their
/// own, the valid requests go to `apply_all` (the store's one transaction), and every lease
/// is answered in the order it was given.
pub(crate) fn batch_with<'a>(
    owner: &'a str,
    leases: &[(&'a str, i64)],
    request: impl Fn(&'a str, i64) -> Result<Request<'a>>,
    apply_all: impl FnOnce(&[(&'a str, Request<'a>)]) -> Result<Vec<Result<LeaseRecord>>>,
) -> Result<Vec<Result<LeaseRecord>>> {
    assert_text("owner", owner)?;
    let checked: Vec<Result<(&str, Request<'_>)>> = leases
        .iter()
        .map(|&(key, epoch)| request(key, epoch).map(|r| (key, r)))
        .collect();
    let valid: Vec<(&str, Request<'_>)> = checked.iter().filter_map(|c| c.as_ref().ok().copied()).collect();
    let mut applied = if valid.is_empty() {
        Vec::new()
    } else {
        apply_all(&valid)?
    }
    .into_iter();
    Ok(checked
        .into_iter()
        .map(|checked| {
            checked?;
            applied
                .next()
                .unwrap_or_else(|| Err(Error::unavailable("the store answered no outcome")))
        })
        .collect())
}

/// The answer of a transaction of one request.
pub(crate) fn only_outcome(outcomes: Vec<Result<LeaseRecord>>) -> Result<LeaseRecord> {
    outcomes
        .into_iter()
        .next()
        .unwrap_or_else(|| Err(Error::unavailable("the store answered no outcome")))
}

/// The write half of [`LeaseStore`], for a store whose inherent
/// `fn apply_all(&self, &[(&str, Request)]) -> Result<Vec<Result<LeaseRecord>>>` runs
/// requests in one transaction through [`decide`]: the argument checks and the shape of
/// every answer are written here once, and each store supplies only its transaction. The
/// argument is the store's [`crate::metrics::Store`] kind: every call is timed and counted
/// here, so a new store is measured as soon as it uses the macro.
macro_rules! lease_store_writes {
    ($store:expr) => {
        fn acquire(&self, key: &str, owner: &str, ttl_ms: i64) -> $crate::Result<$crate::LeaseGrant> {
            $crate::metrics::store_call($store, $crate::metrics::StoreOp::Acquire, || {
                let request = $crate::lease_store::Request::acquire(key, owner, ttl_ms)?;
                let record = $crate::lease_store::only_outcome(self.apply_all(&[(key, request)])?)?;
                Ok($crate::LeaseGrant { record, ttl_ms })
            })
        }

        fn renew(
            &self,
            key: &str,
            owner: &str,
            epoch: i64,
            ttl_ms: i64,
        ) -> $crate::Result<$crate::LeaseGrant> {
            $crate::metrics::store_call($store, $crate::metrics::StoreOp::Renew, || {
                let request = $crate::lease_store::Request::renew(key, owner, epoch, ttl_ms)?;
                let record = $crate::lease_store::only_outcome(self.apply_all(&[(key, request)])?)?;
                Ok($crate::LeaseGrant { record, ttl_ms })
            })
        }

        fn renew_batch(
            &self,
            owner: &str,
            ttl_ms: i64,
            leases: &[(&str, i64)],
        ) -> $crate::Result<Vec<$crate::Result<$crate::LeaseGrant>>> {
            $crate::metrics::store_batch(
                $store,
                $crate::metrics::StoreOp::RenewBatch,
                leases.len(),
                || {
                    $crate::lease_store::assert_lease_ttl(ttl_ms)?;
                    let answers = $crate::lease_store::batch_with(
                        owner,
                        leases,
                        |key, epoch| $crate::lease_store::Request::renew(key, owner, epoch, ttl_ms),
                        |valid| self.apply_all(valid),
                    )?;
                    Ok(answers
                        .into_iter()
                        .map(|a| a.map(|record| $crate::LeaseGrant { record, ttl_ms }))
                        .collect())
                },
            )
        }

        fn release(&self, key: &str, owner: &str, epoch: i64) -> $crate::Result<$crate::LeaseRecord> {
            $crate::metrics::store_call($store, $crate::metrics::StoreOp::Release, || {
                let request = $crate::lease_store::Request::release(key, owner, epoch)?;
                $crate::lease_store::only_outcome(self.apply_all(&[(key, request)])?)
            })
        }

        fn release_batch(
            &self,
            owner: &str,
            leases: &[(&str, i64)],
        ) -> $crate::Result<Vec<$crate::Result<$crate::LeaseRecord>>> {
            $crate::metrics::store_batch(
                $store,
                $crate::metrics::StoreOp::ReleaseBatch,
                leases.len(),
                || {
                    $crate::lease_store::batch_with(
                        owner,
                        leases,
                        |key, epoch| $crate::lease_store::Request::release(key, owner, epoch),
                        |valid| self.apply_all(valid),
                    )
                },
            )
        }

        fn mark_forgotten(&self, key: &str, owner: &str, epoch: i64) -> $crate::Result<$crate::LeaseRecord> {
            $crate::metrics::store_call($store, $crate::metrics::StoreOp::Forget, || {
                let request = $crate::lease_store::Request::forget(key, owner, epoch)?;
                $crate::lease_store::only_outcome(self.apply_all(&[(key, request)])?)
            })
        }
    };
}
pub(crate) use lease_store_writes;

/// The lease rules, in one place: given the record as the store holds it inside its
/// transaction and the store's clock, either the record to write (and log) or the refusal.
///
/// `measured_expired` is whether `current` has run out as measured on a clock that no
/// process can set, when the store could measure that (see the SQLite store's host clock);
/// it overrides the wall clock's verdict, and `now_ms` then only dates what is written.
pub fn decide(
    key: &str,
    current: Option<&LeaseRecord>,
    request: &Request<'_>,
    now_ms: i64,
    measured_expired: Option<bool>,
) -> Result<LeaseRecord> {
    // Every door reads times as doubles (JS numbers): a reading past 2^53 would be written,
    // and then make every later read of the key fail in Node.
    if !(0..=MAX_STORE_CLOCK_MS).contains(&now_ms) {
        return Err(Error::invalid_argument(format!(
            "the store's clock reads {now_ms} ms, outside 0..={MAX_STORE_CLOCK_MS} that every door can read"
        )));
    }
    let expired = |row: &LeaseRecord| measured_expired.unwrap_or_else(|| row.is_expired_at(now_ms));
    let holder = |owner: &str, epoch: i64| -> Result<&LeaseRecord> {
        match current {
            Some(row) if row.owner == owner && row.epoch == epoch => Ok(row),
            _ => Err(Error::lease_lost(format!(
                "{key}: epoch {epoch} is not held by {owner}"
            ))),
        }
    };
    let unexpired = |row: &'_ LeaseRecord| -> Result<()> {
        if expired(row) {
            Err(Error::lease_lost(format!(
                "{key}: the lease of epoch {} has expired",
                row.epoch
            )))
        } else {
            Ok(())
        }
    };
    // In range: the clock is bounded above, and so is every TTL.
    let until = |ttl_ms: i64| now_ms + ttl_ms;
    match *request {
        Request::Acquire { owner, ttl_ms } => {
            if let Some(row) = current {
                if !expired(row) {
                    return Err(Error::LeaseHeld { record: row.clone() });
                }
            }
            Ok(LeaseRecord {
                key: key.to_owned(),
                owner: owner.to_owned(),
                epoch: current.map_or(1, |row| row.epoch + 1),
                lease_until_ms: until(ttl_ms),
                forgotten_at_epoch: current.map_or(0, |row| row.forgotten_at_epoch),
            })
        }
        Request::Renew { owner, epoch, ttl_ms } => {
            let row = holder(owner, epoch)?;
            unexpired(row)?;
            Ok(LeaseRecord {
                lease_until_ms: until(ttl_ms),
                ..row.clone()
            })
        }
        Request::Release { owner, epoch } => {
            let row = holder(owner, epoch)?;
            Ok(LeaseRecord {
                lease_until_ms: row.lease_until_ms.min(now_ms),
                ..row.clone()
            })
        }
        Request::Forget { owner, epoch } => {
            let row = holder(owner, epoch)?;
            unexpired(row)?;
            Ok(LeaseRecord {
                forgotten_at_epoch: row.forgotten_at_epoch.max(epoch),
                ..row.clone()
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_measured_in_utf16_units() {
        assert!(assert_text("owner", &"😀".repeat(100)).is_ok());
        assert!(matches!(
            assert_text("owner", &"😀".repeat(101)),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(assert_text("owner", &"é".repeat(200)).is_ok());
        assert!(assert_text("owner", &"é".repeat(201)).is_err());
        assert!(assert_text("owner", "").is_err());
    }

    #[test]
    fn ttl_and_epoch_bounds() {
        assert!(assert_lease_ttl(99).is_err());
        assert_eq!(assert_lease_ttl(100).unwrap(), 100);
        assert_eq!(assert_lease_ttl(600_000).unwrap(), 600_000);
        assert!(assert_lease_ttl(600_001).is_err());
        assert!(assert_epoch(0).is_err());
        assert!(assert_epoch(-1).is_err());
        assert_eq!(assert_epoch(1).unwrap(), 1);
    }

    #[test]
    fn a_store_clock_no_door_could_read_back_decides_nothing() {
        let acquire = Request::acquire("k", "a", 1_000).unwrap();
        for now in [1 << 62, MAX_STORE_CLOCK_MS + 1, -1] {
            assert!(
                matches!(
                    decide("k", None, &acquire, now, None),
                    Err(Error::InvalidArgument { .. })
                ),
                "{now}"
            );
        }
        let granted = decide("k", None, &acquire, MAX_STORE_CLOCK_MS, None).unwrap();
        assert!(granted.lease_until_ms as f64 <= 9_007_199_254_740_991.0);
    }

    #[test]
    fn op_names_round_trip() {
        for op in [
            LeaseOp::Acquire,
            LeaseOp::Renew,
            LeaseOp::Release,
            LeaseOp::Forget,
        ] {
            assert_eq!(LeaseOp::parse(op.as_str()), Some(op));
        }
        assert_eq!(LeaseOp::parse("delete"), None);
    }
}
