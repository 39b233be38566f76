//! A client connection's bytes: the read buffer (which may hold the next
//! pipelined request; dropped while the connection idles), the header
//! buffer, a body's window and encoder on the way out, and the wire its
//! responses go on: a [`Transport`] (HTTP/1, one stream of an HTTP/2
//! connection, or an ESI include's channel to its page), held in a
//! [`Wire`] so that calls to it are static, not through a vtable.

use super::deadline::{SendClock, SessTimeouts, WaitTimer};
use super::fragment::Fragment;
use super::http1::{now_or_never, Http1};
pub(crate) use super::req_body::{BodyError, ReqBody};
pub(crate) use super::stream::{ClientStream, SessAddrs};
pub(crate) use super::wire::{Piece, ReadError, SendError, Transport, WireBody};
use bytes::{Bytes, BytesMut};
use lacquer_core::spare;
use std::future::Future;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

/// The transport a client's responses go on: one of those there are,
/// each a [`Transport`]. Matched only to dispatch (`each!`), to build a
/// client, and to hand its connection over.
pub(crate) enum Wire {
    Http1(Http1),
    /// The page of an ESI include.
    Fragment(Fragment),
    /// One stream of an HTTP/2 connection.
    H2(Box<super::h2::H2Stream>),
    /// One request stream of an HTTP/3 connection.
    H3(Box<super::h3::H3Stream>),
}

/// Runs `$body` with `$t` bound to the transport in `$wire`.
macro_rules! each {
    ($wire:expr, $t:ident => $body:expr) => {
        match $wire {
            Wire::Http1($t) => $body,
            Wire::Fragment($t) => $body,
            Wire::H2($t) => $body,
            Wire::H3($t) => $body,
        }
    };
}

impl Transport for Wire {
    fn part_of_page(&self) -> bool {
        each!(self, t => t.part_of_page())
    }

    fn multiplexed(&self) -> bool {
        each!(self, t => t.multiplexed())
    }

    fn resp_protocol(&self) -> Option<&'static [u8]> {
        each!(self, t => t.resp_protocol())
    }

    fn byte_stream(&mut self) -> Option<&mut dyn ClientStream> {
        each!(self, t => t.byte_stream())
    }

    fn duplicate_socket(&self) -> Option<OwnedFd> {
        each!(self, t => t.duplicate_socket())
    }

    fn has_unread(&self) -> bool {
        each!(self, t => t.has_unread())
    }

    async fn send_head(
        &mut self,
        head: &[u8],
        wire: WireBody,
        body: &[Bytes],
        clock: &SendClock,
    ) -> Result<(), SendError> {
        each!(self, t => t.send_head(head, wire, body, clock).await)
    }

    async fn send_head_small(
        &mut self,
        head: &[u8],
        wire: WireBody,
        body: &[u8],
        clock: &SendClock,
    ) -> Result<(), SendError> {
        each!(self, t => t.send_head_small(head, wire, body, clock).await)
    }

    async fn send_head_and_piece(
        &mut self,
        head: &[u8],
        wire: WireBody,
        piece: Bytes,
        clock: &SendClock,
    ) -> Result<(), SendError> {
        each!(self, t => t.send_head_and_piece(head, wire, piece, clock).await)
    }

    async fn send_data(
        &mut self,
        pieces: &[Bytes],
        size: u64,
        last: bool,
        clock: &SendClock,
    ) -> Result<u64, SendError> {
        each!(self, t => t.send_data(pieces, size, last, clock).await)
    }

    async fn finish(
        &mut self,
        trailers: &[(Bytes, Bytes)],
        clock: &SendClock,
    ) -> Result<(), SendError> {
        each!(self, t => t.finish(trailers, clock).await)
    }

    async fn write_small(&mut self, data: &[u8], idle: Duration) -> Result<(), SendError> {
        each!(self, t => t.write_small(data, idle).await)
    }

    async fn send_interim(&mut self, heads: &[Vec<u8>], idle: Duration) -> Result<(), SendError> {
        each!(self, t => t.send_interim(heads, idle).await)
    }

    async fn read(
        &mut self,
        rbuf: &mut BytesMut,
        limit: impl FnOnce() -> Duration,
    ) -> Result<usize, ReadError> {
        each!(self, t => t.read(rbuf, limit).await)
    }

    async fn watching<F: Future>(
        &mut self,
        rbuf: &mut BytesMut,
        fut: F,
        answer_half_closed: bool,
    ) -> Option<F::Output> {
        each!(self, t => t.watching(rbuf, fut, answer_half_closed).await)
    }

    async fn send_failed(&mut self) {
        each!(self, t => t.send_failed().await)
    }

    async fn send_deflated(
        &mut self,
        data: Vec<Bytes>,
        crc: u32,
        len: u64,
    ) -> Result<(), SendError> {
        each!(self, t => t.send_deflated(data, crc, len).await)
    }

    fn body_untouched(&self) -> bool {
        each!(self, t => t.body_untouched())
    }

    fn take_body(&mut self) -> Option<Box<dyn lacquer_backend::StreamedBody>> {
        each!(self, t => t.take_body())
    }

    fn restore_body(&mut self, body: Box<dyn lacquer_backend::StreamedBody>) {
        each!(self, t => t.restore_body(body))
    }
}

/// One client connection.
pub(crate) struct Client {
    pub wire: Wire,
    pub rbuf: BytesMut,
    pub wbuf: Vec<u8>,
    /// Where the connection is from and to.
    pub addrs: std::sync::Arc<SessAddrs>,
    /// Reused for each request's hash key.
    pub key: Vec<u8>,
    /// The socket's descriptor, for VCL's socket options. An ESI
    /// include has its page's duplicate (it may run on after the
    /// connection closes), or none.
    pub fd: Option<i32>,
    /// The `sess.*` timeouts VCL set, for this connection's later
    /// requests too (None: the parameter).
    pub sess: SessTimeouts,
    /// A byte range of a body made on the way out (an ESI page, an
    /// inflated body): bytes still to skip, bytes still to send.
    pub window: Option<(u64, u64)>,
    /// The body being sent is compressed on its way out (br, zstd): what
    /// is sent goes through this, and its end goes with the body's.
    pub encoder: Option<Box<lacquer_filters::coding::Encoder>>,
    /// The timer bounding waits for a request head (see [`WaitTimer`]).
    head_timer: WaitTimer,
}

/// The read buffer a request head starts with.
const FIRST_RBUF: usize = 2048;
/// The write buffer a response head starts with.
const FIRST_WBUF: usize = 1024;
/// The room a request's hash key starts with.
const KEY_ROOM: usize = 128;

/// A client's buffers go back to its thread's spares
/// (`lacquer_core::spare`, and the read buffers here) for the next
/// connection: with one request a connection, making them anew was three
/// allocations a request.
impl Drop for Client {
    fn drop(&mut self) {
        keep_read_buffer(std::mem::take(&mut self.rbuf));
        spare::keep(std::mem::take(&mut self.wbuf));
        spare::keep(std::mem::take(&mut self.key));
    }
}

impl Client {
    /// A write buffer for a connection that held none while idle.
    fn take_wbuf(&mut self) {
        if self.wbuf.capacity() == 0 {
            self.wbuf = spare::take(FIRST_WBUF);
        }
    }

    /// A client on `wire` with `wbuf` for its heads.
    fn on(
        wire: Wire,
        wbuf: Vec<u8>,
        addrs: std::sync::Arc<SessAddrs>,
        fd: Option<i32>,
        sess: SessTimeouts,
    ) -> Self {
        Client {
            fd,
            sess,
            wire,
            rbuf: BytesMut::new(),
            wbuf,
            addrs,
            key: spare::take(KEY_ROOM),
            window: None,
            encoder: None,
            head_timer: WaitTimer::default(),
        }
    }

    /// A connection speaking HTTP/1. Its buffers are made when the first
    /// request comes (read_head_more).
    pub fn new(stream: Box<dyn ClientStream>, addrs: std::sync::Arc<SessAddrs>) -> Self {
        let fd = stream.socket().map(|s| std::os::fd::AsRawFd::as_raw_fd(&s));
        let wire = Wire::Http1(Http1::new(stream));
        Client::on(wire, Vec::new(), addrs, fd, SessTimeouts::default())
    }

    /// One stream of an HTTP/2 connection, `fd` the connection's socket.
    pub fn for_h2_stream(
        stream: super::h2::H2Stream,
        addrs: std::sync::Arc<SessAddrs>,
        fd: Option<i32>,
    ) -> Self {
        let wire = Wire::H2(Box::new(stream));
        let wbuf = spare::take(FIRST_WBUF);
        Client::on(wire, wbuf, addrs, fd, SessTimeouts::default())
    }

    /// The client of one HTTP/3 request stream.
    pub fn for_h3_stream(stream: super::h3::H3Stream, addrs: std::sync::Arc<SessAddrs>) -> Self {
        let wire = Wire::H3(Box::new(stream));
        let wbuf = spare::take(FIRST_WBUF);
        Client::on(wire, wbuf, addrs, None, SessTimeouts::default())
    }

    /// The client of an ESI include, writing to `tx` and otherwise like
    /// its parent's, with `socket` for socket options.
    pub fn fragment(tx: mpsc::Sender<Piece>, parent: &Client, socket: Option<i32>) -> Self {
        let wire = Wire::Fragment(Fragment::new(tx));
        Client::on(
            wire,
            spare::take(512),
            parent.addrs.clone(),
            socket,
            parent.sess,
        )
    }

    /// Takes the connection's stream away (to speak HTTP/2 over it); the
    /// client is left with nowhere to write.
    pub fn take_stream(&mut self) -> Option<Box<dyn ClientStream>> {
        if !matches!(self.wire, Wire::Http1(_)) {
            return None;
        }
        match std::mem::replace(&mut self.wire, Wire::Fragment(Fragment::closed())) {
            Wire::Http1(h) => Some(h.into_stream()),
            _ => None,
        }
    }

    /// A descriptor of its own for the client socket (see
    /// [`Transport::duplicate_socket`]).
    pub fn duplicate_socket(&self) -> Option<OwnedFd> {
        self.wire.duplicate_socket()
    }

    /// The connection's byte stream, where the client has the whole
    /// connection (HTTP/1).
    pub fn stream(&mut self) -> Option<&mut dyn ClientStream> {
        self.wire.byte_stream()
    }

    /// The HTTP/2 stream this client is, for the HTTP/2 session that made
    /// it.
    pub fn h2(&mut self) -> Option<&mut super::h2::H2Stream> {
        match &mut self.wire {
            Wire::H2(s) => Some(s),
            _ => None,
        }
    }

    /// The HTTP/3 stream this client is, if it is one.
    pub fn h3(&mut self) -> Option<&mut super::h3::H3Stream> {
        match &mut self.wire {
            Wire::H3(s) => Some(s),
            _ => None,
        }
    }

    /// Tells an include's parent that its body is incomplete.
    pub async fn send_failed(&mut self) {
        self.wire.send_failed().await
    }

    /// Hands an include's parent deflate data to splice (only on an
    /// include's wire).
    pub async fn send_deflated(
        &mut self,
        data: Vec<Bytes>,
        crc: u32,
        len: u64,
    ) -> Result<(), SendError> {
        self.wire.send_deflated(data, crc, len).await
    }

    /// Sends body pieces of the response whose head went out, framed as
    /// that head said (chunks on a socket when its length was unknown;
    /// as they are to an include's parent).
    pub async fn send_body(
        &mut self,
        pieces: &[Bytes],
        clock: &SendClock,
    ) -> Result<u64, SendError> {
        self.send_body_then(pieces, false, clock).await
    }

    /// [`Client::send_body`], ending the body in the same write when
    /// `last`.
    pub async fn send_body_then(
        &mut self,
        pieces: &[Bytes],
        last: bool,
        clock: &SendClock,
    ) -> Result<u64, SendError> {
        let encoded;
        let pieces = match self.encoder.as_mut() {
            Some(enc) => {
                let mut out = Vec::with_capacity(pieces.len() + 1);
                for p in pieces {
                    out.push(enc.push(p).map_err(|_| SendError::Io)?);
                }
                if last {
                    if let Some(enc) = self.encoder.take() {
                        out.push(enc.finish().map_err(|_| SendError::Io)?);
                    }
                }
                out.retain(|p| !p.is_empty());
                encoded = out;
                &encoded[..]
            }
            None => pieces,
        };
        let windowed;
        let pieces = match self.window.as_mut() {
            Some(w) => {
                windowed = cut_window(pieces, w);
                &windowed[..]
            }
            None => pieces,
        };
        let size: u64 = pieces.iter().map(|p| p.len() as u64).sum();
        if size == 0 {
            if last {
                self.finish_body(clock).await?;
            }
            return Ok(0);
        }
        self.wire.send_data(pieces, size, last, clock).await
    }

    /// Ends the body of the response being sent (its last chunk, when
    /// chunk-framed; nothing otherwise).
    pub async fn finish_body(&mut self, clock: &SendClock) -> Result<(), SendError> {
        self.finish_body_with(&[], clock).await
    }

    /// [`Client::finish_body`], with trailer fields where the framing can
    /// carry them (HTTP/2, or a chunked HTTP/1 body); elsewhere they are
    /// dropped.
    pub async fn finish_body_with(
        &mut self,
        trailers: &[(Bytes, Bytes)],
        clock: &SendClock,
    ) -> Result<(), SendError> {
        if let Some(enc) = self.encoder.take() {
            let tail = enc.finish().map_err(|_| SendError::Io)?;
            if !tail.is_empty() {
                let n = tail.len() as u64;
                self.wire.send_data(&[tail], n, false, clock).await?;
            }
        }
        self.wire.finish(trailers, clock).await
    }

    /// Reads more bytes into the read buffer; `Ok(0)` at end of stream
    /// (at once for an include, which reads nothing).
    pub async fn read_more(&mut self, limit: Duration) -> Result<usize, ReadError> {
        self.read_more_within(|| limit).await
    }

    /// [`Client::read_more`], with the time it may wait asked for only
    /// when it has to wait (reading the clock for it then).
    async fn read_more_within(
        &mut self,
        limit: impl FnOnce() -> Duration,
    ) -> Result<usize, ReadError> {
        if self.rbuf.capacity() == 0 {
            // The buffers of a connection that held none while idle.
            self.rbuf = spare_read_buffer();
            self.rbuf.reserve(FIRST_RBUF);
            self.take_wbuf();
        }
        self.wire.read(&mut self.rbuf, limit).await
    }

    /// Reads more of a request head. While none of it has come and
    /// nothing is waiting (a connection between requests, mostly idle),
    /// the connection holds no buffers: the bytes that end the wait land
    /// on the stack and the buffers are made again then, as large as
    /// most heads and responses' heads need. `deadline` is asked for when
    /// the wait ends only when it has to wait (see `session::HeadWait`).
    pub async fn read_head_more(
        &mut self,
        deadline: impl FnOnce() -> Instant,
    ) -> Result<usize, ReadError> {
        if !self.rbuf.is_empty() {
            let limit = || deadline().saturating_duration_since(Instant::now());
            return self.read_more_within(limit).await;
        }
        let Some(stream) = self.wire.byte_stream() else {
            return Ok(0);
        };
        if self.rbuf.capacity() > 0 {
            if let Some(ready) = now_or_never(stream.read_buf(&mut self.rbuf)).await {
                return ready.map_err(|_| ReadError::Io);
            }
            keep_read_buffer(std::mem::take(&mut self.rbuf));
            spare::keep(std::mem::take(&mut self.wbuf));
        }
        let (rbuf, wbuf) = (&mut self.rbuf, &mut self.wbuf);
        let read = std::future::poll_fn(|cx| {
            let mut space = [std::mem::MaybeUninit::<u8>::uninit(); FIRST_RBUF];
            let mut got = tokio::io::ReadBuf::uninit(&mut space);
            match std::pin::Pin::new(&mut *stream).poll_read(cx, &mut got) {
                std::task::Poll::Ready(Ok(())) => {
                    let got = got.filled();
                    if !got.is_empty() {
                        if rbuf.capacity() == 0 {
                            *rbuf = spare_read_buffer();
                        }
                        rbuf.reserve(FIRST_RBUF);
                        rbuf.extend_from_slice(got);
                        if wbuf.capacity() == 0 {
                            *wbuf = spare::take(FIRST_WBUF);
                        }
                    }
                    std::task::Poll::Ready(Ok(got.len()))
                }
                std::task::Poll::Ready(Err(e)) => std::task::Poll::Ready(Err(e)),
                std::task::Poll::Pending => std::task::Poll::Pending,
            }
        });
        match self.head_timer.bound(deadline, read).await {
            Some(Ok(n)) => Ok(n),
            Some(Err(_)) => Err(ReadError::Io),
            None => Err(ReadError::Timeout),
        }
    }

    /// Whether the client has sent bytes not yet read (asked of the
    /// socket itself, so that it holds even before the reactor has seen
    /// them). False for a stream without a socket.
    pub fn has_unread(&self) -> bool {
        self.wire.has_unread()
    }

    /// Awaits `fut` while watching the client (see
    /// [`Transport::watching`]). Only for a request whose body has been
    /// read.
    pub async fn watching<F: Future>(
        &mut self,
        fut: F,
        answer_half_closed: bool,
    ) -> Option<F::Output> {
        self.wire
            .watching(&mut self.rbuf, fut, answer_half_closed)
            .await
    }

    /// Sends a response head (the header buffer, as the steps wrote it)
    /// whose body is delimited as `wire` says, followed by `body` pieces
    /// (the whole body when it is at hand, or none). The body that
    /// follows goes through [`Client::send_body`] and ends with
    /// [`Client::finish_body`].
    pub async fn send_head(
        &mut self,
        wire: WireBody,
        body: &[Bytes],
        clock: &SendClock,
    ) -> Result<(), SendError> {
        let result = self.wire.send_head(&self.wbuf, wire, body, clock).await;
        self.wbuf.clear();
        result
    }

    /// [`Client::send_head`] with a whole small body kept in one piece:
    /// written from where it is kept over HTTP/1, copied for HTTP/2 and a
    /// parent page, which take `Bytes`.
    pub async fn send_head_small(
        &mut self,
        wire: WireBody,
        body: &[u8],
        clock: &SendClock,
    ) -> Result<(), SendError> {
        let result = self
            .wire
            .send_head_small(&self.wbuf, wire, body, clock)
            .await;
        self.wbuf.clear();
        result
    }

    /// Sends the head in the header buffer together with the body's first
    /// piece (framed as a chunk when the body is chunked), in one write
    /// where the transport can; the piece's length once sent.
    pub async fn send_head_and_piece(
        &mut self,
        wire: WireBody,
        piece: Bytes,
        clock: &SendClock,
    ) -> Result<u64, SendError> {
        let n = piece.len() as u64;
        let result = self
            .wire
            .send_head_and_piece(&self.wbuf, wire, piece, clock)
            .await;
        self.wbuf.clear();
        result.map(|()| n)
    }

    /// Writes a small complete message with the idle send timeout.
    pub async fn write_small(&mut self, data: &[u8], idle: Duration) -> Result<(), SendError> {
        self.wire.write_small(data, idle).await
    }
}

/// Read buffers a thread keeps for its connections' next reads: a
/// connection that waits for its next request lets its buffer go (an idle
/// connection holds none), and one that ends lets it go too, so a busy
/// thread would otherwise make and free one, past the allocator's
/// per-thread cache, for most requests.
const SPARE_READ_BUFFERS: usize = 8;

thread_local! {
    static SPARE_READ: std::cell::RefCell<Vec<BytesMut>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// An empty read buffer, kept from an earlier connection on this thread
/// when there is one.
pub(crate) fn spare_read_buffer() -> BytesMut {
    SPARE_READ
        .try_with(|spare| spare.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Keeps a read buffer nothing else holds a view of, emptied, for the
/// thread's next read.
pub(crate) fn keep_read_buffer(mut buf: BytesMut) {
    buf.clear();
    // Whole again only if no request head still points into it; a large
    // one (a long body read) is let go.
    if buf.capacity() > 64 * 1024 || !buf.try_reclaim(FIRST_RBUF) {
        return;
    }
    let _ = SPARE_READ.try_with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < SPARE_READ_BUFFERS {
            spare.push(buf);
        }
    });
}

/// The part of `pieces` inside a window (bytes to skip, bytes to send),
/// which moves on past them.
fn cut_window(pieces: &[Bytes], w: &mut (u64, u64)) -> Vec<Bytes> {
    let mut out = Vec::new();
    for p in pieces {
        let mut p = p.clone();
        let skip = w.0.min(p.len() as u64);
        w.0 -= skip;
        p = p.slice(skip as usize..);
        let take = w.1.min(p.len() as u64);
        w.1 -= take;
        if take > 0 {
            out.push(p.slice(..take as usize));
        }
    }
    out
}

#[cfg(test)]
mod window_tests {
    use super::*;

    #[test]
    fn a_read_buffer_let_go_serves_the_threads_next_read() {
        let mut buf = BytesMut::with_capacity(4096);
        buf.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        let at = buf.as_ptr();
        drop(buf.split().freeze());
        keep_read_buffer(buf);
        let again = spare_read_buffer();
        assert!(again.is_empty() && again.capacity() >= FIRST_RBUF);
        let offset = again.as_ptr() as usize - at as usize;
        assert!(offset < 4096, "the same allocation");
        // A large one is let go.
        keep_read_buffer(BytesMut::with_capacity(128 * 1024));
        assert_eq!(spare_read_buffer().capacity(), 0);
    }

    #[test]
    fn a_window_spans_pieces_and_moves_on() {
        let mut w = (2, 4);
        let a = cut_window(
            &[Bytes::from_static(b"abc"), Bytes::from_static(b"defg")],
            &mut w,
        );
        assert_eq!(a.concat(), b"cdef");
        assert_eq!(w, (0, 0));
        assert!(cut_window(&[Bytes::from_static(b"hij")], &mut w).is_empty());
        let mut w = (5, 1);
        assert!(cut_window(&[Bytes::from_static(b"abc")], &mut w).is_empty());
        assert_eq!(
            cut_window(&[Bytes::from_static(b"defg")], &mut w).concat(),
            b"f"
        );
    }
}
