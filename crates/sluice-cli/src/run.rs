//! `sluice run`.

use std::path::Path;

use anyhow::Context;
use sluice_driver::{JobReport, Target};

use crate::summary::print_summary;
use crate::RunArgs;

/// Runs the job (three jobs for the baseline join) on `target`, writes
/// the report when asked, prints the summary unless quiet; returns the
/// reports. `sluice run` and `sluice submit` both end here.
pub fn run_on(args: &RunArgs, target: Target<'_>) -> anyhow::Result<Vec<JobReport>> {
    let req = args.request()?;
    let reports = sluice_driver::run(&crate::jobs(), &req, target)?;
    if let Some(path) = &args.report {
        write_report(path, &reports)?;
    }
    if !args.quiet {
        reports.iter().for_each(print_summary);
    }
    Ok(reports)
}

/// `sluice run`.
pub fn run(args: &RunArgs) -> anyhow::Result<Vec<JobReport>> {
    let local = sluice_tools::local::target(args.hardware.as_deref(), args.quiet);
    run_on(args, Target::Local(&local))
}

/// Writes one report, or the array of a chain's reports.
pub(crate) fn write_report(path: &Path, reports: &[JobReport]) -> anyhow::Result<()> {
    let json = match reports {
        [one] => one.to_json(),
        many => serde_json::to_string_pretty(many)?,
    };
    std::fs::write(path, json).with_context(|| format!("writing report {}", path.display()))
}
