//! Split points of a total-order job, from a sample of its input.

use sluice_engine::EngineConfig;
use sluice_formats::input::Split;
use sluice_request::{JobRequest, Key, Sampling};

use crate::error::DriverError;

/// Records sampled from the head of each split.
const SAMPLES_PER_SPLIT: usize = 100;

/// The `reducers - 1` split points of `req` from the first records of
/// each split of `input` (keys cut to the sampling's key length): the
/// request's input locally, the heads of its blocks on a cluster.
pub(crate) fn split_points(
    input: &str,
    s: Sampling,
    req: &JobRequest,
) -> Result<Vec<Key>, DriverError> {
    let mut cfg = sluice_request::settings(req);
    cfg.format = s.format;
    let splits = crate::splits::plan(input, &cfg)?;
    points(&splits, s, req, &cfg)
}

fn points(
    splits: &[Split],
    s: Sampling,
    req: &JobRequest,
    cfg: &EngineConfig,
) -> Result<Vec<Key>, DriverError> {
    let mut sample =
        sluice_engine::sample_records(splits, s.format, cfg.max_record, SAMPLES_PER_SPLIT)?;
    if let Some(n) = s.key_len {
        sample.iter_mut().for_each(|r| r.truncate(n));
    }
    let reducers = req.reducers.unwrap_or(cfg.reducers);
    let p = sluice_api::RangePartitioner::from_sample(sample, reducers);
    Ok(p.splits().iter().cloned().map(Key).collect())
}
