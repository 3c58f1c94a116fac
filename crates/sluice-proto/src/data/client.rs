//! The client side of the data plane: reading and writing whole blocks,
//! sampling a block's head, a node's samples and link probes.

use std::io::{BufWriter, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use super::frame::{secret_bytes, Request, CONNECT_TIMEOUT, IO_TIMEOUT, STATUS_DAMAGED};
use crate::auth::Secret;
use crate::block::local_write_error;
use crate::capability::Capability;
use crate::sample::Sample;
use crate::tls::stream::Conn;
use crate::ClusterError;

type Result<T> = std::result::Result<T, ClusterError>;

/// A connection to the worker at `addr`: TLS (the handshake done) unless
/// this process runs `--insecure`.
pub(super) fn connect(addr: &str) -> Result<Conn> {
    let sa: SocketAddr = addr
        .to_socket_addrs()
        .map_err(|e| ClusterError::net("resolving", addr, e))?
        .next()
        .ok_or_else(|| ClusterError::Config(format!("no address for {addr}")))?;
    let s = TcpStream::connect_timeout(&sa, CONNECT_TIMEOUT)
        .map_err(|e| ClusterError::net("connecting to", addr, e))?;
    s.set_read_timeout(Some(IO_TIMEOUT))
        .and_then(|()| s.set_write_timeout(Some(IO_TIMEOUT)))
        .and_then(|()| s.set_nodelay(true))
        .map_err(|e| ClusterError::net("configuring", addr, e))?;
    Conn::client(s, addr, crate::tls::current().as_deref())
}

/// Sends `req` signed with `key` (and its `data`, through a large
/// buffer: full TLS records) and reads the response header.
pub(super) fn call(
    addr: &str,
    req: &Request,
    key: &[u8],
    data: Option<&mut dyn Read>,
) -> Result<(Conn, u64, u64)> {
    call_wire(addr, req, &req.encode(key), data)
}

/// Sends `wire` (`req` encoded and signed) and reads the response header.
fn call_wire(
    addr: &str,
    req: &Request,
    wire: &[u8],
    data: Option<&mut dyn Read>,
) -> Result<(Conn, u64, u64)> {
    let mut s = connect(addr)?;
    let mut w = BufWriter::with_capacity(256 << 10, &mut s);
    let sent = w.write_all(wire).and_then(|()| match data {
        Some(d) => std::io::copy(d, &mut w).map(|_| ()),
        None => Ok(()),
    });
    let sent = sent.and_then(|()| w.flush());
    // Unsent bytes are dropped, not flushed again.
    let _ = w.into_parts();
    if let Err(e) = sent {
        // The peer may have refused the data and said why.
        return Err(match read_status(&mut s, req, addr) {
            Err(refusal @ (ClusterError::Remote(_) | ClusterError::Damaged { .. })) => refusal,
            _ => ClusterError::net("sending to", addr, e),
        });
    }
    read_status(&mut s, req, addr)?;
    let mut h = [0u8; 16];
    s.read_exact(&mut h)
        .map_err(|e| ClusterError::net("reading answer from", addr, e))?;
    let len = u64::from_le_bytes(h[..8].try_into().expect("8 bytes"));
    let records = u64::from_le_bytes(h[8..].try_into().expect("8 bytes"));
    Ok((s, len, records))
}

/// Reads an answer's status; an error or damage report becomes an error.
fn read_status(s: &mut Conn, req: &Request, addr: &str) -> Result<()> {
    let mut status = [0u8; 1];
    s.read_exact(&mut status)
        .map_err(|e| ClusterError::net("reading answer from", addr, e))?;
    if status[0] == 0 {
        return Ok(());
    }
    let mut n = [0u8; 4];
    s.read_exact(&mut n)
        .map_err(|e| ClusterError::net("reading answer from", addr, e))?;
    let mut msg = vec![0u8; (u32::from_le_bytes(n) as usize).min(1 << 16)];
    s.read_exact(&mut msg)
        .map_err(|e| ClusterError::net("reading answer from", addr, e))?;
    let msg = String::from_utf8_lossy(&msg).into_owned();
    Err(match (status[0], req) {
        (
            STATUS_DAMAGED,
            Request::ReadBlock { id } | Request::ReadHead { id, .. } | Request::ReadChecked { id },
        ) => ClusterError::Damaged {
            block: id.clone(),
            holder: addr.to_owned(),
            damage: msg,
        },
        _ => ClusterError::Remote(format!("{addr}: {msg}")),
    })
}

/// Reads block `id` from the worker at `addr` into `out`, checking its
/// length and CRC32C; returns its length. A replica of another length or
/// CRC is [`ClusterError::Damaged`]; a transfer cut short is a network
/// error.
pub fn read_block(
    addr: &str,
    secret: &Secret,
    id: &str,
    want_len: u64,
    want_crc: u32,
    out: &mut impl Write,
) -> Result<u64> {
    let (s, len, _) = call(
        addr,
        &Request::ReadBlock { id: id.into() },
        &secret_bytes(secret),
        None,
    )?;
    read_checked_body(s, len, (addr, id), (want_len, want_crc), out)
}

/// Reads a block's `len` bytes from `s` into `out`, checking them
/// against the length and CRC32C wanted.
fn read_checked_body(
    mut s: Conn,
    len: u64,
    (addr, id): (&str, &str),
    (want_len, want_crc): (u64, u32),
    out: &mut impl Write,
) -> Result<u64> {
    let damaged = |damage: String| damaged(id, addr, damage);
    if len != want_len {
        return Err(damaged(format!("{len} bytes of {want_len}")));
    }
    let (n, crc) = copy_crc(&mut (&mut s).take(len), out, addr)?;
    if n != len {
        return Err(ClusterError::Remote(format!(
            "{addr}: block {id}: the transfer ended after {n} of {len} bytes"
        )));
    }
    if crc != want_crc {
        return Err(damaged(format!(
            "checksum mismatch over the whole block: crc {crc:08x}, want {want_crc:08x}"
        )));
    }
    Ok(n)
}

/// Reads block `id` as [`read_block`] does, with a user's capability
/// for it instead of the secret.
pub fn read_block_capable(
    addr: &str,
    cap: &Capability,
    id: &str,
    want: (u64, u32),
    out: &mut impl Write,
) -> Result<u64> {
    let req = Request::ReadBlock { id: id.into() };
    let (s, len, _) = call_wire(addr, &req, &req.encode_capable(cap), None)?;
    read_checked_body(s, len, (addr, id), want, out)
}

/// Stores a block as [`write_block`] does, with a user's capability for
/// it instead of the secret.
pub fn write_block_capable(
    addr: &str,
    cap: &Capability,
    id: &str,
    data: &mut dyn Read,
    len: u64,
    crc: u32,
) -> Result<()> {
    let req = Request::WriteBlock {
        id: id.into(),
        len,
        crc,
    };
    let wire = req.encode_capable(cap);
    call_wire(addr, &req, &wire, Some(&mut data.take(len)))?;
    Ok(())
}

/// Block `block`'s replica on `holder` is damaged: `damage` says how.
pub(super) fn damaged(block: &str, holder: &str, damage: String) -> ClusterError {
    ClusterError::Damaged {
        block: block.to_owned(),
        holder: holder.to_owned(),
        damage,
    }
}
/// Stores `len` bytes of `data` (CRC32C `crc`) as block `id` on `addr`.
pub fn write_block(
    addr: &str,
    secret: &Secret,
    id: &str,
    data: &mut dyn Read,
    len: u64,
    crc: u32,
) -> Result<()> {
    let req = Request::WriteBlock {
        id: id.into(),
        len,
        crc,
    };
    call(addr, &req, &secret_bytes(secret), Some(&mut data.take(len)))?;
    Ok(())
}

/// The first `max` bytes of block `id` on the worker at `addr` (fewer
/// when the block is shorter). Not checked against the block's CRC, which
/// covers the whole block: for sampling only.
pub fn read_head(addr: &str, secret: &Secret, id: &str, max: u64) -> Result<Vec<u8>> {
    let req = Request::ReadHead { id: id.into(), max };
    let (mut s, len, _) = call(addr, &req, &secret_bytes(secret), None)?;
    read_body(&mut s, len.min(max), addr)
}

/// The `len` bytes of an answer's body.
fn read_body(s: &mut Conn, len: u64, addr: &str) -> Result<Vec<u8>> {
    let mut body = Vec::with_capacity(len.min(64 << 20) as usize);
    s.take(len)
        .read_to_end(&mut body)
        .map_err(|e| ClusterError::net("reading answer from", addr, e))?;
    Ok(body)
}

/// Sends `len` zero bytes to the worker at `addr`, which drops them.
pub fn sink(addr: &str, secret: &Secret, len: u64) -> Result<()> {
    let mut zeros = std::io::repeat(0).take(len);
    let (_, _, got) = call(
        addr,
        &Request::Sink { len },
        &secret_bytes(secret),
        Some(&mut zeros),
    )?;
    if got != len {
        return Err(ClusterError::Remote(format!(
            "{addr} received {got} of {len} bytes"
        )));
    }
    Ok(())
}

/// Has the worker at `from` send `len` bytes to the worker at `to`;
/// returns the seconds it took (the network from `from` to `to`).
pub fn probe_link(from: &str, to: &str, secret: &Secret, len: u64) -> Result<f64> {
    let req = Request::Probe {
        to: to.to_owned(),
        len,
    };
    // The transfer may take long on a slow link: the answer comes after it.
    let mut s = connect(from)?;
    s.tcp()
        .set_read_timeout(Some(Duration::from_secs(600)))
        .map_err(|e| ClusterError::net("configuring", from, e))?;
    s.write_all(&req.encode(&secret_bytes(secret)))
        .and_then(|()| s.flush())
        .map_err(|e| ClusterError::net("sending to", from, e))?;
    read_status(&mut s, &req, from)?;
    let mut h = [0u8; 16];
    s.read_exact(&mut h)
        .map_err(|e| ClusterError::net("reading answer from", from, e))?;
    Ok(u64::from_le_bytes(h[8..].try_into().expect("8 bytes")) as f64 / 1e6)
}

/// The utilization samples the worker at `addr` took since `since` (Unix ms).
pub fn stats(addr: &str, secret: &Secret, since: u64) -> Result<Vec<Sample>> {
    let (mut s, len, _) = call(addr, &Request::Stats { since }, &secret_bytes(secret), None)?;
    Ok(Sample::decode_all(&read_body(
        &mut s,
        len.min(64 << 20),
        addr,
    )?))
}

/// Copies `r` to `w`, returning the bytes and their CRC32C.
fn copy_crc(r: &mut impl Read, w: &mut impl Write, peer: &str) -> Result<(u64, u32)> {
    let mut buf = vec![0u8; 256 << 10];
    let (mut n, mut crc) = (0u64, 0u32);
    loop {
        let k = r
            .read(&mut buf)
            .map_err(|e| ClusterError::net("receiving from", peer, e))?;
        if k == 0 {
            return Ok((n, crc));
        }
        crc = crc32c::crc32c_append(crc, &buf[..k]);
        // A local write failure (a full disk) is this side's, not the peer's.
        w.write_all(&buf[..k])
            .map_err(|e| local_write_error(Path::new(&format!("data from {peer}")), e))?;
        n += k as u64;
    }
}
