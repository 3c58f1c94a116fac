use std::path::PathBuf;

use thiserror::Error;

/// Why a job failed. Every variant names what a user needs to find the
/// cause: the file and offset, the flag, or the output path.
#[derive(Debug, Error)]
pub enum EngineError {
    /// Reading input or a spill file failed.
    #[error(transparent)]
    Format(#[from] sluice_formats::FormatError),
    /// Collecting, merging or combining failed.
    #[error(transparent)]
    Sort(#[from] sluice_sort::SortError),
    /// The output directory exists and `--overwrite` was not given.
    #[error("output directory {} already exists (pass --overwrite to replace it)", .0.display())]
    OutputExists(PathBuf),
    /// A file system call failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A mapper rejected a record and the policy is to fail.
    #[error("{}: malformed record at offset {offset}: {msg} (use --bad-records skip to skip and count such records)", path.display())]
    BadRecord {
        /// Input file.
        path: PathBuf,
        /// Offset of the record.
        offset: u64,
        /// The mapper's reason.
        msg: String,
    },
    /// User code failed.
    #[error("{phase} failed{}: {msg}", at.as_ref().map(|(p, o)| format!(" at {}:{o}", p.display())).unwrap_or_default())]
    User {
        /// "map", "combine", "reduce".
        phase: &'static str,
        /// Input file and offset, for map.
        at: Option<(PathBuf, u64)>,
        /// The error.
        msg: String,
    },
    /// A setting is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A map output record larger than a map thread's share of the memory
    /// budget: collecting it would break the budget's promise.
    #[error(
        "a map output record of {bytes} bytes does not fit a map thread's share of the memory \
         budget ({share} bytes of --memory {memory} bytes over {threads} threads); raise --memory \
         or lower --threads"
    )]
    RecordOverBudget {
        /// Key and value bytes of the record.
        bytes: u64,
        /// A map thread's share of the budget.
        share: u64,
        /// The budget.
        memory: u64,
        /// Map threads sharing it.
        threads: usize,
    },
    /// Another task failed first; this one stopped.
    #[error("cancelled")]
    Cancelled,
}

impl EngineError {
    pub(crate) fn io(op: &'static str, path: &std::path::Path, source: std::io::Error) -> Self {
        EngineError::Io {
            op,
            path: path.to_owned(),
            source,
        }
    }
}
