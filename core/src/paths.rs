//! The one rule every path from a host passes before it reaches the file system.

use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

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

/// A folder a host names as the place a tool owns and may fill, empty or replace (a tenant
/// root, a router's state root, a directory store) passes [`assert_path`], is not empty and
/// is not a file-system root. The operating system reads `''` as the working directory and
/// `/` (or `/..`, `//`) as the whole disk: a restore would replace either with a copy, and
/// a copy would walk it. Checked on the name alone, before any I/O, so every door refuses
/// the same names the same way.
pub fn assert_root<'a>(name: &str, path: &'a Path) -> Result<&'a Path> {
    assert_path(name, path)?;
    if path.as_os_str().is_empty() {
        return Err(Error::invalid_argument(format!(
            "{name} must not be empty (the system would take the working directory)"
        )));
    }
    // A relative name is read against the working directory, as the system will; where
    // that cannot be read, the system cannot resolve the name either and fails on its own.
    let resolved = match std::env::current_dir() {
        Ok(cwd) => resolve_lexically(&cwd.join(path)),
        Err(_) if path.is_absolute() => resolve_lexically(path),
        Err(_) => return Ok(path),
    };
    if resolved.parent().is_none() {
        return Err(Error::invalid_argument(format!(
            "{name} must not be a file-system root ({} is /)",
            path.display()
        )));
    }
    Ok(path)
}

/// Refuses to replace `root` when it holds the process's working directory: the process
/// would go on in a folder that a restore had just emptied (names relative to it would
/// silently reach the removed tree). A root that does not exist yet holds nothing.
pub fn assert_not_working_dir(name: &str, root: &Path) -> Result<()> {
    let Ok(root_real) = root.canonicalize() else {
        return Ok(());
    };
    let cwd = std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| Error::io("the working directory cannot be read", &e))?;
    if cwd.starts_with(&root_real) {
        return Err(Error::invalid_argument(format!(
            "{name} {} holds the process's working directory {}: a restore never replaces it",
            shown(root),
            cwd.display()
        )));
    }
    Ok(())
}

/// Folds `.`, `..` and repeated separators of an absolute path without touching the disk;
/// `..` at the root stays at the root, as in Node's `path.resolve('/..')`.
pub(crate) fn resolve_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// A path as messages print it: `.`, `..` and doubled slashes folded (lexically, symlinks
/// left alone), so `a//b/../c` reads `a/c`; a relative path stays relative.
pub fn shown(path: &Path) -> String {
    if path.is_absolute() {
        return resolve_lexically(path).display().to_string();
    }
    let mut parts: Vec<Component<'_>> = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir if matches!(parts.last(), Some(Component::Normal(_))) => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    if parts.is_empty() {
        return ".".to_owned();
    }
    parts.iter().collect::<PathBuf>().display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_root_or_a_file_system_root_is_refused_and_a_folder_passes() {
        for bad in ["", "/", "//", "/..", "/./", "/a/..", "/tmp/../.."] {
            let error = assert_root("a tenant root", Path::new(bad)).unwrap_err();
            assert_eq!(error.code_str(), "ERR_OUT_OF_RANGE", "{bad:?}");
            assert!(
                error.to_string().starts_with("a tenant root must not be"),
                "{error}"
            );
        }
        let nul = assert_root("r", Path::new("/srv/a\0b")).unwrap_err();
        assert!(nul.to_string().contains("NUL"), "{nul}");
        for good in ["/srv/t", "rel", ".", "a/..", "/tmp"] {
            assert_eq!(
                assert_root("r", Path::new(good)).unwrap(),
                Path::new(good),
                "{good:?}"
            );
        }
    }

    #[test]
    fn messages_show_paths_folded() {
        assert_eq!(shown(Path::new("a//b/../c")), "a/c");
        assert_eq!(shown(Path::new("/x//y/./z/..")), "/x/y");
        assert_eq!(shown(Path::new("../a/./b")), "../a/b");
        assert_eq!(shown(Path::new("a/..")), ".");
    }

    #[test]
    fn a_root_holding_the_working_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = std::env::current_dir().unwrap();
        let error = assert_not_working_dir("a tenant root", &cwd).unwrap_err();
        assert_eq!(error.code_str(), "ERR_OUT_OF_RANGE");
        assert!(error.to_string().contains("working directory"), "{error}");
        assert!(assert_not_working_dir("r", cwd.parent().unwrap_or(&cwd)).is_err());
        assert!(assert_not_working_dir("r", dir.path()).is_ok());
        assert!(assert_not_working_dir("r", &dir.path().join("missing")).is_ok());
    }

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
