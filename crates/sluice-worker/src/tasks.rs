//! The lifecycle of every task attempt on this worker, and of the jobs
//! they belong to: pure state, no I/O, behind one lock.
//!
//! An attempt is *running* from [`Tasks::start`] until [`Tasks::finish`],
//! with the bytes its shuffle fetches have received. A kill, its job's end
//! or a re-registration marks it *cancelled* while it runs, and stops its
//! fetches; [`Tasks::finish`] removes it (*done*) and says whether it was
//! cancelled. A cancelled mark lives on its running attempt, so there is
//! no cancelled attempt that is not running: a kill for an attempt that has
//! finished already leaves nothing behind, and a job's end cancels exactly
//! the attempts running at that moment, since it looks and marks under one
//! lock.
//!
//! The jobs built here, by id, are kept until their job ends; the jobs
//! that have ended are remembered ([`ENDED_KEPT`] of them), so that a
//! cancelled attempt that finishes late removes its job's files again and
//! a late assignment of an ended job does not build it anew.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use sluice_proto::data::FetchWatch;
use sluice_proto::proto::{RemoteRead, TaskId, TaskProgress};

/// A job as this worker built it, shared by its tasks.
pub(crate) type Built = Result<(sluice_api::JobSpec, sluice_engine::EngineConfig), String>;

/// A job built once by the first of its tasks to run here; the others wait
/// for it.
pub(crate) type BuildCell = Arc<OnceLock<Built>>;

/// One attempt of one task, as this worker tracks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct AttemptKey {
    pub job: u64,
    pub kind: u32,
    pub index: u32,
    pub attempt: u32,
}

impl From<&TaskId> for AttemptKey {
    fn from(t: &TaskId) -> Self {
        AttemptKey {
            job: t.job,
            kind: t.kind,
            index: t.index,
            attempt: t.attempt,
        }
    }
}

impl AttemptKey {
    fn task_id(&self) -> TaskId {
        TaskId {
            job: self.job,
            kind: self.kind,
            index: self.index,
            attempt: self.attempt,
        }
    }
}

/// Bytes received per source address, counted as they arrive, and the
/// switch that stops those fetches when the attempt is cancelled.
type Received = BTreeMap<String, Arc<FetchWatch>>;

/// A running attempt.
#[derive(Default)]
struct Attempt {
    /// Its result is to be discarded (killed, or its job ended).
    cancelled: bool,
    /// Raised when it is cancelled: its task's user code (a Streaming
    /// command) looks at it and stops.
    cancel: sluice_api::Cancel,
    /// Its shuffle fetches, once it has started fetching (a reduce).
    fetched: Option<Received>,
}

impl Attempt {
    /// Marks it cancelled and stops its fetches between two blocks.
    fn cancel(&mut self) {
        self.cancelled = true;
        self.cancel.cancel();
        for w in self.fetched.iter().flat_map(|m| m.values()) {
            w.stop.store(true, Ordering::Relaxed);
        }
    }
}

/// How an attempt ended, as [`Tasks::finish`] tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Finished {
    /// Its result is discarded.
    pub cancelled: bool,
    /// Its job has ended: files it wrote late are to be removed.
    pub job_ended: bool,
}

/// Ended jobs a worker remembers.
pub(crate) const ENDED_KEPT: usize = 4096;

/// Every attempt running here and the jobs they belong to.
#[derive(Default)]
pub(crate) struct Tasks {
    running: HashMap<AttemptKey, Attempt>,
    built: HashMap<u64, BuildCell>,
    /// Jobs the coordinator said have ended, the most recent
    /// [`ENDED_KEPT`] (a long-lived worker sees millions of jobs).
    ended: HashSet<u64>,
}

impl Tasks {
    /// Attempt `k` starts running.
    pub fn start(&mut self, k: AttemptKey) {
        self.running.insert(k, Attempt::default());
    }

    /// The coordinator killed attempt `k`: cancelled if it runs here,
    /// nothing otherwise.
    pub fn kill(&mut self, k: AttemptKey) {
        if let Some(a) = self.running.get_mut(&k) {
            a.cancel();
        }
    }

    /// The attempts running here and not cancelled, as a registration
    /// reports them (they go on under the coordinator it registers with).
    pub fn running_ids(&self) -> Vec<TaskId> {
        let mut ids: Vec<TaskId> = self
            .running
            .iter()
            .filter(|(_, a)| !a.cancelled)
            .map(|(k, _)| k.task_id())
            .collect();
        ids.sort_by_key(|t| (t.job, t.kind, t.index, t.attempt));
        ids
    }

    /// Attempt `k` has ended: it is forgotten.
    pub fn finish(&mut self, k: AttemptKey) -> Finished {
        let a = self.running.remove(&k).unwrap_or_default();
        Finished {
            cancelled: a.cancelled,
            job_ended: self.ended.contains(&k.job),
        }
    }

    /// The coordinator says job `job` has ended: its running attempts are
    /// cancelled, its build dropped, and its end remembered.
    pub fn job_ended(&mut self, job: u64) {
        let of_job = self.running.iter_mut().filter(|(k, _)| k.job == job);
        of_job.for_each(|(_, a)| a.cancel());
        self.built.remove(&job);
        self.remember_ended(job);
    }

    /// Records that job `job` has ended, forgetting the older half of
    /// what it remembers when full.
    fn remember_ended(&mut self, job: u64) {
        if self.ended.len() >= ENDED_KEPT {
            // Ids grow with time: the smallest are the oldest.
            let mut ids: Vec<u64> = self.ended.iter().copied().collect();
            ids.sort_unstable();
            for old in &ids[..ids.len() / 2] {
                self.ended.remove(old);
            }
        }
        self.ended.insert(job);
    }

    /// Attempt `k`'s cancellation, raised when it is cancelled (one never
    /// raised for an attempt not running here).
    pub fn cancel_of(&self, k: AttemptKey) -> sluice_api::Cancel {
        self.running
            .get(&k)
            .map(|a| a.cancel.clone())
            .unwrap_or_default()
    }

    /// Whether attempt `k` runs here cancelled.
    pub fn is_cancelled(&self, k: AttemptKey) -> bool {
        self.running.get(&k).is_some_and(|a| a.cancelled)
    }

    /// How many attempts run here.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// The watches of attempt `k`'s fetches from `addrs`, one each (a
    /// source's watch is shared by its fetches). Those of a cancelled
    /// attempt are stopped already; an attempt not running gets watches
    /// no one counts.
    pub fn watches<'a>(
        &mut self,
        k: AttemptKey,
        addrs: impl Iterator<Item = &'a str>,
    ) -> Vec<Arc<FetchWatch>> {
        let Some(a) = self.running.get_mut(&k) else {
            return addrs.map(|_| Arc::default()).collect();
        };
        let cancelled = a.cancelled;
        let mine = a.fetched.get_or_insert_with(Received::new);
        let watch = |addr: &str| {
            let w = mine.entry(addr.to_owned()).or_default();
            w.stop.fetch_or(cancelled, Ordering::Relaxed);
            w.clone()
        };
        addrs.map(watch).collect()
    }

    /// Bytes attempt `k` fetched, per source (`None`: it fetched nothing
    /// yet, or it does not run here).
    pub fn remote_reads(&self, k: AttemptKey) -> Option<Vec<RemoteRead>> {
        let fetched = self.running.get(&k)?.fetched.as_ref()?;
        Some(remote_reads(fetched))
    }

    /// The fetches of every attempt that has fetched, for a heartbeat.
    pub fn progress(&self) -> Vec<TaskProgress> {
        let fetching = self.running.iter().filter_map(|(k, a)| {
            let fetched = a.fetched.as_ref()?;
            Some(TaskProgress {
                task: Some(k.task_id()),
                fetched: remote_reads(fetched),
            })
        });
        fetching.collect()
    }

    /// The build of job `job`, made by the first task to ask (`None`: the
    /// job has ended).
    pub fn build_cell(&mut self, job: u64) -> Option<BuildCell> {
        if self.ended.contains(&job) {
            return None;
        }
        Some(self.built.entry(job).or_default().clone())
    }

    /// Forgets job `job`'s build `cell`, which failed, so that the next
    /// attempt builds it again (unless another build has replaced it).
    pub fn forget_build(&mut self, job: u64, cell: &BuildCell) {
        if self.built.get(&job).is_some_and(|c| Arc::ptr_eq(c, cell)) {
            self.built.remove(&job);
        }
    }
}

/// Per-source byte counts as a report carries them.
fn remote_reads(m: &Received) -> Vec<RemoteRead> {
    let read = |(addr, n): (&String, &Arc<FetchWatch>)| RemoteRead {
        addr: addr.clone(),
        bytes: n.received.load(Ordering::Relaxed),
    };
    m.iter().map(read).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn attempt(job: u64, index: u32) -> AttemptKey {
        AttemptKey {
            job,
            kind: 1,
            index,
            attempt: 0,
        }
    }

    /// Nothing is tracked: no attempt, running or cancelled.
    fn assert_empty(t: &Tasks) {
        assert_eq!(t.running(), 0);
        assert!(t.running.is_empty());
        assert!(t.progress().is_empty());
    }

    #[test]
    fn start_then_finish_reports_a_result_to_keep() {
        let mut t = Tasks::default();
        t.start(attempt(1, 0));
        assert_eq!(t.running(), 1);
        assert!(!t.is_cancelled(attempt(1, 0)));
        let done = t.finish(attempt(1, 0));
        assert_eq!(
            done,
            Finished {
                cancelled: false,
                job_ended: false
            }
        );
        assert_empty(&t);
    }

    #[test]
    fn a_kill_cancels_a_running_attempt_and_stops_its_fetches() {
        let mut t = Tasks::default();
        let k = attempt(1, 0);
        t.start(k);
        let before = t.watches(k, ["a:1"].into_iter());
        let cancel = t.cancel_of(k);
        assert!(!cancel.is_cancelled());
        t.kill(k);
        assert!(t.is_cancelled(k));
        assert!(cancel.is_cancelled(), "its user code is told");
        assert!(before[0].stop.load(Ordering::Relaxed));
        // A fetch that starts after the kill is stopped from the outset.
        let after = t.watches(k, ["b:1"].into_iter());
        assert!(after[0].stop.load(Ordering::Relaxed));
        assert!(t.finish(k).cancelled);
        assert_empty(&t);
    }

    #[test]
    fn a_kill_for_an_attempt_that_has_finished_leaves_nothing_behind() {
        let mut t = Tasks::default();
        let k = attempt(1, 0);
        t.start(k);
        t.finish(k);
        t.kill(k);
        assert!(!t.is_cancelled(k));
        assert_empty(&t);
        // The same key running again is not born cancelled.
        t.start(k);
        assert!(!t.finish(k).cancelled);
    }

    #[test]
    fn a_kill_for_an_attempt_never_started_here_leaves_nothing_behind() {
        let mut t = Tasks::default();
        t.kill(attempt(7, 3));
        assert_empty(&t);
    }

    #[test]
    fn a_job_end_cancels_only_that_jobs_running_attempts() {
        let mut t = Tasks::default();
        let (mine, other) = (attempt(1, 0), attempt(2, 0));
        t.start(mine);
        t.start(other);
        let (told, untold) = (t.cancel_of(mine), t.cancel_of(other));
        t.job_ended(1);
        assert!(t.is_cancelled(mine));
        assert!(!t.is_cancelled(other));
        assert!(told.is_cancelled() && !untold.is_cancelled());
        let done = t.finish(mine);
        assert!(done.cancelled && done.job_ended);
        assert!(!t.finish(other).cancelled);
        assert_empty(&t);
    }

    #[test]
    fn a_task_that_ends_before_its_jobs_end_leaves_no_cancelled_entry() {
        let mut t = Tasks::default();
        let k = attempt(1, 0);
        t.start(k);
        assert!(!t.finish(k).cancelled);
        t.job_ended(1);
        assert!(!t.is_cancelled(k));
        assert_empty(&t);
    }

    #[test]
    fn tasks_ending_while_their_job_ends_leave_no_cancelled_entry() {
        // Attempts finish on their own threads while replies end their job:
        // whichever comes first, nothing is left behind.
        let tasks = Arc::new(Mutex::new(Tasks::default()));
        let ender = {
            let tasks = tasks.clone();
            std::thread::spawn(move || {
                for _ in 0..2000 {
                    tasks.lock().unwrap().job_ended(1);
                }
            })
        };
        let mut cancelled = 0;
        for i in 0..2000 {
            tasks.lock().unwrap().start(attempt(1, i));
            std::thread::yield_now();
            cancelled += usize::from(tasks.lock().unwrap().finish(attempt(1, i)).cancelled);
        }
        ender.join().unwrap();
        let t = tasks.lock().unwrap();
        assert_empty(&t);
        assert!(cancelled <= 2000);
    }

    #[test]
    fn a_registration_reports_the_attempts_running_and_not_cancelled() {
        let mut t = Tasks::default();
        t.start(attempt(2, 5));
        t.start(attempt(1, 0));
        t.start(attempt(1, 1));
        t.kill(attempt(1, 1));
        let ids: Vec<(u64, u32)> = t.running_ids().iter().map(|i| (i.job, i.index)).collect();
        assert_eq!(ids, vec![(1, 0), (2, 5)]);
        t.finish(attempt(1, 0));
        assert_eq!(t.running_ids().len(), 1);
    }

    #[test]
    fn fetches_are_counted_per_source_until_the_attempt_finishes() {
        let mut t = Tasks::default();
        let k = attempt(1, 0);
        t.start(k);
        assert_eq!(t.remote_reads(k), None);
        let w = t.watches(k, ["a:1", "b:1", "a:1"].into_iter());
        assert!(Arc::ptr_eq(&w[0], &w[2]));
        w[0].received.fetch_add(10, Ordering::Relaxed);
        w[1].received.fetch_add(5, Ordering::Relaxed);
        let reads = t.remote_reads(k).unwrap();
        assert_eq!(reads.len(), 2);
        assert_eq!((reads[0].addr.as_str(), reads[0].bytes), ("a:1", 10));
        let progress = t.progress();
        assert_eq!(progress.len(), 1);
        assert_eq!(progress[0].task, Some(k.task_id()));
        t.finish(k);
        assert_eq!(t.remote_reads(k), None);
        assert_empty(&t);
    }

    #[test]
    fn an_ended_job_is_not_built_again() {
        let mut t = Tasks::default();
        let cell = t.build_cell(1).unwrap();
        assert!(Arc::ptr_eq(&cell, &t.build_cell(1).unwrap()));
        t.job_ended(1);
        assert!(t.build_cell(1).is_none());
        assert!(t.built.is_empty());
    }

    #[test]
    fn a_failed_build_is_forgotten_unless_replaced() {
        let mut t = Tasks::default();
        let failed = t.build_cell(1).unwrap();
        t.forget_build(1, &failed);
        let next = t.build_cell(1).unwrap();
        assert!(!Arc::ptr_eq(&failed, &next));
        // A late failure of the old build leaves the new one.
        t.forget_build(1, &failed);
        assert!(Arc::ptr_eq(&next, &t.build_cell(1).unwrap()));
    }

    #[test]
    fn the_ended_jobs_kept_are_bounded_and_the_most_recent() {
        let mut t = Tasks::default();
        for job in 0..(ENDED_KEPT as u64 + 1) {
            t.job_ended(job);
        }
        assert!(t.ended.len() <= ENDED_KEPT);
        assert!(t.build_cell(ENDED_KEPT as u64).is_none());
        assert!(t.build_cell(0).is_some());
    }
}
