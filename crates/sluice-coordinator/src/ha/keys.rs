//! Where each piece of a coordinator's state lives in etcd, and how a
//! value is framed.
//!
//! Every key starts with the cluster's prefix `P` (`--etcd-prefix`,
//! `/sluice/default/` by default; it always ends in `/`):
//!
//! ```text
//! P leader                   the active coordinator (a Leader as JSON), on its lease
//! P epoch                    the last epoch (a number)
//! P catalog/meta             the cache directives and the id counters (CatalogMeta)
//! P catalog/ds/NAME          one data set (DatasetMeta)
//! P joblog/JOB/SEQ           one job log record (JobEntry) of a running job
//! P records/JOB              one job's record (JobRecord)
//! P history/JOB              one finished job's report
//! ```
//!
//! JOB is the job's id and SEQ a counter, each as 16 lower-case hex
//! digits, so keys sort as ids and records do. A job's log records go
//! when it ends: the log only ever holds running jobs, and etcd's own
//! compaction is its checkpoint.
//!
//! Every value is framed, and checked when read:
//!
//! ```text
//! value := crc:u32 (little-endian) payload
//!          crc = CRC32C(payload); payload = JSON
//! ```

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use sluice_proto::catalog::CacheDirective;
use sluice_proto::ids::JobId;
use sluice_proto::ClusterError;

type Result<T> = std::result::Result<T, ClusterError>;

/// The prefix used when none is given.
pub const DEFAULT_PREFIX: &str = "/sluice/default/";

/// The keys of one cluster.
#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
}

/// What the catalog holds beside its data sets.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CatalogMeta {
    pub directives: Vec<CacheDirective>,
    pub next_block: u64,
    pub next_directive: u64,
    /// The users (`sluice user add`), by name.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub users: std::collections::BTreeMap<String, sluice_proto::catalog::UserMeta>,
}

/// The active coordinator, as `P leader` says.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Leader {
    /// Its control-plane address.
    pub addr: String,
    /// Its web pages' address, if it serves them.
    pub http: Option<String>,
    pub pid: u32,
    pub epoch: u64,
    /// Its lease.
    pub lease: i64,
}

impl Keys {
    /// The keys under `prefix` (a `/` is added when it lacks one).
    pub fn new(prefix: &str) -> Keys {
        let mut prefix = prefix.to_owned();
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        Keys { prefix }
    }

    /// The prefix every key starts with.
    pub fn prefix(&self) -> &[u8] {
        self.prefix.as_bytes()
    }

    fn key(&self, rest: &str) -> Vec<u8> {
        format!("{}{rest}", self.prefix).into_bytes()
    }

    pub fn leader(&self) -> Vec<u8> {
        self.key("leader")
    }

    pub fn epoch(&self) -> Vec<u8> {
        self.key("epoch")
    }

    pub fn catalog_meta(&self) -> Vec<u8> {
        self.key("catalog/meta")
    }

    pub fn datasets(&self) -> Vec<u8> {
        self.key("catalog/ds/")
    }

    pub fn dataset(&self, name: &str) -> Vec<u8> {
        self.key(&format!("catalog/ds/{name}"))
    }

    pub fn job_logs(&self) -> Vec<u8> {
        self.key("joblog/")
    }

    /// The prefix of one job's log records.
    pub fn job_log(&self, job: JobId) -> Vec<u8> {
        self.key(&format!("joblog/{:016x}/", job.0))
    }

    pub fn job_log_record(&self, job: JobId, seq: u64) -> Vec<u8> {
        self.key(&format!("joblog/{:016x}/{seq:016x}", job.0))
    }

    pub fn records(&self) -> Vec<u8> {
        self.key("records/")
    }

    pub fn record(&self, job: JobId) -> Vec<u8> {
        self.key(&format!("records/{:016x}", job.0))
    }

    pub fn histories(&self) -> Vec<u8> {
        self.key("history/")
    }

    pub fn history(&self, job: JobId) -> Vec<u8> {
        self.key(&format!("history/{:016x}", job.0))
    }
}

/// The hex number a key ends with after `under` (`None`: not one of
/// those keys).
pub fn hex_after(key: &[u8], under: &[u8]) -> Option<u64> {
    let rest = std::str::from_utf8(key.strip_prefix(under)?).ok()?;
    let last = rest.rsplit('/').next()?;
    u64::from_str_radix(last, 16).ok()
}

/// `payload` as JSON, framed with its checksum.
pub fn seal<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    let payload = serde_json::to_vec(value)
        .map_err(|e| ClusterError::Config(format!("encoding state for etcd: {e}")))?;
    let mut out = crc32c::crc32c(&payload).to_le_bytes().to_vec();
    out.extend_from_slice(&payload);
    Ok(out)
}

/// The value stored at `key`, its checksum checked.
pub fn unseal<T: DeserializeOwned>(key: &[u8], value: &[u8]) -> Result<T> {
    let damaged = |why: String| {
        ClusterError::Config(format!(
            "etcd key {} is damaged ({why}); the coordinator will not use it",
            String::from_utf8_lossy(key)
        ))
    };
    if value.len() < 4 {
        return Err(damaged(format!(
            "{} bytes, shorter than its checksum",
            value.len()
        )));
    }
    let (crc, payload) = value.split_at(4);
    let want = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
    if crc32c::crc32c(payload) != want {
        return Err(damaged("its checksum does not match".into()));
    }
    serde_json::from_slice(payload).map_err(|e| damaged(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_come_back_and_damage_is_named() {
        let k = Keys::new("/sluice/t");
        assert_eq!(k.leader(), b"/sluice/t/leader");
        let key = k.record(JobId(0x1_0000_0007));
        assert_eq!(key, b"/sluice/t/records/0000000100000007");
        assert_eq!(hex_after(&key, &k.records()), Some(0x1_0000_0007));
        let v = seal(&vec![1u32, 2, 3]).unwrap();
        assert_eq!(unseal::<Vec<u32>>(&key, &v).unwrap(), vec![1, 2, 3]);
        for at in 0..v.len() {
            let mut bad = v.clone();
            bad[at] ^= 0x10;
            let e = unseal::<Vec<u32>>(&key, &bad).unwrap_err().to_string();
            assert!(e.contains("records/0000000100000007 is damaged"), "{e}");
        }
        let e = unseal::<Vec<u32>>(&key, &v[..3]).unwrap_err().to_string();
        assert!(e.contains("shorter than its checksum"), "{e}");
    }

    #[test]
    fn a_job_log_key_names_its_job_and_sequence() {
        let k = Keys::new("/p/");
        let key = k.job_log_record(JobId(5), 0x2a);
        assert!(key.starts_with(&k.job_log(JobId(5))));
        assert_eq!(hex_after(&key, &k.job_logs()), Some(0x2a));
    }
}
