//! A client connection's stream, whatever carries it (TCP, a Unix
//! socket, TLS), and its two ends as VCL names them (`client.ip`,
//! `server.ip` and the rest), a PROXY header's where it speaks for them.

use std::net::SocketAddr;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// A client connection's byte stream, whatever carries it: TCP or a Unix
/// socket today, TLS next. The session and the steps read and write it as
/// bytes (a PROXY header is read off its start by the session).
pub(crate) trait ClientStream: AsyncRead + AsyncWrite + Unpin + Send + Sync {
    /// The TCP socket underneath, for socket options, lingering and an
    /// include's duplicate; None for a stream without one.
    fn socket(&self) -> Option<&TcpStream>;

    /// Whether ending the stream takes more than closing it (TLS's
    /// `close_notify`). Closing a TCP or Unix socket sends its end of
    /// stream itself: a `shutdown` first would be one more system call
    /// a connection.
    fn needs_shutdown(&self) -> bool {
        true
    }
}

impl ClientStream for TcpStream {
    fn socket(&self) -> Option<&TcpStream> {
        Some(self)
    }

    fn needs_shutdown(&self) -> bool {
        false
    }
}

impl ClientStream for tokio::net::UnixStream {
    fn socket(&self) -> Option<&TcpStream> {
        None
    }

    fn needs_shutdown(&self) -> bool {
        false
    }
}

/// An address as text, as `Display` writes it, an IPv4 one (nearly
/// every client's) without the formatter.
fn ip_text(ip: std::net::IpAddr) -> String {
    let mut out = Vec::with_capacity(15);
    lacquer_shm::record::push_ip(&mut out, ip);
    String::from_utf8(out).unwrap_or_default()
}

/// Where a connection is from and to, as VCL's variables name them
/// (vcl-var(7)): the socket's own two ends, and the client and server a
/// PROXY header speaks for (the socket's ends without one). A Unix
/// socket's ends are 0.0.0.0 port 0.
pub(crate) struct SessAddrs {
    /// `client.ip`.
    pub client: SocketAddr,
    /// `client.ip` as text, formatted once per connection.
    pub client_ip: String,
    /// `server.ip`.
    pub server: SocketAddr,
    /// `remote.ip`: the socket's peer.
    pub remote: SocketAddr,
    /// `local.ip`: the socket's own address.
    pub local: SocketAddr,
    /// `local.socket`: the name of the listener (`a0`).
    pub listener: std::sync::Arc<str>,
    /// `local.endpoint`: the listener's address as `-a` gave it.
    pub endpoint: std::sync::Arc<str>,
    /// The PROXY header the connection started with.
    pub proxy: Option<lacquer_http::proxy::ProxyHeader>,
    /// A Unix socket peer's user and group ids.
    pub peer_cred: Option<(u32, u32)>,
    /// What the TLS handshake settled, on a TLS listener.
    pub tls: Option<lacquer_vcl::TlsSession>,
}

impl SessAddrs {
    pub fn new(
        remote: SocketAddr,
        local: SocketAddr,
        listener: std::sync::Arc<str>,
        endpoint: std::sync::Arc<str>,
    ) -> Self {
        SessAddrs {
            client: remote,
            client_ip: ip_text(remote.ip()),
            server: local,
            remote,
            local,
            listener,
            endpoint,
            proxy: None,
            peer_cred: None,
            tls: None,
        }
    }

    /// Takes the client and server a PROXY header names.
    pub fn proxied(&mut self, header: lacquer_http::proxy::ProxyHeader) {
        if let Some((client, server)) = header.addrs {
            self.client = client;
            self.client_ip = ip_text(client.ip());
            self.server = server;
        }
        self.proxy = Some(header);
    }
}
