//! The built-in policy: what Varnish's built-in VCL decides in `vcl_recv`,
//! `vcl_hash` and `vcl_backend_response`, as plain functions. A loaded VCL
//! program will call into the same state machines in their place.

use crate::request::Req;
use lacquer_cache::object::Timers;
use lacquer_http::{Headers, Version};
use std::net::SocketAddr;

/// What `vcl_recv` decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recv {
    Hash,
    Pass,
    Synth(u16),
}

const KNOWN_METHODS: &[&str] = &[
    "GET", "HEAD", "PUT", "POST", "TRACE", "OPTIONS", "DELETE", "PATCH",
];

/// The built-in `vcl_recv`.
pub(crate) fn recv(req: &Req) -> Recv {
    let head = &req.head;
    if head.method_is("PRI") {
        return Recv::Synth(405);
    }
    if head.version == Version::Http11 && !head.headers.contains("host") {
        return Recv::Synth(400);
    }
    if !KNOWN_METHODS.iter().any(|m| head.method_is(m)) {
        return Recv::Synth(501);
    }
    if !head.method_is("GET") && !head.method_is("HEAD") {
        return Recv::Pass;
    }
    if head.headers.contains("authorization") || head.headers.contains("cookie") {
        return Recv::Pass;
    }
    Recv::Hash
}

/// The built-in `vcl_hash`: the URL, then the Host or the server address.
pub(crate) fn hash(req: &Req, local: &SocketAddr, key: &mut Vec<u8>) {
    key.clear();
    key.extend_from_slice(&req.head.url);
    key.push(0);
    match req.head.headers.get("host") {
        Some(host) => key.extend_from_slice(host),
        None => key.extend_from_slice(local.ip().to_string().as_bytes()),
    }
    key.push(0);
}

/// Whether a `Cache-Control`-like value holds any of these directives.
fn has_directive(headers: &Headers, name: &str, directives: &[&str]) -> bool {
    headers.get_all(name).any(|v| {
        v.split(|&b| b == b',').any(|part| {
            let part = lacquer_http::headers::trim(part);
            let token = part.split(|&b| b == b'=').next().unwrap_or(b"");
            directives
                .iter()
                .any(|d| lacquer_http::headers::trim(token).eq_ignore_ascii_case(d.as_bytes()))
        })
    })
}

/// The built-in `vcl_backend_response`: whether the response may be
/// cached. `vary_star` is a `Vary` that names `*`.
pub(crate) fn cacheable(headers: &Headers, timers: &Timers, now: f64, vary_star: bool) -> bool {
    let remaining = timers.t_origin + timers.ttl - now;
    if remaining <= 0.0 || headers.contains("set-cookie") || vary_star {
        return false;
    }
    if headers.contains("surrogate-control") {
        return !has_directive(headers, "surrogate-control", &["no-store"]);
    }
    !has_directive(
        headers,
        "cache-control",
        &["no-cache", "no-store", "private"],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&'static str, &'static str)]) -> Headers {
        Headers::from_static_pairs(pairs)
    }

    #[test]
    fn cacheability() {
        let t = Timers {
            t_origin: 100.0,
            ttl: 60.0,
            grace: 10.0,
            keep: 0.0,
        };
        assert!(cacheable(&h(&[]), &t, 100.0, false));
        assert!(!cacheable(&h(&[]), &t, 170.0, false));
        assert!(!cacheable(&h(&[("Set-Cookie", "a=b")]), &t, 100.0, false));
        assert!(!cacheable(
            &h(&[("Cache-Control", "private")]),
            &t,
            100.0,
            false
        ));
        assert!(!cacheable(
            &h(&[("Cache-Control", "public, No-Store")]),
            &t,
            100.0,
            false
        ));
        assert!(!cacheable(
            &h(&[("Cache-Control", "no-cache=\"Set-Cookie\"")]),
            &t,
            100.0,
            false
        ));
        assert!(cacheable(
            &h(&[("Cache-Control", "public, max-age=60")]),
            &t,
            100.0,
            false
        ));
        assert!(cacheable(
            &h(&[
                ("Cache-Control", "private"),
                ("Surrogate-Control", "max-age=60")
            ]),
            &t,
            100.0,
            false
        ));
        assert!(!cacheable(
            &h(&[("Surrogate-Control", "no-store")]),
            &t,
            100.0,
            false
        ));
        assert!(!cacheable(&h(&[]), &t, 100.0, true));
    }
}
