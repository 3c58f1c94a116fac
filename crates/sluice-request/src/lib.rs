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
//!
//! A kind maps the command line's job flags ([`JobFlags`]) to its own
//! parameters ([`JobKind::params_from_flags`]), so a new job and its flags
//! touch this crate alone; with the `clap` feature the flags are a
//! `clap::Args` and the parameters' choices ([`GroupingName`],
//! [`KmeansInit`], [`BadRecords`]…) `clap::ValueEnum`s, one definition for
//! the request and the command line.
//!
//! A job a kind plans as a chain ([`Plan::Chain`]) names an earlier
//! stage's output or counter by a [`StageRef`] (`@N`, `@N:GROUP.NAME`).
//!
//! # Layout
//!
//! - `request.rs`: [`JobRequest`] and its encoding; `error.rs`:
//!   [`RequestError`]; `stage_ref.rs`: [`StageRef`]; `choices.rs`: the
//!   enums of parameters; `flags.rs`: [`JobFlags`] (these five import no
//!   other module but `error.rs`, `choices.rs` and `request.rs`).
//! - `registry.rs`: [`JobKind`], [`Registry`], engine settings; it names
//!   no job.
//! - `builtin.rs`, `iterative.rs`, `benchjobs.rs`: the built-in kinds and
//!   their parameters, each importing `registry.rs`, never each other.
//! - `catalog.rs`: [`Registry::builtin`], the one module above the kinds.
//! - `columns.rs`: the built-in kinds' typed output columns (Parquet).

mod benchjobs;
mod builtin;
mod catalog;
mod choices;
mod columns;
mod error;
mod flags;
mod iterative;
mod registry;
mod request;
mod stage_ref;

pub use benchjobs::{DfsioMode, DfsioParams, StreamingParams};
pub use builtin::{
    AggParams, GenParams, GrepParams, JoinParams, JoinStage, OhbParams, SelectionParams,
    SortParams, UdfParams, WordcountParams,
};
pub use choices::{
    GroupByName, GroupingName, InputFormat, JoinForm, KeyOrderName, KmeansInit, OutputFormat,
    PagedInput, PairType,
};
pub use error::RequestError;
pub use flags::{parse_size, JobFlags};
pub use iterative::{KmeansParams, KmeansStage, PagerankParams, PagerankStage};
pub use registry::{
    engine_config, settings, BuildContext, Built, JobKind, KeyRange, Plan, Registry, Sampling,
    DEFAULT_MEMORY,
};
pub use request::{
    BadRecords, EngineSettings, JobRequest, Key, CACHE_ADMIT_PROPERTY, OUTPUT_SYNC_PROPERTY,
    REQUEST_VERSION,
};
/// The property naming the user a job runs for, which the coordinator
/// sets (`sluice_jobs::cell::JOB_USER`).
pub use sluice_jobs::cell::JOB_USER;
pub use stage_ref::StageRef;
