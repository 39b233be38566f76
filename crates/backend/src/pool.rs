//! The connections a backend's fetches share: idle HTTP/1 connections
//! kept for the next fetch to the same address, and HTTP/2 connections
//! with room for another stream. Idle connections are kept on a shelf
//! for each worker (each thread, [`crate::here::slot`]), each shelf with a
//! lock and a cache line of its own, so that the fetches of different
//! workers do not all take one lock and write one line. A fetch takes
//! the newest connection on its own worker's shelf, else the newest on
//! any other: any worker's fetch may still take any idle connection, as
//! varnishd's threads share one pool per backend. One taken from
//! another worker is moved to this worker's reactor first
//! ([`crate::BackendStream::rebind`]), so that it answers the worker
//! using it, and not one that may be busy or held.

use crate::here::{slot, this_thread, SLOTS};
use crate::{h2, Address, Backend, Stream};
use lacquer_core::counters::{Counter, COUNTERS};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The connections of an address (and preamble, TLS and HTTP/2 mode)
/// that fetches may take: idle HTTP/1 ones, and HTTP/2 ones with room
/// for another stream.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    /// Idle HTTP/1 connections, a shelf for each worker.
    pub(crate) idle: Shelves,
    pub(crate) h2: h2::H2Conns,
    /// A connection has settled on HTTP/2 here.
    pub(crate) speaks_h2: AtomicBool,
}

/// An idle connection: since when, and the thread whose reactor it is
/// registered with ([`this_thread`]).
type Idle = (Stream, Instant, usize);

/// A pool's idle HTTP/1 connections, on a shelf for each worker's slot,
/// newest last.
#[derive(Debug)]
pub(crate) struct Shelves {
    shelves: [Shelf; SLOTS],
    /// A bit for each shelf that may hold a connection: set by its worker
    /// when it puts one on a shelf whose bit is clear, cleared (under the
    /// shelf's lock) by whoever finds the shelf empty while looking for
    /// another's. A worker that takes from and gives back to its own shelf
    /// only reads it.
    stocked: AtomicU64,
}

impl Default for Shelves {
    fn default() -> Self {
        Shelves {
            shelves: std::array::from_fn(|_| Shelf::default()),
            stocked: AtomicU64::new(0),
        }
    }
}

/// One worker's idle connections, on a cache line of its own.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Shelf(Mutex<Vec<Idle>>);

impl Shelf {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Idle>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Shelves {
    /// The newest idle connection on shelf `own`, else the newest on any
    /// other.
    fn take(&self, own: usize) -> Option<Idle> {
        if let Some(idle) = self.shelves[own].lock().pop() {
            return Some(idle);
        }
        loop {
            let newest = self
                .stocked_shelves()
                .filter(|&i| i != own)
                .filter_map(|i| Some((i, self.look(i)?)))
                .max_by_key(|&(_, since)| since)?;
            // Taken meanwhile: look again.
            if let Some(idle) = self.shelves[newest.0].lock().pop() {
                return Some(idle);
            }
        }
    }

    /// The shelves whose bit is set.
    fn stocked_shelves(&self) -> impl Iterator<Item = usize> {
        let mut bits = self.stocked.load(Ordering::Acquire);
        std::iter::from_fn(move || {
            let i = bits.trailing_zeros() as usize;
            (i < SLOTS).then(|| {
                bits &= bits - 1;
                i
            })
        })
    }

    /// When the newest connection on shelf `i` was put there; clears the
    /// shelf's bit if it holds none.
    fn look(&self, i: usize) -> Option<Instant> {
        let shelf = self.shelves[i].lock();
        let since = shelf.last().map(|idle| idle.1);
        if since.is_none() {
            self.stocked.fetch_and(!(1u64 << i), Ordering::AcqRel);
        }
        since
    }

    fn put(&self, own: usize, idle: Idle) {
        let mut shelf = self.shelves[own].lock();
        shelf.push(idle);
        let bit = 1u64 << own;
        if self.stocked.load(Ordering::Relaxed) & bit == 0 {
            self.stocked.fetch_or(bit, Ordering::AcqRel);
        }
    }

    /// Drops the connections idle `max_idle` or longer.
    fn reap(&self, max_idle: Duration) {
        for i in self.stocked_shelves() {
            self.shelves[i]
                .lock()
                .retain(|(_, since, _)| since.elapsed() < max_idle);
            self.look(i);
        }
    }
}

/// The pool of an address (and preamble, TLS and HTTP/2 mode), shared
/// while any backend holds it.
pub(crate) fn shared_pool(
    addr: &Address,
    preamble: Option<&[u8]>,
    tls: Option<&str>,
    h2: h2::H2Mode,
) -> Arc<Pool> {
    type Key = (Address, Option<Vec<u8>>, Option<String>, h2::H2Mode);
    static POOLS: std::sync::OnceLock<
        Mutex<std::collections::HashMap<Key, std::sync::Weak<Pool>>>,
    > = std::sync::OnceLock::new();
    let mut pools = POOLS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    pools.retain(|_, p| p.strong_count() > 0);
    let key = (
        addr.clone(),
        preamble.map(<[u8]>::to_vec),
        tls.map(str::to_string),
        h2,
    );
    if let Some(pool) = pools.get(&key).and_then(std::sync::Weak::upgrade) {
        return pool;
    }
    let pool = Arc::new(Pool::default());
    pools.insert(key, Arc::downgrade(&pool));
    pool
}

impl Backend {
    /// An idle connection younger than `max_idle` and still quiet: the
    /// last one this worker left, else the last one another left, moved
    /// to this thread's reactor.
    pub(crate) fn take_idle(&self, max_idle: Duration) -> Option<Stream> {
        let here = this_thread();
        let own = slot();
        loop {
            let (stream, since, home) = self.pool.idle.take(own)?;
            // A pooled connection that is readable has been closed by the
            // backend (or holds garbage): either way it is useless.
            if since.elapsed() >= max_idle || !stream.is_quiet() {
                continue;
            }
            if home == here {
                return Some(stream);
            }
            if let Ok(stream) = stream.rebind() {
                return Some(stream);
            }
        }
    }

    pub(crate) fn recycle(&self, stream: Stream) {
        if self.proxy_header != 0 || stream.multiplexed() {
            return;
        }
        COUNTERS.inc(Counter::backend_recycle);
        self.pool
            .idle
            .put(slot(), (stream, Instant::now(), this_thread()));
    }

    /// Closes pooled connections idle longer than `max_idle`, and
    /// HTTP/2 ones without a stream as long.
    pub fn reap(&self, max_idle: Duration) {
        self.pool.idle.reap(max_idle);
        self.pool.h2.reap(max_idle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A worker of its own that runs `make` on its runtime, then is held
    /// (its runtime, and so its reactor, not driven) until dropped.
    struct HeldWorker(Option<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)>);

    impl HeldWorker {
        fn run<T, F>(make: impl FnOnce() -> F + Send + 'static) -> (T, HeldWorker)
        where
            T: Send + 'static,
            F: std::future::Future<Output = T>,
        {
            let (made, got) = std::sync::mpsc::channel();
            let (release, end) = std::sync::mpsc::channel::<()>();
            let thread = std::thread::spawn(move || {
                let rt = runtime();
                made.send(rt.block_on(make())).unwrap();
                end.recv().ok();
                drop(rt);
            });
            let value = got.recv().unwrap();
            (value, HeldWorker(Some((release, thread))))
        }
    }

    impl Drop for HeldWorker {
        fn drop(&mut self) {
            if let Some((release, thread)) = self.0.take() {
                let _ = release.send(());
                let _ = thread.join();
            }
        }
    }

    /// Reads `n` bytes from `stream`, waiting at most 5 s.
    async fn read_some(stream: &mut Stream, n: usize) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; n];
        let read = stream.read_exact(&mut buf);
        match tokio::time::timeout(Duration::from_secs(5), read).await {
            Ok(Ok(_)) => Some(buf),
            _ => None,
        }
    }

    /// A connection pooled on one worker and taken on another is read
    /// through the taker's reactor: it is served while the first worker's
    /// thread is held and its reactor not driven.
    #[test]
    fn a_connection_taken_on_another_worker_answers_that_worker() {
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        let backend = Arc::new(Backend::new(
            "b",
            &addr.to_string(),
            Address::Tcp(addr),
            "h",
        ));
        let pooling = backend.clone();
        let ((), _held) = HeldWorker::run(move || async move {
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            pooling.recycle(Box::new(stream));
        });
        let (mut peer, _) = server.accept().unwrap();
        let got = runtime().block_on(async {
            let mut stream = backend.take_idle(Duration::from_secs(60)).expect("pooled");
            peer.write_all(b"hi").unwrap();
            read_some(&mut stream, 2).await
        });
        assert_eq!(got.as_deref(), Some(&b"hi"[..]), "read within 5 s");
    }

    /// A worker takes back its own idle connection before another's, even
    /// one pooled later.
    #[test]
    fn a_worker_takes_its_own_idle_connection_first() {
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        let backend = Backend::new("b", &addr.to_string(), Address::Tcp(addr), "h");
        let pool_one = || async {
            let s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let local = s.local_addr().unwrap();
            backend.recycle(Box::new(s));
            local
        };
        let rt = runtime();
        let mine = rt.block_on(pool_one());
        let theirs = std::thread::scope(|scope| {
            scope
                .spawn(|| runtime().block_on(pool_one()))
                .join()
                .unwrap()
        });
        let taken = rt.block_on(async {
            let first = backend.take_idle(Duration::from_secs(60)).unwrap();
            let second = backend.take_idle(Duration::from_secs(60)).unwrap();
            (first.local_addr(), second.local_addr())
        });
        assert_eq!(taken, (Some(mine), Some(theirs)));
    }

    /// A worker whose shelf is empty takes the newest connection on any
    /// other, whatever its slot, and none once all are taken; shelves it
    /// finds empty lose their bit, its own keeps it until another looks.
    #[test]
    fn a_worker_with_an_empty_shelf_takes_the_newest_on_any_other() {
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        let shelves = Shelves::default();
        runtime().block_on(async {
            let mut locals = Vec::new();
            for own in [40, 63, 5] {
                let s = tokio::net::TcpStream::connect(addr).await.unwrap();
                locals.push(s.local_addr().ok());
                shelves.put(own, (Box::new(s), Instant::now(), this_thread()));
            }
            let bits = |shelves: &Shelves| shelves.stocked.load(Ordering::Relaxed);
            assert_eq!(bits(&shelves), 1 << 40 | 1 << 63 | 1 << 5);
            let take = || shelves.take(5).map(|idle| idle.0.local_addr());
            assert_eq!(take(), Some(locals[2]), "its own first");
            assert_eq!(take(), Some(locals[1]), "then the newest");
            assert_eq!(take(), Some(locals[0]));
            assert_eq!(take(), None);
            assert_eq!(
                bits(&shelves),
                1 << 5,
                "the others' shelves were found empty"
            );
        });
    }

    /// A TLS connection moved to another worker's reactor goes on as it
    /// was: the same session, read and written from there.
    #[test]
    fn a_tls_connection_moved_to_another_worker_goes_on() {
        let cert = rcgen::generate_simple_self_signed(vec!["a.example".into()]).unwrap();
        let der = cert.cert.der().clone();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![der.clone()], key)
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(der).unwrap();
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // The server answers each line "ping" with "pong", on its own thread.
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
        std::thread::spawn(move || {
            let rt = runtime();
            rt.block_on(async move {
                listener.set_nonblocking(true).unwrap();
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let (tcp, _) = listener.accept().await.unwrap();
                let mut tls = acceptor.accept(tcp).await.unwrap();
                let mut buf = [0u8; 4];
                while tls.read_exact(&mut buf).await.is_ok() {
                    tls.write_all(b"pong").await.unwrap();
                }
            });
        });
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let (stream, _held) = HeldWorker::run(move || async move {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let name = rustls::pki_types::ServerName::try_from("a.example").unwrap();
            let tcp: Stream = Box::new(tcp);
            let mut tls = connector.connect(name, tcp).await.unwrap();
            tls.write_all(b"ping").await.unwrap();
            let mut buf = [0u8; 4];
            tls.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"pong");
            let tls: Stream = Box::new(tls);
            tls
        });
        let got = runtime().block_on(async {
            let mut stream = stream.rebind().unwrap();
            // As an exchange does before it awaits the answer: a socket
            // new to this reactor is not yet known to be writable, and TLS
            // keeps its records until then.
            stream.write_all(b"ping").await.unwrap();
            stream.flush().await.unwrap();
            read_some(&mut stream, 4).await
        });
        assert_eq!(got.as_deref(), Some(&b"pong"[..]), "read within 5 s");
    }
}
