//! Lease operations per second on the PostgreSQL store, beside the SQLite and MariaDB
//! stores measured in the same run: the figures move with the machine's load, their ratios
//! much less.
//!
//!     cargo bench -p gotry-tenant-state --bench store_postgres
//!
//! Needs the servers the tests use (`GOTRY_POSTGRES_URL`, `GOTRY_MYSQL_URL`; defaults the
//! local ones). `GOTRY_SKIP_POSTGRES=1` skips it; `GOTRY_SKIP_MYSQL=1` leaves MariaDB out.
//! Every store is durable: PostgreSQL with `synchronous_commit = on` (the store refuses
//! `off`), InnoDB flushing its log at each commit, SQLite in WAL with `synchronous = FULL`.

use std::time::{Duration, Instant};

use gotry_tenant_state::{
    LeaseStore, MysqlLeaseStore, MysqlOptions, PostgresLeaseStore, PostgresOptions, SqliteLeaseStore,
};
use gotry_test_support::{mysql, postgres};

/// How long each operation is repeated.
const RUN: Duration = Duration::from_secs(2);
/// Leases renewed by one keeper round (one batch, one transaction).
const ROUND: usize = 1_000;

/// Operations per second of `step`.
fn rate(mut step: impl FnMut(u64)) -> f64 {
    step(0); // warm: connections, page cache
    let started = Instant::now();
    let mut steps = 0u64;
    while started.elapsed() < RUN {
        steps += 1;
        step(steps);
    }
    steps as f64 / started.elapsed().as_secs_f64()
}

/// acquire of a new key, renew of a held lease, release of a held lease, and keeper
/// rounds of 1 000 leases (rounds per second).
fn measure(name: &str, store: &dyn LeaseStore) -> [f64; 4] {
    let acquires = rate(|n| {
        store.acquire(&format!("{name}-a{n}"), "o", 60_000).unwrap();
    });
    let held = store.acquire("renewed", "o", 600_000).unwrap();
    let renews = rate(|_| {
        store.renew("renewed", "o", held.record.epoch, 600_000).unwrap();
    });
    // A holder may release its epoch again, even after it ran out: each one a write.
    let released = store.acquire("released", "o", 600_000).unwrap();
    let releases = rate(|_| {
        store.release("released", "o", released.record.epoch).unwrap();
    });
    let keys: Vec<String> = (0..ROUND).map(|i| format!("round-{i}")).collect();
    let leases: Vec<(&str, i64)> = keys
        .iter()
        .map(|key| {
            (
                key.as_str(),
                store.acquire(key, "o", 600_000).unwrap().record.epoch,
            )
        })
        .collect();
    let rounds = rate(|_| {
        let answers = store.renew_batch("o", 600_000, &leases).unwrap();
        assert!(answers.iter().all(Result::is_ok));
    });
    [acquires, renews, releases, rounds]
}

fn main() {
    // A bench cannot be marked ignored: it says it skipped, where the tests' list would.
    if cfg!(gotry_skip_postgres) {
        eprintln!("SKIPPED the PostgreSQL store benchmark: {}=1", postgres::SKIP_VAR);
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let sqlite = SqliteLeaseStore::open(dir.path().join("bench.db")).unwrap();
    let mut columns: Vec<(&str, [f64; 4])> = vec![("sqlite", measure("sqlite", &sqlite))];

    let mut _mysql_scratch = None;
    if cfg!(gotry_skip_mysql) {
        eprintln!("MariaDB left out: {}=1", mysql::SKIP_VAR);
    } else {
        let url = mysql::server_url();
        let mut scratch = mysql::ScratchTables::new(&url);
        let mut options = MysqlOptions::from_url(&url).unwrap();
        options.table_prefix = mysql::fresh_prefix();
        let store = MysqlLeaseStore::open(options).unwrap_or_else(|e| mysql::no_server(&url, &e));
        let (leases, log) = store.table_names();
        scratch.add(leases, log);
        columns.push(("mariadb", measure("mysql", &store)));
        _mysql_scratch = Some(scratch);
    }

    let url = postgres::server_url();
    let mut scratch = postgres::ScratchTables::new(&url);
    let mut options = PostgresOptions::from_url(&url).unwrap();
    options.table_prefix = postgres::fresh_prefix();
    scratch.add(&options.table_prefix);
    let store = PostgresLeaseStore::open(options).unwrap_or_else(|e| postgres::no_server(&url, &e));
    columns.push(("postgres", measure("postgres", &store)));

    print!("{:<34}", "per second (ratio to sqlite)");
    for (name, _) in &columns {
        print!(" {name:>20}");
    }
    println!();
    for (i, what) in ["acquire", "renew", "release", "keeper round of 1 000 leases"]
        .into_iter()
        .enumerate()
    {
        print!("{what:<34}");
        for (_, figures) in &columns {
            let text = format!("{:.1} ({:.2})", figures[i], figures[i] / columns[0].1[i]);
            print!(" {text:>20}");
        }
        println!();
    }
}
