//! Taking a consistent image of a tenant root. SQLite files are read through one read
//! transaction of this library's SQLite, other files as they are. A file that another handle of
//! this process has open is never opened here (the module doc says why): the descriptors in
//! `/proc/self/fd` tell which, and such a file is read from its WAL (see [`super::wal`]) or,
//! where that does not apply, goes to the host's [`HostSnapshot`]. The same check refuses a
//! restore into a root whose files the host still has open.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::io::ErrorKind;
use std::os::unix::io::RawFd;
use std::path::PathBuf;

use super::body::{Body, Spool, IN_MEMORY};
use super::wal::{HostFile, Since, WalMark};
use super::*;
use crate::paths::assert_path;
use crate::plumbing::sqlite_code_name;

/// How long a snapshot waits for a rollback-mode writer's lock before it gives up with
/// SQLITE_BUSY, the core's and a host's snapshot function alike: the SQLite lease store's
/// default, so a copy is as patient as a lease operation.
pub const SNAPSHOT_LOCK_WAIT: std::time::Duration = crate::plumbing::DEFAULT_BUSY_TIMEOUT;

/// A consistent set of files to copy, each held in memory when small and spooled into a
/// scratch folder beside the root when large (see [`super::body`]).
pub(super) struct Snapshot {
    pub(super) files: Vec<SnapshotFile>,
    /// The root's folders that hold nothing, by relative path.
    pub(super) folders: Vec<String>,
    /// Where the host's images and the spooled contents are, when there are any.
    _scratch: Option<Scratch>,
}

pub(super) struct SnapshotFile {
    pub(super) path: String,
    source: Source,
    pub(super) sqlite: bool,
    /// For a plain file, what the file system said of it while it was read, when that can
    /// vouch for the next copy (see [`Seen`]).
    pub(super) seen: Option<Seen>,
}

/// A plain file's size, identity and change times, recorded by a copy that read it: a write
/// moves its `ctime` (whatever it does to `mtime`), so a file that still shows the same is the
/// one that copy read, and the next copy stores it as unchanged without reading or hashing it
/// (a root of many files a host never touches again costs their `stat`s). A file system stamps
/// times at a granularity of its own (a kernel tick, a second, two on FAT): a write right after
/// the read could leave them as they were, so a file changed within [`RACY`] before its read
/// began is not vouched for, and the next copy reads it again (as git's index does with its
/// "racily clean" entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Seen {
    id: (u64, u64),
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// How long before a read a change must lie for the file's times to vouch for it: above every
/// file system's timestamp granularity.
pub(super) const RACY: std::time::Duration = std::time::Duration::from_secs(2);

impl Seen {
    fn of(meta: &fs::Metadata) -> Seen {
        use std::os::unix::fs::MetadataExt;
        Seen {
            id: file_id(meta),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

enum Source {
    /// A file's content, read while the snapshot is taken: the tenant's calls may go on once
    /// it is (see [`EpochCopies::write_copy_with`]).
    Held(Held),
    /// A held database read whole from its file and WAL, and where its WAL then stood.
    Live(Held, WalMark),
    /// A held database whose WAL told what changed since the lineage's last copy: the new
    /// state's block digests, what the copy stores of it, and the blocks that takes. Or a
    /// plain file that its [`Seen`] shows unchanged.
    Changed(Changed),
}

/// Where a snapshot keeps a file's content (see [`super::body`]).
pub(super) enum Held {
    /// A plain file, or a database whose file alone was its whole state while a read
    /// transaction pinned it (see [`read_sqlite`]).
    Bytes(Vec<u8>),
    /// A database's pages as one read transaction saw them (`sqlite3_serialize`), in memory:
    /// no scratch file to write and read back.
    Image(Image),
    /// A file of the scratch folder: a host's image, or a content too large for memory.
    Spooled { path: PathBuf, file: File, len: u64 },
}

impl Held {
    /// A content spooled at `path`, opened once here for every read the copy makes of it.
    pub(super) fn spooled(path: PathBuf, len: u64) -> Result<Held> {
        let file =
            File::open(&path).map_err(|e| Error::io(format!("{} cannot be read", path.display()), &e))?;
        Ok(Held::Spooled { path, file, len })
    }

    fn body(&self) -> Body<'_> {
        match self {
            Held::Bytes(bytes) => Body::Memory(bytes),
            Held::Image(image) => Body::Memory(&image.0),
            Held::Spooled { path, file, len } => Body::Spooled {
                path,
                file,
                len: *len,
            },
        }
    }
}

pub(super) struct Changed {
    pub(super) len: u64,
    pub(super) blocks: Arc<delta::Blocks>,
    pub(super) digest: String,
    /// The file's chain after this copy, whose last delta it stores (`None`: the file is as the
    /// lineage's last copy holds it).
    pub(super) chain: Option<Vec<Arc<Vec<usize>>>>,
    pub(super) content: BTreeMap<usize, Vec<u8>>,
    /// Where the WAL stood, for a held database.
    pub(super) mark: Option<WalMark>,
}

impl Changed {
    /// The state the lineage's last copy holds of the file, as it is.
    fn unchanged(known: &Known, mark: Option<WalMark>) -> Changed {
        Changed {
            len: known.file.size,
            blocks: known.blocks.clone(),
            digest: known.file.digest.clone(),
            chain: None,
            content: BTreeMap::new(),
            mark,
        }
    }
}

/// SQLite's buffer of a serialized database.
pub(super) struct Image(rusqlite::serialize::OwnedData);

// SAFETY: the buffer is plain memory that this value alone owns (SQLite keeps no pointer to
// it after `sqlite3_serialize`); it is only read while shared, and freed once, on drop.
unsafe impl Sync for Image {}

/// What a copy has of one file: its content, or what changed of it.
pub(super) enum Content<'a> {
    Whole(Body<'a>, Option<&'a WalMark>),
    Changed(&'a Changed),
}

impl SnapshotFile {
    /// Whether the copy takes the file as the lineage's last copy holds it, without reading it.
    #[cfg(test)]
    pub(super) fn unread(&self) -> bool {
        matches!(&self.source, Source::Changed(c) if c.chain.is_none() && c.mark.is_none())
    }

    pub(super) fn content(&self) -> Content<'_> {
        match &self.source {
            Source::Held(held) => Content::Whole(held.body(), None),
            Source::Live(held, mark) => Content::Whole(held.body(), Some(mark)),
            Source::Changed(changed) => Content::Changed(changed),
        }
    }
}

impl Snapshot {
    /// `lineage`: the files of the last copy, whose WAL marks let a held database be read from
    /// the frames since.
    pub(super) fn take(
        root: &Path,
        host: Option<&HostSnapshot>,
        lineage: Option<&Lineage>,
    ) -> Result<Snapshot> {
        assert_path("a tenant root", root)?;
        let mut paths = Vec::new();
        let mut folders = Vec::new();
        collect_files(root, "", &mut paths, &mut folders)?;
        folders.sort();
        paths.sort();
        let present: BTreeSet<&str> = paths.iter().map(String::as_str).collect();
        // Listed before this function opens anything of the root, and everything it opens
        // is closed again before the next file: every match is someone else's handle.
        let held = match lineage.and_then(|lineage| held_as_before(root, &present, lineage)) {
            Some(held) => held,
            None => held_elsewhere(root, &paths)?,
        };
        let mut scratch: Option<Scratch> = None;
        let mut spool = Spool::new(root, &mut scratch);
        let mut files = Vec::new();
        for path in &paths {
            // A database's journal and WAL are inside its image.
            if let Some(db) = sidecar_of(path).filter(|db| present.contains(db)) {
                if held.contains_key(db) || is_sqlite(&root.join(db)) {
                    continue;
                }
            }
            let source = root.join(path);
            if let Some(held) = held.get(path.as_str()) {
                let Some(host) = host else {
                    return Err(open_in_process_error(
                        &source,
                        "copied",
                        "Close it first, or give the copies a host snapshot function that reads it \
                         through the library that has it open",
                    ));
                };
                let known = lineage.and_then(|l| l.get(path));
                if let Some(source) = read_held(held, &root.join(format!("{path}-wal")), known, &mut spool)? {
                    files.push(SnapshotFile {
                        path: path.clone(),
                        sqlite: true,
                        source,
                        seen: None,
                    });
                    continue;
                }
                let image = spool.path()?;
                host(&source, &image)?;
                let len = fs::metadata(&image)
                    .map_err(|e| Error::io(format!("{} cannot be read", image.display()), &e))?
                    .len();
                files.push(SnapshotFile {
                    path: path.clone(),
                    sqlite: is_sqlite(&image),
                    source: Source::Held(Held::spooled(image, len)?),
                    seen: None,
                });
            } else if is_sqlite(&source) {
                files.push(SnapshotFile {
                    path: path.clone(),
                    source: Source::Held(read_sqlite(&source, &mut spool)?),
                    sqlite: true,
                    seen: None,
                });
            } else {
                let (source, seen) = read_plain(&source, lineage.and_then(|l| l.get(path)), &mut spool)?;
                files.push(SnapshotFile {
                    path: path.clone(),
                    source,
                    sqlite: false,
                    seen,
                });
            }
        }
        Ok(Snapshot {
            files,
            folders,
            _scratch: scratch,
        })
    }
}

/// A file's identity, whatever path or descriptor reaches it.
fn file_id(meta: &fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// The database `path` is the journal, WAL or shared memory of, by its name.
fn sidecar_of(path: &str) -> Option<&str> {
    ["-wal", "-shm", "-journal"]
        .iter()
        .find_map(|suffix| path.strip_suffix(suffix))
}

/// What [`held_elsewhere`] would find, told by the lineage's last copy without listing every
/// descriptor of the process (a walk of `/proc/self/fd`, a `fstat` each, at every copy of a
/// busy host): when each of `paths` is a database that copy read through the host's
/// descriptor, and that descriptor still names it, or a sidecar of one. `None` otherwise (a
/// file this copy may open must be known not to be held, which only the whole list tells).
fn held_as_before<'a>(
    root: &Path,
    paths: &BTreeSet<&'a str>,
    lineage: &Lineage,
) -> Option<HashMap<&'a str, HostFile>> {
    let through = |path: &str| Some(lineage.get(path)?.wal.as_ref()?.host());
    let mut held = HashMap::new();
    for &path in paths {
        if let Some(host) = through(path) {
            let meta = fs::symlink_metadata(root.join(path)).ok()?;
            if !host.still_names(file_id(&meta)) {
                return None;
            }
            held.insert(path, host.clone());
        } else if !sidecar_of(path).is_some_and(|db| paths.contains(db) && through(db).is_some()) {
            return None;
        }
    }
    Some(held)
}

/// The files among `paths` (relative to `root`) that a descriptor of this process has open,
/// each with one such descriptor. A file gone since the listing is nobody's: a writer in
/// rollback mode deletes its journal at every commit, and a copy taken meanwhile must not fail
/// on it.
fn held_elsewhere<'a>(root: &Path, paths: &'a [String]) -> Result<HashMap<&'a str, HostFile>> {
    if paths.is_empty() {
        return Ok(HashMap::new());
    }
    let open = open_in_process()?;
    let mut held = HashMap::new();
    for path in paths {
        let source = root.join(path);
        match fs::symlink_metadata(&source) {
            Ok(meta) if open.contains_key(&file_id(&meta)) => {
                let id = file_id(&meta);
                held.insert(path.as_str(), HostFile::new(open[&id], id));
            }
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("{} cannot be read", source.display()), &e)),
        }
    }
    Ok(held)
}

/// Every file this process has open, by identity, with one descriptor of it. Unreadable
/// `/proc` is an error, not an empty set: guessing "nothing is open" is how a host's WAL gets
/// deleted.
fn open_in_process() -> Result<HashMap<(u64, u64), RawFd>> {
    let fds = Path::new("/proc/self/fd");
    let entries = fs::read_dir(fds).map_err(|e| {
        Error::io(
            format!(
                "{} cannot be listed, so a copy cannot tell which files this process has open",
                fds.display()
            ),
            &e,
        )
    })?;
    let mut open = HashMap::new();
    for entry in entries.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse::<RawFd>().ok()) else {
            continue;
        };
        // `fstat` of the number, not a `stat` of its /proc link, which walks a path for every
        // descriptor of the host's process at every copy. A descriptor closed since the listing
        // (EBADF) has nothing to tell; one opened again under its number is open now.
        let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `fstat` writes a whole `stat` into the buffer it is given, or fails.
        if unsafe { libc::fstat(fd, stat.as_mut_ptr()) } == 0 {
            // SAFETY: written by the successful call above.
            let stat = unsafe { stat.assume_init() };
            open.insert((stat.st_dev, stat.st_ino), fd);
        }
    }
    Ok(open)
}

fn open_in_process_error(path: &Path, what: &str, remedy: &str) -> Error {
    Error::OpenInProcess {
        message: format!(
            "{} is open through another handle in this process, so it cannot be {what} here: \
             this library's SQLite would release that handle's locks and could delete its WAL. \
             {remedy}",
            path.display()
        ),
    }
}

/// Refuses to replace a tenant root while the host still has a file in it open: the host
/// would go on writing into a file that is no longer the tenant's.
pub(super) fn assert_root_not_open(root: &Path) -> Result<()> {
    assert_path("a tenant root", root)?;
    if !root.is_dir() {
        return Ok(());
    }
    let mut paths = Vec::new();
    super::restore::regular_files(root, "", &mut paths)?;
    match held_elsewhere(root, &paths)?.into_keys().min() {
        Some(path) => Err(open_in_process_error(
            &root.join(path),
            "replaced by a restore",
            "Close every file of the tenant root before restoring into it",
        )),
        None => Ok(()),
    }
}

/// The files under `dir` (paths relative to it), and, in `empty`, the folders that hold
/// nothing, which a copy keeps too (a host may count on a folder it made being there).
pub(super) fn collect_files(
    dir: &Path,
    relative: &str,
    out: &mut Vec<String>,
    empty: &mut Vec<String>,
) -> Result<()> {
    let entries = fs::read_dir(dir)
        .map_err(|e| Error::io(format!("{} cannot be listed", crate::paths::shown(dir)), &e))?;
    for entry in entries {
        let entry =
            entry.map_err(|e| Error::io(format!("{} cannot be listed", crate::paths::shown(dir)), &e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(Error::invalid_argument(format!(
                "{}: a file name in a tenant root is not UTF-8, so no copy could name it",
                crate::paths::shown(&entry.path())
            )));
        };
        let path = if relative.is_empty() {
            name.to_owned()
        } else {
            format!("{relative}/{name}")
        };
        let kind = entry
            .file_type()
            .map_err(|e| Error::io(format!("{path} cannot be read"), &e))?;
        if kind.is_dir() {
            let found = (out.len(), empty.len());
            collect_files(&entry.path(), &path, out, empty)?;
            if (out.len(), empty.len()) == found {
                empty.push(path);
            }
        } else if kind.is_file() {
            out.push(path);
        } else {
            return Err(Error::invalid_argument(format!(
                "{path} in a tenant root is neither a file nor a folder; a copy cannot hold it"
            )));
        }
    }
    Ok(())
}

/// A database the host holds, read without its library where its WAL allows (see
/// [`super::wal`]): from the frames since the lineage's last copy when that copy left a mark
/// and the changed blocks make a delta, else whole from the file and the WAL. `None` where
/// neither applies (rollback journal mode, an empty WAL, a page size under a block, a writer
/// that kept committing), and the host's snapshot function reads it.
fn read_held(
    host: &HostFile,
    wal_path: &Path,
    known: Option<&Known>,
    spool: &mut Spool<'_>,
) -> Result<Option<Source>> {
    if let Some((known, mark)) = known
        .filter(|k| k.file.sqlite)
        .and_then(|k| Some((k, k.wal.as_ref()?)))
    {
        match super::wal::read_tail(host, wal_path, mark)? {
            Since::Nothing => {
                return Ok(Some(Source::Changed(Changed::unchanged(
                    known,
                    Some(mark.clone()),
                ))))
            }
            Since::Commits(tail) => {
                if let Some(changed) = changed_since(host, wal_path, known, tail)? {
                    return Ok(Some(Source::Changed(changed)));
                }
            }
            Since::Unknown => {}
        }
    }
    Ok(super::wal::read_whole(host, wal_path, spool)?.map(|(image, mark)| Source::Live(image, mark)))
}

/// The new state of a held database from its WAL's tail: `None` when it takes a new base (read
/// whole then) or the WAL moved on while the blocks were read.
fn changed_since(
    host: &HostFile,
    wal_path: &Path,
    known: &Known,
    tail: super::wal::Tail,
) -> Result<Option<Changed>> {
    let per_page = tail.page_size / delta::BLOCK;
    let count = usize::try_from(tail.len).unwrap_or(usize::MAX) / delta::BLOCK;
    let old = known.blocks.len();
    let mut written = BTreeMap::new();
    let mut content = BTreeMap::new();
    let mut take = |index: usize, bytes: &[u8], content: &mut BTreeMap<usize, Vec<u8>>| {
        written.insert(index, Sha256::digest(bytes).into());
        content.insert(index, bytes.to_vec());
    };
    let page_blocks = |pgno: u32| (pgno as usize - 1) * per_page..pgno as usize * per_page;
    for (&pgno, page) in &tail.pages {
        for (index, bytes) in page_blocks(pgno).zip(page.chunks(delta::BLOCK)) {
            take(index, bytes, &mut content);
        }
    }
    // Pages the database grew by without a frame read as SQLite reads them.
    for index in old..count {
        if !content.contains_key(&index) {
            let pgno = (index / per_page + 1) as u32;
            let page = tail.page(host, wal_path, pgno)?;
            for (index, bytes) in page_blocks(pgno).zip(page.chunks(delta::BLOCK)) {
                if index >= old {
                    take(index, bytes, &mut content);
                }
            }
        }
    }
    let blocks = known.blocks.with_written(count, &written);
    let digest = blocks.file_digest(tail.len);
    let chain = match next_step(Some(known), &blocks, tail.len, &digest, true) {
        Step::Base => return Ok(None),
        Step::Same => None,
        Step::Delta(chain) => Some(chain),
    };
    let Some(stored) = chain.as_ref().and_then(|c| c.last()) else {
        return Ok(Some(Changed {
            len: tail.len,
            blocks: Arc::new(blocks),
            digest,
            chain,
            content: BTreeMap::new(),
            mark: Some(tail.mark),
        }));
    };
    let mut needed = BTreeMap::new();
    // A page holds `per_page` blocks: read once, whichever of them the delta takes.
    let mut read: HashMap<u32, Vec<u8>> = HashMap::new();
    for &index in stored.iter() {
        let bytes = match content.remove(&index) {
            Some(bytes) => bytes,
            None => {
                let pgno = (index / per_page + 1) as u32;
                let page = match read.entry(pgno) {
                    std::collections::hash_map::Entry::Occupied(page) => page.into_mut(),
                    std::collections::hash_map::Entry::Vacant(slot) => {
                        slot.insert(tail.page(host, wal_path, pgno)?)
                    }
                };
                let at = (index % per_page) * delta::BLOCK;
                page[at..at + delta::BLOCK].to_vec()
            }
        };
        needed.insert(index, bytes);
    }
    if !tail.still_holds(host, wal_path)? {
        return Ok(None);
    }
    Ok(Some(Changed {
        len: tail.len,
        blocks: Arc::new(blocks),
        digest,
        chain,
        content: needed,
        mark: Some(tail.mark),
    }))
}

/// A plain file: unchanged when the lineage's last copy saw it as it still is, else read
/// whole, with what the file system says of it when that can vouch for the next copy.
fn read_plain(source: &Path, known: Option<&Known>, spool: &mut Spool<'_>) -> Result<(Source, Option<Seen>)> {
    let unreadable = |e: std::io::Error| Error::io(format!("{} cannot be read", source.display()), &e);
    let began = std::time::SystemTime::now();
    let before = Seen::of(&fs::symlink_metadata(source).map_err(unreadable)?);
    if let Some(known) = known.filter(|k| !k.file.sqlite && k.seen == Some(before)) {
        return Ok((Source::Changed(Changed::unchanged(known, None)), Some(before)));
    }
    let held = if before.len <= IN_MEMORY {
        Held::Bytes(fs::read(source).map_err(unreadable)?)
    } else {
        let file = File::open(source).map_err(unreadable)?;
        // A file cut shorter while it is read is being written: it is read once more as it
        // is then, and a file still moving after that is a host that does not keep its files
        // still during a copy.
        let mut len = before.len;
        let mut spooled = spool.copy(&file, len, source)?;
        if spooled.is_none() {
            len = file.metadata().map_err(unreadable)?.len();
            spooled = spool.copy(&file, len, source)?;
        }
        let Some(path) = spooled else {
            return Err(Error::io(
                format!("{} kept changing while it was copied", source.display()),
                &std::io::Error::from(ErrorKind::UnexpectedEof),
            ));
        };
        Held::spooled(path, len)?
    };
    let after = Seen::of(&fs::symlink_metadata(source).map_err(unreadable)?);
    let settled = began
        .checked_sub(RACY)
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|t| Some((i64::try_from(t.as_secs()).ok()?, i64::from(t.subsec_nanos()))))
        .is_some_and(|before_racy| after.ctime < before_racy);
    let vouched = (before == after && settled).then_some(after);
    Ok((Source::Held(held), vouched))
}

fn is_sqlite(path: &Path) -> bool {
    let mut header = [0u8; 16];
    File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut header))
        .is_ok_and(|()| &header == SQLITE_HEADER)
}

/// The database at `source` as one read transaction sees it. A writer in WAL mode goes on
/// meanwhile; a rollback-journal writer is waited for (busy timeout).
///
/// When the transaction finds no WAL frames (a rollback-journal database, or a WAL that is
/// empty), the file itself is that state and stays so until the transaction ends: a
/// rollback writer needs the lock the transaction shares, and a checkpoint may not write
/// into the file while a reader that ignores the WAL holds its read lock, nor empty a WAL
/// that a reader of its frames still uses. Then the file is read in one go (a few
/// milliseconds for tens of megabytes, where SQLite's pager takes three to five times as
/// long, page by page). Otherwise the pages come through the pager (`sqlite3_serialize`),
/// so that those still in the WAL are in the image.
fn read_sqlite(source: &Path, spool: &mut Spool<'_>) -> Result<Held> {
    use rusqlite::{serialize::Data, Connection, OpenFlags, MAIN_DB};
    let sqlite = |e: rusqlite::Error| sqlite_failure(source, e);
    let unreadable = |e: std::io::Error| Error::io(format!("{} cannot be read", source.display()), &e);
    let mut from = Connection::open_with_flags(
        source,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sqlite)?;
    from.busy_timeout(SNAPSHOT_LOCK_WAIT).map_err(sqlite)?;
    from.execute_batch("BEGIN").map_err(sqlite)?;
    let pages: i64 = from
        .query_row("PRAGMA page_count", [], |row| row.get(0))
        .map_err(sqlite)?;
    let page_size: i64 = from
        .query_row("PRAGMA page_size", [], |row| row.get(0))
        .map_err(sqlite)?;
    let len = pages
        .checked_mul(page_size)
        .and_then(|len| u64::try_from(len).ok())
        .unwrap_or(u64::MAX);
    let mut wal = source.as_os_str().to_owned();
    wal.push("-wal");
    let wal_is_empty = match fs::metadata(&wal) {
        Ok(meta) => meta.len() == 0,
        Err(e) => e.kind() == ErrorKind::NotFound,
    };
    // Anything but a file of exactly its pages (one longer than they say) goes through the pager.
    if wal_is_empty && len <= IN_MEMORY {
        let bytes = fs::read(source).map_err(unreadable)?;
        if bytes.len() as u64 == len {
            return Ok(Held::Bytes(bytes));
        }
    } else if wal_is_empty {
        let file = File::open(source).map_err(unreadable)?;
        if file.metadata().map_err(unreadable)?.len() == len {
            if let Some(path) = spool.copy(&file, len, source)? {
                return Held::spooled(path, len);
            }
        }
    }
    if len > IN_MEMORY {
        let image = spool.path()?;
        backup_from(&from, source, &image)?;
        let len = fs::metadata(&image).map_err(unreadable)?.len();
        return Held::spooled(image, len);
    }
    let image = match from.serialize(MAIN_DB).map_err(sqlite)? {
        Data::Owned(image) => image,
        // Only an in-memory database lends its own buffer, and a root holds files.
        Data::Shared(_) => {
            return Err(Error::Storage {
                code: "SQLITE_MISUSE".to_owned(),
                message: format!(
                    "{}: SQLite lent its buffer instead of copying it",
                    source.display()
                ),
            })
        }
    };
    Ok(Held::Image(Image(image)))
}

pub(super) fn backup_sqlite(source: &Path, image: &Path) -> Result<()> {
    use rusqlite::{Connection, OpenFlags};
    let from = Connection::open_with_flags(
        source,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| sqlite_failure(source, e))?;
    from.busy_timeout(SNAPSHOT_LOCK_WAIT)
        .map_err(|e| sqlite_failure(source, e))?;
    backup_from(&from, source, image)
}

/// Writes the database `from` has open (at `source`) to a fresh file `image`, page for page,
/// as one read transaction sees it: the caller's own, when it holds one.
fn backup_from(from: &rusqlite::Connection, source: &Path, image: &Path) -> Result<()> {
    use rusqlite::{backup::Backup, Connection};
    let sqlite = |e: rusqlite::Error| sqlite_failure(source, e);
    let mut to = Connection::open(image).map_err(sqlite)?;
    // The image is scratch, read once and thrown away: flushing it would only double the
    // disk's work (the copy is made durable where it is stored).
    to.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")
        .map_err(sqlite)?;
    // One step of every page holds one read transaction for the whole image: a writer in WAL
    // mode goes on, and the image is that transaction's state.
    let backup = Backup::new(from, &mut to).map_err(sqlite)?;
    let deadline = std::time::Instant::now() + SNAPSHOT_LOCK_WAIT;
    loop {
        match backup.step(-1).map_err(sqlite)? {
            rusqlite::backup::StepResult::Done => return Ok(()),
            _ if std::time::Instant::now() >= deadline => {
                return Err(Error::Storage {
                    code: "SQLITE_BUSY".to_owned(),
                    message: format!(
                        "{}: the database stayed locked for the whole backup timeout",
                        source.display()
                    ),
                })
            }
            _ => std::thread::sleep(std::time::Duration::from_millis(5)),
        }
    }
}

pub(super) fn sqlite_failure(path: &Path, error: rusqlite::Error) -> Error {
    let code = match &error {
        rusqlite::Error::SqliteFailure(e, _) => sqlite_code_name(e.extended_code),
        _ => "SQLITE_ERROR",
    };
    Error::Storage {
        code: code.to_owned(),
        message: format!("{}: {error}", crate::paths::shown(path)),
    }
}
