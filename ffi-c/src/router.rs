//! The tenant router: one replica serving many tenants (capacity, open with restore, calls in
//! flight, handoff, close, status), with its host callbacks.

use std::ffi::{c_char, c_int, c_void, CString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use gotry_core::router::{default_capacity, RouterEventHandler, RouterEventKind, SharedFoldCheck};
use gotry_core::{
    CloseReport, CopyPolicy, Durability, Error, MonotonicClock, RouterCall, RouterEvent, RouterOptions,
    RouterTickReport, TenantHandle, TenantRouter, TenantState, TenantStatus,
};

use crate::boundary::{
    bytes_in, free_handle, handle, into_handle, optional_handle, read_into, text_in, Failure, Out,
};
use crate::clock::GotryManualClock;
use crate::copies::{GotryCopyId, GotryFoldCheckFn};
use crate::durable::GotryDurableStore;
use crate::error::{lent, GotryError};
use crate::host::{host_snapshot, nul_terminated, CallbackGate, GotrySnapshotFn, UserData};
use crate::keeper::{GotryShutdownReport, GotryTickReport};
use crate::lease::GotryLease;
use crate::records::{element, Text};
use crate::status::{c_value, table_name, GotryStatus};
use crate::store::GotryStore;

/// When a router's acknowledgements wait for a durable copy.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GotryDurability {
    /// Copies run on the router's copier thread (or in `gotry_router_tick`), every
    /// `copy_interval_ms` for a tenant that was written to; a failing durable store shows as
    /// lag (and `copy_failed` events), calls go on.
    Async = 1,
    /// `gotry_router_call_finish` returns only once a copy holds the call; when none can be
    /// written it returns `GOTRY_STATUS_CALL_IN_DOUBT`.
    Strict = 2,
}

/// How a router serves; `gotry_router_options_default` fills in the defaults, then set what
/// differs. The library keeps no pointer to the struct itself.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GotryRouterOptions {
    /// The most tenants served at once (REPLICA_AT_CAPACITY beyond); at least 1. The default
    /// keeps the replica inside its descriptor limit: about three descriptors a tenant after
    /// a quarter of the soft limit (at least 64) is set aside, 256 for a limit of 1024.
    pub capacity: usize,
    /// In `GOTRY_DURABILITY_ASYNC` mode, how long after a tenant's last good copy it is
    /// copied again when it was written to (default 30000).
    pub copy_interval_ms: u64,
    /// When acknowledgements wait for a copy (default `GOTRY_DURABILITY_ASYNC`).
    pub durability: GotryDurability,
    /// The holders' monotonic clock, of which the router keeps its own reference; NULL
    /// (default) for the system's.
    pub clock: *const GotryManualClock,
    /// The host's check of a restored tenant root before it is installed, called with
    /// `verify_user_data` on the thread calling `gotry_router_open`; NULL (default) for none.
    /// As for `gotry_epoch_copies_restore`.
    pub verify: GotryFoldCheckFn,
    /// Passed to `verify`.
    pub verify_user_data: *mut c_void,
    /// Reads the files of a tenant root the host has open, with `snapshot_user_data`; NULL
    /// (default) for none, and then a copy of a root holding such a file fails with
    /// `OPEN_IN_PROCESS`. See `GotrySnapshotFn` for the threads it runs on.
    pub snapshot: GotrySnapshotFn,
    /// Passed to `snapshot`.
    pub snapshot_user_data: *mut c_void,
    /// Receives the router's events, with `event_user_data`; NULL (default) for none. See
    /// `GotryRouterEventFn`.
    pub on_event: GotryRouterEventFn,
    /// Passed to `on_event`.
    pub event_user_data: *mut c_void,
    /// false (default): the router renews its leases and copies its tenants on threads of its
    /// own. true: neither thread runs; each round runs only when the host calls
    /// `gotry_router_tick` (its own timer, or a test with a manual clock), and nothing renews
    /// the leases between two ticks.
    pub without_thread: bool,
    /// How many copies of each tenant the router keeps, collecting older ones as it goes (a
    /// strict router writes one per acknowledged write); `gotry_router_options_default` writes
    /// the core's default. 0 keeps every copy, for a host that runs `gotry_epoch_copies_gc`
    /// itself.
    pub keep_copies: usize,
    /// true: `gotry_metrics_text` carries a series per tenant this router lists, labelled
    /// `replica` and `tenant` (the lease key): its state (`gotry_tenant_router_tenant_state`
    /// with a `state` label, 1), calls in flight, and copy lag in seconds and in writes, read
    /// at each call and gone once the tenant leaves. At most `capacity` tenants;
    /// `gotry_router_options_default` writes the core's default, false, since each tenant is
    /// a series on the metrics server.
    pub tenant_metrics: bool,
}

/// Writes the default options: the capacity computed from this process's descriptor limit
/// now, copies every 30 s in the background, the core's number of copies kept, the system
/// clock, no callbacks, the router's own threads.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when `out_options` is NULL.
///
/// # Safety
/// `out_options` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_router_options_default(out_options: *mut GotryRouterOptions) -> GotryStatus {
    ffi_boundary!(std::ptr::null_mut(), {
        let out_options = unsafe { Out::new("out_options", out_options)? };
        out_options.write(GotryRouterOptions::defaults());
        Ok(())
    })
}

impl GotryRouterOptions {
    fn defaults() -> GotryRouterOptions {
        let policy = CopyPolicy::default();
        GotryRouterOptions {
            capacity: default_capacity(),
            copy_interval_ms: u64::try_from(policy.interval.as_millis()).unwrap_or(u64::MAX),
            durability: GotryDurability::Async,
            clock: std::ptr::null(),
            verify: None,
            verify_user_data: std::ptr::null_mut(),
            snapshot: None,
            snapshot_user_data: std::ptr::null_mut(),
            on_event: None,
            event_user_data: std::ptr::null_mut(),
            without_thread: false,
            keep_copies: gotry_core::DEFAULT_KEEP_COPIES,
            tenant_metrics: gotry_core::DEFAULT_TENANT_METRICS,
        }
    }
}

/// What a router reports without being asked.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GotryRouterEventKind {
    /// `lost`: the store refused a renewal; the tenant refuses every new call (FENCED) from
    /// now on, and the calls still running cannot be acknowledged.
    Lost = 1,
    /// `closed`: the tenant left the router (its last call ended after a loss, or a handoff
    /// released it): its files may be closed.
    Closed = 2,
    /// `copy_failed`: a background copy failed (the error says why); the tenant's lag grows
    /// until a copy succeeds.
    CopyFailed = 3,
    /// `draining`: a handoff (or a close) began draining the tenant, before it waits for the
    /// calls in flight; new calls are refused (DRAINING) from now on. Told once per drain, so
    /// that the host stops routing the tenant's requests here without polling the status;
    /// `closed` follows when the tenant is released, while a drain that timed out is the
    /// handoff's answer and the tenant serves again.
    Draining = 4,
    /// `copied`: a background copy (`GOTRY_DURABILITY_ASYNC`) was written (`seq`,
    /// `bytes_uploaded`): the tenant's writes before it are durable. Told once per copy the
    /// router writes in the background, never for the copy a strict call or a handoff waits
    /// for, whose own answer says it.
    Copied = 5,
}

const EVENT_KINDS: [(GotryRouterEventKind, RouterEventKind); 5] = [
    (GotryRouterEventKind::Lost, RouterEventKind::Lost),
    (GotryRouterEventKind::Closed, RouterEventKind::Closed),
    (GotryRouterEventKind::CopyFailed, RouterEventKind::CopyFailed),
    (GotryRouterEventKind::Draining, RouterEventKind::Draining),
    (GotryRouterEventKind::Copied, RouterEventKind::Copied),
];

/// The name of a `GotryRouterEventKind` value (`"lost"`, `"closed"`, `"copy_failed"`,
/// `"draining"`, `"copied"`); NULL for any other value. Static; thread-safe.
#[no_mangle]
pub extern "C" fn gotry_router_event_kind_name(kind: c_int) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    table_name(
        &NAMES,
        &EVENT_KINDS,
        |ours| ours as c_int == kind,
        RouterEventKind::as_str,
    )
}

/// One event, lent to the callback for the duration of the call only: copy what you keep.
#[repr(C)]
#[derive(Debug)]
pub struct GotryRouterEvent {
    /// What happened.
    pub kind: GotryRouterEventKind,
    /// The tenant's lease key; its length is the authority.
    pub key: *const c_char,
    /// Bytes in `key`.
    pub key_len: usize,
    /// The epoch of the tenure the event is about.
    pub epoch: i64,
    /// copy_failed: why (read it with the `gotry_error_*` accessors; never free it); NULL
    /// otherwise.
    pub error: *const GotryError,
    /// copied: the copy's sequence number in its epoch (from 1); 0 otherwise.
    pub seq: u64,
    /// copied: the bytes the copy made and stored; 0 otherwise.
    pub bytes_uploaded: u64,
}

/// A router's event callback, called with `event_user_data`, one event per call:
/// - `lost` on the router's renewal thread (or on the thread calling `gotry_router_tick`,
///   before it returns);
/// - `closed` where `lost` was told when the lost tenant had no call running, otherwise on
///   the thread that ends its last call (`gotry_router_call_finish` or `_free`, before it
///   returns); after a handoff, on the thread calling `gotry_router_handoff` or
///   `gotry_router_close`, before it returns;
/// - `copy_failed` on the router's copier thread (or on the thread calling
///   `gotry_router_tick`, before it returns), in `GOTRY_DURABILITY_ASYNC` mode;
/// - `draining` on the thread calling `gotry_router_handoff` or `gotry_router_close`, before
///   the drain waits for the calls in flight;
/// - `copied` where `copy_failed` is told.
///
/// Several threads may call it at once, so `event_user_data` must be usable from any thread.
/// Keep it short (a `lost` event delays the renewals of every tenant) and never let a C++
/// exception escape it. It may read the router (`gotry_router_status`) and end calls, but
/// must not open, hand off, tick, close or free the router: hand such work to another
/// thread. Once
/// `gotry_router_free` returned it is never called again.
pub type GotryRouterEventFn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, event: *const GotryRouterEvent)>;

/// The host's event callback, moved to the router's threads.
struct EventSink {
    call: unsafe extern "C" fn(*mut c_void, *const GotryRouterEvent),
    user_data: UserData,
    gate: Arc<CallbackGate>,
}

impl EventSink {
    fn deliver(&self, event: RouterEvent) {
        let ((kind, key, epoch, error), (seq, bytes_uploaded)) = match &event {
            RouterEvent::Lost { key, epoch } => ((GotryRouterEventKind::Lost, key, *epoch, None), (0, 0)),
            RouterEvent::Closed { key, epoch } => ((GotryRouterEventKind::Closed, key, *epoch, None), (0, 0)),
            RouterEvent::Draining { key, epoch } => {
                ((GotryRouterEventKind::Draining, key, *epoch, None), (0, 0))
            }
            RouterEvent::CopyFailed { key, epoch, error } => (
                (
                    GotryRouterEventKind::CopyFailed,
                    key,
                    *epoch,
                    Some(GotryError::from_core(error)),
                ),
                (0, 0),
            ),
            RouterEvent::Copied {
                key,
                copy,
                bytes_uploaded,
            } => (
                (GotryRouterEventKind::Copied, key, copy.epoch, None),
                (copy.seq, *bytes_uploaded),
            ),
            // A kind the core adds later has no C value yet.
            _ => return,
        };
        let Some(_turn) = self.gate.enter() else {
            return;
        };
        let key = Text::new(key);
        let view = GotryRouterEvent {
            kind,
            key: key.ptr(),
            key_len: key.len(),
            epoch,
            error: lent(error.as_ref()),
            seq,
            bytes_uploaded,
        };
        // SAFETY: the host gave this function for this purpose; `view` and what it lends
        // live until the call returns.
        unsafe { (self.call)(self.user_data.0, &view) };
    }
}

/// Serves many tenants from one replica: one keeper renews every lease it holds in batches,
/// and the tenants' copies follow its durability. Thread-safe: every function may be called
/// from several threads at once, and calls of different tenants run in parallel;
/// `gotry_router_open`, `gotry_router_handoff` and `gotry_router_close` block on the stores
/// and the file system (and `gotry_router_call_finish` in `GOTRY_DURABILITY_STRICT` mode), so
/// a host with an event loop calls them from a worker. `gotry_router_free` must be the last
/// call on the handle; calls, tenant handles and reports taken from it stay valid after it.
pub struct GotryRouter {
    router: TenantRouter,
    gate: Arc<CallbackGate>,
}

impl Drop for GotryRouter {
    fn drop(&mut self) {
        // First: no callback of the host's runs after the free returns, even from the pieces
        // of the router that a call still held by the host keeps alive. Then the router's own
        // drop stops its copier.
        self.gate.close();
    }
}

/// Reads the options field by field: a `durability` that is not a `GotryDurability` value
/// must be refused, not read as one.
///
/// # Safety
/// `options` must be NULL or readable.
unsafe fn read_options(options: *const GotryRouterOptions) -> Result<Option<GotryRouterOptions>, Failure> {
    if options.is_null() {
        return Ok(None);
    }
    // SAFETY: readable by the caller's promise; a C enum has the size of an int.
    let raw = unsafe { std::ptr::addr_of!((*options).durability).cast::<c_int>().read() };
    let durability = match raw {
        1 => GotryDurability::Async,
        2 => GotryDurability::Strict,
        other => {
            return Err(Failure::invalid(format!(
                "options.durability is {other}, not a GotryDurability value"
            )))
        }
    };
    // SAFETY: readable by the caller's promise; a C bool is one byte, read as a byte since a
    // Rust bool may only hold 0 or 1.
    let without_thread = unsafe { std::ptr::addr_of!((*options).without_thread).cast::<u8>().read() } != 0;
    // SAFETY: as above.
    let tenant_metrics = unsafe { std::ptr::addr_of!((*options).tenant_metrics).cast::<u8>().read() } != 0;
    // SAFETY: as above; every other field is valid for any bits (NULL is a function pointer's
    // None).
    unsafe {
        Ok(Some(GotryRouterOptions {
            capacity: std::ptr::addr_of!((*options).capacity).read(),
            copy_interval_ms: std::ptr::addr_of!((*options).copy_interval_ms).read(),
            durability,
            clock: std::ptr::addr_of!((*options).clock).read(),
            verify: std::ptr::addr_of!((*options).verify).read(),
            verify_user_data: std::ptr::addr_of!((*options).verify_user_data).read(),
            snapshot: std::ptr::addr_of!((*options).snapshot).read(),
            snapshot_user_data: std::ptr::addr_of!((*options).snapshot_user_data).read(),
            on_event: std::ptr::addr_of!((*options).on_event).read(),
            event_user_data: std::ptr::addr_of!((*options).event_user_data).read(),
            without_thread,
            keep_copies: std::ptr::addr_of!((*options).keep_copies).read(),
            tenant_metrics,
        }))
    }
}

/// Starts a router for `replica_id`: leases in `lease_store` with `ttl_ms` and `margin_ms`,
/// copies in `durable_store`, every tenant's files under
/// `gotry_tenant_root_for(state_root, organization, tenant)`. It keeps its own references to
/// both stores and to the options' clock, which may be freed after this returns. `options`
/// may be NULL for the defaults. It starts the renewal thread and, in
/// `GOTRY_DURABILITY_ASYNC` mode, the copier thread, unless `options.without_thread`.
///
/// The `*_user_data` of the options must be usable from any thread and stay valid until
/// `gotry_router_free` returns.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` for a state root that is not UTF-8 or holds a NUL,
/// an owner, TTL or margin out of range, a capacity of 0 or a `durability` that is not a
/// `GotryDurability` value, `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` when a thread cannot
/// start, and `GOTRY_STATUS_NULL_ARGUMENT` when a pointer other than `options` and
/// `out_error` is NULL.
///
/// # Safety
/// `lease_store` must be NULL or a live `GotryStore`; `durable_store` NULL or a live
/// `GotryDurableStore`; each text NULL or its length in readable bytes; `options` NULL or
/// readable, with a `clock` that is NULL or a live `GotryManualClock` and callbacks that are
/// NULL or functions as their types describe; the out-parameters NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_router_start(
    lease_store: *const GotryStore,
    durable_store: *const GotryDurableStore,
    state_root: *const c_char,
    state_root_len: usize,
    replica_id: *const c_char,
    replica_id_len: usize,
    ttl_ms: i64,
    margin_ms: i64,
    options: *const GotryRouterOptions,
    out_router: *mut *mut GotryRouter,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let lease_store = unsafe { handle("lease_store", lease_store)? };
        let durable_store = unsafe { handle("durable_store", durable_store)? };
        let state_root = unsafe { text_in("state_root", state_root, state_root_len)? };
        let replica_id = unsafe { text_in("replica_id", replica_id, replica_id_len)? };
        let options = unsafe { read_options(options)? }.unwrap_or_else(GotryRouterOptions::defaults);
        let clock = unsafe { optional_handle(options.clock) };
        let out_router = unsafe { Out::new("out_router", out_router)? };

        let gate = Arc::new(CallbackGate::default());
        let mut core = RouterOptions::new(
            lease_store.store.clone(),
            durable_store.store.clone(),
            PathBuf::from(state_root),
            replica_id.to_owned(),
            ttl_ms,
            margin_ms,
        );
        core.capacity = Some(options.capacity);
        core.copy_policy = CopyPolicy {
            interval: Duration::from_millis(options.copy_interval_ms),
            durability: match options.durability {
                GotryDurability::Async => Durability::Async,
                GotryDurability::Strict => Durability::Strict,
            },
        };
        if let Some(clock) = clock {
            core.clock = clock.clock.clone() as Arc<dyn MonotonicClock>;
        }
        core.without_thread = options.without_thread;
        core.keep_copies = options.keep_copies;
        core.tenant_metrics = options.tenant_metrics;
        core.verify = options.verify.map(|call| {
            let user_data = UserData(options.verify_user_data);
            let gate = gate.clone();
            Arc::new(move |folder: &Path| -> gotry_core::Result<bool> {
                let user_data = user_data;
                // Only `gotry_router_open` restores, so a freed router cannot get here; were
                // it to, refusing the copy is the answer that trusts nothing.
                let Some(_turn) = gate.enter() else {
                    return Ok(false);
                };
                let text = nul_terminated(folder);
                // SAFETY: the host gave this function for this purpose; `text` outlives the
                // call.
                Ok(unsafe { call(user_data.0, text.as_ptr().cast(), text.len() - 1) })
            }) as SharedFoldCheck
        });
        core.snapshot = options
            .snapshot
            .map(|call| host_snapshot(call, options.snapshot_user_data, Some(gate.clone())));
        core.on_event = options.on_event.map(|call| {
            let sink = EventSink {
                call,
                user_data: UserData(options.event_user_data),
                gate: gate.clone(),
            };
            Arc::new(move |event: RouterEvent| sink.deliver(event)) as RouterEventHandler
        });
        let router = TenantRouter::start(core)?;
        out_router.write(into_handle(GotryRouter { router, gate }));
        Ok(())
    })
}

/// Writes how many tenants the router serves at most.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `router` must be NULL or a live `GotryRouter`; `out_capacity` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_router_capacity(
    router: *const GotryRouter,
    out_capacity: *mut usize,
) -> GotryStatus {
    unsafe {
        read_into("router", router, "out_capacity", out_capacity, |router| {
            Ok(router.router.capacity())
        })
    }
}

/// A tenant served by a router: its key, the folder of its files and the lease whose gate
/// guards its writes. Immutable: any number of threads may read it at once; free it once
/// with `gotry_tenant_handle_free`, which does not stop serving the tenant. It stays valid
/// after the tenant leaves the router and after the router is freed.
pub struct GotryTenantHandle {
    handle: Arc<TenantHandle>,
    key: Text,
    root: Text,
}

impl GotryTenantHandle {
    fn new(handle: Arc<TenantHandle>) -> GotryTenantHandle {
        GotryTenantHandle {
            key: Text::new(&handle.key),
            root: Text::from_bytes(handle.root.as_os_str().as_encoded_bytes()),
            handle,
        }
    }
}

/// A served tenant as C reads it; the strings are borrowed from the `GotryTenantHandle`
/// (NUL-terminated, lengths the authority).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GotryTenantView {
    /// The lease key, `<organization>/<ledger tenant>`.
    pub key: *const c_char,
    /// Bytes in `key`.
    pub key_len: usize,
    /// The tenant's root folder (absolute): its ledger is `gotry-state/gotry-state.db` in it.
    pub root: *const c_char,
    /// Bytes in `root`.
    pub root_len: usize,
    /// The epoch of this replica's tenure.
    pub epoch: i64,
    /// false for an empty start: no copy existed, the root started as an empty folder.
    pub restored: bool,
    /// The copy the tenure started from; zeros when `restored` is false.
    pub restored_from: GotryCopyId,
}

/// Serves the tenant `organization_id`/`ledger_tenant_id`: refuses with
/// `GOTRY_STATUS_REPLICA_AT_CAPACITY` (the limit in `gotry_error_limit`) before the lease or
/// any file is touched, answers `GOTRY_STATUS_LEASE_HELD` with the holder's record when
/// another replica holds it (forward to `record.owner`), and otherwise acquires the lease
/// (renewed by the router from now on), restores the newest copy that verifies into the
/// tenant's root (with the options' `verify`), records the tenure and writes `*out_handle`
/// (free it with `gotry_tenant_handle_free`). Opening a tenant already served gives a new
/// handle on the same tenant; a second open of a tenant being opened waits for the first.
/// Blocks on both stores and the file system.
///
/// Returns `GOTRY_STATUS_ID_INVALID` for an id that is invalid (bytes that are not UTF-8
/// included), `GOTRY_STATUS_ROUTER_CLOSED` after `gotry_router_close`,
/// `GOTRY_STATUS_DRAINING` while the tenant is handed off, `GOTRY_STATUS_FENCED` while a lost
/// tenure of it still has calls running, and the restore's failures
/// (`GOTRY_STATUS_RESTORE_INVALID`, `GOTRY_STATUS_COPY_CONFLICT`,
/// `GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE`, `GOTRY_STATUS_STORAGE_ERROR`, with code
/// `OPEN_IN_PROCESS` when a file of the root is still open in this process), after which the
/// lease is released again so that the next replica may try at once;
/// `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` when the lease store fails, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when a pointer other than `out_error` is NULL.
///
/// # Safety
/// `router` must be NULL or a live `GotryRouter`; each id must be NULL or point to its length
/// in readable bytes; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_router_open(
    router: *const GotryRouter,
    organization_id: *const c_char,
    organization_id_len: usize,
    ledger_tenant_id: *const c_char,
    ledger_tenant_id_len: usize,
    out_handle: *mut *mut GotryTenantHandle,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let router = unsafe { handle("router", router)? };
        let organization = unsafe { bytes_in("organization_id", organization_id, organization_id_len)? };
        let tenant = unsafe { bytes_in("ledger_tenant_id", ledger_tenant_id, ledger_tenant_id_len)? };
        let out_handle = unsafe { Out::new("out_handle", out_handle)? };
        let organization = gotry_core::ids::claim_from_utf8("organization_id", organization)?;
        let tenant = gotry_core::ids::claim_from_utf8("ledger_tenant_id", tenant)?;
        let served = router.router.open(organization, tenant)?;
        out_handle.write(into_handle(GotryTenantHandle::new(served)));
        Ok(())
    })
}

/// Reads a tenant handle.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `handle` must be NULL or a live `GotryTenantHandle`; `out_view` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_tenant_handle_view(
    handle: *const GotryTenantHandle,
    out_view: *mut GotryTenantView,
) -> GotryStatus {
    unsafe {
        read_into("handle", handle, "out_view", out_view, |tenant| {
            let restored = tenant.handle.restored_from;
            Ok(GotryTenantView {
                key: tenant.key.ptr(),
                key_len: tenant.key.len(),
                root: tenant.root.ptr(),
                root_len: tenant.root.len(),
                epoch: tenant.handle.epoch(),
                restored: restored.is_some(),
                restored_from: restored.map_or(GotryCopyId { epoch: 0, seq: 0 }, GotryCopyId::from),
            })
        })
    }
}

/// Writes a new handle on the tenant's lease into `*out_lease` (free it with
/// `gotry_lease_free`): `gotry_lease_assert_held` on it is the write gate inside a call. The
/// router keeps the lease renewed; releasing it through this handle closes the tenant's gate
/// for good (hand the tenant off instead).
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `handle` must be NULL or a live `GotryTenantHandle`; `out_lease` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_tenant_handle_lease(
    handle: *const GotryTenantHandle,
    out_lease: *mut *mut GotryLease,
) -> GotryStatus {
    unsafe {
        read_into("handle", handle, "out_lease", out_lease, |tenant| {
            Ok(into_handle(GotryLease::new(tenant.handle.lease.clone())))
        })
    }
}

/// Frees a tenant handle; NULL does nothing. The tenant goes on being served, and views taken
/// from the handle become dangling.
///
/// # Safety
/// `handle` must be NULL or a `GotryTenantHandle` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_tenant_handle_free(handle: *mut GotryTenantHandle) {
    unsafe { free_handle(handle) }
}

/// A call of a served tenant in flight: a handoff waits for it. End it exactly once, with
/// `gotry_router_call_finish` (it succeeded: acknowledge it if that returns OK) or
/// `gotry_router_call_free` (abandon it); either frees it. Its accessors may be used from
/// several threads at once, but the call that ends it must be the last. It may be ended on
/// any thread, also after its router was freed.
pub struct GotryRouterCall {
    call: RouterCall,
    handle: GotryTenantHandle,
}

/// Starts a call of the served tenant `key`: counted in flight, then the write gate checked.
/// `*out_call` receives the call (see `GotryRouterCall`).
///
/// Every failure here comes before the handler ran: nothing was written, a retry is safe.
/// Returns `GOTRY_STATUS_ROUTER_CLOSED` once the router is closed, `GOTRY_STATUS_DRAINING`
/// while the tenant is handed off (retry on its next owner), `GOTRY_STATUS_FENCED` when its
/// lease was lost or its gate is closed (nothing is counted), `GOTRY_STATUS_LEASE_LOST` when
/// the key is not served by this router (or is still being opened),
/// `GOTRY_STATUS_INVALID_ARGUMENT` for a key that is not UTF-8, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when a pointer other than `out_error` is NULL.
///
/// # Safety
/// `router` must be NULL or a live `GotryRouter`; `key` must be NULL or point to `key_len`
/// readable bytes; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_router_begin(
    router: *const GotryRouter,
    key: *const c_char,
    key_len: usize,
    out_call: *mut *mut GotryRouterCall,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let router = unsafe { handle("router", router)? };
        let key = unsafe { text_in("key", key, key_len)? };
        let out_call = unsafe { Out::new("out_call", out_call)? };
        let call = router.router.begin(key)?;
        let handle = GotryTenantHandle::new(call.handle().clone());
        out_call.write(into_handle(GotryRouterCall { call, handle }));
        Ok(())
    })
}

/// Lends the tenant handle of a call into `*out_handle`: read it with
/// `gotry_tenant_handle_view` or `gotry_tenant_handle_lease`, never free it; it is valid until
/// the call ends.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `call` must be NULL or a live `GotryRouterCall`; `out_handle` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_router_call_handle(
    call: *const GotryRouterCall,
    out_handle: *mut *const GotryTenantHandle,
) -> GotryStatus {
    unsafe { read_into("call", call, "out_handle", out_handle, |call| Ok(&call.handle)) }
}

/// Ends a call that succeeded, and frees `call` whatever the outcome (never use it again).
/// `GOTRY_STATUS_OK` means the call may be acknowledged: the write gate still held after it,
/// and in `GOTRY_DURABILITY_STRICT` mode a durable copy holds it (this waits for one).
///
/// The handler has run, so a failure here leaves the call in doubt: its write may be
/// durable, and the host must not report it as refused. Returns `GOTRY_STATUS_CALL_IN_DOUBT`
/// when the gate closed meanwhile or, in `GOTRY_DURABILITY_STRICT` mode, no copy holding the
/// call could be written; the message names the cause's code (`GOTRY_TENANT_FENCED`, a
/// failing durable store, `GOTRY_TENANT_BUSY` when other calls kept the copy out, a storage
/// or snapshot failure), and the cause's details read through the error's accessors
/// (`gotry_error_backend_code`, `gotry_error_host_code`). Returns `GOTRY_STATUS_NULL_ARGUMENT`
/// when `call` is NULL. When this was the last call of a lost tenant, the `closed` event is
/// delivered on this thread before this returns.
///
/// # Safety
/// `call` must be NULL or a `GotryRouterCall` not yet ended, used by no other thread;
/// `out_error` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_router_call_finish(
    call: *mut GotryRouterCall,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        if call.is_null() {
            return Err(Failure::Null("call"));
        }
        // SAFETY: a live call from `gotry_router_begin`, by the caller's promise; it is
        // consumed here whatever the outcome.
        let call = unsafe { Box::from_raw(call) };
        call.call.finish()?;
        Ok(())
    })
}

/// Abandons a call and frees it; NULL does nothing. The call stops counting in flight as a
/// failed call: nothing is acknowledged, nothing waits for a copy. When it was the last call
/// of a lost tenant, the `closed` event is delivered on this thread before this returns.
///
/// # Safety
/// `call` must be NULL or a `GotryRouterCall` not yet ended, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_router_call_free(call: *mut GotryRouterCall) {
    unsafe { free_handle(call) }
}

/// Hands the tenant `key` off: new calls get `GOTRY_STATUS_DRAINING` while the running ones
/// finish (the lease is still renewed meanwhile), then a final copy is written and the lease
/// released, so the next replica restores every call acknowledged here. The `closed` event is
/// delivered on this thread before this returns. Blocks for at most `timeout_ms` on the calls,
/// then on the stores.
///
/// Returns `GOTRY_STATUS_DRAIN_TIMEOUT` when calls still run after `timeout_ms` (the key, the
/// count in flight and the timeout in the error; the tenant serves on, nothing was copied or
/// released), `GOTRY_STATUS_DRAINING` when a handoff of it is already running,
/// `GOTRY_STATUS_FENCED` when its lease was lost, `GOTRY_STATUS_LEASE_LOST` when the key is
/// not served by this router, the final copy's failure (`GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE`,
/// `GOTRY_STATUS_STORAGE_ERROR`, `GOTRY_STATUS_HOST_CALLBACK_FAILED`,
/// `GOTRY_STATUS_COPY_CONFLICT`, `GOTRY_STATUS_FENCED`: the tenant serves on, nothing was
/// released), `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` when the release could not be told to
/// the store (the tenant is no longer served and its lease runs out),
/// `GOTRY_STATUS_INVALID_ARGUMENT` for a key that is not UTF-8, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when a pointer other than `out_error` is NULL.
///
/// # Safety
/// `router` must be NULL or a live `GotryRouter`; `key` must be NULL or point to `key_len`
/// readable bytes; `out_error` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_router_handoff(
    router: *const GotryRouter,
    key: *const c_char,
    key_len: usize,
    timeout_ms: u64,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let router = unsafe { handle("router", router)? };
        let key = unsafe { text_in("key", key, key_len)? };
        router.router.handoff(key, Duration::from_millis(timeout_ms))?;
        Ok(())
    })
}

/// What `gotry_router_tick` did with a tenant whose background copy was due.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GotryRouterTickOutcome {
    /// Copied: every call acknowledged before the copy began is in it.
    Copied = 1,
    /// The copy failed; the `copy_failed` event (delivered before the tick returned) says
    /// why, and the tenant is tried again a tenth of the copy interval later.
    CopyFailed = 2,
}

/// One tenant of a tick report, lent by the report.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GotryRouterTickEntry {
    /// The tenant's key; its length is the authority.
    pub key: *const c_char,
    /// Bytes in `key`.
    pub key_len: usize,
    /// What became of its copy.
    pub outcome: GotryRouterTickOutcome,
}

/// What a tick report says besides its tenants.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GotryRouterTickView {
    /// The keeper's round: renewals sent, leases renewed, lost (each also told as a `lost`
    /// event) and to be tried again; its `next_due_ms` is the keeper's own.
    pub keeper: GotryTickReport,
    /// Whether any lease is kept, and so whether `next_due_ms` means anything.
    pub has_next_due: bool,
    /// When the next round is due on the router's clock, in milliseconds: the keeper's next
    /// renewal or the next background copy, whichever comes first (when a host that drives
    /// its own timer ticks next).
    pub next_due_ms: f64,
    /// How many tenants the report lists (read them with `gotry_router_tick_report_get`).
    pub len: usize,
}

/// What `gotry_router_tick` did: its view, then the tenants whose due copy it wrote, then
/// those whose copy failed, each group ordered by key. Immutable: any number of threads may
/// read it at once; free it once with `gotry_router_tick_report_free`.
pub struct GotryRouterTickReport {
    view: GotryRouterTickView,
    entries: Vec<(Text, GotryRouterTickOutcome)>,
}

impl GotryRouterTickReport {
    fn new(report: RouterTickReport) -> GotryRouterTickReport {
        let copied = report
            .copied
            .iter()
            .map(|key| (Text::new(key), GotryRouterTickOutcome::Copied));
        let failed = report
            .failed
            .iter()
            .map(|key| (Text::new(key), GotryRouterTickOutcome::CopyFailed));
        let entries: Vec<_> = copied.chain(failed).collect();
        GotryRouterTickReport {
            view: GotryRouterTickView {
                keeper: GotryTickReport::from(report.keeper),
                has_next_due: report.next_due_ms.is_some(),
                next_due_ms: report.next_due_ms.unwrap_or(0.0),
                len: entries.len(),
            },
            entries,
        }
    }
}

/// Runs one round on the router's clock, as the router's threads do (a router started with
/// `options.without_thread` needs it called): the keeper's round (the renewals that are due;
/// a lease the store refuses is lost and its tenant fenced), then in
/// `GOTRY_DURABILITY_ASYNC` mode every background copy that is due. `*out_report` receives
/// what it did (free it with `gotry_router_tick_report_free`). The round's events reach the
/// callback on this thread before this returns. Blocks on both stores; a due copy waits for
/// its tenant's running calls up to its grace (100 ms on the router's clock), so with a manual
/// clock and a call in flight it returns once that call ended or another thread moved the
/// clock past the grace.
///
/// Returns `GOTRY_STATUS_ROUTER_CLOSED` after `gotry_router_close`,
/// `GOTRY_STATUS_INVALID_ARGUMENT` when called from the callback of a `lost` event (the
/// callback never ticks: see `GotryRouterEventFn`), and `GOTRY_STATUS_NULL_ARGUMENT` when a
/// pointer other than `out_error` is NULL. A store
/// failure is not a failure of the call: it is in the report (renewals to try again, copies
/// failed) and in the events.
///
/// # Safety
/// `router` must be NULL or a live `GotryRouter`; the out-parameters must be NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_router_tick(
    router: *const GotryRouter,
    out_report: *mut *mut GotryRouterTickReport,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let router = unsafe { handle("router", router)? };
        let out_report = unsafe { Out::new("out_report", out_report)? };
        let report = router.router.tick()?;
        out_report.write(into_handle(GotryRouterTickReport::new(report)));
        Ok(())
    })
}

/// Reads what a tick report says besides its tenants.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `report` must be NULL or a live `GotryRouterTickReport`; `out_view` must be NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_router_tick_report_view(
    report: *const GotryRouterTickReport,
    out_view: *mut GotryRouterTickView,
) -> GotryStatus {
    unsafe { read_into("report", report, "out_view", out_view, |report| Ok(report.view)) }
}

/// Reads tenant `index` of a tick report; its key is borrowed from `report`.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` when `index` is not below the length, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `report` must be NULL or a live `GotryRouterTickReport`; `out_entry` must be NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_router_tick_report_get(
    report: *const GotryRouterTickReport,
    index: usize,
    out_entry: *mut GotryRouterTickEntry,
) -> GotryStatus {
    unsafe {
        read_into("report", report, "out_entry", out_entry, |report| {
            let (key, outcome) = element(&report.entries, index)?;
            Ok(GotryRouterTickEntry {
                key: key.ptr(),
                key_len: key.len(),
                outcome: *outcome,
            })
        })
    }
}

/// Frees a tick report and what it lent; NULL does nothing.
///
/// # Safety
/// `report` must be NULL or a `GotryRouterTickReport` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_router_tick_report_free(report: *mut GotryRouterTickReport) {
    unsafe { free_handle(report) }
}

/// What became of a tenant when its router closed.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GotryCloseOutcome {
    /// Drained, copied and released: the next replica restores everything acknowledged.
    HandedOff = 1,
    /// Calls still ran at the timeout (DRAIN_TIMEOUT): nothing was copied; the keeper's
    /// shutdown then released or dropped its lease (see `gotry_close_report_keeper`).
    TimedOut = 2,
    /// The handoff failed (its error is in the entry); the keeper's shutdown then released or
    /// dropped its lease.
    Failed = 3,
}

/// One tenant of a close report, lent by the report.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GotryCloseEntry {
    /// The tenant's key; its length is the authority.
    pub key: *const c_char,
    /// Bytes in `key`.
    pub key_len: usize,
    /// What became of it.
    pub outcome: GotryCloseOutcome,
    /// For `GOTRY_CLOSE_OUTCOME_FAILED`, why (never free it); NULL otherwise.
    pub error: *const GotryError,
}

/// What `gotry_router_close` did: the tenants handed off, then those timed out, then those
/// failed, each group ordered by key, and the keeper's shutdown report. Immutable: any number
/// of threads may read it at once; free it once with `gotry_close_report_free`.
pub struct GotryCloseReport {
    entries: Vec<(Text, GotryCloseOutcome, Option<GotryError>)>,
    keeper: GotryShutdownReport,
}

impl GotryCloseReport {
    fn new(report: CloseReport) -> GotryCloseReport {
        let CloseReport {
            mut handed_off,
            mut timed_out,
            mut failed,
            keeper,
            ..
        } = report;
        handed_off.sort();
        timed_out.sort();
        failed.sort_by(|a, b| a.0.cmp(&b.0));
        let handed_off = handed_off
            .iter()
            .map(|key| (Text::new(key), GotryCloseOutcome::HandedOff, None));
        let timed_out = timed_out
            .iter()
            .map(|key| (Text::new(key), GotryCloseOutcome::TimedOut, None));
        let failed = failed.iter().map(|(key, error): &(String, Error)| {
            (
                Text::new(key),
                GotryCloseOutcome::Failed,
                Some(GotryError::from_core(error)),
            )
        });
        GotryCloseReport {
            entries: handed_off.chain(timed_out).chain(failed).collect(),
            keeper: GotryShutdownReport::new(keeper),
        }
    }
}

/// Closes the router: every later `gotry_router_open` returns `GOTRY_STATUS_ROUTER_CLOSED`;
/// every tenant is handed off as `gotry_router_handoff` does, each waiting at most
/// `timeout_ms` for its calls; then the copier stops and the keeper shuts down, releasing
/// every lease still kept (none is started after `timeout_ms` on the router's clock). No
/// `lost` or `copy_failed` event follows it. `*out_report` receives what became of each
/// tenant (free it with `gotry_close_report_free`). A tenant whose drain timed out stays
/// listed, its lease released by the keeper's shutdown: calls to it are FENCED, and closing
/// again reports it failed (FENCED). The handle stays valid until `gotry_router_free`.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `router` must be NULL or a live `GotryRouter`; `out_report` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_router_close(
    router: *const GotryRouter,
    timeout_ms: u64,
    out_report: *mut *mut GotryCloseReport,
) -> GotryStatus {
    unsafe {
        read_into("router", router, "out_report", out_report, |router| {
            let report = router.router.close(Duration::from_millis(timeout_ms));
            Ok(into_handle(GotryCloseReport::new(report)))
        })
    }
}

/// Counts the tenants of a close report.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `report` must be NULL or a live `GotryCloseReport`; `out_len` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_close_report_len(
    report: *const GotryCloseReport,
    out_len: *mut usize,
) -> GotryStatus {
    unsafe {
        read_into("report", report, "out_len", out_len, |report| {
            Ok(report.entries.len())
        })
    }
}

/// Reads tenant `index` of a close report; its key and error are borrowed from `report`.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` when `index` is not below the length, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `report` must be NULL or a live `GotryCloseReport`; `out_entry` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_close_report_get(
    report: *const GotryCloseReport,
    index: usize,
    out_entry: *mut GotryCloseEntry,
) -> GotryStatus {
    unsafe {
        read_into("report", report, "out_entry", out_entry, |report| {
            let (key, outcome, error) = element(&report.entries, index)?;
            Ok(GotryCloseEntry {
                key: key.ptr(),
                key_len: key.len(),
                outcome: *outcome,
                error: lent(error.as_ref()),
            })
        })
    }
}

/// Lends the keeper's shutdown report of a close into `*out_keeper`: what became of each
/// lease still kept after the handoffs (those timed out or failed), read with
/// `gotry_shutdown_report_len` and `gotry_shutdown_report_get`. It is borrowed from `report`:
/// never pass it to `gotry_shutdown_report_free`.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `report` must be NULL or a live `GotryCloseReport`; `out_keeper` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_close_report_keeper(
    report: *const GotryCloseReport,
    out_keeper: *mut *const GotryShutdownReport,
) -> GotryStatus {
    unsafe {
        read_into("report", report, "out_keeper", out_keeper, |report| {
            Ok(&report.keeper)
        })
    }
}

/// Frees a close report and what it lent; NULL does nothing.
///
/// # Safety
/// `report` must be NULL or a `GotryCloseReport` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_close_report_free(report: *mut GotryCloseReport) {
    unsafe { free_handle(report) }
}

/// Where a tenant is in its life on a router.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GotryTenantState {
    /// `opening`: its lease is being acquired and its copy restored.
    Opening = 1,
    /// `serving`: calls run.
    Serving = 2,
    /// `draining`: a handoff waits for its calls; new ones get DRAINING.
    Draining = 3,
    /// `lost`: its lease was lost; it leaves the router when its last call ends.
    Lost = 4,
    /// `closed`: the router was closed while its calls still ran (its drain timed out); its
    /// lease is no longer kept and it leaves the router when its last call ends.
    Closed = 5,
}

const TENANT_STATES: [(GotryTenantState, TenantState); 5] = [
    (GotryTenantState::Opening, TenantState::Opening),
    (GotryTenantState::Serving, TenantState::Serving),
    (GotryTenantState::Draining, TenantState::Draining),
    (GotryTenantState::Lost, TenantState::Lost),
    (GotryTenantState::Closed, TenantState::Closed),
];

/// The core's name of a `GotryTenantState` value (`"opening"`, `"serving"`, `"draining"`,
/// `"lost"`, `"closed"`); NULL for any other value. Static; thread-safe.
#[no_mangle]
pub extern "C" fn gotry_tenant_state_name(state: c_int) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    table_name(
        &NAMES,
        &TENANT_STATES,
        |ours| ours as c_int == state,
        TenantState::as_str,
    )
}

/// One tenant of a router, as operators and metrics see it; the strings are borrowed from the
/// `GotryTenantStatusList` (NUL-terminated, lengths the authority).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GotryTenantStatusView {
    /// The tenant's lease key.
    pub key: *const c_char,
    /// Bytes in `key`.
    pub key_len: usize,
    /// Where it is in its life.
    pub state: GotryTenantState,
    /// The epoch of the tenure; 0 while opening.
    pub epoch: i64,
    /// Calls begun and not yet ended.
    pub in_flight: u64,
    /// Whether `last_copy` means anything (a copy was written or restored this tenure).
    pub has_last_copy: bool,
    /// The newest copy written this tenure, or the one restored; zeros when
    /// `has_last_copy` is false.
    pub last_copy: GotryCopyId,
    /// Calls acknowledged since the last good copy began.
    pub writes_since_copy: u64,
    /// Milliseconds since the last good copy began (since the tenant opened, before one).
    pub lag_ms: u64,
    /// Why the last copy failed (`<code>: <message>`); NULL when it did not.
    pub last_copy_error: *const c_char,
    /// Bytes in `last_copy_error`; 0 when it is NULL.
    pub last_copy_error_len: usize,
}

struct OwnedStatus {
    key: Text,
    status: TenantStatus,
    last_copy_error: Option<Text>,
}

/// The tenants of `gotry_router_status`, ordered by key. Immutable: any number of threads may
/// read it at once; free it once with `gotry_tenant_status_list_free`.
pub struct GotryTenantStatusList(Vec<OwnedStatus>);

/// Writes every tenant the router knows (opening, serving, draining, or lost with calls still
/// running), ordered by key, into `*out_list` (free it with `gotry_tenant_status_list_free`).
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `router` must be NULL or a live `GotryRouter`; `out_list` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_router_status(
    router: *const GotryRouter,
    out_list: *mut *mut GotryTenantStatusList,
) -> GotryStatus {
    unsafe {
        read_into("router", router, "out_list", out_list, |router| {
            let all = router
                .router
                .status()?
                .into_iter()
                .map(|status| OwnedStatus {
                    key: Text::new(&status.key),
                    last_copy_error: status.last_copy_error.as_deref().map(Text::new),
                    status,
                })
                .collect();
            Ok(into_handle(GotryTenantStatusList(all)))
        })
    }
}

/// Counts the tenants of a status list.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `list` must be NULL or a live `GotryTenantStatusList`; `out_len` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_tenant_status_list_len(
    list: *const GotryTenantStatusList,
    out_len: *mut usize,
) -> GotryStatus {
    unsafe { read_into("list", list, "out_len", out_len, |list| Ok(list.0.len())) }
}

/// Reads tenant `index` of a status list; its strings are borrowed from `list`.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` when `index` is not below the length, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `list` must be NULL or a live `GotryTenantStatusList`; `out_view` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_tenant_status_list_get(
    list: *const GotryTenantStatusList,
    index: usize,
    out_view: *mut GotryTenantStatusView,
) -> GotryStatus {
    unsafe {
        read_into("list", list, "out_view", out_view, |list| {
            let owned = element(&list.0, index)?;
            let status = &owned.status;
            let state = c_value(&TENANT_STATES, status.state)
                .ok_or_else(|| Failure::Panic(format!("tenant state {:?} has no C value", status.state)))?;
            Ok(GotryTenantStatusView {
                key: owned.key.ptr(),
                key_len: owned.key.len(),
                state,
                epoch: status.epoch,
                in_flight: status.in_flight,
                has_last_copy: status.last_copy.is_some(),
                last_copy: status
                    .last_copy
                    .map_or(GotryCopyId { epoch: 0, seq: 0 }, GotryCopyId::from),
                writes_since_copy: status.writes_since_copy,
                lag_ms: status.lag_ms,
                last_copy_error: owned.last_copy_error.as_ref().map_or(std::ptr::null(), Text::ptr),
                last_copy_error_len: owned.last_copy_error.as_ref().map_or(0, Text::len),
            })
        })
    }
}

/// Frees a status list; NULL does nothing. Views read from it become dangling.
///
/// # Safety
/// `list` must be NULL or a `GotryTenantStatusList` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_tenant_status_list_free(list: *mut GotryTenantStatusList) {
    unsafe { free_handle(list) }
}

/// Stops the router without handing anything off and frees it; NULL does nothing. Waits for
/// a host callback in progress and for the copier thread (and a copy it is writing). Leases
/// are not released: their gates close at their fences and the store lets them run out (call
/// `gotry_router_close` first for a prompt handoff); a call still held by the host keeps them
/// renewed until it ends. No callback of the router (events, snapshot, verify) is called
/// after this returns: a copy that would need the snapshot then fails with
/// `GOTRY_STATUS_HOST_CALLBACK_FAILED`. Calls, tenant handles and reports stay valid.
///
/// # Safety
/// `router` must be NULL or a `GotryRouter` not yet freed, used by no other thread and not by
/// the call one of its callbacks runs in.
#[no_mangle]
pub unsafe extern "C" fn gotry_router_free(router: *mut GotryRouter) {
    unsafe { free_handle(router) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn text(ptr: *const c_char) -> Option<String> {
        // SAFETY: the functions under test return NULL or a static NUL-terminated string.
        (!ptr.is_null()).then(|| unsafe { CStr::from_ptr(ptr) }.to_str().unwrap().to_owned())
    }

    #[test]
    fn a_durability_that_is_no_value_is_refused_without_being_read_as_one() {
        let mut options = GotryRouterOptions::defaults();
        // SAFETY: both point to a live struct; the bytes written are an int-sized field.
        unsafe {
            std::ptr::addr_of_mut!(options.durability)
                .cast::<c_int>()
                .write(7);
            assert!(matches!(
                read_options(&options),
                Err(Failure::Core(Error::InvalidArgument { .. }))
            ));
            std::ptr::addr_of_mut!(options.durability)
                .cast::<c_int>()
                .write(2);
            let read = read_options(&options).unwrap().unwrap();
            assert_eq!(read.durability, GotryDurability::Strict);
            assert_eq!(read.capacity, default_capacity());
            assert!(!read.without_thread);
            // A C bool holding neither 0 nor 1 is true, never a Rust bool that is neither.
            std::ptr::addr_of_mut!(options.without_thread)
                .cast::<u8>()
                .write(2);
            assert!(read_options(&options).unwrap().unwrap().without_thread);
            assert!(read_options(std::ptr::null()).unwrap().is_none());
        }
    }

    #[test]
    fn names_of_the_router_enums() {
        assert_eq!(
            text(gotry_router_event_kind_name(3)).as_deref(),
            Some("copy_failed")
        );
        assert!(gotry_router_event_kind_name(0).is_null());
        for kind in RouterEventKind::ALL {
            let ours = c_value(&EVENT_KINDS, kind).expect("every kind of the core has a C value");
            assert_eq!(
                text(gotry_router_event_kind_name(ours as c_int)).as_deref(),
                Some(kind.as_str())
            );
        }
        assert_eq!(EVENT_KINDS.len(), RouterEventKind::ALL.len());
        assert_eq!(text(gotry_tenant_state_name(4)).as_deref(), Some("lost"));
        assert!(gotry_tenant_state_name(6).is_null());
        for (ours, core) in TENANT_STATES {
            assert_eq!(
                text(gotry_tenant_state_name(ours as c_int)).as_deref(),
                Some(core.as_str())
            );
        }
    }
}
