//! A database the host holds open in WAL mode, read without SQLite: what changed since the last
//! copy comes from the WAL frames appended since, so a copy after a one-row change reads a few
//! pages, not the ledger (Litestream reads the same frames, holding checkpoints back with a
//! read transaction of its own; a connection of this library's SQLite is what the module doc
//! forbids, so here a checkpoint is let happen, and the copy after the WAL restarts reads on
//! from the new generation when the old one's frames since the last copy can still be told,
//! see [`read_restarted`], and the whole database when they cannot).
//!
//! Nothing here opens the database file: closing any descriptor of it would drop the host's
//! POSIX locks. Its pages are read through the host's own descriptor (found in
//! `/proc/self/fd`), with `pread`, which neither opens nor closes anything; the descriptor is
//! checked to still name the file after the read. The WAL file carries no locks (SQLite locks
//! the database and the `-shm` file), so it is opened and closed as any file.
//!
//! A state is consistent when it is the database file overlaid with every frame up to one
//! commit frame of the current WAL generation (salts and checksums as SQLite's recovery checks
//! them): a checkpoint writes only frames of that generation into the file, so pages without a
//! frame are as they were. After reading, the WAL is scanned again: a commit that came in
//! meanwhile (an outside writer, whose checkpoint could have moved its pages into the file
//! under the read) or a new generation sends the copy back to the whole read, or to the host's
//! snapshot function.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::ErrorKind;
use std::mem::ManuallyDrop;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::unix::io::{FromRawFd, RawFd};

use super::*;

const HEADER: usize = 32;
const FRAME_HEADER: usize = 24;
const MAGIC: u32 = 0x377f_0682;
const VERSION: u32 = 3_007_000;

/// Where the copies of a file stand in its WAL: the last commit frame they hold, and every
/// page of the generation written up to it, by its latest frame.
#[derive(Debug, Clone)]
pub(super) struct WalMark {
    salts: [u32; 2],
    /// The header's checkpoint sequence and checksum byte order: with the salts, what tells
    /// the generation that follows this one (see [`read_restarted`]).
    sequence: u32,
    big_endian: bool,
    frames: u64,
    checksum: [u32; 2],
    page_size: usize,
    latest: Arc<Latest>,
    /// The host's descriptor the database was read through.
    host: HostFile,
}

/// The latest frame of each page of a WAL generation up to a mark: the frames a copy read,
/// over those of the marks before it. A copy adds a layer of what its tail wrote instead of
/// copying the generation's whole map (a thousand pages between a host's checkpoints), and
/// every [`LAYERS`] copies one map takes the layers' place.
#[derive(Debug)]
struct Latest {
    frames: HashMap<u32, u64>,
    under: Option<Arc<Latest>>,
    depth: usize,
}

/// How many layers a mark's map has at most.
const LAYERS: usize = 16;

impl Latest {
    fn new(frames: HashMap<u32, u64>) -> Arc<Latest> {
        Arc::new(Latest {
            frames,
            under: None,
            depth: 1,
        })
    }

    /// These frames, then `newer` over them.
    fn with(self: &Arc<Latest>, newer: HashMap<u32, u64>) -> Arc<Latest> {
        if self.depth < LAYERS {
            return Arc::new(Latest {
                frames: newer,
                under: Some(self.clone()),
                depth: self.depth + 1,
            });
        }
        let mut frames = HashMap::new();
        let mut layer = Some(self);
        while let Some(l) = layer {
            for (&pgno, &index) in &l.frames {
                frames.entry(pgno).or_insert(index);
            }
            layer = l.under.as_ref();
        }
        frames.extend(newer);
        Latest::new(frames)
    }

    fn get(&self, pgno: u32) -> Option<u64> {
        let mut layer = Some(self);
        while let Some(l) = layer {
            if let Some(&index) = l.frames.get(&pgno) {
                return Some(index);
            }
            layer = l.under.as_deref();
        }
        None
    }
}

impl WalMark {
    /// The mark of the generation whose header is `header`, at its commit frame `frames`.
    fn at(header: &Header, frames: u64, checksum: [u32; 2], latest: Arc<Latest>, host: &HostFile) -> WalMark {
        WalMark {
            salts: header.salts,
            sequence: header.sequence,
            big_endian: header.big_endian,
            frames,
            checksum,
            page_size: header.page_size,
            latest,
            host: host.clone(),
        }
    }

    /// The host's descriptor the database was read through (see [`HostFile::still_names`]).
    pub(super) fn host(&self) -> &HostFile {
        &self.host
    }
}

/// The host's descriptor of a file it holds open, borrowed: read, never closed.
#[derive(Debug, Clone)]
pub(super) struct HostFile {
    fd: RawFd,
    id: (u64, u64),
}

impl HostFile {
    pub(super) fn new(fd: RawFd, id: (u64, u64)) -> HostFile {
        HostFile { fd, id }
    }

    fn borrowed(&self) -> ManuallyDrop<File> {
        // SAFETY: the `File` is never dropped, so the host's descriptor is never closed here;
        // reads and `fstat` on it cannot harm the host. Should the host close it meanwhile and
        // the number be reused, `still_same` sees another file and the read is not used.
        ManuallyDrop::new(unsafe { File::from_raw_fd(self.fd) })
    }

    fn still_same(&self) -> bool {
        self.borrowed()
            .metadata()
            .is_ok_and(|m| (m.dev(), m.ino()) == self.id)
    }

    /// Whether the descriptor is still open on the file whose identity is `id`: open in this
    /// process, then, whoever opened it again under that number.
    pub(super) fn still_names(&self, id: (u64, u64)) -> bool {
        self.id == id && self.still_same()
    }

    /// Bytes at `offset`, zeros past the end of the file (as SQLite reads them).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        read_fully(&self.borrowed(), buf, offset)
    }
}

fn read_fully(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match file.read_at(buf, offset) {
            Ok(0) => {
                buf.fill(0);
                return Ok(());
            }
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

struct Header {
    big_endian: bool,
    page_size: usize,
    sequence: u32,
    salts: [u32; 2],
    checksum: [u32; 2],
}

fn be(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

/// SQLite's WAL checksum: pairs of 32-bit words in the byte order the WAL's magic names.
fn checksum(big_endian: bool, bytes: &[u8], mut s: [u32; 2]) -> [u32; 2] {
    for pair in bytes.chunks_exact(8) {
        let word = |b: &[u8]| {
            let b: [u8; 4] = b.try_into().expect("four bytes");
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        s[0] = s[0].wrapping_add(word(&pair[..4])).wrapping_add(s[1]);
        s[1] = s[1].wrapping_add(word(&pair[4..])).wrapping_add(s[0]);
    }
    s
}

fn read_header(wal: &File) -> std::io::Result<Option<Header>> {
    let mut bytes = [0u8; HEADER];
    read_fully(wal, &mut bytes, 0)?;
    let magic = be(&bytes, 0);
    if magic & !1 != MAGIC || be(&bytes, 4) != VERSION {
        return Ok(None);
    }
    let big_endian = magic & 1 == 1;
    let page_size = match be(&bytes, 8) {
        1 => 65536,
        n => n as usize,
    };
    let sum = [be(&bytes, 24), be(&bytes, 28)];
    if !(512..=65536).contains(&page_size)
        || !page_size.is_power_of_two()
        || checksum(big_endian, &bytes[..24], [0, 0]) != sum
    {
        return Ok(None);
    }
    Ok(Some(Header {
        big_endian,
        page_size,
        sequence: be(&bytes, 12),
        salts: [be(&bytes, 16), be(&bytes, 20)],
        checksum: sum,
    }))
}

/// The WAL at `path` and its header; `None` when there is none, or it is not a WAL (emptied
/// by a checkpoint that truncated it, or torn).
fn open_wal(path: &Path) -> std::io::Result<Option<(File, Header)>> {
    let wal = match File::open(path) {
        Ok(wal) => wal,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(read_header(&wal)?.map(|header| (wal, header)))
}

/// A failure to read the WAL at `path`, as the copy reports it.
fn unreadable(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(format!("{} cannot be read", path.display()), &e)
}

/// The frames of one generation from frame `from` (its running checksum `sum`) up to the last
/// valid commit frame.
struct Scan {
    frames: u64,
    checksum: [u32; 2],
    /// The database's size in pages at that commit (`None`: no commit after `from`).
    pages: Option<u32>,
    latest: HashMap<u32, u64>,
    /// The first frame that is not of the generation (or the end of the file): where the
    /// generation's frames end, committed or not.
    end: u64,
}

fn scan(wal: &File, header: &Header, from: u64, sum: [u32; 2]) -> std::io::Result<Scan> {
    /// Frames read at a time: a WAL's valid frames often end long before the file does (a
    /// restarted WAL keeps the older generation's frames behind its own), and reading stops
    /// at the first frame that is not of this generation.
    const FRAMES_AT_ONCE: u64 = 64;
    let frame = FRAME_HEADER + header.page_size;
    let len = wal.metadata()?.len();
    let mut result = Scan {
        frames: from,
        checksum: sum,
        pages: None,
        latest: HashMap::new(),
        end: from,
    };
    let (mut running, mut pending) = (sum, Vec::new());
    let mut next = from;
    let mut chunk = Vec::new();
    'chunks: loop {
        result.end = next;
        let start = HEADER as u64 + next * frame as u64;
        let whole = len.saturating_sub(start) / frame as u64;
        let count = whole.min(FRAMES_AT_ONCE);
        if count == 0 {
            break;
        }
        chunk.resize(count as usize * frame, 0);
        read_fully(wal, &mut chunk, start)?;
        for bytes in chunk.chunks_exact(frame) {
            let (head, page) = bytes.split_at(FRAME_HEADER);
            let pgno = be(head, 0);
            running = checksum(header.big_endian, &head[..8], running);
            running = checksum(header.big_endian, page, running);
            if pgno == 0
                || [be(head, 8), be(head, 12)] != header.salts
                || [be(head, 16), be(head, 20)] != running
            {
                break 'chunks;
            }
            pending.push((pgno, next));
            next += 1;
            result.end = next;
            let commit = be(head, 4);
            if commit != 0 {
                result.latest.extend(pending.drain(..));
                result.frames = next;
                result.checksum = running;
                result.pages = Some(commit);
            }
        }
    }
    Ok(result)
}

/// The whole database as of the WAL's last commit, and the mark the next copy reads on from;
/// `None` where this reading does not apply (no WAL or an empty one, a page size that is not
/// a multiple of a block, a writer that kept committing): the host's snapshot function then
/// reads it.
pub(super) fn read_whole(
    host: &HostFile,
    wal_path: &Path,
    spool: &mut super::body::Spool<'_>,
) -> Result<Option<(super::snapshot::Held, WalMark)>> {
    use super::snapshot::Held;
    let io = unreadable(wal_path);
    for _ in 0..3 {
        let Some((wal, header)) = open_wal(wal_path).map_err(&io)? else {
            return Ok(None);
        };
        if header.page_size % delta::BLOCK != 0 {
            return Ok(None);
        }
        let found = scan(&wal, &header, 0, header.checksum).map_err(&io)?;
        let Some(pages) = found.pages else {
            return Ok(None);
        };
        let page = header.page_size;
        let len = u64::from(pages) * page as u64;
        let frames = found.latest.iter().filter(|(&pgno, _)| pgno <= pages);
        let image = if len <= super::body::IN_MEMORY {
            let mut image = vec![0u8; len as usize];
            host.read_at(&mut image, 0).map_err(&io)?;
            for (&pgno, &index) in frames {
                let at = (pgno as usize - 1) * page;
                read_fully(&wal, &mut image[at..at + page], frame_offset(page, index)).map_err(&io)?;
            }
            Held::Bytes(image)
        } else {
            // Too large for memory: the file a piece at a time, then each page the WAL holds
            // over it.
            let path = spool.write(len, |to| {
                super::body::copy_at(to, len, |buf, at| host.read_at(buf, at), 0)?;
                let mut buf = vec![0u8; page];
                for (&pgno, &index) in frames {
                    read_fully(&wal, &mut buf, frame_offset(page, index))?;
                    to.write_all_at(&buf, u64::from(pgno - 1) * page as u64)?;
                }
                Ok(())
            })?;
            Held::spooled(path, len)?
        };
        let mark = WalMark::at(
            &header,
            found.frames,
            found.checksum,
            Latest::new(found.latest),
            host,
        );
        if unchanged_since(wal_path, &mark).map_err(&io)? && host.still_same() {
            return Ok(Some((image, mark)));
        }
    }
    Ok(None)
}

/// The pages of `frames` (each page's latest frame) within a database of `pages` pages, read
/// from the WAL.
fn pages_of(
    wal: &File,
    page_size: usize,
    frames: &HashMap<u32, u64>,
    pages: u32,
) -> std::io::Result<BTreeMap<u32, Vec<u8>>> {
    let mut read = BTreeMap::new();
    for (&pgno, &index) in frames {
        if pgno <= pages {
            let mut page = vec![0u8; page_size];
            read_fully(wal, &mut page, frame_offset(page_size, index))?;
            read.insert(pgno, page);
        }
    }
    Ok(read)
}

fn frame_offset(page_size: usize, index: u64) -> u64 {
    HEADER as u64 + index * (FRAME_HEADER + page_size) as u64 + FRAME_HEADER as u64
}

/// Whether the WAL is still the generation of `mark`, with no commit after it.
fn unchanged_since(wal_path: &Path, mark: &WalMark) -> std::io::Result<bool> {
    let Some((wal, header)) = open_wal(wal_path)? else {
        return Ok(false);
    };
    Ok(header.salts == mark.salts
        && header.page_size == mark.page_size
        && scan(&wal, &header, mark.frames, mark.checksum)?.pages.is_none())
}

/// What the frames since `mark` changed: the pages (whole) and the database's size in bytes.
pub(super) struct Tail {
    /// The WAL as it was opened to read the tail: the generation its frames are of, even if
    /// the file at its path is replaced meanwhile (which [`Tail::still_holds`] then tells).
    wal: File,
    pub(super) len: u64,
    pub(super) pages: BTreeMap<u32, Vec<u8>>,
    pub(super) page_size: usize,
    pub(super) mark: WalMark,
}

/// What the WAL tells of the commits since a mark.
pub(super) enum Since {
    /// The WAL is another generation (or gone): the frames since cannot be told, and the whole
    /// database is read instead.
    Unknown,
    /// No commit since.
    Nothing,
    Commits(Tail),
}

/// The commits since `mark`.
pub(super) fn read_tail(host: &HostFile, wal_path: &Path, mark: &WalMark) -> Result<Since> {
    let io = unreadable(wal_path);
    let Some((wal, header)) = open_wal(wal_path).map_err(&io)? else {
        return Ok(Since::Unknown);
    };
    if header.page_size != mark.page_size {
        return Ok(Since::Unknown);
    }
    if header.salts != mark.salts {
        return Ok(match read_restarted(host, wal, &header, mark).map_err(&io)? {
            Some(tail) => Since::Commits(tail),
            None => Since::Unknown,
        });
    }
    let found = scan(&wal, &header, mark.frames, mark.checksum).map_err(&io)?;
    let Some(pages) = found.pages else {
        return Ok(Since::Nothing);
    };
    let changed = pages_of(&wal, mark.page_size, &found.latest, pages).map_err(&io)?;
    let latest = mark.latest.with(found.latest);
    Ok(Since::Commits(Tail {
        wal,
        len: pages as u64 * mark.page_size as u64,
        pages: changed,
        page_size: mark.page_size,
        mark: WalMark::at(&header, found.frames, found.checksum, latest, host),
    }))
}

/// The commits since `mark` when the WAL has restarted once since: SQLite restarts it only
/// once a checkpoint has written every frame of the generation into the database file, so the
/// database is the mark's generation whole and the new generation's frames are over it. What
/// changed is then the pages of the old generation's frames after the mark (read from the
/// database file) and of the new generation's (from the WAL), provided those old frames are
/// all still there to be read: the new generation overwrites the file from its start, so the
/// old one's frames after the mark are known whole only when the first frame after them is
/// not the new generation's. A copy after every call, as a strict router's, finds the mark at
/// the old generation's end, and the restart costs it nothing more than another tail. `None`
/// (the whole database is read) when the WAL restarted more than once, the old frames may be
/// overwritten, or the new generation has no commit yet.
fn read_restarted(
    host: &HostFile,
    wal: File,
    header: &Header,
    mark: &WalMark,
) -> std::io::Result<Option<Tail>> {
    // SQLite adds one to the first salt and to the checkpoint sequence at each restart.
    if header.big_endian != mark.big_endian
        || header.sequence != mark.sequence.wrapping_add(1)
        || header.salts[0] != mark.salts[0].wrapping_add(1)
    {
        return Ok(None);
    }
    let old = Header {
        big_endian: mark.big_endian,
        page_size: mark.page_size,
        sequence: mark.sequence,
        salts: mark.salts,
        checksum: mark.checksum,
    };
    let before = scan(&wal, &old, mark.frames, mark.checksum)?;
    let frame = (FRAME_HEADER + mark.page_size) as u64;
    let after_old = HEADER as u64 + before.end * frame;
    if after_old + FRAME_HEADER as u64 <= wal.metadata()?.len() {
        let mut head = [0u8; FRAME_HEADER];
        read_fully(&wal, &mut head, after_old)?;
        if [be(&head, 8), be(&head, 12)] == header.salts {
            return Ok(None);
        }
    }
    let now = scan(&wal, header, 0, header.checksum)?;
    let Some(pages) = now.pages else {
        return Ok(None);
    };
    let mut changed = pages_of(&wal, mark.page_size, &now.latest, pages)?;
    for &pgno in before.latest.keys() {
        if pgno <= pages && !changed.contains_key(&pgno) {
            let mut page = vec![0u8; mark.page_size];
            host.read_at(&mut page, u64::from(pgno - 1) * mark.page_size as u64)?;
            changed.insert(pgno, page);
        }
    }
    Ok(Some(Tail {
        wal,
        len: u64::from(pages) * mark.page_size as u64,
        pages: changed,
        page_size: mark.page_size,
        mark: WalMark::at(header, now.frames, now.checksum, Latest::new(now.latest), host),
    }))
}

impl Tail {
    /// Page `pgno` as of the tail's commit: from the tail, else from the WAL's latest frame of
    /// it, else from the database file.
    pub(super) fn page(&self, host: &HostFile, wal_path: &Path, pgno: u32) -> Result<Vec<u8>> {
        if let Some(page) = self.pages.get(&pgno) {
            return Ok(page.clone());
        }
        let io = unreadable(wal_path);
        let mut page = vec![0u8; self.page_size];
        match self.mark.latest.get(pgno) {
            Some(index) => {
                read_fully(&self.wal, &mut page, frame_offset(self.page_size, index)).map_err(&io)?;
            }
            None => host
                .read_at(&mut page, (pgno as u64 - 1) * self.page_size as u64)
                .map_err(&io)?,
        }
        Ok(page)
    }

    /// Whether what was read since the tail still stands: the same generation, no commit after
    /// it, the host's descriptor still the file.
    pub(super) fn still_holds(&self, host: &HostFile, wal_path: &Path) -> Result<bool> {
        Ok(unchanged_since(wal_path, &self.mark).map_err(unreadable(wal_path))? && host.still_same())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// However many copies layered their frames over a mark's, and wherever the layers were
    /// joined into one map, a page's latest frame is the last one written.
    #[test]
    fn the_latest_frame_of_a_page_is_the_last_one_layered() {
        let mut model = HashMap::new();
        let mut latest = Latest::new(HashMap::new());
        for copy in 0..(3 * LAYERS as u64 + 5) {
            let frames: HashMap<u32, u64> = (0..4)
                .map(|k| ((copy * 7 + k * 13) as u32 % 50, copy * 4 + k))
                .collect();
            model.extend(frames.clone());
            latest = latest.with(frames);
            assert!(latest.depth <= LAYERS, "copy {copy}: {} layers", latest.depth);
            for pgno in 0..50 {
                assert_eq!(
                    latest.get(pgno),
                    model.get(&pgno).copied(),
                    "copy {copy}, page {pgno}"
                );
            }
        }
    }

    /// A host's ledger, its descriptor as a copy borrows it, and a state read whole.
    fn held(dir: &Path) -> (rusqlite::Connection, File, HostFile) {
        let conn = rusqlite::Connection::open(dir.join("a.db")).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;
             CREATE TABLE t (x); INSERT INTO t VALUES (zeroblob(9000));
             CREATE TABLE u (n); INSERT INTO u VALUES (0);",
        )
        .unwrap();
        let file = File::open(dir.join("a.db")).unwrap();
        let meta = file.metadata().unwrap();
        let host = HostFile::new(
            std::os::unix::io::AsRawFd::as_raw_fd(&file),
            (meta.dev(), meta.ino()),
        );
        (conn, file, host)
    }

    fn whole(host: &HostFile, wal: &Path, root: &Path) -> (Vec<u8>, WalMark) {
        let mut scratch = None;
        let mut spool = super::super::body::Spool::new(root, &mut scratch);
        match read_whole(host, wal, &mut spool).unwrap() {
            Some((super::super::snapshot::Held::Bytes(image), mark)) => (image, mark),
            _ => panic!("a small ledger with frames is read whole into memory"),
        }
    }

    /// The image `tail` makes of `image`, as a copy builds it.
    fn apply(mut image: Vec<u8>, tail: &Tail, host: &HostFile, wal: &Path) -> Vec<u8> {
        let old_len = image.len();
        image.resize(tail.len as usize, 0);
        for (&pgno, page) in &tail.pages {
            let at = (pgno as usize - 1) * tail.page_size;
            image[at..at + tail.page_size].copy_from_slice(page);
        }
        for at in (old_len..tail.len as usize).step_by(tail.page_size) {
            let pgno = (at / tail.page_size + 1) as u32;
            if !tail.pages.contains_key(&pgno) {
                image[at..at + tail.page_size].copy_from_slice(&tail.page(host, wal, pgno).unwrap());
            }
        }
        image
    }

    /// After the host's checkpoint restarts the WAL, the next copy reads on from the new
    /// generation (with the old one's commits since the mark, now in the file): the state it
    /// builds is the host's, byte for byte. When the old frames after the mark may be
    /// overwritten by the new generation, or the WAL restarted twice, it cannot tell.
    #[test]
    fn a_restarted_wal_is_read_on_from_when_the_old_frames_can_be_told() {
        let dir = tempfile::tempdir().unwrap();
        let (mut conn, _file, host) = held(dir.path());
        let wal = dir.path().join("a.db-wal");
        let insert = |conn: &rusqlite::Connection, n: usize| {
            for _ in 0..n {
                conn.execute("INSERT INTO t VALUES (randomblob(3000))", [])
                    .unwrap();
            }
        };
        insert(&conn, 20);
        // Commits after the mark (of a page the new generation does not write again), then a
        // checkpoint, then the restart's commits: fewer frames than the old generation had
        // before the mark, so none of its frames are overwritten.
        for after_mark in [0, 3] {
            let (image, mark) = whole(&host, &wal, dir.path());
            for _ in 0..after_mark {
                conn.execute("UPDATE u SET n = n + 1", []).unwrap();
            }
            conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE)").unwrap();
            insert(&conn, 2);
            let Since::Commits(tail) = read_tail(&host, &wal, &mark).unwrap() else {
                panic!("{after_mark} commits after the mark: the restart was not read on from");
            };
            assert_ne!(tail.mark.salts, mark.salts, "the WAL did not restart");
            assert!(tail.still_holds(&host, &wal).unwrap());
            assert!(
                apply(image, &tail, &host, &wal) == conn.serialize(rusqlite::MAIN_DB).unwrap().to_vec(),
                "not the host's state"
            );
            // And on from that mark again, within the new generation.
            insert(&conn, 1);
            let (image, _) = whole(&host, &wal, dir.path());
            let Since::Commits(next) = read_tail(&host, &wal, &tail.mark).unwrap() else {
                panic!("no tail after the restart's mark");
            };
            assert!(apply(image.clone(), &next, &host, &wal) == image);
            insert(&conn, 20);
        }

        // A mark early in its generation, whose later frames the new generation overwrites.
        conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE)").unwrap();
        insert(&conn, 1);
        let (_, early) = whole(&host, &wal, dir.path());
        insert(&conn, 10);
        conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE)").unwrap();
        insert(&conn, 10);
        assert!(matches!(read_tail(&host, &wal, &early).unwrap(), Since::Unknown));

        // Two restarts since the mark.
        let (_, mark) = whole(&host, &wal, dir.path());
        for _ in 0..2 {
            conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE)").unwrap();
            insert(&conn, 1);
        }
        assert!(matches!(read_tail(&host, &wal, &mark).unwrap(), Since::Unknown));
    }

    #[test]
    fn the_checksum_is_sqlites() {
        // The header of a WAL SQLite wrote (little-endian checksums, page size 4096), whose last
        // eight bytes are its checksum of the first 24.
        let db = tempfile::tempdir().unwrap();
        let path = db.path().join("a.db");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .unwrap();
        let wal = File::open(db.path().join("a.db-wal")).unwrap();
        let header = read_header(&wal).unwrap().expect("SQLite's header verifies");
        assert_eq!(header.page_size, 4096);
        let found = scan(&wal, &header, 0, header.checksum).unwrap();
        assert!(found.pages.is_some() && found.frames >= 1, "the commit verifies");
        // One flipped bit in the page of the last frame ends the WAL before that commit.
        let frames = found.frames;
        let mut bytes = std::fs::read(db.path().join("a.db-wal")).unwrap();
        let at = frame_offset(4096, frames - 1) as usize + 100;
        bytes[at] ^= 1;
        let torn = db.path().join("torn-wal");
        std::fs::write(&torn, &bytes).unwrap();
        let torn = File::open(torn).unwrap();
        assert!(scan(&torn, &header, 0, header.checksum).unwrap().frames < frames);
        drop(conn);
    }
}
