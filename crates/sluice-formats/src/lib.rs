//! Sluice's formats: where input comes from and how bytes become records.
//!
//! - [`chunked`]: chunked checksums of stored blocks and the reader that
//!   verifies them as it streams.
//! - [`input`]: resolving files, directories and globs; planning splits.
//! - [`read`]: record readers (text lines, compressed text, fixed-length
//!   binary) that push borrowed records to a callback, never allocating per
//!   record.
//! - [`compressed`]: gzip, zstd, LZ4 and Snappy text as one stream (LZ4
//!   and Snappy in their standard frames or Hadoop's block framing).
//! - [`bz2`]: bzip2 text split at its block boundaries.
//! - [`rows`]: files of rows with named columns read as records of text;
//!   [`parquet`]: Parquet files, by row group, decoded by column into
//!   Arrow arrays written as text (`arrow_text`); [`parquet_json`]: their
//!   rows as JSON objects, for Streaming; [`parquet_out`]: a job's output
//!   as a Parquet file of typed columns.
//! - [`seqfile`]: Hadoop SequenceFiles, split at their syncs, and written;
//!   [`avro`]: Avro object container files, split at their syncs;
//!   [`textrows`]: CSV with a header row and JSON lines. Each reads its
//!   file wherever its bytes are (a local file, a cluster block through
//!   its checksums, a cached block, a remote store) through `positioned`,
//!   the positioned reader Avro and SequenceFile share.
//! - [`delimited`]: a mutable decoder for delimited text (`a|b|c`).
//! - [`spill`]: the checksummed, partitioned run file that map output is
//!   spilled to and merged from.
//! - [`index`]: the range index over a key-sorted data set.
//! - [`paged`]: binary records in fixed-size pages.
//!
//! Architecture invariant: this crate knows nothing of jobs, threads or
//! memory budgets; it reads and writes bytes it is told to.

mod arrow_text;
pub mod avro;
pub mod bz2;
pub mod chunked;
pub mod compressed;
pub mod dates;
pub mod delimited;
mod error;
pub mod index;
pub mod input;
pub mod paged;
pub mod parquet;
pub mod parquet_json;
pub mod parquet_out;
mod positioned;
pub mod read;
pub mod rows;
pub mod seqfile;
pub mod spill;
pub mod textrows;
pub mod varint;

pub use error::FormatError;

/// Result type of this crate.
pub type Result<T> = std::result::Result<T, FormatError>;
