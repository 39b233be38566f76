//! One HTTP/1 connection as a client or server spec drives it: sending
//! requests and responses exactly as written (`txreq`, `txresp`, `send`),
//! reading them back (`rxreq`, `rxresp`, `rxhdrs`, `rxbody`, `rxchunk`),
//! and checking what was read (`expect`). Deliberately separate from the
//! product's HTTP code: the product is never judged by its own codec.

use crate::fail;
use crate::net::Stream;
use crate::trace::{dump, log, Fail, Step};
use std::io::{Read, Write};
use std::time::Duration;

/// A message read from the peer.
#[derive(Default, Clone)]
pub struct Message {
    /// The start line's three parts: method, URL, protocol for a request;
    /// protocol, status, reason for a response.
    pub line: [String; 3],
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body's length, or `None` before a body was read.
    pub bodylen: Option<usize>,
    /// The length of the last chunk read.
    pub chunklen: Option<usize>,
}

impl Message {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The connection and what was last read on it.
pub struct Conn {
    pub actor: String,
    pub stream: Stream,
    pub timeout: Duration,
    /// Bytes read but not yet consumed.
    buf: Vec<u8>,
    pub req: Message,
    pub resp: Message,
    /// The data of the chunk `rx_chunk` read last.
    last_chunk: Option<Vec<u8>>,
    /// The connection's HTTP/2 state, once `txpri` or `rxpri` ran.
    pub h2: Option<std::sync::Arc<crate::h2::conn::H2>>,
}

impl Conn {
    pub fn new(actor: &str, stream: Stream, timeout: Duration) -> Conn {
        Conn {
            actor: actor.to_string(),
            stream,
            timeout,
            buf: Vec::new(),
            req: Message::default(),
            resp: Message::default(),
            last_chunk: None,
            h2: None,
        }
    }

    pub fn send(&mut self, what: &str, data: &[u8]) -> Step {
        dump(&self.actor, what, data);
        self.stream
            .write_all(data)
            .map_err(|e| Fail(format!("Write failed: {e}")))
    }

    /// Writes without a trace of its own.
    pub fn send_quiet(&mut self, data: &[u8]) -> Step {
        self.stream
            .write_all(data)
            .map_err(|e| Fail(format!("Write failed: {e}")))
    }

    /// Takes what was read but not consumed (HTTP/2's reader takes over
    /// from there).
    pub fn take_buffered(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// Reads more bytes into the buffer; false at end of stream.
    fn fill(&mut self) -> Step<bool> {
        let _ = self.stream.set_read_timeout(Some(self.timeout));
        let mut chunk = [0u8; 16384];
        match self.stream.read(&mut chunk) {
            Ok(0) => Ok(false),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(true)
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                fail!(
                    "HTTP rx timeout (fd:{} {} ms)",
                    fd(&self.stream),
                    self.timeout.as_millis()
                )
            }
            Err(e) => fail!("HTTP rx failed ({e})"),
        }
    }

    /// Takes exactly `n` bytes.
    pub fn take(&mut self, n: usize) -> Step<Vec<u8>> {
        while self.buf.len() < n {
            if !self.fill()? {
                fail!(
                    "HTTP rx EOF (fd:{} read: {} of {n})",
                    fd(&self.stream),
                    self.buf.len()
                );
            }
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// Takes one line (without its CRLF or LF).
    fn take_line(&mut self) -> Step<String> {
        loop {
            if let Some(at) = self.buf.iter().position(|&b| b == b'\n') {
                let mut line: Vec<u8> = self.buf.drain(..=at).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(String::from_utf8_lossy(&line).into_owned());
            }
            if !self.fill()? {
                fail!(
                    "HTTP rx EOF (fd:{} read: {})",
                    fd(&self.stream),
                    self.buf.len()
                );
            }
        }
    }

    /// Everything until the peer closes.
    fn take_rest(&mut self) -> Step<Vec<u8>> {
        while self.fill()? {}
        Ok(std::mem::take(&mut self.buf))
    }

    /// Waits for the peer to close, failing if anything else arrives.
    pub fn expect_close(&mut self) -> Step {
        if !self.buf.is_empty() {
            fail!("Expected close: got {} bytes", self.buf.len());
        }
        match self.fill() {
            Ok(false) => {
                log(
                    3,
                    &self.actor,
                    &format!("fd={} Expected close: got EOF", fd(&self.stream)),
                );
                Ok(())
            }
            Ok(true) => fail!("Expected close: got data ({} bytes)", self.buf.len()),
            // A reset counts as closed.
            Err(Fail(m)) if m.starts_with("HTTP rx failed") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Reads a head: the start line and the header fields.
    pub fn rx_head(&mut self, request: bool) -> Step {
        let mut raw = Vec::new();
        let first = loop {
            let l = self.take_line()?;
            // Blank lines before a message are tolerated.
            if !l.is_empty() {
                break l;
            }
        };
        raw.push(first.clone());
        let mut parts = first.splitn(3, ' ');
        let line = [
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        ];
        let mut headers = Vec::new();
        loop {
            let l = self.take_line()?;
            raw.push(l.clone());
            if l.is_empty() {
                break;
            }
            let (n, v) = l.split_once(':').unwrap_or((&l, ""));
            headers.push((n.trim().to_string(), v.trim().to_string()));
        }
        let mut text = raw.join("\r\n");
        text.push_str("\r\n");
        dump(&self.actor, "rxhdr", text.as_bytes());
        let msg = Message {
            line,
            headers,
            ..Message::default()
        };
        if request {
            self.req = msg;
        } else {
            self.resp = msg;
        }
        Ok(())
    }

    /// Reads a body as the head frames it (Content-Length, chunked, or to
    /// the end of the connection when `eof_allowed`).
    pub fn rx_body(&mut self, request: bool, eof_allowed: bool) -> Step {
        let msg = if request { &self.req } else { &self.resp };
        let chunked = msg
            .header("transfer-encoding")
            .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
        let length = msg
            .header("content-length")
            .map(str::trim)
            .map(str::to_string);
        let body = if chunked {
            let mut body = Vec::new();
            loop {
                let n = self.rx_chunk()?;
                let chunk = self.last_chunk.take().unwrap_or_default();
                body.extend_from_slice(&chunk);
                if n == 0 {
                    break;
                }
            }
            body
        } else if let Some(len) = length {
            let Ok(n) = len.parse::<usize>() else {
                fail!("Bad Content-Length: \"{len}\"");
            };
            let b = self.take(n)?;
            dump(&self.actor, "c-l", &b);
            b
        } else if eof_allowed {
            let b = self.take_rest()?;
            dump(&self.actor, "rxeof", &b);
            b
        } else {
            Vec::new()
        };
        log(4, &self.actor, &format!("bodylen = {}", body.len()));
        let msg = if request {
            &mut self.req
        } else {
            &mut self.resp
        };
        msg.bodylen = Some(body.len());
        msg.body = body;
        Ok(())
    }
}

impl Conn {
    /// Reads one chunk of a chunked body; returns its length.
    pub fn rx_chunk(&mut self) -> Step<usize> {
        let line = self.take_line()?;
        let size = line.split(';').next().unwrap_or("").trim();
        let Ok(n) = usize::from_str_radix(size, 16) else {
            fail!("Illegal chunk header: \"{line}\"");
        };
        log(4, &self.actor, &format!("len|{line}"));
        let data = self.take(n)?;
        dump(&self.actor, "chunk", &data);
        let end = self.take_line()?;
        if !end.is_empty() {
            fail!("Chunklen without CRLF");
        }
        self.last_chunk = Some(data);
        self.resp.chunklen = Some(n);
        self.req.chunklen = Some(n);
        Ok(n)
    }
}

fn fd(s: &Stream) -> i32 {
    use std::os::unix::io::AsRawFd;
    s.as_raw_fd()
}

/// The body `-bodylen` and `chunkedlen` make: lines of 63 printable
/// characters, each line starting one character later, ending in a
/// newline, as varnishtest makes them.
pub fn synth_body(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut first = b'!';
    let mut next = first;
    for i in 0..len {
        if i % 64 == 63 {
            out.push(b'\n');
            first = if first == b'}' { b'!' } else { first + 1 };
            next = first;
        } else {
            out.push(next);
            next = if next == b'}' { b'!' } else { next + 1 };
        }
    }
    if let Some(last) = out.last_mut() {
        *last = b'\n';
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_bodies_look_like_varnishtests() {
        let b = synth_body(70);
        assert_eq!(b.len(), 70);
        assert_eq!(&b[..3], b"!\"#");
        assert_eq!(b[62], b'_');
        assert_eq!(b[63], b'\n');
        assert_eq!(&b[64..69], b"\"#$%&");
        assert_eq!(b[69], b'\n');
        assert!(synth_body(0).is_empty());
    }
}
