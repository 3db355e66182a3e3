//! A file's content as a copy holds it between the snapshot and the upload: in memory when it
//! is small, else in a spool file of the copy's scratch folder. A copy then holds a few pieces
//! per worker in memory, whatever the sizes of the files it copies; the disk holds the rest, as
//! the host's images already are (a snapshot must be kept somewhere while the tenant's calls go
//! on, and memory is what a host runs out of first).

use std::borrow::Cow;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::*;

/// The unit of a base: a base larger than this is stored as pieces of this size (the last
/// shorter), each its own object, uploaded and fetched a few at a time; a new base stores only
/// the pieces that differ from the old one's. A multiple of [`delta::BLOCK`].
pub(super) const PIECE: usize = 4 << 20;

/// A content up to this size is held in memory, a larger one spooled.
pub(super) const IN_MEMORY: u64 = PIECE as u64;

/// The content of one file of a snapshot, as the snapshot holds it.
pub(super) enum Body<'a> {
    Memory(&'a [u8]),
    Spooled {
        path: &'a Path,
        file: &'a File,
        len: u64,
    },
}

impl Body<'_> {
    pub(super) fn len(&self) -> u64 {
        match self {
            Body::Memory(bytes) => bytes.len() as u64,
            Body::Spooled { len, .. } => *len,
        }
    }

    /// Bytes `start..end` (within the content): a spooled range of a piece or more is mapped,
    /// not read into a buffer of its size, whose fresh pages cost more than the copy into them
    /// (0.6-0.75 ms a MiB against 0.1 once they are the process's, measured here).
    pub(super) fn range(&self, start: u64, end: u64) -> Result<Range<'_>> {
        /// Below this, a read costs less than a mapping.
        const MAPPED: u64 = 64 << 10;
        match self {
            Body::Memory(bytes) => Ok(Range::Borrowed(&bytes[start as usize..end as usize])),
            Body::Spooled { path, file, .. } => {
                let unreadable = |e: std::io::Error| {
                    Error::io(format!("{} cannot be read", crate::paths::shown(path)), &e)
                };
                let len = usize::try_from(end - start).expect("a range of a piece");
                if end - start >= MAPPED {
                    return Mapped::of(file, start, len)
                        .map(Range::Mapped)
                        .map_err(unreadable);
                }
                let mut buf = vec![0u8; len];
                file.read_exact_at(&mut buf, start).map_err(unreadable)?;
                Ok(Range::Read(buf))
            }
        }
    }

    /// The SHA-256 of every block, in order; a spooled content is read a few pieces at a time.
    pub(super) fn block_digests(&self) -> Result<Vec<[u8; 32]>> {
        const RUN: u64 = 4 * PIECE as u64;
        match self {
            Body::Memory(bytes) => Ok(delta::block_digests(bytes)),
            Body::Spooled { len, .. } => {
                let mut blocks =
                    Vec::with_capacity(usize::try_from(len.div_ceil(delta::BLOCK as u64)).unwrap_or(0));
                let mut start = 0;
                while start < *len {
                    let end = (start + RUN).min(*len);
                    blocks.extend(delta::block_digests(&self.range(start, end)?));
                    start = end;
                }
                Ok(blocks)
            }
        }
    }

    /// Appends block `index` to `out`.
    pub(super) fn append_block(&self, index: usize, out: &mut Vec<u8>) -> Result<()> {
        let start = (index * delta::BLOCK) as u64;
        let end = (start + delta::BLOCK as u64).min(self.len());
        out.extend_from_slice(&self.range(start, end)?);
        Ok(())
    }

    /// Whether the content, a database, passes `PRAGMA <pragma>`: in memory through a
    /// deserialized copy, spooled by opening the spool file as immutable (no lock, no WAL or
    /// shared-memory file beside it: it is this copy's own scratch).
    pub(super) fn passes(&self, pragma: &str) -> bool {
        match self {
            Body::Memory(bytes) => restore::Restored::read_in_place(bytes.to_vec(), true).passes(pragma),
            Body::Spooled { path, .. } => file_passes(path, pragma),
        }
    }
}

/// Bytes of a content, wherever they are.
pub(super) enum Range<'a> {
    Borrowed(&'a [u8]),
    Read(Vec<u8>),
    Mapped(Mapped),
}

impl std::ops::Deref for Range<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Range::Borrowed(bytes) => bytes,
            Range::Read(bytes) => bytes,
            Range::Mapped(mapped) => mapped.bytes(),
        }
    }
}

impl Range<'_> {
    pub(super) fn as_cow(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self)
    }
}

/// A read-only mapping of a range of a spool file. Safe to read for as long as it lives: the
/// spool file is this copy's own scratch, which nothing shortens while the copy holds it (the
/// same holds for [`file_passes`]'s mapping).
pub(super) struct Mapped {
    base: *mut libc::c_void,
    mapped: usize,
    /// Where the range starts in the mapping, which starts at a page boundary.
    skip: usize,
    len: usize,
}

impl Mapped {
    fn of(file: &File, start: u64, len: usize) -> std::io::Result<Mapped> {
        use std::os::unix::io::AsRawFd;
        // SAFETY: sysconf has no preconditions.
        let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let aligned = start - start % page;
        let skip = usize::try_from(start - aligned).expect("less than a page");
        let mapped = skip + len;
        let offset = libc::off_t::try_from(aligned)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: a fresh read-only private mapping of a file this process has open; the
        // kernel picks the address, and the mapping is unmapped once, on drop.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                offset,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapped {
            base,
            mapped,
            skip,
            len,
        })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping covers `skip + len` bytes from `base`, readable while `self` lives
        // (see the type's doc for why the file under it stays as long).
        unsafe { std::slice::from_raw_parts(self.base.cast::<u8>().add(self.skip), self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `of`, once.
        unsafe { libc::munmap(self.base, self.mapped) };
    }
}

/// Whether the database file at `path`, which nobody else has open, passes `PRAGMA <pragma>`.
pub(super) fn file_passes(path: &Path, pragma: &str) -> bool {
    use rusqlite::{Connection, OpenFlags};
    let check = || -> rusqlite::Result<bool> {
        let db = Connection::open_with_flags(
            immutable_uri(path).ok_or_else(|| rusqlite::Error::InvalidPath(path.to_owned()))?,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        // Mapped instead of read a page at a time: the check reads every page, and a pread
        // each made it three to four times slower (2-3 ms against 8-14 ms at 14 MB, measured
        // here). Safe to map: the file is this library's own scratch, which nothing shortens
        // while it is checked.
        db.query_row("PRAGMA mmap_size = 1073741824", [], |_| Ok(()))?;
        db.query_row(&format!("PRAGMA {pragma}"), [], |row| row.get::<_, String>(0))
            .map(|verdict| verdict == "ok")
    };
    check().unwrap_or(false)
}

/// The SQLite URI that opens `path` as immutable; `None` for a path that is not UTF-8 (spool
/// and restore paths are the library's own, under a UTF-8 root).
fn immutable_uri(path: &Path) -> Option<String> {
    let mut uri = String::from("file:");
    for c in path.to_str()?.chars() {
        match c {
            '%' | '?' | '#' => uri.push_str(&format!("%{:02x}", c as u32)),
            c => uri.push(c),
        }
    }
    uri.push_str("?immutable=1");
    Some(uri)
}

/// Where a snapshot spools: files of its scratch folder, made when first asked for.
pub(super) struct Spool<'a> {
    root: &'a Path,
    scratch: &'a mut Option<restore::Scratch>,
    made: usize,
}

impl<'a> Spool<'a> {
    pub(super) fn new(root: &'a Path, scratch: &'a mut Option<restore::Scratch>) -> Spool<'a> {
        Spool {
            root,
            scratch,
            made: 0,
        }
    }

    /// A fresh path in the scratch folder.
    pub(super) fn path(&mut self) -> Result<PathBuf> {
        let scratch = match self.scratch {
            Some(scratch) => scratch,
            None => self.scratch.insert(restore::Scratch::beside(self.root)?),
        };
        self.made += 1;
        Ok(scratch.path.join(format!("{:06}", self.made)))
    }

    /// `len` bytes of `from`, from its start, into a fresh spool file, its holes left holes
    /// (a sparse file costs the spool what it costs the disk); `None` when `from` holds fewer
    /// bytes than that.
    pub(super) fn copy(&mut self, from: &File, len: u64, what: &Path) -> Result<Option<PathBuf>> {
        use std::os::unix::io::AsRawFd;
        // Where the next run of data starts at or after `at`, and where it ends; a file system
        // that cannot tell has one run, the whole file.
        let seek = |at: u64, whence: i32| -> Option<u64> {
            let at = libc::off_t::try_from(at).ok()?;
            // SAFETY: lseek on a descriptor `from` owns; it moves only that descriptor's
            // offset, which nothing here reads (every read is positioned).
            let found = unsafe { libc::lseek(from.as_raw_fd(), at, whence) };
            u64::try_from(found).ok()
        };
        let mut runs = Vec::new();
        let mut at = 0;
        while at < len {
            let Some(data) = seek(at, libc::SEEK_DATA) else {
                // ENXIO: nothing but holes from `at` on (or no answer: then read it all).
                if std::io::Error::last_os_error().raw_os_error() != Some(libc::ENXIO) {
                    runs.push((at, len));
                }
                break;
            };
            if data >= len {
                break;
            }
            let end = seek(data, libc::SEEK_HOLE).unwrap_or(len).min(len);
            runs.push((data, end.max(data + 1)));
            at = end.max(data + 1);
        }
        let path = self.path()?;
        let failed = |e: std::io::Error| {
            Error::io(
                format!(
                    "{} cannot be copied into {}",
                    crate::paths::shown(what),
                    crate::paths::shown(&path)
                ),
                &e,
            )
        };
        let to = File::create(&path).map_err(failed)?;
        to.set_len(len).map_err(failed)?;
        for (start, end) in runs {
            match copy_at(
                &to,
                end - start,
                |buf, offset| from.read_exact_at(buf, start + offset),
                start,
            ) {
                Ok(()) => {}
                // Shorter than it was a moment ago: being written, and the caller reads it again.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
                Err(e) => return Err(failed(e)),
            }
        }
        Ok(Some(path))
    }

    /// A spool file of `len` bytes written by `fill`, which is given the file to write at
    /// offsets.
    pub(super) fn write(
        &mut self,
        len: u64,
        fill: impl FnOnce(&File) -> std::io::Result<()>,
    ) -> Result<PathBuf> {
        let path = self.path()?;
        let failed =
            |e: std::io::Error| Error::io(format!("{} cannot be written", crate::paths::shown(&path)), &e);
        let file = File::create(&path).map_err(failed)?;
        file.set_len(len).and_then(|()| fill(&file)).map_err(failed)?;
        Ok(path)
    }
}

/// Copies `len` bytes from `read_at` (a reader at offsets) into `to` from offset 0, a piece at
/// a time.
pub(super) fn copy_at(
    to: &File,
    len: u64,
    mut read_at: impl FnMut(&mut [u8], u64) -> std::io::Result<()>,
    to_offset: u64,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; PIECE];
    let mut at = 0;
    while at < len {
        let n = usize::try_from((len - at).min(PIECE as u64)).expect("at most a piece");
        read_at(&mut buf[..n], at)?;
        to.write_all_at(&buf[..n], to_offset + at)?;
        at += n as u64;
    }
    Ok(())
}
