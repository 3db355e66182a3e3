//! The threads that run the addon's blocking calls, and the promises they settle.
//!
//! napi's `AsyncTask` hands each call to libuv's thread pool on its own, and for the SQLite
//! store that costs on every call. Its idle threads sleep, so each call first wakes one on
//! another CPU (25-50 us on the small virtual machines we measured, a sixth of a durable
//! commit); and since the store runs one call at a time on its one connection, calls in flight
//! together park pool threads on its mutex, each woken again in turn.
//!
//! So each store has a [`Lane`] here: its calls queue in call order, and the thread that takes
//! the lane runs them back to back, up to the store's [`LeaseStore::concurrent_calls`] at once
//! (one for SQLite; a MySQL store works on many). Lanes share a few threads, as many as libuv's
//! pool would have (`UV_THREADPOOL_SIZE`, 4 by default). A thread that runs out of calls looks
//! for the next one for [`SPIN`] before it sleeps, so a caller that awaits one call and then
//! makes the next finds a thread awake; only one thread spins at a time, and none on a machine
//! with one CPU, where spinning would only delay the caller.
//!
//! Everything else `AsyncTask` promises holds: a call owns its inputs, never touches a JS value
//! off the JS thread and settles on the JS thread (a napi [`Task`]'s `compute` runs here, its
//! `resolve` there); a pending call keeps the event loop alive (its promise's threadsafe
//! function is referenced), an idle addon does not; a panic rejects the call's promise.
//!
//! [`LeaseStore::concurrent_calls`]: gotry_tenant_state::LeaseStore::concurrent_calls

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, TryLockError};
use std::thread;
use std::time::{Duration, Instant};

use napi::bindgen_prelude::{Object, Task, ToNapiValue, TypeName};
use napi::{sys, Env, JsDeferred, ValueType};

/// How long a thread that ran out of calls keeps looking for the next before it sleeps: long
/// enough for a caller's turn (the event loop wakes, the promise reaction runs, the next call is
/// made), short enough that an idle process stops spending CPU at once.
const SPIN: Duration = Duration::from_micros(200);

/// Calls a thread runs from one lane before it lets a lane queued behind it go first.
const CALLS_PER_TURN: usize = 64;

/// The calls of one store, run in call order, at most `width` at once.
pub struct Lane {
    width: usize,
    state: Mutex<LaneState>,
}

#[derive(Default)]
struct LaneState {
    calls: VecDeque<Box<dyn Call>>,
    /// Threads working on this lane, or queued to.
    running: usize,
}

impl Lane {
    /// A lane for a store that works on `concurrent_calls` calls at once.
    pub fn new(concurrent_calls: usize) -> Arc<Lane> {
        Arc::new(Lane {
            width: concurrent_calls.clamp(1, pool().max_threads),
            state: Mutex::new(LaneState::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, LaneState> {
        // Calls run outside the lock and cannot poison it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(self: &Arc<Lane>, call: Box<dyn Call>) {
        let mut state = self.lock();
        state.calls.push_back(call);
        if state.running < self.width {
            state.running += 1;
            drop(state);
            pool().submit(self.clone());
        }
    }

    /// Runs up to [`CALLS_PER_TURN`] calls; whether the lane still has some for this thread.
    fn run_turn(&self) -> bool {
        for _ in 0..CALLS_PER_TURN {
            let next = {
                let mut state = self.lock();
                let next = state.calls.pop_front();
                if next.is_none() {
                    state.running -= 1;
                }
                next
            };
            match next {
                Some(call) => call.run(),
                None => return false,
            }
        }
        true
    }

    /// Rejects every queued call: no thread can be started to run them.
    fn refuse_all(&self, reason: &str) {
        let calls = {
            let mut state = self.lock();
            state.running = 0;
            std::mem::take(&mut state.calls)
        };
        for call in calls {
            call.refuse(napi::Error::from_reason(reason.to_owned()));
        }
    }
}

/// The threads, and the lanes waiting for one.
struct Pool {
    max_threads: usize,
    /// Whether a thread may spin: only when another CPU is there for the caller.
    spins: bool,
    state: Mutex<PoolState>,
    wake: Condvar,
    /// The length of `lanes`, for the spinning thread to watch without taking the lock.
    queued: AtomicUsize,
}

#[derive(Default)]
struct PoolState {
    lanes: VecDeque<Arc<Lane>>,
    /// Whether a thread is spinning; one is enough, and more would take CPUs from the rest.
    spinning: bool,
    threads: usize,
    idle: usize,
}

/// libuv's pool size: `UV_THREADPOOL_SIZE` when it is a number, within [1, 1024]; else 4.
fn max_threads(setting: Option<&str>) -> usize {
    setting
        .and_then(|value| value.trim().parse::<usize>().ok())
        .map_or(4, |threads| threads.clamp(1, 1024))
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        max_threads: max_threads(std::env::var("UV_THREADPOOL_SIZE").ok().as_deref()),
        spins: thread::available_parallelism().is_ok_and(|cpus| cpus.get() > 1),
        state: Mutex::new(PoolState::default()),
        wake: Condvar::new(),
        queued: AtomicUsize::new(0),
    })
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn submit(&'static self, lane: Arc<Lane>) {
        let mut state = self.lock();
        state.lanes.push_back(lane);
        self.queued.store(state.lanes.len(), Ordering::Release);
        // The spinning thread takes a lane unasked; a sleeping one counts as idle until it has
        // taken one, woken or not. Start a thread only for the lanes that neither will take.
        let spinning = usize::from(state.spinning);
        if state.idle > 0 && state.lanes.len() > spinning {
            self.wake.notify_one();
        }
        if state.lanes.len() <= state.idle + spinning || state.threads == self.max_threads {
            return;
        }
        match thread::Builder::new()
            .name("gotry-store".to_owned())
            .spawn(move || self.serve())
        {
            Ok(_) => state.threads += 1,
            // With no thread at all nothing would ever run the lane: refuse its calls instead.
            // Otherwise a running thread comes to it.
            Err(error) if state.threads == 0 => {
                let lanes = std::mem::take(&mut state.lanes);
                self.queued.store(0, Ordering::Release);
                drop(state);
                let reason = format!("cannot start a thread for store calls: {error}");
                lanes.iter().for_each(|lane| lane.refuse_all(&reason));
            }
            Err(_) => {}
        }
    }

    /// Waits up to [`SPIN`] for a lane to be queued, without sleeping, then takes the lock.
    /// When a lane came, the lock is taken by spinning too: the caller that queued it still
    /// holds the lock for a moment, and sleeping on it would cost a wake again (the caller's
    /// unlock would have to wake this thread).
    fn spin(&self) -> MutexGuard<'_, PoolState> {
        let start = Instant::now();
        while start.elapsed() < SPIN {
            if self.queued.load(Ordering::Acquire) > 0 {
                match self.state.try_lock() {
                    Ok(state) => return state,
                    Err(TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
                    Err(TryLockError::WouldBlock) => {}
                }
            }
            std::hint::spin_loop();
        }
        self.lock()
    }

    fn serve(&self) {
        let mut state = self.lock();
        loop {
            let next = state.lanes.pop_front();
            self.queued.store(state.lanes.len(), Ordering::Release);
            let Some(lane) = next else {
                if self.spins && !state.spinning {
                    state.spinning = true;
                    drop(state);
                    state = self.spin();
                    state.spinning = false;
                    if !state.lanes.is_empty() {
                        continue;
                    }
                }
                state.idle += 1;
                state = self.wake.wait(state).unwrap_or_else(PoisonError::into_inner);
                state.idle -= 1;
                continue;
            };
            drop(state);
            let more = lane.run_turn();
            state = self.lock();
            if more {
                state.lanes.push_back(lane);
                self.queued.store(state.lanes.len(), Ordering::Release);
            }
        }
    }
}

/// A napi task run on a lane; its JS value is a promise.
pub struct Pending<T: Task + 'static> {
    lane: Arc<Lane>,
    task: T,
}

impl<T: Task + 'static> Pending<T> {
    pub fn on(lane: &Arc<Lane>, task: T) -> Pending<T> {
        Pending {
            lane: lane.clone(),
            task,
        }
    }
}

impl<T: Task + 'static> TypeName for Pending<T> {
    fn type_name() -> &'static str {
        "Promise"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl<T: Task + 'static> ToNapiValue for Pending<T> {
    unsafe fn to_napi_value(raw_env: sys::napi_env, pending: Pending<T>) -> napi::Result<sys::napi_value> {
        let env = Env::from_raw(raw_env);
        let (deferred, promise) = env.create_deferred()?;
        pending.lane.push(Box::new(Queued {
            task: pending.task,
            deferred,
        }));
        // SAFETY: the promise was made on this env, on its thread, just above.
        unsafe { Object::to_napi_value(raw_env, promise) }
    }
}

type Settle<T> = Box<dyn FnOnce(Env) -> napi::Result<<T as Task>::JsValue>>;

/// A task and the promise it settles.
struct Queued<T: Task + 'static> {
    task: T,
    deferred: JsDeferred<T::JsValue, Settle<T>>,
}

/// A queued call, whatever its task's types.
trait Call: Send {
    /// Computes here, then settles the promise on the JS thread.
    fn run(self: Box<Self>);
    /// Rejects the promise without computing.
    fn refuse(self: Box<Self>, error: napi::Error);
}

impl<T: Task + 'static> Call for Queued<T> {
    fn run(self: Box<Self>) {
        let Queued { mut task, deferred } = *self;
        // A panic must not take the thread down and leave the promise pending forever.
        let output = catch_unwind(AssertUnwindSafe(|| task.compute())).unwrap_or_else(|_| {
            Err(napi::Error::from_reason(
                "internal error: a store call panicked; its promise is rejected",
            ))
        });
        deferred.resolve(Box::new(move |env| {
            let value = match output {
                Ok(output) => task.resolve(env, output),
                Err(error) => task.reject(env, error),
            };
            task.finally(env)?;
            value
        }));
    }

    fn refuse(self: Box<Self>, error: napi::Error) {
        self.deferred.reject(error);
    }
}
