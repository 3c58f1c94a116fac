use std::sync::Arc;

use crate::aggregate::{aggregate_combiner, Aggregator};
use crate::partition::{HashPartitioner, Partitioner};
use crate::task::{Mapper, MapperFactory, Reducer, ReducerFactory};

/// How intermediate keys are ordered within a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyOrder {
    /// Bytewise (unsigned lexicographic) order, as Hadoop's `Text`. Sort
    /// entries carry an 8-byte big-endian key prefix; full keys are compared
    /// only when prefixes tie.
    #[default]
    Bytewise,
    /// Order by a 32-bit key fingerprint, then bytewise: groups equal keys
    /// together without a meaningful order, and compares full keys far less
    /// often. For jobs whose output order does not matter.
    Fingerprint,
}

/// Everything the engine needs to know about a job's user code.
#[derive(Clone)]
pub struct JobSpec {
    /// Name shown in reports.
    pub name: String,
    /// Creates one mapper per map slot.
    pub mapper: MapperFactory,
    /// Creates one reducer per reduce task; `None` makes a map-only job.
    pub reducer: Option<ReducerFactory>,
    /// Creates combiners, applied when spilling and when merging.
    pub combiner: Option<ReducerFactory>,
    /// Each combiner instance is costly to start (a process, as a
    /// Streaming combiner is: one per spilled partition). The local
    /// engine's maps then collect up to their whole collect budget before
    /// they spill, as Hadoop's one sort buffer does, where in-process
    /// combiners do best with small spills that stay in the caches.
    pub costly_combiner: bool,
    /// Combines values at emit time into a hash table (Phoenix++ style)
    /// instead of sorting map output; needs no combiner.
    pub aggregator: Option<Arc<dyn Aggregator>>,
    /// The aggregator the combiner is ([`JobSpec::fold_combiner`]): the
    /// sort collector may then fold map output of small keys and values
    /// at emit time in a small table before sorting it.
    pub fold: Option<Arc<dyn Aggregator>>,
    /// Assigns keys to reduce partitions.
    pub partitioner: Arc<dyn Partitioner>,
    /// Order of keys within a partition.
    pub key_order: KeyOrder,
}

impl JobSpec {
    /// A job with the given mapper, no reducer (map-only), the hash
    /// partitioner and bytewise key order.
    pub fn new<M, F>(name: &str, mapper: F) -> Self
    where
        M: Mapper + 'static,
        F: Fn() -> M + Send + Sync + 'static,
    {
        JobSpec {
            name: name.to_owned(),
            mapper: Arc::new(move || Box::new(mapper())),
            reducer: None,
            combiner: None,
            costly_combiner: false,
            aggregator: None,
            fold: None,
            partitioner: Arc::new(HashPartitioner),
            key_order: KeyOrder::Bytewise,
        }
    }

    /// Sets the reducer.
    pub fn reducer<R, F>(mut self, reducer: F) -> Self
    where
        R: Reducer + 'static,
        F: Fn() -> R + Send + Sync + 'static,
    {
        self.reducer = Some(Arc::new(move || Box::new(reducer())));
        self
    }

    /// Sets the combiner.
    pub fn combiner<R, F>(mut self, combiner: F) -> Self
    where
        R: Reducer + 'static,
        F: Fn() -> R + Send + Sync + 'static,
    {
        self.combiner = Some(Arc::new(move || Box::new(combiner())));
        self
    }

    /// Sets a combiner that is costly to start ([`JobSpec::costly_combiner`]).
    pub fn costly_combiner<R, F>(self, combiner: F) -> Self
    where
        R: Reducer + 'static,
        F: Fn() -> R + Send + Sync + 'static,
    {
        let mut spec = self.combiner(combiner);
        spec.costly_combiner = true;
        spec
    }

    /// Sets the combiner to `agg` ([`crate::aggregate_combiner`]), and
    /// lets the map side fold with it before it sorts: values (of at most
    /// 16 bytes, keys of at most 16) of a key met again while the key is
    /// in a small table (16,384 slots, sized to stay in the core's cache)
    /// fold there, and only what the table evicts is sorted. Unlike
    /// [`JobSpec::aggregator`]'s table of every key, it helps where a few
    /// keys have most of the values (PageRank's popular pages) and costs
    /// little where none does. `agg` must fold values in any order to
    /// the same answer, as a combiner's do.
    pub fn fold_combiner(mut self, agg: Arc<dyn Aggregator>) -> Self {
        self.combiner = Some(aggregate_combiner(agg.clone()));
        self.fold = Some(agg);
        self
    }

    /// Sets the emit-time aggregator (enables hash grouping).
    pub fn aggregator(mut self, agg: impl Aggregator + 'static) -> Self {
        self.aggregator = Some(Arc::new(agg));
        self
    }

    /// Sets the partitioner.
    pub fn partitioner(mut self, p: impl Partitioner + 'static) -> Self {
        self.partitioner = Arc::new(p);
        self
    }

    /// Sets the key order.
    pub fn key_order(mut self, order: KeyOrder) -> Self {
        self.key_order = order;
        self
    }

    /// Whether the job has a reduce phase.
    pub fn is_map_only(&self) -> bool {
        self.reducer.is_none()
    }
}

impl std::fmt::Debug for JobSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobSpec")
            .field("name", &self.name)
            .field("map_only", &self.is_map_only())
            .field("combiner", &self.combiner.is_some())
            .field("costly_combiner", &self.costly_combiner)
            .field("aggregator", &self.aggregator.is_some())
            .field("fold", &self.fold.is_some())
            .field("key_order", &self.key_order)
            .finish()
    }
}
