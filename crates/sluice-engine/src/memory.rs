//! Process memory as the kernel reports it.

/// Peak resident set size of this process in bytes (`VmHWM`), or 0 where
/// `/proc` is unavailable.
pub fn peak_rss() -> u64 {
    status_kib("VmHWM:") * 1024
}

/// Current resident set size in bytes (`VmRSS`).
pub fn current_rss() -> u64 {
    status_kib("VmRSS:") * 1024
}

fn status_kib(field: &str) -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
