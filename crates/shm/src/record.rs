//! Log records: their binary form in the ring and in dump files, the
//! decoded form readers work with, and `Txn`, the buffer one transaction
//! writes its records into before they go to the ring in one batch.
//!
//! A record is an 8-byte header — payload length (u16 LE), tag code,
//! side (`c`, `b` or `-`), vxid (u32 LE) — followed by the payload.

use crate::ring::Log;
use crate::tags::Tag;
use bytes::Bytes;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::word::Word;

/// The kinds of transactions and the reasons they begin, as `Begin` and
/// `Link` records name them.
pub mod txn {
    use lacquer_core::word::Word;
    pub const SESS: Word = Word::new("sess");
    pub const REQ: Word = Word::new("req");
    pub const BEREQ: Word = Word::new("bereq");
    pub const HTTP1: Word = Word::new("HTTP/1");
    pub const RXREQ: Word = Word::new("rxreq");
    pub const ESI: Word = Word::new("esi");
    pub const FETCH: Word = Word::new("fetch");
    pub const BGFETCH: Word = Word::new("bgfetch");
    pub const PASS: Word = Word::new("pass");
    pub const PIPE: Word = Word::new("pipe");
    pub const RETRY: Word = Word::new("retry");
    pub const RESTART: Word = Word::new("restart");
}

/// Bytes before a record's payload.
pub const HEADER: usize = 8;

/// Which side of the daemon wrote a record, as varnishlog's raw mode
/// shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Backend,
    None,
}

impl Side {
    pub fn marker(self) -> char {
        match self {
            Side::Client => 'c',
            Side::Backend => 'b',
            Side::None => '-',
        }
    }

    fn from_marker(b: u8) -> Side {
        match b {
            b'c' => Side::Client,
            b'b' => Side::Backend,
            _ => Side::None,
        }
    }
}

/// One decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub vxid: u64,
    pub tag: Tag,
    pub side: Side,
    /// Usually a slice of the chunk the reader copied out of the ring, so
    /// that decoding a record neither allocates nor copies.
    pub payload: Bytes,
}

impl Record {
    pub fn new(vxid: u64, tag: Tag, side: Side, payload: &[u8]) -> Record {
        Record {
            vxid,
            tag,
            side,
            payload: Bytes::copy_from_slice(payload),
        }
    }

    /// The payload as text (invalid UTF-8 replaced).
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.payload)
    }

    /// Appends the binary form.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let len = self.payload.len().min(u16::MAX as usize);
        push_header(out, len as u16, self.tag, self.side, self.vxid);
        out.extend_from_slice(&self.payload[..len]);
    }
}

#[inline]
fn push_header(out: &mut Vec<u8>, len: u16, tag: Tag, side: Side, vxid: u64) {
    let l = len.to_le_bytes();
    let v = (vxid as u32).to_le_bytes();
    out.extend_from_slice(&[
        l[0],
        l[1],
        tag as u8,
        side.marker() as u8,
        v[0],
        v[1],
        v[2],
        v[3],
    ]);
}

/// Why bytes could not be decoded as records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed;

/// Decodes the record at `at` in `chunk` onto `out` — several records
/// for a packed one (see [`crate::packed`]) — with payloads that are
/// slices of the chunk. Returns the bytes it took, or `None` when the
/// record is not all there.
pub fn decode_into(
    chunk: &Bytes,
    at: usize,
    out: &mut Vec<Record>,
) -> Result<Option<usize>, Malformed> {
    let bytes = &chunk[at..];
    if bytes.len() < HEADER {
        return Ok(None);
    }
    let len = u16::from_le_bytes([bytes[0], bytes[1]]) as usize;
    let code = bytes[2];
    if !matches!(bytes[3], b'c' | b'b' | b'-') {
        return Err(Malformed);
    }
    let side = Side::from_marker(bytes[3]);
    let vxid = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as u64;
    if bytes.len() < HEADER + len {
        return Ok(None);
    }
    let payload = at + HEADER..at + HEADER + len;
    match Tag::from_code(code) {
        Some(tag) => out.push(Record {
            vxid,
            tag,
            side,
            payload: chunk.slice(payload),
        }),
        None => {
            if !crate::packed::expand(code, vxid, side, chunk, payload, out) {
                return Err(Malformed);
            }
        }
    }
    Ok(Some(HEADER + len))
}

/// Limits a transaction's buffer works within (`vsl_reclen`,
/// `vsl_buffer`), and the tags masked out (`vsl_mask`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub reclen: usize,
    pub buffer: usize,
    pub mask: u128,
}

/// The mask of the tags Varnish leaves out of the log by default
/// (`vsl_mask`), as the tag table marks them.
pub fn default_mask() -> u128 {
    let masked: Vec<Tag> = crate::tags::TAGS
        .iter()
        .copied()
        .filter(|t| t.masked_by_default())
        .collect();
    mask_of(&masked)
}

/// A mask with these tags set.
pub fn mask_of(tags: &[Tag]) -> u128 {
    tags.iter().fold(0, |m, &t| m | (1u128 << (t as u8)))
}

impl Limits {
    pub fn masks(&self, tag: Tag) -> bool {
        self.mask & (1u128 << (tag as u8)) != 0
    }
}

/// The records of one transaction (a session, a client request or a
/// backend fetch) on their way to the ring. Records are flushed when the
/// buffer passes `vsl_buffer`, at `End`, and when the `Txn` is dropped.
/// Without a log every method returns at once.
pub struct Txn {
    vxid: u64,
    side: Side,
    buf: Vec<u8>,
    /// The ring, which lives as long as the process: borrowed, so that a
    /// transaction writes no reference count shared by every worker.
    log: Option<&'static Log>,
    limits: Limits,
    t_start: f64,
    t_last: f64,
    /// `Begin` written and `End` not yet.
    open: bool,
    /// Records buffered since the last flush (`MAIN.shm_records`).
    records: u64,
}

impl Txn {
    /// A transaction writing to `log`, or nowhere.
    pub fn new(log: Option<&'static Log>, vxid: u64, side: Side, limits: Limits) -> Txn {
        // Sized for a typical request's records, so that logging one does
        // not grow the buffer record by record.
        let buf = match log {
            Some(_) => spare_buffer(limits.buffer.min(2048)),
            None => Vec::new(),
        };
        Txn {
            vxid,
            side,
            buf,
            log,
            limits,
            t_start: 0.0,
            t_last: 0.0,
            open: false,
            records: 0,
        }
    }

    pub fn vxid(&self) -> u64 {
        self.vxid
    }

    /// Whether records are written at all.
    #[inline]
    pub fn active(&self) -> bool {
        self.log.is_some()
    }

    /// Whether a record with this tag would be written.
    #[inline]
    pub fn wants(&self, tag: Tag) -> bool {
        self.log.is_some() && !self.limits.masks(tag)
    }

    /// Writes a record whose payload is built by `fill` straight into the
    /// buffer; it is cut at `vsl_reclen`.
    #[inline]
    pub fn with(&mut self, tag: Tag, fill: impl FnOnce(&mut Vec<u8>)) {
        if !self.wants(tag) {
            return;
        }
        let start = self.buf.len();
        push_header(&mut self.buf, 0, tag, self.side, self.vxid);
        self.records += 1;
        fill(&mut self.buf);
        let max = self.limits.reclen.min(u16::MAX as usize);
        let len = (self.buf.len() - start - HEADER).min(max);
        self.buf.truncate(start + HEADER + len);
        self.buf[start..start + 2].copy_from_slice(&(len as u16).to_le_bytes());
        if self.buf.len() >= self.limits.buffer {
            self.flush();
        }
    }

    /// Writes a packed record (see [`crate::packed`]): the pseudo tag
    /// `code` and a payload of exactly `len` bytes built by `fill`.
    pub(crate) fn raw(&mut self, code: u8, len: usize, fill: impl FnOnce(&mut Vec<u8>)) {
        let l = (len as u16).to_le_bytes();
        let v = (self.vxid as u32).to_le_bytes();
        let side = self.side.marker() as u8;
        let start = self.buf.len();
        self.buf
            .extend_from_slice(&[l[0], l[1], code, side, v[0], v[1], v[2], v[3]]);
        self.records += 1;
        fill(&mut self.buf);
        debug_assert_eq!(self.buf.len(), start + HEADER + len);
        if self.buf.len() >= self.limits.buffer {
            self.flush();
        }
    }

    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    /// When the transaction began and when it last logged a timestamp.
    pub(crate) fn times(&self) -> (f64, f64) {
        (self.t_start, self.t_last)
    }

    pub(crate) fn set_last(&mut self, t: f64) {
        self.t_last = t;
    }

    /// Writes a record with this payload.
    #[inline]
    pub fn bytes(&mut self, tag: Tag, payload: &[u8]) {
        self.with(tag, |b| b.extend_from_slice(payload));
    }

    /// Writes a record whose payload is a short fixed text.
    #[inline]
    pub fn word(&mut self, tag: Tag, word: &lacquer_core::word::Word) {
        use lacquer_core::word::WORD_MAX;
        if !self.wants(tag) {
            return;
        }
        // Cut to the word's length, or `vsl_reclen` if that is shorter.
        let len = word.as_str().len().min(self.limits.reclen);
        let mut record = [0u8; HEADER + WORD_MAX];
        record[HEADER..].copy_from_slice(word.padded());
        self.fixed(tag as u8, record, len);
    }

    /// Appends a record built whole in `record`, whose first [`HEADER`]
    /// bytes are left for its header (written here) and whose next `len`
    /// bytes are its payload: one copy of known size and a cut, where
    /// appending its parts one by one checks the buffer's room for each.
    #[inline]
    pub(crate) fn fixed<const N: usize>(&mut self, code: u8, mut record: [u8; N], len: usize) {
        debug_assert!(HEADER + len <= N);
        record[..2].copy_from_slice(&(len as u16).to_le_bytes());
        record[2] = code;
        record[3] = self.side.marker() as u8;
        record[4..8].copy_from_slice(&(self.vxid as u32).to_le_bytes());
        let at = self.buf.len();
        self.buf.extend_from_slice(&record);
        self.buf.truncate(at + HEADER + len);
        self.records += 1;
        if self.buf.len() >= self.limits.buffer {
            self.flush();
        }
    }

    /// Writes a record with a formatted payload.
    pub fn fmt(&mut self, tag: Tag, args: std::fmt::Arguments<'_>) {
        self.with(tag, |b| {
            use std::io::Write;
            let _ = b.write_fmt(args);
        });
    }

    /// Writes a header record: `Name: value`.
    #[inline]
    pub fn header(&mut self, tag: Tag, name: &[u8], value: &[u8]) {
        self.with(tag, |b| {
            b.extend_from_slice(name);
            b.extend_from_slice(b": ");
            b.extend_from_slice(value);
        });
    }

    /// Writes a `Begin` record and starts the transaction's clock.
    pub fn begin(&mut self, kind: &Word, parent: u64, reason: &Word, now: f64) {
        self.t_start = now;
        self.t_last = now;
        self.open = true;
        self.with(Tag::Begin, |b| {
            kind.push(b);
            b.push(b' ');
            push_u64(b, parent);
            b.push(b' ');
            reason.push(b);
        });
    }

    /// Writes a `Link` record naming a child transaction.
    pub fn link(&mut self, kind: &Word, child: u64, reason: &Word) {
        self.with(Tag::Link, |b| {
            kind.push(b);
            b.push(b' ');
            push_u64(b, child);
            b.push(b' ');
            reason.push(b);
        });
    }

    /// Writes `End` and flushes.
    pub fn end(&mut self) {
        self.open = false;
        self.bytes(Tag::End, b"");
        self.flush();
    }

    /// Sends what is buffered to the ring (through its worker's batch,
    /// on a worker that gathers them).
    pub fn flush(&mut self) {
        if let Some(log) = &self.log {
            if !self.buf.is_empty() {
                log.write_batched(&self.buf);
                self.buf.clear();
                let records = std::mem::take(&mut self.records);
                COUNTERS.add(Counter::shm_records, records);
            }
        }
    }
}

impl Txn {
    /// Flushes and gives the buffer back, for a long-lived transaction
    /// (a session) that will write little until it ends: it keeps room
    /// for that little (a `Link` a request, `SessClose`, `End`), made
    /// at once rather than grown from nothing a record at a time.
    pub fn release(&mut self) {
        /// A session's records after it began: a few requests' worth.
        const SESSION_ROOM: usize = 256;
        self.flush();
        let room = match self.log {
            // Kept by the thread from an earlier session.
            Some(_) => lacquer_core::spare::take(SESSION_ROOM),
            None => Vec::new(),
        };
        give_back(std::mem::replace(&mut self.buf, room));
    }
}

impl Drop for Txn {
    /// Every transaction that began ends, whichever way its owner left.
    fn drop(&mut self) {
        if self.open {
            self.end();
        }
        self.flush();
        give_back(std::mem::take(&mut self.buf));
    }
}

/// Transaction buffers each thread keeps for its next transactions: a
/// request's buffer is larger than the allocator's per-thread cache
/// holds, so making and freeing one for every request went to its
/// shared bins (and made it merge its small free chunks each time).
const SPARE_BUFFERS: usize = 8;
/// Past this a buffer is let go rather than kept (a transaction that
/// logged a large body, say).
const SPARE_MAX: usize = 64 * 1024;

thread_local! {
    static SPARE: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A buffer of at least `capacity` bytes, kept from an earlier
/// transaction on this thread when there is one.
fn spare_buffer(capacity: usize) -> Vec<u8> {
    SPARE
        .try_with(|spare| spare.borrow_mut().pop())
        .ok()
        .flatten()
        .filter(|b| b.capacity() >= capacity)
        .unwrap_or_else(|| Vec::with_capacity(capacity))
}

/// Keeps an emptied buffer for the thread's next transaction.
fn give_back(mut buf: Vec<u8>) {
    if buf.capacity() < 1024 {
        // A session's room, to the thread's small spares.
        lacquer_core::spare::keep(buf);
        return;
    }
    if buf.capacity() > SPARE_MAX {
        return;
    }
    buf.clear();
    let _ = SPARE.try_with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < SPARE_BUFFERS {
            spare.push(buf);
        }
    });
}

const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Appends a number in decimal, two digits at a time, written straight
/// into the vector's spare room: building the digits on the stack and
/// copying them over read back bytes just stored one or two at a time
/// as a block, which stalls the load until the stores land.
pub fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let n = v.checked_ilog10().unwrap_or(0) as usize + 1;
    out.reserve(n);
    let len = out.len();
    let room = &mut out.spare_capacity_mut()[..n];
    let mut i = n;
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        i -= 2;
        room[i].write(PAIRS[pair]);
        room[i + 1].write(PAIRS[pair + 1]);
    }
    if v >= 10 {
        let pair = v as usize * 2;
        room[0].write(PAIRS[pair]);
        room[1].write(PAIRS[pair + 1]);
    } else {
        room[0].write(b'0' + v as u8);
    }
    // SAFETY: the `n` bytes past `len` are within the capacity reserved
    // above, and the loop and the branch after it wrote every one of
    // them: the number has `n` digits, written from the end two at a
    // time down to index 0 or 1, and the first one or two last.
    unsafe { out.set_len(len + n) };
}

/// Appends an address as its `Display` writes it (an IPv4-mapped IPv6
/// address as the IPv4 one), an IPv4 address without the formatter.
pub fn push_ip(out: &mut Vec<u8>, ip: std::net::IpAddr) {
    match ip.to_canonical() {
        std::net::IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                push_u64(out, u64::from(octet));
            }
        }
        v6 => {
            use std::io::Write;
            let _ = write!(out, "{v6}");
        }
    }
}

/// Appends seconds with three decimals (`%.3f`), without going through
/// the float formatter.
pub fn push_fixed3(out: &mut Vec<u8>, secs: f64) {
    push_fixed(out, secs, 3);
}

/// Appends seconds with six decimals (`%f`), without going through the
/// float formatter.
pub fn push_fixed6(out: &mut Vec<u8>, secs: f64) {
    push_fixed(out, secs, 6);
}

/// Appends seconds with `decimals` (at most 6) decimals.
fn push_fixed(out: &mut Vec<u8>, secs: f64, decimals: usize) {
    let scale = 10u64.pow(decimals as u32);
    let mut digits = [b'0'; 6];
    if !secs.is_finite() {
        out.push(b'0');
        out.push(b'.');
        out.extend_from_slice(&digits[..decimals]);
        return;
    }
    if secs < 0.0 {
        out.push(b'-');
    }
    // Adding a half and truncating rounds without a libm call.
    let units = (secs.abs() * scale as f64 + 0.5) as u64;
    push_u64(out, units / scale);
    out.push(b'.');
    let mut frac = units % scale;
    for d in digits[..decimals].iter_mut().rev() {
        *d = b'0' + (frac % 10) as u8;
        frac /= 10;
    }
    out.extend_from_slice(&digits[..decimals]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode() {
        let r = Record::new(42, Tag::ReqURL, Side::Client, b"/index.html");
        let mut out = Vec::new();
        r.encode(&mut out);
        assert_eq!(out.len(), HEADER + 11);
        let decode = |b: &[u8]| {
            let mut got = Vec::new();
            decode_into(&Bytes::copy_from_slice(b), 0, &mut got).map(|n| n.map(|n| (got, n)))
        };
        assert_eq!(decode(&out), Ok(Some((vec![r], out.len()))));
        assert_eq!(decode(&out[..5]), Ok(None));
        assert_eq!(decode(&out[..10]), Ok(None));
        out[2] = 0;
        assert_eq!(decode(&out), Err(Malformed));
    }

    #[test]
    fn fixed_point() {
        let mut b = Vec::new();
        push_fixed6(&mut b, 1795293094.097751);
        assert_eq!(b, b"1795293094.097751");
        b.clear();
        push_fixed6(&mut b, 0.0000004);
        assert_eq!(b, b"0.000000");
        b.clear();
        push_fixed6(&mut b, -0.25);
        assert_eq!(b, b"-0.250000");
        for v in [0u64, 7, 10, 99, 100, 12345, u64::MAX] {
            b.clear();
            push_u64(&mut b, v);
            assert_eq!(b, v.to_string().as_bytes());
        }
        b.clear();
        push_fixed6(&mut b, 12.000305);
        assert_eq!(b, b"12.000305");
    }

    #[test]
    fn records_are_cut_at_reclen_and_masked() {
        let limits = Limits {
            reclen: 4,
            buffer: 1 << 20,
            mask: 1u128 << (Tag::Debug as u8),
        };
        // Without a log, nothing is kept.
        let mut t = Txn::new(None, 1, Side::Client, limits);
        t.bytes(Tag::ReqURL, b"/abcdef");
        assert!(t.buf.is_empty());
        assert!(!t.wants(Tag::Debug));
    }
}

#[cfg(test)]
mod push_tests {
    use super::*;

    #[test]
    fn a_word_record_is_the_record_of_its_bytes() {
        use lacquer_core::word::Word;
        let dir = std::env::temp_dir().join(format!("lacquer-word-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = crate::Log::create(&dir, 1 << 20).unwrap().leak();
        for reclen in [255, 16, 3, 0] {
            let limits = Limits {
                reclen,
                buffer: 1 << 20,
                mask: 1u128 << (Tag::Debug as u8),
            };
            let mut words = Txn::new(Some(log), 70_000, Side::Backend, limits);
            let mut bytes = Txn::new(Some(log), 70_000, Side::Backend, limits);
            for text in ["", "RECV", "BACKEND_RESPONSE"] {
                words.word(Tag::VCL_call, &Word::new(text));
                bytes.bytes(Tag::VCL_call, text.as_bytes());
                // Masked: nothing.
                words.word(Tag::Debug, &Word::new(text));
            }
            assert_eq!(words.buf, bytes.buf, "reclen {reclen}");
            assert_eq!(words.records, 3);
        }
    }

    #[test]
    fn a_transactions_buffer_serves_the_next_one_on_its_thread() {
        let mut buf = Vec::with_capacity(4096);
        buf.extend_from_slice(b"records");
        let at = buf.as_ptr();
        give_back(buf);
        let again = spare_buffer(2048);
        assert_eq!(again.as_ptr(), at, "the same allocation");
        assert!(again.is_empty() && again.capacity() >= 4096);
        // Small and huge ones are not kept; nor more than a few.
        let kept = || SPARE.with(|s| s.borrow().len());
        give_back(Vec::with_capacity(16));
        give_back(Vec::with_capacity(SPARE_MAX + 1));
        assert_eq!(kept(), 0);
        for _ in 0..SPARE_BUFFERS + 4 {
            give_back(Vec::with_capacity(2048));
        }
        assert_eq!(kept(), SPARE_BUFFERS);
    }

    #[test]
    fn a_released_session_writes_its_last_records_without_growing() {
        let dir = std::env::temp_dir().join(format!("lacquer-release-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = crate::Log::create(&dir, 1 << 20).unwrap().leak();
        let limits = Limits {
            reclen: 255,
            buffer: 1 << 20,
            mask: 0,
        };
        let mut sess = Txn::new(Some(log), 5, Side::Client, limits);
        sess.begin(
            &crate::record::txn::SESS,
            0,
            &crate::record::txn::HTTP1,
            1.0,
        );
        sess.bytes(Tag::SessOpen, b"127.0.0.1 40000 a0 127.0.0.1 8080 1.0 12");
        sess.release();
        assert!(sess.buf.is_empty());
        let (room, at) = (sess.buf.capacity(), sess.buf.as_ptr());
        assert!(
            (128..1024).contains(&room),
            "small, not a request's: {room}"
        );
        for child in 6..9 {
            sess.link(&crate::record::txn::REQ, child, &crate::record::txn::RXREQ);
        }
        sess.bytes(Tag::SessClose, b"REM_CLOSE 0.001");
        assert_eq!(sess.buf.as_ptr(), at, "written where it was made room");
        sess.end();
        drop(sess);
        // The thread keeps the room for its next session.
        let mut next = Txn::new(Some(log), 10, Side::Client, limits);
        next.begin(
            &crate::record::txn::SESS,
            0,
            &crate::record::txn::HTTP1,
            2.0,
        );
        next.release();
        assert_eq!(next.buf.as_ptr(), at, "the room of the session before");
        drop(next);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn push_fixed_writes_as_format_does() {
        for v in [
            0.0,
            0.0004,
            0.0005,
            0.001,
            0.25,
            1.5,
            9.999,
            9.9996,
            12.345,
            86_400.0,
            -2.5,
            1_764_100_000.123_456,
        ] {
            let mut out = Vec::new();
            push_fixed3(&mut out, v);
            let nudge = if v < 0.0 { -1e-12 } else { 1e-12 };
            assert_eq!(
                String::from_utf8(out).unwrap(),
                format!("{:.3}", v + nudge),
                "{v}"
            );
            let mut out = Vec::new();
            push_fixed6(&mut out, v);
            assert_eq!(String::from_utf8(out).unwrap(), format!("{:.6}", v), "{v}");
        }
        let mut out = Vec::new();
        push_fixed6(&mut out, f64::NAN);
        push_fixed3(&mut out, f64::INFINITY);
        assert_eq!(out, b"0.0000000.000");
    }

    #[test]
    fn push_ip_writes_as_display_does() {
        for ip in [
            "0.0.0.0",
            "127.0.0.1",
            "10.200.3.45",
            "255.255.255.255",
            "::1",
            "::ffff:192.0.2.7",
            "2001:db8::42",
        ] {
            let ip: std::net::IpAddr = ip.parse().unwrap();
            let mut out = Vec::new();
            push_ip(&mut out, ip);
            assert_eq!(out, ip.to_canonical().to_string().as_bytes());
        }
    }

    #[test]
    fn push_u64_writes_every_number_as_format_does() {
        let mut samples = vec![
            0,
            1,
            9,
            10,
            11,
            99,
            100,
            101,
            999,
            1000,
            65_535,
            u64::MAX,
            u64::MAX - 1,
        ];
        let mut p = 1u64;
        while let Some(q) = p.checked_mul(10) {
            samples.extend([p - 1, p, p + 1]);
            p = q;
        }
        for v in samples {
            let mut out = b"x".to_vec();
            push_u64(&mut out, v);
            assert_eq!(out, format!("x{v}").into_bytes());
        }
    }
}
