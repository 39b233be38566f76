//! A client request's own log records as varnishd writes them: how its
//! transaction starts (received from a client, or an ESI include), a
//! restart that goes on in a new transaction, and what a lookup found.
//! The response's records are `resp_log`'s.

use crate::host::req::{IncludeCtx, Req};
use crate::transport::io::Client;
use crate::Shared;
use lacquer_cache::object::Object;
use lacquer_core::ids::next_vxid;
use lacquer_http::RequestHead;
use lacquer_shm::packed::HeadKind;
use lacquer_shm::record::txn;
use lacquer_shm::{Side, Tag, Txn};

/// Starts the log of a request a client sent on session `sess`, as
/// varnishd does: `Begin`, `Start` (an HTTP/2 request's protocol first),
/// `Req`, `VCL_use`, `ReqStart` and the head as received.
pub(crate) fn received(
    log: &mut Txn,
    sess: &mut Txn,
    c: &Client,
    vcl: &str,
    head: &RequestHead,
    t_req: f64,
) {
    if !log.active() {
        return;
    }
    let xid = log.vxid();
    sess.link(&txn::REQ, xid, &txn::RXREQ);
    log.begin(&txn::REQ, sess.vxid(), &txn::RXREQ, t_req);
    log.timestamp(&lacquer_shm::packed::stamp::START, t_req);
    let multiplexed = matches!(
        head.version,
        lacquer_http::Version::Http2 | lacquer_http::Version::Http3
    );
    if multiplexed {
        // As varnishd logs a stream's request: its protocol first.
        log.bytes(Tag::ReqProtocol, head.version.as_str().as_bytes());
    }
    log.timestamp(&lacquer_shm::packed::stamp::REQ, t_req);
    log.bytes(Tag::VCL_use, vcl.as_bytes());
    req_start(log, c);
    if multiplexed {
        log.head(
            HeadKind::Req,
            &as_protocol(&head.raw, head.version.as_str()),
        );
    } else {
        log.head(HeadKind::Req, &head.raw);
    }
}

/// Starts the log of an ESI include, as varnishd does: its URL set on a
/// copy of the page's request, its encoding taken out, then the request
/// as it starts.
pub(crate) fn include_started(
    log: &mut Txn,
    c: &Client,
    head: &RequestHead,
    ctx: &IncludeCtx,
    parent_xid: u64,
    t_req: f64,
) {
    if !log.active() {
        return;
    }
    log.begin(&txn::REQ, parent_xid, &txn::ESI, t_req);
    log.timestamp(&lacquer_shm::packed::stamp::START, t_req);
    log.bytes(Tag::ReqURL, &head.url);
    if let Some(v) = &ctx.dropped_encoding {
        log.header(Tag::ReqUnset, b"Accept-Encoding", v);
    }
    req_start(log, c);
    log.head(HeadKind::Req, &head.raw);
}

/// The `ReqStart` record: the client's address and port, and the
/// listener's name.
fn req_start(log: &mut Txn, c: &Client) {
    log.with(Tag::ReqStart, |b| {
        let a = &c.addrs;
        b.extend_from_slice(a.client_ip.bytes());
        b.push(b' ');
        lacquer_shm::record::push_u64(b, u64::from(a.client.port()));
        b.push(b' ');
        b.extend_from_slice(a.listener.as_bytes());
    });
}

/// An HTTP/2 or HTTP/3 stream's request head (kept in HTTP/1.1's shape)
/// with the protocol it came in, for the log (`ReqProtocol HTTP/2.0`, which
/// `lacquer ncsa`'s `%H` and `%r` print, as varnishd logs it).
fn as_protocol(raw: &[u8], proto: &str) -> Vec<u8> {
    let line_end = memchr::memchr(b'\n', raw).map_or(raw.len(), |i| i + 1);
    let (line, rest) = raw.split_at(line_end);
    let line = line.strip_suffix(b"\r\n").unwrap_or(line);
    let mut out = Vec::with_capacity(raw.len());
    match line.strip_suffix(b"HTTP/1.1") {
        Some(start) => {
            out.extend_from_slice(start);
            out.extend_from_slice(proto.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        None => return raw.to_vec(),
    }
    out.extend_from_slice(rest);
    out
}

/// A restart goes on as a transaction of its own, as varnishd logs it:
/// this one ends with a link to the next, which starts with the request
/// as it stands and has the next vxid (its `X-Varnish`).
pub(crate) fn restart(c: &Client, sh: &Shared, req: &mut Req) {
    let (old, new) = (req.xid, next_vxid());
    let now = lacquer_core::time::now();
    req.log.link(&txn::REQ, new, &txn::RESTART);
    req.log.end();
    req.log = sh.txn(new, Side::Client);
    req.xid = new;
    if !req.log.active() {
        return;
    }
    req.log.begin(&txn::REQ, old, &txn::RESTART, now);
    req.log.timestamp(&lacquer_shm::packed::stamp::START, now);
    req_start(&mut req.log, c);
    let h = &req.head;
    let mut head = Vec::with_capacity(h.raw.len() + 64);
    head.extend_from_slice(&h.method);
    head.push(b' ');
    head.extend_from_slice(&h.url);
    head.push(b' ');
    head.extend_from_slice(h.version.as_str().as_bytes());
    head.extend_from_slice(b"\r\n");
    h.headers.write_to(&mut head);
    head.extend_from_slice(b"\r\n");
    req.log.head(HeadKind::Req, &head);
}

/// `Hit`, `HitMiss` or `HitPass`: the object found and its remaining
/// times.
pub(crate) fn hit(req: &mut Req, tag: Tag, obj: &Object, now: f64) {
    if !req.log.wants(tag) {
        return;
    }
    let t = obj.timers();
    let left = t.t_origin + t.ttl - now;
    let secs: &[f64] = if tag == Tag::Hit {
        &[left, t.grace, t.keep]
    } else {
        &[left]
    };
    req.log.vxid_and_secs(tag, obj.xid(), secs);
}
