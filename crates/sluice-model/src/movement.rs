//! The honest ideal: each movement of a job's bytes charged at the fastest
//! rate the machine has for it, given where the bytes can be.
//!
//! The paper charges every byte to the disk. On a machine whose free memory
//! holds a job's spills, the kernel's page cache keeps them and they never
//! reach the disk; input already in the page cache is read from memory; an
//! output that is not synced is written to memory. A model that charges
//! those bytes to the disk is not a bound: a job beat it (a TeraSort of
//! 1 GB at efficiency 1.12). The rules, per node:
//!
//! | movement | phase | charged at | when |
//! |---|---|---|---|
//! | input read | 1 | memory (or disk read if faster) | the share in the page cache at job start |
//! | input read | 1 | disk read | the rest |
//! | shuffle | 1 | network | `(n-1)/n` of map output |
//! | spill write | 1 | memory (or disk write if faster) | external sort: the spill bytes that fit in the spill memory |
//! | spill write | 1 | disk write | the rest |
//! | spill read | 2 | memory (or disk read if faster) | the spill bytes that fit |
//! | spill read | 2 | disk read | the rest |
//! | output write | 2 (1 if map-only) | disk write | the output is synced before its commit |
//! | output write | 2 (1 if map-only) | memory (or disk write if faster) | not synced |
//! | replication | 2 | network | `r - 1` copies |
//!
//! A phase lasts as long as its busiest resource (disk, network, memory):
//! compute and the other resources overlap, as in the paper. Processor time
//! is not charged: the ideal is what the machine's data paths allow.

use serde::{Deserialize, Serialize};

use crate::{Hardware, PhaseIdeal, Resource};

/// Where a job's bytes can be: what decides the rate each movement is
/// charged at.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Residency {
    /// Share of the input in the page cache when the job started, 0 to 1
    /// (measured with `mincore` by the local engine).
    pub input_cached: f64,
    /// Bytes per node the page cache can hold for spills: memory available
    /// at job start (`MemAvailable`) less the job's own memory budget; 0
    /// when unknown.
    pub spill_memory: f64,
    /// Whether the output is synced (fsync) before its commit.
    pub output_synced: bool,
}

impl Residency {
    /// The paper's assumption: nothing cached, no memory for spills, the
    /// output synced. Every byte is charged to the disk.
    pub fn on_disk() -> Self {
        Residency {
            input_cached: 0.0,
            spill_memory: 0.0,
            output_synced: true,
        }
    }
}

impl Default for Residency {
    fn default() -> Self {
        Residency::on_disk()
    }
}

/// One movement of bytes, charged at one rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Movement {
    /// Phase 1 or 2.
    pub phase: u8,
    /// What moves: `input read`, `shuffle`, `spill write`, `spill read`,
    /// `output write`, `replication`.
    pub what: String,
    /// Bytes per node.
    pub bytes: f64,
    /// The resource it uses.
    pub resource: Resource,
    /// The rate charged, bytes/s.
    pub rate: f64,
    /// `bytes / rate`.
    pub seconds: f64,
    /// Why this rate.
    pub why: String,
}

/// What a job moves per node, as fractions of its input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flows {
    /// Nodes.
    pub nodes: f64,
    /// Input bytes per node.
    pub input: f64,
    /// Map output / input.
    pub map_ratio: f64,
    /// Output / map output.
    pub reduce_ratio: f64,
    /// Whether there is no reduce phase (the output is written in phase 1).
    pub map_only: bool,
    /// Whether map output is spilled and read back (an external sort).
    pub external: bool,
    /// Output replicas.
    pub replication: f64,
}

/// A rate and the resource it uses, as a choice for a movement.
type Choice = (Resource, f64, &'static str);

/// Every movement of `f` on `hw`, each charged at the fastest rate it can
/// have given `r`. Movements of no bytes are left out.
pub fn movements(f: &Flows, hw: &Hardware, r: &Residency) -> Vec<Movement> {
    let mut out = Vec::new();
    let mut add = |phase: u8, what: &str, bytes: f64, choices: &[Choice], why: String| {
        if bytes <= 0.0 {
            return;
        }
        let (resource, rate, name) = fastest(choices);
        out.push(Movement {
            phase,
            what: what.to_owned(),
            bytes,
            resource,
            rate,
            seconds: bytes / rate,
            why: format!("{why}: {name}"),
        });
    };
    let mem = (Resource::Memory, hw.memory, "memory");
    let disk_read = (Resource::Disk, hw.disk_read, "disk read");
    let disk_write = (Resource::Disk, hw.disk_write, "disk write");
    let net = (Resource::Network, hw.network, "network");
    let cached = r.input_cached.clamp(0.0, 1.0);
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    add(
        1,
        "input read",
        f.input * cached,
        &[mem, disk_read],
        format!("{} in the page cache at start", pct(cached)),
    );
    add(
        1,
        "input read",
        f.input * (1.0 - cached),
        &[disk_read],
        format!("{} not in the page cache at start", pct(1.0 - cached)),
    );
    let map_out = f.input * f.map_ratio;
    let n = f.nodes.max(1.0);
    if !f.map_only {
        add(
            1,
            "shuffle",
            (n - 1.0) / n * map_out,
            &[net],
            "to other nodes".into(),
        );
    }
    if f.external && !f.map_only {
        let fit = map_out.min(r.spill_memory.max(0.0));
        let why = format!("fits in the {:.0} MB of free memory", r.spill_memory / 1e6);
        add(1, "spill write", fit, &[mem, disk_write], why.clone());
        add(2, "spill read", fit, &[mem, disk_read], why);
        let why = "beyond free memory".to_owned();
        add(1, "spill write", map_out - fit, &[disk_write], why.clone());
        add(2, "spill read", map_out - fit, &[disk_read], why);
    }
    let output = map_out * if f.map_only { 1.0 } else { f.reduce_ratio };
    let phase = if f.map_only { 1 } else { 2 };
    let copies = f.replication.max(1.0);
    if r.output_synced {
        add(
            phase,
            "output write",
            copies * output,
            &[disk_write],
            "synced before commit".into(),
        );
    } else {
        add(
            phase,
            "output write",
            copies * output,
            &[mem, disk_write],
            "not synced".into(),
        );
    }
    add(
        phase,
        "replication",
        (copies - 1.0) * output,
        &[net],
        "to other nodes".into(),
    );
    out
}

/// The fastest of `choices` (at least one).
fn fastest(choices: &[Choice]) -> Choice {
    choices
        .iter()
        .copied()
        .fold(choices[0], |best, c| if c.1 > best.1 { c } else { best })
}

/// Phase `phase` of `moves`: each resource's seconds summed, the phase as
/// long as the busiest.
pub fn phase_ideal(moves: &[Movement], phase: u8) -> PhaseIdeal {
    let sum = |res: Resource| -> f64 {
        moves
            .iter()
            .filter(|m| m.phase == phase && m.resource == res)
            .map(|m| m.seconds)
            .sum()
    };
    PhaseIdeal::of(
        sum(Resource::Disk),
        sum(Resource::Network),
        sum(Resource::Memory),
    )
}

#[cfg(test)]
#[path = "movement_tests.rs"]
mod tests;
