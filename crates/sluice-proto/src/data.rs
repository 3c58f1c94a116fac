//! The data plane: blocks and shuffle segments over framed TCP.
//!
//! One request per connection. All integers little-endian.
//!
//! ```text
//! request  := header body mac [data]
//! header   := magic:"SLDP" version:u8 op:u8 body_len:u32
//! mac      := HMAC-SHA256(key, header ++ body)           32 bytes
//! str      := len:u16 bytes[len]                          UTF-8
//! body, by op (every body starts with ts:u64, Unix milliseconds, and
//! nonce:u128, random; `hdr` below):
//!   1 READ_BLOCK   hdr id:str                              key = secret
//!   2 WRITE_BLOCK  hdr id:str len:u64 crc:u32              key = secret
//!                  followed by `data`: len bytes, CRC32C(data) = crc
//!   3 FETCH        hdr job:u64 map:u32 attempt:u32 part:u32
//!                                                          key = job token
//!   4 STATS        hdr since:u64                            key = secret
//!   5 READ_HEAD    hdr id:str max:u64                       key = secret
//!   6 SINK         hdr len:u64                              key = secret
//!                  followed by len bytes, read and dropped (a probe)
//!   7 PROBE        hdr to:str len:u64                       key = secret
//!                  the server sends a SINK of len bytes (at most
//!                  MAX_PROBE) to the worker at `to` and times it
//!   8 READ_CHECKED hdr id:str                              key = secret
//!                  the block with its chunk checksums ahead of it, so
//!                  the reader can check each chunk before using it
//! response := status:u8 (0 ok, 1 error, 2 damaged replica)
//!   ok:    len:u64 records:u64 then len bytes (READ_BLOCK: the block;
//!          FETCH: partition `part`'s segment of the map's spill file, its
//!          blocks as stored, each with its own CRC32C; WRITE_BLOCK: none;
//!          STATS: `records` node samples taken since `since` (Unix ms),
//!          56 bytes each, as [`crate::sample`] documents; READ_HEAD: the
//!          block's first min(max, block length) bytes, for sampling;
//!          SINK: none, `records` = bytes received; PROBE: none,
//!          `records` = microseconds from its SINK's connect to its answer;
//!          READ_CHECKED: `records` = the chunk size C, then ceil(len / C)
//!          CRC32C values (u32 each) of the block's chunks as stored with
//!          it, then the len bytes of the block)
//!   error, damaged: msg_len:u32 msg[msg_len]
//! ```
//!
//! Status 2 answers READ_BLOCK, READ_CHECKED and READ_HEAD when the stored replica is
//! missing, has no valid checksum file, or has another length than its
//! checksum file says: the reader blames that copy and tries another.
//!
//! The server refuses a request with a wrong MAC, a timestamp more than
//! [`crate::auth::MAX_SKEW_MS`] off, a nonce it has seen (a replay), an unknown op or version, a body over
//! [`MAX_BODY`] or an invalid block id, before touching any file. A block
//! written is verified against its length and CRC, synced with its chunk
//! checksums ([`crate::block`]), and only then renamed into place, so a
//! reader never sees a partial block. A reader checks every block it
//! receives against the catalog's length and CRC; a mismatch is a
//! [`ClusterError::Damaged`] against the sending replica. A fetched
//! segment is verified block by block as it arrives (length bounds before
//! allocating, CRC before writing), so a damaged map output is caught at
//! fetch time and reported as a fetch failure. In-flight bytes are bounded:
//! data moves through fixed buffers (the kernel's `sendfile` on the
//! sending side), never whole blocks in memory.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sluice_formats::spill::{self, SpillFile};

use crate::auth::{check_skew, constant_eq, mac_with, Secret};
use crate::block::Unusable;
use crate::sample::{Sample, Sampler};
use crate::signed::ReplayGuard;
use crate::ClusterError;

type Result<T> = std::result::Result<T, ClusterError>;

/// The request magic.
pub const MAGIC: &[u8; 4] = b"SLDP";
const VERSION: u8 = 2;
/// Largest request body accepted.
pub const MAX_BODY: u32 = 4096;
const OP_READ: u8 = 1;
const OP_WRITE: u8 = 2;
const OP_FETCH: u8 = 3;
const OP_STATS: u8 = 4;
const OP_HEAD: u8 = 5;
const OP_SINK: u8 = 6;
const OP_PROBE: u8 = 7;
const OP_READ_CHECKED: u8 = 8;

/// Most bytes one PROBE sends.
pub const MAX_PROBE: u64 = 1 << 30;
const STATUS_ERROR: u8 = 1;
const STATUS_DAMAGED: u8 = 2;
/// Socket read and write timeout: a peer silent this long (stopped, cut
/// off) fails the transfer instead of hanging it.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a worker keeps its files.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The data directory.
    pub root: PathBuf,
}

impl Layout {
    /// Creates the directories under `root`.
    pub fn create(root: &Path) -> Result<Self> {
        for d in ["blocks", "shuffle", "work"] {
            let p = root.join(d);
            std::fs::create_dir_all(&p).map_err(|e| ClusterError::io("creating", &p, e))?;
        }
        Ok(Layout {
            root: root.to_owned(),
        })
    }

    /// A stored block. `id` must be valid ([`check_id`]).
    pub fn block(&self, id: &str) -> PathBuf {
        self.root.join("blocks").join(id)
    }

    /// A job's map outputs.
    pub fn shuffle_dir(&self, job: u64) -> PathBuf {
        self.root.join("shuffle").join(job.to_string())
    }

    /// A map attempt's output.
    pub fn map_output(&self, job: u64, map: u32, attempt: u32) -> PathBuf {
        self.shuffle_dir(job)
            .join(format!("m{map:05}-a{attempt}.run"))
    }

    /// A job's scratch space.
    pub fn work_dir(&self, job: u64) -> PathBuf {
        self.root.join("work").join(job.to_string())
    }

    /// Ids of the blocks stored here.
    /// Fails when the directory, or any entry, cannot be read: a block
    /// report from a partial listing would make present blocks look
    /// missing.
    pub fn block_ids(&self) -> std::io::Result<Vec<String>> {
        let mut ids = Vec::new();
        for e in std::fs::read_dir(self.root.join("blocks"))? {
            if let Ok(name) = e?.file_name().into_string() {
                if check_id(&name).is_ok() {
                    ids.push(name);
                }
            }
        }
        Ok(ids)
    }
}

/// Block ids are 1-64 characters of `[A-Za-z0-9_-]`: they name files, so
/// none can reach outside the block directory.
pub fn check_id(id: &str) -> Result<()> {
    crate::ids::BlockId::new(id).map(|_| ())
}

/// A data-plane request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Read a whole block.
    ReadBlock { id: String },
    /// Store a block of `len` bytes with CRC32C `crc`.
    WriteBlock { id: String, len: u64, crc: u32 },
    /// Fetch one partition of a map attempt's output.
    Fetch {
        job: u64,
        map: u32,
        attempt: u32,
        part: u32,
    },
    /// The node's utilization samples since a time (Unix ms).
    Stats { since: u64 },
    /// Read at most `max` bytes from the start of a block.
    ReadHead { id: String, max: u64 },
    /// Read a whole block with its chunk checksums first.
    ReadChecked { id: String },
    /// Receive and drop `len` bytes.
    Sink { len: u64 },
    /// Send a [`Request::Sink`] of `len` bytes to `to`, timed.
    Probe { to: String, len: u64 },
}

impl Request {
    fn op(&self) -> u8 {
        match self {
            Request::ReadBlock { .. } => OP_READ,
            Request::WriteBlock { .. } => OP_WRITE,
            Request::Fetch { .. } => OP_FETCH,
            Request::Stats { .. } => OP_STATS,
            Request::ReadHead { .. } => OP_HEAD,
            Request::Sink { .. } => OP_SINK,
            Request::Probe { .. } => OP_PROBE,
            Request::ReadChecked { .. } => OP_READ_CHECKED,
        }
    }

    fn body(&self, ts: u64, nonce: u128) -> Vec<u8> {
        let mut b = ts.to_le_bytes().to_vec();
        b.extend_from_slice(&nonce.to_le_bytes());
        match self {
            Request::ReadBlock { id } | Request::ReadChecked { id } => put_str(&mut b, id),
            Request::WriteBlock { id, len, crc } => {
                put_str(&mut b, id);
                b.extend_from_slice(&len.to_le_bytes());
                b.extend_from_slice(&crc.to_le_bytes());
            }
            Request::Fetch {
                job,
                map,
                attempt,
                part,
            } => {
                b.extend_from_slice(&job.to_le_bytes());
                b.extend_from_slice(&map.to_le_bytes());
                b.extend_from_slice(&attempt.to_le_bytes());
                b.extend_from_slice(&part.to_le_bytes());
            }
            Request::Stats { since } => b.extend_from_slice(&since.to_le_bytes()),
            Request::ReadHead { id, max } => {
                put_str(&mut b, id);
                b.extend_from_slice(&max.to_le_bytes());
            }
            Request::Sink { len } => b.extend_from_slice(&len.to_le_bytes()),
            Request::Probe { to, len } => {
                put_str(&mut b, to);
                b.extend_from_slice(&len.to_le_bytes());
            }
        }
        b
    }

    fn parse(op: u8, body: &[u8]) -> Option<(u64, u128, Request)> {
        let mut c = Cursor(body);
        let ts = c.u64()?;
        let nonce = u128::from_le_bytes(c.take(16)?.try_into().ok()?);
        let req = match op {
            OP_READ => Request::ReadBlock { id: c.str()? },
            OP_READ_CHECKED => Request::ReadChecked { id: c.str()? },
            OP_WRITE => Request::WriteBlock {
                id: c.str()?,
                len: c.u64()?,
                crc: c.u32()?,
            },
            OP_FETCH => Request::Fetch {
                job: c.u64()?,
                map: c.u32()?,
                attempt: c.u32()?,
                part: c.u32()?,
            },
            OP_STATS => Request::Stats { since: c.u64()? },
            OP_HEAD => Request::ReadHead {
                id: c.str()?,
                max: c.u64()?,
            },
            OP_SINK => Request::Sink { len: c.u64()? },
            OP_PROBE => Request::Probe {
                to: c.str()?,
                len: c.u64()?,
            },
            _ => return None,
        };
        c.0.is_empty().then_some((ts, nonce, req))
    }

    /// The MAC key: the job token for fetches, else the secret.
    fn key(&self, secret: &Secret) -> Vec<u8> {
        match self {
            Request::Fetch { job, .. } => secret.job_token(*job).to_vec(),
            _ => secret_bytes(secret),
        }
    }

    /// The whole signed request, as sent.
    pub fn encode(&self, key: &[u8]) -> Vec<u8> {
        let body = self.body(crate::now_ms(), rand::random());
        let mut wire = MAGIC.to_vec();
        wire.push(VERSION);
        wire.push(self.op());
        wire.extend_from_slice(&(body.len() as u32).to_le_bytes());
        wire.extend_from_slice(&body);
        let mac = mac_with(key, &[&wire]);
        wire.extend_from_slice(&mac);
        wire
    }
}

/// The secret's bytes as an HMAC key (the secret itself is opaque).
fn secret_bytes(secret: &Secret) -> Vec<u8> {
    secret.mac(&[b"data-plane"]).to_vec()
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    let n = s.len().min(u16::MAX as usize);
    b.extend_from_slice(&(n as u16).to_le_bytes());
    b.extend_from_slice(&s.as_bytes()[..n]);
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn str(&mut self) -> Option<String> {
        let n = u16::from_le_bytes(self.take(2)?.try_into().ok()?) as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

// ---------------------------------------------------------------- server

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
                let auth = (&secret, &*guard);
                if let Err(e) = handle(&conn, &layout, auth, sampler.as_ref()) {
                    tracing::debug!("data request failed: {e}");
                    let _ = send_error(&conn, &e.to_string());
                }
            });
        }
    });
}

/// One request; `auth` is the cluster's secret and the nonces seen.
fn handle(
    conn: &TcpStream,
    layout: &Layout,
    auth: (&Secret, &ReplayGuard),
    sampler: Option<&Sampler>,
) -> Result<()> {
    let peer = conn
        .peer_addr()
        .map_or_else(|_| "?".into(), |a| a.to_string());
    let mut r = BufReader::with_capacity(256 << 10, conn);
    let req = read_request(&mut r, auth.0, auth.1, &peer)?;
    match req {
        Request::ReadBlock { id } => send_block(conn, layout, &id, u64::MAX),
        Request::ReadHead { id, max } => send_block(conn, layout, &id, max),
        Request::ReadChecked { id } => send_checked(conn, layout, &id),
        Request::WriteBlock { ref id, len, crc } => {
            if let Err(e) = check_id(id) {
                drain_write(&mut r, &req);
                return Err(e);
            }
            crate::block::store_stream(layout, id, &mut r, len, crc, &peer)?;
            send_ok(conn, 0, 0)
        }
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
            let mut c = conn;
            c.write_all(&body)
                .map_err(|e| ClusterError::net("sending to", &peer, e))
        }
        Request::Sink { len } => {
            let got = std::io::copy(&mut r.take(len), &mut std::io::sink())
                .map_err(|e| ClusterError::net("receiving from", &peer, e))?;
            send_ok(conn, 0, got)
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
fn send_block(conn: &TcpStream, layout: &Layout, id: &str, max: u64) -> Result<()> {
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
    conn: &TcpStream,
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
fn send_checked(conn: &TcpStream, layout: &Layout, id: &str) -> Result<()> {
    let Some((f, sums)) = open_to_send(conn, layout, id)? else {
        return Ok(());
    };
    let len = sums.len;
    conn.set_write_timeout(Some(STREAM_WRITE_TIMEOUT))
        .map_err(|e| ClusterError::net("answering", "peer", e))?;
    send_ok(conn, len, u64::from(sums.chunk))?;
    let crcs: Vec<u8> = sums.crcs.iter().flat_map(|c| c.to_le_bytes()).collect();
    let mut w = conn;
    w.write_all(&crcs)
        .map_err(|e| ClusterError::net("sending", "peer", e))?;
    let sent = std::io::copy(&mut f.take(len), &mut w)
        .map_err(|e| ClusterError::net("sending", "peer", e))?;
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
    let (ts, nonce, req) = Request::parse(header[5], body)
        .ok_or_else(|| ClusterError::Remote("malformed request".into()))?;
    let want = mac_with(&req.key(secret), &[&header, body]);
    if !constant_eq(&want, mac) {
        return Err(ClusterError::Auth(format!(
            "refused an unauthenticated data request from {peer}"
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
        w.write_all(&buf[..k]).map_err(|e| {
            crate::block::local_write_error(Path::new(&format!("data from {peer}")), e)
        })?;
        n += k as u64;
    }
}

fn send_ok(mut conn: &TcpStream, len: u64, records: u64) -> Result<()> {
    let mut h = vec![0u8];
    h.extend_from_slice(&len.to_le_bytes());
    h.extend_from_slice(&records.to_le_bytes());
    conn.write_all(&h)
        .map_err(|e| ClusterError::net("answering", "peer", e))
}

fn send_error(conn: &TcpStream, msg: &str) -> std::io::Result<()> {
    send_status(conn, STATUS_ERROR, msg)
}

fn send_status(mut conn: &TcpStream, status: u8, msg: &str) -> std::io::Result<()> {
    let mut h = vec![status];
    h.extend_from_slice(&(msg.len() as u32).to_le_bytes());
    h.extend_from_slice(msg.as_bytes());
    conn.write_all(&h)
}

/// Sends `len` bytes of `f` from `offset` (by `sendfile` on Linux: std's
/// copy from a file to a socket uses it).
fn send_range(conn: &TcpStream, mut f: File, offset: u64, len: u64, records: u64) -> Result<()> {
    send_ok(conn, len, records)?;
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| ClusterError::net("seeking", "file", e))?;
    let mut w = conn;
    let sent = std::io::copy(&mut f.take(len), &mut w)
        .map_err(|e| ClusterError::net("sending", "peer", e))?;
    if sent != len {
        return Err(ClusterError::Remote("file shorter than its index".into()));
    }
    Ok(())
}

// ---------------------------------------------------------------- client

fn connect(addr: &str) -> Result<TcpStream> {
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
    Ok(s)
}

/// Sends `req` signed with `key` and reads the response header.
fn call(
    addr: &str,
    req: &Request,
    key: &[u8],
    data: Option<&mut dyn Read>,
) -> Result<(TcpStream, u64, u64)> {
    let mut s = connect(addr)?;
    s.write_all(&req.encode(key))
        .map_err(|e| ClusterError::net("sending to", addr, e))?;
    if let Some(d) = data {
        if let Err(e) = std::io::copy(d, &mut s) {
            // The peer may have refused the data and said why.
            return Err(match read_status(&mut s, req, addr) {
                Err(refusal @ (ClusterError::Remote(_) | ClusterError::Damaged { .. })) => refusal,
                _ => ClusterError::net("sending to", addr, e),
            });
        }
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
fn read_status(s: &mut TcpStream, req: &Request, addr: &str) -> Result<()> {
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
    let damaged = |damage: String| damaged(id, addr, damage);
    if len != want_len {
        return Err(damaged(format!("{len} bytes of {want_len}")));
    }
    let (n, crc) = copy_crc(&mut (&s).take(len), out, addr)?;
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

/// Block `block`'s replica on `holder` is damaged: `damage` says how.
fn damaged(block: &str, holder: &str, damage: String) -> ClusterError {
    ClusterError::Damaged {
        block: block.to_owned(),
        holder: holder.to_owned(),
        damage,
    }
}

/// The largest chunk a READ_CHECKED answer may name (a reader's buffer).
const MAX_CHUNK: u64 = 16 << 20;
/// The smallest (bounding the CRCs a reader takes in to a 1024th of the
/// block).
const MIN_CHUNK: u64 = 4 << 10;
/// How long a holder waits for a streaming reader to take more of a
/// READ_CHECKED block: the reader is a map, which may pause to spill
/// or run slow user code far longer than other transfers' timeout.
const STREAM_WRITE_TIMEOUT: Duration = Duration::from_secs(600);

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
    conn: BufReader<TcpStream>,
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
    let (s, len, _) = call(addr, &req, &secret_bytes(secret), None)?;
    read_body(&s, len.min(max), addr)
}

/// The `len` bytes of an answer's body.
fn read_body(s: &TcpStream, len: u64, addr: &str) -> Result<Vec<u8>> {
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
    s.set_read_timeout(Some(Duration::from_secs(600)))
        .map_err(|e| ClusterError::net("configuring", from, e))?;
    s.write_all(&req.encode(&secret_bytes(secret)))
        .map_err(|e| ClusterError::net("sending to", from, e))?;
    read_status(&mut s, &req, from)?;
    let mut h = [0u8; 16];
    s.read_exact(&mut h)
        .map_err(|e| ClusterError::net("reading answer from", from, e))?;
    Ok(u64::from_le_bytes(h[8..].try_into().expect("8 bytes")) as f64 / 1e6)
}

/// The utilization samples the worker at `addr` took since `since` (Unix ms).
pub fn stats(addr: &str, secret: &Secret, since: u64) -> Result<Vec<Sample>> {
    let (s, len, _) = call(addr, &Request::Stats { since }, &secret_bytes(secret), None)?;
    Ok(Sample::decode_all(&read_body(&s, len.min(64 << 20), addr)?))
}

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
    let (s, len, records) = call(addr, req, token, None)?;
    let f = File::create(out).map_err(|e| crate::block::local_write_error(out, e))?;
    let mut w = BufWriter::with_capacity(256 << 10, f);
    let mut r = BufReader::with_capacity(256 << 10, &s);
    let counted = watch.received.load(std::sync::atomic::Ordering::Relaxed);
    let copied = copy_blocks(&mut r, &mut w, (len, watch), addr, out);
    if copied.is_err() {
        count_unread(&s, watch, counted);
    }
    copied?;
    let mut f = w
        .into_inner()
        .map_err(|e| crate::block::local_write_error(out, e.into_error()))?;
    spill::seal_segment(&mut f, len, records)
        .map_err(|e| crate::block::local_write_error(out, e))?;
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

/// Copies `len` bytes of spill blocks to `out` (through `w`), checking
/// each block's frame and CRC. Failing to write `out` is a local error
/// ([`ClusterError::Io`] or [`ClusterError::NoSpace`]), never the sender's.
/// What a fetch reports as it goes, and what stops it.
#[derive(Default)]
pub struct FetchWatch {
    /// Bytes received so far.
    pub received: std::sync::atomic::AtomicU64,
    /// Set to stop the fetch (between blocks).
    pub stop: std::sync::atomic::AtomicBool,
}

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
            .map_err(|e| crate::block::local_write_error(out, e))?;
        left -= 8 + u64::from(n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> Secret {
        Secret::new(b"0123456789abcdef0123").unwrap()
    }

    fn server() -> (String, tempfile::TempDir, Layout) {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::create(dir.path()).unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        serve(l, layout.clone(), secret(), None);
        (addr, dir, layout)
    }

    #[test]
    fn blocks_round_trip_and_bad_ids_are_refused() {
        let (addr, _d, layout) = server();
        let data = b"hello\nworld\n".to_vec();
        let crc = crc32c::crc32c(&data);
        write_block(&addr, &secret(), "b1", &mut &data[..], 12, crc).unwrap();
        assert_eq!(std::fs::read(layout.block("b1")).unwrap(), data);
        let mut out = Vec::new();
        read_block(&addr, &secret(), "b1", 12, crc, &mut out).unwrap();
        assert_eq!(out, data);
        let e = write_block(&addr, &secret(), "../x", &mut &data[..], 12, crc).unwrap_err();
        assert!(e.to_string().contains("invalid block id"), "{e}");
        let e = write_block(&addr, &secret(), "b2", &mut &data[..], 12, crc ^ 1).unwrap_err();
        assert!(e.to_string().contains("crc"), "{e}");
        assert!(!layout.block("b2").exists());
    }

    #[test]
    fn a_checked_stream_hands_out_only_chunks_that_pass() {
        let (addr, _d, layout) = server();
        // Three chunks and a bit.
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
        let (len, crc) = (data.len() as u64, crc32c::crc32c(&data));
        write_block(&addr, &secret(), "b1", &mut &data[..], len, crc).unwrap();
        let read_all = |want_crc| -> (Vec<u8>, Result<()>) {
            let mut s = open_checked_stream(&addr, &secret(), "b1", len, want_crc).unwrap();
            let mut out = Vec::new();
            let mut buf = [0u8; 10_000];
            loop {
                match s.read_checked(&mut buf) {
                    Ok(0) => return (out, Ok(())),
                    Ok(n) => out.extend_from_slice(&buf[..n]),
                    Err(e) => return (out, Err(e)),
                }
            }
        };
        let (got, end) = read_all(crc);
        end.unwrap();
        assert!(got == data);
        // Another length than the catalog's: that copy is damaged.
        let e = open_checked_stream(&addr, &secret(), "b1", len + 1, crc)
            .err()
            .unwrap();
        assert!(matches!(e, ClusterError::Damaged { .. }), "{e}");
        // A byte flipped on disk in the second chunk: the first chunk is
        // handed out, nothing of the second.
        let path = layout.block("b1");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[70_000] ^= 0x20;
        std::fs::write(&path, &bytes).unwrap();
        let (got, end) = read_all(crc);
        let e = end.unwrap_err();
        assert!(e.to_string().contains("chunk 1"), "{e}");
        assert!(matches!(e, ClusterError::Damaged { .. }));
        assert_eq!(got.len(), 64 << 10);
        assert!(got[..] == data[..got.len()]);
        // A stream that failed hands out nothing more.
        let mut s = open_checked_stream(&addr, &secret(), "b1", len, crc).unwrap();
        let mut buf = vec![0u8; 64 << 10];
        assert_eq!(s.read_checked(&mut buf).unwrap(), 64 << 10);
        assert!(s.read_checked(&mut buf).is_err());
        assert!(s.read_checked(&mut buf).is_err());
    }

    #[test]
    fn a_captured_request_cannot_be_replayed_or_altered() {
        let (addr, _d, layout) = server();
        std::fs::write(layout.block("b1"), b"data").unwrap();
        let send = |wire: &[u8]| -> String {
            let mut s = connect(&addr).unwrap();
            s.write_all(wire).unwrap();
            let mut answer = Vec::new();
            let _ = s.read_to_end(&mut answer);
            String::from_utf8_lossy(&answer).into_owned()
        };
        // A real request, as a reader sends it, captured and sent twice.
        let req = Request::Stats { since: 0 };
        let wire = req.encode(&secret_bytes(&secret()));
        assert!(!send(&wire).contains("refused"));
        assert!(send(&wire).contains("replayed request refused"));
        // Altered in its body (another time window asked for): the MAC fails.
        let mut other = Request::Stats { since: 7 }.encode(&secret_bytes(&secret()));
        let body_at = 10 + 8 + 16;
        other[body_at..body_at + 8].copy_from_slice(&0u64.to_le_bytes());
        assert!(send(&other).contains("unauthenticated"));
    }

    #[test]
    fn unauthenticated_requests_are_refused() {
        let (addr, _d, layout) = server();
        std::fs::write(layout.block("b1"), b"secret data").unwrap();
        let wrong = Secret::new(b"not-the-cluster-secret").unwrap();
        let e = read_block(&addr, &wrong, "b1", 11, 0, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("unauthenticated"), "{e}");
    }

    #[test]
    fn a_link_probe_sends_what_it_says_and_needs_the_secret() {
        let (from, _d1, _) = server();
        let (to, _d2, _) = server();
        let secs = probe_link(&from, &to, &secret(), 4 << 20).unwrap();
        assert!(secs > 0.0);
        sink(&to, &secret(), 1 << 20).unwrap();
        let wrong = Secret::new(b"not-the-cluster-secret").unwrap();
        let e = probe_link(&from, &to, &wrong, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("unauthenticated"), "{e}");
        let e = sink(&to, &wrong, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("unauthenticated"), "{e}");
        // A target nobody serves: the error names it.
        let gone = TcpListener::bind("127.0.0.1:0").unwrap();
        let gone_addr = gone.local_addr().unwrap().to_string();
        drop(gone);
        let e = probe_link(&from, &gone_addr, &secret(), 1 << 20).unwrap_err();
        assert!(e.to_string().contains(&gone_addr), "{e}");
    }

    #[test]
    fn fetches_need_the_jobs_token() {
        let (addr, d, layout) = server();
        std::fs::create_dir_all(layout.shuffle_dir(7)).unwrap();
        let mut w = spill::SpillWriter::create(&layout.map_output(7, 0, 0), 2).unwrap();
        w.append(0, b"a", b"1").unwrap();
        w.append(1, b"b", b"2").unwrap();
        w.finish().unwrap();
        let req = Request::Fetch {
            job: 7,
            map: 0,
            attempt: 0,
            part: 1,
        };
        let out = d.path().join("got.run");
        // Another job's token, or the secret itself, does not sign job 7's fetches.
        let e = fetch(
            &addr,
            &secret().job_token(8),
            &req,
            &out,
            &Default::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("unauthenticated"), "{e}");
        fetch(
            &addr,
            &secret().job_token(7),
            &req,
            &out,
            &Default::default(),
        )
        .unwrap();
        let f = SpillFile::open(&out).unwrap();
        let mut r = f.reader(0);
        assert!(r.advance().unwrap());
        assert_eq!((r.key(), r.value()), (&b"b"[..], &b"2"[..]));
        assert!(!r.advance().unwrap());
    }

    /// A fetch stopped before its first block (its attempt was killed)
    /// still counts the bytes that reached this host: the kernel's count,
    /// here at least the answer's header, which the fetch read before it
    /// saw the stop.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn a_stopped_fetch_counts_the_bytes_that_crossed() {
        let (addr, d, layout) = server();
        std::fs::create_dir_all(layout.shuffle_dir(7)).unwrap();
        let path = layout.map_output(7, 0, 0);
        let mut w = spill::SpillWriter::create(&path, 1).unwrap();
        for i in 0..100_000u32 {
            w.append(0, &i.to_be_bytes(), &[7; 40]).unwrap();
        }
        w.finish().unwrap();
        let req = Request::Fetch {
            job: 7,
            map: 0,
            attempt: 0,
            part: 0,
        };
        let watch = FetchWatch::default();
        watch.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let e = fetch(
            &addr,
            &secret().job_token(7),
            &req,
            &d.path().join("x"),
            &watch,
        )
        .unwrap_err();
        assert!(e.to_string().contains("stopped"), "{e}");
        let got = watch.received.into_inner();
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(got > 0 && got <= size + 64, "{got} of {size}");
    }

    #[test]
    fn corrupt_map_output_fails_the_fetch() {
        let (addr, d, layout) = server();
        std::fs::create_dir_all(layout.shuffle_dir(7)).unwrap();
        let path = layout.map_output(7, 0, 0);
        let mut w = spill::SpillWriter::create(&path, 1).unwrap();
        w.append(0, b"key", b"value").unwrap();
        w.finish().unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[10] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
        let req = Request::Fetch {
            job: 7,
            map: 0,
            attempt: 0,
            part: 0,
        };
        let e = fetch(
            &addr,
            &secret().job_token(7),
            &req,
            &d.path().join("x"),
            &Default::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
    }
}
