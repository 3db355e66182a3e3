//! The restore's side on the tenant's disk. A copy is fetched into a private scratch folder
//! beside the tenant root, on the same file system, each database checked in place on its
//! bytes in memory (`Restored`), so that bytes failing a check never reach the root. The
//! verified folder, flushed file by file and folder by folder, then takes the root's place in
//! one step, so that a crash leaves either the old root or the restored one, never a mix
//! (where the file system cannot swap two paths, the old root is moved aside first: a crash in
//! between leaves no root, which the next restore fills again).

use std::fs::{self, File};
use std::io::{ErrorKind, Write as _};
use std::path::{Component, PathBuf};

use super::snapshot::collect_files;
use super::*;
use crate::durable_store::dir::{random_u64, sync_dir};

/// A verified copy waiting in its scratch folder (none for an empty start).
pub(super) struct Staged {
    pub(super) scratch: Option<Scratch>,
    pub(super) report: RestoreReport,
}

impl Staged {
    /// Puts the staged state in place of `root` in one step, so that a crash leaves either
    /// the old root or the restored one, never a mix.
    pub(super) fn install(self, root: &Path) -> Result<RestoreReport> {
        let scratch = match self.scratch {
            Some(scratch) => scratch,
            None => Scratch::beside(root)?,
        };
        sync_tree(&scratch.path)?;
        let parent = parent_of(root)?;
        match fs::symlink_metadata(root) {
            Ok(meta) if meta.is_dir() => exchange(&scratch.path, root)?,
            Ok(_) => {
                return Err(Error::invalid_argument(format!(
                    "{} is not a folder: a restore replaces a tenant root, never a file or a link",
                    root.display()
                )))
            }
            Err(e) if e.kind() == ErrorKind::NotFound => fs::rename(&scratch.path, root)
                .map_err(|e| Error::io(format!("{} cannot be put in place", root.display()), &e))?,
            Err(e) => return Err(Error::io(format!("{} cannot be read", root.display()), &e)),
        }
        // The scratch folder now holds the old root; dropping it removes that.
        sync_dir(parent).map_err(as_local)?;
        drop(scratch);
        Ok(self.report)
    }
}

/// Swaps two paths atomically (`renameat2(RENAME_EXCHANGE)`), or, where the file system
/// cannot, moves the old one aside first: then a crash in between leaves no root, which the
/// next restore fills again.
fn exchange(a: &Path, b: &Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).expect("paths hold no NUL");
    let (ca, cb) = (c(a), c(b));
    // SAFETY: both are valid NUL-terminated paths that outlive the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
    if !matches!(
        error.raw_os_error(),
        Some(libc::EINVAL | libc::ENOSYS | libc::ENOTSUP)
    ) {
        return Err(Error::io(format!("{} cannot be replaced", b.display()), &error));
    }
    let mut aside = a.as_os_str().to_owned();
    aside.push(".old");
    fs::rename(b, &aside)
        .and_then(|()| fs::rename(a, b))
        .and_then(|()| fs::rename(&aside, a))
        .map_err(|e| Error::io(format!("{} cannot be replaced", b.display()), &e))
}

/// A private folder beside a path (same file system, so it can be renamed into place),
/// removed with whatever it holds when dropped.
pub(super) struct Scratch {
    pub(super) path: PathBuf,
}

impl Scratch {
    pub(super) fn beside(path: &Path) -> Result<Scratch> {
        let parent = parent_of(path)?;
        fs::create_dir_all(parent)
            .map_err(|e| Error::io(format!("{} cannot be created", parent.display()), &e))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        loop {
            let candidate = parent.join(format!(".{name}.gotry-{:016x}", random_u64()));
            match fs::create_dir(&candidate) {
                Ok(()) => return Ok(Scratch { path: candidate }),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(Error::io(
                        format!("{} cannot be created", candidate.display()),
                        &e,
                    ))
                }
            }
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// An object's bytes as restored: a database's header is set in place to say "rollback
/// journal" (bytes 18 and 19), which changes no page and lets SQLite's in-memory VFS, which
/// has no WAL, read the buffer itself: no second copy of the database is made for its check.
/// [`Restored::stored`] gives the bytes as they were copied, for the hash and the file.
pub(super) struct Restored {
    bytes: Vec<u8>,
    /// Bytes 18 and 19 as stored, where they were set.
    header: Option<[u8; 2]>,
}

impl Restored {
    const HEADER: usize = 100;

    pub(super) fn read_in_place(mut bytes: Vec<u8>, sqlite: bool) -> Restored {
        let header = (sqlite && bytes.len() >= Restored::HEADER).then(|| {
            let stored = [bytes[18], bytes[19]];
            bytes[18..20].copy_from_slice(&[1, 1]);
            stored
        });
        Restored { bytes, header }
    }

    pub(super) fn stored(&self) -> [&[u8]; 3] {
        match &self.header {
            Some(stored) => [&self.bytes[..18], stored, &self.bytes[20..]],
            None => [&self.bytes, &[], &[]],
        }
    }

    /// Whether the database passes `PRAGMA integrity_check`, read from the buffer in place.
    pub(super) fn integrity_ok(&self) -> bool {
        self.passes("integrity_check")
    }

    /// Whether the database passes `PRAGMA <pragma>` (`integrity_check` or `quick_check`).
    pub(super) fn passes(&self, pragma: &str) -> bool {
        use rusqlite::{ffi, Connection};
        if self.bytes.is_empty() {
            return true;
        }
        if self.header.is_none() {
            return false;
        }
        let Ok(size) = i64::try_from(self.bytes.len()) else {
            return false;
        };
        let check = || -> rusqlite::Result<bool> {
            let db = Connection::open_in_memory()?;
            // SAFETY: a read-only deserialize without FREEONCLOSE: SQLite only reads the
            // buffer, never resizes or frees it, and `db`, dropped before this closure
            // returns, is the only user of it, while `self` is borrowed.
            let rc = unsafe {
                ffi::sqlite3_deserialize(
                    db.handle(),
                    c"main".as_ptr(),
                    self.bytes.as_ptr().cast_mut(),
                    size,
                    size,
                    ffi::SQLITE_DESERIALIZE_READONLY,
                )
            };
            if rc != ffi::SQLITE_OK {
                return Ok(false);
            }
            let verdict: String = db.query_row(&format!("PRAGMA {pragma}"), [], |row| row.get(0))?;
            Ok(verdict == "ok")
        };
        check().unwrap_or(false)
    }
}

pub(super) fn write_durably(path: &Path, pieces: &[&[u8]]) -> Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| Error::io(format!("{} cannot be created", parent.display()), &e))?;
    }
    let mut file =
        File::create(path).map_err(|e| Error::io(format!("{} cannot be created", path.display()), &e))?;
    pieces
        .iter()
        .try_for_each(|piece| file.write_all(piece))
        .and_then(|()| file.sync_data())
        .map_err(|e| Error::io(format!("{} cannot be written", path.display()), &e))
}

/// Flushes every folder of a restored tree, so the rename that installs it publishes names
/// that survive power loss.
fn sync_tree(dir: &Path) -> Result<()> {
    for entry in
        fs::read_dir(dir).map_err(|e| Error::io(format!("{} cannot be listed", dir.display()), &e))?
    {
        let entry = entry.map_err(|e| Error::io(format!("{} cannot be listed", dir.display()), &e))?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            sync_tree(&entry.path())?;
        }
    }
    sync_dir(dir).map_err(as_local)
}

pub(super) fn tree_size(dir: &Path) -> Result<(usize, u64)> {
    let mut files = Vec::new();
    collect_files(dir, "", &mut files)?;
    let mut bytes = 0;
    for file in &files {
        bytes += fs::metadata(dir.join(file))
            .map_err(|e| Error::io(format!("{file} cannot be read"), &e))?
            .len();
    }
    Ok((files.len(), bytes))
}

/// `sync_dir` speaks for the durable store; on the tenant's own disk it is a storage error.
fn as_local(error: Error) -> Error {
    match error {
        Error::DurableStoreUnavailable {
            message,
            backend_code,
        } => Error::Storage {
            code: backend_code,
            message,
        },
        other => other,
    }
}

/// The folder that holds `path`; `.` for a bare relative name.
fn parent_of(path: &Path) -> Result<&Path> {
    match path.parent() {
        Some(parent) if parent.as_os_str().is_empty() => Ok(Path::new(".")),
        Some(parent) => Ok(parent),
        None => Err(Error::invalid_argument(format!(
            "{} has no parent folder",
            path.display()
        ))),
    }
}

/// A manifest path as a relative path of plain names: never absolute, never `..`.
pub(super) fn relative_path(path: &str) -> Option<PathBuf> {
    let parsed = Path::new(path);
    let plain = !path.is_empty()
        && !path.contains('\\')
        && parsed.components().all(|c| matches!(c, Component::Normal(_)));
    plain.then(|| parsed.to_path_buf())
}
