//! The cluster commands: `coordinator`, `worker`, `cluster up/down`,
//! `put`, `ls`, `get`, `rm`, `submit`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use sluice_api::JobSpec;
use sluice_cluster::auth::Secret;
use sluice_cluster::catalog::RackAware;
use sluice_cluster::client::{Client, PutOptions};
use sluice_cluster::coordinator::{self, CoordinatorConfig};
use sluice_cluster::embedded;
use sluice_cluster::report::ClusterReport;
use sluice_cluster::sample::Sample;
use sluice_cluster::worker::{self, WorkerConfig};
use sluice_cluster::JobFactory;
use sluice_engine::EngineConfig;
use sluice_formats::input::Split;
use sluice_jobs::pavlo;

use crate::{units, InputFormat, JobName, JoinForm, RunArgs};

/// Where a client finds the cluster.
#[derive(Debug, Args, Clone)]
pub struct Conn {
    /// Coordinator address [default: the one in CLUSTER/cluster.json].
    #[arg(long)]
    coordinator: Option<String>,
    /// Directory of a `sluice cluster up` cluster.
    #[arg(long, default_value = "sluice-cluster")]
    cluster: PathBuf,
    /// Shared secret file [default: CLUSTER/secret, or $SLUICE_SECRET].
    #[arg(long)]
    secret_file: Option<PathBuf>,
}

impl Conn {
    /// A connection by address, or by a `cluster up` directory.
    pub fn new(
        coordinator: Option<String>,
        cluster: Option<PathBuf>,
        secret_file: Option<PathBuf>,
    ) -> Conn {
        Conn {
            coordinator,
            cluster: cluster.unwrap_or_else(|| "sluice-cluster".into()),
            secret_file,
        }
    }
}

/// Coordinator settings.
#[derive(Debug, Args)]
pub struct CoordinatorArgs {
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:7070")]
    listen: SocketAddr,
    /// Directory for the catalog, epoch and job records.
    #[arg(long)]
    state_dir: PathBuf,
    /// Shared secret file [default: $SLUICE_SECRET].
    #[arg(long)]
    secret_file: Option<PathBuf>,
    /// Write the bound address to this file once listening.
    #[arg(long)]
    addr_file: Option<PathBuf>,
    /// Heartbeat interval in milliseconds.
    #[arg(long, default_value_t = 200)]
    heartbeat_ms: u64,
    /// A worker silent this long (ms) is lost.
    #[arg(long, default_value_t = 5000)]
    worker_timeout_ms: u64,
    /// Failures of one task before its job fails.
    #[arg(long, default_value_t = 4)]
    max_attempts: u32,
    /// How long (ms) a map waits for a worker holding its block.
    #[arg(long, default_value_t = 3000)]
    locality_wait_ms: u64,
    /// Fraction of maps done before reduces start.
    #[arg(long, default_value_t = 0.8)]
    slowstart: f64,
    /// Never launch backup attempts of stragglers.
    #[arg(long)]
    no_speculation: bool,
    /// A task this many times slower than its phase's median is a straggler.
    #[arg(long, default_value_t = 1.5)]
    speculative_slowdown: f64,
    /// A block no data set, put or job knows is deleted from its worker
    /// once it has been reported this long (ms).
    #[arg(long, default_value_t = 600_000)]
    orphan_grace_ms: u64,
}

/// Worker settings.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The coordinator's address.
    #[arg(long)]
    coordinator: String,
    /// Data-plane address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Data-plane address other hosts use [default: the bound address].
    #[arg(long)]
    advertise: Option<String>,
    /// Where blocks, map outputs and scratch files go.
    #[arg(long)]
    data_dir: PathBuf,
    #[arg(long, default_value = "dc1")]
    datacenter: String,
    #[arg(long, default_value = "rack1")]
    rack: String,
    /// Concurrent map tasks (and, separately, reduce tasks) [default: cores].
    #[arg(long)]
    slots: Option<u32>,
    /// Memory this worker's tasks share: each of its map and reduce slots
    /// gets MEMORY / (2 x slots) [default: half of this host's memory].
    #[arg(long, value_parser = units::parse_size)]
    memory: Option<u64>,
    /// Shared secret file [default: $SLUICE_SECRET].
    #[arg(long)]
    secret_file: Option<PathBuf>,
    /// Block scanner read rate (bytes/s); 0 turns the scanner off.
    #[arg(long, default_value = "16MiB/s", value_parser = units::parse_rate)]
    scan_rate: u64,
    /// Seconds between the starts of two scans of every stored block.
    #[arg(long, default_value_t = 21_600.0)]
    scan_period_s: f64,
    /// Interval between block reports (every stored block) in ms.
    #[arg(long, default_value_t = 60_000)]
    block_report_ms: u64,
}

#[derive(Debug, Subcommand)]
pub enum ClusterCmd {
    /// Start a coordinator and workers on this host (loopback).
    Up {
        /// Worker processes.
        #[arg(long, default_value_t = 2)]
        workers: u32,
        /// Directory for the cluster's state, data, logs and cluster.json.
        #[arg(long, default_value = "sluice-cluster")]
        dir: PathBuf,
        /// Slots per worker [default: cores / workers, at least 1].
        #[arg(long)]
        slots: Option<u32>,
        /// Extra coordinator flags, e.g. "--worker-timeout-ms 2000".
        #[arg(long, default_value = "", allow_hyphen_values = true)]
        coordinator_flags: String,
        /// Extra flags for every worker, e.g. "--scan-period-s 60".
        #[arg(long, default_value = "", allow_hyphen_values = true)]
        worker_flags: String,
    },
    /// Stop the processes of a `cluster up`.
    Down {
        #[arg(long, default_value = "sluice-cluster")]
        dir: PathBuf,
    },
    /// Show the workers.
    Status(Conn),
}

/// `sluice put`.
#[derive(Debug, Args)]
pub struct PutArgs {
    /// A file or a directory of files.
    path: PathBuf,
    /// Data set name.
    #[arg(long)]
    dataset: String,
    /// Block size (blocks end at line ends).
    #[arg(long, default_value = "128MB", value_parser = units::parse_size)]
    block_size: u64,
    /// Replicas per block.
    #[arg(long, default_value_t = 1)]
    replication: u32,
    /// Replace an existing data set.
    #[arg(long)]
    overwrite: bool,
    #[command(flatten)]
    conn: Conn,
}

/// `sluice submit`.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    conn: Conn,
    /// Replicas of each output block (before the job name): the job's
    /// output survives the loss of all but one of them.
    #[arg(long, default_value_t = 1)]
    replication: u32,
    /// The job and its `sluice run` flags; --input and --output name data sets.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    args: Vec<String>,
}

/// Builds cluster jobs exactly as `sluice run` builds local ones.
struct CliJobs;

impl JobFactory for CliJobs {
    fn memory_request(&self, args: &[String]) -> Option<u64> {
        RunArgs::parse(args).ok()?.memory
    }

    fn side_inputs(&self, args: &[String]) -> Result<Vec<String>, String> {
        let ra = RunArgs::parse(args).map_err(|e| e.to_string())?;
        if !ra.is_join(JoinForm::Fast) {
            return Ok(Vec::new());
        }
        let rankings = ra
            .rankings
            .clone()
            .ok_or("pavlo-join needs --rankings DATASET")?;
        Ok(vec![rankings])
    }

    fn build(
        &self,
        args: &[String],
        side: Option<&[Vec<PathBuf>]>,
    ) -> Result<(JobSpec, EngineConfig), String> {
        let ra = RunArgs::parse(args).map_err(|e| e.to_string())?;
        if ra.is_join(JoinForm::Fast) {
            return broadcast_join(&ra, side);
        }
        if ra.is_join(JoinForm::Baseline) {
            return Err("the baseline pavlo-join is three jobs: sluice submit chains them".into());
        }
        let sorts = matches!(ra.job, JobName::Sort | JobName::Terasort);
        if sorts && ra.split_points.is_none() && ra.reducers.unwrap_or(1) > 1 {
            return Err(format!(
                "{} on a cluster needs --split-points (sluice submit samples the data set \
                 and adds them)",
                crate::flag_name(&ra.job)
            ));
        }
        if ra.input_format != InputFormat::Text {
            return Err("cluster data sets are text; --input-format paged runs locally".into());
        }
        let cfg = crate::run::config(&ra);
        let (job, cfg, _) = crate::run::build_job(&ra, cfg).map_err(|e| format!("{e:#}"))?;
        Ok((job, cfg))
    }
}

/// The fast join on a cluster: every map task looks its visits up in a
/// table of the whole Rankings data set, which each worker copies and
/// builds once per job (the broadcast side input). The range-index
/// pruning of the local fast join has no cluster form: data sets hold
/// text only.
fn broadcast_join(
    ra: &RunArgs,
    side: Option<&[Vec<PathBuf>]>,
) -> Result<(JobSpec, EngineConfig), String> {
    let mut cfg = crate::run::config(ra);
    cfg.reducers = 1;
    let table = match side {
        // Validation at the coordinator: the job's shape, not its data.
        None => pavlo::RankTable::default(),
        Some([files]) => {
            pavlo::rank_table(&whole_files(files)?, cfg.max_record).map_err(|e| e.to_string())?
        }
        Some(_) => return Err("pavlo-join has one side input, Rankings".into()),
    };
    Ok((pavlo::join_fast(Arc::new(table)), cfg))
}

/// One split per file, each whole.
fn whole_files(files: &[PathBuf]) -> Result<Vec<Split>, String> {
    files
        .iter()
        .enumerate()
        .map(|(index, path)| {
            let len = std::fs::metadata(path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?
                .len();
            Ok(Split::whole(index, path.clone(), len))
        })
        .collect()
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

fn secret(file: Option<&Path>) -> anyhow::Result<Secret> {
    if let Some(f) = file {
        return Ok(Secret::load(f)?);
    }
    match std::env::var("SLUICE_SECRET") {
        Ok(s) => Ok(Secret::new(s.as_bytes())?),
        Err(_) => bail!("no shared secret: pass --secret-file FILE or set SLUICE_SECRET"),
    }
}

fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .try_init();
}

/// `sluice coordinator`.
pub fn run_coordinator(a: &CoordinatorArgs) -> anyhow::Result<()> {
    init_logs();
    let settings = sluice_cluster::sched_settings(
        a.max_attempts,
        Duration::from_millis(a.locality_wait_ms),
        a.slowstart,
        !a.no_speculation,
        a.speculative_slowdown,
    );
    let cfg = CoordinatorConfig {
        listen: a.listen,
        state_dir: a.state_dir.clone(),
        secret: secret(a.secret_file.as_deref())?,
        heartbeat: Duration::from_millis(a.heartbeat_ms.max(10)),
        worker_timeout: Duration::from_millis(a.worker_timeout_ms.max(100)),
        settings,
        factory: Arc::new(CliJobs),
        placement: Box::new(RackAware),
        orphan_grace: Duration::from_millis(a.orphan_grace_ms),
    };
    runtime()?.block_on(async {
        let (addr, server) = coordinator::start(cfg).await?;
        if let Some(f) = &a.addr_file {
            let tmp = f.with_extension("tmp");
            std::fs::write(&tmp, addr.to_string())?;
            std::fs::rename(&tmp, f)?;
        }
        server.await?;
        anyhow::Ok(())
    })
}

/// `sluice worker`.
pub fn run_worker(a: &WorkerArgs) -> anyhow::Result<()> {
    init_logs();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let cfg = WorkerConfig {
        coordinator: a.coordinator.clone(),
        listen: a.listen,
        advertise: a.advertise.clone(),
        data_dir: a.data_dir.clone(),
        datacenter: a.datacenter.clone(),
        rack: a.rack.clone(),
        slots: a.slots.unwrap_or(cores).max(1),
        memory: a
            .memory
            .unwrap_or_else(|| sluice_cluster::embedded::host_memory() / 2),
        secret: secret(a.secret_file.as_deref())?,
        factory: Arc::new(CliJobs),
        scan: worker::ScanSettings {
            rate: a.scan_rate,
            period: Duration::from_secs_f64(a.scan_period_s.max(0.0)),
        },
        block_report: Duration::from_millis(a.block_report_ms.max(10)),
    };
    runtime()?.block_on(worker::run(cfg))?;
    Ok(())
}

/// `sluice cluster ...`.
pub fn cluster(cmd: &ClusterCmd) -> anyhow::Result<()> {
    match cmd {
        ClusterCmd::Up {
            workers,
            dir,
            slots,
            coordinator_flags,
            worker_flags,
        } => {
            let opts = embedded::UpOptions {
                exe: std::env::current_exe()?,
                workers: *workers,
                slots: *slots,
                coordinator_flags: words(coordinator_flags),
                worker_flags: words(worker_flags),
            };
            let f = embedded::up(dir, &opts)?;
            println!(
                "cluster up: coordinator {} and {} workers; state in {}",
                f.coordinator,
                f.workers.len(),
                dir.display()
            );
            Ok(())
        }
        ClusterCmd::Down { dir } => {
            let n = embedded::down(dir)?;
            println!("cluster down: stopped {n} processes");
            Ok(())
        }
        ClusterCmd::Status(conn) => {
            let rt = runtime()?;
            let c = rt.block_on(connect(conn))?;
            let info = rt.block_on(c.info())?;
            println!("epoch {}", info.epoch);
            for w in info.workers {
                println!(
                    "worker {:>3}  {}  {}  {}/{}  slots {}  memory {} ({} a task)  pid {}  {}",
                    w.id,
                    w.uid,
                    w.data_addr,
                    w.datacenter,
                    w.rack,
                    w.slots,
                    units::human(w.memory),
                    units::human(sluice_cluster::task_share(w.memory, w.slots)),
                    w.pid,
                    if w.alive { "alive" } else { "lost" }
                );
            }
            Ok(())
        }
    }
}

fn words(flags: &str) -> Vec<String> {
    flags.split_whitespace().map(str::to_owned).collect()
}

async fn connect(conn: &Conn) -> anyhow::Result<Client> {
    let addr = match &conn.coordinator {
        Some(a) => a.clone(),
        None => {
            embedded::load(&conn.cluster)
                .with_context(|| {
                    format!(
                        "no --coordinator given and no cluster at {}",
                        conn.cluster.display()
                    )
                })?
                .coordinator
        }
    };
    let file = conn.secret_file.clone().or_else(|| {
        let f = conn.cluster.join("secret");
        (std::env::var_os("SLUICE_SECRET").is_none() && f.exists()).then_some(f)
    });
    Ok(Client::connect(&addr, secret(file.as_deref())?).await?)
}

/// `sluice put`.
pub fn put(a: &PutArgs) -> anyhow::Result<()> {
    let rt = runtime()?;
    let c = rt.block_on(connect(&a.conn))?;
    let opts = PutOptions {
        block_size: a.block_size,
        replication: a.replication,
        overwrite: a.overwrite,
    };
    let d = rt.block_on(c.put(&a.path, &a.dataset, &opts))?;
    let blocks = d.blocks().count();
    println!(
        "put {}: {} files, {} blocks, {} bytes",
        d.name,
        d.files.len(),
        blocks,
        d.len()
    );
    Ok(())
}

/// `sluice ls`.
pub fn ls(conn: &Conn) -> anyhow::Result<()> {
    let rt = runtime()?;
    let c = rt.block_on(connect(conn))?;
    for d in rt.block_on(c.list())? {
        let blocks: Vec<_> = d.blocks().collect();
        let min_repl = blocks.iter().map(|b| b.replicas.len()).min().unwrap_or(0);
        let want = d.replication.max(1) as usize;
        let under: Vec<_> = blocks.iter().filter(|b| b.replicas.len() < want).collect();
        let health = if under.is_empty() {
            String::new()
        } else {
            format!(
                "  {} blocks with fewer than {want} intact replicas",
                under.len()
            )
        };
        println!(
            "{:<24} {:>14} bytes {:>4} files {:>5} blocks  replicas>={}{health}  {}",
            d.name,
            d.len(),
            d.files.len(),
            blocks.len(),
            min_repl,
            d.origin
        );
        for b in under {
            let damaged: Vec<String> = b
                .corrupt
                .iter()
                .map(|c| format!("worker {}: {}", c.uid, c.detail))
                .collect();
            println!(
                "  block {}: {} of {want} replicas intact{}{}",
                b.id,
                b.replicas.len(),
                if damaged.is_empty() {
                    ""
                } else {
                    "; damaged: "
                },
                damaged.join("; ")
            );
        }
    }
    Ok(())
}

/// `sluice get`.
pub fn get(name: &str, out: &Path, conn: &Conn) -> anyhow::Result<()> {
    let rt = runtime()?;
    let c = rt.block_on(connect(conn))?;
    if out.exists() {
        bail!("{} exists", out.display());
    }
    let n = rt.block_on(c.get(name, out))?;
    println!("got {name}: {n} bytes into {}", out.display());
    Ok(())
}

/// `sluice rm`.
/// Bytes read from the head of each block to sample a data set.
const SAMPLE_HEAD: u64 = 256 << 10;

/// For sort and TeraSort with more than one reducer and no split points:
/// samples the input data set as `sluice run` samples files (the first
/// records of each block, read from the head of every block), and returns
/// the split points to pass.
fn sample_split_points(
    rt: &tokio::runtime::Runtime,
    c: &Client,
    ra: &mut RunArgs,
) -> anyhow::Result<Option<String>> {
    let sorts = matches!(ra.job, JobName::Sort | JobName::Terasort);
    if !sorts || ra.split_points.is_some() || ra.reducers.unwrap_or(1) <= 1 {
        return Ok(None);
    }
    let heads = rt.block_on(c.block_heads(&ra.input, SAMPLE_HEAD))?;
    let dir = tempfile::tempdir()?;
    for (i, h) in heads.iter().enumerate() {
        // Whole records only: a head cut short ends at its last newline
        // (lines and TeraSort's CRLF-terminated records alike).
        let end = if h.len() as u64 == SAMPLE_HEAD {
            h.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
        } else {
            h.len()
        };
        std::fs::write(dir.path().join(format!("head-{i:05}")), &h[..end])?;
    }
    let input = dir.path().display().to_string();
    let mut cfg = crate::run::config(ra);
    if ra.job == JobName::Terasort {
        cfg.format = sluice_formats::input::RecordFormat::Fixed(sluice_gen::TERA_RECORD);
    }
    let splits = crate::run::plan(&input, &cfg)?;
    let sample = if ra.job == JobName::Terasort {
        crate::run::tera_sample(&splits, &cfg)?
    } else {
        crate::run::sample_splits(&splits, &cfg)?
    };
    let p = sluice_api::RangePartitioner::from_sample(sample, cfg.reducers);
    Ok(Some(crate::run::split_points_arg(&p)))
}

/// `sluice jobs`.
pub fn jobs(conn: &Conn) -> anyhow::Result<()> {
    let rt = runtime()?;
    let c = rt.block_on(connect(conn))?;
    for (s, what) in rt.block_on(c.jobs())? {
        println!("{:<12} {:<10} {what}", s.job, s.state);
        if !s.error.is_empty() {
            println!("{:<12} {:<10} {}", "", "", s.error);
        }
    }
    Ok(())
}

/// `sluice kill`.
pub fn kill(job: u64, conn: &Conn) -> anyhow::Result<()> {
    let rt = runtime()?;
    let c = rt.block_on(connect(conn))?;
    let s = rt.block_on(c.kill(job))?;
    println!("job {job} {}: {}", s.state, s.error);
    Ok(())
}

/// Removes data set `name` without a word.
pub fn remove(conn: &Conn, name: &str) -> anyhow::Result<()> {
    let rt = runtime()?;
    let c = rt.block_on(connect(conn))?;
    Ok(rt.block_on(c.remove(name))?)
}

/// Each live worker's utilization samples since `since` (Unix ms), by
/// worker address.
pub fn node_samples(conn: &Conn, since: u64) -> anyhow::Result<Vec<(String, Vec<Sample>)>> {
    let rt = runtime()?;
    let c = rt.block_on(connect(conn))?;
    Ok(rt.block_on(c.node_samples(since))?)
}

pub fn rm(name: &str, conn: &Conn) -> anyhow::Result<()> {
    let rt = runtime()?;
    let c = rt.block_on(connect(conn))?;
    rt.block_on(c.remove(name))?;
    println!("removed {name}");
    Ok(())
}

/// `sluice submit`: runs a job on the cluster and prints its summary.
pub fn submit(a: &SubmitArgs) -> anyhow::Result<ClusterReport> {
    submit_args(&a.conn, a.args.clone(), a.replication)
}

/// Submits the job `sluice run ARGS` describes (the three jobs of the
/// baseline join, one after another) and waits for it.
pub fn submit_args(
    conn: &Conn,
    args: Vec<String>,
    replication: u32,
) -> anyhow::Result<ClusterReport> {
    let ra = RunArgs::parse(&args)?;
    if ra.is_join(JoinForm::Baseline) {
        return join_baseline(conn, &args, &ra, replication);
    }
    submit_one(conn, args, replication)
}

/// The baseline join as Hadoop runs it: three jobs through two temporary
/// data sets, removed afterwards whatever happened. Its report (when
/// asked for) is the array of the three jobs' reports, as `sluice run`
/// writes it.
fn join_baseline(
    conn: &Conn,
    args: &[String],
    ra: &RunArgs,
    replication: u32,
) -> anyhow::Result<ClusterReport> {
    let rankings = ra
        .rankings
        .as_deref()
        .context("pavlo-join needs --rankings DATASET")?;
    let tag = format!("{}-{}", std::process::id(), sluice_cluster::now_ms());
    let filtered = format!("_join-{tag}-filtered");
    let aggregated = format!("_join-{tag}-aggregated");
    let output = ra.output.display().to_string();
    let base = without_flags(args, &["--input", "--output", "--report"], &["--overwrite"]);
    // Only the answer takes the replication asked for; the temporary
    // data sets live as long as the chain.
    let stages = [
        (
            "filter",
            format!("{rankings},{}", ra.input),
            &filtered,
            true,
            1,
        ),
        ("aggregate", filtered.clone(), &aggregated, true, 1),
        (
            "top",
            aggregated.clone(),
            &output,
            ra.overwrite,
            replication,
        ),
    ];
    let mut reports = Vec::new();
    let mut run = || -> anyhow::Result<()> {
        for (stage, input, out, overwrite, replication) in &stages {
            let mut a = base.clone();
            a.extend(["--join-stage", stage, "--input", input, "--output", out].map(String::from));
            if *overwrite {
                a.push("--overwrite".into());
            }
            reports.push(submit_one(conn, a, *replication)?);
        }
        Ok(())
    };
    let done = run();
    for t in [&filtered, &aggregated] {
        let _ = remove(conn, t);
    }
    done?;
    if let Some(path) = &ra.report {
        std::fs::write(path, serde_json::to_string_pretty(&reports)?)
            .with_context(|| format!("writing report {}", path.display()))?;
    }
    Ok(reports.pop().expect("three jobs ran"))
}

/// `args` without the flags `valued` (and their values, in either
/// `--flag VALUE` or `--flag=VALUE` form) and the flags `switches`.
fn without_flags(args: &[String], valued: &[&str], switches: &[&str]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let flag = a.split('=').next().unwrap_or(a);
        if valued.contains(&flag) {
            if !a.contains('=') {
                it.next();
            }
        } else if !switches.contains(&a.as_str()) {
            out.push(a.clone());
        }
    }
    out
}

/// Submits one job and waits for it.
fn submit_one(conn: &Conn, args: Vec<String>, replication: u32) -> anyhow::Result<ClusterReport> {
    let mut ra = RunArgs::parse(&args)?;
    let input = ra.input.clone();
    let output = ra.output.display().to_string();
    let rt = runtime()?;
    let mut c = rt.block_on(connect(conn))?;
    let mut args = args;
    if let Some(points) = sample_split_points(&rt, &c, &mut ra)? {
        args.extend(["--split-points".to_owned(), points]);
    }
    let id = rt.block_on(c.submit(args, &input, &output, ra.overwrite, replication))?;
    let mut lost_since: Option<Instant> = None;
    let status = loop {
        let s = match rt.block_on(c.wait(id, Duration::from_secs(30))) {
            Ok(s) => s,
            // A restarted coordinator knows what became of the job: keep
            // asking for a minute before giving up.
            Err(e) if lost_since.is_none_or(|t| t.elapsed() < Duration::from_secs(60)) => {
                if lost_since.is_none() {
                    eprintln!("job {id}: lost the coordinator ({e}); waiting for it");
                }
                lost_since.get_or_insert_with(Instant::now);
                std::thread::sleep(Duration::from_millis(200));
                if let Ok(again) = rt.block_on(connect(conn)) {
                    c = again;
                }
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        lost_since = None;
        if s.state != "running" {
            break s;
        }
        if !ra.quiet {
            eprintln!(
                "job {id}: maps {}/{}, reduces {}/{}",
                s.maps_done, s.maps, s.reduces_done, s.reduces
            );
        }
    };
    match status.state.as_str() {
        "succeeded" => {}
        "killed" => bail!("job {id} was {}", status.error),
        _ => bail!("job {id} failed: {}", status.error),
    }
    let report: ClusterReport = serde_json::from_str(&status.report_json)?;
    if let Some(path) = &ra.report {
        std::fs::write(path, &status.report_json)
            .with_context(|| format!("writing report {}", path.display()))?;
    }
    if !ra.quiet {
        print_report(&report);
    }
    Ok(report)
}

fn print_report(r: &ClusterReport) {
    println!(
        "job          {} (id {}) on {} workers",
        r.job, r.job_id, r.workers
    );
    println!(
        "input        {} ({} bytes, {} maps)",
        r.input, r.input_bytes, r.maps
    );
    println!(
        "output       {} ({} records, {} bytes, {} reducers)",
        r.output, r.output_records, r.output_bytes, r.reducers
    );
    println!(
        "time         {:.3} s (map {:.3} s, shuffle+reduce {:.3} s)",
        r.phases.total_s, r.phases.map_s, r.phases.reduce_s
    );
    println!(
        "locality     {} data-local, {} remote maps",
        r.data_local_maps, r.remote_maps
    );
    println!(
        "memory       {} per task (its worker's --memory shared by its slots)",
        units::human(r.task_memory_bytes)
    );
    println!(
        "shuffle      {} bytes, receive skew {:.2}",
        r.shuffle_bytes, r.receive_skew
    );
    let a = &r.attempts;
    println!(
        "attempts     {} launched, {} failed, {} killed, {} lost, {} speculative ({:.2} s redone)",
        a.launched, a.failed, a.killed, a.lost, a.speculative, a.wasted_s
    );
    for w in &r.per_worker {
        println!(
            "worker       {} {}: {} maps {:.2} s, {} reduces {:.2} s, {} shuffle bytes in",
            w.worker, w.addr, w.maps, w.map_s, w.reduces, w.reduce_s, w.shuffle_bytes
        );
    }
    for s in &r.stragglers {
        println!(
            "straggler    {} on {}: {:.2} s (median {:.2} s)",
            s.task, s.worker, s.seconds, s.median_s
        );
    }
}

#[cfg(test)]
mod tests {
    use super::without_flags;

    #[test]
    fn without_flags_drops_flags_in_both_forms_and_keeps_the_rest() {
        let args: Vec<String> = [
            "pavlo-join",
            "--input",
            "uv",
            "--output=o",
            "--overwrite",
            "--rankings",
            "r",
            "--report",
            "x.json",
            "-q",
        ]
        .map(String::from)
        .to_vec();
        let kept = without_flags(
            &args,
            &["--input", "--output", "--report"],
            &["--overwrite"],
        );
        assert_eq!(kept, ["pavlo-join", "--rankings", "r", "-q"]);
    }
}
