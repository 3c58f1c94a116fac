//! Work survives a coordinator restart: the coordinator aborts at a crash
//! point (`SLUICE_CRASH_AT`), is started again on its state directory,
//! and the job it ran completes once, with the local engine's answer, no
//! finished map run again.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use crate::support::*;

/// A cluster of two workers whose coordinator aborts at `point`,
/// unsupervised: the test starts it again itself, without the crash point
/// (a supervisor would start it with it, to abort again).
fn up_crashing(dir: &Path, point: &str) -> Cluster {
    let dir = dir.join("cluster");
    ok(sluice()
        .env("SLUICE_CRASH_AT", point)
        .args([
            "cluster",
            "up",
            "--no-supervise",
            "--workers",
            "2",
            "--slots",
            "1",
        ])
        .args(["--coordinator-flags", "--heartbeat-ms 100", "--dir"])
        .arg(&dir)
        .output()
        .unwrap());
    Cluster { dir }
}

/// Whether process `pid` has ended (gone, or a zombie).
fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// Runs `cmd` against a coordinator that aborts at its crash point,
/// starts the coordinator again once it has, and gives the command's
/// outcome and the restarted coordinator.
fn crash_then_restart(c: &Cluster, mut cmd: std::process::Command) -> (Output, Killed) {
    let pid = c.coordinator_pid();
    let argv = argv_of(pid);
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    poll(|| ended(pid).then_some(()));
    let again = restart_coordinator(c, &argv, 2);
    (child.wait_with_output().unwrap(), again)
}

/// Word count over 12 blocks with the coordinator aborting at `point`
/// and started again: the client's outcome and the job's report.
fn crash_and_recover(point: &str) -> (tempfile::TempDir, Cluster, Output, serde_json::Value) {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "12MB");
    let c = up_crashing(d.path(), point);
    put(&c, &data, "words", "1MB", "1");
    let report = d.path().join("report.json");
    let mut job = submit_wc(&c, "words", "counts");
    job.arg("--report").arg(&report);
    let (out, again) = crash_then_restart(&c, job);
    // The job completes, whether its client saw it or not.
    poll(|| {
        let jobs = c.cmd(&["jobs"]).output().ok()?;
        let jobs = String::from_utf8_lossy(&jobs.stdout).into_owned();
        jobs.contains("succeeded").then_some(())
    });
    let jobs = ok(c.cmd(&["jobs"]).output().unwrap());
    let jobs = String::from_utf8_lossy(&jobs.stdout);
    assert_eq!(jobs.matches("succeeded").count(), 1, "{jobs}");
    assert!(!jobs.contains("failed"), "{jobs}");
    counts_match_local(&c, d.path(), &data);
    drop(again);
    let r = if report.exists() {
        read_json(&report)
    } else {
        serde_json::Value::Null
    };
    (d, c, out, r)
}

/// Every map of the report ran one attempt.
fn no_map_ran_again(r: &serde_json::Value) {
    let spans = r["cluster"]["timeline"].as_array().expect("a timeline");
    let maps: Vec<&serde_json::Value> = spans
        .iter()
        .filter(|s| s["task"].as_str().unwrap().starts_with('m'))
        .collect();
    for m in &maps {
        let task = &m["task"];
        let runs: Vec<_> = maps.iter().filter(|s| s["task"] == *task).collect();
        assert_eq!(runs.len(), 1, "map {task} ran again: {runs:?}");
    }
    assert_eq!(maps.len(), 12, "{spans:?}");
}

#[test]
fn a_crash_after_a_job_is_logged_runs_it_once_and_its_client_follows_it() {
    // The client was not answered: it sends its submission again, with
    // its id, and is answered with the job the first made, which it then
    // follows to its end (one job, not two: `crash_and_recover` counts).
    let (_d, _c, out, r) = crash_and_recover("job-logged");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        stderr.contains("coordinator restarting; waiting..."),
        "{stderr}"
    );
    ok(out);
    assert_eq!(r["cluster"]["state"], "succeeded");
}

#[test]
fn a_crash_mid_map_keeps_the_finished_maps() {
    let (_d, _c, out, r) = crash_and_recover("map-done:4");
    ok(out);
    no_map_ran_again(&r);
}

#[test]
fn a_crash_mid_shuffle_keeps_the_maps_and_the_running_reduces() {
    let (_d, _c, out, r) = crash_and_recover("shuffle");
    ok(out);
    no_map_ran_again(&r);
}

#[test]
fn a_crash_between_a_commits_record_and_its_write_commits_once() {
    let (_d, _c, out, r) = crash_and_recover("commit-logged");
    ok(out);
    no_map_ran_again(&r);
}

#[test]
fn a_crash_after_a_commits_write_does_not_commit_again() {
    let (_d, _c, out, _) = crash_and_recover("commit-written");
    ok(out);
}

#[test]
fn a_killed_coordinator_loses_no_finished_map() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "12MB");
    let c = Cluster::up(d.path(), 2, "--heartbeat-ms 100");
    put(&c, &data, "words", "1MB", "1");
    let pid = c.coordinator_pid();
    let argv = argv_of(pid);
    let (job, report) = spawn_wc(&c, d.path());
    std::thread::sleep(Duration::from_millis(400));
    signal(pid, "KILL");
    let again = restart_coordinator(&c, &argv, 2);
    ok(job.wait_with_output().unwrap());
    no_map_ran_again(&read_json(&report));
    counts_match_local(&c, d.path(), &data);
    drop(again);
}

#[test]
fn a_crash_during_a_put_is_ridden_out_and_the_data_set_is_stored_once() {
    // The coordinator aborts after planning the put's blocks, before its
    // answer leaves: the client waits, asks for a plan again from the
    // restarted coordinator, and stores the data set whole.
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "3MB");
    let c = up_crashing(d.path(), "put");
    let mut put = c.cmd(&["put", "--dataset", "words", "--block-size", "1MB"]);
    put.arg(&data);
    let (out, again) = crash_then_restart(&c, put);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        stderr.contains("coordinator restarting; waiting..."),
        "{stderr}"
    );
    ok(out);
    let got = d.path().join("got");
    get(&c, "words", &got);
    assert_eq!(
        all_bytes(&got),
        all_bytes(&data),
        "the data set is the file, whole"
    );
    let ls = ok(c.cmd(&["ls"]).output().unwrap());
    let ls = String::from_utf8_lossy(&ls.stdout).into_owned();
    assert_eq!(ls.matches("words").count(), 1, "{ls}");
    drop(again);
}

/// The bytes of a file, or of a directory's files in name order.
fn all_bytes(p: &Path) -> Vec<u8> {
    if p.is_file() {
        return std::fs::read(p).unwrap();
    }
    let mut names: Vec<_> = std::fs::read_dir(p)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    names.iter().flat_map(|f| all_bytes(f)).collect()
}
