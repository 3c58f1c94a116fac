//! What the engine collects map output into: the [`Collector`] trait.

use sluice_api::Counters;
use sluice_formats::spill::SpillWriter;

use crate::Result;

/// Collects map output in memory until the engine spills it.
pub trait Collector: Send {
    /// Adds one map output record.
    fn collect(&mut self, key: &[u8], value: &[u8]) -> Result<()>;

    /// Bytes of memory the collected records hold.
    fn memory(&self) -> usize;

    /// Whether [`Collector::memory`] has reached `budget`, asked after
    /// every record. A collector whose memory grows only now and then may
    /// answer without adding it up each time, but must say yes whenever
    /// it has grown to the budget.
    fn over(&mut self, budget: usize) -> bool {
        self.memory() >= budget
    }

    /// Whether nothing is collected.
    fn is_empty(&self) -> bool;

    /// Writes everything collected to `w` sorted by (partition, key order),
    /// combined where the job allows, and empties the collector.
    fn spill(&mut self, w: &mut SpillWriter, counters: &mut Counters) -> Result<()>;
}
