//! A mutable decoder for delimited text records (`a|b|c`).
//!
//! [`Decoder::decode`] scans a line once for delimiters and records each
//! field's byte range in a vector it reuses, so decoding allocates nothing
//! once the vector has grown to the widest record. Fields are parsed on
//! demand from the borrowed line.

use std::ops::Range;

/// Why a field could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldError {
    /// The record has a different number of fields than required.
    FieldCount {
        /// Fields required.
        expected: usize,
        /// Fields found.
        found: usize,
    },
    /// Field `index` is not a number of the requested kind.
    NotANumber {
        /// The field's position.
        index: usize,
    },
    /// The record has no field `index`.
    Missing {
        /// The field's position.
        index: usize,
    },
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldError::FieldCount { expected, found } => {
                write!(f, "expected {expected} fields, found {found}")
            }
            FieldError::NotANumber { index } => write!(f, "field {index} is not a number"),
            FieldError::Missing { index } => write!(f, "no field {index}"),
        }
    }
}

impl std::error::Error for FieldError {}

/// Splits records on one delimiter byte into reused field ranges.
#[derive(Debug, Clone)]
pub struct Decoder {
    delim: u8,
    fields: Vec<Range<usize>>,
}

/// The fields of one decoded record, borrowing the line and the decoder.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'d, 'l> {
    line: &'l [u8],
    fields: &'d [Range<usize>],
}

impl Decoder {
    /// A decoder for `delim`-separated fields.
    pub fn new(delim: u8) -> Self {
        Decoder {
            delim,
            fields: Vec::with_capacity(16),
        }
    }

    /// Decodes `line` into fields.
    pub fn decode<'d, 'l>(&'d mut self, line: &'l [u8]) -> Fields<'d, 'l> {
        self.fields.clear();
        let mut start = 0;
        for i in memchr::memchr_iter(self.delim, line) {
            self.fields.push(start..i);
            start = i + 1;
        }
        self.fields.push(start..line.len());
        Fields {
            line,
            fields: &self.fields,
        }
    }
}

impl<'l> Fields<'_, 'l> {
    /// Number of fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether there are no fields (never: an empty line has one empty field).
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Fails unless there are exactly `n` fields.
    pub fn expect_len(&self, n: usize) -> Result<(), FieldError> {
        if self.fields.len() != n {
            return Err(FieldError::FieldCount {
                expected: n,
                found: self.fields.len(),
            });
        }
        Ok(())
    }

    /// Field `i` as bytes.
    pub fn get(&self, i: usize) -> Result<&'l [u8], FieldError> {
        self.fields
            .get(i)
            .map(|r| &self.line[r.clone()])
            .ok_or(FieldError::Missing { index: i })
    }

    /// Field `i` as a decimal integer (optional sign, digits only).
    pub fn i64(&self, i: usize) -> Result<i64, FieldError> {
        parse_i64(self.get(i)?).ok_or(FieldError::NotANumber { index: i })
    }

    /// Field `i` as a floating-point number.
    pub fn f64(&self, i: usize) -> Result<f64, FieldError> {
        parse_f64(self.get(i)?).ok_or(FieldError::NotANumber { index: i })
    }
}

/// Powers of ten a `f64` holds exactly.
const POW10: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// Parses a floating-point number. Plain decimals (`-12.34`) of at most 15
/// digits take Clinger's fast path: the digits as an exact integer divided
/// by an exact power of ten, one correctly rounded operation, so the result
/// equals the standard parser's. Anything else goes to the standard parser.
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    fast_f64(b).or_else(|| std::str::from_utf8(b).ok()?.parse().ok())
}

fn fast_f64(b: &[u8]) -> Option<f64> {
    let (neg, body) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, b),
    };
    let (mut mantissa, mut digits, mut frac, mut seen_dot) = (0u64, 0usize, 0usize, false);
    for &c in body {
        match c {
            b'0'..=b'9' => {
                mantissa = mantissa * 10 + u64::from(c - b'0');
                digits += 1;
                frac += usize::from(seen_dot);
            }
            b'.' if !seen_dot => seen_dot = true,
            _ => return None,
        }
        if digits > 15 {
            return None;
        }
    }
    if digits == 0 {
        return None;
    }
    let v = mantissa as f64 / POW10[frac];
    Some(if neg { -v } else { v })
}

/// Parses an optionally signed decimal integer without allocating.
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    let (neg, digits) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, b),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(i64::from(d))?;
    }
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_fields_and_numbers() {
        let mut d = Decoder::new(b'|');
        let f = d.decode(b"url/a|42|-7.5");
        assert_eq!(f.len(), 3);
        assert_eq!(f.get(0).unwrap(), b"url/a");
        assert_eq!(f.i64(1).unwrap(), 42);
        assert_eq!(f.f64(2).unwrap(), -7.5);
        assert_eq!(f.i64(0), Err(FieldError::NotANumber { index: 0 }));
        assert_eq!(f.get(3), Err(FieldError::Missing { index: 3 }));
        assert!(f.expect_len(2).is_err());
        let f = d.decode(b"");
        assert_eq!(f.len(), 1);
        assert_eq!(d.decode(b"a||").len(), 3);
    }

    #[test]
    fn the_float_fast_path_agrees_with_the_standard_parser() {
        for t in [
            "0",
            "1.5",
            "-7.25",
            "210.35",
            "999.99",
            "0.1",
            "123456789012345",
            "1.000000000000001",
            "12.",
            ".5",
            "3.14159265358979",
        ] {
            assert_eq!(parse_f64(t.as_bytes()), t.parse::<f64>().ok(), "{t}");
        }
        for t in [
            "1e5",
            "inf",
            "-0.0000000000000001234",
            "1234567890123456789",
        ] {
            assert_eq!(parse_f64(t.as_bytes()), t.parse::<f64>().ok(), "{t}");
        }
        assert_eq!(parse_f64(b"1.2.3"), None);
        assert_eq!(parse_f64(b"-"), None);
        assert_eq!(parse_f64(b""), None);
    }

    #[test]
    fn integers_reject_junk_and_overflow() {
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"+3"), Some(3));
        assert_eq!(parse_i64(b"1x"), None);
        assert_eq!(parse_i64(b"-"), None);
        assert_eq!(parse_i64(b"99999999999999999999"), None);
    }
}
