//! A job being scheduled: its lifecycle ([`JobState`]), and [`Job`], whose
//! state, tasks and queues only its transition methods change: offers
//! (delay scheduling, speculation, ARTS), launches, reports, fetch
//! failures, lost workers, preemption, the end.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use sluice_request::JobRequest;

use sluice_proto::ids::{JobId, TaskKind, WorkerId};

use super::kept::{Kept, Names};
use super::locality::Asker;
use super::task::{micros, task_name, Attempt, AttemptState, Pick, Task, MAP, REDUCE};
use crate::arts::ReduceScheduler;
use crate::config::Settings;
use crate::input::MapInput;
use crate::queues::Queues;
use crate::store::RecordState;
use sluice_proto::catalog::BlockMeta;
use sluice_proto::proto;

/// The job property that picks its reduce scheduler (`early`, `delayed`
/// or `arts`), over the coordinator's `--reduce-scheduler`.
pub const REDUCE_SCHEDULER_PROPERTY: &str = "sluice.reduce.scheduler";

/// Where a job stands.
///
/// ```text
///            every task done            catalog written
/// Running ────────────────▶ Committing ─────────────────▶ Succeeded
///    │                          │ catalog write failed
///    │ a task failed too often, └──────────────────────▶ Failed
///    │ no live worker or replica ───────────────────────▶ Failed
///    └ sluice kill, while Running or Committing ────────▶ Killed
/// ```
///
/// A job has ended when it is neither running nor committing; once ended
/// (its report written, its attempts killed, its files removed) it never
/// changes again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    Running,
    /// Its output data set is in the catalog, waiting for the catalog
    /// write.
    Committing,
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
            JobState::Running | JobState::Committing => RecordState::Running,
            JobState::Succeeded => RecordState::Succeeded,
            JobState::Failed(_) => RecordState::Failed,
            JobState::Killed(_) => RecordState::Killed,
        }
    }

    /// Why it failed or was killed; empty otherwise.
    pub fn reason(&self) -> String {
        match self {
            JobState::Failed(m) | JobState::Killed(m) => m.clone(),
            JobState::Running | JobState::Committing | JobState::Succeeded => String::new(),
        }
    }
}

/// A job being scheduled.
#[derive(Debug)]
pub struct Job {
    id: JobId,
    /// The job as submitted, and its encoding for task assignments.
    request: Arc<JobRequest>,
    encoded: Arc<[u8]>,
    input: String,
    output: String,
    overwrite: bool,
    reducers: u32,
    map_only: bool,
    /// Each map task's input.
    inputs: Vec<MapInput>,
    /// Data sets every task reads whole, with their blocks
    /// ([`sluice_request::JobKind::side_inputs`]).
    side: Vec<(String, Vec<BlockMeta>)>,
    /// Replicas of each output block.
    output_replication: u32,
    maps: Vec<Task>,
    reduces: Vec<Task>,
    token: [u8; 32],
    started: Instant,
    finished: Option<Instant>,
    state: JobState,
    report_json: String,
    /// Offers of a map slot declined since it last launched a node-local
    /// map (delay scheduling).
    missed_offers: u32,
    /// Since when ARTS has declined to start a partition outside the data
    /// center holding most of its output (since it last started one at
    /// home).
    remote_wait: Option<Instant>,
    /// Its pool (fair scheduling).
    pool: String,
    /// Its tasks by state and locality, kept as attempts start and end.
    queues: Queues,
    /// When its reduces start, if the job says (`sluice.reduce.scheduler`).
    reduce_scheduler: Option<ReduceScheduler>,
    /// What its winning maps have produced so far.
    map_outputs: MapOutputs,
    /// Maps as they won, `(map, attempt, place of its address in
    /// addrs)`, in order: what a reducer has not been told yet is a tail
    /// of it ([`Job::outputs_since`]).
    winners: Vec<(u32, u32, u32)>,
    /// Each map's winning attempt, [`NO_WINNER`] while it has none: what
    /// [`Job::outputs_since`] checks an entry of `winners` against, 4
    /// bytes a map in map order, rather than the map's attempts (a cache
    /// miss or two each: 100 reducers starting at once over 80,000
    /// outputs held the state's lock for a second and a half).
    winning: Vec<u32>,
    /// The winners' addresses.
    addrs: AddrTable,
    /// Names `winners` for this coordinator's run of the job (random).
    winners_log: u64,
    /// Worker names and counter names its attempts share.
    names: Names,
}

/// [`Job`]'s mark of a map without a winning attempt.
const NO_WINNER: u32 = u32::MAX;

/// Most map outputs one `MapOutputs` reply lists: a reducer that starts
/// late asks a few times instead of being sent the whole job at once.
pub const OUTPUTS_PER_REPLY: usize = 4096;

/// The winning maps' output so far, kept as maps finish and as their
/// outputs are lost: what ARTS decides from.
#[derive(Debug, Clone, Default)]
pub struct MapOutputs {
    /// Data center -> bytes per partition, as the attempts keep them
    /// (rounded up by less than 10%: [`super::kept::Sizes`]).
    pub by_dc: BTreeMap<String, Vec<u64>>,
    /// Data center -> bytes, exact.
    pub total_by_dc: BTreeMap<String, u64>,
    pub input: u64,
    pub output: u64,
    /// Seconds the winners took, summed.
    pub seconds: f64,
}

impl MapOutputs {
    /// Adds (`sign` 1) or takes away (-1) a winner's output.
    fn count(&mut self, a: &Attempt, sign: i8) {
        let Some(r) = &a.report else {
            return;
        };
        let add = |x: &mut u64, v: u64| {
            *x = if sign > 0 {
                x.saturating_add(v)
            } else {
                x.saturating_sub(v)
            }
        };
        let parts = self.by_dc.entry(a.datacenter.to_string()).or_default();
        for (p, v) in r.partition_bytes().enumerate() {
            if parts.len() <= p {
                parts.resize(p + 1, 0);
            }
            add(&mut parts[p], v);
        }
        let total = self
            .total_by_dc
            .entry(a.datacenter.to_string())
            .or_default();
        add(total, r.partition_total);
        add(&mut self.input, r.input_bytes);
        add(&mut self.output, r.partition_total);
        let s = micros(a) as f64 / 1e6;
        self.seconds = (self.seconds + f64::from(sign) * s).max(0.0);
    }
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
        now: Instant,
    ) -> Self {
        let pool = request
            .property(crate::policy::POOL_PROPERTY)
            .unwrap_or(crate::policy::DEFAULT_POOL)
            .to_owned();
        let reduce_scheduler = request
            .property(REDUCE_SCHEDULER_PROPERTY)
            .and_then(ReduceScheduler::parse);
        Job {
            id,
            pool,
            reduce_scheduler,
            map_outputs: MapOutputs::default(),
            winners: Vec::new(),
            winning: vec![NO_WINNER; inputs.len()],
            addrs: AddrTable::default(),
            winners_log: rand::random::<u64>().max(1),
            names: Names::default(),
            encoded: request.encode().into(),
            input: request.input.clone(),
            output: request.output.clone(),
            overwrite: request.overwrite,
            request: Arc::new(request),
            map_only: reducers == 0,
            reducers,
            queues: Queues::new(&inputs, reducers as usize),
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
            missed_offers: 0,
            remote_wait: None,
        }
    }

    /// The data sets every task reads whole, and the replicas of each
    /// output block (at least one).
    pub fn with_side(mut self, side: Vec<(String, Vec<BlockMeta>)>, replication: u32) -> Self {
        self.side = side;
        self.output_replication = replication.max(1);
        self
    }

    /// Every task done: the output is being written to the catalog.
    pub fn committing(&mut self) {
        self.state = JobState::Committing;
    }

    /// The job has ended and this is its report.
    pub fn reported(&mut self, json: String) {
        self.report_json = json;
    }

    /// Marks `uid`'s replica of `block` damaged in the blocks this job
    /// reads (inputs and side inputs); whether one was marked.
    pub fn mark_corrupt(&mut self, block: &str, uid: &str, detail: &str) -> bool {
        let side = self.side.iter_mut().flat_map(|(_, b)| b.iter_mut());
        let mut marked = false;
        for b in self
            .inputs
            .iter_mut()
            .flat_map(MapInput::blocks_mut)
            .chain(side)
            .filter(|b| b.id.as_str() == block)
        {
            marked |= b.mark_corrupt(uid, detail);
        }
        marked
    }

    pub fn id(&self) -> JobId {
        self.id
    }

    /// The job as submitted.
    pub fn request(&self) -> &Arc<JobRequest> {
        &self.request
    }

    /// The request's encoding, for task assignments.
    pub fn encoded(&self) -> &[u8] {
        &self.encoded
    }

    pub fn input(&self) -> &str {
        &self.input
    }

    pub fn output(&self) -> &str {
        &self.output
    }

    pub fn overwrite(&self) -> bool {
        self.overwrite
    }

    pub fn reducers(&self) -> u32 {
        self.reducers
    }

    pub fn map_only(&self) -> bool {
        self.map_only
    }

    /// Each map task's input.
    pub fn inputs(&self) -> &[MapInput] {
        &self.inputs
    }

    /// Data sets every task reads whole, with their blocks.
    pub fn side(&self) -> &[(String, Vec<BlockMeta>)] {
        &self.side
    }

    /// Replicas of each output block.
    pub fn output_replication(&self) -> u32 {
        self.output_replication
    }

    pub fn maps(&self) -> &[Task] {
        &self.maps
    }

    pub fn reduces(&self) -> &[Task] {
        &self.reduces
    }

    pub fn token(&self) -> &[u8; 32] {
        &self.token
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    pub fn finished(&self) -> Option<Instant> {
        self.finished
    }

    pub fn state(&self) -> &JobState {
        &self.state
    }

    /// Its report once ended (empty before).
    pub fn report_json(&self) -> &str {
        &self.report_json
    }

    /// Its pool (fair scheduling).
    pub fn pool(&self) -> &str {
        &self.pool
    }

    /// Its tasks by state and locality.
    pub fn queues(&self) -> &Queues {
        &self.queues
    }

    /// When its reduces start, if the job says.
    pub fn reduce_scheduler(&self) -> Option<ReduceScheduler> {
        self.reduce_scheduler
    }

    /// The names its attempts share (counter names by id).
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// What its winning maps have produced so far.
    pub fn map_outputs(&self) -> &MapOutputs {
        &self.map_outputs
    }

    /// The name of its list of winning maps' outputs (see
    /// [`Job::outputs_since`]).
    pub fn outputs_log(&self) -> u64 {
        self.winners_log
    }

    /// Entries of its list of outputs after `since` (some may be outputs
    /// lost since; see [`Job::outputs_since`]).
    pub fn outputs_after(&self, since: u64) -> usize {
        self.winners.len().saturating_sub(since as usize)
    }

    /// Whether every map has a winner.
    pub fn maps_complete(&self) -> bool {
        self.done(MAP) == self.maps.len()
    }

    /// The winning maps' outputs listed since `since` of list `log` (from
    /// its start for a list this job does not keep), at most
    /// [`OUTPUTS_PER_REPLY`], and the list's name and how far they reach,
    /// for the next call. An entry is sent only while it is still its
    /// map's winner, so each map comes once, and an output lost since is
    /// listed again when its map wins anew. A reducer's call costs what is
    /// new to it, not the job's maps, and no reply grows with the job.
    /// With `table`, an output names its worker by its place in the job's
    /// table of addresses ([`Job::addrs_from`]) instead of the address.
    pub fn outputs_since(
        &self,
        log: u64,
        since: u64,
        table: bool,
    ) -> (Vec<proto::MapOutput>, u64, u64) {
        let from = if log == self.winners_log {
            (since as usize).min(self.winners.len())
        } else {
            0
        };
        let mut outputs = Vec::new();
        let mut next = from;
        for &(m, id, place) in &self.winners[from..] {
            if outputs.len() == OUTPUTS_PER_REPLY {
                break;
            }
            next += 1;
            if self.winning.get(m as usize) != Some(&id) {
                continue;
            }
            let (addr, worker) = match table {
                true => (String::new(), place),
                false => (self.addrs.addr(place).to_string(), 0),
            };
            outputs.push(proto::MapOutput {
                map: m,
                attempt: id,
                addr,
                worker,
            });
        }
        (outputs, self.winners_log, next as u64)
    }

    /// The entries of its table of winners' addresses a caller of list
    /// `log` that knows `known` of them lacks: where they start and what
    /// they are (from the start for a list this job does not keep).
    pub fn addrs_from(&self, log: u64, known: u32) -> (u32, Vec<String>) {
        let from = if log == self.winners_log {
            (known as usize).min(self.addrs.len())
        } else {
            0
        };
        (from as u32, self.addrs.from(from))
    }

    pub fn tasks(&self, kind: TaskKind) -> &[Task] {
        if kind == MAP {
            &self.maps
        } else {
            &self.reduces
        }
    }

    fn tasks_mut(&mut self, kind: TaskKind) -> &mut Vec<Task> {
        if kind == MAP {
            &mut self.maps
        } else {
            &mut self.reduces
        }
    }

    /// An attempt to change in place (tests that fake an attempt's end).
    #[cfg(test)]
    pub(crate) fn attempt_mut(&mut self, kind: TaskKind, i: usize, a: usize) -> &mut Attempt {
        &mut self.tasks_mut(kind)[i].attempts[a]
    }

    pub fn done(&self, kind: TaskKind) -> usize {
        self.tasks(kind).len() - self.queues.open_count(kind)
    }

    /// Every task has a winner.
    pub fn complete(&self) -> bool {
        self.done(MAP) == self.maps.len() && self.done(REDUCE) == self.reduces.len()
    }

    /// Its tasks of `kind` with a running attempt: the slots it holds
    /// (a task with a backup attempt counts once).
    pub fn running(&self, kind: TaskKind) -> usize {
        self.queues.running(kind)
    }

    /// Its tasks of `kind` waiting for a slot.
    pub fn pending(&self, kind: TaskKind) -> usize {
        self.queues.waiting_count(kind)
    }

    /// Whether it has not ended (running or committing).
    pub fn is_running(&self) -> bool {
        matches!(self.state, JobState::Running | JobState::Committing)
    }

    /// Its commit is on disk: it succeeded.
    pub fn committed(&mut self, now: Instant) {
        if self.state == JobState::Committing {
            self.state = JobState::Succeeded;
            self.finished = Some(now);
        }
    }

    /// Its commit could not be written: it failed.
    pub fn commit_failed(&mut self, msg: String, now: Instant) {
        if self.state == JobState::Committing {
            self.state = JobState::Failed(msg);
            self.finished = Some(now);
        }
    }

    /// Records a new attempt of the picked task on `w`; returns its id.
    pub fn launch(&mut self, p: Pick, w: &Asker<'_>, now: Instant) -> u32 {
        let Pick {
            kind,
            index,
            level,
            speculative,
        } = p;
        let (uid, addr) = (self.names.share(w.uid), self.names.share(w.addr));
        let datacenter = self.names.share(&w.place.datacenter);
        let t = &mut self.tasks_mut(kind)[index];
        let id = t.next_id;
        t.next_id += 1;
        // Most tasks run once: room for one attempt, not the four a first
        // push would make.
        t.attempts.reserve_exact(1);
        t.attempts.push(Attempt {
            id,
            worker: w.id,
            uid,
            addr,
            started: now,
            ended: None,
            state: AttemptState::Running,
            level,
            speculative,
            report: None,
            datacenter,
            fetched: Vec::new(),
        });
        self.queues.started(kind, index, w.id, now);
        id
    }

    /// What attempt `id` of a task has fetched so far (its heartbeats).
    pub fn fetched(
        &mut self,
        kind: TaskKind,
        index: usize,
        id: u32,
        fetched: Vec<proto::RemoteRead>,
    ) {
        if let Some(a) = self.tasks_mut(kind).get_mut(index).and_then(|t| {
            let at = t.slot_of(id)?;
            t.attempts.get_mut(at)
        }) {
            a.fetched = fetched;
        }
    }

    /// The running attempt `id` of a task, if it is one.
    pub fn running_attempt(
        &mut self,
        kind: TaskKind,
        index: usize,
        id: u32,
    ) -> Option<&mut Attempt> {
        let t = self.tasks_mut(kind).get_mut(index)?;
        let at = t.slot_of(id)?;
        t.attempts
            .get_mut(at)
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
        now: Instant,
    ) -> (Vec<(WorkerId, u32)>, bool) {
        let id = report.task.as_ref().map_or(0, |t| t.attempt);
        let ok = report.ok;
        let err = report.error.clone();
        let blame_replica = !report.corrupt.is_empty();
        if self.running_attempt(kind, index, id).is_none() {
            return (Vec::new(), true);
        }
        let kept = Box::new(Kept::new(report, &mut self.names));
        let a = self.running_attempt(kind, index, id).expect("running");
        a.ended = Some(now);
        a.report = Some(kept);
        let worker = a.worker;
        let t = match kind {
            MAP => &mut self.maps[index],
            REDUCE => &mut self.reduces[index],
        };
        if ok && t.done.is_none() {
            // Done before its attempt stops, so that a task that has won
            // never goes back to the waiting queues on the way out.
            self.queues.done(kind, index);
        }
        self.queues.stopped(kind, index, worker);
        let at = t.slot_of(id).expect("a running attempt");
        if ok {
            t.attempts[at].state = AttemptState::Succeeded;
            if t.done.is_some() {
                return (Vec::new(), true);
            }
            t.done = Some(at);
            let took = micros(&t.attempts[at]);
            if kind == MAP {
                self.map_outputs.count(&t.attempts[at], 1);
                let place = self.addrs.place(&t.attempts[at].addr);
                self.winners.push((index as u32, id, place));
                self.winning[index] = id;
            }
            let mut kills = Vec::new();
            for a in &mut t.attempts {
                if a.state == AttemptState::Running {
                    a.state = AttemptState::Killed;
                    a.ended = Some(now);
                    kills.push((a.worker, a.id));
                }
            }
            for (w, _) in &kills {
                self.queues.stopped(kind, index, *w);
            }
            self.queues.winner(kind, took, true);
            return (kills, false);
        }
        t.attempts[at].state = AttemptState::Failed;
        t.last_error = err;
        if blame_replica {
            t.any_worker = true;
            if kind == MAP {
                self.queues.anywhere_now(index);
            }
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
            self.fail(msg, now);
        }
        (Vec::new(), true)
    }

    /// A reducer could not fetch map `index`'s output from attempt `id`.
    /// Returns whether the map is to be recomputed.
    pub fn fetch_failed(
        &mut self,
        index: usize,
        id: u32,
        reason: &str,
        s: &Settings,
        now: Instant,
    ) -> bool {
        let Some(t) = self.maps.get_mut(index) else {
            return false;
        };
        let Some(at) = t.slot_of(id).filter(|&at| t.done == Some(at)) else {
            return false;
        };
        t.attempts[at].state = AttemptState::Failed;
        t.failures += 1;
        t.last_error = format!("map output unreadable: {reason}");
        self.map_outputs.count(&t.attempts[at], -1);
        t.reset(now);
        self.winning[index] = NO_WINNER;
        let took = micros(&t.attempts[at]);
        self.queues.reopen(MAP, index);
        self.queues.winner(MAP, took, false);
        if t.failures >= s.max_attempts {
            let msg = format!(
                "task {} failed {} times; last error: {}",
                task_name(MAP, index),
                t.failures,
                t.last_error
            );
            self.fail(msg, now);
        }
        true
    }

    /// Worker `worker` is gone: its running attempts are lost, and its
    /// finished outputs that are still needed are recomputed.
    pub fn worker_lost(&mut self, worker: WorkerId, now: Instant) {
        let reduces_left = self.done(REDUCE) < self.reduces.len();
        let map_only = self.map_only;
        let queues = &mut self.queues;
        let outputs = &mut self.map_outputs;
        let winning = &mut self.winning;
        for (kind, tasks) in [(MAP, &mut self.maps), (REDUCE, &mut self.reduces)] {
            for (i, t) in tasks.iter_mut().enumerate() {
                for a in t.attempts.iter_mut().filter(|a| a.worker == worker) {
                    if a.state == AttemptState::Running {
                        a.state = AttemptState::Lost;
                        a.ended = Some(now);
                        t.pending_since = now;
                        queues.stopped(kind, i, worker);
                    }
                }
                let needed = kind == REDUCE || map_only || reduces_left;
                if t.winner().is_some_and(|a| a.worker == worker) && needed {
                    let w = t.done.expect("has a winner");
                    if kind == MAP {
                        outputs.count(&t.attempts[w], -1);
                        winning[i] = NO_WINNER;
                    }
                    t.attempts[w].state = AttemptState::Lost;
                    t.reset(now);
                    queues.reopen(kind, i);
                    queues.winner(kind, micros(&t.attempts[w]), false);
                }
            }
        }
    }

    /// Fails the job (once).
    pub fn fail(&mut self, msg: String, now: Instant) {
        self.end(JobState::Failed(msg), now);
    }

    /// Ends a running job in `state` (a job ends once; a committing job
    /// ends with its catalog write).
    pub fn end(&mut self, state: JobState, now: Instant) {
        if self.state == JobState::Running {
            self.state = state;
            self.finished = Some(now);
        }
    }

    /// Running attempts to kill when the job ends.
    /// Ends running attempt `id` of a task to give its slot to another
    /// pool (fair preemption): killed, not failed, and the task pending
    /// again. Returns its worker.
    pub fn preempt(
        &mut self,
        kind: TaskKind,
        index: usize,
        id: u32,
        now: Instant,
    ) -> Option<WorkerId> {
        let a = self.running_attempt(kind, index, id)?;
        a.state = AttemptState::Killed;
        a.ended = Some(now);
        let worker = a.worker;
        self.queues.stopped(kind, index, worker);
        let t = &mut self.tasks_mut(kind)[index];
        if t.pending() {
            t.pending_since = now;
        }
        Some(worker)
    }

    /// Its running attempts: (worker, kind, task, attempt).
    pub fn running_attempts(&self) -> Vec<(WorkerId, TaskKind, usize, u32)> {
        let mut out = Vec::new();
        for kind in [MAP, REDUCE] {
            for i in self.queues.running_tasks(kind) {
                for a in self.tasks(kind)[i].running() {
                    out.push((a.worker, kind, i, a.id));
                }
            }
        }
        out
    }
}

/// Candidates a decision looks at, at one locality level, for one whose
/// blocks no other worker caches before taking the first.
pub const PREFER_SCAN: usize = 16;

mod addrs;
pub mod adopt;
mod offer;

use addrs::AddrTable;

#[cfg(test)]
mod tests;
