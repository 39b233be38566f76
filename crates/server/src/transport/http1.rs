//! HTTP/1 as a client's transport: the connection's byte stream, heads
//! written as the steps wrote them, bodies framed in chunks when their
//! length was not known, every write gathered and bounded by the send
//! clock (a write the socket takes at once arms no timer).

use super::deadline::SendClock;
use super::stream::ClientStream;
use super::wire::{ReadError, SendError, Transport, WireBody};
use bytes::{Bytes, BytesMut};
use std::future::Future;
use std::io::IoSlice;
use std::os::fd::OwnedFd;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A client connection speaking HTTP/1.
pub(crate) struct Http1 {
    stream: Box<dyn ClientStream>,
    /// The response being sent has a chunk-framed body.
    chunked: bool,
}

impl Http1 {
    pub fn new(stream: Box<dyn ClientStream>) -> Self {
        Http1 {
            stream,
            chunked: false,
        }
    }

    /// The connection's stream, given up (to speak HTTP/2 over it).
    pub fn into_stream(self) -> Box<dyn ClientStream> {
        self.stream
    }

    /// Writes the head and `parts` after it in one gathered write;
    /// `chunked` says the body that follows is.
    async fn head_and<P: AsRef<[u8]>>(
        &mut self,
        head: &[u8],
        chunked: bool,
        parts: &[P],
        clock: &SendClock,
    ) -> Result<(), SendError> {
        self.chunked = chunked;
        write_gathered(&mut *self.stream, head, parts, clock).await
    }
}

impl Transport for Http1 {
    fn byte_stream(&mut self) -> Option<&mut dyn ClientStream> {
        Some(&mut *self.stream)
    }

    fn duplicate_socket(&self) -> Option<OwnedFd> {
        self.stream
            .socket()
            .and_then(|s| s.try_clone_to_owned().ok())
    }

    fn has_unread(&self) -> bool {
        let Some(socket) = self.stream.socket() else {
            return false;
        };
        // The socket is non-blocking: with nothing there, this fails at
        // once (WouldBlock).
        let mut byte = [std::mem::MaybeUninit::<u8>::uninit()];
        socket2::SockRef::from(&socket)
            .peek(&mut byte)
            .is_ok_and(|n| n > 0)
    }

    async fn send_head(
        &mut self,
        head: &[u8],
        wire: WireBody,
        body: &[Bytes],
        clock: &SendClock,
    ) -> Result<(), SendError> {
        self.head_and(head, wire == WireBody::Chunked, body, clock)
            .await
    }

    async fn send_head_small(
        &mut self,
        head: &[u8],
        wire: WireBody,
        body: &[u8],
        clock: &SendClock,
    ) -> Result<(), SendError> {
        self.head_and(head, wire == WireBody::Chunked, &[body], clock)
            .await
    }

    async fn send_head_and_piece(
        &mut self,
        head: &[u8],
        wire: WireBody,
        piece: Bytes,
        clock: &SendClock,
    ) -> Result<(), SendError> {
        if wire != WireBody::Chunked || piece.is_empty() {
            return self.send_head(head, wire, &[piece], clock).await;
        }
        let mut size_line = Vec::with_capacity(16);
        lacquer_http::chunked::chunk_header(piece.len(), &mut size_line);
        let parts: [&[u8]; 3] = [&size_line, &piece, b"\r\n"];
        self.head_and(head, true, &parts, clock).await
    }

    async fn send_data(
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
        if !chunked {
            write_gathered(&mut *self.stream, &[], pieces, clock).await?;
            return Ok(size);
        }
        let mut size_line = Vec::with_capacity(16);
        lacquer_http::chunked::chunk_header(size as usize, &mut size_line);
        let mut parts: Vec<&[u8]> = Vec::with_capacity(pieces.len() + 3);
        parts.push(&size_line);
        parts.extend(pieces.iter().map(|b| &b[..]));
        parts.push(b"\r\n");
        if last {
            parts.push(lacquer_http::chunked::LAST_CHUNK);
        }
        write_gathered(&mut *self.stream, &[], &parts, clock).await?;
        Ok(size)
    }

    async fn finish(
        &mut self,
        trailers: &[(Bytes, Bytes)],
        clock: &SendClock,
    ) -> Result<(), SendError> {
        if !std::mem::take(&mut self.chunked) {
            return Ok(());
        }
        if trailers.is_empty() {
            let end: &[u8] = lacquer_http::chunked::LAST_CHUNK;
            return write_gathered(&mut *self.stream, &[], &[end], clock).await;
        }
        let mut end = b"0\r\n".to_vec();
        for (name, value) in trailers {
            end.extend_from_slice(name);
            end.extend_from_slice(b": ");
            end.extend_from_slice(value);
            end.extend_from_slice(b"\r\n");
        }
        end.extend_from_slice(b"\r\n");
        write_gathered(&mut *self.stream, &[], &[end], clock).await
    }

    async fn write_small(&mut self, data: &[u8], idle: Duration) -> Result<(), SendError> {
        match tokio::time::timeout(idle, self.stream.write_all(data)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(SendError::Io),
            Err(_) => Err(SendError::Timeout),
        }
    }

    /// All of them in one write.
    async fn send_interim(&mut self, heads: &[Vec<u8>], idle: Duration) -> Result<(), SendError> {
        self.write_small(&heads.concat(), idle).await
    }

    async fn read(
        &mut self,
        rbuf: &mut BytesMut,
        limit: impl FnOnce() -> Duration,
    ) -> Result<usize, ReadError> {
        if rbuf.capacity() - rbuf.len() < 1024 {
            rbuf.reserve(8192);
        }
        // Bytes already waiting (a pipelined or quick client) are taken
        // without arming a timer.
        if let Some(ready) = now_or_never(self.stream.read_buf(rbuf)).await {
            return ready.map_err(|_| ReadError::Io);
        }
        match tokio::time::timeout(limit(), self.stream.read_buf(rbuf)).await {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(_)) => Err(ReadError::Io),
            Err(_) => Err(ReadError::Timeout),
        }
    }

    /// Reads what the client sends meanwhile (a pipelined request, kept
    /// for later); one sending a lot ahead is no longer watched.
    async fn watching<F: Future>(
        &mut self,
        rbuf: &mut BytesMut,
        fut: F,
        answer_half_closed: bool,
    ) -> Option<F::Output> {
        /// A client sending this much ahead is not watched further.
        const WATCH_LIMIT: usize = 64 * 1024;
        let mut fut = std::pin::pin!(fut);
        loop {
            if rbuf.len() > WATCH_LIMIT {
                return Some(fut.await);
            }
            let mut read = std::pin::pin!(self.read(rbuf, || Duration::from_secs(86_400)));
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
}

/// Polls an I/O operation once: its result if it is ready now, None
/// if it would wait (it is then dropped, having done nothing, and the
/// caller waits for it again with a deadline).
pub(super) async fn now_or_never<F: Future>(fut: F) -> Option<F::Output> {
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
