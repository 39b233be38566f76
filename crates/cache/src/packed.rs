//! The packed form of an object's stored head: what a cached object
//! keeps of its status line and fields, and how they are read back and
//! written out.
//!
//! A stored head lives as long as its object, so its bytes are part of
//! what a cache can hold. Most status lines are the usual one for their
//! code (`HTTP/1.1 200 OK`), and most field names are a few dozen
//! well-known ones written the same way by every server. A packed head
//! keeps neither: one byte says the status line is the usual one, and a
//! well-known name is one byte. Values are kept as they came, each after
//! its length, so a field is read without searching for its end. A head
//! that would not come back byte for byte (a field line not written
//! `Name: value`, a name longer than 255 bytes) is kept as its text.
//!
//! Layout: nothing (a marker's head), or a byte saying the form, then
//! - [`TEXT`]: the head's text, as given;
//! - [`USUAL`]: the fields;
//! - [`OWN_LINE`]: the status line's length and bytes (without its CRLF),
//!   then the fields.
//!
//! A field is its name's number in the table (1 and up), or 0, the name's
//! length in one byte and its bytes; then the value's length (7 bits a
//! byte, low bits first) and its bytes.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;

/// The head's text as given.
const TEXT: u8 = 0;
/// The usual status line for the object's status, then the fields.
const USUAL: u8 = 1;
/// A status line of its own, then the fields.
const OWN_LINE: u8 = 2;

/// Field names that get a number, as servers write them; each also in
/// lower case (HTTP/2 origins and some servers send them so).
const NAMES: &[&str] = &[
    "Server",
    "Date",
    "Content-Type",
    "Content-Length",
    "Cache-Control",
    "Last-Modified",
    "ETag",
    "Etag",
    "Expires",
    "Vary",
    "Content-Encoding",
    "Accept-Ranges",
    "Age",
    "Set-Cookie",
    "Location",
    "Pragma",
    "Link",
    "Via",
    "Allow",
    "Refresh",
    "Retry-After",
    "WWW-Authenticate",
    "Content-Language",
    "Content-Disposition",
    "Content-Location",
    "Content-Range",
    "Content-Security-Policy",
    "Content-Security-Policy-Report-Only",
    "Strict-Transport-Security",
    "Referrer-Policy",
    "Permissions-Policy",
    "Access-Control-Allow-Origin",
    "Access-Control-Allow-Credentials",
    "Access-Control-Allow-Methods",
    "Access-Control-Allow-Headers",
    "Access-Control-Expose-Headers",
    "Access-Control-Max-Age",
    "Cross-Origin-Resource-Policy",
    "Cross-Origin-Opener-Policy",
    "Cross-Origin-Embedder-Policy",
    "Timing-Allow-Origin",
    "Alt-Svc",
    "NEL",
    "Report-To",
    "P3P",
    "X-Content-Type-Options",
    "X-Frame-Options",
    "X-XSS-Protection",
    "X-Powered-By",
    "X-Cache",
    "X-Request-Id",
    "X-Robots-Tag",
    "X-UA-Compatible",
    "X-AspNet-Version",
    "Surrogate-Control",
    "Surrogate-Key",
    "xkey",
];

/// The numbered names, each written with the `": "` that follows it on
/// the wire, and the number of each name.
struct Table {
    lines: Vec<Box<[u8]>>,
    numbers: HashMap<Box<[u8]>, u8>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let lower = NAMES
            .iter()
            .map(|n| n.to_ascii_lowercase())
            .filter(|n| !NAMES.contains(&n.as_str()));
        let names: Vec<String> = NAMES.iter().map(|n| n.to_string()).chain(lower).collect();
        assert!(names.len() < 256, "a name's number is one byte");
        let mut numbers = HashMap::with_capacity(names.len());
        let mut lines = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            // Numbers start at 1: 0 says the name follows.
            numbers
                .entry(name.as_bytes().into())
                .or_insert((i + 1) as u8);
            lines.push(format!("{name}: ").into_bytes().into_boxed_slice());
        }
        Table { lines, numbers }
    })
}

impl Table {
    /// The name numbered `n`, with `": "` after it.
    #[inline]
    fn line(&self, n: u8) -> Option<&[u8]> {
        self.lines
            .get(usize::from(n).checked_sub(1)?)
            .map(|l| &l[..])
    }

    #[inline]
    fn name(&self, n: u8) -> Option<&[u8]> {
        self.line(n).map(|l| &l[..l.len() - 2])
    }
}

/// Packs a head's text (status line and field lines, each ending in
/// CRLF, no blank line) for an object of status `status`. An empty text
/// (a marker) packs to nothing, without an allocation.
pub(crate) fn pack(text: &[u8], status: u16) -> Box<[u8]> {
    if text.is_empty() {
        return Box::default();
    }
    thread_local! {
        // Packed here, then copied into an allocation of its exact size:
        // no allocation shrunk in place, which leaves holes between
        // objects (bench/README.md, memory per object).
        static ROOM: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    ROOM.with(|room| {
        let mut room = room.borrow_mut();
        room.clear();
        if !pack_into(text, status, &mut room) {
            room.clear();
            room.push(TEXT);
            room.extend_from_slice(text);
        }
        let packed = Box::from(&room[..]);
        if room.capacity() > 64 * 1024 {
            *room = Vec::new();
        }
        packed
    })
}

/// Packs fields and status line; false when the text would not come
/// back as it is.
fn pack_into(text: &[u8], status: u16, out: &mut Vec<u8>) -> bool {
    let mut lines = Lines(text);
    let Some(line) = lines.next() else {
        return false;
    };
    if is_usual_line(line, status) {
        out.push(USUAL);
    } else {
        out.push(OWN_LINE);
        push_len(out, line.len());
        out.extend_from_slice(line);
    }
    let table = table();
    for line in lines.by_ref() {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return false;
        };
        let name = &line[..colon];
        let Some(value) = line[colon + 1..].strip_prefix(b" ") else {
            return false;
        };
        if name.is_empty() || value.first().is_some_and(|&b| b == b' ' || b == b'\t') {
            return false;
        }
        match table.numbers.get(name) {
            Some(&n) => out.push(n),
            None => {
                let Ok(len) = u8::try_from(name.len()) else {
                    return false;
                };
                out.extend_from_slice(&[0, len]);
                out.extend_from_slice(name);
            }
        }
        push_len(out, value.len());
        out.extend_from_slice(value);
    }
    lines.0.is_empty()
}

/// The lines of a head's text, each without its CRLF; stops at a line
/// that does not end in CRLF, leaving it in `.0`.
struct Lines<'a>(&'a [u8]);

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let end = self.0.iter().position(|&b| b == b'\n')?;
        let line = self.0[..end].strip_suffix(b"\r")?;
        self.0 = &self.0[end + 1..];
        Some(line)
    }
}

/// Whether a status line (without CRLF) is the one [`usual_line`]
/// writes for `status`.
fn is_usual_line(line: &[u8], status: u16) -> bool {
    usual_line(status).and_then(|l| l.strip_suffix(b"\r\n")) == Some(line)
}

/// `HTTP/1.1 <status> <its usual reason>` and CRLF, for a status from 100
/// to 999: made once per status, so that a hit writes its status line in
/// one copy.
#[inline]
fn usual_line(status: u16) -> Option<&'static [u8]> {
    static LINES: OnceLock<Box<[Box<[u8]>]>> = OnceLock::new();
    let lines = LINES.get_or_init(|| {
        (100..1000u16)
            .map(|s| {
                let reason = lacquer_http::reason_phrase(s);
                format!("HTTP/1.1 {s} {reason}\r\n").into_bytes().into()
            })
            .collect()
    });
    lines
        .get(usize::from(status.checked_sub(100)?))
        .map(|l| &l[..])
}

fn push_len(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

#[inline]
fn read_len(bytes: &[u8]) -> Option<(usize, &[u8])> {
    let mut n = 0usize;
    for (i, &b) in bytes.iter().enumerate().take(5) {
        n |= usize::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((n, &bytes[i + 1..]));
        }
    }
    None
}

/// A packed head, read.
#[derive(Clone, Copy)]
pub(crate) struct Packed<'a>(pub &'a [u8]);

impl<'a> Packed<'a> {
    /// The status line without its CRLF (as given for a head kept as
    /// text; none for a usual one).
    fn own_line(self) -> Option<&'a [u8]> {
        match self.0.split_first() {
            Some((&TEXT, text)) => Lines(text).next().or(Some(text)),
            Some((&OWN_LINE, rest)) => {
                let (len, rest) = read_len(rest)?;
                rest.get(..len)
            }
            _ => None,
        }
    }

    /// Where the fields start, and whether they are packed.
    #[inline]
    fn field_part(self) -> (&'a [u8], bool) {
        match self.0.split_first() {
            None => (&[], true),
            Some((&TEXT, text)) => {
                let start = text
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(text.len(), |p| p + 1);
                (&text[start..], false)
            }
            Some((&USUAL, rest)) => (rest, true),
            Some((_, rest)) => match read_len(rest) {
                Some((len, rest)) => (rest.get(len..).unwrap_or_default(), true),
                None => (&[], true),
            },
        }
    }

    /// Writes the status line (the usual one for `status` unless the
    /// head has its own), CRLF included; nothing for a marker.
    #[inline]
    pub fn write_status_line(self, status: u16, out: &mut Vec<u8>) {
        match self.0.first() {
            None => {}
            Some(&USUAL) => out.extend_from_slice(usual_line(status).unwrap_or_default()),
            Some(_) => {
                out.extend_from_slice(self.own_line().unwrap_or_default());
                out.extend_from_slice(b"\r\n");
            }
        }
    }

    /// Writes the field lines, each ending in CRLF.
    #[inline]
    pub fn write_fields(self, out: &mut Vec<u8>) {
        let (mut rest, packed) = self.field_part();
        if !packed {
            out.extend_from_slice(rest);
            return;
        }
        let table = table();
        while let Some((&n, after)) = rest.split_first() {
            let after = if n == 0 {
                let Some((name, after)) = after
                    .split_first()
                    .and_then(|(&len, after)| after.split_at_checked(usize::from(len)))
                else {
                    return;
                };
                out.extend_from_slice(name);
                out.extend_from_slice(b": ");
                after
            } else {
                out.extend_from_slice(table.line(n).unwrap_or_default());
                after
            };
            let Some((value, after)) =
                read_len(after).and_then(|(len, after)| after.split_at_checked(len))
            else {
                return;
            };
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
            rest = after;
        }
    }

    /// Writes the status line and the field lines.
    #[inline]
    pub fn write(self, status: u16, out: &mut Vec<u8>) {
        if let Some((&TEXT, text)) = self.0.split_first() {
            out.extend_from_slice(text);
            return;
        }
        self.write_status_line(status, out);
        self.write_fields(out);
    }

    /// The reason phrase of the status line.
    pub fn reason(self, status: u16) -> &'a [u8] {
        match self.own_line() {
            Some(line) => line.get("HTTP/1.1 200 ".len()..).unwrap_or_default(),
            None if self.0.is_empty() => &[],
            None => lacquer_http::reason_phrase(status).as_bytes(),
        }
    }

    /// The fields, name and value, in order.
    pub fn fields(self) -> Fields<'a> {
        let (rest, packed) = self.field_part();
        Fields { rest, packed }
    }
}

/// The fields of a packed head.
pub(crate) struct Fields<'a> {
    rest: &'a [u8],
    packed: bool,
}

impl<'a> Iterator for Fields<'a> {
    type Item = (&'a [u8], &'a [u8]);

    #[inline]
    fn next(&mut self) -> Option<(&'a [u8], &'a [u8])> {
        if !self.packed {
            return self.next_text();
        }
        let (&n, rest) = self.rest.split_first()?;
        let (name, rest) = if n == 0 {
            let (&len, rest) = rest.split_first()?;
            rest.split_at_checked(usize::from(len))?
        } else {
            (table().name(n)?, rest)
        };
        let (len, rest) = read_len(rest)?;
        let (value, rest) = rest.split_at_checked(len)?;
        self.rest = rest;
        Some((name, value))
    }
}

impl<'a> Fields<'a> {
    /// The next `Name: value` line of a head kept as text (lines without
    /// a colon are passed by, as a fetch never writes them).
    fn next_text(&mut self) -> Option<(&'a [u8], &'a [u8])> {
        while !self.rest.is_empty() {
            let end = self.rest.iter().position(|&b| b == b'\n');
            let line = &self.rest[..end.unwrap_or(self.rest.len())];
            self.rest = &self.rest[end.map_or(self.rest.len(), |e| e + 1)..];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            let value = &line[colon + 1..];
            let skip = value
                .iter()
                .take_while(|&&b| b == b' ' || b == b'\t')
                .count();
            return Some((&line[..colon], &value[skip..]));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(p: Packed<'_>, status: u16) -> Vec<u8> {
        let mut out = Vec::new();
        p.write(status, &mut out);
        out
    }

    const NGINX: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\n\
        Date: Thu, 26 Nov 2026 02:11:56 GMT\r\nContent-Type: text/plain\r\n\
        Cache-Control: max-age=3600\r\n";

    #[test]
    fn a_usual_head_packs_small_and_comes_back_as_it_was() {
        let packed = pack(NGINX, 200);
        assert_eq!(packed[0], USUAL);
        // One byte of form, then a byte of name and one of length each.
        let values = "nginx/1.22.1Thu, 26 Nov 2026 02:11:56 GMTtext/plainmax-age=3600".len();
        assert_eq!(packed.len(), 1 + 4 * 2 + values);
        let p = Packed(&packed);
        assert_eq!(text(p, 200), NGINX);
        assert_eq!(p.reason(200), b"OK");
        let fields: Vec<_> = p.fields().collect();
        assert_eq!(fields[0], (&b"Server"[..], &b"nginx/1.22.1"[..]));
        assert_eq!(fields[3], (&b"Cache-Control"[..], &b"max-age=3600"[..]));
        assert_eq!(fields.len(), 4);
        let mut lines = Vec::new();
        p.write_fields(&mut lines);
        assert_eq!(lines, &NGINX[17..]);
    }

    #[test]
    fn names_own_lines_and_long_values_come_back_as_they_were() {
        let long = "v".repeat(20_000);
        let heads: Vec<(u16, Vec<u8>)> = vec![
            (
                200,
                b"HTTP/1.1 200 Fine\r\nX-Own: 1\r\ncontent-type: a\r\n".to_vec(),
            ),
            (
                404,
                b"HTTP/1.1 404 Not Found\r\nX-Empty: \r\nxkey: a b\r\n".to_vec(),
            ),
            (200, b"HTTP/1.1 200 OK\r\n".to_vec()),
            (299, b"HTTP/1.1 299 \r\nA: b\r\n".to_vec()),
            (
                1200,
                format!("HTTP/1.1 200 OK\r\nX-Long: {long}\r\nETag: \"x\"\r\n").into_bytes(),
            ),
        ];
        for (status, head) in heads {
            let packed = pack(&head, status);
            assert_ne!(packed[0], TEXT, "{}", String::from_utf8_lossy(&head));
            let p = Packed(&packed);
            assert_eq!(text(p, status), head);
            let line_end = head.iter().position(|&b| b == b'\n').unwrap() + 1;
            let mut status_line = Vec::new();
            p.write_status_line(status, &mut status_line);
            assert_eq!(status_line, &head[..line_end]);
            assert!(head[9 + 4..].starts_with(p.reason(status)));
        }
        let p = pack(b"HTTP/1.1 200 Fine\r\nX-Own: 1\r\n", 200);
        assert_eq!(Packed(&p).reason(200), b"Fine");
        let long_value = format!("HTTP/1.1 200 OK\r\nX-Long: {long}\r\n");
        let p = pack(long_value.as_bytes(), 200);
        let (_, v) = Packed(&p).fields().next().unwrap();
        assert_eq!(v.len(), 20_000);
    }

    #[test]
    fn a_head_that_would_not_come_back_is_kept_as_text() {
        let name = "N".repeat(300);
        let odd: Vec<Vec<u8>> = vec![
            b"HTTP/1.1 200 OK\r\nA:b\r\n".to_vec(),
            b"HTTP/1.1 200 OK\r\nA:  b\r\n".to_vec(),
            b"HTTP/1.1 200 OK\r\nA: b\n".to_vec(),
            b"HTTP/1.1 200 OK\r\nno colon\r\n".to_vec(),
            b"HTTP/1.1 200 OK\r\nA: b".to_vec(),
            b"HTTP/1.1 200 OK\r\n: b\r\n".to_vec(),
            format!("HTTP/1.1 200 OK\r\n{name}: b\r\n").into_bytes(),
        ];
        for head in odd {
            let packed = pack(&head, 200);
            assert_eq!(packed[0], TEXT);
            let p = Packed(&packed);
            assert_eq!(text(p, 200), head);
            assert_eq!(p.reason(200), b"OK");
        }
        let p = pack(b"HTTP/1.1 200 OK\r\nA:  b\r\nno colon\r\nC:d\r\n", 200);
        let fields: Vec<_> = Packed(&p).fields().collect();
        assert_eq!(fields, [(&b"A"[..], &b"b"[..]), (&b"C"[..], &b"d"[..])]);
        assert!(
            pack(b"", 200).is_empty(),
            "a marker's head allocates nothing"
        );
        let empty = Packed(&[]);
        assert_eq!(text(empty, 200), b"");
        assert_eq!(empty.reason(200), b"");
        assert_eq!(empty.fields().count(), 0);
    }

    #[test]
    fn every_name_in_the_table_packs_to_one_byte_as_written() {
        for name in NAMES
            .iter()
            .map(|n| n.to_string())
            .chain(NAMES.iter().map(|n| n.to_ascii_lowercase()))
        {
            let head = format!("HTTP/1.1 200 OK\r\n{name}: v\r\n");
            let packed = pack(head.as_bytes(), 200);
            assert_eq!(packed.len(), 1 + 1 + 1 + 1, "{name}");
            assert_eq!(text(Packed(&packed), 200), head.as_bytes());
        }
        // Another case is a name of its own, kept as written.
        let packed = pack(b"HTTP/1.1 200 OK\r\nSERVER: v\r\n", 200);
        assert_eq!(packed.len(), 1 + 2 + 6 + 2);
        assert_eq!(
            Packed(&packed).fields().next(),
            Some((&b"SERVER"[..], &b"v"[..]))
        );
    }

    /// Heads made of random lines (well-known names, names of their own,
    /// odd spacing, stray bytes) come back byte for byte, whichever
    /// form they are kept in, and their fields read as the text's do.
    #[test]
    fn random_heads_come_back_as_they_were() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let pieces: &[&[u8]] = &[
            b"Server",
            b"content-type",
            b"X-A",
            b"",
            b" ",
            b"\t",
            b":",
            b"\r",
            b"\n",
            b"\r\n",
            b"v",
            b"a b",
            b"\x00\xff",
            b"ETag",
            b"\"e\"",
            b"xkey",
        ];
        for _ in 0..5000 {
            let status = [200u16, 404, 599, 1200][next(4)];
            let mut head = match next(3) {
                0 => b"HTTP/1.1 200 OK\r\n".to_vec(),
                1 => b"HTTP/1.1 404 Not Found\r\n".to_vec(),
                _ => b"HTTP/1.0 599 x\r\n".to_vec(),
            };
            for _ in 0..next(6) {
                match next(4) {
                    0 => {
                        for _ in 0..next(5) {
                            head.extend_from_slice(pieces[next(pieces.len())]);
                        }
                    }
                    _ => {
                        head.extend_from_slice(pieces[next(pieces.len())]);
                        head.extend_from_slice(b": ");
                        head.extend_from_slice(&b"v".repeat(next(300)));
                        head.extend_from_slice(b"\r\n");
                    }
                }
            }
            let packed = pack(&head, status);
            let p = Packed(&packed);
            assert_eq!(
                text(p, status),
                head,
                "{:?}",
                String::from_utf8_lossy(&head)
            );
            let as_text = Fields {
                rest: &head[head.iter().position(|&b| b == b'\n').unwrap() + 1..],
                packed: false,
            };
            assert!(
                p.fields().eq(as_text),
                "{:?}",
                String::from_utf8_lossy(&head)
            );
        }
    }

    #[test]
    fn lengths_round_trip() {
        for n in [0, 1, 127, 128, 16_383, 16_384, 1 << 21, (1 << 28) + 5] {
            let mut out = Vec::new();
            push_len(&mut out, n);
            out.push(0xAB);
            assert_eq!(read_len(&out), Some((n, &[0xAB][..])));
        }
        assert_eq!(read_len(&[0x80, 0x80]), None);
    }
}
