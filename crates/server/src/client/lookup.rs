//! The lookup, hit and miss steps of a client request: the cache looked
//! up by the hash key (waiting on a busy object, coalescing, as needed),
//! `vcl_hit` with what was found, and `vcl_miss` with the fetch it starts
//! and waits for.

use crate::client::interim;
use crate::client::req_log;
use crate::client::step::Step;
use crate::client::walk::Walk;
use crate::fetch::cache::{self as fetch, FetchKind};
use crate::host::client_host::Resp;
use crate::host::req::{Outcome, Req};
use crate::transport::io::Client;
use crate::transport::wire::Transport;
use crate::Shared;
use lacquer_cache::ban::BanReq;
use lacquer_cache::object::Object;
use lacquer_cache::{BusyState, FetchSlot, Lookup, Wants};
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_shm::Tag;
use lacquer_vcl::{Action, Method};
use std::sync::Arc;

/// How many times a request looks up again after waiting before it gives
/// up on coalescing and passes.
const MAX_RELOOKUPS: usize = 8;

/// The cache looked up: a hit (or a stale one, refreshed behind it), a
/// hit-for-pass, a miss or hit-for-miss, or a wait on the fetch of the
/// same key, which may deliver what it fetched.
pub(super) async fn lookup(w: &mut Walk<'_>, req: &mut Req) -> Step {
    let sh = w.sh;
    let lru_interval = sh.params.lru_interval();
    let mut relookups = 0;
    let wants = lookup_wants(sh, req);
    loop {
        // Freshness is judged at the time the request came, as
        // varnishd's lookups judge it (and no clock is read): after a
        // restart too, and after a wait, so that a request that waited
        // on a fetch gets what it waited for even when that object's
        // TTL is shorter than the wait for the lookup again.
        let now = req.t_req;
        let lookup = if req.hash_always_miss {
            sh.cache.lookup_fresh_fetch(&w.key)
        } else {
            let ban_req = BanReq {
                url: &req.head.url,
                headers: &req.head.headers,
            };
            sh.cache
                .lookup_wanting(&w.key, ban_req, now, lru_interval, wants)
        };
        match lookup {
            // Hits are counted by the lookup that makes them.
            Lookup::Hit(obj) => {
                req_log::hit(req, Tag::Hit, &obj, now);
                return Step::Hit(obj);
            }
            Lookup::Grace { obj, refresh } => {
                req_log::hit(req, Tag::Hit, &obj, now);
                if let Some(slot) = refresh {
                    COUNTERS.inc(Counter::s_bgfetch);
                    let kind = FetchKind {
                        bgfetch: true,
                        hitmiss: false,
                        abandon_when_gone: false,
                        interim: None,
                    };
                    drop(fetch::spawn(
                        sh,
                        w.vcl(),
                        req,
                        w.conn.clone(),
                        &w.key,
                        slot,
                        kind,
                    ));
                }
                return Step::Hit(obj);
            }
            Lookup::HitPass(marker) => {
                COUNTERS.inc(Counter::cache_hitpass);
                req_log::hit(req, Tag::HitPass, &marker, now);
                req.is_hitpass = true;
                return Step::Pass;
            }
            Lookup::HitMiss { slot, marker } => {
                req_log::hit(req, Tag::HitMiss, &marker, now);
                COUNTERS.inc(Counter::cache_hitmiss);
                req.is_hitmiss = true;
                COUNTERS.inc(Counter::cache_miss);
                return Step::Miss {
                    slot,
                    hitmiss: true,
                };
            }
            Lookup::Miss(slot) => {
                COUNTERS.inc(Counter::cache_miss);
                return Step::Miss {
                    slot,
                    hitmiss: false,
                };
            }
            Lookup::Wait(mut rx) => {
                COUNTERS.inc(Counter::busy_sleep);
                let state = match rx.wait_for(|s| !matches!(s, BusyState::Pending)).await {
                    Ok(state) => state.clone(),
                    Err(_) => BusyState::Relookup,
                };
                COUNTERS.inc(Counter::busy_wakeup);
                if let BusyState::Deliver(obj) = state {
                    return Step::Deliver {
                        resp: Resp::for_object(&obj, false),
                        obj,
                    };
                }
                relookups += 1;
                if relookups > MAX_RELOOKUPS {
                    return Step::Pass;
                }
            }
        }
    }
}

/// How fresh the request wants an object: `req.grace`, and unless
/// Varnish's rules are asked for, the client's `max-stale` and
/// `min-fresh`.
fn lookup_wants(sh: &Shared, req: &Req) -> Wants {
    let mut wants = Wants {
        grace: req.grace,
        ignore_vary: req.hash_ignore_vary,
        ignore_busy: req.hash_ignore_busy,
        ..Wants::default()
    };
    if !sh.params.varnish_compat_ttl() {
        let client = lacquer_cache::ttl::request_wants(&req.head.headers);
        wants.max_stale = client.max_stale;
        wants.min_fresh = client.min_fresh;
    }
    wants
}

/// `vcl_hit` with the object found.
pub(super) fn hit(w: &mut Walk<'_>, req: &mut Req, obj: Arc<Object>) -> Step {
    match w.call_keyed(Method::Hit, req, Some(&obj)) {
        Action::Deliver => Step::Deliver {
            resp: Resp::for_object(&obj, true),
            obj,
        },
        Action::Pass(_) => {
            // A hit still: X-Varnish names the object delivered (the
            // pass's), as varnishd does.
            req.passed_from_hit = true;
            Step::Pass
        }
        Action::Synth { status, reason } => Step::Synth { status, reason },
        Action::Restart => Step::Restart,
        _ => Step::VclFail,
    }
}

/// `vcl_miss`, then the fetch it starts, waited for.
pub(super) async fn miss(
    c: &mut Client,
    w: &mut Walk<'_>,
    req: &mut Req,
    slot: FetchSlot,
    hitmiss: bool,
) -> Step {
    // RFC 9111 §5.2.1.7: a client that wants only a stored response
    // gets a 504 rather than a fetch.
    if !w.sh.params.varnish_compat_ttl() && lacquer_cache::ttl::only_if_cached(&req.head.headers) {
        drop(slot);
        return Step::Synth {
            status: 504,
            reason: None,
        };
    }
    match w.call_keyed(Method::Miss, req, None) {
        Action::Fetch => {}
        // The slot is let go as this step returns, before the next runs:
        // another request may then fill the key.
        Action::Pass(_) => return Step::Pass,
        Action::Synth { status, reason } => return Step::Synth { status, reason },
        Action::Restart => return Step::Restart,
        _ => return Step::VclFail,
    }
    let (sink, interims) = match interim::wanted(c, req) {
        true => {
            let (tx, rx) = interim::channel();
            (Some(tx), Some(rx))
        }
        false => (None, None),
    };
    let kind = FetchKind {
        bgfetch: false,
        hitmiss,
        abandon_when_gone: hitmiss || c.wire.multiplexed(),
        interim: sink,
    };
    let rx = fetch::spawn(w.sh, w.vcl(), req, w.conn.clone(), &w.key, slot, kind);
    // A client that leaves stops waiting; the fetch goes on for the
    // cache, unless it was this request's own (hit-for-miss) or a reset
    // stream's that nobody else waits for.
    let interim::Waited::Answer(answer) = interim::wait(c, w.sh, rx, interims).await else {
        return Step::Done(Outcome::Close(CloseReason::RemClose));
    };
    req.log.timestamp(
        &lacquer_shm::packed::stamp::FETCH,
        lacquer_core::time::now(),
    );
    match answer {
        Ok(fetched) => Step::Deliver {
            resp: match fetched.withheld {
                Some(fields) => Resp::with_fields(&fetched.obj, fields),
                None => Resp::for_object(&fetched.obj, false),
            },
            obj: fetched.obj,
        },
        // The fetch was abandoned (or failed in VCL): as in Varnish,
        // vcl_synth answers with a 503.
        Err(_) => Step::Synth {
            status: 503,
            reason: None,
        },
    }
}
