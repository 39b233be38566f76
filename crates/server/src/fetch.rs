//! The backend side of a cache miss: build the backend request, run the
//! exchange in its own task (so it completes even if the client leaves, as
//! every waiting client depends on it), decide cacheability with the
//! built-in rules, insert the object or a hit-for-miss marker, and stream
//! the body into storage while clients read it.

use crate::builtin;
use crate::request::Req;
use crate::{synth, Shared};
use bytes::Bytes;
use lacquer_backend::FetchError;
use lacquer_cache::object::{ObjKind, Object, ObjectInit, Timers};
use lacquer_cache::ttl::{rfc_ttl, TtlDefaults};
use lacquer_cache::{Body, FetchSlot, Removal, VarySpec};
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::ids::next_vxid;
use lacquer_http::{Framing, Header, Headers, ResponseHead};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::oneshot;

/// Request headers never sent on a cache fetch: the object fetched must be
/// the whole, unconditional representation.
const NOT_FOR_CACHE_FETCH: &[&str] = &[
    "if-modified-since",
    "if-none-match",
    "if-match",
    "if-unmodified-since",
    "if-range",
    "range",
    "expect",
    "content-length",
];

/// Response headers not stored: the delivery writes its own.
const NOT_STORED: &[&str] = &["content-length", "age"];

/// Starts a fetch for a cache miss (or grace refresh). The receiver gets
/// the object as soon as its headers are in, or the error response.
pub(crate) fn spawn(
    sh: &Arc<Shared>,
    req: &Req,
    slot: FetchSlot,
) -> oneshot::Receiver<Arc<Object>> {
    let (tx, rx) = oneshot::channel();
    let xid = next_vxid();
    let mut headers = req.head.headers.clone();
    headers.remove_hop_by_hop();
    for name in NOT_FOR_CACHE_FETCH {
        headers.remove(name);
    }
    let head = bereq_head(sh, b"GET", &req.head.url, &mut headers, xid);
    let sh = sh.clone();
    tokio::spawn(async move {
        COUNTERS.inc(Counter::s_fetch);
        run(sh, xid, head, headers, slot, tx).await;
    });
    rx
}

/// Finishes the backend request headers (Host when missing, X-Varnish)
/// and serialises the request head.
pub(crate) fn bereq_head(
    sh: &Shared,
    method: &[u8],
    url: &[u8],
    headers: &mut Headers,
    xid: u64,
) -> Vec<u8> {
    if !headers.contains("host") {
        headers.set("Host", sh.backend.host_header.clone());
    }
    headers.set("X-Varnish", xid.to_string());
    let mut head = Vec::with_capacity(256 + url.len());
    head.extend_from_slice(method);
    head.push(b' ');
    head.extend_from_slice(url);
    head.extend_from_slice(b" HTTP/1.1\r\n");
    headers.write_to(&mut head);
    head.extend_from_slice(b"\r\n");
    head
}

async fn run(
    sh: Arc<Shared>,
    xid: u64,
    head: Vec<u8>,
    bereq: Headers,
    slot: FetchSlot,
    tx: oneshot::Sender<Arc<Object>>,
) {
    let t = sh.timeouts();
    let limits = sh.response_limits();
    let backend = sh.backend.clone();
    let (mut conn, resp) = match backend.exchange(&head, &[], &t, &limits, false).await {
        Ok(x) => x,
        Err(e) => return fail(xid, &e, slot, tx),
    };
    let now = lacquer_core::time::now();
    let p = &sh.params;
    let defaults = TtlDefaults {
        default_ttl: p.default_ttl(),
        default_grace: p.default_grace(),
        default_keep: p.default_keep(),
    };
    let timers = rfc_ttl(resp.status, &resp.headers, now, &defaults);
    let (vary, vary_star) = match VarySpec::build(resp.headers.get_all("vary"), &bereq) {
        Ok(v) => (v, false),
        Err(_) => (None, true),
    };
    let cacheable = builtin::cacheable(&resp.headers, &timers, now, vary_star);
    let expected = match resp.framing {
        Framing::Length(n) => Some(n),
        Framing::None => Some(0),
        _ => None,
    };
    let (block, stored) = stored_head(&resp, now, NOT_STORED);
    let obj = Arc::new(Object::new(ObjectInit {
        xid,
        kind: ObjKind::Normal,
        status: resp.status,
        head: block,
        headers: stored,
        body: Body::streaming(expected),
        vary: vary.clone(),
        timers,
    }));
    let remaining_life = timers.t_origin + timers.lifetime() - now;
    let store = sh
        .cache
        .choose_store(!cacheable || remaining_life < p.shortlived());
    let nuke_limit = p.nuke_limit();
    // An announced length is reserved before anyone sees the object, so a
    // full store is a clean 503 rather than a truncated delivery.
    let reserved = expected.unwrap_or(0);
    let first_charge = obj.head.len() as u64 + reserved;
    if !sh.cache.attach(&obj, store, first_charge, nuke_limit) {
        return fail(xid, &FetchError::NoStorage, slot, tx);
    }
    if cacheable {
        slot.insert(&obj, &bereq);
    } else {
        let marker = Arc::new(Object::new(ObjectInit {
            xid,
            kind: ObjKind::HitMiss,
            status: resp.status,
            head: Bytes::new(),
            headers: Headers::new(),
            body: Body::complete(Vec::new()),
            vary,
            timers: Timers {
                t_origin: now,
                ttl: p.uncacheable_ttl(),
                grace: 0.0,
                keep: 0.0,
            },
        }));
        sh.cache.attach(&marker, sh.cache.transient().clone(), 0, 0);
        slot.insert(&marker, &bereq);
    }
    let _ = tx.send(obj.clone());
    if resp.framing == Framing::None {
        COUNTERS.inc(match resp.status {
            204 => Counter::fetch_204,
            304 => Counter::fetch_304,
            100..=199 => Counter::fetch_1xx,
            _ => Counter::fetch_none,
        });
    }
    let mut reader = conn.body(resp.framing);
    let mut stored = 0u64;
    loop {
        match conn.read_body(&mut reader, &t).await {
            Ok(Some(chunk)) => {
                let before = stored;
                stored += chunk.len() as u64;
                let extra = stored.saturating_sub(reserved.max(before));
                if extra > 0 && !sh.cache.grow(&obj, extra, nuke_limit) {
                    body_failed(&sh, xid, &obj, &FetchError::NoStorage);
                    return;
                }
                // Copied, so the object holds exactly its bytes and not
                // the connection's read buffer.
                obj.body.push(Bytes::copy_from_slice(&chunk));
            }
            Ok(None) => {
                obj.body.finish();
                conn.finish(true);
                return;
            }
            Err(e) => {
                body_failed(&sh, xid, &obj, &e);
                return;
            }
        }
    }
}

fn body_failed(sh: &Shared, xid: u64, obj: &Arc<Object>, e: &FetchError) {
    COUNTERS.inc(Counter::fetch_failed);
    log_fetch_error(xid, e);
    obj.body.fail();
    sh.cache.remove(obj, Removal::Failed);
}

fn fail(xid: u64, e: &FetchError, slot: FetchSlot, tx: oneshot::Sender<Arc<Object>>) {
    COUNTERS.inc(Counter::fetch_failed);
    log_fetch_error(xid, e);
    let obj = synth::fetch_failed(xid);
    slot.abandon(Some(obj.clone()));
    let _ = tx.send(obj);
}

static LOG_SECOND: AtomicU64 = AtomicU64::new(0);
static LOG_COUNT: AtomicU64 = AtomicU64::new(0);

/// Reports a fetch error on standard error, at most ten a second so that a
/// dead backend under load cannot flood the output.
pub(crate) fn log_fetch_error(xid: u64, e: &FetchError) {
    let second = lacquer_core::time::now() as u64;
    if LOG_SECOND.swap(second, Ordering::Relaxed) != second {
        LOG_COUNT.store(0, Ordering::Relaxed);
    }
    if LOG_COUNT.fetch_add(1, Ordering::Relaxed) < 10 {
        eprintln!("FetchError {xid}: {e}");
    }
}

/// Builds the stored head of a backend response: its status line and the
/// headers worth keeping, in one exact-size buffer that the parsed header
/// list points into. Adds `Date` when the backend sent none.
pub(crate) fn stored_head(resp: &ResponseHead, now: f64, skip: &[&str]) -> (Bytes, Headers) {
    let mut kept = resp.headers.clone();
    kept.remove_hop_by_hop();
    for name in skip {
        kept.remove(name);
    }
    let mut block = Vec::with_capacity(resp.wire_len + 64);
    block.extend_from_slice(b"HTTP/1.1 ");
    block.extend_from_slice(resp.status.to_string().as_bytes());
    block.push(b' ');
    if resp.reason.is_empty() {
        block.extend_from_slice(lacquer_http::reason_phrase(resp.status).as_bytes());
    } else {
        block.extend_from_slice(&resp.reason);
    }
    block.extend_from_slice(b"\r\n");
    let mut spans = Vec::with_capacity(kept.len() + 1);
    let mut push = |block: &mut Vec<u8>, name: &[u8], value: &[u8]| {
        let n0 = block.len();
        block.extend_from_slice(name);
        let n1 = block.len();
        block.extend_from_slice(b": ");
        let v0 = block.len();
        block.extend_from_slice(value);
        let v1 = block.len();
        block.extend_from_slice(b"\r\n");
        spans.push((n0, n1, v0, v1));
    };
    for h in kept.iter() {
        push(&mut block, &h.name, &h.value);
    }
    if !kept.contains("date") {
        lacquer_core::time::with_date(now, |d| push(&mut block, b"Date", d.as_bytes()));
    }
    let block = Bytes::from(block);
    let mut headers = Headers::with_capacity(spans.len());
    for (n0, n1, v0, v1) in spans {
        headers.push_raw(Header {
            name: block.slice(n0..n1),
            value: block.slice(v0..v1),
        });
    }
    (block, headers)
}
