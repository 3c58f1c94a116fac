//! `sluice run`.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sluice_driver::{LocalTarget, Report, Target, Watch};
use sluice_engine::{JobReport, Phase, Progress};
use sluice_request::JobRequest;

use crate::summary::{bar, print_summary};
use crate::RunArgs;

/// Runs the job (three jobs for the baseline join) and returns the reports.
pub fn run(args: &RunArgs) -> anyhow::Result<Vec<JobReport>> {
    let req = args.request()?;
    let reports = run_request(&req, args.hardware.as_deref(), args.quiet)?;
    if let Some(path) = &args.report {
        write_report(path, &reports)?;
    }
    if !args.quiet {
        reports.iter().for_each(print_summary);
    }
    Ok(reports)
}

/// Runs `req` on the local engine, with a progress bar unless `quiet`.
pub fn run_request(
    req: &JobRequest,
    hardware: Option<&Path>,
    quiet: bool,
) -> anyhow::Result<Vec<JobReport>> {
    let target = LocalTarget {
        hardware: Some(crate::model::load_hardware(hardware)),
        watch: (!quiet).then(|| Arc::new(Bar) as Arc<dyn Watch>),
    };
    let reports = sluice_driver::run(&crate::jobs(), req, Target::Local(&target))?;
    Ok(reports
        .into_iter()
        .filter_map(|r| match r {
            Report::Local(r) => Some(r),
            Report::Cluster(_) => None,
        })
        .collect())
}

/// Runs one job made here (not from a request) with a progress bar.
pub fn run_spec(
    job: &sluice_api::JobSpec,
    input: &str,
    splits: &[sluice_formats::input::Split],
    output: &Path,
    cfg: &sluice_engine::EngineConfig,
    quiet: bool,
) -> anyhow::Result<JobReport> {
    let progress = Arc::new(Progress::default());
    let _watching = (!quiet).then(|| Bar.watch(progress.clone()));
    Ok(sluice_engine::run_job_on(
        job, input, splits, output, cfg, &progress,
    )?)
}

/// Writes one report, or the array of a chain's reports.
fn write_report(path: &Path, reports: &[JobReport]) -> anyhow::Result<()> {
    let json = match reports {
        [one] => one.to_json(),
        many => serde_json::to_string_pretty(many)?,
    };
    std::fs::write(path, json).with_context(|| format!("writing report {}", path.display()))
}

/// A progress bar (drawn on a terminal only) for each local job.
struct Bar;

/// Stops its bar when dropped.
struct Watching {
    done: Option<Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    pb: indicatif::ProgressBar,
}

impl Watch for Bar {
    fn watch(&self, progress: Arc<Progress>) -> Box<dyn std::any::Any> {
        let pb = bar(0, "map");
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let thread = {
            let pb = pb.clone();
            std::thread::spawn(move || loop {
                update(&pb, &progress);
                // Wakes at once when the job ends and the sender is dropped.
                if finished.recv_timeout(Duration::from_millis(100))
                    != Err(RecvTimeoutError::Timeout)
                {
                    return;
                }
            })
        };
        Box::new(Watching {
            done: Some(done),
            thread: Some(thread),
            pb,
        })
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        drop(self.done.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.pb.finish_and_clear();
    }
}

fn update(pb: &indicatif::ProgressBar, p: &Progress) {
    let (len, pos, msg) = match p.phase() {
        Phase::Setup | Phase::Map => (
            p.input_total.load(Ordering::Relaxed),
            p.input_done.load(Ordering::Relaxed),
            "map",
        ),
        Phase::Merge => (1, 0, "merge"),
        Phase::Reduce | Phase::Commit | Phase::Done => (
            p.partitions_total.load(Ordering::Relaxed),
            p.partitions_done.load(Ordering::Relaxed),
            "reduce",
        ),
    };
    pb.set_length(len);
    pb.set_position(pos);
    pb.set_message(msg);
}
