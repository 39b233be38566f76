//! HTTP/3 sessions (RFC 9114) on a TLS listener's QUIC endpoint: the
//! endpoint's settings from the `h3_*` parameters (streams, idle
//! timeout, flow-control windows, header section size), a Retry for a
//! client whose address is not yet validated while handshakes pile up
//! (`h3_retry_above`),
//! then each request stream run through the same client steps as HTTP/1
//! and HTTP/2 (its head given HTTP/1.1's shape to be parsed with the same
//! limits, `req.proto` "HTTP/3.0"). A request that arrived in 0-RTT
//! early data is answered at once only when it is safe (GET, HEAD,
//! OPTIONS without a body): another waits for the handshake to complete,
//! since early data can be replayed. QUIC is `quinn`'s, HTTP/3's framing
//! and QPACK (with no dynamic table) the `h3` crate's.

use crate::client::request;
use crate::session::h2::{host_differs_from_authority, http1_head};
use crate::transport::h3::checked::Checked;
use crate::transport::h3::{H3Stream, Stream};
use crate::transport::io::{Client, SessAddrs};
use crate::Shared;
use bytes::Bytes;
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::ids::next_vxid;
use lacquer_core::params::Params;
use lacquer_shm::record::txn;
use lacquer_shm::Side;
use std::sync::Arc;
use std::time::Duration;

/// The endpoint for `socket`, with the TLS side `tls` and the transport
/// the parameters ask for.
pub(crate) fn endpoint(
    socket: std::net::UdpSocket,
    tls: Arc<tokio_rustls::rustls::ServerConfig>,
    p: &Params,
) -> Result<quinn::Endpoint, String> {
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
    // Never more than three times what an unvalidated address sent
    // (RFC 9000 §8.1) is quinn's own rule; a Retry is asked for below.
    quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(config),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .map_err(|e| format!("QUIC: {e}"))
}

/// Takes the endpoint's connections for as long as the listener accepts.
pub(crate) async fn serve_endpoint(
    sh: Arc<Shared>,
    endpoint: quinn::Endpoint,
    name: Arc<str>,
    listen_endpoint: Arc<str>,
) {
    let local = endpoint.local_addr().ok();
    while let Some(incoming) = endpoint.accept().await {
        let retry_above = sh.params.h3_retry_above();
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
        tokio::spawn(connection(sh.clone(), incoming, addrs));
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
    let built = h3::server::builder()
        .max_field_section_size(header_list)
        .build::<_, Bytes>(Checked::new(
            conn.clone(),
            // (A HEADERS frame's QPACK is seldom longer than what it
            // decodes to, which h3 holds to the header list's limit.)
            usize::try_from(header_list.saturating_mul(2)).unwrap_or(usize::MAX),
        ))
        .await;
    let reason = match built {
        Err(_) => CloseReason::RxJunk,
        Ok(mut h3conn) => loop {
            match h3conn.accept().await {
                Ok(Some(resolver)) => {
                    let task = StreamTask {
                        sh: sh.clone(),
                        addrs: addrs.clone(),
                        sess_vxid,
                        early: (!done.load(std::sync::atomic::Ordering::Acquire))
                            .then(|| (confirmed.clone(), done.clone())),
                    };
                    // A stream opened must bring its HEADERS within
                    // timeout_idle, as a connection its first request:
                    // else a client could hold a task per stream for as
                    // long as it keeps its connection alive.
                    let wait = Params::duration(sh.params.timeout_idle());
                    tokio::spawn(async move {
                        match tokio::time::timeout(wait, resolver.resolve_request()).await {
                            Ok(Ok((req, stream))) => task.answer(req, stream).await,
                            Ok(Err(_)) => COUNTERS.inc(Counter::client_req_400),
                            Err(_) => {}
                        }
                    });
                }
                Ok(None) => break CloseReason::RemClose,
                Err(e) if e.is_h3_no_error() => break CloseReason::RemClose,
                Err(_) => break CloseReason::RxJunk,
            }
        },
    };
    reason.count();
    COUNTERS.add(Counter::h3_lost_packets, conn.stats().path.lost_packets);
    crate::session::log_close(&mut log, reason, t_open);
}

/// What the TLS handshake of a QUIC connection settled, as VCL's vmod
/// tls and `tls.*` read it.
fn session_of(conn: &quinn::Connection) -> lacquer_vcl::TlsSession {
    let data = conn
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok());
    lacquer_vcl::TlsSession {
        version: "TLSv1.3",
        cipher: String::new(),
        client_cert: false,
        client_cert_cn: None,
        sni: data.as_ref().and_then(|d| d.server_name.clone()),
        alpn: data
            .as_ref()
            .and_then(|d| d.protocol.as_ref())
            .map(|a| String::from_utf8_lossy(a).into_owned()),
    }
}

/// What a request stream's task needs of its connection.
struct StreamTask {
    sh: Arc<Shared>,
    addrs: Arc<SessAddrs>,
    sess_vxid: u64,
    /// While the handshake is not yet confirmed (the request may have
    /// come in 0-RTT early data): what says when it is, and whether it
    /// was.
    early: Option<(Arc<tokio::sync::Notify>, Arc<std::sync::atomic::AtomicBool>)>,
}

impl StreamTask {
    async fn answer(self, req: http::Request<()>, mut stream: Stream) {
        COUNTERS.inc(Counter::h3_streams);
        let (parts, ()) = req.into_parts();
        if host_differs_from_authority(&parts) || malformed(&parts) {
            // RFC 9114 §4.1.2: malformed, and answered 400; read as
            // HTTP/1 framing, a connection-specific field could make the
            // body another thing than its DATA frames.
            COUNTERS.inc(Counter::client_req_400);
            let refusal = http::Response::builder()
                .status(400)
                .body(())
                .expect("a status alone makes a response");
            let _ = stream.send_response(refusal).await;
            let _ = stream.finish().await;
            return;
        }
        if let Some((confirmed, done)) = &self.early {
            COUNTERS.inc(Counter::h3_early);
            if !safe(&parts) {
                COUNTERS.inc(Counter::h3_early_held);
                // Replayable: processed only once the handshake proves
                // the client is there (RFC 8470 §3).
                let wait = confirmed.notified();
                if !done.load(std::sync::atomic::Ordering::Acquire) {
                    let limit = Duration::from_secs_f64(self.sh.params.h3_idle_timeout());
                    let _ = tokio::time::timeout(limit, wait).await;
                }
                if !done.load(std::sync::atomic::Ordering::Acquire) {
                    let too_early = http::Response::builder()
                        .status(425)
                        .body(())
                        .expect("a status alone makes a response");
                    let _ = stream.send_response(too_early).await;
                    let _ = stream.finish().await;
                    return;
                }
            }
        }
        let chunk_body = !parts.headers.contains_key(http::header::CONTENT_LENGTH)
            && !matches!(parts.method, http::Method::GET | http::Method::HEAD);
        let mut raw = http1_head(&parts, chunk_body);
        let parsed = lacquer_http::parse_request(&mut raw, &self.sh.request_limits());
        let Ok(Some(mut head)) = parsed else {
            COUNTERS.inc(Counter::client_req_400);
            stream.stop_stream(h3::error::Code::H3_MESSAGE_ERROR);
            return;
        };
        head.version = lacquer_http::Version::Http3;
        let sh = self.sh.clone();
        let place = match sh.admission.try_admit(&sh.params) {
            Some(place) => Some(place),
            None => Box::pin(sh.admission.admit(&sh.params, false)).await,
        };
        let Some(_place) = place else {
            stream.stop_stream(h3::error::Code::H3_REQUEST_REJECTED);
            return;
        };
        let is_head = parts.method == http::Method::HEAD;
        let declared = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
        let wire = H3Stream::new(stream, chunk_body, is_head, declared);
        let mut c = Client::for_h3_stream(wire, self.addrs.clone());
        let mut link = sh.txn(self.sess_vxid, Side::Client);
        let conn = crate::host::req::ConnInfo::of(&c);
        let _ = boxed_in_place!(request::handle(
            &mut c,
            &sh,
            &sh.active.get(),
            &conn,
            head,
            &mut link
        ))
        .await;
        if let Some(h3) = c.h3() {
            if !h3.ended() {
                COUNTERS.inc(Counter::h3_reset);
                h3.abandon();
            }
        }
    }
}

/// Whether a request is malformed for HTTP/3 (RFC 9114 §4.2): it carries
/// a field that speaks of an HTTP/1 connection (`TE` other than
/// `trailers` included).
fn malformed(parts: &http::request::Parts) -> bool {
    let h = &parts.headers;
    [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
    ]
    .iter()
    .any(|name| h.contains_key(*name))
        || h.get_all(http::header::TE).iter().any(|v| v != "trailers")
}

/// Whether a request may be answered from early data: a safe method
/// (RFC 9110 §9.2.1) with no body announced.
fn safe(parts: &http::request::Parts) -> bool {
    matches!(
        parts.method,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    ) && !parts.headers.contains_key(http::header::CONTENT_LENGTH)
        && !parts.headers.contains_key(http::header::TRANSFER_ENCODING)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_specific_fields_make_a_request_malformed() {
        let with = |name: &str, value: &str| {
            http::Request::builder()
                .uri("https://a/x")
                .header(name, value)
                .body(())
                .unwrap()
                .into_parts()
                .0
        };
        for (n, v) in [
            ("connection", "close"),
            ("keep-alive", "5"),
            ("proxy-connection", "x"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("te", "gzip"),
        ] {
            assert!(malformed(&with(n, v)), "{n}");
        }
        assert!(!malformed(&with("te", "trailers")));
        assert!(!malformed(&with("accept", "*/*")));
    }

    #[test]
    fn only_safe_bodiless_requests_go_on_early_data() {
        let parts = |method: &str, field: Option<(&str, &str)>| {
            let mut b = http::Request::builder().method(method).uri("https://a/x");
            if let Some((n, v)) = field {
                b = b.header(n, v);
            }
            b.body(()).unwrap().into_parts().0
        };
        assert!(safe(&parts("GET", None)));
        assert!(safe(&parts("HEAD", None)));
        assert!(!safe(&parts("POST", None)));
        assert!(!safe(&parts("PUT", None)));
        assert!(!safe(&parts("GET", Some(("content-length", "5")))));
    }
}
