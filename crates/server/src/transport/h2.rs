//! One HTTP/2 stream as a client's wire: what the steps write as an
//! HTTP/1 response head becomes a HEADERS frame (connection-specific
//! fields dropped), body pieces become DATA frames sent as the peer's
//! flow-control window allows (a stream that waits for window longer
//! than `h2_window_timeout` is reset), and the request body's DATA frames
//! are handed to the steps framed as HTTP/1 would frame them (as they
//! are under a Content-Length, in chunks otherwise), so the steps need
//! nothing of their own for HTTP/2.

use super::deadline::SendClock;
use super::wire::{ReadError, SendError, Transport, WireBody};
use bytes::{Bytes, BytesMut};
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use std::task::Poll;
use std::time::Duration;

/// The largest DATA frame payload asked for at once.
const DATA_STEP: usize = 16 * 1024;

/// A stream's two halves and where its response is.
pub(crate) struct H2Stream {
    respond: SendResponse<Bytes>,
    send: Option<SendStream<Bytes>>,
    /// The request body's half (None once handed to a backend stream).
    recv: Option<RecvStream>,
    /// Some of the request body has been read.
    body_read: bool,
    /// The request body is delimited by chunks made here (it came
    /// without a Content-Length).
    chunk_body: bool,
    /// The request body's end was handed on.
    recv_done: bool,
    /// The request is a HEAD: its response ends with its head.
    is_head: bool,
    /// Body bytes still to send before the stream ends by itself (a
    /// response with a length); None when the body ends at
    /// `finish` (its length was not known).
    left: Option<u64>,
    /// The stream has ended (or was reset).
    ended: bool,
    window_timeout: Duration,
    /// The connection's socket (one duplicate for all its streams), for
    /// an ESI page's includes.
    socket: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
}

impl H2Stream {
    pub fn new(
        respond: SendResponse<Bytes>,
        recv: RecvStream,
        chunk_body: bool,
        is_head: bool,
        window_timeout: Duration,
        socket: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
    ) -> H2Stream {
        let recv_done = recv.is_end_stream();
        H2Stream {
            respond,
            send: None,
            recv: Some(recv),
            body_read: false,
            chunk_body,
            recv_done,
            is_head,
            left: None,
            ended: false,
            window_timeout,
            socket,
        }
    }

    pub fn socket(&self) -> Option<&std::os::fd::OwnedFd> {
        self.socket.as_deref()
    }

    /// Whether the response was sent whole.
    pub fn ended(&self) -> bool {
        self.ended
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
        let status = response.status().as_u16();
        if (100..200).contains(&status) {
            // An interim response (103 Early Hints and the like).
            return self
                .respond
                .send_informational(response)
                .map_err(|_| SendError::Io);
        }
        self.left = match wire {
            _ if self.is_head => Some(0),
            WireBody::Bodyless | WireBody::HeadUnknown => Some(0),
            WireBody::Length(n) => Some(n),
            WireBody::Chunked | WireBody::Close => None,
        };
        let end = self.left == Some(0);
        let send = self
            .respond
            .send_response(response, end)
            .map_err(|_| SendError::Io)?;
        if end {
            self.ended = true;
            return Ok(());
        }
        self.send = Some(send);
        self.data(body, false, clock).await.map(drop)
    }

    /// Sends body pieces as DATA frames within the peer's window; the
    /// stream ends with the last byte a known length allows, or with
    /// `last`.
    async fn data(
        &mut self,
        pieces: &[Bytes],
        last: bool,
        clock: &SendClock,
    ) -> Result<u64, SendError> {
        let mut sent = 0u64;
        let count = pieces.iter().filter(|p| !p.is_empty()).count();
        for (i, piece) in pieces.iter().filter(|p| !p.is_empty()).enumerate() {
            let mut piece = piece.clone();
            if let Some(left) = self.left {
                // Never more than the head announced.
                piece.truncate(left.min(piece.len() as u64) as usize);
            }
            while !piece.is_empty() {
                let room = self.capacity(piece.len().min(DATA_STEP), clock).await?;
                let part = piece.split_to(room.min(piece.len()));
                sent += part.len() as u64;
                let by_length = match &mut self.left {
                    Some(left) => {
                        *left -= part.len() as u64;
                        *left == 0
                    }
                    None => false,
                };
                let end = by_length || (last && piece.is_empty() && i + 1 == count);
                let send = self.send.as_mut().ok_or(SendError::Io)?;
                send.send_data(part, end).map_err(|_| SendError::Io)?;
                if end {
                    self.ended = true;
                    self.send = None;
                    return Ok(sent);
                }
            }
        }
        if last {
            self.end_with(&[])?;
        }
        Ok(sent)
    }

    /// Waits until the peer's window lets `want` bytes (or some of
    /// them) go, within the clock and `h2_window_timeout`.
    async fn capacity(&mut self, want: usize, clock: &SendClock) -> Result<usize, SendError> {
        let send = self.send.as_mut().ok_or(SendError::Io)?;
        send.reserve_capacity(want);
        if send.capacity() > 0 {
            return Ok(send.capacity());
        }
        let limit = clock
            .next_limit()
            .ok_or(SendError::Timeout)?
            .min(self.window_timeout);
        let got = std::future::poll_fn(|cx| send.poll_capacity(cx));
        match tokio::time::timeout(limit, got).await {
            Ok(Some(Ok(n))) if n > 0 => Ok(n),
            Ok(_) => Err(SendError::Io),
            Err(_) => {
                // No window within the time: the stream is given up.
                send.send_reset(h2::Reason::CANCEL);
                Err(SendError::Timeout)
            }
        }
    }

    /// Ends the response body, with trailer fields (a HEADERS frame that
    /// ends the stream) when there are any that HTTP/2 can carry.
    fn end_with(&mut self, trailers: &[(Bytes, Bytes)]) -> Result<(), SendError> {
        if self.ended {
            return Ok(());
        }
        let send = self.send.as_mut().ok_or(SendError::Io)?;
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
        let sent = if fields.is_empty() {
            send.send_data(Bytes::new(), true)
        } else {
            send.send_trailers(fields)
        };
        sent.map_err(|_| SendError::Io)?;
        self.ended = true;
        self.send = None;
        Ok(())
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

    /// The request body's half, when none of the body has been read yet,
    /// for a backend stream to send on its own (see
    /// `lacquer_backend::Conn::duplex`); the steps then read no more of it.
    fn take_recv(&mut self) -> Option<RecvStream> {
        if self.recv_done || self.body_read {
            return None;
        }
        let recv = self.recv.take()?;
        self.recv_done = true;
        Some(recv)
    }

    /// Gives back what [`H2Stream::take_recv`] took, unused.
    fn restore_recv(&mut self, recv: RecvStream) {
        self.recv = Some(recv);
        self.recv_done = false;
    }

    /// Whether a request body comes, none of it read yet.
    fn recv_untouched(&self) -> bool {
        !self.recv_done && !self.body_read
    }

    /// Reads the next DATA frame of the request body into `rbuf`, framed
    /// as the steps expect; `Ok(0)` at its end.
    async fn read_into(&mut self, rbuf: &mut BytesMut, limit: Duration) -> Result<usize, ()> {
        loop {
            let Some(recv) = self.recv.as_mut().filter(|_| !self.recv_done) else {
                return Ok(0);
            };
            let next = tokio::time::timeout(limit, recv.data())
                .await
                .map_err(drop)?;
            let data = match next {
                Some(Ok(data)) => data,
                Some(Err(_)) => return Err(()),
                None => return self.end_of_body(rbuf),
            };
            let _ = recv.flow_control().release_capacity(data.len());
            let ended = recv.is_end_stream();
            let n = data.len();
            self.body_read = true;
            if n > 0 {
                if self.chunk_body {
                    let mut line = Vec::with_capacity(16);
                    lacquer_http::chunked::chunk_header(n, &mut line);
                    rbuf.extend_from_slice(&line);
                    rbuf.extend_from_slice(&data);
                    rbuf.extend_from_slice(b"\r\n");
                } else {
                    rbuf.extend_from_slice(&data);
                }
            }
            let ended = if ended { self.end_of_body(rbuf)? } else { 0 };
            if n + ended > 0 {
                return Ok(n + ended);
            }
        }
    }

    fn end_of_body(&mut self, rbuf: &mut BytesMut) -> Result<usize, ()> {
        if self.recv_done {
            return Ok(0);
        }
        self.recv_done = true;
        if self.chunk_body {
            rbuf.extend_from_slice(lacquer_http::chunked::LAST_CHUNK);
            return Ok(lacquer_http::chunked::LAST_CHUNK.len());
        }
        Ok(0)
    }

    /// Awaits `fut` unless the peer resets the stream first (None).
    async fn watch<F: std::future::Future>(&mut self, fut: F) -> Option<F::Output> {
        if self.ended {
            return Some(fut.await);
        }
        let mut fut = std::pin::pin!(fut);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(out) = fut.as_mut().poll(cx) {
                return Poll::Ready(Some(out));
            }
            match self.poll_reset(cx) {
                Poll::Ready(()) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }

    /// Ready when the peer has reset the stream (or its connection is
    /// gone), asking the half that has the stream now: the response's
    /// before its head went, the body's after.
    fn poll_reset(&mut self, cx: &mut std::task::Context<'_>) -> Poll<()> {
        let r = match self.send.as_mut() {
            Some(send) => send.poll_reset(cx),
            None => self.respond.poll_reset(cx),
        };
        r.map(drop)
    }

    /// Whether the peer has reset the stream (asked without waiting).
    pub fn was_reset(&mut self) -> bool {
        if self.ended {
            return false;
        }
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        self.poll_reset(&mut cx).is_ready()
    }

    /// Resets a stream whose response was not sent whole.
    pub fn abandon(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        match self.send.as_mut() {
            Some(send) => send.send_reset(h2::Reason::INTERNAL_ERROR),
            None => self.respond.send_reset(h2::Reason::INTERNAL_ERROR),
        }
    }
}

impl Transport for H2Stream {
    fn multiplexed(&self) -> bool {
        true
    }

    fn resp_protocol(&self) -> Option<&'static [u8]> {
        Some(b"HTTP/2.0")
    }

    fn duplicate_socket(&self) -> Option<std::os::fd::OwnedFd> {
        self.socket().and_then(|s| s.try_clone().ok())
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
        _clock: &SendClock,
    ) -> Result<(), SendError> {
        self.end_with(trailers)
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

    /// The peer's reset is what says the client left.
    async fn watching<F: std::future::Future>(
        &mut self,
        _rbuf: &mut BytesMut,
        fut: F,
        _answer_half_closed: bool,
    ) -> Option<F::Output> {
        self.watch(fut).await
    }

    fn body_untouched(&self) -> bool {
        self.recv_untouched()
    }

    fn take_body(&mut self) -> Option<Box<dyn lacquer_backend::StreamedBody>> {
        self.take_recv()
            .map(|recv| Box::new(recv) as Box<dyn lacquer_backend::StreamedBody>)
    }

    fn restore_body(&mut self, body: Box<dyn lacquer_backend::StreamedBody>) {
        if let Ok(recv) = body.into_any().downcast::<RecvStream>() {
            self.restore_recv(*recv)
        }
    }
}

/// Where an HTTP/1 head ends (after its empty line).
pub(crate) fn find_head_end(data: &[u8]) -> Option<usize> {
    data.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
}

pub(crate) use lacquer_http::headers::connection_specific;

/// The HTTP/2 response for an HTTP/1 head the steps wrote.
pub(crate) fn response_of(head: &[u8]) -> Option<http::Response<()>> {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    match response_in(head, &mut fields) {
        Err(httparse::Error::TooManyHeaders) => {
            response_in(head, &mut vec![httparse::EMPTY_HEADER; 1024]).ok()?
        }
        other => other.ok()?,
    }
}

/// [`response_of`], parsing into `fields`.
fn response_in<'h>(
    head: &'h [u8],
    fields: &mut [httparse::Header<'h>],
) -> Result<Option<http::Response<()>>, httparse::Error> {
    let mut parsed = httparse::Response::new(fields);
    let Some(status) = (match parsed.parse(head)? {
        httparse::Status::Complete(_) => parsed.code,
        httparse::Status::Partial => None,
    }) else {
        return Ok(None);
    };
    let Ok(status) = http::StatusCode::from_u16(status) else {
        return Ok(None);
    };
    // One copy of the head that every value shares, rather than an
    // allocation per field.
    let shared = Bytes::copy_from_slice(head);
    let mut response = http::Response::new(());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.reserve(parsed.headers.len());
    for f in parsed.headers.iter() {
        if connection_specific(f.name.as_bytes()) {
            continue;
        }
        // A field HTTP/2 cannot carry (a name with upper-case letters
        // is lower-cased; one with bytes no name may have is dropped).
        let at = f.value.as_ptr() as usize - head.as_ptr() as usize;
        let value = shared.slice(at..at + f.value.len());
        let (Ok(name), Ok(mut value)) = (
            http::header::HeaderName::from_bytes(f.name.as_bytes()),
            http::header::HeaderValue::from_maybe_shared(value),
        ) else {
            continue;
        };
        // Fields new in every response are not worth a place in the
        // client's HPACK table: sent as literals never indexed.
        if name.as_str() == "x-varnish" || name == http::header::AGE {
            value.set_sensitive(true);
        }
        headers.append(name, value);
    }
    Ok(Some(response))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_become_http2_responses() {
        let r = response_of(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\nX-Varnish: 3\r\nTransfer-Encoding: chunked\r\nKeep-Alive: timeout=5\r\nVia: 1.1 x\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.status(), 200);
        let names: Vec<&str> = r.headers().keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["content-length", "x-varnish", "via"]);
        assert_eq!(
            response_of(b"HTTP/1.1 2000 Nope\r\n\r\n").map(|r| r.status()),
            None
        );
        assert!(response_of(b"garbage").is_none());
        assert_eq!(find_head_end(b"HTTP/1.1 200 OK\r\n\r\nbody"), Some(19));
    }
}
