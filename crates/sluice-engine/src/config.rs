use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_formats::input::{FileFormat, RecordFormat};
use sluice_formats::rows::Projection;

use crate::EngineError;

/// The smallest default split. A map task costs about a millisecond
/// besides its reading (its output file made, synced and committed): over
/// 27 MB of Pavlo's grep, 16 splits of 1.7 MB took 34 ms and 4 of 8 MiB
/// 21 ms on two threads.
const MIN_SPLIT: u64 = 8 << 20;

/// What to do with a record the mapper rejects as malformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BadRecordPolicy {
    /// Fail the job, naming the file and offset.
    #[default]
    Fail,
    /// Skip it, count it in `BAD_RECORDS`, and write it to
    /// `_bad_records/part-m-NNNNN` in the output.
    Skip,
}

/// A callback the engine calls with each spill file it finished writing
/// (tests use it to damage spills).
pub type SpillHook = Arc<dyn Fn(&Path) + Send + Sync>;

/// Engine settings. [`EngineConfig::default`] uses every core and 1 GiB.
#[derive(Clone)]
pub struct EngineConfig {
    /// Worker threads for map and reduce tasks.
    pub threads: usize,
    /// Memory budget in bytes for everything the job holds.
    pub memory: u64,
    /// Reduce partitions (ignored by map-only jobs).
    pub reducers: u32,
    /// Split size in bytes; `None` picks one from input size and threads.
    pub split_size: Option<u64>,
    /// Pack splits under half the split size several to a map task, up to
    /// the split size ([`sluice_formats::input::combine`]).
    pub combine: bool,
    /// Longest input record accepted.
    pub max_record: usize,
    /// Where spill files go; `None` uses the job's staging directory.
    pub spill_dir: Option<PathBuf>,
    /// Most runs merged at once; more runs are merged in passes. `None`
    /// takes as many as the budget holds blocks for ([`Self::fan_in`]).
    pub merge_factor: Option<usize>,
    /// Bytes a map thread's sort collector holds before it spills (Hadoop's
    /// `mapreduce.task.io.sort.mb`); `None` sizes it from the machine's
    /// caches and the input ([`Self::spill_target`]).
    pub sort_buffer: Option<usize>,
    /// Malformed-record policy.
    pub bad_records: BadRecordPolicy,
    /// How input files are cut into records.
    pub format: RecordFormat,
    /// How input files are stored: each as it says, or all as one format.
    pub file_format: FileFormat,
    /// The columns a file of rows gives each record, and their separator.
    pub rows: Arc<Projection>,
    /// How output files are written: text lines, a SequenceFile, Avro or
    /// Parquet.
    pub output: crate::output::OutputFiles,
    /// Replace an existing output directory.
    pub overwrite: bool,
    /// Sync each output file before its task commits (`false` for a
    /// chain's temporaries, which need no durability).
    pub sync_output: bool,
    /// Called after each spill file is written.
    pub spill_hook: Option<SpillHook>,
    /// Disk and network rates for the performance model; `None` leaves the
    /// model out of the report.
    pub hardware: Option<sluice_model::Hardware>,
    /// Seconds the job spent before the engine started (sampling its input
    /// for range partitioning, planning): counted in its setup and total
    /// time, so the model's account covers the whole job.
    pub before_s: f64,
    /// Share of the input in the page cache when the job started, measured
    /// by the caller before it read any of it (its sampling); `None`
    /// measures it at the engine's start.
    pub input_cached: Option<f64>,
    /// The attempt's cancellation, which mappers' and reducers' contexts
    /// carry (a cluster task's; never cancelled by default).
    pub cancel: sluice_api::Cancel,
}

impl Default for EngineConfig {
    fn default() -> Self {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        EngineConfig {
            threads,
            memory: 1 << 30,
            reducers: threads as u32,
            split_size: None,
            combine: true,
            max_record: 64 << 20,
            spill_dir: None,
            merge_factor: None,
            sort_buffer: None,
            bad_records: BadRecordPolicy::Fail,
            format: RecordFormat::Lines,
            file_format: FileFormat::Auto,
            rows: Arc::new(Projection::default()),
            output: crate::output::OutputFiles::Text,
            overwrite: false,
            sync_output: true,
            spill_hook: None,
            hardware: None,
            before_s: 0.0,
            input_cached: None,
            cancel: sluice_api::Cancel::default(),
        }
    }
}

impl std::fmt::Debug for EngineConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineConfig")
            .field("threads", &self.threads)
            .field("memory", &self.memory)
            .field("reducers", &self.reducers)
            .field("split_size", &self.split_size)
            .field("max_record", &self.max_record)
            .field("merge_factor", &self.merge_factor)
            .field("sort_buffer", &self.sort_buffer)
            .field("bad_records", &self.bad_records)
            .field("format", &self.format)
            .field("file_format", &self.file_format)
            .field("rows", &self.rows)
            .field("output", &self.output)
            .field("sync_output", &self.sync_output)
            .finish_non_exhaustive()
    }
}

/// Fewest runs a merge reads at once when the budget decides: 64 runs
/// take 4 MiB of blocks, within the fixed overhead the budget allows for.
pub const MIN_FAN_IN: usize = 64;
/// Most runs a merge reads at once when the budget decides.
pub const MAX_FAN_IN: usize = 256;

/// The least a map thread's sort collector holds before it spills in the
/// local engine ([`EngineConfig::spill_target`]) on any machine.
pub const SPILL_TARGET: usize = 8 << 20;
/// The most `default_sort_buffer` gives.
pub const SPILL_TARGET_MAX: usize = 32 << 20;

/// The least a map thread's sort collector holds before it spills in the
/// local engine, on a machine of these caches with `threads` map threads:
/// each thread's share of the L3, between `SPILL_TARGET` and
/// `SPILL_TARGET_MAX`.
///
/// The buffer trades the spill's sort against the reduce's merge: a
/// larger one sorts a little slower and makes fewer runs, which the
/// merge's tree of losers plays in fewer levels. On a 2-core AMD EPYC
/// (L2 1 MiB a core, L3 32 MiB) word count over 11 million distinct words
/// (200 MB) took 2.59 s with 8 MiB a thread (84 runs), 2.28 s with 16 MiB
/// (44) and 2.21 s with 32 MiB (24), medians of 5 on a busy machine;
/// 2 and 4 MiB were slower still, and sort and TeraSort were level from
/// 8 to 64 MiB. The merge's gain stops once the buffer no longer fits
/// the L3 beside the other thread's.
pub fn default_sort_buffer(caches: &crate::cache::CacheSizes, threads: usize) -> usize {
    (caches.l3 / threads.max(1)).clamp(SPILL_TARGET, SPILL_TARGET_MAX)
}

/// Smallest memory budget accepted.
pub const MIN_MEMORY: u64 = 1 << 20;
/// Share of the budget given to map output collectors; the rest covers read
/// buffers, spill and merge block buffers and the process itself.
pub const COLLECT_SHARE: f64 = 0.7;

impl EngineConfig {
    /// Checks ranges; returns a message naming the setting.
    pub fn validate(&self) -> Result<(), EngineError> {
        if self.threads == 0 {
            return Err(EngineError::Config("--threads must be at least 1".into()));
        }
        if self.memory < MIN_MEMORY {
            return Err(EngineError::Config(format!(
                "--memory must be at least {} MiB",
                MIN_MEMORY >> 20
            )));
        }
        if self.reducers == 0 {
            return Err(EngineError::Config("--reducers must be at least 1".into()));
        }
        if self.merge_factor.is_some_and(|f| f < 2) {
            return Err(EngineError::Config(
                "merge factor must be at least 2".into(),
            ));
        }
        if let RecordFormat::Fixed(0) = self.format {
            return Err(EngineError::Config(
                "fixed record size must be positive".into(),
            ));
        }
        Ok(())
    }

    /// Most runs one merge reads at once: `merge_factor` when set, else as
    /// many as a thread's collect share holds one spill block each for
    /// (the collectors are gone when merges run), between `MIN_FAN_IN`
    /// and `MAX_FAN_IN`. Every merge pass re-reads and re-writes all its
    /// bytes, so the widest merge the memory allows is the cheapest; the
    /// most keeps open files well under the usual limit of 1,024.
    pub fn fan_in(&self) -> usize {
        self.merge_factor.unwrap_or_else(|| {
            (self.collect_budget() / sluice_formats::spill::DEFAULT_BLOCK)
                .clamp(MIN_FAN_IN, MAX_FAN_IN)
        })
    }

    /// Bytes a map thread's sort collector holds before it spills when
    /// its runs go straight to the reduce merges (the local engine), for
    /// `input` bytes of input: `sort_buffer` when set; else
    /// `default_sort_buffer` for the machine's caches, or more when the runs would not fit in one
    /// merge (a collector holds about twice its input, each record beside
    /// a 32-byte index entry, so runs number about `4 * input / target`
    /// over all threads; they are kept to half the fan-in). Never more
    /// than [`Self::collect_budget`].
    ///
    /// A smaller buffer is faster, not only leaner: it stays in the caches
    /// while it is sorted and its pages are reused instead of faulted in
    /// (TeraSort over 269 MB on two threads took 0.43 s with 8 MiB a
    /// thread and 0.59-0.76 s with its whole 375 MB share). A job whose
    /// combiner is costly to start (`costly_combiner`: a process per
    /// spilled partition) spills at the whole collect budget instead, so
    /// that few start.
    pub fn spill_target(&self, input: u64, costly_combiner: bool) -> usize {
        if let Some(bytes) = self.sort_buffer {
            return bytes.clamp(1, self.collect_budget().max(1));
        }
        if costly_combiner {
            return self.collect_budget();
        }
        let runs = (self.fan_in() / 2).max(1) as u64;
        let least = default_sort_buffer(&crate::cache::cache_sizes(), self.threads) as u64;
        let wanted = (input.saturating_mul(4) / runs).max(least);
        usize::try_from(wanted)
            .unwrap_or(usize::MAX)
            .min(self.collect_budget())
    }

    /// Bytes each map thread may collect before spilling.
    pub fn collect_budget(&self) -> usize {
        ((self.memory as f64 * COLLECT_SHARE) / self.threads as f64) as usize
    }

    /// Encoded bytes a Parquet output file holds in memory before it
    /// closes its row group: a quarter of a thread's share of the budget,
    /// at most [`ROW_GROUP_BYTES`](sluice_formats::parquet_out::ROW_GROUP_BYTES)
    /// (128 MiB, with the default 1 GiB on up to two threads), at least
    /// 1 MiB.
    pub fn row_group_bytes(&self) -> usize {
        let share = self.memory / (4 * self.threads.max(1) as u64);
        let most = sluice_formats::parquet_out::ROW_GROUP_BYTES;
        usize::try_from(share).unwrap_or(most).clamp(1 << 20, most)
    }

    /// The split size to use for `total` input bytes: about eight splits per
    /// thread, between 8 MiB (`MIN_SPLIT`) and 64 MiB. An input of fewer
    /// than that many least splits is cut into a multiple of the threads
    /// of equal splits instead, none under 4 MiB: 26 MB on 2 threads was
    /// three splits of 8 MiB and one of 2, and one thread read 16 MiB while
    /// the other read 10 (pavlo-grep's map took a quarter longer than even
    /// splits).
    pub fn split_size_for(&self, total: u64) -> u64 {
        if let Some(size) = self.split_size {
            return size;
        }
        let threads = self.threads.max(1) as u64;
        let size = (total / (threads * 8)).clamp(MIN_SPLIT, 64 << 20);
        if size > MIN_SPLIT || total == 0 {
            return size;
        }
        // Not below half the least split: a small input stays one split.
        let splits = total.div_ceil(MIN_SPLIT).next_multiple_of(threads);
        total.div_ceil(splits).max(MIN_SPLIT / 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Parquet row group is a quarter of a thread's share, between
    /// 1 MiB and 128 MiB.
    #[test]
    fn row_groups_fit_a_threads_share() {
        let cfg = |memory: u64, threads| EngineConfig {
            memory,
            threads,
            ..EngineConfig::default()
        };
        assert_eq!(cfg(1 << 30, 2).row_group_bytes(), 128 << 20);
        assert_eq!(cfg(1 << 30, 1).row_group_bytes(), 128 << 20);
        assert_eq!(cfg(1 << 30, 8).row_group_bytes(), 32 << 20);
        assert_eq!(cfg(16 << 20, 8).row_group_bytes(), 1 << 20);
    }

    /// Large inputs get eight splits a thread; small ones equal splits, a
    /// multiple of the threads, none over `MIN_SPLIT` nor under half of it
    /// (a small input stays one split); a given size wins.
    #[test]
    fn small_inputs_are_cut_into_even_splits_for_the_threads() {
        let cfg = |threads| EngineConfig {
            threads,
            ..EngineConfig::default()
        };
        const MIB: u64 = 1 << 20;
        let splits = |threads, total: u64| total.div_ceil(cfg(threads).split_size_for(total));
        assert_eq!(cfg(2).split_size_for(800 * MIB), 50 * MIB);
        assert_eq!(cfg(2).split_size_for(4000 * MIB), 64 * MIB);
        let pavlo_grep = 27_026_940;
        assert_eq!(splits(2, pavlo_grep), 4);
        assert_eq!(cfg(2).split_size_for(pavlo_grep), pavlo_grep.div_ceil(4));
        assert_eq!(splits(1, pavlo_grep), 4);
        assert_eq!(splits(3, 20 * MIB), 3);
        assert_eq!(splits(2, 100 * MIB), 14);
        for (threads, total) in [(2, 9 * MIB + 1), (4, 130 * MIB), (2, 128 * MIB - 1)] {
            let size = cfg(threads).split_size_for(total);
            assert!(size <= MIN_SPLIT && size > 0, "{threads} {total}: {size}");
            assert_eq!(
                splits(threads, total) % threads as u64,
                0,
                "{threads} {total}"
            );
        }
        assert_eq!(splits(8, 3), 1);
        assert_eq!(splits(2, 4 * MIB), 1);
        assert_eq!(splits(2, 6 * MIB), 2);
        assert_eq!(cfg(2).split_size_for(0), MIN_SPLIT);
        let given = EngineConfig {
            split_size: Some(3),
            ..cfg(2)
        };
        assert_eq!(given.split_size_for(100), 3);
    }

    /// The sort buffer is a thread's share of the L3, from 8 to 32 MiB;
    /// a machine without an L3 gets the least.
    #[test]
    fn the_sort_buffer_is_a_threads_share_of_the_l3() {
        let caches = |l3| crate::cache::CacheSizes {
            l3,
            ..crate::cache::FALLBACK
        };
        assert_eq!(default_sort_buffer(&caches(32 << 20), 2), 16 << 20);
        assert_eq!(default_sort_buffer(&caches(32 << 20), 1), 32 << 20);
        assert_eq!(default_sort_buffer(&caches(256 << 20), 1), 32 << 20);
        assert_eq!(default_sort_buffer(&caches(32 << 20), 16), 8 << 20);
        assert_eq!(default_sort_buffer(&caches(0), 2), 8 << 20);
    }

    /// `--sort-buffer` is taken as given (within the collect budget),
    /// whatever the input; without it a large input raises the buffer so
    /// its runs fit one merge.
    #[test]
    fn an_explicit_sort_buffer_wins_and_a_large_input_raises_the_default() {
        let cfg = EngineConfig {
            memory: 1 << 30,
            threads: 2,
            ..EngineConfig::default()
        };
        let least = default_sort_buffer(&crate::cache::cache_sizes(), 2);
        assert_eq!(cfg.spill_target(1 << 20, false), least);
        let big = 100u64 << 30;
        assert_eq!(cfg.spill_target(big, false), cfg.collect_budget());
        let given = EngineConfig {
            sort_buffer: Some(3 << 20),
            ..cfg.clone()
        };
        assert_eq!(given.spill_target(big, false), 3 << 20);
        assert_eq!(given.spill_target(1, true), 3 << 20);
        let too_big = EngineConfig {
            sort_buffer: Some(1 << 40),
            ..cfg.clone()
        };
        assert_eq!(too_big.spill_target(1, false), cfg.collect_budget());
    }
}
