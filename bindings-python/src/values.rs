//! The store's values as Python sees them: frozen, compared and hashed by value, printed
//! with every field, and picklable (a `LeaseHeldError` carries a record and must survive
//! being sent to another process).

use gotry_tenant_state::{HistoryEntry, LeaseGrant, LeaseOp, LeaseRecord};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

/// A Python `repr` of a string, so that a printed value reads back as Python.
pub fn quoted(py: Python<'_>, text: &str) -> PyResult<String> {
    Ok(PyString::new(py, text).repr()?.to_string())
}

/// A field that may be absent, printed as Python prints it: `None`.
pub fn or_none<T>(value: Option<T>, show: impl FnOnce(T) -> PyResult<String>) -> PyResult<String> {
    value.map_or_else(|| Ok("None".to_owned()), show)
}

/// The state of one tenant's lease.
#[pyclass(frozen, eq, hash, module = "gotry_tenant_state", name = "LeaseRecord")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PyLeaseRecord(pub LeaseRecord);

impl From<LeaseRecord> for PyLeaseRecord {
    fn from(record: LeaseRecord) -> PyLeaseRecord {
        PyLeaseRecord(record)
    }
}

#[pymethods]
impl PyLeaseRecord {
    #[new]
    #[pyo3(signature = (key, owner, epoch, lease_until_ms, forgotten_at_epoch = 0))]
    fn new(
        key: String,
        owner: String,
        epoch: i64,
        lease_until_ms: i64,
        forgotten_at_epoch: i64,
    ) -> PyLeaseRecord {
        PyLeaseRecord(LeaseRecord {
            key,
            owner,
            epoch,
            lease_until_ms,
            forgotten_at_epoch,
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
        ("key", "owner", "epoch", "lease_until_ms", "forgotten_at_epoch")
    }

    #[getter]
    fn key(&self) -> &str {
        &self.0.key
    }

    #[getter]
    fn owner(&self) -> &str {
        &self.0.owner
    }

    #[getter]
    fn epoch(&self) -> i64 {
        self.0.epoch
    }

    #[getter]
    fn lease_until_ms(&self) -> i64 {
        self.0.lease_until_ms
    }

    #[getter]
    fn forgotten_at_epoch(&self) -> i64 {
        self.0.forgotten_at_epoch
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let r = &self.0;
        Ok(format!(
            "LeaseRecord(key={}, owner={}, epoch={}, lease_until_ms={}, forgotten_at_epoch={})",
            quoted(py, &r.key)?,
            quoted(py, &r.owner)?,
            r.epoch,
            r.lease_until_ms,
            r.forgotten_at_epoch
        ))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let r = &slf.get().0;
        let args = (
            r.key.as_str(),
            r.owner.as_str(),
            r.epoch,
            r.lease_until_ms,
            r.forgotten_at_epoch,
        )
            .into_pyobject(slf.py())?;
        Ok((slf.get_type().into_any(), args))
    }
}

/// A granted acquire or renew: the record after it and the TTL it was granted for.
#[pyclass(frozen, eq, hash, module = "gotry_tenant_state", name = "LeaseGrant")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PyLeaseGrant(pub LeaseGrant);

#[pymethods]
impl PyLeaseGrant {
    #[new]
    fn new(record: PyRef<'_, PyLeaseRecord>, ttl_ms: i64) -> PyLeaseGrant {
        PyLeaseGrant(LeaseGrant {
            record: record.0.clone(),
            ttl_ms,
        })
    }

    #[classattr]
    fn __match_args__() -> (&'static str, &'static str) {
        ("record", "ttl_ms")
    }

    #[getter]
    fn record(&self) -> PyLeaseRecord {
        PyLeaseRecord(self.0.record.clone())
    }

    #[getter]
    fn ttl_ms(&self) -> i64 {
        self.0.ttl_ms
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "LeaseGrant(record={}, ttl_ms={})",
            self.record().__repr__(py)?,
            self.0.ttl_ms
        ))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let grant = slf.get();
        let args = (grant.record(), grant.0.ttl_ms).into_pyobject(slf.py())?;
        Ok((slf.get_type().into_any(), args))
    }
}

/// One granted operation in the store's log.
#[pyclass(frozen, eq, hash, module = "gotry_tenant_state", name = "HistoryEntry")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PyHistoryEntry(pub HistoryEntry);

#[pymethods]
impl PyHistoryEntry {
    #[new]
    fn new(key: String, op: &str, owner: String, epoch: i64, at_ms: i64) -> PyResult<PyHistoryEntry> {
        let op = LeaseOp::parse(op).ok_or_else(|| {
            PyValueError::new_err(format!(
                "op must be 'acquire', 'renew', 'release' or 'forget', got {op:?}"
            ))
        })?;
        Ok(PyHistoryEntry(HistoryEntry {
            key,
            op,
            owner,
            epoch,
            at_ms,
        }))
    }

    #[classattr]
    fn __match_args__() -> (
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
    ) {
        ("key", "op", "owner", "epoch", "at_ms")
    }

    #[getter]
    fn key(&self) -> &str {
        &self.0.key
    }

    #[getter]
    fn op(&self) -> &'static str {
        self.0.op.as_str()
    }

    #[getter]
    fn owner(&self) -> &str {
        &self.0.owner
    }

    #[getter]
    fn epoch(&self) -> i64 {
        self.0.epoch
    }

    #[getter]
    fn at_ms(&self) -> i64 {
        self.0.at_ms
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let e = &self.0;
        Ok(format!(
            "HistoryEntry(key={}, op={}, owner={}, epoch={}, at_ms={})",
            quoted(py, &e.key)?,
            quoted(py, e.op.as_str())?,
            quoted(py, &e.owner)?,
            e.epoch,
            e.at_ms
        ))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let e = &slf.get().0;
        let args =
            (e.key.as_str(), e.op.as_str(), e.owner.as_str(), e.epoch, e.at_ms).into_pyobject(slf.py())?;
        Ok((slf.get_type().into_any(), args))
    }
}
