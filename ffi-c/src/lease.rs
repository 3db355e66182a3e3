//! The holder's side of a tenant lease: the write gate and its renewals.

use std::ffi::c_char;
use std::sync::Arc;

use gotry_core::{LeaseOptions, MonotonicClock, SystemMonotonicClock, TenantLease};

use crate::boundary::{free_handle, handle, into_handle, optional_handle, read_into, text_in, Out};
use crate::clock::GotryManualClock;
use crate::error::GotryError;
use crate::records::{lend_into, GotryRecord, Text};
use crate::status::GotryStatus;
use crate::store::GotryStore;

/// A held tenant lease. Thread-safe: the write gate (`gotry_lease_assert_held`) may be
/// checked from any thread while another renews; renewals and releases issued from several
/// threads run one at a time, in the order they were called. `gotry_lease_free` must be the
/// last call on the handle.
pub struct GotryLease {
    pub(crate) lease: Arc<TenantLease>,
    key: Text,
    replica_id: Text,
}

impl GotryLease {
    /// A handle on a lease that something else (a keeper) may hold too.
    pub(crate) fn new(lease: Arc<TenantLease>) -> GotryLease {
        GotryLease {
            key: Text::new(lease.key()),
            replica_id: Text::new(lease.replica_id()),
            lease,
        }
    }
}

/// Acquires the lease of `key` for `replica_id` in `store` and starts holding it. The local
/// fence is measured on `clock` from before the request was sent: sent-at + granted TTL -
/// `margin_ms`, so the round trip and any clock skew only make the holder stop earlier.
///
/// `clock` is the holder's monotonic clock: NULL for the system's, or a manual clock, of
/// which the lease keeps its own reference. The lease also keeps the store's connection.
///
/// Returns `GOTRY_STATUS_LEASE_HELD` when another holder's lease is unexpired (record in the
/// error), `GOTRY_STATUS_LEASE_LOST` when the round trip used up the grant (which is handed
/// back first), `GOTRY_STATUS_INVALID_ARGUMENT` for a TTL out of range, a margin outside
/// [0, `ttl_ms`) or text out of range, `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` when the store
/// is busy or closed, and `GOTRY_STATUS_NULL_ARGUMENT` when a pointer other than `clock` and
/// `out_error` is NULL.
///
/// # Safety
/// `store` must be NULL or a live `GotryStore`; each text must be NULL or point to its length
/// in readable bytes; `clock` must be NULL or a live `GotryManualClock`; the out-parameters
/// must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_lease_acquire(
    store: *const GotryStore,
    key: *const c_char,
    key_len: usize,
    replica_id: *const c_char,
    replica_id_len: usize,
    ttl_ms: i64,
    margin_ms: i64,
    clock: *const GotryManualClock,
    out_lease: *mut *mut GotryLease,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let store = unsafe { handle("store", store)? };
        let key = unsafe { text_in("key", key, key_len)? };
        let replica_id = unsafe { text_in("replica_id", replica_id, replica_id_len)? };
        let clock: Arc<dyn MonotonicClock> = match unsafe { optional_handle(clock) } {
            Some(clock) => clock.clock.clone(),
            None => Arc::new(SystemMonotonicClock),
        };
        let out_lease = unsafe { Out::new("out_lease", out_lease)? };
        let lease = TenantLease::acquire(LeaseOptions {
            key: key.to_owned(),
            replica_id: replica_id.to_owned(),
            store: store.store.clone(),
            ttl_ms,
            margin_ms,
            clock,
        })?;
        out_lease.write(into_handle(GotryLease::new(Arc::new(lease))));
        Ok(())
    })
}

/// The synchronous gate of the write path: `GOTRY_STATUS_OK` only while the lease is held
/// and its local fence is ahead. Acknowledge a write only if the gate passes before and
/// after it.
///
/// Returns `GOTRY_STATUS_FENCED` otherwise, with the reason (`lease_released`, `lease_lost`
/// or `lease_expired_locally`), key and epoch in the error, and `GOTRY_STATUS_NULL_ARGUMENT`
/// when `lease` is NULL.
///
/// # Safety
/// `lease` must be NULL or a live `GotryLease`; `out_error` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_lease_assert_held(
    lease: *const GotryLease,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        unsafe { handle("lease", lease)? }.lease.assert_held()?;
        Ok(())
    })
}

/// Writes whether the write gate would pass now, without the details of why not.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `lease` must be NULL or a live `GotryLease`; `out_held` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_lease_is_held(lease: *const GotryLease, out_held: *mut bool) -> GotryStatus {
    unsafe {
        read_into("lease", lease, "out_held", out_held, |lease| {
            Ok(lease.lease.is_held())
        })
    }
}

/// Writes the milliseconds left until the local fence (fractional with the system clock);
/// zero or negative once it passed.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when `lease` or `out_remaining_ms` is NULL.
///
/// # Safety
/// `lease` must be NULL or a live `GotryLease`; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_lease_remaining_ms(
    lease: *const GotryLease,
    out_remaining_ms: *mut f64,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let lease = unsafe { handle("lease", lease)? };
        let out_remaining_ms = unsafe { Out::new("out_remaining_ms", out_remaining_ms)? };
        out_remaining_ms.write(lease.lease.remaining_ms()?);
        Ok(())
    })
}

/// Extends the lease; the epoch stays. Blocks until the store answers.
///
/// Returns `GOTRY_STATUS_LEASE_LOST` when the store refused (terminal: the gate answers
/// FENCED with `lease_lost` from then on), `GOTRY_STATUS_FENCED` after a release or a loss,
/// `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` when the store is busy or closed (the fence stays
/// where it was, and a later renewal may resume the lease), and
/// `GOTRY_STATUS_NULL_ARGUMENT` when `lease` is NULL.
///
/// # Safety
/// `lease` must be NULL or a live `GotryLease`; `out_error` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_lease_renew(
    lease: *const GotryLease,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        unsafe { handle("lease", lease)? }.lease.renew()?;
        Ok(())
    })
}

/// Ends the tenure gracefully: the gate closes first, then the store is told so the next
/// owner can start at once. Releasing twice, or after a loss, does nothing and succeeds.
///
/// Returns `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` when the store could not be told (the
/// gate is closed anyway and the lease simply runs out), and `GOTRY_STATUS_NULL_ARGUMENT`
/// when `lease` is NULL.
///
/// # Safety
/// `lease` must be NULL or a live `GotryLease`; `out_error` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_lease_release(
    lease: *const GotryLease,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        unsafe { handle("lease", lease)? }.lease.release()?;
        Ok(())
    })
}

/// Marks every durable copy up to this lease's epoch dead; only a provably held lease may.
/// `*out_record` receives the record after it (free it with `gotry_record_free`).
///
/// Returns `GOTRY_STATUS_FENCED` when the gate is closed, `GOTRY_STATUS_LEASE_LOST` when the
/// store refused, `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` when it is busy or closed, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when `lease` or `out_record` is NULL.
///
/// # Safety
/// `lease` must be NULL or a live `GotryLease`; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_lease_mark_forgotten(
    lease: *const GotryLease,
    out_record: *mut *mut GotryRecord,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let lease = unsafe { handle("lease", lease)? };
        let out_record = unsafe { Out::new("out_record", out_record)? };
        let record = lease.lease.mark_forgotten()?;
        out_record.write(into_handle(GotryRecord::new(&record)));
        Ok(())
    })
}

/// Writes the lease's epoch: the fencing token to attach to every write of this tenure.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `lease` must be NULL or a live `GotryLease`; `out_epoch` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_lease_epoch(lease: *const GotryLease, out_epoch: *mut i64) -> GotryStatus {
    unsafe {
        read_into("lease", lease, "out_epoch", out_epoch, |lease| {
            Ok(lease.lease.epoch())
        })
    }
}

/// Writes the forgotten floor at acquire time: durable copies up to this epoch are dead.
/// Fixed for the whole tenure, because only the holder can raise it.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `lease` must be NULL or a live `GotryLease`; `out_epoch` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_lease_forgotten_at_epoch(
    lease: *const GotryLease,
    out_epoch: *mut i64,
) -> GotryStatus {
    unsafe {
        read_into("lease", lease, "out_epoch", out_epoch, |lease| {
            Ok(lease.lease.forgotten_at_epoch())
        })
    }
}

/// Lends the lease's key (NUL-terminated, borrowed from `lease`; `*out_len` is the authority).
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `lease` must be NULL or a live `GotryLease`; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_lease_key(
    lease: *const GotryLease,
    out_key: *mut *const c_char,
    out_len: *mut usize,
) -> GotryStatus {
    unsafe {
        lend_into(
            "lease",
            lease,
            "out_key",
            out_key,
            out_len,
            |lease| Ok(&lease.key),
        )
    }
}

/// Lends the holder's replica id (NUL-terminated, borrowed from `lease`; `*out_len` is the
/// authority).
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `lease` must be NULL or a live `GotryLease`; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_lease_replica_id(
    lease: *const GotryLease,
    out_replica_id: *mut *const c_char,
    out_len: *mut usize,
) -> GotryStatus {
    unsafe {
        lend_into(
            "lease",
            lease,
            "out_replica_id",
            out_replica_id,
            out_len,
            |lease| Ok(&lease.replica_id),
        )
    }
}

/// Frees a lease without telling the store; NULL does nothing. Call `gotry_lease_release`
/// first for a prompt handoff, or the next owner waits for the TTL to run out.
///
/// # Safety
/// `lease` must be NULL or a `GotryLease` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_lease_free(lease: *mut GotryLease) {
    unsafe { free_handle(lease) }
}
