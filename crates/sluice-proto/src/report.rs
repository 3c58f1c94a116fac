//! The cluster job report: the local report's totals plus per-worker
//! phases, locality, stragglers, recovery and receive skew. The
//! coordinator fills it in (`sluice_coordinator::report`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One worker's share of a job.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WorkerPhases {
    pub worker: String,
    pub addr: String,
    pub maps: u32,
    pub map_s: f64,
    pub reduces: u32,
    pub reduce_s: f64,
    pub input_bytes: u64,
    /// Shuffle bytes its reducers received.
    pub shuffle_bytes: u64,
    /// Its maps that read their block from its cache.
    #[serde(default)]
    pub cache_maps: u32,
    /// When its last winning map ended, seconds after the job started.
    #[serde(default)]
    pub map_end_s: f64,
    /// When its last winning reduce ended.
    #[serde(default)]
    pub reduce_end_s: f64,
    /// When its winning reduces had received all their input (each
    /// attempt's start plus its fetch seconds), the latest of them.
    #[serde(default)]
    pub fetch_end_s: f64,
}

/// Seed 004's time-based losses of a job on several workers, each phase's
/// per-worker finish times against the last.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeSkew {
    /// The mean wait from a worker's last map's end to the last worker's.
    pub map_stragglers_s: f64,
    /// The same for reduces.
    pub reduce_stragglers_s: f64,
    /// Receive skew: the last worker's shuffle completion minus the mean
    /// of the workers' (the seed's "last minus mean incoming-flow
    /// completion per node").
    pub receive_skew_s: f64,
}

impl TimeSkew {
    /// The figures of `workers`' finish times (0 with fewer than two).
    pub fn of(workers: &[WorkerPhases]) -> Self {
        let maps: Vec<f64> = workers
            .iter()
            .filter(|w| w.maps > 0)
            .map(|w| w.map_end_s)
            .collect();
        let reduces: Vec<&WorkerPhases> = workers.iter().filter(|w| w.reduces > 0).collect();
        let ends: Vec<f64> = reduces.iter().map(|w| w.reduce_end_s).collect();
        let fetches: Vec<f64> = reduces.iter().map(|w| w.fetch_end_s).collect();
        TimeSkew {
            map_stragglers_s: last_minus_mean(&maps),
            reduce_stragglers_s: last_minus_mean(&ends),
            receive_skew_s: last_minus_mean(&fetches),
        }
    }
}

/// The largest of `xs` minus their mean, which is also the mean of each
/// one's wait for the largest (0 for fewer than two).
fn last_minus_mean(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let last = xs.iter().copied().fold(f64::MIN, f64::max);
    last - xs.iter().sum::<f64>() / xs.len() as f64
}

/// What the block cache served a job's maps.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CacheUse {
    /// Winning maps that read their block from their worker's cache.
    pub maps_from_cache: u32,
    /// Input bytes those maps read from memory.
    pub bytes_from_cache: u64,
    /// Input bytes the other maps read from a disk (their worker's or,
    /// streamed, another's).
    pub bytes_from_disk: u64,
    /// Bytes from cache over all input bytes read (0 to 1).
    pub hit_ratio: f64,
}

/// A task that ran much longer than its phase's median.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Straggler {
    pub task: String,
    pub worker: String,
    pub seconds: f64,
    pub median_s: f64,
}

/// Attempt counts.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Attempts {
    pub launched: u32,
    pub failed: u32,
    pub killed: u32,
    pub lost: u32,
    pub speculative: u32,
    /// Damaged input replicas the job's attempts met and read around (or
    /// failed on, without counting against their tasks).
    #[serde(default)]
    pub damaged_replicas: u32,
    /// Seconds of attempts whose work was thrown away (failed, killed,
    /// lost, or finished outputs recomputed): the work a recovery redid.
    pub wasted_s: f64,
}

/// Slots a job held.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SlotUse {
    /// Seconds of all map attempts.
    pub map_slot_s: f64,
    /// Seconds of all reduce attempts.
    pub reduce_slot_s: f64,
    /// Map slots held on average over the map span.
    pub mean_map_slots: f64,
    /// Reduce slots held on average over the reduce span.
    pub mean_reduce_slots: f64,
    /// Slots held over time, from submission to the end: at most
    /// [`SLOT_POINTS`] equal intervals, each with the mean slots held in
    /// it.
    #[serde(default)]
    pub over_time: Vec<SlotPoint>,
}

/// The most intervals [`SlotUse::over_time`] has.
pub const SLOT_POINTS: usize = 60;

/// Slots a job held in one interval.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SlotPoint {
    /// The interval's start, seconds from submission.
    pub t_s: f64,
    /// Mean map slots held in it.
    pub maps: f64,
    /// Mean reduce slots held in it.
    pub reduces: f64,
}

/// One attempt of a task, for the job's timeline.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AttemptSpan {
    /// The task, `m00003` or `r00000`.
    pub task: String,
    /// Its attempt number within the task.
    pub attempt: u32,
    /// The worker it ran on (its uid).
    pub worker: String,
    /// Seconds from the job's submission to its start.
    pub start_s: f64,
    /// Seconds from the job's submission to its end (to now while it
    /// runs).
    pub end_s: f64,
    /// `running`, `succeeded`, `failed`, `killed` or `lost`.
    pub outcome: String,
    /// A backup attempt launched by speculation.
    pub speculative: bool,
    /// The locality level it was launched at (maps; empty for reduces).
    pub level: String,
}

/// The most attempts [`ClusterReport::timeline`] holds; a job with more
/// keeps the first ones launched and counts the rest in
/// [`ClusterReport::timeline_dropped`].
pub const TIMELINE_ATTEMPTS: usize = 20_000;

/// Phase spans, seconds from submission.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Phases {
    /// First map start to last winning map end.
    pub map_s: f64,
    /// First reduce start to last winning reduce end.
    pub reduce_s: f64,
    pub total_s: f64,
}

/// Everything measured about one cluster job.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClusterReport {
    /// The job's id, as text (`job-1-17`); older reports hold the number.
    #[serde(with = "crate::ids::job_text")]
    pub job_id: crate::ids::JobId,
    pub job: String,
    /// The pool it ran in (fair scheduling).
    #[serde(default)]
    pub pool: String,
    /// The job as submitted.
    pub request: Option<sluice_request::JobRequest>,
    pub input: String,
    pub output: String,
    pub state: String,
    pub workers: usize,
    pub maps: usize,
    /// Blocks the maps read (more than `maps` when small ones were packed).
    #[serde(default)]
    pub input_blocks: usize,
    pub reducers: u32,
    pub input_bytes: u64,
    /// The largest memory budget a winning task ran with: its worker's
    /// `--memory` shared by its slots, or the job's smaller `--memory`.
    #[serde(default)]
    pub task_memory_bytes: u64,
    pub output_records: u64,
    pub output_bytes: u64,
    pub shuffle_bytes: u64,
    pub phases: Phases,
    /// Slots it held: task-seconds of every attempt, and their mean over
    /// its map and reduce spans (what fair sharing divides).
    #[serde(default)]
    pub slots: SlotUse,
    /// Winning map attempts that read their block on their own worker.
    pub data_local_maps: u32,
    /// Winning map attempts that streamed their block from another worker.
    pub remote_maps: u32,
    /// Winning map attempts by the locality level they ran at (`cache`,
    /// `node`, `rack`, `datacenter`, `any`): as read, so a map that fell
    /// back to another worker's replica counts as `any`, one that read its
    /// block from its worker's cache as `cache`, and one launched for a
    /// cached block that was evicted meanwhile as `node`.
    #[serde(default)]
    pub maps_by_level: BTreeMap<String, u32>,
    /// What the block cache served.
    #[serde(default)]
    pub cache: CacheUse,
    pub attempts: Attempts,
    pub per_worker: Vec<WorkerPhases>,
    pub stragglers: Vec<Straggler>,
    /// Largest reducer's received bytes over the mean (1.0 = even).
    pub receive_skew: f64,
    /// Seed 004's stragglers and receive skew in seconds.
    #[serde(default)]
    pub time_skew: TimeSkew,
    pub counters: BTreeMap<String, u64>,
    pub user_counters: BTreeMap<String, u64>,
    /// Every attempt, maps then reduces, each task's in launch order (at
    /// most [`TIMELINE_ATTEMPTS`]).
    #[serde(default)]
    pub timeline: Vec<AttemptSpan>,
    /// Attempts left out of [`ClusterReport::timeline`].
    #[serde(default)]
    pub timeline_dropped: u64,
    /// The model's account of the job (seed 004): its ideal time on the
    /// coordinator's hardware figures and its efficiency.
    #[serde(default)]
    pub model: Option<sluice_model::Account>,
    /// How its reduces were started (`slowstart F` or `arts`).
    #[serde(default)]
    pub reduce_scheduler: String,
    /// The winning maps' output bytes by the data center they ran in.
    #[serde(default)]
    pub map_output_by_datacenter: BTreeMap<String, u64>,
    /// Bytes that crossed from one data center to another, per ordered
    /// pair with any (seed 003's WAN bytes).
    #[serde(default)]
    pub crossings: Vec<Crossing>,
    /// All of [`ClusterReport::crossings`]' bytes.
    #[serde(default)]
    pub wan_bytes: u64,
}

/// Bytes that went from data center `from` to `to` for one job: every
/// reduce attempt's shuffle fetches (a finished attempt's report, a killed
/// or lost one's last heartbeat: a fetch in flight then is not counted),
/// the blocks map attempts streamed from another worker, and the copies
/// of output blocks (`submit --replication`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Crossing {
    pub from: String,
    pub to: String,
    pub shuffle_bytes: u64,
    pub read_bytes: u64,
    pub replication_bytes: u64,
}

impl Crossing {
    /// Every byte of it.
    pub fn bytes(&self) -> u64 {
        self.shuffle_bytes + self.read_bytes + self.replication_bytes
    }
}

#[cfg(test)]
mod time_skew_tests {
    use super::*;

    fn worker(
        maps: u32,
        map_end_s: f64,
        reduces: u32,
        reduce_end_s: f64,
        fetch_end_s: f64,
    ) -> WorkerPhases {
        WorkerPhases {
            maps,
            map_end_s,
            reduces,
            reduce_end_s,
            fetch_end_s,
            ..WorkerPhases::default()
        }
    }

    #[test]
    fn waits_for_the_last_worker_averaged() {
        // Maps end at 2, 4 and 9 s: waits 7, 5, 0, mean 4. Reduces end at 10
        // and 12 (mean wait 1), shuffles complete at 8 and 11 (skew 1.5);
        // the third worker ran no reduce and counts in neither.
        let ws = [
            worker(3, 2.0, 1, 10.0, 8.0),
            worker(3, 4.0, 1, 12.0, 11.0),
            worker(1, 9.0, 0, 0.0, 0.0),
        ];
        let t = TimeSkew::of(&ws);
        assert!((t.map_stragglers_s - 4.0).abs() < 1e-12, "{t:?}");
        assert!((t.reduce_stragglers_s - 1.0).abs() < 1e-12, "{t:?}");
        assert!((t.receive_skew_s - 1.5).abs() < 1e-12, "{t:?}");
    }

    #[test]
    fn one_worker_has_no_skew() {
        let t = TimeSkew::of(&[worker(5, 3.0, 2, 6.0, 4.0)]);
        assert_eq!(t, TimeSkew::default());
    }
}
