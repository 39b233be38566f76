//! VCL types, run-time values, the built-in subroutines (methods) with
//! their legal return actions, and the actions themselves.

use bytes::Bytes;
use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// A VCL type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Void,
    Bool,
    Int,
    Real,
    Duration,
    Bytes,
    String,
    Ip,
    Time,
    Backend,
    Header,
    Http,
    Body,
    Stevedore,
    Blob,
    Acl,
    Sub,
    Probe,
    /// A bare word argument (`by=HASH`).
    Enum,
    /// A regular expression argument, written as a constant string and
    /// compiled with the program.
    Regex,
}

impl Type {
    pub fn name(self) -> &'static str {
        match self {
            Type::Void => "VOID",
            Type::Bool => "BOOL",
            Type::Int => "INT",
            Type::Real => "REAL",
            Type::Duration => "DURATION",
            Type::Bytes => "BYTES",
            Type::String => "STRING",
            Type::Ip => "IP",
            Type::Time => "TIME",
            Type::Backend => "BACKEND",
            Type::Header => "HEADER",
            Type::Http => "HTTP",
            Type::Body => "BODY",
            Type::Stevedore => "STEVEDORE",
            Type::Blob => "BLOB",
            Type::Acl => "ACL",
            Type::Sub => "SUB",
            Type::Probe => "PROBE",
            Type::Enum => "ENUM",
            Type::Regex => "REGEX",
        }
    }

    /// Whether a value of this type can be turned into a string.
    pub fn stringifies(self) -> bool {
        !matches!(
            self,
            Type::Void | Type::Http | Type::Body | Type::Acl | Type::Sub | Type::Regex
        )
    }

    pub fn is_numeric(self) -> bool {
        matches!(
            self,
            Type::Int | Type::Real | Type::Duration | Type::Bytes | Type::Time
        )
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which HTTP message a header or `HTTP` value refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpKind {
    Req,
    ReqTop,
    Bereq,
    Beresp,
    Obj,
    ObjStale,
    Resp,
}

impl HttpKind {
    pub fn prefix(self) -> &'static str {
        match self {
            HttpKind::Req => "req",
            HttpKind::ReqTop => "req_top",
            HttpKind::Bereq => "bereq",
            HttpKind::Beresp => "beresp",
            HttpKind::Obj => "obj",
            HttpKind::ObjStale => "obj_stale",
            HttpKind::Resp => "resp",
        }
    }
}

/// A backend reference: a declared backend, a director object, the
/// cluster, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendRef {
    None,
    Backend(usize),
    Director(usize),
    /// `cluster.backend()`: the node that owns the request's object (then
    /// each next node on the ring), for a cache fetch and a pass alike;
    /// the program's default backend where this node owns it, where no
    /// node answers, and outside a cluster.
    Cluster,
}

/// A value while VCL runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string that is not set (an absent header) or an omitted argument.
    Unset,
    Bool(bool),
    Int(i64),
    Real(f64),
    Duration(f64),
    Bytes(f64),
    Str(Bytes),
    Ip(Option<SocketAddr>),
    Time(f64),
    Backend(BackendRef),
    Header(HttpKind, std::sync::Arc<str>),
    Http(HttpKind),
    Stevedore(std::sync::Arc<str>),
    Blob(Bytes),
    Enum(&'static str),
    Sub(usize),
    Probe(usize),
    Regex(RegexArg),
}

/// A compiled regular expression argument (equal when it is the same
/// one).
#[derive(Debug, Clone)]
pub struct RegexArg(pub std::sync::Arc<lacquer_core::regex::Regex>);

impl PartialEq for RegexArg {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Value {
    pub fn str(s: &str) -> Value {
        Value::Str(Bytes::copy_from_slice(s.as_bytes()))
    }

    pub fn is_unset(&self) -> bool {
        matches!(self, Value::Unset)
    }

    pub fn as_bool(&self) -> bool {
        match self {
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            Value::Real(f) | Value::Duration(f) | Value::Bytes(f) => *f != 0.0,
            Value::Str(_) | Value::Blob(_) => true,
            Value::Backend(b) => *b != BackendRef::None,
            Value::Ip(ip) => ip.is_some(),
            Value::Unset => false,
            _ => true,
        }
    }

    pub fn as_f64(&self) -> f64 {
        match self {
            Value::Int(i) => *i as f64,
            Value::Real(f) | Value::Duration(f) | Value::Bytes(f) | Value::Time(f) => *f,
            Value::Bool(b) => f64::from(u8::from(*b)),
            _ => 0.0,
        }
    }

    pub fn as_i64(&self) -> i64 {
        match self {
            Value::Int(i) => *i,
            Value::Real(f) | Value::Duration(f) | Value::Bytes(f) | Value::Time(f) => *f as i64,
            Value::Bool(b) => i64::from(*b),
            _ => 0,
        }
    }

    /// The bytes of a string value; empty when unset.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Value::Str(b) | Value::Blob(b) => b,
            _ => b"",
        }
    }
}

/// Formats a real the way VCL does: three decimals.
pub fn format_real(out: &mut Vec<u8>, v: f64) {
    use std::io::Write;
    let _ = write!(out, "{v:.3}");
}

/// The text of an IP address without its port.
pub fn format_ip(out: &mut Vec<u8>, ip: Option<SocketAddr>) {
    use std::io::Write;
    match ip.map(|a| a.ip()) {
        Some(IpAddr::V4(a)) => {
            let _ = write!(out, "{a}");
        }
        Some(IpAddr::V6(a)) => match a.to_ipv4_mapped() {
            Some(v4) => {
                let _ = write!(out, "{v4}");
            }
            None => {
                let _ = write!(out, "{a}");
            }
        },
        None => out.extend_from_slice(b"0.0.0.0"),
    }
}

macro_rules! methods {
    ($( $id:ident = $name:literal, $bit:literal, $scope:ident, [$($ret:ident),*]; )*) => {
        /// Each method's bit in a method set ([`scope`]).
        mod method_bits {
            $( pub const $scope: u16 = 1 << $bit; )*
        }

        /// The built-in subroutines, in the order of vcl-step(7).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Method { $( $id, )* }

        impl Method {
            pub const ALL: &'static [Method] = &[ $( Method::$id, )* ];

            pub fn name(self) -> &'static str {
                match self { $( Method::$id => $name, )* }
            }

            pub fn bit(self) -> u16 {
                match self { $( Method::$id => 1 << $bit, )* }
            }

            pub fn index(self) -> usize {
                match self { $( Method::$id => $bit, )* }
            }

            /// The return actions this method may take.
            pub fn returns(self) -> &'static [ActionKind] {
                match self { $( Method::$id => &[$(ActionKind::$ret),*], )* }
            }

            pub fn by_name(name: &str) -> Option<Method> {
                match name { $( $name => Some(Method::$id), )* _ => None }
            }

            /// The name a `VCL_call` record gives it: upper case, without
            /// `vcl_` (`RECV`), made once.
            pub fn call_name(self) -> &'static str {
                self.call_word().as_str()
            }

            /// [`Method::call_name`] as a padded word, for the log.
            pub fn call_word(self) -> &'static lacquer_core::word::Word {
                use lacquer_core::word::Word;
                static NAMES: std::sync::OnceLock<Vec<Word>> = std::sync::OnceLock::new();
                let names = NAMES.get_or_init(|| {
                    let mut names = vec![Word::new(""); Method::ALL.len()];
                    for m in Method::ALL {
                        let name = m.name().strip_prefix("vcl_").unwrap_or(m.name());
                        // Made once for the process's life.
                        let name: &'static str = Box::leak(name.to_ascii_uppercase().into_boxed_str());
                        names[m.index()] = Word::new(name);
                    }
                    names
                });
                &names[self.index()]
            }
        }
    };
}

methods! {
    Recv = "vcl_recv", 0, RECV, [Fail, Synth, Restart, Pass, Pipe, Hash, Purge, Vcl];
    Pipe = "vcl_pipe", 1, PIPE, [Fail, Synth, Pipe];
    Pass = "vcl_pass", 2, PASS, [Fail, Synth, Restart, Fetch];
    Hash = "vcl_hash", 3, HASH, [Fail, Lookup];
    Purge = "vcl_purge", 4, PURGE, [Fail, Synth, Restart];
    Miss = "vcl_miss", 5, MISS, [Fail, Synth, Restart, Pass, Fetch];
    Hit = "vcl_hit", 6, HIT, [Fail, Synth, Restart, Pass, Deliver];
    Deliver = "vcl_deliver", 7, DELIVER, [Fail, Synth, Restart, Deliver];
    Synth = "vcl_synth", 8, SYNTH, [Fail, Restart, Deliver];
    BackendFetch = "vcl_backend_fetch", 9, BE_FETCH, [Fail, Abandon, Fetch, Error];
    BackendResponse = "vcl_backend_response", 10, BE_RESPONSE, [Fail, Abandon, Deliver, Retry, Error, Pass];
    BackendError = "vcl_backend_error", 11, BE_ERROR, [Fail, Deliver, Retry, Abandon];
    Init = "vcl_init", 12, INIT, [Fail, Ok];
    Fini = "vcl_fini", 13, FINI, [Ok];
    BackendRefresh = "vcl_backend_refresh", 14, BE_REFRESH, [Fail, Abandon, Merge, ObjStale, Retry, Error];
}

/// Method sets, as vcl-var(7) names them.
pub mod scope {
    pub use super::method_bits::*;
    pub const NONE: u16 = 0;
    pub const CLIENT: u16 = RECV | PIPE | PASS | HASH | PURGE | MISS | HIT | DELIVER | SYNTH;
    pub const BACKEND: u16 = BE_FETCH | BE_REFRESH | BE_RESPONSE | BE_ERROR;
    pub const BERESP: u16 = BE_REFRESH | BE_RESPONSE | BE_ERROR;
    pub const PIPE_BACKEND: u16 = PIPE | BACKEND;
    pub const CLIENT_BACKEND: u16 = CLIENT | BACKEND;
    pub const HIT_DELIVER: u16 = HIT | DELIVER;
    pub const DELIVER_SYNTH: u16 = DELIVER | SYNTH;
    pub const REQ_HASH: u16 = HIT | MISS | PASS | PURGE | DELIVER;
    pub const ALL: u16 = CLIENT | BACKEND | INIT | FINI;

    /// The method names in a set, for error messages.
    pub fn names(mask: u16) -> String {
        super::Method::ALL
            .iter()
            .filter(|m| mask & m.bit() != 0)
            .map(|m| m.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

macro_rules! actions {
    ($( $id:ident = $name:literal; )*) => {
        /// The kinds of return action.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ActionKind { $( $id, )* }

        impl ActionKind {
            pub fn name(self) -> &'static str {
                match self { $( ActionKind::$id => $name, )* }
            }

            pub fn by_name(name: &str) -> Option<ActionKind> {
                match name { $( $name => Some(ActionKind::$id), )* _ => None }
            }
        }
    };
}

actions! {
    Fail = "fail";
    Synth = "synth";
    Restart = "restart";
    Pass = "pass";
    Pipe = "pipe";
    Hash = "hash";
    Purge = "purge";
    Lookup = "lookup";
    Deliver = "deliver";
    Fetch = "fetch";
    Miss = "miss";
    Abandon = "abandon";
    Retry = "retry";
    Error = "error";
    Ok = "ok";
    Vcl = "vcl";
    Merge = "merge";
    ObjStale = "obj_stale";
}

/// What a method decided, with its evaluated arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Fail,
    Synth {
        status: u16,
        reason: Option<Bytes>,
    },
    Restart,
    /// `pass`, or in `vcl_backend_response` `pass(duration)`: hit-for-pass.
    Pass(Option<f64>),
    Pipe,
    Hash,
    Purge,
    Lookup,
    Deliver,
    Fetch,
    Miss,
    Abandon,
    Retry,
    Error {
        status: u16,
        reason: Option<Bytes>,
    },
    Ok,
    /// `return (vcl(label))`: go on in the program the label names.
    Vcl(Bytes),
    /// `vcl_backend_refresh`: the 304's headers over the stale object's.
    Merge,
    /// `vcl_backend_refresh`: the stale object as it was.
    ObjStale,
}

impl Action {
    pub fn name(&self) -> &'static str {
        self.word().as_str()
    }

    /// The name as a padded word, for the log's `VCL_return`.
    pub fn word(&self) -> &'static lacquer_core::word::Word {
        use lacquer_core::word::Word;
        match self {
            Action::Fail => const { &Word::new("fail") },
            Action::Synth { .. } => const { &Word::new("synth") },
            Action::Restart => const { &Word::new("restart") },
            Action::Pass(_) => const { &Word::new("pass") },
            Action::Pipe => const { &Word::new("pipe") },
            Action::Hash => const { &Word::new("hash") },
            Action::Purge => const { &Word::new("purge") },
            Action::Lookup => const { &Word::new("lookup") },
            Action::Deliver => const { &Word::new("deliver") },
            Action::Fetch => const { &Word::new("fetch") },
            Action::Miss => const { &Word::new("miss") },
            Action::Abandon => const { &Word::new("abandon") },
            Action::Retry => const { &Word::new("retry") },
            Action::Error { .. } => const { &Word::new("error") },
            Action::Ok => const { &Word::new("ok") },
            Action::Vcl(_) => const { &Word::new("vcl") },
            Action::Merge => const { &Word::new("merge") },
            Action::ObjStale => const { &Word::new("obj_stale") },
        }
    }
}
