//! The user's functions: a [`Mapper`] and a [`Reducer`] (also a
//! combiner's type), and the factories that make one per task slot.

use std::sync::Arc;

use crate::columnar::ColumnarMap;
use crate::context::{MapContext, ReduceContext, Values};
use crate::Result;

/// Turns input records into intermediate key/value pairs.
///
/// One instance serves one map task slot and is called for many records, so
/// it may keep reusable buffers to avoid allocating per record.
pub trait Mapper: Send {
    /// Called once before the first record of a task.
    fn setup(&mut self, _ctx: &mut MapContext<'_>) -> Result<()> {
        Ok(())
    }

    /// Called once per input record; `offset` is the record's byte offset in
    /// its (decompressed) file.
    fn map(&mut self, offset: u64, record: &[u8], ctx: &mut MapContext<'_>) -> Result<()>;

    /// Called once after the last record of a task.
    fn cleanup(&mut self, _ctx: &mut MapContext<'_>) -> Result<()> {
        Ok(())
    }

    /// Whether the engine may hand text input to [`Mapper::map_lines`] a
    /// block of lines at a time instead of calling [`Mapper::map`] per line.
    fn wants_line_blocks(&self) -> bool {
        false
    }

    /// Called with a block of whole lines starting at byte `offset`: each
    /// line ends in `\n` except perhaps the last line of a file. The default
    /// strips each line's `\n` (and a `\r` before it) and calls
    /// [`Mapper::map`].
    ///
    /// A mapper that finds a malformed line may return
    /// [`Error::BadRecord`](crate::Error::BadRecord), but only before it
    /// emitted anything for the block: the engine then gives it the
    /// block's lines one at a time through [`Mapper::map`], so each
    /// malformed line meets the job's bad-record policy with its own
    /// offset.
    fn map_lines(&mut self, offset: u64, block: &[u8], ctx: &mut MapContext<'_>) -> Result<()> {
        for (at, line) in block_lines(block) {
            self.map(offset + at, line, ctx)?;
        }
        Ok(())
    }

    /// Its columnar entry, if it has one: the engine then gives it files
    /// of typed rows a batch of columns at a time ([`crate::columnar`]).
    fn columnar(&mut self) -> Option<&mut dyn ColumnarMap> {
        None
    }
}

/// Turns one key and all its values into output records. Also the type of a
/// combiner, which must emit records with the key it was given.
pub trait Reducer: Send {
    /// Called once before the first group of a task.
    fn setup(&mut self, _ctx: &mut ReduceContext<'_>) -> Result<()> {
        Ok(())
    }

    /// Called once per key group, in key order.
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()>;

    /// Called once after the last group of a task.
    fn cleanup(&mut self, _ctx: &mut ReduceContext<'_>) -> Result<()> {
        Ok(())
    }
}

/// A factory for mappers.
pub type MapperFactory = Arc<dyn Fn() -> Box<dyn Mapper> + Send + Sync>;
/// A factory for reducers and combiners.
pub type ReducerFactory = Arc<dyn Fn() -> Box<dyn Reducer> + Send + Sync>;

/// The lines of a block of whole lines, as [`Mapper::map_lines`] splits
/// it: each line's offset in the block and its text without its `\n` (and
/// a `\r` before it). A block ending in `\n` has no empty line after it.
pub fn block_lines(block: &[u8]) -> impl Iterator<Item = (u64, &[u8])> {
    let mut at = 0u64;
    block.split_inclusive(|&b| b == b'\n').map(move |line| {
        let start = at;
        at += line.len() as u64;
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        (start, body.strip_suffix(b"\r").unwrap_or(body))
    })
}

#[cfg(test)]
mod tests {
    use super::block_lines;

    #[test]
    fn a_blocks_lines_carry_their_offsets_without_their_ends() {
        let got: Vec<_> = block_lines(b"ab\r\n\ncd\nlast").collect();
        assert_eq!(got, [(0, &b"ab"[..]), (4, b""), (5, b"cd"), (8, b"last")]);
        assert_eq!(block_lines(b"x\n").count(), 1);
        assert_eq!(block_lines(b"").count(), 0);
    }
}
