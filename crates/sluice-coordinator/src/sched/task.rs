//! Tasks and their attempts: each attempt's lifecycle ([`AttemptState`]),
//! a task's state as its attempts make it ([`Task`]), and the task a
//! decision picks ([`Pick`]).

use std::sync::Arc;
use std::time::Instant;

use sluice_proto::ids::{TaskKind, WorkerId};

use super::kept::Kept;
use super::locality::{Asker, Locality};
use sluice_proto::proto;

/// Map task kind.
pub const MAP: TaskKind = TaskKind::Map;
/// Reduce task kind.
pub const REDUCE: TaskKind = TaskKind::Reduce;

/// A task chosen for a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    pub kind: TaskKind,
    pub index: usize,
    /// How close to its input it runs (reduces: [`Locality::Any`]).
    pub level: Locality,
    /// A backup of a straggler.
    pub speculative: bool,
}

/// Where an attempt stands.
///
/// ```text
///          report ok
/// Running ──────────▶ Succeeded ──▶ Lost    (its worker lost while the
///    │                     └──────▶ Failed   output is needed; a reducer
///    │ report failed                         could not fetch it)
///    ├──────────────▶ Failed
///    │ another attempt won, the job ended, or preempted
///    ├──────────────▶ Killed
///    │ its worker lost
///    └──────────────▶ Lost
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptState {
    Running,
    Succeeded,
    Failed,
    /// Killed because another attempt won, or the job ended.
    Killed,
    /// Its worker was lost.
    Lost,
}

impl AttemptState {
    /// Its name, as reports spell it.
    pub fn name(self) -> &'static str {
        match self {
            AttemptState::Running => "running",
            AttemptState::Succeeded => "succeeded",
            AttemptState::Failed => "failed",
            AttemptState::Killed => "killed",
            AttemptState::Lost => "lost",
        }
    }
}

/// One run of a task on one worker.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub id: u32,
    pub worker: WorkerId,
    pub uid: Arc<str>,
    pub addr: Arc<str>,
    pub started: Instant,
    pub ended: Option<Instant>,
    pub state: AttemptState,
    /// How close to its input it ran.
    pub level: Locality,
    pub speculative: bool,
    /// Its report, once it ended by one (boxed: most attempts are looked
    /// at for their state only).
    pub report: Option<Box<Kept>>,
    /// Its worker's data center.
    pub datacenter: Arc<str>,
    /// What it has fetched so far, per source (a reduce's heartbeats).
    pub fetched: Vec<proto::RemoteRead>,
}

impl Attempt {
    /// Seconds it ran (so far).
    pub fn seconds(&self, now: Instant) -> f64 {
        self.ended
            .unwrap_or(now)
            .duration_since(self.started)
            .as_secs_f64()
    }
}

/// A map or reduce task. Its state follows from its attempts:
///
/// ```text
///           launch                an attempt succeeded
/// Pending ─────────▶ Running ──────────────────────────▶ Done
///    ▲                 │  + backup attempts (speculation)  │
///    │ every attempt   │                                   │
///    └─ failed, lost ──┘                                   │
///    │  or preempted                                       │
///    └──────── the winner's output lost (worker lost, ─────┘
///              fetch failure), while still needed
/// ```
///
/// A task fails its job after `max_attempts` failures of its own (those
/// blamed on a damaged replica do not count).
#[derive(Debug, Clone)]
pub struct Task {
    pub attempts: Vec<Attempt>,
    /// Index into `attempts` of the winner.
    pub done: Option<usize>,
    pub failures: u32,
    /// When it last became pending.
    pub pending_since: Instant,
    pub last_error: String,
    /// An attempt failed on a damaged replica: the next may run on any
    /// worker at once, reading an intact replica.
    pub any_worker: bool,
    /// The id of its next attempt. Ids are unique within the task across
    /// coordinator restarts: a job taken back numbers its new attempts
    /// past any an earlier coordinator may have started.
    pub next_id: u32,
}

impl Task {
    pub(super) fn new(now: Instant) -> Self {
        Task {
            attempts: Vec::new(),
            done: None,
            failures: 0,
            pending_since: now,
            last_error: String::new(),
            any_worker: false,
            next_id: 0,
        }
    }

    /// Where attempt `id` is in `attempts`.
    pub fn slot_of(&self, id: u32) -> Option<usize> {
        self.attempts.iter().position(|a| a.id == id)
    }

    /// Running attempts.
    pub fn running(&self) -> impl Iterator<Item = &Attempt> {
        self.attempts
            .iter()
            .filter(|a| a.state == AttemptState::Running)
    }

    /// Needs an attempt launched.
    pub fn pending(&self) -> bool {
        self.done.is_none() && self.running().next().is_none()
    }

    /// The winning attempt.
    pub fn winner(&self) -> Option<&Attempt> {
        self.done.map(|i| &self.attempts[i])
    }

    /// Whether `w` may run it: not on a worker where an attempt failed
    /// (its own fault, not a damaged replica's), unless it has failed on
    /// every live worker, as Hadoop keeps a task off the machines where
    /// it failed.
    pub fn may_run_on(&self, w: &Asker<'_>) -> bool {
        let counted = |a: &&Attempt| {
            a.state == AttemptState::Failed
                && a.report.as_ref().is_none_or(|r| r.corrupt.is_empty())
        };
        let mut failed: Vec<WorkerId> = self
            .attempts
            .iter()
            .filter(counted)
            .map(|a| a.worker)
            .collect();
        failed.sort_unstable();
        failed.dedup();
        !failed.contains(&w.id) || failed.len() >= w.live
    }

    /// Makes it pending again (its output was lost).
    pub fn reset(&mut self, now: Instant) {
        self.done = None;
        self.pending_since = now;
    }
}

/// Microseconds an ended attempt ran.
pub(super) fn micros(a: &Attempt) -> u64 {
    let end = a.ended.unwrap_or(a.started);
    u64::try_from(end.duration_since(a.started).as_micros()).unwrap_or(u64::MAX)
}

/// `m00003` or `r00001`.
pub fn task_name(kind: TaskKind, index: usize) -> String {
    let k = if kind == MAP { 'm' } else { 'r' };
    format!("{k}{index:05}")
}
