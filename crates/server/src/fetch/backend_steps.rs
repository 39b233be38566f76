//! The one backend state machine of vcl-step(7), for cache fetches and
//! passes alike, as the steps of `fetch::step` run by one loop
//! ([`run_fetch`]): `vcl_backend_fetch`, a backend picked (through
//! directors), the request sent with its body framed by construction, the
//! response head read, `vcl_backend_refresh` for a 304 that revalidates,
//! `vcl_backend_response` and the body — or `vcl_backend_error` when
//! anything fails — and `return (retry)` starting over. Counters, log
//! records, retries and timeouts are the same on both paths because they
//! are this one path. What differs is the [`FetchMode`]'s: where the body
//! comes from and who waits for the response (a cache slot and its
//! waiters, or one client streaming its request body), and what becomes of
//! the response (an object in the cache, or a stream to that client).

use crate::fetch::mode::{BodyFailed, FetchMode};
pub(crate) use crate::fetch::step::Came;
use crate::fetch::step::{self, Got, Name, OnConn, Step};
use crate::fetch::through_cluster;
use crate::host::backend_host::{self, Bereq, BereqBody, Beresp};
use crate::host::synth;
use crate::host::vcl::Loaded;
use crate::host::vsl;
use crate::Shared;
use bytes::Bytes;
use lacquer_backend::FetchError;
use lacquer_cache::object::Object;
use lacquer_cache::store::Store;
use lacquer_cache::ttl::{rfc_ttl, TtlDefaults};
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_http::{Framing, ResponseHead, Status};
use lacquer_shm::{Tag, Txn};
use lacquer_vcl::{Action, BackendRef, Method};
use std::ops::ControlFlow;
use std::sync::Arc;

/// Where a response VCL did not take leads: `return (retry)` while
/// retries are left, the fetch's end for `abandon` or `fail`, else
/// `vcl_backend_error` (`attempted`: the exchange's end is still to be
/// logged).
fn unused<M: FetchMode>(
    f: &Fetcher<'_>,
    action: Action,
    bereq: &mut Bereq,
    mode: &mut M,
    attempted: bool,
) -> Step<M::Done> {
    match action {
        Action::Retry if bereq.retries < f.max_retries && mode.may_retry() => Step::Retry,
        Action::Abandon | Action::Fail => Step::Done(mode.abandoned(bereq)),
        Action::Error { status, reason } => Step::Error {
            status: Status::new(status),
            reason,
            attempted,
        },
        _ => failed(attempted),
    }
}

/// What every step of one fetch reads: the daemon, the program, how often
/// it may retry, and whether its steps are logged (`debug=+req_state`).
struct Fetcher<'a> {
    sh: &'a Shared,
    vcl: &'a Loaded,
    max_retries: u32,
    trace: bool,
}

impl Fetcher<'_> {
    /// Logs a step as it starts, where asked; in a debug build, checks
    /// that it may follow the one before (`from`, where not checked
    /// already).
    fn entering(&self, bereq: &mut Bereq, from: Option<Name>, to: Name) {
        if let Some(from) = from {
            debug_assert!(from.may_lead_to(to), "backend step {from:?} led to {to:?}");
        }
        if self.trace && to != Name::Done {
            step::log_start(bereq, to);
        }
    }
}

/// A failure on the way to a response: `vcl_backend_error` with a 503.
fn failed<D>(attempted: bool) -> Step<D> {
    Step::Error {
        status: Status::SERVICE_UNAVAILABLE,
        reason: None,
        attempted,
    }
}

/// Runs the backend side of one request to its end: the steps of
/// `fetch::step`, from `Fetch` until one is `Done`.
pub(crate) async fn run_fetch<M: FetchMode>(
    sh: &Shared,
    vcl: &Loaded,
    bereq: &mut Bereq,
    mode: &mut M,
) -> M::Done {
    let f = Fetcher {
        sh,
        vcl,
        max_retries: u32::try_from(sh.params.max_retries()).unwrap_or(u32::MAX),
        trace: sh.params.debug_req_state(),
    };
    if vcl.program.uses_rollback && bereq.original.is_none() {
        bereq.original = Some(Box::new((
            bereq.method.clone(),
            bereq.url.clone(),
            bereq.headers.clone(),
        )));
    }
    if f.trace {
        step::log_start(bereq, Name::Fetch);
    }
    let mut step = Step::Fetch;
    loop {
        let from = step.name();
        step = match step {
            Step::Fetch => fetch(&f, bereq, mode),
            Step::StartFetch => {
                // It checked its own last transition, from a step on the
                // connection.
                step = start_fetch(&f, bereq, mode).await;
                f.entering(bereq, None, step.name());
                continue;
            }
            Step::Error {
                status,
                reason,
                attempted,
            } => error(&f, bereq, mode, status, reason, attempted),
            Step::Retry => {
                bereq.retry(sh);
                Step::Fetch
            }
            Step::Done(done) => return done,
        };
        f.entering(bereq, Some(from), step.name());
    }
}

/// `vcl_backend_fetch`: the request as VCL makes it.
fn fetch<M: FetchMode>(f: &Fetcher<'_>, bereq: &mut Bereq, mode: &mut M) -> Step<M::Done> {
    if bereq.retries == 0 {
        bereq.before_fetch_vcl();
    }
    match backend_host::call_method(Method::BackendFetch, f.sh, f.vcl, bereq, None) {
        Action::Fetch => {}
        // As in Varnish, a fetch VCL abandons or fails ends at once (the
        // client side answers 503); only `error` goes to
        // vcl_backend_error.
        Action::Abandon | Action::Fail => return Step::Done(mode.abandoned(bereq)),
        Action::Error { status, reason } => {
            return Step::Error {
                status: Status::new(status),
                reason,
                attempted: false,
            }
        }
        _ => return failed(false),
    }
    bereq.log.timestamp(
        &lacquer_shm::packed::stamp::FETCH,
        lacquer_core::time::now(),
    );
    Step::StartFetch
}

/// A backend picked, the request and its body sent, the response head
/// read; then the steps taken on its connection, which it borrows from
/// the backend picked here.
async fn start_fetch<M: FetchMode>(
    f: &Fetcher<'_>,
    bereq: &mut Bereq,
    mode: &mut M,
) -> Step<M::Done> {
    let Some((index, backend)) = pick_backend(f.sh, f.vcl, bereq) else {
        COUNTERS.inc(Counter::fetch_failed);
        log_fetch_error(&mut bereq.log, &FetchError::NoBackend);
        return failed(false);
    };
    let body = match mode.body(bereq).await {
        ControlFlow::Continue(body) => body,
        ControlFlow::Break(done) => return Step::Done(done),
    };
    let t = bereq.timeouts(f.vcl, index, &f.sh.params);
    let limits = f.sh.response_limits();
    let head = bereq.head(&backend.host_header, body);
    // Where another node of the cluster owns the object, it is asked
    // first (then the next on the ring); the origin when none answers.
    // A cache fetch goes so by itself, a pass when VCL chose
    // `cluster.backend()`.
    let routed = mode.through_cluster() || bereq.backend == BackendRef::Cluster;
    let peers = match (&f.sh.cluster, body) {
        (Some(cluster), BereqBody::None) if routed && !bereq.from_peer => {
            let p = &f.sh.params;
            cluster.route(&bereq.hash, p.cluster_rampup(), p.cluster_warmup())
        }
        _ => Vec::new(),
    };
    let from_peer =
        match through_cluster::ask_peers(f.sh, bereq, mode, &peers, &head, &t, &limits).await {
            ControlFlow::Continue(found) => found,
            ControlFlow::Break(done) => return Step::Done(done),
        };
    let peer = from_peer.is_some();
    let (used, answered) = match from_peer {
        Some((peer, conn, resp)) => (peer, Ok((conn, resp))),
        None => match mode
            .exchange(bereq, &backend, &head, body, &t, &limits)
            .await
        {
            ControlFlow::Continue(answered) => (&*backend, answered),
            ControlFlow::Break(done) => return Step::Done(done),
        },
    };
    let (conn, resp) = match answered {
        Ok(x) => x,
        Err(e) => {
            COUNTERS.inc(Counter::fetch_failed);
            log_fetch_error(&mut bereq.log, &e);
            return failed(true);
        }
    };
    let now = lacquer_core::time::now();
    log_exchange(bereq, used, &conn, &head, &resp, now);
    if resp.status == 304 && !mode.asked_conditionally() {
        // A 304 stands for an object the fetch does not have.
        COUNTERS.inc(Counter::fetch_failed);
        let e = FetchError::BadResponse("304 response but not conditional fetch".into());
        log_fetch_error(&mut bereq.log, &e);
        conn.finish(false);
        return failed(true);
    }
    let revalidates = resp.status == 304 && bereq.stale.is_some();
    let got = Got {
        conn,
        resp,
        came: Came {
            backend: index,
            at: now,
            peer,
        },
        t,
    };
    let mut step = match revalidates {
        true => OnConn::CondFetch(got),
        false => OnConn::Response(got),
    };
    f.entering(bereq, Some(Name::StartFetch), step.name());
    loop {
        let from = step.name();
        step = match step {
            OnConn::CondFetch(got) => cond_fetch(f, bereq, mode, got),
            OnConn::Response(got) => response(f, bereq, mode, got),
            OnConn::Body {
                got,
                beresp,
                action,
            } => match mode
                .respond(bereq, beresp, got.resp, got.conn, action, &got.t)
                .await
            {
                Ok(done) => OnConn::Then(Step::Done(done)),
                Err(BodyFailed) => OnConn::Then(failed(true)),
            },
            OnConn::Then(next) => return next,
        };
        match step {
            // Logged as the fetch goes on with it.
            OnConn::Then(_) => debug_assert!(
                from.may_lead_to(step.name()),
                "backend step {from:?} led to {:?}",
                step.name()
            ),
            _ => f.entering(bereq, Some(from), step.name()),
        }
    }
}

/// A 304 for the stale object a conditional fetch revalidates:
/// `vcl_backend_refresh` decides what it makes of the stale object,
/// seeing the 304 as `beresp`.
fn cond_fetch<'b, M: FetchMode>(
    f: &Fetcher<'_>,
    bereq: &mut Bereq,
    mode: &mut M,
    got: Got<'b>,
) -> OnConn<'b, M::Done> {
    let Got {
        conn,
        mut resp,
        came,
        t,
    } = got;
    let mut refresh = beresp_from(f.sh, &resp, &conn, came.backend, came.at, false);
    let action = backend_host::call_method(
        Method::BackendRefresh,
        f.sh,
        f.vcl,
        bereq,
        Some(&mut refresh),
    );
    match action {
        Action::Merge => resp.headers = refresh.headers,
        Action::ObjStale => resp.headers = lacquer_http::Headers::new(),
        other => {
            // A 304 has no body: its connection carries on.
            conn.finish(resp.framing == Framing::None);
            mode.forget_invalidated(bereq);
            return OnConn::Then(unused(f, other, bereq, mode, true));
        }
    }
    OnConn::Response(Got {
        conn,
        resp,
        came,
        t,
    })
}

/// `vcl_backend_response`, with the response made from the head the
/// backend sent; a response it takes goes on to its body.
fn response<'b, M: FetchMode>(
    f: &Fetcher<'_>,
    bereq: &mut Bereq,
    mode: &mut M,
    got: Got<'b>,
) -> OnConn<'b, M::Done> {
    let Got {
        conn,
        resp,
        came,
        t,
    } = got;
    let (mut conn, resp, mut beresp) = match mode.response(f.sh, bereq, conn, resp, came) {
        ControlFlow::Continue(x) => x,
        ControlFlow::Break(done) => return OnConn::Then(Step::Done(done)),
    };
    let action = backend_host::call_method(
        Method::BackendResponse,
        f.sh,
        f.vcl,
        bereq,
        Some(&mut beresp),
    );
    if came.peer {
        through_cluster::keep_copy(f.sh, bereq, &mut beresp);
    }
    if std::mem::take(&mut bereq.response_dropped) {
        // `std.rollback(bereq)` in vcl_backend_response: the response no
        // longer answers the request, so it is dropped with its
        // connection and the fetch goes on as failed.
        conn.forbid_reuse();
        conn.finish(false);
        return OnConn::Then(failed(true));
    }
    if let Action::Deliver | Action::Pass(_) = action {
        // A partial response (206, not 1206) is never run through the
        // filters, as in Varnish: ESI on one fails the fetch, gzip and
        // gunzip are left out.
        if beresp.status.vcl() == 206 {
            if beresp.do_esi {
                let e = FetchError::BadBody("Attempted ESI on partial (206) response".into());
                log_fetch_error(&mut bereq.log, &e);
                conn.finish(false);
                return OnConn::Then(failed(true));
            }
            (beresp.do_gzip, beresp.do_gunzip) = (false, false);
        }
        if bereq.log.active() {
            bereq.log.timestamp(
                &lacquer_shm::packed::stamp::PROCESS,
                lacquer_core::time::now(),
            );
            let list = crate::host::bereq::logged_filter_list(&beresp, &f.sh.params);
            bereq.log.bytes(Tag::Filters, list.as_bytes());
        }
        // A response VCL left saying `Connection: close` ends its
        // connection, as varnishd does.
        if beresp.headers.has_token("connection", "close") {
            conn.forbid_reuse();
        }
        beresp.headers.remove_hop_by_hop();
        let got = Got {
            conn,
            resp,
            came,
            t,
        };
        return OnConn::Body {
            got,
            beresp,
            action,
        };
    }
    // The response is not used: its connection can carry the next
    // request only if it had no body to read.
    let reusable = resp.framing == Framing::None;
    if let Some((fd, _)) = conn.socket().filter(|_| bereq.log.active()) {
        let fate = match reusable {
            true => "recycle",
            false => "close Backend/VCL requested close",
        };
        bereq.log.fmt(
            Tag::BackendClose,
            format_args!("{fd} {} {fate}", conn.backend_name()),
        );
    }
    conn.finish(reusable);
    // Its Beresp time is logged already.
    OnConn::Then(unused(f, action, bereq, mode, false))
}

/// `vcl_backend_error`, with the status and reason the failure gave; what
/// it builds ends the fetch, unless it retries.
fn error<M: FetchMode>(
    f: &Fetcher<'_>,
    bereq: &mut Bereq,
    mode: &mut M,
    status: Status,
    reason: Option<Bytes>,
    attempted: bool,
) -> Step<M::Done> {
    let now = lacquer_core::time::now();
    let mut beresp = Beresp::error(status, reason, now, bereq.backend);
    log_error_head(&mut bereq.log, &beresp, attempted, now);
    let action =
        backend_host::call_method(Method::BackendError, f.sh, f.vcl, bereq, Some(&mut beresp));
    match action {
        Action::Retry if bereq.retries < f.max_retries && mode.may_retry() => return Step::Retry,
        Action::Deliver | Action::Retry => {}
        Action::Abandon => return Step::Done(mode.abandoned(bereq)),
        _ => {
            beresp = Beresp::error(Status::SERVICE_UNAVAILABLE, None, now, bereq.backend);
            beresp.body = synth::page(503, "Backend fetch failed", bereq.xid).into_bytes();
        }
    }
    log_error_tail(bereq, &beresp);
    Step::Done(mode.failed(bereq, beresp))
}

/// What varnishd logs as a fetch turns to `vcl_backend_error`: when the
/// failed exchange ended (`Beresp`, where one was tried) and the error
/// (`Error`), then the synthetic response as it stands before VCL.
fn log_error_head(log: &mut Txn, beresp: &Beresp, attempted: bool, now: f64) {
    use lacquer_shm::packed::stamp;
    if attempted {
        log.timestamp(&stamp::BERESP, now);
    }
    log.timestamp(&stamp::ERROR, now);
    if !log.active() {
        return;
    }
    log.bytes(Tag::BerespProtocol, b"HTTP/1.1");
    log.fmt(Tag::BerespStatus, format_args!("{}", beresp.status));
    log.bytes(Tag::BerespReason, &beresp.reason);
    for h in beresp.headers.iter() {
        let mut line = Vec::with_capacity(h.name.len() + 2 + h.value.len());
        line.extend_from_slice(&h.name);
        line.extend_from_slice(b": ");
        line.extend_from_slice(&h.value);
        log.bytes(Tag::BerespHeader, &line);
    }
}

/// What varnishd logs once `vcl_backend_error` made its response: where
/// it is kept, its length and the fetch's byte counts.
fn log_error_tail(bereq: &mut Bereq, beresp: &Beresp) {
    let a = bereq.acct;
    let log = &mut bereq.log;
    if !log.active() {
        return;
    }
    log.bytes(Tag::Storage, b"malloc Transient");
    vsl::numbers(log, Tag::Length, &[beresp.body.len() as u64]);
    log_bereq_acct(log, &a);
}

/// The `BereqAcct` record: bytes sent and received, heads and bodies.
fn log_bereq_acct(log: &mut Txn, a: &crate::host::req::Acct) {
    vsl::numbers(
        log,
        Tag::BereqAcct,
        &[
            a.hdr_tx,
            a.body_tx,
            a.hdr_tx + a.body_tx,
            a.hdr_rx,
            a.body_rx,
            a.hdr_rx + a.body_rx,
        ],
    );
}

/// The backend a fetch goes to, through directors.
pub(crate) fn pick_backend(
    sh: &Shared,
    vcl: &Loaded,
    bereq: &mut Bereq,
) -> Option<(usize, Arc<lacquer_backend::Backend>)> {
    let mut host = backend_host::BackendHost {
        method: Method::BackendFetch,
        sh,
        vcl,
        bereq,
        beresp: None,
        req: None,
    };
    let target = host.bereq.backend;
    let index = vcl.program.resolve(target, &mut host)?;
    let backend = vcl.backend(index)?;
    if !backend.healthy() {
        backend.count_unhealthy();
        return None;
    }
    Some((index, backend.clone()))
}

/// The response as `vcl_backend_response` first sees it; `uncacheable`
/// for a pass. Its `beresp.storage` is the store it would go to: the
/// next of the `-s` stores, Transient for a pass (VCL may name another;
/// uncacheable and short-lived objects go to Transient whatever it says).
pub(crate) fn beresp_from(
    sh: &Shared,
    resp: &ResponseHead,
    conn: &lacquer_backend::Conn<'_>,
    index: usize,
    now: f64,
    uncacheable: bool,
) -> Beresp {
    let p = &sh.params;
    let defaults = TtlDefaults {
        default_ttl: p.default_ttl(),
        default_grace: p.default_grace(),
        default_keep: p.default_keep(),
        varnish_compat: p.varnish_compat_ttl(),
    };
    // Hop-by-hop fields stay visible to vcl_backend_response (as in
    // Varnish) and are dropped after it, before anything is stored or
    // sent.
    let mut headers = resp.headers.clone();
    headers.collect("cache-control");
    headers.collect("vary");
    Beresp {
        status: Status::new(resp.status),
        reason: if resp.reason.is_empty() {
            Bytes::from_static(lacquer_http::reason_phrase(resp.status).as_bytes())
        } else {
            resp.reason.clone()
        },
        version: resp.version,
        headers,
        timers: rfc_ttl(resp.status, &resp.headers, now, &defaults),
        uncacheable,
        do_stream: true,
        do_esi: false,
        do_gzip: false,
        do_gunzip: false,
        encode: None,
        decode: None,
        filters_set: false,
        was_304: false,
        backend: BackendRef::Backend(index),
        storage: Some(sh.cache.store_for(uncacheable, None).vcl_name()),
        body: Vec::new(),
        t_resp: now,
        tls: conn.tls().map(|t| lacquer_vcl::TlsSession {
            version: t.version,
            // rustls names TLS 1.3 suites TLS13_…; IANA's are TLS_….
            cipher: match t.cipher.strip_prefix("TLS13_") {
                Some(rest) => format!("TLS_{rest}"),
                None => t.cipher.to_string(),
            },
            sni: None,
            alpn: t.alpn.map(str::to_string),
            client_cert_cn: None,
            client_cert: false,
        }),
    }
}

/// Logs a fetch error as a `FetchError` record, and on standard error at
/// most ten a second so that a dead backend under load cannot flood it.
pub(crate) fn log_fetch_error(log: &mut Txn, e: &FetchError) {
    log.fmt(Tag::FetchError, format_args!("{e}"));
}

/// Logs a backend exchange once the response head is in: the
/// connection, the request as sent, the response as received.
pub(crate) fn log_exchange(
    bereq: &mut Bereq,
    backend: &lacquer_backend::Backend,
    conn: &lacquer_backend::Conn<'_>,
    head: &[u8],
    resp: &ResponseHead,
    now: f64,
) {
    bereq.acct.hdr_tx += head.len() as u64;
    bereq.acct.hdr_rx += resp.wire_len as u64;
    let log = &mut bereq.log;
    if !log.active() {
        return;
    }
    log_open(log, backend, conn);
    if conn.sent_at() > 0.0 {
        log.timestamp(&lacquer_shm::packed::stamp::BEREQ, conn.sent_at());
    }
    log.timestamp(&lacquer_shm::packed::stamp::BERESP, now);
    vsl::beresp(log, resp);
}

/// The `Connected` time and the `BackendOpen` record of a connection:
/// descriptor, backend, its address and port, ours, and whether it was
/// opened for this request or taken from the pool.
pub(crate) fn log_open(
    log: &mut Txn,
    backend: &lacquer_backend::Backend,
    conn: &lacquer_backend::Conn<'_>,
) {
    log.timestamp(&lacquer_shm::packed::stamp::CONNECTED, conn.connected_at());
    if let Some((fd, local)) = conn.socket().filter(|_| log.active()) {
        log.fmt(
            Tag::BackendOpen,
            format_args!(
                "{fd} {} {} {} {} {} {}",
                backend.name,
                backend.addr.ip().ip(),
                backend.addr.ip().port(),
                local.ip(),
                local.port(),
                if conn.reused() { "reuse" } else { "connect" }
            ),
        );
    }
}

/// The object `vcl_backend_error` built.
pub(crate) fn error_object(beresp: &Beresp, xid: u64, store: Option<Arc<Store>>) -> Arc<Object> {
    synth::object_from(
        store,
        beresp.status,
        &beresp.reason,
        beresp.headers.clone(),
        Bytes::from(beresp.body.clone()),
        xid,
        beresp.timers,
    )
}

/// Logs the end of a body read from a backend: the connection's fate,
/// the time, the length and the byte counts.
pub(crate) fn log_body_end(
    bereq: &mut Bereq,
    conn: &lacquer_backend::Conn<'_>,
    received: u64,
    length: u64,
    now: f64,
) {
    bereq.acct.body_rx += received;
    let a = bereq.acct;
    let log = &mut bereq.log;
    if !log.active() {
        return;
    }
    if let Some((fd, _)) = conn.socket() {
        let fate = if conn.reusable() { "recycle" } else { "close" };
        log.fmt(
            Tag::BackendClose,
            format_args!("{fd} {} {fate}", conn.backend_name()),
        );
    }
    log.timestamp(&lacquer_shm::packed::stamp::BERESP_BODY, now);
    vsl::numbers(log, Tag::Length, &[length]);
    log_bereq_acct(log, &a);
}
