//! Format 2: a file is a base image plus at most one delta, both objects of its lineage.
//!
//! A delta holds every block of the file that differs from its base (blocks of 4 KiB, SQLite's
//! default page size, so a one-row change is a few blocks), so a restore fetches the base and
//! one delta: at most about 1.5 × the file, however long the tenure ran, with no chain to
//! replay. A delta that would pass half the file's size is not written; the file gets a new
//! base instead (checked with `quick_check` first when it is a database).
//!
//! Digests are a hash of the blocks' SHA-256 digests and the length: the block digests are what
//! change detection compares, so one pass of hashing serves both.

use super::*;

/// The unit of change detection and of a delta.
pub(super) const BLOCK: usize = 4096;
const DELTA_MAGIC: &[u8; 8] = b"GTDELTA1";

/// SHA-256 of every block of `bytes`, in order.
pub(super) fn block_digests(bytes: &[u8]) -> Vec<[u8; 32]> {
    bytes
        .chunks(BLOCK)
        .map(|block| Sha256::digest(block).into())
        .collect()
}

/// The digest of a file (or object) of `len` bytes whose blocks hash to `blocks`.
pub(super) fn digest_of(blocks: &[[u8; 32]], len: u64) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"gotry-blocks-v2");
    hasher.update(len.to_le_bytes());
    for block in blocks {
        hasher.update(block);
    }
    hex(&hasher.finalize())
}

pub(super) fn digest(bytes: &[u8]) -> String {
    digest_of(&block_digests(bytes), bytes.len() as u64)
}

pub(super) fn hex(bytes: &[u8]) -> String {
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// The indexes of the blocks of `now` that differ from a base whose blocks hash to `base`.
pub(super) fn changed_blocks(base: &[[u8; 32]], now: &[[u8; 32]]) -> Vec<usize> {
    (0..now.len()).filter(|&i| base.get(i) != Some(&now[i])).collect()
}

/// `magic, file length (u64 LE), block count (u64 LE), the block indexes (u64 LE each), the
/// blocks' bytes one after the other` (the last block of the file may be short).
pub(super) fn encode(content: &[u8], changed: &[usize]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + changed.len() * (8 + BLOCK));
    out.extend_from_slice(DELTA_MAGIC);
    out.extend_from_slice(&(content.len() as u64).to_le_bytes());
    out.extend_from_slice(&(changed.len() as u64).to_le_bytes());
    for &index in changed {
        out.extend_from_slice(&(index as u64).to_le_bytes());
    }
    for &index in changed {
        let start = index * BLOCK;
        out.extend_from_slice(&content[start..(start + BLOCK).min(content.len())]);
    }
    out
}

/// Applies a delta to its base in place; `None` when the delta is malformed for this base.
pub(super) fn apply(mut base: Vec<u8>, delta: &[u8]) -> Option<Vec<u8>> {
    let word =
        |at: usize| -> Option<u64> { Some(u64::from_le_bytes(delta.get(at..at + 8)?.try_into().ok()?)) };
    if delta.get(..8)? != DELTA_MAGIC {
        return None;
    }
    let len = usize::try_from(word(8)?).ok()?;
    let count = usize::try_from(word(16)?).ok()?;
    let indexes_end = count.checked_mul(8)?.checked_add(24)?;
    if indexes_end > delta.len() {
        return None;
    }
    base.resize(len, 0);
    let mut at = indexes_end;
    let mut previous = None;
    for n in 0..count {
        let index = usize::try_from(word(24 + n * 8)?).ok()?;
        if previous.is_some_and(|p| p >= index) {
            return None;
        }
        previous = Some(index);
        let start = index.checked_mul(BLOCK)?;
        if start >= len {
            return None;
        }
        let end = (start + BLOCK).min(len);
        let bytes = delta.get(at..at + (end - start))?;
        base[start..end].copy_from_slice(bytes);
        at += end - start;
    }
    (at == delta.len()).then_some(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delta_rebuilds_the_file_from_its_base_and_rejects_a_tampered_one() {
        let base: Vec<u8> = (0..BLOCK * 5 + 100).map(|i| (i % 251) as u8).collect();
        let mut now = base.clone();
        now[BLOCK * 2 + 7] ^= 0xff;
        now.extend_from_slice(&[9; BLOCK + 3]);
        let changed = changed_blocks(&block_digests(&base), &block_digests(&now));
        assert_eq!(changed, vec![2, 5, 6]);
        let delta = encode(&now, &changed);
        assert_eq!(apply(base.clone(), &delta).as_deref(), Some(&now[..]));
        let shorter = &now[..BLOCK + 1];
        let delta = encode(
            shorter,
            &changed_blocks(&block_digests(&base), &block_digests(shorter)),
        );
        assert_eq!(apply(base.clone(), &delta).as_deref(), Some(shorter));
        let mut torn = encode(&now, &[2, 5, 6]);
        torn.pop();
        assert_eq!(apply(base.clone(), &torn), None);
        assert_eq!(apply(base, &encode(&now, &[5, 2])), None);
    }
}
