//! Lease operations per second on the MySQL/MariaDB store, beside the SQLite store measured
//! in the same run: the figures move with the machine's load, their ratio much less.
//!
//!     cargo bench -p gotry-tenant-state --bench store_mysql
//!
//! Needs the server the tests use (`GOTRY_MYSQL_URL`, default the local MariaDB);
//! `GOTRY_SKIP_MYSQL=1` skips it. Both stores are durable: InnoDB flushes its log at each
//! commit (with the default `innodb_flush_log_at_trx_commit = 1`), SQLite runs WAL with
//! `synchronous = FULL`.

use std::time::{Duration, Instant};

use gotry_tenant_state::{LeaseStore, MysqlLeaseStore, MysqlOptions, SqliteLeaseStore};
use gotry_test_support::mysql::{self as server, ScratchTables};

/// How long each operation is repeated.
const RUN: Duration = Duration::from_secs(2);
/// Leases renewed by one batch.
const BATCH: usize = 100;

/// Operations per second of `step`, which does `per_step` operations each time.
fn rate(per_step: usize, mut step: impl FnMut(u64)) -> f64 {
    step(0); // warm: connections, prepared statements, page cache
    let started = Instant::now();
    let mut steps = 0u64;
    while started.elapsed() < RUN {
        steps += 1;
        step(steps);
    }
    (steps as f64 * per_step as f64) / started.elapsed().as_secs_f64()
}

/// acquire + release of a new key, renew of one held lease, and a batched renewal.
fn measure(name: &str, store: &dyn LeaseStore) -> [f64; 3] {
    let pairs = rate(2, |n| {
        let key = format!("{name}-k{n}");
        let grant = store.acquire(&key, "o", 60_000).unwrap();
        store.release(&key, "o", grant.record.epoch).unwrap();
    });
    let held = store.acquire("renewed", "o", 600_000).unwrap();
    let renews = rate(1, |_| {
        store.renew("renewed", "o", held.record.epoch, 600_000).unwrap();
    });
    let keys: Vec<String> = (0..BATCH).map(|i| format!("batch-{i}")).collect();
    let leases: Vec<(&str, i64)> = keys
        .iter()
        .map(|key| {
            (
                key.as_str(),
                store.acquire(key, "o", 600_000).unwrap().record.epoch,
            )
        })
        .collect();
    let batched = rate(BATCH, |_| {
        let answers = store.renew_batch("o", 600_000, &leases).unwrap();
        assert!(answers.iter().all(Result::is_ok));
    });
    [pairs, renews, batched]
}

fn main() {
    // A bench cannot be marked ignored: it says it skipped, where the tests' list would.
    if cfg!(gotry_skip_mysql) {
        eprintln!("SKIPPED the MySQL store benchmark: {}=1", server::SKIP_VAR);
        return;
    }
    let url = server::server_url();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let sqlite = SqliteLeaseStore::open(dir.path().join("bench.db")).unwrap();
    let mut scratch = ScratchTables::new(&url);
    let mut options = MysqlOptions::from_url(&url).unwrap();
    options.table_prefix = server::fresh_prefix();
    let mysql = MysqlLeaseStore::open(options).unwrap_or_else(|e| server::no_server(&url, &e));
    let (leases, log) = mysql.table_names();
    scratch.add(leases, log);

    let baseline = measure("sqlite", &sqlite);
    let figures = measure("mysql", &mysql);
    println!(
        "{:<34} {:>14} {:>14} {:>8}",
        "operations per second", "sqlite", "mysql", "ratio"
    );
    for (i, what) in [
        "acquire + release (per operation)",
        "renew",
        "renew_batch of 100 (per lease)",
    ]
    .into_iter()
    .enumerate()
    {
        println!(
            "{what:<34} {:>14.0} {:>14.0} {:>8.2}",
            baseline[i],
            figures[i],
            figures[i] / baseline[i]
        );
    }
}
