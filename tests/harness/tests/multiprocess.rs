//! Six OS processes hammer one SQLite file; the log must then prove every lease rule.

use std::process::Command;

use gotry_tenant_harness::audit;
use gotry_tenant_state::{LeaseStore, SqliteLeaseStore};

const TTL_MS: i64 = 150;

#[test]
fn six_processes_share_one_file_without_breaking_a_rule() {
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("leases.db");
    // Created once up front, so the workers race on leases rather than on the schema.
    SqliteLeaseStore::open(&store_path).unwrap().close().unwrap();
    let workers: Vec<_> = (0..6)
        .map(|i| {
            let acks = dir.path().join(format!("w{i}.jsonl"));
            let child = Command::new(env!("CARGO_BIN_EXE_lease-worker"))
                .args([
                    "--store",
                    store_path.to_str().unwrap(),
                    "--owner",
                    &format!("w{i}"),
                ])
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
    let store = SqliteLeaseStore::open(&store_path).unwrap();
    let report = audit::audit(
        &store.history(None).unwrap(),
        TTL_MS,
        &acks,
        &store.list("").unwrap(),
    );
    println!(
        "processes=6 log_entries={} acquires={} acknowledged={} violations={}",
        report.entries,
        report.acquires,
        report.acknowledged,
        report.violations.len()
    );
    assert!(report.is_clean(), "{:#?}", report.violations);
    assert!(
        report.acquires > 6,
        "too little contention to prove anything: {report:?}"
    );
    assert_eq!(
        report.acknowledged, report.entries,
        "every granted operation was acknowledged to someone"
    );
}
