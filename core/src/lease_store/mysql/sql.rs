//! The statements of one table prefix.

/// The statements of one table prefix, written once when the store opens.
pub(super) struct Sql {
    pub(super) leases: String,
    pub(super) log: String,
    /// The mark of how far pruning has judged the log: one row.
    pub(super) pruned: String,
    /// Every table and trigger that using the store needs, with the statement that creates
    /// it; tables first, since a trigger needs its table.
    pub(super) schema: Vec<(String, String)>,
    /// What pruning the log needs besides, created after `schema`: the mark table, then
    /// the delete guard that lets renewals (and nothing else) go.
    pub(super) pruning: Vec<(String, String)>,
    /// The delete guard of earlier versions, which refuses every delete from the log, and
    /// the statement that drops it once the new guard is in place.
    pub(super) old_delete_guard: (String, String),
    pub(super) lock_mark: String,
    pub(super) lock_mark_nowait: String,
    pub(super) insert_mark: String,
    pub(super) set_mark: String,
    pub(super) rows_after_mark: String,
    pub(super) select_row: String,
    pub(super) insert_rows: String,
    pub(super) insert_log: String,
    pub(super) history_all: String,
    pub(super) history_of_key: String,
    pub(super) list: String,
    /// The server's clock in milliseconds (the session's time zone is UTC).
    pub(super) now: String,
}

pub(super) const ROW_COLUMNS: &str = "`key`, owner, epoch, lease_until_ms, forgotten_at_epoch";

impl Sql {
    pub(super) fn new(prefix: &str) -> Sql {
        let leases = format!("{prefix}leases");
        let log = format!("{prefix}lease_log");
        let pruned = format!("{prefix}lease_log_pruned");
        let refuse = |message: &str| format!("SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{message}'");
        let trigger = |name: &str, event: &str, table: &str, body: String| {
            let name = format!("{prefix}{name}");
            let sql = format!("CREATE TRIGGER `{name}` BEFORE {event} ON `{table}` FOR EACH ROW {body}");
            (name, sql)
        };
        let triggers = [
            trigger(
                "leases_guard_update",
                "UPDATE",
                &leases,
                format!(
                    "BEGIN
                       IF NEW.`key` <> OLD.`key` THEN {}; END IF;
                       IF NEW.epoch <> OLD.epoch AND NEW.epoch <> OLD.epoch + 1 THEN {}; END IF;
                       IF NEW.epoch = OLD.epoch AND NEW.owner <> OLD.owner THEN {}; END IF;
                       IF NEW.forgotten_at_epoch < OLD.forgotten_at_epoch THEN {}; END IF;
                     END",
                    refuse("a lease row keeps its key"),
                    refuse("lease epoch moves forward by exactly one"),
                    refuse("an epoch has one owner: a new owner takes the next epoch"),
                    refuse("the forgotten floor never moves back"),
                ),
            ),
            trigger(
                "leases_guard_delete",
                "DELETE",
                &leases,
                refuse("a lease row is the epoch floor of its tenant and is never deleted"),
            ),
            trigger(
                "lease_log_guard_update",
                "UPDATE",
                &log,
                refuse("the lease log is append-only"),
            ),
        ];
        let old_delete_guard = format!("{prefix}lease_log_guard_delete");
        Sql {
            pruning: vec![
                (
                    pruned.clone(),
                    format!(
                        "CREATE TABLE IF NOT EXISTS `{pruned}` (
                           one TINYINT NOT NULL PRIMARY KEY CHECK (one = 1),
                           through_id BIGINT UNSIGNED NOT NULL
                         ) ENGINE = InnoDB"
                    ),
                ),
                trigger(
                    "lease_log_guard_prune",
                    "DELETE",
                    &log,
                    format!(
                        "IF OLD.op <> 'renew' THEN {}; END IF",
                        refuse("only renewals leave the lease log: acquire, release and forget entries stay")
                    ),
                ),
            ],
            old_delete_guard: (
                old_delete_guard.clone(),
                format!("DROP TRIGGER IF EXISTS `{old_delete_guard}`"),
            ),
            lock_mark: format!("SELECT through_id FROM `{pruned}` WHERE one = 1 FOR UPDATE"),
            lock_mark_nowait: format!("SELECT through_id FROM `{pruned}` WHERE one = 1 FOR UPDATE NOWAIT"),
            insert_mark: format!("INSERT IGNORE INTO `{pruned}` (one, through_id) VALUES (1, 0)"),
            set_mark: format!("UPDATE `{pruned}` SET through_id = ? WHERE one = 1"),
            rows_after_mark: format!(
                "SELECT id, `key`, epoch, op, at_ms FROM `{log}` WHERE id > ? ORDER BY id LIMIT ?"
            ),
            select_row: format!("SELECT {ROW_COLUMNS} FROM `{leases}` WHERE `key` = ?"),
            insert_rows: format!("INSERT INTO `{leases}` ({ROW_COLUMNS}) VALUES "),
            insert_log: format!("INSERT INTO `{log}` (`key`, op, owner, epoch, at_ms) VALUES "),
            history_all: format!("SELECT `key`, op, owner, epoch, at_ms FROM `{log}` ORDER BY id"),
            history_of_key: format!(
                "SELECT `key`, op, owner, epoch, at_ms FROM `{log}` WHERE `key` = ? ORDER BY id"
            ),
            list: format!("SELECT {ROW_COLUMNS} FROM `{leases}` WHERE LEFT(`key`, ?) = ? ORDER BY `key`"),
            now: "SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000) AS SIGNED)".to_owned(),
            schema: [
                (
                    leases.clone(),
                    format!(
                        "CREATE TABLE IF NOT EXISTS `{leases}` (
                           `key` VARBINARY(600) NOT NULL PRIMARY KEY,
                           owner VARBINARY(600) NOT NULL,
                           epoch BIGINT NOT NULL CHECK (epoch >= 1),
                           lease_until_ms BIGINT NOT NULL,
                           forgotten_at_epoch BIGINT NOT NULL DEFAULT 0
                         ) ENGINE = InnoDB ROW_FORMAT = DYNAMIC"
                    ),
                ),
                (
                    log.clone(),
                    format!(
                        "CREATE TABLE IF NOT EXISTS `{log}` (
                           id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
                           `key` VARBINARY(600) NOT NULL,
                           op VARCHAR(8) CHARACTER SET ascii COLLATE ascii_bin NOT NULL
                             CHECK (op IN ('acquire', 'renew', 'release', 'forget')),
                           owner VARBINARY(600) NOT NULL,
                           epoch BIGINT NOT NULL,
                           at_ms BIGINT NOT NULL,
                           KEY by_key (`key`, id)
                         ) ENGINE = InnoDB ROW_FORMAT = DYNAMIC"
                    ),
                ),
            ]
            .into_iter()
            .chain(triggers)
            .collect(),
            leases,
            log,
            pruned,
        }
    }

    /// Whether each of `tenures` (key, epoch, id) has a renewal logged after that id, as
    /// rows (position in `tenures`, 0 or 1). Keys go as hex literals and numbers as
    /// numbers, so the text is safe and needs no statement prepared per size. One index
    /// probe each (`by_key`), stopping at the first match.
    pub(super) fn later_renewals(&self, tenures: &[(&[u8], i64, u64)]) -> String {
        tenures
            .iter()
            .enumerate()
            .map(|(n, (key, epoch, id))| {
                format!(
                    "SELECT {n}, EXISTS (SELECT 1 FROM `{}` WHERE `key` = X'{}' AND id > {id}
                       AND epoch = {epoch} AND op = 'renew')",
                    self.log,
                    hex(key)
                )
            })
            .collect::<Vec<_>>()
            .join(" UNION ALL ")
    }

    /// Deletes log rows by id (the numbers this store just read).
    pub(super) fn delete_log_rows(&self, ids: &[u64]) -> String {
        let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
        format!("DELETE FROM `{}` WHERE id IN ({})", self.log, ids.join(", "))
    }

    /// `SELECT ... FOR UPDATE` of `count` keys, in key order so that two batches take
    /// their locks in one order and cannot deadlock each other.
    pub(super) fn lock_rows(&self, count: usize) -> String {
        let marks = vec!["?"; count].join(", ");
        format!(
            "SELECT {ROW_COLUMNS} FROM `{}` WHERE `key` IN ({marks}) ORDER BY `key` FOR UPDATE",
            self.leases
        )
    }

    /// `count` new rows. A plain INSERT: when another transaction inserted the key since
    /// this one found it missing, it fails on the duplicate and the race is retried.
    pub(super) fn insert_rows(&self, count: usize) -> String {
        self.insert_rows.clone() + &values(count)
    }

    /// New values for `count` rows this transaction holds locked, in one statement (the
    /// update triggers still see each row).
    pub(super) fn update_rows(&self, count: usize) -> String {
        self.insert_rows(count)
            + " ON DUPLICATE KEY UPDATE owner = VALUES(owner), epoch = VALUES(epoch),
                lease_until_ms = VALUES(lease_until_ms), forgotten_at_epoch = VALUES(forgotten_at_epoch)"
    }

    pub(super) fn insert_log(&self, count: usize) -> String {
        self.insert_log.clone() + &values(count)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `count` rows of five placeholders.
pub(super) fn values(count: usize) -> String {
    vec!["(?, ?, ?, ?, ?)"; count].join(", ")
}
