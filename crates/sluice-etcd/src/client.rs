//! The async client: connection, fail-over and the key-value calls.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tonic::transport::{Channel, Endpoint};

use crate::proto::kv_client::KvClient;
use crate::types::{header_revision, prefix_range, range_request};
use crate::{proto, EtcdError, Kv, Result, Txn, TxnOutcome};

/// How long opening a connection to one endpoint may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one call may wait for its answer, unless
/// [`Etcd::with_call_timeout`] says otherwise.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Keys per page when `get_prefix` reads a range.
const PAGE: i64 = 1000;
/// The largest answer decoded (etcd's own default request limit is 1.5 MiB;
/// a range page of large values can exceed it).
const MAX_MESSAGE: usize = 64 << 20;

/// One endpoint: its URL and its (lazily connecting) channel.
#[derive(Debug)]
pub(crate) struct Member {
    pub(crate) url: String,
    pub(crate) channel: Channel,
}

/// An etcd client over one or more endpoints of one cluster. Calls go to
/// the current endpoint; when it cannot be reached the next one is tried,
/// and stays current. Cheap to clone: clones share the connections.
#[derive(Debug, Clone)]
pub struct Etcd {
    members: Arc<Vec<Member>>,
    current: Arc<AtomicUsize>,
    call_timeout: Duration,
}

/// `127.0.0.1:2379` or `http://127.0.0.1:2379` as an http URL.
fn endpoint_url(endpoint: &str) -> String {
    if endpoint.contains("://") {
        endpoint.to_string()
    } else {
        format!("http://{endpoint}")
    }
}

fn member(endpoint: &str) -> Result<Member> {
    let url = endpoint_url(endpoint.trim());
    let bad = |reason: String| EtcdError::Endpoint {
        endpoint: endpoint.to_string(),
        reason,
    };
    if !url.starts_with("http://") {
        return Err(bad("only http:// endpoints are supported".into()));
    }
    let channel = Endpoint::from_shared(url.clone())
        .map_err(|e| bad(e.to_string()))?
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(5))
        .keep_alive_while_idle(true)
        .connect_lazy();
    Ok(Member { url, channel })
}

/// Whether a call is safe to send twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// A read: retried on the next endpoint whenever the current one fails.
    Idempotent,
    /// A write: retried only when it cannot have reached etcd.
    Once,
}

/// What to do after a failed call: `None` to give up, else move to the
/// next endpoint, and whether to send the call again there.
fn after_failure(s: &tonic::Status, retry: Retry) -> Option<bool> {
    if not_sent(s) {
        return Some(true);
    }
    // etcd's own Unavailable (a leader change, a request that timed out in
    // raft) or a connection that broke under the call: it may have been
    // applied.
    let uncertain = match s.code() {
        tonic::Code::Unavailable => true,
        tonic::Code::Unknown => broken_connection(s),
        _ => false,
    };
    uncertain.then_some(retry == Retry::Idempotent)
}

/// Whether the request surely never reached etcd's state machine: no
/// connection could be made, or etcd had no leader to propose it to.
fn not_sent(s: &tonic::Status) -> bool {
    let mut cur = std::error::Error::source(s);
    while let Some(e) = cur {
        if e.is::<tonic::ConnectError>() {
            return true;
        }
        cur = e.source();
    }
    s.code() == tonic::Code::Unavailable && s.message() == "etcdserver: no leader"
}

fn broken_connection(s: &tonic::Status) -> bool {
    std::error::Error::source(s).is_some_and(|e| e.is::<tonic::transport::Error>())
}

impl Etcd {
    /// Connects to the first endpoint of `endpoints` that answers (each
    /// given as `host:port` or `http://host:port`); an error, not a hang,
    /// when none does within [`CONNECT_TIMEOUT`] each.
    pub async fn connect(endpoints: &[String]) -> Result<Etcd> {
        if endpoints.is_empty() {
            return Err(EtcdError::Endpoint {
                endpoint: String::new(),
                reason: "no endpoint".into(),
            });
        }
        let members = endpoints
            .iter()
            .map(|e| member(e))
            .collect::<Result<Vec<_>>>()?;
        let etcd = Etcd {
            members: Arc::new(members),
            current: Arc::new(AtomicUsize::new(0)),
            call_timeout: CALL_TIMEOUT,
        };
        etcd.first_reachable().await?;
        Ok(etcd)
    }

    /// Makes the first endpoint that accepts a connection current.
    async fn first_reachable(&self) -> Result<()> {
        let mut reason = String::new();
        for (i, m) in self.members.iter().enumerate() {
            let ep = Endpoint::from_shared(m.url.clone()).expect("checked in member()");
            match ep.connect_timeout(CONNECT_TIMEOUT).connect().await {
                Ok(_) => {
                    self.current.store(i, Ordering::Relaxed);
                    return Ok(());
                }
                Err(e) => reason = format!("{}: {}", m.url, source_chain(&e)),
            }
        }
        let endpoints = self
            .members
            .iter()
            .map(|m| m.url.as_str())
            .collect::<Vec<_>>();
        Err(EtcdError::Connect {
            endpoints: endpoints.join(","),
            reason,
        })
    }

    /// This client with calls, keep-alive answers and watch confirmations
    /// timing out after `timeout` (a lease holder wants it well under the
    /// lease's TTL). Connecting keeps its own [`CONNECT_TIMEOUT`].
    pub fn with_call_timeout(mut self, timeout: Duration) -> Etcd {
        self.call_timeout = timeout;
        self
    }

    /// How long a call may wait for its answer.
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// The endpoints, in the order given.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.url.clone()).collect()
    }

    /// The current endpoint's URL and channel.
    pub(crate) fn current(&self) -> (usize, &Member) {
        let i = self.current.load(Ordering::Relaxed) % self.members.len();
        (i, &self.members[i])
    }

    /// Moves on from endpoint `failed` (unless another call already did).
    pub(crate) fn fail_over(&self, failed: usize) {
        let next = (failed + 1) % self.members.len();
        let moved =
            self.current
                .compare_exchange(failed, next, Ordering::Relaxed, Ordering::Relaxed);
        if moved.is_ok() && next != failed {
            let (from, to) = (&self.members[failed].url, &self.members[next].url);
            tracing::warn!("etcd at {from} failed a call; moving to {to}");
        }
    }

    /// Runs a unary call on the current endpoint, trying each other
    /// endpoint in turn, then the first again (its channel reconnects),
    /// while the call finds etcd unavailable (or, for an idempotent call,
    /// while the connection breaks under it, as when etcd restarted).
    pub(crate) async fn unary<T, F, Fut>(&self, call: &'static str, retry: Retry, f: F) -> Result<T>
    where
        F: Fn(Channel) -> Fut,
        Fut: Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        let mut last = None;
        for _ in 0..=self.members.len() {
            let (i, m) = self.current();
            match tokio::time::timeout(self.call_timeout, f(m.channel.clone())).await {
                Ok(Ok(r)) => return Ok(r.into_inner()),
                Ok(Err(s)) => {
                    let e = rpc_error(&m.url, call, &s);
                    let again = after_failure(&s, retry).ok_or_else(|| e.clone())?;
                    self.fail_over(i);
                    if !again {
                        return Err(e);
                    }
                    last = Some(e);
                }
                Err(_) => {
                    // The request may have been applied: no retry, but the
                    // next call tries the next endpoint.
                    self.fail_over(i);
                    let endpoint = m.url.clone();
                    return Err(EtcdError::Timeout {
                        endpoint,
                        call,
                        timeout: self.call_timeout,
                    });
                }
            }
        }
        Err(last.expect("at least one endpoint"))
    }

    async fn range(&self, req: proto::RangeRequest) -> Result<proto::RangeResponse> {
        self.unary("KV/Range", Retry::Idempotent, |ch| {
            let req = req.clone();
            async move { kv_client(ch).range(req).await }
        })
        .await
    }

    /// Reads one key: the store's revision and the key, if it exists.
    pub async fn get(&self, key: &[u8]) -> Result<(i64, Option<Kv>)> {
        let r = self.range(range_request(key, Vec::new())).await?;
        let revision = header_revision(r.header.as_ref(), "KV/Range")?;
        Ok((revision, r.kvs.into_iter().next().map(Kv::from)))
    }

    /// Reads every key that starts with `prefix`, in key order, as of one
    /// revision (returned), in pages of a thousand keys.
    pub async fn get_prefix(&self, prefix: &[u8]) -> Result<(i64, Vec<Kv>)> {
        let (key, end) = prefix_range(prefix);
        let mut req = range_request(&key, end);
        req.limit = PAGE;
        let mut kvs = Vec::new();
        loop {
            let r = self.range(req.clone()).await?;
            let revision = header_revision(r.header.as_ref(), "KV/Range")?;
            let last = r.kvs.last().map(|kv| kv.key.clone());
            kvs.extend(r.kvs.into_iter().map(Kv::from));
            match last {
                Some(mut key) if r.more => {
                    // The next page starts just after the last key, at the
                    // first page's revision.
                    key.push(0);
                    req.key = key;
                    if req.revision == 0 {
                        req.revision = revision;
                    }
                }
                _ => {
                    return Ok((
                        if req.revision == 0 {
                            revision
                        } else {
                            req.revision
                        },
                        kvs,
                    ))
                }
            }
        }
    }

    /// Writes `key`, attached to `lease` if given; returns the revision.
    pub async fn put(&self, key: &[u8], value: &[u8], lease: Option<i64>) -> Result<i64> {
        let req = proto::PutRequest {
            key: key.to_vec(),
            value: value.to_vec(),
            lease: lease.unwrap_or(0),
            prev_kv: false,
        };
        let r = self
            .unary("KV/Put", Retry::Once, |ch| {
                let req = req.clone();
                async move { kv_client(ch).put(req).await }
            })
            .await?;
        header_revision(r.header.as_ref(), "KV/Put")
    }

    /// Deletes every key that starts with `prefix`; returns the revision.
    pub async fn delete_prefix(&self, prefix: &[u8]) -> Result<i64> {
        let (key, range_end) = prefix_range(prefix);
        let req = proto::DeleteRangeRequest {
            key,
            range_end,
            prev_kv: false,
        };
        let r = self
            .unary("KV/DeleteRange", Retry::Once, |ch| {
                let req = req.clone();
                async move { kv_client(ch).delete_range(req).await }
            })
            .await?;
        header_revision(r.header.as_ref(), "KV/DeleteRange")
    }

    /// Runs a transaction atomically.
    pub async fn txn(&self, txn: Txn) -> Result<TxnOutcome> {
        let req = txn.into_wire();
        let r = self
            .unary("KV/Txn", Retry::Once, |ch| {
                let req = req.clone();
                async move { kv_client(ch).txn(req).await }
            })
            .await?;
        TxnOutcome::from_wire(r)
    }
}

impl Etcd {
    /// Discards the history before `revision` (watches from earlier
    /// revisions then fail with [`EtcdError::WatchCompacted`]); returns
    /// the store's revision.
    pub async fn compact(&self, revision: i64) -> Result<i64> {
        let req = proto::CompactionRequest {
            revision,
            physical: false,
        };
        let r = self
            .unary("KV/Compact", Retry::Idempotent, |ch| async move {
                kv_client(ch).compact(req).await
            })
            .await?;
        header_revision(r.header.as_ref(), "KV/Compact")
    }
}

fn kv_client(ch: Channel) -> KvClient<Channel> {
    KvClient::new(ch).max_decoding_message_size(MAX_MESSAGE)
}

pub(crate) fn rpc_error(endpoint: &str, call: &'static str, s: &tonic::Status) -> EtcdError {
    EtcdError::Rpc {
        endpoint: endpoint.to_string(),
        call,
        code: s.code(),
        message: match std::error::Error::source(s) {
            Some(source) => source_chain_after(s.message(), source),
            None => s.message().to_string(),
        },
    }
}

/// `message` followed by what of `source`'s chain it does not say.
fn source_chain_after(message: &str, source: &dyn std::error::Error) -> String {
    let chain = source_chain(source);
    if message.contains(&chain) {
        message.to_string()
    } else if chain.contains(message) {
        chain
    } else {
        format!("{message}: {chain}")
    }
}

/// An error and its sources, as one line (tonic's transport errors say
/// little at the top), each text once.
fn source_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Chain(&'static str, Option<Box<Chain>>);
    impl std::fmt::Display for Chain {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for Chain {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|c| c as _)
        }
    }

    #[test]
    fn an_error_chain_says_each_text_once() {
        let refused = Chain("connection refused", None);
        let e = Chain(
            "tcp connect error",
            Some(Box::new(Chain(
                "tcp connect error",
                Some(Box::new(refused)),
            ))),
        );
        assert_eq!(source_chain(&e), "tcp connect error: connection refused");
        assert_eq!(
            source_chain_after("transport error", &e),
            "transport error: tcp connect error: connection refused"
        );
        assert_eq!(
            source_chain_after("tcp connect error", &e),
            "tcp connect error: connection refused"
        );
    }

    #[test]
    fn only_calls_that_cannot_have_been_applied_are_sent_twice() {
        use tonic::{Code, Status};
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let connect = Status::from_error(Box::new(tonic::ConnectError(Box::new(refused))));
        assert_eq!(connect.code(), Code::Unavailable);
        let no_leader = Status::unavailable("etcdserver: no leader");
        let leader_changed = Status::unavailable("etcdserver: leader changed");
        let refused = Status::invalid_argument("etcdserver: too many operations in txn request");
        for (status, write, read) in [
            (&connect, Some(true), Some(true)),
            (&no_leader, Some(true), Some(true)),
            (&leader_changed, Some(false), Some(true)),
            (&refused, None, None),
        ] {
            assert_eq!(after_failure(status, Retry::Once), write, "{status:?}");
            assert_eq!(after_failure(status, Retry::Idempotent), read, "{status:?}");
        }
    }

    #[tokio::test]
    async fn endpoints_are_http_urls() {
        assert_eq!(endpoint_url("127.0.0.1:2379"), "http://127.0.0.1:2379");
        assert_eq!(endpoint_url("http://h:1"), "http://h:1");
        assert!(matches!(
            member("https://h:1"),
            Err(EtcdError::Endpoint { .. })
        ));
        assert!(matches!(
            member("a host:1"),
            Err(EtcdError::Endpoint { .. })
        ));
    }
}
