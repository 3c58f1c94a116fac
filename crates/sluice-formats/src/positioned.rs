//! The positioned reader the readers of files of rows share (Avro,
//! SequenceFile): buffered reads from any [`Read`] + [`Seek`] source, the
//! position of the next byte, and errors that name the file, the offset
//! and the format.
//!
//! A split's file is read wherever its bytes are ([`split_source`]): a
//! local file; a cluster block through its chunk checksums
//! ([`crate::chunked::CheckedReader`], whose damage reaches the reader's
//! caller as [`FormatError::Damaged`], blaming the copy); a block already
//! in memory; or a remote store's file ([`crate::input::RemoteSource`],
//! opened again at the new offset when a seek moves away).

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::Path;

use crate::input::{InputFile, Remote};
use crate::{FormatError, Result};

/// What a positioned reader reads from.
pub(crate) trait Source: Read + Seek + Send {}

impl<T: Read + Seek + Send> Source for T {}

/// Bytes buffered ahead of the reader.
const BUFFER: usize = 1 << 20;

/// A buffered source that counts its position and names its file and
/// format in its errors.
pub(crate) struct Positioned<'a> {
    r: BufReader<Box<dyn Source + 'a>>,
    /// File offset of the next byte read.
    pub(crate) pos: u64,
    /// The file, for errors.
    pub(crate) path: &'a Path,
    /// The format's name in errors ("Avro file", "SequenceFile").
    format: &'static str,
}

impl<'a> Positioned<'a> {
    /// Reads `source` from its start.
    pub(crate) fn new(
        source: Box<dyn Source + 'a>,
        path: &'a Path,
        format: &'static str,
    ) -> Positioned<'a> {
        Positioned {
            r: BufReader::with_capacity(BUFFER, source),
            pos: 0,
            path,
            format,
        }
    }

    /// Reads the local file at `path` from its start.
    pub(crate) fn open(path: &'a Path, format: &'static str) -> Result<Positioned<'a>> {
        let f = File::open(path).map_err(|e| FormatError::io("opening", path, e))?;
        Ok(Positioned::new(Box::new(f), path, format))
    }

    /// Reads `file` wherever its bytes are ([`split_source`]), from its
    /// start; most reads are expected in `expected` (a split's bytes).
    pub(crate) fn of_file(
        file: &'a InputFile,
        expected: Range<u64>,
        format: &'static str,
    ) -> Result<Positioned<'a>> {
        let source = split_source(file, expected)?;
        Ok(Positioned::new(source, &file.path, format))
    }

    /// Moves to file offset `to`.
    pub(crate) fn seek(&mut self, to: u64) -> Result<()> {
        if to != self.pos {
            self.r
                .seek(SeekFrom::Start(to))
                .map_err(|e| self.io_error("seeking", e))?;
            self.pos = to;
        }
        Ok(())
    }

    /// Fills `buf`; `Ok(false)` at the end of the file before its first
    /// byte, a truncation error after it.
    pub(crate) fn fill(&mut self, buf: &mut [u8], what: &str) -> Result<bool> {
        let mut got = 0;
        while got < buf.len() {
            match self.r.read(&mut buf[got..]) {
                Ok(0) if got == 0 => return Ok(false),
                Ok(0) => return Err(self.cut(what)),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_error("reading", e)),
            }
        }
        self.pos += buf.len() as u64;
        Ok(true)
    }

    /// Fills `buf`, or fails as cut short inside `what`.
    pub(crate) fn exact(&mut self, buf: &mut [u8], what: &str) -> Result<()> {
        if buf.is_empty() || self.fill(buf, what)? {
            Ok(())
        } else {
            Err(self.cut(what))
        }
    }

    /// Reads what is there, up to `buf`'s length (0 at the end).
    pub(crate) fn read_some(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut got = 0;
        while got < buf.len() {
            match self.r.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_error("reading", e)),
            }
        }
        self.pos += got as u64;
        Ok(got)
    }

    /// The `n` bytes of `what`, whose length was read at `at`: a length
    /// below 0 or past `max` is damage, refused before anything is
    /// allocated.
    pub(crate) fn sized(&mut self, at: u64, n: i64, max: i64, what: &str) -> Result<Vec<u8>> {
        if !(0..=max).contains(&n) {
            return Err(FormatError::corrupt(
                self.path,
                at,
                format!("{what}: length {n}"),
            ));
        }
        let mut b = vec![0u8; n as usize];
        self.exact(&mut b, what)?;
        Ok(b)
    }

    /// One byte.
    pub(crate) fn u8(&mut self, what: &str) -> Result<u8> {
        let mut b = [0u8; 1];
        self.exact(&mut b, what)?;
        Ok(b[0])
    }

    /// The error of a file that ends inside `what`.
    pub(crate) fn cut(&self, what: &str) -> FormatError {
        FormatError::Truncated {
            path: self.path.to_owned(),
            offset: self.pos,
            detail: format!("the {} ends inside {what}", self.format),
        }
    }

    /// The offset of the first `needle` starting in `[from, end)`, read
    /// from `from` on; the reader is left past where it looked.
    pub(crate) fn find(&mut self, needle: &[u8], from: u64, end: u64) -> Result<Option<u64>> {
        let finder = memchr::memmem::Finder::new(needle);
        self.seek(from)?;
        let mut window: Vec<u8> = Vec::new();
        let mut base = from;
        let mut chunk = vec![0u8; 1 << 16];
        while base < end {
            let n = self.read_some(&mut chunk)?;
            if n == 0 {
                return Ok(None);
            }
            window.extend_from_slice(&chunk[..n]);
            if let Some(i) = finder.find(&window) {
                let at = base + i as u64;
                return Ok((at < end).then_some(at));
            }
            let keep = window.len().saturating_sub(needle.len() - 1);
            window.drain(..keep);
            base += keep as u64;
        }
        Ok(None)
    }

    /// A source's failure: the [`FormatError`] it carries (a damaged
    /// block's, so the copy is blamed), or an I/O error on the file.
    fn io_error(&self, op: &'static str, e: std::io::Error) -> FormatError {
        source_error(op, self.path, e)
    }
}

/// A source's failure as a [`FormatError`]: the one it carries, if any
/// (a checked block's damage), else an I/O error on `path`.
pub(crate) fn source_error(op: &'static str, path: &Path, e: std::io::Error) -> FormatError {
    if e.get_ref().is_some_and(|i| i.is::<FormatError>()) {
        let inner = e.into_inner().expect("checked above");
        return *inner.downcast::<FormatError>().expect("checked above");
    }
    FormatError::io(op, path, e)
}

/// A source of `file`'s bytes, at its start: its cached bytes, its block
/// read through its chunk checksums, its remote store's reader (asked for
/// the rest of `expected` when a read starts in it), or the local file.
pub(crate) fn split_source(
    file: &InputFile,
    expected: Range<u64>,
) -> Result<Box<dyn Source + 'static>> {
    let path = file.path.as_path();
    if let Some(r) = &file.resident {
        return Ok(Box::new(std::io::Cursor::new(Held(r.clone()))));
    }
    if let Some(sums) = &file.checks {
        let r = crate::chunked::CheckedReader::open(path, sums.clone())?;
        return Ok(Box::new(r));
    }
    if let Some(remote) = &file.remote {
        return Ok(Box::new(RemoteSeek::new(
            remote.clone(),
            file.len,
            expected,
        )));
    }
    let f = File::open(path).map_err(|e| FormatError::io("opening", path, e))?;
    Ok(Box::new(f))
}

/// A cached block's bytes, owned.
struct Held(crate::input::Resident);

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        self.0.bytes()
    }
}

/// A remote file read from any offset: its source is opened at the
/// position of the first read after a seek; a short seek forward skips
/// bytes of the open reader instead.
pub(crate) struct RemoteSeek {
    remote: Remote,
    len: u64,
    expected: Range<u64>,
    pos: u64,
    open: Option<(u64, Box<dyn Read + Send>)>,
}

/// A seek forward by at most this many bytes reads through them rather
/// than opening the source again (a new ranged request).
const SKIP: u64 = 256 << 10;
/// Bytes a read outside the expected range expects to read (a header, a
/// footer, the end of a block): the store asks for more as it goes.
const AWAY: u64 = 64 << 10;

impl RemoteSeek {
    /// Reads `remote`, a file of `len` bytes, expecting most reads in
    /// `expected`.
    pub(crate) fn new(remote: Remote, len: u64, expected: Range<u64>) -> RemoteSeek {
        RemoteSeek {
            remote,
            len,
            expected,
            pos: 0,
            open: None,
        }
    }
}

impl Read for RemoteSeek {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let pos = self.pos;
        if let Some((at, r)) = &mut self.open {
            if *at < pos && pos - *at <= SKIP {
                let skip = pos - *at;
                std::io::copy(&mut r.take(skip), &mut std::io::sink())?;
                *at = pos;
            }
        }
        if self.open.as_ref().is_none_or(|(at, _)| *at != pos) {
            let end = if self.expected.contains(&pos) {
                self.expected.end
            } else {
                pos.saturating_add(AWAY)
            };
            let r = self.remote.0.open_at(pos, end.min(self.len))?;
            self.open = Some((pos, r));
        }
        let (at, r) = self.open.as_mut().expect("opened above");
        let n = r.read(buf)?;
        *at += n as u64;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for RemoteSeek {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.pos = seek_target(self.pos, self.len, to)?;
        Ok(self.pos)
    }
}

/// Where a seek `to` lands from `pos` in a file of `len` bytes; an error
/// before the file's start.
pub(crate) fn seek_target(pos: u64, len: u64, to: SeekFrom) -> std::io::Result<u64> {
    let target = match to {
        SeekFrom::Start(n) => Some(n),
        SeekFrom::End(d) => len.checked_add_signed(d),
        SeekFrom::Current(d) => pos.checked_add_signed(d),
    };
    target.ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the file")
    })
}

#[cfg(test)]
mod tests;
