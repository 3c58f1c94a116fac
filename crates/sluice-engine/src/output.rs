//! Text output: `key<TAB>value\n` lines, or `key\n` for a key alone
//! (Hadoop's `TextOutputFormat`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use sluice_api::{Error as ApiError, Sink};
use sluice_sort::{ErrorSink, SortError};

use crate::EngineError;

/// Writes one output (or side) file of a task attempt.
pub struct TextOutput {
    w: BufWriter<File>,
    path: PathBuf,
    err: Option<std::io::Error>,
    /// Records written.
    pub records: u64,
    /// Bytes written.
    pub bytes: u64,
}

impl TextOutput {
    /// Creates `path`.
    pub fn create(path: &Path) -> Result<Self, EngineError> {
        let f = File::create(path).map_err(|e| EngineError::io("creating", path, e))?;
        Ok(TextOutput {
            w: BufWriter::with_capacity(1 << 20, f),
            path: path.to_owned(),
            err: None,
            records: 0,
            bytes: 0,
        })
    }

    fn put(&mut self, parts: &[&[u8]]) -> sluice_api::Result<()> {
        if self.err.is_some() {
            return Err(ApiError::Aborted);
        }
        for p in parts {
            if let Err(e) = self.w.write_all(p) {
                self.err = Some(e);
                return Err(ApiError::Aborted);
            }
            self.bytes += p.len() as u64;
        }
        self.records += 1;
        Ok(())
    }

    /// Flushes and syncs the file; returns a kept write error if there was one.
    pub fn finish(mut self) -> Result<(u64, u64), EngineError> {
        if let Some(e) = self.err.take() {
            return Err(EngineError::io("writing", &self.path, e));
        }
        let path = self.path.clone();
        let f = self
            .w
            .into_inner()
            .map_err(|e| EngineError::io("writing", &path, e.into_error()))?;
        f.sync_all()
            .map_err(|e| EngineError::io("syncing", &path, e))?;
        Ok((self.records, self.bytes))
    }
}

impl Sink for TextOutput {
    #[inline]
    fn emit(&mut self, key: &[u8], value: &[u8]) -> sluice_api::Result<()> {
        self.put(&[key, b"\t", value, b"\n"])
    }

    #[inline]
    fn emit_key(&mut self, key: &[u8]) -> sluice_api::Result<()> {
        self.put(&[key, b"\n"])
    }

    #[inline]
    fn emit_raw(&mut self, bytes: &[u8]) -> sluice_api::Result<()> {
        self.put(&[bytes])
    }
}

impl ErrorSink for TextOutput {
    fn take_error(&mut self) -> Option<SortError> {
        self.err.take().map(|source| SortError::Output {
            path: self.path.clone(),
            source,
        })
    }
}
