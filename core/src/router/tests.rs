use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Barrier;
use std::time::Instant;

use super::*;
use crate::clock::ManualClock;
use crate::durable_store::dir::DirectoryDurableStore;
use crate::lease_store::sqlite::SqliteLeaseStore;

const ORG: &str = "acme";
const T1: &str = "t-0123456789abcdef0123456789abcdef";
const T2: &str = "t-11111111111111111111111111111111";
const T3: &str = "t-22222222222222222222222222222222";

struct World {
    dir: tempfile::TempDir,
    wall: Arc<ManualClock>,
    leases: Arc<dyn LeaseStore>,
    durable: Arc<dyn DurableStore>,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let wall = Arc::new(ManualClock::new(1_000_000));
        let leases: Arc<dyn LeaseStore> = Arc::new(
            SqliteLeaseStore::open(dir.path().join("leases.db"))
                .unwrap()
                .with_clock(wall.clone()),
        );
        let durable: Arc<dyn DurableStore> =
            Arc::new(DirectoryDurableStore::open(dir.path().join("durable")).unwrap());
        World {
            dir,
            wall,
            leases,
            durable,
        }
    }

    fn router(
        &self,
        replica: &str,
        capacity: usize,
        durability: Durability,
    ) -> (TenantRouter, Arc<Mutex<Vec<String>>>) {
        let events = Arc::new(Mutex::new(Vec::new()));
        let seen = events.clone();
        let mut options = RouterOptions::new(
            self.leases.clone(),
            self.durable.clone(),
            self.dir.path().join(replica),
            replica.to_owned(),
            3_000,
            500,
        );
        options.capacity = Some(capacity);
        options.copy_policy = CopyPolicy {
            interval: Duration::from_millis(50),
            durability,
        };
        options.on_event = Some(Arc::new(move |event| lock(&seen).push(event_line(event))));
        let router = TenantRouter::start(options).unwrap();
        (router, events)
    }

    /// A router without threads of its own, on a clock that reads the store's manual clock:
    /// moving that clock moves every rule of the router, and nothing happens until a tick.
    fn ticking_router(
        &self,
        replica: &str,
        durability: Durability,
        ttl_ms: i64,
    ) -> (TenantRouter, Arc<Mutex<Vec<String>>>, Arc<TestClock>) {
        let events = Arc::new(Mutex::new(Vec::new()));
        let seen = events.clone();
        let clock = Arc::new(TestClock {
            now: self.wall.clone(),
            reads: Mutex::new(0),
            read: Condvar::new(),
            no_point_in_time: AtomicBool::new(false),
        });
        let mut options = RouterOptions::new(
            self.leases.clone(),
            self.durable.clone(),
            self.dir.path().join(replica),
            replica.to_owned(),
            ttl_ms,
            500,
        );
        options.capacity = Some(8);
        options.copy_policy = CopyPolicy {
            interval: Duration::from_millis(INTERVAL_MS),
            durability,
        };
        options.clock = clock.clone();
        options.without_thread = true;
        options.on_event = Some(Arc::new(move |event| lock(&seen).push(event_line(event))));
        (TenantRouter::start(options).unwrap(), events, clock)
    }
}

/// An event as the tests compare it; a copy that uploaded nothing says so.
fn event_line(event: RouterEvent) -> String {
    match event {
        RouterEvent::Lost { key, epoch } => format!("lost {key} {epoch}"),
        RouterEvent::Closed { key, epoch } => format!("closed {key} {epoch}"),
        RouterEvent::CopyFailed { key, .. } => format!("copy_failed {key}"),
        RouterEvent::Draining { key, epoch } => format!("draining {key} {epoch}"),
        RouterEvent::Copied {
            key,
            copy,
            bytes_uploaded,
        } => {
            let empty = if bytes_uploaded == 0 {
                " (nothing uploaded)"
            } else {
                ""
            };
            format!("copied {key} {} {}{empty}", copy.epoch, copy.seq)
        }
    }
}

/// The copy interval of a ticking router.
const INTERVAL_MS: u64 = 1_000;

/// The store's manual clock as a router reads it, counting the readings: a thread that
/// waits for a deadline re-reads its clock, so a test can tell that it looked at the clock
/// after a move, and chose to wait on.
struct TestClock {
    now: Arc<ManualClock>,
    reads: Mutex<u64>,
    read: Condvar,
    /// Answers NaN, which is no point in time.
    no_point_in_time: AtomicBool,
}

impl MonotonicClock for TestClock {
    fn now_ms(&self) -> Result<f64> {
        let now = if self.no_point_in_time.load(Ordering::SeqCst) {
            f64::NAN
        } else {
            self.now.get() as f64
        };
        *lock(&self.reads) += 1;
        self.read.notify_all();
        Ok(now)
    }
}

impl TestClock {
    fn advance(&self, ms: i64) {
        self.now.advance(ms).unwrap();
    }

    /// Blocks until `ready` holds and the clock was then read twice more: the second
    /// reading proves that the one before it (taken after `ready` held, and after any move
    /// of the clock made before this call) was followed by a choice to go on waiting. Only
    /// the thread under test may read the clock meanwhile.
    fn await_looked(&self, what: &str, ready: impl Fn() -> bool) {
        // Not a time limit on the code under test: a bound on a test that would hang.
        let give_up = Instant::now() + Duration::from_secs(20);
        let mut since: Option<u64> = None;
        loop {
            let reads = *lock(&self.reads);
            match since {
                None if ready() => since = Some(reads),
                Some(at) if reads >= at + 2 => return,
                _ => {}
            }
            let guard = lock(&self.reads);
            if *guard == reads {
                let left = give_up
                    .checked_duration_since(Instant::now())
                    .unwrap_or_else(|| panic!("gave up waiting for {what} (did it stop waiting?)"));
                drop(
                    self.read
                        .wait_timeout(guard, left)
                        .unwrap_or_else(|p| p.into_inner()),
                );
            }
        }
    }
}

/// Runs `work` on a thread of its own; its answer comes through the receiver.
fn spawn_answer<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> mpsc::Receiver<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    rx
}

/// The answer of a [`spawn_answer`] thread, which must come within a bound of real time far
/// above what the rule under test takes when it follows the test's clock.
fn answer<T>(rx: &mpsc::Receiver<T>, what: &str) -> T {
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{what} never answered"))
}

fn tenant_of<T>(router: &TenantRouter, tenant: &str, read: impl FnOnce(&Tenant) -> T) -> T {
    read(&lock(&router.shared.tenants)[&key(tenant)])
}

fn key(tenant: &str) -> String {
    format!("{ORG}/{tenant}")
}

/// A call that appends to the tenant's ledger.
fn append(handle: &TenantHandle, text: &str) -> Result<()> {
    let path = handle.root.join("gotry-state/gotry-state.db");
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let db = rusqlite::Connection::open(path).unwrap();
    db.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE IF NOT EXISTS entries (text TEXT)")
        .unwrap();
    db.execute("INSERT INTO entries VALUES (?1)", [text]).unwrap();
    Ok(())
}

fn entries(root: &Path) -> Vec<String> {
    let db = rusqlite::Connection::open(root.join("gotry-state/gotry-state.db")).unwrap();
    let mut query = db.prepare("SELECT text FROM entries ORDER BY rowid").unwrap();
    let rows = query.query_map([], |row| row.get(0)).unwrap();
    rows.map(|r| r.unwrap()).collect()
}

use std::fs;

#[test]
fn a_handoff_carries_the_data_to_the_next_replica() {
    let world = World::new();
    let (a, _) = world.router("replica-a", 8, Durability::Async);
    let handle = a.open(ORG, T1).unwrap();
    assert_eq!(handle.epoch(), 1);
    assert!(Arc::ptr_eq(&handle, &a.open(ORG, T1).unwrap()), "the same handle");
    a.run(&key(T1), |h| append(h, "one")).unwrap();
    a.run(&key(T1), |h| append(h, "two")).unwrap();

    let (b, _) = world.router("replica-b", 8, Durability::Async);
    match b.open(ORG, T1) {
        Err(Error::LeaseHeld { record }) => assert_eq!(record.owner, "replica-a"),
        other => panic!("{other:?}"),
    }
    a.handoff(&key(T1), Duration::from_secs(5)).unwrap();
    assert!(a.status().unwrap().is_empty());
    let moved = b.open(ORG, T1).unwrap();
    assert_eq!(
        (moved.epoch(), moved.restored_from.map(|c| c.epoch)),
        (2, Some(1))
    );
    assert_eq!(entries(&moved.root), ["one", "two"]);
}

#[test]
fn capacity_is_refused_before_anything_is_touched() {
    let world = World::new();
    let (router, _) = world.router("replica-a", 2, Durability::Async);
    router.open(ORG, T1).unwrap();
    router.open(ORG, T2).unwrap();
    match router.open(ORG, T3) {
        Err(Error::ReplicaAtCapacity { limit }) => assert_eq!(limit, 2),
        other => panic!("{other:?}"),
    }
    assert_eq!(world.leases.read(&key(T3)).unwrap(), None, "no lease was taken");
    assert!(!world
        .dir
        .path()
        .join("replica-a/orgs/acme/tenants")
        .join(T3)
        .exists());
    assert!(default_capacity() >= 1);
}

/// A drain's timeout is measured on the router's clock: the handoff gives up when that clock
/// reaches it, not a moment before, however much real time passed.
#[test]
fn a_drain_times_out_on_the_routers_clock_and_leaves_the_tenant_serving() {
    let world = World::new();
    // A TTL longer than the drain, so that the gate stays open without renewals.
    let (router, _, clock) = world.ticking_router("replica-a", Durability::Async, 600_000);
    let router = Arc::new(router);
    router.open(ORG, T1).unwrap();
    let slow = router.begin(&key(T1)).unwrap();
    let handoff = {
        let router = router.clone();
        spawn_answer(move || router.handoff(&key(T1), Duration::from_secs(60)))
    };
    let draining = || tenant_of(&router, T1, |t| t.life.state() == TenantState::Draining);
    clock.await_looked("the drain", draining);
    clock.advance(59_999);
    clock.await_looked("the drain, a moment before its timeout", || true);
    assert!(handoff.try_recv().is_err(), "gave up before its timeout");
    assert!(draining());
    clock.advance(1);
    match answer(&handoff, "the handoff") {
        Err(Error::DrainTimeout {
            in_flight,
            timeout_ms,
            ..
        }) => assert_eq!((in_flight, timeout_ms), (1, 60_000)),
        other => panic!("{other:?}"),
    }
    // The tenant serves again, and nothing was released.
    assert_eq!(router.status().unwrap()[0].state, TenantState::Serving);
    assert_eq!(world.leases.read(&key(T1)).unwrap().unwrap().owner, "replica-a");
    router.run(&key(T1), |h| append(h, "fast")).unwrap();

    // A drain refuses new calls and opens, and completes once the running call ends.
    let handoff = {
        let router = router.clone();
        spawn_answer(move || router.handoff(&key(T1), Duration::from_secs(60)))
    };
    clock.await_looked("the second drain", draining);
    assert!(matches!(
        router.run(&key(T1), |_| Ok(())),
        Err(Error::Draining { .. })
    ));
    assert!(matches!(router.open(ORG, T1), Err(Error::Draining { .. })));
    append(slow.handle(), "slow").unwrap();
    slow.finish().unwrap();
    answer(&handoff, "the handoff").unwrap();
    let record = world.leases.read(&key(T1)).unwrap().unwrap();
    assert!(record.lease_until_ms <= world.wall.get(), "released");
}

/// A drain is told when it begins, before it waits for the calls in flight (the host stops
/// sending the tenant's requests here), once per drain, with the tenure's epoch; a handoff
/// refused because one already drains tells nothing, nor does a tenant that is not drained.
#[test]
fn a_drain_is_told_once_when_it_begins_before_its_calls_end() {
    let world = World::new();
    // A TTL longer than the drains, so that the gate stays open without renewals.
    let (router, events, clock) = world.ticking_router("replica-a", Durability::Async, 600_000);
    let router = Arc::new(router);
    router.open(ORG, T1).unwrap();
    router.open(ORG, T2).unwrap();
    let slow = router.begin(&key(T1)).unwrap();
    let start_handoff = || {
        let router = router.clone();
        spawn_answer(move || router.handoff(&key(T1), Duration::from_secs(60)))
    };
    let draining = || tenant_of(&router, T1, |t| t.life.state() == TenantState::Draining);
    let drain = format!("draining {} 1", key(T1));

    let handoff = start_handoff();
    clock.await_looked("the drain", draining);
    assert!(handoff.try_recv().is_err(), "the drain still waits for its call");
    assert_eq!(*lock(&events), [drain.as_str()], "told before the call ended");
    assert!(matches!(
        router.handoff(&key(T1), Duration::from_secs(60)),
        Err(Error::Draining { .. })
    ));
    assert_eq!(
        *lock(&events),
        [drain.as_str()],
        "a refused handoff drains nothing"
    );
    clock.advance(60_000);
    assert!(matches!(
        answer(&handoff, "the handoff"),
        Err(Error::DrainTimeout { .. })
    ));

    // The tenant serves again; the next drain is a drain of its own, told again.
    let handoff = start_handoff();
    clock.await_looked("the second drain", draining);
    assert_eq!(*lock(&events), [drain.as_str(), drain.as_str()]);
    slow.finish().unwrap();
    answer(&handoff, "the handoff").unwrap();
    assert_eq!(
        *lock(&events),
        [
            drain.as_str(),
            drain.as_str(),
            format!("closed {} 1", key(T1)).as_str()
        ]
    );
    assert_eq!(router.status().unwrap()[0].state, TenantState::Serving);

    // Close drains every tenant it hands off: each is told before it is closed.
    let report = router.close(Duration::from_secs(60));
    assert_eq!(report.handed_off, [key(T2)]);
    assert_eq!(
        lock(&events)[3..],
        [format!("draining {} 1", key(T2)), format!("closed {} 1", key(T2))]
    );
}

/// Once the clock passed the lease's TTL without a renewal, the next tick finds it lost:
/// the tenant is fenced at once and closed after its last call.
#[test]
fn a_lease_the_clock_let_run_out_is_lost_at_the_next_tick() {
    let world = World::new();
    let (router, events, clock) = world.ticking_router("replica-a", Durability::Async, 3_000);
    router.open(ORG, T1).unwrap();
    let call = router.begin(&key(T1)).unwrap();
    // No tick, no renewal: another replica takes the tenant once its TTL passed, while this
    // one still believes it holds it.
    clock.advance(3_001);
    world.leases.acquire(&key(T1), "replica-b", 3_000).unwrap();
    assert!(lock(&events).is_empty(), "nothing happens between ticks");
    let report = router.tick().unwrap();
    assert_eq!((report.keeper.lost, report.keeper.renewed), (1, 0));
    assert_eq!(*lock(&events), [format!("lost {} 1", key(T1))]);
    assert!(matches!(
        router.run(&key(T1), |_| Ok(())),
        Err(Error::Fenced {
            reason: FenceReason::LeaseLost,
            ..
        })
    ));
    assert!(
        matches!(call.finish(), Err(Error::CallInDoubt { cause, .. })
            if matches!(*cause, Error::Fenced { .. })),
        "its after-check fails, after its handler ran: in doubt"
    );
    assert_eq!(
        *lock(&events),
        [format!("lost {} 1", key(T1)), format!("closed {} 1", key(T1))]
    );
    assert!(router.status().unwrap().is_empty());
}

/// A written tenant is copied an interval after its last good copy began, on the router's
/// clock: not a millisecond before.
#[test]
fn a_written_tenant_is_copied_an_interval_after_its_last_good_copy() {
    let world = World::new();
    let (router, _, clock) = world.ticking_router("replica-a", Durability::Async, 600_000);
    router.open(ORG, T1).unwrap();
    let opened_at = clock.now.get() as f64;
    router.run(&key(T1), |h| append(h, "one")).unwrap();
    let report = router.tick().unwrap();
    assert!(report.copied.is_empty(), "an interval after the open: not yet");
    assert_eq!(report.next_due_ms, Some(opened_at + INTERVAL_MS as f64));
    clock.advance(INTERVAL_MS as i64 - 1);
    assert!(router.tick().unwrap().copied.is_empty());
    clock.advance(1);
    assert_eq!(router.tick().unwrap().copied, [key(T1)]);
    let status = router.status().unwrap().remove(0);
    assert_eq!(
        (status.writes_since_copy, status.last_copy.map(|c| c.seq)),
        (0, Some(1))
    );

    // An idle tenant is not copied again; a written one an interval after that copy began.
    clock.advance(INTERVAL_MS as i64);
    assert!(router.tick().unwrap().copied.is_empty(), "nothing written since");
    router.run(&key(T1), |h| append(h, "two")).unwrap();
    assert_eq!(
        router.tick().unwrap().copied,
        [key(T1)],
        "due since its interval passed"
    );
    router.run(&key(T1), |h| append(h, "three")).unwrap();
    clock.advance(INTERVAL_MS as i64 - 1);
    assert!(router.tick().unwrap().copied.is_empty());
    clock.advance(1);
    assert_eq!(router.tick().unwrap().copied, [key(T1)]);
}

/// Each background copy written is told once, with its place and what it uploaded; a copy
/// that is not written (nothing due, a tenant gone) and the copies a handoff or a strict call
/// waits for are not: their own answers say it.
#[test]
fn a_background_copy_is_told_once_and_a_waited_for_copy_never() {
    let world = World::new();
    let (router, events, clock) = world.ticking_router("replica-a", Durability::Async, 600_000);
    router.open(ORG, T1).unwrap();
    router.open(ORG, T2).unwrap();
    router.run(&key(T1), |h| append(h, "one")).unwrap();
    router.run(&key(T2), |h| append(h, "one")).unwrap();
    assert!(router.tick().unwrap().copied.is_empty());
    assert!(lock(&events).is_empty(), "nothing copied, nothing told");
    clock.advance(INTERVAL_MS as i64);
    assert_eq!(router.tick().unwrap().copied, [key(T1), key(T2)]);
    let first = [
        format!("copied {} 1 1", key(T1)),
        format!("copied {} 1 1", key(T2)),
    ];
    assert_eq!(*lock(&events), first);
    assert!(router.tick().unwrap().copied.is_empty());
    assert_eq!(*lock(&events), first, "told once per copy");

    router.run(&key(T1), |h| append(h, "two")).unwrap();
    clock.advance(INTERVAL_MS as i64);
    assert_eq!(router.tick().unwrap().copied, [key(T1)]);
    assert_eq!(lock(&events)[2..], [format!("copied {} 1 2", key(T1))]);
    assert_eq!(
        router.status().unwrap()[0].last_copy,
        Some(CopyId { epoch: 1, seq: 2 })
    );

    // A handoff's final copy is the handoff's answer.
    router.run(&key(T2), |h| append(h, "two")).unwrap();
    router.handoff(&key(T2), Duration::from_secs(5)).unwrap();
    assert_eq!(
        lock(&events)[3..],
        [format!("draining {} 1", key(T2)), format!("closed {} 1", key(T2))]
    );

    // A strict call's copy is the call's answer.
    let (strict, strict_events, strict_clock) =
        world.ticking_router("replica-b", Durability::Strict, 600_000);
    strict.open(ORG, T3).unwrap();
    for text in ["one", "two"] {
        strict.run(&key(T3), |h| append(h, text)).unwrap();
    }
    strict_clock.advance(INTERVAL_MS as i64);
    assert!(strict.tick().unwrap().copied.is_empty());
    assert_eq!(
        strict.status().unwrap()[0].last_copy,
        Some(CopyId { epoch: 1, seq: 2 })
    );
    assert!(lock(&strict_events).is_empty(), "{:?}", lock(&strict_events));
}

/// Lag is measured on the router's clock from the last good copy; a failing store keeps it
/// growing, reported at each failed try, and a failed copy is tried again a tenth of the
/// interval after it ended.
#[test]
fn lag_grows_on_the_routers_clock_while_copies_fail_and_ends_with_the_next_good_one() {
    let world = World::new();
    let (router, events, clock) = world.ticking_router("replica-a", Durability::Async, 600_000);
    let handle = router.open(ORG, T1).unwrap();
    router.run(&key(T1), |h| append(h, "one")).unwrap();
    clock.advance(700);
    let status = router.status().unwrap().remove(0);
    assert_eq!((status.lag_ms, status.writes_since_copy), (700, 1));

    // The durable store's epoch folder becomes unusable: copies fail, lag grows.
    let durable_root = world.dir.path().join("durable");
    let epoch_dir = durable_root.join(format!("orgs/{ORG}/tenants/{T1}/epochs/{:020}", handle.epoch()));
    let aside = epoch_dir.with_extension("aside");
    fs::rename(&epoch_dir, &aside).unwrap();
    fs::write(&epoch_dir, b"in the way").unwrap();
    clock.advance(300);
    let report = router.tick().unwrap();
    assert_eq!((report.copied.len(), report.failed.clone()), (0, vec![key(T1)]));
    assert_eq!(*lock(&events), [format!("copy_failed {}", key(T1))]);
    let status = router.status().unwrap().remove(0);
    assert_eq!((status.lag_ms, status.writes_since_copy), (1_000, 1));
    assert!(status
        .last_copy_error
        .unwrap()
        .starts_with("GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE"));
    let retry = INTERVAL_MS as i64 / 10;
    assert_eq!(report.next_due_ms, Some(clock.now.get() as f64 + retry as f64));

    fs::remove_file(&epoch_dir).unwrap();
    fs::rename(&aside, &epoch_dir).unwrap();
    clock.advance(retry - 1);
    let report = router.tick().unwrap();
    assert!(report.copied.is_empty() && report.failed.is_empty(), "{report:?}");
    assert_eq!(router.status().unwrap()[0].lag_ms, 1_000 + retry as u64 - 1);
    clock.advance(1);
    assert_eq!(router.tick().unwrap().copied, [key(T1)]);
    assert_eq!(
        *lock(&events),
        [
            format!("copy_failed {}", key(T1)),
            format!("copied {} 1 1", key(T1))
        ]
    );
    let status = router.status().unwrap().remove(0);
    assert_eq!(
        (status.lag_ms, status.writes_since_copy, status.last_copy_error),
        (0, 0, None)
    );
    clock.advance(5);
    assert_eq!(router.status().unwrap()[0].lag_ms, 5);
}

/// Every reading of the router's clock follows the keeper's rule: a reading that is no point
/// in time fails what needs it, and changes nothing.
#[test]
fn a_clock_that_reads_no_point_in_time_fails_what_needs_a_reading() {
    let world = World::new();
    let (router, _, clock) = world.ticking_router("replica-a", Durability::Async, 600_000);
    router.open(ORG, T1).unwrap();
    router.run(&key(T1), |h| append(h, "one")).unwrap();
    clock.no_point_in_time.store(true, Ordering::SeqCst);
    let refused = |answer: Result<()>| matches!(answer, Err(Error::InvalidArgument { .. }));
    assert!(refused(router.status().map(drop)), "status");
    assert!(refused(router.tick().map(drop)), "tick");
    assert!(refused(router.open(ORG, T2).map(drop)), "open");
    assert!(
        refused(router.handoff(&key(T1), Duration::from_secs(1))),
        "handoff"
    );
    assert!(
        matches!(router.run(&key(T1), |_| Ok(())), Err(Error::Fenced { .. })),
        "the gate fails closed"
    );
    clock.no_point_in_time.store(false, Ordering::SeqCst);
    let status = router.status().unwrap();
    assert_eq!(status.len(), 1, "nothing opened");
    assert_eq!(
        (status[0].state, status[0].writes_since_copy),
        (TenantState::Serving, 1)
    );
    assert_eq!(world.leases.read(&key(T1)).unwrap().unwrap().owner, "replica-a");
    router.handoff(&key(T1), Duration::from_secs(1)).unwrap();
}

/// A strict call queued behind a long one waits for a quiet tenant at most [`QUIET_WAIT_MS`]:
/// then it is in doubt (its handler ran; its write may be, and here is, in the next copy),
/// with the busy tenant as its cause, never a bare refusal.
#[test]
fn a_strict_call_behind_a_long_one_is_in_doubt_and_its_write_reaches_the_next_copy() {
    let world = World::new();
    let (router, _, clock) = world.ticking_router("replica-a", Durability::Strict, 600_000);
    let router = Arc::new(router);
    router.open(ORG, T1).unwrap();
    let long = router.begin(&key(T1)).unwrap();
    let short = {
        let router = router.clone();
        spawn_answer(move || router.run(&key(T1), |h| append(h, "short")))
    };
    clock.await_looked("the short call's copy to hold calls back", || {
        tenant_of(&router, T1, |t| t.held_back)
    });
    clock.advance(COPY_GRACE_MS as i64);
    clock.await_looked("the short call to wait for a quiet tenant", || {
        tenant_of(&router, T1, |t| t.blocked_by.is_some())
    });
    clock.advance((QUIET_WAIT_MS - COPY_GRACE_MS) as i64 - 1);
    clock.await_looked("the short call, a moment before its wait ends", || true);
    assert!(short.try_recv().is_err(), "gave up before its wait");
    clock.advance(1);
    let refused = answer(&short, "the short call").unwrap_err();
    assert!(
        matches!(&refused, Error::CallInDoubt { cause, epoch: 1, .. }
            if matches!(**cause, Error::TenantBusy { .. })),
        "{refused:?}"
    );
    long.finish().unwrap();
    router.handoff(&key(T1), Duration::from_secs(5)).unwrap();
    let (b, _) = world.router("replica-b", 8, Durability::Async);
    assert_eq!(entries(&b.open(ORG, T1).unwrap().root), ["short"]);
}

#[test]
fn strict_durability_refuses_the_acknowledgement_without_a_copy() {
    let world = World::new();
    let (router, _) = world.router("replica-a", 8, Durability::Strict);
    let handle = router.open(ORG, T1).unwrap();
    router.run(&key(T1), |h| append(h, "one")).unwrap();
    assert_eq!(
        router.status().unwrap()[0].last_copy,
        Some(CopyId { epoch: 1, seq: 1 })
    );
    let epoch_dir = world.dir.path().join(format!(
        "durable/orgs/{ORG}/tenants/{T1}/epochs/{:020}",
        handle.epoch()
    ));
    // Moved aside, not removed: the store's thread may be linking the next manifest's
    // reserved name into the folder, which would make a removal fail.
    fs::rename(&epoch_dir, epoch_dir.with_extension("aside")).unwrap();
    fs::write(&epoch_dir, b"in the way").unwrap();
    let refused = router.run(&key(T1), |h| append(h, "two")).unwrap_err();
    assert!(
        matches!(&refused, Error::CallInDoubt { cause, epoch: 1, .. }
            if matches!(**cause, Error::DurableStoreUnavailable { .. })),
        "{refused:?}"
    );
    assert_eq!(refused.code(), Some(crate::ErrorCode::CallInDoubt));
}

#[test]
fn close_refuses_opens_in_flight_and_shows_timed_out_tenants_closed() {
    let world = World::new();
    let (a, _) = world.router("replica-a", 8, Durability::Async);
    a.open(ORG, T1).unwrap();
    a.run(&key(T1), |h| append(h, "one")).unwrap();
    a.handoff(&key(T1), Duration::from_secs(5)).unwrap();

    // An open held inside its restore (the fold check waits) while close() runs.
    let in_verify = Arc::new(Barrier::new(2));
    let release = Arc::new(Barrier::new(2));
    let mut options = RouterOptions::new(
        world.leases.clone(),
        world.durable.clone(),
        world.dir.path().join("replica-b"),
        "replica-b".to_owned(),
        3_000,
        500,
    );
    let (entered, go) = (in_verify.clone(), release.clone());
    options.verify = Some(Arc::new(move |_| {
        entered.wait();
        go.wait();
        Ok(true)
    }));
    let b = Arc::new(TenantRouter::start(options).unwrap());
    let opening = {
        let b = b.clone();
        std::thread::spawn(move || b.open(ORG, T1))
    };
    in_verify.wait();
    assert_eq!(b.status().unwrap()[0].state, TenantState::Opening);
    let report = b.close(Duration::from_secs(1));
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    release.wait();
    assert!(matches!(opening.join().unwrap(), Err(Error::RouterClosed)));
    assert!(b.status().unwrap().is_empty());

    // A tenant whose drain timed out at close is closed, not serving, until its call ends.
    let (c, events) = world.router("replica-c", 8, Durability::Async);
    c.open(ORG, T1).unwrap();
    let call = c.begin(&key(T1)).unwrap();
    let report = c.close(Duration::from_millis(20));
    assert_eq!(report.timed_out, [key(T1)]);
    let status = c.status().unwrap();
    assert_eq!((status[0].state, status[0].in_flight), (TenantState::Closed, 1));
    assert!(matches!(c.run(&key(T1), |_| Ok(())), Err(Error::RouterClosed)));
    assert!(matches!(call.finish(), Err(Error::CallInDoubt { .. })));
    assert!(c.status().unwrap().is_empty());
    assert!(
        lock(&events)
            .iter()
            .any(|e| e.starts_with(&format!("closed {} ", key(T1)))),
        "{:?}",
        lock(&events)
    );
}

/// A long call delays its own tenant's copy, and only once holds the other calls back: the
/// copy gives up when the router's clock passes the grace.
#[test]
fn a_long_call_delays_its_tenants_copy_not_its_other_calls() {
    let world = World::new();
    let (router, events, clock) = world.ticking_router("replica-a", Durability::Async, 600_000);
    let router = Arc::new(router);
    router.open(ORG, T1).unwrap();
    router.run(&key(T1), |h| append(h, "one")).unwrap();
    let long = router.begin(&key(T1)).unwrap();
    clock.advance(INTERVAL_MS as i64);
    let tick = {
        let router = router.clone();
        spawn_answer(move || router.tick())
    };
    let held_back = || tenant_of(&router, T1, |t| t.held_back);
    clock.await_looked("the copy to hold calls back", held_back);
    clock.advance(COPY_GRACE_MS as i64 - 1);
    clock.await_looked("the copy, a moment before its grace", || true);
    assert!(tick.try_recv().is_err(), "gave up before the grace");
    clock.advance(1);
    let report = answer(&tick, "the tick").unwrap();
    assert!(
        report.copied.is_empty() && report.failed.is_empty(),
        "a delay is no failure"
    );
    assert!(!held_back(), "calls are let in at once");
    for i in 0..20 {
        router.run(&key(T1), |h| append(h, &format!("q{i}"))).unwrap();
        assert!(
            router.tick().unwrap().copied.is_empty(),
            "blocked until the long call returned"
        );
        assert!(
            tenant_of(&router, T1, |t| !t.held_back && t.blocked_by.is_some()),
            "held back again"
        );
    }
    let status = router.status().unwrap().remove(0);
    assert_eq!((status.last_copy, status.last_copy_error), (None, None));
    assert!(!lock(&events).iter().any(|e| e.starts_with("copy_failed")));
    long.finish().unwrap();
    assert_eq!(router.tick().unwrap().copied, [key(T1)]);
}

/// A root whose database the host damaged cannot be copied: a handoff says so at once, naming
/// the file, and the tenant serves on with nothing lost. The tenant is not stuck: a close
/// reports it as failed and lets the lease go, and the next replica starts from the last good
/// copy.
#[test]
fn a_damaged_database_fails_the_handoff_at_once_and_close_still_lets_the_tenant_go() {
    let world = World::new();
    let (router, _) = world.router("replica-a", 8, Durability::Async);
    router.open(ORG, T1).unwrap();
    router.run(&key(T1), |h| append(h, "one")).unwrap();
    router.handoff(&key(T1), Duration::from_secs(5)).unwrap();
    let handle = router.open(ORG, T1).unwrap();
    let mut damaged = b"SQLite format 3\0".to_vec();
    damaged.extend(std::iter::repeat_n(0xA5, 8192));
    fs::write(handle.root.join("side.db"), &damaged).unwrap();

    let refused = router.handoff(&key(T1), Duration::from_secs(5)).unwrap_err();
    assert!(
        matches!(&refused, Error::Storage { code, message }
            if code.starts_with("SQLITE_") && message.contains("side.db")),
        "{refused:?}"
    );
    assert_eq!(router.status().unwrap()[0].state, TenantState::Serving);
    router.run(&key(T1), |h| append(h, "two")).unwrap();

    let report = router.close(Duration::from_secs(5));
    assert_eq!(
        report
            .failed
            .iter()
            .map(|(key, _)| key.clone())
            .collect::<Vec<_>>(),
        [key(T1)]
    );
    let (b, _) = world.router("replica-b", 8, Durability::Async);
    assert_eq!(entries(&b.open(ORG, T1).unwrap().root), ["one"]);
}

#[test]
fn close_hands_every_tenant_off_then_refuses() {
    let world = World::new();
    let (router, _) = world.router("replica-a", 8, Durability::Async);
    let calls = AtomicUsize::new(0);
    for tenant in [T1, T2] {
        router.open(ORG, tenant).unwrap();
        router
            .run(&key(tenant), |h| {
                calls.fetch_add(1, Ordering::Relaxed);
                append(h, tenant)
            })
            .unwrap();
    }
    let report = router.close(Duration::from_secs(5));
    assert_eq!(report.handed_off.len(), 2);
    assert!(report.timed_out.is_empty() && report.failed.is_empty());
    assert!(matches!(router.open(ORG, T1), Err(Error::RouterClosed)));
    assert!(matches!(router.begin(&key(T1)), Err(Error::RouterClosed)));
    assert_eq!(calls.load(Ordering::Relaxed), 2);
    // Each final copy is what the next replica starts from.
    let (b, _) = world.router("replica-b", 8, Durability::Async);
    assert_eq!(entries(&b.open(ORG, T2).unwrap().root), [T2]);
}

/// The keeper goes on renewing a draining tenant's lease: a drain four TTLs long, on the
/// router's clock, never lets the lease run out, and nobody else can take the tenant
/// meanwhile.
#[test]
fn the_lease_is_renewed_through_a_drain_longer_than_its_ttl() {
    const TTL_MS: i64 = 3_000;
    let world = World::new();
    let (router, _, clock) = world.ticking_router("replica-a", Durability::Async, TTL_MS);
    let router = Arc::new(router);
    router.open(ORG, T1).unwrap();
    let call = router.begin(&key(T1)).unwrap();
    let handoff = {
        let router = router.clone();
        spawn_answer(move || router.handoff(&key(T1), Duration::from_secs(60)))
    };
    let draining = || tenant_of(&router, T1, |t| t.life.state() == TenantState::Draining);
    clock.await_looked("the drain", draining);
    // Four TTLs of drain, a third of a TTL at a time: the store's clock is the router's, so
    // a lease that a tick did not renew runs out.
    for _ in 0..12 {
        clock.advance(TTL_MS / 3);
        let report = router.tick().unwrap();
        assert_eq!(report.keeper.lost, 0);
        let record = world.leases.read(&key(T1)).unwrap().unwrap();
        assert!(
            record.lease_until_ms > world.wall.get(),
            "ran out during the drain: {record:?}"
        );
        assert!(draining());
    }
    assert!(matches!(
        world.leases.acquire(&key(T1), "replica-b", 3_000),
        Err(Error::LeaseHeld { .. })
    ));
    assert!(handoff.try_recv().is_err(), "the drain ended with a call running");
    append(call.handle(), "long").unwrap();
    call.finish().unwrap();
    answer(&handoff, "the handoff").unwrap();
    let history = world.leases.history(Some(&key(T1))).unwrap();
    let renewals = history.iter().filter(|e| e.op.as_str() == "renew").count();
    assert!(renewals >= 4, "renewed through the drain: {history:?}");
    assert!(history.iter().all(|e| e.epoch == 1), "nobody else held it");
}

#[test]
fn a_call_begun_by_hand_counts_until_finished_or_dropped() {
    let world = World::new();
    let (router, _) = world.router("replica-a", 8, Durability::Async);
    router.open(ORG, T1).unwrap();
    let call = router.begin(&key(T1)).unwrap();
    append(call.handle(), "one").unwrap();
    assert_eq!(router.status().unwrap()[0].in_flight, 1);
    call.finish().unwrap();
    let dropped = router.begin(&key(T1)).unwrap();
    assert_eq!(router.status().unwrap()[0].in_flight, 1);
    drop(dropped);
    let status = router.status().unwrap().remove(0);
    assert_eq!(
        (status.in_flight, status.writes_since_copy),
        (0, 1),
        "a dropped call wrote nothing"
    );
    assert!(matches!(router.begin(&key(T2)), Err(Error::LeaseLost { .. })));
}

/// The host may open a tenant's files inside its calls: a copy reads them only while no call
/// runs, and holds new calls back until its snapshot is taken.
#[test]
fn a_copy_waits_for_running_calls_and_holds_new_ones_back() {
    let world = World::new();
    // The clock stands still: the copy's grace never ends, only the running call can.
    let (router, _, clock) = world.ticking_router("replica-a", Durability::Strict, 600_000);
    router.open(ORG, T1).unwrap();
    let slow = router.begin(&key(T1)).unwrap();
    append(slow.handle(), "slow").unwrap();
    let router = Arc::new(router);
    let quick = {
        let router = router.clone();
        spawn_answer(move || router.run(&key(T1), |h| append(h, "quick")))
    };
    // The quick call's strict copy waits for the slow call, which still runs.
    clock.await_looked("the quick call's copy to wait", || {
        tenant_of(&router, T1, |t| t.held_back)
    });
    assert!(quick.try_recv().is_err(), "a copy ran beside a running call");
    assert_eq!(tenant_of(&router, T1, |t| t.last_copy), None);
    // A call that must not wait is told so while the calls are held back, and counts nothing.
    assert!(
        router.begin_now(&key(T1)).is_none(),
        "begun beside a held-back copy"
    );
    slow.finish().unwrap();
    answer(&quick, "the quick call").unwrap();
    let status = &router.status().unwrap()[0];
    assert_eq!((status.in_flight, status.last_copy.map(|c| c.seq)), (0, Some(2)));
    // Once they are let in, it begins at once, as `begin` would, or is refused as `begin` is.
    let now = router
        .begin_now(&key(T1))
        .expect("nothing holds the calls back")
        .unwrap();
    assert_eq!(router.status().unwrap()[0].in_flight, 1);
    now.finish().unwrap();
    assert!(matches!(
        router.begin_now(&key(T2)),
        Some(Err(Error::LeaseLost { .. }))
    ));
}

#[test]
fn durability_words_and_event_names_are_the_cores() {
    for mode in Durability::ALL {
        assert_eq!(Durability::parse(mode.as_str()), Some(mode));
    }
    assert_eq!(Durability::parse("strict"), Some(Durability::Strict));
    assert_eq!(Durability::parse("Strict"), None, "a word is matched as written");
    assert_eq!(Durability::parse("eventually"), None);
    let names: Vec<_> = RouterEventKind::ALL.map(RouterEventKind::as_str).into();
    assert_eq!(names, ["lost", "closed", "copy_failed", "draining", "copied"]);
    let event = RouterEvent::CopyFailed {
        key: "o/t".into(),
        epoch: 1,
        error: Error::RouterClosed,
    };
    assert_eq!(event.kind(), RouterEventKind::CopyFailed);
}
