//! A worker's settings.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sluice_proto::auth::Secret;
use sluice_request::Registry;

use crate::cache;

/// Worker settings.
pub struct WorkerConfig {
    /// The coordinator's address, or every coordinator's (`A,B`): the
    /// worker follows the active one.
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
