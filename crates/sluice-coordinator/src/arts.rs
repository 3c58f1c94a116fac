//! When and where reduces start: slow-start, and seed 003's ARTS.
//!
//! Hadoop starts a job's reduces once a fixed fraction of its maps is done
//! (`--slowstart`; seed 003's baselines: early start at 0.05, delayed
//! start at 0.8), on whichever worker asks. ARTS (the *aggregation-aware
//! reduce task scheduler*) decides per free reduce slot of a worker in data
//! center `D`, from the map outputs reported so far, per partition and per
//! data center:
//!
//! ```text
//! remaining  = total maps - completed - running
//! map_finish = ceil(remaining / map slots) * mean map time
//! Rx         = the unscheduled partition homed in D (below) with the
//!              most output in D, else the one with most output in D
//! copy_time  = sum over data centers d of output(Rx in d) / bandwidth(d -> D)
//!              (each behind the copies queued on d -> D: see below)
//! copy_time > map_finish          -> start Rx here (its copy is the longer)
//! output / input < THRESHOLD      -> wait (an aggregating job: its output
//!                                    is small, copies are quick later)
//! else (write-intensive)          -> ramp reduces up with completed maps:
//!   step = ceil((total - slowstart maps) / reduces)
//!   want = min(floor((completed - slowstart maps) / step), reduces)
//!   running reduces < want        -> start Rx here
//! ```
//!
//! The seed leaves THRESHOLD open. Sluice takes [`AGGREGATING_RATIO`]
//! (0.5): a job whose maps emit less than half the bytes they read is
//! aggregating. Word count with its combiner emits a few percent of its
//! input, sort and TeraSort emit all of it, so the two kinds sit far from
//! 0.5 on either side, and a job near it (a filter keeping half) loses
//! little whichever way it goes. Two rules complete the pseudo-code: with
//! no map finished yet there is no estimate and nothing starts; with
//! every map done there is nothing to wait for and every partition
//! starts. The slow-start maps of the ramp are [`ARTS_SLOWSTART`] of the
//! maps (early start's fraction).
//!
//! The seed reports that with all map output in one data center ARTS ran
//! every reduce there (no byte crossed the WAN), and calls ARTS delay
//! scheduling for reduces; the pseudo-code alone would let a worker of
//! the other data center take a partition it holds nothing of once the
//! maps are done. So, as delay scheduling does for maps, a partition is
//! started outside the data center holding most of its output ([`homed`])
//! only after the job has waited, since it last started a reduce at home,
//! as long as copying that partition there would take ([`copy_time`]):
//! a slot at home that frees sooner wins, and waiting never costs more
//! than the copy it avoids would have (the rent-or-buy rule;
//! `crate::sched::Job::pick`).
//!
//! A partition's home is where its copy would end soonest, behind the
//! copies the job's running reduces have queued on each link ([`Queued`]),
//! not merely where most of its output is. With the input split 4:5
//! between two data centers every partition has most of its output in the
//! second: homes by output alone put every reduce there and sent all of
//! the shuffle one way over the WAN while the other way idled (at 2 GB
//! ARTS took 86 s where early start, whose reduces land anywhere, took 68
//! s). With the queues counted, once a partition or two are copying into
//! one data center the next is quicker to copy the other way, and the
//! partitions alternate. (Iridium places reduces across sites to balance
//! the links' transfer times in the same spirit, with a linear program.)
//! With all the output in one data center nothing changes: a copy within
//! it is always quicker.

use std::collections::{BTreeMap, HashMap};

/// Map output over map input below which a job is aggregating.
pub const AGGREGATING_RATIO: f64 = 0.5;

/// The fraction of maps ARTS's write-intensive ramp starts from.
pub const ARTS_SLOWSTART: f64 = 0.05;

/// How reduces are started.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReduceScheduler {
    /// Once this fraction of the maps is done, on any worker.
    SlowStart(f64),
    /// Seed 003's ARTS.
    Arts,
}

impl ReduceScheduler {
    /// `early` (slow-start 0.05), `delayed` (0.8) or `arts`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "early" => Some(ReduceScheduler::SlowStart(0.05)),
            "delayed" => Some(ReduceScheduler::SlowStart(0.8)),
            "arts" => Some(ReduceScheduler::Arts),
            _ => None,
        }
    }

    /// Its name in reports.
    pub fn name(&self) -> String {
        match self {
            ReduceScheduler::SlowStart(f) => format!("slowstart {f}"),
            ReduceScheduler::Arts => "arts".into(),
        }
    }
}

/// Bandwidths between data centers (bytes/s), for ARTS's copy time.
#[derive(Debug, Clone)]
pub struct Links {
    /// Within a data center.
    pub lan: f64,
    /// Between two data centers no pair names.
    pub wan: f64,
    /// `(from, to)`: a pair's own bandwidth.
    pub pairs: HashMap<(String, String), f64>,
}

impl Default for Links {
    /// 1 GB/s inside a data center, 100 Mbit/s between (seed 003's WAN).
    fn default() -> Self {
        Links {
            lan: 1e9,
            wan: 12.5e6,
            pairs: HashMap::new(),
        }
    }
}

impl Links {
    /// Bytes a second from data center `from` to `to`.
    pub fn bandwidth(&self, from: &str, to: &str) -> f64 {
        if let Some(b) = self.pairs.get(&(from.to_owned(), to.to_owned())) {
            return *b;
        }
        if from == to {
            self.lan
        } else {
            self.wan
        }
    }

    /// Reads `--links`: lines `FROM TO RATE` (a rate as `100Mbit/s`,
    /// `12MB/s` or bytes a second; `FROM->TO` only that way, `FROM TO`
    /// both ways), `lan RATE`, `wan RATE`; `#` comments.
    pub fn parse(text: &str, rate: impl Fn(&str) -> Option<u64>) -> Result<Links, String> {
        let mut l = Links::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            let w: Vec<&str> = line.split_whitespace().collect();
            let bad = || format!("line {}: {line:?}: expected `FROM TO RATE`", n + 1);
            let r = |s: &str| rate(s).filter(|r| *r > 0).map(|r| r as f64).ok_or_else(bad);
            match w.as_slice() {
                [] => {}
                ["lan", v] => l.lan = r(v)?,
                ["wan", v] => l.wan = r(v)?,
                [pair, v] if pair.contains("->") => {
                    let (a, b) = pair.split_once("->").ok_or_else(bad)?;
                    l.pairs.insert((a.into(), b.into()), r(v)?);
                }
                [a, b, v] => {
                    let v = r(v)?;
                    l.pairs.insert(((*a).into(), (*b).into()), v);
                    l.pairs.insert(((*b).into(), (*a).into()), v);
                }
                _ => return Err(bad()),
            }
        }
        Ok(l)
    }
}

/// Bytes a job's running reduces have yet to copy over each link between
/// two data centers: for each such reduce, its partition's output in
/// every data center but its own. (What a reduce has fetched already is
/// not taken off: its fetches from every source run at once, so its links
/// stay busy until near its end.)
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Queued(Vec<(String, String, u64)>);

impl Queued {
    /// The copies of the reduces running on `running` (partition, data
    /// center) pairs, given the map output so far.
    pub fn of<'a>(
        output: &BTreeMap<String, Vec<u64>>,
        running: impl IntoIterator<Item = (usize, &'a str)>,
    ) -> Queued {
        let mut q = Queued::default();
        for (p, to) in running {
            for (from, parts) in output.iter().filter(|(d, _)| *d != to) {
                let bytes = parts.get(p).copied().unwrap_or(0);
                if bytes > 0 {
                    q.add(from, to, bytes);
                }
            }
        }
        q
    }

    fn add(&mut self, from: &str, to: &str, bytes: u64) {
        match self.0.iter_mut().find(|(f, t, _)| f == from && t == to) {
            Some((_, _, b)) => *b += bytes,
            None => self.0.push((from.to_owned(), to.to_owned(), bytes)),
        }
    }

    /// Bytes queued from `from` to `to`.
    pub fn on(&self, from: &str, to: &str) -> u64 {
        self.0
            .iter()
            .find(|(f, t, _)| f == from && t == to)
            .map_or(0, |(_, _, b)| *b)
    }
}

/// What ARTS knows of a job when a worker of data center `dc` has a free
/// reduce slot.
#[derive(Debug, Clone)]
pub struct JobProgress<'a> {
    pub total_maps: usize,
    pub completed_maps: usize,
    pub running_maps: usize,
    /// Seconds the completed maps took, summed.
    pub map_seconds: f64,
    /// Map slots of the cluster.
    pub map_slots: usize,
    /// Bytes the completed maps read and wrote.
    pub map_input: u64,
    pub map_output: u64,
    pub reduces: usize,
    pub running_reduces: usize,
    /// Map output so far: data center -> bytes per partition.
    pub output: &'a BTreeMap<String, Vec<u64>>,
    /// The copies its running reduces have queued.
    pub queued: Queued,
}

/// Why ARTS decided as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// No map has finished: nothing to estimate from.
    NoEstimate,
    /// Every map is done.
    MapsDone,
    /// Copying the partition takes longer than the maps left.
    CopyLonger,
    /// An aggregating job waits for its maps.
    Aggregating,
    /// A write-intensive job ramps its reduces up with its maps: below.
    RampBelow,
    /// ... or at the ramp's count already.
    RampReached,
}

/// ARTS's answer for one free reduce slot in data center `dc`:
/// `(Some(partition), why)` starts that partition there. `open` are the
/// unscheduled partitions the slot may take, ascending.
pub fn decide(p: &JobProgress, dc: &str, open: &[usize], links: &Links) -> (Option<usize>, Why) {
    let Some(rx) = choose(p.output, &p.queued, dc, open, links) else {
        return (None, Why::RampReached);
    };
    if p.completed_maps >= p.total_maps {
        return (Some(rx), Why::MapsDone);
    }
    if p.completed_maps == 0 {
        return (None, Why::NoEstimate);
    }
    let remaining =
        p.total_maps - p.completed_maps - p.running_maps.min(p.total_maps - p.completed_maps);
    let mean = p.map_seconds / p.completed_maps as f64;
    let map_finish = remaining.div_ceil(p.map_slots.max(1)) as f64 * mean;
    if copy_time(p.output, &p.queued, rx, dc, links) > map_finish {
        return (Some(rx), Why::CopyLonger);
    }
    let ratio = p.map_output as f64 / p.map_input.max(1) as f64;
    if ratio < AGGREGATING_RATIO {
        return (None, Why::Aggregating);
    }
    let slowstart = (ARTS_SLOWSTART * p.total_maps as f64).ceil() as usize;
    let step = (p.total_maps.saturating_sub(slowstart))
        .div_ceil(p.reduces.max(1))
        .max(1);
    let want = (p.completed_maps.saturating_sub(slowstart) / step).min(p.reduces);
    if p.running_reduces < want {
        (Some(rx), Why::RampBelow)
    } else {
        (None, Why::RampReached)
    }
}

/// Seconds until partition `p`'s map output so far would be in data
/// center `dc`: from each data center holding some of it, what is queued
/// on the link into `dc` and the partition's share, at the link's
/// bandwidth.
pub fn copy_time(
    output: &BTreeMap<String, Vec<u64>>,
    queued: &Queued,
    p: usize,
    dc: &str,
    links: &Links,
) -> f64 {
    output
        .iter()
        .map(|(d, parts)| match parts.get(p).copied().unwrap_or(0) {
            0 => 0.0,
            bytes => {
                let ahead = if d == dc { 0 } else { queued.on(d, dc) };
                (ahead + bytes) as f64 / links.bandwidth(d, dc)
            }
        })
        .sum()
}

/// Whether partition `p`'s copy would end in data center `dc` no later
/// than in any data center holding some of its output ([`copy_time`]):
/// with nothing queued and the same bandwidth every way, whether `dc`
/// holds its largest share (or no data center holds any of it).
pub fn homed(
    output: &BTreeMap<String, Vec<u64>>,
    queued: &Queued,
    dc: &str,
    p: usize,
    links: &Links,
) -> bool {
    let here = copy_time(output, queued, p, dc, links);
    output
        .keys()
        .all(|d| here <= copy_time(output, queued, p, d, links))
}

/// Rx: of `open`, the partition homed in `dc` ([`homed`]) with the most
/// output there, else the one with most output in `dc`; ties go to the
/// lowest index.
fn choose(
    output: &BTreeMap<String, Vec<u64>>,
    queued: &Queued,
    dc: &str,
    open: &[usize],
    links: &Links,
) -> Option<usize> {
    let here = |p: usize| output.get(dc).and_then(|v| v.get(p)).copied().unwrap_or(0);
    let homed_here = |p: usize| here(p) > 0 && homed(output, queued, dc, p, links);
    let best = |it: &mut dyn Iterator<Item = usize>| {
        it.fold(None, |b: Option<usize>, p| match b {
            Some(q) if here(q) >= here(p) => Some(q),
            _ => Some(p),
        })
    };
    best(&mut open.iter().copied().filter(|&p| homed_here(p)))
        .or_else(|| best(&mut open.iter().copied()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(rows: &[(&str, &[u64])]) -> BTreeMap<String, Vec<u64>> {
        rows.iter()
            .map(|(d, v)| ((*d).to_owned(), v.to_vec()))
            .collect()
    }

    /// A job of 100 maps on 10 map slots, 4 reduces, 2 s a map.
    fn job(
        done: usize,
        running: usize,
        ratio: f64,
        o: &BTreeMap<String, Vec<u64>>,
    ) -> JobProgress<'_> {
        let input = done as u64 * 100_000_000;
        JobProgress {
            total_maps: 100,
            completed_maps: done,
            running_maps: running,
            map_seconds: 2.0 * done as f64,
            map_slots: 10,
            map_input: input,
            map_output: (input as f64 * ratio) as u64,
            reduces: 4,
            running_reduces: 0,
            output: o,
            queued: Queued::default(),
        }
    }

    fn links() -> Links {
        Links {
            lan: 1e9,
            wan: 1e7,
            pairs: HashMap::new(),
        }
    }

    #[test]
    fn rx_is_the_partition_homed_here_else_the_most_output_here() {
        let o = out(&[("dc1", &[10, 50, 30, 0]), ("dc2", &[90, 40, 60, 5])]);
        let (q, l) = (Queued::default(), links());
        let choose =
            |o: &BTreeMap<String, Vec<u64>>, dc: &str, open: &[usize]| choose(o, &q, dc, open, &l);
        let homed = |o: &BTreeMap<String, Vec<u64>>, dc: &str, p: usize| homed(o, &q, dc, p, &l);
        assert_eq!(
            choose(&o, "dc1", &[0, 1, 2, 3]),
            Some(1),
            "only 1 has its largest share in dc1"
        );
        assert_eq!(
            choose(&o, "dc2", &[0, 1, 2, 3]),
            Some(0),
            "0, 2 and 3 are homed in dc2; 0 has most"
        );
        assert_eq!(
            choose(&o, "dc1", &[0, 2, 3]),
            Some(2),
            "none homed in dc1: the most there"
        );
        assert_eq!(
            choose(&o, "dc3", &[2, 3]),
            Some(2),
            "nothing there: the lowest"
        );
        assert_eq!(choose(&o, "dc1", &[]), None);
        assert!(homed(&o, "dc1", 1) && !homed(&o, "dc1", 0) && homed(&o, "dc2", 3));
        assert!(
            homed(&out(&[("dc1", &[0])]), "dc2", 0),
            "no output anywhere: no home"
        );
    }

    /// Every branch of the pseudo-code, as a table: (completed, running,
    /// output/input, per-data-center output, running reduces) -> decision.
    #[test]
    fn decisions_follow_the_pseudo_code() {
        let far = out(&[("dc1", &[0, 0, 0, 0]), ("dc2", &[400_000_000, 1, 1, 1])]);
        let near = out(&[("dc1", &[1_000_000, 1, 1, 1])]);
        type Row<'a> = (
            usize,
            usize,
            f64,
            &'a BTreeMap<String, Vec<u64>>,
            usize,
            Option<usize>,
            Why,
        );
        let table: [Row; 9] = [
            // Nothing finished: no estimate.
            (0, 10, 1.0, &near, 0, None, Why::NoEstimate),
            // All done: start.
            (100, 0, 0.01, &near, 0, Some(0), Why::MapsDone),
            // 400 MB over a 10 MB/s WAN (40 s) > 8 rounds of 2 s: start.
            (10, 10, 0.01, &far, 0, Some(0), Why::CopyLonger),
            // The same output at the end of the maps: 40 s > 2 s still.
            (89, 10, 1.0, &far, 0, Some(0), Why::CopyLonger),
            // 1 MB on the LAN is quick: an aggregating job waits.
            (50, 10, 0.01, &near, 0, None, Why::Aggregating),
            // Write-intensive: step = ceil(95 / 4) = 24; 50 done -> 1.
            (50, 10, 1.0, &near, 0, Some(0), Why::RampBelow),
            (50, 10, 1.0, &near, 1, None, Why::RampReached),
            // 5 done is the slow-start count: none wanted yet.
            (5, 10, 1.0, &near, 0, None, Why::RampReached),
            // 77 done -> 3 wanted, 2 running: one more.
            (77, 10, 1.0, &near, 2, Some(0), Why::RampBelow),
        ];
        for (i, (done, running, ratio, o, reds, want, why)) in table.into_iter().enumerate() {
            let mut p = job(done, running, ratio, o);
            p.running_reduces = reds;
            let got = decide(&p, "dc1", &[0, 1, 2, 3], &links());
            assert_eq!(got, (want, why), "row {i}");
        }
    }

    /// Input split 4:5 between two data centers: every partition has most
    /// of its output in dc2, but with one or two of them copying into dc2
    /// the next is quicker to copy into dc1, so the reduces alternate and
    /// both ways of the WAN carry copies. With all the output in one data
    /// center, the queues never send a partition away from it.
    #[test]
    fn homes_follow_the_copies_queued_on_each_link() {
        let l = links();
        let split = out(&[("dc1", &[40; 6]), ("dc2", &[50; 6])]);
        let mut running: Vec<(usize, &str)> = Vec::new();
        for p in 0..6 {
            let q = Queued::of(&split, running.iter().copied());
            let dc = ["dc1", "dc2"]
                .into_iter()
                .find(|dc| homed(&split, &q, dc, p, &l))
                .unwrap();
            running.push((p, dc));
        }
        let dcs: Vec<&str> = running.iter().map(|(_, dc)| *dc).collect();
        assert_eq!(dcs, ["dc2", "dc1", "dc2", "dc1", "dc2", "dc1"]);
        let q = Queued::of(&split, running.iter().copied());
        assert_eq!((q.on("dc1", "dc2"), q.on("dc2", "dc1")), (120, 150));
        assert_eq!(q.on("dc1", "dc1"), 0);
        // dc2's copies queued into dc1 come before a partition's own.
        let q = Queued::of(&split, [(0, "dc1")]);
        assert_eq!(
            copy_time(&split, &q, 1, "dc1", &l),
            100.0 / 1e7 + 40.0 / 1e9
        );

        let one = out(&[("dc1", &[1_000_000; 6])]);
        let q = Queued::of(&one, (0..5).map(|p| (p, "dc1")));
        assert!(homed(&one, &q, "dc1", 5, &l) && !homed(&one, &q, "dc2", 5, &l));
    }

    #[test]
    fn the_threshold_splits_aggregating_from_write_intensive_jobs() {
        let o = out(&[("dc1", &[1, 1, 1, 1])]);
        let below = decide(
            &job(50, 10, AGGREGATING_RATIO - 0.01, &o),
            "dc1",
            &[0],
            &links(),
        );
        let above = decide(
            &job(50, 10, AGGREGATING_RATIO + 0.01, &o),
            "dc1",
            &[0],
            &links(),
        );
        assert_eq!(below, (None, Why::Aggregating));
        assert_eq!(above, (Some(0), Why::RampBelow));
    }

    #[test]
    fn links_parse_pairs_both_ways_and_one_way() {
        let rate = |s: &str| s.strip_suffix("B/s").and_then(|n| n.parse().ok());
        let l = Links::parse(
            "# links\nlan 1000B/s\nwan 10B/s\ndc1 dc2 50B/s\ndc2->dc3 7B/s\n",
            rate,
        )
        .unwrap();
        assert_eq!(l.bandwidth("dc1", "dc1"), 1000.0);
        assert_eq!(l.bandwidth("dc2", "dc1"), 50.0);
        assert_eq!(l.bandwidth("dc2", "dc3"), 7.0);
        assert_eq!(l.bandwidth("dc3", "dc2"), 10.0);
        assert!(Links::parse("dc1 dc2", rate).is_err());
        assert!(Links::parse("dc1 dc2 fast", rate).is_err());
    }
}
