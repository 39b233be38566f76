//! The QUIC connection as the `h3` crate sees it: quinn's (through
//! `h3-quinn`), but each request stream's first HEADERS frame is read as
//! it goes by and checked (`fields`) before `h3` decodes it. A request
//! found malformed has its stream reset both ways with H3_MESSAGE_ERROR
//! (RFC 9114 §4.1.2), and `h3` is told the stream ended with that error,
//! so the request never reaches the client steps.

use super::fields::{check_request, Malformed};
use bytes::{Buf, Bytes};
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, StreamId, WriteBuf};
use std::task::{Context, Poll};

/// H3_MESSAGE_ERROR (RFC 9114 §8.1).
const MESSAGE_ERROR: u64 = 0x10e;
/// HTTP/3's frame types that matter here (RFC 9114 §7.2).
const DATA: u64 = 0x00;
const HEADERS: u64 = 0x01;

/// A QUIC connection whose request streams are checked.
pub(crate) struct Checked {
    inner: h3_quinn::Connection,
    /// The most bytes a HEADERS frame may have before the stream is
    /// refused without reading it whole.
    limit: usize,
}

impl Checked {
    pub fn new(conn: quinn::Connection, limit: usize) -> Checked {
        Checked {
            inner: h3_quinn::Connection::new(conn),
            limit,
        }
    }
}

impl<B: Buf> quic::Connection<B> for Checked {
    type RecvStream = h3_quinn::RecvStream;
    type OpenStreams = Opener;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::RecvStream, ConnectionErrorIncoming>> {
        quic::Connection::<B>::poll_accept_recv(&mut self.inner, cx)
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, ConnectionErrorIncoming>> {
        let limit = self.limit;
        quic::Connection::<B>::poll_accept_bidi(&mut self.inner, cx).map_ok(|inner| CheckedBidi {
            inner,
            first: Some(FirstHeaders::new(limit)),
        })
    }

    fn opener(&self) -> Opener {
        Opener(quic::Connection::<B>::opener(&self.inner))
    }
}

impl<B: Buf> quic::OpenStreams<B> for Checked {
    type BidiStream = CheckedBidi<B>;
    type SendStream = h3_quinn::SendStream<B>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, StreamErrorIncoming>> {
        self.inner
            .poll_open_bidi(cx)
            .map_ok(|inner| CheckedBidi { inner, first: None })
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
        self.inner.poll_open_send(cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        quic::OpenStreams::<B>::close(&mut self.inner, code, reason)
    }
}

/// What opens the server's own streams (control and QPACK's).
pub(crate) struct Opener(h3_quinn::OpenStreams);

impl<B: Buf> quic::OpenStreams<B> for Opener {
    type BidiStream = CheckedBidi<B>;
    type SendStream = h3_quinn::SendStream<B>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, StreamErrorIncoming>> {
        self.0
            .poll_open_bidi(cx)
            .map_ok(|inner| CheckedBidi { inner, first: None })
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
        self.0.poll_open_send(cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        quic::OpenStreams::<B>::close(&mut self.0, code, reason)
    }
}

/// A request stream, read through its first HEADERS frame's check.
pub(crate) struct CheckedBidi<B: Buf> {
    inner: h3_quinn::BidiStream<B>,
    /// Until the first HEADERS frame has gone by.
    first: Option<FirstHeaders>,
}

impl<B: Buf> quic::RecvStream for CheckedBidi<B> {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let polled = self.inner.poll_data(cx);
        let Some(first) = &mut self.first else {
            return polled;
        };
        if let Poll::Ready(Ok(Some(chunk))) = &polled {
            match first.feed(chunk) {
                Ok(false) => {}
                Ok(true) => self.first = None,
                Err(why) => {
                    self.first = None;
                    self.inner.stop_sending(MESSAGE_ERROR);
                    quic::SendStream::<B>::reset(&mut self.inner, MESSAGE_ERROR);
                    return Poll::Ready(Err(StreamErrorIncoming::Unknown(Box::new(why))));
                }
            }
        }
        polled
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.inner.stop_sending(error_code)
    }

    fn recv_id(&self) -> StreamId {
        self.inner.recv_id()
    }
}

impl<B: Buf> quic::SendStream<B> for CheckedBidi<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.inner.poll_ready(cx)
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.inner.send_data(data)
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.inner.poll_finish(cx)
    }

    fn reset(&mut self, reset_code: u64) {
        self.inner.reset(reset_code)
    }

    fn send_id(&self) -> StreamId {
        self.inner.send_id()
    }
}

impl<B: Buf> quic::BidiStream<B> for CheckedBidi<B> {
    type SendStream = h3_quinn::SendStream<B>;
    type RecvStream = h3_quinn::RecvStream;

    /// (Only done once the request's head has been read and checked.)
    fn split(self) -> (Self::SendStream, Self::RecvStream) {
        self.inner.split()
    }
}

/// Reads a request stream's frames up to the end of its first HEADERS
/// frame, skipping frames of unknown types before it (RFC 9114 §9).
struct FirstHeaders {
    /// Bytes of a frame's type and length, or of a HEADERS payload, that
    /// came split over chunks.
    pending: Vec<u8>,
    /// Payload bytes of an unknown frame still to skip.
    skip: u64,
    limit: usize,
}

impl FirstHeaders {
    fn new(limit: usize) -> FirstHeaders {
        FirstHeaders {
            pending: Vec::new(),
            skip: 0,
            limit,
        }
    }

    /// Takes the next chunk the stream read: `Ok(true)` once the first
    /// HEADERS frame was read and found well-formed (or the stream holds
    /// something `h3` itself refuses), `Ok(false)` while it is not all in.
    fn feed(&mut self, chunk: &Bytes) -> Result<bool, Malformed> {
        let mut data = chunk.clone();
        loop {
            if self.skip > 0 {
                let n = self.skip.min(data.len() as u64);
                self.skip -= n;
                data.advance(n as usize);
                if self.skip > 0 {
                    return Ok(false);
                }
            }
            if data.is_empty() {
                return Ok(false);
            }
            // The frame's type and length, from what was kept and this.
            if !self.pending.is_empty() {
                self.pending.extend_from_slice(&data);
                data = Bytes::from(std::mem::take(&mut self.pending));
            }
            let Some((kind, len, head)) = frame_head(&data) else {
                if data.len() > 16 {
                    return Err(Malformed::Encoding);
                }
                self.pending = data.to_vec();
                return Ok(false);
            };
            match kind {
                HEADERS => {
                    if len > self.limit as u64 {
                        return Err(Malformed::TooLarge);
                    }
                    let end = head + len as usize;
                    if data.len() < end {
                        self.pending = data.to_vec();
                        return Ok(false);
                    }
                    check_request(&data[head..end])?;
                    return Ok(true);
                }
                // DATA first, or a frame a request stream must not have:
                // h3 refuses it itself.
                DATA | 0x02..=0x0d => return Ok(true),
                _ => {
                    // An unknown (or reserved) type: skipped, and what
                    // follows it read from the top.
                    data.advance(head);
                    self.skip = len;
                }
            }
        }
    }
}

/// A frame's type and length (two QUIC varints) at the start of `buf`,
/// and where its payload starts; None while they are not all there.
fn frame_head(buf: &[u8]) -> Option<(u64, u64, usize)> {
    let (kind, a) = varint(buf)?;
    let (len, b) = varint(&buf[a..])?;
    Some((kind, len, a + b))
}

/// A QUIC variable-length integer (RFC 9000 §16) and its size.
fn varint(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    let size = 1usize << (first >> 6);
    let bytes = buf.get(..size)?;
    let mut value = u64::from(first & 0x3f);
    for &b in &bytes[1..] {
        value = (value << 8) | u64::from(b);
    }
    Some((value, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
        assert!(payload.len() < 64);
        let mut out = vec![kind, payload.len() as u8];
        out.extend_from_slice(payload);
        out
    }

    /// GET https://a/x, all from the static table and literals.
    const GOOD: &[u8] = &[0, 0, 0xd1, 0xd7, 0x50, 1, b'a', 0x51, 2, b'/', b'x'];
    /// The same with `:path` twice.
    const TWICE: &[u8] = &[0, 0, 0xd1, 0xd7, 0x50, 1, b'a', 0x51, 2, b'/', b'x', 0xc1];

    fn feed_split(bytes: &[u8], at: usize) -> Result<bool, Malformed> {
        let mut first = FirstHeaders::new(1024);
        let (a, b) = bytes.split_at(at);
        if first.feed(&Bytes::copy_from_slice(a))? {
            return Ok(true);
        }
        first.feed(&Bytes::copy_from_slice(b))
    }

    #[test]
    fn the_first_headers_frame_is_checked_wherever_the_chunks_split_it() {
        let good = frame(1, GOOD);
        let bad = frame(1, TWICE);
        for at in 0..=good.len() {
            assert_eq!(feed_split(&good, at), Ok(true), "{at}");
        }
        for at in 0..=bad.len() {
            assert_eq!(feed_split(&bad, at), Err(Malformed::PseudoTwice), "{at}");
        }
        // Not all there yet.
        let mut first = FirstHeaders::new(1024);
        assert_eq!(first.feed(&Bytes::copy_from_slice(&good[..5])), Ok(false));
    }

    #[test]
    fn unknown_frames_before_it_are_skipped() {
        // A reserved type (0x21 is 0x1f * 1 + 0x21... as a varint: 0x21).
        let mut bytes = frame(0x21, b"grease!");
        bytes.extend(frame(1, TWICE));
        for at in 0..=bytes.len() {
            assert_eq!(feed_split(&bytes, at), Err(Malformed::PseudoTwice), "{at}");
        }
        // DATA first is h3's to refuse.
        assert_eq!(feed_split(&frame(0, b"x"), 2), Ok(true));
    }

    #[test]
    fn a_headers_frame_past_the_limit_is_refused_before_it_is_read() {
        let mut first = FirstHeaders::new(16);
        // HEADERS of 16383 bytes (a two-byte varint length).
        let head = [0x01, 0x7f, 0xff];
        assert_eq!(
            first.feed(&Bytes::copy_from_slice(&head)),
            Err(Malformed::TooLarge)
        );
    }
}
