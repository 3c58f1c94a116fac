//! What the next heartbeat carries, and the session it is sent in: pure
//! state, no I/O, behind one lock.
//!
//! Task reports, damaged replicas and the outcomes of re-replication
//! copies wait here until a heartbeat takes them; a heartbeat that fails,
//! or that the coordinator answers with a request to register again,
//! puts them back. A registration starts a new session; the reports still
//! waiting are sent in it (the registration named their attempts, so the
//! coordinator takes them). Failed heartbeats are retried after a capped
//! exponential backoff ([`Outbox::failed`]).

use std::time::{Duration, Instant};

use sluice_proto::proto::{CorruptReplica, ReplicateResult, TaskId, TaskReport};

/// What one heartbeat takes to send.
#[derive(Debug, Default)]
pub(crate) struct Letter {
    pub reports: Vec<TaskReport>,
    pub corrupt: Vec<CorruptReplica>,
    pub replicated: Vec<ReplicateResult>,
}

/// The worker's side of its session with the coordinator.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    /// The worker's id and the coordinator's epoch it registered in.
    session: (u64, u64),
    /// Task reports a heartbeat has not delivered yet.
    unsent: Vec<TaskReport>,
    /// Damaged replicas found outside a task's report (the scanner, side
    /// inputs, the cache's loading, copies).
    corrupt: Vec<CorruptReplica>,
    /// Outcomes of re-replication copies.
    replicated: Vec<ReplicateResult>,
    /// When the last block report was sent.
    last_block_report: Option<Instant>,
    /// Heartbeats failed in a row.
    failures: u32,
    /// When the first of the failed calls in a row failed.
    silent_since: Option<Instant>,
    /// The attempts whose reports are on their way (a letter sent and not
    /// answered yet).
    in_flight: Vec<TaskId>,
    /// The session the coordinator asked to register again, if that is
    /// the current one.
    stale: Option<(u64, u64)>,
}

/// The first pause after a failed heartbeat or registration.
pub(crate) const BACKOFF_FIRST: Duration = Duration::from_millis(50);
/// The longest pause: it doubles up to this.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// The pause after `failures` failed calls in a row (at least one).
pub(crate) fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    (BACKOFF_FIRST * (1 << doublings)).min(BACKOFF_MAX)
}

impl Outbox {
    /// The worker registered as `worker_id` in `epoch`.
    pub fn registered(&mut self, worker_id: u64, epoch: u64) {
        self.session = (worker_id, epoch);
    }

    /// The session heartbeats are sent in.
    pub fn session(&self) -> (u64, u64) {
        self.session
    }

    /// The attempts whose reports wait to be sent or are on their way:
    /// a registration names them with the attempts running.
    pub fn unreported(&self) -> Vec<TaskId> {
        let waiting = self.unsent.iter().filter_map(|r| r.task);
        waiting.chain(self.in_flight.iter().copied()).collect()
    }

    /// The coordinator answered a heartbeat of `session` asking it to
    /// register again: whether that is the current session (an answer to
    /// one already replaced asks nothing).
    pub fn asked_again(&mut self, session: (u64, u64)) -> bool {
        let current = session == self.session;
        if current {
            self.stale = Some(session);
        }
        current
    }

    /// Whether the current session must register again (asked once).
    pub fn must_register(&mut self) -> bool {
        self.stale.take() == Some(self.session)
    }

    /// A heartbeat failed: how long to wait before the next.
    pub fn failed(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        self.silent_since.get_or_insert_with(Instant::now);
        backoff(self.failures)
    }

    /// How long no heartbeat has been answered, at `now` (zero while they
    /// are).
    pub fn silent_for(&self, now: Instant) -> Duration {
        self.silent_since
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t))
    }

    /// A heartbeat was answered.
    pub fn answered(&mut self) {
        self.failures = 0;
        self.silent_since = None;
    }

    /// The reports waiting to be sent, taken.
    pub fn take_reports(&mut self) -> Vec<TaskReport> {
        std::mem::take(&mut self.unsent)
    }

    /// A damaged replica to report.
    pub fn corrupt(&mut self, c: CorruptReplica) {
        self.corrupt.push(c);
    }

    /// The outcome of a re-replication copy to report.
    pub fn replicated(&mut self, r: ReplicateResult) {
        self.replicated.push(r);
    }

    /// A heartbeat's letter: `reports` and every finding waiting.
    pub fn letter(&mut self, reports: Vec<TaskReport>) -> Letter {
        self.in_flight.extend(reports.iter().filter_map(|r| r.task));
        Letter {
            reports,
            corrupt: std::mem::take(&mut self.corrupt),
            replicated: std::mem::take(&mut self.replicated),
        }
    }

    /// A letter was delivered: its reports are no longer on their way.
    pub fn delivered(&mut self, l: &Letter) {
        for t in l.reports.iter().filter_map(|r| r.task) {
            if let Some(i) = self.in_flight.iter().position(|f| *f == t) {
                self.in_flight.swap_remove(i);
            }
        }
    }

    /// A letter that was not delivered, to send again.
    pub fn returned(&mut self, l: Letter) {
        self.delivered(&l);
        self.unsent.extend(l.reports);
        self.corrupt.extend(l.corrupt);
        self.replicated.extend(l.replicated);
    }

    /// Whether a block report is due, one being sent every `every`.
    pub fn block_report_due(&self, every: Duration) -> bool {
        self.last_block_report.is_none_or(|t| t.elapsed() >= every)
    }

    /// A block report was sent (or registered with).
    pub fn block_report_sent(&mut self) {
        self.last_block_report = Some(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(index: u32) -> TaskReport {
        TaskReport {
            task: Some(sluice_proto::proto::TaskId {
                index,
                ..Default::default()
            }),
            ..TaskReport::default()
        }
    }

    #[test]
    fn a_returned_letter_is_sent_again_with_what_came_since() {
        let mut o = Outbox::default();
        o.corrupt(CorruptReplica::default());
        let l = o.letter(vec![report(1)]);
        assert_eq!((l.reports.len(), l.corrupt.len()), (1, 1));
        o.replicated(ReplicateResult::default());
        o.returned(l);
        let reports = o.take_reports();
        let again = o.letter(reports);
        assert_eq!(again.reports, vec![report(1)]);
        assert_eq!((again.corrupt.len(), again.replicated.len()), (1, 1));
        assert!(o.letter(Vec::new()).corrupt.is_empty());
    }

    #[test]
    fn reports_returned_are_kept_for_the_next_session_and_named() {
        let mut o = Outbox::default();
        o.registered(1, 1);
        let l = o.letter(vec![report(1), report(4)]);
        o.returned(l);
        o.registered(3, 2);
        let named: Vec<u32> = o.unreported().iter().map(|t| t.index).collect();
        assert_eq!(named, vec![1, 4]);
        assert_eq!(o.take_reports().len(), 2);
    }

    #[test]
    fn reports_on_their_way_are_named_until_delivered() {
        let mut o = Outbox::default();
        let l = o.letter(vec![report(2)]);
        assert_eq!(o.unreported().len(), 1);
        o.delivered(&l);
        assert!(o.unreported().is_empty());
    }

    #[test]
    fn only_the_current_session_is_asked_to_register_again_and_once() {
        let mut o = Outbox::default();
        o.registered(1, 1);
        assert!(o.asked_again((1, 1)));
        assert!(o.asked_again((1, 1)), "a second answer of the same session");
        o.registered(1, 2);
        assert!(!o.must_register(), "the session it named is gone");
        assert!(!o.asked_again((1, 1)), "a late answer of the old session");
        assert!(o.asked_again((1, 2)));
        assert!(o.must_register());
        assert!(!o.must_register(), "asked once");
    }

    #[test]
    fn failed_heartbeats_back_off_doubling_to_a_cap_and_reset_when_answered() {
        let mut o = Outbox::default();
        let waits: Vec<u128> = (0..8).map(|_| o.failed().as_millis()).collect();
        assert_eq!(waits, vec![50, 100, 200, 400, 800, 1600, 2000, 2000]);
        o.answered();
        assert_eq!(o.failed(), BACKOFF_FIRST);
        assert_eq!(backoff(u32::MAX), BACKOFF_MAX);
    }

    #[test]
    fn a_block_report_is_due_at_once_then_every_period() {
        let mut o = Outbox::default();
        assert!(o.block_report_due(Duration::from_secs(3600)));
        o.block_report_sent();
        assert!(!o.block_report_due(Duration::from_secs(3600)));
        assert!(o.block_report_due(Duration::ZERO));
    }

    #[test]
    fn silence_counts_from_the_first_failure_until_an_answer() {
        let mut o = Outbox::default();
        let t0 = Instant::now();
        assert_eq!(o.silent_for(t0), Duration::ZERO);
        o.failed();
        o.failed();
        let later = Instant::now() + Duration::from_secs(5);
        assert!(o.silent_for(later) >= Duration::from_secs(5));
        o.answered();
        assert_eq!(o.silent_for(later), Duration::ZERO);
    }
}
