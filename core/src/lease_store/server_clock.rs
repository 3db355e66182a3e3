//! What a client can tell about its database server's clock from its own monotonic clock.
//!
//! The MySQL store decides expiry on the server's clock, so one clock serves every replica.
//! A step of that clock forward would make every other holder's lease look expired early:
//! a second writer while the first one's gate is open. Between two readings the server's
//! clock cannot truly advance more than the client's monotonic clock saw pass (plus
//! slewing), so a reading beyond that is a step, and expiry is decided on the bound instead:
//! no lease counts as expired before real time says so. Deadlines are still written on the
//! server's clock, the one every other client compares them with.
//!
//! What this sees and what it cannot:
//! * a forward step between two calls of this process, however long apart: caught;
//! * a backward step: it only makes leases live longer (a dead holder's tenant waits the
//!   step out, which costs availability, never integrity), so it is left alone;
//! * a process that starts after a step has no earlier reading and cannot know: it trusts
//!   the server, like every client of a shared clock must;
//! * once the server has been ahead for the longest TTL, every lease written before the
//!   step has run out in real time, so the bound gives way to the server's clock again.

use std::sync::Mutex;

use super::MAX_LEASE_TTL_MS;

/// The slack for reading the two clocks at different instants, and for NTP's slewing of
/// the server's clock (at most 500 ppm, taken as 0.1 %).
const SLACK_MS: f64 = 25.0;
const SLEW: f64 = 0.001;

#[derive(Debug, Default)]
pub(crate) struct ServerClockGuard {
    last: Mutex<Option<Reading>>,
}

#[derive(Debug, Clone, Copy)]
struct Reading {
    /// The time decisions used, on the server's scale.
    decided_ms: i64,
    /// The client's monotonic clock just before the server was asked.
    asked_at_ms: f64,
    /// Since when (client monotonic) the server has been ahead of the bound.
    ahead_since_ms: Option<f64>,
}

impl ServerClockGuard {
    /// The time expiry is decided on, given the server's reading `server_ms`, taken between
    /// `asked_at_ms` and `answered_at_ms` on the client's monotonic clock.
    pub(crate) fn expiry_time(&self, server_ms: i64, asked_at_ms: f64, answered_at_ms: f64) -> i64 {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let (mut decided, mut ahead_since) = (server_ms, None);
        if let Some(before) = *last {
            let elapsed = (answered_at_ms - before.asked_at_ms).max(0.0);
            let bound = before.decided_ms as f64 + elapsed * (1.0 + SLEW) + SLACK_MS;
            if server_ms as f64 > bound {
                let since = before.ahead_since_ms.unwrap_or(asked_at_ms);
                if asked_at_ms - since < MAX_LEASE_TTL_MS as f64 {
                    decided = bound.floor() as i64;
                    ahead_since = Some(since);
                }
            }
        }
        *last = Some(Reading {
            decided_ms: decided,
            asked_at_ms,
            ahead_since_ms: ahead_since,
        });
        decided
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_700_000_000_000;
    const HOUR: i64 = 3_600_000;

    #[test]
    fn a_true_clock_is_taken_as_it_reads() {
        let guard = ServerClockGuard::default();
        assert_eq!(guard.expiry_time(T, 0.0, 2.0), T);
        assert_eq!(guard.expiry_time(T + 1_000, 1_000.0, 1_002.0), T + 1_000);
        // A long pause between calls is no step.
        assert_eq!(guard.expiry_time(T + 301_000, 301_000.0, 301_001.0), T + 301_000);
    }

    #[test]
    fn a_forward_step_counts_only_the_time_that_really_passed() {
        let guard = ServerClockGuard::default();
        guard.expiry_time(T, 0.0, 1.0);
        let decided = guard.expiry_time(T + HOUR + 1_000, 1_000.0, 1_001.0);
        assert!((T + 1_000..T + 1_100).contains(&decided), "{}", decided - T);
        // It stays on real time call after call, not only once.
        let later = guard.expiry_time(T + HOUR + 6_000, 6_000.0, 6_001.0);
        assert!((T + 6_000..T + 6_100).contains(&later), "{}", later - T);
        // After the longest TTL every lease of the old scale has run out: the server's
        // clock is taken again.
        let ttl = MAX_LEASE_TTL_MS;
        assert_eq!(
            guard.expiry_time(T + HOUR + 1_000 + ttl, 1_000.0 + ttl as f64, 1_001.0 + ttl as f64),
            T + HOUR + 1_000 + ttl
        );
    }

    #[test]
    fn a_backward_step_is_taken_as_it_reads() {
        let guard = ServerClockGuard::default();
        guard.expiry_time(T, 0.0, 1.0);
        assert_eq!(guard.expiry_time(T - HOUR, 1_000.0, 1_001.0), T - HOUR);
        assert_eq!(
            guard.expiry_time(T - HOUR + 500, 1_500.0, 1_501.0),
            T - HOUR + 500
        );
    }
}
