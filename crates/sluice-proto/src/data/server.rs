//! The server side of the data plane: a worker answering requests for
//! its blocks, map outputs, samples and link probes.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use sluice_formats::spill::SpillFile;

use super::client::sink;
use super::frame::{
    Request, IO_TIMEOUT, MAGIC, MAX_BODY, MAX_PROBE, STATUS_DAMAGED, STATUS_ERROR, VERSION,
};
use crate::auth::{check_skew, constant_eq, mac_with, Secret};
use crate::block::Unusable;
use crate::layout::{check_id, Layout};
use crate::sample::Sampler;
use crate::signed::ReplayGuard;
use crate::tls::stream::Conn;
use crate::ClusterError;

type Result<T> = std::result::Result<T, ClusterError>;

/// or run slow user code far longer than other transfers' timeout.
const STREAM_WRITE_TIMEOUT: Duration = Duration::from_secs(600);
/// Serves a worker's blocks and map outputs on `listener`, one thread per
/// connection, until the process exits.
pub fn serve(listener: TcpListener, layout: Layout, secret: Secret, sampler: Option<Sampler>) {
    let guard = Arc::new(ReplayGuard::default());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let (layout, secret, sampler) = (layout.clone(), secret.clone(), sampler.clone());
            let guard = guard.clone();
            std::thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(IO_TIMEOUT));
                let _ = conn.set_write_timeout(Some(IO_TIMEOUT));
                let _ = conn.set_nodelay(true);
                let peer = conn
                    .peer_addr()
                    .map_or_else(|_| "?".into(), |a| a.to_string());
                // A peer that fails the handshake (no certificate of the
                // cluster's CA, garbage) is dropped here, having read
                // nothing.
                let conn = match Conn::server(conn, &peer, crate::tls::current().as_deref()) {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!("data connection refused: {e}");
                        return;
                    }
                };
                let mut r = BufReader::with_capacity(256 << 10, conn);
                let auth = (&secret, &*guard);
                if let Err(e) = handle(&mut r, &peer, &layout, auth, sampler.as_ref()) {
                    tracing::debug!("data request failed: {e}");
                    let _ = send_error(r.get_mut(), &e.to_string());
                }
                r.get_mut().close();
            });
        }
    });
}

/// One request; `auth` is the cluster's secret and the nonces seen.
fn handle(
    r: &mut BufReader<Conn>,
    peer: &str,
    layout: &Layout,
    auth: (&Secret, &ReplayGuard),
    sampler: Option<&Sampler>,
) -> Result<()> {
    let req = read_request(r, auth.0, auth.1, peer)?;
    if let Request::WriteBlock { ref id, len, crc } = req {
        if let Err(e) = check_id(id) {
            drain_write(r, &req);
            return Err(e);
        }
        crate::block::store_stream(layout, id, r, len, crc, peer)?;
        return send_ok(r.get_mut(), 0, 0);
    }
    if let Request::Sink { len } = req {
        let got = std::io::copy(&mut r.take(len), &mut std::io::sink())
            .map_err(|e| ClusterError::net("receiving from", peer, e))?;
        return send_ok(r.get_mut(), 0, got);
    }
    let conn = r.get_mut();
    match req {
        Request::ReadBlock { id } => send_block(conn, layout, &id, u64::MAX),
        Request::ReadHead { id, max } => send_block(conn, layout, &id, max),
        Request::ReadChecked { id } => send_checked(conn, layout, &id),
        Request::WriteBlock { .. } | Request::Sink { .. } => Ok(()),
        Request::Fetch {
            job,
            map,
            attempt,
            part,
        } => {
            let path = layout.map_output(job, map, attempt);
            let run = SpillFile::open(&path).map_err(|e| ClusterError::Remote(e.to_string()))?;
            let seg = run.segments().get(part as usize).copied().ok_or_else(|| {
                ClusterError::Remote(format!("map output has no partition {part}"))
            })?;
            let f = File::open(&path).map_err(|e| ClusterError::io("opening", &path, e))?;
            send_range(conn, f, seg.offset, seg.len, seg.records)
        }
        Request::Stats { since } => {
            let samples = sampler.map(|s| s.since(since)).unwrap_or_default();
            let mut body = Vec::with_capacity(samples.len() * crate::sample::SAMPLE_BYTES);
            samples.iter().for_each(|s| s.encode(&mut body));
            send_ok(conn, body.len() as u64, samples.len() as u64)?;
            conn.write_all(&body)
                .and_then(|()| conn.flush())
                .map_err(|e| ClusterError::net("sending to", peer, e))
        }
        Request::Probe { to, len } => {
            let t = std::time::Instant::now();
            sink(&to, auth.0, len.min(MAX_PROBE))?;
            send_ok(conn, 0, t.elapsed().as_micros() as u64)
        }
    }
}

/// Sends the first `max` bytes of block `id` (all of it when shorter).
/// A damaged replica (missing, no valid checksum file, wrong length) is
/// answered with status 2.
fn send_block(conn: &mut Conn, layout: &Layout, id: &str, max: u64) -> Result<()> {
    let Some((f, sums)) = open_to_send(conn, layout, id)? else {
        return Ok(());
    };
    send_range(conn, f, 0, sums.len.min(max), 0)
}

/// Block `id` opened to be sent, with its chunk checksums (its length
/// among them); or
/// `None` when the replica is damaged (missing, no valid checksum file,
/// wrong length), which has been answered with status 2. Unreadable now
/// (not damaged) is an error, status 1.
fn open_to_send(
    conn: &mut Conn,
    layout: &Layout,
    id: &str,
) -> Result<Option<(File, sluice_formats::chunked::ChunkSums)>> {
    check_id(id)?;
    let path = layout.block(id);
    let sums = match crate::block::check_before_send(layout, id) {
        Ok(sums) => sums,
        Err(Unusable::Damaged(d)) => {
            let _ = send_status(conn, STATUS_DAMAGED, &d.to_string());
            return Ok(None);
        }
        Err(Unusable::Io(e)) => return Err(ClusterError::io("reading block", &path, e)),
    };
    let f = File::open(&path).map_err(|e| ClusterError::io("opening block", &path, e))?;
    Ok(Some((f, sums)))
}

/// Sends block `id` with its chunk checksums ahead of it (READ_CHECKED).
/// A damaged replica is answered as [`open_to_send`] says; damage inside
/// the bytes is for the reader's chunk checks to find.
fn send_checked(conn: &mut Conn, layout: &Layout, id: &str) -> Result<()> {
    let Some((f, sums)) = open_to_send(conn, layout, id)? else {
        return Ok(());
    };
    let len = sums.len;
    conn.tcp()
        .set_write_timeout(Some(STREAM_WRITE_TIMEOUT))
        .map_err(|e| ClusterError::net("answering", "peer", e))?;
    send_ok(conn, len, u64::from(sums.chunk))?;
    let crcs: Vec<u8> = sums.crcs.iter().flat_map(|c| c.to_le_bytes()).collect();
    conn.write_all(&crcs)
        .map_err(|e| ClusterError::net("sending", "peer", e))?;
    let sent = send_file(conn, f, len).map_err(|e| ClusterError::net("sending", "peer", e))?;
    if sent != len {
        return Err(ClusterError::Remote(
            "block shorter than its checksums".into(),
        ));
    }
    Ok(())
}

fn read_request(
    r: &mut impl Read,
    secret: &Secret,
    guard: &ReplayGuard,
    peer: &str,
) -> Result<Request> {
    let mut header = [0u8; 10];
    r.read_exact(&mut header)
        .map_err(|e| ClusterError::net("reading request from", peer, e))?;
    if &header[..4] != MAGIC || header[4] != VERSION {
        return Err(ClusterError::Remote(format!(
            "not a Sluice data-plane request of version {VERSION}"
        )));
    }
    let len = u32::from_le_bytes(header[6..].try_into().expect("4 bytes"));
    if len > MAX_BODY {
        return Err(ClusterError::Remote("request body too large".into()));
    }
    let mut body = vec![0u8; len as usize + 32];
    r.read_exact(&mut body)
        .map_err(|e| ClusterError::net("reading request from", peer, e))?;
    let (body, mac) = body.split_at(len as usize);
    let (ts, nonce, req, grant) = Request::parse(header[5], body)
        .ok_or_else(|| ClusterError::Remote("malformed request".into()))?;
    let key = match &grant {
        None => req.key(secret),
        Some(g) => req
            .grant_key(secret, g)
            .map_or_else(Vec::new, |k| k.to_vec()),
    };
    let want = mac_with(&key, &[&header, body]);
    if key.is_empty() || !constant_eq(&want, mac) {
        return Err(ClusterError::Auth(format!(
            "refused an unauthenticated data request from {peer}"
        )));
    }
    if let Some(g) = grant.filter(|g| g.expiry_ms < crate::now_ms()) {
        drain_write(r, &req);
        return Err(ClusterError::Auth(format!(
            "refused user {}'s capability: it expired",
            g.user
        )));
    }
    // Authenticated from here: a refused write's data is read first, so
    // its writer hears why instead of a reset connection.
    let fresh = check_skew(ts).and_then(|()| guard.fresh(nonce, ts));
    if let Err(e) = fresh {
        drain_write(r, &req);
        return Err(e);
    }
    Ok(req)
}

/// Reads and drops the data of a WRITE_BLOCK request that is refused.
fn drain_write(r: &mut impl Read, req: &Request) {
    if let Request::WriteBlock { len, .. } = req {
        let _ = std::io::copy(&mut r.take(*len), &mut std::io::sink());
    }
}

fn send_ok(conn: &mut Conn, len: u64, records: u64) -> Result<()> {
    let mut h = vec![0u8];
    h.extend_from_slice(&len.to_le_bytes());
    h.extend_from_slice(&records.to_le_bytes());
    conn.write_all(&h)
        .and_then(|()| conn.flush())
        .map_err(|e| ClusterError::net("answering", "peer", e))
}

fn send_error(conn: &mut Conn, msg: &str) -> std::io::Result<()> {
    send_status(conn, STATUS_ERROR, msg)
}

fn send_status(conn: &mut Conn, status: u8, msg: &str) -> std::io::Result<()> {
    let mut h = vec![status];
    h.extend_from_slice(&(msg.len() as u32).to_le_bytes());
    h.extend_from_slice(msg.as_bytes());
    conn.write_all(&h).and_then(|()| conn.flush())
}

/// Sends `len` bytes of `f` from `offset`.
fn send_range(conn: &mut Conn, mut f: File, offset: u64, len: u64, records: u64) -> Result<()> {
    send_ok(conn, len, records)?;
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| ClusterError::net("seeking", "file", e))?;
    let sent = send_file(conn, f, len).map_err(|e| ClusterError::net("sending", "peer", e))?;
    if sent != len {
        return Err(ClusterError::Remote("file shorter than its index".into()));
    }
    Ok(())
}

/// Sends up to `len` bytes of `f`: in plaintext by `sendfile` on Linux
/// (std's copy from a file to a socket uses it), in TLS through a large
/// buffer (full records, few writes).
fn send_file(conn: &mut Conn, f: File, len: u64) -> std::io::Result<u64> {
    if conn.is_plain() {
        let mut w = conn.tcp();
        return std::io::copy(&mut f.take(len), &mut w);
    }
    let mut w = BufWriter::with_capacity(256 << 10, conn);
    let sent = std::io::copy(&mut f.take(len), &mut w)?;
    w.flush()?;
    Ok(sent)
}
