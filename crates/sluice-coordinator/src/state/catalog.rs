//! The catalog: this step's write and its outcome, puts (planned blocks,
//! commits, abandons), removals, and orphaned blocks.

use std::collections::{HashMap, HashSet};

use crate::sched::Job;
use crate::store::{Node, Writer};
use sluice_proto::catalog::{BlockMeta, DatasetMeta};
use sluice_proto::ids::output_block_job;
use sluice_proto::proto;

use super::workers::node;

use super::{Answer, CatalogWrite, Refusal, State, Then};

impl State {
    /// The catalog write of this step (one per step, however many
    /// changes it holds).
    pub(super) fn write(&mut self) -> &mut CatalogWrite {
        self.write.get_or_insert_with(CatalogWrite::default)
    }

    /// Puts a data set in the catalog (replacing any of its name) as part
    /// of this step's write; returns the one replaced.
    pub(super) fn put_dataset(&mut self, meta: DatasetMeta) -> Option<DatasetMeta> {
        let name = meta.name.clone();
        let old = self.catalog.datasets.insert(name.clone(), meta);
        self.write().undo.push((name, old.clone()));
        old
    }

    /// The outcome of a catalog write: what follows it, or its undoing.
    pub(super) fn catalog_saved(
        &mut self,
        w: CatalogWrite,
        result: Result<(), String>,
    ) -> Result<Answer, Refusal> {
        if let Err(e) = result {
            tracing::error!("writing the catalog: {e}");
            for (name, old) in w.undo.into_iter().rev() {
                match old {
                    Some(o) => self.catalog.datasets.insert(name, o),
                    None => self.catalog.datasets.remove(&name),
                };
            }
            if let Some(d) = w.directives {
                self.catalog.cache_directives = d;
            }
            if let Some(u) = w.users {
                self.catalog.users = u;
            }
            for t in w.then {
                if let Then::Commit { job, .. } = t {
                    if let Some(j) = self.jobs.get_mut(&job) {
                        j.commit_failed(format!("committing the output: {e}"), self.at.now);
                    }
                }
            }
            return if w.client {
                Err(Refusal::CatalogUnwritten(e))
            } else {
                Ok(Answer::Done)
            };
        }
        for t in w.then {
            match t {
                Then::Commit { job, replaced } => {
                    if let Some(old) = replaced {
                        self.delete_dataset_blocks(&old);
                    }
                    if let Some(j) = self.jobs.get_mut(&job) {
                        j.committed(self.at.now);
                    }
                }
                Then::Delete(d) => self.delete_dataset_blocks(&d),
                Then::Unplan(ids) => {
                    for b in ids {
                        self.planned.remove(&b);
                        self.planners.remove(&b);
                    }
                }
            }
        }
        Ok(Answer::Done)
    }

    /// Where a put's blocks go: new block ids (the catalog's counter is
    /// written before they are handed out), each with its targets.
    pub(super) fn plan_blocks(
        &mut self,
        r: &proto::PlanBlocksRequest,
        user: Option<String>,
    ) -> Result<proto::PlanBlocksReply, Refusal> {
        if self.alive().next().is_none() {
            return Err(Refusal::NoLiveWorkers);
        }
        let live: Vec<proto::WorkerInfo> = self
            .alive()
            .filter(|w| !r.exclude.contains(&w.info.uid))
            .map(|w| w.info.clone())
            .collect();
        if live.is_empty() {
            return Ok(proto::PlanBlocksReply::default());
        }
        let nodes: Vec<Node> = live.iter().map(node).collect();
        let repl = (r.replication.max(1) as usize).min(live.len());
        let mut placed = HashMap::new();
        let mut blocks = Vec::new();
        let cfg = self.cfg.clone();
        for _ in 0..r.blocks {
            let writer = Writer {
                host: &r.writer_host,
                datacenter: &r.writer_datacenter,
                block_size: r.block_size,
            };
            let uids = cfg.placement.place(&nodes, &writer, repl, &mut placed);
            let targets = uids
                .iter()
                .filter_map(|u| live.iter().find(|w| &w.uid == u).cloned())
                .collect();
            let id = self.catalog.new_block_id(self.epoch).to_string();
            self.planned.insert(id.clone(), self.at.now);
            if let Some(u) = &user {
                self.planners.insert(id.clone(), u.clone());
            }
            blocks.push(proto::Placement {
                id,
                targets,
                capability: String::new(),
            });
        }
        self.write().client = true;
        Ok(proto::PlanBlocksReply { blocks })
    }

    /// A put's data set enters the catalog (its blocks must have been
    /// planned by this coordinator); one it replaces loses its blocks.
    pub(super) fn commit_dataset(
        &mut self,
        mut d: DatasetMeta,
        overwrite: bool,
    ) -> Result<(), Refusal> {
        d.created_ms = self.at.ms;
        if self.catalog.datasets.contains_key(&d.name) && !overwrite {
            return Err(Refusal::DatasetExists(d.name));
        }
        // Blocks this coordinator did not plan were planned before a
        // restart: their put's reservation is gone, and with it the
        // assurance that none was deleted as an orphan meanwhile.
        if let Some(b) = d
            .blocks()
            .find(|b| !self.planned.contains_key(b.id.as_str()))
        {
            return Err(Refusal::NotPlanned(b.id.to_string()));
        }
        let ids = d.blocks().map(|b| b.id.to_string()).collect();
        let old = self.put_dataset(d);
        let w = self.write();
        w.client = true;
        w.then.push(Then::Unplan(ids));
        w.then.extend(old.map(Then::Delete));
        Ok(())
    }

    /// A put gives up blocks: those handed to it and never committed are
    /// deleted everywhere.
    pub(super) fn abandon_blocks(&mut self, ids: Vec<String>) {
        let cataloged: HashSet<String> = self
            .catalog
            .datasets
            .values()
            .flat_map(|d| d.blocks().map(|b| b.id.to_string()))
            .collect();
        let ids: Vec<String> = ids
            .into_iter()
            .filter(|b| self.planned.remove(b).is_some() && !cataloged.contains(b))
            .collect();
        for b in &ids {
            self.planners.remove(b);
        }
        for w in self.workers.values_mut().filter(|w| w.info.alive) {
            w.deletes.extend(ids.iter().cloned());
        }
    }

    /// A data set leaves the catalog; its blocks go once that is written.
    pub(super) fn remove_dataset(&mut self, name: &str) -> Result<(), Refusal> {
        let d = self
            .catalog
            .datasets
            .remove(name)
            .ok_or_else(|| Refusal::NoDataset(name.to_string()))?;
        if self
            .catalog
            .cache_directives
            .iter()
            .any(|c| c.dataset == d.name)
        {
            self.edit_directives(|all| all.retain(|c| c.dataset.as_str() != name));
        }
        let w = self.write();
        w.client = true;
        w.undo.push((d.name.clone(), Some(d.clone())));
        w.then.push(Then::Delete(d));
        Ok(())
    }

    pub(super) fn dataset_blocks(
        &self,
        name: &str,
    ) -> std::result::Result<Vec<BlockMeta>, Refusal> {
        let d = self
            .catalog
            .datasets
            .get(name)
            .ok_or_else(|| Refusal::NoDataset(name.to_string()))?;
        Ok(d.blocks().cloned().collect())
    }

    /// Of the blocks a registering worker holds, the task outputs nothing
    /// will use: of a job not running here, in no data set. (A worker
    /// that died between copying an output block and reporting it, or
    /// a job that a coordinator restart ended, leaves such blocks.)
    pub(super) fn orphans(&self, blocks: &[String]) -> Vec<String> {
        let cataloged: HashSet<&str> = self
            .catalog
            .datasets
            .values()
            .flat_map(|d| d.blocks().map(|b| b.id.as_str()))
            .collect();
        blocks
            .iter()
            .filter(|b| {
                output_block_job(b).is_some_and(|j| {
                    !self.jobs.get(&j).is_some_and(Job::is_running)
                        && !cataloged.contains(b.as_str())
                })
            })
            .cloned()
            .collect()
    }

    pub(super) fn delete_dataset_blocks(&mut self, d: &DatasetMeta) {
        let blocks: Vec<BlockMeta> = d.blocks().cloned().collect();
        for b in blocks {
            for uid in &b.replicas {
                if let Some(w) = self.worker_by_uid_mut(uid) {
                    w.deletes.push(b.id.to_string());
                }
            }
        }
    }
}
