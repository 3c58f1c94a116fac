//! Shuffle fetches: one partition of a map attempt's output, verified
//! block by block as it arrives, and the bytes it moved counted.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::TcpStream;
use std::path::Path;

use sluice_formats::spill;

use super::client::call;
use super::frame::Request;
use crate::block::local_write_error;
use crate::ClusterError;

type Result<T> = std::result::Result<T, ClusterError>;

/// Fetches partition `part` of a map attempt's output from `addr` into a
/// one-partition spill file at `out`, verifying every block; returns the
/// segment's bytes. `token` is the job's token. `watch.received` counts
/// the bytes as they arrive (a fetch cut short counts what crossed); once
/// `watch.stop` says so the fetch ends between two blocks (its attempt
/// was killed: the rest need not cross the network).
pub fn fetch(
    addr: &str,
    token: &[u8],
    req: &Request,
    out: &Path,
    watch: &FetchWatch,
) -> Result<u64> {
    let (mut s, len, records) = call(addr, req, token, None)?;
    let f = File::create(out).map_err(|e| local_write_error(out, e))?;
    let mut w = BufWriter::with_capacity(256 << 10, f);
    let counted = watch.received.load(std::sync::atomic::Ordering::Relaxed);
    let mut r = BufReader::with_capacity(256 << 10, &mut s);
    let copied = copy_blocks(&mut r, &mut w, (len, watch), addr, out);
    drop(r);
    if copied.is_err() {
        count_unread(s.tcp(), watch, counted);
    }
    copied?;
    let mut f = w
        .into_inner()
        .map_err(|e| local_write_error(out, e.into_error()))?;
    spill::seal_segment(&mut f, len, records).map_err(|e| local_write_error(out, e))?;
    Ok(len)
}

/// For a fetch cut short: adds to `watch.received` what this connection
/// received beyond what the fetch counted since `counted`, as the kernel
/// counts it. A fetch stopped between blocks (its attempt killed) leaves
/// data that crossed the network unread in its buffers, the socket's
/// receive buffer among them (several megabytes on a link with delay),
/// and the reports' bytes between data centers would miss it. (A fetch
/// that ends well has counted every byte of its data; the answer's few
/// bytes of header are left out, as TCP's are.) Concurrent fetches of the
/// same attempt can only make the difference smaller, never count a byte
/// twice.
fn count_unread(s: &TcpStream, watch: &FetchWatch, counted: u64) {
    use std::sync::atomic::Ordering::Relaxed;
    let Some(kernel) = tcp_bytes_received(s) else {
        return;
    };
    let ours = watch.received.load(Relaxed).saturating_sub(counted);
    watch
        .received
        .fetch_add(kernel.saturating_sub(ours), Relaxed);
}

/// Payload bytes the connection has received (`TCP_INFO`'s
/// `tcpi_bytes_received`, Linux 4.1 and later); `None` where unknown.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn tcp_bytes_received(s: &TcpStream) -> Option<u64> {
    use std::os::fd::AsRawFd;
    // SAFETY: `info` is a plain C struct the kernel fills up to `len`
    // bytes (it never writes more than it is given); both live for the
    // call, and the descriptor is the stream's own.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    let need = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_received) + 8;
    (rc == 0 && len as usize >= need).then_some(info.tcpi_bytes_received)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tcp_bytes_received(_: &TcpStream) -> Option<u64> {
    None
}

/// What a fetch reports as it goes, and what stops it.
#[derive(Default)]
pub struct FetchWatch {
    /// Bytes received so far.
    pub received: std::sync::atomic::AtomicU64,
    /// Set to stop the fetch (between blocks).
    pub stop: std::sync::atomic::AtomicBool,
}

/// Copies `len` bytes of spill blocks to `out` (through `w`), checking
/// each block's frame and CRC. Failing to write `out` is a local error
/// ([`ClusterError::Io`] or [`ClusterError::NoSpace`]), never the sender's.
fn copy_blocks(
    r: &mut impl Read,
    w: &mut impl Write,
    (len, watch): (u64, &FetchWatch),
    from: &str,
    out: &Path,
) -> Result<()> {
    use std::sync::atomic::Ordering::Relaxed;
    let corrupt = |msg: String| ClusterError::Corrupt {
        from: from.to_owned(),
        msg,
    };
    let mut left = len;
    let mut payload = Vec::new();
    while left > 0 {
        if watch.stop.load(Relaxed) {
            return Err(ClusterError::Remote("fetch stopped: task killed".into()));
        }
        let mut h = [0u8; 8];
        if left < 8 {
            return Err(corrupt("segment ends inside a block header".into()));
        }
        r.read_exact(&mut h)
            .map_err(|e| ClusterError::net("receiving from", from, e))?;
        let n = u32::from_le_bytes(h[..4].try_into().expect("4 bytes"));
        let crc = u32::from_le_bytes(h[4..].try_into().expect("4 bytes"));
        if n > spill::MAX_BLOCK || u64::from(n) > left - 8 {
            return Err(corrupt(format!("block length {n} out of bounds")));
        }
        payload.resize(n as usize, 0);
        r.read_exact(&mut payload)
            .map_err(|e| ClusterError::net("receiving from", from, e))?;
        watch.received.fetch_add(8 + u64::from(n), Relaxed);
        if crc32c::crc32c(&payload) != crc {
            return Err(corrupt("shuffle block checksum mismatch".into()));
        }
        w.write_all(&h)
            .and_then(|()| w.write_all(&payload))
            .map_err(|e| local_write_error(out, e))?;
        left -= 8 + u64::from(n);
    }
    Ok(())
}
