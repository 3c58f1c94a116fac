//! PageRank as HiBench runs it on MapReduce: a job that builds each page's
//! state from the edges, then per iteration a join-and-contribute job and
//! a rank job.
//!
//! Formats. Edges: `src TAB dst` (page numbers). State: `page TAB rank TAB
//! dst,dst,...` (the rank empty before the first iteration, meaning `1/N`;
//! no destinations for a dangling page). The answer: `page TAB rank`.
//!
//! With `N` pages and damping `d`, one iteration is networkx's:
//!
//! ```text
//! rank'(v) = (1 - d) / N + d * (sum over u -> v of rank(u) / outdeg(u) + D / N)
//! ```
//!
//! where `D` is the rank of the dangling pages (no out-links), spread over
//! every page as if they linked to all. The contribute job counts `D` in
//! [`DANGLING`] (fixed point, [`FIXED_ONE`] a unit) and the rank job
//! receives it as a parameter; the build job counts the pages in
//! [`PAGES`].

use std::io::Write;

use sluice_api::{Error, JobSpec, MapContext, Mapper, ReduceContext, Reducer, Result, Values};

/// The user counter group of PageRank.
pub const COUNTER_GROUP: &str = "PAGERANK";
/// The counter of distinct pages (the build job's).
pub const PAGES: &str = "PAGES";
/// The counter of the dangling pages' rank (the contribute job's), in
/// units of `1 / FIXED_ONE`.
pub const DANGLING: &str = "DANGLING";
/// One rank unit in [`DANGLING`]: 2^60 (ranks sum to 1, so the total
/// fits; a rank is kept to 2^-60).
pub const FIXED_ONE: f64 = (1u64 << 60) as f64;

fn number(field: &[u8], what: &str) -> Result<u64> {
    // Plain digits, the usual case (every destination of every page in
    // every iteration), without a UTF-8 check and a trim first.
    if (1..=19).contains(&field.len()) && field.iter().all(u8::is_ascii_digit) {
        return Ok(field
            .iter()
            .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')));
    }
    std::str::from_utf8(field)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| {
            Error::bad_record(format!(
                "{what} {:?} is not a page number",
                String::from_utf8_lossy(field)
            ))
        })
}

/// Parses an edge line `src TAB dst` (a space also separates).
pub fn parse_edge(line: &[u8]) -> Result<(u64, u64)> {
    let mut it = line
        .split(|&b| b == b'\t' || b == b' ')
        .filter(|f| !f.is_empty());
    let (Some(s), Some(d), None) = (it.next(), it.next(), it.next()) else {
        return Err(Error::bad_record("an edge is `src TAB dst`"));
    };
    Ok((number(s, "source")?, number(d, "destination")?))
}

/// The job building each page's state from the edges.
pub fn pagerank_build() -> JobSpec {
    JobSpec::new("pagerank-build", || BuildMapper).reducer(|| BuildReducer {
        dsts: Vec::new(),
        buf: Vec::new(),
    })
}

struct BuildMapper;

impl Mapper for BuildMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        let (s, d) = parse_edge(line)?;
        ctx.emit(&s.to_be_bytes(), &d.to_le_bytes())?;
        // The destination is a page too, linked or not.
        ctx.emit(&d.to_be_bytes(), &[])
    }
}

struct BuildReducer {
    dsts: Vec<u64>,
    buf: Vec<u8>,
}

impl Reducer for BuildReducer {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        let page = page_key(key)?;
        self.dsts.clear();
        while let Some(v) = values.next_value() {
            if let Ok(b) = <[u8; 8]>::try_from(v) {
                self.dsts.push(u64::from_le_bytes(b));
            }
        }
        self.dsts.sort_unstable();
        self.dsts.dedup();
        self.buf.clear();
        let _ = write!(self.buf, "{page}\t\t");
        write_dsts(&self.dsts, &mut self.buf);
        ctx.counters().incr(COUNTER_GROUP, PAGES, 1);
        ctx.write_raw(&self.buf)
    }
}

fn page_key(key: &[u8]) -> Result<u64> {
    <[u8; 8]>::try_from(key)
        .map(u64::from_be_bytes)
        .map_err(|_| Error::user("a PageRank key is not 8 bytes"))
}

fn write_dsts(dsts: &[u64], out: &mut Vec<u8>) {
    for (i, d) in dsts.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let _ = write!(out, "{d}");
    }
    out.push(b'\n');
}

/// A state line: page, rank (`None`: `1/N`), destinations (text).
fn parse_state(line: &[u8]) -> Result<(u64, Option<f64>, &[u8])> {
    let mut it = line.splitn(3, |&b| b == b'\t');
    let (Some(p), Some(r), Some(d)) = (it.next(), it.next(), it.next()) else {
        return Err(Error::bad_record(
            "a PageRank state line is `page TAB rank TAB dsts`",
        ));
    };
    let rank = if r.is_empty() {
        None
    } else {
        Some(
            std::str::from_utf8(r)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| Error::bad_record("a rank that is not a number"))?,
        )
    };
    Ok((number(p, "page")?, rank, d))
}

/// The join-and-contribute job over `pages` pages: each page's rank split
/// over its out-links, summed per destination.
pub fn pagerank_contribute(pages: u64) -> JobSpec {
    JobSpec::new("pagerank-contribute", move || ContributeMapper {
        pages,
        value: Vec::new(),
    })
    .reducer(|| ContributeReducer {
        buf: Vec::new(),
        dsts: Vec::new(),
    })
}

struct ContributeMapper {
    pages: u64,
    value: Vec<u8>,
}

/// Tags of the contribute job's values.
const STRUCTURE: u8 = b'S';
const SHARE: u8 = b'C';

impl Mapper for ContributeMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        let (page, rank, dsts) = parse_state(line)?;
        let rank = rank.unwrap_or(1.0 / self.pages.max(1) as f64);
        self.value.clear();
        self.value.push(STRUCTURE);
        self.value.extend_from_slice(dsts);
        ctx.emit(&page.to_be_bytes(), &self.value)?;
        if dsts.is_empty() {
            let fixed = (rank * FIXED_ONE).round() as u64;
            ctx.counters().incr(COUNTER_GROUP, DANGLING, fixed);
            return Ok(());
        }
        let out = dsts.split(|&b| b == b',').count();
        let share = rank / out as f64;
        for d in dsts.split(|&b| b == b',') {
            self.value.clear();
            self.value.push(SHARE);
            self.value.extend_from_slice(&share.to_le_bytes());
            ctx.emit(&number(d, "destination")?.to_be_bytes(), &self.value)?;
        }
        Ok(())
    }
}

struct ContributeReducer {
    buf: Vec<u8>,
    dsts: Vec<u8>,
}

impl Reducer for ContributeReducer {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        let page = page_key(key)?;
        let mut sum = ExactSum::default();
        let mut known = false;
        self.dsts.clear();
        while let Some(v) = values.next_value() {
            match v.split_first() {
                Some((&STRUCTURE, dsts)) => {
                    known = true;
                    self.dsts.extend_from_slice(dsts);
                }
                Some((&SHARE, x)) => {
                    let b: [u8; 8] = x
                        .try_into()
                        .map_err(|_| Error::user("a share not 8 bytes"))?;
                    sum.add(f64::from_le_bytes(b));
                }
                _ => return Err(Error::user("a PageRank value of no known kind")),
            }
        }
        if !known {
            return Err(Error::user(format!(
                "page {page} is linked to but has no state line"
            )));
        }
        let sum = sum.value();
        self.buf.clear();
        let _ = write!(self.buf, "{page}\t{sum}\t");
        self.buf.extend_from_slice(&self.dsts);
        self.buf.push(b'\n');
        ctx.write_raw(&self.buf)
    }
}

/// A sum of shares that does not depend on their order: the values arrive
/// in the order their map tasks spilled, which varies from run to run, and
/// a floating-point sum in arrival order varied in its last bits with it.
/// Each share is added exactly as a fixed-point number of 2^-80 units in
/// 128 bits (all 53 significant bits of shares from 2^-27 up to
/// [`EXACT_MAX`]; smaller ones lose their bits below 2^-80, the same way
/// whatever the order), and the total is rounded to the nearest `f64`
/// once. A share of [`EXACT_MAX`] or more (ranks never are: they are at
/// most 1), or a total past 2^127 units, turns the sum into a plain one.
#[derive(Default)]
struct ExactSum {
    fixed: i128,
    /// A plain sum, once a share did not fit.
    plain: Option<f64>,
}

/// The fixed point's unit: 2^-[`EXACT_SCALE`].
const EXACT_SCALE: i32 = 80;
/// Shares below this (2^8, under 2^88 units) add exactly: 2^39 of them
/// fit in 128 bits.
const EXACT_MAX: f64 = 256.0;

impl ExactSum {
    fn add(&mut self, x: f64) {
        if let Some(p) = &mut self.plain {
            *p += x;
            return;
        }
        if !x.is_finite() || x.abs() >= EXACT_MAX {
            self.plain = Some(self.value() + x);
            return;
        }
        let bits = x.to_bits();
        let exp = ((bits >> 52) & 0x7ff) as i32;
        let mant = (bits & ((1 << 52) - 1)) | if exp == 0 { 0 } else { 1 << 52 };
        // x = mant * 2^(max(exp, 1) - 1075), in units of 2^-EXACT_SCALE.
        let shift = exp.max(1) - 1075 + EXACT_SCALE;
        let units = if shift >= 0 {
            i128::from(mant) << shift
        } else {
            i128::from(mant >> (-shift).min(63))
        };
        let sum = if bits >> 63 == 1 {
            self.fixed.checked_sub(units)
        } else {
            self.fixed.checked_add(units)
        };
        match sum {
            Some(f) => self.fixed = f,
            None => self.plain = Some(self.value() + x),
        }
    }

    fn value(&self) -> f64 {
        self.plain
            .unwrap_or_else(|| self.fixed as f64 / 2f64.powi(EXACT_SCALE))
    }
}

/// The rank job (map-only): each page's new rank from its summed shares,
/// over `pages` pages with `damping`, `dangling` the dangling pages' rank
/// (fixed point). The last iteration writes `page TAB rank` only.
pub fn pagerank_rank(pages: u64, damping: f64, dangling: u64, last: bool) -> JobSpec {
    let n = pages.max(1) as f64;
    let base = (1.0 - damping) / n + damping * (dangling as f64 / FIXED_ONE) / n;
    JobSpec::new("pagerank-rank", move || RankMapper {
        base,
        damping,
        last,
        buf: Vec::new(),
    })
}

struct RankMapper {
    base: f64,
    damping: f64,
    last: bool,
    buf: Vec<u8>,
}

impl Mapper for RankMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        let (page, sum, dsts) = parse_state(line)?;
        let rank = self.base + self.damping * sum.unwrap_or(0.0);
        self.buf.clear();
        if self.last {
            let _ = writeln!(self.buf, "{page}\t{rank}");
        } else {
            let _ = write!(self.buf, "{page}\t{rank}\t");
            self.buf.extend_from_slice(dsts);
            self.buf.push(b'\n');
        }
        ctx.emit_raw(&self.buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_sum_the_same_in_any_order() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let shares: Vec<f64> = (0..1000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 11) as f64 / (1u64 << 53) as f64 * 1e-3
            })
            .collect();
        let sum = |v: &[f64]| {
            let mut s = ExactSum::default();
            v.iter().for_each(|&x| s.add(x));
            s.value()
        };
        let mut reversed = shares.clone();
        reversed.reverse();
        // A plain sum differs between the orders here; the exact one does
        // not, and is within an ulp of the plain sums.
        let plain = |v: &[f64]| v.iter().sum::<f64>();
        assert_ne!(plain(&shares), plain(&reversed));
        assert_eq!(sum(&shares), sum(&reversed));
        assert!((sum(&shares) - plain(&shares)).abs() <= 1e-15 * plain(&shares));
        assert_eq!(sum(&[0.1, 0.2]), 0.1 + 0.2);
        assert_eq!(sum(&[]), 0.0);
        assert_eq!(sum(&[1.5, -0.5, 5e-324]), 1.0);
        assert_eq!(sum(&[1e30, 1.0]), 1e30 + 1.0, "out of range: a plain sum");
        assert_eq!(sum(&[1.0, 300.0, 2.0]), 303.0);
        assert_eq!(sum(&[-1e-30, 1e-30]), 0.0);
    }

    #[test]
    fn lines_parse_or_are_bad_records() {
        assert_eq!(parse_edge(b"3\t17").unwrap(), (3, 17));
        assert_eq!(
            parse_edge(b"18446744073709551615\t9999999999999999999").unwrap(),
            (u64::MAX, 9_999_999_999_999_999_999)
        );
        assert!(matches!(
            parse_edge(b"18446744073709551616\t1"),
            Err(Error::BadRecord(_))
        ));
        assert_eq!(number(b" 12 ", "page").unwrap(), 12);
        assert!(matches!(number(b"", "page"), Err(Error::BadRecord(_))));
        assert!(matches!(number(b"1x", "page"), Err(Error::BadRecord(_))));
        assert_eq!(parse_edge(b"3 17").unwrap(), (3, 17));
        assert!(matches!(parse_edge(b"3"), Err(Error::BadRecord(_))));
        assert!(matches!(parse_edge(b"3\tx"), Err(Error::BadRecord(_))));
        let (p, r, d) = parse_state(b"5\t\t1,2").unwrap();
        assert_eq!((p, r, d), (5, None, &b"1,2"[..]));
        let (p, r, d) = parse_state(b"5\t0.25\t").unwrap();
        assert_eq!((p, r, d), (5, Some(0.25), &b""[..]));
    }
}
