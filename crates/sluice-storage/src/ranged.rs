//! Reading a remote file as a byte stream in ranges: the first range
//! reaches a little past where the reader expects to stop, then further
//! ranges of [`WINDOW`] bytes follow as long as it reads, up to the
//! file's end. Object stores and HDFS answer a range with a stream of
//! chunks; this turns those into a blocking [`Read`] for the engine's
//! readers, which run on OS threads.

use std::io::Read;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;

use crate::runtime::runtime;

/// Bytes a reader asks for past its split's end before the first range
/// ends (the rest of its last line, usually far less).
const SLACK: u64 = 1 << 20;
/// Chunks received ahead of the reader: the store's client decodes and
/// checks them on the runtime's threads while the reader's thread works
/// on earlier ones (HDFS packets are 64 KiB: about 1 MiB ahead).
const AHEAD: usize = 16;
/// The size of each further range a reader asks for.
const WINDOW: u64 = 8 << 20;

/// The chunks of one range of a remote file.
pub(crate) type Chunks = BoxStream<'static, std::io::Result<Bytes>>;

/// A remote file that answers byte ranges.
pub(crate) trait RangeSource: Send + Sync + 'static {
    /// The file's length.
    fn len(&self) -> u64;
    /// Asks for `range` (within the file); called from a thread that
    /// may block on [`runtime`].
    fn fetch(&self, range: Range<u64>) -> std::io::Result<Chunks>;
}

/// A reader of `source` from `offset` on, expecting to stop near
/// `hint_end`.
pub(crate) fn reader(
    source: Arc<dyn RangeSource>,
    offset: u64,
    hint_end: u64,
) -> Box<dyn Read + Send> {
    let len = source.len();
    Box::new(Ranges {
        source,
        len,
        pos: offset,
        first_end: hint_end.saturating_add(SLACK).min(len),
        ahead: None,
        chunk: Bytes::new(),
    })
}

struct Ranges {
    source: Arc<dyn RangeSource>,
    len: u64,
    pos: u64,
    first_end: u64,
    /// The current range's chunks, as a task on the runtime receives them.
    ahead: Option<tokio::sync::mpsc::Receiver<std::io::Result<Bytes>>>,
    chunk: Bytes,
}

impl Ranges {
    /// Asks for the next range from `pos`.
    fn open(&mut self) -> std::io::Result<()> {
        let end = if self.first_end > self.pos {
            std::mem::take(&mut self.first_end)
        } else {
            self.pos.saturating_add(WINDOW).min(self.len)
        };
        let mut stream = self.source.fetch(self.pos..end)?;
        let (tx, rx) = tokio::sync::mpsc::channel(AHEAD);
        runtime().spawn(async move {
            while let Some(c) = stream.next().await {
                let failed = c.is_err();
                // The reader is gone (it stopped early): stop receiving.
                if tx.send(c).await.is_err() || failed {
                    break;
                }
            }
        });
        self.ahead = Some(rx);
        Ok(())
    }
}

impl Read for Ranges {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if !self.chunk.is_empty() {
                let n = self.chunk.len().min(buf.len());
                buf[..n].copy_from_slice(&self.chunk[..n]);
                self.chunk = self.chunk.slice(n..);
                self.pos += n as u64;
                return Ok(n);
            }
            if self.pos >= self.len || buf.is_empty() {
                return Ok(0);
            }
            let Some(ahead) = self.ahead.as_mut() else {
                self.open()?;
                continue;
            };
            match ahead.blocking_recv() {
                Some(Ok(b)) => self.chunk = b,
                Some(Err(e)) => {
                    // The range is broken: a later read asks for it anew
                    // from `pos` rather than skip what it lost.
                    self.ahead = None;
                    return Err(e);
                }
                None => self.ahead = None,
            }
        }
    }
}
