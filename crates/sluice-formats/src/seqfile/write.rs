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

/// A SequenceFile being written to `W`.
pub struct SeqWriter<W: Write> {
    out: W,
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

impl<W: Write> SeqWriter<W> {
    /// Writes the header: the key and value classes, block compression
    /// with zlib or none, no metadata, and `sync`.
    pub fn new(
        out: W,
        key_class: &str,
        value_class: &str,
        block: bool,
        sync: [u8; SYNC_LEN],
    ) -> io::Result<SeqWriter<W>> {
        let mut h = b"SEQ".to_vec();
        h.push(VERSION);
        put_string(&mut h, key_class);
        put_string(&mut h, value_class);
        h.push(u8::from(block));
        h.push(u8::from(block));
        if block {
            put_string(&mut h, ZLIB_CLASS);
        }
        h.extend_from_slice(&0i32.to_be_bytes());
        h.extend_from_slice(&sync);
        let mut w = SeqWriter {
            out,
            sync,
            pos: 0,
            last_sync: 0,
            block: block.then(Block::default),
        };
        w.put(&h)?;
        w.last_sync = w.pos;
        Ok(w)
    }

    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.out.write_all(b)?;
        self.pos += b.len() as u64;
        Ok(())
    }

    fn put_sync(&mut self) -> io::Result<()> {
        self.put(&(-1i32).to_be_bytes())?;
        let sync = self.sync;
        self.put(&sync)?;
        self.last_sync = self.pos;
        Ok(())
    }

    /// Appends a record of serialized key and value Writables.
    pub fn append(&mut self, key: &[u8], value: &[u8]) -> io::Result<()> {
        if let Some(b) = &mut self.block {
            b.count += 1;
            put_vint(&mut b.key_lens, key.len() as i64);
            b.keys.extend_from_slice(key);
            put_vint(&mut b.value_lens, value.len() as i64);
            b.values.extend_from_slice(value);
            if b.keys.len() + b.values.len() >= BLOCK_BYTES {
                self.flush_block()?;
            }
            return Ok(());
        }
        if self.pos >= self.last_sync + SYNC_INTERVAL {
            self.put_sync()?;
        }
        let len = i32::try_from(key.len() + value.len()).map_err(too_long)?;
        self.put(&len.to_be_bytes())?;
        self.put(&(key.len() as i32).to_be_bytes())?;
        self.put(key)?;
        self.put(value)
    }

    fn flush_block(&mut self) -> io::Result<()> {
        let Some(b) = self.block.take() else {
            return Ok(());
        };
        if b.count > 0 {
            self.put_sync()?;
            let mut head = Vec::new();
            put_vint(&mut head, b.count);
            self.put(&head)?;
            for buf in [&b.key_lens, &b.keys, &b.value_lens, &b.values] {
                let mut z = ZlibEncoder::new(Vec::new(), flate2::Compression::default());
                z.write_all(buf)?;
                let z = z.finish()?;
                let mut len = Vec::new();
                put_vint(&mut len, z.len() as i64);
                self.put(&len)?;
                self.put(&z)?;
            }
        }
        self.block = Some(Block::default());
        Ok(())
    }

    /// Writes what is buffered and gives back the sink.
    pub fn finish(mut self) -> io::Result<W> {
        self.flush_block()?;
        self.out.flush()?;
        Ok(self.out)
    }
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
