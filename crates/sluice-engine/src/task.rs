//! What map and reduce tasks share: sinks that keep their own errors, and
//! turning user errors into engine errors.

use std::path::PathBuf;

use sluice_api::{Error as ApiError, Sink};
use sluice_sort::{ErrorSink, SortError};

use crate::output::TextOutput;
use crate::EngineError;

/// A sink whose failures are engine errors kept until asked for.
pub trait TaskSink: Sink {
    /// The kept error, if a write failed.
    fn take_engine_error(&mut self) -> Option<EngineError>;
}

impl TaskSink for TextOutput {
    fn take_engine_error(&mut self) -> Option<EngineError> {
        self.take_error().map(EngineError::Sort)
    }
}

/// The engine error for a failed user call: the sink's own error if it kept
/// one (user code saw `Aborted`), else the user's error in `phase` at `at`.
pub fn user_error(
    sink: &mut dyn TaskSink,
    e: ApiError,
    phase: &'static str,
    at: Option<(PathBuf, u64)>,
) -> EngineError {
    if let Some(kept) = sink.take_engine_error() {
        return kept;
    }
    EngineError::User {
        phase,
        at,
        msg: e.to_string(),
    }
}

/// Maps a sort-crate error from a reduce or combine step to an engine error,
/// naming user failures by phase.
pub fn sort_error(e: SortError, phase: &'static str) -> EngineError {
    match e {
        SortError::User(u) => EngineError::User {
            phase,
            at: None,
            msg: u.to_string(),
        },
        other => EngineError::Sort(other),
    }
}
