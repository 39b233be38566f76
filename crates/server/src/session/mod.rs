//! A client session: reads request heads (within `timeout_idle`), refuses
//! malformed ones with a clear 4xx and a closed connection, hands good ones
//! to the request state machine in order (so pipelined requests are
//! answered in order), and ends the connection with a close reason.

pub(crate) mod admission;
pub(crate) mod h2;
pub(crate) mod h3;
mod proxy;
pub(crate) mod tasks;

use crate::client::request;
use crate::host::req::Outcome;
use crate::transport::io::{Client, ClientStream, ReadError, SessAddrs};
use crate::Shared;
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::ids::next_vxid;
use lacquer_core::params::{Feature, Params};
use lacquer_http::{parse_request, RequestError};
use lacquer_shm::record::{push_fixed3, push_fixed6, push_ip, push_u64, txn};
use lacquer_shm::{Side, Tag, Txn};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

/// Serves one client connection until it closes; with `proxy`, the
/// connection starts with a PROXY header.
pub(crate) async fn serve_connection(
    sh: &Arc<Shared>,
    stream: Box<dyn ClientStream>,
    addrs: Arc<SessAddrs>,
    proxy: bool,
) {
    COUNTERS.inc(Counter::sess_conn);
    COUNTERS.inc(Counter::s_sess);
    let t_open = lacquer_core::time::now();
    let fd = stream
        .socket()
        .map_or(-1, |s| std::os::fd::AsRawFd::as_raw_fd(&s));
    let mut c = Client::new(stream, addrs);
    let mut log = sh.txn(next_vxid(), Side::Client);
    log.begin(&txn::SESS, 0, &txn::HTTP1, t_open);
    log_open(&mut log, &c.addrs, t_open, u64::try_from(fd).ok());
    let reason = match proxy {
        // Boxed, as the other paths few connections take.
        true => match Box::pin(crate::session::proxy::read_header(sh, &mut c, &mut log)).await {
            Ok(()) => serve_requests(sh, &mut c, &mut log).await,
            Err(reason) => reason,
        },
        false => serve_requests(sh, &mut c, &mut log).await,
    };
    reason.count();
    log_close(&mut log, reason, t_open);
    if matches!(reason, CloseReason::SendTimeout | CloseReason::TxError) {
        // The client is gone or stuck: reset rather than leave the kernel
        // holding (and retrying) what it could not take.
        if let Some(socket) = c.stream().and_then(|s| s.socket()) {
            let _ = socket2::SockRef::from(&socket).set_linger(Some(std::time::Duration::ZERO));
        }
        return;
    }
    // A lingering close says it is done first, then reads what the
    // client still sends; a TLS stream says goodbye in its own record.
    if let Some(stream) = c
        .stream()
        .filter(|s| reason.is_error() || s.needs_shutdown())
    {
        let _ = stream.shutdown().await;
    }
    if reason.is_error() {
        linger(sh, &mut c).await;
    }
}

/// Logs a session's start (`SessOpen`, with its socket's descriptor where
/// it has one of its own), then lets its log go until its end.
pub(crate) fn log_open(log: &mut Txn, a: &SessAddrs, t_open: f64, fd: Option<u64>) {
    if !log.active() {
        return;
    }
    // Written by hand: the formatter's float and numbers cost more than
    // the rest of the record.
    log.with(Tag::SessOpen, |b| {
        b.extend_from_slice(a.client_ip.bytes());
        b.push(b' ');
        push_u64(b, u64::from(a.remote.port()));
        b.push(b' ');
        b.extend_from_slice(a.listener.as_bytes());
        b.push(b' ');
        push_ip(b, a.local.ip());
        b.push(b' ');
        push_u64(b, u64::from(a.local.port()));
        b.push(b' ');
        push_fixed6(b, t_open);
        b.push(b' ');
        match fd {
            Some(fd) => push_u64(b, fd),
            None => b.extend_from_slice(b"-1"),
        }
    });
    // A session's records wait for its end; say it began now, and hold
    // no request-sized buffer while the connection idles.
    log.release();
}

/// Logs a session's end (`SessClose`: why, and how long it lasted) and
/// ends its transaction.
pub(crate) fn log_close(log: &mut Txn, reason: CloseReason, t_open: f64) {
    if log.active() {
        let t = lacquer_core::time::now() - t_open;
        log.with(Tag::SessClose, |b| {
            b.extend_from_slice(reason.name().as_bytes());
            b.push(b' ');
            push_fixed3(b, t);
        });
    }
    log.end();
}

/// Accounts for a TLS connection that ended with its handshake: a
/// session of its own in the log (SessOpen, the error, SessClose) and
/// its close reason counted.
pub(crate) fn handshake_failed(
    sh: &Shared,
    addrs: &SessAddrs,
    e: &crate::transport::tls::HandshakeError,
) {
    COUNTERS.inc(Counter::sess_conn);
    let (reason, why) = e.close();
    reason.count();
    let t_open = lacquer_core::time::now();
    let mut log = sh.txn(next_vxid(), Side::Client);
    log.begin(&txn::SESS, 0, &txn::HTTP1, t_open);
    if log.active() {
        log.fmt(
            Tag::SessOpen,
            format_args!(
                "{} {} {} {} {} {:.6} -1",
                addrs.client_ip,
                addrs.remote.port(),
                addrs.listener,
                addrs.local.ip().to_canonical(),
                addrs.local.port(),
                t_open
            ),
        );
        if let Some(why) = why {
            log.fmt(Tag::Error, format_args!("{why}"));
        }
        log.fmt(Tag::SessClose, format_args!("{} 0.000", reason.name()));
    }
    log.end();
}

/// Reads and drops what the client still sends for a moment after we
/// closed our side, so that closing with unread input does not reset the
/// connection before the client has read our answer.
async fn linger(sh: &Shared, c: &mut Client) {
    let limit = Params::duration(c.sess.linger.or(sh.params.timeout_linger()));
    let end = Instant::now() + limit;
    for _ in 0..16 {
        c.rbuf.clear();
        let left = end.saturating_duration_since(Instant::now());
        match c.read_more(left).await {
            Ok(n) if n > 0 => continue,
            _ => return,
        }
    }
}

/// The time a request head may still be waited for: `timeout_idle` from
/// the first wait that was not over at once (a request already there, as
/// on a busy keep-alive connection, reads no clock), or `timeout_linger`
/// first for a session herded between requests.
struct HeadWait {
    /// `timeout_idle` and `timeout_linger`, in nanoseconds (this lives
    /// in every connection's task).
    idle: u64,
    linger: u64,
    since: Option<Instant>,
    /// The last limit given was the linger, shorter than what was left.
    lingered: bool,
}

impl HeadWait {
    /// Waits of `idle` and `linger` seconds (a parameter's value: a NaN
    /// or a negative one is none), a century at most, so that a deadline
    /// is always a time. Converted by one multiplication: this runs for
    /// every request.
    fn new(idle: f64, linger: f64) -> HeadWait {
        const CENTURY: f64 = 100.0 * 365.0 * 86_400.0;
        let nanos = |secs: f64| match secs.is_nan() {
            true => 0,
            false => (secs.clamp(0.0, CENTURY) * 1e9) as u64,
        };
        HeadWait {
            idle: nanos(idle),
            linger: nanos(linger),
            since: None,
            lingered: false,
        }
    }

    /// When the wait starting now ends.
    fn deadline(&mut self, herd: bool) -> Instant {
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        let idle_end = since + Duration::from_nanos(self.idle);
        let linger_end = now + Duration::from_nanos(self.linger);
        self.lingered = herd && linger_end < idle_end;
        if self.lingered {
            linger_end
        } else {
            idle_end
        }
    }
}

async fn serve_requests(sh: &Arc<Shared>, c: &mut Client, log: &mut Txn) -> CloseReason {
    let mut served = false;
    // The program this session's requests run, kept from one to the next,
    // and the connection's facts they read.
    let mut program = None;
    let conn = crate::host::req::ConnInfo::of(c);
    loop {
        let limits = sh.request_limits();
        let idle = c.sess.idle.or(sh.params.timeout_idle());
        let linger = c.sess.linger.or(sh.params.timeout_linger());
        let mut wait = HeadWait::new(idle, linger);
        // A keep-alive session with nothing to read yet waits
        // `timeout_linger` first; past it, it counts as herded (as
        // Varnish hands such a session to its waiter).
        let mut herd = served && c.rbuf.is_empty();
        let mut read = false;
        let head = loop {
            // HTTP/2, by ALPN or by prior knowledge (its preface first).
            if !served && sh.params.has(Feature::http2) {
                let by_alpn = c.addrs.tls.as_ref().and_then(|t| t.alpn.as_deref()) == Some("h2");
                let preface = h2::is_preface(&c.rbuf);
                if by_alpn || preface == Some(true) {
                    return Box::pin(h2::serve_connection(sh, c, log)).await;
                }
                if preface.is_none() && !c.rbuf.is_empty() {
                    // Not enough yet to tell: read on.
                    match c.read_head_more(|| wait.deadline(false)).await {
                        Ok(n) if n > 0 => continue,
                        Err(ReadError::Timeout) => return CloseReason::RxTimeout,
                        _ => return CloseReason::RemClose,
                    }
                }
            }
            // Judged before parsing takes the head out of the buffer.
            let not_http = !served && names_no_version(&c.rbuf);
            match parse_request(&mut c.rbuf, &limits) {
                Ok(Some(head)) => break head,
                Ok(None) => {}
                // A first line that names no HTTP version at all is not
                // HTTP/1 (a broken HTTP/2 preface, say): closed
                // unanswered, as RFC 9113 §3.4 asks of a wrong preface.
                Err(_) if not_http => {
                    COUNTERS.inc(Counter::client_req_400);
                    return CloseReason::RxJunk;
                }
                Err(e) => return refuse(sh, c, &e, log).await,
            }
            read = true;
            match c.read_head_more(|| wait.deadline(herd)).await {
                Ok(0) if c.rbuf.is_empty() => return CloseReason::RemClose,
                Ok(0) => return CloseReason::RxJunk,
                Ok(_) => herd = false,
                Err(ReadError::Timeout) if herd && wait.lingered => {
                    COUNTERS.inc(Counter::sess_herd);
                    herd = false;
                    // An idle session holds no program (nor buffers).
                    program = None;
                }
                // Nothing of a next request came: idle, as varnishd says
                // it; part of one: a receive timeout.
                Err(ReadError::Timeout) if c.rbuf.is_empty() => return CloseReason::RxCloseIdle,
                Err(ReadError::Timeout) => return CloseReason::RxTimeout,
                Err(ReadError::Io) => return CloseReason::RemClose,
            }
        };
        if !served && sh.params.has(Feature::http2) && h2::wants_upgrade(c, &head) {
            return Box::pin(h2::upgrade(sh, c, head, log)).await;
        }
        if !read {
            // Sent with the request before it (pipelined).
            COUNTERS.inc(Counter::sess_readahead);
        }
        // A place among the requests at work (thread_pool_max), waiting
        // in the queue if need be; none left: the connection is dropped.
        let place = match sh.admission.try_admit(&sh.params) {
            Some(place) => Some(place),
            // Boxed: the wait is rare, and the session's state stays small.
            None => Box::pin(sh.admission.admit(&sh.params, !served)).await,
        };
        let Some(_place) = place else {
            return CloseReason::Overload;
        };
        served = true;
        let vcl = sh.active.current(&mut program);
        match request::handle(c, sh, vcl, &conn, head, log).await {
            Outcome::KeepAlive => continue,
            Outcome::Close(reason) => return reason,
        }
    }
}

/// The bytes of a session's state (its task's future): what one open
/// connection holds (`MEMPOOL.sess0.sz_wanted`).
#[allow(unreachable_code, clippy::diverging_sub_expression)]
pub(crate) fn state_size() -> usize {
    fn size<F: FnOnce() -> R, R>(_: &F) -> usize {
        std::mem::size_of::<R>()
    }
    let session = || {
        serve_connection(
            unreachable!(),
            unreachable!(),
            unreachable!(),
            unreachable!(),
        )
    };
    size(&session)
}

/// Whether a request line has a third word that is no HTTP version
/// (`GET / HTTP/9.9` and `GET /` are HTTP, if bad; `INVALID CONNECTION
/// PREFACE` is not).
fn names_no_version(rbuf: &[u8]) -> bool {
    let Some(end) = memchr::memchr(b'\n', rbuf) else {
        return false;
    };
    let line = &rbuf[..end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // Past two words and the spaces after each (one pass over the method
    // and the URL, for every new connection's first request).
    let mut at = 0;
    for _ in 0..2 {
        while line.get(at) == Some(&b' ') {
            at += 1;
        }
        while line.get(at).is_some_and(|&b| b != b' ') {
            at += 1;
        }
    }
    while line.get(at) == Some(&b' ') {
        at += 1;
    }
    at < line.len() && !line[at..].starts_with(b"HTTP/")
}

/// Answers a request that could not be parsed, then closes.
async fn refuse(sh: &Shared, c: &mut Client, e: &RequestError, log: &mut Txn) -> CloseReason {
    let status = e.status();
    if log.active() {
        let line = c.rbuf[..].split(|&b| b == b'\n').next().unwrap_or_default();
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        log.bytes(Tag::HttpGarbage, &line[..line.len().min(64)]);
        log.fmt(Tag::Error, format_args!("{status} {}", e.reason()));
    }
    COUNTERS.inc(match status {
        414 => Counter::client_req_414,
        417 => Counter::client_req_417,
        431 => Counter::client_req_431,
        _ => Counter::client_req_400,
    });
    let body = format!("{status} {}\n", e.reason());
    let msg = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        lacquer_http::reason_phrase(status),
        body.len()
    );
    let idle = Params::duration(sh.params.idle_send_timeout());
    let _ = c.write_small(msg.as_bytes(), idle).await;
    match status {
        414 | 431 => CloseReason::RxOverflow,
        _ => CloseReason::RxBad,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_head_waits_limits_are_whole_nanoseconds_of_the_parameters() {
        let w = super::HeadWait::new(5.0, 0.05);
        assert_eq!((w.idle, w.linger), (5_000_000_000, 50_000_000));
        let w = super::HeadWait::new(f64::NAN, -1.0);
        assert_eq!((w.idle, w.linger), (0, 0), "unset and negative: no wait");
        let w = super::HeadWait::new(f64::INFINITY, 1e300);
        let century = 100 * 365 * 86_400 * 1_000_000_000u64;
        assert_eq!((w.idle, w.linger), (century, century));
    }

    #[test]
    fn a_line_that_names_no_version_is_not_http() {
        use super::names_no_version as not_http;
        assert!(not_http(b"INVALID CONNECTION PREFACE\r\n\r\n"));
        assert!(!not_http(b"GET / HTTP/1.2\r\n\r\n"));
        assert!(!not_http(b"GET /\r\n\r\n"));
        assert!(!not_http(b"GET / HT"));
        assert!(not_http(b"  GET  /x  HTTQ/1.1  \r\n"));
        assert!(!not_http(b"  GET  /x  HTTP/1.1  \r\n"));
        assert!(!not_http(b"GET /x \r\n"));
        assert!(!not_http(b"\r\nGET / NOPE\r\n"), "an empty first line");
        assert!(not_http(b"a b c\n"));
        assert!(!not_http(b"a b\n"));
    }

    /// Every connection holds its session's state for as long as it is
    /// open, in its session task (which keeps it while idle, between
    /// connections): an idle keep-alive connection, or a kept task, costs
    /// this much memory.
    /// The rare paths (pass, pipe, ESI, inflating, 416, a PROXY header,
    /// waiting for a place among the requests at work) are boxed apart
    /// so that they do not grow it; a change that inlines one fails here.
    #[test]
    #[allow(unreachable_code, clippy::diverging_sub_expression)]
    fn a_connections_state_stays_small() {
        let bytes = super::state_size();
        assert!(bytes <= 6 * 1024 + 64, "a session's state is {bytes} bytes");
    }
}
