//! HTTP/3 on a TLS listener whose `-A` settings say `quic = on`: a quinn
//! and h3 client asks over QUIC on the listener's own port (UDP), gets
//! cached objects and passes as over HTTP/1.1 and HTTP/2 (`req.proto`
//! "HTTP/3.0"), sends request bodies, and the listener's HTTP/1.1
//! responses over TCP say where HTTP/3 is (`Alt-Svc`).

use crate::harness::eventually;
use crate::origin::{Origin, Reply};
use crate::tls::{connect, get, setup_args, setup_origin, setup_with, Pki};
use bytes::{Buf, Bytes};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A response over HTTP/3: status, fields and body.
pub(crate) struct H3Response {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

/// An HTTP/3 client on one QUIC connection to `addr`, naming `sni`.
pub(crate) struct H3Client {
    pub rt: tokio::runtime::Runtime,
    pub send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    pub conn: quinn::Connection,
    endpoint: quinn::Endpoint,
}

/// A client's QUIC settings: the test CA, ALPN h3, and 0-RTT early data
/// on connections that resume (its session store is kept with it).
pub(crate) fn quic_client(pki: &Pki) -> quinn::ClientConfig {
    let mut tls = (*pki.client()).clone();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.enable_early_data = true;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    quinn::ClientConfig::new(Arc::new(crypto))
}

/// A runtime for a test's own QUIC client.
pub(crate) fn client_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A bare QUIC connection to `addr` (no HTTP/3 client on it), for tests
/// that write its streams byte by byte.
pub(crate) fn raw_connection(
    rt: &tokio::runtime::Runtime,
    pki: &Pki,
    addr: SocketAddr,
) -> (quinn::Endpoint, quinn::Connection) {
    rt.block_on(async {
        let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        endpoint.set_default_client_config(quic_client(pki));
        let conn = endpoint.connect(addr, "a.example").unwrap().await.unwrap();
        (endpoint, conn)
    })
}

impl H3Client {
    pub fn connect(pki: &Pki, addr: SocketAddr, sni: &str) -> H3Client {
        H3Client::connect_with(quic_client(pki), addr, sni, false).0
    }

    /// A client on `config`; with `early`, the connection sends its
    /// requests in 0-RTT early data where it can (true when it did).
    fn connect_with(
        config: quinn::ClientConfig,
        addr: SocketAddr,
        sni: &str,
        early: bool,
    ) -> (H3Client, bool) {
        let rt = client_runtime();
        let (endpoint, send, zero_rtt, conn) = rt.block_on(async {
            let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
            endpoint.set_default_client_config(config);
            let connecting = endpoint.connect(addr, sni).unwrap();
            let (conn, zero_rtt) = match connecting.into_0rtt() {
                Ok((conn, _)) if early => (conn, true),
                Ok((conn, _)) => (conn, false),
                Err(connecting) => (connecting.await.unwrap(), false),
            };
            let quic = conn.clone();
            let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn))
                .await
                .unwrap();
            tokio::spawn(async move {
                let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
            });
            (endpoint, send, zero_rtt, quic)
        });
        let client = H3Client {
            rt,
            send,
            conn,
            endpoint,
        };
        (client, zero_rtt)
    }

    pub fn request(&mut self, method: &str, url: &str, body: &[u8]) -> H3Response {
        self.try_request(method, url, &[], body).unwrap()
    }

    /// A request with `fields`; Err where the stream or the connection
    /// failed.
    pub fn try_request(
        &mut self,
        method: &str,
        url: &str,
        fields: &[(&str, &str)],
        body: &[u8],
    ) -> Result<H3Response, String> {
        let mut req = http::Request::builder()
            .method(method)
            .uri(format!("https://a.example{url}"));
        for (n, v) in fields {
            req = req.header(*n, *v);
        }
        let req = req.body(()).unwrap();
        let send = &mut self.send;
        let fail = |e: &dyn std::fmt::Display| e.to_string();
        self.rt.block_on(async {
            let mut stream = send.send_request(req).await.map_err(|e| fail(&e))?;
            if !body.is_empty() {
                // The server may refuse before the body goes.
                let _ = stream.send_data(Bytes::copy_from_slice(body)).await;
            }
            let _ = stream.finish().await;
            let resp = stream.recv_response().await.map_err(|e| fail(&e))?;
            let mut got = Vec::new();
            while let Some(mut chunk) = stream.recv_data().await.map_err(|e| fail(&e))? {
                while chunk.has_remaining() {
                    let piece = chunk.chunk();
                    got.extend_from_slice(piece);
                    let n = piece.len();
                    chunk.advance(n);
                }
            }
            Ok(H3Response {
                status: resp.status().as_u16(),
                headers: resp.headers().clone(),
                body: got,
            })
        })
    }
}

#[test]
fn http3_serves_hits_passes_and_bodies_and_http1_says_where_it_is() {
    let vcl = "sub vcl_recv { if (req.url ~ \"^/pass\") { return (pass); } }\n\
               sub vcl_deliver {\n\
                 set resp.http.x-proto = req.proto;\n\
                 if (req.url == \"/no-alt\") { unset resp.http.alt-svc; }\n\
                 if (req.url == \"/alt\") { set resp.http.alt-svc = {\"h3=\":443\"; ma=60\"}; }\n\
               }\n";
    let (pki, origin, lq) = setup_with("h3", "quic = on\n", Some(vcl));
    let addr = lq.listen("tls0");
    // Over TCP, the listener says where HTTP/3 is.
    let mut tls = connect(&pki, addr, "a.example").unwrap();
    let (head, body) = get(&mut tls, "/x");
    assert_eq!(body, "page /x");
    assert!(
        head.contains(&format!("Alt-Svc: h3=\":{}\"; ma=86400\r\n", addr.port())),
        "{head}"
    );
    assert!(head.contains("x-proto: HTTP/1.1"), "{head}");
    // VCL sees the field in vcl_deliver: it may remove or change it.
    let (head, _) = get(&mut tls, "/no-alt");
    assert!(!head.to_ascii_lowercase().contains("alt-svc"), "{head}");
    let (head, _) = get(&mut tls, "/alt");
    assert!(head.contains("Alt-Svc: h3=\":443\"; ma=60\r\n"), "{head}");
    // Over QUIC (Host a.example, another object than HTTP/1.1's Host
    // example): a miss, then a hit.
    let mut h3 = H3Client::connect(&pki, addr, "a.example");
    let xids = |r: &H3Response| r.headers["x-varnish"].to_str().unwrap().split(' ').count();
    let r = h3.request("GET", "/x", b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"page /x");
    assert_eq!(r.headers["x-proto"], "HTTP/3.0");
    assert!(!r.headers.contains_key("alt-svc"));
    assert_eq!(xids(&r), 1);
    let r = h3.request("GET", "/x", b"");
    assert_eq!((r.status, &r.body[..]), (200, &b"page /x"[..]));
    assert_eq!(xids(&r), 2);
    assert_eq!(origin.count("/x"), 2);
    // A new object, fetched over HTTP/3 first.
    let r = h3.request("GET", "/y", b"");
    assert_eq!((r.status, &r.body[..]), (200, &b"page /y"[..]));
    // A pass with a request body, which reaches the origin whole.
    let r = h3.request("POST", "/pass/post", b"hello over quic");
    assert_eq!(r.status, 200);
    let seen = origin.seen();
    let post = seen.iter().find(|s| s.url == "/pass/post").unwrap();
    assert_eq!(post.body, b"hello over quic");
    // (The counters' copy for the tools is written now and then.)
    assert!(eventually(Duration::from_secs(10), || {
        lq.counter("MAIN.sess_h3") == 1 && lq.counter("MAIN.h3_streams") == 4
    }));
}

#[test]
fn a_resumed_connection_sends_early_data_and_only_safe_requests_go_before_the_handshake() {
    let vcl = "sub vcl_recv { if (req.method == \"POST\") { return (pass); } }\n";
    let (pki, origin, lq) = setup_with("h3early", "quic = on\n", Some(vcl));
    let addr = lq.listen("tls0");
    let config = quic_client(&pki);
    // A first connection, for a session ticket.
    let (mut first, early) = H3Client::connect_with(config.clone(), addr, "a.example", true);
    assert!(!early, "no ticket yet");
    assert_eq!(first.request("GET", "/e", b"").status, 200);
    drop(first);
    // Resumed: the requests go in 0-RTT early data.
    let (mut again, early) = H3Client::connect_with(config, addr, "a.example", true);
    assert!(early, "the client had a ticket for 0-RTT");
    // A POST in early data waits for the handshake, then goes once.
    let r = again.request("POST", "/p", b"once");
    assert_eq!(r.status, 200);
    assert_eq!(origin.count("/p"), 1);
    let r = again.request("GET", "/e", b"");
    assert_eq!((r.status, &r.body[..]), (200, &b"page /e"[..]));
    assert!(eventually(Duration::from_secs(10), || {
        lq.counter("MAIN.h3_early_held") == 1 && lq.counter("MAIN.sess_h3") == 2
    }));
}

#[test]
fn malformed_http3_requests_are_refused_and_reach_no_origin() {
    let vcl = "sub vcl_recv { return (pass); }\n";
    let (pki, origin, lq) = setup_with("h3hostile", "quic = on\n", Some(vcl));
    let addr = lq.listen("tls0");
    let mut h3 = H3Client::connect(&pki, addr, "a.example");
    // Fields that speak of an HTTP/1 connection (RFC 9114 §4.2).
    for (name, value) in [
        ("transfer-encoding", "chunked"),
        ("connection", "close"),
        ("keep-alive", "timeout=5"),
        ("upgrade", "websocket"),
        ("te", "gzip"),
    ] {
        let r = h3.try_request(
            "POST",
            "/bad",
            &[(name, value)],
            b"0\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n",
        );
        assert!(
            r.is_err() || r.as_ref().unwrap().status == 400,
            "{name}: {:?}",
            r.map(|r| r.status)
        );
    }
    // A body longer, or shorter, than its Content-Length (§4.1.2).
    let long = h3.try_request("POST", "/long", &[("content-length", "3")], b"abcdefgh");
    assert!(long.is_err() || long.unwrap().status != 200);
    let short = h3.try_request("POST", "/short", &[("content-length", "10")], b"abc");
    assert!(short.is_err() || short.unwrap().status != 200);
    // :authority and Host that differ.
    let r = h3.try_request("GET", "/two-hosts", &[("host", "b.example")], b"");
    assert!(r.is_err() || r.unwrap().status == 400);
    let seen: Vec<String> = origin.seen().into_iter().map(|s| s.url).collect();
    for url in ["/bad", "/smuggled", "/long", "/short", "/two-hosts"] {
        assert!(
            !seen.iter().any(|u| u == url),
            "{url} reached the origin: {seen:?}"
        );
    }
    // The connection (or a new one) still serves.
    let mut h3 = H3Client::connect(&pki, addr, "a.example");
    assert_eq!(h3.request("GET", "/fine", b"").status, 200);
}

#[test]
fn a_stream_that_never_sends_its_headers_is_let_go() {
    let (pki, _origin, lq) = setup_with("h3slow", "quic = on\n", None);
    lq.cli_ok("param.set timeout_idle 1");
    let addr = lq.listen("tls0");
    let rt = client_runtime();
    let (_endpoint, conn) = raw_connection(&rt, &pki, addr);
    rt.block_on(async {
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        // A HEADERS frame's type and length, and none of its 16 bytes.
        send.write_all(&[0x01, 0x10]).await.unwrap();
        // The server lets the stream go after timeout_idle; without the
        // limit nothing would ever come back.
        let ended = tokio::time::timeout(Duration::from_secs(10), recv.read_to_end(1024)).await;
        assert!(ended.is_ok(), "the stream was held open");
    });
}

/// A client's QUIC settings that offer only ChaCha20-Poly1305.
fn chacha20_client(pki: &Pki) -> quinn::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca.der().clone()).unwrap();
    let mut provider = rustls::crypto::ring::default_provider();
    provider
        .cipher_suites
        .retain(|s| s.suite() == rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256);
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    // (QUIC's Initial packets are always protected with AES-128-GCM.)
    let initial = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .unwrap()
        .quic_suite()
        .unwrap();
    let crypto =
        quinn::crypto::rustls::QuicClientConfig::with_initial(Arc::new(tls), initial).unwrap();
    quinn::ClientConfig::new(Arc::new(crypto))
}

/// The QUIC interop runner's server cases with a quinn and h3 client
/// (resumption and zerortt are the test above): handshake, transfer of
/// several files, retry, chacha20, keyupdate, multiconnect; and a client
/// past h3_max_connections is refused.
#[test]
fn a_quinn_client_passes_the_interop_cases() {
    // One worker, so one endpoint: with more, each takes its share of
    // h3_max_connections and the kernel picks which one a client reaches,
    // so the last check below would depend on the client's port.
    let origin = Origin::start(|req| Reply::ok(&format!("page {}", req.url)));
    let (pki, origin, lq) = setup_args(
        "h3interop",
        "quic = on\n",
        None,
        origin,
        &["-p", "workers=1"],
    );
    let addr = lq.listen("tls0");
    // handshake, transfer: several objects on one connection.
    let mut c = H3Client::connect(&pki, addr, "a.example");
    for i in 0..5 {
        let r = c.request("GET", &format!("/file{i}"), b"");
        assert_eq!(r.body, format!("page /file{i}").as_bytes());
    }
    // keyupdate: the client changes its keys; requests go on.
    c.conn.force_key_update();
    for i in 5..8 {
        let r = c.request("GET", &format!("/file{i}"), b"");
        assert_eq!(r.body, format!("page /file{i}").as_bytes());
    }
    // multiconnect: connections one after another.
    for i in 0..3 {
        let mut c = H3Client::connect(&pki, addr, "a.example");
        assert_eq!(c.request("GET", &format!("/multi{i}"), b"").status, 200);
    }
    // chacha20.
    let (mut c, _) = H3Client::connect_with(chacha20_client(&pki), addr, "a.example", false);
    assert_eq!(c.request("GET", "/chacha", b"").body, b"page /chacha");
    // retry: every new client is asked to prove its address.
    lq.cli_ok("param.set h3_retry_above 0");
    let mut c = H3Client::connect(&pki, addr, "a.example");
    assert_eq!(c.request("GET", "/retried", b"").status, 200);
    assert!(eventually(Duration::from_secs(10), || lq
        .counter("MAIN.h3_retry")
        >= 1));
    lq.cli_ok("param.set h3_retry_above 64");
    // Past h3_max_connections: refused.
    lq.cli_ok("param.set h3_max_connections 1");
    let refused = c.rt.block_on(async {
        let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        endpoint.set_default_client_config(quic_client(&pki));
        endpoint.connect(addr, "a.example").unwrap().await
    });
    assert!(refused.is_err(), "a second connection was taken");
    assert!(eventually(Duration::from_secs(10), || lq
        .counter("MAIN.h3_refused")
        >= 1));
    drop(c);
    assert_eq!(origin.count("/retried"), 1);
}

/// `stop` stops QUIC taking new connections (a new client's handshake
/// is left unanswered, as a TCP client's is left in the backlog), those
/// it has go on; after `start`, old and new ones are served by the one
/// endpoint.
#[test]
fn stop_and_start_keep_the_quic_connections_there_are() {
    let (pki, _origin, lq) = setup_with("h3stop", "quic = on\n", None);
    let addr = lq.listen("tls0");
    let mut old = H3Client::connect(&pki, addr, "a.example");
    assert_eq!(old.request("GET", "/a", b"").status, 200);
    lq.cli_ok("stop");
    let refused = old.rt.block_on(async {
        let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        endpoint.set_default_client_config(quic_client(&pki));
        let connecting = endpoint.connect(addr, "a.example").unwrap();
        tokio::time::timeout(Duration::from_secs(2), connecting).await
    });
    assert!(
        !matches!(refused, Ok(Ok(_))),
        "a new connection while stopped"
    );
    assert_eq!(old.request("GET", "/b", b"").body, b"page /b");
    lq.cli_ok("start");
    let mut new = H3Client::connect(&pki, addr, "a.example");
    for i in 0..20 {
        assert_eq!(new.request("GET", &format!("/n{i}"), b"").status, 200);
        assert_eq!(old.request("GET", &format!("/o{i}"), b"").status, 200);
    }
}

/// With an endpoint for each worker, a client that moves (a new port, as
/// after a NAT's rebinding) keeps its connection: the kernel steers its
/// datagrams by the connection ID, which names the worker, where a hash
/// of the addresses would take most of them to another worker's endpoint,
/// which knows nothing of the connection.
#[test]
fn a_client_that_moves_stays_with_the_worker_of_its_connection() {
    let origin = Origin::start(|req| Reply::ok(&format!("page {}", req.url)));
    let (pki, _origin, lq) =
        setup_args("h3move", "quic = on\n", None, origin, &["-p", "workers=4"]);
    let addr = lq.listen("tls0");
    for i in 0..8 {
        let mut c = H3Client::connect(&pki, addr, "a.example");
        assert_eq!(c.request("GET", &format!("/m{i}"), b"").status, 200);
        for j in 0..3 {
            let moved = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            {
                let _runtime = c.rt.enter();
                c.endpoint.rebind(moved).unwrap();
            }
            let url = format!("/m{i}/{j}");
            let got = c.try_request("GET", &url, &[], b"");
            assert_eq!(got.map(|r| r.body), Ok(format!("page {url}").into_bytes()));
        }
    }
    // (`lacquer stat` reads the counters the daemon publishes now and then.)
    assert!(eventually(Duration::from_secs(5), || lq
        .counter("MAIN.sess_h3")
        == 8));
}

/// A listener that asks for client certificates asks over QUIC too, and
/// VCL's `tls.*` say whose a connection showed, as over TCP.
#[test]
fn a_client_certificate_over_quic_is_seen_by_vcl() {
    let vcl = "import tls;\nsub vcl_deliver {\n  set resp.http.has-cert = tls.has_client_cert();\n  set resp.http.cert-cn = tls.client_cert_cn();\n}\n";
    let (pki, _origin, lq) = setup_with(
        "h3cert",
        "quic = on\nclient-verify = optional\nclient-verify-ca = \"ca.pem\"\n",
        Some(vcl),
    );
    let addr = lq.listen("tls0");
    let with_cert = |cn: Option<&str>| {
        let mut tls = match cn {
            Some(cn) => (*pki.client_with_cert(cn, &pki)).clone(),
            None => (*pki.client()).clone(),
        };
        tls.alpn_protocols = vec![b"h3".to_vec()];
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
        quinn::ClientConfig::new(Arc::new(crypto))
    };
    let (mut alice, _) = H3Client::connect_with(with_cert(Some("alice")), addr, "a.example", false);
    let r = alice.request("GET", "/c", b"");
    assert_eq!(r.headers["has-cert"], "true");
    assert_eq!(r.headers["cert-cn"], "alice");
    let (mut anonymous, _) = H3Client::connect_with(with_cert(None), addr, "a.example", false);
    let r = anonymous.request("GET", "/c", b"");
    assert_eq!(r.headers["has-cert"], "false");
    assert!(r.headers.get("cert-cn").is_none_or(|v| v.is_empty()));
}

/// A client that gives up a request (it stops the stream) while the
/// backend thinks: the fetch nobody else waits for is given up at once.
#[test]
fn a_stopped_stream_gives_up_the_fetch_nobody_else_waits_for() {
    let origin =
        Origin::start(|req| Reply::ok(&format!("slow {}", req.url)).delay(Duration::from_secs(30)));
    let (pki, _origin, lq) = setup_origin("h3stopped", "quic = on\n", None, origin);
    let addr = lq.listen("tls0");
    let c = H3Client::connect(&pki, addr, "a.example");
    let mut send = c.send.clone();
    c.rt.block_on(async {
        let req = http::Request::get("https://a.example/alone")
            .body(())
            .unwrap();
        let mut stream = send.send_request(req).await.unwrap();
        stream.finish().await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        stream.stop_sending(h3::error::Code::H3_REQUEST_CANCELLED);
        tokio::time::sleep(Duration::from_millis(50)).await;
    });
    // (An answer would take 30 s; a fetch that went on would not fail.)
    assert!(eventually(Duration::from_secs(5), || lq
        .counter("MAIN.fetch_failed")
        == 1));
    assert!(eventually(Duration::from_secs(5), || lq
        .counter("MAIN.h3_reset")
        == 1));
}

/// SIGTERM ends the daemon at once, as varnishd's: its QUIC clients are
/// told (CONNECTION_CLOSE, H3_NO_ERROR), as the kernel tells its TCP
/// clients, rather than left to wait out their idle timeout.
#[test]
fn quic_clients_are_told_when_the_daemon_ends() {
    let (pki, _origin, lq) = setup_with("h3term", "quic = on\n", None);
    let addr = lq.listen("tls0");
    let mut c = H3Client::connect(&pki, addr, "a.example");
    assert_eq!(c.request("GET", "/x", b"").status, 200);
    let pid = lq.pid().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let conn = c.conn.clone();
    let closed = c
        .rt
        .block_on(async move { tokio::time::timeout(Duration::from_secs(5), conn.closed()).await });
    match closed.expect("told within 5 s") {
        quinn::ConnectionError::ApplicationClosed(close) => {
            assert_eq!(close.error_code.into_inner(), 0x100)
        }
        other => panic!("{other:?}"),
    }
}
