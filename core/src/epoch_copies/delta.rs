//! Formats 2 and 3: a file is a base image plus a short chain of deltas, all objects of its
//! lineage.
//!
//! A delta holds the blocks of the file that differ from the state before it (blocks of 4 KiB,
//! SQLite's default page size, so a one-row change is a few blocks). Each copy appends the
//! blocks changed since the lineage's last copy, and the chain is kept short as a binary
//! counter keeps its digits: while the delta before the new one is no larger, the two are
//! merged into one (the union of their blocks, read from the file as it is now). A copy thus
//! stores one delta of about what changed since the last copy, plus now and then a merge: the
//! bytes stored per change grow with the logarithm of the tenure's copies, not with all that
//! changed since the base, and the chain is a few deltas long. Once the chain's blocks pass half
//! the file, they are folded into one delta against the base, and once that passes half, the
//! file gets a new base (checked with `quick_check` first when it is a database). A restore
//! fetches the base and the chain: at most about 1.5 × the file, however long the tenure ran.
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

/// The longest chain a merge leaves: a bound on the objects a restore of one file fetches,
/// even when each copy changes fewer blocks than the one before (which the binary counter
/// alone would keep apart).
pub(super) const MAX_CHAIN: usize = 8;

/// The chain of a file's deltas, as the blocks each writes, after one more delta writing
/// `now`: merged from the end while the delta before the last is no larger (or the chain is
/// too long). Only the last entry is new; the others are the chain's first ones, unchanged.
/// Blocks at or past `blocks` (the file's block count now) drop out of a merge: the merged
/// delta cuts the file to its length.
pub(super) fn chain_after(chain: &[Arc<Vec<usize>>], now: Vec<usize>, blocks: usize) -> Vec<Arc<Vec<usize>>> {
    let mut chain = chain.to_vec();
    chain.push(Arc::new(now));
    while chain.len() >= 2
        && (chain.len() > MAX_CHAIN || chain[chain.len() - 2].len() <= chain[chain.len() - 1].len())
    {
        let last = chain.pop().expect("two or more");
        let before = chain.pop().expect("two or more");
        let mut union: Vec<usize> = before
            .iter()
            .chain(last.iter())
            .copied()
            .filter(|&i| i < blocks)
            .collect();
        union.sort_unstable();
        union.dedup();
        chain.push(Arc::new(union));
    }
    chain
}

/// The indexes of the blocks of `now` that differ from a base whose blocks hash to `base`.
pub(super) fn changed_blocks(base: &[[u8; 32]], now: &[[u8; 32]]) -> Vec<usize> {
    (0..now.len()).filter(|&i| base.get(i) != Some(&now[i])).collect()
}

/// `magic, file length (u64 LE), block count (u64 LE), the block indexes (u64 LE each), the
/// blocks' bytes one after the other` (the last block of the file may be short).
pub(super) fn encode(content: &[u8], changed: &[usize]) -> Vec<u8> {
    encode_with(content.len() as u64, changed, |index| {
        let start = index * BLOCK;
        &content[start..(start + BLOCK).min(content.len())]
    })
}

/// [`encode`] for a file of `len` bytes whose changed blocks come from `block`.
pub(super) fn encode_with<'a>(len: u64, changed: &[usize], block: impl Fn(usize) -> &'a [u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + changed.len() * (8 + BLOCK));
    out.extend_from_slice(DELTA_MAGIC);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&(changed.len() as u64).to_le_bytes());
    for &index in changed {
        out.extend_from_slice(&(index as u64).to_le_bytes());
    }
    for &index in changed {
        out.extend_from_slice(block(index));
    }
    out
}

/// Digests of a base's blocks by index.
pub(super) type BlockDigests = Vec<(usize, [u8; 32])>;

/// What [`apply`] made of a state and a delta.
#[derive(Debug, PartialEq)]
pub(super) struct Applied {
    pub(super) content: Vec<u8>,
    /// The digests of the earlier state's blocks that the delta replaced or cut off, by index,
    /// hashed before they went: with the new state's block digests they make the earlier
    /// state's (see [`base_blocks`]), so a restore hashes the file once, not each state apart.
    pub(super) replaced: BlockDigests,
    /// The blocks the delta writes.
    pub(super) indexes: Vec<usize>,
}

/// Applies a delta to the state it was made against, in place; `None` when the delta is
/// malformed for that state.
pub(super) fn apply(mut base: Vec<u8>, delta: &[u8]) -> Option<Applied> {
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
    for &index in &indexes {
        let start = index * BLOCK;
        let end = (start + BLOCK).min(len);
        let bytes = delta.get(at..at + (end - start))?;
        base[start..end].copy_from_slice(bytes);
        at += end - start;
    }
    (at == delta.len()).then_some(Applied {
        content: base,
        replaced,
        indexes,
    })
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
        let Applied {
            content: rebuilt,
            replaced,
            indexes,
        } = apply(base.clone(), &delta).unwrap();
        assert_eq!(rebuilt, now);
        assert_eq!(indexes, changed);
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
        let Applied {
            content: rebuilt,
            replaced,
            ..
        } = apply(base.clone(), &delta).unwrap();
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

    #[test]
    fn a_chain_kept_short_by_merges_rebuilds_every_state_and_stores_near_the_change() {
        let mut state: Vec<u8> = (0..BLOCK * 64).map(|i| (i % 251) as u8).collect();
        let base = state.clone();
        let (mut chain, mut deltas): (Vec<Arc<Vec<usize>>>, Vec<Vec<u8>>) = (Vec::new(), Vec::new());
        let mut blocks = block_digests(&state);
        let (mut stored, mut cumulative) = (0, 0);
        for step in 0..200usize {
            let i = (step * 7) % (state.len() / BLOCK);
            state[i * BLOCK + step % BLOCK] ^= 1;
            match step % 10 {
                3 => state.extend_from_slice(&[step as u8; BLOCK + 5]),
                7 => state.truncate(state.len() - BLOCK - 1),
                _ => {}
            }
            let now = block_digests(&state);
            let next = chain_after(&chain, changed_blocks(&blocks, &now), now.len());
            assert!(next.len() <= MAX_CHAIN, "step {step}: {} deltas", next.len());
            // The chain's first entries are the old ones, objects and all; the last is new.
            assert!(next
                .iter()
                .zip(&chain)
                .take(next.len() - 1)
                .all(|(a, b)| Arc::ptr_eq(a, b)));
            deltas.truncate(next.len() - 1);
            deltas.push(encode(&state, next.last().unwrap()));
            stored += next.last().unwrap().len();
            cumulative += changed_blocks(&block_digests(&base), &now).len();
            (chain, blocks) = (next, now);
            let rebuilt = deltas
                .iter()
                .try_fold(base.clone(), |s, d| apply(s, d).map(|a| a.content))
                .unwrap();
            assert!(
                rebuilt == state,
                "step {step}: the chain does not rebuild the file"
            );
        }
        // One delta against the base each time would have stored every block changed since.
        assert!(
            stored * 3 < cumulative,
            "stored {stored} blocks, cumulative {cumulative}"
        );
    }
}
