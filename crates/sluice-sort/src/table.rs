//! The hash collector's table: open addressing with linear probing over
//! 32-byte slots, no separate control bytes.
//!
//! A lookup in a table of millions of keys is a cache miss, and with
//! hashbrown two (its control bytes, then the slot, on different pages).
//! Here the home slot is the only line a lookup usually touches, and its
//! address is known from the hash alone, so the collector prefetches it
//! several records before it needs it ([`Table::prefetch`]) and the misses
//! of those records overlap instead of following one another.

/// Keys up to this many bytes live inside their slot.
pub(crate) const INLINE_KEY: usize = 16;
/// Accumulators up to this many bytes live inside their slot.
pub(crate) const INLINE_VALUE: usize = 8;

/// A key of at most [`INLINE_KEY`] bytes zero-padded to 16, as a slot
/// holds it (a longer key gives zeros). Word-sized loads that may overlap
/// instead of a byte copy: the copy was a library call per record.
#[inline]
pub(crate) fn padded(key: &[u8]) -> [u8; INLINE_KEY] {
    let n = key.len();
    let word = |at: usize| u64::from_le_bytes(key[at..at + 8].try_into().expect("8 bytes"));
    let half = |at: usize| u32::from_le_bytes(key[at..at + 4].try_into().expect("4 bytes")) as u64;
    let (lo, hi) = match n {
        // The last word overlaps the first; shifted so each byte lands at
        // its own place after byte 8.
        8..=INLINE_KEY => (
            word(0),
            word(n - 8).checked_shr(8 * (16 - n) as u32).unwrap_or(0),
        ),
        4..=7 => (half(0) | half(n - 4) << (8 * (n - 4)), 0),
        1..=3 => {
            let b = |i: usize| (key[i] as u64) << (8 * i);
            (b(0) | b(n / 2) | b(n - 1), 0)
        }
        _ => (0, 0),
    };
    let mut k = [0u8; INLINE_KEY];
    k[..8].copy_from_slice(&lo.to_le_bytes());
    k[8..].copy_from_slice(&hi.to_le_bytes());
    k
}

/// The hash of a key of at most [`INLINE_KEY`] bytes from its padded form
/// and length: one folded multiply of its two words (foldhash's core step)
/// instead of a streaming hasher's length prefix and byte loop. The length
/// is added after the multiply (times an odd constant): keys that pad to
/// the same words then differ in every home bit from the lowest up, where
/// mixing it into the words could cancel a data byte.
#[inline]
pub(crate) fn short_hash(key: &[u8; INLINE_KEY], len: usize) -> u64 {
    let lo = u64::from_le_bytes(key[..8].try_into().expect("8 bytes"));
    let hi = u64::from_le_bytes(key[8..].try_into().expect("8 bytes"));
    folded_multiply(lo ^ A, hi ^ B).wrapping_add((len as u64).wrapping_mul(L))
}

const A: u64 = 0x243f_6a88_85a3_08d3;
const B: u64 = 0x1319_8a2e_0370_7344;
const C: u64 = 0x0827_efa9_8ec4_e6c8;
const L: u64 = 0xa409_3822_299f_31d1;

/// The 128-bit product of two words folded to 64 bits (foldhash's and
/// wyhash's mixing step).
#[inline]
fn folded_multiply(a: u64, b: u64) -> u64 {
    let p = (a as u128) * (b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

/// The hash of a key longer than [`INLINE_KEY`]: one folded multiply per
/// 16 bytes, the running hash folded into each, the last 16 bytes of the
/// key (which may overlap the previous ones) closing it.
#[inline]
pub(crate) fn long_hash(key: &[u8]) -> u64 {
    let n = key.len();
    debug_assert!(n > INLINE_KEY);
    let word = |at: usize| u64::from_le_bytes(key[at..at + 8].try_into().expect("8 bytes"));
    let mut h = (n as u64).wrapping_mul(L) ^ C;
    let mut at = 0;
    while at + 16 < n {
        h = folded_multiply(word(at) ^ h, word(at + 8) ^ B);
        at += 16;
    }
    folded_multiply(word(n - 16) ^ h, word(n - 8) ^ A)
}

/// Sluice's 64-bit key hash: what the hash collector's table uses, and
/// whose high 32 bits are the fingerprint of [`sluice_api::KeyOrder::Fingerprint`].
/// Its own function, not a library's, because it is part of what Sluice
/// stores: the order of fingerprint-ordered output must not change with a
/// dependency's version.
#[inline]
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    key_hash_padded(key, &padded(key))
}

/// [`key_hash`] of `key` whose [`padded`] form the caller already has.
#[inline]
pub(crate) fn key_hash_padded(key: &[u8], short: &[u8; INLINE_KEY]) -> u64 {
    if key.len() <= INLINE_KEY {
        short_hash(short, key.len())
    } else {
        long_hash(key)
    }
}

/// One distinct key, 32 bytes and 32-aligned so a slot never straddles a
/// cache line. Short keys and accumulators (word count's are both) live in
/// the slot itself; a longer key lives in the arena, with its offset in the
/// first 4 bytes of `key` and its hash in the last 8 (so most other keys
/// are told apart without reading the arena and a growing table rehashes
/// without it); a longer accumulator likewise, its offset in `val`.
/// `tag` is the key length plus one: 0 marks an empty slot, so a zeroed
/// table is empty.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(32))]
pub(crate) struct Slot {
    pub key: [u8; INLINE_KEY],
    pub val: [u8; INLINE_VALUE],
    tag: u32,
    pub vlen: u32,
}

impl Slot {
    /// A slot for a key of `klen` bytes.
    pub fn new(key: [u8; INLINE_KEY], klen: usize) -> Self {
        Slot {
            key,
            val: [0; INLINE_VALUE],
            tag: klen as u32 + 1,
            vlen: 0,
        }
    }

    /// Key length in bytes.
    #[inline]
    pub fn klen(&self) -> usize {
        self.tag as usize - 1
    }

    /// Whether no key holds the slot.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.tag == 0
    }

    /// The stored hash of a key longer than [`INLINE_KEY`].
    #[inline]
    pub fn long_hash(&self) -> u64 {
        u64::from_le_bytes(self.key[8..].try_into().expect("8 bytes"))
    }

    /// The arena offset in the first 4 bytes of `bytes`.
    #[inline]
    pub fn off(bytes: &[u8]) -> usize {
        u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")) as usize
    }
}

/// Where a probe ended: at the key's slot, or at the empty slot it would
/// take.
pub(crate) enum Probe {
    Found(usize),
    Vacant(usize),
}

/// How many records ahead lookups are prefetched.
pub(crate) const AHEAD: usize = 16;

/// Linear probing over a power-of-two array of slots, at most 3/4 full.
#[derive(Default)]
pub(crate) struct Table {
    slots: Vec<Slot>,
    len: usize,
}

impl Table {
    /// Distinct keys held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table has no slots yet.
    pub fn is_unallocated(&self) -> bool {
        self.slots.is_empty()
    }

    /// Bytes allocated.
    pub fn allocation_size(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>()
    }

    /// Whether one more key makes the table grow.
    pub fn is_full(&self) -> bool {
        (self.len + 1) * 4 > self.slots.len() * 3
    }

    /// Whether one more key leaves a vacant slot, past the load factor
    /// (probes end at a vacant slot).
    pub fn has_vacancy(&self) -> bool {
        self.len + 2 <= self.slots.len()
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        hash as usize & (self.slots.len() - 1)
    }

    /// Asks the CPU to fetch the home slot of `hash` into cache.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        if !self.slots.is_empty() {
            prefetch(&self.slots[self.home(hash)]);
        }
    }

    /// The home slot of `hash`, if the table has slots.
    #[inline]
    pub fn home_slot(&self, hash: u64) -> Option<&Slot> {
        (!self.slots.is_empty()).then(|| &self.slots[self.home(hash)])
    }

    /// Finds the slot of the key `same` accepts, or the empty slot where it
    /// would go. The table must not be empty.
    #[inline]
    pub fn probe(&self, hash: u64, same: impl Fn(&Slot) -> bool) -> Probe {
        let mask = self.slots.len() - 1;
        let mut i = self.home(hash);
        loop {
            let s = &self.slots[i];
            if s.is_empty() {
                return Probe::Vacant(i);
            }
            if same(s) {
                return Probe::Found(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// The slot at `i`.
    #[inline]
    pub fn slot_mut(&mut self, i: usize) -> &mut Slot {
        &mut self.slots[i]
    }

    /// Fills the vacant slot `i` (from [`Table::probe`]).
    #[inline]
    pub fn fill(&mut self, i: usize, slot: Slot) {
        self.slots[i] = slot;
        self.len += 1;
    }

    /// Doubles the table (or makes its first 1,024 slots), moving every key
    /// to its home in the new one; `hash` gives a slot's hash.
    pub fn grow(&mut self, hash: impl Fn(&Slot) -> u64) {
        let size = (self.slots.len() * 2).max(1024);
        let old = std::mem::replace(&mut self.slots, new_slots(size));
        // Each move's home is prefetched a few moves before it is written.
        let mut ahead = std::collections::VecDeque::with_capacity(AHEAD);
        for s in old.iter().filter(|s| !s.is_empty()) {
            let h = hash(s);
            self.prefetch(h);
            ahead.push_back((h, *s));
            if ahead.len() == AHEAD {
                let (h, s) = ahead.pop_front().expect("full");
                self.place(h, s);
            }
        }
        for (h, s) in ahead {
            self.place(h, s);
        }
    }

    /// Puts a key known to be absent at its place.
    fn place(&mut self, hash: u64, slot: Slot) {
        if let Probe::Vacant(at) = self.probe(hash, |_| false) {
            self.slots[at] = slot;
        }
    }

    /// Empties the table, keeping its allocation.
    pub fn clear(&mut self) {
        self.slots.fill(Slot::default());
        self.len = 0;
    }

    /// Every key's slot with its index, in table order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &Slot)> {
        self.slots.iter().enumerate().filter(|(_, s)| !s.is_empty())
    }

    /// The slot at `i`.
    #[inline]
    pub fn slot(&self, i: usize) -> &Slot {
        &self.slots[i]
    }

    /// Prefetches the slot at `i`.
    #[inline]
    pub fn prefetch_index(&self, i: usize) {
        prefetch(&self.slots[i]);
    }
}

/// `size` empty slots. A large table is backed by huge pages where the
/// kernel allows them on request (transparent huge pages in `madvise`
/// mode): its lookups land anywhere in hundreds of megabytes, and with
/// 4 KiB pages nearly every one missed the TLB as well as the cache (word
/// count over 11 million distinct words took 30% less CPU time).
fn new_slots(size: usize) -> Vec<Slot> {
    let mut v = Vec::with_capacity(size);
    advise_huge_pages(&v);
    v.resize(size, Slot::default());
    v
}

/// Asks the kernel to back a vector's untouched allocation with huge
/// pages, when it is large enough for that to matter.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub(crate) fn advise_huge_pages<T>(v: &Vec<T>) {
    const PAGE: usize = 4096;
    let bytes = v.capacity() * std::mem::size_of::<T>();
    if bytes < 8 << 20 {
        return;
    }
    let start = (v.as_ptr() as usize).next_multiple_of(PAGE);
    let end = v.as_ptr() as usize + bytes;
    // SAFETY: the range lies inside the vector's own allocation, and
    // MADV_HUGEPAGE changes only how the kernel backs it, never what it
    // holds. A refusal (no THP, another page size) leaves small pages.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn advise_huge_pages<T>(_v: &Vec<T>) {}

/// Makes room for `extra` more elements. A full vector moves to one twice
/// its size, advised onto huge pages (see [`advise_huge_pages`]) before any
/// of it is touched: pages touched first stay small, so advising after a
/// `Vec`'s own growth had copied it into fresh pages did nothing. For the
/// hash collector's arena, read all over in sorted order.
#[inline]
pub(crate) fn reserve_advised<T: Copy>(v: &mut Vec<T>, extra: usize) {
    if v.len() + extra > v.capacity() {
        grow_advised(v, extra);
    }
}

#[inline(never)]
fn grow_advised<T: Copy>(v: &mut Vec<T>, extra: usize) {
    let size = (v.capacity() * 2)
        .max(v.len() + extra)
        .max(4096 / std::mem::size_of::<T>().max(1));
    let mut grown = Vec::with_capacity(size);
    advise_huge_pages(&grown);
    grown.extend_from_slice(v);
    *v = grown;
}

/// A prefetch hint for the cache line holding `at`. Prefetching never
/// faults nor changes memory, so it cannot be misused; it is unsafe in
/// Rust only because it is an intrinsic behind a target feature (SSE,
/// which every x86-64 CPU has).
#[cfg(target_arch = "x86_64")]
#[inline]
#[allow(unsafe_code)]
pub(crate) fn prefetch<T>(at: &T) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: SSE is part of the x86-64 baseline, and a prefetch of a
    // valid reference reads nothing the program can observe.
    unsafe { _mm_prefetch::<_MM_HINT_T0>((at as *const T).cast::<i8>()) }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
pub(crate) fn prefetch<T>(_at: &T) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_keys_are_the_key_then_zeros() {
        let bytes: Vec<u8> = (1..=40).collect();
        for start in 0..8 {
            for n in 0..=24 {
                let key = &bytes[start..start + n];
                let mut want = [0u8; INLINE_KEY];
                if n <= INLINE_KEY {
                    want[..n].copy_from_slice(key);
                }
                assert_eq!(padded(key), want, "length {n}");
            }
        }
    }

    #[test]
    fn short_hashes_tell_lengths_and_bytes_apart() {
        let mut seen = std::collections::HashSet::new();
        for n in 0..=INLINE_KEY {
            for b in 0..=255u8 {
                let key = vec![b; n];
                seen.insert(short_hash(&padded(&key), n));
                if n == 0 {
                    break;
                }
            }
        }
        // Zero-padded keys of every length, and their low bits spread.
        assert_eq!(seen.len(), 1 + 16 * 256);
        let homes: std::collections::HashSet<u64> = seen.iter().map(|h| h & 0xfff).collect();
        // 4,097 hashes in 4,096 homes: about 4096 * (1 - 1/e) = 2,589 if random.
        assert!(homes.len() > 2400, "{} homes of 4096", homes.len());
    }
}

#[cfg(test)]
mod long_tests {
    use super::*;

    /// Keys of 17 to 100 bytes that differ from one another in a single
    /// byte anywhere, or only in length, hash apart, and their homes
    /// spread.
    #[test]
    fn long_hashes_see_every_byte() {
        let base: Vec<u8> = (0..100u8).map(|i| b'a' + i % 26).collect();
        let mut seen = std::collections::HashSet::new();
        let mut count = 0;
        for n in INLINE_KEY + 1..=base.len() {
            seen.insert(key_hash(&base[..n]));
            count += 1;
            for at in 0..n {
                let mut k = base[..n].to_vec();
                k[at] ^= 0x20;
                seen.insert(key_hash(&k));
                count += 1;
            }
        }
        assert_eq!(seen.len(), count);
        let homes: std::collections::HashSet<u64> = seen.iter().map(|h| h >> 52).collect();
        // About 5,000 hashes in 4,096 values: 4096 * (1 - e^-1.23) = 2,900
        // if random.
        assert!(
            homes.len() > 2700,
            "{} of 4096 high 12-bit values",
            homes.len()
        );
    }
}
