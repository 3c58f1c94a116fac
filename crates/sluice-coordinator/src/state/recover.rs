//! Jobs taken back after a restart: rebuilt from the job log
//! ([`crate::joblog`]) with their finished tasks, the workers that ran
//! them awaited, and the attempts workers report as they register again
//! adopted.

use std::time::{Duration, Instant};

use crate::joblog::{JobEntry, Recovered, TaskDone};
use crate::sched::{Adopted, Asker, Job, Known};
use crate::store::{JobRecord, RecordState};
use sluice_proto::ids::{JobId, TaskKind, WorkerId};
use sluice_proto::proto;

use super::workers::place_of;
use super::State;

/// How long after a restart no task is handed out: a worker whose
/// heartbeats fail retries at least every 2 s (its capped backoff), then
/// registers again at once.
pub const REGROUP: Duration = Duration::from_millis(2500);

/// How a job's output data set names the job that committed it.
pub(crate) fn origin(id: JobId) -> String {
    id.to_string()
}

/// Whether a data set's origin names job `id` as its committer.
pub(crate) fn is_origin(origin_text: &str, id: JobId) -> bool {
    origin_text.starts_with(&format!("{} (", origin(id)))
}

/// The first id of the attempts a coordinator of `epoch` starts in a job
/// taken back: past those of earlier coordinators (a million attempts
/// per task each; the ids wrap after 4,096 restarts).
fn attempt_base(epoch: u64) -> u32 {
    ((epoch & 0xfff) as u32) << 20
}

impl State {
    /// Takes back the jobs the job log says were running, from their
    /// finished tasks: a complete one commits, unless the catalog holds
    /// its commit already (then it has succeeded). For the worker
    /// timeout after, no job fails for want of a live replica: the workers
    /// are registering again.
    pub fn with_recovered(mut self, jobs: Vec<Recovered>) -> Self {
        for r in jobs {
            self.take_back(r);
        }
        if !self.jobs.is_empty() {
            self.regrouping = Some(self.at.now);
        }
        self
    }

    /// Whether workers are still given time to register again after a
    /// restart or a takeover: no job (taken back, or submitted since)
    /// fails for want of a live replica for the worker timeout.
    pub(super) fn regrouping(&self) -> bool {
        let timeout = self.cfg.worker_timeout;
        let within = |t: &Instant| self.at.now <= *t + timeout;
        self.regrouping.as_ref().is_some_and(within) || self.restarted.as_ref().is_some_and(within)
    }

    /// Whether no task is handed out yet after a restart: for
    /// [`REGROUP`], workers register again naming the attempts they run,
    /// which would otherwise be started a second time.
    pub(super) fn holding_tasks(&self) -> bool {
        self.regrouping.is_some_and(|t| self.at.now < t + REGROUP)
    }

    fn take_back(&mut self, r: Recovered) {
        let id = r.accepted.id;
        let ended = self
            .records
            .get(&id)
            .is_some_and(|rec| rec.state != RecordState::Running);
        if ended {
            self.logged.push(JobEntry::Ended { job: id });
            return;
        }
        let a = r.accepted.clone();
        let token = self.cfg.secret.job_token(id.0);
        let now = self.at.now;
        let mut job = Job::new(id, a.request, a.inputs, a.reducers, token, now)
            .with_side(a.side, a.replication);
        job.number_attempts_from(attempt_base(self.epoch));
        for d in &r.done {
            self.recover_winner(&mut job, d, now);
        }
        tracing::info!(
            "job {id} taken back with {} of its tasks done",
            r.done.len()
        );
        self.record(id, &r, RecordState::Running);
        self.jobs.insert(id, job);
    }

    fn record(&mut self, id: JobId, r: &Recovered, state: RecordState) {
        let rec = self.records.entry(id).or_insert_with(|| JobRecord {
            id,
            request: Some(r.accepted.request.clone()),
            state,
            error: String::new(),
            submission: r.accepted.submission.clone(),
            user: r.accepted.user.clone(),
        });
        rec.state = state;
        self.jobs_dirty = true;
    }

    fn recover_winner(&mut self, job: &mut Job, d: &TaskDone, now: Instant) {
        let Some(kind) = TaskKind::from_wire(d.kind) else {
            return;
        };
        let Ok(report) = <proto::TaskReport as prost::Message>::decode(d.report.as_slice()) else {
            tracing::warn!("job {}: a damaged task record ignored", d.job);
            return;
        };
        let worker = self.awaited_id(&d.uid);
        let known = Known {
            kind,
            index: d.index as usize,
            id: d.attempt,
            worker,
            uid: d.uid.clone(),
            addr: d.addr.clone(),
            datacenter: d.datacenter.clone(),
        };
        job.recovered_winner(known, report, now);
    }

    /// The id a worker that ran recovered tasks goes by until it
    /// registers again.
    fn awaited_id(&mut self, uid: &str) -> WorkerId {
        if let Some((id, _)) = self.awaited.get(uid) {
            return *id;
        }
        self.next_worker += 1;
        let id = WorkerId(self.next_worker);
        self.awaited.insert(uid.to_owned(), (id, self.at.now));
        id
    }

    /// The id a registering worker takes: the one its recovered tasks
    /// name, if it is awaited.
    pub(super) fn claim_awaited(&mut self, uid: &str) -> Option<WorkerId> {
        self.awaited.remove(uid).map(|(id, _)| id)
    }

    /// Awaited workers that did not come back within the worker timeout
    /// are lost: their finished tasks that are still needed run again.
    pub(super) fn give_up_awaited(&mut self) -> bool {
        let (now, timeout) = (self.at.now, self.cfg.worker_timeout);
        let late: Vec<(String, WorkerId)> = self
            .awaited
            .iter()
            .filter(|(_, (_, since))| now.duration_since(*since) > timeout)
            .map(|(uid, (id, _))| (uid.clone(), *id))
            .collect();
        for (uid, id) in &late {
            tracing::warn!("worker {uid} did not come back; its finished tasks run again");
            self.awaited.remove(uid);
            for job in self.jobs.values_mut().filter(|j| j.is_running()) {
                job.worker_lost(*id, now);
            }
        }
        !late.is_empty()
    }

    /// Worker `id` registers again (its process may have restarted): its
    /// running attempts it does not name in `running` are lost.
    pub(super) fn registered_again(&mut self, id: WorkerId, running: &[proto::TaskId]) {
        let now = self.at.now;
        for job in self.jobs.values_mut().filter(|j| j.is_running()) {
            let named: Vec<(TaskKind, usize, u32)> = running
                .iter()
                .filter(|t| t.job == job.id().0)
                .filter_map(|t| Some((TaskKind::from_wire(t.kind)?, t.index as usize, t.attempt)))
                .collect();
            job.lost_unless_named(id, &named, now);
        }
    }

    /// A registering worker's attempts (running, or ended and not yet
    /// reported): those of running tasks go on, the rest are killed.
    pub(super) fn adopt_attempts(&mut self, worker: WorkerId, running: &[proto::TaskId]) {
        let Some(w) = self.workers.get(&worker) else {
            return;
        };
        let (uid, addr) = (w.info.uid.clone(), w.info.data_addr.clone());
        let place = place_of(&w.info);
        let asker = Asker {
            id: worker,
            uid: &uid,
            addr: &addr,
            place: &place,
            live: self.alive().count(),
            map_slots: self.total_slots(),
        };
        let now = self.at.now;
        let mut kills = Vec::new();
        for t in running {
            let adopted = match (
                self.jobs.get_mut(&JobId(t.job)),
                TaskKind::from_wire(t.kind),
            ) {
                (Some(job), Some(kind)) => {
                    let known = Known {
                        kind,
                        index: t.index as usize,
                        id: t.attempt,
                        worker,
                        uid: uid.clone(),
                        addr: addr.clone(),
                        datacenter: place.datacenter.clone(),
                    };
                    job.adopt(known, &asker, now)
                }
                _ => Adopted::Kill,
            };
            if adopted == Adopted::Kill {
                kills.push(*t);
            }
        }
        if let Some(w) = self.workers.get_mut(&worker) {
            w.kills.extend(kills);
        }
    }
}
