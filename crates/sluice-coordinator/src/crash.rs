//! Crash points, for the tests of recovery: with `SLUICE_CRASH_AT` set to
//! one of them, the coordinator aborts its process there, as a crash
//! would (nothing flushed, nothing cleaned up).
//!
//! - `job-logged`: a job's acceptance is in the job log.
//! - `map-done:N`: the N-th map to finish (counted from 1 since this
//!   process started) is in the job log.
//! - `shuffle`: the first reduce was handed to a worker.
//! - `commit-logged`: a commit's start is in the job log, its catalog
//!   write not made.
//! - `commit-written`: a commit's catalog write is on disk, the job's
//!   end not logged.
//! - `put`: a put's blocks were planned, its data set not committed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::joblog::JobEntry;

/// The environment variable naming the crash point.
pub const CRASH_AT: &str = "SLUICE_CRASH_AT";

fn point() -> Option<&'static str> {
    static POINT: OnceLock<Option<String>> = OnceLock::new();
    POINT
        .get_or_init(|| std::env::var(CRASH_AT).ok().filter(|p| !p.is_empty()))
        .as_deref()
}

/// Aborts the process if `name` is the crash point.
pub(crate) fn at(name: &str) {
    if point() == Some(name) {
        eprintln!("{CRASH_AT}={name}: the coordinator aborts here");
        std::process::abort();
    }
}

/// The crash point after job log record `e` is written, if any.
pub(crate) fn logged(e: &JobEntry) {
    static MAPS: AtomicU64 = AtomicU64::new(0);
    let Some(p) = point() else { return };
    match e {
        JobEntry::Accepted(_) => at("job-logged"),
        JobEntry::CommitStarted { .. } => at("commit-logged"),
        JobEntry::TaskDone(t) if t.kind == sluice_proto::ids::TaskKind::Map.wire() => {
            let n = MAPS.fetch_add(1, Ordering::Relaxed) + 1;
            if p.strip_prefix("map-done:").and_then(|n| n.parse().ok()) == Some(n) {
                at(p);
            }
        }
        JobEntry::TaskDone(_) | JobEntry::Ended { .. } => {}
    }
}
