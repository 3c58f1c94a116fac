//! Built-in jobs on the local engine, for the tools and benchmarks.

use std::path::Path;
use std::sync::Arc;

use sluice_driver::{JobReport, LocalTarget, Target, Watch};
use sluice_request::{JobRequest, Registry};

/// The local engine with the hardware profile at `hardware` (else the
/// default one), with a progress bar unless `quiet`.
pub fn target(hardware: Option<&Path>, quiet: bool) -> LocalTarget {
    LocalTarget {
        hardware: Some(crate::model::load_hardware(hardware)),
        watch: (!quiet).then(|| Arc::new(crate::progress::Bar) as Arc<dyn Watch>),
    }
}

/// Runs `req`, a built-in job, on the local engine quietly.
pub fn run_request(req: &JobRequest) -> anyhow::Result<Vec<JobReport>> {
    Ok(sluice_driver::run(
        &Registry::builtin(),
        req,
        Target::Local(&target(None, true)),
    )?)
}
