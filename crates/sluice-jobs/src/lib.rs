//! Sluice's built-in jobs, written against the public job API exactly as a
//! user's own job would be.
//!
//! - [`wordcount`]: Hadoop's WordCount (tokens split on space, `\t`, `\n`,
//!   `\r`, `\f`, counted per distinct byte string).
//! - [`grep`]: a map-only job writing every line that matches a regex.
//! - [`sort`]: bytewise total order of lines with a sampled range
//!   partitioner; duplicates kept.
//! - [`tera::terasort`]: TeraSort over 100-byte records.
//! - [`generate::generate`]: a data generator as a map-only job.
//! - [`ohb::ohb`]: the OSU HiBD shuffle micro-benchmarks on synthetic input.

pub mod cell;
pub mod dfsio;
mod error;
pub mod generate;
mod grep;
pub mod index;
pub mod kmeans;
pub mod ohb;
pub mod pagerank;
pub mod pavlo;
mod sort;
pub mod streaming;
pub mod tera;
mod wordcount;

#[cfg(test)]
mod testing;

pub use error::JobError;
pub use grep::grep;
pub use sort::{sort, sort_by};
pub use wordcount::{is_delimiter, wordcount, Grouping, SumReducer, WordCountMapper};
