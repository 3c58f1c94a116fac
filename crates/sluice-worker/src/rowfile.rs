//! A map over a block of a file of rows (Parquet, Avro, SequenceFile
//! stored by `sluice put`): its split is the block's byte range of the
//! whole file, read through a source that spans the file's blocks
//! ([`Blocks`]), since a row group or sync block that starts in the map's
//! block may end in the next one, and the header or footer is in the
//! first or last. Each block is read from this worker's replica through
//! its chunk checksums, or streamed from another holder with each chunk
//! checked ([`crate::stream`]): no byte reaches the reader unchecked. A
//! damaged local replica fails the map with [`FormatError::Damaged`]
//! naming its block file, which the task's report blames
//! ([`RowInput::blame`]); a damaged remote copy is passed over by the
//! stream and blamed from its findings.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use sluice_formats::chunked::{CheckedReader, ChunkSums};
use sluice_formats::input::{Codec, InputFile, Remote, RemoteSource, Split};
use sluice_formats::FormatError;
use sluice_proto::block::Unusable;
use sluice_proto::data;
use sluice_proto::proto::{self, TaskReport};
use sluice_proto::ClusterError;

use crate::shared::Shared;
use crate::stream::{self, Findings};

type Result<T> = std::result::Result<T, ClusterError>;

/// A map's block of a file of rows: its split, and what its reads of
/// other workers' copies will find.
pub(crate) struct RowInput {
    pub(crate) split: Split,
    pub(crate) findings: Vec<Findings>,
    /// This worker's replicas read, by block file: (path, block id).
    local: Vec<(PathBuf, String)>,
}

impl RowInput {
    /// The block id of this worker's replica at `path`, if one was read.
    pub(crate) fn blame(&self, path: &std::path::Path) -> Option<&str> {
        let found = self.local.iter().find(|(p, _)| p == path);
        found.map(|(_, id)| id.as_str())
    }
}

/// The split of map `index` over `own`, a block of `file`: its bytes
/// within the whole file, which is read across its blocks.
pub(crate) fn row_input(
    shared: &Shared,
    index: usize,
    own: &proto::BlockInfo,
    file: &proto::RowFile,
    report: &mut TaskReport,
) -> Result<RowInput> {
    let mut pieces = Vec::with_capacity(file.blocks.len());
    let mut findings = Vec::new();
    let mut local = Vec::new();
    let (mut at, mut start) = (0u64, None);
    for source in &file.blocks {
        let block = source.block.clone().unwrap_or_default();
        data::check_id(&block.id)?;
        if block.id == own.id {
            start = Some(at);
        }
        let piece = match local_piece(shared, &block, report)? {
            Some(p) => {
                local.push((shared.layout.block(&block.id), block.id.clone()));
                p
            }
            None => {
                let (s, seen) =
                    stream::Streamed::split(index, &shared.cfg.secret, &block, &source.sources);
                findings.push(seen);
                Piece::Remote(s.file.remote.clone().expect("a streamed split is remote"))
            }
        };
        pieces.push((at, block.len, piece));
        at += block.len;
    }
    let start = start.ok_or_else(|| {
        ClusterError::Remote(format!("block {} is not one of {}'s", own.id, file.name))
    })?;
    let blocks = Blocks(pieces.into());
    let path = PathBuf::from(format!("{} (block {})", file.name, own.id));
    let codec = sniff(&blocks, &file.name, &path)?;
    let file = InputFile {
        path,
        len: at,
        codec,
        checks: None,
        resident: None,
        remote: Some(Remote(Arc::new(blocks))),
        fill: None,
    };
    let split = Split {
        index,
        file: Arc::new(file),
        start,
        end: start + own.len,
    };
    Ok(RowInput {
        split,
        findings,
        local,
    })
}

/// This worker's replica of `block` opened through its checksums, or none
/// when it holds none or its replica is damaged (reported, and read from
/// another holder instead).
fn local_piece(
    shared: &Shared,
    block: &proto::BlockInfo,
    report: &mut TaskReport,
) -> Result<Option<Piece>> {
    if !block.replicas.contains(&shared.uid) {
        return Ok(None);
    }
    let path = shared.layout.block(&block.id);
    match sluice_proto::block::open_checked(&shared.layout, &block.id, block.len, block.crc) {
        Ok(sums) => Ok(Some(Piece::Local(path, sums))),
        Err(Unusable::Damaged(d)) => {
            report
                .corrupt
                .push(shared.own_damage(&block.id, &d.to_string()));
            Ok(None)
        }
        Err(Unusable::Io(e)) => Err(ClusterError::io("reading", &path, e)),
    }
}

/// The file's codec by its name and first bytes.
fn sniff(blocks: &Blocks, name: &str, path: &std::path::Path) -> Result<Codec> {
    let mut head = Vec::with_capacity(4);
    let r = blocks
        .open_at(0, 4)
        .and_then(|r| r.take(4).read_to_end(&mut head));
    r.map_err(|e| ClusterError::io("reading", path, e))?;
    Ok(Codec::sniff(name, &head))
}

/// Where one block's bytes are read from.
enum Piece {
    /// This worker's replica, through its chunk checksums.
    Local(PathBuf, Arc<ChunkSums>),
    /// Other workers' copies, streamed and checked.
    Remote(Remote),
}

/// A file's blocks in order, each with its offset in the file and its
/// length.
struct Blocks(Arc<[(u64, u64, Piece)]>);

impl RemoteSource for Blocks {
    fn open_at(&self, offset: u64, hint_end: u64) -> std::io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(Across {
            blocks: self.0.clone(),
            at: offset,
            hint_end,
            current: None,
        }))
    }
}

/// A reader of a file from an offset on, block after block.
struct Across {
    blocks: Arc<[(u64, u64, Piece)]>,
    at: u64,
    hint_end: u64,
    /// The reader of the block holding `at`, and where that block ends.
    current: Option<(Box<dyn Read + Send>, u64)>,
}

impl Across {
    /// Opens the block holding `at`; none past the file's end.
    fn open(&mut self) -> std::io::Result<bool> {
        let Some((start, len, piece)) = self.blocks.iter().find(|(s, l, _)| self.at < s + l) else {
            return Ok(false);
        };
        let within = self.at - start;
        let r: Box<dyn Read + Send> = match piece {
            Piece::Local(path, sums) => {
                let mut r =
                    CheckedReader::open(path, sums.clone()).map_err(std::io::Error::other)?;
                std::io::Seek::seek(&mut r, std::io::SeekFrom::Start(within))?;
                Box::new(r)
            }
            Piece::Remote(remote) => {
                let end = self.hint_end.saturating_sub(*start).clamp(within, *len);
                remote.0.open_at(within, end)?
            }
        };
        self.current = Some((r, start + len));
        Ok(true)
    }
}

impl Read for Across {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if self.current.is_none() && !self.open()? {
                return Ok(0);
            }
            let (r, end) = self.current.as_mut().expect("opened above");
            let n = r.read(buf)?;
            if n > 0 || buf.is_empty() {
                self.at += n as u64;
                return Ok(n);
            }
            if self.at < *end {
                let e = FormatError::Truncated {
                    path: PathBuf::from("a block"),
                    offset: self.at,
                    detail: "the block ends before its catalog length".into(),
                };
                return Err(std::io::Error::other(e));
            }
            self.current = None;
        }
    }
}
