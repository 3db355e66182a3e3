//! A lease database that fails over and loses its last commits can grant an epoch a second
//! time. The guarantee (README, "When the lease database fails over"): the second holder of a
//! reissued epoch is never served, and no acknowledged write is lost. Each test runs routers in
//! strict durability on one store (a real SQLite file, MySQL/MariaDB and PostgreSQL tables),
//! winds the lease database back under the running routers, to before the first grant (empty)
//! or to a state that kept an earlier grant and lost a later one, and watches what the
//! reissued epoch's holder does.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gotry_tenant_state::durable_store::dir::DirectoryDurableStore;
use gotry_tenant_state::lease_store::mysql::{MysqlLeaseStore, MysqlOptions};
use gotry_tenant_state::router::{CopyPolicy, Durability, RouterOptions};
use gotry_tenant_state::{
    lease_key_for, ErrorCode, LeaseStore, ManualClock, PostgresLeaseStore, PostgresOptions, SqliteLeaseStore,
    TenantHandle, TenantRouter,
};
use gotry_test_support::{lines, mysql as mysql_server, postgres as postgres_server};
use mysql::prelude::Queryable;

const ORG: &str = "acme";
const TENANT: &str = "t-0123456789abcdef0123456789abcdef";
const TTL_MS: i64 = 3_000;

/// A lease database that can be wound back to a state it had: the one it had when it was
/// opened, or a later one saved since.
trait Rewind {
    fn store(&self) -> Arc<dyn LeaseStore>;
    /// Keeps the lease rows and log as they are now: what a replica had received when the
    /// primary failed.
    fn save(&self);
    /// Every grant since the last save (or the start) is lost, as after a failover to a
    /// replica that never received them.
    fn lose_every_commit(&self);
}

struct Sqlite {
    store: Arc<dyn LeaseStore>,
    live: std::path::PathBuf,
    saved: std::path::PathBuf,
}

impl Sqlite {
    fn open(dir: &Path, clock: Arc<ManualClock>) -> Sqlite {
        let live = dir.join("leases.db");
        let store = SqliteLeaseStore::open(&live).unwrap().with_clock(clock);
        let sqlite = Sqlite {
            store: Arc::new(store),
            live,
            saved: dir.join("leases-before.db"),
        };
        sqlite.save();
        sqlite
    }
}

impl Rewind for Sqlite {
    fn store(&self) -> Arc<dyn LeaseStore> {
        self.store.clone()
    }

    fn save(&self) {
        let from = rusqlite::Connection::open(&self.live).unwrap();
        from.backup(
            rusqlite::MAIN_DB,
            &self.saved,
            None::<fn(rusqlite::backup::Progress)>,
        )
        .unwrap();
    }

    fn lose_every_commit(&self) {
        // Through SQLite's own backup into the live file, so the store's connections see the
        // older state at their next transaction, as a restored database would look to them.
        let mut live = rusqlite::Connection::open(&self.live).unwrap();
        live.restore(
            rusqlite::MAIN_DB,
            &self.saved,
            None::<fn(rusqlite::backup::Progress)>,
        )
        .unwrap();
    }
}

struct Postgres {
    store: Arc<dyn LeaseStore>,
    url: String,
    prefix: String,
    _scratch: postgres_server::ScratchTables,
}

impl Postgres {
    fn open(clock: Arc<ManualClock>) -> Postgres {
        let url = postgres_server::server_url();
        let mut scratch = postgres_server::ScratchTables::new(&url);
        let mut options = PostgresOptions::from_url(&url).unwrap();
        options.table_prefix = postgres_server::fresh_prefix();
        options.clock = Some(clock);
        scratch.add(&options.table_prefix);
        let prefix = options.table_prefix.clone();
        // The saved rows, in tables named from a prefix of their own so that the scratch
        // tables drop them too.
        scratch.add(&format!("{prefix}saved_"));
        let store =
            PostgresLeaseStore::open(options).unwrap_or_else(|e| postgres_server::no_server(&url, &e));
        let postgres = Postgres {
            store: Arc::new(store),
            url,
            prefix,
            _scratch: scratch,
        };
        postgres.save();
        postgres
    }
}

impl Rewind for Postgres {
    fn store(&self) -> Arc<dyn LeaseStore> {
        self.store.clone()
    }

    fn save(&self) {
        let p = &self.prefix;
        postgres_server::execute(
            &self.url,
            &format!(
                "DROP TABLE IF EXISTS {p}saved_leases, {p}saved_lease_log;
                 CREATE TABLE {p}saved_leases AS SELECT * FROM {p}leases;
                 CREATE TABLE {p}saved_lease_log AS SELECT * FROM {p}lease_log;"
            ),
        )
        .unwrap();
    }

    fn lose_every_commit(&self) {
        // A promoted standby replays no trigger: neither does this session.
        let p = &self.prefix;
        postgres_server::execute(
            &self.url,
            &format!(
                "SET session_replication_role = replica;
                 TRUNCATE {p}leases, {p}lease_log, {p}lease_log_pruned;
                 INSERT INTO {p}leases SELECT * FROM {p}saved_leases;
                 INSERT INTO {p}lease_log OVERRIDING SYSTEM VALUE SELECT * FROM {p}saved_lease_log;"
            ),
        )
        .unwrap();
    }
}

struct Mysql {
    store: Arc<dyn LeaseStore>,
    scratch: mysql_server::ScratchTables,
    prefix: String,
}

impl Mysql {
    fn open(clock: Arc<ManualClock>) -> Mysql {
        let url = mysql_server::server_url();
        let mut options = MysqlOptions::from_url(&url).unwrap();
        options.table_prefix = mysql_server::fresh_prefix();
        options.clock = Some(clock);
        let prefix = options.table_prefix.clone();
        let mut scratch = mysql_server::ScratchTables::new(&url);
        scratch.add(&format!("{prefix}leases"), &format!("{prefix}lease_log"));
        scratch.add(
            &format!("{prefix}saved_leases"),
            &format!("{prefix}saved_lease_log"),
        );
        let store = MysqlLeaseStore::open(options).unwrap_or_else(|e| mysql_server::no_server(&url, &e));
        let mysql = Mysql {
            store: Arc::new(store),
            scratch,
            prefix,
        };
        mysql.save();
        mysql
    }
}

impl Rewind for Mysql {
    fn store(&self) -> Arc<dyn LeaseStore> {
        self.store.clone()
    }

    fn save(&self) {
        let p = &self.prefix;
        let mut conn = self.scratch.connect();
        for table in ["leases", "lease_log"] {
            conn.query_drop(format!("DROP TABLE IF EXISTS `{p}saved_{table}`"))
                .unwrap();
            conn.query_drop(format!(
                "CREATE TABLE `{p}saved_{table}` AS SELECT * FROM `{p}{table}`"
            ))
            .unwrap();
        }
    }

    fn lose_every_commit(&self) {
        // TRUNCATE fires no DELETE trigger: the rows go as they would with a lost commit, and
        // the saved ones come back (there is no INSERT trigger).
        let p = &self.prefix;
        let mut conn = self.scratch.connect();
        for table in ["leases", "lease_log"] {
            conn.query_drop(format!("TRUNCATE TABLE `{p}{table}`")).unwrap();
            conn.query_drop(format!(
                "INSERT INTO `{p}{table}` SELECT * FROM `{p}saved_{table}`"
            ))
            .unwrap();
        }
    }
}

struct Site {
    dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    leases: Box<dyn Rewind>,
    durable: Arc<DirectoryDurableStore>,
}

impl Site {
    fn new(open: impl FnOnce(&Path, Arc<ManualClock>) -> Box<dyn Rewind>) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(1_000_000));
        let leases = open(dir.path(), clock.clone());
        let durable = Arc::new(DirectoryDurableStore::open(dir.path().join("durable")).unwrap());
        Site {
            dir,
            clock,
            leases,
            durable,
        }
    }

    /// A router of `replica` (a process of its own in production: nothing of another
    /// router's is shared but the two stores), with a state root of its own per `instance`.
    fn router(&self, replica: &str, instance: &str) -> TenantRouter {
        let mut options = RouterOptions::new(
            self.leases.store(),
            self.durable.clone(),
            self.dir.path().join(instance),
            replica.to_owned(),
            TTL_MS,
            500,
        );
        options.copy_policy = CopyPolicy {
            interval: Duration::from_secs(3600),
            durability: Durability::Strict,
        };
        options.clock = self.clock.clone();
        TenantRouter::start(options).unwrap()
    }
}

fn key() -> String {
    lease_key_for(ORG, TENANT).unwrap()
}

fn write(router: &TenantRouter, line: &str) -> gotry_tenant_state::Result<()> {
    router.run(&key(), |handle: &TenantHandle| {
        lines::append(&handle.root, line);
        Ok(())
    })
}

fn code<T: std::fmt::Debug>(answer: gotry_tenant_state::Result<T>) -> Option<ErrorCode> {
    answer.err().and_then(|e| e.code())
}

/// The reissued epoch's second holder, `second` (another replica, or the same replica
/// restarted), is refused at open, and the next epoch starts from every acknowledged write.
fn reissued_epoch_is_never_served(site: &Site, second: (&str, &str)) {
    let first = site.router("a", "a");
    assert_eq!(first.open(ORG, TENANT).unwrap().epoch(), 1);
    write(&first, "one").unwrap();
    write(&first, "two").unwrap();

    site.leases.lose_every_commit();
    assert_eq!(
        site.leases.store().read(&key()).unwrap(),
        None,
        "the grant is lost"
    );

    let reissued = site.router(second.0, second.1);
    assert_eq!(
        code(reissued.open(ORG, TENANT)),
        Some(ErrorCode::CopyConflict),
        "the second holder of epoch 1 ({}) must meet the first one's tenure marker",
        second.0
    );
    assert!(
        reissued.status().unwrap().is_empty(),
        "the second holder serves nothing"
    );
    assert!(reissued.run(&key(), |_| Ok(())).is_err(), "nor any call");

    // The lease moves on: the first holder's gate closes, the next epoch is granted and
    // starts from the first holder's copies, with every acknowledged write.
    site.clock.advance(TTL_MS + 1).unwrap();
    assert!(
        write(&first, "late").is_err(),
        "the first holder's gate closed with its lease"
    );
    let next = site.router("c", "c");
    let handle = next.open(ORG, TENANT).unwrap();
    assert!(handle.epoch() >= 2, "epoch {}", handle.epoch());
    assert_eq!(lines::read(&handle.root), ["one", "two"]);
    for router in [first, reissued, next] {
        router.close(Duration::ZERO);
    }
}

/// The lease database wound back to a state that is not empty: epoch 1's grant was kept and
/// epoch 2's was lost, so epoch 2 is granted a second time, to a holder that finds epoch 1
/// still on the row and nothing of epoch 2's. Epoch 2's first holder wrote under it (its
/// tenure marker and copies are in the durable store), so the second holder of epoch 2 is
/// refused at open and serves nothing, and the epoch after starts from every acknowledged
/// write of both real tenures.
fn a_lost_later_grant_is_never_served_twice(site: &Site) {
    let first = site.router("a", "a");
    assert_eq!(first.open(ORG, TENANT).unwrap().epoch(), 1);
    write(&first, "one").unwrap();
    // What the replica that is promoted later received: epoch 1, held by the first holder.
    site.leases.save();
    first.close(Duration::ZERO);

    let second = site.router("b", "b");
    let handle = second.open(ORG, TENANT).unwrap();
    assert_eq!(handle.epoch(), 2);
    assert_eq!(lines::read(&handle.root), ["one"]);
    write(&second, "two").unwrap();

    site.leases.lose_every_commit();
    let restored = site
        .leases
        .store()
        .read(&key())
        .unwrap()
        .expect("epoch 1's row is kept");
    assert_eq!(
        (restored.epoch, restored.owner.as_str()),
        (1, "a"),
        "epoch 2's grant is lost"
    );
    // The second holder's gate is its own: until its lease would have run out, it still
    // writes, and those writes are acknowledged too.
    write(&second, "three").unwrap();

    // Epoch 1's restored lease runs out (the second holder's gate closes with it), and the
    // next grant is epoch 2 again.
    site.clock.advance(TTL_MS + 1).unwrap();
    assert!(
        write(&second, "late").is_err(),
        "the second holder's gate closed with its lease"
    );
    let reissued = site.router("c", "c");
    assert_eq!(
        code(reissued.open(ORG, TENANT)),
        Some(ErrorCode::CopyConflict),
        "the second holder of epoch 2 must meet the first one's tenure marker"
    );
    let record = site.leases.store().read(&key()).unwrap().expect("a lease row");
    assert_eq!(record.epoch, 2, "epoch 2 was granted a second time: {record:?}");
    assert!(
        reissued.status().unwrap().is_empty(),
        "the second holder serves nothing"
    );
    assert!(reissued.run(&key(), |_| Ok(())).is_err(), "nor any call");

    site.clock.advance(TTL_MS + 1).unwrap();
    let next = site.router("d", "d");
    let handle = next.open(ORG, TENANT).unwrap();
    assert!(handle.epoch() >= 3, "epoch {}", handle.epoch());
    assert_eq!(lines::read(&handle.root), ["one", "two", "three"]);
    for router in [first, second, reissued, next] {
        router.close(Duration::ZERO);
    }
}

fn sqlite(dir: &Path, clock: Arc<ManualClock>) -> Box<dyn Rewind> {
    Box::new(Sqlite::open(dir, clock))
}

#[test]
fn sqlite_a_reissued_epoch_is_never_served_by_another_replica() {
    reissued_epoch_is_never_served(&Site::new(sqlite), ("b", "b"));
}

#[test]
fn sqlite_a_reissued_epoch_is_never_served_by_the_same_replica_restarted() {
    reissued_epoch_is_never_served(&Site::new(sqlite), ("a", "a-restarted"));
}

#[test]
fn sqlite_a_lost_later_grant_is_never_served_twice() {
    a_lost_later_grant_is_never_served_twice(&Site::new(sqlite));
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn postgres_a_lost_later_grant_is_never_served_twice() {
    a_lost_later_grant_is_never_served_twice(&Site::new(|_: &Path, clock| {
        Box::new(Postgres::open(clock)) as Box<dyn Rewind>
    }));
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn mysql_a_lost_later_grant_is_never_served_twice() {
    a_lost_later_grant_is_never_served_twice(&Site::new(|_: &Path, clock| {
        Box::new(Mysql::open(clock)) as Box<dyn Rewind>
    }));
}

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn postgres_a_reissued_epoch_is_never_served() {
    let open = |_: &Path, clock| Box::new(Postgres::open(clock)) as Box<dyn Rewind>;
    reissued_epoch_is_never_served(&Site::new(open), ("b", "b"));
    reissued_epoch_is_never_served(&Site::new(open), ("a", "a-restarted"));
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn mysql_a_reissued_epoch_is_never_served() {
    let open = |_: &Path, clock| Box::new(Mysql::open(clock)) as Box<dyn Rewind>;
    reissued_epoch_is_never_served(&Site::new(open), ("b", "b"));
    reissued_epoch_is_never_served(&Site::new(open), ("a", "a-restarted"));
}
