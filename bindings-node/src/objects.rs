//! JS objects built field by field, for results that `#[napi(object)]` cannot describe: a field
//! that holds a JS error, or one that is there for some values only.

use gotry_tenant_state::errors::Error;
use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::{sys, Env};

use crate::args::safe_number;
use crate::errors::{to_js_error, OrThrow};

/// A value that becomes a fresh JS object, made with [`object_value!`].
pub trait ObjectValue {
    /// Sets the value's fields on `object`, on the JS thread of `env`.
    fn fill(self, env: &Env, object: &mut Object<'_>) -> napi::Result<()>;
}

/// Gives an [`ObjectValue`] napi's `TypeName` (named `$name` in napi's type errors) and
/// `ToNapiValue`, so a task or a method can return it.
macro_rules! object_value {
    ($type:ty, $name:literal) => {
        impl napi::bindgen_prelude::TypeName for $type {
            fn type_name() -> &'static str {
                $name
            }

            fn value_type() -> napi::ValueType {
                napi::ValueType::Object
            }
        }

        impl napi::bindgen_prelude::ToNapiValue for $type {
            unsafe fn to_napi_value(
                raw_env: napi::sys::napi_env,
                value: $type,
            ) -> napi::Result<napi::sys::napi_value> {
                // SAFETY: napi calls this on the JS thread of `raw_env`.
                unsafe { $crate::objects::new_object(raw_env, value) }
            }
        }
    };
}
pub(crate) use object_value;

/// The JS object of `value`.
///
/// # Safety
/// `raw_env` must be the env of the current JS thread, as napi's `to_napi_value` is given.
pub unsafe fn new_object(raw_env: sys::napi_env, value: impl ObjectValue) -> napi::Result<sys::napi_value> {
    let env = Env::from_raw(raw_env);
    let mut object = Object::new(&env)?;
    value.fill(&env, &mut object)?;
    // SAFETY: the object was made on this env, on its thread, just above.
    unsafe { Object::to_napi_value(raw_env, object) }
}

/// Sets `name` to a JS number that must be exact: one that is not throws that error instead.
pub fn set_number(env: &Env, object: &mut Object<'_>, name: &str, value: i64) -> napi::Result<()> {
    object.set(name, safe_number(name, value).or_throw(env)?)
}

/// Sets `error` to the JS error of a core error.
pub fn set_error(env: &Env, object: &mut Object<'_>, error: Error) -> napi::Result<()> {
    object.set("error", to_js_error(env, error))
}

/// `[{ key, error }]`: the keys a shutdown or a close could not let go of, and why.
pub fn key_errors(env: &Env, failed: Vec<(String, Error)>) -> napi::Result<Vec<Object<'_>>> {
    failed
        .into_iter()
        .map(|(key, error)| {
            let mut failure = Object::new(env)?;
            failure.set("key", key)?;
            set_error(env, &mut failure, error)?;
            Ok(failure)
        })
        .collect()
}
