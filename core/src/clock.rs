//! The two clocks of the layer, both injectable.
//!
//! The store decides expiry on its own wall clock (integer milliseconds since the Unix
//! epoch, as the reference's `Date.now`). A holder measures its fence on its own monotonic
//! clock (fractional milliseconds, as `performance.now`), which never jumps with NTP.
//! Host clocks (a JS function, a Python callable) may fail, hence the `Result`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::errors::{Error, Result};

/// The store's clock: integer milliseconds since the Unix epoch.
pub trait WallClock: Send + Sync {
    fn now_ms(&self) -> Result<i64>;

    /// The clock that runs beside this one and that no process can set, if there is one:
    /// the host's for the system clock; none for a test's or a host's own clock, which
    /// decide alone.
    fn host_clock(&self) -> Option<&dyn HostClock> {
        None
    }
}

/// A holder clock's reading, which must be a point in time: a NaN would compare as before
/// every deadline and keep a gate open, an infinity would schedule nothing. The one rule for
/// every reading the core takes, whatever clock a host passed in; the write gate alone reads
/// its clock directly, and closes on a reading that is no point in time.
pub(crate) fn read_monotonic(clock: &dyn MonotonicClock) -> Result<f64> {
    let now = clock.now_ms()?;
    if now.is_finite() {
        Ok(now)
    } else {
        Err(Error::invalid_argument(format!(
            "the holder's clock read {now}, which is no point in time"
        )))
    }
}

/// The longest a thread with nothing due sleeps before it looks at its clock again: a
/// safety net for a clock that jumps, not a timing rule.
pub(crate) const MAX_SLEEP: Duration = Duration::from_secs(60);

/// A wait in milliseconds on a holder's clock as a real duration of at most [`MAX_SLEEP`]:
/// the threads that sleep until a due time (the keeper's, the router's copier) sleep what
/// their clock says is left. An infinite wait (nothing due) or a nonsensical one (a clock
/// that answered NaN) is `MAX_SLEEP` too, never a spin.
pub(crate) fn ms_to_duration(ms: f64) -> Duration {
    Duration::try_from_secs_f64(ms / 1000.0)
        .unwrap_or(MAX_SLEEP)
        .min(MAX_SLEEP)
}

/// A clock that every process of one host reads alike and nobody sets: what the SQLite
/// store measures a lease's real life on, whatever the wall clocks of its writers say.
pub trait HostClock: Send + Sync {
    /// Names this clock: two readings compare only when their ids are equal.
    fn id(&self) -> &str;
    fn now_ms(&self) -> Result<i64>;
}

/// `CLOCK_MONOTONIC`, named by the boot id and the time namespace.
///
/// Every process of one boot shares it (a time namespace may shift it, hence the
/// namespace in the id). It is the clock every holder's gate runs on (`Instant`, and
/// `performance.now` in the reference), so the store's measure of a lease stops when the
/// holders' do: `CLOCK_BOOTTIME` would run on through a suspend that froze the holders, and
/// declare expired a lease whose holder's gate is still open after the resume.
#[derive(Debug)]
pub struct SystemHostClock {
    id: String,
}

impl SystemHostClock {
    /// The host's clock, or `None` where the boot cannot be named (no `/proc`).
    pub fn get() -> Option<&'static SystemHostClock> {
        static CLOCK: OnceLock<Option<SystemHostClock>> = OnceLock::new();
        CLOCK
            .get_or_init(|| {
                let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
                // Kernels before time namespaces have no link: one namespace, no shift.
                let namespace = std::fs::read_link("/proc/self/ns/time")
                    .map(|link| link.to_string_lossy().into_owned())
                    .unwrap_or_default();
                Some(SystemHostClock {
                    id: format!("{}/{namespace}", boot.trim()),
                })
            })
            .as_ref()
    }
}

impl HostClock for SystemHostClock {
    fn id(&self) -> &str {
        &self.id
    }

    fn now_ms(&self) -> Result<i64> {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes the struct it is given and nothing else.
        if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) } != 0 {
            return Err(Error::unavailable(format!(
                "the host's monotonic clock cannot be read: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(now.tv_sec * 1000 + now.tv_nsec / 1_000_000)
    }
}

/// The holder's clock: milliseconds on a clock that only moves forward.
pub trait MonotonicClock: Send + Sync {
    fn now_ms(&self) -> Result<f64>;
}

/// The operating system's real-time clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemWallClock;

impl WallClock for SystemWallClock {
    fn now_ms(&self) -> Result<i64> {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|_| Error::invalid_argument("the system clock is set before 1970"))?;
        i64::try_from(since.as_millis())
            .map_err(|_| Error::invalid_argument("the system clock is beyond the year 292 million"))
    }

    fn host_clock(&self) -> Option<&dyn HostClock> {
        SystemHostClock::get().map(|clock| clock as &dyn HostClock)
    }
}

/// The operating system's monotonic clock, in milliseconds since the first reading in this
/// process (like `performance.now`, whose origin is the process start).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemMonotonicClock;

impl MonotonicClock for SystemMonotonicClock {
    fn now_ms(&self) -> Result<f64> {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        Ok(ORIGIN.get_or_init(Instant::now).elapsed().as_secs_f64() * 1000.0)
    }
}

/// A clock that moves only when told to: the one tests and drills use for both roles.
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: AtomicI64,
}

impl ManualClock {
    pub fn new(start_ms: i64) -> ManualClock {
        ManualClock {
            now_ms: AtomicI64::new(start_ms),
        }
    }

    pub fn get(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }

    pub fn set(&self, now_ms: i64) {
        self.now_ms.store(now_ms, Ordering::SeqCst);
    }

    /// Moves the clock by `delta_ms` (which may be negative, to model a wall clock stepped
    /// back) and returns the new reading; refuses to overflow.
    pub fn advance(&self, delta_ms: i64) -> Result<i64> {
        let mut current = self.get();
        loop {
            let next = current
                .checked_add(delta_ms)
                .ok_or_else(|| Error::invalid_argument("the manual clock would overflow"))?;
            match self
                .now_ms
                .compare_exchange(current, next, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return Ok(next),
                Err(seen) => current = seen,
            }
        }
    }
}

impl WallClock for ManualClock {
    fn now_ms(&self) -> Result<i64> {
        Ok(self.get())
    }
}

impl MonotonicClock for ManualClock {
    fn now_ms(&self) -> Result<f64> {
        Ok(self.get() as f64)
    }
}

/// A wall clock that answers one fixed reading: what a host passes when it read its own
/// clock before handing the call to a worker thread.
#[derive(Debug, Clone, Copy)]
pub struct FixedWallClock(pub i64);

impl WallClock for FixedWallClock {
    fn now_ms(&self) -> Result<i64> {
        Ok(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(1_000);
        assert_eq!(WallClock::now_ms(&clock).unwrap(), 1_000);
        assert_eq!(clock.advance(250).unwrap(), 1_250);
        assert_eq!(MonotonicClock::now_ms(&clock).unwrap(), 1_250.0);
        clock.set(5);
        assert_eq!(clock.get(), 5);
        assert!(clock.advance(i64::MAX).is_err());
        assert_eq!(clock.get(), 5);
    }

    #[test]
    fn system_clocks_move_forward() {
        let a = SystemMonotonicClock.now_ms().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(SystemMonotonicClock.now_ms().unwrap() > a);
        assert!(SystemWallClock.now_ms().unwrap() > 1_600_000_000_000);
    }
}
