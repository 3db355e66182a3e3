//! The core's metrics, read back from the text that every door serves: each family is
//! driven through the real path that counts it (a SQLite store, a keeper's rounds, holders'
//! gates). The registry is the process's, so each test reads deltas and the tests of this
//! file run one at a time.

use std::path::Path;
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::Duration;

use gotry_tenant_state::{
    metrics, open_durable_store, CopyPolicy, DirectoryDurableStore, Durability, DurableStore, EpochCopies,
    Error, KeeperOptions, LeaseKeeper, LeaseOptions, LeaseStore, ManualClock, RouterEvent, RouterOptions,
    SqliteLeaseStore, TenantHandle, TenantLease, TenantRouter, DEFAULT_KEEP_COPIES,
};

const TTL: i64 = 1_000;
const MARGIN: i64 = 100;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The value of one series (name and labels exactly as written), or 0 when it is absent.
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
        .unwrap_or(0.0)
}

fn ops(store: &str, op: &str, outcome: &str) -> String {
    format!("gotry_tenant_lease_operations_total{{store=\"{store}\",op=\"{op}\",outcome=\"{outcome}\"}}")
}

/// The differences of `series` between two readings of the text.
fn deltas(before: &str, after: &str, series: &[&str]) -> Vec<f64> {
    series
        .iter()
        .map(|s| value(after, s) - value(before, s))
        .collect()
}

struct Fixture {
    _dir: tempfile::TempDir,
    wall: Arc<ManualClock>,
    mono: Arc<ManualClock>,
    store: Arc<SqliteLeaseStore>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let wall = Arc::new(ManualClock::new(1_000_000));
        let store = SqliteLeaseStore::open(dir.path().join("leases.db"))
            .unwrap()
            .with_clock(wall.clone());
        Fixture {
            _dir: dir,
            wall,
            mono: Arc::new(ManualClock::new(0)),
            store: Arc::new(store),
        }
    }

    fn keeper(&self) -> LeaseKeeper {
        let mut options = KeeperOptions::new(self.store.clone(), "replica-a", TTL, MARGIN);
        options.clock = self.mono.clone();
        options.renew_fraction = 0.25;
        LeaseKeeper::without_thread(options).unwrap()
    }

    fn at(&self, mono_ms: i64) {
        let delta = mono_ms - self.mono.get();
        self.mono.advance(delta).unwrap();
        self.wall.advance(delta).unwrap();
    }

    /// The same file, read by a process whose wall clock is an hour ahead.
    fn an_hour_ahead(&self) -> SqliteLeaseStore {
        self.store
            .with_clock(Arc::new(ManualClock::new(self.wall.get() + 3_600_000)))
    }
}

#[test]
fn a_lost_lease_counts_its_store_outcomes_its_fence_and_the_keepers_round() {
    let _serial = serial();
    let f = Fixture::new();
    let keeper = f.keeper();
    let series = [
        ops("sqlite", "acquire", "granted"),
        ops("sqlite", "acquire", "held"),
        ops("sqlite", "renew_batch", "granted"),
        ops("sqlite", "renew_batch", "lost"),
        "gotry_tenant_leases_lost_total".to_owned(),
        "gotry_tenant_fences_total{reason=\"lease_lost\"}".to_owned(),
        "gotry_tenant_keeper_round_duration_seconds_count".to_owned(),
        "gotry_tenant_keeper_batch_size_sum".to_owned(),
        "gotry_tenant_store_operation_duration_seconds_count{store=\"sqlite\",op=\"renew_batch\"}".to_owned(),
    ];
    let series: Vec<&str> = series.iter().map(String::as_str).collect();
    let before = metrics::encode();

    let a = keeper.acquire("a").unwrap();
    let _b = keeper.acquire("b").unwrap();
    let other = f.an_hour_ahead();
    other.acquire("a", "replica-b", TTL).unwrap();
    assert!(f.store.acquire("b", "replica-b", TTL).is_err());
    f.at(250);
    let round = keeper.tick().unwrap();
    assert_eq!((round.renewed, round.lost), (1, 1));
    assert!(!a.is_held());

    let after = metrics::encode();
    // Acquires: a and b by the keeper, a by the other process; b was held.
    assert_eq!(
        deltas(&before, &after, &series),
        vec![3.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 1.0]
    );
}

#[test]
fn a_release_and_a_fence_passed_locally_are_counted_by_reason() {
    let _serial = serial();
    let f = Fixture::new();
    let keeper = f.keeper();
    let series = [
        "gotry_tenant_fences_total{reason=\"lease_released\"}",
        "gotry_tenant_fences_total{reason=\"lease_expired_locally\"}",
    ];
    let before = metrics::encode();
    let lease = keeper.acquire("c").unwrap();
    // No round ran until past the fence (900 ms after the grant): the gate closed locally.
    f.at(950);
    assert!(!lease.is_held());
    keeper.tick().unwrap();
    lease.release().unwrap();
    let after = metrics::encode();
    assert_eq!(deltas(&before, &after, &series), vec![1.0, 1.0]);
    assert!(
        value(&after, &ops("sqlite", "release", "granted")) >= 1.0,
        "{after}"
    );
}

#[test]
fn every_family_is_described_and_every_sample_is_well_formed() {
    let text = metrics::encode();
    for family in [
        ("gotry_tenant_lease_operations_total", "counter"),
        ("gotry_tenant_store_operation_duration_seconds", "histogram"),
        ("gotry_tenant_fences_total", "counter"),
        ("gotry_tenant_leases_lost_total", "counter"),
        ("gotry_tenant_keeper_round_duration_seconds", "histogram"),
        ("gotry_tenant_keeper_batch_size", "histogram"),
        ("gotry_tenant_router_tenants", "gauge"),
        ("gotry_tenant_router_calls_in_flight", "gauge"),
        ("gotry_tenant_router_refusals_total", "counter"),
        ("gotry_tenant_router_handoffs_total", "counter"),
        ("gotry_tenant_copies_total", "counter"),
        ("gotry_tenant_copy_bytes_total", "counter"),
        ("gotry_tenant_copy_duration_seconds", "histogram"),
        ("gotry_tenant_copy_lag_seconds", "gauge"),
        ("gotry_tenant_copy_lag_writes", "gauge"),
        ("gotry_tenant_restores_total", "counter"),
        ("gotry_tenant_restore_skipped_copies_total", "counter"),
        ("gotry_tenant_router_tenant_state", "gauge"),
        ("gotry_tenant_router_tenant_calls_in_flight", "gauge"),
        ("gotry_tenant_router_tenant_copy_lag_seconds", "gauge"),
        ("gotry_tenant_router_tenant_copy_lag_writes", "gauge"),
    ] {
        assert!(
            text.contains(&format!("# HELP {} ", family.0)),
            "{} has no help",
            family.0
        );
        assert!(
            text.contains(&format!("# TYPE {} {}\n", family.0, family.1)),
            "{} is not a {}",
            family.0,
            family.1
        );
    }
    let sample =
        regex::Regex::new(r#"^[a-z_]+(\{[a-z_]+="[^"\\]*"(,[a-z_]+="[^"\\]*")*\})? (-?[0-9.e+-]+|\+Inf)$"#)
            .unwrap();
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        assert!(sample.is_match(line), "not a sample: {line}");
    }
    assert_eq!(metrics::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
}

// ---- the router's families, driven through real routers ----

const ORG: &str = "acme";
const T1: &str = "t-0123456789abcdef0123456789abcdef";
const T2: &str = "t-11111111111111111111111111111111";
const T3: &str = "t-22222222222222222222222222222222";

fn key(tenant: &str) -> String {
    format!("{ORG}/{tenant}")
}

/// The options of a router of `replica` on the SQLite lease store in `dir` and the given
/// durable store.
fn options(
    dir: &Path,
    durable: Arc<dyn DurableStore>,
    replica: &str,
    durability: Durability,
) -> RouterOptions {
    let leases: Arc<dyn LeaseStore> = Arc::new(SqliteLeaseStore::open(dir.join("leases.db")).unwrap());
    let mut options = RouterOptions::new(leases, durable, dir.join(replica), replica.to_owned(), 3_000, 500);
    options.copy_policy = CopyPolicy {
        // Async copies wait an hour: only handoffs (and Strict calls) copy in these tests.
        interval: Duration::from_secs(3_600),
        durability,
    };
    options
}

fn router(dir: &Path, durable: Arc<dyn DurableStore>, replica: &str, durability: Durability) -> TenantRouter {
    TenantRouter::start(options(dir, durable, replica, durability)).unwrap()
}

/// A call that appends to the tenant's ledger, a real SQLite file.
fn append(handle: &TenantHandle) -> gotry_tenant_state::Result<()> {
    let path = handle.root.join("gotry-state/gotry-state.db");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let db = rusqlite::Connection::open(path).unwrap();
    db.execute_batch("CREATE TABLE IF NOT EXISTS entries (text TEXT); INSERT INTO entries VALUES ('x')")
        .unwrap();
    Ok(())
}

#[test]
fn a_drain_timeout_a_draining_refusal_calls_in_flight_and_copy_lag_are_counted() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let durable: Arc<dyn DurableStore> =
        Arc::new(DirectoryDurableStore::open(dir.path().join("durable")).unwrap());
    let series = [
        "gotry_tenant_router_tenants{state=\"serving\"}",
        "gotry_tenant_router_calls_in_flight",
        "gotry_tenant_router_refusals_total{code=\"DRAINING\"}",
        "gotry_tenant_router_refusals_total{code=\"DRAIN_TIMEOUT\"}",
        "gotry_tenant_router_handoffs_total{outcome=\"drain_timeout\"}",
        "gotry_tenant_router_handoffs_total{outcome=\"released\"}",
        "gotry_tenant_restores_total{outcome=\"empty\"}",
        "gotry_tenant_copies_total{outcome=\"written\"}",
        "gotry_tenant_copy_duration_seconds_count",
    ];
    let before = metrics::encode();
    let mut options = options(dir.path(), durable, "replica-a", Durability::Async);
    let (told, drains) = mpsc::channel();
    options.on_event = Some(Arc::new(move |event| {
        if let RouterEvent::Draining { key, .. } = event {
            let _ = told.send(key);
        }
    }));
    let router = Arc::new(TenantRouter::start(options).unwrap());
    // Not a time limit on the router: a bound on a test that would otherwise hang.
    let drained = || {
        drains
            .recv_timeout(Duration::from_secs(60))
            .expect("no draining event within 60 s")
    };
    router.open(ORG, T1).unwrap();
    for _ in 0..3 {
        router.run(&key(T1), append).unwrap();
    }
    let call = router.begin(&key(T1)).unwrap();
    let serving = metrics::encode();
    assert_eq!(
        deltas(&before, &serving, &series[..2]),
        vec![1.0, 1.0],
        "one tenant serving, one call in flight"
    );
    // Three acknowledged writes, no copy yet (the copier waits an hour).
    assert_eq!(value(&serving, "gotry_tenant_copy_lag_writes"), 3.0);
    assert!(
        value(&serving, "gotry_tenant_copy_lag_seconds") > 0.0,
        "{serving}"
    );

    let timed_out = router.handoff(&key(T1), Duration::from_millis(20));
    assert!(
        matches!(timed_out, Err(Error::DrainTimeout { .. })),
        "{timed_out:?}"
    );
    assert_eq!(drained(), key(T1), "the drain that timed out was told");
    // A handoff that waits for the call: meanwhile the tenant is draining and refuses calls.
    let handoff = {
        let router = router.clone();
        std::thread::spawn(move || router.handoff(&key(T1), Duration::from_secs(600)))
    };
    assert_eq!(drained(), key(T1));
    assert!(matches!(router.begin(&key(T1)), Err(Error::Draining { .. })));
    drop(call);
    handoff.join().unwrap().unwrap();

    let after = metrics::encode();
    assert_eq!(
        deltas(&before, &after, &series),
        vec![0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        "{after}"
    );
    assert_eq!(value(&after, "gotry_tenant_copy_lag_writes"), 0.0);
}

#[test]
fn a_restore_that_skips_a_corrupt_copy_counts_it_by_reason() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let durable: Arc<dyn DurableStore> =
        Arc::new(DirectoryDurableStore::open(dir.path().join("durable")).unwrap());
    let series = [
        "gotry_tenant_restores_total{outcome=\"empty\"}",
        "gotry_tenant_restores_total{outcome=\"restored\"}",
        "gotry_tenant_restore_skipped_copies_total{reason=\"manifest\"}",
        "gotry_tenant_copies_total{outcome=\"written\"}",
    ];
    let before = metrics::encode();
    {
        // Strict: every call is copied before it is acknowledged.
        let a = router(dir.path(), durable.clone(), "replica-a", Durability::Strict);
        a.open(ORG, T2).unwrap();
        a.run(&key(T2), append).unwrap();
        a.run(&key(T2), append).unwrap();
        a.handoff(&key(T2), Duration::from_secs(600)).unwrap();
    }
    // The newest copy's manifest, made unreadable.
    let mut manifests: Vec<std::path::PathBuf> = walk(&dir.path().join("durable"))
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n != "tenure.json" && n.to_string_lossy().ends_with(".json"))
        })
        .collect();
    manifests.sort();
    let newest = manifests.last().expect("the copies wrote manifests");
    std::fs::write(newest, b"{ not a manifest").unwrap();

    let b = router(dir.path(), durable, "replica-b", Durability::Strict);
    let handle = b.open(ORG, T2).unwrap();
    assert!(handle.restored_from.is_some());
    let after = metrics::encode();
    // A's open found nothing; B's skipped the newest copy and restored the one before.
    assert_eq!(
        deltas(&before, &after, &series),
        vec![1.0, 1.0, 1.0, 3.0],
        "{after}"
    );
    assert!(value(&after, "gotry_tenant_copy_bytes_total") > value(&before, "gotry_tenant_copy_bytes_total"));
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[test]
fn a_copy_that_fails_on_a_stopped_s3_server_is_counted() {
    let _serial = serial();
    let Some(server) = gotry_test_support::moto::MotoServer::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let durable = open_durable_store(&server.url("metrics")).unwrap();
    let series = [
        "gotry_tenant_copies_total{outcome=\"failed\"}",
        "gotry_tenant_copies_total{outcome=\"written\"}",
    ];
    let before = metrics::encode();
    let router = router(dir.path(), durable, "replica-a", Durability::Strict);
    router.open(ORG, T3).unwrap();
    router.run(&key(T3), append).unwrap();
    server.stop();
    let failed = router.run(&key(T3), append);
    server.resume();
    assert!(matches!(failed, Err(Error::CallInDoubt { .. })), "{failed:?}");
    let after = metrics::encode();
    assert_eq!(deltas(&before, &after, &series), vec![1.0, 1.0], "{after}");
}

/// `promtool check metrics` (Debian's `prometheus` package) finds no naming or format problem
/// in the text, with every kind of series present. Without promtool on PATH the test says
/// SKIPPED on stderr and passes: it is a lint of names, not of behaviour.
#[test]
fn promtool_finds_no_problem_in_the_text() {
    let _serial = serial();
    let Ok(promtool) = which_promtool() else {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"SKIPPED promtool_finds_no_problem_in_the_text: no promtool on PATH (apt-get install prometheus)\n",
        );
        return;
    };
    let f = Fixture::new();
    let keeper = f.keeper();
    let _lease = keeper.acquire("p").unwrap();
    f.at(250);
    keeper.tick().unwrap();
    // A router with per-tenant series, one of its tenants with a write not copied yet.
    let dir = tempfile::tempdir().unwrap();
    let router = router_on(
        dir.path(),
        "replica-promtool",
        &Arc::new(ManualClock::new(0)),
        Some(true),
    );
    router.open(ORG, T1).unwrap();
    router.run(&key(T1), append).unwrap();
    let mut child = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let text = metrics::encode();
    assert!(text.contains("tenant=\""), "{text}");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool: {said}\n{text}"
    );
}

fn which_promtool() -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("promtool"))
        .find(|path| path.is_file())
        .ok_or(())
}

/// A host that uses the copies without a router is counted alike: the counting is where a copy
/// is written and a restore made, not in the router.
#[test]
fn copies_and_restores_made_without_a_router_are_counted() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let leases: Arc<dyn LeaseStore> = Arc::new(SqliteLeaseStore::open(dir.path().join("leases.db")).unwrap());
    let copies = EpochCopies::new(Arc::new(
        DirectoryDurableStore::open(dir.path().join("durable")).unwrap(),
    ));
    let lease = TenantLease::acquire(LeaseOptions {
        key: key("t-33333333333333333333333333333333"),
        replica_id: "replica-a".to_owned(),
        store: leases,
        ttl_ms: 60_000,
        margin_ms: 1_000,
        clock: Arc::new(ManualClock::new(0)),
    })
    .unwrap();
    let root = dir.path().join("root");
    let series = [
        "gotry_tenant_restores_total{outcome=\"empty\"}",
        "gotry_tenant_copies_total{outcome=\"written\"}",
        "gotry_tenant_copies_total{outcome=\"failed\"}",
        "gotry_tenant_copy_bytes_total",
    ];
    let before = metrics::encode();
    copies.restore(&lease, &root, None).unwrap();
    std::fs::write(root.join("notes.txt"), b"twelve bytes").unwrap();
    let written = copies.write_copy(&lease, &root).unwrap();
    // A root that is a file cannot be copied.
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    assert!(copies.write_copy(&lease, &file).is_err());
    let after = metrics::encode();
    assert_eq!(
        deltas(&before, &after, &series),
        vec![1.0, 1.0, 1.0, written.bytes_uploaded as f64],
        "{after}"
    );
}

/// A strict router writes a copy per acknowledged write and keeps [`DEFAULT_KEEP_COPIES`] of
/// them: the store holds a bounded number however many calls it answers, and the collections
/// and the copies they deleted are counted.
#[test]
fn a_strict_router_keeps_a_bounded_number_of_copies_and_counts_its_collections() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let durable: Arc<dyn DurableStore> =
        Arc::new(DirectoryDurableStore::open(dir.path().join("durable")).unwrap());
    let series = [
        "gotry_tenant_copy_collections_total{outcome=\"done\"}",
        "gotry_tenant_copy_collections_total{outcome=\"failed\"}",
        "gotry_tenant_copies_deleted_total",
    ];
    let before = metrics::encode();
    let router = router(dir.path(), durable.clone(), "replica-a", Durability::Strict);
    router.open(ORG, T1).unwrap();
    let keep = DEFAULT_KEEP_COPIES;
    let copies = EpochCopies::new(durable);
    let mut most = 0;
    for _ in 0..3 * keep {
        router.run(&key(T1), append).unwrap();
        let complete = copies
            .list(&key(T1))
            .unwrap()
            .iter()
            .filter(|c| c.complete)
            .count();
        most = most.max(complete);
    }
    assert!(most <= 3 * keep, "{most} copies at most");
    // The last collection runs behind its copy: the handoff waits for it before its release.
    router.close(Duration::from_secs(5));
    let counted = deltas(&before, &metrics::encode(), &series);
    assert_eq!(counted[..2], [3.0, 0.0], "{counted:?}");
    assert!(counted[2] >= keep as f64, "{counted:?}");
}

// ---- per-tenant series, with RouterOptions::tenant_metrics ----

/// A router of `replica` with no thread of its own on the manual clock `mono` (so a tenant's
/// lag is what the test moved the clock by), with per-tenant series when `tenant_metrics`
/// says so (the default when `None`).
fn router_on(
    dir: &Path,
    replica: &str,
    mono: &Arc<ManualClock>,
    tenant_metrics: Option<bool>,
) -> TenantRouter {
    let leases: Arc<dyn LeaseStore> = Arc::new(SqliteLeaseStore::open(dir.join("leases.db")).unwrap());
    let durable: Arc<dyn DurableStore> = Arc::new(DirectoryDurableStore::open(dir.join("durable")).unwrap());
    let mut options = RouterOptions::new(leases, durable, dir.join("state"), replica.to_owned(), 3_000, 500);
    options.copy_policy = CopyPolicy {
        interval: Duration::from_secs(3_600),
        durability: Durability::Async,
    };
    options.clock = mono.clone();
    options.without_thread = true;
    if let Some(on) = tenant_metrics {
        options.tenant_metrics = on;
    }
    TenantRouter::start(options).unwrap()
}

/// The labels of a tenant's series: the replica id escaped as the text format asks.
fn tenant_labels(replica_escaped: &str, tenant: &str) -> String {
    format!("replica=\"{replica_escaped}\",tenant=\"{}\"", key(tenant))
}

#[test]
fn a_router_with_tenant_metrics_writes_each_tenants_series_until_it_leaves() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mono = Arc::new(ManualClock::new(0));
    // A replica id holds any text: its quote and backslash are escaped in the label.
    let replica = "replica \"tm\" \\ 1";
    let escaped = "replica \\\"tm\\\" \\\\ 1";
    let router = router_on(dir.path(), replica, &mono, Some(true));
    router.open(ORG, T1).unwrap();
    router.open(ORG, T2).unwrap();
    router.run(&key(T1), append).unwrap();
    router.run(&key(T1), append).unwrap();
    let call = router.begin(&key(T1)).unwrap();
    mono.advance(1_500).unwrap();

    let text = metrics::encode();
    let (one, two) = (tenant_labels(escaped, T1), tenant_labels(escaped, T2));
    let read = |name: &str, labels: &str| value(&text, &format!("{name}{{{labels}}}"));
    assert_eq!(
        read(
            "gotry_tenant_router_tenant_state",
            &format!("{one},state=\"serving\"")
        ),
        1.0,
        "{text}"
    );
    assert_eq!(read("gotry_tenant_router_tenant_calls_in_flight", &one), 1.0);
    assert_eq!(read("gotry_tenant_router_tenant_copy_lag_writes", &one), 2.0);
    assert_eq!(read("gotry_tenant_router_tenant_copy_lag_seconds", &one), 1.5);
    assert_eq!(
        read(
            "gotry_tenant_router_tenant_state",
            &format!("{two},state=\"serving\"")
        ),
        1.0
    );
    // Written as 0, not left out: the tenant is served and nothing of it is unsaved.
    for name in [
        "gotry_tenant_router_tenant_calls_in_flight",
        "gotry_tenant_router_tenant_copy_lag_writes",
        "gotry_tenant_router_tenant_copy_lag_seconds",
    ] {
        assert!(text.contains(&format!("{name}{{{two}}} 0\n")), "{name}: {text}");
    }
    // One state series per tenant: the current one.
    assert_eq!(
        text.matches("gotry_tenant_router_tenant_state{").count(),
        2,
        "{text}"
    );

    // Handed off, the tenant leaves the router and its series the text.
    router.handoff(&key(T2), Duration::from_secs(60)).unwrap();
    let text = metrics::encode();
    assert!(!text.contains(&two), "{text}");
    assert_eq!(text.matches(&one).count(), 4, "{text}");

    // Closed, the router lists no tenant any more.
    drop(call);
    let report = router.close(Duration::from_secs(60));
    assert_eq!(report.handed_off, vec![key(T1)]);
    let text = metrics::encode();
    assert!(!text.contains("tenant=\""), "{text}");
    // The families are described all the same, for a host registry that registers them once.
    for name in [
        "gotry_tenant_router_tenant_state",
        "gotry_tenant_router_tenant_calls_in_flight",
        "gotry_tenant_router_tenant_copy_lag_seconds",
        "gotry_tenant_router_tenant_copy_lag_writes",
    ] {
        assert!(text.contains(&format!("# TYPE {name} gauge\n")), "{name}");
    }
}

#[test]
fn a_router_dropped_takes_its_tenants_series_out_of_the_text() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mono = Arc::new(ManualClock::new(0));
    let router = router_on(dir.path(), "replica-dropped", &mono, Some(true));
    router.open(ORG, T3).unwrap();
    let labels = tenant_labels("replica-dropped", T3);
    let series = format!("gotry_tenant_router_tenant_state{{{labels},state=\"serving\"}}");
    assert_eq!(value(&metrics::encode(), &series), 1.0);
    drop(router);
    let text = metrics::encode();
    assert!(!text.contains(&labels), "{text}");
}

#[test]
fn without_tenant_metrics_no_series_names_a_tenant() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mono = Arc::new(ManualClock::new(0));
    // Not asked for: the default is off.
    let router = router_on(dir.path(), "replica-plain", &mono, None);
    router.open(ORG, T1).unwrap();
    router.run(&key(T1), append).unwrap();
    let _call = router.begin(&key(T1)).unwrap();
    let text = metrics::encode();
    // The router is counted in the families without a tenant label, and named nowhere.
    assert!(value(&text, "gotry_tenant_router_tenants{state=\"serving\"}") >= 1.0);
    assert_eq!(value(&text, "gotry_tenant_copy_lag_writes"), 1.0);
    assert!(!text.contains("tenant=\""), "{text}");
    assert!(!text.contains(&key(T1)), "{text}");
}
