//! The PostgreSQL lease store against a real server: the conformance suite and the shared
//! store vectors, whose clock decides, what the database itself refuses, a server that
//! cannot keep an acknowledged commit, and what holders see when the server is unreachable,
//! silent, or terminates the session.
//!
//! `GOTRY_SKIP_POSTGRES=1` marks these tests ignored; otherwise a missing server fails them
//! (`scripts/postgres.sh` starts the local one).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gotry_tenant_state::lease_store::postgres::UNSAFE_DURABILITY;
use gotry_tenant_state::{
    open_lease_store, Error, LeaseStore, ManualClock, PostgresLeaseStore, PostgresOptions,
};
use gotry_test_support::conformance;
use gotry_test_support::postgres::{self as server, ScratchTables};

fn open(scratch: &mut ScratchTables, url: &str, prefix: &str, timeout_ms: u64) -> PostgresLeaseStore {
    let mut options = PostgresOptions::from_url(url).expect("url");
    options.table_prefix = prefix.to_owned();
    options.timeout = Duration::from_millis(timeout_ms);
    scratch.add(prefix);
    PostgresLeaseStore::open(options).unwrap_or_else(|e| server::no_server(url, &e))
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn conformance_and_shared_vectors_on_the_server() {
    let url = server::server_url();
    let scratch = Mutex::new(ScratchTables::new(&url));
    conformance::run_all(&|clock: Arc<ManualClock>| {
        let mut options = PostgresOptions::from_url(&url).expect("url");
        options.table_prefix = server::fresh_prefix();
        options.clock = Some(clock);
        scratch.lock().expect("scratch").add(&options.table_prefix);
        let store = PostgresLeaseStore::open(options).unwrap_or_else(|e| server::no_server(&url, &e));
        Arc::new(store)
    });
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn decisions_follow_the_server_clock_and_every_url_spelling_opens_the_store() {
    let url = server::server_url();
    let mut scratch = ScratchTables::new(&url);
    let prefix = server::fresh_prefix();
    scratch.add(&prefix);
    let first = open_lease_store(&server::with_option(&url, "prefix", &prefix)).expect("postgres://");
    let other = url.replacen("postgres://", "postgresql://", 1);
    let second = open_lease_store(&server::with_option(&other, "prefix", &prefix)).expect("postgresql://");
    let server_s = |sql: &str| -> i64 {
        server::execute(&url, sql).unwrap()[0][0]
            .as_deref()
            .unwrap()
            .parse()
            .unwrap()
    };
    let before = server_s("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8");
    let grant = first.acquire("tenant-a", "replica-1", 60_000).unwrap();
    let after = server_s("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8");
    let granted_at = grant.record.lease_until_ms - 60_000;
    assert!(
        (before..=after).contains(&granted_at),
        "{before} {granted_at} {after}"
    );
    match second.acquire("tenant-a", "replica-2", 60_000) {
        Err(Error::LeaseHeld { record }) => assert_eq!(record, grant.record),
        other => panic!("expected LEASE_HELD, got {other:?}"),
    }
    // Expiry on the server's clock: a 100 ms lease is free for the other client once the
    // server's clock has passed it.
    first.acquire("short", "replica-1", 100).unwrap();
    loop {
        match second.acquire("short", "replica-2", 1_000) {
            Ok(grant) => {
                let log = second.history(Some("short")).unwrap();
                assert!(log[1].at_ms >= log[0].at_ms + 100, "{log:?}");
                assert_eq!(grant.record.epoch, 2);
                break;
            }
            Err(Error::LeaseHeld { .. }) => std::thread::sleep(Duration::from_millis(10)),
            Err(other) => panic!("{other:?}"),
        }
    }
    // Keys are bytes: case, trailing spaces and NUL are all their own keys.
    for key in ["K", "k", "k ", "k\0x"] {
        assert_eq!(
            first.acquire(key, "o", 60_000).unwrap().record.epoch,
            1,
            "{key:?}"
        );
    }
    assert_eq!(first.list("k").unwrap().len(), 3);
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn the_database_refuses_what_the_rules_forbid() {
    let url = server::server_url();
    let mut scratch = ScratchTables::new(&url);
    let p = server::fresh_prefix();
    let store = open(&mut scratch, &url, &p, 2_000);
    store.acquire("k", "a", 60_000).unwrap();
    store.renew("k", "a", 1, 60_000).unwrap();
    for (sql, says) in [
        (format!("UPDATE \"{p}leases\" SET epoch = 3"), "exactly one"),
        (format!("UPDATE \"{p}leases\" SET epoch = 0"), "exactly one"),
        (
            format!("UPDATE \"{p}leases\" SET owner = 'b'::bytea"),
            "one owner",
        ),
        (
            format!("UPDATE \"{p}leases\" SET forgotten_at_epoch = -1"),
            "never moves back",
        ),
        (format!("DELETE FROM \"{p}leases\""), "never deleted"),
        (format!("TRUNCATE \"{p}leases\""), "never deleted"),
        (format!("UPDATE \"{p}lease_log\" SET epoch = 9"), "append-only"),
        (
            format!("DELETE FROM \"{p}lease_log\" WHERE op = 'acquire'"),
            "only renewals",
        ),
        (format!("TRUNCATE \"{p}lease_log\""), "append-only"),
    ] {
        let error = server::execute(&url, &sql).expect_err(&sql);
        assert!(
            error.starts_with("P0001") && error.contains(says),
            "{sql}: {error}"
        );
    }
    // What the rules allow passes the triggers: a renewal may leave the log.
    server::execute(&url, &format!("DELETE FROM \"{p}lease_log\" WHERE op = 'renew'")).unwrap();
    assert_eq!(store.read("k").unwrap().unwrap().epoch, 1);
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn a_server_that_can_lose_an_acknowledged_commit_is_refused() {
    let url = server::server_url();
    let role = format!("gotry_async_{}", std::process::id());
    server::execute(
        &url,
        &format!("CREATE ROLE {role} LOGIN; ALTER ROLE {role} SET synchronous_commit = off"),
    )
    .unwrap();
    let options = PostgresOptions::from_url(&url).unwrap();
    let async_url = format!(
        "postgres://{role}@{}:{}/{}",
        options.host, options.port, options.database
    );
    let result = PostgresLeaseStore::open_url(&async_url);
    server::execute(&url, &format!("DROP ROLE {role}")).unwrap();
    match result {
        Err(Error::Storage { code, message }) => {
            assert_eq!(code, UNSAFE_DURABILITY);
            assert!(message.contains("synchronous_commit = off"), "{message}");
        }
        other => panic!("expected {UNSAFE_DURABILITY}, got {:?}", other.map(|_| ())),
    }
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn batches_renew_each_lease_in_one_transaction_and_racers_grant_one_epoch() {
    let url = server::server_url();
    let mut scratch = ScratchTables::new(&url);
    let prefix = server::fresh_prefix();
    let store = Arc::new(open(&mut scratch, &url, &prefix, 5_000));
    let keys: Vec<String> = (0..1_000).map(|n| format!("tenant-{n}")).collect();
    for key in &keys {
        store.acquire(key, "keeper", 60_000).unwrap();
    }
    let leases: Vec<(&str, i64)> = keys.iter().map(|k| (k.as_str(), 1)).collect();
    let mut with_duplicate = leases.clone();
    with_duplicate.push(("tenant-0", 1));
    with_duplicate.push(("missing", 1));
    let answers = store.renew_batch("keeper", 60_000, &with_duplicate).unwrap();
    assert_eq!(answers.len(), 1_002);
    assert!(answers[..1_001].iter().all(|a| a.is_ok()));
    assert!(matches!(answers[1_001], Err(Error::LeaseLost { .. })));
    assert_eq!(store.history(Some("tenant-0")).unwrap().len(), 3);
    // Racers on a new key, each on a store of its own: one epoch, one winner.
    let racers: Vec<_> = (0..8)
        .map(|n| {
            let store = open(&mut scratch, &url, &prefix, 5_000);
            std::thread::spawn(move || store.acquire("race", &format!("r{n}"), 60_000).is_ok())
        })
        .collect();
    let won = racers
        .into_iter()
        .filter_map(|r| r.join().ok())
        .filter(|won| *won)
        .count();
    assert_eq!(won, 1);
    assert_eq!(store.read("race").unwrap().unwrap().epoch, 1);
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn credentials_appear_in_no_error_and_no_debug_output() {
    let url = server::server_url();
    let options = PostgresOptions::from_url(&url).unwrap();
    let wrong = format!(
        "postgres://no_such_user_x:s3cret@{}:{}/{}",
        options.host, options.port, options.database
    );
    let error = PostgresLeaseStore::open_url(&wrong).expect_err("unknown role");
    let shown = format!("{error} {error:?}");
    assert!(
        !shown.contains("no_such_user_x") && !shown.contains("s3cret"),
        "{shown}"
    );
    assert!(
        matches!(error, Error::Storage { ref code, .. } if code.starts_with("POSTGRES_")),
        "{shown}"
    );
    let options = PostgresOptions::from_url("postgres://alice:s3cret@db.internal/leases").unwrap();
    let shown = format!("{options:?}");
    assert!(
        shown.contains("db.internal:5432/leases") && shown.contains("Require"),
        "{shown}"
    );
    assert!(!shown.contains("alice") && !shown.contains("s3cret"), "{shown}");
}

// ---------------------------------------------------------------------------------------
// Outages.

/// The worst time a failing call took, against its timeout.
fn bounded(what: &str, timeout: Duration, call: impl FnOnce() -> gotry_tenant_state::Result<()>) -> Duration {
    let started = Instant::now();
    let result = call();
    let took = started.elapsed();
    assert!(
        matches!(result, Err(Error::LeaseStoreUnavailable { .. })),
        "{what}: expected LEASE_STORE_UNAVAILABLE, got {result:?}"
    );
    // The bound the store promises, and the moment it takes to notice.
    assert!(
        took < timeout + Duration::from_millis(250),
        "{what} took {took:?}"
    );
    println!("{what}: failed closed after {took:?} (timeout {timeout:?})");
    took
}

#[test]
fn nothing_listening_is_unavailable_within_the_timeout() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let timeout = Duration::from_millis(300);
    bounded("open with nothing listening", timeout, || {
        PostgresLeaseStore::open_url(&format!(
            "postgres://postgres@127.0.0.1:{port}/test?timeout_ms=300"
        ))
        .map(|_| ())
    });
}

/// A TCP proxy that forwards, or goes silent (holds every byte), or down (cuts every
/// connection and refuses new ones).
struct Proxy {
    port: u16,
    /// The next COMMIT goes to the server, and its answer never comes back: the client's
    /// connection is cut instead.
    cut_after_commit: Arc<AtomicBool>,
    silent: Arc<AtomicBool>,
    down: Arc<AtomicBool>,
    sockets: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let silent = Arc::new(AtomicBool::new(false));
        let cut_after_commit = Arc::new(AtomicBool::new(false));
        let cut = Arc::clone(&cut_after_commit);
        let down = Arc::new(AtomicBool::new(false));
        let sockets = Arc::new(Mutex::new(Vec::new()));
        let (s, d, k) = (Arc::clone(&silent), Arc::clone(&down), Arc::clone(&sockets));
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if d.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                for socket in [&client, &server] {
                    k.lock().unwrap().push(socket.try_clone().unwrap());
                }
                // Set once this connection's COMMIT went through to the server.
                let committed = Arc::new(AtomicBool::new(false));
                for (mut from, mut to, to_server) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap(), true),
                    (server, client.try_clone().unwrap(), false),
                ] {
                    let s = Arc::clone(&s);
                    let (cut, committed) = (Arc::clone(&cut), Arc::clone(&committed));
                    std::thread::spawn(move || {
                        let mut buffer = [0u8; 16 * 1024];
                        while let Ok(n) = from.read(&mut buffer) {
                            if n == 0 {
                                break;
                            }
                            while s.load(Ordering::SeqCst) {
                                std::thread::sleep(Duration::from_millis(10));
                            }
                            // A simple-protocol Query message of the statement COMMIT.
                            if to_server
                                && buffer[..n].windows(7).any(|w| w == b"COMMIT\0")
                                && cut.swap(false, Ordering::SeqCst)
                            {
                                committed.store(true, Ordering::SeqCst);
                            }
                            // The server's answer to it (CommandComplete, tag COMMIT): the
                            // commit is done, and the client never hears so. Only the
                            // client's side is cut; answers before it pass as they are.
                            if !to_server
                                && committed.load(Ordering::SeqCst)
                                && buffer[..n].windows(7).any(|w| w == b"COMMIT\0")
                            {
                                let _ = to.shutdown(Shutdown::Both);
                                break;
                            }
                            if to.write_all(&buffer[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        Proxy {
            port,
            cut_after_commit,
            silent,
            down,
            sockets,
        }
    }

    fn cut_all(&self) {
        for socket in self.sockets.lock().unwrap().drain(..) {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn silent_down_and_terminated_servers_fail_closed_within_the_timeout_and_service_resumes() {
    let url = server::server_url();
    let options = PostgresOptions::from_url(&url).unwrap();
    let proxy = Proxy::start(format!("{}:{}", options.host, options.port));
    let mut scratch = ScratchTables::new(&url);
    let prefix = server::fresh_prefix();
    // The schema first, directly: the short timeout below bounds the whole open.
    open(&mut scratch, &url, &prefix, 5_000);
    let timeout = Duration::from_millis(500);
    let mut proxied = PostgresOptions::from_url(&url).unwrap();
    proxied.port = proxy.port;
    proxied.table_prefix = prefix.clone();
    proxied.timeout = timeout;
    let store = PostgresLeaseStore::open(proxied.clone()).expect("open through the proxy");
    let grant = store.acquire("k", "holder", 10_000).unwrap();
    let epoch = grant.record.epoch;
    let mut worst = Duration::ZERO;

    proxy.silent.store(true, Ordering::SeqCst);
    worst = worst.max(bounded("renew on a silent link", timeout, || {
        store.renew("k", "holder", epoch, 10_000).map(|_| ())
    }));
    worst = worst.max(bounded("renew on a silent link, again", timeout, || {
        store.renew("k", "holder", epoch, 10_000).map(|_| ())
    }));
    proxy.silent.store(false, Ordering::SeqCst);
    proxy.cut_all();

    proxy.down.store(true, Ordering::SeqCst);
    proxy.cut_all();
    worst = worst.max(bounded("renew with the server down", timeout, || {
        store.renew("k", "holder", epoch, 10_000).map(|_| ())
    }));
    worst = worst.max(bounded("open with the server down", timeout, || {
        PostgresLeaseStore::open(proxied.clone()).map(|_| ())
    }));
    proxy.down.store(false, Ordering::SeqCst);
    // Service resumes on new connections.
    let renewed = store.renew("k", "holder", epoch, 10_000).unwrap();
    assert_eq!(renewed.record.epoch, epoch);

    // The server terminates every session of this store (pg_terminate_backend, as a
    // failover or an administrator does): the next call connects again and succeeds.
    let terminated = server::execute(
        &url,
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
         WHERE application_name = 'gotry-tenant-state' AND pid <> pg_backend_pid()",
    )
    .unwrap();
    assert_ne!(terminated[0][0].as_deref(), Some("0"));
    store.renew("k", "holder", epoch, 10_000).unwrap();
    println!("worst failing call: {worst:?} of a {timeout:?} timeout");
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn a_transaction_cut_mid_way_is_never_reported_and_its_locks_go_with_it() {
    let url = server::server_url();
    let mut scratch = ScratchTables::new(&url);
    let prefix = server::fresh_prefix();
    let store = open(&mut scratch, &url, &prefix, 700);
    store.acquire("k", "holder", 10_000).unwrap();
    // A session of the test's own holds the row locked: the store's renew waits for it and
    // fails closed within its timeout, and the lease is as it was.
    let locker = {
        let url = url.clone();
        let prefix = prefix.clone();
        std::thread::spawn(move || {
            server::execute(
                &url,
                &format!("BEGIN; SELECT * FROM \"{prefix}leases\" FOR UPDATE; SELECT pg_sleep(1.5); COMMIT"),
            )
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    bounded("renew of a locked row", Duration::from_millis(700), || {
        store.renew("k", "holder", 1, 10_000).map(|_| ())
    });
    locker.join().unwrap().unwrap();
    assert_eq!(store.renew("k", "holder", 1, 10_000).unwrap().record.epoch, 1);
}

// ---------------------------------------------------------------------------------------
// TLS against the local server when it offers TLS (Debian's cluster does, with its
// self-signed "snakeoil" certificate): encrypted without a check, and a checked mode that
// refuses a certificate no trusted CA issued. A second server with a CA of its own is not
// started here yet.

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn tls_require_encrypts_and_verify_full_refuses_an_untrusted_certificate() {
    let url = server::server_url();
    let offered = server::execute(&url, "SHOW ssl").unwrap();
    assert_eq!(
        offered[0][0].as_deref(),
        Some("on"),
        "these checks need a server that offers TLS (ssl = on)"
    );
    let mut scratch = ScratchTables::new(&url);
    let prefix = server::fresh_prefix();
    open(&mut scratch, &url, &prefix, 5_000);
    let tls_url = server::with_option(
        &server::with_option(&url, "prefix", &prefix),
        "sslmode",
        "require",
    );
    let store = PostgresLeaseStore::open_url(&tls_url).expect("sslmode=require");
    store.acquire("k", "o", 10_000).unwrap();
    let encrypted = server::execute(
        &url,
        "SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid)
         WHERE application_name = 'gotry-tenant-state' AND ssl",
    )
    .unwrap();
    assert_ne!(
        encrypted[0][0].as_deref(),
        Some("0"),
        "no session of the store uses TLS"
    );
    let verify = server::with_option(&tls_url, "sslmode", "verify-full").replace("sslmode=require&", "");
    match PostgresLeaseStore::open_url(&verify) {
        Err(Error::LeaseStoreUnavailable { message }) => assert!(
            message.starts_with(gotry_tenant_state::lease_store::postgres::TLS_CERTIFICATE)
                && message.contains("sslmode=verify-full"),
            "{message}"
        ),
        other => panic!(
            "expected the certificate to be refused, got {:?}",
            other.map(|_| ())
        ),
    }
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn compacting_keeps_every_acquire_release_and_the_last_renewal_of_each_tenure() {
    let url = server::server_url();
    let mut scratch = ScratchTables::new(&url);
    let prefix = server::fresh_prefix();
    let store = open(&mut scratch, &url, &prefix, 5_000)
        .with_log_retention(Duration::ZERO)
        .unwrap();
    store.acquire("k", "a", 60_000).unwrap();
    for _ in 0..5 {
        store.renew("k", "a", 1, 60_000).unwrap();
    }
    store.release("k", "a", 1).unwrap();
    store.acquire("k", "b", 60_000).unwrap();
    store.renew("k", "b", 2, 60_000).unwrap();
    std::thread::sleep(Duration::from_millis(5));
    store.compact_log().unwrap();
    let ops: Vec<(&str, i64)> = store
        .history(Some("k"))
        .unwrap()
        .iter()
        .map(|e| (e.op.as_str(), e.epoch))
        .collect();
    assert_eq!(
        ops,
        [
            ("acquire", 1),
            ("renew", 1),
            ("release", 1),
            ("acquire", 2),
            ("renew", 2)
        ]
    );
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn a_commit_whose_answer_is_lost_is_never_reported_as_success() {
    let url = server::server_url();
    let options = PostgresOptions::from_url(&url).unwrap();
    let proxy = Proxy::start(format!("{}:{}", options.host, options.port));
    let mut scratch = ScratchTables::new(&url);
    let prefix = server::fresh_prefix();
    let direct = open(&mut scratch, &url, &prefix, 5_000);
    let mut proxied = PostgresOptions::from_url(&url).unwrap();
    proxied.port = proxy.port;
    proxied.table_prefix = prefix.clone();
    let store = PostgresLeaseStore::open(proxied).expect("open through the proxy");
    proxy.cut_after_commit.store(true, Ordering::SeqCst);
    match store.acquire("k", "holder", 10_000) {
        Err(Error::LeaseStoreUnavailable { message }) => {
            assert!(message.contains("may or may not have been applied"), "{message}")
        }
        other => panic!("expected LEASE_STORE_UNAVAILABLE, got {other:?}"),
    }
    // It was applied all the same, and runs out unused; nothing was retried on top of it.
    let record = direct.read("k").unwrap().expect("the acquire committed");
    assert_eq!((record.owner.as_str(), record.epoch), ("holder", 1));
    assert_eq!(direct.history(Some("k")).unwrap().len(), 1);
}
