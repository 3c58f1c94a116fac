//! What a map task reads: blocks of data sets, nothing (a synthetic
//! map), or a split of a file in an external store.

use sluice_proto::catalog::BlockMeta;

/// What a map task reads.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MapInput {
    /// Blocks of data sets, with where their replicas are: one, or several
    /// small ones packed into one task ([`crate::combine`]). Never empty.
    Blocks(Vec<BlockMeta>),
    /// Nothing: the mapper makes its records (`synthetic:N` input); it
    /// runs on any worker.
    Synthetic,
    /// A byte range of a file in an external store (HDFS, S3), read by
    /// the worker from the store.
    External(External),
}

/// A map's split of a file in an external store.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct External {
    /// `hdfs://...` or `s3://...`.
    pub url: String,
    pub start: u64,
    pub end: u64,
    /// Workers on the hosts the store says hold the range (HDFS block
    /// locations): the map is NODE-local there.
    pub holders: Vec<String>,
}

impl MapInput {
    /// The blocks read (none for a synthetic map).
    pub fn blocks(&self) -> &[BlockMeta] {
        match self {
            MapInput::Blocks(b) => b,
            MapInput::Synthetic | MapInput::External(_) => &[],
        }
    }

    /// The blocks read, to update their replicas.
    pub fn blocks_mut(&mut self) -> &mut [BlockMeta] {
        match self {
            MapInput::Blocks(b) => b,
            MapInput::Synthetic | MapInput::External(_) => &mut [],
        }
    }

    /// Bytes read.
    pub fn len(&self) -> u64 {
        match self {
            MapInput::External(e) => e.end - e.start,
            _ => self.blocks().iter().map(|b| b.len).sum(),
        }
    }

    /// Whether it reads no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A split of a file in an external store, and the hosts holding it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalInput {
    pub url: String,
    pub start: u64,
    pub end: u64,
    pub hosts: Vec<String>,
}
