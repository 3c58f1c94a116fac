//! Accounting a measured job against the model: ideal time, efficiency and
//! the paper's per-phase breakdown.

use serde::{Deserialize, Serialize};

use crate::{
    ideal_equivalent_nodes, movements, phase_ideal, Flows, Hardware, Movement, Residency, Resource,
    Variant,
};

/// What was measured of a job, in bytes and seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// Nodes the job ran on.
    pub nodes: f64,
    /// Input bytes.
    pub input: f64,
    /// Map output bytes moved to reducers (0 for map-only jobs).
    pub map_output: f64,
    /// Bytes of job output.
    pub output: f64,
    /// Whether the job has no reduce phase.
    pub map_only: bool,
    /// Memory for map output per node.
    pub sort_memory: f64,
    /// Seconds of phase 1 (read, map, spill).
    pub phase1: f64,
    /// Seconds of phase 2 (merge, reduce, write, commit).
    pub phase2: f64,
    /// Seconds from a node's finish to the last node's finish, averaged.
    pub stragglers: f64,
    /// Last minus mean incoming-flow completion in phase 1.
    pub receive_skew: f64,
    /// Where the bytes could be: what each movement is charged at.
    pub residency: Residency,
}

/// One phase: measured against ideal.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PhaseAccount {
    /// Measured seconds.
    pub actual_s: f64,
    /// Ideal seconds.
    pub ideal_s: f64,
    /// What bounds the ideal.
    pub bottleneck: Resource,
}

/// The model's view of a measured job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Account {
    /// The rates used.
    pub hardware: Hardware,
    /// Nodes.
    pub nodes: f64,
    /// `e_M` as measured.
    pub map_ratio: f64,
    /// `e_R` as measured.
    pub reduce_ratio: f64,
    /// The variant the model chose.
    pub variant: Variant,
    /// Ideal seconds.
    pub ideal_seconds: f64,
    /// Measured seconds.
    pub actual_seconds: f64,
    /// Ideal / actual.
    pub efficiency: f64,
    /// Actual / ideal.
    pub slowdown: f64,
    /// Nodes an ideal system would need for the measured speed.
    pub ideal_equivalent_nodes: f64,
    /// Phase 1.
    pub phase1: PhaseAccount,
    /// Phase 2.
    pub phase2: PhaseAccount,
    /// Straggler seconds (0 on one node).
    pub stragglers_s: f64,
    /// Phase-1 receive skew seconds (0 on one node).
    pub receive_skew_s: f64,
    /// Where the bytes could be.
    #[serde(default)]
    pub residency: Residency,
    /// Each movement per node and the rate it was charged at: the ideal's
    /// phase-by-phase account.
    #[serde(default)]
    pub movements: Vec<Movement>,
}

/// The ideal of a measured job on `hw`: every movement of its bytes (input
/// read, shuffle, spills of an external sort, output write) charged at the
/// fastest rate the machine has for it given where the bytes can be
/// (`m.residency`; see the `movement` module). With
/// [`Residency::on_disk`] this is the paper's model with the measured `e_M`
/// and `e_R`; map-only jobs read their input and write their output in
/// phase 1 (grep is the case of negligible output).
pub fn account(m: &Measured, hw: &Hardware) -> Account {
    let input = m.input.max(1.0);
    let (em, er) = if m.map_only {
        (m.output / input, 1.0)
    } else {
        (m.map_output / input, m.output / m.map_output.max(1.0))
    };
    let nodes = m.nodes.max(1.0);
    let per_node = input / nodes;
    let variant = if m.map_only {
        Variant::InMemory
    } else {
        Variant::choose(per_node * em, Some(m.sort_memory), false)
    };
    let flows = Flows {
        nodes,
        input: per_node,
        map_ratio: em,
        reduce_ratio: er,
        map_only: m.map_only,
        external: variant.external(),
        replication: 1.0,
    };
    let moves = movements(&flows, hw, &m.residency);
    let (p1, p2) = (phase_ideal(&moves, 1), phase_ideal(&moves, 2));
    let ideal_seconds = p1.seconds + p2.seconds;
    let actual = m.phase1 + m.phase2 + m.stragglers + m.receive_skew;
    Account {
        hardware: hw.clone(),
        nodes: m.nodes,
        map_ratio: em,
        reduce_ratio: er,
        variant,
        ideal_seconds,
        actual_seconds: actual,
        efficiency: ideal_seconds / actual,
        slowdown: actual / ideal_seconds,
        ideal_equivalent_nodes: ideal_equivalent_nodes(m.nodes, ideal_seconds, actual),
        phase1: phase(m.phase1, &p1),
        phase2: phase(m.phase2, &p2),
        stragglers_s: m.stragglers,
        receive_skew_s: m.receive_skew,
        residency: m.residency,
        movements: moves,
    }
}

fn phase(actual_s: f64, p: &crate::PhaseIdeal) -> PhaseAccount {
    PhaseAccount {
        actual_s,
        ideal_s: p.seconds,
        bottleneck: p.bottleneck,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hw() -> Hardware {
        Hardware {
            disk_read: 100e6,
            disk_write: 50e6,
            network: 1e9,
            memory: 10e9,
            source: "test".into(),
        }
    }

    fn measured() -> Measured {
        Measured {
            nodes: 1.0,
            input: 1e9,
            map_output: 1e9,
            output: 1e9,
            map_only: false,
            sort_memory: 1e8,
            phase1: 30.0,
            phase2: 30.0,
            stragglers: 0.0,
            receive_skew: 0.0,
            residency: Residency::on_disk(),
        }
    }

    #[test]
    fn a_sort_larger_than_memory_is_external_on_one_node() {
        let a = account(&measured(), &hw());
        assert_eq!(a.variant, Variant::External);
        // Phase 1: read 10 s + write runs 20 s; phase 2: read runs 10 s + write 20 s.
        assert!((a.ideal_seconds - 60.0).abs() < 1e-9, "{}", a.ideal_seconds);
        assert!((a.efficiency - 1.0).abs() < 1e-9);
        assert_eq!((a.map_ratio, a.reduce_ratio), (1.0, 1.0));
    }

    #[test]
    fn grep_is_bounded_by_reading() {
        let m = Measured {
            map_only: true,
            map_output: 0.0,
            output: 1e6,
            phase1: 20.0,
            phase2: 0.0,
            ..measured()
        };
        let a = account(&m, &hw());
        assert!(
            (a.ideal_seconds - (10.0 + 0.02)).abs() < 1e-9,
            "{}",
            a.ideal_seconds
        );
        assert!((a.slowdown - 20.0 / 10.02).abs() < 1e-9);
    }
}
