//! Two coordinators through etcd (`cluster up --coordinators 2 --etcd
//! URL`): one active, one standing by. When the active one dies, or is
//! paused past its lease, the other takes over; workers and clients given
//! both addresses follow it, and a job submitted before completes once
//! with the right answer, no finished map run again. A paused coordinator
//! that comes back steps down.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use sluice_etcd::testing::EtcdServer;

use crate::support::*;

/// A cluster of two coordinators on `etcd` and two workers, with extra
/// `cluster up` arguments `up`.
fn up_two(dir: &Path, etcd: &EtcdServer, up: &[&str]) -> Cluster {
    let dir = dir.join("cluster");
    ok(sluice()
        .args(["cluster", "up", "--workers", "2", "--slots", "1"])
        .args(["--coordinators", "2", "--etcd", &etcd.url()])
        .args(["--coordinator-flags", "--heartbeat-ms 100"])
        .args(up)
        .arg("--dir")
        .arg(&dir)
        .output()
        .unwrap());
    Cluster { dir }
}

/// `cluster status`'s coordinator lines: (K, address, pid, role).
fn coordinators(c: &Cluster) -> Vec<(u32, String, u32, String)> {
    let out = c.cmd(&["cluster", "status"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["coordinator", k, addr, "pid", pid, role] => Some((
                    k.parse().ok()?,
                    (*addr).to_owned(),
                    pid.parse().ok()?,
                    (*role).to_owned(),
                )),
                _ => None,
            }
        })
        .collect()
}

/// The active coordinator's (K, pid), once there is exactly one active
/// and one standby.
fn active(c: &Cluster) -> (u32, u32) {
    poll(|| {
        let all = coordinators(c);
        let roles: Vec<&str> = all.iter().map(|x| x.3.as_str()).collect();
        let one = roles.iter().filter(|&&r| r == "active").count() == 1
            && roles.iter().filter(|&&r| r == "standby").count() == 1;
        let a = all.iter().find(|x| x.3 == "active")?;
        one.then_some((a.0, a.2))
    })
}

/// Word count started on the cluster, stopped part way through its maps.
fn wc_mid_map(c: &Cluster, d: &Path) -> (std::process::Child, std::path::PathBuf) {
    let data = gen(d, "12MB");
    put(c, &data, "words", "1MB", "1");
    let report = d.join("report.json");
    let job = submit_wc(c, "words", "counts")
        .arg("--report")
        .arg(&report)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    poll(|| {
        let jobs = c.cmd(&["jobs"]).output().ok()?;
        let jobs = String::from_utf8_lossy(&jobs.stdout).into_owned();
        let done: u32 = jobs
            .split("maps ")
            .nth(1)?
            .split('/')
            .next()?
            .parse()
            .ok()?;
        (1..12).contains(&done).then_some(())
    });
    (job, report)
}

/// Every map of the report ran one attempt.
fn no_map_ran_again(r: &serde_json::Value) {
    let spans = r["cluster"]["timeline"].as_array().expect("a timeline");
    let mut maps: Vec<&str> = (spans.iter())
        .filter_map(|s| s["task"].as_str())
        .filter(|t| t.starts_with('m'))
        .collect();
    let n = maps.len();
    maps.sort_unstable();
    maps.dedup();
    assert_eq!(maps.len(), n, "a map ran again");
    assert_eq!(n, 12, "{spans:?}");
}

#[test]
fn a_killed_active_coordinator_is_followed_by_the_standby_and_the_job_completes_once() {
    let d = tempfile::tempdir().unwrap();
    let etcd = EtcdServer::start();
    // Unsupervised: the killed coordinator stays down, so the other one
    // must take over.
    let c = up_two(d.path(), &etcd, &["--no-supervise"]);
    let (k, pid) = active(&c);
    let (job, report) = wc_mid_map(&c, d.path());
    signal(pid, "KILL");
    poll(|| {
        let all = coordinators(&c);
        let role = |n: u32| all.iter().find(|x| x.0 == n).map(|x| x.3.clone());
        (role(k)? == "down" && role(3 - k)? == "active").then_some(())
    });
    ok(job.wait_with_output().unwrap());
    let jobs = ok(c.cmd(&["jobs"]).output().unwrap());
    let jobs = String::from_utf8_lossy(&jobs.stdout).into_owned();
    assert_eq!(jobs.matches("succeeded").count(), 1, "{jobs}");
    assert!(!jobs.contains("failed"), "{jobs}");
    no_map_ran_again(&read_json(&report));
    let data = d.path().join("text");
    counts_match_local(&c, d.path(), &data);
}

#[test]
fn a_paused_active_coordinator_is_replaced_and_steps_down_when_it_continues() {
    let d = tempfile::tempdir().unwrap();
    let etcd = EtcdServer::start();
    let c = up_two(d.path(), &etcd, &[]);
    let (k, pid) = active(&c);
    let (job, report) = wc_mid_map(&c, d.path());
    signal(pid, "STOP");
    // Past its lease (2 s), the standby takes over.
    let (now, _) = poll(|| {
        let all = coordinators(&c);
        let a = all.iter().find(|x| x.3 == "active" && x.0 != k)?;
        Some((a.0, a.2))
    });
    ok(job.wait_with_output().unwrap());
    no_map_ran_again(&read_json(&report));
    signal(pid, "CONT");
    std::thread::sleep(Duration::from_secs(3));
    // The old one wrote nothing and stands by.
    assert_eq!(active(&c).0, now);
    let jobs = ok(c.cmd(&["jobs"]).output().unwrap());
    let jobs = String::from_utf8_lossy(&jobs.stdout).into_owned();
    assert_eq!(jobs.matches("succeeded").count(), 1, "{jobs}");
    let data = d.path().join("text");
    counts_match_local(&c, d.path(), &data);
}

#[test]
fn cluster_status_shows_one_active_and_one_standby_and_down_stops_both() {
    let d = tempfile::tempdir().unwrap();
    let etcd = EtcdServer::start();
    let c = up_two(d.path(), &etcd, &[]);
    active(&c);
    let all = coordinators(&c);
    assert_eq!(all.len(), 2, "{all:?}");
    let json = c.json();
    let listed = json["coordinators"].as_array().unwrap();
    assert_eq!(listed.len(), 2);
    for (i, e) in listed.iter().enumerate() {
        let home = c.dir.join(format!("coordinator-{}", i + 1));
        assert_eq!(e["state_dir"].as_str().unwrap(), home.to_str().unwrap());
    }
    let pids: Vec<u32> = all.iter().map(|x| x.2).collect();
    ok(sluice()
        .args(["cluster", "down", "--dir"])
        .arg(&c.dir)
        .output()
        .unwrap());
    for p in pids {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat"));
        assert!(
            stat.map_or(true, |s| s
                .rsplit(')')
                .next()
                .unwrap()
                .trim_start()
                .starts_with('Z')),
            "coordinator {p} outlived cluster down"
        );
    }
}
