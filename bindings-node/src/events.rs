//! Events that the core tells from its own threads (a keeper's renewals, a router's copier,
//! whichever thread ends a call or a handoff), carried to the JS thread.
//!
//! Events cross threads through a queue, not as arguments of a threadsafe call: the core's
//! handler only queues the event and wakes the JS thread, never waiting for the event loop
//! (so neither do the renewals or copies that told it), and the JS thread drains the queue
//! (`takeEvents`). The JS layer drains it too right after a call that may have told events
//! settles (a keeper's `tick` or `shutdown`, a router's `handoff` or `close`), so those
//! events reach the host before that call's promise settles. The wake-up is weak: it never
//! keeps the process alive.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use napi::bindgen_prelude::{Function, Unknown};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;

/// The events told since the JS thread last looked.
pub struct EventQueue<E> {
    pending: Mutex<VecDeque<E>>,
    /// Set while a wake-up is on its way, so a burst of events costs one crossing.
    scheduled: AtomicBool,
}

impl<E> EventQueue<E> {
    fn pending(&self) -> MutexGuard<'_, VecDeque<E>> {
        // Pushing and draining cannot leave the queue half-changed: a poisoned lock is usable.
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Every queued event, oldest first.
    pub fn drain(&self) -> Vec<E> {
        // Cleared before taking: an event queued after this line schedules a new wake-up.
        self.scheduled.store(false, Ordering::SeqCst);
        self.pending().drain(..).collect()
    }
}

/// What the core's handler holds: the queue, and the wake-up of the JS thread, which holds
/// the host's function.
pub struct Forwarder<E> {
    queue: Arc<EventQueue<E>>,
    /// Weak: a waiting wake-up does not keep the event loop alive.
    wake: ThreadsafeFunction<(), Unknown<'static>, (), Status, false, true>,
}

impl<E> Forwarder<E> {
    /// A forwarder that wakes the JS thread by calling `on_wake` (no argument), and the queue
    /// the JS thread drains.
    pub fn new(
        on_wake: &Function<'_, (), Unknown<'static>>,
    ) -> napi::Result<(Forwarder<E>, Arc<EventQueue<E>>)> {
        let queue = Arc::new(EventQueue {
            pending: Mutex::new(VecDeque::new()),
            scheduled: AtomicBool::new(false),
        });
        let wake = on_wake
            .build_threadsafe_function::<()>()
            .callee_handled::<false>()
            .weak::<true>()
            .build()?;
        Ok((
            Forwarder {
                queue: Arc::clone(&queue),
                wake,
            },
            queue,
        ))
    }

    /// Queues `event` and wakes the JS thread unless a wake-up is already on its way.
    pub fn forward(&self, event: E) {
        self.queue.pending().push_back(event);
        if !self.queue.scheduled.swap(true, Ordering::SeqCst) {
            // Fails only while the JS environment is shutting down: nobody is left to tell.
            let _ = self.wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}
