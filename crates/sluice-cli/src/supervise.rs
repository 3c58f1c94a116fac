//! `sluice cluster supervise`: the process `cluster up` runs its
//! coordinator under. It starts the coordinator again, with the same
//! command line and so the same address and state directory, whenever it
//! dies: after a short backoff (100 ms, doubled while the coordinator
//! keeps dying within 10 s of its start, at most 5 s), and at most
//! `--max-restarts-per-minute` times in any minute; past that it leaves
//! the coordinator down and says why in `supervisor.json`. Each start is
//! logged on its standard error (`supervisor.log`) and recorded in
//! `DIR/supervisor.json`. TERM, INT or HUP (`cluster down`) stop it: it
//! stops the coordinator (TERM, then KILL after 5 s) and starts nothing.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use sluice_client::embedded::SupervisorFile;

/// The first restart's delay.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest delay before a restart.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// A coordinator that ran this long before it died is restarted after
/// the first delay again.
const STEADY: Duration = Duration::from_secs(10);
/// How long a stopped coordinator has to end before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// `sluice cluster supervise` (started by `cluster up`).
#[derive(Debug, Args)]
pub struct SuperviseArgs {
    /// The cluster's directory: supervisor.json, coordinator.log.
    #[arg(long)]
    dir: PathBuf,
    /// Most restarts in any minute; past them the coordinator stays down.
    #[arg(long, default_value_t = 10)]
    max_restarts_per_minute: usize,
    /// The coordinator's command line, after `--`.
    #[arg(last = true, required = true)]
    args: Vec<String>,
}

/// When to start a dead coordinator again, if at all.
#[derive(Debug)]
struct Restarts {
    /// Restarts within the last minute.
    recent: VecDeque<Instant>,
    max_per_minute: usize,
    backoff: Duration,
}

impl Restarts {
    fn new(max_per_minute: usize) -> Self {
        Restarts {
            recent: VecDeque::new(),
            max_per_minute,
            backoff: FIRST_BACKOFF,
        }
    }

    /// The delay before starting again a coordinator that ran for
    /// `lived` and died at `now`; `None` past the cap.
    fn next(&mut self, lived: Duration, now: Instant) -> Option<Duration> {
        while self
            .recent
            .front()
            .is_some_and(|&t| now.duration_since(t) >= Duration::from_secs(60))
        {
            self.recent.pop_front();
        }
        if self.recent.len() >= self.max_per_minute {
            return None;
        }
        self.recent.push_back(now);
        if lived >= STEADY {
            self.backoff = FIRST_BACKOFF;
        }
        let delay = self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        Some(delay)
    }
}

/// Runs the coordinator until told to stop; an error once it gave up.
pub fn run(a: &SuperviseArgs) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let exe = std::env::current_exe()?;
    let mut file = SupervisorFile {
        supervisor_pid: std::process::id(),
        ..SupervisorFile::default()
    };
    let mut restarts = Restarts::new(a.max_restarts_per_minute);
    loop {
        let mut child = start(&exe, &a.dir, &a.args)?;
        file.coordinator_pid = child.id();
        file.save(&a.dir)?;
        let began = Instant::now();
        let Some(status) = watch(&mut child, &stop)? else {
            file.coordinator_pid = 0;
            file.stopped = Some("stopped (cluster down)".into());
            file.save(&a.dir)?;
            return Ok(());
        };
        let lived = began.elapsed();
        log(&format!(
            "the coordinator (pid {}) ended after {:.1} s: {status}",
            child.id(),
            lived.as_secs_f64()
        ));
        give_back_lead(&a.args, child.id());
        let Some(delay) = restarts.next(lived, Instant::now()) else {
            let why = format!(
                "the coordinator died more than {} times within a minute; not started again",
                a.max_restarts_per_minute
            );
            log(&why);
            file.coordinator_pid = 0;
            file.stopped = Some(why.clone());
            file.save(&a.dir)?;
            anyhow::bail!(why);
        };
        file.restarts += 1;
        log(&format!(
            "starting it again in {} ms (restart {})",
            delay.as_millis(),
            file.restarts
        ));
        if sleep_unless(delay, &stop) {
            return Ok(());
        }
    }
}

/// A dead coordinator that led its cluster through etcd (`--etcd`) holds
/// the lead until its lease runs out (2 s): its supervisor, which saw it
/// die, gives the lease back at once, so a standby takes over now. Only
/// the lease of the leader key naming this coordinator (its pid and
/// address) is given back; the process is gone, so it can write nothing.
fn give_back_lead(args: &[String], pid: u32) {
    let flag = |name: &str| {
        let at = args.iter().position(|a| a == name)?;
        args.get(at + 1).cloned()
    };
    let Some(etcd) = flag("--etcd") else { return };
    let prefix = flag("--etcd-prefix")
        .unwrap_or_else(|| sluice_coordinator::ha::keys::DEFAULT_PREFIX.to_owned());
    let listen = flag("--listen").unwrap_or_default();
    let endpoints: Vec<String> = etcd.split(',').map(str::to_owned).collect();
    let keys = sluice_coordinator::ha::keys::Keys::new(&prefix);
    let given = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|rt| rt.block_on(revoke_if_led(&endpoints, &keys, pid, &listen)));
    match given {
        Ok(true) => log("gave the dead coordinator's lead back to etcd"),
        Ok(false) => {}
        Err(e) => log(&format!(
            "could not give the dead coordinator's lead back: {e}"
        )),
    }
}

/// Revokes the leader's lease if the leader key names `pid` at `listen`.
async fn revoke_if_led(
    endpoints: &[String],
    keys: &sluice_coordinator::ha::keys::Keys,
    pid: u32,
    listen: &str,
) -> Result<bool, String> {
    use sluice_coordinator::ha::keys::{unseal, Leader};
    let etcd = sluice_etcd::Etcd::connect(endpoints)
        .await
        .map_err(|e| e.to_string())?;
    let (_, kv) = etcd.get(&keys.leader()).await.map_err(|e| e.to_string())?;
    let Some(kv) = kv else { return Ok(false) };
    let leader: Leader = unseal(&kv.key, &kv.value).map_err(|e| e.to_string())?;
    if leader.pid != pid || (!listen.is_empty() && leader.addr != listen) {
        return Ok(false);
    }
    etcd.revoke(leader.lease).await.map_err(|e| e.to_string())?;
    Ok(true)
}

/// A line of the supervisor's log, stamped with Unix milliseconds.
fn log(line: &str) {
    eprintln!("{} supervisor: {line}", sluice_proto::now_ms());
}

/// Starts the coordinator, its output appended to `dir/coordinator.log`.
fn start(exe: &Path, dir: &Path, args: &[String]) -> anyhow::Result<Child> {
    let path = dir.join("coordinator.log");
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("opening {}: {e}", path.display()))?;
    let child = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .map_err(|e| anyhow::anyhow!("starting the coordinator: {e}"))?;
    log(&format!("started the coordinator (pid {})", child.id()));
    Ok(child)
}

/// Waits for the coordinator to end: its exit status, or `None` once
/// the supervisor was told to stop (the coordinator is then stopped).
fn watch(child: &mut Child, stop: &AtomicBool) -> anyhow::Result<Option<ExitStatus>> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if stop.load(Ordering::Relaxed) {
            end(child);
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stops the coordinator: TERM, then KILL after [`STOP_GRACE`].
fn end(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .stderr(Stdio::null())
        .status();
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Sleeps `d`; true if told to stop meanwhile.
fn sleep_unless(d: Duration, stop: &AtomicBool) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20).min(d));
    }
    stop.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap_and_starts_over_after_a_steady_run() {
        let mut r = Restarts::new(100);
        let t = Instant::now();
        let quick = Duration::from_millis(10);
        let delays: Vec<u128> = (0..8)
            .map(|i| {
                r.next(quick, t + Duration::from_secs(i))
                    .unwrap()
                    .as_millis()
            })
            .collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        let again = r.next(STEADY, t + Duration::from_secs(9)).unwrap();
        assert_eq!(again, FIRST_BACKOFF);
    }

    #[test]
    fn restarts_stop_past_the_cap_of_a_minute_and_resume_after_it() {
        let mut r = Restarts::new(3);
        let t = Instant::now();
        let quick = Duration::from_millis(10);
        for i in 0..3 {
            assert!(r.next(quick, t + Duration::from_secs(i)).is_some());
        }
        assert_eq!(r.next(quick, t + Duration::from_secs(30)), None);
        // A minute after the first restart, one more is allowed.
        assert!(r.next(quick, t + Duration::from_secs(60)).is_some());
        assert_eq!(r.next(quick, t + Duration::from_millis(60_500)), None);
    }
}
