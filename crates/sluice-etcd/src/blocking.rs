//! A synchronous facade: the async client on its own thread.
//!
//! [`Etcd`] owns a thread running a current-thread tokio runtime; each call
//! sends its request there and blocks on the answer. Calls are served one
//! at a time in the order sent, so writes from one caller stay ordered. It
//! works from plain threads and from inside a tokio runtime alike (the
//! caller's thread blocks; on a runtime, call it where blocking is allowed,
//! such as under a std `Mutex` on a write path that already blocks).

use std::sync::mpsc as std_mpsc;
use std::thread;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::{EtcdError, Kv, Result, Txn, TxnOutcome};

/// One call and where its answer goes.
enum Call {
    Txn(Txn, std_mpsc::Sender<Result<TxnOutcome>>),
    GetPrefix(Vec<u8>, std_mpsc::Sender<Result<(i64, Vec<Kv>)>>),
    Put(Vec<u8>, Vec<u8>, Option<i64>, std_mpsc::Sender<Result<i64>>),
}

/// A synchronous etcd client. Cheap to clone: clones share the thread,
/// which ends when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct Etcd {
    calls: mpsc::UnboundedSender<Call>,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Call")
    }
}

impl Etcd {
    /// Connects as [`crate::Etcd::connect`] does, on a new thread.
    pub fn connect(endpoints: &[String]) -> Result<Etcd> {
        Etcd::connect_with(endpoints, crate::CALL_TIMEOUT)
    }

    /// Connects with calls timing out after `call_timeout` (see
    /// [`crate::Etcd::with_call_timeout`]).
    pub fn connect_with(endpoints: &[String], call_timeout: Duration) -> Result<Etcd> {
        let (calls, rx) = mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = std_mpsc::channel();
        let endpoints = endpoints.to_vec();
        thread::Builder::new()
            .name("sluice-etcd".into())
            .spawn(move || serve(endpoints, call_timeout, rx, ready_tx))
            .map_err(|e| EtcdError::Connect {
                endpoints: String::new(),
                reason: e.to_string(),
            })?;
        ready_rx.recv().map_err(|_| EtcdError::Closed)??;
        Ok(Etcd { calls })
    }

    /// Runs a transaction; see [`crate::Etcd::txn`].
    pub fn txn(&self, txn: Txn) -> Result<TxnOutcome> {
        self.call(|tx| Call::Txn(txn, tx))
    }

    /// Reads a prefix; see [`crate::Etcd::get_prefix`].
    pub fn get_prefix(&self, prefix: &[u8]) -> Result<(i64, Vec<Kv>)> {
        self.call(|tx| Call::GetPrefix(prefix.to_vec(), tx))
    }

    /// Writes a key; see [`crate::Etcd::put`].
    pub fn put(&self, key: &[u8], value: &[u8], lease: Option<i64>) -> Result<i64> {
        self.call(|tx| Call::Put(key.to_vec(), value.to_vec(), lease, tx))
    }

    fn call<T>(&self, make: impl FnOnce(std_mpsc::Sender<Result<T>>) -> Call) -> Result<T> {
        let (tx, rx) = std_mpsc::channel();
        self.calls.send(make(tx)).map_err(|_| EtcdError::Closed)?;
        rx.recv().map_err(|_| EtcdError::Closed)?
    }
}

/// The thread: connects, reports, then serves calls until every sender is
/// gone.
fn serve(
    endpoints: Vec<String>,
    call_timeout: Duration,
    mut calls: mpsc::UnboundedReceiver<Call>,
    ready: std_mpsc::Sender<Result<()>>,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let reason = format!("cannot start a runtime: {e}");
            let _ = ready.send(Err(EtcdError::Connect {
                endpoints: endpoints.join(","),
                reason,
            }));
            return;
        }
    };
    rt.block_on(async move {
        let etcd = match crate::Etcd::connect(&endpoints).await {
            Ok(etcd) => etcd.with_call_timeout(call_timeout),
            Err(e) => return drop(ready.send(Err(e))),
        };
        let _ = ready.send(Ok(()));
        while let Some(call) = calls.recv().await {
            run(&etcd, call).await;
        }
    });
}

/// Runs one call; a caller that stopped waiting is not an error.
async fn run(etcd: &crate::Etcd, call: Call) {
    match call {
        Call::Txn(txn, tx) => drop(tx.send(etcd.txn(txn).await)),
        Call::GetPrefix(prefix, tx) => drop(tx.send(etcd.get_prefix(&prefix).await)),
        Call::Put(key, value, lease, tx) => drop(tx.send(etcd.put(&key, &value, lease).await)),
    }
}
