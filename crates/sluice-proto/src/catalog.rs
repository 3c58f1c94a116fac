//! The data set catalog: data sets, their files and blocks, and where the
//! replicas are.
//!
//! A data set is a list of files, each a list of blocks; a block is a whole
//! file on each worker holding a replica (`DATA_DIR/blocks/ID`). Blocks of
//! text end at record (line) boundaries, so a map reads exactly one block
//! and never a neighbour's tail. The coordinator keeps the catalog on disk
//! (`sluice_coordinator::store`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ids::{BlockId, DatasetName};
use crate::proto;
use crate::ClusterError;

type Result<T> = std::result::Result<T, ClusterError>;

/// One block and where its replicas are.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct BlockMeta {
    pub id: BlockId,
    pub len: u64,
    pub crc: u32,
    /// Uids of workers holding an intact replica.
    pub replicas: Vec<String>,
    /// Replicas found damaged, taken out of `replicas`: never read again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub corrupt: Vec<CorruptMark>,
}

/// A replica found damaged, and the evidence.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CorruptMark {
    /// The worker that held it.
    pub uid: String,
    /// What was wrong (`10 bytes of 3999955`, `checksum mismatch at chunk 7 ...`).
    pub detail: String,
    /// When it was reported (Unix ms).
    pub at_ms: u64,
}

impl BlockMeta {
    /// Moves worker `uid`'s replica from `replicas` to `corrupt`; returns
    /// whether it held one.
    pub fn mark_corrupt(&mut self, uid: &str, detail: &str) -> bool {
        let Some(i) = self.replicas.iter().position(|u| u == uid) else {
            return false;
        };
        self.replicas.remove(i);
        self.corrupt.push(CorruptMark {
            uid: uid.to_owned(),
            detail: detail.to_owned(),
            at_ms: crate::now_ms(),
        });
        true
    }
}

/// One file of a data set.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileMeta {
    pub name: String,
    pub blocks: Vec<BlockMeta>,
}

/// A data set.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DatasetMeta {
    pub name: DatasetName,
    pub files: Vec<FileMeta>,
    pub created_ms: u64,
    /// How it was made: `put PATH`, `job N (wordcount)`, ...
    pub origin: String,
    /// Replicas asked for each block.
    #[serde(default = "one")]
    pub replication: u32,
    /// The block size files were cut with (`sluice put --block-size`); 0
    /// when blocks are not cut by size (a job's output, a block a task).
    #[serde(default)]
    pub block_size: u64,
    /// Who owns it and who may read it.
    #[serde(default, skip_serializing_if = "Access::is_admins")]
    pub access: Access,
}

fn one() -> u32 {
    1
}

/// Who owns a data set and who else may read it. A data set is private
/// to its owner (and the admins) until it is shared.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Access {
    /// The user who made it (empty: an admin; only admins may read it
    /// unless it is shared).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub owner: String,
    /// Users it is shared with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readers: Vec<String>,
    /// Shared with every user.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub public: bool,
}

impl Access {
    /// An admin's, shared with nobody.
    pub fn is_admins(&self) -> bool {
        *self == Access::default()
    }

    /// Owned by `user` (empty: an admin).
    pub fn owned_by(user: &str) -> Access {
        Access {
            owner: user.to_owned(),
            ..Access::default()
        }
    }

    /// Whether `user` (`None`: an admin) may read it.
    pub fn may_read(&self, user: Option<&str>) -> bool {
        match user {
            None => true,
            Some(u) => self.owner == u || self.public || self.readers.iter().any(|r| r == u),
        }
    }

    /// Whether `user` (`None`: an admin) may write, remove, cache or
    /// share it.
    pub fn may_write(&self, user: Option<&str>) -> bool {
        user.is_none_or(|u| self.owner == u)
    }

    /// Who owns it, as a refusal names them.
    pub fn owner_name(&self) -> &str {
        if self.owner.is_empty() {
            "an admin"
        } else {
            &self.owner
        }
    }
}

/// A user the coordinator knows (`sluice user add`): the salt their key
/// is derived from ([`crate::users`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct UserMeta {
    pub salt: String,
    pub created_ms: u64,
}

impl DatasetMeta {
    /// Every block, in file order.
    pub fn blocks(&self) -> impl Iterator<Item = &BlockMeta> {
        self.files.iter().flat_map(|f| f.blocks.iter())
    }

    /// Total bytes.
    pub fn len(&self) -> u64 {
        self.blocks().map(|b| b.len).sum()
    }

    /// Whether it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Every data set, and the cache directives.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Catalog {
    pub datasets: BTreeMap<DatasetName, DatasetMeta>,
    /// Next block number handed out by [`Catalog::new_block_id`].
    pub next_block: u64,
    /// Blocks to keep in workers' caches (`sluice cache add`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cache_directives: Vec<CacheDirective>,
    /// The last directive id handed out.
    #[serde(default)]
    pub next_directive: u64,
    /// The users, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub users: BTreeMap<String, UserMeta>,
}

/// A cache directive, as HDFS's centralized cache management has them:
/// keep a data set's blocks (or one of them) in memory on a worker
/// holding a replica (a given one, or one chosen per block), pinned
/// whatever the cache's admission policy, until it is removed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CacheDirective {
    pub id: u64,
    pub dataset: DatasetName,
    /// One block, by its index in the data set; `None`: every block.
    pub block: Option<u32>,
    /// The worker (uid) to cache on; `None`: one live holder per block.
    pub worker: Option<String>,
    /// A label grouping directives (HDFS's cache pools), for listing.
    pub pool: String,
    pub created_ms: u64,
}

impl From<&CacheDirective> for proto::CacheDirective {
    fn from(d: &CacheDirective) -> Self {
        proto::CacheDirective {
            id: d.id,
            dataset: d.dataset.to_string(),
            has_block: d.block.is_some(),
            block: d.block.unwrap_or(0),
            worker: d.worker.clone().unwrap_or_default(),
            pool: d.pool.clone(),
            created_ms: d.created_ms,
        }
    }
}

impl Catalog {
    /// A fresh block id, unique across restarts (the counter is saved).
    pub fn new_block_id(&mut self, epoch: u64) -> BlockId {
        self.next_block += 1;
        BlockId(format!("b{epoch}-{}", self.next_block))
    }
}

/// Checks a data set name (see [`DatasetName`]).
pub fn check_name(name: &str) -> Result<()> {
    DatasetName::new(name).map(|_| ())
}

impl From<&BlockMeta> for proto::BlockInfo {
    fn from(b: &BlockMeta) -> Self {
        proto::BlockInfo {
            id: b.id.to_string(),
            len: b.len,
            crc: b.crc,
            replicas: b.replicas.clone(),
            corrupt: b
                .corrupt
                .iter()
                .map(|c| proto::CorruptReplica {
                    block: b.id.to_string(),
                    worker: c.uid.clone(),
                    addr: String::new(),
                    detail: c.detail.clone(),
                    at_ms: c.at_ms,
                })
                .collect(),
            capability: String::new(),
        }
    }
}

/// A block from the wire: its id is checked.
impl TryFrom<proto::BlockInfo> for BlockMeta {
    type Error = ClusterError;

    fn try_from(b: proto::BlockInfo) -> Result<Self> {
        Ok(BlockMeta {
            id: BlockId::new(b.id)?,
            len: b.len,
            crc: b.crc,
            replicas: b.replicas,
            corrupt: b
                .corrupt
                .into_iter()
                .map(|c| CorruptMark {
                    uid: c.worker,
                    detail: c.detail,
                    at_ms: c.at_ms,
                })
                .collect(),
        })
    }
}

impl From<&DatasetMeta> for proto::Dataset {
    fn from(d: &DatasetMeta) -> Self {
        proto::Dataset {
            name: d.name.to_string(),
            files: d
                .files
                .iter()
                .map(|f| proto::FileInfo {
                    name: f.name.clone(),
                    blocks: f.blocks.iter().map(Into::into).collect(),
                })
                .collect(),
            created_ms: d.created_ms,
            origin: d.origin.clone(),
            replication: d.replication,
            block_size: d.block_size,
            owner: d.access.owner.clone(),
            readers: d.access.readers.clone(),
            public: d.access.public,
        }
    }
}

/// A data set from the wire: its name and block ids are checked.
impl TryFrom<proto::Dataset> for DatasetMeta {
    type Error = ClusterError;

    fn try_from(d: proto::Dataset) -> Result<Self> {
        let files = d
            .files
            .into_iter()
            .map(|f| {
                let blocks = f.blocks.into_iter().map(BlockMeta::try_from);
                Ok(FileMeta {
                    name: f.name,
                    blocks: blocks.collect::<Result<_>>()?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(DatasetMeta {
            name: DatasetName::new(d.name)?,
            files,
            created_ms: d.created_ms,
            origin: d.origin,
            replication: d.replication.max(1),
            block_size: d.block_size,
            access: Access {
                owner: d.owner,
                readers: d.readers,
                public: d.public,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_escape() {
        for bad in ["", "..", "../x", "a/b", ".hidden", "a\0b", &"x".repeat(129)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        for good in ["words", "uservisits-2GB", "a.b_c"] {
            check_name(good).unwrap();
        }
    }
}
