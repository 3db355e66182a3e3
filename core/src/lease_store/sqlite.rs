//! The lease store on one SQLite file, shared by the processes of one host.
//!
//! The file format is the reference implementation's (same tables, columns and triggers),
//! so the JavaScript store and this one can open the same file, in either order. SQLite's
//! write lock serializes writers across processes: every operation runs in a
//! `BEGIN IMMEDIATE` transaction, waits for the lock up to the busy timeout, and a lock
//! still taken after that surfaces as LEASE_STORE_UNAVAILABLE.
//!
//! The busy timeout bounds a whole call, counted from its start (see
//! [`call_begun_at`](super::call_begun_at)) and before it queues on the store's one
//! connection: calls from many threads wait for each other there, and the last of eight
//! behind a locked file must not wait eight timeouts. SQLite is given what is left of it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use super::{
    assert_text, decide, log_retention_ms, Deadline, HistoryEntry, LeaseOp, LeaseRecord, LeaseStore, Request,
    DEFAULT_LOG_RETENTION, PRUNE_MIN_BATCH,
};
use crate::clock::{SystemWallClock, WallClock};
use crate::errors::{Error, Result};
use crate::paths::assert_path;

pub use crate::plumbing::DEFAULT_BUSY_TIMEOUT;

/// The reference's schema, verbatim in structure. The triggers hold the invariants that a
/// buggy writer (ours, the reference, or a hand-typed `sqlite3` session) must not break.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS leases (
  key TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  epoch INTEGER NOT NULL CHECK (epoch >= 1),
  lease_until_ms INTEGER NOT NULL,
  forgotten_at_epoch INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lease_log (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  key TEXT NOT NULL,
  op TEXT NOT NULL CHECK (op IN ('acquire', 'renew', 'release', 'forget')),
  owner TEXT NOT NULL,
  epoch INTEGER NOT NULL,
  at_ms INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS leases_epoch_forward_only
BEFORE UPDATE OF epoch ON leases
WHEN NEW.epoch <> OLD.epoch AND NEW.epoch <> OLD.epoch + 1
BEGIN SELECT RAISE(ABORT, 'lease epoch moves forward by exactly one'); END;
CREATE TRIGGER IF NOT EXISTS leases_forgotten_floor_forward_only
BEFORE UPDATE OF forgotten_at_epoch ON leases
WHEN NEW.forgotten_at_epoch < OLD.forgotten_at_epoch
BEGIN SELECT RAISE(ABORT, 'the forgotten floor never moves back'); END;
CREATE TRIGGER IF NOT EXISTS leases_never_deleted
BEFORE DELETE ON leases
BEGIN SELECT RAISE(ABORT, 'a lease row is the epoch floor of its tenant and is never deleted'); END;
";

/// This implementation's own objects, beside the reference's tables (which it leaves as
/// they are, so the reference opens the file as before):
///
/// * `gotry_lease_host_clock`: for each key, when the lease last written here runs out on
///   the host clock ([`crate::HostClock`]), and which row of `leases` that belongs to. A
///   wall clock stepped an hour either way then neither grants a lease whose holder's gate
///   is open nor keeps a dead holder's lease for an hour. A row that no longer matches
///   `leases` (the reference, or a store on a test clock, wrote since), or that was read on
///   another boot, is ignored, and the wall clock decides, as it does for the reference.
/// * `gotry_lease_log_tenure` and `gotry_lease_log_pruned`: what pruning the log needs, an
///   index that finds a tenure's later renewals and the mark of how far it has judged.
const OWN_SCHEMA: &str = "
CREATE INDEX IF NOT EXISTS gotry_lease_log_tenure ON lease_log (key, epoch, id);
CREATE TABLE IF NOT EXISTS gotry_lease_log_pruned (
  one INTEGER PRIMARY KEY CHECK (one = 1),
  through_id INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS gotry_lease_host_clock (
  key TEXT PRIMARY KEY,
  epoch INTEGER NOT NULL,
  lease_until_ms INTEGER NOT NULL,
  clock_id TEXT NOT NULL,
  until_host_ms INTEGER NOT NULL
) WITHOUT ROWID;
";

const SELECT_ROW: &str =
    "SELECT key, owner, epoch, lease_until_ms, forgotten_at_epoch FROM leases WHERE key = ?1";

/// The row a write decides on, with the host clock deadline recorded for exactly that row on
/// the clock `?2` (none with a NULL clock): one statement where there were two. A subquery,
/// not a LEFT JOIN: SQLite prepares a LEFT JOIN with parameters again each time they are bound,
/// which more than doubled a write's CPU.
const SELECT_ROW_AND_HOST_DEADLINE: &str = "
SELECT key, owner, epoch, lease_until_ms, forgotten_at_epoch,
  (SELECT h.until_host_ms FROM gotry_lease_host_clock AS h
   WHERE h.key = l.key AND h.epoch = l.epoch AND h.lease_until_ms = l.lease_until_ms AND h.clock_id = ?2)
FROM leases AS l WHERE key = ?1";

/// Statements the store keeps prepared: every one a write runs, and its reads', with room to
/// spare, so that none is prepared again (rusqlite keeps 16 by default).
const STATEMENT_CACHE: usize = 32;

/// Options of [`SqliteLeaseStore::open_with`].
#[derive(Clone)]
pub struct SqliteOptions {
    /// The store's clock; the system clock by default.
    pub clock: Arc<dyn WallClock>,
    /// How long to wait for another writer; [`DEFAULT_BUSY_TIMEOUT`] by default.
    pub busy_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> SqliteOptions {
        SqliteOptions {
            clock: Arc::new(SystemWallClock),
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
        }
    }
}

/// A lease store on one SQLite file. `Send + Sync`: calls from several threads are
/// serialized on one connection (SQLite's file lock serializes writers anyway), and
/// [`SqliteLeaseStore::with_clock`] views share that connection.
#[derive(Clone)]
pub struct SqliteLeaseStore {
    connection: Arc<Mutex<Option<Connection>>>,
    path: Arc<PathBuf>,
    clock: Arc<dyn WallClock>,
    busy_timeout: Duration,
    log_retention_ms: i64,
}

impl std::fmt::Debug for SqliteLeaseStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteLeaseStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteLeaseStore {
    /// Opens (and creates, with its parent folders) the store file with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteLeaseStore> {
        SqliteLeaseStore::open_with(path, SqliteOptions::default())
    }

    /// A path is a path: never a SQLite URI (whose `?nolock=1` would silently turn off the
    /// locking every guarantee rests on) and never an in-memory database (which shares
    /// nothing with the other processes of the host).
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<SqliteLeaseStore> {
        let path = path.as_ref();
        assert_store_path(path)?;
        let busy_ms = options.busy_timeout.as_millis();
        if busy_ms > i32::MAX as u128 {
            return Err(Error::invalid_argument(format!(
                "a busy timeout is at most {} ms, got {busy_ms}",
                i32::MAX
            )));
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                // "Exists" here means a file stands where the folder should be.
                let e = match e.kind() {
                    std::io::ErrorKind::AlreadyExists => std::io::Error::from_raw_os_error(libc::ENOTDIR),
                    _ => e,
                };
                Error::io(
                    format_args!("cannot create the folder of the lease store {}", parent.display()),
                    &e,
                )
            })?;
        }
        let created = !path.exists();
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
            | rusqlite::OpenFlags::SQLITE_OPEN_CREATE
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let deadline = Deadline::after(options.busy_timeout);
        let connection = Connection::open_with_flags(path, flags).map_err(storage_error)?;
        // The busy timeout first: sibling processes must wait for the write lock, not fail.
        wait_until(&connection, deadline, options.busy_timeout)?;
        // Only a file with no page yet takes it (a store made by the reference keeps its own).
        connection
            .pragma_update(None, "page_size", PAGE_SIZE)
            .map_err(storage_error)?;
        configure_durability(&connection)?;
        connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        assert_intact(&connection, path)?;
        // An existing store is opened without taking the write lock, so that opening never
        // waits behind another process's transaction; a new one is created in a transaction.
        if !schema_is_complete(&connection)? {
            wait_until(&connection, deadline, options.busy_timeout)?;
            immediate(&connection, |tx| {
                tx.execute_batch(SCHEMA)
                    .and_then(|()| tx.execute_batch(OWN_SCHEMA))
                    .map_err(storage_error)
            })?;
        }
        if created {
            sync_parent_directory(path)?;
        }
        Ok(SqliteLeaseStore {
            connection: Arc::new(Mutex::new(Some(connection))),
            path: Arc::new(path.to_path_buf()),
            clock: options.clock,
            busy_timeout: options.busy_timeout,
            log_retention_ms: DEFAULT_LOG_RETENTION.as_millis() as i64,
        })
    }

    /// The file this store opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The same store (same connection, same file) deciding on another clock.
    pub fn with_clock(&self, clock: Arc<dyn WallClock>) -> SqliteLeaseStore {
        SqliteLeaseStore {
            clock,
            ..self.clone()
        }
    }

    /// The same store keeping every renewal for `retention` instead of
    /// [`DEFAULT_LOG_RETENTION`].
    pub fn with_log_retention(&self, retention: Duration) -> Result<SqliteLeaseStore> {
        Ok(SqliteLeaseStore {
            log_retention_ms: log_retention_ms(retention)?,
            ..self.clone()
        })
    }

    fn connection(&self) -> Result<MutexGuard<'_, Option<Connection>>> {
        // A panic while the lock was held cannot leave a half-done write behind (the
        // transaction rolls back on drop), so a poisoned lock is safe to take over.
        Ok(self
            .connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// `f` on the connection, within one busy timeout from the call's start.
    fn with_open<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        self.with_open_until(Deadline::after(self.busy_timeout), f)
    }

    /// `f` on the connection, waiting for other writers until `deadline` at most: the time
    /// this call queued for the connection is already spent.
    fn with_open_until<T>(
        &self,
        deadline: Deadline,
        f: impl FnOnce(&mut Connection) -> Result<T>,
    ) -> Result<T> {
        let mut guard = self.connection()?;
        let connection = guard
            .as_mut()
            .ok_or_else(|| Error::unavailable("the lease store is closed"))?;
        wait_until(connection, deadline, self.busy_timeout)?;
        f(connection)
    }

    /// Operations in one immediate transaction, committed durably before it returns: for
    /// each, read the row, apply the rules, write the row and its log entry. A refusal
    /// answers that operation alone; a storage failure rolls the whole transaction back.
    fn apply_all(&self, requests: &[(&str, Request<'_>)]) -> Result<Vec<Result<LeaseRecord>>> {
        self.with_open(|connection| {
            immediate(connection, |tx| {
                let now = self.clock.now_ms()?;
                let host = match self.clock.host_clock() {
                    Some(clock) => Some(HostReading {
                        id: clock.id(),
                        now_ms: clock.now_ms()?,
                    }),
                    None => None,
                };
                let mut log = Vec::with_capacity(requests.len());
                let outcomes = requests
                    .iter()
                    .map(|(key, request)| apply_one(tx, key, request, now, host.as_ref(), &mut log))
                    .collect::<Result<Vec<_>>>()?;
                insert_log(tx, &log, now)?;
                let budget = (2 * log.len()).max(PRUNE_MIN_BATCH);
                self.prune_log(tx, now, budget)?;
                Ok(outcomes)
            })
        })
    }
}

impl SqliteLeaseStore {
    /// Judges up to `budget` log rows after the last one judged (a mark every process of
    /// the file shares, written in the same transaction), in log order, and deletes the
    /// renewals among them that are older than the retention and that a later renewal of the
    /// same tenure follows. Every acquire, release and forget stays, and so does the last
    /// renewal of each tenure, so an audit still sees how far each epoch was renewed. Stops
    /// at the first row still inside the retention: it is judged once it is old. Returns the
    /// rows judged and deleted.
    fn prune_log(&self, tx: &Connection, now: i64, budget: usize) -> Result<(usize, usize)> {
        let cutoff = now.saturating_sub(self.log_retention_ms);
        // Read only up to the first row still inside the retention: on a log that pruning
        // keeps up with, that is the first row, and a write reads one row here, not `budget`.
        // The budget is counted here, not bound as a `LIMIT ?`: SQLite re-prepares a statement
        // each time its LIMIT parameter is bound, which cost a third of every write's CPU.
        // The mark is read in the same statement, which saves a write a statement.
        let rows: Vec<(i64, String, i64, bool)> = tx
            .prepare_cached(
                "SELECT id, key, epoch, op = 'renew', at_ms FROM lease_log
                 WHERE id > ifnull((SELECT through_id FROM gotry_lease_log_pruned WHERE one = 1), 0)
                 ORDER BY id",
            )
            .and_then(|mut st| {
                let mut cursor = st.query([])?;
                let mut old = Vec::new();
                while old.len() < budget {
                    match cursor.next()? {
                        Some(r) if r.get::<_, i64>(4)? < cutoff => {
                            old.push((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                        }
                        _ => break,
                    }
                }
                Ok(old)
            })
            .map_err(storage_error)?;
        let (mut through, mut judged, mut deleted) = (0, 0, 0);
        for (id, key, epoch, renewal) in &rows {
            (through, judged) = (*id, judged + 1);
            if *renewal {
                deleted += tx
                    .prepare_cached(
                        "DELETE FROM lease_log WHERE id = ?1 AND EXISTS (SELECT 1 FROM lease_log
                           WHERE key = ?2 AND epoch = ?3 AND id > ?1 AND op = 'renew')",
                    )
                    .and_then(|mut st| st.execute(params![id, key, epoch]))
                    .map_err(storage_error)?;
            }
        }
        if judged > 0 {
            tx.prepare_cached(
                "INSERT INTO gotry_lease_log_pruned (one, through_id) VALUES (1, ?1)
                 ON CONFLICT (one) DO UPDATE SET through_id = excluded.through_id",
            )
            .and_then(|mut st| st.execute(params![through]))
            .map_err(storage_error)?;
        }
        Ok((judged, deleted))
    }

    /// [`LeaseStore::compact_log`]: transactions of a few thousand rows, so that no other
    /// writer waits long for any of them, all within the call's one busy timeout. A log
    /// too long for that is compacted by several calls: each keeps what its batches did.
    fn compact(&self) -> Result<u64> {
        const BATCH: usize = 4_096;
        let deadline = Deadline::after(self.busy_timeout);
        let mut deleted = 0u64;
        loop {
            let batch = self.with_open_until(deadline, |connection| {
                immediate(connection, |tx| {
                    let now = self.clock.now_ms()?;
                    self.prune_log(tx, now, BATCH)
                })
            });
            let (judged, gone) = batch.map_err(|error| match error {
                Error::LeaseStoreUnavailable { message } if deleted > 0 => Error::unavailable(format!(
                    "{message} (this call deleted {deleted} log rows first; call again to go on)"
                )),
                other => other,
            })?;
            deleted += gone as u64;
            if judged < BATCH {
                return Ok(deleted);
            }
        }
    }
}

/// One reading of the host clock, taken with the wall clock's for a transaction.
struct HostReading<'a> {
    id: &'a str,
    now_ms: i64,
}

/// Two clocks whose views of a deadline differ by more than this were stepped apart; closer,
/// they merely drift (NTP slews the wall clock by up to 500 ppm) or were read a moment
/// apart, and the wall clock decides, so that the log (dated on it) never shows a grant
/// before the previous deadline nor a renewal after it, and the reference would judge alike.
const WALL_STEP_MS: i64 = 1_000;

/// Whether `current` has run out, when this store wrote it on the host clock. The time
/// left on each clock is compared, not the wall clock against its own deadline: a forward
/// step of about a TTL leaves the wall a moment past the deadline, yet the holder's gate is
/// open for a whole TTL, and only the host clock sees that.
///
/// `until_host_ms` is the host clock deadline recorded for exactly this row on `host`'s clock,
/// if any (see [`select_for_write`]).
fn measured_expiry(
    current: Option<&LeaseRecord>,
    until_host_ms: Option<i64>,
    host: Option<&HostReading<'_>>,
    now: i64,
) -> Option<bool> {
    let (Some(row), Some(until), Some(host)) = (current, until_host_ms, host) else {
        return None;
    };
    let (wall_left, host_left) = (row.lease_until_ms - now, until - host.now_ms);
    Some(if wall_left.abs_diff(host_left) <= WALL_STEP_MS as u64 {
        wall_left <= 0
    } else {
        host_left <= 0
    })
}

/// The row of `key`, and the host clock deadline recorded for that very row on `host`'s clock.
fn select_for_write(
    tx: &Connection,
    key: &str,
    host: Option<&HostReading<'_>>,
) -> Result<Option<(LeaseRecord, Option<i64>)>> {
    tx.prepare_cached(SELECT_ROW_AND_HOST_DEADLINE)
        .and_then(|mut st| {
            st.query_row(params![key, host.map(|h| h.id)], |r| {
                Ok((row_to_record(r)?, r.get::<_, Option<i64>>(5)?))
            })
            .optional()
        })
        .map_err(storage_error)
}

/// Records when the lease just written runs out on the host clock: a grant's TTL from now,
/// a release at once. A floor raised by a forget leaves the deadline, and its row, as they are.
fn record_host_expiry(
    tx: &Connection,
    next: &LeaseRecord,
    request: &Request<'_>,
    host: Option<&HostReading<'_>>,
) -> Result<()> {
    let Some(host) = host else { return Ok(()) };
    let until = match *request {
        Request::Acquire { ttl_ms, .. } | Request::Renew { ttl_ms, .. } => host.now_ms + ttl_ms,
        Request::Release { .. } => host.now_ms,
        Request::Forget { .. } => return Ok(()),
    };
    tx.prepare_cached(
        "INSERT INTO gotry_lease_host_clock (key, epoch, lease_until_ms, clock_id, until_host_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (key) DO UPDATE SET epoch = excluded.epoch,
           lease_until_ms = excluded.lease_until_ms, clock_id = excluded.clock_id,
           until_host_ms = excluded.until_host_ms",
    )
    .and_then(|mut st| st.execute(params![next.key, next.epoch, next.lease_until_ms, host.id, until]))
    .map_err(storage_error)?;
    Ok(())
}

/// One operation inside an open transaction. `Ok(Err(..))` is a refusal by the rules;
/// `Err(..)` a storage failure that must abort the transaction.
fn apply_one<'a>(
    tx: &Connection,
    key: &'a str,
    request: &Request<'a>,
    now: i64,
    host: Option<&HostReading<'_>>,
    log: &mut Vec<(&'a str, &'static str, &'a str, i64)>,
) -> Result<Result<LeaseRecord>> {
    let (current, until_host_ms) = match select_for_write(tx, key, host)? {
        Some((row, until)) => (Some(row), until),
        None => (None, None),
    };
    let measured = measured_expiry(current.as_ref(), until_host_ms, host, now);
    let next = match decide(key, current.as_ref(), request, now, measured) {
        Ok(next) => next,
        Err(refusal) => return Ok(Err(refusal)),
    };
    // Each operation writes only the columns it changes: a renewal touches the deadline and
    // nothing else, so the epoch and floor triggers do not even run for it. That matters
    // when a keeper renews thousands of rows in one transaction.
    let written = match (request, &current) {
        (Request::Renew { .. } | Request::Release { .. }, Some(_)) => tx
            .prepare_cached("UPDATE leases SET lease_until_ms = ?2 WHERE key = ?1")
            .and_then(|mut st| st.execute(params![next.key, next.lease_until_ms])),
        (Request::Forget { .. }, Some(_)) => tx
            .prepare_cached("UPDATE leases SET forgotten_at_epoch = ?2 WHERE key = ?1")
            .and_then(|mut st| st.execute(params![next.key, next.forgotten_at_epoch])),
        (_, Some(_)) => tx
            .prepare_cached("UPDATE leases SET owner = ?2, epoch = ?3, lease_until_ms = ?4 WHERE key = ?1")
            .and_then(|mut st| st.execute(params![next.key, next.owner, next.epoch, next.lease_until_ms])),
        (_, None) => tx
            .prepare_cached(
                "INSERT INTO leases (key, owner, epoch, lease_until_ms, forgotten_at_epoch)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut st| {
                st.execute(params![
                    next.key,
                    next.owner,
                    next.epoch,
                    next.lease_until_ms,
                    next.forgotten_at_epoch
                ])
            }),
    };
    written.map_err(storage_error)?;
    record_host_expiry(tx, &next, request, host)?;
    log.push((key, request.op().as_str(), request.owner(), next.epoch));
    Ok(Ok(next))
}

/// Appends the log entries of one transaction in order, many rows per statement: a
/// keeper's round logs thousands of renewals, and one statement per row would cost more
/// than the rows themselves.
fn insert_log(tx: &Connection, entries: &[(&str, &str, &str, i64)], now: i64) -> Result<()> {
    const ROWS_PER_STATEMENT: usize = 64;
    const ONE_ROW: &str = "INSERT INTO lease_log (key, op, owner, epoch, at_ms) VALUES (?, ?, ?, ?, ?)";
    for chunk in entries.chunks(ROWS_PER_STATEMENT) {
        // A single operation's row, the common case, is not worth a string made each time.
        let sql = match chunk.len() {
            1 => std::borrow::Cow::Borrowed(ONE_ROW),
            rows => {
                let values = vec!["(?, ?, ?, ?, ?)"; rows].join(", ");
                std::borrow::Cow::Owned(format!(
                    "INSERT INTO lease_log (key, op, owner, epoch, at_ms) VALUES {values}"
                ))
            }
        };
        let params: Vec<&dyn rusqlite::ToSql> = chunk
            .iter()
            .flat_map(|(key, op, owner, epoch)| {
                [
                    key as &dyn rusqlite::ToSql,
                    op,
                    owner,
                    epoch,
                    &now as &dyn rusqlite::ToSql,
                ]
            })
            .collect();
        tx.prepare_cached(&sql)
            .and_then(|mut st| st.execute(params.as_slice()))
            .map_err(storage_error)?;
    }
    Ok(())
}

/// The page size of a store this library creates. A lease operation commits five small rows
/// in five pages (the lease, the host clock, the log, its tenure index, `sqlite_sequence`), and
/// the WAL holds each page whole: 1 KiB pages write and flush 5 KiB a commit where SQLite's
/// default 4 KiB writes 20 KiB.
const PAGE_SIZE: i64 = 1024;

/// Durability: an acknowledged operation must survive power loss, not only a crash.
///
/// WAL with `synchronous = FULL` syncs the log on every commit: one fdatasync per
/// operation, and readers never wait for the writer. The reference's default rollback
/// journal also survives power loss but needs about three syncs per commit (journal,
/// database, journal removal). `synchronous = NORMAL` in WAL would be faster still, and
/// would lose the last acknowledged operations on power loss, which a lease store cannot
/// afford (a lost renewal is harmless, a lost acquire hands one epoch to two holders).
/// WAL is recorded in the file, so a reference process that opens it later uses it too.
fn configure_durability(connection: &Connection) -> Result<()> {
    match connection.query_row("PRAGMA journal_mode = WAL", [], |row| row.get::<_, String>(0)) {
        Ok(_) => {}
        // Another process holds the file in a way that forbids the switch for now: the
        // rollback journal is durable as well, so carry on in whatever mode the file has.
        Err(e) if is_busy(&e) => {}
        Err(e) => return Err(storage_error(e)),
    }
    connection
        .pragma_update(None, "synchronous", "FULL")
        .map_err(storage_error)
}

/// A file whose header is intact but whose pages are not would open and grant on whatever
/// rows still read: `quick_check` (a few milliseconds for a lease store) refuses it first.
fn assert_intact(connection: &Connection, path: &Path) -> Result<()> {
    let verdict: String = connection
        .query_row("PRAGMA quick_check(1)", [], |row| row.get(0))
        .map_err(storage_error)?;
    if verdict == "ok" {
        return Ok(());
    }
    Err(Error::Storage {
        code: "SQLITE_CORRUPT".to_owned(),
        message: format!(
            "{} is damaged ({verdict}): restore it from a copy",
            path.display()
        ),
    })
}

/// Whether every table and trigger of the schema is already in the file.
fn schema_is_complete(connection: &Connection) -> Result<bool> {
    let found: i64 = connection
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name IN ('leases', 'lease_log',
               'leases_epoch_forward_only', 'leases_forgotten_floor_forward_only', 'leases_never_deleted',
               'gotry_lease_host_clock', 'gotry_lease_log_tenure', 'gotry_lease_log_pruned')",
            [],
            |row| row.get(0),
        )
        .map_err(storage_error)?;
    Ok(found == 8)
}

/// SQLite syncs the folder when it creates its journal or WAL, not when it creates the
/// database file itself: a new store's file name is made durable here, so that a power cut
/// right after the first acknowledged grant cannot leave a WAL without its database.
fn sync_parent_directory(path: &Path) -> Result<()> {
    let parent = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => parent.to_path_buf(),
        None => PathBuf::from("."),
    };
    std::fs::File::open(&parent)
        .and_then(|folder| folder.sync_all())
        .map_err(|e| Error::io(format_args!("cannot sync the folder {}", parent.display()), &e))
}

/// Gives SQLite what is left until `deadline` to wait for another writer's lock; with
/// nothing left, the call fails before it touches the file. A store given no busy timeout
/// at all never waits, and still runs its calls.
fn wait_until(connection: &Connection, deadline: Deadline, busy_timeout: Duration) -> Result<()> {
    let left = match deadline.left() {
        Some(left) => left,
        None if busy_timeout.is_zero() => Duration::ZERO,
        None => {
            return Err(Error::unavailable(format!(
                "the lease store is busy: the call's {} ms busy timeout ran out before it could start",
                busy_timeout.as_millis()
            )))
        }
    };
    connection.busy_timeout(whole_ms_up(left)).map_err(storage_error)
}

/// `left` in whole milliseconds, rounded up, at most what SQLite takes: SQLite counts its
/// busy wait in whole milliseconds and would drop the fraction, giving up a moment before
/// the deadline, so that a call could fail before its timeout.
fn whole_ms_up(left: Duration) -> Duration {
    let ms = i32::try_from(left.as_nanos().div_ceil(1_000_000)).unwrap_or(i32::MAX);
    Duration::from_millis(u64::from(ms.unsigned_abs()))
}

/// `f` in one `BEGIN IMMEDIATE` transaction, committed when it succeeds and rolled back when
/// anything fails, the commit included. `BEGIN` and `COMMIT` are kept prepared: rusqlite's
/// `Transaction` parses both again for every write, a twentieth of a renewal's CPU.
fn immediate<T>(connection: &Connection, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    let run = |sql: &str| {
        connection
            .prepare_cached(sql)
            .and_then(|mut st| st.execute([]))
            .map_err(storage_error)
    };
    run("BEGIN IMMEDIATE")?;
    let value = f(connection).and_then(|value| run("COMMIT").map(|_| value));
    if value.is_err() && !connection.is_autocommit() {
        // The first failure is the one the caller hears, as when rusqlite's `Transaction`
        // rolled back on drop.
        let _ = connection.execute_batch("ROLLBACK");
    }
    value
}

fn row_to_record(row: &rusqlite::Row<'_>) -> rusqlite::Result<LeaseRecord> {
    Ok(LeaseRecord {
        key: row.get(0)?,
        owner: row.get(1)?,
        epoch: row.get(2)?,
        lease_until_ms: row.get(3)?,
        forgotten_at_epoch: row.get(4)?,
    })
}

fn select_row(connection: &Connection, key: &str) -> Result<Option<LeaseRecord>> {
    connection
        .prepare_cached(SELECT_ROW)
        .and_then(|mut st| st.query_row([key], row_to_record).optional())
        .map_err(storage_error)
}

fn assert_store_path(path: &Path) -> Result<()> {
    assert_path("a lease store path", path)?;
    let text = path.to_string_lossy();
    if text.is_empty() || text == ":memory:" {
        return Err(Error::invalid_argument(
            "a lease store is a file shared by the processes of a host: give its path, not an in-memory database",
        ));
    }
    if text.starts_with("file:") {
        return Err(Error::invalid_argument(
            "a lease store path is a plain path, not a SQLite URI filename (file:...)",
        ));
    }
    Ok(())
}

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(error, rusqlite::Error::SqliteFailure(e, _) if e.code == rusqlite::ErrorCode::DatabaseBusy)
}

/// Contention is the store being unavailable; every other failure keeps SQLite's own code.
fn storage_error(error: rusqlite::Error) -> Error {
    match &error {
        rusqlite::Error::SqliteFailure(e, message) => {
            let detail = message.clone().unwrap_or_else(|| e.to_string());
            if e.code == rusqlite::ErrorCode::DatabaseBusy {
                Error::unavailable(format!("the lease store is busy: {detail}"))
            } else {
                Error::Storage {
                    code: sqlite_code_name(e.extended_code).to_owned(),
                    message: detail,
                }
            }
        }
        other => Error::Storage {
            code: "SQLITE_ERROR".to_owned(),
            message: other.to_string(),
        },
    }
}

pub use crate::plumbing::sqlite_code_name;

impl LeaseStore for SqliteLeaseStore {
    super::lease_store_writes!(crate::metrics::Store::Sqlite);

    /// One connection, behind one mutex.
    fn concurrent_calls(&self) -> usize {
        1
    }

    fn read(&self, key: &str) -> Result<Option<LeaseRecord>> {
        assert_text("key", key)?;
        self.with_open(|connection| select_row(connection, key))
    }

    /// A read of one row in WAL mode waits for nothing but two things, and both are
    /// refused here instead of waited for: the store's one connection, busy with another
    /// call (which may itself be waiting up to the busy timeout for another process's write
    /// lock), is only tried, never waited for; and with no busy handler, SQLite answers
    /// `SQLITE_BUSY` at once where a reader would wait (another process running WAL
    /// recovery, or holding the file in exclusive locking mode). A writer holding the WAL
    /// write lock does not stop a reader. Either refusal answers `None`, and the caller reads
    /// the slow way, on a thread that may wait.
    fn read_now(&self, key: &str) -> Option<Result<Option<LeaseRecord>>> {
        if let Err(error) = assert_text("key", key) {
            return Some(Err(error));
        }
        let mut guard = match self.connection.try_lock() {
            Ok(guard) => guard,
            // As `connection` takes it over: a panic cannot leave a half-done write behind.
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        let Some(connection) = guard.as_mut() else {
            return Some(Err(Error::unavailable("the lease store is closed")));
        };
        // Every other call gives the connection its own busy timeout before it starts.
        if let Err(error) = connection.busy_timeout(Duration::ZERO) {
            return Some(Err(storage_error(error)));
        }
        match connection
            .prepare_cached(SELECT_ROW)
            .and_then(|mut st| st.query_row([key], row_to_record).optional())
        {
            Err(rusqlite::Error::SqliteFailure(failure, _))
                if failure.code == rusqlite::ErrorCode::DatabaseBusy
                    || failure.code == rusqlite::ErrorCode::DatabaseLocked =>
            {
                None
            }
            answer => Some(answer.map_err(storage_error)),
        }
    }

    fn history(&self, key: Option<&str>) -> Result<Vec<HistoryEntry>> {
        self.with_open(|connection| {
            let sql = if key.is_some() {
                "SELECT key, op, owner, epoch, at_ms FROM lease_log WHERE key = ?1 ORDER BY id"
            } else {
                "SELECT key, op, owner, epoch, at_ms FROM lease_log ORDER BY id"
            };
            let mut statement = connection.prepare_cached(sql).map_err(storage_error)?;
            let params: Vec<&dyn rusqlite::ToSql> = key.iter().map(|k| k as &dyn rusqlite::ToSql).collect();
            let rows = statement
                .query_map(params.as_slice(), |row| {
                    let op: String = row.get(1)?;
                    Ok((row.get(0)?, op, row.get(2)?, row.get(3)?, row.get(4)?))
                })
                .map_err(storage_error)?;
            rows.map(|row| {
                let (key, op, owner, epoch, at_ms): (String, String, String, i64, i64) =
                    row.map_err(storage_error)?;
                let op = LeaseOp::parse(&op).ok_or_else(|| Error::Storage {
                    code: "SQLITE_CONSTRAINT_CHECK".into(),
                    message: format!("the lease log holds an unknown operation {op:?}"),
                })?;
                Ok(HistoryEntry {
                    key,
                    op,
                    owner,
                    epoch,
                    at_ms,
                })
            })
            .collect()
        })
    }

    fn list(&self, prefix: &str) -> Result<Vec<LeaseRecord>> {
        self.with_open(|connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT key, owner, epoch, lease_until_ms, forgotten_at_epoch FROM leases
                     WHERE substr(key, 1, length(?1)) = ?1 ORDER BY key",
                )
                .map_err(storage_error)?;
            let rows = statement
                .query_map([prefix], row_to_record)
                .map_err(storage_error)?;
            rows.map(|row| row.map_err(storage_error)).collect()
        })
    }

    fn compact_log(&self) -> Result<u64> {
        self.compact()
    }

    fn now_ms(&self) -> Result<i64> {
        self.clock.now_ms()
    }

    fn close(&self) -> Result<()> {
        let connection = self.connection()?.take();
        match connection {
            Some(connection) => connection.close().map_err(|(_, e)| storage_error(e)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{HostClock, ManualClock};

    #[test]
    fn a_path_is_a_path_never_a_uri_nor_memory() {
        let dir = tempfile::tempdir().unwrap();
        // Under URI interpretation this would be a private in-memory database.
        let odd = dir.path().join("leases.db?mode=memory&nolock=1");
        let one = SqliteLeaseStore::open(&odd).unwrap();
        let two = SqliteLeaseStore::open(&odd).unwrap();
        assert!(odd.is_file(), "the name is taken literally");
        one.acquire("k", "a", 10_000).unwrap();
        assert!(matches!(
            two.acquire("k", "b", 10_000),
            Err(Error::LeaseHeld { .. })
        ));
        for refused in [":memory:", "", "file:/tmp/x.db?nolock=1", "file::memory:"] {
            assert!(
                matches!(
                    SqliteLeaseStore::open(refused),
                    Err(Error::InvalidArgument { .. })
                ),
                "{refused:?}"
            );
        }
    }

    #[test]
    fn the_time_left_is_waited_for_whole_never_cut_short() {
        assert_eq!(
            whole_ms_up(Duration::from_micros(199_001)),
            Duration::from_millis(200)
        );
        assert_eq!(
            whole_ms_up(Duration::from_millis(200)),
            Duration::from_millis(200)
        );
        assert_eq!(whole_ms_up(Duration::from_nanos(1)), Duration::from_millis(1));
        assert_eq!(
            whole_ms_up(Duration::from_secs(u64::MAX)),
            Duration::from_millis(i32::MAX as u64)
        );
    }

    #[test]
    fn a_busy_timeout_sqlite_cannot_take_is_refused_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteOptions {
            busy_timeout: Duration::from_millis(1 << 31),
            ..SqliteOptions::default()
        };
        assert!(matches!(
            SqliteLeaseStore::open_with(dir.path().join("a.db"), options),
            Err(Error::InvalidArgument { .. })
        ));
    }

    #[test]
    fn result_codes_have_sqlites_names() {
        use rusqlite::ffi;
        assert_eq!(sqlite_code_name(ffi::SQLITE_IOERR_FSYNC), "SQLITE_IOERR_FSYNC");
        assert_eq!(sqlite_code_name(ffi::SQLITE_BUSY), "SQLITE_BUSY");
        assert_eq!(sqlite_code_name(ffi::SQLITE_NOTADB), "SQLITE_NOTADB");
        // An extended code this build does not name falls back to its primary code.
        assert_eq!(sqlite_code_name(ffi::SQLITE_IOERR | (99 << 8)), "SQLITE_IOERR");
        assert_eq!(sqlite_code_name(250), "SQLITE_UNKNOWN");
    }

    #[test]
    fn a_damaged_file_with_an_intact_header_is_refused_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("leases.db");
        let store = SqliteLeaseStore::open(&path).unwrap();
        for i in 0..200 {
            store.acquire(&format!("acme/t-{i:032x}"), "a", 10_000).unwrap();
        }
        store.close().unwrap();
        drop(store);
        let mut bytes = std::fs::read(&path).unwrap();
        assert!(bytes.len() > 8 * 4096, "{}", bytes.len());
        for b in &mut bytes[4096 * 3..4096 * 5] {
            *b = 0x5a;
        }
        std::fs::write(&path, &bytes).unwrap();
        match SqliteLeaseStore::open(&path) {
            Err(Error::Storage { code, message }) => {
                assert!(
                    code.starts_with("SQLITE_CORRUPT") || code == "SQLITE_NOTADB",
                    "{code}: {message}"
                )
            }
            other => panic!("a damaged file opened: {other:?}"),
        }
    }

    /// A storage failure part-way through a write (here another writer's trigger refuses its
    /// log row, after the lease row was written) rolls the whole transaction back: nothing of it
    /// is read afterwards, and the next write starts a transaction of its own.
    #[test]
    fn a_write_that_fails_midway_leaves_nothing_and_the_next_goes_through() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("leases.db");
        let store = SqliteLeaseStore::open(&path).unwrap();
        store.acquire("k", "a", 10_000).unwrap();
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE TRIGGER refuse_bad BEFORE INSERT ON lease_log WHEN NEW.key = 'bad'
                 BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
            )
            .unwrap();
        assert!(matches!(
            store.acquire("bad", "a", 10_000),
            Err(Error::Storage { code, .. }) if code == "SQLITE_CONSTRAINT_TRIGGER"
        ));
        assert_eq!(store.read("bad").unwrap(), None);
        store.renew("k", "a", 1, 10_000).unwrap();
        assert_eq!(store.history(None).unwrap().len(), 2);
    }

    #[test]
    fn every_commit_is_synced_to_the_write_ahead_log() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteLeaseStore::open(dir.path().join("leases.db")).unwrap();
        let (mode, synchronous) = store
            .with_open(|c| {
                let mode: String = c
                    .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                    .map_err(storage_error)?;
                let sync: i64 = c
                    .query_row("PRAGMA synchronous", [], |r| r.get(0))
                    .map_err(storage_error)?;
                Ok((mode, sync))
            })
            .unwrap();
        // 2 is FULL: the WAL is fsynced at every commit, before the operation is acknowledged.
        assert_eq!((mode.as_str(), synchronous), ("wal", 2));
    }

    fn page_size(store: &SqliteLeaseStore) -> i64 {
        store
            .with_open(|c| {
                c.query_row("PRAGMA page_size", [], |r| r.get(0))
                    .map_err(storage_error)
            })
            .unwrap()
    }

    /// A store this library creates has small pages (a commit's five rows are five pages in
    /// the WAL); a file made before, by the reference or SQLite's defaults, keeps its own and
    /// serves as before.
    #[test]
    fn a_new_store_has_small_pages_and_an_existing_one_keeps_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteLeaseStore::open(dir.path().join("new.db")).unwrap();
        assert_eq!(page_size(&store), PAGE_SIZE);
        store.acquire("k", "a", 10_000).unwrap();
        let made_before = dir.path().join("made-before.db");
        Connection::open(&made_before)
            .unwrap()
            .execute_batch(SCHEMA)
            .unwrap();
        let store = SqliteLeaseStore::open(&made_before).unwrap();
        assert_eq!(page_size(&store), 4096);
        let epoch = store.acquire("k", "a", 10_000).unwrap().record.epoch;
        store.renew("k", "a", epoch, 10_000).unwrap();
        assert_eq!(store.history(None).unwrap().len(), 2);
    }

    /// A process's wall clock, which may be stepped, beside the host clock every process of
    /// the test shares.
    struct Jumping {
        wall: ManualClock,
        host: Arc<SharedHostClock>,
    }

    struct SharedHostClock {
        id: String,
        now: ManualClock,
    }

    impl HostClock for SharedHostClock {
        fn id(&self) -> &str {
            &self.id
        }
        fn now_ms(&self) -> Result<i64> {
            Ok(self.now.get())
        }
    }

    impl WallClock for Jumping {
        fn now_ms(&self) -> Result<i64> {
            Ok(self.wall.get())
        }
        fn host_clock(&self) -> Option<&dyn HostClock> {
            Some(&*self.host)
        }
    }

    const HOUR: i64 = 3_600_000;
    const START: i64 = 1_700_000_000_000;

    fn host(id: &str) -> Arc<SharedHostClock> {
        Arc::new(SharedHostClock {
            id: id.to_owned(),
            now: ManualClock::new(50_000),
        })
    }

    fn process(store: &SqliteLeaseStore, host: &Arc<SharedHostClock>, wall_ms: i64) -> SqliteLeaseStore {
        store.with_clock(Arc::new(Jumping {
            wall: ManualClock::new(wall_ms),
            host: host.clone(),
        }))
    }

    /// A keeper's day in miniature: 300 leases renewed every 10 s for a simulated hour. The
    /// file at the end is no bigger than at ten minutes (the retention), give or take pages.
    #[test]
    fn the_log_keeps_a_retention_window_of_renewals_and_every_tenure_end() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(START));
        let path = dir.path().join("leases.db");
        let store = SqliteLeaseStore::open_with(
            &path,
            SqliteOptions {
                clock: clock.clone(),
                ..SqliteOptions::default()
            },
        )
        .unwrap();
        let keys: Vec<String> = (0..300).map(|i| format!("acme/t-{i:032x}")).collect();
        for key in &keys {
            store.acquire(key, "keeper", 30_000).unwrap();
        }
        let held: Vec<(&str, i64)> = keys.iter().map(|k| (k.as_str(), 1)).collect();
        let file_size = || {
            store
                .with_open(|c| {
                    c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                        .map_err(storage_error)
                })
                .unwrap();
            std::fs::metadata(&path).unwrap().len()
        };
        let mut at_ten_minutes = 0;
        for round in 1..=360 {
            clock.advance(10_000).unwrap();
            // One tenure ends half-way: its last renewal must outlive the retention.
            let batch = if round > 180 { &held[1..] } else { &held[..] };
            for answer in store.renew_batch("keeper", 30_000, batch).unwrap() {
                answer.unwrap();
            }
            if round == 60 {
                at_ten_minutes = file_size();
            }
        }
        let at_an_hour = file_size();
        eprintln!("lease log: {at_ten_minutes} bytes at ten minutes, {at_an_hour} after an hour");
        assert!(
            (at_an_hour as f64) <= 1.5 * at_ten_minutes as f64,
            "{at_an_hour} bytes after an hour against {at_ten_minutes} at ten minutes"
        );
        let history = store.history(None).unwrap();
        let renewals = |key: &str| {
            history
                .iter()
                .filter(|h| h.key == key && h.op == LeaseOp::Renew)
                .count()
        };
        // The retention's renewals of a lease that goes on (60 rounds, give or take the
        // pruning's pace), and the last renewal of the tenure that stopped.
        assert!((60..=62).contains(&renewals(&keys[1])), "{}", renewals(&keys[1]));
        let ended: Vec<_> = history.iter().filter(|h| h.key == keys[0]).collect();
        assert_eq!(ended.len(), 2, "{ended:?}");
        assert_eq!((ended[0].op, ended[1].op), (LeaseOp::Acquire, LeaseOp::Renew));
        assert_eq!(ended[1].at_ms, START + 180 * 10_000);
        // Every acquire is kept, however old.
        assert_eq!(history.iter().filter(|h| h.op == LeaseOp::Acquire).count(), 300);
        assert_eq!(store.compact_log().unwrap(), 0, "the writes kept pace");
    }

    #[test]
    fn compact_prunes_a_log_written_before_pruning() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(START));
        let store = SqliteLeaseStore::open_with(
            dir.path().join("leases.db"),
            SqliteOptions {
                clock: clock.clone(),
                ..SqliteOptions::default()
            },
        )
        .unwrap()
        .with_log_retention(Duration::from_secs(3_600))
        .unwrap();
        store.acquire("k", "a", 30_000).unwrap();
        for _ in 0..5_000 {
            clock.advance(100).unwrap();
            store.renew("k", "a", 1, 30_000).unwrap();
        }
        clock.advance(3_600_000).unwrap();
        let tight = store.with_log_retention(Duration::from_secs(60)).unwrap();
        assert_eq!(tight.compact_log().unwrap(), 4_999);
        let ops: Vec<LeaseOp> = store.history(Some("k")).unwrap().iter().map(|h| h.op).collect();
        assert_eq!(ops, [LeaseOp::Acquire, LeaseOp::Renew]);
    }

    #[test]
    fn a_wall_clock_an_hour_ahead_is_not_granted_a_held_lease() {
        let dir = tempfile::tempdir().unwrap();
        let file = SqliteLeaseStore::open(dir.path().join("leases.db")).unwrap();
        let boot = host("boot-1");
        let first = process(&file, &boot, START);
        let ahead = process(&file, &boot, START + HOUR);
        let granted = first.acquire("k", "first", 10_000).unwrap();
        // The wall clock alone would call the lease an hour dead.
        assert!(granted.record.is_expired_at(START + HOUR));
        assert!(matches!(
            ahead.acquire("k", "ahead", 10_000),
            Err(Error::LeaseHeld { record }) if record.owner == "first"
        ));
        boot.now.advance(9_999).unwrap();
        assert!(ahead.acquire("k", "ahead", 10_000).is_err());
        first.renew("k", "first", 1, 10_000).unwrap();
        boot.now.advance(9_999).unwrap();
        assert!(ahead.acquire("k", "ahead", 10_000).is_err());
        boot.now.advance(1).unwrap();
        assert_eq!(ahead.acquire("k", "ahead", 10_000).unwrap().record.epoch, 2);
    }

    /// Clocks that drift apart by a few hundred milliseconds are no step: the log, dated on
    /// the wall clock, must never show a grant before the previous holder's deadline.
    #[test]
    fn a_host_clock_a_moment_ahead_waits_for_the_wall_clock() {
        let dir = tempfile::tempdir().unwrap();
        let file = SqliteLeaseStore::open(dir.path().join("leases.db")).unwrap();
        let boot = host("boot-1");
        process(&file, &boot, START)
            .acquire("k", "first", 10_000)
            .unwrap();
        boot.now.advance(10_000).unwrap();
        assert!(process(&file, &boot, START + 9_400)
            .acquire("k", "second", 10_000)
            .is_err());
        let granted = process(&file, &boot, START + 10_000)
            .acquire("k", "second", 10_000)
            .unwrap();
        assert_eq!(granted.record.epoch, 2);
        let history = file.history(Some("k")).unwrap();
        assert!(history[1].at_ms >= START + 10_000, "{history:?}");
    }

    /// The other way round, a renewal the wall clock sees a moment late is refused, as the
    /// reference refuses it: a lease audit reading the log must not find a renewal after
    /// its deadline. A forward step of about a TTL is a step all the same.
    #[test]
    fn a_host_clock_a_moment_behind_lets_the_wall_clock_end_the_lease() {
        let dir = tempfile::tempdir().unwrap();
        let file = SqliteLeaseStore::open(dir.path().join("leases.db")).unwrap();
        let boot = host("boot-1");
        process(&file, &boot, START)
            .acquire("k", "first", 10_000)
            .unwrap();
        assert!(matches!(
            process(&file, &boot, START + 10_500).acquire("k", "stepped", 10_000),
            Err(Error::LeaseHeld { .. })
        ));
        boot.now.advance(9_700).unwrap();
        assert!(matches!(
            process(&file, &boot, START + 10_000).renew("k", "first", 1, 10_000),
            Err(Error::LeaseLost { .. })
        ));
        assert_eq!(
            process(&file, &boot, START + 10_000)
                .acquire("k", "second", 10_000)
                .unwrap()
                .record
                .epoch,
            2
        );
    }

    #[test]
    fn a_wall_clock_an_hour_behind_takes_over_a_dead_holder_on_time() {
        let dir = tempfile::tempdir().unwrap();
        let file = SqliteLeaseStore::open(dir.path().join("leases.db")).unwrap();
        let boot = host("boot-1");
        let dead = process(&file, &boot, START);
        let behind = process(&file, &boot, START - HOUR);
        dead.acquire("k", "dead", 10_000).unwrap();
        boot.now.advance(9_999).unwrap();
        assert!(behind.acquire("k", "behind", 10_000).is_err());
        boot.now.advance(1).unwrap();
        let taken = behind.acquire("k", "behind", 10_000).unwrap();
        // Its deadline is written on its own wall clock, an hour in the past for the others:
        // on this host they still see it held, on the host clock.
        assert!(taken.record.lease_until_ms < START);
        assert!(matches!(
            dead.acquire("k", "dead", 10_000),
            Err(Error::LeaseHeld { record }) if record.owner == "behind"
        ));
        // A release ends it on every clock.
        behind.release("k", "behind", 2).unwrap();
        assert_eq!(dead.acquire("k", "dead", 10_000).unwrap().record.epoch, 3);
    }

    #[test]
    fn the_wall_clock_decides_what_the_host_clock_did_not_measure() {
        let dir = tempfile::tempdir().unwrap();
        let file = SqliteLeaseStore::open(dir.path().join("leases.db")).unwrap();
        let (boot, other_boot) = (host("boot-1"), host("boot-2"));
        process(&file, &boot, START)
            .acquire("k", "first", 10_000)
            .unwrap();
        // Another boot (or a shared volume seen from another host) has no common clock.
        assert!(process(&file, &other_boot, START + HOUR)
            .acquire("k", "elsewhere", 10_000)
            .is_ok());
        // A writer without the host clock (the reference, a test clock) renews: the row
        // no longer matches, so the wall clock decides again.
        process(&file, &boot, START)
            .acquire("j", "first", 10_000)
            .unwrap();
        file.with_clock(Arc::new(ManualClock::new(START + 5)))
            .renew("j", "first", 1, 10_000)
            .unwrap();
        boot.now.advance(20_000).unwrap();
        assert!(matches!(
            process(&file, &boot, START + 5_000).acquire("j", "second", 10_000),
            Err(Error::LeaseHeld { .. })
        ));
        assert!(process(&file, &boot, START + 10_005)
            .acquire("j", "second", 10_000)
            .is_ok());
    }
}
