//! Workers: registration, heartbeats (and the offer of a heartbeat's
//! slots), the clock's tick, and a worker's loss.

use crate::sched::Place;
use crate::store::Node;
use sluice_proto::ids::{JobId, TaskKind, WorkerId};
use sluice_proto::proto;

use std::time::Duration;

use super::{Refusal, State, WorkerState};

/// Most heartbeats a second idle workers send together: the hold of a
/// heartbeat with nothing for its worker grows with the cluster to keep
/// them under it ([`State::hold`]). A thousand workers beat once a
/// second each when idle; a worker whose task ends beats at once.
pub const IDLE_BEATS_PER_S: f64 = 1000.0;

/// The longest hold: workers that registered when the cluster was small
/// wait this long past the hold they were told, plus a margin, before
/// trying another coordinator.
pub const MAX_HOLD: Duration = Duration::from_secs(2);

/// How long to hold worker `w`'s heartbeat that arrived at `now_ms`
/// (the wall clock's ms) with nothing for it, given the cluster's `hold`:
/// until the next point of the worker's own phase in each `hold`, and at
/// least a quarter of `hold` away. Each worker's phase is its id's
/// Fibonacci hash, so idle workers come back evenly through each `hold`
/// rather than together: a job's start wakes every held heartbeat at
/// once, and without phases they would come back as one storm every
/// `hold` (5,000 at a time at 5,000 workers), queueing the reports of
/// finished tasks behind them. A worker that beats again as soon as its
/// hold ends is held exactly `hold`; no hold is longer than 1.25 `hold`.
pub(crate) fn held_for(now_ms: u64, hold: Duration, w: WorkerId) -> Duration {
    let period = (hold.as_millis() as u64).max(1);
    let hash = w.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    let phase = (hash * period) >> 32;
    let earliest = now_ms + period / 4;
    let past_phase = (earliest % period + period - phase) % period;
    let until = earliest + (period - past_phase) % period;
    Duration::from_millis(until - now_ms)
}

impl State {
    /// A worker joins: a worker registering again keeps its id and its
    /// finished work (its running attempts it does not name are lost), a
    /// worker that ran a recovered job's finished tasks takes the id they
    /// name; its blocks are checked against the catalog, the attempts it
    /// says it runs are adopted or killed.
    pub(super) fn register(
        &mut self,
        mut r: proto::RegisterRequest,
    ) -> Result<proto::RegisterReply, Refusal> {
        if r.protocol_version != sluice_proto::PROTOCOL_VERSION {
            return Err(Refusal::Protocol {
                worker: r.protocol_version,
                coordinator: sluice_proto::PROTOCOL_VERSION,
            });
        }
        let running = std::mem::take(&mut r.running);
        let again = self
            .workers
            .iter()
            .find(|(_, w)| w.info.alive && w.info.uid == r.uid)
            .map(|(&id, _)| id);
        let id = match again {
            Some(id) => {
                self.registered_again(id, &running);
                id
            }
            None => self.claim_awaited(&r.uid).unwrap_or_else(|| {
                self.next_worker += 1;
                WorkerId(self.next_worker)
            }),
        };
        let host = if r.host.is_empty() {
            host_of(&r.data_addr)
        } else {
            r.host
        };
        let info = proto::WorkerInfo {
            id: id.0,
            host,
            free_bytes: r.free_bytes,
            uid: r.uid,
            data_addr: r.data_addr,
            datacenter: r.datacenter,
            rack: r.rack,
            slots: r.slots.max(1),
            alive: true,
            pid: r.pid,
            memory: r.memory,
            http_addr: r.http_addr,
        };
        self.workers.insert(id, WorkerState::new(info, self.at.now));
        self.members = None;
        self.heal.changed();
        self.block_report(id, &r.blocks);
        self.adopt_attempts(id, &running);
        Ok(proto::RegisterReply {
            running_jobs: self
                .jobs
                .values()
                .filter(|j| j.is_running())
                .map(|j| j.id().0)
                .collect(),
            worker_id: id.0,
            epoch: self.epoch,
            heartbeat_ms: self.cfg.heartbeat.as_millis() as u64,
        })
    }

    /// A heartbeat: task reports first (a failure excused by its own
    /// evidence must not find the replica already marked by the
    /// scanner's), then damaged replicas, then the block report; then the
    /// worker's free slots are offered. `None`: nothing to tell it yet.
    pub(super) fn heartbeat(
        &mut self,
        r: proto::HeartbeatRequest,
    ) -> Option<proto::HeartbeatReply> {
        let worker = WorkerId(r.worker_id);
        let epoch = self.epoch;
        match self.workers.get_mut(&worker) {
            Some(w) if w.info.alive && r.epoch == epoch => {
                w.last_seen = self.at.now;
                w.info.free_bytes = r.free_bytes;
                if let Some(c) = r.cache {
                    w.cached = c.blocks.iter().cloned().collect();
                    if c.blocks.is_empty() {
                        self.caching.remove(&worker);
                    } else {
                        self.caching.insert(worker);
                    }
                    w.cache = c;
                }
            }
            _ => return Some(reregister()),
        }
        for p in r.progress {
            let Some(t) = p.task else { continue };
            let kind = TaskKind::from_wire(t.kind);
            if let (Some(job), Some(kind)) = (self.jobs.get_mut(&JobId(t.job)), kind) {
                job.fetched(kind, t.index as usize, t.attempt, p.fetched);
            }
        }
        let had_reports = !r.reports.is_empty() || !r.corrupt.is_empty();
        for rep in r.reports {
            self.on_report(worker, rep);
        }
        for c in &r.corrupt {
            self.mark_corrupt(c);
        }
        if r.block_report {
            self.block_report(worker, &r.blocks);
        }
        for c in &r.replicated {
            self.replicated(c);
        }
        self.note_marks();
        self.settle_jobs();
        let reply = self.offer(worker);
        (had_reports || !is_empty(&reply)).then_some(reply)
    }

    /// Offers a worker's free slots; the reply carries the tasks it takes
    /// and what it must kill or delete.
    pub(super) fn offer(&mut self, worker: WorkerId) -> proto::HeartbeatReply {
        if !self.workers.get(&worker).is_some_and(|w| w.info.alive) {
            return reregister();
        }
        let mut tasks = match self.holding_tasks() {
            true => Vec::new(),
            false => self.assign(worker),
        };
        let cfg = self.cfg.clone();
        for t in tasks.iter_mut().filter(|t| !t.output_block.is_empty()) {
            let job = JobId(t.task.unwrap_or_default().job);
            t.output_copies = self.output_copies(job, worker, &*cfg.placement);
        }
        let pins = self.pins_for(worker);
        let replicate = self.copies_for(worker);
        let w = self.workers.get_mut(&worker).expect("checked above");
        let ids: Vec<String> = pins.iter().map(|b| b.id.clone()).collect();
        let pins = (w.pins_sent.as_ref() != Some(&ids)).then(|| {
            w.pins_sent = Some(ids);
            proto::CachePins { blocks: pins }
        });
        proto::HeartbeatReply {
            reregister: false,
            tasks,
            kills: std::mem::take(&mut w.kills),
            delete_blocks: std::mem::take(&mut w.deletes),
            finished_jobs: std::mem::take(&mut w.finished_jobs),
            kept_blocks: std::mem::take(&mut w.kept_blocks),
            pins,
            replicate,
        }
    }

    /// How long the service holds a heartbeat it has nothing to hand out
    /// for (a change ends the hold sooner): the configured interval, or,
    /// in a large cluster, long enough that idle workers beat at most
    /// [`IDLE_BEATS_PER_S`] times a second together, as Hadoop's
    /// JobTracker lengthened its TaskTrackers' interval with the cluster's
    /// size. At most [`MAX_HOLD`] and a quarter of the worker timeout, so
    /// that a held worker is never taken for a silent one.
    pub(crate) fn hold(&self) -> Duration {
        let live = match &self.members {
            Some(m) => m.addrs.len(),
            None => self.alive().count(),
        };
        let spread = Duration::from_secs_f64(live as f64 / IDLE_BEATS_PER_S);
        let cap = MAX_HOLD.min(self.cfg.worker_timeout / 4);
        spread.min(cap).max(self.cfg.heartbeat)
    }

    /// How long the service holds worker `w`'s heartbeat that arrived at
    /// `now_ms` with nothing for it: [`State::hold`], ended at the
    /// worker's own phase ([`held_for`]) once the cluster is large enough
    /// that the hold grew past the configured interval. In a smaller
    /// cluster a few hundred beats coming back together cost less than
    /// spreading them, which loses the batching of their replies (at 100
    /// workers, 12% more of the coordinator's CPU).
    pub(crate) fn hold_for(&self, w: WorkerId, now_ms: u64) -> Duration {
        let hold = self.hold();
        if hold <= self.cfg.heartbeat {
            return hold;
        }
        held_for(now_ms, hold, w)
    }

    pub(super) fn alive(&self) -> impl Iterator<Item = &WorkerState> {
        self.workers.values().filter(|w| w.info.alive)
    }

    pub(super) fn worker_by_uid_mut(&mut self, uid: &str) -> Option<&mut WorkerState> {
        self.workers
            .values_mut()
            .find(|w| w.info.alive && w.info.uid == uid)
    }

    /// Time passes: workers silent too long are lost, jobs with no live
    /// worker or no readable input fail, starved pools preempt. Returns
    /// whether anything changed.
    pub(super) fn tick(&mut self) -> bool {
        let cfg = self.cfg.clone();
        let now = self.at.now;
        let lost: Vec<WorkerId> = self
            .workers
            .iter()
            .filter(|(_, w)| w.info.alive && now.duration_since(w.last_seen) > cfg.worker_timeout)
            .map(|(&id, _)| id)
            .collect();
        for &id in &lost {
            self.lose_worker(id);
        }
        let gave_up = self.give_up_awaited();
        self.inputs_unchecked |= !lost.is_empty() || gave_up;
        let mut changed = !lost.is_empty() | gave_up;
        if cfg.replication_streams > 0 {
            // Listing the live workers costs the cluster's size: only when
            // a scan is due, not at every tick.
            if self.heal.due(now) {
                let live = self.live_by_uid();
                let busy = self.blocks_read();
                self.heal.scan(&self.catalog, &live, &busy, now);
            }
            changed |= self.remove_excess();
        }
        if self.alive().next().is_some() {
            self.last_alive = now;
        } else if now.duration_since(self.last_alive) > cfg.worker_timeout {
            let n = self.workers.len();
            for job in self.jobs.values_mut().filter(|j| j.is_running()) {
                job.fail(
                    format!(
                        "no live workers: all {n} workers were lost (silent for over {:?})",
                        cfg.worker_timeout
                    ),
                    now,
                );
                changed = true;
            }
        }
        // Only a lost worker makes a block unreadable here (a damaged
        // replica is checked for when it is marked, a job when submitted).
        if self.inputs_unchecked && !self.regrouping() {
            self.inputs_unchecked = false;
            changed |= self.fail_unreadable_inputs();
        }
        if let Some(timeout) = cfg.preemption_timeout {
            changed |= self.preempt(timeout);
        }
        changed
    }

    pub(super) fn lose_worker(&mut self, id: WorkerId) {
        let Some(w) = self.workers.get_mut(&id) else {
            return;
        };
        tracing::warn!("worker {} ({}) lost", w.info.uid, w.info.data_addr);
        self.inputs_unchecked = true;
        w.info.alive = false;
        let uid = w.info.uid.clone();
        self.members = None;
        self.heal.changed();
        // Its unknown blocks are judged again when it reports anew.
        self.unknown.retain(|(u, _), _| *u != uid);
        for job in self.jobs.values_mut().filter(|j| j.is_running()) {
            job.worker_lost(id, self.at.now);
        }
    }
}

/// Where a worker is, as placement and locality see it.
pub(super) fn place_of(w: &proto::WorkerInfo) -> Place {
    Place {
        datacenter: w.datacenter.clone(),
        rack: w.rack.clone(),
    }
}

/// The reply that tells a worker of another coordinator start (or one
/// declared lost) to register again.
pub(super) fn reregister() -> proto::HeartbeatReply {
    proto::HeartbeatReply {
        reregister: true,
        ..Default::default()
    }
}

/// Whether a reply tells the worker nothing (then the heartbeat is held;
/// a reply that says something must be sent, or what it says is lost).
pub(super) fn is_empty(r: &proto::HeartbeatReply) -> bool {
    r.tasks.is_empty()
        && r.kills.is_empty()
        && r.delete_blocks.is_empty()
        && r.finished_jobs.is_empty()
        && r.kept_blocks.is_empty()
        && r.pins.is_none()
        && r.replicate.is_empty()
}

/// A worker as placement sees it.
pub(super) fn node(w: &proto::WorkerInfo) -> Node {
    Node {
        uid: w.uid.clone(),
        host: w.host.clone(),
        datacenter: w.datacenter.clone(),
        rack: w.rack.clone(),
        free_bytes: w.free_bytes,
    }
}

/// The host part of `host:port`.
pub fn host_of(addr: &str) -> String {
    addr.rsplit_once(':')
        .map_or(addr, |(h, _)| h)
        .trim_matches(['[', ']'])
        .to_owned()
}
