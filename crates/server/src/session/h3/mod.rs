//! HTTP/3 sessions (RFC 9114) on a TLS listener's QUIC endpoint: the
//! endpoint's settings from the `h3_*` parameters (streams, idle
//! timeout, flow-control windows, header section size), a Retry for a
//! client whose address is not yet validated while handshakes pile up
//! (`h3_retry_above`), then the connection's unidirectional streams
//! (`control`) and each request stream (`stream`) run through the same
//! client steps as HTTP/1 and HTTP/2. QUIC is `quinn`'s; HTTP/3's framing
//! and QPACK are this server's own (`transport::h3`): a QPACK with no
//! dynamic table reads a request straight into HTTP/1.1's shape, checked
//! as it is read, and writes a response without Huffman coding, where a
//! general HTTP/3 library would build maps of both and Huffman-code
//! every value of every response (a fifth of an HTTP/3 hit's cost).

mod control;
pub(crate) mod steer;
mod stream;

use crate::transport::io::SessAddrs;
use crate::Shared;
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::ids::next_vxid;
use lacquer_core::params::Params;
use lacquer_shm::record::txn;
use lacquer_shm::Side;
use std::sync::Arc;
use std::time::Duration;

/// A QUIC server's settings: the TLS side `tls`, and the transport the
/// parameters ask for.
pub(crate) fn server_config(
    tls: Arc<tokio_rustls::rustls::ServerConfig>,
    p: &Params,
) -> Result<quinn::ServerConfig, String> {
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|e| format!("QUIC: the TLS settings do not suit it ({e})"))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    let window = p.h3_stream_window().min(u64::from(u32::MAX));
    let streams = p.h3_max_concurrent_streams().min(u64::from(u32::MAX)) as u32;
    let idle = Duration::from_secs_f64(p.h3_idle_timeout());
    transport
        .max_concurrent_bidi_streams(streams.into())
        // Control, QPACK encoder and decoder streams, and room for a
        // few more the client may open and the server ignores.
        .max_concurrent_uni_streams(8u32.into())
        .stream_receive_window((window as u32).into())
        .receive_window(
            window
                .saturating_mul(10)
                .min(u64::from(u32::MAX))
                .try_into()
                .unwrap_or(quinn::VarInt::MAX),
        )
        .max_idle_timeout(idle.try_into().ok());
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// The endpoint for `socket`, on the runtime of the caller's context
/// (made once for each socket of a listener: it keeps its connections
/// while the listener stops and starts accepting; see [`keep`]).
/// `worker` is the index its connection IDs name where the listener's
/// sockets are steered (`steer`).
pub(crate) fn endpoint(
    socket: std::net::UdpSocket,
    config: quinn::ServerConfig,
    worker: Option<u8>,
) -> Result<quinn::Endpoint, String> {
    let mut endpoint_config = quinn::EndpointConfig::default();
    if let Some(worker) = worker {
        endpoint_config.cid_generator(move || Box::new(steer::WorkerCids::new(worker)));
    }
    // Never more than three times what an unvalidated address sent
    // (RFC 9000 §8.1) is quinn's own rule; a Retry is asked for below.
    quinn::Endpoint::new(
        endpoint_config,
        Some(config),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .map_err(|e| format!("QUIC: {e}"))
}

/// Keeps `endpoints`, a listener's, for [`close_all`] (the listener
/// keeps them too, once all of them were made).
pub(crate) fn keep(endpoints: &[quinn::Endpoint]) {
    ENDPOINTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend_from_slice(endpoints);
}

/// Every QUIC endpoint in service, for [`close_all`].
static ENDPOINTS: std::sync::Mutex<Vec<quinn::Endpoint>> = std::sync::Mutex::new(Vec::new());

/// Closes every QUIC connection (H3_NO_ERROR) as the process ends, and
/// waits at most `grace` for the CONNECTION_CLOSE frames to go: a QUIC
/// client has no kernel to tell it that the process is gone, as a TCP
/// client has, and would wait out its idle timeout.
pub(crate) async fn close_all(grace: Duration) {
    let endpoints = ENDPOINTS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let code = crate::transport::h3::varint_code(crate::transport::h3::frames::code::NO_ERROR);
    for endpoint in &endpoints {
        endpoint.close(code, b"stopping");
    }
    let idle = async {
        for endpoint in &endpoints {
            endpoint.wait_idle().await;
        }
    };
    let _ = tokio::time::timeout(grace, idle).await;
}

/// Takes the endpoint's connections for as long as the listener accepts.
/// One of a listener's `endpoints` (one a worker, `steer`), it serves
/// them on its own worker, with its share of `h3_max_connections` and
/// `h3_retry_above`. A listener's only endpoint, with `spread` naming the
/// workers, hands each connection to the next of them in turn (its QUIC
/// driver, which quinn spawns where the handshake is accepted, and its
/// streams with it; the endpoint's own driver, which reads the socket
/// and hands each datagram to its connection, stays on its worker).
pub(crate) async fn serve_endpoint(
    sh: Arc<Shared>,
    endpoint: quinn::Endpoint,
    endpoints: usize,
    name: Arc<str>,
    listen_endpoint: Arc<str>,
    spread: Vec<tokio::runtime::Handle>,
) {
    /// Stops the endpoint taking new connections when accepting stops
    /// (the task aborted): those it has go on, and a client that comes
    /// now goes unanswered until it starts again (quinn answers its
    /// Initial with a stateless reset, which a client in its handshake
    /// ignores).
    struct Stopping(quinn::Endpoint);
    impl Drop for Stopping {
        fn drop(&mut self) {
            self.0.set_server_config(None);
        }
    }
    let _stopping = Stopping(endpoint.clone());
    let local = endpoint.local_addr().ok();
    let mut next = 0usize;
    // A listener's limits, shared evenly by its endpoints (the kernel
    // spreads new clients evenly over them); 0 stays 0.
    let share = |limit: u64| limit.div_ceil(endpoints.max(1) as u64);
    while let Some(incoming) = endpoint.accept().await {
        if endpoint.open_connections() as u64 >= share(sh.params.h3_max_connections()) {
            COUNTERS.inc(Counter::h3_refused);
            incoming.refuse();
            continue;
        }
        let retry_above = share(sh.params.h3_retry_above());
        if !incoming.remote_address_validated()
            && (retry_above == 0 || endpoint.open_connections() as u64 > retry_above)
        {
            COUNTERS.inc(Counter::h3_retry);
            let _ = incoming.retry();
            continue;
        }
        let Some(local) = local else {
            incoming.ignore();
            continue;
        };
        let addrs = SessAddrs::new(
            incoming.remote_address(),
            incoming
                .local_ip()
                .map_or(local, |ip| (ip, local.port()).into()),
            name.clone(),
            listen_endpoint.clone(),
        );
        let task = connection(sh.clone(), incoming, addrs);
        match spread.get(next % spread.len().max(1)) {
            Some(worker) => drop(worker.spawn(task)),
            None => drop(tokio::spawn(task)),
        }
        next = next.wrapping_add(1);
    }
}

/// One QUIC connection: its handshake (0-RTT where the client resumes),
/// then its request streams, each on a task of its own.
async fn connection(sh: Arc<Shared>, incoming: quinn::Incoming, mut addrs: SessAddrs) {
    let t_open = lacquer_core::time::now();
    let Ok(connecting) = incoming.accept() else {
        COUNTERS.inc(Counter::sess_h3_fail);
        return;
    };
    let (conn, early) = match connecting.into_0rtt() {
        Ok((conn, accepted)) => (conn, Some(accepted)),
        Err(connecting) => {
            let limit = Duration::from_secs_f64(sh.params.h3_idle_timeout());
            match tokio::time::timeout(limit, connecting).await {
                Ok(Ok(conn)) => (conn, None),
                _ => {
                    COUNTERS.inc(Counter::sess_h3_fail);
                    return;
                }
            }
        }
    };
    COUNTERS.inc(Counter::sess_conn);
    COUNTERS.inc(Counter::s_sess);
    COUNTERS.inc(Counter::sess_h3);
    addrs.tls = Some(session_of(&conn));
    let addrs = Arc::new(addrs);
    let mut log = sh.txn(next_vxid(), Side::Client);
    log.begin(&txn::SESS, 0, &txn::HTTP1, t_open);
    crate::session::log_open(&mut log, &addrs, t_open, None);
    let sess_vxid = log.vxid();
    // Early data is believed for safe requests only, until the handshake
    // is done: a shared flag the streams read.
    let confirmed = Arc::new(tokio::sync::Notify::new());
    let done = Arc::new(std::sync::atomic::AtomicBool::new(early.is_none()));
    if let Some(accepted) = early {
        let (confirmed, done) = (confirmed.clone(), done.clone());
        tokio::spawn(async move {
            // On a server it resolves once the handshake is complete (its
            // value says nothing there).
            let _ = accepted.await;
            done.store(true, std::sync::atomic::Ordering::Release);
            confirmed.notify_waiters();
        });
    }
    let header_list = sh
        .params
        .h3_max_header_list_size()
        .min(sh.params.http_req_size());
    // The server's control stream, opened beside the requests (a client
    // that gives no unidirectional stream credit gets no SETTINGS, but
    // holds nothing up), and kept open as long as the connection.
    let control = tokio::spawn({
        let conn = conn.clone();
        async move {
            if let Ok(stream) = control::open(&conn, header_list).await {
                conn.closed().await;
                drop(stream);
            }
        }
    });
    let unidirectional = tokio::spawn(control::accept(conn.clone()));
    let conn_ctx = Arc::new(stream::ConnCtx {
        sh: sh.clone(),
        conn: conn.clone(),
        addrs: addrs.clone(),
        sess_vxid,
        confirmed,
        done,
        header_list,
        resets: stream::RapidResets::new(),
        settled: std::sync::OnceLock::new(),
    });
    let no_error = crate::transport::h3::varint_code(crate::transport::h3::frames::code::NO_ERROR);
    let reason = loop {
        match conn.accept_bi().await {
            Ok((send, recv)) => {
                tokio::spawn(stream::serve(conn_ctx.clone(), send, recv));
            }
            Err(quinn::ConnectionError::ApplicationClosed(c)) if c.error_code == no_error => {
                break CloseReason::RemClose
            }
            Err(quinn::ConnectionError::TimedOut) => break CloseReason::RxTimeout,
            Err(
                quinn::ConnectionError::LocallyClosed
                | quinn::ConnectionError::Reset
                | quinn::ConnectionError::ApplicationClosed(_),
            ) => break CloseReason::RemClose,
            Err(_) => break CloseReason::RxJunk,
        }
    };
    unidirectional.abort();
    control.abort();
    let reason = if conn_ctx
        .resets
        .closed
        .load(std::sync::atomic::Ordering::Acquire)
    {
        CloseReason::RapidReset
    } else {
        reason
    };
    reason.count();
    COUNTERS.add(Counter::h3_lost_packets, conn.stats().path.lost_packets);
    crate::session::log_close(&mut log, reason, t_open);
}

/// What the TLS handshake of a QUIC connection settled, as VCL's vmod
/// tls and `tls.*` read it (all but the cipher suite, which quinn does
/// not say).
pub(super) fn session_of(conn: &quinn::Connection) -> lacquer_vcl::TlsSession {
    let data = conn
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok());
    // The client's certificate chain, where the listener asks for one
    // (`client-verify`), as over TCP.
    let chain = conn.peer_identity().and_then(|p| {
        p.downcast::<Vec<tokio_rustls::rustls::pki_types::CertificateDer<'static>>>()
            .ok()
    });
    let client = chain.as_ref().and_then(|c| c.first());
    lacquer_vcl::TlsSession {
        version: "TLSv1.3",
        cipher: String::new(),
        client_cert: client.is_some(),
        client_cert_cn: client.and_then(|c| lacquer_tls::names::common_name(c)),
        sni: data.as_ref().and_then(|d| d.server_name.clone()),
        alpn: data
            .as_ref()
            .and_then(|d| d.protocol.as_ref())
            .map(|a| String::from_utf8_lossy(a).into_owned()),
    }
}
