//! A Sluice job as a value: the [`JobRequest`] a user's flags become, and
//! the [`Registry`] that turns a request into a runnable job.
//!
//! The same request drives the local engine and the cluster. It crosses
//! process boundaries only in its documented encoding
//! ([`JobRequest::encode`]), never as command-line words, and every process
//! that runs a part of the job builds it from the request with the same
//! registry: the coordinator to validate it and learn its reducers, each
//! worker once per job for its tasks.
//!
//! A job kind is a name and a constructor ([`JobKind`]). Sluice's built-in
//! jobs are registered by [`Registry::builtin`]; a user's own job is one
//! more line:
//!
//! ```
//! use sluice_request::{JobRequest, Registry};
//! # fn my_job() -> sluice_api::JobSpec { sluice_jobs::wordcount(Default::default()) }
//! let mut jobs = Registry::builtin();
//! jobs.register_fn("my-job", "counts what I count", |_req: &JobRequest| Ok(my_job()));
//! assert!(jobs.get("my-job").is_ok());
//! ```

mod benchjobs;
mod builtin;
mod error;
mod iterative;
mod registry;
mod request;
mod stage_ref;

pub use benchjobs::{DfsioMode, DfsioParams, StreamingParams};
pub use builtin::{
    AggParams, GenParams, GrepParams, GroupByName, GroupingName, JoinForm, JoinParams, JoinStage,
    KeyOrderName, OhbParams, PagedInput, SelectionParams, SortParams, UdfParams, WordcountParams,
};
pub use error::RequestError;
pub use iterative::{KmeansInit, KmeansParams, KmeansStage, PagerankParams, PagerankStage};
pub use registry::{
    engine_config, settings, BuildContext, Built, JobKind, KeyRange, Plan, Registry, Sampling,
    DEFAULT_MEMORY,
};
pub use request::{
    BadRecords, EngineSettings, JobRequest, Key, CACHE_ADMIT_PROPERTY, OUTPUT_SYNC_PROPERTY,
    REQUEST_VERSION,
};
pub use stage_ref::StageRef;
