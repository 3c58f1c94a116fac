//! Map tasks over many small blocks: packed by the worker that holds them.
//!
//! A data set of many small files has as many small blocks; a map task a
//! block would spend its time starting tasks, not reading (Hadoop's "small
//! files problem"). As Hadoop's `CombineFileInputFormat` does, blocks under
//! half the packing target ([`sluice_formats::input::packable`]) are packed
//! into tasks of up to the target, each task's blocks held by one worker so
//! that it stays node-local; larger blocks keep a task each.
//!
//! The target is the job's `--split-size` when given, else Spark's rule
//! for file partitions: the data set's block size, but no more than the
//! input spread over the cluster's map slots (so every slot gets work),
//! and no less than [`MIN_TARGET`].

use std::collections::BTreeMap;

use sluice_formats::input::{pack, packable};
use sluice_proto::catalog::BlockMeta;

use crate::input::MapInput;

/// The smallest default packing target: below this, a task's start costs
/// more than its reading.
pub const MIN_TARGET: u64 = 4 << 20;

/// The block size assumed for a data set not cut by size (a job's output):
/// `sluice put`'s default.
pub const DEFAULT_BLOCK_SIZE: u64 = 128_000_000;

/// The packing target of a job's maps: `split_size` when the job gives
/// one, else the block size (`block_size`, 0 for [`DEFAULT_BLOCK_SIZE`])
/// capped at `total` bytes over `slots` map slots, and at least
/// [`MIN_TARGET`].
pub fn target(split_size: Option<u64>, block_size: u64, total: u64, slots: usize) -> u64 {
    if let Some(s) = split_size {
        return s.max(1);
    }
    let block = if block_size == 0 {
        DEFAULT_BLOCK_SIZE
    } else {
        block_size
    };
    let per_slot = total / slots.max(1) as u64;
    block.min(per_slot.max(MIN_TARGET))
}

/// The map inputs of a job over `blocks`: a task for each block of at
/// least half `target`, in order, then the small ones packed. Each
/// worker `live` says is alive takes in turn up to `target` bytes of the
/// small blocks it holds that no task has yet, so tasks spread over the
/// holders as replicas allow; blocks no live worker holds are packed in
/// order (the job fails on them, as on any unreadable block).
pub fn map_inputs(
    blocks: Vec<BlockMeta>,
    target: u64,
    live: &dyn Fn(&str) -> bool,
) -> Vec<MapInput> {
    let mut inputs = Vec::new();
    let mut small = Vec::new();
    for b in blocks {
        if packable(b.len, target) {
            small.push(b);
        } else {
            inputs.push(MapInput::Blocks(vec![b]));
        }
    }
    let groups = by_holder(&small, target, live);
    let mut cells: Vec<Option<BlockMeta>> = small.into_iter().map(Some).collect();
    let mut take = |i: usize| cells[i].take().expect("each block packed once");
    for g in groups {
        inputs.push(MapInput::Blocks(g.into_iter().map(&mut take).collect()));
    }
    // What no live worker holds is left.
    let orphans: Vec<BlockMeta> = cells.into_iter().flatten().collect();
    inputs.extend(
        pack(orphans, target, |b| b.len)
            .into_iter()
            .map(MapInput::Blocks),
    );
    inputs
}

/// Groups of indices into `small`: workers (in uid order) take turns, each
/// packing up to `target` bytes of the blocks it holds that are still
/// free, until no worker holds a free block.
fn by_holder(small: &[BlockMeta], target: u64, live: &dyn Fn(&str) -> bool) -> Vec<Vec<usize>> {
    let mut held: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, b) in small.iter().enumerate() {
        for u in b.replicas.iter().filter(|u| live(u)) {
            held.entry(u.as_str()).or_default().push(i);
        }
    }
    let mut queues: Vec<std::collections::VecDeque<usize>> =
        held.into_values().map(Into::into).collect();
    let mut free = vec![true; small.len()];
    let mut groups = Vec::new();
    loop {
        let mut any = false;
        for q in &mut queues {
            let mut group = Vec::new();
            let mut bytes = 0u64;
            while let Some(&i) = q.front() {
                if !free[i] {
                    q.pop_front();
                    continue;
                }
                if !group.is_empty() && bytes.saturating_add(small[i].len) > target {
                    break;
                }
                q.pop_front();
                free[i] = false;
                bytes += small[i].len;
                group.push(i);
            }
            if !group.is_empty() {
                any = true;
                groups.push(group);
            }
        }
        if !any {
            return groups;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_proto::ids::BlockId;

    fn block(i: usize, len: u64, holders: &[&str]) -> BlockMeta {
        BlockMeta {
            id: BlockId::new(format!("b{i}")).unwrap(),
            len,
            crc: 0,
            replicas: holders.iter().map(|u| u.to_string()).collect(),
            corrupt: Vec::new(),
        }
    }

    fn ids(inputs: &[MapInput]) -> Vec<Vec<String>> {
        inputs
            .iter()
            .map(|m| m.blocks().iter().map(|b| b.id.to_string()).collect())
            .collect()
    }

    #[test]
    fn small_blocks_pack_by_holder_and_large_ones_stay_alone() {
        let blocks = vec![
            block(0, 100, &["a"]),
            block(1, 900, &["b"]),
            block(2, 100, &["b"]),
            block(3, 200, &["a"]),
            block(4, 240, &["a"]),
            block(5, 50, &["dead"]),
        ];
        let live = |u: &str| u != "dead";
        let inputs = map_inputs(blocks, 500, &live);
        assert_eq!(
            ids(&inputs),
            [
                vec!["b1"],
                vec!["b0", "b3"],
                vec!["b2"],
                vec!["b4"],
                vec!["b5"]
            ]
        );
        // Every packed task's blocks share a live holder.
        for m in &inputs[1..4] {
            let first = &m.blocks()[0].replicas;
            assert!(first
                .iter()
                .any(|u| m.blocks().iter().all(|b| b.replicas.contains(u))));
        }
    }

    #[test]
    fn replicated_blocks_spread_over_their_holders() {
        let blocks: Vec<_> = (0..8).map(|i| block(i, 10, &["a", "b"])).collect();
        let inputs = map_inputs(blocks, 40, &|_| true);
        assert_eq!(inputs.len(), 2);
        assert!(inputs.iter().all(|m| m.blocks().len() == 4));
    }

    #[test]
    fn the_target_follows_the_split_size_the_block_size_and_the_slots() {
        assert_eq!(target(Some(1000), 0, 1 << 40, 4), 1000);
        assert_eq!(target(None, 64 << 20, 1 << 40, 4), 64 << 20);
        assert_eq!(target(None, 0, 100 << 20, 4), 25 << 20);
        assert_eq!(target(None, 0, 1 << 20, 4), MIN_TARGET);
        assert_eq!(target(None, 1024, 1 << 20, 4), 1024);
    }
}
