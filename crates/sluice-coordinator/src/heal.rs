//! Re-replication: a block store that heals, as HDFS's NameNode does.
//!
//! A block is under-replicated when fewer of its intact replicas are on
//! live workers than its data set asks for (capped at the live workers).
//! A scan of the catalog (after a worker is lost or registers, a replica
//! is found damaged, or once a minute) queues each such block under one of
//! its live holders. When a holder heartbeats, it is handed up to
//! `streams` copies at once (HDFS's `replication.max-streams`): each names
//! the block and a target, a live worker without a replica, on another
//! rack than the live replicas when one is free, with the fewest copies
//! coming in; in the holder's data center first when the placement policy
//! keeps copies there (`wan-aware`). A rack is a data center's rack: two
//! data centers' racks of one name are two racks. The holder verifies its
//! replica and sends it over the data plane (paced by its
//! `--replication-rate`); the target checks the
//! block's length and CRC as it does for any write. The holder's next
//! heartbeat says how it went: a copy made adds the target to the block's
//! replicas in the catalog; a failure (a damaged source, a refused write)
//! frees the block for the next scan, which picks again. A copy not heard
//! of within [`COPY_TIMEOUT`] is given up the same way. Replicas on lost
//! workers stay in the catalog (a worker that comes back still has them),
//! so a block may end up with more replicas than asked: the same scan
//! finds such excess replicas on live workers and names the ones to
//! remove, as HDFS's NameNode does: from the rack with the most of the
//! block's replicas, then the worker with the least free space. Blocks
//! being copied or read by a running job are left alone.
//!
//! The module does no I/O; the state calls it and writes what it says.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use sluice_proto::catalog::{BlockMeta, Catalog};
use sluice_proto::ids::DatasetName;
use sluice_proto::proto;

/// A copy not reported within this long is given up and queued again.
pub const COPY_TIMEOUT: Duration = Duration::from_secs(300);
/// How often the catalog is scanned when nothing asked for a scan.
pub const RESCAN: Duration = Duration::from_secs(60);

/// A copy under way.
#[derive(Debug, Clone)]
struct Copy {
    dataset: DatasetName,
    source: String,
    target: String,
    since: Instant,
}

/// Where re-replication stands.
#[derive(Debug, Default)]
pub struct Healing {
    /// A scan is due (something changed).
    dirty: bool,
    last_scan: Option<Instant>,
    /// Blocks to copy, by the live holder that will send them.
    queued: HashMap<String, VecDeque<(DatasetName, String)>>,
    /// Copies under way, by block id.
    copies: HashMap<String, Copy>,
    /// (block, target) pairs that failed: not tried again until a scan
    /// finds no other target.
    failed: HashSet<(String, String)>,
    /// Copies made since the coordinator started.
    pub made: u64,
    /// Excess replicas the last scan found, for the state to remove.
    excess: Vec<Excess>,
}

/// A replica beyond what its data set asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excess {
    pub dataset: DatasetName,
    pub block: String,
    /// The worker whose replica goes.
    pub uid: String,
}

/// A live worker as healing sees it: its uid, rack and address.
#[derive(Debug, Clone)]
pub struct Live {
    pub info: proto::WorkerInfo,
}

impl Healing {
    /// Something changed that may leave blocks short of replicas.
    pub fn changed(&mut self) {
        self.dirty = true;
    }

    /// Blocks queued or being copied.
    pub fn backlog(&self) -> usize {
        self.queued.values().map(VecDeque::len).sum::<usize>() + self.copies.len()
    }

    /// The excess replicas the last scan found (taken).
    pub fn take_excess(&mut self) -> Vec<Excess> {
        std::mem::take(&mut self.excess)
    }

    /// Gives up copies not heard of in time; scans the catalog if a scan
    /// is due. `live` is every live worker by uid; `busy` the blocks
    /// running jobs read, whose excess replicas stay.
    pub fn tick(
        &mut self,
        catalog: &Catalog,
        live: &BTreeMap<String, Live>,
        busy: &HashSet<String>,
        now: Instant,
    ) {
        if self.due(now) {
            self.scan(catalog, live, busy, now);
        }
    }

    /// Gives up copies not heard of in time; whether a scan is due (what
    /// [`Healing::tick`] would scan for). A caller whose live workers cost
    /// something to list lists them only then.
    pub fn due(&mut self, now: Instant) -> bool {
        let before = self.copies.len();
        self.copies
            .retain(|_, c| now.duration_since(c.since) < COPY_TIMEOUT);
        self.dirty |= self.copies.len() != before;
        let due = self
            .last_scan
            .is_none_or(|t| now.duration_since(t) >= RESCAN);
        self.dirty || due
    }

    /// Scans the catalog for blocks short of replicas and excess ones.
    pub fn scan(
        &mut self,
        catalog: &Catalog,
        live: &BTreeMap<String, Live>,
        busy: &HashSet<String>,
        now: Instant,
    ) {
        self.dirty = false;
        self.last_scan = Some(now);
        self.queued.clear();
        self.excess.clear();
        for d in catalog.datasets.values() {
            let asked = d.replication.max(1) as usize;
            let want = asked.min(live.len());
            for b in d.blocks() {
                if self.copies.contains_key(b.id.as_str()) {
                    continue;
                }
                let holders: Vec<&String> = b
                    .replicas
                    .iter()
                    .filter(|u| live.contains_key(*u))
                    .collect();
                if holders.len() > asked && !busy.contains(b.id.as_str()) {
                    self.excess
                        .extend(
                            surplus(&holders, asked, live)
                                .into_iter()
                                .map(|uid| Excess {
                                    dataset: d.name.clone(),
                                    block: b.id.to_string(),
                                    uid,
                                }),
                        );
                    continue;
                }
                if holders.is_empty() || holders.len() >= want {
                    continue;
                }
                // Spread the sending over the holders.
                let h = holders[crc32c::crc32c(b.id.as_bytes()) as usize % holders.len()];
                self.queued
                    .entry(h.clone())
                    .or_default()
                    .push_back((d.name.clone(), b.id.to_string()));
            }
        }
    }

    /// The copies `source` sends now: up to `streams` under way from it;
    /// `in_dc`: targets in its data center first.
    pub fn assign(
        &mut self,
        source: &str,
        catalog: &Catalog,
        live: &BTreeMap<String, Live>,
        streams: usize,
        in_dc: bool,
        now: Instant,
    ) -> Vec<proto::ReplicateCommand> {
        let mut out = Vec::new();
        let home = live
            .get(source)
            .filter(|_| in_dc)
            .map(|l| l.info.datacenter.clone());
        let busy = self.copies.values().filter(|c| c.source == source).count();
        let Some(queue) = self.queued.get_mut(source) else {
            return out;
        };
        let mut room = streams.saturating_sub(busy);
        while room > 0 {
            let Some((dataset, id)) = queue.pop_front() else {
                break;
            };
            let Some(b) = find(catalog, &dataset, &id) else {
                continue;
            };
            let want = catalog.datasets[&dataset].replication.max(1) as usize;
            let holders = b.replicas.iter().filter(|u| live.contains_key(*u)).count();
            if holders >= want.min(live.len()) || !b.replicas.iter().any(|u| u == source) {
                continue;
            }
            let Some(target) = pick_target(b, live, &self.copies, &self.failed, home.as_deref())
            else {
                continue;
            };
            self.copies.insert(
                id.clone(),
                Copy {
                    dataset: dataset.clone(),
                    source: source.to_owned(),
                    target: target.uid.clone(),
                    since: now,
                },
            );
            out.push(proto::ReplicateCommand {
                block: Some(proto::BlockInfo {
                    id: b.id.to_string(),
                    len: b.len,
                    crc: b.crc,
                    replicas: Vec::new(),
                    corrupt: Vec::new(),
                    capability: Default::default(),
                }),
                target: Some(target.clone()),
            });
            room -= 1;
        }
        out
    }

    /// A holder's word on a copy: the data set and target to add to the
    /// block's replicas when it was made.
    pub fn done(&mut self, r: &proto::ReplicateResult) -> Option<(DatasetName, String)> {
        let c = self.copies.remove(&r.block)?;
        if c.target != r.target {
            return None;
        }
        if r.ok {
            self.made += 1;
            Some((c.dataset, c.target))
        } else {
            tracing::warn!(
                "copying block {} to {} failed: {}",
                r.block,
                r.target,
                r.error
            );
            self.failed.insert((r.block.clone(), r.target.clone()));
            self.dirty = true;
            None
        }
    }

    /// Whether `block` is being copied (its new replica is expected).
    pub fn copying(&self, block: &str) -> bool {
        self.copies.contains_key(block)
    }
}

/// Which of `holders` (live, more than `asked`) lose their replica: one
/// at a time, from the rack holding the most of those left, then the
/// worker with the least free space (unknown counts as none), then the
/// greatest uid.
fn surplus(holders: &[&String], asked: usize, live: &BTreeMap<String, Live>) -> Vec<String> {
    let mut left: Vec<&proto::WorkerInfo> = holders.iter().map(|u| &live[*u].info).collect();
    let mut gone = Vec::new();
    while left.len() > asked {
        let on_rack = |w: &proto::WorkerInfo| left.iter().filter(|o| rack(o) == rack(w)).count();
        let Some((at, _)) = left
            .iter()
            .enumerate()
            .max_by_key(|(_, w)| (on_rack(w), std::cmp::Reverse(w.free_bytes), w.uid.clone()))
        else {
            break;
        };
        gone.push(left.remove(at).uid.clone());
    }
    gone
}

fn find<'a>(catalog: &'a Catalog, dataset: &DatasetName, id: &str) -> Option<&'a BlockMeta> {
    catalog
        .datasets
        .get(dataset)?
        .blocks()
        .find(|b| b.id.as_str() == id)
}

/// A worker's rack: its data center's and the rack's names.
fn rack(w: &proto::WorkerInfo) -> (&str, &str) {
    (&w.datacenter, &w.rack)
}

/// The target of a copy of `b`: a live worker without a replica or a
/// damaged one, not already receiving it, that has not failed it; in
/// data center `home` if given and one there can take it; on a rack the
/// block's live replicas are not on if there is one; then the one with
/// the fewest copies coming in.
fn pick_target<'a>(
    b: &BlockMeta,
    live: &'a BTreeMap<String, Live>,
    copies: &HashMap<String, Copy>,
    failed: &HashSet<(String, String)>,
    home: Option<&str>,
) -> Option<&'a proto::WorkerInfo> {
    let racks: HashSet<(&str, &str)> = b
        .replicas
        .iter()
        .filter_map(|u| live.get(u))
        .map(|l| rack(&l.info))
        .collect();
    let incoming = |uid: &str| copies.values().filter(|c| c.target == uid).count();
    live.values()
        .map(|l| &l.info)
        .filter(|w| {
            !b.replicas.contains(&w.uid)
                && !b.corrupt.iter().any(|c| c.uid == w.uid)
                && !failed.contains(&(b.id.to_string(), w.uid.clone()))
        })
        .min_by_key(|w| {
            (
                home.is_some_and(|dc| w.datacenter != dc),
                racks.contains(&rack(w)),
                incoming(&w.uid),
                w.uid.clone(),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_proto::catalog::{DatasetMeta, FileMeta};

    fn worker(uid: &str, rack: &str) -> (String, Live) {
        worker_at(uid, "", rack)
    }

    fn worker_at(uid: &str, datacenter: &str, rack: &str) -> (String, Live) {
        let info = proto::WorkerInfo {
            uid: uid.into(),
            datacenter: datacenter.into(),
            rack: rack.into(),
            data_addr: format!("{uid}:1"),
            alive: true,
            ..Default::default()
        };
        (uid.into(), Live { info })
    }

    fn catalog(blocks: &[(&str, &[&str])], replication: u32) -> Catalog {
        let name = DatasetName::new("d").unwrap();
        let blocks = blocks
            .iter()
            .map(|(id, reps)| BlockMeta {
                id: sluice_proto::ids::BlockId::new(*id).unwrap(),
                len: 10,
                crc: 1,
                replicas: reps.iter().map(|s| s.to_string()).collect(),
                corrupt: Vec::new(),
            })
            .collect();
        let mut c = Catalog::default();
        c.datasets.insert(
            name.clone(),
            DatasetMeta {
                name,
                files: vec![FileMeta {
                    name: "f".into(),
                    blocks,
                }],
                created_ms: 0,
                origin: String::new(),
                replication,
                block_size: 0,
                access: Default::default(),
            },
        );
        c
    }

    #[test]
    fn a_lost_holder_makes_copies_on_another_rack_at_most_streams_at_once() {
        // "c" is lost: blocks it held have one live replica left.
        let mut c = catalog(
            &[
                ("b1", &["a", "c"]),
                ("b2", &["a", "c"]),
                ("b3", &["a", "c"]),
                ("b4", &["a", "b"]),
            ],
            2,
        );
        let live: BTreeMap<String, Live> =
            [worker("a", "r1"), worker("b", "r1"), worker("d", "r2")]
                .into_iter()
                .collect();
        let now = Instant::now();
        let mut h = Healing::default();
        h.tick(&c, &live, &HashSet::new(), now);
        assert_eq!(h.backlog(), 3, "b4 has its two replicas");
        assert!(
            h.assign("b", &c, &live, 2, false, now).is_empty(),
            "b holds none of them"
        );
        let first = h.assign("a", &c, &live, 2, false, now);
        assert_eq!(first.len(), 2, "two streams");
        let targets: Vec<&str> = first
            .iter()
            .map(|x| x.target.as_ref().unwrap().uid.as_str())
            .collect();
        assert_eq!(targets, ["d", "d"], "another rack than a's first");
        assert!(
            h.assign("a", &c, &live, 2, false, now).is_empty(),
            "both streams busy"
        );
        let id = first[0].block.as_ref().unwrap().id.clone();
        let ok = proto::ReplicateResult {
            block: id.clone(),
            target: "d".into(),
            ok: true,
            error: String::new(),
        };
        assert_eq!(h.done(&ok).map(|(_, t)| t), Some("d".into()));
        // What the state does with a copy made: a replica in the catalog.
        let d = DatasetName::new("d").unwrap();
        let meta = c.datasets.get_mut(&d).unwrap();
        let b = meta.files[0]
            .blocks
            .iter_mut()
            .find(|b| b.id == id)
            .unwrap();
        b.replicas.push("d".into());
        let third = h.assign("a", &c, &live, 2, false, now);
        assert_eq!(third.len(), 1);
        // A failed copy frees the block and avoids that target next time.
        let id3 = third[0].block.as_ref().unwrap().id.clone();
        let bad = proto::ReplicateResult {
            block: id3.clone(),
            target: "d".into(),
            ok: false,
            error: "disk full".into(),
        };
        assert_eq!(h.done(&bad), None);
        h.tick(&c, &live, &HashSet::new(), now);
        let again = h.assign("a", &c, &live, 2, false, now);
        let retry = again
            .iter()
            .find(|x| x.block.as_ref().unwrap().id == id3)
            .expect("queued again");
        assert_eq!(retry.target.as_ref().unwrap().uid, "b");
    }

    #[test]
    fn excess_replicas_go_from_the_fullest_rack_and_fullest_worker() {
        let mut w = vec![
            worker("a", "r1"),
            worker("b", "r1"),
            worker("c", "r2"),
            worker("d", "r2"),
        ];
        for (i, (_, l)) in w.iter_mut().enumerate() {
            l.info.free_bytes = 100 * (i as u64 + 1);
        }
        let mut live: BTreeMap<String, Live> = w.into_iter().collect();
        // b1: three replicas, two on r1 (a has the least room); b2: all
        // four; b3: as asked; b4: its third replica on a lost worker "x".
        let c = catalog(
            &[
                ("b1", &["a", "b", "c"]),
                ("b2", &["a", "b", "c", "d"]),
                ("b3", &["c", "d"]),
                ("b4", &["a", "c", "x"]),
            ],
            2,
        );
        let mut h = Healing::default();
        let now = Instant::now();
        h.tick(&c, &live, &HashSet::new(), now);
        let gone: Vec<(String, String)> = h
            .take_excess()
            .into_iter()
            .map(|e| (e.block, e.uid))
            .collect();
        assert_eq!(
            gone,
            [
                ("b1".to_string(), "a".to_string()),
                ("b2".into(), "a".into()),
                ("b2".into(), "c".into()),
            ],
            "one from each rack of b2, the one with less room first"
        );
        assert_eq!(h.backlog(), 0, "no block is short");
        // A data set a running job reads keeps them; so does a block
        // being copied (its new replica is not counted yet).
        let busy: HashSet<String> = ["b1", "b2"].map(String::from).into();
        h.changed();
        h.tick(&c, &live, &busy, now);
        assert!(h.take_excess().is_empty());
        // The lost worker back: b4 has one replica too many.
        live.insert("x".into(), worker("x", "r3").1);
        h.changed();
        h.tick(&c, &live, &HashSet::new(), now);
        let b4: Vec<String> = h
            .take_excess()
            .into_iter()
            .filter(|e| e.block == "b4")
            .map(|e| e.uid)
            .collect();
        assert_eq!(b4, ["x"], "one per rack: the one with unknown room goes");
    }

    #[test]
    fn a_copy_never_reported_is_given_up() {
        let c = catalog(&[("b1", &["a", "c"])], 2);
        let live: BTreeMap<String, Live> =
            [worker("a", "r1"), worker("b", "r1")].into_iter().collect();
        let now = Instant::now();
        let mut h = Healing::default();
        h.tick(&c, &live, &HashSet::new(), now);
        assert_eq!(h.assign("a", &c, &live, 2, false, now).len(), 1);
        assert!(h.copying("b1"));
        h.tick(
            &c,
            &live,
            &HashSet::new(),
            now + COPY_TIMEOUT + Duration::from_secs(1),
        );
        assert!(!h.copying("b1"));
        assert_eq!(
            h.assign("a", &c, &live, 2, false, now).len(),
            1,
            "queued again"
        );
    }

    /// A copy's target: a data center's rack is its own (two data
    /// centers' `r1` are two racks); with `in_dc`, the holder's data
    /// center first, whatever its racks, and another when it has no one.
    #[test]
    fn copies_go_to_another_rack_or_stay_in_the_holders_data_center() {
        let c = catalog(&[("b1", &["a", "x"])], 2);
        let target = |live: &BTreeMap<String, Live>, in_dc: bool| {
            let mut h = Healing::default();
            h.tick(&c, live, &HashSet::new(), Instant::now());
            let sent = h.assign("a", &c, live, 1, in_dc, Instant::now());
            sent[0].target.as_ref().unwrap().uid.clone()
        };
        // "x" is lost; "b" shares a's data center and rack, "z" has a
        // rack of the same name in the other data center.
        let live: BTreeMap<String, Live> = [
            worker_at("a", "dc1", "r1"),
            worker_at("b", "dc1", "r1"),
            worker_at("z", "dc2", "r1"),
        ]
        .into_iter()
        .collect();
        assert_eq!(target(&live, false), "z", "dc2's r1 is another rack");
        assert_eq!(target(&live, true), "b", "wan-aware: a's data center");
        let away: BTreeMap<String, Live> =
            [worker_at("a", "dc1", "r1"), worker_at("z", "dc2", "r1")]
                .into_iter()
                .collect();
        assert_eq!(target(&away, true), "z", "no one else in dc1");
    }
}
