//! The jobs over the points once there are centres: the points in
//! binary, an iteration, the copy of the last centres, and the assignment
//! of each point to its nearest centre.

use std::io::Write;
use std::sync::Arc;

use sluice_api::{Error, JobSpec, MapContext, Mapper, ReduceContext, Reducer, Result, Values};

use super::counters::{COUNTER_GROUP, ITERATIONS, MOVED};
use super::model::{binary_point, distance2, point_of, write_centre, Centres};

/// The map-only job writing each point of `dims` coordinates in binary
/// (the module's format); a point of another dimension is a bad record.
pub fn kmeans_points(dims: usize) -> JobSpec {
    JobSpec::new("kmeans-points", move || PointsMapper {
        dims,
        point: Vec::new(),
        buf: Vec::with_capacity(8 * dims),
    })
}

struct PointsMapper {
    dims: usize,
    point: Vec<f64>,
    buf: Vec<u8>,
}

impl Mapper for PointsMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        point_of(line, self.dims, &mut self.point)?;
        self.buf.clear();
        for x in &self.point {
            self.buf.extend_from_slice(&x.to_le_bytes());
        }
        ctx.emit_raw(&self.buf)
    }
}

/// One iteration from `centres` (run it with one reducer) over text
/// points, or over binary points (records of `8 * dims` bytes) when
/// `binary`; a centre that moves `tolerance` or more counts in [`MOVED`].
pub fn kmeans_iterate(centres: Arc<Centres>, tolerance: f64, binary: bool) -> JobSpec {
    let c = centres.clone();
    JobSpec::new("kmeans-iterate", move || {
        let mut m = IterMapper::new(c.clone());
        m.binary = binary;
        m
    })
    .reducer(move || IterReducer {
        centres: centres.clone(),
        tolerance,
        partials: Vec::new(),
        next: 0,
        buf: Vec::new(),
    })
}

struct IterMapper {
    centres: Arc<Centres>,
    counts: Vec<u64>,
    sums: Vec<f64>,
    point: Vec<f64>,
    /// Records are binary points, not text.
    binary: bool,
}

impl IterMapper {
    fn new(centres: Arc<Centres>) -> Self {
        let (k, d) = (centres.points.len(), centres.dims);
        IterMapper {
            centres,
            counts: vec![0; k],
            sums: vec![0.0; k * d],
            point: Vec::new(),
            binary: false,
        }
    }
}

impl Mapper for IterMapper {
    fn setup(&mut self, _ctx: &mut MapContext<'_>) -> Result<()> {
        self.counts.fill(0);
        self.sums.fill(0.0);
        Ok(())
    }

    fn map(&mut self, _offset: u64, line: &[u8], _ctx: &mut MapContext<'_>) -> Result<()> {
        let d = self.centres.dims;
        if self.binary {
            binary_point(line, d, &mut self.point)?;
        } else {
            point_of(line, d, &mut self.point)?;
        }
        let c = self.centres.nearest(&self.point);
        self.counts[c] += 1;
        for (s, x) in self.sums[c * d..(c + 1) * d].iter_mut().zip(&self.point) {
            *s += x;
        }
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut MapContext<'_>) -> Result<()> {
        let d = self.centres.dims;
        let task = ctx.task() as u64;
        let mut value = Vec::with_capacity(PARTIAL_HEAD + 8 * d);
        for (c, &n) in self.counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            value.clear();
            value.extend_from_slice(&task.to_le_bytes());
            value.extend_from_slice(&n.to_le_bytes());
            for x in &self.sums[c * d..(c + 1) * d] {
                value.extend_from_slice(&x.to_le_bytes());
            }
            ctx.emit(&(c as u32).to_be_bytes(), &value)?;
        }
        Ok(())
    }
}

/// A partial sum's bytes before its coordinates: the map task's index and
/// the count of its points, each a little-endian `u64`.
const PARTIAL_HEAD: usize = 16;

struct IterReducer {
    centres: Arc<Centres>,
    tolerance: f64,
    /// A centre's partial sums, by map task (reused).
    partials: Vec<Vec<u8>>,
    /// The next centre index to write (centres no point chose are written
    /// as they were).
    next: usize,
    buf: Vec<u8>,
}

impl IterReducer {
    /// Writes the old centres before index `until` that no point chose.
    fn unchosen(&mut self, until: usize, ctx: &mut ReduceContext<'_>) -> Result<()> {
        while self.next < until {
            ctx.counters().incr(COUNTER_GROUP, "EMPTY", 1);
            if self.tolerance <= 0.0 {
                ctx.counters().incr(COUNTER_GROUP, MOVED, 1);
            }
            let old = &self.centres.points[self.next];
            write_centre(self.next, old, &mut self.buf);
            ctx.write_raw(&self.buf)?;
            ctx.write_raw(b"\n")?;
            self.next += 1;
        }
        Ok(())
    }
}

impl Reducer for IterReducer {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        let d = self.centres.dims;
        let c = key
            .try_into()
            .map(u32::from_be_bytes)
            .map_err(|_| Error::user("a k-means key is not 4 bytes"))? as usize;
        if c >= self.centres.points.len() {
            return Err(Error::user(format!("no centre {c}")));
        }
        self.unchosen(c, ctx)?;
        // The partial sums arrive in the order their maps finished, which
        // varies from run to run; adding them in map task order makes the
        // centres the same in every run, to the last bit.
        let mut used = 0;
        while let Some(v) = values.next_value() {
            if v.len() != PARTIAL_HEAD + 8 * d {
                return Err(Error::user("a k-means partial sum of the wrong size"));
            }
            if used == self.partials.len() {
                self.partials.push(Vec::new());
            }
            self.partials[used].clear();
            self.partials[used].extend_from_slice(v);
            used += 1;
        }
        let partials = &mut self.partials[..used];
        partials.sort_unstable_by_key(|v| u64::from_le_bytes(v[..8].try_into().expect("8 bytes")));
        let (mut n, mut sum) = (0u64, vec![0.0; d]);
        for v in partials.iter() {
            n += u64::from_le_bytes(v[8..16].try_into().expect("8 bytes"));
            for (s, x) in sum.iter_mut().zip(v[PARTIAL_HEAD..].chunks_exact(8)) {
                *s += f64::from_le_bytes(x.try_into().expect("8 bytes"));
            }
        }
        let centre: Vec<f64> = sum.iter().map(|s| s / n as f64).collect();
        ctx.counters().incr(COUNTER_GROUP, "POINTS", n);
        if distance2(&centre, &self.centres.points[c]) >= self.tolerance * self.tolerance {
            ctx.counters().incr(COUNTER_GROUP, MOVED, 1);
        }
        write_centre(c, &centre, &mut self.buf);
        ctx.write_raw(&self.buf)?;
        ctx.write_raw(b"\n")?;
        self.next = c + 1;
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut ReduceContext<'_>) -> Result<()> {
        ctx.counters().incr(COUNTER_GROUP, ITERATIONS, 1);
        self.unchosen(self.centres.points.len(), ctx)
    }
}

/// The map-only job writing its input lines as they are (centres).
pub fn kmeans_copy() -> JobSpec {
    JobSpec::new("kmeans-copy", || CopyMapper { buf: Vec::new() })
}

struct CopyMapper {
    buf: Vec<u8>,
}

impl Mapper for CopyMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        self.buf.clear();
        self.buf.extend_from_slice(line);
        self.buf.push(b'\n');
        ctx.emit_raw(&self.buf)
    }
}

/// The map-only job writing each point with its nearest centre's index:
/// `point TAB index`.
pub fn kmeans_assign(centres: Arc<Centres>) -> JobSpec {
    JobSpec::new("kmeans-assign", move || AssignMapper {
        centres: centres.clone(),
        point: Vec::new(),
        buf: Vec::new(),
    })
}

struct AssignMapper {
    centres: Arc<Centres>,
    point: Vec<f64>,
    buf: Vec<u8>,
}

impl Mapper for AssignMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        point_of(line, self.centres.dims, &mut self.point)?;
        let c = self.centres.nearest(&self.point);
        self.buf.clear();
        let _ = write!(self.buf, "{c}");
        ctx.emit(line, &self.buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::Pairs;

    /// Values handed in a given order.
    struct Given(Vec<Vec<u8>>, usize);

    impl Values for Given {
        fn next_value(&mut self) -> Option<&[u8]> {
            let i = self.1;
            self.1 += 1;
            self.0.get(i).map(|v| &v[..])
        }
    }

    /// The new centres are the same whatever order the maps' partial sums
    /// arrive in: they are added in map task order. Here the order matters
    /// to the last bit (1e16 + 1 + 1 is 1e16, 1 + 1 + 1e16 is not).
    #[test]
    fn an_iteration_adds_partial_sums_in_map_task_order() {
        use sluice_api::Counters;
        let centres = Arc::new(Centres {
            dims: 1,
            points: vec![vec![0.0]],
        });
        let job = kmeans_iterate(centres, 0.0, false);
        let mut counters = Counters::default();
        let mut partials = Vec::new();
        for (task, x) in [(0, b"1e16"), (1, b"1.00"), (2, b"1.00")] {
            let mut out = Pairs(Vec::new());
            let mut m = (job.mapper)();
            let mut ctx = MapContext::new(&mut out, &mut counters).for_task(task);
            m.setup(&mut ctx).unwrap();
            m.map(0, x, &mut ctx).unwrap();
            m.cleanup(&mut ctx).unwrap();
            partials.push(out.0.pop().unwrap().1);
        }
        let mut reduce = |order: Vec<Vec<u8>>| {
            let mut out = Pairs(Vec::new());
            let mut r = (job.reducer.as_ref().unwrap())();
            let mut ctx = ReduceContext::new(&mut out, &mut counters);
            r.reduce(&0u32.to_be_bytes(), &mut Given(order, 0), &mut ctx)
                .unwrap();
            out.0
                .into_iter()
                .map(|(k, _)| k)
                .collect::<Vec<_>>()
                .concat()
        };
        let forward = reduce(partials.clone());
        partials.reverse();
        let backward = reduce(partials);
        assert_eq!(
            String::from_utf8_lossy(&forward),
            String::from_utf8_lossy(&backward)
        );
        let (in_order, reversed) = ((1e16 + 1.0 + 1.0) / 3.0, (1.0 + 1.0 + 1e16) / 3.0);
        assert_ne!(in_order, reversed, "the order matters here");
        assert_eq!(forward, format!("0\t{in_order}\n").into_bytes());
    }
}
