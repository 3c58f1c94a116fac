//! Short-circuit reads: a map on a host with a DataNode reads that
//! DataNode's replicas straight from the local disk instead of through
//! the DataNode's TCP transfer protocol, as HDFS clients do with
//! `dfs.client.read.shortcircuit` (here the "legacy" kind, HDFS-2246: the
//! DataNode tells the client the replica's file and checksum file with
//! `getBlockLocalPathInfo`, see [`crate::hadoop_ipc`]; the newer kind
//! passes file descriptors over a UNIX socket and needs Hadoop's native
//! library in the DataNode).
//!
//! **When.** On by default; `SLUICE_HDFS_SHORT_CIRCUIT=0` turns it off.
//! A file's blocks come from the NameNode's `getBlockLocations` (ids,
//! generation stamps, tokens, and each replica's DataNode with its IPC
//! port); a block is read short-circuit when one of its DataNodes has an
//! address of this host and answers the call, which it does only for the
//! users in its `dfs.block.local-path-access.user` and only without
//! Kerberos. Files that are encrypted, erasure-coded or being written are
//! not. Anything else (a NameNode named by a logical HA name, no local
//! replica, a refusal, a file the user cannot open) reads over the
//! network as before, from where the reader is: a refusal is said once a
//! process, per DataNode.
//!
//! **Integrity.** Every chunk is checked against its checksum before a
//! byte of it is handed on, as the DataNode's packets are. A replica's
//! file holds the block's bytes; its `.meta` file is
//!
//! ```text
//! u16 version (1) | u8 type (1 CRC32, 2 CRC32C) | u32 bytes per chunk
//! then u32 checksum of each chunk, the last chunk possibly short
//! ```
//!
//! all big-endian. A chunk that does not match, or a replica file shorter
//! than its block, blames that replica: it is said (naming the file),
//! reported to the NameNode (`reportBadBlocks`, which marks it corrupt
//! and re-replicates the block from a good copy), and the rest of the
//! read goes over the network, where the client checks
//! every packet again and moves to another replica if that one is bad
//! too. Nothing unchecked reaches the reader.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Read;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, OnceLock};

use crate::hadoop_ipc::{
    block_local_paths, block_locations, listing_with_blocks, report_bad_block, CallError,
    DatanodeInfo, ExtendedBlock, LocalPaths, LocatedBlock, LocatedBlocks,
};

/// Bytes of a block read and checked at a time when the reader's own
/// buffer is too small or the read starts inside a chunk (the next read
/// then starts on a chunk and goes straight to the reader's buffer).
const BUFFER: usize = 64 << 10;
/// The most read straight into a reader's buffer at a time.
const DIRECT: usize = 4 << 20;
/// The `.meta` file's header: version, type, bytes per chunk.
const META_HEADER: u64 = 7;

/// Whether short-circuit reads are tried (`SLUICE_HDFS_SHORT_CIRCUIT`).
pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        !matches!(
            std::env::var("SLUICE_HDFS_SHORT_CIRCUIT").as_deref(),
            Ok("0" | "off" | "false" | "no")
        )
    })
}

/// One block of a file: where it starts, what it is, and the IPC
/// addresses of the DataNodes holding it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Located {
    pub offset: u64,
    pub len: u64,
    pub datanodes: Vec<SocketAddr>,
    /// The block as the NameNode gave it: its id and token, and what a
    /// report of a damaged replica sends back.
    pub given: LocatedBlock,
}

/// The blocks of the file at `path` (of `len` bytes) from the NameNode
/// at `namenode` (`HOST:PORT`), or why they cannot be read
/// short-circuit: an encrypted or erasure-coded file's replicas are not
/// its bytes, and a file being written may still change.
pub(crate) fn located_blocks(
    namenode: &str,
    user: &str,
    path: &str,
    len: u64,
) -> Result<Vec<Located>, String> {
    let lb = block_locations(namenode_addr(namenode)?, user, path, len)
        .map_err(|e| format!("the blocks of {path} from the NameNode {namenode}: {e}"))?;
    located(lb, path)
}

/// A DataNode's IPC address.
fn ipc_addr(d: &DatanodeInfo) -> Option<SocketAddr> {
    let ip: IpAddr = d.id.ip_addr.parse().ok()?;
    Some(SocketAddr::new(ip, u16::try_from(d.id.ipc_port).ok()?))
}

/// Reports the replica of `b` on the DataNode at `dn` damaged to the
/// NameNode (said if the report fails: the read goes on regardless).
fn report_damaged(namenode: &str, user: &str, b: &Located, dn: SocketAddr) {
    let mut given = b.given.clone();
    given.locs.retain(|l| ipc_addr(l) == Some(dn));
    let reported = namenode_addr(namenode)
        .and_then(|a| report_bad_block(a, user, given).map_err(|e| e.to_string()));
    match reported {
        Ok(()) => tracing::warn!(
            "reported the replica of block {} on the DataNode at {dn} damaged to the NameNode",
            b.given.b.block_id
        ),
        Err(e) => tracing::warn!(
            "could not report the damaged replica of block {} to the NameNode: {e}",
            b.given.b.block_id
        ),
    }
}

fn namenode_addr(namenode: &str) -> Result<SocketAddr, String> {
    namenode
        .to_socket_addrs()
        .map_err(|e| format!("the NameNode {namenode}: {e}"))?
        .next()
        .ok_or_else(|| format!("the NameNode {namenode} has no address"))
}

/// A file's blocks, or why it is not read short-circuit.
pub(crate) type FileBlocks = Result<Arc<Vec<Located>>, String>;

/// The located blocks of every file of a directory, asked for in one
/// listing when the first of them is read (a job reads them all; one
/// `getListing` in place of a `getBlockLocations` a file).
pub(crate) struct Directory {
    namenode: String,
    user: String,
    dir: String,
    /// Each file's blocks by path, or why not; empty when the listing
    /// failed.
    listed: OnceLock<HashMap<String, FileBlocks>>,
}

impl Directory {
    pub(crate) fn new(namenode: String, user: String, dir: String) -> Directory {
        Directory {
            namenode,
            user,
            dir,
            listed: OnceLock::new(),
        }
    }

    /// The blocks of the file at `path` in this directory, if the
    /// listing gave them.
    pub(crate) fn blocks(&self, path: &str) -> Option<FileBlocks> {
        self.listed.get_or_init(|| self.list()).get(path).cloned()
    }

    fn list(&self) -> HashMap<String, FileBlocks> {
        let listed = namenode_addr(&self.namenode)
            .and_then(|a| listing_with_blocks(a, &self.user, &self.dir).map_err(|e| e.to_string()));
        let entries = match listed {
            Ok(e) => e,
            Err(e) => {
                tracing::debug!("no listing of {} with its blocks: {e}", self.dir);
                return HashMap::new();
            }
        };
        tracing::debug!("listed {} with its files' blocks", self.dir);
        let dir = self.dir.trim_end_matches('/');
        entries
            .into_iter()
            .filter(|st| st.file_type == 2)
            .filter_map(|st| {
                let path = format!("{dir}/{}", String::from_utf8(st.path).ok()?);
                let blocks = if st.file_encryption_info.is_some() || st.ec_policy.is_some() {
                    Err(format!("{path} is encrypted or erasure-coded"))
                } else {
                    st.locations
                        .ok_or_else(|| format!("no blocks of {path} in the listing"))
                        .and_then(|lb| located(lb, &path))
                        .map(Arc::new)
                };
                Some((path, blocks))
            })
            .collect()
    }
}

fn located(lb: LocatedBlocks, path: &str) -> Result<Vec<Located>, String> {
    if lb.file_encryption_info.is_some() {
        return Err(format!("{path} is encrypted"));
    }
    if lb.ec_policy.is_some() {
        return Err(format!("{path} is erasure-coded"));
    }
    if lb.under_construction {
        return Err(format!("{path} is being written"));
    }
    let mut out: Vec<Located> = lb
        .blocks
        .into_iter()
        .map(|b| Located {
            offset: b.offset,
            len: b.b.num_bytes.unwrap_or(0),
            datanodes: b.locs.iter().filter_map(ipc_addr).collect(),
            given: b,
        })
        .collect();
    out.sort_by_key(|b| b.offset);
    Ok(out)
}

/// Whether `ip` is an address of this host (one can bind to it).
fn is_local(ip: IpAddr) -> bool {
    static KNOWN: OnceLock<Mutex<HashMap<IpAddr, bool>>> = OnceLock::new();
    let mut known = KNOWN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    *known
        .entry(ip)
        .or_insert_with(|| std::net::UdpSocket::bind((ip, 0)).is_ok())
}

/// DataNodes that refused the call to this process's user: not asked
/// again.
fn refused() -> &'static Mutex<HashSet<SocketAddr>> {
    static REFUSED: OnceLock<Mutex<HashSet<SocketAddr>>> = OnceLock::new();
    REFUSED.get_or_init(Default::default)
}

/// Replicas' local paths already asked for, by block and DataNode.
fn known_paths() -> &'static Mutex<HashMap<(ExtendedBlock, SocketAddr), LocalPaths>> {
    static PATHS: OnceLock<Mutex<HashMap<(ExtendedBlock, SocketAddr), LocalPaths>>> =
        OnceLock::new();
    PATHS.get_or_init(Default::default)
}

/// Whether the block holding `offset` has a replica on a DataNode of
/// this host that has not refused this process.
pub(crate) fn starts_local(blocks: &[Located], offset: u64) -> bool {
    block_at(blocks, offset).is_some_and(|b| local_datanodes(&blocks[b]).next().is_some())
}

fn block_at(blocks: &[Located], offset: u64) -> Option<usize> {
    blocks
        .iter()
        .position(|b| b.offset <= offset && offset < b.offset + b.len)
}

fn local_datanodes(b: &Located) -> impl Iterator<Item = SocketAddr> + '_ {
    b.datanodes.iter().copied().filter(|d| {
        is_local(d.ip())
            && !refused()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(d)
    })
}

/// Why a reader stops reading short-circuit.
#[derive(Debug)]
enum Stop {
    /// The replica is damaged (a chunk that does not match its checksum,
    /// a file shorter than its block): said as a warning, naming it.
    Damaged(String),
    /// Short-circuit reading is not possible here (no local replica, a
    /// refusal, a file that cannot be opened): the network is the way.
    Unavailable(String),
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Damaged(why) | Stop::Unavailable(why) => f.write_str(why),
        }
    }
}

/// Which checksum a `.meta` file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sum {
    Crc32,
    Crc32c,
}

impl Sum {
    fn of(data: &[u8], kind: Sum) -> u32 {
        match kind {
            Sum::Crc32 => crc32fast::hash(data),
            Sum::Crc32c => crc32c::crc32c(data),
        }
    }
}

/// A replica opened on the local disk.
struct Replica {
    data: File,
    meta: File,
    kind: Sum,
    per_chunk: u64,
    /// The replica's data file, for messages.
    path: String,
    /// The DataNode that named it (unknown in unit tests).
    datanode: Option<SocketAddr>,
}

/// Reads a `.meta` file's header: the checksum and bytes per chunk.
fn meta_header(meta: &File, path: &str) -> Result<(Sum, u64), String> {
    let mut h = [0u8; META_HEADER as usize];
    meta.read_exact_at(&mut h, 0)
        .map_err(|e| format!("{path}: {e}"))?;
    let kind = match h[2] {
        1 => Sum::Crc32,
        2 => Sum::Crc32c,
        t => return Err(format!("{path}: checksum type {t}, not CRC32 or CRC32C")),
    };
    let per_chunk = u32::from_be_bytes(h[3..7].try_into().expect("4 bytes")) as u64;
    if per_chunk == 0 {
        return Err(format!("{path}: 0 bytes per checksum"));
    }
    Ok((kind, per_chunk))
}

/// Opens a local replica of `b`: asks each local DataNode in turn.
fn open_replica(b: &Located, user: &str) -> Result<Replica, String> {
    let mut why = Vec::new();
    for dn in local_datanodes(b) {
        match replica_at(b, dn, user) {
            Ok(r) => return Ok(r),
            Err(e) => why.push(format!("DataNode {dn}: {e}")),
        }
    }
    if why.is_empty() {
        why.push("no replica on a DataNode of this host".into());
    }
    Err(why.join("; "))
}

fn replica_at(b: &Located, dn: SocketAddr, user: &str) -> Result<Replica, String> {
    let cached = known_paths()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&(b.given.b.clone(), dn))
        .cloned();
    let paths = match cached {
        Some(p) => p,
        None => {
            let p = block_local_paths(dn, user, &b.given.b, &b.given.block_token).map_err(|e| {
                if let CallError::Remote { class, message } = &e {
                    if class.ends_with("AccessControlException") {
                        refused_by(dn, class, message);
                    }
                }
                e.to_string()
            })?;
            known_paths()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert((b.given.b.clone(), dn), p.clone());
            p
        }
    };
    let opened = open_paths(&paths).map(|r| Replica {
        datanode: Some(dn),
        ..r
    });
    if let Err(e) = &opened {
        // Moved or gone since it was asked for: ask again next time.
        known_paths()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(b.given.b.clone(), dn));
        if e.contains("Permission denied") {
            // The DataNode's directories are not this user's to read.
            refused_by(dn, "its block files", e);
        }
    }
    opened
}

fn open_paths(p: &LocalPaths) -> Result<Replica, String> {
    let open = |path: &str| File::open(path).map_err(|e| format!("{path}: {e}"));
    let data = open(&p.data)?;
    let meta = open(&p.meta)?;
    let (kind, per_chunk) = meta_header(&meta, &p.meta)?;
    Ok(Replica {
        data,
        meta,
        kind,
        per_chunk,
        path: p.data.clone(),
        datanode: None,
    })
}

/// Says once a process that a DataNode refused this user.
fn refused_by(dn: SocketAddr, class: &str, message: &str) {
    let first = refused()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(dn);
    if first {
        tracing::warn!(
            "HDFS short-circuit reads refused by the DataNode at {dn} ({class}: {message}); \
             its blocks are read over the network (allow this user in the DataNode's \
             dfs.block.local-path-access.user, or set SLUICE_HDFS_SHORT_CIRCUIT=0)"
        );
    }
}

/// Opens a reader of the rest of the file over the network from an
/// offset.
pub(crate) type Network = Box<dyn Fn(u64) -> Box<dyn Read + Send> + Send>;

/// Reads a file from `pos` on, short-circuit where it can.
pub(crate) struct Reader {
    blocks: Arc<Vec<Located>>,
    len: u64,
    pos: u64,
    /// The NameNode (`HOST:PORT`) a damaged replica is reported to.
    namenode: String,
    user: String,
    /// The block being read and its replica.
    current: Option<(usize, Replica)>,
    /// Checked bytes not yet handed on: `buf[start..end]`.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    sums: Vec<u8>,
    network: Network,
    /// Once short-circuit reading has stopped: the network's reader.
    fallback: Option<Box<dyn Read + Send>>,
}

impl Reader {
    pub(crate) fn new(
        blocks: Arc<Vec<Located>>,
        len: u64,
        pos: u64,
        (namenode, user): (String, String),
        network: Network,
    ) -> Reader {
        Reader {
            blocks,
            len,
            pos,
            namenode,
            user,
            current: None,
            buf: Vec::new(),
            start: 0,
            end: 0,
            sums: Vec::new(),
            network,
            fallback: None,
        }
    }

    /// Opens the replica of the block holding `pos` unless it is open.
    fn open_current(&mut self) -> Result<(), Stop> {
        let i = block_at(&self.blocks, self.pos)
            .ok_or_else(|| Stop::Unavailable(format!("no block holds offset {}", self.pos)))?;
        if self.current.as_ref().is_none_or(|(c, _)| *c != i) {
            self.current = None;
            let r = open_replica(&self.blocks[i], &self.user).map_err(Stop::Unavailable)?;
            tracing::debug!("HDFS short-circuit read of {}", r.path);
            self.current = Some((i, r));
        }
        Ok(())
    }

    /// Reads and checks the next chunks: straight into `out` when the
    /// read starts on a chunk and `out` holds one, else into the buffer.
    /// Returns the bytes placed in `out` (0 when they went to the buffer).
    fn next_chunks(&mut self, out: &mut [u8]) -> Result<usize, Stop> {
        self.open_current()?;
        let (i, r) = self.current.as_ref().expect("opened");
        let b = &self.blocks[*i];
        let in_block = self.pos - b.offset;
        let first = in_block / r.per_chunk * r.per_chunk;
        let skip = (in_block - first) as usize;
        let left = b.len - first;
        // Whole chunks only (each checksum covers its whole chunk), or
        // the block's last, short chunk whole.
        if skip == 0 && out.len() as u64 >= r.per_chunk.min(left) {
            let whole = out.len().min(DIRECT) as u64 / r.per_chunk * r.per_chunk;
            let n = if whole == 0 { left } else { whole.min(left) } as usize;
            read_checked(r, first, &mut out[..n], &mut self.sums)?;
            self.pos += n as u64;
            return Ok(n);
        }
        let n = ((BUFFER as u64 / r.per_chunk).max(1) * r.per_chunk).min(left) as usize;
        if self.buf.len() < n {
            self.buf.resize(n, 0);
        }
        read_checked(r, first, &mut self.buf[..n], &mut self.sums)?;
        self.start = skip;
        self.end = n;
        Ok(0)
    }

    /// Stops reading short-circuit: says why (a warning that blames a
    /// damaged replica), and goes on over the network from where the
    /// reader is.
    fn fall_back(&mut self, why: &Stop) {
        let pos = self.pos;
        match why {
            Stop::Damaged(_) => {
                tracing::warn!(
                    "HDFS short-circuit read stopped at offset {pos}: {why}; reading over the network"
                );
                if let Some((
                    i,
                    Replica {
                        datanode: Some(dn), ..
                    },
                )) = &self.current
                {
                    report_damaged(&self.namenode, &self.user, &self.blocks[*i], *dn);
                }
            }
            Stop::Unavailable(_) => {
                tracing::debug!("HDFS short-circuit read stopped at offset {pos}: {why}")
            }
        }
        self.current = None;
        self.start = 0;
        self.end = 0;
        self.fallback = Some((self.network)(self.pos));
    }
}

/// Reads `out.len()` bytes of `r`'s block from `first` (a chunk's start)
/// and checks each chunk against the `.meta` file.
fn read_checked(r: &Replica, first: u64, out: &mut [u8], sums: &mut Vec<u8>) -> Result<(), Stop> {
    let damaged =
        |what: String| Stop::Damaged(format!("the replica {} is damaged: {what}", r.path));
    r.data.read_exact_at(out, first).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            damaged("shorter than its block".into())
        } else {
            Stop::Unavailable(format!("{}: {e}", r.path))
        }
    })?;
    let chunk0 = first / r.per_chunk;
    let chunks = out.len().div_ceil(r.per_chunk as usize);
    sums.resize(chunks * 4, 0);
    r.meta
        .read_exact_at(sums, META_HEADER + chunk0 * 4)
        .map_err(|e| damaged(format!("its checksums: {e}")))?;
    for (i, (chunk, want)) in out
        .chunks(r.per_chunk as usize)
        .zip(sums.chunks_exact(4))
        .enumerate()
    {
        let want = u32::from_be_bytes(want.try_into().expect("4 bytes"));
        if Sum::of(chunk, r.kind) != want {
            let at = (chunk0 + i as u64) * r.per_chunk;
            return Err(damaged(format!("checksum mismatch in the chunk at {at}")));
        }
    }
    Ok(())
}

impl Read for Reader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if let Some(f) = self.fallback.as_mut() {
                return f.read(out);
            }
            if self.start < self.end {
                let n = (self.end - self.start).min(out.len());
                out[..n].copy_from_slice(&self.buf[self.start..self.start + n]);
                self.start += n;
                self.pos += n as u64;
                return Ok(n);
            }
            if self.pos >= self.len || out.is_empty() {
                return Ok(0);
            }
            match self.next_chunks(out) {
                Ok(0) => continue,
                Ok(n) => return Ok(n),
                Err(why) => self.fall_back(&why),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hadoop_ipc::Token;
    use std::io::Write;

    fn block(
        id: u64,
        offset: u64,
        len: u64,
        dns: &[(&str, u32)],
    ) -> crate::hadoop_ipc::LocatedBlock {
        use crate::hadoop_ipc::{DatanodeId, DatanodeInfo, LocatedBlock};
        LocatedBlock {
            b: ExtendedBlock {
                pool_id: "BP-1".into(),
                block_id: id,
                generation_stamp: 1001,
                num_bytes: Some(len),
            },
            offset,
            locs: dns
                .iter()
                .map(|(ip, port)| DatanodeInfo {
                    id: DatanodeId {
                        ip_addr: (*ip).into(),
                        ipc_port: *port,
                        ..Default::default()
                    },
                })
                .collect(),
            corrupt: false,
            block_token: Token::default(),
        }
    }

    #[test]
    fn located_blocks_in_file_order_with_their_datanodes_ipc_addresses() {
        let lb = LocatedBlocks {
            file_length: 3000,
            blocks: vec![
                block(2, 2000, 1000, &[("127.0.0.1", 43555)]),
                block(1, 0, 2000, &[("10.0.0.9", 9867), ("not-an-ip", 1)]),
            ],
            under_construction: false,
            file_encryption_info: None,
            ec_policy: None,
        };
        let b = located(lb.clone(), "/f").unwrap();
        assert_eq!((b[0].offset, b[0].len, b[0].given.b.block_id), (0, 2000, 1));
        assert_eq!(b[0].datanodes, ["10.0.0.9:9867".parse().unwrap()]);
        assert_eq!(b[1].datanodes, ["127.0.0.1:43555".parse().unwrap()]);
        assert_eq!(block_at(&b, 1999), Some(0));
        assert_eq!(block_at(&b, 2000), Some(1));
        assert_eq!(block_at(&b, 3000), None);
        // Replicas that are not the file's bytes, or may change: none.
        let e = |lb| located(lb, "/f").unwrap_err();
        assert!(e(LocatedBlocks {
            file_encryption_info: Some(vec![1]),
            ..lb.clone()
        })
        .contains("encrypted"));
        assert!(e(LocatedBlocks {
            ec_policy: Some(vec![1]),
            ..lb.clone()
        })
        .contains("erasure-coded"));
        assert!(e(LocatedBlocks {
            under_construction: true,
            ..lb
        })
        .contains("being written"));
        assert!(located_blocks("no-such-host.invalid:8020", "u", "/f", 1).is_err());
    }

    /// A replica of `data` in `dir`, `per_chunk` bytes a CRC32C.
    fn replica(dir: &std::path::Path, data: &[u8], per_chunk: usize) -> LocalPaths {
        let p = LocalPaths {
            data: dir.join("blk_1").display().to_string(),
            meta: dir.join("blk_1_1001.meta").display().to_string(),
        };
        std::fs::write(&p.data, data).unwrap();
        let mut meta = std::fs::File::create(&p.meta).unwrap();
        meta.write_all(&[0, 1, 2]).unwrap();
        meta.write_all(&(per_chunk as u32).to_be_bytes()).unwrap();
        for c in data.chunks(per_chunk) {
            meta.write_all(&crc32c::crc32c(c).to_be_bytes()).unwrap();
        }
        p
    }

    fn bytes(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 255) as u8).collect()
    }

    #[test]
    fn whole_chunks_are_checked_from_any_chunk_to_the_blocks_end() {
        let d = tempfile::tempdir().unwrap();
        let data = bytes(3000);
        let r = open_paths(&replica(d.path(), &data, 512)).unwrap();
        assert_eq!((r.kind, r.per_chunk), (Sum::Crc32c, 512));
        let mut sums = Vec::new();
        for (first, len) in [(0, 3000), (512, 1024), (2560, 440)] {
            let mut out = vec![0; len];
            read_checked(&r, first, &mut out, &mut sums).unwrap();
            assert_eq!(out, data[first as usize..first as usize + len]);
        }
    }

    #[test]
    fn a_damaged_or_short_replica_is_blamed() {
        let d = tempfile::tempdir().unwrap();
        let mut data = bytes(3000);
        let p = replica(d.path(), &data, 512);
        data[1500] ^= 1;
        std::fs::write(&p.data, &data).unwrap();
        let r = open_paths(&p).unwrap();
        let mut out = vec![0; 3000];
        let e = read_checked(&r, 0, &mut out, &mut Vec::new()).unwrap_err();
        assert!(matches!(e, Stop::Damaged(_)), "{e}");
        let e = e.to_string();
        assert!(
            e.contains("blk_1 is damaged") && e.contains("chunk at 1024"),
            "{e}"
        );
        // The chunks before the damaged one still read.
        read_checked(&r, 0, &mut out[..1024], &mut Vec::new()).unwrap();
        std::fs::write(&p.data, &data[..2000]).unwrap();
        let e = read_checked(&r, 0, &mut out, &mut Vec::new()).unwrap_err();
        assert!(matches!(e, Stop::Damaged(_)), "{e}");
        assert!(e.to_string().contains("shorter than its block"), "{e}");
        std::fs::write(&p.meta, [0, 1, 9, 0, 0, 2, 0]).unwrap();
        assert!(open_paths(&p).err().unwrap().contains("checksum type 9"));
    }

    /// A reader of one local "block" whose network fallback serves
    /// `net` (so a test sees which path each byte came through).
    fn reader_of(p: &LocalPaths, len: u64, pos: u64, net: Vec<u8>) -> Reader {
        let mut r = Reader::new(
            Arc::new(Vec::new()),
            len,
            pos,
            ("nn:1".into(), "u".into()),
            Box::new(move |at| Box::new(std::io::Cursor::new(net[at as usize..].to_vec()))),
        );
        r.current = Some((0, open_paths(p).unwrap()));
        r.blocks = Arc::new(vec![Located {
            offset: 0,
            len,
            datanodes: Vec::new(),
            given: block(1, 0, len, &[]),
        }]);
        r
    }

    /// Reads all of `r` with reads of `sizes` bytes at most, in turn.
    fn read_in(r: &mut Reader, sizes: &[usize]) -> Vec<u8> {
        let mut got = Vec::new();
        for size in sizes.iter().cycle() {
            let mut buf = vec![0; *size];
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                return got;
            }
            got.extend_from_slice(&buf[..n]);
        }
        unreachable!()
    }

    #[test]
    fn reads_of_any_size_meet_whole_chunks_and_the_short_last_one() {
        let d = tempfile::tempdir().unwrap();
        // 70,480 bytes: 512-byte chunks end with one of 336; 1,000-byte
        // chunks (not a divisor of the 64 KiB staging buffer) with one
        // of 480.
        let len = 70_480;
        let data = bytes(len);
        for per_chunk in [512, 1000] {
            let p = replica(d.path(), &data, per_chunk);
            let last = (len / per_chunk * per_chunk) as u64;
            let cases: &[(u64, &[usize])] = &[
                (0, &[500]),
                (0, &[1]),
                (3, &[7, 4096]),
                (0, &[1 << 20]),
                // To the last chunk's start, then a read smaller than a
                // chunk and larger than the last one.
                (0, &[last as usize, 490]),
                (last - 10, &[10, 490]),
            ];
            for (from, sizes) in cases {
                let mut r = reader_of(&p, len as u64, *from, vec![0xee; len]);
                let got = read_in(&mut r, sizes);
                assert!(r.fallback.is_none(), "{per_chunk} {from} {sizes:?}");
                assert_eq!(got, data[*from as usize..], "{per_chunk} {from} {sizes:?}");
            }
        }
    }

    #[test]
    fn the_reader_serves_checked_bytes_and_falls_back_from_where_it_is() {
        let d = tempfile::tempdir().unwrap();
        let data = bytes(300_000);
        let p = replica(d.path(), &data, 512);
        // From inside a chunk, with small and large reads mixed.
        let mut r = reader_of(&p, 300_000, 1000, vec![0xee; 300_000]);
        let mut got = vec![0; 7];
        r.read_exact(&mut got).unwrap();
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        got.extend(rest);
        assert_eq!(got, data[1000..]);
        // A damaged chunk: the bytes before it from the disk, the rest
        // from the network, none of the damaged chunk's.
        let mut bad = data.clone();
        bad[200_000] ^= 0xff;
        std::fs::write(&p.data, &bad).unwrap();
        let mut r = reader_of(&p, 300_000, 0, data.clone());
        let mut got = Vec::new();
        let mut buf = vec![0; 64 << 10];
        loop {
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert!(r.fallback.is_some());
        assert_eq!(got, data);
    }
}
