//! The Sluice local engine.
//!
//! [`run_job`] runs a [`JobSpec`] over input files on every core within a
//! memory budget: map tasks per split on a worker pool, map output collected
//! and spilled as sorted runs, merge passes when runs exceed the merge
//! factor, one reduce task per partition, and an atomic output commit (see
//! [`commit`]).
//!
//! Architecture invariant: CPU work runs on scoped OS threads ([`pool`]);
//! this crate has no async runtime and no terminal output.

pub mod cache;
pub mod commit;
mod config;
mod error;
mod map;
pub mod memory;
pub mod output;
pub mod pool;
mod progress;
mod reduce;
mod report;
pub mod residency;
mod sample;
mod task;
pub mod tasks;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub use config::{BadRecordPolicy, EngineConfig, SpillHook, COLLECT_SHARE, MIN_MEMORY};
pub use error::EngineError;
pub use progress::{Phase, Progress};
pub use report::{JobReport, PhaseTimes};
pub use sample::sample_records;
use sluice_api::JobSpec;
use sluice_formats::input;

use crate::commit::Committer;
use crate::map::MapPhase;
use crate::reduce::{ReduceOutput, ReducePhase};

/// Runs `job` over `input` (files, directories, globs, comma-separated),
/// committing to `output`. Nothing appears at `output` unless the job
/// succeeds.
pub fn run_job(
    job: &JobSpec,
    input: &str,
    output: &Path,
    cfg: &EngineConfig,
    progress: &Progress,
) -> Result<JobReport, EngineError> {
    cfg.validate()?;
    let files = input::resolve(input)?;
    let total = input::total_len(&files);
    let splits = input::plan_splits(&files, cfg.split_size_for(total), cfg.format);
    run_job_on(job, input, &splits, output, cfg, progress)
}

/// Runs `job` over the given splits (a range index's chunks, say), as
/// [`run_job`] does over all of its input. `input` names the input in the
/// report.
pub fn run_job_on(
    job: &JobSpec,
    input: &str,
    splits: &[input::Split],
    output: &Path,
    cfg: &EngineConfig,
    progress: &Progress,
) -> Result<JobReport, EngineError> {
    cfg.validate()?;
    let t0 = Instant::now();
    let committer = Committer::create(output, cfg.overwrite)?;
    let spill = SpillDir::create(cfg, &committer, !job.is_map_only())?;
    let total: u64 = splits.iter().map(input::Split::len).sum();
    let mut files: Vec<&std::path::Path> = splits.iter().map(|s| s.file.path.as_path()).collect();
    files.dedup();
    let target = if cfg.combine {
        cfg.split_size_for(total)
    } else {
        0
    };
    let tasks = input::combine(splits.to_vec(), target);
    // Where the input is before the job reads it, for the model.
    let residency = cfg
        .hardware
        .as_ref()
        .map(|_| residency::residency(splits, cfg));
    Progress::add(&progress.input_total, total);
    let mut report = JobReport {
        job: job.name.clone(),
        input: input.to_owned(),
        output: output.display().to_string(),
        threads: cfg.threads,
        memory_budget: cfg.memory,
        reducers: if job.is_map_only() { 0 } else { cfg.reducers },
        input_files: files.len(),
        splits: tasks.len(),
        input_bytes: total,
        ..JobReport::default()
    };
    report.phases.setup_s = cfg.before_s + t0.elapsed().as_secs_f64();

    progress.set_phase(Phase::Map);
    let t = Instant::now();
    let spill_target = cfg.spill_target(total, job.costly_combiner);
    report.sort_buffer_bytes = spill_target;
    let map = MapPhase {
        job,
        cfg,
        splits: &tasks,
        committer: &committer,
        spill_dir: &spill.path,
        spill_target,
        progress,
        spill_seq: AtomicUsize::new(0),
    }
    .run()?;
    report.phases.map_s = t.elapsed().as_secs_f64();
    report.spill_files = map.runs.len();
    let mut counters = map.counters;
    report.output_records = map.output_records;
    report.output_bytes = map.output_bytes;

    if !job.is_map_only() {
        let red = run_reduce(
            job,
            cfg,
            &committer,
            &spill.path,
            progress,
            &map.runs,
            &mut report,
        )?;
        counters.merge(&red.counters);
        report.output_records = red.output_records;
        report.output_bytes = red.output_bytes;
        report.merge_passes = red.merge_passes;
    }

    progress.set_phase(Phase::Commit);
    let t = Instant::now();
    drop(spill);
    committer.commit_job()?;
    report.phases.commit_s = t.elapsed().as_secs_f64();
    progress.set_phase(Phase::Done);

    report.set_counters(&counters);
    report.phases.total_s = cfg.before_s + t0.elapsed().as_secs_f64();
    report.peak_rss_bytes = memory::peak_rss();
    report.throughput_mb_s = total as f64 / 1e6 / report.phases.total_s.max(1e-9);
    if let (Some(hw), Some(r)) = (&cfg.hardware, residency) {
        report.model = Some(report.account(hw, cfg.memory as f64 * COLLECT_SHARE, r));
    }
    Ok(report)
}

fn run_reduce(
    job: &JobSpec,
    cfg: &EngineConfig,
    committer: &Committer,
    spill_dir: &Path,
    progress: &Progress,
    runs: &[PathBuf],
    report: &mut JobReport,
) -> Result<ReduceOutput, EngineError> {
    let phase = ReducePhase {
        job,
        cfg,
        committer,
        spill_dir,
        progress,
    };
    let mut out = ReduceOutput::default();
    progress.set_phase(Phase::Merge);
    let t = Instant::now();
    let runs = phase.merge_passes(runs.to_vec(), &mut out)?;
    report.phases.merge_s = t.elapsed().as_secs_f64();
    progress.set_phase(Phase::Reduce);
    let t = Instant::now();
    phase.reduce(&runs, &mut out)?;
    report.phases.reduce_s = t.elapsed().as_secs_f64();
    Ok(out)
}

/// The job's spill directory, removed when dropped.
struct SpillDir {
    path: PathBuf,
}

impl SpillDir {
    /// The job's spill directory, created only when `needed`: a map-only
    /// job writes no spill, and a directory made and removed for nothing
    /// was a tenth of a millisecond or more of a 15 ms job.
    fn create(
        cfg: &EngineConfig,
        committer: &Committer,
        needed: bool,
    ) -> Result<Self, EngineError> {
        let path = match &cfg.spill_dir {
            Some(base) => {
                let nanos = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                base.join(format!("sluice-spill-{}-{nanos}", std::process::id()))
            }
            None => committer.stage().join("_temporary").join("_spill"),
        };
        if needed {
            std::fs::create_dir_all(&path)
                .map_err(|e| EngineError::io("creating spill directory", &path, e))?;
        }
        Ok(SpillDir { path })
    }
}

impl Drop for SpillDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
