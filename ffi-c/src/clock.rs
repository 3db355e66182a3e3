//! The manual clock that tests and drills move by hand.

use std::sync::Arc;

use gotry_core::ManualClock;

use crate::boundary::{free_handle, handle, into_handle, read_into, Out};
use crate::error::GotryError;
use crate::status::GotryStatus;

/// A clock that moves only when told to, in integer milliseconds. Pass it to
/// `gotry_store_open` as the store's wall clock and to `gotry_lease_acquire` as the holder's
/// monotonic clock (one clock may serve both). Thread-safe: set, advance and get may run on
/// any threads at once. A store or lease given the clock keeps its own reference, so the
/// clock may be freed before them.
#[derive(Debug)]
pub struct GotryManualClock {
    pub(crate) clock: Arc<ManualClock>,
}

/// Creates a manual clock reading `start_ms`.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when `out_clock` is NULL.
///
/// # Safety
/// `out_clock` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_manual_clock_new(
    start_ms: i64,
    out_clock: *mut *mut GotryManualClock,
) -> GotryStatus {
    ffi_boundary!(std::ptr::null_mut(), {
        let out_clock = unsafe { Out::new("out_clock", out_clock)? };
        out_clock.write(into_handle(GotryManualClock {
            clock: Arc::new(ManualClock::new(start_ms)),
        }));
        Ok(())
    })
}

/// Sets the clock to `now_ms` (which may be earlier, to model a wall clock stepped back).
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when `clock` is NULL.
///
/// # Safety
/// `clock` must be NULL or a live `GotryManualClock`.
#[no_mangle]
pub unsafe extern "C" fn gotry_manual_clock_set(clock: *const GotryManualClock, now_ms: i64) -> GotryStatus {
    ffi_boundary!(std::ptr::null_mut(), {
        unsafe { handle("clock", clock)? }.clock.set(now_ms);
        Ok(())
    })
}

/// Moves the clock by `delta_ms` (negative moves it back) and writes the new reading.
///
/// Returns `GOTRY_STATUS_INVALID_ARGUMENT` (clock unchanged) when the reading would overflow
/// an `int64_t`, and `GOTRY_STATUS_NULL_ARGUMENT` when an argument other than `out_error` is
/// NULL.
///
/// # Safety
/// `clock` must be NULL or a live `GotryManualClock`; the out-parameters must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_manual_clock_advance(
    clock: *const GotryManualClock,
    delta_ms: i64,
    out_now_ms: *mut i64,
    out_error: *mut *mut GotryError,
) -> GotryStatus {
    ffi_boundary!(out_error, {
        let clock = unsafe { handle("clock", clock)? };
        let out_now_ms = unsafe { Out::new("out_now_ms", out_now_ms)? };
        out_now_ms.write(clock.clock.advance(delta_ms)?);
        Ok(())
    })
}

/// Reads the clock.
///
/// Returns `GOTRY_STATUS_NULL_ARGUMENT` when an argument is NULL.
///
/// # Safety
/// `clock` must be NULL or a live `GotryManualClock`; `out_now_ms` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gotry_manual_clock_get(
    clock: *const GotryManualClock,
    out_now_ms: *mut i64,
) -> GotryStatus {
    unsafe {
        read_into("clock", clock, "out_now_ms", out_now_ms, |clock| {
            Ok(clock.clock.get())
        })
    }
}

/// Frees the caller's reference to a clock; NULL does nothing. Stores and leases that were
/// given the clock keep reading it.
///
/// # Safety
/// `clock` must be NULL or a `GotryManualClock` not yet freed, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn gotry_manual_clock_free(clock: *mut GotryManualClock) {
    unsafe { free_handle(clock) }
}
