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
/// table. The words live in one arena (a vocabulary of tens of millions
/// of words as one allocation each took gigabytes and most of a
/// generation's time).
#[derive(Debug, Clone)]
pub struct Vocabulary {
    /// Every word's bytes, one after another.
    bytes: Vec<u8>,
    /// Where each word starts in `bytes`, and one past the last word.
    starts: Vec<u32>,
    alias: WeightedAliasIndex<f64>,
}

impl Vocabulary {
    /// `n` distinct words drawn from `seed`, weighted `1 / rank^s`.
    pub fn new(n: usize, s: f64, seed: u64) -> Self {
        let mut rng = Pcg64Mcg::seed_from_u64(part_seed(seed, u64::MAX));
        let n = n.max(1);
        let mut v = Vocabulary {
            bytes: Vec::new(),
            starts: vec![0],
            alias: WeightedAliasIndex::new(vec![1.0]).expect("one weight"),
        };
        let mut seen = Distinct::with_capacity(n);
        let mut w = Vec::with_capacity(16);
        while v.len() < n {
            let rank = v.len() + 1;
            let base = 1 + ((rank as f64).ln() * 0.8) as usize;
            let len = (base + rng.gen_range(0..3)).min(16);
            w.clear();
            w.extend((0..len).map(|_| b'a' + rng.gen_range(0..26u8)));
            if seen.insert(&w, &v) {
                v.bytes.extend_from_slice(&w);
                let end = u32::try_from(v.bytes.len()).expect("a vocabulary under 4 GiB");
                v.starts.push(end);
            }
        }
        let weights = (1..=v.len()).map(|r| 1.0 / (r as f64).powf(s)).collect();
        v.alias = WeightedAliasIndex::new(weights).expect("positive finite weights");
        v
    }

    /// Words in the vocabulary.
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// Whether it has no words (never: it has at least one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn word(&self, i: usize) -> &[u8] {
        &self.bytes[self.starts[i] as usize..self.starts[i + 1] as usize]
    }

    /// Draws one word.
    #[inline]
    pub fn sample(&self, rng: &mut impl Rng) -> &[u8] {
        self.word(self.alias.sample(rng))
    }
}

/// The words a vocabulary has so far, by a 64-bit hash of each pointing
/// at its index; the rare word whose hash another word has goes to a set
/// of its own, so the test stays exact.
struct Distinct {
    by_hash: std::collections::HashMap<u64, u32>,
    clashes: std::collections::HashSet<Vec<u8>>,
}

impl Distinct {
    fn with_capacity(n: usize) -> Self {
        Distinct {
            by_hash: std::collections::HashMap::with_capacity(n),
            clashes: std::collections::HashSet::new(),
        }
    }

    /// Records `w` as the next word of `v`; false if `v` has it already.
    fn insert(&mut self, w: &[u8], v: &Vocabulary) -> bool {
        use std::collections::hash_map::Entry;
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let h = BuildHasherDefault::<DefaultHasher>::default().hash_one(w);
        match self.by_hash.entry(h) {
            Entry::Vacant(e) => {
                e.insert(v.len() as u32);
                true
            }
            Entry::Occupied(e) => v.word(*e.get() as usize) != w && self.clashes.insert(w.to_vec()),
        }
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
    fn a_vocabulary_has_n_distinct_words_fixed_by_its_seed() {
        let v = Vocabulary::new(50_000, 1.0, 9);
        assert_eq!(v.len(), 50_000);
        let words: std::collections::HashSet<&[u8]> = (0..v.len()).map(|i| v.word(i)).collect();
        assert_eq!(words.len(), 50_000);
        assert!(words.iter().all(|w| !w.is_empty() && w.len() <= 16));
        let again = Vocabulary::new(50_000, 1.0, 9);
        assert!((0..v.len()).all(|i| v.word(i) == again.word(i)));
        assert_ne!(Vocabulary::new(50_000, 1.0, 10).word(0), v.word(0));
        assert_eq!(Vocabulary::new(0, 1.0, 9).len(), 1, "never empty");
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
