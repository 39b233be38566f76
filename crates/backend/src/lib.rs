//! Backends: where they are, their pools of idle keep-alive connections,
//! and one HTTP/1 exchange with them under Varnish's timeouts
//! (`connect_timeout`, `first_byte_timeout`, `between_bytes_timeout`,
//! `backend_idle_timeout`), including the one retry on a fresh connection
//! when a reused one turns out to have been closed. A backend that speaks
//! HTTP/2 ([`h2`]) carries each exchange on a stream of a shared
//! connection, seen by the exchange as a connection of its own.

#![forbid(unsafe_code)]

mod conn;
pub mod h2;
mod here;
mod limit;
mod pool;
pub mod probe;
mod stats;
pub mod tls;

pub use conn::{BodyReader, Conn, InterimSink, MAX_INTERIM};
pub use h2::StreamedBody;
pub use limit::{Refused, Slot, WaitPolicy};
pub use stats::BackendStats;

use lacquer_core::counters::{BackendCounter, Counter, COUNTERS};
use lacquer_http::{parse_response, ResponseHead, ResponseLimits};
use pool::{shared_pool, Pool};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

/// A connection to a backend, whatever carries it: TCP, a Unix socket,
/// TLS over TCP. The exchange reads and writes it as bytes.
pub trait BackendStream:
    tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + Sync + std::fmt::Debug
{
    /// The descriptor, for the log.
    fn fd(&self) -> i32;
    /// The local address of a TCP connection, for the log.
    fn local_addr(&self) -> Option<SocketAddr>;
    /// Whether a pooled connection is still quiet: readable means the
    /// backend closed it (or sent garbage), and it is useless.
    fn is_quiet(&self) -> bool;
    /// What the TLS handshake settled, on a TLS connection.
    fn tls(&self) -> Option<tls::TlsDetails> {
        None
    }
    /// A stream of a shared (HTTP/2) connection: never pooled as an idle
    /// connection, since the connection it is on is.
    fn multiplexed(&self) -> bool {
        false
    }
    /// Moves the connection's registration to the reactor of the runtime
    /// this runs on. A connection answers the reactor it was registered
    /// with, on the worker that made it: used from another worker, its
    /// wake-ups would cross threads, and would wait while that worker is
    /// held by a long piece of work.
    fn rebind(self: Box<Self>) -> std::io::Result<Stream>;
    /// Hands the rest of the request body to the connection to send on
    /// its own (from the client's HTTP/2 or HTTP/3 stream), so that the response
    /// can be read while the body still comes: gRPC's bidirectional
    /// streaming. Only an HTTP/2 stream whose request head is sent and
    /// whose body has begun can; any other gives the body back.
    fn duplex(
        &mut self,
        body: Box<dyn StreamedBody>,
        _idle: Duration,
    ) -> Result<(), Box<dyn StreamedBody>> {
        Err(body)
    }
}

impl BackendStream for TcpStream {
    fn fd(&self) -> i32 {
        std::os::fd::AsRawFd::as_raw_fd(self)
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        TcpStream::local_addr(self).ok()
    }

    fn is_quiet(&self) -> bool {
        let mut probe = [0u8; 1];
        matches!(self.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }

    fn rebind(self: Box<Self>) -> std::io::Result<Stream> {
        Ok(Box::new(TcpStream::from_std((*self).into_std()?)?))
    }
}

impl BackendStream for tokio::net::UnixStream {
    fn fd(&self) -> i32 {
        std::os::fd::AsRawFd::as_raw_fd(self)
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        None
    }

    fn is_quiet(&self) -> bool {
        let mut probe = [0u8; 1];
        matches!(self.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }

    fn rebind(self: Box<Self>) -> std::io::Result<Stream> {
        let std = (*self).into_std()?;
        Ok(Box::new(tokio::net::UnixStream::from_std(std)?))
    }
}

/// Where a backend is: an IP address and port, or a Unix socket's path
/// (`.path`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Address {
    Tcp(SocketAddr),
    Unix(String),
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Tcp(a) => write!(f, "{a}"),
            Address::Unix(p) => f.write_str(p),
        }
    }
}

impl Address {
    /// Opens a connection (without a timeout: the caller bounds it).
    pub async fn connect(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Address::Tcp(a) => {
                let s = TcpStream::connect(a).await?;
                let _ = s.set_nodelay(true);
                Box::new(s)
            }
            Address::Unix(path) => Box::new(tokio::net::UnixStream::connect(path).await?),
        })
    }

    /// The IP address and port as the log and `beresp.backend.ip` give
    /// them: 0.0.0.0 port 0 for a Unix socket.
    pub fn ip(&self) -> SocketAddr {
        match self {
            Address::Tcp(a) => *a,
            Address::Unix(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
        }
    }
}

/// A boxed backend connection's stream.
pub type Stream = Box<dyn BackendStream>;

/// The timeouts of one fetch.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    pub first_byte: Duration,
    pub between_bytes: Duration,
    pub idle: Duration,
    /// Waiting for a connection at `.max_connections`.
    pub wait: WaitPolicy,
    /// How long no connection is attempted after one failed for a local
    /// cause (`backend_local_error_holddown`) or because the backend is
    /// not there (`backend_remote_error_holddown`).
    pub holddown_local: Duration,
    pub holddown_remote: Duration,
    /// The client and server addresses the fetch is for (`client.ip`,
    /// `server.ip`): what a `.proxy_header` backend is told.
    pub proxy_for: Option<(SocketAddr, SocketAddr)>,
}

/// Why a fetch failed. The text is what goes into the `FetchError` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    ConnectFailed(String),
    ConnectTimeout,
    WriteFailed(String),
    FirstByteTimeout,
    BetweenBytesTimeout,
    ReadFailed(String),
    /// The connection closed before a complete response head.
    ClosedEarly,
    BadResponse(String),
    /// The body ended before its announced length, or was badly framed.
    BadBody(String),
    /// Storage could not make room.
    NoStorage,
    /// At `.max_connections`, with no room or time left to wait.
    Busy(Refused),
    /// No backend to ask: VCL chose none, or every one a director could
    /// pick is sick (varnishd's "No backend").
    NoBackend,
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::ConnectFailed(e) => f.write_str(e),
            FetchError::ConnectTimeout => f.write_str("backend connect timeout"),
            FetchError::WriteFailed(e) => write!(f, "backend write error: {e}"),
            FetchError::FirstByteTimeout => f.write_str("first byte timeout"),
            FetchError::BetweenBytesTimeout => f.write_str("between bytes timeout"),
            FetchError::ReadFailed(e) => write!(f, "backend read error: {e}"),
            FetchError::ClosedEarly => {
                f.write_str("backend closed the connection before a response")
            }
            FetchError::BadResponse(e) => write!(f, "http format error: {e}"),
            FetchError::BadBody(e) => write!(f, "body error: {e}"),
            FetchError::NoStorage => f.write_str("Could not get storage"),
            FetchError::NoBackend => f.write_str("No backend"),
            FetchError::Busy(Refused::Busy) => f.write_str("backend busy"),
            FetchError::Busy(Refused::WaitTimeout) => {
                f.write_str("backend busy: no connection within the wait timeout")
            }
        }
    }
}

/// One origin server.
#[derive(Debug)]
pub struct Backend {
    pub name: String,
    /// As configured (`host:port`, or the path), for display.
    pub endpoint: String,
    pub addr: Address,
    /// `.proxy_header`: the PROXY protocol version each new connection
    /// starts with (0: none). Such connections are never reused, since
    /// each speaks for one client.
    proxy_header: u8,
    /// `.preamble`: bytes each new connection starts with (after any
    /// PROXY header).
    preamble: Option<Vec<u8>>,
    /// `.ssl`: connections speak TLS once the PROXY header and preamble
    /// are sent.
    tls: Option<tls::BackendTls>,
    /// Sent as `Host` when the request has none.
    pub host_header: String,
    /// Whether its connections may speak HTTP/2 (`.h2c`, or by ALPN).
    h2: h2::H2Mode,
    /// Idle keep-alive connections and HTTP/2 ones, shared by every
    /// backend (of every loaded program) with the same address, preamble,
    /// TLS and HTTP/2 mode, as Varnish shares its connection pools: a new
    /// program reuses the connections the old one opened.
    pool: Arc<Pool>,
    /// Its `VBE.<vcl>.<name>.*` counters.
    pub stats: BackendStats,
    /// What `backend.set_health` said: an [`AdminHealth`] as a byte.
    admin: AtomicU8,
    /// When the health last changed, as the bits of an `f64` epoch time.
    changed: AtomicU64,
    /// Until when no new connection is attempted after a fundamental
    /// connection failure, as the bits of an `f64` epoch time (0: none).
    held_until: AtomicU64,
    /// The errno of the failure that started the hold.
    held_errno: std::sync::atomic::AtomicI32,
    /// `.max_connections` and the queue in front of it.
    slots: limit::Slots,
    /// Its health probe, if it has one (shared with every backend on the
    /// same address with the same probe).
    probe: Option<Arc<probe::Probe>>,
    /// Its program is warm: a probe that only cold programs' backends
    /// follow is not run.
    warm: AtomicBool,
}

/// How a backend's health is decided (`backend.set_health`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminHealth {
    /// By its probe; healthy when it has none.
    Auto = 0,
    Healthy = 1,
    Sick = 2,
}

impl AdminHealth {
    pub fn parse(word: &str) -> Option<AdminHealth> {
        match word {
            "auto" => Some(AdminHealth::Auto),
            "healthy" => Some(AdminHealth::Healthy),
            "sick" => Some(AdminHealth::Sick),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AdminHealth::Auto => "probe",
            AdminHealth::Healthy => "healthy",
            AdminHealth::Sick => "sick",
        }
    }
}

impl Backend {
    pub fn new(name: &str, endpoint: &str, addr: Address, host_header: &str) -> Backend {
        let pool = shared_pool(&addr, None, None, h2::H2Mode::Off);
        Backend {
            name: name.to_string(),
            endpoint: endpoint.to_string(),
            addr,
            proxy_header: 0,
            preamble: None,
            tls: None,
            host_header: host_header.to_string(),
            h2: h2::H2Mode::Off,
            pool,
            stats: BackendStats::default(),
            admin: AtomicU8::new(AdminHealth::Auto as u8),
            changed: AtomicU64::new(lacquer_core::time::now().to_bits()),
            held_until: AtomicU64::new(0),
            held_errno: std::sync::atomic::AtomicI32::new(0),
            slots: limit::Slots::new(None),
            probe: None,
            warm: AtomicBool::new(true),
        }
    }

    /// Whether its program is warm (`vcl.state`).
    pub fn is_warm(&self) -> bool {
        self.warm.load(Ordering::Relaxed)
    }

    pub fn set_warm(&self, warm: bool) {
        self.warm.store(warm, Ordering::Relaxed);
    }

    /// Makes each new connection start with these bytes (`.preamble`).
    pub fn with_preamble(mut self, preamble: Vec<u8>) -> Backend {
        // Connections that started with another preamble (or none) are
        // not this backend's to reuse.
        self.preamble = Some(preamble);
        self.repool()
    }

    /// Makes its connections speak TLS (`.ssl = 1`); they speak HTTP/2
    /// when the handshake settles on it.
    pub fn with_tls(mut self, tls: tls::BackendTls) -> Backend {
        if tls.offers_h2 {
            self.h2 = h2::H2Mode::Alpn;
        }
        self.tls = Some(tls);
        self.repool()
    }

    /// Makes its cleartext connections speak HTTP/2 from the start
    /// (`.h2c = 1`).
    pub fn with_h2c(mut self) -> Backend {
        self.h2 = h2::H2Mode::PriorKnowledge;
        self.repool()
    }

    /// How its connections may speak HTTP/2.
    pub fn h2_mode(&self) -> h2::H2Mode {
        self.h2
    }

    /// Joins the pool of the connections it may share.
    fn repool(mut self) -> Backend {
        let tls = self.tls.as_ref().map(|t| t.key.as_str());
        self.pool = shared_pool(&self.addr, self.preamble.as_deref(), tls, self.h2);
        self
    }

    /// Whether its connections speak TLS.
    pub fn tls(&self) -> Option<&tls::BackendTls> {
        self.tls.as_ref()
    }

    /// Makes each new connection start with a PROXY header of this
    /// version (1 or 2).
    pub fn with_proxy_header(mut self, version: u8) -> Backend {
        self.proxy_header = version;
        self
    }

    /// Gives it a health probe (from [`probe::Probes::get`]); the
    /// backend follows it once in an `Arc` ([`Backend::follow_probe`]).
    pub fn with_probe(mut self, probe: Arc<probe::Probe>) -> Backend {
        self.stats.set(BackendCounter::happy, probe.happy_bits());
        self.probe = Some(probe);
        self
    }

    /// Registers the backend with its probe, to hear its results.
    pub fn follow_probe(self: &Arc<Self>) {
        if let Some(p) = &self.probe {
            p.follow(self);
        }
    }

    pub fn probe(&self) -> Option<&Arc<probe::Probe>> {
        self.probe.as_ref()
    }

    /// Takes in a result of its probe: `VBE.*.happy` and the time of a
    /// health change.
    pub fn probed(&self, p: &probe::Probe, recorded: &probe::Recorded) {
        self.stats.set(BackendCounter::happy, p.happy_bits());
        if recorded.changed && self.admin_health() == AdminHealth::Auto {
            self.changed
                .store(lacquer_core::time::now().to_bits(), Ordering::Relaxed);
        }
    }

    /// Limits its connections in use to `max` (none when 0 or None); the
    /// backend's own wait timeout and queue length, when given, win over
    /// the parameters'.
    pub fn with_limits(
        mut self,
        max: Option<u64>,
        wait_timeout: Option<Duration>,
        wait_limit: Option<u64>,
    ) -> Backend {
        self.slots = limit::Slots::new(max);
        self.slots.wait_timeout = wait_timeout;
        self.slots.wait_limit = wait_limit;
        self
    }

    /// Fetches waiting for a connection now.
    pub fn waiting(&self) -> u64 {
        self.slots.waiting()
    }

    /// Connections that can still be opened at once, or None without a
    /// `.max_connections`.
    pub fn available(&self) -> Option<usize> {
        self.slots.available()
    }

    /// The health override in force.
    pub fn admin_health(&self) -> AdminHealth {
        match self.admin.load(Ordering::Relaxed) {
            1 => AdminHealth::Healthy,
            2 => AdminHealth::Sick,
            _ => AdminHealth::Auto,
        }
    }

    /// Overrides the health, or hands it back to the probe with `Auto`.
    pub fn set_admin_health(&self, health: AdminHealth) {
        let before = self.healthy();
        self.admin.store(health as u8, Ordering::Relaxed);
        if before != self.healthy() {
            self.changed
                .store(lacquer_core::time::now().to_bits(), Ordering::Relaxed);
        }
    }

    /// Whether requests may be sent to it: as `backend.set_health` says,
    /// or by its probe; without a probe it is healthy.
    pub fn healthy(&self) -> bool {
        match self.admin_health() {
            AdminHealth::Healthy => true,
            AdminHealth::Sick => false,
            AdminHealth::Auto => self.probe_healthy(),
        }
    }

    /// Whether connections are held down after a fundamental connection
    /// failure (`backend_*_error_holddown`): directors pass it over.
    pub fn held_down(&self) -> bool {
        let until = f64::from_bits(self.held_until.load(Ordering::Relaxed));
        until > 0.0 && lacquer_core::time::now() < until
    }

    /// What the probe alone says (healthy without one).
    pub fn probe_healthy(&self) -> bool {
        self.probe.as_ref().is_none_or(|p| p.healthy())
    }

    /// When the health last changed (epoch seconds).
    pub fn last_change(&self) -> f64 {
        f64::from_bits(self.changed.load(Ordering::Relaxed))
    }

    /// A connection: an idle pooled one if a live one is there, else new.
    /// At `.max_connections` it waits in line, as `t.wait` and the
    /// backend allow, or fails as busy.
    pub async fn connect(&self, t: &Timeouts, allow_reuse: bool) -> Result<Conn<'_>, FetchError> {
        let slot = self.slot(t.wait).await?;
        self.connect_in(slot, t, allow_reuse).await
    }

    /// Takes a connection slot, counting waits and refusals.
    async fn slot(&self, wait: WaitPolicy) -> Result<Slot<'_>, FetchError> {
        match self.slots.acquire(wait, Some(&self.stats)).await {
            Ok((slot, waited)) => {
                if waited == limit::Waited::Yes {
                    COUNTERS.inc(Counter::backend_wait);
                }
                Ok(slot)
            }
            Err(why) => {
                if why == Refused::WaitTimeout {
                    COUNTERS.inc(Counter::backend_wait);
                    COUNTERS.inc(Counter::backend_wait_fail);
                }
                COUNTERS.inc(Counter::backend_busy);
                self.stats.inc(BackendCounter::busy);
                Err(FetchError::Busy(why))
            }
        }
    }

    async fn connect_in<'a>(
        &'a self,
        slot: Slot<'a>,
        t: &Timeouts,
        allow_reuse: bool,
    ) -> Result<Conn<'a>, FetchError> {
        let shared = allow_reuse && self.proxy_header == 0;
        if shared {
            if let Some(stream) = self.take_idle(t.idle) {
                COUNTERS.inc(Counter::backend_reuse);
                return Ok(Conn::new(self, stream, true, slot));
            }
        }
        let mut _opening = None;
        if shared && self.h2 != h2::H2Mode::Off {
            if let Some(stream) = self.pool.h2.stream() {
                COUNTERS.inc(Counter::backend_reuse);
                return Ok(Conn::new(self, Box::new(stream), true, slot));
            }
            if self.h2 == h2::H2Mode::PriorKnowledge || self.pool.speaks_h2.load(Ordering::Relaxed)
            {
                // One fetch opens the connection this worker's others
                // then share.
                _opening = Some(self.pool.h2.opening().lock_owned().await);
                if let Some(stream) = self.pool.h2.stream() {
                    COUNTERS.inc(Counter::backend_reuse);
                    return Ok(Conn::new(self, Box::new(stream), true, slot));
                }
            }
        }
        if self.held_down() {
            // As varnishd: the failure that started the hold, again.
            self.stats.inc(BackendCounter::helddown);
            let errno = self.held_errno.load(Ordering::Relaxed);
            return Err(FetchError::ConnectFailed(self.failure(Some(errno))));
        }
        let mut stream = match tokio::time::timeout(t.connect, self.addr.connect()).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                self.connect_failed(e.raw_os_error(), t);
                return Err(FetchError::ConnectFailed(match e.raw_os_error() {
                    Some(errno) => self.failure(Some(errno)),
                    None => format!("backend {}: fail ({e})", self.name),
                }));
            }
            Err(_) => {
                self.connect_failed(Some(libc::ETIMEDOUT), t);
                return Err(FetchError::ConnectTimeout);
            }
        };
        COUNTERS.inc(Counter::backend_conn);
        if self.proxy_header != 0 {
            self.send_proxy_header(&mut stream, t).await?;
        }
        if let Some(preamble) = &self.preamble {
            use tokio::io::AsyncWriteExt;
            match tokio::time::timeout(t.between_bytes, stream.write_all(preamble)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(FetchError::WriteFailed(e.to_string())),
                Err(_) => return Err(FetchError::WriteFailed("timeout".into())),
            }
        }
        if let Some(tls) = &self.tls {
            // The handshake counts against the connect timeout.
            stream = tls.wrap(stream, t.connect).await.map_err(|e| {
                self.stats.inc(BackendCounter::fail);
                FetchError::ConnectFailed(format!("TLS: {e}"))
            })?;
        }
        if self.h2.speaks_h2(&stream) {
            let conn = h2::H2Conn::handshake(stream, t.connect)
                .await
                .map_err(|e| {
                    self.stats.inc(BackendCounter::fail);
                    FetchError::ConnectFailed(e.to_string())
                })?;
            self.pool.speaks_h2.store(true, Ordering::Relaxed);
            // A connection that speaks for one client (PROXY header)
            // carries no other client's fetches.
            if self.proxy_header == 0 {
                self.pool.h2.add(conn.clone());
            }
            stream = Box::new(conn.open());
        }
        Ok(Conn::new(self, stream, false, slot))
    }

    /// Starts a new connection with the PROXY header `.proxy_header`
    /// asks for: the client and server the fetch is for, or the
    /// connection's own addresses for a fetch that has none.
    async fn send_proxy_header(&self, stream: &mut Stream, t: &Timeouts) -> Result<(), FetchError> {
        use tokio::io::AsyncWriteExt;
        let unspecified = SocketAddr::from(([0, 0, 0, 0], 0));
        let (client, server) = t
            .proxy_for
            .unwrap_or_else(|| (stream.local_addr().unwrap_or(unspecified), self.addr.ip()));
        let header = match self.proxy_header {
            1 => lacquer_http::proxy::write_v1(client, server),
            _ => lacquer_http::proxy::write_v2(client, server, &[]),
        };
        match tokio::time::timeout(t.between_bytes, stream.write_all(&header)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(FetchError::WriteFailed(e.to_string())),
            Err(_) => Err(FetchError::WriteFailed("timeout".into())),
        }
    }

    /// Counts a connection that could not be opened, by its cause, and
    /// holds new ones down when the cause says retrying is useless.
    /// A failed connection as varnishd logs it (`FetchError`):
    /// `backend NAME: fail errno N (what it means)`.
    fn failure(&self, errno: Option<i32>) -> String {
        let errno = errno.unwrap_or(0);
        let text = std::io::Error::from_raw_os_error(errno).to_string();
        let text = text
            .strip_suffix(&format!(" (os error {errno})"))
            .unwrap_or(&text);
        format!("backend {}: fail errno {errno} ({text})", self.name)
    }

    fn connect_failed(&self, errno: Option<i32>, t: &Timeouts) {
        let hold = match errno {
            Some(libc::EACCES | libc::EPERM | libc::EADDRNOTAVAIL) => t.holddown_local,
            Some(libc::ECONNREFUSED | libc::ENETUNREACH) => t.holddown_remote,
            _ => Duration::ZERO,
        };
        if !hold.is_zero() {
            let until = lacquer_core::time::now() + hold.as_secs_f64();
            self.held_errno.store(errno.unwrap_or(0), Ordering::Relaxed);
            self.held_until.store(until.to_bits(), Ordering::Relaxed);
        }
        COUNTERS.inc(Counter::backend_fail);
        self.stats.inc(BackendCounter::fail);
        let cause = match errno {
            Some(libc::EACCES | libc::EPERM) => BackendCounter::fail_eacces,
            Some(libc::EADDRNOTAVAIL) => BackendCounter::fail_eaddrnotavail,
            Some(libc::ECONNREFUSED) => BackendCounter::fail_econnrefused,
            Some(libc::ENETUNREACH) => BackendCounter::fail_enetunreach,
            Some(libc::ETIMEDOUT) => BackendCounter::fail_etimedout,
            _ => BackendCounter::fail_other,
        };
        self.stats.inc(cause);
    }

    /// Counts a fetch not attempted because the backend is sick.
    pub fn count_unhealthy(&self) {
        COUNTERS.inc(Counter::backend_unhealthy);
        self.stats.inc(BackendCounter::unhealthy);
    }

    /// How many HTTP/2 connections it has open (shared with backends on
    /// the same address).
    pub fn h2_connections(&self) -> usize {
        self.pool.h2.len()
    }

    /// Sends a request whose body (if any) is in memory and reads the
    /// response head. A reused connection that fails before any response
    /// byte is retried once on a fresh one when `ask.extra_chance` allows
    /// it.
    pub async fn exchange(
        &self,
        head: &[u8],
        body: &[u8],
        t: &Timeouts,
        limits: &ResponseLimits,
        ask: Ask<'_>,
    ) -> Result<(Conn<'_>, ResponseHead), FetchError> {
        let Ask {
            is_head,
            extra_chance,
            interim,
        } = ask;
        let mut allow_reuse = true;
        let mut slot = Some(self.slot(t.wait).await?);
        loop {
            let Some(held) = slot.take() else {
                return Err(FetchError::ClosedEarly);
            };
            let mut conn = self.connect_in(held, t, allow_reuse).await?;
            let sent = conn.write_request(head, body, t).await;
            let result = match sent {
                Ok(()) => conn.read_head(t, limits, is_head, interim).await,
                Err(e) => Err(e),
            };
            match result {
                Ok(resp) => return Ok((conn, resp)),
                Err(e) => {
                    let retryable = conn.reused()
                        && !conn.saw_bytes()
                        && matches!(
                            e,
                            FetchError::ClosedEarly
                                | FetchError::WriteFailed(_)
                                | FetchError::ReadFailed(_)
                        );
                    // The retry keeps the slot rather than queue again.
                    slot = Some(conn.give_up());
                    if retryable && allow_reuse && extra_chance {
                        COUNTERS.inc(Counter::backend_retry);
                        allow_reuse = false;
                        continue;
                    }
                    return Err(e);
                }
            }
        }
    }
}

/// How one request is asked of a backend ([`Backend::exchange`]).
#[derive(Clone, Copy, Default)]
pub struct Ask<'s> {
    /// A HEAD: the response has no body whatever it says.
    pub is_head: bool,
    /// A reused connection that fails before any response byte may be
    /// retried once on a fresh one (`bereq.retry_connect`).
    pub extra_chance: bool,
    /// Where interim responses go as they arrive (else they are kept on
    /// the connection).
    pub interim: Option<&'s InterimSink>,
}

/// Parses a response head out of a connection buffer.
pub(crate) fn try_parse(
    buf: &mut bytes::BytesMut,
    limits: &ResponseLimits,
    is_head: bool,
) -> Result<Option<ResponseHead>, FetchError> {
    parse_response(buf, limits, is_head).map_err(|e| FetchError::BadResponse(e.to_string()))
}
