//! The PostgreSQL lease store's log kept short, as `mysql_pruning.rs` holds the MySQL one
//! to it: writes prune old renewals and keep every acquire, release, forget and tenure
//! end, a user who may not prune is told why and keeps working, and stores that open
//! together make the schema once.
//!
//! What of the MySQL file does not apply: the PostgreSQL tables have no earlier version, so
//! there is no old schema to migrate at open nor a log of it to compact, and no trigger
//! right to lack (the PostgreSQL store makes no trigger on tables that are already there).
//!
//! `GOTRY_SKIP_POSTGRES=1` marks these tests ignored; otherwise a missing server fails them.

use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use gotry_tenant_state::{
    Error, LeaseStore, ManualClock, PostgresLeaseStore, PostgresOptions, SystemWallClock, WallClock,
};
use gotry_test_support::postgres::{self as server, ScratchTables, Session};
use gotry_test_support::proxy::{Mode, Proxy};
use gotry_test_support::pruning::{self, START};

/// A store of `prefix` deciding on `clock` and keeping every renewal for `retention_s`.
fn store_on_clock(
    scratch: &mut ScratchTables,
    url: &str,
    prefix: &str,
    clock: &Arc<ManualClock>,
    retention_s: u64,
) -> PostgresLeaseStore {
    let mut options = PostgresOptions::from_url(url).expect("url");
    options.table_prefix = prefix.to_owned();
    options.clock = Some(Arc::clone(clock) as Arc<dyn WallClock>);
    scratch.add(prefix);
    let store = PostgresLeaseStore::open(options).unwrap_or_else(|e| server::no_server(url, &e));
    store
        .with_log_retention(Duration::from_secs(retention_s))
        .unwrap()
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn writes_prune_old_renewals_and_keep_every_acquire_release_forget_and_tenure_end() {
    let url = server::server_url();
    let mut scratch = ScratchTables::new(&url);
    let prefix = server::fresh_prefix();
    let clock = Arc::new(ManualClock::new(START));
    let store = store_on_clock(&mut scratch, &url, &prefix, &clock, 60);
    pruning::writes_keep_pace_with_pruning(&store, &clock);

    let other = Session::connect(&url).unwrap();
    let [_, _, pruned] = store.table_names();
    pruning::a_held_mark_is_passed_over(&store, &clock, &mut |hold| {
        let sql = match hold {
            true => format!("BEGIN; SELECT through_id FROM \"{pruned}\" FOR UPDATE"),
            false => "ROLLBACK".to_owned(),
        };
        other.execute(&sql).unwrap();
    });
}

/// A login role of the test's own, dropped with whatever it was granted.
struct Role {
    url: String,
    name: String,
}

impl Role {
    fn create(url: &str, name: &str) -> Role {
        server::execute(url, &format!("CREATE ROLE {name} LOGIN")).unwrap();
        Role {
            url: url.to_owned(),
            name: name.to_owned(),
        }
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        // Best effort: a panic here would hide the test's own failure.
        let _ = server::execute(&self.url, &format!("DROP OWNED BY {0}; DROP ROLE {0}", self.name));
    }
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn a_user_who_may_not_delete_from_the_log_keeps_writing_and_is_told_why_it_is_not_pruned() {
    let url = server::server_url();
    let mut scratch = ScratchTables::new(&url);
    let prefix = server::fresh_prefix();
    // Renewals followed by later ones of their tenure: what pruning deletes.
    let admin = store_on_clock(
        &mut scratch,
        &url,
        &prefix,
        &Arc::new(ManualClock::new(SystemWallClock.now_ms().unwrap())),
        60,
    );
    admin.acquire("k", "admin", 60_000).unwrap();
    for _ in 0..3 {
        admin.renew("k", "admin", 1, 60_000).unwrap();
    }
    let [leases, log, pruned] = admin.table_names();
    let role = Role::create(&url, &format!("gotry_noprune_{}", std::process::id()));
    let name = &role.name;
    // Everything the store's writes need; no DELETE on the log, and no right to create.
    server::execute(
        &url,
        &format!("GRANT SELECT, INSERT, UPDATE ON \"{leases}\", \"{log}\", \"{pruned}\" TO {name}"),
    )
    .unwrap();

    // Through a proxy, to show below that the refusal is then said without the server.
    let proxy = Proxy::start(&url);
    let mut options = PostgresOptions::from_url(&url).unwrap();
    options.user = Some(name.clone());
    options.port = proxy.port;
    options.table_prefix = prefix.clone();
    // An hour on: every renewal the administrator wrote is past the retention.
    options.clock = Some(Arc::new(ManualClock::new(
        SystemWallClock.now_ms().unwrap() + 3_600_000,
    )));
    let store = PostgresLeaseStore::open(options)
        .expect("tables an administrator made")
        .with_log_retention(Duration::from_secs(60))
        .unwrap();
    // The write's pruning is refused; the write stands.
    store.acquire("k2", "limited", 60_000).unwrap();
    assert_eq!(store.read("k2").unwrap().unwrap().owner, "limited");
    assert_eq!(admin.history(Some("k")).unwrap().len(), 4, "nothing was pruned");

    // The write remembered the refusal: it is said with the server out of reach.
    proxy.set(Mode::Down);
    let refused = store.compact_log().expect_err("no DELETE right");
    let shown = format!("{refused} {refused:?}");
    println!("{refused}");
    assert!(
        matches!(&refused, Error::Storage { code, message }
            if code == "POSTGRES_INSUFFICIENT_PRIVILEGE"
                && message.contains("not pruned")
                && message.contains("pruning needs DELETE on the log")),
        "{shown}"
    );
    assert!(!shown.contains(name.as_str()), "{shown}");
    proxy.set(Mode::Forward);
    for _ in 0..3 {
        store.renew("k2", "limited", 1, 60_000).unwrap();
    }
    assert!(matches!(store.compact_log(), Err(Error::Storage { .. })));
    assert_eq!(admin.history(None).unwrap().len(), 4 + 4);
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn the_schema_is_made_once_when_stores_open_together() {
    const OPENERS: usize = 6;
    let url = server::server_url();
    let scratch = Mutex::new(ScratchTables::new(&url));
    let prefix = server::fresh_prefix();
    let barrier = Barrier::new(OPENERS);
    let stores: Vec<PostgresLeaseStore> = std::thread::scope(|scope| {
        let openers: Vec<_> = (0..OPENERS)
            .map(|_| {
                scope.spawn(|| {
                    let mut options = PostgresOptions::from_url(&url).unwrap();
                    options.table_prefix = prefix.clone();
                    scratch.lock().unwrap().add(&prefix);
                    barrier.wait();
                    PostgresLeaseStore::open(options)
                })
            })
            .collect();
        openers
            .into_iter()
            .map(|opener| {
                opener
                    .join()
                    .unwrap()
                    .unwrap_or_else(|e| server::no_server(&url, &e))
            })
            .collect()
    });
    // Every catalogue row carries the id of the transaction that wrote it last: tables,
    // triggers and their functions all from one, so no opener made or replaced a part of
    // what another made.
    let [leases, log, pruned] = stores[0].table_names();
    let made = server::execute(
        &url,
        &format!(
            "SELECT count(DISTINCT made) || '/' || count(*) FROM (
               SELECT xmin::text AS made FROM pg_class WHERE relname IN ('{leases}', '{log}', '{pruned}')
               UNION ALL SELECT xmin::text FROM pg_trigger
                 WHERE tgrelid IN ('\"{leases}\"'::regclass, '\"{log}\"'::regclass) AND NOT tgisinternal
               UNION ALL SELECT xmin::text FROM pg_proc
                 WHERE proname IN ('{prefix}leases_guard', '{prefix}lease_log_guard')
             ) AS schema;
             SELECT count(*) FROM \"{pruned}\""
        ),
    )
    .unwrap();
    assert_eq!(
        made,
        [[Some("1/9".to_owned())], [Some("1".to_owned())]],
        "transactions/objects of the schema, then rows of the mark table"
    );
    for (i, store) in stores.iter().enumerate() {
        store.acquire(&format!("k{i}"), "o", 60_000).unwrap();
    }
    assert_eq!(stores[OPENERS - 1].list("").unwrap().len(), OPENERS);
}
