//! HTTP/2 to backends: a TLS backend that picks `h2` by ALPN, or a
//! cleartext one declared `.h2c = 1`. One connection carries many
//! fetches as streams; each fetch sees an ordinary connection
//! ([`H2Stream`]) on which it writes an HTTP/1.1 request and reads an
//! HTTP/1.1 response, so the exchange, its timeouts, counters, log
//! records and parser limits are the same whatever carries it.
//!
//! A backend's connections are kept in its pool ([`H2Conns`]): a fetch
//! takes a stream on the first live connection its own worker opened
//! with room under the backend's `SETTINGS_MAX_CONCURRENT_STREAMS`, and
//! a new connection is opened only when none has room. A connection is
//! driven by a task on the worker that opened it, so its streams are
//! kept to that worker's fetches: a stream another worker took would
//! cross threads at every frame (a wake-up through the other worker's
//! event loop), and would wait whenever that worker is held. Each worker
//! that fetches from an HTTP/2 backend thus opens a connection of its
//! own, as each nginx worker keeps its own upstream connections.
//! `.max_connections` bounds the streams (each fetch holds one place),
//! not the sockets. A connection that received GOAWAY takes no new
//! streams; a request it refused fails before any response byte, so the
//! exchange retries it on a new connection as it retries a reused HTTP/1
//! connection found closed.

mod duplex;
mod stream;

pub use duplex::StreamedBody;
pub use stream::H2Stream;

use crate::tls::TlsDetails;
use crate::Stream;
use bytes::Bytes;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How a backend's connections may speak HTTP/2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum H2Mode {
    /// HTTP/1.1 only.
    #[default]
    Off,
    /// Whatever ALPN settles on a TLS connection (`h2` is offered first
    /// unless `.alpn` says otherwise).
    Alpn,
    /// HTTP/2 from the first byte on a cleartext connection (`.h2c = 1`).
    PriorKnowledge,
}

impl H2Mode {
    /// Whether a connection just opened (and past any TLS handshake)
    /// speaks HTTP/2.
    pub fn speaks_h2(self, stream: &Stream) -> bool {
        match self {
            H2Mode::Off => false,
            H2Mode::PriorKnowledge => true,
            H2Mode::Alpn => stream.tls().and_then(|t| t.alpn) == Some("h2"),
        }
    }
}

/// The window each response stream may fill before the fetch reads it.
const STREAM_WINDOW: u32 = 256 * 1024;
/// The window all of a connection's streams share.
const CONNECTION_WINDOW: u32 = 4 * 1024 * 1024;
/// The most header bytes a response may decode to (the HTTP/1 parse of
/// the head applies the configured `http_resp_*` limits after this).
const MAX_HEADER_LIST: u32 = 1024 * 1024;

/// One HTTP/2 connection to a backend, shared by the fetches on it.
pub struct H2Conn {
    send: h2::client::SendRequest<Bytes>,
    fd: i32,
    local: Option<SocketAddr>,
    tls: Option<TlsDetails>,
    /// Over TLS: `https` in `:scheme`.
    secure: bool,
    /// Streams open on it now.
    streams: AtomicUsize,
    /// The connection ended, failed, or the backend sent GOAWAY: it
    /// takes no new streams.
    done: Arc<AtomicBool>,
    /// Since when no stream has been open (for `backend_idle_timeout`).
    idle_since: Mutex<Instant>,
    /// The worker whose task drives it ([`crate::here::this_thread`]).
    worker: usize,
}

impl std::fmt::Debug for H2Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H2Conn")
            .field("fd", &self.fd)
            .field("streams", &self.streams.load(Ordering::Relaxed))
            .field("done", &self.done.load(Ordering::Relaxed))
            .finish()
    }
}

impl H2Conn {
    /// The HTTP/2 preface and SETTINGS exchange over a fresh connection,
    /// within `limit`; the connection is then driven by a task of its own.
    pub async fn handshake(stream: Stream, limit: Duration) -> std::io::Result<Arc<H2Conn>> {
        let fd = stream.fd();
        let local = stream.local_addr();
        let tls = stream.tls();
        let mut builder = h2::client::Builder::new();
        builder
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .max_header_list_size(MAX_HEADER_LIST)
            .enable_push(false);
        let (send, connection) = match tokio::time::timeout(limit, builder.handshake(stream)).await
        {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => return Err(io_error(e)),
            Err(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "HTTP/2 handshake timed out",
                ))
            }
        };
        let done = Arc::new(AtomicBool::new(false));
        let ended = done.clone();
        tokio::spawn(async move {
            let _ = connection.await;
            ended.store(true, Ordering::Relaxed);
        });
        Ok(Arc::new(H2Conn {
            send,
            fd,
            local,
            secure: tls.is_some(),
            tls,
            streams: AtomicUsize::new(0),
            done,
            idle_since: Mutex::new(Instant::now()),
            worker: crate::here::this_thread(),
        }))
    }

    /// Whether it may take another stream now.
    fn has_room(&self) -> bool {
        !self.done.load(Ordering::Relaxed)
            && self.streams.load(Ordering::Relaxed) < self.send.current_max_send_streams()
    }

    /// A stream on it for one fetch (or a probe).
    pub fn open(self: &Arc<Self>) -> H2Stream {
        self.streams.fetch_add(1, Ordering::Relaxed);
        H2Stream::new(self.clone())
    }

    /// A stream of it ended.
    fn closed_stream(&self) {
        if self.streams.fetch_sub(1, Ordering::Relaxed) == 1 {
            *self.idle_since.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        }
    }

    /// It takes no new streams (the backend said GOAWAY, or it failed).
    fn retire(&self) {
        self.done.store(true, Ordering::Relaxed);
    }

    fn idle_longer_than(&self, max_idle: Duration) -> bool {
        self.streams.load(Ordering::Relaxed) == 0
            && self
                .idle_since
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .elapsed()
                >= max_idle
    }
}

/// The HTTP/2 connections to one backend address.
#[derive(Debug, Default)]
pub struct H2Conns {
    live: Mutex<Vec<Arc<H2Conn>>>,
    /// Each worker's lock for opening a connection ([`H2Conns::opening`]),
    /// by worker.
    opening: Mutex<Vec<(usize, Arc<tokio::sync::Mutex<()>>)>>,
}

impl H2Conns {
    /// The lock this worker holds while it opens a connection, so that a
    /// burst of its fetches opens one and shares it rather than opening
    /// one each. Each worker has its own: a worker held up in the middle
    /// of a handshake holds up none of the others' fetches.
    pub fn opening(&self) -> Arc<tokio::sync::Mutex<()>> {
        let here = crate::here::this_thread();
        let mut locks = self.opening.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, lock)) = locks.iter().find(|(w, _)| *w == here) {
            return lock.clone();
        }
        let lock = Arc::new(tokio::sync::Mutex::new(()));
        locks.push((here, lock.clone()));
        lock
    }

    /// A stream on a live connection this worker opened with room, if
    /// there is one.
    pub fn stream(&self) -> Option<H2Stream> {
        let here = crate::here::this_thread();
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|c| !c.done.load(Ordering::Relaxed));
        live.iter()
            .find(|c| c.worker == here && c.has_room())
            .map(H2Conn::open)
    }

    /// Keeps a new connection for the fetches that come after.
    pub fn add(&self, conn: Arc<H2Conn>) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.push(conn);
    }

    /// Closes connections without streams for `max_idle` (dropping the
    /// last handle ends the connection with GOAWAY).
    pub fn reap(&self, max_idle: Duration) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|c| !c.done.load(Ordering::Relaxed) && !c.idle_longer_than(max_idle));
    }

    /// How many connections are open.
    pub fn len(&self) -> usize {
        self.live.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An HTTP/2 error as the exchange sees it: an I/O error whose text says
/// what the backend did.
fn io_error(e: h2::Error) -> std::io::Error {
    if e.is_io() {
        if let Some(io) = e.into_io() {
            return io;
        }
        return std::io::Error::other("HTTP/2 I/O error");
    }
    let kind = if e.is_go_away() || e.is_reset() {
        std::io::ErrorKind::ConnectionReset
    } else {
        std::io::ErrorKind::InvalidData
    };
    std::io::Error::new(kind, format!("HTTP/2: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker opening a connection keeps its own later fetches waiting
    /// for it, and no other worker's.
    #[test]
    fn each_worker_opens_under_a_lock_of_its_own() {
        let conns = Arc::new(H2Conns::default());
        let held = conns.opening().try_lock_owned().expect("free at first");
        assert!(
            conns.opening().try_lock_owned().is_err(),
            "a second fetch on this worker waits for the first's connection"
        );
        let other = conns.clone();
        let elsewhere = std::thread::spawn(move || other.opening().try_lock_owned().is_ok());
        assert!(
            elsewhere.join().unwrap(),
            "another worker opens its own without waiting"
        );
        drop(held);
        assert!(conns.opening().try_lock_owned().is_ok());
    }
}
