//! Compressed text read as one stream: gzip, zstd, LZ4 and Snappy.
//!
//! Each of these files is one split (their streams cannot be entered in the
//! middle); bzip2, whose blocks can, has its own reader ([`crate::bz2`]).
//!
//! LZ4 (`.lz4`) and Snappy (`.snappy`) files come in two framings, told
//! apart by their first bytes:
//!
//! - the standard frame formats: LZ4's frame (magic `04 22 4D 18`, as the
//!   `lz4` command writes) and Snappy's framing format (stream identifier
//!   chunk `FF 06 00 00 73 4E 61 50 70 59`);
//! - Hadoop's block framing (`BlockCompressorStream`, which Hadoop's
//!   `Lz4Codec` and `SnappyCodec` write), anything else:
//!
//! ```text
//! file   := block*
//! block  := u32 BE uncompressed length N
//!           chunk+                    until the chunks' uncompressed bytes reach N
//! chunk  := u32 BE compressed length M
//!           M bytes                   one raw LZ4 block / raw Snappy block
//! ```
//!
//! A block of `N = 0` has no chunk. The raw blocks carry no checksum: a
//! damaged one fails when it does not decode to a length that fits.

use std::io::{self, Read};

use flate2::read::MultiGzDecoder;

use crate::input::Codec;

/// Largest uncompressed block or chunk accepted from Hadoop's framing
/// (Hadoop's own buffers are 256 KiB; anything over this is damage, not
/// data, and is refused before allocating).
pub const MAX_HADOOP_BLOCK: usize = 64 << 20;

/// The LZ4 frame format's magic number, as it starts a file.
const LZ4_FRAME_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
/// The Snappy framing format's stream identifier chunk.
const SNAPPY_STREAM_ID: [u8; 10] = [0xff, 0x06, 0x00, 0x00, b's', b'N', b'a', b'P', b'p', b'Y'];

/// The decompressed bytes of `raw`, a whole file of `codec`. `codec` must
/// be one of the stream codecs (gzip, zstd, LZ4, Snappy).
pub fn decoder(codec: Codec, raw: Box<dyn Read + Send>) -> io::Result<Box<dyn Read + Send>> {
    Ok(match codec {
        Codec::Gzip => Box::new(MultiGzDecoder::new(raw)),
        Codec::Zstd => Box::new(zstd::stream::read::Decoder::new(raw)?),
        Codec::Lz4 => {
            let (head, raw) = peek(raw, 4)?;
            if head == LZ4_FRAME_MAGIC {
                Box::new(lz4_flex::frame::FrameDecoder::new(raw))
            } else {
                Box::new(HadoopBlocks::new(raw, Raw::Lz4))
            }
        }
        Codec::Snappy => {
            let (head, raw) = peek(raw, SNAPPY_STREAM_ID.len())?;
            if head == SNAPPY_STREAM_ID {
                Box::new(snap::read::FrameDecoder::new(raw))
            } else {
                Box::new(HadoopBlocks::new(raw, Raw::Snappy))
            }
        }
        other => {
            let detail = format!("{other:?} is not a stream codec");
            return Err(io::Error::new(io::ErrorKind::InvalidInput, detail));
        }
    })
}

/// The first `n` bytes of `r` (fewer at its end) and a reader of all of
/// it, those bytes included.
fn peek(mut r: Box<dyn Read + Send>, n: usize) -> io::Result<(Vec<u8>, Box<dyn Read + Send>)> {
    let mut head = Vec::with_capacity(n);
    (&mut r).take(n as u64).read_to_end(&mut head)?;
    let all = io::Cursor::new(head.clone()).chain(r);
    Ok((head, Box::new(all)))
}

/// The raw block codec inside Hadoop's framing.
#[derive(Debug, Clone, Copy)]
enum Raw {
    Lz4,
    Snappy,
}

impl Raw {
    /// Decodes one raw block into `out` (cleared first), which may take at
    /// most `room` bytes.
    fn decode(self, chunk: &[u8], room: usize, out: &mut Vec<u8>) -> io::Result<()> {
        out.clear();
        match self {
            Raw::Lz4 => {
                out.resize(room, 0);
                let n = lz4_flex::block::decompress_into(chunk, out).map_err(bad)?;
                out.truncate(n);
            }
            Raw::Snappy => {
                let n = snap::raw::decompress_len(chunk).map_err(bad)?;
                if n > room {
                    return Err(bad(format!("a chunk of {n} bytes overflows its block")));
                }
                out.resize(n, 0);
                snap::raw::Decoder::new()
                    .decompress(chunk, out)
                    .map_err(bad)?;
            }
        }
        Ok(())
    }
}

fn bad(e: impl ToString) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// Hadoop's block framing read as a stream (see the module doc).
struct HadoopBlocks<R> {
    raw: R,
    codec: Raw,
    /// Uncompressed bytes of the current block still to come.
    left: usize,
    chunk: Vec<u8>,
    out: Vec<u8>,
    at: usize,
}

impl<R: Read> HadoopBlocks<R> {
    fn new(raw: R, codec: Raw) -> Self {
        HadoopBlocks {
            raw,
            codec,
            left: 0,
            chunk: Vec::new(),
            out: Vec::new(),
            at: 0,
        }
    }

    /// Decodes the next chunk into `out`; false at the end of the file.
    fn next_chunk(&mut self) -> io::Result<bool> {
        while self.left == 0 {
            match read_u32(&mut self.raw, true)? {
                None => return Ok(false),
                Some(n) => self.left = capped(n, "block")?,
            }
        }
        let m = read_u32(&mut self.raw, false)?.expect("required");
        let m = capped(m, "chunk")?;
        self.chunk.resize(m, 0);
        self.raw.read_exact(&mut self.chunk).map_err(cut)?;
        self.codec.decode(&self.chunk, self.left, &mut self.out)?;
        self.left -= self.out.len();
        self.at = 0;
        Ok(true)
    }
}

/// A frame length, refused when larger than [`MAX_HADOOP_BLOCK`].
fn capped(n: u32, what: &str) -> io::Result<usize> {
    let n = n as usize;
    if n > MAX_HADOOP_BLOCK {
        return Err(bad(format!(
            "a {what} of {n} bytes (over {MAX_HADOOP_BLOCK}): not Hadoop's block framing, or damaged"
        )));
    }
    Ok(n)
}

/// A big-endian u32, or `None` at a clean end when `may_end`.
fn read_u32(r: &mut impl Read, may_end: bool) -> io::Result<Option<u32>> {
    let mut b = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut b[got..]) {
            Ok(0) if got == 0 && may_end => return Ok(None),
            Ok(0) => return Err(cut(io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(u32::from_be_bytes(b)))
}

fn cut(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        io::Error::new(io::ErrorKind::UnexpectedEof, "the file ends inside a block")
    } else {
        e
    }
}

impl<R: Read> Read for HadoopBlocks<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.out.len() {
            if !self.next_chunk()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.out.len() - self.at);
        buf[..n].copy_from_slice(&self.out[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Hadoop's block framing of `data` in blocks of up to `block` bytes, one
/// chunk each, compressed by `codec` (LZ4 or Snappy): what Hadoop's
/// `BlockCompressorStream` writes. For tests and tools.
pub fn hadoop_frame(codec: Codec, data: &[u8], block: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in data.chunks(block.max(1)) {
        let packed = match codec {
            Codec::Lz4 => lz4_flex::block::compress(piece),
            _ => snap::raw::Encoder::new()
                .compress_vec(piece)
                .expect("a block under Snappy's limit"),
        };
        out.extend_from_slice(&(piece.len() as u32).to_be_bytes());
        out.extend_from_slice(&(packed.len() as u32).to_be_bytes());
        out.extend_from_slice(&packed);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(codec: Codec, bytes: Vec<u8>) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        decoder(codec, Box::new(io::Cursor::new(bytes)))?.read_to_end(&mut out)?;
        Ok(out)
    }

    fn text() -> Vec<u8> {
        (0..5000)
            .flat_map(|i| format!("line {i} of some text\n").into_bytes())
            .collect()
    }

    #[test]
    fn hadoop_framing_and_standard_frames_both_decode() {
        let text = text();
        for codec in [Codec::Lz4, Codec::Snappy] {
            let framed = hadoop_frame(codec, &text, 10_000);
            assert_eq!(decode(codec, framed.clone()).unwrap(), text, "{codec:?}");
            // Cut short: an error, not a short answer.
            let cut = framed[..framed.len() - 7].to_vec();
            assert!(decode(codec, cut).is_err(), "{codec:?}");
        }
        let mut lz = lz4_flex::frame::FrameEncoder::new(Vec::new());
        std::io::Write::write_all(&mut lz, &text).unwrap();
        assert_eq!(decode(Codec::Lz4, lz.finish().unwrap()).unwrap(), text);
        let mut sn = snap::write::FrameEncoder::new(Vec::new());
        std::io::Write::write_all(&mut sn, &text).unwrap();
        let sn = sn.into_inner().unwrap();
        assert_eq!(decode(Codec::Snappy, sn).unwrap(), text);
        let z = zstd::encode_all(&text[..], 3).unwrap();
        assert_eq!(decode(Codec::Zstd, z).unwrap(), text);
    }

    #[test]
    fn an_oversized_hadoop_length_is_refused_before_allocating() {
        let mut framed = hadoop_frame(Codec::Lz4, b"hello\n", 100);
        framed[..4].copy_from_slice(&u32::MAX.to_be_bytes());
        let e = decode(Codec::Lz4, framed).unwrap_err();
        assert!(e.to_string().contains("not Hadoop's block framing"), "{e}");
    }
}
