//! A split of a SequenceFile's body: finding its first sync, then its
//! records or blocks (the layout is in the module doc above).

use crate::input::Split;
use crate::rows::Projection;
use crate::{FormatError, Result};

use crate::positioned::Positioned;

use super::{
    columns, i32, read_header, read_vint, vint, Compression, Header, SeqCodec, Writable, FORMAT,
    SYNC_LEN,
};

/// The escape before a sync, as its 4 bytes.
const ESCAPE: [u8; 4] = [0xff; 4];
/// Bytes of an escape and its sync.
const MARK: usize = 4 + SYNC_LEN;

/// Reads every record of `split` (see the module doc for which records a
/// split owns), calling `f(offset, record)` with the projected columns
/// (`key`, `value`; the value alone by default) as text; returns the bytes
/// read. `max_record` bounds a record's (and a block buffer's) length.
pub fn read_split<E, F>(
    split: &Split,
    proj: &Projection,
    max_record: usize,
    mut f: F,
) -> std::result::Result<u64, E>
where
    E: From<FormatError>,
    F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
{
    let cols = columns(split, proj)?;
    let mut input = Positioned::of_file(&split.file, split.start..split.end, FORMAT)?;
    let header = read_header(&mut input)?;
    let first = if split.start == 0 {
        Some(header.len)
    } else {
        find_sync(&mut input, &header, split.start.max(header.len), split.end)?
    };
    let Some(first) = first else {
        return Ok(0);
    };
    input.seek(first)?;
    let mut body = Body {
        header: &header,
        input,
        end: split.end,
        max: max_record,
        cols,
        sep: proj.sep,
        rec: Vec::new(),
        raw: Vec::new(),
        inflated: Vec::new(),
    };
    body.run(&mut f)?;
    Ok(body.input.pos - first)
}

/// The offset of the first sync whose escape starts in `[from, end)`.
fn find_sync(
    input: &mut Positioned<'_>,
    header: &Header,
    from: u64,
    end: u64,
) -> Result<Option<u64>> {
    let mut needle = [0u8; MARK];
    needle[..4].copy_from_slice(&ESCAPE);
    needle[4..].copy_from_slice(&header.sync);
    input.find(&needle, from, end)
}

/// The reading of a split's body.
struct Body<'h, 'p> {
    header: &'h Header,
    input: Positioned<'p>,
    end: u64,
    max: usize,
    cols: Vec<usize>,
    sep: u8,
    rec: Vec<u8>,
    raw: Vec<u8>,
    inflated: Vec<u8>,
}

impl Body<'_, '_> {
    fn run<E, F>(&mut self, f: &mut F) -> std::result::Result<(), E>
    where
        E: From<FormatError>,
        F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
    {
        let block = self.header.compression == Compression::Block;
        loop {
            let at = self.input.pos;
            let mut len = [0u8; 4];
            if !self.input.fill(&mut len, "a record's length")? {
                return Ok(());
            }
            let len = i32::from_be_bytes(len);
            if len == -1 {
                self.check_sync(at)?;
                if at >= self.end {
                    return Ok(());
                }
                if block {
                    self.block(at, f)?;
                }
                continue;
            }
            if block {
                let detail = "a compressed block does not follow a sync";
                return Err(FormatError::corrupt(self.input.path, at, detail).into());
            }
            self.record(at, len, f)?;
        }
    }

    fn check_sync(&mut self, at: u64) -> Result<()> {
        let mut sync = [0u8; SYNC_LEN];
        self.input.exact(&mut sync, "a sync marker")?;
        if sync != self.header.sync {
            let detail = "bad sync marker (not the header's)";
            return Err(FormatError::corrupt(self.input.path, at, detail));
        }
        Ok(())
    }

    /// One record of a file that is not block-compressed.
    fn record<E, F>(&mut self, at: u64, len: i32, f: &mut F) -> std::result::Result<(), E>
    where
        E: From<FormatError>,
        F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
    {
        let path = self.input.path;
        let klen = i32(&mut self.input, "a record's key length")?;
        if len < 0 || klen < 0 || klen > len {
            let detail = format!("record length {len}, key length {klen}");
            return Err(FormatError::corrupt(path, at, detail).into());
        }
        let len = len as usize;
        if len > self.max {
            return Err(too_large(path, at, self.max).into());
        }
        self.raw.resize(len, 0);
        self.input.exact(&mut self.raw, "a record")?;
        let (key, value) = self.raw.split_at(klen as usize);
        let value = match self.header.codec {
            Some(codec) => {
                codec
                    .inflate(value, &mut self.inflated)
                    .map_err(|e| bad_data(path, codec, at, "record", &e))?;
                &self.inflated[..]
            }
            None => value,
        };
        self.rec.clear();
        let (kw, vw) = self.writables();
        push_record(&mut self.rec, &self.cols, self.sep, (kw, key), (vw, value))
            .ok_or_else(|| FormatError::corrupt(path, at, "a record is not of its class"))?;
        f(at, &self.rec)
    }

    fn writables(&self) -> (Writable, Writable) {
        (
            Writable::of_class(&self.header.key_class),
            Writable::of_class(&self.header.value_class),
        )
    }

    /// One block, after its sync at `at`.
    fn block<E, F>(&mut self, at: u64, f: &mut F) -> std::result::Result<(), E>
    where
        E: From<FormatError>,
        F: FnMut(u64, &[u8]) -> std::result::Result<(), E>,
    {
        let path = self.input.path;
        let n = read_vint(&mut self.input, "a block's record count")?;
        if n < 0 || n as u64 > self.max as u64 {
            return Err(FormatError::corrupt(path, at, format!("a block of {n} records")).into());
        }
        let key_lens = self.buffer(at, "key lengths")?;
        let keys = self.buffer(at, "keys")?;
        let value_lens = self.buffer(at, "value lengths")?;
        let values = self.buffer(at, "values")?;
        let (kw, vw) = self.writables();
        let bad = |what: &str| {
            let detail = format!("block at {at}: its {what} do not add up to its {n} records");
            FormatError::corrupt(path, at, detail)
        };
        let (mut kl, mut k, mut vl, mut v) =
            (&key_lens[..], &keys[..], &value_lens[..], &values[..]);
        for i in 0..n as u64 {
            let key = take(&mut kl, &mut k).ok_or_else(|| bad("keys"))?;
            let value = take(&mut vl, &mut v).ok_or_else(|| bad("values"))?;
            self.rec.clear();
            push_record(&mut self.rec, &self.cols, self.sep, (kw, key), (vw, value))
                .ok_or_else(|| FormatError::corrupt(path, at, "a record is not of its class"))?;
            f(at + i, &self.rec)?;
        }
        if !(kl.is_empty() && k.is_empty() && vl.is_empty() && v.is_empty()) {
            return Err(bad("buffers").into());
        }
        Ok(())
    }

    /// One of a block's four buffers, decompressed.
    fn buffer(&mut self, block: u64, what: &str) -> Result<Vec<u8>> {
        let path = self.input.path;
        let at = self.input.pos;
        let n = read_vint(&mut self.input, "a block's buffer length")?;
        if n < 0 || n as u64 > self.max as u64 {
            let detail = format!("block at {block}: a buffer of {n} bytes");
            return Err(FormatError::corrupt(path, at, detail));
        }
        self.raw.resize(n as usize, 0);
        self.input.exact(&mut self.raw, "a compressed block")?;
        let codec = self
            .header
            .codec
            .expect("a block-compressed file has a codec");
        let mut out = Vec::new();
        codec
            .inflate(&self.raw, &mut out)
            .map_err(|e| bad_data(path, codec, block, what, &e))?;
        Ok(out)
    }
}

/// The next length from `lens` and that many bytes from `data`.
fn take<'a>(lens: &mut &[u8], data: &mut &'a [u8]) -> Option<&'a [u8]> {
    let (n, used) = vint(lens)?;
    *lens = &lens[used..];
    let n = usize::try_from(n).ok()?;
    let (one, rest) = (data.get(..n)?, data.get(n..)?);
    *data = rest;
    Some(one)
}

/// Appends a record's projected columns (0 the key, 1 the value) as text.
fn push_record(
    out: &mut Vec<u8>,
    cols: &[usize],
    sep: u8,
    key: (Writable, &[u8]),
    value: (Writable, &[u8]),
) -> Option<()> {
    for (i, &c) in cols.iter().enumerate() {
        if i > 0 {
            out.push(sep);
        }
        let (w, raw) = if c == 0 { key } else { value };
        w.push_text(raw, out)?;
    }
    Some(())
}

fn bad_data(
    path: &std::path::Path,
    codec: SeqCodec,
    at: u64,
    what: &str,
    e: &std::io::Error,
) -> FormatError {
    FormatError::Decompress {
        path: path.to_owned(),
        codec: codec.name(),
        place: format!("in the {what} of the block or record at offset {at}"),
        detail: e.to_string(),
    }
}

fn too_large(path: &std::path::Path, at: u64, limit: usize) -> FormatError {
    FormatError::RecordTooLarge {
        path: path.to_owned(),
        offset: at,
        limit,
    }
}
