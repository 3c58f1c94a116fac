//! The coordinator's state and the one function that changes it.
//!
//! Everything the coordinator knows is a [`State`]; everything that
//! happens to it is an [`Event`] (a worker registers or beats, a task
//! reports, a reducer cannot fetch, a client submits, kills or edits the
//! catalog, the clock ticks). [`State::handle`] takes one event and
//! returns a [`Step`]: the answer to whoever sent it, what must be written
//! to disk, and whether waiting callers should look again. `handle` does
//! no I/O and reads no clock (the time comes with the event as [`At`]).
//!
//! The service ([`crate::service`]) turns each call into an event and,
//! under the same lock, writes what the step asks: the job records, and
//! the catalog, whose outcome comes back as [`Event::CatalogSaved`]. A
//! job's commit is therefore decided by the loop (the output data set
//! enters the catalog, the job waits in [`JobState::Committing`]), made
//! durable by the service, and finished or undone by the loop when the
//! write's outcome arrives. Queries (listings, job status, map outputs)
//! read the state and change nothing.
//!
//! Which job a free slot goes to is the [`Policy`]'s choice (FIFO, fair);
//! which of its tasks, and whether it declines to wait for locality, is
//! the job's ([`Job::pick`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic::Status;

use crate::combine;
use crate::config::CoordinatorConfig;
use crate::editlog::CatalogEdit;
use crate::input::{External, ExternalInput, MapInput};
use crate::policy::{JobView, Policy, PoolConfig};
use crate::sched::{task_name, Asker, Job, JobState, Place, Topology, MAP, REDUCE};
use crate::store::{JobRecord, Node, PlacementPolicy, RecordState, Writer};
use sluice_proto::catalog::{BlockMeta, Catalog, DatasetMeta, FileMeta};
use sluice_proto::ids::{output_block_job, DatasetName};
use sluice_proto::ids::{JobId, TaskKind, WorkerId};
use sluice_proto::proto;
use sluice_proto::ClusterError;
use sluice_request::JobRequest;

/// How long blocks planned for a put are reserved for it (a put that
/// neither commits nor abandons them in this time is assumed dead).
const PUT_LEASE: Duration = Duration::from_secs(24 * 3600);

/// A data set committed this recently is not checked against block
/// reports: a report listed before a block was stored may arrive after
/// its commit.
const REPORT_GUARD_MS: u64 = 5_000;

/// When an event happens: the monotonic clock for durations, and the
/// wall clock (ms since the Unix epoch) for what is recorded.
#[derive(Debug, Clone, Copy)]
pub struct At {
    pub now: Instant,
    pub ms: u64,
}

impl At {
    /// The time now.
    pub fn now() -> Self {
        At {
            now: Instant::now(),
            ms: sluice_proto::now_ms(),
        }
    }

    /// `d` later.
    pub fn after(self, d: Duration) -> Self {
        At {
            now: self.now + d,
            ms: self.ms + d.as_millis() as u64,
        }
    }
}

/// A job a client submitted, checked by the service (its kind built as a
/// worker would build it).
#[derive(Debug)]
pub struct Submission {
    pub request: JobRequest,
    /// Replicas of each output block.
    pub replication: u32,
    /// Its reduce partitions (0: map-only).
    pub reducers: u32,
    /// The data sets every task reads whole.
    pub side: Vec<String>,
    /// When the input is in an external store (`hdfs://`, `s3://`): its
    /// splits, planned by the service, each with the hosts holding it.
    pub external: Option<Vec<ExternalInput>>,
}

/// Everything that happens to the coordinator.
pub enum Event {
    /// A worker joins (or rejoins) with the blocks it holds.
    Register(proto::RegisterRequest),
    /// A worker is alive; it brings its tasks' reports, damaged replicas
    /// its scanner found, and now and then a block report. Its free slots
    /// are offered to the jobs.
    Heartbeat(proto::HeartbeatRequest),
    /// A worker's free slots are offered again (a heartbeat that had
    /// nothing to take waited for work and asks once more).
    Offer(WorkerId),
    /// A reducer could not read a map's output.
    FetchFailed(proto::FetchFailedRequest),
    /// A client or worker found damaged replicas.
    Corrupt(Vec<proto::CorruptReplica>),
    Submit(Submission),
    Kill {
        job: JobId,
        /// Who asked (empty: a user).
        reason: String,
    },
    /// A put asks where its blocks go.
    PlanBlocks(proto::PlanBlocksRequest),
    /// A put commits its data set.
    CommitDataset {
        dataset: DatasetMeta,
        overwrite: bool,
    },
    /// A put gives up blocks it was handed.
    AbandonBlocks(Vec<String>),
    RemoveDataset(String),
    /// The scheduling policy is replaced (`sluice pools reload`).
    Policy(Box<dyn Policy>),
    /// A cache directive is added (`sluice cache add`).
    CacheAdd(proto::CacheAddRequest),
    /// Cache directives are removed (`sluice cache rm`).
    CacheRemove(proto::CacheRemoveRequest),
    /// Time passes: silent workers are lost, jobs that cannot go on fail,
    /// starved pools preempt.
    Tick,
    /// The catalog write a step asked for succeeded or failed.
    CatalogSaved {
        write: CatalogWrite,
        result: Result<(), String>,
    },
}

impl Event {
    /// Whether handling it may let a waiting heartbeat, job waiter or
    /// reducer see something new.
    fn wakes(&self) -> bool {
        !matches!(
            self,
            Event::Heartbeat(_) | Event::Offer(_) | Event::PlanBlocks(_)
        )
    }
}

/// The answer to an event's sender.
#[derive(Debug)]
pub enum Answer {
    Done,
    Registered(proto::RegisterReply),
    /// `None`: nothing for the worker now; the service holds the
    /// heartbeat until something changes and then sends [`Event::Offer`].
    Heartbeat(Option<proto::HeartbeatReply>),
    Planned(proto::PlanBlocksReply),
    Submitted(JobId),
    /// The job as it stands after the event.
    Job(proto::JobStatus),
    /// The cache directive added.
    Directive(proto::CacheDirective),
    /// How many cache directives were removed.
    Removed(u32),
}

/// What one event did: the answer, what to write, whom to wake.
#[derive(Debug)]
pub struct Step {
    pub answer: Result<Answer, Status>,
    /// Write the catalog, then send [`Event::CatalogSaved`] with it.
    pub catalog: Option<CatalogWrite>,
    /// Write the job records.
    pub save_jobs: bool,
    /// Reports of jobs that ended, to add to the job history.
    pub history: Vec<(JobId, String)>,
    /// Waiting callers should look again.
    pub wake: bool,
}

/// A catalog change waiting for its write: how to undo it if the write
/// fails, and what follows once it is on disk.
#[derive(Debug, Default)]
pub struct CatalogWrite {
    /// Data set entries as they were before, to put back on failure
    /// (undone in reverse order).
    undo: Vec<(DatasetName, Option<DatasetMeta>)>,
    then: Vec<Then>,
    /// The cache directives as they were before, to put back on failure.
    directives: Option<Vec<sluice_proto::catalog::CacheDirective>>,
    /// Data sets changed in place (damaged replicas marked), beside those
    /// in `undo`.
    touched: Vec<DatasetName>,
    /// A client waits on it: a failed write is its error (otherwise it is
    /// logged).
    client: bool,
}

impl CatalogWrite {
    /// The change to log: every data set it touched as `c` holds it now,
    /// the directives if they changed, the counters.
    pub fn edit(&self, c: &Catalog) -> CatalogEdit {
        let names = self.undo.iter().map(|(n, _)| n.clone());
        let names = names.chain(self.touched.iter().cloned());
        CatalogEdit::of(c, names, self.directives.is_some())
    }
}

/// What a catalog write makes happen once it is on disk.
#[derive(Debug)]
enum Then {
    /// A job's output data set is committed (replacing one, whose blocks
    /// go).
    Commit {
        job: JobId,
        replaced: Option<DatasetMeta>,
    },
    /// A data set's blocks are deleted from their workers.
    Delete(DatasetMeta),
    /// A put's blocks are no longer reserved.
    Unplan(Vec<String>),
}

pub(crate) struct WorkerState {
    pub(crate) info: proto::WorkerInfo,
    last_seen: Instant,
    kills: Vec<proto::TaskId>,
    deletes: Vec<String>,
    finished_jobs: Vec<u64>,
    kept_blocks: Vec<String>,
    /// What its block cache holds, as it last reported.
    pub(crate) cache: proto::CacheReport,
    /// The same blocks as a set, for lookups.
    cached: HashSet<String>,
    /// The pinned blocks it was last told of (`None`: not told yet).
    pins_sent: Option<Vec<String>>,
}

impl WorkerState {
    fn new(info: proto::WorkerInfo, now: Instant) -> Self {
        WorkerState {
            info,
            last_seen: now,
            kills: Vec::new(),
            deletes: Vec::new(),
            finished_jobs: Vec::new(),
            kept_blocks: Vec::new(),
            cache: proto::CacheReport::default(),
            cached: HashSet::new(),
            pins_sent: None,
        }
    }
}

/// All the coordinator knows.
pub struct State {
    cfg: Arc<CoordinatorConfig>,
    pub(crate) epoch: u64,
    pub(crate) catalog: Catalog,
    pub(crate) jobs: BTreeMap<JobId, Job>,
    pub(crate) records: BTreeMap<JobId, JobRecord>,
    pub(crate) workers: BTreeMap<WorkerId, WorkerState>,
    next_worker: u64,
    next_job: u64,
    /// The time of the event being handled.
    at: At,
    /// When a live worker was last seen (for failing jobs when none is).
    last_alive: Instant,
    /// Block ids handed to puts in progress, and when.
    planned: HashMap<String, Instant>,
    /// Blocks a worker reported that nothing knows, by (uid, block), and
    /// since when: deleted after the orphan grace period.
    unknown: HashMap<(String, String), Instant>,
    /// Damaged replicas were marked and the catalog is not saved yet.
    /// Data sets whose replicas were marked damaged this step, to write.
    marked: Vec<DatasetName>,
    /// The catalog write this step asks for.
    write: Option<CatalogWrite>,
    /// The job records changed this step.
    jobs_dirty: bool,
    /// Which job a free slot is offered to first.
    policy: Box<dyn Policy>,
    /// Since when each pool has been short of its minimum share, by slot
    /// kind (fair preemption).
    starved_since: HashMap<(String, TaskKind), Instant>,
    /// Reports of jobs that ended under an earlier coordinator (the job
    /// history, loaded at start; jobs of this one keep theirs).
    history: BTreeMap<JobId, String>,
    /// Reports of jobs that ended this step, to write to the history.
    ended: Vec<(JobId, String)>,
    /// Shuffle fetch failures reported since the coordinator started.
    pub(crate) fetch_failures: u64,
    /// The reports of the jobs that ended since the coordinator started,
    /// summed (what `/metrics` counts).
    pub(crate) totals: Totals,
    /// Re-replication of blocks short of replicas.
    pub(crate) heal: crate::heal::Healing,
}

/// Sums over the reports of ended jobs.
#[derive(Debug, Default, Clone)]
pub(crate) struct Totals {
    pub attempts: sluice_proto::report::Attempts,
    pub shuffle_bytes: u64,
    pub input_bytes: u64,
    pub output_bytes: u64,
    pub maps_by_level: BTreeMap<String, u64>,
    pub maps_from_cache: u64,
}

impl Totals {
    fn add(&mut self, r: &sluice_proto::report::ClusterReport) {
        let (a, b) = (&mut self.attempts, &r.attempts);
        a.launched += b.launched;
        a.failed += b.failed;
        a.killed += b.killed;
        a.lost += b.lost;
        a.speculative += b.speculative;
        a.damaged_replicas += b.damaged_replicas;
        a.wasted_s += b.wasted_s;
        self.shuffle_bytes += r.shuffle_bytes;
        self.input_bytes += r.input_bytes;
        self.output_bytes += r.output_bytes;
        for (level, n) in &r.maps_by_level {
            *self.maps_by_level.entry(level.clone()).or_default() += u64::from(*n);
        }
        self.maps_from_cache += u64::from(r.cache.maps_from_cache);
    }
}

impl State {
    /// The state a coordinator starts with: the catalog and job records
    /// it loaded, no workers, no running jobs.
    pub fn new(
        cfg: Arc<CoordinatorConfig>,
        epoch: u64,
        catalog: Catalog,
        records: BTreeMap<JobId, JobRecord>,
        policy: Box<dyn Policy>,
        at: At,
    ) -> Self {
        State {
            cfg,
            epoch,
            catalog,
            jobs: BTreeMap::new(),
            records,
            workers: BTreeMap::new(),
            next_worker: 0,
            next_job: 0,
            at,
            last_alive: at.now,
            planned: HashMap::new(),
            unknown: HashMap::new(),
            marked: Vec::new(),
            write: None,
            jobs_dirty: false,
            policy,
            starved_since: HashMap::new(),
            history: BTreeMap::new(),
            ended: Vec::new(),
            fetch_failures: 0,
            totals: Totals::default(),
            heal: crate::heal::Healing::default(),
        }
    }

    /// The reports of jobs that ended before this coordinator started.
    pub fn with_history(mut self, history: BTreeMap<JobId, String>) -> Self {
        self.history = history;
        self
    }

    /// A job's report: its final one once it ended (from this
    /// coordinator or the history), none while it runs.
    pub(crate) fn report_json(&self, id: JobId) -> Option<&str> {
        match self.jobs.get(&id) {
            Some(j) if !j.report_json.is_empty() => Some(&j.report_json),
            Some(_) => None,
            None => self.history.get(&id).map(String::as_str),
        }
    }

    /// Handles one event: the whole of how the coordinator's state
    /// changes. No I/O: what to write is in the returned step.
    pub fn handle(&mut self, ev: Event, at: At) -> Step {
        self.at = at;
        let mut wake = ev.wakes();
        let answer = match ev {
            Event::Register(r) => self.register(r).map(Answer::Registered),
            Event::Heartbeat(r) => {
                wake = !r.reports.is_empty() || !r.corrupt.is_empty();
                Ok(Answer::Heartbeat(self.heartbeat(r)))
            }
            Event::Offer(w) => Ok(Answer::Heartbeat(Some(self.offer(w)))),
            Event::FetchFailed(r) => {
                self.fetch_failed(&r);
                Ok(Answer::Done)
            }
            Event::Corrupt(replicas) => {
                for c in &replicas {
                    self.mark_corrupt(c);
                }
                Ok(Answer::Done)
            }
            Event::Submit(s) => self.submit(s).map(Answer::Submitted),
            Event::Kill { job, reason } => self.kill(job, &reason).map(Answer::Job),
            Event::PlanBlocks(r) => self.plan_blocks(&r).map(Answer::Planned),
            Event::CommitDataset { dataset, overwrite } => self
                .commit_dataset(dataset, overwrite)
                .map(|()| Answer::Done),
            Event::AbandonBlocks(ids) => {
                self.abandon_blocks(ids);
                Ok(Answer::Done)
            }
            Event::RemoveDataset(name) => self.remove_dataset(&name).map(|()| Answer::Done),
            Event::Policy(p) => {
                self.policy = p;
                Ok(Answer::Done)
            }
            Event::CacheAdd(r) => self.cache_add(r).map(Answer::Directive),
            Event::CacheRemove(r) => self.cache_remove(&r).map(Answer::Removed),
            Event::Tick => {
                wake = self.tick();
                Ok(Answer::Done)
            }
            Event::CatalogSaved { write, result } => self.catalog_saved(write, result),
        };
        self.note_marks();
        self.settle_jobs();
        Step {
            answer,
            catalog: self.write.take(),
            save_jobs: std::mem::take(&mut self.jobs_dirty),
            history: std::mem::take(&mut self.ended),
            wake,
        }
    }

    /// The catalog write of this step (one per step, however many
    /// changes it holds).
    fn write(&mut self) -> &mut CatalogWrite {
        self.write.get_or_insert_with(CatalogWrite::default)
    }

    /// Puts a data set in the catalog (replacing any of its name) as part
    /// of this step's write; returns the one replaced.
    fn put_dataset(&mut self, meta: DatasetMeta) -> Option<DatasetMeta> {
        let name = meta.name.clone();
        let old = self.catalog.datasets.insert(name.clone(), meta);
        self.write().undo.push((name, old.clone()));
        old
    }

    /// The outcome of a catalog write: what follows it, or its undoing.
    fn catalog_saved(
        &mut self,
        w: CatalogWrite,
        result: Result<(), String>,
    ) -> Result<Answer, Status> {
        if let Err(e) = result {
            tracing::error!("writing the catalog: {e}");
            for (name, old) in w.undo.into_iter().rev() {
                match old {
                    Some(o) => self.catalog.datasets.insert(name, o),
                    None => self.catalog.datasets.remove(&name),
                };
            }
            if let Some(d) = w.directives {
                self.catalog.cache_directives = d;
            }
            for t in w.then {
                if let Then::Commit { job, .. } = t {
                    if let Some(j) = self.jobs.get_mut(&job) {
                        j.commit_failed(format!("committing the output: {e}"), self.at.now);
                    }
                }
            }
            return if w.client {
                Err(Status::internal(format!("writing the catalog: {e}")))
            } else {
                Ok(Answer::Done)
            };
        }
        for t in w.then {
            match t {
                Then::Commit { job, replaced } => {
                    if let Some(old) = replaced {
                        self.delete_dataset_blocks(&old);
                    }
                    if let Some(j) = self.jobs.get_mut(&job) {
                        j.committed(self.at.now);
                    }
                }
                Then::Delete(d) => self.delete_dataset_blocks(&d),
                Then::Unplan(ids) => {
                    for b in ids {
                        self.planned.remove(&b);
                    }
                }
            }
        }
        Ok(Answer::Done)
    }

    /// A worker joins: an older registration of the same worker is lost
    /// (its tasks with it), its blocks are checked against the catalog.
    fn register(&mut self, r: proto::RegisterRequest) -> Result<proto::RegisterReply, Status> {
        if r.protocol_version != sluice_proto::PROTOCOL_VERSION {
            return Err(Status::failed_precondition(format!(
                "worker speaks protocol {}, this coordinator {}",
                r.protocol_version,
                sluice_proto::PROTOCOL_VERSION
            )));
        }
        let old: Vec<WorkerId> = self
            .workers
            .iter()
            .filter(|(_, w)| w.info.alive && w.info.uid == r.uid)
            .map(|(&id, _)| id)
            .collect();
        for id in old {
            self.lose_worker(id);
        }
        self.next_worker += 1;
        let id = WorkerId(self.next_worker);
        let host = if r.host.is_empty() {
            host_of(&r.data_addr)
        } else {
            r.host
        };
        let info = proto::WorkerInfo {
            id: id.0,
            host,
            free_bytes: r.free_bytes,
            uid: r.uid,
            data_addr: r.data_addr,
            datacenter: r.datacenter,
            rack: r.rack,
            slots: r.slots.max(1),
            alive: true,
            pid: r.pid,
            memory: r.memory,
            http_addr: r.http_addr,
        };
        self.workers.insert(id, WorkerState::new(info, self.at.now));
        self.heal.changed();
        self.block_report(id, &r.blocks);
        Ok(proto::RegisterReply {
            running_jobs: self
                .jobs
                .values()
                .filter(|j| j.is_running())
                .map(|j| j.id.0)
                .collect(),
            worker_id: id.0,
            epoch: self.epoch,
            heartbeat_ms: self.cfg.heartbeat.as_millis() as u64,
        })
    }

    /// A heartbeat: task reports first (a failure excused by its own
    /// evidence must not find the replica already marked by the
    /// scanner's), then damaged replicas, then the block report; then the
    /// worker's free slots are offered. `None`: nothing to tell it yet.
    fn heartbeat(&mut self, r: proto::HeartbeatRequest) -> Option<proto::HeartbeatReply> {
        let worker = WorkerId(r.worker_id);
        let epoch = self.epoch;
        match self.workers.get_mut(&worker) {
            Some(w) if w.info.alive && r.epoch == epoch => {
                w.last_seen = self.at.now;
                w.info.free_bytes = r.free_bytes;
                if let Some(c) = r.cache {
                    w.cached = c.blocks.iter().cloned().collect();
                    w.cache = c;
                }
            }
            _ => return Some(reregister()),
        }
        for p in r.progress {
            let Some(t) = p.task else { continue };
            let kind = TaskKind::from_wire(t.kind);
            if let (Some(job), Some(kind)) = (self.jobs.get_mut(&JobId(t.job)), kind) {
                job.fetched(kind, t.index as usize, t.attempt, p.fetched);
            }
        }
        let had_reports = !r.reports.is_empty() || !r.corrupt.is_empty();
        for rep in r.reports {
            self.on_report(worker, rep);
        }
        for c in &r.corrupt {
            self.mark_corrupt(c);
        }
        if r.block_report {
            self.block_report(worker, &r.blocks);
        }
        for c in &r.replicated {
            self.replicated(c);
        }
        self.note_marks();
        self.settle_jobs();
        let reply = self.offer(worker);
        (had_reports || !is_empty(&reply)).then_some(reply)
    }

    /// Offers a worker's free slots; the reply carries the tasks it takes
    /// and what it must kill or delete.
    fn offer(&mut self, worker: WorkerId) -> proto::HeartbeatReply {
        if !self.workers.get(&worker).is_some_and(|w| w.info.alive) {
            return reregister();
        }
        let mut tasks = self.assign(worker);
        let cfg = self.cfg.clone();
        for t in tasks.iter_mut().filter(|t| !t.output_block.is_empty()) {
            let job = JobId(t.task.unwrap_or_default().job);
            t.output_copies = self.output_copies(job, worker, &*cfg.placement);
        }
        let pins = self.pins_for(worker);
        let replicate = self.copies_for(worker);
        let w = self.workers.get_mut(&worker).expect("checked above");
        let ids: Vec<String> = pins.iter().map(|b| b.id.clone()).collect();
        let pins = (w.pins_sent.as_ref() != Some(&ids)).then(|| {
            w.pins_sent = Some(ids);
            proto::CachePins { blocks: pins }
        });
        proto::HeartbeatReply {
            reregister: false,
            tasks,
            kills: std::mem::take(&mut w.kills),
            delete_blocks: std::mem::take(&mut w.deletes),
            finished_jobs: std::mem::take(&mut w.finished_jobs),
            kept_blocks: std::mem::take(&mut w.kept_blocks),
            pins,
            replicate,
        }
    }

    /// The blocks running jobs read (inputs and side inputs).
    fn blocks_read(&self) -> HashSet<String> {
        self.jobs
            .values()
            .filter(|j| j.is_running())
            .flat_map(|j| {
                let side = j.side.iter().flat_map(|(_, b)| b.iter());
                j.inputs.iter().flat_map(MapInput::blocks).chain(side)
            })
            .map(|b| b.id.to_string())
            .collect()
    }

    /// Removes the excess replicas healing found: out of the catalog, and
    /// each holder told to delete its file. Returns whether any went.
    fn remove_excess(&mut self) -> bool {
        let excess = self.heal.take_excess();
        let mut by_dataset: BTreeMap<DatasetName, Vec<crate::heal::Excess>> = BTreeMap::new();
        for e in excess {
            by_dataset.entry(e.dataset.clone()).or_default().push(e);
        }
        let mut removed = false;
        for (name, gone) in by_dataset {
            let Some(mut meta) = self.catalog.datasets.get(&name).cloned() else {
                continue;
            };
            for e in &gone {
                let block = meta
                    .files
                    .iter_mut()
                    .flat_map(|f| f.blocks.iter_mut())
                    .find(|b| b.id.as_str() == e.block);
                if let Some(b) = block {
                    b.replicas.retain(|u| *u != e.uid);
                }
                tracing::info!("block {}: excess replica on {} removed", e.block, e.uid);
                if let Some(w) = self.worker_by_uid_mut(&e.uid) {
                    w.deletes.push(e.block.clone());
                }
            }
            self.put_dataset(meta);
            removed = true;
        }
        removed
    }

    /// The uids of the live workers.
    pub(crate) fn live_uids(&self) -> HashSet<String> {
        self.alive().map(|w| w.info.uid.clone()).collect()
    }

    /// Live workers by uid, as re-replication sees them.
    fn live_by_uid(&self) -> BTreeMap<String, crate::heal::Live> {
        self.alive()
            .map(|w| {
                let info = w.info.clone();
                (info.uid.clone(), crate::heal::Live { info })
            })
            .collect()
    }

    /// The re-replication copies `worker` sends now.
    fn copies_for(&mut self, worker: WorkerId) -> Vec<proto::ReplicateCommand> {
        let streams = self.cfg.replication_streams;
        let Some(uid) = self.workers.get(&worker).map(|w| w.info.uid.clone()) else {
            return Vec::new();
        };
        if streams == 0 || self.heal.backlog() == 0 {
            return Vec::new();
        }
        let live = self.live_by_uid();
        let now = self.at.now;
        let in_dc = self.cfg.placement.keeps_copies_in_datacenter();
        let copies = self
            .heal
            .assign(&uid, &self.catalog, &live, streams, in_dc, now);
        for c in &copies {
            // The new replica shows in the target's block report before
            // the copy is reported: known, not an orphan.
            let id = c.block.as_ref().map_or_else(String::new, |b| b.id.clone());
            self.planned.insert(id, now);
        }
        copies
    }

    /// A holder's word on a re-replication copy: a copy made is a replica
    /// in the catalog.
    fn replicated(&mut self, r: &proto::ReplicateResult) {
        let Some((dataset, target)) = self.heal.done(r) else {
            return;
        };
        let Some(mut meta) = self.catalog.datasets.get(&dataset).cloned() else {
            return;
        };
        let block = meta
            .files
            .iter_mut()
            .flat_map(|f| f.blocks.iter_mut())
            .find(|b| b.id == r.block);
        let Some(b) = block else {
            return;
        };
        if !b.replicas.contains(&target) {
            b.replicas.push(target);
            self.put_dataset(meta);
        }
    }

    /// The blocks cache directives pin on `worker`: for each directive,
    /// each block it names that the worker holds a replica of, when the
    /// directive names the worker, or when the worker is the block's
    /// first live holder (one cached replica per block, as HDFS's default
    /// cache replication of 1).
    fn pins_for(&self, worker: WorkerId) -> Vec<proto::BlockInfo> {
        let Some(uid) = self.workers.get(&worker).map(|w| w.info.uid.as_str()) else {
            return Vec::new();
        };
        if self.catalog.cache_directives.is_empty() {
            return Vec::new();
        }
        // Asked on every heartbeat: the live set and the blocks taken are
        // looked up, not searched.
        let live: HashSet<&str> = self.alive().map(|w| w.info.uid.as_str()).collect();
        let mut taken: HashSet<&str> = HashSet::new();
        let mut out: Vec<proto::BlockInfo> = Vec::new();
        for d in &self.catalog.cache_directives {
            let Some(set) = self.catalog.datasets.get(&d.dataset) else {
                continue;
            };
            for (i, b) in set.blocks().enumerate() {
                if d.block.is_some_and(|n| n as usize != i) || taken.contains(b.id.as_str()) {
                    continue;
                }
                let target = match &d.worker {
                    Some(w) => b.replicas.iter().find(|u| *u == w),
                    None => b.replicas.iter().find(|u| live.contains(u.as_str())),
                };
                if target.is_some_and(|t| t == uid) {
                    taken.insert(b.id.as_str());
                    out.push(b.into());
                }
            }
        }
        out
    }

    /// A new cache directive, checked: its data set exists, its block
    /// index is in range, its worker is live and holds a replica of a
    /// block it names.
    fn cache_add(&mut self, r: proto::CacheAddRequest) -> Result<proto::CacheDirective, Status> {
        let name = DatasetName::new(r.dataset.clone())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let set = self
            .catalog
            .datasets
            .get(&name)
            .ok_or_else(|| Status::not_found(format!("no data set {name}")))?;
        let blocks: Vec<&BlockMeta> = set.blocks().collect();
        let block = r.has_block.then_some(r.block);
        if let Some(n) = block.filter(|&n| n as usize >= blocks.len()) {
            return Err(Status::invalid_argument(format!(
                "data set {name} has {} blocks (0 to {}); no block {n}",
                blocks.len(),
                blocks.len().saturating_sub(1)
            )));
        }
        let worker = match r.worker.as_str() {
            "" => None,
            w => {
                let found = self
                    .alive()
                    .find(|x| x.info.uid == w || x.info.id.to_string() == w)
                    .ok_or_else(|| Status::not_found(format!("no live worker {w}")))?;
                let uid = found.info.uid.clone();
                let named = blocks
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| block.is_none_or(|n| n as usize == *i));
                if !named.clone().any(|(_, b)| b.replicas.contains(&uid)) {
                    return Err(Status::failed_precondition(format!(
                        "worker {w} holds no replica of {}",
                        block.map_or(format!("data set {name}"), |n| format!(
                            "block {n} of {name}"
                        ))
                    )));
                }
                Some(uid)
            }
        };
        self.catalog.next_directive += 1;
        let d = sluice_proto::catalog::CacheDirective {
            id: self.catalog.next_directive,
            dataset: name,
            block,
            worker,
            pool: if r.pool.is_empty() {
                "default".into()
            } else {
                r.pool
            },
            created_ms: self.at.ms,
        };
        let reply = (&d).into();
        self.edit_directives(|all| all.push(d));
        Ok(reply)
    }

    /// Removes a directive by id, or every directive of a data set; their
    /// blocks are unpinned on the next heartbeats.
    fn cache_remove(&mut self, r: &proto::CacheRemoveRequest) -> Result<u32, Status> {
        let before = self.catalog.cache_directives.len();
        let named = |d: &sluice_proto::catalog::CacheDirective| {
            d.id == r.id || (r.id == 0 && d.dataset.as_str() == r.dataset)
        };
        self.edit_directives(|all| all.retain(|d| !named(d)));
        let removed = (before - self.catalog.cache_directives.len()) as u32;
        if removed == 0 {
            return Err(Status::not_found(if r.id > 0 {
                format!("no cache directive {}", r.id)
            } else {
                format!("no cache directive for data set {}", r.dataset)
            }));
        }
        Ok(removed)
    }

    /// Changes the cache directives as part of this step's write (a
    /// client's), keeping the list before it to restore if the write
    /// fails.
    fn edit_directives(&mut self, f: impl FnOnce(&mut Vec<sluice_proto::catalog::CacheDirective>)) {
        let before = self.catalog.cache_directives.clone();
        f(&mut self.catalog.cache_directives);
        let w = self.write();
        w.client = true;
        w.directives.get_or_insert(before);
    }

    /// Cache directives, and what each live worker's cache holds.
    pub(crate) fn cache_list(&self) -> proto::CacheListReply {
        proto::CacheListReply {
            directives: self
                .catalog
                .cache_directives
                .iter()
                .map(Into::into)
                .collect(),
            workers: self
                .alive()
                .map(|w| proto::WorkerCache {
                    worker: Some(w.info.clone()),
                    cache: Some(w.cache.clone()),
                })
                .collect(),
        }
    }

    fn fetch_failed(&mut self, r: &proto::FetchFailedRequest) {
        self.fetch_failures += 1;
        let cfg = self.cfg.clone();
        let now = self.at.now;
        if let Some(job) = self.jobs.get_mut(&JobId(r.job)) {
            let (map, attempt) = (r.map as usize, r.attempt);
            if job.is_running() && job.fetch_failed(map, attempt, &r.reason, &cfg.settings, now) {
                tracing::warn!("job {} map {} output lost: {}", r.job, r.map, r.reason);
            }
        }
    }

    /// A new job: refused if no worker is live, a task asks more memory
    /// than any worker gives, its input cannot be read or its output
    /// exists.
    fn submit(&mut self, s: Submission) -> Result<JobId, Status> {
        let Submission {
            request: r,
            replication,
            reducers,
            side,
            external,
        } = s;
        if self.alive().next().is_none() {
            return Err(Status::unavailable("no live workers"));
        }
        if let Some(asked) = r.memory {
            self.check_memory(asked)?;
        }
        let blocks = match external {
            Some(splits) => self.external_inputs(splits),
            None => self.input_blocks(&r)?,
        };
        let side = self.side_inputs(side)?;
        if self.catalog.datasets.contains_key(&r.output) && !r.overwrite {
            return Err(Status::already_exists(format!(
                "output data set {} exists (pass --overwrite to replace it)",
                r.output
            )));
        }
        self.next_job += 1;
        let id = JobId((self.epoch << 32) | self.next_job);
        let token = self.cfg.secret.job_token(id.0);
        let record = JobRecord {
            id,
            request: Some(r.clone()),
            state: RecordState::Running,
            error: String::new(),
        };
        let mut job = Job::new(id, r, blocks, reducers, token, self.at.now);
        job.side = side;
        job.output_replication = replication.max(1);
        self.jobs.insert(id, job);
        self.records.insert(id, record);
        self.jobs_dirty = true;
        // A job that cannot read its input fails before any task runs.
        self.fail_unreadable_inputs();
        Ok(id)
    }

    /// Ends a running job on request: its attempts are killed, its
    /// outputs dropped, the workers told to remove its files, its record
    /// written.
    fn kill(&mut self, id: JobId, reason: &str) -> Result<proto::JobStatus, Status> {
        let epoch = self.epoch;
        let job = self
            .jobs
            .get_mut(&id)
            .ok_or_else(|| Status::not_found(format!("no job {id} (epoch {epoch})")))?;
        if job.state != JobState::Running {
            return Err(Status::failed_precondition(format!(
                "job {id} is not running: it {}",
                job.state.name()
            )));
        }
        let who = if reason.is_empty() { "a user" } else { reason };
        job.end(JobState::Killed(format!("killed by {who}")), self.at.now);
        self.settle_jobs();
        Ok(self.status(id).expect("the job exists"))
    }

    /// Where a put's blocks go: new block ids (the catalog's counter is
    /// written before they are handed out), each with its targets.
    fn plan_blocks(
        &mut self,
        r: &proto::PlanBlocksRequest,
    ) -> Result<proto::PlanBlocksReply, Status> {
        if self.alive().next().is_none() {
            return Err(Status::unavailable("no live workers"));
        }
        let live: Vec<proto::WorkerInfo> = self
            .alive()
            .filter(|w| !r.exclude.contains(&w.info.uid))
            .map(|w| w.info.clone())
            .collect();
        if live.is_empty() {
            return Ok(proto::PlanBlocksReply::default());
        }
        let nodes: Vec<Node> = live.iter().map(node).collect();
        let repl = (r.replication.max(1) as usize).min(live.len());
        let mut placed = HashMap::new();
        let mut blocks = Vec::new();
        let cfg = self.cfg.clone();
        for _ in 0..r.blocks {
            let writer = Writer {
                host: &r.writer_host,
                datacenter: &r.writer_datacenter,
                block_size: r.block_size,
            };
            let uids = cfg.placement.place(&nodes, &writer, repl, &mut placed);
            let targets = uids
                .iter()
                .filter_map(|u| live.iter().find(|w| &w.uid == u).cloned())
                .collect();
            let id = self.catalog.new_block_id(self.epoch).to_string();
            self.planned.insert(id.clone(), self.at.now);
            blocks.push(proto::Placement { id, targets });
        }
        self.write().client = true;
        Ok(proto::PlanBlocksReply { blocks })
    }

    /// A put's data set enters the catalog (its blocks must have been
    /// planned by this coordinator); one it replaces loses its blocks.
    fn commit_dataset(&mut self, mut d: DatasetMeta, overwrite: bool) -> Result<(), Status> {
        d.created_ms = self.at.ms;
        if self.catalog.datasets.contains_key(&d.name) && !overwrite {
            return Err(Status::already_exists(format!(
                "data set {} exists (remove it first, or overwrite)",
                d.name
            )));
        }
        // Blocks this coordinator did not plan were planned before a
        // restart: their put's reservation is gone, and with it the
        // assurance that none was deleted as an orphan meanwhile.
        if let Some(b) = d
            .blocks()
            .find(|b| !self.planned.contains_key(b.id.as_str()))
        {
            return Err(Status::failed_precondition(format!(
                "block {} was not planned by this coordinator (it restarted while the put \
                 ran?): put the data set again",
                b.id
            )));
        }
        let ids = d.blocks().map(|b| b.id.to_string()).collect();
        let old = self.put_dataset(d);
        let w = self.write();
        w.client = true;
        w.then.push(Then::Unplan(ids));
        w.then.extend(old.map(Then::Delete));
        Ok(())
    }

    /// A put gives up blocks: those handed to it and never committed are
    /// deleted everywhere.
    fn abandon_blocks(&mut self, ids: Vec<String>) {
        let cataloged: HashSet<String> = self
            .catalog
            .datasets
            .values()
            .flat_map(|d| d.blocks().map(|b| b.id.to_string()))
            .collect();
        let ids: Vec<String> = ids
            .into_iter()
            .filter(|b| self.planned.remove(b).is_some() && !cataloged.contains(b))
            .collect();
        for w in self.workers.values_mut().filter(|w| w.info.alive) {
            w.deletes.extend(ids.iter().cloned());
        }
    }

    /// A data set leaves the catalog; its blocks go once that is written.
    fn remove_dataset(&mut self, name: &str) -> Result<(), Status> {
        let d = self
            .catalog
            .datasets
            .remove(name)
            .ok_or_else(|| Status::not_found(format!("no data set {name}")))?;
        if self
            .catalog
            .cache_directives
            .iter()
            .any(|c| c.dataset == d.name)
        {
            self.edit_directives(|all| all.retain(|c| c.dataset.as_str() != name));
        }
        let w = self.write();
        w.client = true;
        w.undo.push((d.name.clone(), Some(d.clone())));
        w.then.push(Then::Delete(d));
        Ok(())
    }
    /// The map inputs of a job: the blocks of its data sets (names
    /// separated by commas), small ones packed by holder
    /// ([`crate::combine`]), or for `synthetic:N` N blockless tasks that
    /// run on any worker.
    fn input_blocks(&self, r: &JobRequest) -> std::result::Result<Vec<MapInput>, Status> {
        let synthetic = sluice_formats::input::synthetic_count(&r.input)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        if let Some(n) = synthetic {
            return Ok(vec![MapInput::Synthetic; n]);
        }
        let mut blocks = Vec::new();
        let mut block_size = 0;
        for name in r.input.split(',') {
            blocks.extend(self.dataset_blocks(name)?);
            block_size =
                block_size.max(self.catalog.datasets.get(name).map_or(0, |d| d.block_size));
        }
        let total = blocks.iter().map(|b| b.len).sum();
        let target = match r.engine.combine {
            true => combine::target(r.engine.split_size, block_size, total, self.total_slots()),
            false => 0,
        };
        let live: HashSet<&str> = self.alive().map(|w| w.info.uid.as_str()).collect();
        Ok(combine::map_inputs(blocks, target, &|u| live.contains(u)))
    }

    /// The map inputs of a job reading an external store: one a split,
    /// held by the live workers on the hosts that hold its bytes.
    fn external_inputs(&self, splits: Vec<ExternalInput>) -> Vec<MapInput> {
        splits
            .into_iter()
            .map(|s| {
                let holders = self
                    .alive()
                    .filter(|w| !w.info.host.is_empty() && s.hosts.contains(&w.info.host))
                    .map(|w| w.info.uid.clone())
                    .collect();
                MapInput::External(External {
                    url: s.url,
                    start: s.start,
                    end: s.end,
                    holders,
                })
            })
            .collect()
    }

    fn dataset_blocks(&self, name: &str) -> std::result::Result<Vec<BlockMeta>, Status> {
        let d = self
            .catalog
            .datasets
            .get(name)
            .ok_or_else(|| Status::not_found(format!("no data set {name}")))?;
        Ok(d.blocks().cloned().collect())
    }

    /// The side inputs of a job, each with its blocks.
    fn side_inputs(
        &self,
        names: Vec<String>,
    ) -> std::result::Result<Vec<(String, Vec<BlockMeta>)>, Status> {
        names
            .into_iter()
            .map(|n| Ok((n.clone(), self.dataset_blocks(&n)?)))
            .collect()
    }

    fn alive(&self) -> impl Iterator<Item = &WorkerState> {
        self.workers.values().filter(|w| w.info.alive)
    }

    fn worker_by_uid_mut(&mut self, uid: &str) -> Option<&mut WorkerState> {
        self.workers
            .values_mut()
            .find(|w| w.info.alive && w.info.uid == uid)
    }

    /// Time passes: workers silent too long are lost, jobs with no live
    /// worker or no readable input fail, starved pools preempt. Returns
    /// whether anything changed.
    fn tick(&mut self) -> bool {
        let cfg = self.cfg.clone();
        let now = self.at.now;
        let lost: Vec<WorkerId> = self
            .workers
            .iter()
            .filter(|(_, w)| w.info.alive && now.duration_since(w.last_seen) > cfg.worker_timeout)
            .map(|(&id, _)| id)
            .collect();
        for &id in &lost {
            self.lose_worker(id);
        }
        let mut changed = !lost.is_empty();
        if cfg.replication_streams > 0 {
            let live = self.live_by_uid();
            let busy = self.blocks_read();
            self.heal.tick(&self.catalog, &live, &busy, now);
            changed |= self.remove_excess();
        }
        if self.alive().next().is_some() {
            self.last_alive = now;
        } else if now.duration_since(self.last_alive) > cfg.worker_timeout {
            let n = self.workers.len();
            for job in self.jobs.values_mut().filter(|j| j.is_running()) {
                job.fail(
                    format!(
                        "no live workers: all {n} workers were lost (silent for over {:?})",
                        cfg.worker_timeout
                    ),
                    now,
                );
                changed = true;
            }
        }
        changed |= self.fail_unreadable_inputs();
        if let Some(timeout) = cfg.preemption_timeout {
            changed |= self.preempt(timeout);
        }
        changed
    }

    /// Fair preemption: pools short of their minimum share for `timeout`
    /// take slots back from pools over their share, the youngest attempts
    /// first (they lose the least work). Returns whether any was ended.
    fn preempt(&mut self, timeout: Duration) -> bool {
        let now = self.at.now;
        let total = self.total_slots();
        let mut changed = false;
        for kind in [MAP, REDUCE] {
            let views = self.views(kind);
            let deficits = self.policy.deficits(&views, total);
            self.starved_since
                .retain(|(p, k), _| *k != kind || deficits.contains_key(p));
            let mut owed = 0;
            for (pool, n) in &deficits {
                let since = *self
                    .starved_since
                    .entry((pool.clone(), kind))
                    .or_insert(now);
                if now.duration_since(since) >= timeout {
                    owed += n;
                }
            }
            if owed == 0 {
                continue;
            }
            let mut excess = self.policy.excesses(&views, total);
            let mut victims: Vec<(Instant, JobId, usize, u32)> = self
                .jobs
                .values()
                .filter(|j| j.is_running() && excess.contains_key(&j.pool))
                .flat_map(|j| {
                    j.queues.running_tasks(kind).flat_map(move |i| {
                        let t = &j.tasks(kind)[i];
                        t.running().map(move |a| (a.started, j.id, i, a.id))
                    })
                })
                .collect();
            victims.sort_by_key(|v| std::cmp::Reverse(v.0));
            for (_, id, i, attempt) in victims {
                let Some(job) = self.jobs.get_mut(&id) else {
                    continue;
                };
                let Some(left) = excess.get_mut(&job.pool).filter(|n| **n > 0) else {
                    continue;
                };
                let Some(w) = job.preempt(kind, i, attempt, now) else {
                    continue;
                };
                *left -= 1;
                tracing::info!(
                    "preempted job {id} task {} attempt {attempt}",
                    task_name(kind, i)
                );
                if let Some(ws) = self.workers.get_mut(&w) {
                    ws.kills.push(proto::TaskId {
                        job: id.0,
                        kind: kind.wire(),
                        index: i as u32,
                        attempt,
                    });
                }
                changed = true;
                owed -= 1;
                if owed == 0 {
                    break;
                }
            }
            for pool in deficits.keys() {
                self.starved_since.remove(&(pool.clone(), kind));
            }
        }
        changed
    }

    fn lose_worker(&mut self, id: WorkerId) {
        let Some(w) = self.workers.get_mut(&id) else {
            return;
        };
        tracing::warn!("worker {} ({}) lost", w.info.uid, w.info.data_addr);
        w.info.alive = false;
        let uid = w.info.uid.clone();
        self.heal.changed();
        // Its unknown blocks are judged again when it reports anew.
        self.unknown.retain(|(u, _), _| *u != uid);
        for job in self.jobs.values_mut().filter(|j| j.is_running()) {
            job.worker_lost(id, self.at.now);
        }
    }

    /// Fails jobs with a pending map whose block has no live intact
    /// replica.
    fn fail_unreadable_inputs(&mut self) -> bool {
        let live: Vec<String> = self.alive().map(|w| w.info.uid.clone()).collect();
        let workers: Vec<proto::WorkerInfo> =
            self.workers.values().map(|w| w.info.clone()).collect();
        let mut changed = false;
        for job in self.jobs.values_mut().filter(|j| j.is_running()) {
            let dead = job.maps.iter().zip(&job.inputs).find_map(|(t, input)| {
                // A synthetic task (no block) can run anywhere.
                let unread = |b: &&BlockMeta| !b.replicas.iter().any(|u| live.contains(u));
                t.pending().then(|| input.blocks().iter().find(unread))?
            });
            if let Some(b) = dead {
                let msg = if b.corrupt.is_empty() {
                    format!(
                        "block {} of data set {} has no live replica (held by {:?})",
                        b.id, job.input, b.replicas
                    )
                } else {
                    no_intact_replica(b, &job.input, &workers)
                };
                job.fail(msg, self.at.now);
                changed = true;
                continue;
            }
            // Every worker that runs one of the job's tasks reads every
            // side block.
            let side_dead = job.side.iter().find_map(|(name, blocks)| {
                let b = blocks
                    .iter()
                    .find(|b| !b.replicas.iter().any(|u| live.contains(u)))?;
                Some((name, b))
            });
            if let Some((name, b)) = side_dead {
                let msg = format!(
                    "block {} of side data set {name} has no live replica (held by {:?})",
                    b.id, b.replicas
                );
                job.fail(msg, self.at.now);
                changed = true;
            }
        }
        changed
    }

    /// Refuses a job asking more memory per task than any live worker's
    /// share gives.
    fn check_memory(&self, asked: u64) -> std::result::Result<(), Status> {
        let best = self
            .alive()
            .filter(|w| w.info.memory > 0)
            .map(|w| {
                (
                    sluice_proto::task_share(w.info.memory, w.info.slots),
                    &w.info,
                )
            })
            .max_by_key(|(share, _)| *share);
        match best {
            Some((share, w)) if asked > share => Err(Status::invalid_argument(format!(
                "the job asks --memory {asked} bytes per task; the most a worker gives a task \
                 is {share} (worker {}: --memory {} shared by {} map and {} reduce slots)",
                w.id, w.memory, w.slots, w.slots
            ))),
            _ => Ok(()),
        }
    }

    /// Marks a replica damaged: out of its block's replicas in the
    /// catalog and in running jobs (never read again), and deleted from
    /// its worker. Returns whether a replica was marked (a report about a
    /// replica already marked, or never held, changes nothing).
    fn mark_corrupt(&mut self, c: &proto::CorruptReplica) -> bool {
        self.heal.changed();
        let uid = if c.worker.is_empty() {
            match self.alive().find(|w| w.info.data_addr == c.addr) {
                Some(w) => w.info.uid.clone(),
                None => return false,
            }
        } else {
            c.worker.clone()
        };
        let mut marked = false;
        for d in self.catalog.datasets.values_mut() {
            let mut here = false;
            for f in &mut d.files {
                for b in f.blocks.iter_mut().filter(|b| b.id == c.block) {
                    here |= b.mark_corrupt(&uid, &c.detail);
                }
            }
            if here {
                self.marked.push(d.name.clone());
            }
            marked |= here;
        }
        for job in self.jobs.values_mut().filter(|j| j.is_running()) {
            let side = job.side.iter_mut().flat_map(|(_, b)| b.iter_mut());
            for b in job
                .inputs
                .iter_mut()
                .flat_map(MapInput::blocks_mut)
                .chain(side)
                .filter(|b| b.id == c.block)
            {
                marked |= b.mark_corrupt(&uid, &c.detail);
            }
        }
        if !marked {
            return false;
        }
        tracing::warn!(
            "block {}: replica on {uid} is damaged: {}",
            c.block,
            c.detail
        );
        // Deleted only while an intact replica remains: the last copy stays
        // on disk (never read) in case the evidence was the reader's fault.
        let intact_left = self
            .catalog
            .datasets
            .values()
            .flat_map(|d| d.blocks())
            .any(|b| b.id == c.block && !b.replicas.is_empty());
        if intact_left {
            if let Some(w) = self.worker_by_uid_mut(&uid) {
                w.deletes.push(c.block.clone());
            }
        }
        true
    }

    /// Asks for a catalog write if damaged replicas were marked in this
    /// step (once per batch of reports, not once per replica), and fails
    /// jobs left without an intact replica. Steps without marks do
    /// neither.
    fn note_marks(&mut self) {
        let marked = std::mem::take(&mut self.marked);
        if marked.is_empty() {
            return;
        }
        self.write().touched.extend(marked);
        self.fail_unreadable_inputs();
    }

    /// Takes a worker's block report: blocks that no data set holds on it,
    /// no put in progress was given and no running job wrote are orphans;
    /// those still reported after the grace period are deleted. Output
    /// blocks of jobs that have ended go at once.
    fn block_report(&mut self, worker: WorkerId, blocks: &[String]) {
        let grace = self.cfg.orphan_grace;
        let Some(uid) = self.workers.get(&worker).map(|w| w.info.uid.clone()) else {
            return;
        };
        let now = self.at.now;
        self.planned
            .retain(|_, t| now.duration_since(*t) < PUT_LEASE);
        let held: HashSet<&str> = self
            .catalog
            .datasets
            .values()
            .flat_map(|d| d.blocks())
            .filter(|b| b.replicas.contains(&uid) || b.corrupt.iter().any(|c| c.uid == uid))
            .map(|b| b.id.as_str())
            .collect();
        let mut deletes = self.orphans(blocks);
        let mut unknown = Vec::new();
        for b in blocks {
            let known = held.contains(b.as_str())
                || self.planned.contains_key(b)
                || output_block_job(b)
                    .is_some_and(|j| self.jobs.get(&j).is_some_and(Job::is_running))
                || deletes.contains(b);
            if !known {
                unknown.push(b.clone());
            }
        }
        self.unknown
            .retain(|(u, b), _| *u != uid || unknown.contains(b));
        for b in unknown {
            let since = *self.unknown.entry((uid.clone(), b.clone())).or_insert(now);
            if now.duration_since(since) >= grace {
                tracing::info!("deleting orphan block {b} on {uid}");
                self.unknown.remove(&(uid.clone(), b.clone()));
                deletes.push(b);
            }
        }
        if let Some(w) = self.workers.get_mut(&worker) {
            w.deletes.extend(deletes);
        }
        self.missing_replicas(&uid, blocks);
    }

    /// Marks the replicas the catalog places on `uid` that its block
    /// report lacks (deleted, or a disk replaced) as damaged.
    fn missing_replicas(&mut self, uid: &str, reported: &[String]) {
        let reported: HashSet<&str> = reported.iter().map(String::as_str).collect();
        let settled = self.at.ms.saturating_sub(REPORT_GUARD_MS);
        let missing: Vec<String> = self
            .catalog
            .datasets
            .values()
            .filter(|d| d.created_ms <= settled)
            .flat_map(|d| d.blocks())
            .filter(|b| b.replicas.iter().any(|u| u == uid) && !reported.contains(b.id.as_str()))
            .map(|b| b.id.to_string())
            .collect();
        for block in missing {
            self.mark_corrupt(&proto::CorruptReplica {
                block,
                worker: uid.to_owned(),
                addr: String::new(),
                detail: "block file missing (block report)".into(),
                at_ms: self.at.ms,
            });
        }
    }

    /// Commits complete jobs and cleans up after ended ones.
    fn settle_jobs(&mut self) {
        let complete: Vec<JobId> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running && j.complete())
            .map(|j| j.id)
            .collect();
        for id in complete {
            self.commit(id);
        }
        let ended: Vec<JobId> = self
            .jobs
            .values()
            .filter(|j| !j.is_running() && j.report_json.is_empty())
            .map(|j| j.id)
            .collect();
        for id in ended {
            self.end_job(id);
        }
    }

    /// The atomic job commit: the output data set, built from the winning
    /// attempts only, enters the catalog in one catalog write; the job
    /// succeeds when the write is on disk ([`Event::CatalogSaved`]).
    fn commit(&mut self, id: JobId) {
        let now = self.at.now;
        let job = self.jobs.get_mut(&id).expect("job exists");
        let (kind, prefix) = if job.map_only {
            (MAP, "part-m")
        } else {
            (REDUCE, "part-r")
        };
        let files: Result<Vec<FileMeta>, ClusterError> = job
            .tasks(kind)
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let a = t.winner().expect("complete job");
                let out = a
                    .report
                    .as_ref()
                    .and_then(|r| r.output.clone())
                    .unwrap_or_default();
                let mut replicas = vec![a.uid.clone()];
                replicas.extend(out.replicas.iter().filter(|u| **u != a.uid).cloned());
                Ok(FileMeta {
                    name: format!("{prefix}-{i:05}"),
                    blocks: vec![BlockMeta {
                        replicas,
                        ..BlockMeta::try_from(out)?
                    }],
                })
            })
            .collect();
        let files = match files {
            Ok(f) => f,
            Err(e) => return job.fail(format!("a task reported a bad output block: {e}"), now),
        };
        let name = match DatasetName::new(job.output.clone()) {
            Ok(n) => n,
            Err(e) => return job.fail(e.to_string(), now),
        };
        if self.catalog.datasets.contains_key(&name) && !job.overwrite {
            job.fail(
                format!("output data set {name} appeared while the job ran"),
                now,
            );
            return;
        }
        let meta = DatasetMeta {
            name: name.clone(),
            files,
            created_ms: self.at.ms,
            origin: format!("job {id} ({})", job.request.describe()),
            replication: job.output_replication,
            block_size: 0,
        };
        job.state = JobState::Committing;
        let replaced = self.put_dataset(meta);
        self.write().then.push(Then::Commit { job: id, replaced });
    }

    /// After a job ends: kill its attempts, drop uncommitted outputs,
    /// have workers remove its map outputs, record it.
    fn end_job(&mut self, id: JobId) {
        let workers = self.alive().count();
        let places = self.places();
        let job = self.jobs.get_mut(&id).expect("job exists");
        let mut report = crate::report::of(job, workers, &places);
        if report.reduce_scheduler.is_empty() && !job.map_only {
            report.reduce_scheduler = self.cfg.settings.reduce.name();
        }
        report.model = crate::report::account(&report, &self.cfg.hardware);
        self.totals.add(&report);
        job.report_json = serde_json::to_string_pretty(&report).expect("serializable");
        self.ended.push((id, job.report_json.clone()));
        let succeeded = job.state == JobState::Succeeded;
        let mut kills = Vec::new();
        for (worker, kind, index, attempt) in job.running_attempts() {
            kills.push((
                worker,
                proto::TaskId {
                    job: id.0,
                    kind: kind.wire(),
                    index: index as u32,
                    attempt,
                },
            ));
        }
        // Output blocks not in the committed data set.
        let mut drop_blocks = Vec::new();
        for kind in [MAP, REDUCE] {
            for t in job.tasks(kind) {
                for (i, a) in t.attempts.iter().enumerate() {
                    let won = succeeded && t.done == Some(i);
                    if let Some(out) = a.report.as_ref().and_then(|r| r.output.as_ref()) {
                        if !won && !out.id.is_empty() {
                            drop_blocks.push((a.worker, out.clone()));
                        }
                    }
                }
            }
        }
        let kept = committed_blocks(job);
        let (state, error) = (job.state.record(), job.state.reason());
        if let Some(r) = self.records.get_mut(&id) {
            r.state = state;
            r.error = error;
        }
        self.jobs_dirty = true;
        for (w, t) in kills {
            if let Some(w) = self.workers.get_mut(&w) {
                w.kills.push(t);
            }
        }
        for (w, b) in drop_blocks {
            self.drop_output(w, &b);
        }
        for w in self.workers.values_mut().filter(|w| w.info.alive) {
            w.finished_jobs.push(id.0);
            w.kept_blocks.extend(kept.iter().cloned());
        }
    }

    /// Of the blocks a registering worker holds, the task outputs nothing
    /// will use: of a job not running here, in no data set. (A worker
    /// that died between copying an output block and reporting it, or
    /// a job that a coordinator restart ended, leaves such blocks.)
    fn orphans(&self, blocks: &[String]) -> Vec<String> {
        let cataloged: HashSet<&str> = self
            .catalog
            .datasets
            .values()
            .flat_map(|d| d.blocks().map(|b| b.id.as_str()))
            .collect();
        blocks
            .iter()
            .filter(|b| {
                output_block_job(b).is_some_and(|j| {
                    !self.jobs.get(&j).is_some_and(Job::is_running)
                        && !cataloged.contains(b.as_str())
                })
            })
            .cloned()
            .collect()
    }

    /// Has the worker that wrote an output block, and every worker that
    /// took a copy, delete it.
    fn drop_output(&mut self, writer: WorkerId, b: &proto::BlockInfo) {
        if let Some(w) = self.workers.get_mut(&writer) {
            w.deletes.push(b.id.clone());
        }
        for uid in &b.replicas {
            if let Some(w) = self.worker_by_uid_mut(uid) {
                w.deletes.push(b.id.clone());
            }
        }
    }

    /// Workers to copy an output block written on `worker` to, for a job
    /// that keeps `output_replication` replicas.
    fn output_copies(
        &self,
        job: JobId,
        worker: WorkerId,
        policy: &dyn PlacementPolicy,
    ) -> Vec<proto::WorkerInfo> {
        let n = self.jobs.get(&job).map_or(1, |j| j.output_replication) as usize;
        let Some(holder) = self.workers.get(&worker) else {
            return Vec::new();
        };
        if n <= 1 {
            return Vec::new();
        }
        let live: Vec<&proto::WorkerInfo> = self.alive().map(|w| &w.info).collect();
        let nodes: Vec<Node> = live.iter().map(|w| node(w)).collect();
        let uids = policy.place_copies(&nodes, &holder.info.uid, n - 1, &mut HashMap::new());
        uids.iter()
            .filter_map(|u| live.iter().find(|w| &w.uid == u).map(|w| (*w).clone()))
            .collect()
    }

    fn delete_dataset_blocks(&mut self, d: &DatasetMeta) {
        let blocks: Vec<BlockMeta> = d.blocks().cloned().collect();
        for b in blocks {
            for uid in &b.replicas {
                if let Some(w) = self.worker_by_uid_mut(uid) {
                    w.deletes.push(b.id.to_string());
                }
            }
        }
    }

    /// Hands `worker` tasks for its free slots.
    fn assign(&mut self, worker: WorkerId) -> Vec<proto::TaskAssignment> {
        let cfg = self.cfg.clone();
        let s = &cfg.settings;
        let Some(w) = self.workers.get(&worker) else {
            return Vec::new();
        };
        let (uid, addr, slots) = (w.info.uid.clone(), w.info.data_addr.clone(), w.info.slots);
        let place = place_of(&w.info);
        let live: HashMap<String, String> = self
            .alive()
            .map(|w| (w.info.uid.clone(), w.info.data_addr.clone()))
            .collect();
        let topo = Topology::new(
            self.alive()
                .map(|w| (w.info.uid.clone(), place_of(&w.info))),
        )
        .with_caches(
            // The workers field only: jobs are changed while it is held.
            self.workers
                .values()
                .filter(|w| w.info.alive)
                .map(|w| (w.info.uid.as_str(), &w.cached, w.cache.blocks.as_slice())),
        );
        let asker = Asker {
            id: worker,
            uid: &uid,
            addr: &addr,
            place: &place,
            live: live.len(),
            map_slots: self.total_slots(),
        };
        let now = self.at.now;
        let mut out = Vec::new();
        for kind in [MAP, REDUCE] {
            let mut busy = self.running_on(worker, kind);
            let total = self.total_slots();
            // Each free slot goes to the first job in the policy's order
            // that takes it; the order is asked again for the next slot.
            'slots: while busy < slots as usize {
                let order = self.policy.order(&self.views(kind), kind, total);
                for id in order {
                    let Some(job) = self.jobs.get_mut(&id) else {
                        continue;
                    };
                    let Some(pick) = job.pick(&asker, kind, s, now, &topo) else {
                        continue;
                    };
                    let attempt = job.launch(pick, &asker, now);
                    let at = (pick.kind, pick.index, attempt);
                    out.push(assignment(job, at, &asker, &live, &topo));
                    busy += 1;
                    continue 'slots;
                }
                break;
            }
        }
        out
    }

    /// The running jobs as the policy sees them, for `kind` slots.
    fn views(&self, kind: TaskKind) -> Vec<JobView> {
        self.jobs
            .values()
            .filter(|j| j.is_running())
            .map(|j| {
                let running = j.running(kind);
                let pending = j.pending(kind);
                JobView {
                    id: j.id,
                    pool: j.pool.clone(),
                    running,
                    demand: running + pending,
                }
            })
            .collect()
    }

    /// Every known worker's data center, for the bytes that cross them.
    pub(crate) fn places(&self) -> crate::report::Places {
        let mut p = crate::report::Places::default();
        for w in self.workers.values() {
            let dc = w.info.datacenter.clone();
            p.by_uid.insert(w.info.uid.clone(), dc.clone());
            p.by_addr.insert(w.info.data_addr.clone(), dc);
        }
        p
    }

    /// Slots of one kind on the live workers.
    pub(crate) fn total_slots(&self) -> usize {
        self.alive().map(|w| w.info.slots as usize).sum()
    }

    /// The pools with their use now.
    pub(crate) fn pool_list(&self) -> proto::PoolList {
        let maps = self.views(MAP);
        let reduces = self.views(REDUCE);
        let configs: BTreeMap<String, PoolConfig> = self.policy.pools().into_iter().collect();
        let mut names: Vec<String> = configs.keys().cloned().collect();
        names.extend(maps.iter().map(|j| j.pool.clone()));
        names.sort();
        names.dedup();
        let sum = |v: &[JobView], name: &str| {
            v.iter()
                .filter(|j| j.pool == name)
                .map(|j| j.running as u32)
                .sum()
        };
        let pools = names
            .iter()
            .map(|name| {
                let c = configs.get(name).cloned().unwrap_or_default();
                proto::PoolInfo {
                    name: name.clone(),
                    weight: c.weight,
                    min_share: c.min_share as u32,
                    max_share: c.max_share,
                    mode: format!("{:?}", c.mode).to_lowercase(),
                    running_maps: sum(&maps, name),
                    running_reduces: sum(&reduces, name),
                    jobs: maps.iter().filter(|j| &j.pool == name).count() as u32,
                }
            })
            .collect();
        let slots = self.total_slots() as u32;
        proto::PoolList {
            scheduler: self.policy.name().into(),
            pools,
            map_slots: slots,
            reduce_slots: slots,
        }
    }

    fn running_on(&self, worker: WorkerId, kind: TaskKind) -> usize {
        self.jobs
            .values()
            .filter(|j| j.is_running())
            .flat_map(|j| j.queues.running_tasks(kind).map(|i| &j.tasks(kind)[i]))
            .flat_map(|t| t.running())
            .filter(|a| a.worker == worker)
            .count()
    }

    fn on_report(&mut self, worker: WorkerId, mut rep: proto::TaskReport) {
        let cfg = self.cfg.clone();
        let Some(t) = rep.task else { return };
        let Some(kind) = TaskKind::from_wire(t.kind) else {
            tracing::warn!("a report of unknown task kind {} ignored", t.kind);
            return;
        };
        // Only replicas actually taken out of service excuse a failure, so
        // a task cannot fail forever without counting.
        let corrupt = std::mem::take(&mut rep.corrupt);
        rep.corrupt = corrupt
            .into_iter()
            .filter(|c| self.mark_corrupt(c))
            .collect();
        let Some(job) = self.jobs.get_mut(&JobId(t.job)) else {
            return;
        };
        if !rep.ok {
            tracing::warn!(
                "job {} task {} attempt {} failed: {}",
                t.job,
                task_name(kind, t.index as usize),
                t.attempt,
                rep.error
            );
        }
        let output = rep.output.clone();
        let (kills, discard) = if job.is_running() {
            job.finish(kind, t.index as usize, rep, &cfg.settings, self.at.now)
        } else {
            (Vec::new(), true)
        };
        for (w, attempt) in kills {
            if let Some(ws) = self.workers.get_mut(&w) {
                ws.kills.push(proto::TaskId { attempt, ..t });
            }
        }
        if let (true, Some(out)) = (discard, output.filter(|o| !o.id.is_empty())) {
            self.drop_output(worker, &out);
        }
    }

    /// A job's status, running or recorded.
    pub(crate) fn status(&self, id: JobId) -> Option<proto::JobStatus> {
        if let Some(j) = self.jobs.get(&id) {
            let (state, error) = (j.state.name(), j.state.reason());
            let done = !j.report_json.is_empty();
            return Some(proto::JobStatus {
                job: id.0,
                state: if done { state } else { "running" }.into(),
                error,
                report_json: j.report_json.clone(),
                maps: j.maps.len() as u32,
                maps_done: j.done(MAP) as u32,
                reduces: j.reduces.len() as u32,
                reduces_done: j.done(REDUCE) as u32,
                pool: j.pool.clone(),
                running_maps: j.running(MAP) as u32,
                running_reduces: j.running(REDUCE) as u32,
                slots: self.total_slots() as u32,
            });
        }
        self.records.get(&id).map(|r| proto::JobStatus {
            job: id.0,
            state: r.state.name().into(),
            error: r.error.clone(),
            report_json: self.history.get(&id).cloned().unwrap_or_default(),
            ..Default::default()
        })
    }
}

/// Where a worker is, as placement and locality see it.
fn place_of(w: &proto::WorkerInfo) -> Place {
    Place {
        datacenter: w.datacenter.clone(),
        rack: w.rack.clone(),
    }
}

fn assignment(
    job: &Job,
    (kind, i, attempt): (TaskKind, usize, u32),
    w: &Asker<'_>,
    live: &HashMap<String, String>,
    topo: &Topology,
) -> proto::TaskAssignment {
    // Other holders' addresses, the nearest first: its rack, its data
    // center, then across the WAN (reads prefer the reader's data center).
    let sources = |b: &BlockMeta| {
        let mut near: Vec<(u8, &String)> = b
            .replicas
            .iter()
            .filter(|u| *u != w.uid)
            .filter_map(|u| {
                let addr = live.get(u)?;
                let d = match topo.place(u) {
                    Some(p) if p == w.place => 0,
                    Some(p) if p.datacenter == w.place.datacenter => 1,
                    _ => 2,
                };
                Some((d, addr))
            })
            .collect();
        near.sort_by_key(|(d, _)| *d);
        near.into_iter().map(|(_, a)| a.clone()).collect()
    };
    let mut a = proto::TaskAssignment {
        task: Some(proto::TaskId {
            job: job.id.0,
            kind: kind.wire(),
            index: i as u32,
            attempt,
        }),
        request: job.encoded.to_vec(),
        job_token: job.token.to_vec(),
        reducers: job.reducers,
        maps: job.maps.len() as u32,
        no_admit: !job.request.admits_to_cache(),
        ..Default::default()
    };
    // Only a map's index names an input (a job may have more reducers
    // than maps).
    let input = (kind == MAP).then(|| &job.inputs[i]);
    if let Some(MapInput::External(e)) = input {
        a.external = Some(proto::ExternalSplit {
            url: e.url.clone(),
            start: e.start,
            end: e.end,
        });
    }
    if let Some(input) = input {
        a.inputs = input
            .blocks()
            .iter()
            .map(|b| proto::BlockSource {
                block: Some(b.into()),
                sources: sources(b),
            })
            .collect();
    }
    a.side = job
        .side
        .iter()
        .map(|(name, blocks)| proto::SideInput {
            dataset: name.clone(),
            blocks: blocks
                .iter()
                .map(|b| proto::BlockSource {
                    block: Some(b.into()),
                    sources: b
                        .replicas
                        .iter()
                        .filter_map(|u| live.get(u).cloned())
                        .collect(),
                })
                .collect(),
        })
        .collect();
    if kind == REDUCE || job.map_only {
        a.output_block = format!("j{}-{}{i}-a{attempt}", job.id, kind.letter());
    }
    a
}

/// The reply that tells a worker of another coordinator start (or one
/// declared lost) to register again.
fn reregister() -> proto::HeartbeatReply {
    proto::HeartbeatReply {
        reregister: true,
        ..Default::default()
    }
}

/// Whether a reply tells the worker nothing (then the heartbeat is held;
/// a reply that says something must be sent, or what it says is lost).
fn is_empty(r: &proto::HeartbeatReply) -> bool {
    r.tasks.is_empty()
        && r.kills.is_empty()
        && r.delete_blocks.is_empty()
        && r.finished_jobs.is_empty()
        && r.kept_blocks.is_empty()
        && r.pins.is_none()
        && r.replicate.is_empty()
}

/// The output blocks a job's commit put in the catalog (none unless it
/// succeeded).
fn committed_blocks(job: &Job) -> Vec<String> {
    if job.state != JobState::Succeeded {
        return Vec::new();
    }
    [MAP, REDUCE]
        .iter()
        .flat_map(|&k| job.tasks(k))
        .filter_map(|t| t.winner()?.report.as_ref()?.output.as_ref())
        .map(|o| o.id.clone())
        .filter(|id| !id.is_empty())
        .collect()
}

/// The error of a job whose block has no intact replica left, with the
/// evidence against each damaged one.
fn no_intact_replica(b: &BlockMeta, input: &str, workers: &[proto::WorkerInfo]) -> String {
    let name = |uid: &str| match workers.iter().rev().find(|w| w.uid == uid) {
        Some(w) => format!("worker {} ({})", w.id, w.data_addr),
        None => format!("worker {uid}"),
    };
    let mut why: Vec<String> = b
        .corrupt
        .iter()
        .map(|c| format!("{}: {}", name(&c.uid), c.detail))
        .collect();
    why.extend(b.replicas.iter().map(|u| format!("{}: not live", name(u))));
    format!(
        "block {} of data set {input} has no intact replica ({})",
        b.id,
        why.join("; ")
    )
}

/// A worker as placement sees it.
fn node(w: &proto::WorkerInfo) -> Node {
    Node {
        uid: w.uid.clone(),
        host: w.host.clone(),
        datacenter: w.datacenter.clone(),
        rack: w.rack.clone(),
        free_bytes: w.free_bytes,
    }
}

/// The host part of `host:port`.
pub fn host_of(addr: &str) -> String {
    addr.rsplit_once(':')
        .map_or(addr, |(h, _)| h)
        .trim_matches(['[', ']'])
        .to_owned()
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
