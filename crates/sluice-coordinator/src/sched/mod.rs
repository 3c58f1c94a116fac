//! Jobs, tasks and attempts: the scheduler's state machine.
//!
//! A job has one map task per input block (or per group of small blocks)
//! and one reduce task per partition. A task is *pending* when it has neither a finished attempt
//! nor a running one. Rules:
//!
//! - Locality levels ([`Locality`]): a map runs best where its block is
//!   cached (the block cache, to come), then on a worker holding a replica
//!   (node), then in the rack of one, then in its data center, then
//!   anywhere.
//! - Delay scheduling by missed offers (Zaharia et al., EuroSys 2010; the
//!   thresholds of seed 002): a job offered a free map slot takes its best
//!   pending map for that worker if the map's level is one the job may
//!   use now; else it declines and counts a missed offer. The levels it
//!   may use widen with its count ([`Delay`]): node-local until it has
//!   missed [`Delay::node`] offers, rack-local until [`Delay::rack`], and so
//!   on; launching a node-local (or better) map resets the count. A map
//!   that failed on a damaged replica goes anywhere at once; one whose
//!   blocks no live worker holds fails its job.
//! - Queues ([`crate::queues`]): a decision takes its candidates from the
//!   job's queues by level, not from a scan of its tasks, so its cost does
//!   not grow with the job.
//! - Reduces start as [`Settings::reduce`] says ([`crate::arts`]): once a
//!   fraction of the maps are done, maps still pending or not (Hadoop's
//!   slow-start: 0.05 starts them early, 0.8 late), or by seed 003's ARTS
//!   from the map outputs per partition and data center; workers have
//!   separate map and reduce slots, so reducers waiting for map outputs
//!   never hold a map slot.
//! - Data-center-local maps ([`Settings::dc_local_maps`]): a map runs only
//!   in a data center holding a live replica of its blocks, never across
//!   the WAN, whatever its missed offers.
//! - Speculation: when a phase has no pending task, a running task slower
//!   than [`Settings::spec_slowdown`] times the phase's median (and than
//!   [`Settings::spec_min`]) gets one backup attempt on another worker.
//! - Commit: the first attempt to succeed wins; the others are killed and
//!   their outputs discarded. Attempts carry ids unique within the task,
//!   so a late report from a lost or killed attempt changes nothing.
//! - Failure: an attempt's failure (or a map output a reducer could not
//!   fetch) counts against the task; after [`Settings::max_attempts`]
//!   failures the job fails with the last error. A failure on a damaged
//!   input replica does not count: the replica is marked corrupt and the
//!   task may run on any worker at once, reading an intact replica. Attempts lost with their
//!   worker do not count; the worker's finished map outputs are recomputed
//!   while reducers may still need them.

//!
//! By concern: [`locality`] (levels, topology, the asking worker), [`task`]
//! (tasks and attempts), [`job`] (a job and its transitions; `job::offer`:
//! which task an offer takes). Each file
//! imports from the ones before it, never the reverse.

pub mod job;
pub mod kept;
pub mod locality;
pub mod task;

pub use crate::config::{Delay, Settings};
pub use job::adopt::{Adopted, Known};
pub use job::{
    Job, JobState, MapOutputs, OUTPUTS_PER_REPLY, PREFER_SCAN, REDUCE_SCHEDULER_PROPERTY,
};
pub use kept::{Kept, Names, Packed};
pub use locality::{Asker, Locality, Place, Topology};
pub use task::{task_name, Attempt, AttemptState, Pick, Task, MAP, REDUCE};
