//! Backend response heads. Parsing is strict where a wrong guess would let
//! one response bleed into the next (framing), and reports everything else
//! as a failed fetch rather than a crash.

use crate::headers::{trim, Header, Headers};
use crate::{parse_content_length, Framing, Version, STACK_HEADERS};
use bytes::{Buf, Bytes, BytesMut};

/// The limits a response head is held to (`http_resp_*`).
#[derive(Debug, Clone, Copy)]
pub struct ResponseLimits {
    pub max_head: usize,
    pub max_header_line: usize,
    pub max_headers: usize,
}

impl Default for ResponseLimits {
    fn default() -> Self {
        ResponseLimits {
            max_head: 32 * 1024,
            max_header_line: 8 * 1024,
            max_headers: 64,
        }
    }
}

/// A parsed response head.
#[derive(Debug, Clone)]
pub struct ResponseHead {
    pub version: Version,
    pub status: u16,
    pub reason: Bytes,
    pub headers: Headers,
    pub framing: Framing,
    /// The connection may carry another request after this body.
    pub keep_alive: bool,
    pub wire_len: usize,
}

/// Why a backend response could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseError {
    TooLarge,
    Malformed(&'static str),
}

impl std::fmt::Display for ResponseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResponseError::TooLarge => f.write_str("response head too large"),
            ResponseError::Malformed(why) => write!(f, "malformed response: {why}"),
        }
    }
}

fn head_end(buf: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(pos) = buf[i..].iter().position(|&b| b == b'\n') {
        let next = i + pos + 1;
        match (buf.get(next), buf.get(next + 1)) {
            (Some(b'\n'), _) => return Some(next + 1),
            (Some(b'\r'), Some(b'\n')) => return Some(next + 2),
            _ => i = next,
        }
    }
    None
}

/// Parses a response head from the front of `buf`, splitting it off on
/// success. `request_was_head` selects HEAD framing (no body).
pub fn parse_response(
    buf: &mut BytesMut,
    limits: &ResponseLimits,
    request_was_head: bool,
) -> Result<Option<ResponseHead>, ResponseError> {
    let end = match head_end(buf) {
        Some(end) => end,
        None if buf.len() > limits.max_head => return Err(ResponseError::TooLarge),
        None => {
            if buf.len() >= 5 && !buf.starts_with(b"HTTP/") {
                return Err(ResponseError::Malformed("not an HTTP response"));
            }
            return Ok(None);
        }
    };
    if end > limits.max_head {
        return Err(ResponseError::TooLarge);
    }
    // A copy, not a view: the fields live as long as the fetch, and a
    // view would hold the connection's whole read buffer, so that the
    // connection's next response (taken from the pool meanwhile) needs
    // a new one.
    let head = Bytes::copy_from_slice(&buf[..end]);
    buf.advance(end);
    for line in head.split(|&b| b == b'\n').skip(1) {
        if line.len() > limits.max_header_line {
            return Err(ResponseError::TooLarge);
        }
    }
    // The usual limit fits on the stack; larger ones allocate.
    let mut stack = [httparse::EMPTY_HEADER; STACK_HEADERS];
    let mut heap = Vec::new();
    let storage: &mut [httparse::Header<'_>] = if limits.max_headers <= STACK_HEADERS {
        &mut stack[..limits.max_headers]
    } else {
        heap.resize(limits.max_headers, httparse::EMPTY_HEADER);
        &mut heap
    };
    let mut resp = httparse::Response::new(storage);
    match resp.parse(&head) {
        Ok(s) if s.is_complete() => {}
        Ok(_) => return Err(ResponseError::Malformed("incomplete head")),
        Err(httparse::Error::TooManyHeaders) => return Err(ResponseError::TooLarge),
        Err(_) => return Err(ResponseError::Malformed("bad status line or header")),
    }
    let version = match resp.version {
        Some(0) => Version::Http10,
        Some(1) => Version::Http11,
        _ => return Err(ResponseError::Malformed("bad version")),
    };
    let status = resp.code.ok_or(ResponseError::Malformed("no status"))?;
    if !(100..=999).contains(&status) {
        return Err(ResponseError::Malformed("bad status code"));
    }
    let reason = head.slice_ref(resp.reason.unwrap_or("").as_bytes());
    let mut headers = Headers::with_capacity(resp.headers.len() + 4);
    let mut content_length: Option<u64> = None;
    let mut bad_length = false;
    let mut te_chunked_last = None;
    for h in resp.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            match parse_content_length(trim(h.value)) {
                Some(n) if content_length.is_none_or(|c| c == n) => content_length = Some(n),
                _ => bad_length = true,
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            // Only `chunked` is read: a body in another transfer coding
            // could be passed on only as bytes no client can decode, so
            // such a response is refused (a 503), as Varnish does.
            if te_chunked_last.is_some() || !trim(h.value).eq_ignore_ascii_case(b"chunked") {
                return Err(ResponseError::Malformed("unsupported Transfer-Encoding"));
            }
            te_chunked_last = Some(true);
        }
        headers.push_raw(Header {
            name: head.slice_ref(name),
            value: head.slice_ref(h.value),
        });
    }
    // A 204 cannot have a body (RFC 9110 §15.3.5): one that announces
    // one would leave bytes on the connection that read as the next
    // response. Refused, as Varnish does (a 0 length is harmless).
    if status == 204 && (content_length.is_some_and(|n| n > 0) || te_chunked_last.is_some()) {
        return Err(ResponseError::Malformed("204 with a body"));
    }
    let no_body =
        request_was_head || (100..200).contains(&status) || status == 204 || status == 304;
    let framing = if no_body {
        Framing::None
    } else if let Some(chunked_last) = te_chunked_last {
        if chunked_last {
            Framing::Chunked
        } else {
            Framing::UntilClose
        }
    } else if bad_length {
        return Err(ResponseError::Malformed("invalid Content-Length"));
    } else {
        match content_length {
            Some(0) => Framing::None,
            Some(n) => Framing::Length(n),
            None => Framing::UntilClose,
        }
    };
    let mut keep_alive = match version {
        Version::Http11 | Version::Http2 | Version::Http3 => {
            !headers.has_token("connection", "close")
        }
        Version::Http10 => headers.has_token("connection", "keep-alive"),
    };
    // A response framed two ways may have been read differently by
    // someone else on the way: never put another request behind it
    // (RFC 9112 §6.1).
    if framing == Framing::UntilClose
        || (te_chunked_last.is_some() && (content_length.is_some() || bad_length))
    {
        keep_alive = false;
    }
    if headers.connection_options().end_to_end.is_some() {
        return Err(ResponseError::Malformed(
            "Connection names an end-to-end header",
        ));
    }
    Ok(Some(ResponseHead {
        version,
        status,
        reason,
        headers,
        framing,
        keep_alive,
        wire_len: head.len(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, head: bool) -> Result<Option<ResponseHead>, ResponseError> {
        let mut buf = BytesMut::from(text.as_bytes());
        parse_response(&mut buf, &ResponseLimits::default(), head)
    }

    #[test]
    fn framings() {
        let r = parse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", false)
            .unwrap()
            .unwrap();
        assert_eq!(r.framing, Framing::Length(10));
        assert!(r.keep_alive);
        let r = parse(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.framing, Framing::Chunked);
        assert!(!r.keep_alive, "framed two ways: never reused");
        let r = parse(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: x\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.framing, Framing::Chunked);
        assert!(!r.keep_alive, "even with a length that does not parse");
        for te in ["foobar", "gzip, chunked", "chunked, chunked", "identity"] {
            let text = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: {te}\r\n\r\n");
            assert!(parse(&text, false).is_err(), "{te}");
        }
        let text =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(parse(text, false).is_err(), "twice");
        let r = parse("HTTP/1.1 200 OK\r\n\r\n", false).unwrap().unwrap();
        assert_eq!(r.framing, Framing::UntilClose);
        assert!(!r.keep_alive);
        assert!(parse(
            "HTTP/1.1 204 No Content\r\nContent-Length: 4\r\n\r\n",
            false
        )
        .is_err());
        let r = parse(
            "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n",
            false,
        );
        assert_eq!(r.unwrap().unwrap().framing, Framing::None);
        let r = parse(
            "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.framing, Framing::None);
        let r = parse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", true)
            .unwrap()
            .unwrap();
        assert_eq!(r.framing, Framing::None);
        let r = parse("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false)
            .unwrap()
            .unwrap();
        assert!(!r.keep_alive);
    }

    #[test]
    fn garbage() {
        assert!(parse("garbage garbage\r\n\r\n", false).is_err());
        assert!(parse("SSH-2.0-OpenSSH", false).is_err());
        assert!(parse("HTTP/1.1 abc OK\r\n\r\n", false).is_err());
        assert!(parse(
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            false
        )
        .is_err());
        assert!(parse("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", false).is_err());
        assert!(parse(
            "HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 1\r\n\r\n",
            false
        )
        .is_err());
        assert!(parse("HTTP/1.1 200 OK\r\n", false).unwrap().is_none());
    }
}
