//! What the processes of a Sluice cluster share: the protocol.
//!
//! A coordinator (`sluice-coordinator`) keeps the data set catalog and
//! schedules jobs; each worker (`sluice-worker`) stores blocks of data sets
//! in its data directory and runs map and reduce tasks with the local
//! engine's code; clients (`sluice-client`) put and get data sets and
//! submit jobs. None of them depends on another; all depend on this crate:
//!
//! - the gRPC control plane ([`proto`]), every call signed over its whole
//!   content with the cluster's shared secret ([`signed`], [`auth`]);
//! - the framed TCP data plane for blocks and shuffle segments ([`data`]);
//! - the block store every replica lives in, with its checksums
//!   ([`block`]), in the worker's data directory ([`layout`]);
//! - which of several coordinators to follow ([`follow`]);
//! - the catalog's types ([`catalog`]), ids ([`ids`]), the job report
//!   ([`report`]) and utilization samples ([`sample`]).
//!
//! Threads: the gRPC servers and clients run on a tokio runtime; tasks and
//! the data plane run on plain OS threads with blocking I/O, as the local
//! engine does.

pub mod auth;
pub mod block;
pub mod capability;
pub mod catalog;
pub mod data;
mod error;
pub mod follow;
pub mod ids;
pub mod layout;
pub mod outputs;
pub mod report;
pub mod sample;
pub mod signed;
pub mod tls;
pub mod users;

pub use error::{ClusterError, InputDamage};

/// The generated control-plane protocol.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    tonic::include_proto!("sluice.v1");
}

/// Version of the control and data protocols; a worker of another version
/// is refused at registration.
pub const PROTOCOL_VERSION: u32 = 10;

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
