//! A job being scheduled: its lifecycle ([`JobState`]), and [`Job`], whose
//! state, tasks and queues only its transition methods change: offers
//! (delay scheduling, speculation, ARTS), launches, reports, fetch
//! failures, lost workers, preemption, the end.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use sluice_request::JobRequest;

use sluice_proto::ids::{JobId, TaskKind, WorkerId};

use super::locality::{block_level, cached_anywhere, holders_level, Asker, Locality, Topology};
use super::task::{micros, task_name, Attempt, AttemptState, Pick, Task, MAP, REDUCE};
use crate::arts::{JobProgress, ReduceScheduler};
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
}

/// The winning maps' output so far, kept as maps finish and as their
/// outputs are lost: what ARTS decides from.
#[derive(Debug, Clone, Default)]
pub struct MapOutputs {
    /// Data center -> bytes per partition.
    pub by_dc: BTreeMap<String, Vec<u64>>,
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
        let parts = self.by_dc.entry(a.datacenter.clone()).or_default();
        if parts.len() < r.partition_bytes.len() {
            parts.resize(r.partition_bytes.len(), 0);
        }
        for (p, v) in parts.iter_mut().zip(&r.partition_bytes) {
            add(p, *v);
        }
        add(&mut self.input, r.input_bytes);
        add(&mut self.output, r.partition_bytes.iter().sum());
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

    /// What its winning maps have produced so far.
    pub fn map_outputs(&self) -> &MapOutputs {
        &self.map_outputs
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
        self.queues.open_count(kind) - self.queues.running(kind)
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

    /// The next task of `kind` for `w`, if any. Declining a map slot
    /// counts a missed offer.
    pub fn pick(
        &mut self,
        w: &Asker<'_>,
        kind: TaskKind,
        s: &Settings,
        now: Instant,
        topo: &Topology,
    ) -> Option<Pick> {
        if kind == MAP {
            return self.pick_map(w, s, now, topo);
        }
        if self.map_only {
            return None;
        }
        let maps_done = if self.maps.is_empty() {
            1.0
        } else {
            self.done(MAP) as f64 / self.maps.len() as f64
        };
        let reduce = |index, speculative| Pick {
            kind: REDUCE,
            index,
            level: Locality::Any,
            speculative,
        };
        let usable = |i: &usize| {
            self.queues.look();
            let t = &self.reduces[*i];
            t.pending() && t.may_run_on(w)
        };
        match self.reduce_scheduler.unwrap_or(s.reduce) {
            ReduceScheduler::SlowStart(f) if maps_done < f => return None,
            ReduceScheduler::SlowStart(_) => {
                if let Some(i) = self.queues.open(REDUCE).find(usable) {
                    return Some(reduce(i, false));
                }
            }
            ReduceScheduler::Arts => {
                let open: Vec<usize> = self.queues.open(REDUCE).filter(usable).collect();
                if !open.is_empty() {
                    return self.pick_arts(w, s, &open, now).map(|i| reduce(i, false));
                }
            }
        }
        self.straggler(REDUCE, w, s, now).map(|i| reduce(i, true))
    }

    /// ARTS's partition for `w` of `open`, if it starts one now: one homed
    /// elsewhere (its copy would end sooner there, [`crate::arts::homed`])
    /// waits until the job has waited, since it last started a reduce at
    /// home, as long as copying the partition to `w`'s data center would
    /// take.
    fn pick_arts(
        &mut self,
        w: &Asker<'_>,
        s: &Settings,
        open: &[usize],
        now: Instant,
    ) -> Option<usize> {
        let dc = &w.place.datacenter;
        let progress = self.progress(w);
        let (i, _) = crate::arts::decide(&progress, dc, open, &s.links);
        let (i, queued) = (i?, progress.queued);
        let by_dc = &self.map_outputs.by_dc;
        if crate::arts::homed(by_dc, &queued, dc, i, &s.links) {
            self.remote_wait = None;
            return Some(i);
        }
        let since = *self.remote_wait.get_or_insert(now);
        let copy = crate::arts::copy_time(by_dc, &queued, i, dc, &s.links);
        (now.saturating_duration_since(since).as_secs_f64() >= copy).then_some(i)
    }

    /// What ARTS knows of this job, for a slot of `w`.
    fn progress(&self, w: &Asker<'_>) -> JobProgress<'_> {
        let o = &self.map_outputs;
        JobProgress {
            total_maps: self.maps.len(),
            completed_maps: self.done(MAP),
            running_maps: self.running(MAP),
            map_seconds: o.seconds,
            map_slots: w.map_slots,
            map_input: o.input,
            map_output: o.output,
            reduces: self.reduces.len(),
            running_reduces: self.running(REDUCE),
            output: &o.by_dc,
            queued: crate::arts::Queued::of(&o.by_dc, self.copying()),
        }
    }

    /// The partitions its running reduce attempts copy, and where: one
    /// attempt a partition (a backup copies what the first does).
    fn copying(&self) -> impl Iterator<Item = (usize, &str)> {
        self.reduces
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.running().next().map(|a| (i, a.datacenter.as_str())))
    }

    fn pick_map(
        &mut self,
        w: &Asker<'_>,
        s: &Settings,
        now: Instant,
        topo: &Topology,
    ) -> Option<Pick> {
        let map = |index, level, speculative| Pick {
            kind: MAP,
            index,
            level,
            speculative,
        };
        let dc_ok = |level: Locality| !s.dc_local_maps || level < Locality::Any;
        let best = self
            .best_pending(w, topo)
            .filter(|(level, _)| dc_ok(*level));
        let Some((level, i)) = best else {
            return self
                .straggler(MAP, w, s, now)
                .map(|i| map(i, self.level(i, w, topo), true))
                .filter(|p| dc_ok(p.level));
        };
        if level <= self.allowed(s, topo) {
            if level <= Locality::Node {
                self.missed_offers = 0;
            }
            return Some(map(i, level, false));
        }
        if let Some(i) = self.unplaceable(w, topo) {
            let p = map(i, self.level(i, w, topo), false);
            if dc_ok(p.level) {
                return Some(p);
            }
        }
        self.missed_offers += 1;
        None
    }

    /// Whether a pending map's block is cached on a live worker: through
    /// the open maps or the cached blocks, whichever are fewer.
    fn pending_cached(&self, topo: &Topology) -> bool {
        let q = &self.queues;
        if q.open_count(MAP) <= topo.cached_count() {
            return q.open(MAP).any(|i| {
                q.look();
                self.maps[i].pending() && cached_anywhere(&self.inputs[i], topo)
            });
        }
        topo.cached_blocks().any(|b| {
            q.reading(b).iter().any(|&i| {
                q.look();
                self.maps[i].pending()
            })
        })
    }

    /// The lowest open map `w` may run cache-local: found through the open
    /// maps or the blocks `w` caches, whichever are fewer.
    fn cache_local(&self, w: &Asker<'_>, topo: &Topology) -> Option<usize> {
        let q = &self.queues;
        let mine = topo.cached_by(w.uid);
        if mine.is_empty() {
            return None;
        }
        if q.open_count(MAP) <= mine.len() {
            return q
                .open(MAP)
                .find(|&i| self.fits(i, w, topo, Locality::Cache));
        }
        let candidates: BTreeSet<usize> = mine
            .iter()
            .flat_map(|b| q.reading(b).iter().copied())
            .filter(|&i| q.is_open(MAP, i))
            .collect();
        candidates
            .into_iter()
            .find(|&i| self.fits(i, w, topo, Locality::Cache))
    }

    /// The pending map `w` may run that is closest to its input there,
    /// the lowest index among equals; among equals too, one whose blocks
    /// no other worker caches (leaving the cached ones to the workers that
    /// cache them), looking at up to [`PREFER_SCAN`] of them. Candidates
    /// come from the job's queues, level by level: maps reading blocks `w`
    /// caches, maps `w` holds (and those reading nothing), maps held in
    /// its rack, in its data center, then any open map.
    fn best_pending(&self, w: &Asker<'_>, topo: &Topology) -> Option<(Locality, usize)> {
        let q = &self.queues;
        if let Some(i) = self.cache_local(w, topo) {
            return Some((Locality::Cache, i));
        }
        let node = [
            self.first(q.held_by(w.uid), w, topo, Locality::Node),
            self.first(q.anywhere(), w, topo, Locality::Node),
        ];
        if let Some(i) = node.into_iter().flatten().min() {
            return Some((Locality::Node, i.1));
        }
        for level in [Locality::Rack, Locality::Datacenter] {
            let near = topo
                .near(w, level)
                .filter_map(|u| self.first(q.held_by(u), w, topo, level))
                .min();
            if let Some((_, i)) = near {
                return Some((level, i));
            }
        }
        let any = self.first(q.open(MAP), w, topo, Locality::Any)?;
        Some((self.level(any.1, w, topo), any.1))
    }

    /// The best of `candidates` (map indices, ascending) at `level` for
    /// `w`: `(cached elsewhere, index)` of the first one pending, allowed
    /// on `w` and at that level (at [`Locality::Any`]: at any), preferring
    /// within [`PREFER_SCAN`] of them one whose blocks no worker caches.
    fn first(
        &self,
        candidates: impl Iterator<Item = usize>,
        w: &Asker<'_>,
        topo: &Topology,
        level: Locality,
    ) -> Option<(bool, usize)> {
        let mut found: Option<usize> = None;
        let mut seen = 0;
        for i in candidates {
            if !self.fits(i, w, topo, level) {
                continue;
            }
            if !cached_anywhere(&self.inputs[i], topo) {
                return Some((false, i));
            }
            found = found.or(Some(i));
            seen += 1;
            if seen >= PREFER_SCAN {
                break;
            }
        }
        found.map(|i| (true, i))
    }

    /// Whether map `i` is pending, may run on `w`, and is at `level` there
    /// (any level for [`Locality::Any`]). Counts a candidate looked at.
    fn fits(&self, i: usize, w: &Asker<'_>, topo: &Topology, level: Locality) -> bool {
        self.queues.look();
        let t = &self.maps[i];
        t.pending()
            && t.may_run_on(w)
            && (level == Locality::Any || self.level(i, w, topo) == level)
    }

    /// A pending map `w` may run that waits for no locality: it failed on
    /// a damaged replica. (A map whose blocks no live worker holds fails
    /// its job at once: [`crate::state`]'s unreadable-input check.)
    fn unplaceable(&self, w: &Asker<'_>, topo: &Topology) -> Option<usize> {
        self.queues
            .any_worker()
            .find(|&i| self.fits(i, w, topo, Locality::Any))
    }

    /// How close to its input map `i` would run on `w`: the cache level
    /// when `w` caches every block it reads, else the farthest of its
    /// blocks (each at its nearest replica).
    pub fn level(&self, i: usize, w: &Asker<'_>, topo: &Topology) -> Locality {
        if let MapInput::External(e) = &self.inputs[i] {
            // A range no live worker's host holds is as near from any
            // worker (an object store, HDFS on other hosts, or holders
            // since lost).
            if e.holders.iter().all(|u| topo.place(u).is_none()) {
                return Locality::Node;
            }
            return holders_level(&e.holders, w, topo);
        }
        let blocks = self.inputs[i].blocks();
        if blocks.is_empty() {
            // A synthetic map reads nothing: at home anywhere.
            return Locality::Node;
        }
        if blocks.iter().all(|b| topo.caches(b.id.as_str(), w.uid)) {
            return Locality::Cache;
        }
        blocks
            .iter()
            .map(|b| block_level(b, w, topo))
            .max()
            .unwrap_or(Locality::Any)
    }

    /// The worst level the job may use now, from its missed offers. A job
    /// waits for the cache level only while a block of a pending map is
    /// cached somewhere.
    fn allowed(&self, s: &Settings, topo: &Topology) -> Locality {
        let (m, d) = (self.missed_offers, &s.delay);
        if m <= d.cache && self.pending_cached(topo) {
            Locality::Cache
        } else if m <= d.node {
            Locality::Node
        } else if m <= d.rack {
            Locality::Rack
        } else if m <= d.datacenter {
            Locality::Datacenter
        } else {
            Locality::Any
        }
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
        let median = self.queues.median(kind)? as f64 / 1e6;
        let limit = (median * s.spec_slowdown).max(s.spec_min.as_secs_f64());
        let tasks = self.tasks(kind);
        self.queues.running_tasks(kind).find(|&i| {
            self.queues.look();
            let t = &tasks[i];
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

    /// Records a new attempt of the picked task on `w`; returns its id.
    pub fn launch(&mut self, p: Pick, w: &Asker<'_>, now: Instant) -> u32 {
        let Pick {
            kind,
            index,
            level,
            speculative,
        } = p;
        let t = &mut self.tasks_mut(kind)[index];
        let id = t.attempts.len() as u32;
        t.attempts.push(Attempt {
            id,
            worker: w.id,
            uid: w.uid.to_owned(),
            addr: w.addr.to_owned(),
            started: now,
            ended: None,
            state: AttemptState::Running,
            level,
            speculative,
            report: None,
            datacenter: w.place.datacenter.clone(),
            fetched: Vec::new(),
        });
        self.queues.started(kind, index);
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
        if let Some(a) = self
            .tasks_mut(kind)
            .get_mut(index)
            .and_then(|t| t.attempts.get_mut(id as usize))
        {
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
        now: Instant,
    ) -> (Vec<(WorkerId, u32)>, bool) {
        let id = report.task.as_ref().map_or(0, |t| t.attempt);
        let ok = report.ok;
        let err = report.error.clone();
        let blame_replica = !report.corrupt.is_empty();
        let Some(a) = self.running_attempt(kind, index, id) else {
            return (Vec::new(), true);
        };
        a.ended = Some(now);
        a.report = Some(report);
        self.queues.stopped(kind, index);
        let t = match kind {
            MAP => &mut self.maps[index],
            REDUCE => &mut self.reduces[index],
        };
        if ok {
            t.attempts[id as usize].state = AttemptState::Succeeded;
            if t.done.is_some() {
                return (Vec::new(), true);
            }
            t.done = Some(id as usize);
            let took = micros(&t.attempts[id as usize]);
            if kind == MAP {
                self.map_outputs.count(&t.attempts[id as usize], 1);
            }
            let mut kills = Vec::new();
            for a in &mut t.attempts {
                if a.state == AttemptState::Running {
                    a.state = AttemptState::Killed;
                    a.ended = Some(now);
                    kills.push((a.worker, a.id));
                }
            }
            for _ in &kills {
                self.queues.stopped(kind, index);
            }
            self.queues.done(kind, index);
            self.queues.winner(kind, took, true);
            return (kills, false);
        }
        t.attempts[id as usize].state = AttemptState::Failed;
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
        if t.done != Some(id as usize) {
            return false;
        }
        t.attempts[id as usize].state = AttemptState::Failed;
        t.failures += 1;
        t.last_error = format!("map output unreadable: {reason}");
        self.map_outputs.count(&t.attempts[id as usize], -1);
        t.reset(now);
        let took = micros(&t.attempts[id as usize]);
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
        for (kind, tasks) in [(MAP, &mut self.maps), (REDUCE, &mut self.reduces)] {
            for (i, t) in tasks.iter_mut().enumerate() {
                for a in t.attempts.iter_mut().filter(|a| a.worker == worker) {
                    if a.state == AttemptState::Running {
                        a.state = AttemptState::Lost;
                        a.ended = Some(now);
                        t.pending_since = now;
                        queues.stopped(kind, i);
                    }
                }
                let needed = kind == REDUCE || map_only || reduces_left;
                if t.winner().is_some_and(|a| a.worker == worker) && needed {
                    let w = t.done.expect("has a winner");
                    if kind == MAP {
                        outputs.count(&t.attempts[w], -1);
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
        self.queues.stopped(kind, index);
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

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
