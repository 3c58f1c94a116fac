//! `sluice bench cluster-sim`: the control plane at scale. A real
//! `sluice coordinator` process is driven by simulated workers
//! ([`workers`]) in processes of their own, over the real, signed
//! protocol; one job of `synthetic:M` maps and R reduces runs to its end.
//! The report says how busy the slots were, how fast attempts launched,
//! the heartbeats' round trips, and what the coordinator cost (CPU and
//! peak memory from its `/proc` entries), the simulators' own CPU apart.

mod stats;
pub mod workers;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use sluice_client::BlockingClient;
use sluice_proto::auth::Secret;
use sluice_proto::ids::JobId;
use sluice_request::JobRequest;
use sluice_tools::transport::TlsArgs;

use stats::SimStats;

/// `sluice bench` with the benchmarks that need the `sluice` binary
/// itself.
#[derive(Debug, Subcommand)]
pub enum BenchCmd {
    /// The control plane at scale: a real coordinator driven by N
    /// simulated workers over the real protocol; one job of M maps and R
    /// reduces of T ms each.
    ClusterSim(ClusterSimArgs),
    /// Simulated workers (started by cluster-sim).
    #[command(hide = true)]
    SimWorkers(workers::SimWorkersArgs),
    #[command(flatten)]
    Other(sluice_tools::pavlo_bench::BenchKind),
}

/// Settings of `sluice bench cluster-sim`.
#[derive(Debug, Args)]
pub struct ClusterSimArgs {
    /// Simulated workers.
    #[arg(long, default_value_t = 100)]
    pub workers: usize,
    /// Slots of each worker.
    #[arg(long, default_value_t = 4)]
    pub slots: u32,
    /// Maps of the job (`synthetic:MAPS`).
    #[arg(long, default_value_t = 10_000)]
    pub maps: usize,
    /// Reduces of the job.
    #[arg(long, default_value_t = 10)]
    pub reduces: u32,
    /// Mean time of an attempt, in ms.
    #[arg(long, default_value_t = 500)]
    pub task_ms: u64,
    /// Attempts last task-ms times 1 +- up to this fraction.
    #[arg(long, default_value_t = 0.2)]
    pub spread: f64,
    /// The coordinator's heartbeat interval, in ms.
    #[arg(long, default_value_t = 200)]
    pub heartbeat_ms: u64,
    /// A worker silent this long (ms) is lost.
    #[arg(long, default_value_t = 10_000)]
    pub worker_timeout_ms: u64,
    /// Mean bytes of a map's output.
    #[arg(long, default_value_t = 64 << 20)]
    pub map_output_bytes: u64,
    /// Interval between a worker's full block reports, in ms.
    #[arg(long, default_value_t = 60_000)]
    pub block_report_ms: u64,
    /// Processes the simulated workers run in [default: one per 2,500].
    #[arg(long)]
    pub sim_procs: Option<usize>,
    /// Workers that go silent at their first attempt (lost, their
    /// attempts run again elsewhere).
    #[arg(long, default_value_t = 0)]
    pub silent: usize,
    /// Let the coordinator launch backup attempts of stragglers.
    #[arg(long)]
    pub speculation: bool,
    /// Give up on the job after this many seconds.
    #[arg(long, default_value_t = 3600)]
    pub timeout_s: u64,
    /// Working directory (state, secret, certificates, logs) [default: a
    /// temporary one].
    #[arg(long)]
    pub work: Option<PathBuf>,
    /// Plaintext on every connection (by default the coordinator, the
    /// simulated workers and this process speak TLS with certificates of
    /// a CA made in WORK/tls).
    #[arg(long)]
    pub insecure: bool,
    /// Write the report here as JSON.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// What a simulated run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SimReport {
    pub workers: usize,
    pub slots: u32,
    pub maps: usize,
    pub reduces: u32,
    pub task_ms: u64,
    pub heartbeat_ms: u64,
    /// The job's end state (`succeeded`).
    pub job_state: String,
    /// Seconds from the submission's answer to the job's end.
    pub makespan_s: f64,
    /// Attempts times task-ms over the slots.
    pub ideal_makespan_s: f64,
    /// The ideal makespan over the measured one.
    pub slot_utilization: f64,
    /// Attempts the simulated workers were handed, and per second of the
    /// makespan.
    pub launches: u64,
    pub launches_per_s: f64,
    /// Attempts the coordinator's job report counts launched, and lost
    /// with their workers.
    pub coordinator_launched: u64,
    pub coordinator_lost_attempts: u64,
    /// Workers the coordinator declared lost.
    pub workers_lost: usize,
    /// Heartbeats answered.
    pub heartbeats: u64,
    /// Round trips of heartbeats that reported a finished attempt and
    /// were answered with another (measured by the simulated workers).
    pub heartbeat_p50_ms: f64,
    pub heartbeat_p99_ms: f64,
    /// How long after the last map's report the reduces knew every map
    /// output: the median and the longest, in ms.
    #[serde(default)]
    pub shuffle_lag_p50_ms: f64,
    #[serde(default)]
    pub shuffle_lag_max_ms: f64,
    /// Round trips of every heartbeat, held ones included (a held beat
    /// waits up to the heartbeat interval for work).
    pub heartbeat_all_p50_ms: f64,
    pub heartbeat_all_p99_ms: f64,
    /// The coordinator's CPU seconds during the job, and in all.
    pub coordinator_cpu_s: f64,
    pub coordinator_cpu_total_s: f64,
    pub coordinator_peak_rss_bytes: u64,
    /// The catalog's data sets and blocks at the end.
    pub catalog_datasets: u64,
    pub catalog_blocks: u64,
    /// Processes of simulated workers, their CPU seconds and the largest
    /// one's peak memory.
    pub sim_processes: usize,
    pub sim_cpu_s: f64,
    pub sim_peak_rss_bytes: u64,
    /// What the simulated workers counted.
    pub sim: SimStats,
}

/// Runs `sluice bench`.
pub fn bench(cmd: BenchCmd) -> anyhow::Result<()> {
    match cmd {
        BenchCmd::ClusterSim(a) => {
            let r = cluster_sim(&a)?;
            print_report(&r);
            if let Some(f) = &a.report {
                std::fs::write(f, serde_json::to_string_pretty(&r)? + "\n")?;
            }
            anyhow::ensure!(r.job_state == "succeeded", "the job {}", r.job_state);
            Ok(())
        }
        BenchCmd::SimWorkers(a) => workers::run(&a),
        BenchCmd::Other(k) => sluice_tools::pavlo_bench::run(k),
    }
}

/// Child processes, killed if the bench ends early.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs one simulated cluster and job.
pub fn cluster_sim(a: &ClusterSimArgs) -> anyhow::Result<SimReport> {
    anyhow::ensure!(
        a.workers > 0 && a.maps > 0,
        "--workers and --maps must be >= 1"
    );
    anyhow::ensure!(
        a.silent < a.workers,
        "--silent must leave a worker that runs"
    );
    let tmp = tempfile::tempdir()?;
    let work = a.work.clone().unwrap_or_else(|| tmp.path().to_owned());
    let _ = std::fs::remove_dir_all(work.join("state"));
    std::fs::create_dir_all(&work)?;
    let secret_file = work.join("secret");
    std::fs::write(&secret_file, Secret::generate())?;
    certify(&work, a.insecure)?;
    let mut coord = Children(vec![start_coordinator(a, &work, &secret_file)?]);
    let coord_pid = coord.0[0].id();
    let addr = wait_for_file(&work.join("addr"), &mut coord.0[0])?;
    let client = BlockingClient::connect(&addr, Secret::load(&secret_file)?)?;
    let procs = a
        .sim_procs
        .unwrap_or(a.workers.div_ceil(2500))
        .clamp(1, a.workers);
    let mut sims = Children(start_sims(a, procs, &addr, &work)?);
    wait_registered(&client, a.workers, &mut sims)?;
    let cpu0 = stats::cpu_s(coord_pid);
    let (job, state, makespan) = run_job(a, &client)?;
    let coordinator_cpu_s = stats::cpu_s(coord_pid) - cpu0;
    let catalog = client.list()?;
    let lost = client.info()?.workers.iter().filter(|w| !w.alive).count();
    let sim = stop_sims(&mut sims)?;
    let report = job_report(&client, job);
    let mut r = SimReport {
        workers: a.workers,
        slots: a.slots,
        maps: a.maps,
        reduces: a.reduces,
        task_ms: a.task_ms,
        heartbeat_ms: a.heartbeat_ms,
        job_state: state,
        makespan_s: makespan.as_secs_f64(),
        ideal_makespan_s: 0.0,
        slot_utilization: 0.0,
        launches: sim.launched_maps + sim.launched_reduces,
        launches_per_s: 0.0,
        coordinator_launched: report.as_ref().map_or(0, |r| r.attempts.launched.into()),
        coordinator_lost_attempts: report.as_ref().map_or(0, |r| r.attempts.lost.into()),
        workers_lost: lost,
        heartbeats: sim.heartbeats,
        heartbeat_p50_ms: sim.turnaround.quantile_ms(0.5),
        heartbeat_p99_ms: sim.turnaround.quantile_ms(0.99),
        shuffle_lag_p50_ms: sim.shuffle_lag_ms().0,
        shuffle_lag_max_ms: sim.shuffle_lag_ms().1,
        heartbeat_all_p50_ms: sim.beats.quantile_ms(0.5),
        heartbeat_all_p99_ms: sim.beats.quantile_ms(0.99),
        coordinator_cpu_s,
        coordinator_cpu_total_s: stats::cpu_s(coord_pid),
        coordinator_peak_rss_bytes: stats::peak_rss_bytes(coord_pid),
        catalog_datasets: catalog.len() as u64,
        catalog_blocks: catalog.iter().map(|d| d.blocks).sum(),
        sim_processes: procs,
        sim_cpu_s: sim.cpu_s,
        sim_peak_rss_bytes: sim.peak_rss_bytes,
        sim,
    };
    let tasks = a.maps as f64 + f64::from(a.reduces);
    let slots = (a.workers - a.silent) as f64 * f64::from(a.slots.max(1));
    r.ideal_makespan_s = tasks * a.task_ms as f64 / 1e3 / slots;
    r.slot_utilization = r.ideal_makespan_s / r.makespan_s.max(1e-9);
    r.launches_per_s = r.launches as f64 / r.makespan_s.max(1e-9);
    stop_coordinator(&mut coord);
    Ok(r)
}

/// Makes the run's CA in `work/tls` with the certificates of the
/// coordinator, the simulated workers and this process (whose transport
/// it sets); with `insecure`, sets plaintext.
fn certify(work: &Path, insecure: bool) -> anyhow::Result<()> {
    use sluice_proto::tls::{ca::Ca, Role, Tls};
    if insecure {
        sluice_proto::tls::install(None)?;
        return Ok(());
    }
    let at = work.join("tls");
    let _ = std::fs::remove_dir_all(&at);
    let ca = Ca::init(&at)?;
    let hosts = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
    ca.issue_to(&hosts, Role::Coordinator, &at.join("coordinator"))?;
    ca.issue_to(&hosts, Role::Worker, &at.join("sim-workers"))?;
    let me = ca.issue_to(&hosts, Role::Client, &at.join("client"))?;
    sluice_proto::tls::install(Some(Tls::load(&me)?))?;
    Ok(())
}

/// The run's TLS directory; none when it runs --insecure.
fn tls_dir(work: &Path, a: &ClusterSimArgs) -> Option<PathBuf> {
    (!a.insecure).then(|| work.join("tls"))
}

/// Starts `sluice coordinator` on a free loopback port, its state under
/// `work`, its log in `work/coordinator.log`.
fn start_coordinator(a: &ClusterSimArgs, work: &Path, secret: &Path) -> anyhow::Result<Child> {
    let log = std::fs::File::create(work.join("coordinator.log"))?;
    let mut c = Command::new(std::env::current_exe()?);
    c.arg("coordinator")
        .args(["--listen", "127.0.0.1:0"])
        .arg("--state-dir")
        .arg(work.join("state"))
        .arg("--secret-file")
        .arg(secret)
        .arg("--addr-file")
        .arg(work.join("addr"))
        .arg(format!("--heartbeat-ms={}", a.heartbeat_ms))
        .arg(format!("--worker-timeout-ms={}", a.worker_timeout_ms))
        .args(TlsArgs::child_flags(
            tls_dir(work, a).as_deref(),
            "coordinator",
        ))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    if !a.speculation {
        c.arg("--no-speculation");
    }
    let _ = std::fs::remove_file(work.join("addr"));
    Ok(c.spawn()?)
}

/// The contents of `f` once it exists (the coordinator's address).
fn wait_for_file(f: &Path, child: &mut Child) -> anyhow::Result<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(s) = std::fs::read_to_string(f) {
            return Ok(s.trim().to_owned());
        }
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("the coordinator ended before listening ({status})");
        }
        anyhow::ensure!(Instant::now() < deadline, "the coordinator did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `procs` processes of simulated workers sharing the workers.
fn start_sims(
    a: &ClusterSimArgs,
    procs: usize,
    addr: &str,
    work: &Path,
) -> anyhow::Result<Vec<Child>> {
    let secret = work.join("secret");
    let mut out = Vec::new();
    let mut first = 0;
    for p in 0..procs {
        let n = a.workers / procs + usize::from(p < a.workers % procs);
        let silent = a.silent.saturating_sub(first).min(n);
        let child = Command::new(std::env::current_exe()?)
            .args(["bench", "sim-workers", "--coordinator", addr])
            .arg("--secret-file")
            .arg(&secret)
            .arg(format!("--workers={n}"))
            .arg(format!("--first={first}"))
            .arg(format!("--slots={}", a.slots))
            .arg(format!("--task-ms={}", a.task_ms))
            .arg(format!("--spread={}", a.spread))
            .arg(format!("--map-output-bytes={}", a.map_output_bytes))
            .arg(format!("--block-report-ms={}", a.block_report_ms))
            .arg(format!("--silent={silent}"))
            .args(TlsArgs::child_flags(
                tls_dir(work, a).as_deref(),
                "sim-workers",
            ))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        out.push(child);
        first += n;
    }
    Ok(out)
}

/// Waits until `n` workers are live on the coordinator.
fn wait_registered(client: &BlockingClient, n: usize, sims: &mut Children) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120 + n as u64 / 20);
    loop {
        let live = client.info()?.workers.iter().filter(|w| w.alive).count();
        if live >= n {
            return Ok(());
        }
        for c in &mut sims.0 {
            if let Some(status) = c.try_wait()? {
                anyhow::bail!("a process of simulated workers ended ({status})");
            }
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {live} of {n} simulated workers registered"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Submits the job and waits for its end: its id, end state and
/// makespan.
fn run_job(
    a: &ClusterSimArgs,
    client: &BlockingClient,
) -> anyhow::Result<(JobId, String, Duration)> {
    let params = sluice_request::OhbParams {
        pairs_per_map: 1,
        pair_size: 16,
        ..Default::default()
    };
    let mut req = JobRequest::new("ohb", &params, &format!("synthetic:{}", a.maps), "sim-out");
    req.reducers = Some(a.reduces);
    req.overwrite = true;
    let t0 = Instant::now();
    let job = client.submit(&req, 1)?;
    let deadline = t0 + Duration::from_secs(a.timeout_s);
    loop {
        let s = client.wait(job, Duration::from_secs(5))?;
        if s.state != "running" {
            return Ok((job, s.state, t0.elapsed()));
        }
        anyhow::ensure!(Instant::now() < deadline, "the job ran past --timeout-s");
    }
}

/// The job's report from the coordinator's job history.
fn job_report(client: &BlockingClient, job: JobId) -> Option<sluice_proto::report::ClusterReport> {
    let s = client.wait(job, Duration::ZERO).ok()?;
    serde_json::from_str(&s.report_json).ok()
}

/// Closes the simulators' input and merges what they print.
fn stop_sims(sims: &mut Children) -> anyhow::Result<SimStats> {
    let mut all = SimStats::default();
    for c in std::mem::take(&mut sims.0) {
        let out = c.wait_with_output()?;
        let line = String::from_utf8_lossy(&out.stdout);
        let s: SimStats = serde_json::from_str(line.trim())
            .map_err(|e| anyhow::anyhow!("a simulator's counts: {e}"))?;
        all.merge(&s);
    }
    Ok(all)
}

/// Ends the coordinator (SIGTERM, as `sluice cluster down` does).
fn stop_coordinator(coord: &mut Children) {
    for c in &mut coord.0 {
        let _ = Command::new("kill").arg(c.id().to_string()).status();
        let _ = c.wait();
    }
}

/// Prints the report.
fn print_report(r: &SimReport) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(
        o,
        "{} workers x {} slots, {} maps + {} reduces of {} ms, heartbeat {} ms: job {}",
        r.workers, r.slots, r.maps, r.reduces, r.task_ms, r.heartbeat_ms, r.job_state
    );
    let _ = writeln!(
        o,
        "  makespan {:.2} s (ideal {:.2} s): slot utilization {:.1}%, {} launches, {:.0}/s",
        r.makespan_s,
        r.ideal_makespan_s,
        r.slot_utilization * 100.0,
        r.launches,
        r.launches_per_s
    );
    let _ = writeln!(
        o,
        "  heartbeats {}: turnaround p50 {:.2} ms, p99 {:.2} ms (all beats, held ones too: \
         p50 {:.1} ms, p99 {:.1} ms)",
        r.heartbeats,
        r.heartbeat_p50_ms,
        r.heartbeat_p99_ms,
        r.heartbeat_all_p50_ms,
        r.heartbeat_all_p99_ms
    );
    if r.reduces > 0 {
        let _ = writeln!(
            o,
            "  reduces knew every map output {:.0} ms (median) and {:.0} ms (last) after the \
             last map was reported; {} MapOutputs calls, p50 {:.1} ms, p99 {:.1} ms",
            r.shuffle_lag_p50_ms,
            r.shuffle_lag_max_ms,
            r.sim.map_output_calls,
            r.sim.map_output_rtt.quantile_ms(0.5),
            r.sim.map_output_rtt.quantile_ms(0.99)
        );
    }
    let _ = writeln!(
        o,
        "  coordinator: {:.2} CPU s during the job ({:.2} in all), peak RSS {}; \
         catalog {} data sets, {} blocks; workers lost {}",
        r.coordinator_cpu_s,
        r.coordinator_cpu_total_s,
        sluice_tools::units::human(r.coordinator_peak_rss_bytes),
        r.catalog_datasets,
        r.catalog_blocks,
        r.workers_lost
    );
    let _ = writeln!(
        o,
        "  simulators: {} processes, {:.2} CPU s, peak RSS {}",
        r.sim_processes,
        r.sim_cpu_s,
        sluice_tools::units::human(r.sim_peak_rss_bytes)
    );
}
