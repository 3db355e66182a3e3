//! The lease keeper for JavaScript: one native thread per keeper renews its leases in
//! batches, and tells the host on its event loop what happened to them.
//!
//! The core calls its handler on the keeper's thread (or on the thread that runs a `tick`);
//! the handler queues the event and wakes the JS thread (`events.rs`). The JS layer drains
//! the queue right after a `tick` or a `shutdown` settles, so the events of a round reach the
//! host before the round's promise settles, and every event told before `shutdown` returned
//! reaches it before its promise does. The wake-up is weak: a keeper never keeps the process
//! alive. Only the core's handler holds the wake-up, which holds the host's function: once
//! the keeper drops its handler (at shutdown), nothing native keeps the keeper's JS object
//! alive any more.

use std::sync::Arc;

use gotry_tenant_state::clock::MonotonicClock;
use gotry_tenant_state::errors::{Error, Result};
use gotry_tenant_state::keeper::{DEFAULT_MAX_BATCH, DEFAULT_RENEW_FRACTION};
use gotry_tenant_state::{
    KeeperEvent, KeeperOptions, LeaseKeeper, ShutdownReport, SystemMonotonicClock, TickReport,
};
use napi::bindgen_prelude::{Either, Function, Null, Object, Unknown};
use napi::{Env, ValueType};
use napi_derive::napi;

use crate::args;
use crate::clock::ManualClock;
use crate::errors::OrThrow;
use crate::events::{EventQueue, Forwarder};
use crate::executor::{Lane, Pending};
use crate::lease::NativeLease;
use crate::objects::{key_errors, object_value, set_error, set_number, ObjectValue};
use crate::store::NativeStore;
use crate::tasks::{queue, Job, KeeperTickTask, LeaseTask, RemovedTask, ShutdownTask};

/// Keeps many leases of one owner on one store renewed; made by `NativeKeeper.start`.
#[napi]
pub struct NativeKeeper {
    keeper: Arc<LeaseKeeper>,
    /// Where the keeper's own calls run, in call order. Not the store's lane, nor even its
    /// threads: `remove` and `shutdown` wait for the renewals and releases that a kept lease's
    /// handle made before they ran, which run on the store's lane and could be queued behind
    /// them there, or find every store thread taken by keepers waiting the same way.
    lane: Arc<Lane>,
    /// The store's lane, where the calls of the kept leases' handles run.
    store_lane: Arc<Lane>,
    events: Option<Arc<EventQueue<KeeperEvent>>>,
}

#[napi]
impl NativeKeeper {
    /// Starts a keeper for `replicaId` on `store`. Its clock is `manualClock`, or the system's
    /// monotonic clock; `onWake` (called with no argument on the JS thread) says that events
    /// wait in `takeEvents`. With `withoutThread`, rounds run only when `tick` is called.
    #[napi(factory)]
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        env: Env,
        store: &NativeStore,
        replica_id: Unknown<'_>,
        ttl_ms: Unknown<'_>,
        margin_ms: Unknown<'_>,
        renew_fraction: Option<Unknown<'_>>,
        max_batch: Option<Unknown<'_>>,
        manual_clock: Option<&ManualClock>,
        on_wake: Option<Function<'_, (), Unknown<'static>>>,
        without_thread: bool,
    ) -> napi::Result<NativeKeeper> {
        let options = || -> Result<KeeperOptions> {
            let replica_id = args::text("replicaId", &replica_id)?;
            let ttl_ms = args::integer("ttlMs", &ttl_ms)?;
            let margin_ms = args::integer("marginMs", &margin_ms)?;
            let mut options = KeeperOptions::new(store.store.clone(), replica_id, ttl_ms, margin_ms);
            options.renew_fraction = optional_fraction(renew_fraction.as_ref())?;
            options.max_batch = optional_batch(max_batch.as_ref())?;
            options.clock = match manual_clock {
                Some(manual) => manual.inner.clone() as Arc<dyn MonotonicClock>,
                None => Arc::new(SystemMonotonicClock),
            };
            Ok(options)
        };
        let mut options = options().or_throw(&env)?;
        let events = match on_wake {
            Some(function) => {
                let (forwarder, queue) = Forwarder::new(&function)?;
                options.on_event = Some(Box::new(move |event| forwarder.forward(event)));
                Some(queue)
            }
            None => None,
        };
        let keeper = if without_thread {
            LeaseKeeper::without_thread(options)
        } else {
            LeaseKeeper::start(options)
        };
        Ok(NativeKeeper {
            keeper: Arc::new(keeper.or_throw(&env)?),
            lane: Lane::for_keeper(),
            store_lane: store.lane.clone(),
            events,
        })
    }

    /// Acquires `key` and keeps it renewed; resolves to the kept lease.
    #[napi(ts_return_type = "Promise<NativeLease>")]
    pub fn acquire(&self, env: Env, key: Unknown<'_>) -> napi::Result<Pending<LeaseTask>> {
        let keeper = Arc::clone(&self.keeper);
        let store_lane = self.store_lane.clone();
        queue(&env, Some(&self.lane), || {
            let key = args::text("key", &key)?;
            Ok(Job::new(None, move || {
                let lease = keeper.acquire(&key)?;
                Ok(NativeLease::kept(lease, &store_lane))
            }))
        })
    }

    /// Stops keeping `key` and releases it; resolves to false when it was not kept.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn remove(&self, env: Env, key: Unknown<'_>) -> napi::Result<Pending<RemovedTask>> {
        let keeper = Arc::clone(&self.keeper);
        queue(&env, Some(&self.lane), || {
            let key = args::string("key", &key)?;
            Ok(Job::new(None, move || keeper.remove(&key)))
        })
    }

    /// The kept lease of `key`, if any.
    #[napi]
    pub fn get(&self, env: Env, key: Unknown<'_>) -> napi::Result<Option<NativeLease>> {
        let key = args::string("key", &key).or_throw(&env)?;
        Ok(self
            .keeper
            .get(&key)
            .map(|lease| NativeLease::kept(lease, &self.store_lane)))
    }

    /// How many leases are kept, counting any closed through their own handle since the last
    /// round.
    #[napi(getter)]
    pub fn size(&self) -> f64 {
        // Exact: no process keeps 2**53 leases.
        self.keeper.len() as f64
    }

    /// Runs one round if a lease is due on the keeper's clock.
    #[napi(ts_return_type = "Promise<TickReport>")]
    pub fn tick(&self) -> Pending<KeeperTickTask> {
        let keeper = Arc::clone(&self.keeper);
        Pending::new(
            Some(&self.lane),
            KeeperTickTask(Job::new(None, move || keeper.tick())),
        )
    }

    /// Stops renewing and releases every kept lease, starting no release after `timeoutMs`
    /// (`undefined`: the core keeper's default).
    #[napi(ts_return_type = "Promise<ShutdownReportValue>")]
    pub fn shutdown(&self, env: Env, timeout_ms: Unknown<'_>) -> napi::Result<Pending<ShutdownTask>> {
        let omitted = timeout_ms.get_type()? == ValueType::Undefined;
        let keeper = Arc::clone(&self.keeper);
        queue(&env, Some(&self.lane), || {
            let timeout = if omitted {
                keeper.default_shutdown_timeout()
            } else {
                args::millis("timeoutMs", &timeout_ms)?
            };
            Ok(Job::new(None, move || Ok(keeper.shutdown(timeout))))
        })
    }

    /// The events told since the last call, oldest first.
    #[napi(ts_return_type = "Array<KeeperEventValue>")]
    pub fn take_events(&self) -> Vec<EventValue> {
        self.events.as_ref().map_or_else(Vec::new, |queue| {
            queue.drain().into_iter().map(EventValue).collect()
        })
    }
}

/// A renew fraction: any JS number, which the core checks (it must leave at least 1 ms between
/// renewals and renew before the fence); the default when omitted.
fn optional_fraction(value: Option<&Unknown<'_>>) -> Result<f64> {
    match value {
        Some(value) if !args::is_nullish(value)? => {
            args::number(value)?.ok_or_else(|| Error::InvalidArgument {
                message: "renewFraction must be a number".to_owned(),
            })
        }
        _ => Ok(DEFAULT_RENEW_FRACTION),
    }
}

/// A batch size: a safe integer of at least 1 (the core refuses 0); the default when omitted.
fn optional_batch(value: Option<&Unknown<'_>>) -> Result<usize> {
    match args::optional_integer("maxBatch", value)? {
        None => Ok(DEFAULT_MAX_BATCH),
        Some(batch) => usize::try_from(batch).map_err(|_| Error::InvalidArgument {
            message: format!("maxBatch must be at least 1, got {batch}"),
        }),
    }
}

/// A count as a JS number; exact for any count a process can hold.
fn count(value: usize) -> f64 {
    value as f64
}

/// One keeper event as a JS object: `{ kind, key, epoch }` for a lease, plus `error` for
/// `lost`; `{ kind, error, leases }` for `renew_failed`.
pub struct EventValue(KeeperEvent);

object_value!(EventValue, "KeeperEventValue");

impl ObjectValue for EventValue {
    fn fill(self, env: &Env, object: &mut Object<'_>) -> napi::Result<()> {
        let event = self.0;
        object.set("kind", event.kind().as_str())?;
        if let Some(key) = event.key() {
            object.set("key", key)?;
        }
        if let Some(epoch) = event.epoch() {
            set_number(env, object, "epoch", epoch)?;
        }
        let (error, leases) = match event {
            KeeperEvent::Lost { error, .. } => (Some(error), None),
            KeeperEvent::RenewFailed { error, leases } => (Some(error), Some(leases)),
            _ => (None, None),
        };
        if let Some(error) = error {
            set_error(env, object, error)?;
        }
        if let Some(leases) = leases {
            object.set("leases", count(leases))?;
        }
        Ok(())
    }
}

/// What one round did; `nextDueMs` is null when no lease is kept.
#[napi(object, js_name = "TickReport")]
pub struct JsTickReport {
    pub batches: f64,
    pub renewed: f64,
    pub lost: f64,
    pub failed: f64,
    pub next_due_ms: Either<f64, Null>,
}

impl From<TickReport> for JsTickReport {
    fn from(report: TickReport) -> JsTickReport {
        JsTickReport {
            batches: count(report.batches),
            renewed: count(report.renewed),
            lost: count(report.lost),
            failed: count(report.failed),
            next_due_ms: report.next_due_ms.map_or(Either::B(Null), Either::A),
        }
    }
}

/// What shutdown did with each lease: `{ released: [key], failed: [{ key, error }],
/// timedOut: [key] }`, each list ordered by key.
pub struct ShutdownReportValue(pub ShutdownReport);

object_value!(ShutdownReportValue, "ShutdownReportValue");

impl ObjectValue for ShutdownReportValue {
    fn fill(self, env: &Env, object: &mut Object<'_>) -> napi::Result<()> {
        let ShutdownReport {
            released,
            failed,
            timed_out,
        } = self.0;
        object.set("released", released)?;
        object.set("failed", key_errors(env, failed)?)?;
        object.set("timedOut", timed_out)
    }
}
