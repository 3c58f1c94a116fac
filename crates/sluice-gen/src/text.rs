//! Zipf-distributed word text.
//!
//! A vocabulary of distinct lowercase words is drawn from the seed; word
//! `r` (rank from 1) is chosen with probability proportional to `1 / r^s`.
//! Frequent words are short, as in natural text. Lines hold 4-16 words
//! separated by single spaces.

use std::path::Path;

use rand::distributions::Distribution;
use rand::{Rng, SeedableRng};
use rand_distr::WeightedAliasIndex;
use rand_pcg::Pcg64Mcg;

use crate::{part_seed, GenError, GenSummary};

/// Parameters of a text data set.
#[derive(Debug, Clone)]
pub struct TextSpec {
    /// Total bytes, about (the last line of each part may run over).
    pub size: u64,
    /// The seed.
    pub seed: u64,
    /// Distinct words in the vocabulary.
    pub vocabulary: usize,
    /// Zipf exponent.
    pub exponent: f64,
    /// Bytes per part file.
    pub part_size: u64,
    /// Threads to generate with.
    pub threads: usize,
}

impl Default for TextSpec {
    fn default() -> Self {
        TextSpec {
            size: 64 << 20,
            seed: 7,
            vocabulary: 100_000,
            exponent: 1.0,
            part_size: 32 << 20,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// A Zipf-weighted vocabulary, sampled in constant time with an alias
/// table.
#[derive(Debug, Clone)]
pub struct Vocabulary {
    words: Vec<Vec<u8>>,
    alias: WeightedAliasIndex<f64>,
}

impl Vocabulary {
    /// `n` distinct words drawn from `seed`, weighted `1 / rank^s`.
    pub fn new(n: usize, s: f64, seed: u64) -> Self {
        let mut rng = Pcg64Mcg::seed_from_u64(part_seed(seed, u64::MAX));
        let mut seen = std::collections::HashSet::with_capacity(n);
        let mut words = Vec::with_capacity(n);
        while words.len() < n.max(1) {
            let rank = words.len() + 1;
            let base = 1 + ((rank as f64).ln() * 0.8) as usize;
            let len = (base + rng.gen_range(0..3)).min(16);
            let w: Vec<u8> = (0..len).map(|_| b'a' + rng.gen_range(0..26u8)).collect();
            if seen.insert(w.clone()) {
                words.push(w);
            }
        }
        let weights = (1..=words.len())
            .map(|r| 1.0 / (r as f64).powf(s))
            .collect();
        let alias = WeightedAliasIndex::new(weights).expect("positive finite weights");
        Vocabulary { words, alias }
    }

    /// Draws one word.
    #[inline]
    pub fn sample(&self, rng: &mut impl Rng) -> &[u8] {
        &self.words[self.alias.sample(rng)]
    }
}

/// Writes `spec.size` bytes of text into `dir` as `part-NNNNN` files.
pub fn generate_text(
    spec: &TextSpec,
    dir: &Path,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<GenSummary, GenError> {
    let vocab = Vocabulary::new(spec.vocabulary, spec.exponent, spec.seed);
    let parts = spec.size.div_ceil(spec.part_size.max(1)).max(1);
    crate::generate_parts(parts, spec.threads, progress, &|p| {
        let size = spec.part_size.min(spec.size - p * spec.part_size);
        write_part(&vocab, spec.seed, p, size, dir)
    })
}

fn write_part(
    vocab: &Vocabulary,
    seed: u64,
    part: u64,
    size: u64,
    dir: &Path,
) -> Result<(u64, u64), GenError> {
    let (buf, lines) = text_part(vocab, seed, part, size);
    crate::write_file(&dir.join(format!("part-{part:05}")), &buf)?;
    Ok((buf.len() as u64, lines))
}

/// The bytes of text part `part` (about `size` bytes) and its line count.
pub fn text_part(vocab: &Vocabulary, seed: u64, part: u64, size: u64) -> (Vec<u8>, u64) {
    let mut rng = Pcg64Mcg::seed_from_u64(part_seed(seed, part));
    let mut buf = Vec::with_capacity(size as usize + 256);
    let mut lines = 0;
    while (buf.len() as u64) < size {
        let words = rng.gen_range(4..=16);
        for i in 0..words {
            if i > 0 {
                buf.push(b' ');
            }
            buf.extend_from_slice(vocab.sample(&mut rng));
        }
        buf.push(b'\n');
        lines += 1;
    }
    (buf, lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen(threads: usize) -> (Vec<u8>, GenSummary) {
        let d = tempfile::tempdir().unwrap();
        let spec = TextSpec {
            size: 300_000,
            part_size: 100_000,
            vocabulary: 1000,
            threads,
            ..TextSpec::default()
        };
        let sum = generate_text(&spec, d.path(), &|_| {}).unwrap();
        let mut all = Vec::new();
        for p in 0..3 {
            all.extend(std::fs::read(d.path().join(format!("part-{p:05}"))).unwrap());
        }
        (all, sum)
    }

    #[test]
    fn same_seed_same_bytes_whatever_the_threads() {
        let (a, sa) = gen(1);
        let (b, _) = gen(3);
        assert_eq!(a, b);
        assert_eq!(sa.files, 3);
        assert!(sa.bytes >= 300_000 && sa.bytes < 300_000 + 3 * 300);
    }

    #[test]
    fn words_follow_zipf() {
        let (text, _) = gen(2);
        let mut counts = std::collections::HashMap::new();
        for w in text
            .split(|&b| b == b' ' || b == b'\n')
            .filter(|w| !w.is_empty())
        {
            *counts.entry(w.to_vec()).or_insert(0u64) += 1;
        }
        let mut c: Vec<u64> = counts.into_values().collect();
        c.sort_unstable_by(|a, b| b.cmp(a));
        // Zipf with s = 1: the top word is about twice the second, ten times the tenth.
        let r2 = c[0] as f64 / c[1] as f64;
        let r10 = c[0] as f64 / c[9] as f64;
        assert!((1.6..2.5).contains(&r2), "{r2}");
        assert!((7.0..14.0).contains(&r10), "{r10}");
    }
}
