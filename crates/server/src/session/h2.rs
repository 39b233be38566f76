//! An HTTP/2 session (RFC 9113): the connection's settings from the
//! `h2_*` parameters, each stream run as a request through the same
//! client steps as HTTP/1 (its head given HTTP/1.1's shape to be parsed
//! with the same limits, `req.proto` "HTTP/2.0"), and the defences: a
//! guard that reads the frame headers going by and tells the session to
//! close with GOAWAY ENHANCE_YOUR_CALM when a client resets streams too
//! soon too often (`h2_rapid_reset*`) or floods it with SETTINGS, PING,
//! PRIORITY, empty DATA or CONTINUATION frames. The framing, HPACK and
//! flow control are the `h2` crate's.

use crate::client::request;
use crate::transport::h2::H2Stream;
use crate::transport::io::{Client, ClientStream};
use crate::Shared;
use bytes::{Bytes, BytesMut};
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::params::Params;
use lacquer_shm::{Side, Txn};
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

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

/// Frames of one kind a connection may send within [`FLOOD_PERIOD`].
const FLOOD_PERIOD: Duration = Duration::from_secs(10);
const MAX_SETTINGS: u32 = 32;
const MAX_PINGS: u32 = 64;
const MAX_PRIORITY: u32 = 1000;
const MAX_EMPTY_DATA: u32 = 256;
/// CONTINUATION frames one header block may take.
const MAX_CONTINUATIONS: u32 = 64;

/// What the session's streams and its frame guard share.
struct ConnState {
    /// Streams being served.
    active: AtomicUsize,
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
}

impl ConnState {
    fn new(rapid_reset: Duration, reset_limit: usize, reset_period: Duration) -> ConnState {
        ConnState {
            active: AtomicUsize::new(0),
            last_done_ms: AtomicU64::new(0),
            began: Instant::now(),
            calm: AtomicBool::new(false),
            calm_reason: Mutex::new(None),
            resets: Mutex::new(VecDeque::new()),
            rapid_reset,
            reset_limit,
            reset_period,
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
pub(crate) async fn serve(sh: &Arc<Shared>, c: &mut Client, log: &mut Txn) -> CloseReason {
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
    let first = super::h2c::stream_one(&head);
    let send = Params::duration(sh.params.idle_send_timeout());
    if c.write_small(super::h2c::SWITCHING, send).await.is_err() {
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
        .and_then(|s| std::os::fd::AsFd::as_fd(s).try_clone_to_owned().ok())
        .map(Arc::new);
    let io = Guarded {
        ahead: c.rbuf.split().freeze(),
        inner: stream,
        guard: FrameGuard::new(state.clone()),
        upgraded,
    };
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
    let idle = Params::duration(c.sess.idle.unwrap_or(p.timeout_idle()));
    let mut conn = match tokio::time::timeout(idle, builder.handshake::<_, Bytes>(io)).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(_)) => return CloseReason::RxJunk,
        Err(_) => return CloseReason::RxTimeout,
    };
    let window_timeout = Params::duration(p.h2_window_timeout());
    let sess_vxid = log.vxid();
    let mut window_grown = false;
    loop {
        let idle = Params::duration(c.sess.idle.unwrap_or(sh.params.timeout_idle()));
        let accepted = std::future::poll_fn(|cx| {
            if state.calm.load(Ordering::Acquire) {
                return Poll::Ready(None);
            }
            let r = conn.poll_accept(cx);
            if state.calm.load(Ordering::Acquire) {
                return Poll::Ready(None);
            }
            r.map(Some)
        });
        let next = match tokio::time::timeout(idle, accepted).await {
            Ok(next) => next,
            Err(_) => {
                let quiet_since =
                    state.began + Duration::from_millis(state.last_done_ms.load(Ordering::Relaxed));
                if state.active.load(Ordering::Acquire) > 0 || quiet_since.elapsed() < idle {
                    continue;
                }
                conn.graceful_shutdown();
                let _ = tokio::time::timeout(idle, std::future::poll_fn(|cx| conn.poll_closed(cx)))
                    .await;
                return CloseReason::RxTimeout;
            }
        };
        match next {
            // The guard or a stream asked for calm.
            None => {
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
                return reason;
            }
            Some(None) => return CloseReason::RemClose,
            Some(Some(Err(e))) => {
                return match e.reason() {
                    Some(h2::Reason::NO_ERROR) | None if e.is_io() => CloseReason::RemClose,
                    Some(h2::Reason::ENHANCE_YOUR_CALM) => CloseReason::Calm,
                    _ => CloseReason::RxJunk,
                };
            }
            Some(Some(Ok((req, respond)))) => {
                // The connection's receive window grows to
                // h2_rx_window_increment once a request has a body, not
                // in the handshake: that is SETTINGS and its ACK alone,
                // as varnishd's (and Varnish's test runner expects).
                if !window_grown && !req.body().is_end_stream() {
                    window_grown = true;
                    conn.set_target_window_size(u32_of(sh.params.h2_rx_window_increment()));
                }
                state.active.fetch_add(1, Ordering::AcqRel);
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
                tokio::spawn(task.serve(req, respond));
            }
        }
    }
}

/// What a stream's task needs of its session.
struct Stream {
    sh: Arc<Shared>,
    addrs: Arc<crate::transport::io::SessAddrs>,
    fd: Option<i32>,
    socket: Option<Arc<std::os::fd::OwnedFd>>,
    sess: crate::transport::io::SessTimeouts,
    sess_vxid: u64,
    window_timeout: Duration,
    state: Arc<ConnState>,
}

impl Stream {
    async fn serve(
        self,
        req: http::Request<h2::RecvStream>,
        mut respond: h2::server::SendResponse<Bytes>,
    ) {
        let (parts, body) = req.into_parts();
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
        let _ = Box::pin(request::handle(&mut c, &self.sh, head, &mut link)).await;
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
        self.state.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The request head of an HTTP/2 stream in HTTP/1.1's shape: the
/// pseudo-header fields become the request line and Host, cookies sent
/// as several fields become one (RFC 9113 §8.2.3), and a body without a
/// length is framed in chunks.
fn http1_head(parts: &http::request::Parts, chunk_body: bool) -> BytesMut {
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

/// The connection as the `h2` crate reads and writes it: the bytes read
/// before HTTP/2 was known to be spoken first, every byte read passing
/// the frame guard; after an upgrade, the frames of the request that
/// asked for it, once the client's first frame has passed.
struct Guarded {
    ahead: Bytes,
    inner: Box<dyn ClientStream>,
    guard: FrameGuard,
    upgraded: Option<Bytes>,
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = &mut *self;
        // Until the upgraded request's frames are in, reads stop at the
        // end of the client's first frame, where they go.
        let mut limit = buf.remaining();
        if let Some(frames) = me.upgraded.as_mut() {
            match me.guard.first_frame_left() {
                None => {
                    let n = frames.len().min(buf.remaining());
                    buf.put_slice(&frames.split_to(n));
                    if frames.is_empty() {
                        me.upgraded = None;
                    }
                    return Poll::Ready(Ok(()));
                }
                Some(left) => limit = limit.min(left),
            }
        }
        let start = buf.filled().len();
        if !me.ahead.is_empty() {
            let n = me.ahead.len().min(limit);
            buf.put_slice(&me.ahead.split_to(n));
        } else if limit < buf.remaining() {
            let mut room = [0u8; 512];
            let mut small = ReadBuf::new(&mut room[..limit.min(512)]);
            match Pin::new(&mut me.inner).poll_read(cx, &mut small) {
                Poll::Ready(Ok(())) => buf.put_slice(small.filled()),
                other => return other,
            }
        } else {
            match Pin::new(&mut me.inner).poll_read(cx, buf) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
        }
        me.guard.scan(&buf.filled()[start..]);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Follows the frames a client sends, by their 9-byte headers, and
/// counts what a flood is made of.
struct FrameGuard {
    state: Arc<ConnState>,
    /// Preface bytes still to pass.
    preface_left: usize,
    header: [u8; 9],
    have: usize,
    /// Payload bytes of the current frame still to pass.
    skip: usize,
    window_start: Instant,
    settings: u32,
    pings: u32,
    priority: u32,
    empty_data: u32,
    continuations: u32,
    /// When recent streams' HEADERS came, by stream id (bounded).
    opened: VecDeque<(u32, Instant)>,
    /// A whole frame header has passed.
    framed: bool,
}

impl FrameGuard {
    fn new(state: Arc<ConnState>) -> FrameGuard {
        FrameGuard {
            state,
            preface_left: PREFACE.len(),
            header: [0; 9],
            have: 0,
            skip: 0,
            window_start: Instant::now(),
            settings: 0,
            pings: 0,
            priority: 0,
            empty_data: 0,
            continuations: 0,
            opened: VecDeque::new(),
            framed: false,
        }
    }

    /// Bytes still to pass before the client's first frame has ended
    /// (preface, header, payload), or None once it has.
    fn first_frame_left(&self) -> Option<usize> {
        match (self.preface_left, self.framed) {
            (0, true) if self.skip == 0 => None,
            (0, true) => Some(self.skip),
            (0, false) => Some(9 - self.have),
            (left, _) => Some(left),
        }
    }

    fn scan(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.preface_left > 0 {
                let n = self.preface_left.min(bytes.len());
                self.preface_left -= n;
                bytes = &bytes[n..];
                continue;
            }
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (9 - self.have).min(bytes.len());
            self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have == 9 {
                self.have = 0;
                let h = self.header;
                let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                let id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
                self.frame(h[3], h[4], len, id);
                self.skip = len;
                self.framed = true;
            }
        }
    }

    /// One frame header: type, flags, payload length, stream.
    fn frame(&mut self, kind: u8, flags: u8, len: usize, id: u32) {
        const ACK: u8 = 0x1;
        const END_STREAM: u8 = 0x1;
        const END_HEADERS: u8 = 0x4;
        if self.window_start.elapsed() > FLOOD_PERIOD {
            self.window_start = Instant::now();
            (self.settings, self.pings, self.priority, self.empty_data) = (0, 0, 0, 0);
        }
        let over = match kind {
            // DATA without payload that does not end its stream.
            0x0 if len == 0 && flags & END_STREAM == 0 => {
                self.empty_data += 1;
                self.empty_data > MAX_EMPTY_DATA
            }
            0x1 => {
                self.opened.push_back((id, Instant::now()));
                if self.opened.len() > 256 {
                    self.opened.pop_front();
                }
                self.continuations = 0;
                false
            }
            0x2 => {
                self.priority += 1;
                self.priority > MAX_PRIORITY
            }
            0x3 => {
                if let Some(i) = self.opened.iter().position(|(s, _)| *s == id) {
                    let (_, at) = self.opened.remove(i).unwrap_or((id, Instant::now()));
                    self.state.reset_after(at.elapsed());
                }
                false
            }
            0x4 if flags & ACK == 0 => {
                self.settings += 1;
                self.settings > MAX_SETTINGS
            }
            0x6 if flags & ACK == 0 => {
                self.pings += 1;
                self.pings > MAX_PINGS
            }
            0x9 => {
                self.continuations += 1;
                if flags & END_HEADERS != 0 {
                    self.continuations = 0;
                }
                self.continuations > MAX_CONTINUATIONS
            }
            _ => false,
        };
        if over {
            self.state.tell_calm(CloseReason::Calm);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> Arc<ConnState> {
        Arc::new(ConnState::new(
            Duration::from_secs(1),
            3,
            Duration::from_secs(60),
        ))
    }

    fn frame(kind: u8, flags: u8, id: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn the_preface_is_told_apart() {
        assert_eq!(is_preface(b"PRI * HTTP/2.0\r\n"), None);
        assert_eq!(is_preface(PREFACE), Some(true));
        assert_eq!(is_preface(b"GET / HTTP/1.1\r\n"), Some(false));
        assert_eq!(is_preface(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"), Some(false));
    }

    #[test]
    fn floods_and_rapid_resets_ask_for_calm() {
        // Pings, fed a byte at a time after the preface.
        let s = state();
        let mut g = FrameGuard::new(s.clone());
        let mut bytes = PREFACE.to_vec();
        for _ in 0..MAX_PINGS {
            bytes.extend(frame(6, 0, 0, &[0; 8]));
            bytes.extend(frame(6, 1, 0, &[0; 8]));
        }
        for b in &bytes {
            g.scan(std::slice::from_ref(b));
        }
        assert!(!s.calm.load(Ordering::Acquire));
        g.scan(&frame(6, 0, 0, &[0; 8]));
        assert!(s.calm.load(Ordering::Acquire));

        // Streams opened and reset at once, past the limit of 3.
        let s = state();
        let mut g = FrameGuard::new(s.clone());
        g.scan(PREFACE);
        for id in [1u32, 3, 5] {
            g.scan(&frame(1, 0x5, id, b"hpack"));
            g.scan(&frame(3, 0, id, &[0, 0, 0, 8]));
        }
        assert!(!s.calm.load(Ordering::Acquire));
        g.scan(&frame(1, 0x5, 7, b"hpack"));
        g.scan(&frame(3, 0, 7, &[0, 0, 0, 8]));
        assert!(s.calm.load(Ordering::Acquire));
        assert_eq!(
            *s.calm_reason.lock().unwrap(),
            Some(CloseReason::RapidReset)
        );

        // A header block in endless CONTINUATION frames.
        let s = state();
        let mut g = FrameGuard::new(s.clone());
        g.scan(PREFACE);
        g.scan(&frame(1, 0, 1, b"h"));
        for _ in 0..=MAX_CONTINUATIONS {
            g.scan(&frame(9, 0, 1, b"c"));
        }
        assert!(s.calm.load(Ordering::Acquire));

        // Ordinary traffic does not.
        let s = state();
        let mut g = FrameGuard::new(s.clone());
        g.scan(PREFACE);
        g.scan(&frame(4, 0, 0, &[]));
        for id in (1u32..400).step_by(2) {
            g.scan(&frame(1, 0x4, id, b"hpack"));
            g.scan(&frame(0, 1, id, b"body"));
            g.scan(&frame(8, 0, 0, &[0, 0, 1, 0]));
        }
        assert!(!s.calm.load(Ordering::Acquire));
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
        let stream = |stream: Stream| stream.serve(unreachable!(), unreachable!());
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
