//! Riding out a coordinator that does not answer (it is restarting, or
//! its supervisor is starting it again): the client says so once, waits
//! with a capped backoff, and asks again, up to its [`Patience`].
//!
//! Whether a failed call may be asked again is decided here alone
//! ([`may_ask_again`]): a call that only reads may always be; one that
//! changes the coordinator's state (a submit, a kill, a removal) only when
//! it never reached the coordinator (the connection was refused), or the
//! coordinator refused it as no longer active, so that nothing is done
//! twice.
//!
//! Given several coordinators (`--coordinator A,B`), a call asked again
//! goes to the next address ([`sluice_proto::follow`]); the client pauses
//! only once every address has failed in a row, and a call to one of
//! several has a deadline ([`CALL_DEADLINE`]), so a coordinator that
//! accepts connections and never answers (a stopped process) is left.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_proto::follow::Following;
use sluice_proto::signed::Rpc;
use tonic::{Code, Status};

/// The first pause before asking again.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause between two attempts.
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// How long a call to one of several coordinators may take beyond the
/// time it asks the coordinator to hold it (a job's wait).
pub const CALL_DEADLINE: Duration = Duration::from_secs(30);

/// What a call that found no answer in time fails with (it may have
/// arrived: a write is not asked again).
pub const NO_ANSWER: &str = "did not answer in time";

/// What a coordinator that lost its lease answers every call with: it
/// did nothing, and another is active.
pub const NOT_ACTIVE: &str = "no longer active";

/// How a coordinator's refusal for want of live workers begins.
pub const NO_WORKERS: &str = "no live workers";

/// How long after an outage a call counts as meeting it (its coordinator
/// may have just restarted or taken over, its workers registering again).
pub const AFTER_OUTAGE: Duration = Duration::from_secs(60);

/// What a client says when its coordinator goes away and comes back.
pub type Notice = Arc<dyn Fn(&str) + Send + Sync>;

/// How long a client waits for a coordinator that does not answer, and
/// whom it tells.
#[derive(Clone, Default)]
pub struct Patience {
    /// How long to wait (zero: fail at once, as a client always did).
    pub wait: Duration,
    /// Told once when waiting starts (`coordinator restarting;
    /// waiting...`).
    pub notice: Option<Notice>,
}

impl std::fmt::Debug for Patience {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Patience")
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

/// What a waiting client says, once per outage.
pub const WAITING: &str = "coordinator restarting; waiting...";

impl Patience {
    /// Waits up to `wait`, saying so on standard error.
    pub fn on_stderr(wait: Duration) -> Patience {
        Patience {
            wait,
            notice: Some(Arc::new(|line: &str| eprintln!("{line}"))),
        }
    }

    /// Tells whoever listens that the client waits.
    fn say_waiting(&self) {
        if let Some(n) = &self.notice {
            n(WAITING);
        }
    }
}

/// Whether a call changes the coordinator's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// It only reads: asking again is harmless.
    Read,
    /// It changes state: asked again only if it never arrived.
    Write,
}

/// Whether an error's text says a TLS certificate was refused (the
/// server's by this client, or this client's by the server): no outage,
/// and waiting changes nothing.
pub fn certificate_refused(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains("certificate") || t.contains("unknownca")
}

/// Whether a call that failed with `s` may be asked again once the
/// coordinator answers: it did not answer at all (the connection was
/// refused, lost on the way, or silent past its deadline), and, for a
/// write, the request never left (the connection could not be made); or
/// the coordinator refused it as no longer active (it did nothing). Once
/// the call has met an outage (`after_outage`), a refusal for want of
/// live workers is asked again too: a coordinator that just restarted or
/// took over has none until they register again, and it did nothing.
pub fn may_ask_again(s: &Status, call: Call, after_outage: bool) -> bool {
    if !matches!(s.code(), Code::Unavailable | Code::Unknown) {
        return false;
    }
    if s.code() == Code::Unavailable && s.message().contains(NOT_ACTIVE) {
        return true;
    }
    if after_outage && no_workers_yet(s) {
        return true;
    }
    // The message and its causes: what the transport said.
    let mut text = s.message().to_ascii_lowercase();
    let mut cause = std::error::Error::source(s);
    while let Some(c) = cause {
        text.push_str(&c.to_string().to_ascii_lowercase());
        cause = c.source();
    }
    let said = |words: &[&str]| words.iter().any(|w| text.contains(w));
    if certificate_refused(&text) {
        return false;
    }
    let unsent = said(&[
        "connect error",
        "connection refused",
        "error trying to connect",
    ]);
    let lost = said(&[
        "transport error",
        "connection",
        "broken pipe",
        "h2 protocol error",
        NO_ANSWER,
    ]);
    unsent || (call == Call::Read && lost)
}

/// Whether `s` is a coordinator's refusal for want of live workers (it
/// answered: it is no coordinator to leave).
fn no_workers_yet(s: &Status) -> bool {
    s.code() == Code::Unavailable && s.message().starts_with(NO_WORKERS)
}

/// Keeps track of one call's waiting: when it began, the next pause.
#[derive(Debug)]
pub(crate) struct Waiting {
    since: Option<Instant>,
    pause: Duration,
}

impl Waiting {
    pub(crate) fn new() -> Self {
        Waiting {
            since: None,
            pause: FIRST_PAUSE,
        }
    }

    /// After a failure that may be asked again: the pause to take, or
    /// `None` once `patience` is spent. Says once that the client waits.
    pub(crate) fn pause(&mut self, patience: &Patience) -> Option<Duration> {
        let since = *self.since.get_or_insert_with(|| {
            if !patience.wait.is_zero() {
                patience.say_waiting();
            }
            Instant::now()
        });
        let left = patience.wait.checked_sub(since.elapsed())?;
        if left.is_zero() {
            return None;
        }
        let pause = self.pause.min(left);
        self.pause = (self.pause * 2).min(MAX_PAUSE);
        Some(pause)
    }
}

/// Asks `ask` (given a channel to the coordinator followed now) until it
/// answers, or fails in a way not to ask again, or `patience` is spent.
/// A call asked again goes to the next coordinator, if there are several,
/// at once until every one has failed in a row; a call to one of several
/// is given up past `hold` (what it asks the coordinator to hold it) and
/// [`CALL_DEADLINE`].
pub(crate) async fn ask<T, F, Fut>(
    follow: &Following,
    patience: &Patience,
    call: Call,
    hold: Duration,
    mut ask: F,
) -> Result<T, Status>
where
    F: FnMut(Rpc) -> Fut,
    Fut: Future<Output = Result<tonic::Response<T>, Status>>,
{
    let mut waiting = Waiting::new();
    let deadline = follow.list().several().then_some(hold + CALL_DEADLINE);
    let mut outage = follow.outage_within(AFTER_OUTAGE);
    loop {
        let (at, rpc) = follow.current();
        match within(deadline, ask(rpc)).await {
            Ok(r) => {
                follow.answered(at);
                return Ok(r.into_inner());
            }
            Err(s) if may_ask_again(&s, call, outage) => {
                outage = true;
                if !no_workers_yet(&s) && !follow.missed(at) {
                    tracing::info!("coordinator {}: {}", follow.list().addr(at), s.message());
                    continue;
                }
                match waiting.pause(patience) {
                    Some(p) => tokio::time::sleep(p).await,
                    None => return Err(s),
                }
            }
            Err(s) => return Err(s),
        }
    }
}

/// `call`'s outcome, or (past `deadline`, if any) an `UNAVAILABLE`
/// status saying it found no answer in time.
async fn within<T>(
    deadline: Option<Duration>,
    call: impl Future<Output = Result<T, Status>>,
) -> Result<T, Status> {
    let Some(d) = deadline else {
        return call.await;
    };
    match tokio::time::timeout(d, call).await {
        Ok(r) => r,
        Err(_) => Err(Status::unavailable(format!(
            "the coordinator {NO_ANSWER} ({} s)",
            d.as_secs()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn reads_are_asked_again_when_the_answer_was_lost_writes_only_when_unsent() {
        let refused = Status::unavailable("tcp connect error: Connection refused (os error 111)");
        let reset = Status::unavailable("transport error: connection reset");
        let refusal = Status::not_found("no job job-1-7 (epoch 2)");
        assert!(may_ask_again(&refused, Call::Read, false));
        assert!(may_ask_again(&refused, Call::Write, false));
        assert!(may_ask_again(&reset, Call::Read, false));
        assert!(!may_ask_again(&reset, Call::Write, false));
        assert!(!may_ask_again(&refusal, Call::Read, true));
        assert!(!may_ask_again(
            &Status::permission_denied("bad signature"),
            Call::Read,
            true
        ));
        // The coordinator's own refusal is no lost connection.
        let no_workers = Status::unavailable("no live workers");
        assert!(!may_ask_again(&no_workers, Call::Read, false));
        assert!(!may_ask_again(&no_workers, Call::Write, false));
        // Unless the call met an outage: the workers register again.
        assert!(may_ask_again(&no_workers, Call::Write, true));
        let others = Status::unavailable("all 2 workers were lost: no live workers");
        assert!(!may_ask_again(&others, Call::Write, true));
        // One that lost its lease did nothing: anything goes elsewhere.
        let fenced = Status::unavailable("this coordinator is no longer active");
        assert!(may_ask_again(&fenced, Call::Read, false));
        assert!(may_ask_again(&fenced, Call::Write, false));
        assert!(!may_ask_again(
            &Status::failed_precondition("this coordinator is no longer active"),
            Call::Read,
            false
        ));
        // A call past its deadline may have arrived.
        let silent = Status::unavailable(format!("the coordinator {NO_ANSWER} (30 s)"));
        assert!(may_ask_again(&silent, Call::Read, false));
        assert!(!may_ask_again(&silent, Call::Write, false));
        // A refused certificate is no outage.
        for why in [
            "tcp connect error: invalid peer certificate: UnknownIssuer",
            "transport error: received fatal alert: UnknownCA",
        ] {
            assert!(!may_ask_again(&Status::unavailable(why), Call::Read, false));
        }
    }

    #[test]
    fn waiting_says_so_once_backs_off_to_a_cap_and_ends_with_its_patience() {
        let said = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = said.clone();
        let patience = Patience {
            wait: Duration::from_secs(60),
            notice: Some(Arc::new(move |l: &str| log.lock().unwrap().push(l.into()))),
        };
        let mut w = Waiting::new();
        let pauses: Vec<u128> = (0..7)
            .map(|_| w.pause(&patience).unwrap().as_millis())
            .collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1600, 2000, 2000]);
        assert_eq!(*said.lock().unwrap(), [WAITING]);
        let none = Patience::default();
        assert_eq!(Waiting::new().pause(&none), None);
    }
}
