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

mod any;
mod collect;
mod collector;
mod error;
pub mod fold;
mod hash;
mod merge;
mod order;
mod radix;
mod table;

pub use any::AnyCollector;
pub use collect::{SortCollector, SpillSink};
pub use collector::Collector;
pub use error::SortError;
pub use hash::HashCollector;
pub use merge::{reduce_groups, ErrorSink, GroupStats, Merger};
pub use order::{fingerprint, key_cmp, prefix};

/// Result type of this crate.
pub type Result<T> = std::result::Result<T, SortError>;

/// Records read back from a spill, as (key, value).
#[cfg(test)]
pub(crate) type Records = Vec<(Vec<u8>, Vec<u8>)>;

/// Spills a collector into a one-partition run and reads it back.
#[cfg(test)]
pub(crate) fn spill_to_vec(c: &mut dyn Collector) -> Records {
    spill_counting(c).0
}

/// [`spill_to_vec`], with the spill's counters.
#[cfg(test)]
pub(crate) fn spill_counting(c: &mut dyn Collector) -> (Records, sluice_api::Counters) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("run");
    let mut w = sluice_formats::spill::SpillWriter::create(&p, 1).unwrap();
    let mut counters = sluice_api::Counters::default();
    c.spill(&mut w, &mut counters).unwrap();
    w.finish().unwrap();
    let f = sluice_formats::spill::SpillFile::open(&p).unwrap();
    let mut r = f.reader(0);
    let mut got = Vec::new();
    while r.advance().unwrap() {
        got.push((r.key().to_vec(), r.value().to_vec()));
    }
    (got, counters)
}
