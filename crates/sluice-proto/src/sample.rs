//! Node utilization sampled from `/proc` at a fixed interval.
//!
//! A [`Sampler`] keeps the last hour of samples in a ring; a worker runs
//! one and serves it over the data plane (`STATS`), so a benchmark can ask
//! each node what it did during a job's window. Counters are cumulative
//! (as the kernel keeps them); [`rates`] turns consecutive samples into
//! utilization.
//!
//! A sample on the wire is seven little-endian `u64`s, 56 bytes:
//! `t_ms` (Unix milliseconds), `host_busy` and `host_total` (jiffies of
//! the `cpu` line of `/proc/stat`: busy is everything but idle and
//! iowait), `proc_ticks` (this process's utime + stime from
//! `/proc/self/stat`), `rx` and `tx` (bytes over every interface but `lo`
//! in `/proc/net/dev`, which is per network namespace), `lo` (bytes
//! received on `lo`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Bytes of one encoded sample.
pub const SAMPLE_BYTES: usize = 56;

/// One reading of the node's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    /// Unix milliseconds.
    pub t_ms: u64,
    /// Host CPU jiffies not idle.
    pub host_busy: u64,
    /// Host CPU jiffies in all.
    pub host_total: u64,
    /// CPU ticks of this process (user + system).
    pub proc_ticks: u64,
    /// Bytes received on interfaces other than `lo`.
    pub rx: u64,
    /// Bytes sent on interfaces other than `lo`.
    pub tx: u64,
    /// Bytes received on `lo`.
    pub lo: u64,
}

impl Sample {
    /// Reads the counters now. Missing files (not Linux) read as zeros.
    pub fn now() -> Sample {
        let (host_busy, host_total) = host_cpu().unwrap_or_default();
        let (rx, tx, lo) = net_bytes().unwrap_or_default();
        Sample {
            t_ms: crate::now_ms(),
            host_busy,
            host_total,
            proc_ticks: proc_ticks().unwrap_or_default(),
            rx,
            tx,
            lo,
        }
    }

    /// Appends the 56-byte encoding.
    pub fn encode(&self, out: &mut Vec<u8>) {
        for v in [
            self.t_ms,
            self.host_busy,
            self.host_total,
            self.proc_ticks,
            self.rx,
            self.tx,
            self.lo,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// Decodes samples; a trailing partial sample is ignored.
    pub fn decode_all(bytes: &[u8]) -> Vec<Sample> {
        bytes
            .chunks_exact(SAMPLE_BYTES)
            .map(|c| {
                let v = |i: usize| u64::from_le_bytes(c[i * 8..i * 8 + 8].try_into().expect("8"));
                Sample {
                    t_ms: v(0),
                    host_busy: v(1),
                    host_total: v(2),
                    proc_ticks: v(3),
                    rx: v(4),
                    tx: v(5),
                    lo: v(6),
                }
            })
            .collect()
    }
}

/// Utilization between two consecutive samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Rate {
    /// Midpoint, Unix milliseconds.
    pub t_ms: u64,
    /// Host CPU busy, 0..1 of all cores.
    pub host_cpu: f64,
    /// This process's CPU, in cores.
    pub proc_cores: f64,
    /// Receive rate on interfaces other than `lo`, bytes/s.
    pub rx_bps: f64,
    /// Send rate on interfaces other than `lo`, bytes/s.
    pub tx_bps: f64,
    /// Receive rate on `lo`, bytes/s.
    pub lo_bps: f64,
}

/// Rates over each pair of consecutive samples.
pub fn rates(s: &[Sample]) -> Vec<Rate> {
    let hz = clock_ticks() as f64;
    s.windows(2)
        .filter(|w| w[1].t_ms > w[0].t_ms)
        .map(|w| {
            let (a, b) = (w[0], w[1]);
            let secs = (b.t_ms - a.t_ms) as f64 / 1e3;
            let total = b.host_total.saturating_sub(a.host_total);
            Rate {
                t_ms: (a.t_ms + b.t_ms) / 2,
                host_cpu: if total == 0 {
                    0.0
                } else {
                    b.host_busy.saturating_sub(a.host_busy) as f64 / total as f64
                },
                proc_cores: b.proc_ticks.saturating_sub(a.proc_ticks) as f64 / hz / secs,
                rx_bps: b.rx.saturating_sub(a.rx) as f64 / secs,
                tx_bps: b.tx.saturating_sub(a.tx) as f64 / secs,
                lo_bps: b.lo.saturating_sub(a.lo) as f64 / secs,
            }
        })
        .collect()
}

/// Samples the node every `interval` into a ring of the last `keep`.
#[derive(Debug, Clone)]
pub struct Sampler {
    ring: Arc<Mutex<VecDeque<Sample>>>,
    stop: Arc<AtomicBool>,
}

impl Sampler {
    /// Starts sampling on a thread of its own.
    pub fn start(interval: Duration, keep: usize) -> Sampler {
        let s = Sampler {
            ring: Arc::new(Mutex::new(VecDeque::with_capacity(keep.min(1 << 16)))),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let (ring, stop) = (s.ring.clone(), s.stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let sample = Sample::now();
                {
                    let mut r = ring.lock().unwrap_or_else(|e| e.into_inner());
                    if r.len() >= keep.max(1) {
                        r.pop_front();
                    }
                    r.push_back(sample);
                }
                std::thread::sleep(interval);
            }
        });
        s
    }

    /// Samples taken at or after `t_ms`, plus the one just before (so the
    /// first interval of the window has a start).
    pub fn since(&self, t_ms: u64) -> Vec<Sample> {
        let r = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        let first = r.iter().position(|s| s.t_ms >= t_ms).unwrap_or(r.len());
        r.iter().skip(first.saturating_sub(1)).copied().collect()
    }

    /// Stops the sampling thread.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Clock ticks per second of `/proc`'s CPU times: the kernel's `USER_HZ`,
/// which its user ABI fixes at 100 on every architecture Linux runs
/// Sluice on (`sysconf(_SC_CLK_TCK)` would need `unsafe`).
fn clock_ticks() -> u64 {
    100
}

fn host_cpu() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

fn proc_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 here.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

fn net_bytes() -> Option<(u64, u64, u64)> {
    let dev = std::fs::read_to_string("/proc/net/dev").ok()?;
    let (mut rx, mut tx, mut lo) = (0u64, 0u64, 0u64);
    for line in dev.lines().skip(2) {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let v: Vec<u64> = rest
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        let (r, t) = (v.first().copied()?, v.get(8).copied()?);
        if name.trim() == "lo" {
            lo += r;
        } else {
            rx += r;
            tx += t;
        }
    }
    Some((rx, tx, lo))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_round_trip_and_make_rates() {
        let a = Sample {
            t_ms: 1000,
            host_busy: 10,
            host_total: 100,
            proc_ticks: 5,
            rx: 0,
            tx: 0,
            lo: 0,
        };
        let b = Sample {
            t_ms: 1100,
            host_busy: 20,
            host_total: 120,
            proc_ticks: 5 + clock_ticks() / 10,
            rx: 1000,
            tx: 500,
            lo: 100,
        };
        let mut wire = Vec::new();
        a.encode(&mut wire);
        b.encode(&mut wire);
        assert_eq!(wire.len(), 2 * SAMPLE_BYTES);
        let back = Sample::decode_all(&wire);
        assert_eq!(back, vec![a, b]);
        let r = rates(&back)[0];
        assert!((r.host_cpu - 0.5).abs() < 1e-9);
        assert!((r.proc_cores - 1.0).abs() < 1e-9);
        assert!((r.rx_bps - 10_000.0).abs() < 1e-6);
        assert!((r.lo_bps - 1_000.0).abs() < 1e-6);
    }

    #[test]
    fn the_proc_files_parse_here() {
        let s = Sample::now();
        assert!(s.host_total > 0 && s.host_busy <= s.host_total);
        let sampler = Sampler::start(Duration::from_millis(5), 4);
        std::thread::sleep(Duration::from_millis(60));
        sampler.stop();
        let got = sampler.since(0);
        assert!(!got.is_empty() && got.len() <= 4, "{}", got.len());
    }
}
