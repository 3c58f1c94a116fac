//! An embedded cluster: a coordinator and workers on this host, started
//! and stopped as processes (as Ballista's `standalone` mode does), with
//! a blocking API for the command line and tests.
//!
//! `DIR/cluster.json` ([`ClusterFile`]) records the processes; `DIR/secret`
//! the shared secret (created 0600); `DIR/coordinator/` the coordinator's
//! state; `DIR/worker-N/` each worker's data; `DIR/*.log` their logs.
//!
//! Unless told not to, `up` starts the coordinator under a supervisor (a
//! `sluice cluster supervise` process, [`SUPERVISE`]) that starts it
//! again, with the same command line and state directory, whenever it
//! dies; the supervisor keeps `DIR/supervisor.json` ([`SupervisorFile`]):
//! the coordinator's pid now and how many times it was started again.
//! `down` stops the supervisor first, so that nothing starts the
//! coordinator again while the cluster stops.
//!
//! With `--etcd URL` ([`UpOptions::etcd`]), `up` starts
//! [`UpOptions::coordinators`] coordinators instead, each at its own
//! ports with its home `DIR/coordinator-K/` (K from 1: its state
//! directory, its log, its supervisor's `supervisor.json`), all electing
//! one active coordinator under one etcd prefix of this cluster's own
//! ([`etcd_prefix`]); the workers are given every address. cluster.json
//! then lists them in `coordinators` ([`CoordinatorEntry`]), and its
//! `coordinator` is every address, comma-separated, for clients to
//! follow.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::BlockingClient;
use sluice_proto::auth::Secret;
use sluice_proto::tls::Role as CertRole;
use sluice_proto::ClusterError;

type Result<T> = std::result::Result<T, ClusterError>;

/// What `up` writes to `DIR/cluster.json`.
#[derive(Debug, Serialize, Deserialize)]
pub struct ClusterFile {
    pub coordinator: String,
    /// The coordinator's pid when the cluster came up (a supervised one's
    /// pid now is in `supervisor.json`).
    pub coordinator_pid: u32,
    /// The supervisor's pid, unless the coordinator runs unsupervised.
    #[serde(default)]
    pub supervisor_pid: Option<u32>,
    /// Where the coordinator serves its web pages and `/metrics`.
    #[serde(default)]
    pub http: Option<String>,
    pub workers: Vec<WorkerEntry>,
    /// Every coordinator of a cluster whose coordinators share their
    /// state through etcd (none in a cluster of one coordinator with its
    /// state directory, and in files written before there were several).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub coordinators: Vec<CoordinatorEntry>,
    /// The etcd endpoints the coordinators share, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<String>,
    /// The etcd prefix under which they elect their active coordinator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_prefix: Option<String>,
    /// The processes speak plaintext (`--insecure`), not TLS with the
    /// certificates of `DIR/tls/`.
    #[serde(default)]
    pub insecure: bool,
}

/// One of several coordinators in cluster.json.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CoordinatorEntry {
    /// Its gRPC address (it listens there only while active).
    pub addr: String,
    /// Where it serves its web pages while active.
    #[serde(default)]
    pub http: Option<String>,
    /// Its pid when the cluster came up (a supervised one's pid now is
    /// in its home's `supervisor.json`).
    pub pid: u32,
    /// Its supervisor's pid, unless it runs unsupervised.
    #[serde(default)]
    pub supervisor_pid: Option<u32>,
    /// Its state directory.
    pub state_dir: PathBuf,
    /// Its home: its log and its supervisor's `supervisor.json` (for one
    /// of several, its state directory too).
    pub home: PathBuf,
}

impl CoordinatorEntry {
    /// Its pid now: the one its supervisor started last, or the one it
    /// was started with (0: none runs).
    pub fn pid_now(&self) -> u32 {
        match self.supervisor_pid {
            Some(_) => SupervisorFile::load(&self.home).map_or(0, |s| s.coordinator_pid),
            None => self.pid,
        }
    }
}

/// What one of several coordinators is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// It answers calls.
    Active,
    /// It runs and does not answer (it waits to take over).
    Standby,
    /// No process.
    Down,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Active => "active",
            Role::Standby => "standby",
            Role::Down => "down",
        })
    }
}

/// Whether the coordinator at `addr` answers a call within about a
/// second.
pub fn answers(addr: &str, secret: &Secret) -> bool {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return false;
    };
    rt.block_on(crate::follow::probe(addr, secret)).is_ok()
}

/// What coordinator `c` is doing: active if it answers within about a
/// second, else standby while its process runs, else down.
pub fn role(c: &CoordinatorEntry, secret: &Secret) -> Role {
    let pid = c.pid_now();
    if pid != 0 && alive(pid) && answers(&c.addr, secret) {
        Role::Active
    } else if pid != 0 && alive(pid) {
        Role::Standby
    } else {
        Role::Down
    }
}

/// One worker in cluster.json.
#[derive(Debug, Serialize, Deserialize)]
pub struct WorkerEntry {
    pub id: u64,
    pub uid: String,
    pub addr: String,
    pub pid: u32,
    pub data_dir: PathBuf,
}

/// How to start an embedded cluster.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// The `sluice` executable to run as coordinator and workers.
    pub exe: PathBuf,
    /// Workers per data center: one entry is one data center, `dc1`, with
    /// workers of this host's place; more start data centers `dc1`,
    /// `dc2`, ..., one rack each, worker `i` on host `worker-i`.
    pub workers: Vec<u32>,
    /// Slots per worker [default: cores / workers, at least 1].
    pub slots: Option<u32>,
    /// Extra coordinator flags.
    pub coordinator_flags: Vec<String>,
    /// Extra flags for every worker.
    pub worker_flags: Vec<String>,
    /// Start the coordinator under a supervisor that starts it again when
    /// it dies.
    pub supervise: bool,
    /// Coordinators to start (with [`UpOptions::etcd`]; one without).
    pub coordinators: u32,
    /// etcd endpoints (`URL[,URL...]`) the coordinators keep their state
    /// in and elect their active one through.
    pub etcd: Option<String>,
    /// Plaintext on every connection, no certificates (for measurement
    /// only).
    pub insecure: bool,
}

/// The subcommand of the `sluice` executable that supervises a
/// coordinator: `sluice cluster supervise --dir DIR -- COORDINATOR-ARGS`.
pub const SUPERVISE: [&str; 2] = ["cluster", "supervise"];

/// What a supervisor writes to `DIR/supervisor.json` (whole, renamed into
/// place) each time its coordinator starts or it stops.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SupervisorFile {
    /// The supervisor's pid.
    pub supervisor_pid: u32,
    /// The coordinator's pid now (0 while none runs).
    pub coordinator_pid: u32,
    /// Times the coordinator was started again after it died.
    pub restarts: u32,
    /// Why the supervisor stopped starting it, once it has.
    #[serde(default)]
    pub stopped: Option<String>,
}

impl SupervisorFile {
    /// Reads `DIR/supervisor.json`, if there is one.
    pub fn load(dir: &Path) -> Option<SupervisorFile> {
        let bytes = std::fs::read(dir.join("supervisor.json")).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Writes it to `DIR/supervisor.json` whole.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let path = dir.join("supervisor.json");
        let tmp = dir.join(".supervisor.json.tmp");
        let json = serde_json::to_string_pretty(self).expect("serializable");
        std::fs::write(&tmp, json).map_err(|e| ClusterError::io("writing", &tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| ClusterError::io("renaming to", &path, e))
    }
}

/// Reads `DIR/cluster.json`.
pub fn load(dir: &Path) -> Result<ClusterFile> {
    let path = dir.join("cluster.json");
    let bytes = std::fs::read(&path).map_err(|e| ClusterError::io("reading", &path, e))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ClusterError::Config(format!("{} is damaged: {e}", path.display())))
}

/// Starts a coordinator and workers in `dir`, waits until every worker
/// has registered, and writes cluster.json.
pub fn up(dir: &Path, opts: &UpOptions) -> Result<ClusterFile> {
    if dir.join("cluster.json").exists() {
        return Err(ClusterError::Config(format!(
            "{} already has a cluster (sluice cluster down --dir {0} first)",
            dir.display()
        )));
    }
    private_dir(dir)?;
    let dir = dir
        .canonicalize()
        .map_err(|e| ClusterError::io("resolving", dir, e))?;
    let secret_file = write_secret(&dir)?;
    let tls = crate::certs::init(&dir, opts.insecure)?;
    let started = match &opts.etcd {
        Some(etcd) => start_several(&dir, &secret_file, opts, etcd, tls.as_deref())?,
        None => vec![start_coordinator(&dir, &secret_file, opts, tls.as_deref())?],
    };
    let addrs: Vec<&str> = started.iter().map(|s| s.addr.as_str()).collect();
    let addr = addrs.join(",");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let n: u32 = opts.workers.iter().sum();
    let slots = opts.slots.unwrap_or((cores / n.max(1)).max(1));
    let mut pids = Vec::new();
    for (i, place) in places(&opts.workers).into_iter().enumerate() {
        let data = dir.join(format!("worker-{i}"));
        let mut args = vec![
            "worker".into(),
            "--coordinator".into(),
            addr.clone(),
            "--data-dir".into(),
            path_arg(&data),
            "--slots".into(),
            slots.to_string(),
            "--secret-file".into(),
            path_arg(&secret_file),
        ];
        let name = format!("worker-{i}");
        args.extend(crate::certs::flags(
            tls.as_deref(),
            &name,
            CertRole::Worker,
        )?);
        // The workers share this host: half its memory among them.
        if !opts.worker_flags.iter().any(|f| f.starts_with("--memory")) {
            let each = host_memory() / 2 / u64::from(n.max(1));
            args.extend(["--memory".into(), each.to_string()]);
        }
        if !opts.worker_flags.iter().any(|f| f.starts_with("--http")) {
            args.extend(["--http".into(), "127.0.0.1:0".into()]);
        }
        args.extend(place);
        args.extend(opts.worker_flags.iter().cloned());
        let log = format!("worker-{i}.log");
        pids.push((spawn(&opts.exe, &dir, &log, &args)?, data));
    }
    let workers = wait_for_workers(&addr, &secret_file, pids)?;
    let f = cluster_file(addr, started, workers, opts, &dir);
    let path = dir.join("cluster.json");
    let json = serde_json::to_string_pretty(&f).expect("serializable");
    std::fs::write(&path, json).map_err(|e| ClusterError::io("writing", &path, e))?;
    Ok(f)
}

/// What cluster.json says of a cluster `up` started: one coordinator as
/// it always did, or several, each listed, the first active one's pid
/// and web pages on top.
fn cluster_file(
    addr: String,
    started: Vec<Started>,
    workers: Vec<WorkerEntry>,
    opts: &UpOptions,
    dir: &Path,
) -> ClusterFile {
    let active = (started.iter())
        .position(|s| s.home.dir.join("coordinator.addr").exists())
        .unwrap_or(0);
    let top = &started[active];
    let mut f = ClusterFile {
        insecure: opts.insecure,
        coordinator: addr,
        coordinator_pid: top.pid,
        supervisor_pid: top.supervisor,
        http: top.http.clone(),
        workers,
        coordinators: Vec::new(),
        etcd: None,
        etcd_prefix: None,
    };
    if let Some(etcd) = &opts.etcd {
        f.supervisor_pid = None;
        f.etcd = Some(etcd.clone());
        f.etcd_prefix = Some(etcd_prefix(dir));
        f.coordinators = started
            .into_iter()
            .map(|s| CoordinatorEntry {
                addr: s.addr,
                http: s.http,
                pid: s.pid,
                supervisor_pid: s.supervisor,
                state_dir: s.home.state,
                home: s.home.dir,
            })
            .collect();
    }
    f
}

/// Each worker's place flags, workers numbered across data centers: none
/// for a single data center, else `--location /dcD/rackD/worker-I`.
fn places(per_dc: &[u32]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (d, &n) in per_dc.iter().enumerate() {
        for _ in 0..n {
            let i = out.len();
            out.push(if per_dc.len() > 1 {
                let dc = d + 1;
                vec!["--location".into(), format!("/dc{dc}/rack{dc}/worker-{i}")]
            } else {
                Vec::new()
            });
        }
    }
    out
}

/// Creates `dir` if need be and makes it mode 0700: it holds the secret,
/// the keys, the coordinator's state and the workers' data, which no
/// other user (a task user among them) may reach.
fn private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).map_err(|e| ClusterError::io("creating", dir, e))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| ClusterError::io("setting the mode of", dir, e))
}

/// Creates `dir/secret` (0600) unless it exists; returns its path.
fn write_secret(dir: &Path) -> Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("secret");
    if !path.exists() {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut f| f.write_all(Secret::generate().as_bytes()))
            .map_err(|e| ClusterError::io("writing", &path, e))?;
    }
    Ok(path)
}

/// A free port on the loopback interface, chosen now.
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| ClusterError::net("choosing a port on", "127.0.0.1", e))?
        .port())
}

/// A coordinator `up` started.
struct Started {
    /// Its address.
    addr: String,
    /// Its web pages' address.
    http: Option<String>,
    /// Its pid.
    pid: u32,
    /// Its supervisor's pid, if it has one.
    supervisor: Option<u32>,
    /// Its home: state directory, log, `supervisor.json`.
    home: Home,
}

/// Where a coordinator's files go: its address files, logs and
/// `supervisor.json` (`dir`), and its state directory.
#[derive(Debug, Clone)]
struct Home {
    dir: PathBuf,
    state: PathBuf,
    /// Its transport flags (certs::flags).
    tls: Vec<String>,
}

/// A coordinator process started, not yet known to be serving.
struct Launch {
    port: u16,
    /// Its web port, when `up` chose it.
    http: Option<u16>,
    /// Its pid, when it runs unsupervised.
    first: Option<u32>,
    supervisor: Option<u32>,
}

impl Launch {
    /// Its pid, once known (a supervisor writes it).
    fn pid(&self, home: &Home) -> Option<u32> {
        self.first
            .or_else(|| Some(SupervisorFile::load(&home.dir)?.coordinator_pid))
            .filter(|&p| p != 0)
    }

    /// Kills whatever runs of it.
    fn kill(&self, home: &Home) {
        let last = SupervisorFile::load(&home.dir).map(|s| s.coordinator_pid);
        let pids: Vec<u32> = (self.supervisor.into_iter())
            .chain(self.first)
            .chain(last)
            .collect();
        signal(&pids, "KILL");
    }
}

/// Starts the coordinator (under a supervisor unless `opts` say not to)
/// on ports chosen now, not at bind time, so that one restarted with the
/// same command line comes back where workers look. Its web pages are
/// served on loopback unless the coordinator flags say `--http`
/// themselves.
///
/// Its ports are chosen before it binds them, so another process may take
/// one first; a coordinator that finds its port taken is started again
/// on new ones, up to [`PORT_TRIES`] times.
fn start_coordinator(
    dir: &Path,
    secret_file: &Path,
    opts: &UpOptions,
    tls: Option<&Path>,
) -> Result<Started> {
    let mut tries = 1;
    loop {
        match start_coordinator_once(dir, secret_file, opts, tls) {
            Err(_) if tries < PORT_TRIES && port_taken(dir) => {
                tries += 1;
                // A fresh start: nothing of the one that could not listen.
                let _ = std::fs::remove_file(dir.join("coordinator.log"));
                let _ = std::fs::remove_dir_all(dir.join("coordinator"));
            }
            r => return r,
        }
    }
}

/// Starts of a coordinator whose port was taken before it bound it.
const PORT_TRIES: u32 = 3;

/// Whether the coordinator in `dir` could not listen: its port was taken.
fn port_taken(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("coordinator.log"))
        .is_ok_and(|log| log.contains("Address already in use"))
}

fn start_coordinator_once(
    dir: &Path,
    secret_file: &Path,
    opts: &UpOptions,
    tls: Option<&Path>,
) -> Result<Started> {
    let home = Home {
        dir: dir.to_owned(),
        state: dir.join("coordinator"),
        tls: crate::certs::flags(tls, "coordinator", CertRole::Coordinator)?,
    };
    let l = launch(&home, secret_file, opts, &[])?;
    let addr_file = home.dir.join("coordinator.addr");
    let started = wait_for(Duration::from_secs(20), || {
        if port_taken(dir) {
            return Some(None);
        }
        let addr = std::fs::read_to_string(&addr_file).ok()?;
        Some(Some((addr, l.pid(&home)?)))
    })
    .flatten();
    let Some((addr, pid)) = started else {
        // Nothing of a coordinator that did not start is left running.
        l.kill(&home);
        return Err(ClusterError::Config(
            "the coordinator did not start; see coordinator.log".into(),
        ));
    };
    // The web address is written before the coordinator's own.
    let http = std::fs::read_to_string(home.dir.join("http.addr")).ok();
    Ok(Started {
        addr,
        http,
        pid,
        supervisor: l.supervisor,
        home,
    })
}

/// Starts `opts.coordinators` coordinators sharing `etcd`, each in its
/// home `DIR/coordinator-K/`, and waits until every one runs and one is
/// active (listening). Every one is killed if they do not.
fn start_several(
    dir: &Path,
    secret_file: &Path,
    opts: &UpOptions,
    etcd: &str,
    tls: Option<&Path>,
) -> Result<Vec<Started>> {
    let shared = [
        "--etcd".to_owned(),
        etcd.to_owned(),
        "--etcd-prefix".to_owned(),
        etcd_prefix(dir),
    ];
    let mut launched: Vec<(Home, Launch)> = Vec::new();
    for k in 1..=opts.coordinators.max(1) {
        let home_dir = dir.join(format!("coordinator-{k}"));
        std::fs::create_dir_all(&home_dir)
            .map_err(|e| ClusterError::io("creating", &home_dir, e))?;
        let name = format!("coordinator-{k}");
        let home = Home {
            tls: crate::certs::flags(tls, &name, CertRole::Coordinator)?,
            dir: home_dir.clone(),
            state: home_dir,
        };
        match launch(&home, secret_file, opts, &shared) {
            Ok(l) => launched.push((home, l)),
            Err(e) => {
                launched.iter().for_each(|(h, l)| l.kill(h));
                return Err(e);
            }
        }
    }
    let ready = wait_for(Duration::from_secs(20), || {
        let pids: Option<Vec<u32>> = launched.iter().map(|(h, l)| l.pid(h)).collect();
        let active = launched
            .iter()
            .any(|(h, _)| h.dir.join("coordinator.addr").exists());
        pids.filter(|_| active)
    });
    let Some(pids) = ready else {
        launched.iter().for_each(|(h, l)| l.kill(h));
        return Err(ClusterError::Config(
            "the coordinators did not start, or none became active; see coordinator-*/coordinator.log"
                .into(),
        ));
    };
    Ok(launched
        .into_iter()
        .zip(pids)
        .map(|((home, l), pid)| Started {
            addr: format!("127.0.0.1:{}", l.port),
            http: l.http.map(|p| format!("127.0.0.1:{p}")),
            pid,
            supervisor: l.supervisor,
            home,
        })
        .collect())
}

/// The etcd prefix the coordinators of the cluster in `dir` share:
/// `/sluice/` and the directory's name with a checksum of its whole
/// path, so that two clusters on one etcd never meet, and a cluster
/// brought up again in the same directory finds its state.
pub fn etcd_prefix(dir: &Path) -> String {
    let name: String = (dir
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .chars())
    .map(|c| {
        if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
            c
        } else {
            '_'
        }
    })
    .collect();
    let sum = crc32c::crc32c(dir.as_os_str().as_encoded_bytes());
    format!("/sluice/{name}-{sum:08x}")
}

/// Spawns a coordinator whose files go to `home` (under a supervisor
/// unless `opts` say not to), with `extra` flags, on ports chosen now.
fn launch(home: &Home, secret_file: &Path, opts: &UpOptions, extra: &[String]) -> Result<Launch> {
    let addr_file = home.dir.join("coordinator.addr");
    let http_file = home.dir.join("http.addr");
    let _ = std::fs::remove_file(&addr_file);
    let _ = std::fs::remove_file(&http_file);
    let _ = std::fs::remove_file(home.dir.join("supervisor.json"));
    let port = free_port()?;
    let mut args = vec![
        "coordinator".into(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--state-dir".into(),
        path_arg(&home.state),
        "--secret-file".into(),
        path_arg(secret_file),
        "--addr-file".into(),
        path_arg(&addr_file),
    ];
    let mut http = None;
    if !opts
        .coordinator_flags
        .iter()
        .any(|f| f.starts_with("--http"))
    {
        let p = free_port()?;
        http = Some(p);
        args.extend([
            "--http".into(),
            format!("127.0.0.1:{p}"),
            "--http-addr-file".into(),
            path_arg(&http_file),
        ]);
    }
    args.extend(home.tls.iter().cloned());
    args.extend(extra.iter().cloned());
    args.extend(opts.coordinator_flags.iter().cloned());
    let (first, supervisor) = if opts.supervise {
        let mut sup: Vec<String> = SUPERVISE.iter().map(|&a| a.to_owned()).collect();
        sup.extend(["--dir".into(), path_arg(&home.dir), "--".into()]);
        sup.extend(args);
        let pid = spawn(&opts.exe, &home.dir, "supervisor.log", &sup)?;
        (None, Some(pid))
    } else {
        (
            Some(spawn(&opts.exe, &home.dir, "coordinator.log", &args)?),
            None,
        )
    };
    Ok(Launch {
        port,
        http,
        first,
        supervisor,
    })
}

/// Waits until the workers spawned as `pids` have registered.
fn wait_for_workers(
    addr: &str,
    secret_file: &Path,
    pids: Vec<(u32, PathBuf)>,
) -> Result<Vec<WorkerEntry>> {
    let c = BlockingClient::connect(addr, Secret::load(secret_file)?)?;
    let n = pids.len();
    let info = wait_for(Duration::from_secs(30), || {
        let info = c.info().ok()?;
        (info.workers.iter().filter(|w| w.alive).count() >= n).then_some(info)
    })
    .ok_or_else(|| ClusterError::Config("the workers did not register; see worker-*.log".into()))?;
    Ok(pids
        .into_iter()
        .filter_map(|(pid, data_dir)| {
            let w = info.workers.iter().find(|w| w.pid == pid)?;
            Some(WorkerEntry {
                id: w.id,
                uid: w.uid.clone(),
                addr: w.data_addr.clone(),
                pid,
                data_dir,
            })
        })
        .collect())
}

/// Stops every process of cluster.json (TERM, then KILL after 5 s): the
/// supervisor first, so that it starts nothing again, then the
/// coordinator and the workers. Removes the file; returns how many
/// processes there were.
pub fn down(dir: &Path) -> Result<usize> {
    let f = load(dir)?;
    let coordinators = f.coordinator_entries(dir);
    let supervisors: Vec<u32> = (coordinators.iter())
        .filter_map(|c| c.supervisor_pid)
        .collect();
    stop(&supervisors);
    let mut pids: Vec<u32> = f.workers.iter().map(|w| w.pid).collect();
    // A supervised coordinator's pid is the one it started last (there,
    // should it have outlived its supervisor).
    pids.extend(
        (coordinators.iter())
            .map(CoordinatorEntry::pid_now)
            .filter(|&p| p != 0 && alive(p)),
    );
    stop(&pids);
    let path = dir.join("cluster.json");
    std::fs::remove_file(&path).map_err(|e| ClusterError::io("removing", &path, e))?;
    Ok(f.workers.len() + coordinators.len() + supervisors.len())
}

impl ClusterFile {
    /// Every coordinator of the cluster in `dir`: those listed, or the
    /// one of a cluster of one (its home is `dir`).
    pub fn coordinator_entries(&self, dir: &Path) -> Vec<CoordinatorEntry> {
        if !self.coordinators.is_empty() {
            return self.coordinators.clone();
        }
        vec![CoordinatorEntry {
            addr: self.coordinator.clone(),
            http: self.http.clone(),
            pid: self.coordinator_pid,
            supervisor_pid: self.supervisor_pid,
            state_dir: dir.join("coordinator"),
            home: dir.to_owned(),
        }]
    }
}

/// Sends `pids` TERM, and KILL to those still there after 5 s.
fn stop(pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    signal(pids, "TERM");
    let gone = wait_for(Duration::from_secs(5), || {
        pids.iter().all(|&p| !alive(p)).then_some(())
    });
    if gone.is_none() {
        signal(pids, "KILL");
    }
}

/// Whether process `pid` runs (a zombie has ended).
pub fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid)
}

/// This host's memory in bytes (`MemTotal` of /proc/meminfo; 4 GiB when
/// that cannot be read).
pub fn host_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let kb = m.lines().find(|l| l.starts_with("MemTotal:"))?;
            kb.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(4 << 30, |kb| kb * 1024)
}

fn path_arg(p: &Path) -> String {
    p.display().to_string()
}

/// Starts `exe args` in its own process group, its output in `dir/log`.
fn spawn(exe: &Path, dir: &Path, log: &str, args: &[String]) -> Result<u32> {
    use std::os::unix::process::CommandExt;
    let path = dir.join(log);
    let out = std::fs::File::create(&path).map_err(|e| ClusterError::io("creating", &path, e))?;
    let err = out
        .try_clone()
        .map_err(|e| ClusterError::io("opening", &path, e))?;
    let child = std::process::Command::new(exe)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| ClusterError::io("starting", exe, e))?;
    Ok(child.id())
}

fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
    })
}

/// Sends `sig` to `pids`; pid 0 (none), which `kill` would take for
/// its own process group, is left out.
fn signal(pids: &[u32], sig: &str) {
    let pids: Vec<String> = pids
        .iter()
        .filter(|&&p| p != 0)
        .map(u32::to_string)
        .collect();
    if pids.is_empty() {
        return;
    }
    let _ = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .args(pids)
        .stderr(std::process::Stdio::null())
        .status();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_coordinator_log_saying_its_port_was_taken_is_told_apart() {
        let d = tempfile::tempdir().unwrap();
        assert!(!port_taken(d.path()), "no log: nothing taken");
        let log = d.path().join("coordinator.log");
        std::fs::write(&log, "coordinator epoch 1 listening on 127.0.0.1:7070\n").unwrap();
        assert!(!port_taken(d.path()));
        std::fs::write(
            &log,
            "error: listening on 127.0.0.1:7070: Address already in use (os error 98)\n",
        )
        .unwrap();
        assert!(port_taken(d.path()));
    }
}
