//! Large and small aggregation, and the UDF (inbound link counts).

use sluice_api::{
    ColumnarMap, JobSpec, MapContext, Mapped, Mapper, ReduceContext, Reducer, Result, RowBatch,
    SumF64s, SumU64, Values,
};
use sluice_formats::delimited::Decoder;

use super::binary::visit_view;
use super::columns::{floats, Clean, Dates};
use super::{put_f64, visit, Encoding};
use crate::SumReducer;

/// The UserVisits column an aggregation groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupColumn {
    /// `sourceIP`: the benchmark's aggregation.
    #[default]
    SourceIp,
    /// `destURL`: one group per visited page, as many groups as Rankings
    /// has rows at most (high-cardinality aggregation).
    DestUrl,
}

struct RevenueMapper {
    dec: Decoder,
    prefix: Option<usize>,
    column: GroupColumn,
    encoding: Encoding,
    clean: Clean,
}

impl Mapper for RevenueMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        let column = self.column;
        let pick = |ip, url| match column {
            GroupColumn::SourceIp => ip,
            GroupColumn::DestUrl => url,
        };
        let (group, revenue) = match self.encoding {
            Encoding::Text => {
                let v = visit(&mut self.dec, line)?;
                (pick(v.ip, v.url), v.revenue)
            }
            Encoding::Paged => {
                let v = visit_view(line).map_err(sluice_api::Error::bad_record)?;
                (pick(v.ip, v.url), v.revenue)
            }
        };
        let key = match self.prefix {
            Some(n) => &group[..n.min(group.len())],
            None => group,
        };
        ctx.emit(key, &revenue.to_le_bytes())
    }

    fn columnar(&mut self) -> Option<&mut dyn ColumnarMap> {
        (self.encoding == Encoding::Text).then_some(self as &mut dyn ColumnarMap)
    }
}

/// UserVisits rows as its projected columns: `sourceIP`, `destURL`,
/// `visitDate`, `adRevenue`, the rest unread.
impl ColumnarMap for RevenueMapper {
    fn map_batch(&mut self, b: &RowBatch<'_>, ctx: &mut MapContext<'_>) -> Result<Mapped> {
        let group = match self.column {
            GroupColumn::SourceIp => 0,
            GroupColumn::DestUrl => 1,
        };
        let (Some(groups), Some(revenue), Some(_)) = (
            self.clean.strings(b.column(group)),
            floats(b.column(3)),
            Dates::of(b.column(2), b.rows),
        ) else {
            return Ok(Mapped::Declined);
        };
        let cut = self.prefix.unwrap_or(usize::MAX);
        for (i, r) in revenue.iter().enumerate().take(b.rows) {
            let g = groups.get(i);
            ctx.emit(&g[..cut.min(g.len())], &r.to_le_bytes())?;
        }
        Ok(Mapped::Done)
    }
}

/// The sum of a group's 8-byte float values.
fn float_sum(values: &mut dyn Values) -> f64 {
    let mut sum = 0.0;
    while let Some(v) = values.next_value() {
        sum += SumF64s::get(v, 0).unwrap_or(0.0);
    }
    sum
}

/// Writes the decimal sum of 8-byte float values.
#[derive(Default)]
struct FloatSum {
    out: Vec<u8>,
}

impl Reducer for FloatSum {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        self.out.clear();
        put_f64(&mut self.out, float_sum(values));
        ctx.write(key, &self.out)
    }
}

/// `SELECT sourceIP, SUM(adRevenue) FROM UserVisits GROUP BY sourceIP`, or
/// with `prefix = Some(7)` `GROUP BY SUBSTR(sourceIP, 1, 7)`: output
/// `key<TAB>sum`. `hash` combines at emit time; otherwise map output is
/// sorted and combined on spill (with the fingerprint order when asked).
pub fn aggregation(prefix: Option<usize>, hash: bool, encoding: Encoding) -> JobSpec {
    aggregation_by(GroupColumn::SourceIp, prefix, hash, encoding)
}

/// [`aggregation`] grouped by `column` (its first `prefix` bytes, if given).
pub fn aggregation_by(
    column: GroupColumn,
    prefix: Option<usize>,
    hash: bool,
    encoding: Encoding,
) -> JobSpec {
    let name = if prefix.is_some() {
        "pavlo-agg-small"
    } else {
        "pavlo-agg-large"
    };
    let job = JobSpec::new(name, move || RevenueMapper {
        dec: Decoder::new(b'|'),
        prefix,
        column,
        encoding,
        clean: Clean::default(),
    })
    .reducer(FloatSum::default);
    if hash {
        job.aggregator(SumF64s)
    } else {
        job.combiner(FloatPartial::default)
    }
}

/// The combiner of the sort path: sums partial float sums, binary out.
#[derive(Default)]
struct FloatPartial;

impl Reducer for FloatPartial {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        ctx.write(key, &float_sum(values).to_le_bytes())
    }
}

struct LinkMapper {
    href: memchr::memmem::Finder<'static>,
}

impl Mapper for LinkMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        let Some(bar) = memchr::memchr(b'|', line) else {
            return Err(sluice_api::Error::bad_record("expected url|html"));
        };
        let mut rest = &line[bar + 1..];
        while let Some(at) = self.href.find(rest) {
            rest = &rest[at + 6..];
            let Some(end) = memchr::memchr(b'"', rest) else {
                break;
            };
            ctx.emit(&rest[..end], &SumU64::encode(1))?;
            rest = &rest[end + 1..];
        }
        Ok(())
    }
}

/// The UDF aggregation: for each document, the URLs of its
/// `<a href="...">` links; output `url<TAB>inbound links`.
pub fn udf() -> JobSpec {
    let href = memchr::memmem::Finder::new(b"href=\"").into_owned();
    JobSpec::new("pavlo-udf", move || LinkMapper { href: href.clone() })
        .reducer(SumReducer::output)
        .aggregator(SumU64)
}
