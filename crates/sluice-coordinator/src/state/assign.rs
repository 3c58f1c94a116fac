//! Assignment: a worker's free slots offered to jobs in the policy's
//! order, slot by slot, the pools, and fair preemption.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::input::MapInput;
use crate::policy::{JobView, PoolConfig};
use crate::rowfile;
use crate::sched::{task_name, Asker, Job, Topology, MAP, REDUCE};
use sluice_proto::catalog::{BlockMeta, Catalog};
use sluice_proto::ids::{JobId, TaskKind, WorkerId};
use sluice_proto::proto;

use super::workers::place_of;

use super::{Members, State};

impl State {
    /// Fair preemption: pools short of their minimum share for `timeout`
    /// take slots back from pools over their share, the youngest attempts
    /// first (they lose the least work). Returns whether any was ended.
    pub(super) fn preempt(&mut self, timeout: Duration) -> bool {
        let now = self.at.now;
        let total = self.total_slots();
        let mut changed = false;
        for kind in [MAP, REDUCE] {
            let views = self.views(kind);
            let deficits = self.policy.deficits(&views, total);
            self.starved_since
                .retain(|(p, k), _| *k != kind || deficits.contains_key(p));
            let mut owed = 0;
            for (pool, n) in &deficits {
                let since = *self
                    .starved_since
                    .entry((pool.clone(), kind))
                    .or_insert(now);
                if now.duration_since(since) >= timeout {
                    owed += n;
                }
            }
            if owed == 0 {
                continue;
            }
            let mut excess = self.policy.excesses(&views, total);
            let mut victims: Vec<(Instant, JobId, usize, u32)> = self
                .jobs
                .values()
                .filter(|j| j.is_running() && excess.contains_key(j.pool()))
                .flat_map(|j| {
                    j.queues().running_tasks(kind).flat_map(move |i| {
                        let t = &j.tasks(kind)[i];
                        t.running().map(move |a| (a.started, j.id(), i, a.id))
                    })
                })
                .collect();
            victims.sort_by_key(|v| std::cmp::Reverse(v.0));
            for (_, id, i, attempt) in victims {
                let Some(job) = self.jobs.get_mut(&id) else {
                    continue;
                };
                let Some(left) = excess.get_mut(job.pool()).filter(|n| **n > 0) else {
                    continue;
                };
                let Some(w) = job.preempt(kind, i, attempt, now) else {
                    continue;
                };
                *left -= 1;
                tracing::info!(
                    "preempted job {id} task {} attempt {attempt}",
                    task_name(kind, i)
                );
                if let Some(ws) = self.workers.get_mut(&w) {
                    ws.kills.push(proto::TaskId {
                        job: id.0,
                        kind: kind.wire(),
                        index: i as u32,
                        attempt,
                    });
                }
                changed = true;
                owed -= 1;
                if owed == 0 {
                    break;
                }
            }
            for pool in deficits.keys() {
                self.starved_since.remove(&(pool.clone(), kind));
            }
        }
        changed
    }

    /// Hands `worker` tasks for its free slots.
    pub(super) fn assign(&mut self, worker: WorkerId) -> Vec<proto::TaskAssignment> {
        let cfg = self.cfg.clone();
        let s = &cfg.settings;
        let Some(w) = self.workers.get(&worker) else {
            return Vec::new();
        };
        let (uid, addr, slots) = (w.info.uid.clone(), w.info.data_addr.clone(), w.info.slots);
        let place = place_of(&w.info);
        let members = self.members();
        let topo = Topology::of(&members.places).with_caches(
            // The workers field only: jobs are changed while it is held.
            (self.caching.iter())
                .filter_map(|id| self.workers.get(id))
                .filter(|w| w.info.alive)
                .map(|w| (w.info.uid.as_str(), &w.cached, w.cache.blocks.as_slice())),
        );
        let live = &members.addrs;
        let asker = Asker {
            id: worker,
            uid: &uid,
            addr: &addr,
            place: &place,
            live: live.len(),
            map_slots: members.slots,
        };
        let now = self.at.now;
        let mut out = Vec::new();
        for kind in [MAP, REDUCE] {
            let mut busy = self.running_on(worker, kind);
            let total = members.slots;
            // Each free slot goes to the first job in the policy's order
            // that takes it; the order is asked again for the next slot.
            'slots: while busy < slots as usize {
                let order = self.policy.order(&self.views(kind), kind, total);
                for id in order {
                    let Some(job) = self.jobs.get_mut(&id) else {
                        continue;
                    };
                    let Some(pick) = job.pick(&asker, kind, s, now, &topo) else {
                        continue;
                    };
                    let attempt = job.launch(pick, &asker, now);
                    let at = (pick.kind, pick.index, attempt);
                    let catalog = &self.catalog;
                    out.push(assignment(job, at, &asker, live, &topo, catalog));
                    busy += 1;
                    continue 'slots;
                }
                break;
            }
        }
        out
    }

    /// The live workers, built again when the set changed since the last
    /// offer: building them costs the number of workers, and every
    /// heartbeat offers its worker's slots.
    fn members(&mut self) -> Arc<Members> {
        if let Some(m) = &self.members {
            return m.clone();
        }
        let m = Arc::new(Members {
            addrs: (self.alive())
                .map(|w| (w.info.uid.clone(), w.info.data_addr.clone()))
                .collect(),
            places: (self.alive())
                .map(|w| (w.info.uid.clone(), place_of(&w.info)))
                .collect(),
            slots: self.total_slots(),
        });
        self.members = Some(m.clone());
        m
    }

    /// The running jobs as the policy sees them, for `kind` slots.
    pub(super) fn views(&self, kind: TaskKind) -> Vec<JobView> {
        self.jobs
            .values()
            .filter(|j| j.is_running())
            .map(|j| {
                let running = j.running(kind);
                let pending = j.pending(kind);
                JobView {
                    id: j.id(),
                    pool: j.pool().to_owned(),
                    running,
                    demand: running + pending,
                }
            })
            .collect()
    }

    /// Tasks of running jobs waiting for a slot that an offer may start.
    pub(super) fn waiting_tasks(&self) -> usize {
        let s = &self.cfg.settings;
        (self.jobs.values().filter(|j| j.is_running()))
            .map(|j| j.startable(s))
            .sum()
    }

    /// Slots of one kind on the live workers.
    pub(crate) fn total_slots(&self) -> usize {
        self.alive().map(|w| w.info.slots as usize).sum()
    }

    /// The pools with their use now.
    pub(crate) fn pool_list(&self) -> proto::PoolList {
        let maps = self.views(MAP);
        let reduces = self.views(REDUCE);
        let configs: BTreeMap<String, PoolConfig> = self.policy.pools().into_iter().collect();
        let mut names: Vec<String> = configs.keys().cloned().collect();
        names.extend(maps.iter().map(|j| j.pool.clone()));
        names.sort();
        names.dedup();
        let sum = |v: &[JobView], name: &str| {
            v.iter()
                .filter(|j| j.pool == name)
                .map(|j| j.running as u32)
                .sum()
        };
        let pools = names
            .iter()
            .map(|name| {
                let c = configs.get(name).cloned().unwrap_or_default();
                proto::PoolInfo {
                    name: name.clone(),
                    weight: c.weight,
                    min_share: c.min_share as u32,
                    max_share: c.max_share,
                    mode: format!("{:?}", c.mode).to_lowercase(),
                    running_maps: sum(&maps, name),
                    running_reduces: sum(&reduces, name),
                    jobs: maps.iter().filter(|j| &j.pool == name).count() as u32,
                }
            })
            .collect();
        let slots = self.total_slots() as u32;
        proto::PoolList {
            scheduler: self.policy.name().into(),
            pools,
            map_slots: slots,
            reduce_slots: slots,
        }
    }

    /// Running attempts of `kind` of running jobs on `worker`: a look-up
    /// a job, kept by each job's queues as attempts start and stop.
    pub(super) fn running_on(&self, worker: WorkerId, kind: TaskKind) -> usize {
        self.jobs
            .values()
            .filter(|j| j.is_running())
            .map(|j| j.queues().running_on(kind, worker))
            .sum()
    }
}

pub(super) fn assignment(
    job: &Job,
    (kind, i, attempt): (TaskKind, usize, u32),
    w: &Asker<'_>,
    live: &HashMap<String, String>,
    topo: &Topology,
    catalog: &Catalog,
) -> proto::TaskAssignment {
    // Other holders' addresses, the nearest first: its rack, its data
    // center, then across the WAN (reads prefer the reader's data center).
    let sources = |b: &BlockMeta| {
        let mut near: Vec<(u8, &String)> = b
            .replicas
            .iter()
            .filter(|u| *u != w.uid)
            .filter_map(|u| {
                let addr = live.get(u)?;
                let d = match topo.place(u) {
                    Some(p) if p == w.place => 0,
                    Some(p) if p.datacenter == w.place.datacenter => 1,
                    _ => 2,
                };
                Some((d, addr))
            })
            .collect();
        near.sort_by_key(|(d, _)| *d);
        near.into_iter().map(|(_, a)| a.clone()).collect()
    };
    let mut a = proto::TaskAssignment {
        task: Some(proto::TaskId {
            job: job.id().0,
            kind: kind.wire(),
            index: i as u32,
            attempt,
        }),
        request: job.encoded().to_vec(),
        job_token: job.token().to_vec(),
        reducers: job.reducers(),
        maps: job.maps().len() as u32,
        no_admit: !job.request().admits_to_cache(),
        ..Default::default()
    };
    // Only a map's index names an input (a job may have more reducers
    // than maps).
    let input = (kind == MAP).then(|| &job.inputs()[i]);
    if let Some(MapInput::External(e)) = input {
        a.external = Some(proto::ExternalSplit {
            url: e.url.clone(),
            start: e.start,
            end: e.end,
        });
    }
    if let Some(input) = input {
        let r = job.request();
        let source = |b: &BlockMeta| proto::BlockSource {
            block: Some(b.into()),
            sources: sources(b),
            file: None,
        };
        let rows = rowfile::RowFiles::of(catalog, &r.input, r.engine.input_format);
        a.inputs = input
            .blocks()
            .iter()
            .map(|b| proto::BlockSource {
                file: rows.file_of(b).map(|f| proto::RowFile {
                    name: f.name.clone(),
                    blocks: f.blocks.iter().map(source).collect(),
                }),
                ..source(b)
            })
            .collect();
    }
    a.side = job
        .side()
        .iter()
        .map(|(name, blocks)| proto::SideInput {
            dataset: name.clone(),
            blocks: blocks
                .iter()
                .map(|b| proto::BlockSource {
                    block: Some(b.into()),
                    sources: b
                        .replicas
                        .iter()
                        .filter_map(|u| live.get(u).cloned())
                        .collect(),
                    file: None,
                })
                .collect(),
        })
        .collect();
    if kind == REDUCE || job.map_only() {
        a.output_block = format!("j{}-{}{i}-a{attempt}", job.id().0, kind.letter());
    }
    a
}

#[cfg(test)]
mod tests {
    use super::super::tests::{config, settings, Sim, A, B, E::*};
    use crate::policy::Fifo;

    fn live(sim: &mut Sim) -> Vec<String> {
        let mut uids: Vec<String> = sim.st.members().addrs.keys().cloned().collect();
        uids.sort();
        uids
    }

    #[test]
    fn the_live_workers_are_built_again_when_one_registers_or_is_lost() {
        let mut sim = Sim::new(config(settings(), None), Box::new(Fifo));
        sim.run(A);
        sim.run(Beat("a"));
        assert_eq!(live(&mut sim), ["a"]);
        sim.run(B);
        assert_eq!(live(&mut sim), ["a", "b"]);
        assert_eq!(sim.st.members().slots, 2);
        sim.run(Silent("b"));
        sim.run(Wait(11_000));
        assert_eq!(live(&mut sim), ["a"]);
        assert_eq!(sim.st.members().slots, 1);
    }

    #[test]
    fn a_report_wakes_held_heartbeats_only_when_it_leaves_more_tasks_waiting() {
        // a's map is done and its next map takes the slot: nothing for b.
        let mut sim = Sim::new(config(settings(), None), Box::new(Fifo));
        for e in [A, B, Data("in", &[&["a"], &["a"]]), Job("in", "p", 0)] {
            sim.run(e);
        }
        sim.run(Beat("a"));
        sim.run(Done("a"));
        assert_eq!(sim.log, ["a: j1 m00000 node", "a: j1 m00001 node"]);
        assert!(!sim.offered);
        // a's map fails and is not run there again: b may take it.
        let mut sim = Sim::new(config(settings(), None), Box::new(Fifo));
        for e in [A, B, Data("in", &[&["a"]]), Job("in", "p", 0)] {
            sim.run(e);
        }
        sim.run(Beat("a"));
        sim.run(Fail("a"));
        assert_eq!(sim.log, ["a: j1 m00000 node", "a: -"]);
        assert!(sim.offered);
    }

    #[test]
    fn reduces_past_slow_start_wake_held_heartbeats() {
        // Slow start at a quarter of the maps: the first map done lets
        // the two reduces start; a takes one, b may take the other.
        let mut sim = Sim::new(config(settings(), None), Box::new(Fifo));
        for e in [
            A,
            B,
            Data("in", &[&["a"], &["a"], &["a"]]),
            Job("in", "p", 2),
        ] {
            sim.run(e);
        }
        sim.run(Beat("a"));
        assert!(!sim.offered);
        sim.run(DoneMaps("a"));
        assert_eq!(
            sim.log,
            ["a: j1 m00000 node", "a: j1 m00001 node", "a: j1 r00000 any"]
        );
        assert!(sim.offered);
    }
}
