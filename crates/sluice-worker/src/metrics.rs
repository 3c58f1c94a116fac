//! The worker's `GET /metrics` in Prometheus' text format: its tasks by
//! kind and outcome, the bytes they read, fetched and wrote, its
//! heartbeats and their round trips, and its block cache. Requests need
//! the cluster's web token, as the coordinator's pages do.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};
use sluice_proto::auth::{check_web_request, Secret};
use sluice_proto::proto::{CacheReport, TaskReport};

/// Round trip of a heartbeat, including the time the coordinator held it.
const HEARTBEAT: &str = "sluice_worker_heartbeat_seconds";

/// The worker's metrics recorder (its own, not the process-wide one).
pub struct WorkerMetrics {
    recorder: PrometheusRecorder,
}

impl std::fmt::Debug for WorkerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkerMetrics")
    }
}

impl Default for WorkerMetrics {
    fn default() -> Self {
        let buckets = [1e-4, 1e-3, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0];
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(HEARTBEAT.into()), &buckets)
            .expect("buckets are not empty")
            .build_recorder();
        metrics::with_local_recorder(&recorder, describe);
        WorkerMetrics { recorder }
    }
}

fn describe() {
    describe_counter!(
        "sluice_worker_tasks_total",
        "Task attempts this worker ended, by kind (map, reduce) and outcome."
    );
    describe_counter!(
        "sluice_worker_input_bytes_total",
        Unit::Bytes,
        "Bytes its map tasks read."
    );
    describe_counter!(
        "sluice_worker_shuffle_bytes_total",
        Unit::Bytes,
        "Bytes its reduce tasks fetched."
    );
    describe_counter!(
        "sluice_worker_output_bytes_total",
        Unit::Bytes,
        "Bytes its tasks wrote as job output."
    );
    describe_counter!(
        "sluice_worker_heartbeats_total",
        "Heartbeats sent, by result (ok, failed)."
    );
    describe_histogram!(
        HEARTBEAT,
        Unit::Seconds,
        "Heartbeat round trips, with the coordinator's hold."
    );
    describe_counter!(
        "sluice_worker_cache_hits_total",
        "Map reads its cache served."
    );
    describe_counter!(
        "sluice_worker_cache_misses_total",
        "Map reads its cache did not hold."
    );
    describe_gauge!(
        "sluice_worker_cache_used_bytes",
        Unit::Bytes,
        "Bytes cached."
    );
    describe_gauge!(
        "sluice_worker_cache_capacity_bytes",
        Unit::Bytes,
        "Cache capacity."
    );
    describe_gauge!("sluice_worker_running_tasks", "Tasks running now.");
}

impl WorkerMetrics {
    /// Counts a task attempt that ended with `report` (`killed`: its job
    /// or the coordinator ended it).
    pub fn task(&self, kind: &'static str, report: &TaskReport, killed: bool) {
        let outcome = match (killed, report.ok) {
            (true, _) => "killed",
            (false, true) => "succeeded",
            (false, false) => "failed",
        };
        metrics::with_local_recorder(&self.recorder, || {
            counter!("sluice_worker_tasks_total", "kind" => kind, "outcome" => outcome)
                .increment(1);
            counter!("sluice_worker_input_bytes_total").increment(report.input_bytes);
            counter!("sluice_worker_shuffle_bytes_total").increment(report.shuffle_bytes);
            counter!("sluice_worker_output_bytes_total").increment(report.output_bytes);
        });
    }

    /// Records a heartbeat's round trip.
    pub fn heartbeat(&self, seconds: f64, ok: bool) {
        metrics::with_local_recorder(&self.recorder, || {
            let result = if ok { "ok" } else { "failed" };
            counter!("sluice_worker_heartbeats_total", "result" => result).increment(1);
            metrics::histogram!(HEARTBEAT).record(seconds);
        });
    }

    /// The text of `/metrics`, with the cache and running tasks as now.
    pub fn render(&self, cache: &CacheReport, running: usize) -> String {
        metrics::with_local_recorder(&self.recorder, || {
            counter!("sluice_worker_cache_hits_total").absolute(cache.hits);
            counter!("sluice_worker_cache_misses_total").absolute(cache.misses);
            gauge!("sluice_worker_cache_used_bytes").set(cache.used as f64);
            gauge!("sluice_worker_cache_capacity_bytes").set(cache.capacity as f64);
            gauge!("sluice_worker_running_tasks").set(running as f64);
        });
        self.recorder.handle().render()
    }
}

/// What `/metrics` reads now: the cache's report and the running tasks.
pub type Now = Arc<dyn Fn() -> (CacheReport, usize) + Send + Sync>;

#[derive(Clone)]
struct Web {
    metrics: Arc<WorkerMetrics>,
    secret: Secret,
    now: Now,
}

/// Serves `/metrics` on `addr`; returns the bound address.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<WorkerMetrics>,
    secret: Secret,
    now: Now,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/metrics", get(scrape))
        .with_state(Web {
            metrics,
            secret,
            now,
        });
    // https with the worker's certificate, unless --insecure.
    let served = match sluice_proto::tls::current() {
        Some(tls) => {
            let https = sluice_proto::tls::web::Https::new(listener, tls.web_server())?;
            tokio::spawn(async move {
                let r = axum::serve(https, app).await;
                r.map_err(|e| tracing::error!("metrics server stopped: {e}"))
            })
        }
        None => tokio::spawn(async move {
            let r = axum::serve(listener, app).await;
            r.map_err(|e| tracing::error!("metrics server stopped: {e}"))
        }),
    };
    drop(served);
    Ok(bound)
}

async fn scrape(State(web): State<Web>, req: Request) -> Response {
    if !check_web_request(&web.secret, req.uri().query(), req.headers()).0 {
        return (
            StatusCode::UNAUTHORIZED,
            "401: /metrics needs the cluster's web token\n",
        )
            .into_response();
    }
    let (cache, running) = (web.now)();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        web.metrics.render(&cache, running),
    )
        .into_response()
}
