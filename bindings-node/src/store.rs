//! The lease store for JavaScript: every operation that may wait for SQLite's write lock runs
//! as an async task; `history` and `close` stay synchronous as in the reference. Opening by URL,
//! `history` and `nowMs` also have promise forms: on a MySQL store the synchronous ones wait for
//! the network on the JS thread.

use std::sync::Arc;

use gotry_tenant_state::errors::{Error, Result};
use gotry_tenant_state::{
    HistoryEntry, LeaseGrant, LeaseRecord, LeaseStore, SqliteLeaseStore, SqliteOptions, WallClock,
};
use napi::bindgen_prelude::{Array, AsyncTask, FromNapiValue, JsValue, Object, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::args::{self, safe_number};
use crate::clock::{HostWallClock, ManualClock};
use crate::errors::OrThrow;
use crate::executor::{Lane, Pending};
use crate::objects::{object_value, set_error, ObjectValue};
use crate::tasks::{
    queue, ClockTask, GrantTask, HistoryTask, Job, OpenStoreTask, ReadTask, RecordTask, RenewBatchTask,
};

/// The state of one tenant's lease.
#[napi(object, js_name = "LeaseRecord")]
pub struct JsLeaseRecord {
    pub key: String,
    pub owner: String,
    pub epoch: f64,
    pub lease_until_ms: f64,
    pub forgotten_at_epoch: f64,
}

impl JsLeaseRecord {
    pub fn from_core(record: &LeaseRecord) -> Result<JsLeaseRecord> {
        Ok(JsLeaseRecord {
            key: record.key.clone(),
            owner: record.owner.clone(),
            epoch: safe_number("epoch", record.epoch)?,
            lease_until_ms: safe_number("leaseUntilMs", record.lease_until_ms)?,
            forgotten_at_epoch: safe_number("forgottenAtEpoch", record.forgotten_at_epoch)?,
        })
    }
}

/// A granted acquire or renew.
#[napi(object, js_name = "LeaseGrant")]
pub struct JsLeaseGrant {
    pub record: JsLeaseRecord,
    pub ttl_ms: f64,
}

impl JsLeaseGrant {
    pub fn from_core(grant: &LeaseGrant) -> Result<JsLeaseGrant> {
        Ok(JsLeaseGrant {
            record: JsLeaseRecord::from_core(&grant.record)?,
            ttl_ms: safe_number("ttlMs", grant.ttl_ms)?,
        })
    }
}

/// One lease's answer in a batched renewal: `{ ok: true, grant }` or `{ ok: false, error }`.
/// A refusal is a value, not a rejection, so one lost tenant does not hide the others.
pub struct RenewAnswer(pub Result<LeaseGrant>);

object_value!(RenewAnswer, "RenewAnswer");

impl ObjectValue for RenewAnswer {
    fn fill(self, env: &Env, object: &mut Object<'_>) -> napi::Result<()> {
        match self.0.and_then(|grant| JsLeaseGrant::from_core(&grant)) {
            Ok(grant) => {
                object.set("ok", true)?;
                object.set("grant", grant)
            }
            Err(error) => {
                object.set("ok", false)?;
                set_error(env, object, error)
            }
        }
    }
}

/// One granted operation of the store's log.
#[napi(object, js_name = "HistoryEntry")]
pub struct JsHistoryEntry {
    pub key: String,
    pub op: String,
    pub owner: String,
    pub epoch: f64,
    pub at_ms: f64,
}

impl JsHistoryEntry {
    pub fn all(entries: Vec<HistoryEntry>) -> Result<Vec<JsHistoryEntry>> {
        entries.into_iter().map(JsHistoryEntry::from_core).collect()
    }

    fn from_core(entry: HistoryEntry) -> Result<JsHistoryEntry> {
        Ok(JsHistoryEntry {
            epoch: safe_number("epoch", entry.epoch)?,
            at_ms: safe_number("atMs", entry.at_ms)?,
            op: entry.op.as_str().to_owned(),
            key: entry.key,
            owner: entry.owner,
        })
    }
}

/// A lease store opened natively. When its clock is a JS function, every operation is handed
/// the reading that the JS layer took at call time (`wallNowMs`).
#[napi]
pub struct NativeStore {
    pub(crate) store: Arc<dyn LeaseStore>,
    /// Where every blocking call on this store runs, its holders' and kept leases' too (a
    /// keeper's own calls have a lane of their own).
    pub(crate) lane: Arc<Lane>,
    host_clock: bool,
}

#[napi]
impl NativeStore {
    /// Opens (and creates) the SQLite store at `path`. Its clock is `manualClock` when given,
    /// the JS layer's readings when `hostClock`, the system clock otherwise.
    #[napi(factory)]
    pub fn open_sqlite(
        env: Env,
        path: Unknown<'_>,
        manual_clock: Option<&ManualClock>,
        host_clock: bool,
    ) -> napi::Result<NativeStore> {
        let open = || -> Result<NativeStore> {
            let path = args::string("path", &path)?;
            let clock: Arc<dyn WallClock> = match (manual_clock, host_clock) {
                (Some(manual), _) => manual.inner.clone(),
                (None, true) => Arc::new(HostWallClock),
                (None, false) => SqliteOptions::default().clock,
            };
            let store = SqliteLeaseStore::open_with(
                path,
                SqliteOptions {
                    clock,
                    ..SqliteOptions::default()
                },
            )?;
            Ok(NativeStore::new(
                Arc::new(store),
                host_clock && manual_clock.is_none(),
            ))
        };
        open().or_throw(&env)
    }

    /// Opens the store a URL names (`sqlite:path.db`, ...), on the system clock, as a promise
    /// on a thread of its own: a server store connects while it opens, and a server that does
    /// not answer holds the call for the store's whole timeout, which must neither block the
    /// event loop nor take a thread that other stores' calls need.
    #[napi(ts_return_type = "Promise<NativeStore>")]
    pub fn open_url(env: Env, url: Unknown<'_>) -> napi::Result<Pending<OpenStoreTask>> {
        queue(&env, None, || {
            let url = args::string("url", &url)?;
            Ok(Job::new(None, move || NativeStore::open_url_now(&url)))
        })
    }

    /// Whether every operation needs a store clock reading taken by the caller.
    #[napi(getter)]
    pub fn host_clock(&self) -> bool {
        self.host_clock
    }

    /// Answered on the JS thread when that cannot wait ([`LeaseStore::read_now`]) and no
    /// call made before it is still queued or running, so it sees them all; on the store's
    /// lane otherwise. The reference reads on the event loop too, without the first check.
    #[napi(ts_return_type = "Promise<LeaseRecord | null>")]
    pub fn read(&self, env: Env, key: Unknown<'_>) -> napi::Result<Pending<ReadTask>> {
        let key = args::text("key", &key).or_throw(&env)?;
        let store = self.store.clone();
        if self.lane.is_idle() {
            if let Some(answer) = store.read_now(&key) {
                return Ok(Pending::answered(ReadTask(Job::done()), answer));
            }
        }
        queue(&env, Some(&self.lane), || {
            Ok(Job::new(None, move || store.read(&key)))
        })
    }

    #[napi(ts_return_type = "Promise<LeaseGrant>")]
    pub fn acquire(
        &self,
        env: Env,
        key: Unknown<'_>,
        owner: Unknown<'_>,
        ttl_ms: Unknown<'_>,
        wall_now_ms: Option<Unknown<'_>>,
    ) -> napi::Result<Pending<GrantTask>> {
        queue(&env, Some(&self.lane), || {
            let key = args::text("key", &key)?;
            let owner = args::text("owner", &owner)?;
            let ttl_ms = args::integer("ttlMs", &ttl_ms)?;
            let store = self.store.clone();
            let now = self.wall_reading(wall_now_ms.as_ref())?;
            Ok(Job::new(now, move || store.acquire(&key, &owner, ttl_ms)))
        })
    }

    #[napi(ts_return_type = "Promise<LeaseGrant>")]
    pub fn renew(
        &self,
        env: Env,
        key: Unknown<'_>,
        owner: Unknown<'_>,
        epoch: Unknown<'_>,
        ttl_ms: Unknown<'_>,
        wall_now_ms: Option<Unknown<'_>>,
    ) -> napi::Result<Pending<GrantTask>> {
        queue(&env, Some(&self.lane), || {
            self.renew_job([&key, &owner, &epoch, &ttl_ms], wall_now_ms.as_ref())
        })
    }

    /// Benchmark only (`bench/executor.mjs`), not part of the package's API: `renew` run as
    /// napi's own `AsyncTask` on libuv's thread pool instead of the store's lane, the baseline
    /// that the executor is weighed against.
    #[napi(ts_return_type = "Promise<LeaseGrant>")]
    pub fn bench_renew_on_libuv(
        &self,
        env: Env,
        key: Unknown<'_>,
        owner: Unknown<'_>,
        epoch: Unknown<'_>,
        ttl_ms: Unknown<'_>,
        wall_now_ms: Option<Unknown<'_>>,
    ) -> napi::Result<AsyncTask<GrantTask>> {
        self.renew_job([&key, &owner, &epoch, &ttl_ms], wall_now_ms.as_ref())
            .map(|job| AsyncTask::new(GrantTask(job)))
            .or_throw(&env)
    }

    /// Renews many leases of `owner` in one store transaction. A malformed call (owner, TTL, a
    /// key that is not a string, an epoch that is not a safe integer) rejects as a whole before
    /// the store is asked; otherwise each lease is answered on its own.
    #[napi(ts_return_type = "Promise<Array<RenewAnswer>>")]
    pub fn renew_batch(
        &self,
        env: Env,
        owner: Unknown<'_>,
        ttl_ms: Unknown<'_>,
        leases: Array<'_>,
        wall_now_ms: Option<Unknown<'_>>,
    ) -> napi::Result<Pending<RenewBatchTask>> {
        queue(&env, Some(&self.lane), || {
            let owner = args::text("owner", &owner)?;
            let ttl_ms = args::integer("ttlMs", &ttl_ms)?;
            let pairs = lease_pairs(&leases)?;
            let store = self.store.clone();
            let now = self.wall_reading(wall_now_ms.as_ref())?;
            Ok(Job::new(now, move || {
                let borrowed: Vec<(&str, i64)> =
                    pairs.iter().map(|(key, epoch)| (key.as_str(), *epoch)).collect();
                store.renew_batch(&owner, ttl_ms, &borrowed)
            }))
        })
    }

    #[napi(ts_return_type = "Promise<LeaseRecord>")]
    pub fn release(
        &self,
        env: Env,
        key: Unknown<'_>,
        owner: Unknown<'_>,
        epoch: Unknown<'_>,
        wall_now_ms: Option<Unknown<'_>>,
    ) -> napi::Result<Pending<RecordTask>> {
        self.holder_call(
            &env,
            [&key, &owner, &epoch],
            wall_now_ms.as_ref(),
            |store, key, owner, epoch| store.release(key, owner, epoch),
        )
    }

    #[napi(ts_return_type = "Promise<LeaseRecord>")]
    pub fn mark_forgotten(
        &self,
        env: Env,
        key: Unknown<'_>,
        owner: Unknown<'_>,
        epoch: Unknown<'_>,
        wall_now_ms: Option<Unknown<'_>>,
    ) -> napi::Result<Pending<RecordTask>> {
        self.holder_call(
            &env,
            [&key, &owner, &epoch],
            wall_now_ms.as_ref(),
            |store, key, owner, epoch| store.mark_forgotten(key, owner, epoch),
        )
    }

    /// Every granted operation in order, of one key or of all. Synchronous as in the reference:
    /// it waits for a store call that is running on the store's lane, never for another process.
    #[napi]
    pub fn history(&self, env: Env, key: Option<Unknown<'_>>) -> napi::Result<Vec<JsHistoryEntry>> {
        let history = || -> Result<Vec<JsHistoryEntry>> {
            let key = history_key(key.as_ref())?;
            JsHistoryEntry::all(self.store.history(key.as_deref())?)
        };
        history().or_throw(&env)
    }

    /// `history` as a promise, queued on the store's lane behind the calls made before it: on
    /// SQLite, whose lane runs one call at a time, it sees them without awaiting them first.
    #[napi(ts_return_type = "Promise<Array<HistoryEntry>>")]
    pub fn history_async(&self, env: Env, key: Option<Unknown<'_>>) -> napi::Result<Pending<HistoryTask>> {
        let store = self.store.clone();
        queue(&env, Some(&self.lane), || {
            let key = history_key(key.as_ref())?;
            Ok(Job::new(None, move || store.history(key.as_deref())))
        })
    }

    /// The clock the store decides on, read synchronously: the system clock, a manual clock, or
    /// for a MySQL store the database server's clock (one round trip, bounded by its timeout).
    #[napi]
    pub fn now_ms(&self, env: Env) -> napi::Result<f64> {
        let now = || safe_number("the store's clock reading", self.store.now_ms()?);
        now().or_throw(&env)
    }

    /// `nowMs` as a promise, on the store's lane. For a store whose clock is a JS function it
    /// resolves to the reading taken when the call was made (`wallNowMs`), checked as every
    /// call's reading is.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn now_ms_async(
        &self,
        env: Env,
        wall_now_ms: Option<Unknown<'_>>,
    ) -> napi::Result<Pending<ClockTask>> {
        let store = self.store.clone();
        queue(&env, Some(&self.lane), || {
            let now = self.wall_reading(wall_now_ms.as_ref())?;
            Ok(Job::new(now, move || store.now_ms()))
        })
    }

    /// Closes the store; later calls fail with LEASE_STORE_UNAVAILABLE.
    #[napi]
    pub fn close(&self, env: Env) -> napi::Result<()> {
        self.store.close().or_throw(&env)
    }
}

impl NativeStore {
    fn new(store: Arc<dyn LeaseStore>, host_clock: bool) -> NativeStore {
        NativeStore {
            lane: Lane::for_store(store.concurrent_calls()),
            store,
            host_clock,
        }
    }

    /// The store a URL names, opened on the calling thread.
    fn open_url_now(url: &str) -> Result<NativeStore> {
        Ok(NativeStore::new(
            gotry_tenant_state::open_lease_store(url)?,
            false,
        ))
    }

    pub(crate) fn wall_reading(&self, value: Option<&Unknown<'_>>) -> Result<Option<i64>> {
        wall_reading(self.host_clock, value)
    }

    /// `renew`'s arguments checked, as the call it makes.
    fn renew_job(
        &self,
        [key, owner, epoch, ttl_ms]: [&Unknown<'_>; 4],
        wall_now_ms: Option<&Unknown<'_>>,
    ) -> Result<Job<LeaseGrant>> {
        let (key, owner, epoch) = holder_args(key, owner, epoch)?;
        let ttl_ms = args::integer("ttlMs", ttl_ms)?;
        let store = self.store.clone();
        let now = self.wall_reading(wall_now_ms)?;
        Ok(Job::new(now, move || store.renew(&key, &owner, epoch, ttl_ms)))
    }

    /// `release` and `markForgotten`: the same arguments, the same shape of task.
    fn holder_call(
        &self,
        env: &Env,
        [key, owner, epoch]: [&Unknown<'_>; 3],
        wall_now_ms: Option<&Unknown<'_>>,
        operation: fn(&dyn LeaseStore, &str, &str, i64) -> Result<LeaseRecord>,
    ) -> napi::Result<Pending<RecordTask>> {
        queue(env, Some(&self.lane), || {
            let (key, owner, epoch) = holder_args(key, owner, epoch)?;
            let store = self.store.clone();
            let now = self.wall_reading(wall_now_ms)?;
            Ok(Job::new(now, move || {
                operation(store.as_ref(), &key, &owner, epoch)
            }))
        })
    }
}

/// The `[key, epoch]` pairs of a batch. A key's length is left to the store, which refuses
/// it for that lease alone; a value that cannot even be handed to the store (not a pair, a
/// key that is not a well-formed string, an epoch that is not a safe integer) refuses the
/// whole call.
fn lease_pairs(leases: &Array<'_>) -> Result<Vec<(String, i64)>> {
    (0..leases.len())
        .map(|index| {
            let not_a_pair = || Error::InvalidArgument {
                message: format!("lease {index} of the batch must be a [key, epoch] pair"),
            };
            let pair = element(leases, index)?.ok_or_else(not_a_pair)?;
            // SAFETY: a value of the current call, read on its own thread; napi checks the type.
            let pair =
                unsafe { Array::from_napi_value(pair.value().env, pair.raw()) }.map_err(|_| not_a_pair())?;
            match (pair.len(), element(&pair, 0)?, element(&pair, 1)?) {
                (2, Some(key), Some(epoch)) => {
                    Ok((args::string("key", &key)?, args::integer("epoch", &epoch)?))
                }
                _ => Err(not_a_pair()),
            }
        })
        .collect()
}

fn element<'env>(array: &Array<'env>, index: u32) -> Result<Option<Unknown<'env>>> {
    array
        .get::<Unknown<'env>>(index)
        .map_err(|error| Error::Host(Box::new(error)))
}

/// The key of `history`: all keys when it is missing, `null` or `undefined`.
fn history_key(key: Option<&Unknown<'_>>) -> Result<Option<String>> {
    match key {
        Some(key) if !args::is_nullish(key)? => Ok(Some(args::string("key", key)?)),
        _ => Ok(None),
    }
}

/// Key, owner and epoch, checked in the reference's order.
fn holder_args(key: &Unknown<'_>, owner: &Unknown<'_>, epoch: &Unknown<'_>) -> Result<(String, String, i64)> {
    let key = args::text("key", key)?;
    let owner = args::text("owner", owner)?;
    let epoch = args::integer("epoch", epoch)?;
    Ok((key, owner, epoch))
}

/// The store clock reading for one call: required when the store's clock is a JS function,
/// ignored otherwise (a native clock is read inside the transaction). A reading so late that a
/// deadline after it would not fit a JS number is refused before anything is written.
pub(crate) fn wall_reading(host_clock: bool, value: Option<&Unknown<'_>>) -> Result<Option<i64>> {
    if !host_clock {
        return Ok(None);
    }
    let latest = args::MAX_SAFE_INTEGER - gotry_tenant_state::MAX_LEASE_TTL_MS;
    match args::optional_integer("the store's nowMs()", value)? {
        Some(now) if now <= latest => Ok(Some(now)),
        _ => Err(Error::InvalidArgument {
            message: format!("the store's nowMs() must return an integer of at most {latest}"),
        }),
    }
}

/// Shortest lease a store grants, in milliseconds.
#[napi]
pub const MIN_LEASE_TTL_MS: u32 = gotry_tenant_state::MIN_LEASE_TTL_MS as u32;

/// Longest lease a store grants, in milliseconds.
#[napi]
pub const MAX_LEASE_TTL_MS: u32 = gotry_tenant_state::MAX_LEASE_TTL_MS as u32;

/// Throws a `RangeError` unless `ttlMs` is an integer within the bounds above.
#[napi]
pub fn assert_lease_ttl(env: Env, ttl_ms: Unknown<'_>) -> napi::Result<()> {
    let check = || gotry_tenant_state::assert_lease_ttl(args::integer("ttlMs", &ttl_ms)?);
    check().map(drop).or_throw(&env)
}
