//! What the router adds to a call, against the same call made directly in the same run: a
//! call that does nothing (the router's own cost: counting, two gate checks) and a call that
//! appends a row to the tenant's SQLite ledger (what a host's call costs). Async durability,
//! so no copy is in the path; the ratio printed is direct time / routed time (1.0: free).
//!
//!     cargo bench -p gotry-tenant-state --bench router

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use gotry_tenant_state::{
    CopyPolicy, DirectoryDurableStore, Durability, RouterOptions, SqliteLeaseStore, TenantHandle,
    TenantRouter,
};

const ORG: &str = "bench";
const TENANT: &str = "t-0123456789abcdef0123456789abcdef";

fn router(dir: &Path) -> TenantRouter {
    let mut options = RouterOptions::new(
        Arc::new(SqliteLeaseStore::open(dir.join("leases.db")).unwrap()),
        Arc::new(DirectoryDurableStore::open(dir.join("durable")).unwrap()),
        dir.join("state"),
        "bench-replica".to_owned(),
        30_000,
        1_000,
    );
    // Copies far apart: the benchmark measures calls, not copies.
    options.copy_policy = CopyPolicy {
        interval: Duration::from_secs(3_600),
        durability: Durability::Async,
    };
    TenantRouter::start(options).unwrap()
}

fn ledger(handle: &TenantHandle) -> rusqlite::Connection {
    let path = handle.root.join("gotry-state/gotry-state.db");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let db = rusqlite::Connection::open(path).unwrap();
    db.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; CREATE TABLE IF NOT EXISTS entries (n INTEGER)")
        .unwrap();
    db
}

fn calls(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let router = router(dir.path());
    let handle = router.open(ORG, TENANT).unwrap();
    let key = handle.key.clone();
    let mut group = c.benchmark_group("router call");
    group.bench_function("empty, direct", |b| {
        b.iter(|| std::hint::black_box(&handle).lease.epoch())
    });
    group.bench_function("empty, through run", |b| {
        b.iter(|| router.run(&key, |h| Ok(h.lease.epoch())).unwrap())
    });
    group.finish();
}

criterion_group!(benches, calls);

/// Median of `rounds` timings of `n` calls each, alternating the two kinds so that a noisy
/// neighbour slows both.
fn ratio(name: &str, n: u32, direct: &mut dyn FnMut(), routed: &mut dyn FnMut()) {
    let mut rounds = Vec::new();
    for _ in 0..9 {
        let started = Instant::now();
        for _ in 0..n {
            direct();
        }
        let direct_s = started.elapsed().as_secs_f64();
        let started = Instant::now();
        for _ in 0..n {
            routed();
        }
        let routed_s = started.elapsed().as_secs_f64();
        rounds.push((direct_s / routed_s, direct_s, routed_s));
    }
    rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (ratio, direct_s, routed_s) = rounds[4];
    let per_call = |s: f64| s * 1e6 / f64::from(n);
    println!(
        "router {name}: direct / through run = {ratio:.2}; {:.3} µs against {:.3} µs a call (median of 9 rounds of {n})",
        per_call(direct_s),
        per_call(routed_s)
    );
}

fn main() {
    benches();
    let dir = tempfile::tempdir().unwrap();
    let router = router(dir.path());
    let handle = router.open(ORG, TENANT).unwrap();
    let key = handle.key.clone();
    let db = ledger(&handle);
    let mut direct = || {
        db.execute("INSERT INTO entries VALUES (1)", []).unwrap();
    };
    let mut routed = || {
        router
            .run(&key, |_| {
                db.execute("INSERT INTO entries VALUES (1)", []).unwrap();
                Ok(())
            })
            .unwrap()
    };
    ratio("appending a ledger row", 2_000, &mut direct, &mut routed);
    ratio(
        "doing nothing",
        200_000,
        &mut || {
            std::hint::black_box(handle.lease.epoch());
        },
        &mut || router.run(&key, |h| Ok(h.lease.epoch())).map(drop).unwrap(),
    );
    Criterion::default().configure_from_args().final_summary();
}
