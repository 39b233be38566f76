//! What every kind of client wire shares with the steps above it: the
//! [`Transport`] interface (as Varnish's `struct transport`: deliver a
//! head and a body, read a request body, send a minimal response) that
//! HTTP/1 (`http1`), a stream of an HTTP/2 connection (`h2`) and an ESI
//! include's channel to its page (`fragment`) implement, and the terms
//! they speak in: how a response body is delimited, why a read or a write
//! stopped, and what an include hands its page. The steps ask the
//! transport; none of them asks which transport it is.

use super::deadline::SendClock;
use super::stream::ClientStream;
use bytes::{Bytes, BytesMut};
use lacquer_backend::StreamedBody;
use std::future::Future;
use std::os::fd::OwnedFd;
use std::time::Duration;

/// What a client's responses go out on and its request bodies come in
/// from. Heads are handed over as the steps wrote them (HTTP/1 text); the
/// transport puts them on its wire (as they are, as a HEADERS frame, or
/// not at all for an include, whose page has the head).
pub(crate) trait Transport {
    /// The response goes into a page (an ESI include): no head of its
    /// own, no interim responses, its bytes the page's to count, and the
    /// page's conditions, not its own, judge it.
    fn part_of_page(&self) -> bool {
        false
    }

    /// One of many requests carried side by side on a connection: a
    /// client that leaves this one may stay for the others, and there is
    /// no connection of its own to hand over for a pipe.
    fn multiplexed(&self) -> bool {
        false
    }

    /// The protocol the response log names in place of HTTP/1's framing
    /// fields (`RespProtocol`), where the transport frames responses
    /// itself.
    fn resp_protocol(&self) -> Option<&'static [u8]> {
        None
    }

    /// The connection's byte stream, where this transport has the whole
    /// connection: for a pipe, or to speak HTTP/2 on it.
    fn byte_stream(&mut self) -> Option<&mut dyn ClientStream> {
        None
    }

    /// A descriptor of its own for the client socket (close-on-exec), for
    /// an ESI page's includes to reach its options after the connection
    /// closes; None where there is no socket (an include).
    fn duplicate_socket(&self) -> Option<OwnedFd>;

    /// Whether the client has sent bytes not read yet (asked of the
    /// socket itself).
    fn has_unread(&self) -> bool {
        false
    }

    /// Sends the response head `head` whose body is delimited as `wire`
    /// says, followed by `body` pieces (the whole body when it is at hand,
    /// or none).
    async fn send_head(
        &mut self,
        head: &[u8],
        wire: WireBody,
        body: &[Bytes],
        clock: &SendClock,
    ) -> Result<(), SendError>;

    /// [`Transport::send_head`] with a whole small body kept in one
    /// piece (copied for transports that take `Bytes`).
    async fn send_head_small(
        &mut self,
        head: &[u8],
        wire: WireBody,
        body: &[u8],
        clock: &SendClock,
    ) -> Result<(), SendError> {
        let body = [Bytes::copy_from_slice(body)];
        self.send_head(head, wire, &body, clock).await
    }

    /// [`Transport::send_head`] with the body's first piece, in one write
    /// where the transport can.
    async fn send_head_and_piece(
        &mut self,
        head: &[u8],
        wire: WireBody,
        piece: Bytes,
        clock: &SendClock,
    ) -> Result<(), SendError> {
        self.send_head(head, wire, &[piece], clock).await
    }

    /// Sends `size` bytes of body pieces framed as the head said; the
    /// body's end goes with them when `last`.
    async fn send_data(
        &mut self,
        pieces: &[Bytes],
        size: u64,
        last: bool,
        clock: &SendClock,
    ) -> Result<u64, SendError>;

    /// Ends the body, with trailer fields where the framing can carry
    /// them (elsewhere they are dropped).
    async fn finish(
        &mut self,
        trailers: &[(Bytes, Bytes)],
        clock: &SendClock,
    ) -> Result<(), SendError>;

    /// Sends a small complete message (an HTTP/1 head and body: an
    /// error, `100 Continue`, an upgrade's answer) within `idle`.
    async fn write_small(&mut self, data: &[u8], idle: Duration) -> Result<(), SendError>;

    /// Sends interim (1xx) response heads, each as HTTP/1 text.
    async fn send_interim(&mut self, heads: &[Vec<u8>], idle: Duration) -> Result<(), SendError>;

    /// Reads more of the request (its head, or its body) into `rbuf`;
    /// `Ok(0)` at its end. `limit` is asked for only when the read has
    /// to wait.
    async fn read(
        &mut self,
        rbuf: &mut BytesMut,
        limit: impl FnOnce() -> Duration,
    ) -> Result<usize, ReadError>;

    /// Awaits `fut` while watching the client, so that one that leaves
    /// is noticed at once: None when it closed or reset (a half-close is
    /// waited out when `answer_half_closed`). What it sends meanwhile
    /// lands in `rbuf`.
    async fn watching<F: Future>(
        &mut self,
        rbuf: &mut BytesMut,
        fut: F,
        answer_half_closed: bool,
    ) -> Option<F::Output>;

    /// Tells an include's page that the body is incomplete.
    async fn send_failed(&mut self) {}

    /// Hands an include's page deflate data to splice.
    async fn send_deflated(
        &mut self,
        _data: Vec<Bytes>,
        _crc: u32,
        _len: u64,
    ) -> Result<(), SendError> {
        Err(SendError::Io)
    }

    /// Whether a request body is coming as a stream of its own, none of
    /// it read yet (an HTTP/2 or HTTP/3 stream's, which a backend's
    /// HTTP/2 stream can carry as it comes).
    fn body_untouched(&self) -> bool {
        false
    }

    /// That body's half, for a backend stream to send on its own; the
    /// steps then read no more of it.
    fn take_body(&mut self) -> Option<Box<dyn StreamedBody>> {
        None
    }

    /// Gives back what [`Transport::take_body`] took, unused.
    fn restore_body(&mut self, _body: Box<dyn StreamedBody>) {}
}

/// What an ESI sub-request hands its parent.
#[derive(Debug)]
pub(crate) enum Piece {
    Data(Bytes),
    /// Deflate data that ends on a byte and is not final, for a page
    /// delivered gzip'd, with the CRC-32 and length of its text.
    Deflated {
        data: Vec<Bytes>,
        crc: u32,
        len: u64,
    },
    /// The body could not be delivered whole (its fetch failed).
    Failed,
}

/// How a response body is delimited on the wire. The steps say which
/// the response needs; the transport frames the body accordingly
/// (HTTP/1 chunks, or nothing; an include's parent takes bare pieces).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireBody {
    /// No body and no length (204, 304, 1xx).
    Bodyless,
    Length(u64),
    Chunked,
    /// Delimited by closing the connection (HTTP/1.0, unknown length).
    Close,
    /// A HEAD response whose length is not known.
    HeadUnknown,
}

/// Why a read from the client stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadError {
    Timeout,
    Io,
}

/// Why a write to the client stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendError {
    /// The client went away or reset.
    Io,
    /// `send_timeout` or `idle_send_timeout` passed.
    Timeout,
}
