//! The cluster job report: the local report's totals plus per-worker
//! phases, locality, stragglers, recovery and receive skew.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::sched::{task_name, Attempt, AttemptState, Job, TaskKind, MAP, REDUCE};

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
    pub job_id: u64,
    pub job: String,
    /// The job as submitted.
    pub request: Option<sluice_request::JobRequest>,
    pub input: String,
    pub output: String,
    pub state: String,
    pub workers: usize,
    pub maps: usize,
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
    /// Winning map attempts that read their block on their own worker.
    pub data_local_maps: u32,
    /// Winning map attempts that streamed their block from another worker.
    pub remote_maps: u32,
    pub attempts: Attempts,
    pub per_worker: Vec<WorkerPhases>,
    pub stragglers: Vec<Straggler>,
    /// Largest reducer's received bytes over the mean (1.0 = even).
    pub receive_skew: f64,
    pub counters: BTreeMap<String, u64>,
    pub user_counters: BTreeMap<String, u64>,
}

impl ClusterReport {
    /// The report of `job`, whose winners' reports are in.
    pub fn of(job: &Job, workers: usize) -> Self {
        let now = Instant::now();
        let mut r = ClusterReport {
            job_id: job.id.0,
            job: job.request.job.clone(),
            request: Some((*job.request).clone()),
            input: job.input.clone(),
            output: job.output.clone(),
            state: job.state.name().into(),
            workers,
            maps: job.maps.len(),
            reducers: job.reducers,
            input_bytes: job
                .inputs
                .iter()
                .filter_map(|i| i.block())
                .map(|b| b.len)
                .sum(),
            ..ClusterReport::default()
        };
        let end = job.finished.unwrap_or(now);
        r.phases.total_s = end.duration_since(job.started).as_secs_f64();
        let mut per: BTreeMap<String, WorkerPhases> = BTreeMap::new();
        let mut reduce_bytes = Vec::new();
        for kind in [MAP, REDUCE] {
            let (mut first, mut last) = (None::<Instant>, None::<Instant>);
            let mut secs = Vec::new();
            for t in job.tasks(kind) {
                for a in &t.attempts {
                    r.count_attempt(a, now);
                    first = Some(first.map_or(a.started, |f| f.min(a.started)));
                }
                let Some(a) = t.winner() else { continue };
                last = Some(last.map_or(a.ended.unwrap_or(now), |l| l.max(a.ended.unwrap_or(now))));
                secs.push(a.seconds(now));
                let rep = a.report.clone().unwrap_or_default();
                let w = per.entry(a.uid.clone()).or_insert_with(|| WorkerPhases {
                    worker: a.uid.clone(),
                    addr: a.addr.clone(),
                    ..WorkerPhases::default()
                });
                merge_counters(&mut r.counters, &rep.counters);
                merge_counters(&mut r.user_counters, &rep.user_counters);
                r.task_memory_bytes = r.task_memory_bytes.max(rep.memory_bytes);
                if kind == MAP {
                    w.maps += 1;
                    w.map_s += a.seconds(now);
                    w.input_bytes += rep.input_bytes;
                    // Launched local, but its replica was damaged and it
                    // streamed the block from another worker: remote.
                    let fell_back = rep.fetch_seconds > 0.0;
                    if a.local && !fell_back {
                        r.data_local_maps += 1;
                    } else {
                        r.remote_maps += 1;
                    }
                } else {
                    w.reduces += 1;
                    w.reduce_s += a.seconds(now);
                    w.shuffle_bytes += rep.shuffle_bytes;
                    r.shuffle_bytes += rep.shuffle_bytes;
                    reduce_bytes.push(rep.shuffle_bytes);
                }
                if kind == REDUCE || job.map_only {
                    r.output_records += rep.output_records;
                    r.output_bytes += rep.output_bytes;
                }
            }
            let span = match (first, last) {
                (Some(f), Some(l)) => l.saturating_duration_since(f).as_secs_f64(),
                _ => 0.0,
            };
            if kind == MAP {
                r.phases.map_s = span;
            } else {
                r.phases.reduce_s = span;
            }
            r.find_stragglers(job, kind, &mut secs, now);
        }
        r.per_worker = per.into_values().collect();
        if !reduce_bytes.is_empty() {
            let mean = reduce_bytes.iter().sum::<u64>() as f64 / reduce_bytes.len() as f64;
            let max = reduce_bytes.iter().copied().max().unwrap_or(0) as f64;
            r.receive_skew = if mean > 0.0 { max / mean } else { 1.0 };
        }
        r
    }

    fn count_attempt(&mut self, a: &Attempt, now: Instant) {
        let n = &mut self.attempts;
        n.launched += 1;
        n.speculative += u32::from(a.speculative);
        n.damaged_replicas += a.report.as_ref().map_or(0, |r| r.corrupt.len() as u32);
        match a.state {
            AttemptState::Failed => n.failed += 1,
            AttemptState::Killed => n.killed += 1,
            AttemptState::Lost => n.lost += 1,
            AttemptState::Running | AttemptState::Succeeded => return,
        }
        n.wasted_s += a.seconds(now);
    }

    fn find_stragglers(&mut self, job: &Job, kind: TaskKind, secs: &mut [f64], now: Instant) {
        if secs.len() < 2 {
            return;
        }
        secs.sort_by(f64::total_cmp);
        let median = secs[secs.len() / 2];
        for (i, t) in job.tasks(kind).iter().enumerate() {
            if let Some(a) = t.winner() {
                if a.seconds(now) > 1.5 * median && a.seconds(now) > 0.5 {
                    self.stragglers.push(Straggler {
                        task: task_name(kind, i),
                        worker: a.uid.clone(),
                        seconds: a.seconds(now),
                        median_s: median,
                    });
                }
            }
        }
    }
}

fn merge_counters(into: &mut BTreeMap<String, u64>, from: &std::collections::HashMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}
