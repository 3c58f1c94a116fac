//! Grep and selection: map-only scans.

use sluice_api::{ColumnarMap, JobSpec, MapContext, Mapped, Mapper, Result, RowBatch};
use sluice_formats::delimited::Decoder;

use super::binary::rankings_view;
use super::columns::{Clean, Ints};
use super::{bad, decode, Encoding, RANKINGS_FIELDS};

struct GrepMapper {
    finder: memchr::memmem::Finder<'static>,
}

impl Mapper for GrepMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        let Some(bar) = memchr::memchr(b'|', line) else {
            return Err(sluice_api::Error::bad_record("expected key|field"));
        };
        let field = &line[bar + 1..];
        if self.finder.find(field).is_some() {
            ctx.emit(&line[..bar], field)?;
        }
        Ok(())
    }
}

/// `SELECT * FROM Data WHERE field LIKE '%pattern%'`: output `key<TAB>field`.
pub fn grep(pattern: &str) -> JobSpec {
    let finder = memchr::memmem::Finder::new(pattern.as_bytes()).into_owned();
    JobSpec::new("pavlo-grep", move || GrepMapper {
        finder: finder.clone(),
    })
}

struct SelectionMapper {
    dec: Decoder,
    threshold: i64,
    encoding: Encoding,
    num: itoa::Buffer,
    clean: Clean,
}

impl Mapper for SelectionMapper {
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        if self.encoding == Encoding::Paged {
            let r = rankings_view(line).map_err(sluice_api::Error::bad_record)?;
            if i64::from(r.rank) > self.threshold {
                ctx.emit(r.url, self.num.format(r.rank).as_bytes())?;
            }
            return Ok(());
        }
        let f = decode(&mut self.dec, line, RANKINGS_FIELDS)?;
        if f.i64(1).map_err(bad)? > self.threshold {
            ctx.emit(f.get(0).map_err(bad)?, f.get(1).map_err(bad)?)?;
        }
        Ok(())
    }

    fn columnar(&mut self) -> Option<&mut dyn ColumnarMap> {
        (self.encoding == Encoding::Text).then_some(self as &mut dyn ColumnarMap)
    }
}

/// Rankings rows as its projected columns: `pageURL`, `pageRank`,
/// `avgDuration` unread.
impl ColumnarMap for SelectionMapper {
    fn map_batch(&mut self, b: &RowBatch<'_>, ctx: &mut MapContext<'_>) -> Result<Mapped> {
        let (Some(urls), Some(ranks)) = (self.clean.strings(b.column(0)), Ints::of(b.column(1)))
        else {
            return Ok(Mapped::Declined);
        };
        for i in 0..b.rows {
            let rank = ranks.get(i);
            if rank > self.threshold {
                ctx.emit(urls.get(i), self.num.format(rank).as_bytes())?;
            }
        }
        Ok(Mapped::Done)
    }
}

/// `SELECT pageURL, pageRank FROM Rankings WHERE pageRank > threshold`:
/// output `pageURL<TAB>pageRank`, from text rows or binary records.
pub fn selection(threshold: i64, encoding: Encoding) -> JobSpec {
    JobSpec::new("pavlo-selection", move || SelectionMapper {
        dec: Decoder::new(b'|'),
        threshold,
        encoding,
        num: itoa::Buffer::new(),
        clean: Clean::default(),
    })
}
