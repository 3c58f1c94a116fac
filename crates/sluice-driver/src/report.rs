//! One report for a job wherever it ran.

use std::collections::BTreeMap;

use serde::Serialize;
use sluice_api::TaskCounter;
use sluice_proto::report::ClusterReport;

/// Phase spans of a job, seconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Phases {
    /// From the first map's start to the last map's end (locally with
    /// setup: listing and planning the input).
    pub map_s: f64,
    /// From the end of the maps to the committed output: shuffle, merge,
    /// reduce and commit.
    pub reduce_s: f64,
    /// The whole job, submission to committed output.
    pub total_s: f64,
}

/// What one job did, with the same meaning on the local engine and on a
/// cluster; the target's own account is in `local` or `cluster`.
#[derive(Debug, Clone, Serialize)]
pub struct JobReport {
    /// `local` or `cluster`.
    pub target: &'static str,
    /// The job kind.
    pub job: String,
    /// The input as given: paths locally, data sets on a cluster.
    pub input: String,
    /// The output: a directory locally, a data set on a cluster.
    pub output: String,
    /// Map tasks: splits locally, blocks on a cluster, small ones packed
    /// several to a task.
    pub maps: usize,
    /// What the input came in: files locally, blocks on a cluster (more
    /// than `maps` when small ones were packed).
    pub input_pieces: usize,
    /// Reduce partitions (part files); 0 for a map-only job.
    pub reducers: u32,
    /// Bytes of input read.
    pub input_bytes: u64,
    /// Records and bytes written to the output.
    pub output_records: u64,
    /// Bytes written to the output.
    pub output_bytes: u64,
    /// Map output bytes reducers received.
    pub shuffle_bytes: u64,
    /// The memory budget one task ran under: locally the job's budget
    /// shared by its threads, on a cluster its worker's share (or the
    /// job's smaller request).
    pub task_memory_bytes: u64,
    /// Phase spans.
    pub phases: Phases,
    /// Framework counters by Hadoop-style name.
    pub counters: BTreeMap<String, u64>,
    /// User counters as `group.name`.
    pub user_counters: BTreeMap<String, u64>,
    /// The local engine's account (threads, spills, peak RSS, model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local: Option<sluice_engine::JobReport>,
    /// The cluster's account (workers, locality, attempts, stragglers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterReport>,
}

impl From<sluice_engine::JobReport> for JobReport {
    fn from(r: sluice_engine::JobReport) -> Self {
        let p = &r.phases;
        JobReport {
            target: "local",
            job: r.job.clone(),
            input: r.input.clone(),
            output: r.output.clone(),
            maps: r.splits,
            input_pieces: r.input_files,
            reducers: r.reducers,
            input_bytes: r.input_bytes,
            output_records: r.output_records,
            output_bytes: r.output_bytes,
            shuffle_bytes: r.counter(TaskCounter::ShuffleBytes),
            task_memory_bytes: r.memory_budget / r.threads.max(1) as u64,
            phases: Phases {
                map_s: p.setup_s + p.map_s,
                reduce_s: p.merge_s + p.reduce_s + p.commit_s,
                total_s: p.total_s,
            },
            counters: r.counters.clone(),
            user_counters: r.user_counters.clone(),
            local: Some(r),
            cluster: None,
        }
    }
}

impl From<ClusterReport> for JobReport {
    fn from(r: ClusterReport) -> Self {
        JobReport {
            target: "cluster",
            job: r.job.clone(),
            input: r.input.clone(),
            output: r.output.clone(),
            maps: r.maps,
            input_pieces: r.input_blocks,
            reducers: r.reducers,
            input_bytes: r.input_bytes,
            output_records: r.output_records,
            output_bytes: r.output_bytes,
            shuffle_bytes: r.shuffle_bytes,
            task_memory_bytes: r.task_memory_bytes,
            phases: Phases {
                map_s: r.phases.map_s,
                reduce_s: r.phases.reduce_s,
                total_s: r.phases.total_s,
            },
            counters: r.counters.clone(),
            user_counters: r.user_counters.clone(),
            local: None,
            cluster: Some(r),
        }
    }
}

impl JobReport {
    /// A framework counter by its name (0 if absent).
    pub fn counter(&self, c: TaskCounter) -> u64 {
        self.counters.get(c.name()).copied().unwrap_or(0)
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}
