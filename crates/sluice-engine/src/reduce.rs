//! Merge passes and the reduce phase.
//!
//! When there are more spill runs than the merge factor, runs are merged in
//! groups of `merge_factor` into new runs (combining on the way, when the
//! job has a combiner or aggregator) until few enough remain. Then each
//! worker takes partitions from the queue: a k-way merge over that
//! partition's segment of every run feeds key groups to a fresh reducer,
//! which writes `part-r-NNNNN`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sluice_api::{Aggregator, Counters, JobSpec, ReduceContext, Reducer, TaskCounter, Values};
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

impl ReducePhase<'_> {
    /// Merges `runs` down to the merge factor, counting into `out`. Only
    /// the runs of the groups being merged are open at any time.
    pub fn merge_passes(
        &self,
        mut runs: Vec<PathBuf>,
        out: &mut ReduceOutput,
    ) -> Result<Vec<SpillFile>> {
        let mut pass = 0;
        while runs.len() > self.cfg.merge_factor {
            pass += 1;
            let groups: Vec<&[PathBuf]> = runs.chunks(self.cfg.merge_factor).collect();
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
            runs = merged.into_iter().map(|(_, p)| p).collect();
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
                    let stats = reduce_groups(&mut m, c.as_mut(), &mut sink, counters, p)
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
        self.job.aggregator.clone().map(|agg| {
            Box::new(AggregateCombiner {
                agg,
                acc: Vec::new(),
                tmp: Vec::new(),
            }) as Box<dyn Reducer>
        })
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
        let mut sink = TextOutput::create(&self.committer.attempt_path(name, 0)?)?;
        let shuffle: u64 = runs.iter().map(|f| f.segments()[p as usize].len).sum();
        let readers = runs.iter().map(|f| f.reader(p)).collect();
        let mut m = Merger::new(readers, self.job.key_order)?;
        let mut reducer = (self.job.reducer.as_ref().expect("reduce job has a reducer"))();
        let c = &mut out.counters;
        let stats = reduce_groups(&mut m, reducer.as_mut(), &mut sink, c, partition)
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

/// An [`Aggregator`] used as a combiner: folds a group's values into one.
struct AggregateCombiner {
    agg: std::sync::Arc<dyn Aggregator>,
    acc: Vec<u8>,
    tmp: Vec<u8>,
}

impl Reducer for AggregateCombiner {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> sluice_api::Result<()> {
        self.acc.clear();
        if let Some(first) = values.next_value() {
            self.acc.extend_from_slice(first);
        }
        while let Some(v) = values.next_value() {
            if !self.agg.fold_in_place(&mut self.acc, v) {
                self.tmp.clear();
                self.agg.fold(&self.acc, v, &mut self.tmp);
                std::mem::swap(&mut self.acc, &mut self.tmp);
            }
        }
        ctx.write(key, &self.acc)
    }
}

/// Opens every run file, validating its trailer.
pub fn open_runs(paths: &[PathBuf]) -> Result<Vec<SpillFile>> {
    paths
        .iter()
        .map(|p| SpillFile::open(p).map_err(EngineError::from))
        .collect()
}
