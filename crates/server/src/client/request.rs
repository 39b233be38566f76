//! The client-side state machine for one request, driven by VCL as
//! vcl-step(7) describes: one loop ([`drive`]) runs the steps of
//! `client::step`, each a function here (or in `client::lookup`: lookup,
//! hit, miss) that returns the next, from the transport's hand-over
//! through recv, hash, purge, pass, pipe, lookup, deliver or synth to the
//! response written; restarts go round again. Returns whether the
//! connection can carry the next request.

use crate::client::deliver::{self, Delivery};
use crate::client::lookup;
use crate::client::pass;
use crate::client::pipe;
use crate::client::req_headers;
use crate::client::req_log;
use crate::client::resp_log;
use crate::client::step::{self, Name, Step, Transmit};
use crate::client::walk::Walk;
use crate::host::client_host::Resp;
use crate::host::req::{BodyCache, ConnInfo, IncludeCtx, Outcome, Req};
use crate::host::spread;
use crate::host::synth;
use crate::host::vcl::Loaded;
use crate::host::vsl;
use crate::transport::io::Client;
use crate::transport::wire::Transport;
use crate::Shared;
use bytes::Bytes;
use lacquer_cache::object::{Object, Timers};
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::ids::next_vxid;
use lacquer_http::{RequestHead, Status};
use lacquer_shm::{Side, Tag, Txn};
use lacquer_vcl::{Action, Method};
use std::sync::Arc;

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
    req_headers::take_peer_mark(sh, &mut req);
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
    let mut w = Walk {
        sh,
        base: vcl,
        switched: None,
        conn,
        key: {
            // The last request's, kept for its room.
            let mut key = std::mem::take(&mut c.key);
            key.clear();
            key
        },
        keep: None,
        failed: false,
        trace: sh.params.debug_req_state(),
    };
    let outcome = drive(c, &mut w, req).await;
    c.key = w.key;
    c.sess = req.sess;
    let a = req.acct;
    // A piped request's bytes are in its PipeAcct, as varnishd counts
    // them: no ReqAcct.
    if outcome != Outcome::Close(CloseReason::TxPipe) {
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

/// Runs the request's steps from `Transport` until one answers `Done`.
async fn drive(c: &mut Client, w: &mut Walk<'_>, req: &mut Req) -> Outcome {
    let mut step = Step::Transport;
    loop {
        let from = step.name();
        if w.trace && from != Name::Done {
            step::log_start(req, from, &w.vcl().name);
        }
        step = match step {
            Step::Transport => transport(c, w, req).await,
            Step::Recv => recv(w, req),
            Step::Vcl(next) => {
                w.switched = Some(next);
                Step::Transport
            }
            Step::Hash(choice) => hash(c, w, req, choice).await,
            Step::Purge => purge(w, req).await,
            Step::Pass => pass_step(c, w, req).await,
            Step::Pipe => pipe_step(c, w, req).await,
            Step::Lookup => lookup::lookup(w, req).await,
            Step::Hit(obj) => lookup::hit(w, req, obj),
            Step::Miss { slot, hitmiss } => lookup::miss(c, w, req, slot, hitmiss).await,
            Step::Deliver { obj, resp } => deliver_step(c, w, req, obj, resp).await,
            Step::Synth { status, reason } => synth_step(c, w, req, status, reason).await,
            Step::VclFail => {
                w.failed = true;
                Step::Synth {
                    status: 503,
                    reason: Some(Bytes::from_static(b"VCL failed")),
                }
            }
            Step::Restart => restart(c, w, req).await,
            Step::Transmit(t) => Step::Done(transmit(c, w, req, t).await),
            Step::Done(outcome) if w.failed && outcome == Outcome::KeepAlive => {
                return Outcome::Close(CloseReason::VclFailure)
            }
            Step::Done(outcome) => return outcome,
        };
        debug_assert!(
            from.may_lead_to(step.name()),
            "client step {from:?} led to {:?}",
            step.name()
        );
    }
}

/// What comes before VCL: an answer the TLS side registered (an ACME
/// challenge), a cluster peer's invalidation, and the body read first
/// for `std.cache_req_body`.
async fn transport(c: &mut Client, w: &mut Walk<'_>, req: &mut Req) -> Step {
    let sh = w.sh;
    if let (Some(answer_of), None) = (sh.answer_first, &req.include) {
        if &req.head.method[..] == b"GET" {
            if let Some(answer) = answer_of(&req.head.url) {
                return Step::Done(crate::client::answers::acme_answer(c, sh, req, &answer).await);
            }
        }
    }
    if req.from_peer {
        // A peer's invalidation or a read of this node's journal.
        if let Some((status, body)) = crate::host::spread::answer_peer(sh, &req.head.url) {
            return Step::Done(
                crate::client::answers::peer_answer(c, sh, req, status, &body).await,
            );
        }
    }
    if let (Some(max), None) = (w.vcl().program.cache_req_body, &req.include) {
        // `std.cache_req_body` answers at once: the body is read first,
        // up to the most any call of the program asks to keep.
        match req.cache_body(c, sh, max).await {
            Ok(BodyCache::Cached) => req.body_for_lookup = true,
            Ok(BodyCache::TooBig) => {}
            Ok(BodyCache::Overflowed) => {
                return Step::Done(crate::client::answers::too_large(c, sh, req).await)
            }
            Err(reason) => return Step::Done(Outcome::Close(reason)),
        }
    }
    Step::Recv
}

/// `vcl_recv`: its choice goes on to `vcl_hash`.
fn recv(w: &mut Walk<'_>, req: &mut Req) -> Step {
    match w.call(Method::Recv, req, None, None, None) {
        Action::Vcl(label) => switch_vcl(w, req, &label),
        choice @ (Action::Hash
        | Action::Purge
        | Action::Pass(_)
        | Action::Pipe
        | Action::Restart
        | Action::Synth { .. }) => Step::Hash(choice),
        _ => Step::VclFail,
    }
}

/// `return (vcl(label))` from `vcl_recv`: allowed once, on the first pass
/// of a top request; the request goes back to how it came and starts over
/// in the labelled program.
fn switch_vcl(w: &Walk<'_>, req: &mut Req, label: &[u8]) -> Step {
    let label = String::from_utf8_lossy(label);
    let next =
        w.sh.vcls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .labelled(&label);
    let Some(next) = next.filter(|_| req.restarts == 0 && req.include.is_none() && !req.switched)
    else {
        req.log.fmt(
            Tag::VCL_Error,
            format_args!("return (vcl({label})) not possible here"),
        );
        return Step::VclFail;
    };
    req.log
        .fmt(Tag::VCL_use, format_args!("{} via {label}", next.name));
    if let Some(original) = &req.original {
        let (method, url, headers) = (**original).clone();
        (req.head.method, req.head.url, req.head.headers) = (method, url, headers);
    }
    req.switched = true;
    Step::Vcl(next)
}

/// `vcl_hash`, which runs whatever `vcl_recv` chose, as in Varnish (what it
/// sets on the request is there for pass, pipe, synth and restarts too),
/// then where that choice leads.
async fn hash(c: &mut Client, w: &mut Walk<'_>, req: &mut Req, choice: Action) -> Step {
    // Accept-Encoding is washed for the lookup's sake (Vary), so not for
    // a request that goes to the backend as it came.
    let lookup_bound = !matches!(choice, Action::Pass(_) | Action::Pipe);
    if lookup_bound && w.sh.params.http_gzip_support() {
        req_headers::normalise_accept_encoding(&w.sh.params, req);
    }
    let mut key = std::mem::take(&mut w.key);
    key.clear();
    let hashed = w.call(Method::Hash, req, Some(&mut key), None, None);
    w.key = key;
    if hashed != Action::Lookup {
        return Step::VclFail;
    }
    let purge = match choice {
        Action::Hash => false,
        Action::Purge => true,
        Action::Pass(_) => return Step::Pass,
        Action::Pipe if req.include.is_some() => {
            // An include cannot take over the connection: it is passed,
            // so the fragment still appears in the page.
            req.log.bytes(
                Tag::VCL_Error,
                b"vcl_recv{} returns pipe for ESI included object.  Doing pass.",
            );
            return Step::Pass;
        }
        Action::Pipe if c.wire.multiplexed() => {
            // An HTTP/2 stream has no connection of its own to hand
            // over: passed, as Varnish does.
            req.log.bytes(
                Tag::VCL_Error,
                b"vcl_recv{} returns pipe for an HTTP/2 request.  Doing pass.",
            );
            return Step::Pass;
        }
        Action::Pipe => return Step::Pipe,
        Action::Synth { status, reason } => return Step::Synth { status, reason },
        Action::Restart => return Step::Restart,
        _ => return Step::VclFail,
    };
    if !purge && req.cached_body.is_none() && !req.body.is_done() {
        // A lookup's fetch may send the body (VCL sets a method other than
        // GET), and may outlive this request: it takes the body from
        // memory, if it is small enough to keep.
        let max = w
            .vcl()
            .program
            .cache_req_body
            .unwrap_or(0)
            .max(w.sh.params.http_req_size());
        match req.cache_body(c, w.sh, max).await {
            Ok(BodyCache::Cached) => req.body_for_lookup = true,
            Ok(BodyCache::TooBig | BodyCache::Overflowed) => req.log.fmt(
                Tag::FetchError,
                format_args!("Request body over {max} bytes is not kept for the fetch"),
            ),
            Err(reason) => return Step::Done(Outcome::Close(reason)),
        }
    }
    if let Err(reason) = w.settle(c, req).await {
        return Step::Done(Outcome::Close(reason));
    }
    match purge {
        true => Step::Purge,
        false => Step::Lookup,
    }
}

/// The key's objects purged, then `vcl_purge`.
async fn purge(w: &mut Walk<'_>, req: &mut Req) -> Step {
    COUNTERS.inc(Counter::n_purges);
    let n = w.sh.cache.purge(&w.key);
    COUNTERS.add(Counter::n_obj_purged, n as u64);
    // In a cluster, on every node before vcl_purge answers.
    if w.sh.cluster.is_some() {
        let key = Bytes::copy_from_slice(&w.key);
        let inv = crate::host::invalidation::Invalidation::Purge { key };
        req.spread = boxed_in_place!(spread::everywhere(w.sh, inv)).await;
    }
    match w.call(Method::Purge, req, None, None, None) {
        Action::Synth { status, reason } => Step::Synth { status, reason },
        Action::Restart => Step::Restart,
        _ => Step::VclFail,
    }
}

/// `return (restart)`: the request goes round again as a new transaction,
/// unless it has restarted `max_restarts` times already.
async fn restart(c: &mut Client, w: &mut Walk<'_>, req: &mut Req) -> Step {
    req.log.timestamp(
        &lacquer_shm::packed::stamp::RESTART,
        lacquer_core::time::now(),
    );
    if std::mem::take(&mut req.body_for_lookup) {
        req.cached_body = Some(Bytes::new());
    }
    req.restarts += 1;
    w.key.clear();
    req.is_hitmiss = false;
    req.is_hitpass = false;
    req.passed_from_hit = false;
    if u64::from(req.restarts) > w.sh.params.max_restarts() {
        if let Err(reason) = w.settle(c, req).await {
            return Step::Done(Outcome::Close(reason));
        }
        req.log.bytes(Tag::VCL_Error, b"Too many restarts");
        // vcl_synth cannot restart it again (see synth_step).
        return Step::Synth {
            status: 503,
            reason: None,
        };
    }
    req_log::restart(c, w.sh, req);
    Step::Recv
}

/// `vcl_deliver` for `obj`, whose response is `resp` (its headers, or the
/// object's with the fields withheld from storage for this client).
async fn deliver_step(
    c: &mut Client,
    w: &mut Walk<'_>,
    req: &mut Req,
    obj: Arc<Object>,
    mut resp: Resp,
) -> Step {
    let keep = match w.settle(c, req).await {
        Ok(keep) => keep,
        Err(reason) => return Step::Done(Outcome::Close(reason)),
    };
    resp.advertise(w.conn);
    // Logged as built, then each change as it is made, as varnishd logs
    // it (an include's too, though its body alone goes into its page).
    req.resp_logged = req.log.active();
    if req.resp_logged {
        resp_log::log_as_built(
            req,
            w.sh,
            &obj,
            &resp,
            lacquer_core::time::now(),
            &mut c.wbuf,
        );
    }
    let action = w.call(Method::Deliver, req, None, Some(&obj), Some(&mut resp));
    if !matches!(action, Action::Deliver) {
        req.resp_logged = false;
    }
    match action {
        Action::Deliver => {
            let now = lacquer_core::time::now();
            req.log.timestamp(&lacquer_shm::packed::stamp::PROCESS, now);
            Step::Transmit(Transmit {
                obj,
                hit: resp.hit,
                resp: Some(resp),
                synthetic: false,
                keep,
                now,
            })
        }
        Action::Synth { status, reason } => Step::Synth { status, reason },
        Action::Restart => Step::Restart,
        _ => Step::VclFail,
    }
}

/// `vcl_pass`, then the backend's answer, passed on or delivered as an
/// object.
async fn pass_step(c: &mut Client, w: &mut Walk<'_>, req: &mut Req) -> Step {
    req.hash_key = Bytes::copy_from_slice(&w.key);
    match w.call(Method::Pass, req, None, None, None) {
        Action::Fetch => {
            COUNTERS.inc(Counter::s_pass);
            // Boxed: a pass's state is large and most requests never need it;
            // inline, it would grow every connection's task.
            match boxed_in_place!(pass::pass(c, w.sh, w.vcl(), req, w.conn.clone())).await {
                pass::Passed::Done(outcome) => Step::Done(outcome),
                pass::Passed::Object(obj) => Step::Deliver {
                    resp: Resp::for_object(&obj, false),
                    obj,
                },
                pass::Passed::Synth(status, reason) => Step::Synth { status, reason },
                pass::Passed::Restart => Step::Restart,
                pass::Passed::Fail => Step::VclFail,
            }
        }
        Action::Synth { status, reason } => Step::Synth { status, reason },
        Action::Restart => Step::Restart,
        _ => Step::VclFail,
    }
}

/// `vcl_pipe`, then the connection handed over to the backend.
async fn pipe_step(c: &mut Client, w: &mut Walk<'_>, req: &mut Req) -> Step {
    req.hash_key = Bytes::copy_from_slice(&w.key);
    match boxed_in_place!(pipe::pipe(c, w.sh, w.vcl(), req, w.conn.clone())).await {
        pipe::Piped::Done(outcome) => Step::Done(outcome),
        pipe::Piped::Synth(status, reason) => Step::Synth { status, reason },
    }
}

/// `vcl_synth`, then what it built goes out as an object.
async fn synth_step(
    c: &mut Client,
    w: &mut Walk<'_>,
    req: &mut Req,
    status: u16,
    reason: Option<Bytes>,
) -> Step {
    let mut keep = match w.failed {
        true => false,
        false => match w.settle(c, req).await {
            Ok(keep) => keep,
            Err(reason) => return Step::Done(Outcome::Close(reason)),
        },
    };
    COUNTERS.inc(Counter::s_synth);
    let mut resp = Resp::synthetic(Status::new(status), reason);
    // How many nodes of the cluster applied the purge it answers.
    if let Some(reach) = req.spread.take() {
        resp.set("Lacquer-Invalidated", Some(Bytes::from(reach.to_string())));
    }
    // Logged as built, then each change vcl_synth makes, as varnishd logs
    // it (an include's response is its page's, and not logged so).
    req.resp_logged = req.log.active() && !c.wire.part_of_page();
    if req.resp_logged {
        resp.log_as_built(&mut req.log, req.xid);
    }
    match w.call(Method::Synth, req, None, None, Some(&mut resp)) {
        Action::Deliver => {}
        // Past max_restarts (the restart step's own 503), it is delivered.
        Action::Restart if u64::from(req.restarts) <= w.sh.params.max_restarts() => {
            req.resp_logged = false;
            return match w.failed {
                true => Step::Done(Outcome::Close(CloseReason::VclFailure)),
                false => Step::Restart,
            };
        }
        Action::Restart => {}
        _ => {
            resp = Resp::synthetic(Status::new(500), None);
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
    Step::Transmit(Transmit {
        obj,
        resp: None,
        hit: false,
        synthetic: true,
        keep,
        now,
    })
}

/// The response written: what becomes of the connection.
async fn transmit(c: &mut Client, w: &Walk<'_>, req: &mut Req, t: Transmit) -> Outcome {
    let d = Delivery {
        hit: t.hit,
        keep: t.keep,
        vcl: w.vcl(),
        synthetic: t.synthetic,
        now: t.now,
    };
    deliver::object(c, w.sh, req, &t.obj, d, t.resp.as_ref()).await
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
