//! Sort of spill entries by partition and key prefix: one radix pass
//! into buckets, then a comparison sort of each bucket.
//!
//! A spill of millions of distinct keys spent most of its sort comparing
//! entries spread over tens of megabytes. One counting pass on (partition,
//! the prefix's top 16 significant bits) cuts them into buckets of a few
//! thousand, each sorted while it sits in cache.

/// An entry to sort: its partition, the key's sort prefix, and the slot it
/// refers to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SpillEntry {
    pub prefix: u64,
    pub part: u32,
    pub slot: u32,
}

/// Most buckets of the radix pass (its two tables of offsets take 2 MiB,
/// outside the budget's account); with more partitions than this allows,
/// the entries are sorted without it.
const MAX_BUCKETS: usize = 1 << 17;

/// Sorts `v` by (partition, prefix), using `scratch` (resized to `v`'s
/// length) as the second buffer.
pub(crate) fn sort(v: &mut Vec<SpillEntry>, scratch: &mut Vec<SpillEntry>) {
    let parts = v.iter().map(|e| e.part as usize + 1).max().unwrap_or(0);
    // About 16 entries a bucket, and not too many buckets.
    let per_part = MAX_BUCKETS
        .checked_div(parts)
        .map_or(0, |b| b.ilog2() as usize);
    let bits = 16usize
        .min(per_part)
        .min((v.len().max(1).ilog2() as usize).saturating_sub(4));
    if v.len() < 1 << 12 || bits < 4 {
        v.sort_unstable_by_key(|e| (e.part, e.prefix));
        return;
    }
    // The top `bits` of the prefix bits in use (a fingerprint uses 32).
    let used = 64 - v.iter().fold(0, |acc, e| acc | e.prefix).leading_zeros() as usize;
    let shift = used.saturating_sub(bits);
    let bucket = |e: &SpillEntry| ((e.part as usize) << bits) | (e.prefix >> shift) as usize;
    let mut start = vec![0usize; (parts << bits) + 1];
    for e in v.iter() {
        start[bucket(e) + 1] += 1;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    scratch.clear();
    scratch.resize(v.len(), SpillEntry::default());
    let mut next = start.clone();
    for e in v.iter() {
        let b = bucket(e);
        scratch[next[b]] = *e;
        next[b] += 1;
    }
    std::mem::swap(v, scratch);
    for w in start.windows(2) {
        if w[1] - w[0] > 1 {
            v[w[0]..w[1]].sort_unstable_by_key(|e| e.prefix);
        }
    }
}

/// Calls `f` on every run of two or more entries with equal (partition,
/// prefix) in sorted `v`, whose order the keys themselves must settle.
pub(crate) fn for_ties(v: &mut [SpillEntry], mut f: impl FnMut(&mut [SpillEntry])) {
    let mut start = 0;
    while start < v.len() {
        let (part, prefix) = (v[start].part, v[start].prefix);
        let len = v[start..]
            .iter()
            .take_while(|e| e.part == part && e.prefix == prefix)
            .count();
        if len > 1 {
            f(&mut v[start..start + len]);
        }
        start += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_as_a_comparison_sort_does() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut v: Vec<SpillEntry> = (0..10_000u32)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                SpillEntry {
                    prefix: if i % 3 == 0 { x & 0xffff } else { x },
                    part: (x >> 60) as u32 * 300,
                    slot: i,
                }
            })
            .collect();
        let mut want = v.clone();
        want.sort_by_key(|e| (e.part, e.prefix));
        sort(&mut v, &mut Vec::new());
        let key = |e: &SpillEntry| (e.part, e.prefix);
        assert_eq!(
            v.iter().map(key).collect::<Vec<_>>(),
            want.iter().map(key).collect::<Vec<_>>()
        );
        let mut slots: Vec<u32> = v.iter().map(|e| e.slot).collect();
        slots.sort_unstable();
        assert!(slots.iter().copied().eq(0..10_000), "every entry once");
    }
}
