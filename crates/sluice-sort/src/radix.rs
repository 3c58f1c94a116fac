//! Sort of spill entries by partition and key prefix: radix passes over
//! the partition and the prefix's top bits, then a comparison sort of each
//! run the passes left equal.
//!
//! A spill of millions of distinct keys spent most of its sort comparing
//! entries spread over tens of megabytes; the radix passes read and write
//! the entries in order, and leave runs of a few entries to compare.
//!
//! [`sort_in_place`] is a most-significant-digit radix sort with no
//! second buffer: both collectors' spills sort their entries with it (the
//! sort collector's 32-byte index entries, where a buffer as large as the
//! index would take a quarter of the memory its records have; the hash
//! collector's 16-byte entries, whose second buffer had counted against
//! its table's share of the budget).

/// What the radix passes order by: a partition, then a key prefix.
pub(crate) trait Keyed: Copy {
    /// The partition.
    fn part(&self) -> u32;
    /// The key's sort prefix.
    fn prefix(&self) -> u64;
}

/// An entry to sort: its partition, the key's sort prefix, and the slot it
/// refers to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SpillEntry {
    pub prefix: u64,
    pub part: u32,
    pub slot: u32,
}

impl Keyed for SpillEntry {
    #[inline]
    fn part(&self) -> u32 {
        self.part
    }
    #[inline]
    fn prefix(&self) -> u64 {
        self.prefix
    }
}

/// Bits of one radix pass: 256 buckets, whose write positions stay in L1.
const DIGIT: usize = 8;

/// Below this many entries a comparison sort is as quick.
const SMALL: usize = 1 << 12;

/// Buckets of [`sort_in_place`] below this many entries are sorted by
/// comparison; larger ones take another pass (a pass costs two reads of
/// the bucket, a comparison sort a dozen comparisons an entry).
const FLAG_LEAF: usize = 64;

/// What the radix key is made of: the largest partition and the prefix
/// bits in use (all prefixes or-ed), gathered as entries are added (a
/// pass over the index to find them was a tenth of a spill's sort).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct KeyBits {
    max_part: u32,
    any: u64,
}

impl KeyBits {
    /// No entries'.
    pub const NONE: KeyBits = KeyBits {
        max_part: 0,
        any: 0,
    };

    /// Counts an entry's partition and prefix in.
    #[inline]
    pub fn add(&mut self, part: u32, prefix: u64) {
        self.max_part = self.max_part.max(part);
        self.any |= prefix;
    }

    /// The key bits of `v`'s entries.
    pub fn of<T: Keyed>(v: &[T]) -> KeyBits {
        let mut k = KeyBits::default();
        for e in v {
            k.add(e.part(), e.prefix());
        }
        k
    }
}

/// The radix key, the partition's bits above as many of the prefix's top
/// bits in use as fit in 64, and its bits, for entries of `bits`.
fn key_of<T: Keyed>(bits: KeyBits) -> (usize, impl Fn(&T) -> u64) {
    let KeyBits { max_part, any } = bits;
    let part_bits = (32 - max_part.leading_zeros()) as usize;
    let used = (64 - any.leading_zeros()) as usize;
    let bits = used.min(64 - part_bits);
    let shift = used - bits;
    let key = move |e: &T| {
        let top = e.prefix().checked_shr(shift as u32).unwrap_or(0);
        u64::from(e.part()).checked_shl(bits as u32).unwrap_or(0) | top
    };
    (part_bits + bits, key)
}

/// Sorts `v` by (partition, prefix) in place: a most-significant-digit
/// radix sort (American flag sort: each pass counts one 8-bit digit, then
/// swaps every entry into its bucket in place) over the partition and as
/// many of the prefix's top bits as fit in 64, recursing only into buckets
/// of [`FLAG_LEAF`] entries or more; smaller buckets, and those left when
/// the key's digits run out, are sorted by comparison. Not stable.
pub(crate) fn sort_in_place<T: Keyed>(v: &mut [T]) {
    if v.len() < SMALL {
        v.sort_unstable_by_key(|e| (e.part(), e.prefix()));
        return;
    }
    let (bits, key) = key_of(KeyBits::of(v));
    flag_sort(v, &key, bits.div_ceil(DIGIT));
}

/// Bits of one pass of [`sort_with_scratch`]: 2048 buckets, whose counts
/// and write positions stay in L1.
const LSD_DIGIT: usize = 11;
/// Keys of at most this many bits (three passes) are sorted by
/// [`sort_with_scratch`]'s passes; longer ones in place, whose passes stop
/// at small buckets.
const LSD_MAX_BITS: usize = 3 * LSD_DIGIT;

/// Sorts `v` by (partition, prefix) as [`sort_in_place`] does, but with a
/// buffer as large as `v` if `scratch_room` entries fit: when the
/// partition and the prefix's bits in use are at most [`LSD_MAX_BITS`]
/// (small integer keys, as PageRank's page numbers), a least-significant
/// digit radix sort, each pass reading the entries in order and writing
/// each to its bucket's next place. It took half the time of the in-place
/// sort on a spill of 170,000 entries with 20-bit keys: the in-place
/// passes move each entry along a cycle of places all over the index,
/// and leave buckets of a few dozen entries to compare. `scratch` keeps
/// its memory for the next call; `key_bits` are those of `v`'s entries.
/// Stable.
pub(crate) fn sort_with_scratch<T: Keyed + Default>(
    v: &mut [T],
    key_bits: KeyBits,
    scratch: &mut Vec<T>,
    scratch_room: usize,
) {
    if v.len() < SMALL {
        v.sort_by_key(|e| (e.part(), e.prefix()));
        return;
    }
    let (bits, key) = key_of(key_bits);
    if bits > LSD_MAX_BITS || v.len() > scratch_room {
        flag_sort(v, &key, bits.div_ceil(DIGIT));
        return;
    }
    // The key holds every bit in use, so the passes order entries fully.
    let passes = bits.div_ceil(LSD_DIGIT).max(1);
    let width = bits.div_ceil(passes);
    let mask = (1u64 << width) - 1;
    let mut counts = vec![[0usize; 1 << LSD_DIGIT]; passes];
    for e in v.iter() {
        let k = key(e);
        for (p, c) in counts.iter_mut().enumerate() {
            c[((k >> (p * width)) & mask) as usize] += 1;
        }
    }
    // Every place is written before it is read: only new places need a
    // value (clearing first would write the whole buffer every spill).
    scratch.resize(v.len(), T::default());
    let mut in_scratch = false;
    for (p, c) in counts.iter_mut().enumerate() {
        if c.contains(&v.len()) {
            continue; // every entry has this digit
        }
        let mut sum = 0;
        for n in c.iter_mut() {
            (*n, sum) = (sum, sum + *n);
        }
        let (from, to): (&[T], &mut [T]) = if in_scratch {
            (&scratch[..], &mut v[..])
        } else {
            (&v[..], &mut scratch[..])
        };
        for e in from {
            let d = ((key(e) >> (p * width)) & mask) as usize;
            to[c[d]] = *e;
            c[d] += 1;
        }
        in_scratch = !in_scratch;
    }
    if in_scratch {
        v.copy_from_slice(scratch);
    }
}

/// One pass of [`sort_in_place`] over the digit below `digits` (counted
/// from the key's low end), then the buckets.
fn flag_sort<T: Keyed>(v: &mut [T], key: &impl Fn(&T) -> u64, digits: usize) {
    if digits == 0 || v.len() < FLAG_LEAF {
        v.sort_unstable_by_key(|e| (e.part(), e.prefix()));
        return;
    }
    let shift = (digits - 1) * DIGIT;
    let digit = |e: &T| (key(e) >> shift) as usize & ((1 << DIGIT) - 1);
    let mut counts = [0usize; 1 << DIGIT];
    for e in v.iter() {
        counts[digit(e)] += 1;
    }
    let mut starts = [0usize; 1 << DIGIT];
    let mut sum = 0;
    for (b, c) in counts.iter().enumerate() {
        starts[b] = sum;
        sum += c;
    }
    // `next[b]`: the first place in bucket b not yet holding an entry of
    // its own. An entry met out of place is carried along its cycle: put
    // where its bucket's next place is, taking the entry found there on,
    // until one belongs where the cycle began (each entry written once).
    let mut next = starts;
    for b in 0..1 << DIGIT {
        let end = starts[b] + counts[b];
        while next[b] < end {
            let mut e = v[next[b]];
            let mut d = digit(&e);
            while d != b {
                let at = next[d];
                next[d] += 1;
                e = std::mem::replace(&mut v[at], e);
                d = digit(&e);
            }
            v[next[b]] = e;
            next[b] += 1;
        }
    }
    for b in 0..1 << DIGIT {
        let bucket = &mut v[starts[b]..starts[b] + counts[b]];
        if bucket.len() > 1 {
            flag_sort(bucket, key, digits - 1);
        }
    }
}

/// Calls `f` on every run of two or more entries with equal (partition,
/// prefix) in sorted `v`, whose order the keys themselves must settle.
pub(crate) fn for_ties<T: Keyed>(v: &mut [T], mut f: impl FnMut(&mut [T])) {
    let mut start = 0;
    while start < v.len() {
        let (part, prefix) = (v[start].part(), v[start].prefix());
        let len = v[start..]
            .iter()
            .take_while(|e| e.part() == part && e.prefix() == prefix)
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

    /// A xorshift generator from `x`.
    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn sorts_as_a_comparison_sort_does() {
        let mut rand = xorshift(0x9e37_79b9_7f4a_7c15);
        let v: Vec<SpillEntry> = (0..10_000u32)
            .map(|i| {
                let x = rand();
                SpillEntry {
                    prefix: if i % 3 == 0 { x & 0xffff } else { x },
                    part: (x >> 60) as u32 * 300,
                    slot: i,
                }
            })
            .collect();
        let mut want = v.clone();
        want.sort_by_key(|e| (e.part, e.prefix));
        let key = |e: &SpillEntry| (e.part, e.prefix);
        let mut v = v.clone();
        sort_in_place(&mut v);
        assert_eq!(
            v.iter().map(key).collect::<Vec<_>>(),
            want.iter().map(key).collect::<Vec<_>>()
        );
        let mut slots: Vec<u32> = v.iter().map(|e| e.slot).collect();
        slots.sort_unstable();
        assert!(slots.iter().copied().eq(0..10_000), "every entry once");
    }

    /// Small integer keys, as PageRank's pages, take the passes with the
    /// second buffer: every bit count from one pass to three, a digit all
    /// entries share, and equal keys kept in their order (the sort is
    /// stable); without room, the sort in place gives the same order.
    #[test]
    fn small_keys_sort_with_a_second_buffer() {
        let mut rand = xorshift(0x0123_4567_89ab_cdef);
        let mut scratch = Vec::new();
        for bits in [1u32, 7, 11, 12, 19, 22, 23, 30, 32] {
            for parts in [1u64, 2, 5] {
                let v: Vec<SpillEntry> = (0..20_000u32)
                    .map(|slot| SpillEntry {
                        // Bit 1 is never set: a digit every entry shares.
                        prefix: (rand() >> (64 - bits)) & !2 | 1 << (bits - 1),
                        part: (rand() % parts) as u32,
                        slot,
                    })
                    .collect();
                let mut want = v.clone();
                want.sort_by_key(|e| (e.part, e.prefix));
                let mut w = v.clone();
                sort_with_scratch(&mut w, KeyBits::of(&v), &mut scratch, v.len());
                assert_eq!(w, want, "{bits} bits, {parts} partitions");
                let mut w = v.clone();
                sort_with_scratch(&mut w, KeyBits::of(&v), &mut scratch, v.len() - 1);
                let key = |e: &SpillEntry| (e.part, e.prefix);
                assert!(w.iter().map(key).eq(want.iter().map(key)), "in place");
            }
        }
    }

    /// Every shape of prefix the passes choose bits for: all equal, all
    /// zero, letters (few distinct high bytes), full 64-bit, and one
    /// partition or many.
    #[test]
    fn sort_orders_every_shape_of_prefix() {
        let mut rand = xorshift(0x2545_f491_4f6c_dd1d);
        let shapes: [&dyn Fn(u64) -> u64; 4] = [
            &|_| 42,
            &|_| 0,
            &|r| {
                u64::from_be_bytes(
                    (r.to_le_bytes()).map(|b| b"abcdefghijklmnopqrstuvwxyz"[b as usize % 26]),
                )
            },
            &|r| r,
        ];
        for (n, shape) in shapes.iter().enumerate() {
            for parts in [1u64, 3, 70_000] {
                for len in [100usize, 5_000, 40_000] {
                    let v: Vec<SpillEntry> = (0..len as u32)
                        .map(|slot| {
                            let r = rand();
                            SpillEntry {
                                prefix: shape(r) >> (r % 3 * 8),
                                part: (rand() % parts) as u32,
                                slot,
                            }
                        })
                        .collect();
                    let mut want = v.clone();
                    want.sort_by_key(|e| (e.part, e.prefix));
                    let mut w = v.clone();
                    sort_in_place(&mut w);
                    let key = |e: &SpillEntry| (e.part, e.prefix);
                    assert!(
                        w.iter().map(key).eq(want.iter().map(key)),
                        "in place: shape {n}, {parts} partitions, {len} entries"
                    );
                    let mut scratch = Vec::new();
                    for room in [0, len] {
                        let mut w = v.clone();
                        sort_with_scratch(&mut w, KeyBits::of(&v), &mut scratch, room);
                        assert!(
                            w.iter().map(key).eq(want.iter().map(key)),
                            "room {room}: shape {n}, {parts} partitions, {len} entries"
                        );
                    }
                }
            }
        }
    }
}
