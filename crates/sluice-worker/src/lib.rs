//! A worker: stores blocks, serves the data plane, runs tasks.
//!
//! The worker registers with the coordinator and keeps one heartbeat
//! outstanding (the coordinator holds it until there is work); a task that
//! finishes is reported at once on a heartbeat of its own. Tasks run on OS
//! threads with the local engine's code, one per assigned slot. A map task
//! reads its block from this worker's disk, or streams it from a worker
//! holding it; its output stays here as one spill file whose trailer
//! indexes the partitions. A reduce task polls the coordinator for
//! finished map outputs, fetches its partition of each (a few fetches at a
//! time), reports fetch failures so the map is recomputed, then merges and
//! reduces. Killed tasks run on but their results are discarded; a
//! re-registration (new coordinator epoch, or this worker declared lost)
//! discards every running task's result.

pub mod cache;
pub mod metrics;
mod stream;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use sluice_api::TaskCounter;
use sluice_engine::tasks::{self, TaskOutput};
use sluice_formats::input::{MapSplit, Split};
use tokio::runtime::Handle;
use tokio::sync::Notify;

use sluice_proto::auth::Secret;
use sluice_proto::block::Unusable;
use sluice_proto::data::{self, Layout, Request as DataRequest};
use sluice_proto::ids::TaskKind;
use sluice_proto::proto::{self, TaskAssignment, TaskId, TaskReport};
use sluice_proto::{ClusterError, PROTOCOL_VERSION};
use sluice_request::{BuildContext, JobRequest, Registry};

type Result<T> = std::result::Result<T, ClusterError>;
use sluice_proto::signed::{connect, Rpc};

/// Concurrent shuffle fetches per reduce task (bounds in-flight bytes).
const PARALLEL_FETCHES: usize = 4;

/// Worker settings.
pub struct WorkerConfig {
    pub coordinator: String,
    pub listen: SocketAddr,
    /// Address other processes reach the data plane at [default: the
    /// bound address].
    pub advertise: Option<String>,
    pub data_dir: PathBuf,
    pub datacenter: String,
    pub rack: String,
    /// The host of its place `/datacenter/rack/host` (empty: its data
    /// address's host).
    pub host: String,
    pub slots: u32,
    /// Memory shared by this worker's tasks ([`sluice_proto::task_share`] each).
    pub memory: u64,
    pub secret: Secret,
    /// The job kinds this worker runs (the same as its coordinator's).
    pub jobs: Arc<Registry>,
    /// The block scanner's pace.
    pub scan: ScanSettings,
    /// How often the worker sends a block report (every block it holds).
    pub block_report: Duration,
    /// Bytes of blocks held in locked memory (0: no cache).
    pub cache_size: u64,
    pub cache_policy: cache::Policy,
    /// Where to serve `/metrics` (`None`: nowhere).
    pub http: Option<SocketAddr>,
    /// Bytes per second one re-replication copy sends (0: no limit).
    pub replication_rate: u64,
}

/// How the block scanner verifies stored blocks, as an HDFS DataNode's
/// volume scanner does: every block once per `period`, reading at most
/// `rate` bytes a second so that jobs keep the disk.
#[derive(Debug, Clone, Copy)]
pub struct ScanSettings {
    /// Bytes per second the scanner reads (0: no scanner).
    pub rate: u64,
    /// Time between the starts of two passes over every block.
    pub period: Duration,
}

impl Default for ScanSettings {
    fn default() -> Self {
        ScanSettings {
            rate: 16 << 20,
            period: Duration::from_secs(6 * 3600),
        }
    }
}

/// A job as this worker built it, shared by its tasks.
type Built = std::result::Result<(sluice_api::JobSpec, sluice_engine::EngineConfig), String>;

struct Shared {
    cfg: WorkerConfig,
    metrics: Arc<metrics::WorkerMetrics>,
    /// Where `/metrics` is served (empty: nowhere).
    http_addr: String,
    uid: String,
    data_addr: String,
    /// Damaged replicas found outside a task's report (the scanner, side
    /// inputs), sent on the next heartbeat.
    corrupt: Mutex<Vec<proto::CorruptReplica>>,
    /// Outcomes of re-replication copies, sent on the next heartbeat.
    replicated: Mutex<Vec<proto::ReplicateResult>>,
    /// When the last block report was sent.
    last_block_report: Mutex<Option<Instant>>,
    /// Jobs built here, by id: built once (side inputs copied once) by the
    /// first task and dropped when the job finishes.
    jobs: Mutex<HashMap<u64, Arc<OnceLock<Built>>>>,
    layout: Layout,
    rpc: Rpc,
    rt: Handle,
    session: Mutex<(u64, u64)>,
    cancelled: Mutex<HashSet<AttemptKey>>,
    /// Bytes each running reduce attempt has fetched, per source address
    /// (sent with heartbeats, so a killed attempt's fetches are known).
    fetched: Mutex<HashMap<AttemptKey, Received>>,
    /// Jobs the coordinator said have ended: a killed task of one that
    /// finishes late removes the job's files again.
    ended: Mutex<HashSet<u64>>,
    running: Arc<Mutex<HashSet<AttemptKey>>>,
    unsent: Mutex<Vec<TaskReport>>,
    reregister: Notify,
    cache: Arc<cache::BlockCache>,
    /// Blocks for the cache's loading thread.
    loader: Mutex<std::sync::mpsc::Sender<Pin>>,
}

/// One attempt of one task, as this worker tracks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct AttemptKey {
    job: u64,
    kind: u32,
    index: u32,
    attempt: u32,
}

/// Bytes received per source address, counted as they arrive, and the
/// switch that stops those fetches when the attempt is killed.
type Received = BTreeMap<String, Arc<data::FetchWatch>>;

fn task_id(k: &AttemptKey) -> TaskId {
    TaskId {
        job: k.job,
        kind: k.kind,
        index: k.index,
        attempt: k.attempt,
    }
}

/// Stops a killed attempt's shuffle fetches between two blocks.
fn stop_fetches(shared: &Shared, k: &AttemptKey) {
    if let Some(m) = lock(&shared.fetched).get(k) {
        for w in m.values() {
            w.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// Per-source byte counts as a report carries them.
fn remote_reads(m: &Received) -> Vec<proto::RemoteRead> {
    m.iter()
        .map(|(addr, n)| proto::RemoteRead {
            addr: addr.clone(),
            bytes: n.received.load(std::sync::atomic::Ordering::Relaxed),
        })
        .collect()
}

fn key(t: &TaskId) -> AttemptKey {
    AttemptKey {
        job: t.job,
        kind: t.kind,
        index: t.index,
        attempt: t.attempt,
    }
}

/// Runs a worker until the process is stopped.
pub async fn run(cfg: WorkerConfig) -> Result<()> {
    let share = sluice_proto::task_share(cfg.memory, cfg.slots);
    if share < 1 << 20 {
        return Err(ClusterError::Config(format!(
            "--memory {} shared by {} map and {} reduce slots gives each task {share} bytes; \
             a task needs at least 1 MiB",
            cfg.memory, cfg.slots, cfg.slots
        )));
    }
    cache::check_lockable(cfg.cache_size).map_err(ClusterError::Config)?;
    let layout = Layout::create(&cfg.data_dir)?;
    let added = sluice_proto::block::tidy(&layout)?;
    if added > 0 {
        tracing::info!("wrote checksum files for {added} blocks stored without one");
    }
    let uid = load_uid(&cfg.data_dir)?;
    let listener = TcpListener::bind(cfg.listen)
        .map_err(|e| ClusterError::net("listening on", &cfg.listen.to_string(), e))?;
    let bound = listener
        .local_addr()
        .map_err(|e| ClusterError::net("listening on", &cfg.listen.to_string(), e))?;
    let data_addr = cfg.advertise.clone().unwrap_or_else(|| bound.to_string());
    // Ten samples a second, the last hour kept, for benchmarks' per-node
    // utilization (data plane STATS).
    let sampler = sluice_proto::sample::Sampler::start(Duration::from_millis(100), 36_000);
    data::serve(listener, layout.clone(), cfg.secret.clone(), Some(sampler));
    let rpc = connect(&cfg.coordinator, &cfg.secret, Duration::from_secs(60)).await?;
    let (loader, to_load) = std::sync::mpsc::channel();
    let cache = Arc::new(cache::BlockCache::new(cfg.cache_size, cfg.cache_policy));
    let running = Arc::new(Mutex::new(HashSet::new()));
    let worker_metrics = Arc::new(metrics::WorkerMetrics::default());
    let http_addr = match cfg.http {
        Some(at) => {
            let (c, r) = (cache.clone(), running.clone());
            let now: metrics::Now = Arc::new(move || (c.stats(), lock(&r).len()));
            metrics::serve(at, worker_metrics.clone(), cfg.secret.clone(), now)
                .await
                .map_err(|e| ClusterError::net("serving /metrics on", &at.to_string(), e))?
                .to_string()
        }
        None => String::new(),
    };
    let shared = Arc::new(Shared {
        metrics: worker_metrics,
        http_addr,
        uid: uid.clone(),
        data_addr: data_addr.clone(),
        corrupt: Mutex::new(Vec::new()),
        replicated: Mutex::new(Vec::new()),
        last_block_report: Mutex::new(None),
        jobs: Mutex::new(HashMap::new()),
        layout,
        rpc,
        rt: Handle::current(),
        session: Mutex::new((0, 0)),
        cancelled: Mutex::new(HashSet::new()),
        fetched: Mutex::new(HashMap::new()),
        ended: Mutex::new(HashSet::new()),
        running,
        unsent: Mutex::new(Vec::new()),
        reregister: Notify::new(),
        cache,
        loader: Mutex::new(loader),
        cfg,
    });
    spawn_cache_loader(&shared, to_load);
    spawn_scanner(&shared);
    loop {
        register(&shared, &uid, &data_addr).await?;
        tracing::info!("worker {uid} registered, data plane on {data_addr}");
        heartbeats(&shared).await;
        // Fenced: nothing running now may report.
        let running: Vec<_> = lock(&shared.running).iter().copied().collect();
        lock(&shared.cancelled).extend(running);
        lock(&shared.unsent).clear();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The worker's persistent id, kept in its data directory.
fn load_uid(dir: &Path) -> Result<String> {
    let path = dir.join("uid");
    if let Ok(s) = std::fs::read_to_string(&path) {
        if data::check_id(s.trim()).is_ok() {
            return Ok(s.trim().to_owned());
        }
    }
    let uid = format!("w{:016x}", rand::random::<u64>());
    std::fs::write(&path, &uid).map_err(|e| ClusterError::io("writing", &path, e))?;
    Ok(uid)
}

async fn register(shared: &Shared, uid: &str, data_addr: &str) -> Result<()> {
    let dir = shared.layout.root.join("blocks");
    let req = proto::RegisterRequest {
        protocol_version: PROTOCOL_VERSION,
        data_addr: data_addr.to_owned(),
        datacenter: shared.cfg.datacenter.clone(),
        rack: shared.cfg.rack.clone(),
        slots: shared.cfg.slots,
        uid: uid.to_owned(),
        pid: std::process::id(),
        blocks: Vec::new(),
        memory: shared.cfg.memory,
        http_addr: shared.http_addr.clone(),
        host: shared.cfg.host.clone(),
        free_bytes: free_bytes(&shared.cfg.data_dir),
    };
    let mut tries = 0;
    loop {
        // A fresh listing each try: blocks may arrive meanwhile.
        let mut req = req.clone();
        req.blocks =
            (shared.layout.block_ids()).map_err(|e| ClusterError::io("listing", &dir, e))?;
        *lock(&shared.last_block_report) = Some(Instant::now());
        match shared.rpc.clone().register(req).await {
            Ok(r) => {
                let r = r.into_inner();
                *lock(&shared.session) = (r.worker_id, r.epoch);
                // A new registration knows nothing of this cache yet.
                shared.cache.unreported();
                remove_other_jobs_files(shared, &r.running_jobs);
                return Ok(());
            }
            Err(s)
                if s.code() == tonic::Code::Unauthenticated
                    || s.code() == tonic::Code::FailedPrecondition =>
            {
                return Err(ClusterError::Auth(format!(
                    "the coordinator refused this worker: {}",
                    s.message()
                )))
            }
            Err(_) if tries < 600 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(s) => return Err(s.into()),
        }
    }
}

/// Starts the block scanner (unless its rate is 0): a thread that reads
/// every stored block against its checksum file once per period, at most
/// at the configured rate, and queues damaged ones for the next heartbeat.
fn spawn_scanner(shared: &Arc<Shared>) {
    let scan = shared.cfg.scan;
    if scan.rate == 0 {
        return;
    }
    let shared = shared.clone();
    std::thread::spawn(move || loop {
        let pass = Instant::now();
        let mut reported = HashSet::new();
        for id in shared.layout.block_ids().unwrap_or_default() {
            let Ok(len) = std::fs::metadata(shared.layout.block(&id)).map(|m| m.len()) else {
                continue;
            };
            let t = Instant::now();
            match sluice_proto::block::verify(&shared.layout, &id, None) {
                // Deleted while scanned (a job's end, a removed data set) is no damage.
                Err(Unusable::Damaged(d))
                    if shared.layout.block(&id).exists() && reported.insert(id.clone()) =>
                {
                    let c = shared.own_damage(&id, &format!("{d} (block scanner)"));
                    lock(&shared.corrupt).push(c);
                }
                Err(Unusable::Io(e)) => tracing::warn!("block scanner: block {id}: {e}"),
                _ => {}
            }
            // Pace: `len` bytes may take no less than len / rate seconds.
            let due = Duration::from_secs_f64(len as f64 / scan.rate as f64);
            if let Some(rest) = due.checked_sub(t.elapsed()) {
                std::thread::sleep(rest);
            }
        }
        if let Some(rest) = scan.period.checked_sub(pass.elapsed()) {
            std::thread::sleep(rest);
        }
    });
}

/// Heartbeats until the coordinator asks for a re-registration.
async fn heartbeats(shared: &Arc<Shared>) {
    loop {
        let reports = std::mem::take(&mut *lock(&shared.unsent));
        let call = beat(shared, reports);
        tokio::select! {
            again = call => if again { return },
            () = shared.reregister.notified() => return,
        }
    }
}

/// One heartbeat carrying `reports`; returns whether to re-register.
async fn beat(shared: &Arc<Shared>, reports: Vec<TaskReport>) -> bool {
    let (worker_id, epoch) = *lock(&shared.session);
    let corrupt = std::mem::take(&mut *lock(&shared.corrupt));
    let replicated = std::mem::take(&mut *lock(&shared.replicated));
    let due =
        lock(&shared.last_block_report).is_none_or(|t| t.elapsed() >= shared.cfg.block_report);
    // No report from a listing that failed (it would make blocks look
    // missing); the next heartbeat tries again.
    let listed = if due {
        shared.layout.block_ids().ok()
    } else {
        None
    };
    let block_report = listed.is_some();
    let cache = shared.cache.report(block_report);
    let cache_sent = cache.is_some();
    let req = proto::HeartbeatRequest {
        worker_id,
        epoch,
        reports: reports.clone(),
        corrupt: corrupt.clone(),
        block_report,
        blocks: listed.unwrap_or_default(),
        cache,
        replicated: replicated.clone(),
        free_bytes: free_bytes(&shared.cfg.data_dir),
        progress: lock(&shared.fetched)
            .iter()
            .map(|(k, m)| proto::TaskProgress {
                task: Some(task_id(k)),
                fetched: remote_reads(m),
            })
            .collect(),
    };
    let t0 = Instant::now();
    let answer = shared.rpc.clone().heartbeat(req).await;
    shared
        .metrics
        .heartbeat(t0.elapsed().as_secs_f64(), answer.is_ok());
    match answer {
        Ok(r) => {
            if block_report {
                *lock(&shared.last_block_report) = Some(Instant::now());
            }
            handle_reply(shared, r.into_inner())
        }
        Err(e) => {
            tracing::warn!("heartbeat failed: {}", e.message());
            lock(&shared.unsent).extend(reports);
            lock(&shared.corrupt).extend(corrupt);
            lock(&shared.replicated).extend(replicated);
            if cache_sent {
                shared.cache.unreported();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            false
        }
    }
}

fn handle_reply(shared: &Arc<Shared>, r: proto::HeartbeatReply) -> bool {
    if r.reregister {
        shared.reregister.notify_one();
        return true;
    }
    for k in &r.kills {
        lock(&shared.cancelled).insert(key(k));
        stop_fetches(shared, &key(k));
    }
    for b in &r.delete_blocks {
        shared.cache.evict(b);
        shared.layout.remove_block(b);
    }
    if let Some(pins) = r.pins {
        pin_blocks(shared, pins.blocks);
    }
    for c in r.replicate {
        spawn_copy(shared, c);
    }
    for j in &r.finished_jobs {
        let running: Vec<_> = lock(&shared.running)
            .iter()
            .filter(|k| k.job == *j)
            .copied()
            .collect();
        lock(&shared.cancelled).extend(running.iter().copied());
        for k in &running {
            stop_fetches(shared, k);
        }
        lock(&shared.jobs).remove(j);
        remember_ended(shared, *j);
        sweep_outputs(shared, *j, &r.kept_blocks);
        remove_job_files(shared, *j);
    }
    for t in r.tasks {
        let shared = shared.clone();
        let Some(id) = t.task else { continue };
        lock(&shared.running).insert(key(&id));
        // Named for debuggers and `ps -T`: `task-` and the task's name
        // (the kernel keeps 15 bytes).
        let kind = TaskKind::from_wire(id.kind).map_or('?', TaskKind::letter);
        let name = format!("task-{kind}{}-{}", id.index, id.job);
        let spawned = std::thread::Builder::new().name(name).spawn(move || {
            let mut report = run_task(&shared, &t);
            lock(&shared.running).remove(&key(&id));
            lock(&shared.fetched).remove(&key(&id));
            let cancelled = lock(&shared.cancelled).remove(&key(&id));
            let kind = match TaskKind::from_wire(id.kind) {
                Some(TaskKind::Reduce) => "reduce",
                _ => "map",
            };
            shared.metrics.task(kind, &report, cancelled);
            if cancelled {
                discard(&shared, &report);
                if lock(&shared.ended).contains(&id.job) {
                    // Its map output or scratch files may have appeared
                    // after the job's files were removed.
                    remove_job_files(&shared, id.job);
                }
                if report.output.as_ref().is_none_or(|o| o.replicas.is_empty()) {
                    return;
                }
                // Its output has copies on other workers: reported as
                // killed, the coordinator has them deleted.
                report.ok = false;
                report.error = "killed".into();
            }
            let s2 = shared.clone();
            shared.rt.spawn(async move {
                beat(&s2, vec![report]).await;
            });
        });
        if let Err(e) = spawned {
            tracing::error!("cannot start a task thread: {e}");
        }
    }
    false
}

/// Takes the blocks cache directives pin here now: unpinned ones are
/// evicted, and those not cached yet go to the cache's loading thread.
fn pin_blocks(shared: &Arc<Shared>, blocks: Vec<proto::BlockInfo>) {
    let todo: HashSet<String> = shared
        .cache
        .set_pins(blocks.iter().map(|b| b.id.clone()).collect())
        .into_iter()
        .collect();
    let loader = lock(&shared.loader);
    for b in blocks.into_iter().filter(|b| todo.contains(&b.id)) {
        let _ = loader.send(Pin(b));
    }
}

/// Reads stored block `b` into `buf` and checks every chunk against its
/// checksum file (itself checked against the catalog's length and CRC):
/// what the cache admits is verified. One read into the cache's memory
/// and one CRC pass over it, not a checked reader's copies.
fn fill_block(
    shared: &Shared,
    b: &proto::BlockInfo,
    buf: &mut [u8],
) -> std::result::Result<(), Unusable> {
    use std::io::Read;
    let sums = sluice_proto::block::open_checked(&shared.layout, &b.id, b.len, b.crc)?;
    let path = shared.layout.block(&b.id);
    std::fs::File::open(&path)
        .and_then(|mut f| f.read_exact(buf))
        .map_err(Unusable::Io)?;
    let got = sluice_formats::chunked::ChunkSums::of(buf);
    let bad = got.crcs.iter().zip(&sums.crcs).position(|(g, w)| g != w);
    match bad {
        None if got.crcs.len() == sums.crcs.len() => Ok(()),
        None => Err(Unusable::Damaged(
            sluice_formats::chunked::Damage::Checksums(format!(
                "{} chunks for {} bytes",
                sums.crcs.len(),
                b.len
            )),
        )),
        Some(index) => Err(Unusable::Damaged(sluice_formats::chunked::Damage::Chunk {
            index: index as u64,
            offset: index as u64 * u64::from(sums.chunk),
            expected: sums.crcs[index],
            found: got.crcs[index],
        })),
    }
}

/// A block the cache could not load: a damaged replica is reported (and
/// never cached); memory that cannot be locked is logged.
fn cache_load_failed(shared: &Shared, id: &str, e: cache::LoadError<Unusable>) {
    match e {
        cache::LoadError::Fill(Unusable::Damaged(d)) => {
            lock(&shared.corrupt).push(shared.own_damage(id, &d.to_string()));
        }
        cache::LoadError::Fill(Unusable::Io(e)) => {
            tracing::warn!("block {id} not cached: reading it: {e}");
        }
        cache::LoadError::Memory(m) => tracing::warn!("block {id} not cached: {m}"),
    }
}

/// Records that job `job` has ended, keeping the most recent
/// [`ENDED_KEPT`] (a long-lived worker sees millions of jobs).
fn remember_ended(shared: &Shared, job: u64) {
    let mut ended = lock(&shared.ended);
    if ended.len() >= ENDED_KEPT {
        // Ids grow with time: the smallest are the oldest.
        let mut ids: Vec<u64> = ended.iter().copied().collect();
        ids.sort_unstable();
        for old in &ids[..ids.len() / 2] {
            ended.remove(old);
        }
    }
    ended.insert(job);
}

/// Ended jobs a worker remembers.
const ENDED_KEPT: usize = 4096;

/// Removes the map outputs and scratch files of every job but `running`.
fn remove_other_jobs_files(shared: &Shared, running: &[u64]) {
    for dir in ["shuffle", "work"] {
        let Ok(rd) = std::fs::read_dir(shared.layout.root.join(dir)) else {
            continue;
        };
        for e in rd.flatten() {
            let job = e.file_name().to_string_lossy().parse::<u64>();
            if job.is_ok_and(|j| !running.contains(&j)) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

/// Removes an ended job's map outputs and scratch files.
fn remove_job_files(shared: &Shared, job: u64) {
    let _ = std::fs::remove_dir_all(shared.layout.shuffle_dir(job));
    let _ = std::fs::remove_dir_all(shared.layout.work_dir(job));
}

/// Deletes the output blocks of finished job `job` here that its
/// committed data set does not hold: copies of attempts that lost, or
/// whose writer died before reporting them.
fn sweep_outputs(shared: &Shared, job: u64, kept: &[String]) {
    for id in shared.layout.block_ids().unwrap_or_default() {
        let of_job =
            sluice_proto::ids::output_block_job(&id) == Some(sluice_proto::ids::JobId(job));
        if of_job && !kept.contains(&id) {
            shared.layout.remove_block(&id);
        }
    }
}

fn discard(shared: &Shared, report: &TaskReport) {
    if let Some(out) = &report.output {
        shared.layout.remove_block(&out.id);
    }
}

fn run_task(shared: &Shared, a: &TaskAssignment) -> TaskReport {
    let t0 = Instant::now();
    let id = a.task.unwrap_or_default();
    let mut report = TaskReport {
        task: Some(id),
        ..TaskReport::default()
    };
    let res = match TaskKind::from_wire(id.kind) {
        Some(TaskKind::Map) => run_map(shared, a, &mut report),
        Some(TaskKind::Reduce) => run_reduce(shared, a, &mut report),
        None => Err(ClusterError::Config(format!(
            "unknown task kind {}",
            id.kind
        ))),
    };
    match res {
        Ok(out) => {
            report.ok = true;
            for t in TaskCounter::ALL {
                let v = out.counters.get(t);
                if v > 0 {
                    report.counters.insert(t.name().to_owned(), v);
                }
            }
            for (g, n, v) in out.counters.user_counters() {
                report.user_counters.insert(format!("{g}.{n}"), v);
            }
            report.output_records = out.output_records;
            report.output_bytes = out.output_bytes;
            report.shuffle_bytes = out.counters.get(TaskCounter::ShuffleBytes);
        }
        Err(e) => {
            report.ok = false;
            report.error = e.to_string();
        }
    }
    report.seconds = t0.elapsed().as_secs_f64();
    report
}

/// The job and engine settings for one task: the job is built by the
/// first of its tasks to run here (the others wait for it); a failed build
/// is forgotten so that the next attempt tries again.
fn task_job(
    shared: &Shared,
    a: &TaskAssignment,
) -> Result<(sluice_api::JobSpec, sluice_engine::EngineConfig)> {
    let job = a.task.unwrap_or_default().job;
    if lock(&shared.ended).contains(&job) {
        return Err(ClusterError::Remote(format!("job {job} has ended")));
    }
    let cell = lock(&shared.jobs).entry(job).or_default().clone();
    if lock(&shared.ended).contains(&job) {
        // It ended between the check above and the insert.
        lock(&shared.jobs).remove(&job);
        return Err(ClusterError::Remote(format!("job {job} has ended")));
    }
    let built = cell.get_or_init(|| build_job(shared, a));
    let (spec, mut cfg) = match built {
        Ok(b) => b.clone(),
        Err(e) => {
            let mut jobs = lock(&shared.jobs);
            if jobs.get(&job).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
                jobs.remove(&job);
            }
            return Err(ClusterError::Config(e.clone()));
        }
    };
    cfg.threads = 1;
    // The job's --memory is a per-task cap; the worker's share bounds it.
    cfg.memory = cfg.memory.min(sluice_proto::task_share(
        shared.cfg.memory,
        shared.cfg.slots,
    ));
    cfg.reducers = a.reducers.max(1);
    cfg.overwrite = true;
    cfg.hardware = None;
    cfg.spill_dir = None;
    cfg.split_size = None;
    Ok((spec, cfg))
}

fn build_job(shared: &Shared, a: &TaskAssignment) -> Built {
    let req = JobRequest::decode(&a.request).map_err(|e| e.to_string())?;
    let side = side_files(shared, a).map_err(|e| e.to_string())?;
    let ctx = BuildContext {
        side: Some(&side),
        splits: None,
        cluster: true,
    };
    let (built, cfg) = shared
        .cfg
        .jobs
        .build(&req, &ctx)
        .map_err(|e| e.to_string())?;
    Ok((built.spec, cfg))
}

/// Local files of the job's side inputs: the block store's replicas,
/// verified whole against their checksums, else copies fetched into the
/// job's work directory (renamed into place whole, and removed with it
/// when the job finishes). Damaged replicas met on the way are reported
/// on the next heartbeat.
fn side_files(shared: &Shared, a: &TaskAssignment) -> Result<Vec<Vec<PathBuf>>> {
    let dir = shared
        .layout
        .work_dir(a.task.unwrap_or_default().job)
        .join("side");
    let mut out = Vec::with_capacity(a.side.len());
    let mut corrupt = Vec::new();
    for s in &a.side {
        let mut files = Vec::with_capacity(s.blocks.len());
        for sb in &s.blocks {
            let b = sb.block.clone().unwrap_or_default();
            data::check_id(&b.id)?;
            let local = shared.layout.block(&b.id);
            let copy = dir.join(&b.id);
            let mine = b.replicas.contains(&shared.uid);
            let intact = mine
                && match sluice_proto::block::verify(&shared.layout, &b.id, Some((b.len, b.crc))) {
                    Ok(()) => true,
                    Err(Unusable::Damaged(d)) => {
                        corrupt.push(shared.own_damage(&b.id, &d.to_string()));
                        false
                    }
                    Err(Unusable::Io(e)) => return Err(ClusterError::io("reading", &local, e)),
                };
            if !intact && !copy.exists() {
                std::fs::create_dir_all(&dir).map_err(|e| ClusterError::io("creating", &dir, e))?;
                let part = dir.join(format!("{}.part", b.id));
                let others: Vec<String> = sb
                    .sources
                    .iter()
                    .filter(|a| **a != shared.data_addr)
                    .cloned()
                    .collect();
                let fetched = fetch_block(shared, &b, &others, &part, &mut corrupt);
                lock(&shared.corrupt).append(&mut corrupt);
                fetched.map_err(|e| {
                    ClusterError::Remote(format!(
                        "copying block {} of side data set {}: {e}",
                        b.id, s.dataset
                    ))
                })?;
                std::fs::rename(&part, &copy).map_err(|e| ClusterError::io("storing", &copy, e))?;
            }
            files.push(if intact { local } else { copy });
        }
        out.push(files);
    }
    lock(&shared.corrupt).append(&mut corrupt);
    Ok(out)
}

impl Shared {
    /// A damaged replica of block `id` on this worker.
    fn own_damage(&self, id: &str, detail: &str) -> proto::CorruptReplica {
        tracing::warn!("block {id}: damaged replica here: {detail}");
        proto::CorruptReplica {
            block: id.to_owned(),
            worker: self.uid.clone(),
            addr: self.data_addr.clone(),
            detail: detail.to_owned(),
            at_ms: sluice_proto::now_ms(),
        }
    }
}

fn run_map(shared: &Shared, a: &TaskAssignment, report: &mut TaskReport) -> Result<TaskOutput> {
    let id = a.task.unwrap_or_default();
    let (spec, cfg) = task_job(shared, a)?;
    report.memory_bytes = cfg.memory;
    let work = shared.layout.work_dir(id.job);
    std::fs::create_dir_all(&work).map_err(|e| ClusterError::io("creating", &work, e))?;
    let inputs = map_inputs(shared, a, report)?;
    let index = id.index as usize;
    let split = if let Some(e) = &a.external {
        MapSplit::one(index, external_split(index, e)?)
    } else if inputs.is_empty() {
        // No block: a synthetic map, which makes its own records.
        MapSplit::one(index, Split::synthetic(index))
    } else {
        let parts = inputs.iter().map(|i| i.split.clone()).collect();
        MapSplit { index, parts }
    };
    report.input_bytes = split.len();
    report.cache_hit =
        !inputs.is_empty() && inputs.iter().all(|i| matches!(i.from, MapInput::Cached));
    let res = if a.reducers == 0 {
        let dir = work.join(format!("m{}-a{}", id.index, id.attempt));
        let o = tasks::map_only_task(&spec, &cfg, &split, &dir).map_err(engine_failure);
        let stored = o.and_then(|o| {
            let file = dir.join(format!("part-m-{:05}", id.index));
            report.output = Some(store_output(shared, a, &file)?);
            Ok(o)
        });
        let _ = std::fs::remove_dir_all(&dir);
        stored
    } else {
        let dir = shared.layout.shuffle_dir(id.job);
        std::fs::create_dir_all(&dir).map_err(|e| ClusterError::io("creating", &dir, e))?;
        let out = shared.layout.map_output(id.job, id.index, id.attempt);
        let o = tasks::map_task(&spec, &cfg, &split, &out).map_err(engine_failure);
        o.and_then(|o| {
            report.partition_bytes = partition_bytes(&out)?;
            Ok(o)
        })
    };
    // Damage met while streaming a local replica is that replica's fault.
    if let Some((path, d)) = res.as_ref().err().and_then(damage_of) {
        let local = inputs
            .iter()
            .filter(|i| matches!(i.from, MapInput::Local | MapInput::Admitted));
        for i in local.filter(|i| i.split.file.path == path) {
            report.corrupt.push(shared.own_damage(&i.block.id, &d));
        }
    }
    for i in &inputs {
        if let MapInput::Streamed(seen) = &i.from {
            let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
            report.corrupt.append(&mut seen.corrupt);
            report.remote_reads.append(&mut seen.reads);
        }
    }
    drop(inputs);
    res
}

/// A map's split of a file in an external store (HDFS, S3): the file
/// looked up in its store, read in ranges as the engine asks (HDFS
/// packets are checksum-verified by the client as they arrive).
fn external_split(index: usize, e: &proto::ExternalSplit) -> Result<Split> {
    let store = |err: sluice_storage::StorageError| ClusterError::Remote(err.to_string());
    let file = sluice_storage::open_file(&e.url).map_err(store)?;
    if e.start > e.end || e.end > file.len {
        return Err(ClusterError::Remote(format!(
            "{} is not the file the job planned (bytes {}..{} of it; it has {})",
            e.url, e.start, e.end, file.len
        )));
    }
    Ok(Split {
        index,
        file: std::sync::Arc::new(file),
        start: e.start,
        end: e.end,
    })
}

/// The bytes of each partition of the map output at `path` (its trailer).
fn partition_bytes(path: &Path) -> Result<Vec<u64>> {
    let spill =
        sluice_formats::spill::SpillFile::open(path).map_err(|e| engine_failure(e.into()))?;
    Ok(spill.segments().iter().map(|s| s.len).collect())
}

/// Bytes the file system holding `dir` still gives an unprivileged
/// writer (0 when it cannot be asked).
fn free_bytes(dir: &Path) -> u64 {
    rustix::fs::statvfs(dir).map_or(0, |s| s.f_bavail.saturating_mul(s.f_frsize))
}

/// One block a map reads, and from where.
struct BlockInput {
    block: proto::BlockInfo,
    split: Split,
    from: MapInput,
}

/// Where a map's block is read from.
enum MapInput {
    /// This worker's replica of the block.
    Local,
    /// This worker's replica of the block, from its cache.
    Cached,
    /// This worker's replica of the block, read through its checksums by
    /// this map, whose reader fills the cache as it goes (admitted on
    /// first read).
    Admitted,
    /// Another worker's replica, streamed and checked chunk by chunk;
    /// what its reads found goes into the task's report.
    Streamed(Arc<Mutex<stream::Seen>>),
}

/// The damage a task's error reports about its input, and the file it
/// was met in, if any.
fn damage_of(e: &ClusterError) -> Option<(PathBuf, String)> {
    match e {
        ClusterError::Task {
            damaged_input: Some(d),
            ..
        } => Some((d.path.clone(), d.damage.clone())),
        _ => None,
    }
}

/// The engine's failure of a task as the cluster reports it: its message,
/// and the damage it met in an input file when that was the cause.
fn engine_failure(e: sluice_engine::EngineError) -> ClusterError {
    let damaged_input = match &e {
        sluice_engine::EngineError::Format(sluice_formats::FormatError::Damaged {
            path,
            damage,
        }) => Some(sluice_proto::InputDamage {
            path: path.clone(),
            damage: damage.to_string(),
        }),
        _ => None,
    };
    ClusterError::Task {
        msg: e.to_string(),
        damaged_input,
    }
}

/// The blocks of a map's input (none for a synthetic map), each opened as
/// [`map_input`] does.
fn map_inputs(
    shared: &Shared,
    a: &TaskAssignment,
    report: &mut TaskReport,
) -> Result<Vec<BlockInput>> {
    let mut inputs = Vec::with_capacity(a.inputs.len());
    for source in &a.inputs {
        let block = source.block.clone().unwrap_or_default();
        let (split, from) = map_input(shared, a, &block, &source.sources, report)?;
        inputs.push(BlockInput { block, split, from });
    }
    Ok(inputs)
}

/// The split of a map over `block`: this worker's replica, read through
/// its chunk checksums, or, when it has none or it is damaged, another
/// holder's among `sources` streamed with no local copy, each chunk
/// checked before the map reads it ([`stream`]).
fn map_input(
    shared: &Shared,
    a: &TaskAssignment,
    block: &proto::BlockInfo,
    sources: &[String],
    report: &mut TaskReport,
) -> Result<(Split, MapInput)> {
    let id = a.task.unwrap_or_default();
    data::check_id(&block.id)?;
    let split =
        |path: PathBuf, sums| Split::whole_checked(id.index as usize, path, block.len, Some(sums));
    if block.replicas.contains(&shared.uid) {
        if let Some(s) = cached_split(shared, block, id.index as usize, !a.no_admit) {
            return Ok((s, MapInput::Cached));
        }
        let path = shared.layout.block(&block.id);
        let admitted = if a.no_admit {
            None
        } else {
            admitted_split(shared, block, id.index as usize)
        };
        let local = match admitted {
            Some(admitted) => admitted.map(|s| (s, MapInput::Admitted)),
            None => {
                sluice_proto::block::open_checked(&shared.layout, &block.id, block.len, block.crc)
                    .map(|sums| (split(path.clone(), sums), MapInput::Local))
            }
        };
        match local {
            Ok(found) => return Ok(found),
            Err(Unusable::Damaged(d)) => report
                .corrupt
                .push(shared.own_damage(&block.id, &d.to_string())),
            // Not the replica's fault: this attempt fails, nothing blamed.
            Err(Unusable::Io(e)) => return Err(ClusterError::io("reading", &path, e)),
        }
    }
    let (split, seen) =
        stream::Streamed::split(id.index as usize, &shared.cfg.secret, block, sources);
    Ok((split, MapInput::Streamed(seen)))
}

/// The split of a map over this worker's replica of `block` from its
/// cache, on a hit. On a miss the map may admit it ([`admitted_split`]).
fn cached_split(
    shared: &Shared,
    block: &proto::BlockInfo,
    index: usize,
    admitting: bool,
) -> Option<Split> {
    let bytes = shared.cache.lookup(&block.id, admitting)?;
    Some(resident_split(shared, block, index, bytes))
}

fn resident_split(
    shared: &Shared,
    block: &proto::BlockInfo,
    index: usize,
    bytes: Arc<cache::Locked>,
) -> Split {
    let path = shared.layout.block(&block.id);
    Split::resident(index, path, sluice_formats::input::Resident(bytes))
}

/// Admission on first read, by the map that missed: when the policy makes
/// room, the map reads its replica straight into the cache's memory for
/// it ([`cache::Filling`]), a window of chunks at a time, verifying each
/// chunk there and scanning its records in place as they arrive; the
/// block is cached once all of it has arrived. So admission costs
/// locking the memory, and nothing else: no copy, no second read, no
/// second checksum pass, and the map does not wait for the whole block
/// before it starts. A damaged chunk fails the map as it would with no
/// cache, and a block that did not arrive whole is never cached. `None`: not admitted (no
/// room, a concurrent load, memory that cannot be mapped); the map reads
/// the replica from disk as it would with no cache.
fn admitted_split(
    shared: &Shared,
    block: &proto::BlockInfo,
    index: usize,
) -> Option<std::result::Result<Split, Unusable>> {
    let filling = match shared.cache.reserve(&block.id, block.len) {
        Ok(Some(f)) => f,
        Ok(None) => return None,
        Err(m) => {
            tracing::warn!("block {} not cached: {m}", block.id);
            return None;
        }
    };
    let checked =
        sluice_proto::block::open_checked(&shared.layout, &block.id, block.len, block.crc);
    Some(checked.map(|sums| {
        let path = shared.layout.block(&block.id);
        let fill = sluice_formats::input::FillTo(Arc::new(filling));
        Split::whole_filling(index, path, block.len, sums, fill)
    }))
}

/// A block a directive pins here, for the cache's loading thread.
struct Pin(proto::BlockInfo);

/// Loads pinned blocks into the cache, one at a time, off the tasks'
/// threads (blocks admitted on first read are loaded by their maps).
fn spawn_cache_loader(shared: &Arc<Shared>, work: std::sync::mpsc::Receiver<Pin>) {
    let shared = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("cache-loader".into())
        .spawn(move || {
            for Pin(b) in work {
                let fill = |buf: &mut [u8]| fill_block(&shared, &b, buf);
                let loaded = shared.cache.load_pinned(&b.id, b.len, fill).map(|ok| {
                    if !ok {
                        tracing::warn!("block {}: no room in the cache to pin it", b.id);
                    }
                });
                if let Err(e) = loaded {
                    cache_load_failed(&shared, &b.id, e);
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start the cache loading thread: {e}");
    }
}

/// Copies block `b` from the first of `sources` with an intact replica to
/// `to`; returns its chunk checksums, computed as it arrived. Replicas
/// found damaged on the way are added to `corrupt`.
fn fetch_block(
    shared: &Shared,
    b: &proto::BlockInfo,
    sources: &[String],
    to: &Path,
    corrupt: &mut Vec<proto::CorruptReplica>,
) -> Result<(sluice_formats::chunked::ChunkSums, String)> {
    let mut last = ClusterError::Remote(format!("block {} has no live replica", b.id));
    for src in sources {
        let f = std::fs::File::create(to).map_err(|e| ClusterError::io("creating", to, e))?;
        let mut w =
            sluice_proto::block::Hashing::new(std::io::BufWriter::with_capacity(256 << 10, f));
        match data::read_block(src, &shared.cfg.secret, &b.id, b.len, b.crc, &mut w) {
            Ok(_) => {
                use std::io::Write;
                w.flush().map_err(|e| ClusterError::io("writing", to, e))?;
                return Ok((w.hasher.finish(), src.clone()));
            }
            Err(e) => {
                if let ClusterError::Damaged { damage, .. } = &e {
                    tracing::warn!("block {}: damaged replica on {src}: {damage}", b.id);
                    corrupt.push(proto::CorruptReplica {
                        block: b.id.clone(),
                        worker: String::new(),
                        addr: src.clone(),
                        detail: damage.clone(),
                        at_ms: sluice_proto::now_ms(),
                    });
                }
                last = e;
            }
        }
    }
    let _ = std::fs::remove_file(to);
    Err(last)
}

/// Sends a copy of a block this worker holds to another worker
/// (re-replication), on a thread of its own: the replica is verified
/// against its checksums first (damage is reported as such, and the copy
/// fails), then streamed at most at `--replication-rate`; the target
/// checks the length and CRC as for any write. The outcome goes with the
/// next heartbeat.
fn spawn_copy(shared: &Arc<Shared>, c: proto::ReplicateCommand) {
    let (Some(b), Some(target)) = (c.block, c.target) else {
        return;
    };
    let shared = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("replicate".into())
        .spawn(move || {
            let outcome = copy_block(&shared, &b, &target.data_addr);
            if let Err(e) = &outcome {
                tracing::warn!("copying block {} to {}: {e}", b.id, target.data_addr);
            }
            lock(&shared.replicated).push(proto::ReplicateResult {
                block: b.id.clone(),
                target: target.uid.clone(),
                ok: outcome.is_ok(),
                error: outcome.err().map_or_else(String::new, |e| e.to_string()),
            });
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start a copy thread: {e}");
    }
}

fn copy_block(shared: &Shared, b: &proto::BlockInfo, to: &str) -> Result<()> {
    data::check_id(&b.id)?;
    match sluice_proto::block::verify(&shared.layout, &b.id, Some((b.len, b.crc))) {
        Ok(()) => {}
        Err(Unusable::Damaged(d)) => {
            let c = shared.own_damage(&b.id, &format!("{d} (sending a copy)"));
            lock(&shared.corrupt).push(c);
            return Err(ClusterError::Damaged {
                block: b.id.clone(),
                holder: shared.data_addr.clone(),
                damage: d.to_string(),
            });
        }
        Err(Unusable::Io(e)) => {
            return Err(ClusterError::io("reading", &shared.layout.block(&b.id), e))
        }
    }
    let path = shared.layout.block(&b.id);
    let file = std::fs::File::open(&path).map_err(|e| ClusterError::io("reading", &path, e))?;
    let mut paced = Paced::new(file, shared.cfg.replication_rate);
    data::write_block(to, &shared.cfg.secret, &b.id, &mut paced, b.len, b.crc)
}

/// A reader that delivers at most `rate` bytes a second (0: no limit),
/// sleeping as it goes, so re-replication leaves the disk and network to
/// jobs.
struct Paced<R> {
    inner: R,
    rate: u64,
    start: Instant,
    read: u64,
}

impl<R> Paced<R> {
    fn new(inner: R, rate: u64) -> Self {
        Paced {
            inner,
            rate,
            start: Instant::now(),
            read: 0,
        }
    }
}

impl<R: std::io::Read> std::io::Read for Paced<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.rate > 0 {
            let due = Duration::from_secs_f64(self.read as f64 / self.rate as f64);
            if let Some(wait) = due.checked_sub(self.start.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// Moves a task's output file into the block store as its output block,
/// then copies it to the workers the assignment names. A copy that fails
/// leaves the block with fewer replicas (as an HDFS pipeline carries on
/// without a failed node); the report lists the workers that have one.
fn store_output(shared: &Shared, a: &TaskAssignment, file: &Path) -> Result<proto::BlockInfo> {
    let id = &a.output_block;
    data::check_id(id)?;
    let (len, crc) = sluice_proto::block::adopt(&shared.layout, id, file)?;
    let to = shared.layout.block(id);
    let mut replicas = Vec::new();
    for w in &a.output_copies {
        let copied = std::fs::File::open(&to)
            .map_err(|e| ClusterError::io("reading", &to, e))
            .and_then(|mut f| {
                data::write_block(&w.data_addr, &shared.cfg.secret, id, &mut f, len, crc)
            });
        match copied {
            Ok(()) => replicas.push(w.uid.clone()),
            Err(e) => tracing::warn!("output block {id}: no copy on {}: {e}", w.data_addr),
        }
    }
    Ok(proto::BlockInfo {
        id: id.to_owned(),
        len,
        crc,
        replicas,
        corrupt: Vec::new(),
    })
}

fn run_reduce(shared: &Shared, a: &TaskAssignment, report: &mut TaskReport) -> Result<TaskOutput> {
    let id = a.task.unwrap_or_default();
    let (spec, cfg) = task_job(shared, a)?;
    report.memory_bytes = cfg.memory;
    let dir = shared
        .layout
        .work_dir(id.job)
        .join(format!("r{}-a{}", id.index, id.attempt));
    let inputs = dir.join("in");
    std::fs::create_dir_all(&inputs).map_err(|e| ClusterError::io("creating", &inputs, e))?;
    let t = Instant::now();
    let fetched = shuffle(shared, a, &inputs);
    if let Some(m) = lock(&shared.fetched).get(&key(&id)) {
        report.remote_reads = remote_reads(m);
    }
    let fetched = fetched?;
    report.fetch_seconds = t.elapsed().as_secs_f64();
    let out_dir = dir.join("out");
    let o = tasks::reduce_task(&spec, &cfg, id.index, fetched, &out_dir).map_err(engine_failure)?;
    let file = out_dir.join(format!("part-r-{:05}", id.index));
    report.output = Some(store_output(shared, a, &file)?);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(o)
}

/// Fetches this reducer's partition of every map output into `dir`.
fn shuffle(shared: &Shared, a: &TaskAssignment, dir: &Path) -> Result<Vec<PathBuf>> {
    let id = a.task.unwrap_or_default();
    let mut have: Vec<Option<PathBuf>> = vec![None; a.maps as usize];
    while have.iter().any(Option::is_none) {
        if lock(&shared.cancelled).contains(&key(&id)) {
            return Err(ClusterError::Remote("task killed".into()));
        }
        let known = have.iter().filter(|h| h.is_some()).count() as u32;
        let req = proto::MapOutputsRequest {
            job: id.job,
            known,
            wait_ms: 2000,
        };
        let mut rpc = shared.rpc.clone();
        let r = shared
            .rt
            .block_on(async move { rpc.map_outputs(req).await })?
            .into_inner();
        if r.aborted {
            return Err(ClusterError::Remote("the job ended".into()));
        }
        let todo: Vec<proto::MapOutput> = r
            .outputs
            .into_iter()
            .filter(|o| have.get(o.map as usize).is_some_and(Option::is_none))
            .collect();
        let results = fetch_all(shared, a, &todo, dir);
        // Fetches stopped because the attempt was killed blame no map.
        if lock(&shared.cancelled).contains(&key(&id)) {
            return Err(ClusterError::Remote("task killed".into()));
        }
        let mut failed = false;
        for (o, res) in todo.iter().zip(results) {
            match res {
                Ok(p) => have[o.map as usize] = Some(p),
                Err(e) if fetch_blame(&e) == Blame::ThisAttempt => return Err(e),
                Err(e) => {
                    failed = true;
                    report_fetch_failure(shared, id.job, o, &e);
                }
            }
        }
        if failed {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(have.into_iter().flatten().collect())
}

/// Whom a failed fetch blames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Blame {
    /// This reduce attempt: it could not store what it fetched (its own
    /// disk, full or failing); it fails, and the map output stands.
    ThisAttempt,
    /// The map output: unreachable, refused or damaged; the coordinator
    /// recomputes the map.
    MapOutput,
}

/// The one place that decides whom a fetch failure blames.
fn fetch_blame(e: &ClusterError) -> Blame {
    match e {
        ClusterError::Io { .. } | ClusterError::NoSpace(_) => Blame::ThisAttempt,
        _ => Blame::MapOutput,
    }
}

/// Fetches `todo` a few at a time, counting the bytes from each source
/// in `Shared::fetched` as they arrive.
fn fetch_all(
    shared: &Shared,
    a: &TaskAssignment,
    todo: &[proto::MapOutput],
    dir: &Path,
) -> Vec<Result<PathBuf>> {
    let id = a.task.unwrap_or_default();
    let counters: Vec<Arc<data::FetchWatch>> = {
        let mut f = lock(&shared.fetched);
        let mine = f.entry(key(&id)).or_default();
        todo.iter()
            .map(|o| mine.entry(o.addr.clone()).or_default().clone())
            .collect()
    };
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Result<PathBuf>>>> =
        todo.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..PARALLEL_FETCHES.min(todo.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(o) = todo.get(i) else { return };
                let path = dir.join(format!("m{:05}.run", o.map));
                let req = DataRequest::Fetch {
                    job: id.job,
                    map: o.map,
                    attempt: o.attempt,
                    part: id.index,
                };
                let r = data::fetch(&o.addr, &a.job_token, &req, &path, &counters[i]).map(|_| path);
                *lock(&results[i]) = Some(r);
            });
        }
    });
    results
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .expect("every fetch ran")
        })
        .collect()
}

fn report_fetch_failure(shared: &Shared, job: u64, o: &proto::MapOutput, e: &ClusterError) {
    tracing::warn!("fetch of map {} from {} failed: {e}", o.map, o.addr);
    let req = proto::FetchFailedRequest {
        job,
        map: o.map,
        attempt: o.attempt,
        reason: format!("{} ({e})", o.addr),
    };
    let mut rpc = shared.rpc.clone();
    let _ = shared
        .rt
        .block_on(async move { rpc.fetch_failed(req).await });
}
