//! The spill file: sorted, partitioned map output ("a run").
//!
//! Layout, all integers little-endian:
//!
//! ```text
//! file     := segment{P} trailer
//! segment  := block*                      partition p's records, in key order
//! block    := len:u32 crc:u32 payload[len]
//!             crc = CRC32C(payload); len <= MAX_BLOCK
//! payload  := record+                     records never span blocks
//! record   := klen:varint vlen:varint key[klen] value[vlen]   (LEB128 varints)
//! trailer  := entry{P} P:u32 crc:u32 magic:"SLSPILL1"
//! entry    := offset:u64 len:u64 records:u64                  (segment p)
//!             crc = CRC32C(entry bytes ++ P bytes)
//! ```
//!
//! Segments are contiguous, start at offset 0 and end where the trailer
//! begins; an empty partition has `len = 0`. A block is cut once its payload
//! reaches the writer's target size (64 KiB by default); a record larger than
//! that gets a block of its own.
//!
//! Validation on read: the magic, the trailer CRC, that segments tile the
//! data area, each block's length against its segment and [`MAX_BLOCK`]
//! before allocating, each block's CRC before decoding, and each record's
//! lengths against its block.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{varint, FormatError, Result};

/// The trailer's magic number.
pub const MAGIC: &[u8; 8] = b"SLSPILL1";
/// Largest block payload accepted on read (1 GiB + headroom for a maximal
/// record's length prefixes).
pub const MAX_BLOCK: u32 = (1 << 30) + 32;
/// Default payload size at which a block is cut.
pub const DEFAULT_BLOCK: usize = 64 << 10;
const ENTRY: usize = 24;
const TRAILER_FIXED: usize = 16;

/// Where one partition's records are in a spill file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Segment {
    /// Offset of the first block.
    pub offset: u64,
    /// Bytes of blocks.
    pub len: u64,
    /// Records in the segment.
    pub records: u64,
}

/// Writes a spill file. Partitions must be appended in increasing order;
/// records within a partition in the job's key order.
#[derive(Debug)]
pub struct SpillWriter {
    file: std::io::BufWriter<File>,
    path: PathBuf,
    block: Vec<u8>,
    block_target: usize,
    pos: u64,
    segments: Vec<Segment>,
    current: usize,
}

impl SpillWriter {
    /// Creates `path` for a spill of `partitions` partitions.
    pub fn create(path: &Path, partitions: u32) -> Result<Self> {
        let file =
            File::create(path).map_err(|e| FormatError::io("creating spill file", path, e))?;
        Ok(SpillWriter {
            file: std::io::BufWriter::with_capacity(256 << 10, file),
            path: path.to_owned(),
            block: Vec::with_capacity(DEFAULT_BLOCK + 64),
            block_target: DEFAULT_BLOCK,
            pos: 0,
            segments: vec![Segment::default(); partitions.max(1) as usize],
            current: 0,
        })
    }

    /// Sets the payload size at which blocks are cut (tests use tiny blocks).
    pub fn with_block_size(mut self, bytes: usize) -> Self {
        self.block_target = bytes.max(1);
        self
    }

    /// Appends a record to partition `partition`.
    #[inline]
    pub fn append(&mut self, partition: u32, key: &[u8], value: &[u8]) -> Result<()> {
        let p = partition as usize;
        if p != self.current {
            self.switch_to(p)?;
        }
        let need = varint::len(key.len() as u64)
            + varint::len(value.len() as u64)
            + key.len()
            + value.len();
        if !self.block.is_empty() && self.block.len() + need > self.block_target {
            self.flush_block()?;
        }
        self.block.reserve(need);
        varint::put(&mut self.block, key.len() as u64);
        varint::put(&mut self.block, value.len() as u64);
        put_bytes(&mut self.block, key);
        put_bytes(&mut self.block, value);
        self.segments[p].records += 1;
        Ok(())
    }

    fn switch_to(&mut self, p: usize) -> Result<()> {
        assert!(
            p > self.current && p < self.segments.len(),
            "partitions out of order"
        );
        self.flush_block()?;
        self.segments[self.current].len = self.pos - self.segments[self.current].offset;
        for s in &mut self.segments[self.current + 1..=p] {
            s.offset = self.pos;
        }
        self.current = p;
        Ok(())
    }

    fn flush_block(&mut self) -> Result<()> {
        if self.block.is_empty() {
            return Ok(());
        }
        let crc = crc32c::crc32c(&self.block);
        let mut head = [0u8; 8];
        head[..4].copy_from_slice(&(self.block.len() as u32).to_le_bytes());
        head[4..].copy_from_slice(&crc.to_le_bytes());
        self.write(&head)?;
        let block = std::mem::take(&mut self.block);
        let r = self.write(&block);
        self.block = block;
        self.block.clear();
        r
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.file
            .write_all(bytes)
            .map_err(|e| FormatError::io("writing spill file", &self.path, e))?;
        self.pos += bytes.len() as u64;
        Ok(())
    }

    /// Writes the trailer, flushes, and returns the segments and file size.
    pub fn finish(mut self) -> Result<(Vec<Segment>, u64)> {
        let last = self.segments.len() - 1;
        if self.current < last {
            self.switch_to(last)?;
        }
        self.flush_block()?;
        self.segments[last].len = self.pos - self.segments[last].offset;
        let t = trailer(&self.segments);
        self.write(&t)?;
        self.file
            .flush()
            .map_err(|e| FormatError::io("writing spill file", &self.path, e))?;
        let segments = std::mem::take(&mut self.segments);
        Ok((segments, self.pos))
    }
}

/// The trailer for `segments`.
fn trailer(segments: &[Segment]) -> Vec<u8> {
    let mut t = Vec::with_capacity(segments.len() * ENTRY + TRAILER_FIXED);
    for s in segments {
        t.extend_from_slice(&s.offset.to_le_bytes());
        t.extend_from_slice(&s.len.to_le_bytes());
        t.extend_from_slice(&s.records.to_le_bytes());
    }
    t.extend_from_slice(&(segments.len() as u32).to_le_bytes());
    let crc = crc32c::crc32c(&t);
    t.extend_from_slice(&crc.to_le_bytes());
    t.extend_from_slice(MAGIC);
    t
}

/// Appends a one-partition trailer to `file`, whose `len` bytes are the
/// blocks of one segment of `records` records (a segment copied out of
/// another spill file, such as a fetched shuffle partition), making it a
/// spill file of one partition that [`SpillFile::open`] validates.
pub fn seal_segment(file: &mut File, len: u64, records: u64) -> std::io::Result<()> {
    let seg = Segment {
        offset: 0,
        len,
        records,
    };
    file.write_all(&trailer(&[seg]))
}

/// An open, validated spill file.
#[derive(Debug, Clone)]
pub struct SpillFile {
    file: Arc<File>,
    path: PathBuf,
    segments: Vec<Segment>,
}

impl SpillFile {
    /// Opens `path` and validates its trailer.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| FormatError::io("opening spill file", path, e))?;
        let size = file
            .metadata()
            .map_err(|e| FormatError::io("reading spill file", path, e))?
            .len();
        let segments = read_trailer(&file, path, size)?;
        Ok(SpillFile {
            file: Arc::new(file),
            path: path.to_owned(),
            segments,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every partition's segment.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// A reader over partition `p`'s records.
    pub fn reader(&self, p: u32) -> SegmentReader {
        let seg = self.segments.get(p as usize).copied().unwrap_or_default();
        SegmentReader {
            file: Arc::clone(&self.file),
            path: self.path.clone(),
            next_block: seg.offset,
            end: seg.offset + seg.len,
            block: Vec::new(),
            at: 0,
            key: 0..0,
            value: 0..0,
            block_offset: seg.offset,
        }
    }
}

fn read_exact_at(file: &File, path: &Path, buf: &mut [u8], at: u64) -> Result<()> {
    file.read_exact_at(buf, at).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            FormatError::truncated(path, at, "spill file ends early")
        } else {
            FormatError::io("reading spill file", path, e)
        }
    })
}

fn read_trailer(file: &File, path: &Path, size: u64) -> Result<Vec<Segment>> {
    if size < TRAILER_FIXED as u64 {
        return Err(FormatError::truncated(
            path,
            0,
            "shorter than a spill trailer",
        ));
    }
    let mut fixed = [0u8; TRAILER_FIXED];
    read_exact_at(file, path, &mut fixed, size - TRAILER_FIXED as u64)?;
    if &fixed[8..] != MAGIC {
        return Err(FormatError::corrupt(path, size - 8, "bad spill magic"));
    }
    let parts = u32::from_le_bytes(fixed[..4].try_into().unwrap()) as u64;
    let want_crc = u32::from_le_bytes(fixed[4..8].try_into().unwrap());
    let index_len = parts * ENTRY as u64;
    if parts == 0 || index_len + TRAILER_FIXED as u64 > size {
        return Err(FormatError::corrupt(
            path,
            size - 16,
            format!("bad partition count {parts}"),
        ));
    }
    let index_at = size - TRAILER_FIXED as u64 - index_len;
    let mut index = vec![0u8; index_len as usize + 4];
    read_exact_at(file, path, &mut index[..index_len as usize], index_at)?;
    index[index_len as usize..].copy_from_slice(&fixed[..4]);
    if crc32c::crc32c(&index) != want_crc {
        return Err(FormatError::corrupt(
            path,
            index_at,
            "spill trailer checksum mismatch",
        ));
    }
    let segments: Vec<Segment> = index[..index_len as usize]
        .chunks_exact(ENTRY)
        .map(|e| Segment {
            offset: u64::from_le_bytes(e[..8].try_into().unwrap()),
            len: u64::from_le_bytes(e[8..16].try_into().unwrap()),
            records: u64::from_le_bytes(e[16..].try_into().unwrap()),
        })
        .collect();
    check_tiling(path, &segments, index_at)?;
    Ok(segments)
}

fn check_tiling(path: &Path, segments: &[Segment], data_end: u64) -> Result<()> {
    let mut at = 0;
    for s in segments {
        if s.offset != at || s.offset.checked_add(s.len).is_none_or(|e| e > data_end) {
            return Err(FormatError::corrupt(
                path,
                data_end,
                "spill segments do not tile the file",
            ));
        }
        at = s.offset + s.len;
    }
    if at != data_end {
        return Err(FormatError::corrupt(
            path,
            data_end,
            "spill segments do not tile the file",
        ));
    }
    Ok(())
}

/// Reads one segment's records in order, one block in memory at a time.
#[derive(Debug)]
pub struct SegmentReader {
    file: Arc<File>,
    path: PathBuf,
    next_block: u64,
    end: u64,
    block: Vec<u8>,
    block_offset: u64,
    at: usize,
    key: std::ops::Range<usize>,
    value: std::ops::Range<usize>,
}

impl SegmentReader {
    /// Moves to the next record; `false` at the end of the segment.
    pub fn advance(&mut self) -> Result<bool> {
        if self.at >= self.block.len() {
            if self.next_block >= self.end {
                return Ok(false);
            }
            self.load_block()?;
        }
        let (klen, a) = self.varint()?;
        let (vlen, b) = self.varint_at(self.at + a)?;
        let start = self.at + a + b;
        let kend = start.checked_add(klen).filter(|&e| e <= self.block.len());
        let vend = kend
            .and_then(|k| k.checked_add(vlen))
            .filter(|&e| e <= self.block.len());
        let (Some(kend), Some(vend)) = (kend, vend) else {
            return Err(self.corrupt("record overruns its block"));
        };
        self.key = start..kend;
        self.value = kend..vend;
        self.at = vend;
        Ok(true)
    }

    /// The current record's key.
    #[inline]
    pub fn key(&self) -> &[u8] {
        &self.block[self.key.clone()]
    }

    /// The current record's value.
    #[inline]
    pub fn value(&self) -> &[u8] {
        &self.block[self.value.clone()]
    }

    fn varint(&self) -> Result<(usize, usize)> {
        self.varint_at(self.at)
    }

    fn varint_at(&self, at: usize) -> Result<(usize, usize)> {
        match varint::get(&self.block[at.min(self.block.len())..]) {
            Some((v, n)) if v <= u32::MAX as u64 => Ok((v as usize, n)),
            _ => Err(self.corrupt("bad record length")),
        }
    }

    fn corrupt(&self, detail: &str) -> FormatError {
        FormatError::corrupt(&self.path, self.block_offset, detail)
    }

    fn load_block(&mut self) -> Result<()> {
        let at = self.next_block;
        let mut head = [0u8; 8];
        read_exact_at(&self.file, &self.path, &mut head, at)?;
        let len = u32::from_le_bytes(head[..4].try_into().unwrap());
        let crc = u32::from_le_bytes(head[4..].try_into().unwrap());
        if len == 0 || len > MAX_BLOCK || at + 8 + len as u64 > self.end {
            return Err(FormatError::corrupt(
                &self.path,
                at,
                format!("bad block length {len}"),
            ));
        }
        self.block.resize(len as usize, 0);
        read_exact_at(&self.file, &self.path, &mut self.block, at + 8)?;
        let got = crc32c::crc32c(&self.block);
        if got != crc {
            let detail =
                format!("block checksum mismatch (stored {crc:#010x}, computed {got:#010x})");
            return Err(FormatError::corrupt(&self.path, at, detail));
        }
        self.block_offset = at;
        self.next_block = at + 8 + len as u64;
        self.at = 0;
        Ok(())
    }
}

/// Appends `b` to `out`. Spilled records are mostly short (8-byte keys,
/// 8- or 16-byte values), and a copy of a length the compiler knows is a
/// move or two where one of a run-time length calls `memcpy`: those calls
/// were 3% of PageRank's contribute job.
#[inline]
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    if let Ok(a) = <&[u8; 8]>::try_from(b) {
        out.extend_from_slice(a);
    } else if let Ok(a) = <&[u8; 16]>::try_from(b) {
        out.extend_from_slice(a);
    } else if let Ok(a) = <&[u8; 4]>::try_from(b) {
        out.extend_from_slice(a);
    } else {
        out.extend_from_slice(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_sample(path: &Path, block: usize) -> Vec<Segment> {
        let mut w = SpillWriter::create(path, 4).unwrap().with_block_size(block);
        for i in 0..50u32 {
            w.append(1, format!("k{i:03}").as_bytes(), &i.to_le_bytes())
                .unwrap();
        }
        w.append(3, b"last", b"").unwrap();
        w.finish().unwrap().0
    }

    fn read_all(f: &SpillFile, p: u32) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut r = f.reader(p);
        let mut out = Vec::new();
        while r.advance()? {
            out.push((r.key().to_vec(), r.value().to_vec()));
        }
        Ok(out)
    }

    #[test]
    fn round_trips_partitions_across_blocks() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s");
        let segs = write_sample(&p, 40);
        assert_eq!(
            segs.iter().map(|s| s.records).collect::<Vec<_>>(),
            [0, 50, 0, 1]
        );
        let f = SpillFile::open(&p).unwrap();
        assert!(read_all(&f, 0).unwrap().is_empty());
        let one = read_all(&f, 1).unwrap();
        assert_eq!(one.len(), 50);
        assert_eq!(one[7], (b"k007".to_vec(), 7u32.to_le_bytes().to_vec()));
        assert_eq!(read_all(&f, 3).unwrap(), [(b"last".to_vec(), vec![])]);
    }

    #[test]
    fn a_flipped_byte_is_caught_by_the_block_checksum() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s");
        write_sample(&p, 1 << 16);
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[20] ^= 0x40;
        std::fs::write(&p, &bytes).unwrap();
        let f = SpillFile::open(&p).unwrap();
        let err = read_all(&f, 1).unwrap_err().to_string();
        assert!(
            err.contains("checksum mismatch") && err.contains("offset 0"),
            "{err}"
        );
    }

    #[test]
    fn truncated_or_foreign_files_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s");
        write_sample(&p, 64);
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 3]).unwrap();
        assert!(SpillFile::open(&p)
            .unwrap_err()
            .to_string()
            .contains("bad spill magic"));
        std::fs::write(&p, b"short").unwrap();
        assert!(SpillFile::open(&p)
            .unwrap_err()
            .to_string()
            .contains("truncated"));
        let mut bad = bytes.clone();
        let n = bad.len();
        bad[n - 20] ^= 1; // inside the index entries
        std::fs::write(&p, &bad).unwrap();
        assert!(SpillFile::open(&p)
            .unwrap_err()
            .to_string()
            .contains("trailer checksum"));
    }
}
