//! What a batched renewal costs per lease, against a single renew on the same file store in
//! the same run, and what one keeper holding 100,000 leases at a TTL of 30 s costs in CPU.
//!
//! `cargo bench -p gotry-tenant-state --bench keeper` prints the figures. Setting up
//! 100,000 leases one acquire at a time on a durable file would take minutes (one sync per
//! acquire), so the leases are acquired on a copy of the store in memory (/dev/shm when
//! there is one) and the keeper is then switched to the same file on disk: every figure
//! below is measured on the disk file, with its syncs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gotry_tenant_state::{
    Error, HistoryEntry, KeeperOptions, LeaseGrant, LeaseKeeper, LeaseOptions, LeaseRecord, LeaseStore,
    ManualClock, SqliteLeaseStore, SystemMonotonicClock, TenantLease,
};
use gotry_test_support::faulty::{FaultyStore, Method};

type Result<T> = std::result::Result<T, Error>;

/// The store file at `memory`, behind a wrapper that can move it to disk under the leases
/// that use it, and counts the renewals sent in batches.
fn switch(memory: &Path) -> Arc<FaultyStore> {
    Arc::new(FaultyStore::new(Arc::new(
        SqliteLeaseStore::open(memory).unwrap(),
    )))
}

/// Moves the store file from `memory` to `disk` and carries on there; calls wait meanwhile.
fn move_to_disk(switch: &FaultyStore, memory: &Path, disk: &Path) {
    switch.replace_inner(|current| {
        current.close().unwrap();
        std::fs::copy(memory, disk).unwrap();
        Arc::new(SqliteLeaseStore::open(disk).unwrap())
    });
}

/// The renewals sent in batches since the last call.
fn batched(switch: &FaultyStore) -> usize {
    switch.take_calls(Method::RenewBatch).into_iter().sum()
}

/// A store that answers from memory: what is left of a round's cost is the keeper's own.
#[derive(Default)]
struct Memory {
    records: std::sync::Mutex<std::collections::HashMap<String, LeaseRecord>>,
}

impl Memory {
    fn unused<T>() -> Result<T> {
        Err(Error::LeaseStoreUnavailable {
            message: "not part of the benchmark".into(),
        })
    }
}

impl LeaseStore for Memory {
    fn read(&self, _: &str) -> Result<Option<LeaseRecord>> {
        Memory::unused()
    }
    fn acquire(&self, key: &str, owner: &str, ttl_ms: i64) -> Result<LeaseGrant> {
        let record = LeaseRecord {
            key: key.to_owned(),
            owner: owner.to_owned(),
            epoch: 1,
            lease_until_ms: ttl_ms,
            forgotten_at_epoch: 0,
        };
        self.records
            .lock()
            .unwrap()
            .insert(key.to_owned(), record.clone());
        Ok(LeaseGrant { record, ttl_ms })
    }
    fn renew(&self, _: &str, _: &str, _: i64, _: i64) -> Result<LeaseGrant> {
        Memory::unused()
    }
    fn renew_batch(&self, _: &str, ttl_ms: i64, leases: &[(&str, i64)]) -> Result<Vec<Result<LeaseGrant>>> {
        let records = self.records.lock().unwrap();
        Ok(leases
            .iter()
            .map(|(key, _)| {
                Ok(LeaseGrant {
                    record: records[*key].clone(),
                    ttl_ms,
                })
            })
            .collect())
    }
    fn release(&self, _: &str, _: &str, _: i64) -> Result<LeaseRecord> {
        Memory::unused()
    }
    fn mark_forgotten(&self, _: &str, _: &str, _: i64) -> Result<LeaseRecord> {
        Memory::unused()
    }
    fn history(&self, _: Option<&str>) -> Result<Vec<HistoryEntry>> {
        Memory::unused()
    }
    fn list(&self, _: &str) -> Result<Vec<LeaseRecord>> {
        Memory::unused()
    }
    fn now_ms(&self) -> Result<i64> {
        Ok(0)
    }
    fn compact_log(&self) -> Result<u64> {
        Memory::unused()
    }
    fn close(&self) -> Result<()> {
        Ok(())
    }
}

/// The keeper's own share: rounds of 100,000 leases (default batches) on the memory store,
/// and a round with nothing due (the scan every wake-up pays).
fn keeper_share() {
    const LEASES: usize = 100_000;
    let clock = Arc::new(ManualClock::new(0));
    let mut options = KeeperOptions::new(Arc::new(Memory::default()), "bench", 30_000, 1_000);
    options.clock = clock.clone();
    let keeper = LeaseKeeper::without_thread(options).unwrap();
    for i in 0..LEASES {
        keeper.acquire(&format!("mem-{i:06}")).unwrap();
    }
    let rounds = 5;
    let (w0, c0) = (Instant::now(), process_cpu());
    for _ in 0..rounds {
        clock.advance(10_000).unwrap();
        assert_eq!(keeper.tick().unwrap().renewed, LEASES);
    }
    let (wall, cpu) = (w0.elapsed(), process_cpu() - c0);
    let renewals = (LEASES * rounds) as f64;
    let (w0, c0) = (Instant::now(), process_cpu());
    for _ in 0..rounds {
        assert_eq!(keeper.tick().unwrap().batches, 0);
    }
    let idle = w0.elapsed() / rounds as u32;
    let idle_cpu = (process_cpu() - c0) / rounds as u32;
    println!(
        "keeper alone (store answering from memory), {LEASES} leases: {:.2} us wall, {:.2} us cpu per renewal; \
         a round with nothing due {:.1} ms ({:.1} ms cpu)",
        micros(wall) / renewals,
        micros(cpu) / renewals,
        idle.as_secs_f64() * 1e3,
        idle_cpu.as_secs_f64() * 1e3
    );
}

/// User plus system CPU time of the whole process (every thread).
fn process_cpu() -> Duration {
    #[repr(C)]
    struct Timeval {
        sec: i64,
        usec: i64,
    }
    #[repr(C)]
    struct Rusage {
        user: Timeval,
        system: Timeval,
        rest: [i64; 14],
    }
    extern "C" {
        fn getrusage(who: i32, usage: *mut Rusage) -> i32;
    }
    let mut usage = std::mem::MaybeUninit::<Rusage>::zeroed();
    // RUSAGE_SELF; the struct is the 64-bit Linux layout.
    let status = unsafe { getrusage(0, usage.as_mut_ptr()) };
    assert_eq!(status, 0, "getrusage failed");
    let usage = unsafe { usage.assume_init() };
    let micros = |t: &Timeval| Duration::from_secs(t.sec as u64) + Duration::from_micros(t.usec as u64);
    micros(&usage.user) + micros(&usage.system)
}

struct Dirs {
    _memory: tempfile::TempDir,
    _disk: tempfile::TempDir,
    memory: PathBuf,
    disk: PathBuf,
}

fn dirs() -> Dirs {
    let shm = Path::new("/dev/shm");
    let memory = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .unwrap();
    let disk = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    Dirs {
        memory: memory.path().to_path_buf(),
        disk: disk.path().to_path_buf(),
        _memory: memory,
        _disk: disk,
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Per-lease cost of a round of N leases (one transaction each) against one `renew`.
fn per_lease_cost(dirs: &Dirs) {
    const SIZES: [(usize, usize); 4] = [(1, 300), (100, 30), (1_000, 8), (10_000, 3)];
    let switch = switch(&dirs.memory.join("cost.db"));
    let clock = Arc::new(ManualClock::new(0));
    let keepers: Vec<(usize, usize, LeaseKeeper)> = SIZES
        .iter()
        .map(|&(size, rounds)| {
            // The longest TTL: the store's real clock must not expire anything during the run.
            let mut options = KeeperOptions::new(switch.clone(), "bench", 600_000, 0);
            options.clock = clock.clone();
            options.max_batch = size;
            let keeper = LeaseKeeper::without_thread(options).unwrap();
            for i in 0..size {
                keeper.acquire(&format!("cost-{size}-{i:05}")).unwrap();
            }
            (size, rounds, keeper)
        })
        .collect();
    let single = TenantLease::acquire(LeaseOptions {
        key: "single".into(),
        replica_id: "bench".into(),
        store: switch.clone(),
        ttl_ms: 600_000,
        margin_ms: 0,
        clock: Arc::new(SystemMonotonicClock),
    })
    .unwrap();
    move_to_disk(&switch, &dirs.memory.join("cost.db"), &dirs.disk.join("cost.db"));

    // A sync's latency drifts with whatever else the disk is doing: the baseline is the
    // median of renewals taken before and after the rounds, after a warm-up that grows the
    // write-ahead log to its working size.
    let time_renews = |count: usize| -> Vec<f64> {
        (0..count)
            .map(|_| {
                let start = Instant::now();
                single.renew().unwrap();
                micros(start.elapsed())
            })
            .collect()
    };
    time_renews(50);
    let mut samples = time_renews(200);
    let mut rows = Vec::new();
    for (size, rounds, keeper) in &keepers {
        let (mut wall, mut cpu) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..*rounds {
            // A whole interval later, every lease of this keeper is due.
            clock.advance(200_000).unwrap();
            let (w0, c0) = (Instant::now(), process_cpu());
            let report = keeper.tick().unwrap();
            wall += w0.elapsed();
            cpu += process_cpu() - c0;
            assert_eq!((report.renewed, report.batches), (*size, 1), "{report:?}");
        }
        rows.push((*size, *rounds, wall, cpu));
    }
    samples.extend(time_renews(200));
    samples.sort_unstable_by(f64::total_cmp);
    let single_us = samples[samples.len() / 2];
    println!(
        "single TenantLease::renew on the disk file: median {single_us:.1} us (p10 {:.1}, p90 {:.1})",
        samples[samples.len() / 10],
        samples[samples.len() * 9 / 10]
    );
    println!(
        "{:>8} {:>7} {:>14} {:>16} {:>14} {:>14}",
        "leases", "rounds", "round (ms)", "per lease (us)", "single/lease", "cpu/lease (us)"
    );
    for (size, rounds, wall, cpu) in rows {
        let renewals = (size * rounds) as f64;
        let per_lease = micros(wall) / renewals;
        println!(
            "{:>8} {:>7} {:>14.2} {:>16.2} {:>14.1} {:>14.2}",
            size,
            rounds,
            wall.as_secs_f64() * 1e3 / rounds as f64,
            per_lease,
            single_us / per_lease,
            micros(cpu) / renewals
        );
    }
}

/// CPU of one keeper thread holding 100,000 leases at a TTL of 30 s, over a window of real time.
fn cpu_of_100k(dirs: &Dirs) {
    const LEASES: usize = 100_000;
    const TTL_MS: i64 = 30_000;
    const WINDOW: Duration = Duration::from_secs(20);
    let switch = switch(&dirs.memory.join("cpu.db"));
    let keeper = LeaseKeeper::start(KeeperOptions::new(switch.clone(), "bench", TTL_MS, 1_000)).unwrap();
    let setup = Instant::now();
    let leases: Vec<_> = (0..LEASES)
        .map(|i| keeper.acquire(&format!("cpu-{i:06}")).unwrap())
        .collect();
    move_to_disk(&switch, &dirs.memory.join("cpu.db"), &dirs.disk.join("cpu.db"));
    println!(
        "{LEASES} leases acquired (in memory) in {:.1} s; keeper thread running, TTL {} s, renewal every {:.1} s",
        setup.elapsed().as_secs_f64(),
        TTL_MS / 1000,
        TTL_MS as f64 / 3000.0
    );

    batched(&switch);
    let (w0, c0) = (Instant::now(), process_cpu());
    std::thread::sleep(WINDOW);
    let (wall, cpu) = (w0.elapsed(), process_cpu() - c0);
    let renewed = batched(&switch);
    let held = leases.iter().filter(|lease| lease.is_held()).count();
    println!(
        "window {:.1} s: {renewed} renewals sent, cpu {:.3} s = {:.2} % of one core, {:.2} us cpu per renewal; \
         {held} of {LEASES} leases held at the end",
        wall.as_secs_f64(),
        cpu.as_secs_f64(),
        100.0 * cpu.as_secs_f64() / wall.as_secs_f64(),
        micros(cpu) / renewed.max(1) as f64
    );

    let budget = Duration::from_secs(2);
    let start = Instant::now();
    let report = keeper.shutdown(budget);
    println!(
        "shutdown({} s): {} released in batches, {} left to run out, in {:.1} s",
        budget.as_secs(),
        report.released.len(),
        report.timed_out.len(),
        start.elapsed().as_secs_f64()
    );
}

fn main() {
    // `cargo test --benches` runs bench targets with `--bench` absent: do nothing then.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let dirs = dirs();
    per_lease_cost(&dirs);
    keeper_share();
    cpu_of_100k(&dirs);
}
