//! k-means||: rounds sampling candidates by their distance, then the
//! pass weighing them, whose reducer picks `k` by a local weighted
//! k-means++ and Lloyd's iterations.

use std::sync::Arc;

use sluice_api::{Error, JobSpec, MapContext, Mapper, ReduceContext, Reducer, Result, Values};

use super::counters::COUNTER_GROUP;
use super::model::{distance2, parse_point, pick_hash, point_of, write_centre, Centres};

/// A uniform number in [0, 1) from a seeded hash of a round and a point's
/// text: the same for a point wherever the input is split.
fn uniform(seed: u64, round: u32, point: &[u8]) -> f64 {
    let h = pick_hash(seed ^ (u64::from(round) << 32 | 0x6b6d_7c7c), point);
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Keys of a k-means|| round: the tasks' costs sort before the candidates.
const COST_KEY: u8 = 0;
const CANDIDATE_KEY: u8 = 1;

/// One round of k-means|| from `candidates` (run it with one reducer):
/// writes the candidates, then the points sampled with probability
/// `oversampling * d^2 / cost`, numbered on.
///
/// One pass: a point is sampled when `u * cost < l * d^2` (`u` uniform
/// from the point's seeded hash); a task's own cost is at most the total,
/// so a task keeps the points with `u * (its cost so far) < l * d^2`, a
/// superset, and emits them with its cost; the reducer sums the costs
/// and keeps the sampled ones. The expected points a task keeps are at
/// most `l`.
pub fn kmeans_parallel_round(
    candidates: Arc<Centres>,
    oversampling: f64,
    seed: u64,
    round: u32,
) -> JobSpec {
    let c = candidates.clone();
    JobSpec::new("kmeans-parallel-round", move || RoundMapper {
        candidates: c.clone(),
        oversampling,
        seed,
        round,
        cost: 0.0,
        kept: Vec::new(),
        limit: 0,
        point: Vec::new(),
    })
    .reducer(move || RoundReducer {
        candidates: candidates.clone(),
        oversampling,
        cost: None,
        next: 0,
        buf: Vec::new(),
        point: Vec::new(),
    })
}

struct RoundMapper {
    candidates: Arc<Centres>,
    oversampling: f64,
    seed: u64,
    round: u32,
    /// The task's cost so far.
    cost: f64,
    /// (u, d^2, point text) that may be sampled.
    kept: Vec<(f64, f64, Vec<u8>)>,
    /// How many kept points call for a prune.
    limit: usize,
    point: Vec<f64>,
}

impl RoundMapper {
    fn prune(&mut self) {
        let (cost, l) = (self.cost, self.oversampling);
        self.kept.retain(|(u, d2, _)| u * cost < l * d2);
        // Prune again once the points kept have doubled.
        self.limit = self.limit.max(2 * self.kept.len());
    }
}

impl Mapper for RoundMapper {
    fn setup(&mut self, _ctx: &mut MapContext<'_>) -> Result<()> {
        self.cost = 0.0;
        self.kept.clear();
        self.limit = 64 + 4 * self.oversampling as usize;
        Ok(())
    }

    fn map(&mut self, _offset: u64, line: &[u8], _ctx: &mut MapContext<'_>) -> Result<()> {
        point_of(line, self.candidates.dims, &mut self.point)?;
        let (_, d2) = self.candidates.nearest_with_distance(&self.point);
        self.cost += d2;
        let u = uniform(self.seed, self.round, line);
        if u * self.cost < self.oversampling * d2 {
            self.kept.push((u, d2, line.to_vec()));
            if self.kept.len() >= self.limit {
                self.prune();
            }
        }
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut MapContext<'_>) -> Result<()> {
        self.prune();
        ctx.emit(&[COST_KEY], &self.cost.to_le_bytes())?;
        let (mut key, mut value) = (Vec::new(), Vec::new());
        for (u, d2, line) in std::mem::take(&mut self.kept) {
            key.clear();
            key.push(CANDIDATE_KEY);
            key.extend_from_slice(&line);
            value.clear();
            value.extend_from_slice(&u.to_le_bytes());
            value.extend_from_slice(&d2.to_le_bytes());
            ctx.emit(&key, &value)?;
        }
        Ok(())
    }
}

struct RoundReducer {
    candidates: Arc<Centres>,
    oversampling: f64,
    /// The total cost, once the tasks' costs are in.
    cost: Option<f64>,
    next: usize,
    buf: Vec<u8>,
    point: Vec<f64>,
}

fn f64_at(v: &[u8], at: usize) -> Result<f64> {
    v.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(f64::from_le_bytes)
        .ok_or_else(|| Error::user("a k-means|| value of the wrong size"))
}

impl Reducer for RoundReducer {
    fn setup(&mut self, ctx: &mut ReduceContext<'_>) -> Result<()> {
        for (i, p) in self.candidates.points.iter().enumerate() {
            write_centre(i, p, &mut self.buf);
            ctx.write_raw(&self.buf)?;
            ctx.write_raw(b"\n")?;
        }
        self.next = self.candidates.points.len();
        Ok(())
    }

    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        match key.split_first() {
            Some((&COST_KEY, [])) => {
                let mut cost = 0.0;
                while let Some(v) = values.next_value() {
                    cost += f64_at(v, 0)?;
                }
                self.cost = Some(cost);
            }
            Some((&CANDIDATE_KEY, line)) => {
                let cost = self
                    .cost
                    .ok_or_else(|| Error::user("k-means|| candidates before the cost"))?;
                // Equal points are one group; one value speaks for them.
                let Some(v) = values.next_value() else {
                    return Ok(());
                };
                let (u, d2) = (f64_at(v, 0)?, f64_at(v, 8)?);
                if u * cost < self.oversampling * d2 {
                    parse_point(line, &mut self.point).map_err(Error::user)?;
                    write_centre(self.next, &self.point, &mut self.buf);
                    ctx.write_raw(&self.buf)?;
                    ctx.write_raw(b"\n")?;
                    ctx.counters().incr(COUNTER_GROUP, "SAMPLED", 1);
                    self.next += 1;
                }
            }
            _ => return Err(Error::user("a k-means|| key of no known kind")),
        }
        Ok(())
    }
}

/// The last pass of k-means|| (run it with one reducer): each candidate
/// weighed by the points nearest to it, then `k` centres picked from the
/// weighted candidates by k-means++ and refined by Lloyd's iterations (at
/// most 30), as Spark's `LocalKMeans`, from `seed`.
pub fn kmeans_parallel_pick(candidates: Arc<Centres>, k: usize, seed: u64) -> JobSpec {
    let c = candidates.clone();
    JobSpec::new("kmeans-parallel-pick", move || WeighMapper {
        counts: vec![0; c.points.len()],
        candidates: c.clone(),
        point: Vec::new(),
    })
    .reducer(move || PickReducer {
        weights: vec![0; candidates.points.len()],
        candidates: candidates.clone(),
        k,
        seed,
        buf: Vec::new(),
    })
}

struct WeighMapper {
    candidates: Arc<Centres>,
    counts: Vec<u64>,
    point: Vec<f64>,
}

impl Mapper for WeighMapper {
    fn setup(&mut self, _ctx: &mut MapContext<'_>) -> Result<()> {
        self.counts.fill(0);
        Ok(())
    }

    fn map(&mut self, _offset: u64, line: &[u8], _ctx: &mut MapContext<'_>) -> Result<()> {
        point_of(line, self.candidates.dims, &mut self.point)?;
        self.counts[self.candidates.nearest(&self.point)] += 1;
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut MapContext<'_>) -> Result<()> {
        for (c, &n) in self.counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            ctx.emit(&(c as u32).to_be_bytes(), &n.to_le_bytes())?;
        }
        Ok(())
    }
}

struct PickReducer {
    candidates: Arc<Centres>,
    weights: Vec<u64>,
    k: usize,
    seed: u64,
    buf: Vec<u8>,
}

impl Reducer for PickReducer {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        _ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        let c = key
            .try_into()
            .map(u32::from_be_bytes)
            .map_err(|_| Error::user("a k-means|| key is not 4 bytes"))? as usize;
        let w = self
            .weights
            .get_mut(c)
            .ok_or_else(|| Error::user(format!("no candidate {c}")))?;
        while let Some(v) = values.next_value() {
            *w += v
                .try_into()
                .map(u64::from_le_bytes)
                .map_err(|_| Error::user("a k-means|| weight is not 8 bytes"))?;
        }
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut ReduceContext<'_>) -> Result<()> {
        let (points, weights): (Vec<&[f64]>, Vec<f64>) = self
            .candidates
            .points
            .iter()
            .zip(&self.weights)
            .filter(|(_, &w)| w > 0)
            .map(|(p, &w)| (p.as_slice(), w as f64))
            .unzip();
        if points.len() < self.k {
            return Err(Error::user(format!(
                "k-means|| found {} candidates with points for {} centres; \
                 the input has too few distinct points (or use --init random)",
                points.len(),
                self.k
            )));
        }
        let centres = local_kmeans(&points, &weights, self.k, self.seed, 30);
        for (i, p) in centres.iter().enumerate() {
            write_centre(i, p, &mut self.buf);
            ctx.write_raw(&self.buf)?;
            ctx.write_raw(b"\n")?;
        }
        Ok(())
    }
}

/// SplitMix64: the seeded generator of the local k-means++.
struct SplitMix(u64);

impl SplitMix {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The index where the running sum of `weights` first reaches `r` (the
/// last positive one if rounding leaves it short).
fn pick_weighted(weights: impl Iterator<Item = f64>, r: f64) -> Option<usize> {
    let mut sum = 0.0;
    let mut last = None;
    for (i, w) in weights.enumerate() {
        if w > 0.0 {
            sum += w;
            last = Some(i);
            if sum >= r {
                return last;
            }
        }
    }
    last
}

/// `k` centres of weighted points by k-means++ (the first by weight, each
/// next by weight times squared distance to the nearest chosen), then
/// Lloyd's iterations on the weighted points until no point changes its
/// centre or `iterations` have run (Spark's `LocalKMeans`).
/// `points.len() >= k`.
fn local_kmeans(
    points: &[&[f64]],
    weights: &[f64],
    k: usize,
    seed: u64,
    iterations: usize,
) -> Vec<Vec<f64>> {
    let mut rng = SplitMix(seed ^ 0x4c6f_6361_6c4b_4d2b);
    let total: f64 = weights.iter().sum();
    let first = pick_weighted(weights.iter().copied(), rng.next_f64() * total).unwrap_or(0);
    let mut centres = vec![points[first].to_vec()];
    let mut cost: Vec<f64> = points.iter().map(|p| distance2(p, &centres[0])).collect();
    while centres.len() < k {
        let wc = || weights.iter().zip(&cost).map(|(w, c)| w * c);
        let sum: f64 = wc().sum();
        let next = if sum > 0.0 {
            pick_weighted(wc(), rng.next_f64() * sum)
        } else {
            None
        };
        // All remaining points sit on chosen centres: take the first
        // point not chosen yet.
        let next = next.unwrap_or_else(|| {
            (0..points.len())
                .find(|&i| !centres.iter().any(|c| c.as_slice() == points[i]))
                .unwrap_or(0)
        });
        let c = points[next].to_vec();
        for (pc, p) in cost.iter_mut().zip(points) {
            *pc = pc.min(distance2(p, &c));
        }
        centres.push(c);
    }
    let dims = centres[0].len();
    let mut assigned = vec![usize::MAX; points.len()];
    for _ in 0..iterations {
        let set = Centres {
            dims,
            points: centres.clone(),
        };
        let mut changed = false;
        let mut sums = vec![0.0; k * dims];
        let mut counts = vec![0.0; k];
        for (i, p) in points.iter().enumerate() {
            let c = set.nearest(p);
            changed |= assigned[i] != c;
            assigned[i] = c;
            counts[c] += weights[i];
            for (s, x) in sums[c * dims..(c + 1) * dims].iter_mut().zip(p.iter()) {
                *s += weights[i] * x;
            }
        }
        if !changed {
            break;
        }
        for (c, centre) in centres.iter_mut().enumerate() {
            if counts[c] > 0.0 {
                for (x, s) in centre.iter_mut().zip(&sums[c * dims..(c + 1) * dims]) {
                    *x = s / counts[c];
                }
            }
        }
    }
    centres
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_kmeans_picks_one_centre_per_weighted_group() {
        // Three far-apart groups of candidates; heavy weights on one
        // point of each.
        let pts: Vec<Vec<f64>> = vec![
            vec![0.0, 0.0],
            vec![0.5, 0.0],
            vec![50.0, 50.0],
            vec![50.5, 50.0],
            vec![-50.0, 50.0],
            vec![-50.0, 50.5],
        ];
        let refs: Vec<&[f64]> = pts.iter().map(Vec::as_slice).collect();
        let weights = [10.0, 1.0, 10.0, 1.0, 10.0, 1.0];
        for seed in 0..20 {
            let got = local_kmeans(&refs, &weights, 3, seed, 30);
            let mut near: Vec<usize> = got
                .iter()
                .map(|c| {
                    [0, 2, 4]
                        .into_iter()
                        .find(|&g| distance2(c, &pts[g]) < 1.0)
                        .unwrap()
                })
                .collect();
            near.sort_unstable();
            assert_eq!(near, [0, 2, 4], "seed {seed}: {got:?}");
            // Lloyd's moved each to its group's weighted mean.
            assert!(got.iter().any(|c| (c[0] - 0.5 / 11.0).abs() < 1e-12));
            assert_eq!(got, local_kmeans(&refs, &weights, 3, seed, 30));
        }
    }
}
