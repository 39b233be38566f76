//! Bare reference servers: every request, whatever it asks, is answered
//! with one fixed response the size of a Lacquer hit on the benchmark's
//! object (a 335-byte head, 1 KiB of body), and a request carrying
//! `Connection: close` has its connection closed after it.
//!
//! `BARE_MODE` picks the server:
//! - `tokio`: a task per connection on a multi-threaded runtime with one
//!   worker, accepting on that worker (as Lacquer does);
//! - `tokio1`: the same on a current-thread runtime;
//! - `mio`: one edge-triggered epoll loop, no runtime, closing a socket
//!   without taking it out of epoll first (as nginx does).
//!
//! Every mode runs one more thread, asleep: a process of several threads
//! shares its descriptor table, which the kernel then counts references
//! in on every call (Lacquer always has several threads).
//!
//! Only `-a address:port` is read from the arguments; the rest is
//! ignored, so that `bench/ab.sh` can start it where it starts Lacquer.

#![forbid(unsafe_code)]

use std::io::{ErrorKind, Read, Write};
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(addr) = args
        .iter()
        .position(|a| a == "-a")
        .and_then(|i| args.get(i + 1))
    else {
        eprintln!("usage: BARE_MODE=tokio|tokio1|mio lacquer-bare -a address:port");
        std::process::exit(2);
    };
    std::thread::spawn(|| loop {
        std::thread::sleep(Duration::from_secs(3600));
    });
    let mode = std::env::var("BARE_MODE").unwrap_or_default();
    let result = match mode.as_str() {
        "tokio" => tokio_server(addr, false),
        "tokio1" => tokio_server(addr, true),
        "mio" => mio_server(addr),
        other => {
            eprintln!("BARE_MODE {other:?}: tokio, tokio1 or mio");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("{addr}: {e}");
        std::process::exit(1);
    }
}

/// The response, with `Connection: close` or without.
fn response(close: bool) -> Vec<u8> {
    let mut head = concat!(
        "HTTP/1.1 200 OK\r\n",
        "Server: nginx/1.22.1\r\n",
        "Date: Thu, 26 Nov 2026 12:42:22 GMT\r\n",
        "Content-Type: text/plain\r\n",
        "Last-Modified: Thu, 26 Nov 2026 12:42:22 GMT\r\n",
        "ETag: \"6b08292e-400\"\r\n",
        "Cache-Control: max-age=3600\r\n",
        "Accept-Ranges: bytes\r\n",
        "X-Varnish: 32770 3\r\n",
        "Age: 0\r\n",
        "Via: 1.1 vm (Lacquer/0.1)\r\n",
        "Content-Length: 1024\r\n",
    )
    .as_bytes()
    .to_vec();
    if close {
        head.extend_from_slice(b"Connection: close\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head.resize(head.len() + 1024, b'x');
    head
}

/// The length of the first whole head in `buf`, if there is one.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

fn asks_close(head: &[u8]) -> bool {
    head.windows(17)
        .any(|w| w.eq_ignore_ascii_case(b"connection: close"))
}

fn tokio_server(addr: &str, current_thread: bool) -> std::io::Result<()> {
    let rt = match current_thread {
        true => tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()?,
        false => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_io()
            .build()?,
    };
    let listener = rt.block_on(tokio::net::TcpListener::bind(addr))?;
    let accepting = rt.spawn(async move {
        let (keep, close) = (response(false).leak(), response(true).leak());
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(tokio_connection(stream, keep, close));
        }
    });
    rt.block_on(accepting).map_err(std::io::Error::other)
}

async fn tokio_connection(mut stream: tokio::net::TcpStream, keep: &[u8], close: &[u8]) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = Vec::with_capacity(8192);
    loop {
        let end = loop {
            if let Some(end) = head_end(&buf) {
                break end;
            }
            match stream.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        };
        let last = asks_close(&buf[..end]);
        buf.drain(..end);
        let answer = if last { close } else { keep };
        if stream.write_all(answer).await.is_err() || last {
            return;
        }
    }
}

struct Conn {
    stream: mio::net::TcpStream,
    buf: Vec<u8>,
}

fn mio_server(addr: &str) -> std::io::Result<()> {
    use mio::{Events, Interest, Poll, Token};
    const LISTENER: Token = Token(usize::MAX);
    let addr = addr
        .parse()
        .map_err(|e| std::io::Error::new(ErrorKind::InvalidInput, e))?;
    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(256);
    let mut listener = mio::net::TcpListener::bind(addr)?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let (keep, close) = (response(false), response(true));
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    loop {
        poll.poll(&mut events, None)?;
        for event in events.iter() {
            if event.token() == LISTENER {
                while let Ok((mut stream, _)) = listener.accept() {
                    let _ = stream.set_nodelay(true);
                    let slot = free.pop().unwrap_or_else(|| {
                        conns.push(None);
                        conns.len() - 1
                    });
                    poll.registry()
                        .register(&mut stream, Token(slot), Interest::READABLE)?;
                    let buf = Vec::with_capacity(8192);
                    conns[slot] = Some(Conn { stream, buf });
                }
                continue;
            }
            let slot = event.token().0;
            let Some(conn) = conns.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            if serve(conn, &keep, &close) {
                // Closed without leaving epoll first: closing the only
                // descriptor of a socket takes it out.
                conns[slot] = None;
                free.push(slot);
            }
        }
    }
}

/// Reads what a connection has and answers each whole head in it; true
/// when the connection is done. A read that fills less than it was
/// offered is taken to have emptied the socket (as nginx takes it): the
/// next bytes come with the next edge.
fn serve(conn: &mut Conn, keep: &[u8], close: &[u8]) -> bool {
    const ROOM: usize = 4096;
    loop {
        let len = conn.buf.len();
        conn.buf.resize(len + ROOM, 0);
        let read = conn.stream.read(&mut conn.buf[len..]);
        let got = match read {
            Ok(0) => return true,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => 0,
            Err(_) => return true,
        };
        conn.buf.truncate(len + got);
        while let Some(end) = head_end(&conn.buf) {
            let last = asks_close(&conn.buf[..end]);
            conn.buf.drain(..end);
            let answer = if last { close } else { keep };
            // A benchmark's responses fit the socket's buffer.
            if conn.stream.write_all(answer).is_err() || last {
                return true;
            }
        }
        if got < ROOM {
            return false;
        }
    }
}
