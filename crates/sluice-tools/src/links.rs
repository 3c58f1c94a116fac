//! `sluice probe --network`: the bandwidth between a cluster's data
//! centers, measured by the workers themselves (data-plane PROBE: one
//! worker sends bytes to another's SINK), for ARTS's `--links` file.

use std::collections::BTreeMap;
use std::path::Path;

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
