//! Hostile and careless input at the core's public entry points: names that would reach the
//! working directory or the whole disk, refused before anything is read or written.

use std::path::Path;
use std::sync::Arc;

use gotry_tenant_state::{
    open_durable_store, DirectoryDurableStore, DurableStore, EpochCopies, LeaseOptions, LeaseStore,
    ManualClock, RouterOptions, SqliteLeaseStore, TenantLease, TenantRouter,
};

const KEY: &str = "acme/t-0123456789abcdef0123456789abcdef";

struct World {
    dir: tempfile::TempDir,
    durable: Arc<DirectoryDurableStore>,
    leases: Arc<SqliteLeaseStore>,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let durable = Arc::new(DirectoryDurableStore::open(dir.path().join("durable")).unwrap());
    let leases = Arc::new(SqliteLeaseStore::open(dir.path().join("leases.db")).unwrap());
    World { dir, durable, leases }
}

impl World {
    fn lease(&self) -> TenantLease {
        TenantLease::acquire(LeaseOptions {
            key: KEY.into(),
            replica_id: "replica-a".into(),
            store: self.leases.clone(),
            ttl_ms: 60_000,
            margin_ms: 1_000,
            clock: Arc::new(ManualClock::new(0)),
        })
        .unwrap()
    }

    /// A holder, and one copy of its root of one file.
    fn one_copy(&self) -> (TenantLease, EpochCopies, std::path::PathBuf) {
        let lease = self.lease();
        let copies = EpochCopies::new(self.durable.clone());
        let root = self.dir.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("f.txt"), b"x").unwrap();
        copies.write_copy(&lease, &root).unwrap();
        (lease, copies, root)
    }

    fn objects(&self) -> usize {
        self.durable.list("").unwrap().len()
    }
}

fn assert_invalid<T: std::fmt::Debug>(what: &str, result: gotry_tenant_state::Result<T>) {
    let error = result.unwrap_err();
    assert_eq!(error.code_str(), "ERR_OUT_OF_RANGE", "{what}: {error}");
}

#[test]
fn empty_and_file_system_roots_are_refused_before_any_io() {
    let w = world();
    let lease = w.lease();
    let copies = EpochCopies::new(w.durable.clone());
    for root in ["", "/", "//", "/..", "/tmp/../.."] {
        let root = Path::new(root);
        assert_invalid("write_copy", copies.write_copy(&lease, root));
        assert_invalid("restore", copies.restore(&lease, root, None));
        assert_invalid("restore_latest", copies.restore_latest(KEY, 0, None, root, None));
        let options = RouterOptions::new(
            w.leases.clone(),
            w.durable.clone(),
            root.to_path_buf(),
            "replica-r".into(),
            60_000,
            1_000,
        );
        assert_invalid("router state root", TenantRouter::start(options).map(drop));
    }
    // A restore writes its tenure marker before it installs; a copy writes objects: nothing.
    assert_eq!(w.objects(), 0);
    for path in ["", "/", "/.."] {
        assert_invalid("directory store", DirectoryDurableStore::open(path));
    }
    for url in ["file:", "file://", "file:///", "file:///.."] {
        assert_invalid(url, open_durable_store(url).map(drop));
    }
    assert!(!Path::new("/.staging").exists());
    drop(w.dir);
}

/// The only test of this binary that moves the working directory (the others use absolute
/// paths alone, so it cannot disturb them).
#[test]
fn a_restore_never_replaces_the_folder_holding_the_working_directory() {
    let w = world();
    let lease = w.lease();
    let copies = EpochCopies::new(w.durable.clone());
    let root = w.dir.path().join("root");
    std::fs::create_dir_all(root.join("inner")).unwrap();
    std::fs::write(root.join("keep.txt"), b"mine").unwrap();
    let before = std::env::current_dir().unwrap();
    for cwd in [root.clone(), root.join("inner")] {
        std::env::set_current_dir(&cwd).unwrap();
        let refused = copies.restore(&lease, &root, None);
        let relative = copies.restore_latest(KEY, 0, None, Path::new("."), None);
        std::env::set_current_dir(&before).unwrap();
        let error = refused.unwrap_err();
        assert_eq!(error.code_str(), "ERR_OUT_OF_RANGE", "{error}");
        assert!(error.to_string().contains("working directory"), "{error}");
        assert_invalid("restore of .", relative);
    }
    assert_eq!(std::fs::read(root.join("keep.txt")).unwrap(), b"mine");
    assert_eq!(w.objects(), 0);
    // Elsewhere the same restore runs: an empty start empties the root.
    copies.restore(&lease, &root, None).unwrap();
    assert!(!root.join("keep.txt").exists());
}

#[test]
fn a_lease_whose_tenant_is_marked_forgotten_writes_no_copy() {
    let w = world();
    let (lease, copies, root) = w.one_copy();
    lease.mark_forgotten().unwrap();
    assert_eq!(copies.forget_copies(&lease).unwrap().len(), 1);
    let error = copies.write_copy(&lease, &root).unwrap_err();
    assert_eq!(error.code_str(), "GOTRY_TENANT_COPY_CONFLICT", "{error}");
    assert!(error.to_string().contains("marked forgotten"), "{error}");
    assert!(copies.list(KEY).unwrap().is_empty());
}

/// An operator who forgets the tenant in the store (the CLI's `lease forget`), not through the
/// holder: the holder learns it at its next renewal, and writes no copy below the floor after.
#[test]
fn a_forget_made_in_the_store_stops_the_holders_copies_from_its_next_renewal() {
    let w = world();
    let (lease, copies, root) = w.one_copy();
    w.leases.mark_forgotten(KEY, "replica-a", lease.epoch()).unwrap();
    assert!(!lease.is_marked_forgotten(), "nothing has told the holder yet");
    lease.renew().unwrap();
    assert!(lease.is_marked_forgotten());
    let error = copies.write_copy(&lease, &root).unwrap_err();
    assert_eq!(error.code_str(), "GOTRY_TENANT_COPY_CONFLICT", "{error}");
    assert_eq!(copies.list(KEY).unwrap().len(), 1, "no copy after the first");
}
