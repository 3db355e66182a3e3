//! The holder's side of a tenant lease.
//!
//! A replica owns a tenant between a granted acquire and the first of: its own release, a
//! refused renewal, or its local fence. The fence is measured on the holder's monotonic
//! clock from *before* the request was sent,
//!
//! ```text
//! fence = sent_at + granted_ttl - margin
//! ```
//!
//! so the round trip, the store's clock and any skew between the two clocks can only make
//! the holder stop earlier than the store would let it. [`TenantLease::assert_held`] is the
//! synchronous gate of the write path: a write is acknowledged only if the gate passes
//! before and after it. A holder paused between its check and its acknowledgement is not
//! visible to the fence; the durable layer scopes copies by epoch for that case.

use std::collections::BTreeSet;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::clock::{read_monotonic, MonotonicClock};
use crate::errors::{Error, FenceReason, Result};
use crate::lease_store::{assert_lease_ttl, LeaseGrant, LeaseRecord, LeaseStore};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Held,
    Released,
    Lost,
}

#[derive(Debug)]
struct HolderState {
    phase: Phase,
    fence_at_ms: f64,
}

/// What [`TenantLease::acquire`] needs to know.
#[derive(Clone)]
pub struct LeaseOptions {
    pub key: String,
    pub replica_id: String,
    pub store: Arc<dyn LeaseStore>,
    pub ttl_ms: i64,
    pub margin_ms: i64,
    pub clock: Arc<dyn MonotonicClock>,
}

/// A held lease. `Send + Sync`: the write gate may be checked from any thread while
/// another renews.
pub struct TenantLease {
    key: String,
    replica_id: String,
    epoch: i64,
    /// Drawn at random for each grant: two grants of one epoch (a lease store that lost
    /// commits can issue one twice, even to the same replica) are two tenures.
    tenure_id: u64,
    forgotten_at_epoch: i64,
    /// This tenure is marked forgotten, by this holder or (seen at a renewal) by an operator
    /// through the store: copies it would write now fall below the floor, where no restore
    /// ever looks.
    marked_forgotten: std::sync::atomic::AtomicBool,
    store: Arc<dyn LeaseStore>,
    clock: Arc<dyn MonotonicClock>,
    ttl_ms: i64,
    margin_ms: i64,
    state: Mutex<HolderState>,
    turns: Arc<TurnQueue>,
}

impl std::fmt::Debug for TenantLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantLease")
            .field("key", &self.key)
            .field("replica_id", &self.replica_id)
            .field("epoch", &self.epoch)
            .field("state", &*self.state())
            .finish_non_exhaustive()
    }
}

/// A margin is an integer in `[0, ttl)`: a margin of the whole TTL would fence at once.
pub fn assert_lease_margin(margin_ms: i64, ttl_ms: i64) -> Result<i64> {
    if (0..ttl_ms).contains(&margin_ms) {
        Ok(margin_ms)
    } else {
        Err(Error::invalid_argument(format!(
            "a lease margin is an integer from 0 to below the ttl, got {margin_ms} for a ttl of {ttl_ms}"
        )))
    }
}

impl TenantLease {
    /// Acquires the lease in the store and starts holding it.
    ///
    /// Fails with LEASE_HELD when another holder's lease is unexpired, with LEASE_LOST when
    /// the round trip consumed the whole usable grant (the grant is handed back first), and
    /// with LEASE_STORE_UNAVAILABLE when the store cannot answer.
    pub fn acquire(options: LeaseOptions) -> Result<TenantLease> {
        assert_lease_ttl(options.ttl_ms)?;
        assert_lease_margin(options.margin_ms, options.ttl_ms)?;
        let sent_at = read_monotonic(&*options.clock)?;
        let grant = options
            .store
            .acquire(&options.key, &options.replica_id, options.ttl_ms)?;
        let lease = TenantLease {
            epoch: grant.record.epoch,
            tenure_id: crate::plumbing::random_u64(),
            forgotten_at_epoch: grant.record.forgotten_at_epoch,
            marked_forgotten: std::sync::atomic::AtomicBool::new(false),
            state: Mutex::new(HolderState {
                phase: Phase::Held,
                fence_at_ms: fence_at(sent_at, grant.ttl_ms, options.margin_ms),
            }),
            key: options.key,
            replica_id: options.replica_id,
            store: options.store,
            clock: options.clock,
            ttl_ms: options.ttl_ms,
            margin_ms: options.margin_ms,
            turns: Arc::default(),
        };
        if grant.record.owner != lease.replica_id || grant.record.key != lease.key {
            return Err(Error::lease_lost(format!(
                "{}: the store granted the lease to {}",
                lease.key, grant.record.owner
            )));
        }
        let consumed = match read_monotonic(&*lease.clock) {
            Ok(now) => lease.state().fence_at_ms <= now,
            Err(e) => {
                // Without a reading the fence cannot be trusted: hand the grant back.
                let _ = lease.release();
                return Err(e);
            }
        };
        if consumed {
            // Holding an epoch that is already fenced would only delay the next owner.
            let _ = lease.release();
            return Err(Error::lease_lost(format!(
                "{}: the grant of epoch {} was used up by the round trip",
                lease.key, lease.epoch
            )));
        }
        Ok(lease)
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn replica_id(&self) -> &str {
        &self.replica_id
    }

    pub fn epoch(&self) -> i64 {
        self.epoch
    }

    /// This grant's own name, beside its epoch (see the durable copies' tenure marker).
    pub(crate) fn tenure_id(&self) -> u64 {
        self.tenure_id
    }

    /// Durable copies up to this epoch are dead. Fixed for the whole tenure: only the
    /// holder can raise it.
    pub fn forgotten_at_epoch(&self) -> i64 {
        self.forgotten_at_epoch
    }

    /// The store this lease was granted by: what the durable layer reads before it deletes.
    pub fn store(&self) -> &Arc<dyn LeaseStore> {
        &self.store
    }

    pub fn ttl_ms(&self) -> i64 {
        self.ttl_ms
    }

    pub fn margin_ms(&self) -> i64 {
        self.margin_ms
    }

    fn state(&self) -> MutexGuard<'_, HolderState> {
        // Every critical section only assigns plain values, so a poisoned lock holds a
        // consistent state.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn fenced(&self, reason: FenceReason) -> Error {
        Error::Fenced {
            reason,
            key: self.key.clone(),
            epoch: self.epoch,
        }
    }

    fn closed_reason(phase: Phase) -> Option<FenceReason> {
        match phase {
            Phase::Held => None,
            Phase::Released => Some(FenceReason::LeaseReleased),
            Phase::Lost => Some(FenceReason::LeaseLost),
        }
    }

    /// The synchronous write gate: FENCED unless the lease is held and its fence is ahead.
    pub fn assert_held(&self) -> Result<()> {
        let (phase, fence_at_ms) = {
            let state = self.state();
            (state.phase, state.fence_at_ms)
        };
        if let Some(reason) = TenantLease::closed_reason(phase) {
            return Err(self.fenced(reason));
        }
        // The clock is read outside the lock: a host clock may call back into the host. A
        // reading that is no point in time (NaN, an infinity) cannot show the fence is ahead:
        // the gate is closed, as FENCED like any closed gate (NaN would compare as open). A
        // clock that fails says so with its own error.
        let now = self.clock.now_ms()?;
        if now.is_finite() && now < fence_at_ms {
            Ok(())
        } else {
            Err(self.fenced(FenceReason::LeaseExpiredLocally))
        }
    }

    /// Why the gate is closed, if it is, and the fence, read together without a clock
    /// reading: the keeper checks many leases against one reading of its clock.
    pub(crate) fn gate_state(&self) -> (Option<FenceReason>, f64) {
        let state = self.state();
        (TenantLease::closed_reason(state.phase), state.fence_at_ms)
    }

    pub fn is_held(&self) -> bool {
        self.assert_held().is_ok()
    }

    /// Milliseconds until the local fence; zero or negative once it passed.
    pub fn remaining_ms(&self) -> Result<f64> {
        let fence_at_ms = self.state().fence_at_ms;
        Ok(fence_at_ms - read_monotonic(&*self.clock)?)
    }

    /// A place in this holder's queue of renewals and releases, taken now. Async hosts take
    /// it on their own thread at call time and run the operation later on a worker, so
    /// operations settle in the order they were called.
    pub fn take_turn(&self) -> Turn {
        self.turns.take()
    }

    /// Extends the lease; the epoch stays. A refusal is terminal (LEASE_LOST, and the gate
    /// answers FENCED(lease_lost) from then on). Any other failure leaves the fence as it
    /// was: the holder fails closed when it passes, and a later renewal resumes it, since an
    /// unchanged epoch proves that nobody else held the tenant in between.
    pub fn renew(&self) -> Result<()> {
        self.renew_in_turn(self.take_turn())
    }

    /// [`TenantLease::renew`] at a place taken earlier with [`TenantLease::take_turn`].
    pub fn renew_in_turn(&self, turn: Turn) -> Result<()> {
        let _turn = turn.wait();
        if let Some(reason) = TenantLease::closed_reason(self.state().phase) {
            return Err(self.fenced(reason));
        }
        let sent_at = read_monotonic(&*self.clock)?;
        let outcome = self
            .store
            .renew(&self.key, &self.replica_id, self.epoch, self.ttl_ms);
        self.apply_renewal(sent_at, outcome)
    }

    /// Applies the store's answer to a renewal sent at `sent_at_ms`: the one rule that both
    /// [`TenantLease::renew`] and the keeper's batched renewals follow. A closed lease stays
    /// closed whatever the answer: a refusal is terminal, and a release is never undone.
    pub(crate) fn apply_renewal(&self, sent_at_ms: f64, outcome: Result<LeaseGrant>) -> Result<()> {
        let outcome = outcome.and_then(|grant| {
            // A batch answers many keys: an answer for another key is no proof for this one.
            if grant.record.epoch != self.epoch
                || grant.record.owner != self.replica_id
                || grant.record.key != self.key
            {
                Err(Error::lease_lost(format!(
                    "{}: the renewal answered for {} epoch {} of {}",
                    self.key, grant.record.key, grant.record.epoch, grant.record.owner
                )))
            } else {
                Ok(grant)
            }
        });
        let mut state = self.state();
        if let Some(reason) = TenantLease::closed_reason(state.phase) {
            return Err(self.fenced(reason));
        }
        match outcome {
            Ok(grant) => {
                let fence = fence_at(sent_at_ms, grant.ttl_ms, self.margin_ms);
                state.fence_at_ms = state.fence_at_ms.max(fence);
                if grant.record.forgotten_at_epoch >= self.epoch {
                    self.marked_forgotten
                        .store(true, std::sync::atomic::Ordering::SeqCst);
                }
                Ok(())
            }
            Err(error) => {
                if matches!(error, Error::LeaseLost { .. }) {
                    state.phase = Phase::Lost;
                    crate::metrics::lease_lost();
                    crate::metrics::fenced(FenceReason::LeaseLost);
                }
                Err(error)
            }
        }
    }

    /// The graceful end of a tenure: stop acknowledging first, then tell the store so the
    /// next owner can start at once. Releasing twice, or after a loss, does nothing. When
    /// the store cannot be reached the error is returned, and the lease simply runs out.
    pub fn release(&self) -> Result<()> {
        self.release_in_turn(self.take_turn())
    }

    /// [`TenantLease::release`] at a place taken earlier with [`TenantLease::take_turn`].
    pub fn release_in_turn(&self, turn: Turn) -> Result<()> {
        let _turn = turn.wait();
        {
            let mut state = self.state();
            if state.phase != Phase::Held {
                return Ok(());
            }
            state.phase = Phase::Released;
            crate::metrics::fenced(FenceReason::LeaseReleased);
        }
        match self.store.release(&self.key, &self.replica_id, self.epoch) {
            Ok(_) | Err(Error::LeaseLost { .. }) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Closes the gate for a release that the caller sends to the store itself (a keeper
    /// handing back many leases in one batch): waits for this holder's earlier operations,
    /// then answers whether the lease was still held. Later renewals answer
    /// FENCED(lease_released) and later releases do nothing, as after [`TenantLease::release`].
    pub(crate) fn close_for_release(&self) -> bool {
        let _turn = self.take_turn().wait();
        let mut state = self.state();
        if state.phase != Phase::Held {
            return false;
        }
        state.phase = Phase::Released;
        crate::metrics::fenced(FenceReason::LeaseReleased);
        true
    }

    /// Marks every durable copy up to this epoch dead. Only a provably held lease may.
    pub fn mark_forgotten(&self) -> Result<LeaseRecord> {
        self.assert_held()?;
        let record = self
            .store
            .mark_forgotten(&self.key, &self.replica_id, self.epoch)?;
        self.marked_forgotten
            .store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(record)
    }

    /// Whether this tenure is marked forgotten: by [`TenantLease::mark_forgotten`], or in the
    /// store by anyone else, as the first renewal after it shows. Read from memory, so a copy
    /// pays no round trip for it; a forget made behind the holder's back is seen within one
    /// renewal interval.
    pub fn is_marked_forgotten(&self) -> bool {
        self.marked_forgotten.load(std::sync::atomic::Ordering::SeqCst)
    }
}

fn fence_at(sent_at_ms: f64, ttl_ms: i64, margin_ms: i64) -> f64 {
    sent_at_ms + ttl_ms as f64 - margin_ms as f64
}

/// A first-come, first-served queue: tickets are handed out in call order, and the holder of
/// ticket n runs only after every earlier ticket ran or was given up.
#[derive(Debug, Default)]
struct TurnQueue {
    state: Mutex<QueueState>,
    turn_changed: Condvar,
}

#[derive(Debug, Default)]
struct QueueState {
    next_ticket: u64,
    serving: u64,
    given_up: BTreeSet<u64>,
}

impl TurnQueue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn take(self: &Arc<TurnQueue>) -> Turn {
        let mut state = self.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        Turn {
            queue: Arc::clone(self),
            ticket,
        }
    }
}

/// One place in a holder's queue. Dropping it, run or not, lets the next place go.
#[derive(Debug)]
pub struct Turn {
    queue: Arc<TurnQueue>,
    ticket: u64,
}

impl Turn {
    /// Blocks until every earlier place was done with.
    fn wait(self) -> Turn {
        let mut state = self.queue.lock();
        while state.serving != self.ticket {
            state = self
                .queue
                .turn_changed
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        drop(state);
        self
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut state = self.queue.lock();
        if state.serving == self.ticket {
            state.serving += 1;
            loop {
                let next = state.serving;
                if !state.given_up.remove(&next) {
                    break;
                }
                state.serving += 1;
            }
            self.queue.turn_changed.notify_all();
        } else {
            state.given_up.insert(self.ticket);
        }
    }
}
