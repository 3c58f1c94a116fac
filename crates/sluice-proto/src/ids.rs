//! Ids and kinds that every part of the cluster speaks of: coordinator,
//! worker and client alike (none of them owns these).

use std::borrow::Borrow;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

use crate::ClusterError;

/// A block's id, safe as a file name: 1-64 of `[A-Za-z0-9_-]`. The
/// coordinator names put blocks `b<epoch>-<n>` and task outputs
/// `j<job>-<m|r><task>-a<attempt>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BlockId(pub(crate) String);

/// A data set's name: 1-128 of `[A-Za-z0-9._-]`, not starting with a dot.
/// Names may become file or directory names on a client, so no name can
/// climb out of a directory or hide in one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DatasetName(String);

impl BlockId {
    /// `id` if it is a valid block id.
    pub fn new(id: impl Into<String>) -> Result<Self, ClusterError> {
        let id = id.into();
        let ok = !id.is_empty()
            && id.len() <= 64
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if ok {
            Ok(BlockId(id))
        } else {
            Err(ClusterError::Config(format!("invalid block id {id:?}")))
        }
    }

    /// The job whose task wrote this block, if it is a task output.
    pub fn job(&self) -> Option<JobId> {
        output_block_job(&self.0)
    }
}

impl DatasetName {
    /// `name` if it is a valid data set name.
    pub fn new(name: impl Into<String>) -> Result<Self, ClusterError> {
        let name = name.into();
        let ok = !name.is_empty()
            && name.len() <= 128
            && !name.starts_with('.')
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if ok {
            Ok(DatasetName(name))
        } else {
            Err(ClusterError::Config(format!(
                "invalid data set name {name:?}: use 1-128 of A-Z a-z 0-9 . _ -, not starting with '.'"
            )))
        }
    }
}

/// String-like behaviour of the string newtypes.
macro_rules! string_id {
    ($t:ident) => {
        impl $t {
            /// The id as a string.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Deref for $t {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $t {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<String> for $t {
            fn borrow(&self) -> &String {
                &self.0
            }
        }

        impl AsRef<str> for $t {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<std::path::Path> for $t {
            fn as_ref(&self) -> &std::path::Path {
                std::path::Path::new(&self.0)
            }
        }

        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }

        impl TryFrom<String> for $t {
            type Error = ClusterError;
            fn try_from(s: String) -> Result<Self, ClusterError> {
                $t::new(s)
            }
        }

        impl TryFrom<&str> for $t {
            type Error = ClusterError;
            fn try_from(s: &str) -> Result<Self, ClusterError> {
                $t::new(s)
            }
        }

        impl From<$t> for String {
            fn from(v: $t) -> String {
                v.0
            }
        }

        impl PartialEq<str> for $t {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $t {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $t {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$t> for String {
            fn eq(&self, other: &$t) -> bool {
                self == &other.0
            }
        }

        impl PartialEq<$t> for str {
            fn eq(&self, other: &$t) -> bool {
                self == other.0
            }
        }
    };
}

string_id!(BlockId);
string_id!(DatasetName);

/// A job: the coordinator's epoch in the high 32 bits, a counter in the
/// low ones, so ids stay unique across restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub u64);

/// A worker's registration (a worker that registers again gets a new one;
/// its uid stays).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WorkerId(pub u64);

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::fmt::Display for WorkerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// What a task does. On the wire (`TaskId.kind`) a map is 0, a reduce 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskKind {
    Map,
    Reduce,
}

impl TaskKind {
    /// The kind a wire value names, if any.
    pub fn from_wire(v: u32) -> Option<TaskKind> {
        match v {
            0 => Some(TaskKind::Map),
            1 => Some(TaskKind::Reduce),
            _ => None,
        }
    }

    /// Its wire value.
    pub fn wire(self) -> u32 {
        match self {
            TaskKind::Map => 0,
            TaskKind::Reduce => 1,
        }
    }

    /// `m` or `r`, as task and output block names spell it.
    pub fn letter(self) -> char {
        match self {
            TaskKind::Map => 'm',
            TaskKind::Reduce => 'r',
        }
    }
}

/// The job whose task wrote output block `id` (the coordinator names
/// them `j<job>-<m|r><task>-a<attempt>`), if it is one.
pub fn output_block_job(id: &str) -> Option<JobId> {
    id.strip_prefix('j')?
        .split('-')
        .next()?
        .parse()
        .ok()
        .map(JobId)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_block_ids_are_checked_when_read() {
        assert!(serde_json::from_str::<DatasetName>("\"../etc\"").is_err());
        assert!(serde_json::from_str::<BlockId>("\"b1/../../x\"").is_err());
        let id: BlockId = serde_json::from_str("\"j4294967297-r0-a1\"").unwrap();
        assert_eq!(id.job(), Some(JobId(4294967297)));
        let name: DatasetName = serde_json::from_str("\"words\"").unwrap();
        assert_eq!(serde_json::to_string(&name).unwrap(), "\"words\"");
    }

    #[test]
    fn output_blocks_name_their_job() {
        assert_eq!(
            output_block_job("j4294967297-r0-a1"),
            Some(JobId(4294967297))
        );
        assert_eq!(output_block_job("j12-m3-a0"), Some(JobId(12)));
        for not_output in ["b1-7", "j-r0-a0", "jx-r0", "", "j"] {
            assert_eq!(output_block_job(not_output), None, "{not_output}");
        }
    }
}
