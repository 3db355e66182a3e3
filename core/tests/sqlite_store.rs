//! What only a real SQLite file can show: the shared format, the triggers, durability
//! settings, contention with another connection, and files that are not lease stores.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use gotry_tenant_state::{
    call_begun_at, Error, HostClock, LeaseStore, ManualClock, SqliteLeaseStore, SqliteOptions, WallClock,
};
use gotry_test_support::conformance;
use rusqlite::Connection;

fn store_at(path: &std::path::Path, clock: Arc<ManualClock>, busy_ms: u64) -> SqliteLeaseStore {
    let options = SqliteOptions {
        clock,
        busy_timeout: Duration::from_millis(busy_ms),
    };
    SqliteLeaseStore::open_with(path, options).unwrap()
}

fn storage_code(result: Result<impl std::fmt::Debug, Error>) -> String {
    match result {
        Err(Error::Storage { code, .. }) => code,
        other => panic!("expected a storage error, got {other:?}"),
    }
}

#[test]
fn the_schema_is_the_reference_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/folder/leases.db");
    SqliteLeaseStore::open(&path).unwrap().close().unwrap();
    let raw = Connection::open(&path).unwrap();
    let mut names: Vec<(String, String)> = raw
        .prepare("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    names.sort();
    // The reference's tables and triggers as they are, and beside them only objects named
    // gotry_* (the host clock, the log's pruning), which the reference never reads.
    let expected = [
        ("index", "gotry_lease_log_tenure"),
        ("table", "gotry_lease_host_clock"),
        ("table", "gotry_lease_log_pruned"),
        ("table", "lease_log"),
        ("table", "leases"),
        ("trigger", "leases_epoch_forward_only"),
        ("trigger", "leases_forgotten_floor_forward_only"),
        ("trigger", "leases_never_deleted"),
    ];
    assert_eq!(names, expected.map(|(a, b)| (a.to_owned(), b.to_owned())));
    let columns = |table: &str| -> Vec<String> {
        raw.prepare(&format!(
            "SELECT name FROM pragma_table_info('{table}') ORDER BY cid"
        ))
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    assert_eq!(
        columns("leases"),
        ["key", "owner", "epoch", "lease_until_ms", "forgotten_at_epoch"]
    );
    assert_eq!(
        columns("lease_log"),
        ["id", "key", "op", "owner", "epoch", "at_ms"]
    );
    let mode: String = raw.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal", "the store leaves the file in WAL mode");
}

#[test]
fn the_triggers_refuse_what_the_rules_forbid() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leases.db");
    let store = SqliteLeaseStore::open(&path).unwrap();
    store.acquire("k", "o", 1_000).unwrap();
    store.mark_forgotten("k", "o", 1).unwrap();
    let raw = Connection::open(&path).unwrap();
    for sql in [
        "UPDATE leases SET epoch = epoch + 2 WHERE key = 'k'",
        "UPDATE leases SET epoch = epoch - 1 WHERE key = 'k'",
        "UPDATE leases SET forgotten_at_epoch = 0 WHERE key = 'k'",
        "DELETE FROM leases WHERE key = 'k'",
        "INSERT INTO lease_log (key, op, owner, epoch, at_ms) VALUES ('k', 'steal', 'o', 1, 0)",
        "INSERT INTO leases (key, owner, epoch, lease_until_ms) VALUES ('z', 'o', 0, 0)",
    ] {
        let error = raw.execute(sql, []).expect_err(sql);
        assert!(
            error.to_string().contains("constraint")
                || error.to_string().contains("never")
                || error.to_string().contains("moves"),
            "{sql}: {error}"
        );
    }
    let record = store.read("k").unwrap().unwrap();
    assert_eq!((record.epoch, record.forgotten_at_epoch), (1, 1));
}

#[test]
fn acknowledged_operations_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leases.db");
    let clock = Arc::new(ManualClock::new(1_000));
    let store = store_at(&path, clock.clone(), 5_000);
    store.acquire("k", "a", 500).unwrap();
    store.renew("k", "a", 1, 800).unwrap();
    // No close: the handle is dropped as a crashing process would drop it.
    drop(store);
    let reopened = store_at(&path, clock, 5_000);
    assert_eq!(reopened.read("k").unwrap().unwrap().lease_until_ms, 1_800);
    assert_eq!(reopened.history(None).unwrap().len(), 2);
}

#[test]
fn a_held_write_lock_is_unavailability_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leases.db");
    let store = store_at(&path, Arc::new(ManualClock::new(0)), 200);
    store.acquire("k", "a", 1_000).unwrap();
    let other = Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = Instant::now();
    match store.renew("k", "a", 1, 1_000) {
        Err(Error::LeaseStoreUnavailable { .. }) => {}
        other => panic!("{other:?}"),
    }
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "it waited for the busy timeout first"
    );
    // Readers are not blocked by a writer in WAL mode.
    assert_eq!(store.read("k").unwrap().unwrap().epoch, 1);
    other.execute_batch("COMMIT").unwrap();
    store.renew("k", "a", 1, 1_000).unwrap();
}

#[test]
fn files_that_are_not_lease_stores_are_clear_storage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.db");
    let bytes: Vec<u8> = (0..8192u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&garbage, &bytes).unwrap();
    assert_eq!(storage_code(SqliteLeaseStore::open(&garbage)), "SQLITE_NOTADB");
    assert_eq!(
        std::fs::read(&garbage).unwrap(),
        bytes,
        "the file was left as it was"
    );

    let folder = dir.path().join("a-folder");
    std::fs::create_dir(&folder).unwrap();
    assert!(storage_code(SqliteLeaseStore::open(&folder)).starts_with("SQLITE_CANTOPEN"));

    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    assert_eq!(
        storage_code(SqliteLeaseStore::open(file.join("under/leases.db"))),
        "ENOTDIR"
    );

    // A valid SQLite file whose header page was then damaged.
    let damaged = dir.path().join("damaged.db");
    let store = SqliteLeaseStore::open(&damaged).unwrap();
    for i in 0..200 {
        store.acquire(&format!("key-{i}"), "o", 1_000).unwrap();
    }
    store.close().unwrap();
    let _ = std::fs::remove_file(dir.path().join("damaged.db-wal"));
    let mut content = std::fs::read(&damaged).unwrap();
    for byte in content.iter_mut().skip(16).take(84) {
        *byte = 0xA5;
    }
    std::fs::write(&damaged, &content).unwrap();
    let code = match SqliteLeaseStore::open(&damaged) {
        Ok(store) => storage_code(store.list("")),
        Err(error) => storage_code(Err::<(), _>(error)),
    };
    assert!(
        code.starts_with("SQLITE_CORRUPT") || code == "SQLITE_NOTADB",
        "{code}"
    );
}

#[test]
fn views_with_another_clock_share_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_at(
        &dir.path().join("leases.db"),
        Arc::new(ManualClock::new(0)),
        5_000,
    );
    let later = store.with_clock(Arc::new(ManualClock::new(10_000)));
    store.acquire("k", "a", 1_000).unwrap();
    assert_eq!(later.acquire("k", "b", 1_000).unwrap().record.epoch, 2);
    assert_eq!(store.history(None).unwrap().len(), 2);
    later.close().unwrap();
    assert!(
        matches!(store.read("k"), Err(Error::LeaseStoreUnavailable { .. })),
        "one connection, one close"
    );
}

#[test]
fn opening_an_existing_store_does_not_wait_for_the_write_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leases.db");
    SqliteLeaseStore::open(&path).unwrap().close().unwrap();
    let other = Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    // With a 100 ms busy timeout, an open that needed the lock would fail as unavailable.
    let store = store_at(&path, Arc::new(ManualClock::new(0)), 100);
    assert_eq!(store.read("k").unwrap(), None);
    other.execute_batch("COMMIT").unwrap();
}

#[test]
fn a_sqlite_store_works_on_one_call_at_a_time() {
    // Hosts that queue calls per store (the Node addon) rely on this to run them back to back.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leases.db");
    assert_eq!(SqliteLeaseStore::open(&path).unwrap().concurrent_calls(), 1);
    let by_url = gotry_tenant_state::open_lease_store(&format!("sqlite://{}", path.display())).unwrap();
    assert_eq!(by_url.concurrent_calls(), 1);
}

#[test]
fn calls_queued_behind_a_locked_file_end_within_one_busy_timeout() {
    const BUSY_MS: u64 = 300;
    const CALLERS: usize = 8;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leases.db");
    let store = store_at(&path, Arc::new(ManualClock::new(1_000_000)), BUSY_MS);
    let other = Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    // The calls queue on the store's one connection; each one's wait counts from its start.
    let start = Barrier::new(CALLERS);
    let took: Vec<(Duration, Result<_, Error>)> = std::thread::scope(|scope| {
        let callers: Vec<_> = (0..CALLERS)
            .map(|i| {
                let (store, start) = (&store, &start);
                scope.spawn(move || {
                    start.wait();
                    let started = Instant::now();
                    let outcome = store.acquire(&format!("k{i}"), "o", 10_000);
                    (started.elapsed(), outcome)
                })
            })
            .collect();
        callers.into_iter().map(|c| c.join().unwrap()).collect()
    });
    other.execute_batch("ROLLBACK").unwrap();
    let worst = took.iter().map(|(took, _)| *took).max().unwrap();
    println!(
        "{CALLERS} calls behind a locked file, busy timeout {BUSY_MS} ms: the last ended after {worst:?}"
    );
    // A bound with room for a loaded machine, not a speed test.
    let bound = Duration::from_millis(BUSY_MS + 250);
    for (took, outcome) in &took {
        assert!(
            matches!(outcome, Err(Error::LeaseStoreUnavailable { .. })),
            "{outcome:?}"
        );
        assert!(*took <= bound, "a call took {took:?}, more than {bound:?}");
    }
    assert_eq!(store.acquire("k0", "o", 10_000).unwrap().record.epoch, 1);
}

#[test]
fn time_a_call_spent_queued_in_its_host_counts_against_its_busy_timeout() {
    const BUSY: Duration = Duration::from_millis(1_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leases.db");
    let store = store_at(
        &path,
        Arc::new(ManualClock::new(1_000_000)),
        BUSY.as_millis() as u64,
    );
    // Its whole busy timeout spent in a queue: refused before the file is touched, free as
    // the file is.
    let started = Instant::now();
    let late = call_begun_at(started - BUSY, || store.acquire("k", "o", 10_000));
    assert!(
        matches!(late, Err(Error::LeaseStoreUnavailable { .. })),
        "{late:?}"
    );
    assert!(store.history(None).unwrap().is_empty());
    // Most of it spent: what is left is all it waits for another writer.
    let other = Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = Instant::now();
    let queued = call_begun_at(started - Duration::from_millis(800), || {
        store.acquire("k", "o", 10_000)
    });
    let waited = started.elapsed();
    assert!(
        matches!(queued, Err(Error::LeaseStoreUnavailable { .. })),
        "{queued:?}"
    );
    assert!(waited < Duration::from_millis(600), "{waited:?}");
    other.execute_batch("ROLLBACK").unwrap();
    assert_eq!(store.acquire("k", "o", 10_000).unwrap().record.epoch, 1);
}

#[test]
fn conformance() {
    let dir = tempfile::tempdir().unwrap();
    let counter = AtomicUsize::new(0);
    conformance::run_all(&|clock: Arc<ManualClock>| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        let options = SqliteOptions {
            clock,
            ..SqliteOptions::default()
        };
        Arc::new(SqliteLeaseStore::open_with(dir.path().join(format!("s{n}/leases.db")), options).unwrap())
    });
}

#[test]
fn conformance_on_the_host_clock() {
    let dir = tempfile::tempdir().unwrap();
    let counter = AtomicUsize::new(0);
    conformance::run_all(&|clock: Arc<ManualClock>| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        // The host clock is the test's clock itself: every rule must read the same.
        struct Both(Arc<ManualClock>);
        impl WallClock for Both {
            fn now_ms(&self) -> Result<i64, Error> {
                Ok(self.0.get())
            }
            fn host_clock(&self) -> Option<&dyn HostClock> {
                Some(self)
            }
        }
        impl HostClock for Both {
            fn id(&self) -> &str {
                "test-boot"
            }
            fn now_ms(&self) -> Result<i64, Error> {
                Ok(self.0.get())
            }
        }
        let options = SqliteOptions {
            clock: Arc::new(Both(clock)),
            ..SqliteOptions::default()
        };
        Arc::new(SqliteLeaseStore::open_with(dir.path().join(format!("s{n}/leases.db")), options).unwrap())
    });
}
