//! `sluice bench ohb`: the OSU HiBD MapReduce shuffle micro-benchmarks
//! (MR-AVG, MR-RAND, MR-SKEW) on the local engine or a cluster, with
//! per-node CPU and network utilization sampled from `/proc` every 100 ms.
//!
//! Writes `results.json` (every row, with the time series of each row's
//! median run) and `results.md` under `--out`, and draws the PNGs with
//! `bench/ohb_plot.py` when a Python with matplotlib is found.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use sluice_proto::sample::{rates, Rate, Sample, Sampler};

use sluice_jobs::ohb::{PairType, Pattern};

use crate::conn::{self as cluster, Conn};
use crate::units::{human, parse_size};
use sluice_request::{JobRequest, OhbParams};

#[derive(Debug, Args)]
pub struct OhbBench {
    /// Distribution pattern: avg, rand or skew.
    #[arg(long, default_value = "avg")]
    pattern: String,
    /// Map tasks.
    #[arg(long, default_value_t = 16)]
    maps: u32,
    /// Reduce tasks.
    #[arg(long, default_value_t = 8)]
    reduces: u32,
    /// Pairs each map emits.
    #[arg(long, conflicts_with = "shuffle_size")]
    pairs_per_map: Option<u64>,
    /// Total pair bytes of the job (maps x pairs per map x pair size).
    #[arg(long, value_parser = parse_size)]
    shuffle_size: Option<u64>,
    /// Bytes of one pair: key plus value as emitted (16-byte keys for
    /// bytes, 32 for text; see `sluice_jobs::ohb`).
    #[arg(long, default_value = "1KiB", value_parser = parse_size)]
    pair_size: u64,
    /// Key/value type: bytes or text.
    #[arg(long = "type", default_value = "bytes")]
    kind: String,
    /// Run the seed's grid: pair sizes 100 B, 1 KiB, 10 KiB; 16/8, 8/4 and
    /// 4/2 maps/reduces; every --sizes; the three patterns.
    #[arg(long)]
    sweep: bool,
    /// Shuffle sizes of the sweep (comma-separated).
    #[arg(long, default_value = "64MB,256MB")]
    sizes: String,
    /// Runs of each configuration; tables show medians.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Threads of the local engine [default: all cores].
    #[arg(long)]
    threads: Option<usize>,
    /// Memory budget of the local engine.
    #[arg(long, default_value = "1GiB", value_parser = parse_size)]
    memory: u64,
    /// Run on the cluster whose coordinator is here, not the local engine.
    #[arg(long)]
    coordinator: Option<String>,
    /// Run on the `sluice cluster up` cluster in this directory.
    #[arg(long, conflicts_with = "coordinator")]
    cluster: Option<PathBuf>,
    /// Shared secret file of the cluster.
    #[arg(long)]
    secret_file: Option<PathBuf>,
    /// Where results, tables and plots go.
    #[arg(long, default_value = "bench-results/ohb")]
    out: PathBuf,
    /// A label for this configuration in tables (e.g. the link speed).
    #[arg(long, default_value = "")]
    label: String,
    /// Python with matplotlib for the plots [default: $SLUICE_PYTHON, else .venv/bin/python, else python3].
    #[arg(long)]
    python: Option<PathBuf>,
}

/// One configuration of the grid.
#[derive(Debug, Clone, Serialize)]
struct Config {
    pattern: String,
    kind: String,
    maps: u32,
    reduces: u32,
    pair_size: u64,
    pairs_per_map: u64,
}

impl Config {
    /// Bytes of pairs the job makes: maps x pairs per map x pair size.
    fn payload(&self) -> u64 {
        u64::from(self.maps) * self.pairs_per_map * self.pair_size
    }
}

/// Utilization of one node over one run.
#[derive(Debug, Clone, Serialize)]
struct NodeUse {
    node: String,
    avg_cores: f64,
    peak_cores: f64,
    avg_host_cpu: f64,
    /// Mean receive rate over the run, other interfaces than `lo`.
    rx_mb_s: f64,
    peak_rx_mb_s: f64,
    /// Mean `lo` receive rate (where an embedded cluster's shuffle goes).
    lo_mb_s: f64,
    /// Bytes received over the run, other interfaces than `lo`.
    rx_bytes: u64,
    series: Vec<Rate>,
}

/// What one run measured.
#[derive(Debug, Clone, Serialize)]
struct Run {
    latency_s: f64,
    map_s: f64,
    reduce_s: f64,
    shuffle_bytes: u64,
    pairs: u64,
    reducer_pairs: Vec<u64>,
    reducer_s: Vec<f64>,
    nodes: Vec<NodeUse>,
}

/// One configuration's runs, summarized.
#[derive(Debug, Clone, Serialize)]
struct Row {
    label: String,
    engine: String,
    config: Config,
    payload_bytes: u64,
    latency_s: f64,
    latencies_s: Vec<f64>,
    /// Share of all pairs reducer 0 received.
    reducer0_share: f64,
    /// The slowest reducer's own time over the job's latency.
    slowest_reducer_share: f64,
    /// Pair bytes over job latency, per node.
    shuffle_mb_s_per_node: f64,
    /// Network bytes each node received (from `/proc`, not `lo`) over the
    /// shuffle-and-reduce phase, mean of the nodes: the rate to read
    /// against the probed network bandwidth.
    net_rx_mb_s_per_node: f64,
    median_run: Run,
}

pub fn run(b: &OhbBench) -> anyhow::Result<()> {
    let configs = configs(b)?;
    let target = Target::of(b)?;
    std::fs::create_dir_all(&b.out).with_context(|| format!("creating {}", b.out.display()))?;
    let mut rows = Vec::new();
    for c in &configs {
        let row = measure(b, &target, c)?;
        println!(
            "{:<5} {:<5} {:>2}/{:<2} maps/reduces  pair {:>6}  shuffle {:>9}  latency {:>7.3} s  r0 share {:.2}  slowest reducer {:.2} of job",
            c.pattern,
            c.kind,
            c.maps,
            c.reduces,
            human(c.pair_size),
            human(row.payload_bytes),
            row.latency_s,
            row.reducer0_share,
            row.slowest_reducer_share
        );
        rows.push(row);
    }
    let json = b.out.join("results.json");
    std::fs::write(&json, serde_json::to_string_pretty(&rows)?)
        .with_context(|| format!("writing {}", json.display()))?;
    let md = b.out.join("results.md");
    std::fs::write(&md, render(&rows)).with_context(|| format!("writing {}", md.display()))?;
    println!("wrote {} and {}", json.display(), md.display());
    plot(b, &json);
    Ok(())
}

/// The configurations to run: one, or the seed's grid.
fn configs(b: &OhbBench) -> anyhow::Result<Vec<Config>> {
    let one = |pattern: &str, maps, reduces, pair_size, size: Option<u64>| {
        config(b, pattern, maps, reduces, pair_size, size)
    };
    if !b.sweep {
        return Ok(vec![one(
            &b.pattern,
            b.maps,
            b.reduces,
            b.pair_size,
            b.shuffle_size,
        )?]);
    }
    let sizes: Vec<u64> = b
        .sizes
        .split(',')
        .map(|s| parse_size(s).map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<_>>()?;
    let mut out = Vec::new();
    for pattern in ["avg", "rand", "skew"] {
        for (maps, reduces) in [(16, 8), (8, 4), (4, 2)] {
            for pair in [100, 1024, 10240] {
                for &size in &sizes {
                    out.push(one(pattern, maps, reduces, pair, Some(size))?);
                }
            }
        }
    }
    Ok(out)
}

/// Checks one configuration: shuffle size = maps x pairs per map x pair
/// size, a pair at least its key, at least one pair.
fn config(
    b: &OhbBench,
    pattern: &str,
    maps: u32,
    reduces: u32,
    pair_size: u64,
    shuffle_size: Option<u64>,
) -> anyhow::Result<Config> {
    anyhow::ensure!(
        Pattern::from_name(pattern).is_some(),
        "--pattern is avg, rand or skew, not {pattern:?}"
    );
    anyhow::ensure!(
        matches!(b.kind.as_str(), "bytes" | "text"),
        "--type is bytes or text, not {:?}",
        b.kind
    );
    anyhow::ensure!(
        maps > 0 && reduces > 0,
        "--maps and --reduces must be at least 1"
    );
    let key = if b.kind == "bytes" { 16 } else { 32 };
    anyhow::ensure!(
        pair_size >= key,
        "--pair-size {pair_size} B cannot hold the {key}-byte key of --type {}",
        b.kind
    );
    let pairs_per_map = match (b.pairs_per_map, shuffle_size) {
        (Some(k), _) => k,
        (None, Some(s)) => {
            let per_map = u64::from(maps) * pair_size;
            anyhow::ensure!(
                s >= per_map,
                "--shuffle-size {s} B is less than one {pair_size}-byte pair per map for {maps} maps ({per_map} B)"
            );
            s / per_map
        }
        (None, None) => anyhow::bail!("give --pairs-per-map or --shuffle-size"),
    };
    anyhow::ensure!(pairs_per_map > 0, "--pairs-per-map must be at least 1");
    Ok(Config {
        pattern: pattern.to_owned(),
        kind: b.kind.clone(),
        maps,
        reduces,
        pair_size,
        pairs_per_map,
    })
}

/// Where jobs run.
enum Target {
    Local(Sampler),
    Cluster(Conn),
}

impl Target {
    fn of(b: &OhbBench) -> anyhow::Result<Target> {
        if b.coordinator.is_none() && b.cluster.is_none() {
            return Ok(Target::Local(Sampler::start(
                Duration::from_millis(100),
                36_000,
            )));
        }
        Ok(Target::Cluster(Conn::new(
            b.coordinator.clone(),
            b.cluster.clone(),
            b.secret_file.clone(),
        )))
    }

    fn engine(&self) -> &'static str {
        match self {
            Target::Local(_) => "local",
            Target::Cluster(_) => "cluster",
        }
    }
}

/// The `sluice run` arguments of a configuration.
fn job_request(b: &OhbBench, c: &Config, output: &str) -> JobRequest {
    let params = OhbParams {
        pattern: c.pattern.clone(),
        pairs_per_map: c.pairs_per_map,
        pair_size: c.pair_size,
        text: c.kind == "text",
        ..OhbParams::default()
    };
    let mut r = JobRequest::new("ohb", &params, &format!("synthetic:{}", c.maps), output);
    r.reducers = Some(c.reduces);
    r.memory = Some(b.memory);
    r.overwrite = true;
    r.engine.threads = b.threads;
    r
}

fn measure(b: &OhbBench, target: &Target, c: &Config) -> anyhow::Result<Row> {
    let mut runs = Vec::new();
    for i in 0..b.runs.max(1) {
        runs.push(run_once(b, target, c, i)?);
    }
    runs.sort_by(|x, y| x.latency_s.total_cmp(&y.latency_s));
    let median = runs[runs.len() / 2].clone();
    let pairs = median.pairs.max(1) as f64;
    let nodes = median.nodes.len().max(1) as f64;
    Ok(Row {
        label: b.label.clone(),
        engine: target.engine().into(),
        config: c.clone(),
        payload_bytes: c.payload(),
        latency_s: median.latency_s,
        latencies_s: runs.iter().map(|r| r.latency_s).collect(),
        reducer0_share: median.reducer_pairs.first().copied().unwrap_or(0) as f64 / pairs,
        slowest_reducer_share: median.reducer_s.iter().copied().fold(0.0, f64::max)
            / median.latency_s.max(1e-9),
        shuffle_mb_s_per_node: c.payload() as f64 / 1e6 / nodes / median.latency_s.max(1e-9),
        net_rx_mb_s_per_node: median.nodes.iter().map(|n| n.rx_bytes).sum::<u64>() as f64
            / 1e6
            / nodes
            / median.reduce_s.max(1e-9),
        median_run: median,
    })
}

fn run_once(b: &OhbBench, target: &Target, c: &Config, i: usize) -> anyhow::Result<Run> {
    let t0 = sluice_proto::now_ms();
    let report = match target {
        Target::Local(_) => {
            let out = b.out.join(format!(".ohb-out-{}", std::process::id()));
            let report = crate::local::run_request(&job_request(b, c, &out.display().to_string()));
            let _ = std::fs::remove_dir_all(&out);
            report?
        }
        Target::Cluster(conn) => {
            let out = format!("ohb-{}-{i}", std::process::id());
            let report = cluster::submit_request(conn, &job_request(b, c, &out), 1);
            let _ = cluster::remove(conn, &out);
            report?
        }
    };
    let report = report.first().context("the benchmark ran no job")?;
    let mut run = Run {
        latency_s: report.phases.total_s,
        map_s: report.phases.map_s,
        reduce_s: report.phases.reduce_s,
        shuffle_bytes: report.shuffle_bytes,
        ..tallies(&report.user_counters, c.reduces)
    };
    check_counts(c, &run)?;
    // One more sample interval, so the window's last samples exist.
    std::thread::sleep(Duration::from_millis(150));
    let t1 = sluice_proto::now_ms();
    let samples: Vec<(String, Vec<Sample>)> = match target {
        Target::Local(s) => vec![("local".into(), s.since(t0))],
        Target::Cluster(conn) => cluster::node_samples(conn, t0)?,
    };
    run.nodes = samples
        .into_iter()
        .map(|(node, s)| node_use(node, &s, t1))
        .collect();
    Ok(run)
}

/// The oracle: every pair made arrived, and for the patterns with fixed
/// shares each reducer got exactly its share.
fn check_counts(c: &Config, run: &Run) -> anyhow::Result<()> {
    let made = u64::from(c.maps) * c.pairs_per_map;
    anyhow::ensure!(
        run.pairs == made && run.reducer_pairs.iter().sum::<u64>() == made,
        "reducers received {} pairs ({} by reducer tallies), the maps made {made}",
        run.pairs,
        run.reducer_pairs.iter().sum::<u64>()
    );
    let spec = sluice_jobs::ohb::OhbSpec {
        pattern: Pattern::from_name(&c.pattern).expect("checked by config"),
        reduces: c.reduces,
        pairs_per_map: c.pairs_per_map,
        pair_size: c.pair_size as usize,
        kind: PairType::Bytes,
        seed: 0,
    };
    for (r, &got) in run.reducer_pairs.iter().enumerate() {
        if let Some(want) = spec.expected_pairs(u64::from(c.maps), r as u32) {
            anyhow::ensure!(
                got == want,
                "reducer {r} received {got} pairs; the {} pattern sends it {want}",
                c.pattern
            );
        }
    }
    Ok(())
}

/// The reducers' tallies from the job's `OHB` counters.
fn tallies(user: &std::collections::BTreeMap<String, u64>, reduces: u32) -> Run {
    let get = |name: String| user.get(&name).copied().unwrap_or(0);
    Run {
        latency_s: 0.0,
        map_s: 0.0,
        reduce_s: 0.0,
        shuffle_bytes: 0,
        pairs: get("OHB.PAIRS".into()),
        reducer_pairs: (0..reduces)
            .map(|r| get(format!("OHB.PAIRS_R{r}")))
            .collect(),
        reducer_s: (0..reduces)
            .map(|r| get(format!("OHB.REDUCE_US_R{r}")) as f64 / 1e6)
            .collect(),
        nodes: Vec::new(),
    }
}

fn node_use(node: String, samples: &[Sample], until_ms: u64) -> NodeUse {
    let kept: Vec<Sample> = samples
        .iter()
        .copied()
        .filter(|s| s.t_ms <= until_ms)
        .collect();
    let series = rates(&kept);
    let n = series.len().max(1) as f64;
    let mean = |f: fn(&Rate) -> f64| series.iter().map(f).sum::<f64>() / n;
    let peak = |f: fn(&Rate) -> f64| series.iter().map(f).fold(0.0, f64::max);
    NodeUse {
        node,
        avg_cores: mean(|r| r.proc_cores),
        peak_cores: peak(|r| r.proc_cores),
        avg_host_cpu: mean(|r| r.host_cpu),
        rx_mb_s: mean(|r| r.rx_bps) / 1e6,
        peak_rx_mb_s: peak(|r| r.rx_bps) / 1e6,
        lo_mb_s: mean(|r| r.lo_bps) / 1e6,
        rx_bytes: kept
            .last()
            .zip(kept.first())
            .map_or(0, |(b, a)| b.rx.saturating_sub(a.rx)),
        series,
    }
}

fn render(rows: &[Row]) -> String {
    let mut s = String::from(
        "| label | engine | pattern | type | maps/reduces | pair | pairs/map | shuffle | latency s (median) | runs | reducer 0 share | slowest reducer / job | MB/s per node | net rx MB/s per node, shuffle+reduce | CPU cores per node (avg) | net rx MB/s per node (avg, peak) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let c = &r.config;
        let nodes = &r.median_run.nodes;
        let cores: Vec<String> = nodes
            .iter()
            .map(|n| format!("{:.2}", n.avg_cores))
            .collect();
        let net: Vec<String> = nodes
            .iter()
            .map(|n| format!("{:.0}/{:.0}", n.rx_mb_s, n.peak_rx_mb_s))
            .collect();
        s.push_str(&format!(
            "| {} | {} | {} | {} | {}/{} | {} | {} | {} | {:.3} | {} | {:.3} | {:.2} | {:.0} | {:.0} | {} | {} |\n",
            r.label,
            r.engine,
            c.pattern,
            c.kind,
            c.maps,
            c.reduces,
            human(c.pair_size),
            c.pairs_per_map,
            human(r.payload_bytes),
            r.latency_s,
            r.latencies_s.len(),
            r.reducer0_share,
            r.slowest_reducer_share,
            r.shuffle_mb_s_per_node,
            r.net_rx_mb_s_per_node,
            cores.join(" "),
            net.join(" "),
        ));
    }
    s
}

/// Draws the PNGs with `bench/ohb_plot.py`, or says how to get them.
fn plot(b: &OhbBench, json: &Path) {
    let python = crate::python::interpreter(b.python.as_deref());
    let script = Path::new("bench/ohb_plot.py");
    if !script.exists() {
        eprintln!("plots: bench/ohb_plot.py not found (run from the Sluice checkout)");
        return;
    }
    match Command::new(&python)
        .arg(script)
        .arg(json)
        .arg(&b.out)
        .status()
    {
        Ok(s) if s.success() => println!("plots in {}", b.out.display()),
        _ => eprintln!(
            "plots: {} could not draw them (needs matplotlib: bash bench/setup.sh makes .venv)",
            python.display()
        ),
    }
}
