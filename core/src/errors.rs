//! The typed failures of the tenant-state layer.
//!
//! Hosts branch on [`ErrorCode::as_str`] (the stable `GOTRY_TENANT_*` string) or on the
//! host's error class built from it, never on messages. Every failure maps to an
//! availability outcome: a holder that cannot prove it still owns a tenant stops
//! acknowledging writes, it never carries on silently.

use std::fmt;

use crate::records::{LeaseRecord, SkippedCopy};

/// The stable codes: the reference implementation's twelve in its order, then this layer's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    LeaseHeld,
    LeaseLost,
    Fenced,
    LeaseStoreUnavailable,
    IdInvalid,
    DurableStoreUnavailable,
    RestoreInvalid,
    CopyConflict,
    Draining,
    DrainTimeout,
    RouterClosed,
    ReplicaAtCapacity,
    TenantBusy,
    OpenInProcess,
    CallInDoubt,
}

impl ErrorCode {
    /// Every code, so that each binding can prove it exposes exactly this list.
    pub const ALL: [ErrorCode; 15] = [
        ErrorCode::LeaseHeld,
        ErrorCode::LeaseLost,
        ErrorCode::Fenced,
        ErrorCode::LeaseStoreUnavailable,
        ErrorCode::IdInvalid,
        ErrorCode::DurableStoreUnavailable,
        ErrorCode::RestoreInvalid,
        ErrorCode::CopyConflict,
        ErrorCode::Draining,
        ErrorCode::DrainTimeout,
        ErrorCode::RouterClosed,
        ErrorCode::ReplicaAtCapacity,
        ErrorCode::TenantBusy,
        ErrorCode::OpenInProcess,
        ErrorCode::CallInDoubt,
    ];

    /// The stable string that callers branch on.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::LeaseHeld => "GOTRY_TENANT_LEASE_HELD",
            ErrorCode::LeaseLost => "GOTRY_TENANT_LEASE_LOST",
            ErrorCode::Fenced => "GOTRY_TENANT_FENCED",
            ErrorCode::LeaseStoreUnavailable => "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE",
            ErrorCode::IdInvalid => "GOTRY_TENANT_ID_INVALID",
            ErrorCode::DurableStoreUnavailable => "GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE",
            ErrorCode::RestoreInvalid => "GOTRY_TENANT_RESTORE_INVALID",
            ErrorCode::CopyConflict => "GOTRY_TENANT_COPY_CONFLICT",
            ErrorCode::Draining => "GOTRY_TENANT_DRAINING",
            ErrorCode::DrainTimeout => "GOTRY_TENANT_DRAIN_TIMEOUT",
            ErrorCode::RouterClosed => "GOTRY_TENANT_ROUTER_CLOSED",
            ErrorCode::ReplicaAtCapacity => "GOTRY_TENANT_REPLICA_AT_CAPACITY",
            ErrorCode::TenantBusy => "GOTRY_TENANT_BUSY",
            ErrorCode::OpenInProcess => "GOTRY_TENANT_OPEN_IN_PROCESS",
            ErrorCode::CallInDoubt => "GOTRY_TENANT_CALL_IN_DOUBT",
        }
    }

    /// The reference's class name for this code (`err.name` in JS, the exception class in Python).
    pub const fn class_name(self) -> &'static str {
        match self {
            ErrorCode::LeaseHeld => "LeaseHeldError",
            ErrorCode::LeaseLost => "LeaseLostError",
            ErrorCode::Fenced => "FencedError",
            ErrorCode::LeaseStoreUnavailable => "LeaseStoreUnavailableError",
            ErrorCode::IdInvalid => "InvalidTenantIdError",
            ErrorCode::DurableStoreUnavailable => "DurableStoreUnavailableError",
            ErrorCode::RestoreInvalid => "RestoreVerificationError",
            ErrorCode::CopyConflict => "CopyConflictError",
            ErrorCode::Draining => "TenantDrainingError",
            ErrorCode::DrainTimeout => "DrainTimeoutError",
            ErrorCode::RouterClosed => "RouterClosedError",
            ErrorCode::ReplicaAtCapacity => "ReplicaAtCapacityError",
            ErrorCode::TenantBusy => "TenantBusyError",
            ErrorCode::OpenInProcess => "OpenInProcessError",
            ErrorCode::CallInDoubt => "CallInDoubtError",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the write gate of a holder is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FenceReason {
    /// The holder released the lease.
    LeaseReleased,
    /// A renewal was refused: someone else may hold the tenant now.
    LeaseLost,
    /// The local deadline passed before a renewal moved it.
    LeaseExpiredLocally,
}

impl FenceReason {
    /// The reference's `reason` string.
    pub const fn as_str(self) -> &'static str {
        match self {
            FenceReason::LeaseReleased => "lease_released",
            FenceReason::LeaseLost => "lease_lost",
            FenceReason::LeaseExpiredLocally => "lease_expired_locally",
        }
    }
}

impl fmt::Display for FenceReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure of a host-supplied callback (a clock written in JS or Python). The binding
/// that made it downcasts it back to re-raise the host's own exception unchanged.
pub type HostError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Every failure of the core.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Another holder has an unexpired lease; carries its record so a router can forward.
    LeaseHeld {
        record: LeaseRecord,
    },
    /// The caller does not hold the lease (expired, taken over, or never held).
    LeaseLost {
        message: String,
    },
    /// The write gate is closed for this holder.
    Fenced {
        reason: FenceReason,
        key: String,
        epoch: i64,
    },
    /// The lease store could not be reached or was contended.
    LeaseStoreUnavailable {
        message: String,
    },
    /// An organization id, tenant id, claim or key is not acceptable.
    IdInvalid {
        message: String,
    },
    /// The durable store failed or could not be reached; `backend_code` is the backend's
    /// own name for the failure (an errno name such as `EROFS`, or an S3 error code).
    DurableStoreUnavailable {
        message: String,
        backend_code: String,
    },
    /// Copies exist but none can be trusted; every one passed over, with its reason.
    RestoreInvalid {
        message: String,
        skipped: Vec<SkippedCopy>,
    },
    CopyConflict {
        message: String,
    },
    Draining {
        key: String,
    },
    DrainTimeout {
        key: String,
        in_flight: u64,
        timeout_ms: u64,
    },
    RouterClosed,
    ReplicaAtCapacity {
        limit: u64,
    },
    /// A copy could not read a tenant's files: `running` calls of it kept running for
    /// `waited_ms`. Nothing was copied; the calls themselves are unaffected.
    TenantBusy {
        key: String,
        running: u64,
        waited_ms: u64,
    },
    /// A file is open through another handle of this process, so this library's SQLite may
    /// not open it (POSIX locks belong to the process: it would drop the host's locks).
    OpenInProcess {
        message: String,
    },
    /// A router call's handler ran and returned, but its acknowledgement could not be
    /// confirmed (the gate closed after it, or its strict copy failed): its write may be in a
    /// durable copy or not. Every failure of a router call that is not this one was raised
    /// before the handler ran, so nothing was written and a retry is safe.
    CallInDoubt {
        key: String,
        epoch: i64,
        cause: Box<Error>,
    },
    /// An argument out of its range (TTL, margin, epoch, text length): `RangeError` in JS.
    InvalidArgument {
        message: String,
    },
    /// A storage failure that is not contention, with the storage engine's own code name
    /// (for SQLite the extended result code, e.g. `SQLITE_NOTADB`).
    Storage {
        code: String,
        message: String,
    },
    /// A host callback failed; see [`HostError`].
    Host(HostError),
}

/// The core's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The stable code, for the errors that have one.
    pub fn code(&self) -> Option<ErrorCode> {
        Some(match self {
            Error::LeaseHeld { .. } => ErrorCode::LeaseHeld,
            Error::LeaseLost { .. } => ErrorCode::LeaseLost,
            Error::Fenced { .. } => ErrorCode::Fenced,
            Error::LeaseStoreUnavailable { .. } => ErrorCode::LeaseStoreUnavailable,
            Error::IdInvalid { .. } => ErrorCode::IdInvalid,
            Error::DurableStoreUnavailable { .. } => ErrorCode::DurableStoreUnavailable,
            Error::RestoreInvalid { .. } => ErrorCode::RestoreInvalid,
            Error::CopyConflict { .. } => ErrorCode::CopyConflict,
            Error::Draining { .. } => ErrorCode::Draining,
            Error::DrainTimeout { .. } => ErrorCode::DrainTimeout,
            Error::RouterClosed => ErrorCode::RouterClosed,
            Error::ReplicaAtCapacity { .. } => ErrorCode::ReplicaAtCapacity,
            Error::TenantBusy { .. } => ErrorCode::TenantBusy,
            Error::OpenInProcess { .. } => ErrorCode::OpenInProcess,
            Error::CallInDoubt { .. } => ErrorCode::CallInDoubt,
            Error::InvalidArgument { .. } | Error::Storage { .. } | Error::Host(_) => return None,
        })
    }

    /// The code as a string: a `GOTRY_TENANT_*` code, or `ERR_OUT_OF_RANGE`, the storage
    /// engine's code name, or `HOST_CALLBACK` for the kinds outside the registry.
    pub fn code_str(&self) -> &str {
        match self {
            Error::InvalidArgument { .. } => "ERR_OUT_OF_RANGE",
            Error::Storage { code, .. } => code,
            Error::Host(_) => "HOST_CALLBACK",
            other => other.code().map(ErrorCode::as_str).unwrap_or_default(),
        }
    }

    /// A file-system failure, named as Node names it (`ENOENT`, `ENOTDIR`, ...), so hosts
    /// see the same code in every language.
    pub(crate) fn io(context: impl fmt::Display, error: &std::io::Error) -> Error {
        Error::Storage {
            code: errno_name(error).to_owned(),
            message: format!("{context}: {error}"),
        }
    }

    /// A durable store failure from the file system, with the errno's name kept.
    pub(crate) fn durable_io(context: impl fmt::Display, error: &std::io::Error) -> Error {
        Error::durable(errno_name(error), format!("{context}: {error}"))
    }

    pub(crate) fn durable(backend_code: impl Into<String>, message: impl Into<String>) -> Error {
        Error::DurableStoreUnavailable {
            message: message.into(),
            backend_code: backend_code.into(),
        }
    }

    pub(crate) fn copy_conflict(message: impl Into<String>) -> Error {
        Error::CopyConflict {
            message: message.into(),
        }
    }

    pub(crate) fn id_invalid(message: impl Into<String>) -> Error {
        Error::IdInvalid {
            message: message.into(),
        }
    }

    pub(crate) fn invalid_argument(message: impl Into<String>) -> Error {
        Error::InvalidArgument {
            message: message.into(),
        }
    }

    pub(crate) fn lease_lost(message: impl Into<String>) -> Error {
        Error::LeaseLost {
            message: message.into(),
        }
    }

    pub(crate) fn unavailable(message: impl Into<String>) -> Error {
        Error::LeaseStoreUnavailable {
            message: message.into(),
        }
    }
}

/// The `errno` names the layer reports, by the platform's own constants, so each name means
/// what this platform's number does; any other failure is `EIO`.
macro_rules! errno_names {
    ($($name:ident),* $(,)?) => {
        /// Every name [`errno_name`] can answer.
        pub const ERRNO_NAMES: &[&str] = &[$(stringify!($name),)*];

        /// The `errno` name of an I/O failure, as a shell user knows it (`ENOSPC`), for the
        /// core's errors and every door's and the CLI's messages alike.
        pub fn errno_name(error: &std::io::Error) -> &'static str {
            match error.raw_os_error() {
                $(Some(libc::$name) => stringify!($name),)*
                // Not an errno the layer meets on files (or not one at all): an I/O failure.
                _ => "EIO",
            }
        }
    };
}

errno_names!(
    EPERM,
    ENOENT,
    EIO,
    ENXIO,
    EBADF,
    EAGAIN,
    ENOMEM,
    EACCES,
    EBUSY,
    EEXIST,
    EXDEV,
    ENOTDIR,
    EISDIR,
    EINVAL,
    ENFILE,
    EMFILE,
    ETXTBSY,
    EFBIG,
    ENOSPC,
    EROFS,
    EMLINK,
    ENAMETOOLONG,
    ENOTEMPTY,
    ELOOP,
    ENOTSUP,
    EDQUOT,
    ESTALE,
    EINTR,
);

/// Every door shows this text (a JS `message`, a Python `str`, the C message), and a
/// message may quote what a host passed in, so it leaves here masked of credentials.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = Unmasked(self).to_string();
        f.write_str(&crate::secrets::mask(&text))
    }
}

/// The text as the error was built, before masking.
struct Unmasked<'a>(&'a Error);

impl fmt::Display for Unmasked<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Error::LeaseHeld { record } => write!(
                f,
                "lease {} is held by {} at epoch {}",
                record.key, record.owner, record.epoch
            ),
            Error::Fenced { reason, key, epoch } => {
                write!(f, "tenant {key} epoch {epoch} is fenced: {reason}")
            }
            Error::Draining { key } => write!(f, "tenant {key} is being handed off"),
            Error::DrainTimeout {
                key,
                in_flight,
                timeout_ms,
            } => write!(
                f,
                "tenant {key} still had {in_flight} call(s) running after {timeout_ms} ms of draining"
            ),
            Error::RouterClosed => f.write_str("the tenant router is closed"),
            Error::ReplicaAtCapacity { limit } => write!(
                f,
                "this replica already serves its configured maximum of {limit} tenants"
            ),
            Error::TenantBusy {
                key,
                running,
                waited_ms,
            } => write!(
                f,
                "tenant {key}: {running} call(s) kept running for {waited_ms} ms, so no copy could read its files"
            ),
            Error::CallInDoubt { key, epoch, cause } => write!(
                f,
                "tenant {key} epoch {epoch}: the call ran but its copy is unconfirmed, so its write may or may not be durable ({}: {})",
                cause.code_str(),
                Unmasked(cause)
            ),
            Error::Storage { code, message } => write!(f, "{code}: {message}"),
            Error::Host(source) => write!(f, "host callback failed: {source}"),
            Error::LeaseLost { message }
            | Error::LeaseStoreUnavailable { message }
            | Error::IdInvalid { message }
            | Error::DurableStoreUnavailable { message, .. }
            | Error::RestoreInvalid { message, .. }
            | Error::CopyConflict { message }
            | Error::OpenInProcess { message }
            | Error::InvalidArgument { message } => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Host(source) => Some(source.as_ref()),
            Error::CallInDoubt { cause, .. } => Some(cause.as_ref()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_leave_the_core_masked_of_credentials() {
        let error = Error::invalid_argument("no store at mysql//root:Pa55@db.example/leases");
        let shown = error.to_string();
        assert!(!shown.contains("Pa55"), "{shown}");
        assert!(shown.contains("@db.example/leases"), "{shown}");
    }

    #[test]
    fn codes_are_unique_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(code.as_str().starts_with("GOTRY_TENANT_"));
            assert!(seen.insert(code.as_str()), "duplicate {code}");
        }
        assert_eq!(seen.len(), ErrorCode::ALL.len());
    }

    #[test]
    fn io_errors_keep_their_names() {
        let error = Error::io("open x", &std::io::Error::from_raw_os_error(libc::ENOTDIR));
        assert_eq!(error.code_str(), "ENOTDIR");
        assert!(error.to_string().contains("open x"));
        assert_eq!(Error::io("x", &std::io::Error::other("boom")).code_str(), "EIO");
        for (errno, name) in [
            (libc::ENAMETOOLONG, "ENAMETOOLONG"),
            (libc::EDQUOT, "EDQUOT"),
            (libc::EXDEV, "EXDEV"),
            (libc::ENOTEMPTY, "ENOTEMPTY"),
        ] {
            let error = std::io::Error::from_raw_os_error(errno);
            assert_eq!(Error::io("x", &error).code_str(), name);
        }
    }

    #[test]
    fn kinds_outside_the_registry_have_no_code() {
        assert_eq!(Error::invalid_argument("x").code(), None);
        assert_eq!(Error::invalid_argument("x").code_str(), "ERR_OUT_OF_RANGE");
        let storage = Error::Storage {
            code: "SQLITE_NOTADB".into(),
            message: "file is not a database".into(),
        };
        assert_eq!(storage.code(), None);
        assert_eq!(storage.code_str(), "SQLITE_NOTADB");
        assert_eq!(Error::RouterClosed.code_str(), "GOTRY_TENANT_ROUTER_CLOSED");
    }
}
