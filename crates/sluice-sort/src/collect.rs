//! The sort collector and the sink that writes combiner output to a spill.

use std::sync::Arc;

use sluice_api::{
    Counters, Error as ApiError, KeyOrder, Partitioner, ReduceContext, Sink, TaskCounter, Values,
};
use sluice_formats::spill::{put_bytes, SpillWriter};
use sluice_formats::FormatError;

use crate::collector::Collector;
use crate::fold::FoldTable;
use crate::merge::ErrorSink;
use crate::order::{key_cmp, prefix, PREFIX_BYTES};
use crate::radix;
use crate::table::prefetch;

/// How many records ahead a spill prefetches the arena bytes it copies.
const PREFETCH_AHEAD: usize = 8;
use crate::{Result, SortError};

/// Index entry of one record in the arena: 32 bytes, and all the sort moves.
#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    prefix: u64,
    /// Key bytes 8..16 big-endian, zero padded (bytewise order only): lines
    /// of text often share their first 8 bytes.
    prefix2: u64,
    part: u32,
    off: u32,
    klen: u32,
    vlen: u32,
}

impl radix::Keyed for Entry {
    #[inline]
    fn part(&self) -> u32 {
        self.part
    }
    #[inline]
    fn prefix(&self) -> u64 {
        self.prefix
    }
}

/// Orders two entries whose partition and prefix are equal. For bytewise
/// order the second prefix (bytes 8..16) decides next; then, the keys
/// agreeing on their first 16 bytes (zero padded), when either is at most
/// 16 bytes long it is a prefix of the other and the lengths decide, else
/// the bytes after 16.
#[inline]
fn tie_cmp(arena: &[u8], order: KeyOrder, a: &Entry, b: &Entry) -> std::cmp::Ordering {
    let key = |e: &Entry| &arena[e.off as usize..(e.off + e.klen) as usize];
    match order {
        KeyOrder::Bytewise => a.prefix2.cmp(&b.prefix2).then_with(|| {
            if a.klen.min(b.klen) as usize <= 2 * PREFIX_BYTES {
                a.klen.cmp(&b.klen)
            } else {
                key(a)[2 * PREFIX_BYTES..].cmp(&key(b)[2 * PREFIX_BYTES..])
            }
        }),
        KeyOrder::Fingerprint => key_cmp(order, key(a), key(b)),
    }
}

/// Hadoop-style map output buffer: serialized key/value bytes in one arena,
/// fixed-size index entries sorted by (partition, key prefix, full key).
pub struct SortCollector {
    arena: Vec<u8>,
    entries: Vec<Entry>,
    partitioner: Arc<dyn Partitioner>,
    /// Whether `partitioner` is the hash partitioner.
    hash: bool,
    partitions: u32,
    order: KeyOrder,
    combiner: Option<sluice_api::ReducerFactory>,
    /// The sort's second buffer, kept from spill to spill.
    scratch: Vec<Entry>,
    /// Bytes the second buffer may take ([`SortCollector::with_sort_room`]).
    sort_room: usize,
    /// Folds records before they are collected ([`SortCollector::with_fold`]).
    fold: Option<Box<FoldTable>>,
    /// What the collected entries' keys are like ([`KeyShape`]).
    shape: KeyShape,
    /// The attempt's cancellation, which the combiner's contexts carry.
    cancel: sluice_api::Cancel,
}

/// What a spill's keys are like, gathered as they are collected: the
/// radix key's bits, and their lengths or-ed and and-ed together (all are
/// the same when the two agree).
#[derive(Debug, Clone, Copy)]
struct KeyShape {
    bits: radix::KeyBits,
    len_or: u32,
    len_and: u32,
}

impl KeyShape {
    const NONE: KeyShape = KeyShape {
        bits: radix::KeyBits::NONE,
        len_or: 0,
        len_and: u32::MAX,
    };

    #[inline]
    fn add(&mut self, e: &Entry) {
        self.bits.add(e.part, e.prefix);
        self.len_or |= e.klen;
        self.len_and &= e.klen;
    }

    /// Whether every key is `n` bytes long for one `n` of at most `max`.
    fn all_equal_within(self, max: usize) -> bool {
        self.len_or == self.len_and && self.len_or as usize <= max
    }
}

impl SortCollector {
    /// A collector for `partitions` partitions.
    pub fn new(
        partitioner: Arc<dyn Partitioner>,
        partitions: u32,
        order: KeyOrder,
        combiner: Option<sluice_api::ReducerFactory>,
    ) -> Self {
        SortCollector {
            arena: Vec::new(),
            entries: Vec::new(),
            hash: partitioner.is_hash(),
            partitioner,
            partitions: partitions.max(1),
            order,
            combiner,
            scratch: Vec::new(),
            sort_room: 0,
            fold: None,
            shape: KeyShape::NONE,
            cancel: sluice_api::Cancel::default(),
        }
    }

    /// Gives the combiner's contexts the attempt's `cancel`.
    pub fn with_cancel(mut self, cancel: sluice_api::Cancel) -> Self {
        self.cancel = cancel;
        self
    }

    /// Folds records with `agg` at emit time in a [`FoldTable`] before
    /// they are collected (the job's combiner must be `agg`'s).
    pub fn with_fold(mut self, agg: Arc<dyn sluice_api::Aggregator>) -> Self {
        self.fold = Some(Box::new(FoldTable::new(agg)));
        self
    }

    /// Collects what the fold table holds, emptying it.
    fn drain_fold(&mut self, counters: &mut Counters) -> Result<()> {
        let Some(fold) = self.fold.as_mut() else {
            return Ok(());
        };
        counters.add(TaskCounter::CombineInputRecords, fold.take_folded());
        let custom = (!self.hash).then_some(&*self.partitioner);
        let to = (custom, self.partitions, self.order);
        let (arena, entries, shape) = (&mut self.arena, &mut self.entries, &mut self.shape);
        fold.drain(|k, v| push_record(arena, entries, shape, to, k, v))
    }

    /// Lets a spill's sort use a second buffer of up to `bytes` (room in
    /// the memory budget beyond the bytes at which the collector spills),
    /// which sorts small integer keys in half the time
    /// (least-significant-digit passes). Without it the sort is in place.
    pub fn with_sort_room(mut self, bytes: usize) -> Self {
        self.sort_room = bytes;
        self
    }

    fn key(&self, e: &Entry) -> &[u8] {
        &self.arena[e.off as usize..(e.off + e.klen) as usize]
    }

    fn value(&self, e: &Entry) -> &[u8] {
        let start = (e.off + e.klen) as usize;
        &self.arena[start..start + e.vlen as usize]
    }

    /// Sorts the index by (partition, prefix) with radix passes in place
    /// (a comparison sort spent 14% of TeraSort comparing entries spread
    /// over tens of megabytes), then each run of equal prefixes by
    /// [`tie_cmp`]. When every key has the same length, of at most the
    /// prefix's bytes, and the order is bytewise, equal prefixes are equal
    /// keys and the ties need no look (a pass over the index PageRank's
    /// spills spent 2% of their job in).
    fn sort(&mut self) {
        let (arena, order) = (&self.arena, self.order);
        let room = self.sort_room / std::mem::size_of::<Entry>();
        radix::sort_with_scratch(&mut self.entries, self.shape.bits, &mut self.scratch, room);
        if order == KeyOrder::Bytewise && self.shape.all_equal_within(PREFIX_BYTES) {
            return;
        }
        radix::for_ties(&mut self.entries, |run| {
            run.sort_unstable_by(|a, b| tie_cmp(arena, order, a, b))
        });
    }

    /// End of the group starting at entry `i`: entries with the same
    /// partition and key.
    fn group_end(&self, i: usize) -> usize {
        let first = &self.entries[i];
        let k = self.key(first);
        let mut j = i + 1;
        while j < self.entries.len() {
            let e = &self.entries[j];
            if e.part != first.part
                || e.prefix != first.prefix
                || e.prefix2 != first.prefix2
                || e.klen != first.klen
                || (e.klen as usize > 2 * PREFIX_BYTES && self.key(e) != k)
            {
                break;
            }
            j += 1;
        }
        j
    }

    /// Writes the sorted entries as they are. Sorted, they point all over
    /// the arena: each record's first and last bytes are prefetched
    /// [`PREFETCH_AHEAD`] records before it is copied, so the copies do not
    /// wait for memory one after another (on TeraSort they took a quarter
    /// of the whole job).
    fn write_plain(&self, w: &mut SpillWriter) -> Result<()> {
        for (n, e) in self.entries.iter().enumerate() {
            self.prefetch_entry(n + PREFETCH_AHEAD);
            w.append(e.part, self.key(e), self.value(e))?;
        }
        Ok(())
    }

    /// Prefetches the first and last arena bytes of entry `n`, if any.
    #[inline]
    fn prefetch_entry(&self, n: usize) {
        if let Some(e) = self.entries.get(n) {
            let start = e.off as usize;
            let end = start + (e.klen + e.vlen) as usize;
            if end > start {
                prefetch(&self.arena[start]);
                prefetch(&self.arena[end - 1]);
            }
        }
    }

    /// Writes the sorted entries folded with `agg`, the job's combiner's
    /// aggregator ([`SortCollector::with_fold`]): what that combiner
    /// writes, without a combiner's calls per group and per value, and a
    /// group of one record (most of them) copied straight from the arena.
    fn write_folded(
        &self,
        w: &mut SpillWriter,
        agg: &dyn sluice_api::Aggregator,
        counters: &mut Counters,
    ) -> Result<()> {
        let (mut acc, mut tmp) = (Vec::new(), Vec::new());
        let mut i = 0;
        let mut groups = 0;
        while i < self.entries.len() {
            self.prefetch_entry(i + PREFETCH_AHEAD);
            let j = self.group_end(i);
            let e = &self.entries[i];
            groups += 1;
            if j == i + 1 {
                w.append(e.part, self.key(e), self.value(e))?;
                i = j;
                continue;
            }
            acc.clear();
            acc.extend_from_slice(self.value(e));
            for v in &self.entries[i + 1..j] {
                agg.fold_into(&mut acc, self.value(v), &mut tmp);
            }
            w.append(e.part, self.key(e), &acc)?;
            i = j;
        }
        counters.add(TaskCounter::CombineInputRecords, self.entries.len() as u64);
        counters.add(TaskCounter::CombineOutputRecords, groups);
        Ok(())
    }

    /// Writes the sorted entries through the combiner: a fresh instance
    /// for each partition (setup, every group, cleanup), as Hadoop runs its
    /// combiner per spilled partition, so that a combiner whose output lags
    /// its input (a Streaming process) writes each record into its own
    /// partition.
    fn write_combined(
        &self,
        w: &mut SpillWriter,
        factory: &sluice_api::ReducerFactory,
        counters: &mut Counters,
    ) -> Result<()> {
        let mut i = 0;
        let mut sink = SpillSink::new(w);
        while i < self.entries.len() {
            let part = self.entries[i].part;
            sink.part = part;
            let mut c = factory();
            let r = c.setup(
                &mut ReduceContext::new(&mut sink, counters)
                    .for_partition(part)
                    .with_cancel(&self.cancel),
            );
            sink.check(r)?;
            while i < self.entries.len() && self.entries[i].part == part {
                // A group's first record, some records ahead (groups are
                // often single records).
                self.prefetch_entry(i + PREFETCH_AHEAD);
                let j = self.group_end(i);
                let e = self.entries[i];
                let mut values = EntryValues {
                    collector: self,
                    entries: &self.entries[i..j],
                };
                counters.add(TaskCounter::CombineInputRecords, (j - i) as u64);
                let r = c.reduce(
                    self.key(&e),
                    &mut values,
                    &mut ReduceContext::new(&mut sink, counters)
                        .for_partition(part)
                        .with_cancel(&self.cancel),
                );
                sink.check(r)?;
                i = j;
            }
            let r = c.cleanup(
                &mut ReduceContext::new(&mut sink, counters)
                    .for_partition(part)
                    .with_cancel(&self.cancel),
            );
            sink.check(r)?;
        }
        counters.add(TaskCounter::CombineOutputRecords, sink.records);
        Ok(())
    }
}

impl Collector for SortCollector {
    #[inline]
    fn collect(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let custom = (!self.hash).then_some(&*self.partitioner);
        let to = (custom, self.partitions, self.order);
        let (arena, entries, shape) = (&mut self.arena, &mut self.entries, &mut self.shape);
        match self.fold.as_mut() {
            None => push_record(arena, entries, shape, to, key, value),
            Some(fold) => fold.put(key, value, |k, v| {
                push_record(arena, entries, shape, to, k, v)
            }),
        }
    }

    fn memory(&self) -> usize {
        self.arena.len()
            + self.entries.len() * std::mem::size_of::<Entry>()
            + self.fold.as_ref().map_or(0, |f| f.memory())
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.fold.as_ref().is_none_or(|f| f.is_empty())
    }

    fn spill(&mut self, w: &mut SpillWriter, counters: &mut Counters) -> Result<()> {
        self.drain_fold(counters)?;
        self.sort();
        match (self.combiner.clone(), &self.fold) {
            (Some(_), Some(fold)) => self.write_folded(w, &**fold.aggregator(), counters)?,
            (Some(factory), None) => self.write_combined(w, &factory, counters)?,
            (None, _) => self.write_plain(w)?,
        }
        self.arena.clear();
        self.entries.clear();
        self.shape = KeyShape::NONE;
        Ok(())
    }
}

/// Adds a record to `arena` and `entries`, partitioned and ordered as
/// `to` says (no partitioner: [`sluice_api::HashPartitioner`]'s partition,
/// computed here without a virtual call).
#[inline]
fn push_record(
    arena: &mut Vec<u8>,
    entries: &mut Vec<Entry>,
    shape: &mut KeyShape,
    to: (Option<&dyn Partitioner>, u32, KeyOrder),
    key: &[u8],
    value: &[u8],
) -> Result<()> {
    let (partitioner, partitions, order) = to;
    let off = arena.len();
    let end = off + key.len() + value.len();
    if end > u32::MAX as usize {
        return Err(SortError::RecordTooLarge(key.len() + value.len()));
    }
    put_bytes(arena, key);
    put_bytes(arena, value);
    let e = Entry {
        prefix: prefix(order, key),
        prefix2: match order {
            KeyOrder::Bytewise => {
                prefix(KeyOrder::Bytewise, key.get(PREFIX_BYTES..).unwrap_or(&[]))
            }
            KeyOrder::Fingerprint => 0,
        },
        part: match partitioner {
            Some(p) => p.partition(key, partitions),
            None => sluice_api::HashPartitioner::of(key, partitions),
        },
        off: off as u32,
        klen: key.len() as u32,
        vlen: value.len() as u32,
    };
    shape.add(&e);
    entries.push(e);
    Ok(())
}

struct EntryValues<'a> {
    collector: &'a SortCollector,
    entries: &'a [Entry],
}

impl Values for EntryValues<'_> {
    fn next_value(&mut self) -> Option<&[u8]> {
        let (first, rest) = self.entries.split_first()?;
        self.entries = rest;
        Some(self.collector.value(first))
    }
}

/// A [`Sink`] appending to one partition of a spill file. A write error is
/// kept here and user code sees [`ApiError::Aborted`].
pub struct SpillSink<'w> {
    writer: &'w mut SpillWriter,
    /// The partition records go to.
    pub part: u32,
    /// Records written.
    pub records: u64,
    err: Option<FormatError>,
}

impl<'w> SpillSink<'w> {
    /// A sink writing to partition 0 of `writer` until `part` is set.
    pub fn new(writer: &'w mut SpillWriter) -> Self {
        SpillSink {
            writer,
            part: 0,
            records: 0,
            err: None,
        }
    }
}

impl ErrorSink for SpillSink<'_> {
    fn take_error(&mut self) -> Option<SortError> {
        self.err.take().map(SortError::Format)
    }
}

impl Sink for SpillSink<'_> {
    fn emit(&mut self, key: &[u8], value: &[u8]) -> sluice_api::Result<()> {
        match self.writer.append(self.part, key, value) {
            Ok(()) => {
                self.records += 1;
                Ok(())
            }
            Err(e) => {
                self.err = Some(e);
                Err(ApiError::Aborted)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use sluice_api::HashPartitioner;

    use super::*;

    /// Keys of 0-20 bytes over {0, 1, 'a'}: many share an 8-byte prefix and
    /// differ only in length or in trailing zero bytes.
    fn tricky_keys(n: usize) -> Vec<Vec<u8>> {
        let mut x = 99u64;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let len = (x >> 59) as usize % 21;
                (0..len)
                    .map(|i| [0u8, 1, b'a'][((x >> (i % 20 * 3)) % 3) as usize])
                    .collect()
            })
            .collect()
    }

    /// Collects `keys` (empty values) into `c` and spills them: the keys
    /// as spilled, and as they should be in `order`.
    fn spill_keys(
        c: &mut SortCollector,
        keys: &[Vec<u8>],
        order: KeyOrder,
    ) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        for k in keys {
            c.collect(k, b"").unwrap();
        }
        let got = crate::spill_to_vec(c).into_iter().map(|(k, _)| k).collect();
        let mut want = keys.to_vec();
        want.sort_by(|a, b| key_cmp(order, a, b));
        (got, want)
    }

    #[test]
    fn spills_come_out_in_exact_byte_order() {
        for order in [KeyOrder::Bytewise, KeyOrder::Fingerprint] {
            let mut c = SortCollector::new(Arc::new(HashPartitioner), 1, order, None);
            let (got, want) = spill_keys(&mut c, &tricky_keys(4000), order);
            assert_eq!(got, want, "{order:?}");
        }
    }

    /// Keys all of one length of at most 8 bytes skip the look at ties
    /// (equal prefixes are equal keys); keys differing only in length or
    /// trailing zeros, in the next spill of the same collector, do not.
    #[test]
    fn keys_of_one_short_length_sort_without_a_tie_pass() {
        let mut x = 11u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for order in [KeyOrder::Bytewise, KeyOrder::Fingerprint] {
            let mut c = SortCollector::new(Arc::new(HashPartitioner), 1, order, None)
                .with_sort_room(1 << 30);
            for len in [1usize, 3, 8] {
                for spill in [
                    (0..20_000)
                        .map(|_| (next() % 300).to_be_bytes()[8 - len..].to_vec())
                        .collect::<Vec<_>>(),
                    tricky_keys(20_000),
                ] {
                    let (got, want) = spill_keys(&mut c, &spill, order);
                    assert_eq!(got, want, "{order:?}, {len} bytes");
                }
            }
        }
    }

    /// With a fold table in front, a spill holds the same combined records
    /// as without: hot keys folded at emit time, the rest sorted and
    /// combined, the table emptied into every spill; and the fold table's
    /// folds count as combine input.
    #[test]
    fn a_fold_table_changes_no_spill() {
        use sluice_api::{aggregate_combiner, SumU64};
        let agg: Arc<dyn sluice_api::Aggregator> = Arc::new(SumU64);
        let mut x = 5u64;
        let keys: Vec<Vec<u8>> = (0..50_000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                match i % 4 {
                    0 | 1 => (x % 30).to_be_bytes().to_vec(),
                    2 => (x % 20_000).to_be_bytes().to_vec(),
                    _ => format!("a long key, not for the table {}", x % 500).into_bytes(),
                }
            })
            .collect();
        let spill = |fold: bool, keys: &[Vec<u8>]| {
            let mut c = SortCollector::new(
                Arc::new(HashPartitioner),
                1,
                KeyOrder::Bytewise,
                Some(aggregate_combiner(agg.clone())),
            );
            if fold {
                c = c.with_fold(agg.clone());
            }
            for (i, k) in keys.iter().enumerate() {
                c.collect(k, &SumU64::encode(i as u64)).unwrap();
            }
            assert!(!c.is_empty());
            let (got, counters) = crate::spill_counting(&mut c);
            assert!(c.is_empty(), "the table is emptied into the spill");
            (got, counters.get(TaskCounter::CombineInputRecords))
        };
        let (plain, plain_in) = spill(false, &keys);
        let (folded, folded_in) = spill(true, &keys);
        assert_eq!(plain, folded);
        assert_eq!(plain_in, keys.len() as u64);
        assert_eq!(folded_in, keys.len() as u64, "every record folded once");
    }

    /// Enough records for the radix passes, over several partitions, with
    /// ties on the 8-byte prefix and long random keys alike.
    #[test]
    fn large_spills_are_ordered_by_partition_then_key() {
        let mut keys = tricky_keys(30_000);
        let mut x = 7u64;
        keys.extend((0..30_000).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_be_bytes()
                .iter()
                .chain(&x.to_le_bytes()[..3])
                .copied()
                .collect()
        }));
        let p = Arc::new(HashPartitioner);
        for order in [KeyOrder::Bytewise, KeyOrder::Fingerprint] {
            let mut c = SortCollector::new(p.clone(), 5, order, None);
            for k in &keys {
                c.collect(k, b"v").unwrap();
            }
            c.sort();
            let got: Vec<(u32, &[u8])> = c.entries.iter().map(|e| (e.part, c.key(e))).collect();
            let mut want: Vec<(u32, &[u8])> = keys
                .iter()
                .map(|k| (p.partition(k, 5), k.as_slice()))
                .collect();
            want.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| key_cmp(order, a.1, b.1)));
            assert!(got == want, "{order:?}");
        }
    }
}
