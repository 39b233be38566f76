//! Synthetic responses: the page of the built-in `vcl_synth` for requests
//! refused by policy (400, 405, 501…), and the `vcl_backend_error` 503
//! "Backend fetch failed" object that a failed fetch delivers to every
//! client waiting on it.

use crate::deliver::{self, Delivery};
use crate::io::Client;
use crate::request::{Outcome, Req};
use crate::Shared;
use bytes::Bytes;
use lacquer_cache::object::{ObjKind, Object, ObjectInit, Timers};
use lacquer_cache::Body;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_http::{Framing, Headers, ResponseHead, Version};
use std::sync::Arc;

/// The body of a synthetic error page.
pub(crate) fn page(status: u16, reason: &str, xid: u64) -> String {
    format!(
        "<!DOCTYPE html>\n<html>\n<head><title>{status} {reason}</title></head>\n<body>\n<h1>Error {status} {reason}</h1>\n<p>Guru Meditation: XID {xid}</p>\n<hr>\n<p>Lacquer</p>\n</body>\n</html>\n"
    )
}

/// A complete, unindexed object holding a synthetic page.
pub(crate) fn object(status: u16, reason: &str, xid: u64) -> Arc<Object> {
    let now = lacquer_core::time::now();
    let mut headers = Headers::new();
    headers.append("Server", "Lacquer");
    headers.append("Content-Type", "text/html; charset=utf-8");
    headers.append("Retry-After", "5");
    let head = ResponseHead {
        version: Version::Http11,
        status,
        reason: Bytes::copy_from_slice(reason.as_bytes()),
        headers,
        framing: Framing::None,
        keep_alive: true,
        wire_len: 0,
    };
    let (block, stored) = crate::fetch::stored_head(&head, now, &[]);
    Arc::new(Object::new(ObjectInit {
        xid,
        kind: ObjKind::Normal,
        status,
        head: block,
        headers: stored,
        body: Body::complete(vec![Bytes::from(page(status, reason, xid))]),
        vary: None,
        timers: Timers {
            t_origin: now,
            ttl: 0.0,
            grace: 0.0,
            keep: 0.0,
        },
    }))
}

/// The error object of a failed fetch.
pub(crate) fn fetch_failed(xid: u64) -> Arc<Object> {
    object(503, "Backend fetch failed", xid)
}

/// Answers a request with a synthetic page (the built-in `vcl_synth`).
pub(crate) async fn respond(
    c: &mut Client,
    sh: &Arc<Shared>,
    req: &Req,
    status: u16,
    keep: bool,
) -> Outcome {
    COUNTERS.inc(Counter::s_synth);
    let reason = lacquer_http::reason_phrase(status);
    let obj = object(status, reason, req.xid);
    deliver::object(c, sh, req, &obj, Delivery { hit: false, keep }).await
}
