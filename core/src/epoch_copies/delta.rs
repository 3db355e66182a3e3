//! Formats 2 to 6: a file is a base image plus a short chain of deltas, all objects of its
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
//! file gets a new base (checked with `quick_check` first when it is a database), which stores
//! only the pieces (see [`super::body::PIECE`]) that differ from the old base's. A delta also
//! stays under [`MOST`], so that it costs a few pieces of memory. A restore fetches the base and
//! the chain: at most about 1.5 × the file, however long the tenure ran.
//!
//! Digests are a hash of the blocks' SHA-256 digests and the length (a file's, from format 6,
//! of its groups of blocks: see [`Blocks`]): the block digests are what change detection
//! compares, so one pass of hashing serves both.

use std::collections::BTreeMap;

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
    // Asked only when it matters: the answer reads the cgroup's files, a cost a small copy
    // (a delta of a few blocks, hashed here) would pay each time.
    if bytes.len() / PER_THREAD <= 1 {
        return serial(bytes);
    }
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

/// The blocks of a file's group in its digest (format 6): 1 MiB of the file. A change rehashes
/// the groups it touches (8 KiB of digests each) and the list of groups (32 bytes a MiB), not
/// every block digest of the file, so a copy after a one-row change of a large ledger hashes
/// what changed.
const GROUP: usize = 256;

/// A file's block digests, in groups whose digests the file's digest is made of. A group is
/// shared (not copied) by the states of the file that have it alike: a copy after a small
/// change copies and compares a group's worth of digests per group it touched, and the list
/// of groups, instead of every block digest of the file (8 MB of them at 1 GB).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Blocks {
    groups: Vec<Arc<Group>>,
    len: usize,
}

#[derive(Debug, PartialEq, Eq)]
struct Group {
    /// [`GROUP`] digests, fewer in a file's last group.
    blocks: Vec<[u8; 32]>,
    digest: [u8; 32],
}

impl Group {
    fn of(blocks: Vec<[u8; 32]>) -> Arc<Group> {
        let digest = group_digest(&blocks);
        Arc::new(Group { blocks, digest })
    }
}

impl Blocks {
    pub(super) fn new(digests: Vec<[u8; 32]>) -> Blocks {
        Blocks {
            len: digests.len(),
            groups: digests.chunks(GROUP).map(|g| Group::of(g.to_vec())).collect(),
        }
    }

    /// How many blocks the file has.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn get(&self, index: usize) -> Option<&[u8; 32]> {
        self.groups.get(index / GROUP)?.blocks.get(index % GROUP)
    }

    /// The digests of blocks `start..end` (within the file), in order.
    pub(super) fn range(&self, start: usize, end: usize) -> impl Iterator<Item = &[u8; 32]> {
        self.groups[start / GROUP..]
            .iter()
            .flat_map(|group| &group.blocks)
            .skip(start % GROUP)
            .take(end.min(self.len).saturating_sub(start))
    }

    /// The same file, `count` blocks long, after the blocks `written` (index and digest) were
    /// written: every other block is as it was (a block past the old end that `written` does
    /// not give reads as the zero digest). Only the groups that holds are built and hashed
    /// again; the others are shared.
    pub(super) fn with_written(&self, count: usize, written: &BTreeMap<usize, [u8; 32]>) -> Blocks {
        let groups = (0..count.div_ceil(GROUP))
            .map(|g| {
                let span = g * GROUP..((g + 1) * GROUP).min(count);
                let untouched = written.range(span.clone()).next().is_none();
                match self.groups.get(g) {
                    Some(old) if untouched && old.blocks.len() == span.len() => old.clone(),
                    _ => Group::of(
                        span.map(|i| {
                            written
                                .get(&i)
                                .or_else(|| self.get(i))
                                .copied()
                                .unwrap_or([0; 32])
                        })
                        .collect(),
                    ),
                }
            })
            .collect();
        Blocks { groups, len: count }
    }

    /// The indexes of the blocks of `now` that differ from these (see [`changed_blocks`]),
    /// group by group: a group `now` shares or hashes alike is passed over whole.
    pub(super) fn changed_in(&self, now: &Blocks) -> Vec<usize> {
        let mut changed = Vec::new();
        for (g, group) in now.groups.iter().enumerate() {
            let old = match self.groups.get(g) {
                // Alike digests of as many blocks are alike blocks (SHA-256 has no known collision).
                Some(old) if old.digest == group.digest && old.blocks.len() == group.blocks.len() => continue,
                Some(old) => &old.blocks[..],
                None => &[][..],
            };
            changed.extend(
                changed_blocks(old, &group.blocks)
                    .into_iter()
                    .map(|i| g * GROUP + i),
            );
        }
        changed
    }

    /// The digest of the file, `len` bytes long, that these are the blocks of (format 6 and
    /// later; [`digest_of`] before).
    pub(super) fn file_digest(&self, len: u64) -> String {
        let mut hasher = Sha256::new();
        hasher.update(b"gotry-groups-v6");
        hasher.update(len.to_le_bytes());
        for group in &self.groups {
            hasher.update(group.digest);
        }
        hex(&hasher.finalize())
    }
}

fn group_digest(blocks: &[[u8; 32]]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for block in blocks {
        hasher.update(block);
    }
    hasher.finalize().into()
}

/// The digest of an object of `len` bytes whose blocks hash to `blocks`, and of a file in
/// formats 2 to 5.
pub(super) fn digest_of<'a>(blocks: impl IntoIterator<Item = &'a [u8; 32]>, len: u64) -> String {
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

/// The most bytes of blocks one delta holds: past it a copy takes a new base instead (which
/// stores only the pieces that differ), so a delta, held whole in memory while it is made and
/// while it is applied, costs a few pieces of memory however large the file.
pub(super) const MOST: usize = 4 * super::body::PIECE;

/// `magic, file length (u64 LE), block count (u64 LE), the block indexes (u64 LE each), the
/// blocks' bytes one after the other` (the last block of the file may be short), for a file of
/// `len` bytes whose changed blocks `block` appends to the buffer it is given.
pub(super) fn encode_with(
    len: u64,
    changed: &[usize],
    mut block: impl FnMut(usize, &mut Vec<u8>) -> Result<()>,
) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(24 + changed.len() * (8 + BLOCK));
    out.extend_from_slice(DELTA_MAGIC);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&(changed.len() as u64).to_le_bytes());
    for &index in changed {
        out.extend_from_slice(&(index as u64).to_le_bytes());
    }
    for &index in changed {
        block(index, &mut out)?;
    }
    Ok(out)
}

/// Applies a delta to the state that `file` holds, `len` bytes long, whose blocks hash to
/// `blocks`, in place: the blocks it writes are hashed as they are written, and those whose
/// bytes the new length alone changes (the old last block, grown or cut; blocks it adds
/// without writing them) are read back and hashed, so the file is never read whole. The blocks
/// the delta writes, or `None` when the delta is malformed for that state.
pub(super) fn apply_to_file(
    file: &std::fs::File,
    blocks: &mut Vec<[u8; 32]>,
    len: &mut u64,
    delta: &[u8],
) -> std::io::Result<Option<Vec<usize>>> {
    use std::os::unix::fs::FileExt;
    let word =
        |at: usize| -> Option<u64> { Some(u64::from_le_bytes(delta.get(at..at + 8)?.try_into().ok()?)) };
    let parsed = (|| {
        if delta.get(..8)? != DELTA_MAGIC {
            return None;
        }
        let new_len = word(8)?;
        let count = usize::try_from(word(16)?).ok()?;
        let indexes_end = count.checked_mul(8)?.checked_add(24)?;
        if indexes_end > delta.len() {
            return None;
        }
        let indexes = (0..count)
            .map(|n| usize::try_from(word(24 + n * 8)?).ok())
            .collect::<Option<Vec<usize>>>()?;
        let sorted = indexes.windows(2).all(|w| w[0] < w[1]);
        let inside = indexes.last().is_none_or(|&i| {
            (i as u64)
                .checked_mul(BLOCK as u64)
                .is_some_and(|start| start < new_len)
        });
        // Every block's bytes, and nothing after them.
        let mut at = indexes_end;
        for &index in &indexes {
            let start = index as u64 * BLOCK as u64;
            at = at.checked_add(usize::try_from((start + BLOCK as u64).min(new_len) - start).ok()?)?;
        }
        (sorted && inside && at == delta.len()).then_some((new_len, indexes, indexes_end))
    })();
    let Some((new_len, indexes, mut at)) = parsed else {
        return Ok(None);
    };
    let Ok(count) = usize::try_from(new_len.div_ceil(BLOCK as u64)) else {
        return Ok(None);
    };
    let old_count = blocks.len();
    file.set_len(new_len)?;
    blocks.resize(count, [0; 32]);
    for &index in &indexes {
        let start = index as u64 * BLOCK as u64;
        let end = (start + BLOCK as u64).min(new_len);
        let bytes = &delta[at..at + (end - start) as usize];
        file.write_all_at(bytes, start)?;
        blocks[index] = Sha256::digest(bytes).into();
        at += bytes.len();
    }
    if new_len != *len {
        let written: BTreeSet<usize> = indexes.iter().copied().collect();
        let mut buf = vec![0u8; BLOCK];
        let from = old_count.min(count).saturating_sub(1);
        for (index, digest) in blocks.iter_mut().enumerate().skip(from) {
            if !written.contains(&index) {
                let start = index as u64 * BLOCK as u64;
                let block = &mut buf[..((start + BLOCK as u64).min(new_len) - start) as usize];
                file.read_exact_at(block, start)?;
                *digest = Sha256::digest(&*block).into();
            }
        }
    }
    *len = new_len;
    Ok(Some(indexes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(content: &[u8], changed: &[usize]) -> Vec<u8> {
        encode_with(content.len() as u64, changed, |index, out| {
            let start = index * BLOCK;
            out.extend_from_slice(&content[start..(start + BLOCK).min(content.len())]);
            Ok(())
        })
        .unwrap()
    }

    /// A state on disk that deltas are applied to, with its block digests kept as they go.
    struct OnDisk {
        file: std::fs::File,
        blocks: Vec<[u8; 32]>,
        len: u64,
    }

    impl OnDisk {
        fn new(content: &[u8]) -> OnDisk {
            let mut file = tempfile::tempfile().unwrap();
            std::io::Write::write_all(&mut file, content).unwrap();
            OnDisk {
                file,
                blocks: block_digests(content),
                len: content.len() as u64,
            }
        }

        fn apply(&mut self, delta: &[u8]) -> Option<Vec<usize>> {
            apply_to_file(&self.file, &mut self.blocks, &mut self.len, delta).unwrap()
        }

        /// The file's bytes, checked against the digests kept.
        fn content(&self) -> Vec<u8> {
            use std::os::unix::fs::FileExt;
            let mut bytes = vec![0u8; self.file.metadata().unwrap().len() as usize];
            self.file.read_exact_at(&mut bytes, 0).unwrap();
            assert_eq!(self.len, bytes.len() as u64);
            assert!(
                self.blocks == block_digests(&bytes),
                "the digests kept are not the file's"
            );
            bytes
        }
    }

    /// The groups a change hashes again are all that it changed: after any run of writes,
    /// growths and cuts, the digest kept up to date is the one made from scratch.
    #[test]
    fn a_digest_updated_group_by_group_is_the_digest_made_whole() {
        let mut state: Vec<u8> = (0..BLOCK * GROUP * 3 + 100).map(|i| (i % 251) as u8).collect();
        let mut kept = Blocks::new(block_digests(&state));
        let mut seen = BTreeSet::new();
        for step in 0..60usize {
            let before = block_digests(&state);
            let at = (step * 7919 * BLOCK / 3) % state.len();
            state[at] ^= 0x5a;
            match step % 6 {
                1 => state.extend(std::iter::repeat_n(step as u8, BLOCK * (step % 300) + 7)),
                4 => state.truncate(state.len() - (BLOCK * (step % 200) + 11).min(state.len() / 2)),
                _ => {}
            }
            let now = block_digests(&state);
            // Written: the blocks whose digests differ, growth included.
            let written: BTreeMap<usize, [u8; 32]> = (0..now.len())
                .filter(|&i| before.get(i) != Some(&now[i]))
                .map(|i| (i, now[i]))
                .collect();
            let next = kept.with_written(now.len(), &written);
            let whole = Blocks::new(now.clone());
            assert_eq!(
                kept.changed_in(&next),
                written.keys().copied().collect::<Vec<_>>(),
                "step {step}"
            );
            kept = next;
            assert_eq!(kept, whole, "step {step}");
            let len = state.len() as u64;
            assert_eq!(kept.file_digest(len), whole.file_digest(len));
            assert!(
                seen.insert(kept.file_digest(len)),
                "step {step}: a digest seen before"
            );
        }
        // Another length of the same blocks is another file.
        assert_ne!(kept.file_digest(1), kept.file_digest(2));
    }

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
        let mut state = OnDisk::new(&base);
        assert_eq!(state.apply(&encode(&now, &changed)), Some(changed.clone()));
        assert_eq!(state.content(), now);
        // Cut short, the last block partly kept without being written.
        let shorter = &now[..BLOCK + 1];
        let cut = changed_blocks(&block_digests(&now), &block_digests(shorter));
        assert!(state.apply(&encode(shorter, &cut)).is_some());
        assert_eq!(state.content(), shorter);
        // Grown with blocks no delta writes: zeros, as SQLite reads a file grown by `set_len`.
        let mut grown = shorter.to_vec();
        grown.resize(BLOCK * 3 + 10, 0);
        grown[BLOCK * 3] = 1;
        assert_eq!(state.apply(&encode(&grown, &[3])), Some(vec![3]));
        assert_eq!(state.content(), grown);

        let mut state = OnDisk::new(&base);
        let mut torn = encode(&now, &[2, 5, 6]);
        torn.pop();
        assert_eq!(state.apply(&torn), None);
        assert_eq!(state.apply(&encode(&now, &[5, 2])), None);
        let mut past_the_end = encode(&now, &[2]);
        past_the_end[8..16].copy_from_slice(&(BLOCK as u64 * 2).to_le_bytes());
        assert_eq!(state.apply(&past_the_end), None);
        // A refused delta changed nothing.
        assert_eq!(state.content(), base);
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
            if step % 20 == 19 {
                let mut rebuilt = OnDisk::new(&base);
                for delta in &deltas {
                    assert!(rebuilt.apply(delta).is_some(), "step {step}");
                }
                assert!(
                    rebuilt.content() == state,
                    "step {step}: the chain does not rebuild the file"
                );
            }
        }
        // One delta against the base each time would have stored every block changed since.
        assert!(
            stored * 3 < cumulative,
            "stored {stored} blocks, cumulative {cumulative}"
        );
    }
}
