//! Epoch-scoped copies of tenant roots, and their verified restore.
//!
//! Writing, restoring, forgetting and collecting copies read and write whole tenant roots
//! and reach the durable store, so each call releases the interpreter lock for its whole
//! length, as the lease stores' calls do. A restore's `verify` and a copy's `snapshot` are
//! Python: the core calls them on the same thread (or, under a router, on its copier's),
//! which attaches to the interpreter for that one call (see `callbacks`).
//!
//! # Files the host has open
//!
//! The core never opens a file of a tenant root that another descriptor of this process has
//! open: its SQLite is its own copy, and closing its connection would drop the host's POSIX
//! locks (they belong to the process) and could delete the WAL of a ledger that Python's
//! `sqlite3` still writes to. Such files go to the host's `snapshot(source, image)`, which
//! reads them through the library that has them open; without one the copy is refused with
//! `OpenInProcessError`, as is a restore into a root the host
//! still holds. `gotry_tenant_state.sqlite3_snapshot` is that function for the standard
//! library's `sqlite3`.

use std::path::Path;
use std::sync::Arc;

use gotry_tenant_state::{
    CopyId, CopyListing, EpochCopies, FoldCheck, GcReport, HostSnapshot, RestoreReport, SkipReason,
    SkippedCopy, WrittenCopy,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyTuple};
use pyo3::PyTraverseError;

use crate::args::{count, path_arg, store_text};
use crate::callbacks::HostCallable;
use crate::durable::PyDurableStore;
use crate::errors::CoreError;
use crate::lease::PyTenantLease;
use crate::values::quoted;

/// What `verify=` must be, for its TypeError.
pub const VERIFY_SHAPE: &str = "a callable taking the restored folder's path and returning a bool";
/// What `snapshot=` must be, for its TypeError.
pub const SNAPSHOT_SHAPE: &str =
    "a callable taking (source, image) paths that writes a consistent image of source to image";

/// A copy's place in the order restores follow: epoch first, then sequence.
#[pyclass(frozen, eq, ord, hash, module = "gotry_tenant_state", name = "CopyId")]
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PyCopyId(CopyId);

impl From<CopyId> for PyCopyId {
    fn from(id: CopyId) -> PyCopyId {
        PyCopyId(id)
    }
}

#[pymethods]
impl PyCopyId {
    #[new]
    fn new(epoch: i64, seq: u64) -> PyCopyId {
        PyCopyId(CopyId { epoch, seq })
    }

    #[classattr]
    fn __match_args__() -> (&'static str, &'static str) {
        ("epoch", "seq")
    }

    #[getter]
    fn epoch(&self) -> i64 {
        self.0.epoch
    }

    #[getter]
    fn seq(&self) -> u64 {
        self.0.seq
    }

    fn __repr__(&self) -> String {
        format!("CopyId(epoch={}, seq={})", self.0.epoch, self.0.seq)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let id = slf.get().0;
        let args = (id.epoch, id.seq).into_pyobject(slf.py())?;
        Ok((slf.get_type().into_any(), args))
    }
}

/// The reasons a restore gives, to read one back from its string (unpickling, a test).
const SKIP_REASONS: [SkipReason; 6] = [
    SkipReason::Manifest,
    SkipReason::Tenant,
    SkipReason::Checksum,
    SkipReason::Integrity,
    SkipReason::Fold,
    SkipReason::Superseded,
];

/// A copy a restore passed over, and why. Picklable, since a RestoreVerificationError
/// carries a list of them to wherever it is sent.
#[pyclass(frozen, eq, hash, module = "gotry_tenant_state", name = "SkippedCopy")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PySkippedCopy(SkippedCopy);

impl From<SkippedCopy> for PySkippedCopy {
    fn from(skipped: SkippedCopy) -> PySkippedCopy {
        PySkippedCopy(skipped)
    }
}

#[pymethods]
impl PySkippedCopy {
    #[new]
    fn new(epoch: i64, seq: u64, reason: &str) -> PyResult<PySkippedCopy> {
        let reason = SKIP_REASONS
            .into_iter()
            .find(|known| known.as_str() == reason)
            .ok_or_else(|| {
                let known: Vec<&str> = SKIP_REASONS.iter().map(|r| r.as_str()).collect();
                PyValueError::new_err(format!(
                    "reason must be one of {}, got {reason:?}",
                    known.join(", ")
                ))
            })?;
        Ok(PySkippedCopy(SkippedCopy {
            id: CopyId { epoch, seq },
            reason,
        }))
    }

    #[classattr]
    fn __match_args__() -> (&'static str, &'static str, &'static str) {
        ("epoch", "seq", "reason")
    }

    #[getter]
    fn epoch(&self) -> i64 {
        self.0.id.epoch
    }

    #[getter]
    fn seq(&self) -> u64 {
        self.0.id.seq
    }

    #[getter]
    fn reason(&self) -> &'static str {
        self.0.reason.as_str()
    }

    fn __repr__(&self) -> String {
        let s = &self.0;
        format!(
            "SkippedCopy(epoch={}, seq={}, reason='{}')",
            s.id.epoch, s.id.seq, s.reason
        )
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let s = &slf.get().0;
        let args = (s.id.epoch, s.id.seq, s.reason.as_str()).into_pyobject(slf.py())?;
        Ok((slf.get_type().into_any(), args))
    }
}

/// A copy taken as written: its manifest is durable and the write gate held after it.
#[pyclass(frozen, eq, hash, module = "gotry_tenant_state", name = "WrittenCopy")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PyWrittenCopy(WrittenCopy);

#[pymethods]
impl PyWrittenCopy {
    #[new]
    #[pyo3(signature = (epoch, seq, files, bytes, pieces_uploaded=0, bytes_uploaded=0, pieces_reused=0, bytes_reused=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        epoch: i64,
        seq: u64,
        files: usize,
        bytes: u64,
        pieces_uploaded: usize,
        bytes_uploaded: u64,
        pieces_reused: usize,
        bytes_reused: u64,
    ) -> PyWrittenCopy {
        PyWrittenCopy(WrittenCopy {
            id: CopyId { epoch, seq },
            files,
            bytes,
            pieces_uploaded,
            bytes_uploaded,
            pieces_reused,
            bytes_reused,
        })
    }

    #[classattr]
    fn __match_args__() -> (&'static str, &'static str, &'static str, &'static str) {
        ("epoch", "seq", "files", "bytes")
    }

    #[getter]
    fn epoch(&self) -> i64 {
        self.0.id.epoch
    }

    #[getter]
    fn seq(&self) -> u64 {
        self.0.id.seq
    }

    #[getter]
    fn files(&self) -> usize {
        self.0.files
    }

    /// Bytes of the files copied, SQLite files as their backup image; the manifest aside.
    #[getter]
    fn bytes(&self) -> u64 {
        self.0.bytes
    }

    /// Objects this copy stored beside its manifest (bases and deltas too large to ride inline
    /// in it).
    #[getter]
    fn pieces_uploaded(&self) -> usize {
        self.0.pieces_uploaded
    }

    #[getter]
    fn bytes_uploaded(&self) -> u64 {
        self.0.bytes_uploaded
    }

    /// Objects of earlier copies of the lineage this copy references instead of storing again.
    #[getter]
    fn pieces_reused(&self) -> usize {
        self.0.pieces_reused
    }

    #[getter]
    fn bytes_reused(&self) -> u64 {
        self.0.bytes_reused
    }

    fn __repr__(&self) -> String {
        let w = &self.0;
        format!(
            "WrittenCopy(epoch={}, seq={}, files={}, bytes={}, pieces_uploaded={}, bytes_uploaded={}, pieces_reused={}, bytes_reused={})",
            w.id.epoch, w.id.seq, w.files, w.bytes, w.pieces_uploaded, w.bytes_uploaded, w.pieces_reused, w.bytes_reused
        )
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let w = &slf.get().0;
        let args = (
            w.id.epoch,
            w.id.seq,
            w.files,
            w.bytes,
            w.pieces_uploaded,
            w.bytes_uploaded,
            w.pieces_reused,
            w.bytes_reused,
        )
            .into_pyobject(slf.py())?;
        Ok((slf.get_type().into_any(), args))
    }
}

/// One copy as the store lists it, read from names and sizes alone.
#[pyclass(frozen, eq, hash, module = "gotry_tenant_state", name = "CopyListing")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PyCopyListing(CopyListing);

#[pymethods]
impl PyCopyListing {
    #[new]
    fn new(epoch: i64, seq: u64, complete: bool, objects: usize, bytes: u64) -> PyCopyListing {
        PyCopyListing(CopyListing {
            id: CopyId { epoch, seq },
            complete,
            objects,
            bytes,
        })
    }

    #[classattr]
    fn __match_args__() -> (
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
    ) {
        ("epoch", "seq", "complete", "objects", "bytes")
    }

    #[getter]
    fn epoch(&self) -> i64 {
        self.0.id.epoch
    }

    #[getter]
    fn seq(&self) -> u64 {
        self.0.id.seq
    }

    /// The manifest is there, so the copy exists; whether it verifies only a restore says.
    #[getter]
    fn complete(&self) -> bool {
        self.0.complete
    }

    /// Objects under the copy's prefix, the manifest included.
    #[getter]
    fn objects(&self) -> usize {
        self.0.objects
    }

    #[getter]
    fn bytes(&self) -> u64 {
        self.0.bytes
    }

    fn __repr__(&self) -> String {
        let c = &self.0;
        format!(
            "CopyListing(epoch={}, seq={}, complete={}, objects={}, bytes={})",
            c.id.epoch,
            c.id.seq,
            if c.complete { "True" } else { "False" },
            c.objects,
            c.bytes
        )
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let c = &slf.get().0;
        let args = (c.id.epoch, c.id.seq, c.complete, c.objects, c.bytes).into_pyobject(slf.py())?;
        Ok((slf.get_type().into_any(), args))
    }
}

/// What a restore did: the copy it installed (None: an empty start) and every copy it
/// passed over on the way, newest first.
#[pyclass(frozen, eq, module = "gotry_tenant_state", name = "RestoreReport")]
#[derive(PartialEq)]
pub struct PyRestoreReport(RestoreReport);

#[pymethods]
impl PyRestoreReport {
    #[getter]
    fn restored(&self) -> Option<PyCopyId> {
        self.0.restored.map(PyCopyId)
    }

    #[getter]
    fn skipped(&self) -> Vec<PySkippedCopy> {
        self.0.skipped.iter().cloned().map(PySkippedCopy).collect()
    }

    /// Files now in the tenant root.
    #[getter]
    fn files(&self) -> usize {
        self.0.files
    }

    #[getter]
    fn bytes(&self) -> u64 {
        self.0.bytes
    }

    fn __repr__(&self) -> String {
        let r = &self.0;
        let restored = copy_id_repr(r.restored);
        let skipped: Vec<String> = r
            .skipped
            .iter()
            .map(|s| PySkippedCopy(s.clone()).__repr__())
            .collect();
        format!(
            "RestoreReport(restored={restored}, skipped=[{}], files={}, bytes={})",
            skipped.join(", "),
            r.files,
            r.bytes
        )
    }
}

/// What a garbage collection kept and deleted, each newest first.
#[pyclass(frozen, eq, module = "gotry_tenant_state", name = "GcReport")]
#[derive(PartialEq)]
pub struct PyGcReport(GcReport);

fn copy_ids(ids: &[CopyId]) -> Vec<PyCopyId> {
    ids.iter().copied().map(PyCopyId).collect()
}

/// A copy as every value that names one prints it, the way `CopyId` prints itself; None for
/// no copy.
pub fn copy_id_repr(id: Option<CopyId>) -> String {
    id.map_or_else(|| "None".to_owned(), |id| PyCopyId(id).__repr__())
}

fn copy_ids_repr(ids: &[CopyId]) -> String {
    let shown: Vec<String> = ids.iter().map(|id| PyCopyId(*id).__repr__()).collect();
    format!("[{}]", shown.join(", "))
}

#[pymethods]
impl PyGcReport {
    #[getter]
    fn kept(&self) -> Vec<PyCopyId> {
        copy_ids(&self.0.kept)
    }

    #[getter]
    fn deleted(&self) -> Vec<PyCopyId> {
        copy_ids(&self.0.deleted)
    }

    fn __repr__(&self) -> String {
        format!(
            "GcReport(kept={}, deleted={})",
            copy_ids_repr(&self.0.kept),
            copy_ids_repr(&self.0.deleted)
        )
    }
}

/// The copies of tenant roots in one durable store; safe to share between threads (copies
/// of one tenant are written one at a time, of different tenants in parallel). It remembers
/// which objects of a tenure it wrote, since anything else in that epoch's prefix is a
/// conflict: a holder keeps one `EpochCopies` for its whole tenure.
#[pyclass(frozen, module = "gotry_tenant_state", name = "EpochCopies")]
pub struct PyEpochCopies {
    copies: EpochCopies,
    location: String,
    /// The host's `snapshot`, shared with the core's copies.
    snapshot: Option<Arc<HostCallable>>,
}

#[pymethods]
impl PyEpochCopies {
    /// `snapshot(source, image)` reads the files of a tenant root that this process has
    /// open elsewhere (see the module docs); without it, copying such a file is refused.
    #[new]
    #[pyo3(signature = (store, *, snapshot = None))]
    fn new(
        store: &Bound<'_, PyDurableStore>,
        snapshot: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyEpochCopies> {
        let store = store.get().shared();
        let snapshot = HostCallable::from_arg("snapshot", SNAPSHOT_SHAPE, snapshot)?;
        Ok(PyEpochCopies {
            location: store.location(),
            copies: EpochCopies::new(store).with_host_snapshot(snapshot.clone().map(host_snapshot)),
            snapshot,
        })
    }

    /// Writes a complete copy of the tenant root `root` under the lease's epoch.
    fn write_copy(
        &self,
        py: Python<'_>,
        lease: &Bound<'_, PyTenantLease>,
        root: &Bound<'_, PyAny>,
    ) -> PyResult<PyWrittenCopy> {
        let root = path_arg("root", root)?;
        let lease = lease.get().shared();
        let written = py
            .detach(|| self.copies.write_copy(&lease, &root))
            .map_err(CoreError)?;
        Ok(PyWrittenCopy(written))
    }

    /// Restores, at the start of the lease's tenure, the newest copy that verifies into
    /// `root`. `verify(path)` sees each candidate that passed every other check, restored
    /// into the folder `path` and not yet in place; False passes it over (reason `fold`),
    /// and an exception it raises ends the restore and comes out of this call as itself.
    #[pyo3(signature = (lease, root, *, verify = None))]
    fn restore(
        &self,
        py: Python<'_>,
        lease: &Bound<'_, PyTenantLease>,
        root: &Bound<'_, PyAny>,
        verify: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyRestoreReport> {
        let root = path_arg("root", root)?;
        let lease = lease.get().shared();
        let verify = HostCallable::from_arg("verify", VERIFY_SHAPE, verify)?;
        let report = py
            .detach(|| {
                let check = verify
                    .as_deref()
                    .map(|callback| move |path: &Path| fold_check(callback, path));
                let check = check.as_ref().map(|check| check as FoldCheck<'_>);
                self.copies.restore(&lease, &root, check)
            })
            .map_err(CoreError)?;
        Ok(PyRestoreReport(report))
    }

    /// Every copy of the tenant `key` in the store, oldest first.
    fn list(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Vec<PyCopyListing>> {
        let key = store_text("key", key)?;
        let listing = py.detach(|| self.copies.list(&key)).map_err(CoreError)?;
        Ok(listing.into_iter().map(PyCopyListing).collect())
    }

    /// Deletes every copy of epochs up to the forgotten floor, which it reads from the lease
    /// store first: LeaseLostError unless the store still names this holder.
    fn forget_copies(&self, py: Python<'_>, lease: &Bound<'_, PyTenantLease>) -> PyResult<Vec<PyCopyId>> {
        let lease = lease.get().shared();
        let deleted = py
            .detach(|| self.copies.forget_copies(&lease))
            .map_err(CoreError)?;
        Ok(copy_ids(&deleted))
    }

    /// Keeps the newest `keep` copies that look valid and deletes older ones, never the
    /// newest valid copy; checks the lease store first, as `forget_copies` does.
    #[pyo3(signature = (lease, *, keep))]
    fn gc(
        &self,
        py: Python<'_>,
        lease: &Bound<'_, PyTenantLease>,
        keep: &Bound<'_, PyAny>,
    ) -> PyResult<PyGcReport> {
        let lease = lease.get().shared();
        let keep = count("keep", keep)?;
        let report = py.detach(|| self.copies.gc(&lease, keep)).map_err(CoreError)?;
        Ok(PyGcReport(report))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let location = quoted(py, &self.location)?;
        let snapshot = if self.snapshot.is_some() {
            ", snapshot=..."
        } else {
            ""
        };
        Ok(format!("EpochCopies(store={location}{snapshot})"))
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.snapshot
            .iter()
            .try_for_each(|snapshot| snapshot.traverse(&visit))
    }

    fn __clear__(&self) {
        self.snapshot.iter().for_each(|snapshot| snapshot.clear());
    }
}

/// The host's `snapshot` as the core calls it, on the copy's thread without the GIL: the
/// paths as `str`, its return value ignored, its exception failing the copy as itself.
pub fn host_snapshot(snapshot: Arc<HostCallable>) -> HostSnapshot {
    Arc::new(move |source: &Path, image: &Path| {
        snapshot.call(|callable| {
            callable.call1((source.as_os_str(), image.as_os_str()))?;
            Ok(())
        })
    })
}

/// One call of the host's `verify`, from inside a restore running without the lock. A
/// verdict that is not a bool is refused rather than read for its truth: a check that
/// returned a message or None by mistake must not accept a copy.
pub fn fold_check(verify: &HostCallable, path: &Path) -> gotry_tenant_state::Result<bool> {
    verify.call(|verify| {
        let verdict = verify.call1((path.as_os_str(),))?;
        match verdict.cast::<PyBool>() {
            Ok(verdict) => Ok(verdict.is_true()),
            Err(_) => Err(PyTypeError::new_err(format!(
                "verify must return a bool, got {}",
                verdict.get_type().name()?
            ))),
        }
    })
}
