//! Record readers.
//!
//! Readers push each record to a callback as a borrowed slice of one reused
//! buffer: no allocation per record.
//!
//! Split ownership of lines: a line starting at byte `p` belongs to the split
//! `[start, end)` with `start <= p < end`. A reader of a split with
//! `start > 0` therefore starts at `start - 1` and discards everything up to
//! and including the first `\n`; it reads on past `end` to finish a line that
//! started before `end`. Every line is read by exactly one split.
//!
//! Fixed-length records start at multiples of the record size, and splits of
//! such files are planned at multiples too (see [`crate::input::plan_splits`]).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use crate::bz2::Bz2Split;
use crate::chunked::{CheckedReader, ChunkSums, Fill, FillMemory};
use crate::input::{Codec, RecordFormat, Split};
use crate::parquet::RowsRead;
use crate::textrows::{RowLines, TextRows};
use crate::{FormatError, Result};

/// Reader settings.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    /// Bytes read per system call, and the initial buffer size.
    pub buffer_size: usize,
    /// Longest record accepted; a longer one fails with
    /// [`FormatError::RecordTooLarge`].
    pub max_record: usize,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            buffer_size: 1 << 20,
            max_record: 64 << 20,
        }
    }
}

/// Reads every record of `split`, calling `f(offset, record)` for each, and
/// returns the bytes of the file consumed (decompressed bytes for gzip).
pub fn read_split<E, F>(
    split: &Split,
    format: RecordFormat,
    opts: &ReadOptions,
    f: F,
) -> std::result::Result<u64, E>
where
    E: From<FormatError>,
    F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
{
    let path = split.file.path.as_path();
    if let Some(r) = &split.file.resident {
        return scan_resident(r.bytes(), 0, path, format, opts, f);
    }
    if let Some(into) = filling(split) {
        let mut f = f;
        return fill_and_scan(split, into, opts, format, |data, base| {
            scan_resident(data, base, path, format, opts, &mut f)
        });
    }
    let (mut src, first, end) = open_at(split, format)?;
    match format {
        RecordFormat::Lines => {
            let skip = src.skips_first(split)?;
            scan_lines(src, path, first, skip, end, opts, f)
        }
        RecordFormat::Fixed(n) => scan_fixed(src, path, first, end, n, opts, f),
        RecordFormat::Paged(n) => scan_pages(src, path, first, end, n, opts, f),
    }
}

/// Reads every record of `split` as [`read_split`] does; a file of rows
/// ([`Codec::has_rows`]) gives one record per row, its `rows` columns as
/// text ([`crate::rows`]), numbered by row, and says what it skipped.
pub fn read_records<E, F>(
    split: &Split,
    format: RecordFormat,
    rows: &crate::rows::Projection,
    opts: &ReadOptions,
    f: F,
) -> std::result::Result<RowsRead, E>
where
    E: From<FormatError>,
    F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
{
    match split.file.codec {
        Codec::Parquet if rows.json => crate::parquet_json::read_split(split, f),
        Codec::Parquet => crate::parquet::read_split(split, rows, f),
        Codec::SequenceFile => {
            crate::seqfile::read_split(split, rows, opts.max_record, f).map(RowsRead::of_bytes)
        }
        Codec::Avro => crate::avro::read_split(split, rows, f).map(RowsRead::of_bytes),
        Codec::Csv => read_row_lines(split, TextRows::Csv, rows, opts, f).map(RowsRead::of_bytes),
        Codec::Jsonl => {
            read_row_lines(split, TextRows::Jsonl, rows, opts, f).map(RowsRead::of_bytes)
        }
        _ => read_split(split, format, opts, f).map(RowsRead::of_bytes),
    }
}

/// Reads the lines of a text file of rows (CSV, JSON lines) as records
/// ([`crate::textrows`]).
fn read_row_lines<E, F>(
    split: &Split,
    kind: TextRows,
    rows: &crate::rows::Projection,
    opts: &ReadOptions,
    mut f: F,
) -> std::result::Result<u64, E>
where
    E: From<FormatError>,
    F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
{
    let mut conv = RowLines::new(&split.file.path, kind, rows)?;
    let mut file = (*split.file).clone();
    file.codec = Codec::None;
    let plain = Split {
        file: std::sync::Arc::new(file),
        ..split.clone()
    };
    read_split(&plain, RecordFormat::Lines, opts, |off, line| {
        match conv.row(off, line)? {
            Some(rec) => f(off, rec),
            None => Ok(()),
        }
    })
}

/// A byte source with errors that name the file.
enum Source {
    Plain(File),
    /// A file compressed as one stream, decompressed.
    Stream(Box<dyn Read + Send>, Codec),
    /// A split of a bzip2 file, decompressed block by block.
    Bz2(Box<Bz2Split>),
    /// A remote file's bytes (an object in a store).
    Remote(Box<dyn Read + Send>),
    /// A stored block read through its chunk checksums.
    Checked(Box<CheckedReader>),
}

impl Source {
    fn read(&mut self, path: &Path, at: u64, buf: &mut [u8]) -> Result<usize> {
        loop {
            let r = match self {
                Source::Checked(c) => return c.read_into(buf),
                Source::Bz2(b) => return b.read(buf),
                Source::Plain(f) => f.read(buf),
                Source::Remote(r) => r.read(buf),
                Source::Stream(g, _) => g.read(buf),
            };
            match r {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.error(path, at, e)),
            }
        }
    }

    fn error(&self, path: &Path, at: u64, e: std::io::Error) -> FormatError {
        match self {
            Source::Stream(_, codec) => stream_error(*codec, path, at, e),
            _ => FormatError::io("reading", path, e),
        }
    }

    /// Whether the split's reader drops its text up to the first newline
    /// (a line begun in the split before it).
    fn skips_first(&mut self, split: &Split) -> Result<bool> {
        match self {
            Source::Bz2(b) => b.skips_first(),
            Source::Stream(..) => Ok(false),
            _ => Ok(split.start > 0),
        }
    }
}

/// A compressed stream's failure `at` a decompressed offset.
fn stream_error(codec: Codec, path: &Path, at: u64, e: std::io::Error) -> FormatError {
    match codec {
        Codec::Gzip => FormatError::Gzip {
            path: path.to_owned(),
            offset: at,
            source: e,
        },
        _ => FormatError::Decompress {
            path: path.to_owned(),
            codec: codec.name(),
            place: format!("near decompressed offset {at}"),
            detail: e.to_string(),
        },
    }
}

/// Opens the split's file positioned where its reader starts: returns the
/// source, the file offset of its first byte and the split end.
/// Compressed files count decompressed bytes from where they start: the
/// file's start, or a bzip2 split's first block.
fn open_at(split: &Split, format: RecordFormat) -> Result<(Source, u64, u64)> {
    let path = split.file.path.as_path();
    if let Some(sums) = &split.file.checks {
        // Checked blocks are read whole, from their first chunk.
        debug_assert_eq!(split.start, 0, "a checked block is one split");
        let r = CheckedReader::open(path, sums.clone())?;
        return Ok((Source::Checked(Box::new(r)), 0, split.end));
    }
    let codec = split.file.codec;
    let first = match format {
        _ if codec == Codec::Bzip2 => split.start,
        _ if codec != Codec::None => 0,
        RecordFormat::Lines => split.start.saturating_sub(1),
        RecordFormat::Fixed(_) | RecordFormat::Paged(_) => split.start,
    };
    let raw: Box<dyn Read + Send> = match &split.file.remote {
        Some(remote) => remote
            .0
            .open_at(first, split.end)
            .map_err(|e| FormatError::io("opening", path, e))?,
        None => {
            let mut file = File::open(path).map_err(|e| FormatError::io("opening", path, e))?;
            if codec == Codec::None {
                file.seek(SeekFrom::Start(first))
                    .map_err(|e| FormatError::io("seeking", path, e))?;
                return Ok((Source::Plain(file), first, split.end));
            }
            file.seek(SeekFrom::Start(first))
                .map_err(|e| FormatError::io("seeking", path, e))?;
            Box::new(file)
        }
    };
    Ok(match codec {
        Codec::None => (Source::Remote(raw), first, split.end),
        Codec::Bzip2 => {
            let b = Bz2Split::new(raw, path, split.start, split.end);
            (Source::Bz2(Box::new(b)), 0, u64::MAX)
        }
        _ => {
            let dec = crate::compressed::decoder(codec, raw)
                .map_err(|e| stream_error(codec, path, 0, e))?;
            (Source::Stream(dec, codec), 0, u64::MAX)
        }
    })
}

/// A growable window over the source: `buf[lo..hi]` holds unread bytes whose
/// first byte is at file offset `base + lo`.
struct Window {
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
    base: u64,
}

impl Window {
    /// A window of up to `size` bytes to read from file offset `base` to
    /// about `end`: no larger than those bytes (and one to see the end),
    /// so a small file does not cost a buffer-sized allocation; it grows
    /// when a record runs past `end`.
    fn new(size: usize, base: u64, end: u64) -> Self {
        let span = usize::try_from(end.saturating_sub(base)).unwrap_or(usize::MAX);
        Window {
            buf: spare_buffer(size.min(span.saturating_add(1)).max(64)),
            lo: 0,
            hi: 0,
            base,
        }
    }

    fn offset(&self) -> u64 {
        self.base + self.lo as u64
    }

    /// Moves unread bytes to the front, grows the buffer if it is full, and
    /// reads more. Returns the bytes read (0 at end of input).
    fn refill(&mut self, src: &mut Source, path: &Path) -> Result<usize> {
        if self.lo > 0 {
            self.buf.copy_within(self.lo..self.hi, 0);
            self.base += self.lo as u64;
            self.hi -= self.lo;
            self.lo = 0;
        }
        if self.hi == self.buf.len() {
            let grown = self.buf.len() * 2;
            self.buf.resize(grown, 0);
        }
        let at = self.base + self.hi as u64;
        let n = src.read(path, at, &mut self.buf[self.hi..])?;
        self.hi += n;
        Ok(n)
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        keep_spare(std::mem::take(&mut self.buf));
    }
}

/// The largest read buffer a thread keeps for its next window.
const SPARE_MAX: usize = 8 << 20;

thread_local! {
    /// The last window's buffer, for the next window on this thread. A
    /// fresh megabyte buffer is fresh pages (large allocations are mapped
    /// and unmapped, see the CLI's allocator settings): the kernel zeroed
    /// them on first touch, which cost a map task of a small split more
    /// (0.7 ms) than reading its megabyte did.
    static SPARE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A buffer of `len` bytes, the thread's spare one if it has one.
fn spare_buffer(len: usize) -> Vec<u8> {
    let mut buf = SPARE.with(|s| std::mem::take(&mut *s.borrow_mut()));
    buf.resize(len, 0);
    buf
}

/// Keeps `buf` as the thread's spare buffer if it is larger than the one
/// kept and not too large.
fn keep_spare(buf: Vec<u8>) {
    if buf.capacity() <= SPARE_MAX {
        SPARE.with(|s| {
            let mut s = s.borrow_mut();
            if buf.capacity() > s.capacity() {
                *s = buf;
            }
        });
    }
}

fn strip_cr(line: &[u8]) -> &[u8] {
    match line.split_last() {
        Some((b'\r', rest)) => rest,
        _ => line,
    }
}

fn scan_lines<E, F>(
    mut src: Source,
    path: &Path,
    first: u64,
    mut skip_first: bool,
    end: u64,
    opts: &ReadOptions,
    mut f: F,
) -> std::result::Result<u64, E>
where
    E: From<FormatError>,
    F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
{
    let mut w = Window::new(opts.buffer_size, first, end);
    let mut consumed = 0u64;
    // `scanned` bytes of the pending line are known to hold no newline.
    let mut scanned = 0usize;
    loop {
        while let Some(i) = memchr::memchr(b'\n', &w.buf[w.lo + scanned..w.hi]) {
            let len = scanned + i;
            scanned = 0;
            let off = w.offset();
            if !skip_first && off >= end {
                return Ok(consumed);
            }
            if !skip_first {
                check_len(path, off, len, opts.max_record)?;
                f(off, strip_cr(&w.buf[w.lo..w.lo + len]))?;
                consumed += len as u64 + 1;
            }
            skip_first = false;
            w.lo += len + 1;
        }
        if skip_first {
            // The partial line belongs to the previous split: drop it unread.
            w.lo = w.hi;
            scanned = 0;
        } else {
            scanned = w.hi - w.lo;
            if w.offset() >= end {
                return Ok(consumed);
            }
            check_len(path, w.offset(), scanned, opts.max_record)?;
        }
        if w.refill(&mut src, path)? == 0 {
            break;
        }
    }
    if w.hi > w.lo && !skip_first {
        f(w.offset(), strip_cr(&w.buf[w.lo..w.hi]))?;
        consumed += (w.hi - w.lo) as u64;
    }
    Ok(consumed)
}

/// Reads the lines of a text split in blocks: `f(offset, block)` gets whole
/// lines, each ending in `\n` but perhaps the last line of the file, never
/// a line cut in two, and exactly the lines the split owns. Searching a
/// block at once (grep) costs far less than a call per line. Returns the
/// bytes consumed. Lines longer than `opts.max_record` fail as in
/// [`read_split`].
pub fn read_line_blocks<E, F>(
    split: &Split,
    opts: &ReadOptions,
    mut f: F,
) -> std::result::Result<u64, E>
where
    E: From<FormatError>,
    F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
{
    let path = split.file.path.as_path();
    if let Some(r) = &split.file.resident {
        return resident_line_blocks(r.bytes(), 0, path, opts, f);
    }
    if let Some(into) = filling(split) {
        return fill_and_scan(split, into, opts, RecordFormat::Lines, |data, base| {
            resident_line_blocks(data, base, path, opts, &mut f)
        });
    }
    let (mut src, first, end) = open_at(split, RecordFormat::Lines)?;
    let mut w = Window::new(opts.buffer_size.min(opts.max_record + 1), first, end);
    let mut skip_first = src.skips_first(split)?;
    let mut consumed = 0u64;
    loop {
        if skip_first {
            match memchr::memchr(b'\n', &w.buf[w.lo..w.hi]) {
                Some(i) => {
                    w.lo += i + 1;
                    skip_first = false;
                }
                None => w.lo = w.hi,
            }
        }
        if !skip_first {
            let off = w.offset();
            if off >= end {
                return Ok(consumed);
            }
            let limit = usize::try_from(end - off).unwrap_or(usize::MAX);
            if let Some((len, done)) = block_cut(&w.buf[w.lo..w.hi], limit) {
                f(off, &w.buf[w.lo..w.lo + len])?;
                consumed += len as u64;
                w.lo += len;
                if done {
                    return Ok(consumed);
                }
            }
            check_len(path, w.offset(), w.hi - w.lo, opts.max_record)?;
        }
        if w.refill(&mut src, path)? == 0 {
            break;
        }
    }
    if !skip_first && w.hi > w.lo && w.offset() < end {
        f(w.offset(), &w.buf[w.lo..w.hi])?;
        consumed += (w.hi - w.lo) as u64;
    }
    Ok(consumed)
}

/// The records of a whole file held in memory, handed out as slices of it
/// (no copy): the in-memory counterpart of the scanners below, with the
/// same record limits and errors.
fn scan_resident<E, F>(
    data: &[u8],
    base: u64,
    path: &Path,
    format: RecordFormat,
    opts: &ReadOptions,
    mut f: F,
) -> std::result::Result<u64, E>
where
    E: From<FormatError>,
    F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
{
    let size = match format {
        RecordFormat::Lines => {
            let mut at = 0usize;
            for end in memchr::memchr_iter(b'\n', data) {
                let off = base + at as u64;
                check_len(path, off, end - at, opts.max_record)?;
                f(off, strip_cr(&data[at..end]))?;
                at = end + 1;
            }
            if at < data.len() {
                let off = base + at as u64;
                check_len(path, off, data.len() - at, opts.max_record)?;
                f(off, strip_cr(&data[at..]))?;
            }
            return Ok(data.len() as u64);
        }
        RecordFormat::Fixed(_) | RecordFormat::Paged(_) => record_size(format),
    };
    let records = data.chunks_exact(size);
    let trailing = records.remainder().len();
    for (i, r) in records.enumerate() {
        let at = base + (i * size) as u64;
        match format {
            RecordFormat::Paged(_) => crate::paged::page_records(path, at, r, &mut f)?,
            _ => f(at, r)?,
        }
    }
    if trailing > 0 {
        let at = base + (data.len() - trailing) as u64;
        let detail = format!("{trailing} trailing bytes, records are {size} bytes");
        return Err(FormatError::truncated(path, at, detail).into());
    }
    Ok(data.len() as u64)
}

/// [`read_line_blocks`] over a whole file held in memory: blocks of whole
/// lines of about `opts.buffer_size` bytes, each a slice of it.
fn resident_line_blocks<E, F>(
    data: &[u8],
    base: u64,
    path: &Path,
    opts: &ReadOptions,
    mut f: F,
) -> std::result::Result<u64, E>
where
    E: From<FormatError>,
    F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
{
    let step = opts.buffer_size.max(1);
    let mut at = 0usize;
    while at < data.len() {
        let rest = &data[at..];
        let len = match memchr::memchr(b'\n', &rest[step.min(rest.len()) - 1..]) {
            Some(j) => step.min(rest.len()) + j,
            None => rest.len(),
        };
        let off = base + at as u64;
        // A block no longer than the limit holds no line over it; the
        // longest line of a larger one is looked for (a pass over every
        // line of it: as long again as grep's scan of a cached block).
        if len > opts.max_record {
            check_len(path, off, longest_line(&rest[..len]), opts.max_record)?;
        }
        f(off, &rest[..len])?;
        at += len;
    }
    Ok(data.len() as u64)
}

/// Bytes of one fixed-length record (a page of paged records is one);
/// lines have no size and give 1.
fn record_size(format: RecordFormat) -> usize {
    match format {
        RecordFormat::Lines => 1,
        RecordFormat::Fixed(n) => n.max(1),
        RecordFormat::Paged(n) => n.max(crate::paged::PAGE_HEADER),
    }
}

/// The fill of a split being admitted to a cache, and its memory, if the
/// split has one not taken yet, of its checked block's length (memory of
/// another length is dropped, the fill's room given back, and the block
/// read as a checked one).
fn filling(split: &Split) -> Option<Filling<'_>> {
    let fill = split.file.fill.as_ref()?;
    let sums = split.file.checks.as_ref()?;
    let memory = fill.0.take()?;
    (memory.bytes().len() as u64 == sums.len).then_some(Filling {
        fill: fill.0.as_ref(),
        memory,
        sums,
    })
}

/// A block to read into a fill's memory: the fill, the memory, and the
/// block's chunk checksums.
struct Filling<'a> {
    fill: &'a dyn Fill,
    memory: Box<dyn FillMemory>,
    sums: &'a Arc<ChunkSums>,
}

/// Reads a stored block straight into `memory` (a [`Fill`]'s: the block
/// being admitted to a cache), a window of whole chunks at a time, each
/// chunk verified there ([`CheckedReader`]), and hands `scan` every run of
/// whole records as soon as it has arrived: `scan(records, offset)`. The
/// records are scanned where they will be cached, with no copy into a
/// buffer of the reader's own, and the scan keeps pace with the disk as
/// a streaming read does. Once every byte is in, the memory goes to
/// [`Fill::filled`]; a failure drops it.
fn fill_and_scan<E>(
    split: &Split,
    into: Filling<'_>,
    opts: &ReadOptions,
    format: RecordFormat,
    mut scan: impl FnMut(&[u8], u64) -> std::result::Result<u64, E>,
) -> std::result::Result<u64, E>
where
    E: From<FormatError>,
{
    let path = split.file.path.as_path();
    let Filling {
        fill,
        mut memory,
        sums,
    } = into;
    let mut reader = CheckedReader::open(path, sums.clone())?;
    let len = memory.bytes().len();
    // Windows of whole chunks, so the reader verifies them in place.
    let chunk = sums.chunk.max(1) as usize;
    let window = opts.buffer_size.max(1).div_ceil(chunk) * chunk;
    let (mut filled, mut done) = (0usize, 0usize);
    loop {
        if filled < len {
            let end = (filled + window).min(len);
            let n = reader.read_into(&mut memory.bytes_mut()[filled..end])?;
            if n == 0 {
                let detail = "the block ends before its checksums do";
                return Err(FormatError::truncated(path, filled as u64, detail).into());
            }
            filled += n;
        }
        let data = &memory.bytes()[done..filled];
        let whole = if filled == len {
            data.len()
        } else {
            match format {
                RecordFormat::Lines => memchr::memrchr(b'\n', data).map_or(0, |i| i + 1),
                RecordFormat::Fixed(_) | RecordFormat::Paged(_) => {
                    let n = record_size(format);
                    data.len() / n * n
                }
            }
        };
        if whole > 0 {
            scan(&data[..whole], done as u64)?;
            done += whole;
        }
        if filled == len {
            break;
        }
    }
    fill.filled(memory);
    Ok(len as u64)
}

/// The length of the longest line in `block` (without its `\n`).
fn longest_line(block: &[u8]) -> usize {
    let (mut start, mut longest) = (0, 0);
    for end in memchr::memchr_iter(b'\n', block) {
        longest = longest.max(end - start);
        start = end + 1;
    }
    longest.max(block.len() - start)
}

/// How much of `data` (starting at a line start) to hand out as a block of
/// whole lines, when lines starting before index `limit` are the split's:
/// `(length, whether that finishes the split)`, or `None` when no whole line
/// is there yet.
fn block_cut(data: &[u8], limit: usize) -> Option<(usize, bool)> {
    if limit <= data.len() {
        if let Some(j) = memchr::memchr(b'\n', &data[limit - 1..]) {
            return Some((limit + j, true));
        }
        return memchr::memrchr(b'\n', &data[..limit - 1]).map(|i| (i + 1, false));
    }
    memchr::memrchr(b'\n', data).map(|i| (i + 1, false))
}

fn check_len(path: &Path, offset: u64, len: usize, limit: usize) -> Result<()> {
    if len > limit {
        return Err(FormatError::RecordTooLarge {
            path: path.to_owned(),
            offset,
            limit,
        });
    }
    Ok(())
}

fn scan_fixed<E, F>(
    mut src: Source,
    path: &Path,
    first: u64,
    end: u64,
    size: usize,
    opts: &ReadOptions,
    mut f: F,
) -> std::result::Result<u64, E>
where
    E: From<FormatError>,
    F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
{
    let size = size.max(1);
    let mut w = Window::new(opts.buffer_size.max(size), first, end);
    loop {
        while w.hi - w.lo >= size {
            let off = w.offset();
            if off >= end {
                return Ok(off - first);
            }
            f(off, &w.buf[w.lo..w.lo + size])?;
            w.lo += size;
        }
        if w.offset() >= end {
            return Ok(w.offset() - first);
        }
        if w.refill(&mut src, path)? == 0 {
            break;
        }
    }
    if w.hi > w.lo {
        let detail = format!("{} trailing bytes, records are {size} bytes", w.hi - w.lo);
        return Err(FormatError::truncated(path, w.offset(), detail).into());
    }
    Ok(w.offset() - first)
}

/// Reads whole pages of a split and hands out their records. The file must
/// be a whole number of pages.
fn scan_pages<E, F>(
    src: Source,
    path: &Path,
    first: u64,
    end: u64,
    page: usize,
    opts: &ReadOptions,
    mut f: F,
) -> std::result::Result<u64, E>
where
    E: From<FormatError>,
    F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
{
    let size = record_size(RecordFormat::Paged(page));
    let chunk = (opts.buffer_size / size).max(1) * size;
    scan_fixed(
        src,
        path,
        first,
        end,
        size,
        &ReadOptions {
            buffer_size: chunk,
            ..*opts
        },
        |at, p| crate::paged::page_records(path, at, p, &mut f),
    )
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::Arc;

    use super::*;
    use crate::input::{plan_splits, resolve};

    fn lines_of(path: &Path, split_size: u64, opts: &ReadOptions) -> Vec<(u64, Vec<u8>)> {
        let files = resolve(path.to_str().unwrap()).unwrap();
        let mut out = Vec::new();
        for s in plan_splits(&files, split_size, RecordFormat::Lines) {
            read_split::<FormatError, _>(&s, RecordFormat::Lines, opts, |o, l| {
                out.push((o, l.to_vec()));
                Ok(())
            })
            .unwrap();
        }
        out
    }

    type Records = Vec<(u64, Vec<u8>)>;

    /// Every record `read_split` gives of `split`, with its offset.
    fn records(split: &Split, format: RecordFormat, opts: &ReadOptions) -> Result<Records> {
        let mut out = Vec::new();
        read_split::<FormatError, _>(split, format, opts, |o, r| {
            out.push((o, r.to_vec()));
            Ok(())
        })
        .map(|_| out)
    }

    /// Every record of the whole file at `p`, read from the file and from
    /// the same bytes held in memory.
    fn from_file_and_memory(p: &Path, format: RecordFormat) -> (Result<Records>, Result<Records>) {
        let bytes = std::fs::read(p).unwrap();
        let len = bytes.len() as u64;
        let opts = ReadOptions {
            buffer_size: 7,
            max_record: 1 << 20,
        };
        let read = |split: &Split| records(split, format, &opts);
        let resident = crate::input::Resident(std::sync::Arc::new(bytes));
        let file = read(&Split::whole(0, p.to_owned(), len));
        let memory = read(&Split::resident(0, p.to_owned(), resident));
        (file, memory)
    }

    #[test]
    fn resident_bytes_read_as_their_file_does() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t");
        std::fs::write(&p, b"alpha\nbeta\r\n\ngamma delta\nlast").unwrap();
        let (file, memory) = from_file_and_memory(&p, RecordFormat::Lines);
        assert_eq!(memory.unwrap(), file.unwrap());
        std::fs::write(&p, b"0123456789abcdefghij").unwrap();
        let (file, memory) = from_file_and_memory(&p, RecordFormat::Fixed(5));
        assert_eq!(memory.unwrap(), file.unwrap());
        std::fs::write(&p, b"0123456789abcdefghijXY").unwrap();
        let (file, memory) = from_file_and_memory(&p, RecordFormat::Fixed(5));
        assert_eq!(
            memory.unwrap_err().to_string(),
            file.unwrap_err().to_string()
        );
        // Blocks of whole lines, in place, covering the text once.
        let text = b"one\ntwo two\nthree\n\nfour";
        let r = crate::input::Resident(std::sync::Arc::new(text.to_vec()));
        let split = Split::resident(0, p.clone(), r);
        let opts = ReadOptions {
            buffer_size: 5,
            max_record: 100,
        };
        let mut seen = Vec::new();
        read_line_blocks::<FormatError, _>(&split, &opts, |o, b| {
            assert!(o == 0 || text[o as usize - 1] == b'\n', "block at {o}");
            seen.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, text);
        let tight = ReadOptions {
            buffer_size: 5,
            max_record: 4,
        };
        let e = read_line_blocks::<FormatError, _>(&split, &tight, |_, _| Ok(())).unwrap_err();
        assert!(matches!(e, FormatError::RecordTooLarge { .. }), "{e}");
    }

    /// A fill of plain memory that keeps what is handed back.
    struct VecFill {
        memory: std::sync::Mutex<Option<Vec<u8>>>,
        back: std::sync::Mutex<Option<Vec<u8>>>,
    }

    impl Fill for VecFill {
        fn take(&self) -> Option<Box<dyn FillMemory>> {
            let m = self.memory.lock().unwrap().take()?;
            Some(Box::new(m))
        }
        fn filled(&self, memory: Box<dyn FillMemory>) {
            let m = memory.into_any().downcast::<Vec<u8>>().unwrap();
            *self.back.lock().unwrap() = Some(*m);
        }
    }

    /// A block read into a fill's memory gives the records a checked read
    /// of it gives, at the same offsets, in both read modes, and hands the
    /// memory back holding the block; a damaged chunk fails the read, no
    /// record of it or after it is seen, and nothing is handed back.
    #[test]
    fn a_filling_read_scans_in_place_what_a_checked_read_gives() {
        use crate::chunked::{ChunkSums, CHUNK};
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("blk");
        let mut text = Vec::new();
        let mut i = 0u64;
        while text.len() < 3 * CHUNK as usize + 777 {
            let _ = writeln!(text, "{}", "w".repeat((i * 7919 % 3000) as usize));
            i += 1;
        }
        text.truncate(3 * CHUNK as usize + 777); // the last line unended
        let fixed: Vec<u8> = (0..7 * 30_000u32).map(|x| (x % 251) as u8).collect();
        let opts = ReadOptions {
            buffer_size: 100,
            max_record: 1 << 20,
        };
        for (bytes, format) in [
            (&text, RecordFormat::Lines),
            (&fixed, RecordFormat::Fixed(7)),
        ] {
            std::fs::write(&p, bytes).unwrap();
            let sums = Arc::new(ChunkSums::of(bytes));
            let len = bytes.len() as u64;
            let fill = Arc::new(VecFill {
                memory: std::sync::Mutex::new(Some(vec![0; bytes.len()])),
                back: std::sync::Mutex::new(None),
            });
            let read = |split: &Split| records(split, format, &opts);
            let checked = read(&Split::whole_checked(0, p.clone(), len, Some(sums.clone())));
            let split = Split::whole_filling(
                0,
                p.clone(),
                len,
                sums.clone(),
                crate::input::FillTo(fill.clone()),
            );
            assert_eq!(read(&split).unwrap(), checked.unwrap(), "{format:?}");
            assert_eq!(fill.back.lock().unwrap().as_deref(), Some(&bytes[..]));
            // Taken once: a second read reads the file as a checked one.
            assert!(fill.take().is_none());
            let again = read(&Split::whole_checked(0, p.clone(), len, Some(sums.clone())));
            assert_eq!(read(&split).unwrap(), again.unwrap());
            // Memory of another length is not read into.
            let short = Arc::new(VecFill {
                memory: std::sync::Mutex::new(Some(vec![0; bytes.len() - 1])),
                back: std::sync::Mutex::new(None),
            });
            let to_short = crate::input::FillTo(short.clone());
            let split = Split::whole_filling(0, p.clone(), len, sums, to_short);
            assert_eq!(read(&split).unwrap(), read(&split).unwrap());
            assert!(short.back.lock().unwrap().is_none() && short.take().is_none());
        }
        // Line blocks: whole lines, covering the block once.
        std::fs::write(&p, &text).unwrap();
        let sums = Arc::new(ChunkSums::of(&text));
        let fill = || {
            let f = Arc::new(VecFill {
                memory: std::sync::Mutex::new(Some(vec![0; text.len()])),
                back: std::sync::Mutex::new(None),
            });
            let split = Split::whole_filling(
                0,
                p.clone(),
                text.len() as u64,
                sums.clone(),
                crate::input::FillTo(f.clone()),
            );
            let mut seen = Vec::new();
            let r = read_line_blocks::<FormatError, _>(&split, &opts, |o, b| {
                assert_eq!(o as usize, seen.len(), "blocks in order");
                assert!(o == 0 || text[o as usize - 1] == b'\n', "block at {o}");
                seen.extend_from_slice(b);
                Ok(())
            });
            let back = f.back.lock().unwrap().take();
            (r, seen, back)
        };
        let (r, seen, back) = fill();
        r.unwrap();
        assert_eq!(seen, text);
        assert_eq!(back.as_deref(), Some(&text[..]));
        let mut bad = text.clone();
        bad[2 * CHUNK as usize + 5] ^= 1;
        std::fs::write(&p, &bad).unwrap();
        let (r, seen, back) = fill();
        assert!(matches!(r, Err(FormatError::Damaged { .. })), "{r:?}");
        assert!(
            seen.len() <= 2 * CHUNK as usize,
            "{} bytes seen",
            seen.len()
        );
        assert_eq!(back, None, "a damaged block is not handed back");
    }

    #[test]
    fn every_line_is_read_once_for_every_split_size() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.txt");
        let text = b"alpha\nbeta\r\n\ngamma delta\nlast-no-newline";
        std::fs::write(&p, text).unwrap();
        let small = ReadOptions {
            buffer_size: 64,
            max_record: 1 << 20,
        };
        let want = lines_of(&p, 1 << 20, &small);
        assert_eq!(want.len(), 5);
        assert_eq!(want[1], (6, b"beta".to_vec()));
        assert_eq!(want[4].1, b"last-no-newline");
        for size in 1..=text.len() as u64 {
            assert_eq!(lines_of(&p, size, &small), want, "split size {size}");
        }
    }

    #[test]
    fn line_blocks_hold_exactly_the_lines_of_each_split() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.txt");
        let text = b"alpha\nbeta\r\n\ngamma delta\nlast-no-newline";
        std::fs::write(&p, text).unwrap();
        let opts = ReadOptions {
            buffer_size: 8,
            max_record: 1 << 20,
        };
        let want = lines_of(&p, 1 << 20, &opts);
        let files = resolve(p.to_str().unwrap()).unwrap();
        for size in 1..=text.len() as u64 {
            let mut got = Vec::new();
            for s in plan_splits(&files, size, RecordFormat::Lines) {
                read_line_blocks::<FormatError, _>(&s, &opts, |off, block| {
                    let mut at = off;
                    for line in block.split_inclusive(|&b| b == b'\n') {
                        let body = line.strip_suffix(b"\n").unwrap_or(line);
                        got.push((at, strip_cr(body).to_vec()));
                        at += line.len() as u64;
                    }
                    Ok(())
                })
                .unwrap();
            }
            assert_eq!(got, want, "split size {size}");
        }
    }

    #[test]
    fn gzip_reads_like_plain_text() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.gz");
        let mut enc = flate2::write::GzEncoder::new(File::create(&p).unwrap(), Default::default());
        enc.write_all(b"one\ntwo\nthree\n").unwrap();
        enc.finish().unwrap();
        let got = lines_of(&p, 2, &ReadOptions::default());
        let lines: Vec<_> = got.into_iter().map(|(_, l)| l).collect();
        assert_eq!(lines, [b"one".to_vec(), b"two".to_vec(), b"three".to_vec()]);
    }

    #[test]
    fn truncated_gzip_is_an_error_naming_the_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), Default::default());
        enc.write_all(&vec![b'a'; 100_000]).unwrap();
        let bytes = enc.finish().unwrap();
        std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
        let files = resolve(p.to_str().unwrap()).unwrap();
        let s = &plan_splits(&files, 1 << 20, RecordFormat::Lines)[0];
        let err = read_split::<FormatError, _>(
            s,
            RecordFormat::Lines,
            &ReadOptions::default(),
            |_, _| Ok(()),
        )
        .unwrap_err();
        assert!(matches!(err, FormatError::Gzip { .. }), "{err}");
        assert!(err.to_string().contains("t.gz"));
    }

    #[test]
    fn overlong_line_is_refused_naming_the_limit() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big.txt");
        std::fs::write(&p, [b"ok\n".as_slice(), &vec![b'x'; 5000]].concat()).unwrap();
        let files = resolve(p.to_str().unwrap()).unwrap();
        let s = &plan_splits(&files, 1 << 20, RecordFormat::Lines)[0];
        let opts = ReadOptions {
            buffer_size: 256,
            max_record: 1000,
        };
        let err =
            read_split::<FormatError, _>(s, RecordFormat::Lines, &opts, |_, _| Ok(())).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("offset 3") && msg.contains("--max-record-size"),
            "{msg}"
        );
    }

    #[test]
    fn fixed_records_split_cleanly_and_truncation_fails() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.bin");
        let data: Vec<u8> = (0..1000u32).map(|i| (i / 100) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let files = resolve(p.to_str().unwrap()).unwrap();
        let mut seen = Vec::new();
        for s in plan_splits(&files, 250, RecordFormat::Fixed(100)) {
            read_split::<FormatError, _>(
                &s,
                RecordFormat::Fixed(100),
                &ReadOptions::default(),
                |o, r| {
                    assert_eq!(r.len(), 100);
                    seen.push((o, r[0]));
                    Ok(())
                },
            )
            .unwrap();
        }
        assert_eq!(
            seen,
            (0..10u64).map(|i| (i * 100, i as u8)).collect::<Vec<_>>()
        );
        std::fs::write(&p, &data[..950]).unwrap();
        let files = resolve(p.to_str().unwrap()).unwrap();
        let s = &plan_splits(&files, 1 << 20, RecordFormat::Fixed(100))[0];
        let err = read_split::<FormatError, _>(
            s,
            RecordFormat::Fixed(100),
            &ReadOptions::default(),
            |_, _| Ok(()),
        )
        .unwrap_err();
        assert!(err.to_string().contains("truncated at offset 900"), "{err}");
    }
}
