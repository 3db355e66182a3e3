//! The lease keeper: one replica keeps many tenant leases renewed, a batch per store call.
//!
//! # The GIL
//!
//! The core calls the event handler on the keeper's thread, and `shutdown` and dropping the
//! keeper wait for a handler call in progress (that is what makes "never called after
//! shutdown returned" hold). The handler here calls Python, so it needs the GIL. A caller
//! that waited for the handler while holding the GIL would wait for ever; so every call that
//! may wait on the keeper or its store (`acquire`, `remove`, `tick`, `shutdown`, and dropping
//! the keeper) releases the GIL first. `get` and `len` only take a lock that no thread holds
//! while it waits for the GIL or for the store, so they keep it.
//!
//! # Callbacks
//!
//! `on_event` is called with the GIL held, on the keeper's thread (or on the thread that
//! called `tick`), one event at a time. An exception it raises is the host's bug, not a
//! reason to stop renewing every other lease: it goes to `sys.unraisablehook`, as an
//! exception in `__del__` does, and the keeper carries on. A callback that refers back to
//! its keeper makes a reference cycle that Python's collector can see and break: the keeper
//! reports its callback to the collector.
//!
//! # Interpreter exit
//!
//! On Python 3.11 a thread that takes the GIL once the interpreter is finalizing is ended
//! with `pthread_exit`, which cannot unwind through Rust frames and aborts the process. An
//! `atexit` hook, which runs before finalization starts, therefore shuts down every keeper
//! still alive, as `shutdown()` would: their leases are released, the threads stop, and no
//! callback runs afterwards.

use std::mem::ManuallyDrop;
use std::sync::Arc;

use gotry_tenant_state::keeper::{DEFAULT_MAX_BATCH, DEFAULT_RENEW_FRACTION};
use gotry_tenant_state::{
    EventHandler, KeeperEvent, KeeperEventKind, KeeperOptions, LeaseKeeper, ShutdownReport, TickReport,
};
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::PyTraverseError;

use crate::args::{count, integer, milliseconds, real, store_text};
use crate::callbacks::{HostCallable, Live};
use crate::clocks::monotonic_clock;
use crate::errors::{exception_object, exit_failures, CoreError};
use crate::lease::PyTenantLease;
use crate::store::PyLeaseStore;
use crate::values::{or_none, quoted};

/// The keepers that the exit hook shuts down.
static LIVE: Live<LeaseKeeper> = Live::new();

/// Shuts down every keeper still alive; registered with `atexit` when the module loads.
#[pyfunction]
pub fn _shutdown_keepers_at_exit(py: Python<'_>) {
    let alive = LIVE.take();
    py.detach(move || {
        for kept in alive {
            // Nobody is left to read the report: a lease not released runs out at its TTL.
            let _ = kept.shutdown(kept.default_shutdown_timeout());
        }
    });
}

/// Keeps many leases of one owner on one store renewed, a batch per store call, on a
/// thread of its own (or when `tick()` is called).
#[pyclass(frozen, weakref, module = "gotry_tenant_state", name = "LeaseKeeper")]
pub struct PyLeaseKeeper {
    /// Dropped by hand in `Drop`, without the GIL.
    kept: ManuallyDrop<Arc<LeaseKeeper>>,
    /// The host's `on_event`, shared with the core's handler.
    callback: Option<Arc<HostCallable>>,
}

impl Drop for PyLeaseKeeper {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once, and nothing reads the field after this line.
        let kept = unsafe { ManuallyDrop::take(&mut self.kept) };
        // The core's drop waits for a callback in progress, which may be waiting for the GIL.
        Python::attach(|py| py.detach(move || drop(kept)));
    }
}

impl PyLeaseKeeper {
    fn shutdown_report(
        &self,
        py: Python<'_>,
        timeout_ms: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ShutdownReport> {
        let timeout = match timeout_ms {
            Some(value) => milliseconds("timeout_ms", value)?,
            None => self.kept.default_shutdown_timeout(),
        };
        let keeper = &self.kept;
        Ok(py.detach(|| keeper.shutdown(timeout)))
    }
}

#[pymethods]
impl PyLeaseKeeper {
    /// Starts keeping leases for `replica_id` on `store`, each with `ttl_ms` and `margin_ms`.
    #[new]
    #[pyo3(signature = (
        *, store, replica_id, ttl_ms, margin_ms, renew_fraction = None, max_batch = None,
        on_event = None, clock = None, start_thread = true
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        store: &Bound<'_, PyLeaseStore>,
        replica_id: &Bound<'_, PyAny>,
        ttl_ms: &Bound<'_, PyAny>,
        margin_ms: &Bound<'_, PyAny>,
        renew_fraction: Option<&Bound<'_, PyAny>>,
        max_batch: Option<&Bound<'_, PyAny>>,
        on_event: Option<&Bound<'_, PyAny>>,
        clock: Option<&Bound<'_, PyAny>>,
        start_thread: bool,
    ) -> PyResult<PyLeaseKeeper> {
        let replica_id = store_text("replica_id", replica_id)?;
        let (ttl_ms, margin_ms) = (integer("ttl_ms", ttl_ms)?, integer("margin_ms", margin_ms)?);
        let callback = HostCallable::from_arg("on_event", "a callable taking a KeeperEvent", on_event)?;
        let mut options = KeeperOptions::new(store.get().shared(), replica_id, ttl_ms, margin_ms);
        options.clock = monotonic_clock(clock)?;
        if let Some(value) = renew_fraction {
            options.renew_fraction = real("renew_fraction", value)?;
        }
        if let Some(value) = max_batch {
            options.max_batch = count("max_batch", value)?;
        }
        if let Some(sink) = callback.clone() {
            let deliver = move |event: KeeperEvent| {
                sink.notify(|py| Ok(Bound::new(py, PyKeeperEvent::new(py, event))?.into_any()))
            };
            options.on_event = Some(Box::new(deliver) as EventHandler);
        }
        let keeper = if start_thread {
            LeaseKeeper::start(options)
        } else {
            LeaseKeeper::without_thread(options)
        }
        .map_err(CoreError)?;
        let kept = Arc::new(keeper);
        LIVE.add(&kept);
        Ok(PyLeaseKeeper {
            kept: ManuallyDrop::new(kept),
            callback,
        })
    }

    #[classattr]
    const DEFAULT_RENEW_FRACTION: f64 = DEFAULT_RENEW_FRACTION;

    #[classattr]
    const DEFAULT_MAX_BATCH: usize = DEFAULT_MAX_BATCH;

    #[getter]
    fn replica_id(&self) -> &str {
        self.kept.replica_id()
    }

    #[getter]
    fn ttl_ms(&self) -> i64 {
        self.kept.ttl_ms()
    }

    #[getter]
    fn margin_ms(&self) -> i64 {
        self.kept.margin_ms()
    }

    /// Acquires `key` and keeps it renewed until it is removed, lost or the keeper shuts
    /// down. The handle is the same write gate a `TenantLease.acquire` gives.
    fn acquire(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<PyTenantLease> {
        let key = store_text("key", key)?;
        let keeper = &self.kept;
        let lease = py.detach(|| keeper.acquire(&key)).map_err(CoreError)?;
        Ok(PyTenantLease::from(lease))
    }

    /// Stops keeping `key` and releases it; False when it was not kept.
    fn remove(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = store_text("key", key)?;
        let keeper = &self.kept;
        Ok(py.detach(|| keeper.remove(&key)).map_err(CoreError)?)
    }

    fn get(&self, key: &Bound<'_, PyAny>) -> PyResult<Option<PyTenantLease>> {
        let key = store_text("key", key)?;
        Ok(self.kept.get(&key).map(PyTenantLease::from))
    }

    fn __len__(&self) -> usize {
        self.kept.len()
    }

    /// Runs one round if a lease is due; the round's events reach `on_event` on this thread
    /// before it returns.
    fn tick(&self, py: Python<'_>) -> PyResult<PyTickReport> {
        let keeper = &self.kept;
        let report = py.detach(|| keeper.tick()).map_err(CoreError)?;
        Ok(PyTickReport(report))
    }

    /// Stops renewing and releases every kept lease, starting no release after
    /// `timeout_ms` (one TTL by default).
    #[pyo3(signature = (timeout_ms = None))]
    fn shutdown(&self, py: Python<'_>, timeout_ms: Option<&Bound<'_, PyAny>>) -> PyResult<PyShutdownReport> {
        let report = self.shutdown_report(py, timeout_ms)?;
        PyShutdownReport::new(py, report)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Shuts down, also when the block raised. Releases that failed (their gates are
    /// closed; the leases run out at their TTL) are raised as an exception group after a
    /// clean block, and added as notes to the block's own exception otherwise, as a
    /// `TenantLease` does with its one release.
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: &Bound<'_, PyAny>,
        exc_value: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let report = self.shutdown_report(py, None)?;
        let total = report.failed.len();
        let failures = report
            .failed
            .into_iter()
            .map(|(key, error)| {
                let note = format!("releasing the kept lease {key} on exit failed; it runs out at its TTL");
                (note, error)
            })
            .collect();
        let summary = format!("the keeper could not release {total} of its leases on exit");
        exit_failures(py, exc_value, failures, summary)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "LeaseKeeper(replica_id={}, ttl_ms={}, margin_ms={}, leases={})",
            quoted(py, self.kept.replica_id())?,
            self.kept.ttl_ms(),
            self.kept.margin_ms(),
            self.kept.len()
        ))
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.callback
            .iter()
            .try_for_each(|callback| callback.traverse(&visit))
    }

    fn __clear__(&self) {
        // The keeper is garbage: nobody is left to tell its events to.
        self.callback.iter().for_each(|callback| callback.clear());
    }
}

/// Something that happened to the kept leases without the host asking.
#[pyclass(frozen, module = "gotry_tenant_state", name = "KeeperEvent")]
pub struct PyKeeperEvent {
    kind: KeeperEventKind,
    key: Option<String>,
    epoch: Option<i64>,
    error: Option<Py<PyAny>>,
    leases: Option<usize>,
}

impl PyKeeperEvent {
    fn new(py: Python<'_>, event: KeeperEvent) -> PyKeeperEvent {
        let (kind, key, epoch) = (event.kind(), event.key().map(str::to_owned), event.epoch());
        let (error, leases) = match event {
            KeeperEvent::Lost { error, .. } => (Some(error), None),
            KeeperEvent::RenewFailed { error, leases } => (Some(error), Some(leases)),
            _ => (None, None),
        };
        PyKeeperEvent {
            kind,
            key,
            epoch,
            error: error.map(|error| exception_object(py, error).unbind()),
            leases,
        }
    }
}

#[pymethods]
impl PyKeeperEvent {
    #[classattr]
    fn __match_args__() -> (&'static str, &'static str, &'static str, &'static str) {
        ("kind", "key", "epoch", "error")
    }

    /// `"lost"`, `"fenced_locally"`, `"resumed"` or `"renew_failed"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind.as_str()
    }

    /// The lease's key; None for a failure that concerns many leases.
    #[getter]
    fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    #[getter]
    fn epoch(&self) -> Option<i64> {
        self.epoch
    }

    /// Why: the refusal of a lost lease, the store's failure of a failed round.
    #[getter]
    fn error(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.error.as_ref().map(|error| error.clone_ref(py))
    }

    /// For `renew_failed`: how many leases will be tried again.
    #[getter]
    fn leases(&self) -> Option<usize> {
        self.leases
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let key = or_none(self.key.as_deref(), |key| quoted(py, key))?;
        let error = or_none(self.error.as_ref(), |error| {
            Ok(error.bind(py).repr()?.to_string())
        })?;
        let epoch = or_none(self.epoch, |epoch| Ok(epoch.to_string()))?;
        let leases = self
            .leases
            .map_or_else(String::new, |leases| format!(", leases={leases}"));
        Ok(format!(
            "KeeperEvent(kind='{}', key={key}, epoch={epoch}, error={error}{leases})",
            self.kind.as_str()
        ))
    }
}

/// What one `tick()` did.
#[pyclass(frozen, eq, module = "gotry_tenant_state", name = "TickReport")]
#[derive(PartialEq)]
pub struct PyTickReport(pub(crate) TickReport);

#[pymethods]
impl PyTickReport {
    /// Store calls made.
    #[getter]
    fn batches(&self) -> usize {
        self.0.batches
    }

    #[getter]
    fn renewed(&self) -> usize {
        self.0.renewed
    }

    #[getter]
    fn lost(&self) -> usize {
        self.0.lost
    }

    /// Due leases not renewed, to be tried again.
    #[getter]
    fn failed(&self) -> usize {
        self.0.failed
    }

    /// When the next round is due on the keeper's clock; None when nothing is kept.
    #[getter]
    fn next_due_ms(&self) -> Option<f64> {
        self.0.next_due_ms
    }

    fn __repr__(&self) -> String {
        let r = &self.0;
        let next = r
            .next_due_ms
            .map_or_else(|| "None".to_owned(), |ms| format!("{ms:?}"));
        format!(
            "TickReport(batches={}, renewed={}, lost={}, failed={}, next_due_ms={next})",
            r.batches, r.renewed, r.lost, r.failed
        )
    }
}

/// What `shutdown()` did with each kept lease, every group ordered by key.
#[pyclass(frozen, module = "gotry_tenant_state", name = "ShutdownReport")]
pub struct PyShutdownReport {
    released: Py<PyTuple>,
    failed: Py<PyTuple>,
    timed_out: Py<PyTuple>,
}

impl PyShutdownReport {
    pub(crate) fn new(py: Python<'_>, report: ShutdownReport) -> PyResult<PyShutdownReport> {
        let failed = report
            .failed
            .into_iter()
            .map(|(key, error)| (key, exception_object(py, error)));
        Ok(PyShutdownReport {
            released: PyTuple::new(py, report.released)?.unbind(),
            failed: PyTuple::new(py, failed)?.unbind(),
            timed_out: PyTuple::new(py, report.timed_out)?.unbind(),
        })
    }
}

#[pymethods]
impl PyShutdownReport {
    /// Keys released in the store: the next owner may start at once.
    #[getter]
    fn released(&self, py: Python<'_>) -> Py<PyTuple> {
        self.released.clone_ref(py)
    }

    /// `(key, exception)` of leases whose gate is closed but whose store could not be told:
    /// they run out at their TTL.
    #[getter]
    fn failed(&self, py: Python<'_>) -> Py<PyTuple> {
        self.failed.clone_ref(py)
    }

    /// Keys not reached before the timeout: no longer renewed, their gates close at their
    /// fences and the store lets them run out.
    #[getter]
    fn timed_out(&self, py: Python<'_>) -> Py<PyTuple> {
        self.timed_out.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "ShutdownReport(released={}, failed={}, timed_out={})",
            self.released.bind(py).repr()?,
            self.failed.bind(py).repr()?,
            self.timed_out.bind(py).repr()?
        ))
    }
}
