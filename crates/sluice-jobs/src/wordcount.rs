use sluice_api::{
    JobSpec, KeyOrder, MapContext, Mapper, ReduceContext, Reducer, Result, SumU64, Values,
};

/// How word count groups its map output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Grouping {
    /// Combine at emit time in a hash table (Phoenix++ style).
    #[default]
    Hash,
    /// Sort map output and combine on spill (Hadoop style).
    Sort,
}

/// The delimiters of Hadoop's WordCount (`java.util.StringTokenizer`'s
/// defaults): space, tab, newline, carriage return, form feed.
#[inline]
pub fn is_delimiter(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0c)
}

/// Calls `f` with each word of `line`: the runs of bytes between
/// [`is_delimiter`] bytes, in order, never empty.
///
/// Every delimiter is at most 0x20, so the end of a word is looked for
/// eight bytes at a time: a word-sized test finds the first byte at most
/// 0x20 (SWAR, "has less than" in Hacker's Delight), and only that byte is
/// checked against the delimiters. Most words end within the first load.
#[inline]
pub fn for_each_word<'a, E>(
    line: &'a [u8],
    mut f: impl FnMut(&'a [u8]) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let mut i = 0;
    while i < line.len() {
        if is_delimiter(line[i]) {
            i += 1;
            continue;
        }
        let end = word_end(line, i + 1);
        f(&line[i..end])?;
        i = end;
    }
    Ok(())
}

/// The index of the first delimiter at or after `i`, or `line.len()`.
#[inline]
fn word_end(line: &[u8], mut i: usize) -> usize {
    const LOW: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(chunk) = line.get(i..i + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        // High bit set in the lowest byte <= 0x20 (bytes above it may be
        // marked wrongly; only the lowest is used).
        let low = x.wrapping_sub(LOW * 0x21) & !x & HIGH;
        if low == 0 {
            i += 8;
            continue;
        }
        let j = i + (low.trailing_zeros() / 8) as usize;
        if is_delimiter(line[j]) {
            return j;
        }
        i = j + 1; // a control byte inside a word
    }
    while i < line.len() && !is_delimiter(line[i]) {
        i += 1;
    }
    i
}

/// Emits `(word, 1)` for every token of a line.
#[derive(Debug, Default)]
pub struct WordCountMapper;

const ONE: [u8; 8] = 1u64.to_le_bytes();

impl Mapper for WordCountMapper {
    #[inline]
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        for_each_word(line, |word| ctx.emit(word, &ONE))
    }

    fn wants_line_blocks(&self) -> bool {
        true
    }

    /// A newline is a delimiter, so the words of a block of lines are the
    /// words of its lines: the block is tokenized whole, with no search
    /// for line ends and no call a line.
    fn map_lines(&mut self, _offset: u64, block: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        for_each_word(block, |word| ctx.emit(word, &ONE))
    }
}

/// Sums 8-byte counts; as a reducer writes the decimal total, as a combiner
/// the binary one.
#[derive(Default)]
pub struct SumReducer {
    decimal: bool,
    buf: itoa::Buffer,
}

impl SumReducer {
    /// The final reducer: writes `word<TAB>count`.
    pub fn output() -> Self {
        SumReducer {
            decimal: true,
            buf: itoa::Buffer::new(),
        }
    }

    /// The combiner: writes the binary partial sum.
    pub fn combiner() -> Self {
        SumReducer::default()
    }
}

impl Reducer for SumReducer {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        let mut n = 0u64;
        while let Some(v) = values.next_value() {
            n +=
                SumU64::decode(v).ok_or_else(|| sluice_api::Error::user("count is not 8 bytes"))?;
        }
        if self.decimal {
            let s = self.buf.format(n);
            ctx.write(key, s.as_bytes())
        } else {
            ctx.write(key, &SumU64::encode(n))
        }
    }
}

/// Word count with the given grouping. Output lines are `word<TAB>count`,
/// key-sorted within each part file, partitioned as Hadoop's
/// `HashPartitioner` does.
pub fn wordcount(grouping: Grouping) -> JobSpec {
    let job = JobSpec::new("wordcount", || WordCountMapper)
        .reducer(SumReducer::output)
        .key_order(KeyOrder::Bytewise);
    match grouping {
        Grouping::Hash => job.aggregator(SumU64),
        Grouping::Sort => job.combiner(SumReducer::combiner),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &[u8]) -> Vec<&[u8]> {
        let mut got = Vec::new();
        for_each_word::<()>(line, |w| {
            got.push(w);
            Ok(())
        })
        .unwrap();
        got
    }

    /// The tokenizer agrees with splitting at every delimiter byte on
    /// lines of every length and mix, control bytes inside words included.
    #[test]
    fn words_are_the_runs_between_delimiters() {
        let alphabet = b"ab \t\n\r\x0c\x01\x1f!\x20\x21\xff";
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..70 {
            for _ in 0..200 {
                let line: Vec<u8> = (0..len)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        // Mostly letters, so words run past eight bytes.
                        let r = state % 40;
                        if r < 28 {
                            b'a' + (r % 3) as u8
                        } else {
                            alphabet[(r - 28) as usize % alphabet.len()]
                        }
                    })
                    .collect();
                let want: Vec<&[u8]> = line
                    .split(|&b| is_delimiter(b))
                    .filter(|w| !w.is_empty())
                    .collect();
                assert_eq!(words(&line), want, "{line:?}");
            }
        }
    }

    struct Keys(Vec<Vec<u8>>);

    impl sluice_api::Sink for Keys {
        fn emit(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
            assert_eq!(value, ONE);
            self.0.push(key.to_vec());
            Ok(())
        }
    }

    /// A block of lines gives the words its lines give one by one (with
    /// `\r\n` line ends, and a last line without its newline).
    #[test]
    fn a_block_of_lines_gives_the_words_of_its_lines() {
        let block = b"the cat\r\n  sat\ton the\n\nmat\x0cof\r\nthe cat";
        let mut counters = sluice_api::Counters::default();
        let (mut by_block, mut by_line) = (Keys(Vec::new()), Keys(Vec::new()));
        let mut m = WordCountMapper;
        m.map_lines(0, block, &mut MapContext::new(&mut by_block, &mut counters))
            .unwrap();
        for (_, line) in sluice_api::block_lines(block) {
            m.map(0, line, &mut MapContext::new(&mut by_line, &mut counters))
                .unwrap();
        }
        assert_eq!(by_block.0, by_line.0);
        assert_eq!(by_block.0.len(), 9);
    }
}
