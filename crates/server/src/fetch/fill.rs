//! Filling an object from a backend response: the object built from the
//! head `vcl_backend_response` left, charged to its store before anyone
//! sees it, then its body read through the fetch filters into storage
//! while clients stream it. Cache fetches fill objects this way, and so
//! does a pass whose response VCL asked to filter (`do_esi`, `do_gzip`,
//! `do_gunzip`): its object is private to the one request, charged to
//! the transient store and gone when that request is done with it.

use crate::fetch::backend_steps::{log_body_end, log_fetch_error};
use crate::fetch::fetch_filters::{FetchFilters, Wanted};
use crate::host::backend_host::{Bereq, Beresp};
use crate::host::stored_head::{packed_stored_head, HeadLength};
use crate::Shared;
use lacquer_backend::{Conn, FetchError, Timeouts};
use lacquer_cache::body::SMALL_MAX;
use lacquer_cache::object::{ObjKind, Object, ObjectInit};
use lacquer_cache::store::Store;
use lacquer_cache::{Body, FillHandle, VarySpec, Whole};
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_http::{Framing, ResponseHead};
use lacquer_shm::{Tag, Txn};
use std::future::Future;
use std::sync::Arc;

/// Response headers not stored: the delivery writes its own.
const NOT_STORED: &[&str] = &["content-length", "age"];

/// The same for a response whose status gives `Content-Range` no
/// meaning (all but 206 and 416, RFC 9110 §14.4): delivery writes its
/// own when it answers a range from the stored body.
const NOT_STORED_WHOLE: &[&str] = &["content-length", "age", "content-range"];

/// An object made from a response head, its body still to come through
/// the cache's fill handle.
pub(crate) struct Filling<'c> {
    handle: FillHandle<'c>,
    filters: FetchFilters,
    framing: Framing,
    /// The body is small and on the heap: it copies what it keeps, so
    /// the pieces given to it may be views of the read buffer.
    small: bool,
}

impl Filling<'_> {
    /// The object being filled.
    pub fn obj(&self) -> &Arc<Object> {
        self.handle.obj()
    }
}

/// Builds the object for a response that `vcl_backend_response` let
/// through, with the filters VCL chose, and charges it to `store`. None
/// (logged and counted) when the store has no room for it.
pub(crate) fn begin<'c>(
    sh: &'c Shared,
    bereq: &mut Bereq,
    mut beresp: Beresp,
    resp: &ResponseHead,
    vary: Option<VarySpec>,
    store: Arc<Store>,
) -> Option<Filling<'c>> {
    let p = &sh.params;
    let framing = resp.framing;
    let stream = beresp.do_stream && !beresp.do_esi;
    let mut headers = std::mem::take(&mut beresp.headers);
    let want = Wanted {
        do_esi: beresp.do_esi,
        do_gzip: beresp.do_gzip,
        do_gunzip: beresp.do_gunzip,
        encode: beresp.encode,
        decode: beresp.decode,
    };
    let before = bereq.log.active().then(|| headers.clone());
    let filters = FetchFilters::choose(p, want, &mut headers, framing == Framing::None);
    if let Some(before) = before {
        log_filter_edits(bereq, &before, &headers, filters.recodes());
    }
    let expected = match framing {
        _ if filters.changes_length() => None,
        Framing::Length(n) => Some(n),
        Framing::None => Some(0),
        _ => None,
    };
    let body = Body::streaming(expected);
    // A response to a HEAD (VCL made the fetch one) keeps the length it
    // announced: a HEAD answered from it says the same.
    let head_length = bereq.method.eq_ignore_ascii_case(b"HEAD");
    // Otherwise the origin's length stays in its place when the body is
    // stored as it came (as varnishd keeps it): a delivery of the whole
    // body sends it as it is.
    // An ESI page keeps the origin's too (as varnishd does), though its
    // stored body is the parsed one: delivery reads it before it trusts it.
    let length = if head_length || (filters.is_esi() && !filters.recodes()) {
        StoredLength::AsAnnounced
    } else if filters.changes_length() {
        StoredLength::Dropped
    } else {
        StoredLength::OfBody
    };
    let small = matches!(expected, Some(n) if n <= SMALL_MAX && store.engine().keeps_on_heap(n));
    let parts = Parts {
        headers,
        framing,
        small,
        body,
        vary,
        length,
    };
    let obj = make_object(bereq.xid, &store, &beresp, resp, parts);
    if filters.is_esi() {
        obj.expect_esi();
    }
    // An announced length is reserved before anyone sees the object, so a
    // full store is a clean 503 rather than a truncated delivery.
    let reserved = expected.unwrap_or(0);
    log_storage(bereq, &store);
    log_fetch_body(bereq, framing, stream);
    let head = obj.head_charge() as u64;
    let Some(handle) = sh.cache.begin_fill(&obj, head, reserved, p.nuke_limit()) else {
        COUNTERS.inc(Counter::fetch_failed);
        log_fetch_error(&mut bereq.log, &FetchError::NoStorage);
        return None;
    };
    Some(Filling {
        handle,
        filters,
        framing,
        small,
    })
}

/// How long a fill held back by `transit_buffer` waits before it looks
/// again whether its reader is still there.
const READER_CHECK: std::time::Duration = std::time::Duration::from_millis(200);

/// Reads the body into the object, through its filters, charging the
/// store as it grows. A failure marks the body failed (its readers see
/// it end short) and removes the object. A `private` object (uncacheable:
/// only the requests holding it now can ever read it) is read no more
/// than `transit_buffer` ahead of its furthest reader, and abandoned,
/// its backend connection closed, once no reader holds it.
pub(crate) async fn fill(
    sh: &Shared,
    bereq: &mut Bereq,
    filling: Filling<'_>,
    mut conn: Conn<'_>,
    t: &Timeouts,
    private: bool,
) {
    let Filling {
        mut handle,
        mut filters,
        framing,
        small,
    } = filling;
    let p = &sh.params;
    if framing == Framing::None {
        COUNTERS.inc(match handle.obj().status() {
            204 => Counter::fetch_204,
            304 => Counter::fetch_304,
            100..=199 => Counter::fetch_1xx,
            _ => Counter::fetch_none,
        });
    }
    if private && !filters.is_esi() {
        // Its one reader reads it once: what it has sent is let go.
        handle.obj().body().release_behind_reader();
    }
    // Views of the read buffer only for a body that copies what it keeps:
    // one read once as it comes (a pass) keeps its pieces as given, and a
    // slow reader would hold the connection's whole buffer.
    let views = small && !private;
    let mut reader = conn.body(framing);
    let mut received = 0u64;
    // Every early return drops the handle, which fails the body.
    loop {
        if private && !reader_keeps_up(bereq.transit_buffer(p), handle.obj()).await {
            abandoned(&mut bereq.log);
            return;
        }
        match conn.read_body(&mut reader, t).await {
            Ok(Some(chunk)) => {
                received += chunk.len() as u64;
                let mut at = 0;
                loop {
                    let held = filters.held();
                    let pushed = match filters.push_some_of(&chunk, at, views) {
                        Ok(pushed) => pushed,
                        Err(e) => return body_failed(&mut bereq.log, &FetchError::BadBody(e.0)),
                    };
                    at += pushed.used;
                    let newly_held = (filters.held() - held) as u64;
                    if newly_held > 0 && handle.charge(newly_held).is_err() {
                        return body_failed(&mut bereq.log, &FetchError::NoStorage);
                    }
                    if let Some(piece) = pushed.piece {
                        if handle.push(piece).is_err() {
                            return body_failed(&mut bereq.log, &FetchError::NoStorage);
                        }
                    }
                    if at == chunk.len() && !pushed.more {
                        break;
                    }
                    // A piece that inflates far goes in slices, each
                    // waiting for the reader as a backend read would.
                    if private && !reader_keeps_up(bereq.transit_buffer(p), handle.obj()).await {
                        abandoned(&mut bereq.log);
                        return;
                    }
                }
            }
            Ok(None) => {
                let whole = filters.is_esi();
                let done = match filters.finish(p, &bereq.url, &mut bereq.log) {
                    Ok(done) => done,
                    Err(e) => return body_failed(&mut bereq.log, &FetchError::BadBody(e.0)),
                };
                if let Some(tail) = done.tail {
                    // An ESI body comes whole, and was charged while it
                    // was held.
                    let new = if whole {
                        (tail.len() as u64).saturating_sub(handle.stored())
                    } else {
                        tail.len() as u64
                    };
                    if handle.charge(new).is_err() || handle.push_charged(tail).is_err() {
                        return body_failed(&mut bereq.log, &FetchError::NoStorage);
                    }
                }
                if let Some(program) = done.program {
                    handle.obj().set_esi(Arc::new(program));
                }
                if let Some(gzip) = done.gzip {
                    handle.obj().set_gzip(Arc::new(gzip));
                }
                let stored = handle.stored();
                if private {
                    // An uncacheable body: read no further ahead of its
                    // client than transit_buffer, or kept whole.
                    let paced = bereq.transit_buffer(p) > 0 && !whole;
                    COUNTERS.add(
                        if paced {
                            Counter::transit_buffered
                        } else {
                            Counter::transit_stored
                        },
                        stored,
                    );
                }
                // The connection goes back to the pool before the body
                // is marked complete: a client that waits for the end of
                // the body (to close, or to ask again) then finds it there.
                let now = lacquer_core::time::now();
                log_body_end(bereq, &conn, received, stored, now);
                conn.finish(true);
                handle.finish();
                return;
            }
            Err(e) => return body_failed(&mut bereq.log, &e),
        }
    }
}

/// Waits until the readers of a private object are within `ahead` bytes
/// of what is stored (any distance when `ahead` is 0); false once nobody
/// but the fill holds the object.
async fn reader_keeps_up(ahead: u64, obj: &Arc<Object>) -> bool {
    loop {
        if Arc::strong_count(obj) <= 1 {
            return false;
        }
        if ahead == 0 || obj.body().wait_taken(ahead, READER_CHECK).await {
            return true;
        }
    }
}

/// Logs the fill of a private object nobody reads any more as given up
/// (dropping its handle then fails the body).
fn abandoned(log: &mut Txn) {
    COUNTERS.inc(Counter::fetch_failed);
    log.fmt(
        Tag::FetchError,
        format_args!("abandoned: no client reads the body"),
    );
}

/// Logs a body that could not be filled (dropping its handle then fails
/// it).
fn body_failed(log: &mut Txn, e: &FetchError) {
    COUNTERS.inc(Counter::fetch_failed);
    log_fetch_error(log, e);
}

/// Runs `delivery` while `filling` reads the body it delivers, in the
/// same task; returns what the delivery returns. A delivery that ends
/// first (its client has gone) drops the fill, closing the backend
/// connection: nobody else can want a private object.
pub(crate) async fn alongside<T>(
    delivery: impl Future<Output = T>,
    filling: impl Future<Output = ()>,
) -> T {
    let mut delivery = std::pin::pin!(delivery);
    let mut filling = std::pin::pin!(filling);
    let mut filled = false;
    std::future::poll_fn(|cx| {
        if !filled && filling.as_mut().poll(cx).is_ready() {
            filled = true;
        }
        delivery.as_mut().poll(cx)
    })
    .await
}

/// Builds the object a 304 revalidated: the stale object's body (shared,
/// not copied), ESI program and gzip bits under the head
/// `vcl_backend_response` left (the stale headers updated by the 304's).
/// None (logged and counted) when the store has no room for it.
pub(crate) fn from_stale(
    sh: &Shared,
    bereq: &mut Bereq,
    mut beresp: Beresp,
    resp: &ResponseHead,
    vary: Option<VarySpec>,
    store: Arc<Store>,
    stale: &Object,
) -> Option<Arc<Object>> {
    let stale_body = stale.body().whole();
    let len = stale_body.map_or(0, |w| w.len());
    let body = match stale_body {
        // A copy of its own, as a small body fetched is: the two objects
        // share no buffer (which would need a shared count).
        Some(w) if len > 0 && len <= SMALL_MAX && store.engine().keeps_on_heap(len) => match w {
            Whole::Small(small) => Body::complete_small(small),
            pieces => Body::complete_small(&pieces.to_vec()),
        },
        Some(w) => Body::complete(w.to_chunks()),
        None => Body::complete(Vec::new()),
    };
    let headers = std::mem::take(&mut beresp.headers);
    let framing = Framing::Length(len);
    let parts = Parts {
        headers,
        framing,
        small: false,
        body,
        vary,
        length: StoredLength::OfBody,
    };
    let obj = make_object(bereq.xid, &store, &beresp, resp, parts);
    if let Some(program) = stale.esi_attr() {
        obj.expect_esi();
        obj.set_esi(program.clone());
    }
    if let Some(gzip) = stale.gzip_attr() {
        obj.set_gzip(gzip.clone());
    }
    log_storage(bereq, &store);
    let charge = obj.head_charge() as u64 + len;
    if !sh.cache.attach(&obj, charge, sh.params.nuke_limit()) {
        COUNTERS.inc(Counter::fetch_failed);
        log_fetch_error(&mut bereq.log, &FetchError::NoStorage);
        return None;
    }
    Some(obj)
}

/// What becomes of a response's `Content-Length` in the stored head.
#[derive(Clone, Copy, PartialEq)]
enum StoredLength {
    /// Kept in its place with the body's length (the body is stored as
    /// the origin sent it).
    OfBody,
    /// Kept as it came: the response to a HEAD, with no body stored, or
    /// an ESI page's.
    AsAnnounced,
    /// Not kept: the stored body is not the one the origin sent.
    Dropped,
}

/// What an object is made of besides the response it came in.
struct Parts {
    /// The fields as VCL and the filters left them.
    headers: lacquer_http::Headers,
    framing: Framing,
    /// The body is small and on the heap: its bytes are copied into
    /// allocations of their own.
    small: bool,
    body: Body,
    vary: Option<VarySpec>,
    /// What becomes of its `Content-Length`.
    length: StoredLength,
}

/// The object for a response head as VCL left it, made of `parts`.
fn make_object(
    xid: u64,
    store: &Arc<Store>,
    beresp: &Beresp,
    resp: &ResponseHead,
    parts: Parts,
) -> Arc<Object> {
    let Parts {
        headers,
        framing,
        small,
        body,
        vary,
        length,
    } = parts;
    let status = beresp.status.wire();
    let head = ResponseHead {
        version: beresp.version,
        status,
        reason: beresp.reason.clone(),
        headers,
        framing,
        keep_alive: resp.keep_alive,
        wire_len: resp.wire_len,
    };
    let not_stored = match status {
        206 | 416 => NOT_STORED,
        _ => NOT_STORED_WHOLE,
    };
    let stored_length = match (length, framing) {
        (StoredLength::AsAnnounced, _) => HeadLength::AsItCame,
        (StoredLength::OfBody, Framing::Length(n)) => HeadLength::Of(n),
        // `Content-Length: 0` (no body to read).
        (StoredLength::OfBody, Framing::None) => HeadLength::Of(0),
        _ => HeadLength::AsSkip,
    };
    let block = packed_stored_head(&head, beresp.t_resp, not_stored, stored_length);
    if small {
        body.copy_small();
    }
    Arc::new(Object::new(ObjectInit {
        store: Some(store.clone()),
        xid,
        kind: ObjKind::Normal,
        status,
        head: block,
        headers: lacquer_http::Headers::new(),
        body,
        vary,
        timers: beresp.timers,
    }))
}

/// The changes the fetch filters made to the response's fields, as
/// varnishd logs them before `Storage`: its length unset when the body
/// is compressed or inflated, each field they removed or replaced unset, then each they
/// added (`Content-Encoding: gzip`, `Vary`, a weakened `ETag`).
fn log_filter_edits(
    bereq: &mut Bereq,
    before: &lacquer_http::Headers,
    after: &lacquer_http::Headers,
    length_changes: bool,
) {
    let log = &mut bereq.log;
    let kept = |h: &lacquer_http::headers::Header, other: &lacquer_http::Headers| {
        other
            .iter()
            .any(|o| o.name.eq_ignore_ascii_case(&h.name) && o.value == h.value)
    };
    for h in before.iter() {
        let length = h.name.eq_ignore_ascii_case(b"content-length");
        if (length && length_changes) || (!length && !kept(h, after)) {
            log.header(Tag::BerespUnset, &h.name, &h.value);
        }
    }
    for h in after.iter().filter(|h| !kept(h, before)) {
        log.header(Tag::BerespHeader, &h.name, &h.value);
    }
}

/// The `Fetch_Body` record: how the body is framed, and that it streams.
/// `stream` is false where the body is read whole before anyone sees it
/// (`beresp.do_stream = false`, an ESI page).
pub(crate) fn log_fetch_body(bereq: &mut Bereq, framing: Framing, stream: bool) {
    if bereq.log.active() {
        let mode = match framing {
            Framing::None => "0 none",
            Framing::Chunked => "2 chunked",
            Framing::Length(_) => "3 length",
            Framing::UntilClose => "4 eof",
        };
        let how = if stream && framing != Framing::None {
            "stream"
        } else {
            "-"
        };
        bereq.log.fmt(Tag::Fetch_Body, format_args!("{mode} {how}"));
    }
}

/// The `Storage` record: which store holds the object.
fn log_storage(bereq: &mut Bereq, store: &Store) {
    if bereq.log.active() {
        let (kind, name) = (store.engine().kind(), store.name());
        bereq.log.fmt(Tag::Storage, format_args!("{kind} {name}"));
    }
}
