//! The lease store on a MySQL or MariaDB primary, shared by the replicas of many hosts.
//!
//! Each operation is one InnoDB transaction on the primary: lock the rows it names with
//! `SELECT ... FOR UPDATE`, read the clock, apply [`decide`], write the rows and their log
//! entries, commit. The row lock serializes every writer of a key, whichever host it runs
//! on, so the compare-and-set is linearizable per key exactly as with SQLite's write lock.
//!
//! # Whose clock
//!
//! Expiry is decided on the database server's clock, read inside the transaction *after*
//! the row locks are held (`NOW(3)`), never on the client's: two replicas whose clocks
//! disagree by seconds still see one lease expire at one instant. Reading it after the
//! locks also keeps the log's times in commit order per key, which the audit replays.
//! Tests may inject a [`WallClock`] instead, to play the conformance suite by hand.
//!
//! # Bounded waiting
//!
//! A store that hangs is worse than one that fails: a holder that cannot renew must learn
//! it while its fence still has time to run. Every call (each operation, and opening the
//! store with its schema check and creation) ends within the configured timeout (default
//! [`DEFAULT_TIMEOUT`]), counted from when the call began (a host that queued it says
//! when with [`call_begun_at`](crate::call_begun_at)), however many round trips it makes:
//! before each statement the socket's read and write timeouts are set to the time left,
//! and a call with no time left sends nothing more and fails. A new connection is made
//! with connect, read and write timeouts of the time left. A row-lock wait ends by the
//! server's `innodb_lock_wait_timeout` (whole seconds, about the timeout) or, sooner, by
//! the socket's read timeout. The failure is LEASE_STORE_UNAVAILABLE, never a success: a
//! transaction cut short is not committed, its connection is dropped (the server rolls it
//! back), and an answer that arrives after the deadline is not used (a COMMIT answered
//! that late was applied all the same, as one whose answer is lost: see below).
//!
//! What can still overshoot: a socket timeout bounds each read, not a whole answer. The
//! driver makes the reads of a new connection's handshake with the time left when the
//! connection began, so a handshake that runs out of time can end up to a round trip
//! late; an answer that trickles in as several slow pieces (a long history on a slow
//! link) can take up to the time left once per piece; and the host name is resolved
//! without a bound of its own. Otherwise a call ends within its timeout and the moment it
//! takes to notice.
//!
//! With the default timeout, use leases of at least [`RECOMMENDED_MIN_TTL_MS`]; in general
//! a TTL of five timeouts or more leaves room for a couple of failed renewals before the
//! holder's fence closes.
//!
//! A lost connection is dropped and the next call connects again; a pooled connection
//! found dead on reuse (the server restarted, or killed it) is replaced at once within the
//! same call and its deadline. A connection lost while COMMIT was in flight leaves the
//! outcome unknown: the call reports LEASE_STORE_UNAVAILABLE, never success, and an
//! acquire that did commit simply runs out unused.
//!
//! # Tables
//!
//! Three tables per prefix (default [`DEFAULT_TABLE_PREFIX`]): `<prefix>leases` and
//! `<prefix>lease_log`, with the SQLite store's columns, and `<prefix>lease_log_pruned`,
//! the one-row mark of how far pruning has judged the log. Four triggers hold the
//! invariants whatever client writes: epochs move by exactly one, an epoch has one owner,
//! the forgotten floor never moves back, a lease row keeps its key and is never deleted, a
//! log row is never changed, and only renewals ever leave the log (the server refuses to
//! delete an acquire, release or forget entry, to any client). Keys and owners are
//! `VARBINARY` holding UTF-8: bytes compare exactly as SQLite compares text ('A' and 'a',
//! and 'a' and 'a ', are different keys; MySQL's `utf8mb4_bin` would pad trailing spaces
//! away), and 600 bytes hold the longest accepted text (200 UTF-16 units of at most 3 bytes
//! each) well inside InnoDB's 3072-byte index limit. The schema is created on open when
//! missing, under `GET_LOCK` so that processes starting together do not race; when it
//! already exists nothing is created, so a user without DDL rights can run against tables
//! that an administrator made.
//!
//! The log is pruned as the SQLite store prunes it ([`DEFAULT_LOG_RETENTION`], or
//! [`MysqlLeaseStore::with_log_retention`]): every acquire, release and forget stays, and
//! every renewal within the retention; beyond it, the last renewal of each tenure (key,
//! epoch). Each write prunes about twice the rows it logged once it has committed, in a
//! short transaction of its own on the same connection (the lease rows' locks are not held
//! for it), only when at least half its timeout is left and within half of what is left;
//! one session prunes at a time (it takes the mark `FOR UPDATE NOWAIT`, and the others skip
//! rather than wait), and a prune that fails is dropped without touching the write's
//! answer. [`LeaseStore::compact_log`] catches up on a log written before, in batches of a
//! few thousand rows.
//!
//! Tables made by earlier versions have a log that refuses every delete. Opening the store
//! as a user with the CREATE and TRIGGER privileges migrates them, under the same
//! `GET_LOCK`: the mark table, then the new delete guard, and only then the old guard is
//! dropped, so the log is never without one. A user without those rights still opens and
//! uses such tables; its store does not prune, and `compact_log` says why. It says why too
//! when the user may not delete from the log. Either lasts until the store is opened again.
//!
//! # URL
//!
//! `mysql://user:password@host:3306/database?prefix=gotry_&timeout_ms=2000&ssl-mode=verify_identity&ssl-ca=/etc/gotry/db-ca.pem`
//!
//! User and password are percent-decoded (encode `@`, `:`, `/`, `?`, `#` and `%` in
//! them); the port defaults to 3306; an IPv6 host goes in brackets. Options:
//! `prefix` (the table prefix: up to 32 of `a-z`, `0-9`, `_`; may be empty),
//! `timeout_ms` (100 to 60000), `ssl-mode` and `ssl-ca` (see [TLS](#tls)). Unknown options
//! are refused, so a typo cannot silently leave a default in place. The credentials
//! appear in no error, log or `Debug` output.
//!
//! # TLS
//!
//! The link is TLS through rustls (its aws-lc-rs provider; no OpenSSL), chosen by
//! `ssl-mode` ([`SslMode`]; the MySQL spellings `DISABLED`, `REQUIRED` and
//! `VERIFY_IDENTITY` are accepted too, in any case):
//!
//! - `disabled`: plain TCP. Refused together with `ssl-ca`, which would suggest a check
//!   that nothing makes.
//! - `required`: TLS or no connection; a server that does not offer TLS is
//!   LEASE_STORE_UNAVAILABLE, never a silent plain connection. Without `ssl-ca` the
//!   server's certificate is not checked at all (as MySQL's `REQUIRED`): this stops
//!   eavesdroppers, not an active man in the middle. With `ssl-ca` the certificate must
//!   chain to a trusted CA (see below), but its name is not compared with the host.
//! - `verify_identity`: TLS, the certificate must chain to a trusted CA and name the host
//!   of the URL (a DNS name, or an IP address in its subjectAltName).
//!
//! `ssl-ca=/path/ca.pem` names a file of CA certificates (PEM, or one DER certificate). It
//! is checked when the store opens and read again at each new connection, so a rotated
//! file takes effect without a restart. The trusted CAs are those of `ssl-ca` *and* the
//! public web roots (Mozilla's, built in) that the driver always adds: a server
//! certificate from a public CA for the right name also passes. Without `ssl-ca`,
//! `verify_identity` trusts the web roots alone.
//!
//! Without `ssl-mode`: `verify_identity` when `ssl-ca` is given; otherwise `disabled` when
//! the host is loopback (`localhost`, `127.0.0.0/8`, `::1`; decided on the host as
//! written, when the store opens) and `required` for any other host. Not offered:
//! `preferred` (it falls back to plain TCP whenever TLS fails, a downgrade anyone on the
//! path can force) and `verify_ca` (MySQL's trusts only the given CA; here the web roots
//! would be trusted too without a name check, which is weaker than the name suggests: use
//! `verify_identity`, or `required` with `ssl-ca`).
//!
//! A TLS failure is LEASE_STORE_UNAVAILABLE whose message starts with a stable code and
//! names the mode that was asked (`ssl-mode=...`): [`TLS_NOT_OFFERED`] (the server does
//! not offer TLS), [`TLS_CERTIFICATE`] (the server's certificate was refused: unknown
//! issuer, wrong name, expired), [`TLS_HANDSHAKE`] (any other failure of the handshake,
//! including the server refusing it), [`TLS_SETUP`] (TLS could not be set up on this side:
//! an `ssl-ca` file gone missing or bad since the store opened, a host name that TLS cannot
//! check), [`TLS_REQUIRED_BY_SERVER`] (the
//! server refuses the plain connection `disabled` asked for: MySQL says so; MariaDB
//! answers "access denied", so after that answer to a plain login the store tries the
//! same login once over TLS, without checking the certificate, and reports this code when
//! that one is accepted).
//!
//! # Errors
//!
//! LEASE_STORE_UNAVAILABLE: the server cannot be reached or does not answer in time, a row
//! lock was not granted in time, the session was killed, the server is shutting down or
//! read-only, or the answer to a COMMIT was lost. Every other server failure is a storage
//! error named as the server names it (`ER_ACCESS_DENIED_ERROR`, `ER_SIGNAL_EXCEPTION` for a
//! trigger's refusal, ...; `MYSQL_ERROR_<number>` for the rest).
//!
//! # What the server must provide
//!
//! InnoDB with `innodb_flush_log_at_trx_commit = 1` (the default; anything else loses
//! acknowledged operations on power loss) and, with binary logging, `sync_binlog = 1` (else
//! crash recovery rolls back what the binary log lost): each new session checks both and
//! refuses to work otherwise ([`UNSAFE_DURABILITY`]). With binary logging, `binlog_format` ROW or
//! MIXED (sessions run at READ COMMITTED so that acquiring a new key takes no gap lock).
//! Creating the schema needs the CREATE and TRIGGER privileges (and, with binary logging,
//! `log_bin_trust_function_creators` or SUPER), and so does migrating it; using it needs
//! SELECT, INSERT and UPDATE, and pruning the log DELETE besides. MariaDB 10.3 or MySQL
//! 8.0 at least: pruning takes its mark with `NOWAIT`, and a migration puts a second delete
//! trigger on the log before it drops the first. For TLS, a server certificate (and `have_ssl = YES`); see [TLS](#tls).

use std::collections::HashMap;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder, Params, SslOpts, Value};

use super::{
    assert_text, decide, log_retention_ms, Deadline, HistoryEntry, LeaseOp, LeaseRecord, LeaseStore, Request,
    DEFAULT_LOG_RETENTION, PRUNE_MIN_BATCH,
};
use crate::clock::WallClock;
use crate::errors::{Error, Result};

mod failure;
mod link;
mod options;
mod prune;
mod sql;

use failure::*;
use link::Link;
pub use options::*;
use prune::Refusal;
use sql::*;

/// How long one call may take unless the URL says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(2_000);
/// The shortest TTL worth using with the default timeout: a holder renewing every third of
/// it still has two more tries after one renewal that hung for the whole timeout.
pub const RECOMMENDED_MIN_TTL_MS: i64 = 10_000;
/// What the table names start with unless the URL says otherwise.
pub const DEFAULT_TABLE_PREFIX: &str = "gotry_";

const MIN_TIMEOUT_MS: u64 = 100;
const MAX_TIMEOUT_MS: u64 = 60_000;
const MAX_PREFIX_LEN: usize = 32;
/// Connections kept open between calls; more may be open while calls run at once.
const MAX_IDLE_CONNECTIONS: usize = 8;
/// Tries of one call: a race on a new key or a deadlock is retried on the spot, since the
/// transaction that lost was rolled back whole and left nothing behind.
const MAX_ATTEMPTS: u32 = 4;
/// Keys locked by one statement of a batch.
const LOCK_CHUNK: usize = 100;
/// Rows written by one statement of a batch.
const WRITE_CHUNK: usize = 100;
/// The largest packet this side takes, told to the driver so that it does not ask the
/// server (one round trip less in each new connection). Far above any row or statement of
/// the store, and what MySQL 8 allows by default.
const MAX_PACKET: usize = 64 << 20;

/// One granted operation of a transaction, waiting to be written.
struct Grant<'a> {
    /// Whether its row existed before this grant: in the table, or written by an earlier
    /// grant of the same transaction.
    existed: bool,
    op: LeaseOp,
    owner: &'a str,
    next: LeaseRecord,
}

/// A lease store on one MySQL/MariaDB database. `Send + Sync`: calls from several threads
/// run at once on pooled connections, and the row locks order them.
pub struct MysqlLeaseStore {
    /// Holds the credentials: never printed (`mysql::Opts` derives `Debug`).
    opts: mysql::Opts,
    endpoint: Endpoint,
    sql: Sql,
    clock: Option<Arc<dyn WallClock>>,
    server_clock: super::server_clock::ServerClockGuard,
    /// What each new session runs first, each statement in the time the call has left.
    session_setup: [String; 2],
    log_retention_ms: i64,
    /// Why the log is not pruned, when the server refused what that needs.
    unprunable: Mutex<Option<Refusal>>,
    idle: Mutex<Vec<Conn>>,
    closed: AtomicBool,
}

impl fmt::Debug for MysqlLeaseStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MysqlLeaseStore")
            .field("endpoint", &self.endpoint.shown)
            .field("tables", &[&self.sql.leases, &self.sql.log])
            .field("timeout", &self.endpoint.timeout)
            .field("ssl_mode", &self.endpoint.tls)
            .finish_non_exhaustive()
    }
}

impl MysqlLeaseStore {
    /// Opens the store a `mysql://` URL names.
    pub fn open_url(url: &str) -> Result<MysqlLeaseStore> {
        MysqlLeaseStore::open(MysqlOptions::from_url(url)?)
    }

    /// Connects, and creates the tables and triggers when they are missing, all within
    /// one timeout.
    pub fn open(options: MysqlOptions) -> Result<MysqlLeaseStore> {
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
                "a MySQL store timeout is {MIN_TIMEOUT_MS} to {MAX_TIMEOUT_MS} ms, got {timeout_ms}"
            )));
        }
        // The server counts lock waits in whole seconds; the socket's read timeout ends a
        // wait sooner when the call has less time left. Metadata locks too: a migration's
        // DDL that waits for one holds up every writer of the table queued behind it, and
        // must not wait on the server much longer than its call does.
        let lock_wait_s = (timeout_ms / 1000).max(1);
        let tls = options.effective_ssl_mode();
        let ssl = ssl_opts(tls, options.ssl_ca.as_deref())?;
        let opts = OptsBuilder::new()
            .ip_or_hostname(Some(options.host.clone()))
            .tcp_port(options.port)
            .user(options.user.clone())
            .pass(options.password.clone())
            .db_name(Some(options.database.clone()))
            // Stay on the address the URL names: the driver would otherwise move a loopback
            // connection to the server's Unix socket.
            .prefer_socket(false)
            .max_allowed_packet(Some(MAX_PACKET))
            .ssl_opts(ssl);
        let store = MysqlLeaseStore {
            opts: opts.into(),
            endpoint: Endpoint {
                shown: endpoint(&options.host, options.port, &options.database),
                user: options.user,
                timeout: options.timeout,
                tls,
            },
            sql: Sql::new(prefix),
            clock: options.clock,
            server_clock: Default::default(),
            session_setup: [
                format!(
                    "SET SESSION innodb_lock_wait_timeout = {lock_wait_s}, lock_wait_timeout = {lock_wait_s},
                     time_zone = '+00:00', sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'"
                ),
                "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED".to_owned(),
            ],
            log_retention_ms: log_retention_ms(DEFAULT_LOG_RETENTION)?,
            unprunable: Mutex::new(None),
            idle: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
        };
        store.run_until(deadline, |link| store.migrate(link))?;
        Ok(store)
    }

    /// The same store keeping every renewal for `retention` instead of
    /// [`DEFAULT_LOG_RETENTION`].
    pub fn with_log_retention(self, retention: Duration) -> Result<MysqlLeaseStore> {
        Ok(MysqlLeaseStore {
            log_retention_ms: log_retention_ms(retention)?,
            ..self
        })
    }

    /// The two table names: leases, then the log.
    pub fn table_names(&self) -> (&str, &str) {
        (&self.sql.leases, &self.sql.log)
    }

    /// Creates whatever part of the schema is missing, and readies the log for pruning.
    /// Processes that open the store at once queue on a server-wide named lock, so each
    /// object is created exactly once.
    fn migrate(&self, link: &mut Link<'_>) -> Result<(), Failure> {
        if self.is_migrated(&self.present_objects(link)?) {
            return Ok(());
        }
        // MySQL refuses lock names over 64 characters: this one has at most 52.
        let lock = format!("gotry_migrate:{}", self.sql.leases);
        // Whole seconds, which MySQL and MariaDB both take; the socket's read timeout ends
        // the wait when the call has less time left than that.
        let wait_s = link
            .deadline
            .left()
            .map_or(1, |left| left.as_secs() + u64::from(left.subsec_nanos() > 0));
        let granted =
            link.exec_first_opt::<Option<i64>>("SELECT GET_LOCK(?, ?)", Params::from((&lock, wait_s)))?;
        if !matches!(granted, Some(Ok(Some(1)))) {
            return Err(Failure::Core(Error::unavailable(format!(
                "another process is creating the lease store tables in {}; try again",
                self.endpoint.shown
            ))));
        }
        let created = self
            .present_objects(link)
            .and_then(|present| self.create_missing(link, &present));
        // A session that ends (a failure that breaks the connection drops it) releases its
        // named locks with it.
        let released = link.exec_drop("SELECT RELEASE_LOCK(?)", Params::from((&lock,)));
        created?;
        released
    }

    /// Whether every object is there, and the old delete guard gone.
    fn is_migrated(&self, present: &[String]) -> bool {
        let mut wanted = self.sql.schema.iter().chain(&self.sql.pruning);
        wanted.all(|(name, _)| present.contains(name)) && !present.contains(&self.sql.old_delete_guard.0)
    }

    /// Creates what `present` lacks. Without the privileges that pruning's part needs the
    /// store still opens, and does not prune: a user without DDL rights runs on tables an
    /// administrator made, whichever version made them.
    fn create_missing(&self, link: &mut Link<'_>, present: &[String]) -> Result<(), Failure> {
        for (name, create) in &self.sql.schema {
            if !present.contains(name) {
                link.query_drop(create)?;
            }
        }
        match self.ready_pruning(link, present) {
            Err(failure)
                if self
                    .note_refusal(
                        &failure,
                        "replacing the log's old delete guard (which refuses every delete) needs the \
                         CREATE and TRIGGER privileges: opening the store once as a user that has them \
                         makes the change",
                    )
                    .is_some() =>
            {
                Ok(())
            }
            other => other,
        }
    }

    /// The mark table, then the guard that lets only renewals be deleted, and only then
    /// the old guard dropped: the log is never without a delete guard.
    fn ready_pruning(&self, link: &mut Link<'_>, present: &[String]) -> Result<(), Failure> {
        for (name, create) in &self.sql.pruning {
            if !present.contains(name) {
                link.query_drop(create)?;
            }
        }
        if present.contains(&self.sql.old_delete_guard.0) {
            link.query_drop(&self.sql.old_delete_guard.1)?;
        }
        Ok(())
    }

    /// Which of the schema's tables and triggers, and of the old delete guard, exist.
    fn present_objects(&self, link: &mut Link<'_>) -> Result<Vec<String>, Failure> {
        let names: Vec<&str> = self
            .sql
            .schema
            .iter()
            .chain(&self.sql.pruning)
            .map(|(name, _)| name.as_str())
            .chain([self.sql.old_delete_guard.0.as_str()])
            .collect();
        let marks = vec!["?"; names.len()].join(", ");
        link.exec_opt::<String>(
            &format!(
                "SELECT TABLE_NAME FROM information_schema.TABLES
                   WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ({marks})
                 UNION ALL
                 SELECT TRIGGER_NAME FROM information_schema.TRIGGERS
                   WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME IN ({marks})"
            ),
            Params::Positional(
                names
                    .iter()
                    .chain(&names)
                    .map(|name| Value::from(*name))
                    .collect(),
            ),
        )?
        .into_iter()
        .map(|name| name.map_err(|_| invalid_row("information_schema")))
        .collect()
    }

    fn idle(&self) -> MutexGuard<'_, Vec<Conn>> {
        // The list is only pushed to and popped from, so a poisoned lock holds no torn state.
        self.idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A new session, within what is left until `deadline`: the driver's connect, read and
    /// write timeouts are what is left when it starts, and each setup statement after it
    /// is sent only with time left.
    fn connect(&self, deadline: Deadline) -> Result<Conn, Failure> {
        let left = deadline.left().ok_or(Failure::Deadline)?;
        let mut conn = Conn::new(self.opts_within(left)).map_err(|e| {
            // The driver reads the CA file at each connection: one that went missing or
            // bad since the store opened fails here, as an I/O error like any other.
            let ca = self.opts.get_ssl_opts().and_then(|ssl| ssl.root_cert_path());
            if let Some(Err(why)) = ca.map(check_ca_file) {
                return Failure::Core(self.endpoint.tls_failure(TLS_SETUP, &why));
            }
            let denied = matches!(server_code(&e), Some(1045 | 1698));
            if denied && self.endpoint.tls == SslMode::Disabled && self.login_works_over_tls(deadline) {
                Failure::Core(self.endpoint.tls_failure(
                    TLS_REQUIRED_BY_SERVER,
                    "the server refused the plain login and accepts the same one over TLS \
                     (require_secure_transport, or an account that requires SSL): \
                     use ssl-mode=required or verify_identity",
                ))
            } else {
                Failure::Db(e)
            }
        })?;
        let mut link = Link {
            conn: &mut conn,
            deadline,
            discard: false,
        };
        for statement in &self.session_setup {
            link.query_drop(statement)?;
        }
        let settings: Vec<Result<(i64, i64, i64), _>> =
            link.query_opt("SELECT @@innodb_flush_log_at_trx_commit, @@log_bin, @@sync_binlog")?;
        let settings = match settings.into_iter().next() {
            Some(Ok(row)) => row,
            _ => return Err(invalid_row("the server's durability settings")),
        };
        if let Some(why) = unsafe_durability(settings) {
            return Err(Failure::Core(Error::Storage {
                code: UNSAFE_DURABILITY.into(),
                message: format!(
                    "the MySQL server at {} {why}: it acknowledges commits that a crash can still \
                     lose, and a lost grant is an epoch issued twice",
                    self.endpoint.shown
                ),
            }));
        }
        Ok(conn)
    }

    /// The connection options with every wait of the driver's own bounded by `left`.
    fn opts_within(&self, left: Duration) -> OptsBuilder {
        OptsBuilder::from_opts(self.opts.clone())
            .tcp_connect_timeout(Some(left))
            .read_timeout(Some(left))
            .write_timeout(Some(left))
    }

    /// Whether the login that the server just refused on plain TCP is accepted over TLS:
    /// MariaDB answers "access denied" to a plain connection when it requires secure
    /// transport, as it does to a wrong password. Only names the failure; the store never
    /// works on such a connection. The certificate is not checked: the same login was
    /// just offered on plain TCP to the same address.
    fn login_works_over_tls(&self, deadline: Deadline) -> bool {
        let Some(left) = deadline.left() else {
            return false;
        };
        let probe = self
            .opts_within(left)
            .ssl_opts(SslOpts::default().with_danger_accept_invalid_certs(true));
        Conn::new(probe).is_ok()
    }

    /// After one connection was lost, the idle ones were most likely lost with it (the
    /// server restarted): close them now rather than fail one call on each. They are
    /// dropped outside the lock, since closing writes to their sockets.
    fn forget_idle(&self) {
        let stale = std::mem::take(&mut *self.idle());
        drop(stale);
    }

    fn check_in(&self, conn: Conn) {
        let mut idle = self.idle();
        if !self.closed.load(Ordering::SeqCst) && idle.len() < MAX_IDLE_CONNECTIONS {
            idle.push(conn);
        } else {
            drop(idle);
            drop(conn);
        }
    }

    /// [`Self::run_until`] one timeout from the call's start.
    fn run<T>(&self, work: impl FnMut(&mut Link<'_>) -> Result<T, Failure>) -> Result<T> {
        self.run_until(Deadline::after(self.endpoint.timeout), work)
    }

    /// Runs `work` on a pooled connection, tries it again when that is known to be safe,
    /// and turns what failed into the core's error; all of it, the tries again and the
    /// connections they make included, before `deadline`. An answer that comes after it is
    /// not used: the call fails as if it had not come.
    fn run_until<T>(
        &self,
        deadline: Deadline,
        mut work: impl FnMut(&mut Link<'_>) -> Result<T, Failure>,
    ) -> Result<T> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::unavailable("the lease store is closed"));
        }
        // A call whose time was spent before it got here (queued in its host) leaves the
        // pool as it was.
        if deadline.left().is_none() {
            return Err(self.endpoint.error(Failure::Deadline));
        }
        let pooled = self.idle().pop();
        let mut reused = pooled.is_some();
        let mut conn = match pooled {
            Some(conn) => conn,
            None => self.connect(deadline).map_err(|f| self.endpoint.error(f))?,
        };
        let mut attempt = 1;
        loop {
            let mut link = Link {
                conn: &mut conn,
                deadline,
                discard: false,
            };
            let done = work(&mut link);
            let discard = link.discard;
            let failure = match done {
                Ok(value) => {
                    if discard {
                        drop(conn);
                    } else {
                        self.check_in(conn);
                    }
                    return match deadline.left() {
                        Some(_) => Ok(value),
                        None => Err(self.endpoint.error(Failure::Deadline)),
                    };
                }
                Err(failure) => failure,
            };
            if failure.breaks_connection() {
                drop(conn);
                // Running out of time says nothing about the other connections.
                if !matches!(failure, Failure::Deadline) {
                    self.forget_idle();
                }
                if !(reused && failure.lost_connection()) || attempt == MAX_ATTEMPTS {
                    return Err(self.endpoint.error(failure));
                }
                conn = self.connect(deadline).map_err(|f| self.endpoint.error(f))?;
                reused = false;
            } else if !failure.lost_race() || attempt == MAX_ATTEMPTS {
                self.check_in(conn);
                return Err(self.endpoint.error(failure));
            }
            attempt += 1;
        }
    }

    /// The times every decision of one transaction uses: the server's, read after the row
    /// locks are held, so that later lock holders always read a later time; and the time
    /// expiry is judged on, which a step of the server's clock does not move (see
    /// [`super::server_clock`]). An injected clock is both.
    fn decision_time(&self, link: &mut Link<'_>) -> Result<(i64, i64), Failure> {
        if let Some(clock) = &self.clock {
            let now = clock.now_ms().map_err(Failure::Core)?;
            return Ok((now, now));
        }
        let monotonic = || crate::clock::MonotonicClock::now_ms(&crate::clock::SystemMonotonicClock);
        let asked = monotonic().map_err(Failure::Core)?;
        let now = self.server_now(link)?;
        let answered = monotonic().map_err(Failure::Core)?;
        Ok((now, self.server_clock.expiry_time(now, asked, answered)))
    }

    /// The store's clock: the injected one, or the server's.
    fn clock_now(&self, link: &mut Link<'_>) -> Result<i64, Failure> {
        match &self.clock {
            Some(clock) => clock.now_ms().map_err(Failure::Core),
            None => self.server_now(link),
        }
    }

    fn server_now(&self, link: &mut Link<'_>) -> Result<i64, Failure> {
        link.exec_first_opt::<i64>(&self.sql.now, Params::Empty)?
            .and_then(|now| now.ok())
            .ok_or_else(|| invalid_row("the server clock"))
    }

    fn lock_rows(&self, link: &mut Link<'_>, keys: &[&str]) -> Result<HashMap<String, LeaseRecord>, Failure> {
        let mut rows = HashMap::with_capacity(keys.len());
        for chunk in keys.chunks(LOCK_CHUNK) {
            let params = Params::Positional(chunk.iter().map(|key| Value::from(*key)).collect());
            for record in fetch_records(link, &self.sql.lock_rows(chunk.len()), params, &self.sql.leases)? {
                rows.insert(record.key.clone(), record);
            }
        }
        Ok(rows)
    }

    /// Writes the rows and log entries of one transaction's grants, in order, a few
    /// statements for any number of them.
    fn write(&self, link: &mut Link<'_>, grants: &[Grant<'_>], now: i64) -> Result<(), Failure> {
        let row = |next: &LeaseRecord| {
            [
                Value::from(next.key.as_str()),
                Value::from(next.owner.as_str()),
                Value::from(next.epoch),
                Value::from(next.lease_until_ms),
                Value::from(next.forgotten_at_epoch),
            ]
        };
        // New rows first: a later grant in the same transaction may update one of them.
        for existed in [false, true] {
            let rows: Vec<&Grant<'_>> = grants.iter().filter(|g| g.existed == existed).collect();
            for chunk in rows.chunks(WRITE_CHUNK) {
                let sql = if existed {
                    self.sql.update_rows(chunk.len())
                } else {
                    self.sql.insert_rows(chunk.len())
                };
                let params = chunk.iter().flat_map(|g| row(&g.next)).collect();
                link.exec_drop(&sql, Params::Positional(params))?;
            }
        }
        for chunk in grants.chunks(WRITE_CHUNK) {
            let params = chunk
                .iter()
                .flat_map(|g| {
                    [
                        Value::from(g.next.key.as_str()),
                        Value::from(g.op.as_str()),
                        Value::from(g.owner),
                        Value::from(g.next.epoch),
                        Value::from(now),
                    ]
                })
                .collect();
            link.exec_drop(&self.sql.insert_log(chunk.len()), Params::Positional(params))?;
        }
        Ok(())
    }

    /// Operations in one transaction: lock every row named, read the clock once, decide
    /// each in order, then write the rows and log entries of the grants. A refusal answers that
    /// operation alone; a failure of the store fails them all.
    fn apply_all(&self, requests: &[(&str, Request<'_>)]) -> Result<Vec<Result<LeaseRecord>>> {
        let mut keys: Vec<&str> = requests.iter().map(|(key, _)| *key).collect();
        // Byte order is the index order (VARBINARY compares bytes).
        keys.sort_unstable();
        keys.dedup();
        self.run(|link| {
            let (outcomes, now, logged) = transaction(link, |link| {
                let mut rows = self.lock_rows(link, &keys)?;
                let (now, expiry) = self.decision_time(link)?;
                let mut outcomes = Vec::with_capacity(requests.len());
                let mut grants = Vec::new();
                for (key, request) in requests {
                    let current = rows.get(*key);
                    let measured = current.map(|row| row.is_expired_at(expiry));
                    match decide(key, current, request, now, measured) {
                        Err(refusal) => outcomes.push(Err(refusal)),
                        Ok(next) => {
                            grants.push(Grant {
                                existed: current.is_some(),
                                op: request.op(),
                                owner: request.owner(),
                                next: next.clone(),
                            });
                            rows.insert(next.key.clone(), next.clone());
                            outcomes.push(Ok(next));
                        }
                    }
                }
                self.write(link, &grants, now)?;
                Ok((outcomes, now, grants.len()))
            })?;
            self.prune_after_write(link, now, logged);
            Ok(outcomes)
        })
    }
}

/// `body` inside one transaction. A failure rolls back and keeps the connection when
/// the session survived it; a failed COMMIT is reported as such, never retried. A
/// transaction cut short by the deadline is not rolled back here (there is no time left
/// to): its connection is dropped, and the server rolls it back when the session ends.
fn transaction<T>(
    link: &mut Link<'_>,
    body: impl FnOnce(&mut Link<'_>) -> Result<T, Failure>,
) -> Result<T, Failure> {
    link.query_drop("START TRANSACTION")?;
    match body(link) {
        Ok(value) => {
            link.query_drop("COMMIT").map_err(|failure| match failure {
                Failure::Db(e) => Failure::Commit(e),
                other => other,
            })?;
            match link.deadline.left() {
                Some(_) => Ok(value),
                None => Err(Failure::LateCommit),
            }
        }
        Err(failure) => {
            if !failure.breaks_connection() {
                link.query_drop("ROLLBACK")?;
            }
            Err(failure)
        }
    }
}

fn invalid_row(source: &str) -> Failure {
    Failure::Core(Error::Storage {
        code: "MYSQL_INVALID_ROW".into(),
        message: format!("{source} answered a row that is not what the lease store wrote"),
    })
}

fn text(bytes: Vec<u8>, table: &str) -> Result<String, Failure> {
    String::from_utf8(bytes).map_err(|_| invalid_row(table))
}

fn fetch_records(
    link: &mut Link<'_>,
    sql: &str,
    params: Params,
    table: &str,
) -> Result<Vec<LeaseRecord>, Failure> {
    link.exec_opt::<(Vec<u8>, Vec<u8>, i64, i64, i64)>(sql, params)?
        .into_iter()
        .map(|row| {
            let (key, owner, epoch, lease_until_ms, forgotten_at_epoch) =
                row.map_err(|_| invalid_row(table))?;
            Ok(LeaseRecord {
                key: text(key, table)?,
                owner: text(owner, table)?,
                epoch,
                lease_until_ms,
                forgotten_at_epoch,
            })
        })
        .collect()
}

impl LeaseStore for MysqlLeaseStore {
    super::lease_store_writes!(crate::metrics::Store::Mysql);

    fn read(&self, key: &str) -> Result<Option<LeaseRecord>> {
        assert_text("key", key)?;
        self.run(|link| {
            let mut rows = fetch_records(link, &self.sql.select_row, Params::from((key,)), &self.sql.leases)?;
            Ok(rows.pop())
        })
    }

    fn history(&self, key: Option<&str>) -> Result<Vec<HistoryEntry>> {
        let (sql, params) = match key {
            Some(key) => (&self.sql.history_of_key, Params::from((key,))),
            None => (&self.sql.history_all, Params::Empty),
        };
        let log = self.sql.log.as_str();
        self.run(|link| {
            link.exec_opt::<(Vec<u8>, String, Vec<u8>, i64, i64)>(sql, params.clone())?
                .into_iter()
                .map(|row| {
                    let (key, op, owner, epoch, at_ms) = row.map_err(|_| invalid_row(log))?;
                    Ok(HistoryEntry {
                        key: text(key, log)?,
                        op: LeaseOp::parse(&op).ok_or_else(|| invalid_row(log))?,
                        owner: text(owner, log)?,
                        epoch,
                        at_ms,
                    })
                })
                .collect()
        })
    }

    fn list(&self, prefix: &str) -> Result<Vec<LeaseRecord>> {
        let params = Params::from((prefix.len() as u64, prefix));
        self.run(|link| fetch_records(link, &self.sql.list, params.clone(), &self.sql.leases))
    }

    fn compact_log(&self) -> Result<u64> {
        self.compact()
    }

    fn now_ms(&self) -> Result<i64> {
        match &self.clock {
            Some(clock) => clock.now_ms(),
            None => self.run(|link| self.server_now(link)),
        }
    }

    fn close(&self) -> Result<()> {
        self.closed.store(true, Ordering::SeqCst);
        self.forget_idle();
        Ok(())
    }
}

/// Why a server with these settings (`innodb_flush_log_at_trx_commit`, `log_bin`,
/// `sync_binlog`) cannot keep an acknowledged grant, if it cannot. InnoDB must write and
/// flush its log at every commit; with binary logging on, the binary log must be flushed at
/// every commit too, or crash recovery rolls back transactions the binary log lost (and a
/// replica promoted from it never had them).
fn unsafe_durability((flush_log, log_bin, sync_binlog): (i64, i64, i64)) -> Option<String> {
    if flush_log != 1 {
        return Some(format!(
            "runs with innodb_flush_log_at_trx_commit = {flush_log} (1 is needed)"
        ));
    }
    if log_bin != 0 && sync_binlog != 1 {
        return Some(format!(
            "logs binary with sync_binlog = {sync_binlog} (1 is needed)"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use gotry_test_support::mysql::{self as server, ScratchTables};

    use super::*;

    #[test]
    fn a_server_that_can_lose_an_acknowledged_commit_is_named() {
        assert_eq!(
            unsafe_durability((1, 0, 0)),
            None,
            "no binary log: sync_binlog is moot"
        );
        assert_eq!(unsafe_durability((1, 1, 1)), None);
        for settings in [(0, 0, 0), (2, 0, 0), (2, 1, 1)] {
            let why = unsafe_durability(settings).unwrap();
            assert!(why.contains("innodb_flush_log_at_trx_commit"), "{why}");
        }
        let why = unsafe_durability((1, 1, 0)).unwrap();
        assert!(why.contains("sync_binlog = 0"), "{why}");
    }

    #[test]
    fn urls_name_every_part() {
        let options = MysqlOptions::from_url(
            "mysql://app%40east:p%3Ass%2Fw%40rd@db.internal:3307/lease%20s?prefix=t1_&timeout_ms=750",
        )
        .unwrap();
        assert_eq!(options.user.as_deref(), Some("app@east"));
        assert_eq!(options.password.as_deref(), Some("p:ss/w@rd"));
        assert_eq!((options.host.as_str(), options.port), ("db.internal", 3307));
        assert_eq!(options.database, "lease s");
        assert_eq!(options.table_prefix, "t1_");
        assert_eq!(options.timeout, Duration::from_millis(750));
        assert!(options.clock.is_none());
        assert_eq!((options.ssl_mode, options.ssl_ca), (None, None));

        let options = MysqlOptions::from_url("mysql://[::1]/test").unwrap();
        assert_eq!((options.host.as_str(), options.port), ("::1", 3306));
        assert_eq!((options.user, options.password), (None, None));
        assert_eq!(options.table_prefix, DEFAULT_TABLE_PREFIX);
        assert_eq!(options.timeout, DEFAULT_TIMEOUT);

        let options = MysqlOptions::from_url("mysql://root@127.0.0.1/test?prefix=").unwrap();
        assert_eq!((options.user.as_deref(), options.password), (Some("root"), None));
        assert_eq!(options.table_prefix, "");
    }

    #[test]
    fn bad_urls_are_refused_without_quoting_them() {
        for url in [
            "mysql://alice:s3cret@host:0/db",
            "mysql://alice:s3cret@host:99999/db",
            "mysql://alice:s3cret@host:port/db",
            "mysql://alice:s3cret@host",
            "mysql://alice:s3cret@/db",
            "mysql://alice:s3cret@host/",
            "mysql://alice:s3cret@host/a/b",
            "mysql://alice:s3cret%zz@host/db",
            "mysql://alice:s3cret%ff@host/db",
            "mysql://alice:s3cret@[::1/db",
            "mysql://alice:s3cret@[::1]x/db",
            "mysql://alice:s3cret@host/db?timeout_ms=soon",
            "mysql://alice:s3cret@host/db?prefix=a&prefix=b",
            "mysql://alice:s3cret@host/db?prefer_socket=true",
            "mysqlx://alice:s3cret@host/db",
        ] {
            let error = MysqlOptions::from_url(url).expect_err(url);
            assert!(matches!(error, Error::InvalidArgument { .. }), "{url}: {error:?}");
            let shown = format!("{error} {error:?}");
            assert!(
                !shown.contains("alice") && !shown.contains("s3cret"),
                "{url}: {shown}"
            );
        }
    }

    #[test]
    fn ssl_mode_defaults_by_host_and_ca() {
        let mode = |url: &str| MysqlOptions::from_url(url).expect(url).effective_ssl_mode();
        for loopback in [
            "mysql://root@127.0.0.1/test",
            "mysql://root@127.0.0.1:3307/test",
            "mysql://root@127.255.0.9/test",
            "mysql://root@localhost/test",
            "mysql://root@LocalHost/test",
            "mysql://root@[::1]:3306/test",
            "mysql://root@[0:0:0:0:0:0:0:1]/test",
        ] {
            assert_eq!(mode(loopback), SslMode::Disabled, "{loopback}");
        }
        for remote in [
            "mysql://root@db.internal/test",
            "mysql://root@10.0.0.7/test",
            "mysql://root@128.0.0.1/test",
            "mysql://root@[::2]/test",
            "mysql://root@[::ffff:127.0.0.1]/test",
            "mysql://root@localhost.example.com/test",
            "mysql://root@127.0.0.1.nip.io/test",
            "mysql://root@127.1/test",
        ] {
            assert_eq!(mode(remote), SslMode::Required, "{remote}");
        }
        // A CA says the certificate is to be checked, on any host.
        assert_eq!(
            mode("mysql://root@127.0.0.1/test?ssl-ca=/ca.pem"),
            SslMode::VerifyIdentity
        );
        assert_eq!(
            mode("mysql://root@db.internal/test?ssl-ca=/ca.pem"),
            SslMode::VerifyIdentity
        );
        // The default is decided on the host the options end with.
        let mut options = MysqlOptions::from_url("mysql://root@127.0.0.1/test").unwrap();
        options.host = "db.internal".into();
        assert_eq!(options.effective_ssl_mode(), SslMode::Required);
    }

    #[test]
    fn ssl_mode_takes_both_spellings() {
        for (text, expected) in [
            ("disabled", SslMode::Disabled),
            ("DISABLED", SslMode::Disabled),
            ("required", SslMode::Required),
            ("REQUIRED", SslMode::Required),
            ("Required", SslMode::Required),
            ("verify_identity", SslMode::VerifyIdentity),
            ("VERIFY_IDENTITY", SslMode::VerifyIdentity),
        ] {
            let url = format!("mysql://root@db.internal/test?ssl-mode={text}");
            let options = MysqlOptions::from_url(&url).expect(&url);
            assert_eq!(options.ssl_mode, Some(expected), "{text}");
            assert_eq!(options.effective_ssl_mode(), expected, "{text}");
            assert_eq!(SslMode::parse(expected.as_str()).unwrap(), expected);
        }
        let options = MysqlOptions::from_url(
            "mysql://root@127.0.0.1/test?ssl-mode=required&ssl-ca=%2Fetc%2Fdb%20ca.pem",
        )
        .unwrap();
        assert_eq!(options.effective_ssl_mode(), SslMode::Required);
        assert_eq!(options.ssl_ca.as_deref(), Some(Path::new("/etc/db ca.pem")));
        let options = MysqlOptions::from_url("mysql://root@db.internal/test?ssl-mode=disabled").unwrap();
        assert_eq!(options.effective_ssl_mode(), SslMode::Disabled);
    }

    #[test]
    fn bad_tls_options_are_refused_without_quoting_the_credentials() {
        for (url, says) in [
            (
                "mysql://alice:s3cret@host/db?ssl-mode=preferred",
                "preferred is not offered",
            ),
            (
                "mysql://alice:s3cret@host/db?ssl-mode=PREFERRED",
                "preferred is not offered",
            ),
            (
                "mysql://alice:s3cret@host/db?ssl-mode=verify_ca",
                "verify_ca is not offered",
            ),
            (
                "mysql://alice:s3cret@host/db?ssl-mode=VERIFY_CA&ssl-ca=/ca.pem",
                "verify_ca is not offered",
            ),
            (
                "mysql://alice:s3cret@host/db?ssl-mode=on",
                "ssl-mode is disabled, required or verify_identity",
            ),
            ("mysql://alice:s3cret@host/db?ssl-mode=", "ssl-mode is disabled"),
            ("mysql://alice:s3cret@host/db?ssl-mode", "ssl-mode is disabled"),
            (
                "mysql://alice:s3cret@host/db?ssl-mode=verify-identity",
                "ssl-mode is disabled",
            ),
            (
                "mysql://alice:s3cret@host/db?ssl-mode=required&ssl-mode=disabled",
                "given twice",
            ),
            ("mysql://alice:s3cret@host/db?ssl-ca=", "ssl-ca names a file"),
            (
                "mysql://alice:s3cret@host/db?ssl-ca=/a.pem&ssl-ca=/b.pem",
                "given twice",
            ),
            ("mysql://alice:s3cret@host/db?ssl-ca=%zz", "badly percent-encoded"),
            (
                "mysql://alice:s3cret@host/db?ssl-mode=disabled&ssl-ca=/ca.pem",
                "checks no certificate",
            ),
            (
                "mysql://alice:s3cret@host/db?ssl_mode=required",
                "known: prefix, timeout_ms, ssl-mode, ssl-ca",
            ),
            (
                "mysql://alice:s3cret@host/db?sslmode=require",
                "unknown mysql:// URL option",
            ),
            (
                "mysql://alice:s3cret@host/db?require_ssl=true",
                "unknown mysql:// URL option",
            ),
        ] {
            let error = MysqlOptions::from_url(url).expect_err(url);
            assert!(matches!(error, Error::InvalidArgument { .. }), "{url}: {error:?}");
            let shown = format!("{error} {error:?}");
            assert!(shown.contains(says), "{url}: {shown}");
            assert!(
                !shown.contains("alice") && !shown.contains("s3cret"),
                "{url}: {shown}"
            );
        }
    }

    #[test]
    fn a_ca_file_is_checked_before_connecting() {
        let dir = tempfile::tempdir().unwrap();
        let not_a_cert = dir.path().join("key.pem");
        std::fs::write(
            &not_a_cert,
            "-----BEGIN PRIVATE KEY-----\nMIGH\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let missing = dir.path().join("missing.pem");
        // Port 1 on loopback: an attempt to connect would fail otherwise.
        for (ca, says) in [
            (&missing, "cannot be read"),
            (&empty, "holds no certificate"),
            (&not_a_cert, "holds no certificate"),
            (&dir.path().to_path_buf(), "cannot be read"),
        ] {
            let mut options = MysqlOptions::from_url("mysql://alice:s3cret@127.0.0.1:1/test").unwrap();
            options.ssl_ca = Some(ca.clone());
            match MysqlLeaseStore::open(options) {
                Err(Error::InvalidArgument { message }) => {
                    assert!(
                        message.contains(says) && message.contains(&ca.display().to_string()),
                        "{message}"
                    );
                    assert!(!message.contains("s3cret"), "{message}");
                }
                other => panic!("{}: {:?}", ca.display(), other.map(|_| ())),
            }
        }
        // Set by hand, the same contradiction as in a URL.
        let mut options = MysqlOptions::from_url("mysql://root@127.0.0.1:1/test").unwrap();
        options.ssl_mode = Some(SslMode::Disabled);
        options.ssl_ca = Some(not_a_cert);
        assert!(matches!(
            MysqlLeaseStore::open(options),
            Err(Error::InvalidArgument { message }) if message.contains("checks no certificate")
        ));
    }

    #[test]
    fn tls_failures_are_unavailable_with_a_stable_code_and_the_mode() {
        let endpoint = Endpoint {
            shown: "db:3306/leases".into(),
            user: Some("alice".into()),
            timeout: Duration::from_millis(700),
            tls: SslMode::VerifyIdentity,
        };
        let error = endpoint.error(Failure::Db(mysql::Error::DriverError(
            mysql::DriverError::TlsNotSupported,
        )));
        assert!(
            matches!(&error, Error::LeaseStoreUnavailable { message }
                if message.starts_with(TLS_NOT_OFFERED)
                    && message.contains("ssl-mode=verify_identity")
                    && message.contains("db:3306/leases")),
            "{error:?}"
        );
        let secure_only = mysql::Error::MySqlError(mysql::error::MySqlError {
            state: "HY000".into(),
            message: "Connections using insecure transport are prohibited".into(),
            code: 3159,
        });
        assert!(matches!(
            Endpoint { tls: SslMode::Disabled, ..endpoint }.error(Failure::Db(secure_only)),
            Error::LeaseStoreUnavailable { message }
                if message.starts_with(TLS_REQUIRED_BY_SERVER) && message.contains("ssl-mode=disabled")
        ));
        // Bad data on the socket that is not TLS's is not named a TLS failure.
        let endpoint = Endpoint {
            shown: "db:3306/leases".into(),
            user: None,
            timeout: Duration::from_millis(700),
            tls: SslMode::Required,
        };
        let garbled = mysql::Error::IoError(std::io::Error::new(std::io::ErrorKind::InvalidData, "garbled"));
        assert!(matches!(
            endpoint.error(Failure::Db(garbled)),
            Error::LeaseStoreUnavailable { message } if !message.starts_with("MYSQL_TLS")
        ));
    }

    #[test]
    fn debug_output_leaves_the_credentials_out() {
        let options = MysqlOptions::from_url("mysql://alice:s3cret@db.internal/leases").unwrap();
        let shown = format!("{options:?}");
        assert!(shown.contains("db.internal:3306/leases"), "{shown}");
        assert!(shown.contains("ssl_mode: Required"), "{shown}");
        assert!(!shown.contains("alice") && !shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn prefix_and_timeout_are_checked_before_connecting() {
        // Port 1 on loopback: if these reached the network they would fail otherwise.
        for (prefix, timeout_ms) in [
            ("Upper_", 2_000),
            ("semi;colon", 2_000),
            (&*"p".repeat(33), 2_000),
            ("ok_", 99),
            ("ok_", 60_001),
        ] {
            let mut options = MysqlOptions::from_url("mysql://root@127.0.0.1:1/test").unwrap();
            options.table_prefix = prefix.to_owned();
            options.timeout = Duration::from_millis(timeout_ms);
            assert!(
                matches!(MysqlLeaseStore::open(options), Err(Error::InvalidArgument { .. })),
                "{prefix:?} {timeout_ms}"
            );
        }
    }

    fn server_error(code: u16) -> mysql::Error {
        mysql::Error::MySqlError(mysql::error::MySqlError {
            state: "HY000".into(),
            message: format!("Access denied for user 'alice'@'localhost' ({code})"),
            code,
        })
    }

    #[test]
    fn failures_are_classified_by_what_they_allow() {
        let io = |kind| Failure::Db(mysql::Error::IoError(std::io::Error::from(kind)));
        let reset = io(std::io::ErrorKind::ConnectionReset);
        assert!(reset.breaks_connection() && reset.lost_connection() && !reset.lost_race());
        let timed_out = io(std::io::ErrorKind::WouldBlock);
        assert!(timed_out.breaks_connection() && !timed_out.lost_connection());
        let killed = Failure::Db(server_error(1927));
        assert!(killed.breaks_connection() && killed.lost_connection());
        let lock_wait = Failure::Db(server_error(1205));
        assert!(!lock_wait.breaks_connection() && !lock_wait.lost_race());
        assert!(Failure::Db(server_error(1062)).lost_race());
        assert!(Failure::Db(server_error(1213)).lost_race());
        let commit = Failure::Commit(server_error(1062));
        assert!(commit.breaks_connection() && !commit.lost_connection() && !commit.lost_race());
    }

    #[test]
    fn server_errors_map_to_core_errors_without_the_user_name() {
        let endpoint = Endpoint {
            shown: "db:3306/leases".into(),
            user: Some("alice".into()),
            timeout: Duration::from_millis(700),
            tls: SslMode::Disabled,
        };
        let denied = endpoint.error(Failure::Db(server_error(1045)));
        assert!(
            matches!(&denied, Error::Storage { code, .. } if code == "ER_ACCESS_DENIED_ERROR"),
            "{denied:?}"
        );
        assert!(!format!("{denied} {denied:?}").contains("alice"), "{denied}");
        assert!(matches!(
            endpoint.error(Failure::Db(server_error(1205))),
            Error::LeaseStoreUnavailable { .. }
        ));
        assert!(matches!(
            endpoint.error(Failure::Db(server_error(9999))),
            Error::Storage { code, .. } if code == "MYSQL_ERROR_9999"
        ));
        let refused = mysql::Error::IoError(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(matches!(
            endpoint.error(Failure::Db(refused)),
            Error::LeaseStoreUnavailable { message } if message.contains("db:3306/leases")
        ));
        let lost = mysql::Error::IoError(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        assert!(matches!(
            endpoint.error(Failure::Commit(lost)),
            Error::LeaseStoreUnavailable { message } if message.contains("may or may not")
        ));
    }

    #[test]
    #[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
    fn decisions_use_the_time_the_server_answers() {
        let url = server::server_url();
        let mut scratch = ScratchTables::new(&url);
        let mut options = MysqlOptions::from_url(&url).expect("url");
        options.table_prefix = server::fresh_prefix();
        let mut store = MysqlLeaseStore::open(options).unwrap_or_else(|e| server::no_server(&url, &e));
        let (leases, log) = store.table_names();
        scratch.add(leases, log);
        // A server whose clock reads 1 January 2100, far from this host's: the decisions
        // follow the server.
        const SERVER_MS: i64 = 4_102_444_800_000;
        store.sql.now = format!("SELECT CAST({SERVER_MS} AS SIGNED)");
        assert_eq!(store.now_ms().unwrap(), SERVER_MS);
        let grant = store.acquire("k", "o", 1_000).unwrap();
        assert_eq!(grant.record.lease_until_ms, SERVER_MS + 1_000);
        assert_eq!(store.history(Some("k")).unwrap()[0].at_ms, SERVER_MS);
        assert!(matches!(
            store.acquire("k", "p", 1_000),
            Err(Error::LeaseHeld { .. })
        ));
    }
}
