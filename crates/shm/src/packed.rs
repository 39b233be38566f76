//! Records the daemon writes in a compact form that readers expand: a
//! whole HTTP head as one record (its bytes as sent or received), and a
//! `Timestamp` with its three times as binary numbers. Splitting a head
//! into `ReqMethod`/`ReqURL`/…/`ReqHeader` lines and printing times as
//! text is then done by the reader, on its own core, instead of by the
//! worker serving the request; what a reader hands out is the same
//! records, in the same order, with the same payloads.
//!
//! A packed record has the ordinary 8-byte header with a pseudo tag code
//! the tag table never uses. Its payload:
//! - head ([`HEAD_CODE`]): the head's kind, `vsl_reclen` (u16), which of
//!   its four tags are masked (a bit each), then the head's bytes;
//! - timestamp ([`TIME_CODE`]): `vsl_reclen` (u16), the absolute time,
//!   the time since the transaction's start and since its last timestamp
//!   (f64 each), then the label;
//! - a vxid and seconds ([`SECS_CODE`], `Hit` and its kin): the tag's
//!   code, `vsl_reclen` (u16), the vxid (u64), then the seconds (f64
//!   each), which the reader prints with six decimals;
//! - numbers ([`NUMS_CODE`], `ReqAcct` and its kin): the tag's code,
//!   `vsl_reclen` (u16), then the numbers (u64 each), which the reader
//!   prints in decimal, separated by spaces.

use crate::record::{push_fixed6, push_u64, Record, Side, Txn};
use crate::tags::Tag;
use bytes::Bytes;
use lacquer_core::word::Word;

/// The labels of `Timestamp` records, as Varnish names them.
pub mod stamp {
    use lacquer_core::word::Word;
    pub const START: Word = Word::new("Start");
    pub const REQ: Word = Word::new("Req");
    pub const PROCESS: Word = Word::new("Process");
    pub const RESP: Word = Word::new("Resp");
    pub const FETCH: Word = Word::new("Fetch");
    pub const REQ_BODY: Word = Word::new("ReqBody");
    pub const CONNECTED: Word = Word::new("Connected");
    pub const BEREQ: Word = Word::new("Bereq");
    pub const RESTART: Word = Word::new("Restart");
    pub const RETRY: Word = Word::new("Retry");
    pub const BERESP: Word = Word::new("Beresp");
    pub const BERESP_BODY: Word = Word::new("BerespBody");
    pub const ERROR: Word = Word::new("Error");
    pub const PIPE: Word = Word::new("Pipe");
    pub const PIPE_SESS: Word = Word::new("PipeSess");
}

/// The pseudo tag code of a packed head.
pub(crate) const HEAD_CODE: u8 = 0xfe;
/// The pseudo tag code of a packed timestamp.
pub(crate) const TIME_CODE: u8 = 0xfd;
/// The pseudo tag code of a packed vxid and seconds.
pub(crate) const SECS_CODE: u8 = 0xfc;
/// The pseudo tag code of packed numbers.
pub(crate) const NUMS_CODE: u8 = 0xfb;

/// Which head: what its first line holds and which tags its lines are
/// logged under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum HeadKind {
    /// A client request as received.
    Req = 0,
    /// A response as written to the client.
    Resp = 1,
    /// A backend request as sent.
    Bereq = 2,
    /// A backend response as received.
    Beresp = 3,
}

impl HeadKind {
    fn from_code(code: u8) -> Option<HeadKind> {
        [
            HeadKind::Req,
            HeadKind::Resp,
            HeadKind::Bereq,
            HeadKind::Beresp,
        ]
        .into_iter()
        .find(|k| *k as u8 == code)
    }

    /// The tags of the first line's three parts, then of a header line.
    pub fn tags(self) -> [Tag; 4] {
        match self {
            HeadKind::Req => [
                Tag::ReqMethod,
                Tag::ReqURL,
                Tag::ReqProtocol,
                Tag::ReqHeader,
            ],
            HeadKind::Resp => [
                Tag::RespProtocol,
                Tag::RespStatus,
                Tag::RespReason,
                Tag::RespHeader,
            ],
            HeadKind::Bereq => [
                Tag::BereqMethod,
                Tag::BereqURL,
                Tag::BereqProtocol,
                Tag::BereqHeader,
            ],
            HeadKind::Beresp => [
                Tag::BerespProtocol,
                Tag::BerespStatus,
                Tag::BerespReason,
                Tag::BerespHeader,
            ],
        }
    }
}

/// Calls `each` with the tag and text of every record a head stands
/// for: the first line's three parts, then each header line, up to the
/// empty line that ends the head.
pub fn split_head(kind: HeadKind, head: &[u8], mut each: impl FnMut(Tag, std::ops::Range<usize>)) {
    let tags = kind.tags();
    let mut at = 0;
    let mut first = true;
    while at < head.len() {
        let nl = head[at..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(head.len(), |p| at + p);
        let end = if nl > at && head[nl - 1] == b'\r' {
            nl - 1
        } else {
            nl
        };
        if first {
            first = false;
            let line = &head[at..end];
            let sp1 = line.iter().position(|&b| b == b' ').unwrap_or(line.len());
            let rest = (sp1 + 1).min(line.len());
            let sp2 = line[rest..]
                .iter()
                .position(|&b| b == b' ')
                .map_or(line.len(), |p| rest + p);
            let third = (sp2 + 1).min(line.len());
            each(tags[0], at..at + sp1);
            each(tags[1], at + rest..at + sp2);
            each(tags[2], at + third..end);
        } else if end == at {
            return;
        } else {
            each(tags[3], at..end);
        }
        at = nl + 1;
    }
}

impl Txn {
    /// Logs an HTTP/1 head — a request or status line, then header lines
    /// — exactly as it went over the wire, as one packed record.
    pub fn head(&mut self, kind: HeadKind, head: &[u8]) {
        if !self.active() {
            return;
        }
        let tags = kind.tags();
        let mut masked = 0u8;
        for (i, tag) in tags.iter().enumerate() {
            if !self.wants(*tag) {
                masked |= 1 << i;
            }
        }
        if masked == 0b1111 {
            return;
        }
        let len = 4 + head.len();
        if len > u16::MAX as usize {
            // Too long for one record: each line as a record of its own.
            split_head(kind, head, |tag, r| self.bytes(tag, &head[r]));
            return;
        }
        let reclen = self.limits().reclen.min(u16::MAX as usize) as u16;
        self.raw(HEAD_CODE, len, |b| {
            b.push(kind as u8);
            b.extend_from_slice(&reclen.to_le_bytes());
            b.push(masked);
            b.extend_from_slice(head);
        });
    }

    /// Writes a `Timestamp` record: the label, the absolute time, the
    /// time since the transaction began and since the last timestamp.
    pub fn timestamp(&mut self, label: &Word, now: f64) {
        use crate::record::HEADER;
        use lacquer_core::word::WORD_MAX;
        if !self.wants(Tag::Timestamp) {
            return;
        }
        let (start, last) = self.times();
        self.set_last(now);
        let reclen = self.limits().reclen.min(u16::MAX as usize) as u16;
        let mut r = [0u8; HEADER + 26 + WORD_MAX];
        r[HEADER..HEADER + 2].copy_from_slice(&reclen.to_le_bytes());
        r[HEADER + 2..HEADER + 10].copy_from_slice(&now.to_le_bytes());
        r[HEADER + 10..HEADER + 18].copy_from_slice(&(now - start).to_le_bytes());
        r[HEADER + 18..HEADER + 26].copy_from_slice(&(now - last).to_le_bytes());
        r[HEADER + 26..].copy_from_slice(label.padded());
        self.fixed(TIME_CODE, r, 26 + label.as_str().len());
    }
}

impl Txn {
    /// A record of a vxid then seconds with six decimals (`Hit 1002
    /// 119.998573 10.000000 0.000000`), packed: the reader prints the
    /// numbers. At most 8 seconds.
    pub fn vxid_and_secs(&mut self, tag: Tag, vxid: u64, secs: &[f64]) {
        let mut words = [[0u8; 8]; 9];
        words[0] = vxid.to_le_bytes();
        let secs = &secs[..secs.len().min(8)];
        for (w, s) in words[1..].iter_mut().zip(secs) {
            *w = s.to_le_bytes();
        }
        self.words(SECS_CODE, tag, &words[..1 + secs.len()]);
    }

    /// A record of numbers separated by spaces (`ReqAcct 81 0 81 297
    /// 1024 1321`), packed: the reader prints them. At most 8 numbers.
    pub fn numbers(&mut self, tag: Tag, values: &[u64]) {
        let mut words = [[0u8; 8]; 8];
        let values = &values[..values.len().min(8)];
        for (w, v) in words.iter_mut().zip(values) {
            *w = v.to_le_bytes();
        }
        self.words(NUMS_CODE, tag, &words[..values.len()]);
    }

    /// A packed record of 8-byte words under `tag` (see the codes).
    fn words(&mut self, code: u8, tag: Tag, words: &[[u8; 8]]) {
        use crate::record::HEADER;
        if !self.wants(tag) {
            return;
        }
        let words = &words[..words.len().min(9)];
        let reclen = self.limits().reclen.min(u16::MAX as usize) as u16;
        let mut r = [0u8; HEADER + 3 + 8 * 9];
        r[HEADER] = tag as u8;
        r[HEADER + 1..HEADER + 3].copy_from_slice(&reclen.to_le_bytes());
        for (i, w) in words.iter().enumerate() {
            let at = HEADER + 3 + 8 * i;
            r[at..at + 8].copy_from_slice(w);
        }
        self.fixed(code, r, 3 + 8 * words.len());
    }
}

/// The record a packed record of words stands for: its tag, and its
/// words printed by `print` (given each word's place), separated by
/// spaces and cut at its `vsl_reclen`. None when it is not a well-formed
/// one.
fn expand_words(p: &[u8], print: impl Fn(&mut Vec<u8>, usize, [u8; 8])) -> Option<(Tag, Bytes)> {
    if p.len() < 3 || !(p.len() - 3).is_multiple_of(8) {
        return None;
    }
    let tag = Tag::from_code(p[0])?;
    let reclen = u16::from_le_bytes([p[1], p[2]]) as usize;
    let mut text = Vec::with_capacity((p.len() - 3) * 3);
    for (i, word) in p[3..].chunks_exact(8).enumerate() {
        if i > 0 {
            text.push(b' ');
        }
        print(&mut text, i, word.try_into().unwrap_or_default());
    }
    text.truncate(reclen);
    Some((tag, Bytes::from(text)))
}

fn f64_at(p: &[u8], at: usize) -> f64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&p[at..at + 8]);
    f64::from_le_bytes(w)
}

/// Expands a packed record's payload (a slice of `chunk`) into the
/// records it stands for. False when it is not a well-formed one.
pub(crate) fn expand(
    code: u8,
    vxid: u64,
    side: Side,
    chunk: &Bytes,
    payload: std::ops::Range<usize>,
    out: &mut Vec<Record>,
) -> bool {
    let p = &chunk[payload.clone()];
    match code {
        HEAD_CODE => {
            if p.len() < 4 {
                return false;
            }
            let Some(kind) = HeadKind::from_code(p[0]) else {
                return false;
            };
            let reclen = u16::from_le_bytes([p[1], p[2]]) as usize;
            let masked = p[3];
            let base = payload.start + 4;
            let tags = kind.tags();
            split_head(kind, &p[4..], |tag, r| {
                let i = tags.iter().position(|t| *t == tag).unwrap_or(3);
                if masked & (1 << i) != 0 {
                    return;
                }
                let end = r.end.min(r.start + reclen);
                out.push(Record {
                    vxid,
                    tag,
                    side,
                    payload: chunk.slice(base + r.start..base + end),
                });
            });
            true
        }
        TIME_CODE => {
            if p.len() < 26 {
                return false;
            }
            let reclen = u16::from_le_bytes([p[0], p[1]]) as usize;
            let mut text = Vec::with_capacity(p.len() + 40);
            text.extend_from_slice(&p[26..]);
            text.extend_from_slice(b": ");
            push_fixed6(&mut text, f64_at(p, 2));
            text.push(b' ');
            push_fixed6(&mut text, f64_at(p, 10));
            text.push(b' ');
            push_fixed6(&mut text, f64_at(p, 18));
            text.truncate(reclen);
            out.push(Record {
                vxid,
                tag: Tag::Timestamp,
                side,
                payload: Bytes::from(text),
            });
            true
        }
        SECS_CODE | NUMS_CODE => {
            // Seconds come after a vxid, which there must be.
            if code == SECS_CODE && p.len() < 11 {
                return false;
            }
            let print = |text: &mut Vec<u8>, i: usize, word: [u8; 8]| match code {
                SECS_CODE if i > 0 => push_fixed6(text, f64::from_le_bytes(word)),
                _ => push_u64(text, u64::from_le_bytes(word)),
            };
            let Some((tag, payload)) = expand_words(p, print) else {
                return false;
            };
            out.push(Record {
                vxid,
                tag,
                side,
                payload,
            });
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{decode_into, Limits};
    use crate::ring::Log;

    fn lines(kind: HeadKind, head: &str) -> Vec<String> {
        let mut out = Vec::new();
        split_head(kind, head.as_bytes(), |tag, r| {
            out.push(format!("{} {}", tag.name(), &head[r]))
        });
        out
    }

    #[test]
    fn heads_split_as_varnishlog_shows_them() {
        assert_eq!(
            lines(
                HeadKind::Resp,
                "HTTP/1.1 404 Not Found\r\nServer: x\r\nA:  b\r\n\r\nbody"
            ),
            [
                "RespProtocol HTTP/1.1",
                "RespStatus 404",
                "RespReason Not Found",
                "RespHeader Server: x",
                "RespHeader A:  b"
            ]
        );
        assert_eq!(
            lines(HeadKind::Req, "GET /a HTTP/1.0\nHost: h\n\n"),
            [
                "ReqMethod GET",
                "ReqURL /a",
                "ReqProtocol HTTP/1.0",
                "ReqHeader Host: h"
            ]
        );
        // A first line cut short leaves the missing parts empty.
        assert_eq!(
            lines(HeadKind::Beresp, "HTTP/1.1 200\r\n\r\n"),
            [
                "BerespProtocol HTTP/1.1",
                "BerespStatus 200",
                "BerespReason "
            ]
        );
    }

    /// Writes through a real log and reads the records back expanded.
    fn round_trip(limits: Limits, write: impl FnOnce(&mut Txn)) -> Vec<String> {
        // A directory of its own for each call: tests run at once, and
        // two logs made in one directory race for its file.
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("lacquer-packed-{}-{call}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = Log::create(&dir, 1 << 20).unwrap().leak();
        let mut txn = Txn::new(Some(log), 7, Side::Client, limits);
        txn.begin(
            &crate::record::txn::REQ,
            6,
            &crate::record::txn::RXREQ,
            100.0,
        );
        write(&mut txn);
        txn.end();
        let mut reader = crate::ring::Reader::open(&dir, true).unwrap();
        let mut recs = Vec::new();
        reader.poll(&mut recs).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        recs.iter()
            .map(|r| format!("{} {}", r.tag.name(), r.text()))
            .collect()
    }

    fn limits(reclen: usize, mask: u128) -> Limits {
        Limits {
            reclen,
            buffer: 16 << 10,
            mask,
        }
    }

    #[test]
    fn packed_records_reach_readers_expanded() {
        let mask = crate::record::default_mask();
        let got = round_trip(limits(255, mask), |t| {
            t.timestamp(&crate::packed::stamp::REQ, 100.25);
            t.head(HeadKind::Req, b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n");
            t.vxid_and_secs(Tag::Hit, 1002, &[119.9985734, 10.0, -0.5]);
            t.vxid_and_secs(Tag::HitMiss, 7, &[1.0]);
            t.timestamp(&crate::packed::stamp::RESP, 101.5);
        });
        assert_eq!(
            got,
            [
                "Begin req 6 rxreq",
                "Timestamp Req: 100.250000 0.250000 0.250000",
                "ReqMethod GET",
                "ReqURL /x",
                "ReqProtocol HTTP/1.1",
                "ReqHeader Host: a",
                "Hit 1002 119.998573 10.000000 -0.500000",
                "HitMiss 7 1.000000",
                "Timestamp Resp: 101.500000 1.500000 1.250000",
                "End "
            ]
        );
    }

    #[test]
    fn packed_numbers_read_as_text_keep_reclen_and_the_mask_and_refuse_garbage() {
        let got = round_trip(limits(255, 0), |t| {
            t.numbers(Tag::ReqAcct, &[81, 0, 81, 297, 1024, 1321]);
            t.numbers(Tag::Length, &[u64::MAX]);
            t.numbers(Tag::Length, &[]);
        });
        assert_eq!(
            got,
            [
                "Begin req 6 rxreq",
                "ReqAcct 81 0 81 297 1024 1321",
                "Length 18446744073709551615",
                "Length ",
                "End "
            ]
        );
        let mask = crate::record::mask_of(&[Tag::Length]);
        let got = round_trip(limits(9, mask), |t| {
            t.numbers(Tag::ReqAcct, &[81, 0, 81, 297, 1024, 1321]);
            t.numbers(Tag::Length, &[5]);
        });
        assert_eq!(got, ["Begin req 6 rxr", "ReqAcct 81 0 81 2", "End "]);
        let mut out = Vec::new();
        for bad in [
            &[Tag::Length as u8, 9, 0, 1][..],
            &[0, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8][..],
            &[Tag::Length as u8, 9][..],
        ] {
            let bad = Bytes::copy_from_slice(bad);
            assert!(!expand(
                NUMS_CODE,
                1,
                Side::Client,
                &bad,
                0..bad.len(),
                &mut out
            ));
        }
        assert!(out.is_empty());
    }

    #[test]
    fn packed_seconds_keep_reclen_and_the_mask_and_refuse_garbage() {
        let mask = crate::record::mask_of(&[Tag::HitMiss]);
        let got = round_trip(limits(12, mask), |t| {
            t.vxid_and_secs(Tag::Hit, 1002, &[119.5, 10.0, 0.0]);
            t.vxid_and_secs(Tag::HitMiss, 7, &[1.0]);
        });
        assert_eq!(got, ["Begin req 6 rxreq", "Hit 1002 119.500", "End "]);
        let mut out = Vec::new();
        let odd = Bytes::from_static(&[9, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert!(!expand(
            SECS_CODE,
            1,
            Side::Client,
            &odd,
            0..odd.len(),
            &mut out
        ));
        let no_tag = Bytes::from_static(&[0, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(!expand(
            SECS_CODE,
            1,
            Side::Client,
            &no_tag,
            0..no_tag.len(),
            &mut out
        ));
        assert!(out.is_empty());
    }

    #[test]
    fn packed_records_keep_reclen_and_the_mask() {
        let mask = crate::record::mask_of(&[Tag::ReqHeader]);
        let got = round_trip(limits(12, mask), |t| {
            t.timestamp(&crate::packed::stamp::START, 100.0);
            t.head(
                HeadKind::Req,
                b"GET /a-rather-long-url HTTP/1.1\r\nHost: a\r\n\r\n",
            );
        });
        assert_eq!(
            got,
            [
                "Begin req 6 rxreq",
                "Timestamp Start: 100.0",
                "ReqMethod GET",
                "ReqURL /a-rather-lo",
                "ReqProtocol HTTP/1.1",
                "End "
            ]
        );
        // Garbage after a packed header is refused, not expanded.
        let chunk =
            Bytes::from_static(&[8, 0, HEAD_CODE, b'c', 1, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0]);
        assert!(decode_into(&chunk, 0, &mut Vec::new()).is_err());
    }
}
