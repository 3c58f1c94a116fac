//! Riding out a coordinator that does not answer (it is restarting, or
//! its supervisor is starting it again): the client says so once, waits
//! with a capped backoff, and asks again, up to its [`Patience`].
//!
//! Whether a failed call may be asked again is decided here alone
//! ([`may_ask_again`]): a call that only reads may always be; one that
//! changes the coordinator's state (a submit, a kill, a removal) only when
//! it never reached the coordinator (the connection was refused), so that
//! nothing is done twice.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic::{Code, Status};

/// The first pause before asking again.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause between two attempts.
const MAX_PAUSE: Duration = Duration::from_secs(2);

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

/// Whether a call that failed with `s` may be asked again once the
/// coordinator answers: it did not answer at all (the connection was
/// refused, or lost on the way), and, for a write, the request never
/// left (the connection could not be made).
pub fn may_ask_again(s: &Status, call: Call) -> bool {
    if !matches!(s.code(), Code::Unavailable | Code::Unknown) {
        return false;
    }
    // The message and its causes: what the transport said.
    let mut text = s.message().to_ascii_lowercase();
    let mut cause = std::error::Error::source(s);
    while let Some(c) = cause {
        text.push_str(&c.to_string().to_ascii_lowercase());
        cause = c.source();
    }
    let said = |words: &[&str]| words.iter().any(|w| text.contains(w));
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
    ]);
    unsent || (call == Call::Read && lost)
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

/// Asks `ask` until it answers, or fails in a way not to ask again, or
/// `patience` is spent.
pub(crate) async fn ask<T, F, Fut>(patience: &Patience, call: Call, mut ask: F) -> Result<T, Status>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<tonic::Response<T>, Status>>,
{
    let mut waiting = Waiting::new();
    loop {
        match ask().await {
            Ok(r) => return Ok(r.into_inner()),
            Err(s) if may_ask_again(&s, call) => match waiting.pause(patience) {
                Some(p) => tokio::time::sleep(p).await,
                None => return Err(s),
            },
            Err(s) => return Err(s),
        }
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
        assert!(may_ask_again(&refused, Call::Read));
        assert!(may_ask_again(&refused, Call::Write));
        assert!(may_ask_again(&reset, Call::Read));
        assert!(!may_ask_again(&reset, Call::Write));
        assert!(!may_ask_again(&refusal, Call::Read));
        assert!(!may_ask_again(
            &Status::permission_denied("bad signature"),
            Call::Read
        ));
        // The coordinator's own refusal is no lost connection.
        let no_workers = Status::unavailable("no live workers");
        assert!(!may_ask_again(&no_workers, Call::Read));
        assert!(!may_ask_again(&no_workers, Call::Write));
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
