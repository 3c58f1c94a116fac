//! Ids and kinds that every part of the cluster speaks of: coordinator,
//! worker and client alike (none of them owns these).

use serde::{Deserialize, Serialize};

/// A job: the coordinator's epoch in the high 32 bits, a counter in the
/// low ones, so ids stay unique across restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub u64);

/// A worker's registration (a worker that registers again gets a new one;
/// its uid stays).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WorkerId(pub u64);

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::fmt::Display for WorkerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// What a task does. On the wire (`TaskId.kind`) a map is 0, a reduce 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskKind {
    Map,
    Reduce,
}

impl TaskKind {
    /// The kind a wire value names, if any.
    pub fn from_wire(v: u32) -> Option<TaskKind> {
        match v {
            0 => Some(TaskKind::Map),
            1 => Some(TaskKind::Reduce),
            _ => None,
        }
    }

    /// Its wire value.
    pub fn wire(self) -> u32 {
        match self {
            TaskKind::Map => 0,
            TaskKind::Reduce => 1,
        }
    }

    /// `m` or `r`, as task and output block names spell it.
    pub fn letter(self) -> char {
        match self {
            TaskKind::Map => 'm',
            TaskKind::Reduce => 'r',
        }
    }
}

/// The job whose task wrote output block `id` (the coordinator names
/// them `j<job>-<m|r><task>-a<attempt>`), if it is one.
pub fn output_block_job(id: &str) -> Option<JobId> {
    id.strip_prefix('j')?
        .split('-')
        .next()?
        .parse()
        .ok()
        .map(JobId)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_blocks_name_their_job() {
        assert_eq!(
            output_block_job("j4294967297-r0-a1"),
            Some(JobId(4294967297))
        );
        assert_eq!(output_block_job("j12-m3-a0"), Some(JobId(12)));
        for not_output in ["b1-7", "j-r0-a0", "jx-r0", "", "j"] {
            assert_eq!(output_block_job(not_output), None, "{not_output}");
        }
    }
}
