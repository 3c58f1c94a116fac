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
//! enters the catalog, the job waits in [`JobState::Committing`](crate::sched::JobState::Committing)), made
//! durable by the service, and finished or undone by the loop when the
//! write's outcome arrives. Queries (listings, job status, map outputs)
//! read the state and change nothing.
//!
//! An event the state refuses is answered with a [`Refusal`]: a variant per
//! reason, carrying the ids and names involved; the service maps each to
//! a gRPC code.
//!
//! Which job a free slot goes to is the [`Policy`]'s choice (FIFO, fair);
//! which of its tasks, and whether it declines to wait for locality, is
//! the job's ([`Job::pick`]).
//!
//! The state's methods are split by concern, each file its own `impl
//! State` block called from [`State::handle`] only: `workers`
//! (registration, heartbeats, the tick, lost workers), `assign` (slots
//! offered to jobs, pools, preemption), `jobs` (submission, reports,
//! commit, status), `catalog` (the catalog write, puts, removals),
//! `replicas` (block reports, damaged replicas, re-replication) and
//! `cache` (cache directives). They import from this file, never the
//! reverse.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::CoordinatorConfig;
use crate::editlog::CatalogEdit;
use crate::input::ExternalInput;
use crate::joblog::JobEntry;
use crate::policy::Policy;
use crate::sched::Job;
use crate::store::JobRecord;
use sluice_proto::catalog::{Catalog, DatasetMeta};
use sluice_proto::ids::DatasetName;
use sluice_proto::ids::{JobId, TaskKind, WorkerId};
use sluice_proto::proto;
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
    /// The client's id for this submission (empty: none): a submit sent
    /// again with it gets the job the first one made.
    pub submission: String,
    /// The user it runs as (empty: an admin).
    pub user: String,
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
    /// A put asks where its blocks go: the request, and the user asking
    /// (`None`: an admin).
    PlanBlocks(proto::PlanBlocksRequest, Option<String>),
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
    /// A user is added with a salt for their key (`sluice user add`), or
    /// removed (`None`).
    User {
        name: String,
        salt: Option<String>,
    },
    /// Reading a data set is granted or taken back (`sluice share`).
    Share(proto::ShareRequest),
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
            Event::Heartbeat(_) | Event::Offer(_) | Event::PlanBlocks(..)
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
    pub answer: Result<Answer, Refusal>,
    /// Write the catalog, then send [`Event::CatalogSaved`] with it.
    pub catalog: Option<CatalogWrite>,
    /// Write the job records.
    pub save_jobs: bool,
    /// Reports of jobs that ended, to add to the job history.
    pub history: Vec<(JobId, String)>,
    /// Records for the job log, in order ([`crate::joblog`]).
    pub log: Vec<JobEntry>,
    /// Callers waiting for a job's end should look again: a job ended, or
    /// an event other than a heartbeat changed the state.
    pub wake: bool,
    /// Held heartbeats should be offered their workers' slots again. A
    /// heartbeat's reports wake other workers' held beats only when they
    /// made more tasks startable (a failure to run again, reduces past
    /// slow start); an attempt done whose slot the reporting worker's
    /// next attempt takes (the common case, thousands a second on a large
    /// cluster) wakes no other worker.
    pub offer: bool,
    /// Reduces waiting for map outputs should look again: a job's last
    /// map is done, or a job ended. (Other maps' outputs are sent when
    /// the call has waited a while, not one by one.)
    pub outputs: bool,
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
    /// The users as they were before, to put back on failure.
    users: Option<BTreeMap<String, sluice_proto::catalog::UserMeta>>,
    /// Data sets changed in place (damaged replicas marked), beside those
    /// in `undo`.
    touched: Vec<DatasetName>,
    /// A client waits on it: a failed write is its error (otherwise it is
    /// logged).
    client: bool,
}

impl CatalogWrite {
    /// Whether it commits a job's output.
    pub fn commits(&self) -> bool {
        self.then.iter().any(|t| matches!(t, Then::Commit { .. }))
    }

    /// The change to log: every data set it touched as `c` holds it now,
    /// the directives if they changed, the counters.
    pub fn edit(&self, c: &Catalog) -> CatalogEdit {
        let names = self.undo.iter().map(|(n, _)| n.clone());
        let names = names.chain(self.touched.iter().cloned());
        let mut edit = CatalogEdit::of(c, names, self.directives.is_some());
        edit.users = self.users.is_some().then(|| c.users.clone());
        edit
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
    /// The user who asked for each of those a user asked for (an
    /// admin's are not here): only they or an admin abandon it.
    planners: HashMap<String, String>,
    /// Blocks a worker reported that nothing knows, by (uid, block), and
    /// since when: deleted after the orphan grace period.
    unknown: HashMap<(String, String), Instant>,
    /// Damaged replicas were marked and the catalog is not saved yet.
    /// Data sets whose replicas were marked damaged this step, to write.
    marked: Vec<DatasetName>,
    /// Workers were lost since the running jobs' inputs were last checked
    /// for a block with no live replica (the check walks every map, so
    /// ticks make it only then).
    inputs_unchecked: bool,
    /// The catalog write this step asks for.
    write: Option<CatalogWrite>,
    /// The job records changed this step.
    jobs_dirty: bool,
    /// A job's last map was done or a job ended: what reduces waiting for
    /// map outputs are woken by ([`Step::outputs`]).
    outputs_moved: bool,
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
    /// Job log records asked for this step.
    logged: Vec<JobEntry>,
    /// Workers that ran a recovered job's finished tasks, by uid, under
    /// the id their attempts name, and since when they are awaited: a
    /// worker that does not register again within the worker timeout is
    /// lost.
    awaited: HashMap<String, (WorkerId, Instant)>,
    /// When jobs were taken back after a restart: for a while no task is
    /// handed out (the workers are registering again with the attempts
    /// they run) and no job fails for want of a live replica.
    regrouping: Option<Instant>,
    /// When this coordinator started, if an earlier one ran the cluster
    /// (epoch past 1): its workers are registering again, so for the
    /// worker timeout no job fails for want of a live replica, whether
    /// it was taken back or submitted since.
    restarted: Option<Instant>,
    /// Shuffle fetch failures reported since the coordinator started.
    pub(crate) fetch_failures: u64,
    /// The reports of the jobs that ended since the coordinator started,
    /// summed (what `/metrics` counts).
    pub(crate) totals: Totals,
    /// Re-replication of blocks short of replicas.
    pub(crate) heal: crate::heal::Healing,
    /// The live workers as offers read them, built again only when one
    /// registers or is lost, not on every offer.
    members: Option<Arc<Members>>,
    /// Workers whose last cache report named blocks: an offer looks at
    /// their caches only, not at every worker.
    caching: std::collections::BTreeSet<WorkerId>,
}

/// The live workers as an offer reads them.
#[derive(Debug)]
struct Members {
    /// Data-plane addresses by uid.
    addrs: HashMap<String, String>,
    /// Places by uid.
    places: HashMap<String, crate::sched::Place>,
    /// Slots of one kind on them.
    slots: usize,
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
            planners: HashMap::new(),
            unknown: HashMap::new(),
            marked: Vec::new(),
            inputs_unchecked: true,
            write: None,
            jobs_dirty: false,
            outputs_moved: false,
            policy,
            starved_since: HashMap::new(),
            history: BTreeMap::new(),
            ended: Vec::new(),
            logged: Vec::new(),
            awaited: HashMap::new(),
            regrouping: None,
            restarted: (epoch > 1).then_some(at.now),
            fetch_failures: 0,
            totals: Totals::default(),
            heal: crate::heal::Healing::default(),
            members: None,
            caching: Default::default(),
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
            Some(j) if !j.report_json().is_empty() => Some(j.report_json()),
            Some(_) => None,
            None => self.history.get(&id).map(String::as_str),
        }
    }

    /// Handles one event: the whole of how the coordinator's state
    /// changes. No I/O: what to write is in the returned step.
    pub fn handle(&mut self, ev: Event, at: At) -> Step {
        self.at = at;
        let mut wake = ev.wakes();
        let mut offer = None;
        let answer = match ev {
            Event::Register(r) => self.register(r).map(Answer::Registered),
            Event::Heartbeat(r) => {
                // Its reports wake waiting callers only when a job ended
                // (below), not thousands of times a second.
                wake = false;
                let (corrupt, before) = (!r.corrupt.is_empty(), self.waiting_tasks());
                let reply = self.heartbeat(r);
                let started = reply.as_ref().map_or(0, |r| r.tasks.len());
                offer = Some(corrupt || self.waiting_tasks() + started > before);
                Ok(Answer::Heartbeat(reply))
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
            Event::PlanBlocks(r, user) => self.plan_blocks(&r, user).map(Answer::Planned),
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
            Event::User { name, salt } => self.set_user(name, salt).map(|()| Answer::Done),
            Event::Share(r) => self.share(&r).map(|()| Answer::Done),
            Event::Tick => {
                wake = self.tick();
                Ok(Answer::Done)
            }
            Event::CatalogSaved { write, result } => self.catalog_saved(write, result),
        };
        self.note_marks();
        self.settle_jobs();
        wake |= !self.ended.is_empty();
        Step {
            answer,
            catalog: self.write.take(),
            save_jobs: std::mem::take(&mut self.jobs_dirty),
            history: std::mem::take(&mut self.ended),
            log: std::mem::take(&mut self.logged),
            wake,
            offer: offer.unwrap_or(wake),
            outputs: std::mem::take(&mut self.outputs_moved),
        }
    }
}

mod assign;
mod cache;
mod catalog;
mod jobs;
mod recover;
mod refusal;
mod replicas;
mod users;
mod workers;

pub use refusal::{MemoryAsk, Refusal};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod recover_tests;

#[cfg(test)]
mod cache_tests;

#[cfg(test)]
mod scale_tests;
