//! Iterative jobs, as HiBench runs them: k-means, a chain of MapReduce
//! jobs whose centres pass from one iteration to the next as a side
//! input; PageRank, a build job and two jobs per iteration, the dangling
//! pages' rank passed from one job to the next as a counter.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sluice_jobs::kmeans::{self, Centres};
use sluice_jobs::pagerank;

use crate::registry::{BuildContext, Built, JobKind, Plan, Registry};
use crate::{JobRequest, RequestError};

pub(crate) fn register(r: &mut Registry) {
    r.register("kmeans", Kmeans).register("pagerank", Pagerank);
}

/// A step of k-means, each a job of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KmeansStage {
    /// Choose the initial centres.
    Init,
    /// One iteration from `centres`.
    Iterate,
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
    /// Also write each point with its nearest final centre here.
    pub assignments: Option<String>,
    /// One step (set by the chain; a user leaves it out).
    pub stage: Option<KmeansStage>,
    /// The centres a stage reads (set by the chain).
    pub centres: Option<String>,
}

impl Default for KmeansParams {
    fn default() -> Self {
        KmeansParams {
            clusters: 0,
            iterations: 5,
            seed: 7,
            assignments: None,
            stage: None,
            centres: None,
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
        Ok(p)
    }

    /// The jobs of a whole run: initial centres, each iteration reading
    /// the previous centres, the last writing the request's output; then
    /// the assignment, if asked.
    fn chain(req: &JobRequest, p: &KmeansParams) -> Vec<JobRequest> {
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
        let last = p.iterations as usize;
        let mut jobs = vec![stage(
            KmeansStage::Init,
            None,
            if last == 0 { &req.output } else { "" },
        )];
        for i in 1..=last {
            let out = if i == last { req.output.as_str() } else { "" };
            jobs.push(stage(
                KmeansStage::Iterate,
                Some(format!("@{}", i - 1)),
                out,
            ));
        }
        if let Some(a) = &p.assignments {
            jobs.push(stage(KmeansStage::Assign, Some(req.output.clone()), a));
        }
        jobs
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

    fn plan(&self, req: &JobRequest) -> Result<Plan, RequestError> {
        let p = Self::params(req)?;
        Ok(match p.stage {
            None => Plan::Chain(Self::chain(req, &p)),
            Some(_) => Plan::Single,
        })
    }

    fn side_inputs(&self, req: &JobRequest) -> Result<Vec<String>, RequestError> {
        let p = Self::params(req)?;
        Ok(match (p.stage, p.centres) {
            (Some(KmeansStage::Iterate | KmeansStage::Assign), Some(c)) => vec![c],
            _ => Vec::new(),
        })
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
            Some(KmeansStage::Iterate) => Ok(one(kmeans::kmeans_iterate(Self::centres(ctx)?))),
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
    /// iteration; `@N:COUNTER` parameters are stage N's counters.
    fn chain(req: &JobRequest, p: &PagerankParams) -> Vec<JobRequest> {
        let pages = format!("@0:{}.{}", pagerank::COUNTER_GROUP, pagerank::PAGES);
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
                format!("@{}", contribute - 1),
                "",
            ));
            let dangling = format!(
                "@{contribute}:{}.{}",
                pagerank::COUNTER_GROUP,
                pagerank::DANGLING
            );
            jobs.push(job(
                serde_json::json!({"stage": "rank", "pages": pages, "damping": p.damping,
                                   "dangling": dangling, "last": last}),
                format!("@{contribute}"),
                if last { &req.output } else { "" },
            ));
        }
        jobs
    }
}

impl JobKind for Pagerank {
    fn describe(&self) -> &str {
        "PageRank (HiBench): build, then a contribute and a rank job per iteration"
    }

    fn plan(&self, req: &JobRequest) -> Result<Plan, RequestError> {
        let p = Self::params(req)?;
        Ok(match p.stage {
            None => Plan::Chain(Self::chain(req, &p)),
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

    #[test]
    fn a_run_is_init_then_iterations_reading_the_last_centres() {
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
        let steps: Vec<(Option<KmeansStage>, Option<String>, String)> = jobs
            .iter()
            .map(|j| {
                let q: KmeansParams = j.params().unwrap();
                (q.stage, q.centres, j.output.clone())
            })
            .collect();
        use KmeansStage::*;
        assert_eq!(
            steps,
            vec![
                (Some(Init), None, String::new()),
                (Some(Iterate), Some("@0".into()), String::new()),
                (Some(Iterate), Some("@1".into()), "centres".into()),
                (Some(Assign), Some("centres".into()), "assigned".into()),
            ]
        );
        assert_eq!(Kmeans.side_inputs(&jobs[2]).unwrap(), ["@1"]);
        let none = JobRequest::new("kmeans", &KmeansParams::default(), "p", "c");
        assert!(Kmeans
            .plan(&none)
            .unwrap_err()
            .to_string()
            .contains("--clusters"));
    }
}
