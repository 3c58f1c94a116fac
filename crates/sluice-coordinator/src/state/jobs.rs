//! Jobs: submission (inputs, side inputs, memory), kills, task reports,
//! fetch failures, commit and end, and a job's status.

use std::collections::{HashMap, HashSet};

use super::refusal::MemoryAsk;

use crate::combine;
use crate::input::{External, ExternalInput, MapInput};
use crate::joblog::{JobEntry, TaskDone};
use crate::sched::{task_name, Job, JobState, MAP, REDUCE};
use crate::store::{JobRecord, Node, PlacementPolicy, RecordState};
use sluice_proto::catalog::{BlockMeta, DatasetMeta, FileMeta};
use sluice_proto::ids::DatasetName;
use sluice_proto::ids::{JobId, TaskKind, WorkerId};
use sluice_proto::proto;
use sluice_proto::ClusterError;
use sluice_request::JobRequest;

use super::replicas::no_intact_replica;
use super::workers::node;

use super::{Refusal, State, Submission, Then};

/// Most ended jobs the state holds whole ([`State::retire_ended`]).
pub const KEEP_ENDED_JOBS: usize = 100;

/// Most tasks of ended jobs the state holds whole, together.
pub const KEEP_ENDED_TASKS: usize = 200_000;

impl State {
    pub(super) fn fetch_failed(&mut self, r: &proto::FetchFailedRequest) {
        self.fetch_failures += 1;
        let cfg = self.cfg.clone();
        let now = self.at.now;
        if let Some(job) = self.jobs.get_mut(&JobId(r.job)) {
            let (map, attempt) = (r.map as usize, r.attempt);
            if job.is_running() && job.fetch_failed(map, attempt, &r.reason, &cfg.settings, now) {
                tracing::warn!("job {} map {} output lost: {}", r.job, r.map, r.reason);
            }
        }
    }

    /// A new job: refused if no worker is live, a task asks more memory
    /// than any worker gives, its input cannot be read or its output
    /// exists.
    pub(super) fn submit(&mut self, s: Submission) -> Result<JobId, Refusal> {
        let Submission {
            request: r,
            replication,
            reducers,
            side,
            external,
            submission,
            user,
        } = s;
        if let Some(id) = self.submitted(&submission) {
            return Ok(id);
        }
        // Just after a restart or a takeover the workers are registering
        // again: the job waits for them as one taken back does.
        if self.alive().next().is_none() && !self.regrouping() {
            return Err(Refusal::NoLiveWorkers);
        }
        if let Some(asked) = r.memory {
            self.check_memory(asked)?;
        }
        let blocks = match external {
            Some(splits) => self.external_inputs(splits),
            None => self.input_blocks(&r)?,
        };
        let side = self.side_inputs(side)?;
        if self.catalog.datasets.contains_key(&r.output) && !r.overwrite {
            return Err(Refusal::OutputExists(r.output.clone()));
        }
        self.next_job += 1;
        let id = JobId((self.epoch << 32) | self.next_job);
        let token = self.cfg.secret.job_token(id.0);
        let record = JobRecord {
            id,
            request: Some(r.clone()),
            state: RecordState::Running,
            error: String::new(),
            submission: submission.clone(),
            user: user.clone(),
        };
        self.logged
            .push(JobEntry::Accepted(Box::new(crate::joblog::Accepted {
                id,
                request: r.clone(),
                reducers,
                replication,
                inputs: blocks.clone(),
                side: side.clone(),
                submission,
                user,
            })));
        let job =
            Job::new(id, r, blocks, reducers, token, self.at.now).with_side(side, replication);
        self.jobs.insert(id, job);
        // Its record is written with its next change, not now: the job
        // log's acceptance, synced before the client is answered, is what
        // makes a restart find it (and write its record), so a submit
        // costs one sync, not two.
        self.records.insert(id, record);
        // A job that cannot read its input fails before any task runs.
        self.fail_unreadable_inputs();
        Ok(id)
    }

    /// The job an earlier submit with this client id made, if any (the
    /// newest; an empty id names none).
    fn submitted(&self, submission: &str) -> Option<JobId> {
        if submission.is_empty() {
            return None;
        }
        let made = self.records.values().rev();
        made.filter(|r| r.submission == submission)
            .map(|r| r.id)
            .next()
    }

    /// Ends a running job on request: its attempts are killed, its
    /// outputs dropped, the workers told to remove its files, its record
    /// written.
    pub(super) fn kill(&mut self, id: JobId, reason: &str) -> Result<proto::JobStatus, Refusal> {
        let epoch = self.epoch;
        let job = self
            .jobs
            .get_mut(&id)
            .ok_or(Refusal::NoJob { job: id, epoch })?;
        if *job.state() != JobState::Running {
            return Err(Refusal::NotRunning {
                job: id,
                state: job.state().name(),
            });
        }
        let who = if reason.is_empty() { "a user" } else { reason };
        job.end(JobState::Killed(format!("killed by {who}")), self.at.now);
        self.settle_jobs();
        Ok(self.status(id).expect("the job exists"))
    }

    /// The map inputs of a job: the blocks of its data sets (names
    /// separated by commas), small ones packed by holder
    /// ([`crate::combine`]), or for `synthetic:N` N blockless tasks that
    /// run on any worker.
    pub(super) fn input_blocks(
        &self,
        r: &JobRequest,
    ) -> std::result::Result<Vec<MapInput>, Refusal> {
        let synthetic = sluice_formats::input::synthetic_count(&r.input)
            .map_err(|e| Refusal::Invalid(e.to_string()))?;
        if let Some(n) = synthetic {
            return Ok(vec![MapInput::Synthetic; n]);
        }
        let mut blocks = Vec::new();
        let mut block_size = 0;
        for name in r.input.split(',') {
            blocks.extend(self.dataset_blocks(name)?);
            block_size =
                block_size.max(self.catalog.datasets.get(name).map_or(0, |d| d.block_size));
        }
        let total = blocks.iter().map(|b| b.len).sum();
        let target = match r.engine.combine {
            true => combine::target(r.engine.split_size, block_size, total, self.total_slots()),
            false => 0,
        };
        let live: HashSet<&str> = self.alive().map(|w| w.info.uid.as_str()).collect();
        Ok(combine::map_inputs(blocks, target, &|u| live.contains(u)))
    }

    /// The map inputs of a job reading an external store: one a split,
    /// held by the live workers on the hosts that hold its bytes.
    pub(super) fn external_inputs(&self, splits: Vec<ExternalInput>) -> Vec<MapInput> {
        splits
            .into_iter()
            .map(|s| {
                let holders = self
                    .alive()
                    .filter(|w| !w.info.host.is_empty() && s.hosts.contains(&w.info.host))
                    .map(|w| w.info.uid.clone())
                    .collect();
                MapInput::External(External {
                    url: s.url,
                    start: s.start,
                    end: s.end,
                    holders,
                })
            })
            .collect()
    }

    /// The side inputs of a job, each with its blocks.
    pub(super) fn side_inputs(
        &self,
        names: Vec<String>,
    ) -> std::result::Result<Vec<(String, Vec<BlockMeta>)>, Refusal> {
        names
            .into_iter()
            .map(|n| Ok((n.clone(), self.dataset_blocks(&n)?)))
            .collect()
    }

    /// Fails jobs with a pending map whose block has no live intact
    /// replica (not while workers register again after a restart).
    pub(super) fn fail_unreadable_inputs(&mut self) -> bool {
        if self.regrouping() {
            return false;
        }
        let live: Vec<String> = self.alive().map(|w| w.info.uid.clone()).collect();
        let mut changed = false;
        for job in self.jobs.values_mut().filter(|j| j.is_running()) {
            let dead = job.maps().iter().zip(job.inputs()).find_map(|(t, input)| {
                // A synthetic task (no block) can run anywhere.
                let unread = |b: &&BlockMeta| !b.replicas.iter().any(|u| live.contains(u));
                t.pending().then(|| input.blocks().iter().find(unread))?
            });
            if let Some(b) = dead {
                let msg = if b.corrupt.is_empty() {
                    format!(
                        "block {} of data set {} has no live replica (held by {:?})",
                        b.id,
                        job.input(),
                        b.replicas
                    )
                } else {
                    let workers: Vec<proto::WorkerInfo> =
                        self.workers.values().map(|w| w.info.clone()).collect();
                    no_intact_replica(b, job.input(), &workers)
                };
                job.fail(msg, self.at.now);
                changed = true;
                continue;
            }
            // Every worker that runs one of the job's tasks reads every
            // side block.
            let side_dead = job.side().iter().find_map(|(name, blocks)| {
                let b = blocks
                    .iter()
                    .find(|b| !b.replicas.iter().any(|u| live.contains(u)))?;
                Some((name, b))
            });
            if let Some((name, b)) = side_dead {
                let msg = format!(
                    "block {} of side data set {name} has no live replica (held by {:?})",
                    b.id, b.replicas
                );
                job.fail(msg, self.at.now);
                changed = true;
            }
        }
        changed
    }

    /// Refuses a job asking more memory per task than any live worker's
    /// share gives.
    pub(super) fn check_memory(&self, asked: u64) -> std::result::Result<(), Refusal> {
        let best = self
            .alive()
            .filter(|w| w.info.memory > 0)
            .map(|w| {
                (
                    sluice_proto::task_share(w.info.memory, w.info.slots),
                    &w.info,
                )
            })
            .max_by_key(|(share, _)| *share);
        match best {
            Some((share, w)) if asked > share => Err(Refusal::Memory(MemoryAsk {
                asked,
                share,
                worker: w.id,
                memory: w.memory,
                slots: w.slots,
            })),
            _ => Ok(()),
        }
    }

    /// Commits complete jobs and cleans up after ended ones.
    pub(super) fn settle_jobs(&mut self) {
        let complete: Vec<JobId> = self
            .jobs
            .values()
            .filter(|j| *j.state() == JobState::Running && j.complete())
            .map(|j| j.id())
            .collect();
        for id in complete {
            self.commit(id);
        }
        let ended: Vec<JobId> = self
            .jobs
            .values()
            .filter(|j| !j.is_running() && j.report_json().is_empty())
            .map(|j| j.id())
            .collect();
        let any_ended = !ended.is_empty();
        for id in ended {
            self.end_job(id);
        }
        if any_ended {
            self.retire_ended(KEEP_ENDED_JOBS, KEEP_ENDED_TASKS);
        }
    }

    /// Retires the oldest ended jobs while more than `jobs` ended ones,
    /// or ended ones of more than `tasks` tasks together, are held: their
    /// tasks leave memory and no heartbeat walks them again; their
    /// reports stay (in the history kept in memory, as an earlier
    /// coordinator's), and their records answer for them. A late report
    /// of a retired job's attempt is ignored, and its output block is an
    /// orphan like any other. Hadoop's JobTracker retired completed jobs
    /// the same way, Spark's driver keeps `spark.ui.retainedJobs`.
    pub(super) fn retire_ended(&mut self, jobs: usize, tasks: usize) {
        let ended: Vec<(JobId, usize)> = self
            .jobs
            .values()
            .filter(|j| !j.is_running() && !j.report_json().is_empty())
            .map(|j| (j.id(), j.maps().len() + j.reduces().len()))
            .collect();
        let (mut count, mut held) = (ended.len(), ended.iter().map(|e| e.1).sum::<usize>());
        for (id, n) in ended {
            if count <= jobs && held <= tasks {
                break;
            }
            if let Some(j) = self.jobs.remove(&id) {
                self.history.insert(id, j.report_json().to_owned());
            }
            (count, held) = (count - 1, held - n);
        }
        while self.history.len() > self.cfg.history.max(1) {
            self.history.pop_first();
        }
    }

    /// The atomic job commit: the output data set, built from the winning
    /// attempts only, enters the catalog in one catalog write; the job
    /// succeeds when the write is on disk ([`Event::CatalogSaved`]).
    pub(super) fn commit(&mut self, id: JobId) {
        let now = self.at.now;
        let job = self.jobs.get_mut(&id).expect("job exists");
        if let Some(d) = self.catalog.datasets.get(job.output()) {
            if super::recover::is_origin(&d.origin, id) {
                // Its commit was written before a restart (its end record
                // was not): it is not committed again.
                job.committing();
                job.committed(now);
                return;
            }
        }
        let (kind, prefix) = if job.map_only() {
            (MAP, "part-m")
        } else {
            (REDUCE, "part-r")
        };
        let files: Result<Vec<FileMeta>, ClusterError> = job
            .tasks(kind)
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let a = t.winner().expect("complete job");
                let out = a
                    .report
                    .as_ref()
                    .and_then(|r| r.output.as_deref().cloned())
                    .unwrap_or_default();
                let mut replicas = vec![a.uid.to_string()];
                replicas.extend(out.replicas.iter().filter(|u| **u != *a.uid).cloned());
                Ok(FileMeta {
                    name: format!("{prefix}-{i:05}"),
                    blocks: vec![BlockMeta {
                        replicas,
                        ..BlockMeta::try_from(out)?
                    }],
                })
            })
            .collect();
        let files = match files {
            Ok(f) => f,
            Err(e) => return job.fail(format!("a task reported a bad output block: {e}"), now),
        };
        let name = match DatasetName::new(job.output().to_owned()) {
            Ok(n) => n,
            Err(e) => return job.fail(e.to_string(), now),
        };
        if self.catalog.datasets.contains_key(&name) && !job.overwrite() {
            job.fail(
                format!("output data set {name} appeared while the job ran"),
                now,
            );
            return;
        }
        let meta = DatasetMeta {
            name: name.clone(),
            files,
            created_ms: self.at.ms,
            origin: format!(
                "{} ({})",
                super::recover::origin(id),
                job.request().describe()
            ),
            replication: job.output_replication(),
            block_size: 0,
            access: sluice_proto::catalog::Access::owned_by(
                self.records.get(&id).map_or("", |r| r.user.as_str()),
            ),
        };
        job.committing();
        self.logged.push(JobEntry::CommitStarted { job: id });
        let replaced = self.put_dataset(meta);
        self.write().then.push(Then::Commit { job: id, replaced });
    }

    /// After a job ends: kill its attempts, drop uncommitted outputs,
    /// have workers remove its map outputs, record it.
    pub(super) fn end_job(&mut self, id: JobId) {
        let workers = self.alive().count();
        let places = self.places();
        let job = self.jobs.get_mut(&id).expect("job exists");
        let mut report = crate::report::of(job, workers, &places);
        if report.reduce_scheduler.is_empty() && !job.map_only() {
            report.reduce_scheduler = self.cfg.settings.reduce.name();
        }
        report.model = crate::report::account(&report, &self.cfg.hardware);
        self.totals.add(&report);
        job.reported(serde_json::to_string_pretty(&report).expect("serializable"));
        self.ended.push((id, job.report_json().to_owned()));
        self.outputs_moved = true;
        self.logged.push(JobEntry::Ended { job: id });
        let succeeded = *job.state() == JobState::Succeeded;
        let mut kills = Vec::new();
        for (worker, kind, index, attempt) in job.running_attempts() {
            kills.push((
                worker,
                proto::TaskId {
                    job: id.0,
                    kind: kind.wire(),
                    index: index as u32,
                    attempt,
                },
            ));
        }
        // Output blocks not in the committed data set.
        let mut drop_blocks = Vec::new();
        for kind in [MAP, REDUCE] {
            for t in job.tasks(kind) {
                for (i, a) in t.attempts.iter().enumerate() {
                    let won = succeeded && t.done == Some(i);
                    if let Some(out) = a.report.as_ref().and_then(|r| r.output.as_ref()) {
                        if !won && !out.id.is_empty() {
                            drop_blocks.push((a.worker, out.clone()));
                        }
                    }
                }
            }
        }
        let kept = committed_blocks(job);
        let (state, error) = (job.state().record(), job.state().reason());
        if let Some(r) = self.records.get_mut(&id) {
            r.state = state;
            r.error = error;
        }
        self.jobs_dirty = true;
        for (w, t) in kills {
            if let Some(w) = self.workers.get_mut(&w) {
                w.kills.push(t);
            }
        }
        for (w, b) in drop_blocks {
            self.drop_output(w, &b);
        }
        for w in self.workers.values_mut().filter(|w| w.info.alive) {
            w.finished_jobs.push(id.0);
            w.kept_blocks.extend(kept.iter().cloned());
        }
    }

    /// Has the worker that wrote an output block, and every worker that
    /// took a copy, delete it.
    pub(super) fn drop_output(&mut self, writer: WorkerId, b: &proto::BlockInfo) {
        if let Some(w) = self.workers.get_mut(&writer) {
            w.deletes.push(b.id.clone());
        }
        for uid in &b.replicas {
            if let Some(w) = self.worker_by_uid_mut(uid) {
                w.deletes.push(b.id.clone());
            }
        }
    }

    /// Workers to copy an output block written on `worker` to, for a job
    /// that keeps `output_replication` replicas.
    pub(super) fn output_copies(
        &self,
        job: JobId,
        worker: WorkerId,
        policy: &dyn PlacementPolicy,
    ) -> Vec<proto::WorkerInfo> {
        let n = self.jobs.get(&job).map_or(1, |j| j.output_replication()) as usize;
        let Some(holder) = self.workers.get(&worker) else {
            return Vec::new();
        };
        if n <= 1 {
            return Vec::new();
        }
        let live: Vec<&proto::WorkerInfo> = self.alive().map(|w| &w.info).collect();
        let nodes: Vec<Node> = live.iter().map(|w| node(w)).collect();
        let uids = policy.place_copies(&nodes, &holder.info.uid, n - 1, &mut HashMap::new());
        uids.iter()
            .filter_map(|u| live.iter().find(|w| &w.uid == u).map(|w| (*w).clone()))
            .collect()
    }

    /// Every known worker's data center, for the bytes that cross them.
    pub(crate) fn places(&self) -> crate::report::Places {
        let mut p = crate::report::Places::default();
        for w in self.workers.values() {
            let dc = w.info.datacenter.clone();
            p.by_uid.insert(w.info.uid.clone(), dc.clone());
            p.by_addr.insert(w.info.data_addr.clone(), dc);
        }
        p
    }

    pub(super) fn on_report(&mut self, worker: WorkerId, mut rep: proto::TaskReport) {
        let cfg = self.cfg.clone();
        let Some(t) = rep.task else { return };
        let Some(kind) = TaskKind::from_wire(t.kind) else {
            tracing::warn!("a report of unknown task kind {} ignored", t.kind);
            return;
        };
        // Only replicas actually taken out of service excuse a failure, so
        // a task cannot fail forever without counting.
        let corrupt = std::mem::take(&mut rep.corrupt);
        rep.corrupt = corrupt
            .into_iter()
            .filter(|c| self.mark_corrupt(c))
            .collect();
        let task = self.jobs.get(&JobId(t.job));
        let task = task.and_then(|j| j.tasks(kind).get(t.index as usize));
        // A winner's report sent again (its first answer was lost) changes
        // nothing; its output is the job's.
        if task
            .and_then(|x| x.winner())
            .is_some_and(|a| a.id == t.attempt)
        {
            return;
        }
        // An attempt an earlier coordinator started, reported before its
        // worker's registration named it, is adopted first.
        let unknown = task.is_some_and(|x| x.slot_of(t.attempt).is_none());
        if unknown {
            self.adopt_attempts(worker, &[t]);
        }
        let Some(job) = self.jobs.get_mut(&JobId(t.job)) else {
            return;
        };
        if !rep.ok {
            tracing::warn!(
                "job {} task {} attempt {} failed: {}",
                t.job,
                task_name(kind, t.index as usize),
                t.attempt,
                rep.error
            );
        }
        let output = rep.output.clone();
        let (kills, discard) = if job.is_running() {
            job.finish(kind, t.index as usize, rep, &cfg.settings, self.at.now)
        } else {
            (Vec::new(), true)
        };
        if !discard {
            self.logged.extend(task_done(job, kind, t.index as usize));
            self.outputs_moved |= kind == TaskKind::Map && job.maps_complete();
        }
        for (w, attempt) in kills {
            if let Some(ws) = self.workers.get_mut(&w) {
                ws.kills.push(proto::TaskId { attempt, ..t });
            }
        }
        if let (true, Some(out)) = (discard, output.filter(|o| !o.id.is_empty())) {
            self.drop_output(worker, &out);
        }
    }

    /// The user job `id` runs as (empty: an admin, or no such job).
    pub(crate) fn job_user(&self, id: JobId) -> &str {
        self.records.get(&id).map_or("", |r| r.user.as_str())
    }

    /// A job's status, running or recorded.
    pub(crate) fn status(&self, id: JobId) -> Option<proto::JobStatus> {
        if let Some(j) = self.jobs.get(&id) {
            let (state, error) = (j.state().name(), j.state().reason());
            let done = !j.report_json().is_empty();
            return Some(proto::JobStatus {
                job: id.0,
                state: if done { state } else { "running" }.into(),
                error,
                report_json: j.report_json().to_owned(),
                maps: j.maps().len() as u32,
                maps_done: j.done(MAP) as u32,
                reduces: j.reduces().len() as u32,
                reduces_done: j.done(REDUCE) as u32,
                pool: j.pool().to_owned(),
                running_maps: j.running(MAP) as u32,
                running_reduces: j.running(REDUCE) as u32,
                slots: self.total_slots() as u32,
                user: self.job_user(id).to_owned(),
            });
        }
        self.records.get(&id).map(|r| proto::JobStatus {
            job: id.0,
            state: r.state.name().into(),
            error: r.error.clone(),
            report_json: self.history.get(&id).cloned().unwrap_or_default(),
            user: r.user.clone(),
            ..Default::default()
        })
    }
}

/// The output blocks a job's commit put in the catalog (none unless it
/// succeeded).
pub(super) fn committed_blocks(job: &Job) -> Vec<String> {
    if *job.state() != JobState::Succeeded {
        return Vec::new();
    }
    [MAP, REDUCE]
        .iter()
        .flat_map(|&k| job.tasks(k))
        .filter_map(|t| t.winner()?.report.as_ref()?.output.as_ref())
        .map(|o| o.id.clone())
        .filter(|id| !id.is_empty())
        .collect()
}

/// The job log's record of a task's winner, if it has one.
fn task_done(job: &Job, kind: TaskKind, index: usize) -> Option<JobEntry> {
    let a = job.tasks(kind).get(index)?.winner()?;
    let task = proto::TaskId {
        job: job.id().0,
        kind: kind.wire(),
        index: index as u32,
        attempt: a.id,
    };
    let report = a.report.as_ref()?.to_proto(task, job.names());
    Some(JobEntry::TaskDone(TaskDone {
        job: job.id(),
        kind: kind.wire(),
        index: index as u32,
        attempt: a.id,
        uid: a.uid.to_string(),
        addr: a.addr.to_string(),
        datacenter: a.datacenter.to_string(),
        report: prost::Message::encode_to_vec(&report),
    }))
}
