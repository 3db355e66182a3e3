//! The MySQL lease store against a real MariaDB/MySQL server: whose clock decides, what the
//! database itself refuses, and what holders see when the server goes away, hangs, holds
//! its rows locked, kills connections or loses a COMMIT's answer.
//!
//! Outages that would disturb other users of the shared server (stopping it, cutting the
//! network) are played by the TCP proxy of `gotry_test_support::mysql_proxy`, between one
//! store and the server.
//! `GOTRY_SKIP_MYSQL=1` marks these tests ignored; otherwise a missing server fails them.
//!
//! The TLS tests (`tls_*`) run against a second server that only takes TLS connections,
//! named by `GOTRY_MYSQL_TLS_URL`, `GOTRY_MYSQL_TLS_CA` (the CA of its certificate, which
//! names `localhost` and `127.0.0.1`) and `GOTRY_MYSQL_TLS_OTHER_CA` (an unrelated CA):
//! `eval "$(scripts/mariadb-tls.sh)"` starts one and sets them, as `scripts/test.sh` does.
//! Without them those tests fail, unless `GOTRY_SKIP_MYSQL=1` marks them ignored.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use gotry_tenant_state::lease_store::mysql::{
    SslMode, TLS_CERTIFICATE, TLS_HANDSHAKE, TLS_NOT_OFFERED, TLS_REQUIRED_BY_SERVER, TLS_SETUP,
};
use gotry_tenant_state::{
    call_begun_at, open_lease_store, Error, FenceReason, LeaseOp, LeaseOptions, LeaseStore, ManualClock,
    MysqlLeaseStore, MysqlOptions, SystemMonotonicClock, SystemWallClock, TenantLease, WallClock,
};
use gotry_test_support::conformance;
use gotry_test_support::mysql::{self as server, encode, ScratchTables};
use gotry_test_support::mysql_fixture::{limited_user, options_at, Fixture};
use gotry_test_support::mysql_proxy::{Mode, Proxy};
use gotry_test_support::tls::{self, tenure};
use mysql::prelude::Queryable;

/// The server's clock in whole seconds, read on a connection of the test's own: no time zone
/// or rounding of the store's in between.
fn server_seconds(conn: &mut mysql::Conn) -> i64 {
    conn.query_first("SELECT UNIX_TIMESTAMP()")
        .expect("server clock")
        .expect("a row")
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn conformance_on_the_server() {
    let url = server::server_url();
    let scratch = Mutex::new(ScratchTables::new(&url));
    conformance::run_all(&|clock: Arc<ManualClock>| {
        let mut options = MysqlOptions::from_url(&url).expect("url");
        options.table_prefix = server::fresh_prefix();
        options.clock = Some(clock);
        let store = MysqlLeaseStore::open(options).unwrap_or_else(|e| server::no_server(&url, &e));
        let (leases, log) = store.table_names();
        scratch.lock().expect("scratch").add(leases, log);
        Arc::new(store)
    });
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn decisions_follow_the_server_clock() {
    let mut fx = Fixture::default();
    let prefix = server::fresh_prefix();
    let first = fx.open(&prefix);
    let second = fx.open(&prefix);
    let mut conn = fx.scratch.connect();

    let before_s = server_seconds(&mut conn);
    let now = first.now_ms().unwrap();
    let grant = first.acquire("tenant-a", "replica-1", 60_000).unwrap();
    let after_s = server_seconds(&mut conn);
    let window = before_s * 1000..(after_s + 1) * 1000;
    assert!(
        window.contains(&now),
        "store clock {now} outside the server's {window:?}"
    );
    let granted_at = grant.record.lease_until_ms - 60_000;
    assert!(
        window.contains(&granted_at),
        "granted at {granted_at}, server {window:?}"
    );
    assert_eq!(
        first.history(Some("tenant-a")).unwrap()[0].at_ms,
        granted_at,
        "the log records the time the decision used"
    );
    println!(
        "server clock minus this host's clock: {} ms",
        now - SystemWallClock.now_ms().unwrap()
    );

    // A second client of the same tables sees the lease held on the same clock.
    match second.acquire("tenant-a", "replica-2", 60_000) {
        Err(Error::LeaseHeld { record }) => assert_eq!(record, grant.record),
        other => panic!("expected LEASE_HELD, got {other:?}"),
    }
    assert_eq!(second.read("tenant-a").unwrap(), Some(grant.record.clone()));

    // Its expiry is the server's: a 100 ms lease is free for the other client once the
    // server's clock (not this host's) has passed it.
    first.acquire("short", "replica-1", 100).unwrap();
    loop {
        match second.acquire("short", "replica-2", 1_000) {
            Ok(grant) => {
                let log = second.history(Some("short")).unwrap();
                assert_eq!(log.len(), 2);
                assert!(log[1].at_ms >= log[0].at_ms + 100, "{log:?}");
                assert_eq!(grant.record.epoch, 2);
                break;
            }
            Err(Error::LeaseHeld { .. }) => std::thread::sleep(Duration::from_millis(10)),
            Err(other) => panic!("{other:?}"),
        }
    }
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn a_mysql_store_works_on_many_calls_at_once() {
    let mut fx = Fixture::default();
    // Hosts that queue calls per store must not run a MySQL store's calls one at a time.
    let store = fx.open(&server::fresh_prefix());
    assert!(store.concurrent_calls() > 1, "{}", store.concurrent_calls());
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn keys_and_owners_compare_as_exact_text() {
    let mut fx = Fixture::default();
    let store = fx.open(&server::fresh_prefix());
    let longest = [
        "é".repeat(200),         // 400 bytes
        "€".repeat(200),         // 600 bytes: the most 200 UTF-16 units can take
        "😀".repeat(100),        // 400 bytes, 200 UTF-16 units
        format!("nul\0{}", "x"), // NUL is text too
    ];
    for key in ["A", "a", "a ", "a  ", "ǅ", "ǆ"]
        .iter()
        .map(|k| k.to_string())
        .chain(longest.clone())
    {
        let grant = store.acquire(&key, &key, 60_000).unwrap();
        assert_eq!(
            (grant.record.key.as_str(), grant.record.epoch),
            (key.as_str(), 1),
            "{key:?}"
        );
        assert_eq!(store.read(&key).unwrap().unwrap().owner, key);
    }
    let owners: Vec<_> = store.list("").unwrap().into_iter().map(|r| r.owner).collect();
    let mut expected: Vec<String> = ["A", "a", "a ", "a  ", "ǅ", "ǆ"]
        .iter()
        .map(|k| k.to_string())
        .chain(longest.clone())
        .collect();
    expected.sort(); // byte order, as SQLite orders text
    assert_eq!(owners, expected);
    assert_eq!(
        store.list("a").unwrap().len(),
        3,
        "a prefix is matched on whole characters"
    );
    assert_eq!(store.list("€").unwrap().len(), 1);
    assert!(store.list("b").unwrap().is_empty());
    // An owner differing by a trailing space is another owner.
    assert!(matches!(
        store.renew("a", "a ", 1, 1_000),
        Err(Error::LeaseLost { .. })
    ));
    assert!(matches!(
        store.acquire(&"€".repeat(201), "o", 1_000),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn the_database_refuses_what_the_rules_forbid() {
    let mut fx = Fixture::default();
    let store = fx.open(&server::fresh_prefix());
    store.acquire("k", "o", 60_000).unwrap();
    store.mark_forgotten("k", "o", 1).unwrap();
    let (leases, log) = store.table_names();
    let mut conn = fx.scratch.connect();
    for statement in [
        format!("UPDATE `{leases}` SET epoch = epoch + 2"),
        format!("UPDATE `{leases}` SET epoch = epoch - 1"),
        format!("UPDATE `{leases}` SET forgotten_at_epoch = 0"),
        format!("UPDATE `{leases}` SET `key` = 'other'"),
        format!("UPDATE `{leases}` SET owner = 'thief'"),
        format!("DELETE FROM `{leases}`"),
        format!("UPDATE `{log}` SET owner = 'someone else'"),
        format!("DELETE FROM `{log}`"),
        format!("INSERT INTO `{leases}` (`key`, owner, epoch, lease_until_ms) VALUES ('z', 'o', 0, 0)"),
        format!("INSERT INTO `{log}` (`key`, op, owner, epoch, at_ms) VALUES ('k', 'steal', 'o', 1, 0)"),
        format!("INSERT INTO `{log}` (`key`, op, owner, epoch, at_ms) VALUES ('k', 'RENEW', 'o', 1, 0)"),
    ] {
        match conn.query_drop(&statement) {
            Err(mysql::Error::MySqlError(e)) => {
                assert!([1644, 3819, 4025].contains(&e.code), "{statement}: {e:?}")
            }
            other => panic!("{statement} was not refused: {other:?}"),
        }
    }
    // What the rules allow still goes through by hand: the next epoch, a higher floor.
    conn.query_drop(format!(
        "UPDATE `{leases}` SET epoch = epoch + 1, forgotten_at_epoch = 2"
    ))
    .unwrap();
    let row = store.read("k").unwrap().unwrap();
    assert_eq!((row.epoch, row.forgotten_at_epoch), (2, 2));
    assert_eq!(store.history(None).unwrap().len(), 2, "the log kept its entries");
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn the_schema_is_created_once_when_processes_start_together() {
    let fx = Fixture::default();
    let fx = Mutex::new(fx);
    let prefix = server::fresh_prefix();
    let url = fx.lock().unwrap().url.clone();
    let barrier = Barrier::new(6);
    let stores: Vec<MysqlLeaseStore> = std::thread::scope(|scope| {
        let openers: Vec<_> = (0..6)
            .map(|_| {
                scope.spawn(|| {
                    let mut options = options_at(&url);
                    options.table_prefix = prefix.clone();
                    barrier.wait();
                    MysqlLeaseStore::open(options)
                })
            })
            .collect();
        openers
            .into_iter()
            .map(|opener| {
                opener
                    .join()
                    .unwrap()
                    .unwrap_or_else(|e| server::no_server(&url, &e))
            })
            .collect()
    });
    let mut fx = fx.into_inner().unwrap();
    let (leases, log) = stores[0].table_names();
    fx.scratch.add(leases, log);
    let mut conn = fx.scratch.connect();
    let triggers: Vec<String> = conn
        .exec(
            "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS
             WHERE TRIGGER_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE IN (?, ?) ORDER BY TRIGGER_NAME",
            (leases, log),
        )
        .unwrap();
    assert_eq!(triggers.len(), 4, "{triggers:?}");
    for (i, store) in stores.iter().enumerate() {
        let key = format!("k{i}");
        store.acquire(&key, "o", 60_000).unwrap();
    }
    assert_eq!(stores[5].list("").unwrap().len(), 6);
}

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
    let proxied = proxy.url(&fx.url);
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
    let proxied = proxy.url(&fx.url);
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
    let store = fx.open_at(
        &proxy.url(&fx.url),
        &server::fresh_prefix(),
        TIMEOUT.as_millis() as u64,
    );
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
    let mut options = options_at(&proxy.url(&fx.url));
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
    let proxied = proxy.url(&fx.url);
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
    let store = fx.open_at(&proxy.url(&fx.url), &prefix, 2_000);
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
    let through: Arc<dyn LeaseStore> = Arc::new(fx.open_at(&proxy.url(&fx.url), &prefix, 300));
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

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn credentials_appear_in_no_error_and_no_debug_output() {
    let mut fx = Fixture::default();
    let server = options_at(&fx.url);
    let host = if server.host.contains(':') {
        format!("[{}]", server.host)
    } else {
        server.host.clone()
    };
    let wrong = format!(
        "mysql://gotry_nobody_x:hunter2%40secret@{host}:{}/{}",
        server.port, server.database
    );
    let error = open_lease_store(&wrong).map(|_| ()).expect_err("no such user");
    let shown = format!("{error} {error:?} {}", error.code_str());
    assert!(matches!(error, Error::Storage { .. }), "{shown}");
    assert!(!shown.contains("gotry_nobody_x"), "{shown}");
    assert!(!shown.contains("hunter2"), "{shown}");

    let store = fx.open(&server::fresh_prefix());
    let shown = format!("{store:?}");
    assert!(
        shown.contains(&format!("{}:{}", server.host, server.port)),
        "{shown}"
    );
    for secret in [
        server.user.unwrap_or_default(),
        server.password.unwrap_or_default(),
    ] {
        assert!(secret.is_empty() || !shown.contains(&secret), "{shown}");
    }
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn open_lease_store_takes_mysql_urls_with_options() {
    let mut fx = Fixture::default();
    // The longest prefix: every table and trigger name still fits MySQL's 64 characters.
    let prefix = format!("{:x<32}", server::fresh_prefix());
    assert_eq!(prefix.len(), 32);
    let url = server::with_option(
        &server::with_option(&fx.url, "prefix", &prefix),
        "timeout_ms",
        "1500",
    );
    let store = open_lease_store(&url).unwrap_or_else(|e| server::no_server(&url, &e));
    let typed = fx.open(&prefix);
    store.acquire("k", "o", 60_000).unwrap();
    assert_eq!(
        typed.read("k").unwrap().unwrap().owner,
        "o",
        "both opened the same tables"
    );
    store.close().unwrap();
    assert!(matches!(
        store.read("k"),
        Err(Error::LeaseStoreUnavailable { .. })
    ));
    assert!(matches!(
        open_lease_store(&server::with_option(&fx.url, "prefix", "Bad-Prefix")).map(|_| ()),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn batches_of_any_size_renew_each_lease_once_per_mention() {
    let mut fx = Fixture::default();
    let store = fx.open(&server::fresh_prefix());
    // More leases than one statement locks or writes, and one of them named twice.
    let keys: Vec<String> = (0..250).map(|i| format!("k{i:03}")).collect();
    for key in &keys {
        store.acquire(key, "o", 60_000).unwrap();
    }
    let mut leases: Vec<(&str, i64)> = keys.iter().map(|key| (key.as_str(), 1)).collect();
    leases.push(("k007", 1));
    leases.push(("k007", 2));
    let answers = store.renew_batch("o", 90_000, &leases).unwrap();
    assert_eq!(answers.len(), 252);
    assert!(answers[..251].iter().all(Result::is_ok), "{:?}", &answers[..3]);
    assert!(matches!(answers[251], Err(Error::LeaseLost { .. })));
    let renewed_at = store.history(Some("k249")).unwrap()[1].at_ms;
    for record in store.list("k").unwrap() {
        assert_eq!(
            (record.epoch, record.lease_until_ms),
            (1, renewed_at + 90_000),
            "{record:?}"
        );
    }
    let renews = |key: &str| {
        store
            .history(Some(key))
            .unwrap()
            .iter()
            .filter(|e| e.op == LeaseOp::Renew)
            .count()
    };
    assert_eq!((renews("k007"), renews("k008")), (2, 1));
    assert_eq!(store.history(None).unwrap().len(), 250 + 251);
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn a_user_without_ddl_rights_runs_on_tables_made_for_it() {
    let mut fx = Fixture::default();
    let prefix = server::fresh_prefix();
    let admin_store = fx.open(&prefix);
    admin_store.acquire("k", "admin", 60_000).unwrap();
    let password = "pw-Limited-7";
    let (mut limited, user) = limited_user(&fx, &prefix, password);
    let (server, name) = (limited.clone(), user.name.clone());
    let store = MysqlLeaseStore::open(limited.clone()).unwrap();
    assert!(matches!(
        store.acquire("k", "limited", 1_000),
        Err(Error::LeaseHeld { .. })
    ));
    store.acquire("k2", "limited", 60_000).unwrap();
    store.renew("k2", "limited", 1, 60_000).unwrap();
    // The triggers still guard what this user writes.
    let (leases, _) = store.table_names();
    let mut conn = mysql::Conn::new(
        mysql::OptsBuilder::new()
            .ip_or_hostname(Some(server.host.clone()))
            .tcp_port(server.port)
            .user(Some(name.clone()))
            .pass(Some(password))
            .db_name(Some(server.database.clone()))
            .prefer_socket(false),
    )
    .unwrap();
    match conn.query_drop(format!("UPDATE `{leases}` SET epoch = epoch + 5")) {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1644, "{e:?}"),
        other => panic!("{other:?}"),
    }

    // Without the tables, the store says it may not create them, and does not say who.
    limited.table_prefix = server::fresh_prefix();
    let error = MysqlLeaseStore::open(limited).expect_err("no CREATE right");
    let shown = format!("{error} {error:?}");
    assert!(
        matches!(&error, Error::Storage { code, .. } if code == "ER_TABLEACCESS_DENIED_ERROR"),
        "{shown}"
    );
    assert!(!shown.contains(&name) && !shown.contains(password), "{shown}");
}

// ---------------------------------------------------------------------------------------
// Pruning the log.

/// A store of `prefix` deciding on `clock` and keeping every renewal for `retention`.
fn store_on_clock(
    fx: &mut Fixture,
    prefix: &str,
    clock: &Arc<ManualClock>,
    retention_s: u64,
) -> MysqlLeaseStore {
    let mut options = options_at(&fx.url);
    options.table_prefix = prefix.to_owned();
    options.clock = Some(Arc::clone(clock) as Arc<dyn WallClock>);
    let store = MysqlLeaseStore::open(options).unwrap_or_else(|e| server::no_server(&fx.url, &e));
    let (leases, log) = store.table_names();
    fx.scratch.add(leases, log);
    store
        .with_log_retention(Duration::from_secs(retention_s))
        .unwrap()
}

fn ops_of(store: &dyn LeaseStore, key: &str) -> Vec<(LeaseOp, i64)> {
    store
        .history(Some(key))
        .unwrap()
        .into_iter()
        .map(|e| (e.op, e.epoch))
        .collect()
}

/// Puts the tables of `prefix` back as earlier versions made them: no pruning mark, and a
/// delete guard on the log that refuses every delete.
fn make_schema_old(conn: &mut mysql::Conn, prefix: &str) {
    for statement in [
        format!("DROP TRIGGER `{prefix}lease_log_guard_prune`"),
        format!("DROP TABLE `{prefix}lease_log_pruned`"),
        format!(
            "CREATE TRIGGER `{prefix}lease_log_guard_delete` BEFORE DELETE ON `{prefix}lease_log`
             FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'the lease log is append-only'"
        ),
    ] {
        conn.query_drop(&statement)
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
}

/// The delete guards of `prefix`'s log, and whether its mark table exists.
fn log_guards(conn: &mut mysql::Conn, prefix: &str) -> (Vec<String>, bool) {
    let guards = conn
        .exec(
            "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS
             WHERE TRIGGER_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE = ? AND EVENT_MANIPULATION = 'DELETE'",
            (format!("{prefix}lease_log"),),
        )
        .unwrap();
    let mark: Option<String> = conn
        .exec_first(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
            (format!("{prefix}lease_log_pruned"),),
        )
        .unwrap();
    (guards, mark.is_some())
}

/// A delete of `op` rows of `prefix`'s log by hand: the server's answer (rolled back when
/// it went through).
fn delete_by_hand(conn: &mut mysql::Conn, prefix: &str, op: &str) -> Result<u64, u16> {
    conn.query_drop("START TRANSACTION").unwrap();
    let outcome = conn
        .exec_drop(
            format!("DELETE FROM `{prefix}lease_log` WHERE op = ? LIMIT 1"),
            (op,),
        )
        .map(|()| conn.affected_rows())
        .map_err(|e| match e {
            mysql::Error::MySqlError(e) => e.code,
            other => panic!("{other}"),
        });
    conn.query_drop("ROLLBACK").unwrap();
    outcome
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn writes_prune_old_renewals_and_keep_every_acquire_release_forget_and_tenure_end() {
    const START: i64 = 1_700_000_000_000;
    let mut fx = Fixture::default();
    let prefix = server::fresh_prefix();
    let clock = Arc::new(ManualClock::new(START));
    let store = store_on_clock(&mut fx, &prefix, &clock, 60);
    let keys: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
    for key in &keys {
        store.acquire(key, "a", 30_000).unwrap();
    }
    let mut written = keys.len();
    // k0's tenure stops renewing at round 10; k1 is released at round 12 and taken by b at
    // round 13; k2 is forgotten at round 5; the others go on. A round every ten seconds.
    for round in 1..=30 {
        clock.advance(10_000).unwrap();
        let batch: Vec<(&str, i64)> = keys
            .iter()
            .filter(|key| match key.as_str() {
                "k0" => round <= 10,
                "k1" => round <= 11,
                _ => true,
            })
            .map(|key| (key.as_str(), 1))
            .collect();
        for answer in store.renew_batch("a", 30_000, &batch).unwrap() {
            answer.unwrap();
        }
        written += batch.len();
        let single = match round {
            5 => store.mark_forgotten("k2", "a", 1).map(|_| ()),
            12 => store.release("k1", "a", 1).map(|_| ()),
            13 => store.acquire("k1", "b", 30_000).map(|_| ()),
            r if r > 13 => store.renew("k1", "b", 2, 30_000).map(|_| ()),
            _ => continue,
        };
        single.unwrap();
        written += 1;
    }
    let history = store.history(None).unwrap();
    println!(
        "lease log: {written} rows written over 300 s, {} kept with a retention of 60 s",
        history.len()
    );
    let count = |op: LeaseOp| history.iter().filter(|e| e.op == op).count();
    assert_eq!(
        (
            count(LeaseOp::Acquire),
            count(LeaseOp::Release),
            count(LeaseOp::Forget)
        ),
        (11, 1, 1)
    );
    // The end of k0's tenure and of k1's first, however old; for the rest, the renewals
    // of the retention (the last write judged up to 60 s before it: rounds 24 to 30).
    assert_eq!(ops_of(&store, "k0"), [(LeaseOp::Acquire, 1), (LeaseOp::Renew, 1)]);
    let k1 = ops_of(&store, "k1");
    assert_eq!(
        k1[..4],
        [
            (LeaseOp::Acquire, 1),
            (LeaseOp::Renew, 1),
            (LeaseOp::Release, 1),
            (LeaseOp::Acquire, 2)
        ],
        "{k1:?}"
    );
    assert_eq!(k1[4..], vec![(LeaseOp::Renew, 2); 7], "{k1:?}");
    let k0_last = history.iter().rfind(|e| e.key == "k0").unwrap();
    assert_eq!(k0_last.at_ms, START + 100_000);
    for key in &keys[2..] {
        let renewals = ops_of(&store, key)
            .iter()
            .filter(|(op, _)| *op == LeaseOp::Renew)
            .count();
        assert_eq!(renewals, 7, "{key}");
    }
    assert_eq!(store.compact_log().unwrap(), 0, "the writes kept pace");

    // Another session holds the mark: a write does not wait for it, and prunes nothing.
    let mut other = fx.scratch.connect();
    other.query_drop("START TRANSACTION").unwrap();
    let _: Option<u64> = other
        .query_first(format!(
            "SELECT through_id FROM `{prefix}lease_log_pruned` FOR UPDATE"
        ))
        .unwrap();
    clock.advance(120_000).unwrap();
    let rows = store.history(None).unwrap().len();
    let started = Instant::now();
    store.acquire("k0", "c", 30_000).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(store.history(None).unwrap().len(), rows + 1);
    other.query_drop("ROLLBACK").unwrap();
    store.renew("k0", "c", 2, 30_000).unwrap();
    assert!(store.history(None).unwrap().len() < rows, "the next write pruned");
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn an_old_schema_is_migrated_at_open_and_its_log_compacted() {
    const START: i64 = 1_700_000_000_000;
    let mut fx = Fixture::default();
    let prefix = server::fresh_prefix();
    let clock = Arc::new(ManualClock::new(START));
    // A log written with nothing old enough to prune, then the schema of earlier versions.
    let before = store_on_clock(&mut fx, &prefix, &clock, 3_600);
    let keys: Vec<String> = (0..50).map(|i| format!("k{i}")).collect();
    let batch: Vec<(&str, i64)> = keys.iter().map(|key| (key.as_str(), 1)).collect();
    for key in &keys {
        before.acquire(key, "a", 30_000).unwrap();
    }
    for _ in 0..40 {
        clock.advance(1_000).unwrap();
        for answer in before.renew_batch("a", 30_000, &batch).unwrap() {
            answer.unwrap();
        }
    }
    before.release("k0", "a", 1).unwrap();
    drop(before);
    let mut admin = fx.scratch.connect();
    make_schema_old(&mut admin, &prefix);
    assert_eq!(
        delete_by_hand(&mut admin, &prefix, "renew"),
        Err(1644),
        "the old guard"
    );

    clock.advance(3_600_000).unwrap();
    let store = store_on_clock(&mut fx, &prefix, &clock, 60);
    let (guards, mark) = log_guards(&mut admin, &prefix);
    assert_eq!(guards, [format!("{prefix}lease_log_guard_prune")]);
    assert!(mark, "the mark table was made");
    // The server itself refuses to delete anything but a renewal, to any client.
    for op in ["acquire", "release"] {
        assert_eq!(delete_by_hand(&mut admin, &prefix, op), Err(1644), "{op}");
    }
    assert_eq!(delete_by_hand(&mut admin, &prefix, "renew"), Ok(1));

    let rows = store.history(None).unwrap().len();
    let deleted = store.compact_log().unwrap();
    let kept = store.history(None).unwrap();
    println!(
        "compact_log: {rows} rows before, {deleted} deleted, {} after",
        kept.len()
    );
    assert_eq!(deleted, 50 * 40 - 50);
    assert_eq!(kept.len(), rows - deleted as usize);
    assert_eq!(
        ops_of(&store, "k0"),
        [(LeaseOp::Acquire, 1), (LeaseOp::Renew, 1), (LeaseOp::Release, 1)]
    );
    for key in &keys[1..] {
        assert_eq!(
            ops_of(&store, key),
            [(LeaseOp::Acquire, 1), (LeaseOp::Renew, 1)],
            "{key}"
        );
    }
    assert_eq!(
        kept.iter().rfind(|e| e.key == "k9").unwrap().at_ms,
        START + 40_000,
        "the last renewal stays"
    );
    assert_eq!(store.compact_log().unwrap(), 0);
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn a_user_without_trigger_rights_runs_on_old_tables_and_is_told_why_they_are_not_pruned() {
    let mut fx = Fixture::default();
    let prefix = server::fresh_prefix();
    fx.open(&prefix).acquire("k", "admin", 60_000).unwrap();
    let mut admin = fx.scratch.connect();
    make_schema_old(&mut admin, &prefix);
    let password = "pw-Limited-8";
    let (limited, user) = limited_user(&fx, &prefix, password);
    let name = user.name.clone();

    let store = MysqlLeaseStore::open(limited.clone()).unwrap();
    store.acquire("k2", "limited", 60_000).unwrap();
    for _ in 0..3 {
        store.renew("k2", "limited", 1, 60_000).unwrap();
    }
    let refused = store.compact_log().expect_err("the old guard stays");
    let shown = format!("{refused} {refused:?}");
    println!("{refused}");
    assert!(
        matches!(&refused, Error::Storage { code, message }
            if code == "ER_TABLEACCESS_DENIED_ERROR" && message.contains("TRIGGER") && message.contains("not pruned")),
        "{shown}"
    );
    assert!(!shown.contains(&name) && !shown.contains(password), "{shown}");
    assert_eq!(
        log_guards(&mut admin, &prefix),
        (vec![format!("{prefix}lease_log_guard_delete")], false),
        "nothing changed"
    );

    // Migrated by an administrator, the tables are pruned by whoever may delete from the
    // log; this user may not, and is told so.
    let mut root = options_at(&fx.url);
    root.table_prefix = prefix.clone();
    drop(MysqlLeaseStore::open(root).unwrap());
    let mut options = limited;
    options.clock = Some(Arc::new(ManualClock::new(
        SystemWallClock.now_ms().unwrap() + 3_600_000,
    )));
    let store = MysqlLeaseStore::open(options)
        .unwrap()
        .with_log_retention(Duration::from_secs(60))
        .unwrap();
    let refused = store.compact_log().expect_err("no DELETE right");
    assert!(
        matches!(&refused, Error::Storage { code, message }
            if code == "ER_TABLEACCESS_DENIED_ERROR" && message.contains("pruning needs the DELETE privilege")),
        "{refused:?}"
    );
    // Said again without asking the server.
    assert!(matches!(store.compact_log(), Err(Error::Storage { .. })));
    assert!(store.acquire("k3", "limited", 60_000).is_ok());
}

/// A wall clock that holds its first `parties` readers until all of them arrived: every
/// transaction reads the clock after its row locks, so this lines up racers exactly there.
struct RendezvousClock {
    parties: usize,
    calls: std::sync::atomic::AtomicUsize,
    barrier: Barrier,
}

impl WallClock for RendezvousClock {
    fn now_ms(&self) -> gotry_tenant_state::Result<i64> {
        if self.calls.fetch_add(1, Ordering::SeqCst) < self.parties {
            self.barrier.wait();
        }
        Ok(1_000_000)
    }
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn racers_that_all_found_a_key_missing_grant_it_once() {
    let mut fx = Fixture::default();
    const RACERS: usize = 3;
    let mut options = options_at(&fx.url);
    options.table_prefix = server::fresh_prefix();
    options.clock = Some(Arc::new(RendezvousClock {
        parties: RACERS,
        calls: Default::default(),
        barrier: Barrier::new(RACERS),
    }));
    let store = MysqlLeaseStore::open(options).unwrap_or_else(|e| server::no_server(&fx.url, &e));
    let (leases, log) = store.table_names();
    fx.scratch.add(leases, log);
    // Each racer locked nothing (the row is missing) and then waits at the clock for the
    // others, so all of them go on to insert the same new row.
    let results: Vec<_> = std::thread::scope(|scope| {
        let racers: Vec<_> = (0..RACERS)
            .map(|i| {
                let store = &store;
                scope.spawn(move || store.acquire("new", &format!("r{i}"), 1_000))
            })
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    for result in &results {
        match result {
            Ok(_) => {}
            Err(Error::LeaseHeld { record }) => assert_eq!(record, &winners[0].record),
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(store.read("new").unwrap().as_ref(), Some(&winners[0].record));
    assert_eq!(store.history(Some("new")).unwrap().len(), 1);
}

// ---------------------------------------------------------------------------------------
// TLS, against the second server (require_secure_transport=ON) of scripts/mariadb-tls.sh.

const TLS_URL_VAR: &str = "GOTRY_MYSQL_TLS_URL";
const TLS_CA_VAR: &str = "GOTRY_MYSQL_TLS_CA";
const TLS_OTHER_CA_VAR: &str = "GOTRY_MYSQL_TLS_OTHER_CA";

/// The TLS server of one test.
struct TlsServer {
    url: String,
    /// Its URL's parts: user, password, host, port, database.
    options: MysqlOptions,
    ca: String,
    other_ca: String,
}

impl TlsServer {
    /// The server, or a failure that says what to do when it is not set up.
    fn new() -> TlsServer {
        let [url, ca, other_ca] = tls::server_vars(
            [TLS_URL_VAR, TLS_CA_VAR, TLS_OTHER_CA_VAR],
            "MariaDB/MySQL",
            "mariadb-tls.sh",
            server::SKIP_VAR,
        );
        let options = MysqlOptions::from_url(&url).unwrap_or_else(|e| panic!("{TLS_URL_VAR}: {e}"));
        TlsServer {
            url,
            options,
            ca,
            other_ca,
        }
    }

    /// The server's URL with `host` and `port` instead of its own, fresh tables, and `query`.
    fn url_at(&self, host: &str, port: u16, query: &str) -> String {
        let o = &self.options;
        tls::url_at(
            "mysql",
            o.user.as_deref(),
            o.password.as_deref(),
            host,
            port,
            &o.database,
            query,
        )
    }

    fn url(&self, query: &str) -> String {
        self.url_at(&self.options.host, self.options.port, query)
    }

    fn ca_query(mode: &str, ca: &str) -> String {
        format!("ssl-mode={mode}&ssl-ca={}", encode(ca))
    }

    /// Neither the password nor the user name is in `shown`.
    fn assert_no_secret(&self, shown: &str) {
        if let Some(password) = self.options.password.as_deref().filter(|p| !p.is_empty()) {
            assert!(!shown.contains(password), "the password is in: {shown}");
        }
        if let Some(user) = self.options.user.as_deref().filter(|u| u.len() > 2) {
            assert!(
                !shown.contains(&format!("'{user}'")),
                "the user name is in: {shown}"
            );
        }
    }

    /// Opening `url` fails with LEASE_STORE_UNAVAILABLE under `code`, naming `mode` and no
    /// secret. Returns the message.
    fn assert_refused(&self, url: &str, code: &str, mode: &str) -> String {
        tls::assert_refused(
            url,
            &server::shown(url),
            code,
            &format!("ssl-mode={mode}"),
            |shown| self.assert_no_secret(shown),
        )
    }
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn tls_verify_identity_with_the_servers_ca_works_end_to_end() {
    let tls = TlsServer::new();
    let url = tls.url(&TlsServer::ca_query("verify_identity", &tls.ca));
    let store = MysqlLeaseStore::open_url(&url).unwrap_or_else(|e| panic!("{}: {e}", server::shown(&url)));
    let shown = format!("{store:?}");
    assert!(shown.contains("VerifyIdentity"), "{shown}");
    tls.assert_no_secret(&shown);
    tenure(&store);
    // Calls from several threads at once: each pooled connection made its own handshake.
    std::thread::scope(|scope| {
        for i in 0..4 {
            let store = &store;
            scope.spawn(move || {
                let key = format!("tls-t{i}");
                store.acquire(&key, "o", 60_000).unwrap();
                store.renew(&key, "o", 1, 60_000).unwrap();
            });
        }
    });
    assert_eq!(store.list("tls-t").unwrap().len(), 4);

    // By the DNS name in the certificate, in MySQL's spelling; and with only ssl-ca, which
    // means verify_identity.
    let by_name = tls.url_at(
        "localhost",
        tls.options.port,
        &TlsServer::ca_query("VERIFY_IDENTITY", &tls.ca),
    );
    tenure(&*open_lease_store(&by_name).unwrap_or_else(|e| panic!("{}: {e}", server::shown(&by_name))));
    let ca_only = tls.url(&format!("ssl-ca={}", encode(&tls.ca)));
    let options = MysqlOptions::from_url(&ca_only).unwrap();
    assert_eq!(options.effective_ssl_mode(), SslMode::VerifyIdentity);
    tenure(&MysqlLeaseStore::open(options).unwrap());
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn tls_required_without_a_ca_encrypts_without_checking() {
    let tls = TlsServer::new();
    // The server takes nothing but TLS, so a working store is an encrypted one.
    let url = tls.url("ssl-mode=required");
    tenure(&*open_lease_store(&url).unwrap_or_else(|e| panic!("{}: {e}", server::shown(&url))));
    // Unchecked: an address the certificate does not name passes too.
    let other_address = Proxy::start_at("127.0.0.2", &tls.url);
    let url = tls.url_at("127.0.0.2", other_address.port, "ssl-mode=REQUIRED");
    tenure(&*open_lease_store(&url).unwrap_or_else(|e| panic!("{}: {e}", server::shown(&url))));
    // With a CA, required checks the chain and not the name.
    let url = tls.url_at(
        "127.0.0.2",
        other_address.port,
        &TlsServer::ca_query("required", &tls.ca),
    );
    tenure(&*open_lease_store(&url).unwrap_or_else(|e| panic!("{}: {e}", server::shown(&url))));
    let url = tls.url(&TlsServer::ca_query("required", &tls.other_ca));
    tls.assert_refused(&url, TLS_CERTIFICATE, "required");
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn tls_disabled_is_refused_by_a_server_that_requires_tls() {
    let tls = TlsServer::new();
    let message = tls.assert_refused(&tls.url("ssl-mode=disabled"), TLS_REQUIRED_BY_SERVER, "disabled");
    assert!(
        message.contains("use ssl-mode=required or verify_identity"),
        "{message}"
    );
    // Loopback without ssl-mode is disabled, so the same.
    let loopback_default = tls.url("");
    assert_eq!(
        MysqlOptions::from_url(&loopback_default)
            .unwrap()
            .effective_ssl_mode(),
        SslMode::Disabled
    );
    tls.assert_refused(&loopback_default, TLS_REQUIRED_BY_SERVER, "disabled");

    // A wrong password stays what it is, over either transport, and is never shown.
    let wrong = |query: &str| {
        let mut options = MysqlOptions::from_url(&tls.url(query)).unwrap();
        options.password = Some("Wrong-pw-4711".into());
        let error = MysqlLeaseStore::open(options)
            .map(|_| ())
            .expect_err("a wrong password");
        let shown = format!("{error} | {error:?}");
        assert!(
            matches!(&error, Error::Storage { code, .. } if code == "ER_ACCESS_DENIED_ERROR"),
            "{shown}"
        );
        assert!(!shown.contains("Wrong-pw-4711"), "{shown}");
        tls.assert_no_secret(&shown);
    };
    wrong("ssl-mode=disabled");
    wrong(&TlsServer::ca_query("verify_identity", &tls.ca));
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn tls_verify_identity_with_a_wrong_ca_fails() {
    let tls = TlsServer::new();
    let message = tls.assert_refused(
        &tls.url(&TlsServer::ca_query("verify_identity", &tls.other_ca)),
        TLS_CERTIFICATE,
        "verify_identity",
    );
    assert!(message.contains("UnknownIssuer"), "{message}");
    // Without ssl-ca only the public web roots are trusted, and they did not sign it.
    tls.assert_refused(
        &tls.url("ssl-mode=verify_identity"),
        TLS_CERTIFICATE,
        "verify_identity",
    );
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn tls_verify_identity_refuses_a_host_the_certificate_does_not_name() {
    let tls = TlsServer::new();
    let query = TlsServer::ca_query("verify_identity", &tls.ca);
    // The right certificate, from the right CA, reached at an address it does not name.
    let other_address = Proxy::start_at("127.0.0.2", &tls.url);
    let message = tls.assert_refused(
        &tls.url_at("127.0.0.2", other_address.port, &query),
        TLS_CERTIFICATE,
        "verify_identity",
    );
    assert!(message.contains("127.0.0.2"), "{message}");
    // And at a name it does not name, when this machine has one for 127.0.0.1 (its host
    // name often is).
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let hostname = hostname.trim();
    let resolves_here = !hostname.is_empty()
        && !hostname.eq_ignore_ascii_case("localhost")
        && (hostname, 0)
            .to_socket_addrs()
            .is_ok_and(|mut addrs| addrs.any(|a| a.ip() == std::net::Ipv4Addr::LOCALHOST));
    if resolves_here {
        let same_address = Proxy::start(&tls.url);
        let message = tls.assert_refused(
            &tls.url_at(hostname, same_address.port, &query),
            TLS_CERTIFICATE,
            "verify_identity",
        );
        assert!(message.contains(hostname), "{message}");
    } else {
        println!("no name but localhost resolves to 127.0.0.1 here: the by-name mismatch was not tried");
    }
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn tls_required_of_a_server_without_tls_is_unavailable() {
    let fx = Fixture::default();
    let have_ssl: String = fx
        .scratch
        .connect()
        .query_first("SELECT @@have_ssl")
        .expect("have_ssl")
        .expect("a row");
    if have_ssl == "YES" {
        println!("the plain test server offers TLS (have_ssl = YES): nothing to refuse here");
        return;
    }
    let options = options_at(&fx.url);
    let host = if options.host.contains(':') {
        format!("[{}]", options.host)
    } else {
        options.host.clone()
    };
    for mode in ["required", "verify_identity"] {
        let url = format!(
            "mysql://gotry_nobody_y:pw-Never-Shown@{host}:{}/{}?ssl-mode={mode}",
            options.port, options.database
        );
        let error = open_lease_store(&url).map(|_| ()).expect_err(mode);
        let shown = format!("{error} | {error:?}");
        assert!(matches!(error, Error::LeaseStoreUnavailable { .. }), "{shown}");
        assert!(error.to_string().starts_with(TLS_NOT_OFFERED), "{shown}");
        assert!(shown.contains(&format!("ssl-mode={mode}")), "{shown}");
        assert!(
            !shown.contains("pw-Never-Shown") && !shown.contains("gotry_nobody_y"),
            "{shown}"
        );
    }
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn tls_a_ca_file_gone_since_the_store_opened_fails_the_next_connection() {
    let tls = TlsServer::new();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::copy(&tls.ca, &ca).unwrap();
    let proxy = Proxy::start(&tls.url);
    let url = tls.url_at(
        "127.0.0.1",
        proxy.port,
        &TlsServer::ca_query("verify_identity", ca.to_str().unwrap()),
    );
    let store = open_lease_store(&url).unwrap_or_else(|e| panic!("{}: {e}", server::shown(&url)));
    store.acquire("k", "o", 60_000).unwrap();
    std::fs::remove_file(&ca).unwrap();
    // The pooled connection is cut, so the next call connects again and reads the CA.
    proxy.set(Mode::Down);
    proxy.set(Mode::Forward);
    let error = store.renew("k", "o", 1, 60_000).expect_err("no CA file");
    let shown = format!("{error} | {error:?}");
    assert!(matches!(error, Error::LeaseStoreUnavailable { .. }), "{shown}");
    assert!(error.to_string().starts_with(TLS_SETUP), "{shown}");
    assert!(
        shown.contains("ssl-mode=verify_identity") && shown.contains("cannot be read"),
        "{shown}"
    );
    tls.assert_no_secret(&shown);
    // Put back, it is read again.
    std::fs::copy(&tls.ca, &ca).unwrap();
    store.renew("k", "o", 1, 60_000).unwrap();
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn tls_a_server_that_refuses_the_handshake_is_unavailable() {
    let tls = TlsServer::new();
    // The real server's greeting (it offers TLS), replayed by a server of the test's own
    // that answers the client's switch to TLS with a fatal handshake_failure alert.
    let mut real = TcpStream::connect((tls.options.host.as_str(), tls.options.port)).expect("the TLS server");
    let greeting = read_packet(&mut real);
    drop(real);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let fake = std::thread::spawn(move || {
        for _ in 0..2 {
            let Ok((mut client, _)) = listener.accept() else {
                return;
            };
            client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let _ = client.write_all(&greeting);
            let _ = read_packet(&mut client); // SSLRequest
            let _ = client.write_all(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28]);
            let _ = client.shutdown(Shutdown::Write);
            let mut rest = Vec::new();
            let _ = client.read_to_end(&mut rest);
        }
    });
    for mode in ["required", "verify_identity"] {
        let query = TlsServer::ca_query(mode, &tls.ca);
        let message = tls.assert_refused(&tls.url_at("127.0.0.1", port, &query), TLS_HANDSHAKE, mode);
        assert!(message.contains("HandshakeFailure"), "{message}");
    }
    fake.join().unwrap();
}

/// One MySQL protocol packet, with its 4-byte header.
fn read_packet(stream: &mut TcpStream) -> Vec<u8> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).expect("a packet header");
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    let mut packet = header.to_vec();
    packet.resize(4 + len, 0);
    stream.read_exact(&mut packet[4..]).expect("a packet");
    packet
}
