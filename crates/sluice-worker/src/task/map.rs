//! A map attempt: its split (blocks read here, from the cache, admitted
//! to it on first read, or streamed from another worker; or a file in an
//! external store; or none, for a synthetic map), run by the engine, its
//! output kept here as one spill file (or stored as a block when the job
//! has no reducers).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_engine::tasks::{self, TaskOutput};
use sluice_formats::input::{MapSplit, Split};
use sluice_proto::block::Unusable;
use sluice_proto::data;
use sluice_proto::proto::{self, TaskAssignment, TaskReport};
use sluice_proto::ClusterError;

use crate::blocks;
use crate::cache;
use crate::rowfile;
use crate::shared::Shared;
use crate::stream;

use super::failure::engine_failure;
use super::job::task_job;

type Result<T> = std::result::Result<T, ClusterError>;

pub(super) fn run_map(
    shared: &Shared,
    a: &TaskAssignment,
    report: &mut TaskReport,
) -> Result<TaskOutput> {
    let id = a.task.unwrap_or_default();
    let (spec, cfg) = task_job(shared, a)?;
    report.memory_bytes = cfg.memory;
    let work = shared.layout.work_dir(id.job);
    std::fs::create_dir_all(&work).map_err(|e| ClusterError::io("creating", &work, e))?;
    let inputs = map_inputs(shared, a, report)?;
    let split = split_of(a, &inputs)?;
    report.input_bytes = split.len();
    report.cache_hit =
        !inputs.is_empty() && inputs.iter().all(|i| matches!(i.from, MapInput::Cached));
    let job = (&spec, &cfg, &split);
    let res = if a.reducers == 0 {
        map_only(shared, a, job, &work, report)
    } else {
        map_to_shuffle(shared, a, job, report)?
    };
    what_inputs_found(shared, &inputs, &res, report);
    drop(inputs);
    res
}

/// The job, its settings and the split a map runs.
type MapJob<'a> = (
    &'a sluice_api::JobSpec,
    &'a sluice_engine::EngineConfig,
    &'a MapSplit,
);

/// The split of map `a`: its external file, its blocks, or none (a
/// synthetic map, which makes its own records).
fn split_of(a: &TaskAssignment, inputs: &[BlockInput]) -> Result<MapSplit> {
    let index = a.task.unwrap_or_default().index as usize;
    Ok(if let Some(e) = &a.external {
        MapSplit::one(index, external_split(index, e)?)
    } else if inputs.is_empty() {
        MapSplit::one(index, Split::synthetic(index))
    } else {
        let parts = inputs.iter().map(|i| i.split.clone()).collect();
        MapSplit { index, parts }
    })
}

/// A map of a job with no reducers: its output stored as a block.
fn map_only(
    shared: &Shared,
    a: &TaskAssignment,
    (spec, cfg, split): MapJob<'_>,
    work: &Path,
    report: &mut TaskReport,
) -> Result<TaskOutput> {
    let id = a.task.unwrap_or_default();
    let dir = work.join(format!("m{}-a{}", id.index, id.attempt));
    let o = tasks::map_only_task(spec, cfg, split, &dir).map_err(engine_failure);
    let stored = o.and_then(|o| {
        let file = dir.join(format!("part-m-{:05}", id.index));
        report.output = Some(blocks::store_output(shared, a, &file)?);
        Ok(o)
    });
    let _ = std::fs::remove_dir_all(&dir);
    stored
}

/// A map whose output stays here for the reducers to fetch; the outer
/// error: its directory could not be made.
fn map_to_shuffle(
    shared: &Shared,
    a: &TaskAssignment,
    (spec, cfg, split): MapJob<'_>,
    report: &mut TaskReport,
) -> Result<Result<TaskOutput>> {
    let id = a.task.unwrap_or_default();
    let dir = shared.layout.shuffle_dir(id.job);
    std::fs::create_dir_all(&dir).map_err(|e| ClusterError::io("creating", &dir, e))?;
    let out = shared.layout.map_output(id.job, id.index, id.attempt);
    let o = tasks::map_task(spec, cfg, split, &out).map_err(engine_failure);
    Ok(o.and_then(|o| {
        report.partition_bytes = partition_bytes(&out)?;
        Ok(o)
    }))
}

/// Adds to `report` what reading the inputs found: damage met while
/// streaming a local replica (that replica's fault), and what the reads
/// of blocks streamed from other workers found.
fn what_inputs_found(
    shared: &Shared,
    inputs: &[BlockInput],
    res: &Result<TaskOutput>,
    report: &mut TaskReport,
) {
    if let Some((path, d)) = res.as_ref().err().and_then(damage_of) {
        let local = inputs
            .iter()
            .filter(|i| matches!(i.from, MapInput::Local | MapInput::Admitted));
        for i in local.filter(|i| i.split.file.path == path) {
            report.corrupt.push(shared.own_damage(&i.block.id, &d));
        }
        let rows = inputs.iter().filter_map(|i| match &i.from {
            MapInput::Rows(r) => r.blame(&path),
            _ => None,
        });
        let mut blamed: Vec<&str> = rows.collect();
        blamed.dedup();
        for id in blamed {
            report.corrupt.push(shared.own_damage(id, &d));
        }
    }
    for i in inputs {
        let findings = match &i.from {
            MapInput::Streamed(findings) => std::slice::from_ref(findings),
            MapInput::Rows(r) => &r.findings[..],
            _ => &[],
        };
        for f in findings {
            let mut seen = f.collect();
            report.corrupt.append(&mut seen.corrupt);
            report.remote_reads.append(&mut seen.reads);
        }
    }
}

/// A map's split of a file in an external store (HDFS, S3): the file
/// looked up in its store, read in ranges as the engine asks (HDFS
/// packets are checksum-verified by the client as they arrive).
fn external_split(index: usize, e: &proto::ExternalSplit) -> Result<Split> {
    let store = |err: sluice_storage::StorageError| ClusterError::Remote(err.to_string());
    let file = sluice_storage::open_file(&e.url).map_err(store)?;
    if e.start > e.end || e.end > file.len {
        return Err(ClusterError::Remote(format!(
            "{} is not the file the job planned (bytes {}..{} of it; it has {})",
            e.url, e.start, e.end, file.len
        )));
    }
    Ok(Split {
        index,
        file: Arc::new(file),
        start: e.start,
        end: e.end,
    })
}

/// The bytes of each partition of the map output at `path` (its trailer).
fn partition_bytes(path: &Path) -> Result<Vec<u64>> {
    let spill =
        sluice_formats::spill::SpillFile::open(path).map_err(|e| engine_failure(e.into()))?;
    Ok(spill.segments().iter().map(|s| s.len).collect())
}

/// One block a map reads, and from where.
struct BlockInput {
    block: proto::BlockInfo,
    split: Split,
    from: MapInput,
}

/// Where a map's block is read from.
enum MapInput {
    /// This worker's replica of the block.
    Local,
    /// This worker's replica of the block, from its cache.
    Cached,
    /// This worker's replica of the block, read through its checksums by
    /// this map, whose reader fills the cache as it goes (admitted on
    /// first read).
    Admitted,
    /// Another worker's replica, streamed and checked chunk by chunk;
    /// what its reads found goes into the task's report.
    Streamed(stream::Findings),
    /// A block of a file of rows, read within the whole file across its
    /// blocks, here or streamed ([`rowfile`]).
    Rows(rowfile::RowInput),
}

/// The damage a task's error reports about its input, and the file it
/// was met in, if any.
fn damage_of(e: &ClusterError) -> Option<(PathBuf, String)> {
    match e {
        ClusterError::Task {
            damaged_input: Some(d),
            ..
        } => Some((d.path.clone(), d.damage.clone())),
        _ => None,
    }
}

/// The blocks of a map's input (none for a synthetic map), each opened as
/// [`map_input`] does.
fn map_inputs(
    shared: &Shared,
    a: &TaskAssignment,
    report: &mut TaskReport,
) -> Result<Vec<BlockInput>> {
    let mut inputs = Vec::with_capacity(a.inputs.len());
    for source in &a.inputs {
        let block = source.block.clone().unwrap_or_default();
        if let Some(file) = &source.file {
            let index = a.task.unwrap_or_default().index as usize;
            let rows = rowfile::row_input(shared, index, &block, file, report)?;
            let split = rows.split.clone();
            let from = MapInput::Rows(rows);
            inputs.push(BlockInput { block, split, from });
            continue;
        }
        let (split, from) = map_input(shared, a, &block, &source.sources, report)?;
        inputs.push(BlockInput { block, split, from });
    }
    Ok(inputs)
}

/// The split of a map over `block`: this worker's replica, read through
/// its chunk checksums, or, when it has none or it is damaged, another
/// holder's among `sources` streamed with no local copy, each chunk
/// checked before the map reads it ([`stream`]).
fn map_input(
    shared: &Shared,
    a: &TaskAssignment,
    block: &proto::BlockInfo,
    sources: &[String],
    report: &mut TaskReport,
) -> Result<(Split, MapInput)> {
    let id = a.task.unwrap_or_default();
    data::check_id(&block.id)?;
    let split =
        |path: PathBuf, sums| Split::whole_checked(id.index as usize, path, block.len, Some(sums));
    if block.replicas.contains(&shared.uid) {
        if let Some(s) = cached_split(shared, block, id.index as usize, !a.no_admit) {
            return Ok((s, MapInput::Cached));
        }
        let path = shared.layout.block(&block.id);
        let admitted = if a.no_admit {
            None
        } else {
            admitted_split(shared, block, id.index as usize)
        };
        let local = match admitted {
            Some(admitted) => admitted.map(|s| (s, MapInput::Admitted)),
            None => {
                sluice_proto::block::open_checked(&shared.layout, &block.id, block.len, block.crc)
                    .map(|sums| (split(path.clone(), sums), MapInput::Local))
            }
        };
        match local {
            Ok(found) => return Ok(found),
            Err(Unusable::Damaged(d)) => report
                .corrupt
                .push(shared.own_damage(&block.id, &d.to_string())),
            // Not the replica's fault: this attempt fails, nothing blamed.
            Err(Unusable::Io(e)) => return Err(ClusterError::io("reading", &path, e)),
        }
    }
    let (split, seen) =
        stream::Streamed::split(id.index as usize, &shared.cfg.secret, block, sources);
    Ok((split, MapInput::Streamed(seen)))
}

/// The split of a map over this worker's replica of `block` from its
/// cache, on a hit. On a miss the map may admit it ([`admitted_split`]).
fn cached_split(
    shared: &Shared,
    block: &proto::BlockInfo,
    index: usize,
    admitting: bool,
) -> Option<Split> {
    let bytes = shared.cache.lookup(&block.id, admitting)?;
    Some(resident_split(shared, block, index, bytes))
}

fn resident_split(
    shared: &Shared,
    block: &proto::BlockInfo,
    index: usize,
    bytes: Arc<cache::Locked>,
) -> Split {
    let path = shared.layout.block(&block.id);
    Split::resident(index, path, sluice_formats::input::Resident(bytes))
}

/// Admission on first read, by the map that missed: when the policy makes
/// room, the map reads its replica straight into the cache's memory for
/// it ([`cache::Filling`]), a window of chunks at a time, verifying each
/// chunk there and scanning its records in place as they arrive; the
/// block is cached once all of it has arrived. So admission costs
/// locking the memory, and nothing else: no copy, no second read, no
/// second checksum pass, and the map does not wait for the whole block
/// before it starts. A damaged chunk fails the map as it would with no
/// cache, and a block that did not arrive whole is never cached. `None`: not admitted (no
/// room, a concurrent load, memory that cannot be mapped); the map reads
/// the replica from disk as it would with no cache.
fn admitted_split(
    shared: &Shared,
    block: &proto::BlockInfo,
    index: usize,
) -> Option<std::result::Result<Split, Unusable>> {
    let filling = match shared.cache.reserve(&block.id, block.len) {
        Ok(Some(f)) => f,
        Ok(None) => return None,
        Err(m) => {
            tracing::warn!("block {} not cached: {m}", block.id);
            return None;
        }
    };
    let checked =
        sluice_proto::block::open_checked(&shared.layout, &block.id, block.len, block.crc);
    Some(checked.map(|sums| {
        let path = shared.layout.block(&block.id);
        let fill = sluice_formats::input::FillTo(Arc::new(filling));
        Split::whole_filling(index, path, block.len, sums, fill)
    }))
}
