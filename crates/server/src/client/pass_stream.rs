//! A pass whose body goes straight through, as the backend sends it:
//! `vcl_deliver` runs on the backend's head, a [`Plan`] decides how the
//! response goes out (a 304 for the client's own conditions, the body
//! inflated for a client that does not take gzip, the framing and the
//! length), the head is written, then the body is relayed as it comes,
//! checked on the way when it is gzip'd, and its trailers after it.

use crate::client::conditional;
use crate::client::deliver::{self, DeliveryHeaders, WireBody};
use crate::client::pass_front::{deliver_or, log_fetched, Backend, Front, Passed};
use crate::client::plan::{self, Framed};
use crate::client::resp_log::{self, HeadFields};
use crate::fetch::backend_steps;
use crate::host::backend_host::{Bereq, Beresp};
use crate::host::client_host::{ClientHost, Resp};
use crate::host::req::{Outcome, Req};
use crate::host::stored_head::{stored_head, HeadLength};
use crate::transport::deadline::SendClock;
use crate::transport::io::Client;
use crate::transport::wire::Transport;
use crate::Shared;
use bytes::Bytes;
use lacquer_backend::{Conn, FetchError};
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::params::Params;
use lacquer_filters::gzip::{Gunzip, INFLATE_SLICE};
use lacquer_filters::splice::Scan;
use lacquer_http::{Framing, ResponseHead, Version};
use lacquer_shm::packed::HeadKind;
use lacquer_vcl::Method;

/// How a passed response goes out, decided once `vcl_deliver` has run.
struct Plan {
    /// The head as it goes out (a 304's status, an inflated body's
    /// fields).
    head: ResponseHead,
    /// Fields the stored head leaves out (the writer adds its own).
    skip: &'static [&'static str],
    /// The client's own conditions hold: a 304, and no body read.
    not_modified: bool,
    bodyless: bool,
    /// Inflated for a client that does not take gzip.
    gunzip: bool,
    /// The framing, and how the connection goes on.
    framed: Framed,
    /// What becomes of the backend's `Content-Length`.
    length: HeadLength,
    /// The head says the body's length (the backend's, in its place).
    length_in_head: bool,
    /// To an ESI include's parent: the body alone.
    fragment: bool,
    /// VCL set `Age`, `Via` or `X-Varnish` itself.
    own: bool,
    /// The fields delivery may change, as VCL left them (for the log).
    before: Option<HeadFields>,
    /// When the response came (its `Date` where it has none).
    t_resp: f64,
}

impl Plan {
    fn new(c: &Client, sh: &Shared, req: &Req, vresp: Resp, from: &From<'_>, keep: bool) -> Plan {
        let is_head = req.is_head();
        let own = vresp.own_delivery_headers;
        let skip: &'static [&'static str] = match (is_head, own) {
            (true, false) => &["age"],
            (true, true) => &[],
            (false, false) => &["content-length", "age"],
            (false, true) => &["content-length"],
        };
        let resp = from.resp;
        let mut head = ResponseHead {
            version: from.version,
            status: vresp.status.wire(),
            reason: vresp.reason,
            headers: vresp.headers.unwrap_or_default(),
            framing: resp.framing,
            keep_alive: resp.keep_alive,
            wire_len: resp.wire_len,
        };
        let before = req
            .resp_logged
            .then(|| HeadFields::of_fields(&head.headers));
        let fragment = c.wire.part_of_page();
        // The client's own conditions hold for a passed 200 too (as in
        // Varnish): it gets a 304, and the backend's body is not read.
        let ask = plan::Asked::of(req, keep, fragment);
        let validators = || conditional::Validators {
            etag: head.headers.get("etag").cloned(),
            last_modified: match head.headers.get("last-modified") {
                Some(v) => lacquer_core::time::parse_http_date(v),
                None => Some(from.t_resp.floor()),
            },
        };
        let answer = plan::answer(&ask, head.status, validators, lacquer_core::time::now());
        if answer.not_modified {
            head.status = 304;
            head.reason = Bytes::from_static(b"Not Modified");
        }
        let bodyless = answer.bodyless;
        // A gzip'd body goes out inflated to a client that does not take
        // gzip (a backend may send it whatever was asked), as from the
        // cache.
        let gunzip = !fragment
            && from.gzip_known
            && !bodyless
            && sh.params.http_gzip_support()
            && deliver::is_gzipped(&head.headers)
            && !crate::host::req::can_gzip(&req.head.headers);
        if gunzip {
            head.headers.remove("content-encoding");
        }
        if answer.weakens_etag(gunzip) {
            crate::host::head_edits::weaken_etag(&mut head.headers);
        }
        // The length as it goes out: an inflated body's is not known.
        let length = match resp.framing {
            Framing::Length(n) if !gunzip => Some(n),
            Framing::None if !is_head => Some(0),
            _ => None,
        };
        let framed = plan::frame(&ask, bodyless, length);
        let wire = framed.wire;
        // The backend's length stays in its place when the body goes out
        // as it came (as varnishd keeps it).
        let (length, length_in_head) = match wire {
            WireBody::Length(n) if !is_head => {
                (HeadLength::Of(n), head.headers.contains("content-length"))
            }
            _ => (HeadLength::AsSkip, false),
        };
        Plan {
            head,
            skip,
            not_modified: answer.not_modified,
            bodyless,
            gunzip,
            framed,
            length,
            length_in_head,
            fragment,
            own,
            before,
            t_resp: from.t_resp,
        }
    }

    /// Whether a body goes to the client.
    fn sends_body(&self) -> bool {
        self.framed.sends_body
    }
}

/// What the backend's response brings besides its fields.
struct From<'a> {
    version: Version,
    t_resp: f64,
    gzip_known: bool,
    resp: &'a ResponseHead,
}

/// Runs `vcl_deliver` on the response head, writes it and streams the
/// body through.
pub(super) async fn stream_response(
    front: Front<'_>,
    beresp: Beresp,
    backend: Backend<'_, '_>,
) -> Passed {
    let Front {
        c,
        sh,
        vcl,
        req,
        conn,
        keep,
    } = front;
    let Backend {
        bereq,
        resp,
        conn: mut be,
        timeouts: t,
    } = backend;
    let from = From {
        version: beresp.version,
        t_resp: beresp.t_resp,
        // VCL that set beresp.filters chose none (a streamed pass has no
        // filters): the body is neither checked nor inflated.
        gzip_known: !beresp.filters_set,
        resp,
    };
    let mut vresp = Resp::with_headers(beresp.status, beresp.reason, beresp.headers);
    vresp.advertise(&conn);
    log_fetched(req);
    // Logged as built, then each change as it is made, as varnishd logs
    // it (an include's response is its page's, and not logged so).
    req.resp_logged = req.log.active() && !c.wire.part_of_page();
    if req.resp_logged {
        log_as_built(sh, req, &vresp, &from, bereq.xid);
    }
    let mut host = ClientHost {
        resp: Some(&mut vresp),
        ..ClientHost::new(Method::Deliver, sh, vcl, req, &conn)
    };
    if let Some(other) = deliver_or(vcl, &mut host) {
        req.resp_logged = false;
        return other;
    }
    let mut plan = Plan::new(c, sh, req, vresp, &from, keep);
    write_head(c, sh, req, bereq, &mut plan, resp);
    let clock = SendClock::new(
        Params::duration(req.sess.send.or(sh.params.send_timeout())),
        Params::duration(req.sess.idle_send.or(sh.params.idle_send_timeout())),
    );
    let mut relay = Relay {
        reader: be.body(if plan.bodyless {
            Framing::None
        } else {
            resp.framing
        }),
        // A gzip'd body is checked on its way through, as varnishd's
        // testgunzip does: one that is corrupt, cut short or followed by
        // junk ends the client's connection rather than reach it
        // whole-looking.
        test: (!plan.fragment
            && from.gzip_known
            && !plan.gunzip
            && plan.sends_body()
            && sh.params.http_gzip_support()
            && deliver::is_gzipped(&plan.head.headers))
        .then(|| Box::new(Scan::new())),
        // An include hands its parent the status and the body alone,
        // inflated.
        inflate: (plan.gunzip || plan.fragment && deliver::is_gzipped(&plan.head.headers))
            .then(Gunzip::new),
        fragment: plan.fragment,
        clock,
        first: None,
        sent: 0,
    };
    if let Err(passed) = relay.head(c, req, bereq, &mut be, &plan, t).await {
        return passed;
    }
    if plan.not_modified {
        // The body the backend is sending is not wanted: its connection
        // cannot carry another request.
        be.finish(false);
        req.log
            .timestamp(&lacquer_shm::packed::stamp::RESP, lacquer_core::time::now());
        return Passed::Done(plan.framed.outcome());
    }
    if let Err(passed) = relay.body(c, req, bereq, &mut be, t).await {
        return passed;
    }
    let body = relay.sent;
    backend_steps::log_body_end(bereq, &be, body, body, lacquer_core::time::now());
    // Passed on as the client took it: never more than a read ahead.
    COUNTERS.add(Counter::transit_buffered, body);
    // Trailers go on with the body they end (gRPC's status is one); an
    // include's page has nowhere to put them.
    let trailers = if plan.fragment {
        Vec::new()
    } else {
        be.take_trailers()
    };
    be.finish(true);
    if c.finish_body_with(&trailers, &relay.clock).await.is_err() {
        return Passed::Done(Outcome::Close(CloseReason::TxError));
    }
    req.log
        .timestamp(&lacquer_shm::packed::stamp::RESP, lacquer_core::time::now());
    Passed::Done(plan.framed.outcome())
}

/// Logs the backend's response as `vcl_deliver` first sees it (as
/// varnishd logs a pass's): its fields as an object would keep them, then
/// the delivery fields.
fn log_as_built(sh: &Shared, req: &mut Req, vresp: &Resp, from: &From<'_>, bereq_xid: u64) {
    let shown = ResponseHead {
        version: from.version,
        status: vresp.status.wire(),
        reason: vresp.reason.clone(),
        headers: vresp.headers.clone().unwrap_or_default(),
        framing: from.resp.framing,
        keep_alive: from.resp.keep_alive,
        wire_len: from.resp.wire_len,
    };
    let mut head = stored_head(&shown, from.t_resp, &["age"], HeadLength::AsSkip);
    let obj_xid = req.passed_from_hit.then_some(bereq_xid);
    resp_log::log_head_as_built(req, sh, &mut head, obj_xid, backend_age(from.resp), false);
}

/// The backend's `Age`, in seconds.
fn backend_age(resp: &ResponseHead) -> u64 {
    resp.headers
        .get("age")
        .map(|v| lacquer_cache::ttl::parse_delta_seconds(lacquer_http::headers::trim(v)) as u64)
        .unwrap_or(0)
}

/// Writes the planned head into `c.wbuf` and logs it (an include's page
/// gets no head).
fn write_head(
    c: &mut Client,
    sh: &Shared,
    req: &mut Req,
    bereq: &Bereq,
    plan: &mut Plan,
    resp: &ResponseHead,
) {
    let block = stored_head(&plan.head, plan.t_resp, plan.skip, plan.length);
    c.wbuf.clear();
    if plan.fragment {
        return;
    }
    c.wbuf.extend_from_slice(&block);
    deliver::write_delivery_headers(
        &mut c.wbuf,
        sh,
        &DeliveryHeaders {
            xid: req.xid,
            obj_xid: req.passed_from_hit.then_some(bereq.xid),
            age: backend_age(resp),
            accept_ranges: false,
            body: plan.framed.wire,
            length_in_head: plan.length_in_head,
            keep: plan.framed.keep,
            http10: plan.framed.http10,
            own: plan.own,
            synthetic: false,
        },
    );
    COUNTERS.add(Counter::s_resp_hdrbytes, c.wbuf.len() as u64);
    let filters = crate::host::filters::Filters::only(false, plan.gunzip, false);
    match plan.before.take() {
        Some(before) if std::mem::take(&mut req.resp_logged) => {
            let tail = resp_log::Tail {
                before: Some(before),
                cond: plan.not_modified,
                window: None,
                unsatisfiable: None,
                filters,
                length_in_head: plan.length_in_head,
                sent: resp_log::Sent {
                    wire: plan.framed.wire,
                    keep: plan.framed.keep,
                    http10: plan.framed.http10,
                    protocol: c.wire.resp_protocol(),
                },
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

/// The body on its way from the backend to the client.
struct Relay {
    reader: lacquer_backend::BodyReader,
    /// Checks a gzip'd body on its way.
    test: Option<Box<Scan>>,
    /// Inflates it (for a client that does not take gzip, or an
    /// include's page).
    inflate: Option<Gunzip>,
    fragment: bool,
    clock: SendClock,
    /// A read made before the head went out, still to relay.
    first: Option<Result<Option<Bytes>, FetchError>>,
    /// Body bytes read from the backend.
    sent: u64,
}

impl Relay {
    /// Sends the head, with the body bytes that came with the backend's
    /// head in the same write.
    async fn head(
        &mut self,
        c: &mut Client,
        req: &mut Req,
        bereq: &mut Bereq,
        be: &mut Conn<'_>,
        plan: &Plan,
        t: &lacquer_backend::Timeouts,
    ) -> Result<(), Passed> {
        let failed = || Passed::Done(Outcome::Close(CloseReason::TxError));
        if !plan.fragment && !plan.gunzip && plan.sends_body() && be.body_buffered() {
            self.first = Some(be.read_body(&mut self.reader, t).await);
        }
        match self.first.take() {
            Some(Ok(Some(piece))) => {
                self.check(bereq, &piece)?;
                let n = piece.len() as u64;
                let sent = c
                    .send_head_and_piece(plan.framed.wire, piece, &self.clock)
                    .await
                    .map_err(|_| failed())?;
                COUNTERS.add(Counter::s_resp_bodybytes, sent);
                req.acct.body_tx += sent;
                self.sent = n;
            }
            other => {
                self.first = other;
                c.send_head(plan.framed.wire, &[], &self.clock)
                    .await
                    .map_err(|_| failed())?;
            }
        }
        Ok(())
    }

    /// Relays the rest of the body, to its end.
    async fn body(
        &mut self,
        c: &mut Client,
        req: &mut Req,
        bereq: &mut Bereq,
        be: &mut Conn<'_>,
        t: &lacquer_backend::Timeouts,
    ) -> Result<(), Passed> {
        loop {
            let next = match self.first.take() {
                Some(next) => next,
                None => be.read_body(&mut self.reader, t).await,
            };
            match next {
                Ok(Some(piece)) => {
                    self.sent += piece.len() as u64;
                    self.check(bereq, &piece)?;
                    self.piece(c, req, bereq, piece).await?;
                }
                Ok(None) => return self.end(c, req, bereq).await,
                Err(e) => {
                    COUNTERS.inc(Counter::fetch_failed);
                    backend_steps::log_fetch_error(&mut bereq.log, &e);
                    c.send_failed().await;
                    return Err(Passed::Done(Outcome::Close(CloseReason::TxError)));
                }
            }
        }
    }

    /// Checks a piece of a gzip'd body.
    fn check(&mut self, bereq: &mut Bereq, piece: &[u8]) -> Result<(), Passed> {
        if let Some(Err(e)) = self.test.as_mut().map(|s| s.push(piece)) {
            backend_steps::log_fetch_error(&mut bereq.log, &FetchError::BadBody(e.0));
            return Err(Passed::Done(Outcome::Close(CloseReason::TxError)));
        }
        Ok(())
    }

    /// Sends one piece, inflated a bounded slice at a time where it is.
    async fn piece(
        &mut self,
        c: &mut Client,
        req: &mut Req,
        bereq: &mut Bereq,
        piece: Bytes,
    ) -> Result<(), Passed> {
        let (clock, fragment) = (&self.clock, self.fragment);
        let mut slices = self
            .inflate
            .as_mut()
            .map(|z| z.slices(&piece, INFLATE_SLICE));
        let mut whole = Some(piece.clone());
        loop {
            let out = match slices.as_mut().map(|s| s.next()) {
                None => whole.take(),
                Some(Ok(slice)) => slice,
                Some(Err(e)) => {
                    backend_steps::log_fetch_error(&mut bereq.log, &FetchError::BadBody(e.0));
                    c.send_failed().await;
                    return Err(Passed::Done(Outcome::Close(CloseReason::TxError)));
                }
            };
            let Some(out) = out else {
                return Ok(());
            };
            send(c, req, clock, fragment, out).await?;
        }
    }

    /// The body's end: the gzip check's verdict and the inflater's tail.
    async fn end(
        &mut self,
        c: &mut Client,
        req: &mut Req,
        bereq: &mut Bereq,
    ) -> Result<(), Passed> {
        if let Some(Err(e)) = self.test.take().map(|s| s.finish()) {
            backend_steps::log_fetch_error(&mut bereq.log, &FetchError::BadBody(e.0));
            return Err(Passed::Done(Outcome::Close(CloseReason::TxError)));
        }
        if let Some(z) = self.inflate.take() {
            match z.finish() {
                Ok((tail, _)) => send(c, req, &self.clock, self.fragment, tail).await?,
                Err(e) => {
                    let e = FetchError::BadBody(e.0);
                    backend_steps::log_fetch_error(&mut bereq.log, &e);
                    c.send_failed().await;
                    return Err(Passed::Done(Outcome::Close(CloseReason::TxError)));
                }
            }
        }
        Ok(())
    }
}

/// Sends bytes of a body, counting them (an include's are its page's to
/// count).
async fn send(
    c: &mut Client,
    req: &mut Req,
    clock: &SendClock,
    fragment: bool,
    out: Bytes,
) -> Result<(), Passed> {
    let Ok(n) = c.send_body(&[out], clock).await else {
        return Err(Passed::Done(Outcome::Close(CloseReason::TxError)));
    };
    if !fragment {
        COUNTERS.add(Counter::s_resp_bodybytes, n);
    }
    req.acct.body_tx += n;
    Ok(())
}
