//! Writing Avro object container files of (key, value) pairs: a string
//! field and a string or long field, named by the job (`key` and `value`,
//! or word count's `word` and `count`), deflated blocks of about 64 KiB,
//! the layout of the module doc above.

use std::io;

use apache_avro::types::Value;
use apache_avro::{Codec as AvroCodec, DeflateSettings, Schema};

use super::SYNC;

/// Bytes of datums gathered before a block is written.
const BLOCK_BYTES: usize = 64 << 10;

/// The schema of pairs of fields named `names`, a string and a string or
/// a long.
pub fn pair_schema(names: (&str, &str), long_values: bool) -> String {
    let value = if long_values { "long" } else { "string" };
    let (k, v) = names;
    format!(
        r#"{{"type":"record","name":"pair","namespace":"sluice","fields":[{{"name":"{k}","type":"string"}},{{"name":"{v}","type":"{value}"}}]}}"#
    )
}

/// An Avro file's bytes, made record by record: each call appends the
/// bytes to write next to `out`.
pub struct AvroEncoder {
    schema: Schema,
    names: (String, String),
    sync: [u8; SYNC],
    block: Vec<u8>,
    count: i64,
}

/// Appends `v` as an Avro long (zig-zag varint).
fn put_long(out: &mut Vec<u8>, v: i64) {
    crate::varint::put(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_long(out, b.len() as i64);
    out.extend_from_slice(b);
}

fn invalid(e: impl ToString) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

impl AvroEncoder {
    /// Appends the header to `out`: the schema of [`pair_schema`], the
    /// deflate codec, `sync`.
    pub fn new(
        out: &mut Vec<u8>,
        names: (&str, &str),
        long_values: bool,
        sync: [u8; SYNC],
    ) -> io::Result<AvroEncoder> {
        let schema = &pair_schema(names, long_values);
        let parsed = Schema::parse_str(schema).map_err(invalid)?;
        out.extend_from_slice(b"Obj\x01");
        put_long(out, 2);
        put_bytes(out, b"avro.schema");
        put_bytes(out, schema.as_bytes());
        put_bytes(out, b"avro.codec");
        put_bytes(out, b"deflate");
        put_long(out, 0);
        out.extend_from_slice(&sync);
        Ok(AvroEncoder {
            schema: parsed,
            names: (names.0.to_owned(), names.1.to_owned()),
            sync,
            block: Vec::new(),
            count: 0,
        })
    }

    /// Appends a pair of the schema of [`pair_schema`]: its value a long
    /// when `value` is `Ok`.
    pub fn append_pair(
        &mut self,
        out: &mut Vec<u8>,
        key: &[u8],
        value: Result<i64, &[u8]>,
    ) -> io::Result<()> {
        let text = |b: &[u8]| {
            std::str::from_utf8(b)
                .map(|s| Value::String(s.to_owned()))
                .map_err(|_| {
                    invalid(format!(
                        "{:?} is not UTF-8 (an Avro string)",
                        String::from_utf8_lossy(b)
                    ))
                })
        };
        let v = match value {
            Ok(n) => Value::Long(n),
            Err(b) => text(b)?,
        };
        let record = Value::Record(vec![
            (self.names.0.clone(), text(key)?),
            (self.names.1.clone(), v),
        ]);
        let datum = apache_avro::to_avro_datum(&self.schema, record).map_err(invalid)?;
        self.block.extend_from_slice(&datum);
        self.count += 1;
        if self.block.len() >= BLOCK_BYTES {
            self.flush_block(out)?;
        }
        Ok(())
    }

    fn flush_block(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let mut data = std::mem::take(&mut self.block);
        AvroCodec::Deflate(DeflateSettings::default())
            .compress(&mut data)
            .map_err(invalid)?;
        put_long(out, self.count);
        put_long(out, data.len() as i64);
        out.extend_from_slice(&data);
        out.extend_from_slice(&self.sync);
        self.count = 0;
        Ok(())
    }

    /// Appends the last block.
    pub fn finish(mut self, out: &mut Vec<u8>) -> io::Result<()> {
        self.flush_block(out)
    }
}
