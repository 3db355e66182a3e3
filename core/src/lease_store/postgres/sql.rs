//! The statements of one table prefix.

/// The statements of one table prefix, written once when the store opens.
pub(super) struct Sql {
    /// How the server's clock is read: [`NOW`], which a test may replace with a clock of
    /// its own to step it, as the MySQL store's tests do.
    pub(super) now: String,
    pub(super) leases: String,
    pub(super) log: String,
    /// The mark of how far pruning has judged the log: one row.
    pub(super) pruned: String,
    /// The tables and the trigger names that using the store needs, to see whether the
    /// schema is there.
    pub(super) tables: [String; 3],
    pub(super) triggers: Vec<String>,
    /// Every statement that makes the schema, in order, each safe to run again.
    pub(super) create: Vec<String>,
    pub(super) present: String,
    pub(super) lock_rows: String,
    pub(super) write: String,
    pub(super) select_row: String,
    pub(super) history_all: String,
    pub(super) history_of_key: String,
    pub(super) list: String,
    pub(super) lock_mark: String,
    pub(super) rows_after_mark: String,
    pub(super) delete_followed: String,
    pub(super) set_mark: String,
}

/// The server's clock in whole milliseconds: `clock_timestamp()`, the time the statement
/// runs, since `now()` is the time the transaction began.
pub(super) const NOW: &str = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8";

/// The settings that decide whether a commit the server acknowledged survives it.
pub(super) const DURABILITY: &str = "SELECT current_setting('synchronous_commit'), current_setting('fsync')";

const ROW_COLUMNS: &str = "key, owner, epoch, lease_until_ms, forgotten_at_epoch";

/// `name` quoted as an identifier (the prefix is checked to be `a-z0-9_`, so this only
/// keeps names that start with a digit valid).
fn ident(name: &str) -> String {
    format!("\"{name}\"")
}

impl Sql {
    pub(super) fn new(prefix: &str) -> Sql {
        let leases = format!("{prefix}leases");
        let log = format!("{prefix}lease_log");
        let pruned = format!("{prefix}lease_log_pruned");
        let (l, g, p) = (ident(&leases), ident(&log), ident(&pruned));
        let leases_guard = format!("{prefix}leases_guard");
        let log_guard = format!("{prefix}lease_log_guard");
        let leases_truncate = format!("{prefix}leases_guard_truncate");
        let log_truncate = format!("{prefix}lease_log_guard_truncate");
        let create = vec![
            format!(
                "CREATE TABLE IF NOT EXISTS {l} (
                   key BYTEA NOT NULL PRIMARY KEY,
                   owner BYTEA NOT NULL,
                   epoch INT8 NOT NULL CHECK (epoch >= 1),
                   lease_until_ms INT8 NOT NULL,
                   forgotten_at_epoch INT8 NOT NULL DEFAULT 0
                 )"
            ),
            format!(
                "CREATE TABLE IF NOT EXISTS {g} (
                   id INT8 GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                   key BYTEA NOT NULL,
                   op TEXT NOT NULL CHECK (op IN ('acquire', 'renew', 'release', 'forget')),
                   owner BYTEA NOT NULL,
                   epoch INT8 NOT NULL,
                   at_ms INT8 NOT NULL
                 )"
            ),
            format!(
                "CREATE INDEX IF NOT EXISTS {} ON {g} (key, id)",
                ident(&format!("{prefix}lease_log_by_key"))
            ),
            format!(
                "CREATE TABLE IF NOT EXISTS {p} (
                   one INT2 NOT NULL PRIMARY KEY CHECK (one = 1),
                   through_id INT8 NOT NULL
                 )"
            ),
            format!("INSERT INTO {p} (one, through_id) VALUES (1, 0) ON CONFLICT DO NOTHING"),
            format!(
                "CREATE OR REPLACE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql AS $guard$
                 BEGIN
                   IF TG_OP = 'UPDATE' THEN
                     IF NEW.key <> OLD.key THEN
                       RAISE EXCEPTION 'a lease row keeps its key';
                     END IF;
                     IF NEW.epoch <> OLD.epoch AND NEW.epoch <> OLD.epoch + 1 THEN
                       RAISE EXCEPTION 'lease epoch moves forward by exactly one';
                     END IF;
                     IF NEW.epoch = OLD.epoch AND NEW.owner <> OLD.owner THEN
                       RAISE EXCEPTION 'an epoch has one owner: a new owner takes the next epoch';
                     END IF;
                     IF NEW.forgotten_at_epoch < OLD.forgotten_at_epoch THEN
                       RAISE EXCEPTION 'the forgotten floor never moves back';
                     END IF;
                     RETURN NEW;
                   END IF;
                   RAISE EXCEPTION 'a lease row is the epoch floor of its tenant and is never deleted';
                 END
                 $guard$",
                ident(&leases_guard)
            ),
            format!(
                "CREATE OR REPLACE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql AS $guard$
                 BEGIN
                   IF TG_OP = 'DELETE' AND OLD.op = 'renew' THEN
                     RETURN OLD;
                   END IF;
                   IF TG_OP = 'DELETE' THEN
                     RAISE EXCEPTION 'only renewals leave the lease log: acquire, release and forget entries stay';
                   END IF;
                   RAISE EXCEPTION 'the lease log is append-only';
                 END
                 $guard$",
                ident(&log_guard)
            ),
            format!(
                "CREATE OR REPLACE TRIGGER {} BEFORE UPDATE OR DELETE ON {l} FOR EACH ROW EXECUTE FUNCTION {}()",
                ident(&leases_guard),
                ident(&leases_guard)
            ),
            format!(
                "CREATE OR REPLACE TRIGGER {} BEFORE TRUNCATE ON {l} FOR EACH STATEMENT EXECUTE FUNCTION {}()",
                ident(&leases_truncate),
                ident(&leases_guard)
            ),
            format!(
                "CREATE OR REPLACE TRIGGER {} BEFORE UPDATE OR DELETE ON {g} FOR EACH ROW EXECUTE FUNCTION {}()",
                ident(&log_guard),
                ident(&log_guard)
            ),
            format!(
                "CREATE OR REPLACE TRIGGER {} BEFORE TRUNCATE ON {g} FOR EACH STATEMENT EXECUTE FUNCTION {}()",
                ident(&log_truncate),
                ident(&log_guard)
            ),
        ];
        Sql {
            now: NOW.to_owned(),
            present: "SELECT (SELECT count(*) FROM unnest($1::text[]) AS t(name)
                               WHERE to_regclass(quote_ident(t.name)) IS NOT NULL),
                             (SELECT count(*) FROM pg_trigger
                               WHERE tgname = ANY($2::text[])
                                 AND tgrelid IN (SELECT to_regclass(quote_ident(t.name)) FROM unnest($1::text[]) AS t(name)))"
                .to_owned(),
            lock_rows: format!(
                "SELECT {ROW_COLUMNS} FROM {l} WHERE key = ANY($1::bytea[]) ORDER BY key FOR UPDATE"
            ),
            // New rows and changed rows in one statement, with their log entries in the
            // order given: the two parts touch different keys (a row is new, or it was
            // locked by this transaction), and every row still meets the triggers.
            write: format!(
                "WITH new_rows AS (
                   INSERT INTO {l} ({ROW_COLUMNS})
                   SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::int8[], $4::int8[], $5::int8[])
                 ), changed_rows AS (
                   UPDATE {l} AS l SET owner = c.owner, epoch = c.epoch,
                     lease_until_ms = c.lease_until_ms, forgotten_at_epoch = c.forgotten_at_epoch
                   FROM unnest($6::bytea[], $7::bytea[], $8::int8[], $9::int8[], $10::int8[])
                     AS c(key, owner, epoch, lease_until_ms, forgotten_at_epoch)
                   WHERE l.key = c.key
                 )
                 INSERT INTO {g} (key, op, owner, epoch, at_ms)
                 SELECT e.key, e.op, e.owner, e.epoch, $15::int8
                 FROM unnest($11::bytea[], $12::text[], $13::bytea[], $14::int8[]) WITH ORDINALITY
                   AS e(key, op, owner, epoch, n)
                 ORDER BY e.n"
            ),
            select_row: format!("SELECT {ROW_COLUMNS} FROM {l} WHERE key = $1::bytea"),
            history_all: format!("SELECT key, op, owner, epoch, at_ms FROM {g} ORDER BY id"),
            history_of_key: format!(
                "SELECT key, op, owner, epoch, at_ms FROM {g} WHERE key = $1::bytea ORDER BY id"
            ),
            list: format!(
                "SELECT {ROW_COLUMNS} FROM {l} WHERE substring(key FROM 1 FOR $1::int4) = $2::bytea ORDER BY key"
            ),
            // A second pruner skips the mark rather than wait for it.
            lock_mark: format!("SELECT through_id FROM {p} WHERE one = 1 FOR UPDATE SKIP LOCKED"),
            rows_after_mark: format!(
                "SELECT id, op, at_ms FROM {g}
                 WHERE id > (SELECT through_id FROM {p} WHERE one = 1) ORDER BY id LIMIT $1::int8"
            ),
            // One index probe per renewal (key, id), stopping at the first later renewal.
            delete_followed: format!(
                "DELETE FROM {g} AS r WHERE r.id = ANY($1::int8[]) AND EXISTS (
                   SELECT 1 FROM {g} AS later
                   WHERE later.key = r.key AND later.id > r.id AND later.epoch = r.epoch AND later.op = 'renew')"
            ),
            set_mark: format!("UPDATE {p} SET through_id = $1::int8 WHERE one = 1"),
            tables: [leases.clone(), log.clone(), pruned.clone()],
            triggers: vec![leases_guard, leases_truncate, log_guard, log_truncate],
            create,
            leases,
            log,
            pruned,
        }
    }
}
