//! Where a job runs: the local engine or a cluster.

use sluice_request::{JobRequest, Plan, Registry};

use crate::cluster::ClusterTarget;
use crate::error::DriverError;
use crate::local::LocalTarget;
use crate::report::JobReport;

/// Where jobs run.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// This process, on the local engine.
    Local(&'a LocalTarget),
    /// A cluster.
    Cluster(&'a ClusterTarget),
}

/// Runs one job of `plan` on `target`.
pub(crate) fn one(
    jobs: &Registry,
    req: JobRequest,
    plan: Plan,
    target: Target<'_>,
) -> Result<JobReport, DriverError> {
    match target {
        Target::Local(t) => t.run(jobs, req, plan).map(JobReport::from),
        Target::Cluster(t) => t.run(req, plan).map(JobReport::from),
    }
}
