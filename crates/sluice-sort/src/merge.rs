//! K-way merge of sorted spill segments and grouping by key.

use std::cmp::Ordering;

use sluice_api::{Counters, KeyOrder, ReduceContext, Reducer, Sink, Values};
use sluice_formats::spill::SegmentReader;

use crate::order::{prefix16, prefix16_tie};
use crate::{Result, SortError};

/// Merges sorted segment readers into one sorted stream.
///
/// A binary min-heap of source indices, ordered by each source's current
/// key (then source index, so equal keys come out in source order). Written
/// by hand because `std::collections::BinaryHeap` cannot compare elements by
/// data borrowed from elsewhere without copying every key.
pub struct Merger {
    sources: Vec<SegmentReader>,
    /// Each source's current 16-byte sort prefix ([`prefix16`]), compared
    /// before keys.
    prefixes: Vec<u128>,
    heap: Vec<usize>,
    order: KeyOrder,
}

impl Merger {
    /// A merger over `sources`, each positioned before its first record.
    pub fn new(mut sources: Vec<SegmentReader>, order: KeyOrder) -> Result<Self> {
        let mut heap = Vec::with_capacity(sources.len());
        let mut prefixes = vec![0; sources.len()];
        for (i, s) in sources.iter_mut().enumerate() {
            if s.advance()? {
                prefixes[i] = prefix16(order, s.key());
                heap.push(i);
            }
        }
        let mut m = Merger {
            sources,
            prefixes,
            heap,
            order,
        };
        for i in (0..m.heap.len() / 2).rev() {
            m.sift_down(i);
        }
        Ok(m)
    }

    /// The current record, or `None` when every source is exhausted.
    #[inline]
    pub fn current(&self) -> Option<(&[u8], &[u8])> {
        self.heap
            .first()
            .map(|&s| (self.sources[s].key(), self.sources[s].value()))
    }

    /// Moves past the current record.
    pub fn advance(&mut self) -> Result<()> {
        let Some(&top) = self.heap.first() else {
            return Ok(());
        };
        if self.sources[top].advance()? {
            self.prefixes[top] = prefix16(self.order, self.sources[top].key());
        } else {
            let last = self.heap.len() - 1;
            self.heap.swap(0, last);
            self.heap.pop();
        }
        self.sift_down(0);
        Ok(())
    }

    fn less(&self, a: usize, b: usize) -> bool {
        let (sa, sb) = (self.heap[a], self.heap[b]);
        let ord = self.prefixes[sa].cmp(&self.prefixes[sb]).then_with(|| {
            let (ka, kb) = (self.sources[sa].key(), self.sources[sb].key());
            match self.order {
                KeyOrder::Bytewise => prefix16_tie(ka, kb),
                KeyOrder::Fingerprint => ka.cmp(kb),
            }
        });
        ord.then(sa.cmp(&sb)) == Ordering::Less
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < n && self.less(l, m) {
                m = l;
            }
            if r < n && self.less(r, m) {
                m = r;
            }
            if m == i {
                return;
            }
            self.heap.swap(i, m);
            i = m;
        }
    }

    /// Whether the current record's key is `key`, whose sort prefix is
    /// `prefix`: the cached prefixes and the lengths rule most keys out
    /// without reading key bytes.
    fn at_key(&self, key: &[u8], prefix: u128) -> bool {
        let Some(&top) = self.heap.first() else {
            return false;
        };
        let k = self.sources[top].key();
        self.prefixes[top] == prefix && k.len() == key.len() && k == key
    }

    /// The sort prefix of the current record's key.
    fn current_prefix(&self) -> u128 {
        self.heap.first().map_or(0, |&top| self.prefixes[top])
    }
}

/// Counts of one [`reduce_groups`] call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Key groups.
    pub groups: u64,
    /// Records read.
    pub records: u64,
}

/// The values of the current key group, read from the merger.
struct GroupValues<'a> {
    merger: &'a mut Merger,
    key: &'a [u8],
    prefix: u128,
    started: bool,
    done: bool,
    records: u64,
    err: Option<SortError>,
}

impl Values for GroupValues<'_> {
    fn next_value(&mut self) -> Option<&[u8]> {
        if self.done {
            return None;
        }
        if self.started {
            if let Err(e) = self.merger.advance() {
                self.err = Some(e);
                self.done = true;
                return None;
            }
        }
        self.started = true;
        if !self.merger.at_key(self.key, self.prefix) {
            self.done = true;
            return None;
        }
        self.records += 1;
        self.merger.current().map(|(_, v)| v)
    }
}

impl GroupValues<'_> {
    /// Skips values the reducer left unread, leaving the merger at the next
    /// group.
    fn finish(mut self) -> Result<u64> {
        while self.next_value().is_some() {}
        match self.err {
            Some(e) => Err(e),
            None => Ok(self.records),
        }
    }
}

/// A [`Sink`] that keeps its own write errors: user code sees
/// [`sluice_api::Error::Aborted`], and the engine reports the kept error.
pub trait ErrorSink: Sink {
    /// The error a failed write kept, if any.
    fn take_error(&mut self) -> Option<SortError>;

    /// Turns the outcome of a user call into this crate's result, preferring
    /// a kept write error over the `Aborted` the user code passed on.
    fn check(&mut self, r: sluice_api::Result<()>) -> Result<()> {
        if let Some(e) = self.take_error() {
            return Err(e);
        }
        r.map_err(SortError::User)
    }
}

/// Feeds every key group of `merger` to `reducer` (with setup and cleanup),
/// writing to `sink`.
pub fn reduce_groups<S: ErrorSink>(
    merger: &mut Merger,
    reducer: &mut dyn Reducer,
    sink: &mut S,
    counters: &mut Counters,
) -> Result<GroupStats> {
    let mut stats = GroupStats::default();
    let r = reducer.setup(&mut ReduceContext::new(sink, counters));
    sink.check(r)?;
    let mut key = Vec::new();
    while let Some((k, _)) = merger.current() {
        key.clear();
        key.extend_from_slice(k);
        let prefix = merger.current_prefix();
        let mut values = GroupValues {
            merger,
            key: &key,
            prefix,
            started: false,
            done: false,
            records: 0,
            err: None,
        };
        let r = reducer.reduce(&key, &mut values, &mut ReduceContext::new(sink, counters));
        let finished = values.finish();
        sink.check(r)?;
        stats.records += finished?;
        stats.groups += 1;
    }
    let r = reducer.cleanup(&mut ReduceContext::new(sink, counters));
    sink.check(r)?;
    Ok(stats)
}
