//! Where the Rust tests of the MySQL lease store find their server, and the tables they
//! make there.
//!
//! `GOTRY_SKIP_MYSQL=1` at build time marks those tests ignored (each package with MySQL
//! tests sets `cfg(gotry_skip_mysql)` from its build script), so libtest lists every skip
//! with its reason. Otherwise a missing server fails them: a suite that passes because
//! nothing was there to test proves nothing. `GOTRY_MYSQL_URL` names another server than
//! the local default.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use ::mysql::prelude::Queryable;

pub const SKIP_VAR: &str = "GOTRY_SKIP_MYSQL";
pub const URL_VAR: &str = "GOTRY_MYSQL_URL";
pub const DEFAULT_URL: &str = "mysql://root@127.0.0.1:3306/test";

/// The server's URL.
pub fn server_url() -> String {
    std::env::var(URL_VAR).unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// The URL without its user and password, for messages.
pub fn shown(url: &str) -> String {
    match url
        .strip_prefix("mysql://")
        .and_then(|rest| rest.rsplit_once('@'))
    {
        Some((_, after)) => format!("mysql://{after}"),
        None => url.to_owned(),
    }
}

/// The failure of a test that found no server.
pub fn no_server(url: &str, error: &dyn std::fmt::Display) -> ! {
    panic!(
        "no usable MySQL/MariaDB server at {}: {error}\n\
         start the local one with scripts/mariadb.sh, point {URL_VAR} at another, \
         or build the tests with {SKIP_VAR}=1 to mark the tests that need one ignored",
        shown(url)
    )
}

/// A table prefix that no other run or test uses: the process, the time and a counter.
pub fn fresh_prefix() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    format!(
        "gtt{}_{nanos:x}_{}_",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// Percent-encodes everything but unreserved characters and `/`: a user, password or file
/// path as a URL takes it.
pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `url` with one more query option.
pub fn with_option(url: &str, name: &str, value: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}{name}={value}")
}

/// Drops its tables when dropped, also when the test fails half-way. A direct connection,
/// since the store itself never drops a table, and its triggers refuse to delete its rows.
pub struct ScratchTables {
    url: String,
    tables: Vec<String>,
}

impl ScratchTables {
    pub fn new(url: &str) -> ScratchTables {
        ScratchTables {
            url: url.to_owned(),
            tables: Vec::new(),
        }
    }

    /// Adds a store's tables, and the log's pruning mark named from the same prefix;
    /// several stores of one test may share them (a table named twice would fail the
    /// whole DROP).
    pub fn add(&mut self, leases: &str, log: &str) {
        let mark = format!("{log}_pruned");
        for table in [leases, log, &mark] {
            if !self.tables.iter().any(|t| t == table) {
                self.tables.push(table.to_owned());
            }
        }
    }

    /// A connection of the test's own, beside the store's.
    pub fn connect(&self) -> ::mysql::Conn {
        self.try_connect()
            .unwrap_or_else(|e| panic!("a direct connection to the test server: {e}"))
    }

    fn try_connect(&self) -> ::mysql::Result<::mysql::Conn> {
        let opts = ::mysql::Opts::from_url(&self.url)?;
        ::mysql::Conn::new(::mysql::OptsBuilder::from_opts(opts).prefer_socket(false))
    }
}

impl Drop for ScratchTables {
    fn drop(&mut self) {
        if self.tables.is_empty() {
            return;
        }
        let statement = format!(
            "DROP TABLE IF EXISTS {}",
            self.tables
                .iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        // Best effort: a leftover table in the test database harms nothing, and a panic here
        // would hide the test's own failure.
        if let Ok(mut conn) = self.try_connect() {
            let _ = conn.query_drop(statement);
        }
    }
}
