//! The worker's side of the control plane: registration, the heartbeat
//! loop, and what a heartbeat's reply asks for (kills, block deletions,
//! cache pins, copies, ended jobs, new tasks).
//!
//! One heartbeat is kept outstanding (the coordinator holds it until there
//! is work); a task that finishes is reported at once on a heartbeat of
//! its own.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_proto::ids::TaskKind;
use sluice_proto::proto::{self, TaskAssignment, TaskReport};
use sluice_proto::{ClusterError, PROTOCOL_VERSION};

use crate::blocks;
use crate::files;
use crate::outbox::Letter;
use crate::shared::Shared;
use crate::task;
use crate::tasks::AttemptKey;

type Result<T> = std::result::Result<T, ClusterError>;

/// How long a worker's first registration waits for a coordinator that
/// does not answer.
const FIRST_REGISTRATION: Duration = Duration::from_secs(60);

/// How long a registered worker waits for a coordinator that stopped
/// answering (a restart takes seconds) before it ends: as YARN's
/// NodeManager gives up on its ResourceManager after 15 minutes, so a
/// worker whose cluster is gone does not run on for ever.
pub(crate) const COORDINATOR_PATIENCE: Duration = Duration::from_secs(15 * 60);

/// How long past the coordinator's hold a heartbeat to one of several
/// coordinators may go unanswered before the next one is tried.
const BEAT_MARGIN: Duration = Duration::from_secs(5);

/// How long a registration to one of several coordinators may go
/// unanswered before the next one is tried.
const REGISTER_DEADLINE: Duration = Duration::from_secs(10);

/// `call`'s answer, or, past `deadline` (when following one of several
/// coordinators), an `UNAVAILABLE` status saying there was none.
async fn within<T>(
    shared: &Shared,
    deadline: Duration,
    call: impl std::future::Future<Output = std::result::Result<T, tonic::Status>>,
) -> std::result::Result<T, tonic::Status> {
    if !shared.coordinator.list().several() {
        return call.await;
    }
    tokio::time::timeout(deadline, call)
        .await
        .unwrap_or_else(|_| {
            Err(tonic::Status::unavailable(format!(
                "no answer within {} ms",
                deadline.as_millis()
            )))
        })
}

/// Registers with the coordinator, trying again after a capped
/// exponential backoff while it does not answer (for a minute the first
/// time, then for [`COORDINATOR_PATIENCE`]: a restarting coordinator
/// comes back); a refusal is final. Given several coordinators, a try
/// that fails goes to the next at once, and the backoff is taken once
/// every one has failed. Each try reports the attempts running here
/// and those whose reports wait: they go on under the coordinator.
pub(crate) async fn register(shared: &Shared, first: bool) -> Result<()> {
    let req = register_request(shared);
    let since = Instant::now();
    let mut failures = 0;
    loop {
        // A fresh listing each try: blocks may arrive meanwhile.
        let mut req = req.clone();
        req.blocks = shared
            .layout
            .block_ids()
            .map_err(|e| ClusterError::io("listing", &shared.layout.root.join("blocks"), e))?;
        req.running = shared.tasks().running_ids();
        req.running.extend(shared.outbox().unreported());
        shared.outbox().block_report_sent();
        let (at, mut rpc) = shared.coordinator.current();
        match within(shared, REGISTER_DEADLINE, rpc.register(req)).await {
            Ok(r) => {
                shared.coordinator.answered(at);
                registered(shared, r.into_inner());
                return Ok(());
            }
            Err(s)
                if s.code() == tonic::Code::Unauthenticated
                    || s.code() == tonic::Code::FailedPrecondition =>
            {
                return Err(ClusterError::Auth(format!(
                    "the coordinator refused this worker: {}",
                    s.message()
                )))
            }
            Err(s) if first && since.elapsed() > FIRST_REGISTRATION => return Err(s.into()),
            Err(s) if since.elapsed() > COORDINATOR_PATIENCE => return Err(gone(s.message())),
            Err(s) => {
                let addr = shared.coordinator.list().addr(at).to_owned();
                if !shared.coordinator.missed(at) {
                    tracing::warn!(
                        "coordinator {addr} does not answer ({}); trying the next",
                        s.message()
                    );
                    continue;
                }
                failures += 1;
                if failures == 1 {
                    tracing::warn!(
                        "the coordinator does not answer ({}); trying again",
                        s.message()
                    );
                }
                tokio::time::sleep(crate::outbox::backoff(failures)).await;
            }
        }
    }
}

/// What a registration says of this worker (its blocks apart).
fn register_request(shared: &Shared) -> proto::RegisterRequest {
    proto::RegisterRequest {
        protocol_version: PROTOCOL_VERSION,
        data_addr: shared.data_addr.clone(),
        datacenter: shared.cfg.datacenter.clone(),
        rack: shared.cfg.rack.clone(),
        slots: shared.cfg.slots,
        uid: shared.uid.clone(),
        pid: std::process::id(),
        blocks: Vec::new(),
        memory: shared.cfg.memory,
        http_addr: shared.http_addr.clone(),
        host: shared.cfg.host.clone(),
        free_bytes: files::free_bytes(&shared.cfg.data_dir),
        running: Vec::new(),
    }
}

/// A new session: the cache is reported afresh and the files of jobs not
/// running any more are removed (a restarted coordinator names the jobs
/// it took back, whose map outputs stay).
fn registered(shared: &Shared, r: proto::RegisterReply) {
    shared.outbox().registered(r.worker_id, r.epoch);
    let hold = &shared.heartbeat_ms;
    hold.store(r.heartbeat_ms, std::sync::atomic::Ordering::Relaxed);
    // A new registration knows nothing of this cache yet.
    shared.cache.unreported();
    files::remove_other_jobs_files(&shared.layout, &r.running_jobs);
}

/// Heartbeats until the coordinator asks for a re-registration. A beat
/// is never dropped half way (its answer may hand out tasks): a request
/// to register again, seen by any beat, is acted on when the one in
/// flight has its answer (the coordinator holds it at most one heartbeat
/// interval). Fails when no heartbeat was answered for
/// [`COORDINATOR_PATIENCE`].
pub(crate) async fn heartbeats(shared: &Arc<Shared>) -> Result<()> {
    loop {
        if shared.outbox().must_register() {
            return Ok(());
        }
        if shared.outbox().silent_for(Instant::now()) > COORDINATOR_PATIENCE {
            return Err(gone("no heartbeat answered"));
        }
        let reports = shared.outbox().take_reports();
        beat(shared, reports).await;
    }
}

/// The error a worker ends with when its coordinator stayed away.
fn gone(why: &str) -> ClusterError {
    ClusterError::Rpc(format!(
        "no coordinator for {} minutes ({why}); this worker stops",
        COORDINATOR_PATIENCE.as_secs() / 60
    ))
}

/// A letter on its way: put back in the outbox if its heartbeat is
/// dropped before it is answered (nothing it carries is lost).
struct Sending<'a> {
    shared: &'a Shared,
    letter: Option<Letter>,
}

impl Sending<'_> {
    fn take(&mut self) -> Letter {
        self.letter.take().expect("taken once")
    }
}

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        if let Some(l) = self.letter.take() {
            self.shared.outbox().returned(l);
        }
    }
}

/// One heartbeat carrying `reports`. An answer asking this session to
/// register again is noted for [`heartbeats`].
async fn beat(shared: &Arc<Shared>, reports: Vec<TaskReport>) {
    let (letter, session, due) = {
        let mut o = shared.outbox();
        let due = o.block_report_due(shared.cfg.block_report);
        (o.letter(reports), o.session(), due)
    };
    let mut sending = Sending {
        shared,
        letter: Some(letter),
    };
    let letter = sending.letter.as_ref().expect("just put");
    // No report from a listing that failed (it would make blocks look
    // missing); the next heartbeat tries again.
    let listed = due.then(|| shared.layout.block_ids().ok()).flatten();
    let block_report = listed.is_some();
    let cache = shared.cache.report(block_report);
    let cache_sent = cache.is_some();
    let req = heartbeat_request(shared, session, letter, listed, cache);
    let t0 = Instant::now();
    let (at, mut rpc) = shared.coordinator.current();
    let hold = shared
        .heartbeat_ms
        .load(std::sync::atomic::Ordering::Relaxed);
    let deadline = Duration::from_millis(hold) + BEAT_MARGIN;
    let answer = within(shared, deadline, rpc.heartbeat(req)).await;
    let seconds = t0.elapsed().as_secs_f64();
    shared.metrics.heartbeat(seconds, answer.is_ok());
    let letter = sending.take();
    match answer {
        Ok(r) => {
            shared.coordinator.answered(at);
            let r = r.into_inner();
            let mut o = shared.outbox();
            o.answered();
            if r.reregister {
                // Sent again in the next session. A late answer to a beat
                // of a session already replaced asks nothing.
                o.returned(letter);
                o.asked_again(session);
                return;
            }
            o.delivered(&letter);
            if block_report {
                o.block_report_sent();
            }
            drop(o);
            handle_reply(shared, r);
        }
        Err(e) => {
            tracing::warn!("heartbeat failed: {}", e.message());
            // Another coordinator is tried at once; the backoff comes
            // once every one has failed.
            let round = shared.coordinator.missed(at);
            undelivered(shared, letter, cache_sent, round).await;
        }
    }
}

/// A heartbeat's request: `letter`, this worker's blocks when `listed`,
/// its cache, and the fetches of its running attempts.
fn heartbeat_request(
    shared: &Shared,
    (worker_id, epoch): (u64, u64),
    letter: &Letter,
    listed: Option<Vec<String>>,
    cache: Option<proto::CacheReport>,
) -> proto::HeartbeatRequest {
    proto::HeartbeatRequest {
        worker_id,
        epoch,
        reports: letter.reports.clone(),
        corrupt: letter.corrupt.clone(),
        block_report: listed.is_some(),
        blocks: listed.unwrap_or_default(),
        cache,
        replicated: letter.replicated.clone(),
        free_bytes: files::free_bytes(&shared.cfg.data_dir),
        progress: shared.tasks().progress(),
    }
}

/// A heartbeat failed: what it carried goes with the next one, after a
/// pause that doubles with each failure in a row, up to a cap, when
/// `round` (every coordinator failed in a row), else at once.
async fn undelivered(shared: &Shared, letter: Letter, cache_sent: bool, round: bool) {
    let pause = {
        let mut o = shared.outbox();
        o.returned(letter);
        round.then(|| o.failed())
    };
    if cache_sent {
        shared.cache.unreported();
    }
    if let Some(p) = pause {
        tokio::time::sleep(p).await;
    }
}

/// Does what a heartbeat's reply asks (a request to register again apart).
fn handle_reply(shared: &Arc<Shared>, r: proto::HeartbeatReply) {
    for k in &r.kills {
        shared.tasks().kill(AttemptKey::from(k));
    }
    for b in &r.delete_blocks {
        shared.cache.evict(b);
        shared.layout.remove_block(b);
    }
    if let Some(pins) = r.pins {
        blocks::pin_blocks(shared, pins.blocks);
    }
    for c in r.replicate {
        blocks::spawn_copy(shared, c);
    }
    for j in &r.finished_jobs {
        shared.tasks().job_ended(*j);
        files::sweep_outputs(&shared.layout, *j, &r.kept_blocks);
        files::remove_job_files(&shared.layout, *j);
    }
    for t in r.tasks {
        spawn_task(shared, t);
    }
}

/// Runs task `t` on a thread of its own, which reports it on a heartbeat
/// of its own when it ends (unless its result is discarded).
fn spawn_task(shared: &Arc<Shared>, t: TaskAssignment) {
    let Some(id) = t.task else { return };
    let k = AttemptKey::from(&id);
    shared.tasks().start(k);
    // Named for debuggers and `ps -T`: `task-` and the task's name
    // (the kernel keeps 15 bytes).
    let kind = TaskKind::from_wire(id.kind).map_or('?', TaskKind::letter);
    let name = format!("task-{kind}{}-{}", id.index, id.job);
    let s = shared.clone();
    let spawned = std::thread::Builder::new().name(name).spawn(move || {
        let Some(report) = task::run(&s, &t) else {
            return;
        };
        let s2 = s.clone();
        s.rt.spawn(async move {
            beat(&s2, vec![report]).await;
        });
    });
    if let Err(e) = spawned {
        tracing::error!("cannot start a task thread: {e}");
        shared.tasks().finish(k);
    }
}
