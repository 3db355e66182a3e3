//! The tenant router for JavaScript: one replica serving many tenants (`core/src/router/`).
//!
//! Every rule is the core's; this moves arguments, results and events across, and decides
//! where each call runs, never on the event loop:
//!
//! - `begin` is answered on the JS thread when it cannot wait (`TenantRouter::begin_now`: no
//!   copy holds the tenant's calls back; the rest takes the router's locks, held briefly, and
//!   reads its clock, which is native) and no call made before it is queued or running on the
//!   router's lane; else it runs there. In `async` durability, `finish` takes a mutex and
//!   reads the lease's clock on that lane too, on the store threads next to lease store calls.
//! - `open` acquires a lease and restores a copy, and a `strict` `finish` writes a copy: both
//!   run on the durable store's lane, with the copies' calls.
//! - A call that may wait for JavaScript (an `open` with a host `verify`, a copy through a
//!   host `snapshot`) or for other calls of this addon (`handoff` and `close` wait for the
//!   tenant's calls to finish, whose `finish` runs on the lanes above) runs on a thread of its
//!   own, so that it holds no shared thread that what it waits for may need.
//!
//! A JS call of a tenant is `begin` (counted in flight, gate checked), the host's function on
//! the event loop, then `finish` (gate checked again; in `strict` durability a copy that holds
//! it) or, when the function threw, `abandon` (no longer in flight, nothing acknowledged).

use std::path::PathBuf;
use std::sync::Arc;

use gotry_tenant_state::clock::MonotonicClock;
use gotry_tenant_state::errors::{Error, Result};
use gotry_tenant_state::router::{
    CloseReport, CopyPolicy, Durability, RouterEvent, RouterEventKind, RouterOptions, RouterTickReport,
};
use gotry_tenant_state::{
    CopyId, RouterCall, SystemMonotonicClock, TenantHandle, TenantRouter, TenantStatus,
};
use napi::bindgen_prelude::{Either, Function, Null, Object, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::args::{self, safe_count, safe_number};
use crate::clock::ManualClock;
use crate::copies::JsCopyId;
use crate::durable::NativeDurableStore;
use crate::errors::OrThrow;
use crate::events::{EventQueue, Forwarder};
use crate::executor::{unless_waiting, Lane, Pending};
use crate::host::{fold_check, host_snapshot, SnapshotFunction, VerifyFunction};
use crate::ids::tenant_ids;
use crate::keeper::JsTickReport;
use crate::objects::{key_errors, object_value, set_error, set_number, ObjectValue};
use crate::store::NativeStore;
use crate::tasks::{queue, CloseTask, Job, RouterBeginTask, RouterOpenTask, RouterTickTask, UnitTask};

/// Serves many tenants from one replica; made by `NativeRouter.start`.
#[napi]
pub struct NativeRouter {
    router: Arc<TenantRouter>,
    /// `begin`, and `finish` in `async` durability.
    calls: Arc<Lane>,
    /// The durable store's lane: `open`, and `finish` in `strict` durability.
    copies: Arc<Lane>,
    /// Whether an `open` may wait for the host's `verify`.
    host_verify: bool,
    /// Whether a copy may wait for the host's `snapshot`.
    host_snapshot: bool,
    strict: bool,
    events: Option<Arc<EventQueue<RouterEventValue>>>,
}

fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidArgument {
        message: message.into(),
    }
}

/// The durability modes' words, as the core spells them, for the JS layer's option check.
#[napi]
pub fn durabilities() -> Vec<&'static str> {
    Durability::ALL.map(Durability::as_str).to_vec()
}

#[napi]
impl NativeRouter {
    /// Starts a router for `replicaId`: its keeper's renewal thread on `leaseStore` and, in
    /// `async` durability, its copier; neither with `withoutThread`, whose rounds run only at
    /// `tick`. `capacity`, `intervalMs`, `durability` (one of `durabilities()`) and
    /// `keepCopies` (0: every copy kept) and `tenantMetrics` (per-tenant series in the
    /// metrics text) take the core's defaults when null; the router's
    /// clock is `manualClock`, or the system's monotonic clock. `verify` and `snapshot` are
    /// the JS layer's wrappers of the host's functions; `onWake` (called with no argument on
    /// the JS thread) says that events wait in `takeEvents`.
    #[napi(factory)]
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        env: Env,
        lease_store: &NativeStore,
        durable_store: &NativeDurableStore,
        state_root: Unknown<'_>,
        replica_id: Unknown<'_>,
        ttl_ms: Unknown<'_>,
        margin_ms: Unknown<'_>,
        capacity: Option<Unknown<'_>>,
        interval_ms: Option<Unknown<'_>>,
        durability: Option<String>,
        manual_clock: Option<&ManualClock>,
        #[napi(ts_arg_type = "(dir: string) => Promise<boolean>")] verify: Option<VerifyFunction<'_>>,
        #[napi(ts_arg_type = "(source: string, image: string) => Promise<void>")] snapshot: Option<
            SnapshotFunction<'_>,
        >,
        on_wake: Option<Function<'_, (), Unknown<'static>>>,
        without_thread: Option<bool>,
        keep_copies: Option<Unknown<'_>>,
        tenant_metrics: Option<bool>,
    ) -> napi::Result<NativeRouter> {
        let options = || -> Result<RouterOptions> {
            let state_root = PathBuf::from(args::string("stateRoot", &state_root)?);
            let replica_id = args::text("replicaId", &replica_id)?;
            let ttl_ms = args::integer("ttlMs", &ttl_ms)?;
            let margin_ms = args::integer("marginMs", &margin_ms)?;
            let mut options = RouterOptions::new(
                lease_store.store.clone(),
                durable_store.store.clone(),
                state_root,
                replica_id,
                ttl_ms,
                margin_ms,
            );
            options.capacity = match args::optional_integer("capacity", capacity.as_ref())? {
                None => None,
                Some(limit) => Some(
                    usize::try_from(limit)
                        .map_err(|_| invalid(format!("capacity must be at least 1, got {limit}")))?,
                ),
            };
            let interval = match &interval_ms {
                Some(value) if !args::is_nullish(value)? => args::millis("intervalMs", value)?,
                _ => CopyPolicy::default().interval,
            };
            let durability = match durability {
                None => CopyPolicy::default().durability,
                Some(word) => Durability::parse(&word)
                    .ok_or_else(|| invalid(format!("copyPolicy.durability names no mode: {word:?}")))?,
            };
            options.copy_policy = CopyPolicy { interval, durability };
            options.clock = match manual_clock {
                Some(manual) => manual.inner.clone() as Arc<dyn MonotonicClock>,
                None => Arc::new(SystemMonotonicClock),
            };
            options.without_thread = without_thread.unwrap_or(false);
            if let Some(keep) = args::optional_integer("keepCopies", keep_copies.as_ref())? {
                options.keep_copies = usize::try_from(keep)
                    .map_err(|_| invalid(format!("keepCopies must be 0 or more, got {keep}")))?;
            }
            if let Some(on) = tenant_metrics {
                options.tenant_metrics = on;
            }
            Ok(options)
        };
        let mut options = options().or_throw(&env)?;
        options.verify = verify.as_ref().map(fold_check).transpose()?;
        options.snapshot = snapshot.as_ref().map(host_snapshot).transpose()?;
        let events = match on_wake {
            Some(function) => {
                let (forwarder, queue) = Forwarder::new(&function)?;
                options.on_event = Some(Arc::new(move |event| {
                    if let Some(event) = RouterEventValue::from_core(event) {
                        forwarder.forward(event);
                    }
                }));
                Some(queue)
            }
            None => None,
        };
        let (host_verify, host_snapshot) = (options.verify.is_some(), options.snapshot.is_some());
        let strict = options.copy_policy.durability == Durability::Strict;
        let router = TenantRouter::start(options).or_throw(&env)?;
        Ok(NativeRouter {
            router: Arc::new(router),
            calls: Lane::new(usize::MAX),
            copies: durable_store.lane.clone(),
            host_verify,
            host_snapshot,
            strict,
            events,
        })
    }

    /// The most tenants this replica serves at once.
    #[napi(getter)]
    pub fn capacity(&self, env: Env) -> napi::Result<f64> {
        safe_count("capacity", self.router.capacity() as u64).or_throw(&env)
    }

    /// Serves a tenant: acquires its lease and restores its newest valid copy into its root.
    #[napi(ts_return_type = "Promise<NativeTenantHandle>")]
    pub fn open(
        &self,
        env: Env,
        organization_id: Unknown<'_>,
        ledger_tenant_id: Unknown<'_>,
    ) -> napi::Result<Pending<RouterOpenTask>> {
        let router = self.router.clone();
        queue(&env, unless_waiting(self.host_verify, &self.copies), || {
            let (organization, tenant) = tenant_ids(&organization_id, &ledger_tenant_id)?;
            Ok(Job::new(None, move || {
                let handle = router.open(&organization, &tenant)?;
                Ok(NativeTenantHandle { handle })
            }))
        })
    }

    /// Starts a call of a served tenant: in flight from now on, its gate checked.
    #[napi(ts_return_type = "Promise<NativeRouterCall>")]
    pub fn begin(&self, env: Env, key: Unknown<'_>) -> napi::Result<Pending<RouterBeginTask>> {
        let key = args::string("key", &key).or_throw(&env)?;
        let router = self.router.clone();
        // Where the call's finish will run: it may write a copy, maybe through the host.
        let finish = if self.strict {
            unless_waiting(self.host_snapshot, &self.copies)
        } else {
            Some(&self.calls)
        };
        let finish = finish.cloned();
        let native = move |call: RouterCall| NativeRouterCall {
            handle: call.handle().clone(),
            call: Some(call),
            finish,
        };
        if self.calls.is_idle() {
            if let Some(answer) = router.begin_now(&key) {
                return Ok(Pending::answered(
                    RouterBeginTask(Job::done()),
                    answer.map(native),
                ));
            }
        }
        Ok(Pending::new(
            Some(&self.calls),
            RouterBeginTask(Job::new(None, move || router.begin(&key).map(native))),
        ))
    }

    /// Drains the tenant, takes a final copy and releases its lease; DRAIN_TIMEOUT (the tenant
    /// serving again) when calls still run after `timeoutMs`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn handoff(
        &self,
        env: Env,
        key: Unknown<'_>,
        timeout_ms: Unknown<'_>,
    ) -> napi::Result<Pending<UnitTask>> {
        let router = self.router.clone();
        queue(&env, None, || {
            let key = args::string("key", &key)?;
            let timeout = handoff_timeout(&router, &timeout_ms)?;
            Ok(Job::new(None, move || router.handoff(&key, timeout)))
        })
    }

    /// Hands every tenant off (`timeoutMs` each), then refuses every later open.
    #[napi(ts_return_type = "Promise<CloseReportValue>")]
    pub fn close(&self, env: Env, timeout_ms: Unknown<'_>) -> napi::Result<Pending<CloseTask>> {
        let router = self.router.clone();
        queue(&env, None, || {
            let timeout = handoff_timeout(&router, &timeout_ms)?;
            Ok(Job::new(None, move || {
                Ok(CloseReportValue(router.close(timeout)))
            }))
        })
    }

    /// Runs one round on the router's clock: the keeper's renewals that are due, then the
    /// background copies that are due. On a thread of its own, as `handoff`: a due copy waits
    /// for its tenant's running calls, whose `finish` runs on the lanes.
    #[napi(ts_return_type = "Promise<RouterTickReport>")]
    pub fn tick(&self, env: Env) -> napi::Result<Pending<RouterTickTask>> {
        let router = self.router.clone();
        queue(&env, None, || Ok(Job::new(None, move || router.tick())))
    }

    /// Every tenant this replica knows, ordered by key. Synchronous: it only reads counters and
    /// the router's clock, which is native.
    #[napi(ts_return_type = "Array<TenantStatus>")]
    pub fn status(&self, env: Env) -> napi::Result<Vec<JsTenantStatus>> {
        let all = self.router.status().and_then(|all| {
            all.into_iter()
                .map(JsTenantStatus::from_core)
                .collect::<Result<Vec<_>>>()
        });
        all.or_throw(&env)
    }

    /// The events told since the last call, oldest first.
    #[napi(ts_return_type = "Array<RouterEventValue>")]
    pub fn take_events(&self) -> Vec<RouterEventValue> {
        self.events.as_ref().map_or_else(Vec::new, |queue| queue.drain())
    }
}

/// A drain's timeout: the host's `timeoutMs`, or the core's default when it gave none.
fn handoff_timeout(router: &TenantRouter, timeout_ms: &Unknown<'_>) -> Result<std::time::Duration> {
    if args::is_nullish(timeout_ms)? {
        Ok(router.default_handoff_timeout())
    } else {
        args::millis("timeoutMs", timeout_ms)
    }
}

/// A call in flight; made by `begin`, ended by `finish` or `abandon`.
#[napi]
pub struct NativeRouterCall {
    handle: Arc<TenantHandle>,
    /// Taken by `finish` or `abandon`; dropped unfinished (garbage collected), it counts as a
    /// failed call, as `abandon` does.
    call: Option<RouterCall>,
    /// Where `finish` runs (`None`: a thread of its own).
    finish: Option<Arc<Lane>>,
}

#[napi]
impl NativeRouterCall {
    /// The tenant the call runs for.
    #[napi(getter)]
    pub fn handle(&self) -> NativeTenantHandle {
        NativeTenantHandle {
            handle: self.handle.clone(),
        }
    }

    /// The call's handler returned: CALL_IN_DOUBT when the gate closed meanwhile; in `strict` durability it
    /// settles once a copy holds the call (and fails CALL_IN_DOUBT, caused by the copy's error).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn finish(&mut self, env: Env) -> napi::Result<Pending<UnitTask>> {
        let lane = self.finish.clone();
        queue(&env, lane.as_ref(), || {
            let call = self.take()?;
            Ok(Job::new(None, move || call.finish()))
        })
    }

    /// The call failed: it is no longer in flight, and nothing of it is acknowledged.
    #[napi]
    pub fn abandon(&mut self, env: Env) -> napi::Result<()> {
        // A mutex and a counter (the core never holds that mutex across I/O): synchronous.
        self.take().map(drop).or_throw(&env)
    }
}

impl NativeRouterCall {
    fn take(&mut self) -> Result<RouterCall> {
        self.call
            .take()
            .ok_or_else(|| invalid("this router call has already ended"))
    }
}

/// A served tenant: where its files are, and its write gate.
#[napi]
pub struct NativeTenantHandle {
    handle: Arc<TenantHandle>,
}

#[napi]
impl NativeTenantHandle {
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.handle.key.clone()
    }

    #[napi(getter)]
    pub fn root(&self, env: Env) -> napi::Result<String> {
        let root = self.handle.root.to_str().map(str::to_owned);
        root.ok_or_else(|| invalid("the tenant root is not valid Unicode"))
            .or_throw(&env)
    }

    #[napi(getter)]
    pub fn epoch(&self, env: Env) -> napi::Result<f64> {
        safe_number("epoch", self.handle.epoch()).or_throw(&env)
    }

    /// The copy the tenure started from; null for an empty start.
    #[napi(getter, ts_return_type = "CopyId | null")]
    pub fn restored_from(&self, env: Env) -> napi::Result<Option<JsCopyId>> {
        self.handle
            .restored_from
            .map(JsCopyId::from_core)
            .transpose()
            .or_throw(&env)
    }

    /// The synchronous write gate: throws FENCED unless the tenant's lease is provably held.
    #[napi]
    pub fn assert_held(&self, env: Env) -> napi::Result<()> {
        self.handle.lease.assert_held().or_throw(&env)
    }

    #[napi]
    pub fn is_held(&self) -> bool {
        self.handle.lease.is_held()
    }
}

/// One tenant as operators and metrics see it.
#[napi(object, js_name = "TenantStatus", use_nullable = true)]
pub struct JsTenantStatus {
    pub key: String,
    #[napi(ts_type = "'opening' | 'serving' | 'draining' | 'lost' | 'closed'")]
    pub state: String,
    /// 0 while the tenant is still being opened.
    pub epoch: f64,
    pub in_flight: f64,
    pub last_copy: Option<JsCopyId>,
    pub writes_since_copy: f64,
    pub lag_ms: f64,
    pub last_copy_error: Option<String>,
}

impl JsTenantStatus {
    fn from_core(status: TenantStatus) -> Result<JsTenantStatus> {
        Ok(JsTenantStatus {
            state: status.state.as_str().to_owned(),
            epoch: safe_number("epoch", status.epoch)?,
            in_flight: safe_count("inFlight", status.in_flight)?,
            last_copy: status.last_copy.map(JsCopyId::from_core).transpose()?,
            writes_since_copy: safe_count("writesSinceCopy", status.writes_since_copy)?,
            lag_ms: safe_count("lagMs", status.lag_ms)?,
            last_copy_error: status.last_copy_error,
            key: status.key,
        })
    }
}

/// What one `tick` did; `nextDueMs` is null when nothing is kept.
#[napi(object, js_name = "RouterTickReport")]
pub struct JsRouterTickReport {
    pub keeper: JsTickReport,
    pub copied: Vec<String>,
    pub failed: Vec<String>,
    pub next_due_ms: Either<f64, Null>,
}

impl From<RouterTickReport> for JsRouterTickReport {
    fn from(report: RouterTickReport) -> JsRouterTickReport {
        JsRouterTickReport {
            keeper: JsTickReport::from(report.keeper),
            copied: report.copied,
            failed: report.failed,
            next_due_ms: report.next_due_ms.map_or(Either::B(Null), Either::A),
        }
    }
}

/// A router event as the JS thread receives it: `{ kind, key, epoch }`, plus `error` for
/// `copy_failed`, and `seq` and `bytesUploaded` for `copied`.
pub enum RouterEventValue {
    Lost {
        key: String,
        epoch: i64,
    },
    Closed {
        key: String,
        epoch: i64,
    },
    CopyFailed {
        key: String,
        epoch: i64,
        error: Error,
    },
    Draining {
        key: String,
        epoch: i64,
    },
    Copied {
        key: String,
        copy: CopyId,
        bytes_uploaded: u64,
    },
}

impl RouterEventValue {
    /// `None` for a kind of event this build does not know: the host could not tell it from
    /// the ones it handles, so it is not told at all.
    fn from_core(event: RouterEvent) -> Option<RouterEventValue> {
        Some(match event {
            RouterEvent::Lost { key, epoch } => RouterEventValue::Lost { key, epoch },
            RouterEvent::Closed { key, epoch } => RouterEventValue::Closed { key, epoch },
            RouterEvent::CopyFailed { key, epoch, error } => {
                RouterEventValue::CopyFailed { key, epoch, error }
            }
            RouterEvent::Draining { key, epoch } => RouterEventValue::Draining { key, epoch },
            RouterEvent::Copied {
                key,
                copy,
                bytes_uploaded,
            } => RouterEventValue::Copied {
                key,
                copy,
                bytes_uploaded,
            },
            _ => return None,
        })
    }
}

object_value!(RouterEventValue, "RouterEventValue");

impl ObjectValue for RouterEventValue {
    fn fill(self, env: &Env, object: &mut Object<'_>) -> napi::Result<()> {
        let (kind, key, epoch) = match &self {
            RouterEventValue::Lost { key, epoch } => (RouterEventKind::Lost, key, *epoch),
            RouterEventValue::Closed { key, epoch } => (RouterEventKind::Closed, key, *epoch),
            RouterEventValue::CopyFailed { key, epoch, .. } => (RouterEventKind::CopyFailed, key, *epoch),
            RouterEventValue::Draining { key, epoch } => (RouterEventKind::Draining, key, *epoch),
            RouterEventValue::Copied { key, copy, .. } => (RouterEventKind::Copied, key, copy.epoch),
        };
        object.set("kind", kind.as_str())?;
        object.set("key", key.as_str())?;
        set_number(env, object, "epoch", epoch)?;
        match self {
            RouterEventValue::CopyFailed { error, .. } => set_error(env, object, error),
            RouterEventValue::Copied {
                copy, bytes_uploaded, ..
            } => {
                object.set("seq", safe_count("seq", copy.seq).or_throw(env)?)?;
                object.set(
                    "bytesUploaded",
                    safe_count("bytesUploaded", bytes_uploaded).or_throw(env)?,
                )
            }
            _ => Ok(()),
        }
    }
}

/// What `close` did with every tenant: `{ handedOff: [key], timedOut: [key], failed:
/// [{ key, error }] }`, each list ordered by key.
pub struct CloseReportValue(pub CloseReport);

object_value!(CloseReportValue, "CloseReportValue");

impl ObjectValue for CloseReportValue {
    fn fill(self, env: &Env, object: &mut Object<'_>) -> napi::Result<()> {
        let CloseReport {
            mut handed_off,
            mut timed_out,
            mut failed,
            ..
        } = self.0;
        // The core lists them in its map's order; hosts get them by key, as a keeper's
        // shutdown report lists its leases.
        handed_off.sort();
        timed_out.sort();
        failed.sort_by(|a, b| a.0.cmp(&b.0));
        object.set("handedOff", handed_off)?;
        object.set("timedOut", timed_out)?;
        object.set("failed", key_errors(env, failed)?)
    }
}
