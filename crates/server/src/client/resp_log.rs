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
/// The head is written in `room` (the connection's write buffer, free
/// until the response is written): nothing is allocated for it.
pub(crate) fn log_as_built(
    req: &mut Req,
    sh: &Shared,
    obj: &Object,
    resp: &Resp,
    now: f64,
    room: &mut Vec<u8>,
) {
    room.clear();
    req.built_head = None;
    match &resp.headers {
        Some(fields) => {
            let status = resp.status.wire();
            let _ = write!(room, "HTTP/1.1 {status:03} ");
            room.extend_from_slice(if resp.reason.is_empty() {
                obj.reason()
            } else {
                &resp.reason
            });
            room.extend_from_slice(b"\r\n");
            fields.write_to(room);
        }
        None => obj.write_head(room),
    }
    let written = room.len();
    let accept_ranges =
        resp.status.wire() == 200 && sh.params.http_range_support() && !resp.has_accept_ranges(obj);
    let obj_xid = resp.hit.then(|| obj.xid());
    log_head_as_built(req, sh, room, obj_xid, obj.age(now), accept_ranges);
    // The object's head stays: its delivery, if nothing changes it, is
    // written after it (see `deliver`).
    room.truncate(written);
    if resp.headers.is_none() {
        req.built_head = Some((obj as *const Object as usize, written));
    }
}

/// Logs `head` (a status line and fields) with the delivery fields
/// varnishd adds before `vcl_deliver`: `X-Varnish`, `Age`, `Via` and,
/// with `accept_ranges`, `Accept-Ranges` (written after it in `head`).
pub(crate) fn log_head_as_built(
    req: &mut Req,
    sh: &Shared,
    head: &mut Vec<u8>,
    obj_xid: Option<u64>,
    age: u64,
    accept_ranges: bool,
) {
    head.extend_from_slice(b"X-Varnish: ");
    push_u64(head, req.xid);
    if let Some(xid) = obj_xid {
        head.push(b' ');
        push_u64(head, xid);
    }
    head.extend_from_slice(b"\r\nAge: ");
    push_u64(head, age);
    head.extend_from_slice(b"\r\nVia: ");
    head.extend_from_slice(sh.via.as_bytes());
    head.extend_from_slice(b"\r\n");
    if accept_ranges {
        head.extend_from_slice(b"Accept-Ranges: bytes\r\n");
    }
    head.extend_from_slice(b"\r\n");
    req.log.head(HeadKind::Resp, head);
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
    /// Read from a written head, in one pass over its lines.
    pub(crate) fn of(head: &[u8]) -> HeadFields {
        let mut fields = HeadFields {
            etag: None,
            encoding: None,
            length: None,
            accept_ranges: false,
        };
        for line in head.split(|&b| b == b'\n').skip(1) {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
            let slot = if name.eq_ignore_ascii_case(b"etag") {
                &mut fields.etag
            } else if name.eq_ignore_ascii_case(b"content-encoding") {
                &mut fields.encoding
            } else if name.eq_ignore_ascii_case(b"content-length") {
                &mut fields.length
            } else {
                fields.accept_ranges |= name.eq_ignore_ascii_case(b"accept-ranges");
                continue;
            };
            if slot.is_none() {
                *slot = Some(value.to_vec());
            }
        }
        fields
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

/// What delivery did to an object's response after `vcl_deliver`.
pub(crate) struct Tail {
    /// The fields delivery may change, as they were, where it changes
    /// any (None: it changes none of them).
    pub before: Option<HeadFields>,
    /// Answered 304.
    pub cond: bool,
    pub window: Option<(u64, u64, u64)>,
    /// Answered 416: the body's length.
    pub unsatisfiable: Option<u64>,
    pub filters: Filters,
    pub length_in_head: bool,
    pub sent: Sent,
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
    // What delivery changed, where it changed anything.
    let changed = t
        .before
        .as_ref()
        .map(|before| (before, HeadFields::of(head)));
    if let Some((before, after)) = &changed {
        if let (Some(old), false) = (&before.encoding, after.encoding == before.encoding) {
            log.header(Tag::RespUnset, b"Content-Encoding", old);
            if let Some(new) = &after.encoding {
                log.header(Tag::RespHeader, b"Content-Encoding", new);
            }
        }
        if let (Some(old), Some(new)) = (&before.etag, &after.etag) {
            if old != new {
                log.header(Tag::RespUnset, b"ETag", old);
                log.header(Tag::RespHeader, b"ETag", new);
            }
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
    if let Some((before, after)) = &changed {
        if before.accept_ranges && !after.accept_ranges {
            log.header(Tag::RespUnset, b"Accept-Ranges", b"bytes");
        }
    }
    if !t.length_in_head {
        if let Some(old) = changed
            .as_ref()
            .and_then(|(before, _)| before.length.as_ref())
        {
            log.header(Tag::RespUnset, b"Content-Length", old);
        }
        if let WireBody::Length(n) = t.sent.wire {
            log.header(Tag::RespHeader, b"Content-Length", n.to_string().as_bytes());
        }
    }
    log_transport_fields(log, t.sent);
}

/// How the response went out, as the transport's last records say it.
#[derive(Clone, Copy)]
pub(crate) struct Sent {
    pub wire: WireBody,
    /// The connection is kept after it.
    pub keep: bool,
    pub http10: bool,
    /// The protocol a transport that frames responses itself is logged
    /// as (see `Transport::resp_protocol`).
    pub protocol: Option<&'static [u8]>,
}

/// What the transport changes last: HTTP/2 its protocol, HTTP/1 the
/// `Connection` and `Transfer-Encoding` fields it adds (in that order, as
/// varnishd logs them).
fn log_transport_fields(log: &mut lacquer_shm::Txn, sent: Sent) {
    if let Some(protocol) = sent.protocol {
        log.bytes(Tag::RespProtocol, protocol);
        return;
    }
    if !sent.keep || sent.wire == WireBody::Close {
        log.header(Tag::RespHeader, b"Connection", b"close");
    } else if sent.http10 {
        log.header(Tag::RespHeader, b"Connection", b"keep-alive");
    }
    if sent.wire == WireBody::Chunked {
        log.header(Tag::RespHeader, b"Transfer-Encoding", b"chunked");
    }
}

/// The end of a synthetic response's log, whose head was logged as built
/// and changed by `vcl_synth` (see `Resp::log_as_built`): what delivery
/// adds, as varnishd logs it — its length, where its body is kept, the
/// filters, and the framing and connection fields.
pub(crate) fn synthetic_tail(req: &mut Req, filters: Filters, sent: Sent) {
    if !req.log.active() {
        return;
    }
    if let WireBody::Length(n) = sent.wire {
        req.log
            .header(Tag::RespHeader, b"Content-Length", n.to_string().as_bytes());
    }
    req.log.bytes(Tag::Storage, b"malloc Transient");
    filters.log(&mut req.log);
    log_transport_fields(&mut req.log, sent);
}
