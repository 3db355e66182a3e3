//! The MySQL lease store's log kept short: writes prune old renewals and keep every acquire,
//! release, forget and tenure end; the tables of earlier versions are migrated at open and
//! their log compacted, and a user who may not migrate or prune them is told why.
//!
//! `GOTRY_SKIP_MYSQL=1` marks these tests ignored; otherwise a missing server fails them.

use std::sync::Arc;
use std::time::Duration;

use gotry_tenant_state::{
    Error, LeaseOp, LeaseStore, ManualClock, MysqlLeaseStore, SystemWallClock, WallClock,
};
use gotry_test_support::mysql as server;
use gotry_test_support::mysql_fixture::{limited_user, options_at, Fixture};
use gotry_test_support::pruning::{self, ops_of, START};
use mysql::prelude::Queryable;

/// A store of `prefix` deciding on `clock` and keeping every renewal for `retention`.
fn store_on_clock(
    fx: &mut Fixture,
    prefix: &str,
    clock: &Arc<ManualClock>,
    retention_s: u64,
) -> MysqlLeaseStore {
    let mut options = options_at(&fx.url);
    options.table_prefix = prefix.to_owned();
    options.clock = Some(Arc::clone(clock) as Arc<dyn WallClock>);
    let store = MysqlLeaseStore::open(options).unwrap_or_else(|e| server::no_server(&fx.url, &e));
    let (leases, log) = store.table_names();
    fx.scratch.add(leases, log);
    store
        .with_log_retention(Duration::from_secs(retention_s))
        .unwrap()
}

/// Puts the tables of `prefix` back as earlier versions made them: no pruning mark, and a
/// delete guard on the log that refuses every delete.
fn make_schema_old(conn: &mut mysql::Conn, prefix: &str) {
    for statement in [
        format!("DROP TRIGGER `{prefix}lease_log_guard_prune`"),
        format!("DROP TABLE `{prefix}lease_log_pruned`"),
        format!(
            "CREATE TRIGGER `{prefix}lease_log_guard_delete` BEFORE DELETE ON `{prefix}lease_log`
             FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'the lease log is append-only'"
        ),
    ] {
        conn.query_drop(&statement)
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
}

/// The delete guards of `prefix`'s log, and whether its mark table exists.
fn log_guards(conn: &mut mysql::Conn, prefix: &str) -> (Vec<String>, bool) {
    let guards = conn
        .exec(
            "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS
             WHERE TRIGGER_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE = ? AND EVENT_MANIPULATION = 'DELETE'",
            (format!("{prefix}lease_log"),),
        )
        .unwrap();
    let mark: Option<String> = conn
        .exec_first(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
            (format!("{prefix}lease_log_pruned"),),
        )
        .unwrap();
    (guards, mark.is_some())
}

/// A delete of `op` rows of `prefix`'s log by hand: the server's answer (rolled back when
/// it went through).
fn delete_by_hand(conn: &mut mysql::Conn, prefix: &str, op: &str) -> Result<u64, u16> {
    conn.query_drop("START TRANSACTION").unwrap();
    let outcome = conn
        .exec_drop(
            format!("DELETE FROM `{prefix}lease_log` WHERE op = ? LIMIT 1"),
            (op,),
        )
        .map(|()| conn.affected_rows())
        .map_err(|e| match e {
            mysql::Error::MySqlError(e) => e.code,
            other => panic!("{other}"),
        });
    conn.query_drop("ROLLBACK").unwrap();
    outcome
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn writes_prune_old_renewals_and_keep_every_acquire_release_forget_and_tenure_end() {
    let mut fx = Fixture::default();
    let prefix = server::fresh_prefix();
    let clock = Arc::new(ManualClock::new(START));
    let store = store_on_clock(&mut fx, &prefix, &clock, 60);
    pruning::writes_keep_pace_with_pruning(&store, &clock);

    let mut other = fx.scratch.connect();
    pruning::a_held_mark_is_passed_over(&store, &clock, &mut |hold| {
        if hold {
            other.query_drop("START TRANSACTION").unwrap();
            let _: Option<u64> = other
                .query_first(format!(
                    "SELECT through_id FROM `{prefix}lease_log_pruned` FOR UPDATE"
                ))
                .unwrap();
        } else {
            other.query_drop("ROLLBACK").unwrap();
        }
    });
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn an_old_schema_is_migrated_at_open_and_its_log_compacted() {
    let mut fx = Fixture::default();
    let prefix = server::fresh_prefix();
    let clock = Arc::new(ManualClock::new(START));
    // A log written with nothing old enough to prune, then the schema of earlier versions.
    let before = store_on_clock(&mut fx, &prefix, &clock, 3_600);
    let keys: Vec<String> = (0..50).map(|i| format!("k{i}")).collect();
    let batch: Vec<(&str, i64)> = keys.iter().map(|key| (key.as_str(), 1)).collect();
    for key in &keys {
        before.acquire(key, "a", 30_000).unwrap();
    }
    for _ in 0..40 {
        clock.advance(1_000).unwrap();
        for answer in before.renew_batch("a", 30_000, &batch).unwrap() {
            answer.unwrap();
        }
    }
    before.release("k0", "a", 1).unwrap();
    drop(before);
    let mut admin = fx.scratch.connect();
    make_schema_old(&mut admin, &prefix);
    assert_eq!(
        delete_by_hand(&mut admin, &prefix, "renew"),
        Err(1644),
        "the old guard"
    );

    clock.advance(3_600_000).unwrap();
    let store = store_on_clock(&mut fx, &prefix, &clock, 60);
    let (guards, mark) = log_guards(&mut admin, &prefix);
    assert_eq!(guards, [format!("{prefix}lease_log_guard_prune")]);
    assert!(mark, "the mark table was made");
    // The server itself refuses to delete anything but a renewal, to any client.
    for op in ["acquire", "release"] {
        assert_eq!(delete_by_hand(&mut admin, &prefix, op), Err(1644), "{op}");
    }
    assert_eq!(delete_by_hand(&mut admin, &prefix, "renew"), Ok(1));

    let rows = store.history(None).unwrap().len();
    let deleted = store.compact_log().unwrap();
    let kept = store.history(None).unwrap();
    println!(
        "compact_log: {rows} rows before, {deleted} deleted, {} after",
        kept.len()
    );
    assert_eq!(deleted, 50 * 40 - 50);
    assert_eq!(kept.len(), rows - deleted as usize);
    assert_eq!(
        ops_of(&store, "k0"),
        [(LeaseOp::Acquire, 1), (LeaseOp::Renew, 1), (LeaseOp::Release, 1)]
    );
    for key in &keys[1..] {
        assert_eq!(
            ops_of(&store, key),
            [(LeaseOp::Acquire, 1), (LeaseOp::Renew, 1)],
            "{key}"
        );
    }
    assert_eq!(
        kept.iter().rfind(|e| e.key == "k9").unwrap().at_ms,
        START + 40_000,
        "the last renewal stays"
    );
    assert_eq!(store.compact_log().unwrap(), 0);
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn a_user_without_trigger_rights_runs_on_old_tables_and_is_told_why_they_are_not_pruned() {
    let mut fx = Fixture::default();
    let prefix = server::fresh_prefix();
    fx.open(&prefix).acquire("k", "admin", 60_000).unwrap();
    let mut admin = fx.scratch.connect();
    make_schema_old(&mut admin, &prefix);
    let password = "pw-Limited-8";
    let (limited, user) = limited_user(&fx, &prefix, password);
    let name = user.name.clone();

    let store = MysqlLeaseStore::open(limited.clone()).unwrap();
    store.acquire("k2", "limited", 60_000).unwrap();
    for _ in 0..3 {
        store.renew("k2", "limited", 1, 60_000).unwrap();
    }
    let refused = store.compact_log().expect_err("the old guard stays");
    let shown = format!("{refused} {refused:?}");
    println!("{refused}");
    assert!(
        matches!(&refused, Error::Storage { code, message }
            if code == "ER_TABLEACCESS_DENIED_ERROR" && message.contains("TRIGGER") && message.contains("not pruned")),
        "{shown}"
    );
    assert!(!shown.contains(&name) && !shown.contains(password), "{shown}");
    assert_eq!(
        log_guards(&mut admin, &prefix),
        (vec![format!("{prefix}lease_log_guard_delete")], false),
        "nothing changed"
    );

    // Migrated by an administrator, the tables are pruned by whoever may delete from the
    // log; this user may not, and is told so.
    let mut root = options_at(&fx.url);
    root.table_prefix = prefix.clone();
    drop(MysqlLeaseStore::open(root).unwrap());
    let mut options = limited;
    options.clock = Some(Arc::new(ManualClock::new(
        SystemWallClock.now_ms().unwrap() + 3_600_000,
    )));
    let store = MysqlLeaseStore::open(options)
        .unwrap()
        .with_log_retention(Duration::from_secs(60))
        .unwrap();
    let refused = store.compact_log().expect_err("no DELETE right");
    assert!(
        matches!(&refused, Error::Storage { code, message }
            if code == "ER_TABLEACCESS_DENIED_ERROR" && message.contains("pruning needs the DELETE privilege")),
        "{refused:?}"
    );
    // Said again without asking the server.
    assert!(matches!(store.compact_log(), Err(Error::Storage { .. })));
    assert!(store.acquire("k3", "limited", 60_000).is_ok());
}
