//! The one place where a call crosses from C into Rust: the panic boundary, the checks of
//! raw arguments, and the writing of out-parameters.
//!
//! A C host cannot catch a Rust panic (unwinding out of an `extern "C"` function aborts the
//! process), cannot be trusted to pass non-NULL pointers, and may hand over any bytes. Each
//! of those turns into a status here, so no exported function repeats the handling.

use std::any::Any;
use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

use gotry_core::Error;

use crate::error::GotryError;
use crate::status::GotryStatus;

/// Why a call failed: a core error, or one of the failures that only exist at the ABI.
#[derive(Debug)]
pub(crate) enum Failure {
    Core(Error),
    /// A required pointer argument was NULL; carries the parameter's name.
    Null(&'static str),
    /// An output buffer cannot hold the answer; `needed` counts the NUL.
    BufferTooSmall {
        name: &'static str,
        needed: usize,
        capacity: usize,
    },
    /// The object has no such detail (a record on an error that is not LEASE_HELD).
    NoValue(&'static str),
    /// A panic inside the library, with its message.
    Panic(String),
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        Failure::Core(error)
    }
}

impl Failure {
    pub(crate) fn invalid(message: impl Into<String>) -> Failure {
        Failure::Core(Error::InvalidArgument {
            message: message.into(),
        })
    }

    /// Hands the failure to the caller: its status, and its details when asked for.
    fn report(self, out_error: *mut *mut GotryError) -> GotryStatus {
        let error = GotryError::from(self);
        let status = error.status();
        if !out_error.is_null() {
            // SAFETY: the caller passed a non-NULL `GotryError **`, which the header
            // documents as writable.
            unsafe { out_error.write(Box::into_raw(Box::new(error))) };
        }
        status
    }
}

/// The result of every exported body.
pub(crate) type Outcome = Result<(), Failure>;

/// Runs `body`, turning a panic into `GOTRY_STATUS_INTERNAL_ERROR` and a failure into its
/// status (and into `*out_error` when that is not NULL). Used through [`ffi_boundary!`].
pub(crate) fn run(out_error: *mut *mut GotryError, body: impl FnOnce() -> Outcome) -> GotryStatus {
    let outcome = catch_unwind(AssertUnwindSafe(body));
    // Reporting allocates and drops the panic payload; neither may unwind into C either.
    catch_unwind(AssertUnwindSafe(move || match outcome {
        Ok(Ok(())) => GotryStatus::Ok,
        Ok(Err(failure)) => failure.report(out_error),
        Err(payload) => Failure::Panic(panic_message(payload.as_ref())).report(out_error),
    }))
    .unwrap_or(GotryStatus::InternalError)
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    let detail = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message");
    format!("internal error in gotry_tenant_state: {detail}")
}

/// The body of every exported function: `ffi_boundary!(out_error, { ...; Ok(()) })`.
macro_rules! ffi_boundary {
    ($out_error:expr, $body:block) => {
        $crate::boundary::run($out_error, || -> $crate::boundary::Outcome { $body })
    };
}

/// Borrows `len` bytes at `ptr`. NULL is refused even with a length of zero, so that a
/// forgotten argument is never mistaken for the empty string.
///
/// # Safety
/// When `ptr` is not NULL it must point to `len` readable bytes that stay unchanged for `'a`.
pub(crate) unsafe fn bytes_in<'a, T>(
    name: &'static str,
    ptr: *const T,
    len: usize,
) -> Result<&'a [u8], Failure> {
    if ptr.is_null() {
        return Err(Failure::Null(name));
    }
    if isize::try_from(len).is_err() {
        return Err(Failure::invalid(format!(
            "{name}_len is {len}, more than any object can hold"
        )));
    }
    // SAFETY: non-NULL, a length that fits a slice, and the caller's promise above.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// Text that is a lease key, an owner, a path or a URL: UTF-8, or INVALID_ARGUMENT (what
/// the reference answers for a key that is not a string).
///
/// # Safety
/// As [`bytes_in`].
pub(crate) unsafe fn text_in<'a>(
    name: &'static str,
    ptr: *const c_char,
    len: usize,
) -> Result<&'a str, Failure> {
    // SAFETY: forwarded to the caller.
    let bytes = unsafe { bytes_in(name, ptr, len)? };
    std::str::from_utf8(bytes).map_err(|e| {
        Failure::invalid(format!(
            "{name} is not UTF-8 (invalid byte at offset {})",
            e.valid_up_to()
        ))
    })
}

/// Text that is an id or a claim: bytes that are not UTF-8 are an invalid id (ID_INVALID),
/// as a lone surrogate is in the other languages.
///
/// # Safety
/// As [`bytes_in`].
pub(crate) unsafe fn id_in<'a>(
    name: &'static str,
    ptr: *const c_char,
    len: usize,
) -> Result<&'a str, Failure> {
    // SAFETY: forwarded to the caller.
    let bytes = unsafe { bytes_in(name, ptr, len)? };
    Ok(gotry_core::ids::claim_from_utf8(name, bytes)?)
}

/// Borrows an object handle; NULL is refused.
///
/// # Safety
/// When not NULL, `ptr` must come from this library and not have been freed.
pub(crate) unsafe fn handle<'a, T>(name: &'static str, ptr: *const T) -> Result<&'a T, Failure> {
    // SAFETY: the caller's promise above.
    unsafe { ptr.as_ref() }.ok_or(Failure::Null(name))
}

/// Borrows an optional object handle: NULL means "the default".
///
/// # Safety
/// As [`handle`].
pub(crate) unsafe fn optional_handle<'a, T>(ptr: *const T) -> Option<&'a T> {
    // SAFETY: the caller's promise above.
    unsafe { ptr.as_ref() }
}

/// An out-parameter, checked for NULL before any work is done and written only on success.
pub(crate) struct Out<T>(NonNull<T>);

impl<T> Out<T> {
    /// # Safety
    /// When not NULL, `ptr` must be valid for a write of one `T` until the call returns.
    pub(crate) unsafe fn new(name: &'static str, ptr: *mut T) -> Result<Out<T>, Failure> {
        NonNull::new(ptr).map(Out).ok_or(Failure::Null(name))
    }

    pub(crate) fn write(self, value: T) {
        // SAFETY: `new`'s contract; `write` does not drop whatever (possibly uninitialized)
        // value the caller left there.
        unsafe { self.0.as_ptr().write(value) }
    }
}

/// Hands a new object to C: the pointer is freed by the matching `_free`.
pub(crate) fn into_handle<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// The body of every `_free`: frees an object handed out by [`into_handle`]; NULL does
/// nothing. A panic in its drop stops here, since a `_free` returns nothing to report it with.
///
/// # Safety
/// When not NULL, `ptr` must come from [`into_handle`] for this `T` and not be used again.
pub(crate) unsafe fn free_handle<T>(ptr: *mut T) {
    let _ = ffi_boundary!(std::ptr::null_mut(), {
        if !ptr.is_null() {
            // SAFETY: the caller's promise above.
            drop(unsafe { Box::from_raw(ptr) });
        }
        Ok(())
    });
}

/// The body of every accessor: the handle, then the out-parameter (NULLs are refused in
/// parameter order), then what `read` finds in the handle, written only when it finds it.
/// Accessors take no `out_error`: all they can say is in the status.
///
/// # Safety
/// As [`handle`] for `ptr` and [`Out::new`] for `out`.
pub(crate) unsafe fn read_into<H, T>(
    name: &'static str,
    ptr: *const H,
    out_name: &'static str,
    out: *mut T,
    read: impl FnOnce(&H) -> Result<T, Failure>,
) -> GotryStatus {
    ffi_boundary!(std::ptr::null_mut(), {
        let value = unsafe { handle(name, ptr)? };
        let out = unsafe { Out::new(out_name, out)? };
        out.write(read(value)?);
        Ok(())
    })
}

/// A caller's character buffer.
pub(crate) struct OutBuffer {
    name: &'static str,
    ptr: NonNull<c_char>,
    capacity: usize,
}

impl OutBuffer {
    /// # Safety
    /// When not NULL, `ptr` must be valid for writes of `capacity` bytes until the call returns.
    pub(crate) unsafe fn new(
        name: &'static str,
        ptr: *mut c_char,
        capacity: usize,
    ) -> Result<OutBuffer, Failure> {
        let ptr = NonNull::new(ptr).ok_or(Failure::Null(name))?;
        Ok(OutBuffer { name, ptr, capacity })
    }

    /// Refuses a buffer smaller than `needed` bytes (NUL included).
    pub(crate) fn require(&self, needed: usize) -> Result<(), Failure> {
        if self.capacity < needed {
            Err(Failure::BufferTooSmall {
                name: self.name,
                needed,
                capacity: self.capacity,
            })
        } else {
            Ok(())
        }
    }

    /// Copies `value` and a terminating NUL; returns the length without the NUL.
    pub(crate) fn write(self, value: &[u8]) -> Result<usize, Failure> {
        self.require(value.len() + 1)?;
        // SAFETY: `new`'s contract and the capacity check above; the buffer is the caller's
        // and cannot overlap `value`, which this library owns.
        unsafe {
            let out = self.ptr.as_ptr().cast::<u8>();
            std::ptr::copy_nonoverlapping(value.as_ptr(), out, value.len());
            out.add(value.len()).write(0);
        }
        Ok(value.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_internal_status_with_its_message() {
        let mut error: *mut GotryError = std::ptr::null_mut();
        let status = run(&mut error, || panic!("planted failure"));
        assert_eq!(status, GotryStatus::InternalError);
        assert!(!error.is_null());
        // SAFETY: `run` just handed this error over.
        let error = unsafe { Box::from_raw(error) };
        assert_eq!(error.status(), GotryStatus::InternalError);
        assert!(
            error.message_text().contains("planted failure"),
            "{}",
            error.message_text()
        );
        let formatted = run(std::ptr::null_mut(), || panic!("{} {}", "formatted", 7));
        assert_eq!(formatted, GotryStatus::InternalError);
    }

    #[test]
    fn success_leaves_the_error_slot_alone() {
        let sentinel = 0x10 as *mut GotryError;
        let mut error = sentinel;
        assert_eq!(run(&mut error, || Ok(())), GotryStatus::Ok);
        assert_eq!(error, sentinel);
    }

    #[test]
    fn lengths_that_no_object_can_have_are_refused_before_any_read() {
        let byte = 0u8;
        // SAFETY: the length is refused before the pointer is read.
        let huge = unsafe { bytes_in("issuer", &byte, usize::MAX) };
        assert!(matches!(huge, Err(Failure::Core(Error::InvalidArgument { .. }))));
        // SAFETY: NULL is refused before anything is read.
        let null = unsafe { bytes_in::<u8>("issuer", std::ptr::null(), 0) };
        assert!(matches!(null, Err(Failure::Null("issuer"))));
    }
}
