//! Jobs, tasks and attempts: the scheduler's state machine.
//!
//! A job has one map task per input block (or per group of small blocks)
//! and one reduce task per partition. A task is *pending* when it has neither a finished attempt
//! nor a running one. Rules:
//!
//! - Locality levels ([`Locality`]): a map runs best where its block is
//!   cached (the block cache, to come), then on a worker holding a replica
//!   (node), then in the rack of one, then in its data center, then
//!   anywhere.
//! - Delay scheduling by missed offers (Zaharia et al., EuroSys 2010; the
//!   thresholds of seed 002): a job offered a free map slot takes its best
//!   pending map for that worker if the map's level is one the job may
//!   use now; else it declines and counts a missed offer. The levels it
//!   may use widen with its count ([`Delay`]): node-local until it has
//!   missed [`Delay::node`] offers, rack-local until [`Delay::rack`], and so
//!   on; launching a node-local (or better) map resets the count. A map
//!   that failed on a damaged replica goes anywhere at once; one whose
//!   blocks no live worker holds fails its job.
//! - Queues ([`crate::queues`]): a decision takes its candidates from the
//!   job's queues by level, not from a scan of its tasks, so its cost does
//!   not grow with the job.
//! - Reduces start as [`Settings::reduce`] says ([`crate::arts`]): once a
//!   fraction of the maps are done, maps still pending or not (Hadoop's
//!   slow-start: 0.05 starts them early, 0.8 late), or by seed 003's ARTS
//!   from the map outputs per partition and data center; workers have
//!   separate map and reduce slots, so reducers waiting for map outputs
//!   never hold a map slot.
//! - Data-center-local maps ([`Settings::dc_local_maps`]): a map runs only
//!   in a data center holding a live replica of its blocks, never across
//!   the WAN, whatever its missed offers.
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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use sluice_request::JobRequest;

use sluice_proto::ids::{JobId, TaskKind, WorkerId};

use crate::arts::{JobProgress, ReduceScheduler};
pub use crate::config::{Delay, Settings};
use crate::input::MapInput;
use crate::queues::Queues;
use crate::store::RecordState;
use sluice_proto::catalog::BlockMeta;
use sluice_proto::proto;

/// Map task kind.
pub const MAP: TaskKind = TaskKind::Map;
/// Reduce task kind.
pub const REDUCE: TaskKind = TaskKind::Reduce;

/// How close a map runs to its input, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Locality {
    /// Its block is cached in the worker's memory.
    Cache,
    /// The worker holds a replica of its block (or it reads no block).
    Node,
    /// A live holder is in the worker's rack.
    Rack,
    /// A live holder is in the worker's data center.
    Datacenter,
    /// Anywhere else.
    Any,
}

impl Locality {
    /// Every level, best first.
    pub const ALL: [Locality; 5] = [
        Locality::Cache,
        Locality::Node,
        Locality::Rack,
        Locality::Datacenter,
        Locality::Any,
    ];

    /// `cache`, `node`, `rack`, `datacenter` or `any`.
    pub fn name(self) -> &'static str {
        match self {
            Locality::Cache => "cache",
            Locality::Node => "node",
            Locality::Rack => "rack",
            Locality::Datacenter => "datacenter",
            Locality::Any => "any",
        }
    }
}

/// Where the live workers are, and which blocks each caches (borrowed
/// from the workers' own sets, so building it costs the number of
/// workers, not of cached blocks).
#[derive(Debug, Clone, Default)]
pub struct Topology<'c> {
    places: HashMap<String, Place>,
    /// Each live worker's cached blocks, as a set and as reported.
    caches: HashMap<&'c str, (&'c HashSet<String>, &'c [String])>,
}

/// The job property that picks its reduce scheduler (`early`, `delayed`
/// or `arts`), over the coordinator's `--reduce-scheduler`.
pub const REDUCE_SCHEDULER_PROPERTY: &str = "sluice.reduce.scheduler";

/// A worker's place in the network.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Place {
    pub datacenter: String,
    pub rack: String,
}

impl<'c> Topology<'c> {
    /// The live workers, by uid.
    pub fn new(places: impl IntoIterator<Item = (String, Place)>) -> Self {
        Topology {
            places: places.into_iter().collect(),
            caches: HashMap::new(),
        }
    }

    /// With the blocks each live worker caches: `(uid, set, list)`.
    pub fn with_caches(
        mut self,
        caches: impl IntoIterator<Item = (&'c str, &'c HashSet<String>, &'c [String])>,
    ) -> Self {
        for (uid, set, list) in caches {
            if !list.is_empty() {
                self.caches.insert(uid, (set, list));
            }
        }
        self
    }

    /// Whether worker `uid` caches block `block`.
    pub fn caches(&self, block: &str, uid: &str) -> bool {
        self.caches
            .get(uid)
            .is_some_and(|(set, _)| set.contains(block))
    }

    /// The blocks live worker `uid` caches.
    pub fn cached_by(&self, uid: &str) -> &[String] {
        self.caches.get(uid).map_or(&[], |(_, list)| list)
    }

    /// The blocks live workers cache (a block cached twice comes twice).
    pub fn cached_blocks(&self) -> impl Iterator<Item = &str> {
        self.caches
            .values()
            .flat_map(|(_, list)| list.iter().map(String::as_str))
    }

    /// How many blocks [`Topology::cached_blocks`] gives.
    pub fn cached_count(&self) -> usize {
        self.caches.values().map(|(_, list)| list.len()).sum()
    }

    /// The live workers other than `w` in its rack ([`Locality::Rack`]),
    /// or in its data center outside its rack ([`Locality::Datacenter`]).
    pub fn near<'t>(&'t self, w: &'t Asker<'_>, level: Locality) -> impl Iterator<Item = &'t str> {
        self.places
            .iter()
            .filter(move |(u, p)| {
                *u != w.uid
                    && match level {
                        Locality::Rack => *p == w.place,
                        Locality::Datacenter => p.datacenter == w.place.datacenter && *p != w.place,
                        _ => false,
                    }
            })
            .map(|(u, _)| u.as_str())
    }

    /// Whether some live worker caches block `block`.
    pub fn cached_anywhere(&self, block: &str) -> bool {
        self.caches.values().any(|(set, _)| set.contains(block))
    }

    /// Where live worker `uid` is; `None` when it is not live.
    pub fn place(&self, uid: &str) -> Option<&Place> {
        self.places.get(uid)
    }

    /// Live workers.
    pub fn len(&self) -> usize {
        self.places.len()
    }

    /// Whether no worker is live.
    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }
}

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
    pub uid: String,
    pub addr: String,
    pub started: Instant,
    pub ended: Option<Instant>,
    pub state: AttemptState,
    /// How close to its input it ran.
    pub level: Locality,
    pub speculative: bool,
    pub report: Option<proto::TaskReport>,
    /// Its worker's data center.
    pub datacenter: String,
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

/// A worker asking for work.
#[derive(Debug, Clone)]
pub struct Asker<'a> {
    pub id: WorkerId,
    pub uid: &'a str,
    pub addr: &'a str,
    /// Where it is.
    pub place: &'a Place,
    /// Live workers in the cluster.
    pub live: usize,
    /// Map slots of the live workers.
    pub map_slots: usize,
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
    /// Offers of a map slot declined since it last launched a node-local
    /// map (delay scheduling).
    pub missed_offers: u32,
    /// Since when ARTS has declined to start a partition outside the data
    /// center holding most of its output (since it last started one at
    /// home).
    pub remote_wait: Option<Instant>,
    /// Its pool (fair scheduling).
    pub pool: String,
    /// Its tasks by state and locality, kept as attempts start and end.
    pub queues: Queues,
    /// When its reduces start, if the job says (`sluice.reduce.scheduler`).
    pub reduce_scheduler: Option<ReduceScheduler>,
    /// What its winning maps have produced so far.
    pub map_outputs: MapOutputs,
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

/// Microseconds an ended attempt ran.
fn micros(a: &Attempt) -> u64 {
    let end = a.ended.unwrap_or(a.started);
    u64::try_from(end.duration_since(a.started).as_micros()).unwrap_or(u64::MAX)
}

/// How close `w` is to the nearest live replica of `b`.
fn block_level(b: &BlockMeta, w: &Asker<'_>, topo: &Topology) -> Locality {
    holders_level(&b.replicas, w, topo)
}

/// How close `w` is to the nearest live worker of `holders`.
fn holders_level(holders: &[String], w: &Asker<'_>, topo: &Topology) -> Locality {
    holders
        .iter()
        .filter_map(|u| topo.place(u).map(|p| (u, p)))
        .map(|(u, p)| {
            if u == w.uid {
                Locality::Node
            } else if p == w.place {
                Locality::Rack
            } else if p.datacenter == w.place.datacenter {
                Locality::Datacenter
            } else {
                Locality::Any
            }
        })
        .min()
        .unwrap_or(Locality::Any)
}

/// Whether a block `input` reads is cached on a live worker.
fn cached_anywhere(input: &MapInput, topo: &Topology) -> bool {
    input
        .blocks()
        .iter()
        .any(|b| topo.cached_anywhere(b.id.as_str()))
}

/// `m00003` or `r00001`.
pub fn task_name(kind: TaskKind, index: usize) -> String {
    let k = if kind == MAP { 'm' } else { 'r' };
    format!("{k}{index:05}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arts::Links;
    use std::time::Duration;

    /// A job whose map `i` reads a block held by `holders[i]` (an empty
    /// list: a synthetic map).
    fn job_on(holders: &[&[&str]], reducers: u32) -> Job {
        let blocks = holders
            .iter()
            .enumerate()
            .map(|(i, h)| {
                if h.is_empty() {
                    return MapInput::Synthetic;
                }
                MapInput::Blocks(vec![BlockMeta {
                    id: sluice_proto::ids::BlockId::new(format!("b{i}")).unwrap(),
                    len: 10,
                    crc: 0,
                    replicas: h.iter().map(|u| u.to_string()).collect(),
                    corrupt: Vec::new(),
                }])
            })
            .collect();
        Job::new(
            JobId(1),
            sluice_request::JobRequest::new("wordcount", &(), "in", "out"),
            blocks,
            reducers,
            [0; 32],
            Instant::now(),
        )
    }

    /// Two workers `a` and `b` in one rack; map `i` on `a` when even.
    fn job(maps: usize, reducers: u32) -> Job {
        let holders: Vec<&[&str]> = (0..maps)
            .map(|i| if i % 2 == 0 { &["a"][..] } else { &["b"][..] })
            .collect();
        job_on(&holders, reducers)
    }

    fn place(dc: &str, rack: &str) -> Place {
        Place {
            datacenter: dc.into(),
            rack: rack.into(),
        }
    }

    /// Live workers `(uid, datacenter, rack)`; ids are positions + 1.
    fn topology(workers: &[(&str, &str, &str)]) -> Topology<'static> {
        Topology::new(
            workers
                .iter()
                .map(|(u, dc, rack)| (u.to_string(), place(dc, rack))),
        )
    }

    const ONE_RACK: [(&str, &str, &str); 2] = [("a", "dc1", "r1"), ("b", "dc1", "r1")];

    /// Offers worker `uid` of `topo` a map slot.
    fn offer(j: &mut Job, topo: &Topology, uid: &str, s: &Settings) -> Option<(usize, Locality)> {
        let p = topo.place(uid).expect("live worker").clone();
        let id = uid.bytes().next().map_or(0, u64::from);
        let w = Asker {
            id: WorkerId(id),
            uid,
            addr: "x",
            place: &p,
            live: topo.len(),
            map_slots: topo.len(),
        };
        let pick = j.pick(&w, MAP, s, Instant::now(), topo)?;
        j.launch(pick, &w, Instant::now());
        Some((pick.index, pick.level))
    }

    /// One scheduling scenario: workers, the holders of each map's block,
    /// delay thresholds, and offers of a map slot (by worker) with the map
    /// and level each must launch, or `None` for a declined offer. A
    /// launched map keeps running.
    fn check(
        workers: &[(&str, &str, &str)],
        holders: &[&[&str]],
        delay: Delay,
        offers: &[(&str, Option<(usize, Locality)>)],
    ) -> Job {
        let topo = topology(workers);
        let s = Settings {
            delay,
            ..Settings::default()
        };
        let mut j = job_on(holders, 1);
        for (n, (uid, want)) in offers.iter().enumerate() {
            let got = offer(&mut j, &topo, uid, &s);
            assert_eq!(
                got, *want,
                "offer {n} to {uid} (missed {})",
                j.missed_offers
            );
        }
        j
    }

    fn delay(node: u32, rack: u32, datacenter: u32) -> Delay {
        Delay {
            cache: 0,
            node,
            rack,
            datacenter,
        }
    }

    use Locality::{Any, Datacenter, Node, Rack};

    #[test]
    fn a_job_declines_offers_until_it_has_missed_enough_for_the_next_level() {
        check(
            &ONE_RACK,
            &[&["a"], &["b"]],
            delay(2, 9, 9),
            &[
                ("a", Some((0, Node))),
                ("a", None),
                ("a", None),
                ("a", None),
                ("a", Some((1, Rack))),
            ],
        );
    }

    #[test]
    fn a_node_local_launch_resets_the_count_and_a_rack_one_does_not() {
        let j = check(
            &ONE_RACK,
            &[&["b"], &["b"], &["b"]],
            delay(1, 9, 9),
            &[
                ("a", None),
                ("a", None),
                ("a", Some((0, Rack))),
                ("a", Some((1, Rack))),
            ],
        );
        assert_eq!(j.missed_offers, 2, "rack-local launches keep the count");
        let mut j = job_on(&[&["a"], &["b"]], 1);
        j.missed_offers = 5;
        let topo = topology(&ONE_RACK);
        let s = Settings::default();
        assert_eq!(offer(&mut j, &topo, "a", &s), Some((0, Node)));
        assert_eq!(j.missed_offers, 0, "a node-local launch resets it");
    }

    #[test]
    fn each_level_waits_its_own_threshold() {
        let workers = [
            ("a", "dc1", "r1"),
            ("b", "dc1", "r1"),
            ("c", "dc1", "r2"),
            ("e", "dc2", "r1"),
        ];
        // From c, b's block is in the data center but not the rack.
        check(
            &workers,
            &[&["b"]],
            delay(1, 2, 9),
            &[
                ("c", None),
                ("c", None),
                ("c", None),
                ("c", Some((0, Datacenter))),
            ],
        );
        // From e (another data center, a rack of the same name), anywhere.
        check(
            &workers,
            &[&["b"]],
            delay(0, 1, 2),
            &[("e", None), ("e", None), ("e", None), ("e", Some((0, Any)))],
        );
        // The best level among the replicas counts.
        check(
            &workers,
            &[&["e", "a"]],
            delay(0, 9, 9),
            &[("b", None), ("b", Some((0, Rack)))],
        );
    }

    #[test]
    fn maps_without_a_block_do_not_wait() {
        // A synthetic map is at home on any worker. (A map whose blocks no
        // live worker holds is not scheduled: it fails its job.)
        check(
            &ONE_RACK,
            &[&[], &[]],
            Delay::default(),
            &[("a", Some((0, Node))), ("b", Some((1, Node)))],
        );
    }

    #[test]
    fn the_default_delay_is_the_seeds() {
        let mut offers = vec![("a", Some((0, Node)))];
        offers.extend(std::iter::repeat_n(("a", None), 41));
        offers.push(("a", Some((1, Rack))));
        check(&ONE_RACK, &[&["a"], &["b"]], Delay::default(), &offers);
    }

    fn asker<'a>(id: u64, uid: &'a str, p: &'a Place) -> Asker<'a> {
        Asker {
            id: WorkerId(id),
            uid,
            addr: "x",
            place: p,
            live: 2,
            map_slots: 2,
        }
    }

    /// A pick made by hand.
    fn chosen(kind: TaskKind, index: usize, level: Locality, spec: bool) -> Pick {
        Pick {
            kind,
            index,
            level,
            speculative: spec,
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
    fn first_success_wins_and_late_attempts_are_discarded() {
        let mut j = job(1, 1);
        let s = Settings::default();
        let p = place("dc1", "r1");
        j.launch(
            chosen(MAP, 0, Node, false),
            &asker(1, "a", &p),
            Instant::now(),
        );
        j.launch(
            chosen(MAP, 0, Rack, true),
            &asker(2, "b", &p),
            Instant::now(),
        );
        let (kills, discard) = j.finish(MAP, 0, ok(MAP, 0, 1), &s, Instant::now());
        assert!(!discard);
        assert_eq!(kills, vec![(WorkerId(1), 0)]);
        assert_eq!(j.maps[0].done, Some(1));
        // The killed attempt's late report changes nothing.
        let (_, discard) = j.finish(MAP, 0, ok(MAP, 0, 0), &s, Instant::now());
        assert!(discard);
        assert_eq!(j.maps[0].done, Some(1));
    }

    #[test]
    fn repeated_failures_fail_the_job() {
        let mut j = job(1, 1);
        let s = Settings::default();
        let p = place("dc1", "r1");
        for attempt in 0..4 {
            let id = j.launch(
                chosen(MAP, 0, Node, false),
                &asker(1, "a", &p),
                Instant::now(),
            );
            assert_eq!(id, attempt);
            let mut r = ok(MAP, 0, id);
            r.ok = false;
            r.error = "boom".into();
            j.finish(MAP, 0, r, &s, Instant::now());
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
        let topo = topology(&ONE_RACK);
        let p = place("dc1", "r1");
        for attempt in 0..10 {
            let id = j.launch(
                chosen(MAP, 1, Node, false),
                &asker(2, "b", &p),
                Instant::now(),
            );
            assert_eq!(id, attempt);
            let mut r = ok(MAP, 1, id);
            r.ok = false;
            r.error = "damaged replica".into();
            r.corrupt.push(proto::CorruptReplica {
                block: "b1".into(),
                ..Default::default()
            });
            j.finish(MAP, 1, r, &s, Instant::now());
        }
        assert!(j.is_running(), "{:?}", j.state);
        assert_eq!(j.maps[1].failures, 0);
        // And it may go to a worker without the block at once.
        j.launch(
            chosen(MAP, 0, Node, false),
            &asker(1, "a", &p),
            Instant::now(),
        );
        assert_eq!(offer(&mut j, &topo, "a", &s), Some((1, Rack)));
    }

    #[test]
    fn a_failed_task_goes_to_another_worker_while_there_is_one() {
        let mut j = job(1, 1);
        let s = Settings {
            delay: delay(0, 9, 9),
            ..Settings::default()
        };
        let topo = topology(&ONE_RACK);
        let p = place("dc1", "r1");
        let id = j.launch(
            chosen(MAP, 0, Node, false),
            &asker(97, "a", &p),
            Instant::now(),
        );
        let mut r = ok(MAP, 0, id);
        r.ok = false;
        r.error = "no space left on device".into();
        j.finish(MAP, 0, r.clone(), &s, Instant::now());
        assert_eq!(offer(&mut j, &topo, "a", &s), None, "not again on a");
        assert_eq!(
            offer(&mut j, &topo, "b", &s),
            None,
            "one missed offer first"
        );
        assert_eq!(offer(&mut j, &topo, "b", &s), Some((0, Rack)));
        r.task.as_mut().unwrap().attempt = 1;
        j.finish(MAP, 0, r, &s, Instant::now());
        // Failed on every live worker: any may try again.
        assert_eq!(offer(&mut j, &topo, "a", &s), Some((0, Node)));
    }

    #[test]
    fn lost_workers_outputs_are_recomputed_while_needed() {
        let mut j = job(2, 1);
        let s = Settings::default();
        let p = place("dc1", "r1");
        j.launch(
            chosen(MAP, 0, Node, false),
            &asker(1, "a", &p),
            Instant::now(),
        );
        j.finish(MAP, 0, ok(MAP, 0, 0), &s, Instant::now());
        j.launch(
            chosen(MAP, 1, Node, false),
            &asker(2, "b", &p),
            Instant::now(),
        );
        j.worker_lost(WorkerId(1), Instant::now());
        assert!(
            j.maps[0].pending(),
            "finished map output of a lost worker re-runs"
        );
        assert!(j.maps[1].running().next().is_some());
        j.worker_lost(WorkerId(2), Instant::now());
        assert!(j.maps[1].pending());
        assert_eq!(j.maps[1].failures, 0, "lost attempts do not count");
    }

    #[test]
    fn reduces_start_at_slowstart_while_maps_are_still_pending() {
        let mut j = job(4, 1);
        let topo = topology(&ONE_RACK);
        let p = place("dc1", "r1");
        let a = asker(1, "a", &p);
        let now = Instant::now();
        let early = Settings {
            reduce: ReduceScheduler::SlowStart(0.05),
            ..Settings::default()
        };
        let late = Settings::default();
        assert_eq!(j.pick(&a, REDUCE, &early, now, &topo), None, "0 of 4 done");
        j.launch(chosen(MAP, 0, Node, false), &a, Instant::now());
        j.finish(MAP, 0, ok(MAP, 0, 0), &early, Instant::now());
        assert!(j.maps[1..].iter().all(Task::pending));
        assert_eq!(j.pick(&a, REDUCE, &late, now, &topo), None, "1/4 < 0.8");
        let r = j.pick(&a, REDUCE, &early, now, &topo).unwrap();
        assert_eq!((r.kind, r.index, r.speculative), (REDUCE, 0, false));
    }

    #[test]
    fn stragglers_get_backups_once_no_map_is_pending() {
        let mut j = job(2, 1);
        let s = Settings {
            spec_min: Duration::ZERO,
            ..Settings::default()
        };
        let topo = topology(&ONE_RACK);
        let p = place("dc1", "r1");
        let a = asker(1, "a", &p);
        j.launch(chosen(MAP, 0, Node, false), &a, Instant::now());
        j.finish(MAP, 0, ok(MAP, 0, 0), &s, Instant::now());
        j.launch(
            chosen(MAP, 1, Node, false),
            &asker(2, "b", &p),
            Instant::now(),
        );
        // Map 1 runs far longer than map 0 took: a backup on a.
        let later = Instant::now() + Duration::from_secs(5);
        let pick = j.pick(&a, MAP, &s, later, &topo).unwrap();
        assert_eq!((pick.index, pick.level, pick.speculative), (1, Rack, true));
    }

    const TWO_DCS: [(&str, &str, &str); 3] =
        [("a", "dc1", "r1"), ("b", "dc1", "r1"), ("x", "dc2", "r2")];

    #[test]
    fn dc_local_maps_never_cross_the_wan_however_long_they_wait() {
        let topo = topology(&TWO_DCS);
        let s = Settings {
            delay: delay(0, 0, 0),
            dc_local_maps: true,
            ..Settings::default()
        };
        // Map 0's block is in dc1 only; map 1's in dc2 only.
        let mut j = job_on(&[&["a"], &["x"]], 1);
        assert_eq!(offer(&mut j, &topo, "x", &s), Some((1, Locality::Node)));
        for _ in 0..200 {
            assert_eq!(offer(&mut j, &topo, "x", &s), None, "map 0 stays in dc1");
        }
        assert_eq!(offer(&mut j, &topo, "b", &s), None, "b declines once");
        assert_eq!(offer(&mut j, &topo, "b", &s), Some((0, Locality::Rack)));
        // Without the rule the same job sends map 0 across at once.
        let open = Settings {
            delay: delay(0, 0, 0),
            ..Settings::default()
        };
        let mut k = job_on(&[&["a"]], 1);
        assert_eq!(offer(&mut k, &topo, "x", &open), None);
        assert_eq!(offer(&mut k, &topo, "x", &open), Some((0, Locality::Any)));
    }

    #[test]
    fn a_dc_local_map_that_met_a_damaged_replica_stays_with_its_other_replicas() {
        let topo = topology(&TWO_DCS);
        let s = Settings {
            dc_local_maps: true,
            ..Settings::default()
        };
        // Replicas on a (dc1) and x (dc2); a's was damaged.
        let mut j = job_on(&[&["a", "x"]], 1);
        let p = place("dc1", "r1");
        j.launch(
            chosen(MAP, 0, Node, false),
            &asker(1, "a", &p),
            Instant::now(),
        );
        let mut r = ok(MAP, 0, 0);
        r.ok = false;
        r.corrupt.push(proto::CorruptReplica::default());
        j.finish(MAP, 0, r, &s, Instant::now());
        j.inputs[0].blocks_mut()[0].replicas = vec!["x".into()];
        assert_eq!(
            offer(&mut j, &topo, "b", &s),
            None,
            "dc1 has no intact replica"
        );
        assert_eq!(offer(&mut j, &topo, "x", &s), Some((0, Locality::Node)));
    }

    #[test]
    fn arts_holds_an_aggregating_jobs_reduces_until_its_maps_are_done() {
        let topo = topology(&TWO_DCS);
        let s = Settings {
            reduce: ReduceScheduler::Arts,
            ..Settings::default()
        };
        let mut j = job_on(&[&["a"], &["a"], &["b"], &["b"]], 2);
        let p = place("dc1", "r1");
        let (a, b) = (asker(1, "a", &p), asker(2, "b", &p));
        assert_eq!(
            j.pick(&a, REDUCE, &s, Instant::now(), &topo),
            None,
            "no estimate yet"
        );
        // Each map takes a second: with the clock read at each call, a
        // release build's maps took nanoseconds, the maps left seemed to
        // finish before any copy, and the test failed.
        let t0 = Instant::now();
        for i in 0..4 {
            let w = if i < 2 { &a } else { &b };
            let start = t0 + Duration::from_secs(i as u64);
            j.launch(chosen(MAP, i, Node, false), w, start);
            let mut r = ok(MAP, i as u32, 0);
            r.input_bytes = 1000;
            r.partition_bytes = vec![5, 5];
            let end = start + Duration::from_secs(1);
            j.finish(MAP, i, r, &s, end);
            let pick = j.pick(&a, REDUCE, &s, end, &topo);
            if i < 3 {
                assert_eq!(pick, None, "1% of the input is an aggregating job's output");
            } else {
                assert_eq!(pick.map(|p| p.index), Some(0), "every map is done");
            }
        }
        assert_eq!(j.map_outputs.by_dc["dc1"], [20, 20]);
        assert_eq!(j.map_outputs.output, 40);
        // dc2 holds none of it: its worker waits while dc1's may come,
        // as long as copying partition 0's 20 bytes at 10 bytes/s takes.
        let slow = Settings {
            links: Links {
                lan: 1e9,
                wan: 10.0,
                pairs: HashMap::new(),
            },
            ..s.clone()
        };
        let p2 = place("dc2", "r2");
        let x = asker(3, "x", &p2);
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        assert_eq!(j.pick(&x, REDUCE, &slow, at(0.0), &topo), None);
        assert_eq!(j.pick(&x, REDUCE, &slow, at(1.9), &topo), None);
        let home = j.pick(&a, REDUCE, &slow, at(1.95), &topo);
        assert_eq!(home.map(|p| p.index), Some(0));
        assert_eq!(j.remote_wait, None, "a reduce at home restarts the wait");
        assert_eq!(j.pick(&x, REDUCE, &slow, at(2.0), &topo), None);
        assert_eq!(j.pick(&x, REDUCE, &slow, at(3.9), &topo), None);
        let late = j.pick(&x, REDUCE, &slow, at(4.0), &topo);
        assert_eq!(
            late.map(|p| p.index),
            Some(0),
            "after the copy's time it crosses"
        );
        j.worker_lost(WorkerId(2), Instant::now());
        assert_eq!(j.map_outputs.by_dc["dc1"], [10, 10], "b's outputs are lost");
        assert_eq!(j.map_outputs.input, 2000);
    }
}
