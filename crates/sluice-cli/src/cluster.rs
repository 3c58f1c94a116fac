//! The cluster commands: `coordinator`, `worker`, `cluster up/down/status`,
//! `put`, `ls`, `get`, `rm`, `web`, `submit` (the job commands are in
//! `jobs`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::bail;
use clap::{Args, Subcommand};
use sluice_client::embedded;
use sluice_client::{PutOptions, PutProgress};
use sluice_coordinator::{CoordinatorConfig, Scheduler};
use sluice_driver::JobReport;
use sluice_proto::auth::Secret;
use sluice_tools::conn::{connect, resolve, secret, target};
use sluice_worker::WorkerConfig;

pub use sluice_tools::conn::Conn;

use sluice_tools::units;

use crate::args::RunArgs;
use crate::listing::Listing;

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
    /// TLS: this coordinator's certificate, or --insecure.
    #[command(flatten)]
    tls: sluice_tools::transport::TlsArgs,
    /// Write the bound address to this file once listening.
    #[arg(long)]
    addr_file: Option<PathBuf>,
    /// Stand by for the other coordinators sharing these etcd endpoints
    /// (comma-separated URLs) and prefix: one leads through an etcd lease,
    /// the others take over when it goes. The catalog and the job log
    /// then live in etcd, not in --state-dir.
    #[arg(long, value_delimiter = ',')]
    etcd: Vec<String>,
    /// The prefix of this cluster's keys in etcd.
    #[arg(long, default_value = sluice_coordinator::ha::keys::DEFAULT_PREFIX, requires = "etcd")]
    etcd_prefix: String,
    /// The leader's lease in etcd, in ms (etcd grants whole seconds, at
    /// least its minimum, 2 s with its default election timeout).
    #[arg(long, default_value_t = 2000, requires = "etcd")]
    lease_ttl_ms: u64,
    /// Heartbeat interval in milliseconds.
    #[arg(long, default_value_t = 200)]
    heartbeat_ms: u64,
    /// A worker silent this long (ms) is lost.
    #[arg(long, default_value_t = 5000)]
    worker_timeout_ms: u64,
    /// Failures of one task before its job fails.
    #[arg(long, default_value_t = 4)]
    max_attempts: u32,
    /// Delay scheduling: offers of a map slot a job declines, waiting for
    /// cache-local maps, before it takes node-local ones (once any of its
    /// blocks is cached).
    #[arg(long, default_value_t = 20)]
    delay_cache: u32,
    /// Missed offers before a job takes maps off their blocks' nodes
    /// (rack-local).
    #[arg(long, default_value_t = 40)]
    delay_node: u32,
    /// Missed offers before a job takes maps off their blocks' racks.
    #[arg(long, default_value_t = 60)]
    delay_rack: u32,
    /// Missed offers before a job takes maps off their blocks' data centers.
    #[arg(long, default_value_t = 80)]
    delay_datacenter: u32,
    /// When reduces start: `delayed` (once 0.8 of the maps are done),
    /// `early` (0.05), or `arts` (seed 003: from the map outputs per
    /// partition and data center and the links' bandwidths). A job's
    /// `-D sluice.reduce.scheduler=...` overrides it.
    #[arg(long, default_value = "delayed", value_parser = parse_reduce_scheduler)]
    reduce_scheduler: sluice_coordinator::arts::ReduceScheduler,
    /// Fraction of maps done before reduces start (instead of
    /// --reduce-scheduler's early or delayed).
    #[arg(long, conflicts_with = "reduce_scheduler")]
    slowstart: Option<f64>,
    /// Maps never leave the data centers holding their blocks (seed 003's
    /// experiments): a map runs only where a live replica's data center is.
    #[arg(long)]
    dc_local_maps: bool,
    /// Bandwidths between data centers for ARTS: lines `DC1 DC2 RATE`
    /// (both ways), `DC1->DC2 RATE`, `lan RATE`, `wan RATE` (`sluice probe
    /// --network --cluster DIR --links FILE` writes one) [default: lan
    /// 1GB/s, wan 100Mbit/s].
    #[arg(long)]
    links: Option<PathBuf>,
    /// Never launch backup attempts of stragglers.
    #[arg(long)]
    no_speculation: bool,
    /// A task this many times slower than its phase's median is a straggler.
    #[arg(long, default_value_t = 1.5)]
    speculative_slowdown: f64,
    /// Which job a free slot goes to: in submission order (fifo) or
    /// shared between pools (fair).
    #[arg(long, value_enum, default_value = "fifo")]
    scheduler: SchedulerArg,
    /// Fair preemption: a pool short of its minimum share this long (ms)
    /// takes slots back from pools over their share, youngest attempts
    /// first; 0 never preempts.
    #[arg(long, default_value_t = 0)]
    preemption_timeout_ms: u64,
    /// Pools of the fair scheduler (TOML: `[pool.NAME]` with weight,
    /// min_share, max_share, mode); read again by `sluice pools --reload`.
    #[arg(long)]
    pools: Option<PathBuf>,
    /// A block no data set, put or job knows is deleted from its worker
    /// once it has been reported this long (ms).
    #[arg(long, default_value_t = 600_000)]
    orphan_grace_ms: u64,
    /// Serve the web pages and Prometheus `/metrics` here (e.g.
    /// 127.0.0.1:8080; port 0: any free port). Every request needs the
    /// web token `sluice web` prints.
    #[arg(long)]
    http: Option<SocketAddr>,
    /// Write the web pages' bound address to this file once serving.
    #[arg(long)]
    http_addr_file: Option<PathBuf>,
    /// Finished jobs whose reports the job history keeps
    /// (STATE_DIR/history), newest first.
    #[arg(long, default_value_t = 1000)]
    history: usize,
    /// The workers' hardware profile for the model's account of each job
    /// (`sluice probe --save`'s file) [default: this host's saved profile,
    /// else stated defaults].
    #[arg(long)]
    hardware: Option<PathBuf>,
    /// Re-replication: copies of blocks short of replicas (a worker lost,
    /// a replica damaged) each worker sends at once; 0 turns it off.
    #[arg(long, default_value_t = 2)]
    replication_streams: usize,
    /// Where new blocks' replicas go: `rack-aware` (the first on the
    /// writer's host, others on other racks) or `wan-aware` (all in the
    /// writer's data center while it has room).
    #[arg(long, default_value = "rack-aware")]
    placement: String,
}

fn parse_reduce_scheduler(s: &str) -> Result<sluice_coordinator::arts::ReduceScheduler, String> {
    sluice_coordinator::arts::ReduceScheduler::parse(s)
        .ok_or_else(|| format!("{s:?}: early, delayed or arts"))
}

/// Writes `addr` to `f` whole (written beside it, renamed into place).
fn write_addr(f: &std::path::Path, addr: &str) -> std::io::Result<()> {
    let tmp = f.with_extension("tmp");
    std::fs::write(&tmp, addr)?;
    std::fs::rename(&tmp, f)
}

/// A coordinator's scheduling policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SchedulerArg {
    /// Jobs in submission order.
    Fifo,
    /// Hadoop's fair scheduler over pools.
    Fair,
}

/// Worker settings.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The coordinator's address, or every coordinator's, comma-separated
    /// (`A,B`): the worker follows the active one.
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
    /// Its data center.
    #[arg(long, default_value = "dc1")]
    datacenter: String,
    /// Its rack.
    #[arg(long, default_value = "rack1")]
    rack: String,
    /// Its host's name [default: the data-plane address's host].
    #[arg(long)]
    host: Option<String>,
    /// Its place `/DATACENTER/RACK[/HOST]` (instead of --datacenter,
    /// --rack and --host).
    #[arg(long, conflicts_with_all = ["datacenter", "rack", "topology"])]
    location: Option<String>,
    /// A topology file: lines `HOST /DATACENTER/RACK` (`#` comments); this
    /// worker's place is its --host's line.
    #[arg(long, requires = "host")]
    topology: Option<PathBuf>,
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
    /// TLS: this worker's certificate, or --insecure.
    #[command(flatten)]
    tls: sluice_tools::transport::TlsArgs,
    /// Block scanner read rate (bytes/s); 0 turns the scanner off.
    #[arg(long, default_value = "16MiB/s", value_parser = units::parse_rate)]
    scan_rate: u64,
    /// Most bytes a second one re-replication copy this worker sends may
    /// take (0: no limit).
    #[arg(long, default_value = "64MiB/s", value_parser = units::parse_rate)]
    replication_rate: u64,
    /// Seconds between the starts of two scans of every stored block.
    #[arg(long, default_value_t = 21_600.0)]
    scan_period_s: f64,
    /// Interval between block reports (every stored block) in ms.
    #[arg(long, default_value_t = 60_000)]
    block_report_ms: u64,
    /// Bytes of blocks this worker holds in locked memory for map tasks
    /// (the block cache; 0 turns it off) [default: a quarter of --memory].
    #[arg(long, value_parser = units::parse_size)]
    cache_size: Option<u64>,
    /// Cache admission: `first` (admit on first read until full, never
    /// evict), `lru` (evict the least recently used blocks) or `tinylfu`
    /// (LRU eviction, admitting a block only if read more often lately
    /// than the block it would evict).
    #[arg(long, default_value = "first", value_parser = sluice_worker::cache::Policy::parse)]
    cache_policy: sluice_worker::cache::Policy,
    /// Serve Prometheus `/metrics` here (port 0: any free port; the
    /// coordinator's workers page links it). Requests need the web token.
    #[arg(long)]
    http: Option<SocketAddr>,
    /// Run Streaming and Python commands (user code) as this unprivileged
    /// local user, each in a directory of its own; needs a worker started
    /// as root. Or as a local user by the job's user:
    /// `alice=alice,bob=bob,*=sluice-task` (`*`: every other job, an
    /// admin's too; without it the others' jobs are refused).
    #[arg(long, value_name = "USER|NAME=USER,...")]
    task_user: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ClusterCmd {
    /// Start a coordinator and workers on this host (loopback).
    Up {
        /// Worker processes; with several data centers, per data center
        /// (`3,3`).
        #[arg(long, default_value = "2", value_delimiter = ',')]
        workers: Vec<u32>,
        /// Data centers (`/dcN/rackN/worker-I`); one --workers count is
        /// split evenly among them.
        #[arg(long)]
        datacenters: Option<u32>,
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
        /// Run the coordinator alone: when it dies it stays down (by
        /// default a supervisor starts it again).
        #[arg(long)]
        no_supervise: bool,
        /// Coordinators to start, one active and the others standing by
        /// to take over (more than one needs --etcd).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        coordinators: u32,
        /// etcd endpoints (`URL[,URL...]`): the coordinators keep the
        /// catalog and the job log there and elect the active one.
        #[arg(long)]
        etcd: Option<String>,
        /// Plaintext on every connection and no certificates: for
        /// measurement only (by default the processes speak TLS 1.3 with
        /// certificates of a CA made in DIR/tls).
        #[arg(long)]
        insecure: bool,
        /// The workers run Streaming and Python commands as this
        /// unprivileged user, or by the job's user with
        /// `NAME=USER,...,*=USER` (`sluice worker --task-user`; needs
        /// root).
        #[arg(long, value_name = "USER|NAME=USER,...")]
        task_user: Option<String>,
    },
    /// Stop the processes of a `cluster up`.
    Down {
        #[arg(long, default_value = "sluice-cluster")]
        dir: PathBuf,
    },
    /// Show the coordinators (of several, each one's pid and whether it
    /// is active, standby or down; of one, its pid and how many times
    /// its supervisor started it again) and the workers.
    Status(crate::status::StatusArgs),
    /// Run a coordinator and start it again when it dies (`cluster up`
    /// starts one).
    #[command(hide = true)]
    Supervise(crate::supervise::SuperviseArgs),
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
    /// The data center this put writes from, for the coordinator's
    /// WAN-aware placement [default: that of the worker on this host].
    #[arg(long, default_value = "")]
    datacenter: String,
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
    /// The fair scheduler's pool for the job (before the job name; the
    /// same as `-D sluice.pool=NAME`).
    #[arg(long)]
    pool: Option<String>,
    /// Bring a cluster up on YARN for this job alone and down after it
    /// (before the job name; `HADOOP_CONF_DIR` names the YARN cluster).
    #[arg(long)]
    yarn: bool,
    #[command(flatten, next_help_heading = "With --yarn")]
    yarn_opts: crate::yarn::YarnOpts,
    /// The job and its `sluice run` flags; --input and --output name data sets.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    args: Vec<String>,
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// Logs to standard error at `SLUICE_LOG`'s filter, else at `default`
/// (daemons `info`, commands `warn`: a command says only what went wrong
/// or around, e.g. a damaged HDFS replica read past).
///
/// A standard error that cannot be written (a closed pipe) loses the
/// lines and nothing else: the subscriber's own report of the failure
/// would print to it and panic the thread that logged.
pub(crate) fn init_logs(default: &str) {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .log_internal_errors(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
                .unwrap_or_else(|_| default.into()),
        )
        .try_init();
}

/// `sluice coordinator`.
pub fn run_coordinator(a: &CoordinatorArgs) -> anyhow::Result<()> {
    init_logs("info");
    let mut settings = sluice_coordinator::sched_settings(
        a.max_attempts,
        sluice_coordinator::sched::Delay {
            cache: a.delay_cache,
            node: a.delay_node,
            rack: a.delay_rack,
            datacenter: a.delay_datacenter,
        },
        a.slowstart.map_or(
            a.reduce_scheduler,
            sluice_coordinator::arts::ReduceScheduler::SlowStart,
        ),
        !a.no_speculation,
        a.speculative_slowdown,
    );
    settings.dc_local_maps = a.dc_local_maps;
    if let Some(f) = &a.links {
        let text = std::fs::read_to_string(f)
            .map_err(|e| anyhow::anyhow!("reading links file {}: {e}", f.display()))?;
        settings.links =
            sluice_coordinator::arts::Links::parse(&text, |r| units::parse_rate(r).ok())
                .map_err(|e| anyhow::anyhow!("links file {}: {e}", f.display()))?;
    }
    let cfg = CoordinatorConfig {
        listen: a.listen,
        state_dir: a.state_dir.clone(),
        secret: secret(a.secret_file.as_deref())?,
        heartbeat: Duration::from_millis(a.heartbeat_ms.max(10)),
        worker_timeout: Duration::from_millis(a.worker_timeout_ms.max(100)),
        settings,
        jobs: crate::args::jobs(),
        placement: sluice_coordinator::store::placement(&a.placement).ok_or_else(|| {
            anyhow::anyhow!("--placement {:?}: rack-aware or wan-aware", a.placement)
        })?,
        orphan_grace: Duration::from_millis(a.orphan_grace_ms),
        scheduler: match a.scheduler {
            SchedulerArg::Fifo => {
                anyhow::ensure!(a.pools.is_none(), "--pools is for --scheduler fair");
                Scheduler::Fifo
            }
            SchedulerArg::Fair => Scheduler::Fair(a.pools.clone()),
        },
        preemption_timeout: (a.preemption_timeout_ms > 0)
            .then(|| Duration::from_millis(a.preemption_timeout_ms)),
        http: a.http,
        history: a.history,
        hardware: sluice_tools::model::load_hardware(a.hardware.as_deref()),
        replication_streams: a.replication_streams,
    };
    // After the flags are checked: a bad one is named first.
    a.tls.install("coordinator", None)?;
    let written = |started: &sluice_coordinator::Started| -> anyhow::Result<()> {
        if let (Some(f), Some(http)) = (&a.http_addr_file, started.http) {
            write_addr(f, &http.to_string())?;
        }
        if let Some(f) = &a.addr_file {
            write_addr(f, &started.addr.to_string())?;
        }
        Ok(())
    };
    if !a.etcd.is_empty() {
        let ha = sluice_coordinator::ha::HaConfig {
            endpoints: a.etcd.clone(),
            prefix: a.etcd_prefix.clone(),
            ttl: Duration::from_millis(a.lease_ttl_ms),
        };
        return runtime()?.block_on(async {
            sluice_coordinator::ha::run(cfg, ha, |s| {
                if let Err(e) = written(s) {
                    eprintln!("sluice coordinator: {e}");
                }
            })
            .await?;
            anyhow::Ok(())
        });
    }
    runtime()?.block_on(async {
        let started = sluice_coordinator::start(cfg).await?;
        written(&started)?;
        started.server.await?;
        anyhow::Ok(())
    })
}

/// `sluice worker`.
pub fn run_worker(a: &WorkerArgs) -> anyhow::Result<()> {
    init_logs("info");
    // A worker stopped (cluster down, YARN's kill) stops its tasks'
    // Streaming commands.
    crate::streaming::stop_commands_on_signals();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let memory = a.memory.unwrap_or_else(|| embedded::host_memory() / 2);
    let (datacenter, rack, host) = worker_place(a)?;
    let secret_files = crate::task_user::secret_files(a.secret_file.as_deref(), &a.tls);
    crate::task_user::confine(a.task_user.as_deref(), &secret_files)?;
    let cfg = WorkerConfig {
        coordinator: a.coordinator.clone(),
        listen: a.listen,
        advertise: a.advertise.clone(),
        data_dir: a.data_dir.clone(),
        datacenter,
        rack,
        host,
        slots: a.slots.unwrap_or(cores).max(1),
        memory,
        secret: secret(a.secret_file.as_deref())?,
        jobs: crate::args::jobs(),
        scan: sluice_worker::ScanSettings {
            rate: a.scan_rate,
            period: Duration::from_secs_f64(a.scan_period_s.max(0.0)),
        },
        block_report: Duration::from_millis(a.block_report_ms.max(10)),
        cache_size: a.cache_size.unwrap_or(memory / 4),
        cache_policy: a.cache_policy,
        http: a.http,
        replication_rate: a.replication_rate,
    };
    // After the flags are checked: a bad one is named first.
    a.tls.install("worker", None)?;
    runtime()?.block_on(sluice_worker::run(cfg))?;
    Ok(())
}

/// `sluice cluster ...`.
pub fn cluster(cmd: &ClusterCmd) -> anyhow::Result<()> {
    match cmd {
        ClusterCmd::Up {
            workers,
            datacenters,
            dir,
            slots,
            coordinator_flags,
            worker_flags,
            no_supervise,
            coordinators,
            etcd,
            insecure,
            task_user,
        } => {
            if let Some(u) = task_user {
                // Refused here rather than by every worker.
                crate::task_user::check(u)?;
            }
            if *coordinators > 1 && etcd.is_none() {
                bail!(
                    "--coordinators {coordinators} needs --etcd URL: several coordinators \
                     share their state through etcd"
                );
            }
            let opts = embedded::UpOptions {
                exe: std::env::current_exe()?,
                workers: per_datacenter(workers, *datacenters)?,
                slots: *slots,
                coordinator_flags: words(coordinator_flags),
                worker_flags: with_task_user(words(worker_flags), task_user.as_deref()),
                supervise: !no_supervise,
                coordinators: *coordinators,
                etcd: etcd.clone(),
                insecure: *insecure,
            };
            let f = embedded::up(dir, &opts)?;
            let several = if f.coordinators.len() > 1 { "s" } else { "" };
            println!(
                "cluster up: coordinator{several} {} and {} workers; state in {}",
                f.coordinator,
                f.workers.len(),
                dir.display()
            );
            if let Some(http) = &f.http {
                let secret = Secret::load(&dir.join("secret"))?;
                println!("web pages: {}", web_url(http, &secret));
            }
            Ok(())
        }
        ClusterCmd::Down { dir } => {
            if dir.join("yarn.json").exists() {
                anyhow::bail!(
                    "the cluster in {} runs on YARN: sluice yarn down --dir {0}",
                    dir.display()
                );
            }
            let n = embedded::down(dir)?;
            println!("cluster down: stopped {n} processes");
            Ok(())
        }
        ClusterCmd::Status(a) => crate::status::status(&a.conn()),
        ClusterCmd::Supervise(a) => crate::supervise::run(a),
    }
}

/// The workers' extra flags with `--task-user USER`, if given.
fn with_task_user(mut flags: Vec<String>, user: Option<&str>) -> Vec<String> {
    if let Some(u) = user {
        flags.extend(["--task-user".to_owned(), u.to_owned()]);
    }
    flags
}

/// Workers per data center from `--workers` and `--datacenters`.
fn per_datacenter(workers: &[u32], datacenters: Option<u32>) -> anyhow::Result<Vec<u32>> {
    let dcs = datacenters.unwrap_or(workers.len() as u32).max(1);
    match workers {
        [n] => Ok((0..dcs).map(|d| n / dcs + u32::from(d < n % dcs)).collect()),
        _ if workers.len() as u32 == dcs => Ok(workers.to_vec()),
        _ => bail!(
            "--workers names {} data centers, --datacenters {dcs}",
            workers.len()
        ),
    }
}

/// This worker's `(datacenter, rack, host)` from its flags: --location,
/// else its --topology file's line for --host, else --datacenter, --rack
/// and --host.
fn worker_place(a: &WorkerArgs) -> anyhow::Result<(String, String, String)> {
    let host = a.host.clone().unwrap_or_default();
    if let Some(loc) = &a.location {
        return parse_location(loc, host);
    }
    if let Some(file) = &a.topology {
        let text = std::fs::read_to_string(file)
            .map_err(|e| anyhow::anyhow!("reading topology file {}: {e}", file.display()))?;
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            let mut words = line.split_whitespace();
            let (Some(name), Some(loc)) = (words.next(), words.next()) else {
                if !line.is_empty() {
                    bail!(
                        "{}:{}: expected `HOST /DATACENTER/RACK`",
                        file.display(),
                        n + 1
                    );
                }
                continue;
            };
            if name == host {
                return parse_location(loc, host);
            }
        }
        bail!("host {host} is not in topology file {}", file.display());
    }
    Ok((a.datacenter.clone(), a.rack.clone(), host))
}

/// `/DATACENTER/RACK[/HOST]`; `host` stands when it names none.
fn parse_location(loc: &str, host: String) -> anyhow::Result<(String, String, String)> {
    let parts: Vec<&str> = loc.strip_prefix('/').unwrap_or("").split('/').collect();
    match parts.as_slice() {
        [dc, rack] if !dc.is_empty() && !rack.is_empty() => {
            Ok(((*dc).to_owned(), (*rack).to_owned(), host))
        }
        [dc, rack, h] if !dc.is_empty() && !rack.is_empty() && !h.is_empty() => {
            Ok(((*dc).to_owned(), (*rack).to_owned(), (*h).to_owned()))
        }
        _ => bail!("location {loc:?} is not /DATACENTER/RACK[/HOST]"),
    }
}

fn words(flags: &str) -> Vec<String> {
    flags.split_whitespace().map(str::to_owned).collect()
}

/// `sluice put`, with files and bytes stored shown on a terminal.
pub fn put(a: &PutArgs) -> anyhow::Result<()> {
    let c = connect(&a.conn)?;
    let progress = std::sync::Arc::new(PutProgress::default());
    let opts = PutOptions {
        block_size: a.block_size,
        replication: a.replication,
        overwrite: a.overwrite,
        datacenter: a.datacenter.clone(),
        progress: Some(progress.clone()),
    };
    let shown = show_put(progress);
    let d = c.put(&a.path, &a.dataset, &opts);
    drop(shown);
    let d = d?;
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

/// Draws a put's progress (bytes, and files of all) until dropped.
fn show_put(p: std::sync::Arc<PutProgress>) -> impl Drop {
    use std::sync::atomic::Ordering::Relaxed;
    let pb = sluice_tools::progress::bar(0, "put");
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let bar = pb.clone();
    let thread = std::thread::spawn(move || loop {
        bar.set_length(p.total_bytes.load(Relaxed));
        bar.set_position(p.bytes.load(Relaxed));
        let files = (p.files.load(Relaxed), p.total_files.load(Relaxed));
        bar.set_message(format!("{}/{} files", files.0, files.1));
        if stopped.recv_timeout(Duration::from_millis(200)).is_ok() {
            return;
        }
    });
    Shown(Some((stop, thread)), pb)
}

/// Stops a progress display when dropped.
struct Shown(
    Option<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
    indicatif::ProgressBar,
);

impl Drop for Shown {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.0.take() {
            let _ = stop.send(());
            let _ = thread.join();
        }
        self.1.finish_and_clear();
    }
}

/// `sluice ls NAME`: each block of a data set, in order, with where its
/// replicas are (as `hdfs fsck -files -blocks -locations`).
pub fn ls_blocks(name: &str, conn: &Conn) -> anyhow::Result<()> {
    let c = connect(conn)?;
    let d = c.dataset(name)?;
    let mut out = Listing::new();
    for (i, b) in d.blocks().enumerate() {
        let damaged: Vec<&str> = b.corrupt.iter().map(|c| c.uid.as_str()).collect();
        let damaged = if damaged.is_empty() {
            String::new()
        } else {
            format!("  damaged on {}", damaged.join(","))
        };
        let more = out.line(format_args!(
            "{i:>6} {:<20} {:>12} bytes  replicas {}{damaged}",
            b.id,
            b.len,
            b.replicas.join(","),
        ))?;
        if !more {
            break;
        }
    }
    Ok(())
}

/// `sluice ls`: every data set, summed up, and the blocks of those with
/// fewer intact replicas than they ask for.
pub fn ls(conn: &Conn) -> anyhow::Result<()> {
    let c = connect(conn)?;
    let mut out = Listing::new();
    for s in c.list()? {
        let want = s.replication.max(1) as usize;
        let health = if s.under_replicated == 0 {
            String::new()
        } else {
            format!(
                "  {} blocks with fewer than {want} intact replicas",
                s.under_replicated
            )
        };
        let owner = owner_note(&s);
        let more = out.line(format_args!(
            "{:<24} {:>14} bytes {:>4} files {:>5} blocks  replicas>={}{health}  {}{owner}",
            s.name, s.bytes, s.files, s.blocks, s.min_replicas, s.origin
        ))?;
        if !more {
            return Ok(());
        }
        if s.under_replicated == 0 {
            continue;
        }
        // Only a data set with under-replicated blocks is read whole.
        let d = c.dataset(&s.name)?;
        let live: Vec<String> = c
            .info()?
            .workers
            .into_iter()
            .filter(|w| w.alive)
            .map(|w| w.uid)
            .collect();
        let intact = |b: &&sluice_proto::catalog::BlockMeta| {
            b.replicas.iter().filter(|u| live.contains(u)).count()
        };
        for b in d.blocks().filter(|b| intact(b) < want) {
            let damaged: Vec<String> = b
                .corrupt
                .iter()
                .map(|c| format!("worker {}: {}", c.uid, c.detail))
                .collect();
            let why = if damaged.is_empty() {
                ""
            } else {
                "; damaged: "
            };
            let more = out.line(format_args!(
                "  block {}: {} of {want} replicas intact on live workers{why}{}",
                b.id,
                intact(&b),
                damaged.join("; ")
            ))?;
            if !more {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Who owns a data set and who may read it, as `sluice ls` ends its
/// line (nothing for an admin's, shared with nobody).
fn owner_note(s: &sluice_proto::proto::DatasetSummary) -> String {
    let mut note = String::new();
    if !s.owner.is_empty() {
        note = format!("  owner {}", s.owner);
    }
    if !s.readers.is_empty() {
        note += &format!("  shared with {}", s.readers.join(","));
    }
    note
}

/// `sluice get`.
pub fn get(name: &str, out: &Path, conn: &Conn) -> anyhow::Result<()> {
    let c = connect(conn)?;
    let url = out.to_string_lossy();
    if sluice_storage::is_remote(&url) {
        return get_to_store(&c, name, &url);
    }
    if out.exists() {
        bail!("{} exists", out.display());
    }
    let n = c.get(name, out)?;
    println!("got {name}: {n} bytes into {}", out.display());
    Ok(())
}

/// `sluice get NAME s3://...` or `hdfs://...`: committed to the store as
/// a job's output is.
fn get_to_store(c: &sluice_client::BlockingClient, name: &str, url: &str) -> anyhow::Result<()> {
    let (n, files) = sluice_driver::get_to_store(c, name, url, false)?;
    println!("got {name}: {n} bytes into {url} ({files} files)");
    Ok(())
}

/// The address of the web pages with the token that opens them.
fn web_url(http: &str, secret: &Secret) -> String {
    let scheme = sluice_proto::tls::web::scheme();
    format!("{scheme}://{http}/?token={}", secret.web_token())
}

/// `sluice web`: where the cluster's web pages are, with their token.
pub fn web(http: Option<&str>, conn: &Conn) -> anyhow::Result<()> {
    let http = match http {
        Some(h) => h.to_owned(),
        None => active_http(conn)?.ok_or_else(|| {
            anyhow::anyhow!(
                "the cluster in {} serves no web pages (its coordinator runs without --http)",
                conn.cluster.display()
            )
        })?,
    };
    println!("{}", web_url(&http, &resolve(conn)?.1));
    Ok(())
}

/// Where the cluster's coordinator serves its web pages: of several, the
/// active one's (else the first's).
fn active_http(conn: &Conn) -> anyhow::Result<Option<String>> {
    let f = embedded::load(&conn.cluster)?;
    if f.coordinators.is_empty() {
        return Ok(f.http);
    }
    let secret = resolve(conn)?.1;
    let active = (f.coordinators.iter()).find(|c| embedded::answers(&c.addr, &secret));
    Ok(active
        .or(f.coordinators.first())
        .and_then(|c| c.http.clone()))
}

/// `sluice rm`.
pub fn rm(name: &str, conn: &Conn) -> anyhow::Result<()> {
    let c = connect(conn)?;
    c.remove(name)?;
    println!("removed {name}");
    Ok(())
}

/// `sluice submit`: runs a job on the cluster and prints its summary.
pub fn submit(a: &SubmitArgs) -> anyhow::Result<Vec<JobReport>> {
    if a.yarn {
        let mut ra = RunArgs::parse(&a.args)?;
        if let Some(pool) = &a.pool {
            ra.define.push(format!("sluice.pool={pool}"));
        }
        // Workers near the job's input unless told otherwise.
        let mut opts = a.yarn_opts.clone();
        opts.insecure = a.conn.tls.insecure;
        let first = ra.input.split(',').next().unwrap_or_default();
        if opts.near.is_none() && first.starts_with("hdfs://") {
            opts.near = Some(first.to_owned());
        }
        return crate::yarn::application(&opts, |dir| {
            let conn = Conn::new(None, Some(dir.to_path_buf()), None);
            let target = target(&conn, a.replication, ra.quiet)?;
            crate::run::run_on(&ra, sluice_driver::Target::Cluster(&target))
        });
    }
    let mut ra = RunArgs::parse(&a.args)?;
    if let Some(pool) = &a.pool {
        ra.define.push(format!("sluice.pool={pool}"));
    }
    let target = target(&a.conn, a.replication, ra.quiet)?;
    crate::run::run_on(&ra, sluice_driver::Target::Cluster(&target))
}
