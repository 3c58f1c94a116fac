//! TeraSort: 100-byte records ordered by their 10-byte keys across part
//! files, with a sampled range partitioner, as Hadoop's TeraSort.

use sluice_api::{
    JobSpec, KeyOrder, MapContext, Mapper, RangePartitioner, ReduceContext, Reducer, Result, Values,
};

/// Bytes of a TeraSort key.
pub const KEY: usize = 10;

struct SplitRecord;

impl Mapper for SplitRecord {
    #[inline]
    fn map(&mut self, _offset: u64, rec: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        ctx.emit(&rec[..KEY.min(rec.len())], &rec[KEY.min(rec.len())..])
    }
}

/// Writes each record back whole, once per value.
#[derive(Default)]
struct WholeRecord {
    buf: Vec<u8>,
}

impl Reducer for WholeRecord {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        while let Some(v) = values.next_value() {
            self.buf.clear();
            self.buf.extend_from_slice(key);
            self.buf.extend_from_slice(v);
            ctx.write_raw(&self.buf)?;
        }
        Ok(())
    }
}

/// Sorts fixed-length records on their first 10 bytes; `sample` holds
/// sampled keys for `reducers - 1` split points.
pub fn terasort(sample: Vec<Vec<u8>>, reducers: u32) -> JobSpec {
    terasort_by(RangePartitioner::from_sample(sample, reducers))
}

/// TeraSort with split points already chosen.
pub fn terasort_by(partitioner: RangePartitioner) -> JobSpec {
    JobSpec::new("terasort", || SplitRecord)
        .reducer(WholeRecord::default)
        .partitioner(partitioner)
        .key_order(KeyOrder::Bytewise)
}
