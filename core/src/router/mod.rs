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
//!   tenant that was written to, once per interval, and a failing durable store is reported
//!   and visible as lag; in `Strict` mode the call's acknowledgement waits for its copy.
//! * A copy reads a tenant's files while none of its calls runs: it holds new calls back
//!   and waits for the running ones, at most `COPY_GRACE` (100 ms). Calls still running then
//!   delay that tenant's copy until they returned (TENANT_BUSY, not reported as a
//!   failure), and the held calls go on: no call waits behind the copier longer than the
//!   grace and one snapshot. A strict call waits for such calls at most `QUIET_WAIT` (5 s).
//! * [`TenantRouter::handoff`] drains (the lease keeps being renewed meanwhile), takes a
//!   final copy, releases. Calls still running at the timeout leave the tenant serving,
//!   with nothing flushed or released (DRAIN_TIMEOUT).

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::clock::MonotonicClock;
use crate::durable_store::DurableStore;
use crate::epoch_copies::{CopyId, EpochCopies, HostSnapshot};
use crate::errors::{Error, FenceReason, Result};
use crate::ids::{lease_key_for, tenant_root_for};
use crate::keeper::{KeeperEvent, KeeperOptions, LeaseKeeper, ShutdownReport};
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
}

/// The kind of a [`RouterEvent`], with the stable name every door uses (the keeper's casing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouterEventKind {
    Lost,
    Closed,
    CopyFailed,
}

impl RouterEventKind {
    /// Every kind, in the order documentation lists them.
    pub const ALL: [RouterEventKind; 3] = [
        RouterEventKind::Lost,
        RouterEventKind::Closed,
        RouterEventKind::CopyFailed,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            RouterEventKind::Lost => "lost",
            RouterEventKind::Closed => "closed",
            RouterEventKind::CopyFailed => "copy_failed",
        }
    }
}

impl RouterEvent {
    pub fn kind(&self) -> RouterEventKind {
        match self {
            RouterEvent::Lost { .. } => RouterEventKind::Lost,
            RouterEvent::Closed { .. } => RouterEventKind::Closed,
            RouterEvent::CopyFailed { .. } => RouterEventKind::CopyFailed,
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
    /// [`DEFAULT_KEEP_COPIES`] unless set. `None` keeps every copy, for a host that runs
    /// `gc` itself.
    pub keep_copies: Option<NonZeroUsize>,
    pub clock: Arc<dyn MonotonicClock>,
    pub verify: Option<SharedFoldCheck>,
    /// Reads the files of a tenant root that the host has open (see [`HostSnapshot`]).
    pub snapshot: Option<HostSnapshot>,
    pub on_event: Option<RouterEventHandler>,
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
            keep_copies: Some(DEFAULT_KEEP_COPIES),
            clock: Arc::new(crate::clock::SystemMonotonicClock),
            verify: None,
            snapshot: None,
            on_event: None,
        }
    }
}

/// The copies a router keeps of each tenant by default: enough that a restore finding the
/// newest ones damaged has older ones of the same tenure to fall back on, few enough that a
/// strict router, which writes a copy per acknowledged write, stores a bounded number.
pub const DEFAULT_KEEP_COPIES: NonZeroUsize = NonZeroUsize::new(8).expect("not zero");

/// How long a strict call waits, in all, for a copy that holds it while other calls of its
/// tenant keep running, before it answers CALL_IN_DOUBT (cause TENANT_BUSY).
const QUIET_WAIT: Duration = Duration::from_secs(5);

/// How long a copy holds a tenant's new calls back while waiting for its running ones: what
/// a call may wait behind the copier beyond one snapshot. Calls still running then delay
/// that tenant's copy until they returned, and nobody else.
const COPY_GRACE: Duration = Duration::from_millis(100);

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
    last_good_copy_at: Instant,
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
    /// A tenant being opened: counted in the router's tenants gauge from here until dropped.
    fn opening() -> Tenant {
        crate::metrics::router_tenant(None, Some(TenantState::Opening));
        Tenant {
            life: Life::Opening,
            in_flight: 0,
            writes_since_copy: 0,
            last_copy: None,
            last_good_copy_at: Instant::now(),
            last_copy_error: None,
            copying: false,
            running: Default::default(),
            next_call: 0,
            blocked_by: None,
            held_back: false,
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

struct Shared {
    keeper: LeaseKeeper,
    copies: EpochCopies,
    state_root: PathBuf,
    capacity: usize,
    ttl_ms: i64,
    policy: CopyPolicy,
    verify: Option<SharedFoldCheck>,
    on_event: Option<RouterEventHandler>,
    tenants: Mutex<HashMap<String, Tenant>>,
    changed: Condvar,
    closed: Mutex<bool>,
    stop_copier: Mutex<bool>,
    copier_wake: Condvar,
}

/// Serves many tenants from one replica. `Send + Sync`: calls of different tenants run in
/// parallel; `open`, `handoff` and `close` block on the stores, so async hosts call them off
/// their event loop.
pub struct TenantRouter {
    shared: Arc<Shared>,
    copier: Mutex<Option<JoinHandle<()>>>,
    /// Kept alive with the router: the metrics ask it at each scrape.
    _copy_lag: Arc<crate::metrics::CopyLagSource>,
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
    /// Starts the router: its keeper's renewal thread and, in `Async` mode, its copier.
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
        let mut keeper_options = KeeperOptions::new(
            options.lease_store,
            options.replica_id,
            options.ttl_ms,
            options.margin_ms,
        );
        keeper_options.clock = options.clock;
        let cell = router_cell.clone();
        keeper_options.on_event = Some(Box::new(move |event| {
            if let Some(shared) = cell.get().and_then(Weak::upgrade) {
                shared.keeper_event(event);
            }
        }));
        let ttl_ms = options.ttl_ms;
        let shared = Arc::new(Shared {
            ttl_ms,
            keeper: LeaseKeeper::start(keeper_options)?,
            copies: EpochCopies::new(options.durable_store)
                .with_host_snapshot(options.snapshot)
                .with_retention(options.keep_copies),
            state_root: options.state_root,
            capacity,
            policy: options.copy_policy,
            verify: options.verify,
            on_event: options.on_event,
            tenants: Mutex::default(),
            changed: Condvar::new(),
            closed: Mutex::new(false),
            stop_copier: Mutex::new(false),
            copier_wake: Condvar::new(),
        });
        let _ = router_cell.set(Arc::downgrade(&shared));
        let copier = match shared.policy.durability {
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
        Ok(TenantRouter {
            shared,
            copier: Mutex::new(copier),
            _copy_lag: copy_lag,
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
            tenants.insert(key.clone(), Tenant::opening());
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
        let (handle, number) = crate::metrics::router_answer(self.shared.enter(key))?;
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
        *lock(&shared.stop_copier) = true;
        shared.copier_wake.notify_all();
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

    /// Every tenant this replica knows, ordered by key.
    pub fn status(&self) -> Vec<TenantStatus> {
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
                lag_ms: u64::try_from(t.last_good_copy_at.elapsed().as_millis()).unwrap_or(u64::MAX),
                last_copy_error: t.last_copy_error.clone(),
            })
            .collect();
        all.sort_by(|a, b| a.key.cmp(&b.key));
        all
    }
}

impl Drop for TenantRouter {
    fn drop(&mut self) {
        *lock(&self.shared.stop_copier) = true;
        self.shared.copier_wake.notify_all();
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
    /// Calls the host's handler; a panic in it is caught, as the keeper catches its
    /// handler's, so that no host bug stops the router's threads.
    fn emit(&self, event: RouterEvent) {
        if let Some(handler) = &self.on_event {
            let _ = catch_unwind(AssertUnwindSafe(|| handler(event)));
        }
    }

    /// The worst lag of the serving tenants with writes no good copy holds yet.
    fn copy_lag(&self) -> crate::metrics::CopyLag {
        lock(&self.tenants)
            .values()
            .filter(|t| t.writes_since_copy > 0 && matches!(t.life, Life::Serving(_) | Life::Draining(_)))
            .fold(crate::metrics::CopyLag::default(), |worst, t| {
                crate::metrics::CopyLag {
                    seconds: worst.seconds.max(t.last_good_copy_at.elapsed().as_secs_f64()),
                    writes: worst.writes.max(t.writes_since_copy),
                }
            })
    }

    fn enter(&self, key: &str) -> Result<(Arc<TenantHandle>, u64)> {
        if *lock(&self.closed) {
            return Err(Error::RouterClosed);
        }
        let mut tenants = lock(&self.tenants);
        while tenants
            .get(key)
            .is_some_and(|t| t.held_back && matches!(t.life, Life::Serving(_)))
        {
            tenants = self.changed.wait(tenants).unwrap_or_else(|p| p.into_inner());
        }
        let Some(tenant) = tenants.get_mut(key) else {
            return Err(not_served(key));
        };
        match &tenant.life {
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
        }
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
                self.copier_wake.notify_all();
            }
        }
        drop(tenants);
        self.changed.notify_all();
    }

    fn leave(&self, key: &str, wrote: bool) {
        let mut tenants = lock(&self.tenants);
        let Some(tenant) = tenants.get_mut(key) else {
            return;
        };
        tenant.in_flight -= 1;
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
        if closed {
            self.emit(RouterEvent::Closed {
                key: key.to_owned(),
                epoch,
            });
        }
    }

    /// A strict call's copy: written as soon as the tenant is quiet. While other calls of the
    /// tenant keep running the call waits for them (without holding anyone back), at most
    /// [`QUIET_WAIT`] in all, then TENANT_BUSY.
    fn copy_for_call(&self, handle: &TenantHandle) -> Result<()> {
        let deadline = Instant::now() + QUIET_WAIT;
        loop {
            match self.copy_now(handle, deadline) {
                Err(Error::TenantBusy { .. }) if Instant::now() < deadline => {
                    self.wait_unblocked(&handle.key, deadline);
                }
                other => return other,
            }
        }
    }

    /// Waits until the calls that blocked the tenant's last copy have returned, or the
    /// deadline.
    fn wait_unblocked(&self, key: &str, deadline: Instant) {
        let mut tenants = lock(&self.tenants);
        while tenants.get(key).is_some_and(|t| t.blocked_by.is_some()) {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            tenants = self
                .changed
                .wait_timeout(tenants, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Writes a copy of a tenant and records its outcome; one copy of a tenant at a time.
    /// Waits for running calls at most `COPY_GRACE` (100 ms) (and never past `deadline`): calls that
    /// run longer make it TENANT_BUSY and keep it from trying again until they returned.
    fn copy_now(&self, handle: &TenantHandle, deadline: Instant) -> Result<()> {
        let started = Instant::now();
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
                    None => return Ok(()),
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
        let quiet = self.hold_calls_back(&handle.key, deadline.min(started + COPY_GRACE));
        let outcome = quiet.and_then(|()| {
            self.copies
                .write_copy_with(&handle.lease, &handle.root, &|| self.let_calls_in(&handle.key))
        });
        drop(marks);
        let mut tenants = lock(&self.tenants);
        if let Some(t) = tenants.get_mut(&handle.key) {
            match &outcome {
                Ok(written) => {
                    t.last_copy = Some(CopyId {
                        epoch: written.epoch,
                        seq: written.seq,
                    });
                    t.last_good_copy_at = started;
                    t.writes_since_copy -= writes_before.min(t.writes_since_copy);
                    t.last_copy_error = None;
                }
                // A long call delays the copy; that is no failure of the store.
                Err(Error::TenantBusy { .. }) => {}
                Err(error) => t.last_copy_error = Some(format!("{}: {error}", error.code_str())),
            }
        }
        drop(tenants);
        self.changed.notify_all();
        outcome.map(|_| ())
    }

    /// Holds a tenant's new calls back and waits for its running ones until `until`. Calls
    /// still running then fail this copy with TENANT_BUSY and are noted in `blocked_by`: the
    /// held calls go on at once, so no call waits behind the copier longer than the grace
    /// and one snapshot.
    fn hold_calls_back(&self, key: &str, until: Instant) -> Result<()> {
        let started = Instant::now();
        let mut tenants = lock(&self.tenants);
        if let Some(t) = tenants.get_mut(key) {
            t.held_back = true;
        }
        loop {
            let Some(t) = tenants.get_mut(key) else {
                return Ok(());
            };
            if t.running.is_empty() {
                return Ok(());
            }
            let now = Instant::now();
            if now >= until {
                t.held_back = false;
                t.blocked_by = t.running.last().copied();
                let running = t.running.len() as u64;
                drop(tenants);
                self.changed.notify_all();
                return Err(Error::TenantBusy {
                    key: key.to_owned(),
                    running,
                    waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                });
            }
            tenants = self
                .changed
                .wait_timeout(tenants, until - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
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
        let deadline = Instant::now() + timeout;
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
            // The keeper goes on renewing the lease while the calls finish.
            while tenants.get(key).is_some_and(|t| t.in_flight > 0) {
                let now = Instant::now();
                if now >= deadline {
                    let tenant = tenants.get_mut(key).expect("a draining tenant stays listed");
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
                tenants = self
                    .changed
                    .wait_timeout(tenants, deadline - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            handle
        };
        // No call runs any more: the copy does not wait for one.
        if let Err(error) = self.copy_now(&handle, Instant::now() + QUIET_WAIT) {
            // Nothing was released: the tenant serves again and the host decides.
            if let Some(t) = lock(&self.tenants).get_mut(key) {
                t.set_life(Life::Serving(handle.clone()));
            }
            self.changed.notify_all();
            return Err(error);
        }
        let released = self.keeper.remove(key);
        lock(&self.tenants).remove(key);
        self.changed.notify_all();
        self.emit(RouterEvent::Closed {
            key: key.to_owned(),
            epoch: handle.epoch(),
        });
        released.map(|_| ())
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

    /// One pass of the `Async` copier: every serving tenant written to since its last good
    /// copy, whose interval has passed and whose last copy no running call still blocks.
    /// A copy that panics is reported as a failed one; the copier carries on.
    fn copy_due(&self) {
        let due: Vec<Arc<TenantHandle>> = lock(&self.tenants)
            .values()
            .filter(|t| {
                t.writes_since_copy > 0
                    && t.blocked_by.is_none()
                    && t.last_good_copy_at.elapsed() >= self.policy.interval
            })
            .filter_map(|t| match &t.life {
                Life::Serving(h) => Some(h.clone()),
                _ => None,
            })
            .collect();
        for handle in due {
            let copied = catch_unwind(AssertUnwindSafe(|| {
                self.copy_now(&handle, Instant::now() + COPY_GRACE)
            }))
            .unwrap_or_else(|panic| {
                Err(Error::Storage {
                    code: "PANIC".to_owned(),
                    message: format!("a copy of {} panicked: {}", handle.key, panic_text(&*panic)),
                })
            });
            match copied {
                Ok(()) | Err(Error::TenantBusy { .. }) => {}
                Err(error) => self.emit(RouterEvent::CopyFailed {
                    key: handle.key.clone(),
                    epoch: handle.epoch(),
                    error,
                }),
            }
        }
    }
}

fn copier(shared: Weak<Shared>) {
    loop {
        let Some(router) = shared.upgrade() else { return };
        router.copy_due();
        let stop = lock(&router.stop_copier);
        if *stop {
            return;
        }
        // A tenth of the interval: a due tenant waits at most that much past its interval.
        let pause = (router.policy.interval / 10).max(Duration::from_millis(10));
        let (stop, _) = router
            .copier_wake
            .wait_timeout(stop, pause)
            .unwrap_or_else(|p| p.into_inner());
        if *stop {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
