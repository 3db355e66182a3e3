//! When a store call must have answered by: one deadline per call, from its start.
//!
//! A store's timeout bounds a whole call, not each wait inside it: a holder sizes its
//! renewals by it, and a call that makes several round trips (or queues behind other calls)
//! must not take several timeouts. A host that queues calls before they reach the store
//! says when each call began with [`call_begun_at`], so that the time spent in its queue is
//! spent from the same budget.

use std::cell::Cell;
use std::time::{Duration, Instant};

thread_local! {
    /// When the store calls of the current [`call_begun_at`] began, if one runs.
    static BEGUN: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Runs `f` with the store calls it makes counted as begun at `begun` (a host that queued
/// the call, as the Node addon queues calls per store, passes the instant it was asked, so
/// that its queue time is spent from the call's timeout rather than added to it): a store
/// call's deadline is then `begun + its timeout`, not `now + its timeout`. Nests: the
/// earliest instant wins.
pub fn call_begun_at<T>(begun: std::time::Instant, f: impl FnOnce() -> T) -> T {
    /// Puts the outer instant back however `f` ends, a panic included: a thread of a pool
    /// must not carry one call's start into the next.
    struct Restore(Option<Instant>);
    impl Drop for Restore {
        fn drop(&mut self) {
            BEGUN.set(self.0);
        }
    }
    let outer = BEGUN.get();
    let _restore = Restore(outer);
    BEGUN.set(Some(outer.map_or(begun, |outer| outer.min(begun))));
    f()
}

/// The instant by which a store call must have answered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline(Instant);

impl Deadline {
    /// `timeout` after the call began: now, unless [`call_begun_at`] says earlier.
    pub(crate) fn after(timeout: Duration) -> Deadline {
        let begun = BEGUN.get().unwrap_or_else(Instant::now);
        // Beyond what an Instant holds, a century will do.
        Deadline(
            begun
                .checked_add(timeout)
                .unwrap_or_else(|| begun + Duration::from_secs(100 * 365 * 86_400)),
        )
    }

    /// This deadline, or `most` from now when that is sooner.
    pub(crate) fn capped(&self, most: Duration) -> Deadline {
        Deadline(self.0.min(Instant::now() + most))
    }

    /// The time left, or `None` when less than a millisecond is: no wait (a socket timeout,
    /// SQLite's busy timeout) can be set shorter, and zero would mean "no limit" to some.
    pub(crate) fn left(&self) -> Option<Duration> {
        self.0
            .checked_duration_since(Instant::now())
            .filter(|left| *left >= Duration::from_millis(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_start_wins_and_is_restored_after() {
        let timeout = Duration::from_secs(10);
        let now = Instant::now();
        let early = now - Duration::from_secs(4);
        let earlier = now - Duration::from_secs(8);
        assert!(Deadline::after(timeout).left().unwrap() > Duration::from_secs(9));
        call_begun_at(early, || {
            let left = Deadline::after(timeout).left().unwrap();
            assert!(left <= Duration::from_secs(6), "{left:?}");
            call_begun_at(earlier, || {
                assert!(Deadline::after(timeout).left().unwrap() <= Duration::from_secs(2));
            });
            // A later start inside does not extend the deadline.
            call_begun_at(now, || {
                assert!(Deadline::after(timeout).left().unwrap() <= Duration::from_secs(6));
            });
            assert!(Deadline::after(timeout).left().unwrap() <= Duration::from_secs(6));
        });
        assert!(Deadline::after(timeout).left().unwrap() > Duration::from_secs(9));
        assert!(call_begun_at(now - timeout, || Deadline::after(timeout).left()).is_none());
    }

    #[test]
    fn a_panic_inside_restores_the_start() {
        let long_ago = Instant::now() - Duration::from_secs(60);
        let caught = std::panic::catch_unwind(|| call_begun_at(long_ago, || panic!("inside")));
        assert!(caught.is_err());
        assert!(Deadline::after(Duration::from_secs(10)).left().is_some());
    }
}
