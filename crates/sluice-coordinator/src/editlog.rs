//! The catalog on disk: a checkpoint and a log of edits since it, as
//! HDFS's NameNode keeps an fsimage and an edit log.
//!
//! A change to the catalog appends one record, the change itself (the
//! data sets it touched, whole, or their absence; the directive list when
//! it changed; the id counters), and syncs it: its cost is the size of the
//! change, not of the catalog. When the log has grown past the checkpoint
//! (and past [`MIN_CHECKPOINT_LOG`]), the catalog is written whole as the
//! new checkpoint (`catalog.json`, atomically, the one before kept as
//! `catalog.json.prev`) and the log starts again; the rewrite is paid
//! once per catalog's worth of edits.
//!
//! Every record sets values (a data set to what it is now, a counter to
//! its value), so replaying a record twice changes nothing: a crash after
//! a checkpoint and before the log restarts replays old records onto a
//! checkpoint that has them already, and ends where it was.
//!
//! `STATE_DIR/catalog.log`, all integers little-endian:
//!
//! ```text
//! log    := magic:"SLCL" version:u8=1 record*
//! record := len:u32 crc:u32 payload[len]
//!           crc = CRC32C(payload); payload = JSON of a CatalogEdit
//! ```
//!
//! Opening replays every whole record onto the checkpoint. A last record
//! cut short or failing its CRC is a write a crash interrupted: it was
//! never acknowledged, so it is cut off (the catalog is as it was before
//! that change). A record that fails its CRC with whole records after it
//! is damage, not a crash: the coordinator refuses to start, naming the
//! byte.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sluice_proto::catalog::{CacheDirective, Catalog, DatasetMeta, UserMeta};
use sluice_proto::ids::DatasetName;
use sluice_proto::ClusterError;
use std::collections::BTreeMap;

use crate::store::StateDir;

type Result<T> = std::result::Result<T, ClusterError>;

const MAGIC: &[u8; 4] = b"SLCL";
const VERSION: u8 = 1;
const HEADER: u64 = 5;

/// The log is not folded into a checkpoint before it reaches this size.
pub const MIN_CHECKPOINT_LOG: u64 = 4 << 20;

/// One change of the catalog, as logged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CatalogEdit {
    /// Data sets touched: their value now, or `None` when removed.
    pub datasets: Vec<(DatasetName, Option<DatasetMeta>)>,
    /// The cache directives, when they changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directives: Option<Vec<CacheDirective>>,
    /// The users, when they changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<BTreeMap<String, UserMeta>>,
    pub next_block: u64,
    pub next_directive: u64,
}

impl CatalogEdit {
    /// The edit that sets `names` (and the directives when `directives`)
    /// to what `c` holds now, with its counters.
    pub fn of(c: &Catalog, names: impl IntoIterator<Item = DatasetName>, directives: bool) -> Self {
        let mut datasets: Vec<(DatasetName, Option<DatasetMeta>)> = Vec::new();
        for n in names {
            if !datasets.iter().any(|(d, _)| *d == n) {
                let now = c.datasets.get(&n).cloned();
                datasets.push((n, now));
            }
        }
        CatalogEdit {
            datasets,
            directives: directives.then(|| c.cache_directives.clone()),
            users: None,
            next_block: c.next_block,
            next_directive: c.next_directive,
        }
    }

    /// Applies it to `c`.
    pub fn apply(self, c: &mut Catalog) {
        for (name, d) in self.datasets {
            match d {
                Some(d) => c.datasets.insert(name, d),
                None => c.datasets.remove(&name),
            };
        }
        if let Some(d) = self.directives {
            c.cache_directives = d;
        }
        if let Some(u) = self.users {
            c.users = u;
        }
        c.next_block = self.next_block;
        c.next_directive = self.next_directive;
    }
}

/// The catalog's log, open for appending.
#[derive(Debug)]
pub struct CatalogLog {
    store: StateDir,
    path: PathBuf,
    file: File,
    /// Bytes of the log that hold whole records.
    len: u64,
    /// Bytes of the last checkpoint.
    checkpoint: u64,
}

impl CatalogLog {
    /// Opens the catalog in `store`: the checkpoint with every whole record
    /// of the log replayed (a torn last record cut off).
    pub fn open(store: StateDir) -> Result<(Self, Catalog)> {
        let mut catalog = store.load_catalog()?;
        let checkpoint = std::fs::metadata(store.path("catalog.json")).map_or(0, |m| m.len());
        let path = store.path("catalog.log");
        let len = match std::fs::read(&path) {
            Ok(bytes) => replay(&path, &bytes, &mut catalog)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                start_log(&path)?;
                HEADER
            }
            Err(e) => return Err(ClusterError::io("reading", &path, e)),
        };
        let file = open_for_writing(&path)?;
        // Whatever follows the whole records (a torn write) goes.
        file.set_len(len)
            .and_then(|()| file.sync_all())
            .map_err(|e| ClusterError::io("truncating", &path, e))?;
        let log = CatalogLog {
            store,
            path,
            file,
            len,
            checkpoint,
        };
        Ok((log, catalog))
    }

    /// Appends `edit` and syncs it; folds the log into a checkpoint of
    /// `catalog` (which holds the edit) once the log outgrew the last one.
    /// A failed append leaves the log as it was.
    pub fn append(&mut self, edit: &CatalogEdit, catalog: &Catalog) -> Result<()> {
        let record = frame(edit, "a catalog change")?;
        let written = self
            .file
            .seek(SeekFrom::Start(self.len))
            .and_then(|_| self.file.write_all(&record))
            .and_then(|()| self.file.sync_data());
        if let Err(e) = written {
            let _ = self.file.set_len(self.len);
            return Err(ClusterError::io("writing", &self.path, e));
        }
        self.len += record.len() as u64;
        if self.len > MIN_CHECKPOINT_LOG.max(self.checkpoint) {
            self.checkpoint(catalog)?;
        }
        Ok(())
    }

    /// Writes `catalog` whole as the checkpoint and starts the log again.
    pub fn checkpoint(&mut self, catalog: &Catalog) -> Result<()> {
        self.store.save_catalog(catalog)?;
        self.checkpoint = std::fs::metadata(self.store.path("catalog.json")).map_or(0, |m| m.len());
        start_log(&self.path)?;
        self.file = open_for_writing(&self.path)?;
        self.len = HEADER;
        Ok(())
    }

    /// Bytes of the log.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the log holds no record.
    pub fn is_empty(&self) -> bool {
        self.len == HEADER
    }
}

pub(crate) fn open_for_writing(path: &Path) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| ClusterError::io("opening", path, e))
}

/// A new, empty log at `path`, in place atomically.
fn start_log(path: &Path) -> Result<()> {
    start_log_as(path, MAGIC)
}

/// A new, empty log at `path` headed by `magic` and version 1, in place
/// atomically.
pub(crate) fn start_log_as(path: &Path, magic: &[u8; 4]) -> Result<()> {
    let tmp = path.with_extension("log-tmp");
    let mut f = File::create(&tmp).map_err(|e| ClusterError::io("creating", &tmp, e))?;
    f.write_all(magic)
        .and_then(|()| f.write_all(&[VERSION]))
        .and_then(|()| f.sync_all())
        .map_err(|e| ClusterError::io("writing", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| ClusterError::io("renaming", path, e))?;
    if let Some(dir) = path.parent() {
        let _ = File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

/// `value` as a record: `len:u32 crc:u32` and its JSON (`what` names it
/// in the error for one over 4 GiB).
pub(crate) fn frame<T: Serialize>(value: &T, what: &str) -> Result<Vec<u8>> {
    let payload = serde_json::to_vec(value).expect("serializable");
    let n = u32::try_from(payload.len())
        .map_err(|_| ClusterError::Config(format!("{what} over 4 GiB")))?;
    let mut record = Vec::with_capacity(payload.len() + 8);
    record.extend_from_slice(&n.to_le_bytes());
    record.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    record.extend_from_slice(&payload);
    Ok(record)
}

/// Applies every whole record of the log `bytes` to `c`; returns the
/// length of the log's whole records.
fn replay(path: &Path, bytes: &[u8], c: &mut Catalog) -> Result<u64> {
    let damaged = |at: usize, why: &str| {
        ClusterError::Config(format!(
            "{} is damaged at byte {at} ({why}) and whole records follow: not a \
             torn write; the checkpoint beside it is catalog.json",
            path.display()
        ))
    };
    if bytes.len() < HEADER as usize || &bytes[..4] != MAGIC || bytes[4] != VERSION {
        return Err(ClusterError::Config(format!(
            "{} is not a catalog log of version {VERSION}",
            path.display()
        )));
    }
    let mut at = HEADER as usize;
    while at < bytes.len() {
        let Some((edit, next)) = record::<CatalogEdit>(bytes, at) else {
            // A torn tail: cut off, unless whole records follow it.
            if records_follow::<CatalogEdit>(bytes, at) {
                return Err(damaged(at, "its checksum does not match"));
            }
            tracing::warn!(
                "{}: the last change was cut short by a crash; dropped",
                path.display()
            );
            break;
        };
        edit.apply(c);
        at = next;
    }
    Ok(at as u64)
}

/// The record at `at` and where the next starts, if it is whole and
/// intact.
pub(crate) fn record<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    at: usize,
) -> Option<(T, usize)> {
    let head = bytes.get(at..at + 8)?;
    let len = u32::from_le_bytes(head[..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(head[4..].try_into().ok()?);
    let payload = bytes.get(at + 8..at + 8 + len)?;
    if crc32c::crc32c(payload) != crc {
        return None;
    }
    let edit = serde_json::from_slice(payload).ok()?;
    Some((edit, at + 8 + len))
}

/// Whether a whole, intact record starts somewhere after a bad one at
/// `at` (its length field read as given).
pub(crate) fn records_follow<T: serde::de::DeserializeOwned>(bytes: &[u8], at: usize) -> bool {
    let Some(head) = bytes.get(at..at + 4) else {
        return false;
    };
    let len = u32::from_le_bytes(head.try_into().expect("four bytes")) as usize;
    let next = at + 8 + len;
    next < bytes.len() && record::<T>(bytes, next).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_proto::catalog::{BlockMeta, FileMeta};
    use sluice_proto::ids::BlockId;

    fn dataset(name: &str, blocks: usize) -> DatasetMeta {
        DatasetMeta {
            name: DatasetName::new(name).unwrap(),
            files: vec![FileMeta {
                name: "f".into(),
                blocks: (0..blocks)
                    .map(|i| BlockMeta {
                        id: BlockId::new(format!("b{name}{i}")).unwrap(),
                        len: 10,
                        crc: 1,
                        replicas: vec!["a".into()],
                        corrupt: Vec::new(),
                    })
                    .collect(),
            }],
            created_ms: 0,
            origin: "test".into(),
            replication: 1,
            block_size: 10,
            access: Default::default(),
        }
    }

    /// Puts data set `name` in `c` and logs the change.
    fn put(log: &mut CatalogLog, c: &mut Catalog, name: &str) {
        let d = dataset(name, 3);
        c.datasets.insert(d.name.clone(), d.clone());
        c.next_block += 3;
        log.append(&CatalogEdit::of(c, [d.name], false), c).unwrap();
    }

    #[test]
    fn edits_replay_onto_the_checkpoint_after_a_restart() {
        let d = tempfile::tempdir().unwrap();
        let (mut log, mut c) = CatalogLog::open(StateDir::open(d.path()).unwrap()).unwrap();
        put(&mut log, &mut c, "a");
        put(&mut log, &mut c, "b");
        let a = DatasetName::new("a").unwrap();
        c.datasets.remove(&a);
        log.append(&CatalogEdit::of(&c, [a], false), &c).unwrap();
        drop(log);
        let (log, again) = CatalogLog::open(StateDir::open(d.path()).unwrap()).unwrap();
        assert_eq!(again, c);
        assert!(!log.is_empty());
        assert!(!d.path().join("catalog.json").exists(), "no checkpoint yet");
    }

    #[test]
    fn a_write_cut_at_any_byte_leaves_the_catalog_before_or_after_it() {
        let d = tempfile::tempdir().unwrap();
        let (mut log, mut c) = CatalogLog::open(StateDir::open(d.path()).unwrap()).unwrap();
        put(&mut log, &mut c, "a");
        let before = c.clone();
        let whole_before = log.len();
        put(&mut log, &mut c, "b");
        let after = c.clone();
        drop(log);
        let path = d.path().join("catalog.log");
        let full = std::fs::read(&path).unwrap();
        for cut in whole_before as usize..=full.len() {
            std::fs::write(&path, &full[..cut]).unwrap();
            let (log, got) = CatalogLog::open(StateDir::open(d.path()).unwrap()).unwrap();
            let want = if cut == full.len() { &after } else { &before };
            assert_eq!(&got, want, "cut at {cut}");
            // The torn tail is gone: the next change appends cleanly.
            assert_eq!(std::fs::metadata(&path).unwrap().len(), log.len());
        }
    }

    #[test]
    fn damage_before_whole_records_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let (mut log, mut c) = CatalogLog::open(StateDir::open(d.path()).unwrap()).unwrap();
        put(&mut log, &mut c, "a");
        put(&mut log, &mut c, "b");
        drop(log);
        let path = d.path().join("catalog.log");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER as usize + 12] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let e = CatalogLog::open(StateDir::open(d.path()).unwrap()).unwrap_err();
        assert!(e.to_string().contains("is damaged at byte 5"), "{e}");
    }

    #[test]
    fn the_log_folds_into_a_checkpoint_once_it_outgrows_it() {
        let d = tempfile::tempdir().unwrap();
        let (mut log, mut c) = CatalogLog::open(StateDir::open(d.path()).unwrap()).unwrap();
        // Each edit carries one data set of 20,000 blocks (about 1.6 MB):
        // a few of them pass the minimum log size.
        let mut checkpoints = 0;
        for i in 0..8 {
            let ds = dataset(&format!("d{i}"), 20_000);
            c.datasets.insert(ds.name.clone(), ds.clone());
            let was = log.len();
            log.append(&CatalogEdit::of(&c, [ds.name], false), &c)
                .unwrap();
            checkpoints += usize::from(log.len() < was);
        }
        assert!(checkpoints >= 1, "the log was folded");
        assert!(d.path().join("catalog.json").exists());
        drop(log);
        let (_, again) = CatalogLog::open(StateDir::open(d.path()).unwrap()).unwrap();
        assert_eq!(again, c);
    }
}
