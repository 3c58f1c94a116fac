//! Helpers shared by the modules: the `sluice` binary under test, a
//! `sluice cluster up` cluster, data, the local engine's answers, polling.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `sluice` binary under test.
pub fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

/// Asserts the command succeeded, showing its output if not.
pub fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "sluice failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The project's Python, with DuckDB, numpy, networkx, scipy and moto (the
/// oracles and the S3 server): `SLUICE_PYTHON` (scripts/test.sh sets it)
/// or the workspace's `.venv`.
pub fn python() -> PathBuf {
    std::env::var_os("SLUICE_PYTHON").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python"),
        PathBuf::from,
    )
}

/// Whether this process runs as root, by its effective user id (root may
/// mount a tmpfs and lock any amount of memory).
pub fn root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .is_some_and(|u| u.split_whitespace().nth(1) == Some("0"))
}

/// A cluster from `sluice cluster up`, stopped when dropped.
pub struct Cluster {
    pub dir: PathBuf,
}

impl Cluster {
    /// The coordinator's pid, as `cluster.json` names it.
    pub fn coordinator_pid(&self) -> u32 {
        self.json()["coordinator_pid"].as_u64().unwrap() as u32
    }

    pub fn up(dir: &Path, workers: u32, flags: &str) -> Self {
        Self::up_with(dir, workers, flags, "")
    }

    /// With extra flags for the coordinator and for every worker.
    pub fn up_with(dir: &Path, workers: u32, flags: &str, worker_flags: &str) -> Self {
        Self::up_args(dir, workers, flags, worker_flags, &[])
    }

    /// Its coordinator unsupervised (`--no-supervise`): a test that kills
    /// it starts it again itself.
    pub fn unsupervised(dir: &Path, workers: u32, flags: &str) -> Self {
        Self::up_args(dir, workers, flags, "", &["--no-supervise"])
    }

    /// With extra `cluster up` arguments.
    pub fn up_args(dir: &Path, workers: u32, flags: &str, worker_flags: &str, up: &[&str]) -> Self {
        let dir = dir.join("cluster");
        ok(sluice()
            .args([
                "cluster",
                "up",
                "--workers",
                &workers.to_string(),
                "--slots",
                "1",
            ])
            .args(["--coordinator-flags", flags])
            .args(["--worker-flags", worker_flags])
            .args(up)
            .arg("--dir")
            .arg(&dir)
            .output()
            .unwrap());
        Cluster { dir }
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = sluice();
        c.args(args).arg("--cluster").arg(&self.dir);
        c
    }

    pub fn submit(&self, args: &[&str]) -> Command {
        let mut c = sluice();
        c.arg("submit").arg("--cluster").arg(&self.dir).args(args);
        c
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(self.dir.join("cluster.json")).unwrap()).unwrap()
    }

    pub fn data_dirs(&self) -> Vec<PathBuf> {
        self.json()["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| PathBuf::from(w["data_dir"].as_str().unwrap()))
            .collect()
    }

    pub fn worker_pids(&self) -> Vec<u32> {
        self.json()["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["pid"].as_u64().unwrap() as u32)
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = sluice()
            .args(["cluster", "down", "--dir"])
            .arg(&self.dir)
            .output();
    }
}

pub fn signal(pid: u32, sig: &str) {
    Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
}

pub fn gen(dir: &Path, size: &str) -> PathBuf {
    let data = dir.join("text");
    ok(sluice()
        .args(["gen", "text", "--size", size, "--seed", "5", "--out"])
        .arg(&data)
        .output()
        .unwrap());
    data
}

/// The local engine's output for the same job.
pub fn local(dir: &Path, input: &Path, job: &[&str]) -> PathBuf {
    let out = dir.join("local");
    ok(sluice()
        .arg("run")
        .args(job)
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(&out)
        .arg("-q")
        .output()
        .unwrap());
    std::fs::remove_file(out.join("_SUCCESS")).unwrap();
    out
}

/// The first `bytes` of `src` gzipped into `dst` (a gzip input file).
pub fn gzip_head(src: &Path, dst: &Path, bytes: u64) {
    ok(Command::new("sh")
        .arg("-c")
        .arg(format!(
            "head -c {bytes} {} | gzip > {}",
            src.display(),
            dst.display()
        ))
        .output()
        .unwrap());
}

/// `rows` TeraSort records generated into `dir/tera`, and the local
/// engine's `terasort --reducers 3` of them in `dir/sorted-local`.
pub fn tera_sorted_locally(dir: &Path, rows: u32) -> (PathBuf, PathBuf) {
    let tera = dir.join("tera");
    ok(sluice()
        .args(["gen", "tera", "--rows", &rows.to_string(), "--out"])
        .arg(&tera)
        .output()
        .unwrap());
    let sorted = dir.join("sorted-local");
    ok(sluice()
        .args(TERASORT)
        .arg("--input")
        .arg(&tera)
        .arg("--output")
        .arg(&sorted)
        .output()
        .unwrap());
    (tera, sorted)
}

/// The TeraSort run of [`tera_sorted_locally`], before its paths.
pub const TERASORT: [&str; 5] = ["run", "terasort", "-q", "--reducers", "3"];

/// Asserts two directories hold the same files with the same bytes.
pub fn same_dirs(a: &Path, b: &Path) {
    let names = |d: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(a), names(b));
    for n in names(a) {
        assert!(
            std::fs::read(a.join(&n)).unwrap() == std::fs::read(b.join(&n)).unwrap(),
            "{n} differs"
        );
    }
}

pub fn put(c: &Cluster, data: &Path, name: &str, block: &str, repl: &str) {
    ok(c.cmd(&["put"])
        .arg(data)
        .args([
            "--dataset",
            name,
            "--block-size",
            block,
            "--replication",
            repl,
        ])
        .output()
        .unwrap());
}

pub fn get(c: &Cluster, name: &str, out: &Path) {
    ok(c.cmd(&["get", name]).arg(out).output().unwrap());
}

pub const WC: &[&str] = &["wordcount", "--reducers", "3"];

pub fn submit_wc(c: &Cluster, input: &str, output: &str) -> Command {
    let mut cmd = c.submit(WC);
    cmd.args(["--input", input, "--output", output]);
    cmd
}

/// Starts word count in the background; returns it and its report path.
pub fn spawn_wc(c: &Cluster, dir: &Path) -> (Child, PathBuf) {
    let report = dir.join("report.json");
    let job = submit_wc(c, "words", "counts")
        .arg("--report")
        .arg(&report)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    (job, report)
}

/// A cluster of `workers` running word count over `size` of text put with
/// 1 MB blocks and `replication`: its directory, data, cluster, the
/// running `submit` and where its report will be.
pub fn running_wc(
    size: &str,
    workers: u32,
    flags: &str,
    replication: &str,
) -> (tempfile::TempDir, PathBuf, Cluster, Child, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), size);
    let c = Cluster::up(d.path(), workers, flags);
    put(&c, &data, "words", "1MB", replication);
    let (job, report) = spawn_wc(&c, d.path());
    (d, data, c, job, report)
}

/// The cluster's `counts` equal the local engine's word count of `data`.
pub fn counts_match_local(c: &Cluster, dir: &Path, data: &Path) {
    get(c, "counts", &dir.join("cluster-out"));
    same_dirs(&dir.join("cluster-out"), &local(dir, data, WC));
}

/// The block files (not checksum files) in a worker's data directory.
pub fn block_files(data_dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data_dir.join("blocks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            !n.ends_with(".meta") && !n.starts_with('.')
        })
        .collect();
    v.sort();
    v
}

/// The JSON file at `path`: a report, results, a profile.
pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Polls `f` every 2 ms for up to 30 s.
pub fn poll<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let t = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "timed out polling");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until the coordinator counts `n` workers lost (a worker that
/// comes back registers anew; its old entry stays lost).
pub fn wait_until_lost(c: &Cluster, n: usize) {
    poll(|| {
        let s = ok(c.cmd(&["cluster", "status"]).output().unwrap());
        let lost = String::from_utf8_lossy(&s.stdout)
            .lines()
            .filter(|l| l.ends_with("lost"))
            .count();
        (lost >= n).then_some(())
    });
}

/// Asserts the command failed; returns what it said on stderr.
pub fn fails(out: Output) -> String {
    assert!(
        !out.status.success(),
        "sluice succeeded where it should fail: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The part files of `dir`, in name order.
pub fn part_files(dir: &Path) -> Vec<PathBuf> {
    let mut parts: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("part-")
        })
        .collect();
    parts.sort();
    parts
}

/// The part files of `dir` by name with their bytes, in name order.
pub fn named_parts(dir: &Path) -> Vec<(String, Vec<u8>)> {
    part_files(dir)
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

/// A Streaming mapper in Python: `word<TAB>1` for every word.
pub const MAP_PY: &str = r#"import sys
for line in sys.stdin:
    for w in line.split():
        print(f"{w}\t1")
"#;

/// A Streaming reducer in Python: the sum of each run of equal keys.
pub const REDUCE_PY: &str = r#"import sys
cur, n = None, 0
for line in sys.stdin:
    k, v = line.rstrip("\n").split("\t", 1)
    if k != cur:
        if cur is not None:
            print(f"{cur}\t{n}")
        cur, n = k, 0
    n += int(v)
if cur is not None:
    print(f"{cur}\t{n}")
"#;

/// The part files of `dir` concatenated in name order.
pub fn concat_parts(dir: &Path) -> Vec<u8> {
    part_files(dir)
        .iter()
        .flat_map(|p| std::fs::read(p).unwrap())
        .collect()
}

/// The command line of process `pid`, to start it again.
pub fn argv_of(pid: u32) -> Vec<String> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// A process killed when dropped, however the test ends.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether the worker process `pid` runs a task now.
pub fn running_a_task(pid: u32) -> bool {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    threads.filter_map(Result::ok).any(|t| {
        std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("task-"))
    })
}

/// Starts the coordinator again from its command line `argv` (same
/// address and state directory) and waits until `workers` are alive in
/// it; it is stopped when the returned value is dropped.
pub fn restart_coordinator(c: &Cluster, argv: &[String], workers: usize) -> Killed {
    let again = Killed(
        Command::new(&argv[0])
            .args(&argv[1..])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    poll(|| {
        let s = c.cmd(&["cluster", "status"]).output().ok()?;
        (String::from_utf8_lossy(&s.stdout).matches("alive").count() == workers).then_some(())
    });
    again
}

/// The project directory `rel` (from the repository's root) built by
/// Maven, one build at a time, unless `jar` (under its `target/`) is
/// there already (scripts/test.sh builds them before the tests; this
/// covers a lone `cargo test`). The classpath of its jar and
/// dependencies.
pub fn maven_classpath(rel: &str, jar: &str) -> String {
    use std::sync::Mutex;
    static LOCK: Mutex<()> = Mutex::new(());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    let _one = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !dir.join("target").join(jar).exists() {
        ok(Command::new("mvn")
            .args(["-q", "-B", "package", "-DskipTests", "-f"])
            .arg(dir.join("pom.xml"))
            .output()
            .expect("running mvn (Maven)"));
    }
    format!(
        "{}:{}/*",
        dir.join("target").join(jar).display(),
        dir.join("target/lib").display()
    )
}

/// The TLS of a `cluster up` cluster's clients (CLUSTER/tls/client.*),
/// trusting its CA.
pub fn client_tls(c: &Cluster) -> sluice_proto::tls::Tls {
    let files = sluice_proto::tls::Files::in_dir(&c.dir.join("tls"), "client");
    sluice_proto::tls::Tls::load(&files).unwrap()
}

/// The flags that give a process started by hand a certificate of the
/// cluster's CA with `role`, issued as CLUSTER/tls/NAME.{pem,key} unless
/// there is one.
pub fn tls_flags(c: &Cluster, name: &str, role: &str) -> Vec<String> {
    tls_flags_in(&c.dir, name, role)
}

/// Like [`tls_flags`] for processes started by hand with no `cluster
/// up`: the CA is made in DIR/tls the first time.
pub fn tls_flags_in(dir: &Path, name: &str, role: &str) -> Vec<String> {
    let tls = dir.join("tls");
    if !tls.join("ca.pem").exists() {
        ok(sluice()
            .args(["ca", "init", "--dir"])
            .arg(&tls)
            .output()
            .unwrap());
    }
    if !tls.join(format!("{name}.pem")).exists() {
        ok(sluice()
            .args([
                "ca",
                "issue",
                "--host",
                "127.0.0.1,localhost",
                "--role",
                role,
            ])
            .arg("--ca")
            .arg(&tls)
            .arg("--out")
            .arg(tls.join(name))
            .output()
            .unwrap());
    }
    vec![
        "--tls-dir".into(),
        tls.to_string_lossy().into_owned(),
        "--tls-name".into(),
        name.into(),
    ]
}

/// Word count of `input` on the local engine (2 threads, 1 reducer, and
/// `extra` flags) into `dir/NAME`: the output and the report.
pub fn wordcount(
    dir: &Path,
    name: &str,
    input: &Path,
    extra: &[&str],
) -> (Vec<u8>, serde_json::Value) {
    let out = dir.join(name);
    let report = dir.join(format!("{name}.json"));
    let flags = [
        "run",
        "wordcount",
        "-q",
        "--threads",
        "2",
        "--reducers",
        "1",
    ];
    ok(sluice()
        .args(flags)
        .args(extra)
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(&out)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap());
    (concat_parts(&out), read_json(&report))
}

/// The lines of the part files in `out`, sorted, with a tab-separated
/// floating-point value rounded to six places (sums may differ in their
/// last bits between runs and formats).
pub fn rounded_lines(out: &Path) -> Vec<String> {
    let text = String::from_utf8(concat_parts(out)).unwrap();
    let mut lines: Vec<String> = text
        .lines()
        .map(
            |l| match l.split_once('\t').map(|(k, v)| (k, v.parse::<f64>())) {
                Some((k, Ok(v))) => format!("{k}\t{v:.6}"),
                _ => l.to_owned(),
            },
        )
        .collect();
    lines.sort();
    lines
}
