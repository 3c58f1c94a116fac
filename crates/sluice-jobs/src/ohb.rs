//! The OSU HiBD MapReduce shuffle micro-benchmarks (MR-AVG, MR-RAND,
//! MR-SKEW): jobs that touch no file system. Each map task runs over a
//! synthetic split and emits `pairs_per_map` key/value pairs made in
//! memory; the pattern decides which reducer each pair goes to; reducers
//! count what they receive and write nothing.
//!
//! What a pair is, byte by byte:
//!
//! - `bytes` type: the key is 16 bytes: the destination reducer (`u32`
//!   big-endian), the map task's index (`u32` big-endian), the pair's
//!   number within the map (`u64` big-endian). Keys are unique, so the
//!   shuffle sorts real keys and every reduce group has one value.
//! - `text` type: the same three numbers as 32 lowercase hex digits
//!   (8 + 8 + 16), so keys and values are printable.
//! - The value fills the pair to `pair_size`: `pair_size` counts key bytes
//!   plus value bytes as the mapper emits them (no length prefixes; Sluice's
//!   spill format adds 8 bytes of lengths per record, Hadoop's
//!   `BytesWritable` 8 too). Values are seeded random bytes (`bytes`) or
//!   letters (`text`), made once per map task and reused for each pair.
//!
//! The partitioner reads the destination back from the key, so what the
//! pattern chose is exactly where a pair goes, and a re-run map task (same
//! index, same seed) makes the same pairs.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use sluice_api::{
    JobSpec, KeyOrder, MapContext, Mapper, Partitioner, ReduceContext, Reducer, Result, Values,
};

/// The user counter group of the reducers' tallies.
pub const COUNTER_GROUP: &str = "OHB";

/// How pairs are spread over reducers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// MR-AVG: round-robin over the job's pairs, so every reducer gets the
    /// same share (within one pair).
    Avg,
    /// MR-RAND: each pair's reducer drawn uniformly by a seeded generator.
    Rand,
    /// MR-SKEW: reducer 0 gets half of each map's pairs, reducer 1 a
    /// quarter, reducer 2 an eighth, ...; the last reducer gets the rest.
    Skew,
}

impl Pattern {
    /// The benchmark's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Avg => "avg",
            Pattern::Rand => "rand",
            Pattern::Skew => "skew",
        }
    }

    /// The pattern with this [`name`](Pattern::name).
    pub fn from_name(name: &str) -> Option<Pattern> {
        [Pattern::Avg, Pattern::Rand, Pattern::Skew]
            .into_iter()
            .find(|p| p.name() == name)
    }
}

/// The two key/value types the OHB benchmarks offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairType {
    /// Binary keys and random value bytes (Hadoop `BytesWritable`).
    Bytes,
    /// Hex keys and letter values (Hadoop `Text`).
    Text,
}

impl PairType {
    /// Key length in bytes.
    pub fn key_len(self) -> usize {
        match self {
            PairType::Bytes => 16,
            PairType::Text => 32,
        }
    }
}

/// One OHB job's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OhbSpec {
    /// The distribution pattern.
    pub pattern: Pattern,
    /// Reduce tasks.
    pub reduces: u32,
    /// Pairs each map task emits.
    pub pairs_per_map: u64,
    /// Key plus value bytes of one pair.
    pub pair_size: usize,
    /// Key/value type.
    pub kind: PairType,
    /// Seed of the values and of MR-RAND's choices.
    pub seed: u64,
}

impl OhbSpec {
    /// Checks that the pairs can be made: a pair holds at least its key.
    pub fn validate(&self) -> std::result::Result<(), crate::JobError> {
        if self.reduces == 0 {
            return Err(crate::JobError::Parameters(
                "an OHB job needs at least one reducer".into(),
            ));
        }
        if self.pair_size < self.kind.key_len() {
            return Err(crate::JobError::Parameters(format!(
                "pair size {} B is smaller than the {} B key of the {} type",
                self.pair_size,
                self.kind.key_len(),
                if self.kind == PairType::Bytes {
                    "bytes"
                } else {
                    "text"
                }
            )));
        }
        Ok(())
    }

    /// The reducer of pair `i` of map `map`, for the patterns that do not
    /// draw at random.
    fn fixed_destination(&self, map: u64, i: u64) -> u32 {
        match self.pattern {
            Pattern::Avg => ((map * self.pairs_per_map + i) % u64::from(self.reduces)) as u32,
            Pattern::Skew => skew_destination(i, self.pairs_per_map, self.reduces),
            Pattern::Rand => unreachable!("drawn by the map's generator"),
        }
    }

    /// Pairs reducer `r` receives in a job of `maps` maps, for the
    /// patterns whose shares are fixed (`None` for MR-RAND).
    pub fn expected_pairs(&self, maps: u64, r: u32) -> Option<u64> {
        let k = self.pairs_per_map;
        let n = u64::from(self.reduces);
        match self.pattern {
            Pattern::Rand => None,
            // Pairs 0..maps*k round-robin: r gets those congruent to r.
            Pattern::Avg => Some((maps * k + n - 1 - u64::from(r)) / n),
            Pattern::Skew => Some(maps * skew_share(k, self.reduces, r)),
        }
    }
}

/// How many of a map's `k` pairs MR-SKEW sends to reducer `r`.
fn skew_share(k: u64, reduces: u32, r: u32) -> u64 {
    let mut left = k;
    for _ in 0..r.min(reduces.saturating_sub(1)) {
        left -= left.div_ceil(2);
    }
    if r + 1 >= reduces {
        left
    } else {
        left.div_ceil(2)
    }
}

/// MR-SKEW's reducer for pair `i` of `k`: the first half to reducer 0, the
/// next quarter to 1, and so on; whatever is left to the last reducer.
fn skew_destination(i: u64, k: u64, reduces: u32) -> u32 {
    let mut start = 0u64;
    let mut share = k;
    for r in 0..reduces.saturating_sub(1) {
        share = share.div_ceil(2).min(k - start);
        if i < start + share {
            return r;
        }
        start += share;
        share = k - start;
    }
    reduces - 1
}

/// The OHB job: synthetic maps, the pattern's partitioning, reducers that
/// count and write nothing.
pub fn ohb(spec: OhbSpec) -> JobSpec {
    JobSpec::new("ohb", move || OhbMapper { spec })
        .reducer(move || CountingReducer {
            kind: Some(spec.kind),
            ..CountingReducer::default()
        })
        .partitioner(DestinationPartitioner { kind: spec.kind })
        .key_order(KeyOrder::Bytewise)
}

/// Emits a map task's pairs in `cleanup` (its split has no records).
struct OhbMapper {
    spec: OhbSpec,
}

impl Mapper for OhbMapper {
    fn map(&mut self, _offset: u64, _record: &[u8], _ctx: &mut MapContext<'_>) -> Result<()> {
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut MapContext<'_>) -> Result<()> {
        let s = self.spec;
        let map = ctx.task() as u64;
        let mut rng = Pcg64Mcg::seed_from_u64(sluice_gen::part_seed(s.seed, map));
        let value = make_value(&mut rng, s.pair_size - s.kind.key_len(), s.kind);
        let mut key = Vec::with_capacity(s.kind.key_len());
        for i in 0..s.pairs_per_map {
            let dest = match s.pattern {
                Pattern::Rand => rng.gen_range(0..s.reduces),
                _ => s.fixed_destination(map, i),
            };
            write_key(&mut key, s.kind, dest, map as u32, i);
            ctx.emit(&key, &value)?;
        }
        Ok(())
    }
}

fn make_value(rng: &mut Pcg64Mcg, len: usize, kind: PairType) -> Vec<u8> {
    match kind {
        PairType::Bytes => (0..len).map(|_| rng.gen()).collect(),
        PairType::Text => (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect(),
    }
}

fn write_key(key: &mut Vec<u8>, kind: PairType, dest: u32, map: u32, i: u64) {
    use std::io::Write;
    key.clear();
    match kind {
        PairType::Bytes => {
            key.extend_from_slice(&dest.to_be_bytes());
            key.extend_from_slice(&map.to_be_bytes());
            key.extend_from_slice(&i.to_be_bytes());
        }
        PairType::Text => {
            write!(key, "{dest:08x}{map:08x}{i:016x}").expect("writing to a Vec");
        }
    }
}

/// Sends a pair to the reducer its key names.
struct DestinationPartitioner {
    kind: PairType,
}

impl Partitioner for DestinationPartitioner {
    #[inline]
    fn partition(&self, key: &[u8], n: u32) -> u32 {
        let dest = match self.kind {
            PairType::Bytes => key
                .get(..4)
                .map_or(0, |b| u32::from_be_bytes(b.try_into().expect("4 bytes"))),
            PairType::Text => std::str::from_utf8(key.get(..8).unwrap_or_default())
                .ok()
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .unwrap_or(0),
        };
        dest % n.max(1)
    }
}

/// Counts pairs and bytes into the `OHB` counter group; writes nothing.
/// Per reducer it also counts `PAIRS_R<r>` and the microseconds from its
/// setup to its cleanup, `REDUCE_US_R<r>`, for the skew analysis (the
/// reducer learns `r` from its first key).
#[derive(Default)]
struct CountingReducer {
    kind: Option<PairType>,
    dest: Option<u32>,
    pairs: u64,
    bytes: u64,
    started: Option<std::time::Instant>,
}

impl Reducer for CountingReducer {
    fn setup(&mut self, _ctx: &mut ReduceContext<'_>) -> Result<()> {
        self.started = Some(std::time::Instant::now());
        Ok(())
    }

    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        _ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        if self.dest.is_none() {
            let kind = self.kind.expect("set by the job");
            self.dest = Some(DestinationPartitioner { kind }.partition(key, u32::MAX));
        }
        while let Some(v) = values.next_value() {
            self.pairs += 1;
            self.bytes += (key.len() + v.len()) as u64;
        }
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut ReduceContext<'_>) -> Result<()> {
        let c = ctx.counters();
        c.incr(COUNTER_GROUP, "PAIRS", self.pairs);
        c.incr(COUNTER_GROUP, "BYTES", self.bytes);
        if let (Some(r), Some(t)) = (self.dest, self.started) {
            c.incr(COUNTER_GROUP, &format!("PAIRS_R{r}"), self.pairs);
            let us = t.elapsed().as_micros() as u64;
            c.incr(COUNTER_GROUP, &format!("REDUCE_US_R{r}"), us);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pattern: Pattern, reduces: u32, k: u64) -> OhbSpec {
        OhbSpec {
            pattern,
            reduces,
            pairs_per_map: k,
            pair_size: 100,
            kind: PairType::Bytes,
            seed: 1,
        }
    }

    #[test]
    fn skew_halves_and_the_last_takes_the_rest() {
        let s = spec(Pattern::Skew, 4, 1000);
        let got: Vec<u64> = (0..4).map(|r| s.expected_pairs(1, r).unwrap()).collect();
        assert_eq!(got, vec![500, 250, 125, 125]);
        let one = spec(Pattern::Skew, 1, 7);
        assert_eq!(one.expected_pairs(3, 0), Some(21));
    }

    #[test]
    fn shares_match_the_destinations_pair_by_pair() {
        for pattern in [Pattern::Avg, Pattern::Skew] {
            for (maps, reduces, k) in [(3, 4, 7), (2, 3, 10), (1, 1, 5), (4, 8, 3)] {
                let s = spec(pattern, reduces, k);
                for r in 0..reduces {
                    let counted = (0..maps)
                        .map(|m| (0..k).filter(|&i| s.fixed_destination(m, i) == r).count() as u64)
                        .sum::<u64>();
                    assert_eq!(
                        s.expected_pairs(maps, r),
                        Some(counted),
                        "{pattern:?} {maps} {reduces} {k} r{r}"
                    );
                }
            }
        }
    }

    #[test]
    fn avg_is_even_across_maps() {
        let s = spec(Pattern::Avg, 3, 10);
        let got: Vec<u64> = (0..3).map(|r| s.expected_pairs(3, r).unwrap()).collect();
        assert_eq!(got, vec![10, 10, 10]);
    }

    #[test]
    fn keys_name_their_reducer_in_both_types() {
        for kind in [PairType::Bytes, PairType::Text] {
            let mut key = Vec::new();
            write_key(&mut key, kind, 5, 2, 99);
            assert_eq!(key.len(), kind.key_len());
            assert_eq!(DestinationPartitioner { kind }.partition(&key, 8), 5);
        }
    }

    #[test]
    fn a_pair_must_hold_its_key() {
        let mut s = spec(Pattern::Avg, 2, 1);
        s.pair_size = 15;
        assert!(s
            .validate()
            .unwrap_err()
            .to_string()
            .contains("smaller than the 16 B key"));
        s.reduces = 0;
        assert!(s.validate().is_err());
    }
}
