//! Merge passes and the reduce phase.
//!
//! When there are more spill runs than the merge factor, runs are merged
//! into new runs (combining on the way, when the job has a combiner or
//! aggregator) until few enough remain: a pass merges only as many runs
//! as bring their number down to the merge factor, when one pass can
//! (as Hadoop's first pass does: 66 runs at a factor of 64 merge 4 runs
//! in groups of two, not 64), else all of them in groups of the factor.
//! Then each worker takes partitions from the queue: a k-way merge over
//! that partition's segment of every run feeds key groups to a fresh
//! reducer, which writes `part-r-NNNNN`.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sluice_api::{Counters, JobSpec, Reducer, TaskCounter};
use sluice_formats::spill::{SpillFile, SpillWriter};
use sluice_sort::{reduce_groups, Merger, SpillSink};

use crate::commit::Committer;
use crate::config::EngineConfig;
use crate::output::TextOutput;
use crate::pool::{run_workers, Queue};
use crate::progress::Progress;
use crate::task::sort_error;
use crate::EngineError;

type Result<T> = std::result::Result<T, EngineError>;

/// Everything a reduce worker needs.
pub struct ReducePhase<'a> {
    pub job: &'a JobSpec,
    pub cfg: &'a EngineConfig,
    pub committer: &'a Committer,
    pub spill_dir: &'a Path,
    pub progress: &'a Progress,
}

/// What the reduce phase produced.
#[derive(Debug, Default)]
pub struct ReduceOutput {
    pub counters: Counters,
    pub merge_passes: u32,
    pub output_records: u64,
    pub output_bytes: u64,
}

/// The groups of runs one merge pass merges, as ranges of the `n` runs
/// (`n` above `factor`); the runs after the last group are kept as they
/// are. When one pass can bring `n` down to `factor` (`n` at most
/// `factor` squared), it merges the first `n - factor + k` runs in `k`
/// groups of at most `factor` (as few groups as that takes, or one per
/// thread if more): the fewest bytes a pass can move. Otherwise every
/// run, in groups of `factor` (a last group of one run is kept, not
/// copied). Groups are contiguous and their outputs take their place in
/// order, so runs stay in spill order.
fn pass_groups(n: usize, factor: usize, threads: usize) -> Vec<Range<usize>> {
    let need = n - factor;
    let fewest = need.div_ceil(factor - 1);
    if fewest <= factor {
        let k = fewest.max(threads.min(need).min(factor));
        let total = need + k;
        return (0..k).map(|i| i * total / k..(i + 1) * total / k).collect();
    }
    (0..n)
        .step_by(factor)
        .map(|s| s..(s + factor).min(n))
        .filter(|r| r.len() > 1)
        .collect()
}

impl ReducePhase<'_> {
    /// Merges `runs` down to the merge factor, counting into `out`. Only
    /// the runs of the groups being merged are open at any time.
    pub fn merge_passes(
        &self,
        mut runs: Vec<PathBuf>,
        out: &mut ReduceOutput,
    ) -> Result<Vec<SpillFile>> {
        let mut pass = 0;
        let fan_in = self.cfg.fan_in();
        while runs.len() > fan_in {
            pass += 1;
            let ranges = pass_groups(runs.len(), fan_in, self.cfg.threads);
            let rest = ranges.last().map_or(0, |r| r.end);
            let groups: Vec<&[PathBuf]> = ranges.iter().map(|r| &runs[r.clone()]).collect();
            let queue = Queue::new(groups.len());
            let merged = Mutex::new(Vec::new());
            let counters = run_workers(self.cfg.threads, &queue, |_| {
                let mut c = Counters::default();
                while let Some(g) = queue.take() {
                    let path = self.spill_dir.join(format!("merge-{pass:03}-{g:06}.run"));
                    self.merge_group(&open_runs(groups[g])?, &path, &mut c)?;
                    for old in groups[g] {
                        let _ = std::fs::remove_file(old);
                    }
                    merged.lock().expect("merge list").push((g, path));
                }
                Ok(c)
            })?;
            counters.iter().for_each(|c| out.counters.merge(c));
            let mut merged = merged.into_inner().expect("merge list");
            merged.sort_by_key(|(g, _)| *g);
            let kept = runs.split_off(rest);
            runs = merged.into_iter().map(|(_, p)| p).chain(kept).collect();
        }
        out.merge_passes = pass;
        open_runs(&runs)
    }

    /// Merges a group of runs into one new run at `path`.
    pub fn merge_group(
        &self,
        group: &[SpillFile],
        path: &Path,
        counters: &mut Counters,
    ) -> Result<()> {
        let parts = self.cfg.reducers;
        let mut w = SpillWriter::create(path, parts)?;
        for p in 0..parts {
            let readers = group.iter().map(|f| f.reader(p)).collect();
            let mut m = Merger::new(readers, self.job.key_order)?;
            match self.combiner() {
                Some(mut c) => {
                    let mut sink = SpillSink::new(&mut w);
                    sink.part = p;
                    let stats =
                        reduce_groups(&mut m, c.as_mut(), &mut sink, counters, p, &self.cfg.cancel)
                            .map_err(|e| sort_error(e, "combine"))?;
                    counters.add(TaskCounter::CombineInputRecords, stats.records);
                    counters.add(TaskCounter::CombineOutputRecords, sink.records);
                }
                None => {
                    while let Some((k, v)) = m.current() {
                        w.append(p, k, v)?;
                        m.advance()?;
                    }
                }
            }
        }
        let (_, size) = w.finish()?;
        counters.add(TaskCounter::SpilledBytes, size);
        if let Some(hook) = &self.cfg.spill_hook {
            hook(path);
        }
        Ok(())
    }

    /// The combiner for merge passes: the job's combiner, or its aggregator
    /// wrapped as one.
    fn combiner(&self) -> Option<Box<dyn Reducer>> {
        if let Some(f) = &self.job.combiner {
            return Some(f());
        }
        self.job
            .aggregator
            .clone()
            .map(|agg| sluice_api::aggregate_combiner(agg)())
    }

    /// Runs every reduce partition over `runs`.
    pub fn reduce(&self, runs: &[SpillFile], out: &mut ReduceOutput) -> Result<()> {
        let parts = self.cfg.reducers as usize;
        Progress::add(&self.progress.partitions_total, parts as u64);
        let queue = Queue::new(parts);
        let results = run_workers(self.cfg.threads.min(parts), &queue, |_| {
            let mut o = ReduceOutput::default();
            while let Some(p) = queue.take() {
                let name = format!("part-r-{p:05}");
                self.reduce_partition(p as u32, p as u32, &name, runs, &mut o)?;
                Progress::add(&self.progress.partitions_done, 1);
            }
            Ok(o)
        })?;
        for o in results {
            out.counters.merge(&o.counters);
            out.output_records += o.output_records;
            out.output_bytes += o.output_bytes;
        }
        Ok(())
    }

    /// Reduces partition `p` of `runs` into the output file `name`, as
    /// the job's partition `partition`.
    pub fn reduce_partition(
        &self,
        p: u32,
        partition: u32,
        name: &str,
        runs: &[SpillFile],
        out: &mut ReduceOutput,
    ) -> Result<()> {
        let path = self.committer.attempt_path(name, 0)?;
        let cfg = self.cfg;
        let mut sink =
            TextOutput::create_as(&path, cfg.sync_output, &cfg.output, cfg.row_group_bytes())?;
        let shuffle: u64 = runs.iter().map(|f| f.segments()[p as usize].len).sum();
        let readers = runs.iter().map(|f| f.reader(p)).collect();
        let mut m = Merger::new(readers, self.job.key_order)?;
        let mut reducer = (self.job.reducer.as_ref().expect("reduce job has a reducer"))();
        let c = &mut out.counters;
        let stats = reduce_groups(
            &mut m,
            reducer.as_mut(),
            &mut sink,
            c,
            partition,
            &self.cfg.cancel,
        )
        .map_err(|e| sort_error(e, "reduce"))?;
        let (records, bytes) = sink.finish()?;
        self.committer.commit_task(name, 0)?;
        c.add(TaskCounter::ShuffleBytes, shuffle);
        c.add(TaskCounter::ReduceInputGroups, stats.groups);
        c.add(TaskCounter::ReduceInputRecords, stats.records);
        c.add(TaskCounter::ReduceOutputRecords, records);
        out.output_records += records;
        out.output_bytes += bytes;
        Ok(())
    }
}

/// Opens every run file, validating its trailer.
pub fn open_runs(paths: &[PathBuf]) -> Result<Vec<SpillFile>> {
    paths
        .iter()
        .map(|p| SpillFile::open(p).map_err(EngineError::from))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::pass_groups;

    /// After one pass the run count is at most the factor, every group
    /// has two to `factor` runs, and groups are contiguous from the start.
    fn check(n: usize, factor: usize, threads: usize) -> usize {
        let groups = pass_groups(n, factor, threads);
        let mut at = 0;
        let mut merged = 0;
        for g in &groups {
            assert_eq!(g.start, at, "{n} {factor} {threads}: {groups:?}");
            assert!((2..=factor).contains(&g.len()), "{groups:?}");
            at = g.end;
            merged += g.len();
        }
        assert!(at <= n);
        n - merged + groups.len()
    }

    #[test]
    fn a_pass_merges_only_what_brings_the_runs_to_the_factor() {
        assert_eq!(pass_groups(65, 64, 2), vec![0..2]);
        assert_eq!(pass_groups(66, 64, 2), vec![0..2, 2..4]);
        assert_eq!(pass_groups(65, 64, 1), vec![0..2]);
        assert_eq!(pass_groups(70, 64, 2), vec![0..4, 4..8]);
        assert_eq!(pass_groups(258, 64, 2).len(), 4, "198 runs in 4 groups");
        assert_eq!(pass_groups(258, 64, 2).last().unwrap().end, 198);
        for n in 3..300 {
            for factor in [2, 3, 10, 64] {
                for threads in [1, 2, 4] {
                    if n > factor {
                        let left = check(n, factor, threads);
                        assert!(left < n, "a pass makes progress");
                        if n <= factor * factor {
                            assert_eq!(left, factor, "{n} {factor} {threads}");
                        }
                    }
                }
            }
        }
    }
}
