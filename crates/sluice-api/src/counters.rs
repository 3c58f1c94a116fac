use std::collections::BTreeMap;

use serde::Serialize;

/// The framework counters, modelled on Hadoop's `TaskCounter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskCounter {
    /// Records handed to mappers.
    MapInputRecords,
    /// Bytes of input read by map tasks (after decompression).
    MapInputBytes,
    /// Records emitted by mappers.
    MapOutputRecords,
    /// Serialized key and value bytes emitted by mappers.
    MapOutputBytes,
    /// Records fed to the combiner (or folded by the aggregator).
    CombineInputRecords,
    /// Records the combiner (or aggregator) produced.
    CombineOutputRecords,
    /// Records written to spill files.
    SpilledRecords,
    /// Bytes written to spill files.
    SpilledBytes,
    /// Bytes of map output moved to reducers.
    ShuffleBytes,
    /// Distinct key groups seen by reducers.
    ReduceInputGroups,
    /// Records seen by reducers.
    ReduceInputRecords,
    /// Records written to the output.
    ReduceOutputRecords,
    /// Records written by map-only jobs.
    MapOutputWritten,
    /// Input records that user code rejected and the skip policy skipped.
    BadRecords,
    /// Map threads (or tasks) of an aggregating job that stopped grouping
    /// in a hash table because it hardly reduced their records, and sorted
    /// and combined the rest at spill time.
    HashGroupingStopped,
    /// Row groups of files of rows (Parquet) that map tasks skipped
    /// unread, their statistics showing no row the job keeps.
    RowGroupsSkipped,
    /// Compressed bytes of the row groups skipped.
    BytesSkipped,
    /// Rows of the row groups read that map tasks left out of the
    /// mappers' input, the column the job filters on being outside its
    /// range (Parquet, when the job keeps few rows of a row group).
    RowsSkipped,
    /// Input rows a mapper read as typed columns
    /// ([`crate::columnar`]) rather than as text records.
    RowsAsColumns,
}

impl TaskCounter {
    /// Every framework counter, in report order.
    pub const ALL: [TaskCounter; 19] = [
        TaskCounter::MapInputRecords,
        TaskCounter::MapInputBytes,
        TaskCounter::MapOutputRecords,
        TaskCounter::MapOutputBytes,
        TaskCounter::CombineInputRecords,
        TaskCounter::CombineOutputRecords,
        TaskCounter::SpilledRecords,
        TaskCounter::SpilledBytes,
        TaskCounter::ShuffleBytes,
        TaskCounter::ReduceInputGroups,
        TaskCounter::ReduceInputRecords,
        TaskCounter::ReduceOutputRecords,
        TaskCounter::MapOutputWritten,
        TaskCounter::BadRecords,
        TaskCounter::HashGroupingStopped,
        TaskCounter::RowGroupsSkipped,
        TaskCounter::BytesSkipped,
        TaskCounter::RowsSkipped,
        TaskCounter::RowsAsColumns,
    ];

    /// The Hadoop-style name, e.g. `MAP_INPUT_RECORDS`.
    pub fn name(self) -> &'static str {
        match self {
            TaskCounter::MapInputRecords => "MAP_INPUT_RECORDS",
            TaskCounter::MapInputBytes => "MAP_INPUT_BYTES",
            TaskCounter::MapOutputRecords => "MAP_OUTPUT_RECORDS",
            TaskCounter::MapOutputBytes => "MAP_OUTPUT_BYTES",
            TaskCounter::CombineInputRecords => "COMBINE_INPUT_RECORDS",
            TaskCounter::CombineOutputRecords => "COMBINE_OUTPUT_RECORDS",
            TaskCounter::SpilledRecords => "SPILLED_RECORDS",
            TaskCounter::SpilledBytes => "SPILLED_BYTES",
            TaskCounter::ShuffleBytes => "SHUFFLE_BYTES",
            TaskCounter::ReduceInputGroups => "REDUCE_INPUT_GROUPS",
            TaskCounter::ReduceInputRecords => "REDUCE_INPUT_RECORDS",
            TaskCounter::ReduceOutputRecords => "REDUCE_OUTPUT_RECORDS",
            TaskCounter::MapOutputWritten => "MAP_OUTPUT_WRITTEN",
            TaskCounter::BadRecords => "BAD_RECORDS",
            TaskCounter::HashGroupingStopped => "HASH_GROUPING_STOPPED",
            TaskCounter::RowGroupsSkipped => "ROW_GROUPS_SKIPPED",
            TaskCounter::BytesSkipped => "BYTES_SKIPPED",
            TaskCounter::RowsSkipped => "ROWS_SKIPPED",
            TaskCounter::RowsAsColumns => "ROWS_AS_COLUMNS",
        }
    }
}

/// Framework and user counters of one task, or of a whole job once merged.
///
/// Framework counters are a fixed array (no lookup on the hot path); user
/// counters are named by `(group, name)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    framework: [u64; TaskCounter::ALL.len()],
    user: BTreeMap<(String, String), u64>,
}

impl Counters {
    /// Adds `n` to a framework counter.
    #[inline]
    pub fn add(&mut self, c: TaskCounter, n: u64) {
        self.framework[c as usize] += n;
    }

    /// The value of a framework counter.
    pub fn get(&self, c: TaskCounter) -> u64 {
        self.framework[c as usize]
    }

    /// Adds `n` to the user counter `group.name`, creating it at zero.
    pub fn incr(&mut self, group: &str, name: &str, n: u64) {
        if let Some(v) = self
            .user
            .iter_mut()
            .find(|((g, k), _)| g == group && k == name)
        {
            *v.1 += n;
            return;
        }
        self.user.insert((group.to_owned(), name.to_owned()), n);
    }

    /// The value of a user counter (zero when never incremented).
    pub fn user(&self, group: &str, name: &str) -> u64 {
        self.user
            .get(&(group.to_owned(), name.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// All user counters, sorted by group then name.
    pub fn user_counters(&self) -> impl Iterator<Item = (&str, &str, u64)> {
        self.user
            .iter()
            .map(|((g, n), v)| (g.as_str(), n.as_str(), *v))
    }

    /// Adds every counter of `other` into `self`.
    pub fn merge(&mut self, other: &Counters) {
        for (a, b) in self.framework.iter_mut().zip(other.framework.iter()) {
            *a += b;
        }
        for ((g, n), v) in &other.user {
            *self.user.entry((g.clone(), n.clone())).or_insert(0) += v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_framework_and_user_counters() {
        let mut a = Counters::default();
        a.add(TaskCounter::MapInputRecords, 3);
        a.incr("app", "lines", 2);
        let mut b = Counters::default();
        b.add(TaskCounter::MapInputRecords, 4);
        b.incr("app", "lines", 5);
        b.incr("app", "other", 1);
        a.merge(&b);
        assert_eq!(a.get(TaskCounter::MapInputRecords), 7);
        assert_eq!(a.user("app", "lines"), 7);
        assert_eq!(a.user("app", "other"), 1);
        assert_eq!(a.user("app", "missing"), 0);
    }
}
