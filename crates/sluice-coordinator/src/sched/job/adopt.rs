//! A job taken back after a coordinator restart: the winners its job log
//! names, and the attempts its workers say are still running.

use std::time::Instant;

use sluice_proto::ids::{TaskKind, WorkerId};
use sluice_proto::proto;

use super::super::kept::{Kept, Names};
use super::super::locality::{Asker, Locality};
use super::super::task::{Attempt, AttemptState, MAP};
use super::Job;

/// An attempt an earlier coordinator started, as recovery knows it.
#[derive(Debug, Clone)]
pub struct Known {
    pub kind: TaskKind,
    pub index: usize,
    pub id: u32,
    pub worker: WorkerId,
    pub uid: String,
    pub addr: String,
    pub datacenter: String,
}

impl Known {
    fn attempt(
        self,
        state: AttemptState,
        report: Option<proto::TaskReport>,
        names: &mut Names,
        now: Instant,
    ) -> Attempt {
        Attempt {
            id: self.id,
            worker: self.worker,
            uid: names.share(&self.uid),
            addr: names.share(&self.addr),
            started: now,
            ended: (state != AttemptState::Running).then_some(now),
            state,
            level: Locality::Any,
            speculative: false,
            report: report.map(|r| Box::new(Kept::new(r, names))),
            datacenter: names.share(&self.datacenter),
            fetched: Vec::new(),
        }
    }
}

/// What becomes of an attempt a re-registering worker says it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adopted {
    /// It goes on: its report will be taken.
    Running,
    /// Known and still running here already.
    Known,
    /// Its task is done, or its job ended, or it was given up: the worker
    /// kills it.
    Kill,
}

impl Job {
    /// Numbers new attempts of every task from `base` on (past any an
    /// earlier coordinator may have started).
    pub fn number_attempts_from(&mut self, base: u32) {
        for t in self.maps.iter_mut().chain(self.reduces.iter_mut()) {
            t.next_id = t.next_id.max(base);
        }
    }

    /// A task's winner, as the job log recorded it: the task is done.
    pub fn recovered_winner(&mut self, a: Known, report: proto::TaskReport, now: Instant) {
        let (kind, index) = (a.kind, a.index);
        if self.tasks(kind).get(index).is_none_or(|t| t.done.is_some()) {
            return;
        }
        let id = a.id;
        let won = a.attempt(AttemptState::Succeeded, Some(report), &mut self.names, now);
        let t = &mut self.tasks_mut(kind)[index];
        t.next_id = t.next_id.max(id + 1);
        t.attempts.push(won);
        t.done = Some(t.attempts.len() - 1);
        let won = t.attempts.last().expect("just pushed").clone();
        if kind == MAP {
            self.map_outputs.count(&won, 1);
            let place = self.addrs.place(&won.addr);
            self.winners.push((index as u32, won.id, place));
            self.winning[index] = won.id;
        }
        self.queues.done(kind, index);
    }

    /// A worker registering again says it runs attempt `a`.
    pub fn adopt(&mut self, a: Known, w: &Asker<'_>, now: Instant) -> Adopted {
        if !self.is_running() {
            return Adopted::Kill;
        }
        let (kind, index) = (a.kind, a.index);
        let Some(t) = self.tasks_mut(kind).get_mut(index) else {
            return Adopted::Kill;
        };
        if let Some(at) = t.slot_of(a.id) {
            let same = t.attempts[at].worker == w.id;
            return match t.attempts[at].state {
                AttemptState::Running if same => Adopted::Known,
                _ => Adopted::Kill,
            };
        }
        if t.done.is_some() {
            return Adopted::Kill;
        }
        t.next_id = t.next_id.max(a.id + 1);
        let known = Known {
            worker: w.id,
            uid: w.uid.to_owned(),
            addr: w.addr.to_owned(),
            datacenter: w.place.datacenter.clone(),
            ..a
        };
        let running = known.attempt(AttemptState::Running, None, &mut self.names, now);
        self.tasks_mut(kind)[index].attempts.push(running);
        self.queues.started(kind, index, w.id, now);
        Adopted::Running
    }

    /// Worker `worker` registered again naming the attempts it runs
    /// (`running`: kind, task, attempt): its running attempts it did not
    /// name are lost (their tasks pending again); its finished ones stay.
    pub fn lost_unless_named(
        &mut self,
        worker: WorkerId,
        running: &[(TaskKind, usize, u32)],
        now: Instant,
    ) {
        for kind in [MAP, super::super::task::REDUCE] {
            let tasks = match kind {
                MAP => &mut self.maps,
                _ => &mut self.reduces,
            };
            for (i, t) in tasks.iter_mut().enumerate() {
                let mut stopped = 0;
                for a in t.attempts.iter_mut() {
                    let named = running.contains(&(kind, i, a.id));
                    if a.worker == worker && a.state == AttemptState::Running && !named {
                        a.state = AttemptState::Lost;
                        a.ended = Some(now);
                        stopped += 1;
                    }
                }
                if stopped > 0 && t.pending() {
                    t.pending_since = now;
                }
                for _ in 0..stopped {
                    self.queues.stopped(kind, i, worker);
                }
            }
        }
    }
}
