//! Stores that cannot be used: each gets its own exit status and a one-line report, and
//! inspection never creates a store as a side effect.

use std::time::Duration;

use crate::Sandbox;

#[test]
fn a_missing_store_is_reported_and_not_created() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(["lease", "list"]);
    let line = run.failed(7, "ENOENT");
    assert!(line.contains("no lease store at ./gotry-leases.db"), "{line}");
    assert!(line.contains("--store"), "the hint says what to do: {line}");
    assert!(!sandbox.path("gotry-leases.db").exists());
    let error = sandbox.run(["lease", "read", "acme/k", "--store", "nope.db", "--json"]);
    error.failed_json(7, "ENOENT");
    assert!(!sandbox.path("nope.db").exists());
}

#[test]
fn the_default_store_is_used_when_it_exists() {
    let sandbox = Sandbox::new();
    let store = gotry_tenant_state::SqliteLeaseStore::open(sandbox.path("gotry-leases.db")).unwrap();
    gotry_tenant_state::LeaseStore::acquire(&store, "acme/k", "replica-a", 60_000).unwrap();
    drop(store);
    let list = sandbox.run(["lease", "list", "--json"]).json();
    assert_eq!(list["leases"][0]["key"], "acme/k");
    assert_eq!(list["leases"][0]["owner"], "replica-a");
}

#[test]
fn a_store_path_under_a_file_is_unreachable() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.path("plain-file"), b"x").unwrap();
    let run = sandbox.run(["lease", "list", "--store", "plain-file/leases.db"]);
    let line = run.failed(7, "ENOTDIR");
    assert!(line.contains("plain-file/leases.db"), "{line}");
    // The demo creates its store, and the core refuses the folder it cannot create.
    let demo = sandbox.run(["demo", "--store", "plain-file/leases.db"]);
    let line = demo.failed(7, "ENOTDIR");
    assert!(
        line.contains("cannot open the lease store plain-file/leases.db"),
        "{line}"
    );
}

#[test]
fn an_unknown_url_scheme_is_invalid_input() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(["lease", "list", "--store", "redis://user:hunter2@cache:6379/0"]);
    let line = run.failed(5, "ERR_OUT_OF_RANGE");
    assert!(line.contains("redis"), "{line}");
    assert!(!line.contains("hunter2"), "the password leaked: {line}");
    assert!(line.contains("--store takes a file path"), "{line}");
    let url = sandbox.run(["lease", "list", "--store", "sqlite:"]);
    url.failed(5, "ERR_OUT_OF_RANGE");
}

#[test]
fn a_sqlite_url_opens_an_existing_store() {
    let sandbox = Sandbox::new();
    let path = sandbox.path("by-url.db");
    let store = gotry_tenant_state::SqliteLeaseStore::open(&path).unwrap();
    gotry_tenant_state::LeaseStore::acquire(&store, "acme/u", "replica-u", 60_000).unwrap();
    drop(store);
    let url = format!("sqlite://{}", path.display());
    let read = sandbox
        .run(["lease", "read", "acme/u", "--store", &url, "--json"])
        .json();
    assert_eq!(read["owner"], "replica-u");
}

#[test]
fn a_file_that_is_not_a_lease_store_is_a_storage_error() {
    let sandbox = Sandbox::new();
    // Bytes from a fixed generator: never a SQLite header, the same on every run.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let bytes: Vec<u8> = (0..8192)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect();
    std::fs::write(sandbox.path("random.bin"), &bytes).unwrap();
    let run = sandbox.run(["lease", "list", "--store", "random.bin"]);
    let line = run.failed(7, "SQLITE_NOTADB");
    assert!(line.contains("cannot open the lease store random.bin"), "{line}");
    let json = sandbox.run(["lease", "history", "--store", "random.bin", "--json"]);
    let error = json.failed_json(7, "SQLITE_NOTADB");
    assert_eq!(error["kind"], "storage");
    // Nothing was written into it.
    assert_eq!(std::fs::read(sandbox.path("random.bin")).unwrap(), bytes);
}

/// Another process holds the store's write lock past the busy timeout (5 s): a repair that
/// must write finds the store unavailable, which tells a script to retry rather than to
/// repair anything. (Reads still answer: the store runs in WAL mode.)
#[test]
fn a_locked_store_is_unavailable() {
    let sandbox = Sandbox::new();
    let path = sandbox.path("locked.db");
    drop(gotry_tenant_state::SqliteLeaseStore::open(&path).unwrap());
    let locker = rusqlite::Connection::open(&path).unwrap();
    locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let command = sandbox.command([
        "lease",
        "release",
        "k",
        "--owner",
        "o",
        "--epoch",
        "1",
        "--store",
        "locked.db",
    ]);
    let started = std::time::Instant::now();
    let run = crate::run(command);
    let line = run.failed(6, "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    assert!(line.contains("busy"), "{line}");
    assert!(line.contains("retry later"), "{line}");
    // It waited for the lock instead of failing at once.
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    locker.execute_batch("ROLLBACK").unwrap();
    assert_eq!(
        sandbox.run(["lease", "list", "--store", "locked.db"]).ok(),
        "no leases\n"
    );
}

#[test]
fn a_folder_as_store_is_named_a_folder() {
    let sandbox = Sandbox::new();
    std::fs::create_dir(sandbox.path("leases.db")).unwrap();
    for args in [
        vec!["lease", "list", "--store", "leases.db"],
        vec!["lease", "compact", "--store", "leases.db"],
        vec!["router", "status", "--store", "leases.db"],
        vec!["demo", "--store", "leases.db"],
    ] {
        let run = sandbox.run(&args);
        let line = run.failed(7, "EISDIR");
        assert!(line.contains("leases.db is a folder"), "{args:?}: {line}");
    }
}

/// The CLI hands a `postgres://` URL to the core's opener, with no logic of its own: what
/// a core store wrote there, the CLI reads. The server is `GOTRY_POSTGRES_URL` or the local
/// one that scripts/postgres.sh starts.
#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn a_postgres_url_opens_the_store_on_the_server() {
    let base = std::env::var("GOTRY_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let prefix = format!("gtcli{}_", std::process::id());
    let url = format!(
        "{base}{}prefix={prefix}",
        if base.contains('?') { '&' } else { '?' }
    );
    let store = gotry_tenant_state::open_lease_store(&url).unwrap_or_else(|e| {
        panic!("no PostgreSQL server (scripts/postgres.sh, or GOTRY_SKIP_POSTGRES=1): {e}")
    });
    store.acquire("acme/pg", "replica-pg", 60_000).unwrap();
    let sandbox = Sandbox::new();
    let read = sandbox
        .run(["lease", "read", "acme/pg", "--store", &url, "--json"])
        .json();
    let postgresql = url.replacen("postgres://", "postgresql://", 1);
    let list = sandbox
        .run(["lease", "list", "--store", &postgresql, "--json"])
        .json();
    // Best effort: the store never drops its tables.
    let _ = std::process::Command::new("psql")
        .args([
            "-X",
            "-q",
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            "test",
            "-c",
        ])
        .arg(format!(
            "DROP TABLE IF EXISTS {prefix}leases, {prefix}lease_log, {prefix}lease_log_pruned CASCADE; \
             DROP FUNCTION IF EXISTS {prefix}leases_guard(), {prefix}lease_log_guard()"
        ))
        .status();
    assert_eq!(read["owner"], "replica-pg");
    assert_eq!(read["epoch"], 1);
    assert_eq!(list["leases"][0]["key"], "acme/pg");
}
