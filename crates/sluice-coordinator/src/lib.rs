//! The coordinator of a Sluice cluster: the data set catalog and where
//! block replicas go ([`store`]), jobs, tasks and locality ([`sched`]),
//! which job a free slot goes to ([`policy`]), the state and the one event
//! handler that changes it ([`state`]), the control-plane service workers
//! and clients call ([`service`]), and the report of each finished job
//! ([`report`]). Leaves that the rest import and that import none of
//! them: [`config`] (the coordinator's and the scheduler's settings),
//! [`input`] (what a map reads), and `core` (the state and its writers
//! behind the service's lock).

mod access;
#[cfg(test)]
mod access_tests;
pub mod arts;
pub mod bench;
pub mod combine;
pub mod config;
mod core;
pub mod crash;
pub mod durable;
pub mod editlog;
pub mod ha;
pub mod heal;
pub mod input;
pub mod joblog;
mod metrics;
pub mod policy;
pub mod queues;
pub mod report;
pub mod rowfile;
pub mod sched;
pub mod service;
pub mod state;
pub mod store;
pub mod term;
mod web;

pub use config::{sched_settings, CoordinatorConfig, Delay, Scheduler, Settings};
pub use service::{start, start_with, Started};
