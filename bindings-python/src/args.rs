//! The argument checks that depend on Python itself: what a `str`, an `int` and a key are.
//!
//! Every rule about the values (lengths, ranges, formats) is the core's; these only decide
//! whether a Python object can be handed to it without losing anything on the way. A
//! `bool` is an `int` to Python, and a float may be integral, but neither is a TTL; a
//! string with a lone surrogate has no UTF-8 form, and replacing it would let two
//! different subjects share one tenant.

use std::path::PathBuf;
use std::time::Duration;

use gotry_tenant_state::Error;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt, PyString};
use zeroize::Zeroizing;

use crate::errors::CoreError;

/// Why a Python object is not a usable string.
enum NotText {
    NotStr(String),
    LoneSurrogate,
}

impl NotText {
    fn describe(&self, name: &str) -> String {
        match self {
            NotText::NotStr(type_name) => format!("{name} must be a str, got {type_name}"),
            NotText::LoneSurrogate => {
                format!("{name} must be well-formed Unicode (it holds a lone surrogate)")
            }
        }
    }
}

pub fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "an unknown type".to_owned(), |name| name.to_string())
}

fn as_text<'a>(value: &'a Bound<'_, PyAny>) -> Result<&'a str, NotText> {
    let string = value
        .cast::<PyString>()
        .map_err(|_| NotText::NotStr(type_name(value)))?;
    string.to_str().map_err(|_| NotText::LoneSurrogate)
}

/// An identifier or a claim: anything that is not a well-formed `str` is an invalid id,
/// as the reference refuses any non-string with ID_INVALID.
pub fn id_text<'a>(name: &str, value: &'a Bound<'_, PyAny>) -> Result<&'a str, CoreError> {
    as_text(value).map_err(|problem| {
        CoreError(Error::IdInvalid {
            message: problem.describe(name),
        })
    })
}

/// A key, owner or replica id of the store, owned so that it can cross into a call that
/// runs without the interpreter lock. A wrong type is an invalid argument (ValueError), as
/// the reference's RangeError.
pub fn store_text(name: &str, value: &Bound<'_, PyAny>) -> Result<String, CoreError> {
    as_text(value)
        .map(str::to_owned)
        .map_err(|problem| invalid(problem.describe(name)))
}

/// A file-system path (a state root, a store file or folder, a tenant root): a `str` or an
/// `os.PathLike` whose `__fspath__` gives one, and well-formed Unicode, the rule of the Node
/// and C doors. A lone surrogate, including the U+DC80..U+DCFF that `os.fsencode`'s
/// surrogateescape would turn into raw bytes, is a ValueError naming the argument: Node cannot
/// pass it and C takes UTF-8 only, so accepting it here would let Python alone name a
/// directory no other door can. Any other type stays a TypeError, as `os.fspath` gives.
pub fn path_arg(name: &str, value: &Bound<'_, PyAny>) -> PyResult<PathBuf> {
    let py = value.py();
    let fspath = py.import("os")?.getattr("fspath")?.call1((value,))?;
    let text = fspath.cast::<PyString>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{name} must be a str or an os.PathLike of str, got {}",
            type_name(&fspath)
        ))
    })?;
    let text = text
        .to_str()
        .map_err(|_| invalid(NotText::LoneSurrogate.describe(name)))?;
    Ok(PathBuf::from(text))
}

/// Whether `value` is an integer here, for arguments and a host clock's readings alike:
/// Python counts a `bool` as an `int`, but `True` is no TTL.
pub fn is_int(value: &Bound<'_, PyAny>) -> bool {
    !value.is_instance_of::<PyBool>() && value.is_instance_of::<PyInt>()
}

/// Whether `value` is a real number here: an `int` or a `float` (still not a `bool`).
pub fn is_real(value: &Bound<'_, PyAny>) -> bool {
    is_int(value) || value.is_instance_of::<PyFloat>()
}

/// The refusals every number argument shares: of the wrong type (`accepted` false), naming
/// what was `expected`, and of a value that `T` cannot hold.
fn number<'py, T: FromPyObjectOwned<'py>>(
    name: &str,
    value: &Bound<'py, PyAny>,
    accepted: bool,
    expected: &str,
) -> Result<T, CoreError> {
    if !accepted {
        return Err(invalid(format!(
            "{name} must be {expected}, got {}",
            type_name(value)
        )));
    }
    value
        .extract::<T>()
        .map_err(|_| invalid(format!("{name} is out of range, got {value}")))
}

/// An integer argument (TTL, margin, epoch, clock reading): a Python `int` that fits in 64
/// bits. `True` and `1.0` are refused rather than read as 1; an int beyond 64 bits is
/// refused rather than wrapped or clamped.
pub fn integer(name: &str, value: &Bound<'_, PyAny>) -> Result<i64, CoreError> {
    number(name, value, is_int(value), "an int")
}

/// An `integer` that is not negative, in the unsigned type that holds it.
fn non_negative<T: TryFrom<i64>>(name: &str, value: &Bound<'_, PyAny>) -> Result<T, CoreError> {
    let n = integer(name, value)?;
    T::try_from(n).map_err(|_| invalid(format!("{name} must not be negative, got {n}")))
}

/// A duration in whole milliseconds (a timeout): an `integer` that is not negative.
pub fn milliseconds(name: &str, value: &Bound<'_, PyAny>) -> Result<Duration, CoreError> {
    non_negative(name, value).map(Duration::from_millis)
}

/// A count of things (a batch size): an `integer` that is not negative. Whether zero makes
/// sense is the core's call.
pub fn count(name: &str, value: &Bound<'_, PyAny>) -> Result<usize, CoreError> {
    non_negative(name, value)
}

/// A real number (a fraction): an `int` or a `float`, not a `bool`. NaN and the infinities
/// pass through to the core, whose range check refuses them by name.
pub fn real(name: &str, value: &Bound<'_, PyAny>) -> Result<f64, CoreError> {
    number(name, value, is_real(value), "a float")
}

/// One of a fixed set of modes, named by the word the core gives each (`word`): a `str` equal
/// to one of those words, returned as its mode.
pub fn one_of<T: Copy>(
    name: &str,
    value: &Bound<'_, PyAny>,
    choices: &[T],
    word: fn(T) -> &'static str,
) -> Result<T, CoreError> {
    let quoted: Vec<String> = choices.iter().map(|c| format!("{:?}", word(*c))).collect();
    let expected = || format!("{name} must be one of {}", quoted.join(", "));
    let text = as_text(value).map_err(|_| invalid(format!("{}, got {}", expected(), type_name(value))))?;
    choices
        .iter()
        .copied()
        .find(|choice| word(*choice) == text)
        .ok_or_else(|| invalid(format!("{}, got {text:?}", expected())))
}

fn invalid(message: String) -> CoreError {
    CoreError(Error::InvalidArgument { message })
}

/// The bytes of an organization key.
pub enum KeyBytes<'a> {
    /// A `bytes` object is immutable: its own storage is read in place.
    Borrowed(&'a [u8]),
    /// Any other buffer is copied (it could change under us), and the copy is wiped.
    Copied(Zeroizing<Vec<u8>>),
}

impl std::ops::Deref for KeyBytes<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            KeyBytes::Borrowed(bytes) => bytes,
            KeyBytes::Copied(bytes) => bytes,
        }
    }
}

/// An organization key: `bytes`, `bytearray`, a `memoryview` or any other buffer of bytes.
/// A `str` is not a key (its encoding would be a guess), which the reference answers with
/// ID_INVALID like any other non-binary key.
pub fn key_bytes<'a>(value: &'a Bound<'_, PyAny>) -> Result<KeyBytes<'a>, CoreError> {
    if let Ok(bytes) = value.cast::<PyBytes>() {
        return Ok(KeyBytes::Borrowed(bytes.as_bytes()));
    }
    PyBuffer::<u8>::get(value)
        .and_then(|buffer| buffer.to_vec(value.py()))
        .map(|copy| KeyBytes::Copied(Zeroizing::new(copy)))
        .map_err(|_| {
            CoreError(Error::IdInvalid {
                message: format!(
                    "an organization key must be bytes, bytearray or a memoryview of bytes, got {}",
                    type_name(value)
                ),
            })
        })
}
