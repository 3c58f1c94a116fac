//! The client for callers without an async runtime: the command line,
//! drivers and tests. Each call blocks on a runtime the client owns.

use std::path::Path;
use std::time::Duration;

use sluice_proto::auth::Secret;
use sluice_proto::catalog::DatasetMeta;
use sluice_proto::ids::JobId;
use sluice_proto::proto;
use sluice_proto::sample::Sample;
use sluice_proto::ClusterError;
use sluice_request::JobRequest;

use crate::{Client, Patience, PutOptions};

type Result<T> = std::result::Result<T, ClusterError>;

/// A [`Client`] with its own small runtime.
pub struct BlockingClient {
    rt: tokio::runtime::Runtime,
    client: Client,
    addr: String,
    secret: Secret,
}

impl std::fmt::Debug for BlockingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingClient")
            .field("coordinator", &self.addr)
            .finish_non_exhaustive()
    }
}

impl BlockingClient {
    /// Connects to the coordinator at `addr`.
    pub fn connect(addr: &str, secret: Secret) -> Result<Self> {
        Self::connect_patient(addr, secret, Patience::default())
    }

    /// Connects to the coordinator at `addr`, its calls waiting for one
    /// that does not answer as `patience` says.
    pub fn connect_patient(addr: &str, secret: Secret, patience: Patience) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| ClusterError::Remote(format!("starting the client runtime: {e}")))?;
        let client = rt.block_on(Client::connect_patient(addr, secret.clone(), patience))?;
        Ok(BlockingClient {
            rt,
            client,
            addr: addr.to_owned(),
            secret,
        })
    }

    /// Connects again (after the coordinator restarted).
    pub fn reconnect(&mut self) -> Result<()> {
        let patience = self.client.patience.clone();
        self.client = self.rt.block_on(Client::connect_patient(
            &self.addr,
            self.secret.clone(),
            patience,
        ))?;
        Ok(())
    }

    /// The workers and the coordinator's epoch.
    pub fn info(&self) -> Result<proto::ClusterInfo> {
        self.rt.block_on(self.client.info())
    }

    /// Every recorded job with a line describing it.
    pub fn jobs(&self) -> Result<Vec<(proto::JobStatus, String)>> {
        self.rt.block_on(self.client.jobs())
    }

    /// Each live worker's utilization samples since `since` (Unix ms).
    pub fn node_samples(&self, since: u64) -> Result<Vec<(String, Vec<Sample>)>> {
        self.rt.block_on(self.client.node_samples(since))
    }

    /// Stores a file or directory as data set `name`.
    pub fn put(&self, path: &Path, name: &str, opts: &PutOptions) -> Result<DatasetMeta> {
        self.rt.block_on(self.client.put(path, name, opts))
    }

    /// Every data set, summed up, in name order.
    pub fn list(&self) -> Result<Vec<sluice_proto::proto::DatasetSummary>> {
        self.rt.block_on(self.client.list())
    }

    /// Data set `name`, with its blocks.
    pub fn dataset(&self, name: &str) -> Result<DatasetMeta> {
        self.rt.block_on(self.client.dataset(name))
    }

    /// Removes data set `name` and its blocks.
    pub fn remove(&self, name: &str) -> Result<()> {
        self.rt.block_on(self.client.remove(name))
    }

    /// Up to `max` bytes from the head of every block of data set `name`.
    pub fn block_heads(&self, name: &str, max: u64) -> Result<Vec<Vec<u8>>> {
        self.rt.block_on(self.client.block_heads(name, max))
    }

    /// Copies data set `name` to `out`; returns the bytes copied.
    pub fn get(&self, name: &str, out: &Path) -> Result<u64> {
        self.rt.block_on(self.client.get(name, out))
    }

    /// Submits a job; returns its id.
    pub fn submit(&self, request: &JobRequest, replication: u32) -> Result<JobId> {
        self.rt.block_on(self.client.submit(request, replication))
    }

    /// The scheduler's pools and their use; `reload` reads the pools file
    /// again first.
    pub fn pools(&self, reload: bool) -> Result<proto::PoolList> {
        self.rt.block_on(self.client.pools(reload))
    }

    /// Adds a cache directive.
    pub fn cache_add(&self, req: proto::CacheAddRequest) -> Result<proto::CacheDirective> {
        self.rt.block_on(self.client.cache_add(req))
    }

    /// Removes cache directive `id`, or (id 0) every directive of `dataset`.
    pub fn cache_remove(&self, id: u64, dataset: &str) -> Result<u32> {
        self.rt.block_on(self.client.cache_remove(id, dataset))
    }

    /// See [`Client::users`].
    pub fn users(&self, add: &str, remove: &str) -> Result<proto::UserList> {
        self.rt.block_on(self.client.users(add, remove))
    }

    /// See [`Client::share`].
    pub fn share(&self, req: proto::ShareRequest) -> Result<()> {
        self.rt.block_on(self.client.share(req))
    }

    /// See [`Client::cache_list`].
    pub fn cache_list(&self) -> Result<proto::CacheListReply> {
        self.rt.block_on(self.client.cache_list())
    }

    /// Ends running job `job`.
    pub fn kill(&self, job: JobId) -> Result<proto::JobStatus> {
        self.rt.block_on(self.client.kill(job))
    }

    /// Waits up to `wait` for job `job` to end; returns its status.
    pub fn wait(&self, job: JobId, wait: Duration) -> Result<proto::JobStatus> {
        self.rt.block_on(self.client.wait(job, wait))
    }
}
