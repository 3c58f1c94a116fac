//! k-means as HiBench runs it (Mahout's k-means on MapReduce), one job per
//! step:
//!
//! - **init**: the initial centres are `k` points of the input chosen by a
//!   seeded hash of each point's text (the `k` smallest hashes; equal
//!   points count once), so the choice depends on the data and the seed
//!   only, never on how the input is split. Each map keeps its `k`
//!   smallest; one reducer keeps the `k` smallest overall.
//! - **k-means||** (Bahmani et al., Spark MLlib's default), instead of
//!   init: one point chosen as above, then rounds ([`kmeans_parallel_round`])
//!   each a pass over the points sampling every point with probability
//!   `l * d^2 / cost` (`l = 2k` the oversampling factor, `d` the point's
//!   distance to the nearest candidate so far, `cost` the sum of `d^2`
//!   over all points), then a pass ([`kmeans_parallel_pick`]) weighing each
//!   candidate by the points nearest to it, whose reducer runs weighted
//!   k-means++ and Lloyd's iterations on the candidates to pick `k`.
//! - **points**: a map-only job writing every point in binary (below), once,
//!   for the iterations to read instead of the text: parsing decimal text
//!   was two thirds of an iteration. MLlib parses once and keeps the
//!   vectors; HiBench's Mahout input is binary vectors. A point of another
//!   dimension than the initial centres' is named here with its file and
//!   offset (or skipped under `--bad-records skip`).
//! - **iterate**: every map reads the current centres (a side input), adds
//!   each point to its nearest centre's running sum (in-mapper combining:
//!   one partial sum per centre and map task), and emits the partial sums;
//!   one reducer divides each centre's sum by its count. A centre no point
//!   chose stays where it was (counted in `KMEANS.EMPTY`). Centres that
//!   moved the tolerance or more are counted in [`MOVED`] (every centre
//!   with tolerance 0), the iteration itself in [`ITERATIONS`].
//! - **copy**: a map-only job writing the centres it reads as they are
//!   (where a run that may stop early puts its last centres).
//! - **assign**: a map-only job writing each point with its nearest
//!   centre.
//!
//! Points are lines of decimal coordinates separated by spaces or tabs (as
//! `sluice gen kmeans` writes them); centres are lines `index TAB
//! coordinates`. Binary points (the points job's output): each point its
//! `dims` coordinates as little-endian IEEE 754 doubles, 8 bytes each, and
//! nothing else: fixed-length records of `8 * dims` bytes, no header. The nearest centre is the one at the smallest squared
//! Euclidean distance, the lowest index on a tie.

mod counters;
mod init;
mod iterate;
mod model;
mod parallel;

pub use counters::{COUNTER_GROUP, DIMS, ITERATIONS, MOVED};
pub use init::kmeans_init;
pub use iterate::{kmeans_assign, kmeans_copy, kmeans_iterate, kmeans_points};
pub use model::Centres;
pub use parallel::{kmeans_parallel_pick, kmeans_parallel_round};
