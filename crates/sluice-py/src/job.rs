//! A job of Python functions as engine tasks: mappers, combiners and
//! reducers that hand the engine's records to Python in batches.
//!
//! # The GIL
//!
//! Python code runs one thread at a time (this interpreter has the GIL;
//! see the README). A task takes the GIL only to turn a batch of records
//! into Python objects, call the user's function over the whole batch and
//! encode what it returned into a buffer of its own; it gives the GIL
//! back before it emits that buffer to the engine. Reading input, sorting,
//! spilling, merging and writing output run on the engine's other threads
//! at the same time, without the GIL.
//!
//! With a [`Pool`] the user's functions run in Python processes of
//! their own instead (see [`crate::procs`]): a task sends its records'
//! bytes to its process and emits the bytes it answers, never taking the
//! GIL, so the functions of two tasks run at once.
//!
//! The Python side is an object of `python/sluice/_runtime.py`'s
//! `Runtime` class: `map_task()` and `reduce_task(role)` make a task
//! object with `batch(items) -> list of pairs` and `final() -> list of
//! pairs`; `partition(key, n)` places a key; `describe(exc)` formats an
//! exception with its traceback.

use std::cell::Cell;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use sluice_api::{
    Error as ApiError, JobSpec, MapContext, Mapper, Partitioner, ReduceContext, Reducer, Values,
};

use crate::codec::{render, Codec, OutputFormat};
use crate::procs::{Pool, Reply, Worker};

/// Values of one reduce batch before they go to Python: a batch ends at
/// this many values or [`BATCH_BYTES`] of them, whichever comes first.
const BATCH_VALUES: usize = 8192;
/// Bytes of keys and values of one reduce batch.
const BATCH_BYTES: usize = 1 << 20;
/// Length marking a key written alone (a `None` value in the output).
const KEY_ONLY: u32 = u32::MAX;

/// How undecodable input lines are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undecodable {
    /// Fail the job naming the line's file and offset.
    Strict,
    /// Replace bad bytes with U+FFFD.
    Replace,
}

/// A job's Python side and what the engine needs to know about it.
#[derive(Debug)]
pub struct PyJob {
    runtime: Py<PyAny>,
    codec: Codec,
    dumps: Py<PyAny>,
    reducer: bool,
    combiner: bool,
    partitioner: bool,
    output: OutputFormat,
    undecodable: Undecodable,
    /// The first exception a task raised, re-raised as the cause of the
    /// job's failure.
    first_error: Mutex<Option<PyErr>>,
    /// The processes that run the user's functions, when not in process.
    pool: Option<Pool>,
}

impl PyJob {
    /// The job of `runtime`, a `sluice._runtime.Runtime`.
    pub fn new(runtime: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = runtime.py();
        let json = py.import("json")?;
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("ensure_ascii", false)?;
        let dumps = py
            .import("functools")?
            .getattr("partial")?
            .call((json.getattr("dumps")?,), Some(&kwargs))?;
        let output = match runtime
            .getattr("output_format")?
            .extract::<String>()?
            .as_str()
        {
            "json" => OutputFormat::Json,
            "raw" => OutputFormat::Raw,
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "output_format must be 'json' or 'raw', not {other:?}"
                )))
            }
        };
        let undecodable = match runtime
            .getattr("encoding_errors")?
            .extract::<String>()?
            .as_str()
        {
            "strict" => Undecodable::Strict,
            "replace" => Undecodable::Replace,
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "encoding_errors must be 'strict' or 'replace', not {other:?}"
                )))
            }
        };
        Ok(PyJob {
            runtime: runtime.clone().unbind(),
            codec: Codec::new(py)?,
            dumps: dumps.unbind(),
            reducer: runtime.getattr("has_reducer")?.is_truthy()?,
            combiner: runtime.getattr("has_combiner")?.is_truthy()?,
            partitioner: runtime.getattr("has_partitioner")?.is_truthy()?,
            output,
            undecodable,
            first_error: Mutex::new(None),
            pool: None,
        })
    }

    /// The job with its functions run in processes started so.
    pub fn in_processes(self, pool: Pool) -> Self {
        PyJob {
            pool: Some(pool),
            ..self
        }
    }

    pub fn undecodable(&self) -> Undecodable {
        self.undecodable
    }

    pub fn codec(&self) -> &Codec {
        &self.codec
    }

    /// The engine's job: `reducers` partitions when it has a reducer.
    pub fn spec(self: &Arc<Self>, name: &str, reducers: u32) -> JobSpec {
        let job = self.clone();
        let mut spec = JobSpec::new(name, move || PyMapper::new(job.clone(), reducers));
        if self.reducer {
            let job = self.clone();
            spec = spec.reducer(move || PyReducer::new(job.clone(), Role::Reduce));
        }
        if self.combiner && self.reducer {
            let job = self.clone();
            spec = spec.combiner(move || PyReducer::new(job.clone(), Role::Combine));
        }
        if self.partitioner && self.reducer {
            spec = spec.partitioner(ChosenPartition);
        }
        spec
    }

    /// The first exception a task raised, taken.
    pub fn take_error(&self) -> Option<PyErr> {
        self.first_error.lock().ok().and_then(|mut e| e.take())
    }

    /// Keeps `err` (the first one) and gives the engine its description.
    fn fail(&self, py: Python<'_>, err: PyErr, what: &str) -> ApiError {
        let text = self
            .runtime
            .bind(py)
            .call_method1("describe", (err.value(py),))
            .and_then(|s| s.extract::<String>())
            .unwrap_or_else(|_| err.to_string());
        if let Ok(mut first) = self.first_error.lock() {
            first.get_or_insert(err);
        }
        ApiError::user(format!("Python {what} raised {}", text.trim_end()))
    }

    /// Encodes (between tasks) or renders (into the output) one pair.
    fn put_pair<'py>(
        &self,
        pair: &Bound<'py, PyAny>,
        encode: bool,
        out: &mut Vec<u8>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let pair = pair.cast::<PyTuple>().map_err(|_| not_a_pair(pair))?;
        if pair.len() != 2 {
            return Err(not_a_pair(pair.as_any()));
        }
        let (key, value) = (pair.get_item(0)?, pair.get_item(1)?);
        self.put(&key, encode, out)?;
        if !encode && value.is_none() {
            out.extend_from_slice(&KEY_ONLY.to_le_bytes());
        } else {
            self.put(&value, encode, out)?;
        }
        Ok(key)
    }

    fn put(&self, obj: &Bound<'_, PyAny>, encode: bool, out: &mut Vec<u8>) -> PyResult<()> {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        if encode {
            self.codec.encode(obj, out)?;
        } else {
            render(obj, self.output, self.dumps.bind(obj.py()), out)?;
        }
        let len = u32::try_from(out.len() - at - 4).map_err(|_| {
            pyo3::exceptions::PyValueError::new_err("a key or value of 4 GiB or more")
        })?;
        out[at..at + 4].copy_from_slice(&len.to_le_bytes());
        Ok(())
    }

    /// The pairs of `pairs` (a list a task returned) as [`Pairs`] bytes,
    /// and the partition of each when the job chooses them.
    pub fn encode_pairs(
        &self,
        pairs: &Bound<'_, PyAny>,
        encode: bool,
        reducers: u32,
    ) -> PyResult<(Vec<u8>, Vec<u32>)> {
        let mut out = Pairs::default();
        self.put_pairs(pairs, encode, reducers, &mut out)?;
        Ok((out.bytes, out.parts))
    }

    /// Keeps the exception a process pickled (the first one) and gives
    /// the engine the error of `reply`.
    fn fail_from(&self, reply: Reply<'_>, what: &str) -> ApiError {
        if let Reply::Raised { exception, .. } = &reply {
            if !exception.is_empty() {
                let err = Python::attach(|py| {
                    let loads = py.import("pickle")?.getattr("loads")?;
                    let exc = loads.call1((PyBytes::new(py, exception),))?;
                    Ok::<_, PyErr>(PyErr::from_value(exc))
                });
                if let (Ok(err), Ok(mut first)) = (err, self.first_error.lock()) {
                    first.get_or_insert(err);
                }
            }
        }
        reply.into_error(what)
    }

    /// Sends a request of a task to its process; the pairs it answers
    /// go to `out`.
    fn ask(
        &self,
        worker: &mut Worker,
        what: &str,
        request: (u8, &[u8], &[u8]),
        out: &mut Pairs,
    ) -> sluice_api::Result<()> {
        let (tag, head, body) = request;
        match worker.request(tag, head, body)? {
            Reply::Pairs { pairs, parts } => {
                out.bytes.extend_from_slice(pairs);
                out.parts.extend(
                    parts
                        .chunks_exact(4)
                        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                );
                Ok(())
            }
            other => Err(self.fail_from(other, what)),
        }
    }

    /// Puts each pair of `pairs` (a list a task returned) into `out`, and
    /// into `parts` the partition of each when the job chooses them.
    fn put_pairs(
        &self,
        pairs: &Bound<'_, PyAny>,
        encode: bool,
        reducers: u32,
        out: &mut Pairs,
    ) -> PyResult<()> {
        if pairs.is_none() {
            return Ok(());
        }
        // Combiners keep their partition: only a mapper's pairs (with
        // the reducers' number) are placed.
        let chooses = encode && self.partitioner && reducers > 0;
        for pair in pairs.try_iter()? {
            let key = self.put_pair(&pair?, encode, &mut out.bytes)?;
            if chooses {
                let p = self
                    .runtime
                    .bind(pairs.py())
                    .call_method1("partition", (key, reducers))?
                    .extract::<i64>()?;
                out.parts
                    .push(p.rem_euclid(i64::from(reducers.max(1))) as u32);
            }
        }
        Ok(())
    }
}

fn not_a_pair(obj: &Bound<'_, PyAny>) -> PyErr {
    let shown = obj
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "?".into());
    pyo3::exceptions::PyTypeError::new_err(format!(
        "a mapper, combiner or reducer must give (key, value) pairs, not {}",
        shown.chars().take(200).collect::<String>()
    ))
}

/// Pairs a task's Python call gave, waiting to be emitted without the
/// GIL: each a key and a value, each a u32 little-endian length and its
/// bytes ([`KEY_ONLY`] for a value that is not there).
#[derive(Debug, Default)]
struct Pairs {
    bytes: Vec<u8>,
    /// The partition of each pair, when the job's partitioner chose them.
    parts: Vec<u32>,
}

thread_local! {
    /// The partition of the pair being emitted on this thread, chosen by
    /// the job's Python partitioner while the task held the GIL.
    static CHOSEN: Cell<u32> = const { Cell::new(0) };
}

/// The partitioner of a job with a Python partitioner: the engine's
/// collector asks for a pair's partition within the `emit` call that
/// hands it the pair, on the emitting thread, so the partition chosen in
/// Python is passed on through a thread-local set just before that call.
/// (Calling Python from here would take the GIL once per pair.)
#[derive(Debug)]
struct ChosenPartition;

impl Partitioner for ChosenPartition {
    fn partition(&self, _key: &[u8], n: u32) -> u32 {
        CHOSEN.with(|c| c.get()) % n.max(1)
    }
}

impl Pairs {
    fn clear(&mut self) {
        self.bytes.clear();
        self.parts.clear();
    }

    /// Emits each pair through `emit(key, value)` (`None`: a key alone).
    fn drain(
        &mut self,
        mut emit: impl FnMut(&[u8], Option<&[u8]>) -> sluice_api::Result<()>,
    ) -> sluice_api::Result<()> {
        let mut at = 0;
        let mut i = 0;
        while at < self.bytes.len() {
            let key = take(&self.bytes, &mut at);
            let value = take(&self.bytes, &mut at);
            if let Some(&p) = self.parts.get(i) {
                CHOSEN.with(|c| c.set(p));
            }
            emit(key.unwrap_or_default(), value)?;
            i += 1;
        }
        self.clear();
        Ok(())
    }
}

fn take<'a>(bytes: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
    let len = u32::from_le_bytes(bytes[*at..*at + 4].try_into().unwrap_or_default());
    *at += 4;
    if len == KEY_ONLY {
        return None;
    }
    let s = &bytes[*at..*at + len as usize];
    *at += len as usize;
    Some(s)
}

/// The lines of `block` (its first byte at `offset` of its file) as
/// Python strings, or the error of the first that is not UTF-8.
pub fn lines<'py>(
    py: Python<'py>,
    undecodable: Undecodable,
    offset: u64,
    block: &[u8],
) -> Result<Bound<'py, PyList>, String> {
    let mut items = Vec::new();
    let mut at = offset;
    for line in block.split_inclusive(|&b| b == b'\n') {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        let s = match std::str::from_utf8(body) {
            Ok(s) => PyString::new(py, s),
            Err(_) if undecodable == Undecodable::Replace => {
                PyString::new(py, &String::from_utf8_lossy(body))
            }
            Err(e) => {
                return Err(format!(
                    "the line at byte {at} is not UTF-8 (bad byte at {}); \
                     Job(encoding_errors='replace') reads it with U+FFFD in its place",
                    at + e.valid_up_to() as u64
                ))
            }
        };
        items.push(s);
        at += line.len() as u64;
    }
    PyList::new(py, items).map_err(|e| e.to_string())
}

/// Groups of keys and values (each a u32 length and codec bytes, a group
/// a key and as many values as its count) as a Python list of
/// `(key, [values])`.
pub fn decode_groups<'py>(
    py: Python<'py>,
    codec: &Codec,
    counts: impl Iterator<Item = usize>,
    bytes: &[u8],
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    let mut at = 0;
    let mut field = || -> PyResult<&[u8]> {
        let len = bytes
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
        let value = len.and_then(|n| bytes.get(at + 4..at + 4 + n));
        let value = value.ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err("groups that end inside a key or value")
        })?;
        at += 4 + value.len();
        Ok(value)
    };
    for n in counts {
        let key = codec.decode(py, field()?)?;
        let values = PyList::empty(py);
        for _ in 0..n {
            values.append(codec.decode(py, field()?)?)?;
        }
        list.append((key, values))?;
    }
    Ok(list)
}

/// Where a task's functions run: in this process (a task object made on
/// first use) or in a process of the job's pool.
#[derive(Default)]
enum Runner {
    #[default]
    Idle,
    Here(Py<PyAny>),
    There(Worker),
}

impl Runner {
    /// The task object of this process, made by `make` on first use.
    fn here<'py>(
        &mut self,
        py: Python<'py>,
        make: impl FnOnce() -> PyResult<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Runner::Here(t) = self {
            return Ok(t.bind(py).clone());
        }
        let t = make()?;
        *self = Runner::Here(t.clone().unbind());
        Ok(t)
    }

    /// The task's process, taken from `pool` on first use.
    fn there(&mut self, pool: &Pool, role: &str, reducers: u32) -> sluice_api::Result<&mut Worker> {
        if !matches!(self, Runner::There(_)) {
            *self = Runner::There(pool.take(role, reducers)?);
        }
        match self {
            Runner::There(w) => Ok(w),
            _ => unreachable!("set just above"),
        }
    }

    /// Gives a process back to `pool` when the task ended well.
    fn finish(&mut self, pool: Option<&Pool>) {
        if let (Runner::There(w), Some(pool)) = (std::mem::take(self), pool) {
            pool.give(w);
        }
    }
}

/// A map task: lines of text to the user's mapper, a block at a time.
struct PyMapper {
    job: Arc<PyJob>,
    reducers: u32,
    task: Runner,
    pairs: Pairs,
}

impl PyMapper {
    fn new(job: Arc<PyJob>, reducers: u32) -> Self {
        PyMapper {
            job,
            reducers,
            task: Runner::Idle,
            pairs: Pairs::default(),
        }
    }

    /// Calls `method` of the task object (made on first use) with `args`
    /// and puts the pairs it returns.
    fn call<'py>(
        &mut self,
        py: Python<'py>,
        method: &str,
        args: impl pyo3::call::PyCallArgs<'py>,
    ) -> PyResult<()> {
        let runtime = self.job.runtime.bind(py);
        let task = self.task.here(py, || runtime.call_method0("map_task"))?;
        let pairs = task.call_method1(method, args)?;
        let encode = self.job.reducer;
        self.job
            .put_pairs(&pairs, encode, self.reducers, &mut self.pairs)
    }

    /// Sends a request to the task's process and keeps the pairs.
    fn ask(&mut self, pool: &Pool, tag: u8, head: &[u8], body: &[u8]) -> sluice_api::Result<()> {
        let worker = self.task.there(pool, "mapper", self.reducers)?;
        self.job
            .ask(worker, "mapper", (tag, head, body), &mut self.pairs)
    }

    fn emit(&mut self, ctx: &mut MapContext<'_>) -> sluice_api::Result<()> {
        self.pairs.drain(|k, v| match v {
            Some(v) => ctx.emit(k, v),
            None => ctx.emit_key(k),
        })
    }
}

impl Mapper for PyMapper {
    fn map(
        &mut self,
        offset: u64,
        record: &[u8],
        ctx: &mut MapContext<'_>,
    ) -> sluice_api::Result<()> {
        let mut line = record.to_vec();
        line.push(b'\n');
        self.map_lines(offset, &line, ctx)
    }

    fn wants_line_blocks(&self) -> bool {
        true
    }

    fn map_lines(
        &mut self,
        offset: u64,
        block: &[u8],
        ctx: &mut MapContext<'_>,
    ) -> sluice_api::Result<()> {
        let job = self.job.clone();
        if let Some(pool) = &job.pool {
            self.ask(pool, b'M', &offset.to_le_bytes(), block)?;
        } else {
            Python::attach(|py| {
                let lines = lines(py, job.undecodable, offset, block).map_err(ApiError::user)?;
                self.call(py, "batch", (lines,))
                    .map_err(|e| job.fail(py, e, "mapper"))
            })?;
        }
        self.emit(ctx)
    }

    fn cleanup(&mut self, ctx: &mut MapContext<'_>) -> sluice_api::Result<()> {
        let job = self.job.clone();
        if let Some(pool) = &job.pool {
            self.ask(pool, b'F', &[], &[])?;
        } else {
            Python::attach(|py| {
                self.call(py, "final", ())
                    .map_err(|e| job.fail(py, e, "mapper"))
            })?;
        }
        self.emit(ctx)?;
        self.task.finish(job.pool.as_ref());
        Ok(())
    }
}

/// What a [`PyReducer`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Reduce,
    Combine,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Reduce => "reduce",
            Role::Combine => "combine",
        }
    }
}

/// A reduce or combine task: key groups to the user's function, many
/// groups at a time.
struct PyReducer {
    job: Arc<PyJob>,
    role: Role,
    task: Runner,
    /// Groups waiting for Python: keys and values with u32 lengths.
    groups: Vec<u8>,
    /// Values in each waiting group.
    counts: Vec<usize>,
    values: usize,
    pairs: Pairs,
}

impl PyReducer {
    fn new(job: Arc<PyJob>, role: Role) -> Self {
        PyReducer {
            job,
            role,
            task: Runner::Idle,
            groups: Vec::new(),
            counts: Vec::new(),
            values: 0,
            pairs: Pairs::default(),
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.groups
            .extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        self.groups.extend_from_slice(bytes);
    }

    /// Hands the waiting groups (and, at the end, the call to `final`) to
    /// Python, then writes what it gave.
    fn flush(&mut self, last: bool, ctx: &mut ReduceContext<'_>) -> sluice_api::Result<()> {
        if self.counts.is_empty() && !last {
            return Ok(());
        }
        let what = self.role.name();
        let job = self.job.clone();
        if let Some(pool) = &job.pool {
            self.send(pool, last)?;
        } else {
            Python::attach(|py| self.call(py, last).map_err(|e| job.fail(py, e, what)))?;
        }
        self.groups.clear();
        self.counts.clear();
        self.values = 0;
        self.pairs.drain(|k, v| match v {
            Some(v) => ctx.write(k, v),
            None => ctx.write_key(k),
        })?;
        if last {
            self.task.finish(job.pool.as_ref());
        }
        Ok(())
    }

    /// [`Self::flush`] through the task's process.
    fn send(&mut self, pool: &Pool, last: bool) -> sluice_api::Result<()> {
        let what = self.role.name();
        let worker = self.task.there(pool, what, 0)?;
        if !self.counts.is_empty() {
            let mut head = Vec::with_capacity(4 + 4 * self.counts.len());
            head.extend_from_slice(&(self.counts.len() as u32).to_le_bytes());
            for &n in &self.counts {
                head.extend_from_slice(&(n as u32).to_le_bytes());
            }
            let request = (b'G', &head[..], &self.groups[..]);
            self.job.ask(worker, what, request, &mut self.pairs)?;
        }
        if last {
            self.job
                .ask(worker, what, (b'F', &[], &[]), &mut self.pairs)?;
        }
        Ok(())
    }

    fn call(&mut self, py: Python<'_>, last: bool) -> PyResult<()> {
        let runtime = self.job.runtime.bind(py);
        let role = self.role.name();
        let task = self
            .task
            .here(py, || runtime.call_method1("reduce_task", (role,)))?;
        let encode = self.role == Role::Combine;
        if !self.counts.is_empty() {
            let groups = decode_groups(
                py,
                &self.job.codec,
                self.counts.iter().copied(),
                &self.groups,
            )?;
            let pairs = task.call_method1("batch", (groups,))?;
            self.job.put_pairs(&pairs, encode, 0, &mut self.pairs)?;
        }
        if last {
            let pairs = task.call_method0("final")?;
            self.job.put_pairs(&pairs, encode, 0, &mut self.pairs)?;
        }
        Ok(())
    }
}

impl Reducer for PyReducer {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> sluice_api::Result<()> {
        self.push(key);
        let mut n = 0;
        while let Some(v) = values.next_value() {
            self.push(v);
            n += 1;
            self.values += 1;
        }
        self.counts.push(n);
        if self.values >= BATCH_VALUES || self.groups.len() >= BATCH_BYTES {
            self.flush(false, ctx)?;
        }
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut ReduceContext<'_>) -> sluice_api::Result<()> {
        self.flush(true, ctx)
    }
}
