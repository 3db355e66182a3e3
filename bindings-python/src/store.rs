//! Lease stores. Every call that reaches the store releases the interpreter lock for its
//! whole length: a call may wait up to the busy timeout for another process's write lock
//! and then for an fdatasync, and the rest of the program must keep running meanwhile.
//! Arguments are checked and copied into owned values first, while the lock is still held.

use std::path::PathBuf;
use std::sync::Arc;

use gotry_tenant_state::lease_store::sqlite::DEFAULT_BUSY_TIMEOUT;
use gotry_tenant_state::{open_lease_store as open_store_url, LeaseStore, SqliteLeaseStore, SqliteOptions};
use pyo3::prelude::*;

use crate::args::{integer, milliseconds, path_arg, store_text};
use crate::clocks::wall_clock;
use crate::errors::{exception_object, CoreError};
use crate::values::{PyHistoryEntry, PyLeaseGrant, PyLeaseRecord};

/// Any lease store of the core. Instances come from `open_lease_store(url)` or from a
/// subclass's constructor; they are safe to share between threads.
#[pyclass(frozen, subclass, module = "gotry_tenant_state", name = "LeaseStore")]
pub struct PyLeaseStore {
    store: Arc<dyn LeaseStore>,
}

impl PyLeaseStore {
    /// The core store, for a holder that keeps it.
    pub fn shared(&self) -> Arc<dyn LeaseStore> {
        Arc::clone(&self.store)
    }

    /// The one way a method reaches the store: without the interpreter lock (see the module
    /// docs), its failure raised as the package's exception.
    fn call<T: Send>(
        &self,
        py: Python<'_>,
        call: impl Send + FnOnce(&dyn LeaseStore) -> gotry_tenant_state::Result<T>,
    ) -> PyResult<T> {
        Ok(py.detach(|| call(&*self.store)).map_err(CoreError)?)
    }
}

#[pymethods]
impl PyLeaseStore {
    fn read(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<PyLeaseRecord>> {
        let key = store_text("key", key)?;
        Ok(self.call(py, |store| store.read(&key))?.map(PyLeaseRecord))
    }

    fn acquire(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        owner: &Bound<'_, PyAny>,
        ttl_ms: &Bound<'_, PyAny>,
    ) -> PyResult<PyLeaseGrant> {
        let (key, owner) = (store_text("key", key)?, store_text("owner", owner)?);
        let ttl_ms = integer("ttl_ms", ttl_ms)?;
        self.call(py, |store| store.acquire(&key, &owner, ttl_ms))
            .map(PyLeaseGrant)
    }

    fn renew(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        owner: &Bound<'_, PyAny>,
        epoch: &Bound<'_, PyAny>,
        ttl_ms: &Bound<'_, PyAny>,
    ) -> PyResult<PyLeaseGrant> {
        let (key, owner) = (store_text("key", key)?, store_text("owner", owner)?);
        let (epoch, ttl_ms) = (integer("epoch", epoch)?, integer("ttl_ms", ttl_ms)?);
        self.call(py, |store| store.renew(&key, &owner, epoch, ttl_ms))
            .map(PyLeaseGrant)
    }

    /// Renews many leases of `owner` in one durable transaction: one fsync for a whole round
    /// instead of one per tenant. `leases` holds `(key, epoch)` pairs; the answer has one
    /// entry per pair, in order: the `LeaseGrant`, or the exception refusing that lease alone
    /// (returned, not raised, so one lost tenant does not hide the others). A failure of the
    /// store itself raises. A pair whose key is not a `str` or whose epoch is not an `int` is
    /// a programming error and raises ValueError for the whole call before the store is asked.
    fn renew_batch<'py>(
        &self,
        py: Python<'py>,
        owner: &Bound<'py, PyAny>,
        ttl_ms: &Bound<'py, PyAny>,
        leases: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let owner = store_text("owner", owner)?;
        let ttl_ms = integer("ttl_ms", ttl_ms)?;
        let mut pairs: Vec<(String, i64)> = Vec::new();
        for pair in leases.try_iter()? {
            let (key, epoch): (Bound<'py, PyAny>, Bound<'py, PyAny>) = pair?.extract()?;
            pairs.push((store_text("key", &key)?, integer("epoch", &epoch)?));
        }
        let answers = self.call(py, |store| {
            let borrowed: Vec<(&str, i64)> = pairs.iter().map(|(k, e)| (k.as_str(), *e)).collect();
            store.renew_batch(&owner, ttl_ms, &borrowed)
        })?;
        answers
            .into_iter()
            .map(|answer| match answer {
                Ok(grant) => Ok(Bound::new(py, PyLeaseGrant(grant))?.into_any()),
                Err(refusal) => Ok(exception_object(py, refusal)),
            })
            .collect()
    }

    fn release(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        owner: &Bound<'_, PyAny>,
        epoch: &Bound<'_, PyAny>,
    ) -> PyResult<PyLeaseRecord> {
        let (key, owner) = (store_text("key", key)?, store_text("owner", owner)?);
        let epoch = integer("epoch", epoch)?;
        self.call(py, |store| store.release(&key, &owner, epoch))
            .map(PyLeaseRecord)
    }

    fn mark_forgotten(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        owner: &Bound<'_, PyAny>,
        epoch: &Bound<'_, PyAny>,
    ) -> PyResult<PyLeaseRecord> {
        let (key, owner) = (store_text("key", key)?, store_text("owner", owner)?);
        let epoch = integer("epoch", epoch)?;
        self.call(py, |store| store.mark_forgotten(&key, &owner, epoch))
            .map(PyLeaseRecord)
    }

    /// Every granted operation in log order, of one key or of all.
    #[pyo3(signature = (key = None))]
    fn history(&self, py: Python<'_>, key: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<PyHistoryEntry>> {
        let key = key.map(|key| store_text("key", key)).transpose()?;
        let entries = self.call(py, |store| store.history(key.as_deref()))?;
        Ok(entries.into_iter().map(PyHistoryEntry).collect())
    }

    /// Every record whose key starts with `prefix`, ordered by key.
    #[pyo3(signature = (prefix = None))]
    fn list(&self, py: Python<'_>, prefix: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<PyLeaseRecord>> {
        let prefix = prefix.map(|p| store_text("prefix", p)).transpose()?;
        let records = self.call(py, |store| store.list(prefix.as_deref().unwrap_or("")))?;
        Ok(records.into_iter().map(PyLeaseRecord).collect())
    }

    /// The store's clock as its decisions see it.
    fn now_ms(&self, py: Python<'_>) -> PyResult<i64> {
        self.call(py, |store| store.now_ms())
    }

    /// Closes the store; later calls raise LeaseStoreUnavailableError. Closing twice is fine.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.call(py, |store| store.close())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: &Bound<'_, PyAny>,
        _exc_value: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }
}

/// The lease store on one SQLite file, in the reference implementation's format, shared by
/// the processes of one host.
#[pyclass(frozen, extends = PyLeaseStore, module = "gotry_tenant_state", name = "SqliteLeaseStore")]
pub struct PySqliteLeaseStore {
    path: PathBuf,
}

#[pymethods]
impl PySqliteLeaseStore {
    /// Opens (creating it and its folders if needed) the store file. `now_ms` is the store's
    /// wall clock: a callable returning integer milliseconds, or a `ManualClock`.
    #[new]
    #[pyo3(signature = (path, now_ms = None, *, busy_timeout_ms = None))]
    fn new(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        now_ms: Option<&Bound<'_, PyAny>>,
        busy_timeout_ms: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<PySqliteLeaseStore>> {
        let path = path_arg("path", path)?;
        let clock = wall_clock(now_ms)?;
        let busy_timeout = busy_timeout_ms
            .map(|value| milliseconds("busy_timeout_ms", value))
            .transpose()?
            .unwrap_or(DEFAULT_BUSY_TIMEOUT);
        let options = SqliteOptions { clock, busy_timeout };
        // Opening may wait for another process's lock to create the schema.
        let store = py
            .detach(|| SqliteLeaseStore::open_with(&path, options))
            .map_err(CoreError)?;
        Ok(PyClassInitializer::from(PyLeaseStore {
            store: Arc::new(store),
        })
        .add_subclass(PySqliteLeaseStore { path }))
    }

    #[getter]
    fn path(&self) -> std::ffi::OsString {
        self.path.clone().into_os_string()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let path = self.path.clone().into_os_string().into_pyobject(py)?.repr()?;
        Ok(format!("SqliteLeaseStore({path})"))
    }
}

/// Opens the store a URL names (`sqlite:///abs/path.db`, `sqlite:rel/path.db`).
#[pyfunction]
pub fn open_lease_store(py: Python<'_>, url: &Bound<'_, PyAny>) -> PyResult<PyLeaseStore> {
    let url = store_text("url", url)?;
    let store = py.detach(|| open_store_url(&url)).map_err(CoreError)?;
    Ok(PyLeaseStore { store })
}
