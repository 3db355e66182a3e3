//! Which library a host loaded. The header's `GOTRY_TENANT_STATE_VERSION*` macros (written
//! by the header generator from the workspace's version) are fixed when the host is
//! compiled; `gotry_version()` answers at run time, as SQLite's `SQLITE_VERSION` and
//! `sqlite3_libversion()` do.

use std::ffi::c_char;

use crate::status::name_or_null;

/// The version of the library loaded, e.g. `"0.1.0"`: compare it with the header's
/// `GOTRY_TENANT_STATE_VERSION` to find a host running against another build than the one
/// it was compiled with. Static, NUL-terminated: never free it. Thread-safe.
#[no_mangle]
pub extern "C" fn gotry_version() -> *const c_char {
    name_or_null(|| concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast())
}

#[cfg(test)]
mod tests {
    #[test]
    fn reports_the_cores_version() {
        let loaded = unsafe { std::ffi::CStr::from_ptr(super::gotry_version()) };
        assert_eq!(loaded.to_str(), Ok(gotry_core::VERSION));
    }
}
