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
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(page).as_bytes());
        self.buf.extend_from_slice(b"\t\t");
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
        out.extend_from_slice(itoa::Buffer::new().format(*d).as_bytes());
    }
    out.push(b'\n');
}

/// Appends `page TAB rank` to `out`. The rank is printed as its shortest
/// round-trip decimal by `ryu` (and the page by `itoa`): the same value
/// `Display` prints, in fewer cycles (formatting and parsing the ranks
/// were a tenth of an iteration), though with an exponent where
/// `Display` writes every digit (`1.5e-7`, not `0.00000015`), as Java's
/// `Double.toString` in Hadoop's output does (`1.5E-7`).
fn put_page_rank(out: &mut Vec<u8>, page: u64, rank: f64) {
    out.extend_from_slice(itoa::Buffer::new().format(page).as_bytes());
    out.push(b'\t');
    out.extend_from_slice(ryu::Buffer::new().format(rank).as_bytes());
}

/// Appends a state line `page TAB rank TAB dsts` (the destinations
/// already comma-separated) to `out`.
fn state_line(out: &mut Vec<u8>, page: u64, rank: f64, dsts: &[u8]) {
    put_page_rank(out, page, rank);
    out.push(b'\t');
    out.extend_from_slice(dsts);
    out.push(b'\n');
}

/// A state line: page, rank (`None`: `1/N`), destinations (text).
fn parse_state(line: &[u8]) -> Result<(u64, Option<f64>, &[u8])> {
    let (p, r, d) = state_fields(line)?;
    let rank = if r.is_empty() {
        None
    } else {
        Some(
            fast_float2::parse::<f64, _>(r)
                .ok()
                .ok_or_else(|| Error::bad_record("a rank that is not a number"))?,
        )
    };
    Ok((number(p, "page")?, rank, d))
}

/// A state line's three fields: page, rank, destinations, as text. The
/// tabs are a few bytes in, found by a plain loop (a call to `memchr`
/// costs more over so few bytes; every line of every iteration, twice).
fn state_fields(line: &[u8]) -> Result<(&[u8], &[u8], &[u8])> {
    let bad = || Error::bad_record("a PageRank state line is `page TAB rank TAB dsts`");
    let tab = |s: &[u8]| s.iter().position(|&b| b == b'\t');
    let t1 = tab(line).ok_or_else(bad)?;
    let rest = &line[t1 + 1..];
    let t2 = tab(rest).ok_or_else(bad)?;
    Ok((&line[..t1], &rest[..t2], &rest[t2 + 1..]))
}

/// The join-and-contribute job over `pages` pages: each page's rank split
/// over its out-links, summed per destination. A combiner folds each
/// spill's values of a page into one ([`ShareSum`]: its shares summed, its
/// state line's destinations kept), and folds at emit time the shares of
/// the pages in the map side's small fold table
/// ([`JobSpec::fold_combiner`]): half of all shares go to a few thousand
/// popular pages, and fold there before they are sorted. The reduces
/// merge about a third of the values. (Folding every page at emit time in
/// the hash collector's table cost more than the sort: 400,000 pages'
/// entries miss the cache.)
pub fn pagerank_contribute(pages: u64) -> JobSpec {
    let spec = JobSpec::new("pagerank-contribute", move || ContributeMapper {
        pages,
        value: Vec::new(),
        dsts: Vec::new(),
    })
    .reducer(|| ContributeReducer {
        buf: Vec::new(),
        dsts: Vec::new(),
    });
    spec.fold_combiner(std::sync::Arc::new(ShareSum))
}

struct ContributeMapper {
    pages: u64,
    value: Vec<u8>,
    /// The page's destinations, parsed before any is emitted (the share
    /// needs their count).
    dsts: Vec<u64>,
}

/// The contribute job's values, told apart by their length:
///
/// - 8 bytes: a share, or a sum of shares, a little-endian `i64` in units
///   of 2^-[`EXACT_SCALE`] (see [`units`]), when it fits (shares below
///   2^-17, nearly all of them);
/// - 16 bytes: the same as an `i128`, when it does not;
/// - 17 bytes or more: the page's state line, its destinations after the
///   shares summed into it so far: [`STRUCTURE_SHORT`] and an `i64` when
///   the sum fits and the destinations take 8 bytes or more (so that no
///   line is 8 or 16 bytes long), else [`STRUCTURE`] and an `i128`.
///
/// A share leaves the map in its exact form, converted once: half of the
/// shares fold at emit time ([`JobSpec::fold_combiner`]), and as `f64`s
/// (converted at every fold) the job took 3% longer. In 8 bytes rather
/// than 16 the shares take a fifth less of the spills, and the lines'
/// short heads another 6%.
const STRUCTURE: u8 = b'S';
/// The tag of a state line with a short head.
const STRUCTURE_SHORT: u8 = b'T';
/// Bytes of a short share or sum value.
const SHORT_LEN: usize = 8;
/// Bytes of a long share or sum value.
const SUM_LEN: usize = 16;
/// Bytes of a [`STRUCTURE`] value before its destinations.
const VALUE_HEAD: usize = 17;
/// Bytes of a [`STRUCTURE_SHORT`] value before its destinations.
const SHORT_HEAD: usize = 9;

impl Mapper for ContributeMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        let (page, rank, dsts) = parse_state(line)?;
        let rank = rank.unwrap_or(1.0 / self.pages.max(1) as f64);
        self.value.clear();
        put_line(&mut self.value, 0, dsts);
        ctx.emit(&page.to_be_bytes(), &self.value)?;
        if dsts.is_empty() {
            let fixed = (rank * FIXED_ONE).round() as u64;
            ctx.counters().incr(COUNTER_GROUP, DANGLING, fixed);
            return Ok(());
        }
        // One pass over the destinations, digits folded as they come (the
        // map's main loop: every out-link of every page, every iteration);
        // a field that is not plain digits goes to `number` for its error.
        self.dsts.clear();
        let (mut n, mut digits, mut start) = (0u64, 0usize, 0usize);
        for (i, &b) in dsts.iter().enumerate() {
            if b == b',' {
                self.dsts.push(plain(n, digits, &dsts[start..i])?);
                (n, digits, start) = (0, 0, i + 1);
            } else {
                n = n
                    .wrapping_mul(10)
                    .wrapping_add(u64::from(b.wrapping_sub(b'0')));
                digits += 1;
                if !b.is_ascii_digit() {
                    digits = usize::MAX / 2;
                }
            }
        }
        self.dsts.push(plain(n, digits, &dsts[start..])?);
        let share = rank / self.dsts.len() as f64;
        let Some(share) = units(share) else {
            return Err(Error::bad_record(format!(
                "page {page}'s rank {rank} is out of range"
            )));
        };
        let (share, len) = sum_bytes(share);
        for d in &self.dsts {
            ctx.emit(&d.to_be_bytes(), &share[..len])?;
        }
        Ok(())
    }
}

/// A destination folded from `digits` digits as `n`, or, if the field
/// was not 1 to 19 plain digits, what [`number`] makes of it.
#[inline]
fn plain(n: u64, digits: usize, field: &[u8]) -> Result<u64> {
    if (1..=19).contains(&digits) {
        Ok(n)
    } else {
        number(field, "destination")
    }
}

/// What a value of this job holds: a share or sum (`false`), or a state
/// line (`true`), with its shares in exact units; `None` if it is not one
/// of this job's values.
fn share_value(v: &[u8]) -> Option<(bool, i128)> {
    match v.len() {
        SHORT_LEN => Some((false, i64::from_le_bytes(v.try_into().ok()?).into())),
        SUM_LEN => Some((false, i128::from_le_bytes(v.try_into().ok()?))),
        n if n > SUM_LEN => match v[0] {
            STRUCTURE => Some((true, i128::from_le_bytes(v[1..VALUE_HEAD].try_into().ok()?))),
            STRUCTURE_SHORT => {
                let short = i64::from_le_bytes(v[1..SHORT_HEAD].try_into().ok()?);
                Some((true, short.into()))
            }
            _ => None,
        },
        _ => None,
    }
}

/// The destinations of a state line value (one [`share_value`] calls a
/// line).
fn line_dsts(v: &[u8]) -> &[u8] {
    match v[0] {
        STRUCTURE_SHORT => &v[SHORT_HEAD..],
        _ => &v[VALUE_HEAD..],
    }
}

/// Appends a state line value of `dsts` with `sum` to `out`, with a short
/// head where it can.
fn put_line(out: &mut Vec<u8>, sum: i128, dsts: &[u8]) {
    match i64::try_from(sum) {
        Ok(short) if SHORT_HEAD + dsts.len() > SUM_LEN => {
            out.push(STRUCTURE_SHORT);
            out.extend_from_slice(&short.to_le_bytes());
        }
        _ => {
            out.push(STRUCTURE);
            out.extend_from_slice(&sum.to_le_bytes());
        }
    }
    out.extend_from_slice(dsts);
}

/// The contribute job's fold: shares add (exactly, in fixed point, so the
/// sums are the same in any order), and a page's destinations are kept
/// with them. A page has one state line; should two meet, the first
/// one's destinations stay.
#[derive(Debug, Clone, Copy)]
pub struct ShareSum;

impl sluice_api::Aggregator for ShareSum {
    fn fold_in_place(&self, acc: &mut [u8], value: &[u8]) -> bool {
        // Two short sums, most folds: added as `i64`s.
        if let (Ok(a), Ok(v)) = (
            <&mut [u8; SHORT_LEN]>::try_from(&mut *acc),
            <&[u8; SHORT_LEN]>::try_from(value),
        ) {
            let sum = i64::from_le_bytes(*a).checked_add(i64::from_le_bytes(*v));
            return sum.map(|s| *a = s.to_le_bytes()).is_some();
        }
        let (Some((structure, a)), Some((_, v))) = (share_value(acc), share_value(value)) else {
            return false;
        };
        let sum = a.saturating_add(v);
        if structure {
            match (acc[0], i64::try_from(sum)) {
                (STRUCTURE, _) => acc[1..VALUE_HEAD].copy_from_slice(&sum.to_le_bytes()),
                (_, Ok(short)) => acc[1..SHORT_HEAD].copy_from_slice(&short.to_le_bytes()),
                _ => return false, // the line's head grows
            }
            return true;
        }
        if value.len() > SUM_LEN {
            return false; // a sum grows into the line it meets
        }
        match acc.len() {
            SUM_LEN => acc.copy_from_slice(&sum.to_le_bytes()),
            _ => match i64::try_from(sum) {
                Ok(short) => acc.copy_from_slice(&short.to_le_bytes()),
                Err(_) => return false, // it grows to 16 bytes
            },
        }
        true
    }

    fn fold(&self, acc: &[u8], value: &[u8], out: &mut Vec<u8>) {
        let (Some((acc_line, a)), Some((value_line, v))) = (share_value(acc), share_value(value))
        else {
            // Not this job's values: a value of no kind, which the reducer
            // refuses.
            out.push(0);
            return;
        };
        let sum = a.saturating_add(v);
        if acc_line {
            // A line whose sum outgrew its short head.
            put_line(out, sum, line_dsts(acc));
        } else if value_line {
            // A sum met its page's state line: the line, with the sum.
            put_line(out, sum, line_dsts(value));
        } else {
            let (bytes, len) = sum_bytes(sum);
            out.extend_from_slice(&bytes[..len]);
        }
    }
}

/// A share or sum as a value: its 16 little-endian bytes, and how many
/// of them it takes (8 when it fits an `i64`).
#[inline]
fn sum_bytes(units: i128) -> ([u8; SUM_LEN], usize) {
    let len = if i64::try_from(units).is_ok() {
        SHORT_LEN
    } else {
        SUM_LEN
    };
    (units.to_le_bytes(), len)
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
        let mut sum = 0i128;
        let mut known = false;
        self.dsts.clear();
        while let Some(v) = values.next_value() {
            let Some((structure, units)) = share_value(v) else {
                return Err(Error::user("a PageRank value of no known kind"));
            };
            sum = sum.saturating_add(units);
            if structure && !known {
                known = true;
                self.dsts.extend_from_slice(line_dsts(v));
            }
        }
        if !known {
            return Err(Error::user(format!(
                "page {page} is linked to but has no state line"
            )));
        }
        let sum = sum as f64 / 2f64.powi(EXACT_SCALE);
        self.buf.clear();
        state_line(&mut self.buf, page, sum, &self.dsts);
        ctx.write_raw(&self.buf)
    }
}

/// The fixed point in which shares are summed: 2^-80 units in 128 bits.
/// The values of a key arrive in the order their runs were made, which
/// varies from run to run, and floating-point sums in arrival order
/// varied in their last bits with it; integer sums do not. Every share's
/// 53 significant bits fit from 2^-27 up to [`EXACT_MAX`] (smaller ones
/// lose their bits below 2^-80, the same way whatever the order), and the
/// total is rounded to the nearest `f64` once. Ranks are at most 1, so a
/// page's sum is too, far below the 2^47 units' headroom.
const EXACT_SCALE: i32 = 80;
/// Shares must be below this (2^8, under 2^88 units).
const EXACT_MAX: f64 = 256.0;

/// `x` in units of 2^-[`EXACT_SCALE`], truncated; `None` if it is not
/// finite or not below [`EXACT_MAX`] in size.
fn units(x: f64) -> Option<i128> {
    if !x.is_finite() || x.abs() >= EXACT_MAX {
        return None;
    }
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let mant = (bits & ((1 << 52) - 1)) | if exp == 0 { 0 } else { 1 << 52 };
    // x = mant * 2^(max(exp, 1) - 1075), in units of 2^-EXACT_SCALE.
    let shift = exp.max(1) - 1075 + EXACT_SCALE;
    let u = if shift >= 0 {
        i128::from(mant) << shift
    } else {
        i128::from(mant >> (-shift).min(63))
    };
    Some(if bits >> 63 == 1 { -u } else { u })
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
            put_page_rank(&mut self.buf, page, rank);
            self.buf.push(b'\n');
        } else {
            state_line(&mut self.buf, page, rank, dsts);
        }
        ctx.emit_raw(&self.buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sums of shares as the job makes them: folded by [`ShareSum`] in
    /// the given order, then rounded.
    fn folded(shares: &[f64]) -> f64 {
        use sluice_api::Aggregator;
        let mut acc = vec![STRUCTURE];
        acc.extend_from_slice(&0i128.to_le_bytes());
        acc.extend_from_slice(b"1,2");
        for &x in shares {
            assert!(ShareSum.fold_in_place(&mut acc, &units(x).unwrap().to_le_bytes()));
        }
        assert_eq!(&acc[VALUE_HEAD..], b"1,2", "the destinations stay");
        share_value(&acc).unwrap().1 as f64 / 2f64.powi(EXACT_SCALE)
    }

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
        let mut reversed = shares.clone();
        reversed.reverse();
        // A plain sum differs between the orders here; the exact one does
        // not, and is within an ulp of the plain sums.
        let plain = |v: &[f64]| v.iter().sum::<f64>();
        assert_ne!(plain(&shares), plain(&reversed));
        assert_eq!(folded(&shares), folded(&reversed));
        assert!((folded(&shares) - plain(&shares)).abs() <= 1e-15 * plain(&shares));
        assert_eq!(folded(&[0.1, 0.2]), 0.1 + 0.2);
        assert_eq!(folded(&[]), 0.0);
        assert_eq!(folded(&[1.5, -0.5, 5e-324]), 1.0);
        assert_eq!(folded(&[1.0, 200.0, 2.0]), 203.0);
        assert_eq!(units(256.0), None);
        assert_eq!(units(f64::NAN), None);
    }

    /// A share folded with its page's state line, in either order, gives
    /// the line with the share; shares fold with shares in place.
    #[test]
    fn a_share_and_its_state_line_fold_in_either_order() {
        use sluice_api::Aggregator;
        let share = |x: f64| units(x).unwrap().to_le_bytes().to_vec();
        let mut line = vec![STRUCTURE];
        line.extend_from_slice(&units(0.25).unwrap().to_le_bytes());
        line.extend_from_slice(b"7,9");
        let mut acc = share(0.5);
        assert!(!ShareSum.fold_in_place(&mut acc, &line), "it grows");
        let mut out = Vec::new();
        ShareSum.fold(&acc, &line, &mut out);
        assert_eq!(share_value(&out), Some((true, units(0.75).unwrap())));
        assert_eq!(&out[VALUE_HEAD..], b"7,9");
        let mut acc = line.clone();
        assert!(ShareSum.fold_in_place(&mut acc, &share(0.5)));
        assert_eq!(acc, out);
        // Shares fold into sums in place, and grow into the line they
        // meet.
        let mut acc = share(0.5);
        assert!(ShareSum.fold_in_place(&mut acc, &share(0.25)));
        assert!(ShareSum.fold_in_place(&mut acc, &share(0.125)));
        assert!(ShareSum.fold_in_place(&mut acc, &share(0.0625)));
        assert_eq!(acc, share(0.9375));
        let mut out = Vec::new();
        ShareSum.fold(&acc, &line, &mut out);
        assert_eq!(share_value(&out), Some((true, units(1.1875).unwrap())));
        assert_eq!(&out[VALUE_HEAD..], b"7,9");
        // Anything else folds to a value the reducer refuses.
        assert!(!ShareSum.fold_in_place(&mut acc, b"junk"));
        let mut out = Vec::new();
        ShareSum.fold(&acc, b"junk", &mut out);
        assert_eq!(share_value(&out), None);
    }

    /// Shares of 8 bytes fold in place while their sum fits, grow to 16
    /// bytes when it does not, and fold into their page's state line as
    /// the 16-byte ones do.
    #[test]
    fn short_shares_grow_when_their_sum_does() {
        use sluice_api::Aggregator;
        let small = units(1e-6).unwrap();
        let (b, len) = sum_bytes(small);
        let short = &b[..len];
        assert_eq!(len, SHORT_LEN);
        let mut acc = short.to_vec();
        assert!(ShareSum.fold_in_place(&mut acc, short));
        assert_eq!(share_value(&acc), Some((false, 2 * small)));
        let big = i128::from(i64::MAX) - small;
        let (bb, blen) = sum_bytes(big);
        assert_eq!(blen, SHORT_LEN);
        assert!(
            !ShareSum.fold_in_place(&mut acc, &bb[..blen]),
            "the sum outgrows 8 bytes"
        );
        let mut out = Vec::new();
        ShareSum.fold(&acc, &bb[..blen], &mut out);
        assert_eq!(out.len(), SUM_LEN);
        assert_eq!(share_value(&out), Some((false, 2 * small + big)));
        assert!(ShareSum.fold_in_place(&mut out, short), "16 bytes stay 16");
        assert_eq!(share_value(&out), Some((false, 3 * small + big)));
        let mut line = vec![STRUCTURE];
        line.extend_from_slice(&0i128.to_le_bytes());
        line.extend_from_slice(b"4");
        let mut out = Vec::new();
        ShareSum.fold(&acc, &line, &mut out);
        assert_eq!(share_value(&out), Some((true, 2 * small)));
        assert!(ShareSum.fold_in_place(&mut line, short));
        assert_eq!(share_value(&line), Some((true, small)));
        assert_eq!(&line[VALUE_HEAD..], b"4");
    }

    /// A state line of 8 destination bytes or more travels with a short
    /// head: shares fold into it in place until its sum outgrows an
    /// `i64`, then it grows into a long head with the same destinations;
    /// a shorter line (or a dangling page's) keeps the long head, so no
    /// line is as long as a share.
    #[test]
    fn state_lines_take_a_short_head_while_their_sum_fits() {
        use sluice_api::Aggregator;
        let mut line = Vec::new();
        put_line(&mut line, 0, b"10,20,30");
        assert_eq!((line[0], line.len()), (STRUCTURE_SHORT, SHORT_HEAD + 8));
        for (dsts, len) in [(&b"1234567"[..], VALUE_HEAD + 7), (b"", VALUE_HEAD)] {
            let mut short = Vec::new();
            put_line(&mut short, 0, dsts);
            assert_eq!((short[0], short.len()), (STRUCTURE, len));
        }
        let (b, blen) = sum_bytes(units(1e-6).unwrap());
        assert!(ShareSum.fold_in_place(&mut line, &b[..blen]));
        assert_eq!(share_value(&line), Some((true, units(1e-6).unwrap())));
        let big = i128::from(i64::MAX);
        let (bb, _) = sum_bytes(big);
        assert!(!ShareSum.fold_in_place(&mut line, &bb), "the head grows");
        let mut out = Vec::new();
        ShareSum.fold(&line, &bb, &mut out);
        assert_eq!(out[0], STRUCTURE);
        assert_eq!(share_value(&out), Some((true, units(1e-6).unwrap() + big)));
        assert_eq!(line_dsts(&out), b"10,20,30");
        // A sum meeting a short-headed line, and the reducer's view of it.
        let mut met = Vec::new();
        ShareSum.fold(&b[..blen], &line, &mut met);
        assert_eq!(met[0], STRUCTURE_SHORT);
        assert_eq!(share_value(&met), Some((true, 2 * units(1e-6).unwrap())));
        assert_eq!(line_dsts(&met), b"10,20,30");
    }

    /// The contribute map of one state line over 4 pages: what it emits
    /// and the dangling rank it counts.
    fn contribute(line: &[u8]) -> (Result<()>, Vec<(u64, bool, i128)>, u64) {
        let job = pagerank_contribute(4);
        let mut counters = sluice_api::Counters::default();
        let mut out = crate::testing::Pairs(Vec::new());
        let mut m = (job.mapper)();
        let r = m.map(0, line, &mut MapContext::new(&mut out, &mut counters));
        let got = out
            .0
            .iter()
            .map(|(k, v)| {
                let (structure, units) = share_value(v).unwrap();
                (page_key(k).unwrap(), structure, units)
            })
            .collect();
        (r, got, counters.user(COUNTER_GROUP, DANGLING))
    }

    /// A page's state line is passed on and its rank split over its
    /// out-links (1/N before the first iteration); a dangling page's rank
    /// is counted; a rank whose shares cannot be summed exactly is a bad
    /// record, not a wrong answer.
    #[test]
    fn the_contribute_map_splits_ranks_and_refuses_ranks_out_of_range() {
        let (r, got, dangling) = contribute(b"1\t\t2,3");
        assert!(r.is_ok());
        let eighth = units(0.125).unwrap();
        assert_eq!(got, [(1, true, 0), (2, false, eighth), (3, false, eighth)]);
        assert_eq!(dangling, 0);
        let (r, got, dangling) = contribute(b"3\t0.5\t");
        assert!(r.is_ok());
        assert_eq!(got, [(3, true, 0)]);
        assert_eq!(dangling, (0.5 * FIXED_ONE) as u64);
        let (r, got, _) = contribute(b"1\t0.5\t12,3,45");
        assert!(r.is_ok());
        let sixth = units(0.5 / 3.0).unwrap();
        assert_eq!(
            got,
            [
                (1, true, 0),
                (12, false, sixth),
                (3, false, sixth),
                (45, false, sixth)
            ]
        );
        // A destination that is not a page number is a bad record.
        for dsts in ["2,x", "2,,3", "2,", "x", "2, 3", "99999999999999999999"] {
            let line = format!("1\t0.5\t{dsts}");
            let (r, _, _) = contribute(line.as_bytes());
            if dsts == "2, 3" {
                assert!(r.is_ok(), "spaces around a number are trimmed");
                continue;
            }
            assert!(
                matches!(&r, Err(Error::BadRecord(m)) if m.contains("destination")),
                "{dsts}: {r:?}"
            );
        }
        for rank in ["1e300", "inf", "NaN"] {
            let line = format!("1\t{rank}\t2");
            let (r, _, _) = contribute(line.as_bytes());
            assert!(
                matches!(&r, Err(Error::BadRecord(m)) if m.contains("out of range")),
                "{rank}: {r:?}"
            );
        }
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
        // A rank as `state_line` prints it reads back as the same double;
        // one that is not a whole number is a bad record.
        let mut line = Vec::new();
        state_line(&mut line, 7, 5.566728958753238e-7, b"1");
        assert_eq!(line, b"7\t5.566728958753238e-7\t1\n");
        let (_, r, _) = parse_state(&line[..line.len() - 1]).unwrap();
        assert_eq!(r, Some(5.566728958753238e-7));
        for bad in [&b"5\t0.25x\t1"[..], b"5\tx\t1", b"5\t0.2 5\t1"] {
            assert!(matches!(parse_state(bad), Err(Error::BadRecord(_))));
        }
    }
}
