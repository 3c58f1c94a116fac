//! The `sluice` binary as a user runs it: flags, errors, exit codes, and
//! failures of real processes (a full disk, a killed job).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::support::{ok, python, read_json, sluice};

fn gen(dir: &Path, size: &str) -> PathBuf {
    let data = dir.join("text");
    ok(sluice()
        .args(["gen", "text", "--size", size, "--seed", "3", "--out"])
        .arg(&data)
        .output()
        .unwrap());
    data
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn staging_dirs(parent: &Path) -> Vec<String> {
    std::fs::read_dir(parent)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".sluice-"))
        .collect()
}

#[test]
fn demo_generates_counts_and_prints_the_top_words() {
    let d = tempfile::tempdir().unwrap();
    let out = ok(sluice()
        .args(["demo", "--size", "2MB", "--dir"])
        .arg(d.path())
        .output()
        .unwrap());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("top 10 words:"), "{stdout}");
    assert!(stderr(&out).contains("REDUCE_OUTPUT_RECORDS"));
    let report = read_json(&d.path().join("wordcount-report.json"));
    assert!(report["phases"]["total_s"].as_f64().unwrap() > 0.0);
    assert!(report["counters"]["MAP_INPUT_RECORDS"].as_u64().unwrap() > 0);
    assert!(report["local"]["peak_rss_bytes"].as_u64().unwrap() > 0);
}

#[test]
fn run_writes_the_report_and_refuses_existing_output() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "500KB");
    let out = d.path().join("wc");
    let report = d.path().join("r.json");
    let args = |o: &Path| {
        let mut c = sluice();
        c.args(["run", "wordcount", "--threads", "2", "--input"])
            .arg(&data)
            .arg("--output")
            .arg(o)
            .arg("--report")
            .arg(&report);
        c
    };
    ok(args(&out).output().unwrap());
    let r = read_json(&report);
    assert_eq!(r["job"], "wordcount");
    assert_eq!(r["local"]["threads"], 2);
    let again = args(&out).output().unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );
    ok(args(&out).arg("--overwrite").output().unwrap());
}

#[test]
fn malformed_flags_and_missing_input_are_clear_errors() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("o");
    let o = sluice()
        .args([
            "run",
            "wordcount",
            "--input",
            "x",
            "--memory",
            "banana",
            "--output",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("invalid size 'banana'"),
        "{}",
        stderr(&o)
    );
    let o = sluice()
        .args(["run", "wordcount", "--input", "/nonexistent/in", "--output"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("input path does not exist: /nonexistent/in"),
        "{}",
        stderr(&o)
    );
    let o = sluice()
        .args(["run", "grep", "--input", "x", "--output"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(stderr(&o).contains("--pattern"), "{}", stderr(&o));
    assert!(!out.exists());
}

/// A directory that holds at most about 1 MB: a tmpfs when mounting works
/// (root), else the process's file size limit (`ulimit -f`, with SIGXFSZ
/// ignored so writes fail with EFBIG instead of killing the process).
enum SmallDisk {
    Tmpfs(PathBuf),
    Ulimit(PathBuf),
}

impl SmallDisk {
    fn new(dir: &Path) -> SmallDisk {
        let mnt = dir.join("small");
        std::fs::create_dir_all(&mnt).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(&mnt)
            .output()
            .is_ok_and(|o| o.status.success());
        if mounted {
            SmallDisk::Tmpfs(mnt)
        } else {
            SmallDisk::Ulimit(mnt)
        }
    }

    fn path(&self) -> &Path {
        match self {
            SmallDisk::Tmpfs(p) | SmallDisk::Ulimit(p) => p,
        }
    }

    fn command(&self, args: &[&std::ffi::OsStr]) -> Command {
        let mut c = Command::new("bash");
        let limit = match self {
            SmallDisk::Tmpfs(_) => "",
            SmallDisk::Ulimit(_) => "trap '' XFSZ; ulimit -f 1024; ",
        };
        c.arg("-c")
            .arg(format!("{limit}exec \"$0\" \"$@\""))
            .arg(env!("CARGO_BIN_EXE_sluice"))
            .args(args);
        c
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        if let SmallDisk::Tmpfs(p) = self {
            let _ = Command::new("umount").arg(p).output();
        }
    }
}

#[test]
fn a_full_disk_during_spill_fails_cleanly() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "6MB");
    let disk = SmallDisk::new(d.path());
    let out = d.path().join("sorted");
    let o = disk
        .command(&[
            "run".as_ref(),
            "sort".as_ref(),
            "--memory".as_ref(),
            "64MB".as_ref(),
            "--input".as_ref(),
            data.as_os_str(),
            "--output".as_ref(),
            out.as_os_str(),
            "--spill-dir".as_ref(),
            disk.path().as_os_str(),
        ])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("No space left on device") || err.contains("File too large"),
        "{err}"
    );
    assert!(err.contains("spill"), "{err}");
    assert!(!out.exists());
    assert!(staging_dirs(d.path()).is_empty());
    // The job removed its spill files from the small disk.
    assert_eq!(std::fs::read_dir(disk.path()).unwrap().count(), 0);
}

#[test]
fn a_killed_job_leaves_no_output_and_the_next_run_cleans_up() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "20MB");
    let out = d.path().join("wc");
    let mut child = sluice()
        .args([
            "run",
            "wordcount",
            "--grouping",
            "sort",
            "--memory",
            "4MB",
            "-q",
            "--input",
        ])
        .arg(&data)
        .arg("--output")
        .arg(&out)
        .spawn()
        .unwrap();
    let start = Instant::now();
    // Kill it once it has started spilling.
    loop {
        let spilling = staging_dirs(d.path()).iter().any(|s| {
            let spill = d.path().join(s).join("_temporary/_spill");
            std::fs::read_dir(spill).is_ok_and(|mut r| r.next().is_some())
        });
        if spilling || start.elapsed() > Duration::from_secs(60) {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("job finished before it could be killed: {status}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!out.exists(), "a killed job must not leave output");
    assert_eq!(
        staging_dirs(d.path()).len(),
        1,
        "only the hidden staging directory remains"
    );
    ok(sluice()
        .args(["run", "wordcount", "-q", "--input"])
        .arg(&data)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap());
    assert!(out.join("_SUCCESS").exists());
    assert!(
        staging_dirs(d.path()).is_empty(),
        "the stale staging directory was removed"
    );
}

#[test]
fn sort_and_grep_through_the_cli_agree_with_coreutils_semantics() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "1MB");
    let mut lines: Vec<Vec<u8>> = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        let b = std::fs::read(f).unwrap();
        lines.extend(
            b.split(|&c| c == b'\n')
                .filter(|l| !l.is_empty())
                .map(<[u8]>::to_vec),
        );
    }
    let sorted = d.path().join("sorted");
    ok(sluice()
        .args([
            "run",
            "sort",
            "--reducers",
            "3",
            "--memory",
            "2MB",
            "-q",
            "--input",
        ])
        .arg(&data)
        .arg("--output")
        .arg(&sorted)
        .output()
        .unwrap());
    let mut got = Vec::new();
    for p in 0..3 {
        got.extend(std::fs::read(sorted.join(format!("part-r-{p:05}"))).unwrap());
    }
    let mut want = lines.clone();
    want.sort();
    assert_eq!(
        got,
        want.iter()
            .flat_map(|l| [l.as_slice(), b"\n"].concat())
            .collect::<Vec<u8>>()
    );
}

#[test]
fn model_reproduces_the_papers_hadoop_terasort() {
    let o = ok(sluice()
        .args([
            "model",
            "--nodes",
            "1460",
            "--input",
            "1TB",
            "--disk-read",
            "260MB/s",
            "--net",
            "110MB/s",
            "--actual",
            "62",
            "--json",
        ])
        .output()
        .unwrap());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ideal = v["ideal_seconds"].as_f64().unwrap();
    assert!((ideal - 8.86).abs() < 0.01, "{ideal}");
    assert_eq!(v["variant"], "in-memory");
    assert_eq!(v["ideal_equivalent_nodes"].as_f64().unwrap().round(), 209.0);
    let o = ok(sluice()
        .args([
            "model",
            "--nodes",
            "1800",
            "--input",
            "1TB",
            "--disk-read",
            "80MB/s",
            "--net",
            "110MB/s",
            "--grep",
        ])
        .output()
        .unwrap());
    assert!(String::from_utf8_lossy(&o.stdout).contains("ideal time   6.94 s"));
}

#[test]
fn probe_saves_a_profile_that_run_reports_account_against() {
    let d = tempfile::tempdir().unwrap();
    let hw = d.path().join("hw.json");
    let o = ok(sluice()
        .args(["probe", "--size", "16MB", "--reps", "2", "--dir"])
        .arg(d.path())
        .arg("--out")
        .arg(&hw)
        .output()
        .unwrap());
    assert!(String::from_utf8_lossy(&o.stdout).contains("MB/s median"));
    let profile = read_json(&hw);
    assert!(profile["disk_read"]["measured"]["median"].as_f64().unwrap() > 0.0);

    let data = gen(d.path(), "300KB");
    let report = d.path().join("r.json");
    let run = |hw: &Path, out: &str| {
        ok(sluice()
            .args(["run", "grep", "--pattern", "a", "-q", "--input"])
            .arg(&data)
            .arg("--output")
            .arg(d.path().join(out))
            .arg("--hardware")
            .arg(hw)
            .arg("--report")
            .arg(&report)
            .output()
            .unwrap());
        let r = read_json(&report);
        r["local"]["model"].clone()
    };
    let m = run(&hw, "o1");
    assert!(m["hardware"]["source"]
        .as_str()
        .unwrap()
        .contains("hw.json"));
    assert!(m["ideal_seconds"].as_f64().unwrap() > 0.0 && m["efficiency"].as_f64().unwrap() > 0.0);
    let m = run(&d.path().join("missing.json"), "o2");
    let source = m["hardware"]["source"].as_str().unwrap();
    assert!(
        source.starts_with("defaults") && source.contains("sluice probe"),
        "{source}"
    );
}

/// A hardware profile whose disk is far slower than its memory.
fn slow_disk_profile(path: &Path) {
    let m = |rate: f64| {
        serde_json::json!({"measured": {
        "samples": [rate], "median": rate, "min": rate, "max": rate, "spread": 0.0}})
    };
    let p = serde_json::json!({
        "measured_at": 0, "dir": ".", "size": 1,
        "disk_read": m(100e6), "disk_write": m(50e6),
        "memory": m(10e9), "network": m(1e9),
    });
    std::fs::write(path, p.to_string()).unwrap();
}

#[test]
fn the_model_charges_spills_that_fit_in_memory_and_cached_input_at_memory_speed() {
    let d = tempfile::tempdir().unwrap();
    let hw = d.path().join("hw.json");
    slow_disk_profile(&hw);
    let data = gen(d.path(), "4MB");
    let report = d.path().join("r.json");
    // 2 MB of memory for 4 MB of map output: an external sort. The input
    // was just written, so the page cache holds it.
    let o = ok(sluice()
        .args(["run", "sort", "--memory", "2MB", "--input"])
        .arg(&data)
        .arg("--output")
        .arg(d.path().join("out"))
        .arg("--hardware")
        .arg(&hw)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap());
    let m = read_json(&report)["local"]["model"].clone();
    assert_eq!(m["variant"], "external", "{m}");
    assert_eq!(m["residency"]["output_synced"], true, "{m}");
    assert!(
        m["residency"]["input_cached"].as_f64().unwrap() > 0.9,
        "{m}"
    );
    let moves = m["movements"].as_array().unwrap();
    let on = |what: &str| -> Vec<&str> {
        moves
            .iter()
            .filter(|mv| mv["what"] == what)
            .map(|mv| mv["resource"].as_str().unwrap())
            .collect()
    };
    assert_eq!(on("spill write"), ["memory"], "{m}");
    assert_eq!(on("spill read"), ["memory"], "{m}");
    assert!(on("input read").contains(&"memory"), "{m}");
    // Synced output goes to the disk, at 50 MB/s.
    assert_eq!(on("output write"), ["disk"], "{m}");
    let out_s: f64 = moves
        .iter()
        .filter(|mv| mv["what"] == "output write")
        .map(|mv| mv["seconds"].as_f64().unwrap())
        .sum();
    assert!(m["phase2"]["ideal_s"].as_f64().unwrap() >= out_s, "{m}");
    let text = stderr(&o);
    assert!(
        text.contains("spill write") && text.contains("synced before commit"),
        "{text}"
    );
}

#[test]
fn a_probe_that_cannot_write_says_so_and_still_saves() {
    let d = tempfile::tempdir().unwrap();
    let hw = d.path().join("hw.json");
    let o = ok(sluice()
        .args(["probe", "--size", "1MB", "--reps", "1", "--dir"])
        .arg(d.path().join("no-such-dir"))
        .arg("--out")
        .arg(&hw)
        .output()
        .unwrap());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("skipped") && text.contains("no-such-dir"),
        "{text}"
    );
    assert!(hw.exists());
}

#[test]
fn every_pavlo_task_matches_duckdb() {
    let py = python();
    assert!(
        py.exists(),
        "no Python with DuckDB at {} (run bash bench/setup.sh)",
        py.display()
    );
    let d = tempfile::tempdir().unwrap();
    let o = ok(sluice()
        .args([
            "bench",
            "pavlo",
            "--scale",
            "3MB",
            "--runs",
            "1",
            "--threads",
            "2",
            "--work",
        ])
        .arg(d.path())
        .arg("--python")
        .arg(&py)
        .output()
        .unwrap());
    let table = String::from_utf8_lossy(&o.stdout);
    assert_eq!(table.matches("same as DuckDB").count(), 12, "{table}");
    assert!(d.path().join("pavlo.md").exists());
}

fn pavlo_run(dir: &Path, job: &str, input: &Path, policy: &str, extra: &[&str]) -> Output {
    sluice()
        .args([
            "run",
            job,
            "-q",
            "--threads",
            "2",
            "--bad-records",
            policy,
            "--input",
        ])
        .arg(input)
        .arg("--output")
        .arg(dir.join(format!("{job}-{policy}")))
        .arg("--report")
        .arg(dir.join(format!("{job}-{policy}.json")))
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn malformed_pavlo_rows_fail_or_are_skipped_and_counted() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("pv");
    ok(sluice()
        .args(["gen", "pavlo", "--scale", "1MB", "--out"])
        .arg(&data)
        .output()
        .unwrap());
    let uv = data.join("uservisits/part-00000");
    let mut text = std::fs::read_to_string(&uv).unwrap();
    let good_rows = text.lines().count();
    let bad_date = "1.2.3.4|http://x|2000-13-45|1.0|ua|USA|en-US|w|5\n";
    let short = "1.2.3.4|http://x|2000-01-16\n";
    let offset = text.len();
    text.push_str(bad_date);
    text.push_str(short);
    std::fs::write(&uv, &text).unwrap();
    let rk = data.join("rankings/part-00000");
    let mut rankings = std::fs::read_to_string(&rk).unwrap();
    rankings.push_str("http://bad|ten|3\n");
    std::fs::write(&rk, &rankings).unwrap();

    let failed = pavlo_run(
        d.path(),
        "pavlo-agg-large",
        &data.join("uservisits"),
        "fail",
        &[],
    );
    let err = stderr(&failed);
    assert_eq!(failed.status.code(), Some(1), "{err}");
    assert!(
        err.contains("part-00000")
            && err.contains(&format!("offset {offset}"))
            && err.contains("not a date"),
        "{err}"
    );
    assert!(!d.path().join("pavlo-agg-large-fail").exists());

    ok(pavlo_run(
        d.path(),
        "pavlo-agg-large",
        &data.join("uservisits"),
        "skip",
        &[],
    ));
    let r = read_json(&d.path().join("pavlo-agg-large-skip.json"));
    assert_eq!(r["counters"]["BAD_RECORDS"], 2);
    assert_eq!(r["counters"]["MAP_INPUT_RECORDS"], good_rows as u64 + 2);
    let side = std::fs::read_to_string(
        d.path()
            .join("pavlo-agg-large-skip/_bad_records/part-m-00000"),
    )
    .unwrap();
    assert_eq!(side, format!("{bad_date}{short}"));

    let failed = pavlo_run(
        d.path(),
        "pavlo-selection",
        &data.join("rankings"),
        "fail",
        &[],
    );
    assert!(
        stderr(&failed).contains("field 1 is not a number"),
        "{}",
        stderr(&failed)
    );
    let rankings_dir = data.join("rankings").display().to_string();
    let failed = pavlo_run(
        d.path(),
        "pavlo-join",
        &data.join("uservisits"),
        "fail",
        &["--rankings", &rankings_dir],
    );
    assert!(
        stderr(&failed).contains("not a Rankings row"),
        "{}",
        stderr(&failed)
    );
}

#[test]
fn convert_to_pages_and_aggregate_the_same_answer() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("pv");
    ok(sluice()
        .args(["gen", "pavlo", "--scale", "2MB", "--out"])
        .arg(&data)
        .output()
        .unwrap());
    let paged = d.path().join("uv-paged");
    ok(sluice()
        .args([
            "convert",
            "--schema",
            "uservisits",
            "--page-size",
            "4KiB",
            "--input",
        ])
        .arg(data.join("uservisits"))
        .arg("--output")
        .arg(&paged)
        .output()
        .unwrap());
    let total = |out: &Path| -> (usize, f64) {
        let text = std::fs::read_to_string(out.join("part-r-00000")).unwrap()
            + &std::fs::read_to_string(out.join("part-r-00001")).unwrap();
        let sums: Vec<f64> = text
            .lines()
            .map(|l| l.split('\t').nth(1).unwrap().parse().unwrap())
            .collect();
        (sums.len(), sums.iter().sum())
    };
    let run = |input: &Path, fmt: &str, out: &str| {
        ok(sluice()
            .args([
                "run",
                "pavlo-agg-small",
                "-q",
                "--reducers",
                "2",
                "--page-size",
                "4KiB",
                "--input-format",
                fmt,
                "--input",
            ])
            .arg(input)
            .arg("--output")
            .arg(d.path().join(out))
            .output()
            .unwrap());
        total(&d.path().join(out))
    };
    let (n_text, s_text) = run(&data.join("uservisits"), "text", "a");
    let (n_paged, s_paged) = run(&paged, "paged", "b");
    assert_eq!(n_text, n_paged);
    assert!(
        (s_text - s_paged).abs() < 1e-6 * s_text,
        "{s_text} vs {s_paged}"
    );

    // A malformed row stops the conversion, naming file and offset.
    let bad = d.path().join("bad.txt");
    std::fs::write(
        &bad,
        "1.2.3.4|u|2000-01-01|1.5|a|b|c|d|3\n1.2.3.4|u|2000-01-01|x|a|b|c|d|3\n",
    )
    .unwrap();
    let o = sluice()
        .args(["convert", "--schema", "uservisits", "--input"])
        .arg(&bad)
        .arg("--output")
        .arg(d.path().join("c"))
        .output()
        .unwrap();
    assert!(
        stderr(&o).contains("bad.txt: malformed row at offset 35"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_indexed_join_builds_on_the_weeks_visits_and_agrees() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("pv");
    ok(sluice()
        .args(["gen", "pavlo", "--scale", "4MB", "--out"])
        .arg(&data)
        .output()
        .unwrap());
    let indexed = d.path().join("uv-by-date");
    ok(sluice()
        .args([
            "index",
            "-q",
            "--key-field",
            "2",
            "--chunk-size",
            "16KiB",
            "--input",
        ])
        .arg(data.join("uservisits"))
        .arg("--output")
        .arg(&indexed)
        .output()
        .unwrap());
    let join = |input: &Path, out: &str| -> (String, serde_json::Value) {
        let report = d.path().join(format!("{out}.json"));
        ok(sluice()
            .args(["run", "pavlo-join", "-q", "--rankings"])
            .arg(data.join("rankings"))
            .arg("--input")
            .arg(input)
            .arg("--output")
            .arg(d.path().join(out))
            .arg("--report")
            .arg(&report)
            .output()
            .unwrap());
        let line = std::fs::read_to_string(d.path().join(out).join("part-r-00000")).unwrap();
        (line, read_json(&report))
    };
    let (full, _) = join(&data.join("uservisits"), "full");
    let (pruned, report) = join(&indexed, "pruned");
    // The pruned run scanned Rankings (its input) with a table of the week's visits.
    assert!(
        report["input"].as_str().unwrap().ends_with("rankings"),
        "{report}"
    );
    let fields =
        |l: &str| -> Vec<String> { l.trim_end().split(['\t', '|']).map(str::to_owned).collect() };
    let (a, b) = (fields(&full), fields(&pruned));
    assert_eq!(a[0], b[0], "same top source IP");
    for i in 1..3 {
        let (x, y): (f64, f64) = (a[i].parse().unwrap(), b[i].parse().unwrap());
        assert!((x - y).abs() < 1e-9 * x.abs().max(1.0), "{x} vs {y}");
    }
}

#[test]
fn a_failed_conversion_or_generation_leaves_no_partial_data_set() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("in");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(bad.join("a.txt"), "http://x|1|2\n".repeat(1000)).unwrap();
    std::fs::write(bad.join("b.txt"), "http://x|1|2\nhttp://y|one|2\n").unwrap();
    let out = d.path().join("paged");
    let o = sluice()
        .args(["convert", "--schema", "rankings", "--input"])
        .arg(&bad)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("b.txt: malformed row at offset 13"),
        "{}",
        stderr(&o)
    );
    assert!(
        !out.exists(),
        "the good file's pages were not committed alone"
    );
    assert!(staging_dirs(d.path()).is_empty());
    // A generator refuses to mix with existing data, and leaves it alone.
    let text = d.path().join("text");
    std::fs::create_dir(&text).unwrap();
    std::fs::write(text.join("keep"), b"x").unwrap();
    let o = sluice()
        .args(["gen", "text", "--size", "10KB", "--out"])
        .arg(&text)
        .output()
        .unwrap();
    assert!(stderr(&o).contains("not empty"), "{}", stderr(&o));
    assert_eq!(std::fs::read(text.join("keep")).unwrap(), b"x");
    ok(sluice()
        .args(["gen", "text", "--size", "10KB", "--overwrite", "--out"])
        .arg(&text)
        .output()
        .unwrap());
    assert!(text.join("_SUCCESS").exists() && !text.join("keep").exists());
}

#[test]
fn an_index_over_a_bad_key_fails_and_leaves_nothing() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("rows.txt");
    std::fs::write(&input, "http://a|1|2\nhttp://b|x|2\n").unwrap();
    let out = d.path().join("idx");
    let o = sluice()
        .args([
            "index",
            "-q",
            "--key-field",
            "1",
            "--key-type",
            "int",
            "--input",
        ])
        .arg(&input)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("rows.txt") && stderr(&o).contains("offset 13"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
    assert!(staging_dirs(d.path()).is_empty());
}

#[test]
fn terasort_output_validates_and_a_damaged_one_does_not() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("tera");
    ok(sluice()
        .args(["gen", "tera", "--rows", "30000", "--out"])
        .arg(&data)
        .output()
        .unwrap());
    let out = d.path().join("sorted");
    ok(sluice()
        .args([
            "run",
            "terasort",
            "-q",
            "--reducers",
            "3",
            "--memory",
            "2MB",
            "--input",
        ])
        .arg(&data)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap());
    let validate = |against: &Path| {
        sluice()
            .args(["teravalidate", "--input"])
            .arg(&out)
            .arg("--against")
            .arg(against)
            .output()
            .unwrap()
    };
    let o = ok(validate(&data));
    assert!(String::from_utf8_lossy(&o.stdout).contains("records 30000"));
    // Every part holds records (the sampled split points spread them).
    for p in 0..3 {
        assert!(
            std::fs::metadata(out.join(format!("part-r-{p:05}")))
                .unwrap()
                .len()
                > 0
        );
    }
    // Swap the first two records of a part: out of order.
    let part = out.join("part-r-00001");
    let mut bytes = std::fs::read(&part).unwrap();
    let (a, b) = bytes.split_at_mut(100);
    a.swap_with_slice(&mut b[..100]);
    let unchanged = a == &b[..100];
    std::fs::write(&part, &bytes).unwrap();
    let o = validate(&data);
    if !unchanged {
        assert!(
            stderr(&o).contains("out of order") && stderr(&o).contains("part-r-00001"),
            "{}",
            stderr(&o)
        );
    }
    // Drop a record: the count and checksum no longer match the input.
    std::fs::write(&part, &bytes[100..]).unwrap();
    let o = validate(&data);
    assert!(
        stderr(&o).contains("output has 29999 records"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_request_the_flags_cannot_make_is_refused_naming_what_is_wrong() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("in.txt");
    std::fs::write(&input, "a b\n").unwrap();
    let out = d.path().join("out");
    let refused = |args: &[&str], want: &str| {
        let o = sluice()
            .arg("run")
            .args(args)
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(&out)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} left output");
    };
    refused(
        &["wordcont"],
        "no job named \"wordcont\" in this binary; its jobs are:",
    );
    refused(&["wordcount", "-D", "novalue"], "-D novalue: not key=value");
    refused(&["wordcount", "--params", "{"], "--params is not JSON");
    refused(
        &["wordcount", "--params", r#"{"grouping":"tree"}"#],
        "wordcount: parameters: unknown variant `tree`",
    );
    refused(&["grep"], "grep: needs a pattern (--pattern REGEX)");
}
