//! Which task an offer takes: delay scheduling by missed offers over the
//! locality levels, cache-local maps first, ARTS for reduces, and backups
//! of stragglers. Reads the job; only a declined map slot's count changes.

use std::collections::BTreeSet;
use std::time::Instant;

use sluice_proto::ids::TaskKind;

use super::{Job, PREFER_SCAN};
use crate::arts::{JobProgress, ReduceScheduler};
use crate::config::Settings;
use crate::input::MapInput;
use crate::sched::locality::{
    block_level, cached_anywhere, holders_level, Asker, Locality, Topology,
};
use crate::sched::task::{Pick, MAP, REDUCE};

impl Job {
    /// The next task of `kind` for `w`, if any. Declining a map slot
    /// counts a missed offer.
    pub fn pick(
        &mut self,
        w: &Asker<'_>,
        kind: TaskKind,
        s: &Settings,
        now: Instant,
        topo: &Topology,
    ) -> Option<Pick> {
        if kind == MAP {
            return self.pick_map(w, s, now, topo);
        }
        if self.map_only {
            return None;
        }
        let maps_done = self.maps_done();
        let reduce = |index, speculative| Pick {
            kind: REDUCE,
            index,
            level: Locality::Any,
            speculative,
        };
        let usable = |i: &usize| {
            self.queues.look();
            let t = &self.reduces[*i];
            t.pending() && t.may_run_on(w)
        };
        match self.reduce_scheduler.unwrap_or(s.reduce) {
            ReduceScheduler::SlowStart(f) if maps_done < f => return None,
            ReduceScheduler::SlowStart(_) => {
                if let Some(i) = self.queues.waiting(REDUCE).find(usable) {
                    return Some(reduce(i, false));
                }
            }
            ReduceScheduler::Arts => {
                let open: Vec<usize> = self.queues.waiting(REDUCE).filter(usable).collect();
                if !open.is_empty() {
                    return self.pick_arts(w, s, &open, now).map(|i| reduce(i, false));
                }
            }
        }
        self.straggler(REDUCE, w, s, now).map(|i| reduce(i, true))
    }

    /// The fraction of its maps done (1 when it has none).
    fn maps_done(&self) -> f64 {
        if self.maps.is_empty() {
            1.0
        } else {
            self.done(MAP) as f64 / self.maps.len() as f64
        }
    }

    /// Tasks waiting for a slot that an offer may start: its pending
    /// maps, and its pending reduces once they may start (slow start
    /// reached; under ARTS, which decides slot by slot, always).
    pub fn startable(&self, s: &Settings) -> usize {
        let maps = self.pending(MAP);
        if self.map_only {
            return maps;
        }
        let reduces = match self.reduce_scheduler.unwrap_or(s.reduce) {
            ReduceScheduler::SlowStart(f) if self.maps_done() < f => 0,
            _ => self.pending(REDUCE),
        };
        maps + reduces
    }

    /// ARTS's partition for `w` of `open`, if it starts one now: one homed
    /// elsewhere (its copy would end sooner there, [`crate::arts::homed`])
    /// waits until the job has waited, since it last started a reduce at
    /// home, as long as copying the partition to `w`'s data center would
    /// take.
    pub(super) fn pick_arts(
        &mut self,
        w: &Asker<'_>,
        s: &Settings,
        open: &[usize],
        now: Instant,
    ) -> Option<usize> {
        let dc = &w.place.datacenter;
        let progress = self.progress(w);
        let (i, _) = crate::arts::decide(&progress, dc, open, &s.links);
        let (i, queued) = (i?, progress.queued);
        let by_dc = &self.map_outputs.by_dc;
        if crate::arts::homed(by_dc, &queued, dc, i, &s.links) {
            self.remote_wait = None;
            return Some(i);
        }
        let since = *self.remote_wait.get_or_insert(now);
        let copy = crate::arts::copy_time(by_dc, &queued, i, dc, &s.links);
        (now.saturating_duration_since(since).as_secs_f64() >= copy).then_some(i)
    }

    /// What ARTS knows of this job, for a slot of `w`.
    pub(super) fn progress(&self, w: &Asker<'_>) -> JobProgress<'_> {
        let o = &self.map_outputs;
        JobProgress {
            total_maps: self.maps.len(),
            completed_maps: self.done(MAP),
            running_maps: self.running(MAP),
            map_seconds: o.seconds,
            map_slots: w.map_slots,
            map_input: o.input,
            map_output: o.output,
            reduces: self.reduces.len(),
            running_reduces: self.running(REDUCE),
            output: &o.by_dc,
            queued: crate::arts::Queued::of(&o.by_dc, self.copying()),
        }
    }

    /// The partitions its running reduce attempts copy, and where: one
    /// attempt a partition (a backup copies what the first does).
    pub(super) fn copying(&self) -> impl Iterator<Item = (usize, &str)> {
        self.reduces
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.running().next().map(|a| (i, &*a.datacenter)))
    }

    pub(super) fn pick_map(
        &mut self,
        w: &Asker<'_>,
        s: &Settings,
        now: Instant,
        topo: &Topology,
    ) -> Option<Pick> {
        let map = |index, level, speculative| Pick {
            kind: MAP,
            index,
            level,
            speculative,
        };
        let dc_ok = |level: Locality| !s.dc_local_maps || level < Locality::Any;
        let best = self
            .best_pending(w, topo)
            .filter(|(level, _)| dc_ok(*level));
        let Some((level, i)) = best else {
            return self
                .straggler(MAP, w, s, now)
                .map(|i| map(i, self.level(i, w, topo), true))
                .filter(|p| dc_ok(p.level));
        };
        if level <= self.allowed(s, topo) {
            if level <= Locality::Node {
                self.missed_offers = 0;
            }
            return Some(map(i, level, false));
        }
        if let Some(i) = self.unplaceable(w, topo) {
            let p = map(i, self.level(i, w, topo), false);
            if dc_ok(p.level) {
                return Some(p);
            }
        }
        self.missed_offers += 1;
        None
    }

    /// Whether a pending map's block is cached on a live worker: through
    /// the open maps or the cached blocks, whichever are fewer.
    pub(super) fn pending_cached(&self, topo: &Topology) -> bool {
        let q = &self.queues;
        if q.waiting_count(MAP) <= topo.cached_count() {
            return q.waiting(MAP).any(|i| {
                q.look();
                self.maps[i].pending() && cached_anywhere(&self.inputs[i], topo)
            });
        }
        topo.cached_blocks().any(|b| {
            q.reading(b).iter().any(|&i| {
                q.look();
                self.maps[i].pending()
            })
        })
    }

    /// The lowest open map `w` may run cache-local: found through the open
    /// maps or the blocks `w` caches, whichever are fewer.
    pub(super) fn cache_local(&self, w: &Asker<'_>, topo: &Topology) -> Option<usize> {
        let q = &self.queues;
        let mine = topo.cached_by(w.uid);
        if mine.is_empty() {
            return None;
        }
        if q.waiting_count(MAP) <= mine.len() {
            return q
                .waiting(MAP)
                .find(|&i| self.fits(i, w, topo, Locality::Cache));
        }
        let candidates: BTreeSet<usize> = mine
            .iter()
            .flat_map(|b| q.reading(b).iter().copied())
            .filter(|&i| q.is_open(MAP, i))
            .collect();
        candidates
            .into_iter()
            .find(|&i| self.fits(i, w, topo, Locality::Cache))
    }

    /// The pending map `w` may run that is closest to its input there,
    /// the lowest index among equals; among equals too, one whose blocks
    /// no other worker caches (leaving the cached ones to the workers that
    /// cache them), looking at up to [`PREFER_SCAN`] of them. Candidates
    /// come from the job's queues, level by level: maps reading blocks `w`
    /// caches, maps `w` holds (and those reading nothing), maps held in
    /// its rack, in its data center, then any open map.
    pub(super) fn best_pending(&self, w: &Asker<'_>, topo: &Topology) -> Option<(Locality, usize)> {
        let q = &self.queues;
        if q.waiting_count(MAP) == 0 {
            // Every candidate below is a waiting map: at a job's tail,
            // with every map running, an offer looks no further.
            return None;
        }
        if let Some(i) = self.cache_local(w, topo) {
            return Some((Locality::Cache, i));
        }
        let node = [
            self.first(q.held_by(w.uid), w, topo, Locality::Node),
            self.first(q.anywhere(), w, topo, Locality::Node),
        ];
        if let Some(i) = node.into_iter().flatten().min() {
            return Some((Locality::Node, i.1));
        }
        for level in [Locality::Rack, Locality::Datacenter] {
            let best = |u: &str| {
                q.walk();
                self.first(q.held_by(u), w, topo, level)
            };
            // The shorter list: the workers holding waiting maps, or the
            // live workers near `w` (5,000 of them in a large cluster).
            let near = if q.holder_count() < topo.len() {
                q.holders()
                    .filter(|u| topo.is_near(w, u, level))
                    .filter_map(best)
                    .min()
            } else {
                topo.near(w, level).filter_map(best).min()
            };
            if let Some((_, i)) = near {
                return Some((level, i));
            }
        }
        let any = self.first(q.waiting(MAP), w, topo, Locality::Any)?;
        Some((self.level(any.1, w, topo), any.1))
    }

    /// The best of `candidates` (map indices, ascending) at `level` for
    /// `w`: `(cached elsewhere, index)` of the first one pending, allowed
    /// on `w` and at that level (at [`Locality::Any`]: at any), preferring
    /// within [`PREFER_SCAN`] of them one whose blocks no worker caches.
    pub(super) fn first(
        &self,
        candidates: impl Iterator<Item = usize>,
        w: &Asker<'_>,
        topo: &Topology,
        level: Locality,
    ) -> Option<(bool, usize)> {
        let mut found: Option<usize> = None;
        let mut seen = 0;
        for i in candidates {
            if !self.fits(i, w, topo, level) {
                continue;
            }
            if !cached_anywhere(&self.inputs[i], topo) {
                return Some((false, i));
            }
            found = found.or(Some(i));
            seen += 1;
            if seen >= PREFER_SCAN {
                break;
            }
        }
        found.map(|i| (true, i))
    }

    /// Whether map `i` is pending, may run on `w`, and is at `level` there
    /// (any level for [`Locality::Any`]). Counts a candidate looked at.
    pub(super) fn fits(&self, i: usize, w: &Asker<'_>, topo: &Topology, level: Locality) -> bool {
        self.queues.look();
        let t = &self.maps[i];
        t.pending()
            && t.may_run_on(w)
            && (level == Locality::Any || self.level(i, w, topo) == level)
    }

    /// A pending map `w` may run that waits for no locality: it failed on
    /// a damaged replica. (A map whose blocks no live worker holds fails
    /// its job at once: [`crate::state`]'s unreadable-input check.)
    pub(super) fn unplaceable(&self, w: &Asker<'_>, topo: &Topology) -> Option<usize> {
        self.queues
            .any_worker()
            .find(|&i| self.fits(i, w, topo, Locality::Any))
    }

    /// How close to its input map `i` would run on `w`: the cache level
    /// when `w` caches every block it reads, else the farthest of its
    /// blocks (each at its nearest replica).
    pub fn level(&self, i: usize, w: &Asker<'_>, topo: &Topology) -> Locality {
        if let MapInput::External(e) = &self.inputs[i] {
            // A range no live worker's host holds is as near from any
            // worker (an object store, HDFS on other hosts, or holders
            // since lost).
            if e.holders.iter().all(|u| topo.place(u).is_none()) {
                return Locality::Node;
            }
            return holders_level(&e.holders, w, topo);
        }
        let blocks = self.inputs[i].blocks();
        if blocks.is_empty() {
            // A synthetic map reads nothing: at home anywhere.
            return Locality::Node;
        }
        if blocks.iter().all(|b| topo.caches(b.id.as_str(), w.uid)) {
            return Locality::Cache;
        }
        blocks
            .iter()
            .map(|b| block_level(b, w, topo))
            .max()
            .unwrap_or(Locality::Any)
    }

    /// The worst level the job may use now, from its missed offers. A job
    /// waits for the cache level only while a block of a pending map is
    /// cached somewhere.
    pub(super) fn allowed(&self, s: &Settings, topo: &Topology) -> Locality {
        let (m, d) = (self.missed_offers, &s.delay);
        if m <= d.cache && self.pending_cached(topo) {
            Locality::Cache
        } else if m <= d.node {
            Locality::Node
        } else if m <= d.rack {
            Locality::Rack
        } else if m <= d.datacenter {
            Locality::Datacenter
        } else {
            Locality::Any
        }
    }

    /// A straggling task of `kind` worth a backup attempt on `w`: the
    /// oldest running one that has run longer than the limit.
    pub(super) fn straggler(
        &self,
        kind: TaskKind,
        w: &Asker<'_>,
        s: &Settings,
        now: Instant,
    ) -> Option<usize> {
        if !s.speculative {
            return None;
        }
        let median = self.queues.median(kind)? as f64 / 1e6;
        let limit = (median * s.spec_slowdown).max(s.spec_min.as_secs_f64());
        let tasks = self.tasks(kind);
        // Oldest first: no task after one that has run less than the
        // limit can be a straggler.
        let old = |(since, _): &(Instant, usize)| {
            now.saturating_duration_since(*since).as_secs_f64() > limit
        };
        let mut old_enough = self.queues.oldest_running(kind).take_while(old);
        let straggler = old_enough.find(|&(_, i)| {
            self.queues.look();
            let t = &tasks[i];
            let mut running = t.running();
            match (running.next(), running.next()) {
                (Some(a), None) => {
                    t.done.is_none()
                        && a.worker != w.id
                        && !t.attempts.iter().any(|a| a.speculative)
                        && a.seconds(now) > limit
                }
                _ => false,
            }
        });
        straggler.map(|(_, i)| i)
    }
}
