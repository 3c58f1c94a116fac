//! Avro object container files read as records of text ([`crate::rows`]),
//! by split at their sync markers; values decoded by the `apache-avro`
//! crate.
//!
//! ```text
//! file    := "Obj" 0x01 meta sync block*
//! meta    := an Avro map of bytes: blocks of (long count, count x (string
//!            key, bytes value)), a negative count followed by the block's
//!            byte size, ended by a count of 0; keys `avro.schema` (the
//!            writer's schema, JSON) and `avro.codec` (null, deflate,
//!            snappy, zstandard, bzip2, xz)
//! block   := long count, long size, size bytes (count datums, compressed
//!            by the codec), sync
//! sync    := 16 bytes, the header's
//! long    := zig-zag varint
//! ```
//!
//! As Avro's own `AvroRecordReader`, a block belongs to the split holding
//! the first byte of the sync before it (the first block's is the
//! header's): a split that does not start at 0 scans from its start for
//! the sync. Rows are records; the projection names their fields. A block
//! whose sync is not the header's, that does not decompress or decode, or
//! that the file ends in, fails naming the file and the block's offset.

pub mod write;

use std::path::Path;
use std::str::FromStr;

use apache_avro::types::Value;
use apache_avro::{Codec as AvroCodec, Schema};

use crate::input::Split;
use crate::positioned::Positioned;
use crate::rows::{push_date, push_float, push_int, Projection};
use crate::{FormatError, Result};

/// The format's name in errors.
const FORMAT: &str = "Avro file";
/// Bytes of a sync marker.
pub const SYNC: usize = 16;
/// The most bytes a block may hold (compressed or not).
const MAX_BLOCK: i64 = 1 << 30;

/// A container file's header.
pub struct Header {
    /// The writer's schema.
    pub schema: Schema,
    /// The blocks' codec.
    pub codec: AvroCodec,
    /// The sync marker.
    pub sync: [u8; SYNC],
    /// Where the first block starts.
    pub len: u64,
}

/// A zig-zag varint long; `None` at the end of the file before it.
fn long(input: &mut Positioned<'_>, what: &str) -> Result<Option<i64>> {
    let mut v = 0u64;
    for i in 0..10 {
        let mut b = [0u8; 1];
        if !input.fill(&mut b, what)? {
            if i == 0 {
                return Ok(None);
            }
            return Err(input.cut(what));
        }
        v |= u64::from(b[0] & 0x7f) << (7 * i);
        if b[0] < 0x80 {
            return Ok(Some(((v >> 1) as i64) ^ -((v & 1) as i64)));
        }
    }
    Err(FormatError::corrupt(
        input.path,
        input.pos,
        format!("{what}: a varint of over 10 bytes"),
    ))
}

/// A zig-zag varint long that must be there.
fn need_long(input: &mut Positioned<'_>, what: &str) -> Result<i64> {
    long(input, what)?.ok_or_else(|| input.cut(what))
}

/// Avro bytes: a long length, then that many bytes.
fn bytes(input: &mut Positioned<'_>, what: &str) -> Result<Vec<u8>> {
    let at = input.pos;
    let n = need_long(input, what)?;
    input.sized(at, n, MAX_BLOCK, what)
}

fn read_header(input: &mut Positioned<'_>) -> Result<Header> {
    let path = input.path;
    let mut magic = [0u8; 4];
    input.exact(&mut magic, "the header")?;
    if magic != *b"Obj\x01" {
        return Err(FormatError::corrupt(
            path,
            0,
            "not an Avro object container file",
        ));
    }
    let (mut schema, mut codec) = (None, None);
    loop {
        let mut n = need_long(input, "the header's metadata")?;
        if n == 0 {
            break;
        }
        if n < 0 {
            n = -n;
            need_long(input, "the header's metadata")?;
        }
        for _ in 0..n {
            let key = bytes(input, "the header's metadata")?;
            let value = bytes(input, "the header's metadata")?;
            match &key[..] {
                b"avro.schema" => schema = Some(value),
                b"avro.codec" => codec = Some(value),
                _ => {}
            }
        }
    }
    let at = input.pos;
    let schema = schema.ok_or_else(|| FormatError::corrupt(path, at, "no avro.schema"))?;
    let schema = Schema::parse_str(&String::from_utf8_lossy(&schema))
        .map_err(|e| FormatError::corrupt(path, at, format!("avro.schema: {e}")))?;
    let name = codec.map_or_else(
        || "null".to_owned(),
        |c| String::from_utf8_lossy(&c).into_owned(),
    );
    let codec = AvroCodec::from_str(&name).map_err(|_| {
        let detail = format!(
            "codec {name} is not one this build reads (null, deflate, snappy, zstandard, bzip2)"
        );
        FormatError::corrupt(path, at, detail)
    })?;
    let mut sync = [0u8; SYNC];
    input.exact(&mut sync, "the header's sync marker")?;
    Ok(Header {
        schema,
        codec,
        sync,
        len: input.pos,
    })
}

/// The header of the Avro file at `path`.
pub fn header(path: &Path) -> Result<Header> {
    read_header(&mut Positioned::open(path, FORMAT)?)
}

/// The names of a record schema's fields, or an error.
fn field_names(path: &Path, schema: &Schema) -> Result<Vec<String>> {
    match schema {
        Schema::Record(r) => Ok(r.fields.iter().map(|f| f.name.clone()).collect()),
        other => Err(FormatError::Schema {
            path: path.to_owned(),
            detail: format!("holds {other:?} values, not records of named fields"),
        }),
    }
}

/// Reads every row of `split`'s blocks (those whose preceding sync starts
/// in the split), calling `f(row number in the split, record)`: the
/// projected fields as text, or with [`Projection::json`] the whole row as
/// one JSON object (Avro's `AvroAsTextInputFormat`); returns the bytes of
/// the blocks read.
pub fn read_split<E, F>(split: &Split, proj: &Projection, mut f: F) -> std::result::Result<u64, E>
where
    E: From<FormatError>,
    F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
{
    let path = split.file.path.as_path();
    let mut input = Positioned::of_file(&split.file, split.start..split.end, FORMAT)?;
    let h = read_header(&mut input)?;
    let names = field_names(path, &h.schema)?;
    let pos = if proj.json {
        None
    } else {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        Some(proj.positions(path, &names)?)
    };
    let first = if split.start == 0 {
        Some(h.len)
    } else {
        input
            .find(&h.sync, split.start, split.end)?
            .map(|s| s + SYNC as u64)
    };
    let Some(first) = first else {
        return Ok(0);
    };
    input.seek(first)?;
    let mut rec = Vec::new();
    let mut row = 0u64;
    loop {
        let at = input.pos;
        if at - SYNC as u64 >= split.end {
            break;
        }
        let Some(count) = long(&mut input, "a block's count")? else {
            break;
        };
        let data = block(&mut input, &h, at, count)?;
        let mut cur = &data[..];
        for _ in 0..count {
            let v = apache_avro::from_avro_datum(&h.schema, &mut cur, None).map_err(|e| {
                FormatError::corrupt(path, at, format!("block at offset {at}: {e}"))
            })?;
            rec.clear();
            match &pos {
                Some(pos) => push_columns(&mut rec, &v, pos, proj.sep),
                None => push_json(&mut rec, v),
            }
            f(row, &rec)?;
            row += 1;
        }
    }
    Ok(input.pos - first)
}

/// The rest of a block at `at` whose count was read: its data,
/// decompressed, with its sync checked.
fn block(input: &mut Positioned<'_>, h: &Header, at: u64, count: i64) -> Result<Vec<u8>> {
    let path = input.path;
    let size = need_long(input, "a block's size")?;
    if !(0..=MAX_BLOCK).contains(&size) || !(0..=MAX_BLOCK).contains(&count) {
        let detail = format!("block at offset {at}: {count} rows in {size} bytes");
        return Err(FormatError::corrupt(path, at, detail));
    }
    let mut data = vec![0u8; size as usize];
    input.exact(&mut data, "a block")?;
    let mut sync = [0u8; SYNC];
    input.exact(&mut sync, "a block's sync marker")?;
    if sync != h.sync {
        let detail = format!("block at offset {at}: bad sync marker (not the header's)");
        return Err(FormatError::corrupt(path, input.pos - SYNC as u64, detail));
    }
    h.codec
        .decompress(&mut data)
        .map_err(|e| FormatError::Decompress {
            path: path.to_owned(),
            codec: "avro",
            place: format!("in the block at offset {at}"),
            detail: e.to_string(),
        })?;
    Ok(data)
}

/// Appends the fields at `pos` of record `v` as text, joined by `sep`.
fn push_columns(out: &mut Vec<u8>, v: &Value, pos: &[usize], sep: u8) {
    let Value::Record(fields) = v else {
        return;
    };
    for (i, &p) in pos.iter().enumerate() {
        if i > 0 {
            out.push(sep);
        }
        if let Some((_, f)) = fields.get(p) {
            push_value(out, f);
        }
    }
}

/// Appends a value as text ([`crate::rows`]).
fn push_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => {}
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Int(x) => push_int(out, *x),
        Value::Long(x) => push_int(out, *x),
        Value::Float(x) => push_float(out, f64::from(*x)),
        Value::Double(x) => push_float(out, *x),
        Value::Bytes(b) | Value::Fixed(_, b) => out.extend_from_slice(b),
        Value::String(s) | Value::Enum(_, s) => out.extend_from_slice(s.as_bytes()),
        Value::Union(_, v) => push_value(out, v),
        Value::Date(d) => push_date(out, i64::from(*d)),
        Value::TimeMillis(x) => push_int(out, *x),
        Value::TimeMicros(x)
        | Value::TimestampMillis(x)
        | Value::TimestampMicros(x)
        | Value::TimestampNanos(x)
        | Value::LocalTimestampMillis(x)
        | Value::LocalTimestampMicros(x)
        | Value::LocalTimestampNanos(x) => push_int(out, *x),
        other => {
            let json = serde_json::Value::try_from(other.clone())
                .map_or_else(|_| format!("{other:?}"), |j| j.to_string());
            out.extend_from_slice(json.as_bytes());
        }
    }
}

/// Appends a row as one JSON object.
fn push_json(out: &mut Vec<u8>, v: Value) {
    let json = serde_json::Value::try_from(v).unwrap_or(serde_json::Value::Null);
    serde_json::to_writer(&mut *out, &json).expect("writing JSON to memory");
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::sync::Arc;

    use apache_avro::types::Record;
    use apache_avro::Writer;

    use super::*;
    use crate::input::{Codec, InputFile};

    const SCHEMA: &str = r#"{"type": "record", "name": "r", "fields": [
        {"name": "word", "type": "string"}, {"name": "n", "type": "long"},
        {"name": "x", "type": ["null", "double"]}]}"#;

    fn write_file(path: &Path, n: usize, codec: AvroCodec) {
        let schema = Schema::parse_str(SCHEMA).unwrap();
        let f = File::create(path).unwrap();
        let mut w = Writer::with_codec(&schema, f, codec);
        for i in 0..n {
            let mut r = Record::new(&schema).unwrap();
            r.put("word", format!("w{i}"));
            r.put("n", i as i64);
            r.put(
                "x",
                Value::Union(1, Box::new(Value::Double(i as f64 / 2.0))),
            );
            w.append(r).unwrap();
            if i % 100 == 99 {
                w.flush().unwrap();
            }
        }
        w.into_inner().unwrap();
    }

    fn read(path: &Path, step: u64, proj: &Projection) -> Result<Vec<String>> {
        let len = std::fs::metadata(path).unwrap().len();
        let file = Arc::new(InputFile {
            path: path.to_owned(),
            len,
            codec: Codec::Avro,
            checks: None,
            resident: None,
            remote: None,
            fill: None,
        });
        let mut got = Vec::new();
        let mut start = 0;
        while start < len {
            let s = Split {
                index: 0,
                file: file.clone(),
                start,
                end: (start + step).min(len),
            };
            read_split::<FormatError, _>(&s, proj, |_, r| {
                got.push(String::from_utf8(r.to_vec()).unwrap());
                Ok(())
            })?;
            start += step;
        }
        Ok(got)
    }

    #[test]
    fn every_row_is_read_once_whatever_the_splits() {
        let d = tempfile::tempdir().unwrap();
        let codecs = [
            AvroCodec::Null,
            AvroCodec::Deflate(Default::default()),
            AvroCodec::Snappy,
        ];
        for codec in codecs {
            let p = d.path().join("f.avro");
            write_file(&p, 5000, codec);
            let proj = Projection {
                columns: vec!["n".into(), "word".into(), "x".into()],
                sep: b'|',
                ..Projection::default()
            };
            let want: Vec<String> = (0..5000)
                .map(|i| format!("{i}|w{i}|{}.{}", i / 2, if i % 2 == 1 { 5 } else { 0 }))
                .collect();
            let len = std::fs::metadata(&p).unwrap().len();
            for step in [len, 997, 4096, len / 3 + 1] {
                assert_eq!(
                    read(&p, step, &proj).unwrap(),
                    want,
                    "{codec:?}, splits of {step}"
                );
            }
            let json = read(&p, 2000, &Projection::streaming()).unwrap();
            assert_eq!(json[3], r#"{"n":3,"word":"w3","x":1.5}"#);
        }
    }

    #[test]
    fn pairs_written_read_back() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("w.avro");
        let mut bytes = Vec::new();
        let names = ("key", "value");
        let mut enc = write::AvroEncoder::new(&mut bytes, names, true, [3; SYNC]).unwrap();
        for i in 0..20_000i64 {
            enc.append_pair(&mut bytes, format!("k{i}").as_bytes(), Ok(i))
                .unwrap();
        }
        enc.finish(&mut bytes).unwrap();
        std::fs::write(&p, &bytes).unwrap();
        let proj = Projection::piped(&["value", "key"]);
        let got = read(&p, 50_000, &proj).unwrap();
        assert_eq!(got.len(), 20_000);
        assert_eq!(got[12_345], "12345|k12345");
        let reader = apache_avro::Reader::new(&bytes[..]).unwrap();
        assert_eq!(reader.count(), 20_000);
    }

    #[test]
    fn damage_names_the_file_and_block() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.avro");
        write_file(&p, 1000, AvroCodec::Deflate(Default::default()));
        let h = header(&p).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        let proj = Projection::column("word");
        let cut = d.path().join("cut.avro");
        std::fs::write(&cut, &bytes[..bytes.len() - 30]).unwrap();
        let e = read(&cut, 1 << 30, &proj).unwrap_err().to_string();
        assert!(e.contains("cut.avro") && e.contains("truncated"), "{e}");
        let mut bad = bytes.clone();
        let second =
            memchr::memmem::find(&bytes[h.len as usize..], &h.sync).unwrap() + h.len as usize;
        bad[second + 3] ^= 0xff;
        std::fs::write(&p, &bad).unwrap();
        let e = read(&p, 1 << 30, &proj).unwrap_err().to_string();
        assert!(
            e.contains(&format!("offset {second}")) && e.contains("bad sync marker"),
            "{e}"
        );
        let mut bad = bytes.clone();
        bad[h.len as usize + 6] ^= 0xff;
        std::fs::write(&p, &bad).unwrap();
        let e = read(&p, 1 << 30, &proj).unwrap_err().to_string();
        assert!(e.contains(&format!("block at offset {}", h.len)), "{e}");
        let e = read(&cut, 1 << 30, &Projection::column("nope"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("has no column nope"), "{e}");
    }
}
