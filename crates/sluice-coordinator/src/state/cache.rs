//! The block cache's directives: pinning blocks on workers, adding and
//! removing directives, listing them.

use std::collections::HashSet;

use sluice_proto::catalog::BlockMeta;
use sluice_proto::ids::DatasetName;
use sluice_proto::ids::WorkerId;
use sluice_proto::proto;

use super::{Refusal, State};

impl State {
    /// The blocks cache directives pin on `worker`: for each directive,
    /// each block it names that the worker holds a replica of, when the
    /// directive names the worker, or when the worker is the block's
    /// first live holder (one cached replica per block, as HDFS's default
    /// cache replication of 1).
    pub(super) fn pins_for(&self, worker: WorkerId) -> Vec<proto::BlockInfo> {
        let Some(uid) = self.workers.get(&worker).map(|w| w.info.uid.as_str()) else {
            return Vec::new();
        };
        if self.catalog.cache_directives.is_empty() {
            return Vec::new();
        }
        // Asked on every heartbeat: the live set and the blocks taken are
        // looked up, not searched.
        let live: HashSet<&str> = self.alive().map(|w| w.info.uid.as_str()).collect();
        let mut taken: HashSet<&str> = HashSet::new();
        let mut out: Vec<proto::BlockInfo> = Vec::new();
        for d in &self.catalog.cache_directives {
            let Some(set) = self.catalog.datasets.get(&d.dataset) else {
                continue;
            };
            for (i, b) in set.blocks().enumerate() {
                if d.block.is_some_and(|n| n as usize != i) || taken.contains(b.id.as_str()) {
                    continue;
                }
                let target = match &d.worker {
                    Some(w) => b.replicas.iter().find(|u| *u == w),
                    None => b.replicas.iter().find(|u| live.contains(u.as_str())),
                };
                if target.is_some_and(|t| t == uid) {
                    taken.insert(b.id.as_str());
                    out.push(b.into());
                }
            }
        }
        out
    }

    /// A new cache directive, checked: its data set exists, its block
    /// index is in range, its worker is live and holds a replica of a
    /// block it names.
    pub(super) fn cache_add(
        &mut self,
        r: proto::CacheAddRequest,
    ) -> Result<proto::CacheDirective, Refusal> {
        let name =
            DatasetName::new(r.dataset.clone()).map_err(|e| Refusal::Invalid(e.to_string()))?;
        let set = self
            .catalog
            .datasets
            .get(&name)
            .ok_or_else(|| Refusal::NoDataset(name.to_string()))?;
        let blocks: Vec<&BlockMeta> = set.blocks().collect();
        let block = r.has_block.then_some(r.block);
        if let Some(n) = block.filter(|&n| n as usize >= blocks.len()) {
            return Err(Refusal::NoBlock {
                dataset: name,
                blocks: blocks.len(),
                block: n,
            });
        }
        let worker = match r.worker.as_str() {
            "" => None,
            w => {
                let found = self
                    .alive()
                    .find(|x| x.info.uid == w || x.info.id.to_string() == w)
                    .ok_or_else(|| Refusal::NoLiveWorker(w.to_string()))?;
                let uid = found.info.uid.clone();
                let named = blocks
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| block.is_none_or(|n| n as usize == *i));
                if !named.clone().any(|(_, b)| b.replicas.contains(&uid)) {
                    return Err(Refusal::NoReplica {
                        worker: w.to_string(),
                        dataset: name,
                        block,
                    });
                }
                Some(uid)
            }
        };
        self.catalog.next_directive += 1;
        let d = sluice_proto::catalog::CacheDirective {
            id: self.catalog.next_directive,
            dataset: name,
            block,
            worker,
            pool: if r.pool.is_empty() {
                "default".into()
            } else {
                r.pool
            },
            created_ms: self.at.ms,
        };
        let reply = (&d).into();
        self.edit_directives(|all| all.push(d));
        Ok(reply)
    }

    /// Removes a directive by id, or every directive of a data set; their
    /// blocks are unpinned on the next heartbeats.
    pub(super) fn cache_remove(&mut self, r: &proto::CacheRemoveRequest) -> Result<u32, Refusal> {
        let before = self.catalog.cache_directives.len();
        let named = |d: &sluice_proto::catalog::CacheDirective| {
            d.id == r.id || (r.id == 0 && d.dataset.as_str() == r.dataset)
        };
        self.edit_directives(|all| all.retain(|d| !named(d)));
        let removed = (before - self.catalog.cache_directives.len()) as u32;
        if removed == 0 {
            return Err(if r.id > 0 {
                Refusal::NoDirective(r.id)
            } else {
                Refusal::NoDirectiveFor(r.dataset.clone())
            });
        }
        Ok(removed)
    }

    /// Changes the cache directives as part of this step's write (a
    /// client's), keeping the list before it to restore if the write
    /// fails.
    pub(super) fn edit_directives(
        &mut self,
        f: impl FnOnce(&mut Vec<sluice_proto::catalog::CacheDirective>),
    ) {
        let before = self.catalog.cache_directives.clone();
        f(&mut self.catalog.cache_directives);
        let w = self.write();
        w.client = true;
        w.directives.get_or_insert(before);
    }

    /// Cache directives, and what each live worker's cache holds.
    pub(crate) fn cache_list(&self) -> proto::CacheListReply {
        proto::CacheListReply {
            directives: self
                .catalog
                .cache_directives
                .iter()
                .map(Into::into)
                .collect(),
            workers: self
                .alive()
                .map(|w| proto::WorkerCache {
                    worker: Some(w.info.clone()),
                    cache: Some(w.cache.clone()),
                })
                .collect(),
        }
    }
}
