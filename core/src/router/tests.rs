use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;

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
        options.on_event = Some(Arc::new(move |event| {
            let line = match event {
                RouterEvent::Lost { key, epoch } => format!("lost {key} {epoch}"),
                RouterEvent::Closed { key, epoch } => format!("closed {key} {epoch}"),
                RouterEvent::CopyFailed { key, .. } => format!("copy_failed {key}"),
            };
            lock(&seen).push(line);
        }));
        let router = TenantRouter::start(options).unwrap();
        (router, events)
    }
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

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A call of T1 on a thread of its own, already begun when this returns: the router counts
/// it in flight until `rest` returns.
fn running_call(
    router: &Arc<TenantRouter>,
    rest: impl FnOnce(&TenantHandle) -> Result<()> + Send + 'static,
) -> std::thread::JoinHandle<Result<()>> {
    let entered = Arc::new(Barrier::new(2));
    let call = {
        let (router, entered) = (router.clone(), entered.clone());
        std::thread::spawn(move || {
            router.run(&key(T1), |h| {
                entered.wait();
                rest(h)
            })
        })
    };
    entered.wait();
    call
}

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
    assert!(a.status().is_empty());
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

#[test]
fn a_drain_waits_for_running_calls_and_times_out_without_releasing() {
    let world = World::new();
    let (router, _) = world.router("replica-a", 8, Durability::Async);
    let router = Arc::new(router);
    router.open(ORG, T1).unwrap();
    let finish = Arc::new(Barrier::new(2));
    let call = {
        let finish = finish.clone();
        running_call(&router, move |h| {
            finish.wait();
            append(h, "slow")
        })
    };
    match router.handoff(&key(T1), Duration::from_millis(50)) {
        Err(Error::DrainTimeout {
            in_flight,
            timeout_ms,
            ..
        }) => assert_eq!((in_flight, timeout_ms), (1, 50)),
        other => panic!("{other:?}"),
    }
    // The tenant serves again, and nothing was released.
    assert_eq!(router.status()[0].state, TenantState::Serving);
    assert_eq!(world.leases.read(&key(T1)).unwrap().unwrap().owner, "replica-a");
    router.run(&key(T1), |h| append(h, "fast")).unwrap();

    // A drain refuses new calls and completes once the running one ends.
    let drain = {
        let router = router.clone();
        std::thread::spawn(move || router.handoff(&key(T1), Duration::from_secs(20)))
    };
    wait_for("the drain", || {
        router
            .status()
            .first()
            .is_some_and(|s| s.state == TenantState::Draining)
    });
    assert!(matches!(
        router.run(&key(T1), |_| Ok(())),
        Err(Error::Draining { .. })
    ));
    assert!(matches!(router.open(ORG, T1), Err(Error::Draining { .. })));
    finish.wait();
    call.join().unwrap().unwrap();
    drain.join().unwrap().unwrap();
    let record = world.leases.read(&key(T1)).unwrap().unwrap();
    assert!(record.lease_until_ms <= world.wall.get(), "released");
}

#[test]
fn a_lost_lease_fences_the_tenant_and_closes_it_after_its_last_call() {
    let world = World::new();
    let (router, events) = world.router("replica-a", 8, Durability::Async);
    let router = Arc::new(router);
    router.open(ORG, T1).unwrap();
    let finish = Arc::new(Barrier::new(2));
    let call = {
        let finish = finish.clone();
        running_call(&router, move |_| {
            finish.wait();
            Ok(())
        })
    };
    // Another replica takes the tenant while this one still believes it holds it.
    world.wall.advance(3_001).unwrap();
    world.leases.acquire(&key(T1), "replica-b", 3_000).unwrap();
    wait_for("the loss", || lock(&events).iter().any(|e| e.starts_with("lost")));
    assert!(matches!(
        router.run(&key(T1), |_| Ok(())),
        Err(Error::Fenced {
            reason: FenceReason::LeaseLost,
            ..
        })
    ));
    assert!(
        !lock(&events).iter().any(|e| e.starts_with("closed")),
        "a call is still running"
    );
    finish.wait();
    assert!(
        matches!(call.join().unwrap(), Err(Error::CallInDoubt { cause, .. })
            if matches!(*cause, Error::Fenced { .. })),
        "its after-check fails, after its handler ran: in doubt"
    );
    assert_eq!(
        *lock(&events),
        [format!("lost {} 1", key(T1)), format!("closed {} 1", key(T1))]
    );
    assert!(router.status().is_empty());
}

#[test]
fn async_copies_follow_writes_and_show_lag_when_the_store_fails() {
    let world = World::new();
    let (router, events) = world.router("replica-a", 8, Durability::Async);
    let handle = router.open(ORG, T1).unwrap();
    router.run(&key(T1), |h| append(h, "one")).unwrap();
    wait_for("a background copy", || router.status()[0].last_copy.is_some());
    assert_eq!(router.status()[0].writes_since_copy, 0);

    // The durable store's epoch folder becomes unusable: copies fail, lag grows.
    let durable_root = world.dir.path().join("durable");
    let epoch_dir = durable_root.join(format!("orgs/{ORG}/tenants/{T1}/epochs/{:020}", handle.epoch()));
    let aside = epoch_dir.with_extension("aside");
    fs::rename(&epoch_dir, &aside).unwrap();
    fs::write(&epoch_dir, b"in the way").unwrap();
    router.run(&key(T1), |h| append(h, "two")).unwrap();
    wait_for("a failed copy", || router.status()[0].last_copy_error.is_some());
    let status = router.status().remove(0);
    assert_eq!(status.writes_since_copy, 1);
    assert!(status
        .last_copy_error
        .unwrap()
        .starts_with("GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE"));
    assert!(lock(&events).iter().any(|e| e.starts_with("copy_failed")));
    fs::remove_file(&epoch_dir).unwrap();
    fs::rename(&aside, &epoch_dir).unwrap();
    wait_for("the copy after the outage", || {
        router.status()[0].last_copy_error.is_none()
    });
    assert_eq!(router.status()[0].writes_since_copy, 0);
}

#[test]
fn strict_durability_refuses_the_acknowledgement_without_a_copy() {
    let world = World::new();
    let (router, _) = world.router("replica-a", 8, Durability::Strict);
    let handle = router.open(ORG, T1).unwrap();
    router.run(&key(T1), |h| append(h, "one")).unwrap();
    assert_eq!(router.status()[0].last_copy, Some(CopyId { epoch: 1, seq: 1 }));
    let epoch_dir = world.dir.path().join(format!(
        "durable/orgs/{ORG}/tenants/{T1}/epochs/{:020}",
        handle.epoch()
    ));
    fs::remove_dir_all(&epoch_dir).unwrap();
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
    assert_eq!(b.status()[0].state, TenantState::Opening);
    let report = b.close(Duration::from_secs(1));
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    release.wait();
    assert!(matches!(opening.join().unwrap(), Err(Error::RouterClosed)));
    assert!(b.status().is_empty());

    // A tenant whose drain timed out at close is closed, not serving, until its call ends.
    let (c, events) = world.router("replica-c", 8, Durability::Async);
    c.open(ORG, T1).unwrap();
    let call = c.begin(&key(T1)).unwrap();
    let report = c.close(Duration::from_millis(20));
    assert_eq!(report.timed_out, [key(T1)]);
    let status = c.status();
    assert_eq!((status[0].state, status[0].in_flight), (TenantState::Closed, 1));
    assert!(matches!(c.run(&key(T1), |_| Ok(())), Err(Error::RouterClosed)));
    assert!(matches!(call.finish(), Err(Error::CallInDoubt { .. })));
    assert!(c.status().is_empty());
    assert!(
        lock(&events)
            .iter()
            .any(|e| e.starts_with(&format!("closed {} ", key(T1)))),
        "{:?}",
        lock(&events)
    );
}

/// A long call delays its own tenant's copy, and only once holds the other calls back.
#[test]
fn a_long_call_delays_its_tenants_copy_not_its_other_calls() {
    let world = World::new();
    let (router, events) = world.router("replica-a", 8, Durability::Async);
    router.open(ORG, T1).unwrap();
    router.run(&key(T1), |h| append(h, "one")).unwrap();
    let long = router.begin(&key(T1)).unwrap();
    // The copier finds the tenant due and gives up on it after its grace.
    wait_for("the copier to give up", || {
        lock(&router.shared.tenants)[&key(T1)].blocked_by.is_some()
    });
    let tenant_now = |f: &dyn Fn(&Tenant) -> bool| f(&lock(&router.shared.tenants)[&key(T1)]);
    assert!(tenant_now(&|t| !t.held_back), "calls are let in at once");
    for i in 0..20 {
        router.run(&key(T1), |h| append(h, &format!("q{i}"))).unwrap();
        assert!(
            tenant_now(&|t| !t.held_back && t.blocked_by.is_some()),
            "held back again"
        );
    }
    assert_eq!(router.status()[0].last_copy, None);
    assert_eq!(router.status()[0].last_copy_error, None, "a delay is no failure");
    assert!(!lock(&events).iter().any(|e| e.starts_with("copy_failed")));
    long.finish().unwrap();
    wait_for("the delayed copy", || router.status()[0].last_copy.is_some());
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

#[test]
fn the_lease_is_renewed_through_a_drain_longer_than_its_ttl() {
    let dir = tempfile::tempdir().unwrap();
    // The store decides on the real clock here: the keeper's renewals must beat real expiry.
    let leases: Arc<dyn LeaseStore> = Arc::new(SqliteLeaseStore::open(dir.path().join("leases.db")).unwrap());
    let router = Arc::new(
        TenantRouter::start({
            let mut options = RouterOptions::new(
                leases.clone(),
                Arc::new(DirectoryDurableStore::open(dir.path().join("durable")).unwrap()),
                dir.path().join("state"),
                "replica-a".to_owned(),
                300,
                100,
            );
            options.capacity = Some(4);
            options
        })
        .unwrap(),
    );
    router.open(ORG, T1).unwrap();
    let call = running_call(&router, |h| {
        // Four TTLs of work, started before the handoff.
        std::thread::sleep(Duration::from_millis(1_200));
        append(h, "long")
    });
    router.handoff(&key(T1), Duration::from_secs(20)).unwrap();
    call.join().unwrap().unwrap();
    let history = leases.history(Some(&key(T1))).unwrap();
    let renewals = history.iter().filter(|e| e.op.as_str() == "renew").count();
    assert!(renewals >= 3, "renewed through the drain: {history:?}");
    assert!(history.iter().all(|e| e.epoch == 1), "nobody else held it");
}

#[test]
fn a_call_begun_by_hand_counts_until_finished_or_dropped() {
    let world = World::new();
    let (router, _) = world.router("replica-a", 8, Durability::Async);
    router.open(ORG, T1).unwrap();
    let call = router.begin(&key(T1)).unwrap();
    append(call.handle(), "one").unwrap();
    assert_eq!(router.status()[0].in_flight, 1);
    call.finish().unwrap();
    let dropped = router.begin(&key(T1)).unwrap();
    assert_eq!(router.status()[0].in_flight, 1);
    drop(dropped);
    let status = router.status().remove(0);
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
    let (router, _) = world.router("replica-a", 8, Durability::Strict);
    router.open(ORG, T1).unwrap();
    let slow = router.begin(&key(T1)).unwrap();
    append(slow.handle(), "slow").unwrap();
    let router = Arc::new(router);
    let finished = Arc::new(AtomicUsize::new(0));
    let quick = {
        let (router, finished) = (router.clone(), finished.clone());
        std::thread::spawn(move || {
            router.run(&key(T1), |h| append(h, "quick")).unwrap();
            finished.fetch_add(1, Ordering::SeqCst);
        })
    };
    // The quick call's strict copy waits for the slow call, which still runs.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        finished.load(Ordering::SeqCst),
        0,
        "a copy ran beside a running call"
    );
    assert_eq!(router.status()[0].last_copy, None);
    slow.finish().unwrap();
    quick.join().unwrap();
    assert_eq!(finished.load(Ordering::SeqCst), 1);
    let status = &router.status()[0];
    assert_eq!((status.in_flight, status.last_copy.map(|c| c.seq)), (0, Some(2)));
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
    assert_eq!(names, ["lost", "closed", "copy_failed"]);
    let event = RouterEvent::CopyFailed {
        key: "o/t".into(),
        epoch: 1,
        error: Error::RouterClosed,
    };
    assert_eq!(event.kind(), RouterEventKind::CopyFailed);
}
