//! Parquet files read as records of text ([`crate::rows`]).
//!
//! A split reads the footer, then each row group whose first byte (its
//! first column chunk's dictionary or data page) lies in the split, with
//! only the projected columns' chunks read and decoded. Page checksums,
//! where the writer put them, are checked by the reader; a damaged page,
//! a cut file or a missing column fails naming the file and the row group.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use parquet::schema::types::Type;

use crate::input::Split;
use crate::rows::{push_date, push_float, push_int, Projection};
use crate::{FormatError, Result};

/// Reads every row of `split`'s row groups, calling `f(row number,
/// record)` (with [`Projection::json`], the whole row as one JSON object);
/// returns the compressed bytes of the row groups read.
pub fn read_split<E, F>(split: &Split, proj: &Projection, mut f: F) -> std::result::Result<u64, E>
where
    E: From<FormatError>,
    F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
{
    let path = split.file.path.as_path();
    let file = &split.file;
    if file.remote.is_some() || file.checks.is_some() || file.resident.is_some() {
        let detail = "Parquet input is read from local files only: copy it to a local disk";
        return Err(FormatError::Schema {
            path: path.to_owned(),
            detail: detail.into(),
        }
        .into());
    }
    let reader = open(path)?;
    let meta = reader.metadata();
    let schema = meta.file_metadata().schema_descr();
    let fields = schema.root_schema().get_fields();
    let names: Vec<&str> = fields.iter().map(|t| t.name()).collect();
    let pos = if proj.json {
        (0..names.len()).collect()
    } else {
        proj.positions(path, &names)?
    };
    let projected = projection(fields, &pos);
    let mut row_no = 0u64;
    let mut bytes = 0u64;
    let mut rec = Vec::new();
    for (g, rg) in meta.row_groups().iter().enumerate() {
        let first = group_start(rg);
        let rows = rg.num_rows() as u64;
        if first < split.start || first >= split.end {
            row_no += rows;
            continue;
        }
        let bad = |e: parquet::errors::ParquetError| group_error(path, g, first, e);
        let group = reader.get_row_group(g).map_err(bad)?;
        let iter = group.get_row_iter(Some(projected.clone())).map_err(bad)?;
        for row in iter {
            let row = row.map_err(bad)?;
            rec.clear();
            if proj.json {
                serde_json::to_writer(&mut rec, &row_json(&row)).expect("JSON to memory");
                f(row_no, &rec)?;
                row_no += 1;
                continue;
            }
            let cols: Vec<&Field> = row.get_column_iter().map(|(_, v)| v).collect();
            for (i, &p) in pos.iter().enumerate() {
                if i > 0 {
                    rec.push(proj.sep);
                }
                push_field(&mut rec, cols[rank(&pos, p)]);
            }
            f(row_no, &rec)?;
            row_no += 1;
        }
        bytes += rg.compressed_size() as u64;
    }
    Ok(bytes)
}

/// Opens a Parquet file, reading its footer.
fn open(path: &Path) -> Result<SerializedFileReader<File>> {
    let file = File::open(path).map_err(|e| FormatError::io("opening", path, e))?;
    SerializedFileReader::new(file).map_err(|e| FormatError::Corrupt {
        path: path.to_owned(),
        offset: 0,
        detail: format!("not a readable Parquet file: {e}"),
    })
}

/// The file's fields at `pos`, in file order (as the reader gives them).
fn projection(fields: &[Arc<Type>], pos: &[usize]) -> Type {
    let mut keep: Vec<usize> = pos.to_vec();
    keep.sort_unstable();
    keep.dedup();
    let chosen = keep.iter().map(|&i| fields[i].clone()).collect();
    Type::group_type_builder("schema")
        .with_fields(chosen)
        .build()
        .expect("a group of the file's own fields")
}

/// Where field `p` of the file is among the projected fields (file order).
fn rank(pos: &[usize], p: usize) -> usize {
    let mut keep: Vec<usize> = pos.to_vec();
    keep.sort_unstable();
    keep.dedup();
    keep.iter().position(|&k| k == p).expect("projected")
}

/// The first byte of a row group: its earliest column chunk's.
fn group_start(rg: &parquet::file::metadata::RowGroupMetaData) -> u64 {
    rg.columns()
        .iter()
        .map(|c| c.byte_range().0)
        .min()
        .unwrap_or(0)
}

fn group_error(path: &Path, g: usize, at: u64, e: parquet::errors::ParquetError) -> FormatError {
    FormatError::Corrupt {
        path: path.to_owned(),
        offset: at,
        detail: format!("row group {g}: {e}"),
    }
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
