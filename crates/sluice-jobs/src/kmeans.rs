//! k-means as HiBench runs it (Mahout's k-means on MapReduce), one job per
//! step:
//!
//! - **init**: the initial centres are `k` points of the input chosen by a
//!   seeded hash of each point's text (the `k` smallest hashes; equal
//!   points count once), so the choice depends on the data and the seed
//!   only, never on how the input is split. Each map keeps its `k`
//!   smallest; one reducer keeps the `k` smallest overall.
//! - **k-means||** (Bahmani et al., Spark MLlib's default), instead of
//!   init: one point chosen as above, then rounds ([`kmeans_parallel_round`])
//!   each a pass over the points sampling every point with probability
//!   `l * d^2 / cost` (`l = 2k` the oversampling factor, `d` the point's
//!   distance to the nearest candidate so far, `cost` the sum of `d^2`
//!   over all points), then a pass ([`kmeans_parallel_pick`]) weighing each
//!   candidate by the points nearest to it, whose reducer runs weighted
//!   k-means++ and Lloyd's iterations on the candidates to pick `k`.
//! - **points**: a map-only job writing every point in binary (below), once,
//!   for the iterations to read instead of the text: parsing decimal text
//!   was two thirds of an iteration. MLlib parses once and keeps the
//!   vectors; HiBench's Mahout input is binary vectors. A point of another
//!   dimension than the initial centres' is named here with its file and
//!   offset (or skipped under `--bad-records skip`).
//! - **iterate**: every map reads the current centres (a side input), adds
//!   each point to its nearest centre's running sum (in-mapper combining:
//!   one partial sum per centre and map task), and emits the partial sums;
//!   one reducer divides each centre's sum by its count. A centre no point
//!   chose stays where it was (counted in `KMEANS.EMPTY`). Centres that
//!   moved the tolerance or more are counted in [`MOVED`] (every centre
//!   with tolerance 0), the iteration itself in [`ITERATIONS`].
//! - **copy**: a map-only job writing the centres it reads as they are
//!   (where a run that may stop early puts its last centres).
//! - **assign**: a map-only job writing each point with its nearest
//!   centre.
//!
//! Points are lines of decimal coordinates separated by spaces or tabs (as
//! `sluice gen kmeans` writes them); centres are lines `index TAB
//! coordinates`. Binary points (the points job's output): each point its
//! `dims` coordinates as little-endian IEEE 754 doubles, 8 bytes each, and
//! nothing else: fixed-length records of `8 * dims` bytes, no header. The nearest centre is the one at the smallest squared
//! Euclidean distance, the lowest index on a tie.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use sluice_api::{Error, JobSpec, MapContext, Mapper, ReduceContext, Reducer, Result, Values};

/// The user counter group of k-means.
pub const COUNTER_GROUP: &str = "KMEANS";
/// The counter of centres an iteration moved by the tolerance or more.
pub const MOVED: &str = "MOVED";
/// The counter of iterations (1 per iterate job).
pub const ITERATIONS: &str = "ITERATIONS";
/// The counter of the initial centres' dimension (the init job's reducer
/// counts it once): the points job's and the iterations' record length.
pub const DIMS: &str = "DIMS";

/// The centres of one iteration, by index.
#[derive(Debug, Clone, PartialEq)]
pub struct Centres {
    pub dims: usize,
    pub points: Vec<Vec<f64>>,
}

impl Centres {
    /// Centres from lines `index TAB coordinates`, the indices 0 to k-1 in
    /// any order, all of one dimension.
    pub fn parse(text: &[u8]) -> std::result::Result<Centres, String> {
        let mut by_index = Vec::new();
        for (n, line) in text.split(|&b| b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let bad = |why: &str| format!("centre line {}: {why}", n + 1);
            let tab = line
                .iter()
                .position(|&b| b == b'\t')
                .ok_or_else(|| bad("no tab"))?;
            let index: usize = std::str::from_utf8(&line[..tab])
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad("no index before the tab"))?;
            let mut p = Vec::new();
            parse_point(&line[tab + 1..], &mut p).map_err(|e| bad(&e))?;
            by_index.push((index, p));
        }
        by_index.sort_by_key(|(i, _)| *i);
        let dims = by_index.first().map_or(0, |(_, p)| p.len());
        for (n, (i, p)) in by_index.iter().enumerate() {
            if *i != n {
                return Err(format!(
                    "centre indices are not 0 to {}",
                    by_index.len() - 1
                ));
            }
            if p.len() != dims {
                return Err(format!(
                    "centre {i} has {} coordinates, centre 0 {dims}",
                    p.len()
                ));
            }
        }
        if by_index.is_empty() {
            return Err("no centres".into());
        }
        Ok(Centres {
            dims,
            points: by_index.into_iter().map(|(_, p)| p).collect(),
        })
    }

    /// Centres from the part files of a data set.
    pub fn read(files: &[PathBuf]) -> std::result::Result<Centres, String> {
        let mut text = Vec::new();
        for f in files {
            let bytes = std::fs::read(f).map_err(|e| format!("reading {}: {e}", f.display()))?;
            text.extend_from_slice(&bytes);
            if !text.ends_with(b"\n") {
                text.push(b'\n');
            }
        }
        Centres::parse(&text)
    }

    /// The index of the centre nearest to `p` (lowest index on a tie).
    pub fn nearest(&self, p: &[f64]) -> usize {
        self.nearest_with_distance(p).0
    }

    /// The nearest centre's index and its squared distance to `p`.
    pub fn nearest_with_distance(&self, p: &[f64]) -> (usize, f64) {
        let mut best = (0, f64::INFINITY);
        for (i, c) in self.points.iter().enumerate() {
            let d = distance2(c, p);
            if d < best.1 {
                best = (i, d);
            }
        }
        best
    }
}

/// The squared Euclidean distance.
fn distance2(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// Parses a point: decimal numbers separated by spaces or tabs. Each
/// number is parsed in place by `fast-float2`'s partial parse
/// (Eisel-Lemire, as Rust's own parser), which stops at the separator: no
/// UTF-8 check and no split into strings first. The parse is most of what
/// an iteration's maps do.
pub fn parse_point(line: &[u8], out: &mut Vec<f64>) -> std::result::Result<(), String> {
    out.clear();
    let mut at = 0;
    while at < line.len() {
        match line[at] {
            b' ' | b'\t' => at += 1,
            _ => {
                // A number runs to the next separator or the end.
                let rest = &line[at..];
                let bad = || {
                    let end = rest
                        .iter()
                        .position(|&b| b == b' ' || b == b'\t')
                        .unwrap_or(rest.len());
                    format!(
                        "{:?} is not a number",
                        String::from_utf8_lossy(&rest[..end])
                    )
                };
                let (x, n): (f64, usize) = fast_float2::parse_partial(rest).map_err(|_| bad())?;
                if n == 0 || !matches!(rest.get(n), None | Some(b' ' | b'\t')) {
                    return Err(bad());
                }
                if !x.is_finite() {
                    return Err(format!(
                        "{:?} is not a finite number",
                        String::from_utf8_lossy(&rest[..n])
                    ));
                }
                out.push(x);
                at += n;
            }
        }
    }
    if out.is_empty() {
        return Err("no coordinates".into());
    }
    Ok(())
}

/// Writes `index TAB coordinates`.
fn write_centre(index: usize, p: &[f64], out: &mut Vec<u8>) {
    out.clear();
    let _ = write!(out, "{index}\t");
    for (d, x) in p.iter().enumerate() {
        if d > 0 {
            out.push(b' ');
        }
        let _ = write!(out, "{x}");
    }
}

/// The seeded hash that picks the initial centres.
fn pick_hash(seed: u64, point: &[u8]) -> u64 {
    // FNV-1a over the seed and the bytes, then a 64-bit finalizer: stable
    // across platforms and releases (std's hasher is not).
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for &b in point {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// The job choosing `k` initial centres (run it with one reducer).
pub fn kmeans_init(k: usize, seed: u64) -> JobSpec {
    JobSpec::new("kmeans-init", move || InitMapper {
        k,
        seed,
        best: Vec::new(),
        point: Vec::new(),
    })
    .reducer(move || InitReducer {
        k,
        candidates: Vec::new(),
        counts: Vec::new(),
        buf: Vec::new(),
        point: Vec::new(),
    })
}

/// Most dimensions a map task of the init keeps candidates for; a new
/// one past them replaces the one with the fewest points.
const INIT_DIMS: usize = 8;

/// Tags of the init's map output values: a candidate point's line, or a
/// count of a task's points of one dimension (`dims u64 BE, count u64 BE`)
/// under the key [`COUNT_KEY`] followed by the dimension.
const POINT: u8 = b'P';
const COUNT: u8 = b'C';
const COUNT_KEY: [u8; 8] = [0xff; 8];

/// The points of one dimension a map task of the init has seen: how many,
/// and the `k` of smallest hash.
struct DimsCandidates {
    dims: usize,
    count: u64,
    best: BTreeSet<(u64, Vec<u8>)>,
}

struct InitMapper {
    k: usize,
    seed: u64,
    /// Per dimension, the task's `k` smallest (hash, point) so far.
    best: Vec<DimsCandidates>,
    point: Vec<f64>,
}

impl InitMapper {
    /// The candidates of `dims`, made room for if new.
    fn of_dims(&mut self, dims: usize) -> &mut DimsCandidates {
        let at = match self.best.iter().position(|c| c.dims == dims) {
            Some(at) => at,
            None => {
                if self.best.len() == INIT_DIMS {
                    let fewest = (0..self.best.len())
                        .min_by_key(|&i| self.best[i].count)
                        .unwrap_or(0);
                    self.best.swap_remove(fewest);
                }
                self.best.push(DimsCandidates {
                    dims,
                    count: 0,
                    best: BTreeSet::new(),
                });
                self.best.len() - 1
            }
        };
        &mut self.best[at]
    }
}

impl Mapper for InitMapper {
    fn setup(&mut self, _ctx: &mut MapContext<'_>) -> Result<()> {
        self.best.clear();
        Ok(())
    }

    fn map(&mut self, _offset: u64, line: &[u8], _ctx: &mut MapContext<'_>) -> Result<()> {
        parse_point(line, &mut self.point).map_err(Error::bad_record)?;
        let h = pick_hash(self.seed, line);
        let k = self.k;
        let c = self.of_dims(self.point.len());
        c.count += 1;
        if c.best.len() < k || c.best.last().is_some_and(|(b, _)| h < *b) {
            c.best.insert((h, line.to_vec()));
            if c.best.len() > k {
                c.best.pop_last();
            }
        }
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut MapContext<'_>) -> Result<()> {
        let (mut key, mut value) = (Vec::new(), Vec::new());
        for c in std::mem::take(&mut self.best) {
            key.clear();
            key.extend_from_slice(&COUNT_KEY);
            key.extend_from_slice(&(c.dims as u64).to_be_bytes());
            value.clear();
            value.push(COUNT);
            value.extend_from_slice(&(c.dims as u64).to_be_bytes());
            value.extend_from_slice(&c.count.to_be_bytes());
            ctx.emit(&key, &value)?;
            for (h, line) in c.best {
                key.clear();
                key.extend_from_slice(&h.to_be_bytes());
                key.extend_from_slice(&line);
                value.clear();
                value.push(POINT);
                value.extend_from_slice(&line);
                ctx.emit(&key, &value)?;
            }
        }
        Ok(())
    }
}

/// Takes the candidates in hash order and writes the first `k` of the
/// dimension most points of the input have (the map tasks count them).
/// A point of another dimension is malformed input, but not the init's
/// to report: the first iteration reads every point and fails naming its
/// file and offset, or skips and counts it under `--bad-records skip`.
/// Picking it as a centre instead failed the job with a message about
/// centres, whatever the policy.
struct InitReducer {
    k: usize,
    /// Every distinct candidate point, in hash order.
    candidates: Vec<Vec<f64>>,
    /// Points of the input per dimension.
    counts: Vec<(usize, u64)>,
    buf: Vec<u8>,
    point: Vec<f64>,
}

impl InitReducer {
    fn count(&mut self, v: &[u8]) -> Result<()> {
        let bad = || Error::user("a malformed count from a k-means init map task");
        let dims = v.get(..8).ok_or_else(bad)?;
        let n = v.get(8..16).ok_or_else(bad)?;
        let dims = u64::from_be_bytes(dims.try_into().map_err(|_| bad())?) as usize;
        let n = u64::from_be_bytes(n.try_into().map_err(|_| bad())?);
        match self.counts.iter_mut().find(|(d, _)| *d == dims) {
            Some((_, c)) => *c += n,
            None => self.counts.push((dims, n)),
        }
        Ok(())
    }
}

impl Reducer for InitReducer {
    fn reduce(
        &mut self,
        _key: &[u8],
        values: &mut dyn Values,
        _ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        // Keys are (hash, point): equal points arrive as one group, of
        // which one is a candidate.
        let mut point = false;
        while let Some(v) = values.next_value() {
            match v.split_first() {
                Some((&COUNT, rest)) => self.count(rest)?,
                Some((&POINT, line)) if !point => {
                    point = true;
                    parse_point(line, &mut self.point).map_err(Error::user)?;
                    self.candidates.push(self.point.clone());
                }
                Some((&POINT, _)) => {}
                _ => return Err(Error::user("a malformed k-means init record")),
            }
        }
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut ReduceContext<'_>) -> Result<()> {
        let dims = majority(&self.counts);
        let mut written = 0;
        for p in self
            .candidates
            .iter()
            .filter(|p| p.len() == dims)
            .take(self.k)
        {
            write_centre(written, p, &mut self.buf);
            ctx.write_raw(&self.buf)?;
            ctx.write_raw(b"\n")?;
            written += 1;
        }
        if written < self.k {
            return Err(Error::user(format!(
                "k-means needs {} distinct points for its initial centres; the input has {written}",
                self.k
            )));
        }
        ctx.counters().incr(COUNTER_GROUP, DIMS, dims as u64);
        Ok(())
    }
}

/// The dimension with the most points (on a tie, the smallest).
fn majority(counts: &[(usize, u64)]) -> usize {
    counts
        .iter()
        .max_by_key(|&&(d, n)| (n, std::cmp::Reverse(d)))
        .map_or(0, |&(d, _)| d)
}

/// The map-only job writing each point of `dims` coordinates in binary
/// (the module's format); a point of another dimension is a bad record.
pub fn kmeans_points(dims: usize) -> JobSpec {
    JobSpec::new("kmeans-points", move || PointsMapper {
        dims,
        point: Vec::new(),
        buf: Vec::with_capacity(8 * dims),
    })
}

struct PointsMapper {
    dims: usize,
    point: Vec<f64>,
    buf: Vec<u8>,
}

impl Mapper for PointsMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        point_of(line, self.dims, &mut self.point)?;
        self.buf.clear();
        for x in &self.point {
            self.buf.extend_from_slice(&x.to_le_bytes());
        }
        ctx.emit_raw(&self.buf)
    }
}

/// One iteration from `centres` (run it with one reducer) over text
/// points, or over binary points (records of `8 * dims` bytes) when
/// `binary`; a centre that moves `tolerance` or more counts in [`MOVED`].
pub fn kmeans_iterate(centres: Arc<Centres>, tolerance: f64, binary: bool) -> JobSpec {
    let c = centres.clone();
    JobSpec::new("kmeans-iterate", move || {
        let mut m = IterMapper::new(c.clone());
        m.binary = binary;
        m
    })
    .reducer(move || IterReducer {
        centres: centres.clone(),
        tolerance,
        partials: Vec::new(),
        next: 0,
        buf: Vec::new(),
    })
}

struct IterMapper {
    centres: Arc<Centres>,
    counts: Vec<u64>,
    sums: Vec<f64>,
    point: Vec<f64>,
    /// Records are binary points, not text.
    binary: bool,
}

impl IterMapper {
    fn new(centres: Arc<Centres>) -> Self {
        let (k, d) = (centres.points.len(), centres.dims);
        IterMapper {
            centres,
            counts: vec![0; k],
            sums: vec![0.0; k * d],
            point: Vec::new(),
            binary: false,
        }
    }
}

/// Decodes a binary point of `dims` coordinates.
fn binary_point(record: &[u8], dims: usize, out: &mut Vec<f64>) -> Result<()> {
    if record.len() != 8 * dims {
        return Err(Error::user(format!(
            "a binary point of {} bytes; the centres have {dims} coordinates",
            record.len()
        )));
    }
    out.clear();
    out.extend(
        record
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes"))),
    );
    Ok(())
}

/// Parses a point of the centres' dimension.
fn point_of(line: &[u8], dims: usize, out: &mut Vec<f64>) -> Result<()> {
    parse_point(line, out).map_err(Error::bad_record)?;
    if out.len() != dims {
        return Err(Error::bad_record(format!(
            "a point with {} coordinates; the centres have {dims}",
            out.len()
        )));
    }
    Ok(())
}

impl Mapper for IterMapper {
    fn setup(&mut self, _ctx: &mut MapContext<'_>) -> Result<()> {
        self.counts.fill(0);
        self.sums.fill(0.0);
        Ok(())
    }

    fn map(&mut self, _offset: u64, line: &[u8], _ctx: &mut MapContext<'_>) -> Result<()> {
        let d = self.centres.dims;
        if self.binary {
            binary_point(line, d, &mut self.point)?;
        } else {
            point_of(line, d, &mut self.point)?;
        }
        let c = self.centres.nearest(&self.point);
        self.counts[c] += 1;
        for (s, x) in self.sums[c * d..(c + 1) * d].iter_mut().zip(&self.point) {
            *s += x;
        }
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut MapContext<'_>) -> Result<()> {
        let d = self.centres.dims;
        let task = ctx.task() as u64;
        let mut value = Vec::with_capacity(PARTIAL_HEAD + 8 * d);
        for (c, &n) in self.counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            value.clear();
            value.extend_from_slice(&task.to_le_bytes());
            value.extend_from_slice(&n.to_le_bytes());
            for x in &self.sums[c * d..(c + 1) * d] {
                value.extend_from_slice(&x.to_le_bytes());
            }
            ctx.emit(&(c as u32).to_be_bytes(), &value)?;
        }
        Ok(())
    }
}

/// A partial sum's bytes before its coordinates: the map task's index and
/// the count of its points, each a little-endian `u64`.
const PARTIAL_HEAD: usize = 16;

struct IterReducer {
    centres: Arc<Centres>,
    tolerance: f64,
    /// A centre's partial sums, by map task (reused).
    partials: Vec<Vec<u8>>,
    /// The next centre index to write (centres no point chose are written
    /// as they were).
    next: usize,
    buf: Vec<u8>,
}

impl IterReducer {
    /// Writes the old centres before index `until` that no point chose.
    fn unchosen(&mut self, until: usize, ctx: &mut ReduceContext<'_>) -> Result<()> {
        while self.next < until {
            ctx.counters().incr(COUNTER_GROUP, "EMPTY", 1);
            if self.tolerance <= 0.0 {
                ctx.counters().incr(COUNTER_GROUP, MOVED, 1);
            }
            let old = &self.centres.points[self.next];
            write_centre(self.next, old, &mut self.buf);
            ctx.write_raw(&self.buf)?;
            ctx.write_raw(b"\n")?;
            self.next += 1;
        }
        Ok(())
    }
}

impl Reducer for IterReducer {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        let d = self.centres.dims;
        let c = key
            .try_into()
            .map(u32::from_be_bytes)
            .map_err(|_| Error::user("a k-means key is not 4 bytes"))? as usize;
        if c >= self.centres.points.len() {
            return Err(Error::user(format!("no centre {c}")));
        }
        self.unchosen(c, ctx)?;
        // The partial sums arrive in the order their maps finished, which
        // varies from run to run; adding them in map task order makes the
        // centres the same in every run, to the last bit.
        let mut used = 0;
        while let Some(v) = values.next_value() {
            if v.len() != PARTIAL_HEAD + 8 * d {
                return Err(Error::user("a k-means partial sum of the wrong size"));
            }
            if used == self.partials.len() {
                self.partials.push(Vec::new());
            }
            self.partials[used].clear();
            self.partials[used].extend_from_slice(v);
            used += 1;
        }
        let partials = &mut self.partials[..used];
        partials.sort_unstable_by_key(|v| u64::from_le_bytes(v[..8].try_into().expect("8 bytes")));
        let (mut n, mut sum) = (0u64, vec![0.0; d]);
        for v in partials.iter() {
            n += u64::from_le_bytes(v[8..16].try_into().expect("8 bytes"));
            for (s, x) in sum.iter_mut().zip(v[PARTIAL_HEAD..].chunks_exact(8)) {
                *s += f64::from_le_bytes(x.try_into().expect("8 bytes"));
            }
        }
        let centre: Vec<f64> = sum.iter().map(|s| s / n as f64).collect();
        ctx.counters().incr(COUNTER_GROUP, "POINTS", n);
        if distance2(&centre, &self.centres.points[c]) >= self.tolerance * self.tolerance {
            ctx.counters().incr(COUNTER_GROUP, MOVED, 1);
        }
        write_centre(c, &centre, &mut self.buf);
        ctx.write_raw(&self.buf)?;
        ctx.write_raw(b"\n")?;
        self.next = c + 1;
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut ReduceContext<'_>) -> Result<()> {
        ctx.counters().incr(COUNTER_GROUP, ITERATIONS, 1);
        self.unchosen(self.centres.points.len(), ctx)
    }
}

/// The map-only job writing its input lines as they are (centres).
pub fn kmeans_copy() -> JobSpec {
    JobSpec::new("kmeans-copy", || CopyMapper { buf: Vec::new() })
}

struct CopyMapper {
    buf: Vec<u8>,
}

impl Mapper for CopyMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        self.buf.clear();
        self.buf.extend_from_slice(line);
        self.buf.push(b'\n');
        ctx.emit_raw(&self.buf)
    }
}

/// A uniform number in [0, 1) from a seeded hash of a round and a point's
/// text: the same for a point wherever the input is split.
fn uniform(seed: u64, round: u32, point: &[u8]) -> f64 {
    let h = pick_hash(seed ^ (u64::from(round) << 32 | 0x6b6d_7c7c), point);
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Keys of a k-means|| round: the tasks' costs sort before the candidates.
const COST_KEY: u8 = 0;
const CANDIDATE_KEY: u8 = 1;

/// One round of k-means|| from `candidates` (run it with one reducer):
/// writes the candidates, then the points sampled with probability
/// `oversampling * d^2 / cost`, numbered on.
///
/// One pass: a point is sampled when `u * cost < l * d^2` (`u` uniform
/// from the point's seeded hash); a task's own cost is at most the total,
/// so a task keeps the points with `u * (its cost so far) < l * d^2`, a
/// superset, and emits them with its cost; the reducer sums the costs
/// and keeps the sampled ones. The expected points a task keeps are at
/// most `l`.
pub fn kmeans_parallel_round(
    candidates: Arc<Centres>,
    oversampling: f64,
    seed: u64,
    round: u32,
) -> JobSpec {
    let c = candidates.clone();
    JobSpec::new("kmeans-parallel-round", move || RoundMapper {
        candidates: c.clone(),
        oversampling,
        seed,
        round,
        cost: 0.0,
        kept: Vec::new(),
        limit: 0,
        point: Vec::new(),
    })
    .reducer(move || RoundReducer {
        candidates: candidates.clone(),
        oversampling,
        cost: None,
        next: 0,
        buf: Vec::new(),
        point: Vec::new(),
    })
}

struct RoundMapper {
    candidates: Arc<Centres>,
    oversampling: f64,
    seed: u64,
    round: u32,
    /// The task's cost so far.
    cost: f64,
    /// (u, d^2, point text) that may be sampled.
    kept: Vec<(f64, f64, Vec<u8>)>,
    /// How many kept points call for a prune.
    limit: usize,
    point: Vec<f64>,
}

impl RoundMapper {
    fn prune(&mut self) {
        let (cost, l) = (self.cost, self.oversampling);
        self.kept.retain(|(u, d2, _)| u * cost < l * d2);
        // Prune again once the points kept have doubled.
        self.limit = self.limit.max(2 * self.kept.len());
    }
}

impl Mapper for RoundMapper {
    fn setup(&mut self, _ctx: &mut MapContext<'_>) -> Result<()> {
        self.cost = 0.0;
        self.kept.clear();
        self.limit = 64 + 4 * self.oversampling as usize;
        Ok(())
    }

    fn map(&mut self, _offset: u64, line: &[u8], _ctx: &mut MapContext<'_>) -> Result<()> {
        point_of(line, self.candidates.dims, &mut self.point)?;
        let (_, d2) = self.candidates.nearest_with_distance(&self.point);
        self.cost += d2;
        let u = uniform(self.seed, self.round, line);
        if u * self.cost < self.oversampling * d2 {
            self.kept.push((u, d2, line.to_vec()));
            if self.kept.len() >= self.limit {
                self.prune();
            }
        }
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut MapContext<'_>) -> Result<()> {
        self.prune();
        ctx.emit(&[COST_KEY], &self.cost.to_le_bytes())?;
        let (mut key, mut value) = (Vec::new(), Vec::new());
        for (u, d2, line) in std::mem::take(&mut self.kept) {
            key.clear();
            key.push(CANDIDATE_KEY);
            key.extend_from_slice(&line);
            value.clear();
            value.extend_from_slice(&u.to_le_bytes());
            value.extend_from_slice(&d2.to_le_bytes());
            ctx.emit(&key, &value)?;
        }
        Ok(())
    }
}

struct RoundReducer {
    candidates: Arc<Centres>,
    oversampling: f64,
    /// The total cost, once the tasks' costs are in.
    cost: Option<f64>,
    next: usize,
    buf: Vec<u8>,
    point: Vec<f64>,
}

fn f64_at(v: &[u8], at: usize) -> Result<f64> {
    v.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(f64::from_le_bytes)
        .ok_or_else(|| Error::user("a k-means|| value of the wrong size"))
}

impl Reducer for RoundReducer {
    fn setup(&mut self, ctx: &mut ReduceContext<'_>) -> Result<()> {
        for (i, p) in self.candidates.points.iter().enumerate() {
            write_centre(i, p, &mut self.buf);
            ctx.write_raw(&self.buf)?;
            ctx.write_raw(b"\n")?;
        }
        self.next = self.candidates.points.len();
        Ok(())
    }

    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        match key.split_first() {
            Some((&COST_KEY, [])) => {
                let mut cost = 0.0;
                while let Some(v) = values.next_value() {
                    cost += f64_at(v, 0)?;
                }
                self.cost = Some(cost);
            }
            Some((&CANDIDATE_KEY, line)) => {
                let cost = self
                    .cost
                    .ok_or_else(|| Error::user("k-means|| candidates before the cost"))?;
                // Equal points are one group; one value speaks for them.
                let Some(v) = values.next_value() else {
                    return Ok(());
                };
                let (u, d2) = (f64_at(v, 0)?, f64_at(v, 8)?);
                if u * cost < self.oversampling * d2 {
                    parse_point(line, &mut self.point).map_err(Error::user)?;
                    write_centre(self.next, &self.point, &mut self.buf);
                    ctx.write_raw(&self.buf)?;
                    ctx.write_raw(b"\n")?;
                    ctx.counters().incr(COUNTER_GROUP, "SAMPLED", 1);
                    self.next += 1;
                }
            }
            _ => return Err(Error::user("a k-means|| key of no known kind")),
        }
        Ok(())
    }
}

/// The last pass of k-means|| (run it with one reducer): each candidate
/// weighed by the points nearest to it, then `k` centres picked from the
/// weighted candidates by k-means++ and refined by Lloyd's iterations (at
/// most 30), as Spark's `LocalKMeans`, from `seed`.
pub fn kmeans_parallel_pick(candidates: Arc<Centres>, k: usize, seed: u64) -> JobSpec {
    let c = candidates.clone();
    JobSpec::new("kmeans-parallel-pick", move || WeighMapper {
        counts: vec![0; c.points.len()],
        candidates: c.clone(),
        point: Vec::new(),
    })
    .reducer(move || PickReducer {
        weights: vec![0; candidates.points.len()],
        candidates: candidates.clone(),
        k,
        seed,
        buf: Vec::new(),
    })
}

struct WeighMapper {
    candidates: Arc<Centres>,
    counts: Vec<u64>,
    point: Vec<f64>,
}

impl Mapper for WeighMapper {
    fn setup(&mut self, _ctx: &mut MapContext<'_>) -> Result<()> {
        self.counts.fill(0);
        Ok(())
    }

    fn map(&mut self, _offset: u64, line: &[u8], _ctx: &mut MapContext<'_>) -> Result<()> {
        point_of(line, self.candidates.dims, &mut self.point)?;
        self.counts[self.candidates.nearest(&self.point)] += 1;
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut MapContext<'_>) -> Result<()> {
        for (c, &n) in self.counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            ctx.emit(&(c as u32).to_be_bytes(), &n.to_le_bytes())?;
        }
        Ok(())
    }
}

struct PickReducer {
    candidates: Arc<Centres>,
    weights: Vec<u64>,
    k: usize,
    seed: u64,
    buf: Vec<u8>,
}

impl Reducer for PickReducer {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        _ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        let c = key
            .try_into()
            .map(u32::from_be_bytes)
            .map_err(|_| Error::user("a k-means|| key is not 4 bytes"))? as usize;
        let w = self
            .weights
            .get_mut(c)
            .ok_or_else(|| Error::user(format!("no candidate {c}")))?;
        while let Some(v) = values.next_value() {
            *w += v
                .try_into()
                .map(u64::from_le_bytes)
                .map_err(|_| Error::user("a k-means|| weight is not 8 bytes"))?;
        }
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut ReduceContext<'_>) -> Result<()> {
        let (points, weights): (Vec<&[f64]>, Vec<f64>) = self
            .candidates
            .points
            .iter()
            .zip(&self.weights)
            .filter(|(_, &w)| w > 0)
            .map(|(p, &w)| (p.as_slice(), w as f64))
            .unzip();
        if points.len() < self.k {
            return Err(Error::user(format!(
                "k-means|| found {} candidates with points for {} centres; \
                 the input has too few distinct points (or use --init random)",
                points.len(),
                self.k
            )));
        }
        let centres = local_kmeans(&points, &weights, self.k, self.seed, 30);
        for (i, p) in centres.iter().enumerate() {
            write_centre(i, p, &mut self.buf);
            ctx.write_raw(&self.buf)?;
            ctx.write_raw(b"\n")?;
        }
        Ok(())
    }
}

/// SplitMix64: the seeded generator of the local k-means++.
struct SplitMix(u64);

impl SplitMix {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The index where the running sum of `weights` first reaches `r` (the
/// last positive one if rounding leaves it short).
fn pick_weighted(weights: impl Iterator<Item = f64>, r: f64) -> Option<usize> {
    let mut sum = 0.0;
    let mut last = None;
    for (i, w) in weights.enumerate() {
        if w > 0.0 {
            sum += w;
            last = Some(i);
            if sum >= r {
                return last;
            }
        }
    }
    last
}

/// `k` centres of weighted points by k-means++ (the first by weight, each
/// next by weight times squared distance to the nearest chosen), then
/// Lloyd's iterations on the weighted points until no point changes its
/// centre or `iterations` have run (Spark's `LocalKMeans`).
/// `points.len() >= k`.
fn local_kmeans(
    points: &[&[f64]],
    weights: &[f64],
    k: usize,
    seed: u64,
    iterations: usize,
) -> Vec<Vec<f64>> {
    let mut rng = SplitMix(seed ^ 0x4c6f_6361_6c4b_4d2b);
    let total: f64 = weights.iter().sum();
    let first = pick_weighted(weights.iter().copied(), rng.next_f64() * total).unwrap_or(0);
    let mut centres = vec![points[first].to_vec()];
    let mut cost: Vec<f64> = points.iter().map(|p| distance2(p, &centres[0])).collect();
    while centres.len() < k {
        let wc = || weights.iter().zip(&cost).map(|(w, c)| w * c);
        let sum: f64 = wc().sum();
        let next = if sum > 0.0 {
            pick_weighted(wc(), rng.next_f64() * sum)
        } else {
            None
        };
        // All remaining points sit on chosen centres: take the first
        // point not chosen yet.
        let next = next.unwrap_or_else(|| {
            (0..points.len())
                .find(|&i| !centres.iter().any(|c| c.as_slice() == points[i]))
                .unwrap_or(0)
        });
        let c = points[next].to_vec();
        for (pc, p) in cost.iter_mut().zip(points) {
            *pc = pc.min(distance2(p, &c));
        }
        centres.push(c);
    }
    let dims = centres[0].len();
    let mut assigned = vec![usize::MAX; points.len()];
    for _ in 0..iterations {
        let set = Centres {
            dims,
            points: centres.clone(),
        };
        let mut changed = false;
        let mut sums = vec![0.0; k * dims];
        let mut counts = vec![0.0; k];
        for (i, p) in points.iter().enumerate() {
            let c = set.nearest(p);
            changed |= assigned[i] != c;
            assigned[i] = c;
            counts[c] += weights[i];
            for (s, x) in sums[c * dims..(c + 1) * dims].iter_mut().zip(p.iter()) {
                *s += weights[i] * x;
            }
        }
        if !changed {
            break;
        }
        for (c, centre) in centres.iter_mut().enumerate() {
            if counts[c] > 0.0 {
                for (x, s) in centre.iter_mut().zip(&sums[c * dims..(c + 1) * dims]) {
                    *x = s / counts[c];
                }
            }
        }
    }
    centres
}

/// The map-only job writing each point with its nearest centre's index:
/// `point TAB index`.
pub fn kmeans_assign(centres: Arc<Centres>) -> JobSpec {
    JobSpec::new("kmeans-assign", move || AssignMapper {
        centres: centres.clone(),
        point: Vec::new(),
        buf: Vec::new(),
    })
}

struct AssignMapper {
    centres: Arc<Centres>,
    point: Vec<f64>,
    buf: Vec<u8>,
}

impl Mapper for AssignMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        point_of(line, self.centres.dims, &mut self.point)?;
        let c = self.centres.nearest(&self.point);
        self.buf.clear();
        let _ = write!(self.buf, "{c}");
        ctx.emit(line, &self.buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_init_keeps_candidates_for_the_commonest_dimensions() {
        assert_eq!(majority(&[(3, 10), (2, 1), (4, 10)]), 3, "ties: smaller");
        assert_eq!(majority(&[(2, 1), (5, 7)]), 5);
        assert_eq!(majority(&[]), 0);
        let mut m = InitMapper {
            k: 2,
            seed: 1,
            best: Vec::new(),
            point: Vec::new(),
        };
        for _ in 0..3 {
            m.of_dims(4).count += 1;
        }
        for d in 10..10 + INIT_DIMS {
            m.of_dims(d).count += 1;
        }
        assert_eq!(m.best.len(), INIT_DIMS);
        assert!(m.best.iter().any(|c| c.dims == 4 && c.count == 3));
    }

    use crate::testing::Pairs;

    /// Values handed in a given order.
    struct Given(Vec<Vec<u8>>, usize);

    impl Values for Given {
        fn next_value(&mut self) -> Option<&[u8]> {
            let i = self.1;
            self.1 += 1;
            self.0.get(i).map(|v| &v[..])
        }
    }

    /// The new centres are the same whatever order the maps' partial sums
    /// arrive in: they are added in map task order. Here the order matters
    /// to the last bit (1e16 + 1 + 1 is 1e16, 1 + 1 + 1e16 is not).
    #[test]
    fn an_iteration_adds_partial_sums_in_map_task_order() {
        use sluice_api::Counters;
        let centres = Arc::new(Centres {
            dims: 1,
            points: vec![vec![0.0]],
        });
        let job = kmeans_iterate(centres, 0.0, false);
        let mut counters = Counters::default();
        let mut partials = Vec::new();
        for (task, x) in [(0, b"1e16"), (1, b"1.00"), (2, b"1.00")] {
            let mut out = Pairs(Vec::new());
            let mut m = (job.mapper)();
            let mut ctx = MapContext::new(&mut out, &mut counters).for_task(task);
            m.setup(&mut ctx).unwrap();
            m.map(0, x, &mut ctx).unwrap();
            m.cleanup(&mut ctx).unwrap();
            partials.push(out.0.pop().unwrap().1);
        }
        let mut reduce = |order: Vec<Vec<u8>>| {
            let mut out = Pairs(Vec::new());
            let mut r = (job.reducer.as_ref().unwrap())();
            let mut ctx = ReduceContext::new(&mut out, &mut counters);
            r.reduce(&0u32.to_be_bytes(), &mut Given(order, 0), &mut ctx)
                .unwrap();
            out.0
                .into_iter()
                .map(|(k, _)| k)
                .collect::<Vec<_>>()
                .concat()
        };
        let forward = reduce(partials.clone());
        partials.reverse();
        let backward = reduce(partials);
        assert_eq!(
            String::from_utf8_lossy(&forward),
            String::from_utf8_lossy(&backward)
        );
        let (in_order, reversed) = ((1e16 + 1.0 + 1.0) / 3.0, (1.0 + 1.0 + 1e16) / 3.0);
        assert_ne!(in_order, reversed, "the order matters here");
        assert_eq!(forward, format!("0\t{in_order}\n").into_bytes());
    }

    #[test]
    fn centres_parse_in_any_order_and_refuse_gaps() {
        let c = Centres::parse(b"1\t3 4\n0\t1 2\n").unwrap();
        assert_eq!(c.points, vec![vec![1.0, 2.0], vec![3.0, 4.0]]);
        assert_eq!(c.nearest(&[2.9, 4.2]), 1);
        assert_eq!(c.nearest(&[2.0, 3.0]), 0, "a tie goes to the lower index");
        assert!(Centres::parse(b"0\t1 2\n2\t3 4\n")
            .unwrap_err()
            .contains("indices"));
        assert!(Centres::parse(b"0\t1 2\n1\t3\n")
            .unwrap_err()
            .contains("coordinates"));
    }

    #[test]
    fn local_kmeans_picks_one_centre_per_weighted_group() {
        // Three far-apart groups of candidates; heavy weights on one
        // point of each.
        let pts: Vec<Vec<f64>> = vec![
            vec![0.0, 0.0],
            vec![0.5, 0.0],
            vec![50.0, 50.0],
            vec![50.5, 50.0],
            vec![-50.0, 50.0],
            vec![-50.0, 50.5],
        ];
        let refs: Vec<&[f64]> = pts.iter().map(Vec::as_slice).collect();
        let weights = [10.0, 1.0, 10.0, 1.0, 10.0, 1.0];
        for seed in 0..20 {
            let got = local_kmeans(&refs, &weights, 3, seed, 30);
            let mut near: Vec<usize> = got
                .iter()
                .map(|c| {
                    [0, 2, 4]
                        .into_iter()
                        .find(|&g| distance2(c, &pts[g]) < 1.0)
                        .unwrap()
                })
                .collect();
            near.sort_unstable();
            assert_eq!(near, [0, 2, 4], "seed {seed}: {got:?}");
            // Lloyd's moved each to its group's weighted mean.
            assert!(got.iter().any(|c| (c[0] - 0.5 / 11.0).abs() < 1e-12));
            assert_eq!(got, local_kmeans(&refs, &weights, 3, seed, 30));
        }
    }

    #[test]
    fn points_must_be_numbers() {
        let mut p = Vec::new();
        parse_point(b"1.5 -2e3\t4", &mut p).unwrap();
        assert_eq!(p, [1.5, -2000.0, 4.0]);
        assert!(parse_point(b"1.5 x", &mut p)
            .unwrap_err()
            .contains("not a number"));
        assert!(parse_point(b"", &mut p).is_err());
        assert!(parse_point(b"NaN", &mut p).is_err());
    }
}
