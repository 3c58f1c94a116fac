//! The honest ideal is a bound: tests of the movement rules.

use proptest::prelude::*;

use crate::{account, Hardware, Measured, Movement, Residency, Resource, Variant};

/// The machine of issue 52's measurements: a 2-core AMD EPYC whose probe
/// read the disk at 820 MB/s, wrote it at 1,134 MB/s and copied memory at
/// 13.4 GB/s.
fn epyc() -> Hardware {
    Hardware {
        disk_read: 820e6,
        disk_write: 1134e6,
        network: 4e9,
        memory: 13.4e9,
        source: "test".into(),
    }
}

/// A cold-cache TeraSort of 1 GB on one node, larger than its sort memory,
/// that took 3.80 s.
fn terasort(residency: Residency) -> Measured {
    Measured {
        nodes: 1.0,
        input: 1e9,
        map_output: 1e9,
        output: 1e9,
        map_only: false,
        sort_memory: 180e6,
        phase1: 2.0,
        phase2: 1.8,
        stragglers: 0.0,
        receive_skew: 0.0,
        residency,
    }
}

fn cold(spill_memory: f64) -> Residency {
    Residency {
        input_cached: 0.0,
        spill_memory,
        output_synced: true,
    }
}

fn close(got: f64, want: f64) {
    assert!((got - want).abs() < 1e-6, "got {got}, want {want}");
}

fn seconds_of(a: &crate::Account, what: &str) -> f64 {
    a.movements
        .iter()
        .filter(|m| m.what == what)
        .map(|m| m.seconds)
        .sum()
}

#[test]
fn the_papers_disk_only_ideal_was_beaten_by_a_terasort_of_1_gb() {
    let a = account(&terasort(Residency::on_disk()), &epyc());
    assert_eq!(a.variant, Variant::External);
    // Read, spill write, spill read, output write, every byte on the disk.
    close(a.ideal_seconds, 2.0 / 0.82 + 2.0 / 1.134);
    assert!(a.efficiency > 1.1, "{}", a.efficiency);
}

#[test]
fn spills_that_fit_in_free_memory_move_at_memory_speed_and_the_ideal_is_a_bound() {
    let a = account(&terasort(cold(4e9)), &epyc());
    // Phase 1: the disk reads the input while memory takes the spills;
    // phase 2: memory gives the spills back while the disk takes the
    // synced output. Each phase is its disk's.
    close(a.phase1.ideal_s, 1.0 / 0.82);
    close(a.phase2.ideal_s, 1.0 / 1.134);
    assert_eq!(a.phase1.bottleneck, Resource::Disk);
    close(seconds_of(&a, "spill write"), 1.0 / 13.4);
    close(seconds_of(&a, "spill read"), 1.0 / 13.4);
    assert!(a.efficiency < 1.0, "{}", a.efficiency);
    close(a.efficiency, (1.0 / 0.82 + 1.0 / 1.134) / 3.8);
}

#[test]
fn spills_beyond_free_memory_go_to_the_disk() {
    let a = account(&terasort(cold(0.25e9)), &epyc());
    let on = |what: &str, res: Resource| -> f64 {
        a.movements
            .iter()
            .filter(|m| m.what == what && m.resource == res)
            .map(|m| m.bytes)
            .sum()
    };
    close(on("spill write", Resource::Memory), 0.25e9);
    close(on("spill write", Resource::Disk), 0.75e9);
    close(on("spill read", Resource::Disk), 0.75e9);
    close(a.phase1.ideal_s, 1.0 / 0.82 + 0.75 / 1.134);
}

#[test]
fn cached_input_and_unsynced_output_move_at_memory_speed() {
    let r = Residency {
        input_cached: 0.5,
        spill_memory: 4e9,
        output_synced: false,
    };
    let a = account(&terasort(r), &epyc());
    close(seconds_of(&a, "input read"), 0.5 / 0.82 + 0.5 / 13.4);
    close(seconds_of(&a, "output write"), 1.0 / 13.4);
    assert_eq!(a.phase2.bottleneck, Resource::Memory);
    close(a.phase2.ideal_s, 2.0 / 13.4);
    let out = a.movements.iter().find(|m| m.what == "output write");
    assert!(
        out.is_some_and(|m| m.why.contains("not synced")),
        "{:?}",
        a.movements
    );
}

#[test]
fn a_sort_in_memory_writes_no_spills() {
    let mut m = terasort(cold(4e9));
    m.sort_memory = 2e9;
    let a = account(&m, &epyc());
    assert_eq!(a.variant, Variant::InMemory);
    assert!(a.movements.iter().all(|m| !m.what.starts_with("spill")));
}

/// The rates a movement may have: every medium that can hold its bytes.
fn allowed(m: &Movement, hw: &Hardware) -> Vec<f64> {
    let memory_too = |disk: f64| vec![disk, hw.memory];
    match (m.what.as_str(), m.why.as_str()) {
        ("input read", w) if w.contains("not in the page cache") => vec![hw.disk_read],
        ("input read", _) => memory_too(hw.disk_read),
        ("spill write", w) if w.contains("beyond") => vec![hw.disk_write],
        ("spill write", _) => memory_too(hw.disk_write),
        ("spill read", w) if w.contains("beyond") => vec![hw.disk_read],
        ("spill read", _) => memory_too(hw.disk_read),
        ("output write", w) if w.contains("not synced") => memory_too(hw.disk_write),
        ("output write", _) => vec![hw.disk_write],
        _ => vec![hw.network],
    }
}

fn rate() -> impl Strategy<Value = f64> {
    1e6..1e11f64
}

fn machine() -> impl Strategy<Value = Hardware> {
    (rate(), rate(), rate(), rate()).prop_map(|(r, w, n, m)| Hardware {
        disk_read: r,
        disk_write: w,
        network: n,
        memory: m,
        source: "proptest".into(),
    })
}

fn job() -> impl Strategy<Value = Measured> {
    (
        (
            1u32..8,
            1e6..1e12f64,
            0.0..2.0f64,
            0.0..2.0f64,
            any::<bool>(),
        ),
        (0.0..=1.0f64, 0.0..1e12f64, any::<bool>(), 1e6..1e12f64),
    )
        .prop_map(
            |((n, input, em, er, map_only), (cached, spill, synced, sort))| Measured {
                nodes: f64::from(n),
                input,
                map_output: input * em,
                output: input * em * er,
                map_only,
                sort_memory: sort,
                phase1: 1.0,
                phase2: 1.0,
                stragglers: 0.0,
                receive_skew: 0.0,
                residency: Residency {
                    input_cached: cached,
                    spill_memory: spill,
                    output_synced: synced,
                },
            },
        )
}

proptest! {
    /// Every movement is charged at the fastest rate among the media that
    /// can hold its bytes.
    #[test]
    fn each_movement_is_charged_at_the_fastest_rate_it_can_have(hw in machine(), m in job()) {
        let a = account(&m, &hw);
        for mv in &a.movements {
            let best = allowed(mv, &hw).into_iter().fold(0.0, f64::max);
            prop_assert_eq!(mv.rate, best, "{:?}", mv);
        }
    }

    /// A run in which every movement goes no faster than the medium it
    /// uses (a random share of its rate, phases summed rather than
    /// overlapped) never beats the ideal; and knowing where the bytes are
    /// only lowers the paper's disk-only ideal.
    #[test]
    fn no_run_beats_the_ideal(
        hw in machine(),
        mut m in job(),
        shares in proptest::collection::vec(0.01..=1.0f64, 10),
    ) {
        let plan = account(&m, &hw);
        let took = |phase: u8| -> f64 {
            plan.movements
                .iter()
                .filter(|mv| mv.phase == phase)
                .zip(shares.iter().cycle())
                .map(|(mv, s)| mv.bytes / (mv.rate * s))
                .sum()
        };
        m.phase1 = took(1).max(1e-9);
        m.phase2 = took(2);
        let a = account(&m, &hw);
        prop_assert!(a.efficiency <= 1.0 + 1e-9, "efficiency {}", a.efficiency);
        let paper = account(&Measured { residency: Residency::on_disk(), ..m }, &hw);
        prop_assert!(a.ideal_seconds <= paper.ideal_seconds * (1.0 + 1e-12));
    }
}
