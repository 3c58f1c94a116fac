//! The coordinator's service: worker registry, data set catalog, job
//! scheduling, over gRPC.
//!
//! The state ([`crate::state`]) sits behind one mutex, held for short,
//! non-async sections: each call becomes an [`Event`] handled there (or a
//! query that only reads), and the writes its step asks for happen under
//! the same lock. A clock task sends [`Event::Tick`] every heartbeat
//! interval. Workers pull work with heartbeats; a heartbeat with nothing to
//! hand out is held until something changes or the heartbeat interval
//! ends, and then offers the worker's slots again, so a submitted job
//! starts without waiting for the next beat. A worker silent for
//! [`CoordinatorConfig::worker_timeout`] is lost. Each coordinator start
//! has a new epoch: workers of an older epoch are told to register again,
//! and report the attempts they still run; jobs that were running when
//! the previous coordinator died are taken back from the job log
//! ([`crate::joblog`], [`State::with_recovered`]) with their finished
//! tasks, and the reported attempts of their unfinished tasks go on.

use crate::durable::{Durable, Files, Loaded};
use crate::joblog::Recovered;
use crate::term::Term;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tonic::service::interceptor::InterceptedService;

use tokio::sync::Notify;
use tonic::{Request, Response, Status};

use crate::access::{admin_only, caller};
use crate::config::CoordinatorConfig;
use crate::core::{summary, Core, Wake};
use crate::input::ExternalInput;
use crate::metrics::Metrics;
use crate::state::{Answer, At, Event, Refusal, State, Submission};
use crate::store::RecordState;
use sluice_proto::catalog::{check_name, Access, DatasetMeta};
use sluice_proto::ids::{JobId, WorkerId};
use sluice_proto::proto::coordinator_server::{Coordinator, CoordinatorServer};
use sluice_proto::proto::{self, Empty};
use sluice_proto::ClusterError;
use sluice_request::{BuildContext, JobRequest};

/// The gRPC service: each call becomes an [`Event`] for the state, or a
/// query of it.
pub struct Service {
    core: Arc<Mutex<Core>>,
    wakers: Arc<Wakers>,
    cfg: Arc<CoordinatorConfig>,
    metrics: Arc<Metrics>,
    /// While it holds, this coordinator is the active one.
    term: Term,
}

type Reply<T> = Result<Response<T>, Status>;

/// A request the coordinator refuses, with why.
fn invalid(e: impl std::fmt::Display) -> Status {
    Status::invalid_argument(e.to_string())
}

/// A started coordinator.
#[derive(Debug)]
pub struct Started {
    /// Where its gRPC service listens.
    pub addr: SocketAddr,
    /// Where its web pages and `/metrics` are served, if they are.
    pub http: Option<SocketAddr>,
    /// The server task.
    pub server: tokio::task::JoinHandle<()>,
}

/// Starts the coordinator (and its web pages when configured) on its
/// state directory.
pub async fn start(cfg: CoordinatorConfig) -> Result<Started, ClusterError> {
    let (files, loaded) = Files::open(&cfg.state_dir, cfg.history)?;
    start_with(cfg, loaded, Box::new(files), Term::forever()).await
}

/// Starts the coordinator from `loaded`, writing through `durable`, for
/// its `term`: once the term ends it answers no call (`Unavailable`: "no
/// longer active"), and its server, web pages and ticks stop.
pub async fn start_with(
    cfg: CoordinatorConfig,
    loaded: Loaded,
    mut durable: Box<dyn Durable>,
    term: Term,
) -> Result<Started, ClusterError> {
    let Loaded {
        epoch,
        catalog,
        mut records,
        recovered,
        history,
    } = loaded;
    fail_unlogged(&mut records, &recovered, epoch);
    let policy = cfg.scheduler.policy()?;
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(|e| ClusterError::net("listening on", &cfg.listen.to_string(), e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| ClusterError::net("listening on", &cfg.listen.to_string(), e))?;
    let cfg = Arc::new(cfg);
    let state = State::new(cfg.clone(), epoch, catalog, records, policy, At::now())
        .with_history(history)
        .with_recovered(recovered);
    durable.save_records(&state.records)?;
    let svc = Service {
        core: Arc::new(Mutex::new(Core {
            state,
            durable,
            history: cfg.history,
        })),
        wakers: Arc::new(Wakers::default()),
        cfg,
        metrics: Arc::new(Metrics::new()),
        term: term.clone(),
    };
    svc.spawn_ticks(term.clone());
    let http = match svc.cfg.http {
        Some(at) => Some(
            crate::web::serve(
                at,
                svc.core.clone(),
                svc.cfg.secret.clone(),
                svc.metrics.clone(),
                term.clone(),
            )
            .await
            .map_err(|e| ClusterError::net("serving web pages on", &at.to_string(), e))?,
        ),
        None => None,
    };
    let users = crate::access::user_keys(svc.core.clone(), svc.cfg.secret.clone());
    let verify = sluice_proto::signed::VerifyLayer::new(svc.cfg.secret.clone()).with_users(users);
    let server = CoordinatorServer::new(svc)
        .max_decoding_message_size(sluice_proto::signed::MAX_CONTROL_BODY)
        .max_encoding_message_size(sluice_proto::signed::MAX_CONTROL_BODY);
    let server = InterceptedService::new(server, only_while(term.clone()));
    let router = tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .layer(sluice_proto::tls::grpc::RoleLayer::when(
            sluice_proto::tls::current().is_some(),
        ))
        .layer(verify)
        .add_service(server);
    let stopped = |r: Result<(), tonic::transport::Error>| {
        if let Err(e) = r {
            tracing::error!("coordinator server stopped: {e}");
        }
    };
    let handle = match sluice_proto::tls::current() {
        // Each peer's handshake on its own task; only a worker's
        // certificate makes the worker calls (RoleLayer).
        Some(tls) => {
            let incoming = sluice_proto::tls::grpc::incoming(listener, tls.server());
            let term = term.clone();
            tokio::spawn(async move {
                let ended = term.ended();
                stopped(router.serve_with_incoming_shutdown(incoming, ended).await);
            })
        }
        None => {
            // The builder's tcp_nodelay covers only sockets it accepts
            // itself; set it on ours, or small replies wait out the
            // peer's delayed ACK (40 ms).
            let incoming = tokio_stream::StreamExt::map(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                |s| s.and_then(|s| s.set_nodelay(true).map(|()| s)),
            );
            let term = term.clone();
            tokio::spawn(async move {
                let ended = term.ended();
                stopped(router.serve_with_incoming_shutdown(incoming, ended).await);
            })
        }
    };
    tracing::info!("coordinator epoch {epoch} listening on {addr}");
    if let Some(h) = http {
        tracing::info!(
            "web pages and /metrics on {}://{h}/",
            sluice_proto::tls::web::scheme()
        );
    }
    Ok(Started {
        addr,
        http,
        server: handle,
    })
}

/// Lets calls through only while `term` holds.
fn only_while(
    term: Term,
) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone + Send + 'static {
    move |req| {
        if term.holds() {
            Ok(req)
        } else {
            Err(Status::unavailable(NOT_ACTIVE))
        }
    }
}

/// What a coordinator whose term ended answers.
pub const NOT_ACTIVE: &str = "this coordinator is no longer active";

/// Jobs recorded running that the job log cannot take back (it lost
/// their acceptance) fail, saying so.
fn fail_unlogged(
    records: &mut std::collections::BTreeMap<JobId, crate::store::JobRecord>,
    recovered: &[Recovered],
    epoch: u64,
) {
    let logged = |id: &JobId| recovered.iter().any(|r| r.accepted.id == *id);
    for r in records
        .values_mut()
        .filter(|r| r.state == RecordState::Running && !logged(&r.id))
    {
        r.state = RecordState::Failed;
        r.error = format!(
            "the coordinator restarted (now epoch {epoch}) and its job log does not hold \
             the job; its output was not committed; resubmit it"
        );
    }
}

impl Service {
    fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Handles one event and wakes waiters if it changed something they
    /// wait for.
    fn dispatch(&self, ev: Event) -> Result<Answer, Status> {
        if !self.term.holds() {
            return Err(Status::unavailable(NOT_ACTIVE));
        }
        let (answer, wake) = self.lock().run(ev);
        let answer = answer.map_err(refused);
        self.wakers.wake(wake);
        answer
    }

    /// Handles an event whose answer is only success or an error.
    fn done(&self, ev: Event) -> Reply<Empty> {
        self.dispatch(ev).map(|_| Response::new(Empty {}))
    }

    /// Handles the event `make` makes of the state, under the same lock:
    /// what it checks (who may do it) cannot change in between.
    fn dispatch_with(
        &self,
        make: impl FnOnce(&State) -> Result<Event, Refusal>,
    ) -> Result<Answer, Status> {
        if !self.term.holds() {
            return Err(Status::unavailable(NOT_ACTIVE));
        }
        let (answer, wake) = {
            let mut core = self.lock();
            let ev = make(&core.state).map_err(refused)?;
            core.run(ev)
        };
        let answer = answer.map_err(refused);
        self.wakers.wake(wake);
        answer
    }

    /// Builds the job as a worker will (without its side inputs' data), so
    /// that a request no worker could run is refused at submit; returns
    /// its reducers (0 for a map-only job) and the data sets its tasks
    /// read whole.
    fn validate(&self, r: &JobRequest) -> Result<(u32, Vec<String>), Status> {
        let ctx = BuildContext {
            cluster: true,
            ..BuildContext::default()
        };
        let (built, cfg) = self.cfg.jobs.build(r, &ctx).map_err(invalid)?;
        let kind = self.cfg.jobs.get(&r.job).map_err(invalid)?;
        let side = kind.side_inputs(r).map_err(invalid)?;
        let reducers = if built.spec.is_map_only() {
            0
        } else {
            cfg.reducers
        };
        Ok((reducers, side))
    }

    /// The splits of a job whose input is in an external store (`hdfs://`,
    /// `s3://`), planned as the local engine plans them (HDFS: never
    /// across a block), each with the hosts holding it (HDFS block
    /// locations from WebHDFS); `None` for data sets. The store is asked
    /// on a blocking thread, outside the state's lock.
    async fn external_splits(&self, r: &JobRequest) -> Result<Option<Vec<ExternalInput>>, Status> {
        if !sluice_storage::is_remote(&r.input) {
            return Ok(None);
        }
        let ctx = BuildContext {
            cluster: true,
            ..BuildContext::default()
        };
        let (_, cfg) = self.cfg.jobs.build(r, &ctx).map_err(invalid)?;
        let input = r.input.clone();
        let planned = tokio::task::spawn_blocking(move || {
            let files = sluice_storage::resolve(&input)?;
            let total = sluice_formats::input::total_len(&files);
            let splits =
                sluice_formats::input::plan_splits(&files, cfg.split_size_for(total), cfg.format);
            Ok::<_, sluice_storage::StorageError>(
                splits
                    .iter()
                    .map(|s| ExternalInput {
                        url: s.file.path.to_string_lossy().into_owned(),
                        start: s.start,
                        end: s.end,
                        hosts: s
                            .file
                            .remote
                            .as_ref()
                            .map(|r| r.0.hosts(s.start, s.end))
                            .unwrap_or_default(),
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .await
        .map_err(|e| Status::internal(format!("planning the input's splits: {e}")))?;
        let splits = planned.map_err(|e| match e {
            sluice_storage::StorageError::NotFound(_) => Status::not_found(e.to_string()),
            e => Status::failed_precondition(e.to_string()),
        })?;
        if splits.is_empty() {
            return Err(Status::invalid_argument(format!(
                "input {} is empty",
                r.input
            )));
        }
        Ok(Some(splits))
    }

    /// The clock's events: a tick every heartbeat interval.
    fn spawn_ticks(&self, term: Term) {
        let (core, every) = (self.core.clone(), self.cfg.heartbeat);
        let wakers = self.wakers.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            let ended = term.ended();
            tokio::pin!(ended);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    () = &mut ended => return,
                }
                let (_, wake) = core
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .run(Event::Tick);
                wakers.wake(wake);
            }
        });
    }
}

/// A refusal as the gRPC status its caller reads: the code says what
/// kind of refusal it is, the message why.
fn refused(r: Refusal) -> Status {
    let msg = r.to_string();
    match r {
        Refusal::Invalid(_) | Refusal::Memory(_) | Refusal::NoBlock { .. } => {
            Status::invalid_argument(msg)
        }
        Refusal::NoDataset(_)
        | Refusal::NoJob { .. }
        | Refusal::NoLiveWorker(_)
        | Refusal::NoDirective(_)
        | Refusal::NoDirectiveFor(_) => Status::not_found(msg),
        Refusal::DatasetExists(_) | Refusal::OutputExists(_) => Status::already_exists(msg),
        Refusal::Protocol { .. }
        | Refusal::NotPlanned(_)
        | Refusal::NotRunning { .. }
        | Refusal::NoReplica { .. } => Status::failed_precondition(msg),
        Refusal::NoLiveWorkers => Status::unavailable(msg),
        Refusal::CatalogUnwritten(_) | Refusal::Unrecorded(_) => Status::internal(msg),
        Refusal::Denied(_) => Status::permission_denied(msg),
        Refusal::UserExists(_) => Status::already_exists(msg),
        Refusal::NoUser(_) => Status::not_found(msg),
    }
}

/// A heartbeat's reply, after the `shuffle` crash point: the process
/// aborts once the reply handing out a reduce is sent.
fn shuffle_point(reply: proto::HeartbeatReply) -> proto::HeartbeatReply {
    let reduce = sluice_proto::ids::TaskKind::Reduce.wire();
    if reply
        .tasks
        .iter()
        .any(|t| t.task.is_some_and(|t| t.kind == reduce))
    {
        std::thread::spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            crate::crash::at("shuffle");
        });
    }
    reply
}

/// How long a reduce's call for map outputs lets new ones gather.
const OUTPUTS_SETTLE: Duration = Duration::from_millis(250);

/// The answer to a call for `job`'s map outputs now, or when to look
/// again (see [`Service::map_outputs`]).
fn outputs_reply(
    job: &crate::sched::Job,
    r: &proto::MapOutputsRequest,
    settle: Instant,
    deadline: Instant,
) -> Result<proto::MapOutputsReply, Instant> {
    let now = Instant::now();
    let aborted = !job.is_running();
    let first = r.log != job.outputs_log();
    let backlog = job.outputs_after(r.since) >= crate::sched::OUTPUTS_PER_REPLY;
    let due = aborted || first || backlog || now >= settle || job.maps_complete();
    if !due {
        // Nothing is sent before the settle time but the first list, a
        // full reply, the last map's output and an abort.
        return Err(settle);
    }
    let (outputs, log, next) = job.outputs_since(r.log, r.since, r.addr_table);
    let more = if first {
        outputs.len() == crate::sched::OUTPUTS_PER_REPLY || outputs.len() as u32 > r.known
    } else {
        !outputs.is_empty()
    };
    if aborted || more || now >= deadline {
        let (addrs_from, addrs) = match r.addr_table {
            true => job.addrs_from(r.log, r.addrs_known),
            false => (0, Vec::new()),
        };
        let mut reply = proto::MapOutputsReply {
            maps: job.maps().len() as u32,
            aborted,
            log,
            next,
            addrs_from,
            addrs,
            ..Default::default()
        };
        put_outputs(&mut reply, outputs, r.columns && r.addr_table);
        return Ok(reply);
    }
    // Nothing new: look again a settle time from now (or when the last
    // map is done, or the job ends).
    Err((now + OUTPUTS_SETTLE).min(deadline))
}

/// Puts `outputs` in `reply`: as three columns of numbers when the caller
/// asked for them (`MapOutputsRequest.columns`, with the address table),
/// else as messages.
fn put_outputs(reply: &mut proto::MapOutputsReply, outputs: Vec<proto::MapOutput>, columns: bool) {
    if !columns {
        reply.outputs = outputs;
        return;
    }
    reply.output_maps = outputs.iter().map(|o| o.map).collect();
    reply.output_attempts = outputs.iter().map(|o| o.attempt).collect();
    reply.output_workers = outputs.iter().map(|o| o.worker).collect();
}

/// What callers waiting on the state wait on.
#[derive(Debug, Default)]
struct Wakers {
    /// Callers waiting for any change (a job's end, a data set).
    waiters: Notify,
    /// Held heartbeats ([`crate::state::Step::offer`]).
    offers: Notify,
    /// Reduces waiting for map outputs ([`crate::state::Step::outputs`]).
    outputs: Notify,
}

impl Wakers {
    fn wake(&self, wake: Wake) {
        if wake.waiters {
            self.waiters.notify_waiters();
        }
        if wake.offers {
            self.offers.notify_waiters();
        }
        if wake.outputs {
            self.outputs.notify_waiters();
        }
    }
}

/// An answer of an unexpected kind (a bug in the state machine).
fn unexpected(a: Answer) -> Status {
    Status::internal(format!("unexpected answer {a:?}"))
}

#[tonic::async_trait]
impl Coordinator for Service {
    async fn register(&self, req: Request<proto::RegisterRequest>) -> Reply<proto::RegisterReply> {
        admin_only(&req, "join as a worker")?;
        match self.dispatch(Event::Register(req.into_inner()))? {
            Answer::Registered(r) => Ok(Response::new(r)),
            a => Err(unexpected(a)),
        }
    }

    /// A heartbeat with nothing to hand out is held until something
    /// changes or the heartbeat interval ends, so a submitted job starts
    /// without waiting for the next beat.
    async fn heartbeat(
        &self,
        req: Request<proto::HeartbeatRequest>,
    ) -> Reply<proto::HeartbeatReply> {
        admin_only(&req, "send a worker's heartbeat")?;
        let r = req.into_inner();
        let worker = WorkerId(r.worker_id);
        let notified = self.wakers.offers.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let t0 = Instant::now();
        let answer = self.dispatch(Event::Heartbeat(r));
        self.metrics.heartbeat(t0.elapsed().as_secs_f64());
        match answer? {
            Answer::Heartbeat(Some(reply)) => return Ok(Response::new(shuffle_point(reply))),
            Answer::Heartbeat(None) => {}
            a => return Err(unexpected(a)),
        }
        let hold = self.lock().state.hold_for(worker, sluice_proto::now_ms());
        let _ = tokio::time::timeout(hold, notified).await;
        match self.dispatch(Event::Offer(worker))? {
            Answer::Heartbeat(Some(reply)) => Ok(Response::new(shuffle_point(reply))),
            a => Err(unexpected(a)),
        }
    }

    /// A reduce's long poll for map outputs. New outputs are sent once
    /// the call has waited 250 ms (so that a thousand maps
    /// ending a second make a few replies, not a reply each); at once on
    /// a first call, when a full reply waits and when the job's last map
    /// is done; and whatever there is at the call's deadline.
    async fn map_outputs(
        &self,
        req: Request<proto::MapOutputsRequest>,
    ) -> Reply<proto::MapOutputsReply> {
        admin_only(&req, "ask where map outputs are")?;
        let r = req.into_inner();
        let now = Instant::now();
        let deadline = now + Duration::from_millis(r.wait_ms.min(10_000));
        let settle = (now + OUTPUTS_SETTLE).min(deadline);
        loop {
            let notified = self.wakers.outputs.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let wait_until = {
                let core = self.lock();
                let job = core
                    .state
                    .jobs
                    .get(&JobId(r.job))
                    .ok_or_else(|| Status::not_found(format!("no job {}", JobId(r.job))))?;
                match outputs_reply(job, &r, settle, deadline) {
                    Ok(reply) => return Ok(Response::new(reply)),
                    Err(until) => until,
                }
            };
            let _ = tokio::time::timeout_at(wait_until.into(), notified).await;
        }
    }

    async fn fetch_failed(&self, req: Request<proto::FetchFailedRequest>) -> Reply<Empty> {
        admin_only(&req, "report a failed fetch")?;
        self.done(Event::FetchFailed(req.into_inner()))
    }

    async fn plan_blocks(
        &self,
        req: Request<proto::PlanBlocksRequest>,
    ) -> Reply<proto::PlanBlocksReply> {
        let who = caller(&req)?;
        let user = who.name().map(str::to_owned);
        match self.dispatch(Event::PlanBlocks(req.into_inner(), user))? {
            Answer::Planned(mut p) => {
                crate::crash::at("put");
                if let Some(u) = who.name() {
                    crate::access::grant_writes(&self.cfg.secret, u, &mut p);
                }
                Ok(Response::new(p))
            }
            a => Err(unexpected(a)),
        }
    }

    async fn commit_dataset(&self, req: Request<proto::CommitDatasetRequest>) -> Reply<Empty> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let mut dataset = DatasetMeta::try_from(r.dataset.unwrap_or_default())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let name = dataset.name.to_string();
        let make = |st: &State| {
            st.check_write(who.name(), &name)?;
            // A data set replaced keeps its owner and readers.
            dataset.access =
                (st.access(&name).cloned()).unwrap_or_else(|| Access::owned_by(&who.owner()));
            Ok(Event::CommitDataset {
                dataset,
                overwrite: r.overwrite,
            })
        };
        self.dispatch_with(make).map(|_| Response::new(Empty {}))
    }

    async fn abandon_blocks(&self, req: Request<proto::BlockIds>) -> Reply<Empty> {
        let who = caller(&req)?;
        let ids = req.into_inner().ids;
        let make = |st: &State| {
            st.check_abandon(who.name(), &ids)?;
            Ok(Event::AbandonBlocks(ids))
        };
        self.dispatch_with(make).map(|_| Response::new(Empty {}))
    }

    async fn report_corrupt(&self, req: Request<proto::CorruptReport>) -> Reply<Empty> {
        admin_only(&req, "report damaged replicas")?;
        self.done(Event::Corrupt(req.into_inner().replicas))
    }

    async fn list_datasets(
        &self,
        req: Request<proto::ListDatasetsRequest>,
    ) -> Reply<proto::DatasetList> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let limit = match r.limit {
            0 => LIST_PAGE,
            n => (n as usize).min(LIST_PAGE),
        };
        let core = self.lock();
        let live = core.state.live_uids();
        let from = (
            std::ops::Bound::Excluded(r.after.as_str()),
            std::ops::Bound::Unbounded,
        );
        let mut page = (core.state.catalog.datasets.range::<str, _>(from))
            .filter(|(_, d)| d.access.may_read(who.name()));
        let datasets = page
            .by_ref()
            .take(limit)
            .map(|(_, d)| summary(d, &live))
            .collect();
        Ok(Response::new(proto::DatasetList {
            datasets,
            more: page.next().is_some(),
        }))
    }

    async fn get_dataset(&self, req: Request<proto::Name>) -> Reply<proto::Dataset> {
        let who = caller(&req)?;
        let name = req.into_inner().name;
        let core = self.lock();
        core.state.check_read(who.name(), &name).map_err(refused)?;
        let d = core
            .state
            .catalog
            .datasets
            .get(&name)
            .ok_or_else(|| Status::not_found(format!("no data set {name}")))?;
        let mut d: proto::Dataset = d.into();
        if let Some(u) = who.name() {
            crate::access::grant_reads(&self.cfg.secret, u, &mut d);
        }
        Ok(Response::new(d))
    }

    async fn remove_dataset(&self, req: Request<proto::Name>) -> Reply<Empty> {
        let who = caller(&req)?;
        let name = req.into_inner().name;
        let make = |st: &State| {
            st.check_write(who.name(), &name)?;
            Ok(Event::RemoveDataset(name))
        };
        self.dispatch_with(make).map(|_| Response::new(Empty {}))
    }

    async fn submit(&self, req: Request<proto::SubmitRequest>) -> Reply<proto::SubmitReply> {
        let who = caller(&req)?;
        let replication = req.get_ref().replication;
        let submission = req.get_ref().submission.clone();
        let mut request = JobRequest::decode(&req.into_inner().request).map_err(invalid)?;
        // The job's user as this coordinator authenticated them, whatever
        // the request said: a worker with a map of task users runs the
        // job's commands as the local user of this name.
        request
            .properties
            .insert(sluice_request::JOB_USER.to_owned(), who.owner());
        check_name(&request.output).map_err(invalid)?;
        if request.input.split(',').any(|n| n == request.output) {
            return Err(Status::invalid_argument(format!(
                "output data set {} is also an input",
                request.output
            )));
        }
        let (reducers, side) = self.validate(&request)?;
        let external = self.external_splits(&request).await?;
        let sub = Submission {
            request,
            replication,
            reducers,
            side,
            external,
            submission,
            user: who.owner(),
        };
        let make = |st: &State| {
            st.check_submit(who.name(), &sub)?;
            Ok(Event::Submit(sub))
        };
        match self.dispatch_with(make)? {
            Answer::Submitted(id) => Ok(Response::new(proto::SubmitReply { job: id.0 })),
            a => Err(unexpected(a)),
        }
    }

    async fn wait_job(&self, req: Request<proto::WaitJobRequest>) -> Reply<proto::JobStatus> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let seen = self.lock().state.check_job(who.name(), JobId(r.job));
        seen.map_err(refused)?;
        let deadline = Instant::now() + Duration::from_millis(r.wait_ms.min(60_000));
        loop {
            let notified = self.wakers.waiters.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let core = self.lock();
                let st = &core.state;
                let s = st.status(JobId(r.job)).ok_or_else(|| {
                    Status::not_found(format!("no job {} (epoch {})", JobId(r.job), st.epoch))
                })?;
                if s.state != "running" || Instant::now() >= deadline {
                    return Ok(Response::new(s));
                }
            }
            let _ = tokio::time::timeout_at(deadline.into(), notified).await;
        }
    }

    async fn kill_job(&self, req: Request<proto::KillJobRequest>) -> Reply<proto::JobStatus> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let make = |st: &State| {
            st.check_job(who.name(), JobId(r.job))?;
            Ok(Event::Kill {
                job: JobId(r.job),
                reason: r.reason,
            })
        };
        match self.dispatch_with(make)? {
            Answer::Job(s) => Ok(Response::new(s)),
            a => Err(unexpected(a)),
        }
    }

    async fn list_jobs(&self, req: Request<Empty>) -> Reply<proto::JobList> {
        let who = caller(&req)?;
        let core = self.lock();
        let st = &core.state;
        let mut out = proto::JobList::default();
        let mine = |r: &&crate::store::JobRecord| who.name().is_none_or(|u| r.user == u);
        for (id, r) in st.records.iter().filter(|(_, r)| mine(r)) {
            let mut s = st.status(*id).expect("recorded");
            s.report_json.clear();
            out.jobs.push(s);
            out.descriptions.push(r.request.as_ref().map_or_else(
                || "(recorded by an older Sluice)".into(),
                JobRequest::describe,
            ));
        }
        Ok(Response::new(out))
    }

    async fn pools(&self, req: Request<proto::PoolsRequest>) -> Reply<proto::PoolList> {
        if req.get_ref().reload {
            admin_only(&req, "reload the pools")?;
            let policy = self
                .cfg
                .scheduler
                .policy()
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
            self.dispatch(Event::Policy(policy))?;
        }
        Ok(Response::new(self.lock().state.pool_list()))
    }

    async fn cache_add(
        &self,
        req: Request<proto::CacheAddRequest>,
    ) -> Reply<proto::CacheDirective> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let make = |st: &State| {
            st.check_write(who.name(), &r.dataset)?;
            Ok(Event::CacheAdd(r))
        };
        match self.dispatch_with(make)? {
            Answer::Directive(d) => Ok(Response::new(d)),
            a => Err(unexpected(a)),
        }
    }

    async fn cache_remove(
        &self,
        req: Request<proto::CacheRemoveRequest>,
    ) -> Reply<proto::CacheRemoveReply> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let make = |st: &State| {
            st.check_uncache(who.name(), &r)?;
            Ok(Event::CacheRemove(r))
        };
        match self.dispatch_with(make)? {
            Answer::Removed(removed) => Ok(Response::new(proto::CacheRemoveReply { removed })),
            a => Err(unexpected(a)),
        }
    }

    async fn cache_list(&self, _: Request<Empty>) -> Reply<proto::CacheListReply> {
        Ok(Response::new(self.lock().state.cache_list()))
    }

    async fn users(&self, req: Request<proto::UsersRequest>) -> Reply<proto::UserList> {
        admin_only(&req, "add, remove or list users")?;
        let r = req.into_inner();
        if !r.add.is_empty() {
            let salt = Some(sluice_proto::users::new_salt());
            self.dispatch(Event::User {
                name: r.add.clone(),
                salt,
            })?;
        }
        if !r.remove.is_empty() {
            self.dispatch(Event::User {
                name: r.remove,
                salt: None,
            })?;
        }
        let users = &self.lock().state.catalog.users;
        Ok(Response::new(crate::access::user_list(users, &r.add)))
    }

    async fn share(&self, req: Request<proto::ShareRequest>) -> Reply<Empty> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let make = |st: &State| {
            st.check_write(who.name(), &r.dataset)?;
            Ok(Event::Share(r))
        };
        self.dispatch_with(make).map(|_| Response::new(Empty {}))
    }

    async fn info(&self, _: Request<Empty>) -> Reply<proto::ClusterInfo> {
        let core = self.lock();
        Ok(Response::new(proto::ClusterInfo {
            epoch: core.state.epoch,
            workers: core
                .state
                .workers
                .values()
                .map(|w| w.info.clone())
                .collect(),
        }))
    }
}

/// Most data sets one `ListDatasets` page holds.
pub const LIST_PAGE: usize = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_as_columns_read_back_as_the_same_outputs() {
        let outputs: Vec<proto::MapOutput> = (0..5)
            .map(|i| proto::MapOutput {
                map: 10 - i,
                attempt: i % 2,
                worker: i * 3,
                addr: String::new(),
            })
            .collect();
        let mut plain = proto::MapOutputsReply::default();
        put_outputs(&mut plain, outputs.clone(), false);
        assert_eq!((plain.outputs.len(), plain.output_maps.len()), (5, 0));
        let mut packed = proto::MapOutputsReply::default();
        put_outputs(&mut packed, outputs.clone(), true);
        assert!(packed.outputs.is_empty());
        assert_eq!(packed.output_maps, [10, 9, 8, 7, 6]);
        assert_eq!(
            sluice_proto::outputs::outputs(&mut packed).unwrap(),
            outputs
        );
        assert_eq!(sluice_proto::outputs::outputs(&mut plain).unwrap(), outputs);
    }
}
