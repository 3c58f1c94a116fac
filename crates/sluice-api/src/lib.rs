//! The Sluice job API.
//!
//! A job is a [`JobSpec`]: factories for a [`Mapper`], an optional [`Reducer`]
//! and combiner, an optional [`Aggregator`] for hash grouping, a
//! [`Partitioner`] and a [`KeyOrder`]. Keys and values are byte strings; the
//! engine never interprets them except through the partitioner and the key
//! order.
//!
//! Architecture invariant: this crate does no I/O, starts no threads, and
//! depends on no other Sluice crate.

mod aggregate;
pub mod columnar;
mod context;
mod counters;
mod error;
mod job;
mod partition;
mod task;

pub use aggregate::{aggregate_combiner, Aggregator, SumF64s, SumU64};
/// The Arrow arrays of [`RowBatch`], re-exported so jobs name the same
/// version.
pub use arrow_array;
pub use columnar::{ColumnarMap, Mapped, RowBatch};
pub use context::{Cancel, MapContext, ReduceContext, Sink, Values};
pub use counters::{Counters, TaskCounter};
pub use error::Error;
pub use job::{JobSpec, KeyOrder};
pub use partition::{hadoop_hash, HashPartitioner, Partitioner, RangePartitioner};
pub use task::{block_lines, Mapper, MapperFactory, Reducer, ReducerFactory};

/// Result type of user code.
pub type Result<T> = std::result::Result<T, Error>;
