//! Data generation as a map-only job on synthetic input: map task `p`
//! writes part `p` of a [`GenSpec`] as its output file, byte for byte the
//! file the local generator writes. On a cluster this generates a data set
//! on the workers in parallel, each its share, as the seeds' benchmarks did.

use sluice_api::{JobSpec, MapContext, Mapper, Result};
use sluice_gen::{GenSpec, PartMaker};

/// The user counter group of the generator.
pub const COUNTER_GROUP: &str = "GEN";

/// The map-only job making the parts of `spec` (run it on
/// `synthetic:<spec.parts()>`).
pub fn generate(spec: &GenSpec) -> std::result::Result<JobSpec, crate::JobError> {
    let maker = spec.maker().map_err(crate::JobError::Parameters)?;
    Ok(JobSpec::new("gen", move || PartMapper {
        maker: maker.clone(),
    }))
}

struct PartMapper {
    maker: PartMaker,
}

impl Mapper for PartMapper {
    fn map(&mut self, _offset: u64, _record: &[u8], _ctx: &mut MapContext<'_>) -> Result<()> {
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut MapContext<'_>) -> Result<()> {
        let (bytes, records) = self.maker.part(ctx.task() as u64);
        ctx.counters().incr(COUNTER_GROUP, "RECORDS", records);
        ctx.counters()
            .incr(COUNTER_GROUP, "BYTES", bytes.len() as u64);
        ctx.emit_raw(&bytes)
    }
}
