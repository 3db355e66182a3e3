//! The core's metrics for a C host: the text its HTTP endpoint serves, and the media type to
//! serve it with. The text is rendered by the core; this file only hands it across.
//!
//! An owned string rather than a caller's buffer: the text grows as series start counting,
//! so a size asked for first could be too small by the time of the second call.

use std::ffi::{c_char, CString};

use gotry_core::metrics;

use crate::boundary::{Failure, Out};
use crate::error::GotryError;
use crate::status::{name_or_null, GotryStatus};

/// Writes every metric family of this process (lease store operations and their latency,
/// fences, lost leases, the keepers' rounds, the routers' tenants, refusals and handoffs,
/// copies and restores; and each tenant's series of the routers started with
/// `GotryRouterOptions.tenant_metrics`) in the Prometheus text format 0.0.4, ready to be served as it is or
/// appended to the output of the host's own registry. `*out_text` receives a new
/// NUL-terminated string to free with `gotry_metrics_text_free`, `*out_len` its length
/// without the NUL. Thread-safe.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when `out_text` or `out_len` is NULL.
///
/// # Safety
/// The out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_metrics_text(
    out_text: *mut *mut c_char,
    out_len: *mut usize,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let out_text = unsafe { Out::new("out_text", out_text)? };
        let out_len = unsafe { Out::new("out_len", out_len)? };
        let text = CString::new(metrics::encode())
            .map_err(|_| Failure::Panic("the metrics text holds a NUL".to_owned()))?;
        out_len.write(text.as_bytes().len());
        out_text.write(text.into_raw());
        Ok(())
    })
}

/// Frees a text from `gotry_metrics_text`; NULL does nothing.
///
/// # Safety
/// `text` must be NULL or a text from `gotry_metrics_text` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn gotry_metrics_text_free(text: *mut c_char) {
    let _ = ffi_boundary!(std::ptr::null_mut(), {
        if !text.is_null() {
            // SAFETY: the caller's promise above: it came from `CString::into_raw`.
            drop(unsafe { CString::from_raw(text) });
        }
        Ok(())
    });
}

/// The media type of `gotry_metrics_text`'s text, for the `Content-Type` of the host's
/// endpoint: `"text/plain; version=0.0.4; charset=utf-8"`. Static, NUL-terminated: never
/// free it. Thread-safe.
#[no_mangle]
pub extern "C" fn gotry_metrics_content_type() -> *const c_char {
    static TYPE: std::sync::OnceLock<CString> = std::sync::OnceLock::new();
    name_or_null(|| {
        TYPE.get_or_init(|| CString::new(metrics::CONTENT_TYPE).expect("a media type holds no NUL"))
            .as_ptr()
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use super::*;

    #[test]
    fn the_text_is_the_cores_and_comes_back_to_be_freed() {
        let mut text: *mut c_char = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: both out-parameters are writable locals.
        let status = unsafe { gotry_metrics_text(&mut text, &mut len, std::ptr::null_mut()) };
        assert_eq!(status, GotryStatus::Ok);
        // SAFETY: the call just handed over a NUL-terminated text.
        let read = unsafe { CStr::from_ptr(text) }.to_str().unwrap().to_owned();
        assert_eq!(read.len(), len);
        assert!(
            read.contains("# TYPE gotry_tenant_leases_lost_total counter\n"),
            "{read}"
        );
        // SAFETY: the text came from `gotry_metrics_text` and is freed once.
        unsafe { gotry_metrics_text_free(text) };
        // SAFETY: a NULL out-parameter is refused before anything is written.
        let null = unsafe { gotry_metrics_text(std::ptr::null_mut(), &mut len, std::ptr::null_mut()) };
        assert_eq!(null, GotryStatus::NullArgument);
        // SAFETY: static, NUL-terminated.
        let media = unsafe { CStr::from_ptr(gotry_metrics_content_type()) };
        assert_eq!(media.to_str(), Ok(metrics::CONTENT_TYPE));
    }
}
