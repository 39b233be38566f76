//! A client's TCP connection, read and written with plain system calls
//! for as long as they finish at once, and handed to the reactor only
//! when one would wait.
//!
//! A client that opens a connection for one request has usually sent it
//! by the time the connection is accepted, and takes the response at
//! once. Such a connection never needs the reactor: registering it would
//! cost an `epoll_ctl` to add it and another to take it out again, the
//! reactor's record of it (an allocation), and a trip through the
//! reactor to learn that the request is already there. So the socket is
//! registered only when a read or a write would block, when a read has
//! drained what was there (the next read would wait), or after a few
//! direct operations (so that a client that always has bytes waiting
//! still lets the worker's other tasks run: the reactor's streams yield
//! by the runtime's budget, these would not).

use std::io::{self, IoSlice, Write as _};
use std::os::fd::{AsFd, BorrowedFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::stream::ClientStream;

/// Reads and writes that finish at once before the socket is registered
/// in any case: a request and its response are two.
const DIRECT_OPS: u8 = 8;

/// A client's TCP connection (see the module's doc).
pub(crate) struct ClientTcp {
    state: State,
    /// Direct operations left before the socket is registered.
    direct_left: u8,
    /// The last direct read took all there was: the next would block.
    drained: bool,
}

enum State {
    /// Not known to the reactor; non-blocking.
    Direct(std::net::TcpStream),
    /// Registered with the reactor.
    Registered(tokio::net::TcpStream),
    /// Registration failed: the socket is closed.
    Failed,
}

impl ClientTcp {
    /// Takes an accepted, non-blocking socket.
    pub fn new(socket: std::net::TcpStream) -> Self {
        ClientTcp {
            state: State::Direct(socket),
            direct_left: DIRECT_OPS,
            drained: false,
        }
    }

    /// Whether the socket has been handed to the reactor.
    #[cfg(test)]
    pub fn is_registered(&self) -> bool {
        matches!(self.state, State::Registered(_))
    }

    /// The socket as the reactor's, registering it first if it is not.
    fn registered(&mut self) -> io::Result<&mut tokio::net::TcpStream> {
        if let State::Direct(_) = self.state {
            let State::Direct(socket) = std::mem::replace(&mut self.state, State::Failed) else {
                unreachable!("matched above");
            };
            // Outside a runtime there is no reactor to register with
            // (tokio would panic): an error instead.
            if tokio::runtime::Handle::try_current().is_err() {
                self.state = State::Direct(socket);
                return Err(io::Error::other("no reactor to wait on"));
            }
            // The registration reports the socket's readiness as it is
            // now: bytes that came since the last direct read are not
            // missed.
            self.state = State::Registered(tokio::net::TcpStream::from_std(socket)?);
        }
        match &mut self.state {
            State::Registered(stream) => Ok(stream),
            State::Direct(_) | State::Failed => Err(io::Error::from(io::ErrorKind::NotConnected)),
        }
    }

    /// The socket for a direct operation, while it may take one.
    fn direct(&mut self) -> Option<&std::net::TcpStream> {
        match &self.state {
            State::Direct(socket) if self.direct_left > 0 => {
                self.direct_left -= 1;
                Some(socket)
            }
            _ => None,
        }
    }
}

/// Whether a direct operation's error sends it to the reactor: it
/// would block, or a signal cut it short (the reactor's attempt is the
/// retry).
fn must_wait(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

impl AsyncRead for ClientTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.drained {
            if let Some(socket) = this.direct() {
                let room = buf.remaining();
                match super::sockopt::recv_into(socket.as_fd(), buf) {
                    Ok(n) => {
                        // A read that did not fill the room took all the
                        // socket had.
                        this.drained = n < room;
                        return Poll::Ready(Ok(()));
                    }
                    Err(e) if must_wait(&e) => {}
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
        }
        match this.registered() {
            Ok(stream) => Pin::new(stream).poll_read(cx, buf),
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

impl AsyncWrite for ClientTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(data)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(mut socket) = this.direct() {
            match socket.write_vectored(data) {
                Err(e) if must_wait(&e) => {}
                done => return Poll::Ready(done),
            }
        }
        match this.registered() {
            Ok(stream) => Pin::new(stream).poll_write_vectored(cx, data),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Nothing is buffered here.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match &mut this.state {
            State::Direct(socket) => Poll::Ready(socket.shutdown(std::net::Shutdown::Write)),
            State::Registered(stream) => Pin::new(stream).poll_shutdown(cx),
            State::Failed => Poll::Ready(Err(io::Error::from(io::ErrorKind::NotConnected))),
        }
    }
}

impl ClientStream for ClientTcp {
    fn socket(&self) -> Option<BorrowedFd<'_>> {
        match &self.state {
            State::Direct(socket) => Some(socket.as_fd()),
            State::Registered(stream) => Some(stream.as_fd()),
            State::Failed => None,
        }
    }

    fn needs_shutdown(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::ClientTcp;
    use std::io::{Read, Write};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A connected pair: the accepted end (non-blocking, as the accept
    /// loop makes it) and the client's end.
    fn pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        accepted.set_nonblocking(true).unwrap();
        (accepted, client)
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A request already there and a response the socket takes at once:
    /// the connection never meets the reactor.
    #[test]
    fn a_request_waiting_and_its_response_go_without_the_reactor() {
        runtime().block_on(async {
            let (accepted, mut client) = pair();
            client.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
            // The bytes are in the accepted socket once a peek sees them.
            let mut probe = [0u8; 1];
            accepted.set_nonblocking(false).unwrap();
            accepted.peek(&mut probe).unwrap();
            accepted.set_nonblocking(true).unwrap();
            let mut conn = ClientTcp::new(accepted);
            let mut buf = Vec::with_capacity(4096);
            let n = conn.read_buf(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"GET / HTTP/1.1\r\n\r\n");
            conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                .await
                .unwrap();
            assert!(!conn.is_registered());
            drop(conn);
            let mut got = Vec::new();
            client.read_to_end(&mut got).unwrap();
            assert_eq!(&got[..], b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        });
    }

    /// A read with nothing there waits on the reactor, and wakes for
    /// bytes sent after it began waiting.
    #[test]
    fn a_read_that_would_block_registers_and_waits() {
        runtime().block_on(async {
            let (accepted, mut client) = pair();
            let mut conn = ClientTcp::new(accepted);
            let mut buf = [0u8; 16];
            // Polled once with nothing there: it waits, registered.
            let first = tokio::time::timeout(std::time::Duration::ZERO, conn.read(&mut buf));
            assert!(first.await.is_err(), "nothing to read yet");
            assert!(conn.is_registered());
            client.write_all(b"late").unwrap();
            let read =
                tokio::time::timeout(std::time::Duration::from_secs(10), conn.read(&mut buf));
            let n = read.await.expect("woken").unwrap();
            assert_eq!(&buf[..n], b"late");
        });
    }

    /// After a read that drained the socket, the next read goes to the
    /// reactor without trying (it would block); and a client that keeps
    /// bytes waiting is registered after a few direct reads all the same.
    #[test]
    fn a_drained_socket_or_a_spent_budget_registers() {
        runtime().block_on(async {
            let (accepted, mut client) = pair();
            client.write_all(b"abc").unwrap();
            let mut conn = ClientTcp::new(accepted);
            let mut buf = [0u8; 16];
            let mut n = 0;
            while n < 3 {
                n += conn.read(&mut buf[n..]).await.unwrap();
            }
            assert!(!conn.is_registered());
            client.write_all(b"d").unwrap();
            let read =
                tokio::time::timeout(std::time::Duration::from_secs(10), conn.read(&mut buf));
            assert_eq!(read.await.expect("woken").unwrap(), 1);
            assert!(
                conn.is_registered(),
                "a drained socket waits on the reactor"
            );

            let (accepted, mut client) = pair();
            client.write_all(&[b'x'; 64]).unwrap();
            let mut conn = ClientTcp::new(accepted);
            let mut one = [0u8; 1];
            for _ in 0..=super::DIRECT_OPS {
                let read =
                    tokio::time::timeout(std::time::Duration::from_secs(10), conn.read(&mut one));
                read.await.expect("read").unwrap();
            }
            assert!(
                conn.is_registered(),
                "bytes always waiting: registered all the same"
            );
        });
    }
}
