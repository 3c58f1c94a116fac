//! The CPU caches this machine reports, read once at run time, so that
//! buffers meant to stay in a cache are sized from the cache there is
//! rather than from a constant measured on another machine (an L2 of
//! 4 MiB on one Xeon, 1 MiB on one EPYC, 512 KiB on another).
//!
//! Linux reports each cache of a CPU in
//! `/sys/devices/system/cpu/cpu0/cache/indexN/` as `level` (1, 2, 3),
//! `type` (`Data`, `Instruction`, `Unified`) and `size` (`48K`, `1024K`,
//! `32M`). Where that is missing (another system, a container hiding
//! sysfs) [`FALLBACK`] stands in.

use std::path::Path;
use std::sync::OnceLock;

/// The sizes of a core's caches, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSizes {
    /// One core's level-1 data cache.
    pub l1d: usize,
    /// One core's level-2 cache.
    pub l2: usize,
    /// The level-3 cache the core shares with others (0 when there is none).
    pub l3: usize,
    /// Whether the sizes were read from the system (else [`FALLBACK`]).
    pub reported: bool,
}

/// Sizes used when the system reports none: a common server core's.
pub const FALLBACK: CacheSizes = CacheSizes {
    l1d: 32 << 10,
    l2: 1 << 20,
    l3: 32 << 20,
    reported: false,
};

/// The caches of this machine's first CPU, read once.
pub fn cache_sizes() -> CacheSizes {
    static SIZES: OnceLock<CacheSizes> = OnceLock::new();
    *SIZES.get_or_init(|| read_sizes(Path::new("/sys/devices/system/cpu/cpu0/cache")))
}

/// The caches described under `dir` (sysfs's layout), or [`FALLBACK`]
/// when it holds no level-2 cache.
pub fn read_sizes(dir: &Path) -> CacheSizes {
    let mut sizes = CacheSizes {
        l1d: 0,
        l2: 0,
        l3: 0,
        reported: true,
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return FALLBACK;
    };
    for entry in entries.flatten() {
        let d = entry.path();
        let read = |name: &str| std::fs::read_to_string(d.join(name)).ok();
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
        else {
            continue;
        };
        let Some(bytes) = parse_size(size.trim()) else {
            continue;
        };
        match (level.trim(), kind.trim()) {
            ("1", "Data") => sizes.l1d = bytes,
            ("2", "Unified" | "Data") => sizes.l2 = bytes,
            ("3", "Unified" | "Data") => sizes.l3 = bytes,
            _ => {}
        }
    }
    if sizes.l2 == 0 {
        return FALLBACK;
    }
    if sizes.l1d == 0 {
        sizes.l1d = FALLBACK.l1d;
    }
    sizes
}

/// `48K`, `1024K`, `32M` or a plain byte count, as sysfs writes sizes.
fn parse_size(s: &str) -> Option<usize> {
    let (digits, unit) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        b'G' | b'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<usize>().ok()?.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(dir: &Path, index: usize, level: &str, kind: &str, size: &str) {
        let d = dir.join(format!("index{index}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("level"), format!("{level}\n")).unwrap();
        std::fs::write(d.join("type"), format!("{kind}\n")).unwrap();
        std::fs::write(d.join("size"), format!("{size}\n")).unwrap();
    }

    /// sysfs's files give each level's size; the instruction cache is
    /// not taken for the data cache.
    #[test]
    fn reads_each_level_from_sysfs_files() {
        let dir = tempfile::tempdir().unwrap();
        cache(dir.path(), 0, "1", "Data", "48K");
        cache(dir.path(), 1, "1", "Instruction", "32K");
        cache(dir.path(), 2, "2", "Unified", "1024K");
        cache(dir.path(), 3, "3", "Unified", "32768K");
        let s = read_sizes(dir.path());
        assert_eq!(
            s,
            CacheSizes {
                l1d: 48 << 10,
                l2: 1 << 20,
                l3: 32 << 20,
                reported: true
            }
        );
    }

    /// No directory, or none with a level-2 cache: the fallback.
    #[test]
    fn a_machine_reporting_no_l2_gets_the_fallback() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_sizes(&dir.path().join("missing")), FALLBACK);
        cache(dir.path(), 0, "1", "Data", "32K");
        cache(dir.path(), 1, "2", "Unified", "lots");
        assert_eq!(read_sizes(dir.path()), FALLBACK);
    }

    #[test]
    fn sizes_parse_with_their_units() {
        assert_eq!(parse_size("48K"), Some(48 << 10));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size(""), None);
    }
}
