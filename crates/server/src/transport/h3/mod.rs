//! One HTTP/3 request stream as a client's wire, HTTP/3 itself written
//! here over `quinn`'s QUIC streams: what the steps write as an HTTP/1
//! response head becomes a HEADERS frame (`qpack`; connection-specific
//! fields dropped, as for HTTP/2), body pieces become DATA frames sent as
//! QUIC's flow control lets them go (a stream that cannot send within the
//! send timeouts is given up), and the request body's DATA frames
//! (`frames`) are handed to the steps framed as HTTP/1 would frame them
//! (as they are under a Content-Length, in chunks otherwise). The wire
//! format itself (frames, QPACK) is `lacquer_http::h3`'s.

use super::deadline::SendClock;
use super::h2::find_head_end;
use super::wire::{ReadError, SendError, Transport, WireBody};
use bytes::{Bytes, BytesMut};
use frames::{code, Frame, FrameError, FrameReader};
use std::future::Future;
use std::task::{Context, Poll};
use std::time::Duration;

pub(crate) mod frames;
pub(crate) use lacquer_http::h3::qpack;

/// An HTTP/3 error code as QUIC carries it.
pub(crate) fn varint_code(code: u64) -> quinn::VarInt {
    quinn::VarInt::from_u64(code).unwrap_or(quinn::VarInt::MAX)
}

/// Closes `conn` with an HTTP/3 error for what a stream's frames broke.
pub(crate) fn close_for(conn: &quinn::Connection, e: &FrameError) {
    match e {
        FrameError::Truncated => conn.close(varint_code(code::FRAME_ERROR), b"frame cut short"),
        FrameError::TooLarge(_) => {
            conn.close(varint_code(code::EXCESSIVE_LOAD), b"frame too large")
        }
        FrameError::Reserved(_) => {
            conn.close(varint_code(code::FRAME_UNEXPECTED), b"an HTTP/2 frame type")
        }
        FrameError::Stream => {}
    }
}

/// A request stream: its response's half, and its request body's.
pub(crate) struct H3Stream {
    conn: quinn::Connection,
    send: quinn::SendStream,
    /// The request body's frames; gone once handed to a backend stream.
    recv: Option<FrameReader>,
    /// The request body is delimited by chunks made here (it came
    /// without a Content-Length).
    chunk_body: bool,
    /// The request body's end was handed on.
    recv_done: bool,
    /// The request's Content-Length, which its DATA frames must add up
    /// to (RFC 9114 §4.1.2), and what they have so far.
    declared: Option<u64>,
    received: u64,
    /// The most a trailer section may decode to.
    header_list: u64,
    /// The request is a HEAD: its response ends with its head.
    is_head: bool,
    /// Body bytes still to send before the response ends by itself; None
    /// when it ends at `finish`.
    left: Option<u64>,
    /// The response has ended (or the stream was given up).
    ended: bool,
    /// The client stopped the stream (or its connection went) before the
    /// response was sent whole.
    client_stopped: bool,
}

/// What [`H3Stream::new`] needs to know of the request.
pub(crate) struct Framing {
    pub chunk_body: bool,
    pub is_head: bool,
    pub declared: Option<u64>,
    pub header_list: u64,
}

impl H3Stream {
    pub fn new(
        conn: quinn::Connection,
        send: quinn::SendStream,
        recv: FrameReader,
        framing: Framing,
    ) -> H3Stream {
        H3Stream {
            conn,
            send,
            recv: Some(recv),
            chunk_body: framing.chunk_body,
            recv_done: false,
            declared: framing.declared,
            received: 0,
            header_list: framing.header_list,
            is_head: framing.is_head,
            left: None,
            ended: false,
            client_stopped: false,
        }
    }

    /// Whether the client gave the stream up before its response was
    /// sent whole.
    pub fn client_stopped(&self) -> bool {
        self.client_stopped
    }

    /// Whether the response was sent whole.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Writes `chunks` within the clock's next limit.
    async fn write(&mut self, chunks: &mut [Bytes], clock: &SendClock) -> Result<(), SendError> {
        let limit = clock.next_limit().ok_or(SendError::Timeout)?;
        match tokio::time::timeout(limit, self.send.write_all_chunks(chunks)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(quinn::WriteError::Stopped(_) | quinn::WriteError::ConnectionLost(_))) => {
                self.client_stopped = true;
                Err(SendError::Io)
            }
            Ok(Err(_)) => Err(SendError::Io),
            Err(_) => Err(SendError::Timeout),
        }
    }

    /// Sends the response head the steps wrote (HTTP/1 text in `head`)
    /// and any `body` pieces, in one write where they fit.
    async fn head(
        &mut self,
        head: &[u8],
        wire: WireBody,
        body: &[Bytes],
        clock: &SendClock,
    ) -> Result<(), SendError> {
        let frame = qpack::encode_response(head).ok_or(SendError::Io)?;
        let interim = head.get(9) == Some(&b'1');
        if interim {
            return self.write(&mut [frame.freeze()], clock).await;
        }
        self.left = match wire {
            _ if self.is_head => Some(0),
            WireBody::Bodyless | WireBody::HeadUnknown => Some(0),
            WireBody::Length(n) => Some(n),
            WireBody::Chunked | WireBody::Close => None,
        };
        let mut chunks = Vec::with_capacity(1 + 2 * body.len());
        chunks.push(frame.freeze());
        self.data_chunks(body, &mut chunks);
        self.write(&mut chunks, clock).await?;
        if self.left == Some(0) {
            self.end_with(&[], clock).await?;
        }
        Ok(())
    }

    /// Appends DATA frames for `pieces` to `chunks`, never more than the
    /// head announced; the bytes they carry.
    fn data_chunks(&mut self, pieces: &[Bytes], chunks: &mut Vec<Bytes>) -> u64 {
        let mut sent = 0;
        for piece in pieces.iter().filter(|p| !p.is_empty()) {
            let mut piece = piece.clone();
            if let Some(left) = &mut self.left {
                piece.truncate((*left).min(piece.len() as u64) as usize);
                *left -= piece.len() as u64;
            }
            if piece.is_empty() {
                break;
            }
            sent += piece.len() as u64;
            chunks.push(frames::data_header(piece.len()));
            chunks.push(piece);
        }
        sent
    }

    /// Sends body pieces as DATA frames; the response ends with the last
    /// byte a known length allows, or with `last`.
    async fn data(
        &mut self,
        pieces: &[Bytes],
        last: bool,
        clock: &SendClock,
    ) -> Result<u64, SendError> {
        if self.ended {
            return Ok(0);
        }
        let mut chunks = Vec::with_capacity(2 * pieces.len());
        let sent = self.data_chunks(pieces, &mut chunks);
        if !chunks.is_empty() {
            self.write(&mut chunks, clock).await?;
        }
        if last || self.left == Some(0) {
            self.end_with(&[], clock).await?;
        }
        Ok(sent)
    }

    /// Ends the response, with trailer fields (a HEADERS frame after the
    /// body) where there are any HTTP/3 can carry.
    async fn end_with(
        &mut self,
        trailers: &[(Bytes, Bytes)],
        clock: &SendClock,
    ) -> Result<(), SendError> {
        if self.ended {
            return Ok(());
        }
        self.ended = true;
        if let Some(frame) = qpack::encode_trailers(trailers) {
            self.write(&mut [frame.freeze()], clock).await?;
        }
        self.send.finish().map_err(|_| SendError::Io)
    }

    /// Sends a small complete HTTP/1 message (head and body) as the
    /// response.
    async fn small(&mut self, data: &[u8], idle: Duration) -> Result<(), SendError> {
        let end = find_head_end(data).ok_or(SendError::Io)?;
        let (head, body) = data.split_at(end);
        let clock = SendClock::new(idle, idle);
        let body = Bytes::copy_from_slice(body);
        let wire = WireBody::Length(body.len() as u64);
        self.head(head, wire, &[body], &clock).await
    }

    /// Reads the next DATA frame of the request body into `rbuf`, framed
    /// as the steps expect; `Ok(0)` at its end.
    async fn read_into(&mut self, rbuf: &mut BytesMut, limit: Duration) -> Result<usize, ()> {
        loop {
            let Some(recv) = self.recv.as_mut().filter(|_| !self.recv_done) else {
                return Ok(0);
            };
            let next = tokio::time::timeout(limit, recv.next())
                .await
                .map_err(drop)?;
            let data = match next {
                Ok(Frame::Data(data)) => data,
                Ok(Frame::Whole(frames::HEADERS, block)) => {
                    // Trailers: checked, and the body's end.
                    if qpack::decode_trailers(&block, self.header_list).is_err() {
                        self.refuse_body();
                        return Err(());
                    }
                    // The stream's end must follow, as any piece of the
                    // body would, within the limit.
                    let end = tokio::time::timeout(limit, recv.next()).await;
                    match end.map_err(drop)? {
                        Ok(Frame::End) => {}
                        Ok(_) => {
                            self.conn
                                .close(varint_code(code::FRAME_UNEXPECTED), b"after trailers");
                            return Err(());
                        }
                        Err(e) => {
                            close_for(&self.conn, &e);
                            return Err(());
                        }
                    }
                    return self.body_ended(rbuf);
                }
                Ok(Frame::Whole(..)) => {
                    self.conn
                        .close(varint_code(code::FRAME_UNEXPECTED), b"on a request stream");
                    return Err(());
                }
                Ok(Frame::End) => return self.body_ended(rbuf),
                Err(e) => {
                    close_for(&self.conn, &e);
                    return Err(());
                }
            };
            let n = data.len();
            if n == 0 {
                continue;
            }
            self.received += n as u64;
            if self.declared.is_some_and(|d| self.received > d) {
                // Longer than its Content-Length: malformed, and not a
                // byte past it is handed on.
                self.refuse_body();
                return Err(());
            }
            if self.chunk_body {
                let mut line = Vec::with_capacity(16);
                lacquer_http::chunked::chunk_header(n, &mut line);
                rbuf.extend_from_slice(&line);
            }
            rbuf.extend_from_slice(&data);
            if self.chunk_body {
                rbuf.extend_from_slice(b"\r\n");
            }
            return Ok(n);
        }
    }

    /// The request body ended: checked against its Content-Length.
    fn body_ended(&mut self, rbuf: &mut BytesMut) -> Result<usize, ()> {
        if self.declared.is_some_and(|d| d != self.received) {
            // Shorter than its Content-Length: malformed.
            self.refuse_body();
            return Err(());
        }
        self.recv_done = true;
        if self.chunk_body {
            rbuf.extend_from_slice(lacquer_http::chunked::LAST_CHUNK);
            return Ok(lacquer_http::chunked::LAST_CHUNK.len());
        }
        Ok(0)
    }

    /// A malformed request body: the stream is reset both ways.
    fn refuse_body(&mut self) {
        if let Some(recv) = &mut self.recv {
            recv.stop(code::MESSAGE_ERROR);
        }
        self.ended = true;
        let _ = self.send.reset(varint_code(code::MESSAGE_ERROR));
    }

    /// Resets a stream whose response was not sent whole.
    pub fn abandon(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        let _ = self.send.reset(varint_code(code::INTERNAL_ERROR));
    }
}

impl Transport for H3Stream {
    fn multiplexed(&self) -> bool {
        true
    }

    fn resp_protocol(&self) -> Option<&'static [u8]> {
        Some(b"HTTP/3.0")
    }

    /// A QUIC connection has no socket of its own (its datagrams share
    /// the listener's).
    fn duplicate_socket(&self) -> Option<std::os::fd::OwnedFd> {
        None
    }

    async fn send_head(
        &mut self,
        head: &[u8],
        wire: WireBody,
        body: &[Bytes],
        clock: &SendClock,
    ) -> Result<(), SendError> {
        self.head(head, wire, body, clock).await
    }

    async fn send_data(
        &mut self,
        pieces: &[Bytes],
        _size: u64,
        last: bool,
        clock: &SendClock,
    ) -> Result<u64, SendError> {
        self.data(pieces, last, clock).await
    }

    async fn finish(
        &mut self,
        trailers: &[(Bytes, Bytes)],
        clock: &SendClock,
    ) -> Result<(), SendError> {
        self.end_with(trailers, clock).await
    }

    async fn write_small(&mut self, data: &[u8], idle: Duration) -> Result<(), SendError> {
        self.small(data, idle).await
    }

    /// A HEADERS frame each.
    async fn send_interim(&mut self, heads: &[Vec<u8>], idle: Duration) -> Result<(), SendError> {
        for head in heads {
            self.small(head, idle).await?;
        }
        Ok(())
    }

    async fn read(
        &mut self,
        rbuf: &mut BytesMut,
        limit: impl FnOnce() -> Duration,
    ) -> Result<usize, ReadError> {
        self.read_into(rbuf, limit())
            .await
            .map_err(|()| ReadError::Io)
    }

    /// A client that gives up a request stops the stream (STOP_SENDING),
    /// or its connection goes: either is seen at once.
    async fn watching<F: std::future::Future>(
        &mut self,
        _rbuf: &mut BytesMut,
        fut: F,
        _answer_half_closed: bool,
    ) -> Option<F::Output> {
        if self.ended {
            return Some(fut.await);
        }
        let mut fut = std::pin::pin!(fut);
        let mut stopped = std::pin::pin!(self.send.stopped());
        let mut watching = true;
        let out = std::future::poll_fn(|cx| {
            if let Poll::Ready(out) = fut.as_mut().poll(cx) {
                return Poll::Ready(Some(out));
            }
            if watching {
                match stopped.as_mut().poll(cx) {
                    // Stopped by the client, or the connection lost.
                    Poll::Ready(Ok(Some(_)) | Err(_)) => return Poll::Ready(None),
                    // (All sent and acknowledged: nothing more to see.)
                    Poll::Ready(Ok(None)) => watching = false,
                    Poll::Pending => {}
                }
            }
            Poll::Pending
        })
        .await;
        self.client_stopped |= out.is_none();
        out
    }

    fn body_untouched(&self) -> bool {
        !self.recv_done && self.received == 0 && self.recv.is_some()
    }

    fn take_body(&mut self) -> Option<Box<dyn lacquer_backend::StreamedBody>> {
        if !self.body_untouched() {
            return None;
        }
        self.recv_done = true;
        Some(Box::new(H3Body {
            frames: self.recv.take()?,
            conn: self.conn.clone(),
            header_list: self.header_list,
            trailers: None,
        }))
    }

    fn restore_body(&mut self, body: Box<dyn lacquer_backend::StreamedBody>) {
        if let Ok(body) = body.into_any().downcast::<H3Body>() {
            self.recv = Some(body.frames);
            self.recv_done = false;
        }
    }
}

/// A request body's frames, for a backend's HTTP/2 stream to send as
/// they come (see `lacquer_backend::StreamedBody`).
struct H3Body {
    frames: FrameReader,
    conn: quinn::Connection,
    header_list: u64,
    /// The trailer section, once read.
    trailers: Option<http::HeaderMap>,
}

impl lacquer_backend::StreamedBody for H3Body {
    fn poll_piece(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, ()>>> {
        loop {
            let frame = match std::task::ready!(self.frames.poll_next(cx)) {
                Ok(frame) => frame,
                Err(e) => {
                    close_for(&self.conn, &e);
                    return Poll::Ready(Some(Err(())));
                }
            };
            return Poll::Ready(match frame {
                Frame::Data(_) if self.trailers.is_some() => {
                    self.conn
                        .close(varint_code(code::FRAME_UNEXPECTED), b"DATA after trailers");
                    Some(Err(()))
                }
                Frame::Data(data) if data.is_empty() => continue,
                Frame::Data(data) => Some(Ok(data)),
                Frame::End => None,
                Frame::Whole(frames::HEADERS, block) if self.trailers.is_none() => {
                    let Ok(fields) = qpack::decode_trailers(&block, self.header_list) else {
                        self.frames.stop(code::MESSAGE_ERROR);
                        return Poll::Ready(Some(Err(())));
                    };
                    let mut map = http::HeaderMap::new();
                    for (name, value) in fields {
                        if let (Ok(n), Ok(v)) = (
                            http::HeaderName::from_bytes(&name),
                            http::HeaderValue::from_bytes(&value),
                        ) {
                            map.append(n, v);
                        }
                    }
                    self.trailers = Some(map);
                    continue;
                }
                Frame::Whole(..) => {
                    self.conn
                        .close(varint_code(code::FRAME_UNEXPECTED), b"on a request stream");
                    Some(Err(()))
                }
            });
        }
    }

    /// (HTTP/3 says a body ended only when the next read finds nothing.)
    fn ended(&self) -> bool {
        false
    }

    /// QUIC's flow control lets more in as the stream is read.
    fn release(&mut self, _n: usize) {}

    fn poll_trailers(
        &mut self,
        _cx: &mut Context<'_>,
    ) -> Poll<Result<Option<http::HeaderMap>, ()>> {
        Poll::Ready(Ok(self.trailers.take()))
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}
