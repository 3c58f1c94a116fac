//! LEB128 unsigned varints: 7 bits per byte, low group first, high bit set on
//! every byte but the last. At most 10 bytes for a `u64`.

/// Appends `v` to `out`.
#[inline]
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Decodes a varint at the start of `buf`: `(value, bytes used)`, or `None`
/// when `buf` ends first or the varint is longer than 10 bytes.
#[inline]
pub fn get(buf: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &b) in buf.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Some((v, i + 1));
        }
    }
    None
}

/// Bytes `put` uses for `v`.
#[inline]
pub fn len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_edges() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            put(&mut b, v);
            assert_eq!(b.len(), len(v));
            assert_eq!(get(&b), Some((v, b.len())));
            assert_eq!(get(&b[..b.len() - 1]), None);
        }
    }
}
