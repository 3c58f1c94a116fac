/// Why a request could not be decoded or made into a job.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The bytes do not start with the request magic.
    #[error("not a Sluice job request (no SLJR header)")]
    NotARequest,
    /// The request was encoded by a Sluice of another request version.
    #[error("job request version {found}; this Sluice reads version {reads}")]
    Version {
        /// The version in the header.
        found: u32,
        /// The version this build reads.
        reads: u32,
    },
    /// The body is not a well-formed request; names the field.
    #[error("malformed job request: {0}")]
    Malformed(String),
    /// No job of this name is registered in this binary.
    #[error("no job named {name:?} in this binary; its jobs are: {known}")]
    UnknownJob {
        /// The name asked for.
        name: String,
        /// The registered names, comma-separated.
        known: String,
    },
    /// The job's parameters do not fit its kind.
    #[error("{job}: {detail}")]
    Params {
        /// The job kind.
        job: String,
        /// What is wrong.
        detail: String,
    },
    /// A property Sluice reads has a value it does not take.
    #[error("-D {key}={value}: {key} is `true` or `false`")]
    Property {
        /// The property.
        key: String,
        /// The value given.
        value: String,
    },
    /// A command-line job flag has a value its job cannot use.
    #[error("{0}")]
    Flag(String),
    /// A text that should be a stage reference ([`crate::StageRef`]) is
    /// not one.
    #[error("{text} is not a stage reference: {why}")]
    StageRef {
        /// The text.
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// The job's constructor refused the request or could not read a
    /// side input.
    #[error("{job}: {source}")]
    Job {
        /// The job kind.
        job: String,
        /// The constructor's error.
        #[source]
        source: sluice_jobs::JobError,
    },
}

impl RequestError {
    /// A parameter error of job `job`.
    pub fn params(job: &str, detail: impl Into<String>) -> Self {
        RequestError::Params {
            job: job.to_owned(),
            detail: detail.into(),
        }
    }
}
