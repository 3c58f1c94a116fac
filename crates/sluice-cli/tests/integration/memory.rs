//! The memory budget is a promise: every job's peak resident memory stays
//! within 1.1 x `--memory` plus a fixed overhead ([`OVERHEAD`]), on every
//! key distribution: Zipf over 100,000 words, near-uniform over millions
//! of words, and one hot key.

use std::path::{Path, PathBuf};

use crate::support::{ok, read_json, sluice};

/// What a process holds besides its budget: code, stacks, thread-local
/// allocator caches, read and write buffers (the documented overhead).
const OVERHEAD: u64 = 32 << 20;

const BUDGET: u64 = 32 << 20;

fn gen(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(name);
    ok(sluice()
        .args(["gen", "text", "--size", "24MB", "--seed", "3", "--out"])
        .arg(&out)
        .args(extra)
        .output()
        .unwrap());
    out
}

/// One word, over and over.
fn hot_key(dir: &Path) -> PathBuf {
    let out = dir.join("hot");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("part-00000"), "hot\n".repeat(6_000_000)).unwrap();
    out
}

/// Peak resident bytes of `job` over `input` at the budget.
fn peak(dir: &Path, input: &Path, job: &[&str]) -> u64 {
    let report = dir.join("report.json");
    ok(sluice()
        .arg("run")
        .args(job)
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(dir.join("out"))
        .args(["--overwrite", "-q", "--threads", "2", "--memory"])
        .arg(BUDGET.to_string())
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap());
    let r = read_json(&report);
    r["local"]["peak_rss_bytes"].as_u64().unwrap()
}

#[test]
fn peak_memory_stays_within_the_budget_on_every_distribution() {
    let d = tempfile::tempdir().unwrap();
    let inputs = [
        ("zipf", gen(d.path(), "zipf", &[])),
        (
            "uniform",
            gen(
                d.path(),
                "uniform",
                &["--vocabulary", "5000000", "--exponent", "0.01"],
            ),
        ),
        ("hot key", hot_key(d.path())),
    ];
    let jobs: [&[&str]; 3] = [
        &["wordcount"],
        &["wordcount", "--grouping", "sort"],
        &["sort", "--reducers", "2"],
    ];
    let bound = BUDGET + BUDGET / 10 + OVERHEAD;
    let mut over = Vec::new();
    for (name, input) in &inputs {
        for job in jobs {
            let p = peak(d.path(), input, job);
            eprintln!("{job:?} on {name}: peak {} MB", p >> 20);
            if p > bound {
                over.push(format!("{job:?} on {name}: {} MB", p >> 20));
            }
        }
    }
    assert!(
        over.is_empty(),
        "over {} MB at --memory {} MB: {over:?}",
        bound >> 20,
        BUDGET >> 20
    );
}

/// A record larger than a map thread's share of the budget cannot be
/// collected within it: the job fails saying the record's size and the
/// share, and writes no output; with a budget that holds it, it runs.
#[test]
fn a_record_larger_than_a_threads_share_is_refused_with_its_size() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    let mut text: String = (0..100).map(|i| format!("w{i} x\n")).collect();
    text.push_str(&"a".repeat(3 << 20));
    text.push('\n');
    std::fs::write(input.join("part-00000"), text).unwrap();
    let run = |job: &str, memory: &str| {
        let out = d.path().join(format!("{job}-{memory}"));
        let o = sluice()
            .args(["run", job, "-q", "--threads", "2", "--memory", memory])
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(&out)
            .output()
            .unwrap();
        (o, out)
    };
    for (job, bytes) in [("sort", 3 << 20), ("wordcount", (3 << 20) + 8)] {
        let (o, out) = run(job, "2MB");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{job}: {err}");
        assert!(
            err.contains(&format!("a map output record of {bytes} bytes"))
                && err.contains("700000 bytes of --memory 2000000 bytes over 2 threads"),
            "{job}: {err}"
        );
        assert!(!out.exists(), "{job}: no output at all");
        let (o, out) = run(job, "16MB");
        ok(o);
        assert!(out.join("_SUCCESS").exists(), "{job}");
    }
}
