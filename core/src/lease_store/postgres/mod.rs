//! The lease store on a PostgreSQL primary, shared by the replicas of many hosts.
//!
//! Each operation is one transaction at READ COMMITTED: lock the rows it names with
//! `SELECT ... FOR UPDATE` (in key order, so batches cannot deadlock each other), read the
//! server's clock, apply [`decide`], write the rows and their log entries in one statement,
//! commit. The row lock serializes every writer of a key, whichever host it runs on, so the
//! compare-and-set is linearizable per key. A new key has no row to lock: two writers that
//! both found it missing both insert it, the second meets the primary key (23505), its
//! transaction rolls back whole and the call is tried again, and then finds the row.
//!
//! Why not one `INSERT ... ON CONFLICT DO UPDATE ... WHERE <rule>` statement: the rule
//! would then be written a second time, in SQL, beside [`decide`] (a rule lives once), and
//! the expiry judged on the server's clock alone, without the check of that clock against
//! this process's monotonic one (`lease_store::server_clock`). The lock, the clock reading and
//! `BEGIN` go in one round trip (the server runs them in order, so the clock is read after
//! the locks are granted), and the write with `COMMIT` in a second: two round trips for any
//! operation, as few as one statement would take with its own `BEGIN` and `COMMIT`.
//!
//! # Whose clock
//!
//! Expiry is decided on the server's `clock_timestamp()` (the time the statement runs;
//! `now()` would be the transaction's start), read inside the transaction after the row
//! locks are held, with the forward-jump detection of `lease_store::server_clock`. Tests may
//! inject a [`WallClock`] instead.
//!
//! # Bounded waiting
//!
//! The client is `tokio-postgres`, run on a small runtime the library owns (the core has no
//! async runtime, and the synchronous `postgres` crate panics inside a host's own Tokio
//! runtime): each call is spawned there and its answer awaited on a channel, whatever
//! thread calls. Every call, opening included, is bounded as a whole by the timeout
//! (default [`DEFAULT_TIMEOUT`]) counted from when it began
//! ([`call_begun_at`](crate::call_begun_at)): the work is dropped at the deadline, its
//! connection with it (the server rolls back what it had begun), and the call fails with
//! LEASE_STORE_UNAVAILABLE. On the server side, each session runs with `lock_timeout` and
//! `statement_timeout` of the timeout and `idle_in_transaction_session_timeout` of twice
//! it, so a session whose client went away releases its row locks; on the socket,
//! `tcp_user_timeout` of the timeout and keepalives, so a dead network fails the socket in
//! seconds rather than TCP's fifteen minutes. A COMMIT whose answer is lost or late leaves
//! the outcome unknown: LEASE_STORE_UNAVAILABLE, never success (an acquire that did commit
//! simply runs out unused).
//!
//! # Tables
//!
//! `<prefix>leases` (one row per tenant), `<prefix>lease_log` and `<prefix>lease_log_pruned`
//! (default prefix [`DEFAULT_TABLE_PREFIX`]). Keys and owners are `BYTEA` holding UTF-8, so
//! they compare and sort byte for byte as SQLite compares text, whatever the database's
//! collation, and any text a door accepts (NUL included) is stored. PL/pgSQL triggers hold
//! the invariants whatever client writes: an epoch moves by exactly one, an epoch has one
//! owner, the forgotten floor never moves back, a lease row keeps its key and is never
//! deleted or truncated, a log row is never changed, and only renewals ever leave the log.
//! The schema is created on open when missing, in one transaction under an advisory lock;
//! when it is there nothing is created, so a user without DDL rights runs on tables an
//! administrator made.
//!
//! The log is pruned as the other stores prune it ([`DEFAULT_LOG_RETENTION`]): each write
//! prunes about twice the rows it logged after it committed, in a short transaction of its
//! own (a second pruner skips the mark row, `SKIP LOCKED`), and
//! [`LeaseStore::compact_log`] catches up in batches.
//!
//! # URL
//!
//! `postgres://user:password@host:5432/database?prefix=gotry_&timeout_ms=2000&sslmode=verify-full&sslrootcert=/etc/gotry/db-ca.pem`
//! (or `postgresql://`). User and password are percent-decoded; the user defaults to
//! `postgres`, the port to 5432; an IPv6 host goes in brackets. Options: `prefix` (up to
//! 32 of `a-z`, `0-9`, `_`), `timeout_ms` (100 to 60000), `sslmode` and `sslrootcert`.
//! Unknown options are refused. The credentials appear in no error, log or `Debug` output.
//!
//! # TLS
//!
//! Through rustls (aws-lc-rs provider; no OpenSSL), by `sslmode` as libpq spells it:
//! `disable` (plain TCP; refused together with `sslrootcert`), `require` (TLS or no
//! connection; the certificate is checked against `sslrootcert` without its name when one
//! is given, and not at all otherwise, as libpq), `verify-full` (the certificate chains to
//! `sslrootcert`, or to the public web roots without one, and names the host). Without
//! `sslmode`: `verify-full` with `sslrootcert`, else `disable` for a loopback host and
//! `require` for any other. `allow` and `prefer` are refused (a downgrade anyone on the
//! path can force). The root file is read again at each new connection. A TLS failure is
//! LEASE_STORE_UNAVAILABLE whose message starts with a stable code: [`TLS_NOT_OFFERED`],
//! [`TLS_CERTIFICATE`], [`TLS_HANDSHAKE`], [`TLS_SETUP`], [`TLS_REQUIRED_BY_SERVER`].
//!
//! # What the server must provide
//!
//! PostgreSQL 14 or later (`CREATE OR REPLACE TRIGGER`). `fsync` on and
//! `synchronous_commit` not `off`: with either, the server acknowledges a commit it can
//! still lose in a crash, and a lost grant is an epoch issued twice. Each new session
//! checks both and refuses to work ([`UNSAFE_DURABILITY`]). Failover to a standby that had
//! not received the last commits loses them the same way: see the README's "Stores" part
//! for the replication settings that prevent it and what holds without them.
//!
//! # Errors
//!
//! LEASE_STORE_UNAVAILABLE: the server cannot be reached or does not answer in time, a
//! lock was not granted in time, the session was terminated, the server is shutting down
//! or read-only, or the answer to a COMMIT was lost. Every other server failure is a
//! storage error named `POSTGRES_<condition>` (`POSTGRES_RAISE_EXCEPTION` for a trigger's
//! refusal, `POSTGRES_INVALID_PASSWORD`, ...; `POSTGRES_SQLSTATE_<code>` for the rest).

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tokio::time::Instant;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, NoTls, Row};

use super::{
    assert_text, decide, log_retention_ms, Deadline, HistoryEntry, LeaseOp, LeaseRecord, LeaseStore, Request,
    DEFAULT_LOG_RETENTION, PRUNE_MIN_BATCH,
};
use crate::clock::WallClock;
use crate::errors::{Error, Result};

mod failure;
mod options;
mod prune;
mod sql;

use failure::*;
pub use options::*;
use sql::*;

/// How long one call may take unless the URL says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(2_000);
/// What the table names start with unless the URL says otherwise.
pub const DEFAULT_TABLE_PREFIX: &str = "gotry_";
/// The storage error code of a server whose settings can lose an acknowledged commit.
pub const UNSAFE_DURABILITY: &str = "POSTGRES_UNSAFE_DURABILITY";

const MIN_TIMEOUT_MS: u64 = 100;
const MAX_TIMEOUT_MS: u64 = 60_000;
const MAX_PREFIX_LEN: usize = 32;
/// Connections kept open between calls; more may be open while calls run at once.
const MAX_IDLE_CONNECTIONS: usize = 8;
/// Tries of one call: a race on a new key or a deadlock is retried on the spot, since the
/// transaction that lost was rolled back whole.
const MAX_ATTEMPTS: u32 = 4;

/// A lease store on one PostgreSQL database. `Send + Sync`: calls from several threads run
/// at once on pooled connections, and the row locks order them.
pub struct PostgresLeaseStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// Holds the credentials: never printed.
    config: tokio_postgres::Config,
    root_cert: Option<PathBuf>,
    endpoint: Endpoint,
    sql: Sql,
    clock: Option<Arc<dyn WallClock>>,
    server_clock: super::server_clock::ServerClockGuard,
    log_retention_ms: i64,
    /// Why the log is not pruned (code, message), once the server refused what that needs.
    unprunable: Mutex<Option<(String, String)>>,
    idle: Mutex<Vec<Session>>,
    closed: AtomicBool,
}

impl fmt::Debug for PostgresLeaseStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &self.inner;
        f.debug_struct("PostgresLeaseStore")
            .field("endpoint", &inner.endpoint.shown)
            .field("tables", &[&inner.sql.leases, &inner.sql.log])
            .field("timeout", &inner.endpoint.timeout)
            .field("sslmode", &inner.endpoint.tls)
            .finish_non_exhaustive()
    }
}

/// One connection: the client, and the task that drives its socket on the private
/// runtime. Dropping it ends the task at once, the socket with it: a connection dropped
/// mid-transaction is rolled back by the server.
struct Session {
    client: Client,
    task: tokio::task::JoinHandle<()>,
    /// Set by work that succeeded and yet left the session unfit for another call.
    discard: bool,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A request as the runtime's task owns it.
struct Owned {
    key: String,
    op: LeaseOp,
    owner: String,
    epoch: i64,
    ttl_ms: i64,
}

impl Owned {
    fn of(key: &str, request: &Request<'_>) -> Owned {
        let (epoch, ttl_ms) = match *request {
            Request::Acquire { ttl_ms, .. } => (0, ttl_ms),
            Request::Renew { epoch, ttl_ms, .. } => (epoch, ttl_ms),
            Request::Release { epoch, .. } | Request::Forget { epoch, .. } => (epoch, 0),
        };
        Owned {
            key: key.to_owned(),
            op: request.op(),
            owner: request.owner().to_owned(),
            epoch,
            ttl_ms,
        }
    }

    fn request(&self) -> Request<'_> {
        let owner = self.owner.as_str();
        let (epoch, ttl_ms) = (self.epoch, self.ttl_ms);
        match self.op {
            LeaseOp::Acquire => Request::Acquire { owner, ttl_ms },
            LeaseOp::Renew => Request::Renew { owner, epoch, ttl_ms },
            LeaseOp::Release => Request::Release { owner, epoch },
            LeaseOp::Forget => Request::Forget { owner, epoch },
        }
    }
}

/// What one call asks of the server.
enum Job {
    Migrate,
    Apply(Vec<Owned>),
    Read(String),
    History(Option<String>),
    List(String),
    Now,
    CompactBatch,
}

enum Answer {
    Done,
    Outcomes(Vec<Result<LeaseRecord>>),
    Records(Vec<LeaseRecord>),
    History(Vec<HistoryEntry>),
    Now(i64),
    Compacted(usize, u64),
}

fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<std::io::Result<tokio::runtime::Runtime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("gotry-postgres")
                .enable_all()
                .build()
        })
        .as_ref()
        .map_err(|e| Error::unavailable(format!("the PostgreSQL client's threads cannot be started: {e}")))
}

impl PostgresLeaseStore {
    /// Opens the store a `postgres://` or `postgresql://` URL names.
    pub fn open_url(url: &str) -> Result<PostgresLeaseStore> {
        PostgresLeaseStore::open(PostgresOptions::from_url(url)?)
    }

    /// Connects, and creates the tables and triggers when they are missing, all within
    /// one timeout.
    pub fn open(options: PostgresOptions) -> Result<PostgresLeaseStore> {
        let deadline = Deadline::after(options.timeout);
        let prefix = &options.table_prefix;
        if prefix.len() > MAX_PREFIX_LEN
            || !prefix
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            return Err(Error::invalid_argument(format!(
                "a table prefix is up to {MAX_PREFIX_LEN} of a-z, 0-9 and _, got {prefix:?}"
            )));
        }
        let timeout_ms = u64::try_from(options.timeout.as_millis()).unwrap_or(u64::MAX);
        if !(MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&timeout_ms) {
            return Err(Error::invalid_argument(format!(
                "a PostgreSQL store timeout is {MIN_TIMEOUT_MS} to {MAX_TIMEOUT_MS} ms, got {timeout_ms}"
            )));
        }
        let tls = options.effective_ssl_mode();
        if let Some(root_cert) = &options.ssl_root_cert {
            if tls == SslMode::Disable {
                return Err(disabled_with_root_cert());
            }
            read_root_certs(root_cert).map_err(Error::invalid_argument)?;
        }
        let mut config = tokio_postgres::Config::new();
        config
            .host(&options.host)
            .port(options.port)
            .user(options.user.as_deref().unwrap_or("postgres"))
            .dbname(&options.database)
            .application_name("gotry-tenant-state")
            .ssl_mode(match tls {
                SslMode::Disable => tokio_postgres::config::SslMode::Disable,
                SslMode::Require | SslMode::VerifyFull => tokio_postgres::config::SslMode::Require,
            })
            .connect_timeout(options.timeout)
            .tcp_user_timeout(options.timeout)
            .keepalives(true)
            .keepalives_idle(options.timeout.max(Duration::from_secs(1)))
            .keepalives_interval(Duration::from_secs(1))
            .keepalives_retries(3)
            .options(format!(
                "-c lock_timeout={timeout_ms} -c statement_timeout={timeout_ms} \
                 -c idle_in_transaction_session_timeout={} -c TimeZone=UTC",
                2 * timeout_ms
            ));
        if let Some(password) = &options.password {
            config.password(password.as_bytes());
        }
        let store = PostgresLeaseStore {
            inner: Arc::new(Inner {
                config,
                root_cert: options.ssl_root_cert,
                endpoint: Endpoint {
                    shown: super::url_parts::shown(&options.host, options.port, &options.database),
                    user: options.user,
                    timeout: options.timeout,
                    tls,
                },
                sql: Sql::new(prefix),
                clock: options.clock,
                server_clock: Default::default(),
                log_retention_ms: log_retention_ms(DEFAULT_LOG_RETENTION)?,
                unprunable: Mutex::new(None),
                idle: Mutex::new(Vec::new()),
                closed: AtomicBool::new(false),
            }),
        };
        store.call(deadline, Job::Migrate)?;
        Ok(store)
    }

    /// The same store keeping every renewal for `retention` instead of
    /// [`DEFAULT_LOG_RETENTION`]. Before the store is shared: it needs the only handle.
    pub fn with_log_retention(mut self, retention: Duration) -> Result<PostgresLeaseStore> {
        let ms = log_retention_ms(retention)?;
        let inner = Arc::get_mut(&mut self.inner)
            .ok_or_else(|| Error::invalid_argument("the log retention is set before the store is shared"))?;
        inner.log_retention_ms = ms;
        Ok(self)
    }

    /// The table names: leases, the log, the log's pruning mark.
    pub fn table_names(&self) -> [&str; 3] {
        let sql = &self.inner.sql;
        [&sql.leases, &sql.log, &sql.pruned]
    }

    /// Runs `job` on the private runtime, bounded by `deadline`, and waits for its answer
    /// on the calling thread, whatever runtime (if any) that thread belongs to.
    fn call(&self, deadline: Deadline, job: Job) -> Result<Answer> {
        let inner = &self.inner;
        if inner.closed.load(Ordering::SeqCst) {
            return Err(Error::unavailable("the lease store is closed"));
        }
        let left = deadline.left().ok_or_else(|| inner.endpoint.timed_out())?;
        let runtime = runtime()?;
        let until = Instant::now() + left;
        let (sender, receiver) = mpsc::sync_channel(1);
        let task_inner = Arc::clone(inner);
        runtime.spawn(async move {
            let answer = tokio::time::timeout_at(until, task_inner.run(&job, until))
                .await
                .unwrap_or_else(|_| Err(task_inner.endpoint.timed_out()));
            // Let go of the store before answering: a caller that holds the only other
            // handle may count on being its sole owner once it has its answer
            // (`with_log_retention` right after `open`).
            drop(task_inner);
            // The caller waits on the receiver, or gave up (below) and dropped it.
            let _ = sender.send(answer);
        });
        // The task ends itself at the deadline; this wait only guards against a runtime
        // too busy to run it.
        receiver
            .recv_timeout(left + Duration::from_millis(500))
            .unwrap_or_else(|_| Err(inner.endpoint.timed_out()))
    }

    fn call_now(&self, job: Job) -> Result<Answer> {
        self.call(Deadline::after(self.inner.endpoint.timeout), job)
    }

    fn apply_all(&self, requests: &[(&str, Request<'_>)]) -> Result<Vec<Result<LeaseRecord>>> {
        let owned = requests
            .iter()
            .map(|(key, request)| Owned::of(key, request))
            .collect();
        match self.call_now(Job::Apply(owned))? {
            Answer::Outcomes(outcomes) => Ok(outcomes),
            _ => Err(unexpected()),
        }
    }
}

fn unexpected() -> Error {
    Error::unavailable("the PostgreSQL store's task answered another call's kind of answer")
}

fn invalid_row(source: &str) -> Failure {
    Failure::Core(Error::Storage {
        code: "POSTGRES_INVALID_ROW".into(),
        message: format!("{source} answered a row that is not what the lease store wrote"),
    })
}

fn text(bytes: Vec<u8>, table: &str) -> Result<String, Failure> {
    String::from_utf8(bytes).map_err(|_| invalid_row(table))
}

fn record(row: &Row, table: &str) -> Result<LeaseRecord, Failure> {
    let get = || -> Result<_, tokio_postgres::Error> {
        Ok((
            row.try_get::<_, Vec<u8>>(0)?,
            row.try_get::<_, Vec<u8>>(1)?,
            row.try_get::<_, i64>(2)?,
            row.try_get::<_, i64>(3)?,
            row.try_get::<_, i64>(4)?,
        ))
    };
    let (key, owner, epoch, lease_until_ms, forgotten_at_epoch) = get().map_err(|_| invalid_row(table))?;
    Ok(LeaseRecord {
        key: text(key, table)?,
        owner: text(owner, table)?,
        epoch,
        lease_until_ms,
        forgotten_at_epoch,
    })
}

impl Inner {
    fn idle(&self) -> MutexGuard<'_, Vec<Session>> {
        // Only pushed to and popped from, so a poisoned lock holds no torn state.
        self.idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn check_in(&self, session: Session) {
        let mut idle = self.idle();
        if !session.discard && !self.closed.load(Ordering::SeqCst) && idle.len() < MAX_IDLE_CONNECTIONS {
            idle.push(session);
        }
    }

    /// After one connection was lost the idle ones most likely were too (the server
    /// restarted): close them rather than fail one call on each.
    fn forget_idle(&self) {
        let stale = std::mem::take(&mut *self.idle());
        drop(stale);
    }

    /// A new session, checked for settings that could lose an acknowledged commit.
    async fn connect(&self) -> Result<Session, Failure> {
        let (client, task) = match self.endpoint.tls {
            SslMode::Disable => {
                let (client, connection) = self.config.connect(NoTls).await?;
                (client, tokio::spawn(async move { drop(connection.await) }))
            }
            mode => {
                let tls = tls_config(mode, self.root_cert.as_deref())
                    .map_err(|why| Failure::Core(self.endpoint.tls_failure(TLS_SETUP, &why)))?;
                let (client, connection) = self
                    .config
                    .connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls))
                    .await?;
                (client, tokio::spawn(async move { drop(connection.await) }))
            }
        };
        let session = Session {
            client,
            task,
            discard: false,
        };
        let row = session.client.query_typed_one(DURABILITY, &[]).await?;
        let (synchronous_commit, fsync): (String, String) = (
            row.try_get(0).map_err(|_| invalid_row("the server's settings"))?,
            row.try_get(1).map_err(|_| invalid_row("the server's settings"))?,
        );
        if let Some(why) = durability_refusal(&synchronous_commit, &fsync) {
            return Err(Failure::Core(Error::Storage {
                code: UNSAFE_DURABILITY.into(),
                message: format!("the PostgreSQL server at {} {why}", self.endpoint.shown),
            }));
        }
        Ok(session)
    }

    /// Runs `job` on a pooled connection, tries it again when that is known to be safe,
    /// and turns what failed into the core's error. The caller bounds it by the deadline.
    async fn run(&self, job: &Job, until: Instant) -> Result<Answer> {
        let error = |failure| self.endpoint.error(failure);
        let pooled = loop {
            match self.idle().pop() {
                Some(session) if session.client.is_closed() => continue,
                other => break other,
            }
        };
        let mut reused = pooled.is_some();
        let mut session = match pooled {
            Some(session) => session,
            None => self.connect().await.map_err(error)?,
        };
        let mut attempt = 1;
        loop {
            let failure = match self.attempt(&mut session, job, until).await {
                Ok(answer) => {
                    self.check_in(session);
                    return Ok(answer);
                }
                Err(failure) => failure,
            };
            if failure.breaks_connection() {
                drop(session);
                self.forget_idle();
                if !(reused && failure.lost_connection()) || attempt == MAX_ATTEMPTS {
                    return Err(error(failure));
                }
                session = self.connect().await.map_err(error)?;
                reused = false;
            } else if !failure.lost_race() || attempt == MAX_ATTEMPTS {
                self.check_in(session);
                return Err(error(failure));
            }
            attempt += 1;
        }
    }

    async fn attempt(&self, session: &mut Session, job: &Job, until: Instant) -> Result<Answer, Failure> {
        let client = &session.client;
        match job {
            Job::Migrate => self.migrate(client).await.map(|()| Answer::Done),
            Job::Apply(requests) => {
                let (outcomes, now, logged) = self.apply(session, requests).await?;
                self.prune_after_write(session, now, logged, until).await;
                Ok(Answer::Outcomes(outcomes))
            }
            Job::Read(key) => {
                let rows = client
                    .query_typed(&self.sql.select_row, &[(&key.as_bytes(), Type::BYTEA)])
                    .await?;
                rows.iter()
                    .map(|row| record(row, &self.sql.leases))
                    .collect::<Result<_, _>>()
                    .map(Answer::Records)
            }
            Job::List(prefix) => {
                let length = i32::try_from(prefix.len()).map_err(|_| invalid_row(&self.sql.leases))?;
                let rows = client
                    .query_typed(
                        &self.sql.list,
                        &[(&length, Type::INT4), (&prefix.as_bytes(), Type::BYTEA)],
                    )
                    .await?;
                rows.iter()
                    .map(|row| record(row, &self.sql.leases))
                    .collect::<Result<_, _>>()
                    .map(Answer::Records)
            }
            Job::History(key) => {
                let rows = match key {
                    Some(key) => {
                        client
                            .query_typed(&self.sql.history_of_key, &[(&key.as_bytes(), Type::BYTEA)])
                            .await?
                    }
                    None => client.query_typed(&self.sql.history_all, &[]).await?,
                };
                let log = self.sql.log.as_str();
                rows.iter()
                    .map(|row| {
                        let get = || -> Result<_, tokio_postgres::Error> {
                            Ok((
                                row.try_get::<_, Vec<u8>>(0)?,
                                row.try_get::<_, String>(1)?,
                                row.try_get::<_, Vec<u8>>(2)?,
                                row.try_get::<_, i64>(3)?,
                                row.try_get::<_, i64>(4)?,
                            ))
                        };
                        let (key, op, owner, epoch, at_ms) = get().map_err(|_| invalid_row(log))?;
                        Ok(HistoryEntry {
                            key: text(key, log)?,
                            op: LeaseOp::parse(&op).ok_or_else(|| invalid_row(log))?,
                            owner: text(owner, log)?,
                            epoch,
                            at_ms,
                        })
                    })
                    .collect::<Result<_, _>>()
                    .map(Answer::History)
            }
            Job::Now => self.server_now(client).await.map(Answer::Now),
            Job::CompactBatch => {
                let now = match &self.clock {
                    Some(clock) => clock.now_ms().map_err(Failure::Core)?,
                    None => self.server_now(client).await?,
                };
                let (judged, deleted) = self
                    .prune_batch(session, now, prune::COMPACT_BATCH)
                    .await
                    .map_err(|failure| self.note_refusal(failure))?;
                Ok(Answer::Compacted(judged, deleted))
            }
        }
    }

    async fn server_now(&self, client: &Client) -> Result<i64, Failure> {
        let row = client.query_typed_one(&self.sql.now, &[]).await?;
        row.try_get(0).map_err(|_| invalid_row("the server clock"))
    }

    /// Creates whatever part of the schema is missing, in one transaction under an
    /// advisory lock, so that processes opening the store together create it once.
    async fn migrate(&self, client: &Client) -> Result<(), Failure> {
        if self.is_migrated(client).await? {
            return Ok(());
        }
        client.batch_execute("BEGIN").await?;
        let created = async {
            let lock = format!("gotry_migrate:{}", self.sql.leases);
            client
                .query_typed(
                    "SELECT pg_advisory_xact_lock(hashtext($1))",
                    &[(&lock, Type::TEXT)],
                )
                .await?;
            if !self.is_migrated(client).await? {
                for statement in &self.sql.create {
                    client.batch_execute(statement).await?;
                }
            }
            client.batch_execute("COMMIT").await.map_err(Failure::Commit)
        }
        .await;
        end(client, created).await
    }

    async fn is_migrated(&self, client: &Client) -> Result<bool, Failure> {
        let row = client
            .query_typed_one(
                &self.sql.present,
                &[
                    (&self.sql.tables.as_slice(), Type::TEXT_ARRAY),
                    (&self.sql.triggers, Type::TEXT_ARRAY),
                ],
            )
            .await?;
        let tables: i64 = row.try_get(0).map_err(|_| invalid_row("pg_class"))?;
        let triggers: i64 = row.try_get(1).map_err(|_| invalid_row("pg_trigger"))?;
        Ok(tables == self.sql.tables.len() as i64 && triggers == self.sql.triggers.len() as i64)
    }

    /// Operations in one transaction: lock every row named and read the clock (one round
    /// trip), decide each in order, then write the grants and commit (a second). A refusal
    /// answers that operation alone; a failure of the store fails them all. Returns the
    /// outcomes, the time written, and how many entries were logged.
    async fn apply(
        &self,
        session: &Session,
        requests: &[Owned],
    ) -> Result<(Vec<Result<LeaseRecord>>, i64, usize), Failure> {
        let client = &session.client;
        let mut keys: Vec<&[u8]> = requests.iter().map(|r| r.key.as_bytes()).collect();
        keys.sort_unstable();
        keys.dedup();
        let monotonic = || crate::clock::MonotonicClock::now_ms(&crate::clock::SystemMonotonicClock);
        let asked = monotonic().map_err(Failure::Core)?;
        let begin = client.batch_execute("BEGIN ISOLATION LEVEL READ COMMITTED");
        let keys_param: [(&(dyn ToSql + Sync), Type); 1] = [(&keys, Type::BYTEA_ARRAY)];
        let lock = client.query_typed(&self.sql.lock_rows, &keys_param);
        let server_now = async {
            match self.clock {
                Some(_) => Ok(None),
                None => self.server_now(client).await.map(Some),
            }
        };
        let (begun, locked, server_now) = futures::join!(begin, lock, server_now);
        let read = async {
            begun?;
            let mut rows = HashMap::with_capacity(keys.len());
            for row in locked? {
                let record = record(&row, &self.sql.leases)?;
                rows.insert(record.key.clone(), record);
            }
            let (now, expiry) = match (&self.clock, server_now?) {
                (Some(clock), _) => {
                    let now = clock.now_ms().map_err(Failure::Core)?;
                    (now, now)
                }
                (None, Some(now)) => {
                    let answered = monotonic().map_err(Failure::Core)?;
                    (now, self.server_clock.expiry_time(now, asked, answered))
                }
                (None, None) => return Err(invalid_row("the server clock")),
            };
            Ok((rows, now, expiry))
        }
        .await;
        let (mut rows, now, expiry) = end(client, read).await?;
        let mut outcomes = Vec::with_capacity(requests.len());
        // (op, owner, record) of each grant in order, for the log.
        let mut grants: Vec<(LeaseOp, &str, LeaseRecord)> = Vec::new();
        let found: std::collections::HashSet<String> = rows.keys().cloned().collect();
        for owned in requests {
            let request = owned.request();
            let current = rows.get(&owned.key);
            let measured = current.map(|row| row.is_expired_at(expiry));
            match decide(&owned.key, current, &request, now, measured) {
                Err(refusal) => outcomes.push(Err(refusal)),
                Ok(next) => {
                    grants.push((owned.op, &owned.owner, next.clone()));
                    rows.insert(next.key.clone(), next.clone());
                    outcomes.push(Ok(next));
                }
            }
        }
        if grants.is_empty() {
            client.batch_execute("ROLLBACK").await?;
            return Ok((outcomes, now, 0));
        }
        // Each row written once, as it ends: new ones inserted, found ones updated.
        let mut written: Vec<&LeaseRecord> = Vec::new();
        for (_, _, next) in grants.iter().rev() {
            if !written.iter().any(|w| w.key == next.key) {
                written.push(next);
            }
        }
        let columns = |new: bool| {
            let part: Vec<&&LeaseRecord> = written.iter().filter(|r| found.contains(&r.key) != new).collect();
            (
                part.iter().map(|r| r.key.as_bytes()).collect::<Vec<_>>(),
                part.iter().map(|r| r.owner.as_bytes()).collect::<Vec<_>>(),
                part.iter().map(|r| r.epoch).collect::<Vec<_>>(),
                part.iter().map(|r| r.lease_until_ms).collect::<Vec<_>>(),
                part.iter().map(|r| r.forgotten_at_epoch).collect::<Vec<_>>(),
            )
        };
        let (nk, no, ne, nu, nf) = columns(true);
        let (ck, co, ce, cu, cf) = columns(false);
        let lk: Vec<&[u8]> = grants.iter().map(|(_, _, r)| r.key.as_bytes()).collect();
        let lo: Vec<&str> = grants.iter().map(|(op, _, _)| op.as_str()).collect();
        let lw: Vec<&[u8]> = grants.iter().map(|(_, owner, _)| owner.as_bytes()).collect();
        let le: Vec<i64> = grants.iter().map(|(_, _, r)| r.epoch).collect();
        let params: [(&(dyn ToSql + Sync), Type); 15] = [
            (&nk, Type::BYTEA_ARRAY),
            (&no, Type::BYTEA_ARRAY),
            (&ne, Type::INT8_ARRAY),
            (&nu, Type::INT8_ARRAY),
            (&nf, Type::INT8_ARRAY),
            (&ck, Type::BYTEA_ARRAY),
            (&co, Type::BYTEA_ARRAY),
            (&ce, Type::INT8_ARRAY),
            (&cu, Type::INT8_ARRAY),
            (&cf, Type::INT8_ARRAY),
            (&lk, Type::BYTEA_ARRAY),
            (&lo, Type::TEXT_ARRAY),
            (&lw, Type::BYTEA_ARRAY),
            (&le, Type::INT8_ARRAY),
            (&now, Type::INT8),
        ];
        // Sent together: when the write fails, the server answers the COMMIT after it with
        // a rollback.
        let (wrote, committed) = futures::join!(
            client.execute_typed(&self.sql.write, &params),
            client.batch_execute("COMMIT")
        );
        settle(wrote, committed)?;
        Ok((outcomes, now, grants.len()))
    }
}

/// Why a session whose server reports these settings must not serve, if it must not: with
/// `synchronous_commit = off` a commit is acknowledged before its WAL is flushed, and with
/// `fsync = off` the flush never reaches the disk, so either can lose an acknowledged grant
/// in a crash, and a lost grant is an epoch issued twice. Every other `synchronous_commit`
/// (`local`, `on`, `remote_write`, `remote_apply`) flushes locally before it answers.
fn durability_refusal(synchronous_commit: &str, fsync: &str) -> Option<String> {
    (synchronous_commit == "off" || fsync != "on").then(|| {
        format!(
            "runs with synchronous_commit = {synchronous_commit} and fsync = {fsync} for this \
             session: it acknowledges commits that a crash can still lose, and a lost grant is an \
             epoch issued twice; the lease store needs synchronous_commit other than off and fsync on"
        )
    })
}

/// The outcome of a write sent together with its COMMIT. A write the server refused was
/// rolled back by that COMMIT. Otherwise a COMMIT without an answer may have been applied,
/// whatever the write's own answer says (a connection cut after both were sent fails both):
/// that is never retried, and never reported as done.
fn settle<T>(
    wrote: Result<T, tokio_postgres::Error>,
    committed: Result<(), tokio_postgres::Error>,
) -> Result<T, Failure> {
    match (wrote, committed) {
        (Err(refused), _) if refused.as_db_error().is_some() => Err(Failure::Db(refused)),
        (_, Err(lost)) => Err(Failure::Commit(lost)),
        (Err(failed), Ok(())) => Err(Failure::Db(failed)),
        (Ok(value), Ok(())) => Ok(value),
    }
}

/// What `result` of work inside a transaction leaves: on failure the transaction is rolled
/// back when the session survived it (a session that did not is dropped, and the server
/// rolls back).
async fn end<T>(client: &Client, result: Result<T, Failure>) -> Result<T, Failure> {
    if let Err(failure) = &result {
        if !failure.breaks_connection() && !matches!(failure, Failure::Commit(_)) {
            client.batch_execute("ROLLBACK").await?;
        }
    }
    result
}

impl LeaseStore for PostgresLeaseStore {
    super::lease_store_writes!(crate::metrics::Store::Postgres);

    fn read(&self, key: &str) -> Result<Option<LeaseRecord>> {
        assert_text("key", key)?;
        match self.call_now(Job::Read(key.to_owned()))? {
            Answer::Records(mut rows) => Ok(rows.pop()),
            _ => Err(unexpected()),
        }
    }

    fn history(&self, key: Option<&str>) -> Result<Vec<HistoryEntry>> {
        match self.call_now(Job::History(key.map(str::to_owned)))? {
            Answer::History(entries) => Ok(entries),
            _ => Err(unexpected()),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<LeaseRecord>> {
        match self.call_now(Job::List(prefix.to_owned()))? {
            Answer::Records(rows) => Ok(rows),
            _ => Err(unexpected()),
        }
    }

    fn now_ms(&self) -> Result<i64> {
        if let Some(clock) = &self.inner.clock {
            return clock.now_ms();
        }
        match self.call_now(Job::Now)? {
            Answer::Now(now) => Ok(now),
            _ => Err(unexpected()),
        }
    }

    fn compact_log(&self) -> Result<u64> {
        self.compact()
    }

    fn close(&self) -> Result<()> {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.forget_idle();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use gotry_test_support::postgres::{self as server, ScratchTables};

    use super::*;

    /// The forward-step guard of `server_clock` is wired into this store's decisions, not
    /// only correct alone: the server's clock stepping an hour forward between two calls
    /// (an NTP step, a failover to a host whose clock runs ahead) must not make a live
    /// lease look expired, or a second owner would be granted while the first one's gate
    /// is still open. The server's clock is replaced by the store's clock query, as the
    /// MySQL store's test of its clock does.
    #[test]
    #[cfg_attr(
        gotry_skip_postgres,
        ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
    )]
    fn a_forward_step_of_the_server_s_clock_does_not_free_a_live_lease() {
        let url = server::server_url();
        let mut scratch = ScratchTables::new(&url);
        let prefix = server::fresh_prefix();
        scratch.add(&prefix);
        let mut store = PostgresLeaseStore::open_url(&server::with_option(&url, "prefix", &prefix))
            .unwrap_or_else(|e| server::no_server(&url, &e));
        let server_reads = |store: &mut PostgresLeaseStore, ms: i64| {
            Arc::get_mut(&mut store.inner).expect("the only handle").sql.now = format!("SELECT {ms}::int8");
        };
        // The server's own time, held still: no step yet.
        let start = store.now_ms().unwrap();
        server_reads(&mut store, start);
        let grant = store.acquire("k", "o", 60_000).unwrap();
        assert_eq!(grant.record.lease_until_ms, start + 60_000);

        // An hour later on the server's clock, a moment later on this host's monotonic one.
        const STEP_MS: i64 = 3_600_000;
        server_reads(&mut store, start + STEP_MS);
        match store.acquire("k", "p", 60_000) {
            Err(Error::LeaseHeld { record }) => assert_eq!(record, grant.record),
            other => panic!("the step freed a live lease: {other:?}"),
        }
        // The holder keeps it; its new deadline is written on the server's clock, the one
        // every other client compares it with.
        let renewed = store.renew("k", "o", 1, 60_000).unwrap();
        assert_eq!(renewed.record.lease_until_ms, start + STEP_MS + 60_000);
    }

    #[test]
    fn urls_name_every_part() {
        let options = PostgresOptions::from_url(
            "postgresql://app%40east:p%3Ass%2Fw%40rd@db.internal:5433/lease%20s?prefix=t1_&timeout_ms=750",
        )
        .unwrap();
        assert_eq!(options.user.as_deref(), Some("app@east"));
        assert_eq!(options.password.as_deref(), Some("p:ss/w@rd"));
        assert_eq!((options.host.as_str(), options.port), ("db.internal", 5433));
        assert_eq!(options.database, "lease s");
        assert_eq!(options.table_prefix, "t1_");
        assert_eq!(options.timeout, Duration::from_millis(750));
        assert_eq!(options.effective_ssl_mode(), SslMode::Require);
        let options = PostgresOptions::from_url("postgres://[::1]/test").unwrap();
        assert_eq!((options.host.as_str(), options.port), ("::1", 5432));
        assert_eq!(options.effective_ssl_mode(), SslMode::Disable);
        let options = PostgresOptions::from_url("postgres://db.internal/test?sslrootcert=%2Fca.pem").unwrap();
        assert_eq!(options.effective_ssl_mode(), SslMode::VerifyFull);
        assert_eq!(options.ssl_root_cert.as_deref(), Some(Path::new("/ca.pem")));
        let options = PostgresOptions::from_url("postgres://db.internal/test?sslmode=disable").unwrap();
        assert_eq!(options.effective_ssl_mode(), SslMode::Disable);
    }

    #[test]
    fn bad_urls_are_refused_without_quoting_the_credentials() {
        for (url, says) in [
            ("postgres://alice:s3cret@host:0/db", "port"),
            ("postgres://alice:s3cret@host", "names its database"),
            ("postgres://alice:s3cret@/db", "names a host"),
            ("postgres://alice:s3cret%zz@host/db", "badly percent-encoded"),
            ("postgres://alice:s3cret@host/db?sslmode=prefer", "not offered"),
            ("postgres://alice:s3cret@host/db?sslmode=allow", "not offered"),
            (
                "postgres://alice:s3cret@host/db?sslmode=verify-ca",
                "require with sslrootcert",
            ),
            (
                "postgres://alice:s3cret@host/db?sslmode=on",
                "disable, require or verify-full",
            ),
            (
                "postgres://alice:s3cret@host/db?sslmode=disable&sslrootcert=/ca.pem",
                "checks no certificate",
            ),
            ("postgres://alice:s3cret@host/db?sslrootcert=", "names a file"),
            ("postgres://alice:s3cret@host/db?prefix=a&prefix=b", "given twice"),
            ("postgres://alice:s3cret@host/db?ssl-mode=required", "unknown"),
            ("postgres://alice:s3cret@host/db?timeout_ms=soon", "whole number"),
            ("pg://alice:s3cret@host/db", "starts with postgres://"),
        ] {
            let error = PostgresOptions::from_url(url).expect_err(url);
            let shown = format!("{error} {error:?}");
            assert!(matches!(error, Error::InvalidArgument { .. }), "{url}: {shown}");
            assert!(shown.contains(says), "{url}: {shown}");
            assert!(
                !shown.contains("alice") && !shown.contains("s3cret"),
                "{url}: {shown}"
            );
        }
    }

    #[test]
    fn prefix_timeout_and_root_file_are_checked_before_connecting() {
        // Port 1 on loopback: anything that reached the network would fail otherwise.
        for (prefix, timeout_ms) in [
            ("Upper_", 2_000),
            ("semi;colon", 2_000),
            (&*"p".repeat(33), 2_000),
            ("ok_", 99),
            ("ok_", 60_001),
        ] {
            let mut options = PostgresOptions::from_url("postgres://root@127.0.0.1:1/test").unwrap();
            options.table_prefix = prefix.to_owned();
            options.timeout = Duration::from_millis(timeout_ms);
            assert!(
                matches!(
                    PostgresLeaseStore::open(options),
                    Err(Error::InvalidArgument { .. })
                ),
                "{prefix:?} {timeout_ms}"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        for (file, says) in [
            (dir.path().join("missing.pem"), "cannot be read"),
            (empty, "holds no certificate"),
        ] {
            let mut options = PostgresOptions::from_url("postgres://alice:s3cret@127.0.0.1:1/test").unwrap();
            options.ssl_root_cert = Some(file.clone());
            match PostgresLeaseStore::open(options) {
                Err(Error::InvalidArgument { message }) => {
                    assert!(message.contains(says) && !message.contains("s3cret"), "{message}")
                }
                other => panic!("{}: {:?}", file.display(), other.map(|_| ())),
            }
        }
    }

    #[test]
    fn a_server_that_can_lose_an_acknowledged_commit_is_refused_for_each_such_setting() {
        for (synchronous_commit, fsync) in [("off", "on"), ("on", "off"), ("off", "off"), ("local", "off")] {
            let why = durability_refusal(synchronous_commit, fsync)
                .unwrap_or_else(|| panic!("{synchronous_commit} {fsync}: accepted"));
            assert!(
                why.contains(&format!(
                    "synchronous_commit = {synchronous_commit} and fsync = {fsync}"
                )),
                "{why}"
            );
        }
        for synchronous_commit in ["on", "local", "remote_write", "remote_apply"] {
            assert_eq!(
                durability_refusal(synchronous_commit, "on"),
                None,
                "{synchronous_commit}"
            );
        }
    }

    #[test]
    fn calls_work_from_inside_a_host_s_own_tokio_runtime() {
        let host = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let error = host.block_on(async {
            PostgresLeaseStore::open_url(&format!("postgres://u@127.0.0.1:{port}/test?timeout_ms=300"))
                .unwrap_err()
        });
        assert!(matches!(error, Error::LeaseStoreUnavailable { .. }), "{error:?}");
    }
}
