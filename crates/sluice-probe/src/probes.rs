//! The probes: sequential disk write (with fsync) and read (page cache
//! bypassed), memory copy, and TCP over loopback.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rustix::fs::{Advice, Mode, OFlags};

use crate::{Measurement, ProbeResult};

/// What to probe with.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// Directory for the disk probes' file.
    pub dir: PathBuf,
    /// Bytes written and read per disk repetition.
    pub size: u64,
    /// Repetitions of each probe.
    pub reps: usize,
    /// Bytes per read or write call (the paper's `dd` used 128 MB blocks).
    pub block: usize,
    /// Bytes copied per memory repetition.
    pub memory_size: usize,
    /// Bytes sent per network repetition.
    pub network_size: u64,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            dir: std::env::temp_dir(),
            size: 4_000_000_000,
            reps: 3,
            block: 8 << 20,
            memory_size: 256 << 20,
            network_size: 2 << 30,
        }
    }
}

/// Removes the probe file however the probe ends.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Sequential write and read of `opts.size` bytes in `opts.dir`; returns
/// (write, read).
pub fn probe_disk(opts: &ProbeOptions) -> (ProbeResult, ProbeResult) {
    if let Err(why) = check_space(&opts.dir, opts.size) {
        return (ProbeResult::Skipped(why.clone()), ProbeResult::Skipped(why));
    }
    let file = TempFile(
        opts.dir
            .join(format!(".sluice-probe-{}", std::process::id())),
    );
    let (mut writes, mut reads) = (Vec::new(), Vec::new());
    for _ in 0..opts.reps.max(1) {
        match write_once(&file.0, opts) {
            Ok(rate) => writes.push(rate),
            Err(e) => {
                let why = format!("writing {}: {e}", file.0.display());
                return (ProbeResult::Skipped(why.clone()), ProbeResult::Skipped(why));
            }
        }
        match read_once(&file.0, opts) {
            Ok(rate) => reads.push(rate),
            Err(e) => {
                return (
                    measured(writes),
                    ProbeResult::Skipped(format!("reading {}: {e}", file.0.display())),
                )
            }
        }
    }
    (measured(writes), measured(reads))
}

fn measured(samples: Vec<f64>) -> ProbeResult {
    ProbeResult::Measured(Measurement::from_samples(samples))
}

fn check_space(dir: &Path, size: u64) -> Result<(), String> {
    let st =
        rustix::fs::statvfs(dir).map_err(|e| format!("cannot inspect {}: {e}", dir.display()))?;
    let free = st.f_bavail * st.f_frsize;
    let need = size + (64 << 20);
    if free < need {
        return Err(format!(
            "needs {} MB free in {}, has {} MB (use --dir or --size)",
            need / 1_000_000,
            dir.display(),
            free / 1_000_000
        ));
    }
    Ok(())
}

fn write_once(path: &Path, opts: &ProbeOptions) -> std::io::Result<f64> {
    let block: Vec<u8> = (0..opts.block).map(|i| (i * 31 + 7) as u8).collect();
    let start = Instant::now();
    let mut f = File::create(path)?;
    let mut left = opts.size;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        f.write_all(&block[..n])?;
        left -= n as u64;
    }
    f.sync_all()?;
    Ok(opts.size as f64 / start.elapsed().as_secs_f64())
}

/// Reads the file back with `O_DIRECT` where the file system allows it,
/// else after asking the kernel to drop its cached pages.
fn read_once(path: &Path, opts: &ProbeOptions) -> std::io::Result<f64> {
    let f = File::open(path)?;
    rustix::fs::fadvise(&f, 0, None, Advice::DontNeed)?;
    let mut f = match rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECT, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(_) => f,
    };
    let mut raw = vec![0u8; opts.block + 4096];
    let off = raw.as_ptr().align_offset(4096);
    let buf = &mut raw[off..off + opts.block];
    let start = Instant::now();
    let mut total = 0u64;
    loop {
        let n = f.read(buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    Ok(total as f64 / start.elapsed().as_secs_f64())
}

/// Memory copy bandwidth (bytes copied per second).
pub fn probe_memory(opts: &ProbeOptions) -> ProbeResult {
    let n = opts.memory_size.max(1 << 20);
    let src = vec![1u8; n];
    let mut dst = vec![0u8; n];
    dst.copy_from_slice(&src);
    let samples = (0..opts.reps.max(1))
        .map(|_| {
            let start = Instant::now();
            dst.copy_from_slice(std::hint::black_box(&src));
            std::hint::black_box(&dst);
            n as f64 / start.elapsed().as_secs_f64()
        })
        .collect();
    measured(samples)
}

/// TCP throughput over loopback, one flow.
pub fn probe_network(opts: &ProbeOptions) -> ProbeResult {
    let mut samples = Vec::new();
    for _ in 0..opts.reps.max(1) {
        match send_once(opts.network_size) {
            Ok(rate) => samples.push(rate),
            Err(e) => return ProbeResult::Skipped(format!("loopback TCP: {e}")),
        }
    }
    measured(samples)
}

fn send_once(size: u64) -> std::io::Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let receiver = std::thread::spawn(move || answer(listener.accept()?.0));
    let rate = send_to(&addr.to_string(), size)?;
    receiver
        .join()
        .map_err(|_| std::io::Error::other("receiver panicked"))??;
    Ok(rate)
}

/// TCP throughput to a peer running [`serve_sink`] (`sluice probe
/// --network-listen`), one flow: the network between two hosts or network
/// namespaces rather than loopback.
pub fn probe_network_to(peer: &str, opts: &ProbeOptions) -> ProbeResult {
    let mut samples = Vec::new();
    for _ in 0..opts.reps.max(1) {
        match send_to(peer, opts.network_size) {
            Ok(rate) => samples.push(rate),
            Err(e) => return ProbeResult::Skipped(format!("TCP to {peer}: {e}")),
        }
    }
    measured(samples)
}

/// Accepts connections on `listener` forever, reading each to its end
/// and answering with the byte count (`u64`, little-endian).
pub fn serve_sink(listener: TcpListener) -> std::io::Result<()> {
    for conn in listener.incoming() {
        let s = conn?;
        std::thread::spawn(move || answer(s));
    }
    Ok(())
}

/// Reads `s` to its end and answers with the byte count.
fn answer(mut s: TcpStream) -> std::io::Result<()> {
    let n = sink(&mut s)?;
    s.write_all(&n.to_le_bytes())
}

/// Reads `s` to its end; returns the bytes read.
fn sink(s: &mut TcpStream) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0;
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Ok(total);
        }
        total += n as u64;
    }
}

/// Sends `size` bytes to the sink at `addr` and waits for its count, so
/// the time covers delivery, not just the local send buffer.
fn send_to(addr: &str, size: u64) -> std::io::Result<f64> {
    let chunk = vec![7u8; 1 << 20];
    let start = Instant::now();
    let mut s = TcpStream::connect(addr)?;
    let mut left = size;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        s.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    s.shutdown(std::net::Shutdown::Write)?;
    let mut got = [0u8; 8];
    s.read_exact(&mut got)?;
    let got = u64::from_le_bytes(got);
    if got != size {
        return Err(std::io::Error::other(format!(
            "received {got} of {size} bytes"
        )));
    }
    Ok(size as f64 / start.elapsed().as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(dir: &Path) -> ProbeOptions {
        ProbeOptions {
            dir: dir.to_owned(),
            size: 8 << 20,
            reps: 2,
            block: 1 << 20,
            memory_size: 4 << 20,
            network_size: 8 << 20,
        }
    }

    #[test]
    fn probes_measure_positive_rates_and_clean_up() {
        let d = tempfile::tempdir().unwrap();
        let o = small(d.path());
        let (w, r) = probe_disk(&o);
        assert!(
            w.median().unwrap() > 0.0 && r.median().unwrap() > 0.0,
            "{w:?} {r:?}"
        );
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
        assert!(probe_memory(&o).median().unwrap() > 0.0);
        assert!(probe_network(&o).median().unwrap() > 0.0);
    }

    #[test]
    fn too_little_space_is_a_stated_skip() {
        let d = tempfile::tempdir().unwrap();
        let mut o = small(d.path());
        o.size = u64::MAX / 4;
        let (w, r) = probe_disk(&o);
        match (w, r) {
            (ProbeResult::Skipped(a), ProbeResult::Skipped(_)) => {
                assert!(a.contains("needs"), "{a}")
            }
            other => panic!("expected skips, got {other:?}"),
        }
    }

    #[test]
    fn a_missing_directory_is_a_stated_skip() {
        let d = tempfile::tempdir().unwrap();
        let o = small(&d.path().join("nope"));
        let (w, _) = probe_disk(&o);
        assert!(
            matches!(w, ProbeResult::Skipped(ref s) if s.contains("nope")),
            "{w:?}"
        );
    }
}
