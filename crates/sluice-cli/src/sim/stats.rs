//! What simulated workers count, merged across their processes, and the
//! costs of a process read from `/proc`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Buckets of a [`Latency`] histogram: bucket `i` holds times up to
/// `GROWTH^i` microseconds, so a percentile is within 2% of the true one;
/// the last bucket (about 37 s) takes everything longer.
const BUCKETS: usize = 880;
const GROWTH: f64 = 1.02;

/// A histogram of times, small enough to send whole however many beats
/// it counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Counts per bucket, trailing empty buckets left out.
    pub counts: Vec<u64>,
}

impl Latency {
    /// Counts one time.
    pub fn add(&mut self, t: Duration) {
        let us = t.as_secs_f64() * 1e6;
        let i = if us <= 1.0 {
            0
        } else {
            (us.ln() / GROWTH.ln()).ceil() as usize
        };
        let i = i.min(BUCKETS - 1);
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
    }

    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: &Latency) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    /// Times counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The `q` quantile (0..=1) in milliseconds; 0 when nothing was
    /// counted.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        let total = self.total();
        if total == 0 {
            return 0.0;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return GROWTH.powi(i as i32) / 1e3;
            }
        }
        0.0
    }
}

/// What the simulated workers of one process did, and what that process
/// cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SimStats {
    /// Simulated workers that registered (a registration again counts
    /// again).
    pub registered: u64,
    /// Workers that could not register or connect.
    pub errors: u64,
    /// Heartbeats answered.
    pub heartbeats: u64,
    /// Heartbeats that failed (what they carried went with a later one).
    pub failed_beats: u64,
    /// Heartbeats that carried a full block report.
    pub block_reports: u64,
    /// Map and reduce attempts handed to these workers.
    pub launched_maps: u64,
    pub launched_reduces: u64,
    /// Attempts reported done (ok).
    pub reported_maps: u64,
    pub reported_reduces: u64,
    /// Bytes of map output reported (the sampled sizes).
    pub map_output_bytes: u64,
    /// Bytes of reduce output blocks reported.
    pub reduce_output_bytes: u64,
    /// `MapOutputs` calls of simulated reduces.
    pub map_output_calls: u64,
    /// Workers that went silent (they stop heartbeating at their first
    /// task, as a worker whose host died).
    pub silenced: u64,
    /// Every heartbeat's round trip, held ones included.
    pub beats: Latency,
    /// Round trips of heartbeats that reported a finished attempt and
    /// were answered with a new one: the coordinator's turnaround.
    pub turnaround: Latency,
    /// Round trips of simulated reduces' `MapOutputs` calls.
    #[serde(default)]
    pub map_output_rtt: Latency,
    /// When the last map report was sent, in ms since the Unix epoch
    /// (the latest across processes).
    #[serde(default)]
    pub last_map_sent_ms: u64,
    /// When each simulated reduce knew every map output, in ms since the
    /// Unix epoch.
    #[serde(default)]
    pub shuffle_known_ms: Vec<u64>,
    /// CPU seconds of the process (user and system).
    pub cpu_s: f64,
    /// The process's peak resident memory.
    pub peak_rss_bytes: u64,
}

impl SimStats {
    /// Adds the counts of another process to these (CPU summed, memory
    /// the largest).
    pub fn merge(&mut self, o: &SimStats) {
        self.registered += o.registered;
        self.errors += o.errors;
        self.heartbeats += o.heartbeats;
        self.failed_beats += o.failed_beats;
        self.block_reports += o.block_reports;
        self.launched_maps += o.launched_maps;
        self.launched_reduces += o.launched_reduces;
        self.reported_maps += o.reported_maps;
        self.reported_reduces += o.reported_reduces;
        self.map_output_bytes += o.map_output_bytes;
        self.reduce_output_bytes += o.reduce_output_bytes;
        self.map_output_calls += o.map_output_calls;
        self.silenced += o.silenced;
        self.beats.merge(&o.beats);
        self.turnaround.merge(&o.turnaround);
        self.map_output_rtt.merge(&o.map_output_rtt);
        self.last_map_sent_ms = self.last_map_sent_ms.max(o.last_map_sent_ms);
        self.shuffle_known_ms.extend(&o.shuffle_known_ms);
        self.cpu_s += o.cpu_s;
        self.peak_rss_bytes = self.peak_rss_bytes.max(o.peak_rss_bytes);
    }
}

impl SimStats {
    /// How long after the last map was reported the reduces knew every
    /// map output: the median and the longest, in ms (0 when no reduce
    /// waited for it).
    pub fn shuffle_lag_ms(&self) -> (f64, f64) {
        let mut lags: Vec<u64> = self
            .shuffle_known_ms
            .iter()
            .map(|&t| t.saturating_sub(self.last_map_sent_ms))
            .collect();
        lags.sort_unstable();
        let median = lags.get(lags.len() / 2).copied().unwrap_or(0);
        (median as f64, lags.last().copied().unwrap_or(0) as f64)
    }
}

/// Now, in ms since the Unix epoch.
pub fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// CPU seconds process `pid` has used, all its threads (user and
/// system): fields 14 and 15 of `/proc/PID/stat`, in the kernel's
/// user-visible ticks of 1/100 s (`USER_HZ`, fixed at 100 on Linux).
pub fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name, in parentheses, may hold spaces: count after it.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let f: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    f.iter().sum::<u64>() as f64 / 100.0
}

/// Process `pid`'s peak resident memory (`VmHWM` of `/proc/PID/status`).
pub fn peak_rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_two_percent() {
        let mut l = Latency::default();
        for ms in 1..=100 {
            l.add(Duration::from_millis(ms));
        }
        let p50 = l.quantile_ms(0.5);
        let p99 = l.quantile_ms(0.99);
        assert!((50.0..=51.0).contains(&p50), "{p50}");
        assert!((99.0..=101.0).contains(&p99), "{p99}");
        assert_eq!(l.total(), 100);
    }

    #[test]
    fn merged_histograms_count_both() {
        let mut a = Latency::default();
        a.add(Duration::from_millis(1));
        let mut b = Latency::default();
        b.add(Duration::from_secs(2));
        b.add(Duration::from_secs(2));
        a.merge(&b);
        assert_eq!(a.total(), 3);
        assert!(a.quantile_ms(0.9) >= 2000.0 && a.quantile_ms(0.9) < 2040.0);
        assert_eq!(Latency::default().quantile_ms(0.5), 0.0);
    }

    #[test]
    fn a_process_cpu_counts_all_its_threads() {
        let me = std::process::id();
        assert!(peak_rss_bytes(me) > 0);
        let before = cpu_s(me);
        // Another thread burns CPU until the process's count shows it.
        let burner = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            let mut x = 0u64;
            while cpu_s(me) < before + 0.05 {
                assert!(std::time::Instant::now() < deadline, "CPU not counted");
                for i in 0..100_000u64 {
                    x = x.wrapping_add(i * i);
                }
            }
            x
        });
        burner.join().unwrap();
        assert!(cpu_s(me) >= before + 0.05);
    }
}
