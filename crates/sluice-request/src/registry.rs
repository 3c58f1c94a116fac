//! Job kinds by name, and the engine settings of a request.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use sluice_api::JobSpec;
use sluice_engine::{BadRecordPolicy, EngineConfig};
use sluice_formats::index::KeyType;
use sluice_formats::input::{RecordFormat, Split};
use sluice_formats::parquet_out::OutputColumn;
use sluice_formats::rows::Projection;

use crate::choices::{InputFormat, OutputFormat};
use crate::flags::JobFlags;
use crate::{BadRecords, JobRequest, RequestError};
use sluice_engine::output::OutputFiles;

/// A job's memory budget when the request names none.
pub const DEFAULT_MEMORY: u64 = 1 << 30;

/// What a kind's constructor may see besides the request.
#[derive(Debug, Default, Clone, Copy)]
pub struct BuildContext<'a> {
    /// Local files of each of [`JobKind::side_inputs`], in order; `None`
    /// where the job is only validated (a cluster's coordinator).
    pub side: Option<&'a [Vec<PathBuf>]>,
    /// The planned splits of the input, on the local engine only.
    pub splits: Option<&'a [Split]>,
    /// Whether the job runs on a cluster (its inputs are data sets).
    pub cluster: bool,
}

/// A job made from a request.
pub struct Built {
    /// The job.
    pub spec: JobSpec,
    /// How its input is cut into records.
    pub format: RecordFormat,
    /// A reducer count the job needs whatever the request says (a single
    /// reducer for a top-one answer).
    pub reducers: Option<u32>,
    /// An input other than the request's, with its splits (local runs: a
    /// join that scans its other side).
    pub input: Option<(String, Vec<Split>)>,
}

impl std::fmt::Debug for Built {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Built")
            .field("format", &self.format)
            .field("reducers", &self.reducers)
            .field("input", &self.input.as_ref().map(|(name, _)| name))
            .finish_non_exhaustive()
    }
}

impl Built {
    /// A job that reads lines of the request's input.
    pub fn lines(spec: JobSpec) -> Self {
        Built {
            spec,
            format: RecordFormat::Lines,
            reducers: None,
            input: None,
        }
    }
}

/// How a total-order job samples its input for split points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sampling {
    /// How the input is cut into records.
    pub format: RecordFormat,
    /// Keys are this long prefix of a record (else the whole record).
    pub key_len: Option<usize>,
}

/// Low and high normalized keys of a range, each unbounded when `None`.
pub type KeyRange = (Option<Vec<u8>>, Option<Vec<u8>>);

/// How a request becomes jobs.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// One job, as requested.
    Single,
    /// One job, after the driver has sampled its input and put split
    /// points into the request.
    Sample(Sampling),
    /// Jobs run one after another. A stage's output `""` is a temporary
    /// the driver names (and removes afterwards). An input item, or a
    /// string parameter (a side input), `@N` is stage N's output; a string
    /// parameter `@N:GROUP.NAME` is the value of stage N's counter (both
    /// [`crate::StageRef`]); an input item that starts with `@` and is not
    /// `@N` is an error, a parameter that is not a reference is text. The
    /// stages name the request's output where it goes. A stage its kind
    /// skips ([`JobKind::skip`]) stands for the stage before it.
    Chain(Vec<JobRequest>),
}

/// A kind of job: the constructor of jobs of one name.
pub trait JobKind: Send + Sync {
    /// One line for listings.
    fn describe(&self) -> &str;

    /// The job for `req`.
    fn build(&self, req: &JobRequest, ctx: &BuildContext<'_>) -> Result<Built, RequestError>;

    /// Inputs every task reads whole besides its own split: the small side
    /// of a broadcast join. A cluster copies each to every worker once
    /// per job.
    fn side_inputs(&self, _req: &JobRequest) -> Result<Vec<String>, RequestError> {
        Ok(Vec::new())
    }

    /// How the request is run.
    fn plan(&self, _req: &JobRequest) -> Result<Plan, RequestError> {
        Ok(Plan::Single)
    }

    /// Whether a stage of a chain, its references resolved, is skipped: it
    /// does not run, and its output and counters are its predecessor's (a
    /// loop that has converged passes its last result on). A stage that
    /// may be skipped writes a temporary, and the first never is.
    fn skip(&self, _req: &JobRequest) -> Result<bool, RequestError> {
        Ok(false)
    }

    /// The kind's parameters from the command line's job flags (`null`,
    /// its defaults, unless it reads some), refusing a flag it cannot use.
    fn params_from_flags(&self, _flags: &JobFlags) -> Result<serde_json::Value, RequestError> {
        Ok(serde_json::Value::Null)
    }

    /// The columns a record of its input is made of when the input is a
    /// file of rows (Parquet), joined as the kind's text rows are; `None`:
    /// the request's `column`, else the file's only column.
    fn row_columns(&self, _req: &JobRequest) -> Option<Projection> {
        None
    }

    /// Whether its output values are integers, written as `LongWritable`
    /// in a SequenceFile and as longs in Avro (word count's counts); else
    /// as `Text` and strings.
    fn long_values(&self) -> bool {
        false
    }

    /// The names of its output's key and value where a format names them
    /// (Avro's fields): `key` and `value` unless the kind knows better
    /// (word count's `word` and `count`).
    fn output_names(&self) -> (&'static str, &'static str) {
        ("key", "value")
    }

    /// The typed columns of its output in a file of columns (Parquet):
    /// the key the first, the value the second or, with more, its
    /// `|`-separated fields the rest. `None`: the key and value named as
    /// [`JobKind::output_names`] says, the value an integer if
    /// [`JobKind::long_values`], else text.
    fn output_columns(&self, _req: &JobRequest) -> Option<&'static [OutputColumn]> {
        None
    }

    /// Whether the kind reads paged binary input (`--input-format paged`)
    /// as well as text.
    fn reads_paged(&self) -> bool {
        false
    }

    /// The range of normalized keys the job can match in a range-indexed
    /// input keyed on field `field` of type `key_type`, each end
    /// unbounded when `None`; `None` when the index cannot prune for it.
    fn key_range(&self, _req: &JobRequest, _field: u32, _key_type: KeyType) -> Option<KeyRange> {
        None
    }
}

/// A kind made of a function from the request to a job over lines.
struct FnKind<F> {
    describe: String,
    f: F,
}

impl<F> JobKind for FnKind<F>
where
    F: Fn(&JobRequest) -> Result<JobSpec, RequestError> + Send + Sync,
{
    fn describe(&self) -> &str {
        &self.describe
    }

    fn build(&self, req: &JobRequest, _ctx: &BuildContext<'_>) -> Result<Built, RequestError> {
        (self.f)(req).map(Built::lines)
    }
}

/// Job kinds by name.
#[derive(Clone, Default)]
pub struct Registry {
    kinds: BTreeMap<String, Arc<dyn JobKind>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.kinds.keys()).finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Registers `kind` as `name`, replacing a kind of that name.
    pub fn register(&mut self, name: &str, kind: impl JobKind + 'static) -> &mut Self {
        self.kinds.insert(name.to_owned(), Arc::new(kind));
        self
    }

    /// Registers a job over lines made by `f` from the request.
    pub fn register_fn(
        &mut self,
        name: &str,
        describe: &str,
        f: impl Fn(&JobRequest) -> Result<JobSpec, RequestError> + Send + Sync + 'static,
    ) -> &mut Self {
        let describe = describe.to_owned();
        self.register(name, FnKind { describe, f })
    }

    /// The kind named `name`.
    pub fn get(&self, name: &str) -> Result<&dyn JobKind, RequestError> {
        self.kinds
            .get(name)
            .map(|k| k.as_ref())
            .ok_or_else(|| RequestError::UnknownJob {
                name: name.to_owned(),
                known: self.kinds.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }

    /// Names and descriptions of the registered kinds, in name order.
    pub fn kinds(&self) -> impl Iterator<Item = (&str, &str)> {
        self.kinds.iter().map(|(n, k)| (n.as_str(), k.describe()))
    }

    /// Job `job`'s parameters from the command line's job flags; `null`
    /// for a job not registered here (its run then names it unknown).
    pub fn params_from_flags(
        &self,
        job: &str,
        flags: &JobFlags,
    ) -> Result<serde_json::Value, RequestError> {
        match self.kinds.get(job) {
            Some(kind) => kind.params_from_flags(flags),
            None => Ok(serde_json::Value::Null),
        }
    }

    /// Refuses `--input-format paged` for job `job` unless its kind reads
    /// paged input, naming the kinds that do.
    pub fn check_flags(&self, job: &str, flags: &JobFlags) -> Result<(), RequestError> {
        let reads_paged = |kind: &Arc<dyn JobKind>| kind.reads_paged();
        if flags.input_format != InputFormat::Paged || self.kinds.get(job).is_some_and(reads_paged)
        {
            return Ok(());
        }
        let names: Vec<&str> = self
            .kinds
            .iter()
            .filter(|(_, kind)| reads_paged(kind))
            .map(|(name, _)| name.as_str())
            .collect();
        let list = match names.split_last() {
            Some((last, [])) => (*last).to_owned(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => "no job of this binary".to_owned(),
        };
        Err(RequestError::Flag(format!(
            "--input-format paged is for {list}"
        )))
    }

    /// The job and its engine settings for `req`.
    pub fn build(
        &self,
        req: &JobRequest,
        ctx: &BuildContext<'_>,
    ) -> Result<(Built, EngineConfig), RequestError> {
        req.check_properties()?;
        let kind = self.get(&req.job)?;
        let built = kind.build(req, ctx)?;
        let mut cfg = engine_config(req, &built);
        if let Some(p) = kind.row_columns(req) {
            cfg.rows = Arc::new(p);
        }
        cfg.output = cfg.output.typed(kind.long_values(), kind.output_names());
        if let Some(columns) = kind.output_columns(req) {
            cfg.output = cfg.output.with_columns(columns);
        }
        Ok((built, cfg))
    }
}

/// The local engine's settings for a request and the job made from it.
/// The hardware profile for the model is the caller's to add.
pub fn engine_config(req: &JobRequest, built: &Built) -> EngineConfig {
    let mut cfg = settings(req);
    if let Some(r) = built.reducers {
        cfg.reducers = r.max(1);
    }
    cfg.format = built.format;
    cfg
}

/// The local engine's settings for a request before its job is made
/// (lines, the request's reducers).
pub fn settings(req: &JobRequest) -> EngineConfig {
    let mut cfg = EngineConfig::default();
    let e = &req.engine;
    if let Some(t) = e.threads {
        cfg.threads = t.max(1);
    }
    cfg.reducers = req.reducers.unwrap_or(cfg.threads as u32).max(1);
    cfg.memory = req.memory.unwrap_or(DEFAULT_MEMORY);
    cfg.max_record = usize::try_from(e.max_record).unwrap_or(usize::MAX);
    cfg.split_size = e.split_size;
    cfg.combine = e.combine;
    cfg.spill_dir = e.spill_dir.clone();
    cfg.merge_factor = e.merge_factor;
    cfg.sort_buffer = e
        .sort_buffer
        .map(|b| usize::try_from(b).unwrap_or(usize::MAX));
    cfg.overwrite = req.overwrite;
    cfg.sync_output = req.syncs_output();
    cfg.format = RecordFormat::Lines;
    cfg.file_format = e.input_format.file_format();
    cfg.output = match e.output_format {
        OutputFormat::Text => OutputFiles::Text,
        OutputFormat::SequenceFile => OutputFiles::SequenceFile { long_values: false },
        OutputFormat::Avro => OutputFiles::Avro {
            long_values: false,
            names: ("key", "value"),
        },
        OutputFormat::Parquet => OutputFiles::parquet(),
    };
    if let Some(c) = &e.column {
        cfg.rows = Arc::new(Projection::column(c));
    }
    cfg.bad_records = match e.bad_records {
        BadRecords::Fail => BadRecordPolicy::Fail,
        BadRecords::Skip => BadRecordPolicy::Skip,
    };
    cfg
}
