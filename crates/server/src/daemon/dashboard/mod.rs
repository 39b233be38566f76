//! The live dashboard (`--dashboard host:port`) and the metrics endpoint
//! (`--metrics host:port`), one small HTTP/1.1 server for both. The
//! dashboard's listener serves:
//!
//! - `/`: one page, everything it needs inline (no request leaves for
//!   anywhere else), which draws what `/events` sends;
//! - `/events`: server-sent events, one snapshot a second
//!   ([`snapshot`]), the last five minutes of them first, so a new page
//!   draws its charts at once;
//! - `/log?q=QUERY`: server-sent events, each a transaction that the VSL
//!   query matches, as `lacquer log -g request` prints it ([`logwatch`]);
//! - `/metrics`: the counters in Prometheus's text format.
//!
//! It is read-only unless the daemon was started with
//! `--dashboard-secret`: then `/challenge` and `POST /action` run a few
//! management commands for a page that proves it knows the secret
//! ([`actions`]). A metrics listener serves `/metrics` alone. Malformed requests get a 4xx and a close, as
//! on the client side, and the streams open at once are bounded.

pub(crate) mod actions;
pub(crate) mod logwatch;
pub(crate) mod snapshot;

use crate::Shared;
use actions::Actions;
use bytes::BytesMut;
use lacquer_core::params::Params;
use lacquer_http::{parse_request, Framing};
use logwatch::LogWatch;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;

/// Snapshots kept for a new page: five minutes.
const HISTORY: usize = 300;
/// Event streams open at once, over all pages.
const MAX_STREAMS: usize = 64;
/// URLs ranked in a snapshot.
const TOP_ROWS: usize = 10;
/// A stream with nothing to say sends a comment this often, so that a
/// page that left is noticed.
const HEARTBEAT: Duration = Duration::from_secs(15);
/// How long a page may take to read what a stream sends it before the
/// stream is closed (a page that stopped reading gives its place back).
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest action request read.
const MAX_ACTION: u64 = 4096;

/// The page.
const PAGE: &str = include_str!("page.html");

/// What the dashboard's connections share: the snapshots and the log.
pub(crate) struct Board {
    log: Arc<LogWatch>,
    history: Mutex<VecDeque<(f64, Arc<str>)>>,
    tx: broadcast::Sender<(f64, Arc<str>)>,
    streams: AtomicUsize,
    /// With `--dashboard-secret`: what the page may change.
    actions: Option<Actions>,
}

/// Starts the dashboard: the log reader, the sampler, and the listeners.
pub(crate) fn spawn_boards(
    sh: Arc<Shared>,
    workdir: std::path::PathBuf,
    listeners: Vec<TcpListener>,
    actions: Option<Actions>,
) -> Result<(), String> {
    let (tx, _) = broadcast::channel(16);
    let board = Arc::new(Board {
        log: LogWatch::open(workdir)?,
        history: Mutex::new(VecDeque::with_capacity(HISTORY)),
        tx,
        streams: AtomicUsize::new(0),
        actions,
    });
    tokio::spawn(sample(sh.clone(), board.clone()));
    for l in listeners {
        tokio::spawn(accept_connections(sh.clone(), l, Some(board.clone())));
    }
    Ok(())
}

/// Takes a snapshot every second.
async fn sample(sh: Arc<Shared>, board: Arc<Board>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        let now = lacquer_core::time::now();
        let log = board.log.sample(TOP_ROWS);
        let json: Arc<str> = snapshot::build(&sh, now, &log).into();
        {
            let mut history = board.history.lock().unwrap_or_else(|p| p.into_inner());
            if history.len() == HISTORY {
                history.pop_front();
            }
            history.push_back((now, json.clone()));
        }
        let _ = board.tx.send((now, json));
    }
}

/// Accepts connections until the process ends: the dashboard's routes
/// with a board, `/metrics` alone without.
pub(crate) async fn accept_connections(
    sh: Arc<Shared>,
    listener: TcpListener,
    board: Option<Arc<Board>>,
) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(connection(sh.clone(), stream, board.clone()));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// What a request asked for.
enum Answer {
    Body(u16, &'static str, Vec<u8>),
    Events,
    Log(Option<lacquer_shm::query::Query>),
}

fn text(status: u16, msg: &str) -> Answer {
    Answer::Body(status, "text/plain; charset=utf-8", msg.as_bytes().to_vec())
}

fn route(sh: &Shared, board: Option<&Board>, method: &[u8], target: &[u8]) -> Answer {
    let (path, query) = match target.iter().position(|&b| b == b'?') {
        Some(i) => (&target[..i], &target[i + 1..]),
        None => (target, &b""[..]),
    };
    if !matches!(method, b"GET" | b"HEAD") {
        return text(405, "Only GET and HEAD are allowed.\n");
    }
    if path == b"/metrics" {
        let body = lacquer_shm::prometheus::render(&crate::daemon::metrics::snapshot(sh));
        return Answer::Body(
            200,
            lacquer_shm::prometheus::CONTENT_TYPE,
            body.into_bytes(),
        );
    }
    let Some(board) = board else {
        return text(404, "Only /metrics is served here.\n");
    };
    match path {
        b"/" => Answer::Body(200, "text/html; charset=utf-8", page(board)),
        b"/events" => Answer::Events,
        b"/challenge" => match board.actions.as_ref().map(Actions::challenge) {
            Some(Some(c)) => text(200, &c),
            Some(None) => text(503, "No random bytes for a challenge.\n"),
            None => text(
                404,
                "Actions are off: start with --dashboard-secret FILE.\n",
            ),
        },
        b"/log" => {
            let q = form_value(query, b"q").unwrap_or_default();
            let q = String::from_utf8_lossy(&q);
            if q.trim().is_empty() {
                return Answer::Log(None);
            }
            match lacquer_shm::query::Query::parse(&q) {
                Ok(q) => Answer::Log(Some(q)),
                Err(e) => text(400, &format!("Query error: {e}\n")),
            }
        }
        _ => text(404, "Not found.\n"),
    }
}

/// The page, with the newest snapshot in it, so that it draws at once
/// (`/events` brings the history and what follows). A `<` in the JSON
/// (a URL a client sent, in the top list) is written as `\u003c`, so
/// nothing in it can end the script.
fn page(board: &Board) -> Vec<u8> {
    let newest = {
        let history = board.history.lock().unwrap_or_else(|p| p.into_inner());
        history.back().map(|(_, json)| json.clone())
    };
    let first = newest.map_or("null".to_string(), |json| json.replace('<', "\\u003c"));
    let actions = if board.actions.is_some() {
        "true"
    } else {
        "false"
    };
    PAGE.replacen("/*FIRST*/null", &first, 1)
        .replacen("/*ACTIONS*/false", actions, 1)
        .into_bytes()
}

/// The value of `name` in a query string, percent-decoded.
fn form_value(query: &[u8], name: &[u8]) -> Option<Vec<u8>> {
    let pair = query
        .split(|&b| b == b'&')
        .find(|p| p.starts_with(name) && p.get(name.len()) == Some(&b'='))?;
    let raw = &pair[name.len() + 1..];
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match raw[i] {
            b'+' => out.push(b' '),
            b'%' => match (
                raw.get(i + 1).and_then(|&b| hex(b)),
                raw.get(i + 2).and_then(|&b| hex(b)),
            ) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    Some(out)
}

async fn connection(sh: Arc<Shared>, mut stream: TcpStream, board: Option<Arc<Board>>) {
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
                    let answer = text(e.status(), &reason);
                    let _ = respond(&mut stream, answer, false, false).await;
                    return;
                }
            }
            match tokio::time::timeout(idle, stream.read_buf(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => {}
                _ => return,
            }
        };
        let is_head = &head.method[..] == b"HEAD";
        let path = head.url.split(|&b| b == b'?').next().unwrap_or_default();
        let action = &head.method[..] == b"POST" && path == b"/action";
        if let (true, Some(acts)) = (action, board.as_ref().and_then(|b| b.actions.as_ref())) {
            let keep = head.keep_alive();
            let answer = match head.framing {
                Framing::Length(n) if n <= MAX_ACTION => {
                    match read_body(&mut stream, &mut buf, n as usize, idle).await {
                        Some(body) => act(acts, &body),
                        None => return,
                    }
                }
                Framing::None => act(acts, b""),
                _ => text(413, "An action is a small form with a Content-Length.\n"),
            };
            let keep = keep && matches!(head.framing, Framing::Length(n) if n <= MAX_ACTION);
            if respond(&mut stream, answer, keep, false).await.is_err() || !keep {
                return;
            }
            continue;
        }
        // A request with a body is answered, then the connection closed
        // rather than the body read.
        let keep = head.keep_alive() && head.framing == Framing::None;
        let answer = route(&sh, board.as_deref(), &head.method, &head.url);
        match answer {
            Answer::Body(..) => {
                if respond(&mut stream, answer, keep, is_head).await.is_err() || !keep {
                    return;
                }
            }
            Answer::Events | Answer::Log(_) => {
                let Some(board) = &board else { return };
                let Some(_place) = StreamPlace::take(&board.streams) else {
                    let busy = text(503, "Too many dashboard streams open.\n");
                    let _ = respond(&mut stream, busy, false, is_head).await;
                    return;
                };
                if !is_head {
                    let _ = match answer {
                        Answer::Log(q) => log_stream(&mut stream, board, q).await,
                        _ => events(&mut stream, board).await,
                    };
                } else {
                    let _ = send(&mut stream, &stream_head()).await;
                }
                return;
            }
        }
    }
}

/// One of the [`MAX_STREAMS`] places, given back when dropped however
/// the stream ends.
struct StreamPlace<'a>(&'a AtomicUsize);

impl<'a> StreamPlace<'a> {
    fn take(open: &'a AtomicUsize) -> Option<StreamPlace<'a>> {
        if open.fetch_add(1, Ordering::Relaxed) >= MAX_STREAMS {
            open.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(StreamPlace(open))
    }
}

impl Drop for StreamPlace<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Reads a body of `n` bytes (some may be in `buf` already).
async fn read_body(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    n: usize,
    idle: Duration,
) -> Option<Vec<u8>> {
    while buf.len() < n {
        match tokio::time::timeout(idle, stream.read_buf(buf)).await {
            Ok(Ok(got)) if got > 0 => {}
            _ => return None,
        }
    }
    Some(buf.split_to(n).to_vec())
}

/// Runs an action from its form (`challenge`, `response`, `command`).
fn act(actions: &Actions, form: &[u8]) -> Answer {
    let field = |name: &[u8]| {
        let v = form_value(form, name).unwrap_or_default();
        String::from_utf8_lossy(&v).into_owned()
    };
    match actions.perform(
        &field(b"challenge"),
        &field(b"response"),
        &field(b"command"),
    ) {
        actions::Outcome::Ran(status, text) => Answer::Body(
            200,
            "text/plain; charset=utf-8",
            format!("{status}\n{text}").into_bytes(),
        ),
        actions::Outcome::Refused(why) => self::text(403, &format!("{why}\n")),
    }
}

/// Headers every answer carries: nothing is cached, the page runs only
/// its own inline code and talks only to this listener.
const COMMON: &str = "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\
Referrer-Policy: no-referrer\r\nX-Frame-Options: DENY\r\n\
Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; \
style-src 'unsafe-inline'; connect-src 'self'; img-src data:\r\n";

async fn respond(
    stream: &mut TcpStream,
    answer: Answer,
    keep: bool,
    is_head: bool,
) -> std::io::Result<()> {
    let Answer::Body(status, content_type, body) = answer else {
        return Ok(());
    };
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\n{COMMON}Content-Length: {}\r\nConnection: {}\r\n\r\n",
        lacquer_http::reason_phrase(status),
        body.len(),
        if keep { "keep-alive" } else { "close" }
    );
    let mut out = Vec::with_capacity(head.len() + body.len());
    out.extend_from_slice(head.as_bytes());
    if !is_head {
        out.extend_from_slice(&body);
    }
    send(stream, &out).await
}

fn stream_head() -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n{COMMON}Connection: close\r\n\r\n"
    )
    .into_bytes()
}

/// Writes all of `data` within [`SEND_TIMEOUT`] (a client that does not
/// read loses its connection, and its stream's place).
async fn send(stream: &mut TcpStream, data: &[u8]) -> std::io::Result<()> {
    match tokio::time::timeout(SEND_TIMEOUT, stream.write_all(data)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
    }
}

/// One server-sent event holding `data` (each of its lines a `data:`
/// field).
fn event(out: &mut Vec<u8>, data: &[u8]) {
    for line in data.split(|&b| b == b'\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out.push(b'\n');
}

/// `/events`: the history, then a snapshot a second until the page
/// leaves.
async fn events(stream: &mut TcpStream, board: &Board) -> std::io::Result<()> {
    let mut rx = board.tx.subscribe();
    let mut out = stream_head();
    let mut last = 0.0;
    {
        let history = board.history.lock().unwrap_or_else(|p| p.into_inner());
        for (t, json) in history.iter() {
            event(&mut out, json.as_bytes());
            last = *t;
        }
    }
    send(stream, &out).await?;
    loop {
        match rx.recv().await {
            Ok((t, json)) if t > last => {
                out.clear();
                event(&mut out, json.as_bytes());
                send(stream, &out).await?;
                last = t;
            }
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => return Ok(()),
        }
    }
}

/// `/log`: each matching transaction as it is logged.
async fn log_stream(
    stream: &mut TcpStream,
    board: &Board,
    query: Option<lacquer_shm::query::Query>,
) -> std::io::Result<()> {
    let Some(mut rx) = board.log.tail(query) else {
        let busy = text(503, "Too many log tails open.\n");
        return respond(stream, busy, false, false).await;
    };
    send(stream, &stream_head()).await?;
    let mut beat = tokio::time::interval(HEARTBEAT);
    let mut out = Vec::new();
    beat.tick().await;
    loop {
        let next = std::future::poll_fn(|cx| {
            if let std::task::Poll::Ready(got) = rx.poll_recv(cx) {
                return std::task::Poll::Ready(Some(got));
            }
            beat.poll_tick(cx).map(|_| None)
        })
        .await;
        match next {
            Some(None) => return Ok(()),
            Some(Some(text)) => {
                out.clear();
                event(&mut out, text.trim_ascii_end());
                send(stream, &out).await?;
            }
            None => send(stream, b": \n\n").await?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_are_decoded() {
        assert_eq!(
            form_value(b"x=1&q=ReqURL+%7E+%22%5E%2Fa%22", b"q").unwrap(),
            b"ReqURL ~ \"^/a\""
        );
        assert_eq!(form_value(b"q=%zz%4", b"q").unwrap(), b"%zz%4");
        assert_eq!(form_value(b"qq=1", b"q"), None);
        assert_eq!(form_value(b"q=", b"q").unwrap(), b"");
    }

    #[test]
    fn the_page_carries_the_newest_snapshot_and_nothing_can_end_its_script() {
        let (tx, _) = broadcast::channel(1);
        let board = Board {
            log: Arc::new(LogWatch::default()),
            history: Mutex::new(VecDeque::new()),
            tx,
            streams: AtomicUsize::new(0),
            actions: None,
        };
        let empty = String::from_utf8(page(&board)).unwrap();
        assert!(empty.contains("const FIRST = null;"));
        assert!(empty.contains("if (false) {"), "no actions offered");
        let json: Arc<str> = r#"{"t":2,"top":[["/</script><b>",1]]}"#.into();
        board.history.lock().unwrap().push_back((2.0, json));
        let page = String::from_utf8(page(&board)).unwrap();
        assert!(page.contains(r#"const FIRST = {"t":2,"top":[["/\u003c/script>\u003cb>",1]]};"#));
        assert_eq!(page.matches("</script>").count(), 1);
    }

    #[test]
    fn stream_places_are_bounded_and_given_back() {
        let open = AtomicUsize::new(0);
        let places: Vec<_> = (0..MAX_STREAMS)
            .map_while(|_| StreamPlace::take(&open))
            .collect();
        assert_eq!(places.len(), MAX_STREAMS);
        assert!(StreamPlace::take(&open).is_none());
        drop(places);
        assert_eq!(open.load(Ordering::Relaxed), 0);
        assert!(StreamPlace::take(&open).is_some());
    }

    #[test]
    fn events_hold_each_line() {
        let mut out = Vec::new();
        event(&mut out, b"a\nb");
        assert_eq!(out, b"data: a\ndata: b\n\n");
    }
}
