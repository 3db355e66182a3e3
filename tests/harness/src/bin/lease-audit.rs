//! Audits a SQLite lease store after a contention or crash run.
//!
//! `lease-audit --store FILE_OR_URL --ttl-ms TTL [ACKFILE...]`: replays the store's log
//! with the run's one TTL, checks every rule, checks that each acknowledged operation is in
//! the log, and (for a SQLite file) runs SQLite's integrity check. A URL (`mysql://...`)
//! audits any store that `open_lease_store` opens. Prints one summary line (and one line per
//! violation); exits 0 when clean, 1 on a violation, 2 on bad arguments or I/O.

use std::path::PathBuf;
use std::process::ExitCode;

use std::sync::Arc;

use gotry_tenant_harness::audit;
use gotry_tenant_state::{open_lease_store, secrets, LeaseStore, SqliteLeaseStore};

fn main() -> ExitCode {
    match run(std::env::args().skip(1)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(message) => {
            // Ack-file paths and core errors are quoted as they are: mask them the way
            // every door does.
            eprintln!("lease-audit: {}", secrets::mask(&message));
            ExitCode::from(2)
        }
    }
}

fn run(mut args: impl Iterator<Item = String>) -> Result<bool, String> {
    let (mut store, mut ttl_ms, mut ack_files) = (None, None, Vec::new());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--store" => store = Some(args.next().ok_or("--store needs a file or a URL")?),
            "--ttl-ms" => {
                let value = args.next().ok_or("--ttl-ms needs a number")?;
                ttl_ms = Some(
                    value
                        .parse::<i64>()
                        .map_err(|_| format!("--ttl-ms {value:?} is not an integer"))?,
                );
            }
            _ => ack_files.push(PathBuf::from(arg)),
        }
    }
    let store_name = store.ok_or("usage: lease-audit --store FILE_OR_URL --ttl-ms TTL [ACKFILE...]")?;
    let ttl_ms = ttl_ms.ok_or("--ttl-ms is required")?;
    let mut acks = Vec::new();
    for file in &ack_files {
        acks.extend(gotry_tenant_harness::read_acks(file)?);
    }
    let (store, integrity): (Arc<dyn LeaseStore>, String) = if store_name.contains("://") {
        (
            open_lease_store(&store_name).map_err(|e| e.to_string())?,
            "n/a".into(),
        )
    } else {
        let path = PathBuf::from(&store_name);
        if !path.is_file() {
            return Err(format!(
                "--store {} names no file and is not a URL (scheme://...)",
                secrets::shown_argument(&store_name)
            ));
        }
        let integrity = rusqlite::Connection::open(&path)
            .and_then(|c| c.query_row("PRAGMA integrity_check", [], |row| row.get(0)))
            .map_err(|e| format!("integrity check: {e}"))?;
        (
            Arc::new(SqliteLeaseStore::open(&path).map_err(|e| e.to_string())?),
            integrity,
        )
    };
    let history = store.history(None).map_err(|e| e.to_string())?;
    let records = store.list("").map_err(|e| e.to_string())?;
    store.close().map_err(|e| e.to_string())?;
    let mut report = audit::audit(&history, ttl_ms, &acks, &records);
    if integrity != "ok" && integrity != "n/a" {
        report
            .violations
            .push(format!("PRAGMA integrity_check answered {integrity:?}"));
    }
    println!(
        "lease-audit: keys={} log_entries={} acquires={} acknowledged={} integrity={} violations={}",
        report.keys,
        report.entries,
        report.acquires,
        report.acknowledged,
        integrity,
        report.violations.len()
    );
    const SHOWN: usize = 20;
    for violation in report.violations.iter().take(SHOWN) {
        println!("violation: {violation}");
    }
    if report.violations.len() > SHOWN {
        println!("... and {} more violations", report.violations.len() - SHOWN);
    }
    Ok(report.is_clean())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn audit(store: &str) -> Result<bool, String> {
        run(["--store", store, "--ttl-ms", "1000"]
            .into_iter()
            .map(str::to_owned))
    }

    /// A store URL mistyped into a path, or a well-formed one that cannot be opened: the
    /// report never carries its password.
    #[test]
    fn a_store_password_never_shows_in_a_report() {
        for store in [
            "mysql//root:Pa55-leak@db.invalid/leases",
            "mysql:/root:Pa55-leak@db.invalid/leases",
            " mysql://root:Pa55-leak@db.invalid/leases",
            "mysql://root:Pa55-leak@127.0.0.1:1/leases?timeout_ms=500",
        ] {
            let message = audit(store).unwrap_err();
            assert!(!message.contains("Pa55-leak"), "{store:?}: {message}");
            assert!(!message.is_empty());
        }
        let message = audit("mysql//root:Pa55-leak@db.invalid/leases").unwrap_err();
        assert!(
            message.contains("names no file") && message.contains("@db.invalid"),
            "{message}"
        );
    }
}
