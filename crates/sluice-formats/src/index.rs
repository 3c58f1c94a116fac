//! The range index (Jiang et al.'s): a data set sorted on a key, cut into
//! chunks of whole records, with each chunk's first and last key, so a job
//! with a key predicate reads only the chunks that can match.
//!
//! The index is the file `_index` in the data set's directory (names starting
//! with `_` are not input). Layout, integers little-endian:
//!
//! ```text
//! index   := magic:"SLIDX001" key_type:u8 field:u32 delimiter:u8
//!            files:u32 file{files} chunks:u64 chunk{chunks} crc:u32
//! file    := name_len:u16 name[name_len]            a data file in the same directory
//! chunk   := file:u32 offset:u64 len:u64 first_len:u32 first[first_len] last_len:u32 last[last_len]
//! crc     := CRC32C of every byte before it
//! ```
//!
//! Keys are stored normalized so that bytewise order is key order: text
//! keys as they are, integer keys as 8 bytes big-endian with the sign bit
//! flipped. Chunks are in key order across files; each chunk starts at a
//! line start and ends after a newline.
//!
//! Validated on read: magic, CRC (before anything is decoded), key type,
//! lengths against the bytes left, file numbers, chunk bounds against the
//! data files' sizes, first <= last within a chunk and chunks in key order.

use std::path::{Path, PathBuf};

use crate::input::{Codec, InputFile, Split};
use crate::{FormatError, Result};

const MAGIC: &[u8; 8] = b"SLIDX001";
/// The index file's name in the data set's directory.
pub const INDEX_FILE: &str = "_index";

/// How keys compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    /// Bytes, compared bytewise.
    Text,
    /// Decimal integers, compared numerically.
    Int,
}

impl KeyType {
    /// Normalizes a key field so bytewise order is key order; `None` if an
    /// integer key does not parse.
    pub fn normalize(self, field: &[u8]) -> Option<Vec<u8>> {
        match self {
            KeyType::Text => Some(field.to_vec()),
            KeyType::Int => crate::delimited::parse_i64(field).map(|v| Self::int_key(v).to_vec()),
        }
    }

    /// The normalized form of an integer key.
    pub fn int_key(v: i64) -> [u8; 8] {
        ((v as u64) ^ (1 << 63)).to_be_bytes()
    }
}

/// One chunk of whole records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Index into [`RangeIndex::files`].
    pub file: u32,
    /// Offset of its first byte.
    pub offset: u64,
    /// Its length.
    pub len: u64,
    /// Its first key (normalized).
    pub first: Vec<u8>,
    /// Its last key (normalized).
    pub last: Vec<u8>,
}

/// A loaded, validated range index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeIndex {
    /// Key type.
    pub key_type: KeyType,
    /// Key field number (from 0).
    pub field: u32,
    /// Field delimiter.
    pub delimiter: u8,
    /// Data file names, in the index's directory.
    pub files: Vec<String>,
    /// Chunks in key order.
    pub chunks: Vec<Chunk>,
}

impl RangeIndex {
    /// Serializes the index.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.push(u8::from(self.key_type == KeyType::Int));
        b.extend_from_slice(&self.field.to_le_bytes());
        b.push(self.delimiter);
        b.extend_from_slice(&(self.files.len() as u32).to_le_bytes());
        for f in &self.files {
            b.extend_from_slice(&(f.len() as u16).to_le_bytes());
            b.extend_from_slice(f.as_bytes());
        }
        b.extend_from_slice(&(self.chunks.len() as u64).to_le_bytes());
        for c in &self.chunks {
            b.extend_from_slice(&c.file.to_le_bytes());
            b.extend_from_slice(&c.offset.to_le_bytes());
            b.extend_from_slice(&c.len.to_le_bytes());
            for k in [&c.first, &c.last] {
                b.extend_from_slice(&(k.len() as u32).to_le_bytes());
                b.extend_from_slice(k);
            }
        }
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Writes the index into `dir`.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let path = dir.join(INDEX_FILE);
        std::fs::write(&path, self.encode()).map_err(|e| FormatError::io("writing", &path, e))
    }

    /// Loads and validates `dir/_index`.
    pub fn load(dir: &Path) -> Result<Self> {
        let path = dir.join(INDEX_FILE);
        let bytes = std::fs::read(&path).map_err(|e| FormatError::io("reading", &path, e))?;
        let idx = decode(&path, &bytes)?;
        idx.check_files(dir, &path)?;
        Ok(idx)
    }

    fn check_files(&self, dir: &Path, path: &Path) -> Result<()> {
        let mut sizes = Vec::with_capacity(self.files.len());
        for f in &self.files {
            let p = dir.join(f);
            let meta = std::fs::metadata(&p).map_err(|e| FormatError::io("reading", &p, e))?;
            sizes.push(meta.len());
        }
        for (i, c) in self.chunks.iter().enumerate() {
            let size = sizes[c.file as usize];
            if c.offset.checked_add(c.len).is_none_or(|end| end > size) {
                return Err(FormatError::corrupt(
                    path,
                    0,
                    format!(
                        "chunk {i} runs past the end of {}",
                        self.files[c.file as usize]
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Splits over the chunks whose key range meets `[lo, hi]` (normalized
    /// keys; `None` is unbounded), numbered from 0.
    pub fn splits(&self, dir: &Path, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<Vec<Split>> {
        let mut files = Vec::with_capacity(self.files.len());
        for f in &self.files {
            let p = dir.join(f);
            let len = std::fs::metadata(&p)
                .map_err(|e| FormatError::io("reading", &p, e))?
                .len();
            files.push(std::sync::Arc::new(InputFile {
                path: p,
                len,
                codec: Codec::None,
                checks: None,
                resident: None,
                remote: None,
                fill: None,
            }));
        }
        let meets = |c: &&Chunk| {
            lo.is_none_or(|l| c.last.as_slice() >= l) && hi.is_none_or(|h| c.first.as_slice() <= h)
        };
        Ok(self
            .chunks
            .iter()
            .filter(meets)
            .enumerate()
            .map(|(i, c)| Split {
                index: i,
                file: files[c.file as usize].clone(),
                start: c.offset,
                end: c.offset + c.len,
            })
            .collect())
    }
}

/// Reads fields off a byte slice, failing as corrupt when it runs out.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    path: &'a Path,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end =
            end.ok_or_else(|| FormatError::corrupt(self.path, self.at as u64, "index ends early"))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn key(&mut self) -> Result<Vec<u8>> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
}

fn decode(path: &Path, bytes: &[u8]) -> Result<RangeIndex> {
    if bytes.len() < MAGIC.len() + 4 || &bytes[..8] != MAGIC {
        return Err(FormatError::corrupt(
            path,
            0,
            "not a Sluice range index (bad magic)",
        ));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err(FormatError::corrupt(
            path,
            body.len() as u64,
            "index checksum mismatch",
        ));
    }
    let mut c = Cursor {
        bytes: body,
        at: 8,
        path,
    };
    let key_type = match c.u8()? {
        0 => KeyType::Text,
        1 => KeyType::Int,
        t => {
            return Err(FormatError::corrupt(
                path,
                8,
                format!("unknown key type {t}"),
            ))
        }
    };
    let field = c.u32()?;
    let delimiter = c.u8()?;
    let nfiles = c.u32()?;
    let mut files = Vec::new();
    for _ in 0..nfiles {
        let n = c.u16()? as usize;
        let name = String::from_utf8(c.take(n)?.to_vec())
            .map_err(|_| FormatError::corrupt(path, c.at as u64, "file name is not UTF-8"))?;
        files.push(name);
    }
    let nchunks = c.u64()?;
    let mut chunks: Vec<Chunk> = Vec::new();
    for i in 0..nchunks {
        let at = c.at as u64;
        let chunk = Chunk {
            file: c.u32()?,
            offset: c.u64()?,
            len: c.u64()?,
            first: c.key()?,
            last: c.key()?,
        };
        let ordered = chunks.last().is_none_or(|p| p.last <= chunk.first);
        if chunk.file >= nfiles || chunk.first > chunk.last || !ordered {
            return Err(FormatError::corrupt(
                path,
                at,
                format!("chunk {i} is out of range or out of order"),
            ));
        }
        chunks.push(chunk);
    }
    if c.at != body.len() {
        return Err(FormatError::corrupt(
            path,
            c.at as u64,
            "trailing bytes after the chunks",
        ));
    }
    Ok(RangeIndex {
        key_type,
        field,
        delimiter,
        files,
        chunks,
    })
}

/// Cuts a key-sorted file of lines into chunks of about `chunk_size`
/// bytes, calling `key(line)` for each line's normalized key.
pub fn chunk_file(
    path: &Path,
    file: u32,
    chunk_size: u64,
    key: &mut dyn FnMut(&[u8]) -> Option<Vec<u8>>,
) -> Result<Vec<Chunk>> {
    let bytes = std::fs::read(path).map_err(|e| FormatError::io("reading", path, e))?;
    let mut chunks = Vec::new();
    let mut start = 0usize;
    let mut first: Option<Vec<u8>> = None;
    let mut at = 0usize;
    while at < bytes.len() {
        let end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |i| at + i + 1);
        let line = bytes[at..end]
            .strip_suffix(b"\n")
            .unwrap_or(&bytes[at..end]);
        let k = key(line)
            .ok_or_else(|| FormatError::corrupt(path, at as u64, "line has no valid key"))?;
        if first.is_none() {
            first = Some(k.clone());
        }
        at = end;
        if (at - start) as u64 >= chunk_size || at == bytes.len() {
            chunks.push(Chunk {
                file,
                offset: start as u64,
                len: (at - start) as u64,
                first: first.take().expect("set above"),
                last: k,
            });
            start = at;
        }
    }
    Ok(chunks)
}

/// The directory of a data set given as a path (the path itself).
pub fn index_dir(input: &str) -> Option<PathBuf> {
    let p = PathBuf::from(input);
    p.join(INDEX_FILE).exists().then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(dir: &Path) -> RangeIndex {
        std::fs::write(dir.join("part-r-00000"), b"a|1\nb|2\nc|3\nd|4\n").unwrap();
        let mut key = |l: &[u8]| KeyType::Text.normalize(&l[..1]);
        let chunks = chunk_file(&dir.join("part-r-00000"), 0, 8, &mut key).unwrap();
        RangeIndex {
            key_type: KeyType::Text,
            field: 0,
            delimiter: b'|',
            files: vec!["part-r-00000".into()],
            chunks,
        }
    }

    #[test]
    fn chunks_prune_by_key_range_and_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let idx = sample(d.path());
        assert_eq!(idx.chunks.len(), 2);
        assert_eq!(
            (
                idx.chunks[0].first.as_slice(),
                idx.chunks[0].last.as_slice()
            ),
            (&b"a"[..], &b"b"[..])
        );
        idx.save(d.path()).unwrap();
        let loaded = RangeIndex::load(d.path()).unwrap();
        assert_eq!(loaded, idx);
        let s = loaded.splits(d.path(), Some(b"c"), Some(b"c")).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].start, s[0].end, s[0].index), (8, 16, 0));
        assert_eq!(loaded.splits(d.path(), None, None).unwrap().len(), 2);
        assert!(loaded
            .splits(d.path(), Some(b"e"), None)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn damaged_indexes_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let idx = sample(d.path());
        idx.save(d.path()).unwrap();
        let path = d.path().join(INDEX_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[20] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(RangeIndex::load(d.path())
            .unwrap_err()
            .to_string()
            .contains("checksum mismatch"));
        std::fs::write(&path, b"garbage").unwrap();
        assert!(RangeIndex::load(d.path())
            .unwrap_err()
            .to_string()
            .contains("bad magic"));
        // A chunk past the end of its (since truncated) data file.
        idx.save(d.path()).unwrap();
        std::fs::write(d.path().join("part-r-00000"), b"a|1\n").unwrap();
        assert!(RangeIndex::load(d.path())
            .unwrap_err()
            .to_string()
            .contains("past the end"));
    }

    #[test]
    fn integer_keys_order_numerically() {
        let k = |v| KeyType::Int.normalize(v).unwrap();
        assert!(k(b"-5") < k(b"3") && k(b"3") < k(b"10") && k(b"10") < k(b"200"));
        assert_eq!(KeyType::Int.normalize(b"x"), None);
    }
}
