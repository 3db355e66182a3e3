//! The embedded durable store: one folder on a local disk or a shared volume.
//!
//! An object is a file at `<root>/<key>`. A create-only put must never leave half an object
//! under a real name, nor replace one, even when the process dies mid-write or two writers
//! race. So the bytes go to a fresh file in `<root>/.staging` (same file system), are
//! flushed to disk, and are then hard-linked to their name: `link(2)` refuses an existing
//! name atomically, which `rename(2)` would silently replace. The folder holding the new
//! name is flushed before the put is acknowledged, as is every folder the put created.
//! Staging files of a writer that died stay in `.staging`; nothing reads them.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{assert_object_key, assert_prefix, DurableStore, ObjectInfo, PutOutcome};
use crate::errors::{Error, Result};
use crate::paths::assert_root;

const STAGING: &str = ".staging";

/// A durable store in a folder. `Send + Sync`: every call works on the file system alone,
/// so any number of threads and processes may share one folder.
#[derive(Debug)]
pub struct DirectoryDurableStore {
    root: PathBuf,
    staging_counter: AtomicU64,
}

impl DirectoryDurableStore {
    /// Opens the store in `root`, creating the folder (and its staging folder) when missing.
    pub fn open(root: impl AsRef<Path>) -> Result<DirectoryDurableStore> {
        let root = std::path::absolute(assert_root("a durable store folder", root.as_ref())?)
            .map_err(|e| Error::durable_io("the durable store folder cannot be resolved", &e))?;
        create_dirs_durably(&root.join(STAGING))?;
        Ok(DirectoryDurableStore {
            root,
            staging_counter: AtomicU64::new(0),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path_of(&self, key: &str) -> Result<PathBuf> {
        Ok(self.root.join(assert_object_key(key)?))
    }

    fn staging_file(&self) -> Result<(PathBuf, File)> {
        loop {
            let n = self.staging_counter.fetch_add(1, Ordering::Relaxed);
            let path = self
                .root
                .join(STAGING)
                .join(format!("{}-{}-{n}", std::process::id(), random_u64()));
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&path)
            {
                Ok(file) => return Ok((path, file)),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) if e.kind() == ErrorKind::NotFound => create_dirs_durably(&self.root.join(STAGING))?,
                Err(e) => return Err(Error::durable_io("a staging file cannot be created", &e)),
            }
        }
    }
}

impl DurableStore for DirectoryDurableStore {
    fn put_new(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome> {
        let target = self.path_of(key)?;
        let (staging, mut file) = self.staging_file()?;
        let outcome = (|| {
            file.write_all(bytes)
                .and_then(|()| file.sync_data())
                .map_err(|e| Error::durable_io(format!("{key} cannot be written"), &e))?;
            drop(file);
            let folder = target.parent().expect("a key names a file under the root");
            // A concurrent delete may remove an emptied folder between the two steps, so
            // the link is tried again after making the folder anew.
            for _ in 0..3 {
                create_dirs_durably(folder)?;
                match fs::hard_link(&staging, &target) {
                    Ok(()) => {
                        sync_dir(folder)?;
                        return Ok(PutOutcome::Created);
                    }
                    Err(e) if e.kind() == ErrorKind::AlreadyExists => return Ok(PutOutcome::AlreadyExists),
                    Err(e) if e.kind() == ErrorKind::NotFound => continue,
                    Err(e) => {
                        return Err(Error::durable_io(
                            format!("{key} cannot be linked into place"),
                            &e,
                        ))
                    }
                }
            }
            Err(Error::durable(
                "ENOENT",
                format!("the folder of {key} kept disappearing while it was written"),
            ))
        })();
        let _ = fs::remove_file(&staging);
        outcome
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        match fs::read(self.path_of(key)?) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::durable_io(format!("{key} cannot be read"), &e)),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        assert_prefix(prefix)?;
        // Walk only the deepest folder the prefix names in full; the rest is a name filter.
        let folder = prefix.rsplit_once('/').map_or("", |(folder, _)| folder);
        let mut found = Vec::new();
        walk(&self.root.join(folder), folder, &mut |key, size| {
            if key.starts_with(prefix) {
                found.push(ObjectInfo { key, size });
            }
        })?;
        found.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(found)
    }

    fn delete(&self, key: &str) -> Result<()> {
        let path = self.path_of(key)?;
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::durable_io(format!("{key} cannot be deleted"), &e)),
        }
        let mut folder = path.parent().expect("a key names a file under the root");
        sync_dir(folder)?;
        // Emptied folders go too, so that deleted copies leave nothing to walk.
        while folder != self.root && fs::remove_dir(folder).is_ok() {
            folder = folder.parent().expect("inside the root");
        }
        Ok(())
    }

    fn location(&self) -> String {
        format!("file://{}", self.root.display())
    }
}

/// Calls `found(key, size)` for every object below `dir`, whose key is `key_prefix`.
fn walk(dir: &Path, key_prefix: &str, found: &mut dyn FnMut(String, u64)) -> Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(Error::durable_io(
                format!("{} cannot be listed", dir.display()),
                &e,
            ))
        }
    };
    for entry in entries {
        let entry =
            entry.map_err(|e| Error::durable_io(format!("{} cannot be listed", dir.display()), &e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let key = if key_prefix.is_empty() {
            name
        } else {
            format!("{key_prefix}/{name}")
        };
        if assert_object_key(&key).is_err() {
            // Not an object of ours: the staging folder, or a stranger's file.
            continue;
        }
        let meta = entry
            .metadata()
            .map_err(|e| Error::durable_io(format!("{key} cannot be read"), &e))?;
        if meta.is_dir() {
            walk(&entry.path(), &key, found)?;
        } else if meta.is_file() {
            found(key, meta.len());
        }
    }
    Ok(())
}

/// Creates `dir` and its missing parents, flushing each new entry into its parent folder so
/// that a later durable file in it is reachable after power loss.
fn create_dirs_durably(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dirs_durably(parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => sync_dir(dir.parent().unwrap_or(dir)),
        Err(e) if e.kind() == ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        // "Exists" but not a folder: a file stands where the folder must be.
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Err(Error::durable_io(
            format!("{} cannot be created", dir.display()),
            &std::io::Error::from_raw_os_error(libc::ENOTDIR),
        )),
        Err(e) => Err(Error::durable_io(
            format!("{} cannot be created", dir.display()),
            &e,
        )),
    }
}

pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::durable_io(format!("{} cannot be flushed", dir.display()), &e))
}

/// Uniqueness for staging names across processes that share a folder (the pid alone repeats
/// across containers on one volume).
pub(crate) fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    match File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes)) {
        Ok(()) => u64::from_ne_bytes(bytes),
        Err(_) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            now.as_nanos() as u64 ^ (u64::from(std::process::id()) << 32)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn conformance() {
        let dirs = std::sync::Mutex::new(Vec::new());
        super::super::conformance::run_all(&|| {
            let dir = tempfile::tempdir().unwrap();
            let store = DirectoryDurableStore::open(dir.path().join("store")).unwrap();
            dirs.lock().unwrap().push(dir);
            Arc::new(store)
        });
    }

    #[test]
    fn staging_files_are_not_objects_and_leave_no_trace() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirectoryDurableStore::open(dir.path()).unwrap();
        store.put_new("a/b", b"x").unwrap();
        assert_eq!(fs::read_dir(dir.path().join(STAGING)).unwrap().count(), 0);
        fs::write(dir.path().join(STAGING).join("leftover"), b"half").unwrap();
        fs::write(dir.path().join("a").join(".hidden"), b"?").unwrap();
        let keys: Vec<String> = store.list("").unwrap().into_iter().map(|o| o.key).collect();
        assert_eq!(keys, ["a/b"]);
    }

    #[test]
    fn an_unusable_folder_is_unavailable_with_its_errno() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirectoryDurableStore::open(dir.path().join("s")).unwrap();
        // A file where the key's folder should be fails for root too, unlike permissions.
        fs::write(dir.path().join("s").join("blocked"), b"").unwrap();
        match store.put_new("blocked/x", b"y") {
            Err(Error::DurableStoreUnavailable { backend_code, .. }) => assert_eq!(backend_code, "ENOTDIR"),
            other => panic!("{other:?}"),
        }
        match store.list("blocked/") {
            Err(Error::DurableStoreUnavailable { backend_code, .. }) => assert_eq!(backend_code, "ENOTDIR"),
            other => panic!("{other:?}"),
        }
        assert!(store.put_new("free/x", b"y").is_ok());
    }
}
