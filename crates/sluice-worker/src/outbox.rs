//! What the next heartbeat carries, and the session it is sent in: pure
//! state, no I/O, behind one lock.
//!
//! Task reports, damaged replicas and the outcomes of re-replication
//! copies wait here until a heartbeat takes them; a heartbeat that fails
//! puts them back. A re-registration starts a new session and drops the
//! reports of the old one (nothing running before it may report).

use std::time::{Duration, Instant};

use sluice_proto::proto::{CorruptReplica, ReplicateResult, TaskReport};

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

    /// The session ended: reports of the tasks that ran in it are dropped.
    pub fn fence(&mut self) {
        self.unsent.clear();
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
        Letter {
            reports,
            corrupt: std::mem::take(&mut self.corrupt),
            replicated: std::mem::take(&mut self.replicated),
        }
    }

    /// A letter that was not delivered, to send again.
    pub fn returned(&mut self, l: Letter) {
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
    fn a_fence_drops_the_old_sessions_reports_but_not_its_findings() {
        let mut o = Outbox::default();
        o.corrupt(CorruptReplica::default());
        let l = o.letter(vec![report(1)]);
        o.returned(l);
        o.fence();
        assert!(o.take_reports().is_empty());
        assert_eq!(o.letter(Vec::new()).corrupt.len(), 1);
    }

    #[test]
    fn a_block_report_is_due_at_once_then_every_period() {
        let mut o = Outbox::default();
        assert!(o.block_report_due(Duration::from_secs(3600)));
        o.block_report_sent();
        assert!(!o.block_report_due(Duration::from_secs(3600)));
        assert!(o.block_report_due(Duration::ZERO));
    }
}
