//! A web graph for PageRank, as HiBench's generator makes one: pages with
//! power-law in-degrees.
//!
//! Format: one edge a line, `src TAB dst`, pages numbered `0..pages`,
//! lines in order of `src`. Page `p` links to nobody with probability
//! 1/10 (a dangling page); otherwise to 1 to 20 distinct other pages
//! (uniformly many), each drawn from a Zipf distribution of exponent 1
//! over the pages, so that a few pages are linked from many and most from
//! few. Every page's links are a function of the seed and the page alone.

use std::io::Write;
use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use rand_pcg::Pcg64;

use crate::{part_seed, GenError, GenSummary};

/// A web graph.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GraphSpec {
    pub pages: u64,
    pub seed: u64,
    pub pages_per_part: u64,
}

/// The edge lines of the pages in `range`, and how many edges.
pub fn graph_part(spec: &GraphSpec, range: std::ops::Range<u64>) -> (Vec<u8>, u64) {
    let mut out = Vec::new();
    let mut edges = 0;
    if spec.pages < 2 {
        return (out, 0);
    }
    let zipf = Zipf::new(spec.pages, 1.0).expect("at least two pages");
    let mut targets = Vec::new();
    for p in range {
        let mut rng = Pcg64::seed_from_u64(part_seed(spec.seed ^ 0x7067, p));
        if rng.gen_range(0..10) == 0 {
            continue;
        }
        let want = rng.gen_range(1..=20usize).min(spec.pages as usize - 1);
        targets.clear();
        // Zipf draws are 1-based ranks; a scramble of the rank spreads the
        // popular pages over the numbers.
        let mut tries = 0;
        while targets.len() < want && tries < 100 * want {
            tries += 1;
            let rank = zipf.sample(&mut rng) as u64 - 1;
            let dst = (rank.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ spec.seed) % spec.pages;
            if dst != p && !targets.contains(&dst) {
                targets.push(dst);
            }
        }
        targets.sort_unstable();
        for d in &targets {
            let _ = writeln!(out, "{p}\t{d}");
        }
        edges += targets.len() as u64;
    }
    (out, edges)
}

/// Writes the graph into `dir` as `part-NNNNN` files; records are edges.
pub fn generate_graph(
    spec: &GraphSpec,
    threads: usize,
    dir: &Path,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<GenSummary, GenError> {
    let per = spec.pages_per_part.max(1);
    let parts = spec.pages.div_ceil(per).max(1);
    crate::generate_parts(parts, threads, progress, &|p| {
        let range = p * per..((p + 1) * per).min(spec.pages);
        let (buf, edges) = graph_part(spec, range);
        crate::write_file(&dir.join(format!("part-{p:05}")), &buf)?;
        Ok((buf.len() as u64, edges))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_degrees_follow_a_power_law_and_parts_join_up() {
        let spec = GraphSpec {
            pages: 5000,
            seed: 4,
            pages_per_part: 2000,
        };
        let (all, n) = graph_part(&spec, 0..5000);
        let joined: Vec<u8> = [0..2000, 2000..4000, 4000..5000]
            .into_iter()
            .flat_map(|r| graph_part(&spec, r).0)
            .collect();
        assert_eq!(all, joined);
        let mut indeg = vec![0u64; 5000];
        let mut srcs = std::collections::BTreeSet::new();
        for line in String::from_utf8(all).unwrap().lines() {
            let (s, d) = line.split_once('\t').unwrap();
            let (s, d): (u64, u64) = (s.parse().unwrap(), d.parse().unwrap());
            assert_ne!(s, d);
            srcs.insert(s);
            indeg[d as usize] += 1;
        }
        assert_eq!(indeg.iter().sum::<u64>(), n);
        // About a tenth of the pages are dangling.
        let dangling = 5000 - srcs.len();
        assert!((300..700).contains(&dangling), "{dangling} dangling pages");
        // The most linked page has far more in-links than the median one.
        indeg.sort_unstable();
        assert!(
            indeg[4999] > 50 * indeg[2500].max(1),
            "{} vs {}",
            indeg[4999],
            indeg[2500]
        );
    }
}
