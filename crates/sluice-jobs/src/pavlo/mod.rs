//! The tasks of the Pavlo et al. benchmark, with the SQL they answer.
//!
//! Records are decoded with the mutable [`Decoder`]: one reused vector of
//! field ranges, fields parsed in place. A record with the wrong number of
//! fields, a non-numeric number or a malformed date is an
//! [`Error::BadRecord`], which the engine fails
//! on or skips and counts, as configured.
//!
//! Output is `key<TAB>value`; a row with several values joins them with `|`.

mod aggregate;
pub mod binary;
mod columns;
mod join;
mod ranks;
mod scan;

pub use aggregate::{aggregation, aggregation_by, udf, GroupColumn};
pub use join::{
    join_aggregate, join_fast, join_fast_by_visits, join_filter, join_top, visit_table, VisitTable,
    JOIN_FROM, JOIN_TO,
};
pub use ranks::{rank_table, RankTable};
pub use scan::{grep, selection};

use sluice_api::{Error, Result};
use sluice_formats::delimited::{Decoder, FieldError, Fields};

/// How input rows are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    /// Pipe-separated text lines.
    #[default]
    Text,
    /// Binary records ([`binary`]) in a paged file.
    Paged,
}

/// Fields of a Rankings row.
pub const RANKINGS_FIELDS: usize = 3;
/// Fields of a UserVisits row.
pub const USERVISITS_FIELDS: usize = 9;

fn bad(e: FieldError) -> Error {
    Error::bad_record(e.to_string())
}

/// Decodes a row that must have `n` fields.
fn decode<'d, 'l>(dec: &'d mut Decoder, line: &'l [u8], n: usize) -> Result<Fields<'d, 'l>> {
    let f = dec.decode(line);
    f.expect_len(n).map_err(bad)?;
    Ok(f)
}

/// A UserVisits row's `sourceIP`, `destURL`, `visitDate` and `adRevenue`,
/// validated.
struct Visit<'l> {
    ip: &'l [u8],
    url: &'l [u8],
    date: &'l [u8],
    revenue: f64,
}

fn visit<'l>(dec: &mut Decoder, line: &'l [u8]) -> Result<Visit<'l>> {
    let f = decode(dec, line, USERVISITS_FIELDS)?;
    let date = f.get(2).map_err(bad)?;
    if !is_date(date) {
        return Err(Error::bad_record(format!(
            "field 2 is not a date (YYYY-MM-DD): {:?}",
            String::from_utf8_lossy(date)
        )));
    }
    Ok(Visit {
        ip: f.get(0).map_err(bad)?,
        url: f.get(1).map_err(bad)?,
        date,
        revenue: f.f64(3).map_err(bad)?,
    })
}

/// `YYYY-MM-DD` with a month 01-12 and a day 01-31.
fn is_date(d: &[u8]) -> bool {
    let digits = |r: std::ops::Range<usize>| d[r].iter().all(u8::is_ascii_digit);
    if d.len() != 10
        || d[4] != b'-'
        || d[7] != b'-'
        || !digits(0..4)
        || !digits(5..7)
        || !digits(8..10)
    {
        return false;
    }
    let month = (d[5] - b'0') * 10 + (d[6] - b'0');
    let day = (d[8] - b'0') * 10 + (d[9] - b'0');
    (1..=12).contains(&month) && (1..=31).contains(&day)
}

/// Formats a float for output: the shortest text that reads back exactly.
fn put_f64(out: &mut Vec<u8>, v: f64) {
    use std::io::Write;
    let _ = write!(out, "{v}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_validated() {
        assert!(is_date(b"2000-01-15"));
        for bad in [
            &b"2000-13-01"[..],
            b"2000-1-15",
            b"20000115xx",
            b"2000-01-00",
            b"abcd-ef-gh",
        ] {
            assert!(!is_date(bad), "{bad:?}");
        }
    }
}
