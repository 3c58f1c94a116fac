//! Hash grouping: combine map output at emit time (Phoenix++ style).

use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::hash_table::Entry as TableEntry;
use hashbrown::HashTable;
use sluice_api::{Aggregator, Counters, KeyOrder, Partitioner, TaskCounter};
use sluice_formats::spill::SpillWriter;

use crate::collect::Collector;
use crate::order::{key_cmp, prefix};
use crate::{Result, SortError};

/// One distinct key: where its key and accumulator live in the arena.
#[derive(Debug, Clone, Copy)]
struct Slot {
    hash: u64,
    off: u32,
    klen: u32,
    voff: u32,
    vlen: u32,
}

/// A hash table from key to accumulator. Memory grows with distinct keys,
/// not records; a spill sorts the distinct keys and writes one record each.
pub struct HashCollector {
    table: HashTable<Slot>,
    arena: Vec<u8>,
    scratch: Vec<u8>,
    hasher: foldhash::fast::FixedState,
    agg: Arc<dyn Aggregator>,
    partitioner: Arc<dyn Partitioner>,
    partitions: u32,
    order: KeyOrder,
    folded: u64,
}

impl HashCollector {
    /// A collector folding values with `agg`.
    pub fn new(
        agg: Arc<dyn Aggregator>,
        partitioner: Arc<dyn Partitioner>,
        partitions: u32,
        order: KeyOrder,
    ) -> Self {
        HashCollector {
            table: HashTable::new(),
            arena: Vec::new(),
            scratch: Vec::new(),
            hasher: foldhash::fast::FixedState::with_seed(0x5eed),
            agg,
            partitioner,
            partitions: partitions.max(1),
            order,
            folded: 0,
        }
    }

    fn key(&self, s: &Slot) -> &[u8] {
        &self.arena[s.off as usize..(s.off + s.klen) as usize]
    }

    fn value(&self, s: &Slot) -> &[u8] {
        &self.arena[s.voff as usize..(s.voff + s.vlen) as usize]
    }

    fn check_room(&self, extra: usize) -> Result<()> {
        if self.arena.len() + extra > u32::MAX as usize {
            return Err(SortError::RecordTooLarge(extra));
        }
        Ok(())
    }

    fn fold_into(
        arena: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
        agg: &dyn Aggregator,
        slot: &mut Slot,
        value: &[u8],
    ) {
        let acc = &mut arena[slot.voff as usize..(slot.voff + slot.vlen) as usize];
        if agg.fold_in_place(acc, value) {
            return;
        }
        scratch.clear();
        agg.fold(acc, value, scratch);
        slot.voff = arena.len() as u32;
        slot.vlen = scratch.len() as u32;
        arena.extend_from_slice(scratch);
    }
}

impl Collector for HashCollector {
    #[inline]
    fn collect(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_room(key.len() + value.len())?;
        self.folded += 1;
        let hash = self.hasher.hash_one(key);
        let arena = &self.arena;
        let entry = self.table.entry(
            hash,
            |s| s.hash == hash && &arena[s.off as usize..(s.off + s.klen) as usize] == key,
            |s| s.hash,
        );
        match entry {
            TableEntry::Occupied(mut o) => {
                Self::fold_into(
                    &mut self.arena,
                    &mut self.scratch,
                    self.agg.as_ref(),
                    o.get_mut(),
                    value,
                );
            }
            TableEntry::Vacant(v) => {
                let off = self.arena.len() as u32;
                let slot = Slot {
                    hash,
                    off,
                    klen: key.len() as u32,
                    voff: off + key.len() as u32,
                    vlen: value.len() as u32,
                };
                v.insert(slot);
                self.arena.extend_from_slice(key);
                self.arena.extend_from_slice(value);
            }
        }
        Ok(())
    }

    fn memory(&self) -> usize {
        self.arena.len() + self.table.capacity() * (std::mem::size_of::<Slot>() + 1)
    }

    fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    fn spill(&mut self, w: &mut SpillWriter, counters: &mut Counters) -> Result<()> {
        let mut order: Vec<(u32, u64, Slot)> = self
            .table
            .iter()
            .map(|s| {
                let k = self.key(s);
                (
                    self.partitioner.partition(k, self.partitions),
                    prefix(self.order, k),
                    *s,
                )
            })
            .collect();
        let ko = self.order;
        order.sort_unstable_by(|a, b| {
            (a.0, a.1)
                .cmp(&(b.0, b.1))
                .then_with(|| key_cmp(ko, self.key(&a.2), self.key(&b.2)))
        });
        for (part, _, s) in &order {
            w.append(*part, self.key(s), self.value(s))?;
        }
        counters.add(TaskCounter::CombineInputRecords, self.folded);
        counters.add(TaskCounter::CombineOutputRecords, order.len() as u64);
        self.folded = 0;
        self.table.clear();
        self.arena.clear();
        Ok(())
    }
}
