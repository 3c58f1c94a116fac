//! Where a job's bytes can be when it starts, for the model's honest ideal:
//! how much of the input the page cache holds (`mincore` over the input's
//! pages) and how much memory is free for the page cache to keep spills
//! (`MemAvailable` of /proc/meminfo less the job's budget).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use std::sync::Arc;

use sluice_formats::input::{InputFile, Split};

/// Splits whose pages are looked at; more are sampled evenly, so a job of
/// 10,000 small files pays for 64 (about a millisecond).
const SAMPLED_SPLITS: usize = 64;

/// Bytes mapped at a time, so the residency vector stays small (256 KiB
/// for 4 KiB pages).
const WINDOW: u64 = 1 << 30;

/// Stretches of a sampled split looked at, spread evenly over it, and the
/// bytes of each: asking the kernel about every page of a split cost a
/// grep of 269 MB 6.6 ms of its 32 (the page cache walked page by page);
/// 16 stretches of 64 KiB a split ask about 256 pages.
const STRETCHES: u64 = 16;
const STRETCH: u64 = 64 << 10;

/// The model's residency for a job over `splits` run with `cfg`: the
/// input share cached as the caller measured it before the job read any
/// (else now), the memory available less the job's budget, and whether
/// the output is synced.
pub fn residency(splits: &[Split], cfg: &crate::EngineConfig) -> sluice_model::Residency {
    sluice_model::Residency {
        input_cached: cfg.input_cached.unwrap_or_else(|| input_cached(splits)),
        spill_memory: mem_available().map_or(0, |m| m.saturating_sub(cfg.memory)) as f64,
        output_synced: cfg.sync_output,
    }
}

/// Share of the bytes of `files` in the page cache, 0 to 1: each file a
/// split of its whole length.
pub fn files_cached(files: &[InputFile]) -> f64 {
    let splits: Vec<Split> = files
        .iter()
        .enumerate()
        .map(|(index, f)| Split {
            index,
            file: Arc::new(f.clone()),
            start: 0,
            end: f.len,
        })
        .collect();
    input_cached(&splits)
}

/// Share of the sampled splits' bytes in the page cache, 0 to 1. A split
/// already in memory (a cached block) counts as cached; one of a remote
/// object, or whose file cannot be mapped, as not cached.
pub fn input_cached(splits: &[Split]) -> f64 {
    let step = splits.len().div_ceil(SAMPLED_SPLITS).max(1);
    let (mut resident, mut total) = (0u64, 0u64);
    for s in splits.iter().step_by(step) {
        let len = s.end.saturating_sub(s.start);
        total += len;
        resident += if s.file.resident.is_some() {
            len
        } else if s.file.remote.is_some() {
            0
        } else {
            File::open(&s.file.path)
                .and_then(|f| resident_estimate(&f, s.start, s.end))
                .unwrap_or(0)
        };
    }
    if total == 0 {
        return 0.0;
    }
    (resident as f64 / total as f64).clamp(0.0, 1.0)
}

/// Bytes of `[start, end)` of `f` in the page cache, estimated from
/// `STRETCHES` stretches spread evenly over it (exact for a range of
/// no more than that many stretches' bytes).
pub fn resident_estimate(f: &File, start: u64, end: u64) -> io::Result<u64> {
    let len = end.saturating_sub(start);
    if len <= STRETCHES * STRETCH {
        return resident_bytes(f, start, end);
    }
    let gap = len / STRETCHES;
    let mut seen = 0;
    for i in 0..STRETCHES {
        let at = start + i * gap;
        seen += resident_bytes(f, at, (at + STRETCH).min(end))?;
    }
    let asked = STRETCHES * STRETCH;
    Ok((u128::from(seen) * u128::from(len) / u128::from(asked)) as u64)
}

/// Bytes of `[start, end)` of `f` in the page cache, whole pages counted.
pub fn resident_bytes(f: &File, start: u64, end: u64) -> io::Result<u64> {
    let len = f.metadata()?.len();
    let end = end.min(len);
    let page = page_size();
    let mut at = start / page * page;
    let mut resident = 0;
    while at < end {
        let n = (end - at).min(WINDOW);
        resident += resident_pages(f, at, n)? * page;
        at += n;
    }
    Ok(resident.min(end.saturating_sub(start)))
}

fn page_size() -> u64 {
    sysconf_page_size().max(512)
}

#[allow(unsafe_code)]
fn sysconf_page_size() -> u64 {
    // SAFETY: sysconf reads a constant of the system.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(p).unwrap_or(4096)
}

/// Resident pages of the `len` bytes of `f` at `offset` (page-aligned):
/// the file's pages mapped, asked with `mincore`, unmapped.
#[allow(unsafe_code)]
fn resident_pages(f: &File, offset: u64, len: u64) -> io::Result<u64> {
    let len_us = usize::try_from(len).map_err(io::Error::other)?;
    let off = libc::off_t::try_from(offset).map_err(io::Error::other)?;
    // SAFETY: a fresh shared read-only mapping of an open file, never
    // dereferenced: only handed to mincore and unmapped below.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len_us,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            off,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut vec = vec![0u8; len_us.div_ceil(page_size() as usize)];
    // SAFETY: `ptr` maps `len_us` bytes; `vec` has one byte a page.
    let rc = unsafe { libc::mincore(ptr, len_us, vec.as_mut_ptr().cast()) };
    let err = io::Error::last_os_error();
    // SAFETY: unmaps exactly the mapping made above.
    unsafe { libc::munmap(ptr, len_us) };
    if rc != 0 {
        return Err(err);
    }
    Ok(vec.iter().filter(|b| **b & 1 == 1).count() as u64)
}

/// `MemAvailable` of /proc/meminfo in bytes; `None` where there is none.
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available(&text)
}

fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn mem_available_is_read_from_meminfo() {
        let text = "MemTotal:  8000 kB\nMemFree:  100 kB\nMemAvailable:    2048 kB\n";
        assert_eq!(parse_mem_available(text), Some(2048 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: lots\n"), None);
    }

    #[test]
    fn a_file_just_written_is_in_the_page_cache_and_a_dropped_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = File::create(&path).unwrap();
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        f.sync_all().unwrap();
        let f = File::open(&path).unwrap();
        assert_eq!(resident_bytes(&f, 0, 1 << 20).unwrap(), 1 << 20);
        assert_eq!(resident_bytes(&f, 4096, 8192).unwrap(), 4096);
        // Clean pages asked out of the cache leave it (a file in memory,
        // on tmpfs, has no other place to be).
        drop_from_cache(&f);
        if !in_memory(&f) {
            assert!(resident_bytes(&f, 0, 1 << 20).unwrap() < 1 << 20);
        }
    }

    /// Whether `f` is on tmpfs (`f_type` is an `i64` here, narrower
    /// elsewhere).
    #[allow(unsafe_code, clippy::useless_conversion)]
    fn in_memory(f: &File) -> bool {
        const TMPFS_MAGIC: i64 = 0x0102_1994;
        // SAFETY: fstatfs fills the zeroed struct for an open descriptor.
        let mut s: libc::statfs = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::fstatfs(f.as_raw_fd(), &mut s) };
        rc == 0 && i64::from(s.f_type) == TMPFS_MAGIC
    }

    #[allow(unsafe_code)]
    fn drop_from_cache(f: &File) {
        // SAFETY: an advice on an open descriptor.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }

    #[test]
    fn the_input_share_cached_is_measured_over_its_splits() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a", "b"] {
            let mut f = File::create(dir.path().join(name)).unwrap();
            f.write_all(&vec![b'x'; 1 << 20]).unwrap();
            f.sync_all().unwrap();
        }
        let files = sluice_formats::input::resolve(dir.path().to_str().unwrap()).unwrap();
        let splits = sluice_formats::input::plan_splits(
            &files,
            256 << 10,
            sluice_formats::input::RecordFormat::Lines,
        );
        assert_eq!(input_cached(&splits), 1.0);
        assert_eq!(files_cached(&files), 1.0);
        let b = File::open(dir.path().join("b")).unwrap();
        drop_from_cache(&b);
        if !in_memory(&b) {
            let half = input_cached(&splits);
            assert!(half <= 0.5 + 1e-9, "{half}");
            assert!(files_cached(&files) <= 0.5 + 1e-9);
        }
    }

    /// A large range is estimated from its stretches: all of a cached
    /// file, none of a dropped one, about half of one whose second half
    /// was dropped.
    #[test]
    #[allow(unsafe_code)]
    fn a_large_ranges_residency_is_estimated_from_its_stretches() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let mut f = File::create(&path).unwrap();
        let len: u64 = 8 << 20;
        f.write_all(&vec![b'x'; len as usize]).unwrap();
        f.sync_all().unwrap();
        let f = File::open(&path).unwrap();
        assert_eq!(resident_estimate(&f, 0, len).unwrap(), len);
        if in_memory(&f) {
            return;
        }
        // SAFETY: an advice on an open descriptor.
        unsafe {
            libc::posix_fadvise(
                f.as_raw_fd(),
                (len / 2) as i64,
                0,
                libc::POSIX_FADV_DONTNEED,
            )
        };
        let half = resident_estimate(&f, 0, len).unwrap();
        assert!(
            half >= len / 2 - len / 8 && half <= len / 2 + len / 8,
            "{half}"
        );
        drop_from_cache(&f);
        assert_eq!(resident_estimate(&f, 0, len).unwrap(), 0);
    }

    #[test]
    fn an_empty_range_or_file_has_nothing_resident() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty");
        File::create(&path).unwrap();
        let f = File::open(&path).unwrap();
        assert_eq!(resident_bytes(&f, 0, 100).unwrap(), 0);
        assert_eq!(input_cached(&[]), 0.0);
    }
}
