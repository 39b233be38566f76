//! An HTTP/2 session (RFC 9113): the connection's settings from the
//! `h2_*` parameters, each stream run as a request through the same
//! client steps as HTTP/1 (its head given HTTP/1.1's shape to be parsed
//! with the same limits, `req.proto` "HTTP/2.0"), and the defences: a
//! guard that reads the frame headers going by and tells the session to
//! close with GOAWAY ENHANCE_YOUR_CALM when a client resets streams too
//! soon too often (`h2_rapid_reset*`) or floods it with SETTINGS, PING,
//! PRIORITY, empty DATA or CONTINUATION frames (`guard`). Every stream of
//! a connection runs on the connection's own task, and what they send in
//! one pass leaves in one write (`wire`). `Upgrade: h2c` is `upgrade`.
//! The framing, HPACK and flow control are the `h2` crate's.

use crate::client::request;
use crate::transport::h2::H2Stream;
use crate::transport::io::Client;
use crate::Shared;
use bytes::{Bytes, BytesMut};
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::params::Params;
use lacquer_shm::{Side, Txn};
use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

/// What every HTTP/2 client sends first.
pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Whether `rbuf` is (so far) the start of the preface: None when more
/// bytes are needed to tell.
pub(crate) fn is_preface(rbuf: &[u8]) -> Option<bool> {
    let n = rbuf.len().min(PREFACE.len());
    if rbuf[..n] != PREFACE[..n] {
        return Some(false);
    }
    (n == PREFACE.len()).then_some(true)
}

mod guard;
mod upgrade;
mod wire;

use guard::FrameGuard;
pub(crate) use upgrade::wants_upgrade;
use wire::Guarded;

/// What the session's streams and its frame guard share.
struct ConnState {
    /// When the last stream ended (ms since the session began).
    last_done_ms: AtomicU64,
    began: Instant,
    /// The guard or a stream asked for GOAWAY ENHANCE_YOUR_CALM, and
    /// why.
    calm: AtomicBool,
    calm_reason: Mutex<Option<CloseReason>>,
    /// Times of the rapid resets within the period.
    resets: Mutex<VecDeque<Instant>>,
    rapid_reset: Duration,
    reset_limit: usize,
    reset_period: Duration,
    /// Passes of the connection's loop over its streams, and whether the
    /// loop runs: while it does, the connection's writes are flushed
    /// once per pass (see [`Guarded`]).
    pass: AtomicU64,
    gathering: AtomicBool,
}

impl ConnState {
    fn new(rapid_reset: Duration, reset_limit: usize, reset_period: Duration) -> ConnState {
        ConnState {
            last_done_ms: AtomicU64::new(0),
            began: Instant::now(),
            calm: AtomicBool::new(false),
            calm_reason: Mutex::new(None),
            resets: Mutex::new(VecDeque::new()),
            rapid_reset,
            reset_limit,
            reset_period,
            pass: AtomicU64::new(0),
            gathering: AtomicBool::new(false),
        }
    }

    fn tell_calm(&self, reason: CloseReason) {
        let mut r = self.calm_reason.lock().unwrap_or_else(|p| p.into_inner());
        r.get_or_insert(reason);
        self.calm.store(true, Ordering::Release);
    }

    /// A stream reset `age` after its HEADERS: counted when that was
    /// soon, and past the limit the session is closed.
    fn reset_after(&self, age: Duration) {
        if age >= self.rapid_reset || self.reset_limit == 0 {
            return;
        }
        let now = Instant::now();
        let mut resets = self.resets.lock().unwrap_or_else(|p| p.into_inner());
        while resets
            .front()
            .is_some_and(|t| now.duration_since(*t) > self.reset_period)
        {
            resets.pop_front();
        }
        resets.push_back(now);
        if resets.len() > self.reset_limit {
            drop(resets);
            self.tell_calm(CloseReason::RapidReset);
        }
    }
}

/// Serves the connection of `c` as HTTP/2, from its preface (already in
/// `c.rbuf` when it came by prior knowledge) to its end.
pub(crate) async fn serve_connection(
    sh: &Arc<Shared>,
    c: &mut Client,
    log: &mut Txn,
) -> CloseReason {
    serve_with(sh, c, log, None).await
}

/// Answers an HTTP/1.1 request that asked for `Upgrade: h2c` with 101,
/// then serves the connection as HTTP/2 with the request as stream 1.
pub(crate) async fn upgrade(
    sh: &Arc<Shared>,
    c: &mut Client,
    head: lacquer_http::RequestHead,
    log: &mut Txn,
) -> CloseReason {
    let first = upgrade::stream_one(&head);
    let send = Params::duration(sh.params.idle_send_timeout());
    if c.write_small(upgrade::SWITCHING, send).await.is_err() {
        return CloseReason::TxError;
    }
    serve_with(sh, c, log, Some(first)).await
}

/// [`serve`], with the frames of an upgraded request to be read right
/// after the client's first frame (its SETTINGS).
async fn serve_with(
    sh: &Arc<Shared>,
    c: &mut Client,
    log: &mut Txn,
    upgraded: Option<Bytes>,
) -> CloseReason {
    let Some(stream) = c.take_stream() else {
        return CloseReason::RxJunk;
    };
    COUNTERS.inc(Counter::sess_h2);
    let p = &sh.params;
    let state = Arc::new(ConnState::new(
        Params::duration(p.h2_rapid_reset()),
        p.h2_rapid_reset_limit() as usize,
        Params::duration(p.h2_rapid_reset_period()),
    ));
    let socket = stream
        .socket()
        .and_then(|s| s.try_clone_to_owned().ok())
        .map(Arc::new);
    let io = Guarded::new(
        c.rbuf.split().freeze(),
        stream,
        FrameGuard::new(state.clone()),
        upgraded,
    );
    let u32_of = |v: u64| v.min(u64::from(u32::MAX)) as u32;
    let builder = server_builder(p);
    let idle = Params::duration(c.sess.idle.or(p.timeout_idle()));
    let mut conn = match tokio::time::timeout(idle, builder.handshake::<_, Bytes>(io)).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(_)) => return CloseReason::RxJunk,
        Err(_) => return CloseReason::RxTimeout,
    };
    let window_timeout = Params::duration(p.h2_window_timeout());
    let sess_vxid = log.vxid();
    let mut window_grown = false;
    // Every stream of the connection runs on the connection's own task:
    // what a pass over the ready streams sends is written together, in
    // one write, when the connection is next polled (a task per stream
    // wrote each response on its own), and no task is spawned per stream.
    let mut streams = FuturesUnordered::new();
    let mut quiet = std::pin::pin!(tokio::time::sleep(Duration::ZERO));
    let mut quiet_armed = false;
    state.gathering.store(true, Ordering::Relaxed);
    let event = std::future::poll_fn(|cx| loop {
        state.pass.fetch_add(1, Ordering::Relaxed);
        if state.calm.load(Ordering::Acquire) {
            return Poll::Ready(Event::Calm);
        }
        // Each stream the connection has read (reading on, and writing
        // what the streams sent meanwhile).
        let mut accepted = false;
        loop {
            let next = conn.poll_accept(cx);
            // The guard's word (it saw the frames as they were read)
            // comes before what the h2 crate made of them.
            if state.calm.load(Ordering::Acquire) {
                return Poll::Ready(Event::Calm);
            }
            match next {
                Poll::Ready(Some(Ok((req, respond)))) => {
                    // The connection's receive window grows to
                    // h2_rx_window_increment once a request has a body,
                    // not in the handshake: that is SETTINGS and its ACK
                    // alone, as varnishd's (and Varnish's test runner
                    // expects).
                    if !window_grown && !req.body().is_end_stream() {
                        window_grown = true;
                        conn.set_target_window_size(u32_of(sh.params.h2_rx_window_increment()));
                    }
                    let task = Stream {
                        sh: sh.clone(),
                        addrs: c.addrs.clone(),
                        fd: c.fd,
                        socket: socket.clone(),
                        sess: c.sess,
                        sess_vxid,
                        window_timeout,
                        state: state.clone(),
                    };
                    // A panic in one stream's steps resets that stream
                    // alone (its halves are dropped), as a panic in an
                    // HTTP/1 request ends only its connection.
                    streams.push(AssertUnwindSafe(task.answer(req, respond)).catch_unwind());
                    accepted = true;
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Event::Failed(e)),
                Poll::Ready(None) => return Poll::Ready(Event::Closed),
                Poll::Pending => break,
            }
        }
        // The streams that can go on; what they send wakes this task, and
        // the connection's next poll writes it.
        while let Poll::Ready(Some(_)) = streams.poll_next_unpin(cx) {}
        if accepted {
            continue;
        }
        // Idle: no stream at work, none ended within timeout_idle.
        if !streams.is_empty() {
            quiet_armed = false;
            return Poll::Pending;
        }
        let idle = Params::duration(c.sess.idle.or(sh.params.timeout_idle()));
        let quiet_since =
            state.began + Duration::from_millis(state.last_done_ms.load(Ordering::Relaxed));
        let deadline = tokio::time::Instant::from_std(quiet_since + idle);
        if !quiet_armed || quiet.deadline() != deadline {
            quiet.as_mut().reset(deadline);
            quiet_armed = true;
        }
        return match quiet.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Event::Idle),
            Poll::Pending => Poll::Pending,
        };
    });
    let event = event.await;
    drop(streams);
    // What is written from here on (GOAWAY) goes at once.
    state.gathering.store(false, Ordering::Relaxed);
    let idle = Params::duration(c.sess.idle.or(sh.params.timeout_idle()));
    ended(conn, &state, event, idle).await
}

/// The HTTP/2 server side as the `h2_*` parameters set it.
fn server_builder(p: &Params) -> h2::server::Builder {
    let u32_of = |v: u64| v.min(u64::from(u32::MAX)) as u32;
    let header_list = p.h2_max_header_list_size().min(p.http_req_size());
    let mut builder = h2::server::Builder::new();
    builder
        .initial_window_size(u32_of(p.h2_initial_window_size()))
        .max_frame_size(u32_of(p.h2_max_frame_size()).clamp(16_384, 16_777_215))
        .max_concurrent_streams(u32_of(p.h2_max_concurrent_streams()))
        .max_header_list_size(u32_of(header_list))
        .header_table_size(u32_of(p.h2_header_table_size()))
        .max_pending_accept_reset_streams(p.h2_rapid_reset_limit().clamp(1, 1000) as usize)
        .max_local_error_reset_streams(Some(p.h2_rapid_reset_limit().clamp(1, 1000) as usize))
        .max_send_buffer_size(64 * 1024);
    builder
}

/// How the connection ends once its loop has: a GOAWAY where it is owed
/// (idle: graceful, within `idle`; calm: ENHANCE_YOUR_CALM), and why it
/// closed.
async fn ended<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut conn: h2::server::Connection<T, Bytes>,
    state: &ConnState,
    event: Event,
    idle: Duration,
) -> CloseReason {
    match event {
        Event::Idle => {
            conn.graceful_shutdown();
            let _ =
                tokio::time::timeout(idle, std::future::poll_fn(|cx| conn.poll_closed(cx))).await;
            CloseReason::RxTimeout
        }
        // The guard or a stream asked for calm.
        Event::Calm => {
            let reason = state
                .calm_reason
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .unwrap_or(CloseReason::Calm);
            conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
            let _ = tokio::time::timeout(
                Duration::from_secs(1),
                std::future::poll_fn(|cx| conn.poll_closed(cx)),
            )
            .await;
            reason
        }
        Event::Closed => CloseReason::RemClose,
        Event::Failed(e) => match e.reason() {
            Some(h2::Reason::NO_ERROR) | None if e.is_io() => CloseReason::RemClose,
            Some(h2::Reason::ENHANCE_YOUR_CALM) => CloseReason::Calm,
            _ => CloseReason::RxJunk,
        },
    }
}

/// Why the connection's loop ended.
enum Event {
    /// No stream at work and none ended within `timeout_idle`.
    Idle,
    /// The frame guard or a stream asked for GOAWAY ENHANCE_YOUR_CALM.
    Calm,
    /// The client closed the connection.
    Closed,
    Failed(h2::Error),
}

/// What a stream's task needs of its session.
struct Stream {
    sh: Arc<Shared>,
    addrs: Arc<crate::transport::io::SessAddrs>,
    fd: Option<i32>,
    socket: Option<Arc<std::os::fd::OwnedFd>>,
    sess: crate::transport::deadline::SessTimeouts,
    sess_vxid: u64,
    window_timeout: Duration,
    state: Arc<ConnState>,
}

impl Stream {
    async fn answer(
        self,
        req: http::Request<h2::RecvStream>,
        mut respond: h2::server::SendResponse<Bytes>,
    ) {
        let (parts, body) = req.into_parts();
        if host_differs_from_authority(&parts) {
            // RFC 9113 §8.3.1: malformed, and answered 400 as varnishd
            // does; keyed and fetched by either, it could be read two ways.
            COUNTERS.inc(Counter::client_req_400);
            let refusal = http::Response::builder()
                .status(400)
                .body(())
                .expect("a status alone makes a response");
            let _ = respond.send_response(refusal, true);
            self.done();
            return;
        }
        let has_body = !body.is_end_stream();
        let chunk_body = has_body && !parts.headers.contains_key(http::header::CONTENT_LENGTH);
        let mut raw = http1_head(&parts, chunk_body);
        let parsed = lacquer_http::parse_request(&mut raw, &self.sh.request_limits());
        let Ok(Some(mut head)) = parsed else {
            // Nothing the steps could read: refused as HTTP/1 would be.
            COUNTERS.inc(Counter::client_req_400);
            respond.send_reset(h2::Reason::PROTOCOL_ERROR);
            self.done();
            return;
        };
        head.version = lacquer_http::Version::Http2;
        // A place among the requests at work (thread_pool_max), as an
        // HTTP/1 request takes; none left: the stream is refused.
        let sh = self.sh.clone();
        let place = match sh.admission.try_admit(&sh.params) {
            Some(place) => Some(place),
            None => Box::pin(sh.admission.admit(&sh.params, false)).await,
        };
        let Some(_place) = place else {
            respond.send_reset(h2::Reason::REFUSED_STREAM);
            self.done();
            return;
        };
        let is_head = parts.method == http::Method::HEAD;
        let wire = H2Stream::new(
            respond,
            body,
            chunk_body,
            is_head,
            self.window_timeout,
            self.socket.clone(),
        );
        let mut c = Client::for_h2_stream(wire, self.addrs.clone(), self.fd);
        c.sess = self.sess;
        // The session's link to this request, written apart from it.
        let mut link = self.sh.txn(self.sess_vxid, Side::Client);
        // Boxed: the steps' state is large, and a task's future is moved
        // several times as it is spawned; the stream's own stays small.
        let conn = crate::host::req::ConnInfo::of(&c);
        let _ = boxed_in_place!(request::handle(
            &mut c,
            &self.sh,
            &self.sh.active.get(),
            &conn,
            head,
            &mut link
        ))
        .await;
        if let Some(h2) = c.h2() {
            if !h2.ended() {
                // Rapid resets are counted by the frame guard, which
                // sees when each came.
                if h2.was_reset() {
                    COUNTERS.inc(Counter::req_reset);
                }
                h2.abandon();
            }
        }
        self.done();
    }

    fn done(&self) {
        let ms = self.state.began.elapsed().as_millis() as u64;
        self.state.last_done_ms.store(ms, Ordering::Relaxed);
    }
}

/// Whether a stream's Host field names another host than its
/// `:authority` (host names compared without case).
pub(crate) fn host_differs_from_authority(parts: &http::request::Parts) -> bool {
    let Some(authority) = parts.uri.authority() else {
        return false;
    };
    let mut hosts = parts.headers.get_all(http::header::HOST).iter();
    hosts.any(|host| {
        !host
            .as_bytes()
            .eq_ignore_ascii_case(authority.as_str().as_bytes())
    })
}

/// The request head of an HTTP/2 stream in HTTP/1.1's shape: the
/// pseudo-header fields become the request line and Host, cookies sent
/// as several fields become one (RFC 9113 §8.2.3), and a body without a
/// length is framed in chunks.
pub(crate) fn http1_head(parts: &http::request::Parts, chunk_body: bool) -> BytesMut {
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let target = match (parts.method == http::Method::OPTIONS, target) {
        (true, "") => "*",
        (_, "") => "/",
        (_, t) => t,
    };
    let mut out = BytesMut::with_capacity(256);
    out.extend_from_slice(parts.method.as_str().as_bytes());
    out.extend_from_slice(b" ");
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let field = |out: &mut BytesMut, name: &[u8], value: &[u8]| {
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    };
    if !parts.headers.contains_key(http::header::HOST) {
        if let Some(authority) = parts.uri.authority() {
            field(&mut out, b"host", authority.as_str().as_bytes());
        }
    }
    let mut cookies: Vec<&[u8]> = Vec::new();
    for (name, value) in &parts.headers {
        if name == http::header::COOKIE {
            cookies.push(value.as_bytes());
            continue;
        }
        field(&mut out, name.as_str().as_bytes(), value.as_bytes());
    }
    if !cookies.is_empty() {
        field(&mut out, b"cookie", &cookies.join(&b"; "[..]));
    }
    if chunk_body {
        field(&mut out, b"transfer-encoding", b"chunked");
    }
    out.extend_from_slice(b"\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preface_is_told_apart() {
        assert_eq!(is_preface(b"PRI * HTTP/2.0\r\n"), None);
        assert_eq!(is_preface(PREFACE), Some(true));
        assert_eq!(is_preface(b"GET / HTTP/1.1\r\n"), Some(false));
        assert_eq!(is_preface(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"), Some(false));
    }

    /// Each stream is a task whose future tokio moves as it spawns it and
    /// overwrites when it ends: the steps' state is boxed apart, so that
    /// what is moved stays small. A change that inlines it fails here.
    #[test]
    #[allow(unreachable_code, clippy::diverging_sub_expression)]
    fn a_streams_task_stays_small() {
        fn size<F: FnOnce(Stream) -> R, R>(_: &F) -> usize {
            std::mem::size_of::<R>()
        }
        let stream = |stream: Stream| stream.answer(unreachable!(), unreachable!());
        let bytes = size(&stream);
        assert!(bytes <= 2048, "a stream's task is {bytes} bytes");
    }

    #[test]
    fn heads_in_http1_shape() {
        let req = http::Request::builder()
            .method("POST")
            .uri("https://shop.example/cart?x=1")
            .header("cookie", "a=1")
            .header("cookie", "b=2")
            .header("accept-encoding", "gzip")
            .body(())
            .unwrap();
        let (parts, ()) = req.into_parts();
        let head = http1_head(&parts, true);
        assert_eq!(
            &head[..],
            b"POST /cart?x=1 HTTP/1.1\r\nhost: shop.example\r\naccept-encoding: gzip\r\ncookie: a=1; b=2\r\ntransfer-encoding: chunked\r\n\r\n"
        );
    }
}
