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
//!
//! Making a file is most of what a small put costs: on ext4 a new inode and its folder entry
//! are written when the file is first flushed, about twice the cost of flushing the bytes of
//! a file that exists (1.2 against 0.6 ms per put here, for a put of a one-row copy). So once a
//! store has been written to, a thread of its own keeps a few staging files made, locked and
//! flushed ahead of time (`Spares`), and a put writes into one of those: a strict copy waits
//! for its bytes, one link and its folder, not for an inode. A spare waits locked through a
//! descriptor open for reading only: one open for writing would keep the file system from
//! being remounted read-only.
//!
//! A name made durable ahead of time costs less still: a put that writes into a file whose
//! name already survives a power cut waits for one flush (its bytes), not two (its bytes, then
//! its folder's entry); 0.28 against 0.59 ms per put here. So [`DurableStore::reserve`] has
//! the same thread create the key as an empty file (in place: an empty file needs no staging)
//! and flush it and its folder, and the put of that key writes into the file it finds there
//! and flushes it. Until then the name is an empty object to every reader (the copies reserve
//! a tenure's next manifest, and their readers pass an empty one over as not written yet), and
//! create-only still holds: nobody else can link the name, and a put writes into a
//! reservation only if this store made it and it is still
//! that same file, empty and linked; otherwise the put goes the usual way, where an existing
//! name answers `AlreadyExists`. A power cut during that write can leave the name empty or
//! torn: the put was never acknowledged, and a torn manifest is a copy a restore passes over.
//! Reservations are made only in folders this store has made durable, and the ones still
//! unused when the store is dropped are removed.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

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
    spares: Arc<Spares>,
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
            spares: Spares::new(&root),
            root,
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
            spares: Spares::new(&root),
            root,
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

    /// Waits until the reservation of `key` is made or given up: whether it is made.
    #[cfg(test)]
    pub(crate) fn wait_reserved(&self, key: &str) -> bool {
        self.spares.wait_reserved(&self.root.join(key))
    }

    fn path_of(&self, key: &str) -> Result<PathBuf> {
        Ok(self.root.join(assert_object_key(key)?))
    }

    /// A staging file this store holds the lock of: a spare made ahead of time when one is
    /// ready, else one made now.
    fn staging_file(&self) -> Result<Staging> {
        if let Some((path, lock)) = self.spares.take() {
            let opened = OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path);
            return match opened {
                Ok(file) => Ok(Staging {
                    path,
                    file,
                    _lock: Some(lock),
                }),
                Err(e) => {
                    discard(&path, lock);
                    Err(Error::durable_io("a staging file cannot be opened", &e))
                }
            };
        }
        loop {
            match self.spares.make(true) {
                Ok(Some((path, file))) => {
                    return Ok(Staging {
                        path,
                        file,
                        _lock: None,
                    })
                }
                Ok(None) => continue,
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    self.create_dirs_durably(&self.root.join(STAGING))?
                }
                Err(e) => return Err(Error::durable_io("a staging file cannot be created", &e)),
            }
        }
    }

    /// Flushes `folder` once a new name is linked into it, after making its whole path durable
    /// when this store has not flushed the folder's own entry (a folder another writer made, or
    /// made again, may not survive a power cut yet).
    fn flush_new_entry(&self, folder: &Path) -> Result<()> {
        let meta = fs::metadata(folder)
            .map_err(|e| Error::durable_io(format!("{} cannot be read", shown(folder)), &e))?;
        if !lock(&self.durable_dirs).contains(&(meta.dev(), meta.ino())) {
            self.create_dirs_durably(folder)?;
        }
        sync_dir(folder)
    }
}

impl Drop for DirectoryDurableStore {
    fn drop(&mut self) {
        self.spares.close();
    }
}

/// A file's identity: (device, inode).
type FileId = (u64, u64);

/// Staging files made and flushed ahead of puts, and names reserved ahead of them, by a thread
/// started at a store's first put or reservation and ended when the store is dropped (which
/// removes the files and reservations still unused). At most [`Spares::KEPT`] spares wait:
/// enough for a replica whose tenants copy a few at a time.
struct Spares {
    root: PathBuf,
    counter: AtomicU64,
    state: Mutex<SpareState>,
    wanted: Condvar,
}

#[derive(Default)]
struct SpareState {
    /// Each spare with the read-only descriptor that holds its lock.
    ready: Vec<(PathBuf, File)>,
    /// The names asked for by [`DurableStore::reserve`], by path, until a put claims them.
    reserved: HashMap<PathBuf, Reserved>,
    /// The names to reserve, in the order asked, with the folder (as it was when asked) whose
    /// path the store had made durable.
    to_reserve: VecDeque<(PathBuf, FileId)>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The process that started the thread and holds the spares' locks.
    owner: u32,
    /// Set by a failed attempt: the thread waits for the next take before trying again, so a
    /// full disk or a removed folder is not retried in a loop (the put makes its own file and
    /// reports the error).
    stalled: bool,
    closed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reserved {
    /// Asked for; the thread has not started on it (a put now cancels it).
    Queued,
    /// The thread is making it: a put waits for the outcome.
    Making,
    /// An empty file of this identity is at the name, flushed with its folder; the number
    /// orders reservations by age.
    Ready(FileId, u64),
}

impl std::fmt::Debug for Spares {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = lock(&self.state);
        f.debug_struct("Spares")
            .field("ready", &state.ready.len())
            .field("reserved", &state.reserved.len())
            .finish()
    }
}

impl Spares {
    const KEPT: usize = 4;
    /// Reservations kept unclaimed at most. A tenure that ends (a handoff, a loss) never claims
    /// the name its last copy reserved; without a bound, a store open for the life of a replica
    /// would keep one per tenure it ever served.
    const RESERVED_MOST: usize = if cfg!(test) { 4 } else { 1024 };

    fn new(root: &Path) -> Arc<Spares> {
        Arc::new(Spares {
            root: root.to_path_buf(),
            counter: AtomicU64::new(0),
            state: Mutex::default(),
            wanted: Condvar::new(),
        })
    }

    /// Starts the thread the first time, and tells whether this process may use what it makes:
    /// a process forked from the one that made them may not, as the parent holds the same locks
    /// and may write into the same files.
    fn started(self: &Arc<Spares>, state: &mut SpareState) -> bool {
        if state.closed {
            return false;
        }
        if state.thread.is_none() {
            let spares = Arc::clone(self);
            state.owner = std::process::id();
            state.thread = std::thread::Builder::new()
                .name("gotry-staging".into())
                .spawn(move || spares.refill())
                .ok();
        }
        state.owner == std::process::id()
    }

    /// A ready spare, if any; wakes the thread to make the next.
    fn take(self: &Arc<Spares>) -> Option<(PathBuf, File)> {
        let mut state = lock(&self.state);
        if !self.started(&mut state) {
            return None;
        }
        state.stalled = false;
        self.wanted.notify_all();
        state.ready.pop()
    }

    /// Queues `target` (in the folder `folder`, whose path is durable) to be reserved.
    fn reserve(self: &Arc<Spares>, target: PathBuf, folder: FileId) {
        let mut state = lock(&self.state);
        if !self.started(&mut state) || state.reserved.contains_key(&target) {
            return;
        }
        state.reserved.insert(target.clone(), Reserved::Queued);
        state.to_reserve.push_back((target, folder));
        self.wanted.notify_all();
    }

    /// The reservation of `target` for a put of it, if this store made one: waits while the
    /// thread is linking it, cancels it when the thread has not started on it.
    fn claim(&self, target: &Path) -> Option<FileId> {
        let mut state = lock(&self.state);
        if state.owner != std::process::id() {
            return None;
        }
        loop {
            match state.reserved.get(target).copied() {
                None => return None,
                Some(Reserved::Making) => {
                    state = self
                        .wanted
                        .wait(state)
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                }
                Some(Reserved::Queued) => {
                    state.reserved.remove(target);
                    return None;
                }
                Some(Reserved::Ready(id, _)) => {
                    state.reserved.remove(target);
                    return Some(id);
                }
            }
        }
    }

    /// The thread's loop: makes the reservations asked for, first, and keeps [`Spares::KEPT`]
    /// files made, locked and flushed.
    fn refill(&self) {
        loop {
            let mut state = lock(&self.state);
            while !state.closed
                && state.to_reserve.is_empty()
                && (state.stalled || state.ready.len() >= Self::KEPT)
            {
                state = self
                    .wanted
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            if state.closed {
                return;
            }
            if let Some((target, folder)) = state.to_reserve.pop_front() {
                if state.reserved.get(&target) != Some(&Reserved::Queued) {
                    // Claimed (so cancelled) before the thread came to it.
                    continue;
                }
                state.reserved.insert(target.clone(), Reserved::Making);
                drop(state);
                let made = create_in_folder(&target, folder).ok();
                let mut state = lock(&self.state);
                match made {
                    Some(id) => {
                        let age = self.counter.fetch_add(1, Ordering::Relaxed);
                        state.reserved.insert(target, Reserved::Ready(id, age));
                        Self::evict(&mut state);
                    }
                    None => {
                        state.reserved.remove(&target);
                    }
                }
                // Wakes a put waiting for this reservation (and a test, see `wait_reserved`).
                self.wanted.notify_all();
                continue;
            }
            drop(state);
            let made = self.make(false).and_then(|made| match made {
                Some((path, file)) => file.sync_all().map(|()| Some((path, file))),
                None => Ok(None),
            });
            let mut state = lock(&self.state);
            match made {
                Ok(Some(spare)) if !state.closed => {
                    state.ready.push(spare);
                    // Also wakes a test waiting for the spares (see `wait_for_spares`).
                    self.wanted.notify_all();
                }
                Ok(Some((path, file))) => discard(&path, file),
                Ok(None) => {}
                Err(_) => state.stalled = true,
            }
        }
    }

    /// Removes the oldest reservations beyond [`Spares::RESERVED_MOST`], under the lock: a put
    /// cannot claim one while it is removed, and finds none after (its put then links anew).
    fn evict(state: &mut SpareState) {
        while state.reserved.len() > Self::RESERVED_MOST {
            let oldest = state
                .reserved
                .iter()
                .filter_map(|(target, reserved)| match reserved {
                    Reserved::Ready(id, age) => Some((*age, *id, target)),
                    _ => None,
                })
                .min_by_key(|(age, ..)| *age)
                .map(|(_, id, target)| (id, target.clone()));
            let Some((id, target)) = oldest else {
                return;
            };
            state.reserved.remove(&target);
            remove_reservation(&target, id);
        }
    }

    /// Makes a staging file and takes its lock through the descriptor returned, open for
    /// writing or (a spare's) for reading only; `None` when a sweep took the new file for a
    /// dead writer's between the two (another name is tried).
    fn make(&self, write: bool) -> std::io::Result<Option<(PathBuf, File)>> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let path = self
            .root
            .join(STAGING)
            .join(format!("{}-{}-{n}", std::process::id(), random_u64()));
        let mut options = OpenOptions::new();
        if write {
            options.write(true).create_new(true);
        } else {
            options.read(true).custom_flags(libc::O_CREAT | libc::O_EXCL);
        }
        match options.mode(0o644).open(&path) {
            Ok(file) => Ok(hold_lock(&path, &file)?.then_some((path, file))),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Waits until `n` spares are ready: tests see the refilled state without sleeping.
    #[cfg(test)]
    fn wait_for_spares(&self, n: usize) -> Vec<PathBuf> {
        let mut state = lock(&self.state);
        while state.ready.len() < n {
            state = self.wanted.wait(state).unwrap();
        }
        state.ready.iter().map(|(path, _)| path.clone()).collect()
    }

    /// Waits until the thread is done with the reservation of `target`: whether it is ready.
    #[cfg(test)]
    fn wait_reserved(&self, target: &Path) -> bool {
        let mut state = lock(&self.state);
        loop {
            match state.reserved.get(target) {
                Some(Reserved::Queued | Reserved::Making) => state = self.wanted.wait(state).unwrap(),
                Some(Reserved::Ready(..)) => return true,
                None => return false,
            }
        }
    }

    /// Stops the thread and removes the spares and reservations it made. In a forked child,
    /// whose copy of the store has no such thread and whose spares are the parent's, it leaves
    /// both alone.
    fn close(&self) {
        let thread = {
            let mut state = lock(&self.state);
            state.closed = true;
            self.wanted.notify_all();
            if state.thread.is_some() && state.owner != std::process::id() {
                // Closing the child's descriptors leaves the parent's locks held.
                std::mem::forget(state.thread.take());
                state.ready.clear();
                state.reserved.clear();
                return;
            }
            state.thread.take()
        };
        // Joined first: a reservation the thread is making is among those removed.
        if let Some(thread) = thread {
            let _ = thread.join();
        }
        let (ready, reserved) = {
            let mut state = lock(&self.state);
            (
                std::mem::take(&mut state.ready),
                std::mem::take(&mut state.reserved),
            )
        };
        for (path, file) in ready {
            discard(&path, file);
        }
        for (target, reserved) in reserved {
            if let Reserved::Ready(id, _) = reserved {
                remove_reservation(&target, id);
            }
        }
    }
}

/// Writes `bytes` into the reservation at `target` and flushes them, when it is still the file
/// this store reserved: the same one, empty and linked. `false` when it is not (removed,
/// replaced, written): the put then goes the usual way, where the name decides.
fn fill(target: &Path, reserved: FileId, bytes: &[u8]) -> std::io::Result<bool> {
    let opened = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(target);
    let mut file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound || e.raw_os_error() == Some(libc::ELOOP) => {
            return Ok(false)
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !still_reserved(&meta, reserved) || meta.nlink() == 0 {
        return Ok(false);
    }
    file.write_all(bytes)
        .and_then(|()| file.sync_data())
        .inspect_err(|_| {
            // Back to a reservation, which readers pass over, rather than a torn object.
            let _ = file.set_len(0);
        })?;
    Ok(true)
}

/// Creates `target`, empty, and flushes it and its folder, through a descriptor of the folder
/// checked to be `folder`: its identity, or an error when the name is taken, the folder is no
/// longer the one whose path is durable (a folder moved or made anew meanwhile), or the disk
/// fails; the put then goes the usual way. The name created is always the one checked and
/// flushed. Made in place rather than linked from staging: an empty file needs no staging, and
/// a reservation then costs one journal commit (the file's flush; the folder's finds it done on
/// ext4) instead of a spare's and the link's.
fn create_in_folder(target: &Path, folder: FileId) -> std::io::Result<FileId> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::{AsRawFd, FromRawFd};

    let dir = File::open(target.parent().expect("a key names a file under the root"))?;
    let meta = dir.metadata()?;
    if (meta.dev(), meta.ino()) != folder {
        return Err(std::io::Error::from_raw_os_error(libc::ESTALE));
    }
    let name = CString::new(target.file_name().expect("a key names a file").as_bytes())?;
    let flags = libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC;
    // SAFETY: `name` is NUL-terminated and lives across the call; `dir` is open.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, 0o644 as libc::c_uint) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened here and is owned by nothing else.
    let file = unsafe { File::from_raw_fd(fd) };
    let made = file
        .metadata()
        .map(|meta| (meta.dev(), meta.ino()))
        .and_then(|id| file.sync_all().and_then(|()| dir.sync_all()).map(|()| id));
    if made.is_err() {
        // Not durable: the name goes again, as the empty file it still is.
        // SAFETY: as above.
        unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) };
    }
    made
}

/// Whether `meta` is still the reservation `id`: the same file, and empty.
fn still_reserved(meta: &fs::Metadata, id: FileId) -> bool {
    (meta.dev(), meta.ino()) == id && meta.len() == 0
}

/// Removes the reservation at `target` when it is still the empty file `id`.
fn remove_reservation(target: &Path, id: FileId) {
    if fs::symlink_metadata(target).is_ok_and(|meta| still_reserved(&meta, id)) {
        let _ = fs::remove_file(target);
    }
}

/// A staging file being written, and (for a spare) the descriptor that holds its lock.
struct Staging {
    path: PathBuf,
    file: File,
    _lock: Option<File>,
}

/// Removes a staging file this process holds: the name first, the lock with the file.
fn discard(path: &Path, file: File) {
    let _ = fs::remove_file(path);
    drop(file);
}

impl DurableStore for DirectoryDurableStore {
    fn put_new(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome> {
        let target = self.path_of(key)?;
        self.assert_writable(key)?;
        if let Some(reserved) = self.spares.claim(&target) {
            if fill(&target, reserved, bytes)
                .map_err(|e| Error::durable_io(format!("{key} cannot be written"), &e))?
            {
                return Ok(PutOutcome::Created);
            }
        }
        let mut staged = self.staging_file()?;
        let (staging, file) = (&staged.path, &mut staged.file);
        let outcome = (|| {
            file.write_all(bytes)
                .and_then(|()| file.sync_data())
                .map_err(|e| Error::durable_io(format!("{key} cannot be written"), &e))?;
            let folder = target.parent().expect("a key names a file under the root");
            // The link is tried first: the key's folder is there for all but a tenure's first
            // object. A missing one is made, and a concurrent delete may remove an emptied
            // folder between the two steps, so the link is tried again after making it anew.
            for _ in 0..3 {
                match fs::hard_link(staging, &target) {
                    Ok(()) => {
                        self.flush_new_entry(folder)?;
                        return Ok(PutOutcome::Created);
                    }
                    Err(e) if e.kind() == ErrorKind::AlreadyExists => return Ok(PutOutcome::AlreadyExists),
                    Err(e) if e.kind() == ErrorKind::NotFound => self.create_dirs_durably(folder)?,
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
        let _ = fs::remove_file(&staged.path);
        // The lock goes with the file, only once the staging name is gone.
        drop(staged);
        outcome
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        match fs::read(self.path_of(key)?) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::durable_io(format!("{key} cannot be read"), &e)),
        }
    }

    fn get_parts(&self, key: &str, take: &mut dyn FnMut(&[u8]) -> Result<bool>) -> Result<bool> {
        /// One part: small enough that the buffer is reused memory, not fresh pages.
        const PART: usize = 256 << 10;
        let unreadable = |e: std::io::Error| Error::durable_io(format!("{key} cannot be read"), &e);
        let mut file = match File::open(self.path_of(key)?) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(unreadable(e)),
        };
        let mut part = vec![0u8; PART];
        loop {
            match std::io::Read::read(&mut file, &mut part) {
                Ok(0) => return Ok(true),
                Ok(n) if !take(&part[..n])? => return Ok(true),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(unreadable(e)),
            }
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
        self.delete_all(std::slice::from_ref(&key.to_owned()))
    }

    fn delete_all(&self, keys: &[String]) -> Result<()> {
        let mut folders = BTreeSet::new();
        for key in keys {
            let path = self.path_of(key)?;
            self.assert_writable(key)?;
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::durable_io(format!("{key} cannot be deleted"), &e)),
            }
            folders.insert(
                path.parent()
                    .expect("a key names a file under the root")
                    .to_owned(),
            );
        }
        for folder in &folders {
            sync_dir(folder)?;
        }
        // Emptied folders go too, so that deleted copies leave nothing to walk; the deepest
        // first, so a folder emptied by its child's removal goes as well.
        for folder in folders.iter().rev() {
            let mut folder = folder.as_path();
            while folder != self.root && fs::remove_dir(folder).is_ok() {
                folder = folder.parent().expect("inside the root");
            }
        }
        Ok(())
    }

    fn location(&self) -> String {
        format!("file://{}", self.root.display())
    }

    fn answers_at_once(&self) -> bool {
        true
    }

    fn reserve(&self, key: &str) {
        if self.read_only {
            return;
        }
        let Ok(target) = self.path_of(key) else {
            return;
        };
        let folder = target.parent().and_then(|folder| fs::metadata(folder).ok());
        let Some(folder) = folder.map(|meta| (meta.dev(), meta.ino())) else {
            return;
        };
        // Making the name and flushing its folder makes it durable only where the folder's
        // own path already is.
        if lock(&self.durable_dirs).contains(&folder) {
            self.spares.reserve(target, folder);
        }
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

    fn staged(dir: &Path) -> HashSet<PathBuf> {
        fs::read_dir(dir.join(STAGING))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect()
    }

    #[test]
    fn staging_files_are_not_objects_and_leave_no_trace() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirectoryDurableStore::open(dir.path()).unwrap();
        store.put_new("a/b", b"x").unwrap();
        fs::write(dir.path().join(STAGING).join("leftover"), b"half").unwrap();
        fs::write(dir.path().join("a").join(".hidden"), b"?").unwrap();
        let keys: Vec<String> = store.list("").unwrap().into_iter().map(|o| o.key).collect();
        assert_eq!(keys, ["a/b"]);
        fs::remove_file(dir.path().join(STAGING).join("leftover")).unwrap();
        drop(store);
        assert_eq!(staged(dir.path()), HashSet::new());
    }

    /// A put writes into a spare made ahead of it, and the thread makes the next one; spares
    /// are locked like any writer's staging file, so another store's sweep keeps them, and
    /// they go when their store is dropped.
    #[test]
    fn puts_use_spare_staging_files_that_sweeps_keep_and_a_drop_removes() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirectoryDurableStore::open(dir.path()).unwrap();
        store.put_new("a/first", b"x").unwrap();
        let spares: HashSet<PathBuf> = store.spares.wait_for_spares(Spares::KEPT).into_iter().collect();
        assert_eq!(staged(dir.path()), spares);

        let other = DirectoryDurableStore::open(dir.path()).unwrap();
        other.remove_leftovers().unwrap();
        assert_eq!(
            staged(dir.path()),
            spares,
            "a sweep removed a live store's spares"
        );

        store.put_new("a/second", b"y").unwrap();
        assert_eq!(fs::read(dir.path().join("a/second")).unwrap(), b"y");
        let refilled: HashSet<PathBuf> = store.spares.wait_for_spares(Spares::KEPT).into_iter().collect();
        assert_eq!(
            spares.difference(&refilled).count(),
            1,
            "the put did not write into a spare: {spares:?} then {refilled:?}"
        );
        assert_eq!(refilled.difference(&spares).count(), 1);

        drop(store);
        assert_eq!(staged(dir.path()), HashSet::new());
        drop(other);
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

    /// A store inherited by a forked child shows the parent's pid as the spares' owner: the
    /// child takes none (the parent holds their locks and may write into them) and its drop
    /// leaves them where they are. Simulated here by changing the recorded owner.
    #[test]
    fn a_process_that_did_not_make_the_spares_neither_takes_nor_removes_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirectoryDurableStore::open(dir.path()).unwrap();
        store.put_new("a/first", b"x").unwrap();
        store.reserve("a/reserved");
        assert!(store.wait_reserved("a/reserved"));
        let spares: HashSet<PathBuf> = store.spares.wait_for_spares(Spares::KEPT).into_iter().collect();
        lock(&store.spares.state).owner = std::process::id().wrapping_add(1);
        store.put_new("a/second", b"y").unwrap();
        assert_eq!(fs::read(dir.path().join("a/second")).unwrap(), b"y");
        assert_eq!(staged(dir.path()), spares, "a spare was taken by another process");
        assert_eq!(
            store.put_new("a/reserved", b"y").unwrap(),
            PutOutcome::AlreadyExists,
            "another process's reservation was written"
        );
        drop(store);
        assert_eq!(
            staged(dir.path()),
            spares,
            "another process's spares were removed"
        );
        assert!(
            dir.path().join("a/reserved").exists(),
            "another process's reservation was removed"
        );
    }

    fn inode(path: &Path) -> u64 {
        fs::symlink_metadata(path).unwrap().ino()
    }

    /// A reserved key is an empty object at once durable: another writer meets it as an
    /// existing name, and this store's put writes into that very file with one flush of its
    /// bytes, none of a folder. A reservation unused when the store goes is removed.
    #[test]
    fn a_reserved_key_is_an_empty_object_that_only_its_store_fills_with_no_folder_flush() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirectoryDurableStore::open(dir.path()).unwrap();
        store.put_new("a/first", b"x").unwrap();
        store.reserve("a/next");
        store.reserve("a/unused");
        assert!(store.wait_reserved("a/next") && store.wait_reserved("a/unused"));
        let listed: Vec<(String, u64)> = store
            .list("a/")
            .unwrap()
            .into_iter()
            .map(|o| (o.key, o.size))
            .collect();
        assert_eq!(
            listed,
            [
                ("a/first".into(), 1),
                ("a/next".into(), 0),
                ("a/unused".into(), 0)
            ]
        );
        let reserved = inode(&dir.path().join("a/next"));

        let other = DirectoryDurableStore::open(dir.path()).unwrap();
        assert_eq!(
            other.put_new("a/next", b"theirs").unwrap(),
            PutOutcome::AlreadyExists
        );

        crate::plumbing::synced::take();
        assert_eq!(store.put_new("a/next", b"ours").unwrap(), PutOutcome::Created);
        assert_eq!(
            crate::plumbing::synced::take(),
            Vec::<PathBuf>::new(),
            "a folder was flushed"
        );
        assert_eq!(fs::read(dir.path().join("a/next")).unwrap(), b"ours");
        assert_eq!(
            inode(&dir.path().join("a/next")),
            reserved,
            "the put did not write into the reservation"
        );
        assert_eq!(
            store.put_new("a/next", b"again").unwrap(),
            PutOutcome::AlreadyExists
        );

        drop(store);
        assert!(
            !dir.path().join("a/unused").exists(),
            "an unused reservation was left behind"
        );
        assert_eq!(fs::read(dir.path().join("a/next")).unwrap(), b"ours");
        drop(other);
    }

    /// A put writes into its reservation only while it is the file reserved, empty and linked:
    /// removed, the put makes the object anew; replaced or written by someone else, the name is
    /// theirs.
    #[test]
    fn a_put_does_not_write_into_a_reservation_removed_or_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirectoryDurableStore::open(dir.path()).unwrap();
        store.put_new("a/first", b"x").unwrap();
        for key in ["a/removed", "a/replaced", "a/written"] {
            store.reserve(key);
            assert!(store.wait_reserved(key), "{key}");
        }
        fs::remove_file(dir.path().join("a/removed")).unwrap();
        fs::remove_file(dir.path().join("a/replaced")).unwrap();
        fs::write(dir.path().join("a/replaced"), b"theirs").unwrap();
        OpenOptions::new()
            .append(true)
            .open(dir.path().join("a/written"))
            .unwrap()
            .write_all(b"theirs")
            .unwrap();

        assert_eq!(store.put_new("a/removed", b"ours").unwrap(), PutOutcome::Created);
        assert_eq!(fs::read(dir.path().join("a/removed")).unwrap(), b"ours");
        for key in ["a/replaced", "a/written"] {
            assert_eq!(
                store.put_new(key, b"ours").unwrap(),
                PutOutcome::AlreadyExists,
                "{key}"
            );
            assert_eq!(fs::read(dir.path().join(key)).unwrap(), b"theirs", "{key}");
        }
        drop(store);
        for key in ["a/removed", "a/replaced", "a/written"] {
            assert!(dir.path().join(key).exists(), "{key} was removed with the store");
        }
    }

    /// Unclaimed reservations are bounded: beyond [`Spares::RESERVED_MOST`] the oldest are
    /// removed, and a put of such a key makes its object the usual way.
    #[test]
    fn the_oldest_unclaimed_reservations_go_beyond_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirectoryDurableStore::open(dir.path()).unwrap();
        store.put_new("a/first", b"x").unwrap();
        let keys: Vec<String> = (0..Spares::RESERVED_MOST + 2)
            .map(|n| format!("a/r{n}"))
            .collect();
        for key in &keys {
            store.reserve(key);
            assert!(store.wait_reserved(key), "{key}");
        }
        let (evicted, kept) = keys.split_at(2);
        for key in evicted {
            assert!(!dir.path().join(key).exists(), "{key} was kept beyond the bound");
            assert_eq!(store.put_new(key, b"y").unwrap(), PutOutcome::Created);
        }
        for key in kept {
            assert_eq!(fs::metadata(dir.path().join(key)).unwrap().len(), 0, "{key}");
        }
        assert_eq!(lock(&store.spares.state).reserved.len(), Spares::RESERVED_MOST);
    }

    /// A name is reserved only where making it and flushing its folder makes it durable: in a
    /// folder whose path this store flushed, not one another writer made (nor one missing).
    #[test]
    fn nothing_is_reserved_in_a_folder_the_store_has_not_made_durable() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirectoryDurableStore::open(dir.path()).unwrap();
        store.put_new("a/first", b"x").unwrap();
        fs::create_dir(dir.path().join("b")).unwrap();
        store.reserve("b/next");
        store.reserve("c/next");
        assert!(!store.wait_reserved("b/next") && !store.wait_reserved("c/next"));
        assert_eq!(store.list("").unwrap().len(), 1);
        store.reserve("a/next");
        assert!(store.wait_reserved("a/next"));
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
