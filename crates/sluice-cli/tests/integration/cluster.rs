//! The cluster as a user runs it: real coordinator and worker processes on
//! loopback, killed, stopped and impersonated. Every job's output is
//! compared byte for byte with the local engine's on the same input. The
//! scheduler's policies (locality, pools, backups) are `scheduling`'s.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

#[test]
fn cluster_jobs_match_the_local_engine_and_data_sets_round_trip() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "3MB");
    let c = Cluster::up(d.path(), 2, "");
    assert_eq!(c.worker_pids().len(), 2);
    put(&c, &data, "words", "256KB", "1");
    // A data set comes back byte for byte.
    get(&c, "words", &d.path().join("words.txt"));
    assert!(
        std::fs::read(d.path().join("words.txt")).unwrap()
            == std::fs::read(data.join("part-00000")).unwrap()
    );
    let report = d.path().join("report.json");
    let out = ok(submit_wc(&c, "words", "counts")
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap());
    // The summary, on stderr as `sluice run` prints it.
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(
        summary.contains("12 data-local, 0 remote maps"),
        "{summary}"
    );
    let r = read_json(&report);
    assert_eq!(r["maps"].as_u64(), Some(12), "{r}");
    assert_eq!(r["cluster"]["data_local_maps"].as_u64(), Some(12), "{r}");
    assert_eq!(
        r["cluster"]["per_worker"].as_array().unwrap().len(),
        2,
        "{r}"
    );
    counts_match_local(&c, d.path(), &data);

    // The output exists now; a second run must say so, and nothing changes.
    let again = submit_wc(&c, "words", "counts").output().unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists"));

    // A map-only job.
    ok(c.submit(&[
        "grep",
        "--pattern",
        "^the ",
        "--input",
        "words",
        "--output",
        "g",
    ])
    .output()
    .unwrap());
    let ls = ok(c.cmd(&["ls"]).output().unwrap());
    let ls = String::from_utf8_lossy(&ls.stdout);
    assert!(
        ls.contains("words") && ls.contains("counts") && ls.contains('g'),
        "{ls}"
    );
    ok(c.cmd(&["rm", "g"]).output().unwrap());
    let missing = c
        .cmd(&["get", "g"])
        .arg(d.path().join("x"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no data set g"));
    // Names cannot climb out of a directory.
    let bad = c
        .cmd(&["put"])
        .arg(&data)
        .args(["--dataset", "../x"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid data set name"));
}

#[test]
fn a_worker_killed_mid_job_loses_nothing() {
    let (d, data, c, job, report) = running_wc(
        "24MB",
        3,
        "--worker-timeout-ms 1000 --delay-node 2 --heartbeat-ms 100",
        "2",
    );
    std::thread::sleep(Duration::from_millis(700));
    signal(c.worker_pids()[0], "KILL");
    ok(job.wait_with_output().unwrap());
    let r = read_json(&report);
    assert!(
        r["cluster"]["attempts"]["lost"].as_u64().unwrap() >= 1,
        "{r}"
    );
    counts_match_local(&c, d.path(), &data);
}

#[test]
fn a_stopped_worker_is_routed_around() {
    let (d, data, c, job, report) = running_wc(
        "12MB",
        3,
        "--worker-timeout-ms 1500 --delay-node 2 --heartbeat-ms 100",
        "2",
    );
    std::thread::sleep(Duration::from_millis(400));
    let stopped = c.worker_pids()[1];
    signal(stopped, "STOP");
    let out = job.wait_with_output().unwrap();
    signal(stopped, "CONT");
    ok(out);
    let r = read_json(&report);
    let a = &r["cluster"]["attempts"];
    let rerun = a["lost"].as_u64().unwrap() + a["speculative"].as_u64().unwrap();
    assert!(rerun >= 1, "{r}");
    counts_match_local(&c, d.path(), &data);
}

#[test]
fn losing_every_worker_fails_the_job_clearly_and_commits_nothing() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "8MB");
    let c = Cluster::up(d.path(), 2, "--worker-timeout-ms 800 --heartbeat-ms 100");
    put(&c, &data, "words", "512KB", "1");
    let job = submit_wc(&c, "words", "counts")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    for pid in c.worker_pids() {
        signal(pid, "KILL");
    }
    let t = Instant::now();
    let out = job.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "bounded: {:?}",
        t.elapsed()
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no live workers") || err.contains("no live replica"),
        "{err}"
    );
    let ls = ok(c.cmd(&["ls"]).output().unwrap());
    assert!(!String::from_utf8_lossy(&ls.stdout).contains("counts"));
}

#[test]
fn unauthenticated_processes_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let c = Cluster::up(d.path(), 1, "");
    let addr = c.json()["coordinator"].as_str().unwrap().to_owned();
    let wrong = d.path().join("wrong-secret");
    std::fs::write(&wrong, "this-is-not-the-cluster-secret").unwrap();
    let mut worker: Child = sluice()
        .args(["worker", "--coordinator", &addr, "--data-dir"])
        .arg(d.path().join("intruder"))
        .args(tls_flags(&c, "intruder", "worker"))
        .arg("--secret-file")
        .arg(&wrong)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while worker.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = worker.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("refused"));
    let ls = sluice()
        .args(["ls", "--coordinator", &addr, "--secret-file"])
        .arg(&wrong)
        .arg("--tls-dir")
        .arg(c.dir.join("tls"))
        .output()
        .unwrap();
    assert!(!ls.status.success());
    assert!(String::from_utf8_lossy(&ls.stderr).contains("authentication failed"));
}

#[test]
fn ohb_counts_every_pair_on_the_cluster_even_when_a_worker_dies() {
    let d = tempfile::tempdir().unwrap();
    let c = Cluster::up(d.path(), 3, "--worker-timeout-ms 1000 --heartbeat-ms 100");
    // The bench on the cluster: its oracle checks the counts; every
    // worker reports utilization samples.
    let out = d.path().join("ohb");
    ok(sluice()
        .args([
            "bench",
            "ohb",
            "--maps",
            "6",
            "--reduces",
            "3",
            "--pairs-per-map",
            "2000",
        ])
        .args([
            "--pair-size",
            "100",
            "--runs",
            "1",
            "--python",
            "/nonexistent",
        ])
        .arg("--cluster")
        .arg(&c.dir)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap());
    let r = read_json(&out.join("results.json"));
    assert_eq!(
        r[0]["median_run"]["nodes"].as_array().unwrap().len(),
        3,
        "{r}"
    );
    assert_eq!(r[0]["engine"], "cluster");
    // A synthetic map re-run elsewhere makes the same pairs: after a
    // worker dies mid-job, each reducer still gets exactly its share.
    let report = d.path().join("ohb-report.json");
    let job = c
        .submit(&["ohb", "--input", "synthetic:12", "--output", "ohb-out"])
        .args([
            "--reducers",
            "3",
            "--pattern",
            "avg",
            "--pairs-per-map",
            "60000",
        ])
        .args(["--pair-size", "100", "-q", "--report"])
        .arg(&report)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    signal(c.worker_pids()[0], "KILL");
    ok(job.wait_with_output().unwrap());
    let r = read_json(&report);
    // 12 maps and 3 reduces: more attempts means work was redone.
    assert!(
        r["cluster"]["attempts"]["launched"].as_u64().unwrap() > 15,
        "{r}"
    );
    for p in 0..3 {
        assert_eq!(
            r["user_counters"][format!("OHB.PAIRS_R{p}")].as_u64(),
            Some(240_000),
            "{r}"
        );
    }
}

#[test]
fn gen_on_the_workers_makes_the_local_generators_bytes() {
    let d = tempfile::tempdir().unwrap();
    let c = Cluster::up(d.path(), 2, "");
    // Two parts (32 MiB each at most), one map task each.
    ok(c.cmd(&[
        "gen",
        "text",
        "--size",
        "40MB",
        "--seed",
        "5",
        "--dataset",
        "words",
    ])
    .output()
    .unwrap());
    let got = d.path().join("got");
    get(&c, "words", &got);
    let local = gen(d.path(), "40MB");
    let (n, bytes) = (part_files(&got).len(), concat_parts(&got));
    let (m, want) = (part_files(&local).len(), concat_parts(&local));
    assert_eq!((n, m), (2, 2));
    assert!(
        bytes == want,
        "generated data differs from the local generator's"
    );
    // A second gen to the same name is refused unless --overwrite.
    let again = c
        .cmd(&["gen", "text", "--size", "1MB", "--dataset", "words"])
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists"));
}

/// Files under `dir` (recursively) whose names satisfy `want`.
fn files_under(dir: &Path, want: &dyn Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p, want));
        } else if want(&e.file_name().to_string_lossy()) {
            out.push(p);
        }
    }
    out
}

/// Whether `name` is a finished map output (`mNNNNN-aN.run`), not a
/// scratch file of a running map.
fn is_map_output(name: &str) -> bool {
    name.starts_with('m') && name.ends_with(".run") && name.contains("-a")
}

#[test]
fn a_corrupt_map_output_on_disk_is_recomputed() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "12MB");
    let c = Cluster::up(d.path(), 2, "--delay-node 2 --heartbeat-ms 100");
    put(&c, &data, "words", "1MB", "1");
    let (job, report) = spawn_wc(&c, d.path());
    // The first map output to appear (maps rename a finished output into
    // place) gets 64 bytes flipped in its middle, long before reducers
    // start fetching (slow start waits for 80% of the maps).
    let dirs = c.data_dirs();
    let victim = poll(|| {
        dirs.iter()
            .flat_map(|d| files_under(&d.join("shuffle"), &is_map_output))
            .next()
    });
    let mut bytes = std::fs::read(&victim).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 64] {
        *b ^= 0xff;
    }
    std::fs::write(&victim, &bytes).unwrap();
    ok(job.wait_with_output().unwrap());
    let r = read_json(&report);
    // 12 maps and 3 reduces: more attempts means the damaged map re-ran.
    assert!(
        r["cluster"]["attempts"]["launched"].as_u64().unwrap() > 15,
        "{r}"
    );
    counts_match_local(&c, d.path(), &data);
}

#[test]
fn a_worker_killed_after_reducers_fetched_its_output_loses_nothing() {
    let (d, data, c, job, report) = running_wc(
        "24MB",
        3,
        "--worker-timeout-ms 1000 --delay-node 2 --heartbeat-ms 100",
        "2",
    );
    // Wait until some reducer holds a fetched segment, then kill another
    // worker that wrote map outputs: what was fetched stays used, what was
    // not is recomputed from the surviving replicas.
    let dirs = c.data_dirs();
    let fetcher = poll(|| {
        dirs.iter().position(|d| {
            !files_under(&d.join("work"), &|_| true)
                .iter()
                .filter(|p| p.parent().is_some_and(|q| q.ends_with("in")))
                .collect::<Vec<_>>()
                .is_empty()
        })
    });
    let victim = (0..dirs.len())
        .find(|&i| {
            i != fetcher && !files_under(&dirs[i].join("shuffle"), &is_map_output).is_empty()
        })
        .expect("another worker ran maps");
    signal(c.worker_pids()[victim], "KILL");
    ok(job.wait_with_output().unwrap());
    let r = read_json(&report);
    assert!(
        r["cluster"]["attempts"]["lost"].as_u64().unwrap() >= 1,
        "{r}"
    );
    counts_match_local(&c, d.path(), &data);
}

#[test]
fn the_catalog_and_a_running_job_survive_a_coordinator_restart() {
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
    std::thread::sleep(Duration::from_millis(300));
    signal(pid, "KILL");
    std::thread::sleep(Duration::from_millis(500));
    // The same coordinator again, on the same address and state dir: it
    // takes the job back, and the waiting client sees it succeed.
    let again = restart_coordinator(&c, &argv, 2);
    ok(job.wait_with_output().unwrap());
    let ls = ok(c.cmd(&["ls"]).output().unwrap());
    let ls = String::from_utf8_lossy(&ls.stdout);
    assert!(ls.contains("words") && ls.contains("counts"), "{ls}");
    let jobs = ok(c.cmd(&["jobs"]).output().unwrap());
    let jobs = String::from_utf8_lossy(&jobs.stdout);
    assert_eq!(jobs.matches("succeeded").count(), 1, "{jobs}");
    assert!(!jobs.contains("failed"), "{jobs}");
    counts_match_local(&c, d.path(), &data);
    drop(again);
}

#[test]
fn sort_and_terasort_run_on_the_cluster_from_a_sample_of_the_data_set() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "6MB");
    let c = Cluster::up(d.path(), 2, "");
    put(&c, &data, "words", "1MB", "1");
    // submit samples the blocks' heads and passes the split points.
    ok(c.submit(&[
        "sort",
        "--reducers",
        "3",
        "--input",
        "words",
        "--output",
        "sorted",
    ])
    .output()
    .unwrap());
    get(&c, "sorted", &d.path().join("sorted"));
    let local = local(d.path(), &data, &["sort", "--reducers", "3"]);
    assert!(
        concat_parts(&d.path().join("sorted")) == concat_parts(&local),
        "the cluster's total order differs from the local engine's"
    );
    let tera = d.path().join("tera");
    ok(sluice()
        .args(["gen", "tera", "--rows", "50000", "--out"])
        .arg(&tera)
        .output()
        .unwrap());
    put(&c, &tera, "tera", "1MB", "1");
    ok(c.submit(&[
        "terasort",
        "--reducers",
        "3",
        "--input",
        "tera",
        "--output",
        "tsorted",
    ])
    .output()
    .unwrap());
    get(&c, "tsorted", &d.path().join("tsorted"));
    let v = ok(sluice()
        .arg("teravalidate")
        .arg("--input")
        .arg(d.path().join("tsorted"))
        .arg("--against")
        .arg(&tera)
        .output()
        .unwrap());
    let v = String::from_utf8_lossy(&v.stdout);
    assert!(
        v.contains("sorted: ok") && v.contains("same records"),
        "{v}"
    );
    // Without a sample, the coordinator says what is missing.
    let out = c
        .submit(&[
            "sort",
            "--reducers",
            "3",
            "--input",
            "words",
            "--output",
            "x",
        ])
        .args(["--split-points", "zz"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad hex"));
}

/// `sluice run`'s answer to a job over the local Pavlo files.
fn local_join(dir: &Path, pavlo: &Path, form: &str) -> PathBuf {
    let rankings = pavlo.join("rankings").display().to_string();
    let out = local(
        dir,
        &pavlo.join("uservisits"),
        &["pavlo-join", "--join", form, "--rankings", &rankings],
    );
    let named = dir.join(format!("local-{form}"));
    std::fs::rename(out, &named).unwrap();
    named
}

#[test]
fn the_pavlo_join_runs_on_the_cluster_in_both_forms() {
    let d = tempfile::tempdir().unwrap();
    let pavlo = d.path().join("pavlo");
    ok(sluice()
        .args(["gen", "pavlo", "--scale", "4MB", "--out"])
        .arg(&pavlo)
        .output()
        .unwrap());
    let c = Cluster::up(d.path(), 2, "--worker-timeout-ms 1000 --heartbeat-ms 100");
    // One replica of each Rankings block: a worker copies the blocks it
    // lacks from the other (the broadcast side input).
    put(&c, &pavlo.join("rankings"), "rankings", "64KB", "1");
    let holder = c
        .data_dirs()
        .iter()
        .position(|d| {
            std::fs::read_dir(d.join("blocks"))
                .unwrap()
                .next()
                .is_some()
        })
        .unwrap();
    put(&c, &pavlo.join("uservisits"), "uservisits", "512KB", "2");
    let join = |form: &str, out: &str, report: &Path| {
        let mut cmd = c.submit(&["pavlo-join", "--join", form, "--rankings", "rankings"]);
        cmd.args(["--input", "uservisits", "--output", out, "--report"])
            .arg(report);
        ok(cmd.output().unwrap());
        get(&c, out, &d.path().join(out));
    };
    let fast_report = d.path().join("fast.json");
    join("fast", "joined-fast", &fast_report);
    let base_report = d.path().join("baseline.json");
    join("baseline", "joined-base", &base_report);

    let answer = local_join(d.path(), &pavlo, "fast");
    assert_eq!(
        std::fs::read_to_string(answer.join("part-r-00000"))
            .unwrap()
            .lines()
            .count(),
        1
    );
    // One part file: `get` writes it as a file.
    for out in ["joined-fast", "joined-base"] {
        assert!(
            std::fs::read(d.path().join(out)).unwrap()
                == std::fs::read(answer.join("part-r-00000")).unwrap(),
            "{out} differs from the local engine's answer"
        );
    }
    same_dirs(&answer, &local_join(d.path(), &pavlo, "baseline"));
    let fast = read_json(&fast_report);
    assert_eq!(fast["reducers"].as_u64(), Some(1), "{fast}");
    // The baseline's report is its three jobs', and their temporary data
    // sets are gone.
    let base = read_json(&base_report);
    assert_eq!(base.as_array().map(Vec::len), Some(3), "{base}");
    let names = || {
        let ls = ok(c.cmd(&["ls"]).output().unwrap());
        String::from_utf8_lossy(&ls.stdout)
            .lines()
            .map(|l| l.split(' ').next().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(),
        ["joined-base", "joined-fast", "rankings", "uservisits"]
    );

    // A missing side input is named, in both forms, and leaves nothing.
    for form in ["fast", "baseline"] {
        let out = c
            .submit(&["pavlo-join", "--join", form, "--rankings", "nope"])
            .args(["--input", "uservisits", "--output", "x"])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no data set nope"), "{form}: {err}");
    }
    assert_eq!(
        names(),
        ["joined-base", "joined-fast", "rankings", "uservisits"]
    );

    // A job may not overwrite a data set it reads.
    let out = c
        .submit(&["wordcount", "--input", "rankings,uservisits"])
        .args(["--output", "uservisits", "--overwrite"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("output data set uservisits is also an input"),
        "{err}"
    );

    // With a worker holding the only copy of some Rankings blocks killed,
    // the broadcast join fails in bounded time, saying why.
    signal(c.worker_pids()[holder], "KILL");
    wait_until_lost(&c, 1);
    let out = c
        .submit(&["pavlo-join", "--rankings", "rankings"])
        .args(["--input", "uservisits", "--output", "x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("side data set rankings has no live replica"),
        "{err}"
    );
    assert!(!names().contains(&"x".to_owned()));
}

#[test]
fn replicated_output_survives_the_loss_of_a_worker() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "3MB");
    let c = Cluster::up(d.path(), 2, "--worker-timeout-ms 1000 --heartbeat-ms 100");
    put(&c, &data, "words", "512KB", "2");
    let dirs = c.data_dirs();
    // A stray output block of the job about to run (the first of epoch
    // 1), as a writer that died between copying and reporting leaves.
    let stray = dirs[1].join("blocks/j4294967297-r7-a3");
    std::fs::write(&stray, b"stray").unwrap();
    let mut cmd = sluice();
    cmd.args(["submit", "--replication", "2", "--cluster"])
        .arg(&c.dir)
        .args(WC)
        .args(["--input", "words", "--output", "counts"]);
    ok(cmd.output().unwrap());
    let ls = ok(c.cmd(&["ls"]).output().unwrap());
    let ls = String::from_utf8_lossy(&ls.stdout);
    let counts = ls.lines().find(|l| l.starts_with("counts ")).unwrap();
    assert!(counts.contains("replicas>=2"), "{ls}");
    // Each worker holds every block of both data sets, nothing more.
    let blocks = |name: &str| -> usize {
        let line = ls.lines().find(|l| l.starts_with(name)).unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words.iter().position(|w| *w == "blocks").unwrap();
        words[at - 1].parse().unwrap()
    };
    assert_eq!(blocks("counts "), 3);
    // The job's end sweeps the stray block away.
    poll(|| (!stray.exists()).then_some(()));
    for dir in &dirs {
        assert_eq!(block_files(dir).len(), blocks("words ") + 3);
    }
    // A worker that comes back is told to delete output blocks of jobs
    // that are over and in no data set at once; other blocks the catalog
    // does not know it keeps for the orphan grace period (10 minutes).
    let orphan = dirs[0].join("blocks/j4294967296-r0-a0");
    let other = dirs[0].join("blocks/b9-9");
    std::fs::write(&orphan, b"orphan").unwrap();
    std::fs::write(&other, b"not an output").unwrap();
    let pid = c.worker_pids()[0];
    signal(pid, "STOP");
    wait_until_lost(&c, 1);
    signal(pid, "CONT");
    poll(|| (!orphan.exists()).then_some(()));
    assert!(other.exists());
    std::fs::remove_file(&other).unwrap();

    signal(pid, "KILL");
    wait_until_lost(&c, 2);
    counts_match_local(&c, d.path(), &data);
}

#[test]
fn sluice_kill_ends_a_running_job_and_leaves_nothing() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "20MB");
    let c = Cluster::up(d.path(), 2, "--heartbeat-ms 100");
    put(&c, &data, "words", "256KB", "1");
    let job = submit_wc(&c, "words", "counts")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let jobs =
        || String::from_utf8_lossy(&ok(c.cmd(&["jobs"]).output().unwrap()).stdout).into_owned();
    let id: String = poll(|| {
        let l = jobs();
        let line = l.lines().find(|l| l.contains(" running "))?;
        Some(line.split_whitespace().next()?.to_owned())
    });
    let killed = ok(c.cmd(&["kill", &id]).output().unwrap());
    assert!(String::from_utf8_lossy(&killed.stdout).contains("killed"));
    let out = job.wait_with_output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{id} was killed by sluice kill")),
        "{err}"
    );
    // Recorded killed; a second kill says it is over.
    let l = jobs();
    assert!(
        l.lines()
            .any(|l| l.starts_with(&id) && l.contains(" killed ")),
        "{l}"
    );
    let again = fails(c.cmd(&["kill", &id]).output().unwrap());
    assert!(again.contains("is not running"), "{again}");
    // Nothing of it in the catalog or on the workers' disks.
    let ls = String::from_utf8_lossy(&ok(c.cmd(&["ls"]).output().unwrap()).stdout).into_owned();
    assert!(!ls.contains("counts"), "{ls}");
    for dir in c.data_dirs() {
        poll(|| {
            let left = files_under(&dir.join("shuffle"), &|_| true).len()
                + files_under(&dir.join("work"), &|_| true).len()
                + block_files(&dir)
                    .iter()
                    .filter(|b| b.file_name().unwrap().to_string_lossy().starts_with('j'))
                    .count();
            (left == 0).then_some(())
        });
    }
    // The cluster runs the next job as before.
    ok(submit_wc(&c, "words", "counts").output().unwrap());
    counts_match_local(&c, d.path(), &data);
}

#[test]
fn a_workers_memory_is_shared_by_its_slots() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "2MB");
    // 64 MB for one map and one reduce slot: 32 MB a task.
    let c = Cluster::up_with(d.path(), 2, "", "--memory 64MB");
    let status = ok(c.cmd(&["cluster", "status"]).output().unwrap());
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("a task)"), "{status}");
    put(&c, &data, "words", "256KB", "1");
    // A job asking more than any worker gives a task is refused.
    let out = c
        .submit(&["wordcount", "--memory", "100MB"])
        .args(["--input", "words", "--output", "big"])
        .output()
        .unwrap();
    let err = fails(out);
    assert!(
        err.contains("the most a worker gives a task is 32000000"),
        "{err}"
    );
    // By default a task gets its worker's share; a job may ask for less.
    for (flags, want) in [
        (&[][..], 32_000_000),
        (&["--memory", "16MB"][..], 16_000_000),
    ] {
        let report = d.path().join("r.json");
        ok(c.submit(&["wordcount"])
            .args(flags)
            .args(["--input", "words", "--output", &format!("c{want}")])
            .arg("--report")
            .arg(&report)
            .output()
            .unwrap());
        assert_eq!(read_json(&report)["task_memory_bytes"], want);
    }
}

#[test]
fn jobs_with_more_reducers_than_maps_and_empty_inputs_run() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "300KB");
    let c = Cluster::up(d.path(), 2, "");
    put(&c, &data, "words", "1MB", "1");
    let empty = d.path().join("empty.txt");
    std::fs::write(&empty, b"").unwrap();
    put(&c, &empty, "empty", "1MB", "1");
    // One block, four reducers: reduce indexes past the maps.
    let job = ["wordcount", "--reducers", "4"];
    ok(c.submit(&job)
        .args(["--input", "words", "--output", "counts"])
        .output()
        .unwrap());
    get(&c, "counts", &d.path().join("got"));
    let want = local(d.path(), &data, &job);
    same_dirs(&d.path().join("got"), &want);
    // No maps at all.
    ok(c.submit(&["wordcount", "--reducers", "1"])
        .args(["--input", "empty", "--output", "none"])
        .output()
        .unwrap());
}
