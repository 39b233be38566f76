//! One HTTP/3 request stream as a client's wire: what the steps write as
//! an HTTP/1 response head becomes a HEADERS frame (connection-specific
//! fields dropped, as for HTTP/2), body pieces become DATA frames sent
//! as QUIC's flow control lets them go (a stream that cannot send within
//! the send timeouts is given up), and the request body's DATA frames are
//! handed to the steps framed as HTTP/1 would frame them (as they are
//! under a Content-Length, in chunks otherwise). The framing and QPACK
//! are the `h3` crate's, over `quinn`'s streams, each request stream's
//! first HEADERS frame checked on its way in (`checked`, `fields`, with
//! `huffman` to read its literals) for what `h3` would let through.

use super::deadline::SendClock;
use super::h2::{connection_specific, find_head_end, response_of};
use super::wire::{ReadError, SendError, Transport, WireBody};
use bytes::{Buf, Bytes, BytesMut};
use std::task::{Context, Poll};
use std::time::Duration;

pub(crate) mod checked;
pub(crate) mod fields;
mod huffman;

/// A request stream of an HTTP/3 connection.
pub(crate) type Stream = h3::server::RequestStream<checked::CheckedBidi<Bytes>, Bytes>;
/// Its halves: the response's and the request body's.
type SendHalf = h3::server::RequestStream<h3_quinn::SendStream<Bytes>, Bytes>;
type RecvHalf = h3::server::RequestStream<h3_quinn::RecvStream, Bytes>;

/// A stream and where its response is.
pub(crate) struct H3Stream {
    stream: SendHalf,
    /// The request body's half; gone once handed to a backend stream.
    recv: Option<RecvHalf>,
    /// The request body is delimited by chunks made here (it came
    /// without a Content-Length).
    chunk_body: bool,
    /// The request body's end was handed on.
    recv_done: bool,
    /// The request's Content-Length, which its DATA frames must add up
    /// to (RFC 9114 §4.1.2), and what they have so far.
    declared: Option<u64>,
    received: u64,
    /// The request is a HEAD: its response ends with its head.
    is_head: bool,
    /// Body bytes still to send before the response ends by itself; None
    /// when it ends at `finish`.
    left: Option<u64>,
    /// The response has ended (or the stream was given up).
    ended: bool,
}

impl H3Stream {
    pub fn new(stream: Stream, chunk_body: bool, is_head: bool, declared: Option<u64>) -> H3Stream {
        let (stream, recv) = stream.split();
        H3Stream {
            stream,
            recv: Some(recv),
            chunk_body,
            recv_done: false,
            declared,
            received: 0,
            is_head,
            left: None,
            ended: false,
        }
    }

    /// Whether the response was sent whole.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Runs one send within the clock's next limit.
    async fn timed<F, T, E>(clock: &SendClock, send: F) -> Result<T, SendError>
    where
        F: std::future::Future<Output = Result<T, E>>,
    {
        let limit = clock.next_limit().ok_or(SendError::Timeout)?;
        match tokio::time::timeout(limit, send).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(_)) => Err(SendError::Io),
            Err(_) => Err(SendError::Timeout),
        }
    }

    /// Sends the response head the steps wrote (HTTP/1 text in `head`)
    /// and any `body` pieces.
    async fn head(
        &mut self,
        head: &[u8],
        wire: WireBody,
        body: &[Bytes],
        clock: &SendClock,
    ) -> Result<(), SendError> {
        let response = response_of(head).ok_or(SendError::Io)?;
        let interim = response.status().is_informational();
        Self::timed(clock, self.stream.send_response(response)).await?;
        if interim {
            return Ok(());
        }
        self.left = match wire {
            _ if self.is_head => Some(0),
            WireBody::Bodyless | WireBody::HeadUnknown => Some(0),
            WireBody::Length(n) => Some(n),
            WireBody::Chunked | WireBody::Close => None,
        };
        if self.left == Some(0) {
            return self.end_with(&[], clock).await;
        }
        self.data(body, false, clock).await.map(drop)
    }

    /// Sends body pieces as DATA frames; the response ends with the last
    /// byte a known length allows, or with `last`.
    async fn data(
        &mut self,
        pieces: &[Bytes],
        last: bool,
        clock: &SendClock,
    ) -> Result<u64, SendError> {
        let mut sent = 0u64;
        for piece in pieces.iter().filter(|p| !p.is_empty()) {
            if self.ended {
                break;
            }
            let mut piece = piece.clone();
            if let Some(left) = self.left {
                // Never more than the head announced.
                piece.truncate(left.min(piece.len() as u64) as usize);
            }
            let n = piece.len() as u64;
            Self::timed(clock, self.stream.send_data(piece)).await?;
            sent += n;
            if let Some(left) = &mut self.left {
                *left -= n;
                if *left == 0 {
                    self.end_with(&[], clock).await?;
                }
            }
        }
        if last {
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
        let mut fields = http::HeaderMap::new();
        for (name, value) in trailers {
            let (Ok(name), Ok(value)) = (
                http::HeaderName::from_bytes(name),
                http::HeaderValue::from_bytes(value),
            ) else {
                continue;
            };
            if !connection_specific(name.as_str().as_bytes()) {
                fields.append(name, value);
            }
        }
        self.ended = true;
        if !fields.is_empty() {
            Self::timed(clock, self.stream.send_trailers(fields)).await?;
        }
        Self::timed(clock, self.stream.finish()).await
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
            let next = tokio::time::timeout(limit, recv.recv_data())
                .await
                .map_err(drop)?;
            let Some(mut data) = next.map_err(drop)? else {
                if self.declared.is_some_and(|d| d != self.received) {
                    // Shorter than its Content-Length: malformed.
                    recv.stop_sending(h3::error::Code::H3_MESSAGE_ERROR);
                    return Err(());
                }
                self.recv_done = true;
                if self.chunk_body {
                    rbuf.extend_from_slice(lacquer_http::chunked::LAST_CHUNK);
                    return Ok(lacquer_http::chunked::LAST_CHUNK.len());
                }
                return Ok(0);
            };
            let n = data.remaining();
            if n == 0 {
                continue;
            }
            self.received += n as u64;
            if self.declared.is_some_and(|d| self.received > d) {
                // Longer than its Content-Length: malformed, and not a
                // byte past it is handed on.
                recv.stop_sending(h3::error::Code::H3_MESSAGE_ERROR);
                return Err(());
            }
            if self.chunk_body {
                let mut line = Vec::with_capacity(16);
                lacquer_http::chunked::chunk_header(n, &mut line);
                rbuf.extend_from_slice(&line);
            }
            while data.has_remaining() {
                let chunk = data.chunk();
                let len = chunk.len();
                rbuf.extend_from_slice(chunk);
                data.advance(len);
            }
            if self.chunk_body {
                rbuf.extend_from_slice(b"\r\n");
            }
            return Ok(n);
        }
    }

    /// Resets a stream whose response was not sent whole.
    pub fn abandon(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        self.stream.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
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

    fn body_untouched(&self) -> bool {
        !self.recv_done && self.received == 0 && self.recv.is_some()
    }

    fn take_body(&mut self) -> Option<Box<dyn lacquer_backend::StreamedBody>> {
        if !self.body_untouched() {
            return None;
        }
        self.recv_done = true;
        Some(Box::new(H3Body(self.recv.take()?)))
    }

    fn restore_body(&mut self, body: Box<dyn lacquer_backend::StreamedBody>) {
        if let Ok(body) = body.into_any().downcast::<H3Body>() {
            self.recv = Some(body.0);
            self.recv_done = false;
        }
    }

    /// A client that leaves resets the stream, which the next send sees.
    async fn watching<F: std::future::Future>(
        &mut self,
        _rbuf: &mut BytesMut,
        fut: F,
        _answer_half_closed: bool,
    ) -> Option<F::Output> {
        Some(fut.await)
    }
}

/// A request body's half, for a backend's HTTP/2 stream to send as it
/// comes (see `lacquer_backend::StreamedBody`).
struct H3Body(RecvHalf);

impl lacquer_backend::StreamedBody for H3Body {
    fn poll_piece(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, ()>>> {
        self.0.poll_recv_data(cx).map(|next| match next {
            Ok(Some(mut data)) => Some(Ok(data.copy_to_bytes(data.remaining()))),
            Ok(None) => None,
            Err(_) => Some(Err(())),
        })
    }

    /// (HTTP/3 says a body ended only when the next read finds nothing.)
    fn ended(&self) -> bool {
        false
    }

    /// QUIC's flow control lets more in as the stream is read.
    fn release(&mut self, _n: usize) {}

    fn poll_trailers(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<http::HeaderMap>, ()>> {
        self.0.poll_recv_trailers(cx).map(|r| r.map_err(drop))
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}
