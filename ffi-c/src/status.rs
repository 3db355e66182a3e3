//! The status every fallible call returns, and the small enums whose names C may print.

use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::OnceLock;

use gotry_core::{Error, ErrorCode, FenceReason, LeaseOp, SkipReason};

/// The outcome of a call. Every value is fixed for good: a value never changes its meaning
/// and is never reused, so a compiled host keeps working against a later library.
///
/// - `0`: `GOTRY_STATUS_OK`.
/// - `1` to `99`: the `GOTRY_TENANT_*` codes of the registry, shared with every language
///   (`gotry_status_code` gives the code string). 1 to 15 are used; 16 to 99 are reserved for
///   codes added later, each taking the next free number.
/// - `100` to `199`: the failures that have no such code (arguments, storage, the library
///   itself, a host's callback). 100 to 106 are used; 107 to 199 are reserved.
///
/// No other value is returned. `gotry_status_name` gives the name of each value.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GotryStatus {
    /// The call succeeded and wrote its out-parameters.
    Ok = 0,

    // 1..=99: the registry's GOTRY_TENANT_* codes, numbered one by one (never by position).
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
    /// GOTRY_TENANT_BUSY: a copy could not read a tenant's files because calls of it kept
    /// running; nothing was copied, the calls are unaffected.
    Busy = 13,
    /// GOTRY_TENANT_OPEN_IN_PROCESS: a file is open through another handle of this process,
    /// so this library may not open it (a copy needs a `GotrySnapshotFn`; a restore needs the
    /// host's handles closed). Nothing was touched.
    OpenInProcess = 14,
    /// GOTRY_TENANT_CALL_IN_DOUBT: a router call's handler ran, but its acknowledgement could
    /// not be confirmed (the gate closed after it, or its strict copy failed): its write may
    /// be durable or not. The message names the cause. Every other failure of
    /// `gotry_router_begin` or `gotry_router_call_finish` comes before the handler ran:
    /// nothing was written.
    CallInDoubt = 15,
    // 16..=99: reserved for the registry's next codes.

    // 100..=199: failures with no GOTRY_TENANT_* code.
    /// An argument out of its range: a TTL, margin, epoch, text length, list index, or text
    /// that must be UTF-8 and is not (`RangeError` in JavaScript, `ValueError` in Python).
    InvalidArgument = 100,
    /// Storage failed for a reason other than contention; `gotry_error_code` gives its own
    /// name: SQLite's (e.g. `SQLITE_NOTADB`), or for a file-system failure the errno name as
    /// Node gives it (e.g. `ENOTDIR`).
    StorageError = 101,
    /// A required pointer argument was NULL.
    NullArgument = 102,
    /// An output buffer is smaller than the answer; `gotry_error_buffer_len` tells the size
    /// needed.
    BufferTooSmall = 103,
    /// The object queried has no such detail (for instance a record on an error that is
    /// not LEASE_HELD).
    NoValue = 104,
    /// A bug inside the library was caught before it could reach the host. Please report it
    /// with the error's message.
    InternalError = 105,
    /// A host's callback reported a failure (a `GotrySnapshotFn` returned non-zero): the
    /// error's code is `HOST_CALLBACK`, its message holds what the callback wrote, and
    /// `gotry_error_host_code` gives the value it returned.
    HostCallbackFailed = 106,
    // 107..=199: reserved for failures with no GOTRY_TENANT_* code.
}

impl GotryStatus {
    /// Every status, in value order: the only list that turns a number back into a status.
    /// A test compares it with the header, so a variant missing here fails it.
    pub(crate) const ALL: [GotryStatus; 23] = [
        GotryStatus::Ok,
        GotryStatus::LeaseHeld,
        GotryStatus::LeaseLost,
        GotryStatus::Fenced,
        GotryStatus::LeaseStoreUnavailable,
        GotryStatus::IdInvalid,
        GotryStatus::DurableStoreUnavailable,
        GotryStatus::RestoreInvalid,
        GotryStatus::CopyConflict,
        GotryStatus::Draining,
        GotryStatus::DrainTimeout,
        GotryStatus::RouterClosed,
        GotryStatus::ReplicaAtCapacity,
        GotryStatus::Busy,
        GotryStatus::OpenInProcess,
        GotryStatus::CallInDoubt,
        GotryStatus::InvalidArgument,
        GotryStatus::StorageError,
        GotryStatus::NullArgument,
        GotryStatus::BufferTooSmall,
        GotryStatus::NoValue,
        GotryStatus::InternalError,
        GotryStatus::HostCallbackFailed,
    ];

    /// The status a value stands for; `None` for a value that is no status.
    pub(crate) fn from_value(value: c_int) -> Option<GotryStatus> {
        GotryStatus::ALL
            .into_iter()
            .find(|status| *status as c_int == value)
    }

    /// The status's name as the header spells it, e.g. `GOTRY_STATUS_FENCED`.
    pub(crate) const fn name(self) -> &'static CStr {
        match self {
            GotryStatus::Ok => c"GOTRY_STATUS_OK",
            GotryStatus::LeaseHeld => c"GOTRY_STATUS_LEASE_HELD",
            GotryStatus::LeaseLost => c"GOTRY_STATUS_LEASE_LOST",
            GotryStatus::Fenced => c"GOTRY_STATUS_FENCED",
            GotryStatus::LeaseStoreUnavailable => c"GOTRY_STATUS_LEASE_STORE_UNAVAILABLE",
            GotryStatus::IdInvalid => c"GOTRY_STATUS_ID_INVALID",
            GotryStatus::DurableStoreUnavailable => c"GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE",
            GotryStatus::RestoreInvalid => c"GOTRY_STATUS_RESTORE_INVALID",
            GotryStatus::CopyConflict => c"GOTRY_STATUS_COPY_CONFLICT",
            GotryStatus::Draining => c"GOTRY_STATUS_DRAINING",
            GotryStatus::DrainTimeout => c"GOTRY_STATUS_DRAIN_TIMEOUT",
            GotryStatus::RouterClosed => c"GOTRY_STATUS_ROUTER_CLOSED",
            GotryStatus::ReplicaAtCapacity => c"GOTRY_STATUS_REPLICA_AT_CAPACITY",
            GotryStatus::Busy => c"GOTRY_STATUS_BUSY",
            GotryStatus::OpenInProcess => c"GOTRY_STATUS_OPEN_IN_PROCESS",
            GotryStatus::CallInDoubt => c"GOTRY_STATUS_CALL_IN_DOUBT",
            GotryStatus::InvalidArgument => c"GOTRY_STATUS_INVALID_ARGUMENT",
            GotryStatus::StorageError => c"GOTRY_STATUS_STORAGE_ERROR",
            GotryStatus::NullArgument => c"GOTRY_STATUS_NULL_ARGUMENT",
            GotryStatus::BufferTooSmall => c"GOTRY_STATUS_BUFFER_TOO_SMALL",
            GotryStatus::NoValue => c"GOTRY_STATUS_NO_VALUE",
            GotryStatus::InternalError => c"GOTRY_STATUS_INTERNAL_ERROR",
            GotryStatus::HostCallbackFailed => c"GOTRY_STATUS_HOST_CALLBACK_FAILED",
        }
    }

    /// The status of a core error code. The match has no catch-all arm: a code the core adds
    /// does not compile here until it is given its own number in the registry's block.
    pub(crate) const fn from_code(code: ErrorCode) -> GotryStatus {
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
            ErrorCode::TenantBusy => GotryStatus::Busy,
            ErrorCode::OpenInProcess => GotryStatus::OpenInProcess,
            ErrorCode::CallInDoubt => GotryStatus::CallInDoubt,
        }
    }

    /// The registry code a status stands for; `None` for the statuses outside the registry.
    /// The inverse of `from_code` (a test checks both ways).
    pub(crate) const fn code(self) -> Option<ErrorCode> {
        Some(match self {
            GotryStatus::LeaseHeld => ErrorCode::LeaseHeld,
            GotryStatus::LeaseLost => ErrorCode::LeaseLost,
            GotryStatus::Fenced => ErrorCode::Fenced,
            GotryStatus::LeaseStoreUnavailable => ErrorCode::LeaseStoreUnavailable,
            GotryStatus::IdInvalid => ErrorCode::IdInvalid,
            GotryStatus::DurableStoreUnavailable => ErrorCode::DurableStoreUnavailable,
            GotryStatus::RestoreInvalid => ErrorCode::RestoreInvalid,
            GotryStatus::CopyConflict => ErrorCode::CopyConflict,
            GotryStatus::Draining => ErrorCode::Draining,
            GotryStatus::DrainTimeout => ErrorCode::DrainTimeout,
            GotryStatus::RouterClosed => ErrorCode::RouterClosed,
            GotryStatus::ReplicaAtCapacity => ErrorCode::ReplicaAtCapacity,
            GotryStatus::Busy => ErrorCode::TenantBusy,
            GotryStatus::OpenInProcess => ErrorCode::OpenInProcess,
            GotryStatus::CallInDoubt => ErrorCode::CallInDoubt,
            GotryStatus::Ok
            | GotryStatus::InvalidArgument
            | GotryStatus::StorageError
            | GotryStatus::NullArgument
            | GotryStatus::BufferTooSmall
            | GotryStatus::NoValue
            | GotryStatus::InternalError
            | GotryStatus::HostCallbackFailed => return None,
        })
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

/// The C value that a table of (C value, core value) pairs gives the core value `core`.
pub(crate) fn c_value<C: Copy, K: PartialEq>(table: &[(C, K)], core: K) -> Option<C> {
    table.iter().find(|(_, k)| *k == core).map(|(ours, _)| *ours)
}

/// The body of every enum's `_name` function: the name that a table of (C value, core value)
/// pairs gives the C value for which `is` holds, made once into `names`; NULL for a value
/// that is not in the table.
pub(crate) fn table_name<C: Copy, K: Copy>(
    names: &'static OnceLock<Vec<CString>>,
    table: &[(C, K)],
    is: impl Fn(C) -> bool,
    name: fn(K) -> &'static str,
) -> *const c_char {
    name_or_null(|| match table.iter().position(|(ours, _)| is(*ours)) {
        Some(index) => static_cstr(
            names,
            || table.iter().map(|(_, core)| name(*core).to_owned()).collect(),
            index,
        ),
        None => std::ptr::null(),
    })
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

/// The name of a status value, e.g. `"GOTRY_STATUS_FENCED"`; NULL for a value that is not a
/// `GotryStatus`. The string is static: never free it. Thread-safe.
#[no_mangle]
pub extern "C" fn gotry_status_name(status: c_int) -> *const c_char {
    name_or_null(|| GotryStatus::from_value(status).map_or(std::ptr::null(), |s| s.name().as_ptr()))
}

/// The stable `GOTRY_TENANT_*` code of a status value (`GOTRY_STATUS_LEASE_HELD` gives
/// `"GOTRY_TENANT_LEASE_HELD"`): the string every language's error carries as its code.
/// NULL for the statuses outside the registry's block (0 and 100 to 199) and for a value that
/// is not a `GotryStatus`. Static; thread-safe.
#[no_mangle]
pub extern "C" fn gotry_status_code(status: c_int) -> *const c_char {
    static CODES: OnceLock<Vec<CString>> = OnceLock::new();
    name_or_null(
        || match GotryStatus::from_value(status).and_then(GotryStatus::code) {
            Some(code) => static_cstr(
                &CODES,
                || ErrorCode::ALL.iter().map(|c| c.as_str().to_owned()).collect(),
                ErrorCode::ALL
                    .iter()
                    .position(|c| *c == code)
                    .expect("every code is in ALL"),
            ),
            None => std::ptr::null(),
        },
    )
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
        c_value(&FENCE_REASONS, reason).expect("every fence reason has a C value")
    }
}

/// The reference's `reason` string of a `GotryFenceReason` value (`"lease_released"`,
/// `"lease_lost"`, `"lease_expired_locally"`); NULL for any other value. Static; thread-safe.
#[no_mangle]
pub extern "C" fn gotry_fence_reason_name(reason: c_int) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    table_name(
        &NAMES,
        &FENCE_REASONS,
        |ours| ours as c_int == reason,
        FenceReason::as_str,
    )
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
        c_value(&SKIP_REASONS, reason).expect("every skip reason has a C value")
    }
}

/// The core's `reason` string of a `GotrySkipReason` value (`"manifest"`, `"tenant"`,
/// `"checksum"`, `"integrity"`, `"fold"`, `"superseded"`); NULL for any other value. Static;
/// thread-safe.
#[no_mangle]
pub extern "C" fn gotry_skip_reason_name(reason: c_int) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    table_name(
        &NAMES,
        &SKIP_REASONS,
        |ours| ours as c_int == reason,
        SkipReason::as_str,
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
        c_value(&LEASE_OPS, op).expect("every operation has a C value")
    }
}

/// The log's spelling of a `GotryLeaseOp` value (`"acquire"`, `"renew"`, `"release"`,
/// `"forget"`); NULL for any other value. Static; thread-safe.
#[no_mangle]
pub extern "C" fn gotry_lease_op_name(op: c_int) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    table_name(&NAMES, &LEASE_OPS, |ours| ours as c_int == op, LeaseOp::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(ptr: *const c_char) -> Option<String> {
        // SAFETY: the functions under test return NULL or a static NUL-terminated string.
        (!ptr.is_null()).then(|| unsafe { CStr::from_ptr(ptr) }.to_str().unwrap().to_owned())
    }

    /// Every status of this release with its number. Hosts compiled against this header
    /// hold these numbers: a line of this list may be added, never changed or removed.
    const RELEASED: [(&str, c_int); 23] = [
        ("GOTRY_STATUS_OK", 0),
        ("GOTRY_STATUS_LEASE_HELD", 1),
        ("GOTRY_STATUS_LEASE_LOST", 2),
        ("GOTRY_STATUS_FENCED", 3),
        ("GOTRY_STATUS_LEASE_STORE_UNAVAILABLE", 4),
        ("GOTRY_STATUS_ID_INVALID", 5),
        ("GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE", 6),
        ("GOTRY_STATUS_RESTORE_INVALID", 7),
        ("GOTRY_STATUS_COPY_CONFLICT", 8),
        ("GOTRY_STATUS_DRAINING", 9),
        ("GOTRY_STATUS_DRAIN_TIMEOUT", 10),
        ("GOTRY_STATUS_ROUTER_CLOSED", 11),
        ("GOTRY_STATUS_REPLICA_AT_CAPACITY", 12),
        ("GOTRY_STATUS_BUSY", 13),
        ("GOTRY_STATUS_OPEN_IN_PROCESS", 14),
        ("GOTRY_STATUS_CALL_IN_DOUBT", 15),
        ("GOTRY_STATUS_INVALID_ARGUMENT", 100),
        ("GOTRY_STATUS_STORAGE_ERROR", 101),
        ("GOTRY_STATUS_NULL_ARGUMENT", 102),
        ("GOTRY_STATUS_BUFFER_TOO_SMALL", 103),
        ("GOTRY_STATUS_NO_VALUE", 104),
        ("GOTRY_STATUS_INTERNAL_ERROR", 105),
        ("GOTRY_STATUS_HOST_CALLBACK_FAILED", 106),
    ];

    const REGISTRY_BLOCK: std::ops::RangeInclusive<c_int> = 1..=99;
    const OTHER_BLOCK: std::ops::RangeInclusive<c_int> = 100..=199;

    #[test]
    fn the_numbers_of_this_release_never_change() {
        for (name, value) in RELEASED {
            let status = GotryStatus::from_value(value)
                .unwrap_or_else(|| panic!("{name} = {value} is no longer a status"));
            assert_eq!(
                status.name().to_str().unwrap(),
                name,
                "the status numbered {value}"
            );
            assert_eq!(text(gotry_status_name(value)).as_deref(), Some(name));
        }
        // And no number outside the list is a status.
        let numbers: Vec<c_int> = GotryStatus::ALL.iter().map(|s| *s as c_int).collect();
        let released: Vec<c_int> = RELEASED.iter().map(|(_, v)| *v).collect();
        assert_eq!(
            numbers, released,
            "a status was added: give it the next free number of its block and add it to RELEASED"
        );
        for value in (-1000..=1000).chain([c_int::MIN, c_int::MAX]) {
            if !released.contains(&value) {
                assert!(gotry_status_name(value).is_null(), "{value} has a name");
                assert!(gotry_status_code(value).is_null(), "{value} has a code");
            }
        }
    }

    #[test]
    fn the_header_declares_exactly_these_statuses() {
        // The header is generated from the enum (its drift test checks that), so a variant
        // that ALL and `from_value` do not know shows here.
        let header = include_str!("../../include/gotry_tenant_state.h");
        let body = header
            .split_once("enum GotryStatus")
            .and_then(|(_, rest)| rest.split_once('}'))
            .map(|(body, _)| body)
            .expect("the header declares enum GotryStatus");
        let declared: Vec<(String, c_int)> = body
            .lines()
            .filter_map(|line| line.trim().strip_suffix(',')?.split_once(" = "))
            .map(|(name, value)| (name.to_owned(), value.parse().expect("a decimal value")))
            .collect();
        let ours: Vec<(String, c_int)> = GotryStatus::ALL
            .iter()
            .map(|s| (s.name().to_str().unwrap().to_owned(), *s as c_int))
            .collect();
        assert_eq!(declared, ours);
    }

    #[test]
    fn each_registry_code_has_its_own_number_in_the_registry_block() {
        let mut seen = Vec::new();
        for code in ErrorCode::ALL {
            let status = GotryStatus::from_code(code);
            let value = status as c_int;
            assert!(REGISTRY_BLOCK.contains(&value), "{} is {value}", code.as_str());
            assert!(!seen.contains(&value), "two codes share {value}");
            seen.push(value);
            assert_eq!(status.code(), Some(code));
            assert_eq!(text(gotry_status_code(value)).as_deref(), Some(code.as_str()));
            let name = text(gotry_status_name(value)).unwrap();
            assert_eq!(
                name.strip_prefix("GOTRY_STATUS_"),
                code.as_str().strip_prefix("GOTRY_TENANT_")
            );
        }
        for status in GotryStatus::ALL {
            let value = status as c_int;
            match status.code() {
                Some(code) => assert_eq!(GotryStatus::from_code(code), status),
                None => {
                    assert!(
                        value == 0 || OTHER_BLOCK.contains(&value),
                        "{status:?} is {value}"
                    );
                    assert!(gotry_status_code(value).is_null());
                }
            }
        }
        assert_eq!(seen.len(), ErrorCode::ALL.len());
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
