//! Values of Arrow arrays written as record text ([`crate::rows`]),
//! straight into the record's buffer: no allocation per value.
//!
//! The common types (strings, binaries, integers, floats, dates,
//! booleans) are matched once per batch; any other type is written by
//! Arrow's own display of it.

use std::io::Write;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, PrimitiveArray};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ArrowReaderOptions;

use crate::rows::{push_date, push_float, push_int};

/// One column of a batch, its type matched.
pub(crate) enum Column<'a> {
    /// A column the job does not read: an empty value.
    Unread,
    Utf8(&'a arrow_array::StringArray),
    LargeUtf8(&'a arrow_array::LargeStringArray),
    View(&'a arrow_array::StringViewArray),
    Binary(&'a arrow_array::BinaryArray),
    BinaryView(&'a arrow_array::BinaryViewArray),
    I8(&'a PrimitiveArray<Int8Type>),
    I16(&'a PrimitiveArray<Int16Type>),
    I32(&'a PrimitiveArray<Int32Type>),
    I64(&'a PrimitiveArray<Int64Type>),
    U8(&'a PrimitiveArray<UInt8Type>),
    U16(&'a PrimitiveArray<UInt16Type>),
    U32(&'a PrimitiveArray<UInt32Type>),
    U64(&'a PrimitiveArray<UInt64Type>),
    F32(&'a PrimitiveArray<Float32Type>),
    F64(&'a PrimitiveArray<Float64Type>),
    Date32(&'a PrimitiveArray<Date32Type>),
    Date64(&'a PrimitiveArray<Date64Type>),
    Bool(&'a arrow_array::BooleanArray),
    Other(arrow_cast::display::ArrayFormatter<'a>, &'a dyn Array),
}

impl<'a> Column<'a> {
    /// The column of `a`, its type matched.
    pub(crate) fn of(a: &'a ArrayRef) -> Result<Column<'a>, arrow_schema::ArrowError> {
        Ok(match a.data_type() {
            DataType::Utf8 => Column::Utf8(a.as_string()),
            DataType::LargeUtf8 => Column::LargeUtf8(a.as_string()),
            DataType::Utf8View => Column::View(a.as_string_view()),
            DataType::Binary => Column::Binary(a.as_binary()),
            DataType::BinaryView => Column::BinaryView(a.as_binary_view()),
            DataType::Int8 => Column::I8(a.as_primitive()),
            DataType::Int16 => Column::I16(a.as_primitive()),
            DataType::Int32 => Column::I32(a.as_primitive()),
            DataType::Int64 => Column::I64(a.as_primitive()),
            DataType::UInt8 => Column::U8(a.as_primitive()),
            DataType::UInt16 => Column::U16(a.as_primitive()),
            DataType::UInt32 => Column::U32(a.as_primitive()),
            DataType::UInt64 => Column::U64(a.as_primitive()),
            DataType::Float32 => Column::F32(a.as_primitive()),
            DataType::Float64 => Column::F64(a.as_primitive()),
            DataType::Date32 => Column::Date32(a.as_primitive()),
            DataType::Date64 => Column::Date64(a.as_primitive()),
            DataType::Boolean => Column::Bool(a.as_boolean()),
            _ => {
                let opts = arrow_cast::display::FormatOptions::default().with_null("");
                let f = arrow_cast::display::ArrayFormatter::try_new(a.as_ref(), &opts)?;
                Column::Other(f, a.as_ref())
            }
        })
    }

    /// Appends row `i`'s value as text (a null as nothing).
    pub(crate) fn push(&self, out: &mut Vec<u8>, i: usize) {
        if self.is_null(i) {
            return;
        }
        match self {
            Column::Unread => {}
            Column::Utf8(a) => out.extend_from_slice(a.value(i).as_bytes()),
            Column::LargeUtf8(a) => out.extend_from_slice(a.value(i).as_bytes()),
            Column::View(a) => out.extend_from_slice(a.value(i).as_bytes()),
            Column::Binary(a) => out.extend_from_slice(a.value(i)),
            Column::BinaryView(a) => out.extend_from_slice(a.value(i)),
            Column::I8(a) => push_int(out, a.value(i)),
            Column::I16(a) => push_int(out, a.value(i)),
            Column::I32(a) => push_int(out, a.value(i)),
            Column::I64(a) => push_int(out, a.value(i)),
            Column::U8(a) => push_int(out, a.value(i)),
            Column::U16(a) => push_int(out, a.value(i)),
            Column::U32(a) => push_int(out, a.value(i)),
            Column::U64(a) => push_int(out, a.value(i)),
            Column::F32(a) => push_float(out, f64::from(a.value(i))),
            Column::F64(a) => push_float(out, a.value(i)),
            Column::Date32(a) => push_date(out, i64::from(a.value(i))),
            Column::Date64(a) => push_date(out, a.value(i).div_euclid(86_400_000)),
            Column::Bool(a) => out.extend_from_slice(if a.value(i) { b"true" } else { b"false" }),
            Column::Other(f, _) => {
                let _ = write!(out, "{}", f.value(i));
            }
        }
    }

    fn is_null(&self, i: usize) -> bool {
        let a: &dyn Array = match self {
            Column::Unread => return true,
            Column::Utf8(a) => *a,
            Column::LargeUtf8(a) => *a,
            Column::View(a) => *a,
            Column::Binary(a) => *a,
            Column::BinaryView(a) => *a,
            Column::I8(a) => *a,
            Column::I16(a) => *a,
            Column::I32(a) => *a,
            Column::I64(a) => *a,
            Column::U8(a) => *a,
            Column::U16(a) => *a,
            Column::U32(a) => *a,
            Column::U64(a) => *a,
            Column::F32(a) => *a,
            Column::F64(a) => *a,
            Column::Date32(a) => *a,
            Column::Date64(a) => *a,
            Column::Bool(a) => *a,
            Column::Other(_, a) => *a,
        };
        a.null_count() > 0 && a.is_null(i)
    }
}

/// Reader options: strings as Arrow's plain string arrays whatever the
/// file's embedded Arrow schema says (a dictionary column is expanded).
pub(crate) fn reader_options() -> ArrowReaderOptions {
    ArrowReaderOptions::new().with_skip_arrow_metadata(true)
}
