//! The content coding each client gets, and the br and zstd renditions of
//! cached objects. A client's coding is chosen once, where Varnish washes
//! `Accept-Encoding` for the lookup (after `vcl_recv`, from the field as
//! VCL left it), by `http_encodings`. A hit for a client that gets br or
//! zstd is served the object's rendition in that coding when there is
//! one; when there is none yet, the first such request has one made off
//! the request path (by a blocking job, at most `compress_jobs` at once)
//! and is itself served as Varnish would serve it (gzip, or as stored);
//! later hits get the rendition, which costs what any hit costs. An
//! object the origin sent br or zstd goes as stored to clients that take
//! that coding and is decoded for the others.

use crate::host::req::{Outcome, Req};
use crate::transport::deadline::SendClock;
use crate::transport::io::Client;
use crate::Shared;
use bytes::Bytes;
use lacquer_cache::object::{ObjKind, Object};
use lacquer_cache::rendition::{Claim, Rendition};
use lacquer_cache::Whole;
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::params::Params;
use lacquer_filters::coding::{self, Accepts, Coding, Decoder, Encoder};
use lacquer_filters::gzip::{Gunzip, INFLATE_SLICE};
use lacquer_filters::splice::Scanned;
use lacquer_shm::Tag;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The bit [`accepted`] gives a coding.
pub(crate) fn bit(c: Coding) -> u8 {
    match c {
        Coding::Identity => 0,
        Coding::Gzip => 1,
        Coding::Br => 2,
        Coding::Zstd => 4,
    }
}

/// In [`Req::accepted`]: the coding was chosen (once a request).
const CHOSEN: u8 = 0x80;

/// The codings an `Accept-Encoding` field accepts, as bits ([`bit`]).
pub(crate) fn accepted(a: &Accepts) -> u8 {
    [Coding::Gzip, Coding::Br, Coding::Zstd]
        .iter()
        .filter(|&&c| a.takes(c))
        .fold(0, |bits, &c| bits | bit(c))
}

/// `http_encodings`, most preferred first: the codings and how many
/// (on the stack: this runs for every request that looks up).
pub(crate) fn order(p: &Params) -> ([Coding; 3], usize) {
    let packed = p.encoding_order();
    let mut out = [Coding::Identity; 3];
    let mut n = 0;
    for i in 0..3 {
        let c = match (packed >> (4 * i)) & 15 {
            1 => Coding::Gzip,
            2 => Coding::Br,
            3 => Coding::Zstd,
            _ => break,
        };
        out[n] = c;
        n += 1;
    }
    (out, n)
}

/// Chooses the request's coding from its `Accept-Encoding` (before it is
/// washed to gzip): once a request, so a restart keeps the client's
/// choice rather than the washed field's.
pub(crate) fn choose(p: &Params, req: &mut Req) {
    if req.accepted & CHOSEN != 0 {
        return;
    }
    let a = Accepts::parse(req.head.headers.get("accept-encoding").map(|f| &f[..]));
    let (order, n) = order(p);
    req.coding = a.best(&order[..n]);
    req.accepted = accepted(&a) | CHOSEN;
}

/// Whether the client takes `c` (as its `Accept-Encoding` said when its
/// coding was chosen). A request whose coding was not chosen (a pass:
/// its own field went to the backend) takes what the backend sent.
pub(crate) fn takes(req: &Req, c: Coding) -> bool {
    req.accepted & CHOSEN == 0 || req.accepted & bit(c) != 0
}

/// The rendition slot of a coding.
pub(crate) fn slot(c: Coding) -> usize {
    match c {
        Coding::Zstd => 1,
        _ => 0,
    }
}

/// The coding a stored body has, read from its head when it is not
/// gzip or identity (None: a coding Lacquer does not know, or several).
pub(crate) fn stored(obj: &Object) -> Option<Coding> {
    if obj.gzipped() {
        Some(Coding::Gzip)
    } else if obj.other_coding() {
        Coding::of_content_encoding(obj.header("content-encoding").as_deref())
    } else {
        Some(Coding::Identity)
    }
}

/// The coding a rendition would be made in for this request and object:
/// the client's, when it is br or zstd and the object may have one.
#[inline]
pub(crate) fn wanted(p: &Params, req: &Req, obj: &Object, status: u16) -> Option<Coding> {
    let c = req.coding;
    let may = c.is_rendition()
        && status == 200
        && p.http_gzip_support()
        && !obj.no_rendition()
        && !obj.other_coding()
        && !obj.esi_expected()
        && obj.kind() == ObjKind::Normal;
    may.then_some(c)
}

/// Renditions being made now.
static JOBS: AtomicU64 = AtomicU64::new(0);

/// Has the rendition in `c` made of `obj` unless it is there, being made,
/// or not to be made: the first to ask of a complete body that suits
/// starts a job.
pub(crate) fn ask(sh: &Arc<Shared>, obj: &Arc<Object>, c: Coding) {
    let p = &sh.params;
    if !obj.body().is_complete() {
        return;
    }
    let s = slot(c);
    if obj.claim_rendition(s) != Claim::Yours {
        return;
    }
    // Judged once: an object that does not suit is marked for good.
    if !suits(p, obj) {
        obj.set_no_rendition();
        obj.give_up_rendition(s, true);
        return;
    }
    if JOBS.fetch_add(1, Ordering::AcqRel) >= p.compress_jobs() {
        JOBS.fetch_sub(1, Ordering::AcqRel);
        obj.give_up_rendition(s, false);
        return;
    }
    let job = Job {
        sh: sh.clone(),
        obj: obj.clone(),
        coding: c,
        done: false,
    };
    tokio::task::spawn_blocking(move || job.run());
}

/// One rendition being made; dropped unfinished (a panic), it gives the
/// slot back.
struct Job {
    sh: Arc<Shared>,
    obj: Arc<Object>,
    coding: Coding,
    done: bool,
}

impl Job {
    fn run(mut self) {
        let p = &self.sh.params;
        let s = slot(self.coding);
        match make(p, &self.obj, self.coding) {
            Ok(r) => {
                COUNTERS.inc(match self.coding {
                    Coding::Zstd => Counter::n_zstd,
                    _ => Counter::n_brotli,
                });
                if !self
                    .sh
                    .cache
                    .keep_rendition(&self.obj, s, r, p.nuke_limit())
                {
                    COUNTERS.inc(Counter::n_compress_fail);
                }
            }
            Err(Unmade::Unsuited) => {
                self.obj.set_no_rendition();
                self.obj.give_up_rendition(s, true);
            }
            Err(Unmade::Failed) => {
                COUNTERS.inc(Counter::n_compress_fail);
                self.obj.give_up_rendition(s, true);
            }
        }
        self.done = true;
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        JOBS.fetch_sub(1, Ordering::AcqRel);
        if !self.done {
            self.obj.give_up_rendition(slot(self.coding), false);
        }
    }
}

/// Why no rendition was made.
#[derive(Debug, PartialEq, Eq)]
enum Unmade {
    /// The body is not worth it (too large once inflated, or it did not
    /// come out smaller than the stored body).
    Unsuited,
    /// The stored body would not inflate, or the encoder failed.
    Failed,
}

/// Whether an object may have renditions: a complete 200 whose type is
/// in `compress_types`, whose size is within `compress_min_size` and
/// `compress_max_size`, that does not say `no-transform`.
fn suits(p: &Params, obj: &Object) -> bool {
    let Some(len) = obj.body().known_len() else {
        return false;
    };
    let plain = if obj.gzipped() {
        obj.gzip::<Scanned>().map_or(len, |g| g.len)
    } else {
        len
    };
    if plain < p.compress_min_size() || len > p.compress_max_size() {
        return false;
    }
    if obj
        .header("cache-control")
        .is_some_and(|cc| has_token(&cc, b"no-transform"))
    {
        return false;
    }
    let Some(ct) = obj.header("content-type") else {
        return false;
    };
    let media = ct.split(|&b| b == b';').next().unwrap_or_default();
    let Ok(media) = std::str::from_utf8(media.trim_ascii()) else {
        return false;
    };
    let media = media.to_ascii_lowercase();
    p.compress_types()
        .split_ascii_whitespace()
        .any(|pattern| lacquer_core::glob::matches(&pattern.to_ascii_lowercase(), &media))
}

fn has_token(list: &[u8], token: &[u8]) -> bool {
    list.split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// Makes the rendition of a complete body in `c`.
fn make(p: &Params, obj: &Object, c: Coding) -> Result<Rendition, Unmade> {
    let whole = obj.body().whole().ok_or(Unmade::Failed)?;
    let max = p.compress_max_size();
    let level = match c {
        Coding::Zstd => p.zstd_level() as i32,
        _ => p.brotli_level() as i32,
    };
    let gz = obj.gzip::<Scanned>();
    let size = if obj.gzipped() {
        gz.map(|g| g.len)
    } else {
        Some(whole.len())
    };
    if size.is_some_and(|n| n > max) {
        return Err(Unmade::Unsuited);
    }
    let mut enc = Encoder::new(c, level, size).map_err(|_| Unmade::Failed)?;
    let mut out = Vec::new();
    let mut plain_len = 0u64;
    let chunks = match whole {
        Whole::Small(s) => vec![Bytes::copy_from_slice(s)],
        Whole::Chunks(c) => c.to_vec(),
    };
    if obj.gzipped() {
        let mut z = Gunzip::new();
        for piece in &chunks {
            let mut slices = z.slices(piece, INFLATE_SLICE);
            while let Some(slice) = slices.next().map_err(|_| Unmade::Failed)? {
                plain_len += slice.len() as u64;
                if plain_len > max {
                    return Err(Unmade::Unsuited);
                }
                out.extend_from_slice(&enc.push(&slice).map_err(|_| Unmade::Failed)?);
            }
        }
        let (tail, _) = z.finish().map_err(|_| Unmade::Failed)?;
        plain_len += tail.len() as u64;
        out.extend_from_slice(&enc.push(&tail).map_err(|_| Unmade::Failed)?);
    } else {
        for piece in &chunks {
            plain_len += piece.len() as u64;
            out.extend_from_slice(&enc.push(piece).map_err(|_| Unmade::Failed)?);
        }
    }
    out.extend_from_slice(&enc.finish().map_err(|_| Unmade::Failed)?);
    // Worth keeping only if smaller than what the client would get
    // otherwise (the stored body: gzip'd, or plain).
    if out.len() as u64 >= plain_len.min(whole.len()) {
        return Err(Unmade::Unsuited);
    }
    let mut head = Vec::with_capacity(256);
    obj.write_head(&mut head);
    recode_head(&mut head, c);
    // Kept for the object's life and charged by their length: no spare
    // room beyond it.
    head.shrink_to_fit();
    out.shrink_to_fit();
    Ok(Rendition {
        head: Bytes::from(head),
        body: Bytes::from(out),
    })
}

/// Makes a stored head the head of the same body in coding `c`: its
/// `Content-Encoding` replaced (removed for identity), its `ETag` weak,
/// and `Accept-Encoding` in its `Vary`.
pub(crate) fn recode_head(head: &mut Vec<u8>, c: Coding) {
    crate::client::deliver::remove_header_line(head, b"content-encoding");
    crate::client::deliver::weaken_etag_line(head);
    if c != Coding::Identity {
        head.extend_from_slice(b"Content-Encoding: ");
        head.extend_from_slice(c.token().as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    vary_accept_encoding_line(head);
}

/// Adds `Accept-Encoding` to a serialised head's `Vary` (a line of its
/// own when there is none, or none that names it).
fn vary_accept_encoding_line(head: &mut Vec<u8>) {
    const NAME: &[u8] = b"vary:";
    let named = head.split(|&b| b == b'\n').any(|line| {
        line.len() > NAME.len()
            && line[..NAME.len()].eq_ignore_ascii_case(NAME)
            && (has_token(&line[NAME.len()..], b"accept-encoding")
                || has_token(&line[NAME.len()..], b"*"))
    });
    if !named {
        head.extend_from_slice(b"Vary: Accept-Encoding\r\n");
    }
}

/// A compressor for a body compressed as it goes out (an ESI page, or
/// as VCL asked), at the coding's level.
pub(crate) fn live_encoder(p: &Params, c: Coding) -> Option<Box<Encoder>> {
    let (level, counter) = match c {
        Coding::Zstd => (p.zstd_level() as i32, Counter::n_zstd),
        _ => (p.brotli_level() as i32, Counter::n_brotli),
    };
    let enc = Encoder::new(c, level, None).ok()?;
    COUNTERS.inc(counter);
    Some(Box::new(enc))
}

/// Streams a body stored br or zstd decoded, a bounded slice at a time
/// however far it expands.
pub(crate) async fn stream_decoded(
    c: &mut Client,
    req: &mut Req,
    obj: &Object,
    coding: Coding,
    clock: &SendClock,
) -> Result<(), Outcome> {
    let bad = |req: &mut Req, e: coding::CodingError| {
        req.log.fmt(Tag::FetchError, format_args!("{e}"));
        Outcome::Close(CloseReason::TxError)
    };
    let mut d = Decoder::new(coding).map_err(|e| bad(req, e))?;
    let mut next = 0;
    let mut pieces: Vec<Bytes> = Vec::new();
    loop {
        pieces.clear();
        let end = obj
            .body()
            .wait_chunks(next, &mut pieces)
            .await
            .map_err(|_| Outcome::Close(CloseReason::TxError))?;
        next += pieces.len();
        for piece in &pieces {
            let mut rest = &piece[..];
            loop {
                let (used, out, more) =
                    d.push_some(rest, INFLATE_SLICE).map_err(|e| bad(req, e))?;
                rest = &rest[used..];
                if !out.is_empty() {
                    let n = c.send_body(&[out], clock).await.map_err(Outcome::from)?;
                    req.acct.count_sent(c, n);
                }
                if !more && (rest.is_empty() || used == 0) {
                    break;
                }
            }
            if !rest.is_empty() {
                return Err(bad(
                    req,
                    coding::CodingError("data after the end of the stream".into()),
                ));
            }
        }
        if end {
            d.finish().map_err(|e| bad(req, e))?;
            COUNTERS.inc(match coding {
                Coding::Zstd => Counter::n_unzstd,
                _ => Counter::n_unbrotli,
            });
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_codings_and_heads() {
        let of = |f: Option<&[u8]>| accepted(&Accepts::parse(f));
        assert_eq!(of(Some(b"gzip, br")), bit(Coding::Gzip) | bit(Coding::Br));
        assert_eq!(of(Some(b"zstd;q=0, *")), 3);
        assert_eq!(of(None), 0);
        let mut head =
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nETag: \"a\"\r\nVary: Cookie\r\n"
                .to_vec();
        recode_head(&mut head, Coding::Br);
        assert_eq!(
            head,
            b"HTTP/1.1 200 OK\r\nETag: W/\"a\"\r\nVary: Cookie\r\nContent-Encoding: br\r\nVary: Accept-Encoding\r\n"
        );
        let mut head = b"HTTP/1.1 200 OK\r\nvary: accept-encoding\r\n".to_vec();
        recode_head(&mut head, Coding::Zstd);
        assert_eq!(
            head,
            b"HTTP/1.1 200 OK\r\nvary: accept-encoding\r\nContent-Encoding: zstd\r\n"
        );
    }

    #[test]
    fn the_order_reads_back() {
        let p = Params::default();
        let of = |p: &Params| {
            let (o, n) = order(p);
            o[..n].to_vec()
        };
        assert_eq!(of(&p), vec![Coding::Zstd, Coding::Br, Coding::Gzip]);
        p.set("http_encodings", "gzip").unwrap();
        assert_eq!(of(&p), vec![Coding::Gzip]);
        p.set("http_encodings", "br, gzip").unwrap();
        assert_eq!(of(&p), vec![Coding::Br, Coding::Gzip]);
        p.set("http_encodings", "").unwrap();
        assert_eq!(of(&p), vec![]);
        assert!(p.set("http_encodings", "br, deflate").is_err());
        assert!(p.set("http_encodings", "br,br").is_err());
    }
}
