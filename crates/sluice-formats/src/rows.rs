//! Files of rows with named columns (Parquet), read as records of text.
//!
//! A row becomes one record: the values of the projected columns, in the
//! projection's order, joined by its separator (`|` for the Pavlo tasks,
//! whose text rows are pipe-separated; a text job reads one column, the
//! record being its value). Values are written as text: strings and bytes
//! as they are, integers in decimal, floating-point numbers in their
//! shortest form that reads back to the same value, dates as
//! `YYYY-MM-DD`, a null as nothing.
//!
//! Splits are byte ranges, as for text; a row group belongs to the split
//! holding its first byte, so every row is read by exactly one split.

use std::path::Path;

use crate::{FormatError, Result};

/// Which columns make a record, and what joins them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Projection {
    /// Column names, in record order; empty: the file's only column.
    pub columns: Vec<String>,
    /// The byte between two values.
    pub sep: u8,
    /// Each row as one JSON object instead (Streaming's rows of Avro and
    /// Parquet).
    pub json: bool,
    /// Columns of `columns` whose values the job ignores: a reader may
    /// leave them out of the file's reads and write them as empty values.
    pub unread: Vec<String>,
    /// The only rows the job keeps, when it says: a reader may skip a run
    /// of rows (a Parquet row group) whose statistics show none is in it,
    /// and leave out any row whose value is outside the range (not a
    /// null: the job sees those and judges them as it would the text).
    pub keep: Option<KeepRange>,
}

/// Rows whose integer column lies in `[min, max]` (a missing bound is no
/// bound); a null is never in the range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeepRange {
    /// The column's name.
    pub column: String,
    /// The least value kept.
    pub min: Option<i64>,
    /// The greatest value kept.
    pub max: Option<i64>,
}

impl KeepRange {
    /// Whether values between `lo` and `hi` (a run's statistics) may
    /// include one in the range.
    pub fn may_hold(&self, lo: i64, hi: i64) -> bool {
        self.min.is_none_or(|m| hi >= m) && self.max.is_none_or(|m| lo <= m)
    }
}

impl Projection {
    /// One column, read as a text job's line.
    pub fn column(name: &str) -> Projection {
        Projection {
            columns: vec![name.to_owned()],
            sep: b'\t',
            ..Projection::default()
        }
    }

    /// A SequenceFile's `key` and `value` joined by a tab, or an Avro
    /// row as JSON: Streaming's lines.
    pub fn streaming() -> Projection {
        Projection {
            columns: vec!["key".into(), "value".into()],
            sep: b'\t',
            json: true,
            ..Projection::default()
        }
    }

    /// Columns joined by `|`, as the Pavlo text rows are.
    pub fn piped(columns: &[&str]) -> Projection {
        Projection {
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            sep: b'|',
            ..Projection::default()
        }
    }

    /// The projection with `columns` left unread (their values empty).
    pub fn unread(mut self, columns: &[&str]) -> Projection {
        self.unread = columns.iter().map(|c| (*c).to_owned()).collect();
        self
    }

    /// The projection with the rows the job keeps.
    pub fn keeping(mut self, keep: KeepRange) -> Projection {
        self.keep = Some(keep);
        self
    }

    /// Whether column `i` of the projection is read.
    pub fn reads(&self, i: usize) -> bool {
        self.columns.get(i).is_none_or(|c| !self.unread.contains(c))
    }

    /// Where each projected column is among `names` (a file's columns),
    /// or an error naming the first one missing. With no columns asked
    /// for, the file's only column.
    pub fn positions(&self, path: &Path, names: &[&str]) -> Result<Vec<usize>> {
        if self.columns.is_empty() {
            if names.len() == 1 {
                return Ok(vec![0]);
            }
            let detail = format!(
                "has {} columns ({}): name the one to read with --column NAME",
                names.len(),
                names.join(", ")
            );
            return Err(FormatError::Schema {
                path: path.to_owned(),
                detail,
            });
        }
        self.columns
            .iter()
            .map(|c| {
                names
                    .iter()
                    .position(|n| n == c)
                    .ok_or_else(|| FormatError::Schema {
                        path: path.to_owned(),
                        detail: format!("has no column {c} (its columns: {})", names.join(", ")),
                    })
            })
            .collect()
    }
}

/// Appends a date given as days since 1970-01-01 as `YYYY-MM-DD`.
pub(crate) fn push_date(out: &mut Vec<u8>, days: i64) {
    let (y, m, d) = crate::dates::civil_from_days(days);
    out.extend_from_slice(format!("{y:04}-{m:02}-{d:02}").as_bytes());
}

/// Appends an integer in decimal.
pub(crate) fn push_int(out: &mut Vec<u8>, v: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Appends a float in its shortest form that reads back to it.
pub(crate) fn push_float(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        out.extend_from_slice(ryu::Buffer::new().format(v).as_bytes());
    } else {
        out.extend_from_slice(v.to_string().as_bytes());
    }
}
