//! What a committed output holds: its manifest, and the names of the
//! markers a commit writes (the same in an object store and in HDFS).

use serde::{Deserialize, Serialize};

/// The prefix of the marker a commit writes before its first part: parts
/// beside a marker and no manifest are an output whose commit died.
pub const PENDING: &str = "_PENDING-";

/// The manifest's name in a committed output (Hadoop's success marker,
/// holding the list of the output's objects).
pub const MANIFEST: &str = "_SUCCESS";

/// What a committed output holds: the manifest's JSON.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    /// `sluice`.
    pub committer: String,
    /// The committing job's unique tag (the suffix of its objects' names).
    pub job: String,
    /// The output's data objects, in order, by name relative to the output.
    pub files: Vec<ManifestFile>,
    /// Other objects of the output (rejected records under `_bad_records/`).
    #[serde(default)]
    pub extra: Vec<ManifestFile>,
}

/// One object of a committed output.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ManifestFile {
    /// Its name relative to the output.
    pub key: String,
    pub len: u64,
}
