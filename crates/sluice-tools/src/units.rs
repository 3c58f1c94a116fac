//! Byte sizes on the command line: `512MB` (decimal, 10^6), `256MiB`
//! (binary, 2^20), or a bare number of bytes.

/// Parses a size such as `256MB`, `1.5GiB` or `4096`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" | "k" => 1_000,
        "mb" | "m" => 1_000_000,
        "gb" | "g" => 1_000_000_000,
        "tb" | "t" => 1_000_000_000_000,
        "pb" | "p" => 1_000_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        "pib" => 1 << 50,
        _ => return Err(bad(s)),
    };
    let v: f64 = num.parse().map_err(|_| bad(s))?;
    if !v.is_finite() || v < 0.0 {
        return Err(bad(s));
    }
    Ok((v * mult as f64).round() as u64)
}

/// Parses a rate such as `260MB/s` or `110MB` (bytes per second).
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim();
    parse_size(t.strip_suffix("/s").unwrap_or(t))
}

fn bad(s: &str) -> String {
    format!("invalid size '{s}': expected a number with an optional unit (KB, MB, GB, TB, PB = powers of 1000; KiB, MiB, GiB, TiB, PiB = powers of 1024)")
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
