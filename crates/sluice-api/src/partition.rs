/// Assigns a key to one of `n` reduce partitions.
pub trait Partitioner: Send + Sync {
    /// The partition of `key`, in `0..n`.
    fn partition(&self, key: &[u8], n: u32) -> u32;

    /// Whether this is [`HashPartitioner`]: a collector may then compute
    /// [`HashPartitioner::of`] itself, without a virtual call per record.
    fn is_hash(&self) -> bool {
        false
    }
}

/// Hadoop's `WritableComparator.hashBytes`: `h = 31 * h + (signed byte)`
/// starting from 1, in 32-bit wrapping arithmetic. Four bytes per step
/// (`h * 31^4 + b0 * 31^3 + b1 * 31^2 + b2 * 31 + b3`), which gives the same
/// value with a quarter of the dependent multiplications.
#[inline]
pub fn hadoop_hash(key: &[u8]) -> i32 {
    const P2: i32 = 31 * 31;
    const P3: i32 = 31 * 31 * 31;
    const P4: i32 = 31 * 31 * 31 * 31;
    let s = |b: u8| b as i8 as i32;
    let mut chunks = key.chunks_exact(4);
    let mut h = 1i32;
    for c in &mut chunks {
        let part = s(c[0])
            .wrapping_mul(P3)
            .wrapping_add(s(c[1]).wrapping_mul(P2))
            .wrapping_add(s(c[2]).wrapping_mul(31))
            .wrapping_add(s(c[3]));
        h = h.wrapping_mul(P4).wrapping_add(part);
    }
    chunks
        .remainder()
        .iter()
        .fold(h, |h, &b| h.wrapping_mul(31).wrapping_add(s(b)))
}

/// The default partitioner: Hadoop's `HashPartitioner` over `Text` keys,
/// `(hash & i32::MAX) % n`, so that part files line up with Hadoop's for the
/// same number of reducers.
#[derive(Debug, Clone, Copy, Default)]
pub struct HashPartitioner;

impl HashPartitioner {
    /// The partition of `key` among `n`.
    #[inline]
    pub fn of(key: &[u8], n: u32) -> u32 {
        ((hadoop_hash(key) & i32::MAX) as u32) % n
    }
}

impl Partitioner for HashPartitioner {
    #[inline]
    fn partition(&self, key: &[u8], n: u32) -> u32 {
        Self::of(key, n)
    }

    fn is_hash(&self) -> bool {
        true
    }
}

/// A total-order partitioner: `n - 1` sorted split points; partition `i`
/// holds keys `k` with `split[i-1] <= k < split[i]` (bytewise).
#[derive(Debug, Clone, Default)]
pub struct RangePartitioner {
    splits: Vec<Vec<u8>>,
}

impl RangePartitioner {
    /// A partitioner over the given split points (sorted and deduplicated
    /// here).
    pub fn new(mut splits: Vec<Vec<u8>>) -> Self {
        splits.sort_unstable();
        splits.dedup();
        RangePartitioner { splits }
    }

    /// Chooses `n - 1` split points from a sample of keys, evenly spaced in
    /// the sample's sorted order (Hadoop's `InputSampler.writePartitionFile`).
    pub fn from_sample(mut sample: Vec<Vec<u8>>, n: u32) -> Self {
        sample.sort_unstable();
        let n = n.max(1) as usize;
        if sample.is_empty() || n == 1 {
            return RangePartitioner::default();
        }
        let step = sample.len() as f64 / n as f64;
        let splits = (1..n)
            .map(|i| sample[((i as f64 * step) as usize).min(sample.len() - 1)].clone())
            .collect();
        RangePartitioner::new(splits)
    }

    /// The split points.
    pub fn splits(&self) -> &[Vec<u8>] {
        &self.splits
    }
}

impl Partitioner for RangePartitioner {
    #[inline]
    fn partition(&self, key: &[u8], n: u32) -> u32 {
        let p = self.splits.partition_point(|s| s.as_slice() <= key) as u32;
        p.min(n.saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hadoop_hash_matches_java() {
        // Values computed with Java's Text("...").hashCode().
        assert_eq!(hadoop_hash(b""), 1);
        assert_eq!(hadoop_hash(b"a"), 31 + 97);
        assert_eq!(hadoop_hash(b"ab"), (31 * (31 + 97)) + 98);
        // A high byte counts as negative, as Java's signed byte does.
        assert_eq!(hadoop_hash(&[0xff]), 31 - 1);
    }

    #[test]
    fn the_unrolled_hash_equals_the_byte_loop() {
        let simple = |k: &[u8]| {
            k.iter().fold(1i32, |h, &b| {
                h.wrapping_mul(31).wrapping_add(b as i8 as i32)
            })
        };
        let mut x = 12345u64;
        for len in 0..64 {
            let key: Vec<u8> = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    (x >> 56) as u8
                })
                .collect();
            assert_eq!(hadoop_hash(&key), simple(&key), "length {len}");
        }
    }

    #[test]
    fn range_partitioner_orders_partitions() {
        let p = RangePartitioner::new(vec![b"g".to_vec(), b"p".to_vec()]);
        assert_eq!(p.partition(b"a", 3), 0);
        assert_eq!(p.partition(b"g", 3), 1);
        assert_eq!(p.partition(b"o", 3), 1);
        assert_eq!(p.partition(b"p", 3), 2);
        assert_eq!(p.partition(b"zzz", 3), 2);
    }

    #[test]
    fn sample_gives_n_minus_one_splits() {
        let sample: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i]).collect();
        let p = RangePartitioner::from_sample(sample, 4);
        assert_eq!(p.splits(), &[vec![25u8], vec![50], vec![75]]);
    }
}
