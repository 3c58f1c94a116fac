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

/// Emits `(word, 1)` for every token of a line.
#[derive(Debug, Default)]
pub struct WordCountMapper;

const ONE: [u8; 8] = 1u64.to_le_bytes();

impl Mapper for WordCountMapper {
    #[inline]
    fn map(&mut self, _offset: u64, line: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        for word in line.split(|&b| is_delimiter(b)) {
            if !word.is_empty() {
                ctx.emit(word, &ONE)?;
            }
        }
        Ok(())
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
