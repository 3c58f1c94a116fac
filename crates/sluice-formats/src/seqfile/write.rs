//! Writing SequenceFiles (version 6, the layout in the module doc above):
//! uncompressed, with a sync every 2,000 bytes as Hadoop's writer, or
//! block-compressed with `DefaultCodec` (zlib), a block every 1,000,000
//! bytes of records as Hadoop's default `io.seqfile.compress.blocksize`.

use std::io::{self, Write};

use flate2::write::ZlibEncoder;

use super::{put_vint, SYNC_LEN, VERSION};

/// Bytes between two syncs of an uncompressed file (Hadoop's
/// `SYNC_INTERVAL`).
const SYNC_INTERVAL: u64 = 2000;
/// Bytes of records gathered in one compressed block.
const BLOCK_BYTES: usize = 1_000_000;
const ZLIB_CLASS: &str = "org.apache.hadoop.io.compress.DefaultCodec";

/// A SequenceFile's bytes, made record by record: each call appends the
/// bytes to write next to `out`.
pub struct SeqEncoder {
    sync: [u8; SYNC_LEN],
    pos: u64,
    last_sync: u64,
    block: Option<Block>,
}

/// The records of a block not yet written.
#[derive(Default)]
struct Block {
    count: i64,
    key_lens: Vec<u8>,
    keys: Vec<u8>,
    value_lens: Vec<u8>,
    values: Vec<u8>,
}

impl SeqEncoder {
    /// Appends the header to `out`: the key and value classes, block
    /// compression with zlib or none, no metadata, and `sync`.
    pub fn new(
        out: &mut Vec<u8>,
        key_class: &str,
        value_class: &str,
        block: bool,
        sync: [u8; SYNC_LEN],
    ) -> SeqEncoder {
        let before = out.len();
        out.extend_from_slice(b"SEQ");
        out.push(VERSION);
        put_string(out, key_class);
        put_string(out, value_class);
        out.push(u8::from(block));
        out.push(u8::from(block));
        if block {
            put_string(out, ZLIB_CLASS);
        }
        out.extend_from_slice(&0i32.to_be_bytes());
        out.extend_from_slice(&sync);
        let pos = (out.len() - before) as u64;
        SeqEncoder {
            sync,
            pos,
            last_sync: pos,
            block: block.then(Block::default),
        }
    }

    fn put(&mut self, out: &mut Vec<u8>, b: &[u8]) {
        out.extend_from_slice(b);
        self.pos += b.len() as u64;
    }

    fn put_sync(&mut self, out: &mut Vec<u8>) {
        self.put(out, &(-1i32).to_be_bytes());
        let sync = self.sync;
        self.put(out, &sync);
        self.last_sync = self.pos;
    }

    /// Appends a record of serialized key and value Writables.
    pub fn append(&mut self, out: &mut Vec<u8>, key: &[u8], value: &[u8]) -> io::Result<()> {
        let len = i32::try_from(key.len() + value.len()).map_err(too_long)?;
        if let Some(b) = &mut self.block {
            b.count += 1;
            put_vint(&mut b.key_lens, key.len() as i64);
            b.keys.extend_from_slice(key);
            put_vint(&mut b.value_lens, value.len() as i64);
            b.values.extend_from_slice(value);
            if b.keys.len() + b.values.len() >= BLOCK_BYTES {
                self.flush_block(out)?;
            }
            return Ok(());
        }
        if self.pos >= self.last_sync + SYNC_INTERVAL {
            self.put_sync(out);
        }
        self.put(out, &len.to_be_bytes());
        self.put(out, &(key.len() as i32).to_be_bytes());
        self.put(out, key);
        self.put(out, value);
        Ok(())
    }

    fn flush_block(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        let Some(b) = self.block.take() else {
            return Ok(());
        };
        if b.count > 0 {
            self.put_sync(out);
            let mut head = Vec::new();
            put_vint(&mut head, b.count);
            self.put(out, &head);
            for buf in [&b.key_lens, &b.keys, &b.value_lens, &b.values] {
                let mut z = ZlibEncoder::new(Vec::new(), flate2::Compression::default());
                z.write_all(buf)?;
                let z = z.finish()?;
                let mut len = Vec::new();
                put_vint(&mut len, z.len() as i64);
                self.put(out, &len);
                self.put(out, &z);
            }
        }
        self.block = Some(Block::default());
        Ok(())
    }

    /// Appends what is still buffered (a block's records).
    pub fn finish(mut self, out: &mut Vec<u8>) -> io::Result<()> {
        self.flush_block(out)
    }
}

/// A SequenceFile being written to `W` through a [`SeqEncoder`].
pub struct SeqWriter<W: Write> {
    out: W,
    enc: SeqEncoder,
    buf: Vec<u8>,
}

impl<W: Write> SeqWriter<W> {
    /// Writes the header (see [`SeqEncoder::new`]).
    pub fn new(
        mut out: W,
        key_class: &str,
        value_class: &str,
        block: bool,
        sync: [u8; SYNC_LEN],
    ) -> io::Result<SeqWriter<W>> {
        let mut buf = Vec::new();
        let enc = SeqEncoder::new(&mut buf, key_class, value_class, block, sync);
        out.write_all(&buf)?;
        buf.clear();
        Ok(SeqWriter { out, enc, buf })
    }

    /// Appends a record of serialized key and value Writables.
    pub fn append(&mut self, key: &[u8], value: &[u8]) -> io::Result<()> {
        self.enc.append(&mut self.buf, key, value)?;
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// Writes what is buffered and gives back the sink.
    pub fn finish(mut self) -> io::Result<W> {
        self.enc.finish(&mut self.buf)?;
        self.out.write_all(&self.buf)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A sync hash for a new file: 16 bytes from the time and `seed` (Hadoop
/// takes an MD5 of a UID and the time; any bytes unlikely to recur do).
pub fn new_sync(seed: &[u8]) -> [u8; SYNC_LEN] {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut h = crc32c::crc32c(seed);
    let mut out = [0u8; SYNC_LEN];
    for (i, chunk) in out.chunks_mut(4).enumerate() {
        h = crc32c::crc32c_append(h, &now.to_le_bytes());
        h = crc32c::crc32c_append(h, &[i as u8]);
        chunk.copy_from_slice(&h.to_le_bytes());
    }
    out
}

fn too_long(_: std::num::TryFromIntError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "a record over 2 GiB")
}

/// Appends `s` as Hadoop's `Text.writeString`: vint length, UTF-8 bytes.
pub fn put_string(out: &mut Vec<u8>, s: &str) {
    put_text(out, s.as_bytes());
}

/// Appends bytes as a `Text` Writable's serialization.
pub fn put_text(out: &mut Vec<u8>, b: &[u8]) {
    put_vint(out, b.len() as i64);
    out.extend_from_slice(b);
}

/// Appends `v` as a `LongWritable`'s serialization.
pub fn put_long(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_be_bytes());
}
