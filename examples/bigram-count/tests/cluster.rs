//! The user's job as a user runs it: the binary built from Sluice's crates
//! with one registering line runs the job locally and on a 2-worker
//! cluster it started itself, with the same answer.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bigram-count"))
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Lines of every part file of an output directory, sorted.
fn answer(dir: &Path) -> Vec<String> {
    let mut lines: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("part-")
        })
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    lines.sort();
    lines
}

struct Down(PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = bin()
            .args(["cluster", "down", "--dir"])
            .arg(&self.0)
            .output();
    }
}

fn text(dir: &Path) -> PathBuf {
    let input = dir.join("in");
    std::fs::create_dir_all(&input).unwrap();
    let words = ["a", "b", "c", "a", "b", "d"];
    for f in 0..3 {
        let mut s = String::new();
        for i in 0..2_000usize {
            let n = 1 + (i * 7 + f) % 5;
            let line: Vec<&str> = (0..n)
                .map(|j| words[(i + j * 3 + f) % words.len()])
                .collect();
            s.push_str(&line.join(" "));
            s.push('\n');
        }
        std::fs::write(input.join(format!("part-{f}")), s).unwrap();
    }
    input
}

#[test]
fn the_user_job_runs_on_a_cluster_with_the_local_answer() {
    let d = tempfile::tempdir().unwrap();
    let input = text(d.path());
    let local = d.path().join("local");
    ok(bin()
        .args([
            "run",
            "bigram-count",
            "-D",
            "bigram.min_count=2003",
            "-q",
            "--input",
        ])
        .arg(&input)
        .arg("--output")
        .arg(&local)
        .output()
        .unwrap());
    let expected = answer(&local);
    // "d c" is seen 2,002 times: below the property's minimum.
    assert_eq!(expected, ["a a\t3995", "b b\t3999", "c d\t2004"]);

    let cluster = d.path().join("cluster");
    ok(bin()
        .args(["cluster", "up", "--workers", "2", "--slots", "1", "--dir"])
        .arg(&cluster)
        .output()
        .unwrap());
    let _down = Down(cluster.clone());
    let conn = |c: &mut Command| {
        c.arg("--cluster").arg(&cluster);
    };
    let mut put = bin();
    put.args(["put", "--dataset", "text", "--block-size", "8KiB"])
        .arg(&input);
    conn(&mut put);
    ok(put.output().unwrap());
    let mut submit = bin();
    submit.arg("submit");
    conn(&mut submit);
    submit.args([
        "bigram-count",
        "-D",
        "bigram.min_count=2003",
        "--reducers",
        "2",
        "-q",
        "--input",
        "text",
        "--output",
        "bigrams",
    ]);
    ok(submit.output().unwrap());
    let got = d.path().join("got");
    let mut get = bin();
    get.args(["get", "bigrams"]).arg(&got);
    conn(&mut get);
    ok(get.output().unwrap());
    assert_eq!(answer(&got), expected);

    // A bad property is refused at submit, naming it.
    let mut bad = bin();
    bad.arg("submit");
    conn(&mut bad);
    bad.args([
        "bigram-count",
        "-D",
        "bigram.min_count=x",
        "--input",
        "text",
        "--output",
        "b2",
    ]);
    let out = bad.output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bigram.min_count=\"x\" is not a count"),
        "{err}"
    );
}
