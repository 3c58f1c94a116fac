//! Key order: the sort prefix of an index entry and the full comparison.

use std::cmp::Ordering;

use sluice_api::KeyOrder;

/// A 32-bit key fingerprint: the high half of Sluice's key hash (a folded
/// multiply per 16 key bytes), cheap, well spread, stable across runs and
/// machines. The hash collector keeps each key's hash, so its spills take
/// the fingerprint without reading or hashing the key again.
#[inline]
pub fn fingerprint(key: &[u8]) -> u32 {
    (crate::table::key_hash(key) >> 32) as u32
}

/// The value index entries are sorted by before full keys are compared:
/// the first 8 key bytes big-endian (zero padded) for bytewise order, the
/// fingerprint for fingerprint order. Equal keys always have equal prefixes,
/// and for bytewise order `prefix(a) < prefix(b)` implies `a < b`.
#[inline]
pub fn prefix(order: KeyOrder, key: &[u8]) -> u64 {
    match order {
        KeyOrder::Bytewise => (bytes16(key) >> 64) as u64,
        KeyOrder::Fingerprint => u64::from(fingerprint(key)),
    }
}

/// Key bytes a bytewise prefix holds.
pub const PREFIX_BYTES: usize = 8;

/// Key bytes a merge prefix ([`merge_prefix`]) holds.
pub const MERGE_BYTES: usize = 15;

/// The low byte of a merge prefix that does not hold its whole key.
const PARTIAL: u8 = 0xff;

/// The merge's 16-byte sort prefix. For bytewise order: the first 15 key
/// bytes big-endian (zero padded), then the key's length if it is at most
/// 15 bytes, else `0xff`; for fingerprint order, the fingerprint, then
/// `0xff`. Different prefixes order as their keys do (a key of at most
/// 15 bytes that agrees with another on them is a prefix of it), and
/// equal prefixes that hold their keys whole ([`holds_whole`]) are equal
/// keys: the merge orders PageRank's page numbers, which meet the same
/// page in most runs, without reading a key byte.
#[inline]
pub fn merge_prefix(order: KeyOrder, key: &[u8]) -> u128 {
    match order {
        KeyOrder::Bytewise => {
            let len = if key.len() <= MERGE_BYTES {
                key.len() as u8
            } else {
                PARTIAL
            };
            bytes16(key) & !0xff | u128::from(len)
        }
        KeyOrder::Fingerprint => u128::from(fingerprint(key)) << 8 | u128::from(PARTIAL),
    }
}

/// Whether a merge prefix holds its whole key: two equal prefixes that
/// do are equal keys.
#[inline]
pub fn holds_whole(prefix: u128) -> bool {
    prefix as u8 != PARTIAL
}

/// The first 16 key bytes big-endian, zero padded, read with a few word
/// loads (a copy of a variable length called `memcpy` for every record).
#[inline]
fn bytes16(key: &[u8]) -> u128 {
    match key.first_chunk::<16>() {
        Some(b) => u128::from_be_bytes(*b),
        None => u128::from_be_bytes(crate::table::padded(key)),
    }
}

/// Compares keys in `order`.
#[inline]
pub fn key_cmp(order: KeyOrder, a: &[u8], b: &[u8]) -> Ordering {
    match order {
        KeyOrder::Bytewise => a.cmp(b),
        KeyOrder::Fingerprint => fingerprint(a).cmp(&fingerprint(b)).then_with(|| a.cmp(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_the_first_bytes_zero_padded() {
        let bytes: Vec<u8> = (1..=40).collect();
        for start in 0..8 {
            for n in 0..=24 {
                let key = &bytes[start..start + n];
                let mut want = [0u8; 16];
                want[..n.min(15)].copy_from_slice(&key[..n.min(15)]);
                want[15] = if n <= 15 { n as u8 } else { 0xff };
                let merge = merge_prefix(KeyOrder::Bytewise, key);
                assert_eq!(merge, u128::from_be_bytes(want), "length {n}");
                assert_eq!(holds_whole(merge), n <= 15);
                let want8 = u64::from_be_bytes(want[..8].try_into().unwrap());
                assert_eq!(prefix(KeyOrder::Bytewise, key), want8, "length {n}");
            }
        }
    }

    /// Merge prefixes order as their keys where they differ, and equal
    /// ones that hold their keys whole are equal keys: keys that differ
    /// only in length or trailing zeros, at and around 15 and 16 bytes.
    #[test]
    fn merge_prefixes_agree_with_byte_order() {
        let mut keys: Vec<Vec<u8>> = vec![vec![], b"a".to_vec(), b"a\0".to_vec(), vec![0xff; 20]];
        for n in [7, 8, 14, 15, 16, 17] {
            for last in [0u8, 1, 0xff] {
                let mut k = vec![b'k'; n];
                k[n - 1] = last;
                keys.push(k);
            }
        }
        for a in &keys {
            for b in &keys {
                let (pa, pb) = (
                    merge_prefix(KeyOrder::Bytewise, a),
                    merge_prefix(KeyOrder::Bytewise, b),
                );
                if pa != pb {
                    assert_eq!(pa.cmp(&pb), a.cmp(b), "{a:?} {b:?}");
                } else if holds_whole(pa) {
                    assert_eq!(a, b);
                }
            }
        }
        let f = merge_prefix(KeyOrder::Fingerprint, b"a");
        assert!(!holds_whole(f), "a fingerprint never holds its key");
    }

    #[test]
    fn bytewise_prefix_agrees_with_byte_order() {
        let keys: [&[u8]; 6] = [b"", b"a", b"a\0", b"ab", b"abcdefghij", b"\xff"];
        for a in keys {
            for b in keys {
                let (pa, pb) = (prefix(KeyOrder::Bytewise, a), prefix(KeyOrder::Bytewise, b));
                if pa != pb {
                    assert_eq!(pa.cmp(&pb), a.cmp(b), "{a:?} {b:?}");
                }
            }
        }
    }
}
