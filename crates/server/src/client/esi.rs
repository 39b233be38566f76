//! ESI delivery: runs an object's ESI program, sending its verbatim
//! ranges and, for each include, the body of a sub-request that goes
//! through the whole client state machine (`vcl_recv` with
//! `req.esi_level` > 0, lookup, pass, synth…) on its own task. Up to
//! `esi_parallel` includes run at once, each into a bounded channel,
//! while the page is still written in document order; the includes
//! fetched ahead of the one a page waits for share one budget of
//! `esi_parallel` across the whole tree of nested pages. When the
//! client goes away — a write fails, or the socket closes while the page
//! waits on an include — the includes still running are cancelled at
//! once, instead of being carried to the end for nobody. An include loop
//! ends at `max_esi_depth`, as in Varnish.

use crate::host::req::{forwarded_for, IncludeCtx, Outcome, Req, TopReq};
use crate::host::vcl::Loaded;
use crate::transport::deadline::SendClock;
use crate::transport::io::{Client, Piece};
use crate::transport::wire::Transport;
use crate::Shared;
use bytes::{Bytes, BytesMut};
use lacquer_cache::object::Object;
use lacquer_cache::Whole;
use lacquer_core::close::CloseReason;
use lacquer_core::ids::next_vxid;
use lacquer_core::params::Feature;
use lacquer_filters::esi::{Include, Program, Segment};
use lacquer_filters::gzip::INFLATE_SLICE;
use lacquer_filters::splice::{PieceSlices, Splicer, GZIP_HEADER};
use lacquer_http::{Headers, RequestHead};
use lacquer_shm::Tag;
use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// How many pieces an include may have ready before it waits for the
/// page to take them.
const FRAGMENT_QUEUE: usize = 16;

/// An include on its task, cancelled when dropped.
struct Running {
    task: tokio::task::JoinHandle<()>,
    rx: mpsc::Receiver<Piece>,
    /// Its place in the program.
    segment: usize,
    onerror_continue: bool,
    /// Its place in the budget of includes fetched ahead, if it has one.
    _ahead: Option<OwnedSemaphorePermit>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Where the page's bytes go and how.
pub(crate) struct Out<'a> {
    pub clock: &'a SendClock,
    pub vcl: &'a Arc<Loaded>,
    /// The page goes out as gzip: one spliced stream on the client's
    /// socket, deflate pieces to an include's parent.
    pub gzip: bool,
}

/// Writes the page: plain, or as one gzip stream spliced together.
struct Sink {
    /// Set when this page writes the gzip stream itself (at the top).
    splicer: Option<Splicer>,
}

impl Sink {
    async fn plain(
        &mut self,
        c: &mut Client,
        req: &mut Req,
        out: &Out<'_>,
        b: Bytes,
    ) -> Result<(), Outcome> {
        let pieces = match &mut self.splicer {
            Some(s) => {
                let mut framed = Vec::with_capacity(2);
                s.stored(&b, &mut framed);
                framed
            }
            None => vec![b],
        };
        send(c, req, out, pieces).await
    }

    async fn deflated(
        &mut self,
        c: &mut Client,
        req: &mut Req,
        out: &Out<'_>,
        data: Vec<Bytes>,
        crc: u32,
        len: u64,
    ) -> Result<(), Outcome> {
        match &mut self.splicer {
            Some(s) => {
                s.deflated(crc, len);
                send(c, req, out, data).await
            }
            None if out.gzip => c.send_deflated(data, crc, len).await.map_err(Outcome::from),
            None => {
                // Plain output wanted after all: inflate the piece, a
                // slice at a time however far it inflates.
                let joined = data.concat();
                let mut slices = PieceSlices::new(&joined, INFLATE_SLICE);
                loop {
                    let slice = slices.next().map_err(|e| {
                        req.log.fmt(Tag::Error, format_args!("ESI: {e}"));
                        Outcome::Close(CloseReason::TxError)
                    })?;
                    let Some(text) = slice else { return Ok(()) };
                    send(c, req, out, vec![Bytes::from(text)]).await?;
                }
            }
        }
    }
}

async fn send(c: &mut Client, req: &mut Req, out: &Out<'_>, b: Vec<Bytes>) -> Result<(), Outcome> {
    let n = c.send_body(&b, out.clock).await.map_err(Outcome::from)?;
    req.acct.count_sent(c, n);
    Ok(())
}

/// Delivers the body of `obj` (complete) by its ESI program.
pub(crate) async fn deliver_page(
    c: &mut Client,
    sh: &Arc<Shared>,
    req: &mut Req,
    obj: &Object,
    program: &Program,
    out: Out<'_>,
) -> Result<(), Outcome> {
    let body = whole_body(obj);
    let p = &sh.params;
    let level = req.esi_level();
    let parallel = p.esi_parallel().max(1) as usize;
    let onerror = p.has(Feature::esi_include_onerror);
    // Includes that will run, in order: (segment, include).
    let mut todo: VecDeque<(usize, &Include)> = VecDeque::new();
    for (i, seg) in program.segments.iter().enumerate() {
        let Segment::Include(inc) = seg else { continue };
        if u64::from(level) >= p.max_esi_depth() {
            req.log.fmt(
                Tag::VCL_Error,
                format_args!(
                    "ESI depth limit reached (param max_esi_depth = {})",
                    p.max_esi_depth()
                ),
            );
            continue;
        }
        todo.push_back((i, inc));
    }
    // What includes start from, made only for a page that has some.
    let (ctx, base) = if todo.is_empty() {
        (None, Headers::new())
    } else {
        let base = initial_headers(c, sh, req);
        let mut ctx = child_ctx(c, &out, req, level + 1, parallel);
        ctx.dropped_encoding = base.get("accept-encoding").cloned();
        (Some(Arc::new(ctx)), base)
    };
    let mut sink = Sink {
        splicer: (out.gzip && !c.wire.part_of_page()).then(Splicer::new),
    };
    if sink.splicer.is_some() {
        send(c, req, &out, vec![Bytes::from_static(&GZIP_HEADER)]).await?;
    }
    // A page stored gzip'd has each verbatim segment compressed apart.
    let mut deflated = program.deflated.iter();
    let mut running: VecDeque<Running> = VecDeque::new();
    for (i, seg) in program.segments.iter().enumerate() {
        while running.len() < parallel {
            let Some(ctx) = &ctx else { break };
            let Some(&(segment, inc)) = todo.front() else {
                break;
            };
            // The next include the page waits for always starts (so nested
            // pages cannot starve each other); those after it start ahead
            // only within the top request's budget.
            let ahead = ctx.ahead.clone().try_acquire_owned().ok();
            if ahead.is_none() && !running.is_empty() {
                break;
            }
            todo.pop_front();
            let page = Page {
                base: &base,
                ctx,
                out: &out,
            };
            if let Some(r) = start_include(c, sh, req, &page, (segment, inc), ahead) {
                running.push_back(r);
            }
        }
        match seg {
            Segment::Verbatim(r) => match deflated.next() {
                Some(d) => {
                    let data = vec![body.slice(d.range.clone())];
                    sink.deflated(c, req, &out, data, d.crc, d.len).await?;
                }
                None => sink.plain(c, req, &out, body.slice(r.clone())).await?,
            },
            Segment::Include(_) => {
                if running.front().is_none_or(|r| r.segment != i) {
                    // Skipped: too deep, or a URL that is no URL.
                    continue;
                }
                let mut inc = running.pop_front().expect("checked above");
                while let Some(piece) = next_piece(c, &mut inc.rx).await? {
                    match piece {
                        Piece::Failed if onerror && !inc.onerror_continue => {
                            req.log.bytes(
                                Tag::VCL_Error,
                                b"ESI include failed: the page is aborted (onerror)",
                            );
                            return Err(Outcome::Close(CloseReason::TxError));
                        }
                        Piece::Failed => {}
                        Piece::Data(b) => sink.plain(c, req, &out, b).await?,
                        Piece::Deflated { data, crc, len } => {
                            sink.deflated(c, req, &out, data, crc, len).await?
                        }
                    }
                }
            }
        }
    }
    if let Some(s) = sink.splicer.take() {
        send(c, req, &out, vec![Bytes::copy_from_slice(&s.finish())]).await?;
    }
    Ok(())
}

/// The body in one piece (an ESI body is stored as one).
fn whole_body(obj: &Object) -> Bytes {
    match obj.body().whole() {
        Some(Whole::Chunks([one])) => one.clone(),
        Some(whole) => {
            let mut all = BytesMut::with_capacity(whole.len() as usize);
            for piece in whole.pieces() {
                all.extend_from_slice(piece);
            }
            all.freeze()
        }
        None => Bytes::new(),
    }
}

/// The context the includes of `req` get.
fn child_ctx(c: &Client, out: &Out<'_>, req: &Req, level: u32, parallel: usize) -> IncludeCtx {
    let top = match &req.include {
        Some(ctx) => ctx.top.clone(),
        None => Arc::new(TopReq {
            method: req.head.method.clone(),
            url: req.head.url.clone(),
            version: req.head.version,
            headers: req.head.headers.clone(),
            t_req: req.t_req,
            socket: out
                .vcl
                .program
                .uses_client_socket
                .then(|| c.duplicate_socket())
                .flatten(),
        }),
    };
    let ahead = match &req.include {
        Some(ctx) => ctx.ahead.clone(),
        None => Arc::new(Semaphore::new(parallel)),
    };
    IncludeCtx {
        level,
        top,
        gzip: out.gzip,
        dropped_encoding: None,
        ahead,
    }
}

/// The headers includes start from: the request's as it arrived (before
/// VCL changed them), with `X-Forwarded-For` as the daemon set it.
fn initial_headers(c: &Client, sh: &Shared, req: &Req) -> Headers {
    if let Some(h) = &req.initial {
        return h.clone();
    }
    let mut raw = BytesMut::from(&req.head.raw[..]);
    let mut headers = match lacquer_http::parse_request(&mut raw, &sh.request_limits()) {
        Ok(Some(head)) => head.headers,
        _ => req.head.headers.clone(),
    };
    let xff = forwarded_for(headers.get("x-forwarded-for"), &c.addrs.client_ip);
    headers.set("X-Forwarded-For", xff);
    headers
}

/// The head of an include's request, parsed as a client's would be.
fn include_head(sh: &Shared, base: &Headers, inc: &Include) -> Option<RequestHead> {
    let mut raw = Vec::with_capacity(256);
    raw.extend_from_slice(b"GET ");
    raw.extend_from_slice(&inc.url);
    raw.extend_from_slice(b" HTTP/1.1\r\n");
    for h in base.iter() {
        let name = std::str::from_utf8(&h.name).unwrap_or("");
        // A plain, whole GET, as a cache fetch is; and its encoding is
        // the page's business.
        let skip = crate::host::backend_host::NOT_FOR_CACHE_FETCH
            .iter()
            .any(|n| n.eq_ignore_ascii_case(name))
            || name.eq_ignore_ascii_case("accept-encoding")
            || (inc.host.is_some() && name.eq_ignore_ascii_case("host"));
        if !skip {
            raw.extend_from_slice(&h.name);
            raw.extend_from_slice(b": ");
            raw.extend_from_slice(&h.value);
            raw.extend_from_slice(b"\r\n");
        }
    }
    // The page's request had a body; its include has none, and says so
    // (a backend that reads the method's body must not wait for one).
    if base.get("content-length").is_some() || base.get("transfer-encoding").is_some() {
        raw.extend_from_slice(b"Content-Length: 0\r\n");
    }
    if let Some(host) = &inc.host {
        raw.extend_from_slice(b"Host: ");
        raw.extend_from_slice(host);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"\r\n");
    let mut buf = BytesMut::from(&raw[..]);
    lacquer_http::parse_request(&mut buf, &sh.request_limits())
        .ok()
        .flatten()
}

/// What a page's includes start from.
struct Page<'p, 'o> {
    /// The page request's fields as it arrived.
    base: &'p Headers,
    ctx: &'p Arc<IncludeCtx>,
    out: &'p Out<'o>,
}

/// Starts an include (the page's `segment`th piece) on its own task.
fn start_include(
    c: &Client,
    sh: &Arc<Shared>,
    req: &mut Req,
    page: &Page<'_, '_>,
    (segment, inc): (usize, &Include),
    ahead: Option<OwnedSemaphorePermit>,
) -> Option<Running> {
    let Page { base, ctx, out } = *page;
    let Some(mut head) = include_head(sh, base, inc) else {
        req.log.fmt(
            Tag::VCL_Error,
            format_args!(
                "ESI include of an invalid URL skipped: {}",
                String::from_utf8_lossy(&inc.url)
            ),
        );
        return None;
    };
    // The includes of a page that came over HTTP/2 or HTTP/3 see its
    // protocol.
    if matches!(
        ctx.top.version,
        lacquer_http::Version::Http2 | lacquer_http::Version::Http3
    ) {
        head.version = ctx.top.version;
    }
    let (tx, rx) = mpsc::channel(FRAGMENT_QUEUE);
    let socket = ctx.top.socket.as_ref().map(AsRawFd::as_raw_fd);
    let fc = Client::fragment(tx, c, socket);
    let xid = next_vxid();
    req.log.link(
        &lacquer_shm::record::txn::REQ,
        xid,
        &lacquer_shm::record::txn::ESI,
    );
    let task = tokio::spawn((sh.includes)(
        fc,
        sh.clone(),
        out.vcl.clone(),
        head,
        ctx.clone(),
        xid,
        req.xid,
    ));
    Some(Running {
        task,
        rx,
        segment,
        onerror_continue: inc.onerror_continue,
        _ahead: ahead,
    })
}

/// The next piece of an include, watching the client's socket meanwhile
/// so that a client that leaves while the page waits is noticed at once.
/// The page is already being written: the end of the client's stream now
/// is taken as its leaving whatever `answer_half_closed` says (a client
/// that half-closes does so after its request, and includes multiply
/// what a client that gave up would cost the backends).
async fn next_piece(
    c: &mut Client,
    rx: &mut mpsc::Receiver<Piece>,
) -> Result<Option<Piece>, Outcome> {
    c.watching(rx.recv(), false)
        .await
        .ok_or(Outcome::Close(CloseReason::RemClose))
}
