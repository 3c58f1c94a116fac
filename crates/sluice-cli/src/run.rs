//! `sluice run`.

use std::path::Path;

use anyhow::Context;
use sluice_driver::{JobReport, Target};

use crate::args::RunArgs;
use crate::summary::print_summary;

/// Runs the job (three jobs for the baseline join) on `target`, writes
/// the report when asked, prints the summary unless quiet; returns the
/// reports. `sluice run` and `sluice submit` both end here.
pub fn run_on(args: &RunArgs, target: Target<'_>) -> anyhow::Result<Vec<JobReport>> {
    let req = args.request()?;
    let reports = sluice_driver::run(&crate::args::jobs(), &req, target)?;
    if let Some(path) = &args.report {
        write_report(path, &reports)?;
    }
    if !args.quiet {
        reports.iter().for_each(print_summary);
        if req.job == "kmeans" {
            print_kmeans_end(&req, &reports);
        }
    }
    Ok(reports)
}

/// How many k-means iterations ran and why they stopped.
fn print_kmeans_end(req: &sluice_request::JobRequest, reports: &[JobReport]) {
    let Ok(p) = req.params::<sluice_request::KmeansParams>() else {
        return;
    };
    let counter = |r: &JobReport, name: &str| {
        let key = format!("{}.{name}", sluice_jobs::kmeans::COUNTER_GROUP);
        r.user_counters.get(&key).copied()
    };
    let ran: u64 = reports
        .iter()
        .filter_map(|r| counter(r, sluice_jobs::kmeans::ITERATIONS))
        .sum();
    let last_moved = reports
        .iter()
        .rev()
        .find(|r| counter(r, sluice_jobs::kmeans::ITERATIONS).is_some())
        .map(|r| counter(r, sluice_jobs::kmeans::MOVED).unwrap_or(0));
    let why = match last_moved {
        Some(0) if p.tolerance > 0.0 => format!(
            "converged: no centre moved {} or more in the last one",
            p.tolerance
        ),
        _ => "ran every iteration asked for".to_owned(),
    };
    eprintln!("k-means  {ran} of {} iterations ran; {why}", p.iterations);
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
