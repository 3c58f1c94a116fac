//! The iterative applications as a user runs them. k-means: generated
//! points, centres from the local engine and from a cluster, each checked
//! against numpy's Lloyd iterations from the same initial centres; bad
//! points refused or skipped. PageRank: a generated graph, ranks from the
//! local engine and a cluster checked against numpy's power iteration of
//! networkx's formula (dangling pages' rank spread over every page).

use std::path::{Path, PathBuf};

use crate::support::*;

/// numpy's k-means: `iterations` Lloyd steps over the points in `input`
/// from the centres in `init` (lines `index TAB coordinates`); a centre no
/// point chose stays. Prints the centres, one a line.
const ORACLE: &str = r#"
import sys, pathlib, numpy as np
points = np.vstack([np.loadtxt(p, ndmin=2) for p in sorted(pathlib.Path(sys.argv[1]).glob("part-*"))])
init = {}
for p in pathlib.Path(sys.argv[2]).glob("part-*"):
    for line in open(p):
        i, xs = line.rstrip("\n").split("\t")
        init[int(i)] = [float(x) for x in xs.split()]
c = np.array([init[i] for i in range(len(init))])
for _ in range(int(sys.argv[3])):
    d = ((points[:, None, :] - c[None, :, :]) ** 2).sum(axis=2)
    near = d.argmin(axis=1)
    for k in range(len(c)):
        mine = points[near == k]
        if len(mine):
            c[k] = mine.mean(axis=0)
for row in c:
    print(" ".join(repr(float(x)) for x in row))
"#;

/// The centres in a result directory (or the one file `get` writes for a
/// data set of one file), by index.
fn centres(dir: &Path) -> Vec<Vec<f64>> {
    let files = if dir.is_dir() {
        part_files(dir)
    } else {
        vec![dir.to_owned()]
    };
    let mut rows: Vec<(usize, Vec<f64>)> = files
        .iter()
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| {
                    let (i, xs) = l.split_once('\t').unwrap();
                    let p = xs.split(' ').map(|x| x.parse().unwrap()).collect();
                    (i.parse().unwrap(), p)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    rows.sort_by_key(|(i, _)| *i);
    rows.into_iter().map(|(_, p)| p).collect()
}

/// numpy's centres after `iterations` steps from the centres in `init`.
fn numpy(points: &Path, init: &Path, iterations: u32) -> Vec<Vec<f64>> {
    let py = python();
    assert!(
        py.exists(),
        "no Python with numpy at {} (run bash bench/setup.sh)",
        py.display()
    );
    let out = ok(std::process::Command::new(py)
        .args(["-c", ORACLE])
        .arg(points)
        .arg(init)
        .arg(iterations.to_string())
        .output()
        .unwrap());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split(' ').map(|x| x.parse().unwrap()).collect())
        .collect()
}

fn close(got: &[Vec<f64>], want: &[Vec<f64>]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        for (a, b) in g.iter().zip(w) {
            assert!(
                (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0),
                "{g:?} != {w:?}"
            );
        }
    }
}

fn gen_points(dir: &Path, points: &str) -> PathBuf {
    let out = dir.join("points");
    ok(sluice()
        .args([
            "gen",
            "kmeans",
            "--points",
            points,
            "--dims",
            "4",
            "--clusters",
            "5",
        ])
        .args(["--seed", "3", "--out"])
        .arg(&out)
        .output()
        .unwrap());
    out
}

/// Runs k-means on the local engine: `iterations` 0 gives the initial
/// centres.
fn local_kmeans(points: &Path, out: &Path, iterations: u32, extra: &[&str]) {
    ok(sluice()
        .args(["run", "kmeans", "--clusters", "5", "--seed", "11", "-q"])
        .args(["--iterations", &iterations.to_string()])
        .args(extra)
        .arg("--input")
        .arg(points)
        .arg("--output")
        .arg(out)
        .output()
        .unwrap());
}

#[test]
fn local_centres_equal_numpys_from_the_same_initial_centres() {
    let d = tempfile::tempdir().unwrap();
    let points = gen_points(d.path(), "20000");
    let init = d.path().join("init");
    local_kmeans(&points, &init, 0, &[]);
    assert_eq!(centres(&init).len(), 5);
    let out = d.path().join("centres");
    let assigned = d.path().join("assigned");
    let a = assigned.to_str().unwrap();
    local_kmeans(
        &points,
        &out,
        5,
        &["--split-size", "256KB", "--assignments", a],
    );
    close(&centres(&out), &numpy(&points, &init, 5));
    // Every point assigned, to a centre that exists.
    let lines: Vec<String> = part_files(&assigned)
        .iter()
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(lines.len(), 20000);
    assert!(lines
        .iter()
        .all(|l| l.rsplit_once('\t').unwrap().1.parse::<usize>().unwrap() < 5));
}

#[test]
fn cluster_centres_equal_the_local_engines() {
    let d = tempfile::tempdir().unwrap();
    let points = gen_points(d.path(), "20000");
    let c = Cluster::up(d.path(), 2, "--heartbeat-ms 50");
    put(&c, &points, "points", "256KB", "1");
    let init = d.path().join("init");
    local_kmeans(&points, &init, 0, &[]);
    let mut job = c.submit(&[
        "kmeans",
        "--clusters",
        "5",
        "--seed",
        "11",
        "--iterations",
        "3",
    ]);
    ok(job
        .args(["--input", "points", "--output", "centres"])
        .output()
        .unwrap());
    get(&c, "centres", &d.path().join("got"));
    close(&centres(&d.path().join("got")), &numpy(&points, &init, 3));
    // Only the answer is left: the iterations' centres were temporaries.
    let ls = ok(c.cmd(&["ls"]).output().unwrap());
    let names: Vec<String> = String::from_utf8_lossy(&ls.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    assert_eq!(names, ["centres", "points"]);
}

#[test]
fn a_bad_point_fails_the_job_naming_it_or_is_skipped() {
    let d = tempfile::tempdir().unwrap();
    let points = gen_points(d.path(), "500");
    let bad = points.join("part-00000");
    let mut text = std::fs::read_to_string(&bad).unwrap();
    text.push_str("1.0 2.0 x 4.0\n1.0 2.0\n");
    std::fs::write(&bad, text).unwrap();
    let out = d.path().join("c");
    let err = fails(
        sluice()
            .args(["run", "kmeans", "--clusters", "5", "-q", "--input"])
            .arg(&points)
            .arg("--output")
            .arg(&out)
            .output()
            .unwrap(),
    );
    assert!(
        err.contains("part-00000") && err.contains("not a number"),
        "{err}"
    );
    local_kmeans(&points, &out, 2, &["--bad-records", "skip"]);
    assert_eq!(centres(&out).len(), 5);
}

/// numpy's PageRank, networkx's iteration: the graph's pages are those in
/// its edges; `iterations` steps from 1/N with `damping`; a dangling
/// page's rank is spread over every page. Prints `page TAB rank` lines.
const PAGERANK: &str = r#"
import sys, pathlib, numpy as np
parts = [p for p in sorted(pathlib.Path(sys.argv[1]).glob("part-*")) if p.stat().st_size]
edges = np.unique(np.vstack([np.loadtxt(p, dtype=np.int64, ndmin=2) for p in parts]), axis=0)
pages = np.unique(edges)
n = len(pages)
src, dst = np.searchsorted(pages, edges[:, 0]), np.searchsorted(pages, edges[:, 1])
out = np.bincount(src, minlength=n)
d, x = float(sys.argv[3]), np.full(n, 1.0 / n)
for _ in range(int(sys.argv[2])):
    share = np.where(out > 0, x / np.maximum(out, 1), 0.0)
    contrib = np.bincount(dst, weights=share[src], minlength=n)
    x = (1 - d) / n + d * (contrib + x[out == 0].sum() / n)
for p, r in zip(pages, x):
    print(f"{p}\t{float(r)!r}")
"#;

/// Ranks by page from `page TAB rank` lines in files or a directory.
fn ranks(path: &Path) -> std::collections::BTreeMap<u64, f64> {
    let files = if path.is_dir() {
        part_files(path)
    } else {
        vec![path.to_owned()]
    };
    files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(|l| {
                    let (p, r) = l.split_once('\t').unwrap();
                    (p.parse().unwrap(), r.parse().unwrap())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

fn numpy_ranks(
    graph: &Path,
    iterations: u32,
    damping: &str,
) -> std::collections::BTreeMap<u64, f64> {
    python_ranks(PAGERANK, graph, &[&iterations.to_string(), damping])
}

/// The ranks the Python `script` prints (`page TAB rank` lines) given
/// `graph` and `args`.
fn python_ranks(script: &str, graph: &Path, args: &[&str]) -> std::collections::BTreeMap<u64, f64> {
    let out = ok(std::process::Command::new(python())
        .args(["-c", script])
        .arg(graph)
        .args(args)
        .output()
        .unwrap());
    let f = graph.with_extension("ranks");
    std::fs::write(&f, out.stdout).unwrap();
    ranks(&f)
}

fn same_ranks(
    got: &std::collections::BTreeMap<u64, f64>,
    want: &std::collections::BTreeMap<u64, f64>,
) {
    assert_eq!(got.len(), want.len(), "pages");
    for ((p, a), (q, b)) in got.iter().zip(want) {
        assert_eq!(p, q);
        assert!(
            (a - b).abs() <= 1e-9 * a.abs().max(*b),
            "page {p}: {a} != {b}"
        );
    }
    let total: f64 = got.values().sum();
    assert!((total - 1.0).abs() < 1e-9, "ranks sum to {total}");
}

/// Runs `sluice run pagerank` with `args` on `graph` into `out`.
fn local_pagerank(graph: &Path, out: &Path, args: &[&str]) -> std::process::Output {
    sluice()
        .args(["run", "pagerank", "-q"])
        .args(args)
        .arg("--input")
        .arg(graph)
        .arg("--output")
        .arg(out)
        .output()
        .unwrap()
}

fn gen_graph(dir: &Path) -> PathBuf {
    let out = dir.join("graph");
    ok(sluice()
        .args(["gen", "graph", "--pages", "5000", "--seed", "2", "--out"])
        .arg(&out)
        .output()
        .unwrap());
    out
}

#[test]
fn pagerank_equals_numpys_power_iteration_locally_and_on_a_cluster() {
    let d = tempfile::tempdir().unwrap();
    let graph = gen_graph(d.path());
    let local = d.path().join("ranks");
    ok(sluice()
        .args([
            "run",
            "pagerank",
            "--iterations",
            "4",
            "--damping",
            "0.8",
            "-q",
        ])
        .args(["--split-size", "16KB", "--input"])
        .arg(&graph)
        .arg("--output")
        .arg(&local)
        .output()
        .unwrap());
    let want = numpy_ranks(&graph, 4, "0.8");
    same_ranks(&ranks(&local), &want);
    let c = Cluster::up(d.path(), 2, "--heartbeat-ms 50");
    put(&c, &graph, "graph", "32KB", "1");
    let mut job = c.submit(&["pagerank", "--iterations", "4", "--damping", "0.8"]);
    ok(job
        .args(["--input", "graph", "--output", "ranks"])
        .output()
        .unwrap());
    get(&c, "ranks", &d.path().join("got"));
    same_ranks(&ranks(&d.path().join("got")), &want);
}

/// networkx's own `pagerank`, run to convergence (an L1 change below
/// 1e-17 a page), printing `page TAB rank` lines.
const NETWORKX: &str = r#"
import sys, pathlib, networkx as nx
g = nx.DiGraph()
for part in sorted(pathlib.Path(sys.argv[1]).glob("part-*")):
    for line in part.read_text().splitlines():
        if line.strip():
            s, d = line.split()
            g.add_edge(int(s), int(d))
ranks = nx.pagerank(g, alpha=float(sys.argv[2]), max_iter=1000, tol=1e-17)
for p, r in sorted(ranks.items()):
    print(f"{p}\t{float(r)!r}")
"#;

/// The issue's oracle itself: networkx's `pagerank` (same damping, its
/// dangling pages spread over every page). networkx iterates to
/// convergence, so Sluice runs 50 iterations at damping 0.5, whose
/// distance from the fixed point is then below 0.5^50 of the first's.
#[test]
fn pagerank_converges_to_networkxs_pagerank() {
    let d = tempfile::tempdir().unwrap();
    let graph = gen_graph(d.path());
    let out = d.path().join("ranks");
    ok(local_pagerank(
        &graph,
        &out,
        &["--iterations", "50", "--damping", "0.5"],
    ));
    let want = python_ranks(NETWORKX, &graph, &["0.5"]);
    same_ranks(&ranks(&out), &want);
}

#[test]
fn a_bad_edge_fails_pagerank_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let graph = gen_graph(d.path());
    let part = graph.join("part-00000");
    let mut text = std::fs::read_to_string(&part).unwrap();
    text.push_str("7\tseven\n");
    std::fs::write(&part, text).unwrap();
    let err = fails(
        sluice()
            .args(["run", "pagerank", "--iterations", "1", "-q", "--input"])
            .arg(&graph)
            .arg("--output")
            .arg(d.path().join("r"))
            .output()
            .unwrap(),
    );
    assert!(
        err.contains("part-00000") && err.contains("not a page number"),
        "{err}"
    );
}

/// The `name: value` lines of a TestDFSIO report.
fn dfsio_report(out: &std::process::Output) -> std::collections::BTreeMap<String, f64> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.trim().to_owned(), v.trim().parse().ok()?))
        })
        .collect()
}

#[test]
fn testdfsio_writes_and_reads_back_locally_and_on_a_cluster() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("dfsio");
    let local = |mode: &str| {
        let out = ok(sluice()
            .args([
                "bench", "dfsio", mode, "--files", "3", "--size", "2MB", "--dir",
            ])
            .arg(&dir)
            .output()
            .unwrap());
        dfsio_report(&out)
    };
    let w = local("--write");
    assert_eq!(w["Number of files"], 3.0);
    assert!((w["Total MBytes processed"] - 6.0).abs() < 0.01, "{w:?}");
    assert!(w["Throughput mb/sec"] > 0.0 && w["Average IO rate mb/sec"] > 0.0);
    let r = local("--read");
    assert_eq!(r["Total MBytes processed"], w["Total MBytes processed"]);
    // A changed byte is found by the read test.
    let files: Vec<PathBuf> = part_files(&dir.join("dfsio-data"));
    let mut bytes = std::fs::read(&files[1]).unwrap();
    bytes[12_345] = if bytes[12_345] == b'a' { b'b' } else { b'a' };
    std::fs::write(&files[1], bytes).unwrap();
    let err = fails(
        sluice()
            .args(["bench", "dfsio", "--read", "--files", "3", "--dir"])
            .arg(&dir)
            .output()
            .unwrap(),
    );
    assert!(err.contains("is not what the write test wrote"), "{err}");
    // The same on a cluster's block store.
    let c = Cluster::up(d.path(), 2, "--heartbeat-ms 50");
    let cluster = |mode: &str| {
        let out = ok(sluice()
            .args([
                "bench",
                "dfsio",
                mode,
                "--files",
                "3",
                "--size",
                "2MB",
                "--cluster",
            ])
            .arg(&c.dir)
            .output()
            .unwrap());
        dfsio_report(&out)
    };
    let w = cluster("--write");
    assert!((w["Total MBytes processed"] - 6.0).abs() < 0.01, "{w:?}");
    let r = cluster("--read");
    assert_eq!(r["Number of files"], 3.0, "{r:?}");
    assert!((r["Total MBytes processed"] - 6.0).abs() < 0.01, "{r:?}");
}

/// Writes `per` points around each of `centres` (Gaussian, deviation 1,
/// from a fixed seed) to `dir/part-00000`, clusters interleaved.
fn gaussian_points(dir: &Path, centres: &[[f64; 3]], per: usize) -> PathBuf {
    let out = dir.join("gauss");
    std::fs::create_dir_all(&out).unwrap();
    let mut state = 0x853c_49e6_748f_ea9bu64;
    let mut uniform = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let mut text = String::new();
    for _ in 0..per {
        for c in centres {
            let xs: Vec<String> = c
                .iter()
                .map(|x| {
                    // Box-Muller.
                    let (u, v) = (uniform(), uniform());
                    let z = (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos();
                    format!("{:.5}", x + z)
                })
                .collect();
            text.push_str(&xs.join(" "));
            text.push('\n');
        }
    }
    std::fs::write(out.join("part-00000"), text).unwrap();
    out
}

#[test]
fn kmeans_parallel_init_finds_every_cluster_and_is_reproducible() {
    let d = tempfile::tempdir().unwrap();
    let truth = [
        [0.0, 0.0, 0.0],
        [100.0, 0.0, 0.0],
        [0.0, 100.0, 0.0],
        [0.0, 0.0, 100.0],
        [100.0, 100.0, 100.0],
    ];
    let points = gaussian_points(d.path(), &truth, 2000);
    let init = |name: &str, extra: &[&str]| {
        let out = d.path().join(name);
        local_kmeans(
            &points,
            &out,
            0,
            &[&["--init", "k-means||"], extra].concat(),
        );
        centres(&out)
    };
    let got = init("a", &[]);
    assert_eq!(got.len(), 5);
    for t in &truth {
        let nearest = got
            .iter()
            .map(|c| c.iter().zip(t).map(|(a, b)| (a - b) * (a - b)).sum::<f64>())
            .fold(f64::INFINITY, f64::min)
            .sqrt();
        assert!(nearest < 5.0, "no initial centre near {t:?}: {got:?}");
    }
    // The same seed gives the same centres, however the input is split.
    assert_eq!(init("b", &[]), got);
    assert_eq!(init("c", &["--threads", "1", "--split-size", "64KB"]), got);
    let other = d.path().join("d");
    ok(sluice()
        .args(["run", "kmeans", "--clusters", "5", "--seed", "12", "-q"])
        .args(["--iterations", "0", "--init", "k-means||", "--input"])
        .arg(&points)
        .arg("--output")
        .arg(&other)
        .output()
        .unwrap());
    assert_ne!(centres(&other), got, "the seed is used");
    // One round is enough here too, and the run goes on to iterate.
    let out = d.path().join("e");
    local_kmeans(
        &points,
        &out,
        2,
        &["--init", "k-means||", "--init-rounds", "1"],
    );
    assert_eq!(centres(&out).len(), 5);
}

/// Runs k-means with `--tolerance`; its centres and the summary's line
/// on the iterations.
fn kmeans_with_tolerance(points: &Path, out: &Path, tolerance: &str) -> (Vec<Vec<f64>>, String) {
    let run = ok(sluice()
        .args(["run", "kmeans", "--clusters", "5", "--seed", "11"])
        .args(["--iterations", "5", "--tolerance", tolerance])
        .arg("--input")
        .arg(points)
        .arg("--output")
        .arg(out)
        .output()
        .unwrap());
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    let line = err
        .lines()
        .find(|l| l.starts_with("k-means "))
        .unwrap_or_else(|| panic!("no k-means line in {err}"))
        .to_owned();
    (centres(out), line)
}

#[test]
fn a_tolerance_stops_kmeans_once_no_centre_moves_that_much() {
    let d = tempfile::tempdir().unwrap();
    let points = gen_points(d.path(), "5000");
    let init = d.path().join("init");
    local_kmeans(&points, &init, 0, &[]);
    // Every centre moves less than 1e9: the first iteration stops it.
    let (got, line) = kmeans_with_tolerance(&points, &d.path().join("big"), "1e9");
    assert!(line.contains("1 of 5 iterations ran"), "{line}");
    assert!(line.contains("converged"), "{line}");
    close(&got, &numpy(&points, &init, 1));
    // 0 runs them all.
    let (got, line) = kmeans_with_tolerance(&points, &d.path().join("zero"), "0");
    assert!(line.contains("5 of 5 iterations ran"), "{line}");
    assert!(!line.contains("converged"), "{line}");
    close(&got, &numpy(&points, &init, 5));
}

/// Whether `err` names a point of two coordinates at `offset` of
/// `part-00000`.
fn names_a_two_coordinate_point(err: &str, offset: usize) -> bool {
    err.contains("part-00000")
        && err.contains(&format!("offset {offset}"))
        && err.contains("2 coordinates")
}

#[test]
fn a_point_of_the_wrong_dimension_is_named_or_skipped() {
    let d = tempfile::tempdir().unwrap();
    let points = gen_points(d.path(), "500");
    let part = points.join("part-00000");
    let mut text = std::fs::read_to_string(&part).unwrap();
    let offset = text.len();
    text.push_str("1.0 2.0\n");
    std::fs::write(&part, text).unwrap();
    let out = d.path().join("c");
    let run = |extra: &[&str]| {
        sluice()
            .args(["run", "kmeans", "--clusters", "5", "--seed", "11", "-q"])
            .args(["--iterations", "1"])
            .args(extra)
            .arg("--input")
            .arg(&points)
            .arg("--output")
            .arg(&out)
            .output()
            .unwrap()
    };
    let err = fails(run(&[]));
    assert!(names_a_two_coordinate_point(&err, offset), "{err}");
    let skipped = ok(run(&["--bad-records", "skip"]));
    assert!(skipped.status.success());
    assert_eq!(centres(&out).len(), 5);
}

/// A point of the wrong dimension among the few the random init picks
/// from is never made a centre: the iteration names it (or skips it when
/// asked), whichever seed picks the centres.
#[test]
fn the_random_init_never_picks_a_point_of_the_wrong_dimension() {
    let d = tempfile::tempdir().unwrap();
    let points = d.path().join("points");
    std::fs::create_dir_all(&points).unwrap();
    let good: String = (0..6)
        .map(|i| format!("{i}.5 {}.25 {}.0\n", i * 2, i * 3))
        .collect();
    let offset = good.len();
    std::fs::write(points.join("part-00000"), format!("{good}7.0 8.0\n")).unwrap();
    for seed in ["1", "2", "3", "4", "5"] {
        let run = |extra: &[&str]| {
            sluice()
                .args(["run", "kmeans", "--clusters", "6", "--iterations", "1"])
                .args(["--seed", seed, "-q", "--overwrite", "--input"])
                .arg(&points)
                .arg("--output")
                .arg(d.path().join("c"))
                .args(extra)
                .output()
                .unwrap()
        };
        let err = fails(run(&[]));
        assert!(
            names_a_two_coordinate_point(&err, offset),
            "seed {seed}: {err}"
        );
        ok(run(&["--bad-records", "skip"]));
        let got = centres(&d.path().join("c"));
        assert_eq!(got.len(), 6, "seed {seed}");
        assert!(got.iter().all(|c| c.len() == 3), "seed {seed}: {got:?}");
    }
}

#[test]
fn a_bad_edge_is_skipped_when_asked() {
    let d = tempfile::tempdir().unwrap();
    let graph = gen_graph(d.path());
    let good = d.path().join("good");
    ok(local_pagerank(&graph, &good, &["--iterations", "2"]));
    let part = graph.join("part-00000");
    let mut text = std::fs::read_to_string(&part).unwrap();
    let offset = text.len();
    text.push_str("7 8 9\n");
    std::fs::write(&part, text).unwrap();
    let run = |extra: &[&str]| {
        let args = [&["--iterations", "2"], extra].concat();
        local_pagerank(&graph, &d.path().join("r"), &args)
    };
    let err = fails(run(&[]));
    assert!(
        err.contains("part-00000") && err.contains(&format!("offset {offset}")),
        "{err}"
    );
    ok(run(&["--bad-records", "skip"]));
    same_ranks(&ranks(&d.path().join("r")), &ranks(&good));
}
