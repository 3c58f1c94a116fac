//! The init job: `k` initial centres chosen by a seeded hash of the
//! points' text.

use std::collections::BTreeSet;

use sluice_api::{Error, JobSpec, MapContext, Mapper, ReduceContext, Reducer, Result, Values};

use super::counters::{COUNTER_GROUP, DIMS};
use super::model::{parse_point, pick_hash, write_centre};

/// The job choosing `k` initial centres (run it with one reducer).
pub fn kmeans_init(k: usize, seed: u64) -> JobSpec {
    JobSpec::new("kmeans-init", move || InitMapper {
        k,
        seed,
        best: Vec::new(),
        point: Vec::new(),
    })
    .reducer(move || InitReducer {
        k,
        candidates: Vec::new(),
        counts: Vec::new(),
        buf: Vec::new(),
        point: Vec::new(),
    })
}

/// Most dimensions a map task of the init keeps candidates for; a new
/// one past them replaces the one with the fewest points.
const INIT_DIMS: usize = 8;

/// Tags of the init's map output values: a candidate point's line, or a
/// count of a task's points of one dimension (`dims u64 BE, count u64 BE`)
/// under the key [`COUNT_KEY`] followed by the dimension.
const POINT: u8 = b'P';
const COUNT: u8 = b'C';
const COUNT_KEY: [u8; 8] = [0xff; 8];

/// The points of one dimension a map task of the init has seen: how many,
/// and the `k` of smallest hash.
struct DimsCandidates {
    dims: usize,
    count: u64,
    best: BTreeSet<(u64, Vec<u8>)>,
}

struct InitMapper {
    k: usize,
    seed: u64,
    /// Per dimension, the task's `k` smallest (hash, point) so far.
    best: Vec<DimsCandidates>,
    point: Vec<f64>,
}

impl InitMapper {
    /// The candidates of `dims`, made room for if new.
    fn of_dims(&mut self, dims: usize) -> &mut DimsCandidates {
        let at = match self.best.iter().position(|c| c.dims == dims) {
            Some(at) => at,
            None => {
                if self.best.len() == INIT_DIMS {
                    let fewest = (0..self.best.len())
                        .min_by_key(|&i| self.best[i].count)
                        .unwrap_or(0);
                    self.best.swap_remove(fewest);
                }
                self.best.push(DimsCandidates {
                    dims,
                    count: 0,
                    best: BTreeSet::new(),
                });
                self.best.len() - 1
            }
        };
        &mut self.best[at]
    }
}

impl Mapper for InitMapper {
    fn setup(&mut self, _ctx: &mut MapContext<'_>) -> Result<()> {
        self.best.clear();
        Ok(())
    }

    fn map(&mut self, _offset: u64, line: &[u8], _ctx: &mut MapContext<'_>) -> Result<()> {
        parse_point(line, &mut self.point).map_err(Error::bad_record)?;
        let h = pick_hash(self.seed, line);
        let k = self.k;
        let c = self.of_dims(self.point.len());
        c.count += 1;
        if c.best.len() < k || c.best.last().is_some_and(|(b, _)| h < *b) {
            c.best.insert((h, line.to_vec()));
            if c.best.len() > k {
                c.best.pop_last();
            }
        }
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut MapContext<'_>) -> Result<()> {
        let (mut key, mut value) = (Vec::new(), Vec::new());
        for c in std::mem::take(&mut self.best) {
            key.clear();
            key.extend_from_slice(&COUNT_KEY);
            key.extend_from_slice(&(c.dims as u64).to_be_bytes());
            value.clear();
            value.push(COUNT);
            value.extend_from_slice(&(c.dims as u64).to_be_bytes());
            value.extend_from_slice(&c.count.to_be_bytes());
            ctx.emit(&key, &value)?;
            for (h, line) in c.best {
                key.clear();
                key.extend_from_slice(&h.to_be_bytes());
                key.extend_from_slice(&line);
                value.clear();
                value.push(POINT);
                value.extend_from_slice(&line);
                ctx.emit(&key, &value)?;
            }
        }
        Ok(())
    }
}

/// Takes the candidates in hash order and writes the first `k` of the
/// dimension most points of the input have (the map tasks count them).
/// A point of another dimension is malformed input, but not the init's
/// to report: the first iteration reads every point and fails naming its
/// file and offset, or skips and counts it under `--bad-records skip`.
/// Picking it as a centre instead failed the job with a message about
/// centres, whatever the policy.
struct InitReducer {
    k: usize,
    /// Every distinct candidate point, in hash order.
    candidates: Vec<Vec<f64>>,
    /// Points of the input per dimension.
    counts: Vec<(usize, u64)>,
    buf: Vec<u8>,
    point: Vec<f64>,
}

impl InitReducer {
    fn count(&mut self, v: &[u8]) -> Result<()> {
        let bad = || Error::user("a malformed count from a k-means init map task");
        let dims = v.get(..8).ok_or_else(bad)?;
        let n = v.get(8..16).ok_or_else(bad)?;
        let dims = u64::from_be_bytes(dims.try_into().map_err(|_| bad())?) as usize;
        let n = u64::from_be_bytes(n.try_into().map_err(|_| bad())?);
        match self.counts.iter_mut().find(|(d, _)| *d == dims) {
            Some((_, c)) => *c += n,
            None => self.counts.push((dims, n)),
        }
        Ok(())
    }
}

impl Reducer for InitReducer {
    fn reduce(
        &mut self,
        _key: &[u8],
        values: &mut dyn Values,
        _ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        // Keys are (hash, point): equal points arrive as one group, of
        // which one is a candidate.
        let mut point = false;
        while let Some(v) = values.next_value() {
            match v.split_first() {
                Some((&COUNT, rest)) => self.count(rest)?,
                Some((&POINT, line)) if !point => {
                    point = true;
                    parse_point(line, &mut self.point).map_err(Error::user)?;
                    self.candidates.push(self.point.clone());
                }
                Some((&POINT, _)) => {}
                _ => return Err(Error::user("a malformed k-means init record")),
            }
        }
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut ReduceContext<'_>) -> Result<()> {
        let dims = majority(&self.counts);
        let mut written = 0;
        for p in self
            .candidates
            .iter()
            .filter(|p| p.len() == dims)
            .take(self.k)
        {
            write_centre(written, p, &mut self.buf);
            ctx.write_raw(&self.buf)?;
            ctx.write_raw(b"\n")?;
            written += 1;
        }
        if written < self.k {
            return Err(Error::user(format!(
                "k-means needs {} distinct points for its initial centres; the input has {written}",
                self.k
            )));
        }
        ctx.counters().incr(COUNTER_GROUP, DIMS, dims as u64);
        Ok(())
    }
}

/// The dimension with the most points (on a tie, the smallest).
fn majority(counts: &[(usize, u64)]) -> usize {
    counts
        .iter()
        .max_by_key(|&&(d, n)| (n, std::cmp::Reverse(d)))
        .map_or(0, |&(d, _)| d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_init_keeps_candidates_for_the_commonest_dimensions() {
        assert_eq!(majority(&[(3, 10), (2, 1), (4, 10)]), 3, "ties: smaller");
        assert_eq!(majority(&[(2, 1), (5, 7)]), 5);
        assert_eq!(majority(&[]), 0);
        let mut m = InitMapper {
            k: 2,
            seed: 1,
            best: Vec::new(),
            point: Vec::new(),
        };
        for _ in 0..3 {
            m.of_dims(4).count += 1;
        }
        for d in 10..10 + INIT_DIMS {
            m.of_dims(d).count += 1;
        }
        assert_eq!(m.best.len(), INIT_DIMS);
        assert!(m.best.iter().any(|c| c.dims == 4 && c.count == 3));
    }
}
