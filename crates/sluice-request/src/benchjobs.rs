//! Jobs that measure the store rather than compute an answer: TestDFSIO.

use serde::{Deserialize, Serialize};
use sluice_jobs::dfsio;

use crate::registry::{BuildContext, Built, JobKind, Registry};
use crate::{JobRequest, RequestError};

pub(crate) fn register(r: &mut Registry) {
    r.register("dfsio", Dfsio);
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
