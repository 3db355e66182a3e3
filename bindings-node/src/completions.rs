//! How the answers of calls run off the JS thread come back to it: one threadsafe function
//! per JS environment, shared by every call, instead of napi's `JsDeferred`, which makes one
//! per promise.
//!
//! A threadsafe function of its own for each call costs the JS thread, on the path of every
//! call awaited one at a time, a libuv handle opened and an environment cleanup hook
//! registered when the call is made, and both closed again, the handle through one more turn
//! of the loop, after it settles (making the promise took 2-3 us of a 90 us renewal on tmpfs
//! on our 2-CPU machines, against 0.5-0.8 us now). A shared one costs none of that, and
//! answers that arrive together (calls in flight on several lanes, or one lane's calls back
//! to back) settle in one wake of the loop instead of one each.
//!
//! What `JsDeferred` guaranteed still holds: the function is referenced only while some call
//! of its environment is pending, so a pending call keeps the event loop alive and an idle
//! addon does not; an environment that is torn down (a worker thread ending) with calls still
//! running is never called into afterwards, and their answers are dropped off the JS thread.

use std::cell::RefCell;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard};

use napi::bindgen_prelude::ToNapiValue;
use napi::{check_status, sys, Env};

/// Builds a call's JS value on the JS thread, or the error to reject its promise with.
pub type Settle = Box<dyn FnOnce(Env) -> napi::Result<sys::napi_value> + Send>;

/// The answers of one JS environment's calls, and the way to wake its thread for them.
struct Completions {
    inbox: Mutex<Inbox>,
    /// Gone once the environment is torn down: nothing may call into it after that. Apart
    /// from the inbox, so that the thread that wakes the JS thread holds no lock that the JS
    /// thread takes: woken on the same CPU, it would otherwise wait for the waker to run again
    /// (with one lock for both, an answer took 21 us to reach the JS thread instead of 14).
    wake: RwLock<Option<RawFunction>>,
    /// Promises made and not yet settled; only the JS thread reads or writes it.
    pending: AtomicUsize,
}

struct Inbox {
    answers: Vec<Answer>,
    /// Whether a wake of the JS thread is on its way; answers queued meanwhile ride on it.
    woken: bool,
    /// Set when the environment is torn down: answers then have no promise to settle.
    closed: bool,
}

struct Answer {
    deferred: RawDeferred,
    settle: Settle,
}

struct RawFunction(sys::napi_threadsafe_function);
// SAFETY: calling a threadsafe function from any thread is what it is for; it is released on
// the JS thread under the write lock, while every call from elsewhere holds the read lock.
unsafe impl Send for RawFunction {}
// SAFETY: as above; the handle itself is never written through a shared reference.
unsafe impl Sync for RawFunction {}

struct RawDeferred(sys::napi_deferred);
// SAFETY: a deferred is only handed back to napi on its own environment's JS thread.
unsafe impl Send for RawDeferred {}

thread_local! {
    /// The completions of the environment whose JS thread this is (Node runs one per thread).
    static OURS: RefCell<Option<Arc<Completions>>> = const { RefCell::new(None) };
}

impl Completions {
    fn inbox(&self) -> MutexGuard<'_, Inbox> {
        // Pushing and draining cannot leave the inbox half-changed: a poisoned lock is usable.
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wake(&self) -> RwLockReadGuard<'_, Option<RawFunction>> {
        self.wake.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// This JS thread's completions, made on first use.
    ///
    /// # Safety
    /// On the JS thread of `env`.
    unsafe fn of(env: sys::napi_env) -> napi::Result<Arc<Completions>> {
        if let Some(ours) = OURS.with_borrow(|ours| ours.clone()) {
            return Ok(ours);
        }
        let ours = Arc::new(Completions {
            inbox: Mutex::new(Inbox {
                answers: Vec::new(),
                woken: false,
                closed: false,
            }),
            wake: RwLock::new(None),
            pending: AtomicUsize::new(0),
        });
        // SAFETY: the caller's env and thread.
        let wake = unsafe { open_wake(env, &ours) }?;
        *ours.wake.write().unwrap_or_else(PoisonError::into_inner) = Some(RawFunction(wake));
        let hook = Arc::into_raw(ours.clone()).cast_mut().cast();
        // SAFETY: `teardown` takes back the reference handed over here, exactly once.
        let hooked = unsafe { sys::napi_add_env_cleanup_hook(env, Some(teardown), hook) };
        if let Err(error) = check_status!(hooked) {
            // SAFETY: the hook was not registered, so the reference is still ours to drop.
            unsafe { teardown(hook) };
            return Err(error);
        }
        OURS.with_borrow_mut(|slot| *slot = Some(ours.clone()));
        Ok(ours)
    }

    /// Counts a promise made; the first one pending keeps the event loop alive.
    fn made(&self, env: sys::napi_env) -> napi::Result<()> {
        if self.pending.fetch_add(1, Ordering::Relaxed) == 0 {
            if let Some(wake) = &*self.wake() {
                // SAFETY: on the JS thread of `env`, which the function belongs to.
                check_status!(unsafe { sys::napi_ref_threadsafe_function(env, wake.0) })?;
            }
        }
        Ok(())
    }

    /// Counts a promise settled; the last one lets the event loop end.
    fn settled(&self, env: sys::napi_env) {
        if self.pending.fetch_sub(1, Ordering::Relaxed) == 1 {
            if let Some(wake) = &*self.wake() {
                // SAFETY: as in `made`. It cannot fail on its own thread.
                unsafe { sys::napi_unref_threadsafe_function(env, wake.0) };
            }
        }
    }

    fn send(&self, answer: Answer) {
        let wake_up = {
            let mut inbox = self.inbox();
            if inbox.closed {
                // The environment is gone, and the promise with it.
                return;
            }
            inbox.answers.push(answer);
            !std::mem::replace(&mut inbox.woken, true)
        };
        if wake_up {
            // The read lock keeps the environment's teardown from releasing the function
            // meanwhile. Non-blocking on a queue without a limit: it does not wait.
            if let Some(wake) = &*self.wake() {
                // SAFETY: the function is open (the teardown has not taken it).
                unsafe {
                    sys::napi_call_threadsafe_function(
                        wake.0,
                        ptr::null_mut(),
                        sys::ThreadsafeFunctionCallMode::nonblocking,
                    )
                };
            }
        }
    }
}

/// The shared threadsafe function, not referenced until a promise is pending. It holds a
/// reference to `completions` of its own, given back when Node finalizes it.
///
/// # Safety
/// On the JS thread of `env`.
unsafe fn open_wake(
    env: sys::napi_env,
    completions: &Arc<Completions>,
) -> napi::Result<sys::napi_threadsafe_function> {
    let text = c"gotry-tenant-state call";
    let mut name = ptr::null_mut();
    let mut wake = ptr::null_mut();
    let context = Arc::into_raw(completions.clone()).cast_mut().cast();
    // SAFETY: the caller's env and thread; on failure the function holds no reference.
    unsafe {
        let opened = check_status!(sys::napi_create_string_utf8(
            env,
            text.as_ptr(),
            text.count_bytes() as isize,
            &mut name,
        ))
        .and_then(|()| {
            check_status!(sys::napi_create_threadsafe_function(
                env,
                ptr::null_mut(),
                ptr::null_mut(),
                name,
                0,
                1,
                context,
                Some(finalize),
                context,
                Some(drain),
                &mut wake,
            ))
        })
        .and_then(|()| check_status!(sys::napi_unref_threadsafe_function(env, wake)));
        if let Err(error) = opened {
            if wake.is_null() {
                drop(Arc::from_raw(context.cast::<Completions>()));
            }
            return Err(error);
        }
    }
    Ok(wake)
}

/// Settles every answer queued, on the JS thread. With a null `env` Node is emptying the
/// function's queue while the environment tears down: nothing is left to settle.
unsafe extern "C" fn drain(env: sys::napi_env, _: sys::napi_value, context: *mut c_void, _: *mut c_void) {
    if env.is_null() {
        return;
    }
    // SAFETY: `context` is the reference that the function holds until it is finalized.
    let completions = unsafe { &*context.cast::<Completions>() };
    let answers = {
        let mut inbox = completions.inbox();
        inbox.woken = false;
        std::mem::take(&mut inbox.answers)
    };
    for answer in answers {
        // SAFETY: Node calls this on the environment's JS thread.
        unsafe { settle_in_scope(env, answer) };
        completions.settled(env);
    }
}

/// Settles one promise inside a handle scope of its own, so a burst of answers does not hold
/// every JS value it made until the last one is settled.
///
/// # Safety
/// On the JS thread of `env`, which made `answer`'s deferred.
unsafe fn settle_in_scope(env: sys::napi_env, answer: Answer) {
    let mut scope = ptr::null_mut();
    // SAFETY: the caller's env and thread.
    let opened = unsafe { sys::napi_open_handle_scope(env, &mut scope) } == sys::Status::napi_ok;
    // A panic must not unwind into Node, nor leave the promise pending.
    let value = catch_unwind(AssertUnwindSafe(|| (answer.settle)(Env::from_raw(env)))).unwrap_or_else(|_| {
        Err(napi::Error::from_reason(
            "internal error: building a native call's answer panicked; its promise is rejected",
        ))
    });
    // SAFETY: as above; the scope is closed once the promise no longer needs its values.
    unsafe {
        settle_deferred(env, answer.deferred.0, value);
        if opened {
            sys::napi_close_handle_scope(env, scope);
        }
    }
}

/// Resolves `deferred` with the value, or rejects it with the error's JS value (a JS error
/// that napi holds a reference to is handed back as it was thrown).
///
/// # Safety
/// On the JS thread of `env`, which made `deferred`; each deferred settled once.
pub unsafe fn settle_deferred(
    env: sys::napi_env,
    deferred: sys::napi_deferred,
    value: napi::Result<sys::napi_value>,
) {
    // SAFETY: the caller's env and thread.
    unsafe {
        match value {
            Ok(value) => {
                if sys::napi_resolve_deferred(env, deferred, value) == sys::Status::napi_ok {
                    return;
                }
                let error = napi::Error::from_reason("cannot resolve the call's promise");
                reject(env, deferred, error);
            }
            Err(error) => reject(env, deferred, error),
        }
    }
}

/// # Safety
/// As [`settle_deferred`].
unsafe fn reject(env: sys::napi_env, deferred: sys::napi_deferred, error: napi::Error) {
    // SAFETY: the caller's env and thread. Making the error's value can only fail with an
    // exception pending; then that exception is the reason.
    unsafe {
        let reason = match ToNapiValue::to_napi_value(env, error) {
            Ok(reason) => reason,
            Err(_) => {
                let mut thrown = ptr::null_mut();
                sys::napi_get_and_clear_last_exception(env, &mut thrown);
                thrown
            }
        };
        sys::napi_reject_deferred(env, deferred, reason);
    }
}

/// The environment is being torn down: its function is released so that no thread calls
/// into it again, and answers not yet settled are dropped.
unsafe extern "C" fn teardown(hook: *mut c_void) {
    // SAFETY: the reference that `Completions::of` handed to the hook.
    let completions = unsafe { Arc::from_raw(hook.cast::<Completions>()) };
    let wake = completions
        .wake
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if let Some(wake) = wake {
        // SAFETY: the function is open, and no other thread can reach it any more.
        unsafe { sys::napi_release_threadsafe_function(wake.0, sys::ThreadsafeFunctionReleaseMode::abort) };
    }
    let answers = {
        let mut inbox = completions.inbox();
        inbox.closed = true;
        std::mem::take(&mut inbox.answers)
    };
    drop(answers);
    // The thread may outlive its environment; a later one on it starts afresh.
    let _ = OURS.try_with(|ours| ours.borrow_mut().take());
}

/// Gives back the function's own reference to its completions.
unsafe extern "C" fn finalize(_: sys::napi_env, data: *mut c_void, _: *mut c_void) {
    // SAFETY: the reference that `open_wake` handed to the function.
    drop(unsafe { Arc::from_raw(data.cast::<Completions>()) });
}

/// A call's promise, settled from whatever thread the call ends on. One that is dropped
/// unsettled (its call could not run) rejects, so that it never keeps the loop alive.
pub struct Promise {
    deferred: Option<RawDeferred>,
    completions: Arc<Completions>,
}

impl Promise {
    /// A pending promise and its JS value.
    ///
    /// # Safety
    /// On the JS thread of `env`.
    pub unsafe fn new(env: sys::napi_env) -> napi::Result<(Promise, sys::napi_value)> {
        // SAFETY: the caller's env and thread.
        let completions = unsafe { Completions::of(env) }?;
        let (mut deferred, mut promise) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: as above.
        check_status!(unsafe { sys::napi_create_promise(env, &mut deferred, &mut promise) })?;
        let made = completions.made(env);
        let pending = Promise {
            deferred: Some(RawDeferred(deferred)),
            completions,
        };
        // A failed count drops `pending`, which rejects it: the promise is never returned.
        made.map(|()| (pending, promise))
    }

    /// Settles the promise on the JS thread with what `settle` makes there.
    pub fn settle(mut self, settle: Settle) {
        if let Some(deferred) = self.deferred.take() {
            self.completions.send(Answer { deferred, settle });
        }
    }

    /// Rejects the promise with `error`.
    pub fn reject(self, error: napi::Error) {
        self.settle(Box::new(move |_| Err(error)));
    }
}

impl Drop for Promise {
    fn drop(&mut self) {
        if let Some(deferred) = self.deferred.take() {
            let error = napi::Error::from_reason("internal error: a native call was dropped before it ran");
            self.completions.send(Answer {
                deferred,
                settle: Box::new(move |_| Err(error)),
            });
        }
    }
}
