//! The holder side for JavaScript.
//!
//! `renew` and `release` take their place in the holder's queue synchronously, on the JS
//! thread, when they are called, and only then hand the blocking part to the store's lane. So
//! calls made together settle in call order, whichever thread runs them.

use std::sync::Arc;

use gotry_tenant_state::clock::MonotonicClock;
use gotry_tenant_state::errors::Result;
use gotry_tenant_state::{LeaseOptions, SystemMonotonicClock, TenantLease};
use napi::bindgen_prelude::{Function, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::args::{self, safe_number};
use crate::clock::{HostMonotonicClock, ManualClock};
use crate::errors::OrThrow;
use crate::executor::{Lane, Pending};
use crate::store::NativeStore;
use crate::tasks::{queue, Job, LeaseTask, RecordTask, UnitTask};

/// A held lease; made by `acquireLease`.
#[napi]
pub struct NativeLease {
    lease: Arc<TenantLease>,
    /// The lane of the lease's store: its renewals and release run there, after the store's
    /// calls made before them.
    lane: Arc<Lane>,
    /// Whether the store's clock is a JS function, whose readings each call must carry.
    host_wall_clock: bool,
}

/// Acquires `key` for `replicaId` in `store` and starts holding it. The holder's clock is
/// `manualClock`, or `clockFn` (a JS function returning milliseconds), or the system's
/// monotonic clock.
#[napi(ts_return_type = "Promise<NativeLease>")]
#[allow(clippy::too_many_arguments)]
pub fn acquire_lease(
    env: Env,
    store: &NativeStore,
    key: Unknown<'_>,
    replica_id: Unknown<'_>,
    ttl_ms: Unknown<'_>,
    margin_ms: Unknown<'_>,
    manual_clock: Option<&ManualClock>,
    clock_fn: Option<Function<'_, (), Unknown<'static>>>,
    wall_now_ms: Option<Unknown<'_>>,
) -> napi::Result<Pending<LeaseTask>> {
    let ttl_ms = args::integer("ttlMs", &ttl_ms).or_throw(&env)?;
    let margin_ms = args::integer("marginMs", &margin_ms).or_throw(&env)?;
    let key = args::text("key", &key).or_throw(&env)?;
    let replica_id = args::text("replicaId", &replica_id).or_throw(&env)?;
    let clock: Arc<dyn MonotonicClock> = match (manual_clock, clock_fn) {
        (Some(manual), _) => manual.inner.clone(),
        (None, Some(function)) => Arc::new(HostMonotonicClock::new(&env, function)?),
        (None, None) => Arc::new(SystemMonotonicClock),
    };
    let host_wall_clock = store.host_clock();
    let lane = store.lane.clone();
    queue(&env, Some(&store.lane), || {
        let now = store.wall_reading(wall_now_ms.as_ref())?;
        let options = LeaseOptions {
            key,
            replica_id,
            store: store.store.clone(),
            ttl_ms,
            margin_ms,
            clock,
        };
        Ok(Job::new(now, move || {
            TenantLease::acquire(options).map(|lease| NativeLease {
                lease: Arc::new(lease),
                lane,
                host_wall_clock,
            })
        }))
    })
}

#[napi]
impl NativeLease {
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.lease.key().to_owned()
    }

    #[napi(getter)]
    pub fn replica_id(&self) -> String {
        self.lease.replica_id().to_owned()
    }

    #[napi(getter)]
    pub fn epoch(&self, env: Env) -> napi::Result<f64> {
        safe_number("epoch", self.lease.epoch()).or_throw(&env)
    }

    #[napi(getter)]
    pub fn forgotten_at_epoch(&self, env: Env) -> napi::Result<f64> {
        safe_number("forgottenAtEpoch", self.lease.forgotten_at_epoch()).or_throw(&env)
    }

    /// The synchronous write gate: throws FENCED unless the lease is provably held.
    #[napi]
    pub fn assert_held(&self, env: Env) -> napi::Result<()> {
        self.lease.assert_held().or_throw(&env)
    }

    #[napi]
    pub fn is_held(&self) -> bool {
        self.lease.is_held()
    }

    /// Milliseconds until the local fence; zero or negative once fenced.
    #[napi]
    pub fn remaining_ms(&self, env: Env) -> napi::Result<f64> {
        self.lease.remaining_ms().or_throw(&env)
    }

    /// Extends the lease; settles after every earlier renew or release of this holder.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn renew(&self, env: Env, wall_now_ms: Option<Unknown<'_>>) -> napi::Result<Pending<UnitTask>> {
        self.in_turn(&env, wall_now_ms, TenantLease::renew_in_turn)
    }

    /// Stops acknowledging, then tells the store; settles in call order like `renew`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn release(&self, env: Env, wall_now_ms: Option<Unknown<'_>>) -> napi::Result<Pending<UnitTask>> {
        self.in_turn(&env, wall_now_ms, TenantLease::release_in_turn)
    }

    /// Marks every durable copy up to this epoch dead; only a provably held lease may.
    #[napi(ts_return_type = "Promise<LeaseRecord>")]
    pub fn mark_forgotten(
        &self,
        env: Env,
        wall_now_ms: Option<Unknown<'_>>,
    ) -> napi::Result<Pending<RecordTask>> {
        let lease = self.lease.clone();
        queue(&env, Some(&self.lane), || {
            let now = self.wall_reading(wall_now_ms.as_ref())?;
            Ok(Job::new(now, move || lease.mark_forgotten()))
        })
    }
}

impl NativeLease {
    /// The core's holder, for the copies written and restored under it.
    pub(crate) fn holder(&self) -> Arc<TenantLease> {
        self.lease.clone()
    }

    /// A handle on a lease that a keeper holds. A keeper's store never has a JS clock (the
    /// keeper's own thread could not read one), so no call carries a reading.
    pub(crate) fn kept(lease: Arc<TenantLease>, lane: &Arc<Lane>) -> NativeLease {
        NativeLease {
            lease,
            lane: lane.clone(),
            host_wall_clock: false,
        }
    }

    fn wall_reading(&self, value: Option<&Unknown<'_>>) -> Result<Option<i64>> {
        crate::store::wall_reading(self.host_wall_clock, value)
    }

    /// Takes the holder's next turn now, on the JS thread, and runs `step` in it on the lane.
    fn in_turn(
        &self,
        env: &Env,
        wall_now_ms: Option<Unknown<'_>>,
        step: fn(&TenantLease, gotry_tenant_state::Turn) -> Result<()>,
    ) -> napi::Result<Pending<UnitTask>> {
        queue(env, Some(&self.lane), || {
            let now = self.wall_reading(wall_now_ms.as_ref())?;
            let (turn, lease) = (self.lease.take_turn(), self.lease.clone());
            Ok(Job::new(now, move || step(&lease, turn)))
        })
    }
}
