//! Which lease store a command talks to, from `--store`.
//!
//! A value that starts with a URL scheme (`sqlite:...`, `mysql://...`, `postgres://...`) is
//! handed to the core's `open_lease_store` untouched, so every store the core learns to open
//! is usable here without a change. Anything else is the path of a SQLite file.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gotry_tenant_state::{open_lease_store, LeaseStore, SqliteLeaseStore};

use crate::failure::{Exit, Failure};
use gotry_tenant_state::secrets::shown_argument;

/// The store `lease` commands use when `--store` is not given.
pub const DEFAULT_STORE: &str = "./gotry-leases.db";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreTarget {
    /// A SQLite file named by its path.
    File(PathBuf),
    /// A URL for the core to open.
    Url(String),
}

impl StoreTarget {
    pub fn parse(value: &OsStr) -> StoreTarget {
        match value.to_str() {
            Some(text) if has_scheme(text) => StoreTarget::Url(text.to_owned()),
            _ => StoreTarget::File(PathBuf::from(OsString::from(value))),
        }
    }

    /// How the store is named in messages: its path or URL with any credential in it
    /// masked (a URL's password, or one in a path that was meant to be a URL).
    pub fn describe(&self) -> String {
        match self {
            StoreTarget::File(path) => shown_argument(&path.display().to_string()).into_owned(),
            StoreTarget::Url(url) => shown_argument(url).into_owned(),
        }
    }

    /// Opens the store, creating a SQLite file that does not exist yet.
    pub fn open(&self) -> Result<Arc<dyn LeaseStore>, Failure> {
        let store: Arc<dyn LeaseStore> = match self {
            StoreTarget::File(path) => {
                refuse_folder(path)?;
                Arc::new(SqliteLeaseStore::open(path).map_err(|e| self.open_failure(e))?)
            }
            StoreTarget::Url(url) => open_lease_store(url).map_err(|e| self.open_failure(e))?,
        };
        Ok(store)
    }

    /// Opens a store that must exist already. Inspection and repair never create a store:
    /// a mistyped path would otherwise show an empty new store instead of an error.
    pub fn open_existing(&self) -> Result<Arc<dyn LeaseStore>, Failure> {
        if let StoreTarget::File(path) = self {
            require_file(path)?;
        }
        self.open()
    }

    fn open_failure(&self, error: gotry_tenant_state::Error) -> Failure {
        let failure =
            Failure::from(error).context(format!("cannot open the lease store {}", self.describe()));
        if failure.exit == Exit::Invalid {
            failure
                .hint("--store takes a file path (SQLite) or a URL such as sqlite:///var/lib/gotry/leases.db")
        } else {
            failure
        }
    }
}

/// `scheme:` as RFC 3986 spells it, at least two characters long so that a Windows drive
/// letter (`C:\leases.db`) stays a path. A file whose name has such a prefix is named
/// `./name`.
pub fn has_scheme(text: &str) -> bool {
    match text.split_once(':') {
        Some((scheme, _)) => {
            scheme.len() >= 2
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

/// A folder where the store's file should be is named as such (SQLite would only say that
/// it cannot open it).
fn refuse_folder(path: &Path) -> Result<(), Failure> {
    if std::fs::metadata(path).is_ok_and(|meta| meta.is_dir()) {
        return Err(Failure::new(
            Exit::Storage,
            "EISDIR",
            format!(
                "the lease store {} is a folder, not a SQLite file",
                shown_argument(&path.display().to_string())
            ),
            "pass --store with the path of the store's file, or a URL",
        ));
    }
    Ok(())
}

fn require_file(path: &Path) -> Result<(), Failure> {
    std::fs::metadata(path).map(drop).map_err(|error| {
        Failure::io(
            Exit::Storage,
            &error,
            format!(
                "no lease store at {}",
                shown_argument(&path.display().to_string())
            ),
            "pass --store with the path or URL of an existing lease store (the default is ./gotry-leases.db)",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_paths_are_told_apart() {
        let url = |s: &str| StoreTarget::Url(s.to_owned());
        let file = |s: &str| StoreTarget::File(PathBuf::from(s));
        let cases = [
            ("sqlite:///var/lib/x.db", url("sqlite:///var/lib/x.db")),
            ("sqlite:x.db", url("sqlite:x.db")),
            ("mysql://u:p@h:3306/db", url("mysql://u:p@h:3306/db")),
            ("redis+tls://h", url("redis+tls://h")),
            ("./gotry-leases.db", file("./gotry-leases.db")),
            ("/srv/leases.db", file("/srv/leases.db")),
            ("./a:b.db", file("./a:b.db")),
            ("C:\\leases.db", file("C:\\leases.db")),
            ("1x:y", file("1x:y")),
            ("leases.db", file("leases.db")),
        ];
        for (arg, expected) in cases {
            assert_eq!(StoreTarget::parse(OsStr::new(arg)), expected, "{arg}");
        }
    }

    #[test]
    fn a_store_is_named_without_its_password() {
        for (arg, expected) in [
            ("mysql://root:hunter2@db:3306/x", "mysql://***@db:3306/x"),
            ("mysql:/root:hunter2@db:3306/x", "mysql:/***@db:3306/x"),
            ("mysql//root:hunter2@db:3306/x", "mysql//***@db:3306/x"),
            (" mysql://root:hunter2@db:3306/x", " mysql://***@db:3306/x"),
            ("./leases.db", "./leases.db"),
        ] {
            assert_eq!(StoreTarget::parse(OsStr::new(arg)).describe(), expected, "{arg}");
        }
    }
}
