//! Durable stores, where a tenant's copies outlive the replica that wrote them. Python only
//! opens them and hands them to `EpochCopies`: every rule about their objects is the core's.
//! Opening may create folders and flush them, or reach a server, so it runs without the
//! interpreter lock.

use std::path::PathBuf;
use std::sync::Arc;

use gotry_tenant_state::{open_durable_store as open_store_url, DirectoryDurableStore, DurableStore};
use pyo3::prelude::*;

use crate::args::{path_arg, store_text};
use crate::errors::CoreError;
use crate::values::quoted;

/// Any durable store of the core. Instances come from `open_durable_store(url)` or from a
/// subclass's constructor; they are safe to share between threads and between any number
/// of `EpochCopies`.
#[pyclass(frozen, subclass, module = "gotry_tenant_state", name = "DurableStore")]
pub struct PyDurableStore {
    store: Arc<dyn DurableStore>,
}

impl PyDurableStore {
    /// The core store, for the copies that keep it.
    pub fn shared(&self) -> Arc<dyn DurableStore> {
        Arc::clone(&self.store)
    }
}

#[pymethods]
impl PyDurableStore {
    /// Where the store is, as a URL without any credential: safe to log.
    #[getter]
    fn location(&self) -> String {
        self.store.location()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let location = quoted(py, &self.store.location())?;
        Ok(format!("DurableStore({location})"))
    }
}

/// The durable store in one folder, on a local disk or a volume that replicas share.
#[pyclass(frozen, extends = PyDurableStore, module = "gotry_tenant_state", name = "DirectoryDurableStore")]
pub struct PyDirectoryDurableStore {
    path: PathBuf,
}

#[pymethods]
impl PyDirectoryDurableStore {
    /// Opens the store in the folder `path`, creating it (and its parents) when missing.
    #[new]
    fn new(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<PyClassInitializer<PyDirectoryDurableStore>> {
        let path = path_arg("path", path)?;
        let store = py
            .detach(|| DirectoryDurableStore::open(&path))
            .map_err(CoreError)?;
        let path = store.root().to_path_buf();
        Ok(PyClassInitializer::from(PyDurableStore {
            store: Arc::new(store),
        })
        .add_subclass(PyDirectoryDurableStore { path }))
    }

    /// The store's folder, made absolute.
    #[getter]
    fn path(&self) -> std::ffi::OsString {
        self.path.clone().into_os_string()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let path = self.path.clone().into_os_string().into_pyobject(py)?.repr()?;
        Ok(format!("DirectoryDurableStore({path})"))
    }
}

/// Opens the store a URL names (`file:///abs/dir`, `file:rel/dir`,
/// `s3://bucket/prefix?endpoint=...&region=...`).
#[pyfunction]
pub fn open_durable_store(py: Python<'_>, url: &Bound<'_, PyAny>) -> PyResult<PyDurableStore> {
    let url = store_text("url", url)?;
    let store = py.detach(|| open_store_url(&url)).map_err(CoreError)?;
    Ok(PyDurableStore { store })
}
