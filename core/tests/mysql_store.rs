//! The MySQL lease store against a real MariaDB/MySQL server: the lease store contract, whose
//! clock decides, what the database itself refuses, what a user of limited rights can run,
//! and what racing callers are granted.
//!
//! Its other suites are test files of their own, sharing `gotry_test_support::mysql_fixture`:
//! `mysql_outages` (the server gone, hung, slow, locking rows or losing a COMMIT's answer),
//! `mysql_pruning` (the lease log kept short) and `mysql_tls`.
//!
//! `GOTRY_SKIP_MYSQL=1` marks these tests ignored; otherwise a missing server fails them.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use gotry_tenant_state::{
    open_lease_store, Error, LeaseOp, LeaseStore, ManualClock, MysqlLeaseStore, MysqlOptions,
    SystemWallClock, WallClock,
};
use gotry_test_support::conformance;
use gotry_test_support::mysql::{self as server, ScratchTables};
use gotry_test_support::mysql_fixture::{limited_user, options_at, Fixture};
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
