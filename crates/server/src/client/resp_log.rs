//! The log of a response as varnishd writes it: as built, before the
//! method that may change it (`vcl_deliver`, `vcl_synth`), then each change
//! as it is made, then what delivery changes (see [`object_tail`]). The
//! client steps log the head as built; VCL's edits are logged where they
//! are made (`host::client_host`); delivery logs the tail.

use crate::client::conditional::UNKNOWN_TOTAL;
use crate::host::filters::Filters;
use crate::host::req::Req;
use crate::host::resp::Resp;
use crate::transport::io::WireBody;
use crate::Shared;
use lacquer_cache::object::Object;
use lacquer_http::Headers;
use lacquer_shm::packed::HeadKind;
use lacquer_shm::record::push_u64;
use lacquer_shm::Tag;
use std::io::Write;

/// Logs an object's response as `vcl_deliver` first sees it, as varnishd
/// logs it: the stored status and fields (or the response's own), then
/// `X-Varnish`, `Age`, `Via` and, for a 200 without one, `Accept-Ranges`.
/// Its changes are logged from then on as they are made (VCL's edits, then
/// what delivery does: see [`object_tail`]).
pub(crate) fn log_as_built(req: &mut Req, sh: &Shared, obj: &Object, resp: &Resp, now: f64) {
    let mut head = Vec::with_capacity(obj.head_len() * 4 + 160);
    match &resp.headers {
        Some(fields) => {
            let status = resp.status % 1000;
            let _ = write!(head, "HTTP/1.1 {status:03} ");
            head.extend_from_slice(if resp.reason.is_empty() {
                obj.reason()
            } else {
                &resp.reason
            });
            head.extend_from_slice(b"\r\n");
            fields.write_to(&mut head);
        }
        None => obj.write_head(&mut head),
    }
    let accept_ranges =
        resp.status % 1000 == 200 && sh.params.http_range_support() && !resp.has_accept_ranges(obj);
    let obj_xid = resp.hit.then(|| obj.xid());
    log_head_as_built(req, sh, head, obj_xid, obj.age(now), accept_ranges);
}

/// Logs `head` (a status line and fields) with the delivery fields
/// varnishd adds before `vcl_deliver`: `X-Varnish`, `Age`, `Via` and,
/// with `accept_ranges`, `Accept-Ranges`.
pub(crate) fn log_head_as_built(
    req: &mut Req,
    sh: &Shared,
    mut head: Vec<u8>,
    obj_xid: Option<u64>,
    age: u64,
    accept_ranges: bool,
) {
    head.extend_from_slice(b"X-Varnish: ");
    push_u64(&mut head, req.xid);
    if let Some(xid) = obj_xid {
        head.push(b' ');
        push_u64(&mut head, xid);
    }
    head.extend_from_slice(b"\r\nAge: ");
    push_u64(&mut head, age);
    head.extend_from_slice(b"\r\nVia: ");
    head.extend_from_slice(sh.via.as_bytes());
    head.extend_from_slice(b"\r\n");
    if accept_ranges {
        head.extend_from_slice(b"Accept-Ranges: bytes\r\n");
    }
    head.extend_from_slice(b"\r\n");
    req.log.head(HeadKind::Resp, &head);
}

/// The fields of a written head that delivery may change, as they were
/// before it did.
pub(crate) struct HeadFields {
    etag: Option<Vec<u8>>,
    encoding: Option<Vec<u8>>,
    length: Option<Vec<u8>>,
    accept_ranges: bool,
}

impl HeadFields {
    pub(crate) fn of(head: &[u8]) -> HeadFields {
        HeadFields {
            etag: field_in(head, b"etag").map(<[u8]>::to_vec),
            encoding: field_in(head, b"content-encoding").map(<[u8]>::to_vec),
            length: field_in(head, b"content-length").map(<[u8]>::to_vec),
            accept_ranges: field_in(head, b"accept-ranges").is_some(),
        }
    }
}

impl HeadFields {
    /// The same, read from a list of fields.
    pub(crate) fn of_fields(h: &Headers) -> HeadFields {
        let value = |name: &str| h.get(name).map(|v| v.to_vec());
        HeadFields {
            etag: value("etag"),
            encoding: value("content-encoding"),
            length: value("content-length"),
            accept_ranges: h.contains("accept-ranges"),
        }
    }
}

/// The value of the first `name` field of a written head.
fn field_in<'h>(head: &'h [u8], name: &[u8]) -> Option<&'h [u8]> {
    head.split(|&b| b == b'\n').skip(1).find_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let value = line.get(name.len() + 1..)?;
        (line[..name.len()].eq_ignore_ascii_case(name) && line[name.len()] == b':')
            .then(|| value.trim_ascii())
    })
}

/// What delivery did to an object's response after `vcl_deliver`.
pub(crate) struct Tail {
    pub before: HeadFields,
    /// Answered 304.
    pub cond: bool,
    pub window: Option<(u64, u64, u64)>,
    /// Answered 416: the body's length.
    pub unsatisfiable: Option<u64>,
    pub filters: Filters,
    pub length_in_head: bool,
    pub wire: WireBody,
    pub h2: bool,
}

/// The end of an object's response's log, whose head was logged as built
/// and changed by `vcl_deliver` (see [`log_as_built`]): what delivery
/// changes, in varnishd's order — the status of a 304, the filters and
/// what they change (the coding, a weakened `ETag`, a range's status and
/// `Content-Range`), the length, then the framing and connection fields.
pub(crate) fn object_tail(req: &mut Req, head: &[u8], t: &Tail) {
    let log = &mut req.log;
    if !log.active() {
        return;
    }
    let status = |log: &mut lacquer_shm::Txn, code: &[u8], reason: &[u8]| {
        log.bytes(Tag::RespProtocol, b"HTTP/1.1");
        log.bytes(Tag::RespStatus, code);
        log.bytes(Tag::RespReason, reason);
    };
    if t.cond {
        status(log, b"304", b"Not Modified");
    }
    t.filters.log(log);
    let after = HeadFields::of(head);
    if let (Some(old), false) = (&t.before.encoding, after.encoding == t.before.encoding) {
        log.header(Tag::RespUnset, b"Content-Encoding", old);
        if let Some(new) = &after.encoding {
            log.header(Tag::RespHeader, b"Content-Encoding", new);
        }
    }
    if let (Some(old), Some(new)) = (&t.before.etag, &after.etag) {
        if old != new {
            log.header(Tag::RespUnset, b"ETag", old);
            log.header(Tag::RespHeader, b"ETag", new);
        }
    }
    if let Some((start, end, total)) = t.window {
        let range = if total == UNKNOWN_TOTAL {
            format!("bytes {start}-{end}/*")
        } else {
            format!("bytes {start}-{end}/{total}")
        };
        log.header(Tag::RespHeader, b"Content-Range", range.as_bytes());
        status(log, b"206", b"Partial Content");
    }
    if let Some(total) = t.unsatisfiable {
        log.bytes(Tag::Debug, b"RANGE_FAIL low range beyond object");
        let range = format!("bytes */{total}");
        log.header(Tag::RespHeader, b"Content-Range", range.as_bytes());
        status(log, b"416", b"Requested Range Not Satisfiable");
    }
    if t.before.accept_ranges && !after.accept_ranges {
        log.header(Tag::RespUnset, b"Accept-Ranges", b"bytes");
    }
    if !t.length_in_head {
        if let Some(old) = &t.before.length {
            log.header(Tag::RespUnset, b"Content-Length", old);
        }
        if let WireBody::Length(n) = t.wire {
            log.header(Tag::RespHeader, b"Content-Length", n.to_string().as_bytes());
        }
    }
    log_transport_fields(log, head, t.h2);
}

/// What the transport changes last: HTTP/2 its protocol, HTTP/1 its
/// framing and connection fields.
fn log_transport_fields(log: &mut lacquer_shm::Txn, head: &[u8], h2: bool) {
    if h2 {
        log.bytes(Tag::RespProtocol, b"HTTP/2.0");
    } else {
        log_framing_fields(log, head);
    }
}

/// Logs the head's `Connection` and `Transfer-Encoding` fields, which the
/// HTTP/1 delivery adds last (in that order, as varnishd logs them).
fn log_framing_fields(log: &mut lacquer_shm::Txn, head: &[u8]) {
    for name in [&b"connection"[..], b"transfer-encoding"] {
        if let Some(value) = field_in(head, name) {
            let name: &[u8] = if name == b"connection" {
                b"Connection"
            } else {
                b"Transfer-Encoding"
            };
            log.header(Tag::RespHeader, name, value);
        }
    }
}

/// The end of a synthetic response's log, whose head was logged as built
/// and changed by `vcl_synth` (see `Resp::log_as_built`): what delivery
/// adds, as varnishd logs it — its length, where its body is kept, the
/// filters, and the framing and connection fields.
pub(crate) fn synthetic_tail(
    req: &mut Req,
    head: &[u8],
    wire: WireBody,
    filters: Filters,
    h2: bool,
) {
    if !req.log.active() {
        return;
    }
    if let WireBody::Length(n) = wire {
        req.log
            .header(Tag::RespHeader, b"Content-Length", n.to_string().as_bytes());
    }
    req.log.bytes(Tag::Storage, b"malloc Transient");
    filters.log(&mut req.log);
    log_transport_fields(&mut req.log, head, h2);
}
