//! A client of a Sluice cluster, and the supervisor of a cluster's
//! processes on one host.
//!
//! [`client::Client`] puts and gets data sets, lists and removes them, and
//! submits, waits for and kills jobs; [`BlockingClient`] does the same for
//! callers without a runtime; [`embedded`] starts and stops a coordinator
//! and workers as processes of one binary.

mod blocking;
pub mod certs;
pub mod client;
pub mod embedded;
mod follow;
pub mod patience;

pub use blocking::BlockingClient;
pub use client::{Client, PutOptions, PutProgress};
pub use patience::Patience;
