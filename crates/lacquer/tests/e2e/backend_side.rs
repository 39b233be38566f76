//! HTTP/1.1 towards backends: connection reuse and the retry of a reused
//! connection, body framings, hop-by-hop headers, X-Forwarded-For, and
//! every kind of failure answered with 503.

use crate::harness::{eventually, Lacquer};
use crate::origin::{Framing, Origin, Reply};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

#[test]
fn backend_connections_are_reused() {
    let origin = Origin::start(|_| Reply::ok("x"));
    let lq = Lacquer::start(origin.addr, &[]);
    let mut c = lq.connect();
    for i in 0..5 {
        assert_eq!(c.get(&format!("/reuse{i}"), &[]).status, 200);
    }
    assert!(
        origin.connections() <= 2,
        "{} connections for 5 fetches",
        origin.connections()
    );
}

#[test]
fn reused_connection_closed_by_backend_is_retried_once() {
    let origin = Origin::start(|req| {
        let mut r = Reply::ok("fine");
        if req.url == "/second" && req.conn == 1 {
            r.drop_connection = true;
        }
        r
    });
    let lq = Lacquer::start(origin.addr, &[]);
    let mut c = lq.connect();
    assert_eq!(c.get("/first", &[]).text(), "fine");
    let r = c.get("/second", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "fine");
    let conns: Vec<usize> = origin
        .seen()
        .iter()
        .filter(|s| s.url == "/second")
        .map(|s| s.conn)
        .collect();
    assert_eq!(
        conns,
        vec![1, 2],
        "tried on the pooled connection, then on a fresh one"
    );
}

#[test]
fn body_framings_from_the_backend() {
    let origin = Origin::start(|req| {
        let body = format!("body of {}", req.url);
        match req.url.as_str() {
            "/chunked" | "/pass-chunked" => Reply::ok(&body).framing(Framing::Chunked),
            "/close" | "/pass-close" => Reply::ok(&body).framing(Framing::Close),
            _ => Reply::ok(&body),
        }
    });
    let lq = Lacquer::start(origin.addr, &[]);
    for url in ["/length", "/chunked", "/close"] {
        let mut c = lq.connect();
        let miss = c.get(url, &[]);
        assert_eq!(miss.text(), format!("body of {url}"));
        let hit = c.get(url, &[]);
        assert_eq!(hit.text(), format!("body of {url}"));
        assert_eq!(
            hit.header("content-length"),
            Some(&*format!("{}", hit.body.len()))
        );
        assert_eq!(origin.count(url), 1);
    }
    for url in ["/pass-chunked", "/pass-close"] {
        let mut c = lq.connect();
        let r = c.request("POST", url, &[("Content-Length", "0")]);
        assert_eq!(r.text(), format!("body of {url}"));
        // Unknown length to an HTTP/1.1 client: re-chunked, connection kept.
        assert_eq!(r.header("transfer-encoding"), Some("chunked"));
        assert_eq!(
            c.request("POST", url, &[("Content-Length", "0")]).status,
            200
        );
    }
}

#[test]
fn hop_by_hop_headers_and_forwarded_for() {
    let origin = Origin::start(|_| {
        Reply::ok("h")
            .header("Connection", "X-Backend-Private")
            .header("X-Backend-Private", "secret")
            .header("Keep-Alive", "timeout=5")
            .header("X-Kept", "yes")
    });
    let lq = Lacquer::start(origin.addr, &[]);
    let r = lq.connect().get(
        "/hop",
        &[
            ("Host", "www.example.com"),
            ("Connection", "keep-alive, X-Client-Private"),
            ("X-Client-Private", "secret"),
            ("Keep-Alive", "300"),
            ("TE", "trailers"),
            ("X-Forwarded-For", "203.0.113.9"),
        ],
    );
    assert_eq!(r.header("x-kept"), Some("yes"));
    assert!(r.header("x-backend-private").is_none());
    assert!(r.header("keep-alive").is_none());
    let seen = &origin.seen()[0];
    assert_eq!(seen.header("host"), Some("www.example.com"));
    assert_eq!(
        seen.header("x-forwarded-for"),
        Some("203.0.113.9, 127.0.0.1")
    );
    assert!(seen.header("x-client-private").is_none());
    assert!(seen.header("keep-alive").is_none());
    assert!(seen.header("te").is_none());
    assert!(seen.header("x-varnish").is_some());
}

#[test]
fn refused_connection_is_a_503() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut lq = Lacquer::start(port, &[]);
    let r = lq.get("/down");
    assert_eq!(r.status, 503);
    assert!(r.text().contains("Backend fetch failed"));
    let r = lq
        .connect()
        .request("POST", "/down", &[("Content-Length", "0")]);
    assert_eq!(r.status, 503);
    assert!(lq.alive());
}

#[test]
fn slow_and_broken_backends_are_503() {
    let origin = Origin::start(|req| match req.url.as_str() {
        "/slow" => Reply::ok("late").delay(Duration::from_secs(5)),
        "/garbage" => {
            let mut r = Reply::ok("");
            r.raw = Some(b"SSH-2.0-OpenSSH_9.2\r\n\r\n".to_vec());
            r
        }
        "/halfhead" => {
            let mut r = Reply::ok("");
            r.raw = Some(b"HTTP/1.1 200 OK\r\nContent-Len".to_vec());
            r
        }
        "/badlength" => {
            let mut r = Reply::ok("");
            r.raw = Some(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello".to_vec(),
            );
            r
        }
        _ => Reply::ok("fine"),
    });
    let mut lq = Lacquer::start(origin.addr, &["-p", "first_byte_timeout=0.5"]);
    for url in ["/slow", "/garbage", "/halfhead", "/badlength"] {
        let r = lq.get(url);
        assert_eq!(r.status, 503, "{url}");
        assert!(r.text().contains("Backend fetch failed"), "{url}");
        assert_eq!(r.header("retry-after"), Some("5"));
    }
    assert!(lq.alive());
    assert_eq!(lq.get("/fine").status, 200);
}

#[test]
fn body_that_stops_arriving_is_cut_and_not_cached() {
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    let origin = Origin::start(move |_| {
        let mut r = Reply::ok("0123456789");
        r.gate = Some((4, g.clone()));
        r
    });
    let lq = Lacquer::start(origin.addr, &["-p", "between_bytes_timeout=0.5"]);
    let mut c = lq.connect();
    c.send(b"GET /stuck HTTP/1.1\r\nHost: t\r\n\r\n");
    let head = c.read_head();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("10"));
    assert_eq!(c.read_some(10), b"0123");
    assert!(c.closed(), "the delivery is cut when the fetch fails");
    // The failed object was not kept: the next request fetches again.
    gate.add_permits(10);
    assert!(eventually(Duration::from_secs(5), || lq
        .get("/stuck")
        .text()
        == "0123456789"));
    assert_eq!(origin.count("/stuck"), 2);
}

#[test]
fn idle_backend_connections_are_closed_after_backend_idle_timeout() {
    let origin = Origin::start(|_| Reply::ok("x"));
    let lq = Lacquer::start(origin.addr, &["-p", "backend_idle_timeout=1"]);
    assert_eq!(lq.get("/first").status, 200);
    assert_eq!(origin.connections(), 1);
    // The pooled connection is closed once it has idled past the limit.
    assert!(eventually(Duration::from_secs(10), || origin
        .closed_connections()
        == 1));
    assert_eq!(lq.get("/later").status, 200);
    assert_eq!(origin.connections(), 2);
}
