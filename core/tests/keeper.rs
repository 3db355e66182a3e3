//! The lease keeper: its timing rules on manual clocks (rounds run by hand with `tick`), and
//! its thread on real time.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use gotry_tenant_state::keeper::DEFAULT_MAX_BATCH;
use gotry_tenant_state::{
    Error, EventHandler, FenceReason, FixedWallClock, KeeperEvent, KeeperOptions, LeaseGrant, LeaseKeeper,
    LeaseOp, LeaseStore, ManualClock, SqliteLeaseStore, SystemWallClock, TenantLease, TickReport, WallClock,
};
use gotry_test_support::faulty::{FaultyStore, Method};

const TTL: i64 = 1_000;
const MARGIN: i64 = 100;
/// With the manual keeper's fraction of a quarter: renewals every 250 ms, rounds take what
/// falls due within 125 ms, retries come 62.5 ms apart.
const FRACTION: f64 = 0.25;
/// Generous bound for conditions that real time brings about; never a speed requirement.
const PATIENCE: Duration = Duration::from_secs(60);

/// The SQLite store behind a [`FaultyStore`] that fails, holds back and watches its calls;
/// the keeper uses the wrapper, the tests reach the store itself as `inner`.
struct Probe {
    store: Arc<FaultyStore>,
    inner: Arc<SqliteLeaseStore>,
}

impl Probe {
    fn new(inner: SqliteLeaseStore) -> Probe {
        let inner = Arc::new(inner);
        Probe {
            store: Arc::new(FaultyStore::new(inner.clone())),
            inner,
        }
    }

    /// Every renewal batch fails as unavailable while down; nothing else does.
    fn set_down(&self, down: bool) {
        if down {
            self.store.fail(Method::RenewBatch, usize::MAX);
        } else {
            self.store.clear_hook();
        }
    }

    /// Runs `hook` before each renewal batch.
    fn before_batch(&self, hook: impl Fn() + Send + Sync + 'static) {
        self.store.set_hook(move |call| {
            if call.method() == Method::RenewBatch {
                hook();
            }
            None
        });
    }

    /// Runs `hook` before each release, batched or not.
    fn before_release(&self, hook: impl Fn() + Send + Sync + 'static) {
        self.store.set_hook(move |call| {
            if matches!(call.method(), Method::Release | Method::ReleaseBatch) {
                hook();
            }
            None
        });
    }

    fn batch_sizes(&self) -> Vec<usize> {
        self.store.take_calls(Method::RenewBatch)
    }

    fn ops(&self, key: &str) -> Vec<(LeaseOp, String, i64)> {
        self.inner
            .history(Some(key))
            .unwrap()
            .into_iter()
            .map(|e| (e.op, e.owner, e.epoch))
            .collect()
    }

    fn renewals(&self, key: &str) -> usize {
        self.ops(key)
            .iter()
            .filter(|(op, _, _)| *op == LeaseOp::Renew)
            .count()
    }

    /// Another replica takes `key` over, deciding on a clock far ahead of ours: the
    /// keeper's next renewal of it is refused.
    fn take_over(&self, key: &str, far_ahead_ms: i64) -> LeaseGrant {
        self.inner
            .with_clock(Arc::new(FixedWallClock(far_ahead_ms)))
            .acquire(key, "other", TTL)
            .unwrap()
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Seen {
    kind: &'static str,
    key: Option<String>,
    epoch: Option<i64>,
    code: Option<String>,
}

fn seen(kind: &'static str, key: &str, epoch: i64, code: Option<&str>) -> Seen {
    Seen {
        kind,
        key: Some(key.to_owned()),
        epoch: Some(epoch),
        code: code.map(str::to_owned),
    }
}

/// Collects the keeper's events; a test waits on it with a generous bound.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Seen>>,
    changed: Condvar,
}

impl Recorder {
    fn push(&self, event: &KeeperEvent) {
        self.seen.lock().unwrap().push(Seen {
            kind: event.kind().as_str(),
            key: event.key().map(str::to_owned),
            epoch: event.epoch(),
            code: event.error().map(|e| e.code_str().to_owned()),
        });
        self.changed.notify_all();
    }

    fn handler(self: &Arc<Recorder>) -> EventHandler {
        let recorder = Arc::clone(self);
        Box::new(move |event| recorder.push(&event))
    }

    /// A host's handler that fails on its first event and passes the rest on; the count is
    /// of every event it was handed, the failed one included.
    fn handler_that_panics_first(self: &Arc<Recorder>) -> (EventHandler, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let (counter, recorder) = (calls.clone(), Arc::clone(self));
        let handler: EventHandler = Box::new(move |event| {
            if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("the host's handler fails");
            }
            recorder.push(&event);
        });
        (handler, calls)
    }

    fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }

    fn wait_for(&self, what: &str, done: impl Fn(&[Seen]) -> bool) -> Vec<Seen> {
        let start = Instant::now();
        let mut seen = self.seen.lock().unwrap();
        while !done(&seen) {
            assert!(start.elapsed() < PATIENCE, "never saw {what}; saw {seen:?}");
            seen = self
                .changed
                .wait_timeout(seen, Duration::from_millis(50))
                .unwrap()
                .0;
        }
        seen.clone()
    }
}

/// Waits for a condition that real time brings about, with a generous bound.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < PATIENCE, "never saw {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Manual clocks for the store (wall) and the keeper (monotonic), moved together.
struct Fixture {
    _dir: tempfile::TempDir,
    wall: Arc<ManualClock>,
    mono: Arc<ManualClock>,
    probe: Probe,
    events: Arc<Recorder>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let wall = Arc::new(ManualClock::new(1_000_000));
        let inner = SqliteLeaseStore::open(dir.path().join("leases.db"))
            .unwrap()
            .with_clock(wall.clone());
        Fixture {
            _dir: dir,
            wall,
            mono: Arc::new(ManualClock::new(0)),
            probe: Probe::new(inner),
            events: Arc::default(),
        }
    }

    fn options(&self) -> KeeperOptions {
        let mut options = KeeperOptions::new(self.probe.store.clone(), "replica-a", TTL, MARGIN);
        options.clock = self.mono.clone();
        options.renew_fraction = FRACTION;
        options.on_event = Some(self.events.handler());
        options
    }

    fn keeper(&self) -> LeaseKeeper {
        LeaseKeeper::without_thread(self.options()).unwrap()
    }

    fn keeper_batching(&self, max_batch: usize) -> LeaseKeeper {
        let mut options = self.options();
        options.max_batch = max_batch;
        LeaseKeeper::without_thread(options).unwrap()
    }

    /// Moves both clocks to `mono_ms` on the keeper's clock.
    fn at(&self, mono_ms: i64) {
        let delta = mono_ms - self.mono.get();
        self.mono.advance(delta).unwrap();
        self.wall.advance(delta).unwrap();
    }

    fn far_ahead(&self) -> i64 {
        self.wall.get() + 3_600_000
    }
}

/// What the keeper tells of a lease it held at epoch 1 and was refused.
fn lost_event(key: &str) -> Seen {
    seen("lost", key, 1, Some("GOTRY_TENANT_LEASE_LOST"))
}

fn lost_only(seen: Vec<Seen>) -> Vec<Seen> {
    seen.into_iter().filter(|s| s.kind == "lost").collect()
}

/// Through an outage every retry tells its failure; the tests look at what else was told.
fn beyond_failures(seen: Vec<Seen>) -> Vec<Seen> {
    seen.into_iter().filter(|s| s.kind != "renew_failed").collect()
}

fn acquire_numbered(keeper: &LeaseKeeper, count: usize) -> Vec<Arc<TenantLease>> {
    (0..count)
        .map(|i| keeper.acquire(&format!("k{i}")).unwrap())
        .collect()
}

fn fence_reason(lease: &TenantLease) -> Option<FenceReason> {
    match lease.assert_held() {
        Ok(()) => None,
        Err(Error::Fenced { reason, .. }) => Some(reason),
        Err(other) => panic!("expected FENCED, got {other:?}"),
    }
}

fn report(
    batches: usize,
    renewed: usize,
    lost: usize,
    failed: usize,
    next_due_ms: Option<f64>,
) -> TickReport {
    TickReport {
        batches,
        renewed,
        lost,
        failed,
        next_due_ms,
    }
}

#[test]
fn a_lease_is_renewed_when_due_and_not_before() {
    let f = Fixture::new();
    let keeper = f.keeper();
    let lease = keeper.acquire("k1").unwrap();
    assert_eq!(lease.remaining_ms().unwrap(), 900.0);

    f.at(249);
    assert_eq!(keeper.tick().unwrap(), report(0, 0, 0, 0, Some(250.0)));
    assert_eq!(f.probe.renewals("k1"), 0);

    f.at(250);
    assert_eq!(keeper.tick().unwrap(), report(1, 1, 0, 0, Some(500.0)));
    assert_eq!(f.probe.renewals("k1"), 1);
    // The fence counts from the reading taken before the batch: 250 + 1000 - 100.
    assert_eq!(lease.remaining_ms().unwrap(), 900.0);
    assert_eq!(
        f.probe.inner.read("k1").unwrap().unwrap().lease_until_ms,
        f.wall.get() + TTL
    );
    assert!(lease.is_held());
    assert_eq!(f.events.take(), vec![]);
}

#[test]
fn a_round_takes_every_lease_due_within_half_an_interval() {
    let f = Fixture::new();
    let keeper = f.keeper();
    let a = keeper.acquire("a").unwrap();
    f.at(100);
    let b = keeper.acquire("b").unwrap();
    f.at(200);
    let c = keeper.acquire("c").unwrap();
    f.probe.batch_sizes();

    // Due at 250, 350 and 450: the round at 250 takes a and b (due by 375), not c.
    f.at(250);
    assert_eq!(keeper.tick().unwrap(), report(1, 2, 0, 0, Some(450.0)));
    assert_eq!(f.probe.batch_sizes(), vec![2]);
    assert_eq!(
        (a.remaining_ms().unwrap(), b.remaining_ms().unwrap()),
        (900.0, 900.0)
    );
    assert_eq!(c.remaining_ms().unwrap(), 850.0);
    // At 450, c is due and a and b (due at 500) fall within the half interval: one batch.
    f.at(450);
    assert_eq!(keeper.tick().unwrap(), report(1, 3, 0, 0, Some(700.0)));
    assert_eq!(f.probe.batch_sizes(), vec![3]);
    for lease in [&a, &b, &c] {
        assert_eq!(lease.remaining_ms().unwrap(), 900.0);
    }
}

#[test]
fn batches_hold_at_most_max_batch_leases() {
    let f = Fixture::new();
    let keeper = f.keeper_batching(2);
    let leases = acquire_numbered(&keeper, 5);
    f.probe.batch_sizes();
    f.at(250);
    assert_eq!(keeper.tick().unwrap(), report(3, 5, 0, 0, Some(500.0)));
    assert_eq!(f.probe.batch_sizes(), vec![2, 2, 1]);
    assert!(leases.iter().all(|lease| lease.remaining_ms().unwrap() == 900.0));
    assert_eq!(
        DEFAULT_MAX_BATCH,
        KeeperOptions::new(f.probe.store.clone(), "r", TTL, 0).max_batch
    );
}

#[test]
fn the_fence_counts_from_before_the_batch_and_never_moves_back() {
    let f = Fixture::new();
    let keeper = f.keeper();
    let lease = keeper.acquire("k").unwrap();
    // The round trip takes 40 ms.
    let (mono, wall) = (f.mono.clone(), f.wall.clone());
    f.probe.before_batch(move || {
        mono.advance(40).unwrap();
        wall.advance(40).unwrap();
    });
    f.at(250);
    keeper.tick().unwrap();
    assert_eq!(f.mono.get(), 290);
    assert_eq!(lease.remaining_ms().unwrap(), 250.0 + 900.0 - 290.0);

    // While the next batch is out, the host renews through its handle 100 ms later: the
    // batch's older answer must not pull that fence back.
    let (mono, wall, handle) = (f.mono.clone(), f.wall.clone(), lease.clone());
    f.probe.before_batch(move || {
        mono.advance(100).unwrap();
        wall.advance(100).unwrap();
        handle.renew().unwrap();
    });
    f.at(500);
    assert_eq!(keeper.tick().unwrap().renewed, 1);
    assert_eq!(f.mono.get(), 600);
    assert_eq!(lease.remaining_ms().unwrap(), 900.0);
}

#[test]
fn a_refused_renewal_is_lost_once_and_the_rest_of_the_batch_is_renewed() {
    let f = Fixture::new();
    let keeper = f.keeper();
    let a = keeper.acquire("a").unwrap();
    let b = keeper.acquire("b").unwrap();
    assert_eq!(f.probe.take_over("a", f.far_ahead()).record.epoch, 2);

    f.at(250);
    assert_eq!(keeper.tick().unwrap(), report(1, 1, 1, 0, Some(500.0)));
    assert_eq!(f.events.take(), vec![lost_event("a")]);
    assert_eq!(fence_reason(&a), Some(FenceReason::LeaseLost));
    assert!(keeper.get("a").is_none());
    assert_eq!(keeper.len(), 1);
    assert_eq!(b.remaining_ms().unwrap(), 900.0);

    f.probe.batch_sizes();
    f.at(500);
    assert_eq!(keeper.tick().unwrap(), report(1, 1, 0, 0, Some(750.0)));
    assert_eq!(f.probe.batch_sizes(), vec![1]);
    assert_eq!(f.events.take(), vec![]);
    assert_eq!(fence_reason(&a), Some(FenceReason::LeaseLost));
    // Only the new owner's records follow the takeover.
    assert_eq!(
        f.probe.ops("a"),
        vec![
            (LeaseOp::Acquire, "replica-a".into(), 1),
            (LeaseOp::Acquire, "other".into(), 2)
        ]
    );
}

#[test]
fn through_an_outage_the_keeper_retries_reports_the_fence_once_and_resumes() {
    let f = Fixture::new();
    let keeper = f.keeper();
    let lease = keeper.acquire("k").unwrap();
    f.probe.set_down(true);

    f.at(250);
    assert_eq!(keeper.tick().unwrap(), report(1, 0, 0, 1, Some(312.5)));
    let failed = f.events.take();
    assert_eq!(failed.len(), 1);
    assert_eq!(
        (
            failed[0].kind,
            failed[0].key.as_deref(),
            failed[0].code.as_deref()
        ),
        ("renew_failed", None, Some("GOTRY_TENANT_LEASE_STORE_UNAVAILABLE"))
    );
    assert!(lease.is_held(), "a failed batch leaves the fence where it was");
    f.at(312);
    assert_eq!(
        keeper.tick().unwrap().batches,
        0,
        "the retry waits a quarter interval"
    );
    f.at(313);
    assert_eq!(keeper.tick().unwrap().batches, 1);

    // Retries go on up to the fence at 900; the round at the fence tells it once.
    let mut now = 313;
    while now < 900 {
        now = (now + 63).min(900);
        f.at(now);
        keeper.tick().unwrap();
    }
    let told = beyond_failures(f.events.take());
    assert_eq!(told, vec![seen("fenced_locally", "k", 1, None)]);
    assert_eq!(fence_reason(&lease), Some(FenceReason::LeaseExpiredLocally));
    f.at(920);
    keeper.tick().unwrap();
    assert_eq!(f.events.take(), vec![], "the fence is told once");
    assert_eq!(keeper.len(), 1, "a locally fenced lease is still kept");

    // The store is back before the lease ran out there (at 1000 on its clock), in time for
    // the retry due at 942.5: resumed.
    f.probe.set_down(false);
    f.at(943);
    assert_eq!(keeper.tick().unwrap().renewed, 1);
    assert_eq!(f.events.take(), vec![seen("resumed", "k", 1, None)]);
    assert!(lease.is_held());
    assert_eq!(lease.remaining_ms().unwrap(), 900.0);

    // A second outage outlasts the lease in the store (until 1943): when the store answers,
    // it refuses.
    f.probe.set_down(true);
    f.at(2_043);
    keeper.tick().unwrap();
    f.probe.set_down(false);
    f.at(2_143);
    assert_eq!(keeper.tick().unwrap().lost, 1);
    let told = beyond_failures(f.events.take());
    assert_eq!(told, vec![seen("fenced_locally", "k", 1, None), lost_event("k")]);
    assert_eq!(fence_reason(&lease), Some(FenceReason::LeaseLost));
    assert!(keeper.is_empty());
}

#[test]
fn a_failed_batch_ends_the_round_and_every_lease_of_it_is_retried() {
    let f = Fixture::new();
    let keeper = f.keeper_batching(2);
    acquire_numbered(&keeper, 5);
    f.probe.batch_sizes();
    f.probe.store.fail(Method::RenewBatch, 1);
    f.at(250);
    assert_eq!(keeper.tick().unwrap(), report(1, 0, 0, 5, Some(312.5)));
    assert_eq!(f.probe.batch_sizes(), vec![2]);
    let failed = f.events.take();
    assert!(
        matches!(
            &failed[..],
            [Seen {
                kind: "renew_failed",
                ..
            }]
        ),
        "{failed:?}"
    );
    f.at(313);
    assert_eq!(keeper.tick().unwrap(), report(3, 5, 0, 0, Some(563.0)));
    assert_eq!(f.probe.batch_sizes(), vec![2, 2, 1]);
}

#[test]
fn a_failed_batch_tells_how_many_leases_wait_for_a_retry() {
    let f = Fixture::new();
    let events: Arc<Mutex<Vec<usize>>> = Arc::default();
    let mut options = f.options();
    options.max_batch = 2;
    let sink = events.clone();
    options.on_event = Some(Box::new(move |event| {
        if let KeeperEvent::RenewFailed { leases, .. } = event {
            sink.lock().unwrap().push(leases);
        }
    }));
    let keeper = LeaseKeeper::without_thread(options).unwrap();
    acquire_numbered(&keeper, 5);
    f.probe.set_down(true);
    f.at(250);
    keeper.tick().unwrap();
    assert_eq!(*events.lock().unwrap(), vec![5]);
}

#[test]
fn remove_releases_and_forgets_the_key() {
    let f = Fixture::new();
    let keeper = f.keeper();
    let lease = keeper.acquire("k").unwrap();
    let other = keeper.acquire("other").unwrap();
    assert!(keeper.remove("k").unwrap());
    assert_eq!(fence_reason(&lease), Some(FenceReason::LeaseReleased));
    let record = f.probe.inner.read("k").unwrap().unwrap();
    assert!(record.is_expired_at(f.wall.get()));
    assert_eq!(f.probe.ops("k").last().unwrap().0, LeaseOp::Release);
    assert!(!keeper.remove("k").unwrap());
    assert!(keeper.get("k").is_none());

    f.probe.batch_sizes();
    f.at(250);
    keeper.tick().unwrap();
    assert_eq!(f.probe.batch_sizes(), vec![1]);
    assert_eq!(f.probe.renewals("k"), 0);
    assert!(other.is_held());
    assert_eq!(f.events.take(), vec![]);
    // The key can be kept again, at the next epoch.
    assert_eq!(keeper.acquire("k").unwrap().epoch(), 2);
}

#[test]
fn a_lease_closed_through_its_handle_leaves_without_an_event() {
    let f = Fixture::new();
    let keeper = f.keeper();
    let lease = keeper.acquire("k").unwrap();
    lease.release().unwrap();
    f.at(250);
    assert_eq!(keeper.tick().unwrap(), report(0, 0, 0, 0, None));
    assert!(keeper.is_empty());
    assert_eq!(f.probe.renewals("k"), 0);
    assert_eq!(f.events.take(), vec![]);
}

#[test]
fn a_renewal_through_the_handle_reopens_a_gate_the_keeper_saw_fenced() {
    let f = Fixture::new();
    let keeper = f.keeper();
    let lease = keeper.acquire("k").unwrap();
    f.probe.set_down(true);
    f.at(900);
    keeper.tick().unwrap();
    assert!(f.events.take().contains(&seen("fenced_locally", "k", 1, None)));
    // The host's own renewal goes through `renew`, which the probe does not fail.
    lease.renew().unwrap();
    f.at(901);
    keeper.tick().unwrap();
    assert!(f.events.take().contains(&seen("resumed", "k", 1, None)));
    assert!(lease.is_held());
}

#[test]
fn acquire_fails_as_the_store_says_and_keeps_nothing() {
    let f = Fixture::new();
    let keeper = f.keeper();
    f.probe.inner.acquire("k", "other", TTL).unwrap();
    match keeper.acquire("k") {
        Err(Error::LeaseHeld { record }) => assert_eq!(record.owner, "other"),
        other => panic!("expected LEASE_HELD, got {other:?}"),
    }
    assert!(keeper.is_empty());
    assert!(matches!(keeper.acquire(""), Err(Error::InvalidArgument { .. })));
}

#[test]
fn options_that_cannot_work_are_refused() {
    let f = Fixture::new();
    let refused = |change: &dyn Fn(&mut KeeperOptions)| {
        let mut options = f.options();
        change(&mut options);
        matches!(
            LeaseKeeper::without_thread(options),
            Err(Error::InvalidArgument { .. })
        )
    };
    assert!(refused(&|o| o.renew_fraction = 0.0));
    assert!(refused(&|o| o.renew_fraction = -0.1));
    assert!(refused(&|o| o.renew_fraction = f64::NAN));
    assert!(refused(&|o| o.renew_fraction = f64::INFINITY));
    // A renewal 900 ms after the last would meet the fence (1000 - 100).
    assert!(refused(&|o| o.renew_fraction = 0.9));
    assert!(!refused(&|o| o.renew_fraction = 0.89));
    assert!(refused(&|o| o.renew_fraction = 0.000_5));
    assert!(refused(&|o| o.max_batch = 0));
    assert!(refused(&|o| o.margin_ms = TTL));
    assert!(refused(&|o| o.margin_ms = -1));
    assert!(refused(&|o| o.ttl_ms = 99));
    assert!(refused(&|o| o.replica_id = String::new()));
    assert!(refused(&|o| o.replica_id = "x".repeat(201)));
    assert!(!refused(&|_| ()));
}

#[test]
fn a_panicking_handler_does_not_stop_the_rounds() {
    let f = Fixture::new();
    let mut options = f.options();
    let (handler, calls) = f.events.handler_that_panics_first();
    options.on_event = Some(handler);
    let keeper = LeaseKeeper::without_thread(options).unwrap();
    let _a = keeper.acquire("a").unwrap();
    let b = keeper.acquire("b").unwrap();
    let c = keeper.acquire("c").unwrap();
    f.probe.take_over("a", f.far_ahead());
    f.at(250);
    assert_eq!(keeper.tick().unwrap().lost, 1);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    f.probe.take_over("b", f.far_ahead());
    f.at(500);
    assert_eq!(keeper.tick().unwrap(), report(1, 1, 1, 0, Some(750.0)));
    assert_eq!(f.events.take(), vec![lost_event("b")]);
    assert_eq!(fence_reason(&b), Some(FenceReason::LeaseLost));
    assert!(c.is_held());
}

#[test]
fn shutdown_releases_everything_and_ends_the_keeper() {
    let f = Fixture::new();
    let keeper = f.keeper();
    let leases: Vec<_> = ["c", "a", "b"]
        .iter()
        .map(|k| keeper.acquire(k).unwrap())
        .collect();
    let report = keeper.shutdown(Duration::from_secs(5));
    assert_eq!(report.released, vec!["a", "b", "c"]);
    assert!(report.failed.is_empty() && report.timed_out.is_empty());
    for lease in &leases {
        assert_eq!(fence_reason(lease), Some(FenceReason::LeaseReleased));
        assert!(f
            .probe
            .inner
            .read(lease.key())
            .unwrap()
            .unwrap()
            .is_expired_at(f.wall.get()));
    }
    assert!(keeper.is_empty());
    assert!(matches!(keeper.tick(), Err(Error::LeaseStoreUnavailable { .. })));
    assert!(matches!(
        keeper.acquire("d"),
        Err(Error::LeaseStoreUnavailable { .. })
    ));
    assert!(f.probe.inner.read("d").unwrap().is_none());
    let again = keeper.shutdown(Duration::from_secs(5));
    assert!(again.released.is_empty() && again.timed_out.is_empty());
}

#[test]
fn shutdown_starts_no_release_after_its_deadline() {
    let f = Fixture::new();
    // Shutdown releases in batches of max_batch and checks its deadline before each batch;
    // batches of one show the rule lease by lease.
    let keeper = f.keeper_batching(1);
    let leases = acquire_numbered(&keeper, 5);
    // Each release takes 100 ms on the keeper's clock.
    let mono = f.mono.clone();
    f.probe.before_release(move || {
        mono.advance(100).unwrap();
    });
    // Releases start at 0, 100 and 200; the one at 300 would start after the deadline.
    let report = keeper.shutdown(Duration::from_millis(250));
    assert_eq!(report.released, vec!["k0", "k1", "k2"]);
    assert_eq!(report.timed_out, vec!["k3", "k4"]);
    // Not released, no longer renewed: their gates close at their own fences.
    assert!(leases[3].is_held());
    f.at(900);
    assert_eq!(fence_reason(&leases[3]), Some(FenceReason::LeaseExpiredLocally));
    assert_eq!(fence_reason(&leases[0]), Some(FenceReason::LeaseReleased));
}

#[test]
fn shutdown_hands_leases_back_in_batches() {
    let f = Fixture::new();
    let keeper = f.keeper_batching(2);
    let leases = acquire_numbered(&keeper, 5);
    // One lease is taken over meanwhile: releasing it is no error, it is simply gone.
    f.at(TTL);
    f.probe.inner.acquire("k4", "replica-b", TTL).unwrap();
    let before = f.probe.inner.history(None).unwrap().len();
    let report = keeper.shutdown(Duration::from_secs(5));
    let mut released = report.released.clone();
    released.sort();
    assert_eq!(released, ["k0", "k1", "k2", "k3", "k4"]);
    assert!(
        report.failed.is_empty() && report.timed_out.is_empty(),
        "{report:?}"
    );
    let releases = f.probe.inner.history(None).unwrap()[before..]
        .iter()
        .filter(|e| e.op == LeaseOp::Release)
        .count();
    assert_eq!(releases, 4, "k4 belongs to replica-b now");
    assert_eq!(f.probe.store.take_calls(Method::ReleaseBatch), [2, 2, 1]);
    for lease in &leases {
        assert_eq!(fence_reason(lease), Some(FenceReason::LeaseReleased));
    }
    assert_eq!(
        f.probe
            .inner
            .acquire("k0", "replica-b", TTL)
            .unwrap()
            .record
            .epoch,
        2
    );
}

#[test]
fn a_store_that_fails_a_release_is_reported_and_the_gate_is_closed() {
    let f = Fixture::new();
    let keeper = f.keeper();
    let lease = keeper.acquire("k").unwrap();
    f.probe.inner.close().unwrap();
    let report = keeper.shutdown(Duration::from_secs(5));
    assert_eq!(report.failed.len(), 1);
    assert_eq!(report.failed[0].0, "k");
    assert!(matches!(report.failed[0].1, Error::LeaseStoreUnavailable { .. }));
    assert_eq!(fence_reason(&lease), Some(FenceReason::LeaseReleased));
}

#[test]
fn a_handler_may_shut_down_its_keeper_but_not_run_a_round() {
    let f = Fixture::new();
    let slot: Arc<Mutex<Option<Arc<LeaseKeeper>>>> = Arc::default();
    let answers: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut options = f.options();
    let (keeper_slot, sink) = (slot.clone(), answers.clone());
    options.on_event = Some(Box::new(move |_| {
        let keeper = keeper_slot.lock().unwrap().take().unwrap();
        sink.lock().unwrap().push(match keeper.tick() {
            Ok(_) => "ticked".into(),
            Err(e) => e.code_str().to_owned(),
        });
        let report = keeper.shutdown(Duration::from_secs(5));
        sink.lock().unwrap().extend(report.released);
    }));
    let keeper = Arc::new(LeaseKeeper::without_thread(options).unwrap());
    *slot.lock().unwrap() = Some(keeper.clone());
    keeper.acquire("a").unwrap();
    let b = keeper.acquire("b").unwrap();
    f.probe.take_over("a", f.far_ahead());
    f.at(250);
    // The round answers although its handler shut the keeper down underneath it.
    assert_eq!(keeper.tick().unwrap().lost, 1);
    assert_eq!(*answers.lock().unwrap(), vec!["ERR_OUT_OF_RANGE", "b"]);
    assert_eq!(fence_reason(&b), Some(FenceReason::LeaseReleased));
    assert!(keeper.tick().is_err());
}

// ---------------------------------------------------------------- real time, real thread

struct RealFixture {
    _dir: tempfile::TempDir,
    probe: Probe,
    events: Arc<Recorder>,
}

impl RealFixture {
    fn new() -> RealFixture {
        let dir = tempfile::tempdir().unwrap();
        let inner = SqliteLeaseStore::open(dir.path().join("leases.db")).unwrap();
        RealFixture {
            _dir: dir,
            probe: Probe::new(inner),
            events: Arc::default(),
        }
    }

    fn options(&self) -> KeeperOptions {
        let mut options = KeeperOptions::new(self.probe.store.clone(), "replica-a", TTL, MARGIN);
        options.on_event = Some(self.events.handler());
        options
    }

    fn far_ahead(&self) -> i64 {
        SystemWallClock.now_ms().unwrap() + 3_600_000
    }
}

#[test]
fn the_thread_keeps_leases_held_over_several_ttls() {
    let f = RealFixture::new();
    let keeper = LeaseKeeper::start(f.options()).unwrap();
    let leases = acquire_numbered(&keeper, 3);
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(3 * TTL as u64 + 500) {
        for lease in &leases {
            lease.assert_held().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for lease in &leases {
        // A third of the TTL apart over 3.5 TTLs: several renewals, not one long grant.
        assert!(
            f.probe.renewals(lease.key()) >= 3,
            "{:?}",
            f.probe.ops(lease.key())
        );
    }
    assert_eq!(f.events.take(), vec![]);
    let report = keeper.shutdown(Duration::from_secs(30));
    assert_eq!(report.released, vec!["k0", "k1", "k2"]);
    // The thread is gone: no renewal follows the release.
    let logged = f.probe.inner.history(None).unwrap().len();
    std::thread::sleep(Duration::from_millis(2 * TTL as u64 / 3));
    assert_eq!(f.probe.inner.history(None).unwrap().len(), logged);
}

#[test]
fn the_thread_reports_a_lease_taken_over_as_lost() {
    let f = RealFixture::new();
    let keeper = LeaseKeeper::start(f.options()).unwrap();
    let lease = keeper.acquire("k").unwrap();
    let kept = keeper.acquire("kept").unwrap();
    f.probe.take_over("k", f.far_ahead());
    let seen = f
        .events
        .wait_for("the lease lost", |seen| seen.contains(&lost_event("k")));
    assert_eq!(lost_only(seen), vec![lost_event("k")]);
    assert_eq!(fence_reason(&lease), Some(FenceReason::LeaseLost));
    assert!(keeper.get("k").is_none());
    assert!(kept.is_held());
}

#[test]
fn a_panicking_handler_does_not_stop_the_thread() {
    let f = RealFixture::new();
    let mut options = f.options();
    let (handler, calls) = f.events.handler_that_panics_first();
    options.on_event = Some(handler);
    let keeper = LeaseKeeper::start(options).unwrap();
    keeper.acquire("a").unwrap();
    keeper.acquire("b").unwrap();
    f.probe.take_over("a", f.far_ahead());
    eventually("the first event", || calls.load(Ordering::SeqCst) == 1);
    f.probe.take_over("b", f.far_ahead());
    let seen = f
        .events
        .wait_for("the second lease lost", |seen| seen.contains(&lost_event("b")));
    assert_eq!(lost_only(seen), vec![lost_event("b")]);
}

#[test]
fn drop_returns_while_a_batch_is_out_and_no_event_follows() {
    let f = RealFixture::new();
    let keeper = LeaseKeeper::start(f.options()).unwrap();
    let lease = keeper.acquire("k").unwrap();
    let (entered_tx, entered) = mpsc::channel::<()>();
    let (release_tx, release) = mpsc::channel::<()>();
    let (entered_tx, release) = (Mutex::new(entered_tx), Mutex::new(release));
    let released_by_test = Arc::new(AtomicBool::new(false));
    let flag = released_by_test.clone();
    f.probe.before_batch(move || {
        let _ = entered_tx.lock().unwrap().send(());
        // Held until the test lets go, which it does only once drop returned.
        flag.store(
            release.lock().unwrap().recv_timeout(PATIENCE).is_ok(),
            Ordering::SeqCst,
        );
    });
    entered.recv_timeout(PATIENCE).expect("the first batch");
    // The batch is out; another owner takes the tenant, so its answer will be a refusal.
    f.probe.take_over("k", f.far_ahead());
    drop(keeper);
    release_tx.send(()).unwrap();
    // The thread ends once its batch is answered, dropping its share of the store (the
    // test and the lease hold the other two).
    eventually("the thread ended", || Arc::strong_count(&f.probe.store) == 2);
    assert!(
        released_by_test.load(Ordering::SeqCst),
        "drop waited for the store"
    );
    // The refusal still closed the gate, but the handler heard nothing after drop.
    assert_eq!(fence_reason(&lease), Some(FenceReason::LeaseLost));
    assert_eq!(f.events.take(), vec![]);
}

#[test]
fn a_handler_may_drop_its_keeper_on_the_keepers_thread() {
    let f = RealFixture::new();
    let slot: Arc<Mutex<Option<LeaseKeeper>>> = Arc::default();
    let dropped = Arc::new(AtomicBool::new(false));
    let mut options = f.options();
    let (keeper_slot, done, recorder) = (slot.clone(), dropped.clone(), f.events.clone());
    options.on_event = Some(Box::new(move |event| {
        recorder.push(&event);
        if matches!(event, KeeperEvent::Lost { .. }) {
            drop(keeper_slot.lock().unwrap().take());
            done.store(true, Ordering::SeqCst);
        }
    }));
    let keeper = LeaseKeeper::start(options).unwrap();
    let leases: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|k| keeper.acquire(k).unwrap())
        .collect();
    *slot.lock().unwrap() = Some(keeper);
    // Both refusals come back in the first round, a third of a TTL from now.
    f.probe.take_over("a", f.far_ahead());
    f.probe.take_over("c", f.far_ahead());
    eventually("the handler dropped its keeper", || {
        dropped.load(Ordering::SeqCst)
    });
    // Its thread ends: only the test and the three lease handles hold the store then.
    eventually("the thread ended", || Arc::strong_count(&f.probe.store) == 4);
    // The round's second refusal was not told: the keeper was gone.
    let lost = lost_only(f.events.take());
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(fence_reason(&leases[0]), Some(FenceReason::LeaseLost));
    assert_eq!(fence_reason(&leases[2]), Some(FenceReason::LeaseLost));
    // Not renewed any more, b runs out at its fence.
    eventually("b fenced", || !leases[1].is_held());
    assert_eq!(fence_reason(&leases[1]), Some(FenceReason::LeaseExpiredLocally));
}

#[test]
fn a_keeper_and_its_leases_cross_threads() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<LeaseKeeper>();
    shareable::<KeeperEvent>();
    let f = RealFixture::new();
    let keeper = Arc::new(LeaseKeeper::start(f.options()).unwrap());
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let keeper = keeper.clone();
            std::thread::spawn(move || {
                let lease = keeper.acquire(&format!("w{i}")).unwrap();
                lease.assert_held().unwrap();
                assert!(keeper.remove(&format!("w{i}")).unwrap());
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    assert!(keeper.is_empty());
}
