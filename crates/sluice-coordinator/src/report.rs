//! The report of a finished job, from its tasks' winning attempts.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use sluice_proto::report::{
    AttemptSpan, Attempts, ClusterReport, Crossing, SlotPoint, Straggler, TimeSkew, WorkerPhases,
    SLOT_POINTS, TIMELINE_ATTEMPTS,
};

use crate::input::MapInput;
use crate::sched::{task_name, Attempt, AttemptState, Job, Kept, Locality, Names, MAP, REDUCE};
use sluice_proto::ids::TaskKind;
use sluice_proto::proto;

/// Every worker the coordinator knows (lost ones too): its data center by
/// uid and by data-plane address.
#[derive(Debug, Clone, Default)]
pub struct Places {
    pub by_uid: std::collections::HashMap<String, String>,
    pub by_addr: std::collections::HashMap<String, String>,
}

/// The report of `job`, whose winners' reports are in.
pub fn of(job: &Job, workers: usize, places: &Places) -> ClusterReport {
    let now = Instant::now();
    let mut r = ClusterReport {
        job_id: job.id(),
        job: job.request().job.clone(),
        pool: job.pool().to_owned(),
        request: Some(job.request().as_ref().clone()),
        input: job.input().to_owned(),
        output: job.output().to_owned(),
        state: job.state().name().into(),
        workers,
        maps: job.maps().len(),
        input_blocks: job.inputs().iter().map(|i| i.blocks().len()).sum(),
        reducers: job.reducers(),
        input_bytes: job.inputs().iter().map(MapInput::len).sum(),
        ..ClusterReport::default()
    };
    let end = job.finished().unwrap_or(now);
    r.phases.total_s = end.duration_since(job.started()).as_secs_f64();
    // By worker and by interned counter name while walking the tasks
    // (a hundred thousand of them at most a few hundred workers and
    // names); named and ordered once at the end.
    let mut per: HashMap<Arc<str>, WorkerPhases> = HashMap::new();
    let (mut counters, mut user_counters) = (IdSums::default(), IdSums::default());
    let mut reduce_bytes = Vec::new();
    for kind in [MAP, REDUCE] {
        let (mut first, mut last) = (None::<Instant>, None::<Instant>);
        let mut secs = Vec::new();
        let mut slot_s = 0.0;
        for t in job.tasks(kind) {
            for a in &t.attempts {
                count_attempt(&mut r.attempts, a, now);
                first = Some(first.map_or(a.started, |f| f.min(a.started)));
                slot_s += a.seconds(now);
            }
            let Some(a) = t.winner() else { continue };
            last = Some(last.map_or(a.ended.unwrap_or(now), |l| l.max(a.ended.unwrap_or(now))));
            secs.push(a.seconds(now));
            let none = Kept::default();
            let rep = a.report.as_deref().unwrap_or(&none);
            let w = per.entry(a.uid.clone()).or_insert_with(|| WorkerPhases {
                worker: a.uid.to_string(),
                addr: a.addr.to_string(),
                ..WorkerPhases::default()
            });
            let start_s = a
                .started
                .saturating_duration_since(job.started())
                .as_secs_f64();
            let end_s = start_s + a.seconds(now);
            if kind == MAP {
                w.map_end_s = w.map_end_s.max(end_s);
            } else {
                w.reduce_end_s = w.reduce_end_s.max(end_s);
                w.fetch_end_s = w.fetch_end_s.max(start_s + rep.fetch_seconds);
            }
            counters.add(rep.counter_ids());
            user_counters.add(rep.user_counter_ids());
            r.task_memory_bytes = r.task_memory_bytes.max(rep.memory_bytes);
            if kind == MAP {
                w.maps += 1;
                w.map_s += a.seconds(now);
                w.input_bytes += rep.input_bytes;
                // Launched local, but its replica was damaged and it
                // streamed the block from another worker: remote (any).
                let fell_back = rep.fetch_seconds > 0.0;
                let level = match a.level {
                    _ if rep.cache_hit => Locality::Cache,
                    l if fell_back && l <= Locality::Node => Locality::Any,
                    Locality::Cache => Locality::Node,
                    l => l,
                };
                if rep.cache_hit {
                    w.cache_maps += 1;
                    r.cache.maps_from_cache += 1;
                    r.cache.bytes_from_cache += rep.input_bytes;
                } else {
                    r.cache.bytes_from_disk += rep.input_bytes;
                }
                if level <= Locality::Node {
                    r.data_local_maps += 1;
                } else {
                    r.remote_maps += 1;
                }
                *r.maps_by_level.entry(level.name().into()).or_default() += 1;
            } else {
                w.reduces += 1;
                w.reduce_s += a.seconds(now);
                w.shuffle_bytes += rep.shuffle_bytes;
                r.shuffle_bytes += rep.shuffle_bytes;
                reduce_bytes.push(rep.shuffle_bytes);
            }
            if kind == REDUCE || job.map_only() {
                r.output_records += rep.output_records;
                r.output_bytes += rep.output_bytes;
            }
        }
        let span = match (first, last) {
            (Some(f), Some(l)) => l.saturating_duration_since(f).as_secs_f64(),
            _ => 0.0,
        };
        let mean = if span > 0.0 { slot_s / span } else { 0.0 };
        if kind == MAP {
            r.phases.map_s = span;
            (r.slots.map_slot_s, r.slots.mean_map_slots) = (slot_s, mean);
        } else {
            r.phases.reduce_s = span;
            (r.slots.reduce_slot_s, r.slots.mean_reduce_slots) = (slot_s, mean);
        }
        find_stragglers(&mut r.stragglers, job, kind, &mut secs, now);
    }
    r.reduce_scheduler = job.reduce_scheduler().map(|s| s.name()).unwrap_or_default();
    r.map_output_by_datacenter = job.map_outputs().total_by_dc.clone();
    r.crossings = crossings(job, places);
    r.wan_bytes = r.crossings.iter().map(Crossing::bytes).sum();
    r.slots.over_time = slots_over_time(job, end, now);
    (r.timeline, r.timeline_dropped) = timeline(job, now);
    let read = r.cache.bytes_from_cache + r.cache.bytes_from_disk;
    if read > 0 {
        r.cache.hit_ratio = r.cache.bytes_from_cache as f64 / read as f64;
    }
    r.counters = counters.named(job.names());
    r.user_counters = user_counters.named(job.names());
    r.per_worker = per.into_values().collect();
    r.per_worker.sort_by(|a, b| a.worker.cmp(&b.worker));
    r.time_skew = TimeSkew::of(&r.per_worker);
    if !reduce_bytes.is_empty() {
        let mean = reduce_bytes.iter().sum::<u64>() as f64 / reduce_bytes.len() as f64;
        let max = reduce_bytes.iter().copied().max().unwrap_or(0) as f64;
        r.receive_skew = if mean > 0.0 { max / mean } else { 1.0 };
    }
    r
}

/// Bytes that crossed data centers, per ordered pair ([`Crossing`]).
fn crossings(job: &Job, places: &Places) -> Vec<Crossing> {
    let mut pairs: BTreeMap<(String, String), Crossing> = BTreeMap::new();
    let mut add = |from: &str, to: &str, f: &dyn Fn(&mut Crossing)| {
        if from != to && !from.is_empty() && !to.is_empty() {
            let c = pairs
                .entry((from.to_owned(), to.to_owned()))
                .or_insert_with(|| Crossing {
                    from: from.to_owned(),
                    to: to.to_owned(),
                    ..Crossing::default()
                });
            f(c);
        }
    };
    // Every reduce attempt's fetches: a finished one's report, else what
    // its last heartbeat said (a killed backup across the WAN spent them).
    for r in job.reduces().iter().flat_map(|t| &t.attempts) {
        let reads: &[proto::RemoteRead] = match &r.report {
            Some(rep) if !rep.remote_reads.is_empty() => &rep.remote_reads,
            _ => &r.fetched,
        };
        for read in reads {
            let from = places.by_addr.get(&read.addr).map_or("", String::as_str);
            add(from, &r.datacenter, &|c| c.shuffle_bytes += read.bytes);
        }
    }
    for a in job.maps().iter().flat_map(|t| &t.attempts) {
        for read in a.report.iter().flat_map(|r| r.remote_reads.iter()) {
            let from = places.by_addr.get(&read.addr).map_or("", String::as_str);
            add(from, &a.datacenter, &|c| c.read_bytes += read.bytes);
        }
    }
    let tasks = if job.map_only() {
        &job.maps()
    } else {
        &job.reduces()
    };
    for a in tasks.iter().filter_map(|t| t.winner()) {
        let Some(out) = a.report.as_ref().and_then(|r| r.output.as_ref()) else {
            continue;
        };
        for uid in out.replicas.iter().filter(|u| **u != *a.uid) {
            let to = places.by_uid.get(uid).map_or("", String::as_str);
            add(&a.datacenter, to, &|c| c.replication_bytes += out.len);
        }
    }
    pairs.into_values().collect()
}

/// The slots the job's attempts held, as the mean over each of up to
/// [`SLOT_POINTS`] equal intervals from its start to `end`: each
/// attempt's overlap with an interval, over the interval's length.
fn slots_over_time(job: &Job, end: Instant, now: Instant) -> Vec<SlotPoint> {
    let total = end.saturating_duration_since(job.started()).as_secs_f64();
    if total <= 0.0 {
        return Vec::new();
    }
    let n = SLOT_POINTS.min(((total * 10.0).ceil() as usize).max(1));
    let width = total / n as f64;
    let mut points: Vec<SlotPoint> = (0..n)
        .map(|i| SlotPoint {
            t_s: i as f64 * width,
            ..SlotPoint::default()
        })
        .collect();
    for kind in [MAP, REDUCE] {
        for a in job.tasks(kind).iter().flat_map(|t| &t.attempts) {
            let from = a
                .started
                .saturating_duration_since(job.started())
                .as_secs_f64();
            let to = from + a.seconds(now);
            let first = ((from / width) as usize).min(n - 1);
            for p in points.iter_mut().skip(first) {
                let (lo, hi) = (p.t_s, p.t_s + width);
                if lo >= to {
                    break;
                }
                let held = (to.min(hi) - from.max(lo)).max(0.0) / width;
                if kind == MAP {
                    p.maps += held;
                } else {
                    p.reduces += held;
                }
            }
        }
    }
    points
}

/// The model's account of an ended job: its nodes are the workers that ran
/// its winning tasks, phase 1 lasts from submission to the last winning
/// map's end and phase 2 the rest. Seed 004's losses ([`TimeSkew`]) are
/// taken out of the phases they happen in: map stragglers out of phase 1;
/// reduce stragglers and the receive skew out of phase 2 (a reduce's
/// shuffle ends after the last map here, not inside phase 1 as in the
/// seed's engine), so the efficiency is still the ideal over the whole
/// measured time. None for a job that read nothing (a generator's
/// synthetic maps: the model has no ideal for it) or took no time.
pub fn account(r: &ClusterReport, hw: &sluice_model::Hardware) -> Option<sluice_model::Account> {
    if r.input_bytes == 0 || r.phases.total_s <= 0.0 {
        return None;
    }
    let nodes = r.per_worker.len().max(1) as f64;
    let maps_end = r
        .timeline
        .iter()
        .filter(|s| s.task.starts_with('m') && s.outcome == "succeeded")
        .map(|s| s.end_s)
        .fold(0.0, f64::max);
    let map_only = r.reducers == 0;
    let phase1 = if map_only { r.phases.total_s } else { maps_end };
    // Each loss no larger than what is left of its phase, so the phases
    // and losses still add up to the measured time.
    let skew = r.time_skew;
    let phase2 = (r.phases.total_s - phase1).max(0.0);
    let map_waits = skew.map_stragglers_s.clamp(0.0, phase1);
    let reduce_waits = skew.reduce_stragglers_s.clamp(0.0, phase2);
    let receive_skew = skew.receive_skew_s.clamp(0.0, phase2 - reduce_waits);
    let slots = r.slots.mean_map_slots.max(1.0) / nodes;
    let m = sluice_model::Measured {
        nodes,
        input: r.input_bytes as f64,
        map_output: r.shuffle_bytes as f64,
        output: r.output_bytes as f64,
        map_only,
        sort_memory: r.task_memory_bytes as f64 * slots.max(1.0),
        phase1: phase1 - map_waits,
        phase2: phase2 - reduce_waits - receive_skew,
        stragglers: map_waits + reduce_waits,
        receive_skew,
        residency: residency(r),
    };
    let a = sluice_model::account(&m, hw);
    // JSON has no NaN or infinity: a report must read back.
    (a.ideal_seconds.is_finite() && a.efficiency.is_finite() && a.slowdown.is_finite()).then_some(a)
}

/// Where a cluster job's bytes could be: the input blocks the workers'
/// block caches served come from memory; the workers do not report their
/// free memory, so spills are charged to the disk; the output is synced.
fn residency(r: &ClusterReport) -> sluice_model::Residency {
    let read = (r.cache.bytes_from_cache + r.cache.bytes_from_disk) as f64;
    sluice_model::Residency {
        input_cached: if read > 0.0 {
            r.cache.bytes_from_cache as f64 / read
        } else {
            0.0
        },
        ..sluice_model::Residency::on_disk()
    }
}

/// Every attempt of the job as a span from its start to its end (or
/// `now`), at most [`TIMELINE_ATTEMPTS`]; and how many were left out.
fn timeline(job: &Job, now: Instant) -> (Vec<AttemptSpan>, u64) {
    let mut spans = Vec::new();
    let mut dropped = 0;
    for kind in [MAP, REDUCE] {
        for (i, t) in job.tasks(kind).iter().enumerate() {
            for a in &t.attempts {
                if spans.len() == TIMELINE_ATTEMPTS {
                    dropped += 1;
                    continue;
                }
                let start_s = a
                    .started
                    .saturating_duration_since(job.started())
                    .as_secs_f64();
                spans.push(AttemptSpan {
                    task: task_name(kind, i),
                    attempt: a.id,
                    worker: a.uid.to_string(),
                    start_s,
                    end_s: start_s + a.seconds(now),
                    outcome: a.state.name().into(),
                    speculative: a.speculative,
                    level: if kind == MAP {
                        a.level.name().into()
                    } else {
                        String::new()
                    },
                });
            }
        }
    }
    (spans, dropped)
}

fn count_attempt(n: &mut Attempts, a: &Attempt, now: Instant) {
    n.launched += 1;
    n.speculative += u32::from(a.speculative);
    n.damaged_replicas += a.report.as_ref().map_or(0, |r| r.corrupt.len() as u32);
    match a.state {
        AttemptState::Failed => n.failed += 1,
        AttemptState::Killed => n.killed += 1,
        AttemptState::Lost => n.lost += 1,
        AttemptState::Running | AttemptState::Succeeded => return,
    }
    n.wasted_s += a.seconds(now);
}

fn find_stragglers(
    out: &mut Vec<Straggler>,
    job: &Job,
    kind: TaskKind,
    secs: &mut [f64],
    now: Instant,
) {
    if secs.len() < 2 {
        return;
    }
    secs.sort_by(f64::total_cmp);
    let median = secs[secs.len() / 2];
    let mut found: Vec<(usize, &Attempt)> = job
        .tasks(kind)
        .iter()
        .enumerate()
        .filter_map(|(i, t)| Some((i, t.winner()?)))
        .filter(|(_, a)| a.seconds(now) > 1.5 * median && a.seconds(now) > 0.5)
        .collect();
    // The slowest first, at most STRAGGLERS_LISTED of a phase: a report
    // stays small however many tasks ran.
    found.sort_by(|x, y| y.1.seconds(now).total_cmp(&x.1.seconds(now)));
    found.truncate(STRAGGLERS_LISTED);
    out.extend(found.into_iter().map(|(i, a)| Straggler {
        task: task_name(kind, i),
        worker: a.uid.to_string(),
        seconds: a.seconds(now),
        median_s: median,
    }));
}

/// Most stragglers a report lists per phase (the slowest).
pub const STRAGGLERS_LISTED: usize = 100;

/// Counter values summed by interned name (`None`: never reported).
#[derive(Debug, Default)]
struct IdSums(Vec<Option<u64>>);

impl IdSums {
    fn add(&mut self, pairs: impl Iterator<Item = (u32, u64)>) {
        for (id, v) in pairs {
            let i = id as usize;
            if self.0.len() <= i {
                self.0.resize(i + 1, None);
            }
            *self.0[i].get_or_insert(0) += v;
        }
    }

    /// The sums by name, of the names some attempt reported.
    fn named(&self, names: &Names) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for (id, v) in self.0.iter().enumerate() {
            if let Some(v) = v {
                *out.entry(names.name(id as u32).to_owned()).or_default() += v;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::sched::{Asker, Pick, Place};
    use sluice_proto::ids::{JobId, WorkerId};

    #[test]
    fn slots_over_time_are_the_attempts_overlap_per_interval() {
        let t0 = Instant::now();
        let s = |x: f64| t0 + Duration::from_secs_f64(x);
        let request = sluice_request::JobRequest::new("wordcount", &(), "in", "out");
        let mut job = Job::new(
            JobId(1),
            request,
            vec![MapInput::Synthetic; 2],
            1,
            [0; 32],
            t0,
        );
        let place = Place::default();
        let w = Asker {
            id: WorkerId(1),
            uid: "a",
            addr: "a:1",
            place: &place,
            live: 1,
            map_slots: 1,
        };
        let pick = |kind, index| Pick {
            kind,
            index,
            level: Locality::Node,
            speculative: false,
        };
        // Two maps over the first second, a reduce over the second.
        for (kind, i, from, to) in [
            (MAP, 0, 0.0, 1.0),
            (MAP, 1, 0.0, 1.0),
            (REDUCE, 0, 1.0, 2.0),
        ] {
            let a = job.launch(pick(kind, i), &w, s(from)) as usize;
            let at = job.attempt_mut(kind, i, a);
            at.ended = Some(s(to));
            at.state = AttemptState::Succeeded;
        }
        let points = slots_over_time(&job, s(2.0), s(2.0));
        assert_eq!(points.len(), 20);
        let near = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert!(points[..10]
            .iter()
            .all(|p| near(p.maps, 2.0) && near(p.reduces, 0.0)));
        assert!(points[10..]
            .iter()
            .all(|p| near(p.maps, 0.0) && near(p.reduces, 1.0)));
        let slot_s: f64 = points.iter().map(|p| (p.maps + p.reduces) * 0.1).sum();
        assert!(near(slot_s, 3.0), "{slot_s}");
    }

    #[test]
    fn a_report_lists_the_slowest_stragglers_only() {
        let t0 = Instant::now();
        let request = sluice_request::JobRequest::new("wordcount", &(), "in", "out");
        let n = 1_000;
        let mut job = Job::new(
            JobId(1),
            request,
            vec![MapInput::Synthetic; n],
            1,
            [0; 32],
            t0,
        );
        let place = Place::default();
        let w = Asker {
            id: WorkerId(1),
            uid: "a",
            addr: "a:1",
            place: &place,
            live: 1,
            map_slots: 1,
        };
        // 700 maps of 1 s, 300 stragglers of 10 to 13 s.
        let mut secs = Vec::new();
        for i in 0..n {
            let pick = Pick {
                kind: MAP,
                index: i,
                level: Locality::Node,
                speculative: false,
            };
            let id = job.launch(pick, &w, t0);
            let took = if i < 700 {
                1.0
            } else {
                10.0 + (i % 300) as f64 / 100.0
            };
            let task = proto::TaskId {
                job: 1,
                kind: MAP.wire(),
                index: i as u32,
                attempt: id,
            };
            let report = proto::TaskReport {
                task: Some(task),
                ok: true,
                ..Default::default()
            };
            let end = t0 + Duration::from_secs_f64(took);
            job.finish(MAP, i, report, &crate::config::Settings::default(), end);
            secs.push(took);
        }
        let mut out = Vec::new();
        find_stragglers(&mut out, &job, MAP, &mut secs, t0 + Duration::from_secs(20));
        assert_eq!(out.len(), STRAGGLERS_LISTED);
        assert!((out[0].seconds - 12.99).abs() < 1e-6, "{:?}", out[0]);
        assert!(out.windows(2).all(|p| p[0].seconds >= p[1].seconds));
        assert!(out
            .iter()
            .all(|s| s.seconds > 11.9 && (s.median_s - 1.0).abs() < 1e-9));
    }
}
