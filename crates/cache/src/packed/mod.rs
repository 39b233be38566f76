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
//! length in one byte and its bytes; then its value:
//! - the value's length (7 bits a byte, low bits first) and its bytes;
//! - or [`DATE`] and four bytes (little-endian): an IMF-fixdate as the
//!   seconds it says (29 bytes kept in 6), when writing them gives the
//!   text back;
//! - or, when the name's number has [`SHARED`] added, two bytes
//!   (little-endian): the number of a value many objects share, kept
//!   once for the process ([`shared`]).

mod shared;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ops::Deref;
use std::sync::OnceLock;

/// The head's text as given.
const TEXT: u8 = 0;
/// The usual status line for the object's status, then the fields.
const USUAL: u8 = 1;
/// A status line of its own, then the fields.
const OWN_LINE: u8 = 2;

/// Added to a name's number: its value is a shared one's number.
const SHARED: u8 = 0x80;
/// In place of a value's length (a length is never written so): an
/// IMF-fixdate's seconds follow.
const DATE: [u8; 2] = [0x80, 0x00];

/// Numbered names whose values differ from object to object: never
/// offered to the shared values.
const OWN_VALUES: &[&str] = &[
    "Date",
    "Content-Length",
    "Last-Modified",
    "ETag",
    "Etag",
    "Expires",
    "Age",
    "Set-Cookie",
    "Location",
    "Content-Location",
    "Content-Range",
    "X-Request-Id",
];

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
    /// By number: whether the name's values may be shared.
    shareable: Vec<bool>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let lower = NAMES
            .iter()
            .map(|n| n.to_ascii_lowercase())
            .filter(|n| !NAMES.contains(&n.as_str()));
        let names: Vec<String> = NAMES.iter().map(|n| n.to_string()).chain(lower).collect();
        assert!(
            names.len() < usize::from(SHARED),
            "a name's number leaves its top bit free"
        );
        let mut numbers = HashMap::with_capacity(names.len());
        let mut lines = Vec::with_capacity(names.len());
        let mut shareable = vec![false];
        for (i, name) in names.iter().enumerate() {
            // Numbers start at 1: 0 says the name follows.
            numbers
                .entry(name.as_bytes().into())
                .or_insert((i + 1) as u8);
            lines.push(format!("{name}: ").into_bytes().into_boxed_slice());
            shareable.push(!OWN_VALUES.iter().any(|o| o.eq_ignore_ascii_case(name)));
        }
        Table {
            lines,
            numbers,
            shareable,
        }
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
/// (a marker) packs to nothing; a small head is kept in the object
/// itself ([`Kept`]); neither allocates.
pub(crate) fn pack(text: &[u8], status: u16) -> Kept {
    if text.is_empty() {
        return Kept::default();
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
        let packed = Kept::new(&room);
        if room.capacity() > 64 * 1024 {
            *room = Vec::new();
        }
        packed
    })
}

/// The bytes a packed head takes in an object kept where they cost
/// least: up to [`Kept::INLINE`] of them in the object's own memory (a
/// head of the usual status line, a date and a few shared values fits),
/// more in an allocation of their size. 24 bytes either way.
#[derive(Debug, Clone)]
pub enum Kept {
    Inline { len: u8, bytes: [u8; Kept::INLINE] },
    Heap(Box<[u8]>),
}

impl Kept {
    /// The most bytes kept inline.
    pub const INLINE: usize = 22;

    fn new(packed: &[u8]) -> Kept {
        match packed.len() {
            len @ 0..=Kept::INLINE => {
                let mut bytes = [0; Kept::INLINE];
                bytes[..len].copy_from_slice(packed);
                Kept::Inline {
                    len: len as u8,
                    bytes,
                }
            }
            _ => Kept::Heap(packed.into()),
        }
    }

    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Kept::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Kept::Heap(b) => b,
        }
    }
}

impl Deref for Kept {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Default for Kept {
    fn default() -> Kept {
        Kept::Inline {
            len: 0,
            bytes: [0; Kept::INLINE],
        }
    }
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
        let number = table.numbers.get(name).copied();
        match number {
            Some(n) => out.push(n),
            None => {
                let Ok(len) = u8::try_from(name.len()) else {
                    return false;
                };
                out.extend_from_slice(&[0, len]);
                out.extend_from_slice(name);
            }
        }
        push_value(out, number, value, table);
    }
    lines.0.is_empty()
}

/// Writes a field's value after its name (whose number, `number`, is
/// the last byte written when it has one).
fn push_value(out: &mut Vec<u8>, number: Option<u8>, value: &[u8], table: &Table) {
    if let Some(secs) =
        lacquer_core::time::parse_imf_fixdate(value).and_then(|secs| u32::try_from(secs).ok())
    {
        out.extend_from_slice(&DATE);
        out.extend_from_slice(&secs.to_le_bytes());
        return;
    }
    if let Some(n) = number.filter(|&n| table.shareable[usize::from(n)]) {
        if let Some(shared) = shared::number_of(value) {
            if let Some(name) = out.last_mut() {
                *name = n | SHARED;
            }
            out.extend_from_slice(&shared.to_le_bytes());
            return;
        }
    }
    push_len(out, value.len());
    out.extend_from_slice(value);
}

/// A field's value as a packed head keeps it, and what follows it.
#[inline]
fn read_value(shared: bool, bytes: &[u8]) -> Option<(Value<'_>, &[u8])> {
    if shared {
        let (n, rest) = bytes.split_first_chunk::<2>()?;
        return Some((Value::Slice(shared::value(u16::from_le_bytes(*n))?), rest));
    }
    if bytes.starts_with(&DATE) {
        let (secs, rest) = bytes[DATE.len()..].split_first_chunk::<4>()?;
        return Some((Value::Date(u32::from_le_bytes(*secs)), rest));
    }
    let (len, rest) = read_len(bytes)?;
    let (value, rest) = rest.split_at_checked(len)?;
    Some((Value::Slice(value), rest))
}

/// A stored field's value: bytes of the head, of the shared values, or a
/// date kept as seconds and written out when read.
#[derive(Clone, Copy, Debug)]
pub enum Value<'a> {
    Slice(&'a [u8]),
    Date(u32),
}

/// A value read, as bytes: a date is written into the room it carries.
#[derive(Clone, Copy)]
pub enum ValueBytes<'a> {
    Slice(&'a [u8]),
    Date([u8; 29]),
}

impl<'a> Value<'a> {
    /// The value's bytes (a date written out).
    #[inline]
    pub fn bytes(self) -> ValueBytes<'a> {
        match self {
            Value::Slice(s) => ValueBytes::Slice(s),
            Value::Date(secs) => ValueBytes::Date(date_text(secs)),
        }
    }

    /// The value's bytes when the head holds them as they are (not for
    /// a date kept as seconds).
    #[inline]
    pub fn as_slice(self) -> Option<&'a [u8]> {
        match self {
            Value::Slice(s) => Some(s),
            Value::Date(_) => None,
        }
    }

    /// Appends the value's bytes.
    #[inline]
    pub fn write(self, out: &mut Vec<u8>) {
        match self {
            Value::Slice(s) => out.extend_from_slice(s),
            Value::Date(secs) => out.extend_from_slice(&date_text(secs)),
        }
    }

    /// A copy of the value's bytes.
    pub fn to_bytes(self) -> bytes::Bytes {
        match self {
            Value::Slice(s) => bytes::Bytes::copy_from_slice(s),
            Value::Date(secs) => bytes::Bytes::copy_from_slice(&date_text(secs)),
        }
    }
}

impl Deref for ValueBytes<'_> {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            ValueBytes::Slice(s) => s,
            ValueBytes::Date(d) => d,
        }
    }
}

impl PartialEq for Value<'_> {
    fn eq(&self, other: &Self) -> bool {
        *self.bytes() == *other.bytes()
    }
}

impl PartialEq<&[u8]> for Value<'_> {
    fn eq(&self, other: &&[u8]) -> bool {
        *self.bytes() == **other
    }
}

/// The text of a date kept as seconds; a thread writes the one it wrote
/// last again from memory (a hit on the same object, or objects fetched
/// in the same second).
#[inline]
fn date_text(secs: u32) -> [u8; 29] {
    thread_local! {
        static LAST: Cell<Option<(u32, [u8; 29])>> = const { Cell::new(None) };
    }
    LAST.with(|last| match last.get() {
        Some((was, text)) if was == secs => text,
        _ => {
            let text = lacquer_core::time::imf_fixdate(u64::from(secs));
            last.set(Some((secs, text)));
            text
        }
    })
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
                out.extend_from_slice(table.line(n & !SHARED).unwrap_or_default());
                after
            };
            let Some((value, after)) = read_value(n & SHARED != 0, after) else {
                return;
            };
            value.write(out);
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
    type Item = (&'a [u8], Value<'a>);

    #[inline]
    fn next(&mut self) -> Option<(&'a [u8], Value<'a>)> {
        if !self.packed {
            return self.next_text().map(|(n, v)| (n, Value::Slice(v)));
        }
        let (&n, rest) = self.rest.split_first()?;
        let (name, rest) = if n == 0 {
            let (&len, rest) = rest.split_first()?;
            rest.split_at_checked(usize::from(len))?
        } else {
            (table().name(n & !SHARED)?, rest)
        };
        let (value, rest) = read_value(n & SHARED != 0, rest)?;
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

    /// The fields, name and value, as bytes.
    fn fields_of(p: Packed<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
        p.fields()
            .map(|(n, v)| (n.to_vec(), v.bytes().to_vec()))
            .collect()
    }

    fn field(name: &str, value: &str) -> (Vec<u8>, Vec<u8>) {
        (name.as_bytes().to_vec(), value.as_bytes().to_vec())
    }

    const NGINX: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\n\
        Date: Thu, 26 Nov 2026 02:11:56 GMT\r\nContent-Type: text/plain\r\n\
        Cache-Control: max-age=3600\r\n";

    #[test]
    fn a_usual_head_packs_small_and_comes_back_as_it_was() {
        let packed = pack(NGINX, 200);
        assert_eq!(packed[0], USUAL);
        // One byte of form; the date a byte of name, two of mark and four
        // of seconds; the others a byte of name and at most one of length
        // and their bytes (another test may have shared them already).
        let values = "nginx/1.22.1text/plainmax-age=3600".len();
        assert!(packed.len() <= 1 + 7 + 3 * 2 + values, "{}", packed.len());
        // Seen twice, the three others are shared: three bytes each.
        let again = pack(NGINX, 200);
        assert_eq!(again.len(), 1 + 7 + 3 * 3);
        for packed in [packed, again] {
            let p = Packed(&packed);
            assert_eq!(text(p, 200), NGINX);
            assert_eq!(p.reason(200), b"OK");
            let fields = fields_of(p);
            assert_eq!(fields[0], field("Server", "nginx/1.22.1"));
            assert_eq!(fields[1], field("Date", "Thu, 26 Nov 2026 02:11:56 GMT"));
            assert_eq!(fields[3], field("Cache-Control", "max-age=3600"));
            assert_eq!(fields.len(), 4);
            let mut lines = Vec::new();
            p.write_fields(&mut lines);
            assert_eq!(lines, &NGINX[17..]);
        }
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
        assert_eq!(v.bytes().len(), 20_000);
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
        assert_eq!(fields_of(Packed(&p)), [field("A", "b"), field("C", "d")]);
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
        assert_eq!(fields_of(Packed(&packed)), [field("SERVER", "v")]);
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
            b"Date",
            b"Thu, 26 Nov 2026 02:11:56 GMT",
            b"Sat, 26 Nov 2026 02:11:56 GMT",
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
    fn dates_are_kept_as_seconds_only_when_they_come_back_as_they_were() {
        let head = b"HTTP/1.1 200 OK\r\nLast-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
            X-Own-Date: Tue, 29 Feb 2000 00:00:00 GMT\r\n\
            Expires: Sat, 06 Nov 1994 08:49:37 GMT\r\n\
            Date: Thu, 01 Jan 1970 00:00:00 GMT\r\n";
        let packed = pack(head, 200);
        let p = Packed(&packed);
        assert_eq!(text(p, 200), head);
        let kinds: Vec<bool> = p
            .fields()
            .map(|(_, v)| matches!(v, Value::Date(_)))
            .collect();
        // The wrong weekday is kept as it came.
        assert_eq!(kinds, [true, true, false, true]);
        let (_, first) = p.fields().next().unwrap();
        assert!(matches!(first, Value::Date(784_111_777)));
        assert_eq!(first.as_slice(), None);
        assert_eq!(&first.to_bytes()[..], b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(
            packed.len(),
            1 + 7 + (2 + 10 + 6) + (1 + 1 + 29) + 7,
            "dates in 6 bytes after their names"
        );
    }

    #[test]
    fn values_of_their_own_are_never_shared_however_often_seen() {
        let head = b"HTTP/1.1 200 OK\r\nETag: \"same-etag-value\"\r\n\
            Content-Length: 1234\r\nX-Not-Numbered: repeated value\r\n\
            content-type: text/x-shared-lower\r\n";
        let sizes: Vec<usize> = (0..3).map(|_| pack(head, 200).len()).collect();
        // Only the numbered name of shareable values shrank, once seen twice.
        let inline = "text/x-shared-lower".len() + 1;
        assert_eq!(sizes[1], sizes[2]);
        assert_eq!(sizes[0] - sizes[1], inline - 2, "{sizes:?}");
        let packed = pack(head, 200);
        assert_eq!(text(Packed(&packed), 200), head);
        assert_eq!(
            fields_of(Packed(&packed))[3],
            field("content-type", "text/x-shared-lower")
        );
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
