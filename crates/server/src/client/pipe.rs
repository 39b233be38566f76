//! Pipe: after `vcl_pipe`, the client's connection is joined to a fresh
//! backend connection and bytes flow both ways untouched until either
//! side closes or nothing moves for `pipe_timeout`. A piped request with
//! an unsafe method (the built-in VCL pipes the methods it does not know)
//! still invalidates its URL when the backend's status line says it
//! succeeded (RFC 9111 §4.4), before that status line reaches the client.

use crate::host::backend_host::{self, Bereq, BereqBody};
use crate::host::req::{ConnInfo, Outcome, Req};
use crate::host::vcl::Loaded;
use crate::transport::io::Client;
use crate::Shared;
use bytes::Bytes;
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{BackendCounter, Counter, COUNTERS};
use lacquer_core::params::Params;
use lacquer_vcl::{Action, Method};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

/// How a pipe ended.
pub(crate) enum Piped {
    Done(Outcome),
    /// `vcl_pipe` chose a synthetic response instead.
    Synth(u16, Option<Bytes>),
}

/// The fields a pipe's backend request starts from: the client's without
/// those for this hop alone, but for a `Connection: close` it sent, which
/// stays in its place (varnishd copies it, then asks for the close the
/// pipe ends with only where it is not there).
fn pipe_headers(req: &Req) -> lacquer_http::Headers {
    let filtered = req.backend_headers();
    let mut sent = req.head.headers.get_all("connection");
    let close = match (sent.next(), sent.next()) {
        (Some(v), None) => lacquer_http::headers::trim(v).eq_ignore_ascii_case(b"close"),
        _ => false,
    };
    if !close {
        return filtered;
    }
    let mut out = lacquer_http::Headers::with_capacity(filtered.len() + 1);
    let mut kept = filtered.iter().peekable();
    for h in req.head.headers.iter() {
        if h.name.eq_ignore_ascii_case(b"connection") {
            out.push_raw(h.clone());
        } else if kept.peek().is_some_and(|k| *k == h) {
            out.push_raw(h.clone());
            kept.next();
        }
    }
    for rest in kept {
        out.push_raw(rest.clone());
    }
    out
}

pub(crate) async fn pipe(
    c: &mut Client,
    sh: &Arc<Shared>,
    vcl: &Arc<Loaded>,
    req: &mut Req,
    conn: ConnInfo,
) -> Piped {
    let mut bereq = pipe_bereq(sh, vcl, req, &conn);
    if let Some(instead) = run_vcl_pipe(sh, vcl, req, &mut bereq) {
        return instead;
    }
    COUNTERS.inc(Counter::s_pipe);
    // In `MAIN.n_pipe` for as long as the pipe is open.
    let _open = COUNTERS.hold(Counter::n_pipe);
    let Some((index, backend)) = crate::fetch::backend_steps::pick_backend(sh, vcl, &mut bereq)
    else {
        return Piped::Synth(503, None);
    };
    let t = bereq.timeouts(vcl, index, &sh.params);
    // The client's bytes follow the head as it sent them; a body read
    // into memory (`std.cache_req_body`) goes first, framed by its length.
    let cached = bereq.cached_body.clone().unwrap_or_default();
    let framing = match bereq.cached_body.is_some() {
        true if cached.is_empty() => BereqBody::None,
        true => BereqBody::Length(cached.len() as u64),
        false => BereqBody::of(req.head.framing),
    };
    let head = bereq.head(&backend.host_header, framing);
    let be = match backend.connect(&t, false).await {
        Ok(be) => be,
        Err(e) => {
            // As varnishd: the client's connection closes unanswered (the
            // pipe has taken it over), counted as a transmission error.
            crate::fetch::backend_steps::log_fetch_error(&mut bereq.log, &e);
            return Piped::Done(Outcome::Close(CloseReason::TxError));
        }
    };
    crate::fetch::backend_steps::log_open(&mut bereq.log, &backend, &be);
    let socket = be.socket();
    let Some((mut stream, _, _slot)) = be.detach() else {
        return Piped::Synth(503, None);
    };
    let hdr_rx = req.acct.hdr_rx;
    COUNTERS.add(Counter::s_pipe_hdrbytes, hdr_rx);
    let vbe = &backend.stats;
    vbe.add(BackendCounter::pipe_hdrbytes, head.len() as u64);
    // What the client sent past the head (a body, more requests) goes
    // first, in order.
    let pending = c.rbuf.split();
    let write = async {
        stream.write_all(&head).await?;
        stream.write_all(&cached).await?;
        stream.write_all(&pending).await?;
        // Out of a TLS connection's records too, before the client and
        // the backend are joined.
        stream.flush().await
    };
    if tokio::time::timeout(t.between_bytes, write)
        .await
        .map_or(true, |r| r.is_err())
    {
        return Piped::Done(Outcome::Close(CloseReason::TxPipe));
    }
    let now = lacquer_core::time::now();
    bereq.log.timestamp(&lacquer_shm::packed::stamp::BEREQ, now);
    req.log.timestamp(&lacquer_shm::packed::stamp::PIPE, now);
    let idle = Params::duration(sh.params.pipe_timeout());
    let started = Instant::now();
    let last = AtomicU64::new(0);
    let (from_client, to_client) = (AtomicU64::new(pending.len() as u64), AtomicU64::new(0));
    // ESI includes never pipe (the client side passes them instead).
    let Some(client_stream) = c.stream() else {
        return Piped::Synth(503, None);
    };
    let mut client = Watched {
        inner: client_stream,
        last: &last,
        moved: &from_client,
        started,
        first: None,
    };
    // Once the backend's status line is read, an unsafe request it
    // answered with success invalidates at once, before those bytes are
    // handed on: the client cannot see the answer and ask again first.
    let mut on_status = |status: u16| {
        crate::client::invalidate::after_unsafe(
            sh,
            vcl,
            req,
            conn.clone(),
            status,
            &lacquer_http::Headers::new(),
        );
    };
    let mut backend_side = Watched {
        inner: &mut stream,
        last: &last,
        moved: &to_client,
        started,
        first: Some(StatusWatch {
            seen: Vec::with_capacity(STATUS_LINE_START),
            on_status: &mut on_status,
        }),
    };
    {
        let copy = tokio::io::copy_bidirectional(&mut client, &mut backend_side);
        let mut copy = std::pin::pin!(copy);
        loop {
            match tokio::time::timeout(idle, copy.as_mut()).await {
                Ok(_) => break,
                Err(_) => {
                    let quiet_for =
                        started.elapsed().as_millis() as u64 - last.load(Ordering::Relaxed);
                    if quiet_for >= idle.as_millis() as u64 {
                        break;
                    }
                }
            }
        }
    }
    drop(backend_side);
    let piped = PipeBytes {
        hdr_rx,
        head: head.len() as u64,
        from_client: from_client.load(Ordering::Relaxed),
        to_client: to_client.load(Ordering::Relaxed),
    };
    log_end(req, &mut bereq, &backend, socket.map(|(fd, _)| fd), piped);
    Piped::Done(Outcome::Close(CloseReason::TxPipe))
}

/// The status of an HTTP/1 status line's first bytes (`HTTP/1.1 200`).
fn status_of(first: &[u8]) -> Option<u16> {
    let rest = first.strip_prefix(b"HTTP/1.")?;
    let code = rest.get(2..5)?;
    if rest.get(1) != Some(&b' ') || !code.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(code).ok()?.parse().ok()
}

/// The bytes of a status line that say its status.
const STATUS_LINE_START: usize = 12;

/// A stream that notes when bytes last moved through it, counts the bytes
/// read from it, and (the backend's) watches for the status line.
struct Watched<'a, S: ?Sized> {
    inner: &'a mut S,
    last: &'a AtomicU64,
    moved: &'a AtomicU64,
    started: Instant,
    first: Option<StatusWatch<'a>>,
}

/// The first bytes a backend sent, kept until they say a status (or
/// cannot), and what to do with that status.
struct StatusWatch<'a> {
    seen: Vec<u8>,
    on_status: &'a mut (dyn FnMut(u16) + Send),
}

impl<S: ?Sized> Watched<'_, S> {
    fn touch(&self) {
        self.last
            .store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
}

impl<S: AsyncRead + Unpin + ?Sized> AsyncRead for Watched<'_, S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut *self.inner).poll_read(cx, buf);
        let read = buf.filled().len() - before;
        if read > 0 {
            if let Some(mut watch) = self.first.take() {
                let want = STATUS_LINE_START.saturating_sub(watch.seen.len()).min(read);
                watch
                    .seen
                    .extend_from_slice(&buf.filled()[before..before + want]);
                match status_of(&watch.seen) {
                    Some(status) => (watch.on_status)(status),
                    None if watch.seen.len() < STATUS_LINE_START => self.first = Some(watch),
                    None => {}
                }
            }
            self.touch();
            self.moved.fetch_add(read as u64, Ordering::Relaxed);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin + ?Sized> AsyncWrite for Watched<'_, S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut *self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.inner).poll_shutdown(cx)
    }
}

/// The backend request of a pipe, as varnishd builds it (the client's
/// fields, the request's name, then the close that ends the pipe with its
/// connection), logged as built.
fn pipe_bereq(sh: &Arc<Shared>, vcl: &Arc<Loaded>, req: &mut Req, conn: &ConnInfo) -> Bereq {
    let headers = pipe_headers(req);
    let mut bereq = Bereq::from_req(
        sh,
        vcl,
        req,
        headers,
        conn.clone(),
        &lacquer_shm::record::txn::PIPE,
    );
    bereq.uncacheable = true;
    bereq.headers.set("X-Varnish", bereq.xid.to_string());
    let closes = bereq.headers.get_all("connection").count() == 1
        && bereq
            .headers
            .get("connection")
            .is_some_and(|v| lacquer_http::headers::trim(v).eq_ignore_ascii_case(b"close"));
    if !closes {
        bereq.headers.set("Connection", "close");
    }
    bereq.log_as_built();
    bereq
}

/// Runs `vcl_pipe` (which sees both requests; its records go to the
/// client's): None to pipe, else what the client gets instead.
fn run_vcl_pipe(
    sh: &Arc<Shared>,
    vcl: &Arc<Loaded>,
    req: &mut Req,
    bereq: &mut Bereq,
) -> Option<Piped> {
    let action = {
        let mut host = backend_host::BackendHost {
            method: Method::Pipe,
            sh,
            vcl,
            bereq,
            beresp: None,
            req: Some(req),
        };
        crate::host::vsl::run_method(
            &vcl.program,
            Method::Pipe,
            &mut host,
            |h| &mut h.req.as_deref_mut().expect("vcl_pipe has its client").log,
            |_, _| {},
        )
    };
    match action {
        Action::Pipe => {
            let now = lacquer_core::time::now();
            req.log.timestamp(&lacquer_shm::packed::stamp::PROCESS, now);
            bereq
                .log
                .timestamp(&lacquer_shm::packed::stamp::PROCESS, now);
            None
        }
        Action::Synth { status, reason } => Some(Piped::Synth(status, reason)),
        _ => Some(Piped::Synth(503, Some(Bytes::from_static(b"VCL failed")))),
    }
}

/// The bytes a pipe moved: the client's head, the backend request's
/// head, and what went each way after them.
struct PipeBytes {
    hdr_rx: u64,
    head: u64,
    from_client: u64,
    to_client: u64,
}

/// Counts and logs a pipe's end: the bytes each way (read from one side
/// counts as piped whether or not the other took it all), the client's
/// `PipeSess` and `PipeAcct`, the backend connection's close.
fn log_end(
    req: &mut Req,
    bereq: &mut Bereq,
    backend: &lacquer_backend::Backend,
    fd: Option<i32>,
    p: PipeBytes,
) {
    COUNTERS.add(Counter::s_pipe_in, p.from_client);
    COUNTERS.add(Counter::s_pipe_out, p.to_client);
    let vbe = &backend.stats;
    vbe.add(BackendCounter::pipe_out, p.from_client);
    vbe.add(BackendCounter::pipe_in, p.to_client);
    req.log.timestamp(
        &lacquer_shm::packed::stamp::PIPE_SESS,
        lacquer_core::time::now(),
    );
    crate::host::vsl::numbers(
        &mut req.log,
        lacquer_shm::Tag::PipeAcct,
        &[p.hdr_rx, p.head, p.from_client, p.to_client],
    );
    // The backend side: its connection ends with the pipe.
    if let Some(fd) = fd.filter(|_| bereq.log.active()) {
        bereq.log.fmt(
            lacquer_shm::Tag::BackendClose,
            format_args!("{fd} {} close Piped transaction", backend.name),
        );
    }
    // What was piped is the client's PipeAcct; varnishd's backend side
    // of a pipe counts nothing.
    crate::host::vsl::numbers(&mut bereq.log, lacquer_shm::Tag::BereqAcct, &[0; 6]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// Reads all of `parts` through a watched stream, noting after each
    /// read what status the watch had reported by then.
    async fn statuses_after_each_read(parts: &[&'static [u8]]) -> Vec<Option<u16>> {
        let mut source: Box<dyn AsyncRead + Unpin + Send> = Box::new(&b""[..]);
        for part in parts.iter().rev() {
            source = Box::new(part.chain(source));
        }
        let (last, moved) = (AtomicU64::new(0), AtomicU64::new(0));
        let seen = std::sync::Mutex::new(None);
        let mut record = |status| *seen.lock().unwrap() = Some(status);
        let mut watched = Watched {
            inner: &mut source,
            last: &last,
            moved: &moved,
            started: Instant::now(),
            first: Some(StatusWatch {
                seen: Vec::new(),
                on_status: &mut record,
            }),
        };
        let mut after = Vec::new();
        let mut buf = [0u8; 64];
        while watched.read(&mut buf).await.unwrap() > 0 {
            after.push(*seen.lock().unwrap());
        }
        after
    }

    #[test]
    fn the_status_is_acted_on_before_the_read_that_completes_it_returns() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let after = rt.block_on(statuses_after_each_read(&[
            b"HTTP/1.",
            b"1 204 No",
            b" Content\r\n\r\n",
        ]));
        assert_eq!(after, [None, Some(204), Some(204)]);
        let whole = rt.block_on(statuses_after_each_read(&[b"HTTP/1.1 201 Created\r\n\r\n"]));
        assert_eq!(whole, [Some(201)]);
        let garbage = rt.block_on(statuses_after_each_read(&[
            b"SSH-2.0-OpenSSH",
            b"HTTP/1.1 200 OK",
        ]));
        assert_eq!(garbage, [None, None]);
    }
}
