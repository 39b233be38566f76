//! Client request heads, parsed strictly. Anything a front end and a back end
//! could read two ways is refused here: both Content-Length and
//! Transfer-Encoding, differing or malformed Content-Length, codings other
//! than chunked, folded lines, control characters, bare CR, duplicate Host.

use crate::headers::{Header, Headers};
use crate::{parse_content_length, Framing, Version, STACK_HEADERS};
use bytes::{Bytes, BytesMut};

/// The limits a request head is held to (Varnish's `http_req_*` parameters).
#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    /// `http_req_size`: the whole head.
    pub max_head: usize,
    /// `http_req_hdr_len`: one header line.
    pub max_header_line: usize,
    /// `http_max_hdr`: header lines.
    pub max_headers: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_head: 32 * 1024,
            max_header_line: 8 * 1024,
            max_headers: 64,
        }
    }
}

/// A parsed request head.
#[derive(Debug, Clone)]
pub struct RequestHead {
    pub method: Bytes,
    pub url: Bytes,
    pub version: Version,
    pub headers: Headers,
    /// How the request body is delimited.
    pub framing: Framing,
    /// Bytes the head occupied on the wire.
    pub wire_len: usize,
    /// The client sent `Expect: 100-continue`.
    pub expect_continue: bool,
    /// What its `Connection` fields said when it came: whether the
    /// connection stays open is judged from these, as varnishd judges it
    /// when it reads the head (VCL that edits `req.http.Connection`
    /// changes what is forwarded, not that).
    pub connection: crate::ConnectionOptions,
    /// The head as it came, request line to empty line (for the log).
    pub raw: Bytes,
}

impl RequestHead {
    /// Whether the client wants the connection kept open after this request.
    pub fn keep_alive(&self) -> bool {
        match self.version {
            Version::Http11 => !self.connection.close,
            // A stream ends; its connection is not the request's to close.
            Version::Http2 | Version::Http3 => true,
            Version::Http10 => self.connection.keep_alive,
        }
    }

    pub fn method_is(&self, m: &str) -> bool {
        self.method.as_ref() == m.as_bytes()
    }
}

/// Why a request head was refused; each maps to one status code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// 400 with a short reason.
    Bad(&'static str),
    /// 414: the request line alone is over the size limit.
    UriTooLong,
    /// 431: a header line, the head, or the header count is over its limit.
    HeadersTooLarge(&'static str),
    /// 417: an Expect other than 100-continue.
    ExpectationFailed,
}

impl RequestError {
    pub fn status(&self) -> u16 {
        match self {
            RequestError::Bad(_) => 400,
            RequestError::UriTooLong => 414,
            RequestError::HeadersTooLarge(_) => 431,
            RequestError::ExpectationFailed => 417,
        }
    }

    pub fn reason(&self) -> &'static str {
        match self {
            RequestError::Bad(r) => r,
            RequestError::UriTooLong => "URI Too Long",
            RequestError::HeadersTooLarge(r) => r,
            RequestError::ExpectationFailed => "Expectation Failed",
        }
    }
}

/// Where a complete head ends, with what its header lines (the lines
/// after the request line) showed on the way: the longest's length and
/// whether one began with a space or tab (obsolete line folding). One
/// pass over the bytes finds all three.
struct HeadScan {
    end: usize,
    longest_line: usize,
    folded: bool,
}

/// Finds the end of a head: the first empty line, CRLF CRLF or a bare LF
/// pair. None until it has arrived.
fn scan_head(buf: &[u8]) -> Option<HeadScan> {
    let mut newlines = memchr::memchr_iter(b'\n', buf);
    let mut line_start = newlines.next()? + 1;
    let mut longest_line = 0;
    let mut folded = false;
    for nl in newlines {
        let line = &buf[line_start..nl];
        if line.is_empty() || line == b"\r" {
            return Some(HeadScan {
                end: nl + 1,
                longest_line,
                folded,
            });
        }
        longest_line = longest_line.max(line.len());
        folded |= matches!(line[0], b' ' | b'\t');
        line_start = nl + 1;
    }
    None
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    memchr::memchr(needle, hay)
}

/// Parses a request head from the front of `buf`. On success the head's
/// bytes are split off `buf` (whatever follows, a body or a pipelined
/// request, stays). `Ok(None)` means more bytes are needed.
pub fn parse_request(
    buf: &mut BytesMut,
    limits: &RequestLimits,
) -> Result<Option<RequestHead>, RequestError> {
    // Empty lines before a request line are ignored (RFC 9112 §2.2).
    let skip = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    if skip > 0 {
        let _ = buf.split_to(skip);
    }
    if buf.is_empty() {
        return Ok(None);
    }
    let scan = match scan_head(buf) {
        Some(scan) => scan,
        None => {
            if buf.len() > limits.max_head {
                return Err(if memchr(b'\n', buf).is_none_or(|n| n > limits.max_head) {
                    RequestError::UriTooLong
                } else {
                    RequestError::HeadersTooLarge("Request Header Fields Too Large")
                });
            }
            // Refuse junk early rather than buffering up to the limit.
            precheck_request_line(buf)?;
            return Ok(None);
        }
    };
    let end = scan.end;
    if end > limits.max_head {
        let line_end = memchr(b'\n', buf).unwrap_or(end);
        return Err(if line_end > limits.max_head {
            RequestError::UriTooLong
        } else {
            RequestError::HeadersTooLarge("Request Header Fields Too Large")
        });
    }
    if scan.longest_line > limits.max_header_line {
        return Err(RequestError::HeadersTooLarge("Header Too Long"));
    }
    if scan.folded {
        return Err(RequestError::Bad("Bad Request: obsolete line folding"));
    }
    let head = buf.split_to(end).freeze();
    parse_head(head, limits).map(Some)
}

/// Rejects a partial request line that cannot become a valid one.
fn precheck_request_line(buf: &[u8]) -> Result<(), RequestError> {
    let line = match memchr(b'\n', buf) {
        Some(n) => &buf[..n],
        None => buf,
    };
    if line
        .iter()
        .any(|&b| b == 0 || (b < 0x20 && b != b'\r' && b != b'\t') || b == 0x7f)
    {
        return Err(RequestError::Bad("Bad Request"));
    }
    Ok(())
}

/// Parses a complete head whose lines [`scan_head`] has checked.
fn parse_head(head: Bytes, limits: &RequestLimits) -> Result<RequestHead, RequestError> {
    // The usual limit fits on the stack; larger ones allocate. Left
    // uninitialised for the parser to fill: writing 64 empty entries
    // first cost more than the parse.
    let mut stack =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; STACK_HEADERS];
    let mut heap = Vec::new();
    let storage: &mut [std::mem::MaybeUninit<httparse::Header<'_>>] =
        if limits.max_headers <= STACK_HEADERS {
            &mut stack[..limits.max_headers]
        } else {
            heap.resize_with(limits.max_headers, std::mem::MaybeUninit::uninit);
            &mut heap
        };
    let mut req = httparse::Request::new(&mut []);
    let status = match req.parse_with_uninit_headers(&head, storage) {
        Ok(s) => s,
        Err(httparse::Error::TooManyHeaders) => {
            return Err(RequestError::HeadersTooLarge("Too Many Headers"))
        }
        Err(httparse::Error::Version) => {
            return Err(RequestError::Bad(
                "Bad Request: unsupported protocol version",
            ))
        }
        Err(_) => return Err(RequestError::Bad("Bad Request")),
    };
    if status.is_partial() {
        return Err(RequestError::Bad("Bad Request"));
    }
    let (method, path, version) = request_line(&req)?;
    let mut headers = Headers::with_capacity(req.headers.len() + 2);
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    let mut has_te = false;
    let mut hosts = 0;
    let mut expect_continue = false;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        // The parser refused control characters in values (all but HT).
        let value = h.value;
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = parse_content_length(crate::headers::trim(value))
                .ok_or(RequestError::Bad("Bad Request: invalid Content-Length"))?;
            if content_length.is_some() {
                // Even an equal repeat: a proxy in front may have joined
                // or picked otherwise.
                return Err(RequestError::Bad("Bad Request: repeated Content-Length"));
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            if has_te {
                return Err(RequestError::Bad("Bad Request: repeated Transfer-Encoding"));
            }
            has_te = true;
            // Another coding, or a list: its body could not be read (a
            // 400, as varnishd answers).
            if !crate::headers::trim(value).eq_ignore_ascii_case(b"chunked") {
                return Err(RequestError::Bad("Bad Request: transfer coding"));
            }
            chunked = true;
        } else if name.eq_ignore_ascii_case(b"host") {
            hosts += 1;
            if hosts > 1 {
                return Err(RequestError::Bad("Bad Request: duplicate Host"));
            }
        } else if name.eq_ignore_ascii_case(b"expect") {
            if crate::headers::trim(value).eq_ignore_ascii_case(b"100-continue") {
                expect_continue = version == Version::Http11;
            } else {
                return Err(RequestError::ExpectationFailed);
            }
        }
        headers.push_raw(Header {
            name: shared_or_static(&head, name, common_name(name)),
            value: head.slice_ref(value),
        });
    }
    if has_te && content_length.is_some() {
        return Err(RequestError::Bad(
            "Bad Request: both Content-Length and Transfer-Encoding",
        ));
    }
    if has_te && version == Version::Http10 {
        return Err(RequestError::Bad(
            "Bad Request: Transfer-Encoding in HTTP/1.0",
        ));
    }
    let connection = headers.connection_options();
    if connection.end_to_end.is_some() {
        return Err(RequestError::Bad(
            "Bad Request: Connection names an end-to-end header",
        ));
    }
    let framing = framing(method, version, chunked, content_length)?;
    let url = target_url(&head, path, &mut headers)?;
    Ok(RequestHead {
        method: shared_or_static(&head, method.as_bytes(), common_method(method)),
        url,
        version,
        headers,
        framing,
        wire_len: head.len(),
        expect_continue: expect_continue && framing != Framing::None,
        connection,
        raw: head,
    })
}

/// The request line: its method, target and version, the target one of
/// the forms a proxy takes.
fn request_line<'h>(
    req: &httparse::Request<'_, 'h>,
) -> Result<(&'h str, &'h str, Version), RequestError> {
    let method = req.method.ok_or(RequestError::Bad("Bad Request"))?;
    let path = req.path.ok_or(RequestError::Bad("Bad Request"))?;
    let version = match req.version {
        Some(0) => Version::Http10,
        Some(1) => Version::Http11,
        _ => {
            return Err(RequestError::Bad(
                "Bad Request: unsupported protocol version",
            ))
        }
    };
    if path.is_empty()
        || !(path.starts_with('/')
            || (path == "*" && method == "OPTIONS")
            || starts_with_ignore_case(path.as_bytes(), b"http://")
            || starts_with_ignore_case(path.as_bytes(), b"https://")
            || method == "CONNECT")
    {
        return Err(RequestError::Bad("Bad Request: invalid URL"));
    }
    Ok((method, path, version))
}

/// How the body is delimited, from the fields that say so; refused where
/// it could be read two ways.
fn framing(
    method: &str,
    version: Version,
    chunked: bool,
    content_length: Option<u64>,
) -> Result<Framing, RequestError> {
    let framing = if chunked {
        Framing::Chunked
    } else {
        match content_length {
            Some(0) | None => Framing::None,
            Some(n) => Framing::Length(n),
        }
    };
    // HTTP/1.0 has no chunks: a POST or PUT says its length or is read
    // two ways (no body, or up to the close), as varnishd refuses it.
    if version == Version::Http10 && content_length.is_none() && matches!(method, "POST" | "PUT") {
        return Err(RequestError::Bad(
            "Bad Request: HTTP/1.0 POST or PUT without Content-Length",
        ));
    }
    if method == "HEAD" && framing != Framing::None {
        return Err(RequestError::Bad("Bad Request: HEAD with a body"));
    }
    Ok(framing)
}

/// The URL as VCL sees it: the target, or for an absolute-form target
/// its path (its authority becomes the `Host`, RFC 9112 §3.2.2).
fn target_url(head: &Bytes, path: &str, headers: &mut Headers) -> Result<Bytes, RequestError> {
    Ok(match absolute_form(path.as_bytes())? {
        Some((authority, target)) => {
            // RFC 9112 §3.2.2: the target's authority is the host.
            headers.set("Host", head.slice_ref(authority));
            match target {
                [] => Bytes::from_static(b"/"),
                [b'/', ..] => head.slice_ref(target),
                _ => {
                    let mut url = Vec::with_capacity(target.len() + 1);
                    url.push(b'/');
                    url.extend_from_slice(target);
                    Bytes::from(url)
                }
            }
        }
        None => head.slice_ref(path.as_bytes()),
    })
}

/// A part of the head as a `Bytes`: the static copy of its bytes when it
/// is a common one (no reference to count as the request is handled and
/// let go), else a view of the head.
fn shared_or_static(head: &Bytes, part: &[u8], common: Option<&'static [u8]>) -> Bytes {
    match common {
        Some(same) => Bytes::from_static(same),
        None => head.slice_ref(part),
    }
}

/// The common methods, as written.
fn common_method(method: &str) -> Option<&'static [u8]> {
    Some(match method {
        "GET" => b"GET",
        "HEAD" => b"HEAD",
        "POST" => b"POST",
        _ => return None,
    })
}

/// Header names that browsers and tools send, in the case they send them
/// (a name is kept as the client wrote it: only the same bytes match).
fn common_name(name: &[u8]) -> Option<&'static [u8]> {
    Some(match name {
        b"Host" => b"Host",
        b"User-Agent" => b"User-Agent",
        b"Accept" => b"Accept",
        b"Accept-Encoding" => b"Accept-Encoding",
        b"Accept-Language" => b"Accept-Language",
        b"Cookie" => b"Cookie",
        b"Connection" => b"Connection",
        b"Referer" => b"Referer",
        b"Cache-Control" => b"Cache-Control",
        b"Pragma" => b"Pragma",
        b"If-None-Match" => b"If-None-Match",
        b"If-Modified-Since" => b"If-Modified-Since",
        b"Content-Type" => b"Content-Type",
        b"Content-Length" => b"Content-Length",
        b"Origin" => b"Origin",
        b"Authorization" => b"Authorization",
        b"Range" => b"Range",
        b"X-Forwarded-For" => b"X-Forwarded-For",
        b"X-Forwarded-Proto" => b"X-Forwarded-Proto",
        b"Upgrade-Insecure-Requests" => b"Upgrade-Insecure-Requests",
        b"Sec-Fetch-Dest" => b"Sec-Fetch-Dest",
        b"Sec-Fetch-Mode" => b"Sec-Fetch-Mode",
        b"Sec-Fetch-Site" => b"Sec-Fetch-Site",
        b"Sec-Fetch-User" => b"Sec-Fetch-User",
        b"Priority" => b"Priority",
        b"host" => b"host",
        b"user-agent" => b"user-agent",
        b"accept" => b"accept",
        b"accept-encoding" => b"accept-encoding",
        b"cookie" => b"cookie",
        _ => return None,
    })
}

/// An absolute-form target's authority and what follows it.
type AbsoluteForm<'a> = (&'a [u8], &'a [u8]);

/// Splits an absolute-form target (`http://authority/path?query`) into
/// its authority and the rest; None for any other form. An authority that
/// is empty, carries user information or holds bytes no host name or port
/// may is refused.
fn absolute_form(target: &[u8]) -> Result<Option<AbsoluteForm<'_>>, RequestError> {
    let rest = if starts_with_ignore_case(target, b"http://") {
        &target[7..]
    } else if starts_with_ignore_case(target, b"https://") {
        &target[8..]
    } else {
        return Ok(None);
    };
    let end = rest
        .iter()
        .position(|&b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let host_byte = |b: &u8| b.is_ascii_alphanumeric() || b"-._~:[]%".contains(b);
    if authority.is_empty() || !authority.iter().all(host_byte) || path.starts_with(b"#") {
        return Err(RequestError::Bad("Bad Request: invalid URL"));
    }
    Ok(Some((authority, path)))
}

fn starts_with_ignore_case(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Option<RequestHead>, RequestError> {
        let mut buf = BytesMut::from(text.as_bytes());
        parse_request(&mut buf, &RequestLimits::default())
    }

    fn status(text: &str) -> u16 {
        parse(text).expect_err("should be refused").status()
    }

    #[test]
    fn simple_get() {
        let mut buf = BytesMut::from(&b"GET /a?b HTTP/1.1\r\nHost: x\r\n\r\nGET /next"[..]);
        let req = parse_request(&mut buf, &RequestLimits::default())
            .unwrap()
            .unwrap();
        assert_eq!(req.method, "GET");
        assert_eq!(req.url, "/a?b");
        assert_eq!(req.version, Version::Http11);
        assert_eq!(req.headers.get("host").unwrap(), "x");
        assert_eq!(req.framing, Framing::None);
        assert!(req.keep_alive());
        assert_eq!(&buf[..], b"GET /next");
    }

    #[test]
    fn common_names_and_methods_are_kept_as_sent_without_the_head() {
        let text =
            "GET / HTTP/1.1\r\nHost: x\r\nACCEPT: */*\r\nX-Custom: 1\r\nuser-agent: t\r\n\r\n";
        let req = parse(text).unwrap().unwrap();
        let head = req.raw.as_ptr_range();
        let in_head = |b: &Bytes| head.contains(&b.as_ptr());
        assert_eq!(req.method, "GET");
        assert!(!in_head(&req.method), "a common method is static");
        let names: Vec<&Bytes> = req.headers.iter().map(|h| &h.name).collect();
        assert_eq!(names, ["Host", "ACCEPT", "X-Custom", "user-agent"]);
        let from_head: Vec<bool> = names.iter().map(|n| in_head(n)).collect();
        assert_eq!(
            from_head,
            [false, true, true, false],
            "only names sent as browsers send them are static"
        );
        let odd = parse("PURGE / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(odd.method, "PURGE");
        assert!(odd.raw.as_ptr_range().contains(&odd.method.as_ptr()));
    }

    #[test]
    fn partial_needs_more() {
        assert!(parse("GET / HTTP/1.1\r\nHost: x\r\n").unwrap().is_none());
        assert!(parse("\r\n").unwrap().is_none());
    }

    #[test]
    fn http10_keepalive() {
        let r = parse("GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!r.keep_alive());
        let r = parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(r.keep_alive());
    }

    #[test]
    fn bodies() {
        let r = parse("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.framing, Framing::Length(5));
        let r = parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.framing, Framing::Chunked);
    }

    #[test]
    fn absolute_form_takes_its_authority() {
        let r = parse("GET http://other.example/x?y HTTP/1.1\r\nHost: good.example\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.url, "/x?y");
        assert_eq!(r.headers.get("host").unwrap(), "other.example");
        assert_eq!(r.headers.get_all("host").count(), 1);
        let r = parse("GET HTTPS://h:8443 HTTP/1.1\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.url, "/");
        assert_eq!(r.headers.get("host").unwrap(), "h:8443");
        let r = parse("GET http://h?q HTTP/1.1\r\n\r\n").unwrap().unwrap();
        assert_eq!(r.url, "/?q");
        // A root URL without its path (VSV00018): the path is "/".
        let r = parse("GET http://other.example HTTP/1.1\r\nHost: good\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.url, "/");
        assert_eq!(r.headers.get("host").unwrap(), "other.example");
        assert_eq!(status("GET * HTTP/1.1\r\n\r\n"), 400);
        assert!(parse("OPTIONS * HTTP/1.1\r\n\r\n").unwrap().is_some());
        assert_eq!(status("GET http:///x HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status("GET http://u@h/x HTTP/1.1\r\n\r\n"), 400);
    }

    #[test]
    fn smuggling_defences() {
        assert_eq!(
            status("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"),
            400
        );
        assert_eq!(
            status("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"),
            400
        );
        assert_eq!(status("POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n"), 400);
        assert_eq!(status("POST / HTTP/1.1\r\nContent-Length: 5x\r\n\r\n"), 400);
        assert_eq!(status("GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n"), 400);
        assert_eq!(status("GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n"), 400);
        assert_eq!(status("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n"), 400);
        assert_eq!(status("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
        assert_eq!(status("GET / HTTP/1.1\r\nHost : a\r\n\r\n"), 400);
        assert_eq!(
            status("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
            400
        );
        assert_eq!(status("POST / HTTP/1.0\r\n\r\n"), 400);
        assert!(parse("PUT / HTTP/1.0\r\nContent-Length: 0\r\n\r\n").is_ok());
        assert_eq!(
            status("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
            400
        );
        assert_eq!(status("GET / HTTP/1.1\r\nExpect: 200-ok\r\n\r\n"), 417);
        assert_eq!(
            status("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"),
            400
        );
        assert_eq!(
            status("POST / HTTP/1.1\r\nConnection: Content-Length\r\nContent-Length: 5\r\n\r\n"),
            400
        );
        assert_eq!(
            status("GET / HTTP/1.1\r\nConnection: close, Host\r\nHost: a\r\n\r\n"),
            400
        );
        assert_eq!(status("HEAD / HTTP/1.1\r\nContent-Length: 3\r\n\r\n"), 400);
        assert!(parse("HEAD / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").is_ok());
        assert!(parse("GET / HTTP/1.1\r\nConnection: keep-alive, X-Private\r\n\r\n").is_ok());
    }

    #[test]
    fn every_control_byte_in_a_value_is_refused() {
        for b in (0u8..0x20).chain([0x7f]) {
            let text = format!("GET / HTTP/1.1\r\nX: a{}b\r\n\r\n", b as char);
            let want = if b == b'\t' { 200 } else { 400 };
            let got = parse(&text).map_or_else(|e| e.status(), |_| 200);
            // A bare LF ends the line: "b" is then a line without a colon.
            let want = if b == b'\n' { 400 } else { want };
            assert_eq!(got, want, "byte {b:#04x}");
        }
    }

    #[test]
    fn a_head_ends_at_its_first_empty_line_with_or_without_cr() {
        for (text, len) in [
            ("GET / HTTP/1.1\r\nA: b\r\n\r\nrest", 24),
            ("GET / HTTP/1.1\nA: b\n\nrest", 21),
            ("GET / HTTP/1.1\r\nA: b\n\r\nrest", 23),
            ("GET / HTTP/1.1\r\n\r\n", 18),
        ] {
            let mut buf = BytesMut::from(text.as_bytes());
            let head = parse_request(&mut buf, &RequestLimits::default())
                .unwrap()
                .unwrap();
            assert_eq!(head.wire_len, len, "{text:?}");
            assert_eq!(buf.len(), text.len() - len);
        }
        let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\nA: b\r\n"[..]);
        assert!(matches!(
            parse_request(&mut buf, &RequestLimits::default()),
            Ok(None)
        ));
    }

    #[test]
    fn a_header_line_may_be_as_long_as_the_limit() {
        let limits = RequestLimits {
            max_head: 4096,
            max_header_line: 64,
            max_headers: 32,
        };
        // 64 bytes with its CR: accepted; one more: refused.
        for (extra, status) in [(0, 200), (1, 431)] {
            let value = "v".repeat(64 - 4 + extra);
            let text = format!("GET / HTTP/1.1\r\nX: {value}\r\n\r\n");
            let mut buf = BytesMut::from(text.as_bytes());
            let got = parse_request(&mut buf, &limits).map_or_else(|e| e.status(), |_| 200);
            assert_eq!(got, status, "{} bytes", value.len() + 4);
        }
    }

    #[test]
    fn invalid_lines() {
        assert_eq!(status("GET / HTTP/2.0\r\n\r\n"), 400);
        assert_eq!(status("G@T / HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status("GET  HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status("GET nope HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status("GET / HTTP/1.1 extra\r\n\r\n"), 400);
        assert_eq!(status("\x16\x03\x01\x00"), 400);
    }

    #[test]
    fn limits() {
        let limits = RequestLimits {
            max_head: 256,
            max_header_line: 64,
            max_headers: 32,
        };
        let long_url = format!("GET /{} HTTP/1.1\r\n", "a".repeat(300));
        let mut buf = BytesMut::from(long_url.as_bytes());
        assert_eq!(parse_request(&mut buf, &limits).unwrap_err().status(), 414);
        let long_hdr = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "b".repeat(100));
        let mut buf = BytesMut::from(long_hdr.as_bytes());
        assert_eq!(parse_request(&mut buf, &limits).unwrap_err().status(), 431);
        let many: String = (0..40).map(|i| format!("X{i}: y\r\n")).collect();
        let text = format!("GET / HTTP/1.1\r\n{many}\r\n");
        let mut buf = BytesMut::from(text.as_bytes());
        let limits = RequestLimits {
            max_head: 4096,
            ..limits
        };
        assert_eq!(parse_request(&mut buf, &limits).unwrap_err().status(), 431);
    }

    #[test]
    fn expect_continue() {
        let r = parse("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(r.expect_continue);
    }
}
