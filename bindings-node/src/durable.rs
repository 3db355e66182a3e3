//! Durable stores for JavaScript: where a tenant's copies outlive the replica that wrote them.
//!
//! Every call that reaches the store runs on the store's lane, on the threads kept for
//! durable work (`executor.rs`): an S3 request can take seconds, and must not hold a thread
//! that lease renewals need. Opening a folder is synchronous (it creates and flushes a few
//! folders, as opening a SQLite store does); opening a URL is not, since an S3 store proves at
//! open that the server honours create-only writes, which takes round trips.

use std::sync::Arc;

use gotry_tenant_state::errors::Result;
use gotry_tenant_state::{DirectoryDurableStore, DurableStore, ObjectInfo, PutOutcome};
use napi::bindgen_prelude::{Buffer, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::args::{self, safe_count};
use crate::errors::OrThrow;
use crate::executor::{Lane, Pending};
use crate::tasks::{queue, GetTask, Job, JobTask, ListObjectsTask, OpenDurableTask, PutTask, UnitTask};

/// One listed object.
#[napi(object, js_name = "ObjectInfo")]
pub struct JsObjectInfo {
    pub key: String,
    pub size: f64,
}

impl JsObjectInfo {
    pub fn from_core(object: ObjectInfo) -> Result<JsObjectInfo> {
        Ok(JsObjectInfo {
            size: safe_count("size", object.size)?,
            key: object.key,
        })
    }
}

/// The answer of a create-only put, as the JS layer passes it on.
pub fn put_outcome(outcome: PutOutcome) -> String {
    match outcome {
        PutOutcome::Created => "created",
        PutOutcome::AlreadyExists => "alreadyExists",
    }
    .to_owned()
}

/// Any durable store of the core.
#[napi]
pub struct NativeDurableStore {
    pub(crate) store: Arc<dyn DurableStore>,
    /// Where this store's calls run, the calls of every `EpochCopies` over it too.
    pub(crate) lane: Arc<Lane>,
}

impl NativeDurableStore {
    pub(crate) fn new(store: Arc<dyn DurableStore>) -> NativeDurableStore {
        NativeDurableStore {
            store,
            lane: Lane::for_copies(),
        }
    }
}

/// Opens the store a URL names (`file:///abs/dir`, `file:rel/dir`,
/// `s3://bucket/prefix?endpoint=...&region=...`).
#[napi(ts_return_type = "Promise<NativeDurableStore>")]
pub fn open_durable_store(env: Env, url: Unknown<'_>) -> napi::Result<Pending<OpenDurableTask>> {
    // Its own lane: the store it opens gets another one.
    queue(&env, Some(&Lane::for_copies()), || {
        let url = args::string("url", &url)?;
        Ok(Job::new(None, move || {
            gotry_tenant_state::open_durable_store(&url).map(NativeDurableStore::new)
        }))
    })
}

#[napi]
impl NativeDurableStore {
    /// Opens the store in the folder `path`, creating it and its parents when missing.
    #[napi(factory)]
    pub fn open_directory(env: Env, path: Unknown<'_>) -> napi::Result<NativeDurableStore> {
        let open = || -> Result<NativeDurableStore> {
            let path = args::string("path", &path)?;
            Ok(NativeDurableStore::new(Arc::new(DirectoryDurableStore::open(
                path,
            )?)))
        };
        open().or_throw(&env)
    }

    /// Where the store is, without any credential: safe to log.
    #[napi(getter)]
    pub fn location(&self) -> String {
        self.store.location()
    }

    #[napi(ts_return_type = "Promise<'created' | 'alreadyExists'>")]
    pub fn put_new(&self, env: Env, key: Unknown<'_>, bytes: Unknown<'_>) -> napi::Result<Pending<PutTask>> {
        let store = self.store.clone();
        queue(&env, Some(&self.lane), || {
            let key = args::string("key", &key)?;
            let bytes = args::bytes("bytes", &bytes)?;
            Ok(Job::new(None, move || store.put_new(&key, &bytes)))
        })
    }

    #[napi(ts_return_type = "Promise<Buffer | null>")]
    pub fn get(&self, env: Env, key: Unknown<'_>) -> napi::Result<Pending<GetTask>> {
        self.by_name(&env, "key", &key, |store, key| store.get(key))
    }

    #[napi(ts_return_type = "Promise<Array<ObjectInfo>>")]
    pub fn list(&self, env: Env, prefix: Unknown<'_>) -> napi::Result<Pending<ListObjectsTask>> {
        self.by_name(&env, "prefix", &prefix, |store, prefix| store.list(prefix))
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn delete(&self, env: Env, key: Unknown<'_>) -> napi::Result<Pending<UnitTask>> {
        self.by_name(&env, "key", &key, |store, key| store.delete(key))
    }
}

impl NativeDurableStore {
    /// `get`, `list` and `delete`: one string argument, then the store call on the lane.
    fn by_name<T: JobTask>(
        &self,
        env: &Env,
        name: &str,
        value: &Unknown<'_>,
        call: fn(&dyn DurableStore, &str) -> Result<T::Core>,
    ) -> napi::Result<Pending<T>> {
        let store = self.store.clone();
        queue(env, Some(&self.lane), || {
            let text = args::string(name, value)?;
            Ok(Job::new(None, move || call(store.as_ref(), &text)))
        })
    }
}

/// The JS value of a `get`: a Buffer that owns the object's bytes.
pub fn object_bytes(bytes: Option<Vec<u8>>) -> Option<Buffer> {
    bytes.map(Buffer::from)
}
