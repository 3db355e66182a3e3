//! The keeper's rounds: the renewal thread, its schedule, and one round's scan, batches and
//! bookkeeping. The API and the events are in the parent module.

use super::*;

/// The keeper's thread: a round, then sleep until the next is due, until told to stop.
pub(super) fn run(shared: Arc<Shared>) {
    /// Marks the thread ended however it ends, so that shutdown never waits for a thread
    /// that is gone.
    struct Running<'a>(&'a Shared);
    impl Drop for Running<'_> {
        fn drop(&mut self) {
            lock(&self.0.schedule).running = false;
            self.0.wake.notify_all();
        }
    }
    let _running = Running(&shared);
    loop {
        lock(&shared.schedule).pending_ms = f64::INFINITY;
        // A store or clock that panics must not end the renewals of every other lease.
        let round = catch_unwind(AssertUnwindSafe(|| shared.tick())).unwrap_or_else(|panic| {
            let detail = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(Error::unavailable(format!("a renewal round panicked: {detail}")))
        });
        let next_ms = match round {
            Ok(report) => report.next_due_ms.unwrap_or(f64::INFINITY),
            Err(_) if shared.stopped.load(Ordering::SeqCst) => return,
            Err(error) => {
                let leases = lock(&shared.entries).len();
                shared.emit(vec![KeeperEvent::RenewFailed { error, leases }]);
                // The clock may be what failed: retry after a quarter interval of real time.
                match read_monotonic(&*shared.clock) {
                    Ok(now) => now + shared.retry_delay_ms(),
                    Err(_) => {
                        std::thread::sleep(ms_to_duration(shared.retry_delay_ms()));
                        continue;
                    }
                }
            }
        };
        if !shared.sleep_until(next_ms) {
            return;
        }
    }
}

impl Shared {
    pub(super) fn retry_delay_ms(&self) -> f64 {
        self.interval_ms / 4.0
    }

    pub(super) fn key_of(&self) -> usize {
        self as *const Shared as usize
    }

    pub(super) fn in_own_handler(&self) -> bool {
        let me = self.key_of();
        EMITTING.with(|stack| stack.borrow().contains(&me))
    }

    pub(super) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        lock(&self.schedule).stop = true;
        self.wake.notify_all();
    }

    /// Asks the thread to wake by `at_ms` at the latest.
    pub(super) fn wake_by(&self, at_ms: f64) {
        let mut schedule = lock(&self.schedule);
        schedule.pending_ms = schedule.pending_ms.min(at_ms);
        if at_ms < schedule.planned_ms {
            schedule.planned_ms = at_ms;
            self.wake.notify_all();
        }
    }

    /// Sleeps until `next_ms` (or an earlier time asked for meanwhile); false when told to stop.
    pub(super) fn sleep_until(&self, next_ms: f64) -> bool {
        {
            let mut schedule = lock(&self.schedule);
            schedule.planned_ms = next_ms.min(schedule.pending_ms);
        }
        loop {
            // A stopped keeper never calls a host clock again.
            if lock(&self.schedule).stop {
                return false;
            }
            // Read outside the lock: a host clock may take a host lock of its own.
            let now = read_monotonic(&*self.clock);
            let schedule = lock(&self.schedule);
            if schedule.stop {
                return false;
            }
            let Ok(now) = now else {
                // The round will meet the same failure and report it.
                return true;
            };
            if now >= schedule.planned_ms {
                return true;
            }
            let wait = ms_to_duration(schedule.planned_ms - now);
            drop(self.wake.wait_timeout(schedule, wait));
        }
    }

    /// Whether the keeper's clock is still before `deadline_ms`; false without a reading.
    pub(super) fn before(&self, deadline_ms: &Result<f64>) -> bool {
        match (deadline_ms, read_monotonic(&*self.clock)) {
            (Ok(deadline), Ok(now)) => now < *deadline,
            _ => false,
        }
    }

    /// Waits for the thread to leave its loop until the deadline; true if it did.
    pub(super) fn wait_stopped(&self, deadline_ms: &Result<f64>) -> bool {
        loop {
            // The clock is read outside the lock, as everywhere: a host clock may take a
            // host lock of its own, and the keeper's thread takes this one.
            let now = read_monotonic(&*self.clock);
            let schedule = lock(&self.schedule);
            if !schedule.running {
                return true;
            }
            let remaining = match (deadline_ms, now) {
                (Ok(deadline), Ok(now)) if now < *deadline => ms_to_duration(deadline - now),
                _ => return false,
            };
            if remaining.is_zero() {
                return false;
            }
            drop(self.wake.wait_timeout(schedule, remaining));
        }
    }

    /// No call of the handler starts after this returns, and none is running on another
    /// thread.
    pub(super) fn close_handler(&self) {
        self.handler_closed.store(true, Ordering::SeqCst);
        if !self.in_own_handler() {
            // Waits for a call in progress, then drops the handler and what it holds.
            drop(lock(&self.handler).take());
        }
        // Inside the handler the lock is ours already: emit drops the handler on its way out.
    }

    pub(super) fn emit(&self, events: Vec<KeeperEvent>) {
        if events.is_empty() {
            return;
        }
        let mut handler = lock(&self.handler);
        let me = self.key_of();
        EMITTING.with(|stack| stack.borrow_mut().push(me));
        if let Some(call) = handler.as_ref() {
            for event in events {
                if self.handler_closed.load(Ordering::SeqCst) {
                    break;
                }
                // The handler's panic is the host's bug; the renewals of every lease go on.
                let _ = catch_unwind(AssertUnwindSafe(|| call(event)));
            }
        }
        EMITTING.with(|stack| stack.borrow_mut().pop());
        if self.handler_closed.load(Ordering::SeqCst) {
            drop(handler.take());
        }
    }

    pub(super) fn tick(&self) -> Result<TickReport> {
        if self.in_own_handler() {
            return Err(Error::invalid_argument(
                "a keeper's round cannot run from inside its own event handler",
            ));
        }
        let _round = lock(&self.round);
        if self.stopped.load(Ordering::SeqCst) {
            return Err(shut_down());
        }
        let now = read_monotonic(&*self.clock)?;
        let started = std::time::Instant::now();
        let mut events = Vec::new();
        let due = self.scan(now, &mut events);
        let mut report = TickReport::default();
        let outcomes = self.renew_all(&due, &mut report, &mut events);
        // The answers are in the gates already; a clock failing now only makes the
        // bookkeeping below a little early.
        let after = read_monotonic(&*self.clock).unwrap_or(now);
        report.next_due_ms = self.record(&due, outcomes, after, &mut report, &mut events);
        crate::metrics::keeper_round(started.elapsed());
        self.emit(events);
        Ok(report)
    }

    /// Drops leases closed through their handles, tells fences that passed or reopened,
    /// and picks the leases of this round (none unless one is due), most urgent first.
    pub(super) fn scan(&self, now: f64, events: &mut Vec<KeeperEvent>) -> Vec<Arc<TenantLease>> {
        let mut entries = lock(&self.entries);
        let mut any_due = false;
        entries.retain(|key, entry| {
            let (closed, fence_at_ms) = entry.lease.gate_state();
            if closed.is_some() {
                return false;
            }
            entry.fence_at_ms = fence_at_ms;
            // The gate's own test: fenced once the clock reaches the fence.
            let fenced = now >= fence_at_ms;
            if fenced != entry.fenced_reported {
                entry.fenced_reported = fenced;
                let (key, epoch) = (key.clone(), entry.lease.epoch());
                events.push(if fenced {
                    crate::metrics::fenced(crate::FenceReason::LeaseExpiredLocally);
                    KeeperEvent::FencedLocally { key, epoch }
                } else {
                    // Renewed through its own handle since the keeper saw it fenced.
                    KeeperEvent::Resumed { key, epoch }
                });
            }
            any_due |= entry.next_at_ms <= now;
            true
        });
        if !any_due {
            return Vec::new();
        }
        let horizon = now + self.interval_ms / 2.0;
        let mut due: Vec<(f64, Arc<TenantLease>)> = entries
            .values()
            .filter(|entry| entry.next_at_ms <= horizon)
            .map(|entry| (entry.next_at_ms, Arc::clone(&entry.lease)))
            .collect();
        due.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        due.into_iter().map(|(_, lease)| lease).collect()
    }

    /// Sends the round in batches; stops at the first batch the store fails, leaving the
    /// rest to be retried.
    pub(super) fn renew_all(
        &self,
        due: &[Arc<TenantLease>],
        report: &mut TickReport,
        events: &mut Vec<KeeperEvent>,
    ) -> Vec<Outcome> {
        let mut outcomes = Vec::with_capacity(due.len());
        for batch in due.chunks(self.max_batch) {
            if self.stopped.load(Ordering::SeqCst) {
                break;
            }
            report.batches += 1;
            crate::metrics::keeper_batch(batch.len());
            match self.renew_batch(batch, events) {
                Ok(answers) => outcomes.extend(answers),
                Err(error) => {
                    events.push(KeeperEvent::RenewFailed {
                        error,
                        leases: due.len() - outcomes.len(),
                    });
                    break;
                }
            }
        }
        // Whatever was not answered is tried again.
        outcomes.resize_with(due.len(), || Outcome::Retry);
        outcomes
    }

    pub(super) fn renew_batch(
        &self,
        batch: &[Arc<TenantLease>],
        events: &mut Vec<KeeperEvent>,
    ) -> Result<Vec<Outcome>> {
        let sent_at_ms = read_monotonic(&*self.clock)?;
        let keys: Vec<(&str, i64)> = batch.iter().map(|lease| (lease.key(), lease.epoch())).collect();
        let answers = self.store.renew_batch(&self.replica_id, self.ttl_ms, &keys)?;
        if answers.len() != batch.len() {
            return Err(Error::unavailable(format!(
                "the store answered {} renewals for a batch of {}",
                answers.len(),
                batch.len()
            )));
        }
        Ok(batch
            .iter()
            .zip(answers)
            .map(|(lease, answer)| match lease.apply_renewal(sent_at_ms, answer) {
                Ok(()) => Outcome::Renewed { sent_at_ms },
                Err(error @ Error::LeaseLost { .. }) => {
                    events.push(KeeperEvent::Lost {
                        key: lease.key().to_owned(),
                        epoch: lease.epoch(),
                        error,
                    });
                    Outcome::Lost
                }
                Err(Error::Fenced { .. }) => Outcome::Closed,
                Err(error) => {
                    events.push(KeeperEvent::RenewFailed { error, leases: 1 });
                    Outcome::Retry
                }
            })
            .collect())
    }

    /// Files the round's outcomes and returns when the next round is due.
    pub(super) fn record(
        &self,
        due: &[Arc<TenantLease>],
        outcomes: Vec<Outcome>,
        now: f64,
        report: &mut TickReport,
        events: &mut Vec<KeeperEvent>,
    ) -> Option<f64> {
        let mut entries = lock(&self.entries);
        for (lease, outcome) in due.iter().zip(outcomes) {
            match outcome {
                Outcome::Renewed { .. } => report.renewed += 1,
                Outcome::Lost => report.lost += 1,
                Outcome::Retry => report.failed += 1,
                Outcome::Closed => {}
            }
            // The host may have removed the key, or acquired it again, while the batch was out.
            let entry = match entries.get_mut(lease.key()) {
                Some(entry) if Arc::ptr_eq(&entry.lease, lease) => entry,
                _ => continue,
            };
            match outcome {
                Outcome::Renewed { sent_at_ms } => {
                    entry.next_at_ms = sent_at_ms + self.interval_ms;
                    // The gate's own fence is needed only to tell a resumption; otherwise
                    // what this grant guarantees is enough to plan the next wake-up (it is
                    // later than the next renewal either way) and spares a lock per lease.
                    entry.fence_at_ms = if entry.fenced_reported {
                        lease.gate_state().1
                    } else {
                        sent_at_ms + (self.ttl_ms - self.margin_ms) as f64
                    };
                    if entry.fenced_reported && entry.fence_at_ms > now {
                        entry.fenced_reported = false;
                        events.push(KeeperEvent::Resumed {
                            key: lease.key().to_owned(),
                            epoch: lease.epoch(),
                        });
                    }
                }
                Outcome::Retry => entry.next_at_ms = now + self.retry_delay_ms(),
                Outcome::Lost | Outcome::Closed => {
                    entries.remove(lease.key());
                }
            }
        }
        entries
            .values()
            .map(|entry| {
                if entry.fenced_reported {
                    entry.next_at_ms
                } else {
                    // Wake at the fence too, to tell it when it passes.
                    entry.next_at_ms.min(entry.fence_at_ms)
                }
            })
            .min_by(f64::total_cmp)
    }
}
