//! `sluice bench coordinator`: the coordinator's costs as the cluster's
//! metadata grows, measured in process (no network), for
//! `docs/PERFORMANCE.md`.
//!
//! - Catalog: with a catalog of `blocks` blocks, the time of a change (put
//!   of a one-block data set, then its removal) through the edit log,
//!   against rewriting the catalog whole, as each change did before the
//!   edit log.
//! - Heartbeats: a job of `tasks` maps on four workers of two slots, run
//!   to the end by heartbeats that report their attempts done; the time
//!   and candidates looked at per heartbeat, for this job size and for a
//!   hundredth of it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_proto::catalog::{BlockMeta, Catalog, DatasetMeta, FileMeta};
use sluice_proto::ids::{BlockId, DatasetName, WorkerId};
use sluice_proto::{proto, ClusterError};

use crate::config::{CoordinatorConfig, Scheduler, Settings};
use crate::editlog::{CatalogEdit, CatalogLog};
use crate::policy::Fifo;
use crate::sched::REDUCE;
use crate::state::{Answer, At, Event, State, Submission};
use crate::store::{RackAware, StateDir};

type Result<T> = std::result::Result<T, ClusterError>;

/// What the catalog part measured.
#[derive(Debug, Clone)]
pub struct CatalogCost {
    /// Blocks in the catalog.
    pub blocks: u64,
    /// Bytes of the catalog written whole.
    pub checkpoint_bytes: u64,
    /// Median time of one change through the edit log.
    pub logged: Duration,
    /// Median time of one whole rewrite.
    pub rewritten: Duration,
}

/// Times `changes` logged changes and a few whole rewrites of a catalog of
/// `blocks` blocks, in a state directory under `dir`.
pub fn catalog(dir: &std::path::Path, blocks: u64, changes: usize) -> Result<CatalogCost> {
    let store = StateDir::open(dir)?;
    let (mut log, mut c) = CatalogLog::open(store.clone())?;
    let big = dataset("big", blocks);
    c.datasets.insert(big.name.clone(), big);
    log.checkpoint(&c)?;
    let checkpoint_bytes = std::fs::metadata(store.path("catalog.json")).map_or(0, |m| m.len());
    let mut logged = Vec::new();
    for i in 0..changes {
        let d = dataset(&format!("small{i}"), 1);
        let name = d.name.clone();
        let t = Instant::now();
        c.datasets.insert(name.clone(), d);
        log.append(&CatalogEdit::of(&c, [name.clone()], false), &c)?;
        c.datasets.remove(&name);
        log.append(&CatalogEdit::of(&c, [name], false), &c)?;
        logged.push(t.elapsed() / 2);
    }
    let mut rewritten = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        store.save_catalog(&c)?;
        rewritten.push(t.elapsed());
    }
    Ok(CatalogCost {
        blocks,
        checkpoint_bytes,
        logged: median(logged),
        rewritten: median(rewritten),
    })
}

/// What the heartbeat part measured for one job size.
#[derive(Debug, Clone)]
pub struct BeatCost {
    pub tasks: usize,
    pub beats: usize,
    /// Median and worst time to handle one heartbeat.
    pub median: Duration,
    pub worst: Duration,
    /// Most candidates one heartbeat's decisions looked at.
    pub most_candidates: u64,
}

/// Runs a job of `tasks` maps to the end on an in-process coordinator.
pub fn heartbeats(tasks: usize) -> BeatCost {
    let cfg = CoordinatorConfig {
        listen: "127.0.0.1:0".parse().expect("an address"),
        state_dir: std::path::PathBuf::new(),
        secret: sluice_proto::auth::Secret::new(&[7; 32]).expect("a secret"),
        heartbeat: Duration::from_millis(500),
        worker_timeout: Duration::from_secs(3600),
        settings: Settings::default(),
        jobs: Arc::new(sluice_request::Registry::builtin()),
        placement: std::sync::Arc::new(RackAware),
        orphan_grace: Duration::from_secs(3600),
        scheduler: Scheduler::Fifo,
        preemption_timeout: None,
        http: None,
        history: 100,
        hardware: sluice_model::Hardware::defaults("a benchmark"),
        replication_streams: 2,
    };
    let mut st = State::new(
        Arc::new(cfg),
        1,
        Catalog::default(),
        BTreeMap::new(),
        Box::new(Fifo),
        At::now(),
    );
    let uids = ["a", "b", "c", "d"];
    let ids: Vec<WorkerId> = uids.iter().map(|u| register(&mut st, u)).collect();
    let mut d = dataset("in", tasks as u64);
    for (i, b) in d.files[0].blocks.iter_mut().enumerate() {
        b.replicas = vec![uids[i % uids.len()].to_owned()];
    }
    st.catalog.datasets.insert(d.name.clone(), d);
    let sub = Submission {
        request: sluice_request::JobRequest::new("wordcount", &(), "in", "out"),
        replication: 1,
        reducers: 2,
        side: Vec::new(),
        external: None,
        submission: String::new(),
        user: Default::default(),
    };
    st.handle(Event::Submit(sub), At::now());
    let job = *st.jobs.keys().next().expect("a job");
    let (mut times, mut most) = (Vec::new(), 0);
    while st.jobs[&job].is_running() {
        for &w in &ids {
            let reports = done_reports(&st, w);
            let before = st.jobs[&job].queues().examined();
            let t = Instant::now();
            let mut step = st.handle(Event::Heartbeat(beat(w, reports)), At::now());
            while let Some(write) = step.catalog.take() {
                let saved = Event::CatalogSaved {
                    write,
                    result: Ok(()),
                };
                step = st.handle(saved, At::now());
            }
            times.push(t.elapsed());
            most = most.max(st.jobs[&job].queues().examined() - before);
        }
    }
    let worst = times.iter().copied().max().unwrap_or_default();
    BeatCost {
        tasks,
        beats: times.len(),
        median: median(times),
        worst,
        most_candidates: most,
    }
}

fn register(st: &mut State, uid: &str) -> WorkerId {
    let r = proto::RegisterRequest {
        protocol_version: sluice_proto::PROTOCOL_VERSION,
        data_addr: format!("{uid}:1"),
        datacenter: "dc1".into(),
        rack: "r1".into(),
        slots: 2,
        uid: uid.into(),
        ..Default::default()
    };
    match st.handle(Event::Register(r), At::now()).answer {
        Ok(Answer::Registered(reply)) => WorkerId(reply.worker_id),
        other => panic!("registering: {other:?}"),
    }
}

fn beat(w: WorkerId, reports: Vec<proto::TaskReport>) -> proto::HeartbeatRequest {
    proto::HeartbeatRequest {
        worker_id: w.0,
        epoch: 1,
        reports,
        ..Default::default()
    }
}

/// A successful report of every attempt running on `w`.
fn done_reports(st: &State, w: WorkerId) -> Vec<proto::TaskReport> {
    let mut out = Vec::new();
    for job in st.jobs.values().filter(|j| j.is_running()) {
        for (worker, kind, index, attempt) in job.running_attempts() {
            if worker != w {
                continue;
            }
            let output = (kind == REDUCE).then(|| proto::BlockInfo {
                id: format!("j{}-r{index}-a{attempt}", job.id().0),
                len: 10,
                ..Default::default()
            });
            out.push(proto::TaskReport {
                task: Some(proto::TaskId {
                    job: job.id().0,
                    kind: kind.wire(),
                    index: index as u32,
                    attempt,
                }),
                ok: true,
                output,
                ..Default::default()
            });
        }
    }
    out
}

/// A data set of `blocks` blocks of 100 bytes (its block size), on worker
/// `a`.
fn dataset(name: &str, blocks: u64) -> DatasetMeta {
    DatasetMeta {
        name: DatasetName::new(name).expect("a valid name"),
        files: vec![FileMeta {
            name: "f".into(),
            blocks: (0..blocks)
                .map(|i| BlockMeta {
                    id: BlockId::new(format!("b{name}-{i}")).expect("a valid id"),
                    len: 100,
                    crc: 0,
                    replicas: vec!["a".into()],
                    corrupt: Vec::new(),
                })
                .collect(),
        }],
        created_ms: 0,
        origin: "bench".into(),
        replication: 1,
        block_size: 100,
        access: Default::default(),
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}
