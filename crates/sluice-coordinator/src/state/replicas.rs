//! Replicas: block reports, damaged replicas, re-replication copies and
//! excess replicas (the planning itself is [`crate::heal`]'s).

use std::collections::{BTreeMap, HashSet};

use crate::input::MapInput;
use crate::sched::Job;
use sluice_proto::catalog::BlockMeta;
use sluice_proto::ids::WorkerId;
use sluice_proto::ids::{output_block_job, DatasetName};
use sluice_proto::proto;

use super::{State, PUT_LEASE, REPORT_GUARD_MS};

impl State {
    /// The blocks running jobs read (inputs and side inputs).
    pub(super) fn blocks_read(&self) -> HashSet<String> {
        self.jobs
            .values()
            .filter(|j| j.is_running())
            .flat_map(|j| {
                let side = j.side().iter().flat_map(|(_, b)| b.iter());
                j.inputs().iter().flat_map(MapInput::blocks).chain(side)
            })
            .map(|b| b.id.to_string())
            .collect()
    }

    /// Removes the excess replicas healing found: out of the catalog, and
    /// each holder told to delete its file. Returns whether any went.
    pub(super) fn remove_excess(&mut self) -> bool {
        let excess = self.heal.take_excess();
        let mut by_dataset: BTreeMap<DatasetName, Vec<crate::heal::Excess>> = BTreeMap::new();
        for e in excess {
            by_dataset.entry(e.dataset.clone()).or_default().push(e);
        }
        let mut removed = false;
        for (name, gone) in by_dataset {
            let Some(mut meta) = self.catalog.datasets.get(&name).cloned() else {
                continue;
            };
            for e in &gone {
                let block = meta
                    .files
                    .iter_mut()
                    .flat_map(|f| f.blocks.iter_mut())
                    .find(|b| b.id.as_str() == e.block);
                if let Some(b) = block {
                    b.replicas.retain(|u| *u != e.uid);
                }
                tracing::info!("block {}: excess replica on {} removed", e.block, e.uid);
                if let Some(w) = self.worker_by_uid_mut(&e.uid) {
                    w.deletes.push(e.block.clone());
                }
            }
            self.put_dataset(meta);
            removed = true;
        }
        removed
    }

    /// The uids of the live workers.
    pub(crate) fn live_uids(&self) -> HashSet<String> {
        self.alive().map(|w| w.info.uid.clone()).collect()
    }

    /// Live workers by uid, as re-replication sees them.
    pub(super) fn live_by_uid(&self) -> BTreeMap<String, crate::heal::Live> {
        self.alive()
            .map(|w| {
                let info = w.info.clone();
                (info.uid.clone(), crate::heal::Live { info })
            })
            .collect()
    }

    /// The re-replication copies `worker` sends now.
    pub(super) fn copies_for(&mut self, worker: WorkerId) -> Vec<proto::ReplicateCommand> {
        let streams = self.cfg.replication_streams;
        let Some(uid) = self.workers.get(&worker).map(|w| w.info.uid.clone()) else {
            return Vec::new();
        };
        if streams == 0 || self.heal.backlog() == 0 {
            return Vec::new();
        }
        let live = self.live_by_uid();
        let now = self.at.now;
        let in_dc = self.cfg.placement.keeps_copies_in_datacenter();
        let copies = self
            .heal
            .assign(&uid, &self.catalog, &live, streams, in_dc, now);
        for c in &copies {
            // The new replica shows in the target's block report before
            // the copy is reported: known, not an orphan.
            let id = c.block.as_ref().map_or_else(String::new, |b| b.id.clone());
            self.planned.insert(id, now);
        }
        copies
    }

    /// A holder's word on a re-replication copy: a copy made is a replica
    /// in the catalog.
    pub(super) fn replicated(&mut self, r: &proto::ReplicateResult) {
        let Some((dataset, target)) = self.heal.done(r) else {
            return;
        };
        let Some(mut meta) = self.catalog.datasets.get(&dataset).cloned() else {
            return;
        };
        let block = meta
            .files
            .iter_mut()
            .flat_map(|f| f.blocks.iter_mut())
            .find(|b| b.id == r.block);
        let Some(b) = block else {
            return;
        };
        if !b.replicas.contains(&target) {
            b.replicas.push(target);
            self.put_dataset(meta);
        }
    }

    /// Marks a replica damaged: out of its block's replicas in the
    /// catalog and in running jobs (never read again), and deleted from
    /// its worker. Returns whether a replica was marked (a report about a
    /// replica already marked, or never held, changes nothing).
    pub(super) fn mark_corrupt(&mut self, c: &proto::CorruptReplica) -> bool {
        self.heal.changed();
        let uid = if c.worker.is_empty() {
            match self.alive().find(|w| w.info.data_addr == c.addr) {
                Some(w) => w.info.uid.clone(),
                None => return false,
            }
        } else {
            c.worker.clone()
        };
        let mut marked = false;
        for d in self.catalog.datasets.values_mut() {
            let mut here = false;
            for f in &mut d.files {
                for b in f.blocks.iter_mut().filter(|b| b.id == c.block) {
                    here |= b.mark_corrupt(&uid, &c.detail);
                }
            }
            if here {
                self.marked.push(d.name.clone());
            }
            marked |= here;
        }
        for job in self.jobs.values_mut().filter(|j| j.is_running()) {
            marked |= job.mark_corrupt(&c.block, &uid, &c.detail);
        }
        if !marked {
            return false;
        }
        tracing::warn!(
            "block {}: replica on {uid} is damaged: {}",
            c.block,
            c.detail
        );
        // Deleted only while an intact replica remains: the last copy stays
        // on disk (never read) in case the evidence was the reader's fault.
        let intact_left = self
            .catalog
            .datasets
            .values()
            .flat_map(|d| d.blocks())
            .any(|b| b.id == c.block && !b.replicas.is_empty());
        if intact_left {
            if let Some(w) = self.worker_by_uid_mut(&uid) {
                w.deletes.push(c.block.clone());
            }
        }
        true
    }

    /// Asks for a catalog write if damaged replicas were marked in this
    /// step (once per batch of reports, not once per replica), and fails
    /// jobs left without an intact replica. Steps without marks do
    /// neither.
    pub(super) fn note_marks(&mut self) {
        let marked = std::mem::take(&mut self.marked);
        if marked.is_empty() {
            return;
        }
        self.write().touched.extend(marked);
        self.fail_unreadable_inputs();
    }

    /// Takes a worker's block report: blocks that no data set holds on it,
    /// no put in progress was given and no running job wrote are orphans;
    /// those still reported after the grace period are deleted. Output
    /// blocks of jobs that have ended go at once.
    pub(super) fn block_report(&mut self, worker: WorkerId, blocks: &[String]) {
        let grace = self.cfg.orphan_grace;
        let Some(uid) = self.workers.get(&worker).map(|w| w.info.uid.clone()) else {
            return;
        };
        let now = self.at.now;
        self.planned
            .retain(|_, t| now.duration_since(*t) < PUT_LEASE);
        let planned = &self.planned;
        self.planners.retain(|b, _| planned.contains_key(b));
        let held: HashSet<&str> = self
            .catalog
            .datasets
            .values()
            .flat_map(|d| d.blocks())
            .filter(|b| b.replicas.contains(&uid) || b.corrupt.iter().any(|c| c.uid == uid))
            .map(|b| b.id.as_str())
            .collect();
        let mut deletes = self.orphans(blocks);
        let mut unknown = Vec::new();
        for b in blocks {
            let known = held.contains(b.as_str())
                || self.planned.contains_key(b)
                || output_block_job(b)
                    .is_some_and(|j| self.jobs.get(&j).is_some_and(Job::is_running))
                || deletes.contains(b);
            if !known {
                unknown.push(b.clone());
            }
        }
        self.unknown
            .retain(|(u, b), _| *u != uid || unknown.contains(b));
        for b in unknown {
            let since = *self.unknown.entry((uid.clone(), b.clone())).or_insert(now);
            if now.duration_since(since) >= grace {
                tracing::info!("deleting orphan block {b} on {uid}");
                self.unknown.remove(&(uid.clone(), b.clone()));
                deletes.push(b);
            }
        }
        if let Some(w) = self.workers.get_mut(&worker) {
            w.deletes.extend(deletes);
        }
        self.missing_replicas(&uid, blocks);
    }

    /// Marks the replicas the catalog places on `uid` that its block
    /// report lacks (deleted, or a disk replaced) as damaged.
    pub(super) fn missing_replicas(&mut self, uid: &str, reported: &[String]) {
        let reported: HashSet<&str> = reported.iter().map(String::as_str).collect();
        let settled = self.at.ms.saturating_sub(REPORT_GUARD_MS);
        let missing: Vec<String> = self
            .catalog
            .datasets
            .values()
            .filter(|d| d.created_ms <= settled)
            .flat_map(|d| d.blocks())
            .filter(|b| b.replicas.iter().any(|u| u == uid) && !reported.contains(b.id.as_str()))
            .map(|b| b.id.to_string())
            .collect();
        for block in missing {
            self.mark_corrupt(&proto::CorruptReplica {
                block,
                worker: uid.to_owned(),
                addr: String::new(),
                detail: "block file missing (block report)".into(),
                at_ms: self.at.ms,
            });
        }
    }
}

/// The error of a job whose block has no intact replica left, with the
/// evidence against each damaged one.
pub(super) fn no_intact_replica(
    b: &BlockMeta,
    input: &str,
    workers: &[proto::WorkerInfo],
) -> String {
    let name = |uid: &str| match workers.iter().rev().find(|w| w.uid == uid) {
        Some(w) => format!("worker {} ({})", w.id, w.data_addr),
        None => format!("worker {uid}"),
    };
    let mut why: Vec<String> = b
        .corrupt
        .iter()
        .map(|c| format!("{}: {}", name(&c.uid), c.detail))
        .collect();
    why.extend(b.replicas.iter().map(|u| format!("{}: not live", name(u))));
    format!(
        "block {} of data set {input} has no intact replica ({})",
        b.id,
        why.join("; ")
    )
}
