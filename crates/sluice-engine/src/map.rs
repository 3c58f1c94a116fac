//! The map phase.
//!
//! Each worker thread takes map tasks from the queue and runs each (a fresh
//! mapper with setup and cleanup) over its splits, one or several small
//! ones packed together ([`MapSplit`]). Map output of every task a
//! thread runs goes into that thread's collector, which spills a sorted run
//! whenever it reaches the thread's share of the memory budget, and once
//! more when the thread runs out of splits. Map-only jobs write each split's
//! output straight to its `part-m-NNNNN` file instead.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use sluice_api::{
    Counters, Error as ApiError, JobSpec, MapContext, Mapped, Mapper, RowBatch, Sink, TaskCounter,
};
use sluice_formats::input::{Codec, RecordFormat};
use sluice_formats::input::{MapSplit, Split};
use sluice_formats::parquet::{read_batches, Batch};
use sluice_formats::read::{read_line_blocks, read_records, ReadOptions};
use sluice_formats::spill::SpillWriter;
use sluice_sort::{AnyCollector, Collector, HashCollector, SortCollector};

use crate::commit::Committer;
use crate::config::{BadRecordPolicy, EngineConfig};
use crate::output::TextOutput;
use crate::pool::{run_workers, Queue};
use crate::progress::Progress;
use crate::task::{user_error, TaskSink};
use crate::EngineError;

type Result<T> = std::result::Result<T, EngineError>;

/// Smallest spill target at which a job's fold table
/// ([`sluice_api::JobSpec::fold_combiner`]) is used: the table's 640 KiB
/// count against it.
const FOLD_MIN: usize = 4 << 20;

/// Everything a map worker needs.
pub struct MapPhase<'a> {
    pub job: &'a JobSpec,
    pub cfg: &'a EngineConfig,
    pub splits: &'a [MapSplit],
    pub committer: &'a Committer,
    pub spill_dir: &'a Path,
    /// Bytes a thread's sort collector holds before it spills
    /// ([`EngineConfig::spill_target`]); at most the collect budget.
    pub spill_target: usize,
    pub progress: &'a Progress,
    pub spill_seq: AtomicUsize,
}

/// What one map worker (or the whole phase) produced.
#[derive(Debug, Default)]
pub struct MapOutput {
    pub counters: Counters,
    pub runs: Vec<PathBuf>,
    pub output_records: u64,
    pub output_bytes: u64,
}

impl MapOutput {
    fn absorb(&mut self, o: MapOutput) {
        self.counters.merge(&o.counters);
        self.runs.extend(o.runs);
        self.output_records += o.output_records;
        self.output_bytes += o.output_bytes;
    }
}

impl MapPhase<'_> {
    /// Runs every split; returns merged counters and the spill runs.
    pub fn run(&self) -> Result<MapOutput> {
        let queue = Queue::new(self.splits.len());
        let threads = self.cfg.threads.min(self.splits.len().max(1));
        let outs = run_workers(threads, &queue, |_| self.worker(&queue))?;
        let mut all = MapOutput::default();
        for o in outs {
            all.absorb(o);
        }
        all.runs.sort();
        Ok(all)
    }

    fn partitions(&self) -> u32 {
        self.cfg.reducers
    }

    /// Bytes a thread's sort collector may use for its sort's second
    /// buffer: what its collect share leaves beyond the spill target (the
    /// buffer is at most the index, under the bytes it spills at).
    fn sort_room(&self) -> usize {
        self.cfg.collect_budget().saturating_sub(self.spill_target)
    }

    fn worker(&self, queue: &Queue) -> Result<MapOutput> {
        let mut out = MapOutput::default();
        if self.job.is_map_only() {
            while let Some(i) = queue.take() {
                self.map_only_split(&self.splits[i], queue, &mut out)?;
            }
            return Ok(out);
        }
        let mut sink = CollectSink::new(self);
        while let Some(i) = queue.take() {
            self.run_split(&self.splits[i], &mut sink, queue, &mut out.counters)?;
        }
        if queue.aborted() {
            return Err(EngineError::Cancelled);
        }
        if !sink.collector.is_empty() {
            sink.spill()?;
        }
        out.counters.merge(&sink.counters);
        out.runs = sink.runs;
        Ok(out)
    }

    fn map_only_split(&self, split: &MapSplit, queue: &Queue, out: &mut MapOutput) -> Result<()> {
        let name = format!("part-m-{:05}", split.index);
        let path = self.committer.attempt_path(&name, 0)?;
        let cfg = self.cfg;
        let mut sink =
            TextOutput::create_as(&path, cfg.sync_output, &cfg.output, cfg.row_group_bytes())?;
        self.run_split(split, &mut sink, queue, &mut out.counters)?;
        let (records, bytes) = sink.finish()?;
        out.counters.add(TaskCounter::MapOutputWritten, records);
        out.output_records += records;
        out.output_bytes += bytes;
        self.committer.commit_task(&name, 0)?;
        Ok(())
    }

    /// One map task: setup, every record of each of its splits in turn,
    /// cleanup.
    fn run_split(
        &self,
        split: &MapSplit,
        sink: &mut dyn TaskSink,
        queue: &Queue,
        counters: &mut Counters,
    ) -> Result<()> {
        let mut mapper = (self.job.mapper)();
        let mut bad = BadRecords::new(self, split);
        let task = split.index;
        // A task of one split tells its mapper which, from setup on.
        let one = match &split.parts[..] {
            [p] if !p.is_synthetic() => Some(p),
            _ => None,
        };
        let mut ctx = MapContext::new(sink, counters)
            .for_task(task)
            .with_cancel(&self.cfg.cancel);
        if let Some(p) = one {
            ctx = ctx.with_input(&p.file.path, p.start, p.len());
        }
        let r = mapper.setup(&mut ctx);
        r.map_err(|e| user_error(sink, e, "map setup", None))?;
        for part in &split.parts {
            let read = self.read_part(part, task, &mut *mapper, sink, queue, counters, &mut bad);
            let (records, consumed) = read?;
            counters.add(TaskCounter::MapInputRecords, records);
            counters.add(TaskCounter::MapInputBytes, consumed);
            Progress::add(&self.progress.input_done, part.len());
        }
        let mut ctx = MapContext::new(sink, counters)
            .for_task(task)
            .with_cancel(&self.cfg.cancel);
        if let Some(p) = one {
            ctx = ctx.with_input(&p.file.path, p.start, p.len());
        }
        let r = mapper.cleanup(&mut ctx);
        r.map_err(|e| user_error(sink, e, "map cleanup", None))?;
        bad.finish()
    }

    /// Every record of one split through `mapper`; returns the records and
    /// bytes read.
    #[allow(clippy::too_many_arguments)]
    fn read_part(
        &self,
        split: &Split,
        task: usize,
        mapper: &mut dyn Mapper,
        sink: &mut dyn TaskSink,
        queue: &Queue,
        counters: &mut Counters,
        bad: &mut BadRecords<'_>,
    ) -> Result<(u64, u64)> {
        let opts = ReadOptions {
            buffer_size: 1 << 20,
            max_record: self.cfg.max_record,
        };
        let stored = self.as_stored(split);
        let split = stored.as_ref().unwrap_or(split);
        let mut records = 0u64;
        let blocks = self.cfg.format == RecordFormat::Lines
            && mapper.wants_line_blocks()
            && !split.file.codec.has_rows();
        let mut m = Mapping {
            phase: self,
            split,
            task,
            mapper,
            sink,
            counters: &mut *counters,
            bad,
        };
        let consumed = if split.is_synthetic() {
            0
        } else if blocks {
            read_line_blocks(split, &opts, |off, block| {
                records += count_lines(block);
                if queue.aborted() {
                    return Err(EngineError::Cancelled);
                }
                m.block(off, block)
            })?
        } else {
            let columnar = split.file.codec == Codec::Parquet
                && !self.cfg.rows.json
                && m.mapper.columnar().is_some();
            let read = if columnar {
                let mut rec = Vec::new();
                read_batches(split, &self.cfg.rows, |b| {
                    records += b.rows as u64;
                    if queue.aborted() {
                        return Err(EngineError::Cancelled);
                    }
                    m.batch(b, &mut rec)
                })?
            } else {
                read_records(split, self.cfg.format, &self.cfg.rows, &opts, |off, rec| {
                    records += 1;
                    if records.is_multiple_of(65_536) && queue.aborted() {
                        return Err(EngineError::Cancelled);
                    }
                    m.record(off, rec)
                })?
            };
            m.counters
                .add(TaskCounter::RowGroupsSkipped, read.groups_skipped);
            m.counters
                .add(TaskCounter::BytesSkipped, read.bytes_skipped);
            m.counters.add(TaskCounter::RowsSkipped, read.rows_skipped);
            read.bytes
        };
        Ok((records, consumed))
    }
}

/// One map task reading one split: where each record or batch of rows
/// goes.
struct Mapping<'m, 'p, 'b> {
    phase: &'m MapPhase<'p>,
    split: &'m Split,
    task: usize,
    mapper: &'m mut dyn Mapper,
    sink: &'m mut dyn TaskSink,
    counters: &'m mut Counters,
    bad: &'m mut BadRecords<'b>,
}

impl Mapping<'_, '_, '_> {
    /// One text record through the mapper; a malformed one goes to the
    /// bad-record policy.
    fn record(&mut self, off: u64, rec: &[u8]) -> Result<()> {
        let path = &self.split.file.path;
        let mut ctx = context(self.phase, self.split, self.task, self.sink, self.counters);
        match self.mapper.map(off, rec, &mut ctx) {
            Ok(()) => Ok(()),
            Err(ApiError::BadRecord(msg)) => self.bad.handle(path, off, rec, msg, self.counters),
            Err(e) => Err(user_error(self.sink, e, "map", Some((path.clone(), off)))),
        }
    }

    /// A block of whole lines through the mapper's block entry. A block
    /// the mapper refuses as malformed ([`ApiError::BadRecord`], before it
    /// emitted anything for it, as [`Mapper::map_lines`] promises) goes
    /// again one line at a time, so each malformed line meets the
    /// bad-record policy with its own offset.
    fn block(&mut self, off: u64, block: &[u8]) -> Result<()> {
        let path = &self.split.file.path;
        let mut ctx = context(self.phase, self.split, self.task, self.sink, self.counters);
        match self.mapper.map_lines(off, block, &mut ctx) {
            Ok(()) => Ok(()),
            Err(ApiError::BadRecord(_)) => {
                for (at, line) in sluice_api::block_lines(block) {
                    self.record(off + at, line)?;
                }
                Ok(())
            }
            Err(e) => Err(user_error(self.sink, e, "map", Some((path.clone(), off)))),
        }
    }

    /// One batch of rows through the mapper's columnar entry, or, when it
    /// declines the batch, each row as a text record (written into `rec`).
    fn batch(&mut self, b: &Batch<'_>, rec: &mut Vec<u8>) -> Result<()> {
        let rows = RowBatch {
            first_row: b.first_row,
            rows: b.rows,
            columns: b.columns,
        };
        let mapped = match self.mapper.columnar() {
            Some(c) => {
                let mut ctx = context(self.phase, self.split, self.task, self.sink, self.counters);
                c.map_batch(&rows, &mut ctx)
            }
            None => Ok(Mapped::Declined),
        };
        match mapped {
            Ok(Mapped::Done) => {
                self.counters.add(TaskCounter::RowsAsColumns, b.rows as u64);
                Ok(())
            }
            Ok(Mapped::Declined) => b.records(rec, &mut |off, r| self.record(off, r)),
            Err(e) => {
                let at = Some((self.split.file.path.clone(), b.first_row));
                Err(user_error(self.sink, e, "map", at))
            }
        }
    }
}

/// The context of a map call of task `task` reading `split`.
fn context<'c>(
    phase: &'c MapPhase<'_>,
    split: &'c Split,
    task: usize,
    sink: &'c mut dyn TaskSink,
    counters: &'c mut Counters,
) -> MapContext<'c> {
    MapContext::new(sink, counters)
        .for_task(task)
        .with_cancel(&phase.cfg.cancel)
        .with_input(&split.file.path, split.start, split.len())
}

impl MapPhase<'_> {
    /// The split with its file's codec as the job's input format says,
    /// when that is not the one its name and first bytes gave.
    fn as_stored(&self, split: &Split) -> Option<Split> {
        let codec = self.cfg.file_format.codec_of(&split.file);
        if split.is_synthetic() || codec == split.file.codec {
            return None;
        }
        let mut file = (*split.file).clone();
        file.codec = codec;
        Some(Split {
            file: std::sync::Arc::new(file),
            ..split.clone()
        })
    }
}

/// Lines in a block of whole lines (the last may lack its newline).
fn count_lines(block: &[u8]) -> u64 {
    let newlines = memchr::memchr_iter(b'\n', block).count() as u64;
    newlines + u64::from(!block.is_empty() && !block.ends_with(b"\n"))
}

/// Malformed records of one split under the configured policy.
struct BadRecords<'a> {
    phase: &'a MapPhase<'a>,
    name: String,
    out: Option<TextOutput>,
}

impl<'a> BadRecords<'a> {
    fn new(phase: &'a MapPhase<'a>, split: &MapSplit) -> Self {
        BadRecords {
            phase,
            name: format!("_bad_records/part-m-{:05}", split.index),
            out: None,
        }
    }

    fn handle(
        &mut self,
        path: &Path,
        offset: u64,
        rec: &[u8],
        msg: String,
        counters: &mut Counters,
    ) -> Result<()> {
        if self.phase.cfg.bad_records == BadRecordPolicy::Fail {
            return Err(EngineError::BadRecord {
                path: path.to_owned(),
                offset,
                msg,
            });
        }
        counters.add(TaskCounter::BadRecords, 1);
        if self.out.is_none() {
            let p = self.phase.committer.attempt_path(&self.name, 0)?;
            self.out = Some(TextOutput::create(&p, self.phase.cfg.sync_output)?);
        }
        let out = self.out.as_mut().expect("created above");
        if out.emit_key(rec).is_err() {
            return Err(out.take_engine_error().unwrap_or(EngineError::Cancelled));
        }
        Ok(())
    }

    fn finish(self) -> Result<()> {
        if let Some(out) = self.out {
            out.finish()?;
            self.phase.committer.commit_task(&self.name, 0)?;
        }
        Ok(())
    }
}

/// Collects map output and spills it when the thread's budget is reached.
struct CollectSink<'a> {
    phase: &'a MapPhase<'a>,
    collector: AnyCollector,
    /// Bytes the collector holds before it spills.
    spill_at: usize,
    /// The thread's collect share: no record may be larger.
    budget: usize,
    counters: Counters,
    runs: Vec<PathBuf>,
    err: Option<EngineError>,
}

impl<'a> CollectSink<'a> {
    fn new(phase: &'a MapPhase<'a>) -> Self {
        let job = phase.job;
        let parts = phase.partitions();
        let (collector, spill_at) = match &job.aggregator {
            Some(agg) => (
                AnyCollector::Hash(
                    HashCollector::new(agg.clone(), job.partitioner.clone(), parts, job.key_order)
                        .with_budget(phase.cfg.collect_budget()),
                ),
                phase.cfg.collect_budget(),
            ),
            None => {
                let mut c = SortCollector::new(
                    job.partitioner.clone(),
                    parts,
                    job.key_order,
                    job.combiner.clone(),
                )
                .with_sort_room(phase.sort_room())
                .with_cancel(phase.cfg.cancel.clone());
                // The table is a small part of the spill buffer, or none.
                if let Some(agg) = job.fold.clone().filter(|_| phase.spill_target >= FOLD_MIN) {
                    c = c.with_fold(agg);
                }
                (AnyCollector::Sort(c), phase.spill_target)
            }
        };
        CollectSink {
            phase,
            collector,
            spill_at,
            budget: phase.cfg.collect_budget(),
            counters: Counters::default(),
            runs: Vec::new(),
            err: None,
        }
    }

    fn spill(&mut self) -> Result<()> {
        let seq = self.phase.spill_seq.fetch_add(1, Ordering::Relaxed);
        let path = self.phase.spill_dir.join(format!("spill-{seq:06}.run"));
        let mut w = SpillWriter::create(&path, self.phase.partitions())?;
        let give_up = matches!(&self.collector, AnyCollector::Hash(h) if h.not_reducing());
        self.collector.spill(&mut w, &mut self.counters)?;
        if give_up {
            self.stop_hashing();
        }
        let (segments, size) = w.finish()?;
        let records: u64 = segments.iter().map(|s| s.records).sum();
        self.counters.add(TaskCounter::SpilledRecords, records);
        self.counters.add(TaskCounter::SpilledBytes, size);
        if let Some(hook) = &self.phase.cfg.spill_hook {
            hook(&path);
        }
        self.runs.push(path);
        Ok(())
    }

    /// After a hash spill whose table hardly reduced its records
    /// ([`HashCollector::not_reducing`]): the rest of the thread's output
    /// is sorted in a small buffer and combined at spill time instead. The
    /// answer is the same either way.
    fn stop_hashing(&mut self) {
        let Some(agg) = self.phase.job.aggregator.clone() else {
            return;
        };
        let job = self.phase.job;
        self.collector = AnyCollector::Sort(
            SortCollector::new(
                job.partitioner.clone(),
                self.phase.partitions(),
                job.key_order,
                Some(sluice_api::aggregate_combiner(agg)),
            )
            .with_sort_room(self.phase.sort_room()),
        );
        self.spill_at = self.phase.spill_target;
        self.counters.add(TaskCounter::HashGroupingStopped, 1);
    }

    fn fail(&mut self, e: EngineError) -> ApiError {
        self.err = Some(e);
        ApiError::Aborted
    }
}

impl Sink for CollectSink<'_> {
    #[inline]
    fn emit(&mut self, key: &[u8], value: &[u8]) -> sluice_api::Result<()> {
        self.counters.add(TaskCounter::MapOutputRecords, 1);
        self.counters.add(
            TaskCounter::MapOutputBytes,
            (key.len() + value.len()) as u64,
        );
        if key.len() + value.len() > self.budget {
            return Err(self.fail(EngineError::RecordOverBudget {
                bytes: (key.len() + value.len()) as u64,
                share: self.budget as u64,
                memory: self.phase.cfg.memory,
                threads: self.phase.cfg.threads,
            }));
        }
        if let Err(e) = self.collector.collect(key, value) {
            return Err(self.fail(e.into()));
        }
        if self.collector.over(self.spill_at) {
            if let Err(e) = self.spill() {
                return Err(self.fail(e));
            }
        }
        Ok(())
    }
}

impl TaskSink for CollectSink<'_> {
    fn take_engine_error(&mut self) -> Option<EngineError> {
        self.err.take()
    }
}
