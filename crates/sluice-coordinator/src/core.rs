//! The state and where it is written, behind the service's one lock, and
//! what a listing shows of a data set.

use std::collections::HashSet;

use crate::durable::Durable;
use crate::joblog::JobEntry;
use crate::state::{Answer, At, Event, Refusal, State};
use sluice_proto::catalog::DatasetMeta;
use sluice_proto::proto;
use sluice_proto::ClusterError;

/// The state and where it is written, behind one lock: an event and the
/// writes its step asks for happen together.
pub(crate) struct Core {
    pub(crate) state: State,
    /// Where what the steps ask to keep is written.
    pub(crate) durable: Box<dyn Durable>,
    /// Reports the history keeps.
    pub(crate) history: usize,
}

impl Core {
    /// Handles an event and writes what it asks (the catalog, whose
    /// outcome is handled as the next event, and the job records); returns
    /// the answer and whom to wake.
    pub(crate) fn run(&mut self, ev: Event) -> (Result<Answer, Refusal>, Wake) {
        let at = At::now();
        let mut step = self.state.handle(ev, at);
        let mut wake = Wake::of(&step);
        wake |= self.log_jobs(&step.log, &mut step.answer);
        while let Some(write) = step.catalog.take() {
            let catalog = &self.state.catalog;
            let result = self
                .durable
                .catalog_changed(&write.edit(catalog), catalog)
                .map_err(|e| e.to_string());
            if result.is_ok() && write.commits() {
                crate::crash::at("commit-written");
            }
            let mut next = self.state.handle(Event::CatalogSaved { write, result }, at);
            wake |= self.log_jobs(&next.log, &mut next.answer);
            wake |= Wake::of(&next);
            step.save_jobs |= next.save_jobs;
            step.history.extend(next.history);
            step.catalog = next.catalog;
            if let Err(e) = next.answer {
                step.answer = Err(e);
            }
        }
        for (id, json) in &step.history {
            // The job's outcome is in the records; its report is a record
            // of what happened, so a failed write is logged, not fatal.
            if let Err(e) = self.durable.save_history(*id, json, self.history) {
                tracing::error!("writing job {id}'s report to the history: {e}");
            }
        }
        if step.save_jobs {
            if let Err(e) = self.durable.save_records(&self.state.records) {
                wake |= self.records_unsaved(&mut step.answer, e);
            }
        }
        (step.answer, wake)
    }

    /// Appends the job log records a step asks for. A job whose
    /// acceptance could not be logged is handled as one whose record
    /// could not be written; any other failure is logged (a lost task
    /// record only means the task runs again after a restart).
    fn log_jobs(&mut self, entries: &[JobEntry], answer: &mut Result<Answer, Refusal>) -> Wake {
        if let Err(e) = self.durable.log_jobs(entries) {
            tracing::error!("writing the job log: {e}");
            if entries.iter().any(|e| matches!(e, JobEntry::Accepted(_))) {
                return self.records_unsaved(answer, e);
            }
            return Wake::default();
        }
        for e in entries {
            crate::crash::logged(e);
        }
        if entries.iter().any(|e| matches!(e, JobEntry::Ended { .. }))
            && !self.state.jobs.values().any(|j| j.is_running())
        {
            if let Err(e) = self.durable.jobs_idle() {
                tracing::error!("starting the job log again: {e}");
            }
        }
        Wake::default()
    }

    /// The job records could not be written: a job just submitted is
    /// killed (nothing would say it ran) and its client told why; any
    /// other change is logged and written with the next one.
    fn records_unsaved(&mut self, answer: &mut Result<Answer, Refusal>, e: ClusterError) -> Wake {
        tracing::error!("writing the job records: {e}");
        let Ok(Answer::Submitted(job)) = *answer else {
            return Wake::default();
        };
        let reason = format!("the coordinator, which could not record the job ({e})");
        let (_, wake) = self.run(Event::Kill { job, reason });
        *answer = Err(Refusal::Unrecorded(e.to_string()));
        wake
    }
}

/// Whom an event's change concerns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Wake {
    /// Callers waiting on the state (a job's end, a data set).
    pub waiters: bool,
    /// Held heartbeats: their workers' slots are offered again.
    pub offers: bool,
    /// Reduces waiting for map outputs.
    pub outputs: bool,
}

impl Wake {
    fn of(step: &crate::state::Step) -> Self {
        Wake {
            waiters: step.wake,
            offers: step.offer,
            outputs: step.outputs,
        }
    }
}

impl std::ops::BitOrAssign for Wake {
    fn bitor_assign(&mut self, o: Wake) {
        self.waiters |= o.waiters;
        self.offers |= o.offers;
        self.outputs |= o.outputs;
    }
}

/// A data set summed up for a listing: its replicas counted are the
/// intact ones on the `live` workers (a lost worker's do not count).
pub(crate) fn summary(d: &DatasetMeta, live: &HashSet<String>) -> proto::DatasetSummary {
    let want = d.replication.max(1) as usize;
    let mut s = proto::DatasetSummary {
        name: d.name.to_string(),
        files: d.files.len() as u64,
        replication: d.replication,
        origin: d.origin.clone(),
        created_ms: d.created_ms,
        min_replicas: u32::MAX,
        owner: d.access.owner.clone(),
        readers: if d.access.public {
            vec!["*".into()]
        } else {
            d.access.readers.clone()
        },
        ..Default::default()
    };
    for b in d.blocks() {
        let n = b.replicas.iter().filter(|u| live.contains(*u)).count();
        s.bytes += b.len;
        s.blocks += 1;
        s.min_replicas = s.min_replicas.min(n as u32);
        s.under_replicated += u64::from(n < want);
    }
    if s.blocks == 0 {
        s.min_replicas = 0;
    }
    s
}
