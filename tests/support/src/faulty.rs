//! A lease store wrapper for the tests of what runs on top of a store (holders, keepers):
//! it passes every call to the store inside, and lets a test fail, hold back or watch any
//! of them, or change the store inside, without writing a wrapper of its own.

use std::sync::{Arc, Mutex, RwLock};

use gotry_tenant_state::{Error, HistoryEntry, LeaseGrant, LeaseRecord, LeaseStore, Result};

/// A call to the store, with its arguments, as a hook sees it before the call is passed on.
#[derive(Debug, Clone, Copy)]
pub enum Call<'a> {
    Read {
        key: &'a str,
    },
    Acquire {
        key: &'a str,
        owner: &'a str,
        ttl_ms: i64,
    },
    Renew {
        key: &'a str,
        owner: &'a str,
        epoch: i64,
        ttl_ms: i64,
    },
    RenewBatch {
        owner: &'a str,
        ttl_ms: i64,
        leases: &'a [(&'a str, i64)],
    },
    Release {
        key: &'a str,
        owner: &'a str,
        epoch: i64,
    },
    ReleaseBatch {
        owner: &'a str,
        leases: &'a [(&'a str, i64)],
    },
    MarkForgotten {
        key: &'a str,
        owner: &'a str,
        epoch: i64,
    },
    History {
        key: Option<&'a str>,
    },
    List {
        prefix: &'a str,
    },
    NowMs,
    CompactLog,
    Close,
}

/// Which [`LeaseStore`] method a call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    Read,
    Acquire,
    Renew,
    RenewBatch,
    Release,
    ReleaseBatch,
    MarkForgotten,
    History,
    List,
    NowMs,
    CompactLog,
    Close,
}

impl Call<'_> {
    pub fn method(&self) -> Method {
        match self {
            Call::Read { .. } => Method::Read,
            Call::Acquire { .. } => Method::Acquire,
            Call::Renew { .. } => Method::Renew,
            Call::RenewBatch { .. } => Method::RenewBatch,
            Call::Release { .. } => Method::Release,
            Call::ReleaseBatch { .. } => Method::ReleaseBatch,
            Call::MarkForgotten { .. } => Method::MarkForgotten,
            Call::History { .. } => Method::History,
            Call::List { .. } => Method::List,
            Call::NowMs => Method::NowMs,
            Call::CompactLog => Method::CompactLog,
            Call::Close => Method::Close,
        }
    }

    /// How many leases the call names: a batch's length, 1 for a call on one key's lease,
    /// 0 for the others.
    pub fn leases(&self) -> usize {
        match self {
            Call::RenewBatch { leases, .. } | Call::ReleaseBatch { leases, .. } => leases.len(),
            Call::Read { .. }
            | Call::Acquire { .. }
            | Call::Renew { .. }
            | Call::Release { .. }
            | Call::MarkForgotten { .. } => 1,
            Call::History { .. } | Call::List { .. } | Call::NowMs | Call::CompactLog | Call::Close => 0,
        }
    }
}

/// Runs before each call: an error fails the call with it, and the store inside never sees
/// it; `None` passes it on. Time the hook takes is time the call takes, so a hook can play
/// a slow store too.
pub type Hook = dyn Fn(&Call<'_>) -> Option<Error> + Send + Sync;

/// The wrapper. Every call is noted (see [`FaultyStore::take_calls`]), then given to the
/// hook, then passed on.
pub struct FaultyStore {
    inner: RwLock<Arc<dyn LeaseStore>>,
    hook: RwLock<Option<Arc<Hook>>>,
    calls: Mutex<Vec<(Method, usize)>>,
}

impl FaultyStore {
    pub fn new(inner: Arc<dyn LeaseStore>) -> FaultyStore {
        FaultyStore {
            inner: RwLock::new(inner),
            hook: RwLock::new(None),
            calls: Mutex::new(Vec::new()),
        }
    }

    /// Replaces the hook. Calls in flight finish with the one they started with, and a hook
    /// may call the store itself (its own call goes through the hook too).
    pub fn set_hook(&self, hook: impl Fn(&Call<'_>) -> Option<Error> + Send + Sync + 'static) {
        *self.hook.write().unwrap() = Some(Arc::new(hook));
    }

    pub fn clear_hook(&self) {
        *self.hook.write().unwrap() = None;
    }

    /// The next `times` calls of `method` fail as unavailable (`usize::MAX`: every one, until
    /// the hook is replaced or cleared); the others pass. Replaces the hook.
    pub fn fail(&self, method: Method, times: usize) {
        let left = Mutex::new(times);
        self.set_hook(move |call| {
            if call.method() != method {
                return None;
            }
            let mut left = left.lock().unwrap();
            if *left == 0 {
                return None;
            }
            if *left != usize::MAX {
                *left -= 1;
            }
            Some(Error::LeaseStoreUnavailable {
                message: format!("{method:?} fails: injected by the test"),
            })
        });
    }

    /// How many leases each call of `method` named, in call order, since the last take of
    /// `method`; the calls of other methods are kept for their own take.
    pub fn take_calls(&self, method: Method) -> Vec<usize> {
        let mut calls = self.calls.lock().unwrap();
        let mut taken = Vec::new();
        calls.retain(|&(m, leases)| {
            if m == method {
                taken.push(leases);
            }
            m != method
        });
        taken
    }

    /// Puts the store `change` returns in place of the one inside, which it is given (to
    /// close it, say). Calls that arrive meanwhile wait, and then go to the new store.
    pub fn replace_inner(&self, change: impl FnOnce(&Arc<dyn LeaseStore>) -> Arc<dyn LeaseStore>) {
        let mut inner = self.inner.write().unwrap();
        *inner = change(&inner);
    }

    /// Notes the call and runs the hook; the store to pass the call to, unless the hook
    /// failed it.
    fn enter(&self, call: Call<'_>) -> Result<Arc<dyn LeaseStore>> {
        self.calls.lock().unwrap().push((call.method(), call.leases()));
        let hook = self.hook.read().unwrap().clone();
        if let Some(error) = hook.and_then(|hook| hook(&call)) {
            return Err(error);
        }
        Ok(Arc::clone(&self.inner.read().unwrap()))
    }
}

impl LeaseStore for FaultyStore {
    fn read(&self, key: &str) -> Result<Option<LeaseRecord>> {
        self.enter(Call::Read { key })?.read(key)
    }

    fn acquire(&self, key: &str, owner: &str, ttl_ms: i64) -> Result<LeaseGrant> {
        self.enter(Call::Acquire { key, owner, ttl_ms })?
            .acquire(key, owner, ttl_ms)
    }

    fn renew(&self, key: &str, owner: &str, epoch: i64, ttl_ms: i64) -> Result<LeaseGrant> {
        self.enter(Call::Renew {
            key,
            owner,
            epoch,
            ttl_ms,
        })?
        .renew(key, owner, epoch, ttl_ms)
    }

    fn renew_batch(
        &self,
        owner: &str,
        ttl_ms: i64,
        leases: &[(&str, i64)],
    ) -> Result<Vec<Result<LeaseGrant>>> {
        self.enter(Call::RenewBatch {
            owner,
            ttl_ms,
            leases,
        })?
        .renew_batch(owner, ttl_ms, leases)
    }

    fn release(&self, key: &str, owner: &str, epoch: i64) -> Result<LeaseRecord> {
        self.enter(Call::Release { key, owner, epoch })?
            .release(key, owner, epoch)
    }

    fn release_batch(&self, owner: &str, leases: &[(&str, i64)]) -> Result<Vec<Result<LeaseRecord>>> {
        self.enter(Call::ReleaseBatch { owner, leases })?
            .release_batch(owner, leases)
    }

    fn mark_forgotten(&self, key: &str, owner: &str, epoch: i64) -> Result<LeaseRecord> {
        self.enter(Call::MarkForgotten { key, owner, epoch })?
            .mark_forgotten(key, owner, epoch)
    }

    fn history(&self, key: Option<&str>) -> Result<Vec<HistoryEntry>> {
        self.enter(Call::History { key })?.history(key)
    }

    fn list(&self, prefix: &str) -> Result<Vec<LeaseRecord>> {
        self.enter(Call::List { prefix })?.list(prefix)
    }

    fn now_ms(&self) -> Result<i64> {
        self.enter(Call::NowMs)?.now_ms()
    }

    fn compact_log(&self) -> Result<u64> {
        self.enter(Call::CompactLog)?.compact_log()
    }

    fn close(&self) -> Result<()> {
        self.enter(Call::Close)?.close()
    }

    fn concurrent_calls(&self) -> usize {
        self.inner.read().unwrap().concurrent_calls()
    }
}
