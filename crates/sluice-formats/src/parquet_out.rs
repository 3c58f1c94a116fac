//! Writing a job's output as a Parquet file of typed columns, through
//! arrow-rs's `ArrowWriter`: a record's key is the first column, its
//! value the rest (split at `|` when there are several).
//!
//! ## Layout
//!
//! The file is standard Parquet (format version 1 pages, the footer's
//! `FileMetaData` in Thrift's compact protocol), as arrow-rs writes it:
//!
//! ```text
//! "PAR1"                          4 bytes, the magic
//! row group 0                     one column chunk per column, in schema order:
//!   column chunk 0                  [dictionary page] data page...
//!   ...                             (Snappy-compressed page bodies, each after
//!                                    its Thrift PageHeader)
//! row group 1 ...                 a new one each time the open one's encoded
//!                                 size passes the caller's limit
//!                                 (ParquetEncoder::row_group_bytes; at most
//!                                 ROW_GROUP_BYTES, 128 MiB, by default)
//! FileMetaData                    Thrift compact: the schema (one required
//!                                 leaf per column), each row group's column
//!                                 chunks with their offsets, sizes, codec and
//!                                 min/max/null-count statistics, and the
//!                                 key `ARROW:schema` (the Arrow schema, IPC,
//!                                 base64) that readers take the exact types from
//! footer length                   4 bytes, little-endian, FileMetaData's size
//! "PAR1"                          4 bytes
//! ```
//!
//! Columns are required (never null), of the Parquet physical types
//! [`ColumnType`] names: `BYTE_ARRAY` annotated `STRING` for text,
//! `INT32`, `INT64` and `DOUBLE`. Statistics are kept per page and per
//! column chunk. A file written with no records has the schema and no
//! row group. Rows go to the writer in batches of [`BATCH_ROWS`] (or
//! fewer when their text passes [`BATCH_BYTES`]); the bytes it has ready
//! are handed back after each batch, so the caller writes them as they
//! come and only the open row group is held in memory.

use std::io;
use std::sync::Arc;

use arrow_array::builder::{Float64Builder, Int32Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

/// A row group is closed once its encoded size passes this, unless the
/// caller sets a smaller limit.
pub const ROW_GROUP_BYTES: usize = 128 << 20;
/// Rows gathered before they go to the writer as one batch.
pub const BATCH_ROWS: usize = 8192;
/// Bytes of text gathered before a batch goes to the writer however few
/// its rows.
pub const BATCH_BYTES: usize = 4 << 20;

/// The most columns an output file has, the key's included.
pub const MAX_COLUMNS: usize = 16;

/// The type of an output column, and how its text is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// UTF-8 text (Arrow `Utf8`, Parquet `BYTE_ARRAY` `STRING`).
    Utf8,
    /// A decimal integer that fits 32 bits (`Int32`, `INT32`).
    Int32,
    /// A decimal integer (`Int64`, `INT64`).
    Int64,
    /// A decimal number (`Float64`, `DOUBLE`).
    Float64,
}

impl ColumnType {
    fn arrow(self) -> DataType {
        match self {
            ColumnType::Utf8 => DataType::Utf8,
            ColumnType::Int32 => DataType::Int32,
            ColumnType::Int64 => DataType::Int64,
            ColumnType::Float64 => DataType::Float64,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            ColumnType::Utf8 => "UTF-8 text (a string)",
            ColumnType::Int32 => "a 32-bit integer",
            ColumnType::Int64 => "an integer (a long)",
            ColumnType::Float64 => "a number (a double)",
        }
    }
}

/// One column of an output file: its name and type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputColumn {
    /// The column's name.
    pub name: &'static str,
    /// Its type.
    pub kind: ColumnType,
}

impl OutputColumn {
    /// A column named `name` of type `kind`.
    pub const fn new(name: &'static str, kind: ColumnType) -> Self {
        OutputColumn { name, kind }
    }

    /// A text column named `name`.
    pub const fn utf8(name: &'static str) -> Self {
        Self::new(name, ColumnType::Utf8)
    }
}

/// The columns of key/value pairs whose fields are named `names`: the
/// key text, the value an integer if `long_values`, else text.
pub fn pair_columns(names: (&'static str, &'static str), long_values: bool) -> Vec<OutputColumn> {
    let value = if long_values {
        ColumnType::Int64
    } else {
        ColumnType::Utf8
    };
    vec![
        OutputColumn::utf8(names.0),
        OutputColumn::new(names.1, value),
    ]
}

/// A column's values gathered for the next batch.
enum Builder {
    Utf8(StringBuilder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    Float64(Float64Builder),
}

impl Builder {
    fn new(kind: ColumnType) -> Self {
        match kind {
            ColumnType::Utf8 => Builder::Utf8(StringBuilder::new()),
            ColumnType::Int32 => Builder::Int32(Int32Builder::new()),
            ColumnType::Int64 => Builder::Int64(Int64Builder::new()),
            ColumnType::Float64 => Builder::Float64(Float64Builder::new()),
        }
    }

    /// Appends `v`, of this column's type.
    fn push(&mut self, v: Value<'_>) {
        match (self, v) {
            (Builder::Utf8(b), Value::Str(s)) => b.append_value(s),
            (Builder::Int32(b), Value::I32(n)) => b.append_value(n),
            (Builder::Int64(b), Value::I64(n)) => b.append_value(n),
            (Builder::Float64(b), Value::F64(x)) => b.append_value(x),
            _ => unreachable!("values are parsed by their column's type"),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::Utf8(b) => Arc::new(b.finish()),
            Builder::Int32(b) => Arc::new(b.finish()),
            Builder::Int64(b) => Arc::new(b.finish()),
            Builder::Float64(b) => Arc::new(b.finish()),
        }
    }
}

/// A field's value, parsed as its column's type.
#[derive(Clone, Copy)]
enum Value<'a> {
    Str(&'a str),
    I32(i32),
    I64(i64),
    F64(f64),
}

impl ColumnType {
    /// The value `text` stands for; `None` if it is not one of this type.
    fn parse(self, text: &[u8]) -> Option<Value<'_>> {
        let s = std::str::from_utf8(text).ok()?;
        Some(match self {
            ColumnType::Utf8 => Value::Str(s),
            ColumnType::Int32 => Value::I32(s.parse().ok()?),
            ColumnType::Int64 => Value::I64(s.parse().ok()?),
            ColumnType::Float64 => Value::F64(s.parse().ok()?),
        })
    }
}

fn invalid(e: impl ToString) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// A Parquet file's bytes, made record by record: each call appends the
/// bytes to write next to `out`.
pub struct ParquetEncoder {
    columns: Vec<OutputColumn>,
    schema: SchemaRef,
    builders: Vec<Builder>,
    rows: usize,
    text: usize,
    /// Writes into its own buffer, emptied into the caller's `out`.
    writer: ArrowWriter<Vec<u8>>,
    /// The value's fields, reused.
    fields: Vec<(usize, usize)>,
    /// A row group is closed past this many encoded bytes.
    row_group_bytes: usize,
}

impl ParquetEncoder {
    /// An encoder of files of `columns` (at least two: the key's and the
    /// value's); appends the magic to `out`.
    pub fn new(out: &mut Vec<u8>, columns: &[OutputColumn]) -> io::Result<ParquetEncoder> {
        if !(2..=MAX_COLUMNS).contains(&columns.len()) {
            return Err(invalid(format!(
                "a Parquet output has a key column and 1 to {} value columns, not {}",
                MAX_COLUMNS - 1,
                columns.len().saturating_sub(1)
            )));
        }
        let fields: Vec<Field> = columns
            .iter()
            .map(|c| Field::new(c.name, c.kind.arrow(), false))
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_max_row_group_size(usize::MAX)
            .build();
        let writer =
            ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props)).map_err(invalid)?;
        let mut enc = ParquetEncoder {
            columns: columns.to_vec(),
            schema,
            builders: columns.iter().map(|c| Builder::new(c.kind)).collect(),
            rows: 0,
            text: 0,
            writer,
            fields: Vec::new(),
            row_group_bytes: ROW_GROUP_BYTES,
        };
        enc.drain(out);
        Ok(enc)
    }

    /// Closes row groups past `bytes` encoded bytes instead of
    /// [`ROW_GROUP_BYTES`].
    pub fn row_group_bytes(mut self, bytes: usize) -> Self {
        self.row_group_bytes = bytes.max(1);
        self
    }

    /// Moves the bytes the writer has ready to `out`.
    fn drain(&mut self, out: &mut Vec<u8>) {
        out.append(self.writer.inner_mut());
    }

    /// Appends the record `key`, `value`: the key the first column, the
    /// value the second, or, with more columns, its fields separated by
    /// `|`, one a column. A value that is not of its column's type fails,
    /// naming the key, the value and the column; nothing of the record is
    /// kept.
    pub fn append(&mut self, out: &mut Vec<u8>, key: &[u8], value: &[u8]) -> io::Result<()> {
        self.split(key, value)?;
        let mut values = [Value::I64(0); MAX_COLUMNS];
        for (i, &(start, end)) in self.fields.iter().enumerate() {
            let text = if i == 0 { key } else { &value[start..end] };
            let c = self.columns[i];
            values[i] = c.kind.parse(text).ok_or_else(|| {
                invalid(format!(
                    "{:?} (key {:?}) is not {}: column {} of the Parquet output",
                    String::from_utf8_lossy(text),
                    String::from_utf8_lossy(key),
                    c.kind.describe(),
                    c.name
                ))
            })?;
        }
        for (b, v) in self.builders.iter_mut().zip(values) {
            b.push(v);
        }
        self.rows += 1;
        self.text += key.len() + value.len();
        if self.rows >= BATCH_ROWS || self.text >= BATCH_BYTES {
            self.write_batch(out)?;
        }
        Ok(())
    }

    /// The byte ranges of the record's fields, the key's first (unused),
    /// into `self.fields`.
    fn split(&mut self, key: &[u8], value: &[u8]) -> io::Result<()> {
        self.fields.clear();
        self.fields.push((0, key.len()));
        let want = self.columns.len() - 1;
        if want == 1 {
            self.fields.push((0, value.len()));
            return Ok(());
        }
        let mut start = 0;
        for bar in memchr::memchr_iter(b'|', value) {
            self.fields.push((start, bar));
            start = bar + 1;
        }
        self.fields.push((start, value.len()));
        if self.fields.len() - 1 != want {
            let names: Vec<&str> = self.columns[1..].iter().map(|c| c.name).collect();
            return Err(invalid(format!(
                "value {:?} of key {:?} has {} fields separated by |, not {want} ({})",
                String::from_utf8_lossy(value),
                String::from_utf8_lossy(key),
                self.fields.len() - 1,
                names.join(", ")
            )));
        }
        Ok(())
    }

    /// Hands the gathered rows to the writer; closes the row group when
    /// it is large enough.
    fn write_batch(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let arrays: Vec<ArrayRef> = self.builders.iter_mut().map(Builder::finish).collect();
        let batch = RecordBatch::try_new(self.schema.clone(), arrays).map_err(invalid)?;
        self.rows = 0;
        self.text = 0;
        self.writer.write(&batch).map_err(invalid)?;
        if self.writer.in_progress_size() >= self.row_group_bytes {
            self.writer.flush().map_err(invalid)?;
        }
        self.drain(out);
        Ok(())
    }

    /// Appends the last rows, the last row group and the footer.
    pub fn finish(mut self, out: &mut Vec<u8>) -> io::Result<()> {
        self.write_batch(out)?;
        self.writer.finish().map_err(invalid)?;
        self.drain(out);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
