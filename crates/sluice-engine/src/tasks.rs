//! Single map and reduce tasks, for a cluster worker.
//!
//! A cluster runs a job as separate tasks on separate processes: a map task
//! reads its input blocks (one, or several small ones) and leaves its output as one sorted, partitioned
//! spill file (the format of [`sluice_formats::spill`], whose trailer is the
//! per-partition index reducers fetch by); a reduce task merges the
//! partition segments fetched from every map and writes one part file. The
//! code is the local engine's: `MapPhase` on one split, the merge of
//! `ReducePhase`, and its reduce of one partition.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;

use sluice_api::{Counters, JobSpec};
use sluice_formats::input::MapSplit;
use sluice_formats::spill::SpillWriter;

use crate::commit::Committer;
use crate::config::EngineConfig;
use crate::map::{MapOutput, MapPhase};
use crate::progress::Progress;
use crate::reduce::{open_runs, ReduceOutput, ReducePhase};
use crate::EngineError;

type Result<T> = std::result::Result<T, EngineError>;

/// What one task produced.
#[derive(Debug, Default, Clone)]
pub struct TaskOutput {
    /// The task's counters.
    pub counters: Counters,
    /// Records written to the task's output.
    pub output_records: u64,
    /// Bytes written to the task's output.
    pub output_bytes: u64,
    /// Spill runs the map wrote before its final merge.
    pub spill_files: usize,
}

/// Runs the map task of a job with a reduce phase over `split`, leaving its
/// output at `out` as one spill file of `cfg.reducers` partitions. Scratch
/// files go to a directory beside `out`, removed afterwards.
pub fn map_task(
    job: &JobSpec,
    cfg: &EngineConfig,
    split: &MapSplit,
    out: &Path,
) -> Result<TaskOutput> {
    cfg.validate()?;
    let scratch = Scratch::beside(out)?;
    let committer = Committer::create(&scratch.0.join("side"), true)?;
    let spill_dir = scratch.0.join("spill");
    std::fs::create_dir_all(&spill_dir)
        .map_err(|e| EngineError::io("creating spill directory", &spill_dir, e))?;
    let progress = Progress::default();
    let map = map_phase(job, cfg, split, &committer, &spill_dir)?;
    let mut counters = map.counters;
    let spill_files = map.runs.len();
    let phase = ReducePhase {
        job,
        cfg,
        committer: &committer,
        spill_dir: &spill_dir,
        progress: &progress,
    };
    single_run(&phase, map.runs, out, &mut counters)?;
    Ok(TaskOutput {
        counters,
        spill_files,
        ..TaskOutput::default()
    })
}

/// The local engine's map phase over one split.
fn map_phase(
    job: &JobSpec,
    cfg: &EngineConfig,
    split: &MapSplit,
    committer: &Committer,
    spill_dir: &Path,
) -> Result<MapOutput> {
    MapPhase {
        job,
        cfg,
        splits: std::slice::from_ref(split),
        committer,
        spill_dir,
        // The map's runs are merged into one: as few as the budget allows.
        spill_target: cfg.collect_budget(),
        progress: &Progress::default(),
        spill_seq: AtomicUsize::new(0),
    }
    .run()
}

/// Leaves the map's runs as one run at `out`: renamed when there is one,
/// merged (combining on the way) when there are several, an empty spill of
/// every partition when there are none.
fn single_run(
    phase: &ReducePhase<'_>,
    runs: Vec<PathBuf>,
    out: &Path,
    counters: &mut Counters,
) -> Result<()> {
    // Written beside `out` and renamed into place, so `out` only ever
    // holds a whole map output.
    let name = out
        .file_name()
        .map_or_else(|| "map-output".into(), |n| n.to_string_lossy().into_owned());
    let tmp = out.with_file_name(format!(".{name}.tmp"));
    match runs.len() {
        0 => {
            let w = SpillWriter::create(&tmp, phase.cfg.reducers)?;
            w.finish()?;
        }
        1 => std::fs::rename(&runs[0], &tmp)
            .map_err(|e| EngineError::io("moving map output", &tmp, e))?,
        _ => {
            let mut merged = ReduceOutput::default();
            let runs = phase.merge_passes(runs, &mut merged)?;
            counters.merge(&merged.counters);
            phase.merge_group(&runs, &tmp, counters)?;
        }
    }
    std::fs::rename(&tmp, out).map_err(|e| EngineError::io("moving map output", out, e))
}

/// Runs the map task of a map-only job over `split`, committing
/// `part-m-NNNNN` (NNNNN = the split's index) into the directory `out_dir`.
pub fn map_only_task(
    job: &JobSpec,
    cfg: &EngineConfig,
    split: &MapSplit,
    out_dir: &Path,
) -> Result<TaskOutput> {
    cfg.validate()?;
    let committer = Committer::create(out_dir, true)?;
    let spill_dir = committer.stage().join("_temporary").join("_spill");
    let map = map_phase(job, cfg, split, &committer, &spill_dir)?;
    committer.commit_job()?;
    Ok(TaskOutput {
        counters: map.counters,
        output_records: map.output_records,
        output_bytes: map.output_bytes,
        spill_files: 0,
    })
}

/// Runs reduce task `partition` over `inputs`, spill files of one
/// partition each (the segments fetched from every map), committing
/// `part-r-NNNNN` into the directory `out_dir`. The inputs are consumed.
pub fn reduce_task(
    job: &JobSpec,
    cfg: &EngineConfig,
    partition: u32,
    inputs: Vec<PathBuf>,
    out_dir: &Path,
) -> Result<TaskOutput> {
    cfg.validate()?;
    let committer = Committer::create(out_dir, true)?;
    let spill_dir = committer.stage().join("_temporary").join("_spill");
    std::fs::create_dir_all(&spill_dir)
        .map_err(|e| EngineError::io("creating spill directory", &spill_dir, e))?;
    let progress = Progress::default();
    let one = EngineConfig {
        reducers: 1,
        ..cfg.clone()
    };
    let phase = ReducePhase {
        job,
        cfg: &one,
        committer: &committer,
        spill_dir: &spill_dir,
        progress: &progress,
    };
    let mut out = ReduceOutput::default();
    let runs = if inputs.len() > one.fan_in() {
        phase.merge_passes(inputs, &mut out)?
    } else {
        open_runs(&inputs)?
    };
    let name = format!("part-r-{partition:05}");
    phase.reduce_partition(0, partition, &name, &runs, &mut out)?;
    drop(runs);
    committer.commit_job()?;
    Ok(TaskOutput {
        counters: out.counters,
        output_records: out.output_records,
        output_bytes: out.output_bytes,
        spill_files: 0,
    })
}

/// A scratch directory beside a path, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn beside(path: &Path) -> Result<Self> {
        let mut name = path.as_os_str().to_owned();
        name.push(".scratch");
        let dir = PathBuf::from(name);
        std::fs::create_dir_all(&dir).map_err(|e| EngineError::io("creating", &dir, e))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
