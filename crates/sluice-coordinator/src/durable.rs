//! Where the coordinator's state lasts: the catalog's changes, the job
//! log, the job records and the finished jobs' reports.
//!
//! [`Durable`] is what the service writes through, whichever the place:
//! the state directory's files ([`Files`], the embedded default and any
//! single coordinator), or etcd for coordinators that stand by for each
//! other (`crate::ha`). [`Loaded`] is what a coordinator starts from.

use std::collections::BTreeMap;
use std::path::Path;

use sluice_proto::catalog::Catalog;
use sluice_proto::ids::JobId;
use sluice_proto::ClusterError;

use crate::editlog::{CatalogEdit, CatalogLog};
use crate::joblog::{JobEntry, JobLog, Recovered};
use crate::store::{JobRecord, StateDir};

type Result<T> = std::result::Result<T, ClusterError>;

/// What a coordinator starts from.
#[derive(Debug, Default)]
pub struct Loaded {
    /// This coordinator's epoch (one more than the last one's).
    pub epoch: u64,
    pub catalog: Catalog,
    /// Every job's record.
    pub records: BTreeMap<JobId, JobRecord>,
    /// The jobs the job log says were running.
    pub recovered: Vec<Recovered>,
    /// The newest finished jobs' reports.
    pub history: BTreeMap<JobId, String>,
}

/// The writes a coordinator's steps ask for. Each returns once what it
/// wrote lasts as its kind asks (see [`crate::joblog`] for which job
/// log records are synced).
pub trait Durable: Send {
    /// Logs one change of the catalog; `catalog` holds it already (for a
    /// checkpoint).
    fn catalog_changed(&mut self, edit: &CatalogEdit, catalog: &Catalog) -> Result<()>;
    /// Appends job log records, in order.
    fn log_jobs(&mut self, entries: &[JobEntry]) -> Result<()>;
    /// No job runs: the job log may start again empty.
    fn jobs_idle(&mut self) -> Result<()>;
    /// Saves the job records (all of them as they are now).
    fn save_records(&mut self, records: &BTreeMap<JobId, JobRecord>) -> Result<()>;
    /// Keeps a finished job's report, and the newest `keep` of them.
    fn save_history(&mut self, id: JobId, json: &str, keep: usize) -> Result<()>;
}

/// The state directory's files.
#[derive(Debug)]
pub struct Files {
    store: StateDir,
    log: CatalogLog,
    jobs: JobLog,
}

impl Files {
    /// Opens the state directory `dir` for a new coordinator: the epoch
    /// counted up, the catalog and the job log replayed, the newest
    /// `history` reports read.
    pub fn open(dir: &Path, history: usize) -> Result<(Files, Loaded)> {
        let store = StateDir::open(dir)?;
        let epoch = store.next_epoch()?;
        let (log, catalog) = CatalogLog::open(store.clone())?;
        let (jobs, recovered) = JobLog::open(&store)?;
        let loaded = Loaded {
            epoch,
            catalog,
            records: store.load_jobs()?,
            recovered,
            history: store.load_history(history)?,
        };
        Ok((Files { store, log, jobs }, loaded))
    }
}

impl Durable for Files {
    fn catalog_changed(&mut self, edit: &CatalogEdit, catalog: &Catalog) -> Result<()> {
        self.log.append(edit, catalog)
    }

    fn log_jobs(&mut self, entries: &[JobEntry]) -> Result<()> {
        self.jobs.append(entries)
    }

    fn jobs_idle(&mut self) -> Result<()> {
        self.jobs.restart_if_large()
    }

    fn save_records(&mut self, records: &BTreeMap<JobId, JobRecord>) -> Result<()> {
        self.store.save_jobs(records)
    }

    fn save_history(&mut self, id: JobId, json: &str, keep: usize) -> Result<()> {
        self.store.save_history(id, json, keep)
    }
}
