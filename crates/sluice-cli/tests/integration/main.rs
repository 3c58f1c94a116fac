//! The `sluice` binary's integration tests, one test binary (as ripgrep's):
//! each module tests one concern through real processes, and `support`
//! holds the helpers they share. One binary links the engine once, not
//! once a concern.
//!
//! Run one concern with its module's name as the filter, e.g.
//! `cargo test -p sluice-cli --test integration cluster::`.

mod support;

mod avro;
mod cache;
mod cell;
mod cli;
mod cluster;
mod columnar;
mod csvjson;
mod follow;
mod formats;
mod geo;
mod ha;
mod hdfs;
mod heal;
mod ids;
mod integrity;
mod iterative;
mod memory;
mod ohb;
mod parquet_out;
mod recovery;
mod rowfiles;
mod s3;
mod scheduling;
mod seqfiles;
mod sim;
mod small_files;
mod standby;
mod streaming;
mod streaming_hadoop;
mod supervise;
mod tls;
mod users;
mod web;
mod yarn;
