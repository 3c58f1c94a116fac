use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::{Counters, Result};

/// Where emitted records go: the map output collector, a combiner's output,
/// or the job's output files. Implemented by the engine.
pub trait Sink {
    /// Emits one key/value pair.
    fn emit(&mut self, key: &[u8], value: &[u8]) -> Result<()>;

    /// Emits a key with no value. Output files write it as `key` alone on
    /// its line (Hadoop's `NullWritable` value); elsewhere the value is empty.
    fn emit_key(&mut self, key: &[u8]) -> Result<()> {
        self.emit(key, &[])
    }

    /// Emits bytes that output files write as they are, with no separator
    /// or newline (binary records such as TeraSort's); elsewhere a key alone.
    fn emit_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.emit_key(bytes)
    }
}

/// The values of one key group, read one at a time without allocation.
pub trait Values {
    /// The next value, or `None` at the end of the group. The slice is valid
    /// until the next call.
    fn next_value(&mut self) -> Option<&[u8]>;
}

/// Whether the attempt a task runs in has been cancelled (killed, its job
/// ended, or a faster attempt won): its result will be thrown away, so
/// user code that runs long (a Streaming command) may stop at once, as
/// Spark's `TaskContext.isInterrupted`. Clones share one flag; the
/// default one is never cancelled.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// Cancels the attempt, for every clone.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether the attempt has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// What a mapper sees besides its input record.
pub struct MapContext<'a> {
    sink: &'a mut dyn Sink,
    counters: &'a mut Counters,
    task: usize,
    input: Option<(&'a Path, u64, u64)>,
    cancel: Option<&'a Cancel>,
}

impl<'a> MapContext<'a> {
    /// A context writing to `sink` and counting into `counters`.
    pub fn new(sink: &'a mut dyn Sink, counters: &'a mut Counters) -> Self {
        MapContext {
            sink,
            counters,
            task: 0,
            input: None,
            cancel: None,
        }
    }

    /// The same context in an attempt cancelled through `cancel`.
    pub fn with_cancel(mut self, cancel: &'a Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// The attempt's cancellation, to look at while the task runs.
    pub fn cancel(&self) -> Cancel {
        self.cancel.cloned().unwrap_or_default()
    }

    /// The same context reading `length` bytes of file `path` from byte
    /// `start`.
    pub fn with_input(mut self, path: &'a Path, start: u64, length: u64) -> Self {
        self.input = Some((path, start, length));
        self
    }

    /// The file, first byte and length of the split being read: in `map`,
    /// the record's; in `setup` and `cleanup`, the task's when it reads one
    /// split (Hadoop's `mapreduce.map.input.file`, `.start`, `.length`;
    /// `None` for a task of several packed splits, as Hadoop leaves them
    /// unset for a combined split, or of synthetic input). On a cluster the
    /// file is the block's on the worker.
    pub fn input(&self) -> Option<(&Path, u64, u64)> {
        self.input
    }

    /// The same context for the map task of split `task`.
    pub fn for_task(mut self, task: usize) -> Self {
        self.task = task;
        self
    }

    /// The index of the split this map task runs over: its position in
    /// the job's split list. Jobs on synthetic input (no file, see
    /// `Split::synthetic` in `sluice-formats`) generate their records from
    /// it in `setup` or `cleanup`, so a re-run task makes the same records.
    pub fn task(&self) -> usize {
        self.task
    }

    /// Emits one intermediate (or, in a map-only job, output) record.
    #[inline]
    pub fn emit(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.sink.emit(key, value)
    }

    /// Emits a key with no value.
    #[inline]
    pub fn emit_key(&mut self, key: &[u8]) -> Result<()> {
        self.sink.emit_key(key)
    }

    /// Emits bytes that a map-only job's output files write as they are
    /// (no separator, no newline); see [`Sink::emit_raw`].
    #[inline]
    pub fn emit_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.sink.emit_raw(bytes)
    }

    /// The task's counters, for user counters.
    pub fn counters(&mut self) -> &mut Counters {
        self.counters
    }
}

/// What a reducer (or combiner) sees besides its key group.
pub struct ReduceContext<'a> {
    sink: &'a mut dyn Sink,
    counters: &'a mut Counters,
    partition: u32,
    cancel: Option<&'a Cancel>,
}

impl<'a> ReduceContext<'a> {
    /// A context writing to `sink` and counting into `counters`.
    pub fn new(sink: &'a mut dyn Sink, counters: &'a mut Counters) -> Self {
        ReduceContext {
            sink,
            counters,
            partition: 0,
            cancel: None,
        }
    }

    /// The same context in an attempt cancelled through `cancel`.
    pub fn with_cancel(mut self, cancel: &'a Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// The attempt's cancellation, to look at while the task runs.
    pub fn cancel(&self) -> Cancel {
        self.cancel.cloned().unwrap_or_default()
    }

    /// The same context for partition `p`.
    pub fn for_partition(mut self, p: u32) -> Self {
        self.partition = p;
        self
    }

    /// The partition being reduced (or combined): the reduce task's index.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// Writes one output record (`key<TAB>value` in text output).
    #[inline]
    pub fn write(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.sink.emit(key, value)
    }

    /// Writes a key with no value (`key` alone in text output).
    #[inline]
    pub fn write_key(&mut self, key: &[u8]) -> Result<()> {
        self.sink.emit_key(key)
    }

    /// Writes bytes exactly as given (no tab, no newline) to the output.
    #[inline]
    pub fn write_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.sink.emit_raw(bytes)
    }

    /// The task's counters, for user counters.
    pub fn counters(&mut self) -> &mut Counters {
        self.counters
    }
}
