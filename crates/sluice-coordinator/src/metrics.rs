//! The coordinator's metrics in Prometheus' text format (`GET /metrics`).
//!
//! Most are read from the state when scraped ([`Snapshot`], taken under
//! the state's lock): jobs and tasks by state, workers, the block caches,
//! and the sums of the ended jobs' reports, so a counter here equals the
//! same field summed over the reports. Heartbeat latency is recorded as it
//! happens. The recorder is this coordinator's own (not the process-wide
//! one), so tests running several coordinators in one process keep their
//! numbers apart.

use std::collections::BTreeMap;

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};

use crate::sched::{MAP, REDUCE};
use crate::state::{State, Totals};

/// Seconds the coordinator took to handle a heartbeat (not counting how
/// long it held one with nothing to hand out).
const HEARTBEAT: &str = "sluice_heartbeat_seconds";

/// What `/metrics` shows, read from the state at one moment.
#[derive(Debug, Default)]
pub struct Snapshot {
    jobs: BTreeMap<&'static str, u64>,
    tasks: BTreeMap<(&'static str, &'static str), u64>,
    totals: Totals,
    fetch_failures: u64,
    workers: BTreeMap<&'static str, u64>,
    cache: [u64; 4],
    datasets: u64,
}

impl Snapshot {
    /// Reads it from `st`.
    pub fn of(st: &State) -> Snapshot {
        let mut s = Snapshot {
            totals: st.totals.clone(),
            fetch_failures: st.fetch_failures,
            datasets: st.catalog.datasets.len() as u64,
            ..Snapshot::default()
        };
        for name in ["running", "succeeded", "failed", "killed"] {
            s.jobs.insert(name, 0);
        }
        for r in st.records.values() {
            *s.jobs.entry(r.state.name()).or_default() += 1;
        }
        for (kind, name) in [(MAP, "map"), (REDUCE, "reduce")] {
            let (mut pending, mut running, mut done) = (0, 0, 0);
            for j in st.jobs.values().filter(|j| j.is_running()) {
                let (d, r) = (j.done(kind) as u64, j.running(kind) as u64);
                done += d;
                running += r;
                pending += (j.tasks(kind).len() as u64).saturating_sub(d + r);
            }
            s.tasks.insert((name, "pending"), pending);
            s.tasks.insert((name, "running"), running);
            s.tasks.insert((name, "done"), done);
        }
        s.workers.insert("alive", 0);
        s.workers.insert("lost", 0);
        for w in st.workers.values() {
            let state = if w.info.alive { "alive" } else { "lost" };
            *s.workers.entry(state).or_default() += 1;
            if w.info.alive {
                let c = &w.cache;
                s.cache[0] += c.hits;
                s.cache[1] += c.misses;
                s.cache[2] += c.used;
                s.cache[3] += c.capacity;
            }
        }
        s
    }
}

/// The coordinator's metrics recorder.
pub struct Metrics {
    recorder: PrometheusRecorder,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A recorder with the metrics described.
    pub fn new() -> Metrics {
        let buckets = [
            1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1.0,
        ];
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(HEARTBEAT.into()), &buckets)
            .expect("buckets are not empty")
            .build_recorder();
        metrics::with_local_recorder(&recorder, describe);
        Metrics { recorder }
    }

    /// Records how long a heartbeat took to handle.
    pub fn heartbeat(&self, seconds: f64) {
        metrics::with_local_recorder(&self.recorder, || {
            metrics::histogram!(HEARTBEAT).record(seconds);
        });
    }

    /// The text of `/metrics` for `s`.
    pub fn render(&self, s: &Snapshot) -> String {
        metrics::with_local_recorder(&self.recorder, || record(s));
        self.recorder.handle().render()
    }
}

fn describe() {
    describe_gauge!("sluice_jobs", "Jobs the coordinator knows, by state.");
    describe_gauge!(
        "sluice_tasks",
        "Tasks of running jobs by kind (map, reduce) and state (pending, running, done)."
    );
    describe_gauge!("sluice_workers", "Workers by state (alive, lost).");
    describe_gauge!("sluice_datasets", "Data sets in the catalog.");
    describe_counter!(
        "sluice_attempts_total",
        "Task attempts of ended jobs, by outcome (launched counts every one)."
    );
    describe_counter!(
        "sluice_maps_total",
        "Winning map attempts of ended jobs by the locality level they read at."
    );
    describe_counter!(
        "sluice_shuffle_bytes_total",
        Unit::Bytes,
        "Bytes the reducers of ended jobs fetched."
    );
    describe_counter!(
        "sluice_input_bytes_total",
        Unit::Bytes,
        "Input bytes of ended jobs."
    );
    describe_counter!(
        "sluice_output_bytes_total",
        Unit::Bytes,
        "Output bytes of ended jobs."
    );
    describe_counter!(
        "sluice_fetch_failures_total",
        "Shuffle fetches reducers reported failed."
    );
    describe_counter!(
        "sluice_cache_hits_total",
        "Map reads the live workers' block caches served."
    );
    describe_counter!(
        "sluice_cache_misses_total",
        "Map reads of the live workers that their caches did not hold."
    );
    describe_gauge!(
        "sluice_cache_used_bytes",
        Unit::Bytes,
        "Bytes the live workers cache."
    );
    describe_gauge!(
        "sluice_cache_capacity_bytes",
        Unit::Bytes,
        "The live workers' cache capacity."
    );
    describe_histogram!(
        HEARTBEAT,
        Unit::Seconds,
        "Time to handle a worker's heartbeat (not its hold)."
    );
}

fn record(s: &Snapshot) {
    for (state, n) in &s.jobs {
        gauge!("sluice_jobs", "state" => *state).set(*n as f64);
    }
    for ((kind, state), n) in &s.tasks {
        gauge!("sluice_tasks", "kind" => *kind, "state" => *state).set(*n as f64);
    }
    for (state, n) in &s.workers {
        gauge!("sluice_workers", "state" => *state).set(*n as f64);
    }
    gauge!("sluice_datasets").set(s.datasets as f64);
    let a = &s.totals.attempts;
    for (outcome, n) in [
        ("launched", a.launched),
        ("failed", a.failed),
        ("killed", a.killed),
        ("lost", a.lost),
        ("speculative", a.speculative),
    ] {
        counter!("sluice_attempts_total", "outcome" => outcome).absolute(u64::from(n));
    }
    for level in ["cache", "node", "rack", "datacenter", "any"] {
        let n = s.totals.maps_by_level.get(level).copied().unwrap_or(0);
        counter!("sluice_maps_total", "level" => level).absolute(n);
    }
    counter!("sluice_shuffle_bytes_total").absolute(s.totals.shuffle_bytes);
    counter!("sluice_input_bytes_total").absolute(s.totals.input_bytes);
    counter!("sluice_output_bytes_total").absolute(s.totals.output_bytes);
    counter!("sluice_fetch_failures_total").absolute(s.fetch_failures);
    counter!("sluice_cache_hits_total").absolute(s.cache[0]);
    counter!("sluice_cache_misses_total").absolute(s.cache[1]);
    gauge!("sluice_cache_used_bytes").set(s.cache[2] as f64);
    gauge!("sluice_cache_capacity_bytes").set(s.cache[3] as f64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_renders_as_prometheus_text() {
        let m = Metrics::new();
        m.heartbeat(0.002);
        let mut s = Snapshot::default();
        s.jobs.insert("succeeded", 3);
        s.totals.shuffle_bytes = 12345;
        s.totals.maps_by_level.insert("node".into(), 7);
        let text = m.render(&s);
        assert!(
            text.contains("sluice_jobs{state=\"succeeded\"} 3"),
            "{text}"
        );
        assert!(text.contains("sluice_shuffle_bytes_total 12345"), "{text}");
        assert!(
            text.contains("sluice_maps_total{level=\"node\"} 7"),
            "{text}"
        );
        assert!(text.contains("sluice_heartbeat_seconds_count 1"), "{text}");
        assert!(
            text.contains("# TYPE sluice_attempts_total counter"),
            "{text}"
        );
    }
}
