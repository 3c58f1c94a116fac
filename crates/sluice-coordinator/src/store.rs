//! Block placement and the coordinator's state directory.
//!
//! The catalog is kept in `STATE_DIR/catalog.json`, a checkpoint written
//! atomically (write, fsync, rename), and `STATE_DIR/catalog.log`, the
//! changes since ([`crate::editlog`]), so it survives a coordinator
//! restart; `STATE_DIR/epoch` counts coordinator starts and
//! `STATE_DIR/jobs.json` records every job's final state.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use sluice_proto::catalog::Catalog;
use sluice_proto::ClusterError;

type Result<T> = std::result::Result<T, ClusterError>;

// ------------------------------------------------------------ placement

/// A worker as placement sees it.
#[derive(Debug, Clone)]
pub struct Node {
    pub uid: String,
    pub host: String,
    pub datacenter: String,
    pub rack: String,
    /// Bytes its data directory could still take (0: unknown, taken as
    /// room).
    pub free_bytes: u64,
}

impl Node {
    /// Whether it has room for one more block of `block_size` bytes after
    /// the `placed` blocks of this request.
    fn has_room(&self, block_size: u64, placed: &HashMap<String, usize>) -> bool {
        let n = *placed.get(&self.uid).unwrap_or(&0) as u64 + 1;
        self.free_bytes == 0 || self.free_bytes >= n.saturating_mul(block_size)
    }
}

/// Who writes a block.
#[derive(Debug, Clone, Copy, Default)]
pub struct Writer<'a> {
    /// The writer's host (first replicas go to a worker there).
    pub host: &'a str,
    /// The writer's data center (empty: that of the worker on its host,
    /// if there is exactly one).
    pub datacenter: &'a str,
    /// The block's size at most (0: unknown).
    pub block_size: u64,
}

impl Writer<'_> {
    /// Its data center: the stated one, else that of the one worker of
    /// `live` on its host.
    fn datacenter<'n>(&'n self, live: &'n [Node]) -> Option<&'n str> {
        if !self.datacenter.is_empty() {
            return Some(self.datacenter);
        }
        let mut on_host = live.iter().filter(|n| n.host == self.host);
        match (on_host.next(), on_host.next()) {
            (Some(n), None) => Some(n.datacenter.as_str()),
            _ => None,
        }
    }
}

/// Chooses the workers that hold a new block's replicas.
pub trait PlacementPolicy: Send + Sync {
    /// Up to `replication` distinct workers of `live` for one block.
    /// `placed` counts blocks already placed per uid in this request.
    fn place(
        &self,
        live: &[Node],
        writer: &Writer,
        replication: usize,
        placed: &mut HashMap<String, usize>,
    ) -> Vec<String>;

    /// Whether copies of a block a worker already holds stay in its data
    /// center while it has room: re-replication then picks targets there
    /// first. The default: no, any data center.
    fn keeps_copies_in_datacenter(&self) -> bool {
        false
    }

    /// Up to `copies` workers of `live`, other than `holder`, for further
    /// replicas of a block `holder` already has (a task's output). The
    /// default: other racks first, then the least loaded.
    fn place_copies(
        &self,
        live: &[Node],
        holder: &str,
        copies: usize,
        placed: &mut HashMap<String, usize>,
    ) -> Vec<String> {
        let Some(first) = live.iter().find(|n| n.uid == holder) else {
            return Vec::new();
        };
        let mut order: Vec<&Node> = live.iter().collect();
        order.shuffle(&mut rand::thread_rng());
        let mut chosen = vec![first];
        more_replicas(&order, &mut chosen, copies + 1, placed);
        chosen[1..].iter().map(|n| n.uid.clone()).collect()
    }
}

/// Adds workers of `order` to `chosen` until it holds `replication` (or
/// every worker): off the first one's rack first, then the least loaded.
/// Counts every chosen worker in `placed`, the first too.
fn more_replicas<'a>(
    order: &[&'a Node],
    chosen: &mut Vec<&'a Node>,
    replication: usize,
    placed: &mut HashMap<String, usize>,
) {
    let load = |n: &Node, placed: &HashMap<String, usize>| *placed.get(&n.uid).unwrap_or(&0);
    while chosen.len() < replication.min(order.len()) {
        let rack0 = (&chosen[0].datacenter, &chosen[0].rack);
        let next = order
            .iter()
            .copied()
            .filter(|n| !chosen.iter().any(|c| c.uid == n.uid))
            .min_by_key(|n| ((&n.datacenter, &n.rack) == rack0, load(n, placed)))
            .expect("fewer chosen than live workers");
        chosen.push(next);
    }
    for n in chosen.iter() {
        *placed.entry(n.uid.clone()).or_default() += 1;
    }
}

/// The default policy: the first replica on a worker on the writer's host
/// when there is one, else on a random worker among those holding the
/// fewest blocks of this request (so a data set spreads evenly); further
/// replicas on other racks first, then on other workers of the same rack,
/// again the least loaded first.
#[derive(Debug, Default)]
pub struct RackAware;

impl PlacementPolicy for RackAware {
    fn place(
        &self,
        live: &[Node],
        writer: &Writer,
        replication: usize,
        placed: &mut HashMap<String, usize>,
    ) -> Vec<String> {
        let writer_host = writer.host;
        let mut rng = rand::thread_rng();
        let mut order: Vec<&Node> = live.iter().collect();
        order.shuffle(&mut rng);
        let load = |n: &Node, placed: &HashMap<String, usize>| *placed.get(&n.uid).unwrap_or(&0);
        let mut chosen: Vec<&Node> = Vec::new();
        let writer_local: Vec<&Node> = order
            .iter()
            .copied()
            .filter(|n| n.host == writer_host)
            .collect();
        // On loopback every worker shares the writer's host: balance instead.
        let first_pool = if writer_local.len() == 1 {
            writer_local
        } else {
            order.clone()
        };
        if let Some(first) = first_pool.iter().copied().min_by_key(|n| load(n, placed)) {
            chosen.push(first);
        }
        more_replicas(&order, &mut chosen, replication, placed);
        chosen.into_iter().map(|n| n.uid.clone()).collect()
    }
}

/// WAN-aware placement (seed 003): every replica in the writer's data
/// center while it has workers with room for the block, so a write never
/// crosses the WAN. Within it, as [`RackAware`]: the first replica on the
/// writer's host when a worker is there, further ones off its rack first,
/// the least loaded first. The fallback, when the writer's data center
/// has fewer workers with room than replicas asked: the remaining
/// replicas go to the other data centers' workers with room, the least
/// loaded first, so the block still gets its replication (a write that
/// must cross the WAN beats a block with fewer copies); with no room
/// anywhere, workers of unknown or too little room are taken as last
/// resort, as the default policy would. A writer whose data center is
/// unknown is placed by the default policy.
#[derive(Debug, Default)]
pub struct WanAware;

impl PlacementPolicy for WanAware {
    fn place(
        &self,
        live: &[Node],
        writer: &Writer,
        replication: usize,
        placed: &mut HashMap<String, usize>,
    ) -> Vec<String> {
        let Some(dc) = writer.datacenter(live) else {
            return RackAware.place(live, writer, replication, placed);
        };
        let room = |n: &&Node| n.has_room(writer.block_size, placed);
        let home: Vec<Node> = live
            .iter()
            .filter(|n| n.datacenter == dc)
            .filter(room)
            .cloned()
            .collect();
        let away: Vec<Node> = live
            .iter()
            .filter(|n| n.datacenter != dc)
            .filter(room)
            .cloned()
            .collect();
        let mut chosen = RackAware.place(&home, writer, replication, placed);
        if chosen.len() < replication {
            let more = RackAware.place(&away, writer, replication - chosen.len(), placed);
            chosen.extend(more);
        }
        if chosen.len() < replication.min(live.len()) {
            let rest: Vec<Node> = live
                .iter()
                .filter(|n| !chosen.contains(&n.uid))
                .cloned()
                .collect();
            let more = RackAware.place(&rest, writer, replication - chosen.len(), placed);
            chosen.extend(more);
        }
        chosen
    }

    fn keeps_copies_in_datacenter(&self) -> bool {
        true
    }

    /// Copies of a task's output: in the holder's data center while it
    /// has workers, then elsewhere.
    fn place_copies(
        &self,
        live: &[Node],
        holder: &str,
        copies: usize,
        placed: &mut HashMap<String, usize>,
    ) -> Vec<String> {
        let Some(first) = live.iter().find(|n| n.uid == holder) else {
            return Vec::new();
        };
        let home: Vec<Node> = live
            .iter()
            .filter(|n| n.datacenter == first.datacenter)
            .cloned()
            .collect();
        let mut chosen = RackAware.place_copies(&home, holder, copies, placed);
        if chosen.len() < copies {
            let mut rest: Vec<Node> = live
                .iter()
                .filter(|n| n.datacenter != first.datacenter)
                .cloned()
                .collect();
            rest.push(first.clone());
            chosen.extend(RackAware.place_copies(&rest, holder, copies - chosen.len(), placed));
        }
        chosen
    }
}

/// The placement policy `--placement` names.
pub fn placement(name: &str) -> Option<std::sync::Arc<dyn PlacementPolicy>> {
    match name {
        "rack-aware" | "default" => Some(std::sync::Arc::new(RackAware)),
        "wan-aware" => Some(std::sync::Arc::new(WanAware)),
        _ => None,
    }
}

// ------------------------------------------------------------ state dir

/// What the coordinator keeps on disk.
#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
}

/// A job's final state, kept across restarts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: sluice_proto::ids::JobId,
    /// The job as submitted (absent in records of older versions).
    #[serde(default)]
    pub request: Option<sluice_request::JobRequest>,
    pub state: RecordState,
    /// Why it failed or was killed; empty otherwise.
    pub error: String,
    /// The client's id for the submission that made it (empty: none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub submission: String,
    /// The user it runs as (empty: an admin).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
}

/// Where a recorded job stands (`running` while its coordinator lives).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordState {
    Running,
    Succeeded,
    Failed,
    Killed,
}

impl RecordState {
    /// Its name, as `sluice jobs` and the protocol spell it.
    pub fn name(self) -> &'static str {
        match self {
            RecordState::Running => "running",
            RecordState::Succeeded => "succeeded",
            RecordState::Failed => "failed",
            RecordState::Killed => "killed",
        }
    }
}

impl StateDir {
    /// Opens (creating) `dir`.
    pub fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| ClusterError::io("creating", dir, e))?;
        Ok(StateDir {
            dir: dir.to_owned(),
        })
    }

    /// The path of file `name` in it.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Increments and returns the epoch.
    pub fn next_epoch(&self) -> Result<u64> {
        let path = self.dir.join("epoch");
        let old = std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0);
        write_atomic(&path, format!("{}\n", old + 1).as_bytes())?;
        Ok(old + 1)
    }

    /// The catalog's last checkpoint, or an empty one (the catalog is
    /// that with the edits of [`crate::editlog`] replayed).
    pub fn load_catalog(&self) -> Result<Catalog> {
        load_json(&self.dir.join("catalog.json"))
    }

    /// Saves the catalog atomically as the checkpoint.
    pub fn save_catalog(&self, c: &Catalog) -> Result<()> {
        save_json(&self.dir.join("catalog.json"), c)
    }

    /// The saved job records.
    pub fn load_jobs(&self) -> Result<BTreeMap<sluice_proto::ids::JobId, JobRecord>> {
        load_json(&self.dir.join("jobs.json"))
    }

    /// Saves the job records atomically.
    pub fn save_jobs(&self, jobs: &BTreeMap<sluice_proto::ids::JobId, JobRecord>) -> Result<()> {
        save_json(&self.dir.join("jobs.json"), jobs)
    }
}

/// Finished jobs' reports: `STATE_DIR/history/JOB.json`, one file each,
/// written once when the job ends; the newest `keep` are kept.
impl StateDir {
    fn history_dir(&self) -> PathBuf {
        self.dir.join("history")
    }

    /// Writes a finished job's report and removes the oldest reports past
    /// `keep`.
    pub fn save_history(
        &self,
        id: sluice_proto::ids::JobId,
        json: &str,
        keep: usize,
    ) -> Result<()> {
        let dir = self.history_dir();
        std::fs::create_dir_all(&dir).map_err(|e| ClusterError::io("creating", &dir, e))?;
        write_atomic(&dir.join(format!("{}.json", id.0)), json.as_bytes())?;
        let ids = self.history_ids()?;
        for old in ids.iter().take(ids.len().saturating_sub(keep)) {
            let path = dir.join(format!("{old}.json"));
            std::fs::remove_file(&path).map_err(|e| ClusterError::io("removing", &path, e))?;
        }
        Ok(())
    }

    /// The ids of the kept reports, oldest first (ids grow with time).
    fn history_ids(&self) -> Result<Vec<u64>> {
        let dir = self.history_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(ClusterError::io("listing", &dir, e)),
        };
        let mut ids: Vec<u64> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".json")?.parse().ok())
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    /// The newest `keep` finished jobs' reports, by job id. A report that
    /// does not parse as JSON (a damaged file) is left out with a warning:
    /// history is a record, not state the coordinator needs.
    pub fn load_history(&self, keep: usize) -> Result<BTreeMap<sluice_proto::ids::JobId, String>> {
        let ids = self.history_ids()?;
        let mut out = BTreeMap::new();
        for id in ids.iter().skip(ids.len().saturating_sub(keep)) {
            let path = self.history_dir().join(format!("{id}.json"));
            let text = std::fs::read_to_string(&path)
                .map_err(|e| ClusterError::io("reading", &path, e))?;
            if serde_json::from_str::<serde_json::Value>(&text).is_err() {
                tracing::warn!("{} is damaged; left out of the job history", path.display());
                continue;
            }
            out.insert(sluice_proto::ids::JobId(*id), text);
        }
        Ok(out)
    }
}

fn load_json<T: Default + for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| damaged_state(path, &e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(ClusterError::io("reading", path, e)),
    }
}

/// The error for a state file that does not parse, saying how to recover.
fn damaged_state(path: &Path, why: &str) -> ClusterError {
    let prev = previous(path);
    let how = if prev.exists() {
        format!(
            "the version before the last change is {0}: check it, then move it into place              (mv {0} {1}) and start again",
            prev.display(),
            path.display()
        )
    } else {
        "no previous version is kept beside it".into()
    };
    ClusterError::Config(format!("{} is damaged ({why}); {how}", path.display()))
}

/// Where the version before the last write of `path` is kept.
pub fn previous(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(".prev");
    path.with_file_name(name)
}

/// Saves `v` as JSON atomically, keeping the version it replaces in
/// [`previous`]`(path)`.
fn save_json<T: Serialize>(path: &Path, v: &T) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(v).expect("serializable");
    if path.exists() {
        // A hard link keeps the old version at no cost; renamed into place
        // so `.prev` is always a whole file.
        let prev = previous(path);
        let link = prev.with_extension("prev-tmp");
        let _ = std::fs::remove_file(&link);
        std::fs::hard_link(path, &link)
            .and_then(|()| std::fs::rename(&link, &prev))
            .map_err(|e| ClusterError::io("keeping the previous version of", path, e))?;
    }
    write_atomic(path, &bytes)
}

/// Writes, syncs and renames into place, then syncs the directory so the
/// rename itself survives a crash.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(|e| ClusterError::io("creating", &tmp, e))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| ClusterError::io("writing", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| ClusterError::io("renaming", path, e))?;
    if let Some(dir) = path.parent() {
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

// ------------------------------------------------------------ proto

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_proto::catalog::{BlockMeta, DatasetMeta, FileMeta};

    #[test]
    fn history_keeps_the_newest_reports_and_skips_damaged_ones() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        for id in 1..=5u64 {
            s.save_history(
                sluice_proto::ids::JobId(id),
                &format!("{{\"job_id\":{id}}}"),
                3,
            )
            .unwrap();
        }
        let h = s.load_history(10).unwrap();
        let ids: Vec<u64> = h.keys().map(|k| k.0).collect();
        assert_eq!(ids, [3, 4, 5]);
        std::fs::write(d.path().join("history/4.json"), "{ torn").unwrap();
        let h = s.load_history(2).unwrap();
        let ids: Vec<u64> = h.keys().map(|k| k.0).collect();
        assert_eq!(
            ids,
            [5],
            "the damaged report is left out, the newest two asked"
        );
    }

    fn node(uid: &str, rack: &str) -> Node {
        Node {
            uid: uid.into(),
            host: "127.0.0.1".into(),
            datacenter: "dc1".into(),
            rack: rack.into(),
            free_bytes: 0,
        }
    }

    fn writer(host: &str) -> Writer<'_> {
        Writer {
            host,
            ..Writer::default()
        }
    }

    /// Workers `(uid, datacenter, rack, free bytes)`, each on its own host.
    fn nodes(spec: &[(&str, &str, &str, u64)]) -> Vec<Node> {
        spec.iter()
            .map(|&(uid, dc, rack, free)| Node {
                uid: uid.into(),
                host: format!("h-{uid}"),
                datacenter: dc.into(),
                rack: rack.into(),
                free_bytes: free,
            })
            .collect()
    }

    fn dc_of<'a>(live: &'a [Node], uid: &str) -> &'a str {
        &live.iter().find(|n| n.uid == uid).unwrap().datacenter
    }

    #[test]
    fn wan_aware_keeps_every_replica_in_the_writers_data_center() {
        let live = nodes(&[
            ("a", "dc1", "r1", 0),
            ("b", "dc1", "r2", 0),
            ("c", "dc1", "r2", 0),
            ("x", "dc2", "r3", 0),
            ("y", "dc2", "r4", 0),
        ]);
        let mut placed = HashMap::new();
        let w = Writer {
            host: "h-a",
            datacenter: "",
            block_size: 1 << 20,
        };
        for _ in 0..20 {
            let r = WanAware.place(&live, &w, 3, &mut placed);
            assert_eq!(r.len(), 3);
            assert!(r.iter().all(|u| dc_of(&live, u) == "dc1"), "{r:?}");
            assert_eq!(r[0], "a", "the first on the writer's host");
        }
        // The default policy crosses data centers for the third replica
        // as soon as another rack is in the other one.
        let mut crossed = 0;
        for _ in 0..20 {
            let r = RackAware.place(&live, &w, 3, &mut HashMap::new());
            crossed += usize::from(r.iter().any(|u| dc_of(&live, u) == "dc2"));
        }
        assert!(crossed > 0);
    }

    #[test]
    fn wan_aware_falls_back_to_other_data_centers_when_its_own_is_full() {
        let mb = 1 << 20;
        // dc1's b has no room for a block; a has room for two.
        let live = nodes(&[
            ("a", "dc1", "r1", 2 * mb),
            ("b", "dc1", "r2", mb / 2),
            ("x", "dc2", "r3", 0),
            ("y", "dc2", "r4", 100 * mb),
        ]);
        let w = Writer {
            host: "elsewhere",
            datacenter: "dc1",
            block_size: mb,
        };
        let mut placed = HashMap::new();
        let first = WanAware.place(&live, &w, 2, &mut placed);
        assert_eq!(first[0], "a", "the only dc1 worker with room");
        assert_eq!(dc_of(&live, &first[1]), "dc2", "the fallback: {first:?}");
        let second = WanAware.place(&live, &w, 1, &mut placed);
        assert_eq!(second, ["a"], "a still has room for one more");
        let third = WanAware.place(&live, &w, 1, &mut placed);
        assert_eq!(dc_of(&live, &third[0]), "dc2", "dc1 is full: {third:?}");
        // Every worker full: still two replicas, as the default gives.
        let full = nodes(&[("a", "dc1", "r1", 1), ("x", "dc2", "r3", 1)]);
        let r = WanAware.place(&full, &w, 2, &mut HashMap::new());
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn wan_aware_copies_stay_with_the_holder_while_they_can() {
        let live = nodes(&[
            ("a", "dc1", "r1", 0),
            ("b", "dc1", "r2", 0),
            ("x", "dc2", "r3", 0),
        ]);
        for _ in 0..10 {
            let one = WanAware.place_copies(&live, "a", 1, &mut HashMap::new());
            assert_eq!(one, ["b"]);
            let two = WanAware.place_copies(&live, "a", 2, &mut HashMap::new());
            assert_eq!(two, ["b", "x"]);
        }
    }

    #[test]
    fn placement_spreads_blocks_and_racks() {
        let live = [node("a", "r1"), node("b", "r1"), node("c", "r2")];
        let mut placed = HashMap::new();
        for _ in 0..30 {
            let r = RackAware.place(&live, &writer("127.0.0.1"), 2, &mut placed);
            assert_eq!(r.len(), 2);
            assert_ne!(r[0], r[1]);
            let racks: Vec<&str> = r
                .iter()
                .map(|u| if u == "c" { "r2" } else { "r1" })
                .collect();
            assert_ne!(racks[0], racks[1], "replicas on two racks");
        }
        let counts: Vec<usize> = ["a", "b", "c"].iter().map(|u| placed[*u]).collect();
        assert!(counts.iter().all(|&c| c >= 10), "{counts:?}");
    }

    #[test]
    fn output_copies_go_off_the_holders_rack_and_never_to_it() {
        let live = [node("a", "r1"), node("b", "r1"), node("c", "r2")];
        for _ in 0..20 {
            let one = RackAware.place_copies(&live, "a", 1, &mut HashMap::new());
            assert_eq!(one, ["c"]);
            let mut two = RackAware.place_copies(&live, "a", 2, &mut HashMap::new());
            two.sort();
            assert_eq!(two, ["b", "c"]);
            // As many as there are other workers, however many are asked for.
            assert_eq!(
                RackAware
                    .place_copies(&live, "b", 5, &mut HashMap::new())
                    .len(),
                2
            );
        }
        assert!(RackAware
            .place_copies(&live, "gone", 1, &mut HashMap::new())
            .is_empty());
    }

    #[test]
    fn state_survives_reopen() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        assert_eq!(s.next_epoch().unwrap(), 1);
        let mut c = Catalog::default();
        let id = c.new_block_id(1);
        let x = sluice_proto::ids::DatasetName::new("x").unwrap();
        c.datasets.insert(
            x.clone(),
            DatasetMeta {
                name: x,
                files: vec![FileMeta {
                    name: "x".into(),
                    blocks: vec![BlockMeta {
                        id,
                        len: 3,
                        crc: 1,
                        replicas: vec!["a".into()],
                        corrupt: Vec::new(),
                    }],
                }],
                created_ms: 0,
                origin: "test".into(),
                replication: 1,
                block_size: 0,
                access: Default::default(),
            },
        );
        s.save_catalog(&c).unwrap();
        let s = StateDir::open(d.path()).unwrap();
        assert_eq!(s.next_epoch().unwrap(), 2);
        assert_eq!(s.load_catalog().unwrap().datasets, c.datasets);
    }

    #[test]
    fn a_damaged_catalog_is_refused_saying_how_to_recover() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        let mut c = Catalog::default();
        s.save_catalog(&c).unwrap();
        c.next_block = 7;
        s.save_catalog(&c).unwrap();
        let path = d.path().join("catalog.json");
        let prev = previous(&path);
        // The version before the last write is kept whole.
        let kept: Catalog = serde_json::from_slice(&std::fs::read(&prev).unwrap()).unwrap();
        assert_eq!(kept.next_block, 0);
        std::fs::write(&path, b"{\"datasets\": {\"x\"").unwrap();
        let e = s.load_catalog().unwrap_err().to_string();
        assert!(e.contains("catalog.json is damaged"), "{e}");
        assert!(e.contains("catalog.json.prev"), "{e}");
        std::fs::rename(&prev, &path).unwrap();
        assert_eq!(s.load_catalog().unwrap().next_block, 0);
    }
}
