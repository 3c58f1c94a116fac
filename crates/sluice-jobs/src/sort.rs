use sluice_api::{
    JobSpec, KeyOrder, MapContext, Mapper, RangePartitioner, ReduceContext, Reducer, Result, Values,
};

struct LineMapper;

impl Mapper for LineMapper {
    #[inline]
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        ctx.emit_key(line)
    }
}

/// Writes the key once per value, so duplicate lines are kept.
struct RepeatKey;

impl Reducer for RepeatKey {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        while values.next_value().is_some() {
            ctx.write_key(key)?;
        }
        Ok(())
    }
}

/// Sorts lines bytewise. `sample` is a sample of input lines from which
/// `reducers - 1` split points are chosen, so part files taken in number
/// order form one total order.
pub fn sort(sample: Vec<Vec<u8>>, reducers: u32) -> JobSpec {
    sort_by(RangePartitioner::from_sample(sample, reducers))
}

/// Sorts lines bytewise with split points already chosen (a cluster's
/// client samples the data set before it submits the job).
pub fn sort_by(partitioner: RangePartitioner) -> JobSpec {
    JobSpec::new("sort", || LineMapper)
        .reducer(|| RepeatKey)
        .partitioner(partitioner)
        .key_order(KeyOrder::Bytewise)
}
