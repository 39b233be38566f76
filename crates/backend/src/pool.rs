//! The connections a backend's fetches share: idle HTTP/1 connections
//! kept for the next fetch to the same address, and HTTP/2 connections
//! with room for another stream. Any worker's fetch may take any idle
//! connection, as varnishd's threads share one pool per backend; one
//! taken on another worker than the last is moved to this worker's
//! reactor first ([`crate::BackendStream::rebind`]), so that it answers the
//! worker using it, and not one that may be busy or held.

use crate::here::this_thread;
use crate::{h2, Address, Backend, Stream};
use lacquer_core::counters::{Counter, COUNTERS};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The connections of an address (and preamble, TLS and HTTP/2 mode)
/// that fetches may take: idle HTTP/1 ones, and HTTP/2 ones with room
/// for another stream.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    /// Idle HTTP/1 connections: since when, and the thread whose reactor
    /// each is registered with ([`this_thread`]).
    pub(crate) idle: Mutex<Vec<(Stream, Instant, usize)>>,
    pub(crate) h2: h2::H2Conns,
    /// A connection has settled on HTTP/2 here.
    pub(crate) speaks_h2: AtomicBool,
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

/// How far back from the newest idle connection a fetch looks for one
/// its own worker left, under the pool's lock.
const OWN_WITHIN: usize = 32;

impl Backend {
    /// An idle connection younger than `max_idle` and still quiet: the
    /// last one this thread left (among the newest few), else the last
    /// one any left, moved to this thread's reactor.
    pub(crate) fn take_idle(&self, max_idle: Duration) -> Option<Stream> {
        let here = this_thread();
        loop {
            let (stream, since, home) = {
                let mut idle = self.pool.idle.lock().unwrap_or_else(|e| e.into_inner());
                let last = idle.len().checked_sub(1)?;
                let pick = idle
                    .iter()
                    .rev()
                    .take(OWN_WITHIN)
                    .position(|e| e.2 == here)
                    .map_or(last, |back| last - back);
                idle.remove(pick)
            };
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
        let mut idle = self.pool.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.push((stream, Instant::now(), this_thread()));
    }

    /// Closes pooled connections idle longer than `max_idle`, and
    /// HTTP/2 ones without a stream as long.
    pub fn reap(&self, max_idle: Duration) {
        let mut idle = self.pool.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.retain(|(_, since, _)| since.elapsed() < max_idle);
        drop(idle);
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
