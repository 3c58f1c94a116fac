//! The join task:
//!
//! ```sql
//! SELECT INTO Temp sourceIP, AVG(pageRank) AS avgPageRank, SUM(adRevenue) AS totalRevenue
//!   FROM Rankings AS R, UserVisits AS UV
//!  WHERE R.pageURL = UV.destURL AND UV.visitDate BETWEEN '2000-01-15' AND '2000-01-22'
//!  GROUP BY UV.sourceIP;
//! SELECT sourceIP, totalRevenue, avgPageRank FROM Temp ORDER BY totalRevenue DESC LIMIT 1;
//! ```
//!
//! Output: one line `sourceIP<TAB>totalRevenue|avgPageRank`.
//!
//! Two forms. The baseline chains three jobs as Hadoop would:
//! [`join_filter`] (a reduce-side join of Rankings and the week's visits on
//! the URL), [`join_aggregate`] (sum and average per source IP) and
//! [`join_top`] (the largest total). The fast form is one job,
//! [`join_fast`]: map tasks look each visit's URL up in an in-memory
//! [`RankTable`] of Rankings, combine per source IP at emit time, and a
//! single reducer keeps the best row.

use std::collections::HashMap;
use std::sync::Arc;

use crate::JobError;
use sluice_api::{
    ColumnarMap, Error, JobSpec, MapContext, Mapped, Mapper, ReduceContext, Reducer, Result,
    RowBatch, SumF64s, Values,
};
use sluice_formats::delimited::Decoder;
use sluice_formats::input::{RecordFormat, Split};
use sluice_formats::read::{read_split, ReadOptions};
use sluice_formats::FormatError;

use super::columns::{day_of, floats, Clean, Dates};
use super::{bad, decode, put_f64, visit, RankTable, RANKINGS_FIELDS, USERVISITS_FIELDS};

/// First day of the join's date range.
pub const JOIN_FROM: &[u8] = b"2000-01-15";
/// Last day of the join's date range (inclusive).
pub const JOIN_TO: &[u8] = b"2000-01-22";

fn in_week(date: &[u8]) -> bool {
    (JOIN_FROM..=JOIN_TO).contains(&date)
}

struct FilterMapper {
    dec: Decoder,
    value: Vec<u8>,
}

impl Mapper for FilterMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        let fields = self.dec.decode(line).len();
        self.value.clear();
        if fields == RANKINGS_FIELDS {
            let f = decode(&mut self.dec, line, RANKINGS_FIELDS)?;
            f.i64(1).map_err(bad)?;
            self.value.push(b'R');
            self.value.extend_from_slice(f.get(1).map_err(bad)?);
            return ctx.emit(f.get(0).map_err(bad)?, &self.value);
        }
        if fields != USERVISITS_FIELDS {
            return Err(Error::bad_record(format!(
                "expected {RANKINGS_FIELDS} (Rankings) or {USERVISITS_FIELDS} (UserVisits) fields, found {fields}"
            )));
        }
        let v = visit(&mut self.dec, line)?;
        if !in_week(v.date) {
            return Ok(());
        }
        let f = self.dec.decode(line);
        self.value.push(b'V');
        self.value.extend_from_slice(v.ip);
        self.value.push(b'|');
        self.value.extend_from_slice(f.get(3).map_err(bad)?);
        ctx.emit(v.url, &self.value)
    }
}

/// Joins one URL's rank with its visits: buffers the visits (in one flat
/// buffer, reused) until the rank is known.
#[derive(Default)]
struct JoinReducer {
    visits: Vec<u8>,
    ends: Vec<usize>,
    out: Vec<u8>,
}

impl Reducer for JoinReducer {
    fn reduce(
        &mut self,
        _url: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        self.visits.clear();
        self.ends.clear();
        let mut rank = None;
        while let Some(v) = values.next_value() {
            match v.split_first() {
                Some((b'R', r)) => rank = Some(r.to_vec()),
                Some((b'V', visit)) => {
                    self.visits.extend_from_slice(visit);
                    self.ends.push(self.visits.len());
                }
                _ => return Err(Error::user("join: unknown tagged value")),
            }
        }
        let Some(rank) = rank else {
            return Ok(());
        };
        let mut start = 0;
        for &end in &self.ends {
            let visit = &self.visits[start..end];
            let bar = memchr::memchr(b'|', visit).ok_or_else(|| Error::user("join: bad visit"))?;
            self.out.clear();
            self.out.extend_from_slice(&visit[bar + 1..]);
            self.out.push(b'|');
            self.out.extend_from_slice(&rank);
            ctx.write(&visit[..bar], &self.out)?;
            start = end;
        }
        Ok(())
    }
}

/// Job 1 of the baseline: over Rankings and UserVisits together, the
/// week's visits joined with their page's rank. Output
/// `sourceIP<TAB>adRevenue|pageRank`.
pub fn join_filter() -> JobSpec {
    JobSpec::new("pavlo-join-filter", || FilterMapper {
        dec: Decoder::new(b'|'),
        value: Vec::new(),
    })
    .reducer(JoinReducer::default)
}

/// Splits `key<TAB>a|b` into `(key, a, b)` as floats.
fn tab_pair(line: &[u8]) -> Result<(&[u8], f64, f64)> {
    let tab =
        memchr::memchr(b'\t', line).ok_or_else(|| Error::bad_record("expected key<TAB>a|b"))?;
    let mut dec = Decoder::new(b'|');
    let f = decode(&mut dec, &line[tab + 1..], 2)?;
    Ok((&line[..tab], f.f64(0).map_err(bad)?, f.f64(1).map_err(bad)?))
}

struct PairMapper {
    value: Vec<u8>,
}

impl Mapper for PairMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        let (ip, revenue, rank) = tab_pair(line)?;
        SumF64s::encode(&[revenue, rank, 1.0], &mut self.value);
        ctx.emit(ip, &self.value)
    }
}

/// Writes `total|average` from summed `[revenue, rank, count]` vectors.
#[derive(Default)]
struct TotalAverage {
    out: Vec<u8>,
}

fn sum_triples(values: &mut dyn Values) -> [f64; 3] {
    let mut s = [0.0; 3];
    while let Some(v) = values.next_value() {
        for (i, x) in s.iter_mut().enumerate() {
            *x += SumF64s::get(v, i).unwrap_or(0.0);
        }
    }
    s
}

fn total_average(out: &mut Vec<u8>, s: [f64; 3]) {
    out.clear();
    put_f64(out, s[0]);
    out.push(b'|');
    put_f64(out, s[1] / s[2]);
}

impl Reducer for TotalAverage {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        total_average(&mut self.out, sum_triples(values));
        ctx.write(key, &self.out)
    }
}

/// Job 2 of the baseline: per source IP, total revenue and average rank.
/// Output `sourceIP<TAB>totalRevenue|avgPageRank`.
pub fn join_aggregate() -> JobSpec {
    JobSpec::new("pavlo-join-aggregate", || PairMapper { value: Vec::new() })
        .reducer(TotalAverage::default)
        .aggregator(SumF64s)
}

/// The best row so far: largest total, then smallest key.
#[derive(Default)]
struct Best {
    row: Option<(f64, Vec<u8>, Vec<u8>)>,
}

impl Best {
    fn offer(&mut self, total: f64, key: &[u8], value: &[u8]) {
        let better = match &self.row {
            None => true,
            Some((t, k, _)) => total > *t || (total == *t && key < k.as_slice()),
        };
        if better {
            self.row = Some((total, key.to_vec(), value.to_vec()));
        }
    }
}

struct TopMapper {
    best: Best,
}

impl Mapper for TopMapper {
    fn map(&mut self, _offset: u64, line: &[u8], _ctx: &mut MapContext<'_>) -> Result<()> {
        let (ip, total, _) = tab_pair(line)?;
        let tab = ip.len();
        self.best.offer(total, ip, &line[tab + 1..]);
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut MapContext<'_>) -> Result<()> {
        if let Some((_, ip, value)) = &self.best.row {
            let line = [ip.as_slice(), b"\t", value].concat();
            ctx.emit(b"top", &line)?;
        }
        Ok(())
    }
}

#[derive(Default)]
struct TopReducer {
    best: Best,
}

impl Reducer for TopReducer {
    fn reduce(
        &mut self,
        _key: &[u8],
        values: &mut dyn Values,
        _ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        while let Some(line) = values.next_value() {
            let (ip, total, _) = tab_pair(line)?;
            self.best.offer(total, ip, &line[ip.len() + 1..]);
        }
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut ReduceContext<'_>) -> Result<()> {
        match &self.best.row {
            Some((_, ip, value)) => ctx.write(ip, value),
            None => Ok(()),
        }
    }
}

/// Job 3 of the baseline: the row with the largest total. Run it with one
/// reducer.
pub fn join_top() -> JobSpec {
    JobSpec::new("pavlo-join-top", || TopMapper {
        best: Best::default(),
    })
    .reducer(TopReducer::default)
}

struct FastMapper {
    dec: Decoder,
    ranks: Arc<RankTable>,
    value: Vec<u8>,
    /// The clean buffers of `sourceIP` and of `destURL`.
    clean: (Clean, Clean),
}

impl Mapper for FastMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        let v = visit(&mut self.dec, line)?;
        if !in_week(v.date) {
            return Ok(());
        }
        let Some(rank) = self.ranks.get(v.url) else {
            return Ok(());
        };
        SumF64s::encode(&[v.revenue, rank as f64, 1.0], &mut self.value);
        ctx.emit(v.ip, &self.value)
    }

    fn columnar(&mut self) -> Option<&mut dyn ColumnarMap> {
        Some(self)
    }
}

/// UserVisits rows as its projected columns: `sourceIP`, `destURL`,
/// `visitDate`, `adRevenue`, the rest unread.
impl ColumnarMap for FastMapper {
    fn map_batch(&mut self, b: &RowBatch<'_>, ctx: &mut MapContext<'_>) -> Result<Mapped> {
        let (Some(ips), Some(urls), Some(dates), Some(revenue)) = (
            self.clean.0.strings(b.column(0)),
            self.clean.1.strings(b.column(1)),
            Dates::of(b.column(2), b.rows),
            floats(b.column(3)),
        ) else {
            return Ok(Mapped::Declined);
        };
        let days = (day_of(JOIN_FROM), day_of(JOIN_TO));
        for (i, r) in revenue.iter().enumerate().take(b.rows) {
            if !dates.within(i, days, (JOIN_FROM, JOIN_TO)) {
                continue;
            }
            let Some(rank) = self.ranks.get(urls.get(i)) else {
                continue;
            };
            SumF64s::encode(&[*r, rank as f64, 1.0], &mut self.value);
            ctx.emit(ips.get(i), &self.value)?;
        }
        Ok(Mapped::Done)
    }
}

/// Totals each source IP's partial sums and keeps the best row.
#[derive(Default)]
struct BestTotal {
    best: Best,
    out: Vec<u8>,
}

impl Reducer for BestTotal {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        _ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        let s = sum_triples(values);
        total_average(&mut self.out, s);
        self.best.offer(s[0], key, &self.out);
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut ReduceContext<'_>) -> Result<()> {
        match &self.best.row {
            Some((_, ip, value)) => ctx.write(ip, value),
            None => Ok(()),
        }
    }
}

/// The week's visits by `destURL`: `(sourceIP, adRevenue)` pairs, for the
/// fast join when they are the smaller side (a range index pruned
/// UserVisits to the week).
pub type VisitTable = HashMap<Vec<u8>, Vec<(Vec<u8>, f64)>, foldhash::fast::FixedState>;

/// Reads the week's visits from UserVisits splits; a malformed row fails
/// naming its file and offset.
pub fn visit_table(
    splits: &[Split],
    max_record: usize,
) -> std::result::Result<VisitTable, JobError> {
    let mut table = VisitTable::with_hasher(foldhash::fast::FixedState::with_seed(7));
    let mut dec = Decoder::new(b'|');
    let opts = ReadOptions {
        max_record,
        ..ReadOptions::default()
    };
    for s in splits {
        read_split::<FormatError, _>(s, RecordFormat::Lines, &opts, |off, line| {
            let v = visit(&mut dec, line).map_err(|e| FormatError::Corrupt {
                path: s.file.path.clone(),
                offset: off,
                detail: e.to_string(),
            })?;
            if in_week(v.date) {
                table
                    .entry(v.url.to_vec())
                    .or_default()
                    .push((v.ip.to_vec(), v.revenue));
            }
            Ok(())
        })?;
    }
    Ok(table)
}

struct ProbeRankings {
    dec: Decoder,
    visits: Arc<VisitTable>,
    value: Vec<u8>,
}

impl Mapper for ProbeRankings {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        let f = decode(&mut self.dec, line, RANKINGS_FIELDS)?;
        let Some(visits) = self.visits.get(f.get(0).map_err(bad)?) else {
            return Ok(());
        };
        let rank = f.i64(1).map_err(bad)? as f64;
        for (ip, revenue) in visits {
            SumF64s::encode(&[*revenue, rank, 1.0], &mut self.value);
            ctx.emit(ip, &self.value)?;
        }
        Ok(())
    }
}

/// The fast join built on the week's visits instead: one job over
/// Rankings probing a [`VisitTable`]. Run it with one reducer.
pub fn join_fast_by_visits(visits: Arc<VisitTable>) -> JobSpec {
    JobSpec::new("pavlo-join", move || ProbeRankings {
        dec: Decoder::new(b'|'),
        visits: visits.clone(),
        value: Vec::new(),
    })
    .reducer(BestTotal::default)
    .aggregator(SumF64s)
}

/// The fast join in one job over UserVisits (ideally only the chunks of a
/// range index that overlap the week). Run it with one reducer.
pub fn join_fast(ranks: Arc<RankTable>) -> JobSpec {
    JobSpec::new("pavlo-join", move || FastMapper {
        dec: Decoder::new(b'|'),
        ranks: ranks.clone(),
        value: Vec::new(),
        clean: Default::default(),
    })
    .reducer(BestTotal::default)
    .aggregator(SumF64s)
}
