//! `sluice bench cluster-sim`: a real coordinator driven by simulated
//! workers over the real protocol; the report counts what happened.

use serde_json::Value;

use crate::support::{ok, sluice};

/// Runs a simulation with `args` and returns its JSON report.
fn simulate(args: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    ok(sluice()
        .args(["bench", "cluster-sim"])
        .args(args)
        .arg("--timeout-s=120")
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap());
    serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap()
}

fn n(r: &Value, path: &[&str]) -> u64 {
    let v = path.iter().fold(r, |v, k| &v[*k]);
    v.as_u64().unwrap_or_else(|| panic!("{path:?} in {r}"))
}

fn f(r: &Value, key: &str) -> f64 {
    r[key].as_f64().unwrap_or_else(|| panic!("{key} in {r}"))
}

#[test]
fn a_small_run_reports_what_happened() {
    let r = simulate(&[
        "--workers=3",
        "--slots=2",
        "--maps=30",
        "--reduces=2",
        "--task-ms=40",
        "--heartbeat-ms=50",
    ]);
    assert_eq!(r["job_state"], "succeeded", "{r}");
    // Nothing failed: one attempt a task, as the workers and the
    // coordinator both count them.
    assert_eq!(n(&r, &["launches"]), 32);
    assert_eq!(n(&r, &["coordinator_launched"]), 32);
    assert_eq!(n(&r, &["sim", "launched_maps"]), 30);
    assert_eq!(n(&r, &["sim", "reported_maps"]), 30);
    assert_eq!(n(&r, &["sim", "launched_reduces"]), 2);
    assert_eq!(n(&r, &["sim", "reported_reduces"]), 2);
    assert_eq!(n(&r, &["sim", "registered"]), 3);
    assert_eq!(n(&r, &["workers_lost"]), 0);
    // The output: one data set of one block a reduce.
    assert_eq!(n(&r, &["catalog_datasets"]), 1);
    assert_eq!(n(&r, &["catalog_blocks"]), 2);
    // Every reduce asked for the map outputs at least once.
    assert!(n(&r, &["sim", "map_output_calls"]) >= 2);
    // Heartbeats: at least one a report, each counted in the histogram.
    let beats = n(&r, &["heartbeats"]);
    assert!(beats >= 32, "{r}");
    let counted: u64 = r["sim"]["beats"]["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(counted, beats);
    assert!(f(&r, "heartbeat_p50_ms") > 0.0);
    assert!(f(&r, "heartbeat_p99_ms") >= f(&r, "heartbeat_p50_ms"));
    // The ratios follow from the counts.
    let makespan = f(&r, "makespan_s");
    assert!((f(&r, "launches_per_s") - 32.0 / makespan).abs() < 1e-6);
    let ideal = 32.0 * 0.040 / 6.0;
    assert!((f(&r, "ideal_makespan_s") - ideal).abs() < 1e-9);
    assert!((f(&r, "slot_utilization") - ideal / makespan).abs() < 1e-9);
    assert!(f(&r, "slot_utilization") > 0.0 && f(&r, "slot_utilization") <= 1.3);
    // The coordinator's costs, read from its /proc entry.
    assert!(n(&r, &["coordinator_peak_rss_bytes"]) > 1 << 20);
    assert!(f(&r, "coordinator_cpu_total_s") > 0.0);
    assert_eq!(n(&r, &["sim_processes"]), 1);
}

#[test]
fn a_silent_worker_is_lost_and_its_attempts_run_again() {
    let r = simulate(&[
        "--workers=3",
        "--silent=1",
        "--slots=2",
        "--maps=12",
        "--reduces=1",
        "--task-ms=40",
        "--heartbeat-ms=50",
        "--worker-timeout-ms=1000",
    ]);
    assert_eq!(r["job_state"], "succeeded", "{r}");
    assert_eq!(n(&r, &["sim", "silenced"]), 1);
    assert_eq!(n(&r, &["workers_lost"]), 1);
    let lost = n(&r, &["coordinator_lost_attempts"]);
    assert!(lost >= 1, "{r}");
    // Each task done once; the lost attempts were launched again.
    assert_eq!(n(&r, &["sim", "reported_maps"]), 12);
    assert_eq!(n(&r, &["sim", "reported_reduces"]), 1);
    assert_eq!(n(&r, &["launches"]), 13 + lost);
    assert_eq!(n(&r, &["coordinator_launched"]), 13 + lost);
}

#[test]
fn bad_settings_are_refused_clearly() {
    for (args, says) in [
        (&["--workers=0"][..], "--workers and --maps must be >= 1"),
        (
            &["--workers=2", "--silent=2"][..],
            "--silent must leave a worker",
        ),
    ] {
        let out = sluice()
            .args(["bench", "cluster-sim"])
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{err}");
    }
}
