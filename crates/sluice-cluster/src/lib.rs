//! Sluice on a cluster of processes.
//!
//! A [`coordinator`] keeps the data set catalog and schedules jobs; each
//! [`worker`] stores blocks of data sets in its data directory and runs map
//! and reduce tasks with the local engine's code
//! ([`sluice_engine::tasks`]). The control plane is gRPC ([`proto`]);
//! blocks and shuffle segments move over the framed TCP data plane of
//! [`data`]. Every request is authenticated with the cluster's shared
//! secret ([`auth`]); shuffle fetches carry a per-job token.
//!
//! Threads: the gRPC servers and clients run on a tokio runtime; tasks and
//! the data plane run on plain OS threads with blocking I/O, as the local
//! engine does.

pub mod auth;
pub mod block;
pub mod catalog;
pub mod client;
pub mod coordinator;
pub mod data;
pub mod embedded;
mod error;
pub mod ids;
pub mod report;
pub mod sample;
pub mod sched;
pub mod signed;
pub mod worker;

pub use error::ClusterError;

/// The generated control-plane protocol.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    tonic::include_proto!("sluice.v1");
}

/// Version of the control and data protocols; a worker of another version
/// is refused at registration.
pub const PROTOCOL_VERSION: u32 = 5;

/// Scheduler settings from their command-line values (the rest default).
pub fn sched_settings(
    max_attempts: u32,
    locality_wait: std::time::Duration,
    slowstart: f64,
    speculative: bool,
    spec_slowdown: f64,
) -> sched::Settings {
    sched::Settings {
        max_attempts: max_attempts.max(1),
        locality_wait,
        slowstart: slowstart.clamp(0.0, 1.0),
        speculative,
        spec_slowdown: spec_slowdown.max(1.0),
        ..sched::Settings::default()
    }
}

/// The memory budget of one task on a worker with `memory` bytes shared by
/// `slots` map slots and as many reduce slots.
pub fn task_share(memory: u64, slots: u32) -> u64 {
    memory / (2 * u64::from(slots.max(1)))
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
