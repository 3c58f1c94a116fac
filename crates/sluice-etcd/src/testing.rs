//! A throwaway etcd for tests (the `testing` feature).
//!
//! [`EtcdServer::start`] runs the `etcd` binary (`$SLUICE_ETCD`, else
//! `etcd` from `PATH`; Debian's `etcd-server` package installs it) as a
//! one-member cluster in a fresh temporary directory on free loopback
//! ports, waits until it answers, and kills it on drop. Its raft heartbeat
//! is 10 ms and its election timeout 100 ms, so it starts in a fraction of a
//! second and its minimum lease TTL is 1 s (etcd's default settings give
//! 2 s).

use std::fs::File;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a started etcd may take to answer.
const START_PATIENCE: Duration = Duration::from_secs(20);

/// A running etcd process, killed on drop.
#[derive(Debug)]
pub struct EtcdServer {
    child: Option<Child>,
    client_port: u16,
    peer_port: u16,
    dir: tempfile::TempDir,
}

/// Two distinct free loopback ports (both held while they are chosen).
fn free_ports() -> (u16, u16) {
    let bind = || TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
    let (a, b) = (bind(), bind());
    let port = |l: &TcpListener| l.local_addr().expect("a bound address").port();
    (port(&a), port(&b))
}

/// Attempts at starting, each on new ports: another process may take a
/// port between its choice and etcd's bind.
const ATTEMPTS: usize = 3;

fn binary() -> PathBuf {
    std::env::var_os("SLUICE_ETCD")
        .map(PathBuf::from)
        .unwrap_or_else(|| "etcd".into())
}

impl EtcdServer {
    /// Starts etcd and waits until it answers. Panics, saying why, if the
    /// binary is missing or etcd does not come up.
    pub fn start() -> EtcdServer {
        let dir = tempfile::tempdir().expect("a temporary directory for etcd");
        let mut s = EtcdServer {
            child: None,
            client_port: 0,
            peer_port: 0,
            dir,
        };
        for attempt in 1..=ATTEMPTS {
            (s.client_port, s.peer_port) = free_ports();
            match s.spawn() {
                Ok(()) => return s,
                Err(e) if attempt == ATTEMPTS => panic!("{e}"),
                Err(_) => {
                    s.stop();
                    let _ = std::fs::remove_dir_all(s.dir.path().join("data"));
                }
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    /// The client URL, as `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// The process id (while running).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Runs etcd (its log starts afresh) and waits until it answers.
    fn spawn(&mut self) -> Result<(), String> {
        self.spawn_binary(binary())
    }

    fn spawn_binary(&mut self, binary: PathBuf) -> Result<(), String> {
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = File::options()
            .create(true)
            .write(true)
            .truncate(true)
            .open(self.log_path())
            .expect("etcd's log file");
        let child = Command::new(&binary)
            .args(["--name", "sluice-test", "--data-dir"])
            .arg(self.dir.path().join("data"))
            .args([
                "--listen-client-urls",
                &self.url(),
                "--advertise-client-urls",
                &self.url(),
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &format!("sluice-test={peer}")])
            .args(["--heartbeat-interval", "10", "--election-timeout", "100"])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("etcd's log file"))
            .stderr(log)
            .spawn();
        match child {
            Ok(c) => self.child = Some(c),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "the etcd binary {:?} is missing: install Debian's etcd-server package \
                 (apt-get install etcd-server) or set SLUICE_ETCD to an etcd binary",
                binary
            ),
            Err(e) => panic!("cannot run etcd ({binary:?}): {e}"),
        }
        self.await_answer()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }

    /// Waits until etcd answers a read.
    fn await_answer(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_PATIENCE;
        loop {
            // Its own log says it serves (another etcd could hold the
            // port and answer), and it answers.
            if self.log_says_serving() && answers(self.url()) {
                return Ok(());
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                return Err(format!(
                    "etcd exited ({status}) while starting:\n{}",
                    self.log_tail()
                ));
            }
            if Instant::now() > deadline {
                let tail = self.log_tail();
                return Err(format!(
                    "etcd did not answer within {START_PATIENCE:?}:\n{tail}"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether etcd logged that it serves clients: it bound the client
    /// port (it exits when it cannot).
    fn log_says_serving(&self) -> bool {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        log.contains("\"msg\":\"serving client traffic")
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Kills etcd (its data stays for [`EtcdServer::restart`]).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts etcd again on the same ports and data after [`EtcdServer::stop`].
    pub fn restart(&mut self) {
        self.stop();
        if let Err(e) = self.spawn() {
            panic!("{e}");
        }
    }

    /// Freezes etcd (SIGSTOP): connections stay open but nothing answers.
    /// Returns once every thread of etcd is stopped (a signal reaches a
    /// busy process's threads one by one).
    pub fn pause(&self) {
        self.signal("-STOP");
        let pid = self.pid().expect("etcd is running");
        let deadline = Instant::now() + Duration::from_secs(5);
        while !all_threads_stopped(pid) {
            assert!(
                Instant::now() < deadline,
                "etcd ({pid}) did not stop within 5 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Thaws a paused etcd (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let pid = self.pid().expect("etcd is running");
        let ok = Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig} {pid} failed");
    }
}

/// Whether every thread of process `pid` is stopped, by the state letters
/// of `/proc/PID/task/*/stat` (`T`).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|t| {
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // The state follows the command name, which is in parentheses.
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next());
        matches!(state, Some('T' | 't'))
    })
}

/// Whether etcd at `url` answers a read, asked from a thread with a
/// runtime of its own (so callers may be on a runtime or not).
fn answers(url: String) -> bool {
    let ask = move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            match crate::Etcd::connect(&[url]).await {
                Ok(etcd) => etcd.get(b"\0").await.is_ok(),
                Err(_) => false,
            }
        })
    };
    std::thread::spawn(ask).join().unwrap_or(false)
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "install Debian's etcd-server package")]
    fn a_missing_binary_says_what_to_install() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-etcd-here");
        let (client_port, peer_port) = free_ports();
        let mut s = EtcdServer {
            child: None,
            client_port,
            peer_port,
            dir,
        };
        let _ = s.spawn_binary(missing);
    }
}
