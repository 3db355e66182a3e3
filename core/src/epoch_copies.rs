//! Epoch-scoped durable copies of a tenant root, and the restore that verifies them.
//!
//! The lease's epoch is a fencing token; this is where it is checked. A holder of epoch n
//! writes copies only under its own prefix, every object create-only, the manifest last:
//!
//! ```text
//! orgs/<org>/tenants/<tenant>/epochs/<epoch:020>/tenure.json
//! orgs/<org>/tenants/<tenant>/epochs/<epoch:020>/<seq:020>/files/<index:06>
//! orgs/<org>/tenants/<tenant>/epochs/<epoch:020>/<seq:020>/manifest.json
//! ```
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
//! §2.2.1). Such files go to the host's [`HostSnapshot`], which reads them through the host's
//! own library; without one the copy is refused (OPEN_IN_PROCESS), and so is a restore into
//! a root whose files the host still has open. Every restored SQLite file passes `integrity_check`
//! before the restore is installed, atomically, in place of the tenant root.

#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::durable_store::{DurableStore, ObjectInfo, PutOutcome};
use crate::errors::{Error, Result};
use crate::paths::{assert_not_working_dir, assert_root};
use crate::tenant_lease::TenantLease;

mod layout;
mod restore;
mod snapshot;

use layout::{
    copy_prefix, epoch_prefix, parse_padded, tenant_prefix, Layout, ListedCopy, Manifest, ManifestFile,
    TenureMarker, MANIFEST, TENURE,
};
use restore::{relative_path, tree_size, write_durably, Restored, Scratch, Staged};
use snapshot::{assert_root_not_open, backup_sqlite, Snapshot};

/// The manifest format this build writes and the only one it restores.
pub const FORMAT_VERSION: u32 = 1;
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// A copy's place in the order restores follow: epoch first, then sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CopyId {
    pub epoch: i64,
    pub seq: u64,
}

/// Why a restore passed over a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// The manifest is missing a field, does not parse, or contradicts its own place.
    Manifest,
    /// The manifest names another tenant.
    Tenant,
    /// A file is missing or its size or SHA-256 differs from the manifest.
    Checksum,
    /// A SQLite file fails `PRAGMA integrity_check`.
    Integrity,
    /// The host's own check of the restored state refused it.
    Fold,
    /// Written into an older epoch after a later tenure had begun: a stale holder's copy.
    Superseded,
}

impl SkipReason {
    /// The stable string hosts see as `reason`.
    pub const fn as_str(self) -> &'static str {
        match self {
            SkipReason::Manifest => "manifest",
            SkipReason::Tenant => "tenant",
            SkipReason::Checksum => "checksum",
            SkipReason::Integrity => "integrity",
            SkipReason::Fold => "fold",
            SkipReason::Superseded => "superseded",
        }
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A copy a restore passed over, and why.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SkippedCopy {
    pub epoch: i64,
    pub seq: u64,
    pub reason: SkipReason,
}

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
    pub epoch: i64,
    pub seq: u64,
    pub files: usize,
    pub bytes: u64,
}

/// One copy as the store lists it, without reading it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CopyListing {
    pub epoch: i64,
    pub seq: u64,
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
/// through the library that holds it: `VACUUM INTO` or the backup API of the host's own
/// SQLite. Called for every such file in a tenant root, one at a time, while a copy is
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
}

/// A lease key and its epoch: one tenure.
type TenureKey = (String, i64);

/// Copies of tenant roots in one durable store. `Send + Sync`; copies of one tenant are
/// written one at a time, copies of different tenants in parallel.
pub struct EpochCopies {
    store: Arc<dyn DurableStore>,
    tenures: Mutex<HashMap<TenureKey, Arc<Mutex<Tenure>>>>,
    snapshot: Option<HostSnapshot>,
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
        }
    }

    /// Reads the files that the host has open through `snapshot` (see [`HostSnapshot`]).
    pub fn with_host_snapshot(mut self, snapshot: Option<HostSnapshot>) -> EpochCopies {
        self.snapshot = snapshot;
        self
    }

    pub fn store(&self) -> &Arc<dyn DurableStore> {
        &self.store
    }

    /// This process's record of `lease`'s tenure. Keyed by epoch too: one `EpochCopies` may
    /// serve a stale holder and its successor side by side (a test does, a confused host
    /// might), and neither may forget what it wrote because the other acted. A few bytes a
    /// tenure, for the life of the process.
    fn tenure(&self, lease: &TenantLease) -> Arc<Mutex<Tenure>> {
        lock(&self.tenures)
            .entry((lease.key().to_owned(), lease.epoch()))
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
    pub(crate) fn write_copy_with(
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
        let tenure = self.tenure(lease);
        let mut tenure = lock(&tenure);
        let prefix = epoch_prefix(lease.key(), lease.epoch())?;
        // The listing (a round trip to the store) is waited for while the snapshot is taken,
        // which also keeps it out of the time the router holds the tenant's calls back.
        let (found, snapshot) = std::thread::scope(|scope| {
            let found = scope.spawn(|| self.store.list(&prefix));
            let snapshot = Snapshot::take(root, self.snapshot.as_ref());
            (found.join().expect("listing does not panic"), snapshot)
        });
        let seq = self.claim_next_seq(lease, &mut tenure, &prefix, &found?)?;
        let snapshot = snapshot?;
        let copy_prefix = format!("{prefix}{seq:020}/");
        snapshot_taken();
        let files = in_parallel(&snapshot.files, |index, file| {
            let content = file.content()?;
            let content = &*content;
            // The hash (CPU) runs while the object is stored (I/O): a put costs the longer of
            // the two, not their sum.
            let sha256 = std::thread::scope(|scope| {
                let hash = scope.spawn(|| sha256_hex(content));
                self.create(&format!("{copy_prefix}files/{index:06}"), content)?;
                Ok::<_, Error>(hash.join().expect("hashing does not panic"))
            })?;
            Ok(ManifestFile {
                path: file.path.clone(),
                size: content.len() as u64,
                sha256,
                sqlite: file.sqlite,
            })
        })
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
        let bytes = files.iter().map(|f| f.size).sum();
        let manifest = Manifest {
            format_version: FORMAT_VERSION,
            key: lease.key().to_owned(),
            epoch: lease.epoch(),
            seq,
            replica_id: lease.replica_id().to_owned(),
            written_at_ms: wall_ms(),
            files,
        };
        let json = serde_json::to_vec_pretty(&manifest).expect("a manifest serializes");
        self.create(&format!("{copy_prefix}{MANIFEST}"), &json)?;
        lease.assert_held()?;
        Ok(WrittenCopy {
            epoch: lease.epoch(),
            seq,
            files: manifest.files.len(),
            bytes,
        })
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
        let mut present = BTreeSet::new();
        for object in found {
            let rest = &object.key[prefix.len()..];
            if rest == TENURE {
                if !tenure.marker && !self.marker_is(lease, &object.key)? {
                    return Err(conflict(lease, &object.key));
                }
                tenure.marker = true;
                continue;
            }
            match rest.split_once('/').and_then(|(seq, _)| parse_padded(seq)) {
                Some(seq) if tenure.seqs.contains(&seq) => {
                    present.insert(seq);
                }
                _ => return Err(conflict(lease, &object.key)),
            }
        }
        let next = tenure.seqs.last().map_or(1, |last| last + 1);
        // Deleted copies need no remembering: a name that comes back is a stranger's.
        tenure.seqs = present;
        tenure.seqs.insert(next);
        Ok(next)
    }

    /// Whether the tenure marker at `key` is this holder's (a restore by another
    /// `EpochCopies` of the same process wrote it).
    fn marker_is(&self, lease: &TenantLease, key: &str) -> Result<bool> {
        let marker = self
            .store
            .get(key)?
            .and_then(|b| serde_json::from_slice::<TenureMarker>(&b).ok());
        Ok(marker.is_some_and(|m| {
            m.key == lease.key() && m.epoch == lease.epoch() && m.replica_id == lease.replica_id()
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
        let staged = self.stage_newest(lease.key(), &plan, root, verify)?;
        lease.assert_held()?;
        let marker = TenureMarker {
            format_version: FORMAT_VERSION,
            key: lease.key().to_owned(),
            epoch: lease.epoch(),
            replica_id: lease.replica_id().to_owned(),
            restored_from: staged.report.restored,
        };
        let marker_key = format!("{}{TENURE}", epoch_prefix(lease.key(), lease.epoch())?);
        let json = serde_json::to_vec_pretty(&marker).expect("a marker serializes");
        if self.store.put_new(&marker_key, &json)? == PutOutcome::AlreadyExists {
            // A retried restore of this same tenure that chose the same copy is no conflict.
            let existing = self.store.get(&marker_key)?;
            if existing.and_then(|b| serde_json::from_slice::<TenureMarker>(&b).ok()) != Some(marker) {
                return Err(conflict(lease, &marker_key));
            }
        }
        tenure.marker = true;
        staged.install(root)
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
        self.stage_newest(key, &plan, root, verify)?.install(root)
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
        self.fetch_verified(key, copy, &scratch.path, verify)
    }

    /// Every copy of `key` in the store, oldest first.
    pub fn list(&self, key: &str) -> Result<Vec<CopyListing>> {
        let layout = self.layout(key)?;
        Ok(layout
            .copies
            .iter()
            .map(|(id, copy)| CopyListing {
                epoch: id.epoch,
                seq: id.seq,
                complete: copy.manifest,
                objects: copy.objects.len(),
                bytes: copy.objects.iter().map(|o| o.size).sum(),
            })
            .collect())
    }

    /// Deletes every copy (and tenure marker) of epochs up to the forgotten floor, which it
    /// reads from the lease store: LEASE_LOST unless the store still names this holder.
    pub fn forget_copies(&self, lease: &TenantLease) -> Result<Vec<CopyId>> {
        let floor = current_floor(lease)?;
        let layout = self.layout(lease.key())?;
        let mut deleted = Vec::new();
        for (id, copy) in layout.copies.iter().filter(|(id, _)| id.epoch <= floor) {
            self.delete_copy(copy)?;
            deleted.push(*id);
        }
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
        let floor = current_floor(lease)?;
        let layout = self.layout(lease.key())?;
        let plan = self.plan(&layout, lease.key(), floor, None)?;
        let mut report = GcReport::default();
        for (id, copy) in layout.copies.iter().rev() {
            let dead = id.epoch <= floor || report.kept.len() >= keep;
            if !dead {
                if copy.manifest
                    && !plan.superseded.contains(id)
                    && self.looks_valid(lease.key(), *id, copy)?
                {
                    report.kept.push(*id);
                }
                continue;
            }
            self.delete_copy(copy)?;
            report.deleted.push(*id);
        }
        Ok(report)
    }

    fn looks_valid(&self, key: &str, id: CopyId, copy: &ListedCopy) -> Result<bool> {
        let Some(manifest) = self.read_manifest(key, id)? else {
            return Ok(false);
        };
        let Ok(manifest) = manifest else {
            return Ok(false);
        };
        let sizes: HashMap<&str, u64> = copy.objects.iter().map(|o| (o.key.as_str(), o.size)).collect();
        let prefix = copy_prefix(key, id)?;
        Ok(manifest.key == key
            && manifest.files.iter().enumerate().all(|(index, file)| {
                sizes.get(format!("{prefix}files/{index:06}").as_str()) == Some(&file.size)
            }))
    }

    fn delete_copy(&self, copy: &ListedCopy) -> Result<()> {
        // The manifest first: from then on the copy does not exist, whatever is left of it.
        let (manifest, files): (Vec<_>, Vec<_>) =
            copy.objects.iter().partition(|o| o.key.ends_with(MANIFEST));
        for object in manifest.into_iter().chain(files) {
            self.store.delete(&object.key)?;
        }
        Ok(())
    }

    fn layout(&self, key: &str) -> Result<Layout> {
        let prefix = tenant_prefix(key)?;
        let mut layout = Layout::default();
        for object in self.store.list(&prefix)? {
            let rest = &object.key[prefix.len()..];
            let mut parts = rest.splitn(3, '/');
            let Some(epoch) = parts
                .next()
                .and_then(parse_padded)
                .and_then(|e| i64::try_from(e).ok())
            else {
                continue;
            };
            match (parts.next(), parts.next()) {
                (Some(TENURE), None) => {
                    layout.markers.insert(epoch, object.key);
                }
                (Some(seq), Some(name)) => {
                    let Some(seq) = parse_padded(seq) else { continue };
                    let copy = layout.copies.entry(CopyId { epoch, seq }).or_default();
                    copy.manifest |= name == MANIFEST;
                    copy.objects.push(object);
                }
                _ => {}
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
            .filter(|(id, copy)| copy.manifest && in_range(id.epoch))
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
    ) -> Result<Staged> {
        let mut skipped = Vec::new();
        for &id in &plan.candidates {
            let reason = if plan.superseded.contains(&id) {
                Some(SkipReason::Superseded)
            } else {
                let scratch = Scratch::beside(root)?;
                match self.fetch_verified(key, id, &scratch.path, verify)? {
                    None => {
                        let (files, bytes) = tree_size(&scratch.path)?;
                        return Ok(Staged {
                            scratch: Some(scratch),
                            report: RestoreReport {
                                restored: Some(id),
                                skipped,
                                files,
                                bytes,
                            },
                        });
                    }
                    reason => reason,
                }
            };
            skipped.push(SkippedCopy {
                epoch: id.epoch,
                seq: id.seq,
                reason: reason.expect("a copy that did not pass has a reason"),
            });
        }
        if skipped.iter().any(|s| s.reason != SkipReason::Superseded) {
            let list: Vec<String> = skipped
                .iter()
                .map(|s| format!("{}/{} ({})", s.epoch, s.seq, s.reason))
                .collect();
            return Err(Error::RestoreInvalid {
                message: format!(
                    "{key}: copies exist but none can be trusted; skipped {}",
                    list.join(", ")
                ),
                skipped,
            });
        }
        Ok(Staged {
            scratch: None,
            report: RestoreReport {
                restored: None,
                skipped,
                files: 0,
                bytes: 0,
            },
        })
    }

    fn read_manifest(&self, key: &str, id: CopyId) -> Result<Option<Result<Manifest, serde_json::Error>>> {
        let manifest_key = format!("{}{MANIFEST}", copy_prefix(key, id)?);
        Ok(self
            .store
            .get(&manifest_key)?
            .map(|bytes| serde_json::from_slice(&bytes)))
    }

    /// Writes copy `id` into the empty folder `into` and checks it; the reason it fails, if
    /// it does. Store failures are errors, not reasons: they say nothing about the copy.
    fn fetch_verified(
        &self,
        key: &str,
        id: CopyId,
        into: &Path,
        verify: Option<FoldCheck<'_>>,
    ) -> Result<Option<SkipReason>> {
        let manifest = match self.read_manifest(key, id)? {
            Some(Ok(manifest)) => manifest,
            None | Some(Err(_)) => return Ok(Some(SkipReason::Manifest)),
        };
        if manifest.format_version != FORMAT_VERSION
            || manifest.epoch != id.epoch
            || manifest.seq != id.seq
            || !manifest.files.iter().all(|f| relative_path(&f.path).is_some())
        {
            return Ok(Some(SkipReason::Manifest));
        }
        if manifest.key != key {
            return Ok(Some(SkipReason::Tenant));
        }
        let prefix = copy_prefix(key, id)?;
        let verdicts = in_parallel(&manifest.files, |index, file| -> Result<Option<SkipReason>> {
            let Some(content) = self.store.get(&format!("{prefix}files/{index:06}"))? else {
                return Ok(Some(SkipReason::Checksum));
            };
            if content.len() as u64 != file.size {
                return Ok(Some(SkipReason::Checksum));
            }
            let target = into.join(relative_path(&file.path).expect("checked above"));
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
        });
        let mut skip = None;
        for verdict in verdicts {
            // A damaged object is a checksum failure whatever another file's integrity says.
            match verdict? {
                Some(SkipReason::Checksum) => skip = Some(SkipReason::Checksum),
                Some(reason) if skip.is_none() => skip = Some(reason),
                _ => {}
            }
        }
        if skip.is_some() {
            return Ok(skip);
        }
        if let Some(verify) = verify {
            if !verify(into)? {
                return Ok(Some(SkipReason::Fold));
            }
        }
        Ok(None)
    }
}

#[derive(Debug)]
struct Plan {
    candidates: Vec<CopyId>,
    superseded: BTreeSet<CopyId>,
}

/// Runs `work` for every item, up to four at once: a put or a get mostly waits on a disk
/// flush or the network, not on the CPU, so a copy of several files costs about its largest
/// file. The results come back in the items' order.
fn in_parallel<T: Sync, R: Send>(items: &[T], work: impl Fn(usize, &T) -> R + Sync) -> Vec<R> {
    const WIDTH: usize = 4;
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
    match lease.store().read(lease.key())? {
        Some(record) if record.owner == lease.replica_id() && record.epoch == lease.epoch() => {
            Ok(record.forgotten_at_epoch)
        }
        _ => Err(Error::lease_lost(format!(
            "{}: the lease store no longer names {} at epoch {}; copies are deleted only by the holder",
            lease.key(),
            lease.replica_id(),
            lease.epoch()
        ))),
    }
}

fn conflict(lease: &TenantLease, key: &str) -> Error {
    Error::copy_conflict(format!(
        "{key} is in the prefix of {} epoch {} but was not written by this holder",
        lease.key(),
        lease.epoch()
    ))
}

fn sha256_hex(bytes: &[u8]) -> String {
    sha256_hex_of(&[bytes])
}

/// The hash of the pieces' bytes one after the other.
fn sha256_hex_of(pieces: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for piece in pieces {
        hasher.update(piece);
    }
    let mut hex = String::with_capacity(64);
    for byte in hasher.finalize() {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves plain values consistent.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
