//! The br and zstd renditions of cached objects, and bodies compressed or
//! decoded as they go out. (The client's coding is chosen in
//! `host::coding`.) A hit for a client that gets br or
//! zstd is served the object's rendition in that coding when there is
//! one; when there is none yet, the first such request has one made off
//! the request path (by a blocking job, at most `compress_jobs` at once)
//! and is itself served as Varnish would serve it (gzip, or as stored);
//! later hits get the rendition, which costs what any hit costs. An
//! object the origin sent br or zstd goes as stored to clients that take
//! that coding and is decoded for the others.

use crate::host::coding::{recode_head, slot};
use crate::host::head_edits::has_token;
use crate::host::req::{Outcome, Req};
use crate::transport::deadline::SendClock;
use crate::transport::io::Client;
use crate::Shared;
use bytes::Bytes;
use lacquer_cache::object::Object;
use lacquer_cache::rendition::{Claim, Rendition};
use lacquer_cache::Whole;
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::params::Params;
use lacquer_filters::coding::{self, Coding, Decoder, Encoder};
use lacquer_filters::gzip::{Gunzip, INFLATE_SLICE};
use lacquer_filters::splice::Scanned;
use lacquer_shm::Tag;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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
    // A slot busy or declined is passed by without judging the object
    // again; one that does not suit is marked for good, before any slot
    // is made for it (an image a br client asks for gets none).
    if !obj.rendition_idle(s) {
        return;
    }
    if !suits(p, obj) {
        obj.set_no_rendition();
        return;
    }
    if obj.claim_rendition(s) != Claim::Yours {
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
