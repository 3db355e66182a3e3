//! One way to open any durable store: a URL.

use std::sync::Arc;

use super::dir::DirectoryDurableStore;
use super::DurableStore;
use crate::errors::{Error, Result};

/// Opens the store a URL names: `file:///absolute/dir`, or a relative folder as
/// `file:relative/dir` or `file://relative/dir` (against the working directory); or, with the
/// `s3` feature, `s3://bucket/prefix?endpoint=...&region=...` (see [`super::s3`]).
pub fn open_durable_store(url: &str) -> Result<Arc<dyn DurableStore>> {
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
            Ok(Arc::new(DirectoryDurableStore::open(path)?))
        }
        #[cfg(feature = "s3")]
        "s3" => Ok(Arc::new(super::s3::S3DurableStore::open_url(url)?)),
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
}
