//! A round of renewals for one owner in one durable transaction.

use std::ffi::c_char;

use gotry_core::{Error, LeaseGrant};

use crate::boundary::{free_handle, handle, into_handle, read_into, text_in, Failure, Out};
use crate::error::GotryError;
use crate::records::{GotryRecordView, OwnedRecord};
use crate::status::GotryStatus;
use crate::store::GotryStore;

/// One lease of a batch: its key (pointer + length) and the epoch the owner holds.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GotryLeaseRef {
    /// The lease key; must not be NULL.
    pub key: *const c_char,
    /// Bytes in `key`.
    pub key_len: usize,
    /// The epoch the owner holds.
    pub epoch: i64,
}

#[derive(Debug)]
enum Answer {
    Granted { record: OwnedRecord, ttl_ms: i64 },
    Refused(GotryError),
}

/// The answers of `gotry_store_renew_batch`, one per lease, in the order of the request.
/// Immutable: any number of threads may read it at once; free it once with
/// `gotry_renew_batch_free`.
#[derive(Debug)]
pub struct GotryRenewBatch(Vec<Answer>);

/// Renews many leases of `owner` in one transaction, so a round of renewals costs one
/// durable write instead of one per lease. Each lease is answered on its own: granted (the
/// epoch stays, expiry moves to the store's now + `ttl_ms`) or refused for that key alone
/// (`GOTRY_STATUS_LEASE_LOST`, or `GOTRY_STATUS_INVALID_ARGUMENT` for a key that is not
/// UTF-8 or out of range, or an epoch below 1). `*out_batch` receives the answers (free it
/// with `gotry_renew_batch_free`); an empty batch is valid and touches nothing.
///
/// Returns, for the whole call: `GOTRY_STATUS_INVALID_ARGUMENT` for an owner or TTL out of
/// range, `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` when the store is busy or closed (nothing is
/// renewed), and `GOTRY_STATUS_NULL_ARGUMENT` when `store`, `owner`, `leases`, a lease's
/// `key` or `out_batch` is NULL.
///
/// # Safety
/// `store` must be NULL or a live `GotryStore`; `owner` must be NULL or point to `owner_len`
/// readable bytes; `leases` must be NULL or point to `leases_len` readable `GotryLeaseRef`s,
/// each key NULL or pointing to its length in readable bytes; the out-parameters must be NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_store_renew_batch(
    store: *const GotryStore,
    owner: *const c_char,
    owner_len: usize,
    ttl_ms: i64,
    leases: *const GotryLeaseRef,
    leases_len: usize,
    out_batch: *mut *mut GotryRenewBatch,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let store = unsafe { handle("store", store)? };
        let owner = unsafe { text_in("owner", owner, owner_len)? };
        if leases.is_null() {
            return Err(Failure::Null("leases"));
        }
        if leases_len > isize::MAX as usize / std::mem::size_of::<GotryLeaseRef>() {
            return Err(Failure::invalid(format!(
                "leases_len is {leases_len}, more than any array can hold"
            )));
        }
        // SAFETY: non-NULL, a length that fits, and the caller's promise above.
        let leases = unsafe { std::slice::from_raw_parts(leases, leases_len) };
        let out_batch = unsafe { Out::new("out_batch", out_batch)? };
        // A key that is not text is refused for that lease alone, as the core refuses a key
        // out of range; a NULL key breaks the call's contract and fails all of it.
        let mut keys = Vec::with_capacity(leases.len());
        for lease in leases {
            if lease.key.is_null() {
                return Err(Failure::Null("leases[].key"));
            }
            keys.push(match unsafe { text_in("key", lease.key, lease.key_len) } {
                Ok(key) => Ok((key, lease.epoch)),
                Err(Failure::Core(error)) => Err(error),
                Err(other) => return Err(other),
            });
        }
        let texts: Vec<(&str, i64)> = keys.iter().filter_map(|k| k.as_ref().ok().copied()).collect();
        let mut answers = store.store.renew_batch(owner, ttl_ms, &texts)?.into_iter();
        let outcomes = keys
            .into_iter()
            .map(|key| {
                let answer = key.and_then(|_| {
                    answers.next().unwrap_or_else(|| {
                        Err(Error::LeaseStoreUnavailable {
                            message: "the store answered fewer leases than it was asked".into(),
                        })
                    })
                });
                match answer {
                    Ok(LeaseGrant { record, ttl_ms }) => Answer::Granted {
                        record: OwnedRecord::from(&record),
                        ttl_ms,
                    },
                    Err(error) => Answer::Refused(GotryError::from(Failure::Core(error))),
                }
            })
            .collect();
        out_batch.write(into_handle(GotryRenewBatch(outcomes)));
        Ok(())
    })
}

fn answer(batch: &GotryRenewBatch, index: usize) -> Result<&Answer, Failure> {
    batch.0.get(index).ok_or_else(|| {
        Failure::invalid(format!(
            "index {index} is out of range for a batch of {}",
            batch.0.len()
        ))
    })
}

/// Counts the answers of a batch (as many as leases were asked for).
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `batch` must be NULL or a live `GotryRenewBatch`; `out_len` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_renew_batch_len(
    batch: *const GotryRenewBatch,
    out_len: *mut usize,
) -> GotryStatus {
    unsafe { read_into("batch", batch, "out_len", out_len, |batch| Ok(batch.0.len())) }
}

/// Writes the answer for lease `index`: `GOTRY_STATUS_OK` when it was renewed, otherwise the
/// status of its refusal.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` when `index` is not below the length, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `batch` must be NULL or a live `GotryRenewBatch`; `out_status` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_renew_batch_status(
    batch: *const GotryRenewBatch,
    index: usize,
    out_status: *mut GotryStatus,
) -> GotryStatus {
    unsafe {
        read_into("batch", batch, "out_status", out_status, |batch| {
            Ok(match answer(batch, index)? {
                Answer::Granted { .. } => GotryStatus::Ok,
                Answer::Refused(error) => error.status(),
            })
        })
    }
}

/// Reads the grant of lease `index`: the record after the renewal (strings borrowed from
/// `batch`) and the TTL it was granted for.
///
/// Returns `GOTRY_STATUS_NO_VALUE` when that lease was refused,
/// `GOTRY_STATUS_INVALID_ARGUMENT` when `index` is not below the length, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `batch` must be NULL or a live `GotryRenewBatch`; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_renew_batch_grant(
    batch: *const GotryRenewBatch,
    index: usize,
    out_view: *mut GotryRecordView,
    out_granted_ttl_ms: *mut i64,
) -> GotryStatus {
    ffi_boundary!(std::ptr::null_mut(), {
        let batch = unsafe { handle("batch", batch)? };
        let out_view = unsafe { Out::new("out_view", out_view)? };
        let out_granted_ttl_ms = unsafe { Out::new("out_granted_ttl_ms", out_granted_ttl_ms)? };
        match answer(batch, index)? {
            Answer::Granted { record, ttl_ms } => {
                out_view.write(record.view());
                out_granted_ttl_ms.write(*ttl_ms);
                Ok(())
            }
            Answer::Refused(_) => Err(Failure::NoValue("that lease was refused, not renewed")),
        }
    })
}

/// Lends the refusal of lease `index`: an error owned by `batch` (read it with the
/// `gotry_error_*` accessors; do not free it, it goes with the batch).
///
/// Returns `GOTRY_STATUS_NO_VALUE` when that lease was renewed,
/// `GOTRY_STATUS_INVALID_ARGUMENT` when `index` is not below the length, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `batch` must be NULL or a live `GotryRenewBatch`; `out_refusal` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_renew_batch_error(
    batch: *const GotryRenewBatch,
    index: usize,
    out_refusal: *mut *const GotryError,
) -> GotryStatus {
    ffi_boundary!(std::ptr::null_mut(), {
        let batch = unsafe { handle("batch", batch)? };
        let out_refusal = unsafe { Out::new("out_refusal", out_refusal)? };
        match answer(batch, index)? {
            Answer::Refused(error) => {
                out_refusal.write(error);
                Ok(())
            }
            Answer::Granted { .. } => Err(Failure::NoValue("that lease was renewed, not refused")),
        }
    })
}

/// Frees a batch and the errors it lent; NULL does nothing.
///
/// # Safety
/// `batch` must be NULL or a `GotryRenewBatch` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_renew_batch_free(batch: *mut GotryRenewBatch) {
    unsafe { free_handle(batch) }
}
