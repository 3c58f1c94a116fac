//! What `sluice put/ls/get/rm/submit` do: talk to the coordinator and move
//! blocks over the data plane.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sluice_formats::input::Codec;
use sluice_request::JobRequest;

use sluice_proto::auth::Secret;
use sluice_proto::capability::Capability;
use sluice_proto::catalog::{BlockMeta, DatasetMeta, FileMeta};
use sluice_proto::data;
use sluice_proto::follow::{Coordinators, Following};
use sluice_proto::ids::{BlockId, DatasetName, JobId};
use sluice_proto::proto::{self, Empty};
use sluice_proto::sample::Sample;
use sluice_proto::signed::{connect, Rpc};
use sluice_proto::ClusterError;

use crate::patience::{ask, Call, Patience, Waiting};
use std::sync::Arc;

type Result<T> = std::result::Result<T, ClusterError>;

/// A user's capabilities to read a data set's blocks, by block id.
pub type Caps = std::collections::HashMap<String, Capability>;

/// Asks the coordinator `method(request)` (a read or a write, [`Call`]),
/// waiting for it as the client's patience says when it does not answer,
/// or following the next one when there are several; `hold` is how long
/// the call asks the coordinator to hold it.
macro_rules! ask {
    ($client:expr, $call:expr, $method:ident, $req:expr) => {
        ask!($client, $call, $method, $req, Duration::ZERO)
    };
    ($client:expr, $call:expr, $method:ident, $req:expr, $hold:expr) => {{
        let req = $req;
        let answer = ask(
            &$client.coordinator,
            &$client.patience,
            $call,
            $hold,
            |mut rpc: Rpc| {
                let req = req.clone();
                async move { rpc.$method(req).await }
            },
        )
        .await;
        if answer.is_ok() {
            crate::follow::remember_current(&$client.coordinator);
        }
        answer
    }};
}

/// A connected client.
#[derive(Clone)]
pub struct Client {
    /// The coordinator followed (one of several, when given several).
    coordinator: Arc<Following>,
    pub secret: Secret,
    /// How long its calls wait for a coordinator that does not answer.
    pub patience: Patience,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Client")
    }
}

/// How `put` stores a data set.
#[derive(Debug, Clone, Default)]
pub struct PutOptions {
    pub block_size: u64,
    pub replication: u32,
    pub overwrite: bool,
    /// The writer's data center, for WAN-aware placement (empty: that of
    /// the worker on this host, if any).
    pub datacenter: String,
    /// Counts files and bytes stored, for a progress display.
    pub progress: Option<std::sync::Arc<PutProgress>>,
}

impl PutOptions {
    /// Most bytes of blocks a put holds in memory at once: two blocks, and
    /// at least 64 MiB so small blocks go out many at a time.
    pub fn in_flight(&self) -> u64 {
        (2 * with_slop(self.block_size)).max(64 << 20)
    }
}

/// Files and bytes a put has stored so far, of its totals.
#[derive(Debug, Default)]
pub struct PutProgress {
    pub files: AtomicU64,
    pub bytes: AtomicU64,
    pub total_files: AtomicU64,
    pub total_bytes: AtomicU64,
}

/// Block placements asked for in one call.
pub const PLAN_BATCH: u64 = 10_000;

/// Files a put sends at once.
pub const PUT_STREAMS: usize = 32;

/// A block's most bytes: its size and Hadoop's 10% slop ([`next_block`]).
fn with_slop(block_size: u64) -> u64 {
    let size = block_size.max(1);
    size + size / 10 + 1
}

/// Whole KiB for `bytes`, rounded up: the unit of a put's memory permits.
fn kib(bytes: u64) -> u64 {
    bytes.div_ceil(1024)
}

/// The placements planned for a put, and every block id planned (to
/// abandon them all if the put fails).
struct Plan {
    ahead: std::sync::Mutex<std::collections::VecDeque<proto::Placement>>,
    planned: std::sync::Mutex<Vec<String>>,
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Client {
    /// Connects to the coordinator at `addr`, or (`A,B,...`) to the first
    /// of several that answers.
    pub async fn connect(addr: &str, secret: Secret) -> Result<Self> {
        Self::connect_patient(addr, secret, Patience::default()).await
    }

    /// Connects to the coordinator at `addr`, waiting for it as
    /// `patience` says when it does not answer (with none, for 5 s
    /// silently); its calls wait for it the same way. Given several
    /// (`A,B,...`), the first that answers is followed, starting with the
    /// one that answered this process last, and calls follow the next
    /// when it goes ([`crate::patience`]).
    pub async fn connect_patient(addr: &str, secret: Secret, patience: Patience) -> Result<Self> {
        let list = Coordinators::parse(addr)?;
        let coordinator = if list.several() {
            crate::follow::first_answering(list, &secret, &patience).await?
        } else {
            let (rpc, waited) = connect_one(addr, &secret, &patience).await?;
            let f = Following::new(list, secret.clone(), 0, rpc);
            if waited {
                f.note_outage();
            }
            f
        };
        Ok(Client {
            coordinator: Arc::new(coordinator),
            secret,
            patience,
        })
    }

    /// A channel to the coordinator followed now.
    pub fn rpc(&self) -> Rpc {
        self.coordinator.rpc()
    }

    /// The address of the coordinator followed now.
    pub fn coordinator(&self) -> String {
        let (at, _) = self.coordinator.current();
        self.coordinator.list().addr(at).to_owned()
    }

    /// The workers.
    pub async fn info(&self) -> Result<proto::ClusterInfo> {
        Ok(ask!(self, Call::Read, info, Empty {})?)
    }

    /// Every job the coordinator remembers, with a one-line description.
    pub async fn jobs(&self) -> Result<Vec<(proto::JobStatus, String)>> {
        let l = ask!(self, Call::Read, list_jobs, Empty {})?;
        Ok(l.jobs.into_iter().zip(l.descriptions).collect())
    }

    /// Each live worker's utilization samples since `since` (Unix ms),
    /// by worker data address.
    pub async fn node_samples(&self, since: u64) -> Result<Vec<(String, Vec<Sample>)>> {
        let info = self.info().await?;
        let mut out = Vec::new();
        for w in info.workers.iter().filter(|w| w.alive) {
            out.push((
                w.data_addr.clone(),
                data::stats(&w.data_addr, &self.secret, since)?,
            ));
        }
        Ok(out)
    }

    /// Stores the files of `path` (a file or a directory of files) as data
    /// set `name`, each cut into blocks that end at line ends. Up to
    /// [`PUT_STREAMS`] files are sent at once, with at most
    /// [`PutOptions::in_flight`] bytes of blocks held in memory; placements
    /// are asked for the whole data set at once and the data set is
    /// registered in one commit, so a small file costs its block's write,
    /// not round trips to the coordinator.
    pub async fn put(&self, path: &Path, name: &str, opts: &PutOptions) -> Result<DatasetMeta> {
        let name = DatasetName::new(name)?;
        // Listing may wait on an object store's own runtime: off this one.
        let owned = path.to_owned();
        let files = tokio::task::spawn_blocking(move || put_sources(&owned))
            .await
            .map_err(|e| ClusterError::Remote(format!("put: {e}")))??;
        if let Some((_, f)) = files
            .iter()
            .find(|(_, f)| f.codec != Codec::None && !cut_by_bytes(f.codec))
        {
            return Err(ClusterError::Config(format!(
                "{}: compressed files cannot be cut into blocks; decompress it first",
                f.path.display()
            )));
        }
        let mut meta = DatasetMeta {
            name,
            files: Vec::new(),
            created_ms: sluice_proto::now_ms(),
            origin: format!("put {}", path.display()),
            replication: opts.replication.max(1),
            block_size: opts.block_size,
            access: Default::default(),
        };
        if let Some(p) = &opts.progress {
            p.total_files.store(files.len() as u64, Ordering::Relaxed);
            let bytes = files.iter().map(|(_, f)| f.len).sum();
            p.total_bytes.store(bytes, Ordering::Relaxed);
        }
        // One plan for the whole data set, so blocks spread evenly across
        // workers however many files there are; blocks cut short at line
        // ends may ask for a few more.
        let total: u64 = files
            .iter()
            .map(|(_, f)| f.len.div_ceil(opts.block_size.max(1)).max(1))
            .sum();
        let plan = Plan {
            ahead: std::sync::Mutex::new(self.plan(total, opts).await?.into()),
            planned: std::sync::Mutex::new(Vec::new()),
        };
        lock(&plan.planned).extend(lock(&plan.ahead).iter().map(|p| p.id.clone()));
        let res = self.put_files(&files, opts, &mut meta, &plan).await;
        if let Err(e) = res {
            // Nothing of a failed put may stay on the workers.
            let req = proto::BlockIds {
                ids: std::mem::take(&mut *lock(&plan.planned)),
            };
            if let Err(a) = self.rpc().abandon_blocks(req).await {
                tracing::warn!("abandoning the put's blocks: {}", a.message());
            }
            return Err(e);
        }
        Ok(meta)
    }

    async fn put_files(
        &self,
        files: &[(String, sluice_formats::input::InputFile)],
        opts: &PutOptions,
        meta: &mut DatasetMeta,
        plan: &Plan,
    ) -> Result<()> {
        use futures_util::stream::{self, StreamExt, TryStreamExt};
        let room = tokio::sync::Semaphore::new(kib(opts.in_flight()) as usize);
        let puts = files
            .iter()
            .map(|(name, f)| self.put_file(name, f, opts, plan, &room));
        meta.files = stream::iter(puts)
            .buffered(PUT_STREAMS)
            .try_collect()
            .await?;
        let req = proto::CommitDatasetRequest {
            dataset: Some((&*meta).into()),
            overwrite: opts.overwrite,
        };
        self.rpc().commit_dataset(req).await?;
        Ok(())
    }

    /// Cuts one file into blocks and stores each; a block's bytes are
    /// held only while `room` has them.
    async fn put_file(
        &self,
        name: &str,
        file: &sluice_formats::input::InputFile,
        opts: &PutOptions,
        plan: &Plan,
        room: &tokio::sync::Semaphore,
    ) -> Result<FileMeta> {
        let path = file.path.as_path();
        let name = name.to_owned();
        let mut f: Box<dyn Read + Send> = match &file.remote {
            Some(r) => r.0.open_at(0, file.len),
            None => std::fs::File::open(path).map(|f| Box::new(f) as Box<dyn Read + Send>),
        }
        .map_err(|e| ClusterError::io("opening", path, e))?;
        let mut blocks = Vec::new();
        let mut carry = Vec::new();
        let mut left = file.len;
        let cap = kib(opts.in_flight());
        loop {
            let want = kib(left.min(with_slop(opts.block_size))).clamp(1, cap);
            let held = room
                .acquire_many(u32::try_from(want).unwrap_or(u32::MAX))
                .await
                .map_err(|e| ClusterError::Remote(format!("put: {e}")))?;
            // Reads block by block off the runtime's threads (an object
            // store's reader waits on a runtime of its own).
            let (size, at) = (opts.block_size, path.to_owned());
            let lines = !cut_by_bytes(file.codec);
            let (back, kept, block) = tokio::task::spawn_blocking(move || {
                let b = next_block(&mut f, &mut carry, (size, lines), &at);
                (f, carry, b)
            })
            .await
            .map_err(|e| ClusterError::Remote(format!("put: {e}")))?;
            (f, carry) = (back, kept);
            let block = block?;
            if block.is_empty() {
                if let Some(p) = &opts.progress {
                    p.files.fetch_add(1, Ordering::Relaxed);
                }
                return Ok(FileMeta { name, blocks });
            }
            left = left.saturating_sub(block.len() as u64);
            let p = self.next_placement(plan, opts).await?;
            let len = block.len() as u64;
            blocks.push(self.store_block(block, p).await?);
            drop(held);
            if let Some(p) = &opts.progress {
                p.bytes.fetch_add(len, Ordering::Relaxed);
            }
        }
    }

    /// The next planned placement, asking for more when the plan ran out
    /// (blocks cut short at line ends).
    async fn next_placement(&self, plan: &Plan, opts: &PutOptions) -> Result<proto::Placement> {
        if let Some(p) = lock(&plan.ahead).pop_front() {
            return Ok(p);
        }
        let mut more = self.plan(1, opts).await?;
        lock(&plan.planned).extend(more.iter().map(|p| p.id.clone()));
        more.pop()
            .ok_or_else(|| ClusterError::Remote("the coordinator planned no block".into()))
    }

    /// Placements for `n` new blocks, asked for [`PLAN_BATCH`] at a time
    /// (a reply stays well under the control plane's message limit).
    async fn plan(&self, n: u64, opts: &PutOptions) -> Result<Vec<proto::Placement>> {
        let mut all = Vec::new();
        let mut left = n;
        while left > 0 {
            let batch = left.min(PLAN_BATCH);
            let req = proto::PlanBlocksRequest {
                blocks: batch as u32,
                replication: opts.replication,
                writer_host: String::new(),
                exclude: Vec::new(),
                writer_datacenter: opts.datacenter.clone(),
                block_size: with_slop(opts.block_size),
            };
            // A plan whose answer an outage lost is asked for again: the
            // blocks it named were never written, and a coordinator that
            // restarted knows nothing of them.
            all.extend(ask!(self, Call::Read, plan_blocks, req)?.blocks);
            left -= batch;
        }
        Ok(all)
    }

    /// A worker for one replica, none of `exclude` (uids).
    async fn another_worker(&self, exclude: Vec<String>) -> Result<Option<proto::WorkerInfo>> {
        let req = proto::PlanBlocksRequest {
            blocks: 1,
            replication: 1,
            writer_host: String::new(),
            exclude,
            ..Default::default()
        };
        let r = self.rpc().plan_blocks(req).await?.into_inner();
        Ok(r.blocks
            .into_iter()
            .next()
            .and_then(|p| p.targets.into_iter().next()))
    }

    /// Writes one block to every target of its placement. A target that
    /// cannot store it (a full disk, a lost worker) is replaced by another
    /// worker the coordinator picks; when none is left the put fails,
    /// naming every worker tried and why.
    async fn store_block(&self, block: Vec<u8>, p: proto::Placement) -> Result<BlockMeta> {
        let crc = crc32c::crc32c(&block);
        let block = std::sync::Arc::new(block);
        let mut replicas: Vec<String> = Vec::new();
        let mut failures: Vec<String> = Vec::new();
        let mut tried: Vec<String> = p.targets.iter().map(|t| t.uid.clone()).collect();
        let cap = Capability::parse(&p.capability);
        for first in &p.targets {
            let mut target = first.clone();
            loop {
                let (data, secret, cap) = (block.clone(), self.secret.clone(), cap.clone());
                let (addr, id) = (target.data_addr.clone(), p.id.clone());
                let written = tokio::task::spawn_blocking(move || {
                    let (len, mut d) = (data.len() as u64, data.as_slice());
                    match cap {
                        Some(c) => data::write_block_capable(&addr, &c, &id, &mut d, len, crc),
                        None => data::write_block(&addr, &secret, &id, &mut d, len, crc),
                    }
                })
                .await
                .map_err(|e| ClusterError::Remote(format!("writing block {}: {e}", p.id)))?;
                match written {
                    Ok(()) => {
                        replicas.push(target.uid.clone());
                        break;
                    }
                    Err(e) => {
                        let why = format!("worker {} ({}): {e}", target.id, target.data_addr);
                        tracing::warn!("block {}: {why}", p.id);
                        failures.push(why);
                    }
                }
                let next = self.another_worker(tried.clone()).await.map_err(|e| {
                    ClusterError::Remote(format!(
                        "block {} could not be stored: {}; and no other worker: {e}",
                        p.id,
                        failures.join("; ")
                    ))
                })?;
                match next {
                    Some(w) => {
                        tried.push(w.uid.clone());
                        target = w;
                    }
                    None => {
                        return Err(ClusterError::Remote(format!(
                            "block {} could not be stored: {}; no other worker is left",
                            p.id,
                            failures.join("; ")
                        )))
                    }
                }
            }
        }
        Ok(BlockMeta {
            id: BlockId::new(p.id)?,
            len: block.len() as u64,
            crc,
            replicas,
            corrupt: Vec::new(),
        })
    }

    /// Every data set.
    /// Every data set, summed up, in name order: asked for a page at a
    /// time.
    pub async fn list(&self) -> Result<Vec<proto::DatasetSummary>> {
        let mut all: Vec<proto::DatasetSummary> = Vec::new();
        loop {
            let req = proto::ListDatasetsRequest {
                after: all.last().map(|d| d.name.clone()).unwrap_or_default(),
                limit: 0,
            };
            let page = ask!(self, Call::Read, list_datasets, req)?;
            all.extend(page.datasets);
            if !page.more {
                return Ok(all);
            }
        }
    }

    /// One data set.
    pub async fn dataset(&self, name: &str) -> Result<DatasetMeta> {
        Ok(self.dataset_caps(name).await?.0)
    }

    /// A data set, with the capability to read each of its blocks the
    /// coordinator gave this client's user (none for an admin).
    pub async fn dataset_caps(&self, name: &str) -> Result<(DatasetMeta, Caps)> {
        let d = ask!(
            self,
            Call::Read,
            get_dataset,
            proto::Name { name: name.into() }
        )?;
        let caps = (d.files.iter().flat_map(|f| f.blocks.iter()))
            .filter_map(|b| Some((b.id.clone(), Capability::parse(&b.capability)?)))
            .collect();
        Ok((DatasetMeta::try_from(d)?, caps))
    }

    /// Removes a data set and its blocks.
    pub async fn remove(&self, name: &str) -> Result<()> {
        let name = proto::Name { name: name.into() };
        ask!(self, Call::Write, remove_dataset, name)?;
        Ok(())
    }

    /// The first `max` bytes of each block of data set `name` (from any
    /// live replica), for sampling its records before a job.
    pub async fn block_heads(&self, name: &str, max: u64) -> Result<Vec<Vec<u8>>> {
        let d = self.dataset(name).await?;
        let info = self.info().await?;
        let mut damaged = Vec::new();
        let heads = d
            .blocks()
            .map(|b| {
                from_any_replica(b, &live_addr(&info), &mut damaged, |addr| {
                    data::read_head(addr, &self.secret, &b.id, max)
                })
            })
            .collect();
        self.report_damaged(damaged).await;
        heads
    }

    /// Tells the coordinator about damaged replicas a read met.
    async fn report_damaged(&self, replicas: Vec<proto::CorruptReplica>) {
        if replicas.is_empty() {
            return;
        }
        let req = proto::CorruptReport { replicas };
        if let Err(e) = self.rpc().report_corrupt(req).await {
            tracing::warn!("reporting damaged replicas: {}", e.message());
        }
    }

    /// Writes data set `name` to `out`: a file when the data set has one
    /// file, else a directory of its files. Written beside `out` and
    /// renamed into place, so `out` appears whole or not at all.
    pub async fn get(&self, name: &str, out: &Path) -> Result<u64> {
        let (d, caps) = self.dataset_caps(name).await?;
        let info = self.info().await?;
        let addr_of = live_addr(&info);
        let tmp = hidden_beside(out);
        let single = d.files.len() == 1;
        if !single {
            std::fs::create_dir_all(&tmp).map_err(|e| ClusterError::io("creating", &tmp, e))?;
        }
        let mut total = 0;
        let mut damaged = Vec::new();
        let res: Result<()> = (|| {
            for f in &d.files {
                let path = if single {
                    tmp.clone()
                } else {
                    let path = tmp.join(safe_name(&f.name)?);
                    if let Some(dir) = path.parent() {
                        std::fs::create_dir_all(dir)
                            .map_err(|e| ClusterError::io("creating", dir, e))?;
                    }
                    path
                };
                let file = std::fs::File::create(&path)
                    .map_err(|e| ClusterError::io("creating", &path, e))?;
                let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
                for b in &f.blocks {
                    let key = (&self.secret, caps.get(b.id.as_str()));
                    total += read_any(key, b, &addr_of, &mut damaged, &mut w)
                        .map_err(|e| in_dataset(e, name))?;
                }
                w.flush()
                    .map_err(|e| ClusterError::io("writing", &path, e))?;
            }
            std::fs::rename(&tmp, out).map_err(|e| ClusterError::io("renaming to", out, e))
        })();
        if res.is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
            let _ = std::fs::remove_file(&tmp);
        }
        self.report_damaged(damaged).await;
        res.map(|()| total)
    }

    /// Submits a job whose input and output name data sets, its output
    /// blocks stored `replication` times; returns its id. The submission
    /// carries an id of its own, so when an outage leaves its answer
    /// unknown it is sent again and answered with the job it made: it is
    /// asked again as a read is, and never makes two jobs.
    pub async fn submit(&self, request: &JobRequest, replication: u32) -> Result<JobId> {
        let req = proto::SubmitRequest {
            request: request.encode(),
            replication,
            submission: submission_id(),
        };
        let r = ask!(self, Call::Read, submit, req)?;
        Ok(JobId(r.job))
    }

    /// The scheduler's pools and their use; `reload` reads the pools file
    /// again first.
    pub async fn pools(&self, reload: bool) -> Result<proto::PoolList> {
        let req = proto::PoolsRequest { reload };
        let call = if reload { Call::Write } else { Call::Read };
        Ok(ask!(self, call, pools, req)?)
    }

    /// Adds a cache directive.
    pub async fn cache_add(&self, req: proto::CacheAddRequest) -> Result<proto::CacheDirective> {
        Ok(ask!(self, Call::Write, cache_add, req)?)
    }

    /// Removes cache directive `id`, or (id 0) every directive of
    /// `dataset`; returns how many.
    pub async fn cache_remove(&self, id: u64, dataset: &str) -> Result<u32> {
        let req = proto::CacheRemoveRequest {
            id,
            dataset: dataset.to_owned(),
        };
        Ok(ask!(self, Call::Write, cache_remove, req)?.removed)
    }

    /// Adds user `add` and/or removes user `remove` (empty: neither); the
    /// users after it, the one added with its salt (an admin's call).
    pub async fn users(&self, add: &str, remove: &str) -> Result<proto::UserList> {
        let req = proto::UsersRequest {
            add: add.to_owned(),
            remove: remove.to_owned(),
        };
        Ok(ask!(self, Call::Write, users, req)?)
    }

    /// Grants (or, with `revoke`, takes back) reading `dataset` to
    /// `users`, or to every user with `all`.
    pub async fn share(&self, req: proto::ShareRequest) -> Result<()> {
        ask!(self, Call::Write, share, req)?;
        Ok(())
    }

    /// The cache directives and each live worker's cache.
    pub async fn cache_list(&self) -> Result<proto::CacheListReply> {
        Ok(ask!(self, Call::Read, cache_list, proto::Empty {})?)
    }

    /// Ends running job `job`; returns its status.
    pub async fn kill(&self, job: JobId) -> Result<proto::JobStatus> {
        let req = proto::KillJobRequest {
            job: job.0,
            reason: format!("sluice kill (pid {})", std::process::id()),
        };
        Ok(ask!(self, Call::Write, kill_job, req)?)
    }

    /// Waits up to `wait` for a job to end; returns its status.
    pub async fn wait(&self, job: JobId, wait: Duration) -> Result<proto::JobStatus> {
        let req = proto::WaitJobRequest {
            job: job.0,
            wait_ms: wait.as_millis() as u64,
        };
        Ok(ask!(self, Call::Read, wait_job, req, wait)?)
    }
}

/// Connects to the one coordinator at `addr`, waiting for it as
/// `patience` says (with none, for 5 s silently); and whether it waited.
async fn connect_one(addr: &str, secret: &Secret, patience: &Patience) -> Result<(Rpc, bool)> {
    let mut waiting = Waiting::new();
    // A caller with no patience of its own (the default: nothing to
    // tell, no wait) gets 5 s silently; one that asked for none (`sluice
    // ... --wait-coordinator 0`) gets one try.
    let once = if patience.wait.is_zero() && patience.notice.is_none() {
        Duration::from_secs(5)
    } else {
        Duration::ZERO
    };
    let mut waited = false;
    loop {
        match connect(addr, secret, once).await {
            Ok(rpc) => return Ok((rpc, waited)),
            // A malformed address or a refused certificate is not
            // waited for.
            Err(e @ ClusterError::Config(_)) => return Err(e),
            Err(e) if crate::patience::certificate_refused(&e.to_string()) => return Err(e),
            Err(e) => match waiting.pause(patience) {
                Some(p) => {
                    waited = true;
                    tokio::time::sleep(p).await;
                }
                None => return Err(e),
            },
        }
    }
}

/// The data address of a live worker, by uid.
fn live_addr(info: &proto::ClusterInfo) -> impl Fn(&str) -> Option<String> + '_ {
    |uid| {
        info.workers
            .iter()
            .find(|w| w.alive && w.uid == uid)
            .map(|w| w.data_addr.clone())
    }
}

/// `read` from the first live replica of `b` that answers correctly.
/// Replicas found damaged are added to `damaged`; when every replica is
/// damaged or gone the error says so, with each one's evidence.
fn from_any_replica<T>(
    b: &BlockMeta,
    addr_of: &dyn Fn(&str) -> Option<String>,
    damaged: &mut Vec<proto::CorruptReplica>,
    mut read: impl FnMut(&str) -> Result<T>,
) -> Result<T> {
    let mut last = None;
    let mut evidence: Vec<String> = b
        .corrupt
        .iter()
        .map(|c| format!("worker {}: {}", c.uid, c.detail))
        .collect();
    for uid in &b.replicas {
        let Some(addr) = addr_of(uid) else {
            evidence.push(format!("worker {uid}: not live"));
            continue;
        };
        match read(&addr) {
            Ok(v) => return Ok(v),
            Err(ClusterError::Damaged { damage, .. }) => {
                evidence.push(format!("worker {uid} ({addr}): {damage}"));
                damaged.push(proto::CorruptReplica {
                    block: b.id.to_string(),
                    worker: uid.clone(),
                    addr: addr.clone(),
                    detail: damage,
                    at_ms: sluice_proto::now_ms(),
                });
            }
            Err(e) => {
                evidence.push(format!("worker {uid} ({addr}): {e}"));
                last = Some(e);
            }
        }
    }
    let any_damage = !b.corrupt.is_empty() || damaged.iter().any(|d| b.id == d.block.as_str());
    if !any_damage {
        return Err(last.unwrap_or_else(|| {
            ClusterError::Remote(format!(
                "block {} has no live replica (held by {:?})",
                b.id, b.replicas
            ))
        }));
    }
    Err(ClusterError::Remote(format!(
        "block {} has no intact replica ({})",
        b.id,
        evidence.join("; ")
    )))
}

/// The files `sluice put` stores from `path`, each with its name in the
/// data set: every file under a directory, recursively, named by its path
/// below it (`2026/11/23.log`); or the files a file name or glob resolves
/// to, named by their file names.
fn put_sources(path: &Path) -> Result<Vec<(String, sluice_formats::input::InputFile)>> {
    let config = |e: sluice_formats::FormatError| ClusterError::Config(e.to_string());
    let spec = path.to_string_lossy();
    if sluice_storage::is_remote(&spec) {
        return remote_sources(&spec);
    }
    if path.is_dir() {
        let files = sluice_formats::input::walk(path).map_err(config)?;
        return Ok(files
            .into_iter()
            .map(|f| {
                let rel = f.path.strip_prefix(path).unwrap_or(&f.path);
                (rel.to_string_lossy().into_owned(), f)
            })
            .collect());
    }
    let files = sluice_formats::input::resolve(&path.to_string_lossy()).map_err(config)?;
    Ok(files
        .into_iter()
        .map(|f| {
            let name = f.path.file_name().unwrap_or_default();
            (name.to_string_lossy().into_owned(), f)
        })
        .collect())
}

/// The files an `s3://` or `hdfs://` path names, each named by its path
/// below it (a prefix or directory), or by its last segment (one file or
/// a glob).
fn remote_sources(spec: &str) -> Result<Vec<(String, sluice_formats::input::InputFile)>> {
    let store = |e: sluice_storage::StorageError| ClusterError::Config(e.to_string());
    let files = sluice_storage::resolve(spec).map_err(store)?;
    let base = format!("{}/", spec.trim_end_matches('/'));
    Ok(files
        .into_iter()
        .map(|f| {
            let url = f.path.to_string_lossy().into_owned();
            let name = match url.strip_prefix(&base) {
                Some(rel) => rel.to_owned(),
                None => url.rsplit('/').next().unwrap_or(&url).to_owned(),
            };
            (name, f)
        })
        .collect())
}

/// A data set's file name as a relative path that stays inside the
/// directory `get` writes (no `..`, no root).
fn safe_name(name: &str) -> Result<&Path> {
    let p = Path::new(name);
    let plain = p
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    if name.is_empty() || !plain {
        return Err(ClusterError::Remote(format!(
            "the data set has a file named {name:?}, which is not a relative path"
        )));
    }
    Ok(p)
}

/// Names the data set in a "no intact replica" error.
fn in_dataset(e: ClusterError, name: &str) -> ClusterError {
    match e {
        ClusterError::Remote(m) if m.contains("has no intact replica") => {
            ClusterError::Remote(m.replacen(" has no", &format!(" of data set {name} has no"), 1))
        }
        e => e,
    }
}

/// Reads a block from the first live replica that answers correctly.
fn read_any(
    (secret, cap): (&Secret, Option<&Capability>),
    b: &BlockMeta,
    addr_of: &dyn Fn(&str) -> Option<String>,
    damaged: &mut Vec<proto::CorruptReplica>,
    w: &mut impl Write,
) -> Result<u64> {
    let (n, buf) = from_any_replica(b, addr_of, damaged, |addr| {
        let mut buf = Vec::with_capacity(b.len as usize);
        let n = match cap {
            Some(c) => data::read_block_capable(addr, c, &b.id, (b.len, b.crc), &mut buf)?,
            None => data::read_block(addr, secret, &b.id, b.len, b.crc, &mut buf)?,
        };
        Ok((n, buf))
    })?;
    w.write_all(&buf)
        .map_err(|e| ClusterError::io("writing", Path::new("output"), e))?;
    Ok(n)
}

fn hidden_beside(out: &Path) -> std::path::PathBuf {
    let name = out
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    out.parent()
        .unwrap_or(Path::new("."))
        .join(format!(".{name}.sluice-get-{}", std::process::id()))
}

/// Whether a file of `codec` is stored in blocks of exactly the block
/// size, not cut at line ends: a file of rows (Parquet, Avro,
/// SequenceFile), whose maps read past their block's ends.
fn cut_by_bytes(codec: Codec) -> bool {
    matches!(codec, Codec::Parquet | Codec::Avro | Codec::SequenceFile)
}

/// The next block of `f`: up to `size` bytes ending at a newline (longer
/// when a single line is longer; the file's last bytes need no newline),
/// or, not by `lines`, exactly `size` bytes. A tail shorter than a tenth
/// of `size` joins the block before it rather than becoming a block of
/// its own (Hadoop's split slop), so a file a few bytes over the block
/// size does not make a task of a few bytes. `carry` holds bytes read
/// past the previous block's end.
fn next_block(
    f: &mut impl Read,
    carry: &mut Vec<u8>,
    (size, lines): (u64, bool),
    path: &Path,
) -> Result<Vec<u8>> {
    let size = size.max(1) as usize;
    let with_slop = size + size / 10;
    let mut block = std::mem::take(carry);
    let mut eof = false;
    while block.len() <= with_slop && !eof {
        // Grown as bytes arrive, never zero-filled ahead: a 2 KB file must
        // not cost a block-sized memset.
        let want = (with_slop + 1 - block.len()) as u64;
        let n = (&mut *f)
            .take(want)
            .read_to_end(&mut block)
            .map_err(|e| ClusterError::io("reading", path, e))?;
        eof = (n as u64) < want;
    }
    if eof && block.len() <= with_slop {
        return Ok(block);
    }
    if !lines {
        *carry = block.split_off(size);
        return Ok(block);
    }
    let cut = match memchr::memrchr(b'\n', &block[..size.min(block.len())]) {
        Some(i) => i + 1,
        None => match memchr::memchr(b'\n', &block[size.min(block.len())..]) {
            Some(i) => size + i + 1,
            None => {
                // One line longer than a block: read on to its end.
                loop {
                    let at = block.len();
                    block.resize(at + (1 << 20), 0);
                    let n = read_full(f, &mut block[at..], path)?;
                    block.truncate(at + n);
                    if let Some(i) = memchr::memchr(b'\n', &block[at..]) {
                        break at + i + 1;
                    }
                    if n == 0 {
                        break block.len();
                    }
                }
            }
        },
    };
    *carry = block.split_off(cut);
    Ok(block)
}

fn read_full(f: &mut impl Read, buf: &mut [u8], path: &Path) -> Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ClusterError::io("reading", path, e)),
        }
    }
    Ok(n)
}

/// An id for one submission, unique across clients and time: this host's
/// boot id when it has one, the process, the clock and a counter, hashed
/// (no randomness needed: uniqueness, not secrecy).
fn submission_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    let seed = format!("{boot}/{}/{nanos}/{n}", std::process::id());
    let lo = crc32c::crc32c(seed.as_bytes());
    let hi = crc32c::crc32c_append(lo, seed.as_bytes());
    format!("{}-{n}-{hi:08x}{lo:08x}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(data: &[u8], size: u64) -> Vec<Vec<u8>> {
        cut(data, size, true)
    }

    fn cut(data: &[u8], size: u64, lines: bool) -> Vec<Vec<u8>> {
        let mut r = data;
        let mut carry = Vec::new();
        let mut out = Vec::new();
        loop {
            let b = next_block(&mut r, &mut carry, (size, lines), Path::new("x")).unwrap();
            if b.is_empty() {
                return out;
            }
            out.push(b);
        }
    }

    #[test]
    fn blocks_end_at_line_ends_and_cover_the_file() {
        let data = b"aa\nbbbb\ncc\nd\neeeeeeeeee\nf";
        for size in 1..30 {
            let bs = blocks(data, size);
            assert_eq!(bs.concat(), data, "size {size}");
            for b in &bs[..bs.len() - 1] {
                assert!(b.ends_with(b"\n"), "size {size}: {b:?}");
            }
        }
        assert!(blocks(b"", 4).is_empty());
        // A tail under a tenth of the block size joins the last block.
        let lines = b"0123456789\n".repeat(10);
        let mut data = lines.clone();
        data.extend_from_slice(b"x\n");
        assert_eq!(blocks(&data, 110).len(), 1);
        assert_eq!(blocks(&data, 55).len(), 2);
        assert_eq!(blocks(&lines, 10).len(), 10);
    }

    #[test]
    fn files_of_rows_are_cut_at_the_block_size_whatever_their_bytes() {
        let data: Vec<u8> = (0..1000u32)
            .map(|i| if i % 7 == 0 { b'\n' } else { i as u8 })
            .collect();
        let bs = cut(&data, 128, false);
        assert_eq!(bs.concat(), data);
        let lens: Vec<usize> = bs.iter().map(Vec::len).collect();
        // 7 blocks of 128 and the tail of 104 (over a tenth: its own).
        assert_eq!(lens, [128, 128, 128, 128, 128, 128, 128, 104]);
        assert_eq!(cut(&data, 990, false).len(), 1, "a tail of 10 joins");
        assert!(cut_by_bytes(Codec::Parquet) && cut_by_bytes(Codec::SequenceFile));
        assert!(!cut_by_bytes(Codec::None) && !cut_by_bytes(Codec::Gzip));
    }
}
