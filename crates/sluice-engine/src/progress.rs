//! Live progress counters a front end can poll while a job runs.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// The phase a job is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Resolving input and planning splits.
    Setup = 0,
    /// Running map tasks.
    Map = 1,
    /// Merging spill runs in passes.
    Merge = 2,
    /// Running reduce tasks.
    Reduce = 3,
    /// Committing output.
    Commit = 4,
    /// Finished.
    Done = 5,
}

/// Shared progress of one job; all fields are updated with relaxed atomics.
#[derive(Debug, Default)]
pub struct Progress {
    phase: AtomicU8,
    /// Input bytes to read.
    pub input_total: AtomicU64,
    /// Input bytes read so far.
    pub input_done: AtomicU64,
    /// Reduce partitions to run.
    pub partitions_total: AtomicU64,
    /// Reduce partitions finished.
    pub partitions_done: AtomicU64,
}

impl Progress {
    /// The current phase.
    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Relaxed) {
            0 => Phase::Setup,
            1 => Phase::Map,
            2 => Phase::Merge,
            3 => Phase::Reduce,
            4 => Phase::Commit,
            _ => Phase::Done,
        }
    }

    pub(crate) fn set_phase(&self, p: Phase) {
        self.phase.store(p as u8, Ordering::Relaxed);
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
