//! The optional metrics endpoint (`--metrics host:port`): `GET /metrics`
//! answers with every counter in Prometheus's text format, from the same
//! tables and values the counters segment is published from, so no
//! exporter is needed. It runs whether or not the cache is started, keeps
//! a connection for further scrapes while the client does, and treats a
//! malformed request like the client side does: a 4xx and a close.

use crate::Shared;
use bytes::BytesMut;
use lacquer_core::params::Params;
use lacquer_http::{parse_request, Framing};
use lacquer_shm::counters::Snapshot;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Every counter now: `MAIN`, then the daemon's sections.
pub(crate) fn snapshot(sh: &Shared) -> Snapshot {
    let mut snap = Snapshot::main();
    crate::daemon::add_sections(sh, &mut snap);
    snap
}

/// Accepts scrapes until the process ends.
pub(crate) async fn serve_metrics(sh: Arc<Shared>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(scrape(sh.clone(), stream));
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    }
}

async fn scrape(sh: Arc<Shared>, mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut buf = BytesMut::with_capacity(1024);
    loop {
        let idle = Params::duration(sh.params.timeout_idle());
        let limits = sh.request_limits();
        let head = loop {
            match parse_request(&mut buf, &limits) {
                Ok(Some(head)) => break head,
                Ok(None) => {}
                Err(e) => {
                    let reason = format!("{}\n", e.reason());
                    let _ = respond(&mut stream, e.status(), reason.as_bytes(), false).await;
                    return;
                }
            }
            match tokio::time::timeout(idle, stream.read_buf(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => {}
                _ => return,
            }
        };
        // A request with a body is answered, then the connection closed
        // rather than the body read.
        let keep = head.keep_alive() && head.framing == Framing::None;
        let path = head.url.split(|&b| b == b'?').next().unwrap_or(b"");
        let (status, body) = match (&head.method[..], path) {
            (b"GET" | b"HEAD", b"/metrics") => (
                200,
                lacquer_shm::prometheus::render(&snapshot(&sh)).into_bytes(),
            ),
            (b"GET" | b"HEAD", _) => (404, b"Only /metrics is served here.\n".to_vec()),
            _ => (405, b"Only GET and HEAD are allowed.\n".to_vec()),
        };
        let body = if &head.method[..] == b"HEAD" {
            &body[..0]
        } else {
            &body[..]
        };
        if respond(&mut stream, status, body, keep).await.is_err() || !keep {
            return;
        }
    }
}

async fn respond(
    stream: &mut TcpStream,
    status: u16,
    body: &[u8],
    keep: bool,
) -> std::io::Result<()> {
    let content_type = if status == 200 {
        lacquer_shm::prometheus::CONTENT_TYPE
    } else {
        "text/plain; charset=utf-8"
    };
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
        lacquer_http::reason_phrase(status),
        body.len(),
        if keep { "keep-alive" } else { "close" }
    );
    let mut out = Vec::with_capacity(head.len() + body.len());
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(body);
    stream.write_all(&out).await
}
