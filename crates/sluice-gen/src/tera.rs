//! TeraGen records, as the seed's benchmarks describe them: 100 bytes,
//!
//! ```text
//! key[10] rowid[10] filler[78] "\r\n"
//! ```
//!
//! `key` is 10 printable ASCII characters (32-126) drawn from the seed and
//! the row number, `rowid` the row number in 10 decimal digits, `filler` 78
//! upper-case letters cycling from the row number. Every record is a
//! function of the seed and its row alone.

use std::io::Write;
use std::path::Path;

use crate::{part_seed, GenError, GenSummary};

/// Bytes per record.
pub const TERA_RECORD: usize = 100;
/// Bytes of a record's key.
pub const TERA_KEY: usize = 10;

/// Writes record `row` to `out`.
pub fn tera_record(seed: u64, row: u64, out: &mut Vec<u8>) {
    let (a, b) = (part_seed(seed ^ 0x7465, row), part_seed(seed ^ 0x7261, row));
    for i in 0..TERA_KEY {
        let bits = if i < 6 {
            a >> (i * 10)
        } else {
            b >> ((i - 6) * 10)
        };
        out.push(32 + (bits % 95) as u8);
    }
    let _ = write!(out, "{:010}", row % 10_000_000_000);
    for i in 0..78u64 {
        out.push(b'A' + ((row + i) % 26) as u8);
    }
    out.extend_from_slice(b"\r\n");
}

/// Writes `rows` records into `dir` as `part-NNNNN` files of `rows_per_part`.
pub fn generate_tera(
    rows: u64,
    seed: u64,
    rows_per_part: u64,
    threads: usize,
    dir: &Path,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<GenSummary, GenError> {
    let per = rows_per_part.max(1);
    let parts = rows.div_ceil(per);
    crate::generate_parts(parts, threads, progress, &|p| {
        let range = p * per..((p + 1) * per).min(rows);
        let n = range.end - range.start;
        let buf = tera_part(seed, range);
        crate::write_file(&dir.join(format!("part-{p:05}")), &buf)?;
        Ok((buf.len() as u64, n))
    })
}

/// The bytes of records `rows`.
pub fn tera_part(seed: u64, rows: std::ops::Range<u64>) -> Vec<u8> {
    let mut buf = Vec::with_capacity((rows.end - rows.start) as usize * TERA_RECORD);
    rows.for_each(|r| tera_record(seed, r, &mut buf));
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_100_printable_bytes_and_deterministic() {
        let mut a = Vec::new();
        for r in 0..1000 {
            tera_record(9, r, &mut a);
        }
        assert_eq!(a.len(), 100_000);
        for rec in a.chunks(TERA_RECORD) {
            assert!(rec[..TERA_KEY].iter().all(|&c| (32..127).contains(&c)));
            assert_eq!(&rec[98..], b"\r\n");
        }
        assert_eq!(&a[110..120], b"0000000001");
        let d = tempfile::tempdir().unwrap();
        let s = generate_tera(1000, 9, 300, 3, d.path(), &|_| {}).unwrap();
        assert_eq!((s.files, s.records), (4, 1000));
        let mut b = Vec::new();
        for p in 0..4 {
            b.extend(std::fs::read(d.path().join(format!("part-{p:05}"))).unwrap());
        }
        assert_eq!(a, b);
    }
}
