//! The crate's errors.

/// What went wrong talking to an object store or HDFS.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The path is not `s3://bucket/key` or `hdfs://host:port/path`.
    #[error("{0}: not a storage path (s3://BUCKET/KEY or hdfs://HOST:PORT/PATH)")]
    BadPath(String),
    /// Nothing matches the input path.
    #[error("input path does not exist: {0}")]
    NotFound(String),
    /// The input path is a directory with no files (none not hidden).
    #[error("input path {0} is a directory that holds no input files (names starting with _ or . are skipped)")]
    Empty(String),
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
    /// HDFS refused or failed a request.
    #[error("{what} {path}: {source}")]
    Hdfs {
        what: &'static str,
        path: String,
        #[source]
        source: hdfs_native::HdfsError,
    },
    /// A commit to this output failed; nothing of it is visible there.
    #[error("committing {url} failed, nothing of it is visible there: {source}")]
    Commit {
        url: String,
        #[source]
        source: Box<StorageError>,
    },
    /// WebHDFS did not give a file's block locations.
    #[error("block locations of {path}: {why}")]
    Web { path: String, why: String },
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

    pub(crate) fn hdfs(what: &'static str, path: &str, source: hdfs_native::HdfsError) -> Self {
        StorageError::Hdfs {
            what,
            path: path.to_owned(),
            source,
        }
    }
}
