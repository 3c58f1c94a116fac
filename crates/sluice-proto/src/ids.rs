//! Ids and kinds that every part of the cluster speaks of: coordinator,
//! worker and client alike (none of them owns these).

use std::borrow::Borrow;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

use crate::ClusterError;

/// A block's id, safe as a file name: 1-64 of `[A-Za-z0-9_-]`. The
/// coordinator names put blocks `b<epoch>-<n>` and task outputs
/// `j<job>-<m|r><task>-a<attempt>`, `<job>` the job id's number (the
/// `u64`, not its `job-E-N` text).
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
/// low ones, so ids stay unique across restarts. The wire and the state
/// directory carry the `u64`; people see and type `job-E-N` (E the epoch
/// the job was created in, N the counter: `job-1-17`), the form of
/// `Display` and of [`JobId::from_str`](std::str::FromStr).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct JobId(pub u64);

/// A worker's registration (a worker that registers again gets a new one;
/// its uid stays).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WorkerId(pub u64);

impl JobId {
    /// The `n`th job of coordinator epoch `epoch`.
    pub fn new(epoch: u32, n: u32) -> JobId {
        JobId(u64::from(epoch) << 32 | u64::from(n))
    }

    /// The epoch of the coordinator that created the job.
    pub fn epoch(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The job's number within its epoch.
    pub fn counter(self) -> u32 {
        self.0 as u32
    }
}

/// `job-E-N`, E the epoch and N the counter in decimal.
impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, so that widths (`{:<12}`) apply.
        f.pad(&format!("job-{}-{}", self.epoch(), self.counter()))
    }
}

/// Reads a job id a person typed. The grammar:
///
/// ```text
/// job-id  = "job-" number "-" number   ; epoch, then counter
///         | digits                     ; the whole u64, as ids printed before
/// number  = 1 to 10 ASCII digits whose value fits 32 bits
/// digits  = 1 to 20 ASCII digits whose value fits 64 bits
/// ```
///
/// No sign, space or other case is accepted: `job-1-17` and `4294967313`
/// name the same job; `Job-1-17`, `job-1`, `job--1-2`, `job-1-4294967296`
/// and `+7` name none.
impl std::str::FromStr for JobId {
    type Err = ClusterError;

    fn from_str(s: &str) -> Result<JobId, ClusterError> {
        let parsed = match s.strip_prefix("job-") {
            Some(rest) => rest
                .split_once('-')
                .and_then(|(e, n)| Some(JobId::new(decimal(e)?, decimal(n)?))),
            None => decimal(s).map(JobId),
        };
        parsed.ok_or_else(|| {
            ClusterError::Config(format!(
                "invalid job id {s:?}: expected job-EPOCH-N (as `sluice jobs` prints, e.g. job-1-17)"
            ))
        })
    }
}

/// `s` as an unsigned decimal of type `T`: ASCII digits only.
fn decimal<T: std::str::FromStr>(s: &str) -> Option<T> {
    let digits = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits.then(|| s.parse().ok()).flatten()
}

/// Serde for a job id held as its text (`"job-1-17"`), as the job
/// report carries it: written as text, read as text or as the plain
/// number older reports hold.
pub mod job_text {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::JobId;

    /// Writes `id` as `job-E-N`.
    pub fn serialize<S: Serializer>(id: &JobId, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(id)
    }

    /// Reads `job-E-N`, or the number an older report holds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<JobId, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Text {
            Number(u64),
            Text(String),
        }
        match Text::deserialize(d)? {
            Text::Number(n) => Ok(JobId(n)),
            Text::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
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
    fn job_ids_read_back_as_printed() {
        for id in [
            JobId::new(1, 17),
            JobId::new(0, 0),
            JobId(u64::MAX),
            JobId(4294967297),
        ] {
            assert_eq!(id.to_string().parse::<JobId>().unwrap(), id, "{id}");
        }
        assert_eq!(JobId::new(1, 17).to_string(), "job-1-17");
        assert_eq!(JobId(4294967297).to_string(), "job-1-1");
        assert_eq!(JobId(u64::MAX).to_string(), "job-4294967295-4294967295");
        assert_eq!(format!("{:<10}|", JobId::new(1, 2)), "job-1-2   |");
    }

    #[test]
    fn job_ids_are_read_in_the_old_form_too() {
        assert_eq!("4294967313".parse::<JobId>().unwrap(), JobId::new(1, 17));
        assert_eq!("0".parse::<JobId>().unwrap(), JobId(0));
        assert_eq!("job-007-01".parse::<JobId>().unwrap(), JobId::new(7, 1));
    }

    #[test]
    fn job_ids_not_in_the_grammar_are_refused() {
        for bad in [
            "",
            "job-",
            "job-1",
            "job-1-",
            "job--1-2",
            "job-1--2",
            "job-1-2-3",
            "Job-1-17",
            "JOB-1-17",
            "job-1-17 ",
            " 17",
            "+17",
            "-17",
            "job-+1-2",
            "job-1-+2",
            "job-4294967296-1",
            "job-1-4294967296",
            "18446744073709551616",
            "1e3",
            "0x11",
            "j1-17",
            "job_1_17",
            "job-١-٢",
        ] {
            let err = bad.parse::<JobId>().unwrap_err().to_string();
            assert!(err.contains("invalid job id"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn job_text_writes_text_and_reads_either_form() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct R {
            #[serde(with = "job_text")]
            id: JobId,
        }
        let r = R {
            id: JobId::new(2, 5),
        };
        assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"id":"job-2-5"}"#);
        assert_eq!(serde_json::from_str::<R>(r#"{"id":"job-2-5"}"#).unwrap(), r);
        assert_eq!(
            serde_json::from_str::<R>(r#"{"id":8589934597}"#).unwrap(),
            r
        );
        assert!(serde_json::from_str::<R>(r#"{"id":"job-2"}"#).is_err());
        // The wire and the state directory keep the number.
        assert_eq!(
            serde_json::to_string(&JobId::new(2, 5)).unwrap(),
            "8589934597"
        );
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
