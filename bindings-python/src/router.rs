//! The tenant router: one replica serves many tenants (lease, write gate and copies of each).
//!
//! Every rule is the core's (`gotry_tenant_state::router`); this is its Python face.
//!
//! # The GIL
//!
//! `open` (acquire, restore), `handoff` (drain, final copy, release), `close`, `tick`,
//! `status` and both ends of a `run` (entering the call, and finishing it: the after-check
//! and, in strict mode, the copy) release the GIL: they wait for the stores, for the router's lock, or for a
//! callback in progress on another thread, and that callback may be waiting for the GIL.
//! The call itself, `fn(handle)`, runs with the GIL on the caller's thread. Dropping the
//! router releases it too (the core joins its copier thread, which may be in `snapshot`).
//!
//! # Callbacks
//!
//! `verify` and `snapshot` are host calls (their exception fails the open or the copy and
//! comes out as itself: on `open`, `handoff`, a strict `run`, or as the `error` of a
//! `copy_failed` event when the background copier met it). `on_event` is a notification,
//! called with the GIL on whichever thread the core tells it from (the keeper's, the
//! copier's, or the one that ended a call or handed a tenant off); an exception it raises goes
//! to `sys.unraisablehook` and the router carries on. See `callbacks`.
//!
//! # Interpreter exit
//!
//! The router's keeper and copier threads call Python. As for keepers, an `atexit` hook closes
//! every router still alive before the interpreter finalizes (its tenants handed off, each
//! waiting at most one TTL for its calls), so no thread calls into a finalizing interpreter.

use std::mem::ManuallyDrop;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gotry_tenant_state::router::{RouterEventHandler, SharedFoldCheck};
use gotry_tenant_state::{
    CloseReport, CopyPolicy, Durability, Error, RouterEvent, RouterOptions, RouterTickReport, TenantHandle,
    TenantRouter, TenantStatus,
};
use pyo3::exceptions::PyTypeError;
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};
use pyo3::PyTraverseError;

use crate::args::{count, id_text, integer, milliseconds, one_of, path_arg, store_text};
use crate::callbacks::{HostCallable, Live};
use crate::clocks::monotonic_clock;
use crate::copies::{copy_id_repr, fold_check, host_snapshot, PyCopyId, SNAPSHOT_SHAPE, VERIFY_SHAPE};
use crate::durable::PyDurableStore;
use crate::errors::{exception_object, exit_failures, CoreError};
use crate::keeper::{PyShutdownReport, PyTickReport};
use crate::lease::PyTenantLease;
use crate::store::PyLeaseStore;
use crate::values::{or_none, quoted};

/// A router and what Python asks about it that the core does not repeat.
struct Routed {
    router: TenantRouter,
    replica_id: String,
    ttl_ms: i64,
    margin_ms: i64,
}

/// The routers that the exit hook closes.
static LIVE: Live<Routed> = Live::new();

/// Closes every router still alive; registered with `atexit` when the module loads.
#[pyfunction]
pub fn _close_routers_at_exit(py: Python<'_>) {
    let alive = LIVE.take();
    py.detach(move || {
        for routed in alive {
            // Nobody is left to read the report: a lease not released runs out at its TTL.
            let _ = routed.router.close(routed.router.default_handoff_timeout());
        }
    });
}

/// The host's callbacks, kept here too so that the collector can see them.
struct Hooks {
    verify: Option<Arc<HostCallable>>,
    snapshot: Option<Arc<HostCallable>>,
    on_event: Option<Arc<HostCallable>>,
}

impl Hooks {
    fn each(&self) -> impl Iterator<Item = &Arc<HostCallable>> {
        [&self.verify, &self.snapshot, &self.on_event]
            .into_iter()
            .flatten()
    }
}

/// The router's events as plain values, taken apart without the GIL.
struct EventParts {
    kind: &'static str,
    key: String,
    epoch: i64,
    error: Option<Error>,
    /// `copied`: the copy's sequence number and the bytes it uploaded.
    copied: Option<(u64, u64)>,
}

impl EventParts {
    fn of(event: RouterEvent) -> Option<EventParts> {
        let kind = event.kind().as_str();
        let (key, epoch, error, copied) = match event {
            RouterEvent::Lost { key, epoch }
            | RouterEvent::Closed { key, epoch }
            | RouterEvent::Draining { key, epoch } => (key, epoch, None, None),
            RouterEvent::CopyFailed { key, epoch, error } => (key, epoch, Some(error), None),
            RouterEvent::Copied {
                key,
                copy,
                bytes_uploaded,
            } => (key, copy.epoch, None, Some((copy.seq, bytes_uploaded))),
            // A kind the core added after this module was built: nothing to say it with.
            _ => return None,
        };
        Some(EventParts {
            kind,
            key,
            epoch,
            error,
            copied,
        })
    }
}

/// Serves many tenants from one replica.
#[pyclass(frozen, weakref, module = "gotry_tenant_state", name = "TenantRouter")]
pub struct PyTenantRouter {
    /// Dropped by hand in `Drop`, without the GIL.
    routed: ManuallyDrop<Arc<Routed>>,
    hooks: Hooks,
}

impl Drop for PyTenantRouter {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once, and nothing reads the field after this line.
        let routed = unsafe { ManuallyDrop::take(&mut self.routed) };
        // The core's drop joins the copier, which may be waiting for the GIL in `snapshot`.
        Python::attach(|py| py.detach(move || drop(routed)));
    }
}

impl PyTenantRouter {
    fn timeout(&self, timeout_ms: Option<&Bound<'_, PyAny>>) -> PyResult<Duration> {
        match timeout_ms {
            Some(value) if !value.is_none() => Ok(milliseconds("timeout_ms", value)?),
            _ => Ok(self.routed.router.default_handoff_timeout()),
        }
    }

    fn close_report(&self, py: Python<'_>, timeout_ms: Option<&Bound<'_, PyAny>>) -> PyResult<CloseReport> {
        let timeout = self.timeout(timeout_ms)?;
        let router = &self.routed.router;
        Ok(py.detach(|| router.close(timeout)))
    }
}

#[pymethods]
impl PyTenantRouter {
    #[new]
    #[pyo3(signature = (
        lease_store, durable_store, state_root, replica_id, ttl_ms, margin_ms, *,
        capacity = None, copy_interval_ms = None, durability = None, verify = None,
        snapshot = None, on_event = None, clock = None, start_thread = true, keep_copies = None,
        tenant_metrics = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        lease_store: &Bound<'_, PyLeaseStore>,
        durable_store: &Bound<'_, PyDurableStore>,
        state_root: &Bound<'_, PyAny>,
        replica_id: &Bound<'_, PyAny>,
        ttl_ms: &Bound<'_, PyAny>,
        margin_ms: &Bound<'_, PyAny>,
        capacity: Option<&Bound<'_, PyAny>>,
        copy_interval_ms: Option<&Bound<'_, PyAny>>,
        durability: Option<&Bound<'_, PyAny>>,
        verify: Option<&Bound<'_, PyAny>>,
        snapshot: Option<&Bound<'_, PyAny>>,
        on_event: Option<&Bound<'_, PyAny>>,
        clock: Option<&Bound<'_, PyAny>>,
        start_thread: bool,
        keep_copies: Option<&Bound<'_, PyAny>>,
        tenant_metrics: Option<bool>,
    ) -> PyResult<PyTenantRouter> {
        let state_root = path_arg("state_root", state_root)?;
        let replica_id = store_text("replica_id", replica_id)?;
        let (ttl_ms, margin_ms) = (integer("ttl_ms", ttl_ms)?, integer("margin_ms", margin_ms)?);
        let hooks = Hooks {
            verify: HostCallable::from_arg("verify", VERIFY_SHAPE, verify)?,
            snapshot: HostCallable::from_arg("snapshot", SNAPSHOT_SHAPE, snapshot)?,
            on_event: HostCallable::from_arg("on_event", "a callable taking a RouterEvent", on_event)?,
        };
        let mut options = RouterOptions::new(
            lease_store.get().shared(),
            durable_store.get().shared(),
            state_root,
            replica_id.clone(),
            ttl_ms,
            margin_ms,
        );
        options.capacity = capacity
            .filter(|value| !value.is_none())
            .map(|value| count("capacity", value))
            .transpose()?;
        let mut policy = CopyPolicy::default();
        if let Some(value) = copy_interval_ms.filter(|value| !value.is_none()) {
            policy.interval = milliseconds("copy_interval_ms", value)?;
        }
        if let Some(value) = durability.filter(|value| !value.is_none()) {
            policy.durability = one_of("durability", value, &Durability::ALL, Durability::as_str)?;
        }
        options.copy_policy = policy;
        options.clock = monotonic_clock(clock)?;
        options.without_thread = !start_thread;
        if let Some(value) = keep_copies.filter(|value| !value.is_none()) {
            options.keep_copies = count("keep_copies", value)?;
        }
        // None: the core's default (off).
        if let Some(on) = tenant_metrics {
            options.tenant_metrics = on;
        }
        options.verify = hooks
            .verify
            .clone()
            .map(|verify| Arc::new(move |path: &Path| fold_check(&verify, path)) as SharedFoldCheck);
        options.snapshot = hooks.snapshot.clone().map(host_snapshot);
        options.on_event = hooks.on_event.clone().map(|sink| {
            Arc::new(move |event: RouterEvent| {
                let Some(parts) = EventParts::of(event) else {
                    return;
                };
                sink.notify(|py| Ok(Bound::new(py, PyRouterEvent::new(py, parts))?.into_any()));
            }) as RouterEventHandler
        });
        let router = TenantRouter::start(options).map_err(CoreError)?;
        let routed = Arc::new(Routed {
            router,
            replica_id,
            ttl_ms,
            margin_ms,
        });
        LIVE.add(&routed);
        Ok(PyTenantRouter {
            routed: ManuallyDrop::new(routed),
            hooks,
        })
    }

    /// The most tenants this replica serves at once.
    #[getter]
    fn capacity(&self) -> usize {
        self.routed.router.capacity()
    }

    #[getter]
    fn replica_id(&self) -> &str {
        &self.routed.replica_id
    }

    #[getter]
    fn ttl_ms(&self) -> i64 {
        self.routed.ttl_ms
    }

    #[getter]
    fn margin_ms(&self) -> i64 {
        self.routed.margin_ms
    }

    /// Serves the tenant `tenant` of `organization`: acquires its lease and restores its
    /// newest valid copy into its root before any call can run. The same handle while it is
    /// served.
    fn open(
        &self,
        py: Python<'_>,
        organization: &Bound<'_, PyAny>,
        tenant: &Bound<'_, PyAny>,
    ) -> PyResult<PyTenantHandle> {
        let organization = id_text("organization id", organization)?.to_owned();
        let tenant = id_text("ledger tenant id", tenant)?.to_owned();
        let router = &self.routed.router;
        let handle = py
            .detach(|| router.open(&organization, &tenant))
            .map_err(CoreError)?;
        Ok(PyTenantHandle(handle))
    }

    /// Runs `call(handle)` as one call of the served tenant `key`: counted in flight, the
    /// write gate checked before and after it. Its return value comes back; an exception it
    /// raises ends the call unacknowledged (nothing to copy for it) and propagates.
    fn run(&self, py: Python<'_>, key: &Bound<'_, PyAny>, call: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let key = store_text("key", key)?;
        if !call.is_callable() {
            return Err(PyTypeError::new_err(format!(
                "run needs a callable taking a TenantHandle, got {}",
                call.get_type().name()?
            )));
        }
        let router = &self.routed.router;
        let started = py.detach(|| router.begin(&key)).map_err(CoreError)?;
        let handle = PyTenantHandle(Arc::clone(started.handle()));
        match call.call1((handle,)) {
            Ok(value) => {
                py.detach(move || started.finish()).map_err(CoreError)?;
                Ok(value.unbind())
            }
            Err(raised) => {
                // Leaving may tell `on_event` that a lost tenant's last call ended.
                py.detach(move || drop(started));
                Err(raised)
            }
        }
    }

    /// Hands the tenant `key` off: refuses new calls (TenantDrainingError), waits at most
    /// `timeout_ms` (one TTL by default) for the running ones, takes a final copy and
    /// releases the lease. DrainTimeoutError leaves it serving.
    #[pyo3(signature = (key, timeout_ms = None))]
    fn handoff(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        timeout_ms: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let key = store_text("key", key)?;
        let timeout = self.timeout(timeout_ms)?;
        let router = &self.routed.router;
        Ok(py.detach(|| router.handoff(&key, timeout)).map_err(CoreError)?)
    }

    /// Hands every tenant off (each waiting at most `timeout_ms`, one TTL by default), stops
    /// the copier and the keeper; every later `open` is RouterClosedError.
    #[pyo3(signature = (timeout_ms = None))]
    fn close(&self, py: Python<'_>, timeout_ms: Option<&Bound<'_, PyAny>>) -> PyResult<PyCloseReport> {
        let report = self.close_report(py, timeout_ms)?;
        PyCloseReport::new(py, report)
    }

    /// Runs one round on the router's clock: the keeper's renewals that are due, then the
    /// background copies that are due; the round's events reach `on_event` on this thread
    /// before it returns.
    fn tick(&self, py: Python<'_>) -> PyResult<PyRouterTickReport> {
        let router = &self.routed.router;
        let report = py.detach(|| router.tick()).map_err(CoreError)?;
        Ok(PyRouterTickReport(report))
    }

    /// Every tenant this replica knows, ordered by key.
    fn status(&self, py: Python<'_>) -> PyResult<Vec<PyTenantStatus>> {
        let router = &self.routed.router;
        let all = py.detach(|| router.status()).map_err(CoreError)?;
        Ok(all.into_iter().map(PyTenantStatus).collect())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes with the default timeout (one TTL), also when the block raised. Hand-offs and
    /// releases that failed are raised as an exception group after a clean block, and added
    /// as notes to the block's own exception otherwise.
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: &Bound<'_, PyAny>,
        exc_value: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let report = self.close_report(py, None)?;
        let handoffs = report.failed.into_iter().map(|(key, error)| {
            let note = format!("handing {key} off on exit failed; its lease runs out at its TTL");
            (note, error)
        });
        let releases = report.keeper.failed.into_iter().map(|(key, error)| {
            let note = format!("releasing {key} on exit failed; it runs out at its TTL");
            (note, error)
        });
        let failures: Vec<(String, Error)> = handoffs.chain(releases).collect();
        let summary = format!(
            "the router could not hand {} of its tenants off on exit",
            failures.len()
        );
        exit_failures(py, exc_value, failures, summary)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let routed = &self.routed;
        Ok(format!(
            "TenantRouter(replica_id={}, ttl_ms={}, margin_ms={}, capacity={})",
            quoted(py, &routed.replica_id)?,
            routed.ttl_ms,
            routed.margin_ms,
            routed.router.capacity()
        ))
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.hooks.each().try_for_each(|hook| hook.traverse(&visit))
    }

    fn __clear__(&self) {
        // The router is garbage: nobody is left to tell, and nothing to check with.
        self.hooks.each().for_each(|hook| hook.clear());
    }
}

/// A served tenant: where its files are, and the lease that lets this replica write them.
#[pyclass(frozen, module = "gotry_tenant_state", name = "TenantHandle")]
pub struct PyTenantHandle(Arc<TenantHandle>);

#[pymethods]
impl PyTenantHandle {
    /// `<organization>/<ledger tenant>`.
    #[getter]
    fn key(&self) -> &str {
        &self.0.key
    }

    /// The tenant root, under the router's state root.
    #[getter]
    fn root(&self) -> std::ffi::OsString {
        self.0.root.clone().into_os_string()
    }

    #[getter]
    fn epoch(&self) -> i64 {
        self.0.epoch()
    }

    /// The copy the tenure started from; None for an empty start.
    #[getter]
    fn restored_from(&self) -> Option<PyCopyId> {
        self.0.restored_from.map(PyCopyId::from)
    }

    /// The tenure's lease: `assert_held()` is the write gate inside a call.
    #[getter]
    fn lease(&self) -> PyTenantLease {
        PyTenantLease::from(Arc::clone(&self.0.lease))
    }

    /// One tenure is one handle: equal when they are the same tenure of the same router.
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyTenantHandle>()
            .is_ok_and(|other| Arc::ptr_eq(&self.0, &other.get().0))
    }

    fn __hash__(&self) -> isize {
        Arc::as_ptr(&self.0) as isize
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "TenantHandle(key={}, root={}, epoch={}, restored_from={})",
            quoted(py, &self.0.key)?,
            self.root().into_pyobject(py)?.repr()?,
            self.0.epoch(),
            copy_id_repr(self.0.restored_from)
        ))
    }
}

/// One tenant as operators and metrics see it.
#[pyclass(frozen, eq, module = "gotry_tenant_state", name = "TenantStatus")]
#[derive(PartialEq)]
pub struct PyTenantStatus(TenantStatus);

#[pymethods]
impl PyTenantStatus {
    #[getter]
    fn key(&self) -> &str {
        &self.0.key
    }

    /// `"opening"`, `"serving"`, `"draining"`, `"lost"` or `"closed"`.
    #[getter]
    fn state(&self) -> &'static str {
        self.0.state.as_str()
    }

    /// The tenure's epoch; 0 while it is still opening.
    #[getter]
    fn epoch(&self) -> i64 {
        self.0.epoch
    }

    #[getter]
    fn in_flight(&self) -> u64 {
        self.0.in_flight
    }

    /// The newest copy of the tenure (or the one it was restored from); None before any.
    #[getter]
    fn last_copy(&self) -> Option<PyCopyId> {
        self.0.last_copy.map(PyCopyId::from)
    }

    /// Calls acknowledged since the last good copy began.
    #[getter]
    fn writes_since_copy(&self) -> u64 {
        self.0.writes_since_copy
    }

    /// Milliseconds since the last good copy began (since the tenant opened, before one).
    #[getter]
    fn lag_ms(&self) -> u64 {
        self.0.lag_ms
    }

    /// Why the last copy failed (`CODE: message`); None after a good one.
    #[getter]
    fn last_copy_error(&self) -> Option<&str> {
        self.0.last_copy_error.as_deref()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let s = &self.0;
        let last_copy = copy_id_repr(s.last_copy);
        let error = or_none(s.last_copy_error.as_deref(), |error| quoted(py, error))?;
        Ok(format!(
            "TenantStatus(key={}, state='{}', epoch={}, in_flight={}, last_copy={last_copy}, \
             writes_since_copy={}, lag_ms={}, last_copy_error={error})",
            quoted(py, &s.key)?,
            s.state.as_str(),
            s.epoch,
            s.in_flight,
            s.writes_since_copy,
            s.lag_ms
        ))
    }
}

/// Something that happened to a served tenant without the host asking.
#[pyclass(frozen, module = "gotry_tenant_state", name = "RouterEvent")]
pub struct PyRouterEvent {
    kind: &'static str,
    key: String,
    epoch: i64,
    error: Option<Py<PyAny>>,
    copied: Option<(u64, u64)>,
}

impl PyRouterEvent {
    fn new(py: Python<'_>, parts: EventParts) -> PyRouterEvent {
        PyRouterEvent {
            kind: parts.kind,
            key: parts.key,
            epoch: parts.epoch,
            error: parts.error.map(|error| exception_object(py, error).unbind()),
            copied: parts.copied,
        }
    }
}

#[pymethods]
impl PyRouterEvent {
    #[classattr]
    fn __match_args__() -> (&'static str, &'static str, &'static str, &'static str) {
        ("kind", "key", "epoch", "error")
    }

    /// `"lost"`, `"closed"`, `"copy_failed"`, `"draining"` or `"copied"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind
    }

    #[getter]
    fn key(&self) -> &str {
        &self.key
    }

    #[getter]
    fn epoch(&self) -> i64 {
        self.epoch
    }

    /// For `copy_failed`: why, as the exception the copy failed with.
    #[getter]
    fn error(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.error.as_ref().map(|error| error.clone_ref(py))
    }

    /// For `copied`: the copy's sequence number in its epoch.
    #[getter]
    fn seq(&self) -> Option<u64> {
        self.copied.map(|(seq, _)| seq)
    }

    /// For `copied`: the bytes the copy made and stored.
    #[getter]
    fn bytes_uploaded(&self) -> Option<u64> {
        self.copied.map(|(_, bytes)| bytes)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let error = or_none(self.error.as_ref(), |error| {
            Ok(error.bind(py).repr()?.to_string())
        })?;
        let copied = match self.copied {
            Some((seq, bytes)) => format!(", seq={seq}, bytes_uploaded={bytes}"),
            None => String::new(),
        };
        Ok(format!(
            "RouterEvent(kind='{}', key={}, epoch={}, error={error}{copied})",
            self.kind,
            quoted(py, &self.key)?,
            self.epoch
        ))
    }
}

/// What one `tick()` did.
#[pyclass(frozen, eq, module = "gotry_tenant_state", name = "RouterTickReport")]
#[derive(PartialEq)]
pub struct PyRouterTickReport(RouterTickReport);

#[pymethods]
impl PyRouterTickReport {
    /// The keeper's round: leases renewed, lost (each also told as a `lost` event), failed.
    #[getter]
    fn keeper(&self) -> PyTickReport {
        PyTickReport(self.0.keeper)
    }

    /// Keys of the tenants copied in the background by this round.
    #[getter]
    fn copied(&self) -> Vec<String> {
        self.0.copied.clone()
    }

    /// Keys of the tenants whose due copy failed; each was also told as `copy_failed`.
    #[getter]
    fn failed(&self) -> Vec<String> {
        self.0.failed.clone()
    }

    /// When the next round is due on the router's clock; None when nothing is kept.
    #[getter]
    fn next_due_ms(&self) -> Option<f64> {
        self.0.next_due_ms
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let r = &self.0;
        let next = r
            .next_due_ms
            .map_or_else(|| "None".to_owned(), |ms| format!("{ms:?}"));
        Ok(format!(
            "RouterTickReport(keeper={}, copied={}, failed={}, next_due_ms={next})",
            Bound::new(py, self.keeper())?.repr()?,
            PyList::new(py, &r.copied)?.repr()?,
            PyList::new(py, &r.failed)?.repr()?
        ))
    }
}

/// What `close()` did with every tenant.
#[pyclass(frozen, module = "gotry_tenant_state", name = "CloseReport")]
pub struct PyCloseReport {
    handed_off: Vec<String>,
    timed_out: Vec<String>,
    failed: Vec<(String, Py<PyAny>)>,
    keeper: Py<PyShutdownReport>,
}

impl PyCloseReport {
    fn new(py: Python<'_>, report: CloseReport) -> PyResult<PyCloseReport> {
        let failed = report
            .failed
            .into_iter()
            .map(|(key, error)| (key, exception_object(py, error).unbind()))
            .collect();
        Ok(PyCloseReport {
            handed_off: report.handed_off,
            timed_out: report.timed_out,
            failed,
            keeper: Py::new(py, PyShutdownReport::new(py, report.keeper)?)?,
        })
    }
}

#[pymethods]
impl PyCloseReport {
    /// Keys copied and released: the next replica may serve them at once.
    #[getter]
    fn handed_off(&self) -> Vec<String> {
        self.handed_off.clone()
    }

    /// Keys whose calls were still running at the timeout: nothing was copied for them, and
    /// the keeper's shutdown then closed their gates (their running calls end FENCED).
    #[getter]
    fn timed_out(&self) -> Vec<String> {
        self.timed_out.clone()
    }

    /// `(key, exception)` of the hand-offs that failed (a final copy or the release).
    #[getter]
    fn failed<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let pairs = self
            .failed
            .iter()
            .map(|(key, error)| PyTuple::new(py, [PyString::new(py, key).into_any(), error.bind(py).clone()]))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, pairs)
    }

    /// What the keeper's shutdown did with the leases still kept after the hand-offs.
    #[getter]
    fn keeper(&self, py: Python<'_>) -> Py<PyShutdownReport> {
        self.keeper.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "CloseReport(handed_off={}, timed_out={}, failed={})",
            PyList::new(py, &self.handed_off)?.repr()?,
            PyList::new(py, &self.timed_out)?.repr()?,
            self.failed(py)?.repr()?
        ))
    }
}
