//! A task attempt, run on its own thread with the local engine's code:
//! a map ([`map`]) or a reduce ([`reduce`]) of a job built here once
//! ([`job`]), and what becomes of its report when it ends.
//!
//! A cancelled attempt (killed, its job ended, or the worker registered
//! anew) runs on, but its result is discarded: its output block is
//! removed, and its job's files too if the job has ended meanwhile.

mod failure;
mod job;
mod map;
mod reduce;

use std::time::Instant;

use sluice_api::TaskCounter;
use sluice_engine::tasks::TaskOutput;
use sluice_proto::ids::TaskKind;
use sluice_proto::proto::{TaskAssignment, TaskReport};
use sluice_proto::ClusterError;

use crate::files;
use crate::shared::Shared;
use crate::tasks::AttemptKey;

/// Runs attempt `a` and ends it; returns its report, unless its result is
/// discarded.
pub(crate) fn run(shared: &Shared, a: &TaskAssignment) -> Option<TaskReport> {
    let id = a.task.unwrap_or_default();
    let mut report = run_task(shared, a);
    let done = shared.tasks().finish(AttemptKey::from(&id));
    let kind = match TaskKind::from_wire(id.kind) {
        Some(TaskKind::Reduce) => "reduce",
        _ => "map",
    };
    shared.metrics.task(kind, &report, done.cancelled);
    if !done.cancelled {
        return Some(report);
    }
    files::discard(&shared.layout, &report);
    if done.job_ended {
        // Its map output or scratch files may have appeared after the
        // job's files were removed.
        files::remove_job_files(&shared.layout, id.job);
    }
    if report.output.as_ref().is_none_or(|o| o.replicas.is_empty()) {
        return None;
    }
    // Its output has copies on other workers: reported as killed, the
    // coordinator has them deleted.
    report.ok = false;
    report.error = "killed".into();
    Some(report)
}

/// Runs attempt `a`; its report says how it went.
fn run_task(shared: &Shared, a: &TaskAssignment) -> TaskReport {
    let t0 = Instant::now();
    let id = a.task.unwrap_or_default();
    let mut report = TaskReport {
        task: Some(id),
        ..TaskReport::default()
    };
    let res = match TaskKind::from_wire(id.kind) {
        Some(TaskKind::Map) => map::run_map(shared, a, &mut report),
        Some(TaskKind::Reduce) => reduce::run_reduce(shared, a, &mut report),
        None => Err(ClusterError::Config(format!(
            "unknown task kind {}",
            id.kind
        ))),
    };
    match res {
        Ok(out) => succeeded(&mut report, out),
        Err(e) => {
            report.ok = false;
            report.error = e.to_string();
        }
    }
    report.seconds = t0.elapsed().as_secs_f64();
    report
}

/// What a task that succeeded reports: its counters and output.
fn succeeded(report: &mut TaskReport, out: TaskOutput) {
    report.ok = true;
    for t in TaskCounter::ALL {
        let v = out.counters.get(t);
        if v > 0 {
            report.counters.insert(t.name().to_owned(), v);
        }
    }
    for (g, n, v) in out.counters.user_counters() {
        report.user_counters.insert(format!("{g}.{n}"), v);
    }
    report.output_records = out.output_records;
    report.output_bytes = out.output_bytes;
    report.shuffle_bytes = out.counters.get(TaskCounter::ShuffleBytes);
}
