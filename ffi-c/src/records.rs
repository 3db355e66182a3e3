//! Lease records and history entries handed to C: owned copies, read through plain views.

use std::ffi::c_char;

use gotry_core::{HistoryEntry, LeaseRecord};

use crate::boundary::{free_handle, handle, read_into, Failure, Out};
use crate::status::{GotryLeaseOp, GotryStatus};

/// Text owned by this library and lent to C: NUL-terminated for convenience, with its
/// length alongside because a key or an owner may itself hold a NUL.
#[derive(Debug, Clone)]
pub(crate) struct Text(Box<[u8]>);

impl Text {
    pub(crate) fn new(value: &str) -> Text {
        Text::from_bytes(value.as_bytes())
    }

    /// Bytes that need not be UTF-8 (a path, which the working directory may have made so).
    pub(crate) fn from_bytes(value: &[u8]) -> Text {
        let mut bytes = Vec::with_capacity(value.len() + 1);
        bytes.extend_from_slice(value);
        bytes.push(0);
        Text(bytes.into_boxed_slice())
    }

    pub(crate) fn ptr(&self) -> *const c_char {
        self.0.as_ptr().cast()
    }

    /// Bytes before the terminating NUL.
    pub(crate) fn len(&self) -> usize {
        self.0.len() - 1
    }

    #[cfg(test)]
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0[..self.len()]).expect("built from a str")
    }
}

/// The body of every accessor that lends a text: as [`read_into`], with the text's pointer
/// and its length as two out-parameters.
///
/// # Safety
/// As [`read_into`], for both out-parameters.
pub(crate) unsafe fn lend_into<H>(
    name: &'static str,
    ptr: *const H,
    out_name: &'static str,
    out: *mut *const c_char,
    out_len: *mut usize,
    text: impl FnOnce(&H) -> Result<&Text, Failure>,
) -> GotryStatus {
    ffi_boundary!(std::ptr::null_mut(), {
        let value = unsafe { handle(name, ptr)? };
        let out = unsafe { Out::new(out_name, out)? };
        let out_len = unsafe { Out::new("out_len", out_len)? };
        let text = text(value)?;
        out.write(text.ptr());
        out_len.write(text.len());
        Ok(())
    })
}

/// A lease record as C reads it. The strings are borrowed from the object the view was
/// taken from (a `GotryRecord`, `GotryRecordList` or `GotryError`) and stay valid until that
/// object is freed. Each is NUL-terminated, but its length is the authority: a key or owner
/// may contain a NUL byte.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GotryRecordView {
    /// The lease key (by convention `<organization>/<ledger tenant>`).
    pub key: *const c_char,
    /// Bytes in `key`, without the terminating NUL.
    pub key_len: usize,
    /// The replica that holds or last held the lease.
    pub owner: *const c_char,
    /// Bytes in `owner`, without the terminating NUL.
    pub owner_len: usize,
    /// The fencing epoch: 1 for the first holder, one more for each acquire after.
    pub epoch: i64,
    /// Expiry on the store's clock, in milliseconds since the Unix epoch.
    pub lease_until_ms: i64,
    /// Durable copies of epochs up to this one are dead; 0 when none was forgotten.
    pub forgotten_at_epoch: i64,
}

/// A record with its own copies of the strings.
#[derive(Debug, Clone)]
pub(crate) struct OwnedRecord {
    key: Text,
    owner: Text,
    epoch: i64,
    lease_until_ms: i64,
    forgotten_at_epoch: i64,
}

impl From<&LeaseRecord> for OwnedRecord {
    fn from(record: &LeaseRecord) -> OwnedRecord {
        OwnedRecord {
            key: Text::new(&record.key),
            owner: Text::new(&record.owner),
            epoch: record.epoch,
            lease_until_ms: record.lease_until_ms,
            forgotten_at_epoch: record.forgotten_at_epoch,
        }
    }
}

impl OwnedRecord {
    pub(crate) fn view(&self) -> GotryRecordView {
        GotryRecordView {
            key: self.key.ptr(),
            key_len: self.key.len(),
            owner: self.owner.ptr(),
            owner_len: self.owner.len(),
            epoch: self.epoch,
            lease_until_ms: self.lease_until_ms,
            forgotten_at_epoch: self.forgotten_at_epoch,
        }
    }
}

/// One lease record returned by a store or lease call. Immutable: any number of threads
/// may read it at once; free it once with `gotry_record_free`.
#[derive(Debug)]
pub struct GotryRecord(OwnedRecord);

impl GotryRecord {
    pub(crate) fn new(record: &LeaseRecord) -> GotryRecord {
        GotryRecord(OwnedRecord::from(record))
    }
}

/// Reads a record. `out_view`'s strings are borrowed from `record`.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `record` must be NULL or a live `GotryRecord`; `out_view` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_record_view(
    record: *const GotryRecord,
    out_view: *mut GotryRecordView,
) -> GotryStatus {
    unsafe {
        read_into("record", record, "out_view", out_view, |record| {
            Ok(record.0.view())
        })
    }
}

/// Frees a record; NULL does nothing. Views taken from it become dangling.
///
/// # Safety
/// `record` must be NULL or a `GotryRecord` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_record_free(record: *mut GotryRecord) {
    unsafe { free_handle(record) }
}

/// The records of `gotry_store_list`, ordered by key. Immutable: any number of threads may
/// read it at once; free it once with `gotry_record_list_free`.
#[derive(Debug)]
pub struct GotryRecordList(Vec<OwnedRecord>);

impl GotryRecordList {
    pub(crate) fn new(records: &[LeaseRecord]) -> GotryRecordList {
        GotryRecordList(records.iter().map(OwnedRecord::from).collect())
    }
}

/// Counts the records of a list.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `list` must be NULL or a live `GotryRecordList`; `out_len` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_record_list_len(
    list: *const GotryRecordList,
    out_len: *mut usize,
) -> GotryStatus {
    unsafe { read_into("list", list, "out_len", out_len, |list| Ok(list.0.len())) }
}

/// Reads record `index` of a list; its strings are borrowed from `list`.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` when `index` is not below the length, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `list` must be NULL or a live `GotryRecordList`; `out_view` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_record_list_get(
    list: *const GotryRecordList,
    index: usize,
    out_view: *mut GotryRecordView,
) -> GotryStatus {
    unsafe {
        read_into("list", list, "out_view", out_view, |list| {
            Ok(element(&list.0, index)?.view())
        })
    }
}

/// Frees a record list; NULL does nothing. Views taken from it become dangling.
///
/// # Safety
/// `list` must be NULL or a `GotryRecordList` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_record_list_free(list: *mut GotryRecordList) {
    unsafe { free_handle(list) }
}

pub(crate) fn element<T>(items: &[T], index: usize) -> Result<&T, Failure> {
    items.get(index).ok_or_else(|| {
        Failure::invalid(format!(
            "index {index} is out of range for a list of {}",
            items.len()
        ))
    })
}

/// One granted operation of a store's log, as C reads it. The strings are borrowed from
/// the `GotryHistory` and stay valid until it is freed; lengths are the authority.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GotryHistoryEntry {
    /// The lease key.
    pub key: *const c_char,
    /// Bytes in `key`, without the terminating NUL.
    pub key_len: usize,
    /// What was granted.
    pub op: GotryLeaseOp,
    /// The replica it was granted to.
    pub owner: *const c_char,
    /// Bytes in `owner`, without the terminating NUL.
    pub owner_len: usize,
    /// The epoch of the lease after the operation.
    pub epoch: i64,
    /// When the store granted it, on its clock, in milliseconds since the Unix epoch.
    pub at_ms: i64,
}

#[derive(Debug)]
struct OwnedEntry {
    key: Text,
    op: GotryLeaseOp,
    owner: Text,
    epoch: i64,
    at_ms: i64,
}

/// The log of `gotry_store_history`, oldest first. Immutable: any number of threads may read
/// it at once; free it once with `gotry_history_free`.
#[derive(Debug)]
pub struct GotryHistory(Vec<OwnedEntry>);

impl GotryHistory {
    pub(crate) fn new(entries: &[HistoryEntry]) -> GotryHistory {
        GotryHistory(
            entries
                .iter()
                .map(|entry| OwnedEntry {
                    key: Text::new(&entry.key),
                    op: entry.op.into(),
                    owner: Text::new(&entry.owner),
                    epoch: entry.epoch,
                    at_ms: entry.at_ms,
                })
                .collect(),
        )
    }
}

/// Counts the entries of a history.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `history` must be NULL or a live `GotryHistory`; `out_len` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_history_len(history: *const GotryHistory, out_len: *mut usize) -> GotryStatus {
    unsafe {
        read_into("history", history, "out_len", out_len, |history| {
            Ok(history.0.len())
        })
    }
}

/// Reads entry `index` of a history; its strings are borrowed from `history`.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` when `index` is not below the length, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `history` must be NULL or a live `GotryHistory`; `out_entry` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_history_get(
    history: *const GotryHistory,
    index: usize,
    out_entry: *mut GotryHistoryEntry,
) -> GotryStatus {
    unsafe {
        read_into("history", history, "out_entry", out_entry, |history| {
            let entry = element(&history.0, index)?;
            Ok(GotryHistoryEntry {
                key: entry.key.ptr(),
                key_len: entry.key.len(),
                op: entry.op,
                owner: entry.owner.ptr(),
                owner_len: entry.owner.len(),
                epoch: entry.epoch,
                at_ms: entry.at_ms,
            })
        })
    }
}

/// Frees a history; NULL does nothing. Entries read from it become dangling.
///
/// # Safety
/// `history` must be NULL or a `GotryHistory` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_history_free(history: *mut GotryHistory) {
    unsafe { free_handle(history) }
}
