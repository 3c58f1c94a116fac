//! `sluice run` flags as a job request: the one place flags become a job.
//! The job's own flags become its parameters by its kind
//! ([`sluice_request::Registry::params_from_flags`]).

use anyhow::Context;
use sluice_request::{EngineSettings, JobRequest};

use crate::args::RunArgs;

impl RunArgs {
    /// The request these flags describe.
    pub(crate) fn request(&self) -> anyhow::Result<JobRequest> {
        let jobs = crate::args::jobs();
        let params = match self.params.as_deref() {
            Some(json) => serde_json::from_str(json).context("--params is not JSON")?,
            None => jobs.params_from_flags(&self.job, &self.job_flags)?,
        };
        jobs.check_flags(&self.job, &self.job_flags)?;
        Ok(JobRequest {
            job: self.job.clone(),
            params,
            input: self.input.clone(),
            output: self.output.display().to_string(),
            overwrite: self.overwrite,
            reducers: self.reducers,
            memory: self.memory,
            split_points: self.job_flags.split_points()?,
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
            sort_buffer: self.sort_buffer,
            bad_records: self.bad_records,
            spill_dir: self.spill_dir.clone(),
            input_format: self.job_flags.input_format,
            output_format: self.job_flags.output_format,
            column: self.job_flags.column.clone(),
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(args: &str) -> anyhow::Result<JobRequest> {
        let args: Vec<String> = args.split_whitespace().map(str::to_owned).collect();
        RunArgs::parse(&args)?.request()
    }

    #[test]
    fn a_jobs_flags_become_its_parameters() {
        let r = request(
            "pavlo-agg-small --input in --output out --grouping sort --group-by dest-url \
             --input-format paged --page-size 4KiB --bad-records skip --split-points 0a",
        )
        .unwrap();
        assert_eq!(
            r.params,
            serde_json::json!({"grouping": "sort", "key_order": null,
                               "paged": {"page_size": 4096}, "group_by": "dest-url"})
        );
        assert_eq!(r.engine.bad_records, sluice_request::BadRecords::Skip);
        assert_eq!(r.split_points, Some(vec![sluice_request::Key(vec![10])]));
        let r = request("kmeans --input i --output o --clusters 4 --init k-means||").unwrap();
        assert_eq!(
            (r.params["clusters"].clone(), r.params["init"].clone()),
            (4.into(), "k-means||".into())
        );
        let r = request("wordcount --input i --output o --params {\"grouping\":\"sort\"}").unwrap();
        assert_eq!(r.params, serde_json::json!({"grouping": "sort"}));
    }

    #[test]
    fn a_flag_its_job_cannot_use_is_refused() {
        let e = request("wordcount --input i --output o --input-format paged").unwrap_err();
        assert!(e.to_string().contains("--input-format paged is for"), "{e}");
        let e = request("sort --input i --output o --key-order fingerprint").unwrap_err();
        assert!(e.to_string().contains("needs --key-order bytewise"), "{e}");
        assert!(request("wordcount --input i --output o --grouping tree").is_err());
    }
}
