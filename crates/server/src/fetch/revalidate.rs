//! Revalidation (RFC 9111 §4.3): a cache fetch for a key whose stored
//! object is stale but within grace or keep, and has a validator, asks
//! the backend with `If-None-Match` / `If-Modified-Since`; a 304 then
//! stands for the stale object with its stored headers updated by the
//! 304's (§4.3.4), and `vcl_backend_response` sees it as a 200 with
//! `beresp.was_304` set. The body is the stale object's, shared. The
//! same stale object stands in for a fetch that fails while its
//! `stale-if-error` window is open (`fetch.rs`).

use lacquer_cache::object::Object;
use lacquer_http::{Framing, Headers, ResponseHead};

/// Headers a 304 does not update (RFC 9111 §3.2): they describe its own
/// (absent) body or the stored body's coding, or are the delivery's to
/// write (`Content-Range`).
const NOT_UPDATED: &[&str] = &[
    "content-length",
    "content-encoding",
    "transfer-encoding",
    "content-range",
];

/// The response a 304 stands for.
pub(crate) fn merged(stale: &Object, resp: &ResponseHead) -> ResponseHead {
    let mut headers: Headers = stale.headers().clone();
    let mut replaced: Vec<&[u8]> = Vec::new();
    for h in resp.headers.iter() {
        let name = &h.name[..];
        if NOT_UPDATED
            .iter()
            .any(|n| n.as_bytes().eq_ignore_ascii_case(name))
        {
            continue;
        }
        if !replaced.iter().any(|r| r.eq_ignore_ascii_case(name)) {
            headers.remove(std::str::from_utf8(name).unwrap_or_default());
            replaced.push(name);
        }
        headers.append(h.name.clone(), h.value.clone());
    }
    // A stored body Lacquer transformed (gzip'd, inflated) carries a weak
    // validator; the backend's 304 names its own bytes with a strong one,
    // which must be weakened the same way.
    if stale.etag().is_some_and(|e| e.starts_with(b"W/")) {
        crate::host::head_edits::weaken_etag(&mut headers);
    }
    ResponseHead {
        version: resp.version,
        status: stale.status(),
        reason: bytes::Bytes::from_static(lacquer_http::reason_phrase(stale.status()).as_bytes()),
        headers,
        framing: Framing::None,
        keep_alive: resp.keep_alive,
        wire_len: resp.wire_len,
    }
}
