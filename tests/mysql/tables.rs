//! Drops the tables a test made, also when the test fails half-way. Included with `#[path]`
//! by the test crates that depend on the `mysql` driver (the core's).

// Each including crate uses its own part of this file.
#![allow(dead_code)]

use mysql::prelude::Queryable;

/// Drops its tables when dropped. A direct connection, since the store itself never drops
/// a table, and its triggers refuse to delete its rows.
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
    pub fn connect(&self) -> mysql::Conn {
        self.try_connect()
            .unwrap_or_else(|e| panic!("a direct connection to the test server: {e}"))
    }

    fn try_connect(&self) -> mysql::Result<mysql::Conn> {
        let opts = mysql::Opts::from_url(&self.url)?;
        mysql::Conn::new(mysql::OptsBuilder::from_opts(opts).prefer_socket(false))
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
