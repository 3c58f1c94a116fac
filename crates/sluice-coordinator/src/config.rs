//! The coordinator's settings: where it listens and keeps its state, its
//! scheduling policy, and the scheduler's settings.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sluice_proto::auth::Secret;
use sluice_proto::ClusterError;
use sluice_request::Registry;

use crate::arts::{Links, ReduceScheduler};
use crate::policy::{Fair, Fifo, Policy, Pools};
use crate::store::PlacementPolicy;

/// Coordinator settings.
#[derive(Clone)]
pub struct CoordinatorConfig {
    pub listen: SocketAddr,
    pub state_dir: PathBuf,
    pub secret: Secret,
    pub heartbeat: Duration,
    pub worker_timeout: Duration,
    pub settings: Settings,
    /// The job kinds this cluster runs.
    pub jobs: Arc<Registry>,
    pub placement: Arc<dyn PlacementPolicy>,
    /// How long a block that no data set, put or job knows may sit on a
    /// worker before the worker is told to delete it.
    pub orphan_grace: Duration,
    /// The scheduling policy: FIFO, or fair over the pools of a file.
    pub scheduler: Scheduler,
    /// Fair preemption: a pool short of its minimum share this long takes
    /// slots back from pools over their share (`None`: never).
    pub preemption_timeout: Option<Duration>,
    /// Where the web pages and `/metrics` are served (`None`: not at all).
    pub http: Option<SocketAddr>,
    /// Finished jobs whose reports are kept in `STATE_DIR/history`.
    pub history: usize,
    /// Each worker's disk and network rates, for the model's account of a
    /// job (a probe's profile, or stated defaults).
    pub hardware: sluice_model::Hardware,
    /// Re-replication copies one worker sends at once (0: no
    /// re-replication).
    pub replication_streams: usize,
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

/// Scheduler settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Failures of one task before the job fails.
    pub max_attempts: u32,
    /// Delay scheduling's thresholds of missed offers.
    pub delay: Delay,
    /// When reduces start.
    pub reduce: ReduceScheduler,
    /// Maps never run outside the data centers holding their blocks.
    pub dc_local_maps: bool,
    /// Bandwidths between data centers (ARTS's copy time).
    pub links: Links,
    /// Whether to launch backup attempts of stragglers.
    pub speculative: bool,
    /// A task slower than this times its phase's median is a straggler.
    pub spec_slowdown: f64,
    /// No task younger than this is a straggler.
    pub spec_min: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_attempts: 4,
            delay: Delay::default(),
            reduce: ReduceScheduler::SlowStart(0.8),
            dc_local_maps: false,
            links: Links::default(),
            speculative: true,
            spec_slowdown: 1.5,
            spec_min: Duration::from_secs(2),
        }
    }
}

/// Missed offers after which a job may go one locality level down, as
/// seed 002 words it: a job with `m` missed offers accepts only
/// cache-local maps while `m <= cache` (when any of its blocks is
/// cached), node-local ones while `m <= node`, rack-local ones while `m <=
/// rack`, maps in their data center while `m <= datacenter`, and any
/// worker after that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delay {
    pub cache: u32,
    pub node: u32,
    pub rack: u32,
    pub datacenter: u32,
}

impl Default for Delay {
    /// Seed 002's thresholds (20 cache, 40 in total for node), and 20 more
    /// offers for each level after.
    fn default() -> Self {
        Delay {
            cache: 20,
            node: 40,
            rack: 60,
            datacenter: 80,
        }
    }
}

/// Scheduler settings from their command-line values (the rest default).
pub fn sched_settings(
    max_attempts: u32,
    delay: Delay,
    reduce: ReduceScheduler,
    speculative: bool,
    spec_slowdown: f64,
) -> Settings {
    Settings {
        max_attempts: max_attempts.max(1),
        delay,
        reduce: match reduce {
            ReduceScheduler::SlowStart(f) => ReduceScheduler::SlowStart(f.clamp(0.0, 1.0)),
            r => r,
        },
        speculative,
        spec_slowdown: spec_slowdown.max(1.0),
        ..Settings::default()
    }
}
