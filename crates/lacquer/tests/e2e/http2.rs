//! HTTP/2 to clients end to end, by prior knowledge on a plain listener:
//! streams through the same steps as HTTP/1 (hits, misses, bodies, HEAD,
//! pipe turned into pass, `Upgrade: h2c`, a reset stream's fetch given
//! up), and the attacks played against it — rapid reset, MadeYouReset,
//! PING, SETTINGS, empty DATA and CONTINUATION floods, a window that
//! never opens, a header list past `http_req_size`, an HPACK bomb — each
//! ending only its own stream or connection.

use crate::harness::{eventually, Lacquer};
use crate::origin::{Origin, Reply};
use bytes::Bytes;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

type Sender = h2::client::SendRequest<Bytes>;

/// An HTTP/2 connection by prior knowledge, driven on the runtime.
async fn connect(addr: SocketAddr, window: Option<u32>) -> Sender {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut builder = h2::client::Builder::new();
    if let Some(w) = window {
        builder.initial_window_size(w);
    }
    let (send, conn) = builder.handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// One request: status, headers and body.
async fn fetch(
    send: &mut Sender,
    method: &str,
    url: &str,
    body: Option<&[u8]>,
) -> (u16, http::HeaderMap, Vec<u8>) {
    let req = http::Request::builder()
        .method(method)
        .uri(format!("http://lacquer.test{url}"))
        .body(())
        .unwrap();
    send.clone().ready().await.unwrap();
    let (resp, mut stream) = send.send_request(req, body.is_none()).unwrap();
    if let Some(b) = body {
        stream.send_data(Bytes::copy_from_slice(b), true).unwrap();
    }
    let resp = resp.await.unwrap();
    let (parts, mut recv) = resp.into_parts();
    let mut out = Vec::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk.unwrap();
        let _ = recv.flow_control().release_capacity(chunk.len());
        out.extend_from_slice(&chunk);
    }
    (parts.status.as_u16(), parts.headers, out)
}

fn setup(args: &[&str]) -> (Origin, Lacquer) {
    let origin = Origin::start(|req| {
        if req.url == "/esi" {
            return Reply::ok("<p><esi:include src=\"/inc\"/></p>");
        }
        Reply::ok(&format!(
            "{} {} {} [{}]",
            req.method,
            req.url,
            req.header("x-proto").unwrap_or("-"),
            String::from_utf8_lossy(&req.body)
        ))
    });
    let vcl = format!(
        "vcl 4.1;\nbackend b {{ .host = \"{}\"; .port = \"{}\"; }}\n\
         sub vcl_recv {{\n\
           set req.http.x-proto = req.proto;\n\
           if (req.url ~ \"^/pipe\") {{ return (pipe); }}\n\
           if (req.method == \"POST\") {{ return (pass); }}\n\
         }}\n\
         sub vcl_backend_response {{ if (bereq.url == \"/esi\") {{ set beresp.do_esi = true; }} }}\n\
         sub vcl_deliver {{ set resp.http.client-proto = req.proto; }}\n",
        origin.addr.ip(),
        origin.addr.port()
    );
    let lq = Lacquer::spawn(args, Some(vcl));
    (origin, lq)
}

#[test]
fn streams_go_through_the_same_steps_as_http1() {
    let (origin, lq) = setup(&[]);
    let addr = lq.addr;
    runtime().block_on(async {
        let mut send = connect(addr, None).await;
        let (status, headers, body) = fetch(&mut send, "GET", "/a", None).await;
        assert_eq!(status, 200);
        assert_eq!(headers["client-proto"], "HTTP/2.0");
        // The backend was spoken to in HTTP/1.1, told what the client
        // spoke.
        assert_eq!(String::from_utf8_lossy(&body), "GET /a HTTP/2.0 []");
        // A hit: the origin saw one request.
        let (_, headers, _) = fetch(&mut send, "GET", "/a", None).await;
        assert!(headers["x-varnish"].to_str().unwrap().contains(' '));
        // A body with a length, and one without (chunked on the way).
        let (_, _, body) = fetch(&mut send, "POST", "/p", Some(b"form=1")).await;
        assert_eq!(String::from_utf8_lossy(&body), "POST /p HTTP/2.0 [form=1]");
        // A body with a Content-Length goes as it came.
        let req = http::Request::builder()
            .method("POST")
            .uri("http://lacquer.test/p2")
            .header("content-length", "6")
            .body(())
            .unwrap();
        send.clone().ready().await.unwrap();
        let (resp, mut stream) = send.send_request(req, false).unwrap();
        stream
            .send_data(Bytes::from_static(b"form=2"), true)
            .unwrap();
        let mut recv = resp.await.unwrap().into_body();
        let mut got = Vec::new();
        while let Some(chunk) = recv.data().await {
            got.extend_from_slice(&chunk.unwrap());
        }
        assert_eq!(String::from_utf8_lossy(&got), "POST /p2 HTTP/2.0 [form=2]");
        // HEAD: the head alone.
        let (status, headers, body) = fetch(&mut send, "HEAD", "/a", None).await;
        assert_eq!((status, body.len()), (200, 0));
        assert_eq!(headers["content-length"], "18");
        // ESI: the include's body spliced into the page's DATA frames.
        let (status, _, body) = fetch(&mut send, "GET", "/esi", None).await;
        assert_eq!(status, 200);
        assert_eq!(
            String::from_utf8_lossy(&body),
            "<p>GET /inc HTTP/2.0 []</p>"
        );
        // A byte range of a cached object.
        let req = http::Request::builder()
            .uri("http://lacquer.test/a")
            .header("range", "bytes=4-5")
            .body(())
            .unwrap();
        send.clone().ready().await.unwrap();
        let (resp, _) = send.send_request(req, true).unwrap();
        let resp = resp.await.unwrap();
        assert_eq!(resp.status(), 206);
        let mut recv = resp.into_body();
        let mut part = Vec::new();
        while let Some(chunk) = recv.data().await {
            part.extend_from_slice(&chunk.unwrap());
        }
        assert_eq!(part, b"/a");
        // Pipe is not for a stream: passed.
        let (status, _, body) = fetch(&mut send, "GET", "/pipe", None).await;
        assert_eq!(status, 200);
        assert_eq!(String::from_utf8_lossy(&body), "GET /pipe HTTP/2.0 []");
        // Many streams at once on one connection.
        let mut all = Vec::new();
        for i in 0..40 {
            let mut s = send.clone();
            all.push(tokio::spawn(async move {
                fetch(&mut s, "GET", &format!("/many/{}", i % 10), None).await
            }));
        }
        for t in all {
            assert_eq!(t.await.unwrap().0, 200);
        }
    });
    assert_eq!(origin.count("/a"), 1);
    assert_eq!(origin.count("/pipe"), 1);
    assert!(eventually(Duration::from_secs(5), || {
        lq.counter("MAIN.sess_h2") >= 1
    }));
    // HTTP/1 on the same listener is untouched.
    assert_eq!(lq.get("/a").status, 200);
}

/// A raw HTTP/2 client: the preface and frames written by hand.
struct Raw(TcpStream);

/// One frame's bytes.
fn frame(kind: u8, flags: u8, id: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

impl Raw {
    fn open(addr: SocketAddr) -> Raw {
        let mut tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
        let mut raw = Raw(tcp);
        raw.frame(4, 0, 0, &[]);
        raw
    }

    fn frame(&mut self, kind: u8, flags: u8, id: u32, payload: &[u8]) {
        // The server may have closed already: later writes may fail.
        let _ = self.0.write_all(&frame(kind, flags, id, payload));
    }

    /// A GET's header block for `/` in HPACK: static-table entries
    /// (:method GET, :scheme http, :path /) and :authority literal.
    fn get_block() -> Vec<u8> {
        let mut b = vec![0x82, 0x86, 0x84, 0x41, 0x0c];
        b.extend_from_slice(b"lacquer.test");
        b
    }

    /// Reads one frame: type, flags, stream and payload.
    fn read_frame(&mut self) -> (u8, u8, u32, Vec<u8>) {
        self.next_frame().expect("a frame")
    }

    /// The next frame, or None once the connection has ended.
    fn next_frame(&mut self) -> Option<(u8, u8, u32, Vec<u8>)> {
        let mut h = [0u8; 9];
        self.0.read_exact(&mut h).ok()?;
        let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
        let mut payload = vec![0u8; len];
        self.0.read_exact(&mut payload).ok()?;
        let id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        Some((h[3], h[4], id, payload))
    }

    /// Reads frames until stream `id` ends: its HEADERS payload and its
    /// body.
    fn response(&mut self, id: u32) -> (Vec<u8>, Vec<u8>) {
        let (mut head, mut body) = (Vec::new(), Vec::new());
        loop {
            let (kind, flags, stream, payload) = self.read_frame();
            if kind == 4 && flags & 1 == 0 {
                self.frame(4, 1, 0, &[]);
            }
            if stream != id {
                continue;
            }
            match kind {
                1 => head = payload,
                0 => body.extend_from_slice(&payload),
                3 => panic!("stream {id} reset"),
                _ => {}
            }
            if flags & 1 != 0 {
                return (head, body);
            }
        }
    }

    /// Reads frames until a GOAWAY: its error code (None: the
    /// connection ended without one).
    fn goaway(&mut self) -> Option<u32> {
        let mut all = Vec::new();
        let mut buf = [0u8; 16384];
        loop {
            match self.0.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
            let mut at = 0;
            while all.len() >= at + 9 {
                let len = (usize::from(all[at]) << 16)
                    | (usize::from(all[at + 1]) << 8)
                    | usize::from(all[at + 2]);
                if all.len() < at + 9 + len {
                    break;
                }
                if all[at + 3] == 7 && len >= 8 {
                    let p = &all[at + 9..];
                    return Some(u32::from_be_bytes([p[4], p[5], p[6], p[7]]));
                }
                at += 9 + len;
            }
        }
        None
    }
}

const ENHANCE_YOUR_CALM: u32 = 0xb;

#[test]
fn a_host_that_is_not_the_authority_is_refused() {
    let (origin, lq) = setup(&[]);
    let addr = lq.addr;
    runtime().block_on(async {
        let mut send = connect(addr, None).await;
        let ask = |host: &'static str| {
            http::Request::builder()
                .uri("http://lacquer.test/h")
                .header("host", host)
                .body(())
                .unwrap()
        };
        for (host, want) in [
            ("elsewhere.test", 400),
            ("lacquer.test", 200),
            ("LACQUER.test", 200),
        ] {
            send.clone().ready().await.unwrap();
            let (resp, _) = send.send_request(ask(host), true).unwrap();
            let status = resp.await.unwrap().status().as_u16();
            assert_eq!(status, want, "Host: {host}");
        }
        // The connection goes on after the refusal.
        let (status, _, _) = fetch(&mut send, "GET", "/after", None).await;
        assert_eq!(status, 200);
    });
    assert_eq!(origin.count("/h"), 1);
    // Counters are published once a second.
    assert!(eventually(Duration::from_secs(10), || lq
        .counter("MAIN.client_req_400")
        == 1));
}

#[test]
fn rapid_resets_get_goaway_enhance_your_calm() {
    let (_origin, lq) = setup(&["-p", "h2_rapid_reset_limit=10"]);
    let mut raw = Raw::open(lq.addr);
    for i in 0..20u32 {
        let id = 2 * i + 1;
        raw.frame(1, 0x5, id, &Raw::get_block());
        raw.frame(3, 0, id, &8u32.to_be_bytes());
    }
    assert_eq!(raw.goaway(), Some(ENHANCE_YOUR_CALM));
    assert!(eventually(Duration::from_secs(5), || {
        lq.counter("MAIN.sc_rapid_reset") == 1
    }));
    // Other connections are untouched.
    runtime().block_on(async {
        let mut send = connect(lq.addr, None).await;
        assert_eq!(fetch(&mut send, "GET", "/after", None).await.0, 200);
    });
}

#[test]
fn floods_get_goaway_enhance_your_calm() {
    let (_origin, lq) = setup(&[]);
    // PING after PING.
    let mut raw = Raw::open(lq.addr);
    for _ in 0..200 {
        raw.frame(6, 0, 0, &[0; 8]);
    }
    assert_eq!(raw.goaway(), Some(ENHANCE_YOUR_CALM));
    // A header block in endless CONTINUATION frames.
    let mut raw = Raw::open(lq.addr);
    raw.frame(1, 0x1, 1, &Raw::get_block());
    for _ in 0..200 {
        raw.frame(9, 0, 1, &[0x40, 0x01, b'x', 0x01, b'y']);
    }
    assert_eq!(raw.goaway(), Some(ENHANCE_YOUR_CALM));
    // SETTINGS after SETTINGS.
    let mut raw = Raw::open(lq.addr);
    for _ in 0..100 {
        raw.frame(4, 0, 0, &[]);
    }
    assert_eq!(raw.goaway(), Some(ENHANCE_YOUR_CALM));
    assert!(eventually(Duration::from_secs(5), || {
        lq.counter("MAIN.sc_calm") == 3
    }));
    runtime().block_on(async {
        let mut send = connect(lq.addr, None).await;
        assert_eq!(fetch(&mut send, "GET", "/after", None).await.0, 200);
    });
}

#[test]
fn a_window_that_never_opens_resets_the_stream() {
    let origin = Origin::start(|_| Reply::ok(&"x".repeat(200_000)));
    let lq = Lacquer::start(origin.addr, &["-p", "h2_window_timeout=0.5"]);
    runtime().block_on(async {
        // A stream window of nothing: the head goes, the body cannot.
        let mut send = connect(lq.addr, Some(0)).await;
        let req = http::Request::builder()
            .uri("http://lacquer.test/big")
            .body(())
            .unwrap();
        send.clone().ready().await.unwrap();
        let (resp, _) = send.send_request(req, true).unwrap();
        let resp = resp.await.unwrap();
        assert_eq!(resp.status(), 200);
        let mut body = resp.into_body();
        let started = std::time::Instant::now();
        // Never given window: the stream is reset by the server.
        let got = body.data().await;
        assert!(matches!(got, Some(Err(_))), "{got:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        // A client that reads gets the whole body.
        let mut send = connect(lq.addr, None).await;
        let (status, _, body) = fetch(&mut send, "GET", "/big", None).await;
        assert_eq!((status, body.len()), (200, 200_000));
    });
}

#[test]
fn a_header_list_past_http_req_size_is_refused() {
    let (origin, lq) = setup(&["-p", "http_req_size=4k"]);
    runtime().block_on(async {
        let mut send = connect(lq.addr, None).await;
        let req = http::Request::builder()
            .uri("http://lacquer.test/huge")
            .header("x-big", "b".repeat(8000))
            .body(())
            .unwrap();
        send.clone().ready().await.unwrap();
        let refused = match send.send_request(req, true) {
            Ok((resp, _)) => match resp.await {
                Ok(r) => r.status() == 431 || r.status() == 400,
                Err(_) => true,
            },
            Err(_) => true,
        };
        assert!(refused);
        // The connection, or a new one, still serves.
        let mut send = connect(lq.addr, None).await;
        assert_eq!(fetch(&mut send, "GET", "/fine", None).await.0, 200);
    });
    assert_eq!(origin.count("/huge"), 0);
}

#[test]
fn upgrade_h2c_makes_the_request_stream_one() {
    let (_origin, lq) = setup(&[]);
    let mut tcp = TcpStream::connect(lq.addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp.write_all(
        b"GET /up HTTP/1.1\r\nHost: lacquer.test\r\nConnection: Upgrade, HTTP2-Settings\r\n\
          Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n",
    )
    .unwrap();
    let want = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n";
    let mut got = vec![0u8; want.len()];
    tcp.read_exact(&mut got).unwrap();
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
    // The client's preface and SETTINGS; the answer comes on stream 1.
    let mut raw = Raw(tcp);
    raw.0
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .unwrap();
    raw.frame(4, 0, 0, &[]);
    let (head, body) = raw.response(1);
    assert_eq!(head.first(), Some(&0x88), ":status 200, indexed");
    assert_eq!(String::from_utf8_lossy(&body), "GET /up HTTP/2.0 []");
    // The connection goes on in HTTP/2: stream 3.
    let mut block = vec![0x82, 0x86, 0x44, 0x04];
    block.extend_from_slice(b"/up3");
    block.extend_from_slice(&[0x41, 0x0c]);
    block.extend_from_slice(b"lacquer.test");
    raw.frame(1, 0x5, 3, &block);
    let (head, body) = raw.response(3);
    assert_eq!(head.first(), Some(&0x88));
    assert_eq!(String::from_utf8_lossy(&body), "GET /up3 HTTP/2.0 []");

    // With a body, or without HTTP2-Settings, the answer is HTTP/1.1's.
    let mut c = lq.connect();
    let r = c.request(
        "POST",
        "/p",
        &[
            ("Connection", "Upgrade, HTTP2-Settings"),
            ("Upgrade", "h2c"),
            ("HTTP2-Settings", "AAMAAABkAAQAoAAAAAIAAAAA"),
            ("Content-Length", "0"),
            ("Transfer-Encoding", "chunked"),
        ],
    );
    assert_eq!(r.status, 400, "both framings: refused, not upgraded");
    let mut c = lq.connect();
    let r = c.get(
        "/no-settings",
        &[("Connection", "Upgrade"), ("Upgrade", "h2c")],
    );
    assert_eq!(
        (r.status, r.text()),
        (200, "GET /no-settings HTTP/1.1 []".to_string())
    );
}

#[test]
fn a_reset_stream_gives_up_the_fetch_nobody_else_waits_for() {
    // /alone would be answered long after any wait below; /shared soon.
    let origin = Origin::start(|req| {
        let secs = if req.url == "/alone" { 30 } else { 2 };
        Reply::ok(&format!("slow {}", req.url)).delay(Duration::from_secs(secs))
    });
    let lq = Lacquer::start(origin.addr, &[]);
    let rt = runtime();
    let send = rt.block_on(connect(lq.addr, None));
    // Lets the connection's task run (sending a reset, say).
    let pause =
        |ms: u64| rt.block_on(async { tokio::time::sleep(Duration::from_millis(ms)).await });
    let ask = |url: &str| {
        let req = http::Request::builder()
            .uri(format!("http://lacquer.test{url}"))
            .body(())
            .unwrap();
        send.clone().send_request(req, true).unwrap().0
    };
    // Alone: reset while the backend thinks, the fetch is given up (an
    // answer would take 30 s; a fetch that went on would not fail).
    let resp = ask("/alone");
    pause(300);
    drop(resp);
    pause(50);
    assert!(eventually(Duration::from_secs(5), || lq
        .counter("MAIN.fetch_failed")
        == 1));

    // Another request waits for the same object: the fetch goes on for
    // it, and caches the object.
    let resp = ask("/shared");
    pause(200);
    let addr = lq.addr;
    let other = std::thread::spawn(move || {
        let mut c = crate::harness::Client::connect(addr);
        c.get("/shared", &[("Host", "lacquer.test")]).text()
    });
    pause(200);
    drop(resp);
    pause(50);
    assert_eq!(other.join().unwrap(), "slow /shared");
    assert_eq!(lq.counter("MAIN.fetch_failed"), 1);
    assert_eq!(origin.count("/shared"), 1);
}

#[test]
fn empty_data_floods_get_goaway_enhance_your_calm() {
    let (_origin, lq) = setup(&[]);
    let mut raw = Raw::open(lq.addr);
    // A POST whose body never comes, only empty DATA frames.
    let mut block = vec![0x83, 0x86, 0x84, 0x41, 0x0c];
    block.extend_from_slice(b"lacquer.test");
    let mut all = frame(1, 0x4, 1, &block);
    for _ in 0..400 {
        all.extend(frame(0, 0, 1, &[]));
    }
    let _ = raw.0.write_all(&all);
    assert_eq!(raw.goaway(), Some(ENHANCE_YOUR_CALM));
    assert!(eventually(Duration::from_secs(5), || {
        lq.counter("MAIN.sc_calm") == 1
    }));
}

#[test]
fn streams_the_server_must_reset_are_bounded_too() {
    // MadeYouReset: frames that are each a stream error, so that the
    // server resets the streams the client opened: a POST announcing one
    // byte of body and sending five (a malformed request, RFC 9113 8.1.1).
    let (origin, lq) = setup(&["-p", "h2_rapid_reset_limit=10"]);
    let mut raw = Raw::open(lq.addr);
    let mut block = vec![0x83, 0x86, 0x84, 0x41, 0x0c];
    block.extend_from_slice(b"lacquer.test");
    block.extend_from_slice(&[0x0f, 0x0d, 0x01, b'1']);
    let mut all = Vec::new();
    for i in 0..40u32 {
        let id = 2 * i + 1;
        all.extend(frame(1, 0x4, id, &block));
        all.extend(frame(0, 0x1, id, b"12345"));
    }
    let _ = raw.0.write_all(&all);
    assert_eq!(raw.goaway(), Some(ENHANCE_YOUR_CALM));
    assert!(
        origin.count("/") <= 10,
        "{} reached the backend",
        origin.count("/")
    );
    runtime().block_on(async {
        let mut send = connect(lq.addr, None).await;
        assert_eq!(fetch(&mut send, "GET", "/after", None).await.0, 200);
    });
}

#[test]
fn an_hpack_bomb_is_refused_without_its_cost() {
    // One 4000-byte field put in the decoder's table, then named again
    // by a single byte 3000 times: 12 MB of fields from 7 KB.
    let (origin, mut lq) = setup(&[]);
    let mut raw = Raw::open(lq.addr);
    let mut block = Raw::get_block();
    block.extend_from_slice(&[0x40, 6]);
    block.extend_from_slice(b"x-bomb");
    block.extend_from_slice(&[0x7f, 0xa1, 0x1e]);
    block.extend(std::iter::repeat_n(b'b', 4000));
    block.extend(std::iter::repeat_n(0xbe, 3000));
    raw.frame(1, 0x5, 1, &block);
    // The stream is refused: a 431, a reset or GOAWAY.
    let mut refused = false;
    while let Some((kind, _, id, payload)) = raw.next_frame() {
        match (kind, id) {
            (3, 1) | (7, _) => refused = true,
            (1, 1) => refused = payload.first() != Some(&0x88),
            _ => continue,
        }
        break;
    }
    assert!(refused, "the bomb was served");
    assert_eq!(origin.count("/"), 0, "nothing reached the backend");
    assert!(lq.alive());
    runtime().block_on(async {
        let mut send = connect(lq.addr, None).await;
        assert_eq!(fetch(&mut send, "GET", "/after", None).await.0, 200);
    });
}
