//! k-means as HiBench runs it (Mahout's k-means on MapReduce), one job per
//! step:
//!
//! - **init**: the initial centres are `k` points of the input chosen by a
//!   seeded hash of each point's text (the `k` smallest hashes; equal
//!   points count once), so the choice depends on the data and the seed
//!   only, never on how the input is split. Each map keeps its `k`
//!   smallest; one reducer keeps the `k` smallest overall.
//! - **iterate**: every map reads the current centres (a side input), adds
//!   each point to its nearest centre's running sum (in-mapper combining:
//!   one partial sum per centre and map task), and emits the partial sums;
//!   one reducer divides each centre's sum by its count. A centre no point
//!   chose stays where it was (counted in `KMEANS.EMPTY`).
//! - **assign**: a map-only job writing each point with its nearest
//!   centre.
//!
//! Points are lines of decimal coordinates separated by spaces or tabs (as
//! `sluice gen kmeans` writes them); centres are lines `index TAB
//! coordinates`. The nearest centre is the one at the smallest squared
//! Euclidean distance, the lowest index on a tie.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use sluice_api::{Error, JobSpec, MapContext, Mapper, ReduceContext, Reducer, Result, Values};

/// The user counter group of k-means.
pub const COUNTER_GROUP: &str = "KMEANS";

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
        let mut best = (f64::INFINITY, 0);
        for (i, c) in self.points.iter().enumerate() {
            let d: f64 = c.iter().zip(p).map(|(a, b)| (a - b) * (a - b)).sum();
            if d < best.0 {
                best = (d, i);
            }
        }
        best.1
    }
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
        best: BTreeSet::new(),
        point: Vec::new(),
    })
    .reducer(move || InitReducer {
        k,
        written: 0,
        buf: Vec::new(),
        point: Vec::new(),
    })
}

struct InitMapper {
    k: usize,
    seed: u64,
    /// The task's `k` smallest (hash, point) so far.
    best: BTreeSet<(u64, Vec<u8>)>,
    point: Vec<f64>,
}

impl Mapper for InitMapper {
    fn setup(&mut self, _ctx: &mut MapContext<'_>) -> Result<()> {
        self.best.clear();
        Ok(())
    }

    fn map(&mut self, _offset: u64, line: &[u8], _ctx: &mut MapContext<'_>) -> Result<()> {
        parse_point(line, &mut self.point).map_err(Error::bad_record)?;
        let h = pick_hash(self.seed, line);
        if self.best.len() < self.k || self.best.last().is_some_and(|(b, _)| h < *b) {
            self.best.insert((h, line.to_vec()));
            if self.best.len() > self.k {
                self.best.pop_last();
            }
        }
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut MapContext<'_>) -> Result<()> {
        let mut key = Vec::new();
        for (h, line) in std::mem::take(&mut self.best) {
            key.clear();
            key.extend_from_slice(&h.to_be_bytes());
            key.extend_from_slice(&line);
            ctx.emit(&key, &line)?;
        }
        Ok(())
    }
}

struct InitReducer {
    k: usize,
    written: usize,
    buf: Vec<u8>,
    point: Vec<f64>,
}

impl Reducer for InitReducer {
    fn reduce(
        &mut self,
        _key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        // Keys are (hash, point): equal points arrive as one group.
        let Some(line) = values.next_value() else {
            return Ok(());
        };
        if self.written < self.k {
            parse_point(line, &mut self.point).map_err(Error::user)?;
            write_centre(self.written, &self.point, &mut self.buf);
            ctx.write_raw(&self.buf)?;
            ctx.write_raw(b"\n")?;
            self.written += 1;
        }
        Ok(())
    }

    fn cleanup(&mut self, _ctx: &mut ReduceContext<'_>) -> Result<()> {
        if self.written < self.k {
            return Err(Error::user(format!(
                "k-means needs {} distinct points for its initial centres; the input has {}",
                self.k, self.written
            )));
        }
        Ok(())
    }
}

/// One iteration from `centres` (run it with one reducer).
pub fn kmeans_iterate(centres: Arc<Centres>) -> JobSpec {
    let c = centres.clone();
    JobSpec::new("kmeans-iterate", move || IterMapper::new(c.clone())).reducer(move || {
        IterReducer {
            centres: centres.clone(),
            next: 0,
            buf: Vec::new(),
        }
    })
}

struct IterMapper {
    centres: Arc<Centres>,
    counts: Vec<u64>,
    sums: Vec<f64>,
    point: Vec<f64>,
}

impl IterMapper {
    fn new(centres: Arc<Centres>) -> Self {
        let (k, d) = (centres.points.len(), centres.dims);
        IterMapper {
            centres,
            counts: vec![0; k],
            sums: vec![0.0; k * d],
            point: Vec::new(),
        }
    }
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
        point_of(line, d, &mut self.point)?;
        let c = self.centres.nearest(&self.point);
        self.counts[c] += 1;
        for (s, x) in self.sums[c * d..(c + 1) * d].iter_mut().zip(&self.point) {
            *s += x;
        }
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut MapContext<'_>) -> Result<()> {
        let d = self.centres.dims;
        let mut value = Vec::with_capacity(8 + 8 * d);
        for (c, &n) in self.counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            value.clear();
            value.extend_from_slice(&n.to_le_bytes());
            for x in &self.sums[c * d..(c + 1) * d] {
                value.extend_from_slice(&x.to_le_bytes());
            }
            ctx.emit(&(c as u32).to_be_bytes(), &value)?;
        }
        Ok(())
    }
}

struct IterReducer {
    centres: Arc<Centres>,
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
        let (mut n, mut sum) = (0u64, vec![0.0; d]);
        while let Some(v) = values.next_value() {
            if v.len() != 8 + 8 * d {
                return Err(Error::user("a k-means partial sum of the wrong size"));
            }
            n += u64::from_le_bytes(v[..8].try_into().expect("8 bytes"));
            for (s, x) in sum.iter_mut().zip(v[8..].chunks_exact(8)) {
                *s += f64::from_le_bytes(x.try_into().expect("8 bytes"));
            }
        }
        let centre: Vec<f64> = sum.iter().map(|s| s / n as f64).collect();
        ctx.counters().incr(COUNTER_GROUP, "POINTS", n);
        write_centre(c, &centre, &mut self.buf);
        ctx.write_raw(&self.buf)?;
        ctx.write_raw(b"\n")?;
        self.next = c + 1;
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut ReduceContext<'_>) -> Result<()> {
        self.unchosen(self.centres.points.len(), ctx)
    }
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
