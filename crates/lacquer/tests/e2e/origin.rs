//! A real origin server for the end-to-end tests: an HTTP/1.1 server on a
//! loopback socket with its own small codec (the product's is never used
//! to judge the product), answering through a handler closure and
//! recording every request it receives.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// A request as the origin saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Which TCP connection (numbered from 1) carried it.
    pub conn: usize,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// How the body goes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Length,
    Chunked,
    Close,
}

/// What the origin answers.
#[derive(Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub framing: Framing,
    pub delay: Duration,
    /// Send the head and this many body bytes, then wait for a permit.
    pub gate: Option<(usize, Arc<Semaphore>)>,
    /// Send these bytes instead of a response, then close.
    pub raw: Option<Vec<u8>>,
    /// Close the connection without answering.
    pub drop_connection: bool,
}

impl Reply {
    pub fn ok(body: &str) -> Reply {
        Reply {
            status: 200,
            headers: Vec::new(),
            body: body.as_bytes().to_vec(),
            framing: Framing::Length,
            delay: Duration::ZERO,
            gate: None,
            raw: None,
            drop_connection: false,
        }
    }

    pub fn status(mut self, status: u16) -> Reply {
        self.status = status;
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn framing(mut self, f: Framing) -> Reply {
        self.framing = f;
        self
    }

    pub fn delay(mut self, d: Duration) -> Reply {
        self.delay = d;
        self
    }

    pub fn body_bytes(mut self, body: Vec<u8>) -> Reply {
        self.body = body;
        self
    }
}

type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// Requests being answered now, and the most at once.
#[derive(Default)]
struct Flight {
    now: AtomicUsize,
    max: AtomicUsize,
    /// Connections the other side has closed.
    closed: AtomicUsize,
}

/// A running origin.
pub struct Origin {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    conns: Arc<AtomicUsize>,
    flight: Arc<Flight>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Origin {
    pub fn start(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Origin {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let conns = Arc::new(AtomicUsize::new(0));
        let flight = Arc::new(Flight::default());
        let handler: Handler = Arc::new(handler);
        {
            let seen = seen.clone();
            let conns = conns.clone();
            let flight = flight.clone();
            runtime.spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let id = conns.fetch_add(1, Ordering::SeqCst) + 1;
                    tokio::spawn(serve(
                        stream,
                        id,
                        handler.clone(),
                        seen.clone(),
                        flight.clone(),
                    ));
                }
            });
        }
        Origin {
            addr,
            seen,
            conns,
            flight,
            runtime: Some(runtime),
        }
    }

    /// Every request received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// How many requests for this URL arrived.
    pub fn count(&self, url: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.url == url)
            .count()
    }

    /// The most requests that were being answered at the same time.
    pub fn max_in_flight(&self) -> usize {
        self.flight.max.load(Ordering::SeqCst)
    }

    /// How many connections have ended.
    pub fn closed_connections(&self) -> usize {
        self.flight.closed.load(Ordering::SeqCst)
    }

    /// How many TCP connections were accepted.
    pub fn connections(&self) -> usize {
        self.conns.load(Ordering::SeqCst)
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

async fn read_until_head(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<usize> {
    loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Some(pos + 4);
        }
        let mut tmp = [0u8; 8192];
        let n = stream.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>, want: usize) -> Option<()> {
    while buf.len() < want {
        let mut tmp = [0u8; 8192];
        let n = stream.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    Some(())
}

async fn read_chunked(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(p) = buf.windows(2).position(|w| w == b"\r\n") {
                break p;
            }
            let len = buf.len();
            fill(stream, buf, len + 1).await?;
        };
        let line = String::from_utf8_lossy(&buf[..line_end]).to_string();
        buf.drain(..line_end + 2);
        let size = usize::from_str_radix(line.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            fill(stream, buf, 2).await?;
            buf.drain(..2);
            return Some(body);
        }
        fill(stream, buf, size + 2).await?;
        body.extend_from_slice(&buf[..size]);
        buf.drain(..size + 2);
    }
}

async fn serve(
    stream: TcpStream,
    id: usize,
    handler: Handler,
    seen: Arc<Mutex<Vec<Seen>>>,
    flight: Arc<Flight>,
) {
    serve_conn(stream, id, handler, seen, flight.clone()).await;
    flight.closed.fetch_add(1, Ordering::SeqCst);
}

struct InFlight(Arc<Flight>);

impl InFlight {
    fn enter(flight: &Arc<Flight>) -> InFlight {
        let now = flight.now.fetch_add(1, Ordering::SeqCst) + 1;
        flight.max.fetch_max(now, Ordering::SeqCst);
        InFlight(flight.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn serve_conn(
    mut stream: TcpStream,
    id: usize,
    handler: Handler,
    seen: Arc<Mutex<Vec<Seen>>>,
    flight: Arc<Flight>,
) {
    let mut buf = Vec::new();
    loop {
        let Some(end) = read_until_head(&mut stream, &mut buf).await else {
            return;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end);
        let mut lines = head.split("\r\n");
        let mut first = lines.next().unwrap_or("").split(' ');
        let method = first.next().unwrap_or("").to_string();
        let url = first.next().unwrap_or("").to_string();
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
            .collect();
        let get = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let body = if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            match read_chunked(&mut stream, &mut buf).await {
                Some(b) => b,
                None => return,
            }
        } else if let Some(n) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
            if fill(&mut stream, &mut buf, n).await.is_none() {
                return;
            }
            buf.drain(..n).collect()
        } else {
            Vec::new()
        };
        let client_closes = get("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let req = Seen {
            method: method.clone(),
            url,
            headers,
            body,
            conn: id,
        };
        let _in_flight = InFlight::enter(&flight);
        seen.lock().unwrap().push(req.clone());
        let reply = handler(&req);
        if !reply.delay.is_zero() {
            tokio::time::sleep(reply.delay).await;
        }
        if reply.drop_connection {
            return;
        }
        if let Some(raw) = &reply.raw {
            let _ = stream.write_all(raw).await;
            return;
        }
        let mut out = format!("HTTP/1.1 {} Whatever\r\n", reply.status).into_bytes();
        for (n, v) in &reply.headers {
            out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
        }
        let bodyless = method == "HEAD" || reply.status == 204 || reply.status == 304;
        match reply.framing {
            Framing::Length if !(reply.status == 204 || reply.status == 304) => out
                .extend_from_slice(format!("Content-Length: {}\r\n", reply.body.len()).as_bytes()),
            Framing::Chunked if !bodyless => {
                out.extend_from_slice(b"Transfer-Encoding: chunked\r\n")
            }
            Framing::Close => out.extend_from_slice(b"Connection: close\r\n"),
            _ => {}
        }
        out.extend_from_slice(b"\r\n");
        let body = if bodyless {
            Vec::new()
        } else {
            reply.body.clone()
        };
        let encode = |part: &[u8]| -> Vec<u8> {
            if reply.framing == Framing::Chunked && !part.is_empty() {
                let mut v = format!("{:x}\r\n", part.len()).into_bytes();
                v.extend_from_slice(part);
                v.extend_from_slice(b"\r\n");
                v
            } else {
                part.to_vec()
            }
        };
        let split = reply
            .gate
            .as_ref()
            .map_or(body.len(), |(n, _)| (*n).min(body.len()));
        out.extend_from_slice(&encode(&body[..split]));
        if stream.write_all(&out).await.is_err() {
            return;
        }
        if let Some((_, gate)) = &reply.gate {
            let _ = gate.acquire().await.map(|p| p.forget());
        }
        let mut rest = encode(&body[split..]);
        if reply.framing == Framing::Chunked && !bodyless {
            rest.extend_from_slice(b"0\r\n\r\n");
        }
        if stream.write_all(&rest).await.is_err() {
            return;
        }
        // A client that asked to close gets its close, as any server does.
        if reply.framing == Framing::Close || client_closes {
            return;
        }
    }
}
