//! The details of a failed call, for the caller that asked for them.

use std::ffi::c_char;

use gotry_core::Error;

use crate::boundary::{free_handle, handle, read_into, Failure};
use crate::copies::GotrySkippedCopy;
use crate::host::host_code;
use crate::records::{element, lend_into, GotryRecordView, OwnedRecord, Text};
use crate::status::{GotryFenceReason, GotryStatus};

/// The fields some codes carry besides their message.
#[derive(Debug)]
enum Detail {
    None,
    LeaseHeld(OwnedRecord),
    Fenced {
        reason: GotryFenceReason,
        key: Text,
        epoch: i64,
    },
    Draining {
        key: Text,
    },
    DrainTimeout {
        key: Text,
        in_flight: u64,
        timeout_ms: u64,
    },
    DurableStoreUnavailable {
        backend_code: Text,
    },
    RestoreInvalid {
        skipped: Vec<GotrySkippedCopy>,
    },
    ReplicaAtCapacity {
        limit: u64,
    },
    BufferTooSmall {
        needed: usize,
    },
    Host {
        code: i32,
    },
}

/// Why a call failed: its status, its code string, a message for people, and the fields
/// of its code. Created only by a failing call whose `out_error` was not NULL. Immutable:
/// any number of threads may read it at once; free it once with `gotry_error_free`.
#[derive(Debug)]
pub struct GotryError {
    status: GotryStatus,
    code: Text,
    message: Text,
    detail: Detail,
}

impl From<Failure> for GotryError {
    fn from(failure: Failure) -> GotryError {
        match failure {
            Failure::Core(error) => GotryError::from_core(&error),
            Failure::Null(name) => GotryError::plain(
                GotryStatus::NullArgument,
                format!("{name} must not be NULL"),
                Detail::None,
            ),
            Failure::BufferTooSmall {
                name,
                needed,
                capacity,
            } => GotryError::plain(
                GotryStatus::BufferTooSmall,
                format!("{name} holds {capacity} bytes, the answer needs {needed} (with its NUL)"),
                Detail::BufferTooSmall { needed },
            ),
            Failure::NoValue(what) => GotryError::plain(GotryStatus::NoValue, what.to_owned(), Detail::None),
            Failure::Panic(message) => GotryError::plain(GotryStatus::InternalError, message, Detail::None),
        }
    }
}

impl GotryError {
    /// An error that exists only at the ABI: its code is its status's name.
    fn plain(status: GotryStatus, message: String, detail: Detail) -> GotryError {
        let code = status.name().to_str().unwrap_or_default();
        GotryError {
            status,
            code: Text::new(code),
            message: Text::new(&message),
            detail,
        }
    }

    pub(crate) fn from_core(error: &Error) -> GotryError {
        let detail = match error {
            Error::LeaseHeld { record } => Detail::LeaseHeld(OwnedRecord::from(record)),
            Error::Fenced { reason, key, epoch } => Detail::Fenced {
                reason: (*reason).into(),
                key: Text::new(key),
                epoch: *epoch,
            },
            Error::Draining { key } => Detail::Draining { key: Text::new(key) },
            Error::DrainTimeout {
                key,
                in_flight,
                timeout_ms,
            } => Detail::DrainTimeout {
                key: Text::new(key),
                in_flight: *in_flight,
                timeout_ms: *timeout_ms,
            },
            Error::DurableStoreUnavailable { backend_code, .. } => Detail::DurableStoreUnavailable {
                backend_code: Text::new(backend_code),
            },
            Error::RestoreInvalid { skipped, .. } => Detail::RestoreInvalid {
                skipped: skipped.iter().map(GotrySkippedCopy::from).collect(),
            },
            Error::ReplicaAtCapacity { limit } => Detail::ReplicaAtCapacity { limit: *limit },
            Error::Host(_) => host_code(error).map_or(Detail::None, |code| Detail::Host { code }),
            // The details of what left the call in doubt (a backend code, a host callback's
            // return value) are read from the in-doubt error itself; its message names the
            // cause's code.
            Error::CallInDoubt { cause, .. } => GotryError::from_core(cause).detail,
            _ => Detail::None,
        };
        GotryError {
            status: GotryStatus::of_error(error),
            code: Text::new(error.code_str()),
            message: Text::new(&error.to_string()),
            detail,
        }
    }

    pub(crate) fn status(&self) -> GotryStatus {
        self.status
    }

    #[cfg(test)]
    pub(crate) fn message_text(&self) -> &str {
        self.message.as_str()
    }
}

/// An error lent to C inside a struct it reads (an event, a report's entry): NULL for none.
pub(crate) fn lent(error: Option<&GotryError>) -> *const GotryError {
    error.map_or(std::ptr::null(), |error| error)
}

fn no_value(what: &'static str) -> Failure {
    Failure::NoValue(what)
}

/// The status of the failed call; `GOTRY_STATUS_NULL_ARGUMENT` when `error` is NULL.
///
/// # Safety
/// `error` must be NULL or a live `GotryError`.
#[no_mangle]
pub unsafe extern "C" fn gotry_error_status(error: *const GotryError) -> GotryStatus {
    let mut status = GotryStatus::NullArgument;
    let _ = ffi_boundary!(std::ptr::null_mut(), {
        status = unsafe { handle("error", error)? }.status;
        Ok(())
    });
    status
}

/// The error's code string, NUL-terminated and borrowed from `error`: a `GOTRY_TENANT_*`
/// code for the twelve statuses, `ERR_OUT_OF_RANGE` for `GOTRY_STATUS_INVALID_ARGUMENT`
/// (the code the other languages give a range error), the failure's own name for
/// `GOTRY_STATUS_STORAGE_ERROR` (SQLite's, e.g. `SQLITE_NOTADB`, an errno name such as
/// `ENOTDIR`, or `OPEN_IN_PROCESS`), `HOST_CALLBACK` for `GOTRY_STATUS_HOST_CALLBACK_FAILED`,
/// and the status's name otherwise.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `error` must be NULL or a live `GotryError`; `out_code` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_error_code(
    error: *const GotryError,
    out_code: *mut *const c_char,
) -> GotryStatus {
    unsafe { read_into("error", error, "out_code", out_code, |error| Ok(error.code.ptr())) }
}

/// The message for people, borrowed from `error`: NUL-terminated, though `*out_len` is the
/// authority (a message quotes keys, which may hold a NUL). Do not branch on it.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `error` must be NULL or a live `GotryError`; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_error_message(
    error: *const GotryError,
    out_message: *mut *const c_char,
    out_len: *mut usize,
) -> GotryStatus {
    unsafe {
        lend_into("error", error, "out_message", out_message, out_len, |error| {
            Ok(&error.message)
        })
    }
}

/// The record of the holder that refused an acquire (`GOTRY_STATUS_LEASE_HELD`), so a router
/// can forward to it. The view's strings are borrowed from `error`.
///
/// Returns `GOTRY_STATUS_NO_VALUE` for any other error, and `GOTRY_STATUS_NULL_ARGUMENT`
/// when an argument is NULL.
///
/// # Safety
/// `error` must be NULL or a live `GotryError`; `out_view` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_error_record(
    error: *const GotryError,
    out_view: *mut GotryRecordView,
) -> GotryStatus {
    unsafe {
        read_into("error", error, "out_view", out_view, |error| {
            match &error.detail {
                Detail::LeaseHeld(record) => Ok(record.view()),
                _ => Err(no_value("only a LEASE_HELD error carries a record")),
            }
        })
    }
}

/// Why the write gate was closed (`GOTRY_STATUS_FENCED`).
///
/// Returns `GOTRY_STATUS_NO_VALUE` for any other error, and `GOTRY_STATUS_NULL_ARGUMENT`
/// when an argument is NULL.
///
/// # Safety
/// `error` must be NULL or a live `GotryError`; `out_reason` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_error_fence_reason(
    error: *const GotryError,
    out_reason: *mut GotryFenceReason,
) -> GotryStatus {
    unsafe {
        read_into("error", error, "out_reason", out_reason, |error| {
            match &error.detail {
                Detail::Fenced { reason, .. } => Ok(*reason),
                _ => Err(no_value("only a FENCED error carries a reason")),
            }
        })
    }
}

/// The tenant key an error is about (`GOTRY_STATUS_FENCED`, `GOTRY_STATUS_DRAINING`,
/// `GOTRY_STATUS_DRAIN_TIMEOUT`), borrowed from `error`; `*out_len` is the authority.
///
/// Returns `GOTRY_STATUS_NO_VALUE` for any other error, and `GOTRY_STATUS_NULL_ARGUMENT`
/// when an argument is NULL.
///
/// # Safety
/// `error` must be NULL or a live `GotryError`; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_error_key(
    error: *const GotryError,
    out_key: *mut *const c_char,
    out_len: *mut usize,
) -> GotryStatus {
    unsafe {
        lend_into(
            "error",
            error,
            "out_key",
            out_key,
            out_len,
            |error| match &error.detail {
                Detail::Fenced { key, .. } | Detail::Draining { key } | Detail::DrainTimeout { key, .. } => {
                    Ok(key)
                }
                _ => Err(no_value(
                    "only FENCED, DRAINING and DRAIN_TIMEOUT errors carry a key",
                )),
            },
        )
    }
}

/// The epoch whose write gate was closed (`GOTRY_STATUS_FENCED`).
///
/// Returns `GOTRY_STATUS_NO_VALUE` for any other error, and `GOTRY_STATUS_NULL_ARGUMENT`
/// when an argument is NULL.
///
/// # Safety
/// `error` must be NULL or a live `GotryError`; `out_epoch` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_error_epoch(error: *const GotryError, out_epoch: *mut i64) -> GotryStatus {
    unsafe {
        read_into("error", error, "out_epoch", out_epoch, |error| {
            match &error.detail {
                Detail::Fenced { epoch, .. } => Ok(*epoch),
                _ => Err(no_value("only a FENCED error carries an epoch")),
            }
        })
    }
}

/// How many calls were still running when a drain gave up (`GOTRY_STATUS_DRAIN_TIMEOUT`).
///
/// Returns `GOTRY_STATUS_NO_VALUE` for any other error, and `GOTRY_STATUS_NULL_ARGUMENT`
/// when an argument is NULL.
///
/// # Safety
/// `error` must be NULL or a live `GotryError`; `out_in_flight` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_error_in_flight(
    error: *const GotryError,
    out_in_flight: *mut u64,
) -> GotryStatus {
    unsafe {
        read_into(
            "error",
            error,
            "out_in_flight",
            out_in_flight,
            |error| match &error.detail {
                Detail::DrainTimeout { in_flight, .. } => Ok(*in_flight),
                _ => Err(no_value("only a DRAIN_TIMEOUT error carries a count in flight")),
            },
        )
    }
}

/// How long a drain waited before it gave up, in milliseconds (`GOTRY_STATUS_DRAIN_TIMEOUT`).
///
/// Returns `GOTRY_STATUS_NO_VALUE` for any other error, and `GOTRY_STATUS_NULL_ARGUMENT`
/// when an argument is NULL.
///
/// # Safety
/// `error` must be NULL or a live `GotryError`; `out_timeout_ms` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_error_timeout_ms(
    error: *const GotryError,
    out_timeout_ms: *mut u64,
) -> GotryStatus {
    unsafe {
        read_into(
            "error",
            error,
            "out_timeout_ms",
            out_timeout_ms,
            |error| match &error.detail {
                Detail::DrainTimeout { timeout_ms, .. } => Ok(*timeout_ms),
                _ => Err(no_value("only a DRAIN_TIMEOUT error carries a timeout")),
            },
        )
    }
}

/// The configured number of tenants this replica serves (`GOTRY_STATUS_REPLICA_AT_CAPACITY`).
///
/// Returns `GOTRY_STATUS_NO_VALUE` for any other error, and `GOTRY_STATUS_NULL_ARGUMENT`
/// when an argument is NULL.
///
/// # Safety
/// `error` must be NULL or a live `GotryError`; `out_limit` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_error_limit(error: *const GotryError, out_limit: *mut u64) -> GotryStatus {
    unsafe {
        read_into("error", error, "out_limit", out_limit, |error| {
            match &error.detail {
                Detail::ReplicaAtCapacity { limit } => Ok(*limit),
                _ => Err(no_value("only a REPLICA_AT_CAPACITY error carries a limit")),
            }
        })
    }
}

/// How many durable copies a failed restore skipped (`GOTRY_STATUS_RESTORE_INVALID`); read
/// each with `gotry_error_skipped`.
///
/// Returns `GOTRY_STATUS_NO_VALUE` for any other error, and `GOTRY_STATUS_NULL_ARGUMENT`
/// when an argument is NULL.
///
/// # Safety
/// `error` must be NULL or a live `GotryError`; `out_count` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_error_skipped_count(
    error: *const GotryError,
    out_count: *mut usize,
) -> GotryStatus {
    unsafe {
        read_into("error", error, "out_count", out_count, |error| {
            Ok(skipped(error)?.len())
        })
    }
}

/// Reads skipped copy `index` of a failed restore (newest first): its epoch, sequence
/// number and reason.
///
/// Returns `GOTRY_STATUS_NO_VALUE` for an error that is not RESTORE_INVALID,
/// `GOTRY_STATUS_INVALID_ARGUMENT` when `index` is not below the count, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `error` must be NULL or a live `GotryError`; `out_skipped` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_error_skipped(
    error: *const GotryError,
    index: usize,
    out_skipped: *mut GotrySkippedCopy,
) -> GotryStatus {
    unsafe {
        read_into("error", error, "out_skipped", out_skipped, |error| {
            Ok(*element(skipped(error)?, index)?)
        })
    }
}

fn skipped(error: &GotryError) -> Result<&[GotrySkippedCopy], Failure> {
    match &error.detail {
        Detail::RestoreInvalid { skipped } => Ok(skipped),
        _ => Err(no_value("only a RESTORE_INVALID error carries skipped copies")),
    }
}

/// The durable store's own name for its failure (`GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE`),
/// NUL-terminated and borrowed from `error`: an errno name as Node gives it for a folder
/// (e.g. `EROFS`, `ENOTDIR`), or the S3 error code. For logs and alerts; branch on the
/// status.
///
/// Returns `GOTRY_STATUS_NO_VALUE` for any other error, and `GOTRY_STATUS_NULL_ARGUMENT`
/// when an argument is NULL.
///
/// # Safety
/// `error` must be NULL or a live `GotryError`; `out_code` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_error_backend_code(
    error: *const GotryError,
    out_code: *mut *const c_char,
) -> GotryStatus {
    unsafe {
        read_into("error", error, "out_code", out_code, |error| {
            match &error.detail {
                Detail::DurableStoreUnavailable { backend_code } => Ok(backend_code.ptr()),
                _ => Err(no_value(
                    "only a DURABLE_STORE_UNAVAILABLE error carries a backend code",
                )),
            }
        })
    }
}

/// The buffer size a call needed, NUL included (`GOTRY_STATUS_BUFFER_TOO_SMALL`): call again
/// with a buffer at least this large.
///
/// Returns `GOTRY_STATUS_NO_VALUE` for any other error, and `GOTRY_STATUS_NULL_ARGUMENT`
/// when an argument is NULL.
///
/// # Safety
/// `error` must be NULL or a live `GotryError`; `out_len` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_error_buffer_len(
    error: *const GotryError,
    out_len: *mut usize,
) -> GotryStatus {
    unsafe {
        read_into("error", error, "out_len", out_len, |error| match &error.detail {
            Detail::BufferTooSmall { needed } => Ok(*needed),
            _ => Err(no_value("only a BUFFER_TOO_SMALL error carries a buffer size")),
        })
    }
}

/// The value a host's callback returned when it failed (`GOTRY_STATUS_HOST_CALLBACK_FAILED`
/// from a `GotrySnapshotFn`): whatever non-zero value the host chose, a SQLite result code
/// for instance.
///
/// Returns `GOTRY_STATUS_NO_VALUE` for any other error (a snapshot refused because its
/// router was freed included), and `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `error` must be NULL or a live `GotryError`; `out_code` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_error_host_code(error: *const GotryError, out_code: *mut i32) -> GotryStatus {
    unsafe {
        read_into("error", error, "out_code", out_code, |error| {
            match &error.detail {
                Detail::Host { code } => Ok(*code),
                _ => Err(no_value(
                    "only a host callback's failure carries its return value",
                )),
            }
        })
    }
}

/// Frees an error; NULL does nothing. Strings and views read from it become dangling.
///
/// # Safety
/// `error` must be NULL or a `GotryError` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_error_free(error: *mut GotryError) {
    unsafe { free_handle(error) }
}

#[cfg(test)]
mod tests {
    //! Errors are built by hand here: the router cannot raise its codes yet, and the copies'
    //! fields are proven readable without a store in the state that raises them.
    use super::*;
    use crate::status::GotrySkipReason;
    use std::ffi::CStr;

    fn boxed(error: Error) -> *mut GotryError {
        Box::into_raw(Box::new(GotryError::from(Failure::Core(error))))
    }

    fn read(ptr: *const c_char, len: usize) -> String {
        // SAFETY: accessors lend `len` bytes that the error owns.
        let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[test]
    fn drain_timeout_fields() {
        let error = boxed(Error::DrainTimeout {
            key: "acme/t-1".into(),
            in_flight: 3,
            timeout_ms: 2_500,
        });
        let (mut in_flight, mut timeout, mut key, mut key_len) = (0u64, 0u64, std::ptr::null(), 0usize);
        // SAFETY: `error` is live until freed at the end; out-parameters are locals.
        unsafe {
            assert_eq!(gotry_error_status(error), GotryStatus::DrainTimeout);
            assert_eq!(gotry_error_in_flight(error, &mut in_flight), GotryStatus::Ok);
            assert_eq!(gotry_error_timeout_ms(error, &mut timeout), GotryStatus::Ok);
            assert_eq!(gotry_error_key(error, &mut key, &mut key_len), GotryStatus::Ok);
            assert_eq!(gotry_error_limit(error, &mut 0), GotryStatus::NoValue);
            assert_eq!(gotry_error_epoch(error, &mut 0), GotryStatus::NoValue);
            let mut code = std::ptr::null();
            assert_eq!(gotry_error_code(error, &mut code), GotryStatus::Ok);
            assert_eq!(
                CStr::from_ptr(code).to_str().unwrap(),
                "GOTRY_TENANT_DRAIN_TIMEOUT"
            );
            assert_eq!(
                (in_flight, timeout, read(key, key_len)),
                (3, 2_500, "acme/t-1".to_owned())
            );
            gotry_error_free(error);
        }
    }

    #[test]
    fn restore_invalid_lists_its_skipped_copies() {
        use gotry_core::{CopyId, SkipReason, SkippedCopy};
        let error = boxed(Error::RestoreInvalid {
            message: "no copy verified".into(),
            skipped: vec![
                SkippedCopy {
                    id: CopyId { epoch: 4, seq: 2 },
                    reason: SkipReason::Checksum,
                },
                SkippedCopy {
                    id: CopyId {
                        epoch: 3,
                        seq: u64::MAX,
                    },
                    reason: SkipReason::Superseded,
                },
            ],
        });
        let (mut count, mut len, mut name) = (0usize, 0usize, std::ptr::null());
        let mut copy = GotrySkippedCopy {
            epoch: -1,
            seq: 0,
            reason: GotrySkipReason::Manifest,
        };
        // SAFETY: as above.
        unsafe {
            assert_eq!(gotry_error_skipped_count(error, &mut count), GotryStatus::Ok);
            assert_eq!(count, 2);
            assert_eq!(gotry_error_skipped(error, 1, &mut copy), GotryStatus::Ok);
            assert_eq!(
                copy,
                GotrySkippedCopy {
                    epoch: 3,
                    seq: u64::MAX,
                    reason: GotrySkipReason::Superseded
                }
            );
            assert_eq!(gotry_error_skipped(error, 0, &mut copy), GotryStatus::Ok);
            assert_eq!(
                (copy.epoch, copy.seq, copy.reason),
                (4, 2, GotrySkipReason::Checksum)
            );
            assert_eq!(
                gotry_error_skipped(error, 2, &mut copy),
                GotryStatus::InvalidArgument
            );
            assert_eq!(copy.epoch, 4, "a refused index leaves the out-parameter alone");
            assert_eq!(gotry_error_key(error, &mut name, &mut len), GotryStatus::NoValue);
            assert_eq!(gotry_error_backend_code(error, &mut name), GotryStatus::NoValue);
            let mut message = std::ptr::null();
            assert_eq!(
                gotry_error_message(error, &mut message, &mut len),
                GotryStatus::Ok
            );
            assert_eq!(read(message, len), "no copy verified");
            gotry_error_free(error);
        }
    }

    #[test]
    fn durable_store_unavailable_keeps_the_backend_code() {
        let error = boxed(Error::DurableStoreUnavailable {
            message: "orgs/acme cannot be listed: Read-only file system".into(),
            backend_code: "EROFS".into(),
        });
        let mut code = std::ptr::null();
        // SAFETY: as above.
        unsafe {
            assert_eq!(gotry_error_status(error), GotryStatus::DurableStoreUnavailable);
            assert_eq!(gotry_error_backend_code(error, &mut code), GotryStatus::Ok);
            assert_eq!(CStr::from_ptr(code).to_str().unwrap(), "EROFS");
            assert_eq!(gotry_error_code(error, &mut code), GotryStatus::Ok);
            assert_eq!(
                CStr::from_ptr(code).to_str().unwrap(),
                "GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE"
            );
            assert_eq!(gotry_error_skipped_count(error, &mut 0), GotryStatus::NoValue);
            assert_eq!(
                gotry_error_backend_code(error, std::ptr::null_mut()),
                GotryStatus::NullArgument
            );
            gotry_error_free(error);
            assert_eq!(
                gotry_error_backend_code(std::ptr::null(), &mut code),
                GotryStatus::NullArgument
            );
        }
    }

    #[test]
    fn draining_and_capacity_fields() {
        let draining = boxed(Error::Draining { key: "k\0x".into() });
        let capacity = boxed(Error::ReplicaAtCapacity { limit: 40 });
        let (mut key, mut len, mut limit) = (std::ptr::null(), 0usize, 0u64);
        // SAFETY: as above.
        unsafe {
            assert_eq!(gotry_error_key(draining, &mut key, &mut len), GotryStatus::Ok);
            assert_eq!(read(key, len), "k\0x", "a key with a NUL keeps its length");
            assert_eq!(gotry_error_limit(capacity, &mut limit), GotryStatus::Ok);
            assert_eq!(limit, 40);
            assert_eq!(gotry_error_status(capacity), GotryStatus::ReplicaAtCapacity);
            assert_eq!(gotry_error_skipped_count(capacity, &mut 0), GotryStatus::NoValue);
            assert_eq!(gotry_error_buffer_len(capacity, &mut 0), GotryStatus::NoValue);
            gotry_error_free(draining);
            gotry_error_free(capacity);
            assert_eq!(gotry_error_status(std::ptr::null()), GotryStatus::NullArgument);
        }
    }
}
