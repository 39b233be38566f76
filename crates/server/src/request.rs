//! The client-side state machine for one request: recv, hash, lookup, then
//! hit, grace, miss (with coalescing on busy objects), hit-for-miss,
//! hit-for-pass or pass, ending in delivery. Returns whether the
//! connection can carry the next request.

use crate::builtin::{self, Recv};
use crate::deliver::{self, Delivery};
use crate::io::{Client, ReqBody};
use crate::{fetch, pass, synth, Shared};
use lacquer_cache::{BusyState, Lookup};
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::ids::next_vxid;
use lacquer_core::params::Params;
use lacquer_http::RequestHead;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One client request in flight.
pub(crate) struct Req {
    pub xid: u64,
    pub head: RequestHead,
    pub body: ReqBody,
}

impl Req {
    pub fn is_head(&self) -> bool {
        self.head.method_is("HEAD")
    }
}

/// How a request ended for its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    KeepAlive,
    Close(CloseReason),
}

/// How many times a request looks up again after waiting before it gives
/// up on coalescing and fetches on its own.
const MAX_RELOOKUPS: usize = 8;

/// Handles one parsed request.
pub(crate) async fn handle(c: &mut Client, sh: &Arc<Shared>, head: RequestHead) -> Outcome {
    COUNTERS.inc(Counter::client_req);
    COUNTERS.add(Counter::s_req_hdrbytes, head.wire_len as u64);
    let body = ReqBody::new(head.framing);
    let mut req = Req {
        xid: next_vxid(),
        head,
        body,
    };
    append_forwarded_for(&mut req, c);
    match builtin::recv(&req) {
        Recv::Synth(status) => {
            let keep = match consume_body(c, sh, &mut req).await {
                Ok(keep) => keep,
                Err(reason) => return Outcome::Close(reason),
            };
            synth::respond(c, sh, &req, status, keep).await
        }
        Recv::Pass => {
            COUNTERS.inc(Counter::s_pass);
            pass::pass(c, sh, &mut req).await
        }
        Recv::Hash => lookup(c, sh, &mut req).await,
    }
}

/// Client address appended to `X-Forwarded-For`, as Varnish does before
/// `vcl_recv`.
fn append_forwarded_for(req: &mut Req, c: &Client) {
    let ip = c.peer_ip.as_bytes();
    let value = match req.head.headers.get("x-forwarded-for") {
        Some(prev) => {
            let mut v = Vec::with_capacity(prev.len() + 2 + ip.len());
            v.extend_from_slice(prev);
            v.extend_from_slice(b", ");
            v.extend_from_slice(ip);
            v
        }
        None => ip.to_vec(),
    };
    req.head.headers.set("X-Forwarded-For", value);
}

/// Reads and drops a request body that will not be forwarded. Returns
/// whether the connection can still be kept.
pub(crate) async fn consume_body(
    c: &mut Client,
    sh: &Arc<Shared>,
    req: &mut Req,
) -> Result<bool, CloseReason> {
    if req.body.is_done() {
        return Ok(req.head.keep_alive());
    }
    if req.head.expect_continue {
        // The client waits for permission we will not give: answer and
        // close rather than read a body nobody wants.
        return Ok(false);
    }
    let limit = Params::duration(sh.params.timeout_idle());
    match req.body.discard(c, limit).await {
        Ok(n) => {
            COUNTERS.add(Counter::s_req_bodybytes, n);
            Ok(req.head.keep_alive())
        }
        Err(_) => Err(CloseReason::RxBody),
    }
}

async fn lookup(c: &mut Client, sh: &Arc<Shared>, req: &mut Req) -> Outcome {
    let keep = match consume_body(c, sh, req).await {
        Ok(keep) => keep,
        Err(reason) => return Outcome::Close(reason),
    };
    let mut key = std::mem::take(&mut c.key);
    builtin::hash(req, &c.local, &mut key);
    let outcome = lookup_key(c, sh, req, &key, keep).await;
    c.key = key;
    outcome
}

async fn lookup_key(
    c: &mut Client,
    sh: &Arc<Shared>,
    req: &mut Req,
    key: &[u8],
    keep: bool,
) -> Outcome {
    let lru_interval = sh.params.lru_interval();
    let mut relookups = 0;
    loop {
        let now = lacquer_core::time::now();
        let lookup = sh.cache.lookup(key, &req.head.headers, now, lru_interval);
        let is_hitmiss = matches!(lookup, Lookup::HitMiss { .. });
        let (obj, hit) = match lookup {
            Lookup::Hit(obj) => {
                COUNTERS.inc(Counter::cache_hit);
                obj.hits.fetch_add(1, Ordering::Relaxed);
                (obj, true)
            }
            Lookup::Grace { obj, refresh } => {
                COUNTERS.inc(Counter::cache_hit);
                COUNTERS.inc(Counter::cache_hit_grace);
                obj.hits.fetch_add(1, Ordering::Relaxed);
                if let Some(slot) = refresh {
                    COUNTERS.inc(Counter::s_bgfetch);
                    fetch::spawn(sh, req, slot);
                }
                (obj, true)
            }
            Lookup::HitPass(_) => {
                COUNTERS.inc(Counter::cache_hitpass);
                COUNTERS.inc(Counter::s_pass);
                return pass::pass(c, sh, req).await;
            }
            Lookup::HitMiss { slot, .. } | Lookup::Miss(slot) => {
                if is_hitmiss {
                    COUNTERS.inc(Counter::cache_hitmiss);
                }
                COUNTERS.inc(Counter::cache_miss);
                match fetch::spawn(sh, req, slot).await {
                    Ok(obj) => (obj, false),
                    // The fetch task ended without an answer (it panicked).
                    Err(_) => (synth::fetch_failed(next_vxid()), false),
                }
            }
            Lookup::Wait(mut rx) => {
                COUNTERS.inc(Counter::busy_sleep);
                let state = match rx.wait_for(|s| !matches!(s, BusyState::Pending)).await {
                    Ok(state) => state.clone(),
                    Err(_) => BusyState::Relookup,
                };
                COUNTERS.inc(Counter::busy_wakeup);
                match state {
                    BusyState::Deliver(obj) => (obj, false),
                    _ => {
                        relookups += 1;
                        if relookups > MAX_RELOOKUPS {
                            COUNTERS.inc(Counter::s_pass);
                            return pass::pass(c, sh, req).await;
                        }
                        continue;
                    }
                }
            }
        };
        return deliver::object(c, sh, req, &obj, Delivery { hit, keep }).await;
    }
}
