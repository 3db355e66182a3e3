//! The embedded durable store: one folder on a local disk or a shared volume.
//!
//! An object is a file at `<root>/<key>`. A create-only put must never leave half an object
//! under a real name, nor replace one, even when the process dies mid-write or two writers
//! race. So the bytes go to a fresh file in `<root>/.staging` (same file system), are
//! flushed to disk, and are then hard-linked to their name: `link(2)` refuses an existing
//! name atomically, which `rename(2)` would silently replace. The folder holding the new
//! name is flushed before the put is acknowledged, and so is the entry of every folder on
//! its path, whoever created it: a writer that crashed between making a folder and
//! flushing its parent leaves a folder that exists now but not after a power cut.
//!
//! A writer killed mid-put leaves its staging file behind, sometimes as a second link to an
//! object it had just published, which would keep that object's bytes on disk after `gc`
//! deleted it. A pid cannot tell a dead writer from a live one on another host or in
//! another container sharing the volume, but a lock can: every writer holds an exclusive
//! `flock` on its staging file for as long as the file exists, the kernel drops it when the
//! writer dies, and opening the store (and `gc`) removes exactly the staging files whose
//! lock it can take without waiting.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::{assert_object_key, assert_prefix, DurableStore, ObjectInfo, PutOutcome};
use crate::errors::{Error, Result};
use crate::paths::{assert_root, shown};
use crate::plumbing::{hold_lock, random_u64, remove_if_abandoned};

const STAGING: &str = ".staging";

/// A durable store in a folder. `Send + Sync`: every call works on the file system alone,
/// so any number of threads and processes may share one folder.
#[derive(Debug)]
pub struct DirectoryDurableStore {
    root: PathBuf,
    staging_counter: AtomicU64,
    /// The folders (device, inode) whose entry in their parent this store has flushed: each
    /// is flushed once per process, not once per put. Keyed by inode, not name, so that a
    /// folder removed and made again by another writer is flushed again.
    durable_dirs: Mutex<HashSet<(u64, u64)>>,
    /// Opened for reading: nothing is created, swept or written.
    read_only: bool,
}

impl DirectoryDurableStore {
    /// Opens the store in `root`, creating the folder (and its staging folder) when missing.
    pub fn open(root: impl AsRef<Path>) -> Result<DirectoryDurableStore> {
        let root = std::path::absolute(assert_root("a durable store folder", root.as_ref())?)
            .map_err(|e| Error::durable_io("the durable store folder cannot be resolved", &e))?;
        let store = DirectoryDurableStore {
            root,
            staging_counter: AtomicU64::new(0),
            durable_dirs: Mutex::default(),
            read_only: false,
        };
        store.create_dirs_durably(&store.root.join(STAGING))?;
        store.remove_leftovers()?;
        Ok(store)
    }

    /// Opens an existing store for reading only: a look at a store (an operator's listing, a
    /// verify) must work on a read-only mount and must not turn a mistyped path into a new,
    /// empty store. A missing folder, or a file in its place, is a storage error naming it;
    /// puts and deletes are refused with `EROFS`.
    pub fn open_read_only(root: impl AsRef<Path>) -> Result<DirectoryDurableStore> {
        let named = assert_root("a durable store folder", root.as_ref())?;
        let root = std::path::absolute(named)
            .map_err(|e| Error::io("the durable store folder cannot be resolved", &e))?;
        match fs::metadata(&root) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(Error::io(
                    format!("the durable store {} is not a folder", shown(named)),
                    &std::io::Error::from_raw_os_error(libc::ENOTDIR),
                ))
            }
            Err(e) => return Err(Error::io(format!("no durable store at {}", shown(named)), &e)),
        }
        Ok(DirectoryDurableStore {
            root,
            staging_counter: AtomicU64::new(0),
            durable_dirs: Mutex::default(),
            read_only: true,
        })
    }

    fn assert_writable(&self, key: &str) -> Result<()> {
        super::assert_writable(self.read_only, key, || shown(&self.root))
    }

    /// Removes the staging files of writers that are gone: those whose lock is free.
    fn sweep_staging(&self) -> Result<usize> {
        let staging = self.root.join(STAGING);
        let entries = match fs::read_dir(&staging) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(0),
            Err(e) => {
                return Err(Error::durable_io(
                    format!("{} cannot be listed", shown(&staging)),
                    &e,
                ))
            }
        };
        let mut removed = 0;
        for entry in entries {
            let entry =
                entry.map_err(|e| Error::durable_io(format!("{} cannot be listed", shown(&staging)), &e))?;
            let path = entry.path();
            let removable = remove_if_abandoned(&path, |p| fs::remove_file(p))
                .map_err(|e| Error::durable_io(format!("{} cannot be removed", shown(&path)), &e))?;
            removed += usize::from(removable);
        }
        if removed > 0 {
            sync_dir(&staging)?;
        }
        Ok(removed)
    }

    /// Makes `dir` (the root or a folder below it) and every folder between it and the root
    /// exist durably: each missing one is created, and the parent of each one, new or found,
    /// is flushed unless this store already did so. A folder found is not a durable one: its
    /// maker may have died before flushing its parent.
    fn create_dirs_durably(&self, dir: &Path) -> Result<()> {
        let below = dir.strip_prefix(&self.root).unwrap_or(Path::new(""));
        let mut folder = self.root.clone();
        self.make_durable(&folder)?;
        for part in below.components() {
            folder.push(part);
            self.make_durable(&folder)?;
        }
        Ok(())
    }

    fn make_durable(&self, dir: &Path) -> Result<()> {
        let created = match fs::create_dir(dir) {
            Ok(()) => true,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => false,
            Err(e) if e.kind() == ErrorKind::NotFound && dir == self.root => {
                // The store's own folder may sit in folders yet to be made (outside the store:
                // made, not tracked).
                create_parents_durably(dir)?;
                return self.make_durable(dir);
            }
            Err(e) => return Err(Error::durable_io(format!("{} cannot be created", shown(dir)), &e)),
        };
        let meta =
            fs::metadata(dir).map_err(|e| Error::durable_io(format!("{} cannot be read", shown(dir)), &e))?;
        if !meta.is_dir() {
            // "Exists" but not a folder: a file stands where the folder must be.
            return Err(Error::durable_io(
                format!("{} cannot be created", shown(dir)),
                &std::io::Error::from_raw_os_error(libc::ENOTDIR),
            ));
        }
        let id = (meta.dev(), meta.ino());
        if !created && lock(&self.durable_dirs).contains(&id) {
            return Ok(());
        }
        sync_dir(dir.parent().unwrap_or(dir))?;
        lock(&self.durable_dirs).insert(id);
        Ok(())
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
                Ok(file) => {
                    // Between its creation and this lock a sweep may take the file for a dead
                    // writer's; then the name is gone, and another is tried.
                    if hold_lock(&path, &file)
                        .map_err(|e| Error::durable_io("a staging file cannot be locked", &e))?
                    {
                        return Ok((path, file));
                    }
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    self.create_dirs_durably(&self.root.join(STAGING))?
                }
                Err(e) => return Err(Error::durable_io("a staging file cannot be created", &e)),
            }
        }
    }
}

impl DurableStore for DirectoryDurableStore {
    fn put_new(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome> {
        let target = self.path_of(key)?;
        self.assert_writable(key)?;
        let (staging, mut file) = self.staging_file()?;
        let outcome = (|| {
            file.write_all(bytes)
                .and_then(|()| file.sync_data())
                .map_err(|e| Error::durable_io(format!("{key} cannot be written"), &e))?;
            let folder = target.parent().expect("a key names a file under the root");
            // A concurrent delete may remove an emptied folder between the two steps, so
            // the link is tried again after making the folder anew.
            for _ in 0..3 {
                self.create_dirs_durably(folder)?;
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
        // The lock goes with the file, only once the staging name is gone.
        drop(file);
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
        self.list_after(prefix, "")
    }

    fn list_after(&self, prefix: &str, after: &str) -> Result<Vec<ObjectInfo>> {
        assert_prefix(prefix)?;
        // Walk only the deepest folder the prefix names in full; the rest is a name filter.
        let folder = prefix.rsplit_once('/').map_or("", |(folder, _)| folder);
        let mut found = Vec::new();
        walk(&self.root.join(folder), folder, after, &mut |key, size| {
            if key.starts_with(prefix) && key.as_str() > after {
                found.push(ObjectInfo { key, size });
            }
        })?;
        found.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(found)
    }

    fn delete(&self, key: &str) -> Result<()> {
        let path = self.path_of(key)?;
        self.assert_writable(key)?;
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

    fn remove_leftovers(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        self.sweep_staging().map(drop)
    }
}

/// Calls `found(key, size)` for every object below `dir`, whose key is `key_prefix`, skipping
/// (without a look inside) the entries whose keys, and the keys of everything below them, all
/// sort before `after`.
fn walk(dir: &Path, key_prefix: &str, after: &str, found: &mut dyn FnMut(String, u64)) -> Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::durable_io(format!("{} cannot be listed", shown(dir)), &e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::durable_io(format!("{} cannot be listed", shown(dir)), &e))?;
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
        let below = format!("{key}/");
        if below.as_str() < after && !after.starts_with(&below) {
            continue;
        }
        let meta = entry
            .metadata()
            .map_err(|e| Error::durable_io(format!("{key} cannot be read"), &e))?;
        if meta.is_dir() {
            walk(&entry.path(), &key, after, found)?;
        } else if meta.is_file() {
            found(key, meta.len());
        }
    }
    Ok(())
}

/// Creates the missing folders above a store's own folder, flushing each new entry into its
/// parent.
fn create_parents_durably(dir: &Path) -> Result<()> {
    let Some(parent) = dir.parent() else {
        return Ok(());
    };
    match fs::create_dir(parent) {
        Ok(()) => sync_dir(parent.parent().unwrap_or(parent)),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            create_parents_durably(parent)?;
            create_parents_durably(dir)
        }
        Err(e) => Err(Error::durable_io(
            format!("{} cannot be created", shown(parent)),
            &e,
        )),
    }
}

/// Flushes a folder of the store: a failure is the durable store's.
fn sync_dir(dir: &Path) -> Result<()> {
    crate::plumbing::sync_dir(dir)
        .map_err(|e| Error::durable_io(format!("{} cannot be flushed", shown(dir)), &e))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every critical section inserts or reads one value.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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

    /// A folder made by a writer that died before flushing its parent is flushed before the
    /// first object under it is acknowledged; later puts under it flush only their folder.
    #[test]
    fn every_folder_on_an_acknowledged_path_is_flushed_whoever_made_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        let store = DirectoryDurableStore::open(&root).unwrap();
        fs::create_dir_all(root.join("a/b")).unwrap();
        crate::plumbing::synced::take();
        store.put_new("a/b/c/obj", b"x").unwrap();
        let flushed = crate::plumbing::synced::take();
        for parent in [&root, &root.join("a"), &root.join("a/b"), &root.join("a/b/c")] {
            assert!(
                flushed.contains(parent),
                "{} not flushed: {flushed:?}",
                parent.display()
            );
        }
        store.put_new("a/b/c/next", b"y").unwrap();
        assert_eq!(crate::plumbing::synced::take(), [root.join("a/b/c")]);
        // Another process's store (a fresh one here) does not trust a folder it did not flush.
        let other = DirectoryDurableStore::open(&root).unwrap();
        crate::plumbing::synced::take();
        other.put_new("a/b/c/third", b"z").unwrap();
        assert!(crate::plumbing::synced::take().contains(&root.join("a")));
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
