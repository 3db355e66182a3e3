//! What counting costs on the hot paths, against the same paths with counting switched off
//! ([`metrics::set_counting`]) in the same run: a batched renewal round of 1,000 leases and
//! a single renew, both on a SQLite file on disk (each one durable transaction), and the
//! bare cost of the wrapper around a call that does nothing. The two modes run in pairs, in
//! random order, so drift of the disk or the machine falls on both alike; the figures are
//! the ratio of the medians and the median of the pairs' ratios (target: at most 1.02).
//!
//! `cargo bench -p gotry-tenant-state --bench metrics` prints the figures.

use std::hint::black_box;
use std::time::{Duration, Instant};

use gotry_tenant_state::metrics::{self, Store, StoreOp};
use gotry_tenant_state::{LeaseStore, SqliteLeaseStore};

const TTL_MS: i64 = 60_000;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Runs `round` in `pairs` pairs, one with counting off and one on, in an order drawn at
/// random per pair (a fixed order lets a periodic cost, a WAL checkpoint, fall on one mode);
/// the medians off and on, and the median of the pairs' ratios.
fn compare(pairs: usize, mut round: impl FnMut()) -> (Duration, Duration, f64) {
    let (mut off, mut on, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    round(); // warm-up
    for _ in 0..pairs {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut took = [Duration::ZERO; 2];
        let order = if seed & 1 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for counting in order {
            metrics::set_counting(counting);
            let started = Instant::now();
            round();
            took[usize::from(counting)] = started.elapsed();
        }
        off.push(took[0]);
        on.push(took[1]);
        ratios.push(took[1].as_secs_f64() / took[0].as_secs_f64());
    }
    metrics::set_counting(true);
    ratios.sort_by(f64::total_cmp);
    (median(off), median(on), ratios[ratios.len() / 2])
}

fn report(what: &str, (off, on, paired): (Duration, Duration, f64)) {
    println!(
        "{what}: median counting off {off:?}, on {on:?}, ratio of medians {:.4}, median of paired ratios {paired:.4}",
        on.as_secs_f64() / off.as_secs_f64()
    );
}

fn main() {
    // On disk, beside the build: /tmp may be memory, which has no sync to pay for.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let store = SqliteLeaseStore::open(dir.path().join("leases.db")).unwrap();
    let keys: Vec<String> = (0..1_000).map(|i| format!("acme/t-{i:032x}")).collect();
    let mut leases = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(100) {
        // Acquired in batches of one transaction each would need an acquire_batch; one at a
        // time is a setup cost only.
        for key in chunk {
            let grant = store.acquire(key, "replica-a", TTL_MS).unwrap();
            leases.push((key.as_str(), grant.record.epoch));
        }
    }
    report(
        "renew_batch of 1,000 leases (one durable transaction)",
        compare(100, || {
            let answers = store.renew_batch("replica-a", TTL_MS, &leases).unwrap();
            assert!(answers.iter().all(Result::is_ok));
        }),
    );
    let (key, epoch) = leases[0];
    report(
        "renew of one lease (one durable transaction)",
        compare(500, || {
            store.renew(key, "replica-a", epoch, TTL_MS).unwrap();
        }),
    );
    report(
        "the wrapper alone, 1,000,000 calls that do nothing",
        compare(20, || {
            for _ in 0..1_000_000 {
                let _ = black_box(metrics::store_call(Store::Sqlite, StoreOp::Renew, || {
                    Ok(black_box(1))
                }));
            }
        }),
    );
}
