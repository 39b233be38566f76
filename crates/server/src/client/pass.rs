//! Pass, as a [`FetchMode`] of the one backend state machine
//! (`backend_steps`): the request goes to the backend as the client sent
//! it (less hop-by-hop headers), its body streamed through, and the
//! response, after `vcl_backend_response`, streams back to this one client
//! without touching the cache, after `vcl_deliver` has seen its head. A
//! response VCL asked to filter (`do_esi`, `do_gzip`, `do_gunzip`) goes
//! through a private object instead, filled and delivered as a miss's
//! would be. A successful unsafe request invalidates what it changed
//! (`invalidate.rs`). The wait for the backend watches the client: one
//! that leaves abandons the pass. Failures go through `vcl_backend_error`,
//! and the error object goes back to the client state machine for
//! `vcl_deliver`.

use crate::client::conditional;
use crate::client::deliver::{self, Delivery, DeliveryHeaders, WireBody};
use crate::client::interim;
use crate::client::resp_log;
use crate::fetch::backend_steps::{self, BodyFailed, FetchMode};
use crate::fetch::fill;
use crate::host::backend_host::{Bereq, BereqBody, Beresp};
use crate::host::client_host::{ClientHost, Resp};
use crate::host::req::{ConnInfo, Outcome, Req};
use crate::host::stored_head::{stored_head, HeadLength};
use crate::host::synth;
use crate::host::vcl::Loaded;
use crate::transport::deadline::SendClock;
use crate::transport::io::{BodyError, Client};
use crate::Shared;
use bytes::Bytes;
use lacquer_backend::{Conn, FetchError};
use lacquer_cache::object::Object;
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::params::Params;
use lacquer_filters::gzip::{Gunzip, INFLATE_SLICE};
use lacquer_http::{Framing, ResponseHead, Version};
use lacquer_shm::packed::HeadKind;
use lacquer_shm::Tag;
use lacquer_vcl::{Action, Method};
use std::sync::Arc;

/// How a pass ended, and what the client state machine does next.
pub(crate) enum Passed {
    /// The response was streamed to the client.
    Done(Outcome),
    /// No response came through: deliver this error object.
    Object(Arc<Object>),
    /// `vcl_deliver` asked for these instead.
    Synth(u16, Option<Bytes>),
    Restart,
    Fail,
}

/// Passes one request to the backend and its response to the client.
pub(crate) async fn pass(
    c: &mut Client,
    sh: &Arc<Shared>,
    vcl: &Arc<Loaded>,
    req: &mut Req,
    conn: ConnInfo,
) -> Passed {
    COUNTERS.inc(Counter::s_fetch);
    let mut headers = req.backend_headers();
    headers.remove("expect");
    let mut bereq = Bereq::from_req(
        sh,
        vcl,
        req,
        headers,
        conn.clone(),
        &lacquer_shm::record::txn::PASS,
    );
    bereq.version = Version::Http11;
    bereq.uncacheable = true;
    bereq.is_hitpass = req.is_hitpass;
    let mut mode = PassFetch {
        c,
        sh,
        vcl,
        keep: req.head.keep_alive(),
        req,
        conn,
    };
    backend_steps::run_fetch(sh, vcl, &mut bereq, &mut mode).await
}

/// A pass: one client's request, its body streamed to the backend, and
/// the response streamed back to it (or through a private object when VCL
/// asked for filters).
struct PassFetch<'a> {
    c: &'a mut Client,
    sh: &'a Arc<Shared>,
    vcl: &'a Arc<Loaded>,
    req: &'a mut Req,
    conn: ConnInfo,
    keep: bool,
}

impl FetchMode for PassFetch<'_> {
    type Done = Passed;

    /// The client side answers with vcl_synth's 503, as Varnish does.
    fn abandoned(&mut self, _bereq: &mut Bereq) -> Passed {
        Passed::Synth(503, None)
    }

    fn may_retry(&self) -> bool {
        self.req.body.is_done()
    }

    /// A pass carries the client's own conditions.
    fn asked_conditionally(&self) -> bool {
        true
    }

    /// A pass revalidates nothing of its own.
    fn forget_invalidated(&mut self, _bereq: &mut Bereq) {}

    async fn body(&mut self, bereq: &mut Bereq) -> Result<BereqBody, Passed> {
        if let Some(body) = &bereq.cached_body {
            // Read whole already: sent from memory, framed by its length.
            return Ok(match bereq.body_unset || body.is_empty() {
                true => BereqBody::None,
                false => BereqBody::Length(body.len() as u64),
            });
        }
        if bereq.body_unset && !self.req.body.is_done() {
            // VCL dropped the body: read it off the connection and send
            // none.
            if let Err(reason) = self.req.consume_body(self.c, self.sh).await {
                return Err(Passed::Done(Outcome::Close(reason)));
            }
        }
        // The framing comes from the body still to be sent, not from the
        // header list the client or VCL left.
        Ok(match self.req.body.is_done() {
            true => BereqBody::None,
            false => BereqBody::of(self.req.head.framing),
        })
    }

    async fn exchange<'b>(
        &mut self,
        bereq: &mut Bereq,
        backend: &'b lacquer_backend::Backend,
        head: &[u8],
        body: BereqBody,
        t: &lacquer_backend::Timeouts,
        limits: &lacquer_http::ResponseLimits,
    ) -> Result<Result<(Conn<'b>, ResponseHead), FetchError>, Passed> {
        let (c, sh, req) = (&mut *self.c, self.sh, &mut *self.req);
        let in_memory = bereq
            .cached_body
            .clone()
            .filter(|_| body != BereqBody::None);
        if body == BereqBody::None || in_memory.is_some() {
            // Nobody else wants this response: a client that leaves ends
            // the wait for it (and frees the connection slot).
            let bytes = in_memory.unwrap_or_default();
            let ask = lacquer_backend::Ask {
                is_head: req.is_head(),
                extra_chance: bereq.retry_connect,
                interim: None,
            };
            let exchange = backend.exchange(head, &bytes, t, limits, ask);
            let half_closed = sh.params.answer_half_closed();
            let Some(result) = c.watching(exchange, half_closed).await else {
                bereq.log.fmt(
                    Tag::FetchError,
                    format_args!("abandoned: the client has gone"),
                );
                return Err(Passed::Done(Outcome::Close(CloseReason::RemClose)));
            };
            return Ok(result);
        }
        if req.head.expect_continue {
            let idle = Params::duration(sh.params.idle_send_timeout());
            if c.write_small(b"HTTP/1.1 100 Continue\r\n\r\n", idle)
                .await
                .is_err()
            {
                return Err(Passed::Done(Outcome::Close(CloseReason::TxError)));
            }
        }
        let chunked = body == BereqBody::Chunked;
        send_with_body(c, sh, req, backend, head, t, chunked)
            .await
            .map_err(Passed::Done)
    }

    fn response<'b>(
        &mut self,
        sh: &Shared,
        _bereq: &mut Bereq,
        conn: Conn<'b>,
        resp: ResponseHead,
        index: usize,
        now: f64,
    ) -> Result<(Conn<'b>, ResponseHead, Beresp), Passed> {
        let beresp = backend_steps::beresp_from(sh, &resp, &conn, index, now, true);
        Ok((conn, resp, beresp))
    }

    async fn respond(
        &mut self,
        bereq: &mut Bereq,
        beresp: Beresp,
        resp: ResponseHead,
        mut be: Conn<'_>,
        _action: Action,
        t: &lacquer_backend::Timeouts,
    ) -> Result<Passed, BodyFailed> {
        let (c, sh, vcl, req, conn, keep) = (
            &mut *self.c,
            self.sh,
            self.vcl,
            &mut *self.req,
            self.conn.clone(),
            self.keep,
        );
        // Interim responses (103 Early Hints …) reach an HTTP/1.1 client
        // before the final one; nothing keeps them.
        let heads = be.take_interim();
        if interim::wanted(c, req) && !interim::send(c, sh, &heads).await {
            return Ok(Passed::Done(Outcome::Close(CloseReason::TxError)));
        }
        crate::client::invalidate::after_unsafe(
            sh,
            vcl,
            req,
            conn.clone(),
            beresp.status,
            &beresp.headers,
        );
        // (A HEAD has no body to wait for: its length is the backend's.)
        // An ESI page is parsed whole before it goes out anyway, so a
        // broken one is an error page rather than a cut one.
        let whole_first = (!beresp.do_stream || beresp.do_esi) && !req.is_head();
        let body = if beresp.do_esi || beresp.do_gzip || beresp.do_gunzip || whole_first {
            // Filtered, or read whole before delivery (`do_stream =
            // false`): through a private object, as a miss would be.
            let transient = sh.cache.transient().clone();
            match fill::begin(sh, bereq, beresp, &resp, None, transient) {
                Some(filling) => PassBody::Private(filling),
                None => return Ok(Passed::Object(synth::fetch_failed(req.xid))),
            }
        } else {
            // Straight through, yet logged as varnishd logs a pass: kept
            // in transient storage, its body streamed.
            if bereq.log.active() {
                bereq.log.bytes(Tag::Storage, b"malloc Transient");
                fill::log_fetch_body(bereq, resp.framing, true);
            }
            PassBody::Stream(beresp)
        };
        let backend = Backend {
            bereq,
            resp: &resp,
            conn: be,
            timeouts: t,
        };
        Ok(match body {
            PassBody::Private(filling) => {
                deliver_private(c, sh, vcl, req, conn, filling, backend, keep, whole_first).await?
            }
            PassBody::Stream(beresp) => {
                stream_response(c, sh, vcl, req, conn, beresp, backend, keep).await
            }
        })
    }

    fn failed(&mut self, bereq: &mut Bereq, beresp: Beresp) -> Passed {
        Passed::Object(backend_steps::error_object(&beresp, bereq.xid, None))
    }
}

/// How a passed response's body reaches the client.
enum PassBody<'c> {
    /// Through the filters, into a private object.
    Private(fill::Filling<'c>),
    /// Straight through, as the backend sends it.
    Stream(Beresp),
}

/// The backend side of a response being passed.
struct Backend<'a, 'b> {
    bereq: &'a mut Bereq,
    resp: &'a ResponseHead,
    conn: Conn<'b>,
    timeouts: &'a lacquer_backend::Timeouts,
}

/// The response is in: the client side's `Fetch` time, as for a miss.
fn log_fetched(req: &mut Req) {
    req.log.timestamp(
        &lacquer_shm::packed::stamp::FETCH,
        lacquer_core::time::now(),
    );
}

/// Runs `vcl_deliver`: None to deliver, else what it asked for instead.
fn deliver_or(vcl: &Loaded, host: &mut ClientHost<'_>) -> Option<Passed> {
    crate::host::vsl::vcl_call(&mut host.req.log, Method::Deliver);
    let action = lacquer_vcl::run(&vcl.program, Method::Deliver, host);
    crate::host::vsl::vcl_return(&mut host.req.log, &action);
    match action {
        Action::Deliver => {
            host.req.log.timestamp(
                &lacquer_shm::packed::stamp::PROCESS,
                lacquer_core::time::now(),
            );
            None
        }
        Action::Synth { status, reason } => Some(Passed::Synth(status, reason)),
        Action::Restart => Some(Passed::Restart),
        _ => {
            COUNTERS.inc(Counter::vcl_fail);
            Some(Passed::Fail)
        }
    }
}

/// Runs `vcl_deliver` on a private object and delivers it as its body
/// comes in through the filters VCL chose; with `whole_first`
/// (`beresp.do_stream = false`) the body is read whole first, so it goes
/// out with its length, and a body that fails goes to vcl_backend_error
/// (which may retry), as in Varnish.
#[allow(clippy::too_many_arguments)]
async fn deliver_private(
    c: &mut Client,
    sh: &Arc<Shared>,
    vcl: &Arc<Loaded>,
    req: &mut Req,
    conn: ConnInfo,
    filling: fill::Filling<'_>,
    backend: Backend<'_, '_>,
    keep: bool,
    whole_first: bool,
) -> Result<Passed, BodyFailed> {
    let obj = filling.obj().clone();
    let mut pending = Some((filling, backend));
    if whole_first {
        if let Some((filling, b)) = pending.take() {
            fill::fill(sh, b.bereq, filling, b.conn, b.timeouts, true).await;
        }
        if !obj.body().is_complete() {
            return Err(BodyFailed);
        }
    }
    let mut resp = Resp::for_object(&obj, false);
    log_fetched(req);
    req.resp_logged = req.log.active() && !c.is_fragment();
    if req.resp_logged {
        resp_log::log_as_built(req, sh, &obj, &resp, lacquer_core::time::now());
    }
    let mut host = ClientHost {
        obj: Some(&obj),
        resp: Some(&mut resp),
        ..ClientHost::new(Method::Deliver, sh, vcl, req, &conn)
    };
    if let Some(other) = deliver_or(vcl, &mut host) {
        req.resp_logged = false;
        return Ok(other);
    }
    let d = Delivery {
        hit: false,
        keep,
        vcl,
        synthetic: false,
        now: lacquer_core::time::now(),
    };
    let delivery = deliver::object(c, sh, req, &obj, d, Some(&resp));
    Ok(Passed::Done(match pending {
        Some((filling, b)) => {
            let filling = fill::fill(sh, b.bereq, filling, b.conn, b.timeouts, true);
            fill::alongside(delivery, filling).await
        }
        None => delivery.await,
    }))
}

/// The backend's `Age`, in seconds.
fn backend_age(resp: &ResponseHead) -> u64 {
    resp.headers
        .get("age")
        .map(|v| lacquer_cache::ttl::parse_delta_seconds(lacquer_http::headers::trim(v)) as u64)
        .unwrap_or(0)
}

/// Runs `vcl_deliver` on the response head, writes it and streams the
/// body through.
#[allow(clippy::too_many_arguments)]
async fn stream_response(
    c: &mut Client,
    sh: &Arc<Shared>,
    vcl: &Loaded,
    req: &mut Req,
    conn: ConnInfo,
    beresp: Beresp,
    backend: Backend<'_, '_>,
    keep: bool,
) -> Passed {
    let Backend {
        bereq,
        resp,
        conn: mut be,
        timeouts: t,
    } = backend;
    // VCL that set beresp.filters chose none (a streamed pass has no
    // filters): the body is neither checked nor inflated.
    let gzip_known = !beresp.filters_set;
    let mut vresp = Resp::with_headers(beresp.status, beresp.reason, beresp.headers);
    log_fetched(req);
    // Logged as built, then each change as it is made, as varnishd logs
    // it (an include's response is its page's, and not logged so).
    req.resp_logged = req.log.active() && !c.is_fragment();
    if req.resp_logged {
        let shown = ResponseHead {
            version: beresp.version,
            status: vresp.status % 1000,
            reason: vresp.reason.clone(),
            headers: vresp.headers.clone().unwrap_or_default(),
            framing: resp.framing,
            keep_alive: resp.keep_alive,
            wire_len: resp.wire_len,
        };
        let head = stored_head(&shown, beresp.t_resp, &["age"], HeadLength::AsSkip);
        let obj_xid = req.passed_from_hit.then_some(bereq.xid);
        resp_log::log_head_as_built(req, sh, head, obj_xid, backend_age(resp), false);
    }
    let mut host = ClientHost {
        resp: Some(&mut vresp),
        ..ClientHost::new(Method::Deliver, sh, vcl, req, &conn)
    };
    if let Some(other) = deliver_or(vcl, &mut host) {
        req.resp_logged = false;
        return other;
    }
    let is_head = req.is_head();
    let now = beresp.t_resp;
    let skip: &[&str] = match (is_head, vresp.own_delivery_headers) {
        (true, false) => &["age"],
        (true, true) => &[],
        (false, false) => &["content-length", "age"],
        (false, true) => &["content-length"],
    };
    let status = vresp.status % 1000;
    let mut amended = ResponseHead {
        version: beresp.version,
        status,
        reason: vresp.reason,
        headers: vresp.headers.unwrap_or_default(),
        framing: resp.framing,
        keep_alive: resp.keep_alive,
        wire_len: resp.wire_len,
    };
    let before = req
        .resp_logged
        .then(|| resp_log::HeadFields::of_fields(&amended.headers));
    // The client's own conditions hold for a passed 200 too (as in
    // Varnish): it gets a 304, and the backend's body is not read.
    let not_modified =
        !c.is_fragment() && status == 200 && (is_head || req.head.method_is("GET")) && {
            let h = &amended.headers;
            let validators = || conditional::Validators {
                etag: h.get("etag").cloned(),
                last_modified: match h.get("last-modified") {
                    Some(v) => lacquer_core::time::parse_http_date(v),
                    None => Some(now.floor()),
                },
            };
            conditional::not_modified(&req.head.headers, validators, lacquer_core::time::now())
        };
    if not_modified {
        amended.status = 304;
        amended.reason = Bytes::from_static(b"Not Modified");
    }
    let status = amended.status;
    let bodyless = status == 204 || status == 304 || status < 200;
    let fragment = c.is_fragment();
    // A gzip'd body goes out inflated to a client that does not take gzip
    // (a backend may send it whatever was asked), as from the cache.
    let gunzip = !fragment
        && gzip_known
        && !bodyless
        && sh.params.http_gzip_support()
        && crate::client::deliver::is_gzipped(&amended.headers)
        && !crate::host::req::can_gzip(&req.head.headers);
    if gunzip {
        amended.headers.remove("content-encoding");
        if let Some(etag) = amended
            .headers
            .get("etag")
            .filter(|e| !e.starts_with(b"W/"))
        {
            let weak = [&b"W/"[..], etag].concat();
            amended.headers.set("ETag", weak);
        }
    }
    let http10 = req.head.version == Version::Http10;
    let wire = match resp.framing {
        _ if bodyless => WireBody::Bodyless,
        Framing::Length(_) if gunzip && is_head => WireBody::HeadUnknown,
        Framing::Length(_) if gunzip && http10 => WireBody::Close,
        Framing::Length(_) if gunzip => WireBody::Chunked,
        Framing::Length(n) => WireBody::Length(n),
        Framing::None if is_head => WireBody::HeadUnknown,
        Framing::None => WireBody::Length(0),
        Framing::Chunked | Framing::UntilClose if http10 => WireBody::Close,
        Framing::Chunked | Framing::UntilClose => WireBody::Chunked,
    };
    // The backend's length stays in its place when the body goes out as
    // it came (as varnishd keeps it).
    let (length, length_in_head) = match wire {
        WireBody::Length(n) if !is_head => (
            HeadLength::Of(n),
            amended.headers.contains("content-length"),
        ),
        _ => (HeadLength::AsSkip, false),
    };
    let block = stored_head(&amended, now, skip, length);
    let age = backend_age(resp);
    let keep = keep && wire != WireBody::Close;
    // An include hands its parent the status and the body alone, inflated.
    let mut inflate = (gunzip || fragment && crate::client::deliver::is_gzipped(&amended.headers))
        .then(Gunzip::new);
    c.wbuf.clear();
    c.wbuf.extend_from_slice(&block);
    deliver::write_delivery_headers(
        &mut c.wbuf,
        sh,
        &DeliveryHeaders {
            xid: req.xid,
            obj_xid: req.passed_from_hit.then_some(bereq.xid),
            age,
            accept_ranges: false,
            body: wire,
            length_in_head,
            keep,
            http10,
            own: vresp.own_delivery_headers,
            synthetic: false,
        },
    );
    if fragment {
        c.wbuf.clear();
    } else {
        COUNTERS.add(Counter::s_resp_hdrbytes, c.wbuf.len() as u64);
        let filters = crate::host::filters::Filters::only(false, gunzip, false);
        match before {
            Some(before) if std::mem::take(&mut req.resp_logged) => {
                let tail = resp_log::Tail {
                    before,
                    cond: not_modified,
                    window: None,
                    unsatisfiable: None,
                    filters,
                    length_in_head,
                    wire,
                    h2: c.is_h2(),
                };
                resp_log::object_tail(req, &c.wbuf, &tail);
            }
            _ => {
                filters.log(&mut req.log);
                req.log.head(HeadKind::Resp, &c.wbuf);
            }
        }
        req.acct.hdr_tx += c.wbuf.len() as u64;
    }
    let clock = SendClock::new(
        Params::duration(req.sess.send.or(sh.params.send_timeout())),
        Params::duration(req.sess.idle_send.or(sh.params.idle_send_timeout())),
    );
    let mut reader = be.body(if bodyless {
        Framing::None
    } else {
        resp.framing
    });
    // A gzip'd body is checked on its way through, as varnishd's
    // testgunzip does: one that is corrupt, cut short or followed by junk
    // ends the client's connection rather than reach it whole-looking.
    let sends_body = !bodyless && !is_head && !not_modified;
    let mut test = (!fragment
        && gzip_known
        && !gunzip
        && sends_body
        && sh.params.http_gzip_support()
        && crate::client::deliver::is_gzipped(&amended.headers))
    .then(|| Box::new(lacquer_filters::splice::Scan::new()));
    // Body bytes that came with the response head go out with the head,
    // in one write.
    let mut first = None;
    if !fragment && !gunzip && sends_body && be.body_buffered() {
        first = Some(be.read_body(&mut reader, t).await);
    }
    // The backend body bytes read so far, once the head went out.
    let head_sent = match first.take() {
        Some(Ok(Some(piece))) => {
            if let Some(Err(e)) = test.as_mut().map(|s| s.push(&piece)) {
                backend_steps::log_fetch_error(&mut bereq.log, &FetchError::BadBody(e.0));
                return Passed::Done(Outcome::Close(CloseReason::TxError));
            }
            let n = piece.len() as u64;
            let sent = c.send_head_and_piece(wire, piece, &clock).await;
            if let Ok(n) = sent {
                COUNTERS.add(Counter::s_resp_bodybytes, n);
                req.acct.body_tx += n;
            }
            sent.is_ok().then_some(n)
        }
        other => {
            first = other;
            let sent = c.send_head(wire, &[], &clock).await;
            sent.is_ok().then_some(0)
        }
    };
    let Some(mut body) = head_sent else {
        return Passed::Done(Outcome::Close(CloseReason::TxError));
    };
    if not_modified {
        // The body the backend is sending is not wanted: its connection
        // cannot carry another request.
        be.finish(false);
        req.log
            .timestamp(&lacquer_shm::packed::stamp::RESP, lacquer_core::time::now());
        return Passed::Done(match keep {
            true => Outcome::KeepAlive,
            false if http10 => Outcome::Close(CloseReason::ReqHttp10),
            false => Outcome::Close(CloseReason::ReqClose),
        });
    }
    loop {
        let next = match first.take() {
            Some(next) => next,
            None => be.read_body(&mut reader, t).await,
        };
        match next {
            Ok(Some(piece)) => {
                body += piece.len() as u64;
                if let Some(Err(e)) = test.as_mut().map(|s| s.push(&piece)) {
                    backend_steps::log_fetch_error(&mut bereq.log, &FetchError::BadBody(e.0));
                    return Passed::Done(Outcome::Close(CloseReason::TxError));
                }
                // Inflated (for an include) a bounded slice at a time.
                let mut slices = inflate.as_mut().map(|z| z.slices(&piece, INFLATE_SLICE));
                let mut whole = Some(piece.clone());
                loop {
                    let out = match slices.as_mut().map(|s| s.next()) {
                        None => whole.take(),
                        Some(Ok(slice)) => slice,
                        Some(Err(e)) => {
                            backend_steps::log_fetch_error(
                                &mut bereq.log,
                                &FetchError::BadBody(e.0),
                            );
                            c.send_failed().await;
                            return Passed::Done(Outcome::Close(CloseReason::TxError));
                        }
                    };
                    let Some(out) = out else { break };
                    let Ok(n) = c.send_body(&[out], &clock).await else {
                        return Passed::Done(Outcome::Close(CloseReason::TxError));
                    };
                    if !fragment {
                        COUNTERS.add(Counter::s_resp_bodybytes, n);
                    }
                    req.acct.body_tx += n;
                }
            }
            Ok(None) => {
                if let Some(Err(e)) = test.take().map(|s| s.finish()) {
                    backend_steps::log_fetch_error(&mut bereq.log, &FetchError::BadBody(e.0));
                    return Passed::Done(Outcome::Close(CloseReason::TxError));
                }
                if let Some(z) = inflate.take() {
                    match z.finish() {
                        Ok((tail, _)) => {
                            let Ok(n) = c.send_body(&[tail], &clock).await else {
                                return Passed::Done(Outcome::Close(CloseReason::TxError));
                            };
                            if !fragment {
                                COUNTERS.add(Counter::s_resp_bodybytes, n);
                            }
                            req.acct.body_tx += n;
                        }
                        Err(e) => {
                            let e = FetchError::BadBody(e.0);
                            backend_steps::log_fetch_error(&mut bereq.log, &e);
                            c.send_failed().await;
                            return Passed::Done(Outcome::Close(CloseReason::TxError));
                        }
                    }
                }
                break;
            }
            Err(e) => {
                COUNTERS.inc(Counter::fetch_failed);
                backend_steps::log_fetch_error(&mut bereq.log, &e);
                c.send_failed().await;
                return Passed::Done(Outcome::Close(CloseReason::TxError));
            }
        }
    }
    backend_steps::log_body_end(bereq, &be, body, body, lacquer_core::time::now());
    // Passed on as the client took it: never more than a read ahead.
    COUNTERS.add(Counter::transit_buffered, body);
    // Trailers go on with the body they end (gRPC's status is one); an
    // include's page has nowhere to put them.
    let trailers = if fragment {
        Vec::new()
    } else {
        be.take_trailers()
    };
    be.finish(true);
    if c.finish_body_with(&trailers, &clock).await.is_err() {
        return Passed::Done(Outcome::Close(CloseReason::TxError));
    }
    req.log
        .timestamp(&lacquer_shm::packed::stamp::RESP, lacquer_core::time::now());
    Passed::Done(match (keep, wire) {
        (true, _) => Outcome::KeepAlive,
        (false, WireBody::Close) => Outcome::Close(CloseReason::TxEof),
        (false, _) if http10 => Outcome::Close(CloseReason::ReqHttp10),
        _ => Outcome::Close(CloseReason::ReqClose),
    })
}

/// Sends a request head and streams the client's body after it, then
/// reads the response head. No retry: the body cannot be replayed.
#[allow(clippy::too_many_arguments)]
async fn send_with_body<'b>(
    c: &mut Client,
    sh: &Shared,
    req: &mut Req,
    backend: &'b lacquer_backend::Backend,
    head: &[u8],
    t: &lacquer_backend::Timeouts,
    chunked: bool,
) -> Result<Result<(Conn<'b>, ResponseHead), FetchError>, Outcome> {
    let limit = Params::duration(sh.params.timeout_idle());
    // An HTTP/2 stream's body may go on its own beside the response, when
    // the backend speaks HTTP/2 too (gRPC streams both ways). Its framing
    // is made here, so nothing is read ahead for it.
    let duplex = c.rbuf.is_empty() && c.h2().is_some_and(|h2| h2.body_untouched());
    // A chunked body's first piece (and any body's that has begun to
    // arrive) is read before a backend connection is taken: chunk framing
    // broken from the start never reaches the backend, and a client slow
    // to start one holds no backend connection. (Otherwise the head goes
    // first, as varnishd sends it.)
    let mut first = if duplex || (!chunked && c.rbuf.is_empty() && !c.has_unread()) {
        None
    } else {
        match req.body.next(c, limit).await {
            Err(BodyError::Malformed) => {
                c.refuse_body(sh).await;
                return Err(Outcome::Close(CloseReason::RxBad));
            }
            Err(BodyError::Gone) => return Err(Outcome::Close(CloseReason::RxBody)),
            ok => Some(ok),
        }
    };
    let mut conn = match backend.connect(t, true).await {
        Ok(conn) => conn,
        Err(e) => return Ok(Err(e)),
    };
    if let Err(e) = conn.write_head(head, t).await {
        return Ok(Err(e));
    }
    // Where varnishd keeps the body it passes on.
    req.log.bytes(Tag::Storage, b"malloc Transient");
    if duplex && chunked && conn.multiplexed() {
        if let Err(e) = conn.flush(t).await {
            return Ok(Err(e));
        }
        if let Some(body) = c.h2().and_then(|h2| h2.take_body()) {
            match conn.duplex(body, limit) {
                Ok(()) => return Ok(read_head(sh, req, conn, t).await),
                Err(body) => {
                    if let Some(h2) = c.h2() {
                        h2.restore_body(body);
                    }
                }
            }
        }
    }
    let mut frame = Vec::with_capacity(16);
    loop {
        let next = match first.take() {
            Some(next) => next,
            None => req.body.next(c, limit).await,
        };
        match next {
            Ok(Some(piece)) => {
                COUNTERS.add(Counter::s_req_bodybytes, piece.len() as u64);
                let r = if chunked {
                    frame.clear();
                    lacquer_http::chunked::chunk_header(piece.len(), &mut frame);
                    frame.extend_from_slice(&piece);
                    frame.extend_from_slice(b"\r\n");
                    conn.write(&frame, t).await
                } else {
                    conn.write(&piece, t).await
                };
                if let Err(e) = r {
                    return Ok(Err(e));
                }
            }
            Ok(None) => break,
            Err(BodyError::Malformed) => {
                c.refuse_body(sh).await;
                return Err(Outcome::Close(CloseReason::RxBad));
            }
            Err(BodyError::Gone) => return Err(Outcome::Close(CloseReason::RxBody)),
        }
    }
    if chunked {
        if let Err(e) = conn.write(lacquer_http::chunked::LAST_CHUNK, t).await {
            return Ok(Err(e));
        }
    }
    req.log.timestamp(
        &lacquer_shm::packed::stamp::REQ_BODY,
        lacquer_core::time::now(),
    );
    Ok(read_head(sh, req, conn, t).await)
}

/// Reads the response head of a request sent.
async fn read_head<'b>(
    sh: &Shared,
    req: &Req,
    mut conn: Conn<'b>,
    t: &lacquer_backend::Timeouts,
) -> Result<(Conn<'b>, ResponseHead), FetchError> {
    let limits = sh.response_limits();
    match conn.read_head(t, &limits, req.is_head(), None).await {
        Ok(resp) => Ok((conn, resp)),
        Err(e) => Err(e),
    }
}
