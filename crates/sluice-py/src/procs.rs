//! Python processes that run a job's functions beside the engine, one
//! task at a time each, so that the functions of two tasks run on two
//! cores (as PySpark runs a Python worker process per core).
//!
//! A [`Pool`] starts `python -m sluice._proc` children on demand (one per
//! task running at once: map tasks, their combiners and reduce tasks) and
//! keeps idle ones for the next task. A task takes a child, drives it
//! with the requests below, and gives it back when it ends well; a child
//! of a task that failed or was abandoned is killed.
//!
//! # The protocol
//!
//! The parent writes requests to the child's standard input and reads
//! replies from its standard output (the child moves those pipes off fds
//! 0 and 1 first, so the user's `print` goes to standard error and a read
//! of `sys.stdin` sees nothing). Every message is a frame:
//!
//! | bytes | field |
//! |---|---|
//! | 4 | `n`: u32 little-endian, the bytes that follow (tag and body) |
//! | 1 | tag, an ASCII letter |
//! | n - 1 | body |
//!
//! Requests:
//! - `J` job: the body is the job pickled with cloudpickle; sent once.
//!   Reply `R` (or `E` when it cannot be loaded).
//! - `T` task: u32 reducers, then the role as ASCII (`mapper`,
//!   `combiner` or `reducer`); starts a task object. Reply `R` or `E`.
//! - `M` lines: u64 byte offset of the first line in its file, then whole
//!   lines of input, each ending in `\n` (the last one may not). Reply
//!   `P`, `B` or `E`.
//! - `G` groups: u32 `g`, then `g` u32 value counts, then each group's key
//!   and values, each a u32 length and the codec's bytes. Reply `P` or
//!   `E`.
//! - `F` final: the task's `final()`. Reply `P` or `E`.
//!
//! Replies:
//! - `R` ready: empty body.
//! - `P` pairs: u32 `p`, then `p` bytes of pairs (each key and value a u32
//!   length and its bytes, the length `u32::MAX` and no bytes for a value
//!   that is not there), then one u32 partition per pair when the job has
//!   a partitioner (none otherwise). Keys and values are codec bytes
//!   between tasks and rendered text in a job's output, as in process.
//! - `B` bad input: UTF-8 text saying which line is not UTF-8.
//! - `E` raised: u32 `t`, `t` bytes of UTF-8 text (the exception and its
//!   traceback), then the exception pickled (empty when it cannot be).
//!
//! The pipes are a process's own, on one machine, so frames carry no
//! checksum; the parent checks every frame's structure before use.
//!
//! This file is the parent's side; the child's native half (its codec
//! work) is [`crate::child`]'s `TaskIo`.

use std::io::{BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

use sluice_api::Error as ApiError;

/// How a parent starts its children.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The interpreter (the parent's `sys.executable`).
    pub python: PathBuf,
    /// `PYTHONPATH` for the children: the parent's `sys.path`, so that
    /// they import what it imports.
    pub path: String,
    /// The job, pickled.
    pub job: Vec<u8>,
}

/// Children waiting for a task.
#[derive(Debug)]
pub struct Pool {
    launch: Launch,
    idle: Mutex<Vec<Worker>>,
}

impl Pool {
    pub fn new(launch: Launch) -> Self {
        Pool {
            launch,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// An idle child, or a new one, with a task of `role` started.
    pub fn take(&self, role: &str, reducers: u32) -> sluice_api::Result<Worker> {
        let idle = self.idle.lock().ok().and_then(|mut v| v.pop());
        let mut worker = match idle {
            Some(w) => w,
            None => Worker::spawn(&self.launch)?,
        };
        let mut head = reducers.to_le_bytes().to_vec();
        head.extend_from_slice(role.as_bytes());
        match worker.request(b'T', &head, &[])? {
            Reply::Ready => Ok(worker),
            other => Err(other.into_error(role)),
        }
    }

    /// Keeps `worker`, whose task ended well, for the next task.
    pub fn give(&self, worker: Worker) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(worker);
        }
    }
}

/// One child process and its pipes.
#[derive(Debug)]
pub struct Worker {
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
    /// The last reply's body.
    body: Vec<u8>,
}

/// A reply, its bytes borrowed from the worker.
#[derive(Debug)]
pub enum Reply<'a> {
    Ready,
    Pairs { pairs: &'a [u8], parts: &'a [u8] },
    BadInput(String),
    Raised { text: String, exception: &'a [u8] },
}

impl Reply<'_> {
    /// The engine's error for a reply that is not the one expected.
    pub fn into_error(self, what: &str) -> ApiError {
        match self {
            Reply::BadInput(text) => ApiError::user(text),
            Reply::Raised { text, .. } => {
                ApiError::user(format!("Python {what} raised {}", text.trim_end()))
            }
            _ => ApiError::user(format!(
                "the Python process of a {what} task answered out of turn"
            )),
        }
    }
}

fn broken(what: impl std::fmt::Display) -> ApiError {
    ApiError::user(format!("a job's Python process: {what}"))
}

impl Worker {
    fn spawn(launch: &Launch) -> sluice_api::Result<Worker> {
        let mut child = Command::new(&launch.python)
            .args(["-m", "sluice._proc"])
            .env("PYTHONPATH", &launch.path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| broken(format!("cannot start {}: {e}", launch.python.display())))?;
        let (Some(to), Some(from)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(broken("no pipes"));
        };
        let mut worker = Worker {
            child,
            to,
            from: BufReader::with_capacity(1 << 16, from),
            body: Vec::new(),
        };
        match worker.request(b'J', &launch.job, &[])? {
            Reply::Ready => Ok(worker),
            other => Err(other.into_error("job loader")),
        }
    }

    /// Sends the frame `tag`, `head`, `body` and reads the reply.
    pub fn request(&mut self, tag: u8, head: &[u8], body: &[u8]) -> sluice_api::Result<Reply<'_>> {
        let n = u32::try_from(1 + head.len() + body.len())
            .map_err(|_| broken("a request of 4 GiB or more"))?;
        let mut frame = Vec::with_capacity(5 + head.len());
        frame.extend_from_slice(&n.to_le_bytes());
        frame.push(tag);
        frame.extend_from_slice(head);
        let sent = self
            .to
            .write_all(&frame)
            .and_then(|()| self.to.write_all(body))
            .and_then(|()| self.to.flush());
        if let Err(e) = sent {
            return Err(self.ended(e));
        }
        let tag = match self.read_frame() {
            Ok(tag) => tag,
            Err(e) => return Err(self.ended(e)),
        };
        parse(tag, &self.body)
    }

    /// Reads one frame into `body`; its tag.
    fn read_frame(&mut self) -> std::io::Result<u8> {
        let mut head = [0u8; 5];
        self.from.read_exact(&mut head)?;
        let n = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        if n == 0 {
            return Err(std::io::Error::other("a frame without a tag"));
        }
        self.body.resize(n - 1, 0);
        self.from.read_exact(&mut self.body)?;
        Ok(head[4])
    }

    /// The error of a child whose pipe failed: its exit status if it
    /// ended (a crash, `os._exit`, a signal), else the pipe's error.
    fn ended(&mut self, e: std::io::Error) -> ApiError {
        let _ = self.child.kill();
        match self.child.wait() {
            Ok(status) if !status.success() => broken(format!(
                "pid {} ended ({status}) in the middle of a task",
                self.child.id()
            )),
            _ => broken(format!("pid {}: {e}", self.child.id())),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // An idle child blocks reading its next request; one of a failed
        // task may be anywhere. Neither holds anything worth a goodbye.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The reply of tag `tag` and body `body`, its structure checked.
fn parse(tag: u8, body: &[u8]) -> sluice_api::Result<Reply<'_>> {
    let bad = || broken(format!("a malformed reply (tag {:?})", tag as char));
    match tag {
        b'R' if body.is_empty() => Ok(Reply::Ready),
        b'P' => {
            let (pairs, parts) = split_counted(body).ok_or_else(bad)?;
            let n = count_pairs(pairs).ok_or_else(bad)?;
            if !parts.is_empty() && parts.len() != 4 * n {
                return Err(bad());
            }
            Ok(Reply::Pairs { pairs, parts })
        }
        b'B' => Ok(Reply::BadInput(String::from_utf8_lossy(body).into_owned())),
        b'E' => {
            let (text, exception) = split_counted(body).ok_or_else(bad)?;
            Ok(Reply::Raised {
                text: String::from_utf8_lossy(text).into_owned(),
                exception,
            })
        }
        _ => Err(bad()),
    }
}

/// A u32 length, that many bytes, and the rest.
fn split_counted(body: &[u8]) -> Option<(&[u8], &[u8])> {
    let n = u32::from_le_bytes(body.get(..4)?.try_into().ok()?) as usize;
    let rest = &body[4..];
    (n <= rest.len()).then(|| rest.split_at(n))
}

/// The pairs in `bytes`, or `None` when a length runs past the end.
fn count_pairs(bytes: &[u8]) -> Option<usize> {
    let mut at = 0;
    let mut fields = 0;
    while at < bytes.len() {
        let len = u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?);
        at += 4;
        if len != u32::MAX {
            at = at.checked_add(len as usize)?;
        }
        fields += 1;
    }
    (at == bytes.len() && fields % 2 == 0).then_some(fields / 2)
}
