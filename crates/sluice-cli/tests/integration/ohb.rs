//! `sluice bench ohb` and the `ohb` job as a user runs them: exact pair
//! counts per reducer (the bench's own oracle fails the run otherwise),
//! utilization samples, and clear errors for impossible parameters.

use crate::support::{ok, read_json, sluice};

/// Runs `sluice bench ohb ARGS` (split at spaces) into a fresh directory (no plots).
fn bench(args: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("ohb");
    ok(sluice()
        .args(["bench", "ohb", "--python", "/nonexistent", "--out"])
        .arg(&out)
        .args(args.split_whitespace())
        .output()
        .unwrap());
    (d, out)
}

fn results(dir: &std::path::Path) -> serde_json::Value {
    read_json(&dir.join("results.json"))
}

#[test]
fn skew_sends_half_to_reducer_zero_and_the_rest_down_the_line() {
    let (_d, out) = bench(concat!(
        "--pattern skew --maps 4 --reduces 3 --pairs-per-map 5000",
        " --pair-size 100 --runs 2 --threads 2"
    ));
    let r = &results(&out)[0];
    let run = &r["median_run"];
    assert_eq!(run["reducer_pairs"], serde_json::json!([10000, 5000, 5000]));
    assert_eq!(r["reducer0_share"].as_f64().unwrap(), 0.5);
    assert_eq!(r["payload_bytes"].as_u64().unwrap(), 4 * 5000 * 100);
    assert_eq!(r["latencies_s"].as_array().unwrap().len(), 2);
    assert_eq!(run["nodes"].as_array().unwrap().len(), 1);
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(md.contains("| skew |"), "{md}");
}

#[test]
fn shuffle_size_sets_pairs_per_map_and_text_pairs_work() {
    let (_d, out) = bench(concat!(
        "--pattern rand --maps 2 --reduces 2 --shuffle-size 2MB",
        " --pair-size 1KB --type text --runs 1"
    ));
    let r = &results(&out)[0];
    assert_eq!(r["config"]["pairs_per_map"].as_u64().unwrap(), 1000);
    let got: u64 = r["median_run"]["reducer_pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(got, 2000);
}

fn fails_with(args: &[&str], want: &str) {
    let out = sluice().args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} succeeded");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(want), "{args:?}: {err}");
}

#[test]
fn impossible_parameters_are_refused_clearly() {
    let refused = |extra: &str, want: &str| {
        let mut a = vec!["bench", "ohb", "--out", "/nonexistent/ohb"];
        a.extend(extra.split_whitespace());
        fails_with(&a, want);
    };
    refused(
        "--maps 4 --shuffle-size 100B --pair-size 100",
        "less than one 100-byte pair per map",
    );
    refused(
        "--pairs-per-map 10 --pair-size 8",
        "cannot hold the 16-byte key",
    );
    refused("--pairs-per-map 10 --pattern zipf", "avg, rand or skew");
    refused("", "give --pairs-per-map or --shuffle-size");
    refused(
        "--pairs-per-map 10 --shuffle-size 1MB",
        "cannot be used with",
    );
    fails_with(
        &[
            "run",
            "ohb",
            "--input",
            "synthetic:0",
            "--output",
            "/nonexistent/o",
        ],
        "synthetic:N with N >= 1",
    );
    fails_with(
        &[
            "run",
            "ohb",
            "--input",
            "/etc/hostname",
            "--output",
            "/nonexistent/o",
        ],
        "ohb: reads no files: give the input synthetic:MAPS",
    );
}
