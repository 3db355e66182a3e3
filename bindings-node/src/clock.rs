//! Clocks: the native manual clock, and the bridges to clocks written in JavaScript.
//!
//! A JS clock cannot simply be called from wherever the core happens to read it. The store
//! reads its wall clock on a pool thread while it holds the connection's mutex; if that
//! thread waited for the JS thread, a synchronous `history()` on the JS thread (waiting for the
//! same mutex) would deadlock both. So the two kinds of JS clock are bridged differently:
//!
//! - the store's `nowMs` is read on the JS thread when a call is made, and the reading travels
//!   with the task ([`with_wall_reading`]). The reference reads it a little later, inside the
//!   transaction; an earlier reading only errs on the safe side: an acquire sees a lease as
//!   unexpired a little longer and grants a deadline a little shorter.
//! - the holder's monotonic `clock.nowMs()` must be read fresh after an acquire returns (to see
//!   that the round trip consumed the grant), so [`HostMonotonicClock`] calls the function
//!   directly on the JS thread and, from a pool thread, through a threadsafe function while
//!   the pool thread waits. The core never holds a lock while it reads this clock, and the JS
//!   thread never waits for a pool thread that is reading it, so the wait cannot deadlock.

use std::cell::Cell;
use std::sync::{mpsc, Arc};
use std::thread::{self, ThreadId};
use std::time::Duration;

use gotry_tenant_state::clock::{MonotonicClock, WallClock};
use gotry_tenant_state::errors::{Error, Result};
use napi::bindgen_prelude::{Function, FunctionRef, Unknown};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Status};
use napi_derive::napi;

use crate::args::{self, safe_number};
use crate::errors::OrThrow;

/// A clock that moves only when told to; it serves as the store's wall clock
/// (`new SqliteLeaseStore({ nowMs: clock })`) and as a holder's monotonic clock
/// (`TenantLease.acquire({ clock })`) without any call into JavaScript.
#[napi]
pub struct ManualClock {
    pub(crate) inner: Arc<gotry_tenant_state::ManualClock>,
}

#[napi]
impl ManualClock {
    /// Starts at `startMs` (an integer, 0 when omitted).
    #[napi(constructor)]
    pub fn new(env: Env, start_ms: Option<Unknown<'_>>) -> napi::Result<ManualClock> {
        let start = args::optional_integer("startMs", start_ms.as_ref()).or_throw(&env)?;
        Ok(ManualClock {
            inner: Arc::new(gotry_tenant_state::ManualClock::new(start.unwrap_or(0))),
        })
    }

    /// The current reading in milliseconds.
    #[napi]
    pub fn now_ms(&self, env: Env) -> napi::Result<f64> {
        safe_number("the manual clock's reading", self.inner.get()).or_throw(&env)
    }

    /// Sets the reading (an integer; it may go back, to model a wall clock stepped back).
    #[napi]
    pub fn set(&self, env: Env, now_ms: Unknown<'_>) -> napi::Result<()> {
        let now = args::integer("nowMs", &now_ms).or_throw(&env)?;
        self.inner.set(now);
        Ok(())
    }

    /// Moves the reading by `deltaMs` (an integer) and returns the new reading.
    #[napi]
    pub fn advance(&self, env: Env, delta_ms: Unknown<'_>) -> napi::Result<f64> {
        let delta = args::integer("deltaMs", &delta_ms).or_throw(&env)?;
        let reading = self
            .inner
            .advance(delta)
            .and_then(|now| safe_number("the manual clock's reading", now));
        reading.or_throw(&env)
    }
}

thread_local! {
    /// The store clock reading that the JS thread took for the call now running on this thread.
    static WALL_READING: Cell<Option<i64>> = const { Cell::new(None) };
}

/// Runs `work` with `reading` as the answer of every [`HostWallClock`] on this thread.
pub fn with_wall_reading<T>(reading: Option<i64>, work: impl FnOnce() -> T) -> T {
    struct Restore(Option<i64>);
    impl Drop for Restore {
        fn drop(&mut self) {
            WALL_READING.set(self.0);
        }
    }
    let _restore = Restore(WALL_READING.replace(reading));
    work()
}

/// The store clock of a store whose `nowMs` is a JS function: it answers the reading that the
/// JS thread took when the call was made, and never calls into JavaScript itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostWallClock;

impl WallClock for HostWallClock {
    fn now_ms(&self) -> Result<i64> {
        WALL_READING.get().ok_or_else(|| Error::InvalidArgument {
            message: "the store's nowMs was not read for this call".to_owned(),
        })
    }
}

/// A raw env that is only ever used on the thread that created it (checked before each use).
struct OwnerEnv(napi::sys::napi_env);

// SAFETY: the pointer is dereferenced only on `HostMonotonicClock::owner`, the env's own thread.
unsafe impl Send for OwnerEnv {}
unsafe impl Sync for OwnerEnv {}

/// How often a pool thread waiting for the JS thread checks that the environment still exists.
const TEARDOWN_POLL: Duration = Duration::from_millis(100);

/// A holder's monotonic clock written in JavaScript (`() => number`).
pub struct HostMonotonicClock {
    owner: ThreadId,
    env: OwnerEnv,
    function: FunctionRef<(), Unknown<'static>>,
    /// Weak: a lease that is merely alive must not keep the process from exiting.
    threadsafe: ThreadsafeFunction<(), Unknown<'static>, (), Status, false, true>,
}

impl HostMonotonicClock {
    pub fn new(env: &Env, function: Function<'_, (), Unknown<'static>>) -> napi::Result<HostMonotonicClock> {
        let threadsafe = function
            .build_threadsafe_function::<()>()
            .callee_handled::<false>()
            .weak::<true>()
            .build()?;
        Ok(HostMonotonicClock {
            owner: thread::current().id(),
            env: OwnerEnv(env.raw()),
            function: function.create_ref()?,
            threadsafe,
        })
    }

    fn call_here(&self) -> Result<f64> {
        let env = Env::from_raw(self.env.0);
        let value = self
            .function
            .borrow_back(&env)
            .and_then(|function| function.call(()))
            .map_err(host_failure)?;
        reading(&value)
    }

    fn call_from_pool(&self) -> Result<f64> {
        let (sender, receiver) = mpsc::sync_channel(1);
        let status = self.threadsafe.call_with_return_value(
            (),
            ThreadsafeFunctionCallMode::NonBlocking,
            move |value: napi::Result<Unknown<'static>>, _env| {
                // The receiver only goes away after the JS side was torn down: nothing to tell.
                let _ = sender.send(value.map_err(host_failure).and_then(|value| reading(&value)));
                Ok(())
            },
        );
        if status != Status::Ok {
            return Err(gone());
        }
        wait_for_js(&receiver, || self.threadsafe.aborted()).unwrap_or_else(|| Err(gone()))
    }
}

impl MonotonicClock for HostMonotonicClock {
    fn now_ms(&self) -> Result<f64> {
        if thread::current().id() == self.owner {
            self.call_here()
        } else {
            self.call_from_pool()
        }
    }
}

/// Waits on a thread other than the JS thread for the answer that a threadsafe call sends;
/// `None` once `aborted` says the JS environment is gone and no answer will ever come.
pub(crate) fn wait_for_js<T>(
    receiver: &mpsc::Receiver<Result<T>>,
    aborted: impl Fn() -> bool,
) -> Option<Result<T>> {
    loop {
        match receiver.recv_timeout(TEARDOWN_POLL) {
            Ok(answer) => return Some(answer),
            Err(mpsc::RecvTimeoutError::Timeout) if !aborted() => continue,
            Err(_) => return None,
        }
    }
}

pub(crate) fn host_failure(error: napi::Error) -> Error {
    Error::Host(Box::new(error))
}

fn gone() -> Error {
    host_failure(napi::Error::from_reason(
        "the lease clock cannot be read: its JavaScript environment is shutting down",
    ))
}

/// A monotonic reading must be a number; whether it is a point in time (not NaN, not an
/// infinity) the core decides, for every reading alike: the gate closes (FENCED), anything
/// else refuses the reading.
fn reading(value: &Unknown<'_>) -> Result<f64> {
    match args::number(value)? {
        Some(now) => Ok(now),
        None => Err(Error::InvalidArgument {
            message: "the lease clock's nowMs() must return a number".to_owned(),
        }),
    }
}
