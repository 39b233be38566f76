//! A client connection's bytes: the read buffer (which may hold the next
//! pipelined request; dropped while the connection idles), the header
//! buffer, and writes bounded by `send_timeout` and `idle_send_timeout`.
//! An ESI sub-request has a client too, whose "connection" is the channel
//! its parent reads the fragment from: heads are dropped there and body
//! bytes go unframed; an HTTP/2 stream's client writes frames
//! (`transport::h2`).

use super::deadline::{SendClock, SessTimeouts, WaitTimer};
pub(crate) use super::req_body::{BodyError, ReqBody};
pub(crate) use super::stream::{ClientStream, SessAddrs};
pub(crate) use super::wire::{Piece, ReadError, SendError, WireBody};
use bytes::{Bytes, BytesMut};
use lacquer_core::spare;
use std::future::Future;
use std::io::IoSlice;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// Where a client's responses go.
pub(crate) enum Wire {
    Stream(Box<dyn ClientStream>),
    /// The parent of an ESI include.
    Fragment(mpsc::Sender<Piece>),
    /// One stream of an HTTP/2 connection.
    H2(Box<super::h2::H2Stream>),
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
    /// The response being sent has a chunk-framed body.
    chunked: bool,
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

    pub fn new(stream: Box<dyn ClientStream>, addrs: std::sync::Arc<SessAddrs>) -> Self {
        let fd = stream.socket().map(|s| std::os::fd::AsRawFd::as_raw_fd(&s));
        Client {
            fd,
            sess: SessTimeouts::default(),
            wire: Wire::Stream(stream),
            // Made when the first request comes (read_head_more).
            rbuf: BytesMut::new(),
            wbuf: Vec::new(),
            addrs,
            key: spare::take(KEY_ROOM),
            chunked: false,
            window: None,
            encoder: None,
            head_timer: WaitTimer::default(),
        }
    }

    /// One stream of an HTTP/2 connection, `fd` the connection's socket.
    pub fn for_h2_stream(
        stream: super::h2::H2Stream,
        addrs: std::sync::Arc<SessAddrs>,
        fd: Option<i32>,
    ) -> Self {
        Client {
            fd,
            sess: SessTimeouts::default(),
            wire: Wire::H2(Box::new(stream)),
            rbuf: BytesMut::new(),
            wbuf: spare::take(FIRST_WBUF),
            addrs,
            key: spare::take(KEY_ROOM),
            chunked: false,
            window: None,
            encoder: None,
            head_timer: WaitTimer::default(),
        }
    }

    /// Takes the connection's stream away (to speak HTTP/2 over it); the
    /// client is left with nowhere to write.
    pub fn take_stream(&mut self) -> Option<Box<dyn ClientStream>> {
        let (closed, _) = mpsc::channel(1);
        match std::mem::replace(&mut self.wire, Wire::Fragment(closed)) {
            Wire::Stream(s) => Some(s),
            other => {
                self.wire = other;
                None
            }
        }
    }

    /// The client of an ESI include, writing to `tx` and otherwise like
    /// its parent's, with `socket` for socket options.
    pub fn fragment(tx: mpsc::Sender<Piece>, parent: &Client, socket: Option<i32>) -> Self {
        Client {
            wire: Wire::Fragment(tx),
            rbuf: BytesMut::new(),
            wbuf: spare::take(512),
            addrs: parent.addrs.clone(),
            key: spare::take(KEY_ROOM),
            fd: socket,
            sess: parent.sess,
            chunked: false,
            window: None,
            encoder: None,
            head_timer: WaitTimer::default(),
        }
    }

    /// A descriptor of its own for the client socket (close-on-exec), so
    /// an ESI page's includes can reach its options even after the
    /// connection closes; None for an include.
    pub fn duplicate_socket(&self) -> Option<std::os::fd::OwnedFd> {
        match &self.wire {
            Wire::Stream(stream) => stream.socket().and_then(|s| s.try_clone_to_owned().ok()),
            Wire::H2(h2) => h2.socket().and_then(|s| s.try_clone().ok()),
            Wire::Fragment(_) => None,
        }
    }

    /// The connection's stream, unless this is an ESI include.
    pub fn stream(&mut self) -> Option<&mut dyn ClientStream> {
        match &mut self.wire {
            Wire::Stream(s) => Some(&mut **s),
            Wire::Fragment(_) | Wire::H2(_) => None,
        }
    }

    /// The HTTP/2 stream this client is, if it is one.
    pub fn h2(&mut self) -> Option<&mut super::h2::H2Stream> {
        match &mut self.wire {
            Wire::H2(s) => Some(s),
            _ => None,
        }
    }

    /// Whether this client is an HTTP/2 stream.
    pub fn is_h2(&self) -> bool {
        matches!(self.wire, Wire::H2(_))
    }

    pub fn is_fragment(&self) -> bool {
        matches!(self.wire, Wire::Fragment(_))
    }

    /// Tells an include's parent that its body is incomplete.
    pub async fn send_failed(&mut self) {
        if let Wire::Fragment(tx) = &self.wire {
            let _ = tx.send(Piece::Failed).await;
        }
    }

    /// Hands an include's parent deflate data to splice (only on an
    /// include's wire).
    pub async fn send_deflated(
        &mut self,
        data: Vec<Bytes>,
        crc: u32,
        len: u64,
    ) -> Result<(), SendError> {
        match &self.wire {
            Wire::Fragment(tx) => tx
                .send(Piece::Deflated { data, crc, len })
                .await
                .map_err(|_| SendError::Io),
            Wire::Stream(_) | Wire::H2(_) => Err(SendError::Io),
        }
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
        self.send_pieces(pieces, size, last, clock).await
    }

    /// Writes `size` bytes of body pieces framed as the head said, the
    /// body's end with them when `last`.
    async fn send_pieces(
        &mut self,
        pieces: &[Bytes],
        size: u64,
        last: bool,
        clock: &SendClock,
    ) -> Result<u64, SendError> {
        let chunked = self.chunked;
        if last {
            self.chunked = false;
        }
        match &mut self.wire {
            Wire::Fragment(tx) => {
                for p in pieces.iter().filter(|p| !p.is_empty()) {
                    tx.send(Piece::Data(p.clone()))
                        .await
                        .map_err(|_| SendError::Io)?;
                }
            }
            Wire::Stream(stream) if chunked => {
                let mut size_line = Vec::with_capacity(16);
                lacquer_http::chunked::chunk_header(size as usize, &mut size_line);
                let mut parts: Vec<&[u8]> = Vec::with_capacity(pieces.len() + 3);
                parts.push(&size_line);
                parts.extend(pieces.iter().map(|b| &b[..]));
                parts.push(b"\r\n");
                if last {
                    parts.push(lacquer_http::chunked::LAST_CHUNK);
                }
                write_gathered(&mut **stream, &[], &parts, clock).await?;
            }
            Wire::Stream(stream) => write_gathered(&mut **stream, &[], pieces, clock).await?,
            Wire::H2(h2) => return h2.send_data(pieces, last, clock).await,
        }
        Ok(size)
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
                self.send_pieces(&[tail], n, false, clock).await?;
            }
        }
        if let Wire::H2(h2) = &mut self.wire {
            return h2.finish_with(trailers);
        }
        if !std::mem::take(&mut self.chunked) {
            return Ok(());
        }
        if trailers.is_empty() {
            return self
                .write_parts(&[lacquer_http::chunked::LAST_CHUNK], clock)
                .await;
        }
        let mut end = b"0\r\n".to_vec();
        for (name, value) in trailers {
            end.extend_from_slice(name);
            end.extend_from_slice(b": ");
            end.extend_from_slice(value);
            end.extend_from_slice(b"\r\n");
        }
        end.extend_from_slice(b"\r\n");
        self.write_parts(&[&end], clock).await
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
        } else if self.rbuf.capacity() - self.rbuf.len() < 1024 {
            self.rbuf.reserve(8192);
        }
        let stream = match &mut self.wire {
            Wire::Stream(stream) => stream,
            Wire::H2(h2) => {
                return h2
                    .read_into(&mut self.rbuf, limit())
                    .await
                    .map_err(|()| ReadError::Io)
            }
            Wire::Fragment(_) => return Ok(0),
        };
        // Bytes already waiting (a pipelined or quick client) are taken
        // without arming a timer.
        if let Some(ready) = now_or_never(stream.read_buf(&mut self.rbuf)).await {
            return ready.map_err(|_| ReadError::Io);
        }
        match tokio::time::timeout(limit(), stream.read_buf(&mut self.rbuf)).await {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(_)) => Err(ReadError::Io),
            Err(_) => Err(ReadError::Timeout),
        }
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
        let Wire::Stream(stream) = &mut self.wire else {
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
            match std::pin::Pin::new(&mut **stream).poll_read(cx, &mut got) {
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
        let Wire::Stream(stream) = &self.wire else {
            return false;
        };
        let Some(socket) = stream.socket() else {
            return false;
        };
        // The socket is non-blocking: with nothing there, this fails at
        // once (WouldBlock).
        let mut byte = [std::mem::MaybeUninit::<u8>::uninit()];
        socket2::SockRef::from(&socket)
            .peek(&mut byte)
            .is_ok_and(|n| n > 0)
    }

    /// Awaits `fut` while watching the client's socket, so that a client
    /// that leaves is noticed at once instead of when its response is
    /// written: `None` when it closed or reset (a half-close is waited
    /// out when `answer_half_closed`). Bytes it sends meanwhile
    /// (a pipelined request) are kept for later, and a client sending a
    /// lot ahead is no longer watched. Only for a request whose body has
    /// been read. An include is not watched: its page cancels it.
    pub async fn watching<F: Future>(
        &mut self,
        fut: F,
        answer_half_closed: bool,
    ) -> Option<F::Output> {
        /// A client sending this much ahead is not watched further.
        const WATCH_LIMIT: usize = 64 * 1024;
        if let Wire::H2(h2) = &mut self.wire {
            return h2.watching(fut).await;
        }
        let mut fut = std::pin::pin!(fut);
        loop {
            if self.is_fragment() || self.rbuf.len() > WATCH_LIMIT {
                return Some(fut.await);
            }
            let mut read = std::pin::pin!(self.read_more(Duration::from_secs(86_400)));
            let event = std::future::poll_fn(|cx| {
                if let std::task::Poll::Ready(out) = fut.as_mut().poll(cx) {
                    return std::task::Poll::Ready(Ok(out));
                }
                read.as_mut().poll(cx).map(Err)
            })
            .await;
            match event {
                Ok(out) => return Some(out),
                Err(Ok(n)) if n > 0 => continue,
                // End of stream: a close, or a half-close after which
                // the client still reads (`answer_half_closed`).
                Err(Ok(_)) if answer_half_closed => return Some(fut.await),
                Err(_) => return None,
            }
        }
    }

    /// Writes every byte of `parts`, gathered, within the clock's limits.
    async fn write_parts(&mut self, parts: &[&[u8]], clock: &SendClock) -> Result<(), SendError> {
        match &mut self.wire {
            Wire::Stream(stream) => write_gathered(&mut **stream, &[], parts, clock).await,
            // An include's parent takes bodies through `send_body` only,
            // and an HTTP/2 stream has no chunks.
            Wire::Fragment(_) | Wire::H2(_) => Ok(()),
        }
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
        if matches!(self.wire, Wire::Stream(_)) {
            return self
                .send_stream_head(wire == WireBody::Chunked, body, clock)
                .await;
        }
        self.chunked = false;
        let result = match &mut self.wire {
            Wire::H2(h2) => h2.send_head(&self.wbuf, wire, body, clock).await,
            Wire::Stream(_) | Wire::Fragment(_) => self.send_body(body, clock).await.map(drop),
        };
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
        if !matches!(self.wire, Wire::Stream(_)) {
            return self
                .send_head(wire, &[Bytes::copy_from_slice(body)], clock)
                .await;
        }
        self.send_stream_head(wire == WireBody::Chunked, &[body], clock)
            .await
    }

    /// Sends the head in the header buffer together with the body's first
    /// piece (framed as a chunk when the body is chunked), in one write.
    pub async fn send_head_and_piece(
        &mut self,
        wire: WireBody,
        piece: Bytes,
        clock: &SendClock,
    ) -> Result<u64, SendError> {
        if !matches!(self.wire, Wire::Stream(_)) || wire != WireBody::Chunked || piece.is_empty() {
            let n = piece.len() as u64;
            self.send_head(wire, &[piece], clock).await?;
            return Ok(n);
        }
        let mut size_line = Vec::with_capacity(16);
        lacquer_http::chunked::chunk_header(piece.len(), &mut size_line);
        let parts: [&[u8]; 3] = [&size_line, &piece, b"\r\n"];
        self.send_stream_head(true, &parts, clock)
            .await
            .map(|()| piece.len() as u64)
    }

    /// The HTTP/1 tail of the sends above: the head in the header buffer
    /// and `parts` after it in one gathered write, then the buffer
    /// emptied. `chunked` says the body that follows is.
    async fn send_stream_head<P: AsRef<[u8]>>(
        &mut self,
        chunked: bool,
        parts: &[P],
        clock: &SendClock,
    ) -> Result<(), SendError> {
        self.chunked = chunked;
        let result = match &mut self.wire {
            Wire::Stream(stream) => write_gathered(&mut **stream, &self.wbuf, parts, clock).await,
            Wire::Fragment(_) | Wire::H2(_) => Ok(()),
        };
        self.wbuf.clear();
        result
    }

    /// Writes a small complete message with the idle send timeout.
    pub async fn write_small(&mut self, data: &[u8], idle: Duration) -> Result<(), SendError> {
        let stream = match &mut self.wire {
            Wire::Stream(stream) => stream,
            Wire::H2(h2) => return h2.write_small(data, idle).await,
            Wire::Fragment(_) => return Ok(()),
        };
        match tokio::time::timeout(idle, stream.write_all(data)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(SendError::Io),
            Err(_) => Err(SendError::Timeout),
        }
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

/// Polls an I/O operation once: its result if it is ready now, None
/// if it would wait (it is then dropped, having done nothing, and the
/// caller waits for it again with a deadline).
async fn now_or_never<F: Future>(fut: F) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| match fut.as_mut().poll(cx) {
        std::task::Poll::Ready(out) => std::task::Poll::Ready(Some(out)),
        std::task::Poll::Pending => std::task::Poll::Ready(None),
    })
    .await
}

/// Slices handed to one `writev`; more pieces go in further calls.
const IOV_BATCH: usize = 16;

/// Writes `head` and then every piece, gathered in batches on the stack,
/// with each write bounded by the clock.
async fn write_gathered<B: AsRef<[u8]>>(
    stream: &mut dyn ClientStream,
    head: &[u8],
    pieces: &[B],
    clock: &SendClock,
) -> Result<(), SendError> {
    let mut next = 0;
    let mut head_pending = !head.is_empty();
    let mut first = true;
    loop {
        let mut batch = [IoSlice::new(&[]); IOV_BATCH];
        let mut n = 0;
        if head_pending {
            batch[0] = IoSlice::new(head);
            n = 1;
            head_pending = false;
        }
        while n < IOV_BATCH && next < pieces.len() {
            let piece = pieces[next].as_ref();
            next += 1;
            if !piece.is_empty() {
                batch[n] = IoSlice::new(piece);
                n += 1;
            }
        }
        if n == 0 {
            return Ok(());
        }
        if !std::mem::take(&mut first) {
            // More pieces than one write gathers.
            lacquer_core::counters::COUNTERS.inc(lacquer_core::counters::Counter::http1_iovs_flush);
        }
        let mut rest: &mut [IoSlice<'_>] = &mut batch[..n];
        while !rest.is_empty() {
            // A write the socket takes at once needs no timer nor clock
            // (most responses); one that has to wait is bounded by the
            // clock.
            let at_once = now_or_never(stream.write_vectored(rest)).await;
            let written = match at_once {
                Some(Ok(0)) | Some(Err(_)) => return Err(SendError::Io),
                Some(Ok(w)) => w,
                None => {
                    let limit = clock.next_limit().ok_or(SendError::Timeout)?;
                    match tokio::time::timeout(limit, stream.write_vectored(rest)).await {
                        Ok(Ok(0)) | Ok(Err(_)) => return Err(SendError::Io),
                        Ok(Ok(w)) => w,
                        Err(_) => return Err(SendError::Timeout),
                    }
                }
            };
            IoSlice::advance_slices(&mut rest, written);
        }
    }
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
