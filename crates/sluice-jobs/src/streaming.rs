//! Hadoop Streaming: mappers, combiners and reducers that are any program
//! reading lines on standard input and writing lines on standard output.
//!
//! The contract is Hadoop's (`hadoop-streaming`'s `PipeMapRed`):
//!
//! - A task starts its command once (`sh -c CMD`) in a working directory
//!   of its own holding the shipped files (`-file`), with the job's `-D`
//!   properties in its environment, dots turned into underscores, and
//!   `mapreduce_task_id`, `mapreduce_task_partition` and
//!   `mapreduce_task_ismap`.
//! - A mapper gets each input line on standard input. A reducer (or
//!   combiner) gets `key<TAB>value` lines sorted by key, the values of one
//!   key on consecutive lines; it finds the groups itself.
//! - Each output line is split into key and value at the first tab
//!   (`stream.map.output.field.separator` and
//!   `stream.num.map.output.key.fields` choose another separator and the
//!   number of fields in the key); a line without one is a key with an
//!   empty value.
//! - Standard error lines `reporter:counter:GROUP,NAME,N` add to a counter
//!   and `reporter:status:...` set the status; the last others are kept
//!   for the error message.
//! - A command that exits non-zero fails the attempt, naming the command,
//!   its exit status and the last lines of its standard error. One that
//!   exits (zero) before reading all its input fails it too, as Hadoop's
//!   broken pipe does.
//! - A command whose task attempt is cancelled (killed, its job ended, a
//!   faster attempt won: [`sluice_api::Cancel`]) is killed at once, with
//!   its process group.
//! - A command that makes no progress (reads no input, writes no output and
//!   no standard error) for `mapreduce.task.timeout` milliseconds (`-D`;
//!   600,000 as in Hadoop; 0: never) is killed and fails the attempt, as
//!   Hadoop kills a task that stopped reporting.
//!
//! Records go to the process and come back through threads of their own
//! and bounded queues, in batches; the task's thread hands input over and
//! takes output back in turns, so neither side waits on the other forever
//! (a process that writes much before it reads more never blocks it).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::cell::{self, WorkDir};
use sluice_api::{
    Cancel, Error, JobSpec, MapContext, Mapper, ReduceContext, Reducer, Result, Values,
};

/// A streaming job.
#[derive(Debug, Clone, Default)]
pub struct Streaming {
    /// The map command.
    pub mapper: String,
    /// The reduce command; `None`: a map-only job.
    pub reducer: Option<String>,
    /// The combine command, if any.
    pub combiner: Option<String>,
    /// Environment variables every command gets (`-D` properties with
    /// dots turned into underscores).
    pub env: Vec<(String, String)>,
    /// Files copied into every task's working directory: name and bytes.
    pub files: Vec<(String, Vec<u8>)>,
    /// Where a map output line's key ends (`stream.map.output.field.separator`).
    pub separator: u8,
    /// Fields of the line in the key (`stream.num.map.output.key.fields`).
    pub key_fields: usize,
}

/// The process groups of the commands this process runs (each command is
/// the leader of a group of its own), for [`stop_all`].
static GROUPS: Mutex<std::collections::BTreeSet<i32>> =
    Mutex::new(std::collections::BTreeSet::new());

fn groups() -> std::sync::MutexGuard<'static, std::collections::BTreeSet<i32>> {
    GROUPS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Kills every command this process has started and not yet reaped, with
/// everything each started: for a signal that stops this process (Ctrl-C
/// reaches only the terminal's foreground group, and each command runs in
/// a group of its own so that a timeout can kill all it started).
pub fn stop_all() {
    for &g in groups().iter() {
        if let Some(pid) = rustix::process::Pid::from_raw(g) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

/// Makes the command's process get SIGKILL when the thread that started
/// it ends (Linux's parent-death signal; the task's thread waits for its
/// process, so that is when this process dies): a worker killed with
/// SIGKILL, which has no chance to [`stop_all`], leaves no command
/// running. What the command starts in turn is its group's, which
/// [`stop_all`] kills on the signals a process can catch. `pre_exec` is
/// the standard library's only hook between fork and exec, hence the one
/// unsafe call.
#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut Command) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let parent = rustix::process::getpid();
        // SAFETY: between fork and exec the closure makes three system
        // calls (async-signal-safe) and allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))?;
                // The parent died before the signal was set.
                if rustix::process::getppid() != Some(parent) {
                    return Err(rustix::io::Errno::SRCH.into());
                }
                Ok(())
            });
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = cmd;
}

/// Where a task puts the key and value of each line its process writes.
type Emit<'e> = dyn FnMut(&[u8], &[u8]) -> Result<()> + 'e;

/// Bytes of input handed to the process at a time.
const BATCH: usize = 64 << 10;
/// Batches queued each way.
const QUEUED: usize = 16;
/// Standard error lines kept for an error message.
const STDERR_TAIL: usize = 20;
/// Hadoop's `mapreduce.task.timeout` default, in milliseconds.
const TASK_TIMEOUT_MS: u64 = 600_000;
/// How often a task waiting on its process looks at the clock.
const TICK: Duration = Duration::from_millis(5);

/// When a process last made progress: milliseconds since it started, set
/// by the threads that feed it, drain it and read its standard error.
#[derive(Clone)]
struct Progress {
    start: Instant,
    last: Arc<AtomicU64>,
}

impl Progress {
    fn new() -> Self {
        Progress {
            start: Instant::now(),
            last: Arc::new(AtomicU64::new(0)),
        }
    }

    fn made(&self) {
        let now = self.start.elapsed().as_millis() as u64;
        self.last.fetch_max(now, Ordering::Relaxed);
    }

    /// Milliseconds since the last progress.
    fn idle_ms(&self) -> u64 {
        (self.start.elapsed().as_millis() as u64).saturating_sub(self.last.load(Ordering::Relaxed))
    }
}

/// The job's `mapreduce.task.timeout` (milliseconds, 0: none) from its
/// `-D` properties (in the environment list, dots turned into underscores).
fn task_timeout(env: &[(String, String)]) -> Result<Option<u64>> {
    let Some((_, v)) = env.iter().find(|(k, _)| k == "mapreduce_task_timeout") else {
        return Ok(Some(TASK_TIMEOUT_MS));
    };
    match v.trim().parse::<u64>() {
        Ok(0) => Ok(None),
        Ok(ms) => Ok(Some(ms)),
        Err(_) => Err(Error::user(format!(
            "mapreduce.task.timeout is {v:?}, not a number of milliseconds"
        ))),
    }
}

/// The job: mappers (and combiners, reducers) that run the commands.
pub fn streaming(s: Streaming) -> JobSpec {
    let s = Arc::new(s);
    let m = s.clone();
    let mut spec = JobSpec::new("streaming", move || StreamMapper {
        s: m.clone(),
        pipe: None,
    });
    if let Some(cmd) = s.reducer.clone() {
        let r = s.clone();
        spec = spec.reducer(move || StreamReducer::new(&r, &cmd, false));
    }
    if let Some(cmd) = s.combiner.clone() {
        let c = s.clone();
        // A process per spilled partition: as few spills as the budget
        // allows (measured: 68 combiner processes over 50 MB of word
        // count's map output with the local engine's small spills).
        spec = spec.costly_combiner(move || StreamReducer::new(&c, &cmd, true));
    }
    spec
}

/// A running command, with its feeding and reading threads.
struct Pipe {
    command: String,
    child: Child,
    input: Option<SyncSender<Vec<u8>>>,
    output: Receiver<Vec<u8>>,
    writer: Option<JoinHandle<std::io::Result<()>>>,
    reader: Option<JoinHandle<()>>,
    errors: Option<JoinHandle<()>>,
    stderr: Arc<Mutex<Stderr>>,
    progress: Progress,
    /// `mapreduce.task.timeout` in milliseconds, if any.
    timeout: Option<u64>,
    /// The task attempt's cancellation: the process is killed once it is
    /// cancelled.
    cancel: Cancel,
    pending: Vec<u8>,
    /// The leftover of the last output batch (a line not yet ended).
    partial: Vec<u8>,
    _dir: WorkDir,
    /// The local user the command runs as, when commands are confined.
    user: Option<&'static cell::TaskUser>,
    separator: u8,
    key_fields: usize,
}

/// What the process said on standard error.
#[derive(Default)]
struct Stderr {
    counters: Vec<(String, String, u64)>,
    tail: VecDeque<String>,
}

impl Pipe {
    fn start(
        s: &Streaming,
        command: &str,
        task: &str,
        partition: usize,
        map: bool,
        input: Option<(&Path, u64, u64)>,
        cancel: Cancel,
    ) -> Result<Pipe> {
        let timeout = task_timeout(&s.env)?;
        let user = cell::user_for(job_user(&s.env))?;
        let dir = WorkDir::new(&s.files, user)?;
        let mut cmd = Command::new("sh");
        cell::enter(&mut cmd, dir.path(), user);
        cmd.arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A group of its own, so that stopping it stops what it started.
            .process_group(0)
            .envs(s.env.iter().map(|(k, v)| (k, v)))
            .env("mapreduce_task_id", task)
            .env("mapreduce_task_partition", partition.to_string())
            .env("mapreduce_task_ismap", map.to_string());
        die_with_parent(&mut cmd);
        if let Some((file, start, length)) = input {
            cmd.env("mapreduce_map_input_file", file)
                .env("mapreduce_map_input_start", start.to_string())
                .env("mapreduce_map_input_length", length.to_string());
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| Error::user(format!("cannot start `{command}`: {e}")))?;
        groups().insert(child.id() as i32);
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let stderr_pipe = child.stderr.take().expect("piped");
        let (input, to_write) = sync_channel::<Vec<u8>>(QUEUED);
        let (read, output) = sync_channel::<Vec<u8>>(QUEUED);
        let stderr = Arc::new(Mutex::new(Stderr::default()));
        let progress = Progress::new();
        let (p1, p2, p3) = (progress.clone(), progress.clone(), progress.clone());
        let writer = std::thread::spawn(move || feed(stdin, to_write, &p1));
        let reader = std::thread::spawn(move || drain(stdout, read, &p2));
        let tail = stderr.clone();
        let errors = std::thread::spawn(move || watch(stderr_pipe, &tail, &p3));
        Ok(Pipe {
            command: command.to_owned(),
            child,
            input: Some(input),
            output,
            writer: Some(writer),
            reader: Some(reader),
            errors: Some(errors),
            stderr,
            progress,
            timeout,
            cancel,
            pending: Vec::with_capacity(BATCH),
            partial: Vec::new(),
            _dir: dir,
            user,
            separator: s.separator,
            key_fields: s.key_fields.max(1),
        })
    }

    /// Queues `parts` and a newline for the process, handing over a batch
    /// when one is full; output that came back meanwhile goes to `emit`.
    fn write(&mut self, parts: &[&[u8]], emit: &mut Emit<'_>) -> Result<()> {
        for p in parts {
            self.pending.extend_from_slice(p);
        }
        self.pending.push(b'\n');
        if self.pending.len() >= BATCH {
            let batch = std::mem::replace(&mut self.pending, Vec::with_capacity(BATCH));
            self.hand_over(batch, emit)?;
        }
        Ok(())
    }

    /// Gives a batch to the feeding thread, taking output back while its
    /// queue is full.
    fn hand_over(&mut self, mut batch: Vec<u8>, emit: &mut Emit<'_>) -> Result<()> {
        let Some(input) = self.input.clone() else {
            return Ok(());
        };
        loop {
            self.check_cancel()?;
            match input.try_send(batch) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Full(b)) => batch = b,
                // The feeder stopped (the process closed its input): the
                // end says why.
                Err(TrySendError::Disconnected(_)) => return Ok(()),
            }
            match self.output.recv_timeout(TICK) {
                Ok(out) => self.lines(out, emit)?,
                Err(RecvTimeoutError::Timeout) => self.check_progress()?,
                Err(RecvTimeoutError::Disconnected) => std::thread::yield_now(),
            }
        }
    }

    /// Kills the process and fails the task when its attempt was
    /// cancelled.
    fn check_cancel(&mut self) -> Result<()> {
        if !self.cancel.is_cancelled() {
            return Ok(());
        }
        self.kill();
        Err(Error::user(format!(
            "`{}` killed: its task attempt was cancelled",
            self.command
        )))
    }

    /// Kills the process and fails the task when its attempt was cancelled
    /// or it made no progress for the task timeout.
    fn check_progress(&mut self) -> Result<()> {
        self.check_cancel()?;
        let Some(ms) = self.timeout else {
            return Ok(());
        };
        if self.progress.idle_ms() < ms {
            return Ok(());
        }
        self.kill();
        let tail = self.tail();
        Err(Error::user(format!(
            "`{}` made no progress for {:.1} s (read no input, wrote no output or standard \
             error; mapreduce.task.timeout is {ms} ms): killed; its last standard error lines:\n{}",
            self.command,
            ms as f64 / 1000.0,
            tail.join("\n")
        )))
    }

    /// The process was waited for: its group is no longer [`stop_all`]'s
    /// to kill (its number may be another's next).
    fn reaped(&self) {
        groups().remove(&(self.child.id() as i32));
    }

    /// Kills the process and every process in its group (`sh -c` runs a
    /// command list's commands as its children; killing the shell alone
    /// left them running, holding the pipes).
    fn kill(&mut self) {
        let _ = rustix::process::kill_process_group(
            rustix::process::Pid::from_child(&self.child),
            rustix::process::Signal::KILL,
        );
        let _ = self.child.kill();
    }

    /// The last standard error lines so far.
    fn tail(&self) -> Vec<String> {
        let said = self.stderr.lock().unwrap_or_else(|p| p.into_inner());
        said.tail.iter().cloned().collect()
    }

    /// Emits the whole lines of an output batch.
    fn lines(&mut self, out: Vec<u8>, emit: &mut Emit<'_>) -> Result<()> {
        let mut data = std::mem::take(&mut self.partial);
        data.extend_from_slice(&out);
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', &data) {
            self.line(&data[start..end], emit)?;
            start = end + 1;
        }
        self.partial = data[start..].to_vec();
        Ok(())
    }

    /// One output line as key and value.
    fn line(&self, line: &[u8], emit: &mut Emit<'_>) -> Result<()> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let mut at = None;
        let mut seen = 0;
        for i in memchr::memchr_iter(self.separator, line) {
            seen += 1;
            if seen == self.key_fields {
                at = Some(i);
                break;
            }
        }
        match at {
            Some(i) => emit(&line[..i], &line[i + 1..]),
            None => emit(line, b""),
        }
    }

    /// Closes the process's input, takes the rest of its output and waits
    /// for it; a non-zero exit, or an exit before all input was read,
    /// fails the task. Returns the counters it reported.
    fn finish(&mut self, emit: &mut Emit<'_>) -> Result<Vec<(String, String, u64)>> {
        let last = std::mem::take(&mut self.pending);
        if !last.is_empty() {
            self.hand_over(last, emit)?;
        }
        self.input = None;
        loop {
            self.check_cancel()?;
            match self.output.recv_timeout(TICK) {
                Ok(out) => self.lines(out, emit)?,
                Err(RecvTimeoutError::Timeout) => self.check_progress()?,
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        if !self.partial.is_empty() {
            let rest = std::mem::take(&mut self.partial);
            self.line(&rest, emit)?;
        }
        // Waited for before the feeder: a process that closed its output
        // but neither reads nor exits leaves the feeder blocked in a write.
        let status = loop {
            let done = self
                .child
                .try_wait()
                .map_err(|e| Error::user(format!("waiting for `{}`: {e}", self.command)))?;
            match done {
                Some(status) => {
                    self.reaped();
                    break status;
                }
                None => {
                    std::thread::sleep(TICK);
                    self.check_progress()?;
                }
            }
        };
        let fed = self.writer.take().map(|w| w.join());
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        if let Some(e) = self.errors.take() {
            let _ = e.join();
        }
        let said = std::mem::take(&mut *self.stderr.lock().unwrap_or_else(|p| p.into_inner()));
        let tail: Vec<String> = said.tail.into_iter().collect();
        if !status.success() {
            return Err(Error::user(format!(
                "`{}` failed ({status}){}; its last standard error lines:\n{}",
                self.command,
                unrunnable_hint(status, self.user),
                tail.join("\n")
            )));
        }
        if let Some(Ok(Err(e))) = fed {
            return Err(Error::user(format!(
                "`{}` exited before reading all its input ({e}), as Hadoop Streaming's \
                 broken pipe; its last standard error lines:\n{}",
                self.command,
                tail.join("\n")
            )));
        }
        Ok(said.counters)
    }
}

/// The Sluice user a job runs for, from its environment (the property
/// [`cell::JOB_USER`]); empty for an admin's job or a local run.
fn job_user(env: &[(String, String)]) -> &str {
    let name = cell::JOB_USER.replace('.', "_");
    env.iter()
        .rev()
        .find(|(k, _)| *k == name)
        .map_or("", |(_, v)| v.as_str())
}

/// What to add to a failed command's error when the shell could not run
/// it (exit 126: not executable, 127: not found) and it ran as a task
/// user, who may lack what the worker's user has: a user's file under
/// a home directory of mode 0700 is the usual case, an interpreter in a
/// virtual environment there (a Python job's) the commonest.
fn unrunnable_hint(status: std::process::ExitStatus, user: Option<&cell::TaskUser>) -> String {
    match (status.code(), user) {
        (Some(126 | 127), Some(u)) => format!(
            " as task user {}, who must be able to reach, read and run the \
             command and its interpreter (each directory on their paths \
             searchable by that user)",
            u.name
        ),
        _ => String::new(),
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // A task that failed elsewhere: stop the process.
        self.input = None;
        if self.writer.is_some() {
            self.kill();
            let _ = self.child.wait();
        }
        self.reaped();
    }
}

fn feed(
    mut stdin: ChildStdin,
    batches: Receiver<Vec<u8>>,
    progress: &Progress,
) -> std::io::Result<()> {
    for b in batches {
        stdin.write_all(&b)?;
        progress.made();
    }
    stdin.flush()
}

fn drain(stdout: impl Read, out: SyncSender<Vec<u8>>, progress: &Progress) {
    let mut r = stdout;
    loop {
        let mut buf = vec![0; BATCH];
        match r.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                progress.made();
                buf.truncate(n);
                if out.send(buf).is_err() {
                    return;
                }
            }
        }
    }
}

fn watch(stderr: impl Read, said: &Mutex<Stderr>, progress: &Progress) {
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { return };
        progress.made();
        let mut s = said.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = line.strip_prefix("reporter:counter:") {
            let f: Vec<&str> = c.splitn(3, ',').collect();
            if let [g, n, v] = f[..] {
                if let Ok(v) = v.trim().parse::<u64>() {
                    s.counters.push((g.to_owned(), n.to_owned(), v));
                    continue;
                }
            }
        }
        if line.starts_with("reporter:status:") {
            continue;
        }
        if s.tail.len() == STDERR_TAIL {
            s.tail.pop_front();
        }
        s.tail.push_back(line);
    }
}

struct StreamMapper {
    s: Arc<Streaming>,
    pipe: Option<Pipe>,
}

impl Mapper for StreamMapper {
    fn setup(&mut self, ctx: &mut MapContext<'_>) -> Result<()> {
        let task = format!("task_sluice_m_{:06}", ctx.task());
        let pipe = Pipe::start(
            &self.s,
            &self.s.mapper,
            &task,
            ctx.task(),
            true,
            ctx.input(),
            ctx.cancel(),
        )?;
        self.pipe = Some(pipe);
        Ok(())
    }

    fn map(&mut self, _offset: u64, record: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        let pipe = self.pipe.as_mut().expect("set up");
        pipe.write(&[record], &mut |k, v| ctx.emit(k, v))
    }

    fn cleanup(&mut self, ctx: &mut MapContext<'_>) -> Result<()> {
        let Some(mut pipe) = self.pipe.take() else {
            return Ok(());
        };
        let counters = pipe.finish(&mut |k, v| ctx.emit(k, v))?;
        for (g, n, v) in counters {
            ctx.counters().incr(&g, &n, v);
        }
        Ok(())
    }
}

struct StreamReducer {
    s: Arc<Streaming>,
    command: String,
    combine: bool,
    pipe: Option<Pipe>,
}

impl StreamReducer {
    fn new(s: &Arc<Streaming>, command: &str, combine: bool) -> Self {
        StreamReducer {
            s: s.clone(),
            command: command.to_owned(),
            combine,
            pipe: None,
        }
    }
}

impl Reducer for StreamReducer {
    fn setup(&mut self, ctx: &mut ReduceContext<'_>) -> Result<()> {
        let kind = if self.combine { "c" } else { "r" };
        let p = ctx.partition() as usize;
        let task = format!("task_sluice_{kind}_{p:06}");
        let cancel = ctx.cancel();
        let pipe = Pipe::start(&self.s, &self.command, &task, p, false, None, cancel)?;
        self.pipe = Some(pipe);
        Ok(())
    }

    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        let pipe = self.pipe.as_mut().expect("set up");
        while let Some(v) = values.next_value() {
            pipe.write(&[key, b"\t", v], &mut |k, v| ctx.write(k, v))?;
        }
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut ReduceContext<'_>) -> Result<()> {
        let Some(mut pipe) = self.pipe.take() else {
            return Ok(());
        };
        let counters = pipe.finish(&mut |k, v| ctx.write(k, v))?;
        for (g, n, v) in counters {
            ctx.counters().incr(&g, &n, v);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    /// A command the shell could not run as a task user is told why that
    /// user may not; any other failure, or one without a task user, is
    /// told nothing more.
    #[test]
    fn a_task_user_that_cannot_run_its_command_is_named() {
        let user = cell::TaskUser {
            name: "sluice-task".into(),
            uid: 999,
            gid: 995,
        };
        let exit = |code: i32| std::process::ExitStatus::from_raw(code << 8);
        for code in [126, 127] {
            let hint = unrunnable_hint(exit(code), Some(&user));
            assert!(hint.contains("as task user sluice-task"), "{hint}");
        }
        assert_eq!(unrunnable_hint(exit(1), Some(&user)), "");
        assert_eq!(unrunnable_hint(exit(126), None), "");
    }
}
