//! Leases: grant, revoke, and keep alive over etcd's bidirectional stream.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

use crate::client::Retry;
use crate::proto::lease_client::LeaseClient;
use crate::{proto, Etcd, EtcdError, Lease, Result};

impl Etcd {
    /// Grants a lease of `ttl` (rounded up to whole seconds; etcd raises it
    /// to its minimum, see [`Lease::ttl`]).
    pub async fn grant(&self, ttl: Duration) -> Result<Lease> {
        let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
        let req = proto::LeaseGrantRequest {
            ttl: secs.max(1) as i64,
            id: 0,
        };
        let r = self
            .unary("Lease/LeaseGrant", Retry::Once, |ch| async move {
                LeaseClient::new(ch).lease_grant(req).await
            })
            .await?;
        if !r.error.is_empty() || r.id == 0 || r.ttl <= 0 {
            let reason = format!("id {}, ttl {}, error {:?}", r.id, r.ttl, r.error);
            return Err(EtcdError::BadResponse {
                call: "Lease/LeaseGrant",
                reason,
            });
        }
        Ok(Lease {
            id: r.id,
            ttl: Duration::from_secs(r.ttl as u64),
        })
    }

    /// Revokes a lease: every key attached to it is deleted. Revoking a
    /// lease that is already gone is [`EtcdError::LeaseExpired`].
    pub async fn revoke(&self, lease: i64) -> Result<()> {
        let req = proto::LeaseRevokeRequest { id: lease };
        let r = self
            .unary("Lease/LeaseRevoke", Retry::Once, |ch| async move {
                LeaseClient::new(ch).lease_revoke(req).await
            })
            .await;
        match r {
            Ok(_) => Ok(()),
            Err(EtcdError::Rpc {
                code: tonic::Code::NotFound,
                ..
            }) => Err(EtcdError::LeaseExpired { lease }),
            Err(e) => Err(e),
        }
    }

    /// Opens a keep-alive stream for `lease` (on the current endpoint, or
    /// the next while it is unavailable) and renews the lease once
    /// ([`EtcdError::LeaseExpired`] if it is gone). etcd sends the stream's
    /// headers with its first answer, so the first renewal goes out before
    /// the stream is awaited.
    pub async fn keeper(&self, lease: i64) -> Result<Keeper> {
        let (tx, answers) = self
            .unary("Lease/LeaseKeepAlive", Retry::Idempotent, |ch| async move {
                let (tx, rx) = mpsc::channel(4);
                let first = proto::LeaseKeepAliveRequest { id: lease };
                tx.send(first).await.expect("receiver held");
                let r = LeaseClient::new(ch)
                    .lease_keep_alive(ReceiverStream::new(rx))
                    .await?;
                Ok(r.map(|answers| (tx, answers)))
            })
            .await?;
        let timeout = self.call_timeout();
        let mut keeper = Keeper {
            lease,
            tx,
            answers,
            timeout,
            failed: None,
        };
        keeper.answer().await?;
        Ok(keeper)
    }
}

/// Keeps one lease alive: each [`Keeper::keep_alive`] renews it to its
/// full TTL. Call it at a third of the TTL or more often.
#[derive(Debug)]
pub struct Keeper {
    lease: i64,
    tx: mpsc::Sender<proto::LeaseKeepAliveRequest>,
    answers: Streaming<proto::LeaseKeepAliveResponse>,
    timeout: Duration,
    /// The first error: once a renewal failed, a late answer could be taken
    /// for the next one's, so every later call gives this error again.
    failed: Option<EtcdError>,
}

impl Keeper {
    /// The lease kept.
    pub fn lease(&self) -> i64 {
        self.lease
    }

    /// Renews the lease; returns its TTL from now. An error if etcd says it
    /// is gone ([`EtcdError::LeaseExpired`]) or the stream broke or gave no
    /// answer within the call timeout ([`EtcdError::LeaseLost`]); after an
    /// error the keeper is spent (it gives the same error again), and a new
    /// one may be made while the lease lives. Not cancel-safe: await it to
    /// the end (a dropped call leaves its answer for the next one).
    pub async fn keep_alive(&mut self) -> Result<Duration> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let r = self.renew().await;
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    async fn renew(&mut self) -> Result<Duration> {
        let lease = self.lease;
        let lost = |reason: String| EtcdError::LeaseLost { lease, reason };
        self.tx
            .send(proto::LeaseKeepAliveRequest { id: lease })
            .await
            .map_err(|_| lost("the stream is closed".into()))?;
        self.answer().await
    }

    /// Reads the answer to one renewal.
    async fn answer(&mut self) -> Result<Duration> {
        let lease = self.lease;
        let lost = |reason: String| EtcdError::LeaseLost { lease, reason };
        let timeout = self.timeout;
        let answer = tokio::time::timeout(timeout, self.answers.message())
            .await
            .map_err(|_| lost(format!("no answer within {timeout:?}")))?;
        match answer {
            Ok(Some(r)) if r.ttl <= 0 => Err(EtcdError::LeaseExpired { lease }),
            Ok(Some(r)) => Ok(Duration::from_secs(r.ttl as u64)),
            Ok(None) => Err(lost("etcd closed the stream".into())),
            Err(s) => Err(lost(format!("{:?}: {}", s.code(), s.message()))),
        }
    }
}
