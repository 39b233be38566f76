//! Synthetic objects: what `vcl_synth` and `vcl_backend_error` built,
//! turned into complete, unindexed objects that delivery writes like any
//! other, and the fixed 503 page used when even VCL failed.

use bytes::Bytes;
use lacquer_cache::object::{ObjKind, Object, ObjectInit, Timers};
use lacquer_cache::store::Store;
use lacquer_cache::Body;
use lacquer_http::{Framing, Headers, ResponseHead, Status, Version};
use std::sync::Arc;

/// The body of a synthetic error page when VCL could not build one.
pub(crate) fn page(status: u16, reason: &str, xid: u64) -> String {
    format!(
        "<!DOCTYPE html>\n<html>\n  <head>\n    <title>{status} {reason}</title>\n  </head>\n  <body>\n    <h1>Error {status} {reason}</h1>\n    <p>{reason}</p>\n    <h3>Guru Meditation:</h3>\n    <p>XID: {xid}</p>\n    <hr>\n    <p>Lacquer cache server</p>\n  </body>\n</html>\n"
    )
}

/// A complete object from a status, headers and a body, made for `store`
/// when it is to be cached.
pub(crate) fn object_from(
    store: Option<Arc<Store>>,
    status: Status,
    reason: &[u8],
    headers: Headers,
    body: Bytes,
    xid: u64,
    timers: Timers,
) -> Arc<Object> {
    let now = lacquer_core::time::now();
    let status = status.wire();
    let head = ResponseHead {
        version: Version::Http11,
        status,
        reason: Bytes::copy_from_slice(reason),
        headers,
        framing: Framing::None,
        keep_alive: true,
        wire_len: 0,
    };
    let block = crate::host::stored_head::packed_stored_head(
        &head,
        now,
        &["content-length", "age"],
        crate::host::stored_head::HeadLength::AsSkip,
    );
    let len = body.len() as u64;
    let body = if body.is_empty() {
        Body::complete(Vec::new())
    } else if len <= lacquer_cache::body::SMALL_MAX
        && store
            .as_ref()
            .is_some_and(|s| s.engine().keeps_on_heap(len))
    {
        // As a small body fetched is kept: one allocation of its size.
        Body::complete_small(&body)
    } else {
        Body::complete(vec![body])
    };
    Arc::new(Object::new(ObjectInit {
        store,
        xid,
        kind: ObjKind::Normal,
        status,
        head: block,
        headers: lacquer_http::Headers::new(),
        body,
        vary: None,
        timers,
    }))
}

/// A synthetic page object made without VCL.
pub(crate) fn object(status: u16, reason: &str, xid: u64) -> Arc<Object> {
    let now = lacquer_core::time::now();
    let mut headers = Headers::new();
    headers.append("Server", "Lacquer");
    headers.append("Content-Type", "text/html; charset=utf-8");
    headers.append("Retry-After", "5");
    object_from(
        None,
        Status::new(status),
        reason.as_bytes(),
        headers,
        Bytes::from(page(status, reason, xid)),
        xid,
        Timers {
            t_origin: now,
            ttl: 0.0,
            grace: 0.0,
            keep: 0.0,
        },
    )
}

/// The error object of a fetch that failed where VCL had no say.
pub(crate) fn fetch_failed(xid: u64) -> Arc<Object> {
    object(503, "Backend fetch failed", xid)
}
