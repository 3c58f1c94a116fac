//! Jobs reading and writing S3 paths against a real S3 server (moto's,
//! installed by scripts/test.sh in the project's venv): word count from
//! `s3://` input (many ranged splits, and a gzip object) equals the local
//! answer; the output is committed with a manifest, refused when it exists
//! unless `--overwrite`, which replaces it whole; a committer killed
//! before its manifest leaves nothing readable, and the next job to the
//! same path cleans up after it.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::support::*;

/// A moto S3 server on a free loopback port, stopped when dropped.
struct Moto {
    child: Child,
    url: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto() -> Moto {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = python().parent().unwrap().join("moto_server");
    let child = Command::new(&server)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "starting {} (scripts/test.sh installs it): {e}",
                server.display()
            )
        });
    let url = format!("http://127.0.0.1:{port}");
    poll(|| std::net::TcpStream::connect(("127.0.0.1", port)).ok());
    Moto { child, url }
}

impl Moto {
    /// `sluice` with the server's endpoint and credentials.
    fn sluice(&self) -> Command {
        let mut c = sluice();
        self.env(&mut c);
        c
    }

    /// The server's endpoint and credentials in `c`'s environment.
    fn env(&self, c: &mut Command) {
        c.env("AWS_ENDPOINT_URL", &self.url)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1");
    }

    /// Runs a Python snippet with an S3 client `s` on the server; returns
    /// what it printed.
    fn py(&self, code: &str) -> String {
        String::from_utf8(self.py_bytes(code)).unwrap()
    }

    fn py_bytes(&self, code: &str) -> Vec<u8> {
        let prelude = format!(
            "import boto3, sys\ns = boto3.client('s3', endpoint_url='{}', aws_access_key_id='test', \
             aws_secret_access_key='test', region_name='us-east-1')\n",
            self.url
        );
        let out = ok(Command::new(python())
            .arg("-c")
            .arg(prelude + code)
            .output()
            .unwrap());
        out.stdout
    }

    fn upload(&self, file: &Path, key: &str) {
        self.py(&format!(
            "s.upload_file({:?}, 'data', {key:?})",
            file.display().to_string()
        ));
    }

    /// Keys under `prefix`, sorted.
    fn keys(&self, prefix: &str) -> Vec<String> {
        let out = self.py(&format!(
            "r = s.list_objects_v2(Bucket='data', Prefix={prefix:?})\n\
             print('\\n'.join(sorted(o['Key'] for o in r.get('Contents', []))))"
        ));
        out.lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn get(&self, key: &str) -> Vec<u8> {
        self.py_bytes(&format!(
            "sys.stdout.buffer.write(s.get_object(Bucket='data', Key={key:?})['Body'].read())"
        ))
    }

    /// The committed output at `prefix`: its manifest's files, read in
    /// order, by their names without the job's suffix.
    fn output(&self, prefix: &str) -> Vec<(String, Vec<u8>)> {
        let m: serde_json::Value =
            serde_json::from_slice(&self.get(&format!("{prefix}/_SUCCESS"))).unwrap();
        let job = m["job"].as_str().unwrap().to_owned();
        m["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let key = f["key"].as_str().unwrap();
                let name = key.strip_suffix(&format!("-{job}")).unwrap().to_owned();
                (name, self.get(&format!("{prefix}/{key}")))
            })
            .collect()
    }
}

fn wc(m: &Moto, input: &str, output: &str, extra: &[&str]) -> std::process::Output {
    wc_cmd(m, input, output).args(extra).output().unwrap()
}

/// `sluice run wordcount` from `input` to `output` on the server.
fn wc_cmd(m: &Moto, input: &str, output: &str) -> Command {
    let mut c = m.sluice();
    c.args([
        "run",
        "wordcount",
        "--reducers",
        "2",
        "--split-size",
        "256KB",
        "-q",
    ])
    .args(["--input", input, "--output", output]);
    c
}

#[test]
fn word_count_reads_and_commits_s3_paths() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "3MB");
    let m = moto();
    m.py("s.create_bucket(Bucket='data')");
    m.upload(&part_files(&data)[0], "in/part-00000");
    let gz = d.path().join("more.gz");
    gzip_head(&part_files(&data)[0], &gz, 200_000);
    m.upload(&gz, "in/more.gz");

    // The local answer over the same bytes.
    let local_in = d.path().join("local-in");
    std::fs::create_dir_all(&local_in).unwrap();
    std::fs::copy(part_files(&data)[0].clone(), local_in.join("part-00000")).unwrap();
    std::fs::copy(&gz, local_in.join("more.gz")).unwrap();
    let want = local(
        d.path(),
        &local_in,
        &["wordcount", "--reducers", "2", "--split-size", "256KB"],
    );

    ok(wc(&m, "s3://data/in", "s3://data/out", &[]));
    assert_eq!(m.output("out"), named_parts(&want));

    // Refused when committed, unless --overwrite, which replaces it whole.
    let err = fails(wc(&m, "s3://data/in/part-00000", "s3://data/out", &[]));
    assert!(
        err.contains("already exists") && err.contains("--overwrite"),
        "{err}"
    );
    let before = m.keys("out/");
    ok(wc(
        &m,
        "s3://data/in/part-*",
        "s3://data/out",
        &["--overwrite"],
    ));
    let after = m.keys("out/");
    assert_eq!(after.len(), 3, "two parts and the manifest: {after:?}");
    assert!(
        after
            .iter()
            .all(|k| k.ends_with("_SUCCESS") || !before.contains(k)),
        "the old parts are gone: {before:?} -> {after:?}"
    );
    // A committed output reads back as input: its manifest's objects.
    ok(m.sluice()
        .args([
            "run",
            "grep",
            "--pattern",
            "^a",
            "--input",
            "s3://data/out",
            "-q",
            "--output",
        ])
        .arg(d.path().join("g"))
        .output()
        .unwrap());

    // A missing path is a clear error.
    let err = fails(wc(&m, "s3://data/nothing-here", "s3://data/o2", &[]));
    assert!(
        err.contains("does not exist") && err.contains("s3://data/nothing-here"),
        "{err}"
    );
}

#[test]
fn a_committer_killed_before_its_manifest_leaves_nothing_readable() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "1MB");
    let m = moto();
    m.py("s.create_bucket(Bucket='data')");
    m.upload(&part_files(&data)[0], "in/part-00000");
    // The reference: the same job committed whole.
    ok(wc(&m, "s3://data/in", "s3://data/out", &[]));
    let died = wc_cmd(&m, "s3://data/in", "s3://data/half")
        .env("SLUICE_FAULT_S3_COMMIT", "before-manifest")
        .output()
        .unwrap();
    assert!(!died.status.success());
    let left = m.keys("half/");
    assert!(
        !left.is_empty() && !left.iter().any(|k| k.ends_with("_SUCCESS")),
        "{left:?}"
    );
    // Nothing there is an answer.
    let err = fails(
        m.sluice()
            .args([
                "run",
                "grep",
                "--pattern",
                "x",
                "--input",
                "s3://data/half",
                "-q",
                "--output",
            ])
            .arg(d.path().join("g"))
            .output()
            .unwrap(),
    );
    assert!(err.contains("never committed"), "{err}");
    // The next job to the path commits and sweeps the leftovers.
    ok(wc(&m, "s3://data/in", "s3://data/half", &[]));
    let now = m.keys("half/");
    assert!(left.iter().all(|k| !now.contains(k)), "{left:?} / {now:?}");
    assert_eq!(m.output("half"), m.output("out"));
}

#[test]
fn a_cluster_puts_from_and_gets_to_s3() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "2MB");
    let m = moto();
    m.py("s.create_bucket(Bucket='data')");
    m.upload(&part_files(&data)[0], "logs/day1/part-00000");
    m.upload(&part_files(&data)[0], "logs/day2/part-00000");
    let c = Cluster::up(d.path(), 2, "");
    let mut put = c.cmd(&[
        "put",
        "s3://data/logs",
        "--dataset",
        "logs",
        "--block-size",
        "256KB",
    ]);
    m.env(&mut put);
    ok(put.output().unwrap());
    // The objects' keys below the prefix are the data set's file names.
    let back = d.path().join("logs-back");
    get_local(&c, "logs", &back);
    let orig = std::fs::read(&part_files(&data)[0]).unwrap();
    for day in ["day1", "day2"] {
        assert!(
            std::fs::read(back.join(day).join("part-00000")).unwrap() == orig,
            "{day}"
        );
    }
    ok(submit_wc(&c, "logs", "counts").output().unwrap());
    let mut get = c.cmd(&["get", "counts", "s3://data/counts"]);
    m.env(&mut get);
    ok(get.output().unwrap());
    // The same as getting it to local files.
    let local_out = d.path().join("counts-local");
    get_local(&c, "counts", &local_out);
    let want: Vec<(String, Vec<u8>)> = named_parts(&local_out);
    assert_eq!(m.output("counts"), want);
    // A committed path is not overwritten.
    let mut again = c.cmd(&["get", "counts", "s3://data/counts"]);
    m.env(&mut again);
    let err = fails(again.output().unwrap());
    assert!(err.contains("already exists"), "{err}");
}

fn get_local(c: &Cluster, name: &str, out: &Path) {
    ok(c.cmd(&["get", name]).arg(out).output().unwrap());
}

#[test]
fn a_cluster_job_reads_and_commits_s3_paths_directly() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "2MB");
    let want = local(d.path(), &data, &["wordcount", "--reducers", "2"]);
    let m = moto();
    m.py("s.create_bucket(Bucket='data')");
    m.upload(&part_files(&data)[0], "in/part-00000");
    // The coordinator and the workers reach the store themselves.
    let dir = d.path().join("cluster");
    let mut up = sluice();
    m.env(&mut up);
    ok(up
        .args(["cluster", "up", "--workers", "2", "--slots", "1", "--dir"])
        .arg(&dir)
        .output()
        .unwrap());
    let c = Cluster { dir };
    let mut job = c.submit(&["wordcount", "--reducers", "2", "--split-size", "256KB"]);
    job.args(["--input", "s3://data/in", "--output", "s3://data/counts"]);
    m.env(&mut job);
    let report = d.path().join("report.json");
    ok(job.arg("--report").arg(&report).output().unwrap());
    assert_eq!(m.output("counts"), named_parts(&want));
    // One map a split of the object (no packing across 256 KB splits).
    let r = read_json(&report);
    let len = std::fs::metadata(part_files(&data)[0].clone())
        .unwrap()
        .len();
    assert!(r["maps"].as_u64().unwrap() >= len / 256_000 - 1, "{r}");
    // The job's temporary data set is gone.
    let ls = ok(c.cmd(&["ls"]).output().unwrap());
    assert!(!String::from_utf8_lossy(&ls.stdout).contains("_stage-"));
    // A missing input is refused at submit.
    let mut missing = c.submit(&["wordcount", "--input", "s3://data/nothing"]);
    missing.args(["--output", "s3://data/o2"]);
    m.env(&mut missing);
    let err = fails(missing.output().unwrap());
    assert!(err.contains("does not exist"), "{err}");
}

#[test]
fn terasort_reads_and_commits_s3_paths() {
    let d = tempfile::tempdir().unwrap();
    let (tera, want) = tera_sorted_locally(d.path(), 20000);
    let m = moto();
    m.py("s.create_bucket(Bucket='data')");
    for (i, f) in part_files(&tera).iter().enumerate() {
        m.upload(f, &format!("tera/part-{i:05}"));
    }
    ok(m.sluice()
        .args(TERASORT)
        .args(["--split-size", "500KB"])
        .args(["--input", "s3://data/tera", "--output", "s3://data/sorted"])
        .output()
        .unwrap());
    // The same records in the same order (the sampled split points, and
    // so the parts' boundaries, may differ).
    let got: Vec<u8> = m
        .output("sorted")
        .into_iter()
        .flat_map(|(_, b)| b)
        .collect();
    assert!(got == concat_parts(&want));
}

#[test]
fn a_parquet_object_counts_as_its_text_read_in_ranges() {
    let d = tempfile::tempdir().unwrap();
    let (text, parquet) = crate::rowfiles::text_and_parquet(d.path(), "2MB");
    let (want, _) = wordcount(d.path(), "plain", &text, &[]);
    let m = moto();
    m.py("s.create_bucket(Bucket='data')");
    m.upload(&parquet, "rows/words.parquet");
    let report = d.path().join("report.json");
    let mut run = m.sluice();
    let (input, output) = ("s3://data/rows/words.parquet", "s3://data/counts");
    crate::rowfiles::count_parquet_lines(&mut run, &report, input, output);
    ok(run.output().unwrap());
    let got: Vec<u8> = m
        .output("counts")
        .into_iter()
        .flat_map(|(_, bytes)| bytes)
        .collect();
    assert!(got == want, "counts differ from the text's");
    let r = read_json(&report);
    assert!(r["maps"].as_u64().unwrap() > 4, "{r}");
}
