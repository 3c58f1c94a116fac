//! Hash grouping: combine map output at emit time (Phoenix++ style).
//!
//! Each record's key is hashed when it is collected and its home slot
//! prefetched; the record waits in a short queue ([`AHEAD`] records) and
//! is folded in when it leaves it, by which time the slot is usually in
//! cache. With millions of distinct keys, a lookup that waited for memory
//! each time dominated the map phase.

use std::sync::Arc;

use sluice_api::{Aggregator, Counters, KeyOrder, Partitioner, TaskCounter};
use sluice_formats::spill::SpillWriter;

use crate::collector::Collector;
use crate::order::{key_cmp, prefix};
use crate::radix::{self, SpillEntry};
use crate::table::{
    key_hash_padded, padded, prefetch, reserve_advised, short_hash, Probe, Slot, Table, AHEAD,
    INLINE_KEY, INLINE_VALUE,
};
use crate::{Result, SortError};

/// Records longer than this (key and value) skip the queue: it holds
/// copies, and its buffers should stay small.
const QUEUED_BYTES: usize = 256;

/// The largest table of mostly short keys, in bytes (a million slots):
/// when it is full the collector asks for a spill whatever the budget.
/// Past a few tens of megabytes nearly every probe misses the caches and
/// the TLB, and a fold costs several times what it costs in a smaller
/// table: word count over 11 million distinct words (200 MB, 2 threads,
/// 1 GiB) took 1.8 s with 128 MB tables in 4 runs and 1.45 s with 32 MB
/// tables in 17. A table whose keys are mostly long (in the arena) is
/// left to the budget: each probe reads the arena anyway, and capping it
/// only made more runs to merge (20 million UserVisits grouped by URL).
const MAX_TABLE: usize = 32 << 20;
/// The memory held at which the collector first asks whether its table
/// reduces its records (then at every doubling).
const PROBE_AT: usize = 8 << 20;
/// Share of a table's records that were new keys at or above which it is
/// [`not reducing`](HashCollector::not_reducing).
pub const GIVE_UP: f64 = 0.8;
/// Fewest records a table must have folded before its reduction counts.
pub const GIVE_UP_MIN: u64 = 10_000;

/// A collected record waiting for its slot: its hash, and a copy of it.
/// A short record (key and value fit a slot, as word count's do) waits in
/// `key` and `val`; a longer one in `bytes`, key then value (the buffer
/// is reused).
#[derive(Default)]
struct Pending {
    hash: u64,
    klen: usize,
    vlen: usize,
    key: [u8; INLINE_KEY],
    val: [u8; INLINE_VALUE],
    bytes: Vec<u8>,
}

impl Pending {
    fn is_short(&self) -> bool {
        self.klen <= INLINE_KEY && self.vlen <= INLINE_VALUE
    }
}

/// A hash table from key to accumulator. Memory grows with distinct keys,
/// not records; a spill sorts the distinct keys and writes one record each.
pub struct HashCollector {
    table: Table,
    arena: Vec<u8>,
    scratch: Vec<u8>,
    agg: Arc<dyn Aggregator>,
    /// Whether `agg` is `SumU64`, whose 8-byte counts are added here.
    sum_u64: bool,
    partitioner: Arc<dyn Partitioner>,
    partitions: u32,
    order: KeyOrder,
    folded: u64,
    /// Records collected but not yet folded in, a ring of `AHEAD`.
    queue: Vec<Pending>,
    /// Index of the oldest queued record, and how many there are.
    head: usize,
    queued: usize,
    /// The sort buffer of a spill, kept between spills.
    spill_order: Vec<SpillEntry>,
    /// The memory budget the engine spills at, if it said: the table and
    /// buffers are kept across spills while they hold under three
    /// quarters of it, so a long map phase does not reallocate them at
    /// every spill.
    budget: Option<usize>,
    /// Whether the memory held may have grown since [`Collector::over`]
    /// last looked: only a new key or a longer accumulator grows it.
    grown: bool,
    /// Set while a spill folds in the queued records: a full table then
    /// takes them past its load factor rather than doubling (see
    /// [`HashCollector::insert`]).
    spilling: bool,
    /// How many of the table's keys live in the arena.
    long_keys: usize,
    /// The memory held at which [`Collector::over`] next asks whether
    /// the table reduces its records ([`HashCollector::not_reducing`]).
    probe_at: usize,
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
            table: Table::default(),
            arena: Vec::new(),
            scratch: Vec::new(),
            sum_u64: agg.is_sum_u64(),
            agg,
            partitioner,
            partitions: partitions.max(1),
            order,
            folded: 0,
            queue: (0..AHEAD).map(|_| Pending::default()).collect(),
            head: 0,
            queued: 0,
            spill_order: Vec::new(),
            budget: None,
            grown: false,
            spilling: false,
            long_keys: 0,
            probe_at: PROBE_AT,
        }
    }

    /// Whether the table has folded few of its records since the last
    /// spill: at least `GIVE_UP_MIN` records, of which `GIVE_UP` or
    /// more were new keys. Such a table costs a cache miss per record and
    /// saves next to nothing; sorting a small buffer and combining equal
    /// neighbours does the same work in cache. As Trino's adaptive partial
    /// aggregation (off when 0.8 of rows are unique) and the skipped
    /// partial aggregations of ClickHouse and DuckDB.
    pub fn not_reducing(&self) -> bool {
        self.folded >= GIVE_UP_MIN && self.table.len() as f64 >= GIVE_UP * self.folded as f64
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
        self.long_keys = 0;
        self.spill_order.clear();
        let keep = self.budget.is_some_and(|b| self.memory() < b / 4 * 3);
        if !keep {
            self.table = Table::default();
            self.arena = Vec::new();
            self.spill_order = Vec::new();
        }
    }

    fn key<'a>(arena: &'a [u8], s: &'a Slot) -> &'a [u8] {
        let n = s.klen();
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
            Self::push_arena(arena, value);
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

    fn new_slot(&mut self, key: &[u8], short: [u8; INLINE_KEY], hash: u64, value: &[u8]) -> Slot {
        let mut slot = Slot::new(short, key.len());
        if key.len() > INLINE_KEY {
            self.long_keys += 1;
            slot.key[..4].copy_from_slice(&(self.arena.len() as u32).to_le_bytes());
            slot.key[8..].copy_from_slice(&hash.to_le_bytes());
            Self::push_arena(&mut self.arena, key);
        }
        Self::set_value(&mut self.arena, &mut slot, value);
        slot
    }

    /// The hash of the key in `s`, as [`Collector::collect`] computed it.
    fn slot_hash(&self, s: &Slot) -> u64 {
        if s.klen() <= INLINE_KEY {
            short_hash(&s.key, s.klen())
        } else {
            s.long_hash()
        }
    }

    #[inline(always)]
    fn probe(&self, hash: u64, key: &[u8], short: &[u8; INLINE_KEY]) -> Probe {
        let arena = &self.arena;
        self.table.probe(hash, |s| {
            s.klen() == key.len()
                && if key.len() <= INLINE_KEY {
                    s.key == *short
                } else {
                    s.long_hash() == hash && Self::key(arena, s) == key
                }
        })
    }

    /// Folds one record into its key's slot, making the slot if it is new.
    /// Adds an 8-byte count to an 8-byte accumulator (`SumU64`'s fold,
    /// without the call); `false` if either is another width.
    #[inline]
    fn add_count(slot: &mut Slot, value: &[u8]) -> bool {
        match <[u8; 8]>::try_from(value) {
            Ok(v) if slot.vlen == 8 => {
                let sum = u64::from_le_bytes(slot.val).wrapping_add(u64::from_le_bytes(v));
                slot.val = sum.to_le_bytes();
                true
            }
            _ => false,
        }
    }

    /// `short` is the key padded (see [`padded`]) when it fits a slot.
    #[inline]
    fn fold(&mut self, hash: u64, key: &[u8], short: [u8; INLINE_KEY], value: &[u8]) -> Result<()> {
        self.check_room(key.len() + value.len())?;
        if self.table.is_unallocated() {
            self.grow();
        }
        match self.probe(hash, key, &short) {
            Probe::Found(i) => {
                if self.sum_u64 && Self::add_count(self.table.slot_mut(i), value) {
                    return Ok(());
                }
                let arena = self.arena.len();
                Self::fold_into(
                    &mut self.arena,
                    &mut self.scratch,
                    self.agg.as_ref(),
                    self.table.slot_mut(i),
                    value,
                );
                self.grown |= self.arena.len() != arena;
            }
            Probe::Vacant(i) => self.insert(i, hash, key, short, value),
        }
        Ok(())
    }

    /// Makes the slot of a new key at the vacant slot `i`, growing the
    /// table first when it is full. Out of line: most records find their
    /// key.
    ///
    /// Not while a spill drains the queue: the engine spills because the
    /// full table's next growth would pass the budget ([`Collector::memory`]
    /// counts it), yet up to a queue of records collected before that
    /// still had to be folded in, and the first new key among them doubled
    /// the table just before the spill emptied it. Those few records go
    /// past the load factor instead; the table keeps a vacant slot.
    #[inline(never)]
    fn insert(
        &mut self,
        mut i: usize,
        hash: u64,
        key: &[u8],
        short: [u8; INLINE_KEY],
        value: &[u8],
    ) {
        if self.table.is_full() && !(self.spilling && self.table.has_vacancy()) {
            self.grow();
            i = match self.probe(hash, key, &short) {
                Probe::Vacant(i) | Probe::Found(i) => i,
            };
        }
        let slot = self.new_slot(key, short, hash, value);
        self.table.fill(i, slot);
        self.grown = true;
    }

    /// Whether the table is full at [`MAX_TABLE`] and most of its keys
    /// are in their slots: its next key spills instead of growing it.
    fn at_most_table(&self) -> bool {
        self.table.is_full()
            && self.table.allocation_size() >= MAX_TABLE
            && self.long_keys * 2 < self.table.len()
    }

    fn grow(&mut self) {
        let mut table = std::mem::take(&mut self.table);
        table.grow(|s| self.slot_hash(s));
        self.table = table;
    }

    /// Folds in the oldest queued record.
    #[inline]
    fn fold_oldest(&mut self) -> Result<()> {
        let at = self.head;
        self.head = (at + 1) % AHEAD;
        self.queued -= 1;
        let p = &mut self.queue[at];
        let (hash, klen, vlen) = (p.hash, p.klen, p.vlen);
        if p.is_short() {
            let (key, val) = (p.key, p.val);
            return self.fold(hash, &key[..klen], key, &val[..vlen]);
        }
        let bytes = std::mem::take(&mut p.bytes);
        let (key, value) = bytes.split_at(klen);
        let r = self.fold(hash, key, padded(key), value);
        self.queue[at].bytes = bytes; // kept for the next record queued there
        r
    }

    /// Folds in every queued record.
    fn drain(&mut self) -> Result<()> {
        while self.queued > 0 {
            self.fold_oldest()?;
        }
        Ok(())
    }

    /// The second stage of the lookup pipeline, for a long key: the record
    /// halfway through the queue had its home slot prefetched half a queue
    /// ago; if that slot holds a key with the same length and hash (most
    /// often the very key), its arena bytes are fetched now, so the
    /// comparison that confirms the match does not wait for memory.
    #[inline]
    fn prefetch_found_key(&self) {
        const MID: usize = AHEAD / 2;
        if self.queued <= MID {
            return;
        }
        let p = &self.queue[(self.head + self.queued - 1 - MID) % AHEAD];
        if p.klen <= INLINE_KEY {
            return;
        }
        if let Some(s) = self.table.home_slot(p.hash) {
            if !s.is_empty() && s.klen() == p.klen && s.long_hash() == p.hash {
                prefetch(&self.arena[Slot::off(&s.key)]);
                prefetch(&self.arena[Slot::off(&s.key) + p.klen - 1]);
            }
        }
    }

    /// Prefetches the arena bytes of a slot's long key and value.
    #[inline]
    fn prefetch_arena(&self, s: &Slot) {
        let (klen, vlen) = (s.klen(), s.vlen as usize);
        if klen > INLINE_KEY {
            let off = Slot::off(&s.key);
            prefetch(&self.arena[off]);
            prefetch(&self.arena[off + klen - 1]);
        }
        if vlen > INLINE_VALUE {
            prefetch(&self.arena[Slot::off(&s.val)]);
        }
    }

    /// Appends to the arena, grown onto huge pages (see
    /// [`reserve_advised`]): long keys are read in table and key order,
    /// all over it.
    fn push_arena(arena: &mut Vec<u8>, bytes: &[u8]) {
        reserve_advised(arena, bytes.len());
        arena.extend_from_slice(bytes);
    }

    /// Entries the spill's sort buffers hold or will hold, each.
    fn sort_entries(&self) -> usize {
        self.table.len().max(self.spill_order.capacity())
    }

    /// Sorts the distinct keys for a spill: by partition, prefix, then key.
    fn spill_order(&mut self) -> Vec<SpillEntry> {
        let mut order = std::mem::take(&mut self.spill_order);
        order.extend(self.table.iter().map(|(i, _)| SpillEntry {
            slot: i as u32,
            ..SpillEntry::default()
        }));
        // Long keys lie in the arena in arrival order, not table order.
        let arena = !self.arena.is_empty();
        for n in 0..order.len() {
            if let Some(ahead) = order.get(n + AHEAD).filter(|_| arena) {
                self.prefetch_arena(self.table.slot(ahead.slot as usize));
            }
            let s = self.table.slot(order[n].slot as usize);
            let k = Self::key(&self.arena, s);
            order[n].prefix = match self.order {
                // The fingerprint is the high half of the hash the slot
                // has or is quick to recompute: no pass over the key.
                KeyOrder::Fingerprint => self.slot_hash(s) >> 32,
                KeyOrder::Bytewise => prefix(self.order, k),
            };
            order[n].part = self.partitioner.partition(k, self.partitions);
        }
        radix::sort_in_place(&mut order);
        let (ko, arena, table) = (self.order, &self.arena, &self.table);
        let key = |e: &SpillEntry| Self::key(arena, table.slot(e.slot as usize));
        radix::for_ties(&mut order, |run| {
            run.sort_unstable_by(|a, b| key_cmp(ko, key(a), key(b)))
        });
        order
    }
}

impl Collector for HashCollector {
    #[inline]
    fn collect(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.folded += 1;
        let short = padded(key);
        let hash = key_hash_padded(key, &short);
        if key.len() + value.len() > QUEUED_BYTES {
            self.drain()?;
            return self.fold(hash, key, short, value);
        }
        self.table.prefetch(hash);
        if self.queued == AHEAD {
            self.fold_oldest()?;
        }
        let p = &mut self.queue[(self.head + self.queued) % AHEAD];
        p.hash = hash;
        p.klen = key.len();
        p.vlen = value.len();
        if p.is_short() {
            p.key = short;
            p.val = match value.try_into() {
                Ok(v) => v, // 8 bytes, as counts are: no copy loop
                Err(_) => {
                    let mut v = [0; INLINE_VALUE];
                    v[..value.len()].copy_from_slice(value);
                    v
                }
            };
        } else {
            p.bytes.clear();
            p.bytes.extend_from_slice(key);
            p.bytes.extend_from_slice(value);
        }
        self.queued += 1;
        self.prefetch_found_key();
        Ok(())
    }

    /// Past its budget or its largest table; and, each time the memory
    /// held doubles past `PROBE_AT`, when the table is
    /// [`not reducing`](HashCollector::not_reducing) its records, so the
    /// engine learns that early rather than after a table of the whole
    /// budget.
    #[inline]
    fn over(&mut self, budget: usize) -> bool {
        if !std::mem::take(&mut self.grown) {
            return false;
        }
        let held = self.memory();
        if held >= budget || self.at_most_table() {
            return true;
        }
        if held >= self.probe_at {
            self.probe_at = held.saturating_mul(2);
            return self.not_reducing();
        }
        false
    }

    /// What the collector holds now, plus what it would need before it
    /// could hand its memory back: the sort of its entries at a spill
    /// (one `SpillEntry` buffer, sorted in place), and, when its table is
    /// full, the table twice the size that the next new key would
    /// allocate beside the current one. So a table grows only if the grown table still fits the
    /// budget, and the engine spills instead. (The queue's few small
    /// buffers are left out.)
    fn memory(&self) -> usize {
        let table = self.table.allocation_size();
        let growth = if self.table.is_full() { 2 * table } else { 0 };
        table
            + self.arena.capacity()
            + self.sort_entries() * std::mem::size_of::<SpillEntry>()
            + growth
    }

    fn is_empty(&self) -> bool {
        self.table.len() == 0 && self.queued == 0
    }

    fn spill(&mut self, w: &mut SpillWriter, counters: &mut Counters) -> Result<()> {
        self.spilling = true;
        let drained = self.drain();
        self.spilling = false;
        drained?;
        let order = self.spill_order();
        // With nothing in the arena, looking at a slot early to prefetch
        // its arena bytes would only wait for the slot.
        let arena = !self.arena.is_empty();
        for (n, e) in order.iter().enumerate() {
            // The slots are read in key order, scattered over the table,
            // and long keys and values over the arena: each slot is
            // fetched early, and its arena bytes once it has arrived.
            if let Some(next) = order.get(n + 2 * AHEAD) {
                self.table.prefetch_index(next.slot as usize);
            }
            if let Some(next) = order.get(n + AHEAD).filter(|_| arena) {
                self.prefetch_arena(self.table.slot(next.slot as usize));
            }
            let s = self.table.slot(e.slot as usize);
            w.append(
                e.part,
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

    /// A word-count collector of one partition, spilled at `budget`.
    fn counting(budget: usize) -> HashCollector {
        HashCollector::new(
            Arc::new(sluice_api::SumU64),
            Arc::new(HashPartitioner),
            1,
            KeyOrder::Bytewise,
        )
        .with_budget(budget)
    }

    /// Counts of many distinct keys, short, long and longer than the queue
    /// takes, through table growth and a spill with the table kept.
    #[test]
    fn many_keys_of_every_length_count_right() {
        let mut c = counting(64 << 20);
        let mut want: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        let long = "x".repeat(300);
        let key = |i: u32| {
            let pad = ["", "-0123456789abcdef", &long][(i % 3) as usize];
            format!("{}{pad}", i % 20_000).into_bytes()
        };
        for round in 0..2 {
            for i in 0..50_000u32 {
                let k = key(i.wrapping_mul(2_654_435_761) % 60_000);
                c.collect(&k, &sluice_api::SumU64::encode(1)).unwrap();
                *want.entry(k).or_default() += 1;
            }
            let got: BTreeMap<Vec<u8>, u64> = crate::spill_to_vec(&mut c)
                .into_iter()
                .map(|(k, v)| (k, sluice_api::SumU64::decode(&v).unwrap()))
                .collect();
            assert_eq!(got, want, "round {round}");
            assert!(c.is_empty());
            want.clear();
        }
    }

    /// The engine spills when a full table's next growth would pass the
    /// budget: the records still queued then must not double the table on
    /// their way into the spill.
    #[test]
    fn a_spill_of_a_full_table_does_not_grow_it() {
        let mut c = counting(1 << 30);
        let mut i = 0u32;
        while c.table.is_unallocated() || !(c.table.is_full() && c.queued == AHEAD) {
            c.collect(&i.to_le_bytes(), &sluice_api::SumU64::encode(1))
                .unwrap();
            i += 1;
        }
        let size = c.table.allocation_size();
        let rows = crate::spill_to_vec(&mut c);
        assert_eq!(rows.len(), i as usize, "every queued key is spilled");
        assert_eq!(c.table.allocation_size(), size, "the table kept its size");
    }

    /// A table whose records are nearly all new keys asks to spill once
    /// it holds `PROBE_AT` bytes, and says it is not reducing; one that
    /// folds most of its records grows on.
    #[test]
    fn a_table_that_does_not_reduce_says_so_early() {
        for (repeats, reducing) in [(1u32, false), (5, true)] {
            let mut c = counting(1 << 40);
            let mut i = 0u32;
            let spilled = loop {
                c.collect(&(i / repeats).to_le_bytes(), &sluice_api::SumU64::encode(1))
                    .unwrap();
                i += 1;
                if c.over(1 << 40) {
                    break true;
                }
                if c.memory() > 2 * PROBE_AT {
                    break false;
                }
            };
            assert_eq!(spilled, !reducing, "{repeats} records a key");
            assert_eq!(c.not_reducing(), !reducing, "{repeats} records a key");
            if spilled {
                assert!(c.memory() >= PROBE_AT && c.memory() < 2 * PROBE_AT);
            }
        }
    }

    /// A table of short keys stops at [`MAX_TABLE`] whatever the budget;
    /// one whose keys are mostly in the arena grows on. (Every key comes
    /// twice, so the table reduces its records.)
    #[test]
    fn a_table_of_short_keys_spills_at_its_largest_size() {
        let fill = |c: &mut HashCollector, key: &dyn Fn(u32) -> Vec<u8>| {
            let mut i = 0u32;
            while !c.over(1 << 40) {
                for _ in 0..2 {
                    c.collect(&key(i), &sluice_api::SumU64::encode(1)).unwrap();
                }
                i += 1;
            }
            i
        };
        let mut c = counting(1 << 40);
        let n = fill(&mut c, &|i| i.to_le_bytes().to_vec());
        assert_eq!(c.table.allocation_size(), MAX_TABLE);
        assert!(c.table.is_full());
        let rows = crate::spill_to_vec(&mut c);
        assert_eq!(rows.len(), n as usize, "every key is spilled");
        assert_eq!(c.table.allocation_size(), MAX_TABLE, "the table is kept");

        let mut c = counting(1 << 40);
        let long = |i: u32| format!("http://example.com/{i:010}").into_bytes();
        let mut i = 0u32;
        while c.table.allocation_size() <= MAX_TABLE {
            for _ in 0..2 {
                c.collect(&long(i), &sluice_api::SumU64::encode(1)).unwrap();
            }
            assert!(!c.over(1 << 40), "long keys grow the table on");
            i += 1;
        }
    }
}
