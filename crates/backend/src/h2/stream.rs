//! One stream of an HTTP/2 connection, seen as an HTTP/1.1 connection:
//! the request head written to it becomes HEADERS (hop-by-hop fields
//! dropped, `Host` as `:authority`), its body (length- or chunk-framed)
//! becomes DATA under the stream's window, and the response comes back
//! as an HTTP/1.1 head with a body framed by its Content-Length or
//! chunked, with trailers as the chunked trailer section. Interim (1xx)
//! responses come first, each as a head of its own.
//!
//! Exchanges follow one another on it as on a keep-alive connection,
//! each on a new HTTP/2 stream; a request that asks to close ends it
//! (the reader then sees the end of the connection). The backend's bytes
//! are never copied through as they came: the head is written anew from
//! the decoded fields, so nothing in them can frame the response another
//! way than HTTP/2 framed it.

use super::{io_error, H2Conn};
use bytes::{Buf, Bytes, BytesMut};
use h2::client::ResponseFuture;
use h2::{RecvStream, SendStream};
use lacquer_http::chunked::{ChunkedDecoder, Decoded};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most bytes a request head may take (the exchange's heads are
/// already bounded by `http_req_size`; a probe's `.request` is short).
const MAX_HEAD: usize = 1024 * 1024;
/// The most header fields in a request head.
const MAX_FIELDS: usize = 256;
/// Request bytes held before a writer waits for the backend to take them.
const MAX_PENDING: usize = 64 * 1024;

/// A fetch's stream on a shared HTTP/2 connection.
pub struct H2Stream {
    conn: Arc<H2Conn>,
    send: h2::client::SendRequest<Bytes>,
    /// Request bytes written and not yet sent on as frames.
    wbuf: BytesMut,
    /// Response bytes, in HTTP/1.1 shape, not yet read.
    rbuf: BytesMut,
    state: State,
    /// A writer waiting for the exchange in flight to end.
    writer: Option<Waker>,
}

enum State {
    /// Between exchanges: the next request head is awaited.
    Idle,
    /// A request waits for the connection to open a stream.
    Opening(Box<(http::Request<()>, Exchange)>),
    /// A request in flight.
    Open(Box<Exchange>),
    /// The request asked to close, or the exchange failed: no more.
    Closed,
}

/// One request and its response.
struct Exchange {
    /// The request body's stream while it is being sent.
    out: Option<SendStream<Bytes>>,
    body: Body,
    /// A piece of the body taken from the written bytes, waiting for
    /// window.
    pending: Option<Bytes>,
    /// Until the response head arrives.
    response: Option<ResponseFuture>,
    /// The response body, once the head is read.
    recv: Option<RecvStream>,
    /// The response body is given chunk-framed (it has no length).
    chunked: bool,
    head_request: bool,
    /// The request asked to close the connection after it.
    close: bool,
    /// The task that sends the rest of the request body on its own
    /// (ended with the exchange).
    pump: Option<super::duplex::Pump>,
}

/// How the request body is framed in the bytes written.
enum Body {
    Empty,
    Length(u64),
    Chunked(ChunkedDecoder),
}

/// What the written bytes give next.
enum Piece {
    Data(Bytes),
    /// More bytes are needed.
    More,
    End,
}

impl H2Stream {
    pub(super) fn new(conn: Arc<H2Conn>) -> H2Stream {
        H2Stream {
            send: conn.send.clone(),
            conn,
            wbuf: BytesMut::new(),
            rbuf: BytesMut::new(),
            state: State::Idle,
            writer: None,
        }
    }

    /// The connection it is a stream of.
    pub fn connection(&self) -> &Arc<H2Conn> {
        &self.conn
    }

    /// Whether it may carry another exchange now.
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Idle)
            && !self.conn.done.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A failure that ends the stream: a GOAWAY or a connection error
    /// also retires the connection.
    fn fail(&mut self, e: h2::Error) -> io::Error {
        if e.is_go_away() || e.is_io() {
            self.conn.retire();
        }
        self.state = State::Closed;
        io_error(e)
    }

    /// Turns the bytes written so far into frames, as far as the
    /// connection's readiness and the stream's window allow. Ready when
    /// everything written has been taken (or more bytes are needed).
    fn push(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut zero_windows = 0;
        loop {
            match &mut self.state {
                State::Closed => {
                    return Poll::Ready(if self.wbuf.is_empty() {
                        Ok(())
                    } else {
                        Err(io::Error::new(
                            io::ErrorKind::BrokenPipe,
                            "HTTP/2 stream closed",
                        ))
                    });
                }
                State::Idle => {
                    if self.wbuf.is_empty() {
                        return Poll::Ready(Ok(()));
                    }
                    match request(&mut self.wbuf, self.conn.secure) {
                        Ok(Some(opening)) => self.state = State::Opening(Box::new(opening)),
                        Ok(None) => return Poll::Ready(Ok(())),
                        Err(e) => {
                            self.state = State::Closed;
                            return Poll::Ready(Err(e));
                        }
                    }
                }
                State::Opening(_) => {
                    match self.send.poll_ready(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(self.fail(e))),
                        Poll::Ready(Ok(())) => {}
                    }
                    let State::Opening(opening) = std::mem::replace(&mut self.state, State::Closed)
                    else {
                        unreachable!("matched above");
                    };
                    let (req, mut exchange) = *opening;
                    let end = matches!(exchange.body, Body::Empty);
                    match self.send.send_request(req, end) {
                        Ok((response, out)) => {
                            exchange.response = Some(response);
                            exchange.out = (!end).then_some(out);
                            self.state = State::Open(Box::new(exchange));
                        }
                        Err(e) => return Poll::Ready(Err(self.fail(e))),
                    }
                }
                State::Open(ex) => {
                    let Some(out) = ex.out.as_mut() else {
                        // The request is sent; bytes written past it wait
                        // for the exchange to end.
                        return Poll::Ready(Ok(()));
                    };
                    let mut piece = match ex.pending.take() {
                        Some(piece) => piece,
                        None => match next_piece(&mut ex.body, &mut self.wbuf) {
                            Ok(Piece::Data(d)) => d,
                            Ok(Piece::More) => return Poll::Ready(Ok(())),
                            Ok(Piece::End) => {
                                let sent = out.send_data(Bytes::new(), true);
                                ex.out = None;
                                if let Err(e) = sent {
                                    return Poll::Ready(Err(self.fail(e)));
                                }
                                continue;
                            }
                            Err(e) => {
                                self.state = State::Closed;
                                return Poll::Ready(Err(e));
                            }
                        },
                    };
                    out.reserve_capacity(piece.len());
                    match out.poll_capacity(cx) {
                        Poll::Pending => {
                            ex.pending = Some(piece);
                            return Poll::Pending;
                        }
                        Poll::Ready(None) => {
                            self.state = State::Closed;
                            return Poll::Ready(Err(io::Error::new(
                                io::ErrorKind::BrokenPipe,
                                "HTTP/2 stream closed by the backend",
                            )));
                        }
                        Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(self.fail(e))),
                        Poll::Ready(Some(Ok(0))) => {
                            ex.pending = Some(piece);
                            zero_windows += 1;
                            if zero_windows > 1 {
                                return Poll::Pending;
                            }
                        }
                        Poll::Ready(Some(Ok(window))) => {
                            let part = piece.split_to(window.min(piece.len()));
                            if !piece.is_empty() {
                                ex.pending = Some(piece);
                            }
                            if let Err(e) = out.send_data(part, false) {
                                return Poll::Ready(Err(self.fail(e)));
                            }
                        }
                    }
                }
            }
        }
    }

    /// Reads what comes next of the response into `rbuf`; Ready(false) at
    /// the end of the connection.
    fn pull(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        let State::Open(ex) = &mut self.state else {
            return match self.state {
                State::Closed => Poll::Ready(Ok(false)),
                // Nothing has been asked yet.
                _ => Poll::Pending,
            };
        };
        if let Some(response) = ex.response.as_mut() {
            match response.poll_informational(cx) {
                Poll::Ready(Some(Ok(interim))) => {
                    let (parts, ()) = interim.into_parts();
                    write_head(&mut self.rbuf, parts.status, &parts.headers, false, false);
                    return Poll::Ready(Ok(true));
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(self.fail(e))),
                _ => {}
            }
            let resp = match Pin::new(response).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(self.fail(e))),
                Poll::Ready(Ok(resp)) => resp,
            };
            let (parts, recv) = resp.into_parts();
            let status = parts.status.as_u16();
            ex.chunked = !ex.head_request
                && status != 204
                && status != 304
                && !parts.headers.contains_key(http::header::CONTENT_LENGTH);
            write_head(
                &mut self.rbuf,
                parts.status,
                &parts.headers,
                ex.chunked,
                ex.close,
            );
            ex.response = None;
            ex.recv = Some(recv);
            return Poll::Ready(Ok(true));
        }
        let Some(recv) = ex.recv.as_mut() else {
            return Poll::Ready(Ok(false));
        };
        match recv.poll_data(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(data))) => {
                let _ = recv.flow_control().release_capacity(data.len());
                if ex.chunked && !data.is_empty() {
                    let mut size = Vec::with_capacity(16);
                    lacquer_http::chunked::chunk_header(data.len(), &mut size);
                    self.rbuf.extend_from_slice(&size);
                    self.rbuf.extend_from_slice(&data);
                    self.rbuf.extend_from_slice(b"\r\n");
                } else {
                    self.rbuf.extend_from_slice(&data);
                }
                Poll::Ready(Ok(true))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Err(self.fail(e))),
            Poll::Ready(None) => {
                let trailers = match recv.poll_trailers(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(self.fail(e))),
                    Poll::Ready(Ok(trailers)) => trailers,
                };
                if ex.chunked {
                    self.rbuf.extend_from_slice(b"0\r\n");
                    if let Some(trailers) = &trailers {
                        write_fields(&mut self.rbuf, trailers);
                    }
                    self.rbuf.extend_from_slice(b"\r\n");
                }
                // A request whose body was not all sent leaves bytes that
                // are no next request: the connection ends with it.
                let over = ex.close || ex.out.is_some() || ex.pending.is_some();
                self.state = if over { State::Closed } else { State::Idle };
                if let Some(w) = self.writer.take() {
                    w.wake();
                }
                Poll::Ready(Ok(true))
            }
        }
    }
}

/// Parses a request head off the front of `wbuf` into an HTTP/2 request
/// (None: more bytes are needed).
fn request(wbuf: &mut BytesMut, secure: bool) -> io::Result<Option<(http::Request<()>, Exchange)>> {
    let bad = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("request for HTTP/2: {what}"),
        )
    };
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut parsed = httparse::Request::new(&mut fields);
    let len = match parsed.parse(wbuf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if wbuf.len() > MAX_HEAD => return Err(bad("head too long")),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(bad(&e.to_string())),
    };
    let method = http::Method::from_bytes(parsed.method.unwrap_or("GET").as_bytes())
        .map_err(|_| bad("method"))?;
    let head_request = method == http::Method::HEAD;
    let target = parsed.path.unwrap_or("/");
    let mut authority: Option<&[u8]> = None;
    let mut body = Body::Empty;
    let mut close = false;
    let mut builder = http::Request::builder().method(method);
    for f in parsed.headers.iter() {
        let name = f.name;
        if name.eq_ignore_ascii_case("host") {
            authority.get_or_insert(f.value);
            continue;
        }
        if name.eq_ignore_ascii_case("connection") {
            close |= f
                .value
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"));
            continue;
        }
        if name.eq_ignore_ascii_case("transfer-encoding") {
            if f.value.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                body = Body::Chunked(ChunkedDecoder::new());
                continue;
            }
            return Err(bad("transfer coding"));
        }
        if name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(f.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| bad("Content-Length"))?;
            if !matches!(body, Body::Chunked(_)) {
                body = if n == 0 { Body::Empty } else { Body::Length(n) };
            }
        }
        if ["keep-alive", "proxy-connection", "upgrade"]
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h))
        {
            continue;
        }
        if name.eq_ignore_ascii_case("te")
            && !f.value.trim_ascii().eq_ignore_ascii_case(b"trailers")
        {
            continue;
        }
        let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad("field name"))?;
        let value = http::HeaderValue::from_bytes(f.value).map_err(|_| bad("field value"))?;
        builder = builder.header(name, value);
    }
    let uri = if target.starts_with('/') || target == "*" {
        let authority = authority.ok_or_else(|| bad("no Host"))?;
        let authority = std::str::from_utf8(authority).map_err(|_| bad("Host"))?;
        let scheme = if secure { "https" } else { "http" };
        format!("{scheme}://{authority}{target}")
    } else {
        target.to_string()
    };
    let uri = http::Uri::try_from(uri).map_err(|_| bad("target"))?;
    let req = builder.uri(uri).body(()).map_err(|e| bad(&e.to_string()))?;
    wbuf.advance(len);
    Ok(Some((
        req,
        Exchange {
            out: None,
            body,
            pending: None,
            response: None,
            recv: None,
            chunked: false,
            head_request,
            close,
            pump: None,
        },
    )))
}

/// The next piece of the request body out of the written bytes.
fn next_piece(body: &mut Body, wbuf: &mut BytesMut) -> io::Result<Piece> {
    match body {
        Body::Empty | Body::Length(0) => Ok(Piece::End),
        Body::Length(left) => {
            if wbuf.is_empty() {
                return Ok(Piece::More);
            }
            let n = (*left).min(wbuf.len() as u64) as usize;
            *left -= n as u64;
            Ok(Piece::Data(wbuf.split_to(n).freeze()))
        }
        Body::Chunked(dec) => match dec.decode(wbuf) {
            Ok(Some(Decoded::Data(d))) => Ok(Piece::Data(d)),
            Ok(Some(Decoded::End)) => {
                *body = Body::Empty;
                Ok(Piece::End)
            }
            Ok(None) => Ok(Piece::More),
            Err(e) => Err(io::Error::new(io::ErrorKind::InvalidInput, e.0)),
        },
    }
}

/// Writes a response head in HTTP/1.1 shape.
fn write_head(
    out: &mut BytesMut,
    status: http::StatusCode,
    fields: &http::HeaderMap,
    chunked: bool,
    close: bool,
) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.extend_from_slice(b" ");
    out.extend_from_slice(status.canonical_reason().unwrap_or("Unknown").as_bytes());
    out.extend_from_slice(b"\r\n");
    write_fields(out, fields);
    if chunked {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Writes header fields, leaving out those that would speak for an
/// HTTP/1 connection (HTTP/2 forbids them; they are dropped if a backend
/// sends them anyway).
fn write_fields(out: &mut BytesMut, fields: &http::HeaderMap) {
    for (name, value) in fields {
        if matches!(
            name.as_str(),
            "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade"
        ) {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

impl AsyncWrite for H2Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.wbuf.len() >= MAX_PENDING {
            match this.push(cx) {
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(())) if this.wbuf.len() >= MAX_PENDING => {
                    // Held for the next exchange: woken when this one ends.
                    this.writer = Some(cx.waker().clone());
                    return Poll::Pending;
                }
                Poll::Ready(Ok(())) => {}
            }
        }
        this.wbuf.extend_from_slice(buf);
        match this.push(cx) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(buf.len())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().push(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for H2Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if !this.rbuf.is_empty() {
                let n = this.rbuf.len().min(buf.remaining());
                buf.put_slice(&this.rbuf[..n]);
                this.rbuf.advance(n);
                return Poll::Ready(Ok(()));
            }
            if let Poll::Ready(Err(e)) = this.push(cx) {
                return Poll::Ready(Err(e));
            }
            match this.pull(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(false)) => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(true)) => {}
            }
        }
    }
}

impl Drop for H2Stream {
    fn drop(&mut self) {
        self.conn.closed_stream();
    }
}

impl std::fmt::Debug for H2Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H2Stream")
            .field("conn", &self.conn)
            .finish()
    }
}

impl crate::BackendStream for H2Stream {
    fn fd(&self) -> i32 {
        self.conn.fd
    }

    fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.conn.local
    }

    fn is_quiet(&self) -> bool {
        self.is_idle()
    }

    fn tls(&self) -> Option<crate::tls::TlsDetails> {
        self.conn.tls
    }

    fn multiplexed(&self) -> bool {
        true
    }

    /// A stream talks to its connection's task by channels, on whichever
    /// worker; it is never pooled as an idle connection, so never moved.
    fn rebind(self: Box<Self>) -> std::io::Result<crate::Stream> {
        Ok(self)
    }

    fn duplex(
        &mut self,
        body: Box<dyn super::duplex::StreamedBody>,
        idle: std::time::Duration,
    ) -> Result<(), Box<dyn super::duplex::StreamedBody>> {
        let State::Open(ex) = &mut self.state else {
            return Err(body);
        };
        if ex.pending.is_some() || !self.wbuf.is_empty() || !matches!(ex.body, Body::Chunked(_)) {
            return Err(body);
        }
        let Some(out) = ex.out.take() else {
            return Err(body);
        };
        ex.body = Body::Empty;
        ex.pump = Some(super::duplex::Pump::start(body, out, idle));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_head_becomes_an_http2_request() {
        let mut w = BytesMut::from(
            &b"POST /a?b HTTP/1.1\r\nHost: example.com\r\nConnection: keep-alive, close\r\n\
               Keep-Alive: 5\r\nTE: gzip\r\nContent-Length: 3\r\nX-A: 1\r\n\r\nabcGET"[..],
        );
        let (req, ex) = request(&mut w, true).unwrap().unwrap();
        assert_eq!(req.uri().to_string(), "https://example.com/a?b");
        assert_eq!(req.method(), http::Method::POST);
        assert!(ex.close);
        assert!(matches!(ex.body, Body::Length(3)));
        assert!(req.headers().get("keep-alive").is_none());
        assert!(req.headers().get("te").is_none());
        assert!(req.headers().get("connection").is_none());
        assert_eq!(req.headers()["x-a"], "1");
        assert_eq!(&w[..], b"abcGET");
    }

    #[test]
    fn a_chunked_body_is_unframed_and_a_bad_one_refused() {
        let mut w = BytesMut::from(
            &b"PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"[..],
        );
        let (req, mut ex) = request(&mut w, false).unwrap().unwrap();
        assert_eq!(req.uri().to_string(), "http://h/");
        assert!(req.headers().get("transfer-encoding").is_none());
        match next_piece(&mut ex.body, &mut w).unwrap() {
            Piece::Data(d) => assert_eq!(&d[..], b"abc"),
            _ => panic!("no data"),
        }
        assert!(matches!(
            next_piece(&mut ex.body, &mut w).unwrap(),
            Piece::End
        ));
        let mut w = BytesMut::from(
            &b"PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"[..],
        );
        let (_, mut ex) = request(&mut w, false).unwrap().unwrap();
        assert!(next_piece(&mut ex.body, &mut w).is_err());
    }

    #[test]
    fn a_partial_head_waits_and_other_codings_are_refused() {
        let mut w = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: h\r\n"[..]);
        assert!(request(&mut w, false).unwrap().is_none());
        let mut w = BytesMut::from(
            &b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"[..],
        );
        assert!(request(&mut w, false).is_err());
        let mut w = BytesMut::from(&b"GET / HTTP/1.1\r\nX: y\r\n\r\n"[..]);
        assert!(request(&mut w, false).is_err(), "no Host, no authority");
    }

    #[test]
    fn a_response_head_is_written_without_hop_by_hop_fields() {
        let mut fields = http::HeaderMap::new();
        fields.insert("x-a", http::HeaderValue::from_static("1"));
        fields.insert("connection", http::HeaderValue::from_static("close"));
        fields.insert(
            "transfer-encoding",
            http::HeaderValue::from_static("identity"),
        );
        let mut out = BytesMut::new();
        write_head(&mut out, http::StatusCode::OK, &fields, true, false);
        assert_eq!(
            &out[..],
            b"HTTP/1.1 200 OK\r\nx-a: 1\r\ntransfer-encoding: chunked\r\n\r\n"
        );
    }
}
