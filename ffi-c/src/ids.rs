//! Organization and tenant identifiers.
//!
//! Arguments are checked in parameter order (NULL, then a length no object can have), then
//! the output buffer's size, then the rules, so a caller (and a fuzzer) can predict the
//! status of any call.

use std::ffi::c_char;
use std::path::Path;

use gotry_core::ids;

use crate::boundary::{bytes_in, id_in, text_in, Out, OutBuffer};
use crate::error::GotryError;
use crate::status::GotryStatus;
use crate::{
    GOTRY_LEASE_KEY_BUFFER_LEN, GOTRY_LEDGER_TENANT_ID_BUFFER_LEN, GOTRY_PROMPT_CACHE_PARTITION_BUFFER_LEN,
};

/// Derives a ledger tenant id, `t-` + the first 128 bits of
/// HMAC-SHA256(organization key, issuer 0x00 subject) in lowercase hex, into `out_id`
/// (NUL-terminated; nothing is allocated for the caller).
///
/// The key needs `GOTRY_MIN_ORGANIZATION_KEY_BYTES` bytes or more. Issuer and subject are
/// compared byte for byte as the identity provider issued them (no Unicode normalization):
/// each must be non-empty, well-formed UTF-8, free of NUL and at most `GOTRY_MAX_CLAIM_BYTES`
/// bytes, or the call returns `GOTRY_STATUS_ID_INVALID`.
///
/// Returns `GOTRY_STATUS_BUFFER_TOO_SMALL` when `out_id_capacity` is below
/// `GOTRY_LEDGER_TENANT_ID_BUFFER_LEN`, and `GOTRY_STATUS_NULL_ARGUMENT` when a pointer
/// other than `out_error` is NULL (even with a length of zero).
///
/// # Safety
/// Each input must be NULL or point to its length in readable bytes; `out_id` must be NULL
/// or writable for `out_id_capacity` bytes; `out_error` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_derive_ledger_tenant_id(
    organization_key: *const u8,
    organization_key_len: usize,
    issuer: *const c_char,
    issuer_len: usize,
    subject: *const c_char,
    subject_len: usize,
    out_id: *mut c_char,
    out_id_capacity: usize,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let key = unsafe { bytes_in("organization_key", organization_key, organization_key_len)? };
        let issuer = unsafe { bytes_in("issuer", issuer, issuer_len)? };
        let subject = unsafe { bytes_in("subject", subject, subject_len)? };
        let out_id = unsafe { OutBuffer::new("out_id", out_id, out_id_capacity)? };
        out_id.require(GOTRY_LEDGER_TENANT_ID_BUFFER_LEN)?;
        let key = ids::OrganizationKey::new(key)?;
        let issuer = ids::claim_from_utf8("issuer", issuer)?;
        let subject = ids::claim_from_utf8("subject", subject)?;
        out_id.write(key.derive_ledger_tenant_id(issuer, subject)?.as_bytes())?;
        Ok(())
    })
}

/// Derives a prompt cache partition, `pc-` + the first 128 bits of
/// HMAC-SHA256(organization key, `gotry/prompt-cache-partition/v1` 0x00 ledger tenant id),
/// into `out_partition` (NUL-terminated).
///
/// Returns `GOTRY_STATUS_ID_INVALID` for a short key or a ledger tenant id that is not
/// `t-` and 32 lowercase hex digits, `GOTRY_STATUS_BUFFER_TOO_SMALL` when
/// `out_partition_capacity` is below `GOTRY_PROMPT_CACHE_PARTITION_BUFFER_LEN`, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when a pointer other than `out_error` is NULL.
///
/// # Safety
/// As `gotry_derive_ledger_tenant_id`.
#[no_mangle]
pub unsafe extern "C" fn gotry_derive_prompt_cache_partition(
    organization_key: *const u8,
    organization_key_len: usize,
    ledger_tenant_id: *const c_char,
    ledger_tenant_id_len: usize,
    out_partition: *mut c_char,
    out_partition_capacity: usize,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let key = unsafe { bytes_in("organization_key", organization_key, organization_key_len)? };
        let tenant = unsafe { bytes_in("ledger_tenant_id", ledger_tenant_id, ledger_tenant_id_len)? };
        let out = unsafe { OutBuffer::new("out_partition", out_partition, out_partition_capacity)? };
        out.require(GOTRY_PROMPT_CACHE_PARTITION_BUFFER_LEN)?;
        let key = ids::OrganizationKey::new(key)?;
        let tenant = ids::claim_from_utf8("ledger_tenant_id", tenant)?;
        out.write(key.derive_prompt_cache_partition(tenant)?.as_bytes())?;
        Ok(())
    })
}

/// Checks an organization id: `^[a-z0-9][a-z0-9-]{0,62}$`, anchored at the true end (a
/// trailing newline is refused).
///
/// Returns `GOTRY_STATUS_ID_INVALID` when it does not match, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when `value` is NULL.
///
/// # Safety
/// `value` must be NULL or point to `value_len` readable bytes; `out_error` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_assert_organization_id(
    value: *const c_char,
    value_len: usize,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        ids::assert_organization_id(unsafe { id_in("organization_id", value, value_len)? })?;
        Ok(())
    })
}

/// Checks a ledger tenant id: `^t-[0-9a-f]{32}$`, anchored at the true end.
///
/// Returns `GOTRY_STATUS_ID_INVALID` when it does not match, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when `value` is NULL.
///
/// # Safety
/// As `gotry_assert_organization_id`.
#[no_mangle]
pub unsafe extern "C" fn gotry_assert_ledger_tenant_id(
    value: *const c_char,
    value_len: usize,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        ids::assert_ledger_tenant_id(unsafe { id_in("ledger_tenant_id", value, value_len)? })?;
        Ok(())
    })
}

/// Checks a prompt cache partition: `^pc-[0-9a-f]{32}$`, anchored at the true end.
///
/// Returns `GOTRY_STATUS_ID_INVALID` when it does not match, and
/// `GOTRY_STATUS_NULL_ARGUMENT` when `value` is NULL.
///
/// # Safety
/// As `gotry_assert_organization_id`.
#[no_mangle]
pub unsafe extern "C" fn gotry_assert_prompt_cache_partition(
    value: *const c_char,
    value_len: usize,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        ids::assert_prompt_cache_partition(unsafe { id_in("prompt_cache_partition", value, value_len)? })?;
        Ok(())
    })
}

/// Writes the lease key of one tenant, `<organization>/<ledger tenant>`, NUL-terminated,
/// into `out_key`.
///
/// Returns `GOTRY_STATUS_ID_INVALID` when either id is invalid,
/// `GOTRY_STATUS_BUFFER_TOO_SMALL` when `out_key_capacity` is below
/// `GOTRY_LEASE_KEY_BUFFER_LEN` (whatever the ids' length, so a buffer that passed once
/// always passes), and `GOTRY_STATUS_NULL_ARGUMENT` when a pointer other than `out_error` is
/// NULL.
///
/// # Safety
/// Each input must be NULL or point to its length in readable bytes; `out_key` must be NULL
/// or writable for `out_key_capacity` bytes; `out_error` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_lease_key_for(
    organization_id: *const c_char,
    organization_id_len: usize,
    ledger_tenant_id: *const c_char,
    ledger_tenant_id_len: usize,
    out_key: *mut c_char,
    out_key_capacity: usize,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let organization = unsafe { bytes_in("organization_id", organization_id, organization_id_len)? };
        let tenant = unsafe { bytes_in("ledger_tenant_id", ledger_tenant_id, ledger_tenant_id_len)? };
        let out_key = unsafe { OutBuffer::new("out_key", out_key, out_key_capacity)? };
        out_key.require(GOTRY_LEASE_KEY_BUFFER_LEN)?;
        let organization = ids::claim_from_utf8("organization_id", organization)?;
        let tenant = ids::claim_from_utf8("ledger_tenant_id", tenant)?;
        out_key.write(ids::lease_key_for(organization, tenant)?.as_bytes())?;
        Ok(())
    })
}

/// Writes the directory of one tenant's state,
/// `<resolved state root>/orgs/<organization>/tenants/<ledger tenant>`, NUL-terminated, into
/// `out_path`, and its length (without the NUL) into `*out_path_len`.
///
/// The root is resolved lexically as Node's `path.resolve` does: a relative root against the
/// working directory, `.`, `..` and repeated slashes folded, symlinks left alone. The root
/// must be UTF-8 without NUL (`GOTRY_STATUS_INVALID_ARGUMENT` otherwise).
///
/// Returns `GOTRY_STATUS_ID_INVALID` when either id is invalid,
/// `GOTRY_STATUS_BUFFER_TOO_SMALL` when the path does not fit (`gotry_error_buffer_len`
/// gives the size needed), `GOTRY_STATUS_STORAGE_ERROR` when a relative root meets a
/// working directory that cannot be read, and `GOTRY_STATUS_NULL_ARGUMENT` when a pointer
/// other than `out_error` is NULL.
///
/// # Safety
/// Each input must be NULL or point to its length in readable bytes; `out_path` must be NULL
/// or writable for `out_path_capacity` bytes; the other out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_tenant_root_for(
    state_root: *const c_char,
    state_root_len: usize,
    organization_id: *const c_char,
    organization_id_len: usize,
    ledger_tenant_id: *const c_char,
    ledger_tenant_id_len: usize,
    out_path: *mut c_char,
    out_path_capacity: usize,
    out_path_len: *mut usize,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let root = unsafe { text_in("state_root", state_root, state_root_len)? };
        // Judged before the ids, in argument order, as every failure of this call is.
        let root = gotry_core::paths::assert_path("state_root", Path::new(root))?;
        let organization = unsafe { bytes_in("organization_id", organization_id, organization_id_len)? };
        let tenant = unsafe { bytes_in("ledger_tenant_id", ledger_tenant_id, ledger_tenant_id_len)? };
        let out_path = unsafe { OutBuffer::new("out_path", out_path, out_path_capacity)? };
        let out_path_len = unsafe { Out::new("out_path_len", out_path_len)? };
        let organization = ids::claim_from_utf8("organization_id", organization)?;
        let tenant = ids::claim_from_utf8("ledger_tenant_id", tenant)?;
        let path = ids::tenant_root_for(root, organization, tenant)?;
        out_path_len.write(out_path.write(path.as_os_str().as_encoded_bytes())?);
        Ok(())
    })
}
