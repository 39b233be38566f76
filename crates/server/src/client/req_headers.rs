//! What Lacquer does to a request's headers before VCL sees them, as
//! Varnish does: the client's address appended to `X-Forwarded-For`, and
//! `Accept-Encoding` washed to `gzip` (or removed) on the way to a lookup;
//! and, Lacquer's own, a cluster peer's mark taken off (and believed only
//! when it verifies).

use crate::host::req::{forwarded_for, Req};
use crate::transport::io::Client;
use bytes::Bytes;
use lacquer_shm::Tag;

/// Client address appended to `X-Forwarded-For`, as Varnish does before
/// `vcl_recv`.
pub(super) fn append_forwarded_for(req: &mut Req, c: &Client) {
    // Repeated lines are one list: each proxy before us counts.
    let prev = req.head.headers.get_joined("x-forwarded-for");
    let value = match &prev {
        Some(prev) => Bytes::from(forwarded_for(Some(prev), &c.addrs.client_ip)),
        // The connection's one copy.
        None => c.addrs.client_ip_value(),
    };
    if req.log.active() {
        if let Some(prev) = &prev {
            req.log.header(Tag::ReqUnset, b"X-Forwarded-For", prev);
        }
        req.log.header(Tag::ReqHeader, b"X-Forwarded-For", &value);
    }
    req.head.headers.set("X-Forwarded-For", value);
}

/// On a TLS connection, `X-Forwarded-Proto: https` (whatever the client
/// sent), so that VCL and backends see how the client came, as they did
/// behind a TLS proxy.
pub(super) fn set_forwarded_proto(req: &mut Req, c: &Client) {
    if c.addrs.tls.is_none() {
        return;
    }
    if let Some(prev) = req.head.headers.get("x-forwarded-proto") {
        if prev.as_ref() == b"https" {
            return;
        }
        req.log
            .header(Tag::ReqUnset, b"X-Forwarded-Proto", &prev.clone());
    }
    req.log
        .header(Tag::ReqHeader, b"X-Forwarded-Proto", b"https");
    req.head
        .headers
        .set("X-Forwarded-Proto", Bytes::from_static(b"https"));
}

/// On the way to a lookup, as Varnish does with `http_gzip_support`:
/// `Accept-Encoding` becomes `gzip` for a client that takes it and goes
/// for one that does not (the cache keeps one gzip'd variant and
/// inflates on delivery). The client's own coding (br, zstd) is chosen
/// first, from the field as it came out of `vcl_recv`.
pub(super) fn normalise_accept_encoding(p: &lacquer_core::params::Params, req: &mut Req) {
    crate::host::coding::choose(p, req);
    let current = req.head.headers.get("accept-encoding").cloned();
    let gzip = crate::host::req::can_gzip(&req.head.headers);
    if current.as_deref() == Some(b"gzip".as_slice()) || (current.is_none() && !gzip) {
        return;
    }
    if let Some(old) = &current {
        req.log.header(Tag::ReqUnset, b"Accept-Encoding", old);
    }
    if gzip {
        req.log.header(Tag::ReqHeader, b"Accept-Encoding", b"gzip");
        req.head
            .headers
            .set("Accept-Encoding", Bytes::from_static(b"gzip"));
    } else {
        req.head.headers.remove("accept-encoding");
    }
}

/// Takes a cluster peer's mark (`Lacquer-Peer`) off the request: neither
/// VCL nor a backend sees it. The request is a peer's only when the
/// daemon is in a cluster and the mark verifies with its secret.
pub(super) fn take_peer_mark(sh: &crate::Shared, req: &mut Req) {
    let Some(mark) = req.head.headers.get(lacquer_cluster::peer::FIELD).cloned() else {
        return;
    };
    req.head.headers.remove(lacquer_cluster::peer::FIELD);
    req.log.header(Tag::ReqUnset, b"Lacquer-Peer", &mark);
    let Some(peers) = &sh.cluster else {
        return;
    };
    let now = lacquer_cluster::seal::now_ms();
    let h = &req.head;
    match peers.cluster.key.verify_mark(&mark, now, &h.method, &h.url) {
        Some(_) => req.from_peer = true,
        None => peers.count_refused_mark(),
    }
}
