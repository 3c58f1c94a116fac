//! A block read from its holder chunk by chunk, each chunk checked
//! against the holder's chunk checksums before it is handed out
//! (READ_CHECKED).

use std::io::{BufReader, Read};

use super::client::{call, damaged};
use super::frame::{secret_bytes, Request};
use crate::auth::Secret;
use crate::ClusterError;

type Result<T> = std::result::Result<T, ClusterError>;

/// The largest chunk a READ_CHECKED answer may name (a reader's buffer).
const MAX_CHUNK: u64 = 16 << 20;
/// The smallest (bounding the CRCs a reader takes in to a 1024th of the
/// block).
const MIN_CHUNK: u64 = 4 << 10;
/// How long a holder waits for a streaming reader to take more of a
/// READ_CHECKED block: the reader is a map, which may pause to spill
/// Opens block `id` on the worker at `addr` as a stream whose every
/// chunk is checked against the holder's chunk checksums before it is
/// handed out, and the whole against the catalog's CRC `want_crc` at its
/// end (READ_CHECKED): a reader never uses a byte that failed a check,
/// and holds one chunk in memory. A replica of another length, or one
/// whose bytes fail a check, is [`ClusterError::Damaged`].
pub fn open_checked_stream(
    addr: &str,
    secret: &Secret,
    id: &str,
    want_len: u64,
    want_crc: u32,
) -> Result<CheckedStream> {
    let req = Request::ReadChecked { id: id.into() };
    let (mut s, len, chunk) = call(addr, &req, &secret_bytes(secret), None)?;
    let damaged = |damage: String| damaged(id, addr, damage);
    if len != want_len {
        return Err(damaged(format!("{len} bytes of {want_len}")));
    }
    if !(MIN_CHUNK..=MAX_CHUNK).contains(&chunk) {
        return Err(damaged(format!("a chunk size of {chunk} bytes")));
    }
    let mut raw = vec![0u8; (len.div_ceil(chunk) * 4) as usize];
    s.read_exact(&mut raw)
        .map_err(|e| ClusterError::net("receiving from", addr, e))?;
    let crcs: Vec<u32> = raw
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    // The chunks' CRCs must make up the catalog's: then every chunk that
    // passes its own check is the catalog's block, and no byte handed out
    // can later turn out to be another block's.
    let combined = combine_crcs(&crcs, len, chunk);
    if combined != want_crc {
        return Err(damaged(format!(
            "its checksums belong to other data (block CRC {combined:08x}, the catalog's \
             {want_crc:08x})"
        )));
    }
    Ok(CheckedStream {
        conn: BufReader::with_capacity(256 << 10, s),
        addr: addr.to_owned(),
        id: id.to_owned(),
        len,
        want_crc,
        crcs,
        chunk: Vec::with_capacity(chunk as usize),
        chunk_size: chunk as usize,
        at: 0,
        pos: 0,
        next: 0,
        whole: 0,
        whole_failed: false,
        failed: false,
    })
}

/// The CRC32C of a block of `len` bytes from its chunks' CRCs.
fn combine_crcs(crcs: &[u32], len: u64, chunk: u64) -> u32 {
    let mut left = len;
    crcs.iter().fold(0, |acc, &c| {
        let k = left.min(chunk);
        left -= k;
        crc32c::crc32c_combine(acc, c, k as usize)
    })
}

/// A block arriving from its holder, checked chunk by chunk
/// ([`open_checked_stream`]).
pub struct CheckedStream {
    conn: BufReader<crate::tls::stream::Conn>,
    addr: String,
    id: String,
    len: u64,
    want_crc: u32,
    crcs: Vec<u32>,
    /// The current chunk, checked.
    chunk: Vec<u8>,
    chunk_size: usize,
    /// Bytes of `chunk` handed out.
    at: usize,
    /// Bytes of the block handed out.
    pos: u64,
    /// The next chunk's number.
    next: usize,
    /// CRC32C of the chunks received so far.
    whole: u32,
    /// Every chunk passed but the whole did not match the catalog's CRC.
    whole_failed: bool,
    /// A check or the transfer failed: nothing more is handed out.
    failed: bool,
}

impl CheckedStream {
    /// The holder's data-plane address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Bytes handed out so far.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Whether the last check to fail was the whole block's: the bytes
    /// already handed out passed their chunks' checks yet are not the
    /// catalog's block, so none of them may be used.
    pub fn whole_failed(&self) -> bool {
        self.whole_failed
    }

    /// Receives and checks the next chunk.
    fn refill(&mut self) -> Result<()> {
        let start = self.next as u64 * self.chunk_size as u64;
        let n = (self.len - start).min(self.chunk_size as u64) as usize;
        self.chunk.resize(n, 0);
        self.conn
            .read_exact(&mut self.chunk)
            .map_err(|e| ClusterError::net("receiving from", &self.addr, e))?;
        let damaged = |damage: String| damaged(&self.id, &self.addr, damage);
        let crc = crc32c::crc32c(&self.chunk);
        if crc != self.crcs[self.next] {
            return Err(damaged(format!(
                "checksum mismatch in chunk {} (bytes from {start}): crc {crc:08x}, want {:08x}",
                self.next, self.crcs[self.next]
            )));
        }
        self.whole = crc32c::crc32c_append(self.whole, &self.chunk);
        self.next += 1;
        self.at = 0;
        if start + n as u64 == self.len && self.whole != self.want_crc {
            self.whole_failed = true;
            return Err(damaged(format!(
                "checksum mismatch over the whole block: crc {:08x}, want {:08x}",
                self.whole, self.want_crc
            )));
        }
        Ok(())
    }

    /// Reads into `buf`; a failed check or transfer is the error itself,
    /// after which the stream hands out nothing more.
    pub fn read_checked(&mut self, buf: &mut [u8]) -> Result<usize> {
        if self.failed {
            return Err(ClusterError::Remote(format!(
                "block {} from {}: the stream failed before",
                self.id, self.addr
            )));
        }
        if self.at == self.chunk.len() {
            if self.pos == self.len || buf.is_empty() {
                return Ok(0);
            }
            if let Err(e) = self.refill() {
                self.failed = true;
                self.chunk.clear();
                self.at = 0;
                return Err(e);
            }
        }
        let n = (self.chunk.len() - self.at).min(buf.len());
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        self.pos += n as u64;
        Ok(n)
    }
}
