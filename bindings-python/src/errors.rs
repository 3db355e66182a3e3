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
use pyo3::types::{PyDict, PyList, PyTuple, PyType};

use crate::copies::PySkippedCopy;
use crate::values::PyLeaseRecord;

/// A core failure on its way to Python. A newtype because both `Error` and `PyErr` are
/// foreign to this crate, so `From<Error> for PyErr` cannot be written directly.
#[derive(Debug)]
pub struct CoreError(pub Error);

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
            // What left a call in doubt is the exception's `__cause__`, converted as any
            // failure is (a snapshot function's own exception comes back as itself).
            other => Python::attach(|py| {
                let exception = typed_exception(py, &other).unwrap_or_else(|failure| failure);
                if let Error::CallInDoubt { cause, .. } = other {
                    exception.set_cause(py, Some(PyErr::from(CoreError(*cause))));
                }
                exception
            }),
        }
    }
}

/// Runs Python code that the core calls back while the interpreter lock is released (a
/// clock, a restore's `verify`): attached for the length of the call, its failure carried
/// through the core as a host error, so that it comes back out of the core as itself.
pub fn call_host<T>(
    what: &str,
    call: impl for<'py> FnOnce(Python<'py>) -> PyResult<T>,
) -> gotry_tenant_state::Result<T> {
    Python::try_attach(call)
        .unwrap_or_else(|| {
            Err(PyRuntimeError::new_err(format!(
                "{what} was called while the interpreter is shutting down"
            )))
        })
        .map_err(|failure| Error::Host(Box::new(failure)))
}

/// The exception a core failure becomes, as an object to hand over rather than raise: a
/// refusal among a batch's answers, the cause in a keeper's event or shutdown report.
pub fn exception_object(py: Python<'_>, error: Error) -> Bound<'_, PyAny> {
    PyErr::from(CoreError(error))
        .into_value(py)
        .into_bound(py)
        .into_any()
}

/// How a context manager's `__exit__` reports what its cleanup could not do (releases that
/// failed): after a clean block, an exception group of them, each with its `note`; after a
/// block that raised, the block's exception goes on (it is the one the caller must see) and
/// carries one note per failure. Returns `__exit__`'s answer: never swallow the exception.
pub fn exit_failures(
    py: Python<'_>,
    exc_value: &Bound<'_, PyAny>,
    failures: Vec<(String, Error)>,
    summary: String,
) -> PyResult<bool> {
    if failures.is_empty() {
        return Ok(false);
    }
    let mut raised = Vec::with_capacity(failures.len());
    for (note, error) in failures {
        let failure = exception_object(py, error);
        if exc_value.is_none() {
            failure.call_method1("add_note", (note,))?;
        } else {
            exc_value.call_method1("add_note", (format!("{note}: {}", failure.str()?),))?;
        }
        raised.push(failure);
    }
    if !exc_value.is_none() {
        return Ok(false);
    }
    // BaseExceptionGroup becomes an ExceptionGroup when every member is an Exception.
    let group = py
        .import("builtins")?
        .getattr("BaseExceptionGroup")?
        .call1((summary, raised))?;
    Err(PyErr::from_value(group))
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
                Error::DurableStoreUnavailable { backend_code, .. } => {
                    fields.set_item("backend_code", backend_code)?
                }
                Error::RestoreInvalid { skipped, .. } => {
                    let skipped = skipped.iter().cloned().map(PySkippedCopy::from);
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
                Error::TenantBusy {
                    key,
                    running,
                    waited_ms,
                } => {
                    fields.set_item("key", key)?;
                    fields.set_item("running", running)?;
                    fields.set_item("waited_ms", waited_ms)?;
                }
                Error::CallInDoubt { key, epoch, .. } => {
                    fields.set_item("key", key)?;
                    fields.set_item("epoch", epoch)?;
                }
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

/// The core's registry, in its order: `(code, class name, fields, template)` per code.
pub fn error_types(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
    let rows = ErrorCode::ALL.iter().map(|code| {
        (
            code.as_str(),
            code.class_name(),
            PyTuple::new(py, code.fields())?,
            code.template(),
        )
            .into_pyobject(py)
    });
    PyTuple::new(py, rows.collect::<PyResult<Vec<_>>>()?)
}

/// The core's code registry, in its order, for `gotry_tenant_state.ERROR_CODES`.
pub fn error_codes() -> Vec<&'static str> {
    ErrorCode::ALL.iter().map(|code| code.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gotry_tenant_state::{CopyId, FenceReason, LeaseRecord, SkipReason, SkippedCopy};
    use pyo3::types::PyAnyMethods;

    /// Loads `_errors.py` on its own under its package name, below an empty stand-in for
    /// the package: the real package's `__init__` imports the compiled module, which a
    /// `cargo test` binary is not.
    fn load_error_classes(py: Python<'_>) {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/python/gotry_tenant_state/_errors.py"
        );
        let modules = py.import("sys").unwrap().getattr("modules").unwrap();
        let package = ERRORS_MODULE.rsplit_once('.').unwrap().0;
        modules
            .set_item(package, PyModule::new(py, package).unwrap())
            .unwrap();
        // `_errors.py` reads the templates from the compiled module: a stand-in with them.
        let native = PyModule::new(py, "_native").unwrap();
        native.add("_ERROR_TYPES", error_types(py).unwrap()).unwrap();
        modules.set_item(format!("{package}._native"), native).unwrap();
        let util = py.import("importlib.util").unwrap();
        let spec = util
            .call_method1("spec_from_file_location", (ERRORS_MODULE, path))
            .unwrap();
        let module = util.call_method1("module_from_spec", (&spec,)).unwrap();
        modules.set_item(ERRORS_MODULE, &module).unwrap();
        spec.getattr("loader")
            .unwrap()
            .call_method1("exec_module", (&module,))
            .unwrap();
    }

    fn class_name(value: &Bound<'_, PyAny>) -> String {
        value.get_type().name().unwrap().to_string()
    }

    fn field<'py, T: for<'a> FromPyObject<'a, 'py>>(value: &Bound<'py, PyAny>, name: &str) -> T {
        match value.getattr(name).unwrap().extract::<T>() {
            Ok(v) => v,
            Err(_) => panic!("field {name} has the wrong type"),
        }
    }

    /// Every kind of core failure, including those no Python call can provoke yet (the
    /// router and durable-store codes), lands on its class with its fields.
    #[test]
    fn every_core_error_becomes_its_exception() {
        Python::initialize();
        Python::attach(|py| {
            load_error_classes(py);
            let record = LeaseRecord {
                key: "acme/t-1".into(),
                owner: "replica-a".into(),
                epoch: 7,
                lease_until_ms: 1_000,
                forgotten_at_epoch: 3,
            };
            let skipped = vec![
                SkippedCopy {
                    id: CopyId { epoch: 2, seq: 5 },
                    reason: SkipReason::Checksum,
                },
                SkippedCopy {
                    id: CopyId { epoch: 1, seq: 1 },
                    reason: SkipReason::Fold,
                },
            ];
            let cases: Vec<(Error, &str)> = vec![
                (
                    Error::LeaseHeld {
                        record: record.clone(),
                    },
                    "LeaseHeldError",
                ),
                (
                    Error::LeaseLost {
                        message: "lost".into(),
                    },
                    "LeaseLostError",
                ),
                (
                    Error::Fenced {
                        reason: FenceReason::LeaseExpiredLocally,
                        key: "k".into(),
                        epoch: 2,
                    },
                    "FencedError",
                ),
                (
                    Error::LeaseStoreUnavailable {
                        message: "busy".into(),
                    },
                    "LeaseStoreUnavailableError",
                ),
                (
                    Error::IdInvalid {
                        message: "bad".into(),
                    },
                    "InvalidTenantIdError",
                ),
                (
                    Error::DurableStoreUnavailable {
                        message: "down".into(),
                        backend_code: "EROFS".into(),
                    },
                    "DurableStoreUnavailableError",
                ),
                (
                    Error::RestoreInvalid {
                        message: "checksum".into(),
                        skipped: skipped.clone(),
                    },
                    "RestoreVerificationError",
                ),
                (
                    Error::CopyConflict {
                        message: "two writers".into(),
                    },
                    "CopyConflictError",
                ),
                (Error::Draining { key: "k".into() }, "TenantDrainingError"),
                (
                    Error::DrainTimeout {
                        key: "k".into(),
                        in_flight: 3,
                        timeout_ms: 250,
                    },
                    "DrainTimeoutError",
                ),
                (Error::RouterClosed, "RouterClosedError"),
                (Error::ReplicaAtCapacity { limit: 64 }, "ReplicaAtCapacityError"),
                (
                    Error::TenantBusy {
                        key: "k".into(),
                        running: 2,
                        waited_ms: 100,
                    },
                    "TenantBusyError",
                ),
                (
                    Error::OpenInProcess {
                        message: "open".into(),
                    },
                    "OpenInProcessError",
                ),
                (
                    Error::CallInDoubt {
                        key: "k".into(),
                        epoch: 4,
                        cause: Box::new(Error::Draining { key: "k".into() }),
                    },
                    "CallInDoubtError",
                ),
            ];
            assert_eq!(cases.len(), ErrorCode::ALL.len());
            for ((error, expected_class), code) in cases.into_iter().zip(ErrorCode::ALL) {
                let message = error.to_string();
                assert_eq!(error.code(), Some(code));
                let exception = exception_object(py, error);
                assert_eq!(class_name(&exception), expected_class, "{exception}");
                assert_eq!(field::<String>(&exception, "code"), code.as_str());
                assert_eq!(exception.str().unwrap().to_string(), message);
                match code {
                    ErrorCode::LeaseHeld => {
                        let got = exception.getattr("record").unwrap();
                        assert_eq!(got.cast::<PyLeaseRecord>().unwrap().get().0, record);
                    }
                    ErrorCode::Fenced => {
                        assert_eq!(field::<String>(&exception, "reason"), "lease_expired_locally")
                    }
                    ErrorCode::DurableStoreUnavailable => {
                        assert_eq!(field::<String>(&exception, "backend_code"), "EROFS")
                    }
                    ErrorCode::RestoreInvalid => {
                        let got: Vec<PySkippedCopy> = exception
                            .getattr("skipped")
                            .unwrap()
                            .try_iter()
                            .unwrap()
                            .map(|item| item.unwrap().cast::<PySkippedCopy>().unwrap().get().clone())
                            .collect();
                        let expected: Vec<PySkippedCopy> =
                            skipped.iter().cloned().map(PySkippedCopy::from).collect();
                        assert_eq!(got, expected);
                    }
                    ErrorCode::DrainTimeout => {
                        assert_eq!(field::<u64>(&exception, "in_flight"), 3);
                        assert_eq!(field::<u64>(&exception, "timeout_ms"), 250);
                    }
                    ErrorCode::ReplicaAtCapacity => assert_eq!(field::<u64>(&exception, "limit"), 64),
                    ErrorCode::TenantBusy => {
                        assert_eq!(field::<u64>(&exception, "running"), 2);
                        assert_eq!(field::<u64>(&exception, "waited_ms"), 100);
                    }
                    ErrorCode::CallInDoubt => {
                        assert_eq!(field::<i64>(&exception, "epoch"), 4);
                        let cause = exception.getattr("__cause__").unwrap();
                        assert_eq!(class_name(&cause), "TenantDrainingError");
                    }
                    _ => {}
                }
            }

            let storage = exception_object(
                py,
                Error::Storage {
                    code: "SQLITE_NOTADB".into(),
                    message: "file is not a database".into(),
                },
            );
            assert_eq!(class_name(&storage), STORAGE_CLASS);
            assert_eq!(field::<String>(&storage, "code"), "SQLITE_NOTADB");

            let invalid = exception_object(
                py,
                Error::InvalidArgument {
                    message: "ttl".into(),
                },
            );
            assert_eq!(class_name(&invalid), "ValueError");

            // A host failure comes back as the very exception object the callback raised.
            let original = pyo3::exceptions::PyKeyError::new_err("clock broke");
            let original_value = original.value(py).clone().into_any();
            let host = exception_object(py, Error::Host(Box::new(original)));
            assert!(host.is(&original_value));
        });
    }
}
