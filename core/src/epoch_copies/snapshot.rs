//! Taking a consistent image of a tenant root. SQLite files are read through one read
//! transaction of this library's SQLite, other files as they are. A file that another handle of
//! this process has open is never opened here (the module doc says why): the descriptors in
//! `/proc/self/fd` tell which, and such a file goes to the host's [`HostSnapshot`]. The same
//! check refuses a restore into a root whose files the host still has open.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::ErrorKind;
use std::path::PathBuf;

use super::*;
use crate::lease_store::sqlite::sqlite_code_name;
use crate::paths::assert_path;

/// How long a snapshot waits for a rollback-mode writer's lock before it gives up with
/// SQLITE_BUSY, the core's and a host's snapshot function alike: the SQLite lease store's
/// default, so a copy is as patient as a lease operation.
pub const SNAPSHOT_LOCK_WAIT: std::time::Duration = crate::lease_store::sqlite::DEFAULT_BUSY_TIMEOUT;

/// A consistent set of files to copy: SQLite databases backed up into a scratch folder,
/// other files read in place.
pub(super) struct Snapshot {
    pub(super) files: Vec<SnapshotFile>,
    /// Where the host's images are, when it wrote any.
    _scratch: Option<Scratch>,
}

pub(super) struct SnapshotFile {
    pub(super) path: String,
    source: Source,
    pub(super) sqlite: bool,
}

enum Source {
    /// A host's image in the scratch folder, read when it is stored.
    File(PathBuf),
    /// A file's bytes, read while the snapshot is taken: the tenant's calls may go on once it
    /// is (see [`EpochCopies::write_copy_with`]). A plain file, or a database whose file alone
    /// was its whole state while a read transaction pinned it (see [`read_sqlite`]).
    Bytes(Vec<u8>),
    /// A database's pages as one read transaction saw them (`sqlite3_serialize`), in memory:
    /// no scratch file to write and read back.
    Image(Image),
}

/// SQLite's buffer of a serialized database.
struct Image(rusqlite::serialize::OwnedData);

// SAFETY: the buffer is plain memory that this value alone owns (SQLite keeps no pointer to
// it after `sqlite3_serialize`); it is only read while shared, and freed once, on drop.
unsafe impl Sync for Image {}

impl SnapshotFile {
    pub(super) fn content(&self) -> Result<std::borrow::Cow<'_, [u8]>> {
        match &self.source {
            Source::File(path) => fs::read(path)
                .map(std::borrow::Cow::Owned)
                .map_err(|e| Error::io(format!("{} cannot be read", self.path), &e)),
            Source::Image(image) => Ok(std::borrow::Cow::Borrowed(&image.0)),
            Source::Bytes(bytes) => Ok(std::borrow::Cow::Borrowed(bytes)),
        }
    }
}

impl Snapshot {
    pub(super) fn take(root: &Path, host: Option<&HostSnapshot>) -> Result<Snapshot> {
        assert_path("a tenant root", root)?;
        let mut paths = Vec::new();
        collect_files(root, "", &mut paths)?;
        paths.sort();
        // Listed before this function opens anything of the root, and everything it opens
        // is closed again before the next file: every match is someone else's handle.
        let held = held_elsewhere(root, &paths)?;
        let present: BTreeSet<&str> = paths.iter().map(String::as_str).collect();
        let mut scratch: Option<Scratch> = None;
        let mut files = Vec::new();
        for path in &paths {
            // A database's journal and WAL are inside its image.
            let sidecar_of = ["-wal", "-shm", "-journal"]
                .iter()
                .find_map(|suffix| path.strip_suffix(suffix))
                .filter(|db| present.contains(db));
            if let Some(db) = sidecar_of {
                if held.contains(db) || is_sqlite(&root.join(db)) {
                    continue;
                }
            }
            let source = root.join(path);
            if held.contains(path.as_str()) {
                let Some(host) = host else {
                    return Err(open_in_process_error(
                        &source,
                        "copied",
                        "Close it first, or give the copies a host snapshot function that reads it \
                         through the library that has it open",
                    ));
                };
                let scratch = match &mut scratch {
                    Some(scratch) => scratch,
                    None => scratch.insert(Scratch::beside(root)?),
                };
                let image = scratch.path.join(format!("{:06}", files.len()));
                host(&source, &image)?;
                files.push(SnapshotFile {
                    path: path.clone(),
                    sqlite: is_sqlite(&image),
                    source: Source::File(image),
                });
            } else if is_sqlite(&source) {
                files.push(SnapshotFile {
                    path: path.clone(),
                    source: read_sqlite(&source)?,
                    sqlite: true,
                });
            } else {
                let bytes = fs::read(&source)
                    .map_err(|e| Error::io(format!("{} cannot be read", source.display()), &e))?;
                files.push(SnapshotFile {
                    path: path.clone(),
                    source: Source::Bytes(bytes),
                    sqlite: false,
                });
            }
        }
        Ok(Snapshot {
            files,
            _scratch: scratch,
        })
    }
}

/// A file's identity, whatever path or descriptor reaches it.
fn file_id(meta: &fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// The files among `paths` (relative to `root`) that a descriptor of this process has open.
/// A file gone since the listing is nobody's: a writer in rollback mode deletes its journal
/// at every commit, and a copy taken meanwhile must not fail on it.
fn held_elsewhere<'a>(root: &Path, paths: &'a [String]) -> Result<HashSet<&'a str>> {
    if paths.is_empty() {
        return Ok(HashSet::new());
    }
    let open = open_in_process()?;
    let mut held = HashSet::new();
    for path in paths {
        let source = root.join(path);
        match fs::symlink_metadata(&source) {
            Ok(meta) if open.contains(&file_id(&meta)) => {
                held.insert(path.as_str());
            }
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("{} cannot be read", source.display()), &e)),
        }
    }
    Ok(held)
}

/// Every file this process has open, by identity. Unreadable `/proc` is an error, not an
/// empty set: guessing "nothing is open" is how a host's WAL gets deleted.
fn open_in_process() -> Result<HashSet<(u64, u64)>> {
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
    let mut open = HashSet::new();
    for entry in entries.flatten() {
        // A descriptor closed since the listing has nothing to tell.
        if let Ok(meta) = fs::metadata(entry.path()) {
            open.insert(file_id(&meta));
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
    match held_elsewhere(root, &paths)?.into_iter().min() {
        Some(path) => Err(open_in_process_error(
            &root.join(path),
            "replaced by a restore",
            "Close every file of the tenant root before restoring into it",
        )),
        None => Ok(()),
    }
}

pub(super) fn collect_files(dir: &Path, relative: &str, out: &mut Vec<String>) -> Result<()> {
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
            collect_files(&entry.path(), &path, out)?;
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
fn read_sqlite(source: &Path) -> Result<Source> {
    use rusqlite::{serialize::Data, Connection, OpenFlags, MAIN_DB};
    let sqlite = |e: rusqlite::Error| sqlite_failure(source, e);
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
    let mut wal = source.as_os_str().to_owned();
    wal.push("-wal");
    let wal_is_empty = match fs::metadata(&wal) {
        Ok(meta) => meta.len() == 0,
        Err(e) => e.kind() == ErrorKind::NotFound,
    };
    if wal_is_empty {
        let bytes =
            fs::read(source).map_err(|e| Error::io(format!("{} cannot be read", source.display()), &e))?;
        // Anything else (a file longer than its pages say) goes through the pager.
        if i64::try_from(bytes.len()).ok() == pages.checked_mul(page_size) {
            return Ok(Source::Bytes(bytes));
        }
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
    Ok(Source::Image(Image(image)))
}

pub(super) fn backup_sqlite(source: &Path, image: &Path) -> Result<()> {
    use rusqlite::{backup::Backup, Connection, OpenFlags};
    let sqlite = |e: rusqlite::Error| sqlite_failure(source, e);
    let from = Connection::open_with_flags(
        source,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sqlite)?;
    from.busy_timeout(SNAPSHOT_LOCK_WAIT).map_err(sqlite)?;
    let mut to = Connection::open(image).map_err(sqlite)?;
    // The image is scratch, read once and thrown away: flushing it would only double the
    // disk's work (the copy is made durable where it is stored).
    to.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")
        .map_err(sqlite)?;
    // One step of every page holds one read transaction for the whole image: a writer in WAL
    // mode goes on, and the image is that transaction's state.
    let backup = Backup::new(&from, &mut to).map_err(sqlite)?;
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
