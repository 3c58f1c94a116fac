//! Jobs reading and writing HDFS paths against a real HDFS: Hadoop's
//! MiniDFSCluster (`tests/minidfs`, hadoop-minicluster 3.4.1 from Maven
//! Central, bound to 127.0.0.1). Data goes in and comes out through
//! Hadoop's own client (the launcher's `put` and `get`), so Sluice's
//! HDFS client is checked against Hadoop's. Word count and TeraSort from
//! and to HDFS equal the local answers, with one split a block; an output
//! is refused when it exists unless `--overwrite`; a committer killed
//! before its rename leaves nothing at the output; a missing path, a
//! permission error and a stopped DataNode give clear errors (and a
//! second replica carries a read through a stopped DataNode).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::support::*;

/// A MiniDFSCluster, shut down when dropped.
struct Dfs {
    child: Child,
    stdin: Mutex<ChildStdin>,
    stdout: Mutex<BufReader<ChildStdout>>,
    /// `hdfs://127.0.0.1:PORT`.
    url: String,
    /// `http://127.0.0.1:PORT` (WebHDFS).
    http: String,
    _dir: tempfile::TempDir,
}

impl Drop for Dfs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn dfs(args: &[&str]) -> Dfs {
    let cp = maven_classpath("tests/minidfs", "minidfs-1.0.jar");
    let base = tempfile::tempdir().unwrap();
    let mut child = Command::new("java")
        .args(["-cp", &cp, "sluice.minidfs.MiniDfs"])
        .arg(base.path())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting java for the MiniDFSCluster");
    let stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let t = Instant::now();
    stdout.read_line(&mut line).unwrap();
    assert!(
        line.starts_with("hdfs://"),
        "the MiniDFSCluster did not start ({:?} after {:?})",
        line,
        t.elapsed()
    );
    let (url, http) = line.trim().split_once(' ').unwrap();
    Dfs {
        url: url.into(),
        http: http.into(),
        child,
        stdin: Mutex::new(stdin),
        stdout: Mutex::new(stdout),
        _dir: base,
    }
}

impl Dfs {
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

    fn put(&self, local: &Path, path: &str) {
        self.cmd(&format!("put {} {path}", local.display()));
    }

    /// The HDFS directory `path` copied to a new local directory.
    fn get(&self, path: &str, into: &Path) -> PathBuf {
        self.cmd(&format!("get {path} {}", into.display()));
        into.to_path_buf()
    }

    fn exists(&self, path: &str) -> bool {
        self.cmd(&format!("exists {path}")) == "true"
    }

    fn ls(&self, path: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .cmd(&format!("ls {path}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        v.sort();
        v
    }

    /// `sluice` reaching this cluster's WebHDFS.
    fn sluice(&self) -> Command {
        let mut c = sluice();
        c.env("SLUICE_WEBHDFS", &self.http);
        c
    }

    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }
}

fn wc_args<'a>(input: &'a str, output: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        "wordcount",
        "--reducers",
        "2",
        "-q",
        "--input",
        input,
        "--output",
        output,
    ]
}

#[test]
fn word_count_and_terasort_read_and_commit_hdfs_paths() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "3MB");
    let gz = d.path().join("more.gz");
    gzip_head(&part_files(&data)[0], &gz, 200_000);
    let local_in = d.path().join("local-in");
    std::fs::create_dir_all(&local_in).unwrap();
    std::fs::copy(part_files(&data)[0].clone(), local_in.join("part-00000")).unwrap();
    std::fs::copy(&gz, local_in.join("more.gz")).unwrap();
    let want = local(d.path(), &local_in, &["wordcount", "--reducers", "2"]);

    // 256 KiB blocks: the 3 MB file is 12 blocks.
    let h = dfs(&["--datanodes", "2", "--block-size", "262144"]);
    h.put(&local_in, "/in");
    let report = d.path().join("report.json");
    let (input, output) = (h.at("/in"), h.at("/out"));
    ok(h.sluice()
        .args(wc_args(&input, &output))
        .args(["--split-size", "256KiB", "--report"])
        .arg(&report)
        .output()
        .unwrap());
    let got = h.get("/out", &d.path().join("got"));
    assert_eq!(named_parts(&got), named_parts(&want));
    assert!(got.join("_SUCCESS").exists());
    // One split (and map) a block, the gzip file one.
    let len = std::fs::metadata(local_in.join("part-00000"))
        .unwrap()
        .len();
    let r = read_json(&report);
    assert_eq!(r["maps"].as_u64(), Some(len.div_ceil(262144) + 1), "{r}");
    // Nothing but the output beside it.
    assert_eq!(h.ls("/"), ["in", "out"]);
    // Hidden names (markers, other jobs' staging) are skipped by a
    // directory and by a glob alike.
    h.put(&gz, "/in/_marker");
    h.put(&gz, "/in/.staging");
    let (glob, out_glob) = (h.at("/in/*"), h.at("/out-glob"));
    ok(h.sluice().args(wc_args(&glob, &out_glob)).output().unwrap());
    let got = h.get("/out-glob", &d.path().join("got-glob"));
    assert_eq!(named_parts(&got), named_parts(&want));
    h.cmd("rm /out-glob");

    // The same output again: refused, and the first answer stays.
    let again = h.sluice().args(wc_args(&input, &output)).output().unwrap();
    assert!(fails(again).contains("already exists"));
    // With --overwrite it is replaced whole (a smaller input's answer).
    let small = h.at("/in/part-00000");
    ok(h.sluice()
        .args(wc_args(&small, &output))
        .arg("--overwrite")
        .output()
        .unwrap());
    let only = d.path().join("only");
    std::fs::create_dir_all(&only).unwrap();
    std::fs::copy(local_in.join("part-00000"), only.join("part-00000")).unwrap();
    let want_small = local(
        &d.path().join("small"),
        &only,
        &["wordcount", "--reducers", "2"],
    );
    let got = h.get("/out", &d.path().join("got-again"));
    assert_eq!(named_parts(&got), named_parts(&want_small));
    assert_eq!(h.ls("/"), ["in", "out"]);

    // TeraSort from and to HDFS: the same sorted records as on local
    // files (the split points are sampled from other splits, so the
    // parts' boundaries may differ; their concatenation may not).
    let (tera, want_sort) = tera_sorted_locally(d.path(), 30000);
    h.put(&tera, "/tera");
    ok(h.sluice()
        .args(TERASORT)
        .args(["--input", &h.at("/tera"), "--output", &h.at("/sorted")])
        .output()
        .unwrap());
    let got = h.get("/sorted", &d.path().join("sorted-hdfs"));
    assert_eq!(part_files(&got).len(), 3);
    assert!(concat_parts(&got) == concat_parts(&want_sort));
}

#[test]
fn hdfs_errors_are_clear_and_a_killed_commit_shows_nothing() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "1MB");
    let h = dfs(&["--datanodes", "1"]);
    h.put(&data, "/in");

    // A missing path.
    let (missing, out) = (h.at("/nowhere"), h.at("/out"));
    let err = fails(h.sluice().args(wc_args(&missing, &out)).output().unwrap());
    assert!(
        err.contains("does not exist") && err.contains("/nowhere"),
        "{err}"
    );

    // A directory with no input files in it.
    h.cmd("mkdir /empty");
    h.put(&part_files(&data)[0], "/empty/_hidden");
    let empty = h.at("/empty");
    let err = fails(h.sluice().args(wc_args(&empty, &out)).output().unwrap());
    assert!(err.contains("holds no input files"), "{err}");

    // A NameNode nobody serves: a clear error within seconds.
    let t = Instant::now();
    let err = fails(
        h.sluice()
            .args(wc_args("hdfs://127.0.0.1:1/in", &out))
            .output()
            .unwrap(),
    );
    assert!(
        err.contains("127.0.0.1:1") && err.contains("refused"),
        "{err}"
    );
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());

    // A directory another user may not read.
    h.cmd("mkdir /private");
    h.put(&part_files(&data)[0], "/private/part-00000");
    h.cmd("chmod /private 700");
    let private = h.at("/private");
    let err = fails(
        h.sluice()
            .env("HADOOP_USER_NAME", "alice")
            .args(wc_args(&private, &out))
            .output()
            .unwrap(),
    );
    assert!(
        err.contains("Permission denied") && err.contains("alice"),
        "{err}"
    );
    assert!(!h.exists("/out"));

    // A committer killed before its rename: nothing at the output, and
    // the next job commits there.
    let input = h.at("/in");
    let killed = h
        .sluice()
        .env("SLUICE_FAULT_HDFS_COMMIT", "before-rename")
        .args(wc_args(&input, &out))
        .output()
        .unwrap();
    assert_eq!(killed.status.code(), Some(86));
    assert!(!h.exists("/out"));
    assert!(h.ls("/").iter().all(|n| !n.starts_with("out")));
    // The dead committer's staging directory, made two hours old, goes at
    // the next commit to that output; a fresh one (a committer still at
    // work) stays.
    let staging = |h: &Dfs| -> Vec<String> {
        h.ls("/")
            .into_iter()
            .filter(|n| n.starts_with(".out.sluice-"))
            .collect()
    };
    let dead = staging(&h);
    assert_eq!(dead.len(), 1, "{dead:?}");
    h.cmd(&format!("age /{} 7200", dead[0]));
    h.cmd("mkdir /.out.sluice-fresh");
    ok(h.sluice().args(wc_args(&input, &out)).output().unwrap());
    assert_eq!(staging(&h), [".out.sluice-fresh"]);
    let want = local(d.path(), &data, &["wordcount", "--reducers", "2"]);
    assert_eq!(
        named_parts(&h.get("/out", &d.path().join("got"))),
        named_parts(&want)
    );
}

#[test]
fn a_stopped_datanode_fails_over_to_a_replica_or_fails_clearly() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "24MB");
    let want = local(d.path(), &data, &["wordcount", "--reducers", "2"]);
    let h = dfs(&[
        "--datanodes",
        "2",
        "--block-size",
        "1048576",
        "--replication",
        "2",
    ]);
    h.put(&data, "/in");
    // DataNode 0 stops while the job reads (when exactly does not matter:
    // every block has a replica on DataNode 1). The output is local: a
    // write pipeline through a DataNode the NameNode still counts live
    // fails (see the next job).
    let input = h.at("/in");
    let out = d.path().join("out");
    let job = h
        .sluice()
        .args([
            "run",
            "wordcount",
            "--reducers",
            "2",
            "-q",
            "--split-size",
            "1MB",
        ])
        .args(["--input", &input])
        .arg("--output")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    h.cmd("stop-datanode 0");
    ok(job.wait_with_output().unwrap());
    assert_eq!(named_parts(&out), named_parts(&want));

    // An HDFS output whose write pipeline meets the stopped DataNode: a
    // clear error, and nothing at the output.
    let out1 = h.at("/out1");
    let err = fails(h.sluice().args(wc_args(&input, &out1)).output().unwrap());
    assert!(err.contains("/out1"), "{err}");
    assert!(!h.exists("/out1"));

    // With the last DataNode stopped too, no replica is left: a clear
    // error, and no output.
    h.cmd("stop-datanode 0");
    let out2 = h.at("/out2");
    let err = fails(h.sluice().args(wc_args(&input, &out2)).output().unwrap());
    assert!(err.contains("hdfs://") && err.contains("/in/"), "{err}");
    assert!(!h.exists("/out2"));
}

#[test]
fn cluster_maps_run_on_the_hosts_of_their_hdfs_blocks() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "3MB");
    let want = local(d.path(), &data, &["wordcount", "--reducers", "2"]);
    // One DataNode a worker's host, every block once.
    let h = dfs(&[
        "--datanodes",
        "2",
        "--hosts",
        "worker-0,worker-1",
        "--block-size",
        "262144",
        "--replication",
        "1",
    ]);
    h.put(&data, "/in");
    // Two workers, hosts worker-0 and worker-1 (one a data center), and
    // a delay no job reaches: every map waits for a worker on its
    // block's host.
    let dir = d.path().join("cluster");
    ok(h.sluice()
        .args(["cluster", "up", "--workers", "1,1", "--datacenters", "2"])
        .args(["--slots", "1"])
        .args([
            "--coordinator-flags",
            "--heartbeat-ms 50 --delay-node 1000000000",
        ])
        .arg("--dir")
        .arg(&dir)
        .output()
        .unwrap());
    let c = Cluster { dir };
    let report = d.path().join("report.json");
    let (input, output) = (h.at("/in"), h.at("/out"));
    ok(
        c.submit(&["wordcount", "--reducers", "2", "--split-size", "256KiB"])
            .args(["--input", &input, "--output", &output, "--report"])
            .arg(&report)
            .output()
            .unwrap(),
    );
    let got = h.get("/out", &d.path().join("got"));
    assert_eq!(named_parts(&got), named_parts(&want));
    let r = read_json(&report);
    let len = std::fs::metadata(part_files(&data)[0].clone())
        .unwrap()
        .len();
    assert_eq!(r["maps"].as_u64(), Some(len.div_ceil(262144)), "{r}");
    let by = &r["cluster"]["maps_by_level"];
    assert_eq!(by["node"].as_u64(), r["maps"].as_u64(), "{r}");
    // The job's temporary data set is gone; only the output is new.
    assert_eq!(h.ls("/"), ["in", "out"]);
    let ls = ok(c.cmd(&["ls"]).output().unwrap());
    assert!(
        !String::from_utf8_lossy(&ls.stdout).contains("_stage-"),
        "{}",
        String::from_utf8_lossy(&ls.stdout)
    );

    // TeraSort on the cluster from and to HDFS: split points sampled from
    // HDFS, the same records in the same order as on local files.
    let (tera, want_sort) = tera_sorted_locally(d.path(), 20000);
    h.put(&tera, "/tera");
    ok(c.submit(&["terasort", "--reducers", "3"])
        .args(["--input", &h.at("/tera"), "--output", &h.at("/sorted")])
        .output()
        .unwrap());
    let got = h.get("/sorted", &d.path().join("sorted-hdfs"));
    assert!(concat_parts(&got) == concat_parts(&want_sort));

    // put and get between the cluster's data sets and HDFS.
    ok(c.cmd(&["put", "--dataset", "words", &h.at("/in")])
        .output()
        .unwrap());
    ok(c.cmd(&["get", "words", &h.at("/words-copy")])
        .output()
        .unwrap());
    let copy = h.get("/words-copy", &d.path().join("copy"));
    // A one-file data set is committed under its name.
    assert!(std::fs::read(copy.join("words")).unwrap() == concat_parts(&data));
}

/// The replica files (`blk_<id>`, not their `.meta`) under `dir`.
fn replica_files(dir: &Path) -> std::collections::BTreeSet<PathBuf> {
    let mut out = std::collections::BTreeSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                todo.push(p);
            } else if name.starts_with("blk_") && !name.ends_with(".meta") {
                out.insert(p);
            }
        }
    }
    out
}

/// Flips one byte in the middle of each file.
fn damage(files: &[&PathBuf]) {
    for f in files {
        let mut b = std::fs::read(f).unwrap();
        let mid = b.len() / 2;
        b[mid] ^= 0x5a;
        std::fs::write(f, b).unwrap();
    }
}

/// Short-circuit reads (the DataNodes here allow them to the user that
/// runs the cluster): on by default, every block read from the disk;
/// off with `SLUICE_HDFS_SHORT_CIRCUIT=0`; a user the DataNodes refuse
/// reads over the network. A damaged replica is blamed and never part of
/// an answer: with a good copy elsewhere the answer is unchanged, with
/// none the job fails and commits nothing.
#[test]
fn short_circuit_reads_check_every_chunk_and_blame_a_damaged_replica() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "4MB");
    let want = local(d.path(), &data, &["wordcount", "--reducers", "2"]);
    let one = d.path().join("one");
    std::fs::create_dir_all(&one).unwrap();
    std::fs::copy(&part_files(&data)[0], one.join("part-00000")).unwrap();
    let want_one = local(
        &d.path().join("w1"),
        &one,
        &["wordcount", "--reducers", "2"],
    );
    let h = dfs(&[
        "--datanodes",
        "2",
        "--block-size",
        "1048576",
        "--replication",
        "2",
    ]);
    h.put(&data, "/in");
    let run = |input: &str, name: &str, env: &[(&str, &str)]| {
        let out = d.path().join(name);
        let mut c = h.sluice();
        c.env("SLUICE_LOG", "sluice_storage=debug");
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c
            .args(wc_args(&h.at(input), out.to_str().unwrap()))
            .args(["--split-size", "1MB"])
            .output()
            .unwrap();
        (o, out)
    };
    let said = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();

    let (o, out) = run("/in", "sc", &[]);
    let err = said(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("HDFS short-circuit read of"), "{err}");
    assert!(!err.contains("over the network"), "{err}");
    // The directory's files' blocks came with one listing.
    assert!(err.contains("listed /in with its files' blocks"), "{err}");
    assert!(!err.contains("from getBlockLocations"), "{err}");
    assert_eq!(named_parts(&out), named_parts(&want));

    // A standard error closed under the job (`2>&1 | head -1`) loses the
    // log lines, not the job (the log's own complaint used to panic it).
    let closed = d.path().join("closed");
    let mut c = h.sluice();
    c.env("SLUICE_LOG", "debug")
        .args(wc_args(&h.at("/in"), closed.to_str().unwrap()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    drop(child.stderr.take());
    assert!(child.wait().unwrap().success());
    assert_eq!(named_parts(&closed), named_parts(&want));

    let (o, out) = run("/in", "net", &[("SLUICE_HDFS_SHORT_CIRCUIT", "0")]);
    let err = said(&o);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("short-circuit"), "{err}");
    assert_eq!(named_parts(&out), named_parts(&want));

    let (o, out) = run("/in", "refused", &[("HADOOP_USER_NAME", "not-allowed")]);
    let err = said(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("refused by the DataNode")
            && err.contains("dfs.block.local-path-access.user")
            && !err.contains("HDFS short-circuit read of"),
        "{err}"
    );
    assert_eq!(named_parts(&out), named_parts(&want));

    // One replica of each block damaged, the other good: whichever a
    // read meets first, the answer is the same.
    let dfs_data = h._dir.path().join("data");
    let before = replica_files(&dfs_data);
    h.put(&one, "/two");
    let two: Vec<_> = replica_files(&dfs_data)
        .difference(&before)
        .cloned()
        .collect();
    let blocks = std::fs::metadata(one.join("part-00000"))
        .unwrap()
        .len()
        .div_ceil(1 << 20) as usize;
    assert_eq!(two.len(), 2 * blocks, "two replicas a block: {two:?}");
    // DataNode 0 keeps its blocks under data1 and data2.
    let (dn0, dn1): (Vec<_>, Vec<_>) = two.iter().partition(|p| {
        let s = p.to_string_lossy();
        s.contains("/data1/") || s.contains("/data2/")
    });
    assert_eq!((dn0.len(), dn1.len()), (blocks, blocks), "{two:?}");
    damage(&dn0);
    let (o, out) = run("/two", "two", &[]);
    let err = said(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(named_parts(&out), named_parts(&want_one));

    // Every replica damaged: blamed by name, and the job fails with
    // nothing committed.
    let before = replica_files(&dfs_data);
    h.put(&one, "/bad");
    let bad: Vec<_> = replica_files(&dfs_data)
        .difference(&before)
        .cloned()
        .collect();
    assert_eq!(bad.len(), 2 * blocks, "{bad:?}");
    damage(&bad.iter().collect::<Vec<_>>());
    let (o, out) = run("/bad", "bad", &[]);
    let err = fails(o);
    assert!(err.contains("is damaged: checksum mismatch"), "{err}");
    assert!(!out.exists(), "{err}");
    // Each damaged replica read was reported to the NameNode, as
    // Hadoop's client reports a checksum failure.
    assert!(err.contains("damaged to the NameNode"), "{err}");
    // (The NameNode's count is refreshed by its redundancy monitor, every
    // second here.)
    let t = Instant::now();
    while h.cmd("corrupt-replicas") == "0" {
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "no corrupt replica: {err}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_parquet_file_on_hdfs_counts_as_its_text_with_row_groups_across_blocks() {
    let d = tempfile::tempdir().unwrap();
    let (text, parquet) = crate::rowfiles::text_and_parquet(d.path(), "2MB");
    let (want, _) = wordcount(d.path(), "plain", &text, &[]);
    // 128 KiB blocks: row groups of about 60 KB cross block boundaries.
    let h = dfs(&["--datanodes", "2", "--block-size", "131072"]);
    h.put(&parquet, "/rows/words.parquet");
    let report = d.path().join("report.json");
    let (input, output) = (h.at("/rows/words.parquet"), h.at("/counts"));
    let mut run = h.sluice();
    crate::rowfiles::count_parquet_lines(&mut run, &report, &input, &output);
    ok(run.output().unwrap());
    let got = h.get("/counts", &d.path().join("got"));
    assert!(concat_parts(&got) == want, "counts differ from the text's");
    let r = read_json(&report);
    let blocks = std::fs::metadata(&parquet).unwrap().len().div_ceil(131072);
    assert!(r["maps"].as_u64().unwrap() >= blocks, "{r}");
}
