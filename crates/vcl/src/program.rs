//! The compiled program: subroutines as resolved statement trees,
//! backends, probes, ACLs, vmod object slots; and the `Host` trait through
//! which the running daemon lends its requests, responses and objects to
//! the interpreter.

use crate::acl::Acl;
use crate::ast::BinOp;
use crate::failure::VclFailure;
use crate::source::Source;
use crate::types::{ActionKind, BackendRef, HttpKind, Method, Type, Value};
use crate::vars::{StorageField, Var};
use crate::vmod::{FuncSpec, MethodSpec, VmodObject};
use bytes::Bytes;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// A loaded VCL program, immutable once compiled; vmod objects are set
/// once by `vcl_init`.
pub struct Program {
    pub version: (u8, u8),
    pub sources: Vec<Source>,
    pub subs: Vec<Sub>,
    /// The sub index of each method, by `Method::index()`.
    pub methods: Vec<usize>,
    pub backends: Vec<BackendDef>,
    pub probes: Vec<ProbeDef>,
    pub acls: Vec<Acl>,
    pub objects: Vec<ObjectSlot>,
    /// What `req.backend_hint` and `bereq.backend` start as.
    pub default_backend: BackendRef,
    /// Compile-time warnings (deprecated constructs and the like).
    pub warnings: Vec<String>,
    /// It imports a vmod that sets options on the client's socket (`tcp`,
    /// `std.set_ip_tos`): ESI includes need a descriptor of their own.
    pub uses_client_socket: bool,
    /// It calls `std.cache_req_body`: the most any call asks to keep (a
    /// size that is not a constant counts as 1 MiB). A request's body is
    /// read up to this before `vcl_recv`, so the call can answer at once.
    pub cache_req_body: Option<u64>,
    /// It calls `std.rollback`: requests keep their first head to go
    /// back to.
    pub uses_rollback: bool,
    /// It says `return (vcl(label))`: requests keep their first head, to
    /// start over in another program as they came.
    pub uses_labels: bool,
    /// The labels its `return (vcl(...))` name.
    pub labels_used: Vec<String>,
    /// The vmods it imports.
    pub imports: Vec<String>,
    /// Each method's plan when it is only native built-in subroutines and
    /// a constant return (`crate::native::Flat`), by `Method::index()`.
    pub flat: Vec<Option<crate::native::Flat>>,
}

/// A vmod object declared with `new`, made when `vcl_init` runs.
pub struct ObjectSlot {
    pub name: String,
    pub object: OnceLock<Box<dyn VmodObject>>,
}

pub struct Sub {
    pub name: String,
    pub body: Vec<Stmt>,
}

/// A backend declaration with its values resolved.
#[derive(Debug, Clone)]
pub struct BackendDef {
    pub name: String,
    /// None for `backend name none;`.
    pub addr: Option<SocketAddr>,
    /// `.host` as written, and `.port`.
    pub host: String,
    pub port: String,
    pub host_header: Option<String>,
    /// `.path`: a Unix domain socket instead of `.host` (then `addr` is
    /// None and this is set).
    pub path: Option<String>,
    /// `.proxy_header`: 1 or 2.
    pub proxy_header: Option<u8>,
    /// `.preamble`: bytes sent first on each new connection.
    pub preamble: Option<Vec<u8>>,
    /// `.ssl = 1`: the backend speaks TLS (after any PROXY header and
    /// preamble), with `.ssl_sni`, `.ssl_verify_peer`, `.ssl_verify_host`
    /// (each on unless set to 0).
    pub ssl: Option<BackendTlsDef>,
    /// `.h2c = 1`: a cleartext backend spoken to in HTTP/2 from the
    /// first byte.
    pub h2c: bool,
    pub connect_timeout: Option<Duration>,
    pub first_byte_timeout: Option<Duration>,
    pub between_bytes_timeout: Option<Duration>,
    pub max_connections: Option<u64>,
    /// How long and how many fetches wait at `max_connections`.
    pub wait_timeout: Option<Duration>,
    pub wait_limit: Option<u64>,
    pub probe: Option<usize>,
}

/// How a backend's TLS is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendTlsDef {
    /// Send the host name (`.host_header`, else `.host`) as SNI.
    pub sni: bool,
    /// Check the certificate chain against the CA bundle (`ssl_ca_file`).
    pub verify_peer: bool,
    /// Check that the certificate is for the host name.
    pub verify_host: bool,
    /// `.certificate`: a PEM file with the certificate chain and key
    /// shown to the backend (mutual TLS).
    pub certificate: Option<String>,
    /// `.alpn`: the protocols offered, in order (`h2`, `http/1.1`).
    pub alpn: Vec<String>,
}

/// A health probe.
#[derive(Debug, Clone)]
pub struct ProbeDef {
    pub name: String,
    pub url: Option<String>,
    pub request: Option<String>,
    pub expected_response: u16,
    pub timeout: Duration,
    pub interval: Duration,
    pub window: u32,
    pub threshold: u32,
    pub initial: Option<u32>,
}

impl Default for ProbeDef {
    fn default() -> Self {
        ProbeDef {
            name: String::new(),
            url: None,
            request: None,
            expected_response: 200,
            timeout: Duration::from_secs(2),
            interval: Duration::from_secs(5),
            window: 8,
            threshold: 3,
            initial: None,
        }
    }
}

/// Where `set` and `unset` act.
#[derive(Debug, Clone)]
pub enum Place {
    Var(Var),
    Header(HttpKind, Arc<str>),
}

#[derive(Debug)]
pub enum Stmt {
    Set(Place, Expr),
    Unset(Place),
    Call(usize),
    Return(ActionKind, Vec<Expr>),
    /// Leaves the subroutine; its caller goes on.
    Leave,
    If(Vec<(Expr, Vec<Stmt>)>, Vec<Stmt>),
    Synthetic(Expr),
    HashData(Expr),
    Ban(Expr),
    /// A function called for its effect.
    Eval(Expr),
    /// `new name = vmod.class(args)`.
    New(usize, &'static crate::vmod::ClassSpec, Vec<Expr>),
    Block(Vec<Stmt>),
    /// A built-in subroutine's whole body, run natively
    /// ([`crate::native`]).
    Native(crate::native::Native),
}

/// How two values compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpKind {
    Str,
    Num,
    Bool,
    Ip,
    Backend,
}

#[derive(Debug)]
pub enum Expr {
    Const(Value),
    Var(Var),
    Header(HttpKind, Arc<str>),
    Param(usize),
    Storage(Arc<str>, StorageField),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cmp(BinOp, CmpKind, Box<Expr>, Box<Expr>),
    Regex(Box<Expr>, Arc<lacquer_core::regex::Regex>, bool),
    Acl(Box<Expr>, usize, bool),
    Arith(BinOp, Type, Box<Expr>, Box<Expr>),
    Concat(Vec<Expr>),
    ToStr(Box<Expr>),
    ToReal(Box<Expr>),
    Regsub {
        all: bool,
        subject: Box<Expr>,
        re: Arc<lacquer_core::regex::Regex>,
        replacement: Box<Expr>,
    },
    Func(&'static FuncSpec, Vec<Expr>),
    Method(usize, &'static MethodSpec, Vec<Expr>),
}

/// A header as the host can lend it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lent<'a> {
    Absent,
    Value(&'a Bytes),
    /// Bytes the host holds but not as a `Bytes` of their own (a stored
    /// object's header, read in place).
    Slice(&'a [u8]),
    /// The host makes this value on demand: ask `Host::header`.
    Owned,
}

/// What the interpreter needs from the daemon while a method runs. The
/// checker guarantees each call is legal in the running method.
pub trait Host {
    /// The method running now.
    fn method(&self) -> Method;
    fn get(&mut self, var: Var) -> Value;
    fn set(&mut self, var: Var, value: Value) -> Result<(), VclFailure>;
    /// `unset bereq.body` and the like.
    fn unset(&mut self, var: Var);
    fn header(&mut self, kind: HttpKind, name: &str) -> Option<Bytes>;
    /// A header without copying it, for tests and comparisons.
    fn header_ref(&self, _kind: HttpKind, _name: &str) -> Lent<'_> {
        Lent::Owned
    }
    /// A string variable without copying it, where the host holds it.
    fn str_ref(&self, _var: Var) -> Option<&[u8]> {
        None
    }
    /// Sets a header; an error (the task's workspace is used up) fails
    /// the VCL.
    fn set_header(&mut self, kind: HttpKind, name: &str, value: Bytes) -> Result<(), VclFailure>;
    fn unset_header(&mut self, kind: HttpKind, name: &str);
    /// Adds a header line after those of its name (vmod header); a host
    /// without headers (`vcl_init`) has nothing to add to.
    fn append_header(
        &mut self,
        _kind: HttpKind,
        _name: &str,
        _value: Bytes,
    ) -> Result<(), VclFailure> {
        Ok(())
    }
    /// Every value of a header, for `std.collect`.
    fn header_all(&mut self, kind: HttpKind, name: &str) -> Vec<Bytes>;
    fn hash_data(&mut self, data: &[u8]);
    /// `hash_data` of a header (an absent one hashes as the empty string),
    /// read where the host holds it instead of copied out first; false
    /// when it does not hold it so (the interpreter then evaluates the
    /// argument and calls [`Host::hash_data`]).
    fn hash_header(&mut self, _kind: HttpKind, _name: &str) -> bool {
        false
    }
    /// `hash_data` of a string variable, as [`Host::hash_header`].
    fn hash_var(&mut self, _var: Var) -> bool {
        false
    }
    /// Appends to the synthetic body.
    fn synthetic(&mut self, data: &[u8]);
    fn ban(&mut self, expr: &[u8]) -> Result<(), VclFailure>;
    fn param(&self, index: usize) -> Value;
    fn storage(&self, name: &str, field: StorageField) -> Value;
    fn healthy(&self, backend: usize) -> bool;
    /// `std.log`: a VCL_Log record.
    fn log(&mut self, msg: &[u8]);
    /// A VCL_Error record.
    fn error(&mut self, msg: &str);
    /// A VCL_acl record, for an ACL declared with `+log`.
    fn acl_log(&mut self, _record: &str) {}
    /// `std.timestamp`.
    fn timestamp(&mut self, _label: &[u8]) {}
    /// `std.rollback`: `req` or `bereq` as it was first; an error fails
    /// the VCL (where a rollback cannot be).
    fn rollback(&mut self, _kind: HttpKind) -> Result<(), VclFailure> {
        Ok(())
    }
    /// `std.cache_req_body`: whether the body (up to `max`) was kept.
    fn cache_req_body(&mut self, _max: u64) -> bool {
        false
    }
    /// The request body `std.cache_req_body` kept (vmod bodyaccess);
    /// None when it was not kept.
    fn cached_req_body(&self) -> Option<Bytes> {
        None
    }
    /// The client connection's socket options (`std.set_ip_tos`, vmod
    /// tcp); None outside a client request.
    fn client_socket(&self) -> Option<&dyn crate::socket::ClientSocket> {
        None
    }
    /// The vmods' state for the running task; None outside a client
    /// request or a backend fetch (`vcl_init`).
    fn task_privs(&mut self) -> Option<&mut crate::vmod::TaskPrivs> {
        None
    }
    /// vmod proxy: a field of the PROXY version 2 header the client
    /// connection started with (by type; with `sub`, a sub-field of the
    /// SSL field), None without one.
    fn proxy_field(&self, _kind: u8, _sub: Option<u8>) -> Option<Vec<u8>> {
        None
    }
    /// vmod proxy: the SSL field's client flags and verify result.
    fn proxy_ssl(&self) -> Option<(u8, u32)> {
        None
    }
    /// vmod cluster: this node's name, in a cluster.
    fn cluster_self(&self) -> Option<String> {
        None
    }
    /// vmod cluster: the node that owns the request's object and whether
    /// it is this one; None outside a cluster or before the digest is
    /// made.
    fn cluster_owner(&mut self) -> Option<(String, bool)> {
        None
    }
    /// vmod unix: the credentials of the peer of a Unix socket
    /// connection (user and group ids, and their names where the system
    /// has them); None on any other connection.
    /// vmod tls: what the client connection's TLS handshake settled;
    /// None on a connection without TLS.
    fn tls_session(&self) -> Option<&crate::socket::TlsSession> {
        None
    }
    fn peer_credentials(&self) -> Option<crate::socket::PeerCredentials> {
        None
    }
    /// vmod purge: purges every variant stored under the request's hash,
    /// or with `soft` (ttl, grace, keep) shortens their lifetimes; how many
    /// objects it acted on.
    fn purge(&mut self, _soft: Option<[f64; 3]>) -> i64 {
        0
    }
    /// vmod xkey: purges (or soft-purges) the objects tagged with any of
    /// the keys; how many.
    fn purge_tags(&mut self, _keys: &[u8], _soft: bool) -> i64 {
        0
    }
}

impl Program {
    pub fn method(&self, m: Method) -> &Sub {
        &self.subs[self.methods[m.index()]]
    }

    /// The backend a reference resolves to now, through any directors.
    pub fn resolve(&self, b: BackendRef, host: &mut dyn Host) -> Option<usize> {
        self.resolve_depth(b, host, 0)
    }

    pub(crate) fn resolve_depth(
        &self,
        b: BackendRef,
        host: &mut dyn Host,
        depth: usize,
    ) -> Option<usize> {
        match b {
            BackendRef::None => None,
            BackendRef::Backend(i) => Some(i),
            BackendRef::Director(o) if depth < 16 => {
                let obj = self.objects.get(o)?.object.get()?;
                let next = obj.resolve(self, host)?;
                self.resolve_depth(next, host, depth + 1)
            }
            BackendRef::Director(_) => None,
            BackendRef::Cluster if depth < 16 => {
                self.resolve_depth(self.default_backend, host, depth + 1)
            }
            BackendRef::Cluster => None,
        }
    }

    /// Whether a reference has a healthy backend behind it.
    pub fn healthy(&self, b: BackendRef, host: &mut dyn Host) -> bool {
        match b {
            BackendRef::None => false,
            BackendRef::Backend(i) => host.healthy(i),
            BackendRef::Director(o) => self
                .objects
                .get(o)
                .and_then(|s| s.object.get())
                .is_some_and(|obj| obj.healthy(self, host)),
            BackendRef::Cluster => {
                self.default_backend != BackendRef::Cluster
                    && self.healthy(self.default_backend, host)
            }
        }
    }

    /// The name of a backend or director, as `STRING` conversion shows it.
    pub fn backend_name(&self, b: BackendRef) -> &str {
        match b {
            BackendRef::None => "",
            BackendRef::Backend(i) => self.backends.get(i).map_or("", |d| &d.name),
            BackendRef::Director(o) => self.objects.get(o).map_or("", |s| &s.name),
            BackendRef::Cluster => "cluster",
        }
    }

    /// The source text of every file, for `vcl.show`.
    pub fn source_text(&self) -> String {
        let mut out = String::new();
        for s in &self.sources {
            if s.name == crate::BUILTIN_NAME {
                continue;
            }
            out.push_str(&format!("// {}\n", s.name));
            out.push_str(&s.text);
            if !s.text.ends_with('\n') {
                out.push('\n');
            }
        }
        out
    }
}
