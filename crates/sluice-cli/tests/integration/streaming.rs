//! Hadoop Streaming as a user runs it: Python mapper and reducer shipped
//! with -file give the built-in word count's answer locally and on a
//! cluster; a map-only job passes any bytes through; -D properties reach
//! the environment and stderr counters the report; a failing command, one
//! that stops reading and a missing one fail the job clearly and leave no
//! output.

use std::path::{Path, PathBuf};

use crate::support::*;

/// The scripts, written under `dir`.
fn scripts(dir: &Path) -> (PathBuf, PathBuf) {
    let (m, r) = (dir.join("map.py"), dir.join("reduce.py"));
    std::fs::write(&m, MAP_PY).unwrap();
    std::fs::write(&r, REDUCE_PY).unwrap();
    (m, r)
}

/// Every line of the part files under `dir`, sorted.
fn sorted_lines(dir: &Path) -> Vec<String> {
    let text = String::from_utf8(concat_parts(dir)).unwrap();
    let mut v: Vec<String> = text.lines().map(str::to_owned).collect();
    v.sort();
    v
}

fn streaming(args: &[&str]) -> std::process::Command {
    let mut c = sluice();
    c.arg("streaming").args(args);
    c
}

#[test]
fn python_word_count_matches_the_built_in_one_locally_and_on_a_cluster() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "1MB");
    let (m, r) = scripts(d.path());
    let want = sorted_lines(&local(d.path(), &data, &["wordcount"]));
    let out = d.path().join("out");
    let (m, r, data_s) = (
        m.to_str().unwrap(),
        r.to_str().unwrap(),
        data.to_str().unwrap(),
    );
    let job = [
        "-mapper",
        "python3 map.py",
        "-reducer",
        "python3 reduce.py",
        "-file",
        m,
        "-file",
        r,
        "-numReduceTasks",
        "2",
    ];
    ok(
        streaming(&["-input", data_s, "-output", out.to_str().unwrap()])
            .args(job)
            .output()
            .unwrap(),
    );
    assert_eq!(sorted_lines(&out), want);
    assert_eq!(part_files(&out).len(), 2);
    // The reducer as combiner too: run per spilled partition, its output
    // stays in that partition.
    let combined = d.path().join("combined");
    ok(
        streaming(&["-input", data_s, "-output", combined.to_str().unwrap()])
            .args(job)
            .args(["-combiner", "python3 reduce.py"])
            .output()
            .unwrap(),
    );
    assert_eq!(sorted_lines(&combined), want);

    let c = Cluster::up(d.path(), 2, "");
    put(&c, &data, "words", "256KB", "1");
    ok(
        streaming(&["-input", "words", "-output", "counts", "--cluster"])
            .arg(&c.dir)
            .args(job)
            .output()
            .unwrap(),
    );
    let got = d.path().join("got");
    get(&c, "counts", &got);
    assert_eq!(sorted_lines(&got), want);
}

#[test]
fn a_map_only_job_passes_any_bytes_and_sees_its_properties_and_counters() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("in.bin");
    // Bytes that are not UTF-8, tabs, every byte but a line's end.
    let lines: Vec<u8> = (0..200u8)
        .filter(|&i| i != b'\n' && i != b'\r')
        .flat_map(|i| [i.wrapping_mul(7) | 0x80, b'\t', i, b'\n'])
        .collect();
    std::fs::write(&input, &lines).unwrap();
    let out = d.path().join("out");
    let report = d.path().join("r.json");
    ok(streaming(&[
        "-input",
        input.to_str().unwrap(),
        "-output",
        out.to_str().unwrap(),
        "-mapper",
        "cat",
        "-reducer",
        "NONE",
    ])
    .output()
    .unwrap());
    assert_eq!(
        concat_parts(&out),
        lines,
        "map-only: the bytes as they came"
    );

    let env = d.path().join("env");
    ok(sluice()
        .args(["streaming", "-D", "my.prop=hello", "-input"])
        .arg(&input)
        .arg("-output")
        .arg(&env)
        .args([
            "-mapper",
            "wc -l | { read n; echo \"reporter:counter:app,lines,$n\" >&2; echo \"$my_prop\t$mapreduce_task_ismap\"; }",
            "-numReduceTasks",
            "0",
            "--report",
        ])
        .arg(&report)
        .output()
        .unwrap());
    let got = String::from_utf8(concat_parts(&env)).unwrap();
    assert!(got.lines().all(|l| l == "hello\ttrue"), "{got}");

    // The split a task reads, and a reducer's partition, as Hadoop names
    // them in the environment.
    let named = d.path().join("named");
    ok(streaming(&["-input", input.to_str().unwrap(), "-output"])
        .arg(&named)
        .args([
            "-mapper",
            "cat >/dev/null; echo \"$mapreduce_map_input_file\t$mapreduce_map_input_start:$mapreduce_map_input_length\"",
            "-reducer",
            "cat; echo \"partition\t$mapreduce_task_partition\"",
            "-numReduceTasks",
            "3",
        ])
        .output()
        .unwrap());
    let len = std::fs::metadata(&input).unwrap().len();
    let want_split = format!("{}\t0:{len}", input.display());
    for p in 0..3 {
        let part = std::fs::read_to_string(named.join(format!("part-r-{p:05}"))).unwrap();
        assert!(
            part.contains(&format!("partition\t{p}\n")),
            "part {p}: {part}"
        );
    }
    let all = String::from_utf8(concat_parts(&named)).unwrap();
    assert!(all.contains(&want_split), "{all}");
    let r = read_json(&report);
    assert_eq!(r["user_counters"]["app.lines"].as_u64(), Some(198), "{r}");
}

#[test]
fn failing_stopping_and_missing_commands_fail_the_job_and_leave_nothing() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("in.txt");
    std::fs::write(&input, "a b\n".repeat(100_000)).unwrap();
    let cases = [
        ("cat >/dev/null; echo boom >&2; exit 3", "exit status: 3"),
        ("head -1", "exited before reading all its input"),
        ("no-such-command-here", "not found"),
    ];
    for (i, (cmd, says)) in cases.iter().enumerate() {
        let out = d.path().join(format!("out{i}"));
        let err = fails(
            streaming(&["-input", input.to_str().unwrap(), "-output"])
                .arg(&out)
                .args(["-mapper", cmd, "-reducer", "cat"])
                .output()
                .unwrap(),
        );
        assert!(err.contains(says) && err.contains(cmd), "{cmd}: {err}");
        assert!(!out.exists(), "{cmd}: no output");
    }
    let bad = fails(streaming(&["-input", "x", "-bogus", "y"]).output().unwrap());
    assert!(bad.contains("unknown option -bogus"), "{bad}");
}

#[test]
fn a_command_that_stops_making_progress_is_killed_after_the_task_timeout() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("in.txt");
    std::fs::write(&input, "a b\n".repeat(100_000)).unwrap();
    // Neither reads its input nor writes: stuck on the first batch. Then
    // one that reads it all and hangs before it ends, its output closed.
    for (i, cmd) in ["sleep 600", "cat >/dev/null; exec >&-; sleep 600"]
        .iter()
        .enumerate()
    {
        let out = d.path().join(format!("out{i}"));
        let err = fails(
            streaming(&["-D", "mapreduce.task.timeout=300", "-input"])
                .arg(&input)
                .arg("-output")
                .arg(&out)
                .args(["-mapper", cmd, "-reducer", "NONE"])
                .output()
                .unwrap(),
        );
        assert!(
            err.contains("made no progress") && err.contains("mapreduce.task.timeout is 300 ms"),
            "{cmd}: {err}"
        );
        assert!(!out.exists(), "{cmd}: no output");
    }
    let bad = fails(
        streaming(&["-D", "mapreduce.task.timeout=soon", "-input"])
            .arg(&input)
            .arg("-output")
            .arg(d.path().join("out-bad"))
            .args(["-mapper", "cat"])
            .output()
            .unwrap(),
    );
    assert!(bad.contains("not a number of milliseconds"), "{bad}");
}

/// Whether process `pid` is gone (or a zombie no one has reaped yet).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Ctrl-C (SIGINT) on a local Streaming job stops the commands it runs,
/// which are in process groups of their own that a terminal's Ctrl-C does
/// not reach, with what they started; the job ends as the signal ends a
/// process and commits nothing.
#[test]
fn an_interrupted_job_stops_its_commands_and_commits_nothing() {
    use std::os::unix::process::ExitStatusExt;
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("in.txt");
    std::fs::write(&input, "a b\n".repeat(1000)).unwrap();
    let pidfile = d.path().join("pid");
    let out = d.path().join("out");
    // The command starts a child and waits for it.
    let cmd = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
    let mut job = streaming(&["-input"])
        .arg(&input)
        .arg("-output")
        .arg(&out)
        .args(["-mapper", &cmd, "-reducer", "NONE"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut pid = None;
    for _ in 0..400 {
        pid = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok());
        if pid.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid = pid.expect("the command started its child");
    assert!(!gone(pid));
    let sent = std::process::Command::new("kill")
        .args(["-INT", &job.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = job.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
    let mut stopped = false;
    for _ in 0..100 {
        if gone(pid) {
            stopped = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if !stopped {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(stopped, "the command's child {pid} outlived the job");
    assert!(!out.join("_SUCCESS").exists(), "nothing committed");
}

/// The pids in `file`, one a line, once it has `n`.
fn pids_in(file: &Path, n: usize) -> Vec<i32> {
    for _ in 0..600 {
        let pids: Vec<i32> = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.len() >= n {
            return pids;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("fewer than {n} pids in {}", file.display());
}

/// Process `pid`'s parent.
fn parent_of(pid: i32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, rest) = stat.rsplit_once(')').unwrap();
    rest.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Waits up to 5 s for `pid` to be gone; kills it if it is not.
fn gone_soon(pid: i32) -> bool {
    for _ in 0..100 {
        if gone(pid) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
    false
}

/// A worker that ends takes its tasks' Streaming commands with it, though
/// they run in process groups of their own: on SIGTERM (`cluster down`,
/// YARN's kill of a container) it kills their groups, with what they
/// started; killed with SIGKILL, its commands get the parent-death signal.
#[test]
fn a_worker_that_ends_leaves_no_streaming_command_running() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("in.txt");
    std::fs::write(&data, "a b\n".repeat(5000)).unwrap();
    let c = Cluster::up(d.path(), 2, "");
    put(&c, &data, "in", "4KB", "1");
    let shells = d.path().join("shells");
    let kids = d.path().join("kids");
    // Each map task's shell writes its pid and its child's, and waits.
    let cmd = format!(
        "echo $$ >> {}; sleep 300 & echo $! >> {}; wait",
        shells.display(),
        kids.display()
    );
    let mut job = streaming(&["-input", "in", "-output", "out", "--cluster"])
        .arg(&c.dir)
        .args(["-mapper", &cmd, "-reducer", "NONE"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Two tasks at once, one on each worker (one slot each).
    let shells = pids_in(&shells, 2);
    let kids = pids_in(&kids, 2);
    let workers = c.worker_pids();
    let worker_of = |sh: i32| {
        let w = parent_of(sh);
        assert!(workers.contains(&w), "{sh}'s parent {w} is not a worker");
        w
    };
    let (w0, w1) = (worker_of(shells[0]), worker_of(shells[1]));
    assert_ne!(w0, w1);
    let kid_of = |sh: i32| *kids.iter().find(|&&k| parent_of(k) == sh as u32).unwrap();
    let (k0, k1) = (kid_of(shells[0]), kid_of(shells[1]));
    // SIGTERM: the command and its child are gone.
    signal(w0, "TERM");
    assert!(gone_soon(shells[0]), "the shell outlived its worker");
    assert!(gone_soon(k0), "the shell's child outlived its worker");
    // SIGKILL: the command the worker started is gone (what that command
    // started in turn is beyond a parent-death signal's reach).
    signal(w1, "KILL");
    assert!(gone_soon(shells[1]), "the shell outlived its killed worker");
    gone_soon(k1);
    let _ = job.kill();
    let _ = job.wait();
}
