//! Where the Rust tests of the PostgreSQL lease store find their server, and the tables
//! they make there.
//!
//! `GOTRY_SKIP_POSTGRES=1` at build time marks those tests ignored (each package with
//! PostgreSQL tests sets `cfg(gotry_skip_postgres)` from its build script), so libtest lists
//! every skip with its reason. Otherwise a missing server fails them. `GOTRY_POSTGRES_URL`
//! names another server than the local default.

pub use crate::mysql::{encode, fresh_prefix, with_option};

pub const SKIP_VAR: &str = "GOTRY_SKIP_POSTGRES";
pub const URL_VAR: &str = "GOTRY_POSTGRES_URL";
pub const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The server's URL.
pub fn server_url() -> String {
    std::env::var(URL_VAR).unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// The URL without its user and password, for messages.
pub fn shown(url: &str) -> String {
    match url.split_once("://").and_then(|(scheme, rest)| {
        rest.split('/')
            .next()
            .and_then(|authority| authority.rsplit_once('@'))
            .map(|(_, host)| {
                format!(
                    "{scheme}://{host}{}",
                    &rest[rest.find('/').unwrap_or(rest.len())..]
                )
            })
    }) {
        Some(shown) => shown,
        None => url.to_owned(),
    }
}

/// The failure of a test that found no server.
pub fn no_server(url: &str, error: &dyn std::fmt::Display) -> ! {
    panic!(
        "no usable PostgreSQL server at {}: {error}\n\
         start the local one with scripts/postgres.sh, point {URL_VAR} at another, \
         or build the tests with {SKIP_VAR}=1 to mark the tests that need one ignored",
        shown(url)
    )
}

/// Runs SQL on a connection of the test's own (plain TCP, as the test server takes it),
/// beside the store's; the rows of the last statement as text.
pub fn execute(url: &str, sql: &str) -> Result<Vec<Vec<Option<String>>>, String> {
    Session::connect(url)?.execute(sql)
}

/// A connection of the test's own that stays open between statements, so that a test can
/// hold a transaction, and the locks it took, for as long as it needs; closed when dropped.
pub struct Session {
    runtime: tokio::runtime::Runtime,
    /// Taken at drop, so that the connection ends with a goodbye rather than an EOF the
    /// server logs.
    client: Option<tokio_postgres::Client>,
    driver: Option<tokio::task::JoinHandle<()>>,
}

impl Session {
    pub fn connect(url: &str) -> Result<Session, String> {
        let url = url.split('?').next().unwrap_or(url).to_owned();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let (client, driver) = runtime.block_on(async move {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            // Polled whenever a statement runs; between statements the server keeps the
            // session (and its transaction) as it is.
            let driver = tokio::spawn(async move { drop(connection.await) });
            Ok::<_, String>((client, driver))
        })?;
        Ok(Session {
            runtime,
            client: Some(client),
            driver: Some(driver),
        })
    }

    /// The rows of the last statement of `sql` as text; a server error as `SQLSTATE: message`.
    pub fn execute(&self, sql: &str) -> Result<Vec<Vec<Option<String>>>, String> {
        let client = self.client.as_ref().expect("open until dropped");
        let messages = self.runtime.block_on(client.simple_query(sql)).map_err(|e| {
            e.as_db_error().map_or_else(
                || e.to_string(),
                |db| format!("{}: {}", db.code().code(), db.message()),
            )
        })?;
        Ok(messages
            .into_iter()
            .filter_map(|message| match message {
                tokio_postgres::SimpleQueryMessage::Row(row) => {
                    Some((0..row.len()).map(|i| row.get(i).map(str::to_owned)).collect())
                }
                _ => None,
            })
            .collect())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        drop(self.client.take());
        if let Some(driver) = self.driver.take() {
            let _ = self.runtime.block_on(driver);
        }
    }
}

/// Drops its tables when dropped, also when the test fails half-way (with CASCADE, their
/// triggers go with them; the trigger functions are dropped by name).
pub struct ScratchTables {
    url: String,
    prefixes: Vec<String>,
}

impl ScratchTables {
    pub fn new(url: &str) -> ScratchTables {
        ScratchTables {
            url: url.to_owned(),
            prefixes: Vec::new(),
        }
    }

    /// Adds the tables of one table prefix; several stores may share it.
    pub fn add(&mut self, prefix: &str) {
        if !self.prefixes.iter().any(|p| p == prefix) {
            self.prefixes.push(prefix.to_owned());
        }
    }
}

impl Drop for ScratchTables {
    fn drop(&mut self) {
        for p in &self.prefixes {
            // Best effort: a leftover table harms nothing, and a panic here would hide the
            // test's own failure.
            let _ = execute(
                &self.url,
                &format!(
                    "DROP TABLE IF EXISTS \"{p}leases\", \"{p}lease_log\", \"{p}lease_log_pruned\" CASCADE;
                     DROP FUNCTION IF EXISTS \"{p}leases_guard\"(), \"{p}lease_log_guard\"()"
                ),
            );
        }
    }
}
