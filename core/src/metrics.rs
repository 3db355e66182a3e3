//! The core's own metrics, counted where things happen (the lease stores, the keeper's
//! rounds, the holders' gates, the router, the copies) and written as Prometheus text by
//! [`encode`], which every door hands to its host unchanged.
//!
//! Why not the `prometheus-client` crate: every label set here is closed (a store kind, an
//! operation, an outcome, a reason), so each series is one atomic in a static table, found
//! by index; the crate's label families look series up in a locked map on every count, the
//! cost the keeper's 1,000-lease rounds would pay. And the crate writes OpenMetrics, whose
//! closing `# EOF` and `_total`-less TYPE lines break the one thing a host needs: appending
//! our text to the output of its own registry (prom-client, prometheus_client), which
//! serve the Prometheus text format 0.0.4. The registry is a `static` of this crate, never
//! a process-global recorder a host may have installed already.
//!
//! # Per-tenant series: bounded by capacity, off by default
//!
//! No family above names a tenant: their series count is fixed whatever the number of
//! tenants served, and unbounded label sets are how a metrics server falls over. A router
//! started with [`crate::RouterOptions::tenant_metrics`] adds, for each tenant it lists,
//! four series labelled `replica` (its replica id) and `tenant` (the lease key, escaped as
//! the text format asks): its state, its copy lag in seconds and in acknowledged writes, and
//! its calls in flight. A router lists at most its `capacity` tenants (REPLICA_AT_CAPACITY
//! beyond), so the option costs at most four series per slot of capacity; it is off by
//! default ([`crate::DEFAULT_TENANT_METRICS`]) because even that bound, times the replicas
//! of a fleet and the churn of tenants moving between them (each move is a new series to
//! the server), is for an operator to choose. The series are read from the live router at
//! each scrape, as its copy lag is (nothing is counted on the call path), and a tenant's
//! series are gone from the next text once it leaves the router, or the router is dropped.
//!
//! A tenant's state is one gauge, `gotry_tenant_router_tenant_state{replica,tenant,state}`,
//! written only for its current state, with the value 1: one series per tenant rather than
//! one per state (five times as many, four of them 0), and a state read by its name, as
//! `gotry_tenant_router_tenants{state}` counts it (`count by (state)` over the first is the
//! second), where a state-valued gauge would make every query and alert decode a number
//! whose meaning lives in this file.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::epoch_copies::{RestoreReport, SkippedCopy};
use crate::{Error, FenceReason, Result, SkipReason, TenantState};

/// The media type of [`encode`]'s text, for a host serving it over HTTP.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A lease store kind, the `store` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    Sqlite,
    Mysql,
    Postgres,
}

impl Store {
    const ALL: [Store; 3] = [Store::Sqlite, Store::Mysql, Store::Postgres];

    pub const fn as_str(self) -> &'static str {
        match self {
            Store::Sqlite => "sqlite",
            Store::Mysql => "mysql",
            Store::Postgres => "postgres",
        }
    }
}

/// A lease store call, the `op` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOp {
    Acquire,
    Renew,
    Release,
    Forget,
    /// The keeper's batched renewals: one call, one outcome per lease.
    RenewBatch,
    ReleaseBatch,
}

impl StoreOp {
    const ALL: [StoreOp; 6] = [
        StoreOp::Acquire,
        StoreOp::Renew,
        StoreOp::Release,
        StoreOp::Forget,
        StoreOp::RenewBatch,
        StoreOp::ReleaseBatch,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            StoreOp::Acquire => "acquire",
            StoreOp::Renew => "renew",
            StoreOp::Release => "release",
            StoreOp::Forget => "forget",
            StoreOp::RenewBatch => "renew_batch",
            StoreOp::ReleaseBatch => "release_batch",
        }
    }
}

/// How a lease operation ended, the `outcome` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Granted,
    Held,
    Lost,
    Unavailable,
    Invalid,
}

impl Outcome {
    const ALL: [Outcome; 5] = [
        Outcome::Granted,
        Outcome::Held,
        Outcome::Lost,
        Outcome::Unavailable,
        Outcome::Invalid,
    ];

    const fn as_str(self) -> &'static str {
        match self {
            Outcome::Granted => "granted",
            Outcome::Held => "held",
            Outcome::Lost => "lost",
            Outcome::Unavailable => "unavailable",
            Outcome::Invalid => "invalid",
        }
    }

    fn of<T>(answer: &Result<T>) -> Outcome {
        match answer {
            Ok(_) => Outcome::Granted,
            Err(Error::LeaseHeld { .. }) => Outcome::Held,
            Err(Error::LeaseLost { .. } | Error::Fenced { .. }) => Outcome::Lost,
            Err(Error::InvalidArgument { .. } | Error::IdInvalid { .. }) => Outcome::Invalid,
            Err(_) => Outcome::Unavailable,
        }
    }
}

const FENCE_REASONS: [FenceReason; 3] = [
    FenceReason::LeaseReleased,
    FenceReason::LeaseLost,
    FenceReason::LeaseExpiredLocally,
];
const TENANT_STATES: [TenantState; 5] = [
    TenantState::Opening,
    TenantState::Serving,
    TenantState::Draining,
    TenantState::Lost,
    TenantState::Closed,
];
const SKIP_REASONS: [SkipReason; 6] = [
    SkipReason::Manifest,
    SkipReason::Tenant,
    SkipReason::Checksum,
    SkipReason::Integrity,
    SkipReason::Fold,
    SkipReason::Superseded,
];
/// Why the router refused a call or a handoff, the `code` label.
const REFUSALS: [&str; 2] = ["DRAINING", "DRAIN_TIMEOUT"];
/// How a handoff ended: drained and released, or given up.
const HANDOFF_OUTCOMES: [&str; 3] = ["released", "drain_timeout", "failed"];
const COPY_OUTCOMES: [&str; 2] = ["written", "failed"];
const COLLECTION_OUTCOMES: [&str; 2] = ["done", "failed"];
/// How a restore ended: from a copy, an empty start (no usable copy), or failed.
const RESTORE_OUTCOMES: [&str; 3] = ["restored", "empty", "failed"];

/// 100 µs to 10 s, in nanoseconds: from a SQLite commit on a fast disk to a store call
/// that hits its timeout.
const SECONDS_BUCKETS: [u64; 16] = [
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];
/// Leases per batch, up to the largest batch a keeper sends.
const BATCH_BUCKETS: [u64; 10] = [1, 10, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000];
const MAX_BUCKETS: usize = 16;

/// A histogram whose observations are whole units (nanoseconds, leases): counts per bucket
/// (not cumulative, so one observation is one atomic add), their sum and count.
struct Histogram {
    buckets: [AtomicU64; MAX_BUCKETS],
    sum: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    const fn new() -> Histogram {
        Histogram {
            buckets: [const { AtomicU64::new(0) }; MAX_BUCKETS],
            sum: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    fn observe(&self, bounds: &[u64], units: u64) {
        // Past the last bound the observation counts only in +Inf (the count).
        if let Some(slot) = bounds.iter().position(|&bound| units <= bound) {
            self.buckets[slot].fetch_add(1, Relaxed);
        }
        self.sum.fetch_add(units, Relaxed);
        self.count.fetch_add(1, Relaxed);
    }

    fn observe_duration(&self, elapsed: Duration) {
        self.observe(
            &SECONDS_BUCKETS,
            u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
        );
    }
}

struct Registry {
    lease_ops: [AtomicU64; 3 * 6 * 5],
    store_durations: [Histogram; 3 * 6],
    fences: [AtomicU64; 3],
    leases_lost: AtomicU64,
    keeper_round: Histogram,
    keeper_batch: Histogram,
    router_tenants: [AtomicI64; 5],
    router_in_flight: AtomicI64,
    router_refusals: [AtomicU64; 2],
    handoffs: [AtomicU64; 3],
    copies: [AtomicU64; 2],
    copy_bytes: AtomicU64,
    copy_duration: Histogram,
    collections: [AtomicU64; 2],
    copies_deleted: AtomicU64,
    restores: [AtomicU64; 3],
    restore_skipped: [AtomicU64; 6],
}

static REGISTRY: Registry = Registry {
    lease_ops: [const { AtomicU64::new(0) }; 3 * 6 * 5],
    store_durations: [const { Histogram::new() }; 3 * 6],
    fences: [const { AtomicU64::new(0) }; 3],
    leases_lost: AtomicU64::new(0),
    keeper_round: Histogram::new(),
    keeper_batch: Histogram::new(),
    router_tenants: [const { AtomicI64::new(0) }; 5],
    router_in_flight: AtomicI64::new(0),
    router_refusals: [const { AtomicU64::new(0) }; 2],
    handoffs: [const { AtomicU64::new(0) }; 3],
    copies: [const { AtomicU64::new(0) }; 2],
    copy_bytes: AtomicU64::new(0),
    copy_duration: Histogram::new(),
    collections: [const { AtomicU64::new(0) }; 2],
    copies_deleted: AtomicU64::new(0),
    restores: [const { AtomicU64::new(0) }; 3],
    restore_skipped: [const { AtomicU64::new(0) }; 6],
};

fn index_of<T: PartialEq>(all: &[T], value: &T) -> usize {
    all.iter().position(|candidate| candidate == value).unwrap_or(0)
}

fn store_slot(store: Store, op: StoreOp) -> usize {
    index_of(&Store::ALL, &store) * StoreOp::ALL.len() + index_of(&StoreOp::ALL, &op)
}

fn count_outcome(store: Store, op: StoreOp, outcome: Outcome, n: u64) {
    let slot = store_slot(store, op) * Outcome::ALL.len() + index_of(&Outcome::ALL, &outcome);
    REGISTRY.lease_ops[slot].fetch_add(n, Relaxed);
}

/// Whether the hot paths count (see [`set_counting`]).
static COUNTING: AtomicBool = AtomicBool::new(true);

/// Turns the counting of lease store calls and keeper rounds on or off for the whole
/// process: the baseline the overhead benchmark measures counting against, in the same run,
/// and a way out for a host that wants no clock read per store call. The rarer events
/// (fences, losses, the router's) are counted either way.
pub fn set_counting(on: bool) {
    COUNTING.store(on, Relaxed);
}

/// One lease store call, timed and counted by its outcome: what each store's write methods
/// are wrapped in, so every store is measured the same way.
pub fn store_call<T>(store: Store, op: StoreOp, call: impl FnOnce() -> Result<T>) -> Result<T> {
    if !COUNTING.load(Relaxed) {
        return call();
    }
    let started = Instant::now();
    let answer = call();
    REGISTRY.store_durations[store_slot(store, op)].observe_duration(started.elapsed());
    count_outcome(store, op, Outcome::of(&answer), 1);
    answer
}

/// A batched store call: timed once, counted once per lease (a failed call counts every
/// lease it carried).
pub fn store_batch<T>(
    store: Store,
    op: StoreOp,
    leases: usize,
    call: impl FnOnce() -> Result<Vec<Result<T>>>,
) -> Result<Vec<Result<T>>> {
    if !COUNTING.load(Relaxed) {
        return call();
    }
    let started = Instant::now();
    let answer = call();
    REGISTRY.store_durations[store_slot(store, op)].observe_duration(started.elapsed());
    match &answer {
        Ok(answers) => {
            // Tallied locally first: one atomic add per outcome, not per lease.
            let mut tally = [0u64; 5];
            for each in answers {
                tally[index_of(&Outcome::ALL, &Outcome::of(each))] += 1;
            }
            for (outcome, n) in Outcome::ALL.into_iter().zip(tally) {
                if n > 0 {
                    count_outcome(store, op, outcome, n);
                }
            }
        }
        Err(_) => count_outcome(store, op, Outcome::of(&answer), leases as u64),
    }
    answer
}

/// A holder's write gate closed.
pub fn fenced(reason: FenceReason) {
    REGISTRY.fences[index_of(&FENCE_REASONS, &reason)].fetch_add(1, Relaxed);
}

/// A holder learnt that its lease is lost (its gate closes too: see [`fenced`]).
pub fn lease_lost() {
    REGISTRY.leases_lost.fetch_add(1, Relaxed);
}

/// A keeper round ended, having sent `due` leases in batches of at most the batch size.
pub fn keeper_round(elapsed: Duration) {
    if !COUNTING.load(Relaxed) {
        return;
    }
    REGISTRY.keeper_round.observe_duration(elapsed);
}

/// A keeper sent one batch of `leases` renewals.
pub fn keeper_batch(leases: usize) {
    if !COUNTING.load(Relaxed) {
        return;
    }
    REGISTRY.keeper_batch.observe(&BATCH_BUCKETS, leases as u64);
}

/// A router's tenant moved from one state to another (`None`: in or out of the router).
pub fn router_tenant(from: Option<TenantState>, to: Option<TenantState>) {
    if let Some(from) = from {
        REGISTRY.router_tenants[index_of(&TENANT_STATES, &from)].fetch_sub(1, Relaxed);
    }
    if let Some(to) = to {
        REGISTRY.router_tenants[index_of(&TENANT_STATES, &to)].fetch_add(1, Relaxed);
    }
}

/// A call admitted by a router, counted in flight until the guard drops.
pub struct InFlight(());

impl InFlight {
    pub fn begin() -> InFlight {
        REGISTRY.router_in_flight.fetch_add(1, Relaxed);
        InFlight(())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        REGISTRY.router_in_flight.fetch_sub(1, Relaxed);
    }
}

/// Counts a router's answer when it is a DRAINING or DRAIN_TIMEOUT refusal, and passes it on.
pub fn router_answer<T>(answer: Result<T>) -> Result<T> {
    let code = match &answer {
        Err(Error::Draining { .. }) => Some(0),
        Err(Error::DrainTimeout { .. }) => Some(1),
        _ => None,
    };
    if let Some(code) = code {
        REGISTRY.router_refusals[code].fetch_add(1, Relaxed);
    }
    answer
}

/// A handoff ended: released, timed out draining, or failed otherwise.
pub fn handoff<T>(answer: &Result<T>) {
    let outcome = match answer {
        Ok(_) => 0,
        Err(Error::DrainTimeout { .. }) => 1,
        Err(_) => 2,
    };
    REGISTRY.handoffs[outcome].fetch_add(1, Relaxed);
}

/// A copy ended; `bytes` is what it wrote when it was written.
pub fn copy<T>(answer: &Result<T>, bytes: u64, elapsed: Duration) {
    REGISTRY.copies[usize::from(answer.is_err())].fetch_add(1, Relaxed);
    REGISTRY.copy_bytes.fetch_add(bytes, Relaxed);
    REGISTRY.copy_duration.observe_duration(elapsed);
}

/// A collection of a tenant's copies ended ([`crate::EpochCopies::gc`], asked for or run by the
/// copies' retention).
pub fn copy_gc(answer: &Result<crate::epoch_copies::GcReport>) {
    REGISTRY.collections[usize::from(answer.is_err())].fetch_add(1, Relaxed);
    if let Ok(report) = answer {
        REGISTRY
            .copies_deleted
            .fetch_add(report.deleted.len() as u64, Relaxed);
    }
}

/// A restore ended: from a copy, an empty start, or failed. Every copy it passed over is
/// counted by reason, those a RESTORE_INVALID lists included: a corrupt copy is what an
/// operator alerts on, whether or not an older one could be used instead.
pub fn restore(answer: &Result<RestoreReport>) {
    let (outcome, skipped): (usize, &[SkippedCopy]) = match answer {
        Ok(report) => (usize::from(report.restored.is_none()), &report.skipped),
        Err(Error::RestoreInvalid { skipped, .. }) => (2, skipped),
        Err(_) => (2, &[]),
    };
    REGISTRY.restores[outcome].fetch_add(1, Relaxed);
    for copy in skipped {
        REGISTRY.restore_skipped[index_of(&SKIP_REASONS, &copy.reason)].fetch_add(1, Relaxed);
    }
}

/// How far a router's copies are behind its acknowledged writes, over the tenants that have
/// writes no good copy holds yet.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CopyLag {
    /// Time since the last good copy began, for the tenant waiting longest.
    pub seconds: f64,
    /// Acknowledged writes since the last good copy, for the tenant with the most.
    pub writes: u64,
}

/// What a router answers when a scrape asks for its copy lag.
pub type CopyLagSource = dyn Fn() -> CopyLag + Send + Sync;

/// The routers alive, asked at each scrape: lag is a state, read when wanted, never pushed
/// on the call path. Held weakly, so a router dropped is forgotten.
static COPY_LAG_SOURCES: Mutex<Vec<Weak<CopyLagSource>>> = Mutex::new(Vec::new());

/// Adds a router's copy lag to the gauges, for as long as `source` lives.
pub fn watch_copy_lag(source: &Arc<CopyLagSource>) {
    let mut sources = COPY_LAG_SOURCES.lock().unwrap_or_else(|p| p.into_inner());
    sources.retain(|s| s.strong_count() > 0);
    sources.push(Arc::downgrade(source));
}

/// The worst lag over every router alive.
fn worst_copy_lag() -> CopyLag {
    let sources: Vec<Arc<CopyLagSource>> = COPY_LAG_SOURCES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    // Asked outside the lock: a router's answer takes the router's own lock.
    sources.iter().fold(CopyLag::default(), |worst, source| {
        let lag = source();
        CopyLag {
            seconds: worst.seconds.max(lag.seconds),
            writes: worst.writes.max(lag.writes),
        }
    })
}

/// One tenant of a router started with [`crate::RouterOptions::tenant_metrics`], as its
/// series show it at a scrape.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantSeries {
    /// The lease key, `<organization>/<tenant>`: the `tenant` label.
    pub key: String,
    pub state: TenantState,
    /// Its lag by the rule of the worst-lag gauges (writes no good copy holds yet, of a
    /// serving or draining tenant; 0 otherwise), so that their maximum over the tenants is
    /// those gauges.
    pub copy_lag: CopyLag,
    pub in_flight: u64,
}

/// What a router answers when a scrape asks for its tenants' series.
pub type TenantSeriesSource = dyn Fn() -> Vec<TenantSeries> + Send + Sync;

/// The routers that asked for per-tenant series, with their replica ids: held weakly, so a
/// router dropped is forgotten, and its tenants' series with it.
static TENANT_SOURCES: Mutex<Vec<(String, Weak<TenantSeriesSource>)>> = Mutex::new(Vec::new());

/// Adds a router's tenants to the per-tenant series, labelled with `replica`, for as long as
/// `source` lives (see the [module docs](self)).
pub fn watch_tenants(replica: &str, source: &Arc<TenantSeriesSource>) {
    let mut sources = TENANT_SOURCES.lock().unwrap_or_else(|p| p.into_inner());
    sources.retain(|(_, s)| s.strong_count() > 0);
    sources.push((replica.to_owned(), Arc::downgrade(source)));
}

/// Every router's tenants, ordered by replica and key. A key listed twice under one replica
/// id (two routers of one process with the same id, one still finishing the calls of a
/// lease it lost) is written once, as the router that asked first lists it: the text must
/// not hold two samples of one series.
fn tenant_series() -> Vec<(String, TenantSeries)> {
    let sources: Vec<(String, Arc<TenantSeriesSource>)> = TENANT_SOURCES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter_map(|(replica, source)| Some((replica.clone(), source.upgrade()?)))
        .collect();
    // Asked outside the lock: a router's answer takes the router's own lock.
    let mut all: Vec<(String, TenantSeries)> = sources
        .iter()
        .flat_map(|(replica, source)| source().into_iter().map(|t| (replica.clone(), t)))
        .collect();
    // Stable: of two equal labels, the first router's stays first.
    all.sort_by(|a, b| (&a.0, &a.1.key).cmp(&(&b.0, &b.1.key)));
    all.dedup_by(|b, a| a.0 == b.0 && a.1.key == b.1.key);
    all
}

/// Every family in the Prometheus text format 0.0.4 (see [`CONTENT_TYPE`]), ready to be
/// served as it is or appended to a host registry's own output. Series that never counted
/// anything are left out of the labelled counters, so the text stays as small as what
/// happened.
pub fn encode() -> String {
    let r = &REGISTRY;
    let mut out = String::with_capacity(8 * 1024);
    family(
        &mut out,
        "gotry_tenant_lease_operations_total",
        "counter",
        "Lease store operations by store, operation and outcome; a batch counts once per lease.",
    );
    for store in Store::ALL {
        for op in StoreOp::ALL {
            for outcome in Outcome::ALL {
                let slot = store_slot(store, op) * Outcome::ALL.len() + index_of(&Outcome::ALL, &outcome);
                let n = r.lease_ops[slot].load(Relaxed);
                if n > 0 {
                    let labels = format!(
                        "store=\"{}\",op=\"{}\",outcome=\"{}\"",
                        store.as_str(),
                        op.as_str(),
                        outcome.as_str()
                    );
                    sample(&mut out, "gotry_tenant_lease_operations_total", &labels, n);
                }
            }
        }
    }
    family(
        &mut out,
        "gotry_tenant_store_operation_duration_seconds",
        "histogram",
        "How long the lease store took to answer a call, by store and operation.",
    );
    for store in Store::ALL {
        for op in StoreOp::ALL {
            let h = &r.store_durations[store_slot(store, op)];
            if h.count.load(Relaxed) > 0 {
                let labels = format!("store=\"{}\",op=\"{}\"", store.as_str(), op.as_str());
                histogram(
                    &mut out,
                    "gotry_tenant_store_operation_duration_seconds",
                    &labels,
                    h,
                    &SECONDS_BUCKETS,
                    1e9,
                );
            }
        }
    }
    family(
        &mut out,
        "gotry_tenant_fences_total",
        "counter",
        "Write gates closed, by reason: released, lost, or expired before a renewal moved the fence.",
    );
    for (reason, n) in FENCE_REASONS.iter().zip(&r.fences) {
        sample(
            &mut out,
            "gotry_tenant_fences_total",
            &format!("reason=\"{}\"", reason.as_str()),
            n.load(Relaxed),
        );
    }
    family(
        &mut out,
        "gotry_tenant_leases_lost_total",
        "counter",
        "Leases this process held that the store answered as taken by another holder.",
    );
    sample(
        &mut out,
        "gotry_tenant_leases_lost_total",
        "",
        r.leases_lost.load(Relaxed),
    );
    family(
        &mut out,
        "gotry_tenant_keeper_round_duration_seconds",
        "histogram",
        "How long a keeper's renewal round took, all of its batches included.",
    );
    histogram(
        &mut out,
        "gotry_tenant_keeper_round_duration_seconds",
        "",
        &r.keeper_round,
        &SECONDS_BUCKETS,
        1e9,
    );
    family(
        &mut out,
        "gotry_tenant_keeper_batch_size",
        "histogram",
        "Leases per batched renewal a keeper sent to its store.",
    );
    histogram(
        &mut out,
        "gotry_tenant_keeper_batch_size",
        "",
        &r.keeper_batch,
        &BATCH_BUCKETS,
        1.0,
    );
    family(
        &mut out,
        "gotry_tenant_router_tenants",
        "gauge",
        "Tenants in this process's routers, by state.",
    );
    for (state, n) in TENANT_STATES.iter().zip(&r.router_tenants) {
        let labels = format!("state=\"{}\"", state.as_str());
        let _ = writeln!(out, "gotry_tenant_router_tenants{{{labels}}} {}", n.load(Relaxed));
    }
    family(
        &mut out,
        "gotry_tenant_router_calls_in_flight",
        "gauge",
        "Calls admitted by a router that have not ended yet.",
    );
    let _ = writeln!(
        out,
        "gotry_tenant_router_calls_in_flight {}",
        r.router_in_flight.load(Relaxed)
    );
    family(
        &mut out,
        "gotry_tenant_router_refusals_total",
        "counter",
        "Calls and handoffs a router refused because the tenant was draining or did not drain in time.",
    );
    for (code, n) in REFUSALS.iter().zip(&r.router_refusals) {
        sample(
            &mut out,
            "gotry_tenant_router_refusals_total",
            &format!("code=\"{code}\""),
            n.load(Relaxed),
        );
    }
    family(
        &mut out,
        "gotry_tenant_router_handoffs_total",
        "counter",
        "Handoffs by outcome.",
    );
    for (outcome, n) in HANDOFF_OUTCOMES.iter().zip(&r.handoffs) {
        sample(
            &mut out,
            "gotry_tenant_router_handoffs_total",
            &format!("outcome=\"{outcome}\""),
            n.load(Relaxed),
        );
    }
    family(
        &mut out,
        "gotry_tenant_copies_total",
        "counter",
        "Epoch copies to the durable store, by outcome.",
    );
    for (outcome, n) in COPY_OUTCOMES.iter().zip(&r.copies) {
        sample(
            &mut out,
            "gotry_tenant_copies_total",
            &format!("outcome=\"{outcome}\""),
            n.load(Relaxed),
        );
    }
    family(
        &mut out,
        "gotry_tenant_copy_bytes_total",
        "counter",
        "Bytes written to the durable store by epoch copies.",
    );
    sample(
        &mut out,
        "gotry_tenant_copy_bytes_total",
        "",
        r.copy_bytes.load(Relaxed),
    );
    family(
        &mut out,
        "gotry_tenant_copy_duration_seconds",
        "histogram",
        "How long an epoch copy took, snapshot and upload.",
    );
    histogram(
        &mut out,
        "gotry_tenant_copy_duration_seconds",
        "",
        &r.copy_duration,
        &SECONDS_BUCKETS,
        1e9,
    );
    family(
        &mut out,
        "gotry_tenant_copy_collections_total",
        "counter",
        "Collections of a tenant's old copies (gc, asked for or by retention), by outcome.",
    );
    for (outcome, n) in COLLECTION_OUTCOMES.iter().zip(&r.collections) {
        sample(
            &mut out,
            "gotry_tenant_copy_collections_total",
            &format!("outcome=\"{outcome}\""),
            n.load(Relaxed),
        );
    }
    family(
        &mut out,
        "gotry_tenant_copies_deleted_total",
        "counter",
        "Copies deleted by collections.",
    );
    sample(
        &mut out,
        "gotry_tenant_copies_deleted_total",
        "",
        r.copies_deleted.load(Relaxed),
    );
    let lag = worst_copy_lag();
    family(
        &mut out,
        "gotry_tenant_copy_lag_seconds",
        "gauge",
        "Time since the last good copy began, for the served tenant with unsaved writes that waited longest.",
    );
    let _ = writeln!(out, "gotry_tenant_copy_lag_seconds {}", lag.seconds);
    family(
        &mut out,
        "gotry_tenant_copy_lag_writes",
        "gauge",
        "Acknowledged writes since the last good copy, for the served tenant with the most.",
    );
    let _ = writeln!(out, "gotry_tenant_copy_lag_writes {}", lag.writes);
    family(
        &mut out,
        "gotry_tenant_restores_total",
        "counter",
        "Restores by outcome: from a copy, an empty start, or failed.",
    );
    for (outcome, n) in RESTORE_OUTCOMES.iter().zip(&r.restores) {
        sample(
            &mut out,
            "gotry_tenant_restores_total",
            &format!("outcome=\"{outcome}\""),
            n.load(Relaxed),
        );
    }
    family(
        &mut out,
        "gotry_tenant_restore_skipped_copies_total",
        "counter",
        "Copies a restore passed over, by reason.",
    );
    for (reason, n) in SKIP_REASONS.iter().zip(&r.restore_skipped) {
        sample(
            &mut out,
            "gotry_tenant_restore_skipped_copies_total",
            &format!("reason=\"{}\"", reason.as_str()),
            n.load(Relaxed),
        );
    }
    tenant_families(&mut out);
    out
}

/// The per-tenant families: described always (a host registry that registers our families
/// once, at start, knows them before any router asks), with samples only for the routers
/// that asked (see the [module docs](self)).
fn tenant_families(out: &mut String) {
    let tenants = tenant_series();
    let labels: Vec<String> = tenants
        .iter()
        .map(|(replica, t)| format!("replica=\"{}\",tenant=\"{}\"", escape(replica), escape(&t.key)))
        .collect();
    // Each family: its header, then one sample per tenant, `value` giving the labels that
    // follow the tenant's own (the state's) and the sample's value.
    let mut gauge = |name: &str, help: &str, value: &dyn Fn(&TenantSeries) -> (String, String)| {
        family(out, name, "gauge", help);
        for ((_, t), labels) in tenants.iter().zip(&labels) {
            let (more, value) = value(t);
            let _ = writeln!(out, "{name}{{{labels}{more}}} {value}");
        }
    };
    gauge(
        "gotry_tenant_router_tenant_state",
        "1 for each tenant of a router with per-tenant metrics, labelled with its state.",
        &|t| (format!(",state=\"{}\"", t.state.as_str()), "1".to_owned()),
    );
    gauge(
        "gotry_tenant_router_tenant_calls_in_flight",
        "Calls of the tenant admitted by its router that have not ended yet.",
        &|t| (String::new(), t.in_flight.to_string()),
    );
    gauge(
        "gotry_tenant_router_tenant_copy_lag_seconds",
        "Time since the tenant's last good copy began, while it has writes no copy holds yet (else 0).",
        &|t| (String::new(), t.copy_lag.seconds.to_string()),
    );
    gauge(
        "gotry_tenant_router_tenant_copy_lag_writes",
        "Acknowledged writes of the tenant since its last good copy.",
        &|t| (String::new(), t.copy_lag.writes.to_string()),
    );
}

/// A label value as the text format writes it: backslash, double quote and line feed escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Writes one gauge family of numbers read elsewhere (the CLI's, from the stores), in the
/// format of [`encode`]: each sample is its label pairs and its value. Label values are
/// escaped as the format asks, since they may come from a store.
pub fn encode_gauge(out: &mut String, name: &str, help: &str, samples: &[(&[(&str, &str)], f64)]) {
    family(out, name, "gauge", help);
    for (labels, value) in samples {
        let labels: Vec<String> = labels
            .iter()
            .map(|(label, value)| format!("{label}=\"{}\"", escape(value)))
            .collect();
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {value}");
        } else {
            let _ = writeln!(out, "{name}{{{}}} {value}", labels.join(","));
        }
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &str, value: u64) {
    if labels.is_empty() {
        let _ = writeln!(out, "{name} {value}");
    } else {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

fn histogram(out: &mut String, name: &str, labels: &str, h: &Histogram, bounds: &[u64], per_unit: f64) {
    let sep = if labels.is_empty() { "" } else { "," };
    let mut cumulative = 0u64;
    for (bound, n) in bounds.iter().zip(&h.buckets) {
        cumulative += n.load(Relaxed);
        let le = *bound as f64 / per_unit;
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}");
    }
    // Read after the buckets: an observation landing meanwhile leaves +Inf no lower than
    // the last bucket.
    let count = h.count.load(Relaxed).max(cumulative);
    let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}");
    let sum = h.sum.load(Relaxed) as f64 / per_unit;
    if labels.is_empty() {
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    } else {
        let _ = writeln!(
            out,
            "{name}_sum{{{labels}}} {sum}\n{name}_count{{{labels}}} {count}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_end_in_the_count() {
        let h = Histogram::new();
        h.observe(&BATCH_BUCKETS, 5);
        h.observe(&BATCH_BUCKETS, 1_000);
        h.observe(&BATCH_BUCKETS, 20_000);
        let mut out = String::new();
        histogram(&mut out, "x", "", &h, &BATCH_BUCKETS, 1.0);
        assert!(out.contains("x_bucket{le=\"10\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"1000\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"10000\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"+Inf\"} 3\n"), "{out}");
        assert!(out.contains("x_sum 21005\nx_count 3\n"), "{out}");
    }

    #[test]
    fn seconds_buckets_run_from_100_microseconds_to_10_seconds() {
        let h = Histogram::new();
        let mut out = String::new();
        histogram(&mut out, "d", "op=\"a\"", &h, &SECONDS_BUCKETS, 1e9);
        assert!(out.starts_with("d_bucket{op=\"a\",le=\"0.0001\"} 0\n"), "{out}");
        assert!(out.contains("d_bucket{op=\"a\",le=\"10\"} 0\n"), "{out}");
    }

    #[test]
    fn a_gauge_read_elsewhere_is_written_with_its_labels_escaped() {
        let mut out = String::new();
        encode_gauge(
            &mut out,
            "g",
            "Help.",
            &[(&[("state", "a\"b\\c\nd")], 2.0), (&[], 0.5)],
        );
        assert_eq!(
            out,
            "# HELP g Help.\n# TYPE g gauge\ng{state=\"a\\\"b\\\\c\\nd\"} 2\ng 0.5\n"
        );
    }

    #[test]
    fn a_batch_counts_each_lease_by_its_outcome() {
        let answers: Result<Vec<Result<()>>> = Ok(vec![
            Ok(()),
            Err(Error::lease_lost("k")),
            Err(Error::invalid_argument("bad")),
        ]);
        let read = |outcome: Outcome| {
            let slot =
                store_slot(Store::Postgres, StoreOp::ReleaseBatch) * 5 + index_of(&Outcome::ALL, &outcome);
            REGISTRY.lease_ops[slot].load(Relaxed)
        };
        let before = [Outcome::Granted, Outcome::Lost, Outcome::Invalid].map(read);
        store_batch(Store::Postgres, StoreOp::ReleaseBatch, 3, || answers).unwrap();
        let after = [Outcome::Granted, Outcome::Lost, Outcome::Invalid].map(read);
        assert_eq!(
            [after[0] - before[0], after[1] - before[1], after[2] - before[2]],
            [1, 1, 1]
        );
        let failed = store_batch::<()>(Store::Postgres, StoreOp::ReleaseBatch, 4, || {
            Err(Error::unavailable("down"))
        });
        assert!(failed.is_err());
        let slot = store_slot(Store::Postgres, StoreOp::ReleaseBatch) * 5 + 3;
        assert!(REGISTRY.lease_ops[slot].load(Relaxed) >= 4);
    }
}
