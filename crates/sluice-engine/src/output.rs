//! Text output: `key<TAB>value\n` lines, or `key\n` for a key alone
//! (Hadoop's `TextOutputFormat`); or, as the job asks
//! ([`OutputFiles`]), a Hadoop SequenceFile of `Text` keys and `Text` or
//! `LongWritable` values (Hadoop's `SequenceFileOutputFormat`), an Avro
//! container file of (`key` string, `value` string or long) records, or a
//! Parquet file of typed columns (the key the first, the value the rest).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_api::{Error as ApiError, Sink};
use sluice_formats::avro::write::AvroEncoder;
use sluice_formats::parquet_out::{pair_columns, OutputColumn, ParquetEncoder};
use sluice_formats::seqfile::write::{new_sync, put_long, put_text, SeqEncoder};
use sluice_formats::seqfile::{LONG_CLASS, TEXT_CLASS};
use sluice_sort::{ErrorSink, SortError};

use crate::EngineError;

/// How a job's output files are written.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum OutputFiles {
    /// Text lines.
    #[default]
    Text,
    /// Uncompressed SequenceFiles, `Text` keys; values `LongWritable`
    /// (decimal text values read as integers) if `long_values`, else `Text`.
    SequenceFile {
        /// Values are integers.
        long_values: bool,
    },
    /// Avro container files of records of two fields named `names`: the
    /// key a string, the value a long if `long_values`, else a string.
    Avro {
        /// Values are integers.
        long_values: bool,
        /// The fields' names.
        names: (&'static str, &'static str),
    },
    /// Parquet files of `columns`: the key the first, the value the
    /// second, or its `|`-separated fields the rest
    /// ([`sluice_formats::parquet_out`]).
    Parquet {
        /// The columns, at least two.
        columns: Arc<[OutputColumn]>,
    },
}

impl OutputFiles {
    /// Parquet files of a `key` and a `value` text column.
    pub fn parquet() -> OutputFiles {
        OutputFiles::Parquet {
            columns: pair_columns(("key", "value"), false).into(),
        }
    }

    /// The same files with integer values or not, their fields (if they
    /// have names) named `names`.
    pub fn typed(self, long: bool, names: (&'static str, &'static str)) -> OutputFiles {
        match self {
            OutputFiles::Parquet { .. } => OutputFiles::Parquet {
                columns: pair_columns(names, long).into(),
            },
            OutputFiles::Text => OutputFiles::Text,
            OutputFiles::SequenceFile { .. } => OutputFiles::SequenceFile { long_values: long },
            OutputFiles::Avro { .. } => OutputFiles::Avro {
                long_values: long,
                names,
            },
        }
    }

    /// The same files with the columns `columns` if they are Parquet's.
    pub fn with_columns(self, columns: &[OutputColumn]) -> OutputFiles {
        match self {
            OutputFiles::Parquet { .. } => OutputFiles::Parquet {
                columns: columns.into(),
            },
            other => other,
        }
    }
}

/// The encoder of a binary output file.
enum Encoder {
    Seq(SeqEncoder),
    Avro(AvroEncoder),
    Parquet(Box<ParquetEncoder>),
}

/// A binary output's encoder and its scratch buffers.
struct SeqOut {
    enc: Encoder,
    long_values: bool,
    bytes: Vec<u8>,
    key: Vec<u8>,
    value: Vec<u8>,
}

/// Writes one output (or side) file of a task attempt.
pub struct TextOutput {
    w: BufWriter<Writeback>,
    seq: Option<Box<SeqOut>>,
    path: PathBuf,
    err: Option<std::io::Error>,
    /// Records written.
    pub records: u64,
    /// Bytes written.
    pub bytes: u64,
}

impl TextOutput {
    /// Creates `path`, to be synced when finished if `sync` (see
    /// [`crate::EngineConfig::sync_output`]).
    pub fn create(path: &Path, sync: bool) -> Result<Self, EngineError> {
        let f = File::create(path).map_err(|e| EngineError::io("creating", path, e))?;
        Ok(TextOutput {
            w: BufWriter::with_capacity(1 << 20, Writeback::new(f, sync)),
            seq: None,
            path: path.to_owned(),
            err: None,
            records: 0,
            bytes: 0,
        })
    }

    /// Creates `path` to be written as `files` says; a Parquet file
    /// closes its row groups past `row_group_bytes`
    /// ([`crate::EngineConfig::row_group_bytes`]).
    pub fn create_as(
        path: &Path,
        sync: bool,
        files: &OutputFiles,
        row_group_bytes: usize,
    ) -> Result<Self, EngineError> {
        let mut out = Self::create(path, sync)?;
        let mut bytes = Vec::new();
        let sync = new_sync(path.as_os_str().as_encoded_bytes());
        let (enc, long_values) = match files {
            OutputFiles::Text => return Ok(out),
            OutputFiles::SequenceFile { long_values } => {
                let long_values = *long_values;
                let value_class = if long_values { LONG_CLASS } else { TEXT_CLASS };
                let enc = SeqEncoder::new(&mut bytes, TEXT_CLASS, value_class, false, sync);
                (Encoder::Seq(enc), long_values)
            }
            OutputFiles::Avro { long_values, names } => {
                let enc = AvroEncoder::new(&mut bytes, *names, *long_values, sync)
                    .map_err(|e| EngineError::io("writing", path, e))?;
                (Encoder::Avro(enc), *long_values)
            }
            OutputFiles::Parquet { columns } => {
                let enc = ParquetEncoder::new(&mut bytes, columns)
                    .map_err(|e| EngineError::io("writing", path, e))?
                    .row_group_bytes(row_group_bytes);
                (Encoder::Parquet(Box::new(enc)), false)
            }
        };
        out.write_bytes(&bytes)?;
        out.bytes = bytes.len() as u64;
        out.seq = Some(Box::new(SeqOut {
            enc,
            long_values,
            bytes: Vec::new(),
            key: Vec::new(),
            value: Vec::new(),
        }));
        Ok(out)
    }

    fn write_bytes(&mut self, b: &[u8]) -> Result<(), EngineError> {
        self.w
            .write_all(b)
            .map_err(|e| EngineError::io("writing", &self.path, e))
    }

    /// A record of a binary output: for a SequenceFile its key and value
    /// as Writables, for Avro a record, for Parquet a row (its encoder
    /// types the values itself).
    fn put_seq(&mut self, key: &[u8], value: &[u8]) -> sluice_api::Result<()> {
        let s = self.seq.as_mut().expect("a binary output");
        s.bytes.clear();
        let long = if s.long_values {
            let n = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.parse::<i64>().ok());
            Some(n.ok_or_else(|| {
                ApiError::User(format!(
                    "value {:?} of key {:?} is not an integer (a long)",
                    String::from_utf8_lossy(value),
                    String::from_utf8_lossy(key)
                ))
            })?)
        } else {
            None
        };
        let r = match &mut s.enc {
            Encoder::Seq(enc) => {
                s.key.clear();
                s.value.clear();
                put_text(&mut s.key, key);
                match long {
                    Some(n) => put_long(&mut s.value, n),
                    None => put_text(&mut s.value, value),
                }
                enc.append(&mut s.bytes, &s.key, &s.value)
            }
            Encoder::Avro(enc) => enc.append_pair(&mut s.bytes, key, long.ok_or(value)),
            Encoder::Parquet(enc) => enc.append(&mut s.bytes, key, value),
        };
        if let Err(e) = r {
            self.err = Some(e);
            return Err(ApiError::Aborted);
        }
        let bytes = std::mem::take(&mut s.bytes);
        let r = self.put(&[&bytes]);
        if let Some(s) = self.seq.as_mut() {
            s.bytes = bytes;
        }
        r
    }

    /// Text lines given whole (`key TAB value` or `key`), each a record.
    fn put_lines(&mut self, bytes: &[u8]) -> sluice_api::Result<()> {
        for line in bytes.split_inclusive(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\n").unwrap_or(line);
            match memchr::memchr(b'\t', line) {
                Some(t) => self.put_seq(&line[..t], &line[t + 1..])?,
                None => self.put_seq(line, b"")?,
            }
        }
        Ok(())
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

    /// Flushes and syncs the file (unless created not to); returns a kept
    /// write error if there was one.
    pub fn finish(mut self) -> Result<(u64, u64), EngineError> {
        if let Some(e) = self.err.take() {
            return Err(EngineError::io("writing", &self.path, e));
        }
        if let Some(s) = self.seq.take() {
            let mut rest = Vec::new();
            match s.enc {
                Encoder::Seq(enc) => enc.finish(&mut rest),
                Encoder::Avro(enc) => enc.finish(&mut rest),
                Encoder::Parquet(enc) => enc.finish(&mut rest),
            }
            .map_err(|e| EngineError::io("writing", &self.path, e))?;
            self.write_bytes(&rest)?;
            self.bytes += rest.len() as u64;
        }
        let path = self.path.clone();
        let f = self
            .w
            .into_inner()
            .map_err(|e| EngineError::io("writing", &path, e.into_error()))?;
        if f.sync {
            f.file
                .sync_all()
                .map_err(|e| EngineError::io("syncing", &path, e))?;
        }
        Ok((self.records, self.bytes))
    }
}

/// A file that asks the kernel to start writing its pages to disk every
/// [`Writeback::EVERY`] bytes, as they are written, so that the sync
/// before the attempt's commit finds little left to write: it took 0.19 s
/// of a 1.4 s TeraSort of 269 MB, every byte of the output written back
/// only then. Starting writeback never waits for it (`SYNC_FILE_RANGE_WRITE`
/// alone), and the sync still decides what is durable.
struct Writeback {
    file: File,
    written: u64,
    started: u64,
    /// The file is synced at the end, so writing back early pays: an
    /// unsynced one is left to the kernel.
    sync: bool,
}

impl Writeback {
    const EVERY: u64 = 8 << 20;

    fn new(file: File, sync: bool) -> Self {
        Writeback {
            file,
            written: 0,
            started: 0,
            sync,
        }
    }

    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    fn start_writeback(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain system call on a descriptor this struct owns;
        // it reads no memory of ours. A failure only means the sync does
        // all the writing, as before, so its result is ignored.
        unsafe {
            libc::sync_file_range(
                self.file.as_raw_fd(),
                self.started as libc::off64_t,
                (self.written - self.started) as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            );
        }
        self.started = self.written;
    }

    #[cfg(not(target_os = "linux"))]
    fn start_writeback(&mut self) {}
}

impl Write for Writeback {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        if self.sync && self.written - self.started >= Self::EVERY {
            self.start_writeback();
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Sink for TextOutput {
    #[inline]
    fn emit(&mut self, key: &[u8], value: &[u8]) -> sluice_api::Result<()> {
        if self.seq.is_some() {
            return self.put_seq(key, value);
        }
        self.put(&[key, b"\t", value, b"\n"])
    }

    #[inline]
    fn emit_key(&mut self, key: &[u8]) -> sluice_api::Result<()> {
        if self.seq.is_some() {
            return self.put_seq(key, b"");
        }
        self.put(&[key, b"\n"])
    }

    #[inline]
    fn emit_raw(&mut self, bytes: &[u8]) -> sluice_api::Result<()> {
        if self.seq.is_some() {
            return self.put_lines(bytes);
        }
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
