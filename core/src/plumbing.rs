//! The bottom of the crate: file and SQLite plumbing that every layer uses and that imports nothing of
//! theirs (Litestream's `internal/`). A layer maps these `std::io` results to its own failure:
//! the durable store's, or the tenant disk's.

use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// How long an operation waits for another process's write lock, as in the reference.
pub const DEFAULT_BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(5_000);

/// Flushes a folder's entries (a file created, renamed or removed in it), without which a
/// power cut can take back a name whose content was flushed.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(test)]
    synced::record(dir);
    File::open(dir).and_then(|d| d.sync_all())
}

/// The folders this thread flushed, for the tests that prove a folder is durable before an
/// object under it is acknowledged.
#[cfg(test)]
pub(crate) mod synced {
    use std::cell::RefCell;
    use std::path::{Path, PathBuf};

    thread_local!(static SYNCED: RefCell<Vec<PathBuf>> = const { RefCell::new(Vec::new()) });

    pub(crate) fn record(dir: &Path) {
        SYNCED.with(|s| s.borrow_mut().push(dir.to_path_buf()));
    }

    /// What was flushed since the last call.
    pub(crate) fn take() -> Vec<PathBuf> {
        SYNCED.with(|s| std::mem::take(&mut *s.borrow_mut()))
    }
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

/// Takes `file`'s exclusive lock, waiting for a sweep that holds it, and tells whether
/// `path` still names the file: `false` when a sweep removed it first.
pub(crate) fn hold_lock(path: &Path, file: &File) -> std::io::Result<bool> {
    flock(file, libc::LOCK_EX)?;
    Ok(same_file(path, file))
}

/// Removes `path` (with `remove`) when its owner is gone: when its lock can be taken at
/// once. Tells whether it did. A path that vanished meanwhile, or that is not a file or
/// folder of its own (a symlink is never followed), is left alone.
pub(crate) fn remove_if_abandoned(
    path: &Path,
    remove: impl FnOnce(&Path) -> std::io::Result<()>,
) -> std::io::Result<bool> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound || e.raw_os_error() == Some(libc::ELOOP) => {
            return Ok(false)
        }
        Err(e) => return Err(e),
    };
    match flock(&file, libc::LOCK_EX | libc::LOCK_NB) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => return Ok(false),
        Err(e) => return Err(e),
    }
    // Holding the lock, the name is removed before anyone can lock it again.
    if !same_file(path, &file) {
        return Ok(false);
    }
    match remove(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

fn flock(file: &File, operation: libc::c_int) -> std::io::Result<()> {
    loop {
        // SAFETY: a plain system call on a descriptor `file` owns for the whole call.
        if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

fn same_file(path: &Path, file: &File) -> bool {
    match (fs::symlink_metadata(path), file.metadata()) {
        (Ok(named), Ok(held)) => (named.dev(), named.ino()) == (held.dev(), held.ino()),
        _ => false,
    }
}

/// Strict percent-decoding of a URL part: a `%` not followed by two hex digits, or bytes that
/// are not UTF-8, are refused (`None`) rather than passed on mangled. The caller names the part
/// in its error, which never quotes the part itself (it may be a credential).
pub(crate) fn percent_decode(text: &str) -> Option<String> {
    let mut decoded = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let hex = tail
                .get(..2)
                .filter(|hex| hex.iter().all(u8::is_ascii_hexdigit))?;
            decoded.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            rest = &tail[2..];
        } else {
            decoded.push(byte);
            rest = tail;
        }
    }
    String::from_utf8(decoded).ok()
}

/// SQLite's name for a result code: the extended name where it has one that matters to a
/// caller, the primary name otherwise (as better-sqlite3 reports `error.code`).
pub fn sqlite_code_name(extended: i32) -> &'static str {
    use rusqlite::ffi;
    /// SQLite's own constants, by the names its documentation gives them.
    macro_rules! names {
        ($code:expr, $($name:ident),* $(,)?) => {
            match $code {
                $(ffi::$name => Some(stringify!($name)),)*
                _ => None,
            }
        };
    }
    let extended_name = names!(
        extended,
        SQLITE_BUSY_RECOVERY,
        SQLITE_BUSY_SNAPSHOT,
        SQLITE_BUSY_TIMEOUT,
        SQLITE_IOERR_READ,
        SQLITE_IOERR_SHORT_READ,
        SQLITE_IOERR_WRITE,
        SQLITE_IOERR_FSYNC,
        SQLITE_IOERR_DIR_FSYNC,
        SQLITE_IOERR_TRUNCATE,
        SQLITE_IOERR_DELETE,
        SQLITE_IOERR_LOCK,
        SQLITE_IOERR_NOMEM,
        SQLITE_IOERR_ACCESS,
        SQLITE_IOERR_SHMOPEN,
        SQLITE_IOERR_SHMMAP,
        SQLITE_CORRUPT_VTAB,
        SQLITE_CORRUPT_SEQUENCE,
        SQLITE_CORRUPT_INDEX,
        SQLITE_READONLY_RECOVERY,
        SQLITE_READONLY_CANTLOCK,
        SQLITE_READONLY_ROLLBACK,
        SQLITE_READONLY_DBMOVED,
        SQLITE_CANTOPEN_NOTEMPDIR,
        SQLITE_CANTOPEN_ISDIR,
        SQLITE_CANTOPEN_FULLPATH,
        SQLITE_CONSTRAINT_CHECK,
        SQLITE_CONSTRAINT_FOREIGNKEY,
        SQLITE_CONSTRAINT_FUNCTION,
        SQLITE_CONSTRAINT_NOTNULL,
        SQLITE_CONSTRAINT_PRIMARYKEY,
        SQLITE_CONSTRAINT_TRIGGER,
        SQLITE_CONSTRAINT_UNIQUE,
    );
    extended_name
        .or(names!(
            extended & 0xff,
            SQLITE_ERROR,
            SQLITE_INTERNAL,
            SQLITE_PERM,
            SQLITE_ABORT,
            SQLITE_BUSY,
            SQLITE_LOCKED,
            SQLITE_NOMEM,
            SQLITE_READONLY,
            SQLITE_INTERRUPT,
            SQLITE_IOERR,
            SQLITE_CORRUPT,
            SQLITE_NOTFOUND,
            SQLITE_FULL,
            SQLITE_CANTOPEN,
            SQLITE_PROTOCOL,
            SQLITE_EMPTY,
            SQLITE_SCHEMA,
            SQLITE_TOOBIG,
            SQLITE_CONSTRAINT,
            SQLITE_MISMATCH,
            SQLITE_MISUSE,
            SQLITE_NOLFS,
            SQLITE_AUTH,
            SQLITE_FORMAT,
            SQLITE_RANGE,
            SQLITE_NOTADB,
        ))
        .unwrap_or("SQLITE_UNKNOWN")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding_is_strict() {
        assert_eq!(percent_decode("a%2Fb%20c").as_deref(), Some("a/b c"));
        assert_eq!(percent_decode("%C3%A9").as_deref(), Some("é"));
        // A sign is not a hex digit, though from_str_radix takes "+f".
        for bad in ["%", "%4", "%zz", "%+f", "%-1", "%FF"] {
            assert_eq!(percent_decode(bad), None, "{bad}");
        }
    }
}
