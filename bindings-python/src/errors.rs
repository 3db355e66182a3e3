//! The one place where a core failure becomes a Python exception.
//!
//! The exception classes themselves are plain Python (`gotry_tenant_state/_errors.py`):
//! written there they get ordinary constructors, keyword fields, pickling and `add_note`
//! without any glue. This module finds them by the class names the core gives each code and
//! refuses to raise anything if the two sides ever disagree about a code.

use gotry_tenant_state::{Error, ErrorCode};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyType};

use crate::values::PyLeaseRecord;

/// A core failure on its way to Python. A newtype because both `Error` and `PyErr` are
/// foreign to this crate, so `From<Error> for PyErr` cannot be written directly.
#[derive(Debug)]
pub struct CoreError(pub Error);

impl From<Error> for CoreError {
    fn from(error: Error) -> CoreError {
        CoreError(error)
    }
}

impl From<CoreError> for PyErr {
    fn from(CoreError(error): CoreError) -> PyErr {
        match error {
            // A host callback (a clock written in Python) failed: its own exception goes back
            // up unchanged, with its traceback, so `except` clauses written for it still match.
            Error::Host(source) => match source.downcast::<PyErr>() {
                Ok(original) => *original,
                Err(other) => PyRuntimeError::new_err(format!("a host callback failed: {other}")),
            },
            Error::InvalidArgument { message } => PyValueError::new_err(message),
            other => Python::attach(|py| typed_exception(py, &other).unwrap_or_else(|failure| failure)),
        }
    }
}

/// The exception classes of `_errors.py`, resolved once per interpreter.
struct ErrorClasses {
    /// One class per core code, in the order of [`ErrorCode::ALL`].
    by_code: Vec<Py<PyType>>,
    storage: Py<PyType>,
}

static ERROR_CLASSES: PyOnceLock<ErrorClasses> = PyOnceLock::new();

/// Where the classes live; the package re-exports them.
const ERRORS_MODULE: &str = "gotry_tenant_state._errors";
/// The class for failures of the storage engine that are not contention (SQLite's own code).
const STORAGE_CLASS: &str = "TenantStateStorageError";

fn error_classes(py: Python<'_>) -> PyResult<&ErrorClasses> {
    ERROR_CLASSES.get_or_try_init(py, || {
        let module = py.import(ERRORS_MODULE)?;
        let base = module.getattr("TenantStateError")?.cast_into::<PyType>()?;
        let mut by_code = Vec::with_capacity(ErrorCode::ALL.len());
        for code in ErrorCode::ALL {
            let class = module.getattr(code.class_name())?.cast_into::<PyType>()?;
            let declared: String = class.getattr("code")?.extract()?;
            if !class.is_subclass(&base)? || declared != code.as_str() {
                return Err(PyRuntimeError::new_err(format!(
                    "{ERRORS_MODULE}.{} must subclass TenantStateError with code {}, it declares {declared}",
                    code.class_name(),
                    code.as_str()
                )));
            }
            by_code.push(class.unbind());
        }
        let storage = module.getattr(STORAGE_CLASS)?.cast_into::<PyType>()?.unbind();
        Ok(ErrorClasses { by_code, storage })
    })
}

/// Builds the exception of a failure that has a class of its own: message first, the
/// reference's extra fields as keywords in snake_case.
fn typed_exception(py: Python<'_>, error: &Error) -> PyResult<PyErr> {
    let classes = error_classes(py)?;
    let fields = PyDict::new(py);
    let class = match (error, error.code()) {
        (Error::Storage { code, .. }, _) => {
            fields.set_item("code", code)?;
            &classes.storage
        }
        (_, Some(code)) => {
            match error {
                Error::LeaseHeld { record } => {
                    fields.set_item("record", PyLeaseRecord::from(record.clone()))?
                }
                Error::Fenced { reason, .. } => fields.set_item("reason", reason.as_str())?,
                Error::RestoreInvalid { skipped, .. } => {
                    fields.set_item("skipped", PyList::new(py, skipped)?)?
                }
                Error::DrainTimeout {
                    in_flight,
                    timeout_ms,
                    ..
                } => {
                    fields.set_item("in_flight", in_flight)?;
                    fields.set_item("timeout_ms", timeout_ms)?;
                }
                Error::ReplicaAtCapacity { limit } => fields.set_item("limit", limit)?,
                _ => {}
            }
            match ErrorCode::ALL
                .iter()
                .zip(&classes.by_code)
                .find(|(c, _)| **c == code)
            {
                Some((_, class)) => class,
                None => return Ok(PyRuntimeError::new_err(error.to_string())),
            }
        }
        // A kind the core added after this module was built: still an exception, never a panic.
        (_, None) => return Ok(PyRuntimeError::new_err(error.to_string())),
    };
    let instance = class.bind(py).call((error.to_string(),), Some(&fields))?;
    Ok(PyErr::from_value(instance))
}

/// The core's code registry, in its order, for `gotry_tenant_state.ERROR_CODES`.
pub fn error_codes() -> Vec<&'static str> {
    ErrorCode::ALL.iter().map(|code| code.as_str()).collect()
}
