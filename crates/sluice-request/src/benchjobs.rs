//! TestDFSIO (a job that measures the store rather than computes an
//! answer) and Hadoop Streaming (a job of users' commands).

use serde::{Deserialize, Serialize};
use sluice_jobs::dfsio;

use crate::registry::{BuildContext, Built, JobKind, Registry};
use crate::{JobRequest, RequestError};

pub(crate) fn register(r: &mut Registry) {
    r.register("dfsio", Dfsio)
        .register("streaming", StreamingKind);
}

/// Which TestDFSIO test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum DfsioMode {
    /// Map task `i` of `synthetic:N` writes file `i`.
    #[default]
    Write,
    /// Read the files back, checking every line.
    Read,
}

/// Parameters of `dfsio`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DfsioParams {
    pub mode: DfsioMode,
    /// Bytes of each file (the write test), rounded up to whole lines.
    pub size: u64,
    /// Seed of the files' contents (the same for write and read).
    pub seed: u64,
}

impl Default for DfsioParams {
    fn default() -> Self {
        DfsioParams {
            mode: DfsioMode::Write,
            size: 1 << 20,
            seed: 7,
        }
    }
}

struct Dfsio;

impl JobKind for Dfsio {
    fn describe(&self) -> &str {
        "TestDFSIO: write N files of a size (on synthetic:N), or read them back"
    }

    fn build(&self, req: &JobRequest, _: &BuildContext<'_>) -> Result<Built, RequestError> {
        let p: DfsioParams = req.params()?;
        Ok(Built::lines(match p.mode {
            DfsioMode::Write => dfsio::dfsio_write(p.size, p.seed),
            DfsioMode::Read => dfsio::dfsio_read(p.seed),
        }))
    }
}

/// Parameters of `streaming` (Hadoop Streaming: commands as mapper,
/// combiner and reducer; [`sluice_jobs::streaming`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct StreamingParams {
    /// The map command (`-mapper`).
    pub mapper: String,
    /// The reduce command (`-reducer`); absent or `NONE`: map-only.
    pub reducer: Option<String>,
    /// The combine command (`-combiner`).
    pub combiner: Option<String>,
    /// Files shipped to every task's working directory (`-file`): name and
    /// contents, carried in the request.
    pub files: Vec<(String, Vec<u8>)>,
}

/// `-D` properties of a streaming job that change how it runs.
const SEPARATOR: &str = "stream.map.output.field.separator";
const KEY_FIELDS: &str = "stream.num.map.output.key.fields";

struct StreamingKind;

impl JobKind for StreamingKind {
    fn describe(&self) -> &str {
        "Hadoop Streaming: any commands as mapper, combiner and reducer (sluice streaming)"
    }

    /// A SequenceFile's records as `key TAB value` lines (Hadoop's
    /// `SequenceFileAsTextInputFormat`), Avro's and Parquet's rows as one
    /// JSON object a line (Avro's `AvroAsTextInputFormat`).
    fn row_columns(&self, _req: &JobRequest) -> Option<sluice_formats::rows::Projection> {
        Some(sluice_formats::rows::Projection::streaming())
    }

    fn build(&self, req: &JobRequest, _: &BuildContext<'_>) -> Result<Built, RequestError> {
        let p: StreamingParams = req.params()?;
        if p.mapper.trim().is_empty() {
            return Err(RequestError::params(
                "streaming",
                "needs a mapper (-mapper CMD)",
            ));
        }
        let reducer = p.reducer.filter(|r| !r.trim().is_empty() && r != "NONE");
        let separator = match req.property(SEPARATOR) {
            None => b'\t',
            Some(s) if s.len() == 1 => s.as_bytes()[0],
            Some(s) => {
                return Err(RequestError::params(
                    "streaming",
                    format!("{SEPARATOR} must be one byte, not {s:?}"),
                ))
            }
        };
        let key_fields = match req.property(KEY_FIELDS) {
            None => 1,
            Some(n) => n.parse::<usize>().ok().filter(|&n| n >= 1).ok_or_else(|| {
                RequestError::params("streaming", format!("{KEY_FIELDS} must be >= 1, not {n}"))
            })?,
        };
        let env = req
            .properties
            .iter()
            .map(|(k, v)| (k.replace('.', "_"), v.clone()))
            .collect();
        let spec = sluice_jobs::streaming::streaming(sluice_jobs::streaming::Streaming {
            mapper: p.mapper,
            reducer,
            combiner: p.combiner.filter(|c| !c.trim().is_empty()),
            env,
            files: p.files,
            separator,
            key_fields,
        });
        Ok(Built::lines(spec))
    }
}
