//! One backend connection in use: writing a request, reading the response
//! head and then its body in whatever framing it came, and going back to
//! the pool only when the exchange ended cleanly.

use crate::{try_parse, Backend, FetchError, Slot, Stream, Timeouts};
use bytes::{Bytes, BytesMut};
use lacquer_core::counters::{BackendCounter, Counter, COUNTERS};
use lacquer_http::chunked::{ChunkedDecoder, Decoded};
use lacquer_http::{Framing, ResponseHead, ResponseLimits};
use std::cell::RefCell;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const READ_SIZE: usize = 64 * 1024;

/// The most interim (1xx) responses read before a final one.
pub const MAX_INTERIM: usize = 8;

/// Where interim responses go as they arrive, for a client waiting on the
/// fetch (a channel with room for [`MAX_INTERIM`]; a full or closed one
/// drops them, the fetch never waits on it).
pub type InterimSink = tokio::sync::mpsc::Sender<ResponseHead>;

/// A connection to a backend, checked out of its pool.
pub struct Conn<'a> {
    backend: &'a Backend,
    stream: Option<Stream>,
    buf: BytesMut,
    reused: bool,
    saw_bytes: bool,
    /// Whether the connection may carry another request once the body is
    /// read.
    reusable: bool,
    /// Interim responses (102, 103 …) read before the final one, for a
    /// pass to hand its client (when they are not sent on as they come).
    interim: Vec<ResponseHead>,
    /// The request asked for the connection to close after it
    /// (`Connection: close`), or the response as VCL left it did.
    close_after: bool,
    /// Its place under the backend's `.max_connections`.
    slot: Option<Slot<'a>>,
    /// The trailer fields of a chunked body, once it ended.
    trailers: lacquer_http::chunked::Trailers,
    /// When the connection was opened or taken from the pool, and when
    /// the request on it was sent (0: not yet): the log's `Connected`
    /// and `Bereq` times.
    connected_at: f64,
    sent_at: f64,
}

impl<'a> Conn<'a> {
    /// What the connection's TLS handshake settled (None: not TLS).
    pub fn tls(&self) -> Option<crate::tls::TlsDetails> {
        self.stream.as_ref()?.tls()
    }

    pub(crate) fn new(backend: &'a Backend, stream: Stream, reused: bool, slot: Slot<'a>) -> Self {
        backend.stats.inc(BackendCounter::conn);
        Conn {
            backend,
            stream: Some(stream),
            buf: BytesMut::new(),
            reused,
            saw_bytes: false,
            reusable: false,
            close_after: false,
            interim: Vec::new(),
            slot: Some(slot),
            trailers: Vec::new(),
            connected_at: lacquer_core::time::now(),
            sent_at: 0.0,
        }
    }

    /// When the connection was opened or taken from the pool.
    pub fn connected_at(&self) -> f64 {
        self.connected_at
    }

    /// When the request head (and an in-memory body) went out; 0 before.
    pub fn sent_at(&self) -> f64 {
        self.sent_at
    }

    /// Closes the connection, keeping its slot for another attempt.
    pub(crate) fn give_up(mut self) -> Slot<'a> {
        if self.stream.take().is_some() {
            self.backend.stats.dec(BackendCounter::conn);
        }
        self.slot.take().unwrap_or(Slot::none())
    }

    pub fn reused(&self) -> bool {
        self.reused
    }

    /// The connection's descriptor and local address, as the log names a
    /// backend connection.
    pub fn socket(&self) -> Option<(i32, std::net::SocketAddr)> {
        let s = self.stream.as_ref()?;
        let unspecified = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
        Some((s.fd(), s.local_addr().unwrap_or(unspecified)))
    }

    /// The name of the backend the connection goes to.
    pub fn backend_name(&self) -> &str {
        &self.backend.name
    }

    /// Whether the connection goes back to the pool once its body is read.
    pub fn reusable(&self) -> bool {
        self.reusable
    }

    pub(crate) fn saw_bytes(&self) -> bool {
        self.saw_bytes
    }

    fn stream(&mut self) -> Result<&mut Stream, FetchError> {
        self.stream
            .as_mut()
            .ok_or_else(|| FetchError::ReadFailed("connection closed".into()))
    }

    /// Writes a request head, counting the request.
    pub async fn write_head(&mut self, head: &[u8], t: &Timeouts) -> Result<(), FetchError> {
        self.count_request(head.len(), 0);
        self.close_after |= asks_close(head);
        self.send(head, t).await?;
        self.sent_at = lacquer_core::time::now();
        Ok(())
    }

    /// Writes a piece of a request body.
    pub async fn write(&mut self, data: &[u8], t: &Timeouts) -> Result<(), FetchError> {
        let stats = &self.backend.stats;
        stats.add(BackendCounter::bereq_bodybytes, data.len() as u64);
        self.send(data, t).await
    }

    fn count_request(&self, head: usize, body: usize) {
        let stats = &self.backend.stats;
        COUNTERS.inc(Counter::backend_req);
        stats.inc(BackendCounter::req);
        stats.add(BackendCounter::bereq_hdrbytes, head as u64);
        stats.add(BackendCounter::bereq_bodybytes, body as u64);
    }

    /// Writes bytes under the between-bytes timeout.
    async fn send(&mut self, data: &[u8], t: &Timeouts) -> Result<(), FetchError> {
        let limit = t.between_bytes;
        let stream = self.stream()?;
        match tokio::time::timeout(limit, stream.write_all(data)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(FetchError::WriteFailed(e.to_string())),
            Err(_) => Err(FetchError::WriteFailed("timeout".into())),
        }
    }

    /// Sends on what was written (an HTTP/2 stream opens its request),
    /// under the between-bytes timeout.
    pub async fn flush(&mut self, t: &Timeouts) -> Result<(), FetchError> {
        use std::future::Future;
        use std::task::Poll;
        let limit = t.between_bytes;
        let stream = self.stream()?;
        let mut flush = std::pin::pin!(stream.flush());
        // Most flushes are done at once (a plain TCP one always): those
        // make no timer, and read no clock.
        let at_once = std::future::poll_fn(|cx| Poll::Ready(flush.as_mut().poll(cx))).await;
        let done = match at_once {
            Poll::Ready(done) => done,
            Poll::Pending => match tokio::time::timeout(limit, flush).await {
                Ok(done) => done,
                Err(_) => return Err(FetchError::WriteFailed("timeout".into())),
            },
        };
        done.map_err(|e| FetchError::WriteFailed(e.to_string()))
    }

    /// See [`crate::BackendStream::duplex`]: the rest of the request body
    /// goes from `body` on its own, each piece awaited at most `idle`.
    pub fn duplex(
        &mut self,
        body: Box<dyn crate::StreamedBody>,
        idle: std::time::Duration,
    ) -> Result<(), Box<dyn crate::StreamedBody>> {
        match self.stream.as_mut() {
            Some(stream) => stream.duplex(body, idle),
            None => Err(body),
        }
    }

    /// Whether the connection is a stream of an HTTP/2 connection.
    pub fn multiplexed(&self) -> bool {
        self.stream.as_ref().is_some_and(|s| s.multiplexed())
    }

    /// Writes a request head and an in-memory body.
    pub async fn write_request(
        &mut self,
        head: &[u8],
        body: &[u8],
        t: &Timeouts,
    ) -> Result<(), FetchError> {
        self.count_request(head.len(), body.len());
        self.close_after |= asks_close(head);
        if body.is_empty() {
            self.send(head, t).await?;
        } else if head.len() + body.len() <= 16 * 1024 {
            let mut all = Vec::with_capacity(head.len() + body.len());
            all.extend_from_slice(head);
            all.extend_from_slice(body);
            self.send(&all, t).await?;
        } else {
            self.send(head, t).await?;
            self.send(body, t).await?;
        }
        self.sent_at = lacquer_core::time::now();
        Ok(())
    }

    async fn fill(&mut self, limit: std::time::Duration, first: bool) -> Result<usize, FetchError> {
        if self.buf.capacity() == 0 {
            // The thread's spare (see `Drop`): an exchange began with an
            // empty buffer, and made and let go 64 KiB for every fetch.
            self.buf = take_read_buf();
        } else if self.buf.capacity() - self.buf.len() < 4096 {
            self.buf.reserve(READ_SIZE);
        }
        let stream = self
            .stream
            .as_mut()
            .ok_or_else(|| FetchError::ReadFailed("connection closed".into()))?;
        match tokio::time::timeout(limit, stream.read_buf(&mut self.buf)).await {
            Ok(Ok(n)) => {
                if n > 0 {
                    self.saw_bytes = true;
                }
                Ok(n)
            }
            Ok(Err(e)) => Err(FetchError::ReadFailed(e.to_string())),
            Err(_) if first => Err(FetchError::FirstByteTimeout),
            Err(_) => Err(FetchError::BetweenBytesTimeout),
        }
    }

    /// Reads a response head, skipping interim 1xx responses: 100 is
    /// dropped, others go to `interim` as they arrive, or are kept for
    /// [`Conn::take_interim`].
    pub async fn read_head(
        &mut self,
        t: &Timeouts,
        limits: &ResponseLimits,
        is_head: bool,
        interim_sink: Option<&InterimSink>,
    ) -> Result<ResponseHead, FetchError> {
        // What a TLS connection kept of the request (its records wait
        // when the socket could not take them at once) goes out before
        // the answer is awaited; flushing TCP does nothing. (A stream of
        // an HTTP/2 connection has sent its request as it was written.)
        if !self.multiplexed() {
            self.flush(t).await?;
        }
        let mut first = true;
        let mut interim = 0;
        loop {
            if let Some(head) = try_parse(&mut self.buf, limits, is_head)? {
                if (100..200).contains(&head.status) && head.status != 101 {
                    // A backend that sends interim responses without end
                    // gets no more than a few read.
                    interim += 1;
                    if interim > MAX_INTERIM {
                        return Err(FetchError::BadResponse(
                            "too many interim (1xx) responses".into(),
                        ));
                    }
                    if head.status != 100 {
                        match interim_sink {
                            Some(sink) => {
                                let _ = sink.try_send(head);
                            }
                            None => self.interim.push(head),
                        }
                    }
                    continue;
                }
                self.reusable = head.keep_alive && !self.close_after;
                let stats = &self.backend.stats;
                stats.add(BackendCounter::beresp_hdrbytes, head.wire_len as u64);
                return Ok(head);
            }
            let limit = if first { t.first_byte } else { t.between_bytes };
            let n = self.fill(limit, first).await?;
            first = false;
            if n == 0 {
                return Err(if self.buf.is_empty() {
                    FetchError::ClosedEarly
                } else {
                    FetchError::BadResponse("truncated response head".into())
                });
            }
        }
    }

    /// The interim responses read before the final one (each once).
    pub fn take_interim(&mut self) -> Vec<ResponseHead> {
        std::mem::take(&mut self.interim)
    }

    /// Starts reading a body with this framing.
    pub fn body(&mut self, framing: Framing) -> BodyReader {
        let state = match framing {
            Framing::None => BodyState::Done,
            Framing::Length(n) => {
                COUNTERS.inc(Counter::fetch_length);
                BodyState::Length(n)
            }
            Framing::Chunked => {
                COUNTERS.inc(Counter::fetch_chunked);
                BodyState::Chunked(ChunkedDecoder::keeping_trailers())
            }
            Framing::UntilClose => {
                COUNTERS.inc(Counter::fetch_eof);
                self.reusable = false;
                BodyState::Eof
            }
        };
        BodyReader { state }
    }

    /// Whether bytes past the response head have already arrived.
    pub fn body_buffered(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Reads the next piece of the body; `None` at its end.
    pub async fn read_body(
        &mut self,
        r: &mut BodyReader,
        t: &Timeouts,
    ) -> Result<Option<Bytes>, FetchError> {
        let piece = self.next_piece(r, t).await;
        if let Ok(Some(data)) = &piece {
            let stats = &self.backend.stats;
            stats.add(BackendCounter::beresp_bodybytes, data.len() as u64);
        }
        piece
    }

    async fn next_piece(
        &mut self,
        r: &mut BodyReader,
        t: &Timeouts,
    ) -> Result<Option<Bytes>, FetchError> {
        loop {
            match &mut r.state {
                BodyState::Done => return Ok(None),
                BodyState::Length(left) => {
                    if *left == 0 {
                        r.state = BodyState::Done;
                        return Ok(None);
                    }
                    if !self.buf.is_empty() {
                        let n = (self.buf.len() as u64).min(*left) as usize;
                        *left -= n as u64;
                        return Ok(Some(self.buf.split_to(n).freeze()));
                    }
                    if self.fill(t.between_bytes, false).await? == 0 {
                        self.reusable = false;
                        return Err(FetchError::BadBody(
                            "backend closed before the end of the body".into(),
                        ));
                    }
                }
                BodyState::Chunked(dec) => {
                    match dec.decode(&mut self.buf) {
                        Ok(Some(Decoded::Data(d))) => return Ok(Some(d)),
                        Ok(Some(Decoded::End)) => {
                            self.trailers = dec.take_trailers();
                            r.state = BodyState::Done;
                            return Ok(None);
                        }
                        Ok(None) => {}
                        Err(e) => {
                            self.reusable = false;
                            return Err(FetchError::BadBody(e.0.into()));
                        }
                    }
                    if self.fill(t.between_bytes, false).await? == 0 {
                        self.reusable = false;
                        return Err(FetchError::BadBody(
                            "backend closed inside a chunked body".into(),
                        ));
                    }
                }
                BodyState::Eof => {
                    if !self.buf.is_empty() {
                        return Ok(Some(self.buf.split().freeze()));
                    }
                    if self.fill(t.between_bytes, false).await? == 0 {
                        r.state = BodyState::Done;
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// The trailer fields that ended a chunked body (each once): what a
    /// pass forwards (gRPC's status travels there).
    pub fn take_trailers(&mut self) -> lacquer_http::chunked::Trailers {
        std::mem::take(&mut self.trailers)
    }

    /// Keeps the connection out of the pool after this exchange (the
    /// response VCL left says `Connection: close`).
    pub fn forbid_reuse(&mut self) {
        self.close_after = true;
        self.reusable = false;
    }

    /// Gives up the connection once the exchange is over: back to the pool
    /// if the body was read to its end and both sides keep it alive.
    pub fn finish(mut self, body_done: bool) {
        if let Some(stream) = self.stream.take() {
            self.backend.stats.dec(BackendCounter::conn);
            if body_done && self.reusable && self.buf.is_empty() {
                self.backend.recycle(stream);
            }
        }
    }
}

impl<'a> Conn<'a> {
    /// Takes the socket out for a byte tunnel (pipe), with whatever was
    /// read past the response head, and its slot under `.max_connections`
    /// to hold while the tunnel lasts. The connection no longer counts as
    /// the backend's in `conn`.
    pub fn detach(mut self) -> Option<(Stream, BytesMut, Slot<'a>)> {
        let stream = self.stream.take()?;
        self.backend.stats.dec(BackendCounter::conn);
        let slot = self.slot.take().unwrap_or(Slot::none());
        Some((stream, std::mem::take(&mut self.buf), slot))
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        if self.stream.take().is_some() {
            self.backend.stats.dec(BackendCounter::conn);
        }
        // The read buffer goes back to the thread's spares when nothing
        // holds a view of it any more (a body's pieces often still do: it
        // is then let go by the last of them, as before).
        keep_read_buf(std::mem::take(&mut self.buf));
    }
}

/// Read buffers a thread keeps at most.
const SPARE_READS: usize = 8;

thread_local! {
    /// Read buffers this thread's exchanges ended with and nothing else
    /// held: the next exchanges', without an allocation.
    static SPARE_READ: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

/// A read buffer of [`READ_SIZE`] bytes, kept from an earlier exchange on
/// this thread when there is one.
fn take_read_buf() -> BytesMut {
    SPARE_READ
        .try_with(|spare| spare.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_else(|| BytesMut::with_capacity(READ_SIZE))
}

/// Keeps an exchange's read buffer for the thread's next one, when no view
/// of it is left (a body's pieces may still be read: the last of them
/// then lets it go) and it has not grown past twice its size.
fn keep_read_buf(mut buf: BytesMut) {
    buf.clear();
    if buf.capacity() == 0 || !buf.try_reclaim(READ_SIZE) || buf.capacity() > 2 * READ_SIZE {
        return;
    }
    let _ = SPARE_READ.try_with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < SPARE_READS {
            spare.push(buf);
        }
    });
}

/// Whether a request head's `Connection` fields name `close`.
fn asks_close(head: &[u8]) -> bool {
    head.split(|&b| b == b'\n').skip(1).any(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        line.len() > 11
            && line[..11].eq_ignore_ascii_case(b"connection:")
            && line[11..]
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
    })
}

enum BodyState {
    Done,
    Length(u64),
    Chunked(ChunkedDecoder),
    Eof,
}

/// The reading position in a response body.
pub struct BodyReader {
    state: BodyState,
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_request_asking_to_close_is_seen() {
        use super::asks_close;
        assert!(asks_close(
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Close\r\n\r\n"
        ));
        assert!(!asks_close(
            b"GET / HTTP/1.1\r\nX-Connection: close\r\n\r\n"
        ));
        assert!(!asks_close(
            b"GET /connection:close HTTP/1.1\r\nHost: a\r\n\r\n"
        ));
    }

    /// An exchange's read buffer is taken back by the thread's next
    /// exchange when nothing holds a view of it, and let go otherwise.
    #[test]
    fn a_read_buffer_is_reused_only_when_no_view_of_it_is_left() {
        use super::{keep_read_buf, take_read_buf, READ_SIZE, SPARE_READ};
        let kept = || SPARE_READ.with(|s| s.borrow().len());
        std::thread::spawn(move || {
            let mut buf = take_read_buf();
            assert!(buf.capacity() >= READ_SIZE);
            buf.extend_from_slice(b"HTTP/1.1 200 OK\r\n\r\nbody");
            let at = buf.as_ptr();
            let _ = buf.split_to(19);
            keep_read_buf(buf);
            assert_eq!(kept(), 1);
            let mut again = take_read_buf();
            assert_eq!(again.as_ptr(), at, "the same memory, from its start");
            assert!(again.is_empty() && again.capacity() >= READ_SIZE);
            again.extend_from_slice(b"abc");
            let view = again.split_to(3).freeze();
            keep_read_buf(again);
            assert_eq!(kept(), 0, "a view still holds it");
            assert_eq!(&view[..], b"abc");
        })
        .join()
        .unwrap();
    }
}
