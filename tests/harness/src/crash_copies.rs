//! What the copy crash run (`copy-worker` and `tests/copy_crash.rs`) shares: a tenant root
//! whose every file can prove on its own that it is whole, and the fold check a restore runs.
//!
//! A tenant root of the run holds
//! - the ledger `gotry-state/gotry-state.db` (SQLite, WAL): a `pad` table of a few MB written
//!   once, so a copy takes some milliseconds to put, and a `ledger` table that a thread keeps
//!   appending to. Every row carries the SHA-256 of its table, id and payload, and ids run
//!   1..=n without a gap, so a restored ledger shows whether it is a state its writer committed;
//! - `blobs/blob-<i>.bin` written once, and `meta/state.bin` rewritten between copies, in the
//!   self-checking [blob format](write_blob).
//!
//! So an object found under a real name in a store can be checked even when no manifest names
//! it: a blob carries its length and hash, and a SQLite image its page count.

use std::path::Path;

use gotry_tenant_state::{Error, WallClock};
use rusqlite::{params, Connection, OpenFlags};
use sha2::{Digest, Sha256};

/// The ledger's place in a tenant root.
pub const LEDGER: &str = "gotry-state/gotry-state.db";
/// Blobs written once, when a tenure starts empty.
pub const BLOBS: usize = 3;
pub const BLOB_BYTES: usize = 64 << 10;
/// The file rewritten (whole, by rename) between copies.
pub const STATE_FILE: &str = "meta/state.bin";

const PAD_ROW_BYTES: usize = 4096;
const BLOB_MAGIC: &[u8; 10] = b"GOTRYBLOB1";
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// The store's wall clock shifted by a fixed amount: each holder of the run reads a later
/// time than the one before, so a killed holder's lease has expired for its successor at
/// once, without waiting out a TTL. It names no host clock, so it decides alone.
#[derive(Debug, Clone, Copy)]
pub struct OffsetClock(pub i64);

impl WallClock for OffsetClock {
    fn now_ms(&self) -> gotry_tenant_state::Result<i64> {
        Ok(gotry_tenant_state::SystemWallClock.now_ms()? + self.0)
    }
}

/// xorshift64*: reproducible from a seed, which is all a crash run needs.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // Never zero, and two close seeds start far apart.
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform enough in `[0, n)`; 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(len);
        out
    }
}

pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    sha256(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A blob: magic, payload length (u64 LE), payload, SHA-256 of the payload.
pub fn blob(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 50);
    out.extend_from_slice(BLOB_MAGIC);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    out.extend_from_slice(&sha256(payload));
    out
}

/// Writes a blob whole: into a temporary name beside it, then renamed over `path`.
pub fn write_blob(path: &Path, payload: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(path.parent().expect("a blob has a folder"))?;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    std::fs::write(&temporary, blob(payload))?;
    std::fs::rename(&temporary, path)
}

pub fn is_blob(bytes: &[u8]) -> bool {
    bytes.starts_with(BLOB_MAGIC)
}

/// Whether a blob is whole: its length and hash are the ones it carries.
pub fn check_blob(bytes: &[u8]) -> Result<(), String> {
    let head = BLOB_MAGIC.len() + 8;
    if bytes.len() < head + 32 || !is_blob(bytes) {
        return Err(format!("not a blob ({} bytes)", bytes.len()));
    }
    let len = u64::from_le_bytes(bytes[BLOB_MAGIC.len()..head].try_into().expect("8 bytes"));
    if len != (bytes.len() - head - 32) as u64 {
        return Err(format!(
            "a blob of {len} payload bytes holds {}: torn",
            bytes.len() - head - 32
        ));
    }
    let (payload, hash) = bytes[head..].split_at(bytes.len() - head - 32);
    if sha256(payload)[..] != *hash {
        return Err("a blob's payload does not match its hash".to_owned());
    }
    Ok(())
}

pub fn is_sqlite(bytes: &[u8]) -> bool {
    bytes.starts_with(SQLITE_HEADER)
}

/// Whether a SQLite image is whole by its header: a page count that is valid (the
/// version-valid-for number equals the change counter) must match the file's length.
pub fn check_sqlite_length(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < 100 || !is_sqlite(bytes) {
        return Err(format!("not a SQLite image ({} bytes)", bytes.len()));
    }
    let be32 = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let page_size = match u16::from_be_bytes([bytes[16], bytes[17]]) {
        1 => 65_536,
        n => u64::from(n),
    };
    if be32(92) != be32(24) {
        return Err("the header's page count is stale (version-valid-for differs)".to_owned());
    }
    let expected = page_size * u64::from(be32(28));
    if expected != bytes.len() as u64 {
        return Err(format!(
            "the header says {expected} bytes, the image holds {}: torn",
            bytes.len()
        ));
    }
    Ok(())
}

/// The digest a row carries.
pub fn row_digest(table: &str, id: i64, payload: &[u8]) -> Vec<u8> {
    let mut hash = Sha256::new();
    hash.update(table.as_bytes());
    hash.update(id.to_le_bytes());
    hash.update(payload);
    hash.finalize().to_vec()
}

/// Creates an empty ledger (WAL) with `pad_bytes` of padding rows, in one transaction.
pub fn create_ledger(path: &Path, pad_bytes: usize, rng: &mut Rng) -> rusqlite::Result<()> {
    std::fs::create_dir_all(path.parent().expect("the ledger has a folder"))
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    let mut db = Connection::open(path)?;
    db.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
    let tx = db.transaction()?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY, payload BLOB NOT NULL, digest BLOB NOT NULL);
         CREATE TABLE IF NOT EXISTS pad (id INTEGER PRIMARY KEY, payload BLOB NOT NULL, digest BLOB NOT NULL);",
    )?;
    for id in 1..=(pad_bytes / PAD_ROW_BYTES).max(1) as i64 {
        let payload = rng.bytes(PAD_ROW_BYTES);
        tx.execute(
            "INSERT INTO pad (id, payload, digest) VALUES (?1, ?2, ?3)",
            params![id, payload, row_digest("pad", id, &payload)],
        )?;
    }
    tx.commit()
}

/// What a holder puts in a tenant root that no copy restored: the ledger (with `pad_bytes`
/// of padding) and the blobs.
pub fn start_empty(root: &Path, pad_bytes: usize, rng: &mut Rng) -> Result<(), String> {
    create_ledger(&root.join(LEDGER), pad_bytes, rng).map_err(|e| format!("creating the ledger: {e}"))?;
    for i in 0..BLOBS {
        let payload = rng.bytes(BLOB_BYTES);
        write_blob(&root.join(format!("blobs/blob-{i}.bin")), &payload)
            .map_err(|e| format!("writing a blob: {e}"))?;
    }
    Ok(())
}

/// Opens the ledger for appending, and returns the next id.
pub fn open_ledger(path: &Path) -> rusqlite::Result<(Connection, i64)> {
    let db = Connection::open(path)?;
    db.busy_timeout(std::time::Duration::from_secs(5))?;
    db.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
    let next: i64 = db.query_row("SELECT coalesce(max(id), 0) + 1 FROM ledger", [], |r| r.get(0))?;
    Ok((db, next))
}

/// Appends `count` rows in one transaction, from `next` on; returns the next id.
pub fn append_rows(db: &mut Connection, next: i64, count: usize, rng: &mut Rng) -> rusqlite::Result<i64> {
    let tx = db.transaction()?;
    for id in next..next + count as i64 {
        let len = 64 + rng.below(192) as usize;
        let payload = rng.bytes(len);
        tx.execute(
            "INSERT INTO ledger (id, payload, digest) VALUES (?1, ?2, ?3)",
            params![id, payload, row_digest("ledger", id, &payload)],
        )?;
    }
    tx.commit()?;
    Ok(next + count as i64)
}

/// What a ledger holds once it passed [`check_ledger`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerState {
    pub rows: u64,
    pub pad_rows: u64,
}

/// The ledger's rows, if it is a state its writer committed: `integrity_check` passes, ids of
/// both tables run 1..=n, and every ledger row's digest is its own. Opened read-only: a check
/// changes nothing it looks at.
pub fn check_ledger(path: &Path) -> Result<LedgerState, String> {
    let db = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let sql = |e: rusqlite::Error| format!("{}: {e}", path.display());
    let verdict: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .map_err(sql)?;
    if verdict != "ok" {
        return Err(format!("{}: integrity_check says {verdict}", path.display()));
    }
    let mut counts = [0u64; 2];
    for (table, count) in ["ledger", "pad"].into_iter().zip(&mut counts) {
        let mut rows = db
            .prepare(&format!("SELECT id, payload, digest FROM {table} ORDER BY id"))
            .map_err(sql)?;
        let mut rows = rows.query([]).map_err(sql)?;
        while let Some(row) = rows.next().map_err(sql)? {
            let id: i64 = row.get(0).map_err(sql)?;
            let payload: Vec<u8> = row.get(1).map_err(sql)?;
            let digest: Vec<u8> = row.get(2).map_err(sql)?;
            *count += 1;
            if id != *count as i64 {
                return Err(format!("{table}: row {id} where row {count} belongs: a gap"));
            }
            // The padding's digests are not recomputed (hashing megabytes on every check
            // would slow the run down in a debug build); its bytes are covered by the copy's
            // checksums and by integrity_check, and its rows by their count and size.
            let whole = if table == "pad" {
                payload.len() == PAD_ROW_BYTES && digest.len() == 32
            } else {
                digest == row_digest(table, id, &payload)
            };
            if !whole {
                return Err(format!("{table}: row {id} does not match its digest"));
            }
        }
    }
    if counts[1] == 0 {
        return Err("the pad table is empty: not a ledger this run wrote".to_owned());
    }
    Ok(LedgerState {
        rows: counts[0],
        pad_rows: counts[1],
    })
}

/// The committed rows of a SQLite image's ledger table (for a worker's acknowledgement).
pub fn ledger_rows(path: &Path) -> rusqlite::Result<u64> {
    let db = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let rows: i64 = db.query_row("SELECT count(*) FROM ledger", [], |r| r.get(0))?;
    Ok(rows as u64)
}

/// A restored tenant root as this run's host would check it: the ledger passes
/// [`check_ledger`], and every other file is a whole blob.
pub fn check_root(root: &Path) -> Result<LedgerState, String> {
    let ledger = check_ledger(&root.join(LEDGER))?;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                stack.push(path);
            } else if !path.starts_with(root.join("gotry-state")) {
                let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                check_blob(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
            }
        }
    }
    Ok(ledger)
}

/// [`check_root`] as the fold check a restore takes.
pub fn fold_check(root: &Path) -> gotry_tenant_state::Result<bool> {
    Ok(check_root(root).is_ok())
}

/// A SQLite failure of the host's snapshot function, as the core takes a host's failure:
/// its own error, which the copy passes on unchanged.
pub fn host_failure(path: &Path, error: rusqlite::Error) -> Error {
    Error::Host(format!("{}: {error}", path.display()).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_and_images_tell_when_they_are_torn() {
        let whole = blob(b"payload");
        assert!(check_blob(&whole).is_ok());
        assert!(check_blob(&whole[..whole.len() - 1]).is_err());
        let mut flipped = whole.clone();
        flipped[12] ^= 1;
        assert!(check_blob(&flipped).is_err());

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LEDGER);
        create_ledger(&path, 64 << 10, &mut Rng::new(1)).unwrap();
        let (mut db, next) = open_ledger(&path).unwrap();
        assert_eq!(append_rows(&mut db, next, 5, &mut Rng::new(2)).unwrap(), 6);
        let image = dir.path().join("image.db");
        db.execute("VACUUM INTO ?1", [image.to_str().unwrap()]).unwrap();
        drop(db);
        let bytes = std::fs::read(&image).unwrap();
        check_sqlite_length(&bytes).unwrap();
        assert!(check_sqlite_length(&bytes[..bytes.len() - 4096]).is_err());
        assert_eq!(
            check_ledger(&image).unwrap(),
            LedgerState {
                rows: 5,
                pad_rows: 16
            }
        );
        assert_eq!(ledger_rows(&image).unwrap(), 5);
    }
}
