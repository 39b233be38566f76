//! The one backend state machine of vcl-step(7), for cache fetches and
//! passes alike: `vcl_backend_fetch`, a backend picked (through
//! directors), the request sent with its body framed by construction, the
//! response head read, `vcl_backend_response` — or `vcl_backend_error`
//! when anything fails — and `return (retry)` starting over. Counters, log
//! records, retries and timeouts are the same on both paths because they
//! are this one path. What differs is the [`FetchMode`]'s: where the body
//! comes from and who waits for the response (a cache slot and its
//! waiters, or one client streaming its request body), and what becomes of
//! the response (an object in the cache, or a stream to that client).

use crate::host::backend_host::{self, Bereq, BereqBody, Beresp};
use crate::host::synth;
use crate::host::vcl::Loaded;
use crate::host::vsl;
use crate::Shared;
use bytes::Bytes;
use lacquer_backend::{Backend, Conn, FetchError, Timeouts};
use lacquer_cache::object::Object;
use lacquer_cache::store::Store;
use lacquer_cache::ttl::{rfc_ttl, TtlDefaults};
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_http::{Framing, ResponseHead, ResponseLimits};
use lacquer_shm::{Tag, Txn};
use lacquer_vcl::{Action, BackendRef, Method};
use std::sync::Arc;

/// A body that had to be read whole could not be.
pub(crate) struct BodyFailed;

/// Which backend a response came from (its index in the program) and
/// when.
#[derive(Clone, Copy)]
pub(crate) struct Came {
    pub backend: usize,
    pub at: f64,
}

/// What a fetch does where a cache fetch and a pass differ. A method that
/// returns `Err(done)` ends the fetch with `done`.
pub(crate) trait FetchMode {
    /// What the fetch ends with.
    type Done;

    /// VCL abandoned the fetch (`return (abandon)`).
    fn abandoned(&mut self, bereq: &mut Bereq) -> Self::Done;

    /// Whether `return (retry)` may start over (a request body already
    /// streamed to the backend cannot be sent again).
    fn may_retry(&self) -> bool;

    /// Whether a 304 may answer the request: it asked conditionally.
    fn asked_conditionally(&self) -> bool;

    /// A 304 was not merged: when what it revalidates was invalidated
    /// meanwhile (purged or banned), the fetch forgets it and takes its
    /// conditions off the request, so that a retry fetches whole.
    fn forget_invalidated(&mut self, bereq: &mut Bereq);

    /// Readies the request body once `vcl_backend_fetch` is done: what
    /// follows the head on the wire.
    async fn body(&mut self, bereq: &mut Bereq) -> Result<BereqBody, Self::Done>;

    /// Sends the request head and body, and reads the response head.
    async fn exchange<'b>(
        &mut self,
        bereq: &mut Bereq,
        backend: &'b Backend,
        head: &[u8],
        body: BereqBody,
        t: &Timeouts,
        limits: &ResponseLimits,
    ) -> Result<Result<(Conn<'b>, ResponseHead), FetchError>, Self::Done>;

    /// The response as `vcl_backend_response` sees it, made from the
    /// head the backend sent.
    fn response<'b>(
        &mut self,
        sh: &Shared,
        bereq: &mut Bereq,
        conn: Conn<'b>,
        resp: ResponseHead,
        came: Came,
    ) -> Result<(Conn<'b>, ResponseHead, Beresp), Self::Done>;

    /// `vcl_backend_response` let the response through (`deliver`, or
    /// `pass` with its hit-for-pass lifetime in `action`). `Err` when a
    /// body read whole before anyone saw it (`beresp.do_stream = false`)
    /// failed: the fetch goes on to `vcl_backend_error`.
    async fn respond(
        &mut self,
        bereq: &mut Bereq,
        beresp: Beresp,
        resp: ResponseHead,
        conn: Conn<'_>,
        action: Action,
        t: &Timeouts,
    ) -> Result<Self::Done, BodyFailed>;

    /// What `vcl_backend_error` built, after any retries.
    fn failed(&mut self, bereq: &mut Bereq, beresp: Beresp) -> Self::Done;
}

/// Where a fetch goes when VCL did not take the response it had.
enum Unused<D> {
    /// `return (retry)`, and retries are left: start over.
    Retry,
    /// `abandon` or `fail`: the fetch ends.
    Done(D),
    /// On to `vcl_backend_error` with this status and reason.
    Failed(u16, Option<Bytes>),
}

/// What `action` means for a response VCL did not take.
fn unused<M: FetchMode>(
    sh: &Shared,
    action: Action,
    bereq: &mut Bereq,
    mode: &mut M,
    max_retries: u32,
) -> Unused<M::Done> {
    match action {
        Action::Retry if bereq.retries < max_retries && mode.may_retry() => {
            bereq.retry(sh);
            Unused::Retry
        }
        Action::Abandon | Action::Fail => Unused::Done(mode.abandoned(bereq)),
        Action::Error { status, reason } => Unused::Failed(status, reason),
        _ => Unused::Failed(503, None),
    }
}

/// Runs the backend side of one request to its end.
pub(crate) async fn run_fetch<M: FetchMode>(
    sh: &Shared,
    vcl: &Loaded,
    bereq: &mut Bereq,
    mode: &mut M,
) -> M::Done {
    let max_retries = u32::try_from(sh.params.max_retries()).unwrap_or(u32::MAX);
    if vcl.program.uses_rollback && bereq.original.is_none() {
        bereq.original = Some(Box::new((
            bereq.method.clone(),
            bereq.url.clone(),
            bereq.headers.clone(),
        )));
    }
    'fetch: loop {
        if bereq.retries == 0 {
            bereq.before_fetch_vcl();
        }
        // Whether this attempt went to a backend (and so has a `Beresp`
        // time to log when it fails).
        let mut attempted = false;
        let failure: (u16, Option<Bytes>) = 'attempt: {
            match backend_host::call_method(Method::BackendFetch, sh, vcl, bereq, None) {
                Action::Fetch => {}
                // As in Varnish, a fetch VCL abandons or fails ends at
                // once (the client side answers 503); only `error`
                // goes to vcl_backend_error.
                Action::Abandon | Action::Fail => return mode.abandoned(bereq),
                Action::Error { status, reason } => break 'attempt (status, reason),
                _ => break 'attempt (503, None),
            }
            bereq.log.timestamp(
                &lacquer_shm::packed::stamp::FETCH,
                lacquer_core::time::now(),
            );
            let Some((index, backend)) = pick_backend(sh, vcl, bereq) else {
                COUNTERS.inc(Counter::fetch_failed);
                log_fetch_error(&mut bereq.log, &FetchError::NoBackend);
                break 'attempt (503, None);
            };
            let body = match mode.body(bereq).await {
                Ok(body) => body,
                Err(done) => return done,
            };
            let t = bereq.timeouts(vcl, index, &sh.params);
            let limits = sh.response_limits();
            let head = bereq.head(&backend.host_header, body);
            attempted = true;
            let answered = match mode
                .exchange(bereq, &backend, &head, body, &t, &limits)
                .await
            {
                Ok(answered) => answered,
                Err(done) => return done,
            };
            let (conn, resp) = match answered {
                Ok(x) => x,
                Err(e) => {
                    COUNTERS.inc(Counter::fetch_failed);
                    log_fetch_error(&mut bereq.log, &e);
                    break 'attempt (503, None);
                }
            };
            let now = lacquer_core::time::now();
            log_exchange(bereq, &backend, &conn, &head, &resp, now);
            if resp.status == 304 && !mode.asked_conditionally() {
                // A 304 stands for an object the fetch does not have.
                COUNTERS.inc(Counter::fetch_failed);
                let e = FetchError::BadResponse("304 response but not conditional fetch".into());
                log_fetch_error(&mut bereq.log, &e);
                conn.finish(false);
                break 'attempt (503, None);
            }
            let mut resp = resp;
            if resp.status == 304 && bereq.stale.is_some() {
                // vcl_backend_refresh decides what the 304 makes of the
                // stale object, seeing the 304 as beresp.
                let mut refresh = beresp_from(sh, &resp, &conn, index, now, false);
                let action = backend_host::call_method(
                    Method::BackendRefresh,
                    sh,
                    vcl,
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
                        match unused(sh, other, bereq, mode, max_retries) {
                            Unused::Retry => continue 'fetch,
                            Unused::Done(done) => return done,
                            Unused::Failed(status, reason) => break 'attempt (status, reason),
                        }
                    }
                }
            }
            let (mut conn, resp, mut beresp) = match mode.response(
                sh,
                bereq,
                conn,
                resp,
                Came {
                    backend: index,
                    at: now,
                },
            ) {
                Ok(x) => x,
                Err(done) => return done,
            };
            let action = backend_host::call_method(
                Method::BackendResponse,
                sh,
                vcl,
                bereq,
                Some(&mut beresp),
            );
            if std::mem::take(&mut bereq.response_dropped) {
                // `std.rollback(bereq)` in vcl_backend_response: the
                // response no longer answers the request, so it is dropped
                // with its connection and the fetch goes on as failed.
                conn.forbid_reuse();
                conn.finish(false);
                break 'attempt (503, None);
            }
            if let Action::Deliver | Action::Pass(_) = action {
                // A partial response (206, not 1206) is never run through
                // the filters, as in Varnish: ESI on one fails the fetch,
                // gzip and gunzip are left out.
                if beresp.status == 206 {
                    if beresp.do_esi {
                        let e =
                            FetchError::BadBody("Attempted ESI on partial (206) response".into());
                        log_fetch_error(&mut bereq.log, &e);
                        conn.finish(false);
                        break 'attempt (503, None);
                    }
                    (beresp.do_gzip, beresp.do_gunzip) = (false, false);
                }
                if bereq.log.active() {
                    bereq.log.timestamp(
                        &lacquer_shm::packed::stamp::PROCESS,
                        lacquer_core::time::now(),
                    );
                    let list = crate::host::bereq::logged_filter_list(&beresp, &sh.params);
                    bereq.log.bytes(Tag::Filters, list.as_bytes());
                }
                // A response VCL left saying `Connection: close` ends its
                // connection, as varnishd does.
                if beresp.headers.has_token("connection", "close") {
                    conn.forbid_reuse();
                }
                beresp.headers.remove_hop_by_hop();
                match mode.respond(bereq, beresp, resp, conn, action, &t).await {
                    Ok(done) => return done,
                    Err(BodyFailed) => break 'attempt (503, None),
                }
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
            // Its Beresp time is logged already.
            attempted = false;
            conn.finish(reusable);
            match unused(sh, action, bereq, mode, max_retries) {
                Unused::Retry => continue 'fetch,
                Unused::Done(done) => return done,
                Unused::Failed(status, reason) => break 'attempt (status, reason),
            }
        };
        let now = lacquer_core::time::now();
        let mut beresp = Beresp::error(failure.0, failure.1, now, bereq.backend);
        log_error_head(&mut bereq.log, &beresp, attempted, now);
        let action =
            backend_host::call_method(Method::BackendError, sh, vcl, bereq, Some(&mut beresp));
        match action {
            Action::Retry if bereq.retries < max_retries && mode.may_retry() => {
                bereq.retry(sh);
                continue;
            }
            Action::Deliver | Action::Retry => {}
            Action::Abandon => return mode.abandoned(bereq),
            _ => {
                beresp = Beresp::error(503, None, now, bereq.backend);
                beresp.body = synth::page(503, "Backend fetch failed", bereq.xid).into_bytes();
            }
        }
        log_error_tail(bereq, &beresp);
        return mode.failed(bereq, beresp);
    }
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
        status: resp.status,
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
