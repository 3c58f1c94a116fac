//! Iterative jobs, as HiBench runs them: k-means, a chain of MapReduce
//! jobs whose centres pass from one iteration to the next as a side
//! input; PageRank, a build job and two jobs per iteration, the dangling
//! pages' rank passed from one job to the next as a counter.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sluice_formats::input::RecordFormat;
use sluice_jobs::kmeans::{self, Centres};
use sluice_jobs::pagerank;

use crate::choices::KmeansInit;
use crate::flags::{params, JobFlags};
use crate::registry::{BuildContext, Built, JobKind, Plan, Registry};
use crate::{JobRequest, RequestError, StageRef};

pub(crate) fn register(r: &mut Registry) {
    r.register("kmeans", Kmeans).register("pagerank", Pagerank);
}

/// A step of k-means, each a job of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KmeansStage {
    /// Choose the initial centres (one for k-means||).
    Init,
    /// A round of k-means|| from the candidates `centres`.
    ParallelRound,
    /// k-means||'s last pass: `clusters` centres from the candidates
    /// `centres`.
    ParallelPick,
    /// One iteration from `centres`.
    Iterate,
    /// Write the points in binary for the iterations (a point of `dims`
    /// coordinates a record).
    Points,
    /// Copy the centres of its input (the last iteration that ran).
    Copy,
    /// Write each point with its nearest centre from `centres`.
    Assign,
}

/// Parameters of `kmeans`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KmeansParams {
    /// Clusters (k).
    pub clusters: usize,
    /// Iterations after the initial centres (HiBench runs 5).
    pub iterations: u32,
    /// Seed of the initial centres' choice.
    pub seed: u64,
    /// How the initial centres are chosen.
    pub init: KmeansInit,
    /// Rounds of k-means|| (Spark's `initializationSteps`).
    pub init_rounds: u32,
    /// Stop once an iteration moved no centre by this much or more (0:
    /// run every iteration).
    pub tolerance: f64,
    /// Centres the previous iteration moved by the tolerance or more (set
    /// by the chain; 0 skips the iteration).
    pub moved: Option<u64>,
    /// The round of a k-means|| round stage (set by the chain).
    pub round: u32,
    /// Also write each point with its nearest final centre here.
    pub assignments: Option<String>,
    /// One step (set by the chain; a user leaves it out).
    pub stage: Option<KmeansStage>,
    /// The centres a stage reads (set by the chain).
    pub centres: Option<String>,
    /// The points' dimension, from the init job's count (set by the
    /// chain): the points job writes binary points of it, and an iteration
    /// with it reads them.
    pub dims: Option<u64>,
}

impl Default for KmeansParams {
    fn default() -> Self {
        KmeansParams {
            clusters: 0,
            iterations: 5,
            seed: 7,
            init: KmeansInit::Random,
            init_rounds: 2,
            tolerance: 0.0,
            moved: None,
            round: 0,
            assignments: None,
            stage: None,
            centres: None,
            dims: None,
        }
    }
}

struct Kmeans;

impl Kmeans {
    fn params(req: &JobRequest) -> Result<KmeansParams, RequestError> {
        let p: KmeansParams = req.params()?;
        if p.clusters == 0 {
            return Err(RequestError::params(
                "kmeans",
                "needs --clusters K (at least 1)",
            ));
        }
        if !(p.tolerance >= 0.0 && p.tolerance.is_finite()) {
            return Err(RequestError::params(
                "kmeans",
                "--tolerance is a finite number, 0 or more",
            ));
        }
        if p.init == KmeansInit::Parallel && p.init_rounds == 0 {
            return Err(RequestError::params(
                "kmeans",
                "k-means|| needs at least 1 round",
            ));
        }
        Ok(p)
    }

    /// The jobs of a whole run: initial centres (one job, or k-means||'s
    /// first point, rounds and pick), each iteration reading the previous
    /// centres, the last writing the request's output; then the
    /// assignment, if asked. With a tolerance, each iteration after the
    /// first carries the previous one's count of moved centres (the driver
    /// skips it at 0) and a copy job writes the last centres.
    fn chain(req: &JobRequest, p: &KmeansParams) -> Result<Vec<JobRequest>, RequestError> {
        let stage = |stage, centres: Option<String>, output: &str| {
            let params = KmeansParams {
                stage: Some(stage),
                centres,
                assignments: None,
                ..p.clone()
            };
            JobRequest {
                params: serde_json::to_value(params).expect("serializable"),
                output: output.to_owned(),
                ..req.clone()
            }
        };
        let iterations = p.iterations as usize;
        let stop_early = p.tolerance > 0.0 && iterations > 1;
        let out_at = |i: usize| {
            if i == iterations && !stop_early {
                req.output.as_str()
            } else {
                ""
            }
        };
        let mut jobs = Vec::new();
        match p.init {
            KmeansInit::Random => jobs.push(stage(KmeansStage::Init, None, out_at(0))),
            KmeansInit::Parallel => {
                let mut first = stage(KmeansStage::Init, None, "");
                first.params["clusters"] = 1.into();
                jobs.push(first);
                for round in 1..=p.init_rounds {
                    let prev = StageRef::output(jobs.len() - 1).to_string();
                    let mut job = stage(KmeansStage::ParallelRound, Some(prev), "");
                    job.params["round"] = round.into();
                    jobs.push(job);
                }
                let prev = StageRef::output(jobs.len() - 1).to_string();
                jobs.push(stage(KmeansStage::ParallelPick, Some(prev), out_at(0)));
            }
        }
        // The init job (always the first) counts the centres' dimension.
        let dims = StageRef::counter(0, kmeans::COUNTER_GROUP, kmeans::DIMS)?.to_string();
        let mut prev = jobs.len() - 1;
        let points = jobs.len();
        if iterations > 0 {
            let mut job = stage(KmeansStage::Points, None, "");
            job.params["dims"] = dims.clone().into();
            jobs.push(job);
        }
        for i in 1..=iterations {
            let mut job = JobRequest {
                input: StageRef::output(points).to_string(),
                ..stage(
                    KmeansStage::Iterate,
                    Some(StageRef::output(prev).to_string()),
                    out_at(i),
                )
            };
            job.params["dims"] = dims.clone().into();
            if stop_early && i > 1 {
                let moved = StageRef::counter(prev, kmeans::COUNTER_GROUP, kmeans::MOVED)?;
                job.params["moved"] = moved.to_string().into();
            }
            jobs.push(job);
            prev = jobs.len() - 1;
        }
        if stop_early {
            let last = jobs.len() - 1;
            jobs.push(JobRequest {
                input: StageRef::output(last).to_string(),
                ..stage(KmeansStage::Copy, None, &req.output)
            });
        }
        if let Some(a) = &p.assignments {
            jobs.push(stage(KmeansStage::Assign, Some(req.output.clone()), a));
        }
        Ok(jobs)
    }

    /// The binary points' dimension of a stage that reads or writes them.
    fn dims(p: &KmeansParams) -> Result<usize, RequestError> {
        match p.dims {
            Some(d) if d > 0 => Ok(d as usize),
            _ => Err(RequestError::params(
                "kmeans",
                "the points' dimension is unknown (the init job counted none)",
            )),
        }
    }

    /// The centres a stage reads, from its side input's files (none when
    /// the job is only validated).
    fn centres(ctx: &BuildContext<'_>) -> Result<Arc<Centres>, RequestError> {
        let bad = |e: String| RequestError::params("kmeans", format!("the centres: {e}"));
        match ctx.side {
            None => Ok(Arc::new(Centres {
                dims: 0,
                points: vec![Vec::new()],
            })),
            Some([files]) => Centres::read(files).map(Arc::new).map_err(bad),
            Some(_) => Err(bad("one side input expected".into())),
        }
    }
}

impl JobKind for Kmeans {
    fn describe(&self) -> &str {
        "k-means clustering (HiBench): initial centres, then one job per iteration"
    }

    fn params_from_flags(&self, f: &JobFlags) -> Result<serde_json::Value, RequestError> {
        params(KmeansParams {
            clusters: f.clusters.unwrap_or(0),
            iterations: f.iterations,
            seed: f.seed,
            init: f.init,
            init_rounds: f.init_rounds,
            tolerance: f.tolerance,
            assignments: f.assignments.clone(),
            ..KmeansParams::default()
        })
    }

    fn plan(&self, req: &JobRequest) -> Result<Plan, RequestError> {
        let p = Self::params(req)?;
        Ok(match p.stage {
            None => Plan::Chain(Self::chain(req, &p)?),
            Some(_) => Plan::Single,
        })
    }

    fn side_inputs(&self, req: &JobRequest) -> Result<Vec<String>, RequestError> {
        let p = Self::params(req)?;
        use KmeansStage::*;
        Ok(match (p.stage, p.centres) {
            (Some(Iterate | Assign | ParallelRound | ParallelPick), Some(c)) => vec![c],
            _ => Vec::new(),
        })
    }

    fn skip(&self, req: &JobRequest) -> Result<bool, RequestError> {
        let p = Self::params(req)?;
        Ok(p.stage == Some(KmeansStage::Iterate) && p.moved == Some(0))
    }

    fn build(&self, req: &JobRequest, ctx: &BuildContext<'_>) -> Result<Built, RequestError> {
        let p = Self::params(req)?;
        let one = |spec| Built {
            reducers: Some(1),
            ..Built::lines(spec)
        };
        match p.stage {
            None => Err(RequestError::params(
                "kmeans",
                "k-means is a chain of jobs: run it through a driver, which chains them",
            )),
            Some(KmeansStage::Init) => Ok(one(kmeans::kmeans_init(p.clusters, p.seed))),
            Some(KmeansStage::ParallelRound) => Ok(one(kmeans::kmeans_parallel_round(
                Self::centres(ctx)?,
                2.0 * p.clusters as f64,
                p.seed,
                p.round,
            ))),
            Some(KmeansStage::ParallelPick) => Ok(one(kmeans::kmeans_parallel_pick(
                Self::centres(ctx)?,
                p.clusters,
                p.seed,
            ))),
            Some(KmeansStage::Points) => Ok(Built::lines(kmeans::kmeans_points(Self::dims(&p)?))),
            Some(KmeansStage::Iterate) => {
                let spec =
                    kmeans::kmeans_iterate(Self::centres(ctx)?, p.tolerance, p.dims.is_some());
                Ok(match p.dims {
                    None => one(spec),
                    Some(_) => Built {
                        format: RecordFormat::Fixed(8 * Self::dims(&p)?),
                        ..one(spec)
                    },
                })
            }
            Some(KmeansStage::Copy) => Ok(Built::lines(kmeans::kmeans_copy())),
            Some(KmeansStage::Assign) => {
                Ok(Built::lines(kmeans::kmeans_assign(Self::centres(ctx)?)))
            }
        }
    }
}

/// A step of PageRank, each a job of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PagerankStage {
    /// Each page's state from the edges.
    Build,
    /// Ranks split over out-links, summed per page.
    Contribute,
    /// The new ranks.
    Rank,
}

/// Parameters of `pagerank`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PagerankParams {
    /// Iterations (at least 1).
    pub iterations: u32,
    /// The damping factor.
    pub damping: f64,
    /// One step (set by the chain; a user leaves it out).
    pub stage: Option<PagerankStage>,
    /// Pages (set by the chain, from the build job's count).
    pub pages: Option<u64>,
    /// The dangling pages' rank, fixed point (set by the chain).
    pub dangling: Option<u64>,
    /// The rank job of the last iteration (writes `page TAB rank`).
    pub last: bool,
}

impl Default for PagerankParams {
    fn default() -> Self {
        PagerankParams {
            iterations: 2,
            damping: 0.85,
            stage: None,
            pages: None,
            dangling: None,
            last: false,
        }
    }
}

struct Pagerank;

impl Pagerank {
    fn params(req: &JobRequest) -> Result<PagerankParams, RequestError> {
        let p: PagerankParams = req.params()?;
        if p.stage.is_none() && p.iterations == 0 {
            return Err(RequestError::params(
                "pagerank",
                "needs --iterations of at least 1",
            ));
        }
        if !(0.0..1.0).contains(&p.damping) {
            return Err(RequestError::params("pagerank", "--damping is in [0, 1)"));
        }
        Ok(p)
    }

    /// The jobs of a whole run: build, then contribute and rank per
    /// iteration; `@N:GROUP.NAME` parameters ([`StageRef`]) are stage N's
    /// counters.
    fn chain(req: &JobRequest, p: &PagerankParams) -> Result<Vec<JobRequest>, RequestError> {
        let pages = StageRef::counter(0, pagerank::COUNTER_GROUP, pagerank::PAGES)?.to_string();
        let job = |params: serde_json::Value, input: String, output: &str| JobRequest {
            params,
            input,
            output: output.to_owned(),
            ..req.clone()
        };
        let mut jobs = vec![job(
            serde_json::json!({"stage": "build", "damping": p.damping, "iterations": p.iterations}),
            req.input.clone(),
            "",
        )];
        for i in 0..p.iterations {
            let last = i + 1 == p.iterations;
            // The index the contribute job gets; it reads the job before.
            let contribute = jobs.len();
            jobs.push(job(
                serde_json::json!({"stage": "contribute", "pages": pages, "damping": p.damping}),
                StageRef::output(contribute - 1).to_string(),
                "",
            ));
            let dangling =
                StageRef::counter(contribute, pagerank::COUNTER_GROUP, pagerank::DANGLING)?
                    .to_string();
            jobs.push(job(
                serde_json::json!({"stage": "rank", "pages": pages, "damping": p.damping,
                                   "dangling": dangling, "last": last}),
                StageRef::output(contribute).to_string(),
                if last { &req.output } else { "" },
            ));
        }
        Ok(jobs)
    }
}

impl JobKind for Pagerank {
    fn describe(&self) -> &str {
        "PageRank (HiBench): build, then a contribute and a rank job per iteration"
    }

    fn params_from_flags(&self, f: &JobFlags) -> Result<serde_json::Value, RequestError> {
        params(PagerankParams {
            iterations: f.iterations,
            damping: f.damping,
            ..PagerankParams::default()
        })
    }

    fn plan(&self, req: &JobRequest) -> Result<Plan, RequestError> {
        let p = Self::params(req)?;
        Ok(match p.stage {
            None => Plan::Chain(Self::chain(req, &p)?),
            Some(_) => Plan::Single,
        })
    }

    fn build(&self, req: &JobRequest, _: &BuildContext<'_>) -> Result<Built, RequestError> {
        let p = Self::params(req)?;
        let pages = || {
            p.pages
                .filter(|&n| n > 0)
                .ok_or_else(|| RequestError::params("pagerank", "a step needs its page count"))
        };
        match p.stage {
            None => Err(RequestError::params(
                "pagerank",
                "PageRank is a chain of jobs: run it through a driver, which chains them",
            )),
            Some(PagerankStage::Build) => Ok(Built::lines(pagerank::pagerank_build())),
            Some(PagerankStage::Contribute) => {
                Ok(Built::lines(pagerank::pagerank_contribute(pages()?)))
            }
            Some(PagerankStage::Rank) => Ok(Built::lines(pagerank::pagerank_rank(
                pages()?,
                p.damping,
                p.dangling.unwrap_or(0),
                p.last,
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stage as the driver runs it, its `@0:KMEANS.DIMS` resolved.
    fn resolved(job: &JobRequest) -> JobRequest {
        let mut job = job.clone();
        if job.params["dims"].is_string() {
            job.params["dims"] = 20.into();
        }
        job
    }

    #[test]
    fn a_run_is_init_then_points_then_iterations_reading_the_last_centres() {
        let p = KmeansParams {
            clusters: 3,
            iterations: 2,
            assignments: Some("assigned".into()),
            ..KmeansParams::default()
        };
        let req = JobRequest::new("kmeans", &p, "points", "centres");
        let Plan::Chain(jobs) = Kmeans.plan(&req).unwrap() else {
            panic!("not a chain");
        };
        let steps: Vec<(Option<KmeansStage>, Option<String>, String, String)> = jobs
            .iter()
            .map(|j| {
                let q: KmeansParams = resolved(j).params().unwrap();
                (q.stage, q.centres, j.input.clone(), j.output.clone())
            })
            .collect();
        use KmeansStage::*;
        let s = |x: &str| x.to_string();
        assert_eq!(
            steps,
            vec![
                (Some(Init), None, s("points"), s("")),
                (Some(Points), None, s("points"), s("")),
                (Some(Iterate), Some(s("@0")), s("@1"), s("")),
                (Some(Iterate), Some(s("@2")), s("@1"), s("centres")),
                (Some(Assign), Some(s("centres")), s("points"), s("assigned")),
            ]
        );
        // The points job and the iterations take the init's count of the
        // dimension; an iteration with it reads binary points.
        for j in &jobs[1..4] {
            assert_eq!(j.params["dims"], "@0:KMEANS.DIMS");
        }
        assert_eq!(Kmeans.side_inputs(&resolved(&jobs[3])).unwrap(), ["@2"]);
        let ctx = BuildContext::default();
        let built = Kmeans.build(&resolved(&jobs[2]), &ctx).unwrap();
        assert_eq!(built.format, RecordFormat::Fixed(160));
        let mut unknown = resolved(&jobs[1]);
        unknown.params["dims"] = 0.into();
        assert!(Kmeans
            .build(&unknown, &ctx)
            .unwrap_err()
            .to_string()
            .contains("dimension is unknown"));
        let none = JobRequest::new("kmeans", &KmeansParams::default(), "p", "c");
        assert!(Kmeans
            .plan(&none)
            .unwrap_err()
            .to_string()
            .contains("--clusters"));
    }

    #[test]
    fn parallel_init_and_a_tolerance_add_their_stages() {
        let p = KmeansParams {
            clusters: 3,
            iterations: 3,
            init: KmeansInit::Parallel,
            tolerance: 0.5,
            ..KmeansParams::default()
        };
        let req = JobRequest::new("kmeans", &p, "points", "centres");
        let Plan::Chain(jobs) = Kmeans.plan(&req).unwrap() else {
            panic!("not a chain");
        };
        let steps: Vec<String> = jobs
            .iter()
            .map(|j| {
                let q = &j.params;
                format!(
                    "{} {} {} {} {}",
                    q["stage"].as_str().unwrap(),
                    q["clusters"],
                    q["centres"].as_str().unwrap_or("-"),
                    q["moved"].as_str().unwrap_or("-"),
                    if j.output.is_empty() {
                        "temp"
                    } else {
                        &j.output
                    },
                )
            })
            .collect();
        assert_eq!(
            steps,
            [
                "init 1 - - temp",
                "parallel-round 3 @0 - temp",
                "parallel-round 3 @1 - temp",
                "parallel-pick 3 @2 - temp",
                "points 3 - - temp",
                "iterate 3 @3 - temp",
                "iterate 3 @5 @5:KMEANS.MOVED temp",
                "iterate 3 @6 @6:KMEANS.MOVED temp",
                "copy 3 - - centres",
            ]
        );
        assert_eq!(jobs[8].input, "@7");
        assert_eq!(jobs[1].params["round"], 1);
        assert_eq!(jobs[2].params["round"], 2);
        // The driver skips an iteration once the one before moved nothing.
        let mut it = resolved(&jobs[6]);
        it.params["moved"] = 0.into();
        assert!(Kmeans.skip(&it).unwrap());
        it.params["moved"] = 2.into();
        assert!(!Kmeans.skip(&it).unwrap());
        assert!(!Kmeans.skip(&resolved(&jobs[5])).unwrap());
    }
}
