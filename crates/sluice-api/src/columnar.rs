//! Map over rows as typed columns: a job's way past the text records of a
//! file of rows.
//!
//! When a map task reads a file of typed rows (Parquet), the engine asks
//! its mapper for a [`ColumnarMap`] ([`crate::Mapper::columnar`]). If it
//! has one, each batch of rows goes to [`ColumnarMap::map_batch`] as
//! Arrow arrays, one per column of the job's projection, instead of as
//! one text record per row. The mapper emits exactly what its
//! [`crate::Mapper::map`] would have emitted for those rows' records, so
//! everything after the map (combining, shuffle, reduce, output) is the
//! same on either path.
//!
//! A mapper may decline a batch it cannot read as columns (a type it does
//! not know, a null, a value its record path would call malformed): it
//! returns [`Mapped::Declined`] having emitted nothing, and the engine
//! hands that batch's rows to [`crate::Mapper::map`] as text records, so
//! malformed rows are found, counted and kept exactly as on the text path.

use arrow_array::ArrayRef;

use crate::context::MapContext;
use crate::Result;

/// A batch of rows: one array per column of the job's projection, in its
/// order, all of `rows` values; a column the job does not read is `None`.
#[derive(Debug, Clone, Copy)]
pub struct RowBatch<'a> {
    /// The number of the batch's first row in its file.
    pub first_row: u64,
    /// Rows in the batch.
    pub rows: usize,
    /// The projected columns.
    pub columns: &'a [Option<ArrayRef>],
}

impl<'a> RowBatch<'a> {
    /// Projected column `i`, when it was read.
    pub fn column(&self, i: usize) -> Option<&'a ArrayRef> {
        self.columns.get(i).and_then(Option::as_ref)
    }
}

/// What [`ColumnarMap::map_batch`] did with a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapped {
    /// Every row was mapped.
    Done,
    /// Nothing was emitted: the engine maps the rows as text records.
    Declined,
}

/// A mapper's columnar entry ([`crate::Mapper::columnar`]).
pub trait ColumnarMap {
    /// Maps every row of `batch`, emitting what [`crate::Mapper::map`]
    /// would for the rows' records, in row order; or emits nothing and
    /// declines.
    fn map_batch(&mut self, batch: &RowBatch<'_>, ctx: &mut MapContext<'_>) -> Result<Mapped>;
}
