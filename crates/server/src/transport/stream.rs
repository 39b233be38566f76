//! A client connection's stream, whatever carries it (TCP, a Unix
//! socket, TLS), and its two ends as VCL names them (`client.ip`,
//! `server.ip` and the rest), a PROXY header's where it speaks for them.

use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use tokio::io::{AsyncRead, AsyncWrite};

/// A client connection's byte stream, whatever carries it: TCP
/// (`transport::tcp`), a Unix socket or TLS. The session and the steps read and write it as
/// bytes (a PROXY header is read off its start by the session).
pub(crate) trait ClientStream: AsyncRead + AsyncWrite + Unpin + Send + Sync {
    /// The TCP socket underneath, for socket options, lingering and an
    /// include's duplicate; None for a stream without one.
    fn socket(&self) -> Option<BorrowedFd<'_>>;

    /// Whether ending the stream takes more than closing it (TLS's
    /// `close_notify`). Closing a TCP or Unix socket sends its end of
    /// stream itself: a `shutdown` first would be one more system call
    /// a connection.
    fn needs_shutdown(&self) -> bool {
        true
    }
}

impl ClientStream for tokio::net::UnixStream {
    fn socket(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    fn needs_shutdown(&self) -> bool {
        false
    }
}

/// An address as text, as `Display` writes it (an IPv4-mapped IPv6
/// address as the IPv4 one), held inline: made once per connection, it
/// was an allocation of its own.
#[derive(Clone, Copy)]
pub(crate) struct IpText {
    len: u8,
    /// The longest IPv6 text is 45 bytes.
    text: [u8; 46],
}

impl IpText {
    /// An IPv4 address (nearly every client's) is written without the
    /// formatter.
    pub fn new(ip: std::net::IpAddr) -> IpText {
        use std::io::Write;
        let mut text = [0u8; 46];
        let mut rest = &mut text[..];
        match ip.to_canonical() {
            std::net::IpAddr::V4(v4) => {
                for (i, octet) in v4.octets().into_iter().enumerate() {
                    let digits = [
                        b'0' + octet / 100,
                        b'0' + octet / 10 % 10,
                        b'0' + octet % 10,
                    ];
                    let skip = if octet >= 100 {
                        0
                    } else if octet >= 10 {
                        1
                    } else {
                        2
                    };
                    let _ = rest.write_all(&b"."[..usize::from(i > 0)]);
                    let _ = rest.write_all(&digits[skip..]);
                }
            }
            v6 => {
                let _ = write!(rest, "{v6}");
            }
        }
        let len = 46 - rest.len();
        IpText {
            len: len as u8,
            text,
        }
    }
}

impl IpText {
    /// The text's bytes, without the UTF-8 check a `str` takes (the log
    /// writes them for every request).
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.text[..usize::from(self.len)]
    }
}

impl std::ops::Deref for IpText {
    type Target = str;

    fn deref(&self) -> &str {
        std::str::from_utf8(&self.text[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl AsRef<[u8]> for IpText {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}

impl std::fmt::Display for IpText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

/// Where a connection is from and to, as VCL's variables name them
/// (vcl-var(7)): the socket's own two ends, and the client and server a
/// PROXY header speaks for (the socket's ends without one). A Unix
/// socket's ends are 0.0.0.0 port 0.
pub(crate) struct SessAddrs {
    /// `client.ip`.
    pub client: SocketAddr,
    /// `client.ip` as text, formatted once per connection.
    pub client_ip: IpText,
    /// The same as a shared value, made when a request first appends it
    /// to `X-Forwarded-For`: the connection's later requests take it
    /// without an allocation.
    client_ip_value: std::sync::OnceLock<bytes::Bytes>,
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
    /// The `Alt-Svc` field its responses carry: on a TLS listener that
    /// also speaks HTTP/3, over TCP.
    pub alt_svc: Option<bytes::Bytes>,
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
            client_ip: IpText::new(remote.ip()),
            client_ip_value: std::sync::OnceLock::new(),
            server: local,
            remote,
            local,
            listener,
            endpoint,
            proxy: None,
            peer_cred: None,
            tls: None,
            alt_svc: None,
        }
    }

    /// `client.ip`'s text as a value a header can hold.
    pub fn client_ip_value(&self) -> bytes::Bytes {
        self.client_ip_value
            .get_or_init(|| bytes::Bytes::from_owner(self.client_ip))
            .clone()
    }

    /// Takes the client and server a PROXY header names.
    pub fn proxied(&mut self, header: lacquer_http::proxy::ProxyHeader) {
        if let Some((client, server)) = header.addrs {
            self.client = client;
            self.client_ip = IpText::new(client.ip());
            self.client_ip_value = std::sync::OnceLock::new();
            self.server = server;
        }
        self.proxy = Some(header);
    }
}

#[cfg(test)]
mod tests {
    use super::{IpText, SessAddrs};
    use std::net::IpAddr;

    /// `X-Forwarded-For`'s value is made once a connection, and made
    /// again for the client a PROXY header names.
    #[test]
    fn the_client_ip_value_is_made_once_and_follows_a_proxy_header() {
        let mut addrs = SessAddrs::new(
            "10.0.0.1:4000".parse().unwrap(),
            "10.0.0.2:80".parse().unwrap(),
            std::sync::Arc::from("a0"),
            std::sync::Arc::from(":80"),
        );
        let first = addrs.client_ip_value();
        assert_eq!(first, "10.0.0.1");
        assert_eq!(addrs.client_ip_value().as_ptr(), first.as_ptr(), "shared");
        addrs.proxied(lacquer_http::proxy::ProxyHeader {
            version: 1,
            addrs: Some((
                "192.0.2.7:1".parse().unwrap(),
                "10.0.0.2:80".parse().unwrap(),
            )),
            tlvs: Vec::new(),
        });
        assert_eq!(addrs.client_ip_value(), "192.0.2.7");
        assert_eq!(&*addrs.client_ip, "192.0.2.7");
    }

    #[test]
    fn an_address_reads_as_display_writes_it() {
        for text in [
            "0.0.0.0",
            "10.0.0.1",
            "192.168.100.255",
            "255.255.255.255",
            "1.20.199.9",
            "::1",
            "2001:db8::8a2e:370:7334",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ] {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(&*IpText::new(ip), text);
            assert_eq!(IpText::new(ip).to_string(), ip.to_string());
        }
        // A mapped IPv4 address is the IPv4 one, as VCL sees it.
        let mapped: IpAddr = "::ffff:192.0.2.128".parse().unwrap();
        assert_eq!(&*IpText::new(mapped), "192.0.2.128");
        let mut logged = Vec::new();
        lacquer_shm::record::push_ip(&mut logged, mapped);
        assert_eq!(IpText::new(mapped).as_bytes(), &logged[..]);
    }
}
