//! Parquet files read as records of text ([`crate::rows`]), or as batches
//! of Arrow arrays ([`read_batches`]).
//!
//! A split reads the footer, then each row group whose first byte (its
//! first column chunk's dictionary or data page) lies in the split,
//! column by column into Arrow arrays (arrow-rs), with only the columns
//! the job reads fetched and decoded. A batch's arrays go to a job that
//! reads columns as they are; for one that reads records, each row's
//! record is written from the arrays into one reused buffer (module
//! `arrow_text`). A row group
//! whose min/max statistics show no row the job keeps
//! ([`crate::rows::KeepRange`]) is skipped unread and counted. In a row
//! group read, when the kept column (read alone first) shows that the
//! job keeps at most a quarter of the rows, the other columns are
//! decoded at those rows only (a `RowSelection`: the others' values are
//! stepped over, and a page holding none of them is not decompressed),
//! the rows left out counted, and each batch knows its rows' numbers. Page
//! checksums, where the writer put them, are checked by the reader; a
//! damaged page, a cut file or a missing column fails naming the file and
//! the row group.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ParquetRecordBatchReaderBuilder, RowSelection,
};
use parquet::arrow::ProjectionMask;
use parquet::basic::{ConvertedType, LogicalType};
use parquet::errors::ParquetError;
use parquet::file::metadata::RowGroupMetaData;
use parquet::file::reader::{ChunkReader, Length};
use parquet::file::statistics::Statistics;
use parquet::schema::types::{ColumnDescriptor, SchemaDescriptor};

use crate::arrow_text::{reader_options, Column};
use crate::input::{InputFile, Split};
use crate::positioned::{source_error, split_source};
use crate::rows::{KeepRange, Projection};
use crate::{FormatError, Result};

/// Rows decoded at a time: few enough that a batch's arrays (16 bytes a
/// string's view) stay under the allocator's 128 KiB mmap threshold.
const BATCH_ROWS: usize = 4096;

/// A row group's rows are read selectively (the rest left out of every
/// column's decoding) when the job keeps at most one in this many.
const SELECT_AT_MOST: u64 = 4;

/// Rows of the kept column decoded at a time to choose a row group's rows.
const SELECT_BATCH_ROWS: usize = 65_536;

/// What reading a split of rows did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowsRead {
    /// Compressed bytes of the row groups read.
    pub bytes: u64,
    /// Row groups of the split skipped by their statistics.
    pub groups_skipped: u64,
    /// Compressed bytes of the row groups skipped.
    pub bytes_skipped: u64,
    /// Rows of the row groups read that the reader left out: their kept
    /// column's value lies outside the job's range.
    pub rows_skipped: u64,
}

impl RowsRead {
    /// A read of `bytes` that skipped nothing.
    pub fn of_bytes(bytes: u64) -> Self {
        RowsRead {
            bytes,
            ..RowsRead::default()
        }
    }
}

/// Reads every row of `split`'s row groups, calling `f(row number,
/// record)`, and says what it read and skipped.
pub fn read_split<E, F>(
    split: &Split,
    proj: &Projection,
    mut f: F,
) -> std::result::Result<RowsRead, E>
where
    E: From<FormatError>,
    F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
{
    let mut rec = Vec::new();
    read_batches(split, proj, |batch| batch.records(&mut rec, &mut f))
}

/// Reads `split`'s row groups a batch of rows at a time, calling `f` with
/// each as its projected columns ([`Batch`]), and says what it read and
/// skipped. The row groups read and skipped, and the errors, are
/// [`read_split`]'s.
pub fn read_batches<E, F>(
    split: &Split,
    proj: &Projection,
    mut f: F,
) -> std::result::Result<RowsRead, E>
where
    E: From<FormatError>,
    F: FnMut(&Batch<'_>) -> std::result::Result<(), E>,
{
    let path = split.file.path.as_path();
    let bytes = FileBytes::new(split.file.clone());
    let meta = as_views(open(&bytes)?);
    let plan = Plan::new(path, proj, meta.metadata().file_metadata().schema_descr())?;
    let mut row_no = 0u64;
    let mut read = RowsRead::default();
    for (g, rg) in meta.metadata().row_groups().iter().enumerate() {
        let first = group_start(rg);
        let rows = rg.num_rows().max(0) as u64;
        let size = rg.compressed_size() as u64;
        if first < split.start || first >= split.end {
            row_no += rows;
            continue;
        }
        if !plan.may_keep(rg) {
            read.groups_skipped += 1;
            read.bytes_skipped += size;
            row_no += rows;
            continue;
        }
        let bad = |e: &dyn std::fmt::Display| bytes.failed(e, |e| group_error(path, g, first, e));
        let kept = plan.select(&bytes, &meta, g, rows).map_err(|e| bad(&e))?;
        read.bytes += size;
        let mut builder =
            ParquetRecordBatchReaderBuilder::new_with_metadata(bytes.clone(), meta.clone())
                .with_projection(plan.mask.clone())
                .with_row_groups(vec![g])
                .with_batch_size(BATCH_ROWS);
        if let Some(k) = &kept {
            read.rows_skipped += rows - k.offsets.len() as u64;
            if k.offsets.is_empty() {
                row_no += rows;
                continue;
            }
            builder = builder.with_row_selection(k.selection());
        }
        let batches = builder.build().map_err(|e| bad(&e))?;
        let mut pos = 0;
        for batch in batches {
            let batch = batch.map_err(|e| bad(&e))?;
            let n = batch.num_rows();
            let offsets = match &kept {
                Some(k) => Some(
                    k.offsets
                        .get(pos..pos + n)
                        .ok_or_else(|| bad(&"more rows than were selected"))?,
                ),
                None => None,
            };
            let columns = plan.columns(&batch);
            let b = Batch {
                first_row: row_no
                    + offsets.map_or(pos as u64, |o| o.first().map_or(0, |&f| u64::from(f))),
                rows: n,
                columns: &columns,
                sep: proj.sep,
                bad: &bad,
                group_row: row_no,
                offsets,
            };
            f(&b)?;
            pos += n;
        }
        row_no += rows;
    }
    Ok(read)
}

/// A batch of rows of a split: the projected columns as Arrow arrays.
pub struct Batch<'b> {
    /// The number of its first row in the file.
    pub first_row: u64,
    /// Its rows.
    pub rows: usize,
    /// One array per projected column, in the projection's order; `None`
    /// for a column left unread.
    pub columns: &'b [Option<ArrayRef>],
    sep: u8,
    bad: &'b dyn Fn(&dyn std::fmt::Display) -> FormatError,
    /// The number of its row group's first row.
    group_row: u64,
    /// When the reader kept only some rows of the group, each of the
    /// batch's rows' place in its group.
    offsets: Option<&'b [u32]>,
}

impl Batch<'_> {
    /// Calls `f(row number, record)` with each row as its text record
    /// ([`crate::rows`]), written into `rec`.
    pub fn records<E, F>(&self, rec: &mut Vec<u8>, f: &mut F) -> std::result::Result<(), E>
    where
        E: From<FormatError>,
        F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
    {
        let columns = self
            .columns
            .iter()
            .map(|c| match c {
                Some(a) => Column::of(a),
                None => Ok(Column::Unread),
            })
            .collect::<std::result::Result<Vec<Column<'_>>, _>>()
            .map_err(|e| (self.bad)(&e))?;
        for i in 0..self.rows {
            rec.clear();
            for (c, col) in columns.iter().enumerate() {
                if c > 0 {
                    rec.push(self.sep);
                }
                col.push(rec, i);
            }
            f(self.row_number(i), rec)?;
        }
        Ok(())
    }

    /// The number in the file of the batch's row `i`.
    pub fn row_number(&self, i: usize) -> u64 {
        match self.offsets {
            Some(o) => self.group_row + u64::from(o[i]),
            None => self.first_row + i as u64,
        }
    }
}

/// The rows of a row group the reader keeps: their places in the group,
/// ascending.
struct Kept {
    offsets: Vec<u32>,
    rows: u64,
}

impl Kept {
    /// The reader's selection of the kept rows.
    fn selection(&self) -> RowSelection {
        let rows = self.offsets.iter().map(|&o| o as usize..o as usize + 1);
        RowSelection::from_consecutive_ranges(rows, self.rows as usize)
    }
}

/// Which of the file's columns make a record, and how rows are kept.
struct Plan<'p> {
    /// For each projected column, its place among the columns read, or
    /// none when unread.
    slots: Vec<Option<usize>>,
    /// The columns read.
    mask: ProjectionMask,
    /// The kept range and the leaf column it is over.
    keep: Option<(&'p KeepRange, usize)>,
}

impl<'p> Plan<'p> {
    fn new(path: &Path, proj: &'p Projection, schema: &SchemaDescriptor) -> Result<Plan<'p>> {
        let fields = schema.root_schema().get_fields();
        let names: Vec<&str> = fields.iter().map(|t| t.name()).collect();
        let pos = proj.positions(path, &names)?;
        let mut read: Vec<usize> = (0..pos.len())
            .filter(|&i| proj.reads(i))
            .map(|i| pos[i])
            .collect();
        read.sort_unstable();
        read.dedup();
        let slots = (0..pos.len())
            .map(|i| {
                let at = read.iter().position(|&r| r == pos[i]);
                at.filter(|_| proj.reads(i))
            })
            .collect();
        let mask = ProjectionMask::roots(schema, read);
        let keep = proj.keep.as_ref().and_then(|k| {
            let leaf = schema.columns().iter().position(|c| {
                let parts = c.path().parts();
                parts.len() == 1 && parts[0] == k.column
            });
            leaf.map(|l| (k, l))
        });
        Ok(Plan { slots, mask, keep })
    }

    /// Whether row group `rg` may hold a row the job keeps: true unless
    /// its statistics of the kept column say otherwise.
    fn may_keep(&self, rg: &RowGroupMetaData) -> bool {
        let Some((keep, leaf)) = self.keep else {
            return true;
        };
        let chunk = rg.column(leaf);
        if unsigned(chunk.column_descr()) {
            return true;
        }
        match chunk.statistics().and_then(int_bounds) {
            Some((lo, hi)) => keep.may_hold(lo, hi),
            None => true,
        }
    }

    /// The rows of row group `g` (of `rows` rows) the job keeps, read
    /// from the kept column alone, when they are few enough that leaving
    /// the rest out of the other columns' decoding pays: at most a
    /// [`SELECT_AT_MOST`] of them. A null in the kept column is kept, for
    /// the job to see and judge as it would the text. None: read every
    /// row (no range, a column of another type, or too many kept).
    fn select(
        &self,
        bytes: &FileBytes,
        meta: &ArrowReaderMetadata,
        g: usize,
        rows: u64,
    ) -> parquet::errors::Result<Option<Kept>> {
        let Some((keep, leaf)) = self.keep else {
            return Ok(None);
        };
        if rows > u64::from(u32::MAX) {
            return Ok(None);
        }
        let most = rows / SELECT_AT_MOST;
        let schema = meta.metadata().file_metadata().schema_descr();
        let column =
            ParquetRecordBatchReaderBuilder::new_with_metadata(bytes.clone(), meta.clone())
                .with_projection(ProjectionMask::leaves(schema, [leaf]))
                .with_row_groups(vec![g])
                .with_batch_size(SELECT_BATCH_ROWS)
                .build()?;
        let mut offsets = Vec::new();
        let mut at = 0u32;
        for batch in column {
            let batch = batch?;
            if !kept_rows(batch.column(0), keep, at, &mut offsets) || offsets.len() as u64 > most {
                return Ok(None);
            }
            at += batch.num_rows() as u32;
        }
        Ok(Some(Kept { offsets, rows }))
    }

    /// The projected columns of `batch`, in the projection's order.
    fn columns(&self, batch: &RecordBatch) -> Vec<Option<ArrayRef>> {
        let cols = batch.columns();
        self.slots
            .iter()
            .map(|s| s.map(|at| cols[at].clone()))
            .collect()
    }
}

/// Adds to `out` the places (from `at`) of the values of `col` that are
/// in `keep`'s range or null; false for a column that is not of signed
/// integers or days.
fn kept_rows(col: &ArrayRef, keep: &KeepRange, at: u32, out: &mut Vec<u32>) -> bool {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Date32Type, Int16Type, Int32Type, Int64Type, Int8Type};
    use arrow_array::{Array, PrimitiveArray};
    fn push<T: arrow_array::ArrowPrimitiveType>(
        a: &PrimitiveArray<T>,
        keep: &KeepRange,
        at: u32,
        out: &mut Vec<u32>,
    ) where
        T::Native: Into<i64>,
    {
        let (lo, hi) = (keep.min.unwrap_or(i64::MIN), keep.max.unwrap_or(i64::MAX));
        // A mask of 64 values at a time, which the compiler vectorizes;
        // then the places of its few set bits.
        for (c, chunk) in a.values().chunks(64).enumerate() {
            let mut mask = 0u64;
            for (j, v) in chunk.iter().enumerate() {
                let v: i64 = (*v).into();
                mask |= u64::from(lo <= v && v <= hi) << j;
            }
            if let Some(nulls) = a.nulls() {
                for j in 0..chunk.len() {
                    mask |= u64::from(nulls.is_null(c * 64 + j)) << j;
                }
            }
            while mask != 0 {
                out.push(at + (c * 64) as u32 + mask.trailing_zeros());
                mask &= mask - 1;
            }
        }
    }
    match col.data_type() {
        DataType::Int8 => push(col.as_primitive::<Int8Type>(), keep, at, out),
        DataType::Int16 => push(col.as_primitive::<Int16Type>(), keep, at, out),
        DataType::Int32 => push(col.as_primitive::<Int32Type>(), keep, at, out),
        DataType::Int64 => push(col.as_primitive::<Int64Type>(), keep, at, out),
        DataType::Date32 => push(col.as_primitive::<Date32Type>(), keep, at, out),
        _ => return false,
    }
    true
}

/// An integer column chunk's min and max, when its statistics have both.
fn int_bounds(s: &Statistics) -> Option<(i64, i64)> {
    match s {
        Statistics::Int32(v) => Some((i64::from(*v.min_opt()?), i64::from(*v.max_opt()?))),
        Statistics::Int64(v) => Some((*v.min_opt()?, *v.max_opt()?)),
        _ => None,
    }
}

/// Whether a column holds unsigned integers, whose statistics order is
/// not the signed one [`int_bounds`] reads.
fn unsigned(c: &ColumnDescriptor) -> bool {
    let logical = matches!(
        c.logical_type_ref(),
        Some(LogicalType::Integer {
            is_signed: false,
            ..
        })
    );
    logical
        || matches!(
            c.converted_type(),
            ConvertedType::UINT_8
                | ConvertedType::UINT_16
                | ConvertedType::UINT_32
                | ConvertedType::UINT_64
        )
}

/// The footer with its strings and bytes read as views
/// (`StringViewArray`, `BinaryViewArray`): a plain page's values stay
/// where decompression put them, and a dictionary's where it is, instead
/// of being copied value by value into an array of their own. When the
/// file's types do not allow it, the footer as it was.
fn as_views(meta: ArrowReaderMetadata) -> ArrowReaderMetadata {
    let view = |t: &DataType| match t {
        DataType::Utf8 | DataType::LargeUtf8 => Some(DataType::Utf8View),
        DataType::Binary | DataType::LargeBinary => Some(DataType::BinaryView),
        _ => None,
    };
    let schema = meta.schema();
    if !schema
        .fields()
        .iter()
        .any(|f| view(f.data_type()).is_some())
    {
        return meta;
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match view(f.data_type()) {
            Some(t) => f.as_ref().clone().with_data_type(t),
            None => f.as_ref().clone(),
        })
        .collect();
    let views = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    let opts = reader_options().with_schema(views);
    ArrowReaderMetadata::try_new(meta.metadata().clone(), opts).unwrap_or(meta)
}

/// Reads a Parquet file's footer.
pub(crate) fn open(bytes: &FileBytes) -> Result<ArrowReaderMetadata> {
    ArrowReaderMetadata::load(bytes, reader_options()).map_err(|e| {
        bytes.failed(&e, |e| FormatError::Corrupt {
            path: bytes.file.path.clone(),
            offset: 0,
            detail: format!("not a readable Parquet file: {e}"),
        })
    })
}

/// A split's file as arrow-rs reads it ([`ChunkReader`]), wherever its
/// bytes are ([`crate::positioned::split_source`]): each read opens the
/// source at its offset, so a cluster block's bytes all pass its chunk
/// checksums. The first failure of a source is kept, so a damaged
/// block's error ([`FormatError::Damaged`], blaming the copy) is what the
/// reader returns, not the text arrow-rs makes of it.
///
/// A plain local file (no checksums, not cached, not remote) is opened
/// once and read with positioned reads: arrow-rs asks for every page twice
/// (its header, then its bytes), and opening, seeking and zero-filling a
/// buffer for each was a tenth of a small selection's time.
#[derive(Clone)]
pub(crate) struct FileBytes {
    file: Arc<InputFile>,
    failure: Arc<Mutex<Option<FormatError>>>,
    local: Option<Arc<std::fs::File>>,
}

impl FileBytes {
    pub(crate) fn new(file: Arc<InputFile>) -> FileBytes {
        let plain = file.resident.is_none() && file.checks.is_none() && file.remote.is_none();
        // A file that does not open goes the general way, whose error
        // names it.
        let local = plain
            .then(|| std::fs::File::open(&file.path).ok())
            .flatten()
            .map(Arc::new);
        FileBytes {
            file,
            failure: Arc::default(),
            local,
        }
    }

    /// A source of the file at `start`, for reads of `expected`.
    fn source_at(
        &self,
        start: u64,
        expected: std::ops::Range<u64>,
    ) -> parquet::errors::Result<Box<dyn crate::positioned::Source>> {
        let path = self.file.path.as_path();
        let mut s = split_source(&self.file, expected).map_err(|e| self.keep(e))?;
        s.seek(SeekFrom::Start(start))
            .map_err(|e| self.keep(source_error("seeking", path, e)))?;
        Ok(s)
    }

    /// Keeps a source's first failure; arrow-rs gets its text.
    fn keep(&self, e: FormatError) -> ParquetError {
        let text = e.to_string();
        let mut kept = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        kept.get_or_insert(e);
        ParquetError::External(text.into())
    }

    /// The error of a read that failed with `e`: a source's failure when
    /// there was one, else `describe(e)`.
    pub(crate) fn failed<D: ?Sized>(
        &self,
        e: &D,
        describe: impl FnOnce(&D) -> FormatError,
    ) -> FormatError {
        let mut kept = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        kept.take().unwrap_or_else(|| describe(e))
    }
}

impl Length for FileBytes {
    fn len(&self) -> u64 {
        self.file.len
    }
}

impl ChunkReader for FileBytes {
    type T = FailureKept;

    fn get_read(&self, start: u64) -> parquet::errors::Result<FailureKept> {
        let source: Box<dyn crate::positioned::Source> = match &self.local {
            Some(f) => Box::new(At {
                file: f.clone(),
                pos: start,
            }),
            None => self.source_at(start, start..start)?,
        };
        Ok(FailureKept {
            // Most reads from here are a page header of a few dozen bytes.
            r: std::io::BufReader::with_capacity(PAGE_HEADER_BUFFER, source),
            of: self.clone(),
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let end = start + length as u64;
        let read = match &self.local {
            Some(f) => read_at(f, start, length),
            None => {
                let mut buf = vec![0u8; length];
                let mut r = self.source_at(start, start..end)?;
                r.read_exact(&mut buf).map(|()| buf)
            }
        };
        let buf = read.map_err(|e| {
            let path = self.file.path.as_path();
            let e = match e.kind() {
                std::io::ErrorKind::UnexpectedEof => FormatError::Truncated {
                    path: path.to_owned(),
                    offset: end,
                    detail: "the Parquet file ends before its bytes do".into(),
                },
                _ => source_error("reading", path, e),
            };
            self.keep(e)
        })?;
        Ok(buf.into())
    }
}

/// What a page header's reader buffers.
const PAGE_HEADER_BUFFER: usize = 4096;

/// Reads `length` bytes of `file` at `start`, straight into a vector's
/// spare capacity (no zero-fill first); `UnexpectedEof` if the file ends
/// before.
fn read_at(file: &std::fs::File, start: u64, length: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(length);
    while buf.len() < length {
        let before = buf.len();
        // Fills the spare capacity, which may run past `length`: the
        // bytes after it are dropped below.
        match rustix::io::pread(
            file,
            rustix::buffer::spare_capacity(&mut buf),
            start + before as u64,
        ) {
            Ok(_) if buf.len() == before => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    buf.truncate(length);
    Ok(buf)
}

/// A local file read from `pos` on with positioned reads: no open and no
/// seek of its own.
struct At {
    file: Arc<std::fs::File>,
    pos: u64,
}

impl Read for At {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = std::os::unix::fs::FileExt::read_at(&*self.file, buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for At {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let len = match to {
            SeekFrom::End(_) => self.file.metadata()?.len(),
            _ => 0,
        };
        self.pos = crate::positioned::seek_target(self.pos, len, to)?;
        Ok(self.pos)
    }
}

/// A reader from [`FileBytes::get_read`]: its failures are kept too.
pub(crate) struct FailureKept {
    r: std::io::BufReader<Box<dyn crate::positioned::Source>>,
    of: FileBytes,
}

impl Read for FailureKept {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.r.read(buf).map_err(|e| {
            let text = e.to_string();
            self.of.keep(source_error("reading", &self.of.file.path, e));
            std::io::Error::other(text)
        })
    }
}

/// The first byte of a row group: its earliest column chunk's.
pub(crate) fn group_start(rg: &RowGroupMetaData) -> u64 {
    rg.columns()
        .iter()
        .map(|c| c.byte_range().0)
        .min()
        .unwrap_or(0)
}

pub(crate) fn group_error(
    path: &Path,
    g: usize,
    at: u64,
    e: &dyn std::fmt::Display,
) -> FormatError {
    FormatError::Corrupt {
        path: path.to_owned(),
        offset: at,
        detail: format!("row group {g}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    /// Positioned reads give exactly the bytes asked for, a read past the
    /// end is `UnexpectedEof`, and a page header's reader reads on from
    /// its own offset.
    #[test]
    fn local_reads_are_positioned_and_exact() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("f");
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let f = File::open(&path).unwrap();
        assert_eq!(read_at(&f, 7, 70_000).unwrap(), bytes[7..70_007]);
        assert_eq!(read_at(&f, 99_999, 1).unwrap(), [bytes[99_999]]);
        assert!(read_at(&f, 0, 0).unwrap().is_empty());
        let e = read_at(&f, 99_000, 1_001).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
        let mut at = At {
            file: Arc::new(f),
            pos: 5,
        };
        let mut got = [0u8; 3];
        at.read_exact(&mut got).unwrap();
        assert_eq!(got, bytes[5..8]);
        assert_eq!(at.seek(SeekFrom::End(-1)).unwrap(), 99_999);
        assert!(at.seek(SeekFrom::Current(-100_000)).is_err());
    }

    use arrow_array::{Float64Array, Int64Array, StringArray};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    /// Rows `url{i}|{i}|{i/2}` for `i` in `0..n`, sorted by the rank,
    /// `group` rows a row group.
    fn sorted_file(dir: &Path, n: i64, group: usize) -> Split {
        file_of(dir, (0..n).map(Some).collect(), group)
    }

    /// Rows `url{i}|{ranks[i]}|{i/2}`, `group` rows a row group.
    fn file_of(dir: &Path, ranks: Vec<Option<i64>>, group: usize) -> Split {
        let n = ranks.len();
        let urls: Vec<String> = (0..n).map(|i| format!("url{i}")).collect();
        let batch = RecordBatch::try_from_iter([
            ("pageURL", Arc::new(StringArray::from(urls)) as _),
            ("pageRank", Arc::new(Int64Array::from(ranks)) as _),
            (
                "avgDuration",
                Arc::new(Float64Array::from_iter_values(
                    (0..n).map(|i| i as f64 / 2.0),
                )) as _,
            ),
        ])
        .unwrap();
        let path = dir.join("rows.parquet");
        let props = WriterProperties::builder()
            .set_max_row_group_size(group)
            .build();
        let mut w = ArrowWriter::try_new(File::create(&path).unwrap(), batch.schema(), Some(props))
            .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let len = std::fs::metadata(&path).unwrap().len();
        Split::whole(0, path, len)
    }

    fn records(split: &Split, proj: &Projection) -> (Vec<String>, RowsRead) {
        let mut out = Vec::new();
        let read = read_split::<FormatError, _>(split, proj, |_, r| {
            out.push(String::from_utf8(r.to_vec()).unwrap());
            Ok(())
        })
        .unwrap();
        (out, read)
    }

    fn above(threshold: i64) -> KeepRange {
        KeepRange {
            column: "pageRank".into(),
            min: Some(threshold + 1),
            max: None,
        }
    }

    #[test]
    fn rows_become_text_records_of_the_projected_columns() {
        let d = tempfile::tempdir().unwrap();
        let split = sorted_file(d.path(), 10, 4);
        let proj = Projection::piped(&["pageRank", "avgDuration", "pageURL"]);
        let (recs, read) = records(&split, &proj);
        assert_eq!(recs[3], "3|1.5|url3");
        assert_eq!(recs.len(), 10);
        assert!(read.bytes > 0 && read.groups_skipped == 0);
        let proj = proj.unread(&["avgDuration"]);
        assert_eq!(records(&split, &proj).0[3], "3||url3");
    }

    #[test]
    fn a_sorted_file_skips_the_groups_below_the_range_with_the_same_rows() {
        let d = tempfile::tempdir().unwrap();
        let split = sorted_file(d.path(), 10_000, 1_000);
        let cols = Projection::piped(&["pageURL", "pageRank"]);
        let keep = |r: &String| r.rsplit('|').next().unwrap().parse::<i64>().unwrap() > 7_500;
        let (all, whole) = records(&split, &cols);
        let (some, skipping) = records(&split, &cols.clone().keeping(above(7_500)));
        assert_eq!(whole.groups_skipped, 0);
        assert_eq!(
            skipping.groups_skipped, 7,
            "groups 0..7 hold ranks up to 6,999"
        );
        assert_eq!(skipping.bytes_skipped + skipping.bytes, whole.bytes);
        let want: Vec<&String> = all.iter().filter(|r| keep(r)).collect();
        let got: Vec<&String> = some.iter().filter(|r| keep(r)).collect();
        assert_eq!(got, want);
        // A range past every row skips every group; one before none.
        assert_eq!(
            records(&split, &cols.clone().keeping(above(20_000)))
                .1
                .groups_skipped,
            10
        );
        assert_eq!(
            records(&split, &cols.keeping(above(-5))).1.groups_skipped,
            0
        );
    }

    #[test]
    fn a_few_kept_rows_are_read_alone_with_their_numbers_and_nulls() {
        let d = tempfile::tempdir().unwrap();
        // Even ranks scattered over 0..2000, a null every 97th row.
        let rank = |i: i64| (i % 97 != 5).then_some(i * 37 % 1_000 * 2);
        let split = file_of(d.path(), (0..10_000).map(rank).collect(), 1_000);
        let cols = Projection::piped(&["pageURL", "pageRank"]);
        let read = |keep: KeepRange| {
            let mut out = Vec::new();
            let read = read_split::<FormatError, _>(&split, &cols.clone().keeping(keep), |n, r| {
                out.push((n, String::from_utf8(r.to_vec()).unwrap()));
                Ok(())
            })
            .unwrap();
            (out, read)
        };
        let range = |min, max| KeepRange {
            column: "pageRank".into(),
            min: Some(min),
            max: Some(max),
        };
        let kept = |min: i64, max: i64| -> Vec<(u64, String)> {
            (0..10_000)
                .filter(|&i| rank(i).is_none_or(|r| (min..=max).contains(&r)))
                .map(|i| {
                    let r = rank(i).map_or(String::new(), |r| r.to_string());
                    (i as u64, format!("url{i}|{r}"))
                })
                .collect()
        };
        // 1% in range and 1% null: only those rows, numbered as in the file.
        let (got, r) = read(range(20, 39));
        let want = kept(20, 39);
        assert!(want.len() > 100 && want.len() < 300, "{}", want.len());
        assert_eq!(got, want);
        assert_eq!(r.rows_skipped, 10_000 - want.len() as u64);
        assert_eq!(r.groups_skipped, 0);
        // Most rows in range: every row is read, the job keeps its own.
        let (got, r) = read(range(0, 1_200));
        assert_eq!(got.len(), 10_000);
        assert_eq!(got[7], (7, format!("url7|{}", 7 * 37 * 2)));
        assert_eq!(r.rows_skipped, 0);
        // None in range, which the statistics cannot tell: the nulls alone.
        let (got, r) = read(range(11, 11));
        assert_eq!(got, kept(11, 11), "the nulls alone");
        assert_eq!(r.rows_skipped + got.len() as u64, 10_000);
    }

    #[test]
    fn a_split_reads_the_groups_that_start_in_it() {
        let d = tempfile::tempdir().unwrap();
        let whole = sorted_file(d.path(), 10_000, 1_000);
        let cut = whole.end / 2;
        let halves = [(0, cut), (cut, whole.end)].map(|(start, end)| Split {
            start,
            end,
            ..whole.clone()
        });
        let proj = Projection::piped(&["pageRank"]);
        let counts = halves.map(|s| records(&s, &proj).0.len());
        assert_eq!(counts[0] + counts[1], 10_000);
        assert!(counts[0] > 0 && counts[1] > 0, "{counts:?}");
    }
}
