use regex::bytes::Regex;
use sluice_api::{JobSpec, MapContext, Mapper, Result};

struct GrepMapper {
    re: Regex,
}

impl Mapper for GrepMapper {
    #[inline]
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        if self.re.is_match(line) {
            ctx.emit_key(line)?;
        }
        Ok(())
    }
}

/// A map-only job writing every input line that matches `pattern`, in input
/// order (part files follow split order).
pub fn grep(pattern: &str) -> std::result::Result<JobSpec, regex::Error> {
    let re = Regex::new(pattern)?;
    Ok(JobSpec::new("grep", move || GrepMapper { re: re.clone() }))
}
