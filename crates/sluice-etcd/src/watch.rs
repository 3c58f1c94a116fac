//! Watches over etcd's bidirectional watch stream.

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

use crate::client::Retry;
use crate::proto::watch_client::WatchClient;
use crate::types::{header_revision, prefix_range};
use crate::{proto, Etcd, EtcdError, Event, Result, WatchBatch};

const CALL: &str = "Watch/Watch";

impl Etcd {
    /// Watches every key that starts with `prefix`, from `start_revision`
    /// (changes made since then are delivered first, if etcd has not
    /// compacted them; 0 means from now on).
    pub async fn watch_prefix(&self, prefix: &[u8], start_revision: i64) -> Result<Watcher> {
        let (key, range_end) = prefix_range(prefix);
        let create = proto::WatchCreateRequest {
            key,
            range_end,
            start_revision,
            progress_notify: true,
            ..Default::default()
        };
        let first = proto::WatchRequest {
            request_union: Some(proto::watch_request::RequestUnion::CreateRequest(create)),
        };
        let (tx, answers) = self
            .unary(CALL, Retry::Idempotent, |ch| {
                let first = first.clone();
                async move {
                    let (tx, rx) = mpsc::channel(4);
                    tx.send(first).await.expect("receiver held");
                    let r = WatchClient::new(ch).watch(ReceiverStream::new(rx)).await?;
                    Ok(r.map(|answers| (tx, answers)))
                }
            })
            .await?;
        let prefix = String::from_utf8_lossy(prefix).into_owned();
        let mut w = Watcher {
            prefix,
            start_revision,
            _tx: tx,
            answers,
        };
        w.await_created(self.call_timeout()).await?;
        Ok(w)
    }
}

/// A watch on a prefix: [`Watcher::next`] gives its changes batch by batch.
#[derive(Debug)]
pub struct Watcher {
    prefix: String,
    start_revision: i64,
    /// Held so the request side of the stream stays open.
    _tx: mpsc::Sender<proto::WatchRequest>,
    answers: Streaming<proto::WatchResponse>,
}

impl Watcher {
    /// Waits for etcd to confirm the watch (or refuse it).
    async fn await_created(&mut self, timeout: std::time::Duration) -> Result<()> {
        let r = tokio::time::timeout(timeout, self.answer())
            .await
            .map_err(|_| self.canceled(format!("no confirmation within {timeout:?}")))??;
        if !r.created {
            return Err(EtcdError::BadResponse {
                call: CALL,
                reason: "the first answer does not confirm the watch".into(),
            });
        }
        Ok(())
    }

    /// The next answer, checked for cancellation.
    async fn answer(&mut self) -> Result<proto::WatchResponse> {
        let r = match self.answers.message().await {
            Ok(Some(r)) => r,
            Ok(None) => return Err(self.canceled("etcd closed the stream".into())),
            Err(s) => return Err(self.canceled(format!("{:?}: {}", s.code(), s.message()))),
        };
        if r.compact_revision != 0 {
            return Err(EtcdError::WatchCompacted {
                prefix: self.prefix.clone(),
                start_revision: self.start_revision,
                compact_revision: r.compact_revision,
            });
        }
        if r.canceled {
            return Err(self.canceled(r.cancel_reason));
        }
        Ok(r)
    }

    fn canceled(&self, reason: String) -> EtcdError {
        EtcdError::WatchCanceled {
            prefix: self.prefix.clone(),
            reason,
        }
    }

    /// The next batch of changes, in revision order; waits as long as it
    /// takes. A batch without events is a progress notice (etcd sends one
    /// every ten minutes of quiet): nothing changed up to its revision. A
    /// connection that stalls (a frozen etcd, a partition) is found by
    /// HTTP/2 pings, every 10 s with 5 s to answer, and ends the watch with
    /// [`EtcdError::WatchCanceled`]. Cancel-safe: a `select!` may drop it
    /// and call again without losing a batch.
    pub async fn next(&mut self) -> Result<WatchBatch> {
        let r = self.answer().await?;
        let revision = header_revision(r.header.as_ref(), CALL)?;
        let events = r
            .events
            .into_iter()
            .map(Event::from_wire)
            .collect::<Result<Vec<_>>>()?;
        Ok(WatchBatch { revision, events })
    }
}
