//! A map's block read from another worker's replica as a stream, with no
//! copy on this worker's disk: each chunk is checked against the
//! holder's chunk checksums before the map sees it, and the whole block
//! against the catalog's CRC at its end ([`data::open_checked_stream`]).
//! When a replica fails a check, or its holder stops answering, the read
//! goes on from the next holder (or, after a broken transfer, the same
//! one again) at the same offset (bytes before it are
//! received again and checked, not handed out twice), so the map never
//! uses a byte that failed a check and a damaged copy costs no attempt.
//! A holder's chunk CRCs must combine to the catalog's CRC before any
//! byte is used, so a copy consistent with its own checksums yet another
//! block is refused at once; should the whole still mismatch at the end,
//! the read fails rather than go on, since bytes already used are
//! suspect, and the attempt runs again. Damaged copies are blamed in the
//! task's report: readers send what they find (damage at once, bytes per
//! holder when they leave it), and the map collects it when it ends
//! ([`Findings`]).

use std::io::Read;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

use sluice_formats::input::{Codec, InputFile, Remote, RemoteSource, Split};
use sluice_proto::auth::Secret;
use sluice_proto::data::{self, CheckedStream};
use sluice_proto::proto;
use sluice_proto::ClusterError;

/// What the reads of a streamed block found.
#[derive(Default)]
pub(crate) struct Seen {
    /// Replicas that failed a check.
    pub corrupt: Vec<proto::CorruptReplica>,
    /// Bytes handed out, by holder address.
    pub reads: Vec<proto::RemoteRead>,
}

/// What a read of a streamed block found, as it found it.
enum Found {
    /// A holder's copy failed a check.
    Damaged(proto::CorruptReplica),
    /// Bytes handed out from the holder at this index of the sources.
    Read(usize, u64),
}

/// What the reads of a streamed block will find, collected when asked.
pub(crate) struct Findings {
    found: Receiver<Found>,
    sources: Arc<[String]>,
}

impl Findings {
    /// What the reads found so far (each finding once).
    pub(crate) fn collect(&self) -> Seen {
        let mut seen = Seen::default();
        for f in self.found.try_iter() {
            match f {
                Found::Damaged(c) => seen.corrupt.push(c),
                Found::Read(at, n) => count(&mut seen, &self.sources[at], n),
            }
        }
        seen
    }
}

/// A block on other workers, as a map's input.
#[derive(Clone)]
pub(crate) struct Streamed {
    secret: Secret,
    block: proto::BlockInfo,
    /// Holders' data-plane addresses, the nearest first.
    sources: Arc<[String]>,
    found: Sender<Found>,
}

impl Streamed {
    /// The split of map `index` over the whole of `block`, read from
    /// `sources`; returns it and what its reads will find.
    pub(crate) fn split(
        index: usize,
        secret: &Secret,
        block: &proto::BlockInfo,
        sources: &[String],
    ) -> (Split, Findings) {
        let (found, rx) = channel();
        let sources: Arc<[String]> = sources.into();
        let me = Streamed {
            secret: secret.clone(),
            block: block.clone(),
            sources: sources.clone(),
            found,
        };
        let file = InputFile {
            path: format!("block {} (from another worker)", block.id).into(),
            len: block.len,
            codec: Codec::None,
            checks: None,
            resident: None,
            remote: Some(Remote(Arc::new(me))),
            fill: None,
        };
        let split = Split {
            index,
            file: Arc::new(file),
            start: 0,
            end: block.len,
        };
        let findings = Findings { found: rx, sources };
        (split, findings)
    }
}

impl RemoteSource for Streamed {
    fn open_at(&self, offset: u64, _hint_end: u64) -> std::io::Result<Box<dyn Read + Send>> {
        let mut r = Failover {
            from: self.clone(),
            tried: 0,
            at: 0,
            unsent: 0,
            damaged: Vec::new(),
            current: None,
            pos: 0,
            last: None,
        };
        // Records of a block start at its beginning; an offset is skipped
        // (received and checked).
        std::io::copy(&mut (&mut r).take(offset), &mut std::io::sink())?;
        Ok(Box::new(r))
    }
}

/// Reads a streamed block from its holders in turn.
struct Failover {
    from: Streamed,
    /// Holders tried so far.
    tried: usize,
    /// The index among the sources of the holder read from.
    at: usize,
    /// Bytes handed out from that holder and not yet sent as found.
    unsent: u64,
    /// Holders whose copy failed a check.
    damaged: Vec<String>,
    current: Option<CheckedStream>,
    /// Bytes handed out.
    pos: u64,
    /// The last failure, for the error when no holder is left.
    last: Option<String>,
}

impl Failover {
    /// Opens the next holder that answers, positioned at `pos`: holders
    /// in turn, the nearest first, each tried again after a transfer that
    /// broke (up to twice each in all), never one whose copy failed a
    /// check.
    fn open(&mut self) -> std::io::Result<()> {
        let Streamed {
            secret,
            block,
            sources,
            ..
        } = self.from.clone();
        while self.tried < 2 * sources.len() {
            let at = self.tried % sources.len();
            let addr = &sources[at];
            self.tried += 1;
            if self.damaged.contains(addr) {
                continue;
            }
            let opened = data::open_checked_stream(addr, &secret, &block.id, block.len, block.crc)
                .and_then(|s| skip(s, self.pos));
            match opened {
                Ok(s) => {
                    self.current = Some(s);
                    self.send_reads();
                    self.at = at;
                    return Ok(());
                }
                Err(e) => self.failed(addr.clone(), e),
            }
        }
        let why = self.last.clone().unwrap_or_else(|| "no live holder".into());
        Err(std::io::Error::other(format!(
            "block {}: no holder could send it ({why})",
            block.id
        )))
    }

    /// Sends the bytes handed out from the current holder.
    fn send_reads(&mut self) {
        if self.unsent > 0 {
            // The map may have ended and no longer listen.
            let _ = self.from.found.send(Found::Read(self.at, self.unsent));
            self.unsent = 0;
        }
    }

    /// Notes a holder's failure; damage blames its copy.
    fn failed(&mut self, addr: String, e: ClusterError) {
        tracing::warn!("block {}: reading from {addr}: {e}", self.from.block.id);
        if let ClusterError::Damaged { damage, .. } = &e {
            self.damaged.push(addr.clone());
            let c = proto::CorruptReplica {
                block: self.from.block.id.clone(),
                worker: String::new(),
                addr,
                detail: damage.clone(),
                at_ms: sluice_proto::now_ms(),
            };
            // The map may have ended and no longer listen.
            let _ = self.from.found.send(Found::Damaged(c));
        }
        self.last = Some(e.to_string());
    }
}

impl Read for Failover {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if self.current.is_none() {
                self.open()?;
            }
            let s = self.current.as_mut().expect("opened");
            match s.read_checked(buf) {
                Ok(n) => {
                    self.pos += n as u64;
                    self.unsent += n as u64;
                    return Ok(n);
                }
                Err(e) => {
                    let (addr, whole) = (s.addr().to_owned(), s.whole_failed());
                    self.current = None;
                    self.failed(addr, e);
                    if whole {
                        // What was handed out is suspect: the read fails
                        // (and with it the attempt) rather than go on.
                        let why = self.last.clone().unwrap_or_default();
                        return Err(std::io::Error::other(why));
                    }
                }
            }
        }
    }
}

impl Drop for Failover {
    fn drop(&mut self) {
        self.send_reads();
    }
}

/// `s` with its first `n` bytes received and checked.
fn skip(mut s: CheckedStream, n: u64) -> Result<CheckedStream, ClusterError> {
    let mut buf = vec![0u8; 64 << 10];
    while s.position() < n {
        let want = (n - s.position()).min(buf.len() as u64) as usize;
        if s.read_checked(&mut buf[..want])? == 0 {
            break;
        }
    }
    Ok(s)
}

/// Adds `n` bytes read from `addr`.
fn count(seen: &mut Seen, addr: &str, n: u64) {
    match seen.reads.iter_mut().find(|r| r.addr == addr) {
        Some(r) => r.bytes += n,
        None => seen.reads.push(proto::RemoteRead {
            addr: addr.to_owned(),
            bytes: n,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_proto::data::Layout;

    fn holder(secret: &Secret) -> (String, tempfile::TempDir, Layout) {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::create(dir.path()).unwrap();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        data::serve(l, layout.clone(), secret.clone(), None);
        (addr, dir, layout)
    }

    #[test]
    fn a_damaged_holder_is_blamed_and_the_read_goes_on_from_the_next() {
        let secret = Secret::new(b"0123456789abcdef0123").unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let (len, crc) = (data.len() as u64, crc32c::crc32c(&data));
        let (a, _da, la) = holder(&secret);
        let (b, _db, _) = holder(&secret);
        for addr in [&a, &b] {
            data::write_block(addr, &secret, "b1", &mut &data[..], len, crc).unwrap();
        }
        // The first holder's copy is damaged in its third chunk.
        let path = la.block("b1");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[150_000] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let block = proto::BlockInfo {
            id: "b1".into(),
            len,
            crc,
            ..Default::default()
        };
        let (split, seen) = Streamed::split(0, &secret, &block, &[a.clone(), b.clone()]);
        let remote = split.file.remote.clone().unwrap();
        let mut got = Vec::new();
        remote
            .0
            .open_at(0, len)
            .unwrap()
            .read_to_end(&mut got)
            .unwrap();
        assert!(got == data);
        let seen = seen.collect();
        assert_eq!(seen.corrupt.len(), 1);
        assert_eq!(seen.corrupt[0].addr, a);
        // Two chunks from the first holder, the rest from the second.
        let from = |addr: &str| seen.reads.iter().find(|r| r.addr == addr).unwrap().bytes;
        assert_eq!(from(&a), 2 << 16);
        assert_eq!(from(&a) + from(&b), len);
        // From an offset: the same bytes.
        let mut tail = Vec::new();
        remote
            .0
            .open_at(1000, len)
            .unwrap()
            .read_to_end(&mut tail)
            .unwrap();
        assert!(tail[..] == data[1000..]);
    }

    #[test]
    fn no_intact_holder_fails_the_read_naming_the_damage() {
        let secret = Secret::new(b"0123456789abcdef0123").unwrap();
        let data = vec![7u8; 100_000];
        let (len, crc) = (data.len() as u64, crc32c::crc32c(&data));
        let (a, _da, la) = holder(&secret);
        data::write_block(&a, &secret, "b1", &mut &data[..], len, crc).unwrap();
        std::fs::write(la.block("b1"), vec![8u8; 100_000]).unwrap();
        let block = proto::BlockInfo {
            id: "b1".into(),
            len,
            crc,
            ..Default::default()
        };
        let (split, seen) = Streamed::split(0, &secret, &block, std::slice::from_ref(&a));
        let mut r = split
            .file
            .remote
            .clone()
            .unwrap()
            .0
            .open_at(0, len)
            .unwrap();
        let e = r.read_to_end(&mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("checksum mismatch"), "{e}");
        assert_eq!(seen.collect().corrupt.len(), 1);
    }
}
