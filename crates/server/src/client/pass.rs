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

use crate::client::deliver::{self, Delivery};
use crate::client::interim;
pub(crate) use crate::client::pass_front::Passed;
use crate::client::pass_front::{deliver_or, log_fetched, Backend, Front};
use crate::client::pass_stream;
use crate::client::resp_log;
use crate::fetch::backend_steps;
use crate::fetch::fill;
use crate::fetch::mode::{BodyFailed, FetchMode};
use crate::host::backend_host::{Bereq, BereqBody, Beresp};
use crate::host::client_host::{ClientHost, Resp};
use crate::host::req::{ConnInfo, Outcome, Req};
use crate::host::synth;
use crate::host::vcl::Loaded;
use crate::transport::io::{BodyError, Client};
use crate::transport::wire::Transport;
use crate::Shared;
use lacquer_backend::{Conn, FetchError};
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::params::Params;
use lacquer_http::{ResponseHead, Version};
use lacquer_shm::Tag;
use lacquer_vcl::{Action, Method};
use std::ops::ControlFlow;
use std::sync::Arc;

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

    async fn body(&mut self, bereq: &mut Bereq) -> ControlFlow<Passed, BereqBody> {
        if let Some(body) = &bereq.cached_body {
            // Read whole already: sent from memory, framed by its length.
            return ControlFlow::Continue(match bereq.body_unset || body.is_empty() {
                true => BereqBody::None,
                false => BereqBody::Length(body.len() as u64),
            });
        }
        if bereq.body_unset && !self.req.body.is_done() {
            // VCL dropped the body: read it off the connection and send
            // none.
            if let Err(reason) = self.req.consume_body(self.c, self.sh).await {
                return ControlFlow::Break(Passed::Done(Outcome::Close(reason)));
            }
        }
        // The framing comes from the body still to be sent, not from the
        // header list the client or VCL left.
        ControlFlow::Continue(match self.req.body.is_done() {
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
    ) -> ControlFlow<Passed, Result<(Conn<'b>, ResponseHead), FetchError>> {
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
                return ControlFlow::Break(Passed::Done(Outcome::Close(CloseReason::RemClose)));
            };
            return ControlFlow::Continue(result);
        }
        if req.head.expect_continue {
            let idle = Params::duration(sh.params.idle_send_timeout());
            if c.write_small(b"HTTP/1.1 100 Continue\r\n\r\n", idle)
                .await
                .is_err()
            {
                return ControlFlow::Break(Passed::Done(Outcome::Close(CloseReason::TxError)));
            }
        }
        let chunked = body == BereqBody::Chunked;
        match send_with_body(c, sh, req, backend, head, t, chunked).await {
            Ok(answered) => ControlFlow::Continue(answered),
            Err(outcome) => ControlFlow::Break(Passed::Done(outcome)),
        }
    }

    fn response<'b>(
        &mut self,
        sh: &Shared,
        _bereq: &mut Bereq,
        conn: Conn<'b>,
        resp: ResponseHead,
        came: backend_steps::Came,
    ) -> ControlFlow<Passed, (Conn<'b>, ResponseHead, Beresp)> {
        let beresp = backend_steps::beresp_from(sh, &resp, &conn, came.backend, came.at, true);
        ControlFlow::Continue((conn, resp, beresp))
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
            beresp.status.vcl(),
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
        let front = Front {
            c,
            sh,
            vcl,
            req,
            conn,
            keep,
        };
        Ok(match body {
            PassBody::Private(filling) => {
                deliver_private(front, filling, backend, whole_first).await?
            }
            PassBody::Stream(beresp) => pass_stream::stream_response(front, beresp, backend).await,
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

/// Runs `vcl_deliver` on a private object and delivers it as its body
/// comes in through the filters VCL chose; with `whole_first`
/// (`beresp.do_stream = false`) the body is read whole first, so it goes
/// out with its length, and a body that fails goes to vcl_backend_error
/// (which may retry), as in Varnish.
async fn deliver_private(
    front: Front<'_>,
    filling: fill::Filling<'_>,
    backend: Backend<'_, '_>,
    whole_first: bool,
) -> Result<Passed, BodyFailed> {
    let Front {
        c,
        sh,
        vcl,
        req,
        conn,
        keep,
    } = front;
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
    resp.advertise(&conn);
    log_fetched(req);
    req.resp_logged = req.log.active() && !c.wire.part_of_page();
    if req.resp_logged {
        resp_log::log_as_built(req, sh, &obj, &resp, lacquer_core::time::now(), &mut c.wbuf);
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

/// Sends a request head and streams the client's body after it, then
/// reads the response head. No retry: the body cannot be replayed.
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
    // An HTTP/2 or HTTP/3 stream's body may go on its own beside the
    // response, when the backend speaks HTTP/2 (gRPC streams both ways).
    // Its framing is made here, so nothing is read ahead for it.
    let duplex = c.rbuf.is_empty() && c.wire.body_untouched();
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
        if let Some(body) = c.wire.take_body() {
            match conn.duplex(body, limit) {
                Ok(()) => return Ok(read_head(sh, req, conn, t).await),
                Err(body) => {
                    c.wire.restore_body(body);
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
