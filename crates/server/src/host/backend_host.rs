//! The backend side as VCL sees it: `bereq.*`, `beresp.*` and
//! `obj_stale.*` over a fetch (for the cache or for a pass), running
//! `vcl_backend_fetch`, `vcl_backend_refresh`, `vcl_backend_response` and
//! `vcl_backend_error`. The request and response themselves are in
//! `bereq`.

use crate::host::bereq::{filter_list, set_filter_list};
pub(crate) use crate::host::bereq::{Bereq, BereqBody, Beresp, NOT_FOR_CACHE_FETCH};
use crate::host::req::Req;
use crate::host::vcl::{param_value, proto_text, report_error, storage_value, Loaded};
use crate::Shared;
use bytes::Bytes;
use lacquer_http::{Status, Version};
use lacquer_shm::Tag;
use lacquer_vcl::{
    Action, BackendRef, Host, HttpKind, Method, StorageField, Value, Var, VclFailure,
};

pub(crate) struct BackendHost<'a> {
    pub method: Method,
    pub sh: &'a Shared,
    pub vcl: &'a Loaded,
    pub bereq: &'a mut Bereq,
    pub beresp: Option<&'a mut Beresp>,
    /// The client request, in `vcl_pipe` (a client method that also sees
    /// `bereq`).
    pub req: Option<&'a mut Req>,
}

/// Runs a backend method.
pub(crate) fn call_method(
    method: Method,
    sh: &Shared,
    vcl: &Loaded,
    bereq: &mut Bereq,
    beresp: Option<&mut Beresp>,
) -> Action {
    let mut host = BackendHost {
        method,
        sh,
        vcl,
        bereq,
        beresp,
        req: None,
    };
    crate::host::vsl::run_method(
        &vcl.program,
        method,
        &mut host,
        |h| &mut h.bereq.log,
        |host, action| {
            if let (Action::Pass(ttl), Some(r)) = (action, host.beresp.as_deref()) {
                // `return (pass(…))` makes a hit-for-pass object for that
                // long (bare, for beresp.ttl): logged as varnishd logs
                // it, before the return.
                crate::host::vsl::ttl(
                    &mut host.bereq.log,
                    &crate::host::vsl::TtlRecord {
                        source: crate::host::vsl::TtlSource::Hfp,
                        timers: lacquer_cache::object::Timers {
                            ttl: ttl.unwrap_or(r.timers.ttl),
                            grace: 0.0,
                            keep: 0.0,
                            ..r.timers
                        },
                        cacheable: false,
                    },
                );
            }
        },
    )
}

impl BackendHost<'_> {
    /// Charges a header VCL sets to the fetch's workspace
    /// (`workspace_backend`, which also holds the backend request's
    /// head): past it, the VCL fails, as varnishd's does on a workspace
    /// overflow.
    fn charge_workspace(&mut self, name: &str, value: &[u8]) -> Result<(), VclFailure> {
        let cost = (name.len() + value.len() + 4) as u64;
        let b = &mut *self.bereq;
        let head: u64 = b.url.len() as u64
            + b.headers
                .iter()
                .map(|h| (h.name.len() + h.value.len() + 4) as u64)
                .sum::<u64>();
        if head + b.ws_used + cost > self.sh.params.workspace_backend() {
            lacquer_core::counters::COUNTERS
                .inc(lacquer_core::counters::Counter::ws_backend_overflow);
            return Err("out of workspace (bo)".into());
        }
        b.ws_used += cost;
        Ok(())
    }
}

impl BackendHost<'_> {
    /// `beresp.*`: the response as VCL sees it (unset before there is one).
    fn beresp_var(&self, var: Var) -> Value {
        let b = &*self.bereq;
        let r = self.beresp.as_deref();
        let now = lacquer_core::time::now;
        let p = &self.sh.params;
        match var {
            Var::Beresp => Value::Http(HttpKind::Beresp),
            Var::BerespAge => {
                Value::Duration(r.map_or(0.0, |r| (r.t_resp - r.timers.t_origin).max(0.0)))
            }
            Var::BerespBackend => Value::Backend(r.map_or(BackendRef::None, |r| r.backend)),
            Var::BerespBackendIp => Value::Ip(r.and_then(|r| match r.backend {
                BackendRef::Backend(i) => self.vcl.program.backends.get(i).and_then(|d| d.addr),
                _ => None,
            })),
            Var::BerespBackendName => {
                Value::str(r.map_or("", |r| self.vcl.program.backend_name(r.backend)))
            }
            Var::BerespDoEsi => Value::Bool(r.is_some_and(|r| r.do_esi)),
            Var::BerespDoGunzip => Value::Bool(r.is_some_and(|r| r.do_gunzip)),
            Var::BerespDoGzip => Value::Bool(r.is_some_and(|r| r.do_gzip)),
            Var::BerespDoStream => Value::Bool(r.is_some_and(|r| r.do_stream)),
            Var::BerespFilters => Value::str(&r.map(filter_list).unwrap_or_default()),
            Var::BerespGrace => Value::Duration(r.map_or(0.0, |r| r.timers.grace)),
            Var::BerespKeep => Value::Duration(r.map_or(0.0, |r| r.timers.keep)),
            Var::BerespProto => r.map_or(Value::Unset, |r| proto_text(r.version)),
            Var::BerespReason => r.map_or(Value::Unset, |r| Value::Str(r.reason.clone())),
            Var::BerespStatus => Value::Int(r.map_or(0, |r| i64::from(r.status.vcl()))),
            Var::BerespStorage | Var::BerespStorageHint => r
                .and_then(|r| r.storage.clone())
                .map_or(Value::Unset, Value::Stevedore),
            Var::BerespTime => Value::Time(r.map_or_else(now, |r| r.t_resp)),
            Var::BerespTransitBuffer => Value::Bytes(b.transit_buffer(p) as f64),
            Var::BerespTtl => {
                Value::Duration(r.map_or(0.0, |r| r.timers.t_origin + r.timers.ttl - r.t_resp))
            }
            Var::BerespUncacheable => Value::Bool(r.is_some_and(|r| r.uncacheable)),
            Var::BerespWas304 => Value::Bool(r.is_some_and(|r| r.was_304)),
            _ => Value::Unset,
        }
    }
}

/// `obj_stale.*`: the stale object a conditional fetch revalidates, read
/// as `obj.*` reads an object.
fn stale_var(stale: Option<&lacquer_cache::object::Object>, var: Var) -> Value {
    match var {
        Var::ObjStale => Value::Http(HttpKind::ObjStale),
        Var::ObjStaleIsValid => Value::Bool(stale.is_some_and(|o| !o.is_removed())),
        Var::ObjStaleAge
        | Var::ObjStaleCanEsi
        | Var::ObjStaleGrace
        | Var::ObjStaleHits
        | Var::ObjStaleKeep
        | Var::ObjStaleProto
        | Var::ObjStaleReason
        | Var::ObjStaleStatus
        | Var::ObjStaleStorage
        | Var::ObjStaleTime
        | Var::ObjStaleTtl
        | Var::ObjStaleUncacheable => {
            let same = match var {
                Var::ObjStaleAge => Var::ObjAge,
                Var::ObjStaleCanEsi => Var::ObjCanEsi,
                Var::ObjStaleGrace => Var::ObjGrace,
                Var::ObjStaleHits => Var::ObjHits,
                Var::ObjStaleKeep => Var::ObjKeep,
                Var::ObjStaleProto => Var::ObjProto,
                Var::ObjStaleReason => Var::ObjReason,
                Var::ObjStaleStatus => Var::ObjStatus,
                Var::ObjStaleStorage => Var::ObjStorage,
                Var::ObjStaleTime => Var::ObjTime,
                Var::ObjStaleTtl => Var::ObjTtl,
                _ => Var::ObjUncacheable,
            };
            match stale {
                Some(o) => crate::host::obj_vars::obj_var(Some(o), same),
                None => Value::Unset,
            }
        }
        _ => Value::Unset,
    }
}

impl Host for BackendHost<'_> {
    fn method(&self) -> Method {
        self.method
    }

    fn get(&mut self, var: Var) -> Value {
        if let Some(req) = self.req.as_deref() {
            match var {
                Var::ReqUrl | Var::ReqTopUrl => return Value::Str(req.head.url.clone()),
                Var::ReqMethod | Var::ReqTopMethod => return Value::Str(req.head.method.clone()),
                Var::ReqProto | Var::ReqTopProto => return proto_text(req.head.version),
                Var::ReqXid => return Value::str(&req.xid.to_string()),
                Var::ReqRestarts => return Value::Int(i64::from(req.restarts)),
                Var::ReqBackendHint => return Value::Backend(req.backend_hint),
                Var::ReqTime | Var::ReqTopTime => return Value::Time(req.t_req),
                _ => {}
            }
        }
        let b = &*self.bereq;
        let now = lacquer_core::time::now;
        let p = &self.sh.params;
        match var {
            Var::ClientIdentity => match &b.client_identity {
                Some(id) => Value::Str(id.clone()),
                None => Value::str(&b.conn.addrs.client_ip),
            },
            Var::ClientIp
            | Var::RemoteIp
            | Var::ServerIp
            | Var::LocalIp
            | Var::LocalEndpoint
            | Var::LocalSocket => b.conn.var(var),
            Var::ServerHostname => Value::str(&crate::hostname()),
            Var::ServerIdentity => Value::str(&self.sh.identity),
            Var::Now => Value::Time(now()),
            Var::SessXid | Var::BereqXid => Value::str(&b.xid.to_string()),
            Var::Bereq => Value::Http(HttpKind::Bereq),
            Var::BereqBackend => Value::Backend(b.backend),
            Var::BereqBetweenBytesTimeout => {
                Value::Duration(b.between_bytes_timeout.unwrap_or(p.between_bytes_timeout()))
            }
            Var::BereqConnectTimeout => {
                Value::Duration(b.connect_timeout.unwrap_or(p.connect_timeout()))
            }
            Var::BereqFirstByteTimeout => {
                Value::Duration(b.first_byte_timeout.unwrap_or(p.first_byte_timeout()))
            }
            Var::BereqHash => Value::Blob(b.hash.clone()),
            Var::BereqIsBgfetch => Value::Bool(b.is_bgfetch),
            Var::BereqIsHitmiss => Value::Bool(b.is_hitmiss),
            Var::BereqIsHitpass => Value::Bool(b.is_hitpass),
            Var::BereqRetryConnect => Value::Bool(b.retry_connect),
            Var::BereqMethod => Value::Str(b.method.clone()),
            Var::BereqProto => proto_text(b.version),
            Var::BereqRetries => Value::Int(i64::from(b.retries)),
            Var::BereqTime => Value::Time(b.t_start),
            Var::BereqUncacheable => Value::Bool(b.uncacheable),
            Var::BereqUrl => Value::Str(b.url.clone()),
            Var::Beresp
            | Var::BerespAge
            | Var::BerespBackend
            | Var::BerespBackendIp
            | Var::BerespBackendName
            | Var::BerespDoEsi
            | Var::BerespDoGunzip
            | Var::BerespDoGzip
            | Var::BerespDoStream
            | Var::BerespFilters
            | Var::BerespGrace
            | Var::BerespKeep
            | Var::BerespProto
            | Var::BerespReason
            | Var::BerespStatus
            | Var::BerespStorage
            | Var::BerespStorageHint
            | Var::BerespTime
            | Var::BerespTransitBuffer
            | Var::BerespTtl
            | Var::BerespUncacheable
            | Var::BerespWas304 => self.beresp_var(var),
            Var::ObjStale
            | Var::ObjStaleIsValid
            | Var::ObjStaleAge
            | Var::ObjStaleCanEsi
            | Var::ObjStaleGrace
            | Var::ObjStaleHits
            | Var::ObjStaleKeep
            | Var::ObjStaleProto
            | Var::ObjStaleReason
            | Var::ObjStaleStatus
            | Var::ObjStaleStorage
            | Var::ObjStaleTime
            | Var::ObjStaleTtl
            | Var::ObjStaleUncacheable => stale_var(b.stale.as_deref(), var),
            // Client-side variables: the checker keeps them out of
            // backend methods.
            Var::Req
            | Var::ReqBackendHint
            | Var::ReqCanGzip
            | Var::ReqEsi
            | Var::ReqEsiLevel
            | Var::ReqGrace
            | Var::ReqHash
            | Var::ReqHashAlwaysMiss
            | Var::ReqHashIgnoreBusy
            | Var::ReqHashIgnoreVary
            | Var::ReqIsHitmiss
            | Var::ReqIsHitpass
            | Var::ReqMethod
            | Var::ReqProto
            | Var::ReqRestarts
            | Var::ReqStorage
            | Var::ReqTime
            | Var::ReqTransport
            | Var::ReqTtl
            | Var::ReqMaxAge
            | Var::ReqUrl
            | Var::ReqXid
            | Var::ReqTopMethod
            | Var::ReqTopProto
            | Var::ReqTopTime
            | Var::ReqTopUrl
            | Var::BereqBody
            | Var::BerespBody
            | Var::ObjAge
            | Var::ObjCanEsi
            | Var::ObjGrace
            | Var::ObjHits
            | Var::ObjKeep
            | Var::ObjProto
            | Var::ObjReason
            | Var::ObjStatus
            | Var::ObjStorage
            | Var::ObjTime
            | Var::ObjTtl
            | Var::ObjUncacheable
            | Var::Resp
            | Var::RespBody
            | Var::RespDoEsi
            | Var::RespFilters
            | Var::RespIsStreaming
            | Var::RespProto
            | Var::RespReason
            | Var::RespStatus
            | Var::RespTime
            | Var::SessIdleSendTimeout
            | Var::SessSendTimeout
            | Var::SessTimeoutIdle
            | Var::SessTimeoutLinger => Value::Unset,
        }
    }

    fn set(&mut self, var: Var, value: Value) -> Result<(), VclFailure> {
        let b = &mut *self.bereq;
        match var {
            Var::BereqBackend => {
                if let Value::Backend(x) = value {
                    b.backend = x;
                }
            }
            Var::BereqBetweenBytesTimeout => b.between_bytes_timeout = Some(value.as_f64()),
            Var::BereqConnectTimeout => b.connect_timeout = Some(value.as_f64()),
            Var::BereqRetryConnect => b.retry_connect = value.as_bool(),
            Var::BereqFirstByteTimeout => b.first_byte_timeout = Some(value.as_f64()),
            Var::BereqMethod => {
                b.method = Bytes::copy_from_slice(value.as_bytes());
                b.log.bytes(Tag::BereqMethod, &b.method);
            }
            Var::BereqUrl => {
                let u = value.as_bytes();
                if u.is_empty()
                    || u.iter()
                        .any(|c| c.is_ascii_whitespace() || c.is_ascii_control())
                {
                    return Err("bereq.url: not a valid URL".into());
                }
                b.url = Bytes::copy_from_slice(u);
                b.log.bytes(Tag::BereqURL, &b.url);
            }
            Var::BereqProto => {
                b.version = if value.as_bytes().eq_ignore_ascii_case(b"HTTP/1.0") {
                    Version::Http10
                } else {
                    Version::Http11
                }
            }
            Var::BerespTransitBuffer => {
                b.transit_buffer = Some(value.as_f64().clamp(0.0, u64::MAX as f64) as u64)
            }
            _ => {
                let Some(r) = self.beresp.as_deref_mut() else {
                    return Ok(());
                };
                match var {
                    Var::BerespTtl => {
                        r.timers.ttl = value.as_f64() + (r.t_resp - r.timers.t_origin)
                    }
                    Var::BerespGrace => r.timers.grace = value.as_f64(),
                    Var::BerespKeep => r.timers.keep = value.as_f64(),
                    Var::BerespUncacheable => {
                        // Once uncacheable, always: Varnish ignores "false".
                        r.uncacheable |= value.as_bool();
                    }
                    Var::BerespDoStream => r.do_stream = value.as_bool(),
                    Var::BerespDoEsi | Var::BerespDoGzip | Var::BerespDoGunzip if r.filters_set => {
                        return Err(
                            format!("{}: beresp.filters are already set", var.spec().name).into(),
                        );
                    }
                    Var::BerespDoEsi => r.do_esi = value.as_bool(),
                    Var::BerespDoGzip => r.do_gzip = value.as_bool(),
                    Var::BerespDoGunzip => r.do_gunzip = value.as_bool(),
                    Var::BerespFilters => set_filter_list(r, value.as_bytes())?,
                    Var::BerespStatus => {
                        let s = value.as_i64();
                        let Some(status) = Status::settable(s) else {
                            return Err(format!("beresp.status: {s} is out of range").into());
                        };
                        r.status = status;
                        r.reason = Bytes::from_static(status.reason().as_bytes());
                        b.log.fmt(Tag::BerespStatus, format_args!("{}", r.status));
                        b.log.bytes(Tag::BerespReason, &r.reason);
                    }
                    Var::BerespReason => {
                        r.reason = Bytes::copy_from_slice(value.as_bytes());
                        b.log.bytes(Tag::BerespReason, &r.reason);
                    }
                    Var::BerespStorage => {
                        if let Value::Stevedore(s) = value {
                            r.storage = Some(s);
                        }
                    }
                    Var::BerespStorageHint => {
                        r.storage = Some(String::from_utf8_lossy(value.as_bytes()).into())
                    }
                    Var::BerespBody => r.body = value.as_bytes().to_vec(),
                    // The compiler lets no other variable be set on the
                    // backend side; never a silent no-op if that changes.
                    other => {
                        return Err(format!("{other:?} cannot be set on the backend side").into())
                    }
                }
                if matches!(
                    var,
                    Var::BerespTtl | Var::BerespGrace | Var::BerespKeep | Var::BerespUncacheable
                ) {
                    // Each change of the object's times, as varnishd logs it.
                    crate::host::vsl::ttl(
                        &mut b.log,
                        &crate::host::vsl::TtlRecord {
                            source: crate::host::vsl::TtlSource::Vcl,
                            timers: r.timers,
                            cacheable: !r.uncacheable,
                        },
                    );
                }
            }
        }
        Ok(())
    }

    fn unset(&mut self, var: Var) {
        if var == Var::BereqBody {
            // No body, and no length for one (not even `0`).
            self.bereq.body_unset = true;
            self.bereq.headers.remove("content-length");
        }
    }

    fn header(&mut self, kind: HttpKind, name: &str) -> Option<Bytes> {
        match kind {
            HttpKind::Req | HttpKind::ReqTop => self
                .req
                .as_deref()
                .and_then(|r| r.head.headers.get(name).cloned()),
            HttpKind::Bereq => self.bereq.headers.get(name).cloned(),
            HttpKind::Beresp => self
                .beresp
                .as_deref()
                .and_then(|r| r.headers.get(name).cloned()),
            HttpKind::ObjStale => self
                .bereq
                .stale
                .as_deref()
                .and_then(|o| o.headers().get(name).cloned()),
            _ => None,
        }
    }

    fn header_all(&mut self, kind: HttpKind, name: &str) -> Vec<Bytes> {
        match kind {
            HttpKind::Bereq => self.bereq.headers.get_all(name).cloned().collect(),
            HttpKind::Beresp => self
                .beresp
                .as_deref()
                .map(|r| r.headers.get_all(name).cloned().collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    fn set_header(&mut self, kind: HttpKind, name: &str, value: Bytes) -> Result<(), VclFailure> {
        self.charge_workspace(name, &value)?;
        // What a `set` replaces is logged unset first, then the new
        // value, as varnishd logs them.
        let log = &mut self.bereq.log;
        let logging = log.active();
        let (headers, tags) = match kind {
            HttpKind::Bereq => (&mut self.bereq.headers, (Tag::BereqUnset, Tag::BereqHeader)),
            HttpKind::Beresp => match self.beresp.as_deref_mut() {
                Some(r) => (&mut r.headers, (Tag::BerespUnset, Tag::BerespHeader)),
                None => return Ok(()),
            },
            // The compiler lets no other headers be set on the backend side;
            // never a silent no-op if that changes.
            other => return Err(format!("{}.http cannot be changed here", other.prefix()).into()),
        };
        let kept = headers.set_named_noting(name, value, |old| {
            if logging {
                log.header(tags.0, &old.name, &old.value)
            }
        });
        if logging {
            log.header(tags.1, name.as_bytes(), kept);
        }
        Ok(())
    }

    fn rollback(&mut self, kind: HttpKind) -> Result<(), VclFailure> {
        if kind != HttpKind::Bereq {
            return Err("std.rollback: only bereq can be rolled back here".into());
        }
        if self.method == Method::BackendResponse {
            // The response in hand answers the request as sent: it goes,
            // and the fetch carries on as failed (vcl_backend_error).
            self.bereq.response_dropped = true;
        }
        if let Some(original) = &self.bereq.original {
            let (method, url, headers) = (**original).clone();
            (self.bereq.method, self.bereq.url, self.bereq.headers) = (method, url, headers);
        }
        Ok(())
    }

    fn append_header(
        &mut self,
        kind: HttpKind,
        name: &str,
        value: Bytes,
    ) -> Result<(), VclFailure> {
        self.charge_workspace(name, &value)?;
        let tag = match kind {
            HttpKind::Bereq => Tag::BereqHeader,
            _ => Tag::BerespHeader,
        };
        if self.bereq.log.active() && (kind == HttpKind::Bereq || self.beresp.is_some()) {
            self.bereq.log.header(tag, name.as_bytes(), &value);
        }
        let name = Bytes::copy_from_slice(name.as_bytes());
        match kind {
            HttpKind::Bereq => self.bereq.headers.append(name, value),
            HttpKind::Beresp => {
                if let Some(r) = self.beresp.as_deref_mut() {
                    r.headers.append(name, value);
                }
            }
            // The compiler lets no other headers be set on the backend side;
            // never a silent no-op if that changes.
            other => return Err(format!("{}.http cannot be changed here", other.prefix()).into()),
        }
        Ok(())
    }

    fn unset_header(&mut self, kind: HttpKind, name: &str) {
        let log = &mut self.bereq.log;
        let logging = log.active();
        let (headers, tag) = match kind {
            HttpKind::Bereq => (&mut self.bereq.headers, Tag::BereqUnset),
            HttpKind::Beresp => match self.beresp.as_deref_mut() {
                Some(r) => (&mut r.headers, Tag::BerespUnset),
                None => return,
            },
            _ => return,
        };
        headers.remove_noting(name, |old| {
            if logging {
                log.header(tag, &old.name, &old.value)
            }
        });
    }

    fn hash_data(&mut self, _data: &[u8]) {}

    fn synthetic(&mut self, data: &[u8]) {
        if let Some(r) = self.beresp.as_deref_mut() {
            r.body.extend_from_slice(data);
        }
    }

    fn ban(&mut self, expr: &[u8]) -> Result<(), VclFailure> {
        crate::host::vcl::add_ban(self.sh.cache.bans(), &self.sh.params, expr)?;
        crate::host::spread::later(self.sh, || crate::host::invalidation::Invalidation::Ban {
            expr: String::from_utf8_lossy(expr).into_owned(),
        });
        Ok(())
    }

    fn param(&self, index: usize) -> Value {
        param_value(&self.sh.params, index)
    }

    fn storage(&self, name: &str, field: StorageField) -> Value {
        storage_value(self.sh, name, field)
    }

    fn healthy(&self, backend: usize) -> bool {
        self.vcl.healthy(backend)
    }

    fn log(&mut self, msg: &[u8]) {
        self.bereq.log.bytes(Tag::VCL_Log, msg);
    }

    fn proxy_field(&self, kind: u8, sub: Option<u8>) -> Option<Vec<u8>> {
        self.bereq.conn.proxy_field(kind, sub)
    }

    fn task_privs(&mut self) -> Option<&mut lacquer_vcl::vmod::TaskPrivs> {
        Some(&mut self.bereq.privs)
    }

    /// The backend connection's, as vmod tls shows it on the backend
    /// side (once there is a response).
    fn tls_session(&self) -> Option<&lacquer_vcl::TlsSession> {
        self.beresp.as_ref()?.tls.as_ref()
    }

    fn proxy_ssl(&self) -> Option<(u8, u32)> {
        self.bereq.conn.proxy_ssl()
    }

    fn cluster_self(&self) -> Option<String> {
        Some(self.sh.cluster.as_ref()?.cluster.me.name.to_string())
    }

    fn cluster_owner(&mut self) -> Option<(String, bool)> {
        let peers = self.sh.cluster.as_ref()?;
        if self.bereq.hash.is_empty() {
            return None;
        }
        peers.owner_of(&self.bereq.hash)
    }

    fn error(&mut self, msg: &str) {
        self.bereq.log.bytes(Tag::VCL_Error, msg.as_bytes());
        report_error(self.bereq.xid, msg);
    }

    fn acl_log(&mut self, record: &str) {
        self.bereq.log.bytes(Tag::VCL_acl, record.as_bytes());
    }

    fn purge_tags(&mut self, keys: &[u8], soft: bool) -> i64 {
        crate::host::spread::later(self.sh, || crate::host::invalidation::Invalidation::Tags {
            tags: String::from_utf8_lossy(keys).into_owned(),
            soft,
        });
        crate::host::purge::by_tags(self.sh, keys, soft) as i64
    }
}
