//! How the answers of calls run off the JS thread come back to it: one libuv async handle per
//! JS environment, shared by every call, instead of napi's `JsDeferred`, which makes a
//! threadsafe function per promise, or one threadsafe function shared by all.
//!
//! A threadsafe function of its own for each call costs the JS thread, on the path of every
//! call awaited one at a time, a libuv handle opened and an environment cleanup hook
//! registered when the call is made, and both closed again, the handle through one more turn
//! of the loop, after it settles (making the promise took 2-3 us of a 90 us renewal on tmpfs
//! on our 2-CPU machines, against 0.5-0.8 us now). A shared one costs none of that, and
//! answers that arrive together (calls in flight on several lanes, or one lane's calls back
//! to back) settle in one wake of the loop instead of one each.
//!
//! Not a shared threadsafe function either: Node wakes the loop for one while it holds the
//! function's queue mutex, and the JS thread it wakes takes that mutex first thing. Woken on
//! the same CPU, the JS thread preempts the waker inside the wake, sleeps on the mutex, and
//! waits for the waker to run again and let go of it: two more context switches for every
//! answer, on the path of every call awaited one at a time (a profile of renewals awaited one
//! at a time on tmpfs found the pool thread 28 % of its time in the threadsafe function's call
//! and the JS thread a quarter of its time in the loop's callback asleep on that mutex). The
//! answers here queue in an inbox of ours, which the waking thread has let go of before it
//! wakes the loop with `uv_async_send`, which takes no lock.
//!
//! What `JsDeferred` guaranteed still holds: the handle is referenced only while some call
//! of its environment is pending, so a pending call keeps the event loop alive and an idle
//! addon does not; answers settle inside a callback scope, as a threadsafe function's do, so
//! the promise reactions and `process.nextTick` callbacks they lead to run before the loop
//! turns, and an exception in one is reported as uncaught; an environment that is torn down
//! (a worker thread ending) with calls still running is never called into afterwards, and
//! their answers are dropped off the JS thread.

use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard};

use napi::bindgen_prelude::ToNapiValue;
use napi::{check_status, sys, Env};

/// Builds a call's JS value on the JS thread, or the error to reject its promise with.
pub type Settle = Box<dyn FnOnce(Env) -> napi::Result<sys::napi_value> + Send>;

// libuv, as the Node process that loads the addon exports it (napi's own `uv_run` is bound the
// same way). A handle is opaque but for its first field, the `data` pointer of every handle.
extern "C" {
    fn uv_handle_size(kind: c_int) -> usize;
    fn uv_async_init(
        event_loop: *mut sys::uv_loop_s,
        handle: *mut UvHandle,
        wake: unsafe extern "C" fn(*mut UvHandle),
    ) -> c_int;
    fn uv_async_send(handle: *mut UvHandle) -> c_int;
    fn uv_close(handle: *mut UvHandle, closed: unsafe extern "C" fn(*mut UvHandle));
    fn uv_ref(handle: *mut UvHandle);
    fn uv_unref(handle: *mut UvHandle);
}

/// `UV_ASYNC` of libuv's `uv_handle_type`.
const UV_ASYNC: c_int = 1;

/// The head of a libuv handle.
#[repr(C)]
struct UvHandle {
    data: *mut c_void,
}

/// A `uv_async_t`, in memory of its own (libuv tells its size), freed once libuv has closed it.
struct AsyncHandle(*mut UvHandle);
// SAFETY: `uv_async_send` is the one libuv call that is safe from any thread, and the only one
// made off the JS thread; the handle is closed on the JS thread under the write lock, while
// every send holds the read lock.
unsafe impl Send for AsyncHandle {}
// SAFETY: as above.
unsafe impl Sync for AsyncHandle {}

impl AsyncHandle {
    /// Words of memory for one handle, as libuv sizes it.
    fn words() -> usize {
        // SAFETY: a pure function of the handle type.
        unsafe { uv_handle_size(UV_ASYNC) }.div_ceil(std::mem::size_of::<u64>())
    }

    fn allocate() -> *mut UvHandle {
        Box::into_raw(vec![0u64; AsyncHandle::words()].into_boxed_slice()).cast()
    }

    /// # Safety
    /// `handle` came from [`AsyncHandle::allocate`] and libuv no longer holds it.
    unsafe fn free(handle: *mut UvHandle) {
        let words = ptr::slice_from_raw_parts_mut(handle.cast::<u64>(), AsyncHandle::words());
        // SAFETY: the caller's promise; the slice is the one `allocate` made.
        drop(unsafe { Box::from_raw(words) });
    }
}

/// The answers of one JS environment's calls, and the way to wake its thread for them.
struct Completions {
    inbox: Mutex<Inbox>,
    /// Gone once the environment is torn down: nothing may wake it after that. Apart from the
    /// inbox, so that the thread that wakes the JS thread holds no lock that the JS thread
    /// takes: woken on the same CPU, it would otherwise wait for the waker to run again (with
    /// one lock for both, an answer took 21 us to reach the JS thread instead of 14).
    wake: RwLock<Option<AsyncHandle>>,
    /// Promises made and not yet settled; only the JS thread reads or writes it.
    pending: AtomicUsize,
    /// What the JS thread settles answers with; only the JS thread uses it.
    js: JsSide,
}

/// The environment, and the async context (with its resource) that answers settle in.
struct JsSide {
    env: sys::napi_env,
    context: sys::napi_async_context,
    resource: sys::napi_ref,
}
// SAFETY: made on the JS thread and used on it alone (in `drain`, which libuv runs there).
unsafe impl Send for JsSide {}
// SAFETY: as above.
unsafe impl Sync for JsSide {}

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

    fn wake(&self) -> RwLockReadGuard<'_, Option<AsyncHandle>> {
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
        // SAFETY: the caller's env and thread.
        let js = unsafe { JsSide::new(env) }?;
        let ours = Arc::new(Completions {
            inbox: Mutex::new(Inbox {
                answers: Vec::new(),
                woken: false,
                closed: false,
            }),
            wake: RwLock::new(None),
            pending: AtomicUsize::new(0),
            js,
        });
        // SAFETY: the caller's env and thread.
        let wake = unsafe { open_wake(env, &ours) }?;
        *ours.wake.write().unwrap_or_else(PoisonError::into_inner) = Some(AsyncHandle(wake));
        let hook = Arc::into_raw(ours.clone()).cast_mut().cast();
        let mut removal = ptr::null_mut();
        // SAFETY: `teardown` takes back the reference handed over here, exactly once.
        let hooked = unsafe { sys::napi_add_async_cleanup_hook(env, Some(teardown), hook, &mut removal) };
        if let Err(error) = check_status!(hooked) {
            // SAFETY: the hook was not registered, so the reference is still ours to close with.
            unsafe { teardown(ptr::null_mut(), hook) };
            return Err(error);
        }
        OURS.with_borrow_mut(|slot| *slot = Some(ours.clone()));
        Ok(ours)
    }

    /// Counts a promise made; the first one pending keeps the event loop alive.
    fn made(&self) {
        if self.pending.fetch_add(1, Ordering::Relaxed) == 0 {
            if let Some(wake) = &*self.wake() {
                // SAFETY: on the JS thread, which the handle belongs to.
                unsafe { uv_ref(wake.0) };
            }
        }
    }

    /// Counts a promise settled; the last one lets the event loop end.
    fn settled(&self) {
        if self.pending.fetch_sub(1, Ordering::Relaxed) == 1 {
            if let Some(wake) = &*self.wake() {
                // SAFETY: as in `made`.
                unsafe { uv_unref(wake.0) };
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
            // The read lock keeps the environment's teardown from closing the handle meanwhile.
            if let Some(wake) = &*self.wake() {
                // SAFETY: the handle is open (the teardown has not taken it).
                unsafe { uv_async_send(wake.0) };
            }
        }
    }

    /// Settles every answer queued, on the JS thread, inside one callback scope: the promise
    /// reactions they lead to run when it closes, before the loop goes on.
    fn drain(&self) {
        let answers = {
            let mut inbox = self.inbox();
            inbox.woken = false;
            std::mem::take(&mut inbox.answers)
        };
        if answers.is_empty() {
            return;
        }
        let env = self.js.env;
        let (mut handles, mut resource, mut scope) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        // SAFETY: libuv runs this on the environment's JS thread, with no JS on the stack.
        unsafe {
            let handles_open = sys::napi_open_handle_scope(env, &mut handles) == sys::Status::napi_ok;
            let scope_open = sys::napi_get_reference_value(env, self.js.resource, &mut resource)
                == sys::Status::napi_ok
                && sys::napi_open_callback_scope(env, resource, self.js.context, &mut scope)
                    == sys::Status::napi_ok;
            for answer in answers {
                settle_in_scope(env, answer);
                self.settled();
            }
            if scope_open {
                sys::napi_close_callback_scope(env, scope);
            }
            if handles_open {
                sys::napi_close_handle_scope(env, handles);
            }
        }
    }
}

impl JsSide {
    /// The async context answers settle in, named as a threadsafe function of ours would be.
    ///
    /// # Safety
    /// On the JS thread of `env`.
    unsafe fn new(env: sys::napi_env) -> napi::Result<JsSide> {
        let text = c"gotry-tenant-state call";
        let (mut name, mut object, mut resource, mut context) =
            (ptr::null_mut(), ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        // SAFETY: the caller's env and thread. The resource lives as long as the environment
        // (the reference is never released: the environment frees it as it ends).
        unsafe {
            check_status!(sys::napi_create_string_utf8(
                env,
                text.as_ptr(),
                text.count_bytes() as isize,
                &mut name,
            ))?;
            check_status!(sys::napi_create_object(env, &mut object))?;
            check_status!(sys::napi_create_reference(env, object, 1, &mut resource))?;
            check_status!(sys::napi_async_init(env, object, name, &mut context))?;
        }
        Ok(JsSide {
            env,
            context,
            resource,
        })
    }
}

/// The async handle, not referenced until a promise is pending. It holds a reference to
/// `completions` of its own, given back when libuv has closed it.
///
/// # Safety
/// On the JS thread of `env`.
unsafe fn open_wake(env: sys::napi_env, completions: &Arc<Completions>) -> napi::Result<*mut UvHandle> {
    let mut event_loop = ptr::null_mut();
    // SAFETY: the caller's env and thread.
    check_status!(unsafe { sys::napi_get_uv_event_loop(env, &mut event_loop) })?;
    let handle = AsyncHandle::allocate();
    // SAFETY: the loop is the environment's, on its thread; the handle's memory is its own.
    if unsafe { uv_async_init(event_loop, handle, woken) } != 0 {
        // SAFETY: libuv refused it, so it never held it.
        unsafe { AsyncHandle::free(handle) };
        return Err(napi::Error::from_reason(
            "cannot open the loop's wake for the addon's calls",
        ));
    }
    // SAFETY: the handle is open, and its `data` is ours to set.
    unsafe {
        (*handle).data = Arc::into_raw(completions.clone()).cast_mut().cast();
        uv_unref(handle);
    }
    Ok(handle)
}

/// libuv's callback when an answer woke the loop.
unsafe extern "C" fn woken(handle: *mut UvHandle) {
    // SAFETY: `data` is the reference that the handle holds until it is closed.
    let completions = unsafe { &*(*handle).data.cast::<Completions>() };
    // A panic must not unwind into libuv.
    let _ = catch_unwind(AssertUnwindSafe(|| completions.drain()));
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

/// What a closing handle holds until libuv lets go of it: its completions, and the removal of
/// the environment's cleanup hook, which Node waits for before it ends the environment.
struct Closing {
    completions: Arc<Completions>,
    removal: sys::napi_async_cleanup_hook_handle,
}

/// The environment is being torn down: its handle is closed so that no thread wakes it again,
/// and answers not yet settled are dropped. Node keeps the loop turning until the handle is
/// closed ([`closed`] removes the hook).
unsafe extern "C" fn teardown(removal: sys::napi_async_cleanup_hook_handle, hook: *mut c_void) {
    // SAFETY: the reference that `Completions::of` handed to the hook.
    let completions = unsafe { Arc::from_raw(hook.cast::<Completions>()) };
    let wake = completions
        .wake
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    let answers = {
        let mut inbox = completions.inbox();
        inbox.closed = true;
        std::mem::take(&mut inbox.answers)
    };
    drop(answers);
    // The thread may outlive its environment; a later one on it starts afresh.
    let _ = OURS.try_with(|ours| ours.borrow_mut().take());
    if let Some(AsyncHandle(handle)) = wake {
        // SAFETY: the handle is open, no other thread can reach it any more, and its `data` is
        // the reference handed over in `open_wake`, which `closed` now gives back.
        unsafe {
            let held = Arc::from_raw((*handle).data.cast::<Completions>());
            drop(held);
            (*handle).data = Box::into_raw(Box::new(Closing { completions, removal })).cast();
            uv_close(handle, closed);
        }
    } else if !removal.is_null() {
        // SAFETY: the hook's own removal, once.
        unsafe { sys::napi_remove_async_cleanup_hook(removal) };
    }
}

/// libuv has closed the handle: its memory, its reference and the hook are given back.
unsafe extern "C" fn closed(handle: *mut UvHandle) {
    // SAFETY: `teardown` left a `Closing` in `data`, and libuv holds the handle no longer.
    let Closing { completions, removal } = *unsafe { Box::from_raw((*handle).data.cast::<Closing>()) };
    // SAFETY: as above.
    unsafe { AsyncHandle::free(handle) };
    drop(completions);
    if !removal.is_null() {
        // SAFETY: the hook's own removal, once.
        unsafe { sys::napi_remove_async_cleanup_hook(removal) };
    }
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
        completions.made();
        let pending = Promise {
            deferred: Some(RawDeferred(deferred)),
            completions,
        };
        Ok((pending, promise))
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
