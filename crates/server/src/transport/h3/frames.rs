//! A QUIC stream's receiving half read as HTTP/3 frames
//! (`lacquer_http::h3::frames` does the framing).

pub(crate) use lacquer_http::h3::frames::*;
use std::task::{ready, Context, Poll};

/// A QUIC stream's receiving half, read as frames.
pub(crate) struct FrameReader {
    recv: quinn::RecvStream,
    frames: FrameBuf,
}

impl FrameReader {
    pub fn new(recv: quinn::RecvStream, limit: u64) -> FrameReader {
        FrameReader {
            recv,
            frames: FrameBuf::new(limit),
        }
    }

    /// Asks the peer to stop sending (with an HTTP/3 error code).
    pub fn stop(&mut self, code: u64) {
        let _ = self
            .recv
            .stop(quinn::VarInt::from_u64(code).unwrap_or(quinn::VarInt::MAX));
    }

    /// The next frame, or piece of one.
    pub async fn next(&mut self) -> Result<Frame, FrameError> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Result<Frame, FrameError>> {
        loop {
            if let Some(frame) = self.frames.next_frame()? {
                return Poll::Ready(Ok(frame));
            }
            let mut chunk = [0u8; 4096];
            match ready!(self.recv.poll_read(cx, &mut chunk)) {
                Ok(0) => self.frames.finish(),
                Ok(n) => self.frames.push(&chunk[..n]),
                Err(_) => return Poll::Ready(Err(FrameError::Stream)),
            }
        }
    }
}
