//! The model: centres, points as text and as binary, and distances.

use std::io::Write;
use std::path::PathBuf;

use sluice_api::{Error, Result};

/// The centres of one iteration, by index.
#[derive(Debug, Clone, PartialEq)]
pub struct Centres {
    pub dims: usize,
    pub points: Vec<Vec<f64>>,
}

impl Centres {
    /// Centres from lines `index TAB coordinates`, the indices 0 to k-1 in
    /// any order, all of one dimension.
    pub fn parse(text: &[u8]) -> std::result::Result<Centres, String> {
        let mut by_index = Vec::new();
        for (n, line) in text.split(|&b| b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let bad = |why: &str| format!("centre line {}: {why}", n + 1);
            let tab = line
                .iter()
                .position(|&b| b == b'\t')
                .ok_or_else(|| bad("no tab"))?;
            let index: usize = std::str::from_utf8(&line[..tab])
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad("no index before the tab"))?;
            let mut p = Vec::new();
            parse_point(&line[tab + 1..], &mut p).map_err(|e| bad(&e))?;
            by_index.push((index, p));
        }
        by_index.sort_by_key(|(i, _)| *i);
        let dims = by_index.first().map_or(0, |(_, p)| p.len());
        for (n, (i, p)) in by_index.iter().enumerate() {
            if *i != n {
                return Err(format!(
                    "centre indices are not 0 to {}",
                    by_index.len() - 1
                ));
            }
            if p.len() != dims {
                return Err(format!(
                    "centre {i} has {} coordinates, centre 0 {dims}",
                    p.len()
                ));
            }
        }
        if by_index.is_empty() {
            return Err("no centres".into());
        }
        Ok(Centres {
            dims,
            points: by_index.into_iter().map(|(_, p)| p).collect(),
        })
    }

    /// Centres from the part files of a data set.
    pub fn read(files: &[PathBuf]) -> std::result::Result<Centres, String> {
        let mut text = Vec::new();
        for f in files {
            let bytes = std::fs::read(f).map_err(|e| format!("reading {}: {e}", f.display()))?;
            text.extend_from_slice(&bytes);
            if !text.ends_with(b"\n") {
                text.push(b'\n');
            }
        }
        Centres::parse(&text)
    }

    /// The index of the centre nearest to `p` (lowest index on a tie).
    pub fn nearest(&self, p: &[f64]) -> usize {
        self.nearest_with_distance(p).0
    }

    /// The nearest centre's index and its squared distance to `p`.
    pub fn nearest_with_distance(&self, p: &[f64]) -> (usize, f64) {
        let mut best = (0, f64::INFINITY);
        for (i, c) in self.points.iter().enumerate() {
            let d = distance2(c, p);
            if d < best.1 {
                best = (i, d);
            }
        }
        best
    }
}

/// The squared Euclidean distance.
pub(super) fn distance2(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// Parses a point: decimal numbers separated by spaces or tabs. Each
/// number is parsed in place by `fast-float2`'s partial parse
/// (Eisel-Lemire, as Rust's own parser), which stops at the separator: no
/// UTF-8 check and no split into strings first. The parse is most of what
/// an iteration's maps do.
pub fn parse_point(line: &[u8], out: &mut Vec<f64>) -> std::result::Result<(), String> {
    out.clear();
    let mut at = 0;
    while at < line.len() {
        match line[at] {
            b' ' | b'\t' => at += 1,
            _ => {
                // A number runs to the next separator or the end.
                let rest = &line[at..];
                let bad = || {
                    let end = rest
                        .iter()
                        .position(|&b| b == b' ' || b == b'\t')
                        .unwrap_or(rest.len());
                    format!(
                        "{:?} is not a number",
                        String::from_utf8_lossy(&rest[..end])
                    )
                };
                let (x, n): (f64, usize) = fast_float2::parse_partial(rest).map_err(|_| bad())?;
                if n == 0 || !matches!(rest.get(n), None | Some(b' ' | b'\t')) {
                    return Err(bad());
                }
                if !x.is_finite() {
                    return Err(format!(
                        "{:?} is not a finite number",
                        String::from_utf8_lossy(&rest[..n])
                    ));
                }
                out.push(x);
                at += n;
            }
        }
    }
    if out.is_empty() {
        return Err("no coordinates".into());
    }
    Ok(())
}

/// Writes `index TAB coordinates`.
pub(super) fn write_centre(index: usize, p: &[f64], out: &mut Vec<u8>) {
    out.clear();
    let _ = write!(out, "{index}\t");
    for (d, x) in p.iter().enumerate() {
        if d > 0 {
            out.push(b' ');
        }
        let _ = write!(out, "{x}");
    }
}

/// Decodes a binary point of `dims` coordinates.
pub(super) fn binary_point(record: &[u8], dims: usize, out: &mut Vec<f64>) -> Result<()> {
    if record.len() != 8 * dims {
        return Err(Error::user(format!(
            "a binary point of {} bytes; the centres have {dims} coordinates",
            record.len()
        )));
    }
    out.clear();
    out.extend(
        record
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes"))),
    );
    Ok(())
}

/// Parses a point of the centres' dimension.
pub(super) fn point_of(line: &[u8], dims: usize, out: &mut Vec<f64>) -> Result<()> {
    parse_point(line, out).map_err(Error::bad_record)?;
    if out.len() != dims {
        return Err(Error::bad_record(format!(
            "a point with {} coordinates; the centres have {dims}",
            out.len()
        )));
    }
    Ok(())
}

/// The seeded hash that picks the initial centres.
pub(super) fn pick_hash(seed: u64, point: &[u8]) -> u64 {
    // FNV-1a over the seed and the bytes, then a 64-bit finalizer: stable
    // across platforms and releases (std's hasher is not).
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for &b in point {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn centres_parse_in_any_order_and_refuse_gaps() {
        let c = Centres::parse(b"1\t3 4\n0\t1 2\n").unwrap();
        assert_eq!(c.points, vec![vec![1.0, 2.0], vec![3.0, 4.0]]);
        assert_eq!(c.nearest(&[2.9, 4.2]), 1);
        assert_eq!(c.nearest(&[2.0, 3.0]), 0, "a tie goes to the lower index");
        assert!(Centres::parse(b"0\t1 2\n2\t3 4\n")
            .unwrap_err()
            .contains("indices"));
        assert!(Centres::parse(b"0\t1 2\n1\t3\n")
            .unwrap_err()
            .contains("coordinates"));
    }
    #[test]
    fn points_must_be_numbers() {
        let mut p = Vec::new();
        parse_point(b"1.5 -2e3\t4", &mut p).unwrap();
        assert_eq!(p, [1.5, -2000.0, 4.0]);
        assert!(parse_point(b"1.5 x", &mut p)
            .unwrap_err()
            .contains("not a number"));
        assert!(parse_point(b"", &mut p).is_err());
        assert!(parse_point(b"NaN", &mut p).is_err());
    }
}
