//! https for the web pages and `/metrics`: a listener for `axum::serve`
//! whose connections are TLS ([`Https`]), each handshake on its own
//! task. No client certificate is asked (browsers have none); the pages
//! keep their web token.

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::ServerConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::grpc::HANDSHAKE_TIMEOUT;

type Accepted = (tokio_rustls::server::TlsStream<TcpStream>, SocketAddr);

/// A TLS listener for `axum::serve`.
#[derive(Debug)]
pub struct Https {
    rx: mpsc::Receiver<Accepted>,
    local: SocketAddr,
}

impl Https {
    /// Accepts TLS connections on `listener` with `cfg`; a peer whose
    /// handshake fails or stalls is dropped without holding up others.
    pub fn new(listener: TcpListener, cfg: Arc<ServerConfig>) -> std::io::Result<Https> {
        let local = listener.local_addr()?;
        let (tx, rx) = mpsc::channel(64);
        let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    a = listener.accept() => a,
                    () = tx.closed() => return,
                };
                let Ok((tcp, peer)) = accepted else {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    let shake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp));
                    match shake.await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!("https handshake with {peer} failed: {e}"),
                        Err(_) => tracing::debug!("https handshake with {peer} timed out"),
                    }
                });
            }
        });
        Ok(Https { rx, local })
    }
}

impl axum::serve::Listener for Https {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, SocketAddr) {
        match self.rx.recv().await {
            Some(a) => a,
            // The accepting task ended (it never does while we live).
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

/// The scheme of this process's web pages: `https`, or `http` when it
/// runs `--insecure`.
pub fn scheme() -> &'static str {
    match super::current() {
        Some(_) => "https",
        None => "http",
    }
}
