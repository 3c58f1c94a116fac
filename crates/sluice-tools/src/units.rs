//! Byte sizes on the command line: `512MB` (decimal, 10^6), `256MiB`
//! (binary, 2^20), or a bare number of bytes.

/// Parses a size such as `256MB`, `1.5GiB` or `4096` (the job flags' parser).
pub use sluice_request::parse_size;

/// Parses a rate such as `260MB/s` or `110MB` (bytes per second).
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim();
    parse_size(t.strip_suffix("/s").unwrap_or(t))
}

/// Formats bytes with a decimal unit, e.g. `268.4 MB`.
pub fn human(bytes: u64) -> String {
    let b = bytes as f64;
    for (unit, scale) in [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)] {
        if b >= scale {
            return format!("{:.1} {unit}", b / scale);
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units_and_reject_junk() {
        assert_eq!(parse_size("256MB"), Ok(256_000_000));
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("1.5GB"), Ok(1_500_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("2 gib"), Ok(2 << 30));
        let err = parse_size("banana").unwrap_err();
        assert!(err.contains("invalid size 'banana'"), "{err}");
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("").is_err());
        assert_eq!(parse_rate("260MB/s"), Ok(260_000_000));
    }
}
