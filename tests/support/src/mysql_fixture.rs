//! A MySQL/MariaDB server for one test of the MySQL lease store, and what several of its
//! test files make there: stores on fresh tables (dropped at the end), and a user of limited
//! rights. Written once here, since each of those files is a test binary of its own.

use std::time::Duration;

use ::mysql::prelude::Queryable;
use gotry_tenant_state::{MysqlLeaseStore, MysqlOptions};

use crate::mysql::{self as server, ScratchTables};

/// A server for one test: its URL, and the tables the test made (dropped at the end).
pub struct Fixture {
    pub url: String,
    pub scratch: ScratchTables,
}

impl Default for Fixture {
    /// The server of `GOTRY_MYSQL_URL`, or the local default, and no tables yet.
    fn default() -> Fixture {
        let url = server::server_url();
        Fixture {
            scratch: ScratchTables::new(&url),
            url,
        }
    }
}

impl Fixture {
    /// A store on fresh tables, reached at `url` (the server's, or a proxy's). The tables
    /// are made first, directly and with the default timeout: a short timeout bounds the
    /// whole open, and making a schema takes several DDL statements, which a loaded machine
    /// may not fit in it.
    pub fn open_at(&mut self, url: &str, prefix: &str, timeout_ms: u64) -> MysqlLeaseStore {
        if url != self.url || timeout_ms < 2_000 {
            let mut options = MysqlOptions::from_url(&self.url).expect("url");
            options.table_prefix = prefix.to_owned();
            let store = MysqlLeaseStore::open(options).unwrap_or_else(|e| server::no_server(&self.url, &e));
            let (leases, log) = store.table_names();
            self.scratch.add(leases, log);
        }
        let mut options = MysqlOptions::from_url(url).expect("url");
        options.table_prefix = prefix.to_owned();
        options.timeout = Duration::from_millis(timeout_ms);
        let store = MysqlLeaseStore::open(options).unwrap_or_else(|e| server::no_server(url, &e));
        let (leases, log) = store.table_names();
        self.scratch.add(leases, log);
        store
    }

    /// A store on the tables of `prefix` (made if missing), on the server itself, with a
    /// timeout of 2 s.
    pub fn open(&mut self, prefix: &str) -> MysqlLeaseStore {
        let url = self.url.clone();
        self.open_at(&url, prefix, 2_000)
    }
}

/// The options of a URL the test made itself, so it must parse.
pub fn options_at(url: &str) -> MysqlOptions {
    MysqlOptions::from_url(url).expect("url")
}

/// A database user of the test's own, dropped at the end.
pub struct ScratchUser<'a> {
    fx: &'a Fixture,
    pub name: String,
}

impl Drop for ScratchUser<'_> {
    fn drop(&mut self) {
        let _ = self
            .fx
            .scratch
            .connect()
            .query_drop(format!("DROP USER IF EXISTS '{}'@'%'", self.name));
    }
}

/// A user who may only SELECT, INSERT and UPDATE (no DDL, no DELETE), dropped with the
/// guard, and the options that log in as them on `prefix`'s tables.
pub fn limited_user<'a>(fx: &'a Fixture, prefix: &str, password: &str) -> (MysqlOptions, ScratchUser<'a>) {
    let mut limited = options_at(&fx.url);
    let name = format!("{}u", prefix.trim_end_matches('_'));
    let mut admin = fx.scratch.connect();
    admin
        .query_drop(format!("CREATE USER '{name}'@'%' IDENTIFIED BY '{password}'"))
        .unwrap();
    let user = ScratchUser {
        fx,
        name: name.clone(),
    };
    admin
        .query_drop(format!(
            "GRANT SELECT, INSERT, UPDATE ON `{}`.* TO '{name}'@'%'",
            limited.database
        ))
        .unwrap();
    limited.user = Some(name);
    limited.password = Some(password.into());
    limited.table_prefix = prefix.to_owned();
    (limited, user)
}
