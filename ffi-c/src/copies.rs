//! Epoch-scoped durable copies of a tenant root, and the restore that verifies them.

use std::ffi::{c_char, c_void};
use std::path::Path;

use gotry_core::{CopyId, CopyListing, EpochCopies, RestoreReport, SkippedCopy};

use crate::boundary::{free_handle, handle, into_handle, read_into, text_in, Failure, Out};
use crate::durable::GotryDurableStore;
use crate::error::GotryError;
use crate::host::{host_snapshot, GotrySnapshotFn};
use crate::lease::GotryLease;
use crate::records::element;
use crate::status::{GotrySkipReason, GotryStatus};

/// A copy's place in the order restores follow: epoch first, then sequence number within
/// the epoch (never timestamps).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GotryCopyId {
    /// The epoch of the tenure that wrote the copy.
    pub epoch: i64,
    /// The copy's sequence number within its epoch, from 1.
    pub seq: u64,
}

impl From<CopyId> for GotryCopyId {
    fn from(id: CopyId) -> GotryCopyId {
        GotryCopyId {
            epoch: id.epoch,
            seq: id.seq,
        }
    }
}

/// A copy a restore passed over, and why.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GotrySkippedCopy {
    /// The epoch of the copy.
    pub epoch: i64,
    /// Its sequence number within the epoch.
    pub seq: u64,
    /// Why it was not restored (`gotry_skip_reason_name` gives the core's string).
    pub reason: GotrySkipReason,
}

impl From<&SkippedCopy> for GotrySkippedCopy {
    fn from(skipped: &SkippedCopy) -> GotrySkippedCopy {
        GotrySkippedCopy {
            epoch: skipped.id.epoch,
            seq: skipped.id.seq,
            reason: skipped.reason.into(),
        }
    }
}

/// A copy taken as written: its manifest is durable and the write gate held after it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GotryWrittenCopy {
    /// The lease's epoch, under whose prefix the copy lives.
    pub epoch: i64,
    /// The copy's sequence number within the epoch.
    pub seq: u64,
    /// Files of the tenant root in the copy.
    pub files: usize,
    /// Bytes of those files (SQLite files as their backup image).
    pub bytes: u64,
    /// Objects this copy stored beside its manifest (whole files and deltas of changed blocks
    /// too large to ride inline in it): what the copy cost the store in objects.
    pub pieces_uploaded: usize,
    /// Bytes of all the copy made, those its manifest carries inline included.
    pub bytes_uploaded: u64,
    /// Objects of earlier copies of the lineage that this copy references instead of storing
    /// them again.
    pub pieces_reused: usize,
    /// Bytes it references of earlier copies, those it carries inline from an earlier manifest
    /// included.
    pub bytes_reused: u64,
}

/// One copy as the store lists it, without reading it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GotryCopyListing {
    /// The epoch of the copy.
    pub epoch: i64,
    /// Its sequence number within the epoch.
    pub seq: u64,
    /// Whether its manifest is there: a copy without one does not exist (it was cut off
    /// mid-write). Being complete does not say it verifies.
    pub complete: bool,
    /// Objects stored under the copy's prefix, the manifest included.
    pub objects: usize,
    /// Bytes of those objects.
    pub bytes: u64,
}

/// A restore's summary, read with `gotry_restore_report_view`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GotryRestoreView {
    /// false for an empty start: no copy existed, and the tenant root is now an empty folder.
    pub restored: bool,
    /// The copy installed; zeros when `restored` is false.
    pub copy: GotryCopyId,
    /// Files installed in the tenant root.
    pub files: usize,
    /// Bytes of those files.
    pub bytes: u64,
    /// Copies passed over on the way (newest first); read each with
    /// `gotry_restore_report_skipped`.
    pub skipped_len: usize,
}

/// A host's check of a restored copy before it is installed (gotry verifies its ledger's
/// fold): `root` is the folder holding the restored tenant root (NUL-terminated, `root_len`
/// bytes; valid during the call only), not yet in place. Return true to accept the copy,
/// false to pass it over with reason `fold` (then the next older copy is tried). It runs on
/// the thread that called `gotry_epoch_copies_restore`, before that call returns, once per
/// copy that passed every other check. Read the folder, do not change it, and never let a
/// C++ exception escape. Do not call the same `GotryEpochCopies` for the same tenant from it:
/// the restore holds that tenant's turn, so such a call would wait forever.
pub type GotryFoldCheckFn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, root: *const c_char, root_len: usize) -> bool>;

/// The copies of tenant roots in one durable store. Thread-safe: calls for different tenants
/// run in parallel, calls for one tenant one at a time. It remembers which objects of a
/// tenure it wrote (anything else in that epoch's prefix is a conflict), so a holder uses
/// one `GotryEpochCopies` for its whole tenure. `gotry_epoch_copies_free` must be the last
/// call on the handle. A host snapshot function given at creation is called on the threads
/// that write copies, and never after `gotry_epoch_copies_free` returns.
pub struct GotryEpochCopies(EpochCopies);

/// Creates the copies of tenant roots in `store`, which it keeps its own reference to.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `store` must be NULL or a live `GotryDurableStore`; `out_copies` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_epoch_copies_new(
    store: *const GotryDurableStore,
    out_copies: *mut *mut GotryEpochCopies,
) -> GotryStatus {
    unsafe {
        read_into("store", store, "out_copies", out_copies, |store| {
            Ok(into_handle(GotryEpochCopies(EpochCopies::new(
                store.store.clone(),
            ))))
        })
    }
}

/// Creates the copies of tenant roots in `store`, as `gotry_epoch_copies_new` does, for a host
/// that has files of its tenant roots open (its ledger, through its own SQLite): each such
/// file is read by calling `snapshot` with `user_data` (see `GotrySnapshotFn`), every other
/// file as usual. Without a snapshot function such a copy fails with
/// `GOTRY_STATUS_STORAGE_ERROR`, code `OPEN_IN_PROCESS`, and touches nothing.
///
/// `user_data` must be usable from any thread and stay valid until
/// `gotry_epoch_copies_free` returns.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when `store`, `snapshot` or `out_copies` is NULL.
///
/// # Safety
/// `store` must be NULL or a live `GotryDurableStore`; `snapshot` must be NULL or a function
/// as `GotrySnapshotFn` describes; `out_copies` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_epoch_copies_new_with_snapshot(
    store: *const GotryDurableStore,
    snapshot: GotrySnapshotFn,
    user_data: *mut c_void,
    out_copies: *mut *mut GotryEpochCopies,
) -> GotryStatus {
    ffi_boundary!(std::ptr::null_mut(), {
        let store = unsafe { handle("store", store)? };
        let snapshot = snapshot.ok_or(Failure::Null("snapshot"))?;
        let out_copies = unsafe { Out::new("out_copies", out_copies)? };
        let copies = EpochCopies::new(store.store.clone())
            .with_host_snapshot(Some(host_snapshot(snapshot, user_data, None)));
        out_copies.write(into_handle(GotryEpochCopies(copies)));
        Ok(())
    })
}

/// Frees the copies handle; NULL does nothing. What it wrote stays in the store.
///
/// # Safety
/// `copies` must be NULL or a `GotryEpochCopies` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_epoch_copies_free(copies: *mut GotryEpochCopies) {
    unsafe { free_handle(copies) }
}

/// Writes a complete copy of the tenant root at `root` (the ledger
/// `gotry-state/gotry-state.db` and every other file under it) under the lease's epoch: every
/// object create-only, the manifest last. A file that another descriptor of this process has
/// open (the host's ledger, held by the host's own SQLite) is read only through the host's
/// snapshot function (`gotry_epoch_copies_new_with_snapshot`); other SQLite files through
/// this library's SQLite and its online backup API, so a ledger may be written meanwhile;
/// keep the other files still during the call. Blocks on the file system and the store.
/// `*out_copy` receives what was written.
///
/// Returns `GOTRY_STATUS_FENCED` when the write gate is closed before the first object or
/// after the manifest (the copy is then not taken as written), `GOTRY_STATUS_COPY_CONFLICT`
/// when anything in the epoch's prefix was not written through this handle or a name it is
/// about to create exists, `GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE` when the store fails (a
/// later copy starts afresh), `GOTRY_STATUS_STORAGE_ERROR` when `root` cannot be read (the
/// error's code is the errno or SQLite name) or holds a file this process has open while the
/// copies have no snapshot function (code `OPEN_IN_PROCESS`; nothing was opened, the file and
/// its WAL are left alone), `GOTRY_STATUS_HOST_CALLBACK_FAILED` when the snapshot function
/// refused, `GOTRY_STATUS_ID_INVALID` when the lease key is
/// not `<organization>/<ledger tenant>`, `GOTRY_STATUS_INVALID_ARGUMENT` for a root that is not
/// UTF-8 or holds a NUL, or that holds something other than files and folders or a name that
/// is not UTF-8, and `GOTRY_STATUS_NULL_ARGUMENT` when a pointer other than `out_error` is NULL.
///
/// # Safety
/// `copies` must be NULL or a live `GotryEpochCopies`; `lease` must be NULL or a live
/// `GotryLease`; `root` must be NULL or point to `root_len` readable bytes; the
/// out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_epoch_copies_write_copy(
    copies: *const GotryEpochCopies,
    lease: *const GotryLease,
    root: *const c_char,
    root_len: usize,
    out_copy: *mut GotryWrittenCopy,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let copies = unsafe { handle("copies", copies)? };
        let lease = unsafe { handle("lease", lease)? };
        let root = unsafe { text_in("root", root, root_len)? };
        let out_copy = unsafe { Out::new("out_copy", out_copy)? };
        let written = copies.0.write_copy(&lease.lease, Path::new(root))?;
        out_copy.write(GotryWrittenCopy {
            epoch: written.id.epoch,
            seq: written.id.seq,
            files: written.files,
            bytes: written.bytes,
            pieces_uploaded: written.pieces_uploaded,
            bytes_uploaded: written.bytes_uploaded,
            pieces_reused: written.pieces_reused,
            bytes_reused: written.bytes_reused,
        });
        Ok(())
    })
}

/// What `gotry_epoch_copies_restore` did. Immutable: any number of threads may read it at
/// once; free it once with `gotry_restore_report_free`.
pub struct GotryRestoreReport(RestoreReport);

/// Restores, at the start of the lease's tenure, the newest copy that verifies into `root`.
/// Considers copies of epochs above the lease's forgotten floor and below its epoch, newest
/// epoch first, newest sequence first, and takes the first whose manifest parses and names
/// this tenant, whose files all match their size and SHA-256, whose SQLite files pass
/// `PRAGMA integrity_check`, and that `verify` accepts (when not NULL; called with
/// `user_data`). The copy is installed in place of `root` in one step (whatever `root` held
/// is discarded); with no copy at all, `root` becomes an empty folder (an empty start). Then
/// the tenure is recorded in the store (create-only), so that later restores pass over copies
/// a stale holder writes into an older epoch from now on (`superseded`). Blocks on the store
/// and the file system. `*out_report` receives what was restored and every copy skipped
/// (free it with `gotry_restore_report_free`).
///
/// Returns `GOTRY_STATUS_RESTORE_INVALID` when copies exist but none verifies (every skipped
/// copy and its reason in the error, `root` untouched), `GOTRY_STATUS_FENCED` when the write
/// gate is closed before or after the restore, `GOTRY_STATUS_COPY_CONFLICT` when another
/// restore recorded this epoch's tenure differently, `GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE`
/// when the store fails, `GOTRY_STATUS_STORAGE_ERROR` when `root`'s folder cannot be written
/// or a file in `root` is open in this process (code `OPEN_IN_PROCESS`: the host would go on
/// writing a file that is no longer the tenant's; close it first),
/// `GOTRY_STATUS_ID_INVALID` when the lease key is not `<organization>/<ledger tenant>`,
/// `GOTRY_STATUS_INVALID_ARGUMENT` for a root that is not UTF-8, holds a NUL, has no parent
/// folder or is not a folder, and `GOTRY_STATUS_NULL_ARGUMENT` when `copies`, `lease`, `root` or `out_report` is
/// NULL.
///
/// # Safety
/// `copies` must be NULL or a live `GotryEpochCopies`; `lease` must be NULL or a live
/// `GotryLease`; `root` must be NULL or point to `root_len` readable bytes; `verify` must be
/// NULL or a function as `GotryFoldCheckFn` describes; the out-parameters must be NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_epoch_copies_restore(
    copies: *const GotryEpochCopies,
    lease: *const GotryLease,
    root: *const c_char,
    root_len: usize,
    verify: GotryFoldCheckFn,
    user_data: *mut c_void,
    out_report: *mut *mut GotryRestoreReport,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let copies = unsafe { handle("copies", copies)? };
        let lease = unsafe { handle("lease", lease)? };
        let root = unsafe { text_in("root", root, root_len)? };
        let out_report = unsafe { Out::new("out_report", out_report)? };
        let check = verify.map(|call| {
            move |folder: &Path| -> gotry_core::Result<bool> {
                let path = folder.as_os_str().as_encoded_bytes();
                let mut text = Vec::with_capacity(path.len() + 1);
                text.extend_from_slice(path);
                text.push(0);
                // SAFETY: the host gave this function for this purpose; `text` outlives the
                // call, which runs on the host's own thread before the restore returns.
                Ok(unsafe { call(user_data, text.as_ptr().cast(), path.len()) })
            }
        });
        let check = check
            .as_ref()
            .map(|c| c as &dyn Fn(&Path) -> gotry_core::Result<bool>);
        let report = copies.0.restore(&lease.lease, Path::new(root), check)?;
        out_report.write(into_handle(GotryRestoreReport(report)));
        Ok(())
    })
}

/// Reads a restore's summary.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `report` must be NULL or a live `GotryRestoreReport`; `out_view` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_restore_report_view(
    report: *const GotryRestoreReport,
    out_view: *mut GotryRestoreView,
) -> GotryStatus {
    unsafe {
        read_into("report", report, "out_view", out_view, |report| {
            let report = &report.0;
            Ok(GotryRestoreView {
                restored: report.restored.is_some(),
                copy: report
                    .restored
                    .map_or(GotryCopyId { epoch: 0, seq: 0 }, GotryCopyId::from),
                files: report.files,
                bytes: report.bytes,
                skipped_len: report.skipped.len(),
            })
        })
    }
}

/// Reads skipped copy `index` of a restore (newest first).
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` when `index` is not below `skipped_len`, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `report` must be NULL or a live `GotryRestoreReport`; `out_skipped` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_restore_report_skipped(
    report: *const GotryRestoreReport,
    index: usize,
    out_skipped: *mut GotrySkippedCopy,
) -> GotryStatus {
    unsafe {
        read_into("report", report, "out_skipped", out_skipped, |report| {
            Ok(element(&report.0.skipped, index)?.into())
        })
    }
}

/// Frees a restore report; NULL does nothing.
///
/// # Safety
/// `report` must be NULL or a `GotryRestoreReport` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_restore_report_free(report: *mut GotryRestoreReport) {
    unsafe { free_handle(report) }
}

/// The copies of `gotry_epoch_copies_list`, oldest first. Immutable: any number of threads
/// may read it at once; free it once with `gotry_copy_list_free`.
pub struct GotryCopyList(Vec<CopyListing>);

/// Lists every copy of the tenant `key` (`<organization>/<ledger tenant>`) in the store,
/// oldest first, without reading them; needs no lease. `*out_list` receives a list to free
/// with `gotry_copy_list_free`.
///
/// Returns `GOTRY_STATUS_ID_INVALID` for a key that is not `<organization>/<ledger tenant>`,
/// `GOTRY_STATUS_INVALID_ARGUMENT` for a key that is not UTF-8,
/// `GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE` when the store fails, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when a pointer other than `out_error` is NULL.
///
/// # Safety
/// `copies` must be NULL or a live `GotryEpochCopies`; `key` must be NULL or point to
/// `key_len` readable bytes; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_epoch_copies_list(
    copies: *const GotryEpochCopies,
    key: *const c_char,
    key_len: usize,
    out_list: *mut *mut GotryCopyList,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let copies = unsafe { handle("copies", copies)? };
        let key = unsafe { text_in("key", key, key_len)? };
        let out_list = unsafe { Out::new("out_list", out_list)? };
        let listings = copies.0.list(key)?;
        out_list.write(into_handle(GotryCopyList(listings)));
        Ok(())
    })
}

/// Counts the copies of a list.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `list` must be NULL or a live `GotryCopyList`; `out_len` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_copy_list_len(list: *const GotryCopyList, out_len: *mut usize) -> GotryStatus {
    unsafe { read_into("list", list, "out_len", out_len, |list| Ok(list.0.len())) }
}

/// Reads copy `index` of a list.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` when `index` is not below the length, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `list` must be NULL or a live `GotryCopyList`; `out_listing` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_copy_list_get(
    list: *const GotryCopyList,
    index: usize,
    out_listing: *mut GotryCopyListing,
) -> GotryStatus {
    unsafe {
        read_into("list", list, "out_listing", out_listing, |list| {
            let listing = element(&list.0, index)?;
            Ok(GotryCopyListing {
                epoch: listing.id.epoch,
                seq: listing.id.seq,
                complete: listing.complete,
                objects: listing.objects,
                bytes: listing.bytes,
            })
        })
    }
}

/// Frees a copy list; NULL does nothing.
///
/// # Safety
/// `list` must be NULL or a `GotryCopyList` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_copy_list_free(list: *mut GotryCopyList) {
    unsafe { free_handle(list) }
}

/// Copy ids returned by `gotry_epoch_copies_forget_copies` and `gotry_epoch_copies_gc`, in
/// the order the call handled them. Immutable: any number of threads may read it at once;
/// free it once with `gotry_copy_id_list_free`.
pub struct GotryCopyIdList(Vec<CopyId>);

/// Deletes every copy and tenure record of the lease's tenant up to its forgotten floor
/// (raise it first with `gotry_lease_mark_forgotten`), which it reads from the lease store:
/// only the holder the store still names deletes. Blocks on both stores. `*out_deleted`
/// receives the ids of the deleted copies (free it with `gotry_copy_id_list_free`).
///
/// Returns `GOTRY_STATUS_FENCED` when the write gate is closed, `GOTRY_STATUS_LEASE_LOST`
/// when the lease store no longer names this holder at its epoch,
/// `GOTRY_STATUS_LEASE_STORE_UNAVAILABLE` when the lease store is busy or closed,
/// `GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE` when the durable store fails (what was deleted
/// stays deleted; calling again finishes), and `GOTRY_STATUS_NULL_ARGUMENT` when a pointer
/// other than `out_error` is NULL.
///
/// # Safety
/// `copies` must be NULL or a live `GotryEpochCopies`; `lease` must be NULL or a live
/// `GotryLease`; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_epoch_copies_forget_copies(
    copies: *const GotryEpochCopies,
    lease: *const GotryLease,
    out_deleted: *mut *mut GotryCopyIdList,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let copies = unsafe { handle("copies", copies)? };
        let lease = unsafe { handle("lease", lease)? };
        let out_deleted = unsafe { Out::new("out_deleted", out_deleted)? };
        let deleted = copies.0.forget_copies(&lease.lease)?;
        out_deleted.write(into_handle(GotryCopyIdList(deleted)));
        Ok(())
    })
}

/// Keeps the newest `keep` copies of the lease's tenant that look valid (manifest readable,
/// this tenant, every file present at its size, not superseded) and deletes every older one,
/// and every copy up to the forgotten floor; never deletes the newest valid copy, and
/// deletes nothing else when none looks valid. Checks the lease store first, as
/// `gotry_epoch_copies_forget_copies` does. `*out_kept` receives the kept copies and
/// `*out_deleted` the deleted ones, newest first (free each with `gotry_copy_id_list_free`).
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` when `keep` is 0, and otherwise as
/// `gotry_epoch_copies_forget_copies`.
///
/// # Safety
/// `copies` must be NULL or a live `GotryEpochCopies`; `lease` must be NULL or a live
/// `GotryLease`; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_epoch_copies_gc(
    copies: *const GotryEpochCopies,
    lease: *const GotryLease,
    keep: usize,
    out_kept: *mut *mut GotryCopyIdList,
    out_deleted: *mut *mut GotryCopyIdList,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let copies = unsafe { handle("copies", copies)? };
        let lease = unsafe { handle("lease", lease)? };
        let out_kept = unsafe { Out::new("out_kept", out_kept)? };
        let out_deleted = unsafe { Out::new("out_deleted", out_deleted)? };
        let report = copies.0.gc(&lease.lease, keep)?;
        out_kept.write(into_handle(GotryCopyIdList(report.kept)));
        out_deleted.write(into_handle(GotryCopyIdList(report.deleted)));
        Ok(())
    })
}

/// Counts the ids of a list.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `list` must be NULL or a live `GotryCopyIdList`; `out_len` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_copy_id_list_len(
    list: *const GotryCopyIdList,
    out_len: *mut usize,
) -> GotryStatus {
    unsafe { read_into("list", list, "out_len", out_len, |list| Ok(list.0.len())) }
}

/// Reads id `index` of a list.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` when `index` is not below the length, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `list` must be NULL or a live `GotryCopyIdList`; `out_id` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_copy_id_list_get(
    list: *const GotryCopyIdList,
    index: usize,
    out_id: *mut GotryCopyId,
) -> GotryStatus {
    unsafe {
        read_into("list", list, "out_id", out_id, |list| {
            Ok((*element(&list.0, index)?).into())
        })
    }
}

/// Frees a copy id list; NULL does nothing.
///
/// # Safety
/// `list` must be NULL or a `GotryCopyIdList` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_copy_id_list_free(list: *mut GotryCopyIdList) {
    unsafe { free_handle(list) }
}
