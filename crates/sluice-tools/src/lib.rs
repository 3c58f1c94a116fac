//! Sluice's tools beside the engine, as the `sluice` command runs them:
//! data set generation ([`datagen`]), the Pavlo storage tools ([`convert`],
//! [`index`]), TeraSort validation ([`teravalidate`]), hardware probes and
//! the model ([`model`]), and the benchmarks against peers
//! ([`pavlo_bench`], [`ohb_bench`], [`decoders`]). Each module holds its
//! command's flags (clap) and its work; the binary only dispatches.
//!
//! Errors are `anyhow`: every caller is a command that prints them.

pub mod conn;
pub mod convert;
pub mod datagen;
pub mod decoders;
pub mod dfsio_bench;
pub mod index;
pub mod links;
pub mod local;
pub mod model;
pub mod ohb_bench;
pub mod pavlo_bench;
pub mod progress;
mod python;
pub mod teravalidate;
pub mod transport;
pub mod units;
