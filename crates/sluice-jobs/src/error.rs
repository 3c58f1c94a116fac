/// Why a built-in job could not be made from its parameters and inputs.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// A side table (Rankings, the week's visits) could not be read; names
    /// the file and offset.
    #[error(transparent)]
    Format(#[from] sluice_formats::FormatError),
    /// The job's parameters cannot make a job.
    #[error("invalid job parameters: {0}")]
    Parameters(String),
    /// The user Streaming commands are to run as cannot be.
    #[error("task user {name}: {msg}")]
    TaskUser { name: String, msg: String },
}
