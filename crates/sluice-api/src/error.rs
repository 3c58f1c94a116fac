use thiserror::Error;

/// Errors user code returns to the engine.
#[derive(Debug, Error)]
pub enum Error {
    /// The record could not be understood. Under the skip policy the engine
    /// counts it in `bad_records` and writes it to a side file; under the fail
    /// policy the job fails naming the file and offset.
    #[error("malformed record: {0}")]
    BadRecord(String),
    /// Any other failure of user code; always fails the job.
    #[error("{0}")]
    User(String),
    /// The engine behind a [`crate::Sink`] failed (a full disk during a
    /// spill, say). The engine keeps the real error and reports it; user code
    /// only has to pass this one on with `?`.
    #[error("the engine aborted the task")]
    Aborted,
}

impl Error {
    /// Shorthand for [`Error::BadRecord`].
    pub fn bad_record(msg: impl Into<String>) -> Self {
        Error::BadRecord(msg.into())
    }

    /// Shorthand for [`Error::User`].
    pub fn user(msg: impl Into<String>) -> Self {
        Error::User(msg.into())
    }
}
