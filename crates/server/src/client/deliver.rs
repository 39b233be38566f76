//! Delivery to the client: conditional requests (304), single byte ranges
//! (206/416), HEAD, the per-delivery headers (Age, X-Varnish, Via,
//! Accept-Ranges, framing, Connection), and the body — one gathered write
//! when the object is complete, else streamed as the fetch fills it;
//! inflated for clients that do not take gzip, run as an ESI program
//! (see [`crate::client::esi`]), or handed to an include's parent.

use crate::client::conditional::{open_range, range, Range, Validators, UNKNOWN_TOTAL};
use crate::client::encodings;
use crate::client::esi;
use crate::client::plan::{self, Framed};
use crate::client::resp_log::{self, HeadFields};
use crate::host::coding;
use crate::host::filters::Filters;
use crate::host::head_edits::{remove_header_line, weaken_etag_line};
use crate::host::req::can_gzip;
use crate::host::req::{Acct, Outcome, Req};
use crate::host::resp::{LengthField, Resp};
use crate::host::vcl::Loaded;
use crate::transport::deadline::SendClock;
use crate::transport::io::Client;
use crate::transport::wire::Transport;
use crate::Shared;
use bytes::Bytes;
use lacquer_cache::object::Object;
use lacquer_cache::rendition::Rendition;
use lacquer_cache::Whole;
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::params::Params;
use lacquer_filters::gzip::{is_gzip, Gunzip, INFLATE_SLICE};
use lacquer_http::Headers;
use lacquer_shm::packed::HeadKind;
use lacquer_shm::record::push_u64;
use lacquer_shm::Tag;
use std::io::Write;
use std::sync::Arc;

/// How one delivery goes.
#[derive(Clone, Copy)]
pub(crate) struct Delivery<'a> {
    /// Delivered from the cache (adds the object's id to X-Varnish).
    pub hit: bool,
    /// The connection may be kept after it.
    pub keep: bool,
    /// The program ESI includes run with.
    pub vcl: &'a Arc<Loaded>,
    /// A response vcl_synth made: it goes out with X-Varnish alone of the
    /// delivery headers (no Age, Via or Accept-Ranges), as varnishd's.
    pub synthetic: bool,
    /// When the response was made: its `Process` timestamp, which `Age`
    /// and conditional requests are judged by (varnishd counts `Age`
    /// from the request's last timestamp too).
    pub now: f64,
}

/// Whether the stored body is gzip'd.
pub(crate) fn is_gzipped(headers: &Headers) -> bool {
    headers.get("content-encoding").is_some_and(|v| is_gzip(v))
}

pub(crate) use crate::transport::io::WireBody;

/// The per-delivery fields of a response.
pub(crate) struct DeliveryHeaders {
    pub xid: u64,
    pub obj_xid: Option<u64>,
    pub age: u64,
    pub accept_ranges: bool,
    pub body: WireBody,
    /// The head already says the body's length (the origin's, stored
    /// with the object): no other is written.
    pub length_in_head: bool,
    pub keep: bool,
    pub http10: bool,
    /// VCL set Age, X-Varnish and Via itself (or removed them).
    pub own: bool,
    /// Synthetic: X-Varnish only.
    pub synthetic: bool,
}

/// Appends the per-delivery headers and the blank line.
pub(crate) fn write_delivery_headers(out: &mut Vec<u8>, sh: &Shared, d: &DeliveryHeaders) {
    if !d.own {
        // In varnishd's order: X-Varnish, Age, Via.
        // Numbers written by hand, not through the formatter: this runs
        // for every response.
        out.extend_from_slice(b"X-Varnish: ");
        push_u64(out, d.xid);
        if let Some(o) = d.obj_xid {
            out.push(b' ');
            push_u64(out, o);
        }
        out.extend_from_slice(b"\r\n");
        if !d.synthetic {
            out.extend_from_slice(b"Age: ");
            push_u64(out, d.age);
            out.extend_from_slice(b"\r\nVia: ");
            out.extend_from_slice(sh.via.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
    if d.accept_ranges {
        out.extend_from_slice(b"Accept-Ranges: bytes\r\n");
    }
    match d.body {
        WireBody::Length(_) if d.length_in_head => {}
        WireBody::Length(n) => {
            out.extend_from_slice(b"Content-Length: ");
            push_u64(out, n);
            out.extend_from_slice(b"\r\n");
        }
        WireBody::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
        WireBody::Bodyless | WireBody::Close | WireBody::HeadUnknown => {}
    }
    if !d.keep || d.body == WireBody::Close {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if d.http10 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Delivers an object (cached, being fetched, or synthetic).
pub(crate) async fn object(
    c: &mut Client,
    sh: &Arc<Shared>,
    req: &mut Req,
    obj: &Arc<Object>,
    d: Delivery<'_>,
    resp: Option<&Resp>,
) -> Outcome {
    if c.wire.part_of_page() {
        if std::mem::take(&mut req.resp_logged) {
            // An include's body goes into its page: what it passes
            // through, as varnishd lists it.
            let page_gzip = req.include.as_ref().is_some_and(|i| i.gzip);
            let esi = obj.esi_expected() && req.esi_enabled;
            Filters::only(esi, obj.gzipped() && !page_gzip, false).log(&mut req.log);
        }
        return boxed_in_place!(fragment(c, sh, req, obj, d)).await;
    }
    let plan = Plan::new(sh, req, obj, &d, resp);
    write_head(c, sh, req, obj, &d, resp, &plan);
    let shape = Shape {
        window: plan.window,
        wire: plan.framed.wire,
        bodyless: plan.bodyless,
        is_head: plan.is_head,
        filters: plan.filters,
        encode: plan.encode,
        rendition: plan.rendition.map(|r| &r.body),
    };
    let outcome = send(c, sh, req, obj, shape, d).await;
    req.log
        .timestamp(&lacquer_shm::packed::stamp::RESP, lacquer_core::time::now());
    outcome.unwrap_or(plan.framed.outcome())
}

/// How one object's response goes out: its status, the filters its body
/// goes through, the range of it, the framing, what becomes of the stored
/// length, and whether the connection is kept. Decided once, from the
/// object, the response VCL left and the request; the head and the body
/// follow it.
struct Plan<'o> {
    status: u16,
    /// The client's own conditions hold: a 304.
    cond: bool,
    bodyless: bool,
    filters: Filters,
    /// The body in the client's coding, made before.
    rendition: Option<&'o Rendition>,
    /// Compressed as it goes out (no rendition of it at hand).
    encode: Option<lacquer_filters::coding::Coding>,
    /// The part of the body asked for: start, end and total
    /// ([`UNKNOWN_TOTAL`] while the body is still arriving).
    window: Option<(u64, u64, u64)>,
    /// The range asked for lies past the body (its length): a 416 with
    /// the response's fields, as varnishd answers it, and no body.
    unsatisfiable: Option<u64>,
    /// The framing, and how the connection goes on.
    framed: Framed,
    /// The body goes out transformed (inflated, includes expanded,
    /// decoded): its ETag is weakened.
    weaken_etag: bool,
    /// What the head says of the length, before delivery edits it.
    length_field: LengthField,
    /// The head's length is the one that goes out (reused as it is).
    length_in_head: bool,
    is_head: bool,
}

impl<'o> Plan<'o> {
    fn new(
        sh: &Arc<Shared>,
        req: &Req,
        obj: &'o Arc<Object>,
        d: &Delivery<'_>,
        resp: Option<&Resp>,
    ) -> Plan<'o> {
        let p = &sh.params;
        let ask = plan::Asked::of(req, d.keep, false);
        let is_head = ask.is_head;
        let status = resp.map_or(obj.status(), |r| r.status.wire());
        let answer = plan::answer(&ask, status, || Validators::of(obj, resp), d.now);
        let cond = answer.not_modified;
        let mut bodyless = answer.bodyless;
        let mut filters = Filters::for_delivery(p, req, obj, status);
        if bodyless {
            filters = Filters::only(false, false, false);
        }
        let (esi, gunzip) = (filters.esi, filters.gunzip);
        // The body in the client's coding, made once (else, when the client
        // would get one, the first to ask has it made for later hits).
        let rendition = match filters.encode {
            Some(c) if !esi => obj.rendition(coding::slot(c)),
            _ => None,
        };
        if rendition.is_none() && !bodyless && filters.encode.is_none() {
            if let Some(c) = coding::wanted(p, req, obj, status) {
                encodings::ask(sh, obj, c);
            }
        }
        // Compressed as it goes out (an ESI page, or as VCL asked).
        let encode = filters.encode.filter(|_| rendition.is_none());
        // The length is not the stored one: chunked framing, and only a
        // closed range (`bytes a-b/*`) of what comes out.
        let filtered = esi || gunzip || filters.decode.is_some() || encode.is_some();
        let known = match rendition {
            Some(r) => Some(r.body.len() as u64),
            None if filtered => None,
            None => obj.body().known_len(),
        };
        let mut window = None;
        let mut unsatisfiable = None;
        if filtered && filters.range && status == 200 && !is_head {
            window = open_range(&req.head.headers).map(|(start, end)| (start, end, UNKNOWN_TOTAL));
        } else if !bodyless
            && !filtered
            && rendition.is_none()
            && status == 200
            && p.http_range_support()
        {
            if let Some(total) = known {
                match range(&req.head.headers, obj, total) {
                    Range::Full => {}
                    Range::Partial { start, end, total } => window = Some((start, end, total)),
                    Range::Unsatisfiable { total } => {
                        unsatisfiable = Some(total);
                        bodyless = true;
                    }
                }
            } else if !is_head {
                // Still arriving, its length unknown: a closed range is
                // served as far as the body goes (`bytes a-b/*`), as
                // varnishd does.
                window =
                    open_range(&req.head.headers).map(|(start, end)| (start, end, UNKNOWN_TOTAL));
            }
        }
        // The stored length is the stored body's, but for an object
        // fetched with a HEAD (its body empty) or parsed for ESI (its
        // stored body not the origin's): read then.
        let stored_is_body = || {
            !(obj.esi_expected() || known == Some(0))
                || obj.header("content-length").and_then(|v| {
                    lacquer_http::parse_content_length(lacquer_http::headers::trim(&v))
                }) == known
        };
        // An object fetched with HEAD kept its announced length: a HEAD
        // hears it; anything else gets the (empty) body it has.
        let head_fetched = known == Some(0) && obj.head_has_length() && !stored_is_body();
        let length_field = match resp.filter(|r| r.changed) {
            // A head in another coding has no length of its own (its
            // recoding takes it out).
            _ if filters.encode.is_some() => LengthField::Absent,
            Some(r) => r.length_field(obj),
            None if obj.head_has_length() => LengthField::Stored,
            None => LengthField::Absent,
        };
        // The length as it goes out: none for a 416, and not known to a
        // HEAD of an object fetched with one.
        let length = if unsatisfiable.is_some() {
            Some(0)
        } else if head_fetched && is_head {
            None
        } else if let Some((start, end, _)) = window.filter(|w| w.2 != UNKNOWN_TOTAL) {
            Some(end - start + 1)
        } else {
            known
        };
        let framed = plan::frame(&ask, answer.bodyless, length);
        let wire = framed.wire;
        // The stored length goes out as it is when the whole stored body
        // does (varnishd reuses it so); any other is replaced by the right
        // one.
        let length_in_head = match (length_field, wire) {
            (LengthField::Absent, _) => false,
            (LengthField::Stored, WireBody::Length(n)) => {
                !filtered && window.is_none() && known == Some(n) && stored_is_body()
            }
            (LengthField::Set(v), WireBody::Length(n)) => v == Some(n),
            // A HEAD told what a GET would get, or what VCL said it gets.
            (_, WireBody::HeadUnknown) => true,
            _ => false,
        };
        let transformed = filters.gunzip || filters.esi || filters.decode.is_some();
        Plan {
            weaken_etag: answer.weakens_etag(transformed),
            status,
            cond,
            bodyless,
            filters,
            rendition,
            encode,
            window,
            unsatisfiable,
            framed,
            length_field,
            length_in_head,
            is_head,
        }
    }

    /// The status line in place of the response's own, where delivery
    /// changes the status.
    fn status_line(&self) -> Option<&'static [u8]> {
        if self.cond {
            Some(b"HTTP/1.1 304 Not Modified\r\n")
        } else if self.unsatisfiable.is_some() {
            Some(b"HTTP/1.1 416 Requested Range Not Satisfiable\r\n")
        } else if self.window.is_some() {
            Some(b"HTTP/1.1 206 Partial Content\r\n")
        } else {
            None
        }
    }
}

/// Writes the planned head into `c.wbuf` (the stored one or VCL's, with
/// the edits delivery makes and the delivery fields) and logs it.
fn write_head(
    c: &mut Client,
    sh: &Shared,
    req: &mut Req,
    obj: &Object,
    d: &Delivery<'_>,
    resp: Option<&Resp>,
    plan: &Plan<'_>,
) {
    let filters = plan.filters;
    let edited = resp.filter(|r| r.changed);
    // The object's head as logged before vcl_deliver is still in the
    // buffer: where nothing changed it, it is the head sent.
    let built = req.built_head.take() == Some((obj as *const Object as usize, c.wbuf.len()));
    match (edited, plan.status_line(), plan.rendition) {
        (None, None, None) if built => {}
        (Some(r), line, _) => {
            c.wbuf.clear();
            r.write_head(obj, line, &mut c.wbuf);
        }
        (None, Some(line), _) => {
            c.wbuf.clear();
            c.wbuf.extend_from_slice(line);
            obj.write_fields(&mut c.wbuf);
        }
        (None, None, Some(r)) => {
            c.wbuf.clear();
            c.wbuf.extend_from_slice(&r.head);
        }
        (None, None, None) => {
            c.wbuf.clear();
            obj.write_head(&mut c.wbuf);
        }
    }
    // What the edits below take out of the head, for the log (where the
    // head was logged as VCL saw it): read only where there are edits.
    let edits = filters.encode.is_some()
        || filters.gunzip
        || filters.esi
        || filters.decode.is_some()
        || (plan.length_field != LengthField::Absent && !plan.length_in_head);
    let before = (req.resp_logged && edits).then(|| HeadFields::of(&c.wbuf));
    match filters.encode {
        // A rendition's own head has its coding already.
        Some(_) if plan.rendition.is_some() && edited.is_none() => {}
        Some(coding) => coding::recode_head(&mut c.wbuf, coding),
        None if filters.gunzip || filters.decode.is_some() => {
            remove_header_line(&mut c.wbuf, b"content-encoding");
        }
        None => {}
    }
    if plan.weaken_etag {
        weaken_etag_line(&mut c.wbuf);
    }
    match plan.window {
        Some((start, end, UNKNOWN_TOTAL)) => {
            let _ = write!(c.wbuf, "Content-Range: bytes {start}-{end}/*\r\n");
        }
        Some((start, end, total)) => {
            let _ = write!(c.wbuf, "Content-Range: bytes {start}-{end}/{total}\r\n");
        }
        None => {}
    }
    if let Some(total) = plan.unsatisfiable {
        let _ = write!(c.wbuf, "Content-Range: bytes */{total}\r\n");
    }
    if plan.length_field != LengthField::Absent && !plan.length_in_head {
        remove_header_line(&mut c.wbuf, b"content-length");
    }
    let p = &sh.params;
    let dh = DeliveryHeaders {
        xid: req.xid,
        obj_xid: d.hit.then_some(obj.xid()),
        age: obj.age(d.now),
        // Once, as Varnish forces it: not beside the backend's own.
        accept_ranges: plan.status == 200
            && !d.synthetic
            && filters.encode.is_none()
            && p.http_range_support()
            && match edited {
                // VCL saw it as one of the response's fields (and kept
                // or removed it) once it touched any delivery field.
                Some(r) => !r.own_delivery_headers && !r.has_accept_ranges(obj),
                None => !obj.accept_ranges(),
            },
        body: plan.framed.wire,
        length_in_head: plan.length_in_head,
        keep: plan.framed.keep,
        http10: plan.framed.http10,
        own: resp.is_some_and(|r| r.own_delivery_headers),
        synthetic: d.synthetic,
    };
    write_delivery_headers(&mut c.wbuf, sh, &dh);
    COUNTERS.add(Counter::s_resp_hdrbytes, c.wbuf.len() as u64);
    let logged_filters = Filters {
        range: plan.window.is_some() || plan.unsatisfiable.is_some(),
        ..filters
    };
    let sent = resp_log::Sent {
        wire: plan.framed.wire,
        keep: plan.framed.keep,
        http10: plan.framed.http10,
        protocol: c.wire.resp_protocol(),
    };
    match (std::mem::take(&mut req.resp_logged), d.synthetic) {
        (true, true) => resp_log::synthetic_tail(req, logged_filters, sent),
        (true, false) => {
            let tail = resp_log::Tail {
                before,
                cond: plan.cond,
                window: plan.window,
                unsatisfiable: plan.unsatisfiable,
                filters: logged_filters,
                length_in_head: plan.length_in_head,
                sent,
            };
            resp_log::object_tail(req, &c.wbuf, &tail);
        }
        (false, _) => {
            logged_filters.log(&mut req.log);
            req.log.head(HeadKind::Resp, &c.wbuf);
        }
    }
    req.acct.hdr_tx += c.wbuf.len() as u64;
}

/// What goes on the wire after the head.
struct Shape<'o> {
    window: Option<(u64, u64, u64)>,
    wire: WireBody,
    bodyless: bool,
    is_head: bool,
    /// What the body goes through on the way out.
    filters: Filters,
    /// It is compressed as it goes (no rendition of it was at hand).
    encode: Option<lacquer_filters::coding::Coding>,
    /// The object's rendition in the client's coding, sent instead.
    rendition: Option<&'o Bytes>,
}

/// The send clock of a delivery that began at `start`.
fn send_clock(p: &Params, req: &Req, start: f64) -> SendClock {
    SendClock::since(
        start,
        req.sess.send.or(p.send_timeout()),
        req.sess.idle_send.or(p.idle_send_timeout()),
    )
}

/// Writes the head in `c.wbuf` and the body; `Some` when the connection
/// must close because sending failed.
async fn send(
    c: &mut Client,
    sh: &Arc<Shared>,
    req: &mut Req,
    obj: &Object,
    shape: Shape<'_>,
    d: Delivery<'_>,
) -> Option<Outcome> {
    let Shape {
        window,
        wire,
        bodyless,
        is_head,
        filters,
        encode,
        rendition,
    } = shape;
    let clock = send_clock(&sh.params, req, d.now);
    let send_body = !(bodyless || is_head);
    let transformed = filters.esi || filters.gunzip || filters.decode.is_some() || encode.is_some();
    if let (true, Some(body)) = (send_body, rendition) {
        if let Err(e) = c.send_head(wire, std::slice::from_ref(body), &clock).await {
            return Some(Outcome::from(e));
        }
        req.acct.count_sent(c, body.len() as u64);
    } else if send_body && transformed {
        if let Err(e) = c.send_head(wire, &[], &clock).await {
            return Some(Outcome::from(e));
        }
        // Boxed, as every rare path here: an ESI page's or an inflated
        // body's state would otherwise grow every connection's task.
        c.window = window.map(|(start, end, _)| (start, end - start + 1));
        if let Some(coding) = encode {
            c.encoder = encodings::live_encoder(&sh.params, coding);
        }
        let top = Filters {
            range: false,
            ..filters
        };
        let r = boxed_in_place!(filtered_body(c, sh, req, obj, d, &clock, Some(top))).await;
        c.window = None;
        c.encoder = None;
        if let Err(outcome) = r {
            return Some(outcome);
        }
    } else if !send_body {
        if let Err(e) = c.send_head(wire, &[], &clock).await {
            return Some(Outcome::from(e));
        }
    } else if let (Some(whole), None) = (obj.body().whole(), window) {
        let n = whole.len();
        let sent = match whole {
            Whole::Small(small) => c.send_head_small(wire, small, &clock).await,
            Whole::Chunks(chunks) => c.send_head(wire, chunks, &clock).await,
        };
        if let Err(e) = sent {
            return Some(Outcome::from(e));
        }
        req.acct.count_sent(c, n);
    } else {
        if let Err(e) = c.send_head(wire, &[], &clock).await {
            return Some(Outcome::from(e));
        }
        let (skip, take) = match window {
            Some((start, end, _)) => (start, end - start + 1),
            None => (0, u64::MAX),
        };
        // The last chunk goes with the body's last write.
        if let Err(outcome) = stream(c, obj, skip, take, &clock, &mut req.acct).await {
            return Some(outcome);
        }
    }
    None
}

/// A body that is not sent as stored: an ESI page, or gzip inflated for
/// a client that does not take it.
async fn filtered_body(
    c: &mut Client,
    sh: &Arc<Shared>,
    req: &mut Req,
    obj: &Object,
    d: Delivery<'_>,
    clock: &SendClock,
    top: Option<Filters>,
) -> Result<(), Outcome> {
    // An include of a page that goes out gzip'd hands it deflate data.
    let splice = match (&req.include, top) {
        (Some(ctx), _) => ctx.gzip,
        (None, Some(f)) => obj.gzipped() && !f.gunzip,
        (None, None) => {
            obj.gzipped() && (can_gzip(&req.head.headers) || !sh.params.http_gzip_support())
        }
    };
    let esi = top.map_or(obj.esi_expected() && req.esi_enabled, |f| f.esi);
    if esi {
        wait_complete(obj).await?;
        if let Some(program) = obj.esi::<lacquer_filters::esi::Program>() {
            let out = esi::Out {
                clock,
                vcl: d.vcl,
                gzip: splice,
            };
            esi::deliver_page(c, sh, req, obj, program, out).await?;
            return finish_body(c, clock).await;
        }
    }
    if c.wire.part_of_page() && splice && obj.gzipped() {
        wait_complete(obj).await?;
        let stripped = obj
            .gzip::<lacquer_filters::splice::Scanned>()
            .and_then(|g| {
                let stripped = match obj.body().whole()? {
                    Whole::Chunks(chunks) => lacquer_filters::splice::strip(chunks, g.bits),
                    small => lacquer_filters::splice::strip(&small.to_chunks(), g.bits),
                };
                Some((stripped?, g))
            });
        if let Some((data, g)) = stripped {
            req.acct.count_sent(c, g.len);
            return c
                .send_deflated(data, g.crc, g.len)
                .await
                .map_err(Outcome::from);
        }
    }
    let gunzip = top.map_or(
        obj.gzipped() && (c.wire.part_of_page() || !can_gzip(&req.head.headers)),
        |f| f.gunzip,
    );
    if gunzip {
        stream_gunzip(c, req, obj, clock).await?;
        return finish_body(c, clock).await;
    }
    // An include stored br or zstd is spliced into its page decoded.
    let decode = match top {
        Some(f) => f.decode,
        None if obj.other_coding() => coding::stored(obj).filter(|c| c.is_rendition()),
        None => None,
    };
    if let Some(coding) = decode {
        encodings::stream_decoded(c, req, obj, coding, clock).await?;
        return finish_body(c, clock).await;
    }
    stream(c, obj, 0, u64::MAX, clock, &mut req.acct).await
}

async fn finish_body(c: &mut Client, clock: &SendClock) -> Result<(), Outcome> {
    c.finish_body(clock).await.map_err(Outcome::from)
}

/// Waits for the whole body (an ESI page is parsed once it is in).
async fn wait_complete(obj: &Object) -> Result<(), Outcome> {
    obj.body().keep_whole();
    let mut next = 0;
    let mut pieces = Vec::new();
    loop {
        pieces.clear();
        match obj.body().wait_chunks(next, &mut pieces).await {
            Ok(true) => return Ok(()),
            Ok(false) => next += pieces.len(),
            Err(_) => return Err(Outcome::Close(CloseReason::TxError)),
        }
    }
}

/// Streams a gzip'd body inflated.
async fn stream_gunzip(
    c: &mut Client,
    req: &mut Req,
    obj: &Object,
    clock: &SendClock,
) -> Result<(), Outcome> {
    let mut z = Gunzip::new();
    let mut next = 0;
    let mut pieces: Vec<Bytes> = Vec::new();
    loop {
        pieces.clear();
        let end = obj
            .body()
            .wait_chunks(next, &mut pieces)
            .await
            .map_err(|_| Outcome::Close(CloseReason::TxError))?;
        next += pieces.len();
        let bad = |req: &mut Req, e: lacquer_filters::gzip::GzipError| {
            req.log.fmt(Tag::FetchError, format_args!("{e}"));
            Outcome::Close(CloseReason::TxError)
        };
        // Each piece goes out a bounded slice at a time, as the client
        // takes it: a small object that inflates a thousandfold costs
        // a slice of memory, not its inflated size.
        for piece in &pieces {
            let mut slices = z.slices(piece, INFLATE_SLICE);
            while let Some(slice) = slices.next().map_err(|e| bad(req, e))? {
                let n = c.send_body(&[slice], clock).await.map_err(Outcome::from)?;
                req.acct.count_sent(c, n);
            }
        }
        if end {
            let (input, output) = z.counts();
            let (tail, scanned) = std::mem::take(&mut z).finish().map_err(|e| bad(req, e))?;
            COUNTERS.inc(Counter::n_gunzip);
            let output = output + tail.len() as u64;
            let n = c.send_body(&[tail], clock).await.map_err(Outcome::from)?;
            req.acct.count_sent(c, n);
            let b = scanned.bits;
            req.log.fmt(
                Tag::Gzip,
                format_args!("U D - {input} {output} {} {} {}", b.start, b.last, b.stop),
            );
            return Ok(());
        }
    }
}

/// Delivers to an ESI include's parent: the body alone (inflated, and
/// with its own includes run), or word that it failed.
async fn fragment(
    c: &mut Client,
    sh: &Arc<Shared>,
    req: &mut Req,
    obj: &Arc<Object>,
    d: Delivery<'_>,
) -> Outcome {
    let clock = send_clock(&sh.params, req, d.now);
    let result = filtered_body(c, sh, req, obj, d, &clock, None).await;
    req.log
        .timestamp(&lacquer_shm::packed::stamp::RESP, lacquer_core::time::now());
    match result {
        Ok(()) => Outcome::KeepAlive,
        Err(outcome) => {
            c.send_failed().await;
            outcome
        }
    }
}

/// Streams a body as it arrives, skipping `skip` bytes and sending at most
/// `take`.
async fn stream(
    c: &mut Client,
    obj: &Object,
    skip: u64,
    take: u64,
    clock: &SendClock,
    acct: &mut Acct,
) -> Result<(), Outcome> {
    let mut reader = obj.body().range(skip, take);
    let mut out: Vec<Bytes> = Vec::new();
    loop {
        out.clear();
        let done = match reader.next(&mut out).await {
            Ok(done) => done,
            Err(_) => return Err(Outcome::Close(CloseReason::TxError)),
        };
        let n = c
            .send_body_then(&out, done, clock)
            .await
            .map_err(Outcome::from)?;
        acct.count_sent(c, n);
        if done {
            return Ok(());
        }
    }
}
