//! JavaScript arguments checked as the reference checks them, before anything reaches the core.
//!
//! Arguments arrive as `Unknown` rather than as napi's typed parameters on purpose: napi's
//! `String` turns a lone surrogate into U+FFFD (two subjects would then share one tenant, two
//! keys one lease row), its `i64` truncates 1000.5, and its type errors are `TypeError`s where
//! the reference throws `RangeError` or `InvalidTenantIdError`.

use gotry_tenant_state::errors::{Error, Result};
use napi::bindgen_prelude::{FromNapiValue, JsValue, Uint8ArraySlice, Unknown, Utf16String};
use napi::{sys, ValueType};

/// The largest integer a JS number holds exactly (`Number.MAX_SAFE_INTEGER`).
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// A napi call that failed is reported as a host failure, which the error mapping re-raises as
/// napi's own error.
fn napi_failure(error: napi::Error) -> Error {
    Error::Host(Box::new(error))
}

/// The UTF-16 code units of a JS string, or `None` when the value is not a string.
pub fn utf16_units(value: &Unknown<'_>) -> Result<Option<Utf16String>> {
    if value.get_type().map_err(napi_failure)? != ValueType::String {
        return Ok(None);
    }
    // SAFETY: the value belongs to the env of the call that handed it over, and it is a string.
    let units = unsafe { Utf16String::from_napi_value(value.value().env, value.raw()) };
    units.map(Some).map_err(napi_failure)
}

/// Decodes UTF-16 strictly; `refuse` builds the error for a value that is not a string (`None`)
/// or that holds a lone surrogate (`Some(units)`).
fn strict_string(value: &Unknown<'_>, refuse: impl Fn(bool) -> Error) -> Result<String> {
    let units = utf16_units(value)?.ok_or_else(|| refuse(false))?;
    String::from_utf16(&units).map_err(|_| refuse(true))
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

/// An issuer or subject claim: a non-string is ID_INVALID, and so is a lone surrogate, decoded
/// by the core's own strict UTF-16 decoder.
pub fn claim(name: &str, value: &Unknown<'_>) -> Result<String> {
    match utf16_units(value)? {
        Some(units) => gotry_tenant_state::ids::claim_from_utf16(name, &units),
        None => Err(Error::IdInvalid {
            message: format!("{name} must be a non-empty string"),
        }),
    }
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
    if value.get_type().map_err(napi_failure)? != ValueType::Number {
        return Ok(None);
    }
    // SAFETY: the value belongs to the env of the current call, and it is a number.
    unsafe { f64::from_napi_value(value.value().env, value.raw()) }
        .map(Some)
        .map_err(napi_failure)
}

/// The bytes of an organization key: any `Uint8Array` (a `Buffer`, or a view into a larger
/// buffer, whose offset napi has already applied), and nothing else.
pub fn key_bytes<'a>(value: &Unknown<'a>) -> Result<Uint8ArraySlice<'a>> {
    let refuse = || Error::IdInvalid {
        message: "an organization key must be a Uint8Array".to_owned(),
    };
    let mut is_typed_array = false;
    // SAFETY: plain napi query on a value of the current call.
    let status = unsafe { sys::napi_is_typedarray(value.value().env, value.raw(), &mut is_typed_array) };
    if status != sys::Status::napi_ok || !is_typed_array {
        return Err(refuse());
    }
    // SAFETY: a typed array of the current call; the slice refuses any element type but Uint8.
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

/// A short description of a refused value for error messages, shaped like JS's `String(v)`.
fn describe(value: &Unknown<'_>) -> String {
    match value.get_type() {
        Ok(ValueType::Number) => match number(value) {
            Ok(Some(n)) if n.is_nan() => "NaN".to_owned(),
            Ok(Some(n)) if n.is_infinite() => if n > 0.0 { "Infinity" } else { "-Infinity" }.to_owned(),
            Ok(Some(n)) => n.to_string(),
            _ => "a number".to_owned(),
        },
        Ok(ValueType::String) => match utf16_units(value) {
            Ok(Some(units)) if units.len() <= 40 => {
                format!("the string {:?}", String::from_utf16_lossy(&units))
            }
            _ => "a string".to_owned(),
        },
        Ok(ValueType::Undefined) => "undefined".to_owned(),
        Ok(ValueType::Null) => "null".to_owned(),
        Ok(ValueType::Boolean) => "a boolean".to_owned(),
        Ok(ValueType::Symbol) => "a symbol".to_owned(),
        Ok(ValueType::Function) => "a function".to_owned(),
        _ => "an object".to_owned(),
    }
}
