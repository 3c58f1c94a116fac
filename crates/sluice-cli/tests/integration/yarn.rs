//! Sluice on YARN against Hadoop's MiniYARNCluster and MiniDFSCluster
//! (`tests/miniyarn`, hadoop-minicluster 3.4.1, bound to 127.0.0.1), one
//! mini cluster shared by the tests, which take turns on it: `sluice yarn
//! up` brings a cluster up whose word count from `hdfs://` to `hdfs://`
//! equals the local answer and `down` ends it SUCCEEDED with no container
//! and no Sluice process left; an application killed from YARN leaves no
//! Sluice process; a lost worker container is replaced and the next job
//! succeeds; bad input (no `HADOOP_CONF_DIR`, a ResourceManager that is
//! not there, an unknown queue, a worker larger than the cluster's or its
//! queue's maximum allocation) is a clear error that leaves nothing
//! behind; the cluster speaks TLS with certificates issued for its
//! containers' hosts, and refuses a client without one of its CA.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::support::*;

/// The shared mini cluster.
struct Yarn {
    _child: Child,
    stdin: Mutex<ChildStdin>,
    stdout: Mutex<BufReader<ChildStdout>>,
    /// Its HADOOP_CONF_DIR.
    conf: PathBuf,
    /// `http://127.0.0.1:PORT`, the ResourceManager's web address.
    rm: String,
    /// `hdfs://127.0.0.1:PORT`.
    fs: String,
    /// WebHDFS.
    webhdfs: String,
    _dir: tempfile::TempDir,
}

/// The mini cluster, started by the first test that asks; it ends with
/// the test process (end of its standard input).
fn yarn() -> &'static Yarn {
    static YARN: OnceLock<Yarn> = OnceLock::new();
    YARN.get_or_init(|| start(&[]))
}

/// A mini cluster of its own (launcher flags `flags`), which ends when
/// it is dropped (end of its standard input).
fn start(flags: &[&str]) -> Yarn {
    let cp = maven_classpath("tests/miniyarn", "miniyarn-1.0.jar");
    // The AM's jar, built as scripts/test.sh builds it.
    maven_classpath("yarn", "sluice-yarn-am.jar");
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("java");
    for p in [
        "lang",
        "lang.reflect",
        "util",
        "util.concurrent",
        "io",
        "net",
    ] {
        cmd.arg(format!("--add-opens=java.base/java.{p}=ALL-UNNAMED"));
    }
    let mut child = cmd
        .args(["-cp", &cp, "sluice.miniyarn.MiniYarn"])
        .arg(dir.path())
        .args(flags)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting java for the MiniYARNCluster");
    let stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let w: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(w.len(), 4, "the MiniYARNCluster did not start: {line:?}");
    Yarn {
        conf: w[0].into(),
        rm: w[1].into(),
        fs: w[2].into(),
        webhdfs: w[3].into(),
        _child: child,
        stdin: Mutex::new(stdin),
        stdout: Mutex::new(stdout),
        _dir: dir,
    }
}

/// One test at a time on the mini cluster (two cores: a bring-up at a
/// time keeps each one's waits short).
fn turn() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

impl Yarn {
    /// Sends a launcher command; returns what follows `ok`.
    fn cmd(&self, line: &str) -> String {
        let mut stdin = self.stdin.lock().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        let mut answer = String::new();
        self.stdout.lock().unwrap().read_line(&mut answer).unwrap();
        let answer = answer.trim_end();
        match answer.strip_prefix("ok") {
            Some(rest) => rest.trim().to_owned(),
            None => panic!("{line}: {answer}"),
        }
    }

    /// `sluice` as a user of this cluster.
    fn sluice(&self) -> Command {
        let mut c = sluice();
        let am = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../yarn/target/sluice-yarn-am.jar");
        c.env("HADOOP_CONF_DIR", &self.conf)
            .env("SLUICE_YARN_AM_JAR", am)
            .env("SLUICE_WEBHDFS", &self.webhdfs);
        c
    }

    /// `sluice yarn up` of `workers` small workers in `dir`; its id.
    fn up(&self, dir: &Path, workers: u32, more: &[&str]) -> String {
        let out = ok(self
            .sluice()
            .args(["yarn", "up", "--workers", &workers.to_string()])
            .args(["--worker-memory", "256MB", "--worker-vcores", "1"])
            .args(more)
            .arg("--dir")
            .arg(dir)
            .output()
            .unwrap());
        let app = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(app.starts_with("application_"), "{app}");
        app
    }

    /// The application's report from the ResourceManager's REST API.
    fn app(&self, app: &str) -> serde_json::Value {
        let body = http(&self.rm, "GET", &format!("/ws/v1/cluster/apps/{app}"), "");
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["app"].clone()
    }

    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.fs)
    }
}

/// A plain HTTP/1.0 request; the answer's body.
fn http(base: &str, method: &str, path: &str, body: &str) -> String {
    let host = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(
        s,
        "{method} {path}?user.name=root HTTP/1.0\r\nHost: {host}\r\nAccept: application/json\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default()
}

/// The coordinator's jobs page of the cluster in `dir`, at the https
/// address `sluice web` prints, trusting the cluster's CA.
fn web_page(y: &Yarn, dir: &Path) -> String {
    let out = ok(y
        .sluice()
        .args(["web", "--cluster"])
        .arg(dir)
        .output()
        .unwrap());
    let url = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let rest = url.strip_prefix("https://").expect(&url);
    let (addr, query) = rest.split_once('/').unwrap();
    let tls = client_tls_in(dir);
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    let mut s = sluice_proto::tls::stream::Conn::client(tcp, addr, Some(&tls)).unwrap();
    write!(
        s,
        "GET /{query} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    // The server may close without TLS's close_notify: what came counts.
    let _ = s.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw).into_owned()
}

/// The TLS of the clients of the cluster in `dir` (DIR/tls/client.*).
fn client_tls_in(dir: &Path) -> sluice_proto::tls::Tls {
    let files = sluice_proto::tls::Files::in_dir(&dir.join("tls"), "client");
    sluice_proto::tls::Tls::load(&files).unwrap()
}

/// The pids of this host's processes whose command line names `app`
/// (the ApplicationMaster, the coordinator and the workers all do:
/// their work directories are under the application's).
fn processes_of(app: &str) -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(app))
        })
        .filter(|&pid| {
            // A zombie has ended.
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit_once(") ")
                    .is_some_and(|(_, r)| !r.starts_with('Z'))
            })
        })
        .collect()
}

/// The Sluice worker processes of `app`.
fn workers_of(app: &str) -> Vec<u32> {
    processes_of(app)
        .into_iter()
        .filter(|&pid| {
            let argv = argv_of(pid);
            argv.len() > 1 && argv[0].ends_with("sluice") && argv[1] == "worker"
        })
        .collect()
}

/// Waits up to `secs` for `f`.
fn within<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "{what} within {secs} s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The application's staging directory, as `yarn.json` names its user.
fn staging_of(dir: &Path, app: &str) -> String {
    let user = read_json(&dir.join("yarn.json"))["user"]
        .as_str()
        .unwrap()
        .to_owned();
    format!("/user/{user}/.sluice/{app}")
}

fn no_process_left(app: &str) {
    within(30, "no Sluice process of the application left", || {
        processes_of(app).is_empty().then_some(())
    });
}

/// A word count on the YARN cluster in `dir` from HDFS `input` to HDFS
/// `output`, compared with `want`.
fn word_count_matches(y: &Yarn, dir: &Path, input: &str, output: &str, want: &Path, got: &Path) {
    ok(y.sluice()
        .args(["submit", "--cluster"])
        .arg(dir)
        .args([
            "wordcount",
            "--reducers",
            "2",
            "-q",
            "--split-size",
            "256KiB",
        ])
        .args(["--input", &y.at(input), "--output", &y.at(output)])
        .output()
        .unwrap());
    y.cmd(&format!("get {output} {}", got.display()));
    assert_eq!(named_parts(got), named_parts(want));
}

#[test]
fn a_yarn_cluster_counts_words_from_hdfs_to_hdfs_and_goes_down_succeeded() {
    let y = yarn();
    let _turn = turn();
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "2MB");
    let want = local(d.path(), &data, &["wordcount", "--reducers", "2"]);
    y.cmd(&format!("put {} /up/in", data.display()));
    let dir = d.path().join("cluster");
    let app = y.up(&dir, 2, &["--name", "wc-test"]);
    let a = y.app(&app);
    assert_eq!(a["applicationType"], "SLUICE", "{a}");
    assert_eq!(a["state"], "RUNNING", "{a}");
    assert_eq!(a["name"], "wc-test", "{a}");
    // The application's tracking URL is its coordinator's web pages,
    // through the ResourceManager's proxy; they are https, with the
    // coordinator's certificate of the cluster's CA.
    assert!(
        a["trackingUrl"]
            .as_str()
            .unwrap()
            .contains(&format!("/proxy/{app}")),
        "{a}"
    );
    let page = web_page(y, &dir);
    assert!(page.contains("<title>Jobs · Sluice</title>"), "{page}");
    // The staging directory holds what the containers were given, for
    // their user alone; the binary and the ApplicationMaster's jar are
    // in the user's cache.
    let staging = staging_of(&dir, &app);
    assert_eq!(y.cmd(&format!("exists {staging}/secret")), "true");
    assert_eq!(y.cmd(&format!("perm {staging}")), "700");
    assert_eq!(y.cmd(&format!("perm {staging}/secret")), "600");
    let cache = staging.replace(&app, "cache");
    let cached = y.cmd(&format!("ls {cache}"));
    assert_eq!(cached.split_whitespace().count(), 2, "{cached}");
    // status: the application, its containers (the ApplicationMaster and
    // two workers) and the workers.
    let s = ok(y
        .sluice()
        .args(["yarn", "status", "--dir"])
        .arg(&dir)
        .output()
        .unwrap());
    let s = String::from_utf8_lossy(&s.stdout).into_owned();
    assert!(s.contains("RUNNING"), "{s}");
    assert!(s.contains("workers: 2 alive of 2"), "{s}");
    // A container YARN gave beyond those asked for is given back.
    within(20, "three containers", || {
        (y.app(&app)["runningContainers"] == 3).then_some(())
    });
    // `cluster down` is not the way to end it, and says so.
    let e = fails(
        y.sluice()
            .args(["cluster", "down", "--dir"])
            .arg(&dir)
            .output()
            .unwrap(),
    );
    assert!(e.contains("runs on YARN: sluice yarn down --dir"), "{e}");
    // cluster.json: the usual commands reach it.
    ok(y.sluice()
        .args(["jobs", "--cluster"])
        .arg(&dir)
        .output()
        .unwrap());
    let web = ok(y
        .sluice()
        .args(["web", "--cluster"])
        .arg(&dir)
        .output()
        .unwrap());
    assert!(String::from_utf8_lossy(&web.stdout).contains("token="));

    word_count_matches(y, &dir, "/up/in", "/up/out", &want, &d.path().join("got"));

    let down = ok(y
        .sluice()
        .args(["yarn", "down", "--dir"])
        .arg(&dir)
        .output()
        .unwrap());
    let line = String::from_utf8_lossy(&down.stdout).into_owned();
    assert_eq!(line.trim(), format!("{app}: FINISHED SUCCEEDED"));
    let a = y.app(&app);
    assert_eq!(a["finalStatus"], "SUCCEEDED", "{a}");
    assert!(a["runningContainers"].as_i64().unwrap() <= 0, "{a}");
    no_process_left(&app);
    assert_eq!(y.cmd(&format!("exists {staging}")), "false");
    assert!(!dir.join("cluster.json").exists());
    // The cache stays, and the next cluster uses it as it is: nothing
    // uploaded again. This one speaks plaintext (--insecure), says so,
    // and its clients do too.
    let out = ok(y
        .sluice()
        .args(["yarn", "up", "--workers", "1", "--insecure"])
        .args(["--worker-memory", "256MB", "--worker-vcores", "1", "--dir"])
        .arg(&dir)
        .output()
        .unwrap());
    let app = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("--insecure: the cluster speaks plaintext"),
        "{said}"
    );
    assert_eq!(read_json(&dir.join("cluster.json"))["insecure"], true);
    assert_eq!(y.cmd(&format!("ls {cache}")), cached);
    ok(y.sluice()
        .args(["ls", "--cluster"])
        .arg(&dir)
        .output()
        .unwrap());
    ok(y.sluice()
        .args(["yarn", "down", "--dir"])
        .arg(&dir)
        .output()
        .unwrap());
    no_process_left(&app);
}

#[test]
fn an_application_killed_from_yarn_leaves_no_sluice_process() {
    let y = yarn();
    let _turn = turn();
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("cluster");
    let app = y.up(&dir, 2, &[]);
    let staging = staging_of(&dir, &app);
    // The ApplicationMaster, the coordinator and two workers.
    assert!(processes_of(&app).len() >= 4, "{:?}", processes_of(&app));
    assert_eq!(workers_of(&app).len(), 2);
    http(
        &y.rm,
        "PUT",
        &format!("/ws/v1/cluster/apps/{app}/state"),
        r#"{"state":"KILLED"}"#,
    );
    no_process_left(&app);
    assert_eq!(y.app(&app)["state"], "KILLED");
    // down after the fact says so and cleans up.
    let down = ok(y
        .sluice()
        .args(["yarn", "down", "--dir"])
        .arg(&dir)
        .output()
        .unwrap());
    assert!(String::from_utf8_lossy(&down.stdout).contains("KILLED"));
    assert_eq!(y.cmd(&format!("exists {staging}")), "false");
}

#[test]
fn a_lost_worker_container_is_replaced_and_the_next_job_succeeds() {
    let y = yarn();
    let _turn = turn();
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "1MB");
    let want = local(d.path(), &data, &["wordcount", "--reducers", "2"]);
    y.cmd(&format!("put {} /lost/in", data.display()));
    let dir = d.path().join("cluster");
    let app = y.up(&dir, 2, &["--max-worker-failures", "1"]);
    let before = workers_of(&app);
    assert_eq!(before.len(), 2);
    // The worker dies as if its node failed: YARN sees its container end.
    signal(before[0], "KILL");
    let replaced = within(60, "a new worker container", || {
        let now = workers_of(&app);
        (now.len() == 2 && !now.contains(&before[0])).then_some(now)
    });
    assert!(replaced.contains(&before[1]));
    within(30, "two live workers", || {
        let s = y
            .sluice()
            .args(["yarn", "status", "--dir"])
            .arg(&dir)
            .output()
            .unwrap();
        String::from_utf8_lossy(&s.stdout)
            .contains("workers: 2 alive")
            .then_some(())
    });
    word_count_matches(
        y,
        &dir,
        "/lost/in",
        "/lost/out",
        &want,
        &d.path().join("got"),
    );
    // One more lost than --max-worker-failures allows ends it FAILED,
    // and nothing of it stays.
    let now = workers_of(&app);
    signal(now[0], "KILL");
    within(60, "the application failed", || {
        (y.app(&app)["state"] == "FINISHED").then_some(())
    });
    let a = y.app(&app);
    assert_eq!(a["finalStatus"], "FAILED", "{a}");
    assert!(
        a["diagnostics"]
            .as_str()
            .unwrap()
            .contains("--max-worker-failures 1"),
        "{a}"
    );
    no_process_left(&app);
    let _ = y
        .sluice()
        .args(["yarn", "down", "--dir"])
        .arg(&dir)
        .output();
}

#[test]
fn bad_input_is_a_clear_error_that_leaves_nothing() {
    let y = yarn();
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("cluster");
    let up = |c: &mut Command, more: &[&str]| {
        c.args(["yarn", "up", "--workers", "1"])
            .args(more)
            .arg("--dir")
            .arg(&dir)
            .output()
            .unwrap()
    };
    // No configuration.
    let mut c = y.sluice();
    c.env_remove("HADOOP_CONF_DIR");
    let e = fails(up(&mut c, &["--worker-memory", "256MB"]));
    assert!(
        e.contains("no Hadoop configuration: set HADOOP_CONF_DIR"),
        "{e}"
    );
    // A ResourceManager that is not there: an error, in seconds.
    let gone = d.path().join("gone-conf");
    std::fs::create_dir_all(&gone).unwrap();
    std::fs::copy(y.conf.join("core-site.xml"), gone.join("core-site.xml")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        gone.join("yarn-site.xml"),
        format!(
            "<configuration><property><name>yarn.resourcemanager.webapp.address</name>\
             <value>127.0.0.1:{port}</value></property></configuration>"
        ),
    )
    .unwrap();
    let t = Instant::now();
    let e = fails(up(
        &mut y.sluice(),
        &[
            "--worker-memory",
            "256MB",
            "--hadoop-conf",
            gone.to_str().unwrap(),
        ],
    ));
    assert!(t.elapsed() < Duration::from_secs(30));
    assert!(
        e.contains(&format!("the ResourceManager at http://127.0.0.1:{port}")),
        "{e}"
    );
    // An unknown queue: YARN's reason, and its staging directory gone.
    let e = fails(up(
        &mut y.sluice(),
        &["--worker-memory", "256MB", "--queue", "nosuch"],
    ));
    assert!(e.contains("unknown queue: nosuch"), "{e}");
    let app = e
        .split_whitespace()
        .find(|w| w.starts_with("application_"))
        .unwrap()
        .trim_end_matches(':');
    let user = std::process::Command::new("id")
        .arg("-un")
        .output()
        .unwrap();
    let user = String::from_utf8_lossy(&user.stdout).trim().to_owned();
    assert_eq!(
        y.cmd(&format!("exists /user/{user}/.sluice/{app}")),
        "false"
    );
    // A worker larger than the maximum allocation: the maximum named.
    let e = fails(up(&mut y.sluice(), &["--worker-memory", "8GB"]));
    assert!(
        e.contains("larger than the cluster's maximum allocation of 4096 MB"),
        "{e}"
    );
    // A worker within the cluster's maximum but larger than its queue's
    // (the launcher's `small` queue: 2048 MB, 2 vcores): the queue's
    // maximum named, before anything is submitted.
    let e = fails(up(
        &mut y.sluice(),
        &["--worker-memory", "2GB", "--queue", "small"],
    ));
    assert!(
        e.contains(
            "a worker container of 2164 MB is larger than queue root.small's maximum \
             allocation of 2048 MB"
        ),
        "{e}"
    );
    let e = fails(up(
        &mut y.sluice(),
        &[
            "--worker-memory",
            "256MB",
            "--worker-vcores",
            "4",
            "--queue",
            "small",
        ],
    ));
    assert!(
        e.contains("of 4 vcores is larger than queue root.small's maximum allocation of 2 vcores"),
        "{e}"
    );
    // Nothing was left here.
    for f in ["cluster.json", "yarn.json", "secret"] {
        assert!(!dir.join(f).exists(), "{f}");
    }
}

#[test]
fn submit_yarn_brings_a_cluster_up_for_one_job_and_exits_with_its_code() {
    let y = yarn();
    let _turn = turn();
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "1MB");
    let want = local(d.path(), &data, &["wordcount", "--reducers", "2"]);
    y.cmd(&format!("put {} /app/in", data.display()));
    let submit = |out: &str| {
        y.sluice()
            .args([
                "submit",
                "--yarn",
                "--workers",
                "1",
                "--worker-memory",
                "256MB",
            ])
            .args(["--worker-vcores", "1", "wordcount", "--reducers", "2", "-q"])
            .args(["--input", &y.at("/app/in"), "--output", &y.at(out)])
            .output()
            .unwrap()
    };
    let out = ok(submit("/app/out"));
    let got = d.path().join("got");
    y.cmd(&format!("get /app/out {}", got.display()));
    assert_eq!(named_parts(&got), named_parts(&want));
    let app_of = |stderr: &[u8]| {
        String::from_utf8_lossy(stderr)
            .split_whitespace()
            .find(|w| w.starts_with("application_"))
            .unwrap()
            .trim_end_matches(':')
            .to_owned()
    };
    let app = app_of(&out.stderr);
    assert_eq!(y.app(&app)["finalStatus"], "SUCCEEDED");
    no_process_left(&app);
    // A job that fails (its output exists) fails the command; the
    // cluster still goes down.
    let out = submit("/app/out");
    let app = app_of(&out.stderr);
    let e = fails(out);
    assert!(e.contains("already exists"), "{e}");
    assert_eq!(y.app(&app)["finalStatus"], "SUCCEEDED");
    no_process_left(&app);
    // Ctrl-C while the job runs brings the cluster down too.
    let mut child = y
        .sluice()
        .args([
            "submit",
            "--yarn",
            "--workers",
            "1",
            "--worker-memory",
            "256MB",
        ])
        .args(["--worker-vcores", "1", "wordcount", "--reducers", "2", "-q"])
        .args(["--split-size", "16KiB", "--input", &y.at("/app/in")])
        .args(["--output", &y.at("/app/out-interrupted")])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let app = loop {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "no application started"
        );
        if line.contains("running the job") {
            break app_of(line.as_bytes());
        }
    };
    signal(child.id(), "INT");
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    child.wait().unwrap();
    let a = y.app(&app);
    assert_eq!(a["finalStatus"], "SUCCEEDED", "{a} {rest}");
    no_process_left(&app);
}

#[test]
fn a_worker_within_its_memory_stays_within_its_container() {
    let y = yarn();
    let _turn = turn();
    let d = tempfile::tempdir().unwrap();
    // Many distinct words: the maps and the reduce fill their budgets and
    // spill.
    let data = d.path().join("words");
    ok(sluice()
        .args([
            "gen",
            "text",
            "--size",
            "12MB",
            "--vocabulary",
            "2000000",
            "--seed",
            "3",
        ])
        .arg("--out")
        .arg(&data)
        .output()
        .unwrap());
    y.cmd(&format!("put {} /mem/in", data.display()));
    let dir = d.path().join("cluster");
    let app = y.up(&dir, 1, &["--slots", "1"]);
    let worker = workers_of(&app)[0];
    // The container YARN gave the worker holds its --memory (256 MB) and
    // the overhead (256 MiB): 501 MB, beside the ApplicationMaster's 1024.
    within(20, "the containers asked for", || {
        let mb = y.app(&app)["allocatedMB"].as_i64().unwrap();
        (mb == 1024 + 512).then_some(())
    });
    ok(y.sluice()
        .args(["submit", "--cluster"])
        .arg(&dir)
        .args([
            "wordcount",
            "--reducers",
            "1",
            "-q",
            "--split-size",
            "64MiB",
        ])
        .args(["--input", &y.at("/mem/in"), "--output", &y.at("/mem/out")])
        .output()
        .unwrap());
    // The same worker (YARN's memory monitor killed nothing), whose
    // peak resident memory stayed within its container: --memory
    // (256 MB) and the overhead (256 MiB).
    assert_eq!(workers_of(&app), [worker]);
    let status = std::fs::read_to_string(format!("/proc/{worker}/status")).unwrap();
    let peak_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    let container = (256_000_000u64 + (256 << 20)) / 1024;
    assert!(
        peak_kb < container,
        "peak {peak_kb} kB past the container's {container} kB"
    );
    eprintln!(
        "worker peak resident memory: {} MiB of a 500 MiB container",
        peak_kb / 1024
    );
    ok(y.sluice()
        .args(["yarn", "down", "--dir"])
        .arg(&dir)
        .output()
        .unwrap());
    no_process_left(&app);
}

/// The pids in `file`, one a line, once it has `n`.
fn pids_in(file: &Path, n: usize) -> Vec<u32> {
    within(120, "the commands' pids", || {
        let pids: Vec<u32> = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        (pids.len() >= n).then_some(pids)
    })
}

#[test]
fn a_streaming_job_killed_from_yarn_leaves_no_command_running() {
    let y = yarn();
    let _turn = turn();
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("in.txt");
    std::fs::write(&data, "a b\n".repeat(1000)).unwrap();
    y.cmd(&format!("put {} /stream/in", data.display()));
    let dir = d.path().join("cluster");
    let app = y.up(&dir, 1, &["--slots", "1"]);
    // The mapper's shell and its child: long sleepers, in a process
    // group of their own (not the container's).
    let pids = d.path().join("pids");
    let cmd = format!(
        "echo $$ >> {0}; sleep 300 & echo $! >> {0}; wait",
        pids.display()
    );
    let mut job = y
        .sluice()
        .args(["streaming", "--cluster"])
        .arg(&dir)
        .args([
            "-input",
            &y.at("/stream/in"),
            "-output",
            &y.at("/stream/out"),
        ])
        .args(["-mapper", &cmd, "-reducer", "NONE"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pids = pids_in(&pids, 2);
    http(
        &y.rm,
        "PUT",
        &format!("/ws/v1/cluster/apps/{app}/state"),
        r#"{"state":"KILLED"}"#,
    );
    no_process_left(&app);
    let left = within(30, "the commands gone", || {
        let alive: Vec<u32> = pids
            .iter()
            .copied()
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
                    s.rsplit_once(") ")
                        .is_some_and(|(_, r)| !r.starts_with('Z'))
                })
            })
            .collect();
        alive.is_empty().then_some(alive)
    });
    assert!(left.is_empty());
    let _ = job.kill();
    let _ = job.wait();
    let _ = y
        .sluice()
        .args(["yarn", "down", "--dir"])
        .arg(&dir)
        .output();
}

/// The words of each worker line `sluice yarn status` prints for the
/// cluster in `dir` (the first is `worker`).
fn worker_lines(y: &Yarn, dir: &Path) -> Vec<Vec<String>> {
    let s = ok(y
        .sluice()
        .args(["yarn", "status", "--dir"])
        .arg(dir)
        .output()
        .unwrap());
    String::from_utf8_lossy(&s.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with("worker "))
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// The hosts of the workers `sluice yarn status` lists.
fn worker_hosts(y: &Yarn, dir: &Path) -> Vec<String> {
    worker_lines(y, dir)
        .into_iter()
        .filter_map(|w| {
            let on = w.iter().position(|x| x == "on")?;
            Some(w.get(on + 1)?.clone())
        })
        .collect()
}

/// On a mini cluster of three hosts as YARN and HDFS name them
/// (`localhost`, `127.0.0.2`, `127.0.0.3`: a NodeManager and a DataNode
/// of each name), `--near` puts the workers on the NodeManager holding
/// the blocks, which then read them; workers that do not fit there are
/// placed elsewhere after a while.
#[test]
fn near_puts_workers_on_the_nodemanagers_holding_the_blocks() {
    let _turn = turn();
    let y = start(&["--hosts", "3"]);
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "1MB");
    let want = local(d.path(), &data, &["wordcount", "--reducers", "2"]);
    for (i, host) in [(1, "127.0.0.2"), (2, "127.0.0.3")] {
        let part = data.join("part-00000");
        y.cmd(&format!("put-on {} /near/in{i} {i}", part.display()));
        assert_eq!(y.cmd(&format!("hosts /near/in{i}")), host);
    }
    for (i, host) in [(2, "127.0.0.3"), (1, "127.0.0.2")] {
        let dir = d.path().join(format!("cluster{i}"));
        let app = y.up(&dir, 2, &["--near", &y.at(&format!("/near/in{i}"))]);
        assert_eq!(worker_hosts(&y, &dir), [host, host], "--near /near/in{i}");
        word_count_matches(
            &y,
            &dir,
            &format!("/near/in{i}"),
            &format!("/near/out{i}"),
            &want,
            &d.path().join(format!("got{i}")),
        );
        ok(y.sluice()
            .args(["yarn", "down", "--dir"])
            .arg(&dir)
            .output()
            .unwrap());
        no_process_left(&app);
    }
    // Three workers of which two fit on 127.0.0.3 (8192 MB; each is
    // 3147 MB): the third is placed elsewhere once --near's wait is over.
    let dir = d.path().join("cluster-full");
    let out = ok(y
        .sluice()
        .args(["yarn", "up", "--workers", "3", "--worker-memory", "3GB"])
        .args([
            "--worker-vcores",
            "1",
            "--near",
            &y.at("/near/in2"),
            "--dir",
        ])
        .arg(&dir)
        .output()
        .unwrap());
    let app = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let hosts = worker_hosts(&y, &dir);
    assert_eq!(hosts.len(), 3, "{hosts:?}");
    assert_eq!(
        hosts.iter().filter(|h| *h == "127.0.0.3").count(),
        2,
        "{hosts:?}"
    );
    ok(y.sluice()
        .args(["yarn", "down", "--dir"])
        .arg(&dir)
        .output()
        .unwrap());
    no_process_left(&app);
}

/// The data-plane addresses of the workers of the cluster in `dir`, as
/// `sluice yarn status` lists them.
fn worker_addrs(y: &Yarn, dir: &Path) -> Vec<String> {
    worker_lines(y, dir)
        .into_iter()
        .map(|w| w[2].clone())
        .collect()
}

#[test]
fn a_yarn_clusters_wire_is_tls_and_refuses_a_client_without_its_certificate() {
    let y = yarn();
    let _turn = turn();
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("cluster");
    let app = y.up(&dir, 1, &[]);
    assert_eq!(read_json(&dir.join("cluster.json"))["insecure"], false);
    // The CA's key went to the ApplicationMaster alone, which removed it
    // from the staging directory; each worker container's own
    // certificate and key are there for its user alone.
    let staging = staging_of(&dir, &app);
    assert_eq!(y.cmd(&format!("exists {staging}/ca.key")), "false");
    let certs: Vec<String> = y
        .cmd(&format!("ls {staging}/tls"))
        .split_whitespace()
        .map(|n| n.split('@').next().unwrap().to_owned())
        .collect();
    assert_eq!(certs.len(), 2, "{certs:?}");
    for name in &certs {
        assert_eq!(y.cmd(&format!("perm {staging}/tls/{name}")), "600");
    }
    let control = ok(y
        .sluice()
        .args(["ls", "--cluster"])
        .arg(&dir)
        .output()
        .unwrap());
    assert!(control.status.success());
    // A client of another CA is refused, and so is one in plaintext.
    let other = d.path().join("other");
    tls_flags_in(&other, "client", "client");
    for flags in [
        vec!["--tls-dir", other.join("tls").to_str().unwrap()],
        vec!["--insecure"],
    ] {
        let e = fails(
            y.sluice()
                .args(["ls", "--wait-coordinator", "0s", "--cluster"])
                .arg(&dir)
                .args(&flags)
                .output()
                .unwrap(),
        );
        assert!(!e.is_empty(), "{flags:?}");
    }
    // So is the worker's data plane, whose certificate names the host
    // it was dialled at.
    let workers = worker_addrs(y, &dir);
    assert_eq!(workers.len(), 1, "{workers:?}");
    let addr = &workers[0];
    let dial = || {
        let tcp = std::net::TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        tcp
    };
    let theirs = sluice_proto::tls::Tls::load(&sluice_proto::tls::Files::in_dir(
        &other.join("tls"),
        "client",
    ))
    .unwrap();
    let e = sluice_proto::tls::stream::Conn::client(dial(), addr, Some(&theirs)).unwrap_err();
    assert!(e.to_string().contains("certificate"), "{e}");
    sluice_proto::tls::stream::Conn::client(dial(), addr, Some(&client_tls_in(&dir))).unwrap();
    // What crosses loopback while data is put and got holds none of its
    // words.
    let words = crate::tls::words("yarn");
    let data = d.path().join("words.txt");
    let line = format!("{} {} {}\n", words[0], words[1], words[2]);
    std::fs::write(&data, line.repeat(20_000)).unwrap();
    if let Some(capture) = crate::tls::Capture::start(d.path()) {
        let run = |args: &[&str]| {
            ok(y.sluice()
                .args(args)
                .arg("--cluster")
                .arg(&dir)
                .output()
                .unwrap())
        };
        run(&["put", data.to_str().unwrap(), "--dataset", "words"]);
        let got = d.path().join("got.txt");
        run(&["get", "words", got.to_str().unwrap()]);
        assert_eq!(std::fs::read(&got).unwrap(), std::fs::read(&data).unwrap());
        let bytes = capture.stop();
        assert!(
            bytes.len() > line.len() * 100,
            "{} bytes recorded",
            bytes.len()
        );
        for w in &words {
            assert!(
                !crate::tls::contains(&bytes, w),
                "{w} crossed loopback in clear"
            );
        }
    }
    ok(y.sluice()
        .args(["yarn", "down", "--dir"])
        .arg(&dir)
        .output()
        .unwrap());
    no_process_left(&app);
}
