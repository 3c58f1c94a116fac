use thiserror::Error;

/// Errors while collecting, spilling or merging map output.
#[derive(Debug, Error)]
pub enum SortError {
    /// Reading or writing a spill file failed.
    #[error(transparent)]
    Format(#[from] sluice_formats::FormatError),
    /// A combiner or reducer failed.
    #[error("user code failed: {0}")]
    User(#[from] sluice_api::Error),
    /// Writing job output failed.
    #[error("writing {}: {source}", path.display())]
    Output {
        /// The output file.
        path: std::path::PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A record does not fit the collector's 32-bit arena offsets.
    #[error("a map output record of {0} bytes does not fit the sort buffer (4 GiB at most)")]
    RecordTooLarge(usize),
}
