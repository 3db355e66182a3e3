//! Blocking core calls as napi tasks, run on their store's lane (`executor.rs`).
//!
//! Every task owns its inputs (strings, `Arc`s of the store or the lease, a clock reading): a
//! JS value cannot be touched off the JS thread. The JS value is built back on the JS thread in
//! `resolve`, where a core error also becomes its JS error, so the promise rejects with it.

use gotry_tenant_state::errors::{Error, Result};
use gotry_tenant_state::{
    CopyId, CopyListing, GcReport, HistoryEntry, LeaseGrant, LeaseRecord, ObjectInfo, PutOutcome,
    RestoreReport, RouterTickReport, ShutdownReport, TickReport, WrittenCopy,
};
use std::sync::Arc;

use napi::bindgen_prelude::{Buffer, Task};
use napi::Env;

use crate::args::safe_number;
use crate::clock::with_wall_reading;
use crate::copies::{JsCopyId, JsCopyListing, JsGcReport, JsRestoreReport, JsWrittenCopy};
use crate::durable::{object_bytes, put_outcome, JsObjectInfo, NativeDurableStore};
use crate::errors::OrThrow;
use crate::executor::{Lane, Pending};
use crate::keeper::{JsTickReport, ShutdownReportValue};
use crate::lease::NativeLease;
use crate::router::{CloseReportValue, JsRouterTickReport, NativeRouterCall, NativeTenantHandle};
use crate::store::{JsHistoryEntry, JsLeaseGrant, JsLeaseRecord, NativeStore, RenewAnswer};

type Work<T> = Box<dyn FnOnce() -> Result<T> + Send>;

/// One blocking call, run once off the JS thread.
pub struct Job<T> {
    work: Option<Work<T>>,
}

impl<T> Job<T> {
    /// `wall_reading` is the store clock reading taken on the JS thread for a store whose clock
    /// is a JS function (see `clock.rs`); `None` for a native clock.
    pub fn new(wall_reading: Option<i64>, work: impl FnOnce() -> Result<T> + Send + 'static) -> Job<T> {
        Job {
            work: Some(Box::new(move || with_wall_reading(wall_reading, work))),
        }
    }

    /// A job whose answer was found on the JS thread: its task only builds the JS value.
    pub fn done() -> Job<T> {
        Job { work: None }
    }

    fn run(&mut self) -> Result<T> {
        match self.work.take() {
            Some(work) => work(),
            None => Err(Error::InvalidArgument {
                message: "a store call cannot run twice".to_owned(),
            }),
        }
    }
}

/// A task that runs one [`Job`].
pub trait JobTask: Task + Sized + 'static {
    type Core;

    fn of(job: Job<Self::Core>) -> Self;
}

/// Checks a call's arguments on the JS thread, where a bad one throws before anything is
/// queued, and queues the job that `prepare` makes of them on `lane` (`None`: a thread of its
/// own). The job owns all it uses: it runs after the call has returned.
pub fn queue<T: JobTask>(
    env: &Env,
    lane: Option<&Arc<Lane>>,
    prepare: impl FnOnce() -> Result<Job<T::Core>>,
) -> napi::Result<Pending<T>> {
    prepare().map(|job| Pending::new(lane, T::of(job))).or_throw(env)
}

/// Declares a task type: `$core` computed off the JS thread, turned into `$js` by `$convert`.
macro_rules! blocking_task {
    ($(#[$doc:meta])* $name:ident: $core:ty => $js:ty, $convert:expr) => {
        $(#[$doc])*
        pub struct $name(pub Job<$core>);

        impl JobTask for $name {
            type Core = $core;

            fn of(job: Job<$core>) -> $name {
                $name(job)
            }
        }

        impl Task for $name {
            type Output = Result<$core>;
            type JsValue = $js;

            fn compute(&mut self) -> napi::Result<Self::Output> {
                Ok(self.0.run())
            }

            fn resolve(&mut self, env: Env, output: Self::Output) -> napi::Result<Self::JsValue> {
                output.and_then($convert).or_throw(&env)
            }
        }
    };
}

blocking_task!(
    /// `read`: the record, or `null`.
    ReadTask: Option<LeaseRecord> => Option<JsLeaseRecord>,
    |record: Option<LeaseRecord>| record.as_ref().map(JsLeaseRecord::from_core).transpose()
);

blocking_task!(
    /// `acquire` and `renew` of the store: the grant.
    GrantTask: LeaseGrant => JsLeaseGrant,
    |grant: LeaseGrant| JsLeaseGrant::from_core(&grant)
);

blocking_task!(
    /// `renewBatch`: one answer per lease, in the order asked.
    RenewBatchTask: Vec<Result<LeaseGrant>> => Vec<RenewAnswer>,
    |answers: Vec<Result<LeaseGrant>>| Ok(answers.into_iter().map(RenewAnswer).collect())
);

blocking_task!(
    /// `release` and `markForgotten`: the record after the operation.
    RecordTask: LeaseRecord => JsLeaseRecord,
    |record: LeaseRecord| JsLeaseRecord::from_core(&record)
);

blocking_task!(
    /// `openLeaseStore`: the opened store.
    OpenStoreTask: NativeStore => NativeStore,
    Ok
);

blocking_task!(
    /// `historyAsync`: every granted operation in order.
    HistoryTask: Vec<HistoryEntry> => Vec<JsHistoryEntry>,
    JsHistoryEntry::all
);

blocking_task!(
    /// `nowMsAsync`: the store's clock reading.
    ClockTask: i64 => f64,
    |now: i64| safe_number("the store's clock reading", now)
);

blocking_task!(
    /// A holder's `renew` and `release`: nothing but success or the error.
    UnitTask: () => (),
    Ok
);

blocking_task!(
    /// `TenantLease.acquire` and a keeper's `acquire`: the native holder.
    LeaseTask: NativeLease => NativeLease,
    Ok
);

blocking_task!(
    /// A keeper's `remove`: whether the key was kept.
    RemovedTask: bool => bool,
    Ok
);

blocking_task!(
    /// A keeper's `tick`: what the round did.
    KeeperTickTask: TickReport => JsTickReport,
    |report: TickReport| Ok(JsTickReport::from(report))
);

blocking_task!(
    /// A keeper's `shutdown`: what became of each lease.
    ShutdownTask: ShutdownReport => ShutdownReportValue,
    |report: ShutdownReport| Ok(ShutdownReportValue(report))
);

blocking_task!(
    /// `openDurableStore`: the opened store.
    OpenDurableTask: NativeDurableStore => NativeDurableStore,
    Ok
);

blocking_task!(
    /// A durable store's `putNew`: whether the object was created.
    PutTask: PutOutcome => String,
    |outcome: PutOutcome| Ok(put_outcome(outcome))
);

blocking_task!(
    /// A durable store's `get`: the bytes, or `null`.
    GetTask: Option<Vec<u8>> => Option<Buffer>,
    |bytes: Option<Vec<u8>>| Ok(object_bytes(bytes))
);

blocking_task!(
    /// A durable store's `list`.
    ListObjectsTask: Vec<ObjectInfo> => Vec<JsObjectInfo>,
    |objects: Vec<ObjectInfo>| objects.into_iter().map(JsObjectInfo::from_core).collect()
);

blocking_task!(
    /// `writeCopy`: the copy taken as written.
    WrittenCopyTask: WrittenCopy => JsWrittenCopy,
    JsWrittenCopy::from_core
);

blocking_task!(
    /// `restore`: what was restored and skipped.
    RestoreTask: RestoreReport => JsRestoreReport,
    JsRestoreReport::from_core
);

blocking_task!(
    /// The copies' `list`.
    CopyListTask: Vec<CopyListing> => Vec<JsCopyListing>,
    JsCopyListing::all
);

blocking_task!(
    /// `forgetCopies`: the copies deleted.
    CopyIdsTask: Vec<CopyId> => Vec<JsCopyId>,
    JsCopyId::all
);

blocking_task!(
    /// `gc`: what was kept and deleted.
    GcTask: GcReport => JsGcReport,
    JsGcReport::from_core
);

blocking_task!(
    /// A router's `open`: the served tenant.
    RouterOpenTask: NativeTenantHandle => NativeTenantHandle,
    Ok
);

blocking_task!(
    /// A router's `begin`: the call in flight.
    RouterBeginTask: NativeRouterCall => NativeRouterCall,
    Ok
);

blocking_task!(
    /// A router's `tick`: what the round did.
    RouterTickTask: RouterTickReport => JsRouterTickReport,
    |report: RouterTickReport| Ok(JsRouterTickReport::from(report))
);

blocking_task!(
    /// A router's `close`: what became of each tenant.
    CloseTask: CloseReportValue => CloseReportValue,
    Ok
);
