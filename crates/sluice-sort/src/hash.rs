//! Hash grouping: combine map output at emit time (Phoenix++ style).

use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashTable;
use sluice_api::{Aggregator, Counters, KeyOrder, Partitioner, TaskCounter};
use sluice_formats::spill::SpillWriter;

use crate::collect::Collector;
use crate::order::{key_cmp, prefix};
use crate::{Result, SortError};

/// Keys up to this many bytes live inside their slot.
const INLINE_KEY: usize = 16;
/// Accumulators up to this many bytes live inside their slot.
const INLINE_VALUE: usize = 8;

/// One distinct key, 32 bytes and 32-aligned so a slot never straddles a
/// cache line. Short keys and accumulators (word count's are both) live in
/// the slot itself, so a lookup touches one cache line; a longer key or
/// accumulator lives in the arena, its offset in the first 4 bytes of
/// `key` or `val`. The hash is not stored: it is recomputed from the key
/// when the table grows, which is rare next to lookups.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
struct Slot {
    key: [u8; INLINE_KEY],
    val: [u8; INLINE_VALUE],
    klen: u32,
    vlen: u32,
}

impl Slot {
    fn off(bytes: &[u8]) -> usize {
        u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")) as usize
    }
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
    /// The sort buffer of a spill, kept between spills.
    spill_order: Vec<SpillEntry>,
    /// The memory budget the engine spills at, if it said: the table and
    /// buffers are kept across spills while they hold under three
    /// quarters of it, so a long map phase does not reallocate them at
    /// every spill.
    budget: Option<usize>,
}

fn padded(key: &[u8]) -> [u8; INLINE_KEY] {
    let mut k = [0u8; INLINE_KEY];
    if key.len() <= INLINE_KEY {
        k[..key.len()].copy_from_slice(key);
    }
    k
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
            spill_order: Vec::new(),
            budget: None,
        }
    }

    /// Tells the collector the budget it is spilled at (see `budget`).
    pub fn with_budget(mut self, budget: usize) -> Self {
        self.budget = Some(budget);
        self
    }

    /// After a spill: keeps the emptied table and buffers when they hold
    /// under three quarters of the budget, else gives them back.
    fn settle_after_spill(&mut self) {
        self.table.clear();
        self.arena.clear();
        self.spill_order.clear();
        let keep = self.budget.is_some_and(|b| self.memory() < b / 4 * 3);
        if !keep {
            self.table = HashTable::new();
            self.arena = Vec::new();
            self.spill_order = Vec::new();
        }
    }

    fn key<'a>(arena: &'a [u8], s: &'a Slot) -> &'a [u8] {
        let n = s.klen as usize;
        if n <= INLINE_KEY {
            &s.key[..n]
        } else {
            &arena[Slot::off(&s.key)..Slot::off(&s.key) + n]
        }
    }

    fn value<'a>(arena: &'a [u8], s: &'a Slot) -> &'a [u8] {
        let n = s.vlen as usize;
        if n <= INLINE_VALUE {
            &s.val[..n]
        } else {
            &arena[Slot::off(&s.val)..Slot::off(&s.val) + n]
        }
    }

    fn check_room(&self, extra: usize) -> Result<()> {
        if self.arena.len() + extra > u32::MAX as usize {
            return Err(SortError::RecordTooLarge(extra));
        }
        Ok(())
    }

    /// Stores `value` as the slot's accumulator, inline when it fits.
    fn set_value(arena: &mut Vec<u8>, slot: &mut Slot, value: &[u8]) {
        slot.vlen = value.len() as u32;
        if value.len() <= INLINE_VALUE {
            slot.val[..value.len()].copy_from_slice(value);
        } else {
            slot.val[..4].copy_from_slice(&(arena.len() as u32).to_le_bytes());
            arena.extend_from_slice(value);
        }
    }

    fn fold_into(
        arena: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
        agg: &dyn Aggregator,
        slot: &mut Slot,
        value: &[u8],
    ) {
        let vlen = slot.vlen as usize;
        let acc = if vlen <= INLINE_VALUE {
            &mut slot.val[..vlen]
        } else {
            let off = Slot::off(&slot.val);
            &mut arena[off..off + vlen]
        };
        if agg.fold_in_place(acc, value) {
            return;
        }
        scratch.clear();
        agg.fold(acc, value, scratch);
        Self::set_value(arena, slot, scratch);
    }

    fn new_slot(&mut self, key: &[u8], value: &[u8]) -> Slot {
        let mut slot = Slot {
            key: padded(key),
            val: [0; INLINE_VALUE],
            klen: key.len() as u32,
            vlen: 0,
        };
        if key.len() > INLINE_KEY {
            slot.key[..4].copy_from_slice(&(self.arena.len() as u32).to_le_bytes());
            self.arena.extend_from_slice(key);
        }
        Self::set_value(&mut self.arena, &mut slot, value);
        slot
    }
}

/// One entry of a spill's sort: partition, key prefix, slot.
type SpillEntry = (u32, u64, Slot);

impl Collector for HashCollector {
    #[inline]
    fn collect(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_room(key.len() + value.len())?;
        self.folded += 1;
        let hash = self.hasher.hash_one(key);
        let short = padded(key);
        let klen = key.len() as u32;
        let arena = &self.arena;
        let found = self.table.find_mut(hash, |s| {
            s.klen == klen
                && if klen as usize <= INLINE_KEY {
                    s.key == short
                } else {
                    Self::key(arena, s) == key
                }
        });
        if let Some(slot) = found {
            Self::fold_into(
                &mut self.arena,
                &mut self.scratch,
                self.agg.as_ref(),
                slot,
                value,
            );
            return Ok(());
        }
        let slot = self.new_slot(key, value);
        let (arena, hasher) = (&self.arena, &self.hasher);
        self.table
            .insert_unique(hash, slot, |s| hasher.hash_one(Self::key(arena, s)));
        Ok(())
    }

    /// What the collector holds now, plus what it would need before it
    /// could hand its memory back: the sort of its entries at a spill
    /// (a `SpillEntry` each), and, when its table is full, the table twice
    /// the size that the next new key would allocate beside the current
    /// one. So a table grows only if the grown table still fits the
    /// budget, and the engine spills instead.
    fn memory(&self) -> usize {
        let table = self.table.allocation_size();
        let full = !self.table.is_empty() && self.table.len() >= self.table.capacity();
        let growth = if full { 2 * table } else { 0 };
        table
            + self.arena.capacity()
            + self.table.len().max(self.spill_order.capacity()) * std::mem::size_of::<SpillEntry>()
            + growth
    }

    fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    fn spill(&mut self, w: &mut SpillWriter, counters: &mut Counters) -> Result<()> {
        let mut order = std::mem::take(&mut self.spill_order);
        order.extend(self.table.iter().map(|s| {
            let k = Self::key(&self.arena, s);
            (
                self.partitioner.partition(k, self.partitions),
                prefix(self.order, k),
                *s,
            )
        }));
        let ko = self.order;
        order.sort_unstable_by(|a, b| {
            (a.0, a.1).cmp(&(b.0, b.1)).then_with(|| {
                key_cmp(
                    ko,
                    Self::key(&self.arena, &a.2),
                    Self::key(&self.arena, &b.2),
                )
            })
        });
        for (part, _, s) in &order {
            w.append(
                *part,
                Self::key(&self.arena, s),
                Self::value(&self.arena, s),
            )?;
        }
        counters.add(TaskCounter::CombineInputRecords, self.folded);
        counters.add(TaskCounter::CombineOutputRecords, order.len() as u64);
        self.folded = 0;
        self.spill_order = order;
        self.settle_after_spill();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use sluice_api::HashPartitioner;

    use super::*;

    /// Keeps the bytewise largest value: accumulators change length.
    struct MaxBytes;

    impl Aggregator for MaxBytes {
        fn fold_in_place(&self, acc: &mut [u8], value: &[u8]) -> bool {
            if value.len() != acc.len() {
                return false;
            }
            if value > &*acc {
                acc.copy_from_slice(value);
            }
            true
        }

        fn fold(&self, acc: &[u8], value: &[u8], out: &mut Vec<u8>) {
            out.extend_from_slice(acc.max(value));
        }
    }

    #[test]
    fn long_keys_and_growing_accumulators_round_trip() {
        let mut c = HashCollector::new(
            Arc::new(MaxBytes),
            Arc::new(HashPartitioner),
            1,
            KeyOrder::Bytewise,
        );
        let mut want: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for i in 0..5000u32 {
            let key = format!("{}-{}", "k".repeat((i % 40) as usize), i % 300).into_bytes();
            let value =
                format!("{:0width$}", i * 7919 % 1000, width = (i % 23) as usize + 1).into_bytes();
            c.collect(&key, &value).unwrap();
            let e = want.entry(key).or_insert_with(|| value.clone());
            if value > *e {
                *e = value;
            }
        }
        let rows = crate::spill_to_vec(&mut c);
        assert!(
            rows.windows(2).all(|w| w[0].0 < w[1].0),
            "keys come out sorted"
        );
        let got: BTreeMap<Vec<u8>, Vec<u8>> = rows.into_iter().collect();
        assert_eq!(got, want);
        assert!(c.is_empty());
        // A spill releases the table, so the next emit does not see a full budget.
        assert_eq!(c.memory(), 0);
    }
}
