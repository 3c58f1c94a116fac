//! The event loop driven by scripts: workers with racks and data centers,
//! data sets with replicas, jobs in pools, and a sequence of events, to
//! the transcript of what the coordinator did (tasks handed out with the
//! locality they achieved, kills, lost workers, jobs ending), checked by
//! one helper.

use super::*;
use crate::config::{CoordinatorConfig, Delay, Scheduler, Settings};
use crate::policy::{Fair, Fifo, Pools};
use crate::sched::{task_name, JobState, Locality, REDUCE};
use crate::store::RackAware;
use crate::store::RecordState;
use sluice_proto::catalog::{BlockMeta, FileMeta};
use sluice_proto::ids::BlockId;

/// One step of a script.
#[derive(Clone, Copy)]
pub(super) enum E {
    /// A worker `uid` in `datacenter`, `rack` with `slots` slots of each
    /// kind registers.
    Worker(&'static str, &'static str, &'static str, u32),
    /// A data set whose block `i` has replicas on the listed workers.
    Data(&'static str, &'static [&'static [&'static str]]),
    /// As `Data`, but its blocks are small (100 bytes of a 128 MB block
    /// size): packed several to a map by holder.
    SmallData(&'static str, &'static [&'static [&'static str]]),
    /// A job (word count) over an input, in a pool, with reducers.
    Job(&'static str, &'static str, u32),
    /// A worker's heartbeat: `uid: j1 m00000 node` per task it is given,
    /// `uid: kill j1 m00000` per attempt it must kill, `uid: -` for none.
    Beat(&'static str),
    /// Every attempt running on the worker succeeds (reported in its
    /// heartbeat, whose reply is logged as for `Beat`).
    Done(&'static str),
    /// Every map attempt running on the worker succeeds.
    DoneMaps(&'static str),
    /// Every attempt running on the worker fails.
    Fail(&'static str),
    /// A heartbeat reporting the blocks the worker's cache holds (logged
    /// as for `Beat`).
    Caches(&'static str, &'static [&'static str]),
    /// The worker stops beating.
    Silent(&'static str),
    /// `ms` pass (the other workers beating without news), then a tick.
    Wait(u64),
    /// Catalog writes fail from now on.
    DiskFull,
}

use E::*;

/// The coordinator's state, and the service's part played by hand.
pub(super) struct Sim {
    pub(super) st: State,
    pub(super) at: At,
    pub(super) workers: BTreeMap<&'static str, WorkerId>,
    silent: HashSet<&'static str>,
    disk_full: bool,
    pub(super) log: Vec<String>,
    jobs: usize,
    /// The job log records asked for, in order.
    pub(super) entries: Vec<crate::joblog::JobEntry>,
    /// Whether the last event handled asked for held heartbeats to be
    /// offered slots again.
    pub(super) offered: bool,
}

pub(super) fn settings() -> Settings {
    Settings {
        delay: Delay {
            cache: 0,
            node: 2,
            rack: 4,
            datacenter: 6,
        },
        reduce: crate::arts::ReduceScheduler::SlowStart(0.25),
        spec_min: Duration::ZERO,
        ..Settings::default()
    }
}

pub(super) fn config(s: Settings, preemption: Option<Duration>) -> CoordinatorConfig {
    CoordinatorConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        state_dir: std::path::PathBuf::new(),
        secret: sluice_proto::auth::Secret::new(&[7; 32]).unwrap(),
        heartbeat: Duration::from_millis(500),
        worker_timeout: Duration::from_secs(10),
        settings: s,
        jobs: Arc::new(sluice_request::Registry::builtin()),
        placement: std::sync::Arc::new(RackAware),
        orphan_grace: Duration::from_secs(3600),
        scheduler: Scheduler::Fifo,
        preemption_timeout: preemption,
        http: None,
        history: 100,
        hardware: sluice_model::Hardware::defaults("a test"),
        replication_streams: 2,
    }
}

impl Sim {
    pub(super) fn new(cfg: CoordinatorConfig, policy: Box<dyn Policy>) -> Self {
        let at = At::now();
        let st = State::new(
            Arc::new(cfg),
            1,
            Catalog::default(),
            BTreeMap::new(),
            policy,
            at,
        );
        Sim {
            st,
            at,
            workers: BTreeMap::new(),
            silent: HashSet::new(),
            disk_full: false,
            log: Vec::new(),
            jobs: 0,
            entries: Vec::new(),
            offered: false,
        }
    }

    /// Handles an event as the service does: catalog writes succeed
    /// unless the disk is full, and their outcome is the next event.
    pub(super) fn handle(&mut self, ev: Event) -> Answer {
        let before = self.ended();
        let mut step = self.st.handle(ev, self.at);
        self.offered = step.offer;
        self.entries.append(&mut step.log);
        while let Some(write) = step.catalog.take() {
            let result = if self.disk_full {
                Err("disk full".to_string())
            } else {
                Ok(())
            };
            let mut next = self
                .st
                .handle(Event::CatalogSaved { write, result }, self.at);
            self.entries.append(&mut next.log);
            self.offered |= next.offer;
            step.catalog = next.catalog;
        }
        for (id, state) in self.ended() {
            if !before.contains_key(&id) {
                let short = id.0 & 0xffff_ffff;
                match state.reason().as_str() {
                    "" => self.log.push(format!("j{short} {}", state.name())),
                    why => self.log.push(format!("j{short} {}: {why}", state.name())),
                }
            }
        }
        step.answer.expect("the event is accepted")
    }

    fn ended(&self) -> BTreeMap<JobId, JobState> {
        self.st
            .jobs
            .values()
            .filter(|j| !j.is_running())
            .map(|j| (j.id(), j.state().clone()))
            .collect()
    }

    pub(super) fn run(&mut self, e: E) {
        match e {
            Worker(uid, dc, rack, slots) => self.register(uid, dc, rack, slots),
            Data(name, holders) => self.data(name, holders, 100),
            SmallData(name, holders) => self.data(name, holders, 0),
            Job(input, pool, reducers) => self.submit(input, pool, reducers),
            Beat(w) => self.beat(w, Vec::new()),
            Caches(w, blocks) => self.beat_with_cache(w, blocks),
            Done(w) => self.report(w, true, false),
            DoneMaps(w) => self.report(w, true, true),
            Fail(w) => self.report(w, false, false),
            Silent(w) => {
                self.silent.insert(w);
            }
            Wait(ms) => self.wait(ms),
            DiskFull => self.disk_full = true,
        }
    }

    pub(super) fn register(&mut self, uid: &'static str, dc: &str, rack: &str, slots: u32) {
        self.register_with(uid, dc, rack, slots, Vec::new());
    }

    /// Registers `uid`, saying it runs the attempts `running`.
    pub(super) fn register_with(
        &mut self,
        uid: &'static str,
        dc: &str,
        rack: &str,
        slots: u32,
        running: Vec<proto::TaskId>,
    ) {
        let r = proto::RegisterRequest {
            running,
            protocol_version: sluice_proto::PROTOCOL_VERSION,
            data_addr: format!("{uid}:1"),
            datacenter: dc.into(),
            rack: rack.into(),
            slots,
            uid: uid.into(),
            ..Default::default()
        };
        let Answer::Registered(reply) = self.handle(Event::Register(r)) else {
            panic!("not registered");
        };
        self.workers.insert(uid, WorkerId(reply.worker_id));
    }

    pub(super) fn data(&mut self, name: &str, holders: &[&[&str]], block_size: u64) {
        let blocks = holders
            .iter()
            .enumerate()
            .map(|(i, h)| BlockMeta {
                id: BlockId::new(format!("b{name}{i}")).unwrap(),
                len: 100,
                crc: 0,
                replicas: h.iter().map(|u| u.to_string()).collect(),
                corrupt: Vec::new(),
            })
            .collect();
        let meta = DatasetMeta {
            name: DatasetName::new(name).unwrap(),
            files: vec![FileMeta {
                name: "f".into(),
                blocks,
            }],
            created_ms: 0,
            origin: String::new(),
            replication: 1,
            block_size,
            access: Default::default(),
        };
        self.st.catalog.datasets.insert(meta.name.clone(), meta);
    }

    pub(super) fn submit(&mut self, input: &str, pool: &str, reducers: u32) {
        self.jobs += 1;
        let out = format!("out{}", self.jobs);
        let mut request = JobRequest::new("wordcount", &(), input, &out);
        request
            .properties
            .insert(crate::policy::POOL_PROPERTY.into(), pool.into());
        let sub = Submission {
            request,
            replication: 1,
            reducers,
            side: Vec::new(),
            external: None,
            submission: String::new(),
            user: Default::default(),
        };
        self.handle(Event::Submit(sub));
    }

    pub(super) fn beat(&mut self, uid: &'static str, reports: Vec<proto::TaskReport>) {
        let r = proto::HeartbeatRequest {
            worker_id: self.workers[uid].0,
            epoch: self.st.epoch,
            reports,
            ..Default::default()
        };
        self.send(uid, r);
    }

    fn beat_with_cache(&mut self, uid: &'static str, blocks: &[&str]) {
        let r = proto::HeartbeatRequest {
            worker_id: self.workers[uid].0,
            epoch: self.st.epoch,
            cache: Some(proto::CacheReport {
                blocks: blocks.iter().map(|b| b.to_string()).collect(),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.send(uid, r);
    }

    fn send(&mut self, uid: &'static str, r: proto::HeartbeatRequest) {
        // One offer per beat: a held heartbeat's second offer is the
        // service's, not the loop's.
        match self.handle(Event::Heartbeat(r)) {
            Answer::Heartbeat(Some(reply)) => self.log_reply(uid, &reply),
            Answer::Heartbeat(None) => self.log.push(format!("{uid}: -")),
            a => panic!("{a:?}"),
        }
    }

    fn log_reply(&mut self, uid: &str, reply: &proto::HeartbeatReply) {
        let mut said = false;
        for k in &reply.kills {
            let kind = TaskKind::from_wire(k.kind).unwrap();
            let short = k.job & 0xffff_ffff;
            let task = task_name(kind, k.index as usize);
            self.log.push(format!("{uid}: kill j{short} {task}"));
            said = true;
        }
        for t in &reply.tasks {
            let id = t.task.unwrap();
            let kind = TaskKind::from_wire(id.kind).unwrap();
            let job = &self.st.jobs[&JobId(id.job)];
            let t = &job.tasks(kind)[id.index as usize];
            let a = &t.attempts[t.slot_of(id.attempt).unwrap()];
            let spec = if a.speculative { " backup" } else { "" };
            let (short, task) = (id.job & 0xffff_ffff, task_name(kind, id.index as usize));
            let level = a.level.name();
            self.log
                .push(format!("{uid}: j{short} {task} {level}{spec}"));
            said = true;
        }
        if !said {
            self.log.push(format!("{uid}: -"));
        }
    }

    /// Reports every attempt running on `uid` as succeeded or failed.
    pub(super) fn report(&mut self, uid: &'static str, ok: bool, maps_only: bool) {
        let w = self.workers[uid];
        let mut reports = Vec::new();
        for job in self.st.jobs.values().filter(|j| j.is_running()) {
            for (worker, kind, index, attempt) in job.running_attempts() {
                if worker != w || (maps_only && kind == REDUCE) {
                    continue;
                }
                let task = proto::TaskId {
                    job: job.id().0,
                    kind: kind.wire(),
                    index: index as u32,
                    attempt,
                };
                let last = kind == REDUCE || job.map_only();
                let output = (ok && last).then(|| proto::BlockInfo {
                    id: format!("j{}-{}{index}-a{attempt}", job.id().0, kind.letter()),
                    len: 10,
                    ..Default::default()
                });
                reports.push(proto::TaskReport {
                    task: Some(task),
                    ok,
                    error: if ok { String::new() } else { "boom".into() },
                    output,
                    ..Default::default()
                });
            }
        }
        self.beat(uid, reports);
    }

    pub(super) fn wait(&mut self, ms: u64) {
        self.at = self.at.after(Duration::from_millis(ms));
        let now = self.at.now;
        for (uid, id) in &self.workers {
            if !self.silent.contains(uid) {
                if let Some(w) = self.st.workers.get_mut(id) {
                    w.last_seen = now;
                }
            }
        }
        let alive: Vec<WorkerId> = self.st.alive().map(|w| WorkerId(w.info.id)).collect();
        self.handle(Event::Tick);
        for (uid, id) in &self.workers {
            if alive.contains(id) && !self.st.workers[id].info.alive {
                self.log.push(format!("lost {uid}"));
            }
        }
    }
}

/// Runs a script on a coordinator with the test settings and `policy`;
/// the transcript must be `want`.
pub(super) fn check(policy: Box<dyn Policy>, s: Settings, script: &[E], want: &[&str]) -> Sim {
    check_with(config(s, None), policy, script, want)
}

fn check_with(cfg: CoordinatorConfig, policy: Box<dyn Policy>, script: &[E], want: &[&str]) -> Sim {
    let mut sim = Sim::new(cfg, policy);
    for &e in script {
        sim.run(e);
    }
    assert_eq!(sim.log, want, "\ntranscript:\n{}", sim.log.join("\n"));
    sim
}

fn fair(pools: &str) -> Box<dyn Policy> {
    Box::new(Fair {
        pools: Pools::parse(pools).unwrap(),
    })
}

pub(super) const A: E = Worker("a", "dc1", "r1", 1);
pub(super) const B: E = Worker("b", "dc1", "r1", 1);
const C: E = Worker("c", "dc1", "r2", 1);
const D: E = Worker("d", "dc2", "r3", 1);

#[test]
fn maps_run_where_their_blocks_are_and_the_job_commits() {
    let sim = check(
        Box::new(Fifo),
        settings(),
        &[
            A,
            B,
            Data("in", &[&["a"], &["b"]]),
            Job("in", "p", 0),
            Beat("b"),
            Beat("a"),
            Done("a"),
            Done("b"),
        ],
        &[
            "b: j1 m00001 node",
            "a: j1 m00000 node",
            "a: -",
            "j1 succeeded",
            "b: -",
        ],
    );
    assert!(sim.st.catalog.datasets.contains_key("out1"));
}

#[test]
fn a_job_goes_down_one_level_after_each_threshold_of_missed_offers() {
    // Node 2, rack 4, data center 6: a declines while m <= the level's
    // threshold, each decline counting one.
    check(
        Box::new(Fifo),
        settings(),
        &[
            A,
            B,
            C,
            D,
            Data("in", &[&["a"], &["a"], &["a"], &["a"]]),
            Job("in", "p", 0),
            Beat("a"),
            Beat("b"),
            Beat("b"),
            Beat("b"),
            Beat("b"),
            Beat("c"),
            Beat("c"),
            Beat("c"),
            Beat("d"),
            Beat("d"),
            Beat("d"),
        ],
        &[
            "a: j1 m00000 node",
            // m = 0, 1, 2: node only.
            "b: -",
            "b: -",
            "b: -",
            "b: j1 m00001 rack",
            // m = 3, 4: rack (a rack-local launch does not reset m).
            "c: -",
            "c: -",
            "c: j1 m00002 datacenter",
            // m = 5, 6: data center; then anywhere.
            "d: -",
            "d: -",
            "d: j1 m00003 any",
        ],
    );
}

#[test]
fn small_blocks_share_a_map_on_the_worker_that_holds_them() {
    check(
        Box::new(Fifo),
        settings(),
        &[
            A,
            B,
            SmallData("in", &[&["a"], &["b"], &["a"], &["b"], &["a"]]),
            Job("in", "p", 1),
            Beat("b"),
            Beat("a"),
            DoneMaps("b"),
            DoneMaps("a"),
        ],
        &[
            // Five blocks, two maps: a's three blocks and b's two, each
            // node-local; b asks first and gets the map of its blocks.
            "b: j1 m00001 node",
            "a: j1 m00000 node",
            "b: j1 r00000 any",
            "a: -",
        ],
    );
}

#[test]
fn a_node_local_launch_resets_the_missed_offers() {
    check(
        Box::new(Fifo),
        settings(),
        &[
            A,
            B,
            Data("in", &[&["a"], &["a"], &["a"]]),
            Job("in", "p", 0),
            Beat("a"),
            Beat("b"),
            Beat("b"),
            Done("a"),
            // Reset by a's node-local launch: b waits its three offers again.
            Beat("b"),
            Beat("b"),
            Beat("b"),
            Beat("b"),
        ],
        &[
            "a: j1 m00000 node",
            "b: -",
            "b: -",
            "a: j1 m00001 node",
            "b: -",
            "b: -",
            "b: -",
            "b: j1 m00002 rack",
        ],
    );
}

#[test]
fn fifo_gives_the_first_job_every_slot_and_fair_shares_them() {
    let script = [
        A,
        B,
        C,
        Worker("d", "dc1", "r2", 1),
        Job("synthetic:4", "p1", 0),
        Job("synthetic:4", "p2", 0),
        Beat("a"),
        Beat("b"),
        Beat("c"),
        Beat("d"),
    ];
    check(
        Box::new(Fifo),
        settings(),
        &script,
        &[
            "a: j1 m00000 node",
            "b: j1 m00001 node",
            "c: j1 m00002 node",
            "d: j1 m00003 node",
        ],
    );
    check(
        fair(""),
        settings(),
        &script,
        &[
            "a: j1 m00000 node",
            "b: j2 m00000 node",
            "c: j1 m00001 node",
            "d: j2 m00001 node",
        ],
    );
}

#[test]
fn weights_split_slots_and_a_capped_pool_leaves_slots_idle() {
    let four = [
        Worker("a", "dc1", "r1", 2),
        Worker("b", "dc1", "r1", 2),
        Worker("c", "dc1", "r1", 2),
    ];
    let mut script = four.to_vec();
    script.extend([
        Job("synthetic:6", "heavy", 0),
        Job("synthetic:6", "light", 0),
        Beat("a"),
        Beat("b"),
        Beat("c"),
    ]);
    check(
        // Heavy holds 4 of 6 slots, light 2.
        fair("[pool.heavy]\nweight = 2.0"),
        settings(),
        &script,
        &[
            "a: j1 m00000 node",
            "a: j2 m00000 node",
            "b: j1 m00001 node",
            "b: j1 m00002 node",
            "c: j2 m00001 node",
            "c: j1 m00003 node",
        ],
    );
    let mut script = four.to_vec();
    script.extend([
        Job("synthetic:6", "capped", 0),
        Beat("a"),
        Beat("b"),
        Beat("c"),
    ]);
    check(
        // At half of 6 slots, capped takes no more though c is idle.
        fair("[pool.capped]\nmax_share = 0.5"),
        settings(),
        &script,
        &[
            "a: j1 m00000 node",
            "a: j1 m00001 node",
            "b: j1 m00002 node",
            "c: -",
        ],
    );
}

#[test]
fn a_starved_pool_preempts_the_youngest_attempts_after_the_timeout() {
    let cfg = config(settings(), Some(Duration::from_secs(5)));
    check_with(
        cfg,
        fair("[pool.urgent]\nmin_share = 2"),
        &[
            A,
            B,
            C,
            Job("synthetic:6", "batch", 0),
            Beat("a"),
            Wait(100),
            Beat("b"),
            Wait(100),
            Beat("c"),
            Job("synthetic:2", "urgent", 0),
            // Short of its minimum share from this tick, but not for 5 s.
            Wait(100),
            Wait(4_000),
            Beat("a"),
            Wait(1_500),
            // The youngest attempt (c's) gives way: batch holds 3 slots of
            // 3, its fair share is 1.5, and one slot over it is taken.
            Beat("c"),
            Beat("b"),
            // The next free slot goes to the pool below its minimum share.
            Done("a"),
        ],
        &[
            "a: j1 m00000 node",
            "b: j1 m00001 node",
            "c: j1 m00002 node",
            "a: -",
            "c: kill j1 m00002",
            "c: j2 m00000 node",
            "b: -",
            "a: j2 m00001 node",
        ],
    );
}

#[test]
fn reduces_start_at_slowstart_while_maps_are_pending() {
    check(
        Box::new(Fifo),
        settings(),
        &[
            A,
            Job("synthetic:4", "p", 1),
            Beat("a"),
            // 1 of 4 maps done reaches slow-start 0.25: the reduce takes
            // the reduce slot while two maps wait.
            DoneMaps("a"),
            DoneMaps("a"),
            DoneMaps("a"),
            DoneMaps("a"),
            Done("a"),
        ],
        &[
            "a: j1 m00000 node",
            "a: j1 m00001 node",
            "a: j1 r00000 any",
            "a: j1 m00002 node",
            "a: j1 m00003 node",
            "a: -",
            "j1 succeeded",
            "a: -",
        ],
    );
}

#[test]
fn a_straggler_gets_a_backup_that_wins_and_the_original_is_killed() {
    check(
        Box::new(Fifo),
        settings(),
        &[
            A,
            B,
            Job("synthetic:2", "p", 0),
            Beat("a"),
            Beat("b"),
            Wait(1_000),
            Done("a"),
            // b's map has run far longer than a's took.
            Wait(5_000),
            Beat("a"),
            Done("a"),
            Beat("b"),
        ],
        &[
            "a: j1 m00000 node",
            "b: j1 m00001 node",
            "a: -",
            "a: j1 m00001 node backup",
            "j1 succeeded",
            "a: -",
            "b: kill j1 m00001",
        ],
    );
}

#[test]
fn a_lost_workers_tasks_run_again_elsewhere() {
    check(
        Box::new(Fifo),
        settings(),
        &[
            A,
            B,
            Data("in", &[&["a", "b"], &["a", "b"]]),
            Job("in", "p", 1),
            Beat("a"),
            Beat("b"),
            Done("b"),
            Silent("b"),
            Wait(11_000),
            // Its finished map's output is gone with it: run again.
            Done("a"),
        ],
        &[
            "a: j1 m00000 node",
            "b: j1 m00001 node",
            "b: j1 r00000 any",
            "lost b",
            "a: j1 m00001 node",
            "a: j1 r00000 any",
        ],
    );
}

#[test]
fn a_task_failing_too_often_fails_its_job() {
    let s = Settings {
        max_attempts: 2,
        ..settings()
    };
    check(
        Box::new(Fifo),
        s,
        &[
            A,
            B,
            Job("synthetic:1", "p", 0),
            Beat("a"),
            Fail("a"),
            Beat("b"),
            Fail("b"),
        ],
        &[
            "a: j1 m00000 node",
            "a: -",
            "b: j1 m00000 node",
            "j1 failed: task m00000 failed 2 times; last error: boom",
            "b: -",
        ],
    );
}

#[test]
fn a_commit_whose_catalog_write_fails_fails_the_job_and_leaves_no_output() {
    let sim = check(
        Box::new(Fifo),
        settings(),
        &[
            A,
            Job("synthetic:1", "p", 0),
            Beat("a"),
            DiskFull,
            Done("a"),
        ],
        &[
            "a: j1 m00000 node",
            "j1 failed: committing the output: disk full",
            "a: -",
        ],
    );
    assert!(!sim.st.catalog.datasets.contains_key("out1"));
    assert_eq!(
        sim.st.records.values().next().unwrap().state,
        RecordState::Failed
    );
}

#[test]
fn removing_a_data_set_is_undone_when_its_write_fails() {
    let mut sim = Sim::new(config(settings(), None), Box::new(Fifo));
    sim.run(A);
    sim.run(Data("in", &[&["a"]]));
    sim.run(DiskFull);
    let mut step = sim.st.handle(Event::RemoveDataset("in".into()), sim.at);
    let write = step.catalog.take().expect("a catalog write");
    let result = Err("disk full".to_string());
    let next = sim.st.handle(Event::CatalogSaved { write, result }, sim.at);
    assert!(
        matches!(next.answer, Err(Refusal::CatalogUnwritten(ref e)) if e == "disk full"),
        "the client hears of the failure"
    );
    assert!(sim.st.catalog.datasets.contains_key("in"));
    assert!(sim.st.workers.values().all(|w| w.deletes.is_empty()));
}

#[test]
fn locality_levels_are_ordered() {
    use Locality::*;
    assert!(Cache < Node && Node < Rack && Rack < Datacenter && Datacenter < Any);
}
