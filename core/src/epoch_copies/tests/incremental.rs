//! Incremental copies (formats 2 and 3) on every backend: pieces shared across the epochs of one
//! lineage, stale holders that write the same names and digests, damaged pieces, the host's
//! checkpoints, gc beside a copy in flight, and what a one-row change costs.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Duration;

use super::*;

const LEDGER: &str = "gotry-state/gotry-state.db";

/// A root whose ledger holds about `kb` KiB of padding, written once, and an empty
/// `entries` table: a one-row change then touches a few of its pages.
fn padded_root(root: &Path, kb: usize) {
    let ledger = root.join(LEDGER);
    fs::create_dir_all(ledger.parent().unwrap()).unwrap();
    let db = rusqlite::Connection::open(&ledger).unwrap();
    db.execute_batch(
        "PRAGMA journal_mode = WAL; CREATE TABLE entries (text TEXT NOT NULL); CREATE TABLE pad (b BLOB); BEGIN;",
    )
    .unwrap();
    for _ in 0..kb / 4 {
        db.execute("INSERT INTO pad VALUES (randomblob(4000))", [])
            .unwrap();
    }
    db.execute_batch("COMMIT").unwrap();
}

/// One committed row, the ledger closed again (its WAL checkpointed into the file).
fn add_entry(root: &Path, text: &str) {
    let db = rusqlite::Connection::open(root.join(LEDGER)).unwrap();
    db.execute("INSERT INTO entries (text) VALUES (?1)", [text])
        .unwrap();
}

fn entries_of(root: &Path) -> Vec<String> {
    let db = rusqlite::Connection::open(root.join(LEDGER)).unwrap();
    let mut query = db.prepare("SELECT text FROM entries ORDER BY rowid").unwrap();
    let entries = query
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    entries
}

fn manifest_at(world: &World, epoch: i64, seq: u64) -> ManifestV2 {
    let bytes = world
        .durable
        .get(&manifest_key(&key(), CopyId { epoch, seq }).unwrap())
        .unwrap()
        .expect("the copy has its manifest");
    serde_json::from_slice(&bytes).unwrap()
}

/// `manifest`, a tenure's first copy (every file a base), with its files' digests as builds
/// before format 6 made them (over every block digest): what those builds wrote.
fn with_digests_before_format_6(world: &World, mut manifest: ManifestV2) -> ManifestV2 {
    let prefix = tenant_prefix(&key()).unwrap();
    for file in &mut manifest.files {
        assert!(file.deltas.is_empty(), "a first copy stores every file as a base");
        let bytes: Vec<u8> = file
            .base_objects()
            .flat_map(|o| match &o.inline {
                Some(inline) => inline.clone(),
                None => world
                    .durable
                    .get(&format!("{prefix}{}", o.object))
                    .unwrap()
                    .unwrap(),
            })
            .collect();
        file.digest = delta::digest(&bytes);
    }
    manifest
}

/// replica-a's first copy of a padded ledger holding entry "1", its manifest then made what a
/// build of format `version` (before 6) wrote: the holder, its root, its copies and that manifest.
fn first_copy_in_format(world: &World, version: u32) -> (TenantLease, PathBuf, EpochCopies, ManifestV2) {
    let a = world.holder("replica-a");
    let (root, copies) = (world.root("a"), world.copies());
    padded_root(&root, 64);
    add_entry(&root, "1");
    copies.write_copy(&a, &root).unwrap();
    let mut manifest = with_digests_before_format_6(world, manifest_at(world, 1, 1));
    manifest.format_version = version;
    forge_manifest(world, 1, &manifest);
    (a, root, copies, manifest)
}

/// Every object a copy references, as the copy that stored it.
fn stored_by(manifest: &ManifestV2) -> BTreeSet<CopyId> {
    manifest
        .files
        .iter()
        .flat_map(FileV2::objects)
        .map(|o| o.copy().expect("a well-formed object name"))
        .collect()
}

/// replica-b takes the next epoch and restores into its root, with the full integrity check.
fn next_holder_restores_checked(world: &World) -> (RestoreReport, PathBuf) {
    let b = world.next_holder("replica-b");
    let root_b = world.root("b");
    let report = world
        .copies()
        .with_integrity_check(true)
        .restore(&b, &root_b, None)
        .unwrap();
    (report, root_b)
}

/// The same-library snapshot function, and how many times a copy asked it.
fn counted_host_snapshot() -> (HostSnapshot, Arc<AtomicUsize>) {
    let asked = Arc::new(AtomicUsize::new(0));
    let counted = asked.clone();
    let through_host = same_library_snapshot();
    let snapshot: HostSnapshot = Arc::new(move |source: &Path, image: &Path| {
        counted.fetch_add(1, Ordering::SeqCst);
        through_host(source, image)
    });
    (snapshot, asked)
}

fn file_of<'a>(manifest: &'a ManifestV2, path: &str) -> &'a FileV2 {
    manifest.files.iter().find(|f| f.path == path).unwrap()
}

/// The delta `written` added to the file at `path`: one, made by that copy, stored as an object
/// of its own only when it is too large to go inline (format 5), so that a small change is one
/// object, the manifest.
fn new_delta(world: &World, written: &WrittenCopy, path: &str) -> ObjectRef {
    let manifest = manifest_at(world, written.id.epoch, written.id.seq);
    let delta = file_of(&manifest, path).deltas.last().cloned().expect("a delta");
    assert_eq!(delta.copy(), Some(written.id), "{written:?}");
    let inline = delta.inline.as_ref().map(Vec::len);
    assert_eq!(inline.is_some(), delta.size as usize <= INLINE_MOST, "{delta:?}");
    assert_eq!(
        written.pieces_uploaded,
        usize::from(inline.is_none()),
        "{written:?}"
    );
    delta
}

#[test]
fn a_copy_whose_pieces_span_three_epochs_restores() {
    for (backend, world) in worlds() {
        let a = world.holder("replica-a");
        let root_a = world.root("a");
        padded_root(&root_a, 256);
        fs::write(root_a.join("static.bin"), vec![7u8; 3 * delta::BLOCK]).unwrap();
        add_entry(&root_a, "a1");
        world.copies().write_copy(&a, &root_a).unwrap();

        let b = world.next_holder("replica-b");
        let (root_b, copies_b) = (world.root("b"), world.copies());
        assert_eq!(copies_b.restore(&b, &root_b, None).unwrap().restored, id(1, 1));
        add_entry(&root_b, "b1");
        fs::write(root_b.join("from-b.bin"), b"written in epoch 2").unwrap();
        copies_b.write_copy(&b, &root_b).unwrap();

        let c = world.next_holder("replica-c");
        let (root_c, copies_c) = (world.root("c"), world.copies());
        assert_eq!(copies_c.restore(&c, &root_c, None).unwrap().restored, id(2, 1));
        add_entry(&root_c, "c1");
        let written = copies_c.write_copy(&c, &root_c).unwrap();
        assert_eq!((written.id.epoch, written.id.seq), (3, 1), "{backend}");
        // Only the ledger changed: one delta here, inline, the rest referenced where it lies
        // (the two small files inline, carried from manifest to manifest).
        assert!(new_delta(&world, &written, LEDGER).inline.is_some(), "{backend}");
        assert_eq!(written.pieces_reused, 1, "{backend}: {written:?}");

        let manifest = manifest_at(&world, 3, 1);
        let epochs: BTreeSet<i64> = stored_by(&manifest).iter().map(|c| c.epoch).collect();
        assert_eq!(epochs, BTreeSet::from([1, 2, 3]), "{backend}");
        assert_eq!(file_of(&manifest, "static.bin").base.copy(), id(1, 1));
        assert_eq!(file_of(&manifest, "from-b.bin").base.copy(), id(2, 1));
        assert_eq!(file_of(&manifest, LEDGER).base.copy(), id(1, 1));
        assert_eq!(
            file_of(&manifest, LEDGER).deltas.last().and_then(ObjectRef::copy),
            id(3, 1)
        );

        let d = world.next_holder("replica-d");
        let root_d = world.root("d");
        let report = world.copies().restore(&d, &root_d, None).unwrap();
        assert_eq!(report.restored, id(3, 1), "{backend}");
        assert!(report.skipped.is_empty(), "{backend}: {:?}", report.skipped);
        assert_eq!(entries_of(&root_d), ["a1", "b1", "c1"], "{backend}");
        assert_eq!(
            fs::read(root_d.join("static.bin")).unwrap(),
            vec![7u8; 3 * delta::BLOCK]
        );
        assert_eq!(
            fs::read(root_d.join("from-b.bin")).unwrap(),
            b"written in epoch 2"
        );
    }
}

/// Two stale holders wake after their successors: one writes into its old epoch a copy whose
/// files have exactly the digests of the copy the lineage went on from, the other a copy under
/// the same object names as its own earlier copy. Neither is ever restored, and what the next
/// holder writes references neither.
#[test]
fn a_stale_holders_late_copy_that_reuses_names_and_digests_is_never_restored() {
    for (backend, world) in worlds() {
        let a = world.holder("replica-a");
        let (root_a, copies_a) = (world.root("a"), world.copies());
        padded_root(&root_a, 64);
        add_entry(&root_a, "a1");
        copies_a.write_copy(&a, &root_a).unwrap();
        add_entry(&root_a, "a2");
        copies_a.write_copy(&a, &root_a).unwrap();

        let b = world.next_holder("replica-b");
        let (root_b, copies_b) = (world.root("b"), world.copies());
        copies_b.restore(&b, &root_b, None).unwrap();
        add_entry(&root_b, "b1");
        copies_b.write_copy(&b, &root_b).unwrap();

        // C restores B's copy and dies before copying: only its tenure marker remains.
        assert_eq!(world.restored_by_next_holder("c"), id(2, 1), "{backend}");

        // A wakes with B's state (same bytes, same digests) and writes into epoch 1.
        fs::copy(root_b.join(LEDGER), root_a.join(LEDGER)).unwrap();
        let late_a = copies_a.write_copy(&a, &root_a).unwrap();
        assert_eq!((late_a.id.epoch, late_a.id.seq), (1, 3), "{backend}");
        assert_eq!(
            file_of(&manifest_at(&world, 1, 3), LEDGER).digest,
            file_of(&manifest_at(&world, 2, 1), LEDGER).digest,
            "{backend}"
        );
        // B wakes and writes a copy of its own, its delta under the same name in its folder.
        add_entry(&root_b, "b-late");
        let late_b = copies_b.write_copy(&b, &root_b).unwrap();
        assert_eq!((late_b.id.epoch, late_b.id.seq), (2, 2), "{backend}");
        let name = |m: &ManifestV2| {
            let delta = file_of(m, LEDGER).deltas.last().unwrap().object.clone();
            delta.rsplit('/').next().unwrap().to_owned()
        };
        assert_eq!(name(&manifest_at(&world, 2, 2)), name(&manifest_at(&world, 2, 1)));

        let d = world.next_holder("replica-d");
        let (root_d, copies_d) = (world.root("d"), world.copies());
        let report = copies_d.restore(&d, &root_d, None).unwrap();
        assert_eq!(report.restored, id(2, 1), "{backend}");
        assert_eq!(
            report.skipped,
            [SkippedCopy {
                id: CopyId { epoch: 2, seq: 2 },
                reason: SkipReason::Superseded
            }],
            "{backend}"
        );
        assert_eq!(entries_of(&root_d), ["a1", "a2", "b1"], "{backend}");

        let before: BTreeSet<String> = world
            .durable
            .list(&tenant_prefix(&key()).unwrap())
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .collect();
        add_entry(&root_d, "d1");
        let written = copies_d.write_copy(&d, &root_d).unwrap();
        let references = stored_by(&manifest_at(&world, written.id.epoch, written.id.seq));
        assert!(
            !references.contains(&CopyId { epoch: 1, seq: 3 })
                && !references.contains(&CopyId { epoch: 2, seq: 2 }),
            "{backend}: {references:?}"
        );
        let own = epoch_prefix(&key(), d.epoch()).unwrap();
        for object in world.durable.list(&tenant_prefix(&key()).unwrap()).unwrap() {
            assert!(
                before.contains(&object.key) || object.key.starts_with(&own),
                "{backend}: {} was created outside the holder's prefix",
                object.key
            );
        }
        let e = world.next_holder("replica-e");
        let root_e = world.root("e");
        assert_eq!(
            world.copies().restore(&e, &root_e, None).unwrap().restored,
            Some(CopyId {
                epoch: d.epoch(),
                seq: 1
            })
        );
        assert_eq!(entries_of(&root_e), ["a1", "a2", "b1", "d1"], "{backend}");
    }
}

#[test]
fn a_corrupted_piece_is_skipped_with_checksum_and_the_next_older_copy_restored() {
    for (backend, world) in worlds() {
        let a = world.holder("replica-a");
        let (root, copies) = (world.root("a"), world.copies());
        padded_root(&root, 64);
        for n in ["1", "2", "3"] {
            add_entry(&root, n);
            copies.write_copy(&a, &root).unwrap();
        }
        let newest = manifest_at(&world, 1, 3);
        let own = file_of(&newest, LEDGER)
            .deltas
            .last()
            .cloned()
            .expect("a one-row change is a delta");
        assert_eq!(own.copy(), id(1, 3));
        assert!(own.inline.is_some(), "{backend}: {own:?}");
        corrupt_ref(&world, CopyId { epoch: 1, seq: 3 }, &own);
        assert_eq!(
            copies.verify(&key(), CopyId { epoch: 1, seq: 3 }, None).unwrap(),
            Some(SkipReason::Checksum),
            "{backend}"
        );

        let b = world.next_holder("replica-b");
        let root_b = world.root("b");
        let report = world.copies().restore(&b, &root_b, None).unwrap();
        assert_eq!(report.restored, id(1, 2), "{backend}");
        assert_eq!(
            report.skipped,
            [SkippedCopy {
                id: CopyId { epoch: 1, seq: 3 },
                reason: SkipReason::Checksum
            }],
            "{backend}"
        );
        assert_eq!(entries_of(&root_b), ["1", "2"], "{backend}");

        // The base every copy shares, damaged: nothing is left to trust.
        corrupt(&world, &full_key(&file_of(&newest, LEDGER).base));
        let c = world.next_holder("replica-c");
        match world.copies().restore(&c, &world.root("c"), None) {
            Err(Error::RestoreInvalid { skipped, .. }) => assert_eq!(
                skipped.iter().map(|s| (s.id.seq, s.reason)).collect::<Vec<_>>(),
                [
                    (3, SkipReason::Superseded),
                    (2, SkipReason::Checksum),
                    (1, SkipReason::Checksum)
                ],
                "{backend}"
            ),
            other => panic!("{backend}: {other:?}"),
        }
    }
}

/// The host keeps its ledger open (so the copies read it through its snapshot) and
/// checkpoints its WAL between two copies, with frames written before and after.
#[test]
fn a_wal_checkpoint_by_the_host_between_two_copies_restores_the_committed_state() {
    for (backend, world) in worlds() {
        let a = world.holder("replica-a");
        let root = world.root("a");
        padded_root(&root, 512);
        let host = rusqlite::Connection::open(root.join(LEDGER)).unwrap();
        host.execute_batch("PRAGMA wal_autocheckpoint = 0").unwrap();
        let wal = root.join(format!("{LEDGER}-wal"));
        let copies = world.copies().with_host_snapshot(Some(same_library_snapshot()));
        host.execute("INSERT INTO entries (text) VALUES ('h1')", [])
            .unwrap();
        assert!(fs::metadata(&wal).unwrap().len() > 0);
        let first = copies.write_copy(&a, &root).unwrap();

        host.execute("INSERT INTO entries (text) VALUES ('h2')", [])
            .unwrap();
        host.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
        assert_eq!(fs::metadata(&wal).unwrap().len(), 0, "the host emptied its WAL");
        host.execute("INSERT INTO entries (text) VALUES ('h3')", [])
            .unwrap();
        let second = copies.write_copy(&a, &root).unwrap();
        new_delta(&world, &second, LEDGER);
        assert!(
            second.bytes_uploaded < first.bytes_uploaded / 8,
            "{backend}: the checkpoint moved pages, not their content: {second:?}"
        );
        // A checkpoint with nothing new: the committed state is what the last copy holds.
        host.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
        let third = copies.write_copy(&a, &root).unwrap();
        assert!(
            third.bytes_uploaded < first.bytes_uploaded / 8,
            "{backend}: {third:?}"
        );
        let committed: Vec<String> = {
            let mut query = host.prepare("SELECT text FROM entries ORDER BY rowid").unwrap();
            let rows = query.query_map([], |r| r.get(0)).unwrap();
            rows.map(|r| r.unwrap()).collect()
        };
        drop(host);

        let (report, root_b) = next_holder_restores_checked(&world);
        assert_eq!(report.restored, id(1, 3), "{backend}");
        assert_eq!(entries_of(&root_b), committed, "{backend}");
        assert_eq!(committed, ["h1", "h2", "h3"]);
    }
}

/// A store that, once armed, holds the copy's writer back just before it creates its manifest
/// (what the copy stores beside it is stored, the copy does not exist yet), or a collection
/// just before it deletes anything, until the test lets it go on.
#[derive(Debug)]
struct HeldBack {
    inner: Arc<dyn DurableStore>,
    at: Hold,
    armed: AtomicBool,
    reached: Mutex<Option<Sender<()>>>,
    release: Mutex<Option<Receiver<()>>>,
}

#[derive(Debug, PartialEq)]
enum Hold {
    Manifest,
    Deletes,
}

impl HeldBack {
    /// The store, armed, and the ends the test waits on (`reached`) and lets it go with.
    fn new(inner: Arc<dyn DurableStore>, at: Hold) -> (Arc<HeldBack>, Receiver<()>, Sender<()>) {
        let (reached_tx, reached) = channel();
        let (release, release_rx) = channel();
        let held = Arc::new(HeldBack {
            inner,
            at,
            armed: AtomicBool::new(false),
            reached: Mutex::new(Some(reached_tx)),
            release: Mutex::new(Some(release_rx)),
        });
        (held, reached, release)
    }

    fn hold(&self, at: Hold) {
        if self.at == at && self.armed.swap(false, Ordering::SeqCst) {
            lock(&self.reached).take().unwrap().send(()).unwrap();
            lock(&self.release).take().unwrap().recv().unwrap();
        }
    }
}

impl DurableStore for HeldBack {
    fn put_new(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome> {
        if key.ends_with(".json") && !key.ends_with(TENURE) {
            self.hold(Hold::Manifest);
        }
        self.inner.put_new(key, bytes)
    }
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        self.inner.list(prefix)
    }
    fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key)
    }
    fn delete_all(&self, keys: &[String]) -> Result<()> {
        if !keys.is_empty() {
            self.hold(Hold::Deletes);
        }
        self.inner.delete_all(keys)
    }
    fn reserve(&self, key: &str) {
        self.inner.reserve(key)
    }

    fn location(&self) -> String {
        self.inner.location()
    }
}

/// The retention's collection runs behind the copy that started it: the copy answers while
/// the collection is still deleting, and so do the tenure's next copies, up to the one that
/// starts the next collection, which waits for it: one collection at a time, so the copies kept
/// stay bounded.
#[test]
fn a_copy_answers_before_its_collection_and_the_next_collection_waits_for_it() {
    let world = World::directory();
    let (store, reached, release) = HeldBack::new(world.durable.clone(), Hold::Deletes);
    let copies = Arc::new(EpochCopies::new(store.clone()).with_retention(NonZeroUsize::new(2)));
    let a = Arc::new(world.holder("replica-a"));
    let root = world.root("a");
    padded_root(&root, 64);
    let write = |n: usize| {
        add_entry(&root, &n.to_string());
        let (copies, a, root, (done, answered)) = (copies.clone(), a.clone(), root.clone(), channel());
        std::thread::spawn(move || done.send(copies.write_copy(&a, &root).map(|w| w.id)).unwrap());
        answered
    };
    let wait =
        |answered: Receiver<Result<CopyId>>| answered.recv_timeout(Duration::from_secs(60)).unwrap().unwrap();
    for n in 1..=3 {
        wait(write(n));
    }
    // Settles the collection behind the second copy, which had nothing to delete.
    copies.gc(&a, 2).unwrap();
    store.armed.store(true, Ordering::SeqCst);
    // The fourth copy's collection deletes the first two, and is held there.
    assert_eq!(wait(write(4)), id(1, 4).unwrap());
    reached
        .recv_timeout(Duration::from_secs(60))
        .expect("the collection deletes");
    assert_eq!(
        wait(write(5)),
        id(1, 5).unwrap(),
        "the next copy answered while the collection was held"
    );
    let sixth = write(6);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        sixth.try_recv().is_err(),
        "the copy that starts the next collection went on beside the last one"
    );
    release.send(()).unwrap();
    assert_eq!(wait(sixth), id(1, 6).unwrap());
    let complete: Vec<CopyId> = copies
        .list(&key())
        .unwrap()
        .iter()
        .filter(|c| c.complete)
        .map(|c| c.id)
        .collect();
    assert!(!complete.contains(&id(1, 2).unwrap()), "{complete:?}");
}

/// A store that records the keys it is asked to get.
#[derive(Debug)]
struct Gets {
    inner: Arc<dyn DurableStore>,
    asked: Mutex<Vec<String>>,
}

impl DurableStore for Gets {
    fn put_new(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome> {
        self.inner.put_new(key, bytes)
    }
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        lock(&self.asked).push(key.to_owned());
        self.inner.get(key)
    }
    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        self.inner.list(prefix)
    }
    fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key)
    }
    fn location(&self) -> String {
        self.inner.location()
    }
}

/// A collection reads each manifest once: the copies it judges are the ones whose references
/// it then keeps, and a manifest carrying its chain's deltas inline is most of what it reads.
#[test]
fn a_collection_reads_each_manifest_once() {
    let world = World::directory();
    let gets = Arc::new(Gets {
        inner: world.durable.clone(),
        asked: Mutex::default(),
    });
    let copies = EpochCopies::new(gets.clone());
    let a = world.holder("replica-a");
    let root = world.root("a");
    padded_root(&root, 64);
    for n in 0..5 {
        add_entry(&root, &n.to_string());
        copies.write_copy(&a, &root).unwrap();
    }
    lock(&gets.asked).clear();
    let report = copies.gc(&a, 2).unwrap();
    assert_eq!((report.kept.len(), report.deleted.len()), (2, 3), "{report:?}");
    let asked = lock(&gets.asked).clone();
    let once: BTreeSet<&String> = asked.iter().collect();
    assert!(!asked.is_empty() && once.len() == asked.len(), "{asked:#?}");
}

/// gc (here an operator's instance, acting for the same holder) runs while a copy has stored
/// its pieces but not its manifest: it deletes older copies and their pieces, and the copy,
/// completed after it, restores with every piece it references.
#[test]
fn gc_interleaved_with_a_copy_being_written_deletes_nothing_it_needs() {
    for (backend, world) in worlds() {
        let (held, reached, release) = HeldBack::new(world.durable.clone(), Hold::Manifest);
        let writer = EpochCopies::new(held.clone());
        let a = world.holder("replica-a");
        let root = world.root("a");
        padded_root(&root, 64);
        for n in ["1", "2", "3"] {
            add_entry(&root, n);
            writer.write_copy(&a, &root).unwrap();
        }
        add_entry(&root, "4");
        held.armed.store(true, Ordering::SeqCst);
        let report = std::thread::scope(|scope| {
            let copy = scope.spawn(|| writer.write_copy(&a, &root));
            reached.recv().unwrap();
            let report = world.copies().gc(&a, 1).unwrap();
            release.send(()).unwrap();
            let written = copy.join().unwrap().unwrap();
            assert_eq!((written.id.seq, written.pieces_reused), (4, 1), "{backend}");
            report
        });
        assert_eq!(report.kept, [CopyId { epoch: 1, seq: 3 }], "{backend}");
        assert_eq!(
            report.deleted,
            [CopyId { epoch: 1, seq: 2 }, CopyId { epoch: 1, seq: 1 }],
            "{backend}"
        );
        for (object, _) in AnyManifest::V2(manifest_at(&world, 1, 4))
            .objects(&key(), CopyId { epoch: 1, seq: 4 })
            .unwrap()
        {
            assert!(
                world.durable.get(&object).unwrap().is_some(),
                "{backend}: {object} is gone"
            );
        }
        // The copy gc kept shares its base with the new one, and the next copy still builds on it.
        add_entry(&root, "5");
        assert_eq!(writer.write_copy(&a, &root).unwrap().pieces_reused, 1);
        let b = world.next_holder("replica-b");
        let root_b = world.root("b");
        let restored = world.copies().restore(&b, &root_b, None).unwrap();
        assert_eq!(restored.restored, id(1, 5), "{backend}");
        assert!(restored.skipped.is_empty(), "{backend}: {:?}", restored.skipped);
        assert_eq!(entries_of(&root_b), ["1", "2", "3", "4", "5"], "{backend}");
    }
}

/// gc decides validity from sizes, without fetching: a newest copy damaged in its bytes still
/// looks valid to it. A holder that restored an older copy (the damaged one skipped) builds
/// its copies on that copy's base; its tenure marker makes the damaged copy superseded, so gc
/// keeps the copy restored from, and its base, instead.
#[test]
fn gc_keeps_what_the_holders_next_copy_builds_on() {
    for (backend, world) in worlds() {
        let a = world.holder("replica-a");
        let (root, copies) = (world.root("a"), world.copies());
        padded_root(&root, 64);
        add_entry(&root, "1");
        copies.write_copy(&a, &root).unwrap();
        add_entry(&root, "2");
        copies.write_copy(&a, &root).unwrap();
        // Most of the ledger rewritten: the third copy stores a new base.
        let db = rusqlite::Connection::open(root.join(LEDGER)).unwrap();
        db.execute_batch("UPDATE pad SET b = randomblob(4000)").unwrap();
        drop(db);
        copies.write_copy(&a, &root).unwrap();
        let third = manifest_at(&world, 1, 3);
        assert!(file_of(&third, LEDGER).deltas.is_empty(), "{backend}");
        corrupt(&world, &full_key(&file_of(&third, LEDGER).base));

        let b = world.next_holder("replica-b");
        let (root_b, copies_b) = (world.root("b"), world.copies());
        let report = copies_b.restore(&b, &root_b, None).unwrap();
        assert_eq!(report.restored, id(1, 2), "{backend}");
        let gc = copies_b.gc(&b, 1).unwrap();
        assert_eq!(gc.kept, [CopyId { epoch: 1, seq: 2 }], "{backend}");
        assert_eq!(gc.deleted, [CopyId { epoch: 1, seq: 1 }], "{backend}");
        add_entry(&root_b, "b1");
        copies_b.write_copy(&b, &root_b).unwrap();

        let c = world.next_holder("replica-c");
        let root_c = world.root("c");
        let report = world.copies().restore(&c, &root_c, None).unwrap();
        assert_eq!(report.restored, id(2, 1), "{backend}: {:?}", report.skipped);
        assert_eq!(entries_of(&root_c), ["1", "2", "b1"], "{backend}");
    }
}

/// What the report says a copy stored is what the store holds, and a one-row change of a
/// ledger of a few MB stores a few blocks.
#[test]
fn a_one_row_change_of_a_multi_mb_ledger_uploads_a_few_blocks() {
    for (backend, world) in worlds() {
        let a = world.holder("replica-a");
        let (root, copies) = (world.root("a"), world.copies());
        padded_root(&root, 4096);
        add_entry(&root, "1");
        let size = fs::metadata(root.join(LEDGER)).unwrap().len();
        assert!(size > 4 << 20, "{size}");
        // A base of pieces, each stored once.
        let pieces = size.div_ceil(body::PIECE as u64) as usize;
        assert!(pieces > 1, "{size}");
        let first = copies.write_copy(&a, &root).unwrap();
        assert_eq!(
            (first.pieces_uploaded, first.bytes_uploaded),
            (pieces, size),
            "{backend}"
        );
        add_entry(&root, "2");
        let second = copies.write_copy(&a, &root).unwrap();
        assert_eq!(second.bytes, size, "{backend}");
        assert_eq!(
            (second.pieces_uploaded, second.pieces_reused),
            (0, pieces),
            "{backend}: one object, the manifest with the delta inline"
        );
        assert_eq!(second.bytes_reused, size, "{backend}");
        assert!(
            second.bytes_uploaded <= 4 * delta::BLOCK as u64 + 64,
            "{backend}: {second:?}"
        );
        assert_eq!(
            second.bytes_uploaded,
            copy_bytes(&world, 1, 2) + inline_bytes(&manifest_at(&world, 1, 2)),
            "{backend}"
        );
        assert_eq!(copy_bytes(&world, 1, 2), 0, "{backend}");
        // What the listing's reader is told the copy references, as its report said.
        assert_eq!(
            copies.reused(&key(), CopyId { epoch: 1, seq: 2 }).unwrap(),
            Some((second.pieces_reused, second.bytes_reused)),
            "{backend}"
        );
        assert_eq!(
            copies.reused(&key(), CopyId { epoch: 1, seq: 1 }).unwrap(),
            Some((0, 0))
        );
        assert_eq!(copies.reused(&key(), CopyId { epoch: 1, seq: 9 }).unwrap(), None);

        let b = world.next_holder("replica-b");
        let root_b = world.root("b");
        assert_eq!(
            world.copies().restore(&b, &root_b, None).unwrap().restored,
            id(1, 2)
        );
        assert_eq!(entries_of(&root_b), ["1", "2"], "{backend}");
        assert_eq!(fs::metadata(root_b.join(LEDGER)).unwrap().len(), size);
    }
}

/// A whole image (here a first copy) of a database that fails `quick_check` is never
/// published: the copy fails, no manifest names it, and a restore does not see it.
#[test]
fn an_image_that_fails_its_check_is_not_published() {
    for (backend, world) in worlds() {
        let a = world.holder("replica-a");
        let (root, copies) = (world.root("a"), world.copies());
        padded_root(&root, 64);
        add_entry(&root, "1");
        let ledger = root.join(LEDGER);
        // The pad table's root page (the third), an interior page, overwritten.
        let mut damaged = fs::read(&ledger).unwrap();
        damaged[2 * delta::BLOCK..3 * delta::BLOCK].fill(0xff);
        fs::write(&ledger, &damaged).unwrap();
        match copies.write_copy(&a, &root) {
            Err(Error::Storage { code, message }) => {
                assert_eq!(code, "SQLITE_CORRUPT", "{backend}");
                assert!(message.contains("quick_check"), "{backend}: {message}");
            }
            other => panic!("{backend}: {other:?}"),
        }
        assert!(
            copies.list(&key()).unwrap().iter().all(|c| !c.complete),
            "{backend}: no manifest names the image"
        );
        assert_eq!(world.restored_by_next_holder("b"), None, "{backend}");
    }
}

/// Rows changed all over a ledger, one copy each: a copy stores one delta of about what changed
/// since the last copy (now and then merged with the deltas before it), not every block changed
/// since the base; the chain stays short, the newest copy restores from it, and it fetches no
/// more than 1.5 times the file.
#[test]
fn a_long_tenure_stores_about_what_changed_and_restores_from_a_short_chain() {
    for (backend, world) in worlds() {
        let a = world.holder("replica-a");
        let (root, copies) = (world.root("a"), world.copies());
        padded_root(&root, 1024);
        let first = copies.write_copy(&a, &root).unwrap();
        // Opened for each change and closed before the copy, which refuses a file this process
        // holds open.
        let db = || rusqlite::Connection::open(root.join(LEDGER)).unwrap();
        let rows: i64 = db()
            .query_row("SELECT max(rowid) FROM pad", [], |r| r.get(0))
            .unwrap();
        let base = manifest_at(&world, 1, first.id.seq);
        let base_blocks = delta::block_digests(&fs::read(root.join(LEDGER)).unwrap());
        assert_eq!(file_of(&base, LEDGER).deltas.len(), 0);
        let (mut stored, mut since_base) = (0, 0);
        for step in 1..=40i64 {
            // A row far from the last one: its page has not changed since the base.
            let row = (step * 37) % rows + 1;
            db().execute("UPDATE pad SET b = randomblob(4000) WHERE rowid = ?1", [row])
                .unwrap();
            add_entry(&root, &step.to_string());
            let written = copies.write_copy(&a, &root).unwrap();
            new_delta(&world, &written, LEDGER);
            stored += written.bytes_uploaded;
            let now = delta::block_digests(&fs::read(root.join(LEDGER)).unwrap());
            since_base += delta::changed_blocks(&base_blocks, &now).len() as u64 * delta::BLOCK as u64;
            let manifest = manifest_at(&world, 1, written.id.seq);
            let ledger = file_of(&manifest, LEDGER);
            assert!(
                ledger.deltas.len() <= delta::MAX_CHAIN,
                "{backend}: {:?}",
                ledger.deltas
            );
            let fetched: u64 = ledger.objects().map(|o| o.size).sum();
            assert!(
                fetched * 2 <= ledger.size * 3,
                "{backend}: {fetched} for {}",
                ledger.size
            );
        }
        assert!(
            stored * 2 < since_base,
            "{backend}: stored {stored} bytes where deltas against the base would have stored {since_base}"
        );
        let b = world.next_holder("replica-b");
        let (root_b, copies_b) = (world.root("b"), world.copies());
        assert_eq!(copies_b.restore(&b, &root_b, None).unwrap().restored, id(1, 41));
        let expected: Vec<String> = (1..=40).map(|n| n.to_string()).collect();
        assert_eq!(entries_of(&root_b), expected, "{backend}");
        // The restored chain is the next copy's lineage: it goes on from it.
        add_entry(&root_b, "b");
        let next = copies_b.write_copy(&b, &root_b).unwrap();
        new_delta(&world, &next, LEDGER);
        assert!(next.bytes_uploaded < next.bytes / 4, "{backend}: {next:?}");
    }
}

/// A ledger the host holds open in WAL mode is copied from its frames: after the first copy,
/// each copy reads the frames since the last one, and the host's snapshot function is asked
/// only when the WAL cannot tell (emptied by a checkpoint that truncated it). Passive
/// checkpoints, the host's automatic ones and restarts of the WAL in between; the restored
/// ledger is, byte for byte, the one the host's connection sees.
#[test]
fn a_held_wal_ledger_is_copied_from_its_frames() {
    for (backend, world) in worlds() {
        let a = world.holder("replica-a");
        let root = world.root("a");
        padded_root(&root, 2048);
        let mut host = rusqlite::Connection::open(root.join(LEDGER)).unwrap();
        // Small enough that the host's own checkpoints (and WAL restarts) come up.
        host.execute_batch("PRAGMA wal_autocheckpoint = 16").unwrap();
        let (snapshot, asked) = counted_host_snapshot();
        let copies = world.copies().with_host_snapshot(Some(snapshot));
        let insert = |text: &str| {
            host.execute("INSERT INTO entries (text) VALUES (?1)", [text])
                .unwrap();
        };
        insert("0");
        let first = copies.write_copy(&a, &root).unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 0, "{backend}: the WAL had frames");
        for n in 1..=60 {
            insert(&n.to_string());
            match n {
                20 => host.execute_batch("PRAGMA wal_checkpoint(PASSIVE)").unwrap(),
                40 => host.execute_batch("PRAGMA wal_checkpoint(RESTART)").unwrap(),
                _ => {}
            }
            let written = copies.write_copy(&a, &root).unwrap();
            new_delta(&world, &written, LEDGER);
            assert!(
                written.bytes_uploaded * 16 < first.bytes_uploaded,
                "{backend} {n}: {written:?}"
            );
        }
        assert_eq!(
            asked.load(Ordering::SeqCst),
            0,
            "{backend}: every copy came from the WAL"
        );
        host.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
        copies.write_copy(&a, &root).unwrap();
        assert_eq!(
            asked.load(Ordering::SeqCst),
            1,
            "{backend}: an empty WAL tells nothing"
        );
        insert("last");
        copies.write_copy(&a, &root).unwrap();
        let live = host.serialize(rusqlite::MAIN_DB).unwrap().to_vec();

        let (report, root_b) = next_holder_restores_checked(&world);
        assert_eq!(report.restored, id(1, 63), "{backend}");
        assert!(
            fs::read(root_b.join(LEDGER)).unwrap() == live,
            "{backend}: not the host's ledger"
        );
        let expected: Vec<String> = ["0"]
            .into_iter()
            .map(str::to_owned)
            .chain((1..=60).map(|n| n.to_string()))
            .chain(["last".to_owned()])
            .collect();
        assert_eq!(entries_of(&root_b), expected, "{backend}");
    }
}

/// A copy that read the held ledger from its WAL knows the host's descriptor of it, and the
/// next copy does not list every descriptor of the process while that one still names the
/// ledger; but a database the host opened in the root since is found held all the same (and
/// read through the host's function, never this library's SQLite), and so is the ledger once
/// the host opened it again under another descriptor.
#[test]
fn a_database_the_host_opens_after_a_copy_is_found_held() {
    let world = World::directory();
    let a = world.holder("replica-a");
    let root = world.root("a");
    padded_root(&root, 64);
    let host = rusqlite::Connection::open(root.join(LEDGER)).unwrap();
    let (snapshot, asked) = counted_host_snapshot();
    let copies = world.copies().with_host_snapshot(Some(snapshot));
    host.execute("INSERT INTO entries (text) VALUES ('0')", [])
        .unwrap();
    copies.write_copy(&a, &root).unwrap();
    assert_eq!(asked.load(Ordering::SeqCst), 0, "the WAL had frames");

    let notes = rusqlite::Connection::open(root.join("notes.db")).unwrap();
    notes
        .execute_batch("PRAGMA journal_mode = DELETE; CREATE TABLE n (x); INSERT INTO n VALUES (1);")
        .unwrap();
    host.execute("INSERT INTO entries (text) VALUES ('1')", [])
        .unwrap();
    copies.write_copy(&a, &root).unwrap();
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "notes.db is the host's: read through its function"
    );
    drop(notes);
    fs::remove_file(root.join("notes.db")).unwrap();

    // The ledger opened again (under another descriptor while the first is still open), the
    // first closed: the descriptor the last copy read through names nothing of the root.
    let mut again = rusqlite::Connection::open(root.join(LEDGER)).unwrap();
    drop(host);
    again
        .execute("INSERT INTO entries (text) VALUES ('2')", [])
        .unwrap();
    copies.write_copy(&a, &root).unwrap();
    let live = again.serialize(rusqlite::MAIN_DB).unwrap().to_vec();
    let (_, root_b) = next_holder_restores_checked(&world);
    assert!(
        fs::read(root_b.join(LEDGER)).unwrap() == live,
        "not the host's ledger"
    );
    assert_eq!(entries_of(&root_b), ["0", "1", "2"]);
}

/// A writer that keeps committing (with its own connection, as another thread or process of
/// the host would) while copies of the held ledger are read from its WAL, its automatic
/// checkpoints restarting the WAL now and then: every copy restores to a committed state (rows
/// 1..n with none missing, `integrity_check` ok), never behind the one before it.
#[test]
fn copies_read_from_a_wal_that_a_writer_keeps_committing_to_are_committed_states() {
    let world = World::directory();
    let a = world.holder("replica-a");
    let root = world.root("a");
    padded_root(&root, 256);
    let ledger = root.join(LEDGER);
    let host = rusqlite::Connection::open(&ledger).unwrap();
    let (snapshot, asked) = counted_host_snapshot();
    let copies = world.copies().with_host_snapshot(Some(snapshot));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, ledger) = (stop.clone(), ledger.clone());
        std::thread::spawn(move || {
            let db = rusqlite::Connection::open(&ledger).unwrap();
            db.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
            db.execute_batch("PRAGMA wal_autocheckpoint = 8").unwrap();
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                db.execute("INSERT INTO entries (text) VALUES (?1)", [n.to_string()])
                    .unwrap();
                // Now and then a pause, so that some copies read the WAL between commits and
                // others meet a commit that came in meanwhile.
                if n.is_multiple_of(4) {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            n
        })
    };
    let mut last = 0usize;
    for round in 0..30 {
        copies.write_copy(&a, &root).unwrap();
        let into = world.dir.path().join(format!("look-{round}"));
        world
            .copies()
            .with_integrity_check(true)
            .restore_latest(&key(), 0, None, &into, None)
            .unwrap();
        let entries = entries_of(&into);
        let expected: Vec<String> = (1..=entries.len()).map(|n| n.to_string()).collect();
        assert_eq!(entries, expected, "round {round}: not a committed state");
        assert!(
            entries.len() >= last,
            "round {round}: {} rows after {last}",
            entries.len()
        );
        last = entries.len();
    }
    stop.store(true, Ordering::SeqCst);
    let written = writer.join().unwrap();
    copies.write_copy(&a, &root).unwrap();
    drop(host);
    let into = world.dir.path().join("look-last");
    world
        .copies()
        .restore_latest(&key(), 0, None, &into, None)
        .unwrap();
    assert_eq!(entries_of(&into).len() as u64, written);
    assert!(written > last as u64, "the writer went on during the copies");
    // Most copies came from the WAL; where a commit kept coming in, from the host's function.
    assert!(asked.load(Ordering::SeqCst) < 31, "no copy was read from the WAL");
}

/// A held ledger whose pages are 8 KiB, two blocks each: copied from its WAL's frames alike,
/// the restored file byte for byte the host's.
#[test]
fn a_held_ledger_of_pages_larger_than_a_block_is_copied_from_its_frames() {
    let world = World::directory();
    let a = world.holder("replica-a");
    let root = world.root("a");
    let ledger = root.join(LEDGER);
    fs::create_dir_all(ledger.parent().unwrap()).unwrap();
    let mut host = rusqlite::Connection::open(&ledger).unwrap();
    host.execute_batch(
        "PRAGMA page_size = 8192; PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;
         CREATE TABLE entries (text TEXT NOT NULL); CREATE TABLE pad (b BLOB);",
    )
    .unwrap();
    for _ in 0..64 {
        host.execute("INSERT INTO pad VALUES (randomblob(6000))", [])
            .unwrap();
    }
    let (snapshot, asked) = counted_host_snapshot();
    let copies = world.copies().with_host_snapshot(Some(snapshot));
    let first = copies.write_copy(&a, &root).unwrap();
    for n in 1..=10 {
        host.execute("INSERT INTO entries (text) VALUES (?1)", [n.to_string()])
            .unwrap();
        host.execute("UPDATE pad SET b = randomblob(6000) WHERE rowid = ?1", [n * 5])
            .unwrap();
        let written = copies.write_copy(&a, &root).unwrap();
        // One delta: the pages changed since the last copy, or now and then a merge of them.
        new_delta(&world, &written, LEDGER);
        assert!(
            written.bytes_uploaded * 4 < first.bytes_uploaded,
            "{n}: {written:?}"
        );
    }
    assert_eq!(asked.load(Ordering::SeqCst), 0, "every copy came from the WAL");
    let live = host.serialize(rusqlite::MAIN_DB).unwrap().to_vec();
    let (report, root_b) = next_holder_restores_checked(&world);
    assert_eq!(report.restored, id(1, 11));
    assert!(
        fs::read(root_b.join(LEDGER)).unwrap() == live,
        "not the host's ledger"
    );
}

/// With a retention, a tenure that writes copy after copy (a strict router writes one per
/// acknowledged write) keeps a bounded number of them and of their objects in the store, and
/// the newest still restores, with everything it builds on; without one, every copy stays.
#[test]
fn a_retention_keeps_the_copies_and_objects_of_a_long_tenure_bounded() {
    let keep = NonZeroUsize::new(3).unwrap();
    for retention in [Some(keep), None] {
        for (backend, world) in worlds() {
            let a = world.holder("replica-a");
            let root = world.root("a");
            padded_root(&root, 64);
            let copies = world.copies().with_retention(retention);
            // A deleted copy whose objects later copies build on stays listed, incomplete.
            let count = || copies.list(&key()).unwrap().iter().filter(|c| c.complete).count();
            let objects = || world.durable.list(&tenant_prefix(&key()).unwrap()).unwrap().len();
            let mut most = (0, 0);
            for step in 1..=20 {
                add_entry(&root, &step.to_string());
                copies.write_copy(&a, &root).unwrap();
                most = (most.0.max(count()), most.1.max(objects()));
            }
            if retention.is_none() {
                assert_eq!(count(), 20, "{backend}");
                continue;
            }
            // `keep` copies after a collection, `keep` more until the next, and as many while
            // it runs.
            assert!(most.0 <= 3 * keep.get(), "{backend}: {} copies at most", most.0);
            // A manifest and a delta each, the base and the marker.
            assert!(
                most.1 <= 6 * keep.get() + 2,
                "{backend}: {} objects at most",
                most.1
            );
            let (report, root_b) = next_holder_restores_checked(&world);
            assert_eq!(report.restored, id(1, 20), "{backend}");
            let expected: Vec<String> = (1..=20).map(|n| n.to_string()).collect();
            assert_eq!(entries_of(&root_b), expected, "{backend}");
        }
    }
}

/// A plain file that the file system shows as the last copy read it is not read again; one
/// written since, even back to its old size and modification time, is; and one written just
/// before it was read is read again whatever its times say (they may not have moved).
#[test]
fn an_untouched_plain_file_is_not_read_again_and_a_touched_one_is() {
    let world = World::directory();
    let a = world.holder("replica-a");
    let root = world.root("a");
    fs::create_dir_all(&root).unwrap();
    let (old, fresh) = (root.join("old.bin"), root.join("fresh.bin"));
    fs::write(&old, vec![7u8; 50_000]).unwrap();
    // Past the window in which a write may leave a file's times as they were.
    std::thread::sleep(snapshot::RACY + std::time::Duration::from_millis(100));
    fs::write(&fresh, b"written just now").unwrap();
    let copies = world.copies();
    copies.write_copy(&a, &root).unwrap();
    let unread = || {
        let tenure = copies.tenure(&a);
        let lineage = lock(&tenure).lineage.clone().unwrap();
        let snapshot = Snapshot::take(&root, None, Some(&lineage)).unwrap();
        let mut unread: Vec<String> = snapshot
            .files
            .iter()
            .filter(|f| f.unread())
            .map(|f| f.path.clone())
            .collect();
        unread.sort();
        unread
    };
    assert_eq!(unread(), ["old.bin"]);
    let copied = copies.write_copy(&a, &root).unwrap();
    assert_eq!((copied.pieces_uploaded, copied.files), (0, 2), "{copied:?}");
    // Same size, same modification time: the change time moved all the same.
    let modified = fs::metadata(&old).unwrap().modified().unwrap();
    fs::write(&old, vec![8u8; 50_000]).unwrap();
    fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    assert_eq!(unread(), Vec::<String>::new());
    let copied = copies.write_copy(&a, &root).unwrap();
    assert_eq!(copied.pieces_uploaded, 1, "{copied:?}");
    let (report, root_b) = next_holder_restores_checked(&world);
    assert_eq!(report.restored, id(1, 3));
    assert_eq!(fs::read(root_b.join("old.bin")).unwrap(), vec![8u8; 50_000]);
}

/// A file larger than a piece is a base of pieces; once a change is too large for a delta, the
/// new base stores the pieces it touched and references the others; a run of zeros is one
/// object however many pieces it spans; the restore rebuilds the file byte for byte.
#[test]
fn a_large_file_is_a_base_of_pieces_and_a_new_base_stores_only_the_pieces_that_changed() {
    let piece = body::PIECE;
    for (backend, world) in worlds() {
        let a = world.holder("replica-a");
        let (root, copies) = (world.root("a"), world.copies());
        fs::create_dir_all(&root).unwrap();
        let big = root.join("big.bin");
        // Three pieces of data, two of zeros, and a short tail.
        let mut content: Vec<u8> = (0..3 * piece).map(|i| (i % 251) as u8).collect();
        content.resize(5 * piece + 1000, 0);
        content[5 * piece..].fill(3);
        fs::write(&big, &content).unwrap();
        let first = copies.write_copy(&a, &root).unwrap();
        // The two pieces of zeros are one object, and the short tail goes inline.
        assert_eq!(first.pieces_uploaded, 4, "{backend}: {first:?}");
        assert_eq!(
            first.bytes_uploaded,
            content.len() as u64 - piece as u64,
            "{backend}"
        );
        let manifest = manifest_at(&world, 1, first.id.seq);
        let file = file_of(&manifest, "big.bin");
        assert_eq!(file.base_objects().count(), 6, "{backend}");
        assert_eq!(
            file.base_pieces[2].object, file.base_pieces[3].object,
            "{backend}"
        );

        // More than half the file changes (pieces 1, 2 and the second of zeros), too much for
        // a delta; piece 0, the first of zeros and the tail stay.
        for byte in &mut content[piece..3 * piece] {
            *byte = byte.wrapping_add(1);
        }
        content[4 * piece..5 * piece].fill(7);
        let grown = content.clone();
        fs::write(&big, &grown).unwrap();
        let second = copies.write_copy(&a, &root).unwrap();
        let manifest = manifest_at(&world, 1, second.id.seq);
        let file = file_of(&manifest, "big.bin");
        assert!(file.deltas.is_empty(), "{backend}: a new base, not a delta");
        // The tail, inline, is carried in the new manifest.
        assert_eq!(
            (second.pieces_uploaded, second.pieces_reused),
            (3, 2),
            "{backend}: {second:?}"
        );
        assert_eq!(second.bytes_uploaded, 3 * piece as u64, "{backend}");
        assert_eq!(second.bytes_reused, 2 * piece as u64 + 1000, "{backend}");
        let (report, root_b) = next_holder_restores_checked(&world);
        assert_eq!(report.restored, id(1, second.id.seq), "{backend}");
        assert!(
            fs::read(root_b.join("big.bin")).unwrap() == grown,
            "{backend}: the restored file differs"
        );
    }
}

/// Copies written before pieces (format 3) still restore; a format 3 manifest that names
/// pieces is not one, and is passed over as a manifest fault.
#[test]
fn a_copy_of_format_3_still_restores_and_one_naming_pieces_is_a_manifest_fault() {
    let world = World::directory();
    let (a, root, copies, _) = first_copy_in_format(&world, 3);
    add_entry(&root, "2");
    copies.write_copy(&a, &root).unwrap();
    let mut manifest = manifest_at(&world, 1, 2);
    manifest.format_version = 3;
    let ledger = ledger_index(&manifest);
    manifest.files[ledger].base_pieces = vec![manifest.files[ledger].base.clone()];
    forge_manifest(&world, 2, &manifest);
    let (report, root_b) = next_holder_restores_checked(&world);
    assert_eq!(report.restored, id(1, 1));
    assert_eq!(
        report.skipped,
        [SkippedCopy {
            id: CopyId { epoch: 1, seq: 2 },
            reason: SkipReason::Manifest
        }]
    );
    assert_eq!(entries_of(&root_b), ["1"]);
}

/// A copy restored from a manifest of an earlier format (file digests over every block) is the
/// lineage of the next copy: a file left as it was is referenced, not stored again, though
/// this build digests it another way.
#[test]
fn a_file_restored_from_format_5_and_left_alone_is_not_stored_again() {
    let world = World::directory();
    let (.., manifest) = first_copy_in_format(&world, 5);
    let b = world.next_holder("replica-b");
    let (root_b, copies_b) = (world.root("b"), world.copies());
    assert_eq!(copies_b.restore(&b, &root_b, None).unwrap().restored, id(1, 1));
    let written = copies_b.write_copy(&b, &root_b).unwrap();
    assert_eq!(
        (written.pieces_uploaded, written.bytes_uploaded),
        (0, 0),
        "{written:?}"
    );
    // Its manifest digests the file as this build does, so the next holder restores it.
    assert_ne!(
        manifest_at(&world, 2, 1).files[0].digest,
        manifest.files[0].digest
    );
    let (report, _) = {
        let c = world.next_holder("replica-c");
        let root_c = world.root("c");
        (world.copies().restore(&c, &root_c, None).unwrap(), root_c)
    };
    assert_eq!(report.restored, id(2, 1));
}

/// Format 5: small objects ride in the manifest. A one-row change is one object, the manifest;
/// the bytes a manifest carries inline never pass the budget, however many small files change;
/// what does not fit is stored, and nothing is both; small files that stay the same give their
/// room up to what changes; every copy restores byte for byte.
#[test]
fn small_objects_go_inline_within_the_budget_and_give_way_to_what_changes() {
    const SMALL: usize = 5000;
    for (backend, world) in worlds() {
        let a = world.holder("replica-a");
        let (root, copies) = (world.root("a"), world.copies());
        padded_root(&root, 64);
        fs::create_dir_all(root.join("small")).unwrap();
        let write_small = |round: u8| {
            for n in 0..12u8 {
                fs::write(root.join(format!("small/{n:02}.txt")), vec![round ^ n; SMALL]).unwrap();
            }
        };
        let check = |written: &WrittenCopy| -> ManifestV2 {
            let manifest = manifest_at(&world, written.id.epoch, written.id.seq);
            let inline: Vec<&ObjectRef> = manifest
                .files
                .iter()
                .flat_map(FileV2::objects)
                .filter(|o| o.inline.is_some())
                .collect();
            let carried: usize = inline.iter().map(|o| o.size as usize).sum();
            assert!(carried <= INLINE_BUDGET, "{backend}: {carried} inline bytes");
            assert!(inline.iter().all(|o| o.size as usize <= INLINE_MOST), "{backend}");
            let listed = copies
                .list(&key())
                .unwrap()
                .into_iter()
                .find(|c| c.id == written.id)
                .unwrap();
            // The manifest and what the copy stored: nothing inline is stored too.
            assert_eq!(
                listed.objects,
                written.pieces_uploaded + 1,
                "{backend}: {written:?}"
            );
            manifest
        };
        write_small(1);
        add_entry(&root, "1");
        let first = copies.write_copy(&a, &root).unwrap();
        check(&first);
        // The ledger's base, and the small files that did not fit.
        assert_eq!(
            first.pieces_uploaded,
            1 + 12 - INLINE_BUDGET / SMALL,
            "{backend}: {first:?}"
        );
        for round in 2..=4u8 {
            write_small(round);
            add_entry(&root, &round.to_string());
            let written = copies.write_copy(&a, &root).unwrap();
            check(&written);
        }
        // Only the ledger changes now: its delta goes inline first, and the room left over is
        // what the small files keep; after one copy that stores those that no longer fit, a
        // one-row change is the manifest alone.
        let mut alone = 0;
        for n in 5..=8 {
            add_entry(&root, &n.to_string());
            let written = copies.write_copy(&a, &root).unwrap();
            let manifest = check(&written);
            let delta = file_of(&manifest, LEDGER).deltas.last().unwrap();
            assert!(delta.inline.is_some(), "{backend}: {delta:?}");
            alone += usize::from(written.pieces_uploaded == 0);
        }
        assert!(
            alone >= 3,
            "{backend}: {alone} of 4 one-row copies were one object"
        );
        let (report, root_b) = next_holder_restores_checked(&world);
        assert_eq!(report.restored, id(1, 8), "{backend}");
        assert!(report.skipped.is_empty(), "{backend}: {:?}", report.skipped);
        for n in 0..12u8 {
            assert_eq!(
                fs::read(root_b.join(format!("small/{n:02}.txt"))).unwrap(),
                vec![4 ^ n; SMALL],
                "{backend}"
            );
        }
        let expected: Vec<String> = (1..=8).map(|n| n.to_string()).collect();
        assert_eq!(entries_of(&root_b), expected, "{backend}");
    }
}

/// Inline objects are format 5's: a manifest of an earlier format that carries one is no
/// manifest this build wrote, and is passed over as a manifest fault. A copy of format 4, its
/// manifest where those builds wrote it (in the copy's folder), restores, lists and is
/// collected.
#[test]
fn a_manifest_of_format_4_with_an_inline_object_is_a_manifest_fault() {
    let world = World::directory();
    let a = world.holder("replica-a");
    let (root, copies) = (world.root("a"), world.copies());
    padded_root(&root, 64);
    add_entry(&root, "1");
    copies.write_copy(&a, &root).unwrap();
    add_entry(&root, "2");
    let second = copies.write_copy(&a, &root).unwrap();
    assert!(new_delta(&world, &second, LEDGER).inline.is_some());
    let mut manifest = with_digests_before_format_6(&world, manifest_at(&world, 1, 1));
    manifest.format_version = 4;
    let first = CopyId { epoch: 1, seq: 1 };
    world
        .durable
        .delete(&manifest_key(&key(), first).unwrap())
        .unwrap();
    let legacy = format!("{}{LEGACY_MANIFEST}", copy_prefix(&key(), first).unwrap());
    world
        .durable
        .put_new(&legacy, &serde_json::to_vec(&manifest).unwrap())
        .unwrap();
    let mut manifest = manifest_at(&world, 1, 2);
    manifest.format_version = 4;
    forge_manifest(&world, 2, &manifest);
    let listed = copies.list(&key()).unwrap();
    assert!(
        listed[0].complete && (listed[0].id.epoch, listed[0].id.seq) == (1, 1),
        "{listed:?}"
    );
    let (report, root_b) = next_holder_restores_checked(&world);
    assert_eq!(report.restored, id(1, 1), "a format 4 copy restores");
    assert_eq!(
        report.skipped,
        [SkippedCopy {
            id: CopyId { epoch: 1, seq: 2 },
            reason: SkipReason::Manifest
        }]
    );
    assert_eq!(entries_of(&root_b), ["1"]);
    let c = world.next_holder("replica-c");
    let root_c = world.root("c");
    world.copies().restore(&c, &root_c, None).unwrap();
    add_entry(&root_c, "c");
    world.copies().write_copy(&c, &root_c).unwrap();
    let gc = world.copies().gc(&c, 1).unwrap();
    assert!(gc.deleted.contains(&first), "{gc:?}");
    assert_eq!(
        world.durable.get(&legacy).unwrap(),
        None,
        "the legacy manifest is gone"
    );
}
