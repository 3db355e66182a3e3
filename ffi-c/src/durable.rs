//! The durable store: where a tenant's copies outlive the replica that wrote them.

use std::ffi::c_char;
use std::sync::Arc;

use gotry_core::{open_durable_store, DirectoryDurableStore, DurableStore};

use crate::boundary::{free_handle, into_handle, text_in, Out};
use crate::error::GotryError;
use crate::status::GotryStatus;

/// An open durable store. Thread-safe: any number of threads (and of `GotryEpochCopies`) may
/// use one store at once, and processes may share its folder or bucket. A `GotryEpochCopies`
/// made from it keeps its own reference, so the store may be freed before it.
pub struct GotryDurableStore {
    pub(crate) store: Arc<dyn DurableStore>,
}

/// Opens (creating it and its parent folders if needed) the durable store in the folder at
/// `path`, a local disk or a shared volume. Every object is created atomically and durably:
/// a crash never leaves half an object under a real name, and an existing one is never
/// replaced.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` for a path that is not UTF-8 or holds a NUL,
/// `GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE` when the folder cannot be created or used (the
/// errno name, e.g. `ENOTDIR` when a parent is a file, is in `gotry_error_backend_code`), and
/// `GOTRY_STATUS_NULL_ARGUMENT` when `path` or `out_store` is NULL.
///
/// # Safety
/// `path` must be NULL or point to `path_len` readable bytes; `out_store` and `out_error`
/// must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_durable_store_open(
    path: *const c_char,
    path_len: usize,
    out_store: *mut *mut GotryDurableStore,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let path = unsafe { text_in("path", path, path_len)? };
        let out_store = unsafe { Out::new("out_store", out_store)? };
        let store = DirectoryDurableStore::open(path)?;
        out_store.write(into_handle(GotryDurableStore {
            store: Arc::new(store),
        }));
        Ok(())
    })
}

/// Opens the durable store a URL names: a folder as `file:///absolute/dir`, `file:relative/dir`
/// or `file://relative/dir`, or an S3-compatible bucket as
/// `s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1` (credentials from the
/// usual AWS environment variables or the URL; they never appear in an error).
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` for a URL that is not UTF-8, holds a NUL, or names
/// no known scheme, `GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE` when the store cannot be reached
/// or used (its own code in `gotry_error_backend_code`), and `GOTRY_STATUS_NULL_ARGUMENT` when
/// `url` or `out_store` is NULL.
///
/// # Safety
/// `url` must be NULL or point to `url_len` readable bytes; `out_store` and `out_error` must
/// be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_durable_store_open_url(
    url: *const c_char,
    url_len: usize,
    out_store: *mut *mut GotryDurableStore,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let url = unsafe { text_in("url", url, url_len)? };
        let out_store = unsafe { Out::new("out_store", out_store)? };
        let store = open_durable_store(url)?;
        out_store.write(into_handle(GotryDurableStore { store }));
        Ok(())
    })
}

/// Frees the caller's handle; NULL does nothing. Copies made from the store keep using it.
///
/// # Safety
/// `store` must be NULL or a `GotryDurableStore` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_durable_store_free(store: *mut GotryDurableStore) {
    unsafe { free_handle(store) }
}
