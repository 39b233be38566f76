//! What works over HTTP/2 works over HTTP/3: ESI, gzip both ways, ranges,
//! PURGE and bans, interim responses (100-continue, an origin's 103),
//! trailers, and a passed gRPC-style exchange whose request and response
//! bodies stream beside each other.

use crate::h2_origin::H2Origin;
use crate::http3::{H3Client, H3Response};
use crate::origin::{Origin, Reply};
use crate::tls::setup_origin;
use bytes::{Buf, Bytes};
use std::io::Read;
use std::time::Duration;

const TEXT: &str = "a body that gzip makes smaller, ";

fn origin() -> Origin {
    Origin::start(|req| match req.url.as_str() {
        "/esi/page" => Reply::ok("<p><esi:include src=\"/esi/frag\"/></p>"),
        "/esi/frag" => Reply::ok("fragment"),
        "/gz" => Reply::ok(&TEXT.repeat(64)).header("Content-Type", "text/plain"),
        "/range" => Reply::ok("0123456789"),
        // (The origin closes the connection after a raw reply: it says so,
        // or a POST could be sent on it as it closes, and fail.)
        "/hints" => {
            let mut r = Reply::ok("");
            r.raw = Some(
                b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n\
                  HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhints"
                    .to_vec(),
            );
            r
        }
        "/continue" => Reply::ok(&format!("got {}", String::from_utf8_lossy(&req.body))),
        url => Reply::ok(&format!("page {url}")),
    })
}

fn vcl(h2: &H2Origin) -> String {
    format!(
        "backend h2o {{ .host = \"127.0.0.1\"; .port = \"{}\"; .h2c = 1; }}\n\
         sub vcl_recv {{\n\
           if (req.method == \"PURGE\") {{ return (purge); }}\n\
           if (req.method == \"BAN\") {{\n\
             ban(\"req.url ~ \" + req.url);\n\
             return (synth(200, \"Banned\"));\n\
           }}\n\
           if (req.url ~ \"^/(duplex|trailers)\") {{\n\
             set req.backend_hint = h2o;\n\
             return (pass);\n\
           }}\n\
           if (req.url ~ \"^/hints\") {{ return (pass); }}\n\
         }}\n\
         sub vcl_backend_response {{\n\
           if (bereq.url == \"/esi/page\") {{ set beresp.do_esi = true; }}\n\
           if (bereq.url == \"/gz\") {{ set beresp.do_gzip = true; }}\n\
         }}\n",
        h2.addr.port()
    )
}

/// Reads a stream's body to its end.
async fn body_of(
    stream: &mut h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>,
) -> Vec<u8> {
    let mut got = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.unwrap() {
        while chunk.has_remaining() {
            let n = chunk.chunk().len();
            got.extend_from_slice(chunk.chunk());
            chunk.advance(n);
        }
    }
    got
}

fn request(method: &str, url: &str, fields: &[(&str, &str)]) -> http::Request<()> {
    let mut b = http::Request::builder()
        .method(method)
        .uri(format!("https://a.example{url}"));
    for (n, v) in fields {
        b = b.header(*n, *v);
    }
    b.body(()).unwrap()
}

#[test]
fn esi_gzip_ranges_purges_and_bans_work_over_http3() {
    let h2 = H2Origin::start();
    let (pki, origin, lq) = setup_origin("h3feat", "quic = on\n", Some(&vcl(&h2)), origin());
    let mut c = H3Client::connect(&pki, lq.listen("tls0"), "a.example");
    // ESI: the page with its fragment in place.
    let r = c.request("GET", "/esi/page", b"");
    assert_eq!((r.status, &r.body[..]), (200, &b"<p>fragment</p>"[..]));
    // gzip: stored compressed, sent so to a client that takes it …
    let r = c
        .try_request("GET", "/gz", &[("accept-encoding", "gzip")], b"")
        .unwrap();
    assert_eq!(r.headers["content-encoding"], "gzip");
    assert!(r.body.len() < TEXT.len() * 64);
    let mut plain = String::new();
    flate2::read::GzDecoder::new(&r.body[..])
        .read_to_string(&mut plain)
        .unwrap();
    assert_eq!(plain, TEXT.repeat(64));
    // … and inflated for one that does not.
    let r = c.request("GET", "/gz", b"");
    assert!(!r.headers.contains_key("content-encoding"));
    assert_eq!(r.body, TEXT.repeat(64).as_bytes());
    assert_eq!(origin.count("/gz"), 1);
    // Ranges of a cached object.
    let H3Response {
        status,
        headers,
        body,
    } = c
        .try_request("GET", "/range", &[("range", "bytes=2-5")], b"")
        .unwrap();
    assert_eq!((status, &body[..]), (206, &b"2345"[..]));
    assert_eq!(headers["content-range"], "bytes 2-5/10");
    // PURGE, then a miss.
    assert_eq!(c.request("GET", "/p", b"").status, 200);
    assert_eq!(c.request("PURGE", "/p", b"").status, 200);
    assert_eq!(c.request("GET", "/p", b"").status, 200);
    assert_eq!(origin.count("/p"), 2);
    // A ban, then a miss.
    assert_eq!(c.request("GET", "/b", b"").status, 200);
    assert_eq!(c.request("BAN", "/b", b"").status, 200);
    assert_eq!(c.request("GET", "/b", b"").body, b"page /b");
    assert_eq!(origin.count("/b"), 2);
}

#[test]
fn interim_responses_trailers_and_a_duplex_pass_work_over_http3() {
    let h2 = H2Origin::start();
    let (pki, origin, lq) = setup_origin("h3duplex", "quic = on\n", Some(&vcl(&h2)), origin());
    let c = H3Client::connect(&pki, lq.listen("tls0"), "a.example");
    let mut send = c.send.clone();
    let five = Duration::from_secs(5);
    c.rt.block_on(async {
        // An origin's 103 comes before its 200.
        let mut s = send
            .send_request(request("GET", "/hints", &[]))
            .await
            .unwrap();
        s.finish().await.unwrap();
        let first = s.recv_response().await.unwrap();
        assert_eq!(first.status(), 103);
        assert_eq!(first.headers()["link"], "</s.css>; rel=preload");
        let last = s.recv_response().await.unwrap();
        assert_eq!(last.status(), 200);
        assert_eq!(body_of(&mut s).await, b"hints");

        // Expect: 100-continue is answered before the body is sent.
        let fields = [("expect", "100-continue"), ("content-length", "4")];
        let mut s = send
            .send_request(request("POST", "/continue", &fields))
            .await
            .unwrap();
        let first = tokio::time::timeout(five, s.recv_response())
            .await
            .expect("100 Continue before the body")
            .unwrap();
        assert_eq!(first.status(), 100);
        s.send_data(Bytes::from_static(b"body")).await.unwrap();
        s.finish().await.unwrap();
        assert_eq!(s.recv_response().await.unwrap().status(), 200);
        assert_eq!(body_of(&mut s).await, b"got body");

        // Trailers of a passed body.
        let grpc = [("content-type", "application/grpc"), ("te", "trailers")];
        let mut s = send
            .send_request(request("POST", "/trailers", &grpc))
            .await
            .unwrap();
        s.finish().await.unwrap();
        assert_eq!(s.recv_response().await.unwrap().status(), 200);
        assert_eq!(body_of(&mut s).await, b"part one, part two");
        let trailers = s.recv_trailers().await.unwrap().expect("trailers");
        assert_eq!(trailers["grpc-status"], "0");

        // Duplex: the response begins while the request is open, and each
        // piece comes back before the next is sent.
        let mut s = send
            .send_request(request("POST", "/duplex", &grpc))
            .await
            .unwrap();
        s.send_data(Bytes::from_static(b"one")).await.unwrap();
        let head = tokio::time::timeout(five, s.recv_response())
            .await
            .expect("a head before the request ended")
            .unwrap();
        assert_eq!(head.status(), 200);
        let got = tokio::time::timeout(five, s.recv_data()).await.unwrap();
        assert_eq!(
            got.unwrap()
                .map(|mut b| b.copy_to_bytes(b.remaining()))
                .as_deref(),
            Some(&b"echo:one"[..])
        );
        s.send_data(Bytes::from_static(b"two")).await.unwrap();
        s.finish().await.unwrap();
        let got = tokio::time::timeout(five, s.recv_data()).await.unwrap();
        assert_eq!(
            got.unwrap()
                .map(|mut b| b.copy_to_bytes(b.remaining()))
                .as_deref(),
            Some(&b"echo:two"[..])
        );
        let end = tokio::time::timeout(five, s.recv_data()).await.unwrap();
        assert!(end.unwrap().is_none());
        let trailers = s.recv_trailers().await.unwrap().expect("trailers");
        assert_eq!(trailers["grpc-status"], "0");
    });
    assert_eq!(origin.count("/hints"), 1);
    assert_eq!(h2.count("/trailers"), 1);
}
