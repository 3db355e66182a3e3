//! Core errors as JS errors: an `Error` whose `code` is the stable `GOTRY_TENANT_*` string and
//! whose own properties carry the reference's extra fields, which the JS layer turns into the
//! matching `TenantStateError` subclass. An invalid argument is a `RangeError` already here,
//! and like the reference's it has no `code` property at all (the core's `ERR_OUT_OF_RANGE`
//! stays on the Rust and C side).

use gotry_tenant_state::errors::{Error, ErrorCode, Result};
use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::{sys, Env, JsValue};
use napi_derive::napi;

use crate::args::{safe_count, safe_number};
use crate::copies::JsSkippedCopy;
use crate::store::JsLeaseRecord;

/// The stable codes, in the core's order, so the JS layer can prove that its classes
/// cover exactly this list.
#[napi]
pub fn error_codes() -> Vec<String> {
    ErrorCode::ALL
        .iter()
        .map(|code| code.as_str().to_owned())
        .collect()
}

/// One code of the core's registry as the JS layer reads it: its message template is the one
/// `lib/errors.js` fills for an error a host constructs itself.
#[napi(object)]
pub struct ErrorType {
    pub code: String,
    pub class_name: String,
    /// The fields, in the core's snake_case, as the template names them.
    pub fields: Vec<String>,
    pub template: String,
}

/// The core's registry, in its order, one entry per code.
#[napi]
pub fn error_types() -> Vec<ErrorType> {
    ErrorCode::ALL
        .iter()
        .map(|code| ErrorType {
            code: code.as_str().to_owned(),
            class_name: code.class_name().to_owned(),
            fields: code.fields().iter().map(|&field| field.to_owned()).collect(),
            template: code.template().to_owned(),
        })
        .collect()
}

/// Turns a core result into a napi result, building the JS error on the calling thread.
pub trait OrThrow<T> {
    fn or_throw(self, env: &Env) -> napi::Result<T>;
}

impl<T> OrThrow<T> for Result<T> {
    fn or_throw(self, env: &Env) -> napi::Result<T> {
        self.map_err(|error| to_js_error(env, error))
    }
}

/// The JS error for a core error. A failed host callback re-raises the host's own exception
/// unchanged (its napi error holds a reference to the thrown value).
pub fn to_js_error(env: &Env, error: Error) -> napi::Error {
    let error = match error {
        Error::Host(source) => match source.downcast::<napi::Error>() {
            Ok(thrown) => return *thrown,
            Err(other) => Error::Host(other),
        },
        other => other,
    };
    build(env, &error).unwrap_or_else(|failure| failure)
}

fn build(env: &Env, error: &Error) -> napi::Result<napi::Error> {
    Ok(napi::Error::from(build_object(env, error)?.to_unknown()))
}

fn build_object<'env>(env: &'env Env, error: &Error) -> napi::Result<Object<'env>> {
    let mut object = new_error(env, error)?;
    // A field that does not fit a JS number turns the whole error into that RangeError.
    match set_fields(&mut object, error) {
        Ok(()) => {}
        Err(Ok(refused)) => return new_error(env, &refused),
        Err(Err(napi_failure)) => return Err(napi_failure),
    }
    // What left a call in doubt is its `cause`, a native error of its own, which the JS
    // layer translates as it does any other.
    if let Error::CallInDoubt { cause, .. } = error {
        let cause = build_object(env, cause)?;
        object.set("cause", cause)?;
    }
    Ok(object)
}

type FieldResult = std::result::Result<(), std::result::Result<Error, napi::Error>>;

fn set_fields(object: &mut Object<'_>, error: &Error) -> FieldResult {
    let number = |name: &str, value: i64| safe_number(name, value).map_err(Ok);
    let count = |name: &str, value: u64| safe_count(name, value).map_err(Ok);
    let napi = |result: napi::Result<()>| result.map_err(Err);
    match error {
        Error::LeaseHeld { record } => {
            let record = JsLeaseRecord::from_core(record).map_err(Ok)?;
            napi(object.set("record", record))
        }
        Error::Fenced { reason, key, epoch } => {
            napi(object.set("reason", reason.as_str()))?;
            napi(object.set("key", key.as_str()))?;
            napi(object.set("epoch", number("epoch", *epoch)?))
        }
        Error::RestoreInvalid { skipped, .. } => {
            let skipped = skipped
                .iter()
                .map(JsSkippedCopy::from_core)
                .collect::<Result<Vec<_>>>();
            napi(object.set("skipped", skipped.map_err(Ok)?))
        }
        Error::DurableStoreUnavailable { backend_code, .. } => {
            napi(object.set("backendCode", backend_code.as_str()))
        }
        Error::Draining { key } => napi(object.set("key", key.as_str())),
        Error::DrainTimeout {
            key,
            in_flight,
            timeout_ms,
        } => {
            napi(object.set("key", key.as_str()))?;
            napi(object.set("inFlight", count("inFlight", *in_flight)?))?;
            napi(object.set("timeoutMs", count("timeoutMs", *timeout_ms)?))
        }
        Error::ReplicaAtCapacity { limit } => napi(object.set("limit", count("limit", *limit)?)),
        Error::TenantBusy {
            key,
            running,
            waited_ms,
        } => {
            napi(object.set("key", key.as_str()))?;
            napi(object.set("running", count("running", *running)?))?;
            napi(object.set("waitedMs", count("waitedMs", *waited_ms)?))
        }
        Error::CallInDoubt { key, epoch, .. } => {
            napi(object.set("key", key.as_str()))?;
            napi(object.set("epoch", number("epoch", *epoch)?))
        }
        _ => Ok(()),
    }
}

/// `new Error(message)` with `code` set, or, for an invalid argument, a plain
/// `new RangeError(message)` without any `code` property, exactly what the reference throws.
fn new_error<'env>(env: &'env Env, error: &Error) -> napi::Result<Object<'env>> {
    let range = matches!(error, Error::InvalidArgument { .. });
    let code = error.code_str();
    let message = error.to_string();
    // SAFETY: plain napi constructors on the env of the current thread; the strings are
    // created by napi-rs and the result is checked before use. A null code is allowed by
    // napi_create_range_error and leaves the error without a `code` property.
    unsafe {
        let code_value = if range {
            std::ptr::null_mut()
        } else {
            <&str as ToNapiValue>::to_napi_value(env.raw(), code)?
        };
        let message_value = <&str as ToNapiValue>::to_napi_value(env.raw(), message.as_str())?;
        let mut raw = std::ptr::null_mut();
        let status = if range {
            sys::napi_create_range_error(env.raw(), code_value, message_value, &mut raw)
        } else {
            sys::napi_create_error(env.raw(), code_value, message_value, &mut raw)
        };
        if status != sys::Status::napi_ok {
            return Err(napi::Error::from_reason(format!(
                "cannot create the error for {code}: {message}"
            )));
        }
        Ok(Object::from_raw(env.raw(), raw))
    }
}
