//! The crate's errors.

/// What went wrong talking to an object store.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The path is not `s3://bucket/key`.
    #[error("{0}: not an object store path (s3://BUCKET/KEY)")]
    BadPath(String),
    /// Nothing matches the input path.
    #[error("input path does not exist: {0}")]
    NotFound(String),
    /// The output exists and overwriting was not asked for.
    #[error("output {0} already exists (its _SUCCESS manifest is there); pass --overwrite to replace it")]
    OutputExists(String),
    /// The path holds parts of an output whose commit never finished.
    #[error("{0} holds an output that was never committed (a job died while committing it): nothing there is an answer; write it again")]
    Uncommitted(String),
    /// A committed output's manifest does not parse.
    #[error("{path}: not a Sluice output manifest ({why})")]
    BadManifest { path: String, why: String },
    /// The store refused or failed a request.
    #[error("{what} {path}: {source}")]
    Store {
        what: &'static str,
        path: String,
        #[source]
        source: object_store::Error,
    },
    /// A local file of the output could not be read.
    #[error("reading {path}: {source}")]
    Local {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl StorageError {
    pub(crate) fn store(what: &'static str, path: &str, source: object_store::Error) -> Self {
        StorageError::Store {
            what,
            path: path.to_owned(),
            source,
        }
    }
}
