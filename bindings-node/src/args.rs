//! JavaScript arguments checked as the reference checks them, before anything reaches the core.
//!
//! Arguments arrive as `Unknown` rather than as napi's typed parameters on purpose: napi's
//! `String` turns a lone surrogate into U+FFFD (two subjects would then share one tenant, two
//! keys one lease row), its `i64` truncates 1000.5, and its type errors are `TypeError`s where
//! the reference throws `RangeError` or `InvalidTenantIdError`.

use std::mem::MaybeUninit;
use std::time::Duration;

use gotry_tenant_state::errors::{Error, Result};
use napi::bindgen_prelude::{FromNapiValue, JsValue, Uint8ArraySlice, Unknown};
use napi::{sys, ValueType};

/// The largest integer a JS number holds exactly (`Number.MAX_SAFE_INTEGER`).
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// A napi call that failed is reported as a host failure, which the error mapping re-raises as
/// napi's own error.
fn napi_failure(error: napi::Error) -> Error {
    Error::Host(Box::new(error))
}

/// A napi read that failed for a reason other than the value's type.
fn unreadable(status: sys::napi_status, what: &str) -> Error {
    napi_failure(napi::Error::new(
        status.into(),
        format!("cannot read {what} argument"),
    ))
}

/// Units read onto the stack: every claim (at most 512 UTF-8 bytes, so at most 512 units),
/// key, owner and id fits, and the common call allocates nothing to read its strings.
const STACK_UNITS: usize = 520;

/// Calls `f` with the UTF-16 code units of a JS string, or with `None` when the value is not a
/// string. napi reports the type itself, so no separate `typeof` crossing is made.
pub fn with_utf16<T>(value: &Unknown<'_>, f: impl FnOnce(Option<&[u16]>) -> Result<T>) -> Result<T> {
    let (env, raw) = (value.value().env, value.raw());
    // Left uninitialized: napi writes the units it reports, and only those are read.
    let mut stack = [MaybeUninit::<u16>::uninit(); STACK_UNITS];
    let mut copied = 0usize;
    // SAFETY: napi writes at most `STACK_UNITS` units (the last one a NUL) into the buffer.
    let status = unsafe {
        sys::napi_get_value_string_utf16(env, raw, stack.as_mut_ptr().cast(), STACK_UNITS, &mut copied)
    };
    match status {
        sys::Status::napi_ok if copied < STACK_UNITS - 1 => {
            // SAFETY: napi initialized the first `copied` units (`copied` < STACK_UNITS).
            let units = unsafe { std::slice::from_raw_parts(stack.as_ptr().cast::<u16>(), copied) };
            return f(Some(units));
        }
        sys::Status::napi_ok => {}
        sys::Status::napi_string_expected => return f(None),
        other => return Err(unreadable(other, "a string")),
    }
    // Possibly cut short: ask for the length, then read all of it.
    let mut length = 0usize;
    // SAFETY: a null buffer asks napi for the length only.
    let status = unsafe { sys::napi_get_value_string_utf16(env, raw, std::ptr::null_mut(), 0, &mut length) };
    if status != sys::Status::napi_ok {
        return Err(unreadable(status, "a string"));
    }
    let mut heap = vec![0u16; length + 1];
    // SAFETY: the buffer holds the whole string and its NUL.
    let status =
        unsafe { sys::napi_get_value_string_utf16(env, raw, heap.as_mut_ptr(), heap.len(), &mut copied) };
    if status != sys::Status::napi_ok {
        return Err(unreadable(status, "a string"));
    }
    f(Some(&heap[..copied]))
}

/// Decodes UTF-16 strictly; `refuse` builds the error for a value that is not a string (`false`)
/// or that holds a lone surrogate (`true`).
fn strict_string(value: &Unknown<'_>, refuse: impl Fn(bool) -> Error) -> Result<String> {
    with_utf16(value, |units| {
        let units = units.ok_or_else(|| refuse(false))?;
        String::from_utf16(units).map_err(|_| refuse(true))
    })
}

/// A store key or owner: a string of 1 to 200 UTF-16 code units without lone surrogates.
///
/// The reference lets SQLite replace a lone surrogate, so `'a\uD800'` and `'a\uDBFF'` would
/// name one lease row; here that is a `RangeError` like every other malformed text argument.
pub fn text(name: &str, value: &Unknown<'_>) -> Result<String> {
    let text = strict_string(value, |surrogate| Error::InvalidArgument {
        message: if surrogate {
            format!("{name} must be well-formed Unicode (it holds a lone surrogate)")
        } else {
            format!("{name} must be a string, got {}", describe(value))
        },
    })?;
    gotry_tenant_state::lease_store::assert_text(name, &text)?;
    Ok(text)
}

/// An issuer or subject claim: a non-string is ID_INVALID, and so is a lone surrogate.
///
/// std's `String::from_utf16` is the same strict decoder as the core's `claim_from_utf16` but
/// sizes its string once, where the core's grows it char by char (about a tenth of a whole
/// derivation); the core's decoder still decides, and words, every refusal.
pub fn claim(name: &str, value: &Unknown<'_>) -> Result<String> {
    with_utf16(value, |units| match units {
        Some(units) => {
            String::from_utf16(units).or_else(|_| gotry_tenant_state::ids::claim_from_utf16(name, units))
        }
        None => Err(Error::IdInvalid {
            message: format!("{name} must be a non-empty string"),
        }),
    })
}

/// An organization id, ledger tenant id or partition label to validate: a non-string is
/// ID_INVALID. A lone surrogate can never pass the ASCII-only validators, and is refused here
/// already rather than replaced.
pub fn id_text(name: &str, value: &Unknown<'_>) -> Result<String> {
    strict_string(value, |_| Error::IdInvalid {
        message: format!("{name} must be a string"),
    })
}

/// A path, a URL or a history key: a string without lone surrogates (the file system or SQLite
/// would see U+FFFD instead).
pub fn string(name: &str, value: &Unknown<'_>) -> Result<String> {
    strict_string(value, |surrogate| Error::InvalidArgument {
        message: if surrogate {
            format!("{name} must be well-formed Unicode (it holds a lone surrogate)")
        } else {
            format!("{name} must be a string, got {}", describe(value))
        },
    })
}

/// A JS number that is an exact, safe integer: 1000.5, NaN, Infinity, `'1000'` and 2**53 are
/// refused with a `RangeError`, never rounded, truncated or coerced.
pub fn integer(name: &str, value: &Unknown<'_>) -> Result<i64> {
    let refuse = || Error::InvalidArgument {
        message: format!("{name} must be a safe integer, got {}", describe(value)),
    };
    let number = number(value)?.ok_or_else(refuse)?;
    if number.fract() != 0.0 || !number.is_finite() || number.abs() > MAX_SAFE_INTEGER as f64 {
        return Err(refuse());
    }
    Ok(number as i64)
}

/// An optional integer: `undefined` and `null` are `None`.
pub fn optional_integer(name: &str, value: Option<&Unknown<'_>>) -> Result<Option<i64>> {
    match value {
        None => Ok(None),
        Some(value) if is_nullish(value)? => Ok(None),
        Some(value) => integer(name, value).map(Some),
    }
}

pub fn is_nullish(value: &Unknown<'_>) -> Result<bool> {
    Ok(matches!(
        value.get_type().map_err(napi_failure)?,
        ValueType::Undefined | ValueType::Null
    ))
}

/// The value of a JS number, or `None` for any other type.
pub fn number(value: &Unknown<'_>) -> Result<Option<f64>> {
    let mut number = 0.0;
    // SAFETY: plain napi read of a value of the current call; the type is napi's to check.
    match unsafe { sys::napi_get_value_double(value.value().env, value.raw(), &mut number) } {
        sys::Status::napi_ok => Ok(Some(number)),
        sys::Status::napi_number_expected => Ok(None),
        other => Err(unreadable(other, "a number")),
    }
}

/// The bytes of an organization key: any `Uint8Array` (a `Buffer`, or a view into a larger
/// buffer, whose offset napi has already applied), and nothing else.
pub fn key_bytes<'a>(value: &Unknown<'a>) -> Result<Uint8ArraySlice<'a>> {
    let refuse = || Error::IdInvalid {
        message: "an organization key must be a Uint8Array".to_owned(),
    };
    // SAFETY: napi refuses anything but a typed array, and the slice any element type but Uint8.
    unsafe { Uint8ArraySlice::from_napi_value(value.value().env, value.raw()) }.map_err(|_| refuse())
}

/// A JS number for an integer that comes out of the core: epochs and milliseconds beyond
/// `Number.MAX_SAFE_INTEGER` would silently lose precision, so they are an error instead.
pub fn safe_number(name: &str, value: i64) -> Result<f64> {
    if (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&value) {
        Ok(value as f64)
    } else {
        Err(Error::InvalidArgument {
            message: format!("{name} {value} does not fit a JavaScript number exactly"),
        })
    }
}

/// A count that comes out of the core (files, bytes, a sequence number) as a JS number; past
/// `i64::MAX` is past the safe range too, so saturating cannot let a wrong value through.
pub fn safe_count(name: &str, value: u64) -> Result<f64> {
    safe_number(name, i64::try_from(value).unwrap_or(i64::MAX))
}

/// A non-negative integer number of milliseconds.
pub fn millis(name: &str, value: &Unknown<'_>) -> Result<Duration> {
    let ms = integer(name, value)?;
    u64::try_from(ms)
        .map(Duration::from_millis)
        .map_err(|_| Error::InvalidArgument {
            message: format!("{name} must not be negative, got {ms}"),
        })
}

/// A count the host asks for (how many copies to keep): a safe integer of at least zero.
pub fn count(name: &str, value: &Unknown<'_>) -> Result<usize> {
    let value = integer(name, value)?;
    usize::try_from(value).map_err(|_| Error::InvalidArgument {
        message: format!("{name} must be zero or more, got {value}"),
    })
}

/// The bytes of a `Uint8Array` (a `Buffer` too), copied: the call that takes them runs on
/// another thread, after the JS caller may have changed them.
pub fn bytes(name: &str, value: &Unknown<'_>) -> Result<Vec<u8>> {
    // SAFETY: napi refuses anything but a typed array, and the slice any element type but Uint8.
    unsafe { Uint8ArraySlice::from_napi_value(value.value().env, value.raw()) }
        .map(|slice| slice.to_vec())
        .map_err(|_| Error::InvalidArgument {
            message: format!("{name} must be a Uint8Array, got {}", describe(value)),
        })
}

/// A short description of a refused value for error messages, shaped like JS's `String(v)`.
fn describe(value: &Unknown<'_>) -> String {
    match value.get_type() {
        Ok(ValueType::Number) => match number(value) {
            Ok(Some(n)) if n.is_nan() => "NaN".to_owned(),
            Ok(Some(n)) if n.is_infinite() => if n > 0.0 { "Infinity" } else { "-Infinity" }.to_owned(),
            Ok(Some(n)) => n.to_string(),
            _ => "a number".to_owned(),
        },
        Ok(ValueType::String) => with_utf16(value, |units| {
            Ok(match units {
                Some(units) if units.len() <= 40 => {
                    format!("the string {:?}", String::from_utf16_lossy(units))
                }
                _ => "a string".to_owned(),
            })
        })
        .unwrap_or_else(|_| "a string".to_owned()),
        Ok(ValueType::Undefined) => "undefined".to_owned(),
        Ok(ValueType::Null) => "null".to_owned(),
        Ok(ValueType::Boolean) => "a boolean".to_owned(),
        Ok(ValueType::Symbol) => "a symbol".to_owned(),
        Ok(ValueType::Function) => "a function".to_owned(),
        _ => "an object".to_owned(),
    }
}
