//! The splits of an input, planned as the engine plans them.

use sluice_engine::EngineConfig;
use sluice_formats::input::{self, Split};

use crate::error::DriverError;

/// Splits of an input, planned as the engine does.
pub fn plan(input: &str, cfg: &EngineConfig) -> Result<Vec<Split>, DriverError> {
    if let Some(n) = input::synthetic_count(input)? {
        return Ok((0..n).map(Split::synthetic).collect());
    }
    let files = if sluice_storage::is_remote(input) {
        sluice_storage::resolve(input)?
    } else {
        input::resolve(input)?
    };
    let total = input::total_len(&files);
    Ok(input::plan_splits(
        &files,
        cfg.split_size_for(total),
        cfg.format,
    ))
}
