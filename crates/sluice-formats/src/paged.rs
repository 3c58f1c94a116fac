//! The paged record file (seed 000's KeyValueSequenceFile): binary records
//! packed into fixed-size pages, so split boundaries fall only at page
//! multiples and a reader never needs to search for a record boundary.
//!
//! Layout, integers little-endian:
//!
//! ```text
//! file    := page*                      every page exactly `page_size` bytes
//! page    := magic:"SLPG" used:u32 records:u32 crc:u32 payload[used] zero padding
//! payload := (len:varint record[len])*  records never span pages
//! crc     := CRC32C(payload[..used])
//! ```
//!
//! `used <= page_size - 16` and the file length is a multiple of the page
//! size; both are validated on read, and the CRC before any record is
//! decoded. A record longer than a page's payload cannot be written.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{varint, FormatError, Result};

/// The page magic.
pub const PAGE_MAGIC: &[u8; 4] = b"SLPG";
/// Bytes of a page header.
pub const PAGE_HEADER: usize = 16;
/// The seed's page size.
pub const DEFAULT_PAGE: usize = 128 << 10;

/// Writes records into pages.
#[derive(Debug)]
pub struct PagedWriter {
    file: std::io::BufWriter<File>,
    path: PathBuf,
    page_size: usize,
    payload: Vec<u8>,
    records: u32,
    /// Pages written.
    pub pages: u64,
}

impl PagedWriter {
    /// Creates `path` with pages of `page_size` bytes (at least 64).
    pub fn create(path: &Path, page_size: usize) -> Result<Self> {
        let f = File::create(path).map_err(|e| FormatError::io("creating", path, e))?;
        Ok(PagedWriter {
            file: std::io::BufWriter::with_capacity(1 << 20, f),
            path: path.to_owned(),
            page_size: page_size.max(64),
            payload: Vec::with_capacity(page_size),
            records: 0,
            pages: 0,
        })
    }

    /// Appends one record.
    pub fn append(&mut self, record: &[u8]) -> Result<()> {
        let need = varint::len(record.len() as u64) + record.len();
        let room = self.page_size - PAGE_HEADER;
        if need > room {
            return Err(FormatError::RecordTooLarge {
                path: self.path.clone(),
                offset: self.pages * self.page_size as u64,
                limit: room,
            });
        }
        if self.payload.len() + need > room {
            self.flush_page()?;
        }
        varint::put(&mut self.payload, record.len() as u64);
        self.payload.extend_from_slice(record);
        self.records += 1;
        Ok(())
    }

    fn flush_page(&mut self) -> Result<()> {
        if self.records == 0 {
            return Ok(());
        }
        let mut head = [0u8; PAGE_HEADER];
        head[..4].copy_from_slice(PAGE_MAGIC);
        head[4..8].copy_from_slice(&(self.payload.len() as u32).to_le_bytes());
        head[8..12].copy_from_slice(&self.records.to_le_bytes());
        head[12..].copy_from_slice(&crc32c::crc32c(&self.payload).to_le_bytes());
        let pad = self.page_size - PAGE_HEADER - self.payload.len();
        let io = |e| FormatError::io("writing", &self.path, e);
        self.file.write_all(&head).map_err(io)?;
        self.file.write_all(&self.payload).map_err(io)?;
        self.file.write_all(&vec![0u8; pad]).map_err(io)?;
        self.payload.clear();
        self.records = 0;
        self.pages += 1;
        Ok(())
    }

    /// Writes the last page and flushes.
    pub fn finish(mut self) -> Result<u64> {
        self.flush_page()?;
        self.file
            .flush()
            .map_err(|e| FormatError::io("writing", &self.path, e))?;
        Ok(self.pages)
    }
}

/// Calls `f(offset, record)` for every record of one page (`page` is the
/// whole page as read from `path` at `at`).
pub fn page_records<E, F>(
    path: &Path,
    at: u64,
    page: &[u8],
    f: &mut F,
) -> std::result::Result<(), E>
where
    E: From<FormatError>,
    F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
{
    if page.len() < PAGE_HEADER || &page[..4] != PAGE_MAGIC {
        return Err(FormatError::corrupt(path, at, "bad page magic").into());
    }
    let word = |i: usize| u32::from_le_bytes(page[i..i + 4].try_into().expect("4 bytes")) as usize;
    let (used, records, crc) = (word(4), word(8), word(12) as u32);
    if used > page.len() - PAGE_HEADER {
        return Err(
            FormatError::corrupt(path, at, format!("page claims {used} payload bytes")).into(),
        );
    }
    let payload = &page[PAGE_HEADER..PAGE_HEADER + used];
    if crc32c::crc32c(payload) != crc {
        return Err(FormatError::corrupt(path, at, "page checksum mismatch").into());
    }
    let mut pos = 0;
    for _ in 0..records {
        let (len, n) = varint::get(&payload[pos..])
            .ok_or_else(|| FormatError::corrupt(path, at, "bad record length"))?;
        let start = pos + n;
        let end = start
            .checked_add(len as usize)
            .filter(|&e| e <= payload.len())
            .ok_or_else(|| FormatError::corrupt(path, at, "record overruns its page"))?;
        f(at + (PAGE_HEADER + start) as u64, &payload[start..end])?;
        pos = end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{plan_splits, resolve, RecordFormat};
    use crate::read::{read_split, ReadOptions};

    fn records(
        path: &Path,
        page: usize,
        split: u64,
    ) -> std::result::Result<Vec<Vec<u8>>, FormatError> {
        let files = resolve(path.to_str().unwrap()).unwrap();
        let mut out = Vec::new();
        for s in plan_splits(&files, split, RecordFormat::Paged(page)) {
            read_split::<FormatError, _>(
                &s,
                RecordFormat::Paged(page),
                &ReadOptions::default(),
                |_, r| {
                    out.push(r.to_vec());
                    Ok(())
                },
            )?;
        }
        Ok(out)
    }

    #[test]
    fn records_round_trip_across_pages_and_splits() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("data.pg");
        let mut w = PagedWriter::create(&p, 256).unwrap();
        let want: Vec<Vec<u8>> = (0..500u32)
            .map(|i| format!("record-{i}-{}", "x".repeat((i % 50) as usize)).into_bytes())
            .collect();
        for r in &want {
            w.append(r).unwrap();
        }
        let pages = w.finish().unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), pages * 256);
        for split in [256, 700, 1 << 20] {
            assert_eq!(records(&p, 256, split).unwrap(), want, "split {split}");
        }
        let mut w = PagedWriter::create(&d.path().join("big"), 64).unwrap();
        assert!(w
            .append(&[0u8; 100])
            .unwrap_err()
            .to_string()
            .contains("record size limit"));
    }

    #[test]
    fn damage_is_detected() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("data.pg");
        let mut w = PagedWriter::create(&p, 128).unwrap();
        for i in 0..20u8 {
            w.append(&[i; 10]).unwrap();
        }
        w.finish().unwrap();
        let good = std::fs::read(&p).unwrap();
        let mut bad = good.clone();
        bad[128 + 20] ^= 1;
        std::fs::write(&p, &bad).unwrap();
        assert!(
            records(&p, 128, 1 << 20)
                .unwrap_err()
                .to_string()
                .contains("offset 128: page checksum mismatch"),
            "crc"
        );
        std::fs::write(&p, &good[..good.len() - 7]).unwrap();
        assert!(records(&p, 128, 1 << 20)
            .unwrap_err()
            .to_string()
            .contains("truncated"));
    }
}
