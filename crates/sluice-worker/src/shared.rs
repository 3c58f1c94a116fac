//! What a worker's threads share: its settings, its connections, its
//! block store and cache, and its state behind two locks, the attempts'
//! lifecycle ([`Tasks`]) and what the next heartbeat carries
//! ([`Outbox`]). Neither lock is held across an `.await` or any I/O.

use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard};

use sluice_proto::data::Layout;
use sluice_proto::follow::Following;
use sluice_proto::proto;
use sluice_proto::signed::Rpc;
use tokio::runtime::Handle;

use crate::cache::BlockCache;
use crate::config::WorkerConfig;
use crate::metrics::WorkerMetrics;
use crate::outbox::Outbox;
use crate::tasks::Tasks;

/// The worker, as its threads and tasks see it.
pub(crate) struct Shared {
    pub cfg: WorkerConfig,
    pub metrics: Arc<WorkerMetrics>,
    /// Where `/metrics` is served (empty: nowhere).
    pub http_addr: String,
    pub uid: String,
    pub data_addr: String,
    pub layout: Layout,
    /// The coordinator followed (one of several, when given several).
    pub coordinator: Following,
    /// How long the coordinator holds a heartbeat (ms), as it said at
    /// registration.
    pub heartbeat_ms: std::sync::atomic::AtomicU64,
    pub rt: Handle,
    /// Every attempt running here, and the jobs built and ended.
    pub tasks: Arc<Mutex<Tasks>>,
    /// The session and what the next heartbeat carries.
    pub outbox: Mutex<Outbox>,
    pub cache: Arc<BlockCache>,
    /// Blocks for the cache's loading thread.
    pub loader: Sender<Pin>,
}

/// A block a directive pins here, for the cache's loading thread.
pub(crate) struct Pin(pub proto::BlockInfo);

impl Shared {
    /// A channel to the coordinator followed now.
    pub fn rpc(&self) -> Rpc {
        self.coordinator.rpc()
    }

    /// The attempts' lifecycle, locked.
    pub fn tasks(&self) -> MutexGuard<'_, Tasks> {
        lock(&self.tasks)
    }

    /// The heartbeat's outbox, locked.
    pub fn outbox(&self) -> MutexGuard<'_, Outbox> {
        lock(&self.outbox)
    }

    /// Reports a damaged replica on the next heartbeat.
    pub fn report_corrupt(&self, c: proto::CorruptReplica) {
        self.outbox().corrupt(c);
    }

    /// A damaged replica of block `id` on this worker.
    pub fn own_damage(&self, id: &str, detail: &str) -> proto::CorruptReplica {
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

/// `m` locked; a panic of another holder does not poison it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
