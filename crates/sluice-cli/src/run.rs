//! `sluice run`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sluice_api::{JobSpec, KeyOrder};
use sluice_engine::{run_job, BadRecordPolicy, EngineConfig, JobReport, Phase, Progress};
use sluice_formats::input;
use sluice_jobs::Grouping;

use crate::summary::{bar, print_summary};
use crate::{BadRecordsArg, GroupingArg, JobName, KeyOrderArg, RunArgs};

/// Samples per split for the sort job's range partitioner.
const SORT_SAMPLES_PER_SPLIT: usize = 100;

pub fn run(args: &RunArgs) -> anyhow::Result<JobReport> {
    let cfg = config(args);
    let job = build_job(args, &cfg)?;
    let progress = Arc::new(Progress::default());
    let report = with_progress(&progress, args.quiet, || {
        run_job(&job, &args.input, &args.output, &cfg, &progress)
    })?;
    if let Some(path) = &args.report {
        std::fs::write(path, report.to_json())
            .with_context(|| format!("writing report {}", path.display()))?;
    }
    if !args.quiet {
        print_summary(&report);
    }
    Ok(report)
}

fn config(args: &RunArgs) -> EngineConfig {
    let mut cfg = EngineConfig::default();
    if let Some(t) = args.threads {
        cfg.threads = t;
    }
    cfg.reducers = args.reducers.unwrap_or(cfg.threads.max(1) as u32);
    cfg.memory = args.memory;
    cfg.max_record = usize::try_from(args.max_record_size).unwrap_or(usize::MAX);
    cfg.split_size = args.split_size;
    cfg.spill_dir = args.spill_dir.clone();
    cfg.merge_factor = args.merge_factor;
    cfg.overwrite = args.overwrite;
    cfg.hardware = Some(crate::model::load_hardware(args.hardware.as_deref()));
    cfg.bad_records = match args.bad_records {
        BadRecordsArg::Fail => BadRecordPolicy::Fail,
        BadRecordsArg::Skip => BadRecordPolicy::Skip,
    };
    cfg
}

fn build_job(args: &RunArgs, cfg: &EngineConfig) -> anyhow::Result<JobSpec> {
    Ok(match args.job {
        JobName::Wordcount => sluice_jobs::wordcount(match args.grouping {
            GroupingArg::Hash => Grouping::Hash,
            GroupingArg::Sort => Grouping::Sort,
        })
        .key_order(match args.key_order {
            KeyOrderArg::Bytewise => KeyOrder::Bytewise,
            KeyOrderArg::Fingerprint => KeyOrder::Fingerprint,
        }),
        JobName::Grep => {
            let pattern = args
                .pattern
                .as_deref()
                .context("grep needs --pattern REGEX")?;
            sluice_jobs::grep(pattern).with_context(|| format!("invalid --pattern '{pattern}'"))?
        }
        JobName::Sort => {
            anyhow::ensure!(
                args.key_order == KeyOrderArg::Bytewise,
                "sort needs --key-order bytewise: its output is a total order"
            );
            sluice_jobs::sort(sample(args, cfg)?, cfg.reducers)
        }
    })
}

/// Samples input lines for the sort job's split points.
fn sample(args: &RunArgs, cfg: &EngineConfig) -> anyhow::Result<Vec<Vec<u8>>> {
    if cfg.reducers <= 1 {
        return Ok(Vec::new());
    }
    let files = input::resolve(&args.input)?;
    let total = input::total_len(&files);
    let splits = input::plan_splits(&files, cfg.split_size_for(total), cfg.format);
    Ok(sluice_engine::sample_records(
        &splits,
        cfg.format,
        cfg.max_record,
        SORT_SAMPLES_PER_SPLIT,
    )?)
}

/// Runs `f` while a progress bar (on a terminal only) follows `progress`.
fn with_progress<T>(progress: &Arc<Progress>, quiet: bool, f: impl FnOnce() -> T) -> T {
    let pb = bar(0, "map");
    if quiet {
        pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (progress, done, pb) = (progress.clone(), done.clone(), pb.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                update(&pb, &progress);
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let r = f();
    done.store(true, Ordering::Relaxed);
    let _ = watcher.join();
    pb.finish_and_clear();
    r
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
