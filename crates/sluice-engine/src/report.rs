//! The job report: what ran, how long each phase took, what it counted.

use std::collections::BTreeMap;

use serde::Serialize;
use sluice_api::{Counters, TaskCounter};

/// Seconds spent in each phase.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PhaseTimes {
    /// Resolving input, planning splits, preparing output.
    pub setup_s: f64,
    /// Map tasks, including spills.
    pub map_s: f64,
    /// Intermediate merge passes.
    pub merge_s: f64,
    /// Reduce tasks: final merge, reduce, output writes.
    pub reduce_s: f64,
    /// Output commit.
    pub commit_s: f64,
    /// Wall-clock time of the whole job.
    pub total_s: f64,
}

/// Everything measured about one job; serialized as the JSON report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct JobReport {
    /// Job name.
    pub job: String,
    /// Input as given.
    pub input: String,
    /// Output directory.
    pub output: String,
    /// Worker threads.
    pub threads: usize,
    /// Memory budget in bytes.
    pub memory_budget: u64,
    /// Reduce partitions (0 for map-only jobs).
    pub reducers: u32,
    /// Input files.
    pub input_files: usize,
    /// Splits (map tasks).
    pub splits: usize,
    /// Input bytes on disk.
    pub input_bytes: u64,
    /// Output records written.
    pub output_records: u64,
    /// Output bytes written.
    pub output_bytes: u64,
    /// Spill bytes written (map spills and merge passes).
    pub spilled_bytes: u64,
    /// Spill runs written by map tasks.
    pub spill_files: usize,
    /// Bytes each map thread sorted before it spilled a run
    /// ([`EngineConfig::spill_target`](crate::EngineConfig::spill_target)).
    pub sort_buffer_bytes: usize,
    /// Intermediate merge passes.
    pub merge_passes: u32,
    /// Phase timings.
    pub phases: PhaseTimes,
    /// Framework counters by Hadoop-style name.
    pub counters: BTreeMap<String, u64>,
    /// User counters as `group.name`.
    pub user_counters: BTreeMap<String, u64>,
    /// Peak resident set size of the process in bytes.
    pub peak_rss_bytes: u64,
    /// Input megabytes (10^6 bytes) per second of total time.
    pub throughput_mb_s: f64,
    /// The performance model's account of the job: ideal time on the
    /// hardware profile, efficiency, phases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<sluice_model::Account>,
}

impl JobReport {
    /// Fills the counter maps from `c`.
    pub fn set_counters(&mut self, c: &Counters) {
        self.counters = TaskCounter::ALL
            .iter()
            .map(|&t| (t.name().to_owned(), c.get(t)))
            .collect();
        self.user_counters = c
            .user_counters()
            .map(|(g, n, v)| (format!("{g}.{n}"), v))
            .collect();
        self.spilled_bytes = c.get(TaskCounter::SpilledBytes);
    }

    /// A framework counter by its name (0 if absent).
    pub fn counter(&self, c: TaskCounter) -> u64 {
        self.counters.get(c.name()).copied().unwrap_or(0)
    }

    /// Accounts the job against the model on `hw`, its bytes where
    /// `residency` says they could be. Phase 1 is setup and map (read,
    /// map, spill); phase 2 is merge, reduce and commit. On one node there
    /// are no stragglers and no receive skew.
    pub fn account(
        &self,
        hw: &sluice_model::Hardware,
        sort_memory: f64,
        residency: sluice_model::Residency,
    ) -> sluice_model::Account {
        let p = &self.phases;
        let m = sluice_model::Measured {
            nodes: 1.0,
            input: self.input_bytes as f64,
            map_output: self.counter(TaskCounter::ShuffleBytes) as f64,
            output: self.output_bytes as f64,
            map_only: self.reducers == 0,
            sort_memory,
            phase1: p.setup_s + p.map_s,
            phase2: p.merge_s + p.reduce_s + p.commit_s,
            stragglers: 0.0,
            receive_skew: 0.0,
            residency,
        };
        sluice_model::account(&m, hw)
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}
