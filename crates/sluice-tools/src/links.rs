//! `sluice probe --network`: the bandwidth between a cluster's data
//! centers, measured by the workers themselves (data-plane PROBE: one
//! worker sends bytes to another's SINK), for ARTS's `--links` file; and
//! with `--all-to-all` the rate each worker receives at while every
//! worker sends to every other, the model's `N` (seed 004's probe).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use sluice_probe::{Measurement, ProbeResult, Profile};

use sluice_proto::proto::WorkerInfo;

use crate::conn::{connect, resolve, Conn};
use crate::units::human;

/// Probes every ordered pair of data centers (the first live worker of
/// each) and, in each data center with two live workers, the LAN between
/// them; prints the median rates and writes them to `links` as a links
/// file (`FROM->TO RATE` lines, `lan RATE` the slowest LAN).
pub fn probe_links(
    conn: &Conn,
    size: u64,
    reps: usize,
    links: Option<&Path>,
) -> anyhow::Result<()> {
    let (_, secret) = resolve(conn)?;
    let info = connect(conn)?.info()?;
    let mut by_dc: BTreeMap<&str, Vec<&WorkerInfo>> = BTreeMap::new();
    for w in info.workers.iter().filter(|w| w.alive) {
        by_dc.entry(&w.datacenter).or_default().push(w);
    }
    anyhow::ensure!(!by_dc.is_empty(), "no live workers");
    let mut pairs = Vec::new();
    for (a, wa) in &by_dc {
        for (b, wb) in &by_dc {
            if a != b {
                pairs.push((format!("{a}->{b}"), wa[0], wb[0]));
            } else if wa.len() >= 2 {
                pairs.push((format!("lan {a}"), wa[0], wa[1]));
            }
        }
    }
    let mut out = String::from("# sluice probe --network: median bytes a second\n");
    let mut lan: Option<f64> = None;
    for (name, from, to) in pairs {
        let mut rates = Vec::new();
        for _ in 0..reps.max(1) {
            let s = sluice_proto::data::probe_link(&from.data_addr, &to.data_addr, &secret, size)?;
            rates.push(size as f64 / s.max(1e-9));
        }
        rates.sort_by(f64::total_cmp);
        let median = rates[rates.len() / 2];
        println!(
            "{name:<16} {} -> {}: {}/s (median of {})",
            from.host,
            to.host,
            human(median as u64),
            rates.len()
        );
        match name.strip_prefix("lan ") {
            Some(_) => lan = Some(lan.map_or(median, |l| l.min(median))),
            None => out.push_str(&format!("{name} {}KB/s\n", (median / 1e3) as u64)),
        }
    }
    if let Some(l) = lan {
        out.push_str(&format!("lan {}KB/s\n", (l / 1e3) as u64));
    }
    if let Some(f) = links {
        std::fs::write(f, &out).map_err(|e| anyhow::anyhow!("writing {}: {e}", f.display()))?;
        println!("links written to {}", f.display());
    }
    Ok(())
}

/// One all-to-all round: when each flow (sender, receiver) ended,
/// seconds from the common start.
type Round = Vec<(usize, usize, f64)>;

/// Every worker of `workers` sends `size` bytes to every other at once;
/// each flow's end.
fn all_to_all_round(
    workers: &[&WorkerInfo],
    secret: &sluice_proto::auth::Secret,
    size: u64,
) -> anyhow::Result<Round> {
    let start = Instant::now();
    std::thread::scope(|s| {
        let flows: Vec<_> = (0..workers.len())
            .flat_map(|i| {
                (0..workers.len())
                    .filter(move |&j| j != i)
                    .map(move |j| (i, j))
            })
            .map(|(i, j)| {
                let (from, to) = (&workers[i].data_addr, &workers[j].data_addr);
                s.spawn(move || {
                    sluice_proto::data::probe_link(from, to, secret, size)
                        .map(|_| (i, j, start.elapsed().as_secs_f64()))
                })
            })
            .collect();
        flows
            .into_iter()
            .map(|f| {
                f.join()
                    .map_err(|_| anyhow::anyhow!("a probe thread panicked"))?
                    .map_err(anyhow::Error::from)
            })
            .collect()
    })
}

/// A worker's part of one round: bytes a second received (all its
/// incoming flows over the end of the last), sent likewise, and its
/// receive skew (the last incoming flow's end minus their mean: seed
/// 004's phase-1 receive skew).
#[derive(Debug, Clone, Copy, PartialEq)]
struct NodeRates {
    receive: f64,
    send: f64,
    skew: f64,
}

fn node_rates(round: &Round, node: usize, size: u64) -> NodeRates {
    let ends = |incoming: bool| -> Vec<f64> {
        round
            .iter()
            .filter(|&&(i, j, _)| if incoming { j == node } else { i == node })
            .map(|&(_, _, t)| t)
            .collect()
    };
    let rate = |ends: &[f64]| {
        let last = ends.iter().copied().fold(0.0, f64::max);
        ends.len() as f64 * size as f64 / last.max(1e-9)
    };
    let incoming = ends(true);
    let mean = incoming.iter().sum::<f64>() / incoming.len().max(1) as f64;
    NodeRates {
        receive: rate(&incoming),
        send: rate(&ends(false)),
        skew: incoming.iter().copied().fold(0.0, f64::max) - mean,
    }
}

/// The median of `v` (not empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `sluice probe --network --all-to-all`: `reps` rounds among the live
/// workers; prints each worker's median rates and skew, and saves the
/// rounds' median-worker receive rates into the profile at `out`.
pub fn probe_all_to_all(conn: &Conn, size: u64, reps: usize, out: &Path) -> anyhow::Result<()> {
    let (_, secret) = resolve(conn)?;
    let info = connect(conn)?.info()?;
    let workers: Vec<&WorkerInfo> = info.workers.iter().filter(|w| w.alive).collect();
    anyhow::ensure!(
        workers.len() >= 2,
        "an all-to-all probe needs two live workers or more ({} live)",
        workers.len()
    );
    let n = workers.len();
    let mut per_node: Vec<Vec<NodeRates>> = vec![Vec::new(); n];
    let mut typical = Vec::new();
    for _ in 0..reps.max(1) {
        let round = all_to_all_round(&workers, &secret, size)?;
        let rates: Vec<NodeRates> = (0..n).map(|j| node_rates(&round, j, size)).collect();
        typical.push(median(rates.iter().map(|r| r.receive).collect()));
        for (j, r) in rates.into_iter().enumerate() {
            per_node[j].push(r);
        }
    }
    println!(
        "all-to-all among {n} workers, {} a flow, medians of {}:",
        human(size),
        typical.len()
    );
    println!(
        "{:<14} {:<16} {:>12} {:>12} {:>13}",
        "worker", "host", "receives/s", "sends/s", "receive skew"
    );
    for (w, rates) in workers.iter().zip(&per_node) {
        let m = |f: fn(&NodeRates) -> f64| median(rates.iter().map(f).collect());
        println!(
            "{:<14} {:<16} {:>12} {:>12} {:>12.3}s",
            format!("worker {}", w.id),
            w.host,
            human(m(|r| r.receive) as u64),
            human(m(|r| r.send) as u64),
            m(|r| r.skew)
        );
    }
    let measured = Measurement::from_samples(typical);
    println!(
        "network N (the median worker's receive rate): {}/s",
        human(measured.median as u64)
    );
    save_network(out, measured)
}

/// Puts `measured` into the profile at `out` as its all-to-all rate (a
/// profile with only that when there is none yet).
fn save_network(out: &Path, measured: Measurement) -> anyhow::Result<()> {
    let skipped = || ProbeResult::Skipped("not probed (only the all-to-all network)".into());
    let mut profile = if out.exists() {
        Profile::load(out)?
    } else {
        Profile {
            measured_at: 0,
            dir: String::new(),
            size: 0,
            disk_read: skipped(),
            disk_write: skipped(),
            memory: skipped(),
            network: skipped(),
            network_all_to_all: None,
        }
    };
    profile.network_all_to_all = Some(ProbeResult::Measured(measured));
    profile.save(out)?;
    println!("saved {} (the model's network rate)", out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_receive_skew_of_a_round() {
        // Three workers, 100 bytes a flow: worker 2 receives its flows at
        // 1 s and 3 s, worker 0 both at 2 s.
        let round = vec![
            (1, 0, 2.0),
            (2, 0, 2.0),
            (0, 1, 1.0),
            (2, 1, 1.0),
            (0, 2, 1.0),
            (1, 2, 3.0),
        ];
        let r0 = node_rates(&round, 0, 100);
        assert_eq!((r0.receive, r0.skew), (100.0, 0.0));
        assert_eq!(r0.send, 200.0 / 1.0);
        let r2 = node_rates(&round, 2, 100);
        assert_eq!(r2.receive, 200.0 / 3.0);
        assert_eq!(r2.skew, 1.0);
        assert_eq!(r2.send, 100.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    }
}
