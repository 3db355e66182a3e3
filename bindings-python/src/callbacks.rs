//! Python callables that the core calls back: a restore's `verify`, a copy's `snapshot`, a
//! keeper's or a router's `on_event`.
//!
//! The core calls them while the GIL is released, from the thread of the call that is
//! running without it or from a thread of its own (a keeper's renewals, a router's copier).
//! Each call attaches to the interpreter for its own length only. There are two kinds:
//!
//! * A *host call* ([`HostCallable::call`]) is part of the operation: its exception fails
//!   that operation and comes out of it as itself (through [`call_host`], carried through the
//!   core as `Error::Host`), with its traceback, so that `except` clauses written for it match.
//! * A *notification* ([`HostCallable::notify`]) is nobody's operation: an exception it raises
//!   is the host's bug, goes to `sys.unraisablehook` (as one raised in `__del__` does), and
//!   the thread that told it carries on.
//!
//! The callable sits in a slot that the owning object reports to Python's collector
//! (`__traverse__`) and empties when the collector breaks a cycle through it (`__clear__`):
//! a callback that refers back to its router or copies is collected like any other cycle.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::PyTraverseError;

use crate::errors::call_host;

/// One Python callable the core may call, by the name the host gave its argument.
pub struct HostCallable {
    what: &'static str,
    slot: Mutex<Option<Py<PyAny>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only ever held with the GIL, for a clone, a swap or a push: never poisoned in a way that matters.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl HostCallable {
    /// The argument `what` as a callable to keep: None stays None, anything that is not
    /// callable is a TypeError that says what was expected (`shape`).
    pub fn from_arg(
        what: &'static str,
        shape: &str,
        value: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Arc<HostCallable>>> {
        match value {
            None => Ok(None),
            Some(value) if value.is_none() => Ok(None),
            Some(value) if !value.is_callable() => Err(PyTypeError::new_err(format!(
                "{what} must be {shape}, or None; got {}",
                value.get_type().name()?
            ))),
            Some(value) => Ok(Some(Arc::new(HostCallable {
                what,
                slot: Mutex::new(Some(value.clone().unbind())),
            }))),
        }
    }

    fn current(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        lock(&self.slot).as_ref().map(|callable| callable.clone_ref(py))
    }

    /// A host call: attaches, calls `call` with the callable, and carries a Python exception
    /// through the core so that it comes back out of the core's operation as itself.
    pub fn call<T>(
        &self,
        call: impl for<'py> FnOnce(&Bound<'py, PyAny>) -> PyResult<T>,
    ) -> gotry_tenant_state::Result<T> {
        call_host(self.what, |py| {
            let callable = self.current(py).ok_or_else(|| {
                PyRuntimeError::new_err(format!(
                    "{} was called after its owner was collected as garbage",
                    self.what
                ))
            })?;
            call(callable.bind(py))
        })
    }

    /// A notification: attaches and calls the callable with what `argument` builds; an
    /// exception (from either) goes to `sys.unraisablehook`. Nothing happens once the
    /// interpreter is gone or the slot was cleared: nobody is left to tell.
    pub fn notify(&self, argument: impl for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyAny>>) {
        Python::try_attach(|py| {
            let Some(callable) = self.current(py) else {
                return;
            };
            if let Err(raised) = argument(py).and_then(|value| callable.call1(py, (value,))) {
                raised.write_unraisable(py, Some(callable.bind(py)));
            }
        });
    }

    /// For the owner's `__traverse__`. The slot is only ever locked by a thread that holds
    /// the GIL, which the collector holds now: never contended here, and a reference left
    /// unvisited would only keep a cycle alive.
    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Ok(slot) = self.slot.try_lock() {
            visit.call(slot.as_ref())?;
        }
        Ok(())
    }

    /// For the owner's `__clear__`: its owner is garbage.
    pub fn clear(&self) {
        // Released after the lock: dropping it may run Python code that calls back here.
        let callable = lock(&self.slot).take();
        drop(callable);
    }
}

/// The keepers or routers still alive, whose threads call Python, for the `atexit` hook that
/// stops them before the interpreter finalizes (see `keeper`). Held weakly, so that the list
/// keeps nothing alive; dead entries are pruned as new ones come.
pub struct Live<T>(Mutex<Vec<Weak<T>>>);

impl<T> Live<T> {
    pub const fn new() -> Live<T> {
        Live(Mutex::new(Vec::new()))
    }

    pub fn add(&self, alive: &Arc<T>) {
        let mut live = lock(&self.0);
        live.retain(|other| other.strong_count() > 0);
        live.push(Arc::downgrade(alive));
    }

    /// Every one still alive, taken off the list.
    pub fn take(&self) -> Vec<Arc<T>> {
        lock(&self.0)
            .drain(..)
            .filter_map(|live| live.upgrade())
            .collect()
    }
}
