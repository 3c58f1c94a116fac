//! A small table that folds map output at emit time, in front of the sort
//! collector ([`sluice_api::JobSpec::fold_combiner`]).
//!
//! Each key of at most [`KEY_MAX`] bytes with a value of at most
//! [`VALUE_MAX`] bytes has one slot, chosen by a hash of the key: a record
//! whose key is in its slot folds into the slot's value; any other record
//! takes the slot, and the record there is evicted to the sort. So the
//! table keeps the keys met often and lets the rest pass at the cost of a
//! copy. [`SLOTS`] slots of 40 bytes (640 KiB) stay in a core's L2
//! cache, where the hash collector's table of every key (400,000 PageRank
//! pages) did not. On PageRank's shares more than half of the records
//! fold here.
//!
//! The sizes were measured on PageRank's contribute job: 16,384 slots
//! took about 4% less time than 8,192 (32,768 no less); slots of 40 bytes
//! rather than a cache line of 64, and values of at most 16 bytes rather
//! than 40, which keeps the pages' long state lines out of the table
//! (they took slots from the popular pages' sums), about 3% less each.

use std::sync::Arc;

use sluice_api::Aggregator;

/// Slots in the table.
pub const SLOTS: usize = 16384;
/// Longest key the table holds.
pub const KEY_MAX: usize = 16;
const _: () = assert!(KEY_MAX <= crate::table::INLINE_KEY, "keys are padded whole");
/// Longest value the table holds.
pub const VALUE_MAX: usize = 16;

/// One key (as two zero-padded words and its length) and its folded
/// value: 40 bytes.
#[derive(Clone, Copy)]
#[repr(C)]
struct Slot {
    lo: u64,
    hi: u64,
    value: [u8; VALUE_MAX],
    klen: u8,
    vlen: u8,
    used: bool,
}

impl Slot {
    const EMPTY: Slot = Slot {
        lo: 0,
        hi: 0,
        value: [0; VALUE_MAX],
        klen: 0,
        vlen: 0,
        used: false,
    };

    #[inline]
    fn set(&mut self, lo: u64, hi: u64, klen: usize, value: &[u8]) {
        (self.lo, self.hi) = (lo, hi);
        // Full-width and 8-byte values (PageRank's sums) without a call
        // to memcpy.
        if let Ok(v) = <[u8; VALUE_MAX]>::try_from(value) {
            self.value = v;
        } else if let Ok(v) = <[u8; 8]>::try_from(value) {
            self.value[..8].copy_from_slice(&v);
        } else {
            self.value[..value.len()].copy_from_slice(value);
        }
        self.klen = klen as u8;
        self.vlen = value.len() as u8;
        self.used = true;
    }

    /// Passes the record held here to `sort`.
    #[inline]
    fn pass<E>(&self, sort: &mut impl FnMut(&[u8], &[u8]) -> Result<(), E>) -> Result<(), E> {
        let mut k = [0u8; KEY_MAX];
        k[..8].copy_from_slice(&self.lo.to_le_bytes());
        k[8..].copy_from_slice(&self.hi.to_le_bytes());
        sort(&k[..self.klen as usize], &self.value[..self.vlen as usize])
    }
}

/// The fold table.
pub struct FoldTable {
    agg: Arc<dyn Aggregator>,
    slots: Vec<Slot>,
    /// A fold's result that outgrew the table.
    grown: Vec<u8>,
    /// Records folded into others since [`FoldTable::take_folded`].
    folded: u64,
    /// Slots in use.
    used: usize,
}

impl FoldTable {
    /// An empty table folding with `agg`.
    pub fn new(agg: Arc<dyn Aggregator>) -> Self {
        FoldTable {
            agg,
            slots: vec![Slot::EMPTY; SLOTS],
            grown: Vec::new(),
            folded: 0,
            used: 0,
        }
    }

    /// The aggregator it folds with.
    pub fn aggregator(&self) -> &Arc<dyn Aggregator> {
        &self.agg
    }

    /// Bytes the table takes.
    pub fn memory(&self) -> usize {
        SLOTS * std::mem::size_of::<Slot>()
    }

    /// Whether no slot holds a record.
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// `key` (at most [`KEY_MAX`] bytes) as two little-endian words,
    /// zero-padded ([`crate::table::padded`]'s word loads).
    #[inline]
    fn words(key: &[u8]) -> (u64, u64) {
        let b = crate::table::padded(key);
        let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        (word(0), word(8))
    }

    /// Folds `value` into its key's slot, or puts the record in the slot
    /// and passes to `sort` the record there before, or one too large for
    /// the table, or one whose fold outgrew it.
    #[inline]
    pub fn put<E>(
        &mut self,
        key: &[u8],
        value: &[u8],
        mut sort: impl FnMut(&[u8], &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        if key.len() > KEY_MAX || value.len() > VALUE_MAX {
            return sort(key, value);
        }
        let (lo, hi) = Self::words(key);
        let mix = (lo ^ hi.rotate_left(29) ^ key.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let slot = &mut self.slots[(mix >> (64 - SLOTS.trailing_zeros())) as usize];
        if slot.used && (slot.lo, slot.hi, slot.klen as usize) == (lo, hi, key.len()) {
            self.folded += 1;
            let vlen = slot.vlen as usize;
            if self.agg.fold_in_place(&mut slot.value[..vlen], value) {
                return Ok(());
            }
            self.grown.clear();
            self.agg.fold(&slot.value[..vlen], value, &mut self.grown);
            if self.grown.len() <= VALUE_MAX {
                slot.value[..self.grown.len()].copy_from_slice(&self.grown);
                slot.vlen = self.grown.len() as u8;
                return Ok(());
            }
            *slot = Slot::EMPTY;
            self.used -= 1;
            return sort(key, &self.grown);
        }
        if slot.used {
            slot.pass(&mut sort)?;
        } else {
            self.used += 1;
        }
        slot.set(lo, hi, key.len(), value);
        Ok(())
    }

    /// Empties the table, passing each record it holds to `sort`.
    pub fn drain<E>(
        &mut self,
        mut sort: impl FnMut(&[u8], &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.used == 0 {
            return Ok(());
        }
        for slot in self.slots.iter_mut().filter(|s| s.used) {
            slot.pass(&mut sort)?;
            *slot = Slot::EMPTY;
            self.used -= 1;
        }
        Ok(())
    }

    /// Records folded into others since the last call.
    pub fn take_folded(&mut self) -> u64 {
        std::mem::take(&mut self.folded)
    }
}

#[cfg(test)]
mod tests {
    use sluice_api::SumU64;

    use super::*;

    /// Every value reaches the answer once, whether it folded in the
    /// table, was evicted, passed for its size or grew out of it.
    #[test]
    fn every_value_is_counted_once() {
        let mut t = FoldTable::new(Arc::new(SumU64));
        let mut out: std::collections::BTreeMap<Vec<u8>, u64> = Default::default();
        let mut add = |k: &[u8], v: &[u8]| {
            *out.entry(k.to_vec()).or_default() += SumU64::decode(v).unwrap();
        };
        let mut want: std::collections::BTreeMap<Vec<u8>, u64> = Default::default();
        let mut x = 12345u64;
        for i in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Few hot keys, many cold ones, some too long for the table.
            let key = match i % 10 {
                0..=5 => (x % 50).to_be_bytes().to_vec(),
                6..=8 => (x % 100_000).to_le_bytes().to_vec(),
                _ => format!("a key longer than sixteen bytes {}", x % 7).into_bytes(),
            };
            *want.entry(key.clone()).or_default() += i;
            t.put(&key, &SumU64::encode(i), |k, v| {
                add(k, v);
                Ok::<(), ()>(())
            })
            .unwrap();
        }
        assert!(t.take_folded() > 100_000, "the hot keys fold");
        t.drain(|k, v| {
            add(k, v);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert!(t.is_empty());
        assert_eq!(out, want);
    }

    /// Sums a value's bytes into one byte per fold, but folds a value of
    /// `[0xff]` into a value too large for the table.
    struct Grows;

    impl Aggregator for Grows {
        fn fold_in_place(&self, acc: &mut [u8], value: &[u8]) -> bool {
            if value == [0xff] || acc.len() != 1 {
                return false;
            }
            acc[0] = acc[0].wrapping_add(value[0]);
            true
        }

        fn fold(&self, acc: &[u8], _value: &[u8], out: &mut Vec<u8>) {
            out.extend_from_slice(acc);
            out.resize(VALUE_MAX + 1, 7);
        }
    }

    #[test]
    fn a_value_grown_too_large_leaves_the_table() {
        let mut t = FoldTable::new(Arc::new(Grows));
        let mut sorted: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut put = |t: &mut FoldTable, k: &[u8], v: &[u8]| {
            t.put(k, v, |k, v| {
                sorted.push((k.to_vec(), v.to_vec()));
                Ok::<(), ()>(())
            })
            .unwrap();
        };
        put(&mut t, b"k", &[1]);
        put(&mut t, b"k", &[2]);
        assert!(!t.is_empty());
        put(&mut t, b"k", &[0xff]);
        assert!(t.is_empty());
        put(&mut t, &[0; 17], &[1]);
        put(&mut t, b"k", &[0; VALUE_MAX + 1]);
        assert!(t.is_empty(), "too large to keep");
        assert_eq!(sorted.len(), 3);
        assert_eq!(sorted[0].0, b"k");
        assert_eq!(sorted[0].1[0], 3, "1 and 2 folded first");
        assert_eq!(sorted[0].1.len(), VALUE_MAX + 1);
        assert_eq!(sorted[1], (vec![0; 17], vec![1]));
    }
}
