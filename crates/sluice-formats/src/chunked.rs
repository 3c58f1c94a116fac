//! Chunked checksums of a stored block, and a reader that verifies them as
//! it streams.
//!
//! A cluster block is a plain file of data (so it can be sent with
//! `sendfile` and read by any record reader) beside a small checksum file,
//! as an HDFS DataNode keeps a `.meta` file beside each block file. The
//! checksum file holds one CRC32C per chunk of [`CHUNK`] bytes; a reader
//! checks each chunk before handing out any of its bytes, so a damaged
//! block is caught at the first damaged chunk, not after a whole pass, and
//! no byte reaches a job unverified. The file also holds the CRC32C of the
//! whole block, which the catalog keeps too: checking it and the length
//! against the catalog shows the checksum file belongs to this block (a
//! checksum file of another block, or of an older version, does not
//! match), and its own CRC shows it is intact.
//!
//! Checksum file layout (all integers little-endian):
//!
//! ```text
//! offset  size  field
//! 0       4     magic "SLBM"
//! 4       1     version = 1
//! 5       3     reserved, zero
//! 8       4     chunk: bytes per chunk (the last chunk may be shorter)
//! 12      8     len: bytes of the block
//! 20      4     crc: CRC32C of the whole block
//! 24      4n    crc[i]: CRC32C of chunk i, n = ceil(len / chunk)
//! 24+4n   4     CRC32C of bytes 0 .. 24+4n (this file's own check)
//! ```

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

pub use crate::error::Damage;
use crate::{FormatError, Result};

/// Bytes per checksummed chunk: 64 KiB (HDFS checks 512 bytes per CRC; a
/// larger chunk costs nothing with CRC32C instructions and keeps the
/// checksum file at 1/16384 of the block).
pub const CHUNK: u32 = 64 << 10;
const MAGIC: &[u8; 4] = b"SLBM";
const VERSION: u8 = 1;
const HEADER: usize = 24;

/// The chunk CRCs of one block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkSums {
    /// Bytes per chunk.
    pub chunk: u32,
    /// Bytes of the block.
    pub len: u64,
    /// CRC32C of the whole block.
    pub crc: u32,
    /// CRC32C of each chunk, in order.
    pub crcs: Vec<u32>,
}

impl ChunkSums {
    /// The sums of `data`.
    pub fn of(data: &[u8]) -> Self {
        let mut h = ChunkHasher::new();
        h.update(data);
        h.finish()
    }

    /// The bytes of chunk `index`.
    pub fn chunk_len(&self, index: u64) -> u64 {
        let start = index * u64::from(self.chunk);
        self.len.saturating_sub(start).min(u64::from(self.chunk))
    }

    /// The checksum file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEADER + 4 * self.crcs.len() + 4);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&[VERSION, 0, 0, 0]);
        b.extend_from_slice(&self.chunk.to_le_bytes());
        b.extend_from_slice(&self.len.to_le_bytes());
        b.extend_from_slice(&self.crc.to_le_bytes());
        for c in &self.crcs {
            b.extend_from_slice(&c.to_le_bytes());
        }
        let own = crc32c::crc32c(&b);
        b.extend_from_slice(&own.to_le_bytes());
        b
    }

    /// Parses a checksum file, checking its magic, version, size and own CRC.
    pub fn decode(b: &[u8]) -> std::result::Result<Self, Damage> {
        let bad = |m: &str| Damage::Checksums(m.to_owned());
        if b.len() < HEADER + 4 || &b[..4] != MAGIC {
            return Err(bad("is not a Sluice checksum file"));
        }
        let (body, own) = b.split_at(b.len() - 4);
        if crc32c::crc32c(body) != u32::from_le_bytes(own.try_into().expect("4 bytes")) {
            return Err(bad("is damaged (its own checksum does not match)"));
        }
        if b[4] != VERSION {
            return Err(Damage::Checksums(format!("has unknown version {}", b[4])));
        }
        let chunk = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
        let len = u64::from_le_bytes(b[12..20].try_into().expect("8 bytes"));
        let crc = u32::from_le_bytes(b[20..24].try_into().expect("4 bytes"));
        if chunk == 0 {
            return Err(bad("has a chunk size of 0"));
        }
        let n = len.div_ceil(u64::from(chunk));
        if Some((body.len() - HEADER) as u64) != n.checked_mul(4) {
            return Err(bad("has the wrong number of chunks for its length"));
        }
        let crcs = body[HEADER..]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        Ok(ChunkSums {
            chunk,
            len,
            crc,
            crcs,
        })
    }

    /// Reads and parses the checksum file at `path`: the outer error is a
    /// failure to read it (the disk's, not the file's), the inner one what
    /// is wrong with the file (missing included).
    pub fn load(path: &Path) -> std::io::Result<std::result::Result<Self, Damage>> {
        match std::fs::read(path) {
            Ok(b) => Ok(Self::decode(&b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(Err(Damage::Checksums("is missing".into())))
            }
            Err(e) => Err(e),
        }
    }

    /// Checks that these sums describe a block of `len` bytes with CRC32C
    /// `crc` (the catalog's record of it).
    pub fn matches(&self, len: u64, crc: u32) -> std::result::Result<(), Damage> {
        if self.len != len {
            return Err(Damage::Checksums(format!(
                "describes {} bytes, the block has {len}",
                self.len
            )));
        }
        if self.crc != crc {
            return Err(Damage::Checksums(format!(
                "belongs to other data (block CRC {:08x}, the catalog's {crc:08x})",
                self.crc
            )));
        }
        Ok(())
    }

    /// Reads the whole block file at `path`, checking its length and every
    /// chunk.
    pub fn verify_file(&self, path: &Path) -> Result<()> {
        let mut r = CheckedReader::open(path, Arc::new(self.clone()))?;
        let mut buf = vec![0u8; 1 << 20];
        while r.read_into(&mut buf)? > 0 {}
        Ok(())
    }
}

/// Computes [`ChunkSums`] of bytes fed in pieces of any size.
#[derive(Debug)]
pub struct ChunkHasher {
    len: u64,
    whole: u32,
    cur: u32,
    cur_len: u32,
    crcs: Vec<u32>,
}

impl Default for ChunkHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkHasher {
    /// An empty hasher with chunks of [`CHUNK`] bytes.
    pub fn new() -> Self {
        ChunkHasher {
            len: 0,
            whole: 0,
            cur: 0,
            cur_len: 0,
            crcs: Vec::new(),
        }
    }

    /// Feeds `data`.
    pub fn update(&mut self, mut data: &[u8]) {
        self.len += data.len() as u64;
        // A second pass while the bytes are in cache costs less than
        // combining the chunk CRCs (crc32c_combine) at the end.
        self.whole = crc32c::crc32c_append(self.whole, data);
        while !data.is_empty() {
            let take = data.len().min((CHUNK - self.cur_len) as usize);
            self.cur = crc32c::crc32c_append(self.cur, &data[..take]);
            self.cur_len += take as u32;
            data = &data[take..];
            if self.cur_len == CHUNK {
                self.crcs.push(self.cur);
                self.cur = 0;
                self.cur_len = 0;
            }
        }
    }

    /// The sums of everything fed.
    pub fn finish(mut self) -> ChunkSums {
        if self.cur_len > 0 {
            self.crcs.push(self.cur);
        }
        ChunkSums {
            chunk: CHUNK,
            len: self.len,
            crc: self.whole,
            crcs: self.crcs,
        }
    }
}

/// Memory a stored block is read into by the map that reads it, when the
/// block is being admitted to a worker's cache: the map's reader reads
/// the block's chunks straight into it, verifies each there, and scans
/// its records in place as they arrive (no copy into a buffer of the
/// map's own), then hands the memory back whole ([`Fill::filled`]). A
/// reader that fails drops the memory instead, and nothing is cached.
pub trait Fill: Send + Sync {
    /// The block's memory, exactly its length, to read into; `None` once
    /// taken.
    fn take(&self) -> Option<Box<dyn FillMemory>>;

    /// Every byte of `memory` has been read and verified against its
    /// chunk's checksum.
    fn filled(&self, memory: Box<dyn FillMemory>);
}

/// The memory of a [`Fill`]: any owned, mutable run of bytes (a memory
/// mapping, a `Vec<u8>`).
pub trait FillMemory: Send {
    /// Its bytes.
    fn bytes(&self) -> &[u8];
    /// Its bytes, to read into.
    fn bytes_mut(&mut self) -> &mut [u8];
    /// Itself, for [`Fill::filled`] to take its own type back.
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any>;
}

impl<T: std::ops::DerefMut<Target = [u8]> + Send + 'static> FillMemory for T {
    fn bytes(&self) -> &[u8] {
        self
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

/// Reads a block file, handing out only bytes of chunks whose CRC has been
/// checked; fails with [`FormatError::Damaged`] at the first chunk that
/// does not match, or when the file is shorter or longer than the sums say.
pub struct CheckedReader {
    file: File,
    path: std::path::PathBuf,
    sums: Arc<ChunkSums>,
    /// Next chunk to read from the file.
    next: u64,
    /// A verified chunk being handed out in pieces: `buf[lo..hi]`.
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
}

impl fmt::Debug for CheckedReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckedReader")
            .field("path", &self.path)
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

impl CheckedReader {
    /// Opens the block at `path`, checking its length first.
    pub fn open(path: &Path, sums: Arc<ChunkSums>) -> Result<Self> {
        let damaged = |d: Damage| FormatError::Damaged {
            path: path.to_owned(),
            damage: d,
        };
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(damaged(Damage::Missing))
            }
            Err(e) => return Err(FormatError::io("opening", path, e)),
        };
        let found = file
            .metadata()
            .map_err(|e| FormatError::io("reading", path, e))?
            .len();
        if found != sums.len {
            return Err(damaged(Damage::Length {
                expected: sums.len,
                found,
            }));
        }
        Ok(CheckedReader {
            file,
            path: path.to_owned(),
            sums,
            next: 0,
            buf: Vec::new(),
            lo: 0,
            hi: 0,
        })
    }

    /// Reads verified bytes into `out`; 0 at the end of the block. Whole
    /// chunks go straight into `out` when it has room for them (no copy).
    pub fn read_into(&mut self, out: &mut [u8]) -> Result<usize> {
        if self.lo < self.hi {
            let n = out.len().min(self.hi - self.lo);
            out[..n].copy_from_slice(&self.buf[self.lo..self.lo + n]);
            self.lo += n;
            return Ok(n);
        }
        let chunks = self.sums.crcs.len() as u64;
        if self.next == chunks || out.is_empty() {
            return Ok(0);
        }
        let chunk = u64::from(self.sums.chunk);
        // As many whole chunks as fit in `out`, checked in place.
        let mut fit = 0u64;
        let mut bytes = 0usize;
        while self.next + fit < chunks {
            let n = self.sums.chunk_len(self.next + fit) as usize;
            if bytes + n > out.len() {
                break;
            }
            bytes += n;
            fit += 1;
        }
        if fit > 0 {
            self.fill(&mut out[..bytes])?;
            for i in 0..fit {
                let start = (i * chunk) as usize;
                let n = self.sums.chunk_len(self.next + i) as usize;
                self.check(self.next + i, &out[start..start + n])?;
            }
            self.next += fit;
            return Ok(bytes);
        }
        // `out` is smaller than a chunk: verify into our own buffer.
        let n = self.sums.chunk_len(self.next) as usize;
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(n, 0);
        self.fill(&mut buf)?;
        self.check(self.next, &buf)?;
        self.buf = buf;
        self.next += 1;
        self.lo = 0;
        self.hi = n;
        self.read_into(out)
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<()> {
        let mut got = 0;
        while got < buf.len() {
            match self.file.read(&mut buf[got..]) {
                Ok(0) => {
                    let at = self.next * u64::from(self.sums.chunk) + got as u64;
                    return Err(FormatError::Damaged {
                        path: self.path.clone(),
                        damage: Damage::Length {
                            expected: self.sums.len,
                            found: at,
                        },
                    });
                }
                Ok(k) => got += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(FormatError::io("reading", &self.path, e)),
            }
        }
        Ok(())
    }

    fn check(&self, index: u64, data: &[u8]) -> Result<()> {
        let found = crc32c::crc32c(data);
        let expected = self.sums.crcs[index as usize];
        if found == expected {
            return Ok(());
        }
        Err(FormatError::Damaged {
            path: self.path.clone(),
            damage: Damage::Chunk {
                index,
                offset: index * u64::from(self.sums.chunk),
                expected,
                found,
            },
        })
    }
}

/// Reads verified bytes; a damaged chunk's error is carried inside the
/// I/O error (`std::io::Error::other` of the [`FormatError`]), so a
/// reader of rows can hand the copy's damage on.
impl Read for CheckedReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        self.read_into(out).map_err(std::io::Error::other)
    }
}

/// Moves to any offset of the block: reading goes on from the chunk
/// holding it, which is verified whole before any of its bytes is handed
/// out, so a seek never lets an unchecked byte through.
impl std::io::Seek for CheckedReader {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        use std::io::SeekFrom;
        let target = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => self.sums.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.position().checked_add_signed(d),
        };
        let target = target.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the block")
        })?;
        let chunk = u64::from(self.sums.chunk);
        let index = (target / chunk).min(self.sums.crcs.len() as u64);
        self.file.seek(SeekFrom::Start(index * chunk))?;
        self.next = index;
        (self.lo, self.hi) = (0, 0);
        let mut skip = target.min(self.sums.len) - index * chunk;
        let mut sink = [0u8; 1];
        while skip > 0 {
            // The first read loads and checks the chunk; the rest are
            // copies out of it.
            if self.read_into(&mut sink).map_err(std::io::Error::other)? == 0 {
                break;
            }
            skip -= 1;
            let n = (self.hi - self.lo).min(skip as usize);
            self.lo += n;
            skip -= n as u64;
        }
        Ok(target)
    }
}

impl CheckedReader {
    /// The offset of the next byte handed out.
    fn position(&self) -> u64 {
        let chunk = u64::from(self.sums.chunk);
        if self.lo < self.hi {
            (self.next - 1) * chunk + self.lo as u64
        } else {
            (self.next * chunk).min(self.sums.len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 300) as u8).collect()
    }

    #[test]
    fn sums_combine_to_the_whole_crc_and_round_trip() {
        for n in [
            0,
            1,
            CHUNK as usize - 1,
            CHUNK as usize,
            3 * CHUNK as usize + 17,
        ] {
            let d = data(n);
            let s = ChunkSums::of(&d);
            assert_eq!(s.crc, crc32c::crc32c(&d), "{n}");
            // The chunks' CRCs combine to the whole one.
            let mut left = s.len;
            let combined = s.crcs.iter().fold(0, |acc, &c| {
                let k = left.min(u64::from(CHUNK));
                left -= k;
                crc32c::crc32c_combine(acc, c, k as usize)
            });
            assert_eq!(combined, s.crc, "{n}");
            assert_eq!(s.crcs.len() as u64, (n as u64).div_ceil(u64::from(CHUNK)));
            let mut h = ChunkHasher::new();
            for piece in d.chunks(1000) {
                h.update(piece);
            }
            assert_eq!(h.finish(), s);
            assert_eq!(ChunkSums::decode(&s.encode()).unwrap(), s);
            s.matches(n as u64, crc32c::crc32c(&d)).unwrap();
        }
    }

    #[test]
    fn a_damaged_checksum_file_is_refused() {
        let s = ChunkSums::of(&data(200_000));
        let good = s.encode();
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0x10;
            assert!(ChunkSums::decode(&b).is_err(), "byte {i}");
        }
        assert!(ChunkSums::decode(&good[..good.len() - 4]).is_err());
        let other = ChunkSums::of(&data(200_001));
        assert!(other.matches(200_000, s.crc).is_err());
        let same_len = ChunkSums::of(&vec![1u8; 200_000]);
        assert!(same_len.matches(200_000, s.crc).is_err());
    }

    fn read_all(path: &Path, s: &ChunkSums, piece: usize) -> Result<Vec<u8>> {
        read_through(CheckedReader::open(path, Arc::new(s.clone()))?, piece)
    }

    /// Everything `r` hands out, read `piece` bytes at a time.
    fn read_through(mut r: CheckedReader, piece: usize) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; piece];
        loop {
            let n = r.read_into(&mut buf)?;
            if n == 0 {
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    #[test]
    fn the_reader_hands_out_verified_bytes_and_names_the_damage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b");
        let d = data(5 * CHUNK as usize + 123);
        std::fs::write(&p, &d).unwrap();
        let s = ChunkSums::of(&d);
        for piece in [1, 4096, CHUNK as usize, 3 * CHUNK as usize + 5, 1 << 22] {
            assert_eq!(read_all(&p, &s, piece).unwrap(), d, "{piece}");
        }
        let mut bad = d.clone();
        bad[2 * CHUNK as usize + 9] ^= 1;
        std::fs::write(&p, &bad).unwrap();
        for piece in [100, 1 << 20] {
            match read_all(&p, &s, piece) {
                Err(FormatError::Damaged {
                    damage:
                        Damage::Chunk {
                            index: 2, offset, ..
                        },
                    ..
                }) => assert_eq!(offset, 2 * u64::from(CHUNK)),
                other => panic!("{other:?}"),
            }
        }
        std::fs::write(&p, &d[..1000]).unwrap();
        let e = read_all(&p, &s, 100).unwrap_err();
        assert!(e.to_string().contains("1000 bytes of"), "{e}");
        std::fs::remove_file(&p).unwrap();
        let e = read_all(&p, &s, 100).unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
    }
}
