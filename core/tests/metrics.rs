//! The core's metrics, read back from the text that every door serves: each family is
//! driven through the real path that counts it (a SQLite store, a keeper's rounds, holders'
//! gates). The registry is the process's, so each test reads deltas and the tests of this
//! file run one at a time.

use std::sync::{Arc, Mutex, MutexGuard};

use gotry_tenant_state::{metrics, KeeperOptions, LeaseKeeper, LeaseStore, ManualClock, SqliteLeaseStore};

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
        ("gotry_tenant_restores_total", "counter"),
        ("gotry_tenant_restore_skipped_copies_total", "counter"),
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
