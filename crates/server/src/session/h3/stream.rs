//! One HTTP/3 request stream, on a task of its own: its HEADERS frame
//! (which must come first, within `timeout_idle`) read into HTTP/1.1's
//! shape and checked (`qpack::decode_request`), then the same client
//! steps as HTTP/1 and HTTP/2 (parsed with the same limits, `req.proto`
//! "HTTP/3.0"). A malformed request has its stream reset both ways with
//! H3_MESSAGE_ERROR (RFC 9114 §4.1.2) and never reaches the steps; one
//! whose fields are past the header list's limit is answered 431. A
//! request that arrived in 0-RTT early data is answered at once only
//! when it is safe (GET, HEAD, OPTIONS without a body): another waits
//! for the handshake to complete, since early data can be replayed, and
//! is answered 425 if it never does.

use crate::client::request;
use crate::transport::h3::frames::{self, code, Frame, FrameReader};
use crate::transport::h3::qpack::{self, Malformed};
use crate::transport::h3::{close_for, varint_code, Framing, H3Stream};
use crate::transport::io::{Client, SessAddrs};
use crate::Shared;
use bytes::Bytes;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::params::Params;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What a connection's request streams share.
pub(super) struct ConnCtx {
    pub sh: Arc<Shared>,
    pub conn: quinn::Connection,
    pub addrs: Arc<SessAddrs>,
    pub sess_vxid: u64,
    /// While the handshake is not yet confirmed (requests may come in
    /// 0-RTT early data): what says when it is, and whether it was.
    pub confirmed: Arc<tokio::sync::Notify>,
    pub done: Arc<AtomicBool>,
    /// The most a field section may decode to.
    pub header_list: u64,
    /// Streams the client gave up soon after opening them (`h3_rapid_reset*`).
    pub resets: RapidResets,
    /// `addrs` again once the client's certificate is known ([`ConnCtx::addrs`]).
    pub settled: std::sync::OnceLock<Arc<SessAddrs>>,
}

impl ConnCtx {
    /// The connection's addresses and what its TLS handshake settled,
    /// the client's certificate included. The connection is taken before
    /// its handshake is complete (for 0-RTT), when the client has not yet
    /// shown a certificate; a request stream comes after it (quinn reads
    /// no 1-RTT packet before), or in early data with the resumed
    /// session's certificate.
    pub fn addrs(&self) -> Arc<SessAddrs> {
        if let Some(settled) = self.settled.get() {
            return settled.clone();
        }
        if self.conn.peer_identity().is_none() {
            return self.addrs.clone();
        }
        let a = &self.addrs;
        let mut settled = SessAddrs::new(a.remote, a.local, a.listener.clone(), a.endpoint.clone());
        settled.tls = Some(super::session_of(&self.conn));
        self.settled.get_or_init(|| Arc::new(settled)).clone()
    }
}

/// Times of the rapid resets within `h3_rapid_reset_period`: past
/// `h3_rapid_reset_limit` the connection is closed (H3_EXCESSIVE_LOAD),
/// since each stream opened and given up cost a request's start (a
/// fetch, even), and QUIC gives a client a new stream for each one it
/// resets.
pub(super) struct RapidResets {
    times: std::sync::Mutex<std::collections::VecDeque<std::time::Instant>>,
    /// Set once the connection was closed for them.
    pub closed: AtomicBool,
}

impl RapidResets {
    pub fn new() -> RapidResets {
        RapidResets {
            times: std::sync::Mutex::new(std::collections::VecDeque::new()),
            closed: AtomicBool::new(false),
        }
    }

    /// A stream given up `age` after it opened.
    fn note(&self, cx: &ConnCtx, age: Duration) {
        let p = &cx.sh.params;
        let limit = p.h3_rapid_reset_limit() as usize;
        if limit == 0 || age >= Params::duration(p.h3_rapid_reset()) {
            return;
        }
        let now = std::time::Instant::now();
        let period = Params::duration(p.h3_rapid_reset_period());
        let mut times = self.times.lock().unwrap_or_else(|e| e.into_inner());
        while times
            .front()
            .is_some_and(|t| now.duration_since(*t) > period)
        {
            times.pop_front();
        }
        times.push_back(now);
        if times.len() > limit && !self.closed.swap(true, Ordering::AcqRel) {
            cx.conn
                .close(varint_code(code::EXCESSIVE_LOAD), b"too many rapid resets");
        }
    }
}

/// Serves one request stream.
pub(super) async fn serve(cx: Arc<ConnCtx>, mut send: quinn::SendStream, recv: quinn::RecvStream) {
    COUNTERS.inc(Counter::h3_streams);
    let opened = std::time::Instant::now();
    let early = !cx.done.load(Ordering::Acquire);
    // (A HEADERS frame's QPACK is seldom longer than what it decodes to.)
    let mut frames = FrameReader::new(recv, cx.header_list.saturating_mul(2));
    // A stream opened must bring its HEADERS within timeout_idle, as a
    // connection its first request: else a client could hold a task per
    // stream for as long as it keeps its connection alive.
    let wait = Params::duration(cx.sh.params.timeout_idle());
    let first = match tokio::time::timeout(wait, frames.next()).await {
        Err(_) => {
            frames.stop(code::REQUEST_INCOMPLETE);
            let _ = send.reset(varint_code(code::REQUEST_INCOMPLETE));
            return;
        }
        Ok(first) => first,
    };
    let block = match first {
        Ok(Frame::Whole(frames::HEADERS, block)) => block,
        Ok(Frame::End) | Err(frames::FrameError::Stream) => {
            // Ended (or reset) before a request (§4.1).
            let _ = send.reset(varint_code(code::REQUEST_INCOMPLETE));
            cx.resets.note(&cx, opened.elapsed());
            return;
        }
        Err(frames::FrameError::TooLarge(frames::HEADERS)) => {
            return too_large(&cx, &mut send, &mut frames).await;
        }
        Err(e) => return close_for(&cx.conn, &e),
        // DATA first, or a frame a request stream must not carry.
        Ok(_) => {
            return cx.conn.close(
                varint_code(code::FRAME_UNEXPECTED),
                b"a request stream must begin with HEADERS",
            )
        }
    };
    let req = match qpack::decode_request(&block, cx.header_list) {
        Ok(req) => req,
        Err(Malformed::TooLarge) => return too_large(&cx, &mut send, &mut frames).await,
        Err(_) => {
            COUNTERS.inc(Counter::client_req_400);
            frames.stop(code::MESSAGE_ERROR);
            let _ = send.reset(varint_code(code::MESSAGE_ERROR));
            return;
        }
    };
    if early {
        COUNTERS.inc(Counter::h3_early);
        if !req.safe() {
            COUNTERS.inc(Counter::h3_early_held);
            // Replayable: processed only once the handshake proves the
            // client is there (RFC 8470 §3).
            let wait = cx.confirmed.notified();
            if !cx.done.load(Ordering::Acquire) {
                let limit = Duration::from_secs_f64(cx.sh.params.h3_idle_timeout());
                let _ = tokio::time::timeout(limit, wait).await;
            }
            if !cx.done.load(Ordering::Acquire) {
                COUNTERS.inc(Counter::h3_early_refused);
                return answer_status(&cx, &mut send, 425).await;
            }
        }
    }
    let framing = Framing {
        chunk_body: req.chunk_body,
        is_head: req.method == b"HEAD",
        declared: req.content_length,
        header_list: cx.header_list,
    };
    let mut raw = req.head;
    let parsed = lacquer_http::parse_request(&mut raw, &cx.sh.request_limits());
    let Ok(Some(mut head)) = parsed else {
        // (Within the header list's limit, past http_req_size's or the
        // other HTTP/1 limits.)
        COUNTERS.inc(Counter::client_req_400);
        frames.stop(code::MESSAGE_ERROR);
        let _ = send.reset(varint_code(code::MESSAGE_ERROR));
        return;
    };
    head.version = lacquer_http::Version::Http3;
    let sh = cx.sh.clone();
    let place = match sh.admission.try_admit(&sh.params) {
        Some(place) => Some(place),
        None => Box::pin(sh.admission.admit(&sh.params, false)).await,
    };
    let Some(_place) = place else {
        frames.stop(code::REQUEST_REJECTED);
        let _ = send.reset(varint_code(code::REQUEST_REJECTED));
        return;
    };
    let wire = H3Stream::new(cx.conn.clone(), send, frames, framing);
    let mut c = Client::for_h3_stream(wire, cx.addrs());
    let mut link = sh.txn(cx.sess_vxid, lacquer_shm::Side::Client);
    let conn = crate::host::req::ConnInfo::of(&c);
    let _ = boxed_in_place!(request::handle(
        &mut c,
        &sh,
        &sh.active.get(),
        &conn,
        head,
        &mut link
    ))
    .await;
    if let Some(h3) = c.h3() {
        if !h3.ended() {
            COUNTERS.inc(Counter::h3_reset);
            h3.abandon();
            if h3.client_stopped() {
                cx.resets.note(&cx, opened.elapsed());
            }
        }
    }
}

/// A request whose fields are past the header list's limit: 431, and
/// the rest of it refused.
async fn too_large(cx: &ConnCtx, send: &mut quinn::SendStream, frames: &mut FrameReader) {
    COUNTERS.inc(Counter::client_req_400);
    frames.stop(code::EXCESSIVE_LOAD);
    answer_status(cx, send, 431).await;
}

/// Answers a response of `status` alone, within `idle_send_timeout` (a
/// client that opens no flow-control window for it holds nothing).
async fn answer_status(cx: &ConnCtx, send: &mut quinn::SendStream, status: u16) {
    let frame: Bytes = qpack::encode_status(status).freeze();
    let limit = Params::duration(cx.sh.params.idle_send_timeout());
    match tokio::time::timeout(limit, send.write_chunk(frame)).await {
        Ok(Ok(())) => drop(send.finish()),
        _ => drop(send.reset(varint_code(code::REQUEST_REJECTED))),
    }
}
