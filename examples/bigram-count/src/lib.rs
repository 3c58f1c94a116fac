//! A user's own job, written against the public API: count each pair of
//! adjacent words in a line (`"first second"<TAB>count`).
//!
//! The job reads one user property, `bigram.min_count` (`-D
//! bigram.min_count=N`): bigrams seen fewer times are left out. On a
//! cluster it reaches every worker inside the job's request.
//!
//! The mapper reuses one key buffer, so it allocates nothing per record;
//! counts are combined at emit time with the stock `SumU64` aggregator, and
//! a user counter records how many lines were too short to have a bigram.

use sluice_request::{JobRequest, RequestError};

use sluice_api::{JobSpec, MapContext, Mapper, ReduceContext, Reducer, Result, SumU64, Values};

/// Emits `(w1 w2, 1)` for each pair of adjacent words.
#[derive(Debug, Default)]
pub struct BigramMapper {
    key: Vec<u8>,
}

impl Mapper for BigramMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        let mut words = line
            .split(|b| b.is_ascii_whitespace())
            .filter(|w| !w.is_empty());
        let Some(mut prev) = words.next() else {
            ctx.counters().incr("bigram", "short_lines", 1);
            return Ok(());
        };
        let mut any = false;
        for w in words {
            self.key.clear();
            self.key.extend_from_slice(prev);
            self.key.push(b' ');
            self.key.extend_from_slice(w);
            ctx.emit(&self.key, &SumU64::encode(1))?;
            prev = w;
            any = true;
        }
        if !any {
            ctx.counters().incr("bigram", "short_lines", 1);
        }
        Ok(())
    }
}

/// Writes the decimal total of a bigram's counts, when it is at least
/// `min`.
#[derive(Default)]
pub struct TotalReducer {
    buf: itoa::Buffer,
    min: u64,
}

impl Reducer for TotalReducer {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        let mut n = 0;
        while let Some(v) = values.next_value() {
            n += SumU64::decode(v).unwrap_or(0);
        }
        if n < self.min {
            return Ok(());
        }
        ctx.write(key, self.buf.format(n).as_bytes())
    }
}

/// The job, leaving out bigrams seen fewer than `min_count` times.
pub fn bigram_job(min_count: u64) -> JobSpec {
    JobSpec::new("bigram-count", BigramMapper::default)
        .reducer(move || TotalReducer {
            min: min_count,
            ..TotalReducer::default()
        })
        .aggregator(SumU64)
}

/// The job a request asks for: its `bigram.min_count` property (default 1).
pub fn from_request(req: &JobRequest) -> std::result::Result<JobSpec, RequestError> {
    let min = match req.property("bigram.min_count") {
        None => 1,
        Some(v) => v.parse().map_err(|_| {
            RequestError::params(
                "bigram-count",
                format!("bigram.min_count={v:?} is not a count"),
            )
        })?,
    };
    Ok(bigram_job(min))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_engine::{run_job, EngineConfig, Progress};

    #[test]
    fn counts_bigrams_and_short_lines() {
        let d = tempfile::tempdir().unwrap();
        let input = d.path().join("in.txt");
        std::fs::write(&input, "a b a b\nsolo\n\nb a\n").unwrap();
        let out = d.path().join("out");
        let cfg = EngineConfig {
            threads: 2,
            reducers: 1,
            ..EngineConfig::default()
        };
        let r = run_job(
            &bigram_job(1),
            input.to_str().unwrap(),
            &out,
            &cfg,
            &Progress::default(),
        )
        .unwrap();
        let text = std::fs::read_to_string(out.join("part-r-00000")).unwrap();
        assert_eq!(text, "a b\t2\nb a\t2\n");
        assert_eq!(r.user_counters["bigram.short_lines"], 2);
    }
}
