//! Which job a free slot is offered to first: the scheduling policy.
//!
//! The coordinator asks the policy for the order of the running jobs each
//! time a worker has a free slot, offers the slot to them in that order
//! (each may decline it, for locality: `sched`), and asks again for the
//! next slot. A policy may leave a job out of the order, so it is not
//! offered the slot at all (a pool at its maximum share).
//!
//! - [`Fifo`]: jobs in submission order, Hadoop's default.
//! - [`Fair`]: Hadoop's Fair Scheduler (Zaharia et al.): jobs in pools;
//!   a pool below its minimum share comes first (the neediest by running
//!   tasks over minimum share), then pools by running tasks over weight;
//!   a pool at its maximum share is skipped. Within a pool, jobs share
//!   fairly (fewest running tasks first) or run in submission order.
//!   Pools are read from a TOML file (see [`Pools::parse`]).

use std::collections::BTreeMap;

use serde::Deserialize;

use sluice_proto::ids::{JobId, TaskKind};

/// The pool of a job that names none.
pub const DEFAULT_POOL: &str = "default";

/// The user property naming a job's pool (`-D sluice.pool=NAME`, or
/// `sluice submit --pool NAME`), as Hadoop's `mapreduce.job.queuename`.
pub const POOL_PROPERTY: &str = "sluice.pool";

/// A running job as a policy sees it, for one kind of slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobView {
    pub id: JobId,
    pub pool: String,
    /// Its running tasks of the slot's kind.
    pub running: usize,
    /// Tasks of that kind it could use now: running plus pending.
    pub demand: usize,
}

/// A scheduling policy.
pub trait Policy: Send + Sync {
    /// `fifo` or `fair`.
    fn name(&self) -> &'static str;

    /// The jobs to offer a free `kind` slot to, in order; `slots` is the
    /// cluster's slots of that kind.
    fn order(&self, jobs: &[JobView], kind: TaskKind, slots: usize) -> Vec<JobId>;

    /// The pools it knows (empty for FIFO).
    fn pools(&self) -> Vec<(String, PoolConfig)> {
        Vec::new()
    }

    /// Slots each pool is short of its minimum share now (bounded by its
    /// demand); empty for FIFO.
    fn deficits(&self, _jobs: &[JobView], _slots: usize) -> BTreeMap<String, usize> {
        BTreeMap::new()
    }

    /// Running tasks each pool holds beyond its share of `slots` by
    /// weight (and beyond its minimum share): what preemption may take.
    fn excesses(&self, _jobs: &[JobView], _slots: usize) -> BTreeMap<String, usize> {
        BTreeMap::new()
    }
}

/// Submission order.
#[derive(Debug, Default)]
pub struct Fifo;

impl Policy for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
    }

    fn order(&self, jobs: &[JobView], _kind: TaskKind, _slots: usize) -> Vec<JobId> {
        let mut ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
        ids.sort();
        ids
    }
}

/// How the jobs of one pool share its slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PoolMode {
    /// Fewest running tasks first.
    #[default]
    Fair,
    /// Submission order.
    Fifo,
}

/// One pool's settings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PoolConfig {
    /// Its weight against other pools above their minimum shares.
    pub weight: f64,
    /// Slots it is given first while it has the demand.
    pub min_share: usize,
    /// The largest fraction of the cluster's slots it may hold (seed 002's
    /// mixes cap each job at 0.25).
    pub max_share: f64,
    /// How its jobs share it.
    pub mode: PoolMode,
    /// The users who may submit to it (`None`: every user; admins
    /// always may).
    pub submit: Option<Vec<String>>,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            weight: 1.0,
            min_share: 0,
            max_share: 1.0,
            mode: PoolMode::Fair,
            submit: None,
        }
    }
}

/// The pools of a fair scheduler, by name; a job in a pool not listed gets
/// one with the defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pools(pub BTreeMap<String, PoolConfig>);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolsFile {
    #[serde(default)]
    pool: BTreeMap<String, PoolConfig>,
}

impl Pools {
    /// Pools from TOML, one table per pool:
    ///
    /// ```toml
    /// [pool.research]
    /// weight = 2.0        # default 1
    /// min_share = 2       # slots of each kind; default 0
    /// max_share = 0.25    # of the cluster's slots; default 1
    /// mode = "fifo"       # or "fair" (default), among its jobs
    /// submit = ["alice"]  # users who may submit to it; default every user
    /// ```
    pub fn parse(text: &str) -> Result<Pools, String> {
        let f: PoolsFile = toml::from_str(text).map_err(|e| e.to_string())?;
        for (name, p) in &f.pool {
            if !(p.weight > 0.0 && p.weight.is_finite()) {
                return Err(format!("pool {name}: weight must be above 0"));
            }
            if !(p.max_share > 0.0 && p.max_share <= 1.0) {
                return Err(format!("pool {name}: max_share must be in (0, 1]"));
            }
        }
        Ok(Pools(f.pool))
    }

    fn get(&self, name: &str) -> PoolConfig {
        self.0.get(name).cloned().unwrap_or_default()
    }
}

/// Hadoop's fair scheduler over [`Pools`].
#[derive(Debug, Default)]
pub struct Fair {
    pub pools: Pools,
}

/// A pool's standing for one kind of slot.
struct Standing<'a> {
    name: &'a str,
    cfg: PoolConfig,
    running: usize,
    demand: usize,
}

impl Standing<'_> {
    /// Below its minimum share (bounded by its demand).
    fn needy(&self) -> bool {
        self.running < self.cfg.min_share.min(self.demand)
    }

    /// How far it is from its minimum share (needy pools) or how much it
    /// holds per unit of weight (the others); lower goes first.
    fn key(&self) -> (bool, f64) {
        if self.needy() {
            let min = self.cfg.min_share.min(self.demand).max(1) as f64;
            (false, self.running as f64 / min)
        } else {
            (true, self.running as f64 / self.cfg.weight)
        }
    }

    /// At its cap: it holds its maximum share of `slots` (at least one).
    fn capped(&self, slots: usize) -> bool {
        let cap = ((self.cfg.max_share * slots as f64).floor() as usize).max(1);
        self.running >= cap
    }
}

impl Policy for Fair {
    fn name(&self) -> &'static str {
        "fair"
    }

    fn order(&self, jobs: &[JobView], _kind: TaskKind, slots: usize) -> Vec<JobId> {
        let mut pools: Vec<Standing<'_>> = self
            .standings(jobs)
            .into_iter()
            .filter(|s| !s.capped(slots))
            .collect();
        pools.sort_by(|a, b| {
            let (ka, kb) = (a.key(), b.key());
            ka.0.cmp(&kb.0)
                .then(ka.1.total_cmp(&kb.1))
                .then(a.name.cmp(b.name))
        });
        pools
            .iter()
            .flat_map(|s| {
                let mut js: Vec<&JobView> = jobs.iter().filter(|j| j.pool == s.name).collect();
                match s.cfg.mode {
                    PoolMode::Fair => js.sort_by_key(|j| (j.running, j.id)),
                    PoolMode::Fifo => js.sort_by_key(|j| j.id),
                }
                js.into_iter().map(|j| j.id)
            })
            .collect()
    }

    fn pools(&self) -> Vec<(String, PoolConfig)> {
        self.pools
            .0
            .iter()
            .map(|(n, c)| (n.clone(), c.clone()))
            .collect()
    }

    fn deficits(&self, jobs: &[JobView], _slots: usize) -> BTreeMap<String, usize> {
        self.standings(jobs)
            .into_iter()
            .filter(Standing::needy)
            .map(|s| {
                let owed = s.cfg.min_share.min(s.demand) - s.running;
                (s.name.to_owned(), owed)
            })
            .collect()
    }

    fn excesses(&self, jobs: &[JobView], slots: usize) -> BTreeMap<String, usize> {
        let standings = self.standings(jobs);
        let weight: f64 = standings
            .iter()
            .filter(|s| s.demand > 0)
            .map(|s| s.cfg.weight)
            .sum();
        standings
            .into_iter()
            .filter_map(|s| {
                let by_weight =
                    (slots as f64 * s.cfg.weight / weight.max(f64::MIN_POSITIVE)).ceil();
                let share = (by_weight as usize).max(s.cfg.min_share);
                (s.running > share).then(|| (s.name.to_owned(), s.running - share))
            })
            .collect()
    }
}

impl Fair {
    /// Each pool's standing, from its jobs.
    fn standings<'a>(&self, jobs: &'a [JobView]) -> Vec<Standing<'a>> {
        let mut by_pool: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for j in jobs {
            let e = by_pool.entry(j.pool.as_str()).or_default();
            e.0 += j.running;
            e.1 += j.demand;
        }
        by_pool
            .into_iter()
            .map(|(name, (running, demand))| Standing {
                name,
                cfg: self.pools.get(name),
                running,
                demand,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::MAP;

    /// Jobs `(id, pool, running, demand)`.
    fn views(jobs: &[(u64, &str, usize, usize)]) -> Vec<JobView> {
        jobs.iter()
            .map(|&(id, pool, running, demand)| JobView {
                id: JobId(id),
                pool: pool.into(),
                running,
                demand,
            })
            .collect()
    }

    /// One case: pools (TOML), jobs, the cluster's slots, and the order
    /// the policy must offer a free slot in.
    fn check(pools: &str, jobs: &[(u64, &str, usize, usize)], slots: usize, want: &[u64]) {
        let fair = Fair {
            pools: Pools::parse(pools).unwrap(),
        };
        let got: Vec<u64> = fair
            .order(&views(jobs), MAP, slots)
            .into_iter()
            .map(|j| j.0)
            .collect();
        assert_eq!(got, want, "pools {pools:?}, jobs {jobs:?}");
    }

    #[test]
    fn fifo_is_submission_order() {
        let got = Fifo.order(
            &views(&[(3, "a", 0, 1), (1, "b", 5, 9), (2, "a", 1, 1)]),
            MAP,
            8,
        );
        assert_eq!(got, [JobId(1), JobId(2), JobId(3)]);
    }

    #[test]
    fn fair_shares_pools_by_weight_and_jobs_by_running_tasks() {
        // Equal weights: the pool with fewer running tasks first.
        check("", &[(1, "a", 3, 9), (2, "b", 1, 9)], 8, &[2, 1]);
        // Weight 3 against 1: 3 running of a is 1 per weight, under b's 2.
        check(
            "[pool.a]\nweight = 3.0",
            &[(1, "a", 3, 9), (2, "b", 2, 9)],
            8,
            &[1, 2],
        );
        // Within a fair pool, the job with fewer running tasks first; in a
        // FIFO pool, the older.
        check("", &[(1, "a", 2, 9), (2, "a", 0, 9)], 8, &[2, 1]);
        check(
            "[pool.a]\nmode = \"fifo\"",
            &[(1, "a", 2, 9), (2, "a", 0, 9)],
            8,
            &[1, 2],
        );
    }

    #[test]
    fn a_pool_below_its_minimum_share_goes_first_while_it_has_demand() {
        let pools = "[pool.a]\nmin_share = 2\n[pool.b]\nweight = 10.0";
        check(pools, &[(1, "a", 1, 9), (2, "b", 0, 9)], 8, &[1, 2]);
        // At its minimum share it is one pool among others again.
        check(pools, &[(1, "a", 2, 9), (2, "b", 0, 9)], 8, &[2, 1]);
        // A minimum share beyond its demand does not count.
        check(pools, &[(1, "a", 1, 1), (2, "b", 0, 9)], 8, &[2, 1]);
    }

    #[test]
    fn a_pool_at_its_maximum_share_is_not_offered_a_slot() {
        let pools = "[pool.a]\nmax_share = 0.25";
        check(pools, &[(1, "a", 2, 9), (2, "b", 5, 9)], 8, &[2]);
        check(pools, &[(1, "a", 1, 9), (2, "b", 5, 9)], 8, &[1, 2]);
        // Every pool may hold one slot, however small its share.
        check(pools, &[(1, "a", 0, 9)], 2, &[1]);
    }

    #[test]
    fn preemption_takes_from_pools_over_their_share_for_pools_under_their_minimum() {
        let fair = Fair {
            pools: Pools::parse("[pool.b]\nmin_share = 3").unwrap(),
        };
        // a holds all 4 slots; b has demand and none: b is owed 3, and a
        // holds 2 beyond its half of the 4 slots by weight.
        let jobs = views(&[(1, "a", 4, 9), (2, "b", 0, 9)]);
        assert_eq!(fair.deficits(&jobs, 4), BTreeMap::from([("b".into(), 3)]));
        assert_eq!(fair.excesses(&jobs, 4), BTreeMap::from([("a".into(), 2)]));
        // With its minimum share met, b is owed nothing.
        let jobs = views(&[(1, "a", 1, 9), (2, "b", 3, 9)]);
        assert!(fair.deficits(&jobs, 4).is_empty());
        // A pool without demand is owed nothing, and shares nothing.
        let jobs = views(&[(1, "a", 4, 9), (2, "b", 0, 0)]);
        assert!(fair.deficits(&jobs, 4).is_empty());
        assert!(fair.excesses(&jobs, 4).is_empty());
        assert!(Fifo.deficits(&jobs, 4).is_empty());
    }

    #[test]
    fn a_bad_pools_file_is_refused_naming_the_pool() {
        let e = Pools::parse("[pool.a]\nweight = 0.0").unwrap_err();
        assert!(e.contains("pool a: weight"), "{e}");
        let e = Pools::parse("[pool.a]\nwieght = 2.0").unwrap_err();
        assert!(e.contains("unknown field `wieght`"), "{e}");
    }
}
