//! Hadoop SequenceFiles (version 6), read by split and written.
//!
//! No Rust crate reads or writes this format well (the few there are
//! handle neither block compression nor splits), so this module does, after
//! Hadoop's `org.apache.hadoop.io.SequenceFile`. A file:
//!
//! ```text
//! file     := header body
//! header   := "SEQ" u8 version (6)
//!             string key class       e.g. "org.apache.hadoop.io.Text"
//!             string value class
//!             u8 compressed          0 or 1
//!             u8 blockCompressed     0 or 1 (1 only when compressed)
//!             [string codec class]   only when compressed, e.g.
//!                                    "org.apache.hadoop.io.compress.DefaultCodec"
//!             i32 BE metadata count, then count × (string name, string value)
//!             16 bytes sync          random, repeated at every sync marker
//! string   := vint length, UTF-8 bytes        (Hadoop's Text.writeString)
//! vint     := Hadoop's zero-compressed vlong (WritableUtils.writeVLong): one
//!             byte v for -112 <= v <= 127; else a byte b (-113..-120: v >= 0,
//!             -121..-128: v < 0, its bits inverted) giving the count of
//!             the big-endian bytes that follow ((-112 - b) or (-120 - b))
//! sync     := i32 BE -1 (the escape), 16 bytes sync (the header's)
//!
//! body, not block-compressed (none or record compression):
//!   (sync | record)*                 a sync at least every 2,000 bytes
//! record   := i32 BE record length   key length + value length (>= 0)
//!             i32 BE key length
//!             key bytes              the key Writable's serialization
//!             value bytes            the value Writable's serialization;
//!                                    record compression: that compressed
//!                                    as one stream of the codec
//!
//! body, block-compressed:
//!   (sync block)*                    every block follows a sync
//! block    := vint record count N
//!             buffer key lengths     N vints
//!             buffer keys            the N keys' serializations
//!             buffer value lengths   N vints
//!             buffer values          the N values' serializations
//! buffer   := vint compressed length, that many bytes: one stream of the
//!             codec
//! ```
//!
//! Writables read as text (a record's `key` and `value` columns): `Text`
//! (vint length, UTF-8 bytes) as its bytes; `BytesWritable` (i32 BE
//! length, bytes) as its bytes; `LongWritable` (i64 BE), `IntWritable`
//! (i32 BE), `VLongWritable` and `VIntWritable` (vint) in decimal;
//! `DoubleWritable` and `FloatWritable` (IEEE BE) in shortest form;
//! `BooleanWritable` (one byte) as `true`/`false`; `NullWritable` (no
//! bytes) as nothing; any other class as its serialized bytes.
//!
//! Codecs, by class name: `DefaultCodec` (zlib), `GzipCodec` (gzip),
//! `BZip2Codec` (bzip2 streams), `SnappyCodec` and `Lz4Codec` (Hadoop's
//! block framing, [`crate::compressed`]), `ZStandardCodec` (zstd frames).
//! Hadoop's Java writer (3.4) writes the first four without native code;
//! `Lz4Codec` needs lz4-java on its classpath and `ZStandardCodec` needs
//! libhadoop built with zstd.
//!
//! Splits, as Hadoop's `SequenceFileRecordReader`: a split `[start, end)`
//! owns the records after each sync whose escape starts in `[start, end)`;
//! the split holding byte 0 also owns the records between the header and
//! the first sync. A split that does not start at 0 scans from `start` for
//! the first sync; every split reads on past `end` to the next sync.

mod body;
pub mod write;

use std::io::Read;
use std::path::Path;

use crate::input::Split;
use crate::positioned::Positioned;
use crate::rows::{push_float, push_int, Projection};
use crate::{FormatError, Result};

pub use body::read_split;

/// The format's name in errors.
pub(crate) const FORMAT: &str = "SequenceFile";
/// Bytes of a sync's hash.
pub const SYNC_LEN: usize = 16;
/// The class names of the Writables Sluice writes.
pub const TEXT_CLASS: &str = "org.apache.hadoop.io.Text";
/// `LongWritable`'s class name.
pub const LONG_CLASS: &str = "org.apache.hadoop.io.LongWritable";
const CODEC_PREFIX: &str = "org.apache.hadoop.io.compress.";
/// The only version read and written (with metadata, since Hadoop 0.x).
const VERSION: u8 = 6;
/// Longest class name, codec name or metadata string accepted.
const MAX_STRING: i64 = 1 << 16;

/// A Writable class, as far as reading it as text goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writable {
    /// `Text`.
    Text,
    /// `BytesWritable`.
    Bytes,
    /// `LongWritable`.
    Long,
    /// `IntWritable`.
    Int,
    /// `VLongWritable` or `VIntWritable`.
    VInt,
    /// `DoubleWritable`.
    Double,
    /// `FloatWritable`.
    Float,
    /// `BooleanWritable`.
    Bool,
    /// `NullWritable`.
    Null,
    /// Any other class: its serialized bytes.
    Other,
}

impl Writable {
    /// The Writable named by `class`.
    pub fn of_class(class: &str) -> Writable {
        match class.strip_prefix("org.apache.hadoop.io.").unwrap_or("") {
            "Text" => Writable::Text,
            "BytesWritable" => Writable::Bytes,
            "LongWritable" => Writable::Long,
            "IntWritable" => Writable::Int,
            "VLongWritable" | "VIntWritable" => Writable::VInt,
            "DoubleWritable" => Writable::Double,
            "FloatWritable" => Writable::Float,
            "BooleanWritable" => Writable::Bool,
            "NullWritable" => Writable::Null,
            _ => Writable::Other,
        }
    }

    /// Appends the serialized `raw` as text; `None` when `raw` is not one
    /// of this class.
    pub fn push_text(self, raw: &[u8], out: &mut Vec<u8>) -> Option<()> {
        match self {
            Writable::Text => {
                let (n, used) = vint(raw)?;
                out.extend_from_slice(raw.get(used..used + usize::try_from(n).ok()?)?);
            }
            Writable::Bytes => {
                let n = u32::from_be_bytes(raw.get(..4)?.try_into().ok()?) as usize;
                out.extend_from_slice(raw.get(4..4 + n)?);
            }
            Writable::Long => push_int(out, i64::from_be_bytes(raw.try_into().ok()?)),
            Writable::Int => push_int(out, i32::from_be_bytes(raw.try_into().ok()?)),
            Writable::VInt => push_int(out, vint(raw)?.0),
            Writable::Double => push_float(out, f64::from_be_bytes(raw.try_into().ok()?)),
            Writable::Float => push_float(out, f64::from(f32::from_be_bytes(raw.try_into().ok()?))),
            Writable::Bool => out.extend_from_slice(if *raw.first()? != 0 {
                b"true"
            } else {
                b"false"
            }),
            Writable::Null => {}
            Writable::Other => out.extend_from_slice(raw),
        }
        Some(())
    }
}

/// How the body is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Records as they are.
    None,
    /// Each record's value compressed alone.
    Record,
    /// Records gathered in blocks of four compressed buffers.
    Block,
}

/// The codec of a compressed SequenceFile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqCodec {
    /// `DefaultCodec`: zlib.
    Zlib,
    /// `GzipCodec`.
    Gzip,
    /// `BZip2Codec`.
    Bzip2,
    /// `SnappyCodec`: Hadoop's block framing of raw Snappy.
    Snappy,
    /// `Lz4Codec`: Hadoop's block framing of raw LZ4.
    Lz4,
    /// `ZStandardCodec`.
    Zstd,
}

impl SeqCodec {
    fn of_class(class: &str) -> Option<SeqCodec> {
        Some(match class.strip_prefix(CODEC_PREFIX)? {
            "DefaultCodec" | "DeflateCodec" => SeqCodec::Zlib,
            "GzipCodec" => SeqCodec::Gzip,
            "BZip2Codec" => SeqCodec::Bzip2,
            "SnappyCodec" => SeqCodec::Snappy,
            "Lz4Codec" => SeqCodec::Lz4,
            "ZStandardCodec" => SeqCodec::Zstd,
            _ => return None,
        })
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            SeqCodec::Zlib => "zlib",
            SeqCodec::Gzip => "gzip",
            SeqCodec::Bzip2 => "bzip2",
            SeqCodec::Snappy => "snappy",
            SeqCodec::Lz4 => "lz4",
            SeqCodec::Zstd => "zstd",
        }
    }

    /// Decompresses one stream of this codec into `out` (cleared first).
    pub fn inflate(self, data: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
        out.clear();
        let mut r: Box<dyn Read + Send + '_> = match self {
            SeqCodec::Zlib => Box::new(flate2::read::ZlibDecoder::new(data)),
            SeqCodec::Gzip => Box::new(flate2::read::MultiGzDecoder::new(data)),
            SeqCodec::Bzip2 => Box::new(bzip2::read::MultiBzDecoder::new(data)),
            SeqCodec::Zstd => Box::new(zstd::stream::read::Decoder::new(data)?),
            SeqCodec::Snappy | SeqCodec::Lz4 => {
                let codec = if self == SeqCodec::Snappy {
                    crate::input::Codec::Snappy
                } else {
                    crate::input::Codec::Lz4
                };
                let owned: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(data.to_vec()));
                crate::compressed::decoder(codec, owned)?
            }
        };
        r.read_to_end(out)?;
        Ok(())
    }
}

/// A SequenceFile's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The key class's name.
    pub key_class: String,
    /// The value class's name.
    pub value_class: String,
    /// How the body is compressed.
    pub compression: Compression,
    /// The codec, when compressed.
    pub codec: Option<SeqCodec>,
    /// The metadata's pairs.
    pub metadata: Vec<(String, String)>,
    /// The sync hash.
    pub sync: [u8; SYNC_LEN],
    /// Where the body starts.
    pub len: u64,
}

/// An i32, big-endian.
pub(crate) fn i32(input: &mut Positioned<'_>, what: &str) -> Result<i32> {
    let mut b = [0u8; 4];
    input.exact(&mut b, what)?;
    Ok(i32::from_be_bytes(b))
}

/// A Hadoop vint.
pub(crate) fn read_vint(input: &mut Positioned<'_>, what: &str) -> Result<i64> {
    let first = input.u8(what)?;
    let n = vint_len(first);
    let mut b = [0u8; 9];
    b[0] = first;
    input.exact(&mut b[1..n], what)?;
    Ok(vint(&b[..n]).expect("a whole vint").0)
}

/// A Hadoop `Text.writeString`: a vint length, UTF-8 bytes.
fn string(input: &mut Positioned<'_>, what: &str) -> Result<String> {
    let at = input.pos;
    let n = read_vint(input, what)?;
    let b = input.sized(at, n, MAX_STRING, what)?;
    String::from_utf8(b)
        .map_err(|_| FormatError::corrupt(input.path, at, format!("{what}: not UTF-8")))
}

/// Bytes of the vint whose first byte is `first`.
fn vint_len(first: u8) -> usize {
    let b = first as i8;
    if b >= -112 {
        1
    } else if b < -120 {
        (-119 - i32::from(b)) as usize
    } else {
        (-111 - i32::from(b)) as usize
    }
}

/// Decodes a Hadoop vint at the start of `buf`: `(value, bytes used)`.
pub fn vint(buf: &[u8]) -> Option<(i64, usize)> {
    let first = *buf.first()?;
    let n = vint_len(first);
    if n == 1 {
        return Some((i64::from(first as i8), 1));
    }
    let mut v = 0i64;
    for &b in buf.get(1..n)? {
        v = (v << 8) | i64::from(b);
    }
    if (first as i8) < -120 {
        v = !v;
    }
    Some((v, n))
}

/// Appends `v` as a Hadoop vint.
pub fn put_vint(out: &mut Vec<u8>, v: i64) {
    if (-112..=127).contains(&v) {
        out.push(v as u8);
        return;
    }
    let (mut len, bits) = if v < 0 { (-120i32, !v) } else { (-112i32, v) };
    let mut tmp = bits;
    while tmp != 0 {
        tmp >>= 8;
        len -= 1;
    }
    out.push(len as u8);
    let n = if len < -120 {
        -(len + 120)
    } else {
        -(len + 112)
    };
    for i in (0..n).rev() {
        out.push((bits >> (i * 8)) as u8);
    }
}

/// Reads the header at the start of `input`.
pub(crate) fn read_header(input: &mut Positioned<'_>) -> Result<Header> {
    let mut magic = [0u8; 4];
    input.exact(&mut magic, "the header")?;
    if &magic[..3] != b"SEQ" {
        return Err(FormatError::corrupt(
            input.path,
            0,
            "not a SequenceFile (no SEQ)",
        ));
    }
    if magic[3] != VERSION {
        let detail = format!("SequenceFile version {} (only {VERSION} is read)", magic[3]);
        return Err(FormatError::corrupt(input.path, 3, detail));
    }
    let key_class = string(input, "the key class")?;
    let value_class = string(input, "the value class")?;
    let compressed = input.u8("the header")? != 0;
    let block = input.u8("the header")? != 0;
    let compression = match (compressed, block) {
        (false, _) => Compression::None,
        (true, false) => Compression::Record,
        (true, true) => Compression::Block,
    };
    let codec = if compressed {
        let at = input.pos;
        let class = string(input, "the codec class")?;
        let codec = SeqCodec::of_class(&class).ok_or_else(|| {
            FormatError::corrupt(input.path, at, format!("unknown compression codec {class}"))
        })?;
        Some(codec)
    } else {
        None
    };
    let at = input.pos;
    let count = i32(input, "the metadata")?;
    if !(0..=1 << 16).contains(&count) {
        return Err(FormatError::corrupt(
            input.path,
            at,
            format!("{count} metadata entries"),
        ));
    }
    let mut metadata = Vec::new();
    for _ in 0..count {
        metadata.push((
            string(input, "the metadata")?,
            string(input, "the metadata")?,
        ));
    }
    let mut sync = [0u8; SYNC_LEN];
    input.exact(&mut sync, "the header's sync")?;
    Ok(Header {
        key_class,
        value_class,
        compression,
        codec,
        metadata,
        sync,
        len: input.pos,
    })
}

/// The header of the SequenceFile at `path`.
pub fn header(path: &Path) -> Result<Header> {
    read_header(&mut Positioned::open(path, FORMAT)?)
}

/// Which of a record's columns (`key`, `value`) make a record: the value
/// alone unless `proj` names columns (Streaming's: both).
fn columns(split: &Split, proj: &Projection) -> Result<Vec<usize>> {
    if proj.columns.is_empty() {
        return Ok(vec![1]);
    }
    proj.positions(&split.file.path, &["key", "value"])
}

#[cfg(test)]
mod tests;
