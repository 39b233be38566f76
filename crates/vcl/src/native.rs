//! The built-in VCL's request subroutines, run as Rust rather than
//! interpreted when a program leaves them as `builtin.vcl` writes them.
//! Every request runs them: walking their statements cost more than
//! what they do. Each does exactly what its VCL says, through the same
//! [`Host`] calls; a program that adds to one of them (`sub vcl_req_cookie
//! { ... }` is prepended to the built-in body) gets it interpreted, and
//! the tests below run each against the interpreter.

use crate::program::{Host, Lent};
use crate::types::{format_ip, Action, HttpKind, Value};
use crate::vars::Var;
use bytes::Bytes;

/// A built-in subroutine with a native body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Native {
    /// `vcl_req_host`: lower-cases `Host`; an HTTP/1.1 request without
    /// one is a 400.
    ReqHost,
    /// `vcl_req_method`: `PRI` is a 405, a method not known is piped,
    /// anything but `GET` and `HEAD` passed.
    ReqMethod,
    /// `vcl_req_authorization`: a request with `Authorization` is passed.
    ReqAuthorization,
    /// `vcl_req_cookie`: a request with `Cookie` is passed.
    ReqCookie,
    /// `vcl_builtin_hash`: the URL, then `Host` or else `server.ip`.
    BuiltinHash,
}

/// The methods `vcl_req_method` lets through to the cache's logic.
const KNOWN_METHODS: [&[u8]; 8] = [
    b"GET", b"HEAD", b"PUT", b"POST", b"TRACE", b"OPTIONS", b"DELETE", b"PATCH",
];

impl Native {
    /// The native body of a built-in subroutine, by name.
    pub(crate) fn for_builtin(name: &str) -> Option<Native> {
        Some(match name {
            "vcl_req_host" => Native::ReqHost,
            "vcl_req_method" => Native::ReqMethod,
            "vcl_req_authorization" => Native::ReqAuthorization,
            "vcl_req_cookie" => Native::ReqCookie,
            "vcl_builtin_hash" => Native::BuiltinHash,
            _ => return None,
        })
    }

    /// Runs the body: the action it returns, or None when it ends without
    /// one (its caller goes on); an error fails the method.
    pub(crate) fn run(self, host: &mut dyn Host) -> Result<Option<Action>, String> {
        let pass = || Some(Action::Pass(None));
        Ok(match self {
            Native::ReqHost => {
                let upper = match host.header_ref(HttpKind::Req, "host") {
                    Lent::Value(v) => Some(v.iter().any(u8::is_ascii_uppercase)),
                    Lent::Slice(v) => Some(v.iter().any(u8::is_ascii_uppercase)),
                    Lent::Absent => None,
                    Lent::Owned => host
                        .header(HttpKind::Req, "host")
                        .map(|v| v.iter().any(u8::is_ascii_uppercase)),
                };
                if upper == Some(true) {
                    let host_value = host.header(HttpKind::Req, "host").unwrap_or_default();
                    let lower = Bytes::from(host_value.to_ascii_lowercase());
                    host.set_header(HttpKind::Req, "host", lower)?;
                }
                let has_host = match host.header_ref(HttpKind::Req, "host") {
                    Lent::Absent => false,
                    Lent::Value(_) | Lent::Slice(_) => true,
                    Lent::Owned => host.header(HttpKind::Req, "host").is_some(),
                };
                if has_host || host.get(Var::ReqEsiLevel).as_i64() != 0 {
                    None
                } else {
                    let http11 = match host.str_ref(Var::ReqProto) {
                        Some(proto) => proto == b"HTTP/1.1",
                        None => host.get(Var::ReqProto).as_bytes() == b"HTTP/1.1",
                    };
                    http11.then_some(Action::Synth {
                        status: 400,
                        reason: None,
                    })
                }
            }
            Native::ReqMethod => {
                let owned;
                let method: &[u8] = match host.str_ref(Var::ReqMethod) {
                    Some(m) => m,
                    None => {
                        owned = host.get(Var::ReqMethod);
                        owned.as_bytes()
                    }
                };
                if method == b"PRI" {
                    Some(Action::Synth {
                        status: 405,
                        reason: None,
                    })
                } else if !KNOWN_METHODS.contains(&method) {
                    Some(Action::Pipe)
                } else if method != b"GET" && method != b"HEAD" {
                    pass()
                } else {
                    None
                }
            }
            Native::ReqAuthorization => has_header(host, "Authorization").then(pass).flatten(),
            Native::ReqCookie => has_header(host, "Cookie").then(pass).flatten(),
            Native::BuiltinHash => {
                if !host.hash_var(Var::ReqUrl) {
                    let url = host.get(Var::ReqUrl);
                    host.hash_data(url.as_bytes());
                }
                if has_header(host, "host") {
                    if !host.hash_header(HttpKind::Req, "host") {
                        let value = host.header(HttpKind::Req, "host").unwrap_or_default();
                        host.hash_data(&value);
                    }
                } else {
                    // server.ip as a string, as `hash_data` takes it.
                    let mut ip = Vec::new();
                    if let Value::Ip(addr) = host.get(Var::ServerIp) {
                        format_ip(&mut ip, addr);
                    }
                    host.hash_data(&ip);
                }
                None
            }
        })
    }
}

/// `if (req.http.NAME)`: the header is there.
fn has_header(host: &mut dyn Host, name: &str) -> bool {
    match host.header_ref(HttpKind::Req, name) {
        Lent::Absent => false,
        Lent::Value(_) | Lent::Slice(_) => true,
        Lent::Owned => host
            .header(HttpKind::Req, name)
            .is_some_and(|v| Value::Str(v).as_bool()),
    }
}
