//! TLS to a backend (`.ssl = 1`): the connector and the name it sends as
//! SNI and checks the certificate against, and the stream a TLS
//! connection is, pooled and probed like any other.

use crate::{BackendStream, Stream};
use std::net::SocketAddr;
use std::time::Duration;
use tokio_rustls::rustls::pki_types::ServerName;

/// How a backend's connections speak TLS.
#[derive(Clone)]
pub struct BackendTls {
    pub connector: tokio_rustls::TlsConnector,
    /// The name sent as SNI (when the connector sends one) and checked.
    pub name: ServerName<'static>,
    /// What tells its connections from others on the same address: the
    /// name and how they were checked (for pools and probes).
    pub key: String,
    /// ALPN offers `h2`: connections that settle on it speak HTTP/2.
    pub offers_h2: bool,
}

impl std::fmt::Debug for BackendTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendTls")
            .field("key", &self.key)
            .finish()
    }
}

impl BackendTls {
    /// The handshake over a fresh connection, within `limit`.
    pub async fn wrap(&self, stream: Stream, limit: Duration) -> std::io::Result<Stream> {
        let handshake = self.connector.connect(self.name.clone(), stream);
        match tokio::time::timeout(limit, handshake).await {
            Ok(Ok(tls)) => Ok(Box::new(tls)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "TLS handshake timed out",
            )),
        }
    }
}

/// What a backend connection's TLS handshake settled, for VCL (vmod tls
/// in `vcl_backend_response`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlsDetails {
    pub version: &'static str,
    /// The suite as rustls names it (`TLS13_AES_128_GCM_SHA256`).
    pub cipher: &'static str,
    pub alpn: Option<&'static str>,
}

impl BackendStream for tokio_rustls::client::TlsStream<Stream> {
    fn tls(&self) -> Option<TlsDetails> {
        use tokio_rustls::rustls::ProtocolVersion;
        let c = self.get_ref().1;
        Some(TlsDetails {
            version: match c.protocol_version()? {
                ProtocolVersion::TLSv1_3 => "TLSv1.3",
                _ => "TLSv1.2",
            },
            cipher: c
                .negotiated_cipher_suite()
                .and_then(|s| s.suite().as_str())
                .unwrap_or(""),
            alpn: match c.alpn_protocol() {
                Some(b"http/1.1") => Some("http/1.1"),
                Some(b"h2") => Some("h2"),
                _ => None,
            },
        })
    }

    fn fd(&self) -> i32 {
        self.get_ref().0.fd()
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        self.get_ref().0.local_addr()
    }

    /// Readable underneath means the backend closed it or said something
    /// unasked (a close_notify): either way it is done with.
    fn is_quiet(&self) -> bool {
        self.get_ref().0.is_quiet()
    }

    /// Moves the connection underneath; the TLS state stays as it is.
    fn rebind(mut self: Box<Self>) -> std::io::Result<Stream> {
        let (io, _) = self.get_mut();
        let under = std::mem::replace(io, Box::new(Moving));
        *io = under.rebind()?;
        Ok(self)
    }
}

/// What stands under a TLS connection for the moment its own connection
/// is being moved ([`BackendStream::rebind`]); a connection left with it
/// (the move failed) is dropped, never read or written.
#[derive(Debug)]
struct Moving;

fn moving() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::NotConnected, "connection being moved")
}

impl tokio::io::AsyncRead for Moving {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Err(moving()))
    }
}

impl tokio::io::AsyncWrite for Moving {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::task::Poll::Ready(Err(moving()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Err(moving()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Err(moving()))
    }
}

impl BackendStream for Moving {
    fn fd(&self) -> i32 {
        -1
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        None
    }

    fn is_quiet(&self) -> bool {
        false
    }

    fn rebind(self: Box<Self>) -> std::io::Result<Stream> {
        Err(moving())
    }
}
