//! `sluice run` flags as a job request: the one place flags become a job.

use anyhow::Context;
use sluice_request::{
    AggParams, BadRecords, EngineSettings, GrepParams, JobRequest, JoinParams, Key, OhbParams,
    PagedInput, SelectionParams, UdfParams, WordcountParams,
};

use crate::{
    BadRecordsArg, GroupByArg, GroupingArg, InputFormat, KeyOrderArg, PairTypeArg, RunArgs,
};

impl RunArgs {
    /// The request these flags describe.
    pub(crate) fn request(&self) -> anyhow::Result<JobRequest> {
        let params = match self.params.as_deref() {
            Some(json) => serde_json::from_str(json).context("--params is not JSON")?,
            None => self.builtin_params()?,
        };
        let input_paged = self.input_format == InputFormat::Paged;
        let paged_jobs = ["pavlo-selection", "pavlo-agg-large", "pavlo-agg-small"];
        anyhow::ensure!(
            !input_paged || paged_jobs.contains(&self.job.as_str()),
            "--input-format paged is for pavlo-selection, pavlo-agg-large and pavlo-agg-small"
        );
        Ok(JobRequest {
            job: self.job.clone(),
            params,
            input: self.input.clone(),
            output: self.output.display().to_string(),
            overwrite: self.overwrite,
            reducers: self.reducers,
            memory: self.memory,
            split_points: self.split_points()?,
            engine: self.engine(),
            properties: self.properties()?,
        })
    }

    fn engine(&self) -> EngineSettings {
        EngineSettings {
            threads: self.threads,
            max_record: self.max_record_size,
            split_size: self.split_size,
            combine: !self.no_combine,
            merge_factor: self.merge_factor,
            bad_records: match self.bad_records {
                BadRecordsArg::Fail => BadRecords::Fail,
                BadRecordsArg::Skip => BadRecords::Skip,
            },
            spill_dir: self.spill_dir.clone(),
        }
    }

    /// `-D key=value` pairs.
    fn properties(&self) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
        self.define
            .iter()
            .map(|kv| {
                let (k, v) = kv
                    .split_once('=')
                    .with_context(|| format!("-D {kv}: not key=value"))?;
                Ok((k.to_owned(), v.to_owned()))
            })
            .collect()
    }

    fn split_points(&self) -> anyhow::Result<Option<Vec<Key>>> {
        let Some(hex) = &self.split_points else {
            return Ok(None);
        };
        hex.split(',')
            .filter(|p| !p.is_empty())
            .map(|p| Key::from_hex(p).map_err(|e| anyhow::anyhow!("--split-points: {e}")))
            .collect::<anyhow::Result<Vec<_>>>()
            .map(Some)
    }

    fn key_order(&self) -> Option<sluice_request::KeyOrderName> {
        self.key_order.map(|k| match k {
            KeyOrderArg::Bytewise => sluice_request::KeyOrderName::Bytewise,
            KeyOrderArg::Fingerprint => sluice_request::KeyOrderName::Fingerprint,
        })
    }

    fn grouping(&self) -> sluice_request::GroupingName {
        match self.grouping {
            GroupingArg::Hash => sluice_request::GroupingName::Hash,
            GroupingArg::Sort => sluice_request::GroupingName::Sort,
        }
    }

    fn paged(&self) -> Option<PagedInput> {
        (self.input_format == InputFormat::Paged).then_some(PagedInput {
            page_size: self.page_size,
        })
    }

    /// The typed parameters of a built-in job from its flags; `null` for
    /// a job this binary registered itself (its parameters come from
    /// `--params` and `-D`).
    fn builtin_params(&self) -> anyhow::Result<serde_json::Value> {
        let v = match self.job.as_str() {
            "wordcount" => to_value(WordcountParams {
                grouping: self.grouping(),
                key_order: self.key_order(),
            }),
            "grep" | "pavlo-grep" => to_value(GrepParams {
                pattern: self.pattern.clone(),
            }),
            "sort" | "terasort" => {
                anyhow::ensure!(
                    self.key_order.is_none_or(|k| k == KeyOrderArg::Bytewise),
                    "{} needs --key-order bytewise: its output is a total order",
                    self.job
                );
                serde_json::Value::Null
            }
            "pavlo-selection" => to_value(SelectionParams {
                threshold: self.threshold,
                paged: self.paged(),
            }),
            "pavlo-agg-large" | "pavlo-agg-small" => to_value(AggParams {
                grouping: self.grouping(),
                key_order: self.key_order(),
                paged: self.paged(),
                group_by: match self.group_by {
                    GroupByArg::SourceIp => sluice_request::GroupByName::SourceIp,
                    GroupByArg::DestUrl => sluice_request::GroupByName::DestUrl,
                },
            }),
            "pavlo-udf" => to_value(UdfParams {
                key_order: self.key_order(),
            }),
            "pavlo-join" => to_value(JoinParams {
                rankings: self.rankings.clone(),
                form: match self.join {
                    crate::JoinForm::Fast => sluice_request::JoinForm::Fast,
                    crate::JoinForm::Baseline => sluice_request::JoinForm::Baseline,
                },
                stage: None,
            }),
            "kmeans" => to_value(sluice_request::KmeansParams {
                clusters: self.clusters.unwrap_or(0),
                iterations: self.iterations,
                seed: self.seed,
                init: match self.init {
                    crate::KmeansInitArg::Random => sluice_request::KmeansInit::Random,
                    crate::KmeansInitArg::Parallel => sluice_request::KmeansInit::Parallel,
                },
                init_rounds: self.init_rounds,
                tolerance: self.tolerance,
                assignments: self.assignments.clone(),
                ..Default::default()
            }),
            "pagerank" => to_value(sluice_request::PagerankParams {
                iterations: self.iterations,
                damping: self.damping,
                ..Default::default()
            }),
            "ohb" => to_value(OhbParams {
                pattern: self.pattern.clone().unwrap_or_else(|| "avg".into()),
                pairs_per_map: self.pairs_per_map,
                pair_size: self.pair_size,
                text: self.pair_type == PairTypeArg::Text,
                seed: self.seed,
            }),
            "gen" => {
                let json = self
                    .gen_spec
                    .as_deref()
                    .context("gen needs --gen-spec JSON")?;
                serde_json::from_str(json).context("--gen-spec is not a generator description")?
            }
            _ => serde_json::Value::Null,
        };
        Ok(v)
    }
}

fn to_value(p: impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(p).unwrap_or_default()
}
