//! The coordinator: worker registry, data set catalog, job scheduling.
//!
//! All state is in one `State` behind a mutex, held for short, non-async
//! critical sections. Workers pull work with heartbeats ([`Settings`] in
//! `sched`); a heartbeat with nothing to hand out is held until work
//! appears or the heartbeat interval ends, so a submitted job starts
//! without waiting for the next beat. A worker silent for
//! [`CoordinatorConfig::worker_timeout`] is lost. Each coordinator start
//! has a new epoch: workers of an older epoch are told to re-register,
//! dropping their running tasks (fencing), and jobs that were running when
//! the previous coordinator died are recorded as failed with the reason.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tonic::{Request, Response, Status};

use crate::policy::{Fair, Fifo, JobView, Policy, PoolConfig, Pools};
use crate::sched::{
    task_name, Asker, Job, JobId, JobState, MapInput, Place, Settings, TaskKind, Topology,
    WorkerId, MAP, REDUCE,
};
use crate::store::{JobRecord, Node, PlacementPolicy, RecordState, StateDir};
use sluice_proto::auth::Secret;
use sluice_proto::catalog::{check_name, BlockMeta, Catalog, DatasetMeta, FileMeta};
use sluice_proto::ids::{output_block_job, DatasetName};
use sluice_proto::proto::coordinator_server::{Coordinator, CoordinatorServer};
use sluice_proto::proto::{self, Empty};
use sluice_proto::{ClusterError, PROTOCOL_VERSION};
use sluice_request::{BuildContext, JobRequest, Registry};

/// Coordinator settings.
pub struct CoordinatorConfig {
    pub listen: SocketAddr,
    pub state_dir: PathBuf,
    pub secret: Secret,
    pub heartbeat: Duration,
    pub worker_timeout: Duration,
    pub settings: Settings,
    /// The job kinds this cluster runs.
    pub jobs: Arc<Registry>,
    pub placement: Box<dyn PlacementPolicy>,
    /// How long a block that no data set, put or job knows may sit on a
    /// worker before the worker is told to delete it.
    pub orphan_grace: Duration,
    /// The scheduling policy: FIFO, or fair over the pools of a file.
    pub scheduler: Scheduler,
    /// Fair preemption: a pool short of its minimum share this long takes
    /// slots back from pools over their share (`None`: never).
    pub preemption_timeout: Option<Duration>,
}

/// The scheduling policy a coordinator runs.
#[derive(Debug, Clone)]
pub enum Scheduler {
    /// Jobs in submission order.
    Fifo,
    /// Fair sharing between pools, read from the file if one is given
    /// (and again on `sluice pools reload`).
    Fair(Option<PathBuf>),
}

impl Scheduler {
    /// The policy, its pools read now.
    pub fn policy(&self) -> Result<Box<dyn Policy>, ClusterError> {
        match self {
            Scheduler::Fifo => Ok(Box::new(Fifo)),
            Scheduler::Fair(None) => Ok(Box::new(Fair::default())),
            Scheduler::Fair(Some(path)) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| ClusterError::io("reading", path, e))?;
                let pools = Pools::parse(&text)
                    .map_err(|e| ClusterError::Config(format!("{}: {e}", path.display())))?;
                Ok(Box::new(Fair { pools }))
            }
        }
    }
}

/// How long blocks planned for a put are reserved for it (a put that
/// neither commits nor abandons them in this time is assumed dead).
const PUT_LEASE: Duration = Duration::from_secs(24 * 3600);

/// A data set committed this recently is not checked against block
/// reports: a report listed before a block was stored may arrive after
/// its commit.
const REPORT_GUARD_MS: u64 = 5_000;

struct WorkerState {
    info: proto::WorkerInfo,
    last_seen: Instant,
    kills: Vec<proto::TaskId>,
    deletes: Vec<String>,
    finished_jobs: Vec<u64>,
    kept_blocks: Vec<String>,
}

struct State {
    epoch: u64,
    store: StateDir,
    catalog: Catalog,
    jobs: BTreeMap<JobId, Job>,
    records: BTreeMap<JobId, JobRecord>,
    workers: BTreeMap<WorkerId, WorkerState>,
    next_worker: u64,
    next_job: u64,
    /// When a live worker was last seen (for failing jobs when none is).
    last_alive: Instant,
    /// Block ids handed to puts in progress, and when.
    planned: HashMap<String, Instant>,
    /// Blocks a worker reported that nothing knows, by (uid, block), and
    /// since when: deleted after the orphan grace period.
    unknown: HashMap<(String, String), Instant>,
    /// Damaged replicas were marked and the catalog is not saved yet.
    catalog_dirty: bool,
    /// Which job a free slot is offered to first.
    policy: Box<dyn Policy>,
    /// Since when each pool has been short of its minimum share, by slot
    /// kind (fair preemption).
    starved_since: HashMap<(String, TaskKind), Instant>,
}

/// The gRPC service.
pub struct Service {
    state: Arc<Mutex<State>>,
    notify: Arc<Notify>,
    cfg: Arc<CoordinatorConfig>,
}

type Reply<T> = Result<Response<T>, Status>;

/// A request the coordinator refuses, with why.
fn invalid(e: impl std::fmt::Display) -> Status {
    Status::invalid_argument(e.to_string())
}

fn status(e: ClusterError) -> Status {
    match e {
        ClusterError::Config(m) => Status::invalid_argument(m),
        other => Status::internal(other.to_string()),
    }
}

/// Starts the coordinator; returns its bound address and the server task.
pub async fn start(
    cfg: CoordinatorConfig,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), ClusterError> {
    let store = StateDir::open(&cfg.state_dir)?;
    let epoch = store.next_epoch()?;
    let catalog = store.load_catalog()?;
    let mut records = store.load_jobs()?;
    for r in records
        .values_mut()
        .filter(|r| r.state == RecordState::Running)
    {
        r.state = RecordState::Failed;
        r.error = format!(
            "the coordinator restarted (now epoch {epoch}) while the job ran; \
             its output was not committed; resubmit it"
        );
    }
    store.save_jobs(&records)?;
    let policy = cfg.scheduler.policy()?;
    let state = State {
        epoch,
        store,
        catalog,
        jobs: BTreeMap::new(),
        records,
        workers: BTreeMap::new(),
        next_worker: 0,
        next_job: 0,
        last_alive: Instant::now(),
        planned: HashMap::new(),
        unknown: HashMap::new(),
        catalog_dirty: false,
        policy,
        starved_since: HashMap::new(),
    };
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(|e| ClusterError::net("listening on", &cfg.listen.to_string(), e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| ClusterError::net("listening on", &cfg.listen.to_string(), e))?;
    let svc = Service {
        state: Arc::new(Mutex::new(state)),
        notify: Arc::new(Notify::new()),
        cfg: Arc::new(cfg),
    };
    svc.spawn_liveness();
    let verify = sluice_proto::signed::VerifyLayer::new(svc.cfg.secret.clone());
    let server = CoordinatorServer::new(svc);
    // The builder's tcp_nodelay covers only sockets it accepts itself; set
    // it on ours, or small replies wait out the peer's delayed ACK (40 ms).
    let incoming = tokio_stream::StreamExt::map(
        tokio_stream::wrappers::TcpListenerStream::new(listener),
        |s| s.and_then(|s| s.set_nodelay(true).map(|()| s)),
    );
    let handle = tokio::spawn(async move {
        let r = tonic::transport::Server::builder()
            .tcp_nodelay(true)
            .layer(verify)
            .add_service(server)
            .serve_with_incoming(incoming)
            .await;
        if let Err(e) = r {
            tracing::error!("coordinator server stopped: {e}");
        }
    });
    tracing::info!("coordinator epoch {epoch} listening on {addr}");
    Ok((addr, handle))
}

impl Service {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Builds the job as a worker will (without its side inputs' data), so
    /// that a request no worker could run is refused at submit; returns
    /// its reducers (0 for a map-only job) and the data sets its tasks
    /// read whole.
    fn validate(&self, r: &JobRequest) -> Result<(u32, Vec<String>), Status> {
        let ctx = BuildContext {
            cluster: true,
            ..BuildContext::default()
        };
        let (built, cfg) = self.cfg.jobs.build(r, &ctx).map_err(invalid)?;
        let kind = self.cfg.jobs.get(&r.job).map_err(invalid)?;
        let side = kind.side_inputs(r).map_err(invalid)?;
        let reducers = if built.spec.is_map_only() {
            0
        } else {
            cfg.reducers
        };
        Ok((reducers, side))
    }

    /// Declares silent workers lost, every heartbeat interval.
    fn spawn_liveness(&self) {
        let (state, notify, cfg) = (self.state.clone(), self.notify.clone(), self.cfg.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(cfg.heartbeat);
            loop {
                tick.tick().await;
                let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
                if st.check_liveness(&cfg) {
                    notify.notify_waiters();
                }
            }
        });
    }
}

impl State {
    /// The map inputs of a job: the blocks of its data sets (names
    /// separated by commas), or for `synthetic:N` N blockless tasks that
    /// run on any worker.
    fn input_blocks(&self, input: &str) -> std::result::Result<Vec<MapInput>, Status> {
        let synthetic = sluice_formats::input::synthetic_count(input)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        if let Some(n) = synthetic {
            return Ok(vec![MapInput::Synthetic; n]);
        }
        let mut blocks = Vec::new();
        for name in input.split(',') {
            blocks.extend(self.dataset_blocks(name)?.into_iter().map(MapInput::Block));
        }
        Ok(blocks)
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

    /// Returns whether anything changed.
    fn check_liveness(&mut self, cfg: &CoordinatorConfig) -> bool {
        let now = Instant::now();
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
        if self.alive().next().is_some() {
            self.last_alive = now;
        } else if now.duration_since(self.last_alive) > cfg.worker_timeout {
            let n = self.workers.len();
            for job in self.jobs.values_mut().filter(|j| j.is_running()) {
                job.fail(format!(
                    "no live workers: all {n} workers were lost (silent for over {:?})",
                    cfg.worker_timeout
                ));
                changed = true;
            }
        }
        changed |= self.fail_unreadable_inputs();
        if let Some(timeout) = cfg.preemption_timeout {
            changed |= self.preempt(timeout);
        }
        self.settle_jobs();
        changed
    }

    /// Fair preemption: pools short of their minimum share for `timeout`
    /// take slots back from pools over their share, the youngest attempts
    /// first (they lose the least work). Returns whether any was ended.
    fn preempt(&mut self, timeout: Duration) -> bool {
        let now = Instant::now();
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
                    j.tasks(kind).iter().enumerate().flat_map(move |(i, t)| {
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
                let Some(w) = job.preempt(kind, i, attempt) else {
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
        // Its unknown blocks are judged again when it reports anew.
        self.unknown.retain(|(u, _), _| *u != uid);
        for job in self.jobs.values_mut().filter(|j| j.is_running()) {
            job.worker_lost(id);
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
                let b = input.block()?;
                (t.pending() && !b.replicas.iter().any(|u| live.contains(u))).then_some(b)
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
                job.fail(msg);
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
                job.fail(msg);
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
            for f in &mut d.files {
                for b in f.blocks.iter_mut().filter(|b| b.id == c.block) {
                    marked |= b.mark_corrupt(&uid, &c.detail);
                }
            }
        }
        for job in self.jobs.values_mut().filter(|j| j.is_running()) {
            let side = job.side.iter_mut().flat_map(|(_, b)| b.iter_mut());
            for b in job
                .inputs
                .iter_mut()
                .filter_map(MapInput::block_mut)
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
        self.catalog_dirty = true;
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

    /// Saves the catalog if damaged replicas were marked since the last
    /// save (once per batch of reports, not once per replica), and then
    /// fails jobs left without an intact replica. Heartbeats without
    /// marks do neither.
    fn save_marks(&mut self) {
        if !std::mem::take(&mut self.catalog_dirty) {
            return;
        }
        if let Err(e) = self.store.save_catalog(&self.catalog) {
            tracing::error!("saving the catalog after marking damaged replicas: {e}");
        }
        self.fail_unreadable_inputs();
    }

    /// Takes a worker's block report: blocks that no data set holds on it,
    /// no put in progress was given and no running job wrote are orphans;
    /// those still reported after the grace period are deleted. Output
    /// blocks of jobs that have ended go at once.
    fn block_report(&mut self, worker: WorkerId, blocks: &[String], grace: Duration) {
        let Some(uid) = self.workers.get(&worker).map(|w| w.info.uid.clone()) else {
            return;
        };
        let now = Instant::now();
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
        let settled = sluice_proto::now_ms().saturating_sub(REPORT_GUARD_MS);
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
                at_ms: sluice_proto::now_ms(),
            });
        }
    }

    /// Commits complete jobs and cleans up after ended ones.
    fn settle_jobs(&mut self) {
        let complete: Vec<JobId> = self
            .jobs
            .values()
            .filter(|j| j.is_running() && j.complete())
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

    /// The atomic job commit: the output data set enters the catalog in
    /// one catalog write, built from the winning attempts only.
    fn commit(&mut self, id: JobId) {
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
            Err(e) => return job.fail(format!("a task reported a bad output block: {e}")),
        };
        let name = match DatasetName::new(job.output.clone()) {
            Ok(n) => n,
            Err(e) => return job.fail(e.to_string()),
        };
        if self.catalog.datasets.contains_key(&name) && !job.overwrite {
            job.fail(format!("output data set {name} appeared while the job ran"));
            return;
        }
        let meta = DatasetMeta {
            name: name.clone(),
            files,
            created_ms: sluice_proto::now_ms(),
            origin: format!("job {id} ({})", job.request.describe()),
            replication: job.output_replication,
        };
        let old = self.catalog.datasets.insert(name.clone(), meta);
        if let Err(e) = self.store.save_catalog(&self.catalog) {
            match old {
                Some(o) => self.catalog.datasets.insert(name, o),
                None => self.catalog.datasets.remove(&name),
            };
            let job = self.jobs.get_mut(&id).expect("job exists");
            job.fail(format!("committing the output: {e}"));
            return;
        }
        if let Some(old) = old {
            self.delete_dataset_blocks(&old);
        }
        let job = self.jobs.get_mut(&id).expect("job exists");
        job.state = JobState::Succeeded;
        job.finished = Some(Instant::now());
    }

    /// After a job ends: kill its attempts, drop uncommitted outputs,
    /// have workers remove its map outputs, record it.
    fn end_job(&mut self, id: JobId) {
        let workers = self.alive().count();
        let job = self.jobs.get_mut(&id).expect("job exists");
        let report = crate::report::of(job, workers);
        job.report_json = serde_json::to_string_pretty(&report).expect("serializable");
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
        let _ = self.store.save_jobs(&self.records);
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
    fn assign(&mut self, worker: WorkerId, s: &Settings) -> Vec<proto::TaskAssignment> {
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
        );
        let asker = Asker {
            id: worker,
            uid: &uid,
            addr: &addr,
            place: &place,
            live: live.len(),
        };
        let now = Instant::now();
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
                    let attempt = job.launch(pick, &asker);
                    out.push(assignment(job, pick.kind, pick.index, attempt, &uid, &live));
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
                let running = j
                    .tasks(kind)
                    .iter()
                    .filter(|t| t.running().next().is_some())
                    .count();
                let pending = j.tasks(kind).iter().filter(|t| t.pending()).count();
                JobView {
                    id: j.id,
                    pool: j.pool.clone(),
                    running,
                    demand: running + pending,
                }
            })
            .collect()
    }

    /// Slots of one kind on the live workers.
    fn total_slots(&self) -> usize {
        self.alive().map(|w| w.info.slots as usize).sum()
    }

    /// The pools with their use now.
    fn pool_list(&self) -> proto::PoolList {
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
            .flat_map(|j| j.tasks(kind))
            .flat_map(|t| t.running())
            .filter(|a| a.worker == worker)
            .count()
    }

    fn on_report(&mut self, worker: WorkerId, mut rep: proto::TaskReport, s: &Settings) {
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
            job.finish(kind, t.index as usize, rep, s)
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

    fn status(&self, id: JobId) -> Option<proto::JobStatus> {
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
            });
        }
        self.records.get(&id).map(|r| proto::JobStatus {
            job: id.0,
            state: r.state.name().into(),
            error: r.error.clone(),
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
    kind: TaskKind,
    i: usize,
    attempt: u32,
    uid: &str,
    live: &HashMap<String, String>,
) -> proto::TaskAssignment {
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
        ..Default::default()
    };
    // Only a map's index names an input (a job may have more reducers
    // than maps).
    let input = (kind == MAP).then(|| &job.inputs[i]);
    if let Some(MapInput::Block(b)) = input {
        a.block = Some(b.into());
        a.sources = b
            .replicas
            .iter()
            .filter(|u| *u != uid)
            .filter_map(|u| live.get(u).cloned())
            .collect();
    }
    a.side = job
        .side
        .iter()
        .map(|(name, blocks)| proto::SideInput {
            dataset: name.clone(),
            blocks: blocks
                .iter()
                .map(|b| proto::SideBlock {
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

#[tonic::async_trait]
impl Coordinator for Service {
    async fn register(&self, req: Request<proto::RegisterRequest>) -> Reply<proto::RegisterReply> {
        let r = req.into_inner();
        if r.protocol_version != PROTOCOL_VERSION {
            return Err(Status::failed_precondition(format!(
                "worker speaks protocol {}, this coordinator {PROTOCOL_VERSION}",
                r.protocol_version
            )));
        }
        let mut st = self.lock();
        let old: Vec<WorkerId> = st
            .workers
            .iter()
            .filter(|(_, w)| w.info.alive && w.info.uid == r.uid)
            .map(|(&id, _)| id)
            .collect();
        for id in old {
            st.lose_worker(id);
        }
        st.next_worker += 1;
        let id = WorkerId(st.next_worker);
        st.workers.insert(
            id,
            WorkerState {
                info: proto::WorkerInfo {
                    id: id.0,
                    uid: r.uid.clone(),
                    data_addr: r.data_addr,
                    datacenter: r.datacenter,
                    rack: r.rack,
                    slots: r.slots.max(1),
                    alive: true,
                    pid: r.pid,
                    memory: r.memory,
                },
                last_seen: Instant::now(),
                kills: Vec::new(),
                deletes: Vec::new(),
                finished_jobs: Vec::new(),
                kept_blocks: Vec::new(),
            },
        );
        st.block_report(id, &r.blocks, self.cfg.orphan_grace);
        st.save_marks();
        drop(st);
        self.notify.notify_waiters();
        let running_jobs = self
            .lock()
            .jobs
            .values()
            .filter(|j| j.is_running())
            .map(|j| j.id.0)
            .collect();
        Ok(Response::new(proto::RegisterReply {
            running_jobs,
            worker_id: id.0,
            epoch: self.lock().epoch,
            heartbeat_ms: self.cfg.heartbeat.as_millis() as u64,
        }))
    }

    async fn heartbeat(
        &self,
        req: Request<proto::HeartbeatRequest>,
    ) -> Reply<proto::HeartbeatReply> {
        let r = req.into_inner();
        let worker = WorkerId(r.worker_id);
        let s = &self.cfg.settings;
        let notified = self.notify.notified();
        tokio::pin!(notified);
        {
            let mut st = self.lock();
            let epoch = st.epoch;
            match st.workers.get_mut(&worker) {
                Some(w) if w.info.alive && r.epoch == epoch => w.last_seen = Instant::now(),
                _ => {
                    return Ok(Response::new(proto::HeartbeatReply {
                        reregister: true,
                        ..Default::default()
                    }))
                }
            }
            let had_reports = !r.reports.is_empty() || !r.corrupt.is_empty();
            // Task reports first: a failure excused by its own evidence
            // must not find the replica already marked by the scanner's.
            for rep in r.reports {
                st.on_report(worker, rep, s);
            }
            for c in &r.corrupt {
                st.mark_corrupt(c);
            }
            if r.block_report {
                st.block_report(worker, &r.blocks, self.cfg.orphan_grace);
            }
            st.save_marks();
            st.settle_jobs();
            if had_reports {
                self.notify.notify_waiters();
            }
            let reply = self.take_reply(&mut st, worker);
            if had_reports || !is_empty(&reply) {
                return Ok(Response::new(reply));
            }
            notified.as_mut().enable();
        }
        let _ = tokio::time::timeout(self.cfg.heartbeat, notified).await;
        let mut st = self.lock();
        Ok(Response::new(self.take_reply(&mut st, worker)))
    }

    async fn map_outputs(
        &self,
        req: Request<proto::MapOutputsRequest>,
    ) -> Reply<proto::MapOutputsReply> {
        let r = req.into_inner();
        let deadline = Instant::now() + Duration::from_millis(r.wait_ms.min(10_000));
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let st = self.lock();
                let job = st
                    .jobs
                    .get(&JobId(r.job))
                    .ok_or_else(|| Status::not_found(format!("no job {}", r.job)))?;
                let outputs: Vec<proto::MapOutput> = job
                    .maps
                    .iter()
                    .enumerate()
                    .filter_map(|(i, t)| {
                        t.winner().map(|a| proto::MapOutput {
                            map: i as u32,
                            attempt: a.id,
                            addr: a.addr.clone(),
                        })
                    })
                    .collect();
                let aborted = !job.is_running();
                if aborted || outputs.len() as u32 > r.known || Instant::now() >= deadline {
                    return Ok(Response::new(proto::MapOutputsReply {
                        outputs,
                        maps: job.maps.len() as u32,
                        aborted,
                    }));
                }
            }
            let _ = tokio::time::timeout_at(deadline.into(), notified).await;
        }
    }

    async fn fetch_failed(&self, req: Request<proto::FetchFailedRequest>) -> Reply<Empty> {
        let r = req.into_inner();
        let s = self.cfg.settings.clone();
        let mut st = self.lock();
        if let Some(job) = st.jobs.get_mut(&JobId(r.job)) {
            if job.is_running() && job.fetch_failed(r.map as usize, r.attempt, &r.reason, &s) {
                tracing::warn!("job {} map {} output lost: {}", r.job, r.map, r.reason);
            }
        }
        st.settle_jobs();
        drop(st);
        self.notify.notify_waiters();
        Ok(Response::new(Empty {}))
    }

    async fn plan_blocks(
        &self,
        req: Request<proto::PlanBlocksRequest>,
    ) -> Reply<proto::PlanBlocksReply> {
        let r = req.into_inner();
        let mut st = self.lock();
        if st.alive().next().is_none() {
            return Err(Status::unavailable("no live workers"));
        }
        let live: Vec<proto::WorkerInfo> = st
            .alive()
            .filter(|w| !r.exclude.contains(&w.info.uid))
            .map(|w| w.info.clone())
            .collect();
        if live.is_empty() {
            return Ok(Response::new(proto::PlanBlocksReply::default()));
        }
        let nodes: Vec<Node> = live.iter().map(node).collect();
        let repl = (r.replication.max(1) as usize).min(live.len());
        let mut placed = HashMap::new();
        let epoch = st.epoch;
        let mut blocks = Vec::new();
        for _ in 0..r.blocks {
            let uids = self
                .cfg
                .placement
                .place(&nodes, &r.writer_host, repl, &mut placed);
            let targets = uids
                .iter()
                .filter_map(|u| live.iter().find(|w| &w.uid == u).cloned())
                .collect();
            let id = st.catalog.new_block_id(epoch).to_string();
            st.planned.insert(id.clone(), Instant::now());
            blocks.push(proto::Placement { id, targets });
        }
        let cat = st.catalog.clone();
        st.store.save_catalog(&cat).map_err(status)?;
        Ok(Response::new(proto::PlanBlocksReply { blocks }))
    }

    async fn commit_dataset(&self, req: Request<proto::CommitDatasetRequest>) -> Reply<Empty> {
        let r = req.into_inner();
        let mut d = DatasetMeta::try_from(r.dataset.unwrap_or_default()).map_err(status)?;
        d.created_ms = sluice_proto::now_ms();
        let mut st = self.lock();
        if st.catalog.datasets.contains_key(&d.name) && !r.overwrite {
            return Err(Status::already_exists(format!(
                "data set {} exists (remove it first, or overwrite)",
                d.name
            )));
        }
        // Blocks this coordinator did not plan were planned before a
        // restart: their put's reservation is gone, and with it the
        // assurance that none was deleted as an orphan meanwhile.
        if let Some(b) = d.blocks().find(|b| !st.planned.contains_key(b.id.as_str())) {
            return Err(Status::failed_precondition(format!(
                "block {} was not planned by this coordinator (it restarted while the put \
                 ran?): put the data set again",
                b.id
            )));
        }
        for b in d.blocks() {
            st.planned.remove(b.id.as_str());
        }
        let old = st.catalog.datasets.insert(d.name.clone(), d);
        let cat = st.catalog.clone();
        st.store.save_catalog(&cat).map_err(status)?;
        if let Some(old) = old {
            st.delete_dataset_blocks(&old);
        }
        Ok(Response::new(Empty {}))
    }

    async fn abandon_blocks(&self, req: Request<proto::BlockIds>) -> Reply<Empty> {
        let ids = req.into_inner().ids;
        let mut st = self.lock();
        let cataloged: HashSet<String> = st
            .catalog
            .datasets
            .values()
            .flat_map(|d| d.blocks().map(|b| b.id.to_string()))
            .collect();
        // Only blocks handed to a put and never committed.
        let ids: Vec<String> = ids
            .into_iter()
            .filter(|b| st.planned.remove(b).is_some() && !cataloged.contains(b))
            .collect();
        for w in st.workers.values_mut().filter(|w| w.info.alive) {
            w.deletes.extend(ids.iter().cloned());
        }
        drop(st);
        self.notify.notify_waiters();
        Ok(Response::new(Empty {}))
    }

    async fn report_corrupt(&self, req: Request<proto::CorruptReport>) -> Reply<Empty> {
        let mut st = self.lock();
        for c in &req.into_inner().replicas {
            st.mark_corrupt(c);
        }
        st.save_marks();
        st.settle_jobs();
        drop(st);
        self.notify.notify_waiters();
        Ok(Response::new(Empty {}))
    }

    async fn list_datasets(&self, _: Request<Empty>) -> Reply<proto::DatasetList> {
        let st = self.lock();
        Ok(Response::new(proto::DatasetList {
            datasets: st.catalog.datasets.values().map(Into::into).collect(),
        }))
    }

    async fn get_dataset(&self, req: Request<proto::Name>) -> Reply<proto::Dataset> {
        let name = req.into_inner().name;
        let st = self.lock();
        let d = st
            .catalog
            .datasets
            .get(&name)
            .ok_or_else(|| Status::not_found(format!("no data set {name}")))?;
        Ok(Response::new(d.into()))
    }

    async fn remove_dataset(&self, req: Request<proto::Name>) -> Reply<Empty> {
        let name = req.into_inner().name;
        let mut st = self.lock();
        let d = st
            .catalog
            .datasets
            .remove(&name)
            .ok_or_else(|| Status::not_found(format!("no data set {name}")))?;
        let cat = st.catalog.clone();
        st.store.save_catalog(&cat).map_err(status)?;
        st.delete_dataset_blocks(&d);
        Ok(Response::new(Empty {}))
    }

    async fn submit(&self, req: Request<proto::SubmitRequest>) -> Reply<proto::SubmitReply> {
        let replication = req.get_ref().replication;
        let r = JobRequest::decode(&req.into_inner().request).map_err(invalid)?;
        check_name(&r.output).map_err(status)?;
        if r.input.split(',').any(|n| n == r.output) {
            return Err(Status::invalid_argument(format!(
                "output data set {} is also an input",
                r.output
            )));
        }
        let (reducers, side) = self.validate(&r)?;
        let mut st = self.lock();
        if st.alive().next().is_none() {
            return Err(Status::unavailable("no live workers"));
        }
        if let Some(asked) = r.memory {
            st.check_memory(asked)?;
        }
        let blocks = st.input_blocks(&r.input)?;
        let side = st.side_inputs(side)?;
        if st.catalog.datasets.contains_key(&r.output) && !r.overwrite {
            return Err(Status::already_exists(format!(
                "output data set {} exists (pass --overwrite to replace it)",
                r.output
            )));
        }
        st.next_job += 1;
        let id = JobId((st.epoch << 32) | st.next_job);
        let token = self.cfg.secret.job_token(id.0);
        let record = JobRecord {
            id,
            request: Some(r.clone()),
            state: RecordState::Running,
            error: String::new(),
        };
        let mut job = Job::new(id, r, blocks, reducers, token);
        job.side = side;
        job.output_replication = replication.max(1);
        st.jobs.insert(id, job);
        st.records.insert(id, record);
        let records = st.records.clone();
        st.store.save_jobs(&records).map_err(status)?;
        // A job that cannot read its input fails before any task runs.
        st.fail_unreadable_inputs();
        st.settle_jobs();
        drop(st);
        self.notify.notify_waiters();
        Ok(Response::new(proto::SubmitReply { job: id.0 }))
    }

    async fn wait_job(&self, req: Request<proto::WaitJobRequest>) -> Reply<proto::JobStatus> {
        let r = req.into_inner();
        let deadline = Instant::now() + Duration::from_millis(r.wait_ms.min(60_000));
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let st = self.lock();
                let s = st.status(JobId(r.job)).ok_or_else(|| {
                    Status::not_found(format!("no job {} (epoch {})", r.job, st.epoch))
                })?;
                if s.state != "running" || Instant::now() >= deadline {
                    return Ok(Response::new(s));
                }
            }
            let _ = tokio::time::timeout_at(deadline.into(), notified).await;
        }
    }

    async fn kill_job(&self, req: Request<proto::KillJobRequest>) -> Reply<proto::JobStatus> {
        let r = req.into_inner();
        let mut st = self.lock();
        let epoch = st.epoch;
        let job = st
            .jobs
            .get_mut(&JobId(r.job))
            .ok_or_else(|| Status::not_found(format!("no job {} (epoch {epoch})", r.job)))?;
        if !job.is_running() {
            return Err(Status::failed_precondition(format!(
                "job {} is not running: it {}",
                r.job,
                job.state.name()
            )));
        }
        let who = if r.reason.is_empty() {
            "a user"
        } else {
            &r.reason
        };
        job.end(JobState::Killed(format!("killed by {who}")));
        // Ends it now: its attempts are killed, its outputs dropped, the
        // workers told to remove its files, its record written.
        st.settle_jobs();
        let status = st.status(JobId(r.job)).expect("the job exists");
        drop(st);
        self.notify.notify_waiters();
        Ok(Response::new(status))
    }

    async fn list_jobs(&self, _: Request<Empty>) -> Reply<proto::JobList> {
        let st = self.lock();
        let mut out = proto::JobList::default();
        for (id, r) in &st.records {
            let mut s = st.status(*id).expect("recorded");
            s.report_json.clear();
            out.jobs.push(s);
            out.descriptions.push(r.request.as_ref().map_or_else(
                || "(recorded by an older Sluice)".into(),
                JobRequest::describe,
            ));
        }
        Ok(Response::new(out))
    }

    async fn pools(&self, req: Request<proto::PoolsRequest>) -> Reply<proto::PoolList> {
        if req.into_inner().reload {
            let policy = self.cfg.scheduler.policy().map_err(status)?;
            self.lock().policy = policy;
            self.notify.notify_waiters();
        }
        Ok(Response::new(self.lock().pool_list()))
    }

    async fn info(&self, _: Request<Empty>) -> Reply<proto::ClusterInfo> {
        let st = self.lock();
        Ok(Response::new(proto::ClusterInfo {
            epoch: st.epoch,
            workers: st.workers.values().map(|w| w.info.clone()).collect(),
        }))
    }
}

impl Service {
    fn take_reply(&self, st: &mut State, worker: WorkerId) -> proto::HeartbeatReply {
        let mut tasks = st.assign(worker, &self.cfg.settings);
        for t in tasks.iter_mut().filter(|t| !t.output_block.is_empty()) {
            let job = JobId(t.task.unwrap_or_default().job);
            t.output_copies = st.output_copies(job, worker, &*self.cfg.placement);
        }
        let w = st.workers.get_mut(&worker).expect("checked by caller");
        proto::HeartbeatReply {
            reregister: false,
            tasks,
            kills: std::mem::take(&mut w.kills),
            delete_blocks: std::mem::take(&mut w.deletes),
            finished_jobs: std::mem::take(&mut w.finished_jobs),
            kept_blocks: std::mem::take(&mut w.kept_blocks),
        }
    }
}

fn is_empty(r: &proto::HeartbeatReply) -> bool {
    r.tasks.is_empty()
        && r.kills.is_empty()
        && r.delete_blocks.is_empty()
        && r.finished_jobs.is_empty()
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
        host: host_of(&w.data_addr),
        datacenter: w.datacenter.clone(),
        rack: w.rack.clone(),
    }
}

/// The host part of `host:port`.
pub fn host_of(addr: &str) -> String {
    addr.rsplit_once(':')
        .map_or(addr, |(h, _)| h)
        .trim_matches(['[', ']'])
        .to_owned()
}
