//! One replica keeps many tenant leases alive with batched renewals.

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use gotry_core::keeper::{DEFAULT_MAX_BATCH, DEFAULT_RENEW_FRACTION};
use gotry_core::{
    Error, KeeperEvent, KeeperEventKind, KeeperOptions, LeaseKeeper, MonotonicClock, ShutdownReport,
    SystemMonotonicClock, TickReport,
};

use crate::boundary::{free_handle, handle, into_handle, optional_handle, read_into, text_in, Failure, Out};
use crate::clock::GotryManualClock;
use crate::error::{lent, GotryError};
use crate::lease::GotryLease;
use crate::records::Text;
use crate::status::{table_name, GotryStatus};
use crate::store::GotryStore;

/// What a keeper reports without being asked.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GotryKeeperEventKind {
    /// `lost`: the store refused a renewal; another replica may hold the tenant now. The
    /// keeper dropped the lease, whose gate answers FENCED(lease_lost).
    Lost = 1,
    /// `fenced_locally`: the fence passed before a renewal was granted; the gate answers
    /// FENCED(lease_expired_locally). Told once until the lease resumes.
    FencedLocally = 2,
    /// `resumed`: a renewal moved the fence of a locally fenced lease ahead again.
    Resumed = 3,
    /// `renew_failed`: renewals could not be made (the store failed); the leases will be
    /// tried again.
    RenewFailed = 4,
}

const EVENT_KINDS: [(GotryKeeperEventKind, KeeperEventKind); 4] = [
    (GotryKeeperEventKind::Lost, KeeperEventKind::Lost),
    (
        GotryKeeperEventKind::FencedLocally,
        KeeperEventKind::FencedLocally,
    ),
    (GotryKeeperEventKind::Resumed, KeeperEventKind::Resumed),
    (GotryKeeperEventKind::RenewFailed, KeeperEventKind::RenewFailed),
];

/// The core's stable name of a `GotryKeeperEventKind` value (`"lost"`, `"fenced_locally"`,
/// `"resumed"`, `"renew_failed"`); NULL for any other value. Static; thread-safe.
#[no_mangle]
pub extern "C" fn gotry_keeper_event_kind_name(kind: c_int) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    table_name(
        &NAMES,
        &EVENT_KINDS,
        |ours| ours as c_int == kind,
        KeeperEventKind::as_str,
    )
}

/// One event, lent to the callback for the duration of the call only: copy what you keep.
#[repr(C)]
#[derive(Debug)]
pub struct GotryKeeperEvent {
    /// What happened.
    pub kind: GotryKeeperEventKind,
    /// The lease's key (lost, fenced_locally, resumed); NULL for renew_failed. Its length is
    /// the authority.
    pub key: *const c_char,
    /// Bytes in `key`.
    pub key_len: usize,
    /// The lease's epoch; 0 for renew_failed.
    pub epoch: i64,
    /// Why (lost: the refusal; renew_failed: the store's failure); NULL otherwise. Read it
    /// with the `gotry_error_*` accessors; never free it.
    pub error: *const GotryError,
    /// renew_failed: how many leases will be tried again; 0 otherwise.
    pub leases: usize,
}

/// A keeper's event callback. It runs on the keeper's thread (or on the caller of
/// `gotry_keeper_tick`), one event at a time, after the round's state is in place: when
/// `lost` arrives, the keeper no longer holds the key and its gate already says so. Keep it
/// short (it delays the renewals) and never let a C++ exception escape it. It may shut down
/// its own keeper, but neither tick nor free it. Once `gotry_keeper_shutdown` or
/// `gotry_keeper_free` returned it is never called again, so `user_data` may be freed then.
pub type GotryKeeperEventFn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, event: *const GotryKeeperEvent)>;

/// How a keeper renews; `gotry_keeper_options_default` fills in the defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GotryKeeperOptions {
    /// The part of the TTL between two renewals of a lease (default 1/3: two more tries fit
    /// before the lease runs out). Must leave at least 1 ms and renew before the fence.
    pub renew_fraction: f64,
    /// The most leases per store transaction (default 1000); at least 1.
    pub max_batch: usize,
    /// false: the keeper renews on its own thread. true: rounds run only when the host calls
    /// `gotry_keeper_tick` (its own timer, or a test with a manual clock).
    pub without_thread: bool,
}

/// Writes the default options.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when `out_options` is NULL.
///
/// # Safety
/// `out_options` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_keeper_options_default(out_options: *mut GotryKeeperOptions) -> GotryStatus {
    ffi_boundary!(std::ptr::null_mut(), {
        let out_options = unsafe { Out::new("out_options", out_options)? };
        out_options.write(GotryKeeperOptions::default());
        Ok(())
    })
}

impl Default for GotryKeeperOptions {
    fn default() -> GotryKeeperOptions {
        GotryKeeperOptions {
            renew_fraction: DEFAULT_RENEW_FRACTION,
            max_batch: DEFAULT_MAX_BATCH,
            without_thread: false,
        }
    }
}

/// Keeps many leases of one owner on one store renewed, a batch per store call. Thread-safe:
/// any function may be called from several threads at once. `gotry_keeper_free` must be the
/// last call on the handle.
pub struct GotryKeeper(LeaseKeeper);

/// The host's callback and its user data, moved to the keeper's thread.
struct Callback {
    call: unsafe extern "C" fn(*mut c_void, *const GotryKeeperEvent),
    user_data: *mut c_void,
}

// SAFETY: the header tells the host that the callback runs on the keeper's thread, so the
// host makes `user_data` usable from there; the library never touches it.
unsafe impl Send for Callback {}
unsafe impl Sync for Callback {}

impl Callback {
    fn deliver(&self, event: &KeeperEvent) {
        let kind = match event.kind() {
            KeeperEventKind::Lost => GotryKeeperEventKind::Lost,
            KeeperEventKind::FencedLocally => GotryKeeperEventKind::FencedLocally,
            KeeperEventKind::Resumed => GotryKeeperEventKind::Resumed,
            KeeperEventKind::RenewFailed => GotryKeeperEventKind::RenewFailed,
        };
        let key = event.key().map(Text::new);
        let error = event.error().map(GotryError::from_core);
        let leases = match event {
            KeeperEvent::RenewFailed { leases, .. } => *leases,
            _ => 0,
        };
        let view = GotryKeeperEvent {
            kind,
            key: key.as_ref().map_or(std::ptr::null(), Text::ptr),
            key_len: key.as_ref().map_or(0, Text::len),
            epoch: event.epoch().unwrap_or(0),
            error: lent(error.as_ref()),
            leases,
        };
        // SAFETY: the host gave this function for this purpose; `view` and what it lends
        // live until the call returns.
        unsafe { (self.call)(self.user_data, &view) };
    }
}

/// Starts a keeper for `replica_id` on `store`, every lease with `ttl_ms` and `margin_ms`.
///
/// `options` may be NULL for the defaults; `clock` is the holders' monotonic clock (NULL:
/// the system's; a manual clock makes every rule deterministic with `without_thread`);
/// `on_event` may be NULL for no events, and is called with `user_data`.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` for an owner, TTL, margin, renew fraction or batch
/// size out of range, `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` when the thread cannot start,
/// and `GOTRY_STATUS_NULL_ARGUMENT` when `store`, `replica_id` or `out_keeper` is NULL.
///
/// # Safety
/// `store` must be NULL or a live `GotryStore`; `replica_id` must be NULL or point to
/// `replica_id_len` readable bytes; `options` must be NULL or readable; `clock` must be NULL
/// or a live `GotryManualClock`; `on_event` must be NULL or a function as
/// `GotryKeeperEventFn` describes; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_keeper_start(
    store: *const GotryStore,
    replica_id: *const c_char,
    replica_id_len: usize,
    ttl_ms: i64,
    margin_ms: i64,
    options: *const GotryKeeperOptions,
    clock: *const GotryManualClock,
    on_event: GotryKeeperEventFn,
    user_data: *mut c_void,
    out_keeper: *mut *mut GotryKeeper,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let store = unsafe { handle("store", store)? };
        let replica_id = unsafe { text_in("replica_id", replica_id, replica_id_len)? };
        let options = unsafe { optional_handle(options) }.copied().unwrap_or_default();
        let clock: Arc<dyn MonotonicClock> = match unsafe { optional_handle(clock) } {
            Some(clock) => clock.clock.clone(),
            None => Arc::new(SystemMonotonicClock),
        };
        let out_keeper = unsafe { Out::new("out_keeper", out_keeper)? };
        let mut core_options = KeeperOptions::new(store.store.clone(), replica_id, ttl_ms, margin_ms);
        core_options.clock = clock;
        core_options.renew_fraction = options.renew_fraction;
        core_options.max_batch = options.max_batch;
        core_options.on_event = on_event.map(|call| {
            let callback = Callback { call, user_data };
            Box::new(move |event: KeeperEvent| callback.deliver(&event)) as gotry_core::EventHandler
        });
        let keeper = if options.without_thread {
            LeaseKeeper::without_thread(core_options)?
        } else {
            LeaseKeeper::start(core_options)?
        };
        out_keeper.write(into_handle(GotryKeeper(keeper)));
        Ok(())
    })
}

/// Acquires `key` for the keeper's owner and keeps it renewed until it is removed, lost or
/// the keeper shuts down. `*out_lease` receives a handle on the kept lease (its write gate,
/// epoch, key...; free it with `gotry_lease_free`, which does not stop the keeping).
///
/// Returns as `gotry_lease_acquire` does (`GOTRY_STATUS_LEASE_HELD`, `GOTRY_STATUS_LEASE_LOST`,
/// `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE`, `GOTRY_STATUS_INVALID_ARGUMENT`), with
/// `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` once the keeper is shut down, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when a pointer other than `out_error` is NULL.
///
/// # Safety
/// `keeper` must be NULL or a live `GotryKeeper`; `key` must be NULL or point to `key_len`
/// readable bytes; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_keeper_acquire(
    keeper: *const GotryKeeper,
    key: *const c_char,
    key_len: usize,
    out_lease: *mut *mut GotryLease,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let keeper = unsafe { handle("keeper", keeper)? };
        let key = unsafe { text_in("key", key, key_len)? };
        let out_lease = unsafe { Out::new("out_lease", out_lease)? };
        let lease = keeper.0.acquire(key)?;
        out_lease.write(into_handle(GotryLease::new(lease)));
        Ok(())
    })
}

/// Writes a new handle on the kept lease of `key` into `*out_lease` (free it with
/// `gotry_lease_free`), or NULL when the key is not kept.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` for a key that is not UTF-8, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when a pointer other than `out_error` is NULL.
///
/// # Safety
/// `keeper` must be NULL or a live `GotryKeeper`; `key` must be NULL or point to `key_len`
/// readable bytes; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_keeper_get(
    keeper: *const GotryKeeper,
    key: *const c_char,
    key_len: usize,
    out_lease: *mut *mut GotryLease,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let keeper = unsafe { handle("keeper", keeper)? };
        let key = unsafe { text_in("key", key, key_len)? };
        let out_lease = unsafe { Out::new("out_lease", out_lease)? };
        out_lease.write(
            keeper
                .0
                .get(key)
                .map_or(std::ptr::null_mut(), |lease| into_handle(GotryLease::new(lease))),
        );
        Ok(())
    })
}

/// Stops keeping `key` and releases it (the gate closes first, then the store is told).
/// `*out_removed` is false when the key was not kept.
///
/// Returns `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` when the store could not be told (the gate
/// is closed anyway and the lease runs out), `GOTRY_STATUS_INVALID_ARGUMENT` for a key that
/// is not UTF-8, and `GOTRY_STATUS_NULL_ARGUMENT` when a pointer other than `out_error` is
/// NULL.
///
/// # Safety
/// `keeper` must be NULL or a live `GotryKeeper`; `key` must be NULL or point to `key_len`
/// readable bytes; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_keeper_remove(
    keeper: *const GotryKeeper,
    key: *const c_char,
    key_len: usize,
    out_removed: *mut bool,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let keeper = unsafe { handle("keeper", keeper)? };
        let key = unsafe { text_in("key", key, key_len)? };
        let out_removed = unsafe { Out::new("out_removed", out_removed)? };
        out_removed.write(keeper.0.remove(key)?);
        Ok(())
    })
}

/// Counts the kept leases (including any closed through their own handle since the last
/// round, which the next round drops).
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `keeper` must be NULL or a live `GotryKeeper`; `out_len` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_keeper_len(keeper: *const GotryKeeper, out_len: *mut usize) -> GotryStatus {
    unsafe { read_into("keeper", keeper, "out_len", out_len, |keeper| Ok(keeper.0.len())) }
}

/// What one round did.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GotryTickReport {
    /// Store calls made (batches sent).
    pub batches: usize,
    /// Leases renewed.
    pub renewed: usize,
    /// Leases the store refused: lost.
    pub lost: usize,
    /// Due leases not renewed, to be tried again.
    pub failed: usize,
    /// Whether any lease is kept, and so whether `next_due_ms` means anything.
    pub has_next_due: bool,
    /// When the next round is due, on the keeper's clock, in milliseconds.
    pub next_due_ms: f64,
}

impl From<TickReport> for GotryTickReport {
    fn from(report: TickReport) -> GotryTickReport {
        GotryTickReport {
            batches: report.batches,
            renewed: report.renewed,
            lost: report.lost,
            failed: report.failed,
            has_next_due: report.next_due_ms.is_some(),
            next_due_ms: report.next_due_ms.unwrap_or(0.0),
        }
    }
}

/// Runs one round if a lease is due on the keeper's clock (what the keeper's thread does;
/// a keeper started `without_thread` needs it called), and writes what it did. Events of the
/// round reach the callback on the calling thread before this returns. Blocks on the store.
///
/// Returns `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` once the keeper is shut down,
/// `GOTRY_STATUS_INVALID_ARGUMENT` when called from the keeper's own callback, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when `keeper` or `out_report` is NULL. A store failure is not
/// a failure of the call: it is in the report (`failed`) and a renew_failed event.
///
/// # Safety
/// `keeper` must be NULL or a live `GotryKeeper`; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_keeper_tick(
    keeper: *const GotryKeeper,
    out_report: *mut GotryTickReport,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let keeper = unsafe { handle("keeper", keeper)? };
        let out_report = unsafe { Out::new("out_report", out_report)? };
        out_report.write(GotryTickReport::from(keeper.0.tick()?));
        Ok(())
    })
}

/// What became of a kept lease at shutdown.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GotryShutdownOutcome {
    /// Released in the store: the next owner may start at once.
    Released = 1,
    /// The gate is closed but the store could not be told: the lease runs out at its TTL.
    Failed = 2,
    /// Not reached before the deadline: no longer renewed, so its gate closes at its fence
    /// and the store lets it run out. Its handles can still release it.
    TimedOut = 3,
}

/// One kept lease at shutdown, lent by the report.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GotryShutdownEntry {
    /// The lease's key; its length is the authority.
    pub key: *const c_char,
    /// Bytes in `key`.
    pub key_len: usize,
    /// What became of it.
    pub outcome: GotryShutdownOutcome,
    /// For `GOTRY_SHUTDOWN_OUTCOME_FAILED`, why (never free it); NULL otherwise.
    pub error: *const GotryError,
}

/// What `gotry_keeper_shutdown` did: the released leases, then the failed ones, then those
/// timed out, each group ordered by key. Immutable: any number of threads may read it at
/// once; free it once with `gotry_shutdown_report_free`.
pub struct GotryShutdownReport(Vec<(Text, GotryShutdownOutcome, Option<GotryError>)>);

impl GotryShutdownReport {
    pub(crate) fn new(report: ShutdownReport) -> GotryShutdownReport {
        let released = report
            .released
            .iter()
            .map(|key| (Text::new(key), GotryShutdownOutcome::Released, None));
        let failed = report.failed.iter().map(|(key, error): &(String, Error)| {
            (
                Text::new(key),
                GotryShutdownOutcome::Failed,
                Some(GotryError::from_core(error)),
            )
        });
        let timed_out = report
            .timed_out
            .iter()
            .map(|key| (Text::new(key), GotryShutdownOutcome::TimedOut, None));
        GotryShutdownReport(released.chain(failed).chain(timed_out).collect())
    }
}

/// Stops renewing and releases every kept lease, starting no release after `timeout_ms` (on
/// the keeper's clock); waits for a batch in flight for at most as long. The callback is
/// never called after this returns. `*out_report` receives what became of each lease (free
/// it with `gotry_shutdown_report_free`); calling it again reports nothing. The handle stays
/// valid until `gotry_keeper_free`, and every later acquire or tick returns
/// `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE`.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `keeper` must be NULL or a live `GotryKeeper`; `out_report` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_keeper_shutdown(
    keeper: *const GotryKeeper,
    timeout_ms: u64,
    out_report: *mut *mut GotryShutdownReport,
) -> GotryStatus {
    unsafe {
        read_into("keeper", keeper, "out_report", out_report, |keeper| {
            let report = keeper.0.shutdown(Duration::from_millis(timeout_ms));
            Ok(into_handle(GotryShutdownReport::new(report)))
        })
    }
}

/// Counts the entries of a shutdown report.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `report` must be NULL or a live `GotryShutdownReport`; `out_len` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_shutdown_report_len(
    report: *const GotryShutdownReport,
    out_len: *mut usize,
) -> GotryStatus {
    unsafe { read_into("report", report, "out_len", out_len, |report| Ok(report.0.len())) }
}

/// Reads entry `index` of a shutdown report; its key and error are borrowed from `report`.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` when `index` is not below the length, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `report` must be NULL or a live `GotryShutdownReport`; `out_entry` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_shutdown_report_get(
    report: *const GotryShutdownReport,
    index: usize,
    out_entry: *mut GotryShutdownEntry,
) -> GotryStatus {
    unsafe {
        read_into("report", report, "out_entry", out_entry, |report| {
            let (key, outcome, error) = report.0.get(index).ok_or_else(|| {
                Failure::invalid(format!(
                    "index {index} is out of range for a report of {}",
                    report.0.len()
                ))
            })?;
            Ok(GotryShutdownEntry {
                key: key.ptr(),
                key_len: key.len(),
                outcome: *outcome,
                error: lent(error.as_ref()),
            })
        })
    }
}

/// Frees a shutdown report and the errors it lent; NULL does nothing.
///
/// # Safety
/// `report` must be NULL or a `GotryShutdownReport` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_shutdown_report_free(report: *mut GotryShutdownReport) {
    unsafe { free_handle(report) }
}

/// Stops the keeper without waiting for the store and frees it; NULL does nothing. A batch
/// in flight finishes on its own thread, but the callback is never called after this
/// returns. Kept leases are not released: their gates close at their fences and the store
/// lets them run out (`gotry_keeper_shutdown` first hands them back at once). Lease handles
/// stay valid.
///
/// # Safety
/// `keeper` must be NULL or a `GotryKeeper` not yet freed, used by no other thread and not
/// by the call its own callback runs in.
#[no_mangle]
pub unsafe extern "C" fn gotry_keeper_free(keeper: *mut GotryKeeper) {
    unsafe { free_handle(keeper) }
}
