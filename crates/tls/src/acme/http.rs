//! The HTTP client an ACME exchange needs: one request per connection,
//! over TLS checked against a CA bundle (or plain HTTP, for a directory
//! given as `http://`), blocking, each step bounded in time and the
//! answer bounded in size.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

/// The largest answer read (a certificate chain is a few KiB).
const MAX_ANSWER: usize = 1 << 20;
/// How long a connection, and each read or write on it, may take.
const STEP: Duration = Duration::from_secs(20);

/// An absolute URL, cut into what a request needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Path and query, at least `/`.
    pub target: String,
}

impl Url {
    pub fn parse(url: &str) -> Result<Url, String> {
        let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(format!("{url}: not an http:// or https:// URL"));
        };
        let (authority, target) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let default_port = if tls { 443 } else { 80 };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("{url}: bad host"))?;
            let port = match after.strip_prefix(':') {
                Some(p) => p.parse().map_err(|_| format!("{url}: bad port"))?,
                None if after.is_empty() => default_port,
                None => return Err(format!("{url}: bad host")),
            };
            (h.to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (
                    h.to_string(),
                    p.parse().map_err(|_| format!("{url}: bad port"))?,
                ),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() || host.contains(['@', ' ']) {
            return Err(format!("{url}: bad host"));
        }
        Ok(Url {
            tls,
            host,
            port,
            target: target.to_string(),
        })
    }

    /// The Host header's value.
    fn authority(&self) -> String {
        let host = match self.host.contains(':') {
            true => format!("[{}]", self.host),
            false => self.host.clone(),
        };
        match (self.tls, self.port) {
            (true, 443) | (false, 80) => host,
            _ => format!("{host}:{}", self.port),
        }
    }
}

/// An answer: status, header fields and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Makes requests, trusting the roots it was given.
pub struct Client {
    config: Arc<rustls::ClientConfig>,
}

impl Client {
    /// Trusting the CA certificates in `ca_file`.
    pub fn new(ca_file: &std::path::Path) -> Result<Client, String> {
        let mut roots = rustls::RootCertStore::empty();
        let show = ca_file.display();
        for cert in CertificateDer::pem_file_iter(ca_file).map_err(|e| format!("{show}: {e}"))? {
            // A bundle may hold certificates rustls cannot use as roots.
            let _ = roots.add(cert.map_err(|e| format!("{show}: {e}"))?);
        }
        if roots.is_empty() {
            return Err(format!("{show}: no CA certificate in it"));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Client {
            config: Arc::new(config),
        })
    }

    /// `method url`, with a JOSE body when there is one.
    pub fn request(&self, method: &str, url: &str, body: Option<&str>) -> Result<Answer, String> {
        let u = Url::parse(url)?;
        let addr = (u.host.as_str(), u.port)
            .to_socket_addrs()
            .map_err(|e| format!("{}: {e}", u.host))?
            .next()
            .ok_or_else(|| format!("{}: no address", u.host))?;
        let tcp = TcpStream::connect_timeout(&addr, STEP).map_err(|e| format!("{url}: {e}"))?;
        tcp.set_read_timeout(Some(STEP))
            .map_err(|e| e.to_string())?;
        tcp.set_write_timeout(Some(STEP))
            .map_err(|e| e.to_string())?;
        let mut head = format!(
            "{method} {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: lacquer-acme\r\nAccept: */*\r\nConnection: close\r\n",
            u.target,
            u.authority()
        );
        if let Some(b) = body {
            head.push_str(&format!(
                "Content-Type: application/jose+json\r\nContent-Length: {}\r\n",
                b.len()
            ));
        }
        head.push_str("\r\n");
        let mut raw = Vec::new();
        let exchange = |s: &mut dyn ReadWrite, raw: &mut Vec<u8>| -> std::io::Result<()> {
            s.write_all(head.as_bytes())?;
            if let Some(b) = body {
                s.write_all(b.as_bytes())?;
            }
            s.flush()?;
            let mut buf = [0u8; 8192];
            loop {
                match s.read(&mut buf) {
                    Ok(0) => return Ok(()),
                    Ok(n) => raw.extend_from_slice(&buf[..n]),
                    // A peer that closes without close_notify: what came is
                    // judged by its framing below.
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                    Err(e) => return Err(e),
                }
                if raw.len() > MAX_ANSWER {
                    return Err(std::io::Error::other("answer too large"));
                }
            }
        };
        if u.tls {
            let name =
                ServerName::try_from(u.host.clone()).map_err(|_| format!("{url}: bad host"))?;
            let conn = rustls::ClientConnection::new(self.config.clone(), name)
                .map_err(|e| e.to_string())?;
            let mut s = rustls::StreamOwned::new(conn, tcp);
            exchange(&mut s, &mut raw)
        } else {
            let mut s = tcp;
            exchange(&mut s, &mut raw)
        }
        .map_err(|e| format!("{url}: {e}"))?;
        parse_answer(&raw, method == "HEAD").map_err(|e| format!("{url}: {e}"))
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// An answer read to the connection's end: its head, and its body framed
/// by Content-Length, chunks, or the end.
pub fn parse_answer(raw: &[u8], head_only: bool) -> Result<Answer, String> {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut fields);
    let used = match resp.parse(raw) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err("answer cut short".into()),
        Err(e) => return Err(format!("bad answer ({e})")),
    };
    let status = resp.code.unwrap_or(0);
    let headers: Vec<(String, String)> = resp
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_string(),
                String::from_utf8_lossy(h.value).trim().to_string(),
            )
        })
        .collect();
    let answer = |body: Vec<u8>| Answer {
        status,
        headers: headers.clone(),
        body,
    };
    let rest = &raw[used..];
    if head_only || status == 204 || status == 304 {
        return Ok(answer(Vec::new()));
    }
    let field = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.as_str())
    };
    if field("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        return dechunk(rest).map(answer);
    }
    match field("content-length") {
        Some(len) => {
            let len: usize = len.parse().map_err(|_| "bad Content-Length")?;
            if rest.len() < len {
                return Err("body cut short".into());
            }
            Ok(answer(rest[..len].to_vec()))
        }
        None => Ok(answer(rest.to_vec())),
    }
}

/// A chunked body's data.
fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("chunk size line cut short")?;
        let line = std::str::from_utf8(&b[..eol]).map_err(|_| "bad chunk size")?;
        let hex = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(hex, 16).map_err(|_| "bad chunk size")?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 || &b[size..size + 2] != b"\r\n" {
            return Err("chunk cut short".into());
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = Url::parse("https://acme.example/dir").unwrap();
        assert_eq!(
            (u.tls, u.host.as_str(), u.port, u.target.as_str()),
            (true, "acme.example", 443, "/dir")
        );
        assert_eq!(u.authority(), "acme.example");
        let u = Url::parse("https://127.0.0.1:14000").unwrap();
        assert_eq!((u.port, u.target.as_str()), (14000, "/"));
        assert_eq!(u.authority(), "127.0.0.1:14000");
        let u = Url::parse("http://[::1]:8080/a?b").unwrap();
        assert_eq!(
            (u.tls, u.host.as_str(), u.port, u.target.as_str()),
            (false, "::1", 8080, "/a?b")
        );
        assert_eq!(u.authority(), "[::1]:8080");
        for bad in [
            "ftp://x/",
            "https://",
            "https://h:port/",
            "https://u@h/",
            "https://[::1/",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn answers_by_length_chunks_or_end() {
        let a = parse_answer(
            b"HTTP/1.1 201 Created\r\nLocation: /o/1\r\nContent-Length: 2\r\n\r\n{}junk",
            false,
        )
        .unwrap();
        assert_eq!(
            (a.status, a.header("location"), a.body.as_slice()),
            (201, Some("/o/1"), &b"{}"[..])
        );
        let a = parse_answer(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", false).unwrap();
        assert_eq!(a.body, b"abcde");
        let a = parse_answer(b"HTTP/1.1 200 OK\r\n\r\nto the end", false).unwrap();
        assert_eq!(a.body, b"to the end");
        let a = parse_answer(
            b"HTTP/1.1 200 OK\r\nReplay-Nonce: abc\r\nContent-Length: 10\r\n\r\n",
            true,
        )
        .unwrap();
        assert_eq!(a.header("replay-nonce"), Some("abc"));
        for bad in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab"[..],
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
            b"HTTP/1.1 200",
            b"garbage\r\n\r\n",
        ] {
            assert!(parse_answer(bad, false).is_err(), "{bad:?}");
        }
    }
}
