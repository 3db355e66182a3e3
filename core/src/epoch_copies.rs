//! Epoch-scoped durable copies of a tenant root, and the restore that verifies them.
//!
//! The lease's epoch is a fencing token; this is where it is checked. A holder of epoch n
//! writes copies only under its own prefix, every object create-only, the manifest last:
//!
//! ```text
//! orgs/<org>/tenants/<tenant>/epochs/<epoch:020>/tenure.json
//! orgs/<org>/tenants/<tenant>/epochs/<epoch:020>/<seq:020>/files/<index:06>[.<piece:06>|.delta]
//! orgs/<org>/tenants/<tenant>/epochs/<epoch:020>/<seq:020>.json
//! ```
//!
//! Objects of a few KiB (a one-row change's delta) go inline in the manifest instead, so a
//! small copy is one create-only object, beside the copies' folders (builds before format 5
//! wrote the manifest into the copy's folder, as `<seq:020>/manifest.json`; both are read).
//!
//! A copy without its manifest does not exist, so a writer that dies mid-copy leaves
//! nothing a restore could pick. A stale holder can still write, but only into its own,
//! older prefix, and no later restore prefers an older epoch over a newer one: it costs
//! availability, never integrity.
//!
//! One trap remains (Neon's and Litestream's history has it): if the holder of epoch 2
//! restores epoch 1's copy and dies before its first copy, a frozen holder of epoch 1 can
//! wake and add a copy that the holder of epoch 3 would take as newest. So every tenure
//! starts with a create-only marker, `tenure.json`, naming the copy it restored from; a
//! restore follows the markers and skips every copy written into an older epoch after a
//! later tenure had begun (`superseded`). Copies are ordered by epoch and sequence number,
//! never by timestamps.
//!
//! SQLite files are read through SQLite's online backup API, which gives a
//! transaction-consistent image of a database that other connections keep writing; other
//! files are read as they are, so the host keeps them still while a copy is written (or
//! keeps its state in the ledger).
//!
//! A file that another handle of this process has open is never opened here. POSIX locks
//! belong to the process, not to the descriptor: if this library's SQLite (a copy of its
//! own, not the host's better-sqlite3 or Python `sqlite3`) opened the host's ledger, its
//! close would drop the host's locks, and, finding no other connection it knows of, it
//! would checkpoint and delete the WAL the host still writes to (SQLite's "how to corrupt"
//! §2.2.1). Such a database in WAL mode is read without SQLite, from the host's descriptor
//! and the WAL's frames (module `wal`): after the tenure's first copy, from the frames appended
//! since the last one, so a copy after a small change reads a few pages. Where the WAL cannot
//! tell (rollback journal mode, an empty WAL), the file goes to the host's [`HostSnapshot`],
//! which reads it through the host's own library; without one the copy is refused
//! (OPEN_IN_PROCESS), and so is a restore into a root whose files the host still has open.
//!
//! A copy stores what changed since the lineage's last copy (module `delta`); every new base of a
//! database passes `quick_check` before its manifest is published. A copy and a restore hold a
//! few pieces of each file in memory, whatever its size (module `body`). A restore checks every
//! piece's digest and each file's (and `integrity_check` when asked), then installs the copy,
//! atomically, in place of the tenant root.

#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::clock::{SystemWallClock, WallClock};
use crate::durable_store::{DurableStore, ObjectInfo, PutOutcome};
use crate::errors::{Error, Result};
use crate::paths::{assert_not_working_dir, assert_root, shown};
use crate::tenant_lease::TenantLease;

mod body;
mod delta;
mod layout;
mod restore;
mod snapshot;
mod wal;

use layout::{
    copy_prefix, epoch_prefix, manifest_key, parse_padded, tenant_prefix, AnyManifest, EpochEntry, FileV2,
    Layout, ManifestV2, ObjectRef, TenureMarker, LEGACY_MANIFEST, TENURE,
};
use restore::{relative_path, tree_size, write_durably, Landing, Restored, Scratch, Staged};
pub use snapshot::SNAPSHOT_LOCK_WAIT;
use snapshot::{assert_root_not_open, backup_sqlite, Snapshot};

/// The manifest format this build writes: a base, in pieces when it is large, and a chain of
/// deltas per file, small ones inline in the manifest, each file's digest made of the digests
/// of its 1 MiB groups of blocks (module `delta`). It restores this one, format 5 (a
/// file's digest made of every block digest), format 4 (no inline objects), format 3 (a base
/// of one object), format 2 (a base and at most one delta) and format 1 (every file one whole
/// object of its own copy, checked by SHA-256 and `integrity_check` at restore).
pub const FORMAT_VERSION: u32 = 6;
/// The format of the tenure marker, which formats 2 to 6 left as they were.
const MARKER_FORMAT: u32 = 1;
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

pub use crate::records::{CopyId, SkipReason, SkippedCopy};

/// What a restore did: the copy it installed (`None`: an empty start) and every copy it
/// passed over on the way, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RestoreReport {
    pub restored: Option<CopyId>,
    pub skipped: Vec<SkippedCopy>,
    pub files: usize,
    pub bytes: u64,
}

/// A copy taken as written: its manifest is durable and the gate held after it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WrittenCopy {
    /// Which copy: its place in the order restores follow.
    pub id: CopyId,
    pub files: usize,
    /// The size of the files the copy holds.
    pub bytes: u64,
    /// What this copy made (bases and deltas): the objects it stored beside its manifest, and
    /// the bytes of all it made, those its manifest carries inline included (format 5). The
    /// manifest itself is aside: one more object.
    pub pieces_uploaded: usize,
    pub bytes_uploaded: u64,
    /// What it references of earlier copies of its lineage instead of making it again: objects
    /// of the store, and bytes (those it carries inline from an earlier manifest included).
    pub pieces_reused: usize,
    pub bytes_reused: u64,
}

/// One copy as the store lists it, without reading it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CopyListing {
    /// Which copy: its place in the order restores follow.
    pub id: CopyId,
    /// The manifest is there: the copy exists (which does not say it verifies).
    pub complete: bool,
    pub objects: usize,
    pub bytes: u64,
}

/// What a garbage collection kept and deleted.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct GcReport {
    pub kept: Vec<CopyId>,
    pub deleted: Vec<CopyId>,
}

/// Writes a transaction-consistent, self-contained image of the file at `source`, which
/// another handle of this process has open, to `image` (a fresh path in a scratch folder),
/// through the library that holds it, page for page: the backup API or `sqlite3_serialize` of
/// the host's own SQLite. A copy stores the blocks that differ from its lineage's last copy,
/// and `VACUUM INTO` (accepted) lays every table out anew, so its images differ almost
/// everywhere and each copy stores most of the database again. Called for every such file in
/// a tenant root that its WAL does not tell (module `wal`), one at a time, while a copy is
/// taken; an error fails the copy.
pub type HostSnapshot = Arc<dyn Fn(&Path, &Path) -> Result<()> + Send + Sync>;

/// A host's check of restored state (gotry verifies its ledger's fold): given the folder the
/// copy was restored into, before it is installed, `Ok(false)` passes the copy over.
pub type FoldCheck<'a> = &'a dyn Fn(&Path) -> Result<bool>;

/// What this process wrote into one tenure's prefix: everything else found there is a
/// conflict.
#[derive(Debug, Default)]
struct Tenure {
    marker: bool,
    seqs: BTreeSet<u64>,
    /// Copies written since the tenure's last collection (see [`EpochCopies::with_retention`]).
    since_gc: usize,
    /// The collection the retention started after a copy, on a thread of its own (off the
    /// path a strict call waits on), and whether it succeeded. The tenure's next copy,
    /// collection or forgetting waits for it first, so one runs at a time, and the copies a
    /// store holds stay within the bound they had when each copy collected before answering.
    collecting: Option<std::thread::JoinHandle<bool>>,
    /// The files of the last copy this tenure wrote or restored, which the next copy builds on
    /// (`None`: the next copy stores every file whole).
    lineage: Option<Arc<Lineage>>,
}

/// Files of a copy by path, each with the block digests of its state and of its base, against
/// which the next copy finds the changed blocks without reading anything back.
type Lineage = HashMap<String, Known>;

#[derive(Debug, Clone)]
struct Known {
    file: FileV2,
    /// The file as this copy holds it, block by block.
    blocks: Arc<delta::Blocks>,
    base_blocks: Arc<delta::Blocks>,
    /// The blocks each delta of `file.deltas` writes, in order.
    chain: Vec<Arc<Vec<usize>>>,
    /// Where the file's WAL stood when it was read, for a database the host holds: the next
    /// copy reads the frames since.
    wal: Option<wal::WalMark>,
    /// What the file system said of a plain file read whole: while it still says so, the
    /// next copy takes the file as unchanged without reading it.
    seen: Option<snapshot::Seen>,
}

/// What a manifest a collection read says: whether it names the tenant, and the objects it
/// references with their sizes.
struct ManifestRefs {
    names_key: bool,
    objects: Vec<(String, u64)>,
}

/// Manifests a collection has read, per copy (`None`: no manifest this build reads; see
/// [`EpochCopies::references`]).
type References = HashMap<CopyId, Option<ManifestRefs>>;

/// What a copy stores of a file.
enum Step {
    /// Nothing: the lineage's last copy holds it as it is.
    Same,
    /// The last delta of this chain (the others are the lineage's).
    Delta(Vec<Arc<Vec<usize>>>),
    /// A new base.
    Base,
}

/// What a copy stores of a file whose state in the lineage's last copy is `known`, now that
/// it is `len` bytes whose blocks hash to `blocks`: the delta at the end of its chain (see
/// [`delta`] for how the chain stays short) while the chain's blocks stay under half the file
/// and the new delta under [`delta::MOST`], else one delta against the base while that does,
/// else a new base.
fn next_step(known: Option<&Known>, blocks: &delta::Blocks, len: u64, digest: &str, sqlite: bool) -> Step {
    let Some(known) = known else {
        return Step::Base;
    };
    if known.file.digest == digest && known.file.sqlite == sqlite {
        return Step::Same;
    }
    let half = usize::try_from(len / 2).unwrap_or(usize::MAX);
    let fits = |chain: &[Arc<Vec<usize>>]| {
        chain
            .iter()
            .map(|c| c.len())
            .sum::<usize>()
            .saturating_mul(delta::BLOCK)
            <= half
            && chain
                .last()
                .is_some_and(|last| last.len().saturating_mul(delta::BLOCK) <= delta::MOST)
    };
    let mut chain = delta::chain_after(&known.chain, known.blocks.changed_in(blocks), blocks.len());
    if !fits(&chain) {
        chain = vec![Arc::new(known.base_blocks.changed_in(blocks))];
    }
    if fits(&chain) {
        Step::Delta(chain)
    } else {
        Step::Base
    }
}

/// The largest object a manifest carries inline: a one-row change of a database is a delta of
/// a few 4 KiB blocks.
const INLINE_MOST: usize = 16 << 10;
/// The most inline bytes a manifest carries, those it carries forward from its lineage
/// included (base64 makes them a third larger): a manifest stays one small object to write
/// and to read, however many small files the root holds.
const INLINE_BUDGET: usize = 32 << 10;

/// An object of a copy being written: stored now when it is too large to go inline, else held
/// for the manifest ([`EpochCopies::settle_inline`] decides which of those fit).
fn stored_or_inline(
    object: String,
    bytes: std::borrow::Cow<'_, [u8]>,
    digest: String,
    store: impl Fn(&str, &[u8]) -> Result<()>,
) -> Result<ObjectRef> {
    let size = bytes.len() as u64;
    let inline = if bytes.len() <= INLINE_MOST {
        Some(bytes.into_owned())
    } else {
        store(&object, &bytes)?;
        None
    };
    Ok(ObjectRef {
        object,
        size,
        digest,
        inline,
    })
}

/// The SHA-256 digests of a file's or a piece's blocks, in order.
type BlockDigests = Vec<[u8; 32]>;

/// What the lineage knows of a file of `size` bytes, block digests `blocks` and digest
/// `digest`, just stored as a base of `pieces`.
fn based(
    file: &snapshot::SnapshotFile,
    size: u64,
    (blocks, digest): (Arc<delta::Blocks>, String),
    pieces: Vec<ObjectRef>,
    wal: Option<wal::WalMark>,
) -> Known {
    let mut pieces = pieces.into_iter();
    Known {
        file: FileV2 {
            path: file.path.clone(),
            size,
            digest,
            sqlite: file.sqlite,
            base: pieces.next().expect("a base has a piece"),
            base_pieces: pieces.collect(),
            delta: None,
            deltas: Vec::new(),
        },
        blocks: blocks.clone(),
        base_blocks: blocks,
        chain: Vec::new(),
        wal,
        seen: file.seen,
    }
}

/// The tenure id as markers spell it.
fn tenure_id(lease: &TenantLease) -> String {
    format!("{:016x}", lease.tenure_id())
}

/// A lease key, its epoch and the grant's tenure id: one tenure.
type TenureKey = (String, i64, u64);

/// Copies of tenant roots in one durable store. `Send + Sync`; copies of one tenant are
/// written one at a time, copies of different tenants in parallel.
pub struct EpochCopies {
    store: Arc<dyn DurableStore>,
    tenures: Mutex<HashMap<TenureKey, Arc<Mutex<Tenure>>>>,
    snapshot: Option<HostSnapshot>,
    full_check: bool,
    keep: Option<NonZeroUsize>,
    wall: Arc<dyn WallClock>,
}

impl Drop for EpochCopies {
    /// A collection started behind a copy ends before the copies do: a host that drops them,
    /// then its store, finds nothing of theirs still at work on it.
    fn drop(&mut self) {
        for tenure in lock(&self.tenures).values() {
            if let Some(collecting) = lock(tenure).collecting.take() {
                let _ = collecting.join();
            }
        }
    }
}

impl std::fmt::Debug for EpochCopies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EpochCopies")
            .field("store", &self.store)
            .field("host_snapshot", &self.snapshot.is_some())
            .finish_non_exhaustive()
    }
}

impl EpochCopies {
    pub fn new(store: Arc<dyn DurableStore>) -> EpochCopies {
        EpochCopies {
            store,
            tenures: Mutex::default(),
            snapshot: None,
            full_check: false,
            keep: None,
            wall: Arc::new(SystemWallClock),
        }
    }

    /// The clock that stamps each manifest's `written_at_ms` (the system's by default): the
    /// core's one notion of wall time, so a host or a test that sets the clock sees its time
    /// on the copies too.
    pub fn with_wall_clock(mut self, wall: Arc<dyn WallClock>) -> EpochCopies {
        self.wall = wall;
        self
    }

    /// Restores also run `PRAGMA integrity_check` on every database (as Litestream's
    /// `-integrity-check`). Without it a restore checks digests only: every image was checked
    /// with `quick_check` before the manifest that names it was published.
    pub fn with_integrity_check(mut self, full: bool) -> EpochCopies {
        self.full_check = full;
        self
    }

    /// Reads the files that the host has open through `snapshot` (see [`HostSnapshot`]).
    pub fn with_host_snapshot(mut self, snapshot: Option<HostSnapshot>) -> EpochCopies {
        self.snapshot = snapshot;
        self
    }

    /// Each tenure collects its tenant's copies itself: once it has written `keep` copies
    /// since it last did, it starts [`EpochCopies::gc`] with `keep` behind the copy that made
    /// them `keep`, on a thread of its own; the tenure's next copies do not wait for it, the
    /// one that starts the next collection does. So a tenant holds at most three times `keep`
    /// copies of its current tenure (and the objects they build on), however many a strict
    /// router writes, one per acknowledged write: `keep` kept, `keep` written until the next
    /// collection, and up to `keep` more while that one runs. The cost of a collection (a read
    /// of the lease store, a listing, a manifest read per copy, the deletes and their flushes)
    /// is paid by no call's answer, only by the copy that starts the next collection when the
    /// last has not ended yet. A collection that fails leaves the copy written: the next one
    /// tries again. `None`, the default here: copies are kept until the host calls `gc`.
    pub fn with_retention(mut self, keep: Option<NonZeroUsize>) -> EpochCopies {
        self.keep = keep;
        self
    }

    pub fn store(&self) -> &Arc<dyn DurableStore> {
        &self.store
    }

    /// This process's record of `lease`'s tenure. Keyed by epoch and grant too: one
    /// `EpochCopies` may serve a stale holder and its successor side by side (a test does, a
    /// confused host might), or two grants of one epoch by a store that lost commits, and
    /// none may take what another wrote for its own. A few bytes a tenure, for the life of
    /// the process.
    fn tenure(&self, lease: &TenantLease) -> Arc<Mutex<Tenure>> {
        lock(&self.tenures)
            .entry((lease.key().to_owned(), lease.epoch(), lease.tenure_id()))
            .or_default()
            .clone()
    }

    /// Writes a complete copy of `root` under the lease's epoch.
    ///
    /// FENCED when the gate is closed before the first object or after the manifest (the
    /// copy is then not taken as written); COPY_CONFLICT when anything in this epoch's prefix
    /// was not written by this holder, or a name it is about to create exists;
    /// DURABLE_STORE_UNAVAILABLE when the store fails (a later copy starts afresh).
    pub fn write_copy(&self, lease: &TenantLease, root: &Path) -> Result<WrittenCopy> {
        self.write_copy_with(lease, root, &|| {})
    }

    /// [`EpochCopies::write_copy`], telling `snapshot_taken` once nothing of `root` is open
    /// here any more (before the upload): the router holds the tenant's calls back until then.
    /// Counted in the metrics here, whoever asked for the copy.
    pub(crate) fn write_copy_with(
        &self,
        lease: &TenantLease,
        root: &Path,
        snapshot_taken: &dyn Fn(),
    ) -> Result<WrittenCopy> {
        let started = std::time::Instant::now();
        let answer = self.write_copy_uncounted(lease, root, snapshot_taken);
        let bytes = answer.as_ref().map_or(0, |written| written.bytes_uploaded);
        crate::metrics::copy(&answer, bytes, started.elapsed());
        answer
    }

    fn write_copy_uncounted(
        &self,
        lease: &TenantLease,
        root: &Path,
        snapshot_taken: &dyn Fn(),
    ) -> Result<WrittenCopy> {
        assert_root("a tenant root", root)?;
        lease.assert_held()?;
        if lease.is_marked_forgotten() {
            return Err(Error::copy_conflict(format!(
                "{} is marked forgotten at epoch {}: a copy written now would lie below the \
                 forgotten floor, where no restore looks; the next holder starts empty",
                lease.key(),
                lease.epoch()
            )));
        }
        // Read first: a clock that cannot stamp the manifest fails the copy before any upload.
        let written_at_ms = u64::try_from(self.wall.now_ms()?).map_err(|_| {
            Error::invalid_argument("the wall clock reads before 1970: no copy is stamped with it")
        })?;
        let tenure = self.tenure(lease);
        let mut tenure = lock(&tenure);
        self.collection_ended(&mut tenure);
        let prefix = epoch_prefix(lease.key(), lease.epoch())?;
        // The listing (a round trip to a remote store) is waited for while the snapshot is
        // taken, which also keeps it out of the time the router holds the tenant's calls back;
        // a folder's listing costs less than a thread to overlap it, and follows. Past
        // the tenure's first copy, only what sorts after its last one is listed: a stranger's
        // copy ahead of it (which a restore would prefer) is still seen, and a tenure of many
        // copies does not list them all at each one.
        let known_up_to = tenure.seqs.last().map(|last| format!("{prefix}{last:020}0"));
        let list = || match &known_up_to {
            Some(after) => self.store.list_after(&prefix, after),
            None => self.store.list(&prefix),
        };
        let take = || Snapshot::take(root, self.snapshot.as_ref(), tenure.lineage.as_deref());
        let (found, snapshot) = if self.store.answers_at_once() {
            let snapshot = take();
            (list(), snapshot)
        } else {
            std::thread::scope(|scope| {
                let found = scope.spawn(list);
                let snapshot = take();
                (found.join().expect("listing does not panic"), snapshot)
            })
        };
        let seq = self.claim_next_seq(lease, &mut tenure, &prefix, &found?)?;
        let snapshot = snapshot?;
        let copy_prefix = format!("{prefix}{seq:020}/");
        let epochs = tenant_prefix(lease.key())?;
        snapshot_taken();
        let lineage = tenure.lineage.clone().unwrap_or_default();
        let mut placed = in_parallel(&snapshot.files, |index, file| {
            self.place(
                file.content(),
                file,
                lineage.get(&file.path),
                |name| format!("{}{name}", &copy_prefix[epochs.len()..]),
                |object, bytes| self.create(&format!("{epochs}{object}"), bytes),
                index,
            )
        })
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
        let id = CopyId {
            epoch: lease.epoch(),
            seq,
        };
        self.settle_inline(&mut placed, id, &copy_prefix[epochs.len()..], &epochs)?;
        // An object's name says which copy made it: what this one made is uploaded (once,
        // however often the file references it), the rest reused, as `reused` reads it back.
        let objects = || placed.iter().flat_map(|known| known.file.objects());
        let (pieces_reused, bytes_reused) = tally(objects().filter(|o| o.copy() != Some(id)));
        let mut counted = BTreeSet::new();
        let (pieces_uploaded, bytes_uploaded) =
            tally(objects().filter(|o| o.copy() == Some(id) && counted.insert(&o.object)));
        let manifest = ManifestV2 {
            format_version: FORMAT_VERSION,
            key: lease.key().to_owned(),
            epoch: lease.epoch(),
            seq,
            replica_id: lease.replica_id().to_owned(),
            written_at_ms,
            files: placed.iter().map(|known| known.file.clone()).collect(),
            folders: snapshot.folders.clone(),
        };
        let bytes = manifest.files.iter().map(|f| f.size).sum();
        let json = serde_json::to_vec(&manifest).expect("a manifest serializes");
        self.create(&manifest_key(lease.key(), id)?, &json)?;
        tenure.lineage = Some(Arc::new(
            placed
                .into_iter()
                .map(|known| (known.file.path.clone(), known))
                .collect(),
        ));
        lease.assert_held()?;
        // The next copy's manifest is made ready now, off the path a strict write waits on.
        self.reserve(lease, seq + 1)?;
        tenure.since_gc += 1;
        if let Some(keep) = self.keep.filter(|keep| tenure.since_gc >= keep.get()) {
            // One collection at a time, the last one done before the next lists: the copies a
            // store holds then stay within three times `keep` (see `with_retention`).
            self.settle_collection(&mut tenure);
            tenure.since_gc = 0;
            self.collect_behind(lease, keep.get(), &mut tenure);
        }
        Ok(WrittenCopy {
            id: CopyId {
                epoch: lease.epoch(),
                seq,
            },
            files: manifest.files.len(),
            bytes,
            pieces_uploaded,
            bytes_uploaded,
            pieces_reused,
            bytes_reused,
        })
    }

    /// Stores one file of a copy as [`next_step`] says: nothing, a delta, or a new base, which
    /// a database passes only with `quick_check` (an image that fails it is never published).
    fn place(
        &self,
        content: snapshot::Content<'_>,
        file: &snapshot::SnapshotFile,
        known: Option<&Known>,
        name: impl Fn(&str) -> String + Sync,
        store: impl Fn(&str, &[u8]) -> Result<()> + Sync,
        index: usize,
    ) -> Result<Known> {
        use snapshot::Content;
        let piece_name = |k: Option<usize>| match k {
            Some(k) => name(&format!("files/{index:06}.{k:06}")),
            None => name(&format!("files/{index:06}")),
        };
        // A file new to the lineage is a base whatever it holds: each piece is read once,
        // hashed and stored, instead of a pass to hash the file and another to store it.
        if let (Content::Whole(body, wal), None) = (&content, known) {
            let (hashed, pieces) = self.store_base(body, file, None, HashMap::new(), &piece_name, &store)?;
            let blocks = Arc::new(delta::Blocks::new(
                hashed.expect("a base not yet hashed is hashed as it is stored"),
            ));
            let digest = blocks.file_digest(body.len());
            return Ok(based(file, body.len(), (blocks, digest), pieces, wal.cloned()));
        }
        let (blocks, size, digest, step, wal) = match &content {
            Content::Whole(body, wal) => {
                let blocks = Arc::new(delta::Blocks::new(body.block_digests()?));
                let size = body.len();
                let digest = blocks.file_digest(size);
                let step = next_step(known, &blocks, size, &digest, file.sqlite);
                (blocks, size, digest, step, *wal)
            }
            Content::Changed(changed) => {
                let step = match (&changed.chain, known) {
                    (Some(chain), Some(_)) => Step::Delta(chain.clone()),
                    (None, Some(_)) => Step::Same,
                    (_, None) => Step::Base,
                };
                let (blocks, digest) = (changed.blocks.clone(), changed.digest.clone());
                (blocks, changed.len, digest, step, changed.mark.as_ref())
            }
        };
        let wal = wal.cloned();
        match (step, known) {
            (Step::Same, Some(known)) => {
                return Ok(Known {
                    wal,
                    seen: file.seen,
                    ..known.clone()
                });
            }
            (Step::Delta(chain), Some(known)) => {
                let kept = &known.file.deltas[..chain.len() - 1];
                let stored = chain.last().expect("a chain after a change");
                let bytes = match &content {
                    Content::Whole(body, _) => {
                        delta::encode_with(size, stored, |i, out| body.append_block(i, out))?
                    }
                    Content::Changed(changed) => delta::encode_with(size, stored, |i, out| {
                        out.extend_from_slice(&changed.content[&i]);
                        Ok(())
                    })?,
                };
                let digest_of_delta = delta::digest(&bytes);
                let added = stored_or_inline(
                    name(&format!("files/{index:06}.delta")),
                    bytes.into(),
                    digest_of_delta,
                    &store,
                )?;
                return Ok(Known {
                    file: FileV2 {
                        path: file.path.clone(),
                        size,
                        digest,
                        sqlite: file.sqlite,
                        base: known.file.base.clone(),
                        base_pieces: known.file.base_pieces.clone(),
                        delta: None,
                        deltas: kept.iter().cloned().chain([added]).collect(),
                    },
                    blocks,
                    base_blocks: known.base_blocks.clone(),
                    chain,
                    wal,
                    seen: file.seen,
                });
            }
            _ => {}
        }
        let Content::Whole(body, _) = &content else {
            unreachable!("a file whose WAL told what changed is read whole when it needs a new base")
        };
        // A new base of a large file after scattered changes stores only the pieces they
        // touched: a piece the old base has is referenced.
        let have = known
            .map(|k| {
                k.file
                    .base_objects()
                    .map(|o| (o.digest.clone(), o.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let (_, pieces) = self.store_base(body, file, Some(&blocks), have, &piece_name, &store)?;
        Ok(based(file, size, (blocks, digest), pieces, wal))
    }

    /// Stores `body` as a base, piece by piece (see [`body::PIECE`]), and returns its pieces
    /// and, when `blocks` did not give them, the block digests it hashed. A piece is stored once: one equal to a piece in `have` (the old
    /// base's) or to an earlier one of this base (a sparse file's runs of zeros) is referenced
    /// instead. Each piece is read once, to be hashed (unless `blocks` already has its digests)
    /// and stored, a few at a time. A database must pass `quick_check`, which runs meanwhile:
    /// the manifest, which alone publishes the pieces, is written only if it passes (a piece of
    /// a base that fails stays an unreferenced object of this copy's own folder, which gc
    /// deletes with the incomplete copy).
    fn store_base(
        &self,
        body: &body::Body<'_>,
        file: &snapshot::SnapshotFile,
        blocks: Option<&delta::Blocks>,
        mut have: HashMap<String, ObjectRef>,
        piece_name: &(impl Fn(Option<usize>) -> String + Sync),
        store: &(impl Fn(&str, &[u8]) -> Result<()> + Sync),
    ) -> Result<(Option<BlockDigests>, Vec<ObjectRef>)> {
        let size = body.len();
        let per_piece = body::PIECE / delta::BLOCK;
        let starts: Vec<u64> = (0..size.max(1)).step_by(body::PIECE).collect();
        let several = starts.len() > 1;
        // Which piece stores each digest: the first to claim it; the others refer to it.
        let claimed: Mutex<HashSet<String>> = Mutex::new(have.keys().cloned().collect());
        let (checked, placed) = std::thread::scope(|scope| {
            let checked = file.sqlite.then(|| scope.spawn(|| body.passes("quick_check")));
            let placed = in_parallel(
                &starts,
                |k, &start| -> Result<(Option<BlockDigests>, String, Option<ObjectRef>)> {
                    let end = (start + body::PIECE as u64).min(size);
                    let (bytes, hashed, digest) = match blocks {
                        Some(blocks) => {
                            let first = k * per_piece;
                            let piece_blocks = blocks.range(first, first + per_piece);
                            (None, None, delta::digest_of(piece_blocks, end - start))
                        }
                        None => {
                            let bytes = body.range(start, end)?;
                            let piece_blocks = delta::block_digests(&bytes);
                            let digest = delta::digest_of(&piece_blocks, end - start);
                            (Some(bytes), Some(piece_blocks), digest)
                        }
                    };
                    if !lock(&claimed).insert(digest.clone()) {
                        return Ok((hashed, digest, None));
                    }
                    let object = piece_name(several.then_some(k));
                    let bytes = match bytes {
                        Some(bytes) => bytes,
                        None => body.range(start, end)?,
                    };
                    let stored = stored_or_inline(object, bytes.as_cow(), digest.clone(), store)?;
                    Ok((hashed, digest, Some(stored)))
                },
            );
            (checked.is_none_or(|c| c.join().unwrap_or(false)), placed)
        });
        if !checked {
            return Err(Error::Storage {
                code: "SQLITE_CORRUPT".to_owned(),
                message: format!(
                    "{} fails PRAGMA quick_check, so no copy of it is published",
                    file.path
                ),
            });
        }
        let placed = placed.into_iter().collect::<Result<Vec<_>>>()?;
        for (_, digest, stored) in &placed {
            if let Some(stored) = stored {
                have.insert(digest.clone(), stored.clone());
            }
        }
        let mut hashed_all = blocks
            .is_none()
            .then(|| Vec::with_capacity(usize::try_from(size.div_ceil(delta::BLOCK as u64)).unwrap_or(0)));
        let mut pieces = Vec::with_capacity(placed.len());
        for (hashed, digest, _) in placed {
            if let (Some(all), Some(hashed)) = (hashed_all.as_mut(), hashed) {
                all.extend(hashed);
            }
            pieces.push(have[&digest].clone());
        }
        Ok((hashed_all, pieces))
    }

    /// Keeps inline as much as [`INLINE_BUDGET`] allows: first what this copy made, then what
    /// it carries from its lineage's manifests, each in file order, and stores the rest. What
    /// is made first: the room goes to what changes (a ledger's deltas), and a small file that
    /// stays the same is stored once, as an object of this copy (`id`, whose folder under
    /// `epochs` is `own`), instead of holding the room forever.
    fn settle_inline(&self, placed: &mut [Known], id: CopyId, own: &str, epochs: &str) -> Result<()> {
        let mut room = INLINE_BUDGET;
        let mut spilled = Vec::new();
        for made_here in [true, false] {
            for (f, known) in placed.iter().enumerate() {
                for (k, object) in known.file.objects().enumerate() {
                    let Some(len) = object.inline.as_ref().map(Vec::len) else {
                        continue;
                    };
                    if (object.copy() == Some(id)) != made_here {
                        continue;
                    }
                    if len <= room {
                        room -= len;
                    } else {
                        spilled.push((f, k));
                    }
                }
            }
        }
        let mut puts = Vec::with_capacity(spilled.len());
        for (f, k) in spilled {
            let object = placed[f]
                .file
                .objects_mut()
                .nth(k)
                .expect("an object found above");
            if object.copy() != Some(id) {
                object.object = format!("{own}files/{f:06}.{k:06}.carried");
            }
            puts.push((object.object.clone(), object.inline.take().expect("inline above")));
        }
        for stored in in_parallel(&puts, |_, (name, bytes)| {
            self.create(&format!("{epochs}{name}"), bytes)
        }) {
            stored?;
        }
        Ok(())
    }

    /// Checks that the tenure's prefix holds only this holder's objects and reserves the
    /// next sequence number (also past copies that failed half-way, whose names are used).
    fn claim_next_seq(
        &self,
        lease: &TenantLease,
        tenure: &mut Tenure,
        prefix: &str,
        found: &[ObjectInfo],
    ) -> Result<u64> {
        let next = tenure.seqs.last().map_or(1, |last| last + 1);
        let mut present = BTreeSet::new();
        for object in found {
            match EpochEntry::parse(&object.key[prefix.len()..]) {
                Some(EpochEntry::Tenure) => {
                    if !tenure.marker && !self.marker_is(lease, &object.key)? {
                        return Err(conflict(lease, &object.key));
                    }
                    tenure.marker = true;
                }
                Some(EpochEntry::Manifest(seq) | EpochEntry::Object(seq)) if tenure.seqs.contains(&seq) => {
                    present.insert(seq);
                }
                // The name reserved for this copy (by whichever `EpochCopies` of the holder
                // wrote the last copy or the restore): a stranger's empty object there is met
                // at the put, which only the store that made the reservation can write into.
                Some(EpochEntry::Manifest(seq)) if seq == next && layout::is_reserved(object.size) => {}
                _ => return Err(conflict(lease, &object.key)),
            }
        }
        // Deleted copies need no remembering: a name that comes back is a stranger's.
        tenure.seqs = present;
        tenure.seqs.insert(next);
        Ok(next)
    }

    /// Asks the store to reserve the manifest name of the holder's copy `seq`: the next one.
    fn reserve(&self, lease: &TenantLease, seq: u64) -> Result<()> {
        let id = CopyId {
            epoch: lease.epoch(),
            seq,
        };
        self.store.reserve(&manifest_key(lease.key(), id)?);
        Ok(())
    }

    /// Whether the tenure marker at `key` is this holder's (a restore by another
    /// `EpochCopies` of the same process wrote it).
    fn marker_is(&self, lease: &TenantLease, key: &str) -> Result<bool> {
        let marker = self
            .store
            .get(key)?
            .and_then(|b| serde_json::from_slice::<TenureMarker>(&b).ok());
        Ok(marker.is_some_and(|m| {
            m.key == lease.key()
                && m.epoch == lease.epoch()
                && m.replica_id == lease.replica_id()
                && m.tenure_id == Some(tenure_id(lease))
        }))
    }

    fn create(&self, key: &str, bytes: &[u8]) -> Result<()> {
        match self.store.put_new(key, bytes)? {
            PutOutcome::Created => Ok(()),
            PutOutcome::AlreadyExists => Err(Error::copy_conflict(format!(
                "{key} already exists in {}: another writer is in this epoch's prefix",
                self.store.location()
            ))),
        }
    }

    /// Restores the newest copy that verifies into `root`, at the start of `lease`'s tenure,
    /// then records the tenure (create-only) so that later restores can tell a stale
    /// holder's copies from the lineage.
    ///
    /// Considers epochs above the lease's forgotten floor and below its own. RESTORE_INVALID
    /// (with every skipped copy) when copies exist but none verifies; an empty start, with
    /// `root` emptied, when there is none.
    pub fn restore(
        &self,
        lease: &TenantLease,
        root: &Path,
        verify: Option<FoldCheck<'_>>,
    ) -> Result<RestoreReport> {
        let answer = self.restore_uncounted(lease, root, verify);
        crate::metrics::restore(&answer);
        answer
    }

    fn restore_uncounted(
        &self,
        lease: &TenantLease,
        root: &Path,
        verify: Option<FoldCheck<'_>>,
    ) -> Result<RestoreReport> {
        assert_restorable(root)?;
        lease.assert_held()?;
        assert_root_not_open(root)?;
        let tenure = self.tenure(lease);
        let mut tenure = lock(&tenure);
        let layout = self.layout(lease.key())?;
        let plan = self.plan(
            &layout,
            lease.key(),
            lease.forgotten_at_epoch(),
            Some(lease.epoch()),
        )?;
        let (staged, lineage) = self.stage_newest(lease.key(), &plan, root, verify)?;
        lease.assert_held()?;
        let marker = TenureMarker {
            format_version: MARKER_FORMAT,
            key: lease.key().to_owned(),
            epoch: lease.epoch(),
            replica_id: lease.replica_id().to_owned(),
            restored_from: staged.report.restored,
            tenure_id: Some(tenure_id(lease)),
        };
        let marker_key = format!("{}{TENURE}", epoch_prefix(lease.key(), lease.epoch())?);
        let json = serde_json::to_vec_pretty(&marker).expect("a marker serializes");
        if self.store.put_new(&marker_key, &json)? == PutOutcome::AlreadyExists {
            // A retried restore of this same grant that chose the same copy is no conflict; a
            // second grant of the epoch, even to this replica, is.
            let existing = self.store.get(&marker_key)?;
            if existing.and_then(|b| serde_json::from_slice::<TenureMarker>(&b).ok()) != Some(marker) {
                return Err(conflict(lease, &marker_key));
            }
        }
        tenure.marker = true;
        if staged.report.restored.is_some() {
            // Only after a restore: a first copy torn by a power cut is then passed over for
            // the copy restored, where a tenure that began empty would have nothing else.
            self.reserve(lease, 1)?;
        }
        let report = staged.install(root)?;
        // The tenure's copies build on what it restored (and reference its objects).
        tenure.lineage = lineage.map(Arc::new);
        Ok(report)
    }

    /// Restores, for an operator, the newest copy of `key` that verifies into `root`, from
    /// epochs above `forgotten_at_epoch` (and below `below_epoch` when given). Holds no lease
    /// and records no tenure: what it restores is a look at the data, not a start of service.
    pub fn restore_latest(
        &self,
        key: &str,
        forgotten_at_epoch: i64,
        below_epoch: Option<i64>,
        root: &Path,
        verify: Option<FoldCheck<'_>>,
    ) -> Result<RestoreReport> {
        assert_restorable(root)?;
        assert_root_not_open(root)?;
        let layout = self.layout(key)?;
        let plan = self.plan(&layout, key, forgotten_at_epoch, below_epoch)?;
        self.stage_newest(key, &plan, root, verify)?.0.install(root)
    }

    /// Verifies one copy completely (manifest, tenant, checksums, integrity, `verify`),
    /// without installing it: `None` when it would be restored as it is (lineage aside).
    pub fn verify(
        &self,
        key: &str,
        copy: CopyId,
        verify: Option<FoldCheck<'_>>,
    ) -> Result<Option<SkipReason>> {
        let scratch = Scratch::beside(&std::env::temp_dir().join("gotry-verify"))?;
        Ok(self.fetch_verified(key, copy, &scratch.path, verify)?.err())
    }

    /// Every copy of `key` in the store, oldest first.
    pub fn list(&self, key: &str) -> Result<Vec<CopyListing>> {
        let layout = self.layout(key)?;
        Ok(layout
            .copies
            .iter()
            .map(|(id, copy)| CopyListing {
                id: *id,
                complete: copy.manifest.is_some(),
                objects: copy.objects.len(),
                bytes: copy.objects.iter().map(|o| o.size).sum(),
            })
            .collect())
    }

    /// What copy `copy` of `key` references of earlier copies of its lineage instead of storing
    /// it again: objects and bytes; `None` when its manifest is missing or unreadable. One
    /// read of the manifest (the listing tells what the copy stored itself).
    pub fn reused(&self, key: &str, copy: CopyId) -> Result<Option<(usize, u64)>> {
        let Some(Some(manifest)) = self.read_manifest(key, copy)? else {
            return Ok(None);
        };
        Ok(Some(match manifest {
            AnyManifest::V1(_) => (0, 0),
            AnyManifest::V2(m) => tally(
                m.files
                    .iter()
                    .flat_map(FileV2::objects)
                    .filter(|o| o.copy() != Some(copy)),
            ),
        }))
    }

    /// Deletes every copy (and tenure marker) of epochs up to the forgotten floor, which it
    /// reads from the lease store: LEASE_LOST unless the store still names this holder.
    pub fn forget_copies(&self, lease: &TenantLease) -> Result<Vec<CopyId>> {
        let floor = current_floor(lease)?;
        let tenure = self.tenure(lease);
        let mut tenure = lock(&tenure);
        self.settle_collection(&mut tenure);
        let layout = self.layout(lease.key())?;
        let deleted: Vec<CopyId> = layout
            .copies
            .keys()
            .filter(|id| id.epoch <= floor)
            .copied()
            .collect();
        self.delete_copies(lease.key(), &layout, &deleted, &mut HashMap::new())?;
        self.delete_reserved(&layout, |epoch| epoch <= floor)?;
        for (_, marker) in layout.markers.range(..=floor) {
            self.store.delete(marker)?;
        }
        Ok(deleted)
    }

    /// Keeps the newest `keep` copies that look valid (manifest readable, this tenant, every
    /// file present at its size, not superseded) and deletes every older one; never deletes
    /// the newest valid copy, and deletes nothing when none looks valid. Copies of epochs up
    /// to the forgotten floor go too. Checks the lease store first, as `forget_copies` does.
    pub fn gc(&self, lease: &TenantLease, keep: usize) -> Result<GcReport> {
        if keep == 0 {
            return Err(Error::invalid_argument(
                "gc keeps at least one copy: the newest valid one",
            ));
        }
        let tenure = self.tenure(lease);
        let mut tenure = lock(&tenure);
        self.settle_collection(&mut tenure);
        lease.assert_held()?;
        self.gc_counted(&Holder::of(lease), keep)
    }

    /// Starts the retention's collection of the tenure behind the copy that just answered.
    /// The tenure's next copies do not wait for it (only the next collection does): a copy
    /// written meanwhile is as safe from it as one of another process, since a collection keeps
    /// the newest valid copy, which is what a copy in flight builds on, leaves alone every copy
    /// newer than those it keeps (one without its manifest yet among them), and only deletes
    /// what no copy it keeps references. A strict router's call that came after a collection
    /// waited for it when the next copy did (its 90th percentile was twice its median).
    fn collect_behind(&self, lease: &TenantLease, keep: usize, tenure: &mut Tenure) {
        let holder = Holder::of(lease);
        let collector = EpochCopies::new(self.store.clone());
        let spawned = std::thread::Builder::new()
            .name("gotry-gc".to_owned())
            .spawn(move || collector.gc_counted(&holder, keep).is_ok());
        match spawned {
            Ok(collecting) => tenure.collecting = Some(collecting),
            // No thread to be had: the collection runs here, as it did before it had one.
            Err(_) => {
                if self.gc_counted(&Holder::of(lease), keep).is_err() {
                    tenure.since_gc = keep - 1;
                }
            }
        }
    }

    /// Waits for the collection behind the tenure's copies: a tenure that ends (a router's
    /// handoff, before its release) leaves nothing of this holder still deleting.
    pub(crate) fn end_collection(&self, lease: &TenantLease) {
        let tenure = self.tenure(lease);
        let mut tenure = lock(&tenure);
        self.settle_collection(&mut tenure);
    }

    /// Takes note of the collection behind the tenure's copies if it has ended, without
    /// waiting: one that failed is tried again after this copy, not `keep` copies later.
    fn collection_ended(&self, tenure: &mut Tenure) {
        if tenure.collecting.as_ref().is_some_and(|c| c.is_finished()) {
            self.settle_collection(tenure);
        }
    }

    /// Waits for the collection started behind the tenure's copies; one that failed is
    /// tried again after the next copy.
    fn settle_collection(&self, tenure: &mut Tenure) {
        if let (Some(collecting), Some(keep)) = (tenure.collecting.take(), self.keep) {
            if !collecting.join().unwrap_or(false) {
                tenure.since_gc = tenure.since_gc.max(keep.get() - 1);
            }
        }
    }

    /// A collection, counted in the metrics whoever asked for it.
    fn gc_counted(&self, holder: &Holder, keep: usize) -> Result<GcReport> {
        let answer = self.gc_uncounted(holder, keep);
        crate::metrics::copy_gc(&answer);
        answer
    }

    fn gc_uncounted(&self, lease: &Holder, keep: usize) -> Result<GcReport> {
        let floor = lease.floor()?;
        let layout = self.layout(lease.key())?;
        let plan = self.plan(&layout, lease.key(), floor, None)?;
        self.store.remove_leftovers()?;
        let sizes: HashMap<&str, u64> = layout
            .copies
            .values()
            .flat_map(|c| &c.objects)
            .map(|o| (o.key.as_str(), o.size))
            .collect();
        let mut report = GcReport::default();
        let mut read = HashMap::new();
        for (id, copy) in layout.copies.iter().rev() {
            let dead = id.epoch <= floor || report.kept.len() >= keep;
            if !dead {
                if copy.manifest.is_some() && !plan.superseded.contains(id) {
                    let looks_valid = self.references(lease.key(), *id, &mut read)?.is_some_and(|refs| {
                        refs.names_key
                            && refs
                                .objects
                                .iter()
                                .all(|(object, size)| sizes.get(object.as_str()) == Some(size))
                    });
                    if looks_valid {
                        report.kept.push(*id);
                    }
                }
                continue;
            }
            report.deleted.push(*id);
        }
        self.delete_copies(lease.key(), &layout, &report.deleted, &mut read)?;
        // Names reserved by earlier tenures were never written (a holder that is gone, or
        // one superseded, whose copy a restore would pass over).
        self.delete_reserved(&layout, |epoch| epoch <= floor || epoch < lease.epoch())?;
        Ok(report)
    }

    /// Whether copy `id`'s manifest names `key`, and the objects it references with their
    /// sizes (`None`: no manifest this build reads), read once per collection into `read`: a
    /// collection judges the copies it keeps and then needs what they reference, and a
    /// manifest that carries its chain's deltas inline is most of what a collection reads.
    fn references<'r>(
        &self,
        key: &str,
        id: CopyId,
        read: &'r mut References,
    ) -> Result<Option<&'r ManifestRefs>> {
        let found = match read.entry(id) {
            std::collections::hash_map::Entry::Occupied(found) => found.into_mut(),
            std::collections::hash_map::Entry::Vacant(slot) => {
                let found = match self.read_manifest(key, id)? {
                    Some(Some(manifest)) => Some(ManifestRefs {
                        names_key: manifest.key() == key,
                        objects: manifest.objects(key, id)?,
                    }),
                    _ => None,
                };
                slot.insert(found)
            }
        };
        Ok(found.as_ref())
    }

    /// Deletes the copies `dead`, each manifest first (from then on the copy does not exist,
    /// whatever is left of it), then every object of theirs that no other copy's manifest
    /// references: copies of formats 2 to 6 share the objects of their lineage.
    fn delete_copies(
        &self,
        key: &str,
        layout: &Layout,
        dead: &[CopyId],
        read: &mut References,
    ) -> Result<()> {
        let dead_set: BTreeSet<CopyId> = dead.iter().copied().collect();
        let mut referenced = BTreeSet::new();
        for (id, copy) in &layout.copies {
            if copy.manifest.is_some() && !dead_set.contains(id) {
                // A manifest that cannot be read references nothing a restore would take.
                if let Some(refs) = self.references(key, *id, read)? {
                    referenced.extend(refs.objects.iter().map(|(o, _)| o.clone()));
                }
            }
        }
        // Every manifest before any object, so a power cut never leaves a manifest whose
        // objects are gone: a copy without its manifest does not exist.
        let (mut manifests, mut files) = (Vec::new(), Vec::new());
        for id in dead {
            let copy = &layout.copies[id];
            for object in copy.objects.iter().filter(|o| !referenced.contains(&o.key)) {
                if Some(&object.key) == copy.manifest.as_ref() {
                    manifests.push(object.key.clone());
                } else {
                    files.push(object.key.clone());
                }
            }
        }
        self.store.delete_all(&manifests)?;
        self.store.delete_all(&files)
    }

    /// Deletes the reserved manifest names of the epochs `dead` says.
    fn delete_reserved(&self, layout: &Layout, dead: impl Fn(i64) -> bool) -> Result<()> {
        let dead: Vec<String> = layout
            .reserved
            .iter()
            .filter(|(id, _)| dead(id.epoch))
            .map(|(_, key)| key.clone())
            .collect();
        self.store.delete_all(&dead)
    }

    fn layout(&self, key: &str) -> Result<Layout> {
        let prefix = tenant_prefix(key)?;
        let mut layout = Layout::default();
        for object in self.store.list(&prefix)? {
            let rest = &object.key[prefix.len()..];
            let Some((epoch, rest)) = rest.split_once('/') else {
                continue;
            };
            let Some(epoch) = parse_padded(epoch).and_then(|e| i64::try_from(e).ok()) else {
                continue;
            };
            match EpochEntry::parse(rest) {
                Some(EpochEntry::Tenure) => {
                    layout.markers.insert(epoch, object.key);
                }
                Some(EpochEntry::Manifest(seq)) if layout::is_reserved(object.size) => {
                    layout.reserved.push((CopyId { epoch, seq }, object.key));
                }
                Some(EpochEntry::Manifest(seq)) => {
                    let copy = layout.copies.entry(CopyId { epoch, seq }).or_default();
                    // Both names for one copy (two writers in one epoch): the one this build
                    // reads first.
                    if copy.manifest.is_none() || !object.key.ends_with(LEGACY_MANIFEST) {
                        copy.manifest = Some(object.key.clone());
                    }
                    copy.objects.push(object);
                }
                Some(EpochEntry::Object(seq)) => {
                    layout
                        .copies
                        .entry(CopyId { epoch, seq })
                        .or_default()
                        .objects
                        .push(object);
                }
                None => {}
            }
        }
        Ok(layout)
    }

    /// The candidates a restore considers, newest first, and the copies the tenure markers
    /// show were written after a later tenure had begun.
    fn plan(&self, layout: &Layout, key: &str, floor: i64, below: Option<i64>) -> Result<Plan> {
        let in_range = |epoch: i64| epoch > floor && below.is_none_or(|below| epoch < below);
        let mut superseded = BTreeSet::new();
        for (&epoch, marker_key) in layout.markers.iter().filter(|(e, _)| in_range(**e)) {
            let marker = self
                .store
                .get(marker_key)?
                .and_then(|b| serde_json::from_slice::<TenureMarker>(&b).ok());
            let Some(marker) = marker.filter(|m| m.key == key && m.epoch == epoch) else {
                // Not a marker of this tenant's lineage: it proves nothing either way.
                continue;
            };
            // The tenure of `epoch` began from `restored_from`: anything newer written into
            // an older epoch came from a holder that had already been replaced.
            let from = marker.restored_from.unwrap_or(CopyId { epoch: 0, seq: 0 });
            for id in layout.copies.keys() {
                if id.epoch < epoch && *id > from {
                    superseded.insert(*id);
                }
            }
        }
        let candidates = layout
            .copies
            .iter()
            .rev()
            .filter(|(id, copy)| copy.manifest.is_some() && in_range(id.epoch))
            .map(|(id, _)| *id)
            .collect();
        Ok(Plan {
            candidates,
            superseded,
        })
    }

    /// Fetches and verifies candidates, newest first, into a scratch folder beside `root`
    /// until one passes.
    fn stage_newest(
        &self,
        key: &str,
        plan: &Plan,
        root: &Path,
        verify: Option<FoldCheck<'_>>,
    ) -> Result<(Staged, Option<Lineage>)> {
        let mut skipped = Vec::new();
        for &id in &plan.candidates {
            let reason = if plan.superseded.contains(&id) {
                Some(SkipReason::Superseded)
            } else {
                let scratch = Scratch::beside(root)?;
                match self.fetch_verified(key, id, &scratch.path, verify)? {
                    Ok(lineage) => {
                        let (files, bytes) = tree_size(&scratch.path)?;
                        let staged = Staged {
                            scratch: Some(scratch),
                            report: RestoreReport {
                                restored: Some(id),
                                skipped,
                                files,
                                bytes,
                            },
                        };
                        return Ok((staged, lineage));
                    }
                    Err(reason) => Some(reason),
                }
            };
            skipped.push(SkippedCopy {
                id,
                reason: reason.expect("a copy that did not pass has a reason"),
            });
        }
        if skipped.iter().any(|s| s.reason != SkipReason::Superseded) {
            let list: Vec<String> = skipped
                .iter()
                .map(|s| format!("{}/{} ({})", s.id.epoch, s.id.seq, s.reason))
                .collect();
            return Err(Error::RestoreInvalid {
                message: format!(
                    "{key}: copies exist but none can be trusted; skipped {}",
                    list.join(", ")
                ),
                skipped,
            });
        }
        let staged = Staged {
            scratch: None,
            report: RestoreReport {
                restored: None,
                skipped,
                files: 0,
                bytes: 0,
            },
        };
        Ok((staged, None))
    }

    /// The copy's manifest: `None` when there is none (or only its reserved name), `Some(None)`
    /// when it is not one this build reads.
    fn read_manifest(&self, key: &str, id: CopyId) -> Result<Option<Option<AnyManifest>>> {
        let bytes = match self.store.get(&manifest_key(key, id)?)? {
            Some(bytes) if layout::is_reserved(bytes.len() as u64) => return Ok(None),
            Some(bytes) => Some(bytes),
            None => self
                .store
                .get(&format!("{}{LEGACY_MANIFEST}", copy_prefix(key, id)?))?,
        };
        Ok(bytes.map(|bytes| AnyManifest::parse(&bytes)))
    }

    /// Writes copy `id` into the empty folder `into` and checks it: the files it restored (for
    /// a copy of format 2 or 3, which the tenure's next copy builds on), or the reason it fails. Store
    /// failures and the host's own disk failures are errors, not reasons: they say nothing
    /// about the copy.
    fn fetch_verified(
        &self,
        key: &str,
        id: CopyId,
        into: &Path,
        verify: Option<FoldCheck<'_>>,
    ) -> Result<std::result::Result<Option<Lineage>, SkipReason>> {
        let Some(Some(manifest)) = self.read_manifest(key, id)? else {
            return Ok(Err(SkipReason::Manifest));
        };
        let (epoch, seq) = match &manifest {
            AnyManifest::V1(m) => (m.epoch, m.seq),
            AnyManifest::V2(m) => (m.epoch, m.seq),
        };
        if epoch != id.epoch || seq != id.seq || !manifest.layable() {
            return Ok(Err(SkipReason::Manifest));
        }
        if manifest.key() != key {
            return Ok(Err(SkipReason::Tenant));
        }
        let lineage = match manifest {
            AnyManifest::V1(manifest) => {
                let prefix = copy_prefix(key, id)?;
                let verdicts = in_parallel(&manifest.files, |index, file| {
                    self.fetch_v1(&format!("{prefix}files/{index:06}"), file, into)
                });
                worst(verdicts)?.map_or(Ok(None), Err)
            }
            AnyManifest::V2(manifest) => {
                // Only objects of this copy or of earlier copies: a copy never references
                // ahead of itself, and digests tell whatever is there from what was meant.
                let in_lineage = manifest
                    .files
                    .iter()
                    .all(|f| f.objects().all(|o| o.copy().is_some_and(|c| c <= id)));
                if !in_lineage {
                    return Ok(Err(SkipReason::Manifest));
                }
                let prefix = tenant_prefix(key)?;
                let restored = in_parallel(&manifest.files, |_, file| {
                    self.fetch_v2(&prefix, file, manifest.format_version, into)
                });
                for folder in &manifest.folders {
                    let path = into.join(relative_path(folder).expect("checked by layable"));
                    std::fs::create_dir_all(&path).map_err(|e| {
                        Error::io(format!("{} cannot be created", crate::paths::shown(&path)), &e)
                    })?;
                }
                let mut lineage = Lineage::new();
                let mut verdicts = Vec::new();
                for file in restored {
                    match file? {
                        Ok(known) => {
                            lineage.insert(known.file.path.clone(), known);
                        }
                        Err(reason) => verdicts.push(Ok(Some(reason))),
                    }
                }
                worst(verdicts)?.map_or(Ok(Some(lineage)), Err)
            }
        };
        if lineage.is_err() {
            return Ok(lineage);
        }
        if let Some(verify) = verify {
            if !verify(into)? {
                return Ok(Err(SkipReason::Fold));
            }
        }
        Ok(lineage)
    }

    /// One file of a format 1 copy: its object, SHA-256 and `integrity_check`.
    fn fetch_v1(&self, object: &str, file: &layout::ManifestFile, into: &Path) -> Result<Option<SkipReason>> {
        let Some(content) = self.store.get(object)? else {
            return Ok(Some(SkipReason::Checksum));
        };
        if content.len() as u64 != file.size {
            return Ok(Some(SkipReason::Checksum));
        }
        let target = into.join(relative_path(&file.path).expect("checked by layable"));
        let sqlite = file.sqlite || content.starts_with(SQLITE_HEADER);
        let image = Restored::read_in_place(content, sqlite);
        // The checks (CPU) run on the bytes in memory while they are written out and
        // flushed (I/O): a restore costs the longest of them, not their sum. Bytes that
        // fail a check are in the scratch folder only, which is never installed then.
        std::thread::scope(|scope| {
            let hash = scope.spawn(|| sha256_hex_of(&image.stored()) == file.sha256);
            let check = sqlite.then(|| scope.spawn(|| image.integrity_ok()));
            write_durably(&target, &image.stored())?;
            if !hash.join().unwrap_or(false) {
                return Ok(Some(SkipReason::Checksum));
            }
            let whole = check.is_none_or(|check| check.join().unwrap_or(false));
            Ok((!whole).then_some(SkipReason::Integrity))
        })
    }

    /// One file of a copy of format 2 to 6, written straight into its place: the base's
    /// pieces fetched a few at a time, each hashed and written at its offset part by part as it
    /// arrives ([`Landing`]) and checked against its digest once whole, then the deltas, fetched
    /// one ahead of the one being applied, each checked and applied in place. The block digests
    /// of every piece are kept and updated by each delta, so the file is checked against its
    /// digest without being read back, and the base's own blocks are those of its pieces.
    /// Memory holds a part of each piece being fetched and two deltas, whatever the file's
    /// size. Bytes that fail a check are in the scratch folder only, never installed.
    fn fetch_v2(
        &self,
        prefix: &str,
        file: &FileV2,
        format: u32,
        into: &Path,
    ) -> Result<std::result::Result<Known, SkipReason>> {
        use std::os::unix::fs::FileExt;
        let fetch = |object: &ObjectRef| -> Result<Option<Vec<u8>>> {
            let bytes = match &object.inline {
                Some(inline) => Some(inline.clone()),
                None => self.store.get(&format!("{prefix}{}", object.object))?,
            };
            Ok(bytes.filter(|bytes| bytes.len() as u64 == object.size))
        };
        let pieces: Vec<&ObjectRef> = file.base_objects().collect();
        // Every piece but the last is whole blocks, so the pieces' block digests are the base's.
        let mut offsets = Vec::with_capacity(pieces.len());
        let mut base_len = 0u64;
        for (k, piece) in pieces.iter().enumerate() {
            if k + 1 < pieces.len() && piece.size % delta::BLOCK as u64 != 0 {
                return Ok(Err(SkipReason::Manifest));
            }
            offsets.push(base_len);
            base_len = base_len.saturating_add(piece.size);
        }
        let target = into.join(relative_path(&file.path).expect("checked by layable"));
        let cannot_write = |e: std::io::Error| Error::io(format!("{} cannot be written", shown(&target)), &e);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::io(format!("{} cannot be created", shown(parent)), &e))?;
        }
        // Read too: a delta that changes the length reads back the blocks that alone changes.
        let out = std::fs::File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&target)
            .map_err(cannot_write)?;
        std::thread::scope(|scope| {
            let (ahead, fetched) = std::sync::mpsc::sync_channel(1);
            scope.spawn(move || {
                for object in &file.deltas {
                    let delta =
                        fetch(object).map(|d| d.filter(|bytes| delta::digest(bytes) == object.digest));
                    if ahead.send(delta).is_err() {
                        break;
                    }
                }
            });
            let written = in_parallel(&pieces, |k, piece| -> Result<Option<Vec<[u8; 32]>>> {
                let mut landing = Landing::new(&out, &target, offsets[k], piece.size);
                let found = match &piece.inline {
                    Some(inline) => landing.take(inline).map(|_| true)?,
                    None => self
                        .store
                        .get_parts(&format!("{prefix}{}", piece.object), &mut |part| {
                            landing.take(part)
                        })?,
                };
                Ok(found.then(|| landing.verified(&piece.digest)).flatten())
            });
            let mut blocks = Vec::new();
            for piece in written {
                match piece? {
                    Some(piece) => blocks.extend(piece),
                    None => return Ok(Err(SkipReason::Checksum)),
                }
            }
            out.set_len(base_len).map_err(cannot_write)?;
            let base_blocks = Arc::new(delta::Blocks::new(blocks.clone()));
            let (mut len, mut chain) = (base_len, Vec::with_capacity(file.deltas.len()));
            for delta_bytes in fetched {
                let Some(delta_bytes) = delta_bytes? else {
                    return Ok(Err(SkipReason::Checksum));
                };
                match delta::apply_to_file(&out, &mut blocks, &mut len, &delta_bytes).map_err(cannot_write)? {
                    Some(indexes) => chain.push(Arc::new(indexes)),
                    None => return Ok(Err(SkipReason::Checksum)),
                }
            }
            let older = (format < 6).then(|| delta::digest_of(&blocks, len));
            let blocks = delta::Blocks::new(blocks);
            // The lineage keeps the digest of this build's format, which the next copy compares
            // to tell an unchanged file, whichever format the manifest was written in.
            let digest = blocks.file_digest(len);
            let meant = older.unwrap_or_else(|| digest.clone());
            if len != file.size || meant != file.digest {
                return Ok(Err(SkipReason::Checksum));
            }
            out.sync_data().map_err(cannot_write)?;
            let sqlite = file.sqlite || {
                let mut header = [0u8; 16];
                out.read_exact_at(&mut header, 0).is_ok() && &header == SQLITE_HEADER
            };
            if sqlite && self.full_check && !body::file_passes(&target, "integrity_check") {
                return Ok(Err(SkipReason::Integrity));
            }
            Ok(Ok(Known {
                file: FileV2 {
                    digest,
                    ..file.clone()
                },
                blocks: Arc::new(blocks),
                base_blocks,
                chain,
                wal: None,
                seen: None,
            }))
        })
    }
}

/// How many objects of the store, and how many bytes (inline ones included).
fn tally<'a>(objects: impl Iterator<Item = &'a ObjectRef>) -> (usize, u64) {
    objects.fold((0, 0), |(n, b), o| {
        (n + usize::from(o.inline.is_none()), b + o.size)
    })
}

/// The reason that speaks for a whole copy among its files' verdicts: a damaged object is a
/// checksum failure whatever another file's integrity says. Errors come first.
fn worst(verdicts: Vec<Result<Option<SkipReason>>>) -> Result<Option<SkipReason>> {
    let mut skip = None;
    for verdict in verdicts {
        match verdict? {
            Some(SkipReason::Checksum) => skip = Some(SkipReason::Checksum),
            Some(reason) if skip.is_none() => skip = Some(reason),
            _ => {}
        }
    }
    Ok(skip)
}

#[derive(Debug)]
struct Plan {
    candidates: Vec<CopyId>,
    superseded: BTreeSet<CopyId>,
}

/// Runs `work` for every item, up to four at once: a put or a get mostly waits on a disk
/// flush or the network, not on the CPU, so a copy of several files costs about its largest
/// file. The bound keeps a root of many files from opening as many connections to the store
/// (or threads) as it has files. The results come back in the items' order.
fn in_parallel<T: Sync, R: Send>(items: &[T], work: impl Fn(usize, &T) -> R + Sync) -> Vec<R> {
    const WIDTH: usize = 4;
    if items.len() <= 1 {
        return items.iter().enumerate().map(|(i, item)| work(i, item)).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..WIDTH.min(items.len()) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(item) = items.get(index) else { break };
                *lock(&results[index]) = Some(work(index, item));
            });
        }
    });
    results
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .expect("every item was worked on")
        })
        .collect()
}

/// A [`HostSnapshot`] for a host whose SQLite is this crate's own (a Rust host on the same
/// `rusqlite`/`libsqlite3-sys`): the backup API of the one library the process has.
pub fn same_library_snapshot() -> HostSnapshot {
    Arc::new(|source: &Path, image: &Path| backup_sqlite(source, image))
}

/// The names a restore may replace: a root of its own (never `''` or `/`), not holding the
/// process's working directory.
fn assert_restorable(root: &Path) -> Result<()> {
    assert_root("a tenant root", root)?;
    assert_not_working_dir("a tenant root", root)
}

fn current_floor(lease: &TenantLease) -> Result<i64> {
    lease.assert_held()?;
    Holder::of(lease).floor()
}

/// A holder as a collection checks it: in the lease store, which must still name it.
struct Holder {
    key: String,
    replica_id: String,
    epoch: i64,
    leases: Arc<dyn crate::lease_store::LeaseStore>,
}

impl Holder {
    fn of(lease: &TenantLease) -> Holder {
        Holder {
            key: lease.key().to_owned(),
            replica_id: lease.replica_id().to_owned(),
            epoch: lease.epoch(),
            leases: lease.store().clone(),
        }
    }

    fn key(&self) -> &str {
        &self.key
    }

    fn epoch(&self) -> i64 {
        self.epoch
    }

    /// The forgotten floor, read from the lease store: LEASE_LOST unless it still names this
    /// holder.
    fn floor(&self) -> Result<i64> {
        match self.leases.read(&self.key)? {
            Some(record) if record.owner == self.replica_id && record.epoch == self.epoch => {
                Ok(record.forgotten_at_epoch)
            }
            _ => Err(Error::lease_lost(format!(
                "{}: the lease store no longer names {} at epoch {}; copies are deleted only by the holder",
                self.key, self.replica_id, self.epoch
            ))),
        }
    }
}

fn conflict(lease: &TenantLease, key: &str) -> Error {
    Error::copy_conflict(format!(
        "{key} is in the prefix of {} epoch {} but was not written by this holder",
        lease.key(),
        lease.epoch()
    ))
}

/// The hash of the pieces' bytes one after the other.
fn sha256_hex_of(pieces: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for piece in pieces {
        hasher.update(piece);
    }
    delta::hex(&hasher.finalize())
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves plain values consistent.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
