//! The contention runs of every store: the same workers on the same schedule, and the same
//! audit of the log they leave, so that only the store differs between them.

use std::path::Path;
use std::process::Command;

use gotry_tenant_harness::audit::{self, Acknowledged};
use gotry_tenant_state::LeaseStore;

pub const TTL_MS: i64 = 150;

/// Runs `workers` lease-worker processes at once on `store` (a path or a URL) for three
/// seconds, owners w0, w1, ..., and returns what each was told, from its file in `dir`.
pub fn run_workers(store: &str, dir: &Path, workers: usize) -> Vec<Acknowledged> {
    let running: Vec<_> = (0..workers)
        .map(|i| {
            let acks = dir.join(format!("w{i}.jsonl"));
            let child = Command::new(env!("CARGO_BIN_EXE_lease-worker"))
                .args(["--store", store, "--owner", &format!("w{i}")])
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
    for (mut child, path) in running {
        assert!(child.wait().unwrap().success(), "a worker failed");
        acks.extend(gotry_tenant_harness::read_acks(&path).unwrap());
    }
    acks
}

/// The log of `store` breaks no lease rule, shows contention among the `workers`, and
/// every operation it grants was acknowledged to someone. `run` names the run in the
/// summary line.
pub fn assert_rules_held(store: &dyn LeaseStore, acks: &[Acknowledged], workers: usize, run: &str) {
    let report = audit::audit(
        &store.history(None).unwrap(),
        TTL_MS,
        acks,
        &store.list("").unwrap(),
    );
    println!(
        "{run}: processes={workers} log_entries={} acquires={} acknowledged={} violations={}",
        report.entries,
        report.acquires,
        report.acknowledged,
        report.violations.len()
    );
    assert!(report.is_clean(), "{:#?}", report.violations);
    assert!(
        report.acquires > workers,
        "too little contention to prove anything: {report:?}"
    );
    assert_eq!(
        report.acknowledged, report.entries,
        "every granted operation was acknowledged to someone"
    );
}
