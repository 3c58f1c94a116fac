//! Control-plane calls bound to their content, and refused when replayed.
//!
//! Every gRPC call carries three headers:
//!
//! ```text
//! x-sluice-ts     Unix milliseconds, decimal
//! x-sluice-nonce  16 random bytes, hex
//! x-sluice-mac    hex HMAC-SHA256(secret, "control:" ++ path ++ "\n" ++ ts ++ "\n"
//!                                 ++ nonce ++ "\n" ++ SHA-256(body))
//! x-sluice-user   (a user's call only) the user's name; the MAC is then
//!                 keyed by the user's key instead of the secret
//! ```
//!
//! The server looks the named user's key up ([`UserKeys`]); a user it
//! does not know (never added, or removed) is refused. A verified call
//! reaches the service with its [`Caller`] in the request's extensions.
//!
//! where `path` is the call's HTTP/2 path (`/sluice.v1.Coordinator/Heartbeat`)
//! and `body` its whole request body as sent (the gRPC-framed message). The
//! coordinator ([`VerifyLayer`]) reads the body, checks the MAC, the time
//! (within [`crate::auth::MAX_SKEW_MS`]) and that it has not seen the nonce
//! ([`ReplayGuard`]); a call that fails any check is answered
//! `UNAUTHENTICATED` before it reaches the service. So a captured call can
//! neither be sent again nor be changed (another method, another message).
//!
//! tonic's interceptors see only headers, so both sides are tower services
//! that hold the (small, unary) body in memory: [`Signed`] on the client's
//! channel, [`VerifyLayer`] on the server.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use sha2::{Digest, Sha256};
use tonic::body::Body;

use std::time::{Duration, Instant};

use tonic::transport::Channel;

use crate::auth::{check_skew, constant_eq, hex, Secret, MAX_SKEW_MS};
use crate::proto::coordinator_client::CoordinatorClient;
pub use crate::users::Caller;
use crate::ClusterError;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Largest control-plane message, either way (a worker's block list, a
/// data set of 100,000 small files); clients and the server decode up to
/// it.
pub const MAX_CONTROL_BODY: usize = 16 << 20;
/// How long the server waits for a request's whole body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
const TS: &str = "x-sluice-ts";
const NONCE: &str = "x-sluice-nonce";
const MAC: &str = "x-sluice-mac";
const USER: &str = "x-sluice-user";

/// Finds a user's key by name (`None`: no such user, or removed).
pub type UserKeys = Arc<dyn Fn(&str) -> Option<Secret> + Send + Sync>;

/// The MAC of one call.
pub fn call_mac(secret: &Secret, path: &str, ts: u64, nonce: &str, body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    let ts = ts.to_string();
    hex(&secret.mac(&[
        b"control:",
        path.as_bytes(),
        b"\n",
        ts.as_bytes(),
        b"\n",
        nonce.as_bytes(),
        b"\n",
        &digest,
    ]))
}

/// Adds a call's credentials to its headers.
pub fn sign(secret: &Secret, parts: &mut http::request::Parts, body: &[u8]) {
    let ts = crate::now_ms();
    let nonce = hex(&rand::random::<[u8; 16]>());
    let mac = call_mac(secret, parts.uri.path(), ts, &nonce, body);
    let h = &mut parts.headers;
    h.insert(TS, ts.to_string().parse().expect("digits"));
    h.insert(NONCE, nonce.parse().expect("hex digits"));
    h.insert(MAC, mac.parse().expect("hex digits"));
    if let Some(user) = secret.user() {
        match user.parse() {
            Ok(v) => {
                h.insert(USER, v);
            }
            Err(_) => tracing::warn!("user name {user:?} cannot be sent in a header"),
        }
    }
}

/// Nonces seen within the accepted time window: a second call with one
/// is a replay. A call timed before this guard was made (less a little
/// slack for clocks) is refused too, so that a restart, which empties the
/// guard, does not reopen the window for calls captured before it.
#[derive(Debug)]
pub struct ReplayGuard {
    started_ms: u64,
    seen: Mutex<Seen>,
}

/// Seen nonces, and the same in arrival order for eviction.
#[derive(Debug, Default)]
struct Seen {
    set: HashSet<u128>,
    order: VecDeque<(Instant, u128)>,
}

/// Clock difference between hosts a fresh guard allows.
const START_SLACK_MS: u64 = 5_000;

impl Default for ReplayGuard {
    fn default() -> Self {
        ReplayGuard {
            started_ms: crate::now_ms(),
            seen: Mutex::new(Seen::default()),
        }
    }
}

impl ReplayGuard {
    /// Records `nonce` of a call made at `ts`; refuses one already seen,
    /// or a call older than the guard.
    pub fn fresh(&self, nonce: u128, ts: u64) -> Result<(), ClusterError> {
        if ts.saturating_add(START_SLACK_MS) < self.started_ms {
            return Err(ClusterError::Auth(
                "request made before this process started refused".into(),
            ));
        }
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        // Nonces older than twice the window are refused by their time.
        let keep = Duration::from_millis(2 * MAX_SKEW_MS);
        while let Some(&(at, old)) = seen.order.front() {
            if at.elapsed() < keep {
                break;
            }
            seen.order.pop_front();
            seen.set.remove(&old);
        }
        if !seen.set.insert(nonce) {
            return Err(ClusterError::Auth("replayed request refused".into()));
        }
        seen.order.push_back((Instant::now(), nonce));
        Ok(())
    }
}

/// Checks a call's credentials against its path and body: signed with
/// the secret (an admin's call) or with the key `users` has for the user
/// it names.
pub fn verify(
    secret: &Secret,
    users: Option<&UserKeys>,
    guard: &ReplayGuard,
    parts: &http::request::Parts,
    body: &[u8],
) -> Result<Caller, ClusterError> {
    let get = |k: &str| parts.headers.get(k).and_then(|v| v.to_str().ok());
    let (caller, user_key);
    let secret = match get(USER) {
        None => {
            caller = Caller::Admin;
            secret
        }
        Some(name) => {
            let unknown = || ClusterError::Auth(format!("unknown or removed user {name}"));
            user_key = users.and_then(|f| f(name)).ok_or_else(unknown)?;
            caller = Caller::User(name.to_owned());
            &user_key
        }
    };
    let (Some(ts), Some(nonce), Some(mac)) = (get(TS), get(NONCE), get(MAC)) else {
        return Err(ClusterError::Auth("missing credentials".into()));
    };
    let ts: u64 = ts
        .parse()
        .map_err(|_| ClusterError::Auth("bad timestamp".into()))?;
    let want = call_mac(secret, parts.uri.path(), ts, nonce, body);
    if !constant_eq(want.as_bytes(), mac.as_bytes()) {
        return Err(ClusterError::Auth(
            "wrong MAC (a different secret, or an altered request?)".into(),
        ));
    }
    check_skew(ts)?;
    let nonce =
        u128::from_str_radix(nonce, 16).map_err(|_| ClusterError::Auth("bad nonce".into()))?;
    guard.fresh(nonce, ts)?;
    Ok(caller)
}

/// Refuses a call before its body is read: credentials missing, or a time
/// outside the window (no body of an unauthenticated peer is buffered
/// for long).
fn precheck(parts: &http::request::Parts) -> Result<(), ClusterError> {
    let get = |k: &str| parts.headers.get(k).and_then(|v| v.to_str().ok());
    let (Some(ts), Some(_), Some(_)) = (get(TS), get(NONCE), get(MAC)) else {
        return Err(ClusterError::Auth("missing credentials".into()));
    };
    let ts: u64 = ts
        .parse()
        .map_err(|_| ClusterError::Auth("bad timestamp".into()))?;
    check_skew(ts)
}

/// Reads a whole request body, up to [`MAX_CONTROL_BODY`].
async fn collect(body: Body) -> Result<Bytes, BoxError> {
    Ok(Limited::new(body, MAX_CONTROL_BODY)
        .collect()
        .await?
        .to_bytes())
}

/// The service polled ready, to take a call, leaving a clone in its place
/// (tower's rule for a service called from a future).
fn take_ready<S: Clone>(inner: &mut S) -> S {
    let clone = inner.clone();
    std::mem::replace(inner, clone)
}

/// A client channel that signs every call ([`sign`]).
#[derive(Debug, Clone)]
pub struct Signed<S> {
    inner: S,
    secret: Secret,
}

impl<S> Signed<S> {
    pub fn new(inner: S, secret: Secret) -> Self {
        Signed { inner, secret }
    }
}

impl<S> tower::Service<http::Request<Body>> for Signed<S>
where
    S: tower::Service<http::Request<Body>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let mut inner = take_ready(&mut self.inner);
        let secret = self.secret.clone();
        Box::pin(async move {
            let (mut parts, body) = req.into_parts();
            let bytes = collect(body).await?;
            sign(&secret, &mut parts, &bytes);
            let req = http::Request::from_parts(parts, Body::new(Full::new(bytes)));
            inner.call(req).await.map_err(Into::into)
        })
    }
}

/// The server side: refuses calls whose credentials do not verify.
#[derive(Clone)]
pub struct VerifyLayer {
    secret: Secret,
    guard: Arc<ReplayGuard>,
    users: Option<UserKeys>,
}

impl std::fmt::Debug for VerifyLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifyLayer").finish_non_exhaustive()
    }
}

impl VerifyLayer {
    pub fn new(secret: Secret) -> Self {
        VerifyLayer {
            secret,
            guard: Arc::new(ReplayGuard::default()),
            users: None,
        }
    }

    /// Also accepts calls of the users `users` knows.
    pub fn with_users(mut self, users: UserKeys) -> Self {
        self.users = Some(users);
        self
    }
}

impl<S> tower::Layer<S> for VerifyLayer {
    type Service = VerifyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        VerifyService {
            inner,
            layer: self.clone(),
        }
    }
}

/// [`VerifyLayer`]'s service.
#[derive(Clone)]
pub struct VerifyService<S> {
    inner: S,
    layer: VerifyLayer,
}

impl<S> tower::Service<http::Request<Body>> for VerifyService<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
{
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = BoxFuture<Result<http::Response<Body>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let mut inner = take_ready(&mut self.inner);
        let layer = self.layer.clone();
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            if let Err(e) = precheck(&parts) {
                tracing::warn!("refused a control call to {}: {e}", parts.uri.path());
                return Ok(tonic::Status::unauthenticated(e.to_string()).into_http());
            }
            let collected = tokio::time::timeout(BODY_TIMEOUT, collect(body)).await;
            let bytes = match collected.unwrap_or_else(|_| Err("timed out".into())) {
                Ok(b) => b,
                Err(e) => {
                    let msg = format!("unreadable request body: {e}");
                    return Ok(tonic::Status::invalid_argument(msg).into_http());
                }
            };
            let (mut parts, users) = (parts, layer.users.as_ref());
            match verify(&layer.secret, users, &layer.guard, &parts, &bytes) {
                Ok(caller) => {
                    parts.extensions.insert(caller);
                }
                Err(e) => {
                    tracing::warn!("refused a control call to {}: {e}", parts.uri.path());
                    return Ok(tonic::Status::unauthenticated(e.to_string()).into_http());
                }
            }
            let req = http::Request::from_parts(parts, Body::new(Full::new(bytes)));
            inner.call(req).await.map_err(Into::into)
        })
    }
}

/// A signed control-plane client.
pub type Rpc = CoordinatorClient<Signed<Channel>>;

/// Connects a signed client to the coordinator at `addr`, retrying for up
/// to `patience`.
pub async fn connect(addr: &str, secret: &Secret, patience: Duration) -> Result<Rpc, ClusterError> {
    let url = format!("http://{addr}");
    let deadline = Instant::now() + patience;
    loop {
        let ep = Channel::from_shared(url.clone())
            .map_err(|e| ClusterError::Config(format!("bad coordinator address {addr}: {e}")))?
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true);
        match crate::tls::grpc::connect(ep, addr).await {
            Ok(ch) => {
                let signed = crate::signed::Signed::new(ch, secret.clone());
                return Ok(CoordinatorClient::new(signed)
                    .max_decoding_message_size(MAX_CONTROL_BODY)
                    .max_encoding_message_size(MAX_CONTROL_BODY));
            }
            Err(e) if Instant::now() >= deadline => {
                return Err(ClusterError::Rpc(format!(
                    "cannot reach the coordinator at {addr}: {e}"
                )))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Layer, Service, ServiceExt};

    fn secret() -> Secret {
        Secret::new(b"0123456789abcdef0123").unwrap()
    }

    /// A service that keeps the requests it is given and answers OK.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<(http::request::Parts, Bytes)>>>);

    impl Service<http::Request<Body>> for Recorder {
        type Response = http::Response<Body>;
        type Error = BoxError;
        type Future = BoxFuture<Result<http::Response<Body>, BoxError>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<Body>) -> Self::Future {
            let log = self.0.clone();
            Box::pin(async move {
                let (parts, body) = req.into_parts();
                let bytes = collect(body).await?;
                log.lock().unwrap().push((parts, bytes));
                Ok(tonic::Status::ok("").into_http())
            })
        }
    }

    fn request(path: &str, body: &'static [u8]) -> http::Request<Body> {
        http::Request::post(path)
            .body(Body::new(Full::new(Bytes::from_static(body))))
            .unwrap()
    }

    fn grpc_status(r: &http::Response<Body>) -> String {
        r.headers()
            .get("grpc-status")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    }

    /// Sends a captured request (headers and body) to the server side.
    async fn replay<S>(
        server: &mut VerifyService<S>,
        parts: &http::request::Parts,
        body: Bytes,
    ) -> String
    where
        S: Service<http::Request<Body>, Response = http::Response<Body>, Error = BoxError>
            + Clone
            + Send
            + 'static,
        S::Future: Send,
    {
        let mut req = http::Request::new(Body::new(Full::new(body)));
        *req.uri_mut() = parts.uri.clone();
        *req.headers_mut() = parts.headers.clone();
        grpc_status(&server.ready().await.unwrap().call(req).await.unwrap())
    }

    #[test]
    fn the_guard_refuses_repeats_and_calls_older_than_itself() {
        let g = ReplayGuard::default();
        let now = crate::now_ms();
        g.fresh(1, now).unwrap();
        assert!(g.fresh(1, now).is_err(), "a repeat");
        g.fresh(2, now).unwrap();
        // Captured before a restart (this guard's start), less the slack.
        assert!(g.fresh(3, now - START_SLACK_MS - 1000).is_err());
    }

    #[tokio::test]
    async fn a_captured_call_cannot_be_replayed_or_altered() {
        // A real signed call, captured on its way out.
        let wire = Recorder::default();
        let mut client = Signed::new(wire.clone(), secret());
        let path = "/sluice.v1.Coordinator/RemoveDataset";
        client
            .ready()
            .await
            .unwrap()
            .call(request(path, b"\x00\x00\x00\x00\x07\x0a\x05words"))
            .await
            .unwrap();
        let (parts, body) = wire.0.lock().unwrap()[0].clone();
        let service = Recorder::default();
        let mut server = VerifyLayer::new(secret()).layer(service.clone());
        // Unauthenticated is 16; OK is 0.
        assert_eq!(replay(&mut server, &parts, body.clone()).await, "0");
        assert_eq!(service.0.lock().unwrap().len(), 1);
        assert_eq!(
            replay(&mut server, &parts, body.clone()).await,
            "16",
            "replayed"
        );
        // Altered: another message, or another method, under the same headers.
        let mut fresh = VerifyLayer::new(secret()).layer(service.clone());
        let other = Bytes::from_static(b"\x00\x00\x00\x00\x07\x0a\x05other");
        assert_eq!(replay(&mut fresh, &parts, other).await, "16", "body");
        let mut moved = parts.clone();
        moved.uri = "/sluice.v1.Coordinator/Info".parse().unwrap();
        assert_eq!(
            replay(&mut fresh, &moved, body.clone()).await,
            "16",
            "method"
        );
        // Another cluster's secret.
        let mut stranger =
            VerifyLayer::new(Secret::new(b"fedcba9876543210fedc").unwrap()).layer(service.clone());
        assert_eq!(replay(&mut stranger, &parts, body).await, "16");
        assert_eq!(
            service.0.lock().unwrap().len(),
            1,
            "only the first got through"
        );
    }

    /// A service that keeps the caller of each request it is given.
    #[derive(Clone, Default)]
    struct Callers(Arc<Mutex<Vec<Option<Caller>>>>);

    impl Service<http::Request<Body>> for Callers {
        type Response = http::Response<Body>;
        type Error = BoxError;
        type Future = BoxFuture<Result<http::Response<Body>, BoxError>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<Body>) -> Self::Future {
            self.0.lock().unwrap().push(req.extensions().get().cloned());
            Box::pin(async { Ok(tonic::Status::ok("").into_http()) })
        }
    }

    #[tokio::test]
    async fn a_user_call_names_its_user_and_a_removed_user_is_refused() {
        let alice = crate::users::user_key(&secret(), "alice", "s1");
        let known = Arc::new(Mutex::new(vec![("alice", "s1")]));
        let k = known.clone();
        let users: UserKeys = Arc::new(move |n: &str| {
            let k = k.lock().unwrap();
            let salt = k.iter().find(|(u, _)| *u == n)?.1;
            Some(crate::users::user_key(&secret(), n, salt))
        });
        let seen = Callers::default();
        let mut server = VerifyLayer::new(secret())
            .with_users(users)
            .layer(seen.clone());
        let path = "/sluice.v1.Coordinator/Info";
        let call = |key: Secret| {
            let wire = Recorder::default();
            let w = wire.clone();
            async move {
                let mut client = Signed::new(w, key);
                let svc = client.ready().await.unwrap();
                svc.call(request(path, b"")).await.unwrap();
                let (parts, body) = wire.0.lock().unwrap()[0].clone();
                (parts, body)
            }
        };
        let (p, b) = call(alice.clone()).await;
        assert_eq!(replay(&mut server, &p, b).await, "0");
        let (p, b) = call(secret()).await;
        assert_eq!(replay(&mut server, &p, b).await, "0");
        assert_eq!(
            *seen.0.lock().unwrap(),
            vec![Some(Caller::User("alice".into())), Some(Caller::Admin)]
        );
        // Bob's name on alice's key; a key of a user never added.
        let mut bob = call(alice.clone()).await;
        bob.0.headers.insert(USER, "bob".parse().unwrap());
        assert_eq!(replay(&mut server, &bob.0, bob.1).await, "16");
        let carol = crate::users::user_key(&secret(), "carol", "s1");
        let (p, b) = call(carol).await;
        assert_eq!(replay(&mut server, &p, b).await, "16");
        // Removed: alice's next call is refused at once.
        known.lock().unwrap().clear();
        let (p, b) = call(alice).await;
        assert_eq!(replay(&mut server, &p, b).await, "16");
        assert_eq!(seen.0.lock().unwrap().len(), 2);
    }
}
