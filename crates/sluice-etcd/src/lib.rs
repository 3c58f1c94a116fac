//! A small etcd v3 client for Sluice: key-value reads and writes,
//! transactions, leases and watches.
//!
//! # The subset
//!
//! `proto/etcd.proto` is a hand-written subset of etcd's v3 gRPC API
//! (`api/etcdserverpb/rpc.proto` and `api/mvccpb/kv.proto`): the `KV`
//! service's `Range`, `Put`, `DeleteRange` and `Txn`; `Lease`'s
//! `LeaseGrant`, `LeaseRevoke` and `LeaseKeepAlive`; and `Watch`. It keeps
//! etcd's package name, so the gRPC paths are etcd's
//! (`/etcdserverpb.KV/Range`, ...), and etcd's exact field numbers, so it
//! is wire-compatible with etcd 3.4 and later. It exists because building
//! Sluice needs no `protoc`: the `etcd-client` crate's build script runs
//! `protoc`, while this crate compiles its file with protox (a protobuf
//! compiler in Rust) as `sluice-proto` does.
//!
//! # The client
//!
//! [`Etcd`] is async (tokio) and cheap to clone. It takes one or more
//! endpoints of one etcd cluster; calls go to the current endpoint. A call
//! that surely did not reach etcd (no connection, or etcd had no leader)
//! moves to the next endpoint and is sent again there; a read that failed
//! otherwise for want of etcd (its connection broke, etcd said it is
//! unavailable) is too, but a write is not (it may have been applied): it
//! fails, and [`EtcdError::is_transient`] says so. Connecting
//! and every call have timeouts ([`CONNECT_TIMEOUT`], and [`CALL_TIMEOUT`]
//! unless [`Etcd::with_call_timeout`] sets another), so a dead or frozen
//! etcd gives an [`EtcdError`], never a hang. Only equality
//! compares are offered in transactions. A prefix is etcd's key range
//! from the prefix to the first key past every key that starts with it;
//! the empty prefix is every key.
//!
//! Leases: [`Etcd::grant`] asks for a TTL in whole seconds; etcd raises it
//! to its minimum, 1.5 election timeouts rounded up to a second (2 s with
//! etcd's default 1 s election timeout), and expires leases on a 500 ms
//! tick, so a key can outlive its lease's TTL by up to about half a second.
//! A [`Keeper`] renews one lease over etcd's keep-alive stream; after its
//! first error it is spent.
//!
//! Watches: [`Etcd::watch_prefix`] from a past revision first delivers the
//! changes made since, then live ones, as [`WatchBatch`]es in revision
//! order. A start revision etcd has compacted away gives
//! [`EtcdError::WatchCompacted`]; a broken stream gives
//! [`EtcdError::WatchCanceled`] (watch again from the last revision seen
//! plus one).
//!
//! ```no_run
//! # async fn f() -> sluice_etcd::Result<()> {
//! use sluice_etcd::{Compare, Etcd, Op, Txn};
//! use std::time::Duration;
//!
//! let etcd = Etcd::connect(&["127.0.0.1:2379".to_string()]).await?;
//! let lease = etcd.grant(Duration::from_secs(5)).await?;
//! // Become the leader only if nobody is.
//! let won = etcd
//!     .txn(Txn {
//!         compare: vec![Compare::CreateRevision { key: b"leader".to_vec(), equals: 0 }],
//!         success: vec![Op::Put { key: b"leader".to_vec(), value: b"me".to_vec(), lease: Some(lease.id) }],
//!         failure: vec![Op::Get { key: b"leader".to_vec() }],
//!     })
//!     .await?;
//! let mut keeper = etcd.keeper(lease.id).await?;
//! let mut watch = etcd.watch_prefix(b"jobs/", won.revision + 1).await?;
//! let mut renew = tokio::time::interval(lease.ttl / 3);
//! loop {
//!     tokio::select! {
//!         batch = watch.next() => println!("{} changes", batch?.events.len()),
//!         _ = renew.tick() => { keeper.keep_alive().await?; }
//!     }
//! }
//! # }
//! ```
//!
//! # The blocking facade
//!
//! [`blocking::Etcd`] runs the async client on a thread of its own with a
//! current-thread runtime, and offers synchronous `txn`, `get_prefix` and
//! `put`, callable from plain threads and from inside a tokio runtime.
//!
//! # The test server
//!
//! With the `testing` feature, `testing::EtcdServer` runs a throwaway
//! one-member etcd (the `etcd` binary from `PATH`, or `$SLUICE_ETCD`) on
//! free loopback ports in a temporary directory, and kills it on drop; it
//! can be stopped, restarted on the same ports and data, paused (SIGSTOP)
//! and resumed. A missing `etcd` binary is a panic saying to install
//! Debian's `etcd-server` package, never a skipped test.

mod client;
mod error;
mod lease;
mod types;
mod watch;

pub mod blocking;
#[cfg(feature = "testing")]
pub mod testing;

pub use client::{Etcd, CALL_TIMEOUT, CONNECT_TIMEOUT};
pub use error::{EtcdError, Result};
pub use lease::Keeper;
/// The gRPC status codes of [`EtcdError::Rpc`].
pub use tonic::Code;
pub use types::{Compare, Event, EventKind, Kv, Lease, Op, Txn, TxnOutcome, WatchBatch};
pub use watch::Watcher;

/// The generated etcd API subset (client side).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub(crate) mod proto {
    tonic::include_proto!("etcdserverpb");
}
