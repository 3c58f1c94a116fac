//! The coordinator of a Sluice cluster: the data set catalog and where
//! block replicas go ([`store`]), jobs, tasks and locality ([`sched`]),
//! which job a free slot goes to ([`policy`]), the state and the one event
//! handler that changes it ([`state`]), the control-plane service workers
//! and clients call ([`service`]), and the report of each finished job
//! ([`report`]).

pub mod arts;
pub mod bench;
pub mod combine;
pub mod editlog;
pub mod heal;
mod metrics;
pub mod policy;
pub mod queues;
pub mod report;
pub mod sched;
pub mod service;
pub mod state;
pub mod store;
mod web;

pub use service::{start, CoordinatorConfig, Scheduler, Started};

/// Scheduler settings from their command-line values (the rest default).
pub fn sched_settings(
    max_attempts: u32,
    delay: sched::Delay,
    reduce: arts::ReduceScheduler,
    speculative: bool,
    spec_slowdown: f64,
) -> sched::Settings {
    sched::Settings {
        max_attempts: max_attempts.max(1),
        delay,
        reduce: match reduce {
            arts::ReduceScheduler::SlowStart(f) => {
                arts::ReduceScheduler::SlowStart(f.clamp(0.0, 1.0))
            }
            r => r,
        },
        speculative,
        spec_slowdown: spec_slowdown.max(1.0),
        ..sched::Settings::default()
    }
}
