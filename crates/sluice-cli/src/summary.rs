//! Terminal output: the end-of-job summary.

use sluice_api::TaskCounter;
use sluice_driver::JobReport;
use sluice_proto::report::ClusterReport;

use sluice_tools::units::human;

/// Prints the one-screen summary of a job to stderr: what every job
/// reports, then what its target adds.
pub fn print_summary(r: &JobReport) {
    let p = &r.phases;
    eprintln!(
        "== {} ==  {} -> {}  ({})",
        r.job, r.input, r.output, r.target
    );
    if sluice_proto::tls::insecure() {
        eprintln!("insecure plaintext on every connection (--insecure): for measurement only");
    }
    eprintln!(
        "input    {} in {}; {} reducers; memory {} a task",
        human(r.input_bytes),
        maps_line(r),
        r.reducers,
        human(r.task_memory_bytes)
    );
    eprintln!(
        "time     {:.2}s total: map {:.2}s, shuffle+reduce {:.2}s",
        p.total_s, p.map_s, p.reduce_s
    );
    eprintln!(
        "output   {} records, {}; shuffled {}",
        r.output_records,
        human(r.output_bytes),
        human(r.shuffle_bytes)
    );
    if let Some(l) = &r.local {
        print_local(l);
    }
    if let Some(c) = &r.cluster {
        print_cluster(c);
    }
    for row in TaskCounter::ALL.chunks(2) {
        let cells: Vec<String> = row
            .iter()
            .map(|&c| format!("{:<24}{:>16}", c.name(), r.counter(c)))
            .collect();
        eprintln!("  {}", cells.join("    "));
    }
    for (name, v) in &r.user_counters {
        eprintln!("  {name:<24}{v:>16}");
    }
}

/// `12 maps`, or when small inputs were packed several to a map
/// `10000 files in 12 maps (834 a map)` (blocks on a cluster).
fn maps_line(r: &JobReport) -> String {
    if r.input_pieces <= r.maps || r.maps == 0 {
        return format!("{} maps", r.maps);
    }
    let what = if r.cluster.is_some() {
        "blocks"
    } else {
        "files"
    };
    format!(
        "{} {what} in {} maps ({} a map)",
        r.input_pieces,
        r.maps,
        r.input_pieces.div_ceil(r.maps)
    )
}

/// The local engine's lines: threads, phases, spills, the model.
fn print_local(r: &sluice_engine::JobReport) {
    let p = &r.phases;
    eprintln!(
        "local    {} threads sharing {}; {} files; setup {:.2}s, map {:.2}s, merge {:.2}s, \
         reduce {:.2}s, commit {:.2}s",
        r.threads,
        human(r.memory_budget),
        r.input_files,
        p.setup_s,
        p.map_s,
        p.merge_s,
        p.reduce_s,
        p.commit_s
    );
    eprintln!(
        "speed    {:.1} MB/s of input; peak RSS {}; spilled {} in {} runs, {} merge passes",
        r.throughput_mb_s,
        human(r.peak_rss_bytes),
        human(r.spilled_bytes),
        r.spill_files,
        r.merge_passes
    );
    if let Some(m) = &r.model {
        eprintln!(
            "model    ideal {:.2}s ({}; phase 1 {:.2}s {:?}-bound, phase 2 {:.2}s {:?}-bound); efficiency {:.2} ({:.1}x ideal); e_M {:.3}, e_R {:.3}",
            m.ideal_seconds,
            m.variant.name(),
            m.phase1.ideal_s,
            m.phase1.bottleneck,
            m.phase2.ideal_s,
            m.phase2.bottleneck,
            m.efficiency,
            m.slowdown,
            m.map_ratio,
            m.reduce_ratio
        );
        eprintln!("         hardware: {}", m.hardware.source);
        // The ideal's phase-by-phase account: each movement, the rate it
        // was charged at and why.
        for mv in &m.movements {
            eprintln!(
                "         phase {} {:<13}{:>10} at {:>9.1} MB/s {:<8} {:>6.2}s  {}",
                mv.phase,
                mv.what,
                human(mv.bytes as u64),
                mv.rate / 1e6,
                format!("{:?}", mv.resource).to_lowercase(),
                mv.seconds,
                mv.why
            );
        }
    }
}

/// Slots held over time as two rows of bars, scaled to the most held.
fn sparklines(points: &[sluice_proto::report::SlotPoint]) -> Option<(String, String)> {
    const BARS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let top = points
        .iter()
        .map(|p| p.maps.max(p.reduces))
        .fold(0.0, f64::max);
    if top <= 0.0 {
        return None;
    }
    let row = |f: fn(&sluice_proto::report::SlotPoint) -> f64| -> String {
        points
            .iter()
            .map(|p| BARS[((f(p) / top) * 8.0).round().clamp(0.0, 8.0) as usize])
            .collect()
    };
    Some((row(|p| p.maps), row(|p| p.reduces)))
}

/// Data centers: map output in each, and the bytes that crossed between
/// them.
fn print_wan(r: &ClusterReport) {
    let out: Vec<String> = r
        .map_output_by_datacenter
        .iter()
        .map(|(dc, b)| format!("{dc} {}", human(*b)))
        .collect();
    eprintln!(
        "wan      reduces by {}; map output {}; {} crossed data centers",
        r.reduce_scheduler,
        out.join(", "),
        human(r.wan_bytes)
    );
    for c in &r.crossings {
        eprintln!(
            "         {} -> {}: {} shuffle, {} block reads, {} output copies",
            c.from,
            c.to,
            human(c.shuffle_bytes),
            human(c.read_bytes),
            human(c.replication_bytes)
        );
    }
}

/// The cluster's lines: workers, locality, attempts, stragglers.
fn print_cluster(r: &ClusterReport) {
    let levels: Vec<String> = r
        .maps_by_level
        .iter()
        .map(|(level, n)| format!("{n} {level}"))
        .collect();
    eprintln!(
        "cluster  {} on {} workers; {} data-local, {} remote maps (by level: {}); receive skew {:.2}",
        r.job_id,
        r.workers,
        r.data_local_maps,
        r.remote_maps,
        levels.join(", "),
        r.receive_skew
    );
    eprintln!(
        "slots    pool {}; held on average {:.2} map and {:.2} reduce slots ({:.2} and {:.2} task-s)",
        if r.pool.is_empty() { "-" } else { &r.pool },
        r.slots.mean_map_slots,
        r.slots.mean_reduce_slots,
        r.slots.map_slot_s,
        r.slots.reduce_slot_s
    );
    if let Some((maps, reduces)) = sparklines(&r.slots.over_time) {
        eprintln!("         map slots    |{maps}|");
        eprintln!("         reduce slots |{reduces}|");
    }
    let c = &r.cache;
    if c.maps_from_cache > 0 || r.maps_by_level.contains_key("cache") {
        eprintln!(
            "cache    {} maps read their block from memory: {} from cache, {} from disk \
             (hit ratio {:.0}%)",
            c.maps_from_cache,
            human(c.bytes_from_cache),
            human(c.bytes_from_disk),
            c.hit_ratio * 100.0
        );
    }
    if r.map_output_by_datacenter.len() > 1
        || !r.crossings.is_empty()
        || r.reduce_scheduler == "arts"
    {
        print_wan(r);
    }
    let a = &r.attempts;
    eprintln!(
        "attempts {} launched, {} failed, {} killed, {} lost, {} speculative ({:.2} s redone); \
         {} damaged replicas met",
        a.launched, a.failed, a.killed, a.lost, a.speculative, a.wasted_s, a.damaged_replicas
    );
    for w in &r.per_worker {
        eprintln!(
            "worker   {} {}: {} maps {:.2} s, {} reduces {:.2} s, {} shuffled in",
            w.worker,
            w.addr,
            w.maps,
            w.map_s,
            w.reduces,
            w.reduce_s,
            human(w.shuffle_bytes)
        );
    }
    let t = &r.time_skew;
    eprintln!(
        "skew     waits for the last worker: maps {:.2} s, reduces {:.2} s on average; \
         receive skew {:.2} s (last shuffle completion minus the mean)",
        t.map_stragglers_s, t.reduce_stragglers_s, t.receive_skew_s
    );
    for s in &r.stragglers {
        eprintln!(
            "straggler {} on {}: {:.2} s (median {:.2} s)",
            s.task, s.worker, s.seconds, s.median_s
        );
    }
}
