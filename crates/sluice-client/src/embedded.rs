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

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::BlockingClient;
use sluice_proto::auth::Secret;
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
    std::fs::create_dir_all(dir).map_err(|e| ClusterError::io("creating", dir, e))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| ClusterError::io("resolving", dir, e))?;
    let secret_file = write_secret(&dir)?;
    let started = start_coordinator(&dir, &secret_file, opts)?;
    let addr = started.addr.clone();
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
    let f = ClusterFile {
        coordinator: addr,
        coordinator_pid: started.pid,
        supervisor_pid: started.supervisor,
        http: started.http,
        workers,
    };
    let path = dir.join("cluster.json");
    let json = serde_json::to_string_pretty(&f).expect("serializable");
    std::fs::write(&path, json).map_err(|e| ClusterError::io("writing", &path, e))?;
    Ok(f)
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
}

/// Starts the coordinator (under a supervisor unless `opts` say not to)
/// on ports chosen now, not at bind time, so that one restarted with the
/// same command line comes back where workers look. Its web pages are
/// served on loopback unless the coordinator flags say `--http`
/// themselves.
fn start_coordinator(dir: &Path, secret_file: &Path, opts: &UpOptions) -> Result<Started> {
    let addr_file = dir.join("coordinator.addr");
    let http_file = dir.join("http.addr");
    let _ = std::fs::remove_file(&addr_file);
    let _ = std::fs::remove_file(&http_file);
    let _ = std::fs::remove_file(dir.join("supervisor.json"));
    let port = free_port()?;
    let mut args = vec![
        "coordinator".into(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--state-dir".into(),
        path_arg(&dir.join("coordinator")),
        "--secret-file".into(),
        path_arg(secret_file),
        "--addr-file".into(),
        path_arg(&addr_file),
    ];
    if !opts
        .coordinator_flags
        .iter()
        .any(|f| f.starts_with("--http"))
    {
        args.extend([
            "--http".into(),
            format!("127.0.0.1:{}", free_port()?),
            "--http-addr-file".into(),
            path_arg(&http_file),
        ]);
    }
    args.extend(opts.coordinator_flags.iter().cloned());
    let (first, supervisor) = if opts.supervise {
        let mut sup: Vec<String> = SUPERVISE.iter().map(|&a| a.to_owned()).collect();
        sup.extend(["--dir".into(), path_arg(dir), "--".into()]);
        sup.extend(args);
        let pid = spawn(&opts.exe, dir, "supervisor.log", &sup)?;
        (None, Some(pid))
    } else {
        (Some(spawn(&opts.exe, dir, "coordinator.log", &args)?), None)
    };
    let started = wait_for(Duration::from_secs(20), || {
        let addr = std::fs::read_to_string(&addr_file).ok()?;
        let pid = first.or_else(|| Some(SupervisorFile::load(dir)?.coordinator_pid))?;
        Some((addr, pid))
    });
    let Some((addr, pid)) = started else {
        // Nothing of a coordinator that did not start is left running.
        let last = SupervisorFile::load(dir).map(|s| s.coordinator_pid);
        let pids: Vec<u32> = supervisor.into_iter().chain(first).chain(last).collect();
        signal(&pids, "KILL");
        return Err(ClusterError::Config(
            "the coordinator did not start; see coordinator.log".into(),
        ));
    };
    // The web address is written before the coordinator's own.
    let http = std::fs::read_to_string(&http_file).ok();
    Ok(Started {
        addr,
        http,
        pid,
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
    let supervisor: Vec<u32> = f.supervisor_pid.into_iter().collect();
    stop(&supervisor);
    let mut pids: Vec<u32> = f.workers.iter().map(|w| w.pid).collect();
    // A supervised coordinator's pid is the one it started last (there,
    // should it have outlived its supervisor).
    let coordinator = match f.supervisor_pid {
        Some(_) => SupervisorFile::load(dir).map_or(0, |s| s.coordinator_pid),
        None => f.coordinator_pid,
    };
    pids.extend(Some(coordinator).filter(|&p| p != 0 && alive(p)));
    stop(&pids);
    let path = dir.join("cluster.json");
    std::fs::remove_file(&path).map_err(|e| ClusterError::io("removing", &path, e))?;
    Ok(f.workers.len() + 1 + supervisor.len())
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
