//! TLS on the data plane: blocking connections, as the data plane's
//! threads use them ([`Conn`]).
//!
//! The handshake completes before a request is read or written, within
//! the socket's timeouts. Records are as large as TLS allows (16 KiB):
//! callers write through large buffers, never a few bytes at a time.

use std::io::{Read, Write};
use std::net::TcpStream;

use rustls::{ClientConnection, ServerConnection, StreamOwned};

use super::Tls;
use crate::ClusterError;

/// One data-plane connection: plaintext (`--insecure`) or TLS.
#[derive(Debug)]
pub enum Conn {
    Plain(TcpStream),
    Client(Box<StreamOwned<ClientConnection, TcpStream>>),
    Server(Box<StreamOwned<ServerConnection, TcpStream>>),
}

impl Conn {
    /// The connection to the server at `addr` over `tcp`, in TLS when
    /// `tls` is given (the server's certificate must name `addr`'s host).
    pub fn client(tcp: TcpStream, addr: &str, tls: Option<&Tls>) -> Result<Conn, ClusterError> {
        let Some(tls) = tls else {
            return Ok(Conn::Plain(tcp));
        };
        let name = super::server_name(addr)?;
        let conn = ClientConnection::new(tls.client(), name)
            .map_err(|e| ClusterError::Remote(format!("TLS with {addr}: {e}")))?;
        let mut s = StreamOwned::new(conn, tcp);
        handshake(&mut s.conn, &mut s.sock)
            .map_err(|source| ClusterError::net("TLS handshake with", addr, source))?;
        Ok(Conn::Client(Box::new(s)))
    }

    /// The server's side of a connection accepted from `peer`.
    pub fn server(tcp: TcpStream, peer: &str, tls: Option<&Tls>) -> Result<Conn, ClusterError> {
        let Some(tls) = tls else {
            return Ok(Conn::Plain(tcp));
        };
        let conn = ServerConnection::new(tls.server())
            .map_err(|e| ClusterError::Remote(format!("TLS with {peer}: {e}")))?;
        let mut s = StreamOwned::new(conn, tcp);
        handshake(&mut s.conn, &mut s.sock)
            .map_err(|source| ClusterError::net("TLS handshake with", peer, source))?;
        Ok(Conn::Server(Box::new(s)))
    }

    /// The TCP socket under it.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Client(s) => &s.sock,
            Conn::Server(s) => &s.sock,
        }
    }

    /// Whether bytes travel in clear (the kernel may send files itself).
    pub fn is_plain(&self) -> bool {
        matches!(self, Conn::Plain(_))
    }

    /// Ends the TLS session cleanly (close_notify), so the peer tells a
    /// complete answer from a cut one.
    pub fn close(&mut self) {
        let _ = match self {
            Conn::Plain(_) => Ok(()),
            Conn::Client(s) => {
                s.conn.send_close_notify();
                s.flush()
            }
            Conn::Server(s) => {
                s.conn.send_close_notify();
                s.flush()
            }
        };
    }
}

fn handshake<C, D>(conn: &mut C, sock: &mut TcpStream) -> std::io::Result<()>
where
    C: std::ops::DerefMut<Target = rustls::ConnectionCommon<D>>,
    D: rustls::SideData,
{
    while conn.is_handshaking() {
        conn.complete_io(sock)?;
    }
    // The last flight (a client's Finished) goes out now, not with the
    // first request.
    while conn.wants_write() {
        conn.write_tls(sock)?;
    }
    Ok(())
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Client(s) => s.read(buf),
            Conn::Server(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Client(s) => s.write(buf),
            Conn::Server(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Client(s) => s.flush(),
            Conn::Server(s) => s.flush(),
        }
    }
}
