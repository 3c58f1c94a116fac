//! Jobs, tasks and attempts: the scheduler's state machine.
//!
//! A job has one map task per input block and one reduce task per
//! partition. A task is *pending* when it has neither a finished attempt
//! nor a running one. Rules:
//!
//! - Locality (delay scheduling): a worker gets a pending map whose block
//!   it holds; a map goes to a worker without its block only after it has
//!   waited [`Settings::locality_wait`], so the end of the map phase does
//!   not turn into a rush of remote reads while the holders are about to
//!   free up.
//! - Reduces start once [`Settings::slowstart`] of the maps are done and
//!   no map is pending; workers have separate map and reduce slots, so
//!   reducers waiting for map outputs never starve a map that must re-run.
//! - Speculation: when a phase has no pending task, a running task slower
//!   than [`Settings::spec_slowdown`] times the phase's median (and than
//!   [`Settings::spec_min`]) gets one backup attempt on another worker.
//! - Commit: the first attempt to succeed wins; the others are killed and
//!   their outputs discarded. Attempts carry ids unique within the task,
//!   so a late report from a lost or killed attempt changes nothing.
//! - Failure: an attempt's failure (or a map output a reducer could not
//!   fetch) counts against the task; after [`Settings::max_attempts`]
//!   failures the job fails with the last error. A failure on a damaged
//!   input replica does not count: the replica is marked corrupt and the
//!   task may run on any worker at once, reading an intact replica. Attempts lost with their
//!   worker do not count; the worker's finished map outputs are recomputed
//!   while reducers may still need them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_request::JobRequest;

pub use sluice_proto::ids::{JobId, TaskKind, WorkerId};

use crate::store::RecordState;
use sluice_proto::catalog::BlockMeta;
use sluice_proto::proto;

/// Map task kind.
pub const MAP: TaskKind = TaskKind::Map;
/// Reduce task kind.
pub const REDUCE: TaskKind = TaskKind::Reduce;

/// Scheduler settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Failures of one task before the job fails.
    pub max_attempts: u32,
    /// How long a map waits for a worker holding its block.
    pub locality_wait: Duration,
    /// Fraction of maps done before reduces start.
    pub slowstart: f64,
    /// Whether to launch backup attempts of stragglers.
    pub speculative: bool,
    /// A task slower than this times its phase's median is a straggler.
    pub spec_slowdown: f64,
    /// No task younger than this is a straggler.
    pub spec_min: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_attempts: 4,
            locality_wait: Duration::from_secs(3),
            slowstart: 0.8,
            speculative: true,
            spec_slowdown: 1.5,
            spec_min: Duration::from_secs(2),
        }
    }
}

/// How an attempt ended.
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

/// One run of a task on one worker.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub id: u32,
    pub worker: WorkerId,
    pub uid: String,
    pub addr: String,
    pub started: Instant,
    pub ended: Option<Instant>,
    pub state: AttemptState,
    pub local: bool,
    pub speculative: bool,
    pub report: Option<proto::TaskReport>,
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

/// A map or reduce task.
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
}

impl Task {
    fn new(now: Instant) -> Self {
        Task {
            attempts: Vec::new(),
            done: None,
            failures: 0,
            pending_since: now,
            last_error: String::new(),
            any_worker: false,
        }
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

/// Where a job stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    Running,
    Succeeded,
    Failed(String),
    /// Ended on request (`sluice kill`), with who asked.
    Killed(String),
}

impl JobState {
    /// `running`, `succeeded`, `failed` or `killed`.
    pub fn name(&self) -> &'static str {
        self.record().name()
    }

    /// The state kept in the job records.
    pub fn record(&self) -> RecordState {
        match self {
            JobState::Running => RecordState::Running,
            JobState::Succeeded => RecordState::Succeeded,
            JobState::Failed(_) => RecordState::Failed,
            JobState::Killed(_) => RecordState::Killed,
        }
    }

    /// Why it failed or was killed; empty otherwise.
    pub fn reason(&self) -> String {
        match self {
            JobState::Failed(m) | JobState::Killed(m) => m.clone(),
            JobState::Running | JobState::Succeeded => String::new(),
        }
    }
}

/// What a map task reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapInput {
    /// A block of a data set, with where its replicas are.
    Block(BlockMeta),
    /// Nothing: the mapper makes its records (`synthetic:N` input); it
    /// runs on any worker.
    Synthetic,
}

impl MapInput {
    /// The block read, if any.
    pub fn block(&self) -> Option<&BlockMeta> {
        match self {
            MapInput::Block(b) => Some(b),
            MapInput::Synthetic => None,
        }
    }

    /// The block read, if any, to update its replicas.
    pub fn block_mut(&mut self) -> Option<&mut BlockMeta> {
        match self {
            MapInput::Block(b) => Some(b),
            MapInput::Synthetic => None,
        }
    }
}

/// A worker asking for work.
#[derive(Debug, Clone)]
pub struct Asker<'a> {
    pub id: WorkerId,
    pub uid: &'a str,
    pub addr: &'a str,
    /// Live workers in the cluster.
    pub live: usize,
}

/// A job being scheduled.
#[derive(Debug)]
pub struct Job {
    pub id: JobId,
    /// The job as submitted, and its encoding for task assignments.
    pub request: Arc<JobRequest>,
    pub encoded: Arc<[u8]>,
    pub input: String,
    pub output: String,
    pub overwrite: bool,
    pub reducers: u32,
    pub map_only: bool,
    /// Each map task's input.
    pub inputs: Vec<MapInput>,
    /// Data sets every task reads whole, with their blocks
    /// ([`sluice_request::JobKind::side_inputs`]).
    pub side: Vec<(String, Vec<BlockMeta>)>,
    /// Replicas of each output block.
    pub output_replication: u32,
    pub maps: Vec<Task>,
    pub reduces: Vec<Task>,
    pub token: [u8; 32],
    pub started: Instant,
    pub finished: Option<Instant>,
    pub state: JobState,
    pub report_json: String,
}

impl Job {
    /// A job over `inputs` (a map task each) with `reducers` partitions
    /// (0: map-only).
    pub fn new(
        id: JobId,
        request: JobRequest,
        inputs: Vec<MapInput>,
        reducers: u32,
        token: [u8; 32],
    ) -> Self {
        let now = Instant::now();
        Job {
            id,
            encoded: request.encode().into(),
            input: request.input.clone(),
            output: request.output.clone(),
            overwrite: request.overwrite,
            request: Arc::new(request),
            map_only: reducers == 0,
            reducers,
            maps: inputs.iter().map(|_| Task::new(now)).collect(),
            reduces: (0..reducers).map(|_| Task::new(now)).collect(),
            inputs,
            side: Vec::new(),
            output_replication: 1,
            token,
            started: now,
            finished: None,
            state: JobState::Running,
            report_json: String::new(),
        }
    }

    pub fn tasks(&self, kind: TaskKind) -> &[Task] {
        if kind == MAP {
            &self.maps
        } else {
            &self.reduces
        }
    }

    pub fn tasks_mut(&mut self, kind: TaskKind) -> &mut Vec<Task> {
        if kind == MAP {
            &mut self.maps
        } else {
            &mut self.reduces
        }
    }

    pub fn done(&self, kind: TaskKind) -> usize {
        self.tasks(kind).iter().filter(|t| t.done.is_some()).count()
    }

    /// Every task has a winner.
    pub fn complete(&self) -> bool {
        self.done(MAP) == self.maps.len() && self.done(REDUCE) == self.reduces.len()
    }

    pub fn is_running(&self) -> bool {
        self.state == JobState::Running
    }

    /// The next task for `w`, if any: `(kind, index, local, speculative)`.
    /// `holders(block)` says which live workers hold a block.
    pub fn pick(
        &self,
        w: &Asker<'_>,
        kind: TaskKind,
        s: &Settings,
        now: Instant,
        live_holder: &dyn Fn(&str) -> bool,
    ) -> Option<(TaskKind, usize, bool, bool)> {
        if kind == MAP {
            return self.pick_map(w, s, now, live_holder);
        }
        let maps_done = if self.maps.is_empty() {
            1.0
        } else {
            self.done(MAP) as f64 / self.maps.len() as f64
        };
        if self.map_only || self.maps.iter().any(Task::pending) || maps_done < s.slowstart {
            return None;
        }
        if let Some(i) = self
            .reduces
            .iter()
            .position(|t| t.pending() && t.may_run_on(w))
        {
            return Some((REDUCE, i, true, false));
        }
        self.straggler(REDUCE, w, s, now)
            .map(|i| (REDUCE, i, true, true))
    }

    fn pick_map(
        &self,
        w: &Asker<'_>,
        s: &Settings,
        now: Instant,
        live_holder: &dyn Fn(&str) -> bool,
    ) -> Option<(TaskKind, usize, bool, bool)> {
        // A synthetic task (no block) is at home anywhere.
        let holds = |i: usize| {
            self.inputs[i]
                .block()
                .is_none_or(|b| b.replicas.iter().any(|u| u == w.uid))
        };
        let pending = || {
            self.maps
                .iter()
                .enumerate()
                .filter(|(_, t)| t.pending() && t.may_run_on(w))
        };
        if let Some((i, _)) = pending().find(|&(i, _)| holds(i)) {
            return Some((MAP, i, true, false));
        }
        // Remote only after the locality wait, or when no live worker has it.
        let remote_ok = |i: usize, t: &Task| {
            t.any_worker
                || now.duration_since(t.pending_since) >= s.locality_wait
                || self.inputs[i]
                    .block()
                    .is_none_or(|b| !b.replicas.iter().any(|u| live_holder(u)))
        };
        if let Some((i, _)) = pending().find(|&(i, t)| remote_ok(i, t)) {
            return Some((MAP, i, false, false));
        }
        if pending().next().is_some() {
            return None;
        }
        self.straggler(MAP, w, s, now)
            .map(|i| (MAP, i, holds(i), true))
    }

    /// A straggling task of `kind` worth a backup attempt on `w`.
    fn straggler(
        &self,
        kind: TaskKind,
        w: &Asker<'_>,
        s: &Settings,
        now: Instant,
    ) -> Option<usize> {
        if !s.speculative {
            return None;
        }
        let tasks = self.tasks(kind);
        let mut done: Vec<f64> = tasks
            .iter()
            .filter_map(|t| t.winner().map(|a| a.seconds(now)))
            .collect();
        if done.is_empty() {
            return None;
        }
        done.sort_by(f64::total_cmp);
        let median = done[done.len() / 2];
        let limit = (median * s.spec_slowdown).max(s.spec_min.as_secs_f64());
        tasks.iter().position(|t| {
            let mut running = t.running();
            match (running.next(), running.next()) {
                (Some(a), None) => {
                    t.done.is_none()
                        && a.worker != w.id
                        && !t.attempts.iter().any(|a| a.speculative)
                        && a.seconds(now) > limit
                }
                _ => false,
            }
        })
    }

    /// Records a new attempt of a task on `w`; returns its id.
    pub fn launch(
        &mut self,
        kind: TaskKind,
        index: usize,
        w: &Asker<'_>,
        local: bool,
        speculative: bool,
    ) -> u32 {
        let t = &mut self.tasks_mut(kind)[index];
        let id = t.attempts.len() as u32;
        t.attempts.push(Attempt {
            id,
            worker: w.id,
            uid: w.uid.to_owned(),
            addr: w.addr.to_owned(),
            started: Instant::now(),
            ended: None,
            state: AttemptState::Running,
            local,
            speculative,
            report: None,
        });
        id
    }

    /// The running attempt `id` of a task, if it is one.
    pub fn running_attempt(
        &mut self,
        kind: TaskKind,
        index: usize,
        id: u32,
    ) -> Option<&mut Attempt> {
        self.tasks_mut(kind)
            .get_mut(index)?
            .attempts
            .get_mut(id as usize)
            .filter(|a| a.state == AttemptState::Running)
    }

    /// Records an attempt's report. Returns the attempts to kill (losers)
    /// and whether this attempt's output must be discarded. A failure
    /// that reports damaged replicas is theirs: it does not count against
    /// the task, which may run on any worker at once.
    pub fn finish(
        &mut self,
        kind: TaskKind,
        index: usize,
        report: proto::TaskReport,
        s: &Settings,
    ) -> (Vec<(WorkerId, u32)>, bool) {
        let now = Instant::now();
        let id = report.task.as_ref().map_or(0, |t| t.attempt);
        let ok = report.ok;
        let err = report.error.clone();
        let blame_replica = !report.corrupt.is_empty();
        let Some(a) = self.running_attempt(kind, index, id) else {
            return (Vec::new(), true);
        };
        a.ended = Some(now);
        a.report = Some(report);
        let t = &mut self.tasks_mut(kind)[index];
        if ok {
            t.attempts[id as usize].state = AttemptState::Succeeded;
            if t.done.is_some() {
                return (Vec::new(), true);
            }
            t.done = Some(id as usize);
            let mut kills = Vec::new();
            for a in &mut t.attempts {
                if a.state == AttemptState::Running {
                    a.state = AttemptState::Killed;
                    a.ended = Some(now);
                    kills.push((a.worker, a.id));
                }
            }
            return (kills, false);
        }
        t.attempts[id as usize].state = AttemptState::Failed;
        t.last_error = err;
        if blame_replica {
            t.any_worker = true;
        } else {
            t.failures += 1;
        }
        if t.pending() {
            t.pending_since = now;
        }
        if t.failures >= s.max_attempts && t.done.is_none() {
            let name = task_name(kind, index);
            let msg = format!(
                "task {name} failed {} times; last error: {}",
                t.failures, t.last_error
            );
            self.fail(msg);
        }
        (Vec::new(), true)
    }

    /// A reducer could not fetch map `index`'s output from attempt `id`.
    /// Returns whether the map is to be recomputed.
    pub fn fetch_failed(&mut self, index: usize, id: u32, reason: &str, s: &Settings) -> bool {
        let Some(t) = self.maps.get_mut(index) else {
            return false;
        };
        if t.done != Some(id as usize) {
            return false;
        }
        t.attempts[id as usize].state = AttemptState::Failed;
        t.failures += 1;
        t.last_error = format!("map output unreadable: {reason}");
        t.reset(Instant::now());
        if t.failures >= s.max_attempts {
            let msg = format!(
                "task {} failed {} times; last error: {}",
                task_name(MAP, index),
                t.failures,
                t.last_error
            );
            self.fail(msg);
        }
        true
    }

    /// Worker `worker` is gone: its running attempts are lost, and its
    /// finished outputs that are still needed are recomputed.
    pub fn worker_lost(&mut self, worker: WorkerId) {
        let now = Instant::now();
        let reduces_left = self.done(REDUCE) < self.reduces.len();
        let map_only = self.map_only;
        for (kind, tasks) in [(MAP, &mut self.maps), (REDUCE, &mut self.reduces)] {
            for t in tasks.iter_mut() {
                for a in t.attempts.iter_mut().filter(|a| a.worker == worker) {
                    if a.state == AttemptState::Running {
                        a.state = AttemptState::Lost;
                        a.ended = Some(now);
                        t.pending_since = now;
                    }
                }
                let needed = kind == REDUCE || map_only || reduces_left;
                if t.winner().is_some_and(|a| a.worker == worker) && needed {
                    let i = t.done.expect("has a winner");
                    t.attempts[i].state = AttemptState::Lost;
                    t.reset(now);
                }
            }
        }
    }

    /// Fails the job (once).
    pub fn fail(&mut self, msg: String) {
        self.end(JobState::Failed(msg));
    }

    /// Ends a running job in `state` (a job ends once).
    pub fn end(&mut self, state: JobState) {
        if self.is_running() {
            self.state = state;
            self.finished = Some(Instant::now());
        }
    }

    /// Running attempts to kill when the job ends.
    pub fn running_attempts(&self) -> Vec<(WorkerId, TaskKind, usize, u32)> {
        let mut out = Vec::new();
        for kind in [MAP, REDUCE] {
            for (i, t) in self.tasks(kind).iter().enumerate() {
                for a in t.running() {
                    out.push((a.worker, kind, i, a.id));
                }
            }
        }
        out
    }
}

/// `m00003` or `r00001`.
pub fn task_name(kind: TaskKind, index: usize) -> String {
    let k = if kind == MAP { 'm' } else { 'r' };
    format!("{k}{index:05}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(maps: usize, reducers: u32) -> Job {
        let blocks = (0..maps)
            .map(|i| {
                MapInput::Block(BlockMeta {
                    id: sluice_proto::ids::BlockId::new(format!("b{i}")).unwrap(),
                    len: 10,
                    crc: 0,
                    replicas: vec![if i % 2 == 0 { "a" } else { "b" }.into()],
                    corrupt: Vec::new(),
                })
            })
            .collect();
        Job::new(
            JobId(1),
            sluice_request::JobRequest::new("wordcount", &(), "in", "out"),
            blocks,
            reducers,
            [0; 32],
        )
    }

    fn asker(id: u64, uid: &str) -> Asker<'_> {
        Asker {
            id: WorkerId(id),
            uid,
            addr: "x",
            live: 2,
        }
    }

    fn ok(kind: TaskKind, index: u32, attempt: u32) -> proto::TaskReport {
        proto::TaskReport {
            task: Some(proto::TaskId {
                job: 1,
                kind: kind.wire(),
                index,
                attempt,
            }),
            ok: true,
            ..Default::default()
        }
    }

    #[test]
    fn maps_go_to_their_blocks_and_wait_before_going_remote() {
        let j = job(2, 1);
        let s = Settings::default();
        let now = Instant::now();
        let live = |_: &str| true;
        let a = asker(1, "a");
        assert_eq!(j.pick(&a, MAP, &s, now, &live), Some((MAP, 0, true, false)));
        let mut j = j;
        j.launch(MAP, 0, &a, true, false);
        // Block 1 is on b: a waits.
        assert_eq!(j.pick(&a, MAP, &s, now, &live), None);
        let later = now + s.locality_wait;
        assert_eq!(
            j.pick(&a, MAP, &s, later, &live),
            Some((MAP, 1, false, false))
        );
        // Or at once when b is dead.
        let dead_b = |u: &str| u != "b";
        assert_eq!(
            j.pick(&a, MAP, &s, now, &dead_b),
            Some((MAP, 1, false, false))
        );
    }

    #[test]
    fn first_success_wins_and_late_attempts_are_discarded() {
        let mut j = job(1, 1);
        let s = Settings::default();
        j.launch(MAP, 0, &asker(1, "a"), true, false);
        j.launch(MAP, 0, &asker(2, "b"), false, true);
        let (kills, discard) = j.finish(MAP, 0, ok(MAP, 0, 1), &s);
        assert!(!discard);
        assert_eq!(kills, vec![(WorkerId(1), 0)]);
        assert_eq!(j.maps[0].done, Some(1));
        // The killed attempt's late report changes nothing.
        let (_, discard) = j.finish(MAP, 0, ok(MAP, 0, 0), &s);
        assert!(discard);
        assert_eq!(j.maps[0].done, Some(1));
    }

    #[test]
    fn repeated_failures_fail_the_job() {
        let mut j = job(1, 1);
        let s = Settings::default();
        for attempt in 0..4 {
            let id = j.launch(MAP, 0, &asker(1, "a"), true, false);
            assert_eq!(id, attempt);
            let mut r = ok(MAP, 0, id);
            r.ok = false;
            r.error = "boom".into();
            j.finish(MAP, 0, r, &s);
        }
        match &j.state {
            JobState::Failed(m) => {
                assert!(m.contains("m00000 failed 4 times") && m.contains("boom"))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_damaged_replica_is_not_the_tasks_fault() {
        let mut j = job(2, 1);
        let s = Settings::default();
        let live = |_: &str| true;
        let now = Instant::now();
        for attempt in 0..10 {
            let id = j.launch(MAP, 1, &asker(2, "b"), true, false);
            assert_eq!(id, attempt);
            let mut r = ok(MAP, 1, id);
            r.ok = false;
            r.error = "damaged replica".into();
            r.corrupt.push(proto::CorruptReplica {
                block: "b1".into(),
                ..Default::default()
            });
            j.finish(MAP, 1, r, &s);
        }
        assert!(j.is_running(), "{:?}", j.state);
        assert_eq!(j.maps[1].failures, 0);
        // And it may go to a worker without the block at once.
        j.launch(MAP, 0, &asker(1, "a"), true, false);
        assert_eq!(
            j.pick(&asker(1, "a"), MAP, &s, now, &live),
            Some((MAP, 1, false, false))
        );
    }

    #[test]
    fn a_failed_task_goes_to_another_worker_while_there_is_one() {
        let mut j = job(1, 1);
        let s = Settings::default();
        let live = |_: &str| true;
        let now = Instant::now();
        let (a, b) = (asker(1, "a"), asker(2, "b"));
        let id = j.launch(MAP, 0, &a, true, false);
        let mut r = ok(MAP, 0, id);
        r.ok = false;
        r.error = "no space left on device".into();
        j.finish(MAP, 0, r.clone(), &s);
        assert_eq!(j.pick(&a, MAP, &s, now, &live), None, "not again on a");
        let later = now + s.locality_wait + Duration::from_secs(1);
        assert_eq!(
            j.pick(&b, MAP, &s, later, &live),
            Some((MAP, 0, false, false))
        );
        let id = j.launch(MAP, 0, &b, false, false);
        r.task.as_mut().unwrap().attempt = id;
        j.finish(MAP, 0, r, &s);
        // Failed on every live worker: any may try again.
        assert_eq!(j.pick(&a, MAP, &s, now, &live), Some((MAP, 0, true, false)));
    }

    #[test]
    fn lost_workers_outputs_are_recomputed_while_needed() {
        let mut j = job(2, 1);
        let s = Settings::default();
        j.launch(MAP, 0, &asker(1, "a"), true, false);
        j.finish(MAP, 0, ok(MAP, 0, 0), &s);
        j.launch(MAP, 1, &asker(2, "b"), true, false);
        j.worker_lost(WorkerId(1));
        assert!(
            j.maps[0].pending(),
            "finished map output of a lost worker re-runs"
        );
        assert!(j.maps[1].running().next().is_some());
        j.worker_lost(WorkerId(2));
        assert!(j.maps[1].pending());
        assert_eq!(j.maps[1].failures, 0, "lost attempts do not count");
    }

    #[test]
    fn reduces_wait_for_slowstart_and_stragglers_get_backups() {
        let mut j = job(2, 1);
        let s = Settings {
            spec_min: Duration::ZERO,
            ..Settings::default()
        };
        let live = |_: &str| true;
        let now = Instant::now();
        let a = asker(1, "a");
        j.launch(MAP, 0, &a, true, false);
        j.finish(MAP, 0, ok(MAP, 0, 0), &s);
        j.launch(MAP, 1, &asker(2, "b"), true, false);
        assert_eq!(j.pick(&a, REDUCE, &s, now, &live), None, "1/2 < 0.8");
        // Map 1 runs far longer than map 0 took: a backup on a.
        let later = now + Duration::from_secs(5);
        assert_eq!(
            j.pick(&a, MAP, &s, later, &live),
            Some((MAP, 1, false, true))
        );
    }
}
