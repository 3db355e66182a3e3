//! What holders of the MySQL lease store see when its server goes away, hangs, is slow,
//! holds its rows locked, kills connections or loses a COMMIT's answer, and that every call
//! ends within its deadline meanwhile.
//!
//! Outages that would disturb other users of the shared server (stopping it, cutting the
//! network) are played by the proxy of `gotry_test_support::proxy`, between one store and
//! the server.
//!
//! `GOTRY_SKIP_MYSQL=1` marks these tests ignored; otherwise a missing server fails them.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gotry_tenant_state::{
    call_begun_at, open_lease_store, Error, FenceReason, LeaseOp, LeaseOptions, LeaseStore, MysqlLeaseStore,
    SystemMonotonicClock, TenantLease,
};
use gotry_test_support::mysql as server;
use gotry_test_support::mysql_fixture::{options_at, Fixture};
use gotry_test_support::proxy::{Mode, Proxy};
use mysql::prelude::Queryable;

#[test]
fn nothing_listening_is_unavailable() {
    let url = server::server_url();
    let free_port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut options = options_at(&url);
    options.host = "127.0.0.1".into();
    options.port = free_port;
    let started = Instant::now();
    let error = MysqlLeaseStore::open(options).expect_err("nothing listens there");
    assert!(matches!(error, Error::LeaseStoreUnavailable { .. }), "{error:?}");
    println!("refused connection: {error} after {:?}", started.elapsed());
    let via_url = open_lease_store(&format!("mysql://root@127.0.0.1:{free_port}/test")).map(|_| ());
    assert!(
        matches!(via_url, Err(Error::LeaseStoreUnavailable { .. })),
        "{via_url:?}"
    );
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn a_silent_server_is_unavailable_after_the_timeout_and_service_resumes() {
    let mut fx = Fixture::default();
    let proxy = Proxy::start(&fx.url);
    let proxied = proxy.url();
    let prefix = server::fresh_prefix();
    let store = fx.open_at(&proxied, &prefix, 300);
    store.acquire("k", "o", 60_000).unwrap();

    proxy.set(Mode::Silent);
    let started = Instant::now();
    let error = store.renew("k", "o", 1, 60_000).expect_err("nothing answers");
    let waited = started.elapsed();
    // Named as a timeout: a timeout is not retried on a new connection, which would double
    // the wait.
    assert!(
        matches!(&error, Error::LeaseStoreUnavailable { message } if message.contains("did not answer within 300 ms")),
        "{error:?}"
    );
    assert!(
        waited >= Duration::from_millis(300),
        "it gave up before its timeout: {waited:?}"
    );
    println!("silent server: {error} after {waited:?} (timeout 300 ms)");
    // A new connection meets the same silence, during its handshake.
    let mut options = options_at(&proxied);
    options.table_prefix = prefix.clone();
    options.timeout = Duration::from_millis(300);
    let error = MysqlLeaseStore::open(options).expect_err("no greeting comes");
    assert!(
        matches!(&error, Error::LeaseStoreUnavailable { message } if message.contains("did not answer")),
        "{error:?}"
    );

    proxy.set(Mode::Forward);
    let grant = store.renew("k", "o", 1, 60_000).unwrap();
    assert_eq!(grant.record.epoch, 1);
    let renews = store
        .history(Some("k"))
        .unwrap()
        .into_iter()
        .filter(|e| e.op == LeaseOp::Renew)
        .count();
    assert_eq!(renews, 1, "the renewal that timed out was not applied");
}

/// How long `call` took; a failure must be LEASE_STORE_UNAVAILABLE.
fn time_call<T>(what: &str, call: impl FnOnce() -> gotry_tenant_state::Result<T>) -> (String, Duration) {
    let started = Instant::now();
    let outcome = call().map(|_| ());
    let took = started.elapsed();
    println!(
        "{what}: {took:?}: {:?}",
        outcome.as_ref().map_err(ToString::to_string)
    );
    if let Err(error) = &outcome {
        assert!(
            matches!(error, Error::LeaseStoreUnavailable { .. }),
            "{what}: {error:?}"
        );
    }
    (what.to_owned(), took)
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn every_call_ends_within_its_timeout_on_a_slow_link() {
    const TIMEOUT_MS: u64 = 2_000;
    const DELAY: Duration = Duration::from_millis(450);
    let mut fx = Fixture::default();
    let proxy = Proxy::start(&fx.url);
    let proxied = proxy.url();
    let prefix = server::fresh_prefix();
    let store = fx.open_at(&proxied, &prefix, TIMEOUT_MS);
    let keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    for key in &keys {
        store.acquire(key, "o", 600_000).unwrap();
    }
    let batch: Vec<(&str, i64)> = keys.iter().map(|key| (key.as_str(), 1)).collect();
    // Each call starts on a connection the fast link left in the pool, its statements
    // prepared; then every chunk each way takes 450 ms.
    let slow_pooled = || {
        proxy.set(Mode::Forward);
        store.read("k0").unwrap();
        proxy.set(Mode::Delay(DELAY));
    };
    let mut took = Vec::new();
    slow_pooled();
    took.push(time_call("renew", || store.renew("k0", "o", 1, 600_000)));
    slow_pooled();
    took.push(time_call("renew_batch of 20", || {
        store.renew_batch("o", 600_000, &batch)
    }));
    // The pooled connection is found cut: its replacement is made on the slow link, within
    // the same call and its deadline.
    slow_pooled();
    proxy.set(Mode::Down);
    proxy.set(Mode::Delay(DELAY));
    took.push(time_call("acquire on a new connection", || {
        store.acquire("fresh", "o", 600_000)
    }));
    took.push(time_call("open", || {
        let mut options = options_at(&proxied);
        options.table_prefix = prefix.clone();
        options.timeout = Duration::from_millis(TIMEOUT_MS);
        MysqlLeaseStore::open(options)
    }));
    took.push(time_call("open_lease_store", || {
        open_lease_store(&server::with_option(
            &server::with_option(&proxied, "prefix", &prefix),
            "timeout_ms",
            &TIMEOUT_MS.to_string(),
        ))
    }));
    // The bound: the timeout, plus one delay for an answer already on its way when the time
    // ran out (see "Bounded waiting" in the store's documentation), plus room for a loaded
    // machine. It checks a bound, not speed.
    let bound = Duration::from_millis(TIMEOUT_MS) + DELAY + Duration::from_millis(300);
    for (what, took) in &took {
        assert!(
            *took <= bound,
            "{what} took {took:?}, more than {bound:?}: {took:?}"
        );
    }

    // With time enough, the same calls on a slow link succeed.
    proxy.set(Mode::Delay(Duration::from_millis(50)));
    let mut options = options_at(&proxied);
    options.table_prefix = prefix.clone();
    options.timeout = Duration::from_millis(10_000);
    let patient = MysqlLeaseStore::open(options).unwrap();
    patient.renew("k0", "o", 1, 600_000).unwrap();
    let answers = patient.renew_batch("o", 600_000, &batch).unwrap();
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    patient.acquire("patient", "o", 600_000).unwrap();
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn time_a_call_spent_queued_in_its_host_counts_against_its_deadline() {
    const TIMEOUT: Duration = Duration::from_millis(1_000);
    let mut fx = Fixture::default();
    let proxy = Proxy::start(&fx.url);
    let store = fx.open_at(&proxy.url(), &server::fresh_prefix(), TIMEOUT.as_millis() as u64);
    store.acquire("k", "o", 60_000).unwrap();
    let renewals = || {
        store
            .history(Some("k"))
            .unwrap()
            .into_iter()
            .filter(|e| e.op == LeaseOp::Renew)
            .count()
    };

    // Queued for its whole timeout: it fails at once and sends nothing.
    let started = Instant::now();
    let late = call_begun_at(started - TIMEOUT, || store.renew("k", "o", 1, 60_000));
    assert!(
        matches!(late, Err(Error::LeaseStoreUnavailable { .. })),
        "{late:?}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(renewals(), 0);

    // Queued for 700 ms of its 1000: on a silent link it gives up after the 300 left.
    proxy.set(Mode::Silent);
    let started = Instant::now();
    let queued = call_begun_at(started - Duration::from_millis(700), || {
        store.renew("k", "o", 1, 60_000)
    });
    let waited = started.elapsed();
    println!("a call queued 700 ms of its 1000 ms, on a silent link: {queued:?} after {waited:?}");
    assert!(
        matches!(queued, Err(Error::LeaseStoreUnavailable { .. })),
        "{queued:?}"
    );
    assert!(waited < Duration::from_millis(600), "{waited:?}");

    // Opening counts its queue time too.
    let started = Instant::now();
    let mut options = options_at(&proxy.url());
    options.timeout = TIMEOUT;
    let opened = call_begun_at(started - Duration::from_millis(700), || {
        MysqlLeaseStore::open(options)
    });
    assert!(
        matches!(opened, Err(Error::LeaseStoreUnavailable { .. })),
        "{opened:?}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(600),
        "{:?}",
        started.elapsed()
    );

    proxy.set(Mode::Forward);
    store.renew("k", "o", 1, 60_000).unwrap();
    assert_eq!(renewals(), 1);
}

/// A session of the test's own that holds `key`'s row locked until dropped.
struct RowLock {
    conn: mysql::Conn,
}

impl RowLock {
    fn take(fx: &Fixture, leases: &str, key: &str) -> RowLock {
        let mut conn = fx.scratch.connect();
        conn.query_drop("START TRANSACTION").unwrap();
        let row: Option<(Vec<u8>, i64)> = conn
            .exec_first(
                format!("SELECT `key`, epoch FROM `{leases}` WHERE `key` = ? FOR UPDATE"),
                (key,),
            )
            .unwrap();
        assert!(row.is_some(), "no row {key} to lock");
        RowLock { conn }
    }

    fn release(mut self) {
        self.conn.query_drop("ROLLBACK").unwrap();
    }
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn locked_rows_are_unavailable_within_the_bound_and_service_resumes() {
    let mut fx = Fixture::default();
    let url = fx.url.clone();
    let store = fx.open_at(&url, &server::fresh_prefix(), 1_000);
    store.acquire("locked", "o", 60_000).unwrap();
    store.acquire("free", "o", 60_000).unwrap();
    let (leases, _) = store.table_names();
    let lock = RowLock::take(&fx, leases, "locked");

    // The lock is held for as long as this test likes: an answer at all proves the wait
    // was bounded, and the kind proves it was the lock.
    let started = Instant::now();
    let error = store
        .renew("locked", "o", 1, 60_000)
        .expect_err("the row is locked");
    println!("locked row: {error} after {:?}", started.elapsed());
    assert!(matches!(error, Error::LeaseStoreUnavailable { .. }), "{error:?}");
    assert!(matches!(
        store.acquire("locked", "other", 1_000),
        Err(Error::LeaseStoreUnavailable { .. })
    ));
    // Other rows are not held up, and neither is a batch that leaves the locked row out.
    store.renew("free", "o", 1, 60_000).unwrap();
    // A batch that names the locked row fails whole: nothing of it was renewed.
    let renews_before = store.history(None).unwrap().len();
    let batch = store.renew_batch("o", 60_000, &[("free", 1), ("locked", 1)]);
    assert!(
        matches!(batch, Err(Error::LeaseStoreUnavailable { .. })),
        "{batch:?}"
    );
    assert_eq!(store.history(None).unwrap().len(), renews_before);

    lock.release();
    let answers = store
        .renew_batch("o", 60_000, &[("free", 1), ("locked", 1)])
        .unwrap();
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    assert_eq!(store.history(None).unwrap().len(), renews_before + 2);
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn killed_and_cut_connections_are_replaced_on_the_next_call() {
    let mut fx = Fixture::default();
    let proxy = Proxy::start(&fx.url);
    let proxied = proxy.url();
    let store = Arc::new(fx.open_at(&proxied, &server::fresh_prefix(), 2_000));
    // Several connections in the pool: calls at once from four threads.
    std::thread::scope(|scope| {
        for i in 0..4 {
            let store = Arc::clone(&store);
            scope.spawn(move || store.acquire(&format!("k{i}"), "o", 60_000).unwrap());
        }
    });

    let mut admin = fx.scratch.connect();
    let mut killed = 0;
    for port in proxy.upstream_ports() {
        let ids: Vec<u64> = admin
            .exec(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE HOST LIKE ?",
                (format!("%:{port}"),),
            )
            .unwrap();
        for id in ids {
            admin.query_drop(format!("KILL CONNECTION {id}")).unwrap();
            killed += 1;
        }
    }
    assert!(killed >= 1, "found none of the store's sessions to kill");
    println!("killed {killed} session(s) of the store");
    for i in 0..4 {
        store.renew(&format!("k{i}"), "o", 1, 60_000).unwrap();
    }

    // The server "stops": every connection is cut and new ones fail; it comes back.
    proxy.set(Mode::Down);
    let error = store.renew("k0", "o", 1, 60_000).expect_err("the server is down");
    assert!(matches!(error, Error::LeaseStoreUnavailable { .. }), "{error:?}");
    assert!(matches!(
        store.read("k0"),
        Err(Error::LeaseStoreUnavailable { .. })
    ));
    proxy.set(Mode::Forward);
    store.renew("k0", "o", 1, 60_000).unwrap();
    assert_eq!(store.list("k").unwrap().len(), 4);
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn a_commit_without_an_answer_is_never_reported_as_success() {
    let mut fx = Fixture::default();
    let proxy = Proxy::start(&fx.url);
    let prefix = server::fresh_prefix();
    let store = fx.open_at(&proxy.url(), &prefix, 2_000);
    let direct = fx.open(&prefix);

    // The server committed, the answer was lost: unavailable, and the row is there.
    proxy.set(Mode::CutAfterCommit);
    let error = store
        .acquire("applied", "o", 60_000)
        .expect_err("the answer was cut");
    assert!(
        matches!(&error, Error::LeaseStoreUnavailable { message } if message.contains("may or may not")),
        "{error:?}"
    );
    let row = direct.read("applied").unwrap().expect("the commit went through");
    assert_eq!((row.owner.as_str(), row.epoch), ("o", 1));
    // The client that was not told holds nothing: its own retry is refused until expiry.
    assert!(matches!(
        store.acquire("applied", "o", 60_000),
        Err(Error::LeaseHeld { .. })
    ));

    // The COMMIT never arrived: unavailable, and nothing was applied.
    proxy.set(Mode::CutBeforeCommit);
    let error = store
        .acquire("lost", "o", 60_000)
        .expect_err("the commit was cut");
    assert!(matches!(error, Error::LeaseStoreUnavailable { .. }), "{error:?}");
    assert_eq!(direct.read("lost").unwrap(), None);
    assert_eq!(store.acquire("lost", "o", 60_000).unwrap().record.epoch, 1);
}

enum Outage {
    ServerDown,
    RowLocked,
}

/// A holder whose store goes away keeps failing its renewals, closes its own gate at its
/// fence, and nobody else is granted the tenant before the lease ran out on the server's
/// clock; once the store is back, the holder learns it lost the lease.
fn holder_fails_closed(outage: Outage) {
    // Long enough that a loaded machine still reaches the outage loop before the fence.
    const TTL_MS: i64 = 3_000;
    let mut fx = Fixture::default();
    let proxy = Proxy::start(&fx.url);
    let prefix = server::fresh_prefix();
    let through: Arc<dyn LeaseStore> = Arc::new(fx.open_at(&proxy.url(), &prefix, 300));
    let direct = fx.open_at(&fx.url.clone(), &prefix, 300);
    let holder = TenantLease::acquire(LeaseOptions {
        key: "tenant".into(),
        replica_id: "replica-1".into(),
        store: Arc::clone(&through),
        ttl_ms: TTL_MS,
        margin_ms: 500,
        clock: Arc::new(SystemMonotonicClock),
    })
    .unwrap();
    holder.renew().unwrap();
    let last_grant = direct.read("tenant").unwrap().unwrap();

    let lock = match outage {
        Outage::ServerDown => {
            proxy.set(Mode::Down);
            None
        }
        Outage::RowLocked => Some(RowLock::take(&fx, direct.table_names().0, "tenant")),
    };
    let (mut refused_renewals, mut refused_rivals, mut acknowledged_writes) = (0, 0, 0);
    // Runs until the holder's own fence closes its gate; the fence does not move, so this
    // ends by itself.
    while holder.assert_held().is_ok() {
        match holder.renew() {
            Err(Error::LeaseStoreUnavailable { .. }) => refused_renewals += 1,
            other => panic!("a renewal during the outage answered {other:?}"),
        }
        match direct.acquire("tenant", "replica-2", TTL_MS) {
            Err(Error::LeaseHeld { .. } | Error::LeaseStoreUnavailable { .. }) => refused_rivals += 1,
            other => panic!("a rival was answered {other:?} while the holder's gate was open"),
        }
        // A write is acknowledged only when the gate passes before and after it.
        if holder.assert_held().is_ok() {
            acknowledged_writes += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    match holder.assert_held() {
        Err(Error::Fenced { reason, epoch, .. }) => {
            assert_eq!((reason, epoch), (FenceReason::LeaseExpiredLocally, 1))
        }
        other => panic!("{other:?}"),
    }
    assert!(refused_renewals >= 1 && refused_rivals >= 1);
    println!(
        "outage: {refused_renewals} failed renewals, {refused_rivals} refused rivals, \
         {acknowledged_writes} writes acknowledged before the fence"
    );

    if let Some(lock) = lock {
        lock.release();
    }
    // The rival gets the tenant, but only once the lease ran out on the server's clock.
    let rival = loop {
        match direct.acquire("tenant", "replica-2", TTL_MS) {
            Ok(grant) => break grant,
            Err(Error::LeaseHeld { record }) => {
                assert_eq!(record, last_grant);
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(other) => panic!("{other:?}"),
        }
    };
    assert_eq!(rival.record.epoch, 2);
    let granted_at = rival.record.lease_until_ms - TTL_MS;
    assert!(
        granted_at >= last_grant.lease_until_ms,
        "granted at {granted_at}, before the holder's lease ran out at {}",
        last_grant.lease_until_ms
    );
    assert!(holder.assert_held().is_err());

    // The store is back: the holder is told it lost the lease, and that is final.
    proxy.set(Mode::Forward);
    assert!(matches!(holder.renew(), Err(Error::LeaseLost { .. })));
    match holder.assert_held() {
        Err(Error::Fenced { reason, .. }) => assert_eq!(reason, FenceReason::LeaseLost),
        other => panic!("{other:?}"),
    }
    direct.release("tenant", "replica-2", 2).unwrap();
    let next = through.acquire("tenant", "replica-1", TTL_MS).unwrap();
    assert_eq!(next.record.epoch, 3);
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn holders_fail_closed_while_the_server_is_down() {
    holder_fails_closed(Outage::ServerDown);
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn holders_fail_closed_while_their_row_is_locked() {
    holder_fails_closed(Outage::RowLocked);
}
