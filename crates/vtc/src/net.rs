//! The sockets actors use: TCP, or a Unix domain socket where an address
//! starts with `/` (or `@`, the abstract namespace), as varnishtest
//! recognises them in `-listen` and `-connect`.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

/// Whether an address names a Unix domain socket.
pub fn is_unix(addr: &str) -> bool {
    addr.starts_with('/') || addr.starts_with('@')
}

fn unix_addr(path: &str) -> io::Result<std::os::unix::net::SocketAddr> {
    match path.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name)
        }
        None => std::os::unix::net::SocketAddr::from_pathname(path),
    }
}

/// A connection.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    /// Connects to `host:port` (or `host port`) or a socket path.
    pub fn connect(addr: &str) -> io::Result<Stream> {
        if is_unix(addr) {
            return Ok(Stream::Unix(UnixStream::connect_addr(&unix_addr(addr)?)?));
        }
        let addr = match addr.rsplit_once(' ') {
            Some((host, port)) if !addr.contains(':') || addr.starts_with('[') => {
                format!("{host}:{port}")
            }
            _ => addr.to_string(),
        };
        let s = TcpStream::connect(&addr)?;
        let _ = s.set_nodelay(true);
        Ok(Stream::Tcp(s))
    }

    /// Sets the socket's receive buffer (`SO_RCVBUF`).
    pub fn set_rcvbuf(&self, size: usize) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => socket2::SockRef::from(s).set_recv_buffer_size(size),
            Stream::Unix(s) => socket2::SockRef::from(s).set_recv_buffer_size(size),
        }
    }

    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
        }
    }

    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
        }
    }

    pub fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }

    /// The TCP socket, for what only TCP has (urgent data).
    pub fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Stream::Tcp(s) => Some(s),
            Stream::Unix(_) => None,
        }
    }

    /// "from A to B", for the trace.
    pub fn describe(&self) -> String {
        match self {
            Stream::Tcp(s) => match (s.local_addr(), s.peer_addr()) {
                (Ok(l), Ok(p)) => format!("from {} {} to {p}", l.ip(), l.port()),
                _ => String::new(),
            },
            Stream::Unix(s) => match s.peer_addr() {
                Ok(p) => format!(
                    "to {:?}",
                    p.as_pathname().unwrap_or(std::path::Path::new("@"))
                ),
                Err(_) => String::new(),
            },
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
        }
    }
}

/// A listening socket.
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, String),
}

impl Listener {
    /// Binds `host:port` (or `host port`) or a socket path (a stale
    /// socket file there is replaced).
    pub fn bind(addr: &str) -> io::Result<Listener> {
        if is_unix(addr) {
            if !addr.starts_with('@') {
                let _ = std::fs::remove_file(addr);
            }
            let l = UnixListener::bind_addr(&unix_addr(addr)?)?;
            return Ok(Listener::Unix(l, addr.to_string()));
        }
        let addr = match addr.rsplit_once(' ') {
            Some((host, port)) => format!("{host}:{port}"),
            None => addr.to_string(),
        };
        Ok(Listener::Tcp(TcpListener::bind(addr)?))
    }

    pub fn accept(&self) -> io::Result<(Stream, String)> {
        match self {
            Listener::Tcp(l) => l.accept().map(|(s, p)| (Stream::Tcp(s), p.to_string())),
            Listener::Unix(l, path) => l.accept().map(|(s, _)| (Stream::Unix(s), path.clone())),
        }
    }

    /// The address and port its macros give (`-` as the port of a Unix
    /// socket, whose `_sock` macro is its path).
    pub fn endpoint(&self) -> io::Result<(String, String)> {
        match self {
            Listener::Tcp(l) => l
                .local_addr()
                .map(|a| (a.ip().to_string(), a.port().to_string())),
            Listener::Unix(_, path) => Ok((path.clone(), "-".to_string())),
        }
    }

    /// Wakes a thread blocked in accept on it.
    pub fn shutdown(&self) {
        let _ = match self {
            Listener::Tcp(l) => socket2::SockRef::from(l).shutdown(Shutdown::Both),
            Listener::Unix(l, _) => socket2::SockRef::from(l).shutdown(Shutdown::Both),
        };
    }
}

/// The PROXY header `-proxy1`/`-proxy2` send: `spec` is
/// "CLIENTIP:PORT SERVERIP:PORT", and for version 2 any number of
/// `name=value` fields after (names `alpn`, `authority`, `unique_id`,
/// `netns`, `noop` or `0xNN`; values text or `0x…` hex).
pub fn proxy_header(version: u8, spec: &str) -> Result<Vec<u8>, crate::trace::Fail> {
    use crate::trace::Fail;
    use std::net::SocketAddr;
    let mut words = spec.split_whitespace();
    let mut addr = |what: &str| -> Result<SocketAddr, Fail> {
        let w = words
            .next()
            .ok_or_else(|| Fail(format!("-proxy{version}: no {what} address")))?;
        w.parse()
            .map_err(|_| Fail(format!("-proxy{version}: bad {what} address \"{w}\"")))
    };
    let (client, server) = (addr("client")?, addr("server")?);
    if client.is_ipv4() != server.is_ipv4() {
        return Err(Fail(format!("-proxy{version}: addresses of two families")));
    }
    if version == 1 {
        let family = if client.is_ipv4() { "TCP4" } else { "TCP6" };
        return Ok(format!(
            "PROXY {family} {} {} {} {}\r\n",
            client.ip(),
            server.ip(),
            client.port(),
            server.port()
        )
        .into_bytes());
    }
    let mut body = Vec::new();
    let family = match (client, server) {
        (SocketAddr::V4(c), SocketAddr::V4(s)) => {
            body.extend_from_slice(&c.ip().octets());
            body.extend_from_slice(&s.ip().octets());
            0x11
        }
        (SocketAddr::V6(c), SocketAddr::V6(s)) => {
            body.extend_from_slice(&c.ip().octets());
            body.extend_from_slice(&s.ip().octets());
            0x21
        }
        _ => unreachable!("same family checked above"),
    };
    body.extend_from_slice(&client.port().to_be_bytes());
    body.extend_from_slice(&server.port().to_be_bytes());
    for field in words {
        let (name, value) = field
            .split_once('=')
            .ok_or_else(|| Fail(format!("-proxy2: field \"{field}\" is not name=value")))?;
        let kind = match name {
            "alpn" => 0x01,
            "authority" => 0x02,
            "noop" => 0x04,
            "unique_id" => 0x05,
            "netns" => 0x30,
            hex => hex
                .strip_prefix("0x")
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| Fail(format!("-proxy2: unknown field \"{name}\"")))?,
        };
        let value = match value.strip_prefix("0x") {
            Some(hex) => (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("x"), 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|_| Fail(format!("-proxy2: bad hex in \"{field}\"")))?,
            None => value.as_bytes().to_vec(),
        };
        body.push(kind);
        body.extend_from_slice(&(value.len() as u16).to_be_bytes());
        body.extend_from_slice(&value);
    }
    let mut out = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    out.push(0x21);
    out.push(family);
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}
