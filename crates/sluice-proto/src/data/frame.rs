//! The data plane's frames: a request's header, body and MAC, as
//! [`super`] draws them, and the status bytes of an answer.

use std::time::Duration;

use crate::auth::{mac_with, Secret};
use crate::capability::{capability_key, Capability, Mode};

/// The user and expiry of the capability a request carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub user: String,
    pub expiry_ms: u64,
}

/// The request magic.
pub const MAGIC: &[u8; 4] = b"SLDP";
pub(super) const VERSION: u8 = 2;
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
/// Set in the op byte: the request carries a block capability's user and
/// expiry after its body's fields, and is signed with the capability's
/// key ([`crate::capability`]).
const CAPABLE: u8 = 0x80;

/// Most bytes one PROBE sends.
pub const MAX_PROBE: u64 = 1 << 30;
pub(super) const STATUS_ERROR: u8 = 1;
pub(super) const STATUS_DAMAGED: u8 = 2;
/// Socket read and write timeout: a peer silent this long (stopped, cut
/// off) fails the transfer instead of hanging it.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

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

    pub(super) fn parse(op: u8, body: &[u8]) -> Option<(u64, u128, Request, Option<Grant>)> {
        let capable = op & CAPABLE != 0;
        let op = op & !CAPABLE;
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
        let grant = match capable {
            true => Some(Grant {
                user: c.str()?,
                expiry_ms: c.u64()?,
            }),
            false => None,
        };
        c.0.is_empty().then_some((ts, nonce, req, grant))
    }

    /// The MAC key of a request carrying `grant`: the capability key for
    /// its block and mode (only block reads and writes take one).
    pub(super) fn grant_key(&self, secret: &Secret, g: &Grant) -> Option<[u8; 32]> {
        let (id, mode) = match self {
            Request::ReadBlock { id }
            | Request::ReadHead { id, .. }
            | Request::ReadChecked { id } => (id, Mode::Read),
            Request::WriteBlock { id, .. } => (id, Mode::Write),
            _ => return None,
        };
        Some(capability_key(secret, &g.user, id, mode, g.expiry_ms))
    }

    /// The whole request, carrying capability `cap` and signed with it.
    pub fn encode_capable(&self, cap: &Capability) -> Vec<u8> {
        let mut body = self.body(crate::now_ms(), rand::random());
        put_str(&mut body, &cap.user);
        body.extend_from_slice(&cap.expiry_ms.to_le_bytes());
        self.frame(self.op() | CAPABLE, body, &cap.key)
    }

    /// The MAC key: the job token for fetches, else the secret.
    pub(super) fn key(&self, secret: &Secret) -> Vec<u8> {
        match self {
            Request::Fetch { job, .. } => secret.job_token(*job).to_vec(),
            _ => secret_bytes(secret),
        }
    }

    /// The whole signed request, as sent.
    pub fn encode(&self, key: &[u8]) -> Vec<u8> {
        let body = self.body(crate::now_ms(), rand::random());
        self.frame(self.op(), body, key)
    }

    /// Header, `body` and MAC under `key`.
    fn frame(&self, op: u8, body: Vec<u8>, key: &[u8]) -> Vec<u8> {
        let mut wire = MAGIC.to_vec();
        wire.push(VERSION);
        wire.push(op);
        wire.extend_from_slice(&(body.len() as u32).to_le_bytes());
        wire.extend_from_slice(&body);
        let mac = mac_with(key, &[&wire]);
        wire.extend_from_slice(&mac);
        wire
    }
}

/// The secret's bytes as an HMAC key (the secret itself is opaque).
pub(super) fn secret_bytes(secret: &Secret) -> Vec<u8> {
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
