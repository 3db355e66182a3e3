//! One replica keeps many tenant leases alive with batched renewals.
//!
//! A replica that serves thousands of tenants renews each lease a few times per TTL. Renewing
//! them one by one costs one transaction and one durable write each; a [`LeaseKeeper`]
//! renews every lease that is due in one [`LeaseStore::renew_batch`] call per batch, so a
//! round costs one durable write per `max_batch` leases.
//!
//! # The rules
//!
//! * A lease enters a keeper only through [`LeaseKeeper::acquire`], so every kept lease has
//!   the keeper's store, owner, TTL and margin: a batch is renewed with one TTL, and a lease
//!   adopted from elsewhere could belong to another store or owner.
//! * Each lease is due `ttl * renew_fraction` after its last renewal was sent. A round starts
//!   when at least one lease is due and takes, with it, every lease that would fall due
//!   within the next half interval: renewing those a little early costs nothing, while
//!   renewing them on their own would cost one more durable write each. Outside outages,
//!   rounds are therefore more than half an interval apart, wherever the acquisitions fell.
//! * Each answer moves the lease's fence exactly as [`TenantLease::renew`] does (the same
//!   code applies it): `fence = monotonic time read before the batch was sent + granted TTL -
//!   margin`, and the fence never moves back.
//! * A refused renewal (LEASE_LOST for that key) marks the lease lost: its gate answers
//!   FENCED(lease_lost) from then on, the keeper drops it and reports [`KeeperEvent::Lost`].
//! * A failure of the whole batch (the store unreachable or contended) leaves every fence as
//!   it was. The round stops there, since the next batch would most likely wait for the same
//!   store, and every lease of the round is tried again a quarter interval later, then again,
//!   for as long as it is kept. When a lease's fence passes meanwhile its gate closes on its
//!   own (FENCED(lease_expired_locally)) and the keeper reports [`KeeperEvent::FencedLocally`]
//!   once. The keeper keeps renewing it, as a lone [`TenantLease`] would resume: a renewal
//!   granted at the unchanged epoch proves nobody else held the tenant in between, so the
//!   gate reopens and [`KeeperEvent::Resumed`] is reported. If the lease ran out in the
//!   store meanwhile the store refuses, and the lease is lost for good.
//! * A lease closed through its own handle (released, or refused on a renewal the host made
//!   itself) leaves the keeper at its next round without an event: the host saw it happen.
//!
//! # Threads and calls
//!
//! [`LeaseKeeper::start`] runs the rounds on one background thread per keeper, sleeping
//! until the next lease falls due. [`LeaseKeeper::without_thread`] leaves the rounds to
//! the caller of [`LeaseKeeper::tick`]; with a [`crate::ManualClock`] that makes every rule
//! above deterministic to test. The store is only called from the rounds and from the
//! explicit calls ([`LeaseKeeper::acquire`], [`LeaseKeeper::remove`],
//! [`LeaseKeeper::shutdown`]), which block until the store answered.
//!
//! # For bindings
//!
//! [`LeaseKeeper`] is `Send + Sync` and has no lifetime: hold it by value or in an `Arc`.
//! The kept leases are plain `Arc<TenantLease>` handles, so a binding's existing lease
//! wrapper serves them unchanged (`assert_held`, `is_held`, `remaining_ms`, `epoch`, `key`).
//! Run `acquire`, `remove`, `shutdown` and `tick` off the host's event loop and without its
//! global lock: they wait for the store. The clock is read on the keeper's thread, so it
//! must be callable from any thread (the system clock, or a manual clock).
//!
//! Events go to one `Fn(KeeperEvent)` handler, called on the keeper's thread (or on the
//! caller of `tick`), one event at a time, after the round's state is in place: when `Lost`
//! arrives, the keeper no longer holds the key and its gate already says lease_lost. A
//! handler that panics is caught (under the default `panic = "unwind"`) and the keeper
//! carries on; a handler that blocks delays
//! the renewals, so a binding forwards events rather than running host code inline (a Node
//! threadsafe function, a C callback with its user data that the host keeps short). Once
//! [`LeaseKeeper::shutdown`] or `drop` returned, the handler is never called again: both
//! wait for a call that is running on another thread, so C user data may be freed right
//! after. A handler that needs a host lock to run (Python's GIL) must therefore not be
//! waited for while that lock is held: release it around `shutdown` and around dropping
//! the keeper. From inside the handler, a keeper may be dropped or shut down, but not ticked.

use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::clock::{ms_to_duration, read_monotonic, MonotonicClock, SystemMonotonicClock};
use crate::errors::{Error, Result};
use crate::lease_store::{assert_lease_ttl, assert_text, LeaseStore};
use crate::tenant_lease::{assert_lease_margin, LeaseOptions, TenantLease};

mod rounds;
use rounds::run;

/// Renew a lease after a third of its TTL: a round that fails still leaves the better part
/// of the lease for retries before it runs out.
pub const DEFAULT_RENEW_FRACTION: f64 = 1.0 / 3.0;

/// Leases per store transaction. SQLite keeps its connection (and its file's write lock)
/// for the whole batch, so a batch bounds how long other callers of the store wait.
pub const DEFAULT_MAX_BATCH: usize = 1_000;

/// What the keeper tells its host.
pub type EventHandler = Box<dyn Fn(KeeperEvent) + Send + Sync>;

/// What [`LeaseKeeper::start`] needs to know.
pub struct KeeperOptions {
    pub store: Arc<dyn LeaseStore>,
    /// The owner of every kept lease.
    pub replica_id: String,
    pub ttl_ms: i64,
    pub margin_ms: i64,
    pub clock: Arc<dyn MonotonicClock>,
    /// The part of the TTL between two renewals of a lease; [`DEFAULT_RENEW_FRACTION`].
    pub renew_fraction: f64,
    /// The most leases per store call; [`DEFAULT_MAX_BATCH`].
    pub max_batch: usize,
    /// Told what happens to the leases without the host asking, on the keeper's thread.
    pub on_event: Option<EventHandler>,
}

impl KeeperOptions {
    /// The options with the system clock, the default fraction and batch size, and no handler.
    pub fn new(
        store: Arc<dyn LeaseStore>,
        replica_id: impl Into<String>,
        ttl_ms: i64,
        margin_ms: i64,
    ) -> KeeperOptions {
        KeeperOptions {
            store,
            replica_id: replica_id.into(),
            ttl_ms,
            margin_ms,
            clock: Arc::new(SystemMonotonicClock),
            renew_fraction: DEFAULT_RENEW_FRACTION,
            max_batch: DEFAULT_MAX_BATCH,
            on_event: None,
        }
    }
}

/// Something that happened to the kept leases without the host asking.
#[derive(Debug)]
#[non_exhaustive]
pub enum KeeperEvent {
    /// The store refused a renewal: another replica may hold the tenant now. The keeper
    /// dropped the lease; its gate answers FENCED(lease_lost).
    Lost { key: String, epoch: i64, error: Error },
    /// The fence passed before a renewal was granted; the gate answers
    /// FENCED(lease_expired_locally). Told once until the lease resumes.
    FencedLocally { key: String, epoch: i64 },
    /// A renewal moved the fence of a locally fenced lease ahead again: the gate is open.
    Resumed { key: String, epoch: i64 },
    /// Renewals could not be made (the store failed, or answered one key with something
    /// other than a grant or a refusal); `leases` will be tried again.
    RenewFailed { error: Error, leases: usize },
}

/// The kind of a [`KeeperEvent`], with a stable name for the bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeeperEventKind {
    Lost,
    FencedLocally,
    Resumed,
    RenewFailed,
}

impl KeeperEventKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            KeeperEventKind::Lost => "lost",
            KeeperEventKind::FencedLocally => "fenced_locally",
            KeeperEventKind::Resumed => "resumed",
            KeeperEventKind::RenewFailed => "renew_failed",
        }
    }
}

impl KeeperEvent {
    pub fn kind(&self) -> KeeperEventKind {
        match self {
            KeeperEvent::Lost { .. } => KeeperEventKind::Lost,
            KeeperEvent::FencedLocally { .. } => KeeperEventKind::FencedLocally,
            KeeperEvent::Resumed { .. } => KeeperEventKind::Resumed,
            KeeperEvent::RenewFailed { .. } => KeeperEventKind::RenewFailed,
        }
    }

    /// The lease the event is about; none for a failure that concerns many.
    pub fn key(&self) -> Option<&str> {
        match self {
            KeeperEvent::Lost { key, .. }
            | KeeperEvent::FencedLocally { key, .. }
            | KeeperEvent::Resumed { key, .. } => Some(key),
            KeeperEvent::RenewFailed { .. } => None,
        }
    }

    pub fn epoch(&self) -> Option<i64> {
        match self {
            KeeperEvent::Lost { epoch, .. }
            | KeeperEvent::FencedLocally { epoch, .. }
            | KeeperEvent::Resumed { epoch, .. } => Some(*epoch),
            KeeperEvent::RenewFailed { .. } => None,
        }
    }

    pub fn error(&self) -> Option<&Error> {
        match self {
            KeeperEvent::Lost { error, .. } | KeeperEvent::RenewFailed { error, .. } => Some(error),
            KeeperEvent::FencedLocally { .. } | KeeperEvent::Resumed { .. } => None,
        }
    }
}

/// What one call of [`LeaseKeeper::tick`] did.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TickReport {
    /// Store calls made (batches sent).
    pub batches: usize,
    pub renewed: usize,
    pub lost: usize,
    /// Due leases that were not renewed and will be tried again.
    pub failed: usize,
    /// When the next round is due on the keeper's clock; `None` when no lease is kept.
    pub next_due_ms: Option<f64>,
}

/// What [`LeaseKeeper::shutdown`] did with the leases it kept.
#[derive(Debug, Default)]
pub struct ShutdownReport {
    /// Leases released in the store.
    pub released: Vec<String>,
    /// Leases whose gate is closed but whose store could not be told: they run out at
    /// their TTL.
    pub failed: Vec<(String, Error)>,
    /// Leases not reached before the deadline: no longer renewed, so their gates close at
    /// their fences and the store lets them run out. Their handles can still release them.
    pub timed_out: Vec<String>,
}

/// Keeps many leases of one owner on one store alive. See the [module docs](self).
pub struct LeaseKeeper {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for LeaseKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseKeeper")
            .field("replica_id", &self.shared.replica_id)
            .field("ttl_ms", &self.shared.ttl_ms)
            .field("leases", &self.len())
            .finish_non_exhaustive()
    }
}

struct Entry {
    lease: Arc<TenantLease>,
    /// When the next renewal is due, on the keeper's clock.
    next_at_ms: f64,
    /// The fence as last seen; only used to wake up in time to report it.
    fence_at_ms: f64,
    fenced_reported: bool,
}

struct Schedule {
    /// When the thread wakes up for its next round.
    planned_ms: f64,
    /// The earliest due time added since the running round started, which that round's
    /// own plan may not include.
    pending_ms: f64,
    stop: bool,
    running: bool,
}

struct Shared {
    store: Arc<dyn LeaseStore>,
    replica_id: String,
    ttl_ms: i64,
    margin_ms: i64,
    clock: Arc<dyn MonotonicClock>,
    interval_ms: f64,
    max_batch: usize,
    stopped: AtomicBool,
    entries: Mutex<HashMap<String, Entry>>,
    /// One round at a time, whoever runs it.
    round: Mutex<()>,
    schedule: Mutex<Schedule>,
    wake: Condvar,
    handler: Mutex<Option<EventHandler>>,
    handler_closed: AtomicBool,
}

thread_local! {
    /// The keepers whose handler this thread is running, innermost last: a handler that
    /// drops its keeper must not wait for itself.
    static EMITTING: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// Every critical section of the keeper leaves its data consistent at each step, and
/// handler panics are caught before they could poison anything, so a poisoned lock (a
/// panicking store or clock) is safe to take over.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn shut_down() -> Error {
    Error::unavailable("the lease keeper is shut down")
}

enum Outcome {
    Renewed {
        sent_at_ms: f64,
    },
    Lost,
    /// Closed through its handle while the batch was out.
    Closed,
    Retry,
}

impl LeaseKeeper {
    /// Starts a keeper with its own renewal thread.
    pub fn start(options: KeeperOptions) -> Result<LeaseKeeper> {
        let keeper = LeaseKeeper::without_thread(options)?;
        lock(&keeper.shared.schedule).running = true;
        let shared = Arc::clone(&keeper.shared);
        let spawned = std::thread::Builder::new()
            // Not the replica id: a thread name may not hold a NUL, an owner may.
            .name("gotry-keeper".to_owned())
            .spawn(move || run(shared));
        match spawned {
            Ok(handle) => {
                *lock(&keeper.thread) = Some(handle);
                Ok(keeper)
            }
            Err(e) => {
                lock(&keeper.shared.schedule).running = false;
                Err(Error::unavailable(format!(
                    "cannot start the keeper's thread: {e}"
                )))
            }
        }
    }

    /// A keeper whose rounds run only when [`LeaseKeeper::tick`] is called: for tests with a
    /// manual clock, and for hosts that drive their own timer.
    pub fn without_thread(options: KeeperOptions) -> Result<LeaseKeeper> {
        assert_text("replica id", &options.replica_id)?;
        assert_lease_ttl(options.ttl_ms)?;
        assert_lease_margin(options.margin_ms, options.ttl_ms)?;
        let interval_ms = options.ttl_ms as f64 * options.renew_fraction;
        let usable_ms = (options.ttl_ms - options.margin_ms) as f64;
        // NaN fails both comparisons, so it is refused too.
        if !(interval_ms >= 1.0 && interval_ms < usable_ms) {
            return Err(Error::invalid_argument(format!(
                "the renew fraction must leave at least 1 ms between renewals and renew before the \
                 fence ({usable_ms} ms after a renewal for a ttl of {} and a margin of {}), got {}",
                options.ttl_ms, options.margin_ms, options.renew_fraction
            )));
        }
        if options.max_batch == 0 {
            return Err(Error::invalid_argument(
                "a keeper's max batch is at least one lease",
            ));
        }
        Ok(LeaseKeeper {
            shared: Arc::new(Shared {
                store: options.store,
                replica_id: options.replica_id,
                ttl_ms: options.ttl_ms,
                margin_ms: options.margin_ms,
                clock: options.clock,
                interval_ms,
                max_batch: options.max_batch,
                stopped: AtomicBool::new(false),
                entries: Mutex::new(HashMap::new()),
                round: Mutex::new(()),
                schedule: Mutex::new(Schedule {
                    planned_ms: f64::INFINITY,
                    pending_ms: f64::INFINITY,
                    stop: false,
                    running: false,
                }),
                wake: Condvar::new(),
                handler: Mutex::new(options.on_event),
                handler_closed: AtomicBool::new(false),
            }),
            thread: Mutex::new(None),
        })
    }

    /// Acquires `key` for the keeper's owner and keeps it renewed until it is removed, lost
    /// or the keeper shuts down. Fails as [`TenantLease::acquire`] does (LEASE_HELD,
    /// LEASE_LOST, LEASE_STORE_UNAVAILABLE), and with LEASE_STORE_UNAVAILABLE once the
    /// keeper is shut down.
    pub fn acquire(&self, key: &str) -> Result<Arc<TenantLease>> {
        let shared = &self.shared;
        if shared.stopped.load(Ordering::SeqCst) {
            return Err(shut_down());
        }
        // Read before the request, so the first renewal comes no later than the rule says.
        let sent_before = read_monotonic(&*shared.clock)?;
        let lease = Arc::new(TenantLease::acquire(LeaseOptions {
            key: key.to_owned(),
            replica_id: shared.replica_id.clone(),
            store: Arc::clone(&shared.store),
            ttl_ms: shared.ttl_ms,
            margin_ms: shared.margin_ms,
            clock: Arc::clone(&shared.clock),
        })?);
        let next_at_ms = sent_before + shared.interval_ms;
        {
            let mut entries = lock(&shared.entries);
            // Checked under the lock that shutdown drains: a lease is either drained by it or
            // refused here, never left held and unrenewed.
            if shared.stopped.load(Ordering::SeqCst) {
                drop(entries);
                // Best effort: the caller learns the keeper is gone, the lease runs out anyway.
                let _ = lease.release();
                return Err(shut_down());
            }
            // A record still here for this key is closed or stale: the store just granted a
            // new epoch, which it does only once the previous one ran out or was released.
            entries.insert(
                key.to_owned(),
                Entry {
                    lease: Arc::clone(&lease),
                    next_at_ms,
                    fence_at_ms: lease.gate_state().1,
                    fenced_reported: false,
                },
            );
        }
        shared.wake_by(next_at_ms);
        Ok(lease)
    }

    /// Stops keeping `key` and releases it (the gate closes first, then the store is told).
    /// `Ok(false)` when the key was not kept. A store failure is returned after the gate
    /// closed; the lease then runs out at its TTL.
    pub fn remove(&self, key: &str) -> Result<bool> {
        let entry = lock(&self.shared.entries).remove(key);
        match entry {
            Some(entry) => entry.lease.release().map(|()| true),
            None => Ok(false),
        }
    }

    /// The kept lease of `key`, if any.
    pub fn get(&self, key: &str) -> Option<Arc<TenantLease>> {
        lock(&self.shared.entries)
            .get(key)
            .map(|entry| Arc::clone(&entry.lease))
    }

    /// How many leases are kept (including any closed through their handle since the last
    /// round).
    /// The replica id every lease of this keeper is held under.
    pub fn replica_id(&self) -> &str {
        &self.shared.replica_id
    }

    pub fn ttl_ms(&self) -> i64 {
        self.shared.ttl_ms
    }

    pub fn margin_ms(&self) -> i64 {
        self.shared.margin_ms
    }

    /// What [`LeaseKeeper::shutdown`] waits when the host names no timeout: one TTL. Past
    /// it, every lease the keeper held has gone a whole TTL unrenewed and has run out in
    /// the store anyway, so a release would hand nothing back early.
    pub fn default_shutdown_timeout(&self) -> Duration {
        Duration::from_millis(self.shared.ttl_ms.unsigned_abs())
    }

    pub fn len(&self) -> usize {
        lock(&self.shared.entries).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs one round if a lease is due on the keeper's clock, and reports it. This is what
    /// the keeper's thread calls; a keeper made [`LeaseKeeper::without_thread`] needs it
    /// called. Events of the round reach the handler on the calling thread before it
    /// returns. Fails once the keeper is shut down, when the clock fails, and when called
    /// from the keeper's own handler.
    pub fn tick(&self) -> Result<TickReport> {
        self.shared.tick()
    }

    /// Stops renewing and releases every kept lease, starting no release after `timeout`
    /// (on the keeper's clock). Waits for the thread to finish the batch it is sending for
    /// at most the same time. Each release closes the gate before it tells the store, and
    /// a store call that started before the deadline is waited for (the store bounds it, by
    /// its busy timeout for SQLite). The handler is never called after this returns.
    /// Calling it again returns an empty report.
    pub fn shutdown(&self, timeout: Duration) -> ShutdownReport {
        let shared = &self.shared;
        let deadline_ms = shared
            .clock
            .now_ms()
            .map(|now| now + timeout.as_secs_f64() * 1000.0);
        shared.stop();
        if let Some(handle) = lock(&self.thread).take() {
            let on_own_thread = handle.thread().id() == std::thread::current().id();
            if !on_own_thread && shared.wait_stopped(&deadline_ms) {
                // The thread ended its loop; joining only collects it. A thread still in the
                // store is left to end on its own.
                let _ = handle.join();
            }
        }
        shared.close_handler();
        let mut drained: Vec<(String, Entry)> = lock(&shared.entries).drain().collect();
        drained.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut report = ShutdownReport::default();
        // Closed through its handle: the host already released it or saw it lost.
        let open: Vec<(String, Arc<TenantLease>)> = drained
            .into_iter()
            .filter(|(_, entry)| entry.lease.gate_state().0.is_none())
            .map(|(key, entry)| (key, entry.lease))
            .collect();
        for chunk in open.chunks(shared.max_batch) {
            // Without a clock reading the deadline cannot be checked; stopping is what keeps
            // the call bounded, and the lease's own gate fails closed on the same clock.
            if !shared.before(&deadline_ms) {
                report.timed_out.extend(chunk.iter().map(|(key, _)| key.clone()));
                continue;
            }
            let held: Vec<&(String, Arc<TenantLease>)> = chunk
                .iter()
                .filter(|(_, lease)| lease.close_for_release())
                .collect();
            let pairs: Vec<(&str, i64)> = held
                .iter()
                .map(|(key, lease)| (key.as_str(), lease.epoch()))
                .collect();
            let answers = match shared.store.release_batch(&shared.replica_id, &pairs) {
                Ok(answers) => answers,
                Err(error) if pairs.len() == 1 => vec![Err(error)],
                // The batch failed as a whole: each lease is tried on its own, so that each
                // gets its own answer (and a store that recovered releases the rest).
                Err(_) => pairs
                    .iter()
                    .map(|&(key, epoch)| {
                        if shared.before(&deadline_ms) {
                            shared.store.release(key, &shared.replica_id, epoch)
                        } else {
                            Err(Error::unavailable("the shutdown deadline passed"))
                        }
                    })
                    .collect(),
            };
            for ((key, _), answer) in held.into_iter().zip(answers) {
                match answer {
                    // Lost meanwhile: someone else holds it, which is what a release wants.
                    Ok(_) | Err(Error::LeaseLost { .. }) => report.released.push(key.clone()),
                    Err(error) => report.failed.push((key.clone(), error)),
                }
            }
        }
        report
    }
}

impl Drop for LeaseKeeper {
    /// Stops the thread without waiting for the store: a batch in flight finishes on its
    /// own and its answers are still applied to the gates, but no event is told. Leases are
    /// not released (that would wait for the store): their gates close at their fences and
    /// the store lets them run out. Call [`LeaseKeeper::shutdown`] to hand them back at once.
    fn drop(&mut self) {
        self.shared.stop();
        self.shared.close_handler();
        // Dropping the handle detaches the thread; it holds what it needs until it ends.
        drop(lock(&self.thread).take());
    }
}
