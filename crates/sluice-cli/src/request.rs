//! `sluice run` flags as a job request: the one place flags become a job.
//! The job's own flags become its parameters by its kind
//! ([`sluice_request::Registry::params_from_flags`]).

use anyhow::Context;
use sluice_request::{EngineSettings, JobRequest};

use crate::RunArgs;

impl RunArgs {
    /// The request these flags describe.
    pub(crate) fn request(&self) -> anyhow::Result<JobRequest> {
        let jobs = crate::jobs();
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
            bad_records: self.bad_records,
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
}
