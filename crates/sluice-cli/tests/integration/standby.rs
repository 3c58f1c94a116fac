//! Coordinators standing by for each other through etcd: a paused active
//! coordinator is replaced, and once it runs again it writes nothing and
//! stands by.

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice_etcd::testing::EtcdServer;

use crate::support::*;

const SECRET: &str = "a-shared-secret-for-the-standby-tests-0123456789";
const PREFIX: &str = "/sluice/standby-test/";

/// A free loopback port (a standby must come back on the same one).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn with_secret(mut c: Command) -> Command {
    c.env("SLUICE_SECRET", SECRET);
    c
}

/// A coordinator on `port`, standing by through `etcd`; its log in
/// `dir/NAME.log`.
fn coordinator(dir: &Path, name: &str, port: u16, etcd: &str) -> Killed {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    let mut c = with_secret(sluice());
    c.args(["coordinator", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--state-dir")
        .arg(dir.join(name))
        .args(tls_flags_in(dir, name, "coordinator"))
        .args([
            "--etcd",
            etcd,
            "--etcd-prefix",
            PREFIX,
            "--heartbeat-ms",
            "100",
        ])
        .stdout(Stdio::null())
        .stderr(log);
    Killed(c.spawn().unwrap())
}

fn serves(dir: &Path, port: u16) -> bool {
    let mut c = with_secret(sluice());
    c.args(["ls", "--coordinator", &format!("127.0.0.1:{port}")])
        .args(["--wait-coordinator", "0s"])
        .args(tls_flags_in(dir, "client", "client"));
    c.output().is_ok_and(|o| o.status.success())
}

fn listens(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

fn log_of(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default()
}

/// etcd's revision: it moves with every write to it.
fn revision(etcd: &sluice_etcd::blocking::Etcd) -> i64 {
    etcd.get_prefix(PREFIX.as_bytes()).unwrap().0
}

fn worker(dir: &Path, port: u16) -> Child {
    let mut c = with_secret(sluice());
    c.args(["worker", "--coordinator", &format!("127.0.0.1:{port}")])
        .args(["--listen", "127.0.0.1:0", "--slots", "1"])
        .arg("--data-dir")
        .arg(dir.join("w"))
        .args(tls_flags_in(dir, "w", "worker"))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c.spawn().unwrap()
}

#[test]
fn a_paused_coordinator_is_replaced_and_on_waking_writes_nothing_and_stands_by() {
    let d = tempfile::tempdir().unwrap();
    let server = EtcdServer::start();
    let (pa, pb) = (free_port(), free_port());
    let a = coordinator(d.path(), "a", pa, &server.url());
    poll(|| serves(d.path(), pa).then_some(()));
    let _b = coordinator(d.path(), "b", pb, &server.url());
    poll(|| {
        log_of(d.path(), "b")
            .contains("standby: following")
            .then_some(())
    });
    assert!(!listens(pb), "a standby serves nothing");
    // A data set in the catalog, through the active one.
    let w = Killed(worker(d.path(), pa));
    let data = gen(d.path(), "200KB");
    let mut put = with_secret(sluice());
    put.args(["put", "--coordinator", &format!("127.0.0.1:{pa}")])
        .args(["--dataset", "words"])
        .args(tls_flags_in(d.path(), "client", "client"))
        .arg(&data);
    ok(put.output().unwrap());
    drop(w);

    let pid = a.0.id();
    signal(pid, "STOP");
    let t0 = Instant::now();
    poll_for(Duration::from_secs(20), || {
        serves(d.path(), pb).then_some(())
    });
    eprintln!("the standby served {:?} after the pause", t0.elapsed());
    let mut ls = with_secret(sluice());
    ls.args(["ls", "--coordinator", &format!("127.0.0.1:{pb}")])
        .args(tls_flags_in(d.path(), "client", "client"));
    let listed = String::from_utf8(ok(ls.output().unwrap()).stdout).unwrap();
    assert!(listed.contains("words"), "the catalog came over: {listed}");
    assert!(log_of(d.path(), "b").contains("active: epoch 2"));

    let etcd = sluice_etcd::blocking::Etcd::connect(&[server.url()]).unwrap();
    let before = revision(&etcd);
    signal(pid, "CONT");
    poll_for(Duration::from_secs(20), || {
        log_of(d.path(), "a")
            .contains("it stands by again")
            .then_some(())
    });
    poll_for(Duration::from_secs(5), || (!listens(pa)).then_some(()));
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        revision(&etcd),
        before,
        "the woken coordinator wrote nothing"
    );
    assert!(serves(d.path(), pb), "the new active one goes on");
}

/// Polls `f` until it gives a value, for at most `limit`.
fn poll_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let t = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t.elapsed() < limit, "timed out after {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
