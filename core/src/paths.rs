//! The one rule every path from a host passes before it reaches the file system.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::errors::{Error, Result};

/// A path a host named holds no NUL byte. The operating system ends a path
/// at its first NUL, so `/srv/a\0b` would reach it as `/srv/a`, another file than the one
/// named (the reference's SQLite driver opens exactly that one); refusing it in the core
/// gives every door the same answer, where each would otherwise fail in its own way or not
/// at all.
pub fn assert_path<'a>(name: &str, path: &'a Path) -> Result<&'a Path> {
    if path.as_os_str().as_bytes().contains(&0) {
        return Err(Error::invalid_argument(format!(
            "{name} must not contain a NUL byte (the system would cut the path there)"
        )));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_with_a_nul_is_refused_and_any_other_passes() {
        for bad in ["/srv/a\0b", "\0"] {
            let error = assert_path("root", Path::new(bad)).unwrap_err();
            assert_eq!(error.code_str(), "ERR_OUT_OF_RANGE", "{bad:?}");
            assert!(
                error.to_string().starts_with("root must not contain a NUL"),
                "{error}"
            );
        }
        for good in ["", "/", "relative/dir", "/srv/tenant \u{1F600}/x"] {
            assert_eq!(assert_path("root", Path::new(good)).unwrap(), Path::new(good));
        }
    }

    #[test]
    fn every_opener_of_a_file_or_folder_refuses_a_nul_before_touching_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let cut = dir.path().join("a");
        let named = format!("{}\0b", cut.display());
        let refusals = [
            crate::SqliteLeaseStore::open(&named).map(drop),
            crate::lease_store::open_lease_store(&format!("sqlite://{named}")).map(drop),
            crate::DirectoryDurableStore::open(&named).map(drop),
            crate::open_durable_store(&format!("file://{named}")).map(drop),
            crate::tenant_root_for(Path::new(&named), "org", "t-0123456789abcdef0123456789abcdef").map(drop),
        ];
        for (i, refusal) in refusals.into_iter().enumerate() {
            let error = refusal.unwrap_err();
            assert_eq!(error.code_str(), "ERR_OUT_OF_RANGE", "opener {i}: {error}");
            assert!(error.to_string().contains("NUL"), "opener {i}: {error}");
        }
        assert!(!cut.exists(), "the path cut at its NUL was created");
    }
}
