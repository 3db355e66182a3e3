//! The copies' proofs, run on every backend: the directory, and an S3-compatible server.

mod incremental;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;

use super::snapshot::sqlite_failure;
use super::*;
use crate::clock::ManualClock;
use crate::durable_store::dir::DirectoryDurableStore;
use crate::lease_store::sqlite::SqliteLeaseStore;
use crate::lease_store::LeaseStore;
use crate::plumbing::random_u64;
use crate::tenant_lease::LeaseOptions;

const ORG: &str = "acme";
const TENANT: &str = "t-0123456789abcdef0123456789abcdef";
const OTHER_TENANT: &str = "t-fedcba9876543210fedcba9876543210";
const TTL: i64 = 10_000;

/// One scenario's world: a lease store on a manual clock, a durable store, state roots.
struct World {
    dir: tempfile::TempDir,
    wall: Arc<ManualClock>,
    leases: Arc<dyn LeaseStore>,
    durable: Arc<dyn DurableStore>,
    /// Where the directory backend keeps its objects, for the tests that tamper with them.
    objects: Option<PathBuf>,
    _server: Option<Box<dyn std::any::Any>>,
}

fn key() -> String {
    format!("{ORG}/{TENANT}")
}

impl World {
    fn directory() -> World {
        let dir = tempfile::tempdir().unwrap();
        let objects = dir.path().join("durable");
        let durable = Arc::new(DirectoryDurableStore::open(&objects).unwrap());
        World::with(dir, durable, Some(objects), None)
    }

    fn with(
        dir: tempfile::TempDir,
        durable: Arc<dyn DurableStore>,
        objects: Option<PathBuf>,
        server: Option<Box<dyn std::any::Any>>,
    ) -> World {
        let wall = Arc::new(ManualClock::new(1_000_000));
        let leases = Arc::new(
            SqliteLeaseStore::open(dir.path().join("leases.db"))
                .unwrap()
                .with_clock(wall.clone()),
        );
        World {
            dir,
            wall,
            leases,
            durable,
            objects,
            _server: server,
        }
    }

    fn holder(&self, replica: &str) -> TenantLease {
        TenantLease::acquire(LeaseOptions {
            key: key(),
            replica_id: replica.to_owned(),
            store: self.leases.clone(),
            ttl_ms: TTL,
            margin_ms: 1_000,
            clock: Arc::new(ManualClock::new(0)),
        })
        .unwrap()
    }

    /// Replica A holding the first epoch, its root already holding `entries`.
    fn first_holder_with(&self, entries: &[&str]) -> (TenantLease, PathBuf) {
        let a = self.holder("replica-a");
        let root = self.root("a");
        write_state(&root, entries);
        (a, root)
    }

    /// The holder of the next epoch. Every lease runs out first on the store's clock,
    /// without touching any holder's own clock: a holder that was frozen still believes
    /// its gate open.
    fn next_holder(&self, replica: &str) -> TenantLease {
        self.wall.advance(TTL + 1).unwrap();
        self.holder(replica)
    }

    /// What the next holder, `replica-{name}`, restores into a root of its own.
    fn restored_by_next_holder(&self, name: &str) -> Option<CopyId> {
        let holder = self.next_holder(&format!("replica-{name}"));
        self.copies()
            .restore(&holder, &self.root(name), None)
            .unwrap()
            .restored
    }

    fn root(&self, replica: &str) -> PathBuf {
        crate::ids::tenant_root_for(&self.dir.path().join(replica), ORG, TENANT).unwrap()
    }

    fn copies(&self) -> EpochCopies {
        EpochCopies::new(self.durable.clone())
    }
}

/// Every world the proofs run in. The S3 one needs the server that the test command starts.
fn worlds() -> Vec<(&'static str, World)> {
    #[allow(unused_mut)] // pushed to with the s3 feature
    let mut all = vec![("directory", World::directory())];
    #[cfg(feature = "s3")]
    if let Some(world) = s3_world() {
        all.push(("s3", world));
    }
    all
}

#[cfg(feature = "s3")]
fn s3_world() -> Option<World> {
    let server = gotry_test_support::moto::MotoServer::start()?;
    let store =
        crate::durable_store::open_durable_store(&server.url(&format!("copies-{:016x}", random_u64())))
            .unwrap();
    Some(World::with(
        tempfile::tempdir().unwrap(),
        store,
        None,
        Some(Box::new(server)),
    ))
}

/// A tenant root with a ledger holding `entries` and one more file.
fn write_state(root: &Path, entries: &[&str]) {
    let ledger = root.join("gotry-state/gotry-state.db");
    fs::create_dir_all(ledger.parent().unwrap()).unwrap();
    let db = rusqlite::Connection::open(&ledger).unwrap();
    db.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE IF NOT EXISTS entries (text TEXT NOT NULL); DELETE FROM entries;")
        .unwrap();
    for entry in entries {
        db.execute("INSERT INTO entries (text) VALUES (?1)", [entry])
            .unwrap();
    }
    fs::create_dir_all(root.join("notes")).unwrap();
    fs::write(root.join("notes/last.txt"), entries.join(",")).unwrap();
}

fn read_state(root: &Path) -> Vec<String> {
    let db = rusqlite::Connection::open(root.join("gotry-state/gotry-state.db")).unwrap();
    let mut query = db.prepare("SELECT text FROM entries ORDER BY rowid").unwrap();
    let entries: Vec<String> = query
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(
        fs::read_to_string(root.join("notes/last.txt")).unwrap(),
        entries.join(",")
    );
    entries
}

fn id(epoch: i64, seq: u64) -> Option<CopyId> {
    Some(CopyId { epoch, seq })
}

#[test]
fn a_stale_writer_never_wins() {
    for (backend, world) in worlds() {
        let copies = world.copies();
        let a = world.holder("replica-a");
        assert_eq!(a.epoch(), 1);
        let root_a = world.root("a");
        assert_eq!(
            copies.restore(&a, &root_a, None).unwrap().restored,
            None,
            "{backend}"
        );
        write_state(&root_a, &["a1"]);
        assert_eq!(copies.write_copy(&a, &root_a).unwrap().id.seq, 1);
        write_state(&root_a, &["a1", "a2"]);
        assert_eq!(copies.write_copy(&a, &root_a).unwrap().id.seq, 2);

        // A stalls; B takes over and starts from A's last copy.
        let b = world.next_holder("replica-b");
        assert_eq!(b.epoch(), 2);
        let root_b = world.root("b");
        let report = world.copies().restore(&b, &root_b, None).unwrap();
        assert_eq!(report.restored, id(1, 2), "{backend}");
        assert_eq!(read_state(&root_b), ["a1", "a2"]);
        write_state(&root_b, &["a1", "a2", "b1"]);
        world.copies().write_copy(&b, &root_b).unwrap();

        // A wakes past its own check and writes into its old epoch.
        write_state(&root_a, &["a1", "a2", "a-late"]);
        let late = copies.write_copy(&a, &root_a).unwrap();
        assert_eq!((late.id.epoch, late.id.seq, late.files), (1, 3, 2), "{backend}");
        assert_eq!(late.bytes, tree_size(&root_a).unwrap().1, "{backend}");
        assert_eq!(
            late.bytes_uploaded,
            copy_bytes(&world, 1, 3) + inline_bytes(&manifest_of(&world, 3)),
            "{backend}"
        );
        // The stale holder builds on its own last copy, in its own epoch only.
        let built_on: BTreeSet<CopyId> = manifest_of(&world, 3)
            .files
            .iter()
            .flat_map(FileV2::objects)
            .filter_map(ObjectRef::copy)
            .collect();
        assert!(built_on.iter().any(|c| c.seq < 3), "{built_on:?}");
        assert!(built_on.iter().all(|c| c.epoch == 1), "{built_on:?}");

        let c = world.next_holder("replica-c");
        let root_c = world.root("c");
        let report = world.copies().restore(&c, &root_c, None).unwrap();
        assert_eq!(report.restored, id(2, 1), "{backend}");
        assert!(report.skipped.is_empty(), "{backend}: {:?}", report.skipped);
        assert_eq!(read_state(&root_c), ["a1", "a2", "b1"]);
    }
}

/// The bytes a copy's manifest carries inline that the copy made itself: the copy's report
/// counts them as uploaded, and those it carries forward as reused.
fn inline_bytes(manifest: &ManifestV2) -> u64 {
    let own = Some(CopyId {
        epoch: manifest.epoch,
        seq: manifest.seq,
    });
    manifest
        .files
        .iter()
        .flat_map(FileV2::objects)
        .filter(|o| o.copy() == own)
        .filter_map(|o| o.inline.as_ref())
        .map(|bytes| bytes.len() as u64)
        .sum()
}

fn copy_bytes(world: &World, epoch: i64, seq: u64) -> u64 {
    let listing = world.copies().list(&key()).unwrap();
    let copy = listing
        .iter()
        .find(|c| c.id.epoch == epoch && c.id.seq == seq)
        .unwrap();
    // The manifest is not part of the copy's bytes.
    let manifest = world
        .durable
        .get(&manifest_key(&key(), CopyId { epoch, seq }).unwrap())
        .unwrap()
        .unwrap();
    copy.bytes - manifest.len() as u64
}

/// The trap of a new holder that dies before its first copy: only its tenure marker says
/// that epoch 1 ended where it did.
#[test]
fn a_late_copy_is_superseded_when_the_next_holder_died_before_copying() {
    for (backend, world) in worlds() {
        let a = world.holder("replica-a");
        let root_a = world.root("a");
        let copies_a = world.copies();
        copies_a.restore(&a, &root_a, None).unwrap();
        write_state(&root_a, &["a1"]);
        copies_a.write_copy(&a, &root_a).unwrap();

        assert_eq!(world.restored_by_next_holder("b"), id(1, 1));
        // B dies here. A wakes and writes again into epoch 1.
        write_state(&root_a, &["a1", "a-late"]);
        copies_a.write_copy(&a, &root_a).unwrap();

        let c = world.next_holder("replica-c");
        let root_c = world.root("c");
        let report = world.copies().restore(&c, &root_c, None).unwrap();
        assert_eq!(report.restored, id(1, 1), "{backend}");
        assert_eq!(
            report.skipped,
            [SkippedCopy {
                id: CopyId { epoch: 1, seq: 2 },
                reason: SkipReason::Superseded
            }]
        );
        assert_eq!(read_state(&root_c), ["a1"]);
    }
}

/// Writes copies 1..=4 of epoch 1 holding ["1"], ["1","2"], ...; returns the lease store
/// handed over to a fresh holder of epoch 2.
fn four_copies(world: &World) -> TenantLease {
    let a = world.holder("replica-a");
    let root = world.root("a");
    let copies = world.copies();
    let mut entries = Vec::new();
    for n in ["1", "2", "3", "4"] {
        entries.push(n);
        write_state(&root, &entries);
        copies.write_copy(&a, &root).unwrap();
    }
    world.next_holder("replica-b")
}

/// The object copy `seq` made for its ledger (a delta or a base, inline or stored).
fn own_ledger_object(manifest: &ManifestV2, seq: u64) -> &ObjectRef {
    manifest.files[ledger_index(manifest)]
        .objects()
        .find(|o| o.copy() == Some(CopyId { epoch: 1, seq }))
        .expect("a changed ledger stores something of its own")
}

/// Damages an object of copy `id`: a stored one in the store, an inline one in the copy's
/// manifest (the same damage to the same bytes, wherever they are kept).
fn corrupt_ref(world: &World, id: CopyId, object: &ObjectRef) {
    if object.inline.is_none() {
        return corrupt(world, &full_key(object));
    }
    let key = manifest_key(&key(), id).unwrap();
    let mut manifest: ManifestV2 =
        serde_json::from_slice(&world.durable.get(&key).unwrap().unwrap()).unwrap();
    let target = manifest
        .files
        .iter_mut()
        .flat_map(FileV2::objects_mut)
        .find(|o| o.object == object.object)
        .expect("the manifest carries the object");
    flip_middle(target.inline.as_mut().expect("inline"));
    world.durable.delete(&key).unwrap();
    let json = serde_json::to_vec(&manifest).unwrap();
    assert_eq!(world.durable.put_new(&key, &json).unwrap(), PutOutcome::Created);
}

/// Replaces an object through the store's own interface (delete, then create), so that the
/// same damage can be done on every backend.
fn corrupt(world: &World, object: &str) {
    let mut bytes = world.durable.get(object).unwrap().unwrap();
    flip_middle(&mut bytes);
    world.durable.delete(object).unwrap();
    assert_eq!(
        world.durable.put_new(object, &bytes).unwrap(),
        PutOutcome::Created
    );
}

/// The damage both of the above do: one bit of the middle byte.
fn flip_middle(bytes: &mut [u8]) {
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
}

fn full_key(object: &ObjectRef) -> String {
    format!("{}{}", tenant_prefix(&key()).unwrap(), object.object)
}

fn manifest_of(world: &World, seq: u64) -> ManifestV2 {
    let bytes = world
        .durable
        .get(&manifest_key(&key(), CopyId { epoch: 1, seq }).unwrap())
        .unwrap()
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// Replaces a manifest through the store's own interface, so on every backend.
fn republish(world: &World, seq: u64, manifest: &ManifestV2) {
    let object = manifest_key(&key(), CopyId { epoch: 1, seq }).unwrap();
    world.durable.delete(&object).unwrap();
    world
        .durable
        .put_new(&object, &serde_json::to_vec(manifest).unwrap())
        .unwrap();
}

fn forge_manifest(world: &World, seq: u64, manifest: &ManifestV2) {
    let object = manifest_key(&key(), CopyId { epoch: 1, seq }).unwrap();
    let path = world.objects.as_ref().unwrap().join(object);
    fs::write(path, serde_json::to_vec(manifest).unwrap()).unwrap();
}

fn ledger_index(manifest: &ManifestV2) -> usize {
    manifest
        .files
        .iter()
        .position(|f| f.path == "gotry-state/gotry-state.db")
        .unwrap()
}

#[test]
fn every_untrustworthy_copy_is_skipped_with_its_reason() {
    let world = World::directory();
    let b = four_copies(&world);

    // 4: a flipped byte, in the manifest when the object is inline (a small ledger's is).
    let manifest = manifest_of(&world, 4);
    corrupt_ref(
        &world,
        CopyId { epoch: 1, seq: 4 },
        own_ledger_object(&manifest, 4),
    );
    // 3: a truncated ledger whose forged manifest has the right size and digests (only the
    // full check a restore may ask for tells it).
    let mut manifest = manifest_of(&world, 3);
    let ledger = ledger_index(&manifest);
    let object = own_ledger_object(&manifest, 3).object.clone();
    let whole = fs::read(world.root("a").join("gotry-state/gotry-state.db")).unwrap();
    let truncated = whole[..whole.len() / 2].to_vec();
    let file = &mut manifest.files[ledger];
    file.size = truncated.len() as u64;
    file.digest = delta::Blocks::new(delta::block_digests(&truncated)).file_digest(file.size);
    file.base = ObjectRef {
        object,
        size: file.size,
        digest: delta::digest(&truncated),
        inline: Some(truncated),
    };
    file.deltas.clear();
    file.base_pieces.clear();
    forge_manifest(&world, 3, &manifest);
    // 2: another tenant's copy placed in this prefix.
    let mut manifest = manifest_of(&world, 2);
    manifest.key = format!("{ORG}/{OTHER_TENANT}");
    forge_manifest(&world, 2, &manifest);

    // 1 is refused by the host's own check, then accepted.
    let refuse_one = |dir: &Path| Ok(read_state(dir) != ["1"]);
    let root = world.root("b");
    let error = world
        .copies()
        .with_integrity_check(true)
        .restore(&b, &root, Some(&refuse_one))
        .unwrap_err();
    let skipped = |reasons: &[(u64, SkipReason)]| -> Vec<SkippedCopy> {
        reasons
            .iter()
            .map(|&(seq, reason)| SkippedCopy {
                id: CopyId { epoch: 1, seq },
                reason,
            })
            .collect()
    };
    let all = skipped(&[
        (4, SkipReason::Checksum),
        (3, SkipReason::Integrity),
        (2, SkipReason::Tenant),
        (1, SkipReason::Fold),
    ]);
    match error {
        Error::RestoreInvalid { skipped, message } => {
            assert_eq!(skipped, all);
            assert!(message.contains("1/4 (checksum)"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!root.exists(), "a failed restore leaves the root as it was");

    let report = world
        .copies()
        .with_integrity_check(true)
        .restore(&b, &root, None)
        .unwrap();
    assert_eq!(report.restored, id(1, 1));
    assert_eq!(report.skipped, all[..3]);
    assert_eq!(read_state(&root), ["1"]);
}

#[test]
fn a_failing_host_check_fails_the_restore_with_its_own_error() {
    let world = World::directory();
    let b = four_copies(&world);
    let broken = |_: &Path| Err(Error::Host("the fold check crashed".into()));
    let root = world.root("b");
    fs::create_dir_all(&root).unwrap();
    fs::write(root.join("kept"), b"old").unwrap();
    assert!(matches!(
        world.copies().restore(&b, &root, Some(&broken)),
        Err(Error::Host(_))
    ));
    assert_eq!(fs::read(root.join("kept")).unwrap(), b"old");
}

#[test]
fn a_restore_replaces_the_whole_root_and_an_empty_start_empties_it() {
    for (backend, world) in worlds() {
        let (a, root) = world.first_holder_with(&["stale local state"]);
        let report = world.copies().restore(&a, &root, None).unwrap();
        assert_eq!(
            report,
            RestoreReport {
                restored: None,
                skipped: vec![],
                files: 0,
                bytes: 0
            },
            "{backend}"
        );
        assert_eq!(fs::read_dir(&root).unwrap().count(), 0);
        write_state(&root, &["x"]);
        world.copies().write_copy(&a, &root).unwrap();
        fs::write(root.join("extra"), b"not in the copy").unwrap();

        let b = world.next_holder("replica-b");
        let report = world.copies().restore(&b, &root, None).unwrap();
        assert_eq!((report.restored, report.files), (id(1, 1), 2));
        assert!(!root.join("extra").exists());
        assert_eq!(read_state(&root), ["x"]);
        // Nothing of the scratch folders is left beside the root.
        let siblings: Vec<_> = fs::read_dir(root.parent().unwrap()).unwrap().collect();
        assert_eq!(siblings.len(), 1, "{backend}");
    }
}

#[test]
fn anything_foreign_in_the_holders_prefix_is_a_conflict() {
    for (backend, world) in worlds() {
        let a = world.holder("replica-a");
        let root = world.root("a");
        world.copies().restore(&a, &root, None).unwrap();
        write_state(&root, &["1"]);
        let copies = world.copies();
        copies.write_copy(&a, &root).unwrap();
        let stranger = format!(
            "{}00000000000000000009/files/000000",
            epoch_prefix(&key(), 1).unwrap()
        );
        world.durable.put_new(&stranger, b"someone else").unwrap();
        assert!(
            matches!(copies.write_copy(&a, &root), Err(Error::CopyConflict { .. })),
            "{backend}"
        );

        // A name about to be written that exists already is one too.
        let b = world.next_holder("replica-b");
        let next = format!("{}00000000000000000001.json", epoch_prefix(&key(), 2).unwrap());
        let fresh = world.copies();
        fresh.restore(&b, &root, None).unwrap();
        world.durable.put_new(&next, b"{}").unwrap();
        assert!(
            matches!(fresh.write_copy(&b, &root), Err(Error::CopyConflict { .. })),
            "{backend}"
        );
    }
}

/// On the directory store, a copy reserves the name of the tenure's next manifest (an empty
/// object until then) and the next copy writes into that very file. Listings, restores and
/// gc pass the reservation over as no copy; the next holder's gc removes the reservation of
/// the tenure it replaced.
#[test]
fn a_copy_writes_into_the_name_reserved_for_it_and_readers_pass_reservations_over() {
    use std::os::unix::fs::MetadataExt;

    let dir = tempfile::tempdir().unwrap();
    let objects = dir.path().join("durable");
    let store = Arc::new(DirectoryDurableStore::open(&objects).unwrap());
    let world = World::with(dir, store.clone(), Some(objects.clone()), None);
    let a = world.holder("replica-a");
    let root = world.root("a");
    let copies = world.copies();
    copies.restore(&a, &root, None).unwrap();
    write_state(&root, &["1"]);
    copies.write_copy(&a, &root).unwrap();
    let next = manifest_key(&key(), CopyId { epoch: 1, seq: 2 }).unwrap();
    assert!(store.wait_reserved(&next));
    let reserved = fs::metadata(objects.join(&next)).unwrap();
    assert_eq!(reserved.len(), 0);

    let listed: Vec<CopyId> = copies.list(&key()).unwrap().iter().map(|c| c.id).collect();
    assert_eq!(listed, [CopyId { epoch: 1, seq: 1 }]);
    let look = world.dir.path().join("look");
    let looked = copies.restore_latest(&key(), 0, None, &look, None).unwrap();
    assert_eq!((looked.restored, looked.skipped), (id(1, 1), vec![]));
    assert_eq!(copies.gc(&a, 1).unwrap().deleted, []);
    assert!(
        objects.join(&next).exists(),
        "gc removed the holder's own reservation"
    );

    write_state(&root, &["1", "2"]);
    crate::plumbing::synced::take();
    assert_eq!(
        copies.write_copy(&a, &root).unwrap().id,
        CopyId { epoch: 1, seq: 2 }
    );
    assert_eq!(
        crate::plumbing::synced::take(),
        Vec::<PathBuf>::new(),
        "a copy into its reserved name flushed a folder"
    );
    assert_eq!(
        fs::metadata(objects.join(&next)).unwrap().ino(),
        reserved.ino(),
        "the copy did not write into its reservation"
    );
    let stale = manifest_key(&key(), CopyId { epoch: 1, seq: 3 }).unwrap();
    assert!(store.wait_reserved(&stale));

    let b = world.next_holder("replica-b");
    let copies_b = world.copies();
    let b_root = world.root("b");
    assert_eq!(copies_b.restore(&b, &b_root, None).unwrap().restored, id(1, 2));
    assert_eq!(read_state(&b_root), ["1", "2"]);
    let own = manifest_key(&key(), CopyId { epoch: 2, seq: 1 }).unwrap();
    assert!(store.wait_reserved(&own), "nothing reserved after a restore");
    copies_b.gc(&b, 1).unwrap();
    assert!(
        !objects.join(&stale).exists(),
        "the replaced tenure's reservation was kept"
    );
    assert!(
        objects.join(&own).exists(),
        "the holder's own reservation was removed"
    );
    write_state(&b_root, &["1", "2", "3"]);
    assert_eq!(
        copies_b.write_copy(&b, &b_root).unwrap().id,
        CopyId { epoch: 2, seq: 1 }
    );
    assert_eq!(world.restored_by_next_holder("c"), id(2, 1));
}

/// An empty manifest in the holder's prefix is a stranger's object unless it has the name of
/// the holder's next copy; even there, a stranger's is met when the copy is written, as any
/// existing name is. (On the directory store the holder's own store reserves that name first,
/// and another store meets it as an existing name: `durable_store::dir`'s tests.)
#[test]
fn an_empty_manifest_the_holder_did_not_reserve_is_a_conflict() {
    for (backend, world) in worlds() {
        let ahead: &[u64] = if world.objects.is_some() { &[2] } else { &[1, 2] };
        for &ahead in ahead {
            let a = world.next_holder("replica-a");
            let root = world.root("a");
            let copies = world.copies();
            copies.restore(&a, &root, None).unwrap();
            write_state(&root, &["1"]);
            let first = copies.write_copy(&a, &root).unwrap().id;
            let stranger = CopyId {
                epoch: first.epoch,
                seq: first.seq + ahead,
            };
            world
                .durable
                .put_new(&manifest_key(&key(), stranger).unwrap(), b"")
                .unwrap();
            assert!(
                matches!(copies.write_copy(&a, &root), Err(Error::CopyConflict { .. })),
                "{backend}: an empty manifest {ahead} ahead was not a conflict"
            );
        }
    }
}

#[test]
fn a_closed_gate_writes_nothing() {
    let world = World::directory();
    let (a, root) = world.first_holder_with(&["1"]);
    a.release().unwrap();
    assert!(matches!(
        world.copies().write_copy(&a, &root),
        Err(Error::Fenced { .. })
    ));
    assert!(matches!(
        world.copies().restore(&a, &root, None),
        Err(Error::Fenced { .. })
    ));
    assert!(world.copies().list(&key()).unwrap().is_empty());
}

#[test]
fn an_unusable_directory_is_unavailable_and_the_next_copy_succeeds() {
    let world = World::directory();
    let (a, root) = world.first_holder_with(&["1"]);
    let copies = world.copies();
    copies.write_copy(&a, &root).unwrap();
    // Root ignores permissions, so the fault is a file where the epoch's folder must go.
    let epoch_dir = world
        .objects
        .as_ref()
        .unwrap()
        .join(epoch_prefix(&key(), 1).unwrap().trim_end_matches('/'));
    let aside = epoch_dir.with_extension("aside");
    fs::rename(&epoch_dir, &aside).unwrap();
    fs::write(&epoch_dir, b"in the way").unwrap();
    match copies.write_copy(&a, &root) {
        Err(Error::DurableStoreUnavailable { backend_code, .. }) => assert_eq!(backend_code, "ENOTDIR"),
        other => panic!("{other:?}"),
    }
    assert!(
        a.assert_held().is_ok(),
        "the lease and its gate are the store's business alone"
    );
    fs::remove_file(&epoch_dir).unwrap();
    fs::rename(&aside, &epoch_dir).unwrap();
    // The listing failed before a name was claimed, so the next copy takes it.
    assert_eq!(copies.write_copy(&a, &root).unwrap().id.seq, 2);
}

#[cfg(feature = "s3")]
#[test]
fn a_stopped_s3_server_is_unavailable_and_the_next_copy_succeeds() {
    let Some(server) = gotry_test_support::moto::MotoServer::start() else {
        return;
    };
    let store = crate::durable_store::open_durable_store(&server.url("outage")).unwrap();
    let world = World::with(tempfile::tempdir().unwrap(), store, None, None);
    let (a, root) = world.first_holder_with(&["1"]);
    let copies = world.copies();
    copies.write_copy(&a, &root).unwrap();
    server.stop();
    let outcome = copies.write_copy(&a, &root);
    server.resume();
    assert!(
        matches!(outcome, Err(Error::DurableStoreUnavailable { .. })),
        "{outcome:?}"
    );
    assert!(a.assert_held().is_ok());
    let written = copies.write_copy(&a, &root).unwrap();
    assert!(written.id.seq >= 2);
    assert_eq!(world.restored_by_next_holder("b"), id(1, written.id.seq));
}

#[test]
fn forgotten_copies_are_never_restored_and_can_be_deleted() {
    for (backend, world) in worlds() {
        let a = world.holder("replica-a");
        let root = world.root("a");
        world.copies().restore(&a, &root, None).unwrap();
        write_state(&root, &["secret"]);
        world.copies().write_copy(&a, &root).unwrap();
        a.mark_forgotten().unwrap();
        // The floor is read from the lease store, not from the lease's own view.
        assert_eq!(
            world.copies().forget_copies(&a).unwrap(),
            [CopyId { epoch: 1, seq: 1 }]
        );
        assert!(world.copies().list(&key()).unwrap().is_empty(), "{backend}");

        let b = world.next_holder("replica-b");
        assert_eq!(b.forgotten_at_epoch(), 1);
        let report = world.copies().restore(&b, &world.root("b"), None).unwrap();
        assert_eq!(report.restored, None);
    }
}

#[test]
fn the_floor_alone_hides_copies_not_yet_deleted() {
    let world = World::directory();
    let (a, root) = world.first_holder_with(&["secret"]);
    world.copies().write_copy(&a, &root).unwrap();
    a.mark_forgotten().unwrap();
    assert_eq!(world.restored_by_next_holder("b"), None);
    // And the old holder may no longer delete anything.
    assert!(matches!(
        world.copies().forget_copies(&a),
        Err(Error::LeaseLost { .. })
    ));
    assert!(matches!(world.copies().gc(&a, 1), Err(Error::LeaseLost { .. })));
}

#[test]
fn gc_keeps_the_newest_valid_copies() {
    let world = World::directory();
    let b = four_copies(&world);
    let root = world.root("b");
    world.copies().restore(&b, &root, None).unwrap();
    let copies = world.copies();
    copies.write_copy(&b, &root).unwrap();
    // The newest copy is broken in a way gc can see: an object of its own is gone (a file too
    // large to go inline).
    write_state(&root, &["1", "2", "3", "4", "5"]);
    fs::write(root.join("notes/large.bin"), vec![5u8; 2 * INLINE_MOST]).unwrap();
    copies.write_copy(&b, &root).unwrap();
    let own = copy_prefix(&key(), CopyId { epoch: 2, seq: 2 }).unwrap();
    let broken = world
        .durable
        .list(&own)
        .unwrap()
        .into_iter()
        .next()
        .expect("the copy stored an object of its own");
    world.durable.delete(&broken.key).unwrap();

    assert!(matches!(copies.gc(&b, 0), Err(Error::InvalidArgument { .. })));
    let report = copies.gc(&b, 2).unwrap();
    assert_eq!(
        report.kept,
        [CopyId { epoch: 2, seq: 1 }, CopyId { epoch: 1, seq: 4 }]
    );
    assert_eq!(
        report.deleted,
        [1, 2, 3]
            .iter()
            .rev()
            .map(|&seq| CopyId { epoch: 1, seq })
            .collect::<Vec<_>>()
    );
    let left: Vec<(i64, u64)> = copies
        .list(&key())
        .unwrap()
        .iter()
        .filter(|c| c.complete)
        .map(|c| (c.id.epoch, c.id.seq))
        .collect();
    assert_eq!(left, [(1, 4), (2, 1), (2, 2)]);
    // What the kept copies reference of the deleted ones stayed: the next holder restores.
    let c = world.next_holder("replica-c");
    let report = world.copies().restore(&c, &world.root("c"), None).unwrap();
    assert_eq!(report.restored, id(2, 1));
    assert_eq!(read_state(&world.root("c")), ["1", "2", "3", "4"]);
    // Writing goes on after a gc of the holder's own prefix.
    assert_eq!(copies.write_copy(&b, &root).unwrap().id.seq, 3);
}

/// A writer commits to the ledger while copies are taken; every restored ledger must be one
/// of the states it committed (entries 0..n for some n), never a torn page mix.
/// Commits until its stdin closes, printing each commit's number once it is durable. Each
/// transaction writes a row and a page-sized blob, so torn images show.
const LEDGER_WRITER: &str = r#"
import sqlite3, sys, threading, time
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=5)
mode = sys.argv[2]
if mode == "rollback":
    db.execute("PRAGMA journal_mode = DELETE")
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
db.execute("CREATE TABLE IF NOT EXISTS pad (b BLOB)")
n = 0
while not done.is_set():
    n += 1
    db.execute("BEGIN")
    db.execute("INSERT INTO entries (text) VALUES (?)", (str(n),))
    db.execute("INSERT INTO pad VALUES (randomblob(3000))")
    db.execute("COMMIT")
    if mode == "truncating":
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        time.sleep(0.002)
    elif mode == "rollback":
        # A rollback writer that never pauses starves every reader (SQLite's busy handler
        # sleeps and retries, and the lock is taken again before it wakes): the copy then
        # fails with SQLITE_BUSY, as it should, but that is not what this test is about.
        time.sleep(0.001)
    print(n, flush=True)
"#;

/// Who writes the ledger while it is copied.
#[derive(Clone, Copy, Debug)]
enum Writer {
    /// A thread of this process, on this library's SQLite: the host holds the ledger open,
    /// so the copy reads it through the host's snapshot (here the same library's backup).
    Thread,
    /// Another process (Python's `sqlite3`): the copy reads it through its own SQLite, in
    /// the journal mode named: `wal`; `truncating`, WAL emptied after every commit and left
    /// empty a moment, so that copies often begin with no WAL frames and read the file whole
    /// while frames are added; or `rollback`.
    Process(&'static str),
}

#[test]
fn a_copy_of_a_ledger_being_written_is_a_committed_state() {
    let writers = [
        Writer::Thread,
        Writer::Process("wal"),
        Writer::Process("truncating"),
        Writer::Process("rollback"),
    ];
    for writer in writers {
        for (backend, world) in worlds() {
            copies_of_a_ledger_being_written(&world, &format!("{backend}, {writer:?}"), writer);
        }
    }
}

fn copies_of_a_ledger_being_written(world: &World, case: &str, writer: Writer) {
    let (a, root) = world.first_holder_with(&[]);
    let ledger = root.join("gotry-state/gotry-state.db");
    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicI64::new(0));
    let (copies, finish): (EpochCopies, Box<dyn FnOnce()>) = match writer {
        Writer::Thread => {
            let (writing, committed) = (stop.clone(), committed.clone());
            let thread = std::thread::spawn(move || {
                let db = rusqlite::Connection::open(ledger).unwrap();
                db.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
                db.execute_batch("CREATE TABLE IF NOT EXISTS pad (b BLOB)")
                    .unwrap();
                let mut n = 0i64;
                while !writing.load(Ordering::Relaxed) {
                    n += 1;
                    // Each transaction writes a row and a page-sized blob, so torn images show.
                    db.execute_batch(&format!(
                        "BEGIN; INSERT INTO entries (text) VALUES ('{n}'); INSERT INTO pad VALUES (randomblob(3000)); COMMIT;"
                    ))
                    .unwrap();
                    committed.store(n, Ordering::Relaxed);
                }
            });
            let copies = world.copies().with_host_snapshot(Some(same_library_snapshot()));
            let stop = stop.clone();
            (
                copies,
                Box::new(move || {
                    stop.store(true, Ordering::Relaxed);
                    thread.join().unwrap();
                }),
            )
        }
        Writer::Process(mode) => {
            let mut child = std::process::Command::new("python3")
                .arg("-c")
                .arg(LEDGER_WRITER)
                .arg(&ledger)
                .arg(mode)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("python3 runs the ledger writer");
            let stdout = child.stdout.take().unwrap();
            let reader = {
                let committed = committed.clone();
                std::thread::spawn(move || {
                    use std::io::BufRead;
                    for line in std::io::BufReader::new(stdout).lines() {
                        committed.store(line.unwrap().parse().unwrap(), Ordering::Relaxed);
                    }
                })
            };
            (
                world.copies(),
                Box::new(move || {
                    drop(child.stdin.take());
                    assert!(child.wait().unwrap().success());
                    reader.join().unwrap();
                }),
            )
        }
    };
    while committed.load(Ordering::Relaxed) < 3 {
        std::thread::yield_now();
    }
    let mut seen = Vec::new();
    while seen.len() < 5 {
        let before = committed.load(Ordering::Relaxed);
        copies.write_copy(&a, &root).unwrap();
        seen.push(before);
    }
    finish();

    for seq in 1..=5u64 {
        assert_eq!(
            copies.verify(&key(), CopyId { epoch: 1, seq }, None).unwrap(),
            None,
            "{case}"
        );
    }
    let into = world.dir.path().join(format!(
        "latest-{}",
        case.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
    ));
    copies.restore_latest(&key(), 0, None, &into, None).unwrap();
    let db = rusqlite::Connection::open(into.join("gotry-state/gotry-state.db")).unwrap();
    let (count, max): (i64, i64) = db
        .query_row(
            "SELECT count(*), coalesce(max(CAST(text AS INTEGER)), 0) FROM entries",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(count, max, "{case}: entries 1..n with none missing");
    assert!(
        max >= seen[4],
        "{case}: the copy holds every commit made before it began"
    );
}

/// A tmpfs of the test's own, made read-only and writable again with `mount -o remount`:
/// root ignores permission bits, so only a read-only file system refuses root's writes.
struct ReadOnlyCapableMount {
    path: PathBuf,
}

impl ReadOnlyCapableMount {
    fn new(path: PathBuf) -> Option<ReadOnlyCapableMount> {
        ReadOnlyCapableMount::sized(path, "50%")
    }

    /// A tmpfs that holds at most `size` (mount's `size=`), to run out of space on purpose.
    fn sized(path: PathBuf, size: &str) -> Option<ReadOnlyCapableMount> {
        if std::env::var_os("GOTRY_SKIP_MOUNT").is_some() {
            eprintln!("SKIPPED: a test on a tmpfs of its own (GOTRY_SKIP_MOUNT is set)");
            return None;
        }
        fs::create_dir_all(&path).unwrap();
        let mount = ReadOnlyCapableMount { path };
        mount.run(&["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]);
        Some(mount)
    }

    fn run(&self, options: &[&str]) {
        let status = std::process::Command::new("mount")
            .args(options)
            .arg(&self.path)
            .status()
            .expect("mount runs");
        assert!(
            status.success(),
            "mount {options:?} failed: this test needs root with CAP_SYS_ADMIN (set GOTRY_SKIP_MOUNT=1 to skip it)"
        );
    }

    fn set_read_only(&self, read_only: bool) {
        self.run(&["-o", if read_only { "remount,ro" } else { "remount,rw" }]);
    }
}

impl Drop for ReadOnlyCapableMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.path).status();
    }
}

#[test]
fn a_read_only_directory_is_unavailable_and_the_next_copy_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mount) = ReadOnlyCapableMount::new(dir.path().join("ro")) else {
        return;
    };
    let durable = Arc::new(DirectoryDurableStore::open(&mount.path).unwrap());
    let world = World::with(dir, durable, None, None);
    let (a, root) = world.first_holder_with(&["1"]);
    let copies = world.copies();
    copies.write_copy(&a, &root).unwrap();
    mount.set_read_only(true);
    let outcome = copies.write_copy(&a, &root);
    mount.set_read_only(false);
    match outcome {
        Err(Error::DurableStoreUnavailable { backend_code, .. }) => assert_eq!(backend_code, "EROFS"),
        other => panic!("{other:?}"),
    }
    assert!(a.assert_held().is_ok());
    assert_eq!(copies.write_copy(&a, &root).unwrap().id.seq, 3);
    assert_eq!(world.restored_by_next_holder("b"), id(1, 3));
    drop(world);
}

/// The restoring host's own trouble (here its disk full) says nothing about the copy: the
/// restore fails with the host's error instead of passing the copy over, and the same copy
/// restores once there is room.
#[test]
fn a_full_disk_fails_the_restore_and_skips_no_copy() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mount) = ReadOnlyCapableMount::sized(dir.path().join("small"), "256k") else {
        return;
    };
    let world = World::directory();
    let (a, root) = world.first_holder_with(&["one"]);
    let noise: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    fs::write(root.join("large.bin"), noise).unwrap();
    world.copies().write_copy(&a, &root).unwrap();

    let b = world.next_holder("replica-b");
    match world.copies().restore(&b, &mount.path.join("b"), None) {
        Err(Error::Storage { code, .. }) => assert_eq!(code, "ENOSPC"),
        other => panic!("a full disk fails the restore: {other:?}"),
    }
    let report = world.copies().restore(&b, &world.root("b"), None).unwrap();
    assert_eq!((report.restored, report.skipped), (id(1, 1), vec![]));
}

#[test]
fn one_instance_serves_a_stale_holder_and_its_successor_apart() {
    let world = World::directory();
    let copies = world.copies();
    let (a, root) = world.first_holder_with(&["a1"]);
    copies.write_copy(&a, &root).unwrap();
    let b = world.next_holder("replica-b");
    let root_b = world.root("b");
    copies.restore(&b, &root_b, None).unwrap();
    copies.write_copy(&b, &root_b).unwrap();
    // Each still knows its own objects.
    assert_eq!(copies.write_copy(&a, &root).unwrap().id.seq, 2);
    assert_eq!(copies.write_copy(&b, &root_b).unwrap().id.seq, 2);
}

/// The host's SQLite in these tests is this library's own, with which sharing a file would be
/// safe; the copies cannot tell libraries apart, so they treat every other handle as the
/// host's (the Node and Python suites show the real case, better-sqlite3 and `sqlite3`). A
/// held database is read from its WAL where that tells its state, else through the host.
#[test]
fn files_the_host_has_open_are_read_only_from_their_wal_or_through_its_snapshot() {
    let world = World::directory();
    let (a, root) = world.first_holder_with(&["one", "two"]);
    let ledger = root.join("gotry-state/gotry-state.db");
    let host = rusqlite::Connection::open(&ledger).unwrap();
    host.execute("INSERT INTO entries (text) VALUES ('three')", [])
        .unwrap();
    fs::write(root.join("notes/last.txt"), "one,two,three").unwrap();
    let wal = root.join("gotry-state/gotry-state.db-wal");
    assert!(wal.exists());

    let error = world.copies().write_copy(&a, &root).unwrap_err();
    assert!(
        matches!(&error, Error::OpenInProcess { message } if message.contains("gotry-state.db")),
        "{error:?}"
    );
    assert!(wal.exists(), "the host's WAL was left alone");
    assert!(world.copies().list(&key()).unwrap().is_empty());

    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let snapshot: HostSnapshot = Arc::new(move |source: &Path, image: &Path| {
        lock(&seen).push(source.to_path_buf());
        let db = rusqlite::Connection::open(source).map_err(|e| sqlite_failure(source, e))?;
        db.execute("VACUUM INTO ?1", [image.to_str().unwrap()])
            .map_err(|e| sqlite_failure(source, e))?;
        Ok(())
    });
    let copies = world.copies().with_host_snapshot(Some(snapshot));
    assert_eq!(copies.write_copy(&a, &root).unwrap().files, 2);
    // Its WAL held the ledger's rows: the file and the frames made the image.
    assert!(lock(&asked).is_empty());
    // A WAL emptied by a checkpoint tells nothing: the file the host holds goes to it, the
    // notes were read here.
    host.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    assert_eq!(fs::metadata(&wal).unwrap().len(), 0);
    assert_eq!(copies.write_copy(&a, &root).unwrap().files, 2);
    assert_eq!(*lock(&asked), std::slice::from_ref(&ledger));
    host.execute("INSERT INTO entries (text) VALUES ('four')", [])
        .unwrap();
    assert!(wal.exists());

    let b = world.next_holder("replica-b");
    let error = copies.restore(&b, &root, None).unwrap_err();
    assert!(matches!(&error, Error::OpenInProcess { .. }), "{error:?}");
    let count: i64 = host
        .query_row("SELECT count(*) FROM entries", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 4, "the refused restore left the host's ledger as it was");
    drop(host);
    let report = copies.restore(&b, &root, None).unwrap();
    assert_eq!(report.restored, id(1, 2));
    assert_eq!(read_state(&root), ["one", "two", "three"]);
}

#[test]
fn a_restore_refuses_a_root_that_is_a_file_and_takes_a_bare_relative_name() {
    let world = World::directory();
    let a = world.holder("replica-a");
    let file = world.dir.path().join("a-file");
    fs::write(&file, b"not a folder").unwrap();
    let error = world.copies().restore(&a, &file, None).unwrap_err();
    assert!(matches!(error, Error::InvalidArgument { .. }), "{error:?}");
    assert_eq!(fs::read(&file).unwrap(), b"not a folder");
    // A bare name is a folder of the working directory (the restore is an empty start).
    let cwd = std::env::current_dir().unwrap();
    let name = format!("gotry-bare-root-{:016x}", random_u64());
    let report = world
        .copies()
        .restore_latest(&key(), 0, None, Path::new(&name), None);
    let made = cwd.join(&name).is_dir();
    let _ = fs::remove_dir_all(cwd.join(&name));
    assert_eq!(report.unwrap().restored, None);
    assert!(made);
}

/// Folders that hold nothing are part of the root a copy keeps: a restore makes them. A
/// manifest naming a folder where it names a file, or under one, cannot be laid out: passed
/// over as `manifest`, the copy before it restored.
#[test]
fn empty_folders_survive_a_copy_and_a_folder_that_is_a_file_is_a_manifest_fault() {
    for (backend, world) in worlds() {
        let a = world.holder("replica-a");
        let root = world.root("a");
        write_state(&root, &["one"]);
        fs::create_dir_all(root.join("inbox/empty")).unwrap();
        fs::create_dir_all(root.join("outbox")).unwrap();
        let copies = world.copies();
        copies.write_copy(&a, &root).unwrap();
        assert_eq!(
            manifest_of(&world, 1).folders,
            ["inbox/empty", "outbox"],
            "{backend}"
        );
        write_state(&root, &["one", "two"]);
        copies.write_copy(&a, &root).unwrap();
        let mut forged = manifest_of(&world, 2);
        forged.folders = vec!["gotry-state/gotry-state.db/inside".to_owned()];
        republish(&world, 2, &forged);

        let root_b = restored_past_a_manifest_fault(&world, backend);
        assert!(
            root_b.join("inbox/empty").is_dir() && root_b.join("outbox").is_dir(),
            "{backend}"
        );
        assert_eq!(
            fs::read_dir(root_b.join("outbox")).unwrap().count(),
            0,
            "{backend}"
        );
    }
}

/// A manifest's `written_at_ms` is the copies' wall clock's reading when the copy began; a
/// clock that reads before 1970 fails the copy before anything is stored.
#[test]
fn manifests_are_stamped_by_the_wall_clock_of_the_copies() {
    let world = World::directory();
    let (a, root) = world.first_holder_with(&["one"]);
    let at = |ms: i64| {
        world
            .copies()
            .with_wall_clock(Arc::new(crate::clock::FixedWallClock(ms)))
    };
    at(1_234_567).write_copy(&a, &root).unwrap();
    assert_eq!(manifest_of(&world, 1).written_at_ms, 1_234_567);
    // Objects with bytes: the reservation of the next manifest's name (empty) is made in the
    // background, whenever the store's thread comes to it.
    let stored = || {
        world
            .durable
            .list("")
            .unwrap()
            .into_iter()
            .filter(|o| o.size > 0)
            .count()
    };
    let objects = stored();
    assert!(matches!(
        at(-1).write_copy(&a, &root),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(stored(), objects, "nothing stored");
}

/// What the next holder restores when copy 2 of two is a manifest fault: copy 1, of "one".
fn restored_past_a_manifest_fault(world: &World, backend: &str) -> PathBuf {
    let b = world.next_holder("replica-b");
    let root_b = world.root("b");
    let report = world.copies().restore(&b, &root_b, None).unwrap();
    assert_eq!(report.restored, id(1, 1), "{backend}");
    assert_eq!(
        report.skipped,
        [SkippedCopy {
            id: CopyId { epoch: 1, seq: 2 },
            reason: SkipReason::Manifest
        }],
        "{backend}"
    );
    assert_eq!(read_state(&root_b), ["one"], "{backend}");
    root_b
}

/// A manifest naming one path twice (each entry a valid file, so every digest checks) cannot
/// be laid out as one root: `verify` says `manifest`, and a restore passes it over for the copy
/// before it instead of laying out either entry.
#[test]
fn a_manifest_naming_a_path_twice_is_a_manifest_fault() {
    for (backend, world) in worlds() {
        let a = world.holder("replica-a");
        let root = world.root("a");
        write_state(&root, &["one"]);
        let copies = world.copies();
        copies.write_copy(&a, &root).unwrap();
        write_state(&root, &["one", "two"]);
        copies.write_copy(&a, &root).unwrap();
        let mut forged = manifest_of(&world, 2);
        let first = forged.files[0].clone();
        forged.files.push(first);
        republish(&world, 2, &forged);

        assert_eq!(
            copies.verify(&key(), CopyId { epoch: 1, seq: 2 }, None).unwrap(),
            Some(SkipReason::Manifest),
            "{backend}"
        );
        restored_past_a_manifest_fault(&world, backend);
    }
}
