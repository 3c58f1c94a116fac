//! `sluice yarn up|status|down`: a Sluice cluster as a YARN application.
//!
//! `up` reads the cluster's client configuration (`--hadoop-conf` or
//! `HADOOP_CONF_DIR`), asks the ResourceManager for an application id,
//! uploads the `sluice` binary, the ApplicationMaster's jar, a fresh
//! shared secret and the configuration to `/user/USER/.sluice/APP_ID/`,
//! and submits an application of type `SLUICE` whose ApplicationMaster
//! (the `yarn/` Maven module) runs the coordinator and asks YARN for the
//! workers. It waits for the coordinator's address in the staging
//! directory and for every worker to register, then writes
//! `DIR/cluster.json` and `DIR/secret` (so `--cluster DIR` works as for
//! any Sluice cluster) and `DIR/yarn.json` ([`YarnFile`]).
//!
//! TLS, unless `--insecure`: `up` makes the cluster's CA and the clients'
//! certificate in `DIR/tls/`, as `cluster up` does, and ships the CA's
//! `ca.pem` and `ca.key` (mode 600) to the ApplicationMaster alone,
//! which issues the coordinator's and each worker container's
//! certificate for the host YARN placed it on.
//!
//! `down` writes `stop` into the staging directory: the ApplicationMaster
//! releases its containers, stops the coordinator, unregisters SUCCEEDED
//! and removes the staging directory. A cluster whose application does
//! not finish within a minute is killed through the ResourceManager.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use sluice_client::embedded::ClusterFile;
use sluice_client::BlockingClient;
use sluice_proto::auth::Secret;
use sluice_tools::units;
use sluice_yarn::conf::{HadoopConf, SHIPPED};
use sluice_yarn::launch::{self, AmLaunch};
use sluice_yarn::rm::{AppReport, NewApp, QueueMax, Rm};
use sluice_yarn::staging::Staging;
use sluice_yarn::YarnError;

/// `sluice yarn ...`.
#[derive(Debug, Subcommand)]
pub enum YarnCmd {
    /// Bring a Sluice cluster up as a YARN application; prints its id
    /// and returns when its workers are registered.
    Up(UpArgs),
    /// The application's state, its containers and the workers.
    Status {
        /// The cluster's directory (`sluice yarn up --dir`).
        #[arg(long)]
        dir: PathBuf,
    },
    /// End the application (FINISHED, SUCCEEDED): every container
    /// released, the staging directory removed.
    Down {
        /// The cluster's directory (`sluice yarn up --dir`).
        #[arg(long)]
        dir: PathBuf,
    },
}

/// `sluice yarn up`'s flags.
#[derive(Debug, Args, Clone)]
pub struct UpArgs {
    #[command(flatten)]
    pub opts: YarnOpts,
    /// Directory for cluster.json, the secret, yarn.json and the
    /// certificates (tls/).
    #[arg(long)]
    pub dir: PathBuf,
    /// Speak plaintext, with no TLS: for measurement only; anyone on the
    /// network can read and change every byte.
    #[arg(long)]
    pub insecure: bool,
}

/// What a YARN cluster is made of (`sluice yarn up`, `sluice submit
/// --yarn`).
#[derive(Debug, Args, Clone)]
pub struct YarnOpts {
    /// Worker containers.
    #[arg(long, default_value_t = 2)]
    pub workers: u32,
    /// Each worker's `--memory` (its tasks' budget); its container holds
    /// this plus Sluice's overhead (the larger of 256 MiB and a tenth)
    /// plus --worker-cache.
    #[arg(long, default_value = "4GB", value_parser = units::parse_size)]
    pub worker_memory: u64,
    /// Virtual cores of each worker container.
    #[arg(long, default_value_t = 2)]
    pub worker_vcores: u32,
    /// Each worker's block cache (locked memory, added to its container).
    #[arg(long, default_value = "0", value_parser = units::parse_size)]
    pub worker_cache: u64,
    /// Task slots of each worker [default: --worker-vcores].
    #[arg(long)]
    pub slots: Option<u32>,
    /// The YARN queue [default: the cluster's default queue].
    #[arg(long)]
    pub queue: Option<String>,
    /// The application's name.
    #[arg(long, default_value = "sluice")]
    pub name: String,
    /// Ask for workers on the hosts holding this HDFS path's blocks
    /// (`hdfs://...`; YARN relaxes locality when they are busy).
    #[arg(long)]
    pub near: Option<String>,
    /// Lost worker containers replaced before the application fails.
    #[arg(long, default_value_t = 3)]
    pub max_worker_failures: u32,
    /// The cluster's client configuration [default: $HADOOP_CONF_DIR].
    #[arg(long)]
    pub hadoop_conf: Option<PathBuf>,
    /// The ApplicationMaster's jar [default: $SLUICE_YARN_AM_JAR, else
    /// `sluice-yarn-am.jar` beside the binary or in ../share/sluice].
    #[arg(long)]
    pub am_jar: Option<PathBuf>,
    /// How long to wait for the cluster to be up.
    #[arg(long, default_value = "180s", value_parser = sluice_tools::conn::parse_duration)]
    pub timeout: Duration,
    /// Plaintext, no TLS (`yarn up --insecure`, `submit --yarn
    /// --insecure`).
    #[arg(skip)]
    pub insecure: bool,
}

/// `DIR/yarn.json`: where a YARN cluster's application is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct YarnFile {
    /// The application id.
    pub app_id: String,
    /// The ResourceManager's web address.
    pub rm: String,
    /// The user it runs as.
    pub user: String,
    /// `fs.defaultFS`.
    pub fs: String,
    /// The client configuration directory.
    pub hadoop_conf: PathBuf,
    /// Worker containers asked for.
    pub workers: u32,
}

impl YarnFile {
    fn load(dir: &Path) -> anyhow::Result<YarnFile> {
        let path = dir.join("yarn.json");
        let bytes = std::fs::read(&path).with_context(|| {
            format!(
                "no YARN cluster in {} (reading {})",
                dir.display(),
                path.display()
            )
        })?;
        serde_json::from_slice(&bytes).with_context(|| format!("{} is damaged", path.display()))
    }

    fn save(&self, dir: &Path) -> anyhow::Result<()> {
        write_whole(
            &dir.join("yarn.json"),
            serde_json::to_string_pretty(self)?.as_bytes(),
        )
    }

    fn staging(&self) -> anyhow::Result<Staging> {
        Ok(Staging::open(
            &self.fs,
            &self.hadoop_conf,
            &self.user,
            &self.app_id,
        )?)
    }
}

/// `sluice yarn ...`.
pub fn yarn(cmd: &YarnCmd) -> anyhow::Result<()> {
    match cmd {
        YarnCmd::Up(a) => {
            let opts = YarnOpts {
                insecure: a.insecure,
                ..a.opts.clone()
            };
            up(&opts, &a.dir).map(|app| println!("{app}"))
        }
        YarnCmd::Status { dir } => status(dir),
        YarnCmd::Down { dir } => {
            let app = YarnFile::load(dir)?.app_id;
            let r = down(dir)?;
            println!("{app}: {} {}", r.state, r.final_status);
            Ok(())
        }
    }
}

/// The user the cluster is asked as (`HADOOP_USER_NAME`, `USER`, else
/// the system's name for this process's user).
fn user() -> anyhow::Result<String> {
    for var in ["HADOOP_USER_NAME", "USER", "LOGNAME"] {
        if let Ok(u) = std::env::var(var) {
            if !u.is_empty() {
                return Ok(u);
            }
        }
    }
    let out = std::process::Command::new("id").arg("-un").output()?;
    let u = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if u.is_empty() {
        bail!("no user name: set HADOOP_USER_NAME");
    }
    Ok(u)
}

/// The ApplicationMaster's jar.
fn am_jar(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("SLUICE_YARN_AM_JAR") {
        return Ok(p.into());
    }
    let exe = std::env::current_exe()?;
    let bin = exe.parent().unwrap_or(Path::new("."));
    let candidates = [
        bin.join("sluice-yarn-am.jar"),
        bin.join("../share/sluice/sluice-yarn-am.jar"),
    ];
    candidates
        .iter()
        .find(|p| p.exists())
        .cloned()
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no ApplicationMaster jar: build it (mvn -f yarn/pom.xml package) and pass \
             --am-jar yarn/target/sluice-yarn-am.jar or set SLUICE_YARN_AM_JAR"
            )
        })
}

/// The largest container the application may ask for: the cluster's
/// (`new-application`'s maximum capability) or, when smaller, its
/// queue's (the scheduler's report), with whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Limit {
    mb: u64,
    vcores: u64,
    /// The queue's path when the queue's limit is the smaller.
    queue: Option<String>,
}

impl Limit {
    fn of(new: &NewApp, queue: Option<&QueueMax>) -> Limit {
        let cluster = Limit {
            mb: new.max_mb,
            vcores: new.max_vcores,
            queue: None,
        };
        match queue {
            Some(q) if q.mb < new.max_mb || q.vcores < new.max_vcores => Limit {
                mb: q.mb.min(new.max_mb),
                vcores: q.vcores.min(new.max_vcores),
                queue: Some(q.path.clone()),
            },
            _ => cluster,
        }
    }

    fn too_large(&self, what: &str, asked: String, max: String, unit: &str) -> YarnError {
        let (whose, key) = match &self.queue {
            Some(q) => (
                format!("queue {q}'s"),
                format!("yarn.scheduler.capacity.{q}.maximum-allocation-{unit}"),
            ),
            None => (
                "the cluster's".to_owned(),
                format!("yarn.scheduler.maximum-allocation-{unit}"),
            ),
        };
        YarnError::TooLarge {
            what: what.into(),
            asked,
            whose,
            max,
            key,
        }
    }

    /// Refuses a container larger than the limit.
    fn check(&self, what: &str, mb: u64, vcores: u64) -> Result<(), YarnError> {
        if mb > self.mb {
            let max = format!("{} MB", self.mb);
            return Err(self.too_large(what, format!("{mb} MB"), max, "mb"));
        }
        if vcores > self.vcores {
            let max = format!("{} vcores", self.vcores);
            return Err(self.too_large(what, format!("{vcores} vcores"), max, "vcores"));
        }
        Ok(())
    }
}

/// `sluice yarn up`: the application id once its workers are registered.
pub fn up(a: &YarnOpts, dir: &Path) -> anyhow::Result<String> {
    let t = Instant::now();
    if dir.join("cluster.json").exists() {
        bail!(
            "{} already has a cluster (sluice yarn down --dir {0} first)",
            dir.display()
        );
    }
    if a.workers == 0 {
        bail!("--workers must be at least 1");
    }
    if a.insecure {
        eprintln!("warning: --insecure: the cluster speaks plaintext, no TLS");
    }
    let conf = HadoopConf::find(a.hadoop_conf.as_deref())?;
    let fs = conf.default_fs()?;
    let user = user()?;
    let jar = am_jar(a.am_jar.as_deref())?;
    if !jar.exists() {
        bail!("the ApplicationMaster jar {} does not exist", jar.display());
    }
    let rm = Rm::new(&conf.rm_web()?, &user);
    let new = rm.new_application()?;
    // A queue's own maximum, when the scheduler reports one (a scheduler
    // that does not leaves the cluster's, and YARN's refusal).
    let queue = rm
        .queue_max(a.queue.as_deref().unwrap_or("default"))
        .unwrap_or(None);
    let limit = Limit::of(&new, queue.as_ref());
    let container_mb = launch::worker_container_mb(a.worker_memory + a.worker_cache);
    limit.check("worker container", container_mb, a.worker_vcores.into())?;
    limit.check("ApplicationMaster container", launch::AM_MEMORY_MB, 1)?;
    let shown = dir;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir.canonicalize()?;
    let tls = sluice_client::certs::init(&dir, a.insecure)?;
    let yf = YarnFile {
        app_id: new.id.clone(),
        rm: rm.base().to_owned(),
        user: user.clone(),
        fs: fs.clone(),
        hadoop_conf: conf.dir.canonicalize().unwrap_or(conf.dir.clone()),
        workers: a.workers,
    };
    let staging = yf.staging()?;
    let shipped = Shipped {
        jar: &jar,
        tls: tls.as_deref(),
        container_mb,
    };
    let started = stage_and_submit(a, &dir, &conf, &rm, &staging, &yf, &shipped);
    let ready = started.and_then(|()| wait_until_up(a, &dir, &rm, &staging, &yf));
    if let Err(e) = ready {
        // Nothing of a cluster that did not come up is left behind.
        let _ = rm.kill(&yf.app_id);
        let _ = staging.remove();
        for f in ["yarn.json", "secret"] {
            let _ = std::fs::remove_file(dir.join(f));
        }
        let _ = std::fs::remove_dir_all(dir.join("tls"));
        return Err(e);
    }
    eprintln!(
        "{}: up in {:.1} s with {} workers (sluice submit|put|ls|get|jobs|web --cluster {})",
        yf.app_id,
        t.elapsed().as_secs_f64(),
        a.workers,
        shown.display()
    );
    Ok(yf.app_id)
}

/// What `up` ships beside the binary, the secret and the configuration.
struct Shipped<'a> {
    /// The ApplicationMaster's jar.
    jar: &'a Path,
    /// `DIR/tls`, with the CA; `None` with `--insecure`.
    tls: Option<&'a Path>,
    /// A worker container's memory (MB).
    container_mb: u64,
}

/// Uploads what the containers need and submits the application.
fn stage_and_submit(
    a: &YarnOpts,
    dir: &Path,
    conf: &HadoopConf,
    rm: &Rm,
    staging: &Staging,
    yf: &YarnFile,
    shipped: &Shipped,
) -> anyhow::Result<()> {
    let (jar, container_mb) = (shipped.jar, shipped.container_mb);
    staging.create()?;
    yf.save(dir)?;
    let secret = Secret::generate();
    write_secret(&dir.join("secret"), secret.as_bytes())?;
    let binary = staging.cached(&std::env::current_exe()?, "sluice")?;
    let mut files = vec![
        ("sluice".to_owned(), binary.clone()),
        (
            "sluice-yarn-am.jar".to_owned(),
            staging.cached(jar, "sluice-yarn-am.jar")?,
        ),
        (
            "secret".to_owned(),
            staging.write("secret", secret.as_bytes(), 0o600)?,
        ),
    ];
    // The CA, to the ApplicationMaster alone, which issues the
    // containers' certificates once it knows their hosts.
    for name in shipped.tls.map_or(&[][..], |_| &["ca.pem", "ca.key"]) {
        let p = shipped.tls.unwrap_or(dir).join(name);
        files.push((name.to_string(), staging.upload(&p, name, 0o600)?));
    }
    for name in SHIPPED {
        let p = conf.dir.join(name);
        if p.exists() {
            files.push((name.to_owned(), staging.upload(&p, name, 0o600)?));
        }
    }
    let mut args: Vec<String> = vec![
        "--staging".into(),
        staging.url("").trim_end_matches('/').to_owned(),
        "--workers".into(),
        a.workers.to_string(),
        "--container-mb".into(),
        container_mb.to_string(),
        "--vcores".into(),
        a.worker_vcores.to_string(),
        "--max-worker-failures".into(),
        a.max_worker_failures.to_string(),
        "--binary".into(),
        binary.url,
        "--web-token".into(),
        Secret::new(secret.as_bytes())?.web_token(),
    ];
    if let Some(near) = &a.near {
        args.extend(["--near".into(), near.clone()]);
    }
    let slots = a.slots.unwrap_or(a.worker_vcores).max(1);
    if shipped.tls.is_none() {
        // The ApplicationMaster's, and then the workers'.
        args.push("--insecure".into());
    }
    args.push("--".into());
    if shipped.tls.is_none() {
        args.push("--insecure".into());
    }
    args.extend([
        "--slots".into(),
        slots.to_string(),
        "--memory".into(),
        a.worker_memory.to_string(),
        "--cache-size".into(),
        a.worker_cache.to_string(),
    ]);
    let launch = AmLaunch {
        app_id: yf.app_id.clone(),
        name: a.name.clone(),
        queue: a.queue.clone(),
        files,
        classpath: conf.app_classpath(),
        args,
    };
    rm.submit(&launch::submission(&launch))?;
    Ok(())
}

/// What the ApplicationMaster writes to `STAGING/coordinator.json`.
#[derive(Debug, Deserialize)]
struct CoordinatorFile {
    coordinator: String,
    http: String,
}

/// Waits for the coordinator's address, then for every worker; writes
/// cluster.json.
fn wait_until_up(
    a: &YarnOpts,
    dir: &Path,
    rm: &Rm,
    staging: &Staging,
    yf: &YarnFile,
) -> anyhow::Result<()> {
    let end = Instant::now() + a.timeout;
    let coord: CoordinatorFile = loop {
        let report = rm.app(&yf.app_id)?;
        ended(&yf.app_id, &report)?;
        if let Some(bytes) = staging.read("coordinator.json")? {
            break serde_json::from_slice(&bytes)
                .context("the ApplicationMaster's coordinator.json")?;
        }
        if Instant::now() > end {
            bail!(
                "{} did not start its coordinator within {:?} (state {}, queue {}): {}",
                yf.app_id,
                a.timeout,
                report.state,
                report.queue,
                report.diagnostics
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let client = BlockingClient::connect(&coord.coordinator, Secret::load(&dir.join("secret"))?)?;
    let mut last_check = Instant::now();
    loop {
        let alive = client
            .info()
            .map_or(0, |i| i.workers.iter().filter(|w| w.alive).count());
        if alive >= a.workers as usize {
            break;
        }
        if last_check.elapsed() > Duration::from_millis(500) {
            ended(&yf.app_id, &rm.app(&yf.app_id)?)?;
            last_check = Instant::now();
        }
        if Instant::now() > end {
            bail!(
                "{}: {alive} of {} workers registered within {:?} (see the containers' logs)",
                yf.app_id,
                a.workers,
                a.timeout
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // No pids: the processes are YARN's, on its nodes; `cluster down`
    // has nothing to signal here.
    let f = ClusterFile {
        coordinator: coord.coordinator,
        coordinator_pid: 0,
        supervisor_pid: None,
        http: Some(coord.http),
        workers: Vec::new(),
        coordinators: Vec::new(),
        etcd: None,
        etcd_prefix: None,
        insecure: a.insecure,
    };
    write_whole(
        &dir.join("cluster.json"),
        serde_json::to_string_pretty(&f)?.as_bytes(),
    )
}

/// An error when the application has ended.
fn ended(app: &str, r: &AppReport) -> Result<(), YarnError> {
    if r.ended() {
        return Err(YarnError::AppEnded {
            app: app.into(),
            state: r.state.clone(),
            diagnostics: r.diagnostics.trim().to_owned(),
        });
    }
    Ok(())
}

/// `sluice yarn status`.
fn status(dir: &Path) -> anyhow::Result<()> {
    let yf = YarnFile::load(dir)?;
    let rm = Rm::new(&yf.rm, &yf.user);
    let r = rm.app(&yf.app_id)?;
    println!(
        "{}: {} {} (queue {}, {} containers, {} MB)",
        yf.app_id,
        r.state,
        r.final_status,
        r.queue,
        r.running_containers.max(0),
        r.allocated_mb.max(0)
    );
    if !r.tracking_url.is_empty() {
        println!("tracking URL: {}", r.tracking_url);
    }
    if !r.diagnostics.trim().is_empty() {
        println!("diagnostics: {}", r.diagnostics.trim());
    }
    if r.ended() {
        return Ok(());
    }
    let conn = sluice_tools::conn::Conn::new(None, Some(dir.to_path_buf()), None);
    let info = sluice_tools::conn::connect(&conn)?.info()?;
    let alive = info.workers.iter().filter(|w| w.alive).count();
    println!("workers: {alive} alive of {} asked for", yf.workers);
    for w in &info.workers {
        println!(
            "  worker {} {} on {} ({} slots){}",
            w.id,
            w.data_addr,
            w.host,
            w.slots,
            if w.alive { "" } else { " lost" }
        );
    }
    Ok(())
}

/// `sluice yarn down`: the application's last report.
pub fn down(dir: &Path) -> anyhow::Result<AppReport> {
    let yf = YarnFile::load(dir)?;
    let rm = Rm::new(&yf.rm, &yf.user);
    let staging = yf.staging()?;
    let mut r = rm.app(&yf.app_id)?;
    if !r.ended() {
        staging.write("stop", b"", 0o600)?;
        r = wait_app(&rm, &yf.app_id, Duration::from_secs(60), AppReport::ended)?;
        if !r.ended() {
            eprintln!("{}: did not finish within 60 s; killing it", yf.app_id);
            rm.kill(&yf.app_id)?;
        }
    }
    // Returns once YARN holds no container of it (an ended application
    // reports -1 running containers).
    r = wait_app(&rm, &yf.app_id, Duration::from_secs(30), |r| {
        r.ended() && r.running_containers <= 0
    })?;
    staging.remove()?;
    for f in ["cluster.json", "yarn.json"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    Ok(r)
}

/// On SIGINT, SIGTERM or SIGHUP, brings the cluster in `dir` down before
/// this process ends as the signal would end it: a job given up on
/// leaves no application running.
fn down_on_signals(dir: &Path) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    let dir = dir.to_path_buf();
    let _ = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                match down(&dir) {
                    Ok(r) => eprintln!("stopped: {} {}", r.state, r.final_status),
                    Err(e) => eprintln!("stopping the YARN cluster failed: {e:#}"),
                }
                let _ = std::fs::remove_dir_all(&dir);
                let _ = signal_hook::low_level::emulate_default_handler(sig);
                std::process::exit(128 + sig);
            }
        });
}

/// The application's report once `done` holds of it, or the last one
/// after `limit`.
fn wait_app(
    rm: &Rm,
    app: &str,
    limit: Duration,
    done: impl Fn(&AppReport) -> bool,
) -> anyhow::Result<AppReport> {
    let end = Instant::now() + limit;
    loop {
        let r = rm.app(app)?;
        if done(&r) || Instant::now() > end {
            return Ok(r);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Writes `bytes` to `path` whole (beside it, then renamed).
fn write_whole(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}

/// Writes the shared secret, readable by its owner alone.
fn write_secret(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .with_context(|| format!("writing {}", path.display()))
}

/// `sluice submit --yarn`: brings a cluster up for one job (in a
/// temporary directory), runs it with `run`, and brings the cluster down
/// whatever the job's end; the job's result.
pub fn application<T>(
    a: &YarnOpts,
    run: impl FnOnce(&Path) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let dir = tempfile::tempdir()?;
    let app = up(a, dir.path())?;
    down_on_signals(dir.path());
    eprintln!("{app}: running the job");
    let result = run(dir.path());
    match down(dir.path()) {
        Ok(r) => eprintln!("{app}: {} {}", r.state, r.final_status),
        Err(e) => eprintln!("{app}: bringing it down failed: {e:#}"),
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smaller_of_the_clusters_and_the_queues_maximum_is_named() {
        let new = NewApp {
            id: "application_1_0001".into(),
            max_mb: 4096,
            max_vcores: 8,
        };
        let small = QueueMax {
            path: "root.small".into(),
            mb: 2048,
            vcores: 2,
        };
        let l = Limit::of(&new, Some(&small));
        let e = l
            .check("worker container", 2304, 1)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "a worker container of 2304 MB is larger than queue root.small's maximum \
             allocation of 2048 MB (yarn.scheduler.capacity.root.small.maximum-allocation-mb)"
        );
        let e = l.check("worker container", 512, 4).unwrap_err().to_string();
        assert!(
            e.contains("of 4 vcores is larger than queue root.small's"),
            "{e}"
        );
        assert!(l.check("worker container", 2048, 2).is_ok());
        // A queue as large as the cluster: the cluster's maximum.
        let big = QueueMax {
            path: "root.default".into(),
            mb: 4096,
            vcores: 8,
        };
        for q in [Some(&big), None] {
            let e = Limit::of(&new, q)
                .check("worker container", 5000, 1)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(
                    "larger than the cluster's maximum allocation of 4096 MB \
                     (yarn.scheduler.maximum-allocation-mb)"
                ),
                "{e}"
            );
        }
    }
}
