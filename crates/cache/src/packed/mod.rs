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

mod rendered;
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

/// Writes packed fields as field lines, each ending in CRLF.
fn write_packed_fields(mut rest: &[u8], out: &mut Vec<u8>) {
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
        let (rest, packed) = self.field_part();
        if !packed {
            out.extend_from_slice(rest);
            return;
        }
        rendered::write_fields(rest, out, write_packed_fields);
    }

    /// Writes the field lines as [`Packed::write_fields`] does, then
    /// calls `then` with `out`, where they start in it, and where each
    /// line ends (past its LF) counted from there.
    pub fn write_fields_then<R>(
        self,
        out: &mut Vec<u8>,
        then: impl FnOnce(&mut Vec<u8>, usize, &[u32]) -> R,
    ) -> R {
        let (rest, packed) = self.field_part();
        if !packed {
            let start = out.len();
            out.extend_from_slice(rest);
            let ends = rendered::line_ends(&out[start..]);
            return then(out, start, &ends);
        }
        rendered::write_fields_then(rest, out, write_packed_fields, then)
    }

    /// Whether [`Packed::write_fields`] writes each field as exactly
    /// `Name: value` and CRLF (a packed head's fields); a head kept as its
    /// text writes its lines as they came.
    #[inline]
    pub fn fields_are_packed(self) -> bool {
        self.field_part().1
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
mod tests;
