//! Worker threads over a shared queue of task indices.
//!
//! CPU work runs on plain scoped threads, one per configured core, never on
//! an async runtime. A failing worker raises the abort flag; the others stop
//! taking tasks, and the first real error is returned.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::EngineError;

/// Task indices `0..len` handed out once each.
#[derive(Debug)]
pub struct Queue {
    next: AtomicUsize,
    len: usize,
    abort: AtomicBool,
}

impl Queue {
    /// A queue of `len` tasks.
    pub fn new(len: usize) -> Self {
        Queue {
            next: AtomicUsize::new(0),
            len,
            abort: AtomicBool::new(false),
        }
    }

    /// The next task, or `None` when all are taken or the job is aborting.
    pub fn take(&self) -> Option<usize> {
        if self.aborted() {
            return None;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        (i < self.len).then_some(i)
    }

    /// Whether a worker failed.
    pub fn aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }

    fn abort(&self) {
        self.abort.store(true, Ordering::Relaxed);
    }
}

/// Runs `work(thread)` on `threads` threads and collects their results.
pub fn run_workers<T: Send>(
    threads: usize,
    queue: &Queue,
    work: impl Fn(usize) -> Result<T, EngineError> + Sync,
) -> Result<Vec<T>, EngineError> {
    let results: Vec<Result<T, EngineError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1))
            .map(|t| {
                let work = &work;
                s.spawn(move || {
                    let r = work(t);
                    if r.is_err() {
                        queue.abort();
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| Err(panic_error(p))))
            .collect()
    });
    first_error(results)
}

fn panic_error(p: Box<dyn std::any::Any + Send>) -> EngineError {
    let msg = p
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into());
    EngineError::User {
        phase: "task",
        at: None,
        msg: format!("a task panicked: {msg}"),
    }
}

fn first_error<T>(results: Vec<Result<T, EngineError>>) -> Result<Vec<T>, EngineError> {
    let mut ok = Vec::with_capacity(results.len());
    let mut err = None;
    for r in results {
        match r {
            Ok(v) => ok.push(v),
            Err(EngineError::Cancelled) => err = err.or(Some(EngineError::Cancelled)),
            Err(e) => {
                if matches!(err, None | Some(EngineError::Cancelled)) {
                    err = Some(e);
                }
            }
        }
    }
    match err {
        Some(e) => Err(e),
        None => Ok(ok),
    }
}
