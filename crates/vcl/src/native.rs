//! The built-in VCL's request subroutines, run as Rust rather than
//! interpreted when a program leaves them as `builtin.vcl` writes them.
//! Every request runs them: walking their statements cost more than
//! what they do. Each does exactly what its VCL says, through the same
//! [`Host`] calls; a program that adds to one of them (`sub vcl_req_cookie
//! { ... }` is prepended to the built-in body) gets it interpreted, and
//! the tests below run each against the interpreter.

use crate::program::{Host, Lent, Stmt};
use crate::types::{format_ip, Action, ActionKind, HttpKind, Value};
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
    pub(crate) fn call(
        self,
        host: &mut dyn Host,
    ) -> Result<Option<Action>, crate::failure::VclFailure> {
        let pass = || Some(Action::Pass(None));
        Ok(match self {
            Native::ReqHost => {
                // Looked up once: lower-casing a value leaves it there.
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
                let has_host = upper.is_some();
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

/// A method whose body, followed through the subroutines it calls, is
/// nothing but native built-in subroutines and then a return of an action
/// without arguments: what the built-in VCL's request methods are when no
/// program adds to them (`vcl_recv` calls `vcl_builtin_recv`, which calls
/// the four `vcl_req_*`, then returns `hash`). Run as a list, without the
/// interpreter's walk of calls and blocks, which cost more than what they
/// hold.
#[derive(Debug, Clone)]
pub struct Flat {
    natives: Vec<Native>,
    action: Action,
}

/// How deep calls are followed; the built-in VCL needs two.
const FLAT_DEPTH: usize = 8;

impl Flat {
    /// The plan of a method's body, when it is one.
    pub(crate) fn of(subs: &[crate::program::Sub], body: &[Stmt]) -> Option<Flat> {
        let mut natives = Vec::new();
        match walk(subs, body, 0, &mut natives)? {
            // Off its end with no action: the interpreter says why.
            Ending::Next => None,
            Ending::Return(action) => Some(Flat { natives, action }),
        }
    }

    /// Runs it: the action of the first native that returns one, else
    /// the method's own. An error fails the method, as interpreted.
    pub(crate) fn run(&self, host: &mut dyn Host) -> Action {
        for native in &self.natives {
            match native.call(host) {
                Ok(None) => {}
                Ok(Some(action)) => return action,
                Err(msg) => {
                    host.error(msg.message());
                    return Action::Fail;
                }
            }
        }
        self.action.clone()
    }
}

/// How a walked body ends.
enum Ending {
    /// It runs off its end (or says `return;`): its caller goes on.
    Next,
    Return(Action),
}

fn walk(
    subs: &[crate::program::Sub],
    body: &[Stmt],
    depth: usize,
    out: &mut Vec<Native>,
) -> Option<Ending> {
    for stmt in body {
        match stmt {
            Stmt::Native(native) => out.push(*native),
            Stmt::Call(i) if depth < FLAT_DEPTH => {
                if let Ending::Return(action) = walk(subs, &subs.get(*i)?.body, depth + 1, out)? {
                    return Some(Ending::Return(action));
                }
            }
            Stmt::Return(kind, args) if args.is_empty() => {
                return constant_action(*kind).map(Ending::Return)
            }
            Stmt::Leave => return Some(Ending::Next),
            _ => return None,
        }
    }
    Some(Ending::Next)
}

/// The action a return without arguments makes, as the interpreter makes
/// it; None for one it would compute (`synth`, `error`, `vcl`).
pub(crate) fn constant_action(kind: ActionKind) -> Option<Action> {
    Some(match kind {
        ActionKind::Fail => Action::Fail,
        ActionKind::Restart => Action::Restart,
        ActionKind::Pass => Action::Pass(None),
        ActionKind::Pipe => Action::Pipe,
        ActionKind::Hash => Action::Hash,
        ActionKind::Purge => Action::Purge,
        ActionKind::Lookup => Action::Lookup,
        ActionKind::Deliver => Action::Deliver,
        ActionKind::Fetch => Action::Fetch,
        ActionKind::Miss => Action::Miss,
        ActionKind::Abandon => Action::Abandon,
        ActionKind::Retry => Action::Retry,
        ActionKind::Ok => Action::Ok,
        ActionKind::Merge => Action::Merge,
        ActionKind::ObjStale => Action::ObjStale,
        ActionKind::Synth | ActionKind::Error | ActionKind::Vcl => return None,
    })
}
