//! An HTTP/2 origin server for the end-to-end tests: the h2 crate's
//! server on a loopback socket, by prior knowledge (it speaks nothing
//! else, so a request it answers came over HTTP/2). It answers by path,
//! and counts connections, streams and streams in flight.

use bytes::Bytes;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A stream as the origin saw it.
#[derive(Debug, Clone)]
pub struct Stream {
    pub method: String,
    pub path: String,
    pub authority: String,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

#[derive(Default)]
struct State {
    connections: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    refused: AtomicBool,
    sick: AtomicBool,
    seen: Mutex<Vec<Stream>>,
}

pub struct H2Origin {
    pub addr: SocketAddr,
    state: Arc<State>,
}

impl H2Origin {
    /// Answers, by path:
    /// - `/slow/…`: after 300 ms;
    /// - `/trailers`: a body of two DATA frames without a length, then
    ///   trailers;
    /// - `/big`: 1 MiB without a length, in 16 KiB frames;
    /// - `/echo`: the request body;
    /// - `/refuse-once`: REFUSED_STREAM the first time;
    /// - `/goaway`: answers, and sends GOAWAY on its connection;
    /// - `/health`: 200, or 500 once [`H2Origin::set_sick`];
    /// - `/duplex`: a head at once, then each piece of the request body
    ///   echoed as it comes, then trailers;
    /// - anything else: `h2 <path>` with a Content-Length.
    pub fn start() -> H2Origin {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        let shared = state.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        continue;
                    };
                    let n = shared.connections.fetch_add(1, Ordering::SeqCst) + 1;
                    tokio::spawn(connection(tcp, n, shared.clone()));
                }
            });
        });
        H2Origin { addr, state }
    }

    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    pub fn seen(&self) -> Vec<Stream> {
        self.state.seen.lock().unwrap().clone()
    }

    pub fn count(&self, path: &str) -> usize {
        self.seen().iter().filter(|s| s.path == path).count()
    }

    pub fn set_sick(&self, sick: bool) {
        self.state.sick.store(sick, Ordering::SeqCst);
    }
}

async fn connection(tcp: tokio::net::TcpStream, n: usize, state: Arc<State>) {
    let Ok(mut conn) = h2::server::Builder::new()
        .max_concurrent_streams(100)
        .handshake::<_, Bytes>(tcp)
        .await
    else {
        return;
    };
    while let Some(Ok((req, respond))) = conn.accept().await {
        if req.uri().path() == "/goaway" {
            // The stream just taken is answered; no new one is.
            conn.graceful_shutdown();
        }
        tokio::spawn(stream(req, respond, n, state.clone()));
    }
}

async fn stream(
    req: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    conn: usize,
    state: Arc<State>,
) {
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let (parts, mut recv) = req.into_parts();
    if parts.uri.path() == "/duplex" {
        // Answers before the request has ended, echoing each piece of
        // its body as it comes, then trailers (as a gRPC server streams).
        let head = http::Response::builder().status(200).body(()).unwrap();
        if let Ok(mut send) = respond.send_response(head, false) {
            while let Some(Ok(d)) = recv.data().await {
                let _ = recv.flow_control().release_capacity(d.len());
                if d.is_empty() {
                    // (An empty DATA frame that only ends the stream.)
                    continue;
                }
                let mut echo = b"echo:".to_vec();
                echo.extend_from_slice(&d);
                let _ = send.send_data(Bytes::from(echo), false);
            }
            let mut trailers = http::HeaderMap::new();
            trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
            let _ = send.send_trailers(trailers);
        }
        state.in_flight.fetch_sub(1, Ordering::SeqCst);
        return;
    }
    let mut body = Vec::new();
    while let Some(Ok(d)) = recv.data().await {
        let _ = recv.flow_control().release_capacity(d.len());
        body.extend_from_slice(&d);
    }
    let path = parts.uri.path().to_string();
    state.seen.lock().unwrap().push(Stream {
        method: parts.method.to_string(),
        path: path.clone(),
        authority: parts
            .uri
            .authority()
            .map(|a| a.to_string())
            .unwrap_or_default(),
        headers: parts.headers.clone(),
        body: body.clone(),
    });
    if path.starts_with("/slow/") {
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let head = |status: u16, length: Option<usize>| {
        let mut b = http::Response::builder()
            .status(status)
            .header("cache-control", "max-age=60")
            .header("x-conn", conn.to_string());
        if let Some(len) = length {
            b = b.header("content-length", len.to_string());
        }
        b.body(()).unwrap()
    };
    let sick = state.sick.load(Ordering::SeqCst);
    match path.as_str() {
        "/refuse-once" if !state.refused.swap(true, Ordering::SeqCst) => {
            respond.send_reset(h2::Reason::REFUSED_STREAM);
        }
        "/trailers" => {
            if let Ok(mut send) = respond.send_response(head(200, None), false) {
                let _ = send.send_data(Bytes::from_static(b"part one, "), false);
                let _ = send.send_data(Bytes::from_static(b"part two"), false);
                let mut trailers = http::HeaderMap::new();
                trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                let _ = send.send_trailers(trailers);
            }
        }
        "/big" => {
            if let Ok(mut send) = respond.send_response(head(200, None), false) {
                for i in 0..64u8 {
                    send.reserve_capacity(16 * 1024);
                    let piece = Bytes::from(vec![b'a' + i % 26; 16 * 1024]);
                    if send.send_data(piece, i == 63).is_err() {
                        break;
                    }
                }
            }
        }
        "/echo" => {
            if let Ok(mut send) =
                respond.send_response(head(200, Some(body.len())), body.is_empty())
            {
                if !body.is_empty() {
                    let _ = send.send_data(Bytes::from(body), true);
                }
            }
        }
        _ => {
            let status = if path == "/health" && sick { 500 } else { 200 };
            let text = Bytes::from(format!("h2 {path}"));
            if let Ok(mut send) = respond.send_response(head(status, Some(text.len())), false) {
                let _ = send.send_data(text, true);
            }
        }
    }
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
}
