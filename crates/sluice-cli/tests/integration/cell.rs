//! User code stays in its cell: a worker started as root with
//! `--task-user` runs Streaming commands as that unprivileged user, which
//! can read none of the worker's files (its blocks, other jobs' files,
//! the cluster secret, the TLS keys), and the job's answer is still
//! right; without it, the same command reads them all. A worker not root
//! refuses `--task-user`.
//!
//! The tests that change users need root and the system user
//! `sluice-task` (scripts/test.sh makes it); elsewhere they say so and
//! pass.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::support::*;

/// The unprivileged user the tests run commands as.
const TASK_USER: &str = "sluice-task";

/// Whether the tests that change users can run here; says why not.
fn can_change_users() -> bool {
    if !root() {
        eprintln!("skipped: running commands as {TASK_USER} needs root");
        return false;
    }
    let known = std::fs::read_to_string("/etc/passwd")
        .unwrap()
        .lines()
        .any(|l| l.starts_with(&format!("{TASK_USER}:")));
    if !known {
        eprintln!("skipped: no user {TASK_USER} (scripts/test.sh creates it)");
    }
    known
}

/// The mapper: tries to read what is the worker's, writes one line per
/// attempt (`probe:NAME<TAB>read`, or the error it met) and who it runs
/// as, then counts words.
const PROBE_SH: &str = r#"#!/bin/sh
probe() {
  if err=$($2 "$3" 2>&1 >/dev/null); then
    printf 'probe:%s\tread\n' "$1"
  else
    printf 'probe:%s\t%s\n' "$1" "$(printf '%s\n' "$err" | head -n 1)"
  fi
}
probe block cat "$probe_block"
probe jobs ls "$probe_work"
probe shuffle ls "$probe_shuffle"
probe secret cat "$probe_secret"
probe tls_key cat "$probe_key"
probe ca_key cat "$probe_ca_key"
probe other_tasks ls "$(dirname "$PWD")"
printf 'user\t%s\n' "$(id -un)"
awk '{ for (i = 1; i <= NF; i++) print $i "\t1" }'
"#;

/// The reducer: sums the counts, passes each probe line on once.
const REDUCE: &str = "awk -F '\\t' '/^(probe:|user\\t)/ { if (!seen[$0]++) print; next } \
                      { s[$1] += $2 } END { for (k in s) print k \"\\t\" s[k] }'";

/// What the probing job found: each probe's outcome and the user, and the
/// other (word count) lines, sorted.
struct Found {
    probes: Vec<(String, String)>,
    user: String,
    counts: Vec<String>,
}

/// Runs the probing job on `c` over data set `words`.
fn probe(c: &Cluster, d: &Path, out: &str) -> Found {
    let data_dir = &c.data_dirs()[0];
    let block = block_files(data_dir)[0].clone();
    let tls = c.dir.join("tls");
    let key = std::fs::read_dir(&tls)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "key") && !p.ends_with("ca.key"))
        .unwrap();
    let script = d.join("probe.sh");
    std::fs::write(&script, PROBE_SH).unwrap();
    let prop = |k: &str, v: &Path| format!("probe.{k}={}", v.display());
    let mut cmd = sluice();
    cmd.arg("streaming");
    for (k, v) in [
        ("block", block),
        ("work", data_dir.join("work")),
        ("shuffle", data_dir.join("shuffle")),
        ("secret", c.dir.join("secret")),
        ("key", key),
        ("ca_key", tls.join("ca.key")),
    ] {
        cmd.args(["-D", &prop(k, &v)]);
    }
    ok(cmd
        .args(["-input", "words", "-output", out, "-numReduceTasks", "1"])
        .args(["-mapper", "sh probe.sh", "-reducer", REDUCE, "-file"])
        .arg(&script)
        .arg("--cluster")
        .arg(&c.dir)
        .output()
        .unwrap());
    let got = d.join(out);
    get(c, out, &got);
    // A data set of one file is got as that file.
    let bytes = match got.is_dir() {
        true => concat_parts(&got),
        false => std::fs::read(&got).unwrap(),
    };
    let text = String::from_utf8(bytes).unwrap();
    let mut found = Found {
        probes: Vec::new(),
        user: String::new(),
        counts: Vec::new(),
    };
    for line in text.lines() {
        let (k, v) = line.split_once('\t').unwrap();
        if let Some(name) = k.strip_prefix("probe:") {
            found.probes.push((name.to_owned(), v.to_owned()));
        } else if k == "user" {
            found.user = v.to_owned();
        } else {
            found.counts.push(line.to_owned());
        }
    }
    found.probes.sort();
    found.counts.sort();
    found
}

/// The built-in word count's answer over `data`, sorted lines.
fn word_counts(d: &Path, data: &Path) -> Vec<String> {
    let out = local(d, data, &["wordcount"]);
    let text = String::from_utf8(concat_parts(&out)).unwrap();
    let mut v: Vec<String> = text.lines().map(str::to_owned).collect();
    v.sort();
    v
}

/// A directory any user may enter, as a cluster's parent often is: only
/// the modes Sluice gives its own files keep them from other users.
fn open_dir(d: &Path, name: &str) -> PathBuf {
    let p = d.join(name);
    std::fs::create_dir(&p).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

const PROBES: [&str; 7] = [
    "block",
    "ca_key",
    "jobs",
    "other_tasks",
    "secret",
    "shuffle",
    "tls_key",
];

#[test]
fn a_task_users_command_can_read_none_of_the_workers_files_and_the_answer_is_right() {
    if !can_change_users() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = gen(d.path(), "200KB");
    let want = word_counts(d.path(), &data);

    let confined = open_dir(d.path(), "confined");
    let c = Cluster::up_args(&confined, 1, "", "", &["--task-user", TASK_USER]);
    put(&c, &data, "words", "64KB", "1");
    let data_dir = &c.data_dirs()[0];
    for p in [
        &c.dir,
        data_dir,
        &data_dir.join("blocks"),
        &data_dir.join("work"),
    ] {
        assert_eq!(mode(p), 0o700, "{}", p.display());
    }
    assert_eq!(mode(&c.dir.join("secret")), 0o600);
    let found = probe(&c, d.path(), "confined-counts");
    assert_eq!(found.user, TASK_USER);
    let names: Vec<&str> = found.probes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, PROBES);
    for (name, outcome) in &found.probes {
        assert!(outcome.contains("Permission denied"), "{name}: {outcome}");
    }
    assert_eq!(found.counts, want, "the answer is right");
    // A command the task user cannot reach (a script in a directory only
    // root may enter) fails, and the error says as whom it ran.
    let private = d.path().join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let script = private.join("map.sh");
    std::fs::write(&script, "#!/bin/sh\ncat\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = sluice()
        .args(["streaming", "-input", "words", "-output", "never"])
        .arg("-mapper")
        .arg(&script)
        .args(["-reducer", "cat", "--cluster"])
        .arg(&c.dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains(&format!("as task user {TASK_USER}")), "{err}");
    // Each command's directory was removed after its task.
    let tasks = std::env::temp_dir().join(format!("sluice-tasks-{}", c.worker_pids()[0]));
    assert_eq!(std::fs::read_dir(&tasks).unwrap().count(), 0);
    // And their base directory with the worker.
    ok(sluice()
        .args(["cluster", "down", "--dir"])
        .arg(&c.dir)
        .output()
        .unwrap());
    assert!(!tasks.exists(), "{} left behind", tasks.display());

    // The same command run as the worker's user (root) reads them all:
    // the refusals above are the task user's.
    let open = open_dir(d.path(), "open");
    let c = Cluster::up(&open, 1, "");
    put(&c, &data, "words", "64KB", "1");
    let found = probe(&c, d.path(), "open-counts");
    assert_eq!(found.user, "root");
    for (name, outcome) in &found.probes {
        assert_eq!(outcome, "read", "{name}");
    }
    assert_eq!(found.counts, want);
    let log = std::fs::read_to_string(c.dir.join("worker-0.log")).unwrap();
    assert!(log.contains("without --task-user"), "{log}");
}

#[test]
fn a_worker_not_root_refuses_a_task_user_and_root_refuses_an_unknown_one() {
    let d = tempfile::tempdir().unwrap();
    let run = |cmd: &mut std::process::Command, user: &str| {
        cmd.args(["worker", "--coordinator", "127.0.0.1:1", "--insecure"])
            .args(["--task-user", user, "--data-dir"])
            .arg(d.path().join("data"))
            .output()
    };
    let e = fails(run(&mut sluice(), "no-such-user-here").unwrap());
    if root() {
        assert!(
            e.contains("no-such-user-here") && e.contains("no such user"),
            "{e}"
        );
    } else {
        assert!(e.contains("needs a worker started as root"), "{e}");
    }
    if !can_change_users() {
        return;
    }
    let uid = std::fs::read_to_string("/etc/passwd")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{TASK_USER}:x:")))
        .and_then(|rest| rest.split(':').next()?.parse::<u32>().ok())
        .unwrap();
    use std::os::unix::process::CommandExt;
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    match run(sluice().uid(uid), TASK_USER) {
        Ok(out) => {
            let e = fails(out);
            assert!(e.contains("needs a worker started as root"), "{e}");
        }
        // The binary lies where that user cannot reach it.
        Err(e) => eprintln!("skipped the unprivileged worker: {e}"),
    }
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

/// The command that sleeps long: it starts a child that sleeps ten
/// minutes, writes the child's pid to `$probe_pidfile` and waits for it.
const SLEEPER: &str = "sleep 600 & echo $! > \"$probe_pidfile\"; wait";

/// `sluice kill` ends a Streaming job's running command, mapper or
/// combiner, with what it started, at once (not when it ends or times
/// out), and the job commits nothing.
#[test]
fn a_killed_jobs_command_ends_and_nothing_is_committed() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("in.txt");
    std::fs::write(&input, "a b\n".repeat(100)).unwrap();
    let c = Cluster::up(d.path(), 1, "--heartbeat-ms 100");
    put(&c, &input, "words", "1MB", "1");
    let mapper = ["-mapper", SLEEPER, "-reducer", "NONE"];
    let combiner = ["-mapper", "cat", "-combiner", SLEEPER, "-reducer", "cat"];
    for (name, job) in [("mapper", &mapper[..]), ("combiner", &combiner[..])] {
        killed_command_ends(&c, d.path(), name, job);
    }
}

/// Runs Streaming `job` on `c`, kills it once its sleeper wrote its pid,
/// and checks that the sleeper is gone and nothing was committed.
fn killed_command_ends(c: &Cluster, d: &Path, name: &str, job: &[&str]) {
    let pidfile = d.join(format!("{name}.pid"));
    let output = format!("counts-{name}");
    let run = sluice()
        .arg("streaming")
        .args(["-D", &format!("probe.pidfile={}", pidfile.display())])
        .args(["-input", "words", "-output", &output])
        .args(job)
        .arg("--cluster")
        .arg(&c.dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid: i32 = poll(|| std::fs::read_to_string(&pidfile).ok()?.trim().parse().ok());
    assert!(!gone(pid));
    let jobs =
        || String::from_utf8_lossy(&ok(c.cmd(&["jobs"]).output().unwrap()).stdout).into_owned();
    let id: String = poll(|| {
        let l = jobs();
        let line = l.lines().find(|l| l.contains(" running "))?;
        Some(line.split_whitespace().next()?.to_owned())
    });
    ok(c.cmd(&["kill", &id]).output().unwrap());
    let out = run.wait_with_output().unwrap();
    assert!(!out.status.success(), "{name}: the job was killed");
    // A generous bound: the command would otherwise sleep for ten minutes.
    let ended = (0..400).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        gone(pid)
    });
    if !ended {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(ended, "the killed job's {name} command {pid} runs on");
    let ls = String::from_utf8_lossy(&ok(c.cmd(&["ls"]).output().unwrap()).stdout).into_owned();
    assert!(!ls.contains(&output), "{name}: nothing committed: {ls}");
}

/// The local user each line of a job's output names (`user\tNAME`), run
/// on `c` as `key`'s user (an admin without one) with `extra` flags.
fn job_runs_as(c: &Cluster, d: &Path, out: &str, key: Option<&Path>, extra: &[&str]) -> String {
    let script = d.join("who.sh");
    std::fs::write(
        &script,
        "cat >/dev/null\nprintf 'user\\t%s\\n' \"$(id -un)\"\n",
    )
    .unwrap();
    let mut cmd = c.cmd(&["streaming", "-input", "words", "-output", out]);
    cmd.args(extra)
        .args([
            "-mapper",
            "sh who.sh",
            "-reducer",
            "sort -u",
            "-numReduceTasks",
            "1",
            "-file",
        ])
        .arg(&script);
    if let Some(k) = key {
        cmd.arg("--user-key").arg(k);
    }
    let o = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    if !o.status.success() {
        return format!("failed: {err}");
    }
    let got = d.join(out);
    let mut get = c.cmd(&["get", out]);
    get.arg(&got);
    if let Some(k) = key {
        get.arg("--user-key").arg(k);
    }
    ok(get.output().unwrap());
    let bytes = match got.is_dir() {
        true => concat_parts(&got),
        false => std::fs::read(&got).unwrap(),
    };
    String::from_utf8(bytes).unwrap().trim().to_owned()
}

#[test]
fn a_map_of_task_users_runs_each_jobs_commands_as_its_users_local_user() {
    if !can_change_users() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = gen(d.path(), "20KB");
    let map = format!("alice={TASK_USER},*=nobody");
    let c = Cluster::up_args(
        &open_dir(d.path(), "mapped"),
        1,
        "",
        "",
        &["--task-user", &map],
    );
    put(&c, &data, "words", "64KB", "1");
    ok(c.cmd(&["user", "add", "alice"]).output().unwrap());
    ok(c.cmd(&["share", "words", "alice"]).output().unwrap());
    let alice = c.dir.join("users/alice.key");
    assert_eq!(
        job_runs_as(&c, d.path(), "as-alice", Some(&alice), &[]),
        format!("user\t{TASK_USER}")
    );
    assert_eq!(
        job_runs_as(&c, d.path(), "as-admin", None, &[]),
        "user\tnobody"
    );
    // A request naming another user changes nothing: the coordinator
    // sets the job's user from the caller it authenticated.
    let spoof = ["-D", "mapreduce.job.user.name=alice"];
    assert_eq!(
        job_runs_as(&c, d.path(), "spoofed", None, &spoof),
        "user\tnobody"
    );
    drop(c);

    // Without `*`, the jobs of users the map does not name are refused.
    let only = format!("alice={TASK_USER}");
    let c = Cluster::up_args(
        &open_dir(d.path(), "only"),
        1,
        "",
        "",
        &["--task-user", &only],
    );
    put(&c, &data, "words", "64KB", "1");
    let refused = job_runs_as(&c, d.path(), "never", None, &[]);
    assert!(
        refused.contains("no local user for the jobs of an admin"),
        "{refused}"
    );
}
