//! The driver: runs a [`JobRequest`] on a [`Target`], the local engine or
//! a cluster, the same way on both.
//!
//! It asks the job's kind for its [`Plan`]: a chain of jobs runs stage by
//! stage through temporaries it names and removes; a total-order job gets
//! its split points by sampling the input first (the files locally, the
//! heads of a data set's blocks on a cluster). Locally it also prunes the
//! input by a range index when the job has a key range, and reads side
//! inputs from their files; a cluster copies side inputs itself.
//!
//! # Layout
//!
//! `lib.rs` runs a request; `chain.rs` runs a chain, resolving its stage
//! references; `target.rs` runs one job on a [`Target`]; `local.rs` and
//! `cluster.rs` are the two targets; `sample.rs` samples split points,
//! `splits.rs` plans an input's splits and `props.rs` sets the properties
//! the driver adds to a request. No two import each other: `lib.rs` above
//! `chain.rs` above `target.rs` above the targets above the rest.

mod chain;
mod cluster;
mod error;
mod local;
mod props;
mod report;
mod sample;
mod splits;
mod target;

use sluice_request::{JobRequest, Plan, Registry};

pub use cluster::{get_to_store, ClusterTarget, StatusWatch};
pub use error::DriverError;
pub use local::{LocalTarget, Watch};
pub use report::{JobReport, Phases};
pub use splits::plan;
pub use target::Target;

/// Runs `req` on `target`: the reports of its jobs, in order (three for
/// the baseline join).
pub fn run(
    jobs: &Registry,
    req: &JobRequest,
    target: Target<'_>,
) -> Result<Vec<JobReport>, DriverError> {
    req.check_properties()?;
    let mut req = req.clone();
    if req.reducers.is_none() {
        // One number for every process of the job.
        req.reducers = Some(sluice_request::settings(&req).reducers);
    }
    match jobs.get(&req.job)?.plan(&req)? {
        Plan::Chain(stages) => chain::chain(jobs, stages, target),
        plan => target::one(jobs, req, plan, target).map(|r| vec![r]),
    }
}
