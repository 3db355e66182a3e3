//! The threads that run the addon's blocking calls, and the promises they settle.
//!
//! napi's `AsyncTask` hands each call to libuv's thread pool on its own. The SQLite store runs
//! one call at a time on its one connection, so calls in flight together park pool threads on
//! its mutex, in no particular order, and each is woken again in turn when the one before it
//! is done: a wake on another CPU per call (25-50 us on the small virtual machines we measured,
//! a sixth of a durable commit), and the calls start in whatever order the threads get there.
//!
//! So each store has a [`Lane`] here: its calls queue in call order, and the thread that takes
//! the lane runs them back to back, up to the store's [`LeaseStore::concurrent_calls`] at once
//! (one for SQLite; a MySQL store works on many). Lanes share a few threads, as many as libuv's
//! pool would have (`UV_THREADPOOL_SIZE`, 4 by default). A thread that has just run a call
//! looks for the next one for [`LOOK_AGAIN`] before it sleeps, yielding the CPU between looks:
//! a host that awaits each call makes the next one about then, and waking a sleeping thread
//! for it cost more than the call's own work (renewals awaited one at a time on tmpfs: 15,900
//! calls/s against napi's `AsyncTask`'s 23,700 without the look, 24,500 against 22,400 with it;
//! durable ones, 1.79-2.06 x an fdatasync without, 1.57-1.66 x with). Looks that spun without
//! yielding were as fast there, but starved the threads doing the work when calls hop between
//! pools (a strict router call went from 0.7 to 2.6 ms). An idle thread never looks: a host that
//! calls once in a while pays up to that long per call in yields, one that calls back to back
//! pays nothing.
//!
//! A lease keeper's own calls ([`Lane::for_keeper`]) run on a set of threads of their own, as
//! many again: `remove` and `shutdown` wait for the renewals and releases that the kept
//! leases' handles queued on the store's lane before them. On the store's threads, as many
//! keepers in `remove` or `shutdown` at once as there are threads would each hold one while
//! the renewal they wait for has none (`test/threadpool-deadlock.test.js` hung so with
//! `UV_THREADPOOL_SIZE` 1 and 2). A store call never waits for a keeper call that has not
//! started (a keeper's release takes its place in the holder's queue only once it runs), so
//! the two sets cannot wait on each other in a cycle.
//!
//! Durable store and copy calls ([`Lane::for_copies`]) run on a further set of threads, as many
//! again: a copy of a large tenant root takes seconds, and lease renewals queued behind it on
//! shared threads could see their leases run out. A call that waits for JavaScript (a restore
//! with a JS `verify`, a copy through a JS `snapshot`) or for other calls of this addon (a
//! router's handoff, which waits for the tenant's calls to finish) runs on a thread of its own
//! ([`Pending::new`] without a lane): JavaScript may wait for any other call of this addon
//! meanwhile, and those calls may be queued on the shared threads, so it must hold none of
//! them.
//!
//! Why not napi's `AsyncTask` with one store's calls chained in JS instead (the baseline that
//! `bench/executor.mjs` weighs this against, through `NativeStore::bench_renew_on_libuv`):
//! on one store's throughput the two are within the machine's noise for SQLite, and a chain
//! only loses on MySQL because it serializes a store that works on many calls at once. The
//! threads are kept for what libuv's one shared pool cannot give: a keeper's `remove` and
//! `shutdown`, a copy that takes seconds and a call that waits for JavaScript would each hold
//! a pool thread while lease renewals wait behind them for one, up to the deadlock above when
//! as many wait at once as the pool has threads.
//!
//! Everything else `AsyncTask` promises holds: a call owns its inputs, never touches a JS value
//! off the JS thread and settles on the JS thread (a napi [`Task`]'s `compute` runs here, its
//! `resolve` there); a pending call keeps the event loop alive (the libuv async handle that
//! wakes the loop for answers is referenced while any call is pending, see `completions.rs`), an
//! idle addon does not; a panic rejects the call's promise.
//!
//! [`LeaseStore::concurrent_calls`]: gotry_tenant_state::LeaseStore::concurrent_calls

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread;
use std::time::Instant;

use gotry_tenant_state::call_begun_at;

use napi::bindgen_prelude::{Task, ToNapiValue};
use napi::{sys, Env};

use crate::completions::{settle_deferred, Promise};

/// Calls a thread runs from one lane before it lets a lane queued behind it go first.
const CALLS_PER_TURN: usize = 64;

/// The calls of one store, run in call order, at most `width` at once.
pub struct Lane {
    width: usize,
    /// Whether each call is one store call whose time in this queue is spent from its
    /// timeout ([`call_begun_at`]): a call queued behind a hung server's calls then fails
    /// when its own timeout is up, not that many timeouts later.
    queue_time_counts: bool,
    pool: &'static Pool,
    state: Mutex<LaneState>,
}

#[derive(Default)]
struct LaneState {
    calls: VecDeque<Box<dyn Call>>,
    /// Threads working on this lane, or queued to.
    running: usize,
}

impl Lane {
    /// A lane for the calls of a store that works on `concurrent_calls` calls at once, each
    /// of them one store call.
    pub fn for_store(concurrent_calls: usize) -> Arc<Lane> {
        Lane::on(&STORE_THREADS, concurrent_calls, true)
    }

    /// A lane on the store threads for calls that make several store calls, or wait between
    /// them (a router's), whose later store calls keep a timeout of their own.
    pub fn new(concurrent_calls: usize) -> Arc<Lane> {
        Lane::on(&STORE_THREADS, concurrent_calls, false)
    }

    /// A lane for a durable store and its copies, as wide as its threads: the core runs copies
    /// of different tenants in parallel and those of one tenant one at a time.
    pub fn for_copies() -> Arc<Lane> {
        Lane::on(&COPY_THREADS, usize::MAX, false)
    }

    /// A lane for one lease keeper's own calls (`acquire`, `remove`, `tick`, `shutdown`), in
    /// call order, on threads that no store call needs (see the module's notes).
    pub fn for_keeper() -> Arc<Lane> {
        Lane::on(&KEEPER_THREADS, 1, false)
    }

    fn on(threads: &'static Threads, concurrent_calls: usize, queue_time_counts: bool) -> Arc<Lane> {
        let pool = threads.pool();
        Arc::new(Lane {
            width: concurrent_calls.clamp(1, pool.max_threads),
            queue_time_counts,
            pool,
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
            self.pool.submit(self.clone());
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
    name: &'static str,
    max_threads: usize,
    state: Mutex<PoolState>,
    wake: Condvar,
}

#[derive(Default)]
struct PoolState {
    lanes: VecDeque<Arc<Lane>>,
    threads: usize,
    idle: usize,
    /// Idle threads still looking for a lane before they sleep: a lane submitted meanwhile
    /// needs no wake.
    looking: usize,
}

/// How long a thread that has just run a call looks for the next before it sleeps: longer
/// than the JS thread takes to settle an answer and make the next call awaited one at a time,
/// so that call starts without a wake of a sleeping thread.
const LOOK_AGAIN: std::time::Duration = std::time::Duration::from_micros(150);

/// libuv's pool size: `UV_THREADPOOL_SIZE` when it is a number, within [1, 1024]; else 4.
fn max_threads(setting: Option<&str>) -> usize {
    setting
        .and_then(|value| value.trim().parse::<usize>().ok())
        .map_or(4, |threads| threads.clamp(1, 1024))
}

/// A pool made on first use, its threads named `name`.
struct Threads {
    name: &'static str,
    pool: OnceLock<Pool>,
}

static STORE_THREADS: Threads = Threads {
    name: "gotry-store",
    pool: OnceLock::new(),
};

static KEEPER_THREADS: Threads = Threads {
    name: "gotry-keeper",
    pool: OnceLock::new(),
};

static COPY_THREADS: Threads = Threads {
    name: "gotry-copies",
    pool: OnceLock::new(),
};

impl Threads {
    fn pool(&'static self) -> &'static Pool {
        self.pool.get_or_init(|| Pool {
            name: self.name,
            max_threads: max_threads(std::env::var("UV_THREADPOOL_SIZE").ok().as_deref()),
            state: Mutex::new(PoolState::default()),
            wake: Condvar::new(),
        })
    }
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn submit(&'static self, lane: Arc<Lane>) {
        let mut state = self.lock();
        state.lanes.push_back(lane);
        // A sleeping thread counts as idle until it has taken a lane, woken or not: start a
        // thread only for the lanes that the idle ones will not take.
        let wake = state.idle > 0 && state.lanes.len() > state.looking;
        let mut refused = None;
        if state.lanes.len() > state.idle && state.threads < self.max_threads {
            match thread::Builder::new()
                .name(self.name.to_owned())
                .spawn(move || self.serve())
            {
                Ok(_) => state.threads += 1,
                // With no thread at all nothing would ever run the lane: refuse its calls
                // instead. Otherwise a running thread comes to it.
                Err(error) if state.threads == 0 => {
                    refused = Some((std::mem::take(&mut state.lanes), error));
                }
                Err(_) => {}
            }
        }
        drop(state);
        // After the unlock, or the woken thread would only wake to wait for the lock.
        if wake {
            self.wake.notify_one();
        }
        if let Some((lanes, error)) = refused {
            let reason = format!("cannot start a thread for store calls: {error}");
            lanes.iter().for_each(|lane| lane.refuse_all(&reason));
        }
    }

    /// Looks for a lane for [`LOOK_AGAIN`], yielding the CPU between looks (a look, not a busy
    /// wait: any other thread that wants the CPU gets it); the state locked again, with a lane
    /// in it if one came.
    fn look<'a>(&'a self, mut state: MutexGuard<'a, PoolState>) -> MutexGuard<'a, PoolState> {
        state.looking += 1;
        drop(state);
        let until = Instant::now() + LOOK_AGAIN;
        let mut state = loop {
            thread::yield_now();
            let state = self.lock();
            if !state.lanes.is_empty() || Instant::now() >= until {
                break state;
            }
        };
        state.looking -= 1;
        state
    }

    fn serve(&self) {
        let mut state = self.lock();
        let mut just_ran = false;
        loop {
            let Some(lane) = state.lanes.pop_front() else {
                // Idle while it looks or sleeps; a look that finds nothing ends in a sleep.
                state.idle += 1;
                state = if std::mem::take(&mut just_ran) {
                    self.look(state)
                } else {
                    self.wake.wait(state).unwrap_or_else(PoisonError::into_inner)
                };
                state.idle -= 1;
                continue;
            };
            drop(state);
            let more = lane.run_turn();
            just_ran = true;
            state = self.lock();
            if more {
                state.lanes.push_back(lane);
            }
        }
    }
}

/// A napi task run on a lane, or on a thread of its own; its JS value is a promise.
pub struct Pending<T: Task + 'static> {
    lane: Option<Arc<Lane>>,
    task: T,
    /// What `compute` would have given, when the call was answered on the JS thread.
    answered: Option<T::Output>,
}

impl<T: Task + 'static> Pending<T> {
    /// On `lane`, or with `None` on a thread of its own: for a call that waits for JavaScript,
    /// or for other calls of this addon, while it runs.
    pub fn new(lane: Option<&Arc<Lane>>, task: T) -> Pending<T> {
        Pending {
            lane: lane.cloned(),
            task,
            answered: None,
        }
    }

    /// A call already answered on the JS thread without waiting: its promise is settled
    /// before the call returns, with no thread woken and no wake of the event loop after.
    pub fn answered(task: T, output: T::Output) -> Pending<T> {
        Pending {
            lane: None,
            task,
            answered: Some(output),
        }
    }
}

impl Lane {
    /// Whether no call of this lane is queued or running: a call answered now, on the JS
    /// thread, then comes after every call made before it, as a queued one would.
    pub fn is_idle(&self) -> bool {
        let state = self.lock();
        state.running == 0 && state.calls.is_empty()
    }
}

/// The promise of a call answered on the JS thread, settled at once.
///
/// # Safety
/// On the JS thread of `raw_env`, inside a call from JavaScript.
unsafe fn settled_promise<T: Task>(
    raw_env: sys::napi_env,
    mut task: T,
    output: T::Output,
) -> napi::Result<sys::napi_value> {
    let env = Env::from_raw(raw_env);
    let value = task.resolve(env, output);
    task.finally(env)?;
    // The value is made before the promise, so that no deferred is left unsettled.
    // SAFETY: the caller's env and thread.
    let value = value.and_then(|value| unsafe { T::JsValue::to_napi_value(raw_env, value) });
    let (mut deferred, mut promise) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: the caller's env and thread; the deferred is settled exactly once, at once.
    unsafe {
        napi::check_status!(sys::napi_create_promise(raw_env, &mut deferred, &mut promise))?;
        settle_deferred(raw_env, deferred, value);
    }
    Ok(promise)
}

/// `lane`, or none when the call may wait for JavaScript or for other calls of this addon: it
/// must then hold no thread that those may need, and runs on one of its own.
pub fn unless_waiting(waits: bool, lane: &Arc<Lane>) -> Option<&Arc<Lane>> {
    (!waits).then_some(lane)
}

/// Runs `call` on a new thread, or rejects it when no thread can be started.
fn run_alone(call: Box<dyn Call>) {
    // Handed over through a slot: a failed spawn drops its closure, and the call in it must
    // still reject its promise.
    let slot = Arc::new(Mutex::new(Some(call)));
    let theirs = slot.clone();
    let spawned = thread::Builder::new()
        .name("gotry-waiting".to_owned())
        .spawn(move || {
            if let Some(call) = take(&theirs) {
                call.run();
            }
        });
    if let Err(error) = spawned {
        if let Some(call) = take(&slot) {
            call.refuse(napi::Error::from_reason(format!(
                "cannot start a thread for the call: {error}"
            )));
        }
    }
}

fn take(slot: &Mutex<Option<Box<dyn Call>>>) -> Option<Box<dyn Call>> {
    slot.lock().unwrap_or_else(PoisonError::into_inner).take()
}

impl<T: Task + 'static> ToNapiValue for Pending<T> {
    unsafe fn to_napi_value(raw_env: sys::napi_env, pending: Pending<T>) -> napi::Result<sys::napi_value> {
        if let Some(output) = pending.answered {
            // SAFETY: napi converts a call's return value on the JS thread, inside the call.
            return unsafe { settled_promise(raw_env, pending.task, output) };
        }
        // SAFETY: napi converts a call's return value on the JS thread, inside the call.
        let (promise, value) = unsafe { Promise::new(raw_env) }?;
        let asked = Instant::now();
        let call = Box::new(Queued {
            task: pending.task,
            promise,
            begun: pending
                .lane
                .as_ref()
                .filter(|lane| lane.queue_time_counts)
                .map(|_| asked),
        });
        match pending.lane {
            Some(lane) => lane.push(call),
            None => run_alone(call),
        }
        Ok(value)
    }
}

/// A task and the promise it settles.
struct Queued<T: Task + 'static> {
    task: T,
    promise: Promise,
    /// When JavaScript made the call, for a lane whose queue time counts.
    begun: Option<Instant>,
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
        let Queued {
            mut task,
            promise,
            begun,
        } = *self;
        let compute = || match begun {
            Some(begun) => call_begun_at(begun, || task.compute()),
            None => task.compute(),
        };
        // A panic must not take the thread down and leave the promise pending forever.
        let output = catch_unwind(AssertUnwindSafe(compute)).unwrap_or_else(|_| {
            Err(napi::Error::from_reason(
                "internal error: a native call panicked; its promise is rejected",
            ))
        });
        promise.settle(Box::new(move |env| {
            let value = match output {
                Ok(output) => task.resolve(env, output),
                Err(error) => task.reject(env, error),
            };
            task.finally(env)?;
            // SAFETY: settled on the JS thread of `env`.
            value.and_then(|value| unsafe { T::JsValue::to_napi_value(env.raw(), value) })
        }));
    }

    fn refuse(self: Box<Self>, error: napi::Error) {
        self.promise.reject(error);
    }
}
