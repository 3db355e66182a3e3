//! The typed failures of the tenant-state layer.
//!
//! Hosts branch on [`ErrorCode::as_str`] (the stable `GOTRY_TENANT_*` string) or on the
//! host's error class built from it, never on messages. Every failure maps to an
//! availability outcome: a holder that cannot prove it still owns a tenant stops
//! acknowledging writes, it never carries on silently.

use std::fmt;

use crate::records::{LeaseRecord, SkippedCopy};

/// Declares each stable code once, as pydantic-core's `error_types!` does: its variant, its
/// `GOTRY_TENANT_*` string, the reference's class name, the fields the failure carries (in the
/// core's snake_case) and the template of its message. Every door reads this table
/// ([`ErrorCode::ALL`] with [`ErrorCode::template`]) instead of wording a message again, so a
/// message a host builds itself (`new DrainTimeoutError(key, inFlight, timeoutMs)`) says what
/// the core's [`Error`] says.
macro_rules! error_types {
    ($(
        $variant:ident {
            code: $code:literal,
            class: $class:literal,
            fields: [$($field:literal),* $(,)?],
            template: $template:literal $(,)?
        }
    )*) => {
        /// The stable codes: the reference implementation's twelve in its order, then this
        /// layer's own.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($variant,)*
        }

        impl ErrorCode {
            /// Every code, so that each binding can prove it exposes exactly this list.
            pub const ALL: [ErrorCode; [$($code),*].len()] = [$(ErrorCode::$variant),*];

            /// The stable string that callers branch on.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $code,)*
                }
            }

            /// The reference's class name for this code (`err.name` in JS, the exception class
            /// in Python).
            pub const fn class_name(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $class,)*
                }
            }

            /// What a failure of this code carries, in the core's snake_case (a door may spell
            /// them in its own case: `in_flight` is `inFlight` in JS).
            pub const fn fields(self) -> &'static [&'static str] {
                match self {
                    $(ErrorCode::$variant => &[$($field),*],)*
                }
            }

            /// The message, with `{field}` (or `{field.part}` for a field that is a record)
            /// where [`fill_template`] puts a field's value.
            pub const fn template(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $template,)*
                }
            }
        }
    };
}

error_types! {
    LeaseHeld {
        code: "GOTRY_TENANT_LEASE_HELD",
        class: "LeaseHeldError",
        fields: ["record"],
        template: "lease {record.key} is held by {record.owner} at epoch {record.epoch}",
    }
    LeaseLost {
        code: "GOTRY_TENANT_LEASE_LOST",
        class: "LeaseLostError",
        fields: ["message"],
        template: "{message}",
    }
    Fenced {
        code: "GOTRY_TENANT_FENCED",
        class: "FencedError",
        fields: ["reason", "key", "epoch"],
        template: "tenant {key} epoch {epoch} is fenced: {reason}",
    }
    LeaseStoreUnavailable {
        code: "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE",
        class: "LeaseStoreUnavailableError",
        fields: ["message"],
        template: "{message}",
    }
    IdInvalid {
        code: "GOTRY_TENANT_ID_INVALID",
        class: "InvalidTenantIdError",
        fields: ["message"],
        template: "{message}",
    }
    DurableStoreUnavailable {
        code: "GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE",
        class: "DurableStoreUnavailableError",
        fields: ["message", "backend_code"],
        template: "{message}",
    }
    RestoreInvalid {
        code: "GOTRY_TENANT_RESTORE_INVALID",
        class: "RestoreVerificationError",
        fields: ["message", "skipped"],
        template: "{message}",
    }
    CopyConflict {
        code: "GOTRY_TENANT_COPY_CONFLICT",
        class: "CopyConflictError",
        fields: ["message"],
        template: "{message}",
    }
    Draining {
        code: "GOTRY_TENANT_DRAINING",
        class: "TenantDrainingError",
        fields: ["key"],
        template: "tenant {key} is being handed off",
    }
    DrainTimeout {
        code: "GOTRY_TENANT_DRAIN_TIMEOUT",
        class: "DrainTimeoutError",
        fields: ["key", "in_flight", "timeout_ms"],
        template: "tenant {key} still had {in_flight} call(s) running after {timeout_ms} ms of draining",
    }
    RouterClosed {
        code: "GOTRY_TENANT_ROUTER_CLOSED",
        class: "RouterClosedError",
        fields: [],
        template: "the tenant router is closed",
    }
    ReplicaAtCapacity {
        code: "GOTRY_TENANT_REPLICA_AT_CAPACITY",
        class: "ReplicaAtCapacityError",
        fields: ["limit"],
        template: "this replica already serves its configured maximum of {limit} tenants",
    }
    TenantBusy {
        code: "GOTRY_TENANT_BUSY",
        class: "TenantBusyError",
        fields: ["key", "running", "waited_ms"],
        template: "tenant {key}: {running} call(s) kept running for {waited_ms} ms, so no copy could read its files",
    }
    OpenInProcess {
        code: "GOTRY_TENANT_OPEN_IN_PROCESS",
        class: "OpenInProcessError",
        fields: ["message"],
        template: "{message}",
    }
    // The core's message goes on with the cause's code and words, `(GOTRY_TENANT_FENCED: ...)`,
    // as every error with a cause does in [`Error`]'s `Display`; a host shows its own cause.
    CallInDoubt {
        code: "GOTRY_TENANT_CALL_IN_DOUBT",
        class: "CallInDoubtError",
        fields: ["key", "epoch", "cause"],
        template: "tenant {key} epoch {epoch}: the call ran but its copy is unconfirmed, so its write may or may not be durable",
    }
}

/// Writes `template` with each `{name}` replaced by the value `values` gives that name: the
/// rule each door's small filler repeats for the messages a host builds itself (a few lines,
/// tested there against this table). A `{name}` without a value is written as it stands, so a
/// template that names a field the error lacks shows it rather than hiding it.
pub fn fill_template(
    f: &mut impl fmt::Write,
    template: &str,
    values: &[(&str, &dyn fmt::Display)],
) -> fmt::Result {
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        f.write_str(&rest[..open])?;
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return f.write_str(&rest[open..]);
        };
        let name = &after[..close];
        match values.iter().find(|(field, _)| *field == name) {
            Some((_, value)) => write!(f, "{value}")?,
            None => f.write_str(&rest[open..open + close + 2])?,
        }
        rest = &after[close + 1..];
    }
    f.write_str(rest)
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
            Error::Storage { code, message } => write!(f, "{code}: {message}"),
            Error::Host(source) => write!(f, "host callback failed: {source}"),
            Error::InvalidArgument { message } => f.write_str(message),
            Error::CallInDoubt { cause, .. } => {
                self.0.write_template(f)?;
                write!(f, " ({}: {})", cause.code_str(), Unmasked(cause))
            }
            other => other.write_template(f),
        }
    }
}

impl Error {
    /// The message of a code of the registry: its template, filled from this error.
    fn write_template(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let template = self.code().map_or("", ErrorCode::template);
        fill_template(f, template, &self.template_values())
    }

    /// The values of the placeholders of this error's template, by the names the template
    /// gives them.
    fn template_values(&self) -> Vec<(&'static str, &dyn fmt::Display)> {
        match self {
            Error::LeaseHeld { record } => vec![
                ("record.key", &record.key),
                ("record.owner", &record.owner),
                ("record.epoch", &record.epoch),
            ],
            Error::Fenced { reason, key, epoch } => {
                vec![("reason", reason), ("key", key), ("epoch", epoch)]
            }
            Error::Draining { key } => vec![("key", key)],
            Error::DrainTimeout {
                key,
                in_flight,
                timeout_ms,
            } => vec![("key", key), ("in_flight", in_flight), ("timeout_ms", timeout_ms)],
            Error::ReplicaAtCapacity { limit } => vec![("limit", limit)],
            Error::TenantBusy {
                key,
                running,
                waited_ms,
            } => vec![("key", key), ("running", running), ("waited_ms", waited_ms)],
            Error::CallInDoubt { key, epoch, .. } => vec![("key", key), ("epoch", epoch)],
            Error::LeaseLost { message }
            | Error::LeaseStoreUnavailable { message }
            | Error::IdInvalid { message }
            | Error::DurableStoreUnavailable { message, .. }
            | Error::RestoreInvalid { message, .. }
            | Error::CopyConflict { message }
            | Error::OpenInProcess { message } => vec![("message", message)],
            Error::RouterClosed | Error::InvalidArgument { .. } | Error::Storage { .. } | Error::Host(_) => {
                Vec::new()
            }
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

    /// One failure of every code, in [`ErrorCode::ALL`]'s order, with the message each door
    /// has shown since before the templates were declared once: the texts do not change.
    fn one_of_each() -> Vec<(Error, &'static str)> {
        let record = LeaseRecord {
            key: "acme/t-1".into(),
            owner: "replica-a".into(),
            epoch: 7,
            lease_until_ms: 1_000,
            forgotten_at_epoch: 0,
        };
        vec![
            (
                Error::LeaseHeld { record },
                "lease acme/t-1 is held by replica-a at epoch 7",
            ),
            (Error::lease_lost("lost"), "lost"),
            (
                Error::Fenced {
                    reason: FenceReason::LeaseLost,
                    key: "k".into(),
                    epoch: 2,
                },
                "tenant k epoch 2 is fenced: lease_lost",
            ),
            (Error::unavailable("busy"), "busy"),
            (Error::id_invalid("bad"), "bad"),
            (Error::durable("EROFS", "down"), "down"),
            (
                Error::RestoreInvalid {
                    message: "checksum".into(),
                    skipped: Vec::new(),
                },
                "checksum",
            ),
            (Error::copy_conflict("two writers"), "two writers"),
            (
                Error::Draining { key: "k".into() },
                "tenant k is being handed off",
            ),
            (
                Error::DrainTimeout {
                    key: "k".into(),
                    in_flight: 3,
                    timeout_ms: 250,
                },
                "tenant k still had 3 call(s) running after 250 ms of draining",
            ),
            (Error::RouterClosed, "the tenant router is closed"),
            (
                Error::ReplicaAtCapacity { limit: 64 },
                "this replica already serves its configured maximum of 64 tenants",
            ),
            (
                Error::TenantBusy {
                    key: "k".into(),
                    running: 2,
                    waited_ms: 100,
                },
                "tenant k: 2 call(s) kept running for 100 ms, so no copy could read its files",
            ),
            (
                Error::OpenInProcess {
                    message: "open".into(),
                },
                "open",
            ),
            (
                Error::CallInDoubt {
                    key: "k".into(),
                    epoch: 4,
                    cause: Box::new(Error::Draining { key: "k".into() }),
                },
                "tenant k epoch 4: the call ran but its copy is unconfirmed, so its write may or \
                 may not be durable (GOTRY_TENANT_DRAINING: tenant k is being handed off)",
            ),
        ]
    }

    #[test]
    fn every_message_is_its_code_template_filled() {
        let cases = one_of_each();
        assert_eq!(cases.len(), ErrorCode::ALL.len());
        for ((error, shown), code) in cases.into_iter().zip(ErrorCode::ALL) {
            assert_eq!(error.code(), Some(code));
            assert_eq!(error.to_string(), shown, "{code}");
            // What the template leaves to its fields is all that differs from the message.
            let literal = code.template().split('{').next().unwrap_or_default();
            assert!(shown.starts_with(literal), "{code}: {shown}");
        }
    }

    #[test]
    fn every_template_names_only_the_fields_of_its_code() {
        for code in ErrorCode::ALL {
            let mut rest = code.template();
            while let Some(open) = rest.find('{') {
                let close = rest[open..].find('}').expect("a placeholder is closed") + open;
                let name = &rest[open + 1..close];
                let field = name.split('.').next().unwrap_or_default();
                assert!(code.fields().contains(&field), "{code}: {{{name}}}");
                rest = &rest[close + 1..];
            }
        }
    }

    #[test]
    fn a_template_is_filled_by_name_and_keeps_what_it_cannot_fill() {
        let fill = |template: &str, values: &[(&str, &dyn fmt::Display)]| {
            let mut out = String::new();
            fill_template(&mut out, template, values).map(|()| out)
        };
        let (key, count): (&dyn fmt::Display, &dyn fmt::Display) = (&"acme/t", &3);
        assert_eq!(
            fill("{key} had {n} and {key}", &[("n", count), ("key", key)]).as_deref(),
            Ok("acme/t had 3 and acme/t")
        );
        assert_eq!(
            fill("{missing} {key", &[("key", key)]).as_deref(),
            Ok("{missing} {key")
        );
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
