//! One way to open any lease store: a URL.

use std::sync::Arc;

use super::mysql::MysqlLeaseStore;
use super::sqlite::SqliteLeaseStore;
use super::LeaseStore;
use crate::errors::{Error, Result};

/// Opens the store a URL names: `sqlite:///absolute/path.db`, `sqlite://relative/path.db`
/// or `sqlite:path.db`; or `mysql://user:password@host:3306/database?prefix=gotry_&timeout_ms=2000`
/// (see [`super::mysql`]); or `postgres://user:password@host:5432/database?prefix=gotry_&timeout_ms=2000`
/// (also `postgresql://`; see `lease_store::postgres`).
pub fn open_lease_store(url: &str) -> Result<Arc<dyn LeaseStore>> {
    let (scheme, rest) = url
        .split_once(':')
        .ok_or_else(|| Error::invalid_argument("a lease store URL starts with a scheme such as sqlite:"))?;
    match scheme {
        "sqlite" => {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(Error::invalid_argument("a sqlite: URL needs a file path"));
            }
            // `sqlite://user:password@...` has no meaning for a file; refusing it keeps a
            // credential pasted in the wrong place from becoming a file name.
            if path.split('/').next().is_some_and(|first| first.contains('@')) {
                return Err(Error::invalid_argument(
                    "a sqlite: URL names a file and takes no user or password",
                ));
            }
            Ok(Arc::new(SqliteLeaseStore::open(path)?))
        }
        "mysql" => Ok(Arc::new(MysqlLeaseStore::open_url(url)?)),
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => Ok(Arc::new(super::postgres::PostgresLeaseStore::open_url(url)?)),
        // The text before the first ':' is not quoted: in `user:password@host` it is a
        // user name, and credentials never appear in errors.
        _ => Err(Error::invalid_argument(
            "a lease store URL starts with sqlite:, mysql://, postgres:// or postgresql://",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls_open_files() {
        let dir = tempfile::tempdir().unwrap();
        let absolute = format!("sqlite://{}/a.db", dir.path().display());
        let store = open_lease_store(&absolute).unwrap();
        store.acquire("k", "o", 1_000).unwrap();
        assert!(dir.path().join("a.db").exists());
        assert!(matches!(
            open_lease_store("sqlite://"),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(matches!(
            open_lease_store("nope"),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(matches!(
            open_lease_store("redis://x"),
            Err(Error::InvalidArgument { .. })
        ));
        for refused in [
            "sqlite://alice:s3cret@host/x.db",
            "sqlite:file:/tmp/x.db?nolock=1",
            "sqlite::memory:",
            "sqlite:file::memory:?cache=shared",
        ] {
            match open_lease_store(refused) {
                Err(Error::InvalidArgument { message }) => {
                    assert!(!message.contains("s3cret"), "{message}")
                }
                other => panic!("{refused}: {:?}", other.map(|_| ())),
            }
        }
        let error = open_lease_store("alice:s3cret@db.example/leases").err().unwrap();
        let shown = error.to_string();
        assert!(!shown.contains("alice") && !shown.contains("s3cret"), "{shown}");
    }
}
