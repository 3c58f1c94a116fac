//! bzip2 text read block by block, so that one file gives many splits (as
//! Hadoop's `BZip2Codec` splits).
//!
//! A bzip2 file is one or more streams, each `"BZh" level` then blocks,
//! then an end-of-stream marker; blocks and markers are bit-aligned:
//!
//! ```text
//! stream := "BZh" '1'..'9'                   4 bytes
//!           block*
//!           0x177245385090                   48 bits: end-of-stream magic
//!           u32 combined CRC                 32 bits
//!           0-7 zero bits                    to the next byte
//! block  := 0x314159265359                   48 bits: block magic
//!           u32 block CRC                    32 bits (CRC of the block's text)
//!           ...                              Huffman-coded BWT data
//! ```
//!
//! Split ownership: a split `[start, end)` owns the blocks whose magic
//! begins at a bit in `[8 * start, 8 * end)`. A reader's blocks are
//! decoded as one stream of its own, fed to one decoder a block at a time:
//! `"BZh9"`, then each block's bits, then the leading bits of a block
//! magic up to the next byte boundary (so that the decoder has every bit
//! of the block, and gives all its text, before the next block is fed;
//! the next block's bits then start after them). The decoder checks each
//! block's text against the block's CRC; the stream never ends, so no
//! combined CRC is needed, and one decoder's tables (3.6 MB at level 9)
//! serve every block of the split instead of being allocated, and their
//! pages faulted in, block by block. A line belongs to
//! the split owning the block holding the newline before it (the file's
//! first line, to the split owning the file's first block): a reader
//! drops everything up to its stream's first newline unless its first block
//! is the file's first, and after its last block reads on, through blocks
//! it does not own, to the first newline there. A split owning no block
//! reads nothing. Record offsets are decompressed bytes from the split's
//! first block.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::{FormatError, Result};

/// The block magic, 48 bits (BCD of pi).
const BLOCK_MAGIC: u64 = 0x3141_5926_5359;
/// The end-of-stream magic, 48 bits (BCD of sqrt(pi)).
const EOS_MAGIC: u64 = 0x1772_4538_5090;
const MASK48: u64 = (1 << 48) - 1;

/// The 16-bit values bytes 1 and 2 after a magic's first byte take, for
/// either magic at any of the 8 bit offsets in that byte (its bits
/// 8-s..24-s, all inside its 48): a set of 65,536 bits. A position whose
/// next two bytes are not in it holds no magic, so the search looks at
/// one 16-bit value a byte rather than 16 shifted words.
const CANDIDATES: [u64; 1024] = candidates();

const fn candidates() -> [u64; 1024] {
    let mut set = [0u64; 1024];
    let magics = [BLOCK_MAGIC, EOS_MAGIC];
    let mut m = 0;
    while m < magics.len() {
        let mut s = 0;
        while s < 8 {
            let v = ((magics[m] >> (24 + s)) & 0xffff) as usize;
            set[v / 64] |= 1 << (v % 64);
            s += 1;
        }
        m += 1;
    }
    set
}

/// Whether bytes `i + 1` and `i + 2` of `buf` may follow the first byte
/// of a magic at byte `i`.
#[inline]
fn may_start(buf: &[u8], i: usize) -> bool {
    let v = usize::from(u16::from_be_bytes([buf[i + 1], buf[i + 2]]));
    CANDIDATES[v / 64] & (1 << (v % 64)) != 0
}
/// Bit of the first block of a file: after its 4-byte stream header.
const FIRST_BLOCK_BIT: u64 = 32;
/// Bytes read from the file at a time.
const READ_STEP: usize = 1 << 20;

/// What a bit pattern found is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    Block,
    End,
}

/// Where the reader is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Decoding the split's own blocks.
    Owned,
    /// Past them: the text up to the first newline.
    Finishing,
    Done,
}

/// The decompressed text of one split of a bzip2 file (see the module doc).
pub struct Bz2Split {
    raw: Box<dyn Read + Send>,
    path: PathBuf,
    /// File bytes from offset `base` on, as far as read.
    buf: Vec<u8>,
    base: u64,
    eof: bool,
    end_bit: u64,
    /// The next block's magic, once found; `None` before the first search.
    next: Option<u64>,
    phase: Phase,
    /// Whether the first block was looked for.
    located: bool,
    first_block: Option<u64>,
    out: Vec<u8>,
    at: usize,
    /// The stream of the reader's blocks so far, once one was fed.
    stream: Option<Stream>,
    /// The bits fed next, as whole bytes.
    synth: Vec<u8>,
}

/// The decoder of a reader's stream of blocks, and how many bits of the
/// next block's magic it was given after the last block.
struct Stream {
    dec: bzip2::Decompress,
    magic_fed: u32,
}

impl Bz2Split {
    /// The split `[start, end)` of the file at `path`, whose bytes from
    /// `start` on `raw` reads.
    pub fn new(raw: Box<dyn Read + Send>, path: &Path, start: u64, end: u64) -> Self {
        Bz2Split {
            raw,
            path: path.to_owned(),
            buf: Vec::new(),
            base: start,
            eof: false,
            end_bit: end.saturating_mul(8),
            next: None,
            phase: Phase::Owned,
            located: false,
            first_block: None,
            out: Vec::new(),
            at: 0,
            stream: None,
            synth: Vec::new(),
        }
    }

    /// Whether the reader drops its text up to the first newline: its
    /// first block is not the file's first.
    pub fn skips_first(&mut self) -> Result<bool> {
        self.locate_first()?;
        Ok(self.first_block.is_some_and(|b| b != FIRST_BLOCK_BIT))
    }

    fn locate_first(&mut self) -> Result<()> {
        if self.located {
            return Ok(());
        }
        self.located = true;
        match self.find_block(self.base * 8)? {
            Some(b) if b < self.end_bit => {
                self.first_block = Some(b);
                self.next = Some(b);
            }
            _ => self.phase = Phase::Done,
        }
        Ok(())
    }

    /// Reads decompressed text into `buf`; 0 at the split's end.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        self.locate_first()?;
        while self.at == self.out.len() {
            if !self.decode_next()? {
                return Ok(0);
            }
        }
        let mut n = buf.len().min(self.out.len() - self.at);
        if self.phase == Phase::Finishing {
            if let Some(i) = memchr::memchr(b'\n', &self.out[self.at..self.at + n]) {
                n = i + 1;
                self.phase = Phase::Done;
            }
        }
        buf[..n].copy_from_slice(&self.out[self.at..self.at + n]);
        self.at += n;
        if self.phase == Phase::Done {
            self.out.truncate(self.at);
        }
        Ok(n)
    }

    /// Decodes the next block into `out`; false when the split is done.
    /// A block past the split's own is read only to its first newline.
    fn decode_next(&mut self) -> Result<bool> {
        let Some(block) = self.next.filter(|_| self.phase != Phase::Done) else {
            self.phase = Phase::Done;
            return Ok(false);
        };
        if block >= self.end_bit {
            self.phase = Phase::Finishing;
        }
        self.drop_before(block);
        let (stop, mark) = self.find(block + 48)?.ok_or_else(|| {
            let detail = "no end-of-stream marker after the block here";
            FormatError::truncated(&self.path, block / 8, detail)
        })?;
        self.decode_block(block, stop)?;
        self.next = match mark {
            Mark::Block => Some(stop),
            Mark::End => self.find_block(stop + 80)?,
        };
        Ok(true)
    }

    /// Decodes the block whose bits are `[from, to)` into `out`, fed to
    /// the reader's stream (see the module doc).
    fn decode_block(&mut self, from: u64, to: u64) -> Result<()> {
        let mut w = BitWriter::new(std::mem::take(&mut self.synth));
        let fed = match &self.stream {
            Some(s) => s.magic_fed,
            None => {
                w.out.extend_from_slice(b"BZh9");
                0
            }
        };
        let mut at = from + u64::from(fed);
        while at < to {
            let k = (to - at).min(32) as u32;
            w.push(self.bits(at, k), k);
            at += u64::from(k);
        }
        let pad = (8 - w.n) % 8;
        w.push(BLOCK_MAGIC >> (48 - pad), pad);
        self.synth = w.finish();
        self.out.clear();
        self.at = 0;
        let stream = self.stream.get_or_insert_with(|| Stream {
            dec: bzip2::Decompress::new(false),
            magic_fed: 0,
        });
        stream.magic_fed = pad;
        let drained = drain(&mut stream.dec, &self.synth, &mut self.out);
        drained.map_err(|e| {
            self.stream = None;
            FormatError::Decompress {
                path: self.path.clone(),
                codec: "bzip2",
                place: format!("in the block at offset {} (bit {})", from / 8, from % 8),
                detail: e,
            }
        })
    }

    /// `k <= 32` bits at absolute bit `at`, which must be read.
    fn bits(&self, at: u64, k: u32) -> u64 {
        let i = (at / 8 - self.base) as usize;
        let mut w = [0u8; 8];
        let have = self.buf.len().saturating_sub(i).min(8);
        w[..have].copy_from_slice(&self.buf[i..i + have]);
        let v = u64::from_be_bytes(w);
        (v << (at % 8)) >> (64 - k)
    }

    /// Forgets the bytes before the one holding bit `bit`.
    fn drop_before(&mut self, bit: u64) {
        let n = (bit / 8 - self.base) as usize;
        if n > 0 {
            self.buf.drain(..n);
            self.base += n as u64;
        }
    }

    /// The first block magic at or after bit `from`.
    fn find_block(&mut self, from: u64) -> Result<Option<u64>> {
        let mut from = from;
        loop {
            match self.find(from)? {
                Some((b, Mark::Block)) => return Ok(Some(b)),
                Some((e, Mark::End)) => from = e + 48,
                None => return Ok(None),
            }
        }
    }

    /// The first block or end-of-stream magic wholly in the file at or
    /// after bit `from`.
    fn find(&mut self, from: u64) -> Result<Option<(u64, Mark)>> {
        let mut i = (from / 8).saturating_sub(self.base) as usize;
        loop {
            while i + 8 <= self.buf.len() {
                if !may_start(&self.buf, i) {
                    i += 1;
                    continue;
                }
                let w = u64::from_be_bytes(self.buf[i..i + 8].try_into().expect("8 bytes"));
                for s in 0..8u32 {
                    let bit = (self.base + i as u64) * 8 + u64::from(s);
                    let v = (w >> (16 - s)) & MASK48;
                    if bit >= from && (v == BLOCK_MAGIC || v == EOS_MAGIC) {
                        let mark = if v == BLOCK_MAGIC {
                            Mark::Block
                        } else {
                            Mark::End
                        };
                        return Ok(Some((bit, mark)));
                    }
                }
                i += 1;
            }
            if !self.fill()? {
                return Ok(self.find_tail(i, from));
            }
        }
    }

    /// A magic in the last 7 bytes of the file.
    fn find_tail(&self, i: usize, from: u64) -> Option<(u64, Mark)> {
        let total = self.buf.len() as u64 * 8;
        for j in i..self.buf.len() {
            for s in 0..8u64 {
                let bit = (self.base + j as u64) * 8 + s;
                let rel = bit - self.base * 8;
                if bit < from || rel + 48 > total {
                    continue;
                }
                let v = (self.bits(bit, 24) << 24) | self.bits(bit + 24, 24);
                if v == BLOCK_MAGIC {
                    return Some((bit, Mark::Block));
                }
                if v == EOS_MAGIC {
                    return Some((bit, Mark::End));
                }
            }
        }
        None
    }

    /// Reads more of the file; false at its end.
    fn fill(&mut self) -> Result<bool> {
        if self.eof {
            return Ok(false);
        }
        let old = self.buf.len();
        self.buf.resize(old + READ_STEP, 0);
        let n = loop {
            match self.raw.read(&mut self.buf[old..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.buf.truncate(old);
                    return Err(FormatError::io("reading", &self.path, e));
                }
            }
        };
        self.buf.truncate(old + n);
        self.eof = n == 0;
        Ok(n > 0)
    }
}

/// Feeds all of `input` to `dec` and appends to `out` all it gives back
/// before it needs more; a stream that ends here is damaged (a reader's
/// stream has no end marker).
fn drain(
    dec: &mut bzip2::Decompress,
    input: &[u8],
    out: &mut Vec<u8>,
) -> std::result::Result<(), String> {
    let mut used = 0;
    loop {
        if out.capacity() - out.len() < OUT_STEP {
            out.reserve(OUT_STEP);
        }
        let (before_in, before_out) = (dec.total_in(), out.len());
        match dec.decompress_vec(&input[used..], out) {
            Ok(bzip2::Status::StreamEnd) => return Err("an end-of-stream marker".into()),
            Ok(_) => {}
            Err(e) => return Err(e.to_string()),
        }
        let took = (dec.total_in() - before_in) as usize;
        used += took;
        let gave = out.len() - before_out;
        if used == input.len() && gave == 0 {
            return Ok(());
        }
        if took == 0 && gave == 0 {
            return Err("the decoder takes no more of the block".into());
        }
    }
}

/// Room made for a block's text at a time.
const OUT_STEP: usize = 1 << 20;

/// Bits written most significant first.
struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl BitWriter {
    fn new(mut out: Vec<u8>) -> Self {
        out.clear();
        BitWriter { out, acc: 0, n: 0 }
    }

    /// Appends the low `k <= 32` bits of `v`.
    fn push(&mut self, v: u64, k: u32) {
        self.acc = (self.acc << k) | (v & ((1u64 << k) - 1));
        self.n += k;
        while self.n >= 8 {
            self.n -= 8;
            self.out.push((self.acc >> self.n) as u8);
        }
    }

    /// The bytes, the last one padded with zero bits.
    fn finish(mut self) -> Vec<u8> {
        if self.n > 0 {
            self.out.push((self.acc << (8 - self.n)) as u8);
        }
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn compress(data: &[u8], level: u32) -> Vec<u8> {
        let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::new(level));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// Lines as the split readers give them, every split of `size` bytes.
    fn lines(file: &[u8], size: u64) -> Result<Vec<Vec<u8>>> {
        let mut all = Vec::new();
        let mut start = 0;
        while start < file.len() as u64 {
            let end = (start + size).min(file.len() as u64);
            let raw = Box::new(std::io::Cursor::new(file[start as usize..].to_vec()));
            let mut r = Bz2Split::new(raw, Path::new("t.bz2"), start, end);
            let skip = r.skips_first()?;
            let mut text = Vec::new();
            let mut b = [0u8; 777];
            loop {
                let n = r.read(&mut b)?;
                if n == 0 {
                    break;
                }
                text.extend_from_slice(&b[..n]);
            }
            let mut text = &text[..];
            if skip {
                text = match memchr::memchr(b'\n', text) {
                    Some(i) => &text[i + 1..],
                    None => &[],
                };
            }
            all.extend(text.split(|&c| c == b'\n').map(<[u8]>::to_vec));
            if text.ends_with(b"\n") || text.is_empty() {
                all.pop();
            }
            start = end;
        }
        Ok(all)
    }

    fn sample() -> Vec<u8> {
        let mut x = 7u64;
        let mut t = Vec::new();
        for i in 0..6_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let n = (x >> 58) as usize;
            t.extend_from_slice(format!("{i} {}\n", "ab".repeat(n)).as_bytes());
        }
        t
    }

    #[test]
    fn every_line_is_read_once_whatever_the_split_size() {
        let text = sample();
        let want: Vec<Vec<u8>> = text.split(|&c| c == b'\n').map(<[u8]>::to_vec).collect();
        let want = &want[..want.len() - 1];
        // Level 1: 100 kB blocks, so several blocks.
        let file = [compress(&text, 1), compress(b"tail\nno newline", 1)].concat();
        let mut want = want.to_vec();
        want.push(b"tail".to_vec());
        want.push(b"no newline".to_vec());
        for size in [3000u64, 17_000, 100_000, file.len() as u64] {
            assert_eq!(lines(&file, size).unwrap(), want, "split size {size}");
        }
        // Streams of one small block each, read in splits of every size.
        let parts: [&[u8]; 4] = [b"a\nbb\ncc", b"c\n", b"no newline ", b"here\nend\n"];
        let file: Vec<u8> = parts.iter().flat_map(|p| compress(p, 1)).collect();
        let want: Vec<&[u8]> = vec![b"a", b"bb", b"ccc", b"no newline here", b"end"];
        for size in 1..=file.len() as u64 {
            assert_eq!(lines(&file, size).unwrap(), want, "split size {size}");
        }
    }

    #[test]
    fn the_prefilter_passes_either_magic_at_every_bit_offset() {
        for m in [BLOCK_MAGIC, EOS_MAGIC] {
            for s in 0..8 {
                let mut w = (m << (16 - s)).to_be_bytes();
                // The bits of the first byte before the magic: anything.
                w[0] |= !(0xffu8 >> s);
                assert!(may_start(&w, 0), "{m:x} at bit {s}");
            }
        }
        let passed = (0..=u16::MAX)
            .filter(|v| may_start(&[0, (v >> 8) as u8, *v as u8], 0))
            .count();
        assert!(passed <= 16, "{passed} of 65,536 pass");
    }

    #[test]
    fn damage_names_the_block() {
        let text = sample();
        let mut file = compress(&text, 1);
        let len = file.len();
        file[len / 2] ^= 0x10;
        let e = lines(&file, len as u64).unwrap_err().to_string();
        assert!(
            e.contains("bzip2") && e.contains("in the block at offset"),
            "{e}"
        );
        let cut = compress(&text, 1)[..len - 100].to_vec();
        let e = lines(&cut, len as u64).unwrap_err().to_string();
        assert!(e.contains("truncated at offset"), "{e}");
    }
}
