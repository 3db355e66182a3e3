//! The status every fallible call returns, and the small enums whose names C may print.

use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::OnceLock;

use gotry_core::{Error, ErrorCode, FenceReason, LeaseOp, SkipReason};

/// The outcome of a call. `GOTRY_STATUS_OK` is zero; values 1 to 12 are the twelve
/// `GOTRY_TENANT_*` codes in the reference's order (so `gotry_status_code` names them);
/// the values after them are the failures that have no such code.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GotryStatus {
    /// The call succeeded and wrote its out-parameters.
    Ok = 0,
    /// GOTRY_TENANT_LEASE_HELD: another holder has an unexpired lease; its record is in the
    /// error (`gotry_error_record`), so a router can forward to that owner.
    LeaseHeld = 1,
    /// GOTRY_TENANT_LEASE_LOST: the caller does not hold the lease (expired, taken over, or
    /// never held). Terminal for a holder.
    LeaseLost = 2,
    /// GOTRY_TENANT_FENCED: the write gate is closed; the reason, key and epoch are in the
    /// error. Do not acknowledge the write.
    Fenced = 3,
    /// GOTRY_TENANT_LEASE_STORE_UNAVAILABLE: the store could not answer (contended past its
    /// busy timeout, or closed). A holder keeps its deadline and fails closed when it passes.
    LeaseStoreUnavailable = 4,
    /// GOTRY_TENANT_ID_INVALID: an organization id, tenant id, partition, claim or
    /// organization key is not acceptable (bytes that are not UTF-8 included).
    IdInvalid = 5,
    /// GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE: the durable store failed or could not be
    /// reached; the backend's own name for the failure (an errno name such as `EROFS`, or an
    /// S3 error code) is in the error (`gotry_error_backend_code`). A copy that failed so is
    /// not taken as written; the lease is unaffected.
    DurableStoreUnavailable = 6,
    /// GOTRY_TENANT_RESTORE_INVALID: durable copies exist but none can be trusted; every
    /// skipped copy, with its reason, is in the error (`gotry_error_skipped`).
    RestoreInvalid = 7,
    /// GOTRY_TENANT_COPY_CONFLICT: something this holder did not write is in its epoch's
    /// prefix, or where it was about to write; the copy is not taken as written.
    CopyConflict = 8,
    /// GOTRY_TENANT_DRAINING: the tenant is being handed off; retry on the next owner.
    Draining = 9,
    /// GOTRY_TENANT_DRAIN_TIMEOUT: a handoff gave up waiting for running calls; the key,
    /// the count still running and the timeout are in the error.
    DrainTimeout = 10,
    /// GOTRY_TENANT_ROUTER_CLOSED: the router was closed.
    RouterClosed = 11,
    /// GOTRY_TENANT_REPLICA_AT_CAPACITY: this replica serves as many tenants as configured;
    /// the limit is in the error.
    ReplicaAtCapacity = 12,
    /// An argument out of its range: a TTL, margin, epoch, text length, list index, or text
    /// that must be UTF-8 and is not (`RangeError` in JavaScript, `ValueError` in Python).
    InvalidArgument = 13,
    /// Storage failed for a reason other than contention; `gotry_error_code` gives its own
    /// name: SQLite's (e.g. `SQLITE_NOTADB`), or for a file-system failure the errno name as
    /// Node gives it (e.g. `ENOTDIR`).
    StorageError = 14,
    /// A required pointer argument was NULL.
    NullArgument = 15,
    /// An output buffer is smaller than the answer; `gotry_error_buffer_len` tells the size
    /// needed.
    BufferTooSmall = 16,
    /// The object queried has no such detail (for instance a record on an error that is
    /// not LEASE_HELD).
    NoValue = 17,
    /// A bug inside the library was caught before it could reach the host. Please report it
    /// with the error's message.
    InternalError = 18,
    /// A host's callback reported a failure (a `GotrySnapshotFn` returned non-zero): the
    /// error's code is `HOST_CALLBACK`, its message holds what the callback wrote, and
    /// `gotry_error_host_code` gives the value it returned.
    HostCallbackFailed = 19,
}

/// The statuses with no `GOTRY_TENANT_*` code, in value order, with their names.
const OTHER_STATUSES: [(GotryStatus, &CStr); 8] = [
    (GotryStatus::Ok, c"GOTRY_STATUS_OK"),
    (GotryStatus::InvalidArgument, c"GOTRY_STATUS_INVALID_ARGUMENT"),
    (GotryStatus::StorageError, c"GOTRY_STATUS_STORAGE_ERROR"),
    (GotryStatus::NullArgument, c"GOTRY_STATUS_NULL_ARGUMENT"),
    (GotryStatus::BufferTooSmall, c"GOTRY_STATUS_BUFFER_TOO_SMALL"),
    (GotryStatus::NoValue, c"GOTRY_STATUS_NO_VALUE"),
    (GotryStatus::InternalError, c"GOTRY_STATUS_INTERNAL_ERROR"),
    (
        GotryStatus::HostCallbackFailed,
        c"GOTRY_STATUS_HOST_CALLBACK_FAILED",
    ),
];

impl GotryStatus {
    /// The name of a status that is not one of the twelve codes.
    pub(crate) fn other_name(self) -> Option<&'static CStr> {
        OTHER_STATUSES
            .iter()
            .find(|(s, _)| *s == self)
            .map(|(_, name)| *name)
    }

    /// The status of a core error code: its position in the reference's list, plus one.
    pub(crate) fn from_code(code: ErrorCode) -> GotryStatus {
        match code {
            ErrorCode::LeaseHeld => GotryStatus::LeaseHeld,
            ErrorCode::LeaseLost => GotryStatus::LeaseLost,
            ErrorCode::Fenced => GotryStatus::Fenced,
            ErrorCode::LeaseStoreUnavailable => GotryStatus::LeaseStoreUnavailable,
            ErrorCode::IdInvalid => GotryStatus::IdInvalid,
            ErrorCode::DurableStoreUnavailable => GotryStatus::DurableStoreUnavailable,
            ErrorCode::RestoreInvalid => GotryStatus::RestoreInvalid,
            ErrorCode::CopyConflict => GotryStatus::CopyConflict,
            ErrorCode::Draining => GotryStatus::Draining,
            ErrorCode::DrainTimeout => GotryStatus::DrainTimeout,
            ErrorCode::RouterClosed => GotryStatus::RouterClosed,
            ErrorCode::ReplicaAtCapacity => GotryStatus::ReplicaAtCapacity,
        }
    }

    /// The status of a core error.
    pub(crate) fn of_error(error: &Error) -> GotryStatus {
        match (error.code(), error) {
            (Some(code), _) => GotryStatus::from_code(code),
            (None, Error::InvalidArgument { .. }) => GotryStatus::InvalidArgument,
            (None, Error::Storage { .. }) => GotryStatus::StorageError,
            (None, Error::Host(_)) => GotryStatus::HostCallbackFailed,
            // A kind the core adds later must not pass for a known one.
            (None, _) => GotryStatus::InternalError,
        }
    }

    /// The code a status value stands for, when it is one of the twelve.
    fn registry_code(value: c_int) -> Option<ErrorCode> {
        usize::try_from(value)
            .ok()
            .and_then(|v| v.checked_sub(1))
            .and_then(|index| ErrorCode::ALL.get(index).copied())
    }
}

/// NUL-terminated copies of names the core keeps as `&'static str`, made once.
pub(crate) fn static_cstr(
    table: &'static OnceLock<Vec<CString>>,
    names: impl FnOnce() -> Vec<String>,
    index: usize,
) -> *const c_char {
    let names = table.get_or_init(|| {
        names()
            .into_iter()
            .map(|name| CString::new(name).expect("the core's names hold no NUL"))
            .collect()
    });
    names[index].as_ptr()
}

/// Runs a name lookup inside the panic boundary; NULL when it found nothing or failed.
pub(crate) fn name_or_null(lookup: impl FnOnce() -> *const c_char) -> *const c_char {
    let mut name = std::ptr::null();
    let _ = ffi_boundary!(std::ptr::null_mut(), {
        name = lookup();
        Ok(())
    });
    name
}

fn code_index(code: ErrorCode) -> usize {
    ErrorCode::ALL
        .iter()
        .position(|c| *c == code)
        .expect("every code is in ALL")
}

/// The name of a status value, e.g. `"GOTRY_STATUS_FENCED"`; NULL for a value that is not a
/// `GotryStatus`. The string is static: never free it. Thread-safe.
#[no_mangle]
pub extern "C" fn gotry_status_name(status: c_int) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    name_or_null(|| match GotryStatus::registry_code(status) {
        Some(code) => static_cstr(
            &NAMES,
            || {
                ErrorCode::ALL
                    .iter()
                    .map(|c| c.as_str().replacen("GOTRY_TENANT_", "GOTRY_STATUS_", 1))
                    .collect()
            },
            code_index(code),
        ),
        None => OTHER_STATUSES
            .iter()
            .find(|(s, _)| *s as c_int == status)
            .map_or(std::ptr::null(), |(_, name)| name.as_ptr()),
    })
}

/// The stable `GOTRY_TENANT_*` code of a status value (`GOTRY_STATUS_LEASE_HELD` gives
/// `"GOTRY_TENANT_LEASE_HELD"`): the string every language's error carries as its code.
/// NULL for the statuses that are not one of the twelve codes. Static; thread-safe.
#[no_mangle]
pub extern "C" fn gotry_status_code(status: c_int) -> *const c_char {
    static CODES: OnceLock<Vec<CString>> = OnceLock::new();
    name_or_null(|| match GotryStatus::registry_code(status) {
        Some(code) => static_cstr(
            &CODES,
            || ErrorCode::ALL.iter().map(|c| c.as_str().to_owned()).collect(),
            code_index(code),
        ),
        None => std::ptr::null(),
    })
}

/// Why a holder's write gate is closed.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GotryFenceReason {
    /// `lease_released`: the holder released the lease.
    LeaseReleased = 1,
    /// `lease_lost`: a renewal was refused; someone else may hold the tenant now.
    LeaseLost = 2,
    /// `lease_expired_locally`: the local deadline passed before a renewal moved it.
    LeaseExpiredLocally = 3,
}

const FENCE_REASONS: [(GotryFenceReason, FenceReason); 3] = [
    (GotryFenceReason::LeaseReleased, FenceReason::LeaseReleased),
    (GotryFenceReason::LeaseLost, FenceReason::LeaseLost),
    (
        GotryFenceReason::LeaseExpiredLocally,
        FenceReason::LeaseExpiredLocally,
    ),
];

impl From<FenceReason> for GotryFenceReason {
    fn from(reason: FenceReason) -> GotryFenceReason {
        FENCE_REASONS
            .iter()
            .find(|(_, r)| *r == reason)
            .map(|(ours, _)| *ours)
            .expect("every fence reason has a C value")
    }
}

/// The reference's `reason` string of a `GotryFenceReason` value (`"lease_released"`,
/// `"lease_lost"`, `"lease_expired_locally"`); NULL for any other value. Static; thread-safe.
#[no_mangle]
pub extern "C" fn gotry_fence_reason_name(reason: c_int) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    name_or_null(|| {
        match FENCE_REASONS
            .iter()
            .position(|(ours, _)| *ours as c_int == reason)
        {
            Some(index) => static_cstr(
                &NAMES,
                || FENCE_REASONS.iter().map(|(_, r)| r.as_str().to_owned()).collect(),
                index,
            ),
            None => std::ptr::null(),
        }
    })
}

/// Why a restore passed over a durable copy.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GotrySkipReason {
    /// `manifest`: the manifest is missing, does not parse, or contradicts its own place.
    Manifest = 1,
    /// `tenant`: the manifest names another tenant.
    Tenant = 2,
    /// `checksum`: a file is missing, or its size or SHA-256 differs from the manifest.
    Checksum = 3,
    /// `integrity`: a SQLite file fails `PRAGMA integrity_check`.
    Integrity = 4,
    /// `fold`: the host's own check of the restored state refused it.
    Fold = 5,
    /// `superseded`: written into an older epoch after a later tenure had begun (a stale
    /// holder's copy).
    Superseded = 6,
}

const SKIP_REASONS: [(GotrySkipReason, SkipReason); 6] = [
    (GotrySkipReason::Manifest, SkipReason::Manifest),
    (GotrySkipReason::Tenant, SkipReason::Tenant),
    (GotrySkipReason::Checksum, SkipReason::Checksum),
    (GotrySkipReason::Integrity, SkipReason::Integrity),
    (GotrySkipReason::Fold, SkipReason::Fold),
    (GotrySkipReason::Superseded, SkipReason::Superseded),
];

impl From<SkipReason> for GotrySkipReason {
    fn from(reason: SkipReason) -> GotrySkipReason {
        SKIP_REASONS
            .iter()
            .find(|(_, r)| *r == reason)
            .map(|(ours, _)| *ours)
            .expect("every skip reason has a C value")
    }
}

/// The core's `reason` string of a `GotrySkipReason` value (`"manifest"`, `"tenant"`,
/// `"checksum"`, `"integrity"`, `"fold"`, `"superseded"`); NULL for any other value. Static;
/// thread-safe.
#[no_mangle]
pub extern "C" fn gotry_skip_reason_name(reason: c_int) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    name_or_null(
        || match SKIP_REASONS.iter().position(|(ours, _)| *ours as c_int == reason) {
            Some(index) => static_cstr(
                &NAMES,
                || SKIP_REASONS.iter().map(|(_, r)| r.as_str().to_owned()).collect(),
                index,
            ),
            None => std::ptr::null(),
        },
    )
}

/// The kind of a granted operation in a store's history.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GotryLeaseOp {
    /// `acquire`: the lease was taken and its epoch moved up by one.
    Acquire = 1,
    /// `renew`: the holder extended its lease.
    Renew = 2,
    /// `release`: the holder expired its lease at once.
    Release = 3,
    /// `forget`: the holder raised the forgotten floor to its epoch.
    Forget = 4,
}

const LEASE_OPS: [(GotryLeaseOp, LeaseOp); 4] = [
    (GotryLeaseOp::Acquire, LeaseOp::Acquire),
    (GotryLeaseOp::Renew, LeaseOp::Renew),
    (GotryLeaseOp::Release, LeaseOp::Release),
    (GotryLeaseOp::Forget, LeaseOp::Forget),
];

impl From<LeaseOp> for GotryLeaseOp {
    fn from(op: LeaseOp) -> GotryLeaseOp {
        LEASE_OPS
            .iter()
            .find(|(_, o)| *o == op)
            .map(|(ours, _)| *ours)
            .expect("every operation has a C value")
    }
}

/// The log's spelling of a `GotryLeaseOp` value (`"acquire"`, `"renew"`, `"release"`,
/// `"forget"`); NULL for any other value. Static; thread-safe.
#[no_mangle]
pub extern "C" fn gotry_lease_op_name(op: c_int) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    name_or_null(
        || match LEASE_OPS.iter().position(|(ours, _)| *ours as c_int == op) {
            Some(index) => static_cstr(
                &NAMES,
                || LEASE_OPS.iter().map(|(_, o)| o.as_str().to_owned()).collect(),
                index,
            ),
            None => std::ptr::null(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(ptr: *const c_char) -> Option<String> {
        // SAFETY: the functions under test return NULL or a static NUL-terminated string.
        (!ptr.is_null()).then(|| unsafe { CStr::from_ptr(ptr) }.to_str().unwrap().to_owned())
    }

    #[test]
    fn the_twelve_codes_are_values_one_to_twelve_in_the_reference_order() {
        for (index, code) in ErrorCode::ALL.into_iter().enumerate() {
            let value = index as c_int + 1;
            assert_eq!(GotryStatus::from_code(code) as c_int, value);
            assert_eq!(text(gotry_status_code(value)).as_deref(), Some(code.as_str()));
            let name = text(gotry_status_name(value)).unwrap();
            assert_eq!(
                name.strip_prefix("GOTRY_STATUS_"),
                code.as_str().strip_prefix("GOTRY_TENANT_")
            );
        }
        for (status, name) in OTHER_STATUSES {
            assert_eq!(gotry_status_code(status as c_int), std::ptr::null());
            assert_eq!(
                text(gotry_status_name(status as c_int)).as_deref(),
                name.to_str().ok()
            );
        }
        for outside in [-1, 20, c_int::MAX, c_int::MIN] {
            assert!(gotry_status_name(outside).is_null());
            assert!(gotry_status_code(outside).is_null());
        }
    }

    #[test]
    fn enum_names_come_from_the_core() {
        assert_eq!(
            text(gotry_fence_reason_name(3)).as_deref(),
            Some("lease_expired_locally")
        );
        assert!(gotry_fence_reason_name(0).is_null());
        assert_eq!(text(gotry_lease_op_name(4)).as_deref(), Some("forget"));
        assert!(gotry_lease_op_name(5).is_null());
        assert_eq!(text(gotry_skip_reason_name(6)).as_deref(), Some("superseded"));
        assert!(gotry_skip_reason_name(0).is_null() && gotry_skip_reason_name(7).is_null());
        assert_eq!(GotrySkipReason::from(SkipReason::Fold), GotrySkipReason::Fold);
        assert_eq!(GotryLeaseOp::from(LeaseOp::Renew), GotryLeaseOp::Renew);
        assert_eq!(
            GotryFenceReason::from(FenceReason::LeaseLost),
            GotryFenceReason::LeaseLost
        );
    }

    #[test]
    fn kinds_outside_the_registry_map_to_their_own_status() {
        let storage = Error::Storage {
            code: "SQLITE_NOTADB".into(),
            message: "x".into(),
        };
        assert_eq!(GotryStatus::of_error(&storage), GotryStatus::StorageError);
        let host = Error::Host("boom".into());
        assert_eq!(GotryStatus::of_error(&host), GotryStatus::HostCallbackFailed);
        assert_eq!(
            GotryStatus::of_error(&Error::RouterClosed),
            GotryStatus::RouterClosed
        );
    }
}
