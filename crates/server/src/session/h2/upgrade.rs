//! `Upgrade: h2c` (RFC 7540 §3.2): an HTTP/1.1 request on a cleartext
//! connection that asks to go on in HTTP/2. When it may (the `http2`
//! feature on, no TLS, no body, one well-formed `HTTP2-Settings`), the
//! session answers `101 Switching Protocols` and serves the connection
//! as HTTP/2, the request itself becoming stream 1: its head is encoded
//! as a HEADERS frame (HPACK literals that leave the decoder's table
//! alone) and handed to the HTTP/2 session right after the client's
//! preface and first SETTINGS frame, as if the client had sent it.
//! Anything else is answered in HTTP/1.1 as if no upgrade was asked for,
//! which RFC 9110 §7.8 allows.

use crate::transport::io::Client;
use bytes::{BufMut, Bytes, BytesMut};
use lacquer_http::{Framing, RequestHead, Version};

/// The answer that switches the connection.
pub(crate) const SWITCHING: &[u8] =
    b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n";

/// Largest frame payload every HTTP/2 endpoint accepts.
const FRAME_MAX: usize = 16_384;

/// Whether the first request of a cleartext connection asks for, and may
/// have, HTTP/2.
pub(crate) fn wants_upgrade(c: &Client, head: &RequestHead) -> bool {
    if c.addrs.tls.is_some() || head.version != Version::Http11 {
        return false;
    }
    let h = &head.headers;
    if !h.has_token("upgrade", "h2c") || !h.has_token("connection", "upgrade") {
        return false;
    }
    // A body would have to be read whole before switching: such a request
    // is answered in HTTP/1.1 instead.
    if !matches!(head.framing, Framing::None | Framing::Length(0)) {
        return false;
    }
    // Exactly one HTTP2-Settings, the payload of a SETTINGS frame in
    // base64url (RFC 7540 §3.2.1).
    let mut settings = h.get_all("http2-settings");
    let (Some(value), None) = (settings.next(), settings.next()) else {
        return false;
    };
    let value = lacquer_http::headers::trim(value);
    lacquer_vcl::base64::decode(value, lacquer_vcl::base64::URL, Some(b'='))
        .is_some_and(|payload| payload.len() % 6 == 0)
}

/// The request as the frames that open stream 1 and end it (HEADERS, and
/// CONTINUATION when the block is larger than a frame).
pub(crate) fn stream_one(head: &RequestHead) -> Bytes {
    let mut block = BytesMut::with_capacity(head.raw.len() + 64);
    let url = &head.url[..];
    let (authority, path): (Option<Vec<u8>>, Vec<u8>) = match url.first() {
        Some(b'/') | Some(b'*') => (None, url.to_vec()),
        // The absolute form: its authority, and the path it names.
        _ => match http::Uri::try_from(url) {
            Ok(uri) => (
                uri.authority().map(|a| a.as_str().as_bytes().to_vec()),
                uri.path_and_query()
                    .map_or(b"/".to_vec(), |p| p.as_str().as_bytes().to_vec()),
            ),
            Err(_) => (None, url.to_vec()),
        },
    };
    let authority = authority.or_else(|| head.headers.get("host").map(|h| h.to_vec()));
    literal(&mut block, b":method", &head.method);
    literal(&mut block, b":scheme", b"http");
    literal(&mut block, b":path", &path);
    if let Some(authority) = &authority {
        literal(&mut block, b":authority", authority);
    }
    let named = head.headers.connection_named_values();
    for f in head.headers.iter() {
        let name = f.name.to_ascii_lowercase();
        let hop = matches!(
            &name[..],
            b"host"
                | b"connection"
                | b"upgrade"
                | b"http2-settings"
                | b"keep-alive"
                | b"proxy-connection"
                | b"transfer-encoding"
        ) || (name == b"te" && !f.value.eq_ignore_ascii_case(b"trailers"))
            || named.iter().any(|n| n.name.eq_ignore_ascii_case(&f.name));
        if !hop {
            literal(&mut block, &name, &f.value);
        }
    }
    frames(&block)
}

/// A header field as a literal without indexing, with a new name
/// (RFC 7541 §6.2.2), neither string Huffman-coded.
fn literal(out: &mut BytesMut, name: &[u8], value: &[u8]) {
    out.put_u8(0);
    string(out, name);
    string(out, value);
}

fn string(out: &mut BytesMut, s: &[u8]) {
    integer(out, s.len(), 7, 0);
    out.extend_from_slice(s);
}

/// An HPACK integer with an `n`-bit prefix (RFC 7541 §5.1).
fn integer(out: &mut BytesMut, mut v: usize, n: u32, flags: u8) {
    let max = (1usize << n) - 1;
    if v < max {
        out.put_u8(flags | v as u8);
        return;
    }
    out.put_u8(flags | max as u8);
    v -= max;
    while v >= 128 {
        out.put_u8((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.put_u8(v as u8);
}

/// The header block in frames of stream 1: HEADERS with END_STREAM, then
/// CONTINUATION, the last with END_HEADERS.
fn frames(block: &[u8]) -> Bytes {
    const END_STREAM: u8 = 0x1;
    const END_HEADERS: u8 = 0x4;
    let mut out = BytesMut::with_capacity(block.len() + 18);
    let pieces: Vec<&[u8]> = if block.is_empty() {
        vec![&[]]
    } else {
        block.chunks(FRAME_MAX).collect()
    };
    let last = pieces.len() - 1;
    for (i, piece) in pieces.iter().enumerate() {
        let len = piece.len();
        out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8]);
        let (kind, mut flags) = if i == 0 { (0x1, END_STREAM) } else { (0x9, 0) };
        if i == last {
            flags |= END_HEADERS;
        }
        out.put_u8(kind);
        out.put_u8(flags);
        out.put_u32(1);
        out.extend_from_slice(piece);
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &str) -> RequestHead {
        let mut buf = BytesMut::from(raw.as_bytes());
        let limits = lacquer_http::RequestLimits {
            max_head: 64 * 1024,
            max_header_line: 32 * 1024,
            max_headers: 64,
        };
        lacquer_http::parse_request(&mut buf, &limits)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn integers_take_their_prefix_then_sevens() {
        let mut out = BytesMut::new();
        integer(&mut out, 10, 5, 0);
        integer(&mut out, 1337, 5, 0);
        integer(&mut out, 126, 7, 0);
        integer(&mut out, 127, 7, 0);
        assert_eq!(&out[..], &[10, 31, 154, 10, 126, 127, 0]);
    }

    #[test]
    fn the_request_becomes_stream_one() {
        let h = head(
            "GET /a?b HTTP/1.1\r\nHost: shop\r\nConnection: Upgrade, HTTP2-Settings\r\n\
             Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nX-A: 1\r\n\r\n",
        );
        let f = stream_one(&h);
        // HEADERS, END_STREAM | END_HEADERS, stream 1.
        assert_eq!(&f[3..9], &[1, 5, 0, 0, 0, 1]);
        let len = usize::from(f[0]) << 16 | usize::from(f[1]) << 8 | usize::from(f[2]);
        assert_eq!(len, f.len() - 9);
        let mut want = BytesMut::new();
        literal(&mut want, b":method", b"GET");
        literal(&mut want, b":scheme", b"http");
        literal(&mut want, b":path", b"/a?b");
        literal(&mut want, b":authority", b"shop");
        literal(&mut want, b"x-a", b"1");
        assert_eq!(&f[9..], &want[..]);
    }

    #[test]
    fn a_large_block_goes_on_in_continuation_frames() {
        let big = "v".repeat(20_000);
        let h = head(&format!(
            "GET / HTTP/1.1\r\nHost: h\r\nX-Big: {big}\r\n\r\n"
        ));
        let f = stream_one(&h);
        assert_eq!(&f[..9], &[0, 0x40, 0, 1, 1, 0, 0, 0, 1]);
        let second = &f[9 + FRAME_MAX..];
        assert_eq!(&second[3..9], &[9, 4, 0, 0, 0, 1]);
    }
}
