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
//!   after it: a call whose after-check fails is FENCED, since its effects cannot be
//!   acknowledged. A tenant that drains refuses new calls (DRAINING); a lost lease stops
//!   the tenant at once (FENCED), and the host is told when its last call ended.
//! * Copies follow the [`CopyPolicy`]: in `Async` mode a background thread copies every
//!   tenant that was written to, once per interval, and a failing durable store is reported
//!   and visible as lag; in `Strict` mode the call's acknowledgement waits for its copy, and
//!   DURABLE_STORE_UNAVAILABLE refuses it.
//! * [`TenantRouter::handoff`] drains (the lease keeps being renewed meanwhile), takes a
//!   final copy, releases. Calls still running at the timeout leave the tenant serving,
//!   with nothing flushed or released (DRAIN_TIMEOUT).

use std::collections::HashMap;
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
            clock: Arc::new(crate::clock::SystemMonotonicClock),
            verify: None,
            snapshot: None,
            on_event: None,
        }
    }
}

/// How long a copy waits for a tenant's running calls to return before it gives up.
const QUIET_WAIT: Duration = Duration::from_secs(5);

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
}

impl TenantState {
    pub const fn as_str(self) -> &'static str {
        match self {
            TenantState::Opening => "opening",
            TenantState::Serving => "serving",
            TenantState::Draining => "draining",
            TenantState::Lost => "lost",
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

struct Tenant {
    handle: Option<Arc<TenantHandle>>,
    state: TenantState,
    in_flight: u64,
    writes_since_copy: u64,
    last_copy: Option<CopyId>,
    last_good_copy_at: Instant,
    last_copy_error: Option<String>,
    copying: bool,
    /// Calls inside the host's code, which may open the tenant's files.
    running: u64,
    /// New calls wait: a copy is reading the tenant's files (see [`Shared::copy_now`]).
    held_back: bool,
}

struct Shared {
    keeper: LeaseKeeper,
    copies: EpochCopies,
    state_root: PathBuf,
    capacity: usize,
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
        let shared = Arc::new(Shared {
            keeper: LeaseKeeper::start(keeper_options)?,
            copies: EpochCopies::new(options.durable_store).with_host_snapshot(options.snapshot),
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
        Ok(TenantRouter {
            shared,
            copier: Mutex::new(copier),
        })
    }

    pub fn capacity(&self) -> usize {
        self.shared.capacity
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
                match tenants.get(&key) {
                    Some(t) if t.state == TenantState::Opening => {
                        tenants = shared.changed.wait(tenants).unwrap_or_else(|p| p.into_inner());
                    }
                    Some(t) if t.state == TenantState::Serving => {
                        return Ok(t.handle.clone().expect("a serving tenant has its handle"));
                    }
                    Some(t) if t.state == TenantState::Draining => {
                        return Err(Error::Draining { key });
                    }
                    Some(t) => return Err(fenced_for(&key, t)),
                    None => break,
                }
            }
            if tenants.len() >= shared.capacity {
                return Err(Error::ReplicaAtCapacity {
                    limit: shared.capacity as u64,
                });
            }
            tenants.insert(
                key.clone(),
                Tenant {
                    handle: None,
                    state: TenantState::Opening,
                    in_flight: 0,
                    writes_since_copy: 0,
                    last_copy: None,
                    last_good_copy_at: Instant::now(),
                    last_copy_error: None,
                    copying: false,
                    running: 0,
                    held_back: false,
                },
            );
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
        let result = match opened {
            Ok(handle) => {
                let tenant = tenants.get_mut(&key).expect("an opening tenant stays listed");
                tenant.handle = Some(handle.clone());
                tenant.last_copy = handle.restored_from;
                tenant.state = TenantState::Serving;
                Ok(handle)
            }
            Err(error) => {
                tenants.remove(&key);
                Err(error)
            }
        };
        shared.changed.notify_all();
        result
    }

    /// Runs one call of a served tenant; see the [module docs](self).
    pub fn run<T>(&self, key: &str, call: impl FnOnce(&TenantHandle) -> Result<T>) -> Result<T> {
        let started = self.begin(key)?;
        let value = call(started.handle())?;
        started.finish().map(|()| value)
    }

    /// Starts a call of a served tenant, for hosts whose calls do not fit in one closure (a
    /// JS promise): counted in flight, the gate checked, until the [`RouterCall`] is finished
    /// or dropped. [`TenantRouter::run`] is this around a closure.
    pub fn begin(&self, key: &str) -> Result<RouterCall> {
        let handle = self.shared.enter(key)?;
        let call = RouterCall {
            shared: self.shared.clone(),
            handle,
            open: true,
        };
        call.handle.lease.assert_held()?;
        Ok(call)
    }

    /// Hands a tenant off; see the [module docs](self).
    pub fn handoff(&self, key: &str, timeout: Duration) -> Result<()> {
        self.shared.handoff(key, timeout)
    }

    /// Hands every tenant off, then refuses every later open with ROUTER_CLOSED.
    pub fn close(&self, timeout: Duration) -> CloseReport {
        let shared = &self.shared;
        *lock(&shared.closed) = true;
        let keys: Vec<String> = lock(&shared.tenants).keys().cloned().collect();
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
                state: t.state,
                epoch: t.handle.as_ref().map_or(0, |h| h.epoch()),
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

/// A lost tenant waiting for its last call: this replica cannot serve it until that tenure
/// is over.
/// A call in flight. [`RouterCall::finish`] acknowledges it; dropping it unfinished counts
/// it as failed (nothing to copy for it).
pub struct RouterCall {
    shared: Arc<Shared>,
    handle: Arc<TenantHandle>,
    open: bool,
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

    /// The call succeeded: FENCED when the gate closed meanwhile (its effects cannot be
    /// acknowledged); in `Strict` mode, waits for a copy that holds it and fails with the
    /// copy's error. Blocks on the durable store in `Strict` mode only.
    pub fn finish(mut self) -> Result<()> {
        self.open = false;
        let shared = &self.shared;
        shared.stop_running(&self.handle.key);
        let outcome = self
            .handle
            .lease
            .assert_held()
            .and_then(|()| match shared.policy.durability {
                Durability::Strict => shared.copy_now(&self.handle),
                Durability::Async => Ok(()),
            });
        shared.leave(
            &self.handle.key,
            outcome.is_ok() && shared.policy.durability == Durability::Async,
        );
        outcome
    }
}

impl Drop for RouterCall {
    fn drop(&mut self) {
        if self.open {
            self.shared.stop_running(&self.handle.key);
            self.shared.leave(&self.handle.key, false);
        }
    }
}

fn fenced_for(key: &str, tenant: &Tenant) -> Error {
    Error::Fenced {
        reason: FenceReason::LeaseLost,
        key: key.to_owned(),
        epoch: tenant.handle.as_ref().map_or(0, |h| h.epoch()),
    }
}

impl Shared {
    fn emit(&self, event: RouterEvent) {
        if let Some(handler) = &self.on_event {
            handler(event);
        }
    }

    fn enter(&self, key: &str) -> Result<Arc<TenantHandle>> {
        if *lock(&self.closed) {
            return Err(Error::RouterClosed);
        }
        let mut tenants = lock(&self.tenants);
        while tenants
            .get(key)
            .is_some_and(|t| t.held_back && t.state == TenantState::Serving)
        {
            tenants = self.changed.wait(tenants).unwrap_or_else(|p| p.into_inner());
        }
        let Some(tenant) = tenants.get_mut(key) else {
            return Err(Error::lease_lost(format!("{key} is not served by this replica")));
        };
        match tenant.state {
            TenantState::Serving => {
                tenant.in_flight += 1;
                tenant.running += 1;
                Ok(tenant.handle.clone().expect("a serving tenant has its handle"))
            }
            TenantState::Draining => Err(Error::Draining { key: key.to_owned() }),
            TenantState::Opening => Err(Error::lease_lost(format!("{key} is still being opened"))),
            TenantState::Lost => Err(fenced_for(key, tenant)),
        }
    }

    /// A call's host code has returned: the tenant's files are the router's to copy.
    fn stop_running(&self, key: &str) {
        if let Some(tenant) = lock(&self.tenants).get_mut(key) {
            tenant.running -= 1;
        }
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
        let closed = tenant.in_flight == 0 && tenant.state == TenantState::Lost;
        let epoch = tenant.handle.as_ref().map_or(0, |h| h.epoch());
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

    /// Writes a copy of a tenant and records its outcome; one copy of a tenant at a time.
    fn copy_now(&self, handle: &TenantHandle) -> Result<()> {
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
        // The host may open the tenant's files only inside its calls: POSIX locks belong to
        // the process, so this library's SQLite reading a file the host's SQLite opens at
        // the same moment would let either drop the other's locks. New calls wait, and the
        // running ones are waited for, until the snapshot is taken (not the upload).
        let quiet = self.hold_calls_back(&handle.key);
        let outcome = quiet.and_then(|()| {
            self.copies
                .write_copy_with(&handle.lease, &handle.root, &|| self.let_calls_in(&handle.key))
        });
        self.let_calls_in(&handle.key);
        let mut tenants = lock(&self.tenants);
        if let Some(t) = tenants.get_mut(&handle.key) {
            t.copying = false;
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
                Err(error) => t.last_copy_error = Some(format!("{}: {error}", error.code_str())),
            }
        }
        drop(tenants);
        self.changed.notify_all();
        outcome.map(|_| ())
    }

    /// Holds a tenant's new calls back and waits for its running ones, at most
    /// [`QUIET_WAIT`]: a call that runs longer fails this copy (the host hears of it), it
    /// does not stall every later one.
    fn hold_calls_back(&self, key: &str) -> Result<()> {
        let deadline = Instant::now() + QUIET_WAIT;
        let mut tenants = lock(&self.tenants);
        if let Some(t) = tenants.get_mut(key) {
            t.held_back = true;
        }
        loop {
            let running = tenants.get(key).map_or(0, |t| t.running);
            let now = Instant::now();
            if running == 0 {
                return Ok(());
            }
            if now >= deadline {
                return Err(Error::Storage {
                    code: "TENANT_BUSY".to_owned(),
                    message: format!(
                        "{key}: {running} call(s) kept running for {} ms, so no copy could read its files",
                        QUIET_WAIT.as_millis()
                    ),
                });
            }
            tenants = self
                .changed
                .wait_timeout(tenants, deadline - now)
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

    fn handoff(&self, key: &str, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let handle = {
            let mut tenants = lock(&self.tenants);
            let Some(tenant) = tenants.get_mut(key) else {
                return Err(Error::lease_lost(format!("{key} is not served by this replica")));
            };
            match tenant.state {
                TenantState::Serving => tenant.state = TenantState::Draining,
                TenantState::Draining => return Err(Error::Draining { key: key.to_owned() }),
                _ => return Err(fenced_for(key, tenant)),
            }
            let handle = tenant.handle.clone().expect("a serving tenant has its handle");
            // The keeper goes on renewing the lease while the calls finish.
            while tenants.get(key).is_some_and(|t| t.in_flight > 0) {
                let now = Instant::now();
                if now >= deadline {
                    let tenant = tenants.get_mut(key).expect("a draining tenant stays listed");
                    tenant.state = TenantState::Serving;
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
        if let Err(error) = self.copy_now(&handle) {
            // Nothing was released: the tenant serves again and the host decides.
            if let Some(t) = lock(&self.tenants).get_mut(key) {
                t.state = TenantState::Serving;
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
        if tenant.handle.as_ref().map(|h| h.epoch()) != Some(epoch) {
            return;
        }
        tenant.state = TenantState::Lost;
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
    /// copy, whose interval has passed.
    fn copy_due(&self) {
        let due: Vec<Arc<TenantHandle>> = lock(&self.tenants)
            .values()
            .filter(|t| {
                t.state == TenantState::Serving
                    && t.writes_since_copy > 0
                    && t.last_good_copy_at.elapsed() >= self.policy.interval
            })
            .filter_map(|t| t.handle.clone())
            .collect();
        for handle in due {
            if let Err(error) = self.copy_now(&handle) {
                self.emit(RouterEvent::CopyFailed {
                    key: handle.key.clone(),
                    epoch: handle.epoch(),
                    error,
                });
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
