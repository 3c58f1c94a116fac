//! A job's task queues: what makes a scheduling decision cost the same
//! with ten tasks or a hundred thousand.
//!
//! A decision needs the best pending map for one worker at each locality
//! level, the job's running and pending counts (for the policy), and the
//! phase's median task time (for speculation). Scanning every task for
//! each would make a heartbeat's cost grow with the job. Instead a job
//! keeps, and updates as attempts start and end:
//!
//! - the tasks of each kind not done (`open`), and of those the ones with
//!   no attempt running (`waiting`), in index order;
//! - waiting maps by the workers that hold all their blocks
//!   (`by_holder`, listing only workers that hold some), and waiting
//!   maps that read nothing and are at home anywhere (`anywhere`); a
//!   rack- or data-center-local map of a worker is a waiting map of
//!   another worker in its rack or data center, found through that
//!   worker's queue;
//! - maps by each block they read (`by_block`), for the cache level;
//! - maps that may run anywhere at once (`any_worker`, after a damaged
//!   replica);
//! - running attempts per task (`running`) and per worker (`on_worker`),
//!   and the winners' times in an order-statistics pair of multisets
//!   (`Median`).
//!
//! A task leaves the waiting queues when its first attempt starts and
//! comes back when its last one stops without finishing it, so an offer
//! does not walk past the thousands of tasks a large cluster runs at
//! once. Queues may still hold entries that do not qualify for one worker
//! (a task that failed there, a replica since found damaged): a decision
//! checks each candidate and skips those, so the candidates it looks at
//! are bounded by the few that failed on the asking worker, not by the
//! job's size or the cluster's. [`Queues::examined`] counts them, and
//! [`Queues::walked`] the workers a rack or data-center search looks at
//! (those holding waiting maps, not every live worker), for tests.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use sluice_proto::ids::{TaskKind, WorkerId};

use crate::input::MapInput;

/// A job's task queues (see the module doc).
#[derive(Debug, Default)]
pub struct Queues {
    open: [BTreeSet<usize>; 2],
    /// Open tasks with no attempt running.
    waiting: [BTreeSet<usize>; 2],
    by_holder: HashMap<String, BTreeSet<usize>>,
    anywhere: BTreeSet<usize>,
    by_block: HashMap<String, Vec<usize>>,
    /// Each map's holders, as indexed (to take it out when done); `None`
    /// for a map that reads nothing.
    holders: Vec<Option<Vec<String>>>,
    any_worker: BTreeSet<usize>,
    /// Running attempts per task, and when the first of them started.
    running: [BTreeMap<usize, (u32, Instant)>; 2],
    /// Tasks with a running attempt, oldest first (by `running`'s start):
    /// what lets a straggler search stop at the first task too young.
    by_start: [BTreeSet<(Instant, usize)>; 2],
    /// Running attempts of each kind per worker: what an offer needs to
    /// know its worker's free slots without walking the running tasks.
    on_worker: HashMap<WorkerId, [u32; 2]>,
    winners: [Median; 2],
    /// Candidates looked at by decisions so far.
    examined: std::cell::Cell<u64>,
    /// Workers looked at by decisions' rack and data-center searches.
    walked: std::cell::Cell<u64>,
}

fn slot(kind: TaskKind) -> usize {
    match kind {
        TaskKind::Map => 0,
        TaskKind::Reduce => 1,
    }
}

impl Queues {
    /// Queues of a job over `inputs` with `reduces` reduce tasks, every
    /// task open.
    pub fn new(inputs: &[MapInput], reduces: usize) -> Self {
        let open: [BTreeSet<usize>; 2] = [(0..inputs.len()).collect(), (0..reduces).collect()];
        let mut q = Queues {
            waiting: open.clone(),
            open,
            ..Queues::default()
        };
        for (i, input) in inputs.iter().enumerate() {
            for b in input.blocks() {
                q.by_block.entry(b.id.to_string()).or_default().push(i);
            }
            q.holders.push(common_holders(input));
        }
        for i in 0..inputs.len() {
            q.index_map(i);
        }
        q
    }

    /// Puts waiting task `i` of `kind` in its waiting queues.
    fn wait(&mut self, kind: TaskKind, i: usize) {
        self.waiting[slot(kind)].insert(i);
        if kind == TaskKind::Map {
            self.index_map(i);
        }
    }

    /// Takes task `i` of `kind` out of its waiting queues.
    fn unwait(&mut self, kind: TaskKind, i: usize) {
        self.waiting[slot(kind)].remove(&i);
        if kind == TaskKind::Map {
            self.anywhere.remove(&i);
            for u in self.holders[i].iter().flatten() {
                if let Some(q) = self.by_holder.get_mut(u) {
                    q.remove(&i);
                    if q.is_empty() {
                        // Only workers holding waiting maps stay listed:
                        // a rack's search walks them ([`Queues::holders`]).
                        self.by_holder.remove(u);
                    }
                }
            }
        }
    }

    fn index_map(&mut self, i: usize) {
        match &self.holders[i] {
            None => {
                self.anywhere.insert(i);
            }
            Some(holders) => {
                for u in holders {
                    self.by_holder.entry(u.clone()).or_default().insert(i);
                }
            }
        }
    }

    /// Task `i` of `kind` is done: out of the queues.
    pub fn done(&mut self, kind: TaskKind, i: usize) {
        self.open[slot(kind)].remove(&i);
        self.unwait(kind, i);
        if kind == TaskKind::Map {
            self.any_worker.remove(&i);
        }
    }

    /// Task `i` of `kind` must run again (its output was lost).
    pub fn reopen(&mut self, kind: TaskKind, i: usize) {
        if self.open[slot(kind)].insert(i) && !self.running[slot(kind)].contains_key(&i) {
            self.wait(kind, i);
        }
    }

    /// Map `i` may run on any worker at once.
    pub fn anywhere_now(&mut self, i: usize) {
        if self.open[0].contains(&i) {
            self.any_worker.insert(i);
        }
    }

    /// An attempt of task `i` of `kind` started on worker `w` at `at`.
    pub fn started(&mut self, kind: TaskKind, i: usize, w: WorkerId, at: Instant) {
        let (n, since) = self.running[slot(kind)].entry(i).or_insert((0, at));
        *n += 1;
        if *n == 1 {
            self.by_start[slot(kind)].insert((*since, i));
            self.unwait(kind, i);
        }
        self.on_worker.entry(w).or_default()[slot(kind)] += 1;
    }

    /// An attempt of task `i` of `kind` on worker `w` stopped running.
    pub fn stopped(&mut self, kind: TaskKind, i: usize, w: WorkerId) {
        let running = &mut self.running[slot(kind)];
        if let Some((n, since)) = running.get_mut(&i) {
            *n -= 1;
            if *n == 0 {
                self.by_start[slot(kind)].remove(&(*since, i));
                running.remove(&i);
                if self.open[slot(kind)].contains(&i) {
                    self.wait(kind, i);
                }
            }
        }
        if let Some(n) = self.on_worker.get_mut(&w) {
            n[slot(kind)] = n[slot(kind)].saturating_sub(1);
            if *n == [0, 0] {
                self.on_worker.remove(&w);
            }
        }
    }

    /// Running attempts of `kind` on worker `w`.
    pub fn running_on(&self, kind: TaskKind, w: WorkerId) -> usize {
        self.on_worker.get(&w).map_or(0, |n| n[slot(kind)] as usize)
    }

    /// A winner of `kind` ran `micros`; `false` takes one back.
    pub fn winner(&mut self, kind: TaskKind, micros: u64, add: bool) {
        let m = &mut self.winners[slot(kind)];
        if add {
            m.insert(micros);
        } else {
            m.remove(micros);
        }
    }

    /// The median time of the winners of `kind`, in microseconds.
    pub fn median(&self, kind: TaskKind) -> Option<u64> {
        self.winners[slot(kind)].median()
    }

    /// Tasks of `kind` with a running attempt.
    pub fn running(&self, kind: TaskKind) -> usize {
        self.running[slot(kind)].len()
    }

    /// Tasks of `kind` with a running attempt, in index order.
    pub fn running_tasks(&self, kind: TaskKind) -> impl Iterator<Item = usize> + '_ {
        self.running[slot(kind)].keys().copied()
    }

    /// Tasks of `kind` not done.
    pub fn open_count(&self, kind: TaskKind) -> usize {
        self.open[slot(kind)].len()
    }

    /// Whether task `i` of `kind` is not done.
    pub fn is_open(&self, kind: TaskKind, i: usize) -> bool {
        self.open[slot(kind)].contains(&i)
    }

    /// Tasks of `kind` with a running attempt, those whose first running
    /// attempt started earliest first, with that start.
    pub fn oldest_running(&self, kind: TaskKind) -> impl Iterator<Item = (Instant, usize)> + '_ {
        self.by_start[slot(kind)].iter().copied()
    }

    /// Tasks of `kind` not done, in index order.
    pub fn open(&self, kind: TaskKind) -> impl Iterator<Item = usize> + '_ {
        self.open[slot(kind)].iter().copied()
    }

    /// Tasks of `kind` not done and not running, in index order.
    pub fn waiting(&self, kind: TaskKind) -> impl Iterator<Item = usize> + '_ {
        self.waiting[slot(kind)].iter().copied()
    }

    /// Tasks of `kind` not done and not running.
    pub fn waiting_count(&self, kind: TaskKind) -> usize {
        self.waiting[slot(kind)].len()
    }

    /// Waiting maps whose blocks worker `uid` holds, in index order.
    pub fn held_by(&self, uid: &str) -> impl Iterator<Item = usize> + '_ {
        self.by_holder.get(uid).into_iter().flatten().copied()
    }

    /// The workers holding every block of some waiting map.
    pub fn holders(&self) -> impl Iterator<Item = &str> + '_ {
        self.by_holder.keys().map(String::as_str)
    }

    /// How many workers [`Queues::holders`] gives.
    pub fn holder_count(&self) -> usize {
        self.by_holder.len()
    }

    /// Waiting maps that read nothing, in index order.
    pub fn anywhere(&self) -> impl Iterator<Item = usize> + '_ {
        self.anywhere.iter().copied()
    }

    /// Maps that read block `id`.
    pub fn reading(&self, id: &str) -> &[usize] {
        self.by_block.get(id).map_or(&[], Vec::as_slice)
    }

    /// Counts a candidate looked at.
    pub fn look(&self) {
        self.examined.set(self.examined.get() + 1);
    }

    /// Candidates looked at by decisions so far.
    pub fn examined(&self) -> u64 {
        self.examined.get()
    }

    /// Counts a worker looked at by a rack or data-center search.
    pub fn walk(&self) {
        self.walked.set(self.walked.get() + 1);
    }

    /// Workers looked at by rack and data-center searches so far.
    pub fn walked(&self) -> u64 {
        self.walked.get()
    }

    /// Open maps that may run anywhere at once.
    pub fn any_worker(&self) -> impl Iterator<Item = usize> + '_ {
        self.any_worker.iter().copied()
    }
}

/// The workers holding a replica of every block of `input`; `None` when
/// it reads no block.
fn common_holders(input: &MapInput) -> Option<Vec<String>> {
    if let MapInput::External(e) = input {
        // Readable from anywhere: local to its holders, when any.
        return (!e.holders.is_empty()).then(|| e.holders.clone());
    }
    let mut blocks = input.blocks().iter();
    let mut holders = blocks.next()?.replicas.clone();
    for b in blocks {
        holders.retain(|u| b.replicas.contains(u));
    }
    Some(holders)
}

/// A multiset of times with its median: the lower half and the upper half
/// of the values, each a counted set, kept within one of each other in
/// size. Insert, remove and median cost O(log n).
#[derive(Debug, Default)]
struct Median {
    low: BTreeMap<u64, u32>,
    high: BTreeMap<u64, u32>,
    low_len: usize,
    high_len: usize,
}

impl Median {
    fn insert(&mut self, v: u64) {
        match self.low.last_key_value() {
            Some((&top, _)) if v > top => add(&mut self.high, &mut self.high_len, v),
            _ => add(&mut self.low, &mut self.low_len, v),
        }
        self.balance();
    }

    fn remove(&mut self, v: u64) {
        if take(&mut self.low, &mut self.low_len, v) || take(&mut self.high, &mut self.high_len, v)
        {
            self.balance();
        }
    }

    /// The upper median (the value at index n / 2 in order).
    fn median(&self) -> Option<u64> {
        if self.low_len > self.high_len {
            self.low.last_key_value().map(|(&v, _)| v)
        } else {
            self.high.first_key_value().map(|(&v, _)| v)
        }
    }

    fn balance(&mut self) {
        while self.low_len > self.high_len + 1 {
            let v = *self.low.last_key_value().expect("low is not empty").0;
            take(&mut self.low, &mut self.low_len, v);
            add(&mut self.high, &mut self.high_len, v);
        }
        while self.high_len > self.low_len {
            let v = *self.high.first_key_value().expect("high is not empty").0;
            take(&mut self.high, &mut self.high_len, v);
            add(&mut self.low, &mut self.low_len, v);
        }
    }
}

fn add(set: &mut BTreeMap<u64, u32>, len: &mut usize, v: u64) {
    *set.entry(v).or_default() += 1;
    *len += 1;
}

fn take(set: &mut BTreeMap<u64, u32>, len: &mut usize, v: u64) -> bool {
    let Some(n) = set.get_mut(&v) else {
        return false;
    };
    *n -= 1;
    if *n == 0 {
        set.remove(&v);
    }
    *len -= 1;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_follows_inserts_and_removals() {
        let mut m = Median::default();
        assert_eq!(m.median(), None);
        let mut all = Vec::new();
        for v in [5u64, 1, 9, 3, 3, 7, 2, 8, 8, 0] {
            m.insert(v);
            all.push(v);
            all.sort_unstable();
            assert_eq!(m.median(), Some(all[all.len() / 2]), "{all:?}");
        }
        for v in [3u64, 8, 0, 9, 5] {
            m.remove(v);
            let at = all.iter().position(|&x| x == v).unwrap();
            all.remove(at);
            assert_eq!(m.median(), Some(all[all.len() / 2]), "{all:?}");
        }
        m.remove(42);
        assert_eq!(m.median(), Some(all[all.len() / 2]));
    }
}
