//! The job log: what a restarted coordinator needs to take its running
//! jobs back, as MapReduce's ApplicationMaster recovers from its job
//! history.
//!
//! The state asks for a record ([`JobEntry`]) when a job is accepted,
//! when a task's attempt wins (with where its output lives), when the
//! job's commit starts and when the job ends; the service appends them in
//! the order asked, before the answer leaves. A job's acceptance and its
//! commit start are synced before they are acknowledged: a client told
//! its job was accepted finds it after a restart, and a commit is never
//! started without the record that makes a restart finish it. A task's
//! end is written but not synced: the process dying loses nothing the
//! kernel has, and a record a power cut loses only means that task runs
//! again. The job's end is not synced either (`jobs.json` records it,
//! synced; a lost end record means a job that ended is taken back and
//! found ended there).
//!
//! Opening replays the log and keeps the jobs with no end record; the log
//! is then written again holding only theirs (a fresh file, synced and
//! renamed over the old one), so it never holds more than the jobs
//! running across restarts. While the coordinator runs, it starts again
//! empty whenever no job runs and it has grown past [`RESTART_LOG`].
//!
//! `STATE_DIR/jobs.log`, all integers little-endian:
//!
//! ```text
//! log    := magic:"SLJL" version:u8=1 record*
//! record := len:u32 crc:u32 payload[len]
//!           crc = CRC32C(payload); payload = JSON of a JobEntry
//! ```
//!
//! A `JobEntry` is an object with one key naming its kind:
//! `{"accepted": {"id", "request", "reducers", "replication", "inputs",
//! "side"}}`, `{"task_done": {"job", "kind" (1 map, 2 reduce as on the
//! wire), "index", "attempt", "uid", "addr", "datacenter", "report" (the
//! attempt's `TaskReport`, protobuf bytes as standard base64; an array of
//! numbers in logs written before, still read)}}`,
//! `{"commit_started": {"job"}}`, `{"ended": {"job"}}`.
//!
//! As the catalog's log ([`crate::editlog`]): a last record cut short or
//! failing its CRC was a write a crash interrupted and is cut off; a bad
//! record with whole records after it is damage, and the coordinator
//! refuses to start, naming the byte.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sluice_proto::catalog::BlockMeta;
use sluice_proto::ids::JobId;
use sluice_proto::ClusterError;
use sluice_request::JobRequest;

use crate::editlog::{frame, open_for_writing, record, records_follow, start_log_as};
use crate::input::MapInput;
use crate::store::StateDir;

type Result<T> = std::result::Result<T, ClusterError>;

const MAGIC: &[u8; 4] = b"SLJL";
const VERSION: u8 = 1;
const HEADER: u64 = 5;

/// While no job runs, a log past this size starts again empty.
pub const RESTART_LOG: u64 = 1 << 20;

/// One record of the job log.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobEntry {
    Accepted(Box<Accepted>),
    TaskDone(TaskDone),
    CommitStarted { job: JobId },
    Ended { job: JobId },
}

impl JobEntry {
    /// The job it is about.
    pub fn job(&self) -> JobId {
        match self {
            JobEntry::Accepted(a) => a.id,
            JobEntry::TaskDone(t) => t.job,
            JobEntry::CommitStarted { job } | JobEntry::Ended { job } => *job,
        }
    }

    /// Whether it is synced before its event is acknowledged.
    pub fn synced(&self) -> bool {
        matches!(self, JobEntry::Accepted(_) | JobEntry::CommitStarted { .. })
    }
}

/// A job as accepted: all it takes to build it again.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Accepted {
    pub id: JobId,
    pub request: JobRequest,
    pub reducers: u32,
    pub replication: u32,
    /// Each map task's input, as planned at submission (task indices
    /// depend on it).
    pub inputs: Vec<MapInput>,
    pub side: Vec<(String, Vec<BlockMeta>)>,
    /// The client's id for the submission (empty: none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub submission: String,
    /// The user it runs as (empty: an admin).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
}

/// A task's winning attempt and where its output lives.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskDone {
    pub job: JobId,
    /// The task kind as on the wire.
    pub kind: u32,
    pub index: u32,
    pub attempt: u32,
    /// The worker that ran it (its output is there).
    pub uid: String,
    /// That worker's data-plane address.
    pub addr: String,
    pub datacenter: String,
    /// The attempt's report, protobuf-encoded.
    #[serde(with = "report_bytes")]
    pub report: Vec<u8>,
}

/// A task's report in a record: the protobuf bytes as standard base64
/// text. A record written before took them as a JSON array of numbers,
/// four times the text and a number each to write; it is still read.
mod report_bytes {
    use base64::Engine as _;
    use serde::de::{Error, SeqAccess, Visitor};
    use serde::{Deserializer, Serializer};

    const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&B64.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_any(Bytes)
    }

    struct Bytes;

    impl<'de> Visitor<'de> for Bytes {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("base64 text or an array of bytes")
        }

        fn visit_str<E: Error>(self, v: &str) -> Result<Vec<u8>, E> {
            B64.decode(v).map_err(E::custom)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
            while let Some(b) = seq.next_element::<u8>()? {
                out.push(b);
            }
            Ok(out)
        }
    }
}

/// A job the log says was running.
#[derive(Debug, Clone)]
pub struct Recovered {
    pub accepted: Accepted,
    /// The winners, the last one logged for each task.
    pub done: Vec<TaskDone>,
    /// Its commit had started.
    pub committing: bool,
}

impl Recovered {
    /// Its records, in an order that replays to it.
    fn entries(&self) -> Vec<JobEntry> {
        let mut out = vec![JobEntry::Accepted(Box::new(self.accepted.clone()))];
        out.extend(self.done.iter().cloned().map(JobEntry::TaskDone));
        if self.committing {
            out.push(JobEntry::CommitStarted {
                job: self.accepted.id,
            });
        }
        out
    }
}

/// The job log, open for appending.
#[derive(Debug)]
pub struct JobLog {
    path: PathBuf,
    file: File,
    /// Bytes of whole records.
    len: u64,
}

impl JobLog {
    /// Opens the log in `store`: the jobs it says were running, and the
    /// log written again with only theirs.
    pub fn open(store: &StateDir) -> Result<(Self, Vec<Recovered>)> {
        let path = store.path("jobs.log");
        let jobs = match std::fs::read(&path) {
            Ok(bytes) => replay(&path, &bytes)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(ClusterError::io("reading", &path, e)),
        };
        let mut log = JobLog::fresh(&path)?;
        let entries: Vec<JobEntry> = jobs.iter().flat_map(Recovered::entries).collect();
        log.append(&entries)?;
        log.file
            .sync_data()
            .map_err(|e| ClusterError::io("writing", &path, e))?;
        Ok((log, jobs))
    }

    /// A new, empty log at `path`.
    fn fresh(path: &Path) -> Result<Self> {
        start_log_as(path, MAGIC)?;
        Ok(JobLog {
            path: path.to_owned(),
            file: open_for_writing(path)?,
            len: HEADER,
        })
    }

    /// Appends `entries`, syncing once at the end if any of them asks to
    /// be. A failed append leaves the log as it was.
    pub fn append(&mut self, entries: &[JobEntry]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::new();
        for e in entries {
            bytes.extend(frame(e, "a job log record")?);
        }
        let sync = entries.iter().any(JobEntry::synced);
        // One positioned write, not a seek and a write: a task's end is
        // logged thousands of times a second on a large cluster.
        let written = self.file.write_all_at(&bytes, self.len).and_then(|()| {
            if sync {
                self.file.sync_data()
            } else {
                Ok(())
            }
        });
        if let Err(e) = written {
            let _ = self.file.set_len(self.len);
            return Err(ClusterError::io("writing", &self.path, e));
        }
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Starts the log again empty if it has grown past [`RESTART_LOG`]
    /// (call only while no job runs).
    pub fn restart_if_large(&mut self) -> Result<()> {
        if self.len > RESTART_LOG {
            *self = JobLog::fresh(&self.path)?;
        }
        Ok(())
    }

    /// Bytes of the log.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.len == HEADER
    }
}

/// The jobs of the log `bytes` with no end record, in id order.
fn replay(path: &Path, bytes: &[u8]) -> Result<Vec<Recovered>> {
    if bytes.len() < HEADER as usize || &bytes[..4] != MAGIC || bytes[4] != VERSION {
        return Err(ClusterError::Config(format!(
            "{} is not a job log of version {VERSION}",
            path.display()
        )));
    }
    let mut jobs: BTreeMap<JobId, Recovered> = BTreeMap::new();
    let mut at = HEADER as usize;
    while at < bytes.len() {
        let Some((entry, next)) = record::<JobEntry>(bytes, at) else {
            if records_follow::<JobEntry>(bytes, at) {
                return Err(ClusterError::Config(format!(
                    "{} is damaged at byte {at} (its checksum does not match) and whole \
                     records follow: not a torn write",
                    path.display()
                )));
            }
            tracing::warn!(
                "{}: the last record was cut short by a crash; dropped",
                path.display()
            );
            break;
        };
        apply(&mut jobs, entry);
        at = next;
    }
    Ok(jobs.into_values().collect())
}

/// The jobs `entries` (in the order they were logged) say were running,
/// in id order: what a log kept elsewhere than in a file (etcd) replays
/// to.
pub fn recovered_from(entries: impl IntoIterator<Item = JobEntry>) -> Vec<Recovered> {
    let mut jobs = BTreeMap::new();
    for e in entries {
        apply(&mut jobs, e);
    }
    jobs.into_values().collect()
}

/// One record replayed onto the jobs it has seen.
fn apply(jobs: &mut BTreeMap<JobId, Recovered>, e: JobEntry) {
    match e {
        JobEntry::Accepted(a) => {
            let r = Recovered {
                accepted: *a,
                done: Vec::new(),
                committing: false,
            };
            jobs.insert(r.accepted.id, r);
        }
        JobEntry::TaskDone(t) => {
            if let Some(j) = jobs.get_mut(&t.job) {
                j.done.retain(|d| (d.kind, d.index) != (t.kind, t.index));
                j.done.push(t);
            }
        }
        JobEntry::CommitStarted { job } => {
            if let Some(j) = jobs.get_mut(&job) {
                j.committing = true;
            }
        }
        JobEntry::Ended { job } => {
            jobs.remove(&job);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepted(id: u64) -> JobEntry {
        JobEntry::Accepted(Box::new(Accepted {
            id: JobId(id),
            request: JobRequest::new("wordcount", &serde_json::json!({}), "in", "out"),
            reducers: 2,
            replication: 1,
            inputs: vec![MapInput::Synthetic; 3],
            side: Vec::new(),
            submission: String::new(),
            user: Default::default(),
        }))
    }

    fn done(job: u64, index: u32, attempt: u32) -> JobEntry {
        JobEntry::TaskDone(TaskDone {
            job: JobId(job),
            kind: 1,
            index,
            attempt,
            uid: "w1".into(),
            addr: "127.0.0.1:1".into(),
            datacenter: String::new(),
            report: vec![1, 2, 3],
        })
    }

    fn open(d: &Path) -> (JobLog, Vec<Recovered>) {
        JobLog::open(&StateDir::open(d).unwrap()).unwrap()
    }

    #[test]
    fn a_reports_bytes_are_base64_and_an_older_array_still_reads() {
        let e = done(7, 0, 0);
        let json = serde_json::to_string(&e).unwrap();
        assert!(json.contains(r#""report":"AQID""#), "{json}");
        let back: JobEntry = serde_json::from_str(&json).unwrap();
        assert!(matches!(&back, JobEntry::TaskDone(t) if t.report == [1, 2, 3]));
        let older = json.replace(r#""AQID""#, "[1,2,3]");
        let back: JobEntry = serde_json::from_str(&older).unwrap();
        assert!(matches!(&back, JobEntry::TaskDone(t) if t.report == [1, 2, 3]));
        let bad = json.replace(r#""AQID""#, r#""not base64!""#);
        assert!(serde_json::from_str::<JobEntry>(&bad).is_err());
    }

    #[test]
    fn running_jobs_come_back_with_their_winners_and_ended_ones_do_not() {
        let d = tempfile::tempdir().unwrap();
        let (mut log, none) = open(d.path());
        assert!(none.is_empty() && log.is_empty());
        log.append(&[accepted(7), accepted(8), done(7, 0, 0), done(7, 1, 0)])
            .unwrap();
        log.append(&[done(7, 1, 3), JobEntry::Ended { job: JobId(8) }])
            .unwrap();
        log.append(&[JobEntry::CommitStarted { job: JobId(7) }])
            .unwrap();
        drop(log);
        let (log, jobs) = open(d.path());
        assert_eq!(jobs.len(), 1);
        let j = &jobs[0];
        assert_eq!(j.accepted.id, JobId(7));
        assert_eq!(j.accepted.inputs.len(), 3);
        assert!(j.committing);
        let winners: Vec<(u32, u32)> = j.done.iter().map(|t| (t.index, t.attempt)).collect();
        assert_eq!(winners, vec![(0, 0), (1, 3)]);
        // Written again with only the running job's records, which
        // replay to the same.
        drop(log);
        let (_, again) = open(d.path());
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].done, j.done);
        assert!(again[0].committing);
    }

    #[test]
    fn a_record_cut_at_any_byte_is_dropped_and_damage_before_records_refused() {
        let d = tempfile::tempdir().unwrap();
        let (mut log, _) = open(d.path());
        log.append(&[accepted(1)]).unwrap();
        let whole = log.len() as usize;
        log.append(&[done(1, 0, 0)]).unwrap();
        drop(log);
        let path = d.path().join("jobs.log");
        let full = std::fs::read(&path).unwrap();
        for cut in whole..full.len() {
            std::fs::write(&path, &full[..cut]).unwrap();
            let (_, jobs) = open(d.path());
            assert!(jobs[0].done.is_empty(), "cut at {cut}");
        }
        std::fs::write(&path, &full).unwrap();
        let (mut log, _) = open(d.path());
        log.append(&[done(1, 1, 0)]).unwrap();
        drop(log);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER as usize + 12] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let e = JobLog::open(&StateDir::open(d.path()).unwrap()).unwrap_err();
        assert!(e.to_string().contains("is damaged at byte 5"), "{e}");
    }
}
