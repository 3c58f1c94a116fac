//! Two data centers on one host: `cluster up --datacenters 2`, WAN-aware
//! placement, data-center-local maps and ARTS, with the bytes that cross
//! data centers in the report and the local engine's answers.

use crate::support::*;

/// Blocks (not output blocks) in each worker's data directory.
fn blocks_per_worker(c: &Cluster) -> Vec<usize> {
    c.data_dirs()
        .iter()
        .map(|d| {
            block_files(d)
                .iter()
                .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('j'))
                .count()
        })
        .collect()
}

/// Word count on the cluster with `extra` flags; its report.
fn wordcount(
    c: &Cluster,
    dir: &std::path::Path,
    output: &str,
    extra: &[&str],
) -> serde_json::Value {
    let report = dir.join(format!("{output}.json"));
    ok(submit_wc(c, "words", output)
        .args(extra)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap());
    read_json(&report)["cluster"].clone()
}

fn crossed(r: &serde_json::Value, field: &str) -> u64 {
    r["crossings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c[field].as_u64().unwrap())
        .sum()
}

#[test]
fn arts_keeps_the_shuffle_in_the_data_center_of_the_map_output() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "3MB");
    // A slow WAN: a partition's copy across takes longer than waiting
    // for a reduce slot at home.
    let links_file = d.path().join("wan");
    std::fs::write(&links_file, "wan 10KB/s\n").unwrap();
    let dir = d.path().join("cluster");
    ok(sluice()
        .args([
            "cluster",
            "up",
            "--datacenters",
            "2",
            "--workers",
            "2,2",
            "--slots",
            "1",
        ])
        .args([
            "--coordinator-flags",
            &format!(
                "--dc-local-maps --reduce-scheduler arts --placement wan-aware --heartbeat-ms 50 \
                 --links {}",
                links_file.display()
            ),
            "--dir",
        ])
        .arg(&dir)
        .output()
        .unwrap());
    let c = Cluster { dir };
    let status =
        String::from_utf8(ok(c.cmd(&["cluster", "status"]).output().unwrap()).stdout).unwrap();
    for line in [
        "/dc1\n",
        "  /dc1/rack1\n",
        "/dc2\n",
        "    /dc2/rack2/worker-3 ",
    ] {
        assert!(status.contains(line), "{line:?} in\n{status}");
    }

    // The links between data centers, probed by the workers, as ARTS
    // reads them.
    let links = d.path().join("links");
    let probe = c
        .cmd(&[
            "probe",
            "--network",
            "--link-size",
            "4MB",
            "--reps",
            "1",
            "--links",
            links.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let printed = String::from_utf8(ok(probe).stdout).unwrap();
    assert!(printed.contains("dc1->dc2 "), "{printed}");
    let text = std::fs::read_to_string(&links).unwrap();
    for pair in ["\ndc1->dc2 ", "\ndc2->dc1 ", "\nlan "] {
        assert!(text.contains(pair), "{pair:?} in {text}");
    }

    // Every worker sending to every other at once: each one's rates and
    // receive skew, and the median worker's receive rate saved as the
    // model's N, which a run's account then uses.
    let hw = d.path().join("hw.json");
    let probe = c
        .cmd(&[
            "probe",
            "--network",
            "--all-to-all",
            "--link-size",
            "2MB",
            "--reps",
            "2",
            "--out",
            hw.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let printed = String::from_utf8(ok(probe).stdout).unwrap();
    assert!(printed.contains("all-to-all among 4 workers"), "{printed}");
    let rows = printed
        .lines()
        .filter(|l| {
            l.strip_prefix("worker ")
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        })
        .count();
    assert_eq!(rows, 4, "a row per worker: {printed}");
    let profile = read_json(&hw);
    // The model takes each probe's fastest repetition (a bound).
    let n = profile["network_all_to_all"]["measured"]["max"]
        .as_f64()
        .unwrap();
    assert!(n > 0.0, "{profile}");
    let report = d.path().join("model.json");
    ok(sluice()
        .args(["run", "wordcount", "-q", "--input"])
        .arg(&data)
        .arg("--output")
        .arg(d.path().join("local-wc"))
        .arg("--hardware")
        .arg(&hw)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap());
    let model = &read_json(&report)["local"]["model"]["hardware"];
    assert_eq!(model["network"].as_f64(), Some(n));
    assert!(
        model["source"].as_str().unwrap().contains("all-to-all"),
        "{model}"
    );

    // WAN-aware: a put from dc1 keeps both replicas of every block there
    // (workers 0 and 1); dc2's workers hold none.
    ok(c.cmd(&["put"])
        .arg(&data)
        .args([
            "--dataset",
            "words",
            "--block-size",
            "256KB",
            "--replication",
            "2",
        ])
        .args(["--datacenter", "dc1"])
        .output()
        .unwrap());
    let held = blocks_per_worker(&c);
    assert!(held[0] >= 10 && held[0] == held[1], "{held:?}");
    assert_eq!(held[2..], [0, 0], "{held:?}");

    // ARTS: every map in dc1 (data-center-local), every reduce with the
    // map output there: nothing crosses.
    let arts = wordcount(&c, d.path(), "counts", &[]);
    assert_eq!(arts["reduce_scheduler"], "arts");
    assert_eq!(arts["wan_bytes"], 0, "{}", arts["crossings"]);
    let by_dc = arts["map_output_by_datacenter"].as_object().unwrap();
    assert_eq!(by_dc.keys().collect::<Vec<_>>(), ["dc1"]);
    assert!(
        arts["maps_by_level"].get("any").is_none(),
        "{}",
        arts["maps_by_level"]
    );
    counts_match_local(&c, d.path(), &data);

    // Early start on the same cluster: reduces go to whichever worker
    // asks, dc2's idle ones too. Whatever crossed is exactly what dc2's
    // reduces fetched (all map output is in dc1), and the answer is the
    // same.
    let early = wordcount(
        &c,
        d.path(),
        "early",
        &["-D", "sluice.reduce.scheduler=early"],
    );
    assert_eq!(early["reduce_scheduler"], "slowstart 0.05");
    let uids: Vec<String> = c.json()["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["uid"].as_str().unwrap().to_owned())
        .collect();
    let dc2_fetched: u64 = early["per_worker"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| uids[2..].iter().any(|u| w["worker"] == u.as_str()))
        .map(|w| w["shuffle_bytes"].as_u64().unwrap())
        .sum();
    // (A backup attempt killed in dc2 fetched across too.)
    let shuffled = crossed(&early, "shuffle_bytes");
    if early["attempts"]["killed"] == 0 {
        assert_eq!(shuffled, dc2_fetched, "{}", early["crossings"]);
    }
    assert!(shuffled >= dc2_fetched, "{}", early["crossings"]);
    assert_eq!(early["wan_bytes"].as_u64().unwrap(), shuffled);
    get(&c, "early", &d.path().join("early-out"));
    get(&c, "counts", &d.path().join("counts-out"));
    same_dirs(&d.path().join("early-out"), &d.path().join("counts-out"));
}

#[test]
fn places_come_from_flags_or_a_topology_file_and_bad_ones_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let topo = d.path().join("topology");
    std::fs::write(&topo, "# host place\nh1 /east/r7\nh2 /west/r1\n").unwrap();
    let run = |args: &[&str]| {
        sluice()
            .args(["worker", "--coordinator", "127.0.0.1:1", "--data-dir"])
            .arg(d.path().join("w"))
            .args(args)
            .output()
            .unwrap()
    };
    let bad = fails(run(&["--location", "east/r7"]));
    assert!(bad.contains("is not /DATACENTER/RACK[/HOST]"), "{bad}");
    let missing = fails(run(&["--topology", topo.to_str().unwrap(), "--host", "h9"]));
    assert!(
        missing.contains("host h9 is not in topology file"),
        "{missing}"
    );
    std::fs::write(&topo, "h1\n").unwrap();
    let torn = fails(run(&["--topology", topo.to_str().unwrap(), "--host", "h1"]));
    assert!(
        torn.contains(":1: expected `HOST /DATACENTER/RACK`"),
        "{torn}"
    );
    let mixed = fails(
        sluice()
            .args([
                "cluster",
                "up",
                "--datacenters",
                "3",
                "--workers",
                "1,1",
                "--dir",
            ])
            .arg(d.path().join("c"))
            .output()
            .unwrap(),
    );
    assert!(
        mixed.contains("--workers names 2 data centers, --datacenters 3"),
        "{mixed}"
    );
}

#[test]
fn an_all_to_all_probe_needs_two_workers() {
    let d = tempfile::tempdir().unwrap();
    let c = Cluster::up(d.path(), 1, "");
    let hw = d.path().join("hw.json");
    let out = c
        .cmd(&[
            "probe",
            "--network",
            "--all-to-all",
            "--out",
            hw.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(fails(out).contains("needs two live workers or more (1 live)"));
    assert!(!hw.exists());
}
