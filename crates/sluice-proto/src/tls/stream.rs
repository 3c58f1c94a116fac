//! TLS on the data plane: blocking connections, as the data plane's
//! threads use them ([`Conn`]).
//!
//! The handshake completes before a request is read or written, within
//! the socket's timeouts. Records are as large as TLS allows (16 KiB):
//! callers write through large buffers, never a few bytes at a time, and
//! one write of up to [`SEND_LIMIT`] bytes is encrypted at once and goes
//! out in one system call. Records arrive through a large buffer
//! ([`Sock`]), and a read decrypts every whole record already received
//! that fits the caller's buffer, so a large transfer costs a system call
//! per [`SOCK_BUFFER`] bytes each way, as in plaintext.

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;

use rustls::{ClientConnection, ServerConnection, StreamOwned};

use super::Tls;
use crate::ClusterError;

/// The encrypted bytes a TLS connection takes in from one write before
/// sending them (rustls' default, 64 KiB, would split a 256 KiB write in
/// four system calls).
pub const SEND_LIMIT: usize = 1 << 20;
/// The read buffer under a TLS connection: rustls asks the socket for at
/// most 4 KiB at a time, a system call per quarter record without it.
pub const SOCK_BUFFER: usize = 256 << 10;

/// The socket under a TLS connection: read through a [`SOCK_BUFFER`]
/// buffer, written directly.
#[derive(Debug)]
pub struct Sock(BufReader<TcpStream>);

impl Sock {
    fn new(tcp: TcpStream) -> Sock {
        Sock(BufReader::with_capacity(SOCK_BUFFER, tcp))
    }

    /// Whether received bytes wait in the buffer (reading them does not
    /// block).
    fn has_buffered(&self) -> bool {
        !self.0.buffer().is_empty()
    }
}

impl Read for Sock {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for Sock {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.get_mut().write(buf)
    }

    fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        self.0.get_mut().write_vectored(bufs)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.get_mut().flush()
    }
}

/// One data-plane connection: plaintext (`--insecure`) or TLS.
#[derive(Debug)]
pub enum Conn {
    Plain(TcpStream),
    Client(Box<StreamOwned<ClientConnection, Sock>>),
    Server(Box<StreamOwned<ServerConnection, Sock>>),
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
        let mut s = StreamOwned::new(conn, Sock::new(tcp));
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
        let mut s = StreamOwned::new(conn, Sock::new(tcp));
        handshake(&mut s.conn, &mut s.sock)
            .map_err(|source| ClusterError::net("TLS handshake with", peer, source))?;
        Ok(Conn::Server(Box::new(s)))
    }

    /// The TCP socket under it.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Client(s) => s.sock.0.get_ref(),
            Conn::Server(s) => s.sock.0.get_ref(),
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

fn handshake<C, D>(conn: &mut C, sock: &mut Sock) -> std::io::Result<()>
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
    conn.set_buffer_limit(Some(SEND_LIMIT));
    Ok(())
}

/// Reads plaintext into `buf`: the first record's (waiting for it), then
/// those of every record already in the socket's buffer while `buf` has
/// room, so a caller's large buffer fills in one call. Bytes read are
/// never lost to a later failure: that one comes with the next read.
fn read_records<C, D>(s: &mut StreamOwned<C, Sock>, buf: &mut [u8]) -> std::io::Result<usize>
where
    C: std::ops::DerefMut + std::ops::Deref<Target = rustls::ConnectionCommon<D>>,
    D: rustls::SideData + 'static,
{
    let mut n = s.read(buf)?;
    while n > 0 && n < buf.len() && s.sock.has_buffered() {
        match s.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    Ok(n)
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Client(s) => read_records(s, buf),
            Conn::Server(s) => read_records(s, buf),
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
