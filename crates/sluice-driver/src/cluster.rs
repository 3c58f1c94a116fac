//! Jobs on a cluster.

use std::sync::Arc;
use std::time::Duration;

use sluice_client::{BlockingClient, Patience};
use sluice_proto::auth::Secret;
use sluice_proto::ids::JobId;
use sluice_proto::proto::JobStatus;
use sluice_proto::report::ClusterReport;
use sluice_request::{JobRequest, Plan, Sampling};

use crate::error::DriverError;

/// Bytes read from the head of each block to sample a data set.
const SAMPLE_HEAD: u64 = 256 << 10;

/// Sees a running cluster job's status about every 30 seconds and at
/// every change (progress lines).
pub trait StatusWatch: Send + Sync {
    /// The job's latest status.
    fn status(&self, s: &JobStatus);
}

/// A cluster as a target.
pub struct ClusterTarget {
    /// The coordinator's address.
    pub coordinator: String,
    /// The cluster's shared secret.
    pub secret: Secret,
    /// Replicas of each block of the job's answer (temporaries keep one).
    pub replication: u32,
    /// Who sees the job's progress.
    pub watch: Option<Arc<dyn StatusWatch>>,
    /// How long to wait for a coordinator that does not answer (one
    /// restarting), and whom to tell.
    pub patience: Patience,
}

impl std::fmt::Debug for ClusterTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterTarget")
            .field("coordinator", &self.coordinator)
            .finish_non_exhaustive()
    }
}

/// Names of `n` temporary data sets.
pub(crate) fn temp_outputs(n: usize) -> Vec<String> {
    let tag = format!("{}-{}", std::process::id(), sluice_proto::now_ms());
    (0..n).map(|i| format!("_stage-{tag}-{i}")).collect()
}

impl ClusterTarget {
    fn connect(&self) -> Result<BlockingClient, DriverError> {
        Ok(BlockingClient::connect_patient(
            &self.coordinator,
            self.secret.clone(),
            self.patience.clone(),
        )?)
    }

    /// Submits one job of a plan and waits for it. An output in an
    /// external store (`hdfs://`, `s3://`) is written to a temporary data
    /// set, then committed to the store as a local job's is, and the
    /// temporary removed.
    pub(crate) fn run(&self, req: JobRequest, plan: Plan) -> Result<ClusterReport, DriverError> {
        if !sluice_storage::is_remote(&req.output) {
            return self.run_to_dataset(req, plan);
        }
        let url = req.output.clone();
        let overwrite = req.overwrite;
        sluice_storage::check_output(&url, overwrite)?;
        let temp = format!("{}-out", temp_outputs(1).remove(0));
        let mut staged = JobRequest {
            output: temp.clone(),
            overwrite: false,
            ..req
        };
        crate::props::unsynced(&mut staged);
        let result = self.run_to_dataset(staged, plan).and_then(|mut report| {
            get_to_store(&self.connect()?, &temp, &url, overwrite)?;
            report.output = url;
            Ok(report)
        });
        self.remove_temps(&[temp]);
        result
    }

    /// Submits one job whose output is a data set and waits for it.
    fn run_to_dataset(
        &self,
        mut req: JobRequest,
        plan: Plan,
    ) -> Result<ClusterReport, DriverError> {
        let client = self.connect()?;
        if let Plan::Sample(s) = plan {
            req.split_points = Some(sample(&client, &req, s)?);
        }
        // Temporaries of a chain are overwritten and kept once.
        let replication = if req.output.starts_with("_stage-") {
            1
        } else {
            self.replication
        };
        let id = client.submit(&req, replication)?;
        let status = self.wait(&client, id)?;
        match status.state.as_str() {
            "succeeded" => serde_json_report(&status),
            "killed" => Err(DriverError::Killed {
                id,
                reason: status.error,
            }),
            _ => Err(DriverError::Failed {
                id,
                reason: status.error,
            }),
        }
    }

    /// Waits for job `id` to end. A coordinator that does not answer is
    /// waited for as the target's patience says (the client's calls
    /// wait): a restarted one knows the job by the same id.
    fn wait(&self, client: &BlockingClient, id: JobId) -> Result<JobStatus, DriverError> {
        loop {
            let s = client.wait(id, Duration::from_secs(30))?;
            if s.state != "running" {
                return Ok(s);
            }
            if let Some(w) = &self.watch {
                w.status(&s);
            }
        }
    }

    /// Removes temporary data sets, whatever is left of them.
    pub(crate) fn remove_temps(&self, temps: &[String]) {
        let Ok(client) = self.connect() else {
            return;
        };
        for t in temps {
            let _ = client.remove(t);
        }
    }
}

/// Copies data set `name` to `url` in an external store: its files
/// staged on this host, then committed as a job's output is (HDFS: one
/// rename; S3: a manifest written last). Refused if the path holds an
/// output, unless `overwrite`. Returns the bytes copied and the files
/// committed.
pub fn get_to_store(
    c: &BlockingClient,
    name: &str,
    url: &str,
    overwrite: bool,
) -> Result<(u64, usize), DriverError> {
    sluice_storage::check_output(url, overwrite)?;
    let staging = tempfile::Builder::new()
        .prefix(".sluice-get-")
        .tempdir()
        .map_err(DriverError::io("creating a staging directory"))?;
    let got = staging.path().join("got");
    let n = c.get(name, &got)?;
    let dir = if got.is_dir() {
        got
    } else {
        // A one-file data set comes back as a file: committed under the
        // data set's name.
        let dir = staging.path().join("dir");
        std::fs::create_dir(&dir).map_err(DriverError::io("creating a staging directory"))?;
        std::fs::rename(&got, dir.join(name)).map_err(DriverError::io("staging a file"))?;
        dir
    };
    let m = sluice_storage::commit(&dir, url, overwrite)?;
    Ok((n, m.files.len()))
}

/// Split points from the first records of every block of the input,
/// sampled as the local driver samples files.
fn sample(
    client: &BlockingClient,
    req: &JobRequest,
    s: Sampling,
) -> Result<Vec<sluice_request::Key>, DriverError> {
    // An input in an external store is sampled from the store, as a
    // local job samples it.
    if sluice_storage::is_remote(&req.input) {
        return crate::sample::split_points(&req.input, s, req);
    }
    // `--input a,b` names several data sets: every block of each.
    let mut heads = Vec::new();
    for name in req.input.split(',') {
        heads.extend(client.block_heads(name, SAMPLE_HEAD)?);
    }
    let dir = tempfile::tempdir().map_err(DriverError::io("creating a sample directory"))?;
    for (i, h) in heads.iter().enumerate() {
        // Whole records only: a head cut short ends at its last newline
        // (lines and TeraSort's CRLF-terminated records alike).
        let end = if h.len() as u64 == SAMPLE_HEAD {
            h.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
        } else {
            h.len()
        };
        let f = dir.path().join(format!("head-{i:05}"));
        std::fs::write(&f, &h[..end])
            .map_err(DriverError::io(format!("writing {}", f.display())))?;
    }
    crate::sample::split_points(&dir.path().display().to_string(), s, req)
}

fn serde_json_report(s: &JobStatus) -> Result<ClusterReport, DriverError> {
    serde_json::from_str(&s.report_json)
        .map_err(|e| DriverError::Plan(format!("the coordinator's report is unreadable: {e}")))
}
