//! Hardware probes and the saved hardware profile.
//!
//! Each probe runs several times; the profile keeps the median, the range
//! and the spread of each figure, because the machines Sluice is measured on
//! are shared and noisy. A probe that cannot run (no space, no permission)
//! is recorded with the reason, and [`hardware`] falls back to
//! a stated default for that figure, naming it.

mod probes;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use probes::{
    probe_disk, probe_memory, probe_network, probe_network_to, serve_sink, ProbeOptions,
};
use sluice_model::{
    Hardware, DEFAULT_DISK_READ, DEFAULT_DISK_WRITE, DEFAULT_MEMORY, DEFAULT_NETWORK,
};

/// Probe and profile failures.
#[derive(Debug, Error)]
pub enum ProbeError {
    /// A file operation failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A profile file does not parse.
    #[error("hardware profile {} is not valid: {detail}", path.display())]
    BadProfile {
        /// The file.
        path: PathBuf,
        /// Why.
        detail: String,
    },
}

/// Repeated measurements of one rate, in bytes per second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Each repetition's rate.
    pub samples: Vec<f64>,
    /// The median.
    pub median: f64,
    /// The slowest repetition.
    pub min: f64,
    /// The fastest repetition.
    pub max: f64,
    /// `(max - min) / median`.
    pub spread: f64,
}

impl Measurement {
    /// Summarizes samples (at least one).
    pub fn from_samples(mut samples: Vec<f64>) -> Self {
        samples.retain(|s| s.is_finite());
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = match n {
            0 => 0.0,
            _ if n % 2 == 1 => sorted[n / 2],
            _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
        };
        let (min, max) = (
            sorted.first().copied().unwrap_or(0.0),
            sorted.last().copied().unwrap_or(0.0),
        );
        Measurement {
            spread: if median > 0.0 {
                (max - min) / median
            } else {
                0.0
            },
            samples,
            median,
            min,
            max,
        }
    }
}

/// The outcome of one probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeResult {
    /// It ran.
    Measured(Measurement),
    /// It could not run, and why.
    Skipped(String),
}

impl ProbeResult {
    /// The median rate, if measured.
    pub fn median(&self) -> Option<f64> {
        match self {
            ProbeResult::Measured(m) => Some(m.median),
            ProbeResult::Skipped(_) => None,
        }
    }

    /// The fastest repetition's rate, if measured.
    pub fn fastest(&self) -> Option<f64> {
        match self {
            ProbeResult::Measured(m) => Some(m.max),
            ProbeResult::Skipped(_) => None,
        }
    }
}

/// What `sluice probe` saves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Seconds since the Unix epoch when measured.
    pub measured_at: u64,
    /// The directory the disk probes used.
    pub dir: String,
    /// Bytes per disk probe repetition.
    pub size: u64,
    /// Sequential read, page cache bypassed.
    pub disk_read: ProbeResult,
    /// Sequential write including fsync.
    pub disk_write: ProbeResult,
    /// Memory copy bandwidth.
    pub memory: ProbeResult,
    /// TCP throughput over loopback.
    pub network: ProbeResult,
    /// A cluster's per-node receive rate with every worker sending to
    /// every other at once (`sluice probe --network --all-to-all`, seed
    /// 004's shuffle probe); the model's `N` when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_all_to_all: Option<ProbeResult>,
}

impl Profile {
    /// Writes the profile as JSON, creating parent directories.
    pub fn save(&self, path: &Path) -> Result<(), ProbeError> {
        let io = |op, e| ProbeError::Io {
            op,
            path: path.to_owned(),
            source: e,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io("creating", e))?;
        }
        let json = serde_json::to_string_pretty(self).unwrap_or_default();
        std::fs::write(path, json).map_err(|e| io("writing", e))
    }

    /// Reads a saved profile.
    pub fn load(path: &Path) -> Result<Self, ProbeError> {
        let text = std::fs::read_to_string(path).map_err(|e| ProbeError::Io {
            op: "reading",
            path: path.to_owned(),
            source: e,
        })?;
        serde_json::from_str(&text).map_err(|e| ProbeError::BadProfile {
            path: path.to_owned(),
            detail: e.to_string(),
        })
    }
}

/// Rates for the model from a saved profile, with defaults (named in
/// `source`) for probes that were skipped. Each rate is its probe's fastest
/// repetition, not the median: the model is a bound, and on a shared
/// machine a job can meet the disk at its best (a TeraSort of 1 GB wrote
/// its synced output at over 1.3 GB/s while the median write probe said
/// 0.4 GB/s).
pub fn hardware(p: &Profile, path: &Path) -> Hardware {
    let mut defaults = Vec::new();
    let mut pick = |r: &ProbeResult, default: f64, name: &str| {
        r.fastest().filter(|v| *v > 0.0).unwrap_or_else(|| {
            defaults.push(format!("{name} {:.0} MB/s", default / 1e6));
            default
        })
    };
    let disk_read = pick(&p.disk_read, DEFAULT_DISK_READ, "disk read");
    let disk_write = pick(&p.disk_write, DEFAULT_DISK_WRITE, "disk write");
    let memory = pick(&p.memory, DEFAULT_MEMORY, "memory");
    let all_to_all = p
        .network_all_to_all
        .as_ref()
        .and_then(ProbeResult::fastest)
        .filter(|v| *v > 0.0);
    let network = match all_to_all {
        Some(n) => n,
        None => pick(&p.network, DEFAULT_NETWORK, "network"),
    };
    let mut source = format!(
        "profile {} (each rate its probe's fastest repetition)",
        path.display()
    );
    if all_to_all.is_some() {
        source.push_str(" (network: the all-to-all probe between workers)");
    }
    if !defaults.is_empty() {
        source.push_str(&format!(
            " (defaults for skipped probes: {})",
            defaults.join(", ")
        ));
    }
    Hardware {
        disk_read,
        disk_write,
        network,
        memory,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_spread() {
        let m = Measurement::from_samples(vec![3.0, 1.0, 2.0]);
        assert_eq!((m.median, m.min, m.max), (2.0, 1.0, 3.0));
        assert_eq!(m.spread, 1.0);
        assert_eq!(Measurement::from_samples(vec![1.0, 3.0]).median, 2.0);
    }

    #[test]
    fn skipped_probes_fall_back_to_named_defaults() {
        let p = Profile {
            measured_at: 0,
            dir: ".".into(),
            size: 1,
            disk_read: ProbeResult::Measured(Measurement::from_samples(vec![60e6, 100e6, 80e6])),
            disk_write: ProbeResult::Skipped("no space".into()),
            memory: ProbeResult::Skipped("x".into()),
            network: ProbeResult::Measured(Measurement::from_samples(vec![1e9])),
            network_all_to_all: None,
        };
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("hw.json");
        p.save(&path).unwrap();
        let h = hardware(&Profile::load(&path).unwrap(), &path);
        assert_eq!(h.disk_read, 100e6, "the fastest of 60, 100 and 80 MB/s");
        assert_eq!(h.disk_write, DEFAULT_DISK_WRITE);
        assert!(
            h.source
                .contains("defaults for skipped probes: disk write 400 MB/s"),
            "{}",
            h.source
        );
        assert_eq!(h.network, 1e9, "loopback without an all-to-all probe");
        // A profile saved before the all-to-all field existed reads; with
        // it, the all-to-all rate is the model's N.
        let mut older = serde_json::to_value(&p).unwrap();
        older.as_object_mut().unwrap().remove("network_all_to_all");
        std::fs::write(&path, older.to_string()).unwrap();
        assert_eq!(Profile::load(&path).unwrap(), p);
        let with = Profile {
            network_all_to_all: Some(ProbeResult::Measured(Measurement::from_samples(vec![
                110e6,
            ]))),
            ..p.clone()
        };
        with.save(&path).unwrap();
        let h = hardware(&Profile::load(&path).unwrap(), &path);
        assert_eq!(h.network, 110e6);
        assert!(h.source.contains("all-to-all"), "{}", h.source);
        std::fs::write(&path, "{not json").unwrap();
        assert!(Profile::load(&path)
            .unwrap_err()
            .to_string()
            .contains("not valid"));
    }
}
