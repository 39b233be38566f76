//! The client-side state machine for one request, driven by VCL as
//! vcl-step(7) describes: recv, then hash and lookup (hit, grace, miss
//! with coalescing on busy objects, hit-for-miss, hit-for-pass), pass,
//! pipe, purge or synth, ending in deliver; restarts go round again.
//! Returns whether the connection can carry the next request.

use crate::client::deliver::{self, Delivery};
use crate::client::interim;
use crate::client::pass;
use crate::client::pipe;
use crate::client::req_headers;
use crate::client::req_log;
use crate::client::resp_log;
use crate::fetch::cache::{self as fetch, FetchKind};
use crate::host::client_host::{ClientHost, Resp};
use crate::host::req::{BodyCache, ConnInfo, IncludeCtx, Outcome, Req};
use crate::host::synth;
use crate::host::vcl::Loaded;
use crate::host::vsl;
use crate::transport::io::Client;
use crate::Shared;
use bytes::Bytes;
use lacquer_cache::ban::BanReq;
use lacquer_cache::object::{Object, Timers};
use lacquer_cache::{BusyState, FetchSlot, Lookup, Wants};
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::ids::next_vxid;
use lacquer_http::RequestHead;
use lacquer_shm::{Side, Tag, Txn};
use lacquer_vcl::{Action, Method};
use std::sync::Arc;

/// Where a request goes after a step.
enum Step {
    Done(Outcome),
    Restart,
}

/// How many times a request looks up again after waiting before it gives
/// up on coalescing and passes.
const MAX_RELOOKUPS: usize = 8;

/// The state of one request as it moves between steps.
struct Ctx<'a> {
    sh: &'a Arc<Shared>,
    vcl: &'a Arc<Loaded>,
    conn: &'a ConnInfo,
}

impl Ctx<'_> {
    /// Runs a client method.
    fn call(
        &self,
        method: Method,
        req: &mut Req,
        hash: Option<&mut Vec<u8>>,
        obj: Option<&Object>,
        resp: Option<&mut Resp>,
    ) -> Action {
        self.call_keyed(method, req, hash, None, obj, resp)
    }

    /// A call that knows the hash key looked up (`vcl_hit`, `vcl_miss`).
    fn call_keyed(
        &self,
        method: Method,
        req: &mut Req,
        hash: Option<&mut Vec<u8>>,
        key: Option<&[u8]>,
        obj: Option<&Object>,
        resp: Option<&mut Resp>,
    ) -> Action {
        let mut host = ClientHost {
            method,
            sh: self.sh,
            vcl: self.vcl,
            req,
            conn: self.conn,
            hash,
            key,
            obj,
            resp,
        };
        vsl::run_method(
            &self.vcl.program,
            method,
            &mut host,
            |h| &mut h.req.log,
            |_, _| {},
        )
    }
}

/// Handles one parsed request, logging it as a transaction of the
/// session's.
pub(crate) async fn handle(
    c: &mut Client,
    sh: &Arc<Shared>,
    vcl: &Arc<Loaded>,
    conn: &ConnInfo,
    head: RequestHead,
    sess: &mut Txn,
) -> Outcome {
    COUNTERS.inc(Counter::client_req);
    COUNTERS.add(Counter::s_req_hdrbytes, head.wire_len as u64);
    let xid = next_vxid();
    let t_req = lacquer_core::time::now();
    let mut log = sh.txn(xid, Side::Client);
    req_log::received(&mut log, sess, c, &vcl.name, &head, t_req);
    let mut req = Req::new(xid, head, log, t_req, vcl);
    // One Cache-Control line, as Varnish folds them, for VCL to read.
    req.head.headers.collect("cache-control");
    // What the client's Connection names is for this hop alone: VCL sees
    // it, the backend does not (unless VCL sets it anew).
    req.hop_values = req.head.headers.connection_named_values();
    req_headers::append_forwarded_for(&mut req, c);
    req_headers::set_forwarded_proto(&mut req, c);
    if vcl.program.uses_rollback || vcl.program.uses_labels {
        let h = &req.head;
        req.original = Some(Box::new((
            h.method.clone(),
            h.url.clone(),
            h.headers.clone(),
        )));
    }
    client_steps(c, sh, vcl, conn, &mut req).await
}

/// Runs one ESI include as a request of its own (`req.esi_level` > 0),
/// its response going to `c`'s parent.
pub(crate) async fn handle_include(
    c: &mut Client,
    sh: &Arc<Shared>,
    vcl: &Arc<Loaded>,
    head: RequestHead,
    ctx: Arc<IncludeCtx>,
    xid: u64,
    parent_xid: u64,
) {
    COUNTERS.inc(Counter::esi_req);
    let t_req = lacquer_core::time::now();
    let mut log = sh.txn(xid, Side::Client);
    req_log::include_started(&mut log, c, &head, &ctx, parent_xid, t_req);
    let initial = head.headers.clone();
    let mut req = Req::new(xid, head, log, t_req, vcl);
    req.acct.hdr_rx = 0;
    req.initial = Some(initial);
    req.include = Some(ctx);
    let conn = ConnInfo::of(c);
    client_steps(c, sh, vcl, &conn, &mut req).await;
}

/// The steps of a request, then its byte counts and the end of its log.
async fn client_steps(
    c: &mut Client,
    sh: &Arc<Shared>,
    vcl: &Arc<Loaded>,
    conn: &ConnInfo,
    req: &mut Req,
) -> Outcome {
    req.sess = c.sess;
    // Borrowed, not counted, unless a label switches the program.
    let mut switched: Option<Arc<Loaded>> = None;
    let outcome = loop {
        let cx = Ctx {
            sh,
            vcl: switched.as_ref().unwrap_or(vcl),
            conn,
        };
        let outcome = steps(c, &cx, req).await;
        // `return (vcl(label))`: the request starts over in the program
        // the label names.
        match req.switch_vcl.take() {
            Some(next) => switched = Some(next),
            None => break outcome,
        }
    };
    c.sess = req.sess;
    let a = req.acct;
    // A piped request's bytes are in its PipeAcct, as varnishd counts
    // them: no ReqAcct.
    let piped = matches!(
        outcome,
        Outcome::Close(lacquer_core::close::CloseReason::TxPipe)
    );
    if !piped {
        vsl::numbers(
            &mut req.log,
            Tag::ReqAcct,
            &[
                a.hdr_rx,
                a.body_rx,
                a.hdr_rx + a.body_rx,
                a.hdr_tx,
                a.body_tx,
                a.hdr_tx + a.body_tx,
            ],
        );
    }
    req.log.end();
    outcome
}

/// Runs the request through VCL until it is answered, restarting as
/// often as VCL asks and `max_restarts` allows.
async fn steps(c: &mut Client, cx: &Ctx<'_>, req: &mut Req) -> Outcome {
    let sh = cx.sh;
    if let (Some(answer_of), None) = (sh.answer_first, &req.include) {
        if &req.head.method[..] == b"GET" {
            if let Some(answer) = answer_of(&req.head.url) {
                return crate::client::answers::acme_answer(c, sh, req, &answer).await;
            }
        }
    }
    if let (Some(max), None) = (cx.vcl.program.cache_req_body, &req.include) {
        // `std.cache_req_body` answers at once: the body is read first,
        // up to the most any call of the program asks to keep.
        match req.cache_body(c, sh, max).await {
            Ok(BodyCache::Cached) => req.body_for_lookup = true,
            Ok(BodyCache::TooBig) => {}
            Ok(BodyCache::Overflowed) => {
                return crate::client::answers::too_large(c, sh, req).await
            }
            Err(reason) => return Outcome::Close(reason),
        }
    }
    loop {
        match recv(c, cx, req).await {
            Step::Done(outcome) => return outcome,
            Step::Restart => {
                req.log.timestamp(
                    &lacquer_shm::packed::stamp::RESTART,
                    lacquer_core::time::now(),
                );
                if std::mem::take(&mut req.body_for_lookup) {
                    req.cached_body = Some(Bytes::new());
                }
                req.restarts += 1;
                req.is_hitmiss = false;
                req.is_hitpass = false;
                req.passed_from_hit = false;
                if u64::from(req.restarts) > sh.params.max_restarts() {
                    let keep = match req.consume_body(c, sh).await {
                        Ok(keep) => keep,
                        Err(reason) => return Outcome::Close(reason),
                    };
                    req.log.bytes(Tag::VCL_Error, b"Too many restarts");
                    return match synth_step(c, cx, req, 503, None, keep).await {
                        Step::Done(o) => o,
                        Step::Restart => Outcome::Close(CloseReason::VclFailure),
                    };
                }
                req_log::restart(c, sh, req);
            }
        }
    }
}

async fn recv(c: &mut Client, cx: &Ctx<'_>, req: &mut Req) -> Step {
    let action = cx.call(Method::Recv, req, None, None, None);
    if let Action::Vcl(label) = &action {
        return switch_vcl(c, cx, req, label).await;
    }
    let (Action::Hash
    | Action::Purge
    | Action::Pass(_)
    | Action::Pipe
    | Action::Restart
    | Action::Synth { .. }) = action
    else {
        return failed(c, cx, req).await;
    };
    // Accept-Encoding is washed for the lookup's sake (Vary), so not for
    // a request that goes to the backend as it came.
    let lookup_bound = !matches!(action, Action::Pass(_) | Action::Pipe);
    if lookup_bound && cx.sh.params.http_gzip_support() {
        req_headers::normalise_accept_encoding(&cx.sh.params, req);
    }
    // vcl_hash runs whatever vcl_recv chose, as in Varnish: what it sets
    // on the request is there for pass, pipe, synth and restarts too.
    let mut key = std::mem::take(&mut c.key);
    key.clear();
    let hashed = cx.call(Method::Hash, req, Some(&mut key), None, None);
    let step = if hashed != Action::Lookup {
        failed(c, cx, req).await
    } else {
        after_hash(c, cx, req, action, &key).await
    };
    c.key = key;
    step
}

/// `return (vcl(label))` from `vcl_recv`: allowed once, on the first pass
/// of a top request; the request goes back to how it came and starts over
/// in the labelled program.
async fn switch_vcl(c: &mut Client, cx: &Ctx<'_>, req: &mut Req, label: &[u8]) -> Step {
    let label = String::from_utf8_lossy(label);
    let next = cx
        .sh
        .vcls
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .labelled(&label);
    let Some(next) = next.filter(|_| req.restarts == 0 && req.include.is_none() && !req.switched)
    else {
        req.log.fmt(
            Tag::VCL_Error,
            format_args!("return (vcl({label})) not possible here"),
        );
        return failed(c, cx, req).await;
    };
    req.log
        .fmt(Tag::VCL_use, format_args!("{} via {label}", next.name));
    if let Some(original) = &req.original {
        let (method, url, headers) = (**original).clone();
        (req.head.method, req.head.url, req.head.headers) = (method, url, headers);
    }
    req.switched = true;
    req.switch_vcl = Some(next);
    Step::Done(Outcome::KeepAlive)
}

/// Where `vcl_recv`'s choice leads once the request is hashed.
async fn after_hash(
    c: &mut Client,
    cx: &Ctx<'_>,
    req: &mut Req,
    action: Action,
    key: &[u8],
) -> Step {
    let purge = match action {
        Action::Hash => false,
        Action::Purge => true,
        Action::Pass(_) => return pass_step(c, cx, req, key).await,
        Action::Pipe if req.include.is_some() => {
            // An include cannot take over the connection: it is passed,
            // so the fragment still appears in the page.
            req.log.bytes(
                Tag::VCL_Error,
                b"vcl_recv{} returns pipe for ESI included object.  Doing pass.",
            );
            return pass_step(c, cx, req, key).await;
        }
        Action::Pipe if c.h2().is_some() => {
            // An HTTP/2 stream has no connection of its own to hand
            // over: passed, as Varnish does.
            req.log.bytes(
                Tag::VCL_Error,
                b"vcl_recv{} returns pipe for an HTTP/2 request.  Doing pass.",
            );
            return pass_step(c, cx, req, key).await;
        }
        Action::Pipe => return pipe_step(c, cx, req, key).await,
        Action::Synth { status, reason } => {
            return synth_after_body(c, cx, req, status, reason).await
        }
        // `recv` lets only these choices and `restart` through.
        _ => return Step::Restart,
    };
    if !purge && req.cached_body.is_none() && !req.body.is_done() {
        // A lookup's fetch may send the body (VCL sets a method other than
        // GET), and may outlive this request: it takes the body from
        // memory, if it is small enough to keep.
        let max = cx
            .vcl
            .program
            .cache_req_body
            .unwrap_or(0)
            .max(cx.sh.params.http_req_size());
        match req.cache_body(c, cx.sh, max).await {
            Ok(BodyCache::Cached) => req.body_for_lookup = true,
            Ok(BodyCache::TooBig | BodyCache::Overflowed) => req.log.fmt(
                Tag::FetchError,
                format_args!("Request body over {max} bytes is not kept for the fetch"),
            ),
            Err(reason) => return Step::Done(Outcome::Close(reason)),
        }
    }
    let keep = match req.consume_body(c, cx.sh).await {
        Ok(keep) => keep,
        Err(reason) => return Step::Done(Outcome::Close(reason)),
    };
    if !purge {
        return lookup(c, cx, req, key, keep).await;
    }
    COUNTERS.inc(Counter::n_purges);
    let n = cx.sh.cache.purge(key);
    COUNTERS.add(Counter::n_obj_purged, n as u64);
    match cx.call(Method::Purge, req, None, None, None) {
        Action::Synth { status, reason } => synth_step(c, cx, req, status, reason, keep).await,
        Action::Restart => Step::Restart,
        _ => failed(c, cx, req).await,
    }
}

async fn lookup(c: &mut Client, cx: &Ctx<'_>, req: &mut Req, key: &[u8], keep: bool) -> Step {
    let sh = cx.sh;
    let lru_interval = sh.params.lru_interval();
    let mut relookups = 0;
    let wants = lookup_wants(sh, req);
    loop {
        // A first lookup judges freshness when the request came, as
        // varnishd's does (and reads no clock); one after a wait or a
        // restart, now.
        let now = match relookups == 0 && req.restarts == 0 {
            true => req.t_req,
            false => lacquer_core::time::now(),
        };
        let lookup = if req.hash_always_miss {
            sh.cache.lookup_fresh_fetch(key)
        } else {
            let ban_req = BanReq {
                url: &req.head.url,
                headers: &req.head.headers,
            };
            sh.cache
                .lookup_wanting(key, ban_req, now, lru_interval, wants)
        };
        let hitmiss = matches!(lookup, Lookup::HitMiss { .. });
        if let Lookup::HitMiss { marker, .. } = &lookup {
            req_log::hit(req, Tag::HitMiss, marker, now);
        }
        match lookup {
            // Hits are counted by the lookup that makes them.
            Lookup::Hit(obj) => {
                req_log::hit(req, Tag::Hit, &obj, now);
                return hit_step(c, cx, req, key, obj, keep).await;
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
                        cx.vcl,
                        req,
                        cx.conn.clone(),
                        key,
                        slot,
                        kind,
                    ));
                }
                return hit_step(c, cx, req, key, obj, keep).await;
            }
            Lookup::HitPass(marker) => {
                COUNTERS.inc(Counter::cache_hitpass);
                req_log::hit(req, Tag::HitPass, &marker, now);
                req.is_hitpass = true;
                return pass_step(c, cx, req, key).await;
            }
            Lookup::HitMiss { slot, .. } | Lookup::Miss(slot) => {
                if hitmiss {
                    COUNTERS.inc(Counter::cache_hitmiss);
                    req.is_hitmiss = true;
                }
                COUNTERS.inc(Counter::cache_miss);
                return miss_step(c, cx, req, key, slot, hitmiss, keep).await;
            }
            Lookup::Wait(mut rx) => {
                COUNTERS.inc(Counter::busy_sleep);
                let state = match rx.wait_for(|s| !matches!(s, BusyState::Pending)).await {
                    Ok(state) => state.clone(),
                    Err(_) => BusyState::Relookup,
                };
                COUNTERS.inc(Counter::busy_wakeup);
                match state {
                    BusyState::Deliver(obj) => {
                        return deliver_step(c, cx, req, obj, false, keep).await
                    }
                    _ => {
                        relookups += 1;
                        if relookups > MAX_RELOOKUPS {
                            return pass_step(c, cx, req, key).await;
                        }
                    }
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

async fn hit_step(
    c: &mut Client,
    cx: &Ctx<'_>,
    req: &mut Req,
    key: &[u8],
    obj: Arc<Object>,
    keep: bool,
) -> Step {
    match cx.call_keyed(Method::Hit, req, None, Some(key), Some(&obj), None) {
        Action::Deliver => deliver_step(c, cx, req, obj, true, keep).await,
        Action::Pass(_) => {
            // A hit still: X-Varnish names the object delivered (the
            // pass's), as varnishd does.
            req.passed_from_hit = true;
            pass_step(c, cx, req, key).await
        }
        Action::Synth { status, reason } => synth_step(c, cx, req, status, reason, keep).await,
        Action::Restart => Step::Restart,
        _ => failed(c, cx, req).await,
    }
}

async fn miss_step(
    c: &mut Client,
    cx: &Ctx<'_>,
    req: &mut Req,
    key: &[u8],
    slot: FetchSlot,
    hitmiss: bool,
    keep: bool,
) -> Step {
    // RFC 9111 §5.2.1.7: a client that wants only a stored response
    // gets a 504 rather than a fetch.
    if !cx.sh.params.varnish_compat_ttl() && lacquer_cache::ttl::only_if_cached(&req.head.headers) {
        drop(slot);
        return synth_step(c, cx, req, 504, None, keep).await;
    }
    match cx.call_keyed(Method::Miss, req, None, Some(key), None, None) {
        Action::Fetch => {
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
                abandon_when_gone: hitmiss || c.h2().is_some(),
                interim: sink,
            };
            let rx = fetch::spawn(cx.sh, cx.vcl, req, cx.conn.clone(), key, slot, kind);
            // A client that leaves stops waiting; the fetch goes on for
            // the cache, unless it was this request's own (hit-for-miss)
            // or a reset stream's that nobody else waits for.
            let interim::Waited::Answer(answer) = interim::wait(c, cx.sh, rx, interims).await
            else {
                return Step::Done(Outcome::Close(CloseReason::RemClose));
            };
            let fetched = match answer {
                Ok(fetched) => fetched,
                // The fetch was abandoned (or failed in VCL): as in
                // Varnish, vcl_synth answers with a 503.
                Err(_) => {
                    req.log.timestamp(
                        &lacquer_shm::packed::stamp::FETCH,
                        lacquer_core::time::now(),
                    );
                    return synth_step(c, cx, req, 503, None, keep).await;
                }
            };
            req.log.timestamp(
                &lacquer_shm::packed::stamp::FETCH,
                lacquer_core::time::now(),
            );
            let resp = match fetched.withheld {
                Some(fields) => Resp::with_fields(&fetched.obj, fields),
                None => Resp::for_object(&fetched.obj, false),
            };
            deliver_resp(c, cx, req, fetched.obj, resp, keep).await
        }
        Action::Pass(_) => {
            drop(slot);
            pass_step(c, cx, req, key).await
        }
        Action::Synth { status, reason } => {
            drop(slot);
            synth_step(c, cx, req, status, reason, keep).await
        }
        Action::Restart => Step::Restart,
        _ => {
            drop(slot);
            failed(c, cx, req).await
        }
    }
}

async fn deliver_step(
    c: &mut Client,
    cx: &Ctx<'_>,
    req: &mut Req,
    obj: Arc<Object>,
    hit: bool,
    keep: bool,
) -> Step {
    let resp = Resp::for_object(&obj, hit);
    deliver_resp(c, cx, req, obj, resp, keep).await
}

/// Delivers `obj` as `resp` (its headers, or the object's with the fields
/// withheld from storage for this client) after `vcl_deliver`.
async fn deliver_resp(
    c: &mut Client,
    cx: &Ctx<'_>,
    req: &mut Req,
    obj: Arc<Object>,
    mut resp: Resp,
    keep: bool,
) -> Step {
    let hit = resp.hit;
    // Logged as built, then each change as it is made, as varnishd logs
    // it (an include's too, though its body alone goes into its page).
    req.resp_logged = req.log.active();
    if req.resp_logged {
        resp_log::log_as_built(
            req,
            cx.sh,
            &obj,
            &resp,
            lacquer_core::time::now(),
            &mut c.wbuf,
        );
    }
    let action = cx.call(Method::Deliver, req, None, Some(&obj), Some(&mut resp));
    if !matches!(action, Action::Deliver) {
        req.resp_logged = false;
    }
    match action {
        Action::Deliver => {
            let now = lacquer_core::time::now();
            req.log.timestamp(&lacquer_shm::packed::stamp::PROCESS, now);
            let d = Delivery {
                hit,
                keep,
                vcl: cx.vcl,
                synthetic: false,
                now,
            };
            Step::Done(deliver::object(c, cx.sh, req, &obj, d, Some(&resp)).await)
        }
        Action::Synth { status, reason } => synth_step(c, cx, req, status, reason, keep).await,
        Action::Restart => Step::Restart,
        _ => failed(c, cx, req).await,
    }
}

async fn pass_step(c: &mut Client, cx: &Ctx<'_>, req: &mut Req, key: &[u8]) -> Step {
    req.hash_key = Bytes::copy_from_slice(key);
    match cx.call(Method::Pass, req, None, None, None) {
        Action::Fetch => {
            COUNTERS.inc(Counter::s_pass);
            // Boxed: a pass's state is large and most requests never need it;
            // inline, it would grow every connection's task.
            match boxed_in_place!(pass::pass(c, cx.sh, cx.vcl, req, cx.conn.clone())).await {
                pass::Passed::Done(outcome) => Step::Done(outcome),
                pass::Passed::Object(obj) => {
                    let keep = match req.consume_body(c, cx.sh).await {
                        Ok(keep) => keep,
                        Err(reason) => return Step::Done(Outcome::Close(reason)),
                    };
                    deliver_step(c, cx, req, obj, false, keep).await
                }
                pass::Passed::Synth(status, reason) => {
                    synth_after_body(c, cx, req, status, reason).await
                }
                pass::Passed::Restart => Step::Restart,
                pass::Passed::Fail => failed(c, cx, req).await,
            }
        }
        Action::Synth { status, reason } => synth_after_body(c, cx, req, status, reason).await,
        Action::Restart => Step::Restart,
        _ => failed(c, cx, req).await,
    }
}

async fn pipe_step(c: &mut Client, cx: &Ctx<'_>, req: &mut Req, key: &[u8]) -> Step {
    req.hash_key = Bytes::copy_from_slice(key);
    match boxed_in_place!(pipe::pipe(c, cx.sh, cx.vcl, req, cx.conn.clone())).await {
        pipe::Piped::Done(outcome) => Step::Done(outcome),
        pipe::Piped::Synth(status, reason) => synth_after_body(c, cx, req, status, reason).await,
    }
}

async fn synth_after_body(
    c: &mut Client,
    cx: &Ctx<'_>,
    req: &mut Req,
    status: u16,
    reason: Option<Bytes>,
) -> Step {
    let keep = match req.consume_body(c, cx.sh).await {
        Ok(keep) => keep,
        Err(reason) => return Step::Done(Outcome::Close(reason)),
    };
    synth_step(c, cx, req, status, reason, keep).await
}

/// A VCL failure: a 503 and the connection closes.
async fn failed(c: &mut Client, cx: &Ctx<'_>, req: &mut Req) -> Step {
    let reason = Some(Bytes::from_static(b"VCL failed"));
    match synth_step(c, cx, req, 503, reason, false).await {
        Step::Done(Outcome::KeepAlive) | Step::Restart => {
            Step::Done(Outcome::Close(CloseReason::VclFailure))
        }
        step => step,
    }
}

/// `vcl_synth`, then delivery of what it built.
async fn synth_step(
    c: &mut Client,
    cx: &Ctx<'_>,
    req: &mut Req,
    status: u16,
    reason: Option<Bytes>,
    keep: bool,
) -> Step {
    COUNTERS.inc(Counter::s_synth);
    let mut resp = Resp::synthetic(status, reason);
    let mut keep = keep;
    // Logged as built, then each change vcl_synth makes, as varnishd logs
    // it (an include's response is its page's, and not logged so).
    req.resp_logged = req.log.active() && !c.is_fragment();
    if req.resp_logged {
        resp.log_as_built(&mut req.log, req.xid);
    }
    match cx.call(Method::Synth, req, None, None, Some(&mut resp)) {
        Action::Deliver => {}
        Action::Restart if u64::from(req.restarts) <= cx.sh.params.max_restarts() => {
            req.resp_logged = false;
            return Step::Restart;
        }
        Action::Restart => {}
        _ => {
            resp = Resp::synthetic(500, None);
            resp.body = synth::page(500, "Internal Server Error", req.xid).into_bytes();
            keep = false;
            req.resp_logged = false;
        }
    }
    let now = lacquer_core::time::now();
    let obj = synth::object_from(
        None,
        resp.status,
        &resp.reason,
        resp.headers.take().unwrap_or_default(),
        Bytes::from(std::mem::take(&mut resp.body)),
        req.xid,
        Timers {
            t_origin: now,
            ttl: 0.0,
            grace: 0.0,
            keep: 0.0,
        },
    );
    req.log.timestamp(&lacquer_shm::packed::stamp::PROCESS, now);
    let d = Delivery {
        hit: false,
        keep,
        vcl: cx.vcl,
        synthetic: true,
        now,
    };
    Step::Done(deliver::object(c, cx.sh, req, &obj, d, None).await)
}

/// An ESI include's request as a boxed future, for `esi` to run (the
/// daemon hands it to ESI as `Shared::includes`).
pub(crate) fn include_request(
    mut fc: Client,
    sh: Arc<Shared>,
    vcl: Arc<Loaded>,
    head: RequestHead,
    ctx: Arc<IncludeCtx>,
    xid: u64,
    parent: u64,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'static>> {
    Box::pin(async move {
        handle_include(&mut fc, &sh, &vcl, head, ctx, xid, parent).await;
    })
}
