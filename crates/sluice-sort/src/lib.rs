//! Map-side collection, spilling and merging.
//!
//! - [`SortCollector`]: serialized records in one arena plus fixed-size index
//!   entries; sorting swaps entries only (Hadoop's `MapOutputBuffer` layout).
//! - [`HashCollector`]: combine at emit time into a hash table keyed by the
//!   record key (Phoenix++'s container/combiner), for jobs with an
//!   [`sluice_api::Aggregator`].
//! - [`Merger`]: k-way merge of sorted spill segments, with [`reduce_groups`]
//!   feeding key groups to a reducer or combiner.
//!
//! Both collectors spill to the format of [`sluice_formats::spill`], sorted by
//! (partition, key order), applying the combiner or aggregator as they go.
//!
//! Architecture invariant: this crate decides nothing about when to spill or
//! where files go (the engine does), and starts no threads.

mod collect;
mod error;
mod hash;
mod merge;
mod order;

pub use collect::{Collector, SortCollector, SpillSink};
pub use error::SortError;
pub use hash::HashCollector;
pub use merge::{reduce_groups, ErrorSink, GroupStats, Merger};
pub use order::{fingerprint, key_cmp, prefix};

/// Result type of this crate.
pub type Result<T> = std::result::Result<T, SortError>;
