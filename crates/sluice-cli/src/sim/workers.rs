//! `sluice bench sim-workers`: many simulated workers in one process,
//! speaking the real protocol to a coordinator through the signed gRPC
//! client `sluice worker` uses ([`sluice_proto::signed::connect`]).
//!
//! Each simulated worker registers, keeps one heartbeat outstanding (the
//! coordinator holds it until there is work), and sends a full block
//! report every `--block-report-ms`, as a worker does. An attempt it is
//! handed sleeps `--task-ms` (spread by up to `--spread` either way, the
//! same for the same attempt in every run), then is reported at once on a
//! heartbeat of its own: a map with an output of a sampled size split
//! between the reducers (its registration as a map output), a reduce
//! after `MapOutputs` listed every map output, with an output block the
//! worker then holds. The process runs until its standard input closes,
//! then prints what it counted ([`SimStats`]) as one JSON line.

use std::collections::HashSet;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use clap::Args;
use sluice_proto::auth::Secret;
use sluice_proto::ids::TaskKind;
use sluice_proto::proto::{self, TaskAssignment, TaskReport};
use sluice_proto::signed::{connect, Rpc};

use super::stats::{self, SimStats};

/// Settings of a process of simulated workers.
#[derive(Debug, Clone, Args)]
pub struct SimWorkersArgs {
    /// The coordinator's address.
    #[arg(long)]
    pub coordinator: String,
    /// The cluster's shared secret file.
    #[arg(long)]
    pub secret_file: PathBuf,
    /// Simulated workers in this process.
    #[arg(long)]
    pub workers: usize,
    /// The number of this process's first worker (uids `sim-N`).
    #[arg(long, default_value_t = 0)]
    pub first: usize,
    /// Slots of each worker.
    #[arg(long, default_value_t = 4)]
    pub slots: u32,
    /// Mean time of a simulated attempt, in ms.
    #[arg(long, default_value_t = 500)]
    pub task_ms: u64,
    /// Attempts last task-ms times 1 +- up to this fraction.
    #[arg(long, default_value_t = 0.2)]
    pub spread: f64,
    /// Mean bytes of a map's output (sampled between half and one and a
    /// half of it).
    #[arg(long, default_value_t = 64 << 20)]
    pub map_output_bytes: u64,
    /// Interval between full block reports, in ms.
    #[arg(long, default_value_t = 60_000)]
    pub block_report_ms: u64,
    /// This many of the process's workers go silent at their first
    /// attempt: no heartbeat again, the attempt never reported.
    #[arg(long, default_value_t = 0)]
    pub silent: usize,
    /// Seed of the spread and the sampled sizes.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// TLS: the simulated workers' certificate (a worker's), or
    /// --insecure.
    #[command(flatten)]
    pub tls: sluice_tools::transport::TlsArgs,
}

/// Runs the simulated workers until standard input closes, then prints
/// their counts as JSON.
pub fn run(a: &SimWorkersArgs) -> anyhow::Result<()> {
    let secret = Secret::load(&a.secret_file)?;
    a.tls.install("worker", None)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let stats = Arc::new(Mutex::new(SimStats::default()));
    let a = Arc::new(a.clone());
    for i in 0..a.workers {
        let (a, secret, stats) = (a.clone(), secret.clone(), stats.clone());
        rt.spawn(async move {
            if let Err(e) = worker(i, a, secret, stats.clone()).await {
                eprintln!("simulated worker {i}: {e}");
                lock(&stats).errors += 1;
            }
        });
    }
    // Until the bench closes our input (or ends).
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    rt.shutdown_background();
    let mut s = lock(&stats).clone();
    s.cpu_s = stats::cpu_s(std::process::id());
    s.peak_rss_bytes = stats::peak_rss_bytes(std::process::id());
    println!("{}", serde_json::to_string(&s)?);
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One simulated worker.
struct Sim {
    rpc: Rpc,
    a: Arc<SimWorkersArgs>,
    stats: Arc<Mutex<SimStats>>,
    uid: String,
    /// Its number in the whole simulation.
    n: usize,
    /// Worker id and epoch of its registration.
    session: Mutex<(u64, u64)>,
    /// Blocks it holds (its reduces' outputs).
    blocks: Mutex<Vec<String>>,
    /// Reports whose heartbeat failed, sent with the next one.
    pending: Mutex<Vec<TaskReport>>,
    /// Attempts the coordinator killed: never reported.
    killed: Mutex<HashSet<(u64, u32, u32, u32)>>,
    /// The coordinator asked it to register again.
    reregister: AtomicBool,
    /// It goes silent at its first attempt.
    silent: bool,
    /// It has gone silent.
    gone: AtomicBool,
}

async fn worker(
    i: usize,
    a: Arc<SimWorkersArgs>,
    secret: Secret,
    stats: Arc<Mutex<SimStats>>,
) -> anyhow::Result<()> {
    let rpc = connect(&a.coordinator, &secret, Duration::from_secs(60)).await?;
    let n = a.first + i;
    let sim = Arc::new(Sim {
        rpc,
        silent: i < a.silent,
        a,
        stats,
        uid: format!("sim-{n}"),
        n,
        session: Mutex::new((0, 0)),
        blocks: Mutex::new(Vec::new()),
        pending: Mutex::new(Vec::new()),
        killed: Mutex::new(HashSet::new()),
        reregister: AtomicBool::new(false),
        gone: AtomicBool::new(false),
    });
    register(&sim).await?;
    held_beats(&sim).await
}

/// Registers (again), with the blocks it holds.
async fn register(sim: &Sim) -> anyhow::Result<()> {
    let req = proto::RegisterRequest {
        protocol_version: sluice_proto::PROTOCOL_VERSION,
        data_addr: format!("127.0.0.1:{}", 1 + sim.n % 65_000),
        datacenter: "dc1".into(),
        rack: format!("rack{}", sim.n / 40),
        slots: sim.a.slots,
        uid: sim.uid.clone(),
        pid: std::process::id(),
        blocks: lock(&sim.blocks).clone(),
        memory: 8 << 30,
        host: sim.uid.clone(),
        free_bytes: 1 << 40,
        ..Default::default()
    };
    let r = sim.rpc.clone().register(req).await?.into_inner();
    *lock(&sim.session) = (r.worker_id, r.epoch);
    lock(&sim.stats).registered += 1;
    Ok(())
}

/// The heartbeat kept outstanding, with a block report when one is due,
/// until the worker goes silent.
async fn held_beats(sim: &Arc<Sim>) -> anyhow::Result<()> {
    let every = Duration::from_millis(sim.a.block_report_ms.max(10));
    let mut next_report = Instant::now() + every;
    loop {
        if sim.gone.load(Ordering::Relaxed) {
            return Ok(());
        }
        if sim.reregister.swap(false, Ordering::Relaxed) {
            register(sim).await?;
        }
        let due = Instant::now() >= next_report;
        let reports = std::mem::take(&mut *lock(&sim.pending));
        if beat(sim, reports, due).await && due {
            next_report = Instant::now() + every;
        }
    }
}

/// One heartbeat carrying `reports` (and the blocks held, when
/// `block_report`); does what its answer asks. False when it failed.
async fn beat(sim: &Arc<Sim>, reports: Vec<TaskReport>, block_report: bool) -> bool {
    if sim.gone.load(Ordering::Relaxed) {
        return false;
    }
    let (worker_id, epoch) = *lock(&sim.session);
    let carried = !reports.is_empty();
    let req = proto::HeartbeatRequest {
        worker_id,
        epoch,
        reports: reports.clone(),
        block_report,
        blocks: if block_report {
            lock(&sim.blocks).clone()
        } else {
            Vec::new()
        },
        free_bytes: 1 << 40,
        ..Default::default()
    };
    let t0 = Instant::now();
    let answer = sim.rpc.clone().heartbeat(req).await;
    let rtt = t0.elapsed();
    let reply = match answer {
        Ok(r) => r.into_inner(),
        Err(e) => {
            lock(&sim.stats).failed_beats += 1;
            eprintln!("{}: heartbeat failed: {}", sim.uid, e.message());
            lock(&sim.pending).extend(reports);
            tokio::time::sleep(Duration::from_millis(100)).await;
            return false;
        }
    };
    {
        let mut s = lock(&sim.stats);
        s.heartbeats += 1;
        s.block_reports += u64::from(block_report);
        s.beats.add(rtt);
        if carried && !reply.tasks.is_empty() {
            s.turnaround.add(rtt);
        }
    }
    if reply.reregister {
        lock(&sim.pending).extend(reports);
        sim.reregister.store(true, Ordering::Relaxed);
        return false;
    }
    handle_reply(sim, reply);
    true
}

/// Does what a heartbeat's answer asks: kills, block deletions, attempts.
fn handle_reply(sim: &Arc<Sim>, r: proto::HeartbeatReply) {
    for k in &r.kills {
        lock(&sim.killed).insert(key(k));
    }
    if !r.delete_blocks.is_empty() {
        lock(&sim.blocks).retain(|b| !r.delete_blocks.contains(b));
    }
    for t in &r.tasks {
        let mut s = lock(&sim.stats);
        if t.task.is_some_and(|id| id.kind == TaskKind::Reduce.wire()) {
            s.launched_reduces += 1;
        } else {
            s.launched_maps += 1;
        }
    }
    if sim.silent && !r.tasks.is_empty() {
        // Its host died with its first attempts.
        sim.gone.store(true, Ordering::Relaxed);
        lock(&sim.stats).silenced += 1;
        return;
    }
    for t in r.tasks {
        tokio::spawn(attempt(sim.clone(), t));
    }
}

fn key(t: &proto::TaskId) -> (u64, u32, u32, u32) {
    (t.job, t.kind, t.index, t.attempt)
}

/// Runs one simulated attempt and reports it on a heartbeat of its own.
async fn attempt(sim: Arc<Sim>, t: TaskAssignment) {
    let id = t.task.unwrap_or_default();
    let reduce = id.kind == TaskKind::Reduce.wire();
    let t0 = Instant::now();
    if reduce && !all_map_outputs(&sim, id.job).await {
        return;
    }
    let h = mix(sim.a.seed ^ mix(id.job ^ (u64::from(id.kind) << 32) ^ u64::from(id.index)));
    let spread = sim.a.spread.clamp(0.0, 1.0) * (2.0 * unit(h) - 1.0);
    let ms = sim.a.task_ms as f64 * (1.0 + spread);
    tokio::time::sleep(Duration::from_secs_f64(ms.max(0.0) / 1e3)).await;
    if sim.gone.load(Ordering::Relaxed) || lock(&sim.killed).remove(&key(&id)) {
        return;
    }
    let size = (sim.a.map_output_bytes as f64 * (0.5 + unit(mix(h)))) as u64;
    let mut report = TaskReport {
        task: Some(id),
        ok: true,
        seconds: t0.elapsed().as_secs_f64(),
        output_bytes: size,
        output_records: size / 100,
        counters: counters(reduce, size),
        ..Default::default()
    };
    if reduce {
        report.output = Some(proto::BlockInfo {
            id: t.output_block.clone(),
            len: size,
            ..Default::default()
        });
        lock(&sim.blocks).push(t.output_block);
    } else {
        report.partition_bytes = split(size, t.reducers);
    }
    counted(&sim, reduce, size);
    if !reduce {
        let mut s = lock(&sim.stats);
        s.last_map_sent_ms = s.last_map_sent_ms.max(stats::epoch_ms());
    }
    beat(&sim, vec![report], false).await;
}

/// The counters a real task of `size` output bytes reports (those a word
/// count's map or reduce sets), so that the coordinator keeps as much per
/// attempt as it would in a real job.
fn counters(reduce: bool, size: u64) -> std::collections::HashMap<String, u64> {
    use sluice_api::TaskCounter as C;
    let (records, bytes) = (size / 100, size);
    let names: &[(C, u64)] = if reduce {
        &[
            (C::ShuffleBytes, bytes),
            (C::ReduceInputGroups, records / 2),
            (C::ReduceInputRecords, records),
            (C::ReduceOutputRecords, records / 2),
        ]
    } else {
        &[
            (C::MapInputRecords, records * 4),
            (C::MapInputBytes, bytes * 4),
            (C::MapOutputRecords, records * 2),
            (C::MapOutputBytes, bytes * 2),
            (C::CombineInputRecords, records * 2),
            (C::CombineOutputRecords, records),
            (C::SpilledRecords, records),
            (C::SpilledBytes, bytes),
            (C::MapOutputWritten, bytes),
        ]
    };
    names
        .iter()
        .map(|(c, v)| (c.name().to_owned(), *v))
        .collect()
}

/// Counts an attempt reported done.
fn counted(sim: &Sim, reduce: bool, size: u64) {
    let mut s = lock(&sim.stats);
    if reduce {
        s.reported_reduces += 1;
        s.reduce_output_bytes += size;
    } else {
        s.reported_maps += 1;
        s.map_output_bytes += size;
    }
}

/// Waits, as a reduce's shuffle does, until `MapOutputs` lists every map
/// output of `job`; false when the job ended or the worker went silent.
async fn all_map_outputs(sim: &Sim, job: u64) -> bool {
    let (mut log, mut since) = (0, 0);
    let mut have: Vec<bool> = Vec::new();
    let mut known = 0u32;
    let mut addrs = sluice_proto::outputs::OutputAddrs::default();
    loop {
        if sim.gone.load(Ordering::Relaxed) {
            return false;
        }
        let req = proto::MapOutputsRequest {
            job,
            known,
            wait_ms: 2000,
            log,
            since,
            addr_table: true,
            addrs_known: addrs.known(),
            columns: true,
        };
        lock(&sim.stats).map_output_calls += 1;
        let t0 = Instant::now();
        let answer = sim.rpc.clone().map_outputs(req).await;
        lock(&sim.stats).map_output_rtt.add(t0.elapsed());
        match answer {
            Ok(r) => {
                let r = r.into_inner();
                if r.aborted {
                    return false;
                }
                let columns = r.output_maps.iter().zip(&r.output_workers);
                let listed = r.outputs.iter().map(|o| (&o.map, &o.worker));
                let places: Vec<(u32, u32)> =
                    columns.chain(listed).map(|(&m, &w)| (m, w)).collect();
                let checked = sluice_proto::outputs::check_columns(&r)
                    .and_then(|()| addrs.check(r.addrs_from, r.addrs, places.iter().copied()));
                if checked.is_err() {
                    lock(&sim.stats).errors += 1;
                }
                have.resize(r.maps as usize, false);
                for &(m, _) in &places {
                    if let Some(h) = have.get_mut(m as usize).filter(|h| !**h) {
                        *h = true;
                        known += 1;
                    }
                }
                (log, since) = (r.log, r.next);
                if known >= r.maps {
                    lock(&sim.stats).shuffle_known_ms.push(stats::epoch_ms());
                    return true;
                }
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// `size` bytes split between `parts` partitions as evenly as can be.
fn split(size: u64, parts: u32) -> Vec<u64> {
    let parts = u64::from(parts.max(1));
    (0..parts)
        .map(|p| size / parts + u64::from(p < size % parts))
        .collect()
}

/// SplitMix64's mixing step.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A number in [0, 1) from a hash.
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_adds_up() {
        assert_eq!(split(10, 3), vec![4, 3, 3]);
        assert_eq!(split(7, 0), vec![7]);
        assert_eq!(split(1000, 7).iter().sum::<u64>(), 1000);
    }

    #[test]
    fn units_stay_in_range_and_spread() {
        let v: Vec<f64> = (0..1000).map(|i| unit(mix(i))).collect();
        assert!(v.iter().all(|u| (0.0..1.0).contains(u)));
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        assert!((0.45..0.55).contains(&mean), "{mean}");
    }
}
