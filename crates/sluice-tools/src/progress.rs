//! Progress display: bars on stderr (drawn on a terminal only) for jobs
//! and generators.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sluice_driver::Watch;
use sluice_engine::{Phase, Progress};

/// A progress bar on stderr, hidden when stderr is not a terminal.
pub fn bar(len: u64, msg: &'static str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    if !std::io::stderr().is_terminal() {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    let style = ProgressStyle::with_template(
        "{msg:>8} [{bar:40}] {percent:>3}% {elapsed_precise} eta {eta}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    pb.set_style(style);
    pb.set_message(msg);
    pb
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

/// A progress bar (drawn on a terminal only) for each local job.
pub struct Bar;

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
