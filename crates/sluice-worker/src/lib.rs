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
//!
//! # Layout
//!
//! - `config`: the worker's settings ([`WorkerConfig`], [`ScanSettings`]).
//! - `shared`: what the worker's threads share.
//! - `tasks`: each attempt's lifecycle (running, cancelled, done) and the
//!   jobs built and ended here; pure state behind one lock.
//! - `outbox`: the session and what the next heartbeat carries; pure
//!   state behind one lock.
//! - `heartbeat`: registration, the heartbeat loop, a reply's orders.
//! - `task`: a task attempt on its thread: the job it belongs to, a map,
//!   a reduce and its shuffle fetches.
//! - `blocks`: the block scanner, the cache's loading, copies to and from
//!   other workers, a task's output stored as a block.
//! - `files`: a job's files here and their removal.
//! - [`cache`]: blocks held in locked memory; `stream`: a block read from
//!   another worker's replica; [`metrics`]: `/metrics`.
//!
//! # Invariants
//!
//! - At most three locks: the attempts' lifecycle, the heartbeat's
//!   outbox, and the cache's; none is held across an `.await` or any I/O.
//! - A cancelled attempt is a running one: nothing of an attempt is kept
//!   once it has finished, so a late kill or job end leaves nothing behind.

pub mod cache;
pub mod metrics;

mod blocks;
mod config;
mod files;
mod heartbeat;
mod outbox;
mod rowfile;
mod shared;
mod stream;
mod task;
mod tasks;

use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_proto::auth::Secret;
use sluice_proto::data::{self, Layout};
use sluice_proto::follow::{Coordinators, Following};
use sluice_proto::signed::connect;
use sluice_proto::ClusterError;
use tokio::runtime::Handle;

pub use config::{ScanSettings, WorkerConfig};

use shared::{lock, Shared};
use tasks::Tasks;

type Result<T> = std::result::Result<T, ClusterError>;

/// Runs a worker until the process is stopped.
pub async fn run(cfg: WorkerConfig) -> Result<()> {
    check_memory(&cfg)?;
    cache::check_lockable(cfg.cache_size).map_err(ClusterError::Config)?;
    let layout = Layout::create(&cfg.data_dir)?;
    let added = sluice_proto::block::tidy(&layout)?;
    if added > 0 {
        tracing::info!("wrote checksum files for {added} blocks stored without one");
    }
    let uid = load_uid(&cfg.data_dir)?;
    let listen = |e| ClusterError::net("listening on", &cfg.listen.to_string(), e);
    let listener = TcpListener::bind(cfg.listen).map_err(listen)?;
    let bound = listener.local_addr().map_err(listen)?;
    let data_addr = cfg.advertise.clone().unwrap_or_else(|| bound.to_string());
    // Ten samples a second, the last hour kept, for benchmarks' per-node
    // utilization (data plane STATS).
    let sampler = sluice_proto::sample::Sampler::start(Duration::from_millis(100), 36_000);
    data::serve(listener, layout.clone(), cfg.secret.clone(), Some(sampler));
    let coordinator = follow(&cfg.coordinator, &cfg.secret).await?;
    let (loader, to_load) = std::sync::mpsc::channel();
    let cache = Arc::new(cache::BlockCache::new(cfg.cache_size, cfg.cache_policy));
    let tasks = Arc::new(Mutex::new(Tasks::default()));
    let worker_metrics = Arc::new(metrics::WorkerMetrics::default());
    let http_addr = serve_metrics(&cfg, &worker_metrics, &cache, &tasks).await?;
    let shared = Arc::new(Shared {
        metrics: worker_metrics,
        http_addr,
        uid,
        data_addr,
        layout,
        coordinator,
        heartbeat_ms: std::sync::atomic::AtomicU64::new(0),
        rt: Handle::current(),
        tasks,
        outbox: Mutex::default(),
        cache,
        loader,
        cfg,
    });
    blocks::spawn_cache_loader(&shared, to_load);
    blocks::spawn_scanner(&shared);
    let mut first = true;
    loop {
        heartbeat::register(&shared, first).await?;
        first = false;
        tracing::info!(
            "worker {} registered, data plane on {}",
            shared.uid,
            shared.data_addr
        );
        // Until the coordinator asks for a new registration (it restarted,
        // or took this worker for lost): the attempts running go on, and
        // the next registration names them.
        heartbeat::heartbeats(&shared).await?;
    }
}

/// The coordinator to follow: one address connected as a worker always
/// was (trying for a minute), or the first of several, each connected
/// at its first call (registration goes round them until one answers).
async fn follow(list: &str, secret: &Secret) -> Result<Following> {
    let coordinators = Coordinators::parse(list)?;
    if coordinators.several() {
        return Following::lazy(coordinators, secret.clone(), 0);
    }
    let rpc = connect(list, secret, Duration::from_secs(60)).await?;
    Ok(Following::new(coordinators, secret.clone(), 0, rpc))
}

/// Refuses a memory too small to share among the worker's tasks.
fn check_memory(cfg: &WorkerConfig) -> Result<()> {
    let share = sluice_proto::task_share(cfg.memory, cfg.slots);
    if share >= 1 << 20 {
        return Ok(());
    }
    Err(ClusterError::Config(format!(
        "--memory {} shared by {} map and {} reduce slots gives each task {share} bytes; \
         a task needs at least 1 MiB",
        cfg.memory, cfg.slots, cfg.slots
    )))
}

/// Serves `/metrics` where the settings say; returns its address (empty:
/// nowhere).
async fn serve_metrics(
    cfg: &WorkerConfig,
    m: &Arc<metrics::WorkerMetrics>,
    cache: &Arc<cache::BlockCache>,
    tasks: &Arc<Mutex<Tasks>>,
) -> Result<String> {
    let Some(at) = cfg.http else {
        return Ok(String::new());
    };
    let (c, t) = (cache.clone(), tasks.clone());
    let now: metrics::Now = Arc::new(move || (c.stats(), lock(&t).running()));
    let bound = metrics::serve(at, m.clone(), cfg.secret.clone(), now).await;
    let bound = bound.map_err(|e| ClusterError::net("serving /metrics on", &at.to_string(), e))?;
    Ok(bound.to_string())
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
