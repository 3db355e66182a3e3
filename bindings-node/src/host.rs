//! JavaScript functions that the core calls from threads of the addon: a restore's `verify`
//! and a copy's `snapshot`, for `EpochCopies` and for the router alike.
//!
//! The JS layer wraps every such host function so that it always returns a promise (a throw,
//! a plain value and a malformed verdict all arrive as a settled promise). [`HostCall`] calls
//! it through a weak threadsafe function, attaches to the promise on the JS thread, and waits
//! for it on the calling thread. A call that uses it therefore runs on a thread that may wait
//! for JavaScript (see `executor.rs`), never on the JS thread itself, where the wait would
//! block the very loop that has to answer.

use std::path::Path;
use std::sync::{mpsc, Arc};

use gotry_tenant_state::errors::{Error, Result};
use gotry_tenant_state::router::SharedFoldCheck;
use gotry_tenant_state::HostSnapshot;
use napi::bindgen_prelude::{
    CallbackContext, FnArgs, FromNapiValue, Function, JsValuesTupleIntoVec, PromiseRaw, Unknown,
};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;

use crate::clock::{host_failure, wait_for_js};

/// A host function as the JS layer hands it over: it takes `Args` and returns a promise of `R`.
pub type HostFunction<'env, Args, R> = Function<'env, Args, PromiseRaw<'static, R>>;

/// The JS layer's wrapper of a host's `verify(dir)`: a promise of a boolean.
pub type VerifyFunction<'env> = HostFunction<'env, String, bool>;

/// The JS layer's wrapper of a host's `snapshot(source, image)`: a promise of nothing.
pub type SnapshotFunction<'env> = HostFunction<'env, FnArgs<(String, String)>, ()>;

/// A host function callable from any thread but the JS thread, which waits for its promise.
pub struct HostCall<Args: JsValuesTupleIntoVec + 'static, R: FromNapiValue + 'static> {
    /// Weak: the call that waits keeps the event loop alive by its own promise (or, for the
    /// router's background copies, the host's own work does), never this function.
    threadsafe: ThreadsafeFunction<Args, PromiseRaw<'static, R>, Args, Status, false, true>,
    /// The option's name, for the error when the JS environment is gone.
    name: &'static str,
}

impl<Args, R> HostCall<Args, R>
where
    Args: JsValuesTupleIntoVec + 'static,
    R: FromNapiValue + Send + 'static,
{
    pub fn new(function: &HostFunction<'_, Args, R>, name: &'static str) -> napi::Result<HostCall<Args, R>> {
        let threadsafe = function
            .build_threadsafe_function::<Args>()
            .callee_handled::<false>()
            .weak::<true>()
            .build()?;
        Ok(HostCall { threadsafe, name })
    }

    /// Calls the function on the JS thread and waits here for its promise: its value, or the
    /// host's own exception (which the calling promise then rejects with, unchanged).
    pub fn call(&self, args: Args) -> Result<R> {
        // Two senders may answer (the promise, or a failure to attach to it); the first wins.
        let (sender, receiver) = mpsc::sync_channel::<Result<R>>(2);
        let status = self.threadsafe.call_with_return_value(
            args,
            ThreadsafeFunctionCallMode::NonBlocking,
            move |promise: napi::Result<PromiseRaw<'static, R>>, _env| {
                let (on_value, on_error) = (sender.clone(), sender.clone());
                let attached = promise.and_then(|promise| {
                    promise
                        .then(move |settled: CallbackContext<R>| {
                            let _ = on_value.send(Ok(settled.value));
                            Ok(())
                        })?
                        .catch(move |thrown: CallbackContext<Unknown<'static>>| {
                            // Kept by reference: the call rejects with that very value.
                            let _ = on_error.send(Err(host_failure(napi::Error::from(thrown.value))));
                            Ok(())
                        })
                        .map(drop)
                });
                // An error here would end the process (napi reports it as fatal): tell the
                // waiting thread instead. Its receiver is gone only after a teardown.
                if let Err(error) = attached {
                    let _ = sender.send(Err(host_failure(error)));
                }
                Ok(())
            },
        );
        if status != Status::Ok {
            return Err(self.gone());
        }
        wait_for_js(&receiver, || self.threadsafe.aborted()).unwrap_or_else(|| Err(self.gone()))
    }

    fn gone(&self) -> Error {
        host_failure(napi::Error::from_reason(format!(
            "{} cannot be called: its JavaScript environment is shutting down",
            self.name
        )))
    }
}

fn path_text(path: &Path) -> String {
    // Every path here is built from JS strings and UTF-8 file names: nothing is lost.
    path.to_string_lossy().into_owned()
}

/// The core's fold check over a host's `verify`.
pub fn fold_check(function: &VerifyFunction<'_>) -> napi::Result<SharedFoldCheck> {
    let call = HostCall::new(function, "verify")?;
    Ok(Arc::new(move |dir: &Path| call.call(path_text(dir))))
}

/// The core's host snapshot over a host's `snapshot`.
pub fn host_snapshot(function: &SnapshotFunction<'_>) -> napi::Result<HostSnapshot> {
    let call = HostCall::new(function, "snapshot")?;
    Ok(Arc::new(move |source: &Path, image: &Path| {
        call.call(FnArgs::from((path_text(source), path_text(image))))
    }))
}
