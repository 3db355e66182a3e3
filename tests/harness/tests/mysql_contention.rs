//! Four OS processes hammer one set of MySQL/MariaDB tables; the log must then prove every
//! lease rule. The same check as the SQLite run, on the store that replicas on many hosts
//! share, where the row lock and the server's clock do what SQLite's file lock and the
//! host's clock did.
//!
//! `GOTRY_SKIP_MYSQL=1` marks it ignored; otherwise a missing server fails it.

use std::process::Command;

use gotry_tenant_harness::audit;
use gotry_tenant_state::{LeaseStore, MysqlLeaseStore};
use gotry_test_support::mysql::{self as server, ScratchTables};

const TTL_MS: i64 = 150;
const WORKERS: usize = 4;

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn four_processes_share_one_mysql_table_without_breaking_a_rule() {
    let url = server::server_url();
    let prefix = server::fresh_prefix();
    let store_url = server::with_option(&url, "prefix", &prefix);
    // Dropped after the store, as declared before it.
    let mut scratch = ScratchTables::new(&url);
    // Created once up front, so the workers race on leases rather than on the schema.
    let store = MysqlLeaseStore::open_url(&store_url).unwrap_or_else(|e| server::no_server(&url, &e));
    let (leases, log) = store.table_names();
    scratch.add(leases, log);
    let dir = tempfile::tempdir().unwrap();
    let workers: Vec<_> = (0..WORKERS)
        .map(|i| {
            let acks = dir.path().join(format!("w{i}.jsonl"));
            let child = Command::new(env!("CARGO_BIN_EXE_lease-worker"))
                .args(["--store", &store_url, "--owner", &format!("w{i}")])
                .args([
                    "--keys",
                    "4",
                    "--ttl-ms",
                    &TTL_MS.to_string(),
                    "--duration-ms",
                    "3000",
                ])
                .args(["--acks", acks.to_str().unwrap(), "--seed", &(i + 1).to_string()])
                .spawn()
                .unwrap();
            (child, acks)
        })
        .collect();
    let mut acks = Vec::new();
    for (mut child, path) in workers {
        assert!(child.wait().unwrap().success(), "a worker failed");
        acks.extend(gotry_tenant_harness::read_acks(&path).unwrap());
    }
    let report = audit::audit(
        &store.history(None).unwrap(),
        TTL_MS,
        &acks,
        &store.list("").unwrap(),
    );
    println!(
        "mysql: processes={WORKERS} tables={prefix}* log_entries={} acquires={} acknowledged={} violations={}",
        report.entries,
        report.acquires,
        report.acknowledged,
        report.violations.len()
    );
    assert!(report.is_clean(), "{:#?}", report.violations);
    assert!(
        report.acquires > WORKERS,
        "too little contention to prove anything: {report:?}"
    );
    assert_eq!(
        report.acknowledged, report.entries,
        "every granted operation was acknowledged to someone"
    );
}
