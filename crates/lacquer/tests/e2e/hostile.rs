//! Hostile input that costs memory rather than correctness: a small gzip
//! object that inflates a thousandfold, and a large uncacheable response
//! whose client reads slowly or leaves. Memory per delivery stays bounded
//! and the backend is read no faster than the client takes the body.
//! (The byte-level cases are VTC files in `tests/hostile/`.)

use crate::harness::{eventually, Lacquer};
use crate::origin::{Origin, Reply};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const MIB: u64 = 1 << 20;

/// The peak resident memory of a process so far, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib * 1024
}

/// `plain` zero bytes, gzip'd: a body a thousand times smaller than what
/// it inflates to.
fn gzip_bomb(plain: usize) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(&vec![0u8; plain]).unwrap();
    z.finish().unwrap()
}

#[test]
fn a_decompression_bomb_is_inflated_in_bounded_slices() {
    let plain = 64 * MIB as usize;
    let bomb = gzip_bomb(plain);
    assert!(bomb.len() < 128 * 1024, "{} bytes", bomb.len());
    let origin = Origin::start(move |_| {
        Reply::ok("")
            .header("Content-Encoding", "gzip")
            .body_bytes(bomb.clone())
    });
    let lq = Lacquer::start(origin.addr, &[]);
    // Stored gzip'd, as it came.
    let mut c = lq.connect();
    let r = c.get("/bomb", &[("Accept-Encoding", "gzip")]);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    let before = peak_rss(lq.pid());
    // A client that does not take gzip gets it inflated, all of it...
    let mut c = lq.connect();
    let r = c.get("/bomb", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), plain);
    assert!(r.body.iter().all(|&b| b == 0));
    // ...without the daemon ever holding it whole.
    let grew = peak_rss(lq.pid()).saturating_sub(before);
    assert!(grew < 24 * MIB, "peak memory grew by {} MiB", grew / MIB);
}

#[test]
fn a_filtered_pass_holds_a_slice_not_the_body() {
    // 64 MiB that gzip to under 100 KB, inflated by do_gunzip into a
    // private object that a slow client reads.
    let plain = 64 * MIB as usize;
    let bomb = gzip_bomb(plain);
    let origin = Origin::start(move |_| {
        Reply::ok("")
            .header("Content-Encoding", "gzip")
            .body_bytes(bomb.clone())
    });
    let vars = [
        ("origin_host", origin.addr.ip().to_string()),
        ("origin_port", origin.addr.port().to_string()),
    ];
    let lq = Lacquer::with_vcl("filtered_pass.vcl", &vars, &[]);
    let before = peak_rss(lq.pid());
    let mut c = lq.connect();
    c.send(b"GET /bomb HTTP/1.1\r\nHost: x\r\n\r\n");
    let head = c.read_head();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-encoding"), None);
    let mut got = 0usize;
    while got < plain {
        let piece = c.read_some(256 * 1024);
        assert!(!piece.is_empty() || got > 0, "the body comes");
        if piece.is_empty() {
            break;
        }
        got += piece.len();
        if got < 4 * MIB as usize {
            // Slow at first: the fill must wait for the reader.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert!(got >= plain, "read {got} of {plain}");
    let grew = peak_rss(lq.pid()).saturating_sub(before);
    assert!(grew < 24 * MIB, "peak memory grew by {} MiB", grew / MIB);
}

/// An origin that streams `size` bytes of an uncacheable response to each
/// request and counts what it managed to write.
struct Streamer {
    addr: SocketAddr,
    written: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
}

fn streamer(size: u64) -> Streamer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let written = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let (w, d) = (written.clone(), done.clone());
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
            head.push(byte[0]);
        }
        let reply =
            format!("HTTP/1.1 200 OK\r\nCache-Control: private\r\nContent-Length: {size}\r\n\r\n");
        let chunk = vec![b'x'; 64 * 1024];
        if s.write_all(reply.as_bytes()).is_ok() {
            while w.load(Ordering::SeqCst) < size {
                if s.write_all(&chunk).is_err() {
                    break;
                }
                w.fetch_add(chunk.len() as u64, Ordering::SeqCst);
            }
        }
        d.store(true, Ordering::SeqCst);
    });
    Streamer {
        addr,
        written,
        done,
    }
}

impl Streamer {
    /// Waits for the origin to stop writing, and checks it stopped long
    /// before the end of its body.
    fn stops_early(&self) {
        assert!(eventually(Duration::from_secs(20), || self
            .done
            .load(Ordering::SeqCst)));
        let sent = self.written.load(Ordering::SeqCst);
        assert!(sent < 32 * MIB, "the origin sent {} MiB", sent / MIB);
    }
}

/// Sends a request and reads the first MiB of its 200 response.
fn read_a_mib(lq: &Lacquer, request: &[u8]) -> crate::harness::Client {
    let mut c = lq.connect();
    c.send(request);
    assert_eq!(c.read_head().status, 200);
    let mut got = 0;
    while got < MIB as usize {
        got += c.read_some(64 * 1024).len();
    }
    c
}

#[test]
fn an_uncacheable_fetch_follows_its_client_and_stops_when_it_leaves() {
    let size = 100 * MIB;
    let origin = streamer(size);
    let lq = Lacquer::start(origin.addr, &[]);
    let c = read_a_mib(&lq, b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n");
    // A slow client: the origin is read about transit_buffer ahead of it
    // (plus what sockets hold), not to the end.
    let mut last = u64::MAX;
    assert!(eventually(Duration::from_secs(20), || {
        std::thread::sleep(Duration::from_millis(300));
        let now = origin.written.load(Ordering::SeqCst);
        std::mem::replace(&mut last, now) == now
    }));
    let held = origin.written.load(Ordering::SeqCst);
    assert!(held < 24 * MIB, "the origin sent {} MiB ahead", held / MIB);
    // The client leaves: the fetch is abandoned and its connection closed.
    drop(c);
    origin.stops_early();
}

#[test]
fn a_pass_stops_reading_when_its_client_leaves() {
    let origin = streamer(100 * MIB);
    let lq = Lacquer::start(origin.addr, &[]);
    let c = read_a_mib(
        &lq,
        b"POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx",
    );
    drop(c);
    origin.stops_early();
}

#[test]
fn hostile_requests_leave_the_cache_and_the_daemon_alone() {
    let origin = Origin::start(|seen| Reply::ok(&format!("page {}", seen.url)));
    let mut lq = Lacquer::start(origin.addr, &[]);
    let first = lq.get("/victim");
    assert_eq!(first.text(), "page /victim");
    let attacks: &[&[u8]] = &[
        b"POST /p HTTP/1.1\r\nHost: x\r\nConnection: Content-Length\r\nContent-Length: 33\r\n\r\nGET /victim HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /victim HTTP/1.1\r\nHost: x\r\nConnection: Host\r\n\r\n",
        b"POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1f\nGET /victim HTTP/1.1\r\nHost: x\r\n\r\n0\r\n\r\n",
        b"GET /victim HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
        b"GET /victim HTTP/1.1\r\nHost: x\r\nX: a\r\n folded\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        b"GET /\x00 HTTP/1.1\r\n\r\n",
    ];
    for raw in attacks {
        let mut c = lq.connect();
        c.send(raw);
        let r = c.read_response(false);
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(raw));
        assert!(c.closed(), "closed after {}", String::from_utf8_lossy(raw));
    }
    assert!(lq.alive());
    // The cached page is still the one it was, and the origin never saw a
    // smuggled request.
    let again = lq.get("/victim");
    assert_eq!(again.text(), "page /victim");
    assert_eq!(again.xids().len(), 2, "a hit");
    assert_eq!(origin.count("/victim"), 1);
}
