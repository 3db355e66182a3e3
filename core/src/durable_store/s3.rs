//! The S3 backend of the durable store: any server speaking the S3 API that honours
//! conditional creates (`If-None-Match: *` on PutObject).
//!
//! `s3://[KEY_ID:SECRET@]bucket[/prefix][?endpoint=URL&region=NAME&timeout_ms=N&instance_metadata=true]`,
//! the credential and the option values percent-encoded. Whatever the URL leaves out comes
//! from the usual AWS environment (`AWS_REGION` / `AWS_DEFAULT_REGION`, `AWS_ENDPOINT_URL`).
//! The credential is the URL's; without one, the environment's: `AWS_ACCESS_KEY_ID` and
//! `AWS_SECRET_ACCESS_KEY` (with `AWS_SESSION_TOKEN`), web identity (`AWS_WEB_IDENTITY_TOKEN_FILE`
//! with `AWS_ROLE_ARN`), container credentials (`AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`, or
//! `AWS_CONTAINER_CREDENTIALS_FULL_URI` with `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`), or
//! none at all with `AWS_SKIP_SIGNATURE=true`. Only `instance_metadata=true` lets the client
//! ask the cloud's instance-metadata address (169.254.169.254) when all of those are missing:
//! otherwise a host whose variables were lost would send a request to an address its URL
//! never named, and wait for it, so the open is refused instead. The region (default
//! `us-east-1`) is 1 to 64 characters from `[A-Za-z0-9._-]`: it ends up in signed headers,
//! where anything else cannot travel. An `http://` endpoint allows plain HTTP. Keys are
//! relative to the prefix, so stores on two prefixes of one bucket never see each other's
//! objects.
//!
//! Why it is built this way:
//! - The create-only put is the fence of the copies, and some S3 servers silently overwrite
//!   instead (Garage 2.5 ignores `If-None-Match`). Opening therefore creates a probe object
//!   twice and refuses a server that accepts the second. The probe lives under `.probe/`,
//!   a name no caller key can take, and `list` never shows such names.
//! - The client retries a put after a 5xx answer or a lost connection, so "already exists"
//!   can be our own first attempt that landed after all. The object is read back: equal bytes
//!   are reported as created, since the object then holds exactly what the caller asked for.
//! - The core has no async runtime and is called from any thread, including threads of a
//!   host's own tokio runtime, where `Runtime::block_on` panics. So each call is spawned onto
//!   one private process-wide runtime and its answer awaited on a channel; the runtime lives
//!   in a static because dropping one inside an async context panics too.
//! - A stopped server must become DURABLE_STORE_UNAVAILABLE within seconds, not after the
//!   client's default of ten retries within three minutes. `timeout_ms` (default 4000) bounds
//!   connecting, each wait for the server while reading, and the time spent retrying. The
//!   HTTP client has no timeout for sending a body that does not also cut long healthy
//!   uploads, so a put gets its own deadline: `timeout_ms` plus its size at 4 MiB/s.
//! - Objects go up in one PUT: the client cannot make a multipart upload create-only, and
//!   one PUT takes objects up to 5 GB.
//! - Credentials never reach a message, `Debug` or [`S3DurableStore::location`]: S3 error
//!   bodies can echo the access key id, so messages keep only the HTTP status and S3's error
//!   code, never a body.
//!
//! Backend codes, as `backend_code` of DURABLE_STORE_UNAVAILABLE:
//! - `S3_<status>` when the server answered with an error status, `S3_<status>_<Code>` when
//!   the answer names S3's error code (`S3_503_SlowDown`, `S3_404_NoSuchBucket`,
//!   `S3_403_SignatureDoesNotMatch`, `S3_200_InternalError` for a 200 whose body is an error);
//! - `S3_CONNECT` (no connection), `S3_TIMEOUT` (no answer in time), `S3_INTERRUPTED` (the
//!   connection broke off), `S3_TRANSPORT` (any other failed HTTP exchange);
//! - `S3_NO_CONDITIONAL_WRITE`: the server accepted a create over an existing object;
//! - `S3_CLIENT`: the client failed before asking (e.g. no credentials could be loaded);
//! - `S3_RUNTIME`: the client's private threads could not be started.

use std::fmt;
use std::future::Future;
use std::sync::{mpsc, Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, AwsCredential, S3ConditionalPut};
use object_store::client::{HttpError, HttpErrorKind};
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientOptions, ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutPayload, RetryConfig,
    StaticCredentialProvider,
};

use super::{assert_object_key, assert_prefix, DurableStore, ObjectInfo, PutOutcome};
use crate::errors::{Error, Result};
use crate::plumbing::random_u64;

const DEFAULT_TIMEOUT_MS: u64 = 4_000;
const TIMEOUT_MS_RANGE: std::ops::RangeInclusive<u64> = 100..=600_000;
/// The slowest upload a put waits for before calling the server unavailable.
const MIN_UPLOAD_BYTES_PER_SEC: u64 = 4 << 20;
const MAX_RETRIES: usize = 3;
const PROBE_FOLDER: &str = ".probe";
const DEFAULT_REGION: &str = "us-east-1";

/// A durable store in an S3 bucket, under an optional prefix. `Send + Sync`; any number of
/// threads and processes may share one prefix.
pub struct S3DurableStore {
    /// Reads, lists and deletes: every wait for the server is bounded by `timeout`.
    requests: Arc<AmazonS3>,
    /// Puts, without a read timeout (it would also cut long uploads): see [`Self::create`].
    uploads: Arc<AmazonS3>,
    place: Place,
    timeout: Duration,
    /// Opened for reading: puts and deletes are refused.
    read_only: bool,
}

/// Where a store is: everything of its URL but the credential.
struct Place {
    bucket: String,
    /// Empty, or `/`-separated segments without a trailing `/`.
    prefix: String,
    region: String,
    endpoint: Option<String>,
}

impl Place {
    fn location(&self) -> String {
        let mut url = format!("s3://{}", self.bucket);
        if !self.prefix.is_empty() {
            url.push('/');
            url.push_str(&self.prefix);
        }
        url.push_str("?region=");
        url.push_str(&self.region);
        if let Some(endpoint) = &self.endpoint {
            url.push_str("&endpoint=");
            url.push_str(endpoint);
        }
        url
    }

    fn fail(&self, action: &str, failure: Failure) -> Error {
        let (code, detail) = failure.describe();
        Error::durable(code, format!("{action} {}: {detail}", self.location()))
    }
}

impl S3DurableStore {
    /// Opens the store a `s3://` URL names and checks that its server honours create-only
    /// puts (see the module documentation).
    pub fn open_url(url: &str) -> Result<S3DurableStore> {
        S3DurableStore::open_with(url, AmazonS3Builder::from_env(), false)
    }

    /// Opens the store for reading only: no probe object is written (a read needs no fence),
    /// and puts and deletes are refused.
    pub fn open_url_read_only(url: &str) -> Result<S3DurableStore> {
        S3DurableStore::open_with(url, AmazonS3Builder::from_env(), true)
    }

    /// [`Self::open_url`] over the settings in `base` (the environment's, or a test's).
    fn open_with(url: &str, base: AmazonS3Builder, read_only: bool) -> Result<S3DurableStore> {
        let parts = UrlParts::parse(url)?;
        let mut builder = base
            .with_bucket_name(&parts.bucket)
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            // One plain DELETE per key: every S3 server has it, and a store deletes one key.
            .with_disable_bulk_delete(true);
        if let Some(region) = parts.region {
            builder = builder.with_region(region);
        }
        if let Some(endpoint) = parts.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        match parts.credential {
            Some(credential) => {
                builder = builder.with_credentials(Arc::new(StaticCredentialProvider::new(credential)));
            }
            None if !parts.instance_metadata && !credential_in_environment(&builder) => {
                return Err(Error::invalid_argument(
                    "an s3:// store needs a credential: in the URL (KEY_ID:SECRET@), or in the AWS \
                     environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, web identity, container \
                     credentials, or AWS_SKIP_SIGNATURE=true); add instance_metadata=true to the URL \
                     to ask the cloud's instance-metadata address instead",
                ))
            }
            None => {}
        }
        let endpoint = builder.get_config_value(&AmazonS3ConfigKey::Endpoint);
        let allow_http = match &endpoint {
            Some(endpoint) => endpoint_is_http(endpoint)?,
            None => false,
        };
        let region = builder
            .get_config_value(&AmazonS3ConfigKey::Region)
            .unwrap_or_else(|| DEFAULT_REGION.to_owned());
        // The environment's region is checked as the URL's is.
        assert_region(&region)?;
        let options = ClientOptions::new()
            .with_allow_http(allow_http)
            .with_connect_timeout(parts.timeout)
            .with_timeout_disabled();
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(1),
                base: 2.0,
            },
            max_retries: MAX_RETRIES,
            retry_timeout: parts.timeout,
        };
        let place = Place {
            bucket: parts.bucket,
            prefix: parts.prefix,
            region,
            endpoint,
        };
        let build = |options: ClientOptions| {
            builder
                .clone()
                .with_client_options(options)
                .with_retry(retry.clone())
                .build()
                .map(Arc::new)
                .map_err(|e| place.fail("setting up the S3 client for", Failure::Store(e)))
        };
        let requests = build(options.clone().with_read_timeout(parts.timeout))?;
        let uploads = build(options)?;
        let store = S3DurableStore {
            requests,
            uploads,
            place,
            timeout: parts.timeout,
            read_only,
        };
        if !read_only {
            store.probe_conditional_create()?;
        }
        Ok(store)
    }

    /// Creates one object twice: a server that accepts the second create would let a stale
    /// holder overwrite its successor's copy.
    fn probe_conditional_create(&self) -> Result<()> {
        let key = format!("{PROBE_FOLDER}/{:016x}{:016x}", random_u64(), random_u64());
        let path = self.path_of(&key);
        let payload = || PutPayload::from_static(b"create-only probe");
        self.create(path.clone(), payload())
            .map_err(|f| self.fail(&format!("creating the probe object {key} in"), f))?;
        let second = self.create(path.clone(), payload());
        let removed = self
            .remove(path)
            .map_err(|f| self.fail(&format!("deleting the probe object {key} in"), f));
        match second {
            Err(Failure::Store(object_store::Error::AlreadyExists { .. })) => removed,
            Ok(()) => Err(Error::durable(
                "S3_NO_CONDITIONAL_WRITE",
                format!(
                    "the server of {} accepted a create-only put (If-None-Match: *) over an existing \
                     object; it would let a stale holder overwrite a newer copy, so it cannot hold copies",
                    self.place.location()
                ),
            )),
            Err(f) => Err(self.fail(&format!("creating the probe object {key} again in"), f)),
        }
    }

    fn path_of(&self, key: &str) -> Path {
        if self.place.prefix.is_empty() {
            Path::from(key)
        } else {
            Path::from(format!("{}/{key}", self.place.prefix))
        }
    }

    /// A create-only put with its own deadline, since no client timeout bounds sending a
    /// body without also cutting long uploads to a healthy server.
    fn create(&self, path: Path, payload: PutPayload) -> Result<(), Failure> {
        let store = self.uploads.clone();
        let size = payload.content_length() as u64;
        let deadline =
            self.timeout + Duration::from_millis(size.saturating_mul(1000) / MIN_UPLOAD_BYTES_PER_SEC);
        run(async move {
            match tokio::time::timeout(deadline, store.put_opts(&path, payload, PutMode::Create.into())).await
            {
                Ok(put) => put.map(drop).map_err(Failure::Store),
                Err(_) => Err(Failure::Deadline(deadline)),
            }
        })
    }

    fn read(&self, path: Path) -> Result<Option<Bytes>, Failure> {
        let store = self.requests.clone();
        run(async move {
            match store.get(&path).await {
                Ok(found) => Ok(Some(found.bytes().await.map_err(Failure::Store)?)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(Failure::Store(e)),
            }
        })
    }

    fn remove(&self, path: Path) -> Result<(), Failure> {
        let store = self.requests.clone();
        run(async move {
            match store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(Failure::Store(e)),
            }
        })
    }

    /// Every object whose name starts with `raw_prefix` (and sorts after `offset`, which S3's
    /// start-after skips on the server).
    fn list_raw(&self, raw_prefix: String, offset: Option<String>) -> Result<Vec<ObjectMeta>, Failure> {
        let store = self.requests.clone();
        run(async move {
            let mut objects = Vec::new();
            let mut page_token = None;
            loop {
                let options = PaginatedListOptions {
                    page_token,
                    offset: offset.clone(),
                    ..PaginatedListOptions::default()
                };
                // Unlike `ObjectStore::list`, this takes the prefix as a string, not as a
                // folder: `p` lists `pq` too, as the DurableStore contract says.
                let page = store
                    .list_paginated((!raw_prefix.is_empty()).then_some(raw_prefix.as_str()), options)
                    .await
                    .map_err(Failure::Store)?;
                objects.extend(page.result.objects);
                page_token = page.page_token;
                if page_token.is_none() {
                    return Ok(objects);
                }
            }
        })
    }

    fn fail(&self, action: &str, failure: Failure) -> Error {
        self.place.fail(action, failure)
    }

    fn assert_writable(&self, key: &str) -> Result<()> {
        super::assert_writable(self.read_only, key, || self.location())
    }
}

impl DurableStore for S3DurableStore {
    fn put_new(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome> {
        let path = self.path_of(assert_object_key(key)?);
        self.assert_writable(key)?;
        match self.create(path.clone(), PutPayload::from(Bytes::copy_from_slice(bytes))) {
            Ok(()) => Ok(PutOutcome::Created),
            Err(Failure::Store(object_store::Error::AlreadyExists { .. })) => {
                // Possibly our own earlier attempt, retried by the client after it landed.
                match self.read(path) {
                    Ok(Some(stored)) if stored == bytes => Ok(PutOutcome::Created),
                    Ok(_) => Ok(PutOutcome::AlreadyExists),
                    Err(f) => Err(self.fail(&format!("reading back {key} from"), f)),
                }
            }
            Err(f) => Err(self.fail(&format!("creating {key} in"), f)),
        }
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path_of(assert_object_key(key)?);
        self.read(path)
            .map(|found| found.map(Vec::from))
            .map_err(|f| self.fail(&format!("reading {key} from"), f))
    }

    fn get_parts(&self, key: &str, take: &mut dyn FnMut(&[u8]) -> Result<bool>) -> Result<bool> {
        use futures::StreamExt;
        let path = self.path_of(assert_object_key(key)?);
        let failed = |f| self.fail(&format!("reading {key} from"), f);
        // The body's parts come over a channel as the client reads them, while this thread
        // takes them: one that stops listening (its receiver gone) ends the read.
        let (parts, arriving) = mpsc::channel::<Result<Bytes, Failure>>();
        let store = self.requests.clone();
        let found = run(async move {
            let body = match store.get(&path).await {
                Ok(found) => found,
                Err(object_store::Error::NotFound { .. }) => return Ok(false),
                Err(e) => return Err(Failure::Store(e)),
            };
            tokio::spawn(async move {
                let mut body = body.into_stream();
                while let Some(part) = body.next().await {
                    if parts.send(part.map_err(Failure::Store)).is_err() {
                        break;
                    }
                }
            });
            Ok(true)
        })
        .map_err(failed)?;
        if found {
            for part in arriving {
                if !take(&part.map_err(failed)?)? {
                    break;
                }
            }
        }
        Ok(found)
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        self.list_after(prefix, "")
    }

    fn list_after(&self, prefix: &str, after: &str) -> Result<Vec<ObjectInfo>> {
        let prefix = assert_prefix(prefix)?;
        let own = if self.place.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.place.prefix)
        };
        let offset = (!after.is_empty()).then(|| format!("{own}{after}"));
        let objects = self
            .list_raw(format!("{own}{prefix}"), offset)
            .map_err(|f| self.fail(&format!("listing {prefix:?} in"), f))?;
        let mut listed: Vec<ObjectInfo> = objects
            .into_iter()
            .filter_map(|object| {
                let key = object.location.as_ref().strip_prefix(own.as_str())?;
                // Names with a segment starting with '.' are this backend's own (the probe). A
                // server that ignores start-after is filtered here.
                (key > after && !key.split('/').any(|segment| segment.starts_with('.'))).then(|| ObjectInfo {
                    key: key.to_owned(),
                    size: object.size,
                })
            })
            .collect();
        listed.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(listed)
    }

    fn delete(&self, key: &str) -> Result<()> {
        let path = self.path_of(assert_object_key(key)?);
        self.assert_writable(key)?;
        self.remove(path)
            .map_err(|f| self.fail(&format!("deleting {key} from"), f))
    }

    fn location(&self) -> String {
        self.place.location()
    }
}

/// By hand: the client's own `Debug` shows its configuration, credentials included.
impl fmt::Debug for S3DurableStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3DurableStore")
            .field("location", &self.location())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Why a call to the server failed, before it becomes an [`Error`] that names the store.
enum Failure {
    Store(object_store::Error),
    Deadline(Duration),
    Runtime(String),
}

impl Failure {
    /// The backend code and a message built only from the client's own words and the
    /// status line: the bodies of error answers are left out, since they can echo the key id.
    fn describe(&self) -> (String, String) {
        let error = match self {
            Failure::Store(error) => error,
            Failure::Deadline(deadline) => {
                return (
                    "S3_TIMEOUT".into(),
                    format!("the put was not answered within {} ms", deadline.as_millis()),
                )
            }
            Failure::Runtime(message) => return ("S3_RUNTIME".into(), message.clone()),
        };
        let mut text = error.to_string();
        let mut transport = None;
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(e) = source {
            if let Some(http) = e.downcast_ref::<HttpError>() {
                transport.get_or_insert(http.kind());
            }
            let shown = e.to_string();
            if !text.contains(&shown) {
                text.push_str(": ");
                text.push_str(&shown);
            }
            source = e.source();
        }
        // The client words an error answer as "...status code: 503 Service Unavailable: <body>",
        // and a 200 whose body names an error (S3 does that on DELETE) as "...error response: <body>".
        const STATUS: &str = "Server returned non-2xx status code: ";
        const ERROR_BODY: &str = "Server returned error response";
        let answer = match text.find(STATUS) {
            Some(at) => {
                let line = &text[at + STATUS.len()..];
                let status: String = line.chars().take_while(char::is_ascii_digit).collect();
                Some((at + STATUS.len() + line.find(": ").unwrap_or(line.len()), status))
            }
            None => text
                .find(ERROR_BODY)
                .map(|at| (at + ERROR_BODY.len(), "200".to_owned())),
        };
        if let Some((body_at, status)) = answer {
            let s3_code = xml_element(&text[body_at..], "Code")
                .filter(|c| c.len() <= 64 && c.bytes().all(|b| b.is_ascii_alphanumeric()))
                .map(str::to_owned);
            text.truncate(body_at);
            return match s3_code {
                Some(s3_code) => (format!("S3_{status}_{s3_code}"), format!("{text} ({s3_code})")),
                None => (format!("S3_{status}"), text),
            };
        }
        let code = match transport {
            Some(HttpErrorKind::Connect) => "S3_CONNECT",
            Some(HttpErrorKind::Timeout) => "S3_TIMEOUT",
            Some(HttpErrorKind::Interrupted) => "S3_INTERRUPTED",
            Some(_) => "S3_TRANSPORT",
            None => "S3_CLIENT",
        };
        (code.into(), text)
    }
}

fn xml_element<'a>(xml: &'a str, name: &str) -> Option<&'a str> {
    let start = xml.find(&format!("<{name}>"))? + name.len() + 2;
    let length = xml[start..].find(&format!("</{name}>"))?;
    Some(&xml[start..start + length])
}

fn runtime() -> Result<&'static tokio::runtime::Runtime, &'static std::io::Error> {
    static RUNTIME: OnceLock<std::io::Result<tokio::runtime::Runtime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("gotry-s3")
                .enable_all()
                .build()
        })
        .as_ref()
}

/// Runs `future` on the private runtime and waits for it on the calling thread, whatever
/// runtime (if any) that thread belongs to.
fn run<T: Send + 'static>(
    future: impl Future<Output = Result<T, Failure>> + Send + 'static,
) -> Result<T, Failure> {
    let runtime =
        runtime().map_err(|e| Failure::Runtime(format!("the S3 client's threads cannot be started: {e}")))?;
    let (sender, receiver) = mpsc::sync_channel(1);
    runtime.spawn(async move {
        // The caller waits on the receiver, so it is still there.
        let _ = sender.send(future.await);
    });
    receiver
        .recv()
        .unwrap_or_else(|_| Err(Failure::Runtime("the S3 request ended without an answer".into())))
}

/// An `s3://` URL taken apart. No `Debug`: it holds the credential.
struct UrlParts {
    credential: Option<AwsCredential>,
    bucket: String,
    prefix: String,
    endpoint: Option<String>,
    region: Option<String>,
    timeout: Duration,
    instance_metadata: bool,
}

impl UrlParts {
    /// No message quotes the URL or anything before the bucket: that may be a credential,
    /// even when a secret holding an unescaped `?` cut the URL in the wrong place.
    fn parse(url: &str) -> Result<UrlParts> {
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| Error::invalid_argument("an S3 durable store URL starts with s3://"))?;
        let (address, query) = rest.split_once('?').unwrap_or((rest, ""));
        // The last '@': an unescaped '/' in a secret must not end the credential early.
        let (credential, address) = match address.rsplit_once('@') {
            Some((userinfo, address)) => (Some(credential_of(userinfo)?), address),
            None => (None, address),
        };
        let (bucket, prefix) = address.split_once('/').unwrap_or((address, ""));
        if bucket.is_empty()
            || bucket.len() > 63
            || !bucket
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err(Error::invalid_argument(
                "an s3:// URL names a bucket of 1 to 63 characters from [A-Za-z0-9._-]",
            ));
        }
        let prefix = prefix.strip_suffix('/').unwrap_or(prefix);
        if !prefix.is_empty() && assert_object_key(prefix).is_err() {
            return Err(Error::invalid_argument(
                "the prefix of an s3:// URL is made of /-separated [A-Za-z0-9._-] segments not starting with '.'",
            ));
        }
        let mut parts = UrlParts {
            credential,
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
            endpoint: None,
            region: None,
            timeout: Duration::from_millis(DEFAULT_TIMEOUT_MS),
            instance_metadata: false,
        };
        for option in query.split('&').filter(|option| !option.is_empty()) {
            let (name, value) = option
                .split_once('=')
                .ok_or_else(|| Error::invalid_argument("each option of an s3:// URL is name=value"))?;
            let value = percent_decode(value)?;
            match name {
                "endpoint" => {
                    endpoint_is_http(&value)?;
                    parts.endpoint = Some(value);
                }
                "region" => parts.region = Some(assert_region(&value)?.to_owned()),
                "instance_metadata" => {
                    parts.instance_metadata = match value.as_str() {
                        "true" => true,
                        "false" => false,
                        _ => {
                            return Err(Error::invalid_argument(
                                "instance_metadata of an s3:// URL is true or false",
                            ))
                        }
                    }
                }
                "timeout_ms" => {
                    let ms = value
                        .parse()
                        .ok()
                        .filter(|ms| TIMEOUT_MS_RANGE.contains(ms))
                        .ok_or_else(|| {
                            Error::invalid_argument(format!(
                                "timeout_ms of an s3:// URL is a number of milliseconds from {} to {}",
                                TIMEOUT_MS_RANGE.start(),
                                TIMEOUT_MS_RANGE.end()
                            ))
                        })?;
                    parts.timeout = Duration::from_millis(ms);
                }
                _ => {
                    return Err(Error::invalid_argument(format!(
                        "an s3:// URL takes the options endpoint, region, timeout_ms and instance_metadata, not {name:?}"
                    )))
                }
            }
        }
        Ok(parts)
    }
}

/// A region travels in signed headers: a control character there would end the client's
/// request thread instead of failing the call.
fn assert_region(region: &str) -> Result<&str> {
    if (1..=64).contains(&region.len())
        && region
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        Ok(region)
    } else {
        Err(Error::invalid_argument(
            "the region of an s3:// store (from its URL or AWS_REGION) is 1 to 64 characters from [A-Za-z0-9._-]",
        ))
    }
}

/// Whether the AWS environment names a credential source the client tries before the
/// instance-metadata address (the order of `AmazonS3Builder::build`).
fn credential_in_environment(builder: &AmazonS3Builder) -> bool {
    use AmazonS3ConfigKey as K;
    let set = |key: K| builder.get_config_value(&key).is_some_and(|v| !v.is_empty());
    set(K::AccessKeyId)
        || set(K::SecretAccessKey)
        || (set(K::WebIdentityTokenFile) && set(K::RoleArn))
        || set(K::ContainerCredentialsRelativeUri)
        || (set(K::ContainerCredentialsFullUri) && set(K::ContainerAuthorizationTokenFile))
        || builder.get_config_value(&K::SkipSignature).as_deref() == Some("true")
}

fn credential_of(userinfo: &str) -> Result<AwsCredential> {
    let shape =
        || Error::invalid_argument("the credential of an s3:// URL is KEY_ID:SECRET@, percent-encoded");
    let (key_id, secret) = userinfo.split_once(':').ok_or_else(shape)?;
    let (key_id, secret_key) = (percent_decode(key_id)?, percent_decode(secret)?);
    if key_id.is_empty() || secret_key.is_empty() {
        return Err(shape());
    }
    // The key id travels in the Authorization header, where the HTTP client refuses (on its
    // own thread, as a failure with no answer) anything but visible ASCII; the secret only
    // keys the signature, but a control character there is a pasting mistake, not a secret.
    if !key_id.bytes().all(|b| b.is_ascii_graphic()) || secret_key.chars().any(char::is_control) {
        return Err(Error::invalid_argument(
            "the credential of an s3:// URL holds a character no S3 credential has: the key id is \
             visible ASCII, and neither part holds a control character",
        ));
    }
    Ok(AwsCredential {
        key_id,
        secret_key,
        token: None,
    })
}

/// Whether an endpoint is plain HTTP. One holding a credential is refused: it would show
/// in every message and in [`S3DurableStore::location`].
fn endpoint_is_http(endpoint: &str) -> Result<bool> {
    let http = endpoint.starts_with("http://");
    if (http || endpoint.starts_with("https://")) && !endpoint.contains('@') {
        Ok(http)
    } else {
        Err(Error::invalid_argument(
            "an S3 endpoint is an http:// or https:// URL without a credential",
        ))
    }
}

fn percent_decode(text: &str) -> Result<String> {
    crate::plumbing::percent_decode(text)
        .ok_or_else(|| Error::invalid_argument("an s3:// URL has a malformed %-escape"))
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Barrier;
    use std::time::Instant;

    use super::*;
    use crate::durable_store::conformance;
    use gotry_test_support::moto::MotoServer;

    fn fresh_prefix() -> String {
        format!("t{:016x}", random_u64())
    }

    fn unavailable_code(error: Error) -> String {
        match error {
            Error::DurableStoreUnavailable { backend_code, .. } => backend_code,
            other => panic!("expected DURABLE_STORE_UNAVAILABLE, got {other:?}"),
        }
    }

    /// A port where nothing listens.
    fn dead_port() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    /// An HTTP server that gives every request the same answer, counting the requests.
    struct FakeServer {
        port: u16,
        requests: Arc<AtomicUsize>,
        done: Arc<AtomicBool>,
    }

    impl FakeServer {
        fn answering(status: &'static str, headers: &'static str, body: &'static str) -> FakeServer {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let (requests, done) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
            let (counter, finished) = (requests.clone(), done.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if finished.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    counter.fetch_add(1, Ordering::SeqCst);
                    let _ = answer(stream, status, headers, body);
                }
            });
            FakeServer { port, requests, done }
        }

        fn url(&self, credential: &str) -> String {
            format!(
                "s3://{credential}bucket/p?endpoint=http://127.0.0.1:{}&timeout_ms=1000",
                self.port
            )
        }
    }

    /// Reads one request (headers and body), so the client sees the answer, not a reset.
    fn answer(stream: TcpStream, status: &str, headers: &str, body: &str) -> std::io::Result<()> {
        let mut reader = BufReader::new(stream);
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line)?;
            if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = value.trim().parse().unwrap_or(0);
            }
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        reader.by_ref().take(length).read_to_end(&mut Vec::new())?;
        write!(
            reader.get_mut(),
            "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    impl Drop for FakeServer {
        fn drop(&mut self) {
            self.done.store(true, Ordering::SeqCst);
            let _ = TcpStream::connect(("127.0.0.1", self.port));
        }
    }

    #[test]
    fn conformance_on_moto() {
        let Some(server) = MotoServer::start() else {
            return;
        };
        conformance::run_all(&|| {
            Arc::new(S3DurableStore::open_url(&server.url(&fresh_prefix())).unwrap()) as Arc<dyn DurableStore>
        });
    }

    #[test]
    fn keys_are_relative_to_the_prefix() {
        let Some(server) = MotoServer::start() else {
            return;
        };
        let prefix = fresh_prefix();
        let inner = S3DurableStore::open_url(&server.url(&format!("{prefix}/copies/"))).unwrap();
        let whole = S3DurableStore::open_url(&server.url("")).unwrap();
        inner.put_new("a/b", b"x").unwrap();
        assert_eq!(
            inner.list("").unwrap(),
            [ObjectInfo {
                key: "a/b".into(),
                size: 1
            }]
        );
        assert_eq!(inner.get("a/b").unwrap().as_deref(), Some(&b"x"[..]));
        assert_eq!(
            whole.get(&format!("{prefix}/copies/a/b")).unwrap().as_deref(),
            Some(&b"x"[..])
        );
        // The probes of both opens are gone, and would not be listed anyway.
        let everything: Vec<String> = whole.list("").unwrap().into_iter().map(|o| o.key).collect();
        assert_eq!(everything, [format!("{prefix}/copies/a/b")]);
        assert!(
            inner.location().starts_with(&format!(
                "s3://gotry-test/{prefix}/copies?region=us-east-1&endpoint=http://127.0.0.1:"
            )),
            "{}",
            inner.location()
        );
    }

    #[test]
    fn racing_creates_on_moto_have_one_winner() {
        let Some(server) = MotoServer::start() else {
            return;
        };
        let store = Arc::new(S3DurableStore::open_url(&server.url(&fresh_prefix())).unwrap());
        let racers = 16;
        let barrier = Arc::new(Barrier::new(racers));
        let outcomes: Vec<PutOutcome> = (0..racers)
            .map(|i| {
                let (store, barrier) = (store.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    store.put_new("race", format!("racer {i}").as_bytes()).unwrap()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|racer| racer.join().unwrap())
            .collect();
        let winners: Vec<usize> = (0..racers)
            .filter(|&i| outcomes[i] == PutOutcome::Created)
            .collect();
        assert_eq!(winners.len(), 1, "{outcomes:?}");
        assert_eq!(
            store.get("race").unwrap().unwrap(),
            format!("racer {}", winners[0]).into_bytes()
        );
    }

    const KEY_ID: &str = "AKIDEXAMPLE7";
    const SECRET: &str = "wJalr/SECRET+key";
    const URL_CREDENTIAL: &str = "AKIDEXAMPLE7:wJalr%2FSECRET%2Bkey@";

    fn assert_hidden(shown: &str) {
        for secret in [KEY_ID, SECRET, "wJalr%2FSECRET%2Bkey"] {
            assert!(!shown.contains(secret), "{secret} shown in {shown}");
        }
    }

    #[test]
    fn credentials_never_show_in_errors() {
        // The server echoes the key id in its error body, as S3 does for a bad signature.
        let server = FakeServer::answering(
            "403 Forbidden",
            "",
            "<Error><Code>SignatureDoesNotMatch</Code><AWSAccessKeyId>AKIDEXAMPLE7</AWSAccessKeyId></Error>",
        );
        let error = S3DurableStore::open_url(&server.url(URL_CREDENTIAL)).unwrap_err();
        assert_hidden(&format!("{error} {error:?}"));
        assert_eq!(unavailable_code(error), "S3_403_SignatureDoesNotMatch");

        let unreachable = format!(
            "s3://{URL_CREDENTIAL}bucket/p?endpoint=http://127.0.0.1:{}&timeout_ms=300",
            dead_port()
        );
        let error = S3DurableStore::open_url(&unreachable).unwrap_err();
        assert_hidden(&format!("{error} {error:?}"));
        for bad in [
            format!("s3://{URL_CREDENTIAL}"),
            format!("s3://{URL_CREDENTIAL}/p"),
            format!("s3://{URL_CREDENTIAL}bucket/a//b"),
            format!("s3://{URL_CREDENTIAL}bucket?bogus=1"),
            format!("s3://{URL_CREDENTIAL}bucket?timeout_ms=5"),
            format!("s3://{URL_CREDENTIAL}bucket?endpoint=ftp://x"),
            format!("s3://{URL_CREDENTIAL}bucket?endpoint=http://{URL_CREDENTIAL}x"),
            "s3://AKIDEXAMPLE7@bucket".to_owned(),
            "s3://AKIDEXAMPLE7:wJalr%2FSECRET%2Gkey@bucket".to_owned(),
            // An unescaped '?' in the secret cuts the URL early.
            "s3://AKIDEXAMPLE7:wJalr/SECRET+key?x@bucket".to_owned(),
        ] {
            let error = S3DurableStore::open_url(&bad).unwrap_err();
            assert!(matches!(error, Error::InvalidArgument { .. }), "{bad}: {error:?}");
            assert_hidden(&format!("{error} {error:?}"));
        }
    }

    #[test]
    fn a_bad_region_is_a_bad_url_at_open() {
        let server = FakeServer::answering("200 OK", "", "");
        for region in [
            "us%0Aeast-1",
            "%01",
            "",
            "eu%20west",
            "r%C3%A9gion",
            &"a".repeat(65),
        ] {
            let url = format!("{}&region={region}", server.url(URL_CREDENTIAL));
            let error = S3DurableStore::open_url(&url).unwrap_err();
            assert!(
                matches!(error, Error::InvalidArgument { .. }),
                "{region}: {error:?}"
            );
        }
        // The environment's region (here a builder's) is held to the same rule.
        let error = S3DurableStore::open_with(
            &server.url(URL_CREDENTIAL),
            AmazonS3Builder::new().with_region("us-east-1\r\nX: y"),
            false,
        )
        .unwrap_err();
        assert!(matches!(error, Error::InvalidArgument { .. }), "{error:?}");
        assert_eq!(
            server.requests.load(Ordering::SeqCst),
            0,
            "a bad region reached the server"
        );
    }

    /// A look at a store writes nothing: no probe object at open, and writes are refused.
    #[test]
    fn a_read_only_open_writes_nothing() {
        let server = FakeServer::answering("200 OK", "", "");
        let store = S3DurableStore::open_url_read_only(&server.url(URL_CREDENTIAL)).unwrap();
        assert_eq!(
            server.requests.load(Ordering::SeqCst),
            0,
            "the open sent a request"
        );
        for refused in [store.put_new("a", b"1").map(drop), store.delete("a")] {
            assert_eq!(unavailable_code(refused.unwrap_err()), "EROFS");
        }
        assert_eq!(
            server.requests.load(Ordering::SeqCst),
            0,
            "a refused write sent a request"
        );
    }

    /// Without a credential in the URL or the environment, the client never asks the
    /// instance-metadata address unless the URL opts in (a loopback stand-in here).
    #[test]
    fn the_instance_metadata_address_is_asked_only_on_opt_in() {
        let server = FakeServer::answering("200 OK", "", "");
        let metadata = FakeServer::answering("404 Not Found", "", "");
        let environment =
            || AmazonS3Builder::new().with_metadata_endpoint(format!("http://127.0.0.1:{}", metadata.port));
        let error = S3DurableStore::open_with(&server.url(""), environment(), false).unwrap_err();
        match &error {
            Error::InvalidArgument { message } => {
                assert!(message.contains("instance_metadata=true"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(metadata.requests.load(Ordering::SeqCst), 0);
        assert_eq!(server.requests.load(Ordering::SeqCst), 0);
        // Opted in, the (stand-in) metadata address is asked, and its refusal is the error.
        let opted_in = format!("{}&instance_metadata=true", server.url(""));
        let error = S3DurableStore::open_with(&opted_in, environment(), false).unwrap_err();
        assert!(
            matches!(error, Error::DurableStoreUnavailable { .. }),
            "{error:?}"
        );
        assert!(
            metadata.requests.load(Ordering::SeqCst) > 0,
            "the metadata address was never asked"
        );
        // A credential in the environment is enough without opting in.
        let with_keys = environment()
            .with_access_key_id("AKIDENV")
            .with_secret_access_key("env-secret");
        S3DurableStore::open_with(&server.url(""), with_keys, false).unwrap_err();
        assert!(
            server.requests.load(Ordering::SeqCst) > 0,
            "the environment's credential was not used"
        );
        for bad in ["instance_metadata=yes", "instance_metadata="] {
            let url = format!("{}&{bad}", server.url(URL_CREDENTIAL));
            assert!(
                matches!(S3DurableStore::open_url(&url), Err(Error::InvalidArgument { .. })),
                "{bad}"
            );
        }
    }

    /// A URL option left out, well-formed, or hostile (escapes, control characters, anything).
    fn option(valid: &'static str) -> impl proptest::strategy::Strategy<Value = Option<String>> {
        use proptest::strategy::Strategy;
        proptest::option::of(proptest::prop_oneof![
            2 => valid.prop_map(|v| v),
            1 => "(%[0-9A-Fa-f]{2}|[\\x00-\\x1f\\x7f]|[=&?@/:. ]|\\PC){1,8}",
        ])
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        /// Any store URL built from hostile pieces opens or fails with a typed error: never
        /// a panic (which the client's thread would report as S3_RUNTIME), never a credential
        /// in the message.
        #[test]
        fn any_store_url_is_a_store_or_a_typed_error(
            // Each piece is often well-formed, so that the hostile ones reach the later checks.
            credential in proptest::prop_oneof![
                // Marked, so that a message quoting either part is caught below.
                4 => "KeYiD[A-Za-z0-9]{0,4}:SeCrEt[A-Za-z0-9%]{0,6}@",
                1 => "",
                1 => "[A-Za-z0-9%:/@?\\x00-\\x1f]{0,12}@",
            ],
            bucket in proptest::prop_oneof![4 => "[a-z0-9.-]{1,8}(/[a-z0-9]{1,3})?", 1 => "[\\x00-\\x7f]{0,10}"],
            region in option("[a-z0-9-]{1,12}"),
            timeout_ms in option("[0-9]{3,5}"),
            instance_metadata in option("(true|false)"),
            endpoint in option("http://127\\.0\\.0\\.1:[0-9]{1,5}"),
            unknown in option("[a-z]{0,3}"),
        ) {
            let server = FakeServer::answering("404 Not Found", "", "");
            let mut url = format!("s3://{credential}{bucket}?");
            let options = [
                ("region", region),
                ("timeout_ms", timeout_ms),
                ("instance_metadata", instance_metadata),
                ("endpoint", endpoint),
                ("x", unknown),
            ];
            for (name, value) in options {
                if let Some(value) = value {
                    url.push_str(&format!("{name}={value}&"));
                }
            }
            // Where the pieces leave it a valid store, it talks to the loopback stand-in only.
            url.push_str(&format!("endpoint=http://127.0.0.1:{}&timeout_ms=100", server.port));
            let base = AmazonS3Builder::new().with_metadata_endpoint(format!("http://127.0.0.1:{}", server.port));
            let opened = S3DurableStore::open_with(&url, base, false);
            if let Err(error) = &opened {
                let said = format!("{error} {error:?}");
                proptest::prop_assert!(!said.contains("KeYiD") && !said.contains("SeCrEt"), "{}", said);
            }
            match opened {
                Ok(_) => {}
                Err(Error::InvalidArgument { .. }) => {}
                Err(Error::DurableStoreUnavailable { backend_code, message }) => {
                    proptest::prop_assert_ne!(backend_code.as_str(), "S3_RUNTIME", "{}", message);
                }
                Err(other) => proptest::prop_assert!(false, "{other:?}"),
            }
        }
    }

    #[test]
    fn a_credential_no_client_could_send_is_refused_without_showing_it() {
        for userinfo in [
            "%00:A",
            "AKID%0A:secret",
            "AK%20ID:secret",
            "AKID:se%07cret",
            "AKID%C3%A9:secret",
        ] {
            let url = format!("s3://{userinfo}@bucket?endpoint=http://127.0.0.1:9");
            match S3DurableStore::open_url(&url) {
                Err(Error::InvalidArgument { message }) => {
                    assert!(
                        message.contains("holds a character no S3 credential has"),
                        "{message}"
                    );
                    assert!(
                        !message.contains("secret") && !message.contains("AKID"),
                        "{message}"
                    );
                }
                Err(other) => panic!("{userinfo}: {other:?}"),
                Ok(_) => panic!("{userinfo}: opened"),
            }
        }
    }

    #[test]
    fn urls_are_taken_apart_and_decoded() {
        let parts = UrlParts::parse(&format!(
            "s3://{URL_CREDENTIAL}bucket/a/b/?endpoint=http%3A%2F%2F127.0.0.1%3A9&region=eu-west-1&timeout_ms=250"
        ))
        .unwrap();
        let credential = parts.credential.unwrap();
        assert_eq!(
            (credential.key_id.as_str(), credential.secret_key.as_str()),
            (KEY_ID, SECRET)
        );
        assert_eq!((parts.bucket.as_str(), parts.prefix.as_str()), ("bucket", "a/b"));
        assert_eq!(parts.endpoint.as_deref(), Some("http://127.0.0.1:9"));
        assert_eq!(parts.region.as_deref(), Some("eu-west-1"));
        assert_eq!(parts.timeout, Duration::from_millis(250));
        // An unescaped '/' in the secret still ends at the last '@'.
        let parts = UrlParts::parse("s3://AKIDEXAMPLE7:wJalr/SECRET+key@bucket").unwrap();
        assert_eq!(parts.credential.unwrap().secret_key, SECRET);
        assert_eq!((parts.bucket.as_str(), parts.prefix.as_str()), ("bucket", ""));
        assert!(parts.endpoint.is_none() && parts.region.is_none());
        assert_eq!(parts.timeout, Duration::from_millis(DEFAULT_TIMEOUT_MS));
    }

    #[test]
    fn credentials_never_show_in_a_store() {
        let Some(server) = MotoServer::start() else {
            return;
        };
        let url = server
            .url(&fresh_prefix())
            .replacen("test:test@", URL_CREDENTIAL, 1);
        let store = S3DurableStore::open_url(&url).unwrap();
        store.put_new("k", b"v").unwrap();
        assert_hidden(&format!("{} {store:?}", store.location()));
        server.stop();
        let error = S3DurableStore::open_url(&format!("{url}&timeout_ms=300")).unwrap_err();
        server.resume();
        assert_hidden(&format!("{error} {error:?}"));
    }

    #[test]
    fn a_stopped_server_is_unavailable_until_it_resumes() {
        let Some(server) = MotoServer::start() else {
            return;
        };
        let store =
            S3DurableStore::open_url(&format!("{}&timeout_ms=1000", server.url(&fresh_prefix()))).unwrap();
        store.put_new("before", b"1").unwrap();
        server.stop();
        let calls: [(&str, &dyn Fn() -> Error); 4] = [
            ("put_new", &|| store.put_new("during", b"2").unwrap_err()),
            ("get", &|| store.get("before").unwrap_err()),
            ("list", &|| store.list("").unwrap_err()),
            // Not "before": moto carries out what it was sent once it resumes.
            ("delete", &|| store.delete("other").unwrap_err()),
        ];
        for (name, call) in calls {
            let started = Instant::now();
            let error = call();
            let elapsed = started.elapsed();
            assert!(error.to_string().contains("http://127.0.0.1"), "{error}");
            assert_eq!(unavailable_code(error), "S3_TIMEOUT", "{name}");
            assert!(elapsed < Duration::from_millis(2500), "{name} took {elapsed:?}");
        }
        server.resume();
        assert_eq!(store.get("before").unwrap().as_deref(), Some(&b"1"[..]));
        // The put that timed out may have landed once the server resumed: the same bytes
        // again are still a success.
        assert_eq!(store.put_new("during", b"2").unwrap(), PutOutcome::Created);
        assert_eq!(store.put_new("during", b"3").unwrap(), PutOutcome::AlreadyExists);
    }

    #[test]
    fn nothing_listening_is_unavailable() {
        let started = Instant::now();
        let url = format!(
            "s3://test:test@bucket?endpoint=http://127.0.0.1:{}&timeout_ms=1000",
            dead_port()
        );
        let error = S3DurableStore::open_url(&url).unwrap_err();
        assert_eq!(unavailable_code(error), "S3_CONNECT");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn server_errors_keep_status_and_code_after_bounded_retries() {
        let server = FakeServer::answering(
            "503 Service Unavailable",
            "",
            "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>",
        );
        let error = S3DurableStore::open_url(&server.url("test:test@")).unwrap_err();
        assert!(!error.to_string().contains("Please reduce"), "{error}");
        assert_eq!(unavailable_code(error), "S3_503_SlowDown");
        assert_eq!(server.requests.load(Ordering::SeqCst), MAX_RETRIES + 1);
    }

    #[test]
    fn a_server_ignoring_create_only_is_refused() {
        let server = FakeServer::answering("200 OK", "ETag: \"e\"\r\n", "");
        let error = S3DurableStore::open_url(&server.url("test:test@")).unwrap_err();
        assert!(error.to_string().contains("If-None-Match"), "{error}");
        assert_eq!(unavailable_code(error), "S3_NO_CONDITIONAL_WRITE");
        // Two creates and the delete of the probe.
        assert_eq!(server.requests.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn calls_work_from_inside_another_tokio_runtime() {
        let server = FakeServer::answering("200 OK", "ETag: \"e\"\r\n", "");
        let host = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let error = host.block_on(async { S3DurableStore::open_url(&server.url("test:test@")).unwrap_err() });
        assert_eq!(unavailable_code(error), "S3_NO_CONDITIONAL_WRITE");
    }
}
