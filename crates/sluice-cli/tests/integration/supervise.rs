//! A coordinator that restarts. `cluster up` supervises its coordinator:
//! one killed with SIGKILL is started again on the same address and
//! state directory, `cluster status` counts the restarts, `cluster down`
//! leaves no process behind (the supervisor included), and with
//! `--no-supervise` a killed coordinator stays down. Clients wait for a
//! coordinator that does not answer, saying so once, and go on when it
//! is back: `submit` reports its job's end by the same id.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::support::*;

/// The `coordinator pid ...` line of `cluster status`.
fn coordinator_line(c: &Cluster) -> String {
    let out = ok(c.cmd(&["cluster", "status"]).output().unwrap());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find(|l| l.starts_with("coordinator pid "))
        .unwrap_or_else(|| panic!("no coordinator line in:\n{text}"))
        .to_owned()
}

/// The pid a `coordinator pid N ...` line names.
fn pid_of(line: &str) -> u32 {
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
    stat.is_ok_and(|s| !s.rsplit(')').next().unwrap().trim_start().starts_with('Z'))
}

fn down(dir: &Path) {
    ok(sluice()
        .args(["cluster", "down", "--dir"])
        .arg(dir)
        .output()
        .unwrap());
}

#[test]
fn a_killed_coordinator_is_started_again_and_down_leaves_nothing() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "1MB");
    let c = Cluster::up(d.path(), 1, "--heartbeat-ms 100");
    put(&c, &data, "words", "256KB", "1");
    let supervisor = c.json()["supervisor_pid"].as_u64().unwrap() as u32;
    let first = coordinator_line(&c);
    assert!(first.contains("restarted 0 times"), "{first}");
    let old = pid_of(&first);
    assert_eq!(old, c.coordinator_pid());

    signal(old, "KILL");
    // A new coordinator answers on the same address, with the catalog.
    let line = poll(|| {
        let l = coordinator_line(&c);
        (l.contains("restarted 1 times") && alive(pid_of(&l))).then_some(l)
    });
    let new = pid_of(&line);
    assert_ne!(new, old);
    let ls = poll(|| {
        let out = c.cmd(&["ls"]).output().unwrap();
        out.status.success().then_some(out)
    });
    assert!(String::from_utf8_lossy(&ls.stdout).contains("words"));
    ok(c.cmd(&["jobs"]).output().unwrap());
    let log = std::fs::read_to_string(c.dir.join("supervisor.log")).unwrap();
    assert!(
        log.contains(&format!("the coordinator (pid {old}) ended")),
        "{log}"
    );
    assert!(log.contains("restart 1"), "{log}");

    let workers = c.worker_pids();
    down(&c.dir);
    for pid in [supervisor, new].into_iter().chain(workers) {
        assert!(!alive(pid), "pid {pid} outlived cluster down");
    }
}

#[test]
fn with_no_supervise_a_killed_coordinator_stays_down() {
    let d = tempfile::tempdir().unwrap();
    let c = Cluster::unsupervised(d.path(), 1, "--heartbeat-ms 100");
    assert!(c.json()["supervisor_pid"].is_null());
    let line = coordinator_line(&c);
    assert!(line.ends_with("running (not supervised)"), "{line}");
    let pid = pid_of(&line);
    signal(pid, "KILL");
    poll(|| (!alive(pid)).then_some(()));
    std::thread::sleep(Duration::from_secs(2));
    assert!(!c.dir.join("supervisor.json").exists());
    let line = coordinator_line_after_death(&c);
    assert!(line.contains("not running (not supervised)"), "{line}");
    let err = fails(c.cmd(&["ls", "--wait-coordinator", "0"]).output().unwrap());
    assert!(err.contains("cannot reach the coordinator"), "{err}");
    down(&c.dir);
}

/// `cluster status`'s coordinator line when the coordinator is gone
/// (the command itself then fails to reach it).
fn coordinator_line_after_death(c: &Cluster) -> String {
    let status = ["cluster", "status", "--wait-coordinator", "0"];
    let out = c.cmd(&status).output().unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find(|l| l.starts_with("coordinator pid "))
        .unwrap_or_else(|| panic!("no coordinator line in:\n{text}"))
        .to_owned()
}

#[test]
fn clients_wait_for_a_restarting_coordinator_and_go_on() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "12MB");
    let c = Cluster::unsupervised(d.path(), 2, "--heartbeat-ms 100");
    put(&c, &data, "words", "1MB", "1");
    let pid = c.coordinator_pid();
    let argv = argv_of(pid);
    let job = submit_wc(&c, "words", "counts")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    poll(|| {
        let out = ok(c.cmd(&["jobs"]).output().unwrap());
        String::from_utf8_lossy(&out.stdout)
            .contains(" running ")
            .then_some(())
    });
    signal(pid, "KILL");
    poll(|| (!alive(pid)).then_some(()));
    // A command started while the coordinator is away waits for it too.
    let ls = c
        .cmd(&["ls"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let _again = restart_coordinator(&c, &argv, 2);

    let ls = ok(ls.wait_with_output().unwrap());
    assert!(String::from_utf8_lossy(&ls.stdout).contains("words"));
    let said = String::from_utf8_lossy(&ls.stderr);
    assert_eq!(
        said.matches("coordinator restarting; waiting...").count(),
        1,
        "{said}"
    );

    // The waiting submit reports its job's end, whatever it is, by the
    // id it was given; never a lost connection.
    let out = job.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.matches("coordinator restarting; waiting...").count(),
        1,
        "{err}"
    );
    assert!(
        !err.contains("cannot reach") && !err.contains("transport error"),
        "{err}"
    );
    if out.status.success() {
        counts_match_local(&c, d.path(), &data);
    } else {
        assert!(
            err.contains("error: job-1-") && err.contains(" failed: "),
            "{err}"
        );
    }
}

#[test]
fn a_coordinator_that_cannot_start_fails_up_and_leaves_no_supervisor() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("cluster");
    let out = sluice()
        .args(["cluster", "up", "--workers", "1", "--dir"])
        .arg(&dir)
        .args(["--coordinator-flags", "--no-such-flag"])
        .output()
        .unwrap();
    let err = fails(out);
    assert!(err.contains("the coordinator did not start"), "{err}");
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("supervisor.json")).unwrap()).unwrap();
    let supervisor = s["supervisor_pid"].as_u64().unwrap() as u32;
    assert!(s["restarts"].as_u64().unwrap() >= 1, "{s}");
    poll(|| (!alive(supervisor)).then_some(()));
    let log = std::fs::read_to_string(dir.join("supervisor.log")).unwrap();
    assert!(log.contains("starting it again"), "{log}");
}
