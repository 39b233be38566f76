//! Invalidation after unsafe methods (RFC 9111 §4.4): when a request with
//! a method that is not safe (anything but GET, HEAD, OPTIONS and TRACE,
//! so also methods Lacquer does not know, which the built-in VCL pipes)
//! gets a non-error answer (2xx or 3xx) through the cache, every stored
//! variant of its target URI goes, and so do those of the `Location` and
//! `Content-Location` URIs when they are on the same host. Varnish leaves
//! this to VCL. The keys are made by the program's own `vcl_hash`, run
//! with each URL in turn, so a site that hashes more than URL and Host
//! still finds its objects.

use crate::host::client_host::ClientHost;
use crate::host::req::{ConnInfo, Req};
use crate::host::vcl::Loaded;
use crate::Shared;
use bytes::Bytes;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_http::Headers;
use lacquer_shm::Tag;
use lacquer_vcl::{Action, Method};

/// Invalidates what a successful unsafe request changed.
pub(crate) fn after_unsafe(
    sh: &Shared,
    vcl: &Loaded,
    req: &mut Req,
    conn: ConnInfo,
    status: u16,
    resp: &Headers,
) {
    let method = &req.head.method[..];
    let safe = [&b"GET"[..], b"HEAD", b"OPTIONS", b"TRACE"];
    if safe.contains(&method) || !(200..400).contains(&status) {
        return;
    }
    let host = req.head.headers.get("host").cloned();
    let mut urls = vec![req.head.url.clone()];
    for name in ["location", "content-location"] {
        if let Some(url) = resp
            .get(name)
            .and_then(|v| same_host_path(v, host.as_deref(), &req.head.url))
        {
            if !urls.contains(&url) {
                urls.push(url);
            }
        }
    }
    let original = req.head.url.clone();
    for url in urls {
        req.head.url = url;
        let mut key = Vec::with_capacity(128);
        let mut h = ClientHost {
            hash: Some(&mut key),
            ..ClientHost::new(Method::Hash, sh, vcl, req, &conn)
        };
        if lacquer_vcl::run(&vcl.program, Method::Hash, &mut h) != Action::Lookup {
            continue;
        }
        let n = sh.cache.purge(&key);
        COUNTERS.add(Counter::n_obj_purged, n as u64);
        crate::host::spread::later(sh, || crate::host::invalidation::Invalidation::Purge {
            key: bytes::Bytes::from(key.clone()),
        });
        req.log.fmt(
            Tag::Debug,
            format_args!(
                "RFC 9111 invalidation of {} after {}: {n} objects",
                String::from_utf8_lossy(&req.head.url),
                String::from_utf8_lossy(&req.head.method)
            ),
        );
    }
    req.head.url = original;
}

/// The path a `Location` value names when it is on the request's host:
/// an absolute path, a relative reference (resolved against the request
/// path), or an absolute URI whose authority is the request's Host.
fn same_host_path(value: &[u8], host: Option<&[u8]>, base: &[u8]) -> Option<Bytes> {
    let v = value.trim_ascii();
    let lower = v.to_ascii_lowercase();
    let rest = if lower.starts_with(b"http://") {
        Some(&v[7..])
    } else if lower.starts_with(b"https://") {
        Some(&v[8..])
    } else {
        None
    };
    let path = match rest {
        Some(rest) => {
            let split = rest.iter().position(|&b| b == b'/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(split);
            if !host.is_some_and(|h| h.trim_ascii().eq_ignore_ascii_case(authority)) {
                return None;
            }
            if path.is_empty() {
                b"/".to_vec()
            } else {
                path.to_vec()
            }
        }
        None if v.starts_with(b"//") || v.is_empty() => return None,
        None if v.starts_with(b"/") => v.to_vec(),
        None => lacquer_filters::esi::relative(base, v),
    };
    // A fragment is never part of the target.
    let end = path.iter().position(|&b| b == b'#').unwrap_or(path.len());
    Some(Bytes::copy_from_slice(&path[..end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_on_the_same_host_only() {
        let host = Some(&b"example.com"[..]);
        let p = |v: &str| same_host_path(v.as_bytes(), host, b"/a/b?x=1").map(|b| b.to_vec());
        assert_eq!(p("/new"), Some(b"/new".to_vec()));
        assert_eq!(p("c#top"), Some(b"/a/c".to_vec()));
        assert_eq!(p("http://EXAMPLE.com/x?y"), Some(b"/x?y".to_vec()));
        assert_eq!(p("https://example.com"), Some(b"/".to_vec()));
        assert_eq!(p("http://other.example/x"), None);
        assert_eq!(p("//example.com/x"), None);
        assert_eq!(same_host_path(b"http://example.com/x", None, b"/"), None);
    }
}
