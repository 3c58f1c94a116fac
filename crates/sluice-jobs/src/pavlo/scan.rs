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

    fn wants_line_blocks(&self) -> bool {
        true
    }

    /// The pattern is searched for in the whole block, and only the lines
    /// where it occurs are split into key and field, as [`Mapper::map`]
    /// does (grep's way: a line-by-line search spent most of its time
    /// finding line ends and calling). A block with a line lacking its
    /// `|` is refused before anything is emitted; the engine then maps it
    /// line by line, where that line is a bad record.
    fn map_lines(&mut self, offset: u64, block: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        if !every_line_has(b'|', block) {
            return Err(sluice_api::Error::bad_record("expected key|field"));
        }
        let mut pos = 0;
        while let Some(hit) = self.finder.find(&block[pos..]) {
            let hit = pos + hit;
            let start = memchr::memrchr(b'\n', &block[pos..hit]).map_or(pos, |i| pos + i + 1);
            let end = memchr::memchr(b'\n', &block[hit..]).map_or(block.len(), |i| hit + i);
            let body = &block[start..end];
            self.map(
                offset + start as u64,
                body.strip_suffix(b"\r").unwrap_or(body),
                ctx,
            )?;
            pos = end + 1;
            if pos >= block.len() {
                break;
            }
        }
        Ok(())
    }
}

/// Whether every line of a block of whole lines holds `byte`: the last
/// line may lack its `\n`, and a block ending in `\n` has no empty line
/// after it (as [`Mapper::map_lines`] splits it).
fn every_line_has(byte: u8, block: &[u8]) -> bool {
    let mut seen = false;
    for i in memchr::memchr2_iter(byte, b'\n', block) {
        if block[i] == b'\n' {
            if !seen {
                return false;
            }
            seen = false;
        } else {
            seen = true;
        }
    }
    seen || block.is_empty() || block.ends_with(b"\n")
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

#[cfg(test)]
mod tests {
    use sluice_api::{Counters, Error, Sink};

    use super::*;

    struct Rows(Vec<(Vec<u8>, Vec<u8>)>);

    impl Sink for Rows {
        fn emit(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
            self.0.push((key.to_vec(), value.to_vec()));
            Ok(())
        }
    }

    type Emitted = Vec<(Vec<u8>, Vec<u8>)>;

    /// What the block entry emits, and what the line entry emits line by
    /// line (its first error, if any).
    fn by_block_and_by_line(text: &[u8]) -> (Result<Emitted>, Result<Emitted>) {
        let job = grep("XYZ");
        let mut counters = Counters::default();
        let mut m = (job.mapper)();
        let mut a = Rows(Vec::new());
        let block = m
            .map_lines(7, text, &mut MapContext::new(&mut a, &mut counters))
            .map(|()| a.0);
        let mut b = Rows(Vec::new());
        let line = sluice_api::block_lines(text)
            .try_for_each(|(_, line)| m.map(0, line, &mut MapContext::new(&mut b, &mut counters)))
            .map(|()| b.0);
        (block, line)
    }

    #[test]
    fn the_block_search_emits_what_the_line_search_does() {
        let texts: [&[u8]; 7] = [
            b"k1|aaXYZbb\nk2|nothing\nXYZ|key only\nk4|XYZ\r\nk5|a|XYZ\nk6|last XYZ",
            b"k1|XYZ\nk2|XY\nZ|split over lines\n",
            b"k1|a\nk2|b\n",
            b"XYZXYZ|XYZ\n|XYZ\n",
            b"",
            b"k|XYZ",
            b"k1|XYZ\r\nk2|XYZ\r\n",
        ];
        for text in texts {
            let (block, line) = by_block_and_by_line(text);
            assert_eq!(
                block.unwrap(),
                line.unwrap(),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn a_block_with_a_line_lacking_its_bar_is_refused_before_any_output() {
        for text in [
            &b"k1|XYZ\nno bar XYZ\nk3|XYZ\n"[..],
            b"k1|XYZ\n\nk3|XYZ\n",
            b"k1|XYZ\nk2|b\nlast",
        ] {
            let (block, line) = by_block_and_by_line(text);
            assert!(matches!(block, Err(Error::BadRecord(_))), "{block:?}");
            assert!(matches!(line, Err(Error::BadRecord(_))), "{line:?}");
            let mut m = (grep("XYZ").mapper)();
            let mut out = Rows(Vec::new());
            let mut counters = Counters::default();
            let r = m.map_lines(0, text, &mut MapContext::new(&mut out, &mut counters));
            assert!(r.is_err() && out.0.is_empty(), "emitted {:?}", out.0);
        }
        assert!(every_line_has(b'|', b"a|b\nc|d"));
        assert!(every_line_has(b'|', b"a|b\n"));
        assert!(!every_line_has(b'|', b"a|b\n\n"));
    }
}
