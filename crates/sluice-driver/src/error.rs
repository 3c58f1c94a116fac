/// Why a job could not be run.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The request is not a job this binary can make.
    #[error(transparent)]
    Request(#[from] sluice_request::RequestError),
    /// The local engine failed the job.
    #[error(transparent)]
    Engine(#[from] sluice_engine::EngineError),
    /// An input could not be listed or sampled.
    #[error(transparent)]
    Format(#[from] sluice_formats::FormatError),
    /// The cluster refused or lost the job.
    #[error(transparent)]
    Cluster(#[from] sluice_proto::ClusterError),
    /// The job failed on the cluster.
    #[error("{id} failed: {reason}")]
    Failed {
        /// The job's id.
        id: sluice_proto::ids::JobId,
        /// Why.
        reason: String,
    },
    /// The job was killed (`reason` says by whom).
    #[error("{id} was {reason}")]
    Killed {
        /// The job's id.
        id: sluice_proto::ids::JobId,
        /// Why.
        reason: String,
    },
    /// A kind's plan is inconsistent.
    #[error("bad plan: {0}")]
    Plan(String),
    /// An object store failed or refused an input or output.
    #[error(transparent)]
    Storage(#[from] sluice_storage::StorageError),
    /// A local file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl DriverError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DriverError {
        let what = what.into();
        move |source| DriverError::Io { what, source }
    }
}
