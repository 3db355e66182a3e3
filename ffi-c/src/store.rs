//! The lease store: one linearizable compare-and-set record per tenant.

use std::ffi::c_char;
use std::sync::Arc;

use gotry_core::{open_lease_store, LeaseStore, SqliteLeaseStore, SqliteOptions};

use crate::boundary::{free_handle, handle, into_handle, optional_handle, text_in, Out};
use crate::clock::GotryManualClock;
use crate::error::GotryError;
use crate::records::{GotryHistory, GotryRecord, GotryRecordList};
use crate::status::GotryStatus;

/// An open lease store. Thread-safe: any function may be called on one store from several
/// threads at once. Each operation is atomic on its own, whatever runs beside it: a SQLite
/// store runs its calls one at a time on its connection, and SQLite's file lock serializes
/// processes; a MySQL store runs calls from several threads at once on a pool of
/// connections, and the server's row locks serialize the writers of a key, whichever host
/// they run on. `gotry_store_free` must be the last call on the handle.
pub struct GotryStore {
    pub(crate) store: Arc<dyn LeaseStore>,
}

/// Opens (creating it and its parent folders if needed) the SQLite lease store at `path`.
/// The file uses the reference implementation's tables, so both can share it. Contention
/// waits up to 5 s for the write lock, then returns `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE`;
/// an acknowledged operation is synced to disk before the call returns.
///
/// `clock` is the store's wall clock, the one that decides expiry: NULL for the system
/// clock, or a manual clock, of which the store keeps its own reference.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` for a path that is not UTF-8 or holds a NUL,
/// `GOTRY_STATUS_STORAGE_ERROR` when the file cannot be used (the error's code is SQLite's,
/// e.g. `SQLITE_NOTADB` for a file that is not a database, or an errno name, e.g. `ENOTDIR`
/// when a parent folder is a file), and `GOTRY_STATUS_NULL_ARGUMENT` when `path` or
/// `out_store` is NULL.
///
/// # Safety
/// `path` must be NULL or point to `path_len` readable bytes; `clock` must be NULL or a live
/// `GotryManualClock`; `out_store` and `out_error` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_store_open(
    path: *const c_char,
    path_len: usize,
    clock: *const GotryManualClock,
    out_store: *mut *mut GotryStore,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let path = unsafe { text_in("path", path, path_len)? };
        let clock = unsafe { optional_handle(clock) };
        let out_store = unsafe { Out::new("out_store", out_store)? };
        let mut options = SqliteOptions::default();
        if let Some(clock) = clock {
            options.clock = clock.clock.clone();
        }
        let store = SqliteLeaseStore::open_with(path, options)?;
        out_store.write(into_handle(GotryStore {
            store: Arc::new(store),
        }));
        Ok(())
    })
}

/// Opens the store a URL names, on the system clock (for SQLite) or the server's (for MySQL and
/// PostgreSQL):
///
/// - SQLite: `sqlite:///absolute/path.db`, `sqlite://relative/path.db` or `sqlite:path.db`.
/// - MySQL or MariaDB: `mysql://user:password@host:3306/database?prefix=gotry_&timeout_ms=2000`
///   (user and password percent-encoded; port 3306 by default; options all optional:
///   `prefix` of the two tables, `timeout_ms` from 100 to 60000 bounding each call end to end, and TLS
///   with `ssl-mode` = `disabled`, `required` or `verify_identity` and `ssl-ca` = a file of
///   CA certificates; without `ssl-mode`, `verify_identity` with `ssl-ca`, otherwise plain
///   TCP to a loopback host and `required` to any other). Unknown options are refused; the
///   tables are created when missing; credentials appear in no error.
/// - PostgreSQL: `postgres://user:password@host:5432/database?prefix=gotry_&timeout_ms=2000`
///   (or `postgresql://`; the user defaults to `postgres`; the same `prefix` and `timeout_ms`,
///   the opening included, and TLS with libpq's `sslmode` = `disable`, `require` or
///   `verify-full` and `sslrootcert` = a file of CA certificates; `require` by default for
///   hosts other than loopback). A server whose sessions run with `synchronous_commit = off`
///   or `fsync = off` is refused: it acknowledges grants a crash can take back.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` for a URL that is not UTF-8, holds a NUL, names
/// no known scheme, or has an unknown option, one out of range or an unusable `ssl-ca`
/// file; `GOTRY_STATUS_STORAGE_ERROR` when the store refuses the file, or the server the
/// login or the schema (the error's code is the server's name, e.g.
/// `ER_ACCESS_DENIED_ERROR`); `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` when the server cannot
/// be reached in time or TLS fails (the message starts with a `TLS_*` code); and
/// `GOTRY_STATUS_NULL_ARGUMENT` when `url` or `out_store` is NULL.
///
/// # Safety
/// `url` must be NULL or point to `url_len` readable bytes; `out_store` and `out_error` must
/// be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_store_open_url(
    url: *const c_char,
    url_len: usize,
    out_store: *mut *mut GotryStore,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let url = unsafe { text_in("url", url, url_len)? };
        let out_store = unsafe { Out::new("out_store", out_store)? };
        let store = open_lease_store(url)?;
        out_store.write(into_handle(GotryStore { store }));
        Ok(())
    })
}

/// Closes the store's connection. Every later call on it, and on the leases acquired
/// through it, returns `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE`; closing twice does nothing.
/// The handle itself stays valid until `gotry_store_free`.
///
/// Returns `GOTRY_STATUS_STORAGE_ERROR` when SQLite fails to close the file, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when `store` is NULL.
///
/// # Safety
/// `store` must be NULL or a live `GotryStore`; `out_error` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_store_close(
    store: *const GotryStore,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        unsafe { handle("store", store)? }.store.close()?;
        Ok(())
    })
}

/// Frees the caller's handle; NULL does nothing. Leases acquired through the store keep the
/// connection open until they are freed too (call `gotry_store_close` first to end it for
/// everyone).
///
/// # Safety
/// `store` must be NULL or a `GotryStore` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_store_free(store: *mut GotryStore) {
    unsafe { free_handle(store) }
}

/// Reads the store's clock, as its decisions see it, in milliseconds since the Unix epoch.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when `store` or `out_now_ms` is NULL.
///
/// # Safety
/// `store` must be NULL or a live `GotryStore`; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_store_now_ms(
    store: *const GotryStore,
    out_now_ms: *mut i64,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let store = unsafe { handle("store", store)? };
        let out_now_ms = unsafe { Out::new("out_now_ms", out_now_ms)? };
        out_now_ms.write(store.store.now_ms()?);
        Ok(())
    })
}

/// Reads the record of `key`: `*out_record` receives a new record to free with
/// `gotry_record_free`, or NULL when the key was never acquired.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` for a key that is not UTF-8 or not 1 to
/// `GOTRY_MAX_TEXT_UTF16_UNITS` UTF-16 units long, `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE`
/// when the store is busy or closed, and `GOTRY_STATUS_NULL_ARGUMENT` when `store`, `key` or
/// `out_record` is NULL.
///
/// # Safety
/// `store` must be NULL or a live `GotryStore`; `key` must be NULL or point to `key_len`
/// readable bytes; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_store_read(
    store: *const GotryStore,
    key: *const c_char,
    key_len: usize,
    out_record: *mut *mut GotryRecord,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let store = unsafe { handle("store", store)? };
        let key = unsafe { text_in("key", key, key_len)? };
        let out_record = unsafe { Out::new("out_record", out_record)? };
        let record = store.store.read(key)?;
        out_record.write(record.map_or(std::ptr::null_mut(), |r| into_handle(GotryRecord::new(&r))));
        Ok(())
    })
}

/// Takes the lease of `key` for `owner` when it is free or expired on the store's clock; the
/// epoch moves up by one. `*out_record` receives the new record (free it with
/// `gotry_record_free`) and `*out_granted_ttl_ms` the TTL it was granted for.
///
/// Returns `GOTRY_STATUS_LEASE_HELD` when another holder's lease is unexpired (its record is
/// in the error), `GOTRY_STATUS_INVALID_ARGUMENT` for a TTL outside
/// [`GOTRY_MIN_LEASE_TTL_MS`, `GOTRY_MAX_LEASE_TTL_MS`] or text that is not UTF-8 or not 1 to
/// `GOTRY_MAX_TEXT_UTF16_UNITS` UTF-16 units, `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` when the
/// store is busy or closed, and `GOTRY_STATUS_NULL_ARGUMENT` when a pointer other than
/// `out_error` is NULL.
///
/// # Safety
/// `store` must be NULL or a live `GotryStore`; each text must be NULL or point to its length
/// in readable bytes; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_store_acquire(
    store: *const GotryStore,
    key: *const c_char,
    key_len: usize,
    owner: *const c_char,
    owner_len: usize,
    ttl_ms: i64,
    out_record: *mut *mut GotryRecord,
    out_granted_ttl_ms: *mut i64,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let store = unsafe { handle("store", store)? };
        let key = unsafe { text_in("key", key, key_len)? };
        let owner = unsafe { text_in("owner", owner, owner_len)? };
        let out_record = unsafe { Out::new("out_record", out_record)? };
        let out_granted_ttl_ms = unsafe { Out::new("out_granted_ttl_ms", out_granted_ttl_ms)? };
        let grant = store.store.acquire(key, owner, ttl_ms)?;
        out_record.write(into_handle(GotryRecord::new(&grant.record)));
        out_granted_ttl_ms.write(grant.ttl_ms);
        Ok(())
    })
}

/// Extends the unexpired lease of `owner` at `epoch` to the store's now + `ttl_ms`; the epoch
/// stays. Outputs as `gotry_store_acquire`.
///
/// Returns `GOTRY_STATUS_LEASE_LOST` when `owner` does not hold `epoch` or it expired,
/// `GOTRY_STATUS_INVALID_ARGUMENT` for an epoch below 1 or a TTL or text out of range, and
/// otherwise as `gotry_store_acquire`.
///
/// # Safety
/// As `gotry_store_acquire`.
#[no_mangle]
pub unsafe extern "C" fn gotry_store_renew(
    store: *const GotryStore,
    key: *const c_char,
    key_len: usize,
    owner: *const c_char,
    owner_len: usize,
    epoch: i64,
    ttl_ms: i64,
    out_record: *mut *mut GotryRecord,
    out_granted_ttl_ms: *mut i64,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let store = unsafe { handle("store", store)? };
        let key = unsafe { text_in("key", key, key_len)? };
        let owner = unsafe { text_in("owner", owner, owner_len)? };
        let out_record = unsafe { Out::new("out_record", out_record)? };
        let out_granted_ttl_ms = unsafe { Out::new("out_granted_ttl_ms", out_granted_ttl_ms)? };
        let grant = store.store.renew(key, owner, epoch, ttl_ms)?;
        out_record.write(into_handle(GotryRecord::new(&grant.record)));
        out_granted_ttl_ms.write(grant.ttl_ms);
        Ok(())
    })
}

/// The two record-returning operations that name a holder and its epoch.
type HolderOp = fn(&dyn LeaseStore, &str, &str, i64) -> gotry_core::Result<gotry_core::LeaseRecord>;

/// # Safety
/// As `gotry_store_release`.
unsafe fn holder_op(
    op: HolderOp,
    store: *const GotryStore,
    key: *const c_char,
    key_len: usize,
    owner: *const c_char,
    owner_len: usize,
    epoch: i64,
    out_record: *mut *mut GotryRecord,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let store = unsafe { handle("store", store)? };
        let key = unsafe { text_in("key", key, key_len)? };
        let owner = unsafe { text_in("owner", owner, owner_len)? };
        let out_record = unsafe { Out::new("out_record", out_record)? };
        let record = op(store.store.as_ref(), key, owner, epoch)?;
        out_record.write(into_handle(GotryRecord::new(&record)));
        Ok(())
    })
}

/// Expires the lease of `owner` at `epoch` now, so the next owner can start at once; the
/// epoch stays. Allowed after expiry too, as long as nobody acquired since. `*out_record`
/// receives the record after it.
///
/// Returns `GOTRY_STATUS_LEASE_LOST` when `owner` does not hold `epoch`,
/// `GOTRY_STATUS_INVALID_ARGUMENT` for an epoch below 1 or text out of range,
/// `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` when the store is busy or closed, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when a pointer other than `out_error` is NULL.
///
/// # Safety
/// `store` must be NULL or a live `GotryStore`; each text must be NULL or point to its length
/// in readable bytes; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_store_release(
    store: *const GotryStore,
    key: *const c_char,
    key_len: usize,
    owner: *const c_char,
    owner_len: usize,
    epoch: i64,
    out_record: *mut *mut GotryRecord,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    unsafe {
        holder_op(
            |s, k, o, e| s.release(k, o, e),
            store,
            key,
            key_len,
            owner,
            owner_len,
            epoch,
            out_record,
            out_error,
        )
    }
}

/// Raises the forgotten floor of `key` to `epoch`: durable copies up to it are dead. Only the
/// unexpired holder of `epoch` may. `*out_record` receives the record after it.
///
/// Returns `GOTRY_STATUS_LEASE_LOST` when `owner` does not hold `epoch` or it expired, and
/// otherwise as `gotry_store_release`.
///
/// # Safety
/// As `gotry_store_release`.
#[no_mangle]
pub unsafe extern "C" fn gotry_store_mark_forgotten(
    store: *const GotryStore,
    key: *const c_char,
    key_len: usize,
    owner: *const c_char,
    owner_len: usize,
    epoch: i64,
    out_record: *mut *mut GotryRecord,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    unsafe {
        holder_op(
            |s, k, o, e| s.mark_forgotten(k, o, e),
            store,
            key,
            key_len,
            owner,
            owner_len,
            epoch,
            out_record,
            out_error,
        )
    }
}

/// Every granted operation in log order, of one key, or of all keys when `key` is NULL
/// (`key_len` is then ignored). `*out_history` receives a history to free with
/// `gotry_history_free`.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` for a key that is not UTF-8,
/// `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` when the store is busy or closed, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when `store` or `out_history` is NULL.
///
/// # Safety
/// `store` must be NULL or a live `GotryStore`; `key` must be NULL or point to `key_len`
/// readable bytes; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_store_history(
    store: *const GotryStore,
    key: *const c_char,
    key_len: usize,
    out_history: *mut *mut GotryHistory,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let store = unsafe { handle("store", store)? };
        let key = if key.is_null() {
            None
        } else {
            Some(unsafe { text_in("key", key, key_len)? })
        };
        let out_history = unsafe { Out::new("out_history", out_history)? };
        let entries = store.store.history(key)?;
        out_history.write(into_handle(GotryHistory::new(&entries)));
        Ok(())
    })
}

/// Every record whose key starts with `prefix` (all of them for an empty prefix), ordered by
/// key. `*out_list` receives a list to free with `gotry_record_list_free`.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` for a prefix that is not UTF-8,
/// `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` when the store is busy or closed, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when a pointer other than `out_error` is NULL (pass `""`
/// with length 0 for every record).
///
/// # Safety
/// `store` must be NULL or a live `GotryStore`; `prefix` must be NULL or point to
/// `prefix_len` readable bytes; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_store_list(
    store: *const GotryStore,
    prefix: *const c_char,
    prefix_len: usize,
    out_list: *mut *mut GotryRecordList,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let store = unsafe { handle("store", store)? };
        let prefix = unsafe { text_in("prefix", prefix, prefix_len)? };
        let out_list = unsafe { Out::new("out_list", out_list)? };
        let records = store.store.list(prefix)?;
        out_list.write(into_handle(GotryRecordList::new(&records)));
        Ok(())
    })
}
