//! One way to open any durable store: a URL.

use std::sync::Arc;

use super::dir::DirectoryDurableStore;
use super::DurableStore;
use crate::errors::{Error, Result};

/// Opens the store a URL names: `file:///absolute/dir`, or a relative folder as
/// `file:relative/dir` or `file://relative/dir` (against the working directory); or, with the
/// `s3` feature, `s3://bucket/prefix?endpoint=...&region=...` (see [`super::s3`]).
pub fn open_durable_store(url: &str) -> Result<Arc<dyn DurableStore>> {
    open(url, false)
}

/// Opens the store a URL names for reading only (listing, verifying, restoring without a
/// lease): nothing is written, not even a directory store's staging folder or an S3
/// server's probe object, and a folder that does not exist is a storage error naming it
/// rather than a new, empty store. Puts and deletes through it are refused.
pub fn open_durable_store_read_only(url: &str) -> Result<Arc<dyn DurableStore>> {
    open(url, true)
}

fn open(url: &str, read_only: bool) -> Result<Arc<dyn DurableStore>> {
    let (scheme, rest) = url
        .split_once(':')
        .ok_or_else(|| Error::invalid_argument("a durable store URL starts with a scheme such as file:"))?;
    match scheme {
        "file" => {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(Error::invalid_argument("a file: URL needs a folder"));
            }
            // `file:KEY:SECRET@dir` is an S3 URL with the wrong scheme, not a folder to
            // create with a credential for its name.
            if path.split('/').next().is_some_and(|first| first.contains('@')) {
                return Err(Error::invalid_argument(
                    "a file: URL names a folder on this machine and holds no user or password",
                ));
            }
            Ok(Arc::new(if read_only {
                DirectoryDurableStore::open_read_only(path)?
            } else {
                DirectoryDurableStore::open(path)?
            }))
        }
        #[cfg(feature = "s3")]
        "s3" => Ok(Arc::new(if read_only {
            super::s3::S3DurableStore::open_url_read_only(url)?
        } else {
            super::s3::S3DurableStore::open_url(url)?
        })),
        // The text before the first ':' is not quoted: in `key:secret@bucket` it is a
        // credential, and credentials never appear in errors.
        _ => Err(Error::invalid_argument(if cfg!(feature = "s3") {
            "a durable store URL starts with file: or s3://"
        } else {
            "a durable store URL starts with file: (this build has no s3 support)"
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_urls_open_folders() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_durable_store(&format!("file://{}/copies", dir.path().display())).unwrap();
        store.put_new("a", b"1").unwrap();
        assert!(dir.path().join("copies/a").is_file());
        assert!(store.location().ends_with("/copies"));
        for bad in [
            "file://",
            "file:",
            "nope",
            "gs://bucket",
            "file:KEY:SECRET@dir",
            "file://user:pw@host/dir",
        ] {
            assert!(
                matches!(open_durable_store(bad), Err(Error::InvalidArgument { .. })),
                "{bad}"
            );
        }
        let shown = open_durable_store("AKIAX:s3cret@bucket/p")
            .err()
            .unwrap()
            .to_string();
        assert!(!shown.contains("AKIAX") && !shown.contains("s3cret"), "{shown}");
        let shown = open_durable_store("file:KEY:SECRET@dir")
            .err()
            .unwrap()
            .to_string();
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(!std::path::Path::new("KEY:SECRET@dir").exists());
    }

    /// A read-only open creates nothing (no folder for a mistyped name, no staging folder),
    /// names a missing folder or a file in its way, and refuses writes.
    #[test]
    fn a_read_only_open_never_writes() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("mistyped");
        for url in [
            format!("file://{}", missing.display()),
            format!("file:{}", missing.display()),
        ] {
            match open_durable_store_read_only(&url) {
                Err(Error::Storage { code, message }) => {
                    assert_eq!(code, "ENOENT");
                    assert!(message.contains("mistyped"), "{message}");
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(!missing.exists());
        std::fs::write(dir.path().join("file"), b"").unwrap();
        match open_durable_store_read_only(&format!("file://{}/file", dir.path().display())) {
            Err(Error::Storage { code, .. }) => assert_eq!(code, "ENOTDIR"),
            other => panic!("{other:?}"),
        }

        let folder = dir.path().join("copies");
        std::fs::create_dir(&folder).unwrap();
        let store = open_durable_store_read_only(&format!("file://{}", folder.display())).unwrap();
        assert!(store.list("").unwrap().is_empty() && store.get("a").unwrap().is_none());
        for refused in [store.put_new("a", b"1").map(drop), store.delete("a")] {
            match refused {
                Err(Error::DurableStoreUnavailable { backend_code, .. }) => assert_eq!(backend_code, "EROFS"),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            std::fs::read_dir(&folder).unwrap().count(),
            0,
            "a read wrote into the store"
        );
    }
}
