//! The crate's one error enum.

use std::time::Duration;

/// What went wrong talking to etcd.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EtcdError {
    /// An endpoint is not a usable URL.
    #[error("bad etcd endpoint {endpoint:?}: {reason}")]
    Endpoint {
        /// The endpoint as given.
        endpoint: String,
        /// Why it is refused.
        reason: String,
    },
    /// No endpoint answered a connection.
    #[error("cannot reach etcd at {endpoints}: {reason}")]
    Connect {
        /// The endpoints tried, comma-separated.
        endpoints: String,
        /// The last endpoint's error.
        reason: String,
    },
    /// A call failed with a gRPC status.
    #[error("etcd {call} at {endpoint} failed: {code:?}: {message}")]
    Rpc {
        /// The endpoint that answered.
        endpoint: String,
        /// The RPC, as `KV/Range`.
        call: &'static str,
        /// The gRPC status code.
        code: tonic::Code,
        /// The status message.
        message: String,
    },
    /// A call got no answer in time (a paused or partitioned etcd).
    #[error("etcd {call} at {endpoint} did not answer within {timeout:?}")]
    Timeout {
        /// The endpoint called.
        endpoint: String,
        /// The RPC, as `KV/Range`.
        call: &'static str,
        /// How long the call waited.
        timeout: Duration,
    },
    /// etcd says the lease is gone (expired or revoked).
    #[error("etcd lease {lease:x} expired or was revoked")]
    LeaseExpired {
        /// The lease id.
        lease: i64,
    },
    /// The keep-alive stream of a lease broke; the lease may still run out.
    #[error("etcd lease {lease:x}: keep-alive stream lost: {reason}")]
    LeaseLost {
        /// The lease id.
        lease: i64,
        /// What broke.
        reason: String,
    },
    /// etcd canceled a watch (or its stream ended).
    #[error("etcd watch on {prefix:?} canceled: {reason}")]
    WatchCanceled {
        /// The watched prefix, lossily as text.
        prefix: String,
        /// etcd's reason, or what broke.
        reason: String,
    },
    /// A watch asked for revisions etcd has compacted away.
    #[error("etcd watch on {prefix:?} from revision {start_revision}: compacted; the oldest kept is {compact_revision}")]
    WatchCompacted {
        /// The watched prefix, lossily as text.
        prefix: String,
        /// The revision asked for.
        start_revision: i64,
        /// etcd's compaction revision: watch from here or later.
        compact_revision: i64,
    },
    /// etcd answered something this client cannot use.
    #[error("bad etcd answer to {call}: {reason}")]
    BadResponse {
        /// The RPC, as `KV/Range`.
        call: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// The thread of a [`crate::blocking::Etcd`] is gone.
    #[error("the etcd client thread is gone")]
    Closed,
}

impl EtcdError {
    /// Whether trying again later may succeed: etcd or the way to it was
    /// down, slow or busy, or a stream broke. A transient error of a write
    /// does not say whether the write was applied (read before retrying a
    /// write that is not idempotent). Bad input, a lost lease, a compacted
    /// watch and etcd's refusals are not transient.
    pub fn is_transient(&self) -> bool {
        use tonic::Code;
        match self {
            EtcdError::Connect { .. }
            | EtcdError::Timeout { .. }
            | EtcdError::LeaseLost { .. }
            | EtcdError::WatchCanceled { .. } => true,
            EtcdError::Rpc { code, .. } => matches!(
                code,
                Code::Unavailable
                    | Code::Unknown
                    | Code::DeadlineExceeded
                    | Code::ResourceExhausted
            ),
            EtcdError::Endpoint { .. }
            | EtcdError::LeaseExpired { .. }
            | EtcdError::WatchCompacted { .. }
            | EtcdError::BadResponse { .. }
            | EtcdError::Closed => false,
        }
    }
}

/// The crate's result type.
pub type Result<T, E = EtcdError> = std::result::Result<T, E>;
