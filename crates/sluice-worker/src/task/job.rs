//! A job as this worker's tasks run it: built once, by the first of its
//! tasks to run here, from its request and its side inputs, and given
//! each task's share of the engine's settings.

use std::path::{Path, PathBuf};

use sluice_proto::block::Unusable;
use sluice_proto::data;
use sluice_proto::proto::{BlockInfo, BlockSource, CorruptReplica, SideInput, TaskAssignment};
use sluice_proto::ClusterError;
use sluice_request::{BuildContext, JobRequest};

use crate::blocks;
use crate::shared::Shared;
use crate::tasks::{AttemptKey, Built};

type Result<T> = std::result::Result<T, ClusterError>;

/// The job and engine settings for one task: the job is built by the
/// first of its tasks to run here (the others wait for it); a failed build
/// is forgotten so that the next attempt tries again.
pub(super) fn task_job(
    shared: &Shared,
    a: &TaskAssignment,
) -> Result<(sluice_api::JobSpec, sluice_engine::EngineConfig)> {
    let job = a.task.unwrap_or_default().job;
    let ended = || ClusterError::Remote(format!("job {job} has ended"));
    let cell = shared.tasks().build_cell(job).ok_or_else(ended)?;
    let built = cell.get_or_init(|| build_job(shared, a));
    let (spec, mut cfg) = match built {
        Ok(b) => b.clone(),
        Err(e) => {
            shared.tasks().forget_build(job, &cell);
            return Err(ClusterError::Config(e.clone()));
        }
    };
    cfg.threads = 1;
    // The job's --memory is a per-task cap; the worker's share bounds it.
    cfg.memory = cfg.memory.min(sluice_proto::task_share(
        shared.cfg.memory,
        shared.cfg.slots,
    ));
    cfg.reducers = a.reducers.max(1);
    cfg.overwrite = true;
    cfg.hardware = None;
    cfg.spill_dir = None;
    cfg.split_size = None;
    // Its mappers and reducers learn when the attempt is cancelled.
    cfg.cancel = shared
        .tasks()
        .cancel_of(AttemptKey::from(&a.task.unwrap_or_default()));
    Ok((spec, cfg))
}

fn build_job(shared: &Shared, a: &TaskAssignment) -> Built {
    let req = JobRequest::decode(&a.request).map_err(|e| e.to_string())?;
    let side = side_files(shared, a).map_err(|e| e.to_string())?;
    let ctx = BuildContext {
        side: Some(&side),
        splits: None,
        cluster: true,
    };
    let (built, cfg) = shared
        .cfg
        .jobs
        .build(&req, &ctx)
        .map_err(|e| e.to_string())?;
    Ok((built.spec, cfg))
}

/// Local files of the job's side inputs: the block store's replicas,
/// verified whole against their checksums, else copies fetched into the
/// job's work directory (renamed into place whole, and removed with it
/// when the job finishes). Damaged replicas met on the way are reported
/// on the next heartbeat.
fn side_files(shared: &Shared, a: &TaskAssignment) -> Result<Vec<Vec<PathBuf>>> {
    let job = a.task.unwrap_or_default().job;
    let dir = shared.layout.work_dir(job).join("side");
    let mut out = Vec::with_capacity(a.side.len());
    let mut corrupt = Vec::new();
    for s in &a.side {
        let mut files = Vec::with_capacity(s.blocks.len());
        for sb in &s.blocks {
            files.push(side_file(shared, &dir, s, sb, &mut corrupt)?);
        }
        out.push(files);
    }
    report_all(shared, &mut corrupt);
    Ok(out)
}

/// The local file of block `sb` of side input `s`: this worker's replica
/// if intact, else a copy in `dir`, fetched unless it is there already.
fn side_file(
    shared: &Shared,
    dir: &Path,
    s: &SideInput,
    sb: &BlockSource,
    corrupt: &mut Vec<CorruptReplica>,
) -> Result<PathBuf> {
    let b = sb.block.clone().unwrap_or_default();
    data::check_id(&b.id)?;
    if b.replicas.contains(&shared.uid) && intact_here(shared, &b, corrupt)? {
        return Ok(shared.layout.block(&b.id));
    }
    let copy = dir.join(&b.id);
    if !copy.exists() {
        std::fs::create_dir_all(dir).map_err(|e| ClusterError::io("creating", dir, e))?;
        let part = dir.join(format!("{}.part", b.id));
        let others: Vec<String> = (sb.sources.iter())
            .filter(|a| **a != shared.data_addr)
            .cloned()
            .collect();
        let fetched = blocks::fetch_block(shared, &b, &others, &part, corrupt);
        report_all(shared, corrupt);
        fetched.map_err(|e| {
            ClusterError::Remote(format!(
                "copying block {} of side data set {}: {e}",
                b.id, s.dataset
            ))
        })?;
        std::fs::rename(&part, &copy).map_err(|e| ClusterError::io("storing", &copy, e))?;
    }
    Ok(copy)
}

/// Whether this worker's replica of `b` is intact, verified whole against
/// its checksums; a damaged one goes into `corrupt`.
fn intact_here(shared: &Shared, b: &BlockInfo, corrupt: &mut Vec<CorruptReplica>) -> Result<bool> {
    match sluice_proto::block::verify(&shared.layout, &b.id, Some((b.len, b.crc))) {
        Ok(()) => Ok(true),
        Err(Unusable::Damaged(d)) => {
            corrupt.push(shared.own_damage(&b.id, &d.to_string()));
            Ok(false)
        }
        Err(Unusable::Io(e)) => Err(ClusterError::io("reading", &shared.layout.block(&b.id), e)),
    }
}

/// Reports the damaged replicas in `corrupt` on the next heartbeat.
fn report_all(shared: &Shared, corrupt: &mut Vec<CorruptReplica>) {
    let mut outbox = shared.outbox();
    for c in corrupt.drain(..) {
        outbox.corrupt(c);
    }
}
