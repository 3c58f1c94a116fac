use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::reader::{FileReader, SerializedFileReader};
use std::io::Write;

use super::*;

const JOIN: &[OutputColumn] = &[
    OutputColumn::utf8("sourceIP"),
    OutputColumn::new("totalRevenue", ColumnType::Float64),
    OutputColumn::new("avgPageRank", ColumnType::Float64),
];

/// The bytes of a file of `columns` holding `records`.
fn encode(columns: &[OutputColumn], records: &[(&str, &str)], rg: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = ParquetEncoder::new(&mut out, columns)
        .unwrap()
        .row_group_bytes(rg);
    for (k, v) in records {
        enc.append(&mut out, k.as_bytes(), v.as_bytes()).unwrap();
    }
    enc.finish(&mut out).unwrap();
    out
}

/// A temporary file holding `bytes`.
fn file(bytes: &[u8]) -> std::fs::File {
    let mut f = tempfile::tempfile().unwrap();
    f.write_all(bytes).unwrap();
    f
}

fn batches(bytes: Vec<u8>) -> Vec<RecordBatch> {
    ParquetRecordBatchReaderBuilder::try_new(file(&bytes))
        .unwrap()
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn pairs_read_back_with_their_types_and_names() {
    let cols = pair_columns(("word", "count"), true);
    let bytes = encode(&cols, &[("a", "3"), ("b", "-7")], ROW_GROUP_BYTES);
    assert_eq!(&bytes[..4], b"PAR1");
    assert_eq!(&bytes[bytes.len() - 4..], b"PAR1");
    let b = &batches(bytes)[0];
    let schema = b.schema();
    assert_eq!(schema.field(0).name(), "word");
    assert_eq!(schema.field(0).data_type(), &DataType::Utf8);
    assert_eq!(schema.field(1).name(), "count");
    assert_eq!(schema.field(1).data_type(), &DataType::Int64);
    let words: Vec<&str> = b.column(0).as_string::<i32>().iter().flatten().collect();
    assert_eq!(words, ["a", "b"]);
    let counts = b.column(1).as_primitive::<Int64Type>().values();
    assert_eq!(counts.as_ref(), [3, -7]);
}

#[test]
fn a_value_of_several_fields_fills_several_columns() {
    let bytes = encode(JOIN, &[("1.2.3.4", "10.5|2.25")], ROW_GROUP_BYTES);
    let b = &batches(bytes)[0];
    assert_eq!(b.num_columns(), 3);
    let total = b.column(1).as_primitive::<Float64Type>().value(0);
    let avg = b.column(2).as_primitive::<Float64Type>().value(0);
    assert_eq!((total, avg), (10.5, 2.25));
}

#[test]
fn many_rows_make_many_row_groups_each_with_statistics() {
    let cols = [
        OutputColumn::utf8("pageURL"),
        OutputColumn::new("pageRank", ColumnType::Int32),
    ];
    let rows: Vec<(String, String)> = (0..50_000)
        .map(|i| (format!("url{i:06}"), (i % 1000).to_string()))
        .collect();
    let refs: Vec<(&str, &str)> = rows.iter().map(|(k, v)| (&**k, &**v)).collect();
    let bytes = encode(&cols, &refs, 64 << 10);
    let reader = SerializedFileReader::new(file(&bytes)).unwrap();
    let meta = reader.metadata();
    assert!(meta.num_row_groups() > 2, "{}", meta.num_row_groups());
    for rg in meta.row_groups() {
        let stats = rg.column(0).statistics().expect("statistics on");
        assert!(stats.min_bytes_opt().is_some());
        assert_eq!(
            rg.column(1).compression(),
            parquet::basic::Compression::SNAPPY
        );
    }
    let mut got = Vec::new();
    for b in batches(bytes) {
        let ranks = b.column(1).as_primitive::<Int32Type>();
        for (k, r) in b.column(0).as_string::<i32>().iter().zip(ranks.values()) {
            got.push((k.unwrap().to_owned(), r.to_string()));
        }
    }
    assert_eq!(got, rows);
}

#[test]
fn no_records_make_a_file_of_the_schema_alone() {
    let bytes = encode(JOIN, &[], ROW_GROUP_BYTES);
    let reader = SerializedFileReader::new(file(&bytes)).unwrap();
    assert_eq!(reader.metadata().num_row_groups(), 0);
    assert_eq!(
        reader
            .metadata()
            .file_metadata()
            .schema_descr()
            .num_columns(),
        3
    );
}

#[test]
fn a_value_not_of_its_type_fails_naming_key_value_and_column() {
    let mut out = Vec::new();
    let cols = pair_columns(("word", "count"), true);
    let mut enc = ParquetEncoder::new(&mut out, &cols).unwrap();
    let e = enc.append(&mut out, b"w", b"x1").unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("\"x1\"") && msg.contains("\"w\"") && msg.contains("count"),
        "{msg}"
    );
    let e = enc.append(&mut out, b"\xff", b"1").unwrap_err();
    assert!(e.to_string().contains("UTF-8"), "{e}");
    let mut enc = ParquetEncoder::new(&mut out, JOIN).unwrap();
    let e = enc.append(&mut out, b"ip", b"1.5").unwrap_err();
    assert!(
        e.to_string().contains("1 fields separated by |, not 2"),
        "{e}"
    );
    let e = enc.append(&mut out, b"ip", b"1|2|3").unwrap_err();
    assert!(e.to_string().contains("3 fields"), "{e}");
    // Nothing of a refused record is kept: the good one after it is
    // the file's only row.
    let mut out = Vec::new();
    let mut enc = ParquetEncoder::new(&mut out, JOIN).unwrap();
    assert!(enc.append(&mut out, b"ip", b"1.5|x").is_err());
    enc.append(&mut out, b"ip2", b"1|2").unwrap();
    enc.finish(&mut out).unwrap();
    let b = &batches(out)[0];
    assert_eq!(b.num_rows(), 1);
    assert!(ParquetEncoder::new(&mut Vec::new(), &JOIN[..1]).is_err());
}
