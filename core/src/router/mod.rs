//! One replica serves many tenants: the tenant router.
//!
//! The router is where the lease, the write gate and the copies meet for a host. It owns one
//! [`LeaseKeeper`] (every lease it holds is renewed in batches) and the copies of every
//! tenant it serves:
//!
//! * [`TenantRouter::open`] refuses with REPLICA_AT_CAPACITY before the lease or any file is
//!   touched, answers LEASE_HELD with the holder's record (the host forwards to
//!   `record.owner`), and otherwise acquires the lease and restores the newest valid copy
//!   into the tenant root before the first call can run.
//! * [`TenantRouter::run`] counts a call in flight and asserts the write gate before and
//!   after it. A tenant that drains refuses new calls (DRAINING); a lost lease stops the
//!   tenant at once (FENCED), and the host is told when its last call ended.
//! * Every failure of a call says whether its handler ran. Refused before it ran
//!   (ROUTER_CLOSED, LEASE_LOST, DRAINING, FENCED): nothing was written, a retry is safe.
//!   Ran, and its acknowledgement could not be confirmed (the gate closed meanwhile, or in
//!   `Strict` mode its copy failed): CALL_IN_DOUBT, whose cause says why; its write may be in
//!   a durable copy or not, so the host must not report it as refused.
//! * Copies follow the [`CopyPolicy`]: in `Async` mode a background thread copies every
//!   tenant that was written to, once per interval (each copy told as
//!   [`RouterEvent::Copied`]), and a failing durable store is reported and visible as lag; in
//!   `Strict` mode the call's acknowledgement waits for its copy.
//! * A copy reads a tenant's files while none of its calls runs: it holds new calls back
//!   and waits for the running ones, at most [`COPY_GRACE_MS`] (100 ms). Calls still running
//!   then delay that tenant's copy until they returned (TENANT_BUSY, not reported as a
//!   failure), and the held calls go on: no call waits behind the copier longer than the
//!   grace and one snapshot. A strict call waits for such calls at most [`QUIET_WAIT_MS`]
//!   (5 s).
//! * [`TenantRouter::handoff`] drains (told as [`RouterEvent::Draining`] as it begins; the
//!   lease keeps being renewed meanwhile), takes a final copy, releases. Calls still running
//!   at the timeout leave the tenant serving, with nothing flushed or released
//!   (DRAIN_TIMEOUT).
//!
//! # Time
//!
//! Every deadline and due time of the router (a tenant's next background copy, its lag, the
//! copy grace, a strict call's quiet wait, a drain's timeout) is measured on
//! `options.clock`, the clock its keeper and every tenant's write gate run on, so that one
//! clock moved by hand moves every rule at once. Each reading goes through the rule the
//! keeper follows for its own (a host clock may fail, and a reading that is no point in time
//! is refused): a call that needs a reading to answer fails with the clock's error (`open`,
//! `status`, `tick`; a copy, which then counts as a failed copy; a handoff, which then leaves
//! the tenant serving with nothing copied or released), as the keeper's `acquire` and `tick`
//! do. The copier thread, like the keeper's, looks again after a pause of real time, since
//! its clock cannot time it; meanwhile every gate on that clock fails closed, which is what
//! the host sees.
//!
//! [`TenantRouter::start`] runs the keeper's renewal thread and, in `Async` mode, a copier
//! thread that sleeps until the next copy is due. With [`RouterOptions::without_thread`]
//! neither runs, and [`TenantRouter::tick`] runs one round of both: with a
//! [`crate::ManualClock`] every rule above is deterministic to test.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::clock::{ms_to_duration, read_monotonic, MonotonicClock, MAX_SLEEP};
use crate::durable_store::DurableStore;
use crate::epoch_copies::{CopyId, EpochCopies, HostSnapshot, WrittenCopy};
use crate::errors::{Error, FenceReason, Result};
use crate::ids::{lease_key_for, tenant_root_for};
use crate::keeper::{KeeperEvent, KeeperOptions, LeaseKeeper, ShutdownReport, TickReport};
use crate::lease_store::LeaseStore;
use crate::paths::assert_root;
use crate::tenant_lease::TenantLease;

/// When a tenant's acknowledgements wait for its copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Copies run in the background; a failing store shows as lag, calls go on.
    Async,
    /// Every acknowledged call is in a durable copy first.
    Strict,
}

impl Durability {
    /// Every mode, in the order documentation lists them.
    pub const ALL: [Durability; 2] = [Durability::Async, Durability::Strict];

    /// The word hosts write in their options.
    pub const fn as_str(self) -> &'static str {
        match self {
            Durability::Async => "async",
            Durability::Strict => "strict",
        }
    }

    /// The mode a host's word names, if it names one (exactly, as the word is written).
    pub fn parse(word: &str) -> Option<Durability> {
        Durability::ALL.into_iter().find(|mode| mode.as_str() == word)
    }
}

/// When the router copies a tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyPolicy {
    /// In `Async` mode, how long after the last good copy a written tenant is copied again.
    pub interval: Duration,
    pub durability: Durability,
}

impl Default for CopyPolicy {
    fn default() -> CopyPolicy {
        CopyPolicy {
            interval: Duration::from_secs(30),
            durability: Durability::Async,
        }
    }
}

/// A host's check of a restored tenant root (see [`crate::FoldCheck`]), shareable with the
/// router's threads.
pub type SharedFoldCheck = Arc<dyn Fn(&Path) -> Result<bool> + Send + Sync>;

/// What the router tells its host without being asked.
#[derive(Debug)]
#[non_exhaustive]
pub enum RouterEvent {
    /// The lease was lost: the tenant refuses calls (FENCED) from now on.
    Lost { key: String, epoch: i64 },
    /// The tenant's last call ended after a loss or a handoff: its files may be closed.
    Closed { key: String, epoch: i64 },
    /// A background copy failed; the tenant's lag grows until one succeeds.
    CopyFailed { key: String, epoch: i64, error: Error },
    /// A background copy (`Async` durability) was written: the tenant's writes before it
    /// are in the durable store, so a host (or a test) waits on this rather than polling
    /// `status`. Told once per copy the copier (or [`TenantRouter::tick`]) writes; never for
    /// the copy a strict call or a handoff waits for, whose own answer says it (an event per
    /// strict call would cost a hop to the host's thread per write).
    Copied {
        key: String,
        copy: CopyId,
        /// What the copy made and stored ([`WrittenCopy::bytes_uploaded`]).
        bytes_uploaded: u64,
    },
    /// A handoff (or a close) began draining the tenant, before it waits for the calls in
    /// flight: from here the tenant refuses new calls (DRAINING). Told once per drain, so
    /// that a host stops routing the tenant's requests here (or knows its handoff began)
    /// without polling `status`. A drain ends with `Closed` once the tenant is released;
    /// one that timed out or failed is the handoff's answer, and the tenant serves again.
    Draining { key: String, epoch: i64 },
}

/// The kind of a [`RouterEvent`], with the stable name every door uses (the keeper's casing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouterEventKind {
    Lost,
    Closed,
    CopyFailed,
    Draining,
    Copied,
}

impl RouterEventKind {
    /// Every kind, in the order documentation lists them.
    pub const ALL: [RouterEventKind; 5] = [
        RouterEventKind::Lost,
        RouterEventKind::Closed,
        RouterEventKind::CopyFailed,
        RouterEventKind::Draining,
        RouterEventKind::Copied,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            RouterEventKind::Lost => "lost",
            RouterEventKind::Closed => "closed",
            RouterEventKind::CopyFailed => "copy_failed",
            RouterEventKind::Draining => "draining",
            RouterEventKind::Copied => "copied",
        }
    }
}

impl RouterEvent {
    pub fn kind(&self) -> RouterEventKind {
        match self {
            RouterEvent::Lost { .. } => RouterEventKind::Lost,
            RouterEvent::Closed { .. } => RouterEventKind::Closed,
            RouterEvent::CopyFailed { .. } => RouterEventKind::CopyFailed,
            RouterEvent::Draining { .. } => RouterEventKind::Draining,
            RouterEvent::Copied { .. } => RouterEventKind::Copied,
        }
    }
}

pub type RouterEventHandler = Arc<dyn Fn(RouterEvent) + Send + Sync>;

/// What [`TenantRouter::start`] needs to know. Built with [`RouterOptions::new`], so that a
/// later option is no breaking change.
#[non_exhaustive]
pub struct RouterOptions {
    pub lease_store: Arc<dyn LeaseStore>,
    pub durable_store: Arc<dyn DurableStore>,
    /// Every tenant's root is `tenant_root_for(state_root, org, tenant)`.
    pub state_root: PathBuf,
    pub replica_id: String,
    pub ttl_ms: i64,
    pub margin_ms: i64,
    /// The most tenants served at once; [`default_capacity`] when `None`.
    pub capacity: Option<usize>,
    pub copy_policy: CopyPolicy,
    /// How many copies of each tenant the router keeps (see [`EpochCopies::with_retention`]);
    /// [`DEFAULT_KEEP_COPIES`] unless set. 0 keeps every copy, for a host that runs `gc`
    /// itself: every door takes the number as it is.
    pub keep_copies: usize,
    pub clock: Arc<dyn MonotonicClock>,
    pub verify: Option<SharedFoldCheck>,
    /// Reads the files of a tenant root that the host has open (see [`HostSnapshot`]).
    pub snapshot: Option<HostSnapshot>,
    pub on_event: Option<RouterEventHandler>,
    /// No thread of the router's own: neither its keeper's renewal thread nor its copier
    /// runs, and their rounds run only when [`TenantRouter::tick`] is called (a test with a
    /// [`crate::ManualClock`], or a host that drives its own timer). Nothing renews the
    /// leases between two ticks, a draining tenant's included.
    pub without_thread: bool,
    /// Per-tenant series in the metrics text: each tenant the router lists gets its state,
    /// copy lag and calls in flight, labelled with its lease key (see [`crate::metrics`] for
    /// why the count is bounded by `capacity`). [`DEFAULT_TENANT_METRICS`] (off) unless set:
    /// every door takes the flag as it is.
    pub tenant_metrics: bool,
}

impl RouterOptions {
    /// The stores and the tenure's terms; everything else at its default (capacity from the
    /// descriptor limit, the default [`CopyPolicy`], the system clock, no host callbacks).
    pub fn new(
        lease_store: Arc<dyn LeaseStore>,
        durable_store: Arc<dyn DurableStore>,
        state_root: PathBuf,
        replica_id: String,
        ttl_ms: i64,
        margin_ms: i64,
    ) -> RouterOptions {
        RouterOptions {
            lease_store,
            durable_store,
            state_root,
            replica_id,
            ttl_ms,
            margin_ms,
            capacity: None,
            copy_policy: CopyPolicy::default(),
            keep_copies: DEFAULT_KEEP_COPIES,
            clock: Arc::new(crate::clock::SystemMonotonicClock),
            verify: None,
            snapshot: None,
            on_event: None,
            without_thread: false,
            tenant_metrics: DEFAULT_TENANT_METRICS,
        }
    }
}

/// Whether a router writes per-tenant series unless its host asks (see
/// [`RouterOptions::tenant_metrics`]): no, since a label per tenant is a series per tenant
/// on the host's metrics server, which its operator chooses to pay for.
pub const DEFAULT_TENANT_METRICS: bool = false;

/// The copies a router keeps of each tenant by default: enough that a restore finding the
/// newest ones damaged has older ones of the same tenure to fall back on, few enough that a
/// strict router, which writes a copy per acknowledged write, stores a bounded number.
pub const DEFAULT_KEEP_COPIES: usize = 8;

/// How long a strict call waits, in all, for a copy that holds it while other calls of its
/// tenant keep running, before it answers CALL_IN_DOUBT (cause TENANT_BUSY); milliseconds on
/// the router's clock.
pub const QUIET_WAIT_MS: f64 = 5_000.0;

/// How long a copy holds a tenant's new calls back while waiting for its running ones: what
/// a call may wait behind the copier beyond one snapshot. Calls still running then delay
/// that tenant's copy until they returned, and nobody else. Milliseconds on the router's
/// clock.
pub const COPY_GRACE_MS: f64 = 100.0;

/// The longest a thread waiting for a deadline (a drain, a copy's grace, a strict call's
/// quiet wait) blocks before it reads the router's clock again. The wait must end once the
/// clock passes the deadline, and a clock moved by hand (a test's, a drill's) or read
/// through the host (a Python object) tells nobody that it moved: so the waiter re-reads it
/// in bounded slices of real time and notices at most one slice late. Waking the waiters
/// from a manual clock when it moves would tie that clock to the router and still leave a
/// host's clock unheard. With the system clock it costs one reading a slice, only while a
/// drain or a copy waits for running calls.
const CLOCK_SLICE: Duration = Duration::from_millis(10);

/// How long a handoff (or a close) waits for a tenant's running calls when the host names no
/// timeout: one TTL. The keeper renews the lease meanwhile, so a drain may take longer than a
/// TTL; waiting one TTL gives calls as long as a lease lasts without renewals, which is what
/// the next replica would wait for anyway had this one died.
pub fn default_handoff_timeout(ttl_ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ttl_ms).unwrap_or(0))
}

/// Descriptors a served tenant costs: the ledger, its WAL and its shared-memory file.
const DESCRIPTORS_PER_TENANT: u64 = 3;

/// The capacity that keeps a replica inside its descriptor limit: about three descriptors a
/// tenant, after a quarter of the limit (at least 64) is left for sockets, the stores and
/// the host's own files. With the common soft limit of 1024 that is 256 tenants.
pub fn default_capacity() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given and nothing else.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        limit.rlim_cur
    } else {
        1024
    };
    let reserve = (soft / 4).max(64);
    usize::try_from(soft.saturating_sub(reserve) / DESCRIPTORS_PER_TENANT)
        .unwrap_or(usize::MAX)
        .max(1)
}

/// Where a tenant is in its life on this replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TenantState {
    Opening,
    Serving,
    Draining,
    /// The lease was lost; the tenant leaves the router when its last call ends.
    Lost,
    /// The router was closed while the tenant still had calls running (its drain timed
    /// out): its lease is no longer kept; it leaves the router when its last call ends.
    Closed,
}

impl TenantState {
    pub const fn as_str(self) -> &'static str {
        match self {
            TenantState::Opening => "opening",
            TenantState::Serving => "serving",
            TenantState::Draining => "draining",
            TenantState::Lost => "lost",
            TenantState::Closed => "closed",
        }
    }
}

/// A served tenant: where its files are and the lease that lets this replica write them.
#[derive(Debug)]
pub struct TenantHandle {
    pub key: String,
    pub root: PathBuf,
    pub lease: Arc<TenantLease>,
    /// The copy the tenure started from; `None` for an empty start.
    pub restored_from: Option<CopyId>,
}

impl TenantHandle {
    pub fn epoch(&self) -> i64 {
        self.lease.epoch()
    }
}

/// One tenant, as operators and metrics see it.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantStatus {
    pub key: String,
    pub state: TenantState,
    pub epoch: i64,
    pub in_flight: u64,
    pub last_copy: Option<CopyId>,
    /// Calls acknowledged since the last good copy began.
    pub writes_since_copy: u64,
    /// Milliseconds since the last good copy began (since the tenant opened, before one).
    pub lag_ms: u64,
    /// Why the last copy failed, if it did.
    pub last_copy_error: Option<String>,
}

/// What [`TenantRouter::close`] did with every tenant.
#[derive(Debug, Default)]
pub struct CloseReport {
    pub handed_off: Vec<String>,
    pub timed_out: Vec<String>,
    pub failed: Vec<(String, Error)>,
    pub keeper: ShutdownReport,
}

/// A tenant's place in its life, with the handle every state after opening has: no state
/// can be reached without it.
enum Life {
    Opening,
    Serving(Arc<TenantHandle>),
    Draining(Arc<TenantHandle>),
    Lost(Arc<TenantHandle>),
    Closed(Arc<TenantHandle>),
}

impl Life {
    fn state(&self) -> TenantState {
        match self {
            Life::Opening => TenantState::Opening,
            Life::Serving(_) => TenantState::Serving,
            Life::Draining(_) => TenantState::Draining,
            Life::Lost(_) => TenantState::Lost,
            Life::Closed(_) => TenantState::Closed,
        }
    }

    fn handle(&self) -> Option<&Arc<TenantHandle>> {
        match self {
            Life::Opening => None,
            Life::Serving(h) | Life::Draining(h) | Life::Lost(h) | Life::Closed(h) => Some(h),
        }
    }

    fn epoch(&self) -> i64 {
        self.handle().map_or(0, |h| h.epoch())
    }
}

struct Tenant {
    life: Life,
    in_flight: u64,
    writes_since_copy: u64,
    last_copy: Option<CopyId>,
    /// When the last good copy began, on the router's clock (when the tenant opened, before
    /// one): what its lag is measured from.
    last_good_copy_at: f64,
    /// When a background copy is due, if the tenant was written to: an interval after the
    /// last good copy began, or the retry pace after a failed one ended.
    next_copy_at: f64,
    last_copy_error: Option<String>,
    copying: bool,
    /// Calls inside the host's code, which may open the tenant's files, by their number.
    running: std::collections::BTreeSet<u64>,
    /// The number the next call of the tenant gets.
    next_call: u64,
    /// A copy gave up waiting for the calls numbered up to this one: no copy holds new calls
    /// back again before they all returned, so a long call delays its tenant's copy, not the
    /// tenant's other calls.
    blocked_by: Option<u64>,
    /// New calls wait: a copy is reading the tenant's files (see [`Shared::copy_now`]).
    held_back: bool,
}

impl Tenant {
    /// A tenant being opened at `now_ms`, its first copy due `interval_ms` later: counted in
    /// the router's tenants gauge from here until dropped.
    fn opening(now_ms: f64, interval_ms: f64) -> Tenant {
        crate::metrics::router_tenant(None, Some(TenantState::Opening));
        Tenant {
            life: Life::Opening,
            in_flight: 0,
            writes_since_copy: 0,
            last_copy: None,
            last_good_copy_at: now_ms,
            next_copy_at: now_ms + interval_ms,
            last_copy_error: None,
            copying: false,
            running: Default::default(),
            next_call: 0,
            blocked_by: None,
            held_back: false,
        }
    }

    /// The tenant's copy lag at `now_ms`: its writes no good copy holds yet, and the time
    /// since its last good copy began, while it is serving or draining with such writes (0
    /// otherwise: a lost or closed tenant's writes can no longer be copied from here).
    fn copy_lag(&self, now_ms: Option<f64>) -> crate::metrics::CopyLag {
        if self.writes_since_copy == 0 || !matches!(self.life, Life::Serving(_) | Life::Draining(_)) {
            return crate::metrics::CopyLag::default();
        }
        crate::metrics::CopyLag {
            seconds: now_ms.map_or(0.0, |now| ((now - self.last_good_copy_at) / 1000.0).max(0.0)),
            writes: self.writes_since_copy,
        }
    }

    /// Every change of state goes through here, so the gauge of tenants by state cannot miss one.
    fn set_life(&mut self, life: Life) {
        crate::metrics::router_tenant(Some(self.life.state()), Some(life.state()));
        self.life = life;
    }
}

impl Drop for Tenant {
    fn drop(&mut self) {
        crate::metrics::router_tenant(Some(self.life.state()), None);
    }
}

type Tenants = HashMap<String, Tenant>;

struct Shared {
    keeper: LeaseKeeper,
    copies: EpochCopies,
    state_root: PathBuf,
    capacity: usize,
    ttl_ms: i64,
    policy: CopyPolicy,
    /// `policy.interval` in milliseconds of the router's clock.
    interval_ms: f64,
    clock: Arc<dyn MonotonicClock>,
    verify: Option<SharedFoldCheck>,
    on_event: Option<RouterEventHandler>,
    tenants: Mutex<Tenants>,
    changed: Condvar,
    closed: Mutex<bool>,
    copier: Mutex<CopierState>,
    copier_wake: Condvar,
}

/// What the copier thread is told while it sleeps.
#[derive(Default)]
struct CopierState {
    stop: bool,
    /// Something may have fallen due since its pass began (a first write since a copy, the
    /// calls that blocked a copy returned): it looks again before it sleeps.
    woken: bool,
}

/// How a wait for the tenants on the router's clock ended; either way the tenants' lock is
/// held, so the caller acts on the very state it decided on.
enum Waited<'a> {
    Done(MutexGuard<'a, Tenants>),
    /// The clock reached the deadline first; with the reading that passed it.
    TimedOut(MutexGuard<'a, Tenants>, f64),
}

/// What one [`TenantRouter::tick`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouterTickReport {
    /// The keeper's round: renewals sent, leases renewed and lost (each lost tenant is also
    /// told as a `Lost` event), renewals to try again.
    pub keeper: TickReport,
    /// The tenants copied in the background by this round, by key.
    pub copied: Vec<String>,
    /// The tenants whose due copy failed, by key; why is in their `CopyFailed` event and in
    /// their status's `last_copy_error`.
    pub failed: Vec<String>,
    /// When the next round is due on the router's clock (the keeper's next renewal or the
    /// next background copy, whichever comes first): when a host that drives its own timer
    /// ticks next. `None` when nothing is kept.
    pub next_due_ms: Option<f64>,
}

/// Serves many tenants from one replica. `Send + Sync`: calls of different tenants run in
/// parallel; `open`, `handoff` and `close` block on the stores, so async hosts call them off
/// their event loop.
pub struct TenantRouter {
    shared: Arc<Shared>,
    copier: Mutex<Option<JoinHandle<()>>>,
    /// Kept alive with the router: the metrics ask it at each scrape.
    _copy_lag: Arc<crate::metrics::CopyLagSource>,
    /// Likewise, with [`RouterOptions::tenant_metrics`]: dropped with the router, which
    /// takes its tenants' series out of the text.
    _tenant_series: Option<Arc<crate::metrics::TenantSeriesSource>>,
}

impl std::fmt::Debug for TenantRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantRouter")
            .field("capacity", &self.shared.capacity)
            .field("tenants", &lock(&self.shared.tenants).len())
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section assigns plain values only.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl TenantRouter {
    /// Starts the router: its keeper's renewal thread and, in `Async` mode, its copier; or
    /// neither, [`RouterOptions::without_thread`].
    pub fn start(options: RouterOptions) -> Result<TenantRouter> {
        assert_root("a router's state root", &options.state_root)?;
        let capacity = options.capacity.unwrap_or_else(default_capacity);
        if capacity == 0 {
            return Err(Error::invalid_argument(
                "a router's capacity is at least one tenant",
            ));
        }
        // The keeper's handler needs the router, which needs the keeper: the handler finds
        // the router through a cell filled once both exist (no lease is kept before that).
        let router_cell: Arc<OnceLock<Weak<Shared>>> = Arc::default();
        let replica_id = options.replica_id.clone();
        let mut keeper_options = KeeperOptions::new(
            options.lease_store,
            options.replica_id,
            options.ttl_ms,
            options.margin_ms,
        );
        keeper_options.clock = options.clock.clone();
        let cell = router_cell.clone();
        keeper_options.on_event = Some(Box::new(move |event| {
            if let Some(shared) = cell.get().and_then(Weak::upgrade) {
                shared.keeper_event(event);
            }
        }));
        let ttl_ms = options.ttl_ms;
        let keeper = if options.without_thread {
            LeaseKeeper::without_thread(keeper_options)?
        } else {
            LeaseKeeper::start(keeper_options)?
        };
        let shared = Arc::new(Shared {
            ttl_ms,
            keeper,
            copies: EpochCopies::new(options.durable_store)
                .with_host_snapshot(options.snapshot)
                .with_retention(NonZeroUsize::new(options.keep_copies)),
            state_root: options.state_root,
            capacity,
            policy: options.copy_policy,
            interval_ms: options.copy_policy.interval.as_secs_f64() * 1000.0,
            clock: options.clock,
            verify: options.verify,
            on_event: options.on_event,
            tenants: Mutex::default(),
            changed: Condvar::new(),
            closed: Mutex::new(false),
            copier: Mutex::default(),
            copier_wake: Condvar::new(),
        });
        let _ = router_cell.set(Arc::downgrade(&shared));
        let copier = match shared.policy.durability {
            _ if options.without_thread => None,
            Durability::Strict => None,
            Durability::Async => {
                let weak = Arc::downgrade(&shared);
                Some(
                    std::thread::Builder::new()
                        .name("gotry-router-copier".to_owned())
                        .spawn(move || copier(weak))
                        .map_err(|e| {
                            Error::unavailable(format!("cannot start the router's copier thread: {e}"))
                        })?,
                )
            }
        };
        let weak = Arc::downgrade(&shared);
        let copy_lag: Arc<crate::metrics::CopyLagSource> = Arc::new(move || {
            weak.upgrade()
                .map_or_else(Default::default, |shared| shared.copy_lag())
        });
        crate::metrics::watch_copy_lag(&copy_lag);
        let tenant_series = options.tenant_metrics.then(|| {
            let weak = Arc::downgrade(&shared);
            let source: Arc<crate::metrics::TenantSeriesSource> = Arc::new(move || {
                weak.upgrade()
                    .map_or_else(Vec::new, |shared| shared.tenant_series())
            });
            crate::metrics::watch_tenants(&replica_id, &source);
            source
        });
        Ok(TenantRouter {
            shared,
            copier: Mutex::new(copier),
            _copy_lag: copy_lag,
            _tenant_series: tenant_series,
        })
    }

    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// [`default_handoff_timeout`] for this router's TTL: what a handoff or close waits when
    /// the host names no timeout.
    pub fn default_handoff_timeout(&self) -> Duration {
        default_handoff_timeout(self.shared.ttl_ms)
    }

    /// Serves a tenant: see the [module docs](self). Opening a tenant already served returns
    /// the same handle.
    pub fn open(&self, organization: &str, tenant: &str) -> Result<Arc<TenantHandle>> {
        let shared = &self.shared;
        let key = lease_key_for(organization, tenant)?;
        let root = tenant_root_for(&shared.state_root, organization, tenant)?;
        // Read before any lock: a host clock may take a host lock of its own.
        let opened_at = shared.now()?;
        {
            let mut tenants = lock(&shared.tenants);
            loop {
                if *lock(&shared.closed) {
                    return Err(Error::RouterClosed);
                }
                match tenants.get(&key).map(|t| &t.life) {
                    Some(Life::Opening) => {
                        tenants = shared.changed.wait(tenants).unwrap_or_else(|p| p.into_inner());
                    }
                    Some(Life::Serving(handle)) => return Ok(handle.clone()),
                    Some(Life::Draining(_)) => {
                        return crate::metrics::router_answer(Err(Error::Draining { key }))
                    }
                    Some(Life::Closed(_)) => return Err(Error::RouterClosed),
                    Some(Life::Lost(handle)) => return Err(fenced(&key, handle.epoch())),
                    None => break,
                }
            }
            if tenants.len() >= shared.capacity {
                return Err(Error::ReplicaAtCapacity {
                    limit: shared.capacity as u64,
                });
            }
            tenants.insert(key.clone(), Tenant::opening(opened_at, shared.interval_ms));
        }
        let opened = shared.keeper.acquire(&key).and_then(|lease| {
            let verify = shared
                .verify
                .as_deref()
                .map(|v| v as &dyn Fn(&Path) -> Result<bool>);
            match shared.copies.restore(&lease, &root, verify) {
                Ok(report) => Ok(Arc::new(TenantHandle {
                    key: key.clone(),
                    root,
                    lease,
                    restored_from: report.restored,
                })),
                Err(error) => {
                    // Nothing was served: the next replica may try at once.
                    let _ = shared.keeper.remove(&key);
                    Err(error)
                }
            }
        });
        let mut tenants = lock(&shared.tenants);
        // An open that close() overtook is refused as such, whatever the keeper (shut down
        // meanwhile) answered: the host asked a closed router.
        let closed = *lock(&shared.closed);
        let result = match opened {
            Ok(handle) if !closed => {
                if let Some(tenant) = tenants.get_mut(&key) {
                    tenant.last_copy = handle.restored_from;
                    tenant.set_life(Life::Serving(handle.clone()));
                }
                Ok(handle)
            }
            Ok(_) => {
                tenants.remove(&key);
                drop(tenants);
                let _ = shared.keeper.remove(&key);
                tenants = lock(&shared.tenants);
                Err(Error::RouterClosed)
            }
            Err(_) if closed => {
                tenants.remove(&key);
                Err(Error::RouterClosed)
            }
            Err(error) => {
                tenants.remove(&key);
                Err(error)
            }
        };
        drop(tenants);
        shared.changed.notify_all();
        result
    }

    /// Runs one call of a served tenant; see the [module docs](self). A failure before `call`
    /// ran is the refusal's own class (nothing was written: a retry is safe); a failure after
    /// it returned is CALL_IN_DOUBT; `call`'s own error is returned as it is.
    pub fn run<T>(&self, key: &str, call: impl FnOnce(&TenantHandle) -> Result<T>) -> Result<T> {
        let started = self.begin(key)?;
        let value = call(started.handle())?;
        started.finish().map(|()| value)
    }

    /// Starts a call of a served tenant, for hosts whose calls do not fit in one closure (a
    /// JS promise): counted in flight, the gate checked, until the [`RouterCall`] is finished
    /// or dropped. [`TenantRouter::run`] is this around a closure.
    pub fn begin(&self, key: &str) -> Result<RouterCall> {
        self.begin_when(key, true)
            .expect("a call that may wait is always answered")
    }

    /// [`TenantRouter::begin`] when it can answer without waiting: `None` while a copy holds
    /// the tenant's calls back (until its snapshot is taken). The rest of a begin only takes
    /// the router's locks, held briefly, and reads its clock, which is native: a host whose
    /// thread must never block (Node's event loop) answers a call so, with no thread hop, and
    /// sends it to a thread of its own only when this says `None`.
    pub fn begin_now(&self, key: &str) -> Option<Result<RouterCall>> {
        self.begin_when(key, false)
    }

    fn begin_when(&self, key: &str, wait: bool) -> Option<Result<RouterCall>> {
        let entered = self.shared.enter(key, wait)?;
        Some(crate::metrics::router_answer(entered).and_then(|(handle, number)| self.call_of(handle, number)))
    }

    fn call_of(&self, handle: Arc<TenantHandle>, number: u64) -> Result<RouterCall> {
        let call = RouterCall {
            shared: self.shared.clone(),
            handle,
            number,
            open: true,
            _in_flight: crate::metrics::InFlight::begin(),
        };
        call.handle.lease.assert_held()?;
        Ok(call)
    }

    /// Hands a tenant off; see the [module docs](self).
    pub fn handoff(&self, key: &str, timeout: Duration) -> Result<()> {
        self.shared.handoff(key, timeout)
    }

    /// Hands every tenant off, then refuses every later open with ROUTER_CLOSED. An open in
    /// flight is refused so too; a tenant whose drain timed out is `closed` from then on (its
    /// lease is no longer kept) and leaves when its last call ends.
    pub fn close(&self, timeout: Duration) -> CloseReport {
        let shared = &self.shared;
        *lock(&shared.closed) = true;
        let keys: Vec<String> = lock(&shared.tenants)
            .iter()
            .filter(|(_, t)| !matches!(t.life, Life::Opening))
            .map(|(key, _)| key.clone())
            .collect();
        let mut report = CloseReport::default();
        for key in keys {
            match shared.handoff(&key, timeout) {
                Ok(()) => report.handed_off.push(key),
                Err(Error::DrainTimeout { .. }) => report.timed_out.push(key),
                Err(error) => report.failed.push((key, error)),
            }
        }
        shared.stop_copier();
        if let Some(copier) = lock(&self.copier).take() {
            let _ = copier.join();
        }
        report.keeper = shared.keeper.shutdown(timeout);
        let mut left = Vec::new();
        {
            let mut tenants = lock(&shared.tenants);
            for (key, tenant) in tenants.iter_mut() {
                if let Life::Serving(h) | Life::Draining(h) = &tenant.life {
                    let closed = Life::Closed(h.clone());
                    tenant.set_life(closed);
                }
                if tenant.in_flight == 0 {
                    if let Some(h) = tenant.life.handle() {
                        left.push((key.clone(), h.epoch()));
                    }
                }
            }
            tenants.retain(|_, t| t.in_flight > 0 || matches!(t.life, Life::Opening));
        }
        shared.changed.notify_all();
        for (key, epoch) in left {
            shared.emit(RouterEvent::Closed { key, epoch });
        }
        report.handed_off.sort();
        report.timed_out.sort();
        report.failed.sort_by(|a, b| a.0.cmp(&b.0));
        report
    }

    /// Every tenant this replica knows, ordered by key, its lag measured on the router's
    /// clock; fails with the clock's error when it cannot be read.
    pub fn status(&self) -> Result<Vec<TenantStatus>> {
        let now = self.shared.now()?;
        let tenants = lock(&self.shared.tenants);
        let mut all: Vec<TenantStatus> = tenants
            .iter()
            .map(|(key, t)| TenantStatus {
                key: key.clone(),
                state: t.life.state(),
                epoch: t.life.epoch(),
                in_flight: t.in_flight,
                last_copy: t.last_copy,
                writes_since_copy: t.writes_since_copy,
                // A float to integer cast saturates: a clock behind the copy reads 0.
                lag_ms: (now - t.last_good_copy_at) as u64,
                last_copy_error: t.last_copy_error.clone(),
            })
            .collect();
        all.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(all)
    }

    /// Runs one round on the router's clock: the keeper's round (the renewals that are due;
    /// a lease the store refuses is lost, its tenant fenced and told as on the keeper's
    /// thread), then, in `Async` mode, every background copy that is due. This is what the
    /// router's threads do; a router started [`RouterOptions::without_thread`] needs it
    /// called. The round's events reach the handler on the calling thread before it returns.
    ///
    /// A due copy waits for its tenant's running calls up to [`COPY_GRACE_MS`] on the
    /// router's clock: with a clock moved by hand and a call in flight, the tick returns once
    /// that call returned or the clock was moved past the grace (from another thread).
    ///
    /// Fails with ROUTER_CLOSED once the router is closed, with the clock's error when it
    /// cannot be read, and as the keeper's `tick` does (from inside the keeper's handler,
    /// which is where a `Lost` event is told).
    pub fn tick(&self) -> Result<RouterTickReport> {
        let shared = &self.shared;
        if *lock(&shared.closed) {
            return Err(Error::RouterClosed);
        }
        let keeper = shared.keeper.tick()?;
        let now = shared.now()?;
        let (copied, failed) = shared.copy_due(now);
        let next_due_ms = [keeper.next_due_ms, shared.next_copy_due()]
            .into_iter()
            .flatten()
            .min_by(f64::total_cmp);
        Ok(RouterTickReport {
            keeper,
            copied,
            failed,
            next_due_ms,
        })
    }
}

impl Drop for TenantRouter {
    fn drop(&mut self) {
        self.shared.stop_copier();
        if let Some(copier) = lock(&self.copier).take() {
            let _ = copier.join();
        }
    }
}

/// A call in flight. [`RouterCall::finish`] acknowledges it; dropping it unfinished counts
/// it as failed (nothing to copy for it).
pub struct RouterCall {
    shared: Arc<Shared>,
    handle: Arc<TenantHandle>,
    /// The call's number among its tenant's calls (see `Tenant::blocked_by`).
    number: u64,
    open: bool,
    _in_flight: crate::metrics::InFlight,
}

impl std::fmt::Debug for RouterCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouterCall")
            .field("key", &self.handle.key)
            .field("open", &self.open)
            .finish_non_exhaustive()
    }
}

impl RouterCall {
    pub fn handle(&self) -> &Arc<TenantHandle> {
        &self.handle
    }

    /// The call's handler returned: CALL_IN_DOUBT when the gate closed meanwhile (its
    /// effects cannot be acknowledged) or, in `Strict` mode, when no copy holding it could be
    /// written (the cause is in the error). Blocks on the durable store in `Strict` mode only.
    pub fn finish(mut self) -> Result<()> {
        self.open = false;
        let shared = &self.shared;
        shared.stop_running(&self.handle.key, self.number);
        let outcome = self
            .handle
            .lease
            .assert_held()
            .and_then(|()| match shared.policy.durability {
                Durability::Strict => shared.copy_for_call(&self.handle),
                Durability::Async => Ok(()),
            });
        shared.leave(
            &self.handle.key,
            outcome.is_ok() && shared.policy.durability == Durability::Async,
        );
        outcome.map_err(|cause| Error::CallInDoubt {
            key: self.handle.key.clone(),
            epoch: self.handle.epoch(),
            cause: Box::new(cause),
        })
    }
}

impl Drop for RouterCall {
    fn drop(&mut self) {
        if self.open {
            self.shared.stop_running(&self.handle.key, self.number);
            self.shared.leave(&self.handle.key, false);
        }
    }
}

fn fenced(key: &str, epoch: i64) -> Error {
    Error::Fenced {
        reason: FenceReason::LeaseLost,
        key: key.to_owned(),
        epoch,
    }
}

fn not_served(key: &str) -> Error {
    Error::lease_lost(format!("{key} is not served by this replica"))
}

/// Clears a tenant's copy marks however a copy ends, a panic included: a mark left set
/// would hold every later call or copy of the tenant back for good.
struct CopyMarks<'a> {
    shared: &'a Shared,
    key: &'a str,
}

impl Drop for CopyMarks<'_> {
    fn drop(&mut self) {
        if let Some(t) = lock(&self.shared.tenants).get_mut(self.key) {
            t.copying = false;
            t.held_back = false;
        }
        self.shared.changed.notify_all();
    }
}

/// What a panic carried, for the error that reports it.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

impl Shared {
    /// The router's clock, read as the keeper reads its own.
    fn now(&self) -> Result<f64> {
        read_monotonic(&*self.clock)
    }

    /// How long after a failed background copy ended the tenant is tried again: a tenth of
    /// the interval (at least 10 ms), often enough that the lag ends soon after the store
    /// recovers, seldom enough that a store in trouble is not hammered.
    fn retry_ms(&self) -> f64 {
        (self.interval_ms / 10.0).max(10.0)
    }

    /// Tells the copier thread to look again before it sleeps.
    fn wake_copier(&self) {
        lock(&self.copier).woken = true;
        self.copier_wake.notify_all();
    }

    fn stop_copier(&self) {
        lock(&self.copier).stop = true;
        self.copier_wake.notify_all();
    }

    /// Waits until `done` holds for the tenants or the router's clock reaches `deadline_ms`.
    /// The clock is read outside the lock (a host clock may take a host lock of its own),
    /// and between two readings the thread blocks at most [`CLOCK_SLICE`]: see there why.
    fn wait_until(&self, deadline_ms: f64, done: impl Fn(&Tenants) -> bool) -> Result<Waited<'_>> {
        loop {
            let tenants = lock(&self.tenants);
            if done(&tenants) {
                return Ok(Waited::Done(tenants));
            }
            drop(tenants);
            let now = self.now()?;
            let tenants = lock(&self.tenants);
            if done(&tenants) {
                return Ok(Waited::Done(tenants));
            }
            if now >= deadline_ms {
                return Ok(Waited::TimedOut(tenants, now));
            }
            let left = Duration::try_from_secs_f64((deadline_ms - now) / 1000.0).unwrap_or(CLOCK_SLICE);
            drop(
                self.changed
                    .wait_timeout(tenants, left.min(CLOCK_SLICE))
                    .unwrap_or_else(|p| p.into_inner()),
            );
        }
    }

    /// Calls the host's handler; a panic in it is caught, as the keeper catches its
    /// handler's, so that no host bug stops the router's threads.
    fn emit(&self, event: RouterEvent) {
        if let Some(handler) = &self.on_event {
            let _ = catch_unwind(AssertUnwindSafe(|| handler(event)));
        }
    }

    /// The worst lag of the serving tenants with writes no good copy holds yet. A gauge
    /// cannot carry an error: without a clock reading, the writes are counted and the
    /// seconds are not.
    fn copy_lag(&self) -> crate::metrics::CopyLag {
        let now = self.now().ok();
        lock(&self.tenants)
            .values()
            .fold(crate::metrics::CopyLag::default(), |worst, t| {
                let lag = t.copy_lag(now);
                crate::metrics::CopyLag {
                    seconds: worst.seconds.max(lag.seconds),
                    writes: worst.writes.max(lag.writes),
                }
            })
    }

    /// Every tenant listed, as its per-tenant series show it (the clock read before the
    /// lock, as for [`Shared::copy_lag`]).
    fn tenant_series(&self) -> Vec<crate::metrics::TenantSeries> {
        let now = self.now().ok();
        lock(&self.tenants)
            .iter()
            .map(|(key, t)| crate::metrics::TenantSeries {
                key: key.clone(),
                state: t.life.state(),
                copy_lag: t.copy_lag(now),
                in_flight: t.in_flight,
            })
            .collect()
    }

    /// A new call of `key` in flight, or why it is refused; `None`, without `wait`, when a copy
    /// holds the tenant's calls back (with it, the call waits until the copy lets them in).
    fn enter(&self, key: &str, wait: bool) -> Option<Result<(Arc<TenantHandle>, u64)>> {
        if *lock(&self.closed) {
            return Some(Err(Error::RouterClosed));
        }
        let mut tenants = lock(&self.tenants);
        while tenants
            .get(key)
            .is_some_and(|t| t.held_back && matches!(t.life, Life::Serving(_)))
        {
            if !wait {
                return None;
            }
            tenants = self.changed.wait(tenants).unwrap_or_else(|p| p.into_inner());
        }
        let Some(tenant) = tenants.get_mut(key) else {
            return Some(Err(not_served(key)));
        };
        Some(match &tenant.life {
            Life::Serving(handle) => {
                let handle = handle.clone();
                let number = tenant.next_call;
                tenant.next_call += 1;
                tenant.in_flight += 1;
                tenant.running.insert(number);
                Ok((handle, number))
            }
            Life::Draining(_) => Err(Error::Draining { key: key.to_owned() }),
            Life::Opening => Err(Error::lease_lost(format!("{key} is still being opened"))),
            Life::Closed(_) => Err(Error::RouterClosed),
            Life::Lost(handle) => Err(fenced(key, handle.epoch())),
        })
    }

    /// A call's host code has returned: the tenant's files are the router's to copy.
    fn stop_running(&self, key: &str, number: u64) {
        let mut tenants = lock(&self.tenants);
        if let Some(tenant) = tenants.get_mut(key) {
            tenant.running.remove(&number);
            if tenant
                .blocked_by
                .is_some_and(|last| tenant.running.first().is_none_or(|first| *first > last))
            {
                tenant.blocked_by = None;
                drop(tenants);
                self.wake_copier();
            }
        }
        self.changed.notify_all();
    }

    fn leave(&self, key: &str, wrote: bool) {
        let mut tenants = lock(&self.tenants);
        let Some(tenant) = tenants.get_mut(key) else {
            return;
        };
        tenant.in_flight -= 1;
        // The first write since a copy may make the tenant due before the copier's plan.
        let first_write = wrote && tenant.writes_since_copy == 0;
        if wrote {
            tenant.writes_since_copy += 1;
        }
        let closed = tenant.in_flight == 0 && matches!(tenant.life, Life::Lost(_) | Life::Closed(_));
        let epoch = tenant.life.epoch();
        if closed {
            tenants.remove(key);
        }
        drop(tenants);
        self.changed.notify_all();
        if first_write {
            self.wake_copier();
        }
        if closed {
            self.emit(RouterEvent::Closed {
                key: key.to_owned(),
                epoch,
            });
        }
    }

    /// A strict call's copy: written as soon as the tenant is quiet. While other calls of the
    /// tenant keep running the call waits for them (without holding anyone back), at most
    /// [`QUIET_WAIT_MS`] in all, then TENANT_BUSY.
    fn copy_for_call(&self, handle: &TenantHandle) -> Result<()> {
        let deadline_ms = self.now()? + QUIET_WAIT_MS;
        loop {
            match self.copy_now(handle, deadline_ms) {
                Err(Error::TenantBusy { .. }) if self.now()? < deadline_ms => {
                    self.wait_unblocked(&handle.key, deadline_ms)?;
                }
                other => return other.map(|_| ()),
            }
        }
    }

    /// Waits until the calls that blocked the tenant's last copy have returned, or the
    /// deadline.
    fn wait_unblocked(&self, key: &str, deadline_ms: f64) -> Result<()> {
        match self.wait_until(deadline_ms, |tenants| {
            tenants.get(key).is_none_or(|t| t.blocked_by.is_none())
        })? {
            Waited::Done(tenants) | Waited::TimedOut(tenants, _) => drop(tenants),
        }
        Ok(())
    }

    /// Writes a copy of a tenant and records its outcome; one copy of a tenant at a time.
    /// `None` when the tenant was no longer served, so nothing was copied.
    /// Waits for running calls at most [`COPY_GRACE_MS`] (and never past `deadline_ms`), on
    /// the router's clock: calls that run longer make it TENANT_BUSY and keep it from trying
    /// again until they returned.
    fn copy_now(&self, handle: &TenantHandle, deadline_ms: f64) -> Result<Option<WrittenCopy>> {
        let started = self.now()?;
        let writes_before = {
            let mut tenants = lock(&self.tenants);
            loop {
                match tenants.get_mut(&handle.key) {
                    Some(t) if t.copying => {
                        tenants = self.changed.wait(tenants).unwrap_or_else(|p| p.into_inner());
                    }
                    Some(t) => {
                        t.copying = true;
                        break t.writes_since_copy;
                    }
                    None => return Ok(None),
                }
            }
        };
        let marks = CopyMarks {
            shared: self,
            key: &handle.key,
        };
        // The host may open the tenant's files only inside its calls: POSIX locks belong to
        // the process, so this library's SQLite reading a file the host's SQLite opens at
        // the same moment would let either drop the other's locks. New calls wait, and the
        // running ones are waited for, until the snapshot is taken (not the upload).
        let quiet = self.hold_calls_back(&handle.key, deadline_ms.min(started + COPY_GRACE_MS));
        let outcome = quiet.and_then(|()| {
            self.copies
                .write_copy_with(&handle.lease, &handle.root, &|| self.let_calls_in(&handle.key))
        });
        drop(marks);
        // Read before the lock; without a reading, the retry is planned from the start.
        let ended = match &outcome {
            Ok(_) | Err(Error::TenantBusy { .. }) => started,
            Err(_) => self.now().unwrap_or(started),
        };
        let mut tenants = lock(&self.tenants);
        if let Some(t) = tenants.get_mut(&handle.key) {
            match &outcome {
                Ok(written) => {
                    t.last_copy = Some(written.id);
                    t.last_good_copy_at = started;
                    t.next_copy_at = started + self.interval_ms;
                    t.writes_since_copy -= writes_before.min(t.writes_since_copy);
                    t.last_copy_error = None;
                }
                // A long call delays the copy; that is no failure of the store.
                Err(Error::TenantBusy { .. }) => {}
                Err(error) => {
                    t.last_copy_error = Some(format!("{}: {error}", error.code_str()));
                    t.next_copy_at = ended + self.retry_ms();
                }
            }
        }
        drop(tenants);
        self.changed.notify_all();
        outcome.map(Some)
    }

    /// Holds a tenant's new calls back and waits for its running ones until `until`. Calls
    /// still running then fail this copy with TENANT_BUSY and are noted in `blocked_by`: the
    /// held calls go on at once, so no call waits behind the copier longer than the grace
    /// and one snapshot.
    fn hold_calls_back(&self, key: &str, until_ms: f64) -> Result<()> {
        let started = self.now()?;
        if let Some(t) = lock(&self.tenants).get_mut(key) {
            t.held_back = true;
        }
        let waited = self.wait_until(until_ms, |tenants| {
            tenants.get(key).is_none_or(|t| t.running.is_empty())
        })?;
        let Waited::TimedOut(mut tenants, now) = waited else {
            return Ok(());
        };
        let t = tenants
            .get_mut(key)
            .expect("a tenant with running calls is listed");
        t.held_back = false;
        t.blocked_by = t.running.last().copied();
        let running = t.running.len() as u64;
        drop(tenants);
        self.changed.notify_all();
        Err(Error::TenantBusy {
            key: key.to_owned(),
            running,
            waited_ms: (now - started) as u64,
        })
    }

    fn let_calls_in(&self, key: &str) {
        if let Some(t) = lock(&self.tenants).get_mut(key) {
            t.held_back = false;
        }
        self.changed.notify_all();
    }

    /// A handoff, counted by outcome (and as a refusal when the tenant was already draining
    /// or did not drain in time).
    fn handoff(&self, key: &str, timeout: Duration) -> Result<()> {
        let answer = crate::metrics::router_answer(self.drain_and_release(key, timeout));
        crate::metrics::handoff(&answer);
        answer
    }

    fn drain_and_release(&self, key: &str, timeout: Duration) -> Result<()> {
        let deadline_ms = self.now()? + timeout.as_secs_f64() * 1000.0;
        let handle = {
            let mut tenants = lock(&self.tenants);
            let Some(tenant) = tenants.get_mut(key) else {
                return Err(not_served(key));
            };
            let handle = match &tenant.life {
                Life::Serving(handle) => handle.clone(),
                Life::Draining(_) => return Err(Error::Draining { key: key.to_owned() }),
                Life::Opening => return Err(Error::lease_lost(format!("{key} is still being opened"))),
                Life::Closed(_) => return Err(Error::RouterClosed),
                Life::Lost(handle) => return Err(fenced(key, handle.epoch())),
            };
            tenant.set_life(Life::Draining(handle.clone()));
            handle
        };
        self.changed.notify_all();
        self.emit(RouterEvent::Draining {
            key: key.to_owned(),
            epoch: handle.epoch(),
        });
        // The keeper goes on renewing the lease while the calls finish.
        let drained = self.wait_until(deadline_ms, |tenants| {
            tenants.get(key).is_none_or(|t| t.in_flight == 0)
        });
        match drained {
            Ok(Waited::Done(tenants)) => drop(tenants),
            Ok(Waited::TimedOut(mut tenants, _)) => {
                let tenant = tenants
                    .get_mut(key)
                    .expect("a tenant with calls in flight is listed");
                tenant.set_life(Life::Serving(handle.clone()));
                let in_flight = tenant.in_flight;
                drop(tenants);
                self.changed.notify_all();
                return Err(Error::DrainTimeout {
                    key: key.to_owned(),
                    in_flight,
                    timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                });
            }
            Err(error) => {
                // The clock failed: nothing was copied or released, the tenant serves again.
                self.serve_again(key, &handle);
                return Err(error);
            }
        }
        // No call runs any more: the copy does not wait for one.
        let copied = self
            .now()
            .and_then(|now| self.copy_now(&handle, now + QUIET_WAIT_MS));
        if let Err(error) = copied {
            // Nothing was released: the tenant serves again and the host decides.
            self.serve_again(key, &handle);
            return Err(error);
        }
        self.copies.end_collection(&handle.lease);
        let released = self.keeper.remove(key);
        lock(&self.tenants).remove(key);
        self.changed.notify_all();
        self.emit(RouterEvent::Closed {
            key: key.to_owned(),
            epoch: handle.epoch(),
        });
        released.map(|_| ())
    }

    /// A drain that ended without a release: the tenant serves again, unless it was lost
    /// meanwhile.
    fn serve_again(&self, key: &str, handle: &Arc<TenantHandle>) {
        if let Some(t) = lock(&self.tenants).get_mut(key) {
            if matches!(t.life, Life::Draining(_)) {
                t.set_life(Life::Serving(handle.clone()));
            }
        }
        self.changed.notify_all();
    }

    fn keeper_event(&self, event: KeeperEvent) {
        let KeeperEvent::Lost { key, epoch, .. } = event else {
            return;
        };
        let mut tenants = lock(&self.tenants);
        let Some(tenant) = tenants.get_mut(&key) else {
            return;
        };
        let handle = match &tenant.life {
            Life::Serving(h) | Life::Draining(h) if h.epoch() == epoch => h.clone(),
            _ => return,
        };
        tenant.set_life(Life::Lost(handle));
        let idle = tenant.in_flight == 0;
        if idle {
            tenants.remove(&key);
        }
        drop(tenants);
        self.changed.notify_all();
        self.emit(RouterEvent::Lost {
            key: key.clone(),
            epoch,
        });
        if idle {
            self.emit(RouterEvent::Closed { key, epoch });
        }
    }

    /// Whether a background copy of `t` is due at `now_ms`: a serving tenant written to
    /// since its last good copy, whose copy is due and no running call still blocks.
    fn is_due(t: &Tenant, now_ms: f64) -> bool {
        t.writes_since_copy > 0
            && t.blocked_by.is_none()
            && t.next_copy_at <= now_ms
            && matches!(t.life, Life::Serving(_))
    }

    /// When the next background copy is due, if one is planned: `Async` mode only.
    fn next_copy_due(&self) -> Option<f64> {
        if self.policy.durability != Durability::Async {
            return None;
        }
        lock(&self.tenants)
            .values()
            .filter(|t| Self::is_due(t, f64::INFINITY))
            .map(|t| t.next_copy_at)
            .min_by(f64::total_cmp)
    }

    /// One pass of the `Async` copier at `now_ms`: copies every tenant due then, in key
    /// order, and returns the keys copied and those whose copy failed (each copy told as
    /// `Copied`, each failure as `CopyFailed`). A copy that panics is reported as a failed
    /// one; the copier carries on.
    fn copy_due(&self, now_ms: f64) -> (Vec<String>, Vec<String>) {
        let (mut copied, mut failed) = (Vec::new(), Vec::new());
        if self.policy.durability != Durability::Async {
            return (copied, failed);
        }
        let mut due: Vec<Arc<TenantHandle>> = lock(&self.tenants)
            .values()
            .filter(|t| Self::is_due(t, now_ms))
            .filter_map(|t| t.life.handle().cloned())
            .collect();
        due.sort_by(|a, b| a.key.cmp(&b.key));
        for handle in due {
            // The grace alone bounds the wait for running calls.
            let copy = catch_unwind(AssertUnwindSafe(|| self.copy_now(&handle, f64::INFINITY)));
            let outcome = copy.unwrap_or_else(|panic| {
                // Its bookkeeping did not run: the retry is planned here.
                if let Some(t) = lock(&self.tenants).get_mut(&handle.key) {
                    t.next_copy_at = now_ms + self.retry_ms();
                }
                Err(Error::Storage {
                    code: "PANIC".to_owned(),
                    message: format!("a copy of {} panicked: {}", handle.key, panic_text(&*panic)),
                })
            });
            match outcome {
                Ok(Some(written)) => {
                    copied.push(handle.key.clone());
                    self.emit(RouterEvent::Copied {
                        key: handle.key.clone(),
                        copy: written.id,
                        bytes_uploaded: written.bytes_uploaded,
                    });
                }
                // No longer served since it fell due: nothing of it was copied.
                Ok(None) | Err(Error::TenantBusy { .. }) => {}
                Err(error) => {
                    failed.push(handle.key.clone());
                    self.emit(RouterEvent::CopyFailed {
                        key: handle.key.clone(),
                        epoch: handle.epoch(),
                        error,
                    });
                }
            }
        }
        (copied, failed)
    }

    /// One pass of the copier thread, and how long it may sleep after it: until the next
    /// copy is due on the router's clock, as the keeper's thread sleeps until its next
    /// round (a clock moved by hand belongs with [`TenantRouter::tick`]).
    fn copier_pass(&self) -> Duration {
        let Ok(now) = self.now() else {
            // Nothing can be timed: look again at the retry pace, in real time.
            return ms_to_duration(self.retry_ms());
        };
        self.copy_due(now);
        match (self.next_copy_due(), self.now()) {
            (None, _) => MAX_SLEEP,
            (Some(next), Ok(now)) => ms_to_duration((next - now).max(0.0)),
            (Some(_), Err(_)) => ms_to_duration(self.retry_ms()),
        }
    }
}

fn copier(shared: Weak<Shared>) {
    loop {
        let Some(router) = shared.upgrade() else { return };
        lock(&router.copier).woken = false;
        let pause = router.copier_pass();
        let state = lock(&router.copier);
        if state.stop {
            return;
        }
        if state.woken {
            continue;
        }
        let (state, _) = router
            .copier_wake
            .wait_timeout(state, pause)
            .unwrap_or_else(|p| p.into_inner());
        if state.stop {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
