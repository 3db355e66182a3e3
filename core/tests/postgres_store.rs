//! The PostgreSQL lease store against a real server: the conformance suite and the shared
//! store vectors, whose clock decides, what the database itself refuses, a server that
//! cannot keep an acknowledged commit, and what holders see when the server is unreachable,
//! silent, or terminates the session.
//!
//! `GOTRY_SKIP_POSTGRES=1` marks these tests ignored; otherwise a missing server fails them
//! (`scripts/postgres.sh` starts the local one).
//!
//! The TLS tests (`tls_*`) run against a second server that only takes TLS connections,
//! named by `GOTRY_POSTGRES_TLS_URL`, `GOTRY_POSTGRES_TLS_CA` (the CA of its certificate,
//! which names `localhost` and `127.0.0.1`) and `GOTRY_POSTGRES_TLS_OTHER_CA` (an unrelated
//! CA): `eval "$(scripts/postgres-tls.sh)"` starts one and sets them, as `scripts/test.sh`
//! does. Without them those tests fail, unless `GOTRY_SKIP_POSTGRES=1` marks them ignored.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gotry_tenant_state::lease_store::postgres::{
    SslMode, TLS_CERTIFICATE, TLS_REQUIRED_BY_SERVER, UNSAFE_DURABILITY,
};
use gotry_tenant_state::{
    open_lease_store, Error, LeaseStore, ManualClock, PostgresLeaseStore, PostgresOptions,
};
use gotry_test_support::conformance;
use gotry_test_support::postgres::{self as server, encode, ScratchTables};
use gotry_test_support::proxy::{Mode, Proxy};
use gotry_test_support::tls::{self, tenure};

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
    // Every row a transaction writes carries its id (xmin): the batch's log entries and
    // the lease rows it renewed show one transaction, where a lease renewed on its own
    // would show a thousand.
    let [leases, log, _] = store.table_names();
    let transactions = server::execute(
        &url,
        &format!(
            "SELECT (SELECT count(DISTINCT xmin::text) || '/' || count(*) FROM \"{log}\" WHERE op = 'renew'),
                    (SELECT count(DISTINCT xmin::text) || '/' || count(*) FROM \"{leases}\")"
        ),
    )
    .unwrap();
    assert_eq!(
        transactions,
        [[Some("1/1001".to_owned()), Some("1/1000".to_owned())]],
        "transactions/rows of the batch's log entries and lease rows"
    );
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

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn silent_down_and_terminated_servers_fail_closed_within_the_timeout_and_service_resumes() {
    let url = server::server_url();
    let proxy = Proxy::start(&url);
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

    proxy.set(Mode::Silent);
    worst = worst.max(bounded("renew on a silent link", timeout, || {
        store.renew("k", "holder", epoch, 10_000).map(|_| ())
    }));
    worst = worst.max(bounded("renew on a silent link, again", timeout, || {
        store.renew("k", "holder", epoch, 10_000).map(|_| ())
    }));
    // Down cuts the connections held silent too.
    proxy.set(Mode::Down);
    worst = worst.max(bounded("renew with the server down", timeout, || {
        store.renew("k", "holder", epoch, 10_000).map(|_| ())
    }));
    worst = worst.max(bounded("open with the server down", timeout, || {
        PostgresLeaseStore::open(proxied.clone()).map(|_| ())
    }));
    proxy.set(Mode::Forward);
    // Service resumes on new connections.
    let renewed = store.renew("k", "holder", epoch, 10_000).unwrap();
    assert_eq!(renewed.record.epoch, epoch);

    // The server terminates every session of this store (pg_terminate_backend, as a
    // failover or an administrator does): the next call connects again and succeeds. Only
    // this store's: the sessions the proxy opened, not the stores of the tests running
    // beside this one.
    let ports: Vec<String> = proxy.upstream_ports().iter().map(u16::to_string).collect();
    let terminated = server::execute(
        &url,
        &format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE application_name = 'gotry-tenant-state' AND pid <> pg_backend_pid()
               AND client_port IN ({})",
            ports.join(", ")
        ),
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
fn open_acquire_and_a_keeper_batch_end_within_the_timeout_on_a_slow_or_silent_link() {
    // A round trip takes two delays, and every call below needs at least two round trips:
    // on this link none can succeed within the timeout, so each shows where it stops.
    const DELAY: Duration = Duration::from_millis(150);
    const TIMEOUT: Duration = Duration::from_millis(400);
    let url = server::server_url();
    let proxy = Proxy::start(&url);
    let mut scratch = ScratchTables::new(&url);
    let prefix = server::fresh_prefix();
    let direct = open(&mut scratch, &url, &prefix, 5_000);
    let keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    for key in &keys {
        direct.acquire(key, "keeper", 600_000).unwrap();
    }
    let batch: Vec<(&str, i64)> = keys.iter().map(|key| (key.as_str(), 1)).collect();
    let mut proxied = PostgresOptions::from_url(&url).unwrap();
    proxied.port = proxy.port;
    proxied.table_prefix = prefix.clone();
    proxied.timeout = TIMEOUT;
    let store = PostgresLeaseStore::open(proxied.clone()).expect("open on a fast link");
    // Each call starts on a connection the fast link left in the pool, so that the bound
    // is the call's own and not a new connection's.
    let slow_pooled = || {
        proxy.set(Mode::Forward);
        store.read("k0").unwrap();
        proxy.set(Mode::Delay(DELAY));
    };
    let mut worst = Duration::ZERO;
    slow_pooled();
    worst = worst.max(bounded("acquire on a slow link", TIMEOUT, || {
        store.acquire("slow", "o", 600_000).map(|_| ())
    }));
    slow_pooled();
    worst = worst.max(bounded("renew_batch of 20 on a slow link", TIMEOUT, || {
        store.renew_batch("keeper", 600_000, &batch).map(|_| ())
    }));
    worst = worst.max(bounded("open on a slow link", TIMEOUT, || {
        PostgresLeaseStore::open(proxied.clone()).map(|_| ())
    }));
    // The proxy takes the TCP connection and never says a word.
    proxy.set(Mode::Silent);
    worst = worst.max(bounded("open on a silent link", TIMEOUT, || {
        PostgresLeaseStore::open(proxied.clone()).map(|_| ())
    }));
    println!("worst call on a slow or silent link: {worst:?} of a {TIMEOUT:?} timeout");

    // With time enough, the same calls on the same slow link succeed.
    proxy.set(Mode::Delay(DELAY));
    let mut patient = proxied;
    patient.timeout = Duration::from_secs(10);
    let patient = PostgresLeaseStore::open(patient).expect("open with time enough");
    patient.acquire("patient", "o", 600_000).unwrap();
    let answers = patient.renew_batch("keeper", 600_000, &batch).unwrap();
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn a_row_locked_by_another_session_fails_closed_within_the_timeout_and_service_resumes() {
    let url = server::server_url();
    let mut scratch = ScratchTables::new(&url);
    let prefix = server::fresh_prefix();
    let store = open(&mut scratch, &url, &prefix, 700);
    store.acquire("k", "holder", 10_000).unwrap();
    // A session of the test's own holds the row locked for as long as the test likes: the
    // store's renew waits for it and fails closed within its timeout, and the lease is as
    // it was.
    let locker = server::Session::connect(&url).unwrap();
    locker
        .execute(&format!("BEGIN; SELECT * FROM \"{prefix}leases\" FOR UPDATE"))
        .unwrap();
    bounded("renew of a locked row", Duration::from_millis(700), || {
        store.renew("k", "holder", 1, 10_000).map(|_| ())
    });
    assert_eq!(store.history(Some("k")).unwrap().len(), 1);
    locker.execute("ROLLBACK").unwrap();
    assert_eq!(store.renew("k", "holder", 1, 10_000).unwrap().record.epoch, 1);
}

// ---------------------------------------------------------------------------------------
// TLS against the local server when it offers TLS (Debian's cluster does, with its
// self-signed "snakeoil" certificate): encrypted without a check, and a checked mode that
// refuses a certificate no trusted CA issued. The server of scripts/postgres-tls.sh, with
// a CA of its own, is the subject of the `tls_*` tests at the end.

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
    let proxy = Proxy::start(&url);
    let mut scratch = ScratchTables::new(&url);
    let prefix = server::fresh_prefix();
    let direct = open(&mut scratch, &url, &prefix, 5_000);
    let mut proxied = PostgresOptions::from_url(&url).unwrap();
    proxied.port = proxy.port;
    proxied.table_prefix = prefix.clone();
    let store = PostgresLeaseStore::open(proxied).expect("open through the proxy");
    proxy.set(Mode::CutAfterCommit);
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

// ---------------------------------------------------------------------------------------
// TLS, against the second server (only `hostssl` in its pg_hba.conf) of
// scripts/postgres-tls.sh. That server is thrown away with the run: the tables the tests
// make there are left to go with it.

const TLS_URL_VAR: &str = "GOTRY_POSTGRES_TLS_URL";
const TLS_CA_VAR: &str = "GOTRY_POSTGRES_TLS_CA";
const TLS_OTHER_CA_VAR: &str = "GOTRY_POSTGRES_TLS_OTHER_CA";

/// The TLS server of one test.
struct TlsServer {
    /// Its URL's parts: user, password, host, port, database.
    options: PostgresOptions,
    ca: String,
    other_ca: String,
}

impl TlsServer {
    /// The server, or a failure that says what to do when it is not set up.
    fn new() -> TlsServer {
        let [url, ca, other_ca] = tls::server_vars(
            [TLS_URL_VAR, TLS_CA_VAR, TLS_OTHER_CA_VAR],
            "PostgreSQL",
            "postgres-tls.sh",
            server::SKIP_VAR,
        );
        let options = PostgresOptions::from_url(&url).unwrap_or_else(|e| panic!("{TLS_URL_VAR}: {e}"));
        TlsServer {
            options,
            ca,
            other_ca,
        }
    }

    /// The server's URL with `host` and `port` instead of its own, fresh tables, and `query`.
    fn url_at(&self, host: &str, port: u16, query: &str) -> String {
        let o = &self.options;
        tls::url_at(
            "postgres",
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
        format!("sslmode={mode}&sslrootcert={}", encode(ca))
    }

    fn open(&self, url: &str) -> PostgresLeaseStore {
        let store =
            PostgresLeaseStore::open_url(url).unwrap_or_else(|e| panic!("{}: {e}", server::shown(url)));
        self.assert_no_secret(&format!("{store:?}"));
        store
    }

    /// Neither the password nor the user name is in `shown`; a failure says so without
    /// quoting the password itself.
    fn assert_no_secret(&self, shown: &str) {
        if let Some(password) = self.options.password.as_deref().filter(|p| !p.is_empty()) {
            assert!(
                !shown.contains(password),
                "the password is in: {}",
                shown.replace(password, "<password>")
            );
        }
        if let Some(user) = self.options.user.as_deref().filter(|u| !u.is_empty()) {
            assert!(
                !shown.contains(&format!("\"{user}\"")),
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
            &format!("sslmode={mode}"),
            |shown| self.assert_no_secret(shown),
        )
    }
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn tls_verify_full_with_the_servers_ca_works_end_to_end() {
    let tls = TlsServer::new();
    tls.assert_no_secret(&format!("{:?}", tls.options));
    let store = tls.open(&tls.url(&TlsServer::ca_query("verify-full", &tls.ca)));
    let shown = format!("{store:?}");
    assert!(shown.contains("VerifyFull"), "{shown}");
    tenure(&store);
    // Calls from several threads at once, on as many connections as they need, each of
    // them a handshake of its own.
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
    // With only sslrootcert, which means verify-full.
    let ca_only = PostgresOptions::from_url(&tls.url(&format!("sslrootcert={}", encode(&tls.ca)))).unwrap();
    assert_eq!(ca_only.effective_ssl_mode(), SslMode::VerifyFull);
    tenure(&PostgresLeaseStore::open(ca_only).unwrap());
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn tls_verify_full_takes_either_name_of_the_certificate_and_refuses_an_address_it_does_not_name() {
    let tls = TlsServer::new();
    let query = TlsServer::ca_query("verify-full", &tls.ca);
    // Its IP address SAN and its DNS name SAN, each checked as the host of the URL.
    for host in ["127.0.0.1", "localhost"] {
        tenure(&tls.open(&tls.url_at(host, tls.options.port, &query)));
    }
    // The right certificate, from the right CA, reached at an address it does not name.
    let other_address = Proxy::start_at("127.0.0.2", &tls.url(""));
    let message = tls.assert_refused(
        &tls.url_at("127.0.0.2", other_address.port, &query),
        TLS_CERTIFICATE,
        "verify-full",
    );
    assert!(
        message.contains("127.0.0.2") && message.contains("names the host of the URL"),
        "{message}"
    );
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn tls_require_without_a_ca_encrypts_without_checking() {
    let tls = TlsServer::new();
    // The server takes nothing but TLS, so a working store is an encrypted one.
    tenure(&tls.open(&tls.url("sslmode=require")));
    // Unchecked: an address the certificate does not name passes too.
    let other_address = Proxy::start_at("127.0.0.2", &tls.url(""));
    tenure(&tls.open(&tls.url_at("127.0.0.2", other_address.port, "sslmode=require")));
    // With sslrootcert, require checks the chain and not the name.
    tenure(&tls.open(&tls.url_at(
        "127.0.0.2",
        other_address.port,
        &TlsServer::ca_query("require", &tls.ca),
    )));
    let message = tls.assert_refused(
        &tls.url(&TlsServer::ca_query("require", &tls.other_ca)),
        TLS_CERTIFICATE,
        "require",
    );
    assert!(message.contains("check sslrootcert"), "{message}");
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn tls_verify_full_with_another_ca_is_refused_naming_sslrootcert() {
    let tls = TlsServer::new();
    let message = tls.assert_refused(
        &tls.url(&TlsServer::ca_query("verify-full", &tls.other_ca)),
        TLS_CERTIFICATE,
        "verify-full",
    );
    assert!(
        message.contains("UnknownIssuer") && message.contains("check sslrootcert"),
        "{message}"
    );
    // Without sslrootcert only the public web roots are trusted, and they did not sign it.
    tls.assert_refused(&tls.url("sslmode=verify-full"), TLS_CERTIFICATE, "verify-full");
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn tls_disable_is_refused_by_a_server_that_accepts_only_tls() {
    let tls = TlsServer::new();
    let message = tls.assert_refused(&tls.url("sslmode=disable"), TLS_REQUIRED_BY_SERVER, "disable");
    assert!(
        message.contains("accepts only TLS connections from here: use sslmode=require or verify-full"),
        "{message}"
    );
    // Loopback without sslmode is disable, so the same.
    let loopback_default = tls.url("");
    assert_eq!(
        PostgresOptions::from_url(&loopback_default)
            .unwrap()
            .effective_ssl_mode(),
        SslMode::Disable
    );
    tls.assert_refused(&loopback_default, TLS_REQUIRED_BY_SERVER, "disable");
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn tls_a_wrong_password_is_refused_and_shown_nowhere() {
    let tls = TlsServer::new();
    let wrong = "Wrong-pw-4711";
    for query in [
        TlsServer::ca_query("verify-full", &tls.ca),
        "sslmode=require".to_owned(),
    ] {
        let mut options = PostgresOptions::from_url(&tls.url(&query)).unwrap();
        options.password = Some(wrong.into());
        let error = PostgresLeaseStore::open(options)
            .map(|_| ())
            .expect_err("a wrong password");
        let shown = format!("{error} | {error:?}");
        assert!(
            !shown.contains(wrong),
            "the password is in: {}",
            shown.replace(wrong, "<password>")
        );
        tls.assert_no_secret(&shown);
        assert!(
            matches!(&error, Error::Storage { code, .. } if code == "POSTGRES_INVALID_PASSWORD"),
            "{query}: {shown}"
        );
    }
}
