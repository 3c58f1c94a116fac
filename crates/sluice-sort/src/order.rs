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

/// A 16-byte sort prefix for the merge: the first 16 key bytes big-endian
/// (zero padded) for bytewise order, the fingerprint for fingerprint order.
#[inline]
pub fn prefix16(order: KeyOrder, key: &[u8]) -> u128 {
    match order {
        KeyOrder::Bytewise => bytes16(key),
        KeyOrder::Fingerprint => u128::from(fingerprint(key)),
    }
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

/// Orders two keys whose 16-byte bytewise prefixes are equal. They agree on
/// their first 16 bytes (zero padded), so when either key is at most 16
/// bytes long it is a prefix of the other and the lengths decide without
/// reading key bytes; longer keys compare the bytes after the prefix.
#[inline]
pub fn prefix16_tie(a: &[u8], b: &[u8]) -> Ordering {
    if a.len().min(b.len()) <= 16 {
        a.len().cmp(&b.len())
    } else {
        a[16..].cmp(&b[16..])
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
                want[..n.min(16)].copy_from_slice(&key[..n.min(16)]);
                assert_eq!(prefix16(KeyOrder::Bytewise, key), u128::from_be_bytes(want));
                let want8 = u64::from_be_bytes(want[..8].try_into().unwrap());
                assert_eq!(prefix(KeyOrder::Bytewise, key), want8, "length {n}");
            }
        }
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
