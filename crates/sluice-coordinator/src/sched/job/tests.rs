use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::*;
use crate::arts::{Links, ReduceScheduler};
use crate::config::{Delay, Settings};
use crate::input::MapInput;
use crate::sched::{Locality, Place, Topology};
use sluice_proto::catalog::BlockMeta;
use sluice_proto::ids::{JobId, TaskKind, WorkerId};
use sluice_proto::proto;

/// A job whose map `i` reads a block held by `holders[i]` (an empty
/// list: a synthetic map).
fn job_on(holders: &[&[&str]], reducers: u32) -> Job {
    let blocks = holders
        .iter()
        .enumerate()
        .map(|(i, h)| {
            if h.is_empty() {
                return MapInput::Synthetic;
            }
            MapInput::Blocks(vec![BlockMeta {
                id: sluice_proto::ids::BlockId::new(format!("b{i}")).unwrap(),
                len: 10,
                crc: 0,
                replicas: h.iter().map(|u| u.to_string()).collect(),
                corrupt: Vec::new(),
            }])
        })
        .collect();
    Job::new(
        JobId(1),
        sluice_request::JobRequest::new("wordcount", &(), "in", "out"),
        blocks,
        reducers,
        [0; 32],
        Instant::now(),
    )
}

/// Two workers `a` and `b` in one rack; map `i` on `a` when even.
fn job(maps: usize, reducers: u32) -> Job {
    let holders: Vec<&[&str]> = (0..maps)
        .map(|i| if i % 2 == 0 { &["a"][..] } else { &["b"][..] })
        .collect();
    job_on(&holders, reducers)
}

fn place(dc: &str, rack: &str) -> Place {
    Place {
        datacenter: dc.into(),
        rack: rack.into(),
    }
}

/// Live workers `(uid, datacenter, rack)`; ids are positions + 1.
fn topology(workers: &[(&str, &str, &str)]) -> Topology<'static> {
    Topology::new(
        workers
            .iter()
            .map(|(u, dc, rack)| (u.to_string(), place(dc, rack))),
    )
}

const ONE_RACK: [(&str, &str, &str); 2] = [("a", "dc1", "r1"), ("b", "dc1", "r1")];

/// Offers worker `uid` of `topo` a map slot.
fn offer(j: &mut Job, topo: &Topology, uid: &str, s: &Settings) -> Option<(usize, Locality)> {
    let p = topo.place(uid).expect("live worker").clone();
    let id = uid.bytes().next().map_or(0, u64::from);
    let w = Asker {
        id: WorkerId(id),
        uid,
        addr: "x",
        place: &p,
        live: topo.len(),
        map_slots: topo.len(),
    };
    let pick = j.pick(&w, MAP, s, Instant::now(), topo)?;
    j.launch(pick, &w, Instant::now());
    Some((pick.index, pick.level))
}

/// One scheduling scenario: workers, the holders of each map's block,
/// delay thresholds, and offers of a map slot (by worker) with the map
/// and level each must launch, or `None` for a declined offer. A
/// launched map keeps running.
fn check(
    workers: &[(&str, &str, &str)],
    holders: &[&[&str]],
    delay: Delay,
    offers: &[(&str, Option<(usize, Locality)>)],
) -> Job {
    let topo = topology(workers);
    let s = Settings {
        delay,
        ..Settings::default()
    };
    let mut j = job_on(holders, 1);
    for (n, (uid, want)) in offers.iter().enumerate() {
        let got = offer(&mut j, &topo, uid, &s);
        assert_eq!(
            got, *want,
            "offer {n} to {uid} (missed {})",
            j.missed_offers
        );
    }
    j
}

fn delay(node: u32, rack: u32, datacenter: u32) -> Delay {
    Delay {
        cache: 0,
        node,
        rack,
        datacenter,
    }
}

use Locality::{Any, Datacenter, Node, Rack};

#[test]
fn a_job_declines_offers_until_it_has_missed_enough_for_the_next_level() {
    check(
        &ONE_RACK,
        &[&["a"], &["b"]],
        delay(2, 9, 9),
        &[
            ("a", Some((0, Node))),
            ("a", None),
            ("a", None),
            ("a", None),
            ("a", Some((1, Rack))),
        ],
    );
}

#[test]
fn a_node_local_launch_resets_the_count_and_a_rack_one_does_not() {
    let j = check(
        &ONE_RACK,
        &[&["b"], &["b"], &["b"]],
        delay(1, 9, 9),
        &[
            ("a", None),
            ("a", None),
            ("a", Some((0, Rack))),
            ("a", Some((1, Rack))),
        ],
    );
    assert_eq!(j.missed_offers, 2, "rack-local launches keep the count");
    let mut j = job_on(&[&["a"], &["b"]], 1);
    j.missed_offers = 5;
    let topo = topology(&ONE_RACK);
    let s = Settings::default();
    assert_eq!(offer(&mut j, &topo, "a", &s), Some((0, Node)));
    assert_eq!(j.missed_offers, 0, "a node-local launch resets it");
}

#[test]
fn each_level_waits_its_own_threshold() {
    let workers = [
        ("a", "dc1", "r1"),
        ("b", "dc1", "r1"),
        ("c", "dc1", "r2"),
        ("e", "dc2", "r1"),
    ];
    // From c, b's block is in the data center but not the rack.
    check(
        &workers,
        &[&["b"]],
        delay(1, 2, 9),
        &[
            ("c", None),
            ("c", None),
            ("c", None),
            ("c", Some((0, Datacenter))),
        ],
    );
    // From e (another data center, a rack of the same name), anywhere.
    check(
        &workers,
        &[&["b"]],
        delay(0, 1, 2),
        &[("e", None), ("e", None), ("e", None), ("e", Some((0, Any)))],
    );
    // The best level among the replicas counts.
    check(
        &workers,
        &[&["e", "a"]],
        delay(0, 9, 9),
        &[("b", None), ("b", Some((0, Rack)))],
    );
}

#[test]
fn maps_without_a_block_do_not_wait() {
    // A synthetic map is at home on any worker. (A map whose blocks no
    // live worker holds is not scheduled: it fails its job.)
    check(
        &ONE_RACK,
        &[&[], &[]],
        Delay::default(),
        &[("a", Some((0, Node))), ("b", Some((1, Node)))],
    );
}

#[test]
fn the_default_delay_is_the_seeds() {
    let mut offers = vec![("a", Some((0, Node)))];
    offers.extend(std::iter::repeat_n(("a", None), 41));
    offers.push(("a", Some((1, Rack))));
    check(&ONE_RACK, &[&["a"], &["b"]], Delay::default(), &offers);
}

fn asker<'a>(id: u64, uid: &'a str, p: &'a Place) -> Asker<'a> {
    Asker {
        id: WorkerId(id),
        uid,
        addr: "x",
        place: p,
        live: 2,
        map_slots: 2,
    }
}

/// A pick made by hand.
fn chosen(kind: TaskKind, index: usize, level: Locality, spec: bool) -> Pick {
    Pick {
        kind,
        index,
        level,
        speculative: spec,
    }
}

fn ok(kind: TaskKind, index: u32, attempt: u32) -> proto::TaskReport {
    proto::TaskReport {
        task: Some(proto::TaskId {
            job: 1,
            kind: kind.wire(),
            index,
            attempt,
        }),
        ok: true,
        ..Default::default()
    }
}

#[test]
fn first_success_wins_and_late_attempts_are_discarded() {
    let mut j = job(1, 1);
    let s = Settings::default();
    let p = place("dc1", "r1");
    j.launch(
        chosen(MAP, 0, Node, false),
        &asker(1, "a", &p),
        Instant::now(),
    );
    j.launch(
        chosen(MAP, 0, Rack, true),
        &asker(2, "b", &p),
        Instant::now(),
    );
    let (kills, discard) = j.finish(MAP, 0, ok(MAP, 0, 1), &s, Instant::now());
    assert!(!discard);
    assert_eq!(kills, vec![(WorkerId(1), 0)]);
    assert_eq!(j.maps[0].done, Some(1));
    // The killed attempt's late report changes nothing.
    let (_, discard) = j.finish(MAP, 0, ok(MAP, 0, 0), &s, Instant::now());
    assert!(discard);
    assert_eq!(j.maps[0].done, Some(1));
}

#[test]
fn repeated_failures_fail_the_job() {
    let mut j = job(1, 1);
    let s = Settings::default();
    let p = place("dc1", "r1");
    for attempt in 0..4 {
        let id = j.launch(
            chosen(MAP, 0, Node, false),
            &asker(1, "a", &p),
            Instant::now(),
        );
        assert_eq!(id, attempt);
        let mut r = ok(MAP, 0, id);
        r.ok = false;
        r.error = "boom".into();
        j.finish(MAP, 0, r, &s, Instant::now());
    }
    match &j.state {
        JobState::Failed(m) => {
            assert!(m.contains("m00000 failed 4 times") && m.contains("boom"))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_damaged_replica_is_not_the_tasks_fault() {
    let mut j = job(2, 1);
    let s = Settings::default();
    let topo = topology(&ONE_RACK);
    let p = place("dc1", "r1");
    for attempt in 0..10 {
        let id = j.launch(
            chosen(MAP, 1, Node, false),
            &asker(2, "b", &p),
            Instant::now(),
        );
        assert_eq!(id, attempt);
        let mut r = ok(MAP, 1, id);
        r.ok = false;
        r.error = "damaged replica".into();
        r.corrupt.push(proto::CorruptReplica {
            block: "b1".into(),
            ..Default::default()
        });
        j.finish(MAP, 1, r, &s, Instant::now());
    }
    assert!(j.is_running(), "{:?}", j.state);
    assert_eq!(j.maps[1].failures, 0);
    // And it may go to a worker without the block at once.
    j.launch(
        chosen(MAP, 0, Node, false),
        &asker(1, "a", &p),
        Instant::now(),
    );
    assert_eq!(offer(&mut j, &topo, "a", &s), Some((1, Rack)));
}

#[test]
fn a_failed_task_goes_to_another_worker_while_there_is_one() {
    let mut j = job(1, 1);
    let s = Settings {
        delay: delay(0, 9, 9),
        ..Settings::default()
    };
    let topo = topology(&ONE_RACK);
    let p = place("dc1", "r1");
    let id = j.launch(
        chosen(MAP, 0, Node, false),
        &asker(97, "a", &p),
        Instant::now(),
    );
    let mut r = ok(MAP, 0, id);
    r.ok = false;
    r.error = "no space left on device".into();
    j.finish(MAP, 0, r.clone(), &s, Instant::now());
    assert_eq!(offer(&mut j, &topo, "a", &s), None, "not again on a");
    assert_eq!(
        offer(&mut j, &topo, "b", &s),
        None,
        "one missed offer first"
    );
    assert_eq!(offer(&mut j, &topo, "b", &s), Some((0, Rack)));
    r.task.as_mut().unwrap().attempt = 1;
    j.finish(MAP, 0, r, &s, Instant::now());
    // Failed on every live worker: any may try again.
    assert_eq!(offer(&mut j, &topo, "a", &s), Some((0, Node)));
}

#[test]
fn lost_workers_outputs_are_recomputed_while_needed() {
    let mut j = job(2, 1);
    let s = Settings::default();
    let p = place("dc1", "r1");
    j.launch(
        chosen(MAP, 0, Node, false),
        &asker(1, "a", &p),
        Instant::now(),
    );
    j.finish(MAP, 0, ok(MAP, 0, 0), &s, Instant::now());
    j.launch(
        chosen(MAP, 1, Node, false),
        &asker(2, "b", &p),
        Instant::now(),
    );
    j.worker_lost(WorkerId(1), Instant::now());
    assert!(
        j.maps[0].pending(),
        "finished map output of a lost worker re-runs"
    );
    assert!(j.maps[1].running().next().is_some());
    j.worker_lost(WorkerId(2), Instant::now());
    assert!(j.maps[1].pending());
    assert_eq!(j.maps[1].failures, 0, "lost attempts do not count");
}

#[test]
fn reduces_start_at_slowstart_while_maps_are_still_pending() {
    let mut j = job(4, 1);
    let topo = topology(&ONE_RACK);
    let p = place("dc1", "r1");
    let a = asker(1, "a", &p);
    let now = Instant::now();
    let early = Settings {
        reduce: ReduceScheduler::SlowStart(0.05),
        ..Settings::default()
    };
    let late = Settings::default();
    assert_eq!(j.pick(&a, REDUCE, &early, now, &topo), None, "0 of 4 done");
    j.launch(chosen(MAP, 0, Node, false), &a, Instant::now());
    j.finish(MAP, 0, ok(MAP, 0, 0), &early, Instant::now());
    assert!(j.maps[1..].iter().all(Task::pending));
    assert_eq!(j.pick(&a, REDUCE, &late, now, &topo), None, "1/4 < 0.8");
    let r = j.pick(&a, REDUCE, &early, now, &topo).unwrap();
    assert_eq!((r.kind, r.index, r.speculative), (REDUCE, 0, false));
}

#[test]
fn stragglers_get_backups_once_no_map_is_pending() {
    let mut j = job(2, 1);
    let s = Settings {
        spec_min: Duration::ZERO,
        ..Settings::default()
    };
    let topo = topology(&ONE_RACK);
    let p = place("dc1", "r1");
    let a = asker(1, "a", &p);
    j.launch(chosen(MAP, 0, Node, false), &a, Instant::now());
    j.finish(MAP, 0, ok(MAP, 0, 0), &s, Instant::now());
    j.launch(
        chosen(MAP, 1, Node, false),
        &asker(2, "b", &p),
        Instant::now(),
    );
    // Map 1 runs far longer than map 0 took: a backup on a.
    let later = Instant::now() + Duration::from_secs(5);
    let pick = j.pick(&a, MAP, &s, later, &topo).unwrap();
    assert_eq!((pick.index, pick.level, pick.speculative), (1, Rack, true));
}

const TWO_DCS: [(&str, &str, &str); 3] =
    [("a", "dc1", "r1"), ("b", "dc1", "r1"), ("x", "dc2", "r2")];

#[test]
fn dc_local_maps_never_cross_the_wan_however_long_they_wait() {
    let topo = topology(&TWO_DCS);
    let s = Settings {
        delay: delay(0, 0, 0),
        dc_local_maps: true,
        ..Settings::default()
    };
    // Map 0's block is in dc1 only; map 1's in dc2 only.
    let mut j = job_on(&[&["a"], &["x"]], 1);
    assert_eq!(offer(&mut j, &topo, "x", &s), Some((1, Locality::Node)));
    for _ in 0..200 {
        assert_eq!(offer(&mut j, &topo, "x", &s), None, "map 0 stays in dc1");
    }
    assert_eq!(offer(&mut j, &topo, "b", &s), None, "b declines once");
    assert_eq!(offer(&mut j, &topo, "b", &s), Some((0, Locality::Rack)));
    // Without the rule the same job sends map 0 across at once.
    let open = Settings {
        delay: delay(0, 0, 0),
        ..Settings::default()
    };
    let mut k = job_on(&[&["a"]], 1);
    assert_eq!(offer(&mut k, &topo, "x", &open), None);
    assert_eq!(offer(&mut k, &topo, "x", &open), Some((0, Locality::Any)));
}

#[test]
fn a_dc_local_map_that_met_a_damaged_replica_stays_with_its_other_replicas() {
    let topo = topology(&TWO_DCS);
    let s = Settings {
        dc_local_maps: true,
        ..Settings::default()
    };
    // Replicas on a (dc1) and x (dc2); a's was damaged.
    let mut j = job_on(&[&["a", "x"]], 1);
    let p = place("dc1", "r1");
    j.launch(
        chosen(MAP, 0, Node, false),
        &asker(1, "a", &p),
        Instant::now(),
    );
    let mut r = ok(MAP, 0, 0);
    r.ok = false;
    r.corrupt.push(proto::CorruptReplica::default());
    j.finish(MAP, 0, r, &s, Instant::now());
    j.inputs[0].blocks_mut()[0].replicas = vec!["x".into()];
    assert_eq!(
        offer(&mut j, &topo, "b", &s),
        None,
        "dc1 has no intact replica"
    );
    assert_eq!(offer(&mut j, &topo, "x", &s), Some((0, Locality::Node)));
}

#[test]
fn arts_holds_an_aggregating_jobs_reduces_until_its_maps_are_done() {
    let topo = topology(&TWO_DCS);
    let s = Settings {
        reduce: ReduceScheduler::Arts,
        ..Settings::default()
    };
    let mut j = job_on(&[&["a"], &["a"], &["b"], &["b"]], 2);
    let p = place("dc1", "r1");
    let (a, b) = (asker(1, "a", &p), asker(2, "b", &p));
    assert_eq!(
        j.pick(&a, REDUCE, &s, Instant::now(), &topo),
        None,
        "no estimate yet"
    );
    // Each map takes a second: with the clock read at each call, a
    // release build's maps took nanoseconds, the maps left seemed to
    // finish before any copy, and the test failed.
    let t0 = Instant::now();
    for i in 0..4 {
        let w = if i < 2 { &a } else { &b };
        let start = t0 + Duration::from_secs(i as u64);
        j.launch(chosen(MAP, i, Node, false), w, start);
        let mut r = ok(MAP, i as u32, 0);
        r.input_bytes = 1000;
        r.partition_bytes = vec![5, 5];
        let end = start + Duration::from_secs(1);
        j.finish(MAP, i, r, &s, end);
        let pick = j.pick(&a, REDUCE, &s, end, &topo);
        if i < 3 {
            assert_eq!(pick, None, "1% of the input is an aggregating job's output");
        } else {
            assert_eq!(pick.map(|p| p.index), Some(0), "every map is done");
        }
    }
    assert_eq!(j.map_outputs.by_dc["dc1"], [20, 20]);
    assert_eq!(j.map_outputs.output, 40);
    // dc2 holds none of it: its worker waits while dc1's may come,
    // as long as copying partition 0's 20 bytes at 10 bytes/s takes.
    let slow = Settings {
        links: Links {
            lan: 1e9,
            wan: 10.0,
            pairs: HashMap::new(),
        },
        ..s.clone()
    };
    let p2 = place("dc2", "r2");
    let x = asker(3, "x", &p2);
    let t0 = Instant::now();
    let at = |s: f64| t0 + Duration::from_secs_f64(s);
    assert_eq!(j.pick(&x, REDUCE, &slow, at(0.0), &topo), None);
    assert_eq!(j.pick(&x, REDUCE, &slow, at(1.9), &topo), None);
    let home = j.pick(&a, REDUCE, &slow, at(1.95), &topo);
    assert_eq!(home.map(|p| p.index), Some(0));
    assert_eq!(j.remote_wait, None, "a reduce at home restarts the wait");
    assert_eq!(j.pick(&x, REDUCE, &slow, at(2.0), &topo), None);
    assert_eq!(j.pick(&x, REDUCE, &slow, at(3.9), &topo), None);
    let late = j.pick(&x, REDUCE, &slow, at(4.0), &topo);
    assert_eq!(
        late.map(|p| p.index),
        Some(0),
        "after the copy's time it crosses"
    );
    j.worker_lost(WorkerId(2), Instant::now());
    assert_eq!(j.map_outputs.by_dc["dc1"], [10, 10], "b's outputs are lost");
    assert_eq!(j.map_outputs.input, 2000);
}

/// Running attempts of `kind` on worker `w`, walked attempt by attempt.
fn walked(j: &Job, kind: TaskKind, w: u64) -> usize {
    j.tasks(kind)
        .iter()
        .flat_map(|t| t.running())
        .filter(|a| a.worker == WorkerId(w))
        .count()
}

fn counts_agree(j: &Job) {
    for kind in [MAP, REDUCE] {
        for w in 1..=3 {
            assert_eq!(
                j.queues().running_on(kind, WorkerId(w)),
                walked(j, kind, w),
                "{kind:?} on worker {w}"
            );
        }
    }
}

#[test]
fn running_counts_per_worker_follow_every_way_an_attempt_ends() {
    let mut j = job(6, 2);
    let s = Settings::default();
    let p = place("dc1", "r1");
    let now = Instant::now();
    let on = |w: u64| asker(w, ["a", "b", "c"][w as usize - 1], &p);
    // A winner kills its backup on another worker.
    j.launch(chosen(MAP, 0, Node, false), &on(1), now);
    j.launch(chosen(MAP, 0, Rack, true), &on(2), now);
    counts_agree(&j);
    j.finish(MAP, 0, ok(MAP, 0, 0), &s, now);
    counts_agree(&j);
    // A failure, a preemption and a lost worker.
    j.launch(chosen(MAP, 1, Node, false), &on(2), now);
    let mut failed = ok(MAP, 1, 0);
    failed.ok = false;
    j.finish(MAP, 1, failed, &s, now);
    counts_agree(&j);
    j.launch(chosen(MAP, 2, Node, false), &on(3), now);
    j.launch(chosen(REDUCE, 0, Any, false), &on(3), now);
    assert_eq!(j.queues().running_on(REDUCE, WorkerId(3)), 1);
    j.preempt(REDUCE, 0, 0, now);
    counts_agree(&j);
    j.launch(chosen(MAP, 3, Node, false), &on(1), now);
    j.launch(chosen(MAP, 4, Node, false), &on(1), now);
    assert_eq!(j.queues().running_on(MAP, WorkerId(1)), 2);
    j.worker_lost(WorkerId(1), now);
    counts_agree(&j);
    // A worker that registers again naming one of its two attempts.
    j.launch(chosen(MAP, 3, Node, false), &on(2), now);
    j.launch(chosen(MAP, 4, Node, false), &on(2), now);
    let named = j.tasks(MAP)[4].running().next().unwrap().id;
    j.lost_unless_named(WorkerId(2), &[(MAP, 4, named)], now);
    counts_agree(&j);
    assert_eq!(j.queues().running_on(MAP, WorkerId(2)), 1);
}

#[test]
fn a_reducer_is_told_each_map_output_once_and_again_when_it_is_recomputed() {
    let mut j = job(3, 1);
    let s = Settings::default();
    let p = place("dc1", "r1");
    let now = Instant::now();
    let won = |j: &mut Job, m: usize, w: u64| {
        let id = j.launch(chosen(MAP, m, Node, false), &asker(w, "a", &p), now);
        j.finish(MAP, m, ok(MAP, m as u32, id), &s, now);
        id
    };
    let maps = |v: &[proto::MapOutput]| v.iter().map(|o| (o.map, o.attempt)).collect::<Vec<_>>();
    won(&mut j, 0, 1);
    won(&mut j, 1, 2);
    let (all, log, next) = j.outputs_since(0, 0, false);
    assert_eq!(maps(&all), [(0, 0), (1, 0)]);
    assert_eq!(next, 2);
    assert!(
        j.outputs_since(log, next, false).0.is_empty(),
        "nothing new"
    );
    won(&mut j, 2, 2);
    assert_eq!(maps(&j.outputs_since(log, next, false).0), [(2, 0)]);
    // Map 0's output is lost with its worker: not listed until it wins
    // again, then listed with its new attempt.
    j.worker_lost(WorkerId(1), now);
    assert!(j.outputs_since(log, 3, false).0.is_empty());
    won(&mut j, 0, 2);
    let (new, _, next) = j.outputs_since(log, 3, false);
    assert_eq!(maps(&new), [(0, 1)]);
    assert_eq!(next, 4);
    // Map 2's output cannot be fetched: the same, without a lost worker.
    assert!(j.fetch_failed(2, 0, "checksum", &s, now));
    let (all, log, _) = j.outputs_since(0, 0, false);
    assert_eq!(maps(&all), [(1, 0), (0, 1)]);
    assert!(j.outputs_since(log, 4, false).0.is_empty());
    won(&mut j, 2, 1);
    let (new, _, next) = j.outputs_since(log, 4, false);
    assert_eq!(maps(&new), [(2, 1)]);
    assert_eq!(next, 5);
    // A list the job does not keep (another coordinator's) gets all the
    // winners now, each once.
    assert_eq!(
        maps(&j.outputs_since(log ^ 1, 5, false).0),
        [(1, 0), (0, 1), (2, 1)]
    );
}

#[test]
fn a_long_list_of_map_outputs_comes_in_pages_each_map_once() {
    let n = OUTPUTS_PER_REPLY + 10;
    let mut j = job(n, 1);
    let s = Settings::default();
    let p = place("dc1", "r1");
    let now = Instant::now();
    for m in 0..n {
        let id = j.launch(chosen(MAP, m, Node, false), &asker(1, "a", &p), now);
        j.finish(MAP, m, ok(MAP, m as u32, id), &s, now);
    }
    let (first, log, next) = j.outputs_since(0, 0, false);
    assert_eq!(first.len(), OUTPUTS_PER_REPLY);
    let (rest, _, end) = j.outputs_since(log, next, false);
    assert_eq!(rest.len(), 10);
    assert_eq!(end, n as u64);
    let mut maps: Vec<u32> = first.iter().chain(&rest).map(|o| o.map).collect();
    maps.sort_unstable();
    maps.dedup();
    assert_eq!(maps.len(), n);
}

#[test]
fn with_a_table_each_output_names_its_workers_place_and_the_table_comes_once() {
    let mut j = job(6, 1);
    let s = Settings::default();
    let p = place("dc1", "r1");
    let now = Instant::now();
    let workers = [(1, "a"), (2, "b"), (1, "a"), (3, "c"), (2, "b"), (3, "c")];
    for (m, (w, uid)) in workers.into_iter().enumerate() {
        let addr = format!("{uid}:7");
        let at = Asker {
            addr: &addr,
            ..asker(w, uid, &p)
        };
        let id = j.launch(chosen(MAP, m, Node, false), &at, now);
        j.finish(MAP, m, ok(MAP, m as u32, id), &s, now);
    }
    let (plain, log, _) = j.outputs_since(0, 0, false);
    let (coded, _, _) = j.outputs_since(0, 0, true);
    let (from, table) = j.addrs_from(0, 0);
    assert_eq!((from, table.len()), (0, 3), "three workers, each once");
    assert!(coded.iter().all(|o| o.addr.is_empty()));
    let resolved: Vec<(u32, &str)> = coded
        .iter()
        .map(|o| (o.map, table[o.worker as usize].as_str()))
        .collect();
    let expected: Vec<(u32, &str)> = plain.iter().map(|o| (o.map, o.addr.as_str())).collect();
    assert_eq!(resolved, expected);
    // A caller that knows two entries of this list gets the third only;
    // one of another list gets the table from its start.
    assert_eq!(j.addrs_from(log, 2), (2, vec![table[2].clone()]));
    assert_eq!(j.addrs_from(log ^ 1, 2).0, 0);
}
