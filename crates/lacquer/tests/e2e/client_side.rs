//! HTTP/1.1 towards clients: keep-alive, HTTP/1.0, pipelining, request
//! bodies, 100-continue, strict parsing, idle and send timeouts.

use crate::harness::{eventually, Lacquer};
use crate::origin::{Origin, Reply};
use std::time::Duration;

fn echo_origin() -> Origin {
    Origin::start(|req| {
        Reply::ok(&format!(
            "{} {} {}",
            req.method,
            req.url,
            String::from_utf8_lossy(&req.body)
        ))
    })
}

#[test]
fn keep_alive_and_http10() {
    let origin = echo_origin();
    let lq = Lacquer::start(origin.addr, &[]);
    let mut c = lq.connect();
    for i in 0..3 {
        let r = c.get(&format!("/ka{i}"), &[]);
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), format!("GET /ka{i} "));
        assert!(r.header("connection").is_none());
    }
    // HTTP/1.0 without keep-alive: answered, then closed.
    let mut c = lq.connect();
    c.send(b"GET /old HTTP/1.0\r\n\r\n");
    let r = c.read_response(false);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.closed());
    // HTTP/1.0 with keep-alive: kept.
    let mut c = lq.connect();
    c.send(b"GET /old HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let r = c.read_response(false);
    assert_eq!(r.header("connection"), Some("keep-alive"));
    c.send(b"GET /old HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(c.read_response(false).status, 200);
    // HTTP/1.1 with Connection: close.
    let mut c = lq.connect();
    let r = c.get("/bye", &[("Connection", "close")]);
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.closed());
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let origin = echo_origin();
    let lq = Lacquer::start(origin.addr, &[]);
    let mut c = lq.connect();
    let mut raw = Vec::new();
    for i in 0..5 {
        raw.extend_from_slice(format!("GET /p{i} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes());
    }
    raw.extend_from_slice(b"POST /post HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\n\r\nabc");
    raw.extend_from_slice(b"GET /p0 HTTP/1.1\r\nHost: test\r\n\r\n");
    c.send(&raw);
    for i in 0..5 {
        assert_eq!(c.read_response(false).text(), format!("GET /p{i} "));
    }
    assert_eq!(c.read_response(false).text(), "POST /post abc");
    let last = c.read_response(false);
    assert_eq!(last.text(), "GET /p0 ");
    assert_eq!(last.xids().len(), 2, "the repeat is a hit");
}

#[test]
fn request_bodies_stream_to_the_backend_on_pass() {
    let origin = echo_origin();
    let lq = Lacquer::start(origin.addr, &[]);
    let mut c = lq.connect();
    c.send(b"POST /cl HTTP/1.1\r\nHost: test\r\nContent-Length: 11\r\n\r\nhello world");
    assert_eq!(c.read_response(false).text(), "POST /cl hello world");
    c.send(b"PUT /chunked HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
    assert_eq!(c.read_response(false).text(), "PUT /chunked hello world");
    let big = "x".repeat(300_000);
    c.send(
        format!(
            "POST /big HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n\r\n{big}",
            big.len()
        )
        .as_bytes(),
    );
    assert_eq!(
        c.read_response(false).body.len(),
        "POST /big ".len() + big.len()
    );
    // Expect: 100-continue gets the interim answer before the body is sent.
    c.send(
        b"POST /expect HTTP/1.1\r\nHost: test\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n",
    );
    let interim = c.read_head();
    assert_eq!(interim.status, 100);
    c.send(b"body");
    assert_eq!(c.read_response(false).text(), "POST /expect body");
    let seen = origin.seen();
    let chunked = seen.iter().find(|s| s.url == "/chunked").unwrap();
    assert_eq!(chunked.body, b"hello world");
    assert!(seen.iter().all(|s| s.header("expect").is_none()));
}

fn assert_refused(lq: &Lacquer, raw: &[u8], status: u16) {
    let mut c = lq.connect();
    c.send(raw);
    let r = c.read_response(false);
    assert_eq!(r.status, status, "for {:?}", String::from_utf8_lossy(raw));
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.closed(), "connection closed after {status}");
}

#[test]
fn malformed_requests_get_4xx_and_close() {
    let origin = echo_origin();
    let mut lq = Lacquer::start(origin.addr, &[]);
    for raw in [
        &b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"[..],
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3x\r\n\r\nabc",
        b"GET / HTTP/1.1\r\nHost: t\r\nX-Folded: a\r\n b\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nX-Ctl: a\x07b\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nX-CR: a\rb\r\n\r\n",
        b"G(T / HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET / HTTP/9.9\r\nHost: t\r\n\r\n",
        b"GET nourl HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    ] {
        assert_refused(&lq, raw, 400);
    }
    let long_url = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(40_000));
    assert_refused(&lq, long_url.as_bytes(), 414);
    let long_header = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
        "b".repeat(9000)
    );
    assert_refused(&lq, long_header.as_bytes(), 431);
    let many: String = (0..70).map(|i| format!("X-H{i}: v\r\n")).collect();
    assert_refused(
        &lq,
        format!("GET / HTTP/1.1\r\nHost: t\r\n{many}\r\n").as_bytes(),
        431,
    );
    assert_refused(
        &lq,
        b"GET / HTTP/1.1\r\nHost: t\r\nExpect: teapot\r\n\r\n",
        417,
    );
    // Nothing reached the backend, and the daemon is fine.
    assert!(origin.seen().is_empty());
    assert!(lq.alive());
    assert_eq!(lq.get("/after").status, 200);
}

#[test]
fn request_limits_follow_parameters() {
    let origin = echo_origin();
    let lq = Lacquer::start(
        origin.addr,
        &["-p", "http_req_hdr_len=100", "-p", "http_max_hdr=32"],
    );
    let hdr = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX-A: {}\r\n\r\n",
        "c".repeat(150)
    );
    assert_refused(&lq, hdr.as_bytes(), 431);
    let many: String = (0..40).map(|i| format!("X-H{i}: v\r\n")).collect();
    assert_refused(
        &lq,
        format!("GET / HTTP/1.1\r\nHost: t\r\n{many}\r\n").as_bytes(),
        431,
    );
    assert_eq!(
        lq.connect().get("/ok", &[("X-A", &"c".repeat(50))]).status,
        200
    );
}

#[test]
fn policy_answers() {
    let origin = echo_origin();
    let lq = Lacquer::start(origin.addr, &[]);
    let mut c = lq.connect();
    let r = c.request("PRI", "/", &[]);
    assert_eq!(r.status, 405);
    // HTTP/1.1 requires Host.
    let mut c = lq.connect();
    c.send(b"GET /nohost HTTP/1.1\r\n\r\n");
    assert_eq!(c.read_response(false).status, 400);
    // HTTP/1.0 without Host is served.
    let mut c = lq.connect();
    c.send(b"GET /nohost HTTP/1.0\r\n\r\n");
    assert_eq!(c.read_response(false).status, 200);
    assert!(origin.seen().iter().all(|s| s.method != "PRI"));
}

#[test]
fn idle_connections_are_closed_after_timeout_idle() {
    let origin = echo_origin();
    let lq = Lacquer::start(origin.addr, &["-p", "timeout_idle=0.3"]);
    let mut c = lq.connect();
    assert_eq!(c.get("/x", &[]).status, 200);
    assert!(c.closed(), "idle keep-alive connection closed");
    // A request head that never completes is closed too.
    let mut c = lq.connect();
    c.send(b"GET /slow HTTP/1.1\r\nHost: t\r\n");
    assert!(c.closed());
}

#[test]
fn stalled_delivery_is_abandoned_after_send_timeout() {
    let big = vec![b'z'; 32 << 20];
    let origin = Origin::start(move |_| Reply::ok("").body_bytes(big.clone()));
    let mut lq = Lacquer::start(
        origin.addr,
        &["-p", "send_timeout=1", "-p", "idle_send_timeout=0.5"],
    );
    let mut stalled = lq.connect();
    stalled.send(b"GET /big HTTP/1.1\r\nHost: test\r\n\r\n");
    // The client reads nothing; the server gives up and resets the
    // connection, so our end leaves ESTABLISHED.
    let local = stalled.stream.local_addr().unwrap();
    let peer = stalled.stream.peer_addr().unwrap();
    assert_eq!(tcp_state(local, peer), Some(ESTABLISHED));
    assert!(
        eventually(Duration::from_secs(15), || tcp_state(local, peer)
            != Some(ESTABLISHED)),
        "server abandoned the stalled connection"
    );
    // Other clients were and are served, and the object is intact.
    assert!(lq.alive());
    assert_eq!(lq.get("/big").body.len(), 32 << 20);
    assert_eq!(origin.count("/big"), 1);
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 20];
    while let Ok(n) = std::io::Read::read(&mut stalled.stream, &mut buf) {
        if n == 0 {
            break;
        }
        got += n;
    }
    assert!(got < 32 << 20, "delivery was cut off ({got} bytes)");
}

const ESTABLISHED: u8 = 0x01;

/// The kernel's TCP state of our end of a loopback connection. Both ends
/// are matched: an earlier connection in TIME_WAIT may share the local port.
fn tcp_state(local: std::net::SocketAddr, peer: std::net::SocketAddr) -> Option<u8> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let ours = format!("0100007F:{:04X}", local.port());
    let theirs = format!("0100007F:{:04X}", peer.port());
    table.lines().skip(1).find_map(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        (cols.get(1) == Some(&ours.as_str()) && cols.get(2) == Some(&theirs.as_str()))
            .then(|| u8::from_str_radix(cols[3], 16).ok())?
    })
}

#[test]
fn garbage_input_never_takes_the_daemon_down() {
    let origin = echo_origin();
    let mut lq = Lacquer::start(origin.addr, &["-p", "timeout_idle=0.2"]);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let pieces: [&[u8]; 8] = [
        b"GET / HTTP/1.1\r\n",
        b"Host: t\r\n",
        b"Content-Length: 5\r\n",
        b"Transfer-Encoding: chunked\r\n",
        b"\r\n",
        b"0\r\n\r\n",
        b"\x00\xff\r",
        b"ffffffffffff\r\n",
    ];
    for _ in 0..200 {
        let mut raw = Vec::new();
        for _ in 0..(next() % 8) {
            if next() % 3 == 0 {
                raw.extend((0..next() % 40).map(|_| next() as u8));
            } else {
                raw.extend_from_slice(pieces[(next() % 8) as usize]);
            }
        }
        if let Ok(mut s) = std::net::TcpStream::connect(lq.addr) {
            use std::io::{Read, Write};
            let _ = s.write_all(&raw);
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut sink = Vec::new();
            let _ = s.read_to_end(&mut sink);
        }
    }
    assert!(lq.alive());
    assert_eq!(lq.get("/still-here").status, 200);
}

/// The TCP states (`/proc/net/tcp`'s hex codes: 01 established, 03
/// SYN_RECV) of the server's side of each connection to `port` on
/// loopback.
fn server_side_states(port: u16) -> Vec<String> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let local = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // A listener's remote address is all zeros.
            (fields.get(1) == Some(&local.as_str()) && fields.get(2) != Some(&"00000000:0000"))
                .then(|| fields[3].to_string())
        })
        .collect()
}

/// By default (`accept_filter` on) a connection that has sent nothing is
/// held back by the kernel (TCP_DEFER_ACCEPT): its server side stays in
/// SYN_RECV, not taken, until its request comes, which is then answered.
/// With `-p accept_filter=off` it is taken at once.
#[test]
fn connections_are_taken_when_their_request_comes() {
    let origin = echo_origin();
    let lq = Lacquer::start(origin.addr, &[]);
    let port = lq.addr.port();
    let mut c = lq.connect();
    assert!(
        eventually(Duration::from_secs(5), || server_side_states(port)
            .contains(&"03".to_string())),
        "a silent connection is held back: {:?}",
        server_side_states(port)
    );
    let r = c.get("/deferred", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "GET /deferred ");

    let lq = Lacquer::start(origin.addr, &["-p", "accept_filter=off"]);
    let port = lq.addr.port();
    let before = lq.counter("MAIN.sess_conn");
    let _silent = lq.connect();
    assert!(
        eventually(Duration::from_secs(5), || lq.counter("MAIN.sess_conn")
            > before),
        "with accept_filter off, a silent connection is taken"
    );
    assert_eq!(server_side_states(port), ["01"]);
}

/// A worker whose event loop is held leaves no connection waiting for it:
/// those the kernel hashes to its socket are taken from its queue and
/// served by the other worker (`worker_stall_limit`).
#[test]
fn connections_a_stalled_worker_leaves_waiting_are_served_by_another() {
    let origin = echo_origin();
    let lq = Lacquer::start(
        origin.addr,
        &["-p", "workers=2", "-p", "worker_stall_limit=0.05"],
    );
    assert_eq!(lq.get("/warm").status, 200);
    lq.cli_ok("debug.worker.stall 0 8");
    let began = std::time::Instant::now();
    // Sixteen connections, from as many ports: the chance that the kernel
    // sends none to the held worker is 2^-16.
    let addr = lq.listen("a0");
    let clients: Vec<_> = (0..16)
        .map(|i| {
            std::thread::spawn(move || {
                let mut c = crate::harness::Client::connect(addr);
                let r = c.get(&format!("/held{i}"), &[]);
                (r.status, r.text())
            })
        })
        .collect();
    for (i, client) in clients.into_iter().enumerate() {
        assert_eq!(client.join().unwrap(), (200, format!("GET /held{i} ")));
    }
    crate::harness::none_waited_for_the_held_worker(&lq, began);
}
