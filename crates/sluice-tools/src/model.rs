//! `sluice probe` and `sluice model`, and the hardware profile `sluice run`
//! accounts jobs against.

use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;
use sluice_model::{
    grep_ideal, ideal, ideal_equivalent_nodes, slowdown, Hardware, Ideal, Params, Variant,
};
use sluice_probe::{probe_disk, probe_memory, probe_network, ProbeOptions, ProbeResult, Profile};

use crate::units::{parse_rate, parse_size};

/// Where profiles live unless `--hardware` or `SLUICE_HARDWARE` says.
pub fn default_profile_path() -> PathBuf {
    if let Some(p) = std::env::var_os("SLUICE_HARDWARE") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".sluice").join("hardware.json")
}

/// The rates for the model: the profile at `path`, or stated defaults that
/// say why.
pub fn load_hardware(path: Option<&Path>) -> Hardware {
    let path = path.map_or_else(default_profile_path, Path::to_owned);
    if !path.exists() {
        return Hardware::defaults(&format!(
            "no profile at {} (run `sluice probe`)",
            path.display()
        ));
    }
    match Profile::load(&path) {
        Ok(p) => sluice_probe::hardware(&p, &path),
        Err(e) => Hardware::defaults(&e.to_string()),
    }
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Directory for the disk probes (on the disk to measure).
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Bytes written and read per repetition.
    #[arg(long, default_value = "4GB", value_parser = parse_size)]
    size: u64,
    /// Repetitions of each probe.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Where to save the profile [default: $SLUICE_HARDWARE or ~/.sluice/hardware.json].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Serve as the far end of another host's `--network-peer` probe
    /// (a sink on ADDR) until killed.
    #[arg(long, value_name = "ADDR", conflicts_with = "network_peer")]
    network_listen: Option<String>,
    /// Probe only the network, to the sink at ADDR (another host or
    /// namespace running `sluice probe --network-listen`); prints the rate,
    /// saves nothing.
    #[arg(long, value_name = "ADDR")]
    network_peer: Option<String>,
    /// Probe the links between a cluster's data centers instead: a worker
    /// of each sends --link-size bytes to a worker of each other (and, in
    /// each data center with two, to its neighbour: the LAN), --reps
    /// times; prints the medians.
    #[arg(long)]
    network: bool,
    /// With --network: every live worker sends --link-size bytes to
    /// every other at once, as a shuffle does (seed 004's all-to-all
    /// probe), --reps times; prints each worker's receive and send rate
    /// and receive skew, and saves the median worker's receive rate into
    /// the profile (--out) as the model's network rate N.
    #[arg(long, requires = "network")]
    all_to_all: bool,
    /// Bytes per link probe, with --network.
    #[arg(long, default_value = "64MB", value_parser = parse_size)]
    link_size: u64,
    /// Write the medians as a `--links` file for the coordinator (ARTS),
    /// with --network.
    #[arg(long, requires = "network")]
    links: Option<PathBuf>,
    #[command(flatten)]
    conn: crate::conn::Conn,
}

pub fn probe(args: &ProbeArgs) -> anyhow::Result<()> {
    if args.all_to_all {
        let out = args.out.clone().unwrap_or_else(default_profile_path);
        return crate::links::probe_all_to_all(&args.conn, args.link_size, args.reps, &out);
    }
    if args.network {
        return crate::links::probe_links(
            &args.conn,
            args.link_size,
            args.reps,
            args.links.as_deref(),
        );
    }
    if let Some(addr) = &args.network_listen {
        let l = std::net::TcpListener::bind(addr)
            .map_err(|e| anyhow::anyhow!("listening on {addr}: {e}"))?;
        eprintln!("network probe sink on {}", l.local_addr()?);
        return Ok(sluice_probe::serve_sink(l)?);
    }
    if let Some(peer) = &args.network_peer {
        let opts = ProbeOptions {
            reps: args.reps.max(1),
            ..ProbeOptions::default()
        };
        let r = sluice_probe::probe_network_to(peer, &opts);
        println!("{:<20} {}", format!("network to {peer}"), describe(&r));
        anyhow::ensure!(r.median().is_some(), "network probe to {peer} failed");
        return Ok(());
    }
    let opts = ProbeOptions {
        dir: args.dir.clone(),
        size: args.size,
        reps: args.reps.max(1),
        ..ProbeOptions::default()
    };
    eprintln!(
        "probing disk in {} ({} x {} MB)...",
        args.dir.display(),
        opts.reps,
        args.size / 1_000_000
    );
    let (disk_write, disk_read) = probe_disk(&opts);
    eprintln!("probing memory and loopback network...");
    let profile = Profile {
        measured_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        dir: args.dir.display().to_string(),
        size: args.size,
        disk_read,
        disk_write,
        memory: probe_memory(&opts),
        network: probe_network(&opts),
        // A cluster's all-to-all rate, from an earlier `--all-to-all`
        // saved into this profile, outlives a new local probe.
        network_all_to_all: Profile::load(&args.out.clone().unwrap_or_else(default_profile_path))
            .ok()
            .and_then(|p| p.network_all_to_all),
    };
    for (name, r) in [
        ("disk read", &profile.disk_read),
        ("disk write", &profile.disk_write),
        ("memory copy", &profile.memory),
        ("network (loopback)", &profile.network),
    ] {
        println!("{name:<20} {}", describe(r));
    }
    let out = args.out.clone().unwrap_or_else(default_profile_path);
    profile.save(&out)?;
    println!("saved {}", out.display());
    Ok(())
}

fn describe(r: &ProbeResult) -> String {
    match r {
        ProbeResult::Measured(m) => format!(
            "{:>9.1} MB/s median  ({:.1}-{:.1}, spread {:.0}%)",
            m.median / 1e6,
            m.min / 1e6,
            m.max / 1e6,
            m.spread * 100.0
        ),
        ProbeResult::Skipped(why) => format!("skipped: {why}"),
    }
}

#[derive(Debug, Args)]
pub struct ModelArgs {
    /// Nodes n.
    #[arg(long)]
    nodes: u32,
    /// Input size i (decimal units: 1TB = 10^12 bytes).
    #[arg(long, value_parser = parse_size)]
    input: u64,
    /// Disk read bandwidth per node D_r (e.g. 260MB/s).
    #[arg(long, value_parser = parse_rate)]
    disk_read: u64,
    /// Disk write bandwidth per node D_w [default: the read bandwidth].
    #[arg(long, value_parser = parse_rate)]
    disk_write: Option<u64>,
    /// Network bandwidth per node N.
    #[arg(long, value_parser = parse_rate)]
    net: u64,
    /// Output replication r.
    #[arg(long, default_value_t = 1)]
    replication: u32,
    /// Map output / input, e_M.
    #[arg(long, default_value_t = 1.0)]
    map_ratio: f64,
    /// Reduce output / reduce input, e_R.
    #[arg(long, default_value_t = 1.0)]
    reduce_ratio: f64,
    /// Sort memory per node; map output beyond it means an external sort.
    #[arg(long, value_parser = parse_size)]
    sort_memory: Option<u64>,
    /// Write a backup of map output in phase 1.
    #[arg(long)]
    backup_write: bool,
    /// Grep: reading the input is all the work (T = i / (n D_r)).
    #[arg(long)]
    grep: bool,
    /// Measured seconds, for slowdown and ideal-equivalent nodes.
    #[arg(long)]
    actual: Option<f64>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct ModelOutput {
    ideal_seconds: f64,
    variant: Variant,
    phase1: Option<sluice_model::PhaseIdeal>,
    phase2: Option<sluice_model::PhaseIdeal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    actual_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    slowdown: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ideal_equivalent_nodes: Option<f64>,
}

pub fn model(a: &ModelArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.nodes > 0, "--nodes must be at least 1");
    anyhow::ensure!(a.disk_read > 0 && a.net > 0, "rates must be positive");
    let n = f64::from(a.nodes);
    let (seconds, variant, phases): (f64, Variant, Option<Ideal>) = if a.grep {
        (
            grep_ideal(n, a.input as f64, a.disk_read as f64),
            Variant::InMemory,
            None,
        )
    } else {
        let t = ideal(&Params {
            nodes: n,
            input: a.input as f64,
            disk_read: a.disk_read as f64,
            disk_write: a.disk_write.unwrap_or(a.disk_read) as f64,
            net: a.net as f64,
            replication: f64::from(a.replication.max(1)),
            map_ratio: a.map_ratio,
            reduce_ratio: a.reduce_ratio,
            sort_memory: a.sort_memory.map(|m| m as f64),
            backup_write: a.backup_write,
        });
        (t.seconds, t.variant, Some(t))
    };
    let out = ModelOutput {
        ideal_seconds: seconds,
        variant,
        phase1: phases.map(|t| t.phase1),
        phase2: phases.map(|t| t.phase2),
        actual_seconds: a.actual,
        slowdown: a.actual.map(|t| slowdown(seconds, t)),
        ideal_equivalent_nodes: a.actual.map(|t| ideal_equivalent_nodes(n, seconds, t)),
    };
    if a.json {
        println!("{}", serde_json::to_string(&out)?);
    } else {
        print_model(&out, a.grep);
    }
    Ok(())
}

fn print_model(o: &ModelOutput, grep: bool) {
    println!("ideal time   {:.2} s", o.ideal_seconds);
    if grep {
        println!("variant      grep (input read is the whole job)");
    } else {
        println!("variant      {}", o.variant.name());
    }
    for (name, p) in [("phase 1", o.phase1), ("phase 2", o.phase2)] {
        if let Some(p) = p {
            println!(
                "{name}      {:.2} s, bound by {:?} (disk {:.2} s, network {:.2} s)",
                p.seconds, p.bottleneck, p.disk_seconds, p.net_seconds
            );
        }
    }
    if let (Some(t), Some(s), Some(e)) = (o.actual_seconds, o.slowdown, o.ideal_equivalent_nodes) {
        println!("actual       {t:.2} s: {s:.2}x the ideal; an ideal system matches it with {e:.0} nodes");
    }
}
