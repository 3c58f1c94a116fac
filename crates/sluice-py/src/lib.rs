//! `sluice._sluice`, the native module of the `sluice` Python package:
//! jobs of Python functions on the local engine, Sluice's built-in jobs
//! locally and on a cluster, data generation, and the codec of Python
//! keys and values. The package's Python code (`python/sluice`) is the
//! interface users see; this module is its engine room.
// pyo3's `#[pymodule]` and `#[pyfunction]` expand to the C-API glue of a
// CPython extension, which is unsafe code by nature; nothing in this
// crate's own source is `unsafe`.
#![allow(unsafe_code)]

mod child;
mod codec;
mod job;
mod procs;

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use sluice_driver::{JobReport, Target};
use sluice_formats::input::Codec;
use sluice_formats::rows::Projection;
use sluice_request::{BuildContext, Built, JobKind, JobRequest, Registry, RequestError};
use sluice_tools::conn::Conn;

use crate::job::PyJob;

create_exception!(
    _sluice,
    JobFailed,
    PyRuntimeError,
    "A Sluice job failed; the message says where and why."
);

/// The reports of a driver run as one JSON array.
fn reports_json(reports: &[JobReport]) -> String {
    let items: Vec<String> = reports.iter().map(JobReport::to_json).collect();
    format!("[{}]", items.join(",\n"))
}

fn request(json: &str) -> PyResult<JobRequest> {
    serde_json::from_str(json).map_err(|e| PyValueError::new_err(format!("bad job request: {e}")))
}

/// Where a cluster is and how to reach it: a coordinator address (or
/// several, `A,B`: the active one is followed) or `cluster up`
/// directory, the secret, and the TLS files (`tls_dir`: `ca.pem`,
/// `client.pem`, `client.key`; by default the cluster directory's
/// `tls/`).
struct Where {
    coordinator: Option<String>,
    cluster: Option<PathBuf>,
    secret_file: Option<PathBuf>,
    tls_dir: Option<PathBuf>,
}

/// The process's transport is set for each cluster run, so runs on
/// clusters of different CAs take turns: one connects and runs with its
/// own cluster's certificates while no other changes them.
static CLUSTER_TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `f` on the cluster `at`, with its transport, in its turn.
fn on_cluster<T>(
    py: Python<'_>,
    at: Where,
    replication: u32,
    f: impl FnOnce(&sluice_driver::ClusterTarget) -> T + Send,
) -> PyResult<T>
where
    T: Send,
{
    py.detach(|| {
        let _turn = CLUSTER_TURN.lock().unwrap_or_else(|e| e.into_inner());
        let mut conn = Conn::new(at.coordinator, at.cluster, at.secret_file);
        conn.tls.tls_dir = at.tls_dir;
        let mut target = sluice_tools::conn::target(&conn, 1, true)
            .map_err(|e| JobFailed::new_err(format!("{e:#}")))?;
        target.replication = replication.max(1);
        Ok(f(&target))
    })
}

/// Runs the request `request_json` (a `JobRequest` of job kind `python`)
/// with `runtime`, a `sluice._runtime.Runtime`, on the local engine; the
/// reports as a JSON array. With `job_pickle` (the job pickled) the
/// user's functions run in processes of `python` (`sys.executable`) with
/// `pythonpath` (the caller's `sys.path`), else in this process.
#[pyfunction]
#[pyo3(signature = (runtime, request_json, job_pickle=None, python=None, pythonpath=String::new()))]
fn run_python(
    py: Python<'_>,
    runtime: &Bound<'_, PyAny>,
    request_json: &str,
    job_pickle: Option<Vec<u8>>,
    python: Option<PathBuf>,
    pythonpath: String,
) -> PyResult<String> {
    let req = request(request_json)?;
    let mut job = PyJob::new(runtime)?;
    if let (Some(job_pickle), Some(python)) = (job_pickle, python) {
        job = job.in_processes(procs::Pool::new(procs::Launch {
            python,
            path: pythonpath,
            job: job_pickle,
        }));
    }
    let job = Arc::new(job);
    let mut jobs = Registry::new();
    let rows = input_rows(&req.input)?;
    jobs.register(
        &req.job,
        PythonKind {
            job: job.clone(),
            rows,
        },
    );
    let target = sluice_tools::local::target(None, true);
    let result = py.detach(|| sluice_driver::run(&jobs, &req, Target::Local(&target)));
    match result {
        Ok(reports) => Ok(reports_json(&reports)),
        Err(e) => {
            let err = JobFailed::new_err(e.to_string());
            if let Some(cause) = job.take_error() {
                err.set_cause(py, Some(cause));
            }
            Err(err)
        }
    }
}

/// The kind of a job of Python functions: its records are lines, or, when
/// its input is Parquet or Avro ([`input_rows`]), one JSON object a row,
/// which the mapper gets as a dict.
struct PythonKind {
    job: Arc<PyJob>,
    rows: bool,
}

impl JobKind for PythonKind {
    fn describe(&self) -> &str {
        "a job of Python functions"
    }

    fn build(&self, req: &JobRequest, _: &BuildContext<'_>) -> Result<Built, RequestError> {
        Ok(Built::lines(
            self.job.spec(&req.job, req.reducers.unwrap_or(1)),
        ))
    }

    fn row_columns(&self, _req: &JobRequest) -> Option<Projection> {
        self.rows.then(Projection::streaming)
    }
}

/// Whether the files of `input` (files, directories and globs,
/// comma-separated) are files of rows whose records a Python mapper
/// gets as dicts (Parquet and Avro, known by their first bytes or
/// extension); `ValueError` if some are and others are not. Input that
/// cannot be listed is not rows here: the job's run reports it.
#[pyfunction]
fn input_rows(input: &str) -> PyResult<bool> {
    let Ok(files) = sluice_formats::input::resolve(input) else {
        return Ok(false);
    };
    let rows = |c: Codec| matches!(c, Codec::Parquet | Codec::Avro);
    let n = files.iter().filter(|f| rows(f.codec)).count();
    if n == 0 || n == files.len() {
        return Ok(n > 0);
    }
    let (a, b) = (
        files.iter().find(|f| rows(f.codec)),
        files.iter().find(|f| !rows(f.codec)),
    );
    let name = |f: Option<&sluice_formats::input::InputFile>| {
        f.map(|f| f.path.display().to_string()).unwrap_or_default()
    };
    Err(PyValueError::new_err(format!(
        "the input mixes files of rows ({}) with text ({}): a Python job reads one or the other",
        name(a),
        name(b)
    )))
}

/// Runs the built-in job of `request_json` on the local engine, or on a
/// cluster when a coordinator or cluster directory is given; the reports
/// as a JSON array.
#[pyfunction]
#[pyo3(signature = (request_json, coordinator=None, cluster=None, secret_file=None, replication=1, tls_dir=None))]
fn run_builtin(
    py: Python<'_>,
    request_json: &str,
    coordinator: Option<String>,
    cluster: Option<PathBuf>,
    secret_file: Option<PathBuf>,
    replication: u32,
    tls_dir: Option<PathBuf>,
) -> PyResult<String> {
    let req = request(request_json)?;
    let jobs = Registry::builtin();
    let result = if coordinator.is_some() || cluster.is_some() {
        let at = Where {
            coordinator,
            cluster,
            secret_file,
            tls_dir,
        };
        on_cluster(py, at, replication, |target| {
            sluice_driver::run(&jobs, &req, Target::Cluster(target))
        })?
    } else {
        let target = sluice_tools::local::target(None, true);
        py.detach(|| sluice_driver::run(&jobs, &req, Target::Local(&target)))
    };
    result
        .map(|r| reports_json(&r))
        .map_err(|e| JobFailed::new_err(e.to_string()))
}

/// Names and descriptions of the built-in jobs.
#[pyfunction]
fn builtin_jobs() -> Vec<(String, String)> {
    Registry::builtin()
        .kinds()
        .map(|(n, d)| (n.to_owned(), d.to_owned()))
        .collect()
}

/// Writes `size` bytes of Zipf-distributed words into directory `output`.
#[pyfunction]
#[pyo3(signature = (output, size, seed=1, vocabulary=100_000, exponent=1.0, overwrite=false))]
fn gen_text(
    py: Python<'_>,
    output: PathBuf,
    size: u64,
    seed: u64,
    vocabulary: usize,
    exponent: f64,
    overwrite: bool,
) -> PyResult<()> {
    py.detach(|| {
        sluice_tools::datagen::text(size, seed, output, vocabulary, exponent, None, overwrite)
    })
    .map_err(|e| JobFailed::new_err(format!("{e:#}")))
}

/// The bytes Sluice encodes a Python key or value as.
#[pyfunction]
fn encode<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let mut out = Vec::new();
    codec::Codec::new(obj.py())?.encode(obj, &mut out)?;
    Ok(PyBytes::new(obj.py(), &out))
}

/// The Python object encoded as `data`.
#[pyfunction]
fn decode<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    codec::Codec::new(py)?.decode(py, data)
}

#[pymodule]
fn _sluice(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_python, m)?)?;
    m.add_function(wrap_pyfunction!(run_builtin, m)?)?;
    m.add_function(wrap_pyfunction!(builtin_jobs, m)?)?;
    m.add_function(wrap_pyfunction!(input_rows, m)?)?;
    m.add_function(wrap_pyfunction!(gen_text, m)?)?;
    m.add_function(wrap_pyfunction!(encode, m)?)?;
    m.add_function(wrap_pyfunction!(decode, m)?)?;
    m.add_class::<child::TaskIo>()?;
    m.add("JobFailed", m.py().get_type::<JobFailed>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
