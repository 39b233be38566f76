//! HTTP/2 to backends end to end: `.h2c = 1` backends, one connection
//! carrying many fetches as streams (bounded by `.max_connections`), a
//! connection of its own for each worker,
//! bodies both ways with and without a length, trailers, a refused
//! stream retried on a new connection, GOAWAY, probes over HTTP/2, and a
//! Lacquer in front of another one over h2c.

use crate::h2_origin::H2Origin;
use crate::harness::{eventually, Lacquer};
use crate::origin::{Origin, Reply};
use std::time::Duration;

/// Lacquer in front of `origin` with one worker (each worker opens its
/// own connections: the tests of one connection's streams run on one).
fn front(origin: &H2Origin, attrs: &str, vcl: &str) -> Lacquer {
    front_with(origin, &["-p", "workers=1"], attrs, vcl)
}

fn front_with(origin: &H2Origin, args: &[&str], attrs: &str, vcl: &str) -> Lacquer {
    Lacquer::spawn(
        args,
        Some(format!(
            "vcl 4.1;\nbackend b {{ .host = \"127.0.0.1\"; .port = \"{}\"; .h2c = 1; {attrs} }}\n{vcl}",
            origin.addr.port()
        )),
    )
}

#[test]
fn fetches_share_one_connection_as_streams() {
    let origin = H2Origin::start();
    let lq = front(&origin, "", "");
    let r = lq.get("/page");
    assert_eq!((r.status, r.text()), (200, "h2 /page".to_string()));
    let seen = &origin.seen()[0];
    assert_eq!(seen.method, "GET");
    assert_eq!(seen.authority, "test", "the client's Host");
    assert!(seen.headers.get("connection").is_none());
    // A hit: the origin is not asked again.
    assert_eq!(lq.get("/page").text(), "h2 /page");
    assert_eq!(origin.count("/page"), 1);

    // Six misses at once: six streams in flight on the one connection.
    let addr = lq.addr;
    let clients: Vec<_> = (0..6)
        .map(|i| {
            std::thread::spawn(move || {
                let mut c = crate::harness::Client::connect(addr);
                c.get(&format!("/slow/{i}"), &[])
            })
        })
        .collect();
    for c in clients {
        let r = c.join().unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(origin.max_in_flight(), 6);
    assert_eq!(origin.connections(), 1);
    assert!(eventually(Duration::from_secs(5), || {
        lq.counter("MAIN.backend_conn") == 1 && lq.counter("MAIN.backend_reuse") >= 6
    }));
}

/// A connection is driven by the worker that opened it, and each worker
/// takes streams only on its own: a worker held up (here, on purpose)
/// holds up none of the fetches the other worker makes.
#[test]
fn each_worker_fetches_over_a_connection_of_its_own() {
    let origin = H2Origin::start();
    let lq = front_with(
        &origin,
        &["-p", "workers=2", "-p", "worker_stall_limit=0.05"],
        "",
        "sub vcl_recv { return (pass); }\n",
    );
    // Worker 1 held a moment: worker 0 serves the first request (moved to
    // it if the kernel gave it to worker 1) and opens the connection.
    lq.cli_ok("debug.worker.stall 1 1");
    assert_eq!(lq.get("/first").status, 200);
    assert_eq!(origin.connections(), 1);
    // Worker 0 held: every request is served by worker 1, whose fetches
    // open a connection of their own rather than wait for worker 0 to
    // drive its connection.
    lq.cli_ok("debug.worker.stall 0 8");
    let began = std::time::Instant::now();
    let addr = lq.addr;
    let clients: Vec<_> = (0..8)
        .map(|i| {
            std::thread::spawn(move || {
                let r = crate::harness::Client::connect(addr).get(&format!("/held/{i}"), &[]);
                (r.status, r.text())
            })
        })
        .collect();
    for (i, c) in clients.into_iter().enumerate() {
        assert_eq!(c.join().unwrap(), (200, format!("h2 /held/{i}")));
    }
    assert!(
        began.elapsed() < Duration::from_secs(6),
        "a fetch waited for the held worker ({:?})",
        began.elapsed()
    );
    assert_eq!(origin.connections(), 2);
}

#[test]
fn max_connections_bounds_the_streams() {
    let origin = H2Origin::start();
    let lq = front(
        &origin,
        ".max_connections = 2; .wait_timeout = 5s; .wait_limit = 10;",
        "",
    );
    let addr = lq.addr;
    let clients: Vec<_> = (0..5)
        .map(|i| {
            std::thread::spawn(move || {
                crate::harness::Client::connect(addr).get(&format!("/slow/{i}"), &[])
            })
        })
        .collect();
    for c in clients {
        assert_eq!(c.join().unwrap().status, 200);
    }
    assert_eq!(origin.max_in_flight(), 2);
    assert_eq!(origin.connections(), 1);
}

#[test]
fn bodies_go_both_ways_with_or_without_a_length() {
    let origin = H2Origin::start();
    let lq = front(
        &origin,
        "",
        "sub vcl_recv { if (req.method == \"POST\") { return (pass); } }\n",
    );
    // A request body with a length, and one chunked by the client.
    let mut c = lq.connect();
    c.send(b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 11\r\n\r\nhello there");
    let r = c.read_response(false);
    assert_eq!((r.status, r.text()), (200, "hello there".to_string()));
    c.send(
        b"POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\r\nhello\r\n6\r\n again\r\n0\r\n\r\n",
    );
    let r = c.read_response(false);
    assert_eq!((r.status, r.text()), (200, "hello again".to_string()));
    let echoed: Vec<_> = origin
        .seen()
        .into_iter()
        .filter(|s| s.path == "/echo")
        .collect();
    assert_eq!(echoed[1].body, b"hello again");
    assert!(echoed[1].headers.get("transfer-encoding").is_none());

    // Responses without a length, read under the stream's window: 1 MiB
    // cached whole, and a body followed by trailers.
    let big = lq.get("/big");
    assert_eq!(big.status, 200);
    assert_eq!(big.body.len(), 1024 * 1024);
    assert!(big.body[..16384].iter().all(|&b| b == b'a'));
    assert!(big.body[1024 * 1024 - 1] == b'a' + 63 % 26);
    assert_eq!(lq.get("/big").body.len(), 1024 * 1024);
    assert_eq!(origin.count("/big"), 1);
    let t = lq.get("/trailers");
    assert_eq!(
        (t.status, t.text()),
        (200, "part one, part two".to_string())
    );
}

#[test]
fn a_refused_stream_is_retried_and_goaway_retires_the_connection() {
    let origin = H2Origin::start();
    let lq = front(&origin, "", "sub vcl_recv { return (pass); }\n");
    assert_eq!(lq.get("/warm").status, 200);
    // Refused on the shared connection before any answer: asked again on
    // a new one.
    let r = lq.get("/refuse-once");
    assert_eq!((r.status, r.text()), (200, "h2 /refuse-once".to_string()));
    assert!(eventually(Duration::from_secs(5), || lq
        .counter("MAIN.backend_retry")
        == 1));
    assert_eq!(origin.count("/refuse-once"), 2);
    assert_eq!(origin.connections(), 2);

    // GOAWAY after an answer: later fetches go to a new connection.
    let origin = H2Origin::start();
    let lq = front(&origin, "", "sub vcl_recv { return (pass); }\n");
    let r = lq.get("/goaway");
    assert_eq!(r.status, 200);
    let before = origin.connections();
    let gone_from = r.header("x-conn").unwrap().to_string();
    for i in 0..3 {
        let r = lq.get(&format!("/after/{i}"));
        assert_eq!(r.status, 200, "{}", r.text());
        assert_ne!(r.header("x-conn"), Some(gone_from.as_str()));
    }
    assert_eq!(origin.connections(), before + 1);
}

#[test]
fn probes_speak_http2() {
    let origin = H2Origin::start();
    let lq = front(
        &origin,
        ".probe = { .url = \"/health\"; .interval = 0.1s; .window = 2; .threshold = 2; .initial = 0; }",
        "",
    );
    assert!(eventually(Duration::from_secs(10), || {
        lq.cli_ok("backend.list").contains("healthy")
    }));
    assert!(origin.count("/health") >= 2);
    origin.set_sick(true);
    assert!(eventually(Duration::from_secs(10), || {
        lq.cli_ok("backend.list").contains("sick")
    }));
}

#[test]
fn a_lacquer_in_front_of_another_over_h2c() {
    let origin = Origin::start(|req| Reply::ok(&format!("origin {}", req.url)));
    let inner = Lacquer::spawn(
        &[],
        Some(format!(
            "vcl 4.1;\nbackend o {{ .host = \"{}\"; .port = \"{}\"; }}\n\
             sub vcl_deliver {{ set resp.http.x-inner-proto = req.proto; }}\n",
            origin.addr.ip(),
            origin.addr.port()
        )),
    );
    let outer = Lacquer::spawn(
        &[],
        Some(format!(
            "vcl 4.1;\nbackend i {{ .host = \"127.0.0.1\"; .port = \"{}\"; .h2c = 1; }}\n",
            inner.addr.port()
        )),
    );
    let r = outer.get("/through");
    assert_eq!((r.status, r.text()), (200, "origin /through".to_string()));
    assert_eq!(r.header("x-inner-proto"), Some("HTTP/2.0"));
    assert!(eventually(Duration::from_secs(5), || inner
        .counter("MAIN.sess_h2")
        == 1));
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// An HTTP/2 client by prior knowledge, its connection driven on the
/// runtime.
async fn h2_client(addr: std::net::SocketAddr) -> h2::client::SendRequest<bytes::Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (send, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// A POST as a gRPC client makes it.
fn grpc_request(path: &str) -> http::Request<()> {
    http::Request::builder()
        .method("POST")
        .uri(format!("http://test{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap()
}

#[test]
fn trailers_of_a_passed_body_reach_the_client() {
    let origin = H2Origin::start();
    let lq = front(&origin, "", "sub vcl_recv { return (pass); }\n");
    // HTTP/1.1: the body chunk-framed, the trailer section after its last
    // chunk.
    let mut c = lq.connect();
    c.send(b"GET /trailers HTTP/1.1\r\nHost: test\r\nTE: trailers\r\n\r\n");
    let got = c.read_until(b"\r\n0\r\ngrpc-status: 0\r\n\r\n");
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{text}"
    );
    assert!(text.contains("part one, ") && text.contains("part two"));

    // HTTP/2: a HEADERS frame that ends the stream (how gRPC's status
    // travels).
    runtime().block_on(async {
        let mut send = h2_client(lq.addr).await;
        let req = grpc_request("/trailers");
        let (resp, _) = send.send_request(req, true).unwrap();
        let mut recv = resp.await.unwrap().into_body();
        let mut body = Vec::new();
        while let Some(d) = recv.data().await {
            body.extend_from_slice(&d.unwrap());
        }
        assert_eq!(body, b"part one, part two");
        let trailers = recv.trailers().await.unwrap().expect("trailers");
        assert_eq!(trailers["grpc-status"], "0");
    });
}

#[test]
fn a_passed_http2_body_streams_beside_its_response() {
    let origin = H2Origin::start();
    let lq = front(&origin, "", "sub vcl_recv { return (pass); }\n");
    runtime().block_on(async {
        let mut send = h2_client(lq.addr).await;
        let req = grpc_request("/duplex");
        let (resp, mut body) = send.send_request(req, false).unwrap();
        body.send_data(bytes::Bytes::from_static(b"one"), false)
            .unwrap();
        // The response begins while the request is still open, and each
        // piece comes back before the next is sent.
        let five = Duration::from_secs(5);
        let resp = tokio::time::timeout(five, resp)
            .await
            .expect("a head before the request ended");
        let mut recv = resp.unwrap().into_body();
        let got = tokio::time::timeout(five, recv.data()).await.unwrap();
        assert_eq!(&got.unwrap().unwrap()[..], b"echo:one");
        body.send_data(bytes::Bytes::from_static(b"two"), true)
            .unwrap();
        let got = tokio::time::timeout(five, recv.data()).await.unwrap();
        assert_eq!(&got.unwrap().unwrap()[..], b"echo:two");
        let end = tokio::time::timeout(five, recv.data()).await.unwrap();
        assert!(end.is_none(), "{end:?}");
        let trailers = recv.trailers().await.unwrap().expect("trailers");
        assert_eq!(trailers["grpc-status"], "0");
    });
}
