//! Why the coordinator refuses an event: one variant per reason, carrying
//! the ids and names involved. Its `Display` is the message the caller
//! reads; the service maps each variant to a gRPC code.

use std::fmt;

use sluice_proto::ids::{DatasetName, JobId};

/// An event the state refused, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A worker speaking another protocol version registered.
    Protocol { worker: u32, coordinator: u32 },
    /// Nothing can run or be stored: no worker is alive.
    NoLiveWorkers,
    /// A request names something malformed (a data set name, a
    /// `synthetic:N` input); the text says what.
    Invalid(String),
    /// No data set of this name.
    NoDataset(String),
    /// A put's data set exists and the put does not overwrite it.
    DatasetExists(DatasetName),
    /// A job's output data set exists and the job does not overwrite it.
    OutputExists(String),
    /// A put commits a block this coordinator did not plan.
    NotPlanned(String),
    /// No job of this id in this epoch.
    NoJob { job: JobId, epoch: u64 },
    /// A kill of a job that has already ended (`state` is how).
    NotRunning { job: JobId, state: &'static str },
    /// A job asks more memory per task than any worker gives one.
    Memory(MemoryAsk),
    /// A cache directive names a block past the data set's end.
    NoBlock {
        dataset: DatasetName,
        blocks: usize,
        block: u32,
    },
    /// A cache directive names a worker that is not alive.
    NoLiveWorker(String),
    /// A cache directive names a worker holding no replica of what it
    /// pins (`block`: one block, or the whole data set).
    NoReplica {
        worker: String,
        dataset: DatasetName,
        block: Option<u32>,
    },
    /// A cache removal by id matches no directive.
    NoDirective(u64),
    /// A cache removal by data set matches no directive.
    NoDirectiveFor(String),
    /// The catalog write a client waits for failed.
    CatalogUnwritten(String),
    /// The job records of a submission could not be written.
    Unrecorded(String),
    /// The caller may not do this; the text says why
    /// (`data set private belongs to alice`).
    Denied(String),
    /// `sluice user add` of a user who exists.
    UserExists(String),
    /// No user of this name.
    NoUser(String),
}

/// A job's memory ask, and the worker that gives a task the most.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryAsk {
    pub asked: u64,
    pub share: u64,
    pub worker: u64,
    pub memory: u64,
    pub slots: u32,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Protocol {
                worker,
                coordinator,
            } => write!(
                f,
                "worker speaks protocol {worker}, this coordinator {coordinator}"
            ),
            Refusal::NoLiveWorkers => f.write_str("no live workers"),
            Refusal::Invalid(why) => f.write_str(why),
            Refusal::NoDataset(name) => write!(f, "no data set {name}"),
            Refusal::DatasetExists(name) => {
                write!(f, "data set {name} exists (remove it first, or overwrite)")
            }
            Refusal::OutputExists(name) => write!(
                f,
                "output data set {name} exists (pass --overwrite to replace it)"
            ),
            Refusal::NotPlanned(block) => write!(
                f,
                "block {block} was not planned by this coordinator (it restarted while the put \
                 ran?): put the data set again"
            ),
            Refusal::NoJob { job, epoch } => write!(f, "no job {job} (epoch {epoch})"),
            Refusal::NotRunning { job, state } => write!(f, "job {job} is not running: it {state}"),
            Refusal::Memory(m) => m.fmt(f),
            Refusal::NoBlock {
                dataset,
                blocks,
                block,
            } => write!(
                f,
                "data set {dataset} has {blocks} blocks (0 to {}); no block {block}",
                blocks.saturating_sub(1)
            ),
            Refusal::NoLiveWorker(w) => write!(f, "no live worker {w}"),
            Refusal::NoReplica {
                worker,
                dataset,
                block,
            } => match block {
                Some(n) => write!(
                    f,
                    "worker {worker} holds no replica of block {n} of {dataset}"
                ),
                None => write!(f, "worker {worker} holds no replica of data set {dataset}"),
            },
            Refusal::NoDirective(id) => write!(f, "no cache directive {id}"),
            Refusal::NoDirectiveFor(name) => write!(f, "no cache directive for data set {name}"),
            Refusal::CatalogUnwritten(e) => write!(f, "writing the catalog: {e}"),
            Refusal::Unrecorded(e) => write!(f, "recording the job: {e}"),
            Refusal::Denied(why) => write!(f, "permission denied: {why}"),
            Refusal::UserExists(u) => write!(f, "user {u} exists (remove it first)"),
            Refusal::NoUser(u) => write!(f, "no user {u}"),
        }
    }
}

impl fmt::Display for MemoryAsk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let MemoryAsk {
            asked,
            share,
            worker,
            memory,
            slots,
        } = self;
        write!(
            f,
            "the job asks --memory {asked} bytes per task; the most a worker gives a task \
             is {share} (worker {worker}: --memory {memory} shared by {slots} map and {slots} \
             reduce slots)"
        )
    }
}

impl std::error::Error for Refusal {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_reads_as_the_message_callers_know() {
        let name = DatasetName::new("in".to_string()).unwrap();
        let cases = [
            (Refusal::NoLiveWorkers, "no live workers"),
            (Refusal::NoDataset("in".into()), "no data set in"),
            (
                Refusal::DatasetExists(name.clone()),
                "data set in exists (remove it first, or overwrite)",
            ),
            (
                Refusal::NoJob {
                    job: JobId::new(1, 7),
                    epoch: 2,
                },
                "no job job-1-7 (epoch 2)",
            ),
            (
                Refusal::NoBlock {
                    dataset: name.clone(),
                    blocks: 2,
                    block: 5,
                },
                "data set in has 2 blocks (0 to 1); no block 5",
            ),
            (
                Refusal::NoReplica {
                    worker: "w".into(),
                    dataset: name.clone(),
                    block: Some(1),
                },
                "worker w holds no replica of block 1 of in",
            ),
            (
                Refusal::NoReplica {
                    worker: "w".into(),
                    dataset: name,
                    block: None,
                },
                "worker w holds no replica of data set in",
            ),
            (Refusal::NoDirective(3), "no cache directive 3"),
            (
                Refusal::NoDirectiveFor("in".into()),
                "no cache directive for data set in",
            ),
        ];
        for (r, text) in cases {
            assert_eq!(r.to_string(), text);
        }
    }
}
