//! The user counters of the k-means jobs.

/// The user counter group of k-means.
pub const COUNTER_GROUP: &str = "KMEANS";
/// The counter of centres an iteration moved by the tolerance or more.
pub const MOVED: &str = "MOVED";
/// The counter of iterations (1 per iterate job).
pub const ITERATIONS: &str = "ITERATIONS";
/// The counter of the initial centres' dimension (the init job's reducer
/// counts it once): the points job's and the iterations' record length.
pub const DIMS: &str = "DIMS";
