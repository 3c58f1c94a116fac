//! The blocks this worker stores, beyond what tasks read: the block
//! scanner, the cache's loading thread, copies sent to other workers
//! (re-replication, paced) or fetched from them (side inputs), and a
//! task's output stored as a block.

use std::collections::HashSet;
use std::path::Path;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_formats::chunked::{ChunkSums, Damage};
use sluice_proto::block::Unusable;
use sluice_proto::data;
use sluice_proto::proto::{self, TaskAssignment};
use sluice_proto::ClusterError;

use crate::cache;
use crate::shared::{Pin, Shared};

type Result<T> = std::result::Result<T, ClusterError>;

/// Starts the block scanner (unless its rate is 0): a thread that reads
/// every stored block against its checksum file once per period, at most
/// at the configured rate, and queues damaged ones for the next heartbeat.
pub(crate) fn spawn_scanner(shared: &Arc<Shared>) {
    let scan = shared.cfg.scan;
    if scan.rate == 0 {
        return;
    }
    let shared = shared.clone();
    std::thread::spawn(move || loop {
        let pass = Instant::now();
        scan_pass(&shared, scan.rate);
        if let Some(rest) = scan.period.checked_sub(pass.elapsed()) {
            std::thread::sleep(rest);
        }
    });
}

/// One pass of the block scanner over every stored block, reading at most
/// `rate` bytes a second.
fn scan_pass(shared: &Shared, rate: u64) {
    let mut reported = HashSet::new();
    for id in shared.layout.block_ids().unwrap_or_default() {
        let Ok(len) = std::fs::metadata(shared.layout.block(&id)).map(|m| m.len()) else {
            continue;
        };
        let t = Instant::now();
        scan_block(shared, &id, &mut reported);
        // Pace: `len` bytes may take no less than len / rate seconds.
        let due = Duration::from_secs_f64(len as f64 / rate as f64);
        if let Some(rest) = due.checked_sub(t.elapsed()) {
            std::thread::sleep(rest);
        }
    }
}

/// Verifies stored block `id`; damage is reported once a pass (ids in
/// `reported`).
fn scan_block(shared: &Shared, id: &str, reported: &mut HashSet<String>) {
    match sluice_proto::block::verify(&shared.layout, id, None) {
        // Deleted while scanned (a job's end, a removed data set) is no damage.
        Err(Unusable::Damaged(d))
            if shared.layout.block(id).exists() && reported.insert(id.to_owned()) =>
        {
            let c = shared.own_damage(id, &format!("{d} (block scanner)"));
            shared.report_corrupt(c);
        }
        Err(Unusable::Io(e)) => tracing::warn!("block scanner: block {id}: {e}"),
        _ => {}
    }
}

/// Takes the blocks cache directives pin here now: unpinned ones are
/// evicted, and those not cached yet go to the cache's loading thread.
pub(crate) fn pin_blocks(shared: &Arc<Shared>, blocks: Vec<proto::BlockInfo>) {
    let todo: HashSet<String> = shared
        .cache
        .set_pins(blocks.iter().map(|b| b.id.clone()).collect())
        .into_iter()
        .collect();
    for b in blocks.into_iter().filter(|b| todo.contains(&b.id)) {
        let _ = shared.loader.send(Pin(b));
    }
}

/// Reads stored block `b` into `buf` and checks every chunk against its
/// checksum file (itself checked against the catalog's length and CRC):
/// what the cache admits is verified. One read into the cache's memory
/// and one CRC pass over it, not a checked reader's copies.
fn fill_block(
    shared: &Shared,
    b: &proto::BlockInfo,
    buf: &mut [u8],
) -> std::result::Result<(), Unusable> {
    use std::io::Read;
    let sums = sluice_proto::block::open_checked(&shared.layout, &b.id, b.len, b.crc)?;
    let path = shared.layout.block(&b.id);
    std::fs::File::open(&path)
        .and_then(|mut f| f.read_exact(buf))
        .map_err(Unusable::Io)?;
    check_sums(&ChunkSums::of(buf), &sums, b.len).map_err(Unusable::Damaged)
}

/// Whether the chunk checksums `got` of a block of `len` bytes are the
/// ones it was stored with.
fn check_sums(got: &ChunkSums, sums: &ChunkSums, len: u64) -> std::result::Result<(), Damage> {
    let bad = got.crcs.iter().zip(&sums.crcs).position(|(g, w)| g != w);
    match bad {
        None if got.crcs.len() == sums.crcs.len() => Ok(()),
        None => Err(Damage::Checksums(format!(
            "{} chunks for {len} bytes",
            sums.crcs.len(),
        ))),
        Some(index) => Err(Damage::Chunk {
            index: index as u64,
            offset: index as u64 * u64::from(sums.chunk),
            expected: sums.crcs[index],
            found: got.crcs[index],
        }),
    }
}

/// A block the cache could not load: a damaged replica is reported (and
/// never cached); memory that cannot be locked is logged.
fn cache_load_failed(shared: &Shared, id: &str, e: cache::LoadError<Unusable>) {
    match e {
        cache::LoadError::Fill(Unusable::Damaged(d)) => {
            shared.report_corrupt(shared.own_damage(id, &d.to_string()));
        }
        cache::LoadError::Fill(Unusable::Io(e)) => {
            tracing::warn!("block {id} not cached: reading it: {e}");
        }
        cache::LoadError::Memory(m) => tracing::warn!("block {id} not cached: {m}"),
    }
}

/// Loads pinned blocks into the cache, one at a time, off the tasks'
/// threads (blocks admitted on first read are loaded by their maps).
pub(crate) fn spawn_cache_loader(shared: &Arc<Shared>, work: Receiver<Pin>) {
    let shared = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("cache-loader".into())
        .spawn(move || {
            for Pin(b) in work {
                let fill = |buf: &mut [u8]| fill_block(&shared, &b, buf);
                let loaded = shared.cache.load_pinned(&b.id, b.len, fill).map(|ok| {
                    if !ok {
                        tracing::warn!("block {}: no room in the cache to pin it", b.id);
                    }
                });
                if let Err(e) = loaded {
                    cache_load_failed(&shared, &b.id, e);
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start the cache loading thread: {e}");
    }
}

/// Copies block `b` from the first of `sources` with an intact replica to
/// `to`; returns its chunk checksums, computed as it arrived. Replicas
/// found damaged on the way are added to `corrupt`.
pub(crate) fn fetch_block(
    shared: &Shared,
    b: &proto::BlockInfo,
    sources: &[String],
    to: &Path,
    corrupt: &mut Vec<proto::CorruptReplica>,
) -> Result<(ChunkSums, String)> {
    let mut last = ClusterError::Remote(format!("block {} has no live replica", b.id));
    for src in sources {
        let f = std::fs::File::create(to).map_err(|e| ClusterError::io("creating", to, e))?;
        let mut w =
            sluice_proto::block::Hashing::new(std::io::BufWriter::with_capacity(256 << 10, f));
        match data::read_block(src, &shared.cfg.secret, &b.id, b.len, b.crc, &mut w) {
            Ok(_) => {
                use std::io::Write;
                w.flush().map_err(|e| ClusterError::io("writing", to, e))?;
                return Ok((w.hasher.finish(), src.clone()));
            }
            Err(e) => {
                corrupt.extend(their_damage(&b.id, src, &e));
                last = e;
            }
        }
    }
    let _ = std::fs::remove_file(to);
    Err(last)
}

/// The damaged replica of block `id` on `src` that error `e` found, if
/// it found one.
fn their_damage(id: &str, src: &str, e: &ClusterError) -> Option<proto::CorruptReplica> {
    let ClusterError::Damaged { damage, .. } = e else {
        return None;
    };
    tracing::warn!("block {id}: damaged replica on {src}: {damage}");
    Some(proto::CorruptReplica {
        block: id.to_owned(),
        worker: String::new(),
        addr: src.to_owned(),
        detail: damage.clone(),
        at_ms: sluice_proto::now_ms(),
    })
}

/// Sends a copy of a block this worker holds to another worker
/// (re-replication), on a thread of its own: the replica is verified
/// against its checksums first (damage is reported as such, and the copy
/// fails), then streamed at most at `--replication-rate`; the target
/// checks the length and CRC as for any write. The outcome goes with the
/// next heartbeat.
pub(crate) fn spawn_copy(shared: &Arc<Shared>, c: proto::ReplicateCommand) {
    let (Some(b), Some(target)) = (c.block, c.target) else {
        return;
    };
    let shared = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("replicate".into())
        .spawn(move || {
            let outcome = copy_block(&shared, &b, &target.data_addr);
            if let Err(e) = &outcome {
                tracing::warn!("copying block {} to {}: {e}", b.id, target.data_addr);
            }
            shared.outbox().replicated(proto::ReplicateResult {
                block: b.id.clone(),
                target: target.uid.clone(),
                ok: outcome.is_ok(),
                error: outcome.err().map_or_else(String::new, |e| e.to_string()),
            });
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start a copy thread: {e}");
    }
}

fn copy_block(shared: &Shared, b: &proto::BlockInfo, to: &str) -> Result<()> {
    data::check_id(&b.id)?;
    match sluice_proto::block::verify(&shared.layout, &b.id, Some((b.len, b.crc))) {
        Ok(()) => {}
        Err(Unusable::Damaged(d)) => {
            let c = shared.own_damage(&b.id, &format!("{d} (sending a copy)"));
            shared.report_corrupt(c);
            return Err(ClusterError::Damaged {
                block: b.id.clone(),
                holder: shared.data_addr.clone(),
                damage: d.to_string(),
            });
        }
        Err(Unusable::Io(e)) => {
            return Err(ClusterError::io("reading", &shared.layout.block(&b.id), e))
        }
    }
    let path = shared.layout.block(&b.id);
    let file = std::fs::File::open(&path).map_err(|e| ClusterError::io("reading", &path, e))?;
    let mut paced = Paced::new(file, shared.cfg.replication_rate);
    data::write_block(to, &shared.cfg.secret, &b.id, &mut paced, b.len, b.crc)
}

/// A reader that delivers at most `rate` bytes a second (0: no limit),
/// sleeping as it goes, so re-replication leaves the disk and network to
/// jobs.
struct Paced<R> {
    inner: R,
    rate: u64,
    start: Instant,
    read: u64,
}

impl<R> Paced<R> {
    fn new(inner: R, rate: u64) -> Self {
        Paced {
            inner,
            rate,
            start: Instant::now(),
            read: 0,
        }
    }
}

impl<R: std::io::Read> std::io::Read for Paced<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.rate > 0 {
            let due = Duration::from_secs_f64(self.read as f64 / self.rate as f64);
            if let Some(wait) = due.checked_sub(self.start.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// Moves a task's output file into the block store as its output block,
/// then copies it to the workers the assignment names. A copy that fails
/// leaves the block with fewer replicas (as an HDFS pipeline carries on
/// without a failed node); the report lists the workers that have one.
pub(crate) fn store_output(
    shared: &Shared,
    a: &TaskAssignment,
    file: &Path,
) -> Result<proto::BlockInfo> {
    let id = &a.output_block;
    data::check_id(id)?;
    let (len, crc) = sluice_proto::block::adopt(&shared.layout, id, file)?;
    let to = shared.layout.block(id);
    let mut replicas = Vec::new();
    for w in &a.output_copies {
        let copied = std::fs::File::open(&to)
            .map_err(|e| ClusterError::io("reading", &to, e))
            .and_then(|mut f| {
                data::write_block(&w.data_addr, &shared.cfg.secret, id, &mut f, len, crc)
            });
        match copied {
            Ok(()) => replicas.push(w.uid.clone()),
            Err(e) => tracing::warn!("output block {id}: no copy on {}: {e}", w.data_addr),
        }
    }
    Ok(proto::BlockInfo {
        id: id.to_owned(),
        len,
        crc,
        replicas,
        corrupt: Vec::new(),
        capability: Default::default(),
    })
}
