//! Workers and clients given several coordinators (`--coordinator A,B`)
//! follow the one that answers: past an address nothing listens on, past
//! a coordinator that accepts connections and never answers (a stopped
//! process), and on to the next when the one they followed stops. A bad
//! list is refused, naming it. `cluster status` prints a line for each
//! coordinator of cluster.json, and `cluster down` stops them all.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// A loopback address nothing listens on.
fn dead_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// A coordinator that accepts connections and never answers, as a
/// stopped one does (the kernel accepts them for it).
fn black_hole() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    (l, addr)
}

/// The cluster's coordinator address.
fn coordinator(c: &Cluster) -> String {
    c.json()["coordinator"].as_str().unwrap().to_owned()
}

/// `sluice ARGS --coordinator LIST --secret-file` the cluster's secret.
fn at(c: &Cluster, list: &str, args: &[&str]) -> std::process::Command {
    let mut cmd = sluice();
    cmd.args(args)
        .args(["--coordinator", list, "--secret-file"])
        .arg(c.dir.join("secret"))
        .arg("--tls-dir")
        .arg(c.dir.join("tls"));
    cmd
}

/// A worker given `list`, its data in the cluster's `extra-K`.
fn worker(c: &Cluster, list: &str, k: usize) -> Killed {
    let log = std::fs::File::create(c.dir.join(format!("extra-{k}.log"))).unwrap();
    Killed(
        sluice()
            .args(["worker", "--coordinator", list, "--data-dir"])
            .arg(c.dir.join(format!("extra-{k}")))
            .args(tls_flags(c, &format!("extra-{k}"), "worker"))
            .args(["--slots", "1", "--memory", "512MiB", "--cache-size", "0"])
            .arg("--secret-file")
            .arg(c.dir.join("secret"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

/// Live workers the coordinator at `addr` counts.
fn alive_at(c: &Cluster, addr: &str) -> usize {
    let out = at(c, addr, &["cluster", "status"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.ends_with("alive"))
        .count()
}

/// Word count of data set `words` into `counts`, submitted to `list`.
fn submit_to(c: &Cluster, list: &str) -> std::process::Command {
    let mut cmd = sluice();
    cmd.args(["submit", "--coordinator", list, "--secret-file"])
        .arg(c.dir.join("secret"))
        .arg("--tls-dir")
        .arg(c.dir.join("tls"))
        .args(WC)
        .args(["--input", "words", "--output", "counts"]);
    cmd
}

/// `child`'s output once it ends, failing the test past `limit`.
fn wait_within(mut child: Child, limit: Duration) -> Output {
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// The cluster's `counts`, got through `list`, equal the local engine's
/// word count of `data`.
fn counts_right(c: &Cluster, list: &str, dir: &Path, data: &Path) {
    let out = dir.join("cluster-out");
    ok(at(c, list, &["get", "counts"]).arg(&out).output().unwrap());
    same_dirs(&out, &local(dir, data, WC));
}

#[test]
fn a_worker_and_clients_given_a_dead_and_a_silent_coordinator_first_use_the_live_one() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "2MB");
    let c = Cluster::up(d.path(), 0, "--heartbeat-ms 100");
    let (_hole, hole) = black_hole();
    let list = format!("{},{hole},{}", dead_addr(), coordinator(&c));
    let _w = worker(&c, &list, 0);
    poll(|| (alive_at(&c, &coordinator(&c)) == 1).then_some(()));
    ok(at(&c, &list, &["put"])
        .arg(&data)
        .args(["--dataset", "words", "--block-size", "512KB"])
        .output()
        .unwrap());
    let ls = ok(at(&c, &list, &["ls"]).output().unwrap());
    assert!(String::from_utf8_lossy(&ls.stdout).contains("words"));
    let job = submit_to(&c, &list)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = ok(wait_within(job, Duration::from_secs(120)));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("== wordcount"), "{said}");
    counts_right(&c, &list, d.path(), &data);
    ok(at(&c, &list, &["jobs"]).output().unwrap());
}

#[test]
fn a_bad_coordinator_list_is_refused_naming_it() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("secret"), "0123456789abcdef0123").unwrap();
    let secret = d.path().join("secret");
    let e = fails(
        sluice()
            .args([
                "ls",
                "--coordinator",
                "127.0.0.1:1,,127.0.0.1:2",
                "--insecure",
                "--secret-file",
            ])
            .arg(&secret)
            .output()
            .unwrap(),
    );
    assert!(e.contains("bad coordinator list"), "{e}");
    let e = fails(
        sluice()
            .args(["worker", "--insecure", "--coordinator", "127.0.0.1:1,"])
            .arg("--data-dir")
            .arg(d.path().join("w"))
            .args(["--memory", "512MiB", "--cache-size", "0", "--secret-file"])
            .arg(&secret)
            .output()
            .unwrap(),
    );
    assert!(e.contains("bad coordinator list"), "{e}");
}

/// The coordinator command line `argv` moved to `listen`, its web pages
/// on any free port, its address files in `dir`.
fn moved(argv: &[String], listen: &str, dir: &Path) -> Vec<String> {
    let mut out = argv.to_vec();
    let file = |name: &str| dir.join(name).display().to_string();
    for i in 0..out.len().saturating_sub(1) {
        let value = match out[i].as_str() {
            "--listen" => listen.to_owned(),
            "--http" => "127.0.0.1:0".to_owned(),
            "--addr-file" => file("b.addr"),
            "--http-addr-file" => file("b-http.addr"),
            _ => continue,
        };
        out[i + 1] = value;
    }
    out
}

#[test]
fn workers_and_a_waiting_client_leave_a_stopped_coordinator_for_the_next() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "12MB");
    // Reduces start with the first map done, and wait for the others.
    let flags = "--heartbeat-ms 100 --worker-timeout-ms 3000 --slowstart 0.05";
    let c = Cluster::unsupervised(d.path(), 0, flags);
    let a = coordinator(&c);
    let b = dead_addr();
    let list = format!("{a},{b}");
    let workers = [worker(&c, &list, 0), worker(&c, &list, 1)];
    poll(|| (alive_at(&c, &a) == 2).then_some(()));
    ok(at(&c, &list, &["put"])
        .arg(&data)
        .args(["--dataset", "words", "--block-size", "1MB"])
        .output()
        .unwrap());
    let report = d.path().join("report.json");
    let job = submit_to(&c, &list)
        .arg("--report")
        .arg(&report)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Mid-map, with reduces running: some maps done, not all.
    poll(|| {
        let jobs = at(&c, &a, &["jobs"]).output().ok()?;
        let jobs = String::from_utf8_lossy(&jobs.stdout).into_owned();
        let number = |after: &str, end: char| -> Option<u32> {
            jobs.split(after).nth(1)?.split(end).next()?.parse().ok()
        };
        let (done, reducing) = (number("maps ", '/')?, number(" map and ", ' ')?);
        ((1..12).contains(&done) && reducing > 0).then_some(())
    });
    assert!(workers.iter().all(|w| !ended(w.0.id())));

    // A stops (its sockets still accept); B takes its state over, as a
    // standby would.
    let pid_a = c.coordinator_pid();
    let argv = argv_of(pid_a);
    signal(pid_a, "STOP");
    let stopped = Instant::now();
    let argv_b = moved(&argv, &b, d.path());
    let _b = Killed(
        std::process::Command::new(&argv_b[0])
            .args(&argv_b[1..])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The workers move to B, well before the 15 minutes they would wait
    // for A.
    poll(|| (alive_at(&c, &b) == 2).then_some(()));
    let moved_in = stopped.elapsed();
    let out = ok(wait_within(job, Duration::from_secs(120)));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("== wordcount"), "{said}");
    counts_right(&c, &list, d.path(), &data);
    let jobs = ok(at(&c, &b, &["jobs"]).output().unwrap());
    let jobs = String::from_utf8_lossy(&jobs.stdout).into_owned();
    assert_eq!(jobs.matches("succeeded").count(), 1, "{jobs}\n{said}");
    no_task_ran_again(&read_json(&report));
    signal(pid_a, "KILL");
    eprintln!("workers followed coordinator B {moved_in:?} after A stopped");
}

/// Whether process `pid` has ended (gone, or a zombie).
fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        let state = s.rsplit(')').next().unwrap_or("");
        state.trim_start().starts_with('Z')
    })
}

/// Every task of the report ran one attempt: 12 maps and 3 reduces.
fn no_task_ran_again(r: &serde_json::Value) {
    let spans = r["cluster"]["timeline"].as_array().expect("a timeline");
    let tasks: Vec<&str> = (spans.iter()).filter_map(|s| s["task"].as_str()).collect();
    let mut once = tasks.clone();
    once.sort_unstable();
    once.dedup();
    assert_eq!(once.len(), tasks.len(), "a task ran again: {tasks:?}");
    let maps = tasks.iter().filter(|t| t.starts_with('m')).count();
    assert_eq!((maps, tasks.len()), (12, 15), "{spans:?}");
}

/// A coordinator as cluster.json lists it: address, web pages, pid.
type Listed = (String, serde_json::Value, u32);

/// `c`'s own coordinator, listed.
fn own(c: &Cluster) -> Listed {
    (
        coordinator(c),
        c.json()["http"].clone(),
        c.coordinator_pid(),
    )
}

/// cluster.json of `c` listing `all` as its coordinators, as a cluster of
/// several has them.
fn list_coordinators(c: &Cluster, all: &[Listed]) {
    let mut j = c.json();
    let entries = (all.iter().enumerate())
        .map(|(k, (addr, http, pid))| {
            let home: PathBuf = c.dir.join(format!("coordinator-{}", k + 1));
            serde_json::json!({
                "addr": addr, "http": http, "pid": pid, "supervisor_pid": null,
                "state_dir": home, "home": home,
            })
        })
        .collect();
    j["coordinators"] = serde_json::Value::Array(entries);
    std::fs::write(
        c.dir.join("cluster.json"),
        serde_json::to_vec_pretty(&j).unwrap(),
    )
    .unwrap();
}

#[test]
fn cluster_status_prints_each_coordinator_active_standby_or_down_and_down_stops_them() {
    let d = tempfile::tempdir().unwrap();
    let c = Cluster::unsupervised(d.path(), 1, "");
    // A standby: a process that runs and does not answer.
    let (_hole, hole) = black_hole();
    let standby = Killed(
        std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .unwrap(),
    );
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let down_pid = gone.id();
    let nowhere = serde_json::json!(dead_addr());
    let standby_entry: Listed = (hole.clone(), nowhere.clone(), standby.0.id());
    list_coordinators(
        &c,
        &[
            own(&c),
            standby_entry.clone(),
            (dead_addr(), nowhere, down_pid),
        ],
    );
    let out = ok(c.cmd(&["cluster", "status"]).output().unwrap());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    let a = coordinator(&c);
    assert_eq!(
        lines[0],
        format!("coordinator 1 {a} pid {} active", c.coordinator_pid()),
        "{text}"
    );
    assert_eq!(
        lines[1],
        format!("coordinator 2 {hole} pid {} standby", standby.0.id()),
        "{text}"
    );
    assert!(
        lines[2].starts_with("coordinator 3 ") && lines[2].ends_with(" down"),
        "{text}"
    );
    assert!(text.contains("epoch "), "{text}");
    assert!(text.contains("alive"), "{text}");
    // `--dir` names the cluster as for `cluster up` and `down`.
    let by_dir = sluice()
        .args(["cluster", "status", "--dir"])
        .arg(&c.dir)
        .output()
        .unwrap();
    let by_dir = String::from_utf8_lossy(&ok(by_dir).stdout).into_owned();
    assert_eq!(
        by_dir.lines().take(3).collect::<Vec<_>>(),
        lines[..3],
        "{by_dir}"
    );
    // `web` names the active coordinator's pages, wherever it is listed.
    let listed = c.json()["coordinators"].clone();
    list_coordinators(&c, &[standby_entry, own(&c)]);
    let web = ok(c.cmd(&["web"]).output().unwrap());
    let http = c.json()["http"].as_str().unwrap().to_owned();
    let url = String::from_utf8_lossy(&web.stdout).into_owned();
    assert!(url.starts_with(&format!("https://{http}/")), "{url}");
    let mut j = c.json();
    j["coordinators"] = listed;
    std::fs::write(c.dir.join("cluster.json"), j.to_string()).unwrap();
    // `down` stops every coordinator listed.
    let pid_a = c.coordinator_pid();
    ok(sluice()
        .args(["cluster", "down", "--dir"])
        .arg(&c.dir)
        .output()
        .unwrap());
    assert!(ended(pid_a));
    assert!(ended(standby.0.id()), "the standby outlived cluster down");
}

#[test]
fn cluster_up_refuses_several_coordinators_without_etcd() {
    let d = tempfile::tempdir().unwrap();
    let e = fails(
        sluice()
            .args(["cluster", "up", "--coordinators", "2", "--dir"])
            .arg(d.path().join("c"))
            .output()
            .unwrap(),
    );
    assert!(e.contains("--coordinators 2 needs --etcd"), "{e}");
    assert!(!d.path().join("c").exists());
    let e = fails(
        sluice()
            .args(["cluster", "up", "--coordinators", "0", "--dir"])
            .arg(d.path().join("c"))
            .output()
            .unwrap(),
    );
    assert!(e.contains("--coordinators"), "{e}");
}

#[test]
fn a_submit_that_met_an_outage_waits_for_workers_to_register_again() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "1MB");
    let c = Cluster::unsupervised(d.path(), 1, "--heartbeat-ms 100");
    put(&c, &data, "words", "256KB", "1");
    let pid = c.coordinator_pid();
    let argv = argv_of(pid);
    signal(pid, "KILL");
    poll(|| ended(pid).then_some(()));
    // The worker cannot register with the coordinator started again
    // until it continues.
    let worker = c.worker_pids()[0];
    signal(worker, "STOP");
    let job = submit_wc(&c, "words", "counts")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let _again = Killed(
        std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The coordinator answers with no live worker: the submit, which met
    // the outage, is refused "no live workers" and asks again.
    poll(|| {
        let status = ["cluster", "status", "--wait-coordinator", "0"];
        let out = c.cmd(&status).output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.success() && !text.contains("alive")).then_some(())
    });
    std::thread::sleep(Duration::from_secs(3));
    signal(worker, "CONT");
    let out = ok(wait_within(job, Duration::from_secs(120)));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("coordinator restarting; waiting..."),
        "{said}"
    );
    counts_match_local(&c, d.path(), &data);
}
