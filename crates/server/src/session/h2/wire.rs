//! The connection as the `h2` crate reads and writes it: the bytes read
//! before HTTP/2 was known to be spoken come first, every byte read
//! passes the frame guard, an upgraded request's frames are put in after
//! the client's first frame, and writes are gathered into one write per
//! pass of the session's loop.

use super::guard::FrameGuard;
use crate::transport::io::ClientStream;
use bytes::Bytes;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The connection as the `h2` crate reads and writes it: the bytes read
/// before HTTP/2 was known to be spoken first, every byte read passing
/// the frame guard; after an upgrade, the frames of the request that
/// asked for it, once the client's first frame has passed.
pub(super) struct Guarded {
    ahead: Bytes,
    inner: Box<dyn ClientStream>,
    guard: FrameGuard,
    upgraded: Option<Bytes>,
    /// Bytes written and not yet flushed, and how many of them went.
    gathered: Vec<u8>,
    sent: usize,
    /// The pass of the connection's loop in which a flush was put off.
    deferred: Option<u64>,
}

impl Guarded {
    /// The connection `inner`, with `ahead` read from it already, and the
    /// frames of an upgraded request to put in.
    pub(super) fn new(
        ahead: Bytes,
        inner: Box<dyn ClientStream>,
        guard: FrameGuard,
        upgraded: Option<Bytes>,
    ) -> Guarded {
        Guarded {
            ahead,
            inner,
            guard,
            upgraded,
            gathered: Vec::new(),
            sent: 0,
            deferred: None,
        }
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = &mut *self;
        // A flush put off in an earlier pass goes first; if the socket
        // cannot take it now, reading goes on and the next flush retries.
        if me.flush_due() {
            match me.poll_drain(cx) {
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) | Poll::Pending => {}
            }
        }
        // Until the upgraded request's frames are in, reads stop at the
        // end of the client's first frame, where they go.
        let mut limit = buf.remaining();
        if let Some(frames) = me.upgraded.as_mut() {
            match me.guard.first_frame_left() {
                None => {
                    let n = frames.len().min(buf.remaining());
                    buf.put_slice(&frames.split_to(n));
                    if frames.is_empty() {
                        me.upgraded = None;
                    }
                    return Poll::Ready(Ok(()));
                }
                Some(left) => limit = limit.min(left),
            }
        }
        let start = buf.filled().len();
        if !me.ahead.is_empty() {
            let n = me.ahead.len().min(limit);
            buf.put_slice(&me.ahead.split_to(n));
        } else if limit < buf.remaining() {
            let mut room = [0u8; 512];
            let mut small = ReadBuf::new(&mut room[..limit.min(512)]);
            match Pin::new(&mut me.inner).poll_read(cx, &mut small) {
                Poll::Ready(Ok(())) => buf.put_slice(small.filled()),
                other => return other,
            }
        } else {
            match Pin::new(&mut me.inner).poll_read(cx, buf) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
        }
        me.guard.scan(&buf.filled()[start..]);
        Poll::Ready(Ok(()))
    }
}

/// Most bytes gathered for one write to the connection.
const GATHER: usize = 64 * 1024;

impl Guarded {
    /// Whether a flush put off earlier must happen now: a later pass of
    /// the loop has begun, or the loop has ended.
    fn flush_due(&self) -> bool {
        let state = &self.guard.state;
        self.deferred.is_some_and(|at| {
            !state.gathering.load(Ordering::Relaxed) || state.pass.load(Ordering::Relaxed) != at
        })
    }

    /// Writes what was gathered; Ready once all of it went.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while self.sent < self.gathered.len() {
            let n = match Pin::new(&mut self.inner).poll_write(cx, &self.gathered[self.sent..]) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()))
                }
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            self.sent += n;
        }
        // Nothing kept between writes: an idle connection holds no buffer.
        self.gathered = Vec::new();
        self.sent = 0;
        self.deferred = None;
        Poll::Ready(Ok(()))
    }
}

/// Writes are gathered and flushed once per pass of the connection's
/// loop. The h2 crate writes and flushes each DATA frame on its own, so
/// the responses of a hundred streams would leave in a hundred writes
/// (and TLS records); here the first flush of a pass is put off (the task
/// is woken to come back), and the bytes go in one write when the next
/// pass reads or flushes, or once 64 KiB are gathered. Outside the loop
/// (handshake, GOAWAY) a flush is a flush.
impl AsyncWrite for Guarded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.poll_write_vectored(cx, &[std::io::IoSlice::new(data)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let me = &mut *self;
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if me.flush_due() || me.gathered.len() + len > GATHER {
            match me.poll_drain(cx) {
                Poll::Ready(Ok(())) => {}
                other => return other.map(|r| r.map(|()| 0)),
            }
            if len > GATHER {
                return Pin::new(&mut me.inner).poll_write_vectored(cx, bufs);
            }
        }
        for b in bufs {
            me.gathered.extend_from_slice(b);
        }
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let me = &mut *self;
        let state = &me.guard.state;
        if state.gathering.load(Ordering::Relaxed)
            && !me.gathered.is_empty()
            && me.gathered.len() < GATHER
        {
            let pass = state.pass.load(Ordering::Relaxed);
            match me.deferred {
                // The first flush of this pass: put off, and the task
                // woken to come back for it.
                None => {
                    me.deferred = Some(pass);
                    cx.waker().wake_by_ref();
                    return Poll::Ready(Ok(()));
                }
                Some(at) if at == pass => return Poll::Ready(Ok(())),
                Some(_) => {}
            }
        }
        match me.poll_drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut me.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let me = &mut *self;
        match me.poll_drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut me.inner).poll_shutdown(cx),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// A connection that keeps each write it is given.
    struct Kept(Arc<Mutex<Vec<Vec<u8>>>>);

    impl AsyncRead for Kept {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            Poll::Pending
        }
    }

    impl AsyncWrite for Kept {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            data: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            self.0.lock().unwrap().push(data.to_vec());
            Poll::Ready(Ok(data.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    impl ClientStream for Kept {
        fn socket(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
            None
        }
    }

    #[test]
    fn writes_of_a_pass_leave_together() {
        let state = Arc::new(super::super::ConnState::new(
            Duration::from_secs(1),
            100,
            Duration::from_secs(60),
        ));
        let kept = Arc::new(Mutex::new(Vec::new()));
        let mut io = Guarded::new(
            Bytes::new(),
            Box::new(Kept(kept.clone())),
            FrameGuard::new(state.clone()),
            None,
        );
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut write_and_flush = |io: &mut Guarded, data: &[u8]| {
            assert!(matches!(
                Pin::new(&mut *io).poll_write(&mut cx, data),
                Poll::Ready(Ok(n)) if n == data.len()
            ));
            assert!(Pin::new(&mut *io).poll_flush(&mut cx).is_ready());
        };
        // Outside the loop (the handshake): a flush is a flush.
        write_and_flush(&mut io, b"settings");
        assert_eq!(kept.lock().unwrap().len(), 1);
        // In a pass: each frame flushed as the h2 crate does, none written.
        state.gathering.store(true, Ordering::Relaxed);
        state.pass.store(1, Ordering::Relaxed);
        for frame in [&b"one"[..], b"two", b"three"] {
            write_and_flush(&mut io, frame);
        }
        assert_eq!(kept.lock().unwrap().len(), 1);
        // The next pass: all of it in one write.
        state.pass.store(2, Ordering::Relaxed);
        write_and_flush(&mut io, b"four");
        let writes = kept.lock().unwrap().clone();
        assert_eq!(writes.len(), 2);
        assert_eq!(writes[1], b"onetwothree");
        // The loop ended: what is left goes at the next flush.
        state.gathering.store(false, Ordering::Relaxed);
        assert!(Pin::new(&mut io).poll_flush(&mut cx).is_ready());
        assert_eq!(kept.lock().unwrap()[2], b"four");
    }
}
