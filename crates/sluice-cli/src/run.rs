//! `sluice run`.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sluice_driver::{JobReport, LocalTarget, Target, Watch};
use sluice_engine::{Phase, Progress};
use sluice_request::JobRequest;

use crate::summary::{bar, print_summary};
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
    run_on(
        args,
        Target::Local(&local(args.hardware.as_deref(), args.quiet)),
    )
}

/// The local engine, with a progress bar unless `quiet`.
fn local(hardware: Option<&Path>, quiet: bool) -> LocalTarget {
    LocalTarget {
        hardware: Some(crate::model::load_hardware(hardware)),
        watch: (!quiet).then(|| Arc::new(Bar) as Arc<dyn Watch>),
    }
}

/// Runs `req` on the local engine, quietly.
pub fn run_request(req: &JobRequest) -> anyhow::Result<Vec<JobReport>> {
    Ok(sluice_driver::run(
        &crate::jobs(),
        req,
        Target::Local(&local(None, true)),
    )?)
}

/// Runs one job made here (not from a request) with a progress bar.
pub fn run_spec(
    job: &sluice_api::JobSpec,
    input: &str,
    splits: &[sluice_formats::input::Split],
    output: &Path,
    cfg: &sluice_engine::EngineConfig,
    quiet: bool,
) -> anyhow::Result<sluice_engine::JobReport> {
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
