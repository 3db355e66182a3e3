//! The holder's side of a lease, on a real SQLite file and manual clocks.

use std::sync::Arc;

use gotry_tenant_state::{
    Error, FenceReason, LeaseOp, LeaseOptions, LeaseStore, ManualClock, MonotonicClock, SqliteLeaseStore,
    TenantLease,
};
use gotry_test_support::faulty::{FaultyStore, Method};

const KEY: &str = "acme/t-0123456789abcdef0123456789abcdef";

struct Fixture {
    _dir: tempfile::TempDir,
    wall: Arc<ManualClock>,
    mono: Arc<ManualClock>,
    store: Arc<SqliteLeaseStore>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let wall = Arc::new(ManualClock::new(1_000_000));
    let store = Arc::new(
        SqliteLeaseStore::open(dir.path().join("leases.db"))
            .unwrap()
            .with_clock(wall.clone()),
    );
    Fixture {
        _dir: dir,
        wall,
        mono: Arc::new(ManualClock::new(50)),
        store,
    }
}

impl Fixture {
    fn ops(&self) -> Vec<LeaseOp> {
        self.store
            .history(Some(KEY))
            .unwrap()
            .into_iter()
            .map(|e| e.op)
            .collect()
    }
}

fn options(store: Arc<dyn LeaseStore>, clock: Arc<dyn MonotonicClock>, replica: &str) -> LeaseOptions {
    LeaseOptions {
        key: KEY.into(),
        replica_id: replica.into(),
        store,
        ttl_ms: 1_000,
        margin_ms: 200,
        clock,
    }
}

fn acquire(f: &Fixture, replica: &str) -> Result<TenantLease, Error> {
    TenantLease::acquire(options(f.store.clone(), f.mono.clone(), replica))
}

fn fenced_reason(result: Result<(), Error>) -> FenceReason {
    match result {
        Err(Error::Fenced { reason, .. }) => reason,
        other => panic!("expected FENCED, got {other:?}"),
    }
}

#[test]
fn fence_is_sent_time_plus_ttl_minus_margin() {
    let f = fixture();
    let lease = acquire(&f, "a").unwrap();
    assert_eq!(
        (lease.epoch(), lease.forgotten_at_epoch(), lease.key()),
        (1, 0, KEY)
    );
    assert_eq!(lease.remaining_ms().unwrap(), 800.0);
    f.mono.advance(799).unwrap();
    lease.assert_held().unwrap();
    f.mono.advance(1).unwrap();
    assert_eq!(
        fenced_reason(lease.assert_held()),
        FenceReason::LeaseExpiredLocally
    );
    assert!(!lease.is_held());
    assert_eq!(lease.remaining_ms().unwrap(), 0.0);
}

#[test]
fn margins_and_ttls_are_checked() {
    let f = fixture();
    for (ttl, margin) in [(1_000, 1_000), (1_000, -1), (99, 0), (600_001, 0)] {
        let mut o = options(f.store.clone(), f.mono.clone(), "a");
        o.ttl_ms = ttl;
        o.margin_ms = margin;
        assert!(
            matches!(TenantLease::acquire(o), Err(Error::InvalidArgument { .. })),
            "ttl {ttl} margin {margin}"
        );
    }
    assert!(f.store.read(KEY).unwrap().is_none(), "nothing was acquired");
}

#[test]
fn a_second_holder_is_told_who_holds_the_tenant() {
    let f = fixture();
    let _a = acquire(&f, "a").unwrap();
    match acquire(&f, "b") {
        Err(Error::LeaseHeld { record }) => assert_eq!((record.owner.as_str(), record.epoch), ("a", 1)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_renewal_after_the_local_fence_makes_the_lease_held_again() {
    let f = fixture();
    let lease = acquire(&f, "a").unwrap();
    // The holder stalls past its fence, but the store (whose clock did not move as far) has
    // not expired the lease: a renewal that the store grants proves nobody else held it.
    f.mono.advance(900).unwrap();
    assert!(!lease.is_held());
    f.wall.advance(900).unwrap();
    lease.renew().unwrap();
    lease.assert_held().unwrap();
    assert_eq!(lease.remaining_ms().unwrap(), 800.0);
    assert_eq!(
        f.store.read(KEY).unwrap().unwrap().lease_until_ms,
        1_000_000 + 900 + 1_000
    );
}

#[test]
fn a_refused_renewal_is_terminal() {
    let f = fixture();
    let lease = acquire(&f, "a").unwrap();
    f.wall.advance(1_000).unwrap();
    assert!(matches!(lease.renew(), Err(Error::LeaseLost { .. })));
    assert_eq!(fenced_reason(lease.assert_held()), FenceReason::LeaseLost);
    assert_eq!(fenced_reason(lease.renew()), FenceReason::LeaseLost);
    assert!(matches!(lease.mark_forgotten(), Err(Error::Fenced { .. })));
    // Nothing left to hand back: releasing after a loss does nothing.
    lease.release().unwrap();
}

#[test]
fn an_unavailable_store_leaves_the_deadline_as_it_was() {
    let f = fixture();
    // One renewal fails for another reason than a refusal: the fence stays where it was,
    // and a later renewal resumes.
    let flaky = Arc::new(FaultyStore::new(f.store.clone()));
    flaky.fail(Method::Renew, 1);
    let lease = TenantLease::acquire(options(flaky, f.mono.clone(), "a")).unwrap();
    f.mono.advance(500).unwrap();
    assert!(matches!(lease.renew(), Err(Error::LeaseStoreUnavailable { .. })));
    assert_eq!(lease.remaining_ms().unwrap(), 300.0);
    lease.assert_held().unwrap();
    lease.renew().unwrap();
    assert_eq!(lease.remaining_ms().unwrap(), 800.0);
}

#[test]
fn release_expires_the_lease_at_once_and_is_idempotent() {
    let f = fixture();
    let lease = acquire(&f, "a").unwrap();
    lease.release().unwrap();
    assert_eq!(fenced_reason(lease.assert_held()), FenceReason::LeaseReleased);
    lease.release().unwrap();
    assert_eq!(fenced_reason(lease.renew()), FenceReason::LeaseReleased);
    let b = acquire(&f, "b").unwrap();
    assert_eq!(b.epoch(), 2);
    assert_eq!(f.ops(), [LeaseOp::Acquire, LeaseOp::Release, LeaseOp::Acquire]);
}

#[test]
fn renew_release_renew_settle_in_call_order() {
    let f = fixture();
    let lease = Arc::new(acquire(&f, "a").unwrap());
    // Places are taken in call order on this thread; the operations then run on threads
    // started in the opposite order, so only the queue can put them back in order.
    let turns = [lease.take_turn(), lease.take_turn(), lease.take_turn()];
    let [first, second, third] = turns;
    let spawn = |f: Box<dyn FnOnce() -> Result<(), Error> + Send>| std::thread::spawn(f);
    let l3 = lease.clone();
    let t3 = spawn(Box::new(move || l3.renew_in_turn(third)));
    let l2 = lease.clone();
    let t2 = spawn(Box::new(move || l2.release_in_turn(second)));
    let l1 = lease.clone();
    let t1 = spawn(Box::new(move || l1.renew_in_turn(first)));
    t1.join().unwrap().unwrap();
    t2.join().unwrap().unwrap();
    assert_eq!(fenced_reason(t3.join().unwrap()), FenceReason::LeaseReleased);
    assert_eq!(f.ops(), [LeaseOp::Acquire, LeaseOp::Renew, LeaseOp::Release]);
}

#[test]
fn a_place_given_up_does_not_block_the_queue() {
    let f = fixture();
    let lease = acquire(&f, "a").unwrap();
    let abandoned = lease.take_turn();
    let next = lease.take_turn();
    drop(abandoned);
    lease.renew_in_turn(next).unwrap();
    lease.renew().unwrap();
}

/// A monotonic clock that jumps forward by `jump` on every reading: the round trip of the
/// acquire then takes longer than the whole usable grant.
struct JumpingClock {
    inner: ManualClock,
    jump: i64,
}

impl MonotonicClock for JumpingClock {
    fn now_ms(&self) -> Result<f64, Error> {
        let before = self.inner.get();
        self.inner.advance(self.jump)?;
        Ok(before as f64)
    }
}

#[test]
fn a_grant_consumed_by_the_round_trip_is_handed_back_and_lost() {
    let f = fixture();
    let clock = Arc::new(JumpingClock {
        inner: ManualClock::new(0),
        jump: 800,
    });
    match TenantLease::acquire(options(f.store.clone(), clock, "a")) {
        Err(Error::LeaseLost { .. }) => {}
        other => panic!("{other:?}"),
    }
    let record = f.store.read(KEY).unwrap().unwrap();
    assert_eq!(record.lease_until_ms, 1_000_000, "released at once in the store");
    assert_eq!(f.ops(), [LeaseOp::Acquire, LeaseOp::Release]);
    assert_eq!(
        acquire(&f, "b").unwrap().epoch(),
        2,
        "the next owner starts at once"
    );
}

#[test]
fn mark_forgotten_needs_a_provably_held_lease() {
    let f = fixture();
    let lease = acquire(&f, "a").unwrap();
    assert_eq!(lease.mark_forgotten().unwrap().forgotten_at_epoch, 1);
    f.mono.advance(800).unwrap();
    assert_eq!(
        fenced_reason(lease.mark_forgotten().map(|_| ())),
        FenceReason::LeaseExpiredLocally
    );
    lease.release().unwrap();
    assert_eq!(acquire(&f, "b").unwrap().forgotten_at_epoch(), 1);
}

#[test]
fn store_and_lease_are_shareable_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<SqliteLeaseStore>();
    send_sync::<TenantLease>();
    send_sync::<Arc<dyn LeaseStore>>();
}

/// A clock that reads true until told to read something that is no point in time.
struct BreakingClock {
    inner: ManualClock,
    bad: std::sync::Mutex<Option<f64>>,
}

impl MonotonicClock for BreakingClock {
    fn now_ms(&self) -> Result<f64, Error> {
        Ok(self.bad.lock().unwrap().unwrap_or(self.inner.get() as f64))
    }
}

#[test]
fn a_gate_whose_clock_reads_no_point_in_time_is_fenced() {
    let f = fixture();
    let clock = Arc::new(BreakingClock {
        inner: ManualClock::new(50),
        bad: std::sync::Mutex::new(None),
    });
    let lease = TenantLease::acquire(options(f.store.clone(), clock.clone(), "a")).unwrap();
    lease.assert_held().unwrap();
    for bad in [f64::NAN, f64::NEG_INFINITY, f64::INFINITY] {
        *clock.bad.lock().unwrap() = Some(bad);
        assert_eq!(
            fenced_reason(lease.assert_held()),
            FenceReason::LeaseExpiredLocally,
            "{bad}"
        );
        assert!(!lease.is_held());
    }
    *clock.bad.lock().unwrap() = None;
    lease.assert_held().unwrap();
}
