//! The coordinator's web pages and `/metrics`, over HTTP.
//!
//! Pages: jobs (`/`), a job with its timeline (`/jobs/ID`, its report as
//! JSON at `/jobs/ID/report.json`), workers with their CPU and network
//! (`/workers`), data sets and their blocks (`/datasets`,
//! `/datasets/NAME`), the block cache (`/cache`) and the pools
//! (`/pools`). Each is rendered on the server from a copy of the state
//! taken under its lock (never held across an await), with no script.
//!
//! Every request must carry the web token ([`Secret::web_token`], which
//! `sluice cluster up` and `sluice web` print): as `?token=`, which also
//! sets a cookie so links work, as the `sluice_token` cookie, or as
//! `Authorization: Bearer` (what a Prometheus scrape sends). Anything
//! else gets 401 and not a byte of the cluster's state. A user's token
//! (their key's, `sluice web --user-key`) shows them only their jobs and
//! the data sets they may read; the workers, the cache and `/metrics`
//! are an admin's only.

mod access;
mod page;

use std::collections::BTreeMap;
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::extract::{Path, Request, State as AxState};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Extension;
use axum::Router;
use sluice_proto::auth::Secret;
use sluice_proto::ids::DatasetName;
use sluice_proto::report::ClusterReport;
use sluice_proto::sample::{rates, Sample};
use sluice_proto::users::Caller;

use crate::core::{summary, Core};
use crate::metrics::{Metrics, Snapshot};
use crate::state::State;
use page::{bytes, esc, layout, state, table, url_seg};
use sluice_proto::ids::JobId;

/// Jobs the jobs page lists, newest first.
const JOBS_LISTED: usize = 200;
/// Data sets the data sets page lists.
const DATASETS_LISTED: usize = 1000;
/// How far back the workers page charts CPU and network.
const CHART_WINDOW_MS: u64 = 300_000;

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct Web {
    core: Arc<Mutex<Core>>,
    secret: Secret,
    metrics: Arc<Metrics>,
}

impl Web {
    fn state(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Serves the pages on `addr`; returns the bound address.
pub(crate) async fn serve(
    addr: SocketAddr,
    core: Arc<Mutex<Core>>,
    secret: Secret,
    metrics: Arc<Metrics>,
    term: crate::term::Term,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let web = Web {
        core,
        secret,
        metrics,
    };
    let admins = Router::new()
        .route("/workers", get(workers_page))
        .route("/cache", get(cache_page))
        .route("/metrics", get(metrics_text))
        .route_layer(axum::middleware::from_fn(access::admins_only));
    let app = Router::new()
        .route("/", get(jobs_page))
        .route("/jobs/{id}", get(job_page))
        .route("/jobs/{id}/report.json", get(job_report))
        .route("/datasets", get(datasets_page))
        .route("/datasets/{name}", get(dataset_page))
        .route("/pools", get(pools_page))
        .merge(admins)
        .layer(axum::middleware::from_fn_with_state(web.clone(), auth))
        .with_state(web);
    let stop = async move { term.ended().await };
    // https with the coordinator's certificate, unless --insecure.
    let served = match sluice_proto::tls::current() {
        Some(tls) => {
            let https = sluice_proto::tls::web::Https::new(listener, tls.web_server())?;
            tokio::spawn(async move {
                let r = axum::serve(https, app).with_graceful_shutdown(stop).await;
                r.map_err(|e| tracing::error!("web server stopped: {e}"))
            })
        }
        None => tokio::spawn(async move {
            let r = axum::serve(listener, app)
                .with_graceful_shutdown(stop)
                .await;
            r.map_err(|e| tracing::error!("web server stopped: {e}"))
        }),
    };
    drop(served);
    Ok(bound)
}

/// Lets a request through only with the web token; one that brought it
/// in its query gets the cookie.
async fn auth(AxState(web): AxState<Web>, mut req: Request, next: Next) -> Response {
    let Some((caller, token, set_cookie)) = access::web_caller(&web.secret, &web.core, &req) else {
        return unauthorized();
    };
    req.extensions_mut().insert(caller);
    let mut resp = next.run(req).await;
    if set_cookie {
        let c = format!("sluice_token={token}; Path=/; HttpOnly; SameSite=Strict");
        if let Ok(v) = header::HeaderValue::from_str(&c) {
            resp.headers_mut().insert(header::SET_COOKIE, v);
        }
    }
    resp
}

/// The answer to a request without the token: nothing of the cluster.
pub(crate) fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer realm=\"sluice\"")],
        "401: this page needs the cluster's web token (`sluice web` prints the address with it)\n",
    )
        .into_response()
}

fn not_found(what: String) -> Response {
    (
        StatusCode::NOT_FOUND,
        Html(layout(
            "Not found",
            &format!("<p>{}</p>", esc(&what)),
            false,
        )),
    )
        .into_response()
}

// ------------------------------------------------------------------ jobs

/// One job as the jobs page lists it.
struct JobRow {
    id: JobId,
    state: String,
    pool: String,
    job: String,
    input: String,
    output: String,
    progress: String,
    seconds: Option<f64>,
    error: String,
}

fn job_rows(st: &State, who: &Caller) -> (Vec<JobRow>, bool) {
    let mut rows = Vec::new();
    let mut live = false;
    let mine = |r: &&crate::store::JobRecord| who.name().is_none_or(|u| r.user == u);
    let records = st.records.values().rev().filter(mine);
    for r in records.take(JOBS_LISTED) {
        let id = &r.id;
        let s = st.status(*id).expect("recorded");
        live |= s.state == "running";
        let req = r.request.as_ref();
        let seconds = match st.jobs.get(id) {
            Some(j) => Some(
                j.finished()
                    .unwrap_or_else(std::time::Instant::now)
                    .duration_since(j.started())
                    .as_secs_f64(),
            ),
            None => report_of(st, *id).map(|r| r.phases.total_s),
        };
        rows.push(JobRow {
            id: *id,
            state: s.state,
            pool: s.pool,
            job: req.map_or_else(String::new, |q| q.job.clone()),
            input: req.map_or_else(String::new, |q| q.input.clone()),
            output: req.map_or_else(String::new, |q| q.output.clone()),
            progress: format!(
                "{}/{} maps, {}/{} reduces",
                s.maps_done, s.maps, s.reduces_done, s.reduces
            ),
            seconds,
            error: s.error,
        });
    }
    (rows, live)
}

fn report_of(st: &State, id: JobId) -> Option<ClusterReport> {
    serde_json::from_str(st.report_json(id)?).ok()
}

async fn jobs_page(AxState(web): AxState<Web>, Extension(who): Extension<Caller>) -> Html<String> {
    let (rows, live, epoch, workers, slots) = {
        let core = web.state();
        let st = &core.state;
        let (rows, live) = job_rows(st, &who);
        let alive = st.workers.values().filter(|w| w.info.alive).count();
        (rows, live, st.epoch, alive, st.total_slots())
    };
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                format!("<a href=\"/jobs/{0}\">{0}</a>", r.id),
                state(&r.state),
                esc(&r.pool),
                esc(&r.job),
                esc(&r.input),
                esc(&r.output),
                esc(&r.progress),
                r.seconds.map_or_else(String::new, |s| format!("#{s:.2} s")),
                format!("<span class=\"err\">{}</span>", esc(&r.error)),
            ]
        })
        .collect();
    let body = format!(
        "<p>Epoch {epoch} · {workers} live workers · {slots} slots each of maps and reduces · \
         newest {JOBS_LISTED} jobs shown</p>{}",
        table(
            "jobs",
            &["job", "state", "pool", "kind", "input", "output", "progress", "duration", "error"],
            &cells
        )
    );
    Html(layout("Jobs", &body, live))
}

async fn job_report(
    AxState(web): AxState<Web>,
    Extension(who): Extension<Caller>,
    Path(id): Path<String>,
) -> Response {
    let id = match path_job(&id) {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    match job_view(&web, &who, id) {
        Some((_, report)) => (
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::to_string_pretty(&report).expect("serializable"),
        )
            .into_response(),
        None => not_found(format!("no {id} with a report")),
    }
}

/// A job's status and report: the live one while it runs.
fn job_view(
    web: &Web,
    who: &Caller,
    id: JobId,
) -> Option<(sluice_proto::proto::JobStatus, ClusterReport)> {
    let core = web.state();
    let st = &core.state;
    if who.name().is_some_and(|u| st.job_user(id) != u) {
        return None;
    }
    let mut status = st.status(id)?;
    status.report_json.clear();
    let report = match st.jobs.get(&id) {
        Some(j) if j.report_json().is_empty() => {
            let alive = st.workers.values().filter(|w| w.info.alive).count();
            crate::report::of(j, alive, &st.places())
        }
        _ => report_of(st, id)?,
    };
    Some((status, report))
}

/// The job a URL names (`job-1-17`, or the number older links carry),
/// else the answer to a URL that names none.
fn path_job(id: &str) -> Result<JobId, Box<Response>> {
    id.parse().map_err(|e: sluice_proto::ClusterError| {
        let mut refused = not_found(e.to_string());
        *refused.status_mut() = StatusCode::BAD_REQUEST;
        Box::new(refused)
    })
}

async fn job_page(
    AxState(web): AxState<Web>,
    Extension(who): Extension<Caller>,
    Path(id): Path<String>,
) -> Response {
    let id = match path_job(&id) {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    let Some((status, r)) = job_view(&web, &who, id) else {
        return not_found(format!("no {id} (or none with a report kept)"));
    };
    let live = status.state == "running";
    let mut body = String::new();
    let _ = write!(
        body,
        "<p>{} · pool {} · {} → {} · {:.2} s · {}/{} maps, {}/{} reduces</p>",
        state(&status.state),
        esc(&r.pool),
        esc(&r.input),
        esc(&r.output),
        r.phases.total_s,
        status.maps_done,
        status.maps,
        status.reduces_done,
        status.reduces
    );
    if !status.error.is_empty() {
        let _ = write!(body, "<p class=\"err\">{}</p>", esc(&status.error));
    }
    body.push_str(&job_summary(&r));
    let _ = write!(
        body,
        "<h2>Timeline</h2><p class=\"muted\">{} attempts{}: maps blue, reduces green (paler while \
         running), failed red, lost orange, killed grey, speculative backups dashed.</p>{}",
        r.timeline.len(),
        if r.timeline_dropped > 0 {
            format!(" ({} more not drawn)", r.timeline_dropped)
        } else {
            String::new()
        },
        page::timeline(&r.timeline, r.phases.total_s)
    );
    body.push_str(&job_tables(&r));
    Html(layout(&format!("{id} ({})", r.job), &body, live)).into_response()
}

/// Phases, input and output, attempts, locality, the cache and skew.
fn job_summary(r: &ClusterReport) -> String {
    let a = &r.attempts;
    let levels: Vec<String> = r
        .maps_by_level
        .iter()
        .map(|(l, n)| format!("{} {n}", esc(l)))
        .collect();
    let rows: Vec<Vec<String>> = vec![
        vec!["map phase".into(), format!("#{:.2} s", r.phases.map_s)],
        vec![
            "reduce phase".into(),
            format!("#{:.2} s", r.phases.reduce_s),
        ],
        vec![
            "input".into(),
            format!(
                "{} in {} maps ({} blocks)",
                bytes(r.input_bytes),
                r.maps,
                r.input_blocks
            ),
        ],
        vec![
            "output".into(),
            format!("{} records, {}", r.output_records, bytes(r.output_bytes)),
        ],
        vec!["shuffle".into(), bytes(r.shuffle_bytes)],
        vec!["maps by locality".into(), levels.join(", ")],
        vec![
            "cache".into(),
            format!(
                "{} maps from cache, hit ratio {:.1}%",
                r.cache.maps_from_cache,
                r.cache.hit_ratio * 100.0
            ),
        ],
        vec![
            "attempts".into(),
            format!(
                "{} launched, {} failed, {} killed, {} lost, {} speculative, {:.2} s wasted",
                a.launched, a.failed, a.killed, a.lost, a.speculative, a.wasted_s
            ),
        ],
        vec!["receive skew".into(), format!("#{:.2}", r.receive_skew)],
        vec![
            "slots held (mean)".into(),
            format!(
                "{:.2} map, {:.2} reduce",
                r.slots.mean_map_slots, r.slots.mean_reduce_slots
            ),
        ],
    ];
    let mut rows = rows;
    if let Some(m) = &r.model {
        rows.push(vec![
            "model (seed 004)".into(),
            format!(
                "ideal {:.3} s ({:?}; phase 1 {:.3} s by {:?}, phase 2 {:.3} s by {:?}) on {} nodes; \
                 efficiency {:.1}% (ideal / actual), {:.1}x slower than ideal",
                m.ideal_seconds,
                m.variant,
                m.phase1.ideal_s,
                m.phase1.bottleneck,
                m.phase2.ideal_s,
                m.phase2.bottleneck,
                m.nodes,
                m.efficiency * 100.0,
                m.slowdown
            ),
        ]);
        rows.push(vec!["hardware".into(), esc(&m.hardware.source)]);
    }
    table("summary", &["", ""], &rows)
}

/// Per-worker work and shuffle, stragglers, counters.
fn job_tables(r: &ClusterReport) -> String {
    let workers: Vec<Vec<String>> = r
        .per_worker
        .iter()
        .map(|w| {
            vec![
                esc(&w.worker),
                format!("#{}", w.maps),
                format!("#{:.2} s", w.map_s),
                format!("#{}", w.cache_maps),
                format!("#{}", w.reduces),
                format!("#{:.2} s", w.reduce_s),
                format!("#{}", bytes(w.input_bytes)),
                format!("#{}", bytes(w.shuffle_bytes)),
            ]
        })
        .collect();
    let stragglers: Vec<Vec<String>> = r
        .stragglers
        .iter()
        .map(|s| {
            vec![
                esc(&s.task),
                esc(&s.worker),
                format!("#{:.2} s", s.seconds),
                format!("#{:.2} s", s.median_s),
            ]
        })
        .collect();
    let counters: Vec<Vec<String>> = r
        .counters
        .iter()
        .chain(&r.user_counters)
        .map(|(k, v)| vec![esc(k), format!("#{v}")])
        .collect();
    format!(
        "<h2>Workers</h2>{}<h2>Stragglers</h2>{}<h2>Counters</h2>{}",
        table(
            "per-worker",
            &[
                "worker",
                "maps",
                "map time",
                "from cache",
                "reduces",
                "reduce time",
                "input",
                "shuffle received"
            ],
            &workers
        ),
        if stragglers.is_empty() {
            "<p class=\"muted\">none (no winning task over 1.5x its phase's median)</p>".into()
        } else {
            table(
                "stragglers",
                &["task", "worker", "time", "phase median"],
                &stragglers,
            )
        },
        table("counters", &["counter", "value"], &counters)
    )
}

// --------------------------------------------------------------- workers

async fn workers_page(AxState(web): AxState<Web>) -> Html<String> {
    let (workers, caches) = {
        let core = web.state();
        let st = &core.state;
        let workers: Vec<_> = st.workers.values().map(|w| w.info.clone()).collect();
        let caches: BTreeMap<String, _> = st
            .workers
            .values()
            .map(|w| (w.info.uid.clone(), w.cache.clone()))
            .collect();
        (workers, caches)
    };
    let mut body = String::new();
    let rows: Vec<Vec<String>> = workers
        .iter()
        .map(|w| {
            let c = caches.get(&w.uid).cloned().unwrap_or_default();
            vec![
                format!("#{}", w.id),
                esc(&w.uid),
                esc(&w.data_addr),
                esc(&format!("/{}/{}", w.datacenter, w.rack)),
                state(if w.alive { "alive" } else { "lost" }),
                format!("#{}", w.slots),
                format!("#{}", bytes(w.memory)),
                format!("#{} of {}", bytes(c.used), bytes(c.capacity)),
                format!("#{}", c.blocks.len()),
                format!("#{} / {}", c.hits, c.misses),
                if w.http_addr.is_empty() {
                    String::new()
                } else {
                    format!(
                        "<a href=\"{1}://{0}/metrics\">{0}</a>",
                        esc(&w.http_addr),
                        sluice_proto::tls::web::scheme()
                    )
                },
            ]
        })
        .collect();
    body.push_str(&table(
        "workers",
        &[
            "id",
            "uid",
            "data address",
            "place",
            "state",
            "slots",
            "memory",
            "cache",
            "cached blocks",
            "cache hits / misses",
            "metrics",
        ],
        &rows,
    ));
    for w in workers.iter().filter(|w| w.alive) {
        let _ = write!(body, "<h2>{}</h2>", esc(&w.uid));
        body.push_str(&worker_charts(&web, w).await);
    }
    Html(layout("Workers", &body, false))
}

/// A worker's CPU and network over the last minutes, from the samples it
/// keeps (asked over the data plane, off the runtime's threads, with a
/// time limit so a stuck worker does not stall the page).
async fn worker_charts(web: &Web, w: &sluice_proto::proto::WorkerInfo) -> String {
    let since = sluice_proto::now_ms().saturating_sub(CHART_WINDOW_MS);
    let (addr, secret) = (w.data_addr.clone(), web.secret.clone());
    let ask = tokio::task::spawn_blocking(move || sluice_proto::data::stats(&addr, &secret, since));
    let samples: Vec<Sample> = match tokio::time::timeout(Duration::from_secs(3), ask).await {
        Ok(Ok(Ok(s))) => s,
        _ => return "<p class=\"muted\">no samples (the worker did not answer)</p>".into(),
    };
    let r = rates(&samples);
    let Some(last) = r.last().map(|x| x.t_ms) else {
        return "<p class=\"muted\">no samples yet</p>".into();
    };
    let ago = |t: u64| last.saturating_sub(t) as f64 / 1e3;
    let cpu: Vec<(f64, f64)> = r
        .iter()
        .map(|x| (ago(x.t_ms), x.host_cpu * 100.0))
        .collect();
    let proc_: Vec<(f64, f64)> = r
        .iter()
        .map(|x| (ago(x.t_ms), x.proc_cores * 100.0))
        .collect();
    let mb = |v: f64| v / 1e6;
    let rx: Vec<(f64, f64)> = r
        .iter()
        .map(|x| (ago(x.t_ms), mb(x.rx_bps + x.lo_bps)))
        .collect();
    let tx: Vec<(f64, f64)> = r.iter().map(|x| (ago(x.t_ms), mb(x.tx_bps))).collect();
    format!(
        "{}{}",
        page::chart(
            &format!("cpu-{}", url_seg(&w.uid)),
            "CPU % ({})",
            &[
                ("host %", "#4e79a7", cpu),
                ("worker % of a core", "#e15759", proc_)
            ]
        ),
        page::chart(
            &format!("net-{}", url_seg(&w.uid)),
            "network MB/s ({})",
            &[
                ("received (with lo)", "#59a14f", rx),
                ("sent", "#f28e2b", tx)
            ]
        )
    )
}

// -------------------------------------------------------------- data sets

async fn datasets_page(
    AxState(web): AxState<Web>,
    Extension(who): Extension<Caller>,
) -> Html<String> {
    let (rows, total) = {
        let core = web.state();
        let st = &core.state;
        let live = st.live_uids();
        let seen = |d: &&sluice_proto::catalog::DatasetMeta| d.access.may_read(who.name());
        let total = st.catalog.datasets.values().filter(seen).count();
        let rows: Vec<Vec<String>> = (st.catalog.datasets.values())
            .filter(seen)
            .take(DATASETS_LISTED)
            .map(|d| {
                let s = summary(d, &live);
                vec![
                    format!(
                        "<a href=\"/datasets/{}\">{}</a>",
                        url_seg(&s.name),
                        esc(&s.name)
                    ),
                    format!("#{}", bytes(s.bytes)),
                    format!("#{}", s.files),
                    format!("#{}", s.blocks),
                    format!("#{}", s.replication),
                    format!("#{}", s.min_replicas),
                    format!("#{}", s.under_replicated),
                    esc(&s.origin),
                ]
            })
            .collect();
        (rows, total)
    };
    let body = format!(
        "<p>{total} data sets{}</p>{}",
        if total > DATASETS_LISTED {
            format!(", the first {DATASETS_LISTED} shown")
        } else {
            String::new()
        },
        table(
            "datasets",
            &[
                "name",
                "bytes",
                "files",
                "blocks",
                "replication",
                "fewest replicas",
                "under-replicated",
                "origin"
            ],
            &rows
        )
    );
    Html(layout("Data sets", &body, false))
}

async fn dataset_page(
    AxState(web): AxState<Web>,
    Extension(who): Extension<Caller>,
    Path(name): Path<String>,
) -> Response {
    let rows = {
        let core = web.state();
        let st = &core.state;
        let Some(d) = (DatasetName::new(&name).ok())
            .and_then(|n| st.catalog.datasets.get(&n))
            .filter(|d| d.access.may_read(who.name()))
        else {
            return not_found(format!("no data set {name}"));
        };
        let mut rows = Vec::new();
        for f in &d.files {
            for (i, b) in f.blocks.iter().enumerate() {
                let replicas: Vec<String> = b.replicas.iter().map(|r| esc(r)).collect();
                rows.push(vec![
                    esc(&f.name),
                    format!("#{i}"),
                    esc(&b.id),
                    format!("#{}", bytes(b.len)),
                    replicas.join(", "),
                ]);
            }
        }
        rows
    };
    let body = table(
        "blocks",
        &["file", "block", "id", "bytes", "replicas (worker uids)"],
        &rows,
    );
    Html(layout(&format!("Data set {name}"), &body, false)).into_response()
}

// ------------------------------------------------------- cache and pools

async fn cache_page(AxState(web): AxState<Web>) -> Html<String> {
    let list = web.state().state.cache_list();
    let directives: Vec<Vec<String>> = list
        .directives
        .iter()
        .map(|d| {
            vec![
                format!("#{}", d.id),
                esc(&d.dataset),
                if d.has_block {
                    format!("#{}", d.block)
                } else {
                    "every block".into()
                },
                esc(if d.worker.is_empty() {
                    "one holder"
                } else {
                    &d.worker
                }),
                esc(&d.pool),
            ]
        })
        .collect();
    let workers: Vec<Vec<String>> = list
        .workers
        .iter()
        .map(|w| {
            let (i, c) = (
                w.worker.clone().unwrap_or_default(),
                w.cache.clone().unwrap_or_default(),
            );
            let reads = c.hits + c.misses;
            let ratio = if reads > 0 {
                format!("#{:.1}%", c.hits as f64 * 100.0 / reads as f64)
            } else {
                "#-".into()
            };
            vec![
                esc(&i.uid),
                esc(&c.policy),
                format!("#{}", bytes(c.used)),
                format!("#{}", bytes(c.capacity)),
                format!("#{}", c.blocks.len()),
                format!("#{}", c.pinned.len()),
                format!("#{}", c.hits),
                format!("#{}", c.misses),
                ratio,
                format!("#{}", c.evicted),
            ]
        })
        .collect();
    let body = format!(
        "<h2>Directives</h2>{}<h2>Workers' caches</h2>{}",
        table(
            "directives",
            &["id", "data set", "block", "worker", "pool"],
            &directives
        ),
        table(
            "caches",
            &[
                "worker",
                "policy",
                "used",
                "capacity",
                "blocks",
                "pinned",
                "hits",
                "misses",
                "hit ratio",
                "evicted"
            ],
            &workers
        )
    );
    Html(layout("Block cache", &body, false))
}

async fn pools_page(AxState(web): AxState<Web>) -> Html<String> {
    let p = web.state().state.pool_list();
    let rows: Vec<Vec<String>> = p
        .pools
        .iter()
        .map(|q| {
            vec![
                esc(&q.name),
                format!("#{}", q.weight),
                format!("#{}", q.min_share),
                format!("#{}", q.max_share),
                esc(&q.mode),
                format!("#{}", q.jobs),
                format!("#{} of {}", q.running_maps, p.map_slots),
                format!("#{} of {}", q.running_reduces, p.reduce_slots),
            ]
        })
        .collect();
    let body = format!(
        "<p>Scheduler: {}</p>{}",
        esc(&p.scheduler),
        table(
            "pools",
            &[
                "pool",
                "weight",
                "min share",
                "max share",
                "mode",
                "jobs",
                "map slots held",
                "reduce slots held"
            ],
            &rows
        )
    );
    Html(layout("Pools", &body, false))
}

async fn metrics_text(AxState(web): AxState<Web>) -> Response {
    let snapshot = Snapshot::of(&web.state().state);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        web.metrics.render(&snapshot),
    )
        .into_response()
}
