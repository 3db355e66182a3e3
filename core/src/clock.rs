//! The two clocks of the layer, both injectable.
//!
//! The store decides expiry on its own wall clock (integer milliseconds since the Unix
//! epoch, as the reference's `Date.now`). A holder measures its fence on its own monotonic
//! clock (fractional milliseconds, as `performance.now`), which never jumps with NTP.
//! Host clocks (a JS function, a Python callable) may fail, hence the `Result`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::errors::{Error, Result};

/// The store's clock: integer milliseconds since the Unix epoch.
pub trait WallClock: Send + Sync {
    fn now_ms(&self) -> Result<i64>;
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
