//! A reduce attempt: it polls the coordinator for finished map outputs,
//! fetches its partition of each (a few fetches at a time, counted per
//! source as the bytes arrive), reports fetch failures so that the map is
//! run again, then merges and reduces, and stores its output as a block.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sluice_engine::tasks::{self, TaskOutput};
use sluice_proto::data::{self, Request as DataRequest};
use sluice_proto::proto::{self, TaskAssignment, TaskReport};
use sluice_proto::ClusterError;

use crate::blocks;
use crate::shared::Shared;
use crate::tasks::AttemptKey;

use super::failure::engine_failure;
use super::job::task_job;

type Result<T> = std::result::Result<T, ClusterError>;

/// How long a reducer asks the coordinator to hold its map outputs call
/// for more (ms).
const MAP_OUTPUTS_WAIT_MS: u64 = 2000;

/// Concurrent shuffle fetches per reduce task (bounds in-flight bytes).
const PARALLEL_FETCHES: usize = 4;

pub(super) fn run_reduce(
    shared: &Shared,
    a: &TaskAssignment,
    report: &mut TaskReport,
) -> Result<TaskOutput> {
    let id = a.task.unwrap_or_default();
    let (spec, cfg) = task_job(shared, a)?;
    report.memory_bytes = cfg.memory;
    let dir = shared
        .layout
        .work_dir(id.job)
        .join(format!("r{}-a{}", id.index, id.attempt));
    let inputs = dir.join("in");
    std::fs::create_dir_all(&inputs).map_err(|e| ClusterError::io("creating", &inputs, e))?;
    let t = Instant::now();
    let fetched = shuffle(shared, a, &inputs);
    if let Some(reads) = shared.tasks().remote_reads(AttemptKey::from(&id)) {
        report.remote_reads = reads;
    }
    let fetched = fetched?;
    report.fetch_seconds = t.elapsed().as_secs_f64();
    let out_dir = dir.join("out");
    let o = tasks::reduce_task(&spec, &cfg, id.index, fetched, &out_dir).map_err(engine_failure)?;
    let file = out_dir.join(format!("part-r-{:05}", id.index));
    report.output = Some(blocks::store_output(shared, a, &file)?);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(o)
}

/// Fetches this reducer's partition of every map output into `dir`.
fn shuffle(shared: &Shared, a: &TaskAssignment, dir: &Path) -> Result<Vec<PathBuf>> {
    let id = a.task.unwrap_or_default();
    let mut have: Vec<Option<PathBuf>> = vec![None; a.maps as usize];
    let mut cursor = Cursor::default();
    while have.iter().any(Option::is_none) {
        not_killed(shared, a)?;
        cursor.known = have.iter().filter(|h| h.is_some()).count() as u32;
        let todo: Vec<proto::MapOutput> = (map_outputs(shared, a, &mut cursor)?.into_iter())
            .filter(|o| have.get(o.map as usize).is_some_and(Option::is_none))
            .collect();
        let results = fetch_all(shared, a, &todo, dir);
        // Fetches stopped because the attempt was killed blame no map.
        not_killed(shared, a)?;
        let mut failed = false;
        for (o, res) in todo.iter().zip(results) {
            match res {
                Ok(p) => have[o.map as usize] = Some(p),
                Err(e) if fetch_blame(&e) == Blame::ThisAttempt => return Err(e),
                Err(e) => {
                    failed = true;
                    report_fetch_failure(shared, id.job, o, &e);
                }
            }
        }
        if failed {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(have.into_iter().flatten().collect())
}

/// Fails a killed attempt.
fn not_killed(shared: &Shared, a: &TaskAssignment) -> Result<()> {
    let k = AttemptKey::from(&a.task.unwrap_or_default());
    if shared.tasks().is_cancelled(k) {
        return Err(ClusterError::Remote("task killed".into()));
    }
    Ok(())
}

/// Where a reducer is in its job's list of map outputs: how many it has
/// fetched, the list's name and position from the last reply (so a call
/// sends only what is new; see `MapOutputsRequest`), and the job's table
/// of the maps' addresses as far as it has been sent.
#[derive(Debug, Default)]
struct Cursor {
    known: u32,
    log: u64,
    since: u64,
    addrs: sluice_proto::outputs::OutputAddrs,
}

/// The finished map outputs of `a`'s job that are new to `cursor`, as the
/// coordinator lists them (it waits up to two seconds for one). Following one of several coordinators, a call that finds none
/// answering is asked again (of the coordinator the heartbeats follow by
/// then) until one answers or the attempt is killed: the attempt goes on
/// under the coordinator that takes over.
fn map_outputs(
    shared: &Shared,
    a: &TaskAssignment,
    cursor: &mut Cursor,
) -> Result<Vec<proto::MapOutput>> {
    let job = a.task.unwrap_or_default().job;
    let req = proto::MapOutputsRequest {
        job,
        known: cursor.known,
        wait_ms: MAP_OUTPUTS_WAIT_MS,
        log: cursor.log,
        since: cursor.since,
        addr_table: true,
        addrs_known: cursor.addrs.known(),
        columns: true,
    };
    let several = shared.coordinator.list().several();
    let mut failures = 0;
    let r = loop {
        let mut rpc = shared.rpc();
        let call = async move { rpc.map_outputs(req).await };
        let answer = if several {
            let deadline = Duration::from_millis(MAP_OUTPUTS_WAIT_MS) + Duration::from_secs(5);
            shared
                .rt
                .block_on(async { tokio::time::timeout(deadline, call).await })
                .unwrap_or_else(|_| Err(tonic::Status::unavailable("no answer in time")))
        } else {
            shared.rt.block_on(call)
        };
        match answer {
            Ok(r) => break r.into_inner(),
            Err(s)
                if several
                    && matches!(s.code(), tonic::Code::Unavailable | tonic::Code::Unknown) =>
            {
                failures += 1;
                not_killed(shared, a)?;
                std::thread::sleep(crate::outbox::backoff(failures));
            }
            Err(s) => return Err(s.into()),
        }
    };
    if r.aborted {
        return Err(ClusterError::Remote("the job ended".into()));
    }
    cursor.log = r.log;
    cursor.since = r.next;
    let mut r = r;
    let mut outputs = sluice_proto::outputs::outputs(&mut r)?;
    cursor.addrs.resolve(r.addrs_from, r.addrs, &mut outputs)?;
    Ok(outputs)
}

/// Whom a failed fetch blames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Blame {
    /// This reduce attempt: it could not store what it fetched (its own
    /// disk, full or failing); it fails, and the map output stands.
    ThisAttempt,
    /// The map output: unreachable, refused or damaged; the coordinator
    /// recomputes the map.
    MapOutput,
}

/// The one place that decides whom a fetch failure blames.
fn fetch_blame(e: &ClusterError) -> Blame {
    match e {
        ClusterError::Io { .. } | ClusterError::NoSpace(_) => Blame::ThisAttempt,
        _ => Blame::MapOutput,
    }
}

/// Fetches `todo` a few at a time, counting the bytes from each source
/// in the attempt's watches as they arrive.
fn fetch_all(
    shared: &Shared,
    a: &TaskAssignment,
    todo: &[proto::MapOutput],
    dir: &Path,
) -> Vec<Result<PathBuf>> {
    let id = a.task.unwrap_or_default();
    let addrs = todo.iter().map(|o| o.addr.as_str());
    let watches = shared.tasks().watches(AttemptKey::from(&id), addrs);
    let next = AtomicUsize::new(0);
    let fetch = |i: usize| {
        let o = &todo[i];
        let path = dir.join(format!("m{:05}.run", o.map));
        let req = DataRequest::Fetch {
            job: id.job,
            map: o.map,
            attempt: o.attempt,
            part: id.index,
        };
        data::fetch(&o.addr, &a.job_token, &req, &path, &watches[i]).map(|_| path)
    };
    let mut results: Vec<Option<Result<PathBuf>>> = todo.iter().map(|_| None).collect();
    std::thread::scope(|s| {
        let fetchers: Vec<_> = (0..PARALLEL_FETCHES.min(todo.len()))
            .map(|_| s.spawn(|| fetch_next(&next, todo.len(), fetch)))
            .collect();
        for f in fetchers {
            for (i, r) in f.join().expect("a fetch thread panicked") {
                results[i] = Some(r);
            }
        }
    });
    results
        .into_iter()
        .map(|r| r.expect("every fetch ran"))
        .collect()
}

/// Runs `fetch` on the next index below `n` not taken yet, until none is
/// left; returns each index with its result.
fn fetch_next<T>(next: &AtomicUsize, n: usize, fetch: impl Fn(usize) -> T) -> Vec<(usize, T)> {
    let mut done = Vec::new();
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            return done;
        }
        done.push((i, fetch(i)));
    }
}

fn report_fetch_failure(shared: &Shared, job: u64, o: &proto::MapOutput, e: &ClusterError) {
    tracing::warn!("fetch of map {} from {} failed: {e}", o.map, o.addr);
    let req = proto::FetchFailedRequest {
        job,
        map: o.map,
        attempt: o.attempt,
        reason: format!("{} ({e})", o.addr),
    };
    let mut rpc = shared.rpc();
    let _ = shared
        .rt
        .block_on(async move { rpc.fetch_failed(req).await });
}
