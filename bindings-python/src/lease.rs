//! The holder's side of a tenant lease.
//!
//! `renew` and `release` of one holder settle in the order they were called. Each takes its
//! place in the holder's queue while it still holds the interpreter lock, that is at the
//! moment Python called it, and only then releases the lock to wait for its turn and for
//! the store. Two threads that call `release()` and then `renew()` therefore get "released"
//! and then FENCED(lease_released), whichever of them the operating system wakes first.

use std::sync::Arc;

use gotry_tenant_state::{LeaseOptions, TenantLease};
use pyo3::prelude::*;

use crate::args::{integer, store_text};
use crate::clocks::monotonic_clock;
use crate::errors::CoreError;
use crate::store::PyLeaseStore;
use crate::values::{quoted, PyLeaseRecord};

/// A held lease; safe to share between threads (the write gate may be checked from any
/// thread while another renews). The core lease is shared because a keeper holds the same
/// one: the host's handle and the keeper's renewals then act on one gate.
#[pyclass(frozen, module = "gotry_tenant_state", name = "TenantLease")]
pub struct PyTenantLease {
    lease: Arc<TenantLease>,
}

impl PyTenantLease {
    /// The core lease, for a call that runs without the interpreter lock.
    pub fn shared(&self) -> Arc<TenantLease> {
        Arc::clone(&self.lease)
    }
}

impl From<Arc<TenantLease>> for PyTenantLease {
    fn from(lease: Arc<TenantLease>) -> PyTenantLease {
        PyTenantLease { lease }
    }
}

#[pymethods]
impl PyTenantLease {
    /// Acquires `key` for `replica_id` in `store` and starts holding it; the local fence is
    /// `clock` time before the request + the granted TTL - `margin_ms`.
    #[staticmethod]
    #[pyo3(signature = (*, key, replica_id, store, ttl_ms, margin_ms, clock = None))]
    fn acquire(
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        replica_id: &Bound<'_, PyAny>,
        store: &Bound<'_, PyLeaseStore>,
        ttl_ms: &Bound<'_, PyAny>,
        margin_ms: &Bound<'_, PyAny>,
        clock: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTenantLease> {
        let options = LeaseOptions {
            key: store_text("key", key)?,
            replica_id: store_text("replica_id", replica_id)?,
            store: store.get().shared(),
            ttl_ms: integer("ttl_ms", ttl_ms)?,
            margin_ms: integer("margin_ms", margin_ms)?,
            clock: monotonic_clock(clock)?,
        };
        let lease = py.detach(|| TenantLease::acquire(options)).map_err(CoreError)?;
        Ok(PyTenantLease::from(Arc::new(lease)))
    }

    #[getter]
    fn key(&self) -> &str {
        self.lease.key()
    }

    #[getter]
    fn replica_id(&self) -> &str {
        self.lease.replica_id()
    }

    #[getter]
    fn epoch(&self) -> i64 {
        self.lease.epoch()
    }

    /// Durable copies up to this epoch are dead; fixed for the whole tenure.
    #[getter]
    fn forgotten_at_epoch(&self) -> i64 {
        self.lease.forgotten_at_epoch()
    }

    #[getter]
    fn ttl_ms(&self) -> i64 {
        self.lease.ttl_ms()
    }

    #[getter]
    fn margin_ms(&self) -> i64 {
        self.lease.margin_ms()
    }

    /// The synchronous write gate. It keeps the interpreter lock: it only reads the clock,
    /// and a Python clock would need the lock back at once.
    fn assert_held(&self) -> PyResult<()> {
        Ok(self.lease.assert_held().map_err(CoreError)?)
    }

    fn is_held(&self) -> bool {
        self.lease.is_held()
    }

    fn remaining_ms(&self) -> PyResult<f64> {
        Ok(self.lease.remaining_ms().map_err(CoreError)?)
    }

    fn renew(&self, py: Python<'_>) -> PyResult<()> {
        let turn = self.lease.take_turn();
        Ok(py.detach(|| self.lease.renew_in_turn(turn)).map_err(CoreError)?)
    }

    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let turn = self.lease.take_turn();
        Ok(py
            .detach(|| self.lease.release_in_turn(turn))
            .map_err(CoreError)?)
    }

    fn mark_forgotten(&self, py: Python<'_>) -> PyResult<PyLeaseRecord> {
        let record = py.detach(|| self.lease.mark_forgotten()).map_err(CoreError)?;
        Ok(PyLeaseRecord(record))
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Releases the lease, also when the block raised. If the block raised and the release
    /// fails too, the block's exception goes on (it is the one the caller must see) and
    /// carries the release failure as a note; otherwise the release failure is raised.
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: &Bound<'_, PyAny>,
        exc_value: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let Err(failure) = self.release(py) else {
            return Ok(false);
        };
        if exc_value.is_none() {
            return Err(failure);
        }
        let note = format!(
            "releasing the lease {} on exit failed too: {}",
            self.lease.key(),
            failure.value(py).str()?
        );
        exc_value.call_method1("add_note", (note,))?;
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "TenantLease(key={}, replica_id={}, epoch={}, held={})",
            quoted(py, self.lease.key())?,
            quoted(py, self.lease.replica_id())?,
            self.lease.epoch(),
            if self.lease.is_held() { "True" } else { "False" }
        ))
    }
}
