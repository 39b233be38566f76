//! QPACK (RFC 9204) as this server speaks it: with no dynamic table (its
//! SETTINGS leave the table's capacity at 0), field sections are static
//! table references and literals. A request's section is read straight
//! into HTTP/1.1's shape for the client steps, and checked as it is read
//! (RFC 9114 §4.1.2, §4.2, §4.3): a pseudo-header twice, after a regular
//! field, not a request's, or missing; an empty `:path`; a control
//! character or space in a pseudo-header's value; a control character
//! (but HTAB) in any value; an empty name, or one with an upper-case
//! letter or a byte no token has; a field that speaks of an HTTP/1
//! connection; a Host that is not the `:authority`; Content-Lengths that
//! disagree; a reference to a dynamic table: each makes it malformed.
//! Responses are encoded with static references where the table has the
//! name (or the field), and literals without Huffman coding (cheaper to
//! make, and most of a response's values are not in the table).

use super::huffman;
use crate::headers::connection_specific;
use bytes::{BufMut, BytesMut};

/// Why a field section was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// QPACK that does not parse, or Huffman that does not decode.
    Encoding,
    /// A reference to a dynamic table entry (there is none).
    DynamicTable,
    PseudoTwice,
    PseudoAfterField,
    /// `:status`, or a pseudo-header no one defined (or any, in trailers).
    PseudoNotForRequests,
    MissingPseudo,
    /// A CONNECT request that has `:scheme` or `:path`.
    ConnectWithPath,
    EmptyPath,
    BadPseudoValue,
    BadName,
    BadValue,
    /// Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding,
    /// Upgrade, or a TE other than "trailers".
    ConnectionSpecific,
    HostNotAuthority,
    BadContentLength,
    /// Past the header list's limit, decoded.
    TooLarge,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Malformed::Encoding => "a field section that does not decode",
            Malformed::DynamicTable => "a reference to a dynamic table",
            Malformed::PseudoTwice => "a pseudo-header twice",
            Malformed::PseudoAfterField => "a pseudo-header after a regular field",
            Malformed::PseudoNotForRequests => "a pseudo-header that is not a request's",
            Malformed::MissingPseudo => "a missing pseudo-header",
            Malformed::ConnectWithPath => "CONNECT with :scheme or :path",
            Malformed::EmptyPath => "an empty :path",
            Malformed::BadPseudoValue => "a pseudo-header value with a control or space",
            Malformed::BadName => "an invalid field name",
            Malformed::BadValue => "a field value with a control character",
            Malformed::ConnectionSpecific => "a connection-specific field",
            Malformed::HostNotAuthority => "a Host that is not the :authority",
            Malformed::BadContentLength => "Content-Length values that disagree",
            Malformed::TooLarge => "a field section past the header list's limit",
        })
    }
}

/// The static table (RFC 9204 Appendix A).
const STATIC: [(&str, &str); 99] = [
    (":authority", ""),
    (":path", "/"),
    ("age", "0"),
    ("content-disposition", ""),
    ("content-length", "0"),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("referer", ""),
    ("set-cookie", ""),
    (":method", "CONNECT"),
    (":method", "DELETE"),
    (":method", "GET"),
    (":method", "HEAD"),
    (":method", "OPTIONS"),
    (":method", "POST"),
    (":method", "PUT"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "103"),
    (":status", "200"),
    (":status", "304"),
    (":status", "404"),
    (":status", "503"),
    ("accept", "*/*"),
    ("accept", "application/dns-message"),
    ("accept-encoding", "gzip, deflate, br"),
    ("accept-ranges", "bytes"),
    ("access-control-allow-headers", "cache-control"),
    ("access-control-allow-headers", "content-type"),
    ("access-control-allow-origin", "*"),
    ("cache-control", "max-age=0"),
    ("cache-control", "max-age=2592000"),
    ("cache-control", "max-age=604800"),
    ("cache-control", "no-cache"),
    ("cache-control", "no-store"),
    ("cache-control", "public, max-age=31536000"),
    ("content-encoding", "br"),
    ("content-encoding", "gzip"),
    ("content-type", "application/dns-message"),
    ("content-type", "application/javascript"),
    ("content-type", "application/json"),
    ("content-type", "application/x-www-form-urlencoded"),
    ("content-type", "image/gif"),
    ("content-type", "image/jpeg"),
    ("content-type", "image/png"),
    ("content-type", "text/css"),
    ("content-type", "text/html; charset=utf-8"),
    ("content-type", "text/plain"),
    ("content-type", "text/plain;charset=utf-8"),
    ("range", "bytes=0-"),
    ("strict-transport-security", "max-age=31536000"),
    (
        "strict-transport-security",
        "max-age=31536000; includesubdomains",
    ),
    (
        "strict-transport-security",
        "max-age=31536000; includesubdomains; preload",
    ),
    ("vary", "accept-encoding"),
    ("vary", "origin"),
    ("x-content-type-options", "nosniff"),
    ("x-xss-protection", "1; mode=block"),
    (":status", "100"),
    (":status", "204"),
    (":status", "206"),
    (":status", "302"),
    (":status", "400"),
    (":status", "403"),
    (":status", "421"),
    (":status", "425"),
    (":status", "500"),
    ("accept-language", ""),
    ("access-control-allow-credentials", "FALSE"),
    ("access-control-allow-credentials", "TRUE"),
    ("access-control-allow-headers", "*"),
    ("access-control-allow-methods", "get"),
    ("access-control-allow-methods", "get, post, options"),
    ("access-control-allow-methods", "options"),
    ("access-control-expose-headers", "content-length"),
    ("access-control-request-headers", "content-type"),
    ("access-control-request-method", "get"),
    ("access-control-request-method", "post"),
    ("alt-svc", "clear"),
    ("authorization", ""),
    (
        "content-security-policy",
        "script-src 'none'; object-src 'none'; base-uri 'none'",
    ),
    ("early-data", "1"),
    ("expect-ct", ""),
    ("forwarded", ""),
    ("if-range", ""),
    ("origin", ""),
    ("purpose", "prefetch"),
    ("server", ""),
    ("timing-allow-origin", "*"),
    ("upgrade-insecure-requests", "1"),
    ("user-agent", ""),
    ("x-forwarded-for", ""),
    ("x-frame-options", "deny"),
    ("x-frame-options", "sameorigin"),
];

/// The pseudo-headers of a request, as bits.
const METHOD: u8 = 1;
const SCHEME: u8 = 2;
const AUTHORITY: u8 = 4;
const PATH: u8 = 8;
const PROTOCOL: u8 = 16;
/// Not a request's: `:status` or unknown.
const OTHER: u8 = 128;

fn pseudo_bit(name: &[u8]) -> u8 {
    match name {
        b":method" => METHOD,
        b":scheme" => SCHEME,
        b":authority" => AUTHORITY,
        b":path" => PATH,
        b":protocol" => PROTOCOL,
        _ => OTHER,
    }
}

/// A request read from its HEADERS frame.
#[derive(Debug, Default)]
pub struct Request {
    /// Its head in HTTP/1.1's shape (request line, Host from
    /// `:authority` where it had none, cookies as one field, and
    /// `Transfer-Encoding: chunked` for a body of unknown length).
    pub head: BytesMut,
    pub method: Vec<u8>,
    /// Its Content-Length, when it gave one.
    pub content_length: Option<u64>,
    /// Whether its body is framed in chunks by this server.
    pub chunk_body: bool,
}

impl Request {
    /// Whether it may be answered from 0-RTT early data: a safe method
    /// (RFC 9110 §9.2.1) with no body announced.
    pub fn safe(&self) -> bool {
        matches!(&self.method[..], b"GET" | b"HEAD" | b"OPTIONS") && self.content_length.is_none()
    }
}

/// What a section's reading keeps of its pseudo-headers.
#[derive(Default)]
struct Pseudo {
    seen: u8,
    method: Vec<u8>,
    authority: Vec<u8>,
    path: Vec<u8>,
}

/// Reads a request's field section; `limit` bounds its decoded size as
/// RFC 9114 §4.2.2 counts it (each field's name and value, and 32).
pub fn decode_request(block: &[u8], limit: u64) -> Result<Request, Malformed> {
    let mut pseudo = Pseudo::default();
    let mut fields = BytesMut::with_capacity(block.len() * 2 + 64);
    let mut cookies: Vec<u8> = Vec::new();
    let mut host: Option<(usize, usize)> = None;
    let mut content_length: Option<u64> = None;
    let mut regular = false;
    read_section(block, limit, |name, value| {
        if let Some(bit) = name.strip_prefix(b":").map(|_| pseudo_bit(name)) {
            if bit == OTHER {
                return Err(Malformed::PseudoNotForRequests);
            }
            if regular {
                return Err(Malformed::PseudoAfterField);
            }
            if pseudo.seen & bit != 0 {
                return Err(Malformed::PseudoTwice);
            }
            pseudo.seen |= bit;
            if value.iter().any(|&b| b <= b' ' || b == 0x7f) {
                return Err(Malformed::BadPseudoValue);
            }
            match bit {
                METHOD => pseudo.method = value.to_vec(),
                AUTHORITY if value.is_empty() => return Err(Malformed::BadPseudoValue),
                AUTHORITY => pseudo.authority = value.to_vec(),
                PATH if value.is_empty() => return Err(Malformed::EmptyPath),
                // Origin-form, or "*" (RFC 9114 §4.3.1): never a target
                // that names a host of its own.
                PATH if value[0] != b'/' && value != b"*" => return Err(Malformed::BadPseudoValue),
                PATH => pseudo.path = value.to_vec(),
                _ => {}
            }
            return Ok(());
        }
        regular = true;
        if value.iter().any(|&b| (b < b' ' && b != b'\t') || b == 0x7f) {
            return Err(Malformed::BadValue);
        }
        match name {
            b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding"
            | b"upgrade" => return Err(Malformed::ConnectionSpecific),
            b"te" if value != b"trailers" => return Err(Malformed::ConnectionSpecific),
            b"cookie" => {
                if !cookies.is_empty() {
                    cookies.extend_from_slice(b"; ");
                }
                cookies.extend_from_slice(value);
                return Ok(());
            }
            b"content-length" => {
                let n = std::str::from_utf8(value)
                    .ok()
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or(Malformed::BadContentLength)?;
                if content_length.is_some_and(|m| m != n) {
                    return Err(Malformed::BadContentLength);
                }
                content_length = Some(n);
            }
            b"host" => {
                if host.is_some() {
                    return Err(Malformed::HostNotAuthority);
                }
                host = Some((fields.len() + name.len() + 2, value.len()));
            }
            _ => {}
        }
        fields.extend_from_slice(name);
        fields.extend_from_slice(b": ");
        fields.extend_from_slice(value);
        fields.extend_from_slice(b"\r\n");
        Ok(())
    })?;
    let connect = pseudo.method == b"CONNECT";
    if pseudo.seen & METHOD == 0 {
        return Err(Malformed::MissingPseudo);
    }
    if connect && pseudo.seen & PROTOCOL == 0 {
        // RFC 9114 §4.4: :authority only.
        if pseudo.seen & (SCHEME | PATH) != 0 {
            return Err(Malformed::ConnectWithPath);
        }
        if pseudo.seen & AUTHORITY == 0 {
            return Err(Malformed::MissingPseudo);
        }
    } else if pseudo.seen & (SCHEME | PATH) != SCHEME | PATH {
        return Err(Malformed::MissingPseudo);
    }
    if let Some((at, len)) = host {
        if pseudo.seen & AUTHORITY != 0
            && !fields[at..at + len].eq_ignore_ascii_case(&pseudo.authority)
        {
            return Err(Malformed::HostNotAuthority);
        }
    }
    let chunk_body = content_length.is_none() && !matches!(&pseudo.method[..], b"GET" | b"HEAD");
    let mut head = BytesMut::with_capacity(fields.len() + pseudo.path.len() + 96);
    head.extend_from_slice(&pseudo.method);
    head.extend_from_slice(b" ");
    if connect && pseudo.seen & PATH == 0 {
        head.extend_from_slice(&pseudo.authority);
    } else {
        head.extend_from_slice(&pseudo.path);
    }
    head.extend_from_slice(b" HTTP/1.1\r\n");
    if host.is_none() && pseudo.seen & AUTHORITY != 0 {
        head.extend_from_slice(b"host: ");
        head.extend_from_slice(&pseudo.authority);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(&fields);
    if !cookies.is_empty() {
        head.extend_from_slice(b"cookie: ");
        head.extend_from_slice(&cookies);
        head.extend_from_slice(b"\r\n");
    }
    if chunk_body {
        head.extend_from_slice(b"transfer-encoding: chunked\r\n");
    }
    head.extend_from_slice(b"\r\n");
    Ok(Request {
        head,
        method: pseudo.method,
        content_length,
        chunk_body,
    })
}

/// A field's name and value.
pub type Field = (Vec<u8>, Vec<u8>);

/// Reads a trailer section: regular fields only (RFC 9114 §4.1.2), each
/// checked as a request's, handed on as (name, value).
pub fn decode_trailers(block: &[u8], limit: u64) -> Result<Vec<Field>, Malformed> {
    let mut out = Vec::new();
    read_section(block, limit, |name, value| {
        if name.starts_with(b":") {
            return Err(Malformed::PseudoNotForRequests);
        }
        if value.iter().any(|&b| (b < b' ' && b != b'\t') || b == 0x7f) {
            return Err(Malformed::BadValue);
        }
        out.push((name.to_vec(), value.to_vec()));
        Ok(())
    })?;
    Ok(out)
}

/// Reads a field section, handing each field's name and value to `each`.
fn read_section(
    block: &[u8],
    limit: u64,
    mut each: impl FnMut(&[u8], &[u8]) -> Result<(), Malformed>,
) -> Result<(), Malformed> {
    let mut r = Reader { buf: block, at: 0 };
    // Required Insert Count (RFC 9204 §4.5.1): 0 without a dynamic table.
    if r.int(8)? != 0 {
        return Err(Malformed::DynamicTable);
    }
    r.int(7)?; // the base's delta: of no use with no dynamic table
    let (mut name_buf, mut value_buf) = (Vec::new(), Vec::new());
    let mut size = 0u64;
    while !r.done() {
        let first = r.peek()?;
        let (name, value): (&[u8], &[u8]) = if first & 0x80 != 0 {
            // Indexed field line.
            if first & 0x40 == 0 {
                return Err(Malformed::DynamicTable);
            }
            let (name, value) = static_entry(r.int(6)?)?;
            (name.as_bytes(), value.as_bytes())
        } else if first & 0x40 != 0 {
            // Literal with a name reference.
            if first & 0x10 == 0 {
                return Err(Malformed::DynamicTable);
            }
            let (name, _) = static_entry(r.int(4)?)?;
            (name.as_bytes(), r.string(7, &mut value_buf)?)
        } else if first & 0x20 != 0 {
            // Literal with a literal name.
            let name = r.string(3, &mut name_buf)?;
            let valid = match name.split_first() {
                Some((b':', rest)) => valid_name(rest),
                _ => valid_name(name),
            };
            if !valid {
                return Err(Malformed::BadName);
            }
            (name, r.string(7, &mut value_buf)?)
        } else {
            // The post-base forms refer to the dynamic table.
            return Err(Malformed::DynamicTable);
        };
        size += name.len() as u64 + value.len() as u64 + 32;
        if size > limit {
            return Err(Malformed::TooLarge);
        }
        each(name, value)?;
    }
    Ok(())
}

fn static_entry(index: u64) -> Result<(&'static str, &'static str), Malformed> {
    STATIC
        .get(usize::try_from(index).map_err(|_| Malformed::Encoding)?)
        .copied()
        .ok_or(Malformed::Encoding)
}

/// A field name (past a pseudo-header's colon): lower-case token
/// characters (RFC 9110 §5.6.2).
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name
            .iter()
            .all(|&b| matches!(b, b'a'..=b'z' | b'0'..=b'9') || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A cursor on a field section.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn done(&self) -> bool {
        self.at >= self.buf.len()
    }

    fn peek(&self) -> Result<u8, Malformed> {
        self.buf.get(self.at).copied().ok_or(Malformed::Encoding)
    }

    /// A prefixed integer (RFC 7541 §5.1) in the low `bits` of the next
    /// byte and those after; values past 2^32 are refused.
    fn int(&mut self, bits: u32) -> Result<u64, Malformed> {
        let mask = (1u16 << bits) as u64 - 1;
        let mut value = u64::from(self.peek()?) & mask;
        self.at += 1;
        if value < mask {
            return Ok(value);
        }
        let mut shift = 0;
        loop {
            let b = self.peek()?;
            self.at += 1;
            value += u64::from(b & 0x7f) << shift;
            if value > u64::from(u32::MAX) {
                return Err(Malformed::Encoding);
            }
            if b & 0x80 == 0 {
                return Ok(value);
            }
            shift += 7;
            if shift > 28 {
                return Err(Malformed::Encoding);
            }
        }
    }

    /// A string literal whose length has a `bits` prefix, its Huffman
    /// flag the bit above; decoded into `buf` when Huffman-coded.
    fn string<'b>(&mut self, bits: u32, buf: &'b mut Vec<u8>) -> Result<&'b [u8], Malformed>
    where
        'a: 'b,
    {
        let huffman = self.peek()? & (1 << bits) != 0;
        let len = self.int(bits)? as usize;
        let end = self.at.checked_add(len).ok_or(Malformed::Encoding)?;
        let raw = self.buf.get(self.at..end).ok_or(Malformed::Encoding)?;
        self.at = end;
        if !huffman {
            return Ok(raw);
        }
        buf.clear();
        huffman::decode(raw, buf).map_err(|_| Malformed::Encoding)?;
        Ok(&buf[..])
    }
}

/// Appends a prefixed integer: `value` in the low `bits` of a byte whose
/// high bits are `flags`, and the bytes it needs past them.
fn put_int(out: &mut BytesMut, flags: u8, bits: u32, value: u64) {
    let max = (1u64 << bits) - 1;
    if value < max {
        out.put_u8(flags | value as u8);
        return;
    }
    out.put_u8(flags | max as u8);
    let mut rest = value - max;
    while rest >= 128 {
        out.put_u8((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.put_u8(rest as u8);
}

/// Appends one field line.
fn put_field(out: &mut BytesMut, name: &[u8], value: &[u8]) {
    let mut name_ref = None;
    for &i in static_by_length(name.len()) {
        let (n, v) = STATIC[usize::from(i)];
        if n.as_bytes() == name {
            if v.as_bytes() == value {
                // Indexed field line, static.
                put_int(out, 0xc0, 6, u64::from(i));
                return;
            }
            name_ref.get_or_insert(i);
        }
    }
    match name_ref {
        // Literal with a static name reference.
        Some(i) => put_int(out, 0x50, 4, u64::from(i)),
        // Literal with a literal name.
        None => {
            put_int(out, 0x20, 3, name.len() as u64);
            out.extend_from_slice(name);
        }
    }
    put_int(out, 0x00, 7, value.len() as u64);
    out.extend_from_slice(value);
}

/// The static table's entries whose names are `len` bytes long, in table
/// order (found once, so that a response's fields are each compared with
/// a few entries, not all 99).
fn static_by_length(len: usize) -> &'static [u8] {
    const LONGEST: usize = 40;
    static BY_LENGTH: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    let table = BY_LENGTH.get_or_init(|| {
        let mut table = vec![Vec::new(); LONGEST + 1];
        for (i, (name, _)) in STATIC.iter().enumerate() {
            table[name.len()].push(i as u8);
        }
        table
    });
    table.get(len).map_or(&[], |entries| &entries[..])
}

/// Appends a HEADERS frame holding `block`.
fn put_headers_frame(out: &mut BytesMut, block: &[u8]) {
    super::frames::put_varint(out, super::frames::HEADERS);
    super::frames::put_varint(out, block.len() as u64);
    out.extend_from_slice(block);
}

/// The HEADERS frame of the response whose HTTP/1 head the steps wrote;
/// None when it does not parse. Connection-specific fields are dropped,
/// names lower-cased, and a field whose name is no token is dropped.
pub fn encode_response(head: &[u8]) -> Option<BytesMut> {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut many;
    let mut parsed = httparse::Response::new(&mut fields);
    let status = match parsed.parse(head) {
        Ok(httparse::Status::Complete(_)) => parsed.code?,
        Err(httparse::Error::TooManyHeaders) => {
            many = vec![httparse::EMPTY_HEADER; 1024];
            parsed = httparse::Response::new(&mut many);
            match parsed.parse(head).ok()? {
                httparse::Status::Complete(_) => parsed.code?,
                httparse::Status::Partial => return None,
            }
        }
        _ => return None,
    };
    if !(100..=999).contains(&status) {
        return None;
    }
    let mut block = BytesMut::with_capacity(head.len() + 16);
    block.put_u8(0); // Required Insert Count
    block.put_u8(0); // Delta Base
    put_field(&mut block, b":status", &digits(status));
    let mut lower = Vec::with_capacity(32);
    for f in parsed.headers.iter() {
        let name = f.name.as_bytes();
        if connection_specific(name) {
            continue;
        }
        lower.clear();
        lower.extend(name.iter().map(u8::to_ascii_lowercase));
        if !valid_name(&lower) {
            continue;
        }
        put_field(&mut block, &lower, f.value);
    }
    let mut out = BytesMut::with_capacity(block.len() + 9);
    put_headers_frame(&mut out, &block);
    Some(out)
}

/// A status code's three digits.
fn digits(status: u16) -> [u8; 3] {
    let s = status.clamp(100, 999);
    [
        b'0' + (s / 100) as u8,
        b'0' + (s / 10 % 10) as u8,
        b'0' + (s % 10) as u8,
    ]
}

/// The HEADERS frame of a response of `status` alone.
pub fn encode_status(status: u16) -> BytesMut {
    let mut block = BytesMut::with_capacity(8);
    block.put_u8(0);
    block.put_u8(0);
    put_field(&mut block, b":status", &digits(status));
    let mut out = BytesMut::with_capacity(16);
    put_headers_frame(&mut out, &block);
    out
}

/// The HEADERS frame of a trailer section; None when no field of
/// `fields` may go in one (connection-specific ones, and names that are
/// no token, are dropped).
pub fn encode_trailers(fields: &[(bytes::Bytes, bytes::Bytes)]) -> Option<BytesMut> {
    let mut block = BytesMut::with_capacity(64);
    block.put_u8(0);
    block.put_u8(0);
    let mut any = false;
    let mut lower = Vec::with_capacity(32);
    for (name, value) in fields {
        if connection_specific(name) {
            continue;
        }
        lower.clear();
        lower.extend(name.iter().map(u8::to_ascii_lowercase));
        if !valid_name(&lower) || value.iter().any(|&b| (b < b' ' && b != b'\t') || b == 0x7f) {
            continue;
        }
        put_field(&mut block, &lower, value);
        any = true;
    }
    any.then(|| {
        let mut out = BytesMut::with_capacity(block.len() + 9);
        put_headers_frame(&mut out, &block);
        out
    })
}

#[cfg(test)]
#[path = "qpack_tests.rs"]
mod tests;
