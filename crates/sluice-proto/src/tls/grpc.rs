//! TLS on the control plane: the server's incoming connections
//! ([`incoming`]), the clients' connector ([`Connector`]) and the check
//! that only a worker's certificate makes the worker calls
//! ([`RoleLayer`]).
//!
//! The handshakes are ours, not tonic's, so that both sides speak TLS
//! 1.3 only with the configurations of [`super::Tls`]; tonic still sees
//! the peer's certificates (`Request::peer_certs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ServerConfig};
use tokio::net::{TcpListener, TcpStream};
use tonic::body::Body;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};

use super::{roles, Role, WORKER_CALLS};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// How long a peer has to finish its handshake; a silent or garbled one
/// is dropped then, and never holds up the others.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The TLS connections accepted on `listener`: each handshake runs on
/// its own task (one slow or garbled peer delays no other); those that
/// fail are logged and dropped. Ends when the stream is dropped.
pub fn incoming(
    listener: TcpListener,
    cfg: Arc<ServerConfig>,
) -> tokio_stream::wrappers::ReceiverStream<
    std::io::Result<tokio_rustls::server::TlsStream<TcpStream>>,
> {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                () = tx.closed() => return,
            };
            let (tcp, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("accepting a control connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => {
                        let _ = tx.send(Ok(tls)).await;
                    }
                    Ok(Err(e)) => tracing::warn!("TLS handshake with {peer} failed: {e}"),
                    Err(_) => tracing::warn!("TLS handshake with {peer} timed out"),
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// Connects a channel's TCP connections and makes them TLS, checking
/// that the server's certificate names `name`.
#[derive(Clone)]
pub struct Connector {
    cfg: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl Connector {
    pub fn new(cfg: Arc<ClientConfig>, name: ServerName<'static>) -> Connector {
        Connector { cfg, name }
    }
}

impl tower::Service<http::Uri> for Connector {
    type Response = TokioIo<tokio_rustls::client::TlsStream<TcpStream>>;
    type Error = std::io::Error;
    type Future = BoxFuture<std::io::Result<Self::Response>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let (cfg, name) = (self.cfg.clone(), self.name.clone());
        Box::pin(async move {
            let host = uri.host().unwrap_or_default();
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let port = uri.port_u16().unwrap_or(80);
            let tcp = TcpStream::connect((host, port)).await?;
            tcp.set_nodelay(true)?;
            let tls = tokio_rustls::TlsConnector::from(cfg)
                .connect(name, tcp)
                .await?;
            Ok(TokioIo::new(tls))
        })
    }
}

/// The server side: a worker call ([`WORKER_CALLS`]) from a peer whose
/// certificate is not a worker's is answered `PERMISSION_DENIED`.
#[derive(Debug, Clone, Copy)]
pub struct RoleLayer {
    enforce: bool,
}

impl RoleLayer {
    /// Checks roles when the server speaks TLS (`tls`); a plaintext one
    /// (`--insecure`) has no certificates to check.
    pub fn when(tls: bool) -> RoleLayer {
        RoleLayer { enforce: tls }
    }
}

impl<S> tower::Layer<S> for RoleLayer {
    type Service = RoleService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RoleService {
            inner,
            enforce: self.enforce,
        }
    }
}

/// [`RoleLayer`]'s service.
#[derive(Debug, Clone)]
pub struct RoleService<S> {
    inner: S,
    enforce: bool,
}

/// Why the peer of `req` may not make its call; `None` when it may.
pub fn refusal<B>(req: &http::Request<B>) -> Option<String> {
    let path = req.uri().path();
    if !WORKER_CALLS.contains(&path) {
        return None;
    }
    let certs = req
        .extensions()
        .get::<TlsConnectInfo<TcpConnectInfo>>()
        .and_then(TlsConnectInfo::peer_certs);
    let held = certs
        .as_ref()
        .and_then(|c| c.first())
        .map(|c| known_roles(c))
        .unwrap_or_default();
    if held.contains(&Role::Worker) {
        return None;
    }
    let held: Vec<&str> = held.iter().map(|r| r.name()).collect();
    let held = if held.is_empty() {
        "none".to_string()
    } else {
        held.join(", ")
    };
    Some(format!(
        "{path} needs a worker certificate; the peer's role is {held}"
    ))
}

/// Most certificates whose roles [`known_roles`] keeps.
const KNOWN_CERTIFICATES: usize = 16_384;

/// The roles of `cert` (DER), parsed once per certificate: a worker
/// sends thousands of calls a second over one connection, and parsing
/// its certificate each time was 4% of a large cluster's coordinator. A
/// certificate's roles are a function of its bytes (the handshake checked
/// its signature), so the bytes are the key. The table starts again when
/// it holds [`KNOWN_CERTIFICATES`].
fn known_roles(cert: &[u8]) -> Vec<Role> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static KNOWN: OnceLock<Mutex<HashMap<Vec<u8>, Vec<Role>>>> = OnceLock::new();
    let known = KNOWN.get_or_init(Mutex::default);
    let lock = || known.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(r) = lock().get(cert) {
        return r.clone();
    }
    let parsed = roles(cert);
    let mut table = lock();
    if table.len() >= KNOWN_CERTIFICATES {
        table.clear();
    }
    table.insert(cert.to_vec(), parsed.clone());
    parsed
}

impl<S> tower::Service<http::Request<Body>> for RoleService<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>> + Send,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = BoxFuture<Result<http::Response<Body>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        if let Some(why) = self.enforce.then(|| refusal(&req)).flatten() {
            tracing::warn!("refused a control call: {why}");
            let denied = tonic::Status::permission_denied(why).into_http();
            return Box::pin(async move { Ok(denied) });
        }
        let fut = self.inner.call(req);
        Box::pin(async move { fut.await.map_err(Into::into) })
    }
}

/// Connects `ep` (a channel to `addr`) now: in TLS with the process's
/// configuration ([`super::current`]), in plaintext without one.
pub async fn connect(
    ep: tonic::transport::Endpoint,
    addr: &str,
) -> Result<tonic::transport::Channel, BoxError> {
    let connected = match super::current() {
        Some(tls) => {
            let c = Connector::new(tls.client(), super::server_name(addr)?);
            ep.connect_with_connector(c).await
        }
        None => ep.connect().await,
    };
    connected.map_err(|e| chain(&e).into())
}

/// An error with its causes (tonic's transport error alone says only
/// "transport error", not that the peer's certificate was refused).
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s = format!("{s}: {c}");
        cause = c.source();
    }
    s
}

/// Like [`connect`], but the channel connects at its first call.
pub fn connect_lazy(
    ep: tonic::transport::Endpoint,
    addr: &str,
) -> Result<tonic::transport::Channel, crate::ClusterError> {
    match super::current() {
        Some(tls) => {
            let c = Connector::new(tls.client(), super::server_name(addr)?);
            Ok(ep.connect_with_connector_lazy(c))
        }
        None => Ok(ep.connect_lazy()),
    }
}
