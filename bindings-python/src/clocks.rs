//! Clocks handed in from Python.
//!
//! The store reads its wall clock, and a holder its monotonic clock, while the interpreter
//! lock is released (they are read inside store calls). A Python clock therefore re-attaches
//! to the interpreter for the length of one reading. A `ManualClock` from this module is
//! recognised and read natively, so tests that use it pay no interpreter round trip.

use std::sync::Arc;

use gotry_tenant_state::{ManualClock, MonotonicClock, SystemMonotonicClock, SystemWallClock, WallClock};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;

use crate::args::{integer, is_int, is_real, type_name};
use crate::errors::{call_host, CoreError};

/// A clock that moves only when told to, usable as the store's wall clock (`now_ms=`) and
/// as a holder's monotonic clock (`clock=`), both at once.
#[pyclass(frozen, module = "gotry_tenant_state", name = "ManualClock")]
pub struct PyManualClock {
    clock: Arc<ManualClock>,
}

#[pymethods]
impl PyManualClock {
    #[new]
    #[pyo3(signature = (start_ms = None))]
    fn new(start_ms: Option<&Bound<'_, PyAny>>) -> PyResult<PyManualClock> {
        let start = start_ms.map(|value| integer("start_ms", value)).transpose()?;
        Ok(PyManualClock {
            clock: Arc::new(ManualClock::new(start.unwrap_or(0))),
        })
    }

    fn now_ms(&self) -> i64 {
        self.clock.get()
    }

    fn set(&self, now_ms: &Bound<'_, PyAny>) -> PyResult<()> {
        self.clock.set(integer("now_ms", now_ms)?);
        Ok(())
    }

    /// Moves the clock (backwards too, to model a wall clock that was stepped back) and
    /// returns the new reading.
    fn advance(&self, delta_ms: &Bound<'_, PyAny>) -> PyResult<i64> {
        let delta = integer("delta_ms", delta_ms)?;
        Ok(self.clock.advance(delta).map_err(CoreError)?)
    }

    fn __repr__(&self) -> String {
        format!("ManualClock(now_ms={})", self.clock.get())
    }
}

fn reading_type_error(what: &str, reading: &Bound<'_, PyAny>) -> PyErr {
    PyTypeError::new_err(format!("{what}, got {}", type_name(reading)))
}

/// The store's clock as a Python callable returning integer milliseconds since the epoch.
struct PythonWallClock {
    now_ms: Py<PyAny>,
}

impl WallClock for PythonWallClock {
    fn now_ms(&self) -> gotry_tenant_state::Result<i64> {
        call_host("a Python clock", |py| {
            let reading = self.now_ms.bind(py).call0()?;
            if !is_int(&reading) {
                return Err(reading_type_error(
                    "now_ms must return an int of milliseconds",
                    &reading,
                ));
            }
            reading
                .extract::<i64>()
                .map_err(|_| PyValueError::new_err(format!("now_ms returned {reading}, beyond 64 bits")))
        })
    }
}

/// A holder's clock as a Python object with a `now_ms()` method returning milliseconds.
struct PythonMonotonicClock {
    clock: Py<PyAny>,
}

impl MonotonicClock for PythonMonotonicClock {
    fn now_ms(&self) -> gotry_tenant_state::Result<f64> {
        call_host("a Python clock", |py| {
            let reading = self.clock.bind(py).call_method0(intern!(py, "now_ms"))?;
            if !is_real(&reading) {
                return Err(reading_type_error(
                    "clock.now_ms() must return an int or a float",
                    &reading,
                ));
            }
            // Whether the number is a point in time (not NaN, not an infinity) the core
            // decides for every reading: the write gate closes (FENCED), anything else
            // raises ValueError.
            reading.extract::<f64>()
        })
    }
}

/// `now_ms=` of a store: the system clock, a `ManualClock`, or a callable.
pub fn wall_clock(now_ms: Option<&Bound<'_, PyAny>>) -> PyResult<Arc<dyn WallClock>> {
    match now_ms {
        None => Ok(Arc::new(SystemWallClock)),
        Some(value) => {
            if let Ok(manual) = value.cast::<PyManualClock>() {
                Ok(manual.get().clock.clone())
            } else if value.is_callable() {
                Ok(Arc::new(PythonWallClock {
                    now_ms: value.clone().unbind(),
                }))
            } else {
                Err(PyTypeError::new_err(
                    "now_ms must be a callable returning integer milliseconds, or a ManualClock",
                ))
            }
        }
    }
}

/// `clock=` of a holder: the system's monotonic clock, a `ManualClock`, or an object with a
/// `now_ms()` method.
pub fn monotonic_clock(clock: Option<&Bound<'_, PyAny>>) -> PyResult<Arc<dyn MonotonicClock>> {
    match clock {
        None => Ok(Arc::new(SystemMonotonicClock)),
        Some(value) => {
            if let Ok(manual) = value.cast::<PyManualClock>() {
                Ok(manual.get().clock.clone())
            } else if value.hasattr(intern!(value.py(), "now_ms"))? {
                Ok(Arc::new(PythonMonotonicClock {
                    clock: value.clone().unbind(),
                }))
            } else {
                Err(PyTypeError::new_err(
                    "clock must be an object with a now_ms() method, or a ManualClock",
                ))
            }
        }
    }
}
