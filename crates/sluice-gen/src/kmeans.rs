//! Points for k-means, as HiBench's k-means generator makes them: samples
//! of `clusters` Gaussian clusters in `dims` dimensions.
//!
//! Format: one point a line, its `dims` coordinates as decimal numbers
//! separated by single spaces (Rust's shortest round-trip form of an
//! `f64`). Cluster `c`'s centre has each coordinate drawn uniformly from
//! `[-100, 100)`; point `i` belongs to cluster `hash(i) mod clusters` and
//! is its centre plus independent normal noise of standard deviation 5 in
//! each coordinate. Every point is a function of the seed and its index.

use std::io::Write;
use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};
use rand_pcg::Pcg64;

use crate::{part_seed, GenError, GenSummary};

/// Standard deviation of the points around their centre.
pub const KMEANS_SIGMA: f64 = 5.0;

/// A k-means data set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KmeansSpec {
    pub points: u64,
    pub dims: usize,
    pub clusters: usize,
    pub seed: u64,
    pub points_per_part: u64,
}

/// The centres the points are drawn around.
pub fn kmeans_centres(seed: u64, clusters: usize, dims: usize) -> Vec<Vec<f64>> {
    let mut rng = Pcg64::seed_from_u64(part_seed(seed ^ 0x6b6d, u64::MAX));
    (0..clusters)
        .map(|_| (0..dims).map(|_| rng.gen_range(-100.0..100.0)).collect())
        .collect()
}

/// The lines of points `range`.
pub fn kmeans_part(
    spec: &KmeansSpec,
    centres: &[Vec<f64>],
    range: std::ops::Range<u64>,
) -> Vec<u8> {
    let noise = Normal::new(0.0, KMEANS_SIGMA).expect("a positive deviation");
    let mut out = Vec::with_capacity((range.end - range.start) as usize * spec.dims * 10);
    for i in range {
        let h = part_seed(spec.seed, i);
        let c = &centres[(h % spec.clusters.max(1) as u64) as usize];
        let mut rng = Pcg64::seed_from_u64(h);
        for (d, x) in c.iter().enumerate() {
            if d > 0 {
                out.push(b' ');
            }
            let _ = write!(out, "{}", x + noise.sample(&mut rng));
        }
        out.push(b'\n');
    }
    out
}

/// Writes the points into `dir` as `part-NNNNN` files.
pub fn generate_kmeans(
    spec: &KmeansSpec,
    threads: usize,
    dir: &Path,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<GenSummary, GenError> {
    let per = spec.points_per_part.max(1);
    let parts = spec.points.div_ceil(per).max(1);
    let centres = kmeans_centres(spec.seed, spec.clusters.max(1), spec.dims.max(1));
    crate::generate_parts(parts, threads, progress, &|p| {
        let range = p * per..((p + 1) * per).min(spec.points);
        let n = range.end - range.start;
        let buf = kmeans_part(spec, &centres, range);
        crate::write_file(&dir.join(format!("part-{p:05}")), &buf)?;
        Ok((buf.len() as u64, n))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_lie_around_their_centres_and_depend_on_the_seed_only() {
        let spec = KmeansSpec {
            points: 2000,
            dims: 3,
            clusters: 4,
            seed: 9,
            points_per_part: 700,
        };
        let centres = kmeans_centres(9, 4, 3);
        let all = kmeans_part(&spec, &centres, 0..2000);
        let parts: Vec<u8> = [0..700, 700..1400, 1400..2000]
            .into_iter()
            .flat_map(|r| kmeans_part(&spec, &centres, r))
            .collect();
        assert_eq!(all, parts);
        let text = String::from_utf8(all).unwrap();
        let mut near = 0;
        for line in text.lines() {
            let p: Vec<f64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
            assert_eq!(p.len(), 3);
            let d = centres
                .iter()
                .map(|c| c.iter().zip(&p).map(|(a, b)| (a - b).powi(2)).sum::<f64>())
                .fold(f64::MAX, f64::min);
            near += usize::from(d.sqrt() < 4.0 * KMEANS_SIGMA * 3f64.sqrt());
        }
        assert!(near >= 1990, "{near} of 2000 near a centre");
    }
}
