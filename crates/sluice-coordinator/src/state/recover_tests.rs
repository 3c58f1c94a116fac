//! A coordinator restart played on the state: the job log a first state
//! asked for, replayed into a second one, and the workers registering
//! again.

use super::tests::{config, settings, Sim, A, B, E::*};
use super::*;
use crate::joblog::{JobLog, Recovered};
use crate::policy::Fifo;
use crate::sched::{JobState, MAP};
use crate::store::{RecordState, StateDir};

/// The jobs `entries` take back, through a job log on disk.
fn replayed(entries: &[JobEntry]) -> Vec<Recovered> {
    let d = tempfile::tempdir().unwrap();
    let (mut log, _) = JobLog::open(&StateDir::open(d.path()).unwrap()).unwrap();
    log.append(entries).unwrap();
    drop(log);
    JobLog::open(&StateDir::open(d.path()).unwrap()).unwrap().1
}

/// The coordinator restarts with what it wrote: its catalog, its job
/// records and its job log (`entries`).
fn restart(sim: &mut Sim, entries: &[JobEntry]) {
    let st = &sim.st;
    let next = State::new(
        st.cfg.clone(),
        st.epoch + 1,
        st.catalog.clone(),
        st.records.clone(),
        Box::new(Fifo),
        sim.at,
    )
    .with_recovered(replayed(entries));
    sim.st = next;
    sim.workers.clear();
    sim.entries.clear();
}

/// The attempts running on `uid` now, as its registration names them.
fn running_on(sim: &Sim, uid: &str) -> Vec<proto::TaskId> {
    let w = sim.workers[uid];
    let mut out = Vec::new();
    for job in sim.st.jobs.values() {
        for (worker, kind, index, attempt) in job.running_attempts() {
            if worker == w {
                out.push(proto::TaskId {
                    job: job.id().0,
                    kind: kind.wire(),
                    index: index as u32,
                    attempt,
                });
            }
        }
    }
    out
}

fn started(reducers: u32) -> Sim {
    let mut sim = Sim::new(config(settings(), None), Box::new(Fifo));
    let data = Data("d", &[&["a", "b"], &["b", "a"], &["a", "b"], &["b", "a"]]);
    for e in [A, B, data] {
        sim.run(e);
    }
    sim.run(Job("d", "default", reducers));
    sim.run(Beat("a"));
    sim.run(Beat("b"));
    sim.run(DoneMaps("a"));
    sim
}

fn the_job(sim: &Sim) -> &crate::sched::Job {
    sim.st.jobs.values().next().expect("a job")
}

fn commits(entries: &[JobEntry]) -> usize {
    let started = |e: &&JobEntry| matches!(e, JobEntry::CommitStarted { .. });
    entries.iter().filter(started).count()
}

#[test]
fn finished_maps_stay_finished_and_running_attempts_go_on_after_a_restart() {
    let mut sim = started(1);
    assert_eq!(the_job(&sim).done(MAP), 1);
    let (on_a, on_b) = (running_on(&sim, "a"), running_on(&sim, "b"));
    assert!(!on_a.is_empty() && !on_b.is_empty());
    let entries = std::mem::take(&mut sim.entries);
    restart(&mut sim, &entries);
    assert_eq!(the_job(&sim).done(MAP), 1, "the finished map is back");
    sim.register_with("a", "dc1", "r1", 1, on_a);
    sim.register_with("b", "dc1", "r1", 1, on_b);
    let job = the_job(&sim);
    assert_eq!(job.running(MAP), 2, "both running maps adopted");
    let winner = job.maps().iter().find_map(|t| t.winner()).unwrap();
    assert_eq!(
        winner.worker, sim.workers["a"],
        "a took the id its map names"
    );
    sim.wait(3_000);
    for _ in 0..10 {
        if !the_job(&sim).is_running() {
            break;
        }
        sim.run(Done("a"));
        sim.run(Done("b"));
    }
    let job = the_job(&sim);
    assert_eq!(*job.state(), JobState::Succeeded);
    for t in job.maps() {
        assert_eq!(t.attempts.len(), 1, "no map ran twice: {:?}", t.attempts);
    }
    assert_eq!(commits(&sim.entries), 1);
}

#[test]
fn a_worker_that_does_not_come_back_loses_its_finished_maps() {
    let mut sim = started(1);
    let on_b = running_on(&sim, "b");
    let entries = std::mem::take(&mut sim.entries);
    restart(&mut sim, &entries);
    sim.register_with("b", "dc1", "r1", 1, on_b);
    sim.wait(5_000);
    assert_eq!(the_job(&sim).done(MAP), 1, "a is awaited a while");
    sim.wait(6_000);
    assert_eq!(the_job(&sim).done(MAP), 0, "then its map runs again");
}

/// A job run to its end, and its job log cut after its commit's start
/// record (`written`: the commit's catalog write made) as a crash would
/// leave it.
fn crashed_committing(written: bool) -> Sim {
    let mut sim = started(0);
    for _ in 0..6 {
        sim.run(Done("a"));
        sim.run(Done("b"));
    }
    assert_eq!(*the_job(&sim).state(), JobState::Succeeded);
    let id = the_job(&sim).id();
    let cut = sim
        .entries
        .iter()
        .position(|e| matches!(e, JobEntry::CommitStarted { .. }));
    let entries: Vec<JobEntry> = sim.entries[..=cut.unwrap()].to_vec();
    sim.st.records.get_mut(&id).unwrap().state = RecordState::Running;
    if !written {
        sim.st.catalog.datasets.remove("out1");
    }
    restart(&mut sim, &entries);
    sim.run(Wait(1));
    sim
}

#[test]
fn a_commit_started_before_a_crash_is_made_once_after_it() {
    let sim = crashed_committing(false);
    assert_eq!(*the_job(&sim).state(), JobState::Succeeded);
    assert_eq!(commits(&sim.entries), 1, "committed again, once");
    let out = &sim.st.catalog.datasets["out1"];
    assert!(recover::is_origin(&out.origin, the_job(&sim).id()));
}

#[test]
fn a_commit_written_before_a_crash_is_not_made_again() {
    let sim = crashed_committing(true);
    assert_eq!(*the_job(&sim).state(), JobState::Succeeded);
    assert!(!the_job(&sim).report_json().is_empty(), "it has its report");
    let (_, r) = sim.st.records.iter().next().unwrap();
    assert_eq!(r.state, RecordState::Succeeded);
    assert_eq!(commits(&sim.entries), 0);
}

#[test]
fn a_worker_registering_again_keeps_its_finished_maps_and_loses_what_it_does_not_name() {
    let mut sim = started(1);
    let before = sim.workers["a"];
    let on_a = running_on(&sim, "a");
    assert_eq!(on_a.len(), 2, "a map and a reduce");
    sim.register_with("a", "dc1", "r1", 1, on_a[..1].to_vec());
    assert_eq!(sim.workers["a"], before, "it keeps its id");
    let job = the_job(&sim);
    assert_eq!(job.done(MAP), 1, "its finished map stays");
    assert_eq!(
        running_on(&sim, "a").len(),
        1,
        "the attempt it did not name is lost"
    );
}

#[test]
fn no_task_is_handed_out_while_workers_register_again() {
    let mut sim = started(1);
    let entries = std::mem::take(&mut sim.entries);
    restart(&mut sim, &entries);
    sim.register("a", "dc1", "r1", 1);
    sim.log.clear();
    sim.run(Beat("a"));
    sim.wait(1_000);
    sim.run(Beat("a"));
    assert_eq!(sim.log, ["a: -", "a: -"]);
    sim.wait(2_000);
    sim.run(Beat("a"));
    assert!(sim.log[2].starts_with("a: j1 "), "{:?}", sim.log);
}

#[test]
fn a_submit_sent_again_with_its_id_gets_the_job_the_first_made_across_a_restart() {
    let mut sim = Sim::new(config(settings(), None), Box::new(Fifo));
    for e in [A, B, Data("d", &[&["a"], &["b"]])] {
        sim.run(e);
    }
    let sub = |submission: &str, out: &str| Submission {
        request: JobRequest::new("wordcount", &(), "d", out),
        replication: 1,
        reducers: 1,
        side: Vec::new(),
        external: None,
        submission: submission.into(),
        user: Default::default(),
    };
    let Answer::Submitted(first) = sim.handle(Event::Submit(sub("c-1", "o1"))) else {
        panic!("not submitted")
    };
    let Answer::Submitted(again) = sim.handle(Event::Submit(sub("c-1", "o1"))) else {
        panic!("not submitted")
    };
    assert_eq!(again, first, "the same submission is the same job");
    let Answer::Submitted(other) = sim.handle(Event::Submit(sub("c-2", "o2"))) else {
        panic!("not submitted")
    };
    assert_ne!(other, first);
    let Answer::Submitted(unnamed) = sim.handle(Event::Submit(sub("", "o3"))) else {
        panic!("not submitted")
    };
    assert_ne!(unnamed, first);
    // The coordinator restarts from its job log alone (the records of the
    // first job lost): the log's acceptance still names the submission.
    let entries = sim.entries.clone();
    sim.st.records.clear();
    restart(&mut sim, &entries);
    for e in [A, B] {
        sim.run(e);
    }
    let Answer::Submitted(after) = sim.handle(Event::Submit(sub("c-1", "o1"))) else {
        panic!("not submitted")
    };
    assert_eq!(after, first, "answered with the job taken back");
    assert_eq!(sim.st.jobs.len(), 3, "no fourth job");
}

#[test]
fn a_job_submitted_just_after_a_restart_waits_for_its_workers_to_register_again() {
    let mut sim = Sim::new(config(settings(), None), Box::new(Fifo));
    for e in [A, B, Data("d", &[&["a"], &["b"]])] {
        sim.run(e);
    }
    // A restart with no job running: nothing is taken back.
    restart(&mut sim, &[]);
    sim.run(Job("d", "default", 0));
    assert_eq!(sim.st.jobs.len(), 1, "accepted with no worker back yet");
    sim.wait(100);
    assert!(
        the_job(&sim).is_running(),
        "its blocks' holders are awaited"
    );
    // The workers register again, reporting the blocks they hold.
    for (uid, block) in [("a", "bd0"), ("b", "bd1")] {
        let r = proto::RegisterRequest {
            protocol_version: sluice_proto::PROTOCOL_VERSION,
            data_addr: format!("{uid}:1"),
            slots: 1,
            uid: uid.into(),
            blocks: vec![block.into()],
            ..Default::default()
        };
        let Answer::Registered(reply) = sim.handle(Event::Register(r)) else {
            panic!("not registered");
        };
        sim.workers.insert(uid, WorkerId(reply.worker_id));
    }
    for e in [Beat("a"), Beat("b"), Done("a"), Done("b")] {
        sim.run(e);
    }
    assert_eq!(*the_job(&sim).state(), JobState::Succeeded, "{:?}", sim.log);
}
