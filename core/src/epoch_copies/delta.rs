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

/// SHA-256 of every block of `bytes`, in order. A large file is hashed by one thread per core,
/// each over a run of whole blocks: the hash is most of what a copy after a small change
/// costs (every block is compared), and of what a first copy and a restore spend beyond I/O.
pub(super) fn block_digests(bytes: &[u8]) -> Vec<[u8; 32]> {
    /// Below this much per thread, starting one costs more than it saves.
    const PER_THREAD: usize = 4 << 20;
    let serial = |bytes: &[u8]| -> Vec<[u8; 32]> {
        bytes
            .chunks(BLOCK)
            .map(|block| Sha256::digest(block).into())
            .collect()
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(bytes.len() / PER_THREAD);
    if threads <= 1 {
        return serial(bytes);
    }
    let run = bytes.len().div_ceil(threads).div_ceil(BLOCK) * BLOCK;
    std::thread::scope(|scope| {
        let runs: Vec<_> = bytes
            .chunks(run)
            .map(|part| scope.spawn(move || serial(part)))
            .collect();
        runs.into_iter()
            .flat_map(|run| run.join().expect("hashing does not panic"))
            .collect()
    })
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

/// Digests of a base's blocks by index.
pub(super) type BlockDigests = Vec<(usize, [u8; 32])>;

/// Applies a delta to its base in place; `None` when the delta is malformed for this base.
/// Also gives the digests of the base's blocks that the delta replaced or cut off, by index,
/// hashed before they went: with the file's own block digests they make the base's (see
/// [`base_blocks`]), so a restore hashes the file once, not the base and the file apart.
pub(super) fn apply(mut base: Vec<u8>, delta: &[u8]) -> Option<(Vec<u8>, BlockDigests)> {
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
    let indexes = (0..count)
        .map(|n| usize::try_from(word(24 + n * 8)?).ok())
        .collect::<Option<Vec<usize>>>()?;
    if indexes.windows(2).any(|w| w[0] >= w[1])
        || indexes
            .last()
            .is_some_and(|&i| i.checked_mul(BLOCK).is_none_or(|start| start >= len))
    {
        return None;
    }
    let base_count = base.len().div_ceil(BLOCK);
    let base_block = |base: &[u8], index: usize| -> [u8; 32] {
        Sha256::digest(&base[index * BLOCK..((index + 1) * BLOCK).min(base.len())]).into()
    };
    let cut_off = len.div_ceil(BLOCK)..base_count;
    let mut replaced: BlockDigests = indexes
        .iter()
        .copied()
        .filter(|&index| index < base_count)
        .chain(cut_off)
        .map(|index| (index, base_block(&base, index)))
        .collect();
    replaced.sort_unstable_by_key(|&(index, _)| index);
    base.resize(len, 0);
    let mut at = indexes_end;
    for index in indexes {
        let start = index * BLOCK;
        let end = (start + BLOCK).min(len);
        let bytes = delta.get(at..at + (end - start))?;
        base[start..end].copy_from_slice(bytes);
        at += end - start;
    }
    (at == delta.len()).then_some((base, replaced))
}

/// The block digests of a base of `base_len` bytes, from those of the file a delta made of it
/// and the digests [`apply`] gave of the blocks it replaced or cut off; `None` when those do
/// not cover the base (a delta that is not what it claims: its base then fails its digest).
pub(super) fn base_blocks(
    file: &[[u8; 32]],
    replaced: &[(usize, [u8; 32])],
    base_len: u64,
) -> Option<Vec<[u8; 32]>> {
    let count = usize::try_from(base_len).ok()?.div_ceil(BLOCK);
    let mut blocks: Vec<Option<[u8; 32]>> = (0..count).map(|i| file.get(i).copied()).collect();
    for &(index, digest) in replaced {
        *blocks.get_mut(index)? = Some(digest);
    }
    blocks.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_file_hashed_in_runs_gives_the_digests_of_its_blocks_in_order() {
        let bytes: Vec<u8> = (0..(9 << 20) + 1234).map(|i| (i % 253) as u8).collect();
        let one_by_one: Vec<[u8; 32]> = bytes.chunks(BLOCK).map(|b| Sha256::digest(b).into()).collect();
        assert_eq!(block_digests(&bytes), one_by_one);
    }

    #[test]
    fn a_delta_rebuilds_the_file_from_its_base_and_rejects_a_tampered_one() {
        let base: Vec<u8> = (0..BLOCK * 5 + 100).map(|i| (i % 251) as u8).collect();
        let mut now = base.clone();
        now[BLOCK * 2 + 7] ^= 0xff;
        now.extend_from_slice(&[9; BLOCK + 3]);
        let changed = changed_blocks(&block_digests(&base), &block_digests(&now));
        assert_eq!(changed, vec![2, 5, 6]);
        let delta = encode(&now, &changed);
        let (rebuilt, replaced) = apply(base.clone(), &delta).unwrap();
        assert_eq!(rebuilt, now);
        // The base's own block digests come back from the file's and the replaced ones.
        assert_eq!(
            base_blocks(&block_digests(&now), &replaced, base.len() as u64),
            Some(block_digests(&base))
        );
        let shorter = &now[..BLOCK + 1];
        let delta = encode(
            shorter,
            &changed_blocks(&block_digests(&base), &block_digests(shorter)),
        );
        let (rebuilt, replaced) = apply(base.clone(), &delta).unwrap();
        assert_eq!(rebuilt, shorter);
        assert_eq!(
            base_blocks(&block_digests(shorter), &replaced, base.len() as u64),
            Some(block_digests(&base))
        );
        let mut torn = encode(&now, &[2, 5, 6]);
        torn.pop();
        assert_eq!(apply(base.clone(), &torn), None);
        assert_eq!(apply(base, &encode(&now, &[5, 2])), None);
    }
}
