//! The indexer job: sorts a delimited data set on one field, for
//! [`sluice_formats::index`] to cut into chunks.

use sluice_api::{
    Error, JobSpec, KeyOrder, MapContext, Mapper, RangePartitioner, ReduceContext, Reducer, Result,
    Values,
};
use sluice_formats::delimited::Decoder;
use sluice_formats::index::KeyType;

struct KeyMapper {
    dec: Decoder,
    field: usize,
    key_type: KeyType,
}

/// The normalized key of a line, or why it has none.
pub fn line_key(
    dec: &mut Decoder,
    line: &[u8],
    field: usize,
    key_type: KeyType,
) -> Result<Vec<u8>> {
    let f = dec.decode(line);
    let raw = f.get(field).map_err(|e| Error::bad_record(e.to_string()))?;
    key_type
        .normalize(raw)
        .ok_or_else(|| Error::bad_record(format!("field {field} is not an integer key")))
}

impl Mapper for KeyMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        let key = line_key(&mut self.dec, line, self.field, self.key_type)?;
        ctx.emit(&key, line)
    }
}

/// Writes each record (the value) in key order.
struct Records;

impl Reducer for Records {
    fn reduce(
        &mut self,
        _key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        while let Some(line) = values.next_value() {
            ctx.write_key(line)?;
        }
        Ok(())
    }
}

/// Sorts records on field `field` (normalized by `key_type`) into a total
/// order across part files; `sample` holds sampled normalized keys for the
/// range partitioner.
pub fn index_sort(
    field: usize,
    key_type: KeyType,
    delimiter: u8,
    sample: Vec<Vec<u8>>,
    reducers: u32,
) -> JobSpec {
    JobSpec::new("index", move || KeyMapper {
        dec: Decoder::new(delimiter),
        field,
        key_type,
    })
    .reducer(|| Records)
    .partitioner(RangePartitioner::from_sample(sample, reducers))
    .key_order(KeyOrder::Bytewise)
}
