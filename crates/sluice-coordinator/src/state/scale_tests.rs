//! The state at scale: how many tasks and workers a decision looks at,
//! ended jobs retired, and how long heartbeats are held in a large
//! cluster.

use std::collections::HashSet;

use super::tests::{config, settings, Sim};
use super::*;
use crate::policy::Fifo;

/// A job of `n` maps, a block each on one of four workers of two slots,
/// run to the end by heartbeats that report their attempts done: the
/// most candidates one heartbeat's decisions looked at, and the job's
/// state.
fn candidates_per_beat(n: usize) -> (u64, String) {
    const HOLDERS: [&[&str]; 4] = [&["a"], &["b"], &["c"], &["d"]];
    let mut sim = Sim::new(config(settings(), None), Box::new(Fifo));
    let workers = ["a", "b", "c", "d"];
    for w in workers {
        sim.register(w, "dc1", "r1", 2);
    }
    let holders: Vec<&[&str]> = (0..n).map(|i| HOLDERS[i % 4]).collect();
    sim.data("in", &holders, 100);
    sim.submit("in", "p", 2);
    let id = *sim.st.jobs.keys().next().unwrap();
    let mut worst = 0;
    while sim.st.jobs[&id].is_running() {
        for w in workers {
            let before = sim.st.jobs[&id].queues().examined();
            sim.report(w, true, false);
            worst = worst.max(sim.st.jobs[&id].queues().examined() - before);
        }
    }
    (worst, sim.st.jobs[&id].state().name().to_owned())
}

#[test]
fn a_decision_looks_at_as_few_tasks_with_100000_as_with_1000() {
    let (small, state) = candidates_per_beat(1_000);
    assert_eq!(state, "succeeded");
    let (large, state) = candidates_per_beat(100_000);
    assert_eq!(state, "succeeded");
    // A beat makes up to four decisions (two map and two reduce slots);
    // each looks at the worker's next maps and the few running tasks.
    eprintln!("candidates per beat: {small} at 1,000 tasks, {large} at 100,000");
    assert!(large <= 40, "{large} candidates in one heartbeat");
    assert!(
        large <= small + 4,
        "{large} at 100,000 tasks, {small} at 1,000"
    );
}

#[test]
fn a_decision_does_not_walk_past_the_tasks_running_in_a_large_cluster() {
    // 200 workers of 4 slots run 800 maps that read nothing at once; each
    // heartbeat's decisions look at the next waiting maps, not at the 800
    // running ones ahead of them in the job's queue.
    let mut sim = Sim::new(config(settings(), None), Box::new(Fifo));
    let workers: Vec<&'static str> = (0..200)
        .map(|i| &*Box::leak(format!("w{i}").into_boxed_str()))
        .collect();
    for w in &workers {
        sim.register(w, "dc1", "r1", 4);
    }
    sim.submit("synthetic:4000", "p", 0);
    let id = *sim.st.jobs.keys().next().unwrap();
    let mut worst = 0;
    let mut beats = 0;
    while sim.st.jobs[&id].is_running() && beats < 10_000 {
        for w in &workers {
            let before = sim.st.jobs[&id].queues().examined();
            sim.report(w, true, false);
            worst = worst.max(sim.st.jobs[&id].queues().examined() - before);
            beats += 1;
        }
    }
    assert_eq!(sim.st.jobs[&id].state().name(), "succeeded");
    eprintln!("candidates per beat at 800 running: {worst}");
    assert!(worst <= 16, "{worst} candidates in one heartbeat");
}

#[test]
fn ended_jobs_past_the_limit_are_retired_and_still_answer() {
    let mut sim = Sim::new(config(settings(), None), Box::new(Fifo));
    sim.register("a", "dc1", "r1", 2);
    sim.data("in", &[&["a"], &["a"]], 100);
    for _ in 0..3 {
        sim.submit("in", "p", 1);
        let id = *sim.st.jobs.keys().last().unwrap();
        while sim.st.jobs[&id].is_running() {
            sim.report("a", true, false);
        }
        let done = sim.st.status(id).unwrap();
        assert_eq!(done.state, "succeeded");
    }
    let first = *sim.st.jobs.keys().next().unwrap();
    sim.st.retire_ended(1, usize::MAX);
    assert_eq!(sim.st.jobs.len(), 1, "only the newest ended job is held");
    assert!(!sim.st.jobs.contains_key(&first));
    // A retired job still answers, from its record and its report.
    let s = sim.st.status(first).unwrap();
    assert_eq!(s.state, "succeeded");
    assert!(s.report_json.contains("\"state\""), "{}", s.report_json);
    // A late report of one of its attempts changes nothing.
    let late = proto::TaskReport {
        task: Some(proto::TaskId {
            job: first.0,
            kind: TaskKind::Map.wire(),
            index: 0,
            attempt: 7,
        }),
        ok: true,
        ..Default::default()
    };
    sim.beat("a", vec![late]);
    assert!(!sim.st.jobs.contains_key(&first));
    assert_eq!(sim.st.status(first).unwrap().state, "succeeded");
    // By tasks: a limit of one task retires every ended job.
    sim.st.retire_ended(usize::MAX, 1);
    assert!(sim.st.jobs.is_empty());
}

#[test]
fn a_large_clusters_idle_heartbeats_are_held_longer() {
    let mut sim = Sim::new(config(settings(), None), Box::new(Fifo));
    for i in 0..3 {
        let uid: &'static str = Box::leak(format!("w{i}").into_boxed_str());
        sim.register(uid, "dc1", "r1", 2);
    }
    // A small cluster: the configured interval (500 ms), whatever the
    // worker's phase.
    assert_eq!(sim.st.hold(), Duration::from_millis(500));
    for w in 0..20 {
        let h = sim.st.hold_for(WorkerId(w), 1_700_000_000_123 + w * 37);
        assert_eq!(h, Duration::from_millis(500));
    }
    for i in 3..1_500 {
        let uid: &'static str = Box::leak(format!("w{i}").into_boxed_str());
        sim.register(uid, "dc1", "r1", 2);
    }
    // 1,500 workers beat 1,000 times a second together when idle, each
    // coming back at its own phase.
    assert_eq!(sim.st.hold(), Duration::from_millis(1_500));
    let now = 1_700_000_000_000;
    let phased: HashSet<Duration> = (0..20).map(|w| sim.st.hold_for(WorkerId(w), now)).collect();
    assert!(phased.len() > 15, "{phased:?}");
    for i in 1_500..3_000 {
        let uid: &'static str = Box::leak(format!("w{i}").into_boxed_str());
        sim.register(uid, "dc1", "r1", 2);
    }
    // Never past 2 s, nor a quarter of the worker timeout.
    assert_eq!(sim.st.hold(), Duration::from_secs(2));
    let mut short = config(settings(), None);
    short.worker_timeout = Duration::from_secs(4);
    let mut sim = Sim::new(short, Box::new(Fifo));
    for i in 0..3_000 {
        let uid: &'static str = Box::leak(format!("w{i}").into_boxed_str());
        sim.register(uid, "dc1", "r1", 2);
    }
    assert_eq!(sim.st.hold(), Duration::from_secs(1));
}

#[test]
fn held_heartbeats_come_back_spread_through_the_hold_not_together() {
    let hold = Duration::from_secs(2);
    // 5,000 workers woken together (a job's start) beat again at once.
    let now = 1_700_000_000_123;
    let mut per_100ms = [0u32; 25];
    for w in 0..5_000 {
        let h = super::workers::held_for(now, hold, WorkerId(w));
        assert!(h >= hold / 4 && h <= hold * 5 / 4, "worker {w} held {h:?}");
        per_100ms[(h.as_millis() / 100) as usize] += 1;
        // Beating again as its hold ends, it is held one whole `hold`.
        let back = now + h.as_millis() as u64;
        assert_eq!(super::workers::held_for(back, hold, WorkerId(w)), hold);
        assert_eq!(
            super::workers::held_for(back + 1, hold, WorkerId(w)),
            hold - Duration::from_millis(1)
        );
    }
    // Evenly: 250 a tenth of a second (none before a quarter of the hold).
    assert!(per_100ms[..5].iter().all(|&n| n == 0), "{per_100ms:?}");
    for (i, &n) in per_100ms.iter().enumerate().skip(5) {
        assert!(n.abs_diff(250) <= 40, "{i}: {n} of {per_100ms:?}");
    }
    // A hold of a millisecond or less still holds.
    assert_eq!(
        super::workers::held_for(now, Duration::ZERO, WorkerId(3)),
        Duration::ZERO
    );
}

#[test]
fn a_rack_search_walks_the_workers_holding_waiting_maps_not_the_cluster() {
    // 2,000 workers in racks of 40; every block of the input is on one of
    // w0..w3 (rack r0). Workers of other racks ask for work: each search
    // of their rack and data center looks at those 4 holders, not at the
    // 1,999 other live workers; once every map runs, at no worker.
    let mut sim = Sim::new(config(settings(), None), Box::new(Fifo));
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let workers: Vec<&'static str> = (0..2_000).map(|i| leak(format!("w{i}"))).collect();
    for (i, w) in workers.iter().enumerate() {
        sim.register(w, "dc1", leak(format!("r{}", i / 40)), 1);
    }
    let holders: Vec<&[&str]> = (0..40).map(|i| &workers[i % 4..i % 4 + 1]).collect();
    sim.data("in", &holders, 100);
    sim.submit("in", "p", 0);
    let id = *sim.st.jobs.keys().next().unwrap();
    let mut worst = 0;
    for w in &workers[40..200] {
        let before = sim.st.jobs[&id].queues().walked();
        sim.beat(w, Vec::new());
        worst = worst.max(sim.st.jobs[&id].queues().walked() - before);
    }
    assert!(worst <= 8, "{worst} workers walked in one heartbeat");
    assert_eq!(sim.st.jobs[&id].pending(TaskKind::Map), 0, "all 40 run");
    let before = sim.st.jobs[&id].queues().walked();
    for w in &workers[200..400] {
        sim.beat(w, Vec::new());
    }
    assert_eq!(sim.st.jobs[&id].queues().walked(), before);
}
