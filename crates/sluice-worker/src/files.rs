//! A job's files on this worker's disk, and their removal: map outputs
//! and scratch files (removed when the job ends) and output blocks of
//! attempts that lost.

use std::path::Path;

use sluice_proto::data::Layout;
use sluice_proto::ids::{output_block_job, JobId};
use sluice_proto::proto::TaskReport;

/// Removes the map outputs and scratch files of every job but `running`.
pub(crate) fn remove_other_jobs_files(layout: &Layout, running: &[u64]) {
    for dir in ["shuffle", "work"] {
        let Ok(rd) = std::fs::read_dir(layout.root.join(dir)) else {
            continue;
        };
        for e in rd.flatten() {
            let job = e.file_name().to_string_lossy().parse::<u64>();
            if job.is_ok_and(|j| !running.contains(&j)) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

/// Removes an ended job's map outputs and scratch files.
pub(crate) fn remove_job_files(layout: &Layout, job: u64) {
    let _ = std::fs::remove_dir_all(layout.shuffle_dir(job));
    let _ = std::fs::remove_dir_all(layout.work_dir(job));
}

/// Deletes the output blocks of finished job `job` here that its
/// committed data set does not hold: copies of attempts that lost, or
/// whose writer died before reporting them.
pub(crate) fn sweep_outputs(layout: &Layout, job: u64, kept: &[String]) {
    for id in layout.block_ids().unwrap_or_default() {
        let of_job = output_block_job(&id) == Some(JobId(job));
        if of_job && !kept.contains(&id) {
            layout.remove_block(&id);
        }
    }
}

/// Removes the output block of a task whose result is discarded.
pub(crate) fn discard(layout: &Layout, report: &TaskReport) {
    if let Some(out) = &report.output {
        layout.remove_block(&out.id);
    }
}

/// Bytes the file system holding `dir` still gives an unprivileged
/// writer (0 when it cannot be asked).
pub(crate) fn free_bytes(dir: &Path) -> u64 {
    rustix::fs::statvfs(dir).map_or(0, |s| s.f_bavail.saturating_mul(s.f_frsize))
}
