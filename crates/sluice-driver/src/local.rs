//! Jobs on the local engine.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_engine::{run_job_on, EngineConfig, JobReport, Progress};
use sluice_formats::index::{index_dir, RangeIndex};
use sluice_formats::input::{self, Split};
use sluice_request::{BuildContext, JobKind, JobRequest, Plan, Registry};

use crate::error::DriverError;
use crate::splits::plan;

/// Follows a running local job (a progress bar): `watch` is called when
/// the job starts, and what it returns is dropped when the job ends.
pub trait Watch: Send + Sync {
    /// Starts following `progress`.
    fn watch(&self, progress: Arc<Progress>) -> Box<dyn std::any::Any>;
}

/// The local engine as a target.
#[derive(Default)]
pub struct LocalTarget {
    /// Disk and network rates for the report's model.
    pub hardware: Option<sluice_model::Hardware>,
    /// Who follows each job's progress.
    pub watch: Option<Arc<dyn Watch>>,
}

impl std::fmt::Debug for LocalTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalTarget").finish_non_exhaustive()
    }
}

impl LocalTarget {
    /// Runs one job of a plan.
    pub(crate) fn run(
        &self,
        jobs: &Registry,
        req: JobRequest,
        plan: Plan,
    ) -> Result<JobReport, DriverError> {
        if !sluice_storage::is_remote(&req.output) {
            return self.run_here(jobs, req, plan);
        }
        // An object store has no rename: the job commits to a local
        // directory, whose files are then committed to the store.
        let url = req.output.clone();
        sluice_storage::check_output(&url, req.overwrite)?;
        let staging = tempfile::Builder::new()
            .prefix(".sluice-staging-")
            .tempdir()
            .map_err(DriverError::io("creating a staging directory"))?;
        let local = staging.path().join("out");
        let overwrite = req.overwrite;
        let mut staged = JobRequest {
            output: local.display().to_string(),
            overwrite: false,
            ..req
        };
        crate::props::unsynced(&mut staged);
        let mut report = self.run_here(jobs, staged, plan)?;
        sluice_storage::commit(&local, &url, overwrite)?;
        report.output = url;
        Ok(report)
    }

    /// Runs one job of a plan whose output is a local directory.
    fn run_here(
        &self,
        jobs: &Registry,
        mut req: JobRequest,
        plan: Plan,
    ) -> Result<JobReport, DriverError> {
        let kind = jobs.get(&req.job)?;
        let t0 = std::time::Instant::now();
        // Where the input is before the job reads any of it (sampling
        // does), for the model.
        let cached = self
            .hardware
            .as_ref()
            .and_then(|_| input::resolve(&req.input).ok())
            .map(|files| sluice_engine::residency::files_cached(&files));
        if let Plan::Sample(s) = plan {
            req.split_points = Some(crate::sample::split_points(&req.input, s, &req)?);
        }
        // A first build checks the request and gives the record format
        // the input is planned with.
        let (_, probe_cfg) = jobs.build(&req, &BuildContext::default())?;
        let splits = input_splits(kind, &req, &probe_cfg)?;
        let side = side_files(kind, &req)?;
        let ctx = BuildContext {
            side: Some(&side),
            splits: Some(&splits),
            cluster: false,
        };
        let (built, mut cfg) = jobs.build(&req, &ctx)?;
        cfg.hardware = self.hardware.clone();
        cfg.input_cached = cached;
        let (name, splits) = built.input.unwrap_or((req.input.clone(), splits));
        let progress = Arc::new(Progress::default());
        let _watching = self.watch.as_ref().map(|w| w.watch(progress.clone()));
        let output = Path::new(&req.output);
        cfg.before_s = t0.elapsed().as_secs_f64();
        Ok(run_job_on(
            &built.spec,
            &name,
            &splits,
            output,
            &cfg,
            &progress,
        )?)
    }
}

/// The splits to read: only the chunks a range index says can match, when
/// the input is an indexed data set and the job has a key range on its
/// key; else all of the input.
fn input_splits(
    kind: &dyn JobKind,
    req: &JobRequest,
    cfg: &EngineConfig,
) -> Result<Vec<Split>, DriverError> {
    let Some(dir) = index_dir(&req.input) else {
        return plan(&req.input, cfg);
    };
    let idx = RangeIndex::load(&dir)?;
    match kind.key_range(req, idx.field, idx.key_type) {
        Some((lo, hi)) => Ok(idx.splits(&dir, lo.as_deref(), hi.as_deref())?),
        None => plan(&req.input, cfg),
    }
}

/// The files of each side input.
fn side_files(kind: &dyn JobKind, req: &JobRequest) -> Result<Vec<Vec<PathBuf>>, DriverError> {
    kind.side_inputs(req)?
        .iter()
        .map(|name| Ok(input::resolve(name)?.into_iter().map(|f| f.path).collect()))
        .collect()
}

/// Names of `n` temporary outputs in a hidden directory beside `output`.
pub(crate) fn temp_outputs(output: &str, n: usize) -> Result<Vec<String>, DriverError> {
    // An object store output's stages stay on this host.
    let local = std::env::temp_dir().join("sluice-out");
    let out = if sluice_storage::is_remote(output) {
        local.as_path()
    } else {
        Path::new(output)
    };
    let name = out
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    let dir = out
        .parent()
        .unwrap_or(Path::new("."))
        .join(format!(".{name}.stages-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(DriverError::io(format!("creating {}", dir.display())))?;
    Ok((0..n)
        .map(|i| dir.join(format!("stage-{i}")).display().to_string())
        .collect())
}

/// Removes the directory of the temporaries.
pub(crate) fn remove_temps(temps: &[String]) {
    if let Some(dir) = temps.first().and_then(|t| Path::new(t).parent()) {
        let _ = std::fs::remove_dir_all(dir);
    }
}
