//! Benchmarks of the core: id derivation and validation, and durable store operations.
//!
//! The store figures are printed beside this disk's own bound for one durable write (a
//! 4 KiB write + fdatasync loop, measured in the same run), as a ratio: machines here are
//! shared and noisy, and only a ratio to a baseline taken at the same moment means much.
//!
//!     cargo bench -p gotry-tenant-state --bench core

use std::fs::OpenOptions;
use std::hint::black_box;
use std::io::Write;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use gotry_tenant_state::{
    assert_ledger_tenant_id, assert_organization_id, LeaseStore, OrganizationKey, SqliteLeaseStore,
};

fn ids(c: &mut Criterion) {
    let key = OrganizationKey::new(&[7u8; 32]).unwrap();
    let tenant = key
        .derive_ledger_tenant_id("https://idp.example", "user-1")
        .unwrap();
    c.bench_function("derive_ledger_tenant_id", |b| {
        b.iter(|| key.derive_ledger_tenant_id(black_box("https://idp.example"), black_box("user-1")))
    });
    c.bench_function("derive_prompt_cache_partition", |b| {
        b.iter(|| key.derive_prompt_cache_partition(black_box(&tenant)))
    });
    c.bench_function("derive_ledger_tenant_id from raw key bytes", |b| {
        b.iter(|| {
            gotry_tenant_state::derive_ledger_tenant_id(
                black_box(&[7u8; 32]),
                "https://idp.example",
                "user-1",
            )
        })
    });
    c.bench_function("assert_organization_id", |b| {
        b.iter(|| assert_organization_id(black_box("acme-corp-42")))
    });
    c.bench_function("assert_ledger_tenant_id", |b| {
        b.iter(|| assert_ledger_tenant_id(black_box(&tenant)))
    });
}

fn store(c: &mut Criterion) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let store = SqliteLeaseStore::open(dir.path().join("bench.db")).unwrap();
    let mut group = c.benchmark_group("sqlite store (durable)");
    group.sample_size(20).measurement_time(Duration::from_secs(4));
    let grant = store.acquire("bench", "o", 600_000).unwrap();
    group.bench_function("renew", |b| {
        b.iter(|| store.renew("bench", "o", grant.record.epoch, 600_000).unwrap())
    });
    let mut n = 0u64;
    group.bench_function("acquire + release", |b| {
        b.iter(|| {
            n += 1;
            let key = format!("k{n}");
            let g = store.acquire(&key, "o", 1_000).unwrap();
            store.release(&key, "o", g.record.epoch).unwrap();
        })
    });
    group.finish();
}

/// Mean time of one 4 KiB write + fdatasync on the disk the store uses.
fn fdatasync_bound(dir: &std::path::Path, rounds: u32) -> Duration {
    let path = dir.join("fsync-probe");
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let block = [0x5Au8; 4096];
    let started = Instant::now();
    for _ in 0..rounds {
        file.write_all(&block).unwrap();
        file.sync_data().unwrap();
    }
    started.elapsed() / rounds
}

/// Mean time of one durable store operation (a renew: one transaction, one commit).
fn store_operation(store: &SqliteLeaseStore, epoch: i64, rounds: u32) -> Duration {
    let started = Instant::now();
    for _ in 0..rounds {
        store.renew("ratio", "o", epoch, 600_000).unwrap();
    }
    started.elapsed() / rounds
}

fn durable_ratio() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let store = SqliteLeaseStore::open(dir.path().join("ratio.db")).unwrap();
    let epoch = store.acquire("ratio", "o", 600_000).unwrap().record.epoch;
    // Interleaved, so that a noisy neighbour slows both sides alike.
    let (mut sync_total, mut op_total) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..5 {
        sync_total += fdatasync_bound(dir.path(), 100);
        op_total += store_operation(&store, epoch, 100);
    }
    println!(
        "durable write bound: fdatasync {:?}, store renew {:?}, ratio {:.2} x (target <= 1.5 x)",
        sync_total / 5,
        op_total / 5,
        op_total.as_secs_f64() / sync_total.as_secs_f64()
    );
}

criterion_group!(benches, ids, store);

fn main() {
    benches();
    durable_ratio();
    Criterion::default().configure_from_args().final_summary();
}
