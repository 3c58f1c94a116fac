//! K-way merge of sorted spill segments and grouping by key.

use std::cmp::Ordering;

use sluice_api::{Cancel, Counters, KeyOrder, ReduceContext, Reducer, Sink, Values};
use sluice_formats::spill::SegmentReader;

use crate::order::{holds_whole, merge_prefix, MERGE_BYTES};
use crate::{Result, SortError};

/// Merges sorted segment readers into one sorted stream.
///
/// A tree of losers (Knuth's replacement selection): `tree[0]` holds the
/// source with the smallest current key, every internal node the loser of
/// the match played there, so replacing the winner replays one path of
/// log2(k) matches against stored losers, half the comparisons of a binary
/// heap. Keys order by their cached 16-byte prefixes (`merge_prefix`)
/// first, then bytes;
/// equal keys come out in source order; exhausted sources lose every match.
/// Written by hand because no library merges borrowed keys from many
/// readers without copying them.
pub struct Merger {
    sources: Vec<SegmentReader>,
    /// Each source's current 16-byte sort prefix ([`merge_prefix`]).
    prefixes: Vec<u128>,
    /// Whether each source is exhausted.
    done: Vec<bool>,
    /// `tree[0]`: the winner; `tree[1..k]`: the loser of each match, with
    /// its prefix beside it, so a replay reads one node per level and
    /// never waits on a load that depends on the last match; leaves are
    /// implicit (leaf of source `s` is node `k + s`).
    tree: Vec<(u128, usize)>,
    order: KeyOrder,
}

/// The prefix of an exhausted source: no smaller than any key's, so an
/// exhausted source loses every match its prefix decides.
const DONE: u128 = u128::MAX;

/// `(a, b)` when `first` holds, else `(b, a)`, as conditional moves.
#[inline(always)]
fn select(first: bool, a: usize, b: usize) -> (usize, usize) {
    let mask = (first as usize).wrapping_neg();
    let x = (a ^ b) & mask;
    (b ^ x, a ^ x)
}

impl Merger {
    /// A merger over `sources`, each positioned before its first record.
    pub fn new(mut sources: Vec<SegmentReader>, order: KeyOrder) -> Result<Self> {
        let k = sources.len();
        let mut prefixes = vec![DONE; k];
        let mut done = vec![false; k];
        for (i, s) in sources.iter_mut().enumerate() {
            if s.advance()? {
                prefixes[i] = merge_prefix(order, s.key());
            } else {
                done[i] = true;
            }
        }
        let mut m = Merger {
            sources,
            prefixes,
            done,
            tree: vec![(DONE, 0); k.max(1)],
            order,
        };
        if k > 0 {
            let w = m.build(1);
            m.tree[0] = (m.prefixes[w], w);
        }
        Ok(m)
    }

    /// Plays the tournament below `node`, storing losers; returns the winner.
    fn build(&mut self, node: usize) -> usize {
        let k = self.sources.len();
        if node >= k {
            return node - k;
        }
        let (a, b) = (self.build(2 * node), self.build(2 * node + 1));
        let (winner, loser) = if self.less(a, b) { (a, b) } else { (b, a) };
        self.tree[node] = (self.prefixes[loser], loser);
        winner
    }

    fn winner(&self) -> Option<usize> {
        let w = self.tree.first()?.1;
        (!self.sources.is_empty() && !self.done[w]).then_some(w)
    }

    /// The current record, or `None` when every source is exhausted.
    #[inline]
    pub fn current(&self) -> Option<(&[u8], &[u8])> {
        self.winner()
            .map(|s| (self.sources[s].key(), self.sources[s].value()))
    }

    /// Moves past the current record. The replay selects each match's
    /// winner without a branch: with keys from many runs the outcome of a
    /// match is a coin toss, and a mispredicted branch per tree level cost
    /// more than the comparison.
    pub fn advance(&mut self) -> Result<()> {
        let Some(top) = self.winner() else {
            return Ok(());
        };
        if self.sources[top].advance()? {
            self.prefixes[top] = merge_prefix(self.order, self.sources[top].key());
        } else {
            self.done[top] = true;
            self.prefixes[top] = DONE;
        }
        let k = self.sources.len();
        let mut winner = top;
        let mut wp = self.prefixes[top];
        let mut node = (top + k) / 2;
        while node > 0 {
            let (op, other) = self.tree[node];
            // Equal prefixes holding their keys are equal keys, and the
            // earlier source's record comes first.
            let other_wins = if op != wp {
                op < wp
            } else if holds_whole(op) {
                other < winner
            } else {
                self.less(other, winner)
            };
            let (w, l) = select(other_wins, other, winner);
            let mask = (other_wins as u128).wrapping_neg();
            let x = (op ^ wp) & mask;
            self.tree[node] = (op ^ x, l);
            (wp, winner) = (wp ^ x, w);
            node /= 2;
        }
        self.tree[0] = (wp, winner);
        Ok(())
    }

    /// Whether source `a`'s current record sorts before source `b`'s.
    /// Exhausted sources hold the prefix [`DONE`], so different prefixes
    /// decide alone, as do equal ones holding their keys whole; other
    /// equal ones look at exhaustion, then the keys.
    fn less(&self, a: usize, b: usize) -> bool {
        let (pa, pb) = (self.prefixes[a], self.prefixes[b]);
        if pa != pb {
            return pa < pb;
        }
        if holds_whole(pa) {
            return a < b;
        }
        match (self.done[a], self.done[b]) {
            (true, true) => return a < b,
            (true, false) => return false,
            (false, true) => return true,
            (false, false) => {}
        }
        let (ka, kb) = (self.sources[a].key(), self.sources[b].key());
        // Bytewise keys agreeing on their first bytes, both longer.
        let ord = match self.order {
            KeyOrder::Bytewise => ka[MERGE_BYTES..].cmp(&kb[MERGE_BYTES..]),
            KeyOrder::Fingerprint => ka.cmp(kb),
        };
        ord.then(a.cmp(&b)) == Ordering::Less
    }

    /// Whether the current record's key is `key`, whose sort prefix is
    /// `prefix`: the cached prefixes rule most keys out without reading
    /// key bytes, and decide alone for prefixes holding their keys whole.
    fn at_key(&self, key: &[u8], prefix: u128) -> bool {
        let Some(top) = self.winner() else {
            return false;
        };
        self.prefixes[top] == prefix && (holds_whole(prefix) || self.sources[top].key() == key)
    }

    /// The sort prefix of the current record's key.
    fn current_prefix(&self) -> u128 {
        self.winner().map_or(0, |top| self.prefixes[top])
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
        if !self.started {
            // The merger stands at the record the group's key came from.
            self.started = true;
            self.records += 1;
            return self.merger.current().map(|(_, v)| v);
        }
        if let Err(e) = self.merger.advance() {
            self.err = Some(e);
            self.done = true;
            return None;
        }
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
/// writing to `sink`; the reducer's contexts carry the attempt's `cancel`.
pub fn reduce_groups<S: ErrorSink>(
    merger: &mut Merger,
    reducer: &mut dyn Reducer,
    sink: &mut S,
    counters: &mut Counters,
    partition: u32,
    cancel: &Cancel,
) -> Result<GroupStats> {
    let mut stats = GroupStats::default();
    let r = reducer.setup(
        &mut ReduceContext::new(sink, counters)
            .for_partition(partition)
            .with_cancel(cancel),
    );
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
        let r = reducer.reduce(
            &key,
            &mut values,
            &mut ReduceContext::new(sink, counters)
                .for_partition(partition)
                .with_cancel(cancel),
        );
        let finished = values.finish();
        sink.check(r)?;
        stats.records += finished?;
        stats.groups += 1;
    }
    let r = reducer.cleanup(
        &mut ReduceContext::new(sink, counters)
            .for_partition(partition)
            .with_cancel(cancel),
    );
    sink.check(r)?;
    Ok(stats)
}
