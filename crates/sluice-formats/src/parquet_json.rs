//! Parquet rows as one JSON object a line: what Streaming's commands read
//! from Parquet (as Avro's `AvroAsTextInputFormat` gives Avro rows).
//!
//! Every column is read, row by row, through `parquet::record`: Streaming
//! wants whole rows as text, which the columnar reader of
//! [`crate::parquet`] would only assemble again.

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;

use crate::input::Split;
use crate::parquet::{group_error, group_start, FileBytes, RowsRead};
use crate::rows::{push_date, push_float, push_int};
use crate::FormatError;

/// Reads every row of `split`'s row groups as one JSON object, calling
/// `f(row number, record)`.
pub fn read_split<E, F>(split: &Split, mut f: F) -> std::result::Result<RowsRead, E>
where
    E: From<FormatError>,
    F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
{
    let path = split.file.path.as_path();
    let bytes = FileBytes::new(split.file.clone());
    let reader = SerializedFileReader::new(bytes.clone()).map_err(|e| {
        bytes.failed(&e, |e| FormatError::Corrupt {
            path: path.to_owned(),
            offset: 0,
            detail: format!("not a readable Parquet file: {e}"),
        })
    })?;
    let mut row_no = 0u64;
    let mut read = RowsRead::default();
    let mut rec = Vec::new();
    for (g, rg) in reader.metadata().row_groups().iter().enumerate() {
        let first = group_start(rg);
        let rows = rg.num_rows() as u64;
        if first < split.start || first >= split.end {
            row_no += rows;
            continue;
        }
        let bad =
            |e: parquet::errors::ParquetError| bytes.failed(&e, |e| group_error(path, g, first, e));
        let group = reader.get_row_group(g).map_err(bad)?;
        for row in group.get_row_iter(None).map_err(bad)? {
            let row = row.map_err(bad)?;
            rec.clear();
            serde_json::to_writer(&mut rec, &row_json(&row)).expect("JSON to memory");
            f(row_no, &rec)?;
            row_no += 1;
        }
        read.bytes += rg.compressed_size() as u64;
    }
    Ok(read)
}

/// Appends a value as text ([`crate::rows`]).
fn push_field(out: &mut Vec<u8>, v: &Field) {
    match v {
        Field::Null => {}
        Field::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Field::Byte(x) => push_int(out, *x),
        Field::Short(x) => push_int(out, *x),
        Field::Int(x) => push_int(out, *x),
        Field::Long(x) => push_int(out, *x),
        Field::UByte(x) => push_int(out, *x),
        Field::UShort(x) => push_int(out, *x),
        Field::UInt(x) => push_int(out, *x),
        Field::ULong(x) => push_int(out, *x),
        Field::Float(x) => push_float(out, f64::from(*x)),
        Field::Double(x) => push_float(out, *x),
        Field::Str(s) => out.extend_from_slice(s.as_bytes()),
        Field::Bytes(b) => out.extend_from_slice(b.data()),
        Field::Date(d) => push_date(out, i64::from(*d)),
        other => out.extend_from_slice(other.to_string().as_bytes()),
    }
}

/// A row as one JSON object: numbers and booleans as themselves, dates as
/// `YYYY-MM-DD`, anything else as its text.
fn row_json(row: &parquet::record::Row) -> serde_json::Value {
    use serde_json::Value as J;
    let one = |v: &Field| match v {
        Field::Null => J::Null,
        Field::Bool(b) => J::Bool(*b),
        Field::Byte(x) => J::from(*x),
        Field::Short(x) => J::from(*x),
        Field::Int(x) => J::from(*x),
        Field::Long(x) => J::from(*x),
        Field::UByte(x) => J::from(*x),
        Field::UShort(x) => J::from(*x),
        Field::UInt(x) => J::from(*x),
        Field::ULong(x) => J::from(*x),
        Field::Float(x) => J::from(f64::from(*x)),
        Field::Double(x) => J::from(*x),
        other => {
            let mut text = Vec::new();
            push_field(&mut text, other);
            J::String(String::from_utf8_lossy(&text).into_owned())
        }
    };
    J::Object(
        row.get_column_iter()
            .map(|(k, v)| (k.clone(), one(v)))
            .collect(),
    )
}
