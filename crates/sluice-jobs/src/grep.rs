use regex::bytes::{Regex, RegexBuilder};
use sluice_api::{JobSpec, MapContext, Mapper, Result};

/// Writes matching lines. Given a block of lines, it searches the whole
/// block with a multi-line version of the pattern and checks only the lines
/// where that finds a candidate with the pattern itself, so most lines are
/// never looked at one by one (ripgrep's approach).
struct GrepMapper {
    line: Regex,
    block: Option<Regex>,
}

impl Mapper for GrepMapper {
    #[inline]
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        if self.line.is_match(line) {
            ctx.emit_key(line)?;
        }
        Ok(())
    }

    fn wants_line_blocks(&self) -> bool {
        self.block.is_some()
    }

    fn map_lines(&mut self, _offset: u64, block: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        let Some(multi) = &self.block else {
            for (_, line) in sluice_api::block_lines(block) {
                self.map(0, line, ctx)?;
            }
            return Ok(());
        };
        let mut pos = 0;
        // Every line with a match of the pattern has a candidate at or
        // before that match: after checking a candidate's line, the search
        // resumes at the next line, so no line is skipped.
        while let Some(m) = multi.find_at(block, pos) {
            let start = memchr::memrchr(b'\n', &block[..m.start()]).map_or(0, |i| i + 1);
            let end =
                memchr::memchr(b'\n', &block[m.start()..]).map_or(block.len(), |i| m.start() + i);
            let body = &block[start..end];
            let line = body.strip_suffix(b"\r").unwrap_or(body);
            if self.line.is_match(line) {
                ctx.emit_key(line)?;
            }
            pos = end + 1;
            if pos >= block.len() {
                break;
            }
        }
        Ok(())
    }
}

/// A map-only job writing every input line that matches `pattern`, in input
/// order (part files follow split order).
pub fn grep(pattern: &str) -> std::result::Result<JobSpec, regex::Error> {
    let line = Regex::new(pattern)?;
    // `\A` and `\z` mean the start and end of each line to the per-line
    // search but of the block to a block search: such patterns go line by line.
    let block = if pattern.contains("\\A") || pattern.contains("\\z") {
        None
    } else {
        Some(
            RegexBuilder::new(pattern)
                .multi_line(true)
                .crlf(true)
                .build()?,
        )
    };
    Ok(JobSpec::new("grep", move || GrepMapper {
        line: line.clone(),
        block: block.clone(),
    }))
}

#[cfg(test)]
mod tests {
    use sluice_api::{Counters, Sink};

    use super::*;

    struct Lines(Vec<Vec<u8>>);

    impl Sink for Lines {
        fn emit(&mut self, key: &[u8], _value: &[u8]) -> Result<()> {
            self.0.push(key.to_vec());
            Ok(())
        }
    }

    fn by_block_and_by_line(pattern: &str, text: &[u8]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let job = grep(pattern).unwrap();
        let mut counters = Counters::default();
        let (mut a, mut b) = (Lines(Vec::new()), Lines(Vec::new()));
        let mut m = (job.mapper)();
        m.map_lines(0, text, &mut MapContext::new(&mut a, &mut counters))
            .unwrap();
        for (_, line) in sluice_api::block_lines(text) {
            m.map(0, line, &mut MapContext::new(&mut b, &mut counters))
                .unwrap();
        }
        (a.0, b.0)
    }

    #[test]
    fn block_search_finds_exactly_the_matching_lines() {
        let text = b"a\nab\nxaxb\r\nzzz\nb$\nfoo\r\nfoo bar\nlast ab";
        for pattern in [
            "a[^q]*b", "^a", "b$", "^foo$", "x.x", r"\bab\b", "zzz|last", "q", r"\Aab\z", "(?s)a.b",
        ] {
            let (block, line) = by_block_and_by_line(pattern, text);
            assert_eq!(block, line, "pattern {pattern}");
        }
    }
}
