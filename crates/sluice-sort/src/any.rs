//! [`AnyCollector`]: the hash or the sort collector behind one type.

use sluice_api::Counters;
use sluice_formats::spill::SpillWriter;

use crate::collect::SortCollector;
use crate::collector::Collector;
use crate::hash::HashCollector;
use crate::Result;

/// Either collector, called without a virtual call: the engine calls
/// `collect` once per map output record, and a call through a trait
/// object could not be inlined into its caller.
pub enum AnyCollector {
    /// Hash grouping at emit time.
    Hash(HashCollector),
    /// Sort on spill.
    Sort(SortCollector),
}

impl Collector for AnyCollector {
    #[inline]
    fn collect(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        match self {
            AnyCollector::Hash(c) => c.collect(key, value),
            AnyCollector::Sort(c) => c.collect(key, value),
        }
    }

    fn memory(&self) -> usize {
        match self {
            AnyCollector::Hash(c) => c.memory(),
            AnyCollector::Sort(c) => c.memory(),
        }
    }

    #[inline]
    fn over(&mut self, budget: usize) -> bool {
        match self {
            AnyCollector::Hash(c) => c.over(budget),
            AnyCollector::Sort(c) => c.over(budget),
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            AnyCollector::Hash(c) => c.is_empty(),
            AnyCollector::Sort(c) => c.is_empty(),
        }
    }

    fn spill(&mut self, w: &mut SpillWriter, counters: &mut Counters) -> Result<()> {
        match self {
            AnyCollector::Hash(c) => c.spill(w, counters),
            AnyCollector::Sort(c) => c.spill(w, counters),
        }
    }
}
