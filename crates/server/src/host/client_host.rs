//! The client side as VCL sees it: `req.*`, `req_top.*`, `resp.*`,
//! `obj.*`, `client.*`/`server.*`/`local.*`/`remote.*` and `sess.*` over a
//! request in flight, the object it found and the response being built
//! (see [`crate::host::resp`]).

use crate::host::req::{ConnInfo, Req, TopReq};
pub(crate) use crate::host::resp::{obj_reason, Resp};
use crate::host::spread;
use crate::host::vcl::{param_value, proto_text, report_error, storage_value, Loaded};
use crate::transport::deadline::SessTimeout;
use crate::Shared;
use bytes::Bytes;
use lacquer_cache::object::Object;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_http::{Status, Version};
use lacquer_shm::Tag;
use lacquer_vcl::{Host, HttpKind, Lent, Method, StorageField, Value, Var, VclFailure};

pub(crate) struct ClientHost<'a> {
    pub method: Method,
    pub sh: &'a Shared,
    pub vcl: &'a Loaded,
    pub req: &'a mut Req,
    pub conn: &'a ConnInfo,
    pub hash: Option<&'a mut Vec<u8>>,
    /// The hash key looked up, in `vcl_hit` and `vcl_miss` (vmod purge).
    pub key: Option<&'a [u8]>,
    pub obj: Option<&'a Object>,
    pub resp: Option<&'a mut Resp>,
}

/// The top request of an include.
fn top(req: &Req) -> &TopReq {
    &req.include.as_ref().expect("only called for includes").top
}

fn dur(v: Option<f64>) -> Value {
    Value::Duration(v.unwrap_or(-1.0))
}

impl<'a> ClientHost<'a> {
    /// Charges a header VCL sets to the request's workspace
    /// (`workspace_client`, which also holds the request head): past it,
    /// the VCL fails, as varnishd's does on a workspace overflow.
    fn charge_workspace(&mut self, name: &str, value: &[u8]) -> Result<(), VclFailure> {
        let cost = (name.len() + value.len() + 4) as u64;
        let head = self.req.head.raw.len() as u64;
        if head + self.req.ws_used + cost > self.sh.params.workspace_client() {
            COUNTERS.inc(Counter::ws_client_overflow);
            return Err("out of workspace (req)".into());
        }
        self.req.ws_used += cost;
        Ok(())
    }

    /// A host for `method` over a request, with no hash, key, object or
    /// response yet (set those with struct update syntax).
    pub fn new(
        method: Method,
        sh: &'a Shared,
        vcl: &'a Loaded,
        req: &'a mut Req,
        conn: &'a ConnInfo,
    ) -> Self {
        ClientHost {
            method,
            sh,
            vcl,
            req,
            conn,
            hash: None,
            key: None,
            obj: None,
            resp: None,
        }
    }

    /// A stored object's header, lent in place (a date kept as seconds
    /// is written out when asked for: [`Lent::Owned`]).
    fn obj_header(&self, name: &str) -> Lent<'_> {
        match self.obj.and_then(|o| o.header_ref(name)) {
            None => Lent::Absent,
            Some(value) => value.as_slice().map_or(Lent::Owned, Lent::Slice),
        }
    }

    fn delivery_header(&self, name: &str) -> Option<Bytes> {
        let resp = self.resp.as_deref()?;
        let now = lacquer_core::time::now();
        if name.eq_ignore_ascii_case("age") {
            return Some(Bytes::from(self.obj.map_or(0, |o| o.age(now)).to_string()));
        }
        if name.eq_ignore_ascii_case("x-varnish") {
            return Some(Bytes::from(match (resp.hit, self.obj) {
                (true, Some(o)) => format!("{} {}", self.req.xid, o.xid()),
                _ => self.req.xid.to_string(),
            }));
        }
        if name.eq_ignore_ascii_case("via") {
            return Some(Bytes::copy_from_slice(self.sh.via.as_bytes()));
        }
        if name.eq_ignore_ascii_case("accept-ranges") {
            let obj = self.obj?;
            if self.adds_accept_ranges(resp, obj) {
                return Some(Bytes::from_static(b"bytes"));
            }
            return resp.get(Some(obj), name);
        }
        None
    }

    /// Whether delivery adds `Accept-Ranges: bytes` to an object's
    /// response (a 200 without one, as varnishd adds it before
    /// `vcl_deliver`).
    fn adds_accept_ranges(&self, resp: &Resp, obj: &Object) -> bool {
        resp.status.wire() == 200
            && self.sh.params.http_range_support()
            && !resp.has_accept_ranges(obj)
    }

    /// Moves Age, X-Varnish and Via into the response headers so that VCL
    /// can change or remove them.
    fn own_delivery_headers(&mut self) {
        let Some(resp) = self.resp.as_deref() else {
            return;
        };
        if resp.own_delivery_headers {
            return;
        }
        let mut values: Vec<(&'static str, Bytes)> = ["Age", "X-Varnish", "Via"]
            .iter()
            .filter_map(|n| self.delivery_header(n).map(|v| (*n, v)))
            .collect();
        if self.obj.is_some_and(|o| self.adds_accept_ranges(resp, o)) {
            values.push(("Accept-Ranges", Bytes::from_static(b"bytes")));
        }
        let resp = self.resp.as_deref_mut().expect("checked above");
        for (n, v) in values {
            resp.set(n, Some(v));
        }
        resp.own_delivery_headers = true;
    }

    fn is_delivery_header(name: &str) -> bool {
        ["age", "x-varnish", "via", "accept-ranges"]
            .iter()
            .any(|n| n.eq_ignore_ascii_case(name))
    }
}

impl ClientHost<'_> {
    /// `resp.*`: the response being delivered (an object's, with VCL's
    /// changes, or a synthetic one).
    fn resp_var(&self, var: Var) -> Value {
        let req = &*self.req;
        let obj = self.obj;
        match var {
            Var::Resp => Value::Http(HttpKind::Resp),
            Var::RespDoEsi => Value::Bool(req.esi_enabled && obj.is_some_and(|o| o.esi_expected())),
            Var::RespFilters => match obj {
                Some(o) => {
                    let status = self.resp.as_deref().map_or(o.status(), |r| r.status.wire());
                    let f = crate::host::filters::Filters::of(&self.sh.params, req, o, status);
                    Value::str(&f.names())
                }
                None => Value::str(""),
            },
            Var::RespIsStreaming => {
                Value::Bool(obj.is_some_and(|o| o.body().known_len().is_none()))
            }
            Var::RespProto => proto_text(Version::Http11),
            Var::RespReason => match (self.resp.as_deref(), obj) {
                (Some(r), _) if !r.reason.is_empty() => Value::Str(r.reason.clone()),
                (_, Some(o)) => Value::Str(obj_reason(o)),
                _ => Value::Unset,
            },
            Var::RespStatus => Value::Int(
                self.resp
                    .as_deref()
                    .map_or(0, |r| i64::from(r.status.vcl())),
            ),
            Var::RespTime => Value::Time(lacquer_core::time::now()),
            _ => Value::Unset,
        }
    }
}

impl Host for ClientHost<'_> {
    fn method(&self) -> Method {
        self.method
    }

    fn get(&mut self, var: Var) -> Value {
        let req = &*self.req;
        // The clock is read only by the variables that need it.
        let now = lacquer_core::time::now;
        let obj = self.obj;
        match var {
            Var::ClientIdentity => match &req.identity {
                Some(id) => Value::Str(id.clone()),
                None => Value::str(&self.conn.addrs.client_ip),
            },
            Var::ClientIp
            | Var::RemoteIp
            | Var::ServerIp
            | Var::LocalIp
            | Var::LocalEndpoint
            | Var::LocalSocket => self.conn.var(var),
            Var::ServerHostname => Value::str(&crate::hostname()),
            Var::ServerIdentity => Value::str(&self.sh.identity),
            Var::Req => Value::Http(HttpKind::Req),
            Var::ReqBackendHint => Value::Backend(req.backend_hint),
            Var::ReqCanGzip => Value::Bool(crate::host::req::can_gzip(&req.head.headers)),
            Var::ReqEsi => Value::Bool(req.esi_enabled),
            Var::ReqEsiLevel => Value::Int(i64::from(req.esi_level())),
            Var::ReqGrace => dur(req.grace),
            Var::ReqHash => self
                .hash
                .as_deref()
                .map_or(Value::Unset, |h| Value::Blob(Bytes::copy_from_slice(h))),
            Var::ReqHashAlwaysMiss => Value::Bool(req.hash_always_miss),
            Var::ReqHashIgnoreBusy => Value::Bool(req.hash_ignore_busy),
            Var::ReqHashIgnoreVary => Value::Bool(req.hash_ignore_vary),
            Var::ReqIsHitmiss => Value::Bool(req.is_hitmiss),
            Var::ReqIsHitpass => Value::Bool(req.is_hitpass),
            Var::ReqTopMethod if req.include.is_some() => Value::Str(top(req).method.clone()),
            Var::ReqTopProto if req.include.is_some() => proto_text(top(req).version),
            Var::ReqTopTime if req.include.is_some() => Value::Time(top(req).t_req),
            Var::ReqTopUrl if req.include.is_some() => Value::Str(top(req).url.clone()),
            Var::ReqMethod | Var::ReqTopMethod => Value::Str(req.head.method.clone()),
            Var::ReqProto | Var::ReqTopProto => proto_text(req.head.version),
            Var::ReqRestarts => Value::Int(i64::from(req.restarts)),
            Var::ReqStorage => req.storage.clone().map_or(Value::Unset, Value::Stevedore),
            Var::ReqTime | Var::ReqTopTime => Value::Time(req.t_req),
            Var::ReqTransport => Value::str("HTTP/1"),
            Var::ReqTtl | Var::ReqMaxAge => dur(req.ttl),
            Var::ReqUrl | Var::ReqTopUrl => Value::Str(req.head.url.clone()),
            Var::ReqXid => Value::str(&req.xid.to_string()),
            Var::SessXid => Value::str(&req.xid.to_string()),
            Var::Now => Value::Time(now()),
            Var::SessIdleSendTimeout => {
                Value::Duration(req.sess.idle_send.or(self.sh.params.idle_send_timeout()))
            }
            Var::SessSendTimeout => {
                Value::Duration(req.sess.send.or(self.sh.params.send_timeout()))
            }
            Var::SessTimeoutIdle => {
                Value::Duration(req.sess.idle.or(self.sh.params.timeout_idle()))
            }
            Var::SessTimeoutLinger => {
                Value::Duration(req.sess.linger.or(self.sh.params.timeout_linger()))
            }
            Var::ObjAge
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
            | Var::ObjUncacheable => crate::host::obj_vars::obj_var(obj, var),
            Var::Resp
            | Var::RespDoEsi
            | Var::RespFilters
            | Var::RespIsStreaming
            | Var::RespProto
            | Var::RespReason
            | Var::RespStatus
            | Var::RespTime => self.resp_var(var),
            // Backend-side and write-only variables: the checker keeps
            // them out of client methods.
            Var::Bereq
            | Var::BereqBackend
            | Var::BereqBetweenBytesTimeout
            | Var::BereqBody
            | Var::BereqConnectTimeout
            | Var::BereqFirstByteTimeout
            | Var::BereqHash
            | Var::BereqIsBgfetch
            | Var::BereqIsHitmiss
            | Var::BereqIsHitpass
            | Var::BereqMethod
            | Var::BereqProto
            | Var::BereqRetries
            | Var::BereqRetryConnect
            | Var::BereqTime
            | Var::BereqUncacheable
            | Var::BereqUrl
            | Var::BereqXid
            | Var::Beresp
            | Var::BerespAge
            | Var::BerespBackend
            | Var::BerespBackendIp
            | Var::BerespBackendName
            | Var::BerespBody
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
            | Var::BerespWas304
            | Var::ObjStale
            | Var::ObjStaleAge
            | Var::ObjStaleCanEsi
            | Var::ObjStaleGrace
            | Var::ObjStaleHits
            | Var::ObjStaleIsValid
            | Var::ObjStaleKeep
            | Var::ObjStaleProto
            | Var::ObjStaleReason
            | Var::ObjStaleStatus
            | Var::ObjStaleStorage
            | Var::ObjStaleTime
            | Var::ObjStaleTtl
            | Var::ObjStaleUncacheable
            | Var::RespBody => Value::Unset,
        }
    }

    fn set(&mut self, var: Var, value: Value) -> Result<(), VclFailure> {
        let req = &mut *self.req;
        match var {
            Var::ClientIdentity => req.identity = Some(Bytes::copy_from_slice(value.as_bytes())),
            Var::ReqBackendHint => {
                if let Value::Backend(b) = value {
                    req.backend_hint = b;
                }
            }
            Var::RespDoEsi if req.resp_filters.is_some() => {
                return Err("resp.do_esi: resp.filters are already set".into())
            }
            Var::ReqEsi | Var::RespDoEsi => req.esi_enabled = value.as_bool(),
            Var::RespFilters => {
                req.resp_filters = Some(crate::host::filters::Filters::parse(value.as_bytes())?)
            }
            Var::ReqGrace => req.grace = Some(value.as_f64()),
            Var::ReqTtl | Var::ReqMaxAge => req.ttl = Some(value.as_f64()),
            Var::ReqHashAlwaysMiss => req.hash_always_miss = value.as_bool(),
            Var::ReqHashIgnoreBusy => req.hash_ignore_busy = value.as_bool(),
            Var::ReqHashIgnoreVary => req.hash_ignore_vary = value.as_bool(),
            Var::ReqMethod => {
                let m = value.as_bytes();
                if m.is_empty() || !m.iter().all(|b| b.is_ascii_graphic()) {
                    return Err("req.method: not a valid method".into());
                }
                req.head.method = Bytes::copy_from_slice(m);
            }
            Var::ReqUrl => {
                let u = value.as_bytes();
                if u.is_empty()
                    || u.iter()
                        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
                {
                    return Err("req.url: not a valid URL".into());
                }
                req.head.url = Bytes::copy_from_slice(u);
            }
            Var::ReqProto => {
                req.head.version = if value.as_bytes().eq_ignore_ascii_case(b"HTTP/1.0") {
                    Version::Http10
                } else {
                    Version::Http11
                }
            }
            Var::ReqStorage => {
                if let Value::Stevedore(s) = value {
                    req.storage = Some(s);
                }
            }
            Var::SessIdleSendTimeout => req.sess.idle_send = SessTimeout::set(value.as_f64()),
            Var::SessSendTimeout => req.sess.send = SessTimeout::set(value.as_f64()),
            Var::SessTimeoutIdle => req.sess.idle = SessTimeout::set(value.as_f64()),
            Var::SessTimeoutLinger => req.sess.linger = SessTimeout::set(value.as_f64()),
            Var::RespStatus => {
                let s = value.as_i64();
                let Some(status) = Status::settable(s) else {
                    return Err(format!("resp.status: {s} is out of range").into());
                };
                if let Some(r) = self.resp.as_deref_mut() {
                    r.status = status;
                    r.changed = true;
                    r.reason = Bytes::from_static(status.reason().as_bytes());
                    // Logged as it changes, where the response was logged
                    // as built (as varnishd logs both).
                    if req.resp_logged && req.log.active() {
                        let status = r.status.wire().to_string();
                        req.log.bytes(Tag::RespStatus, status.as_bytes());
                        req.log.bytes(Tag::RespReason, &r.reason);
                    }
                }
            }
            Var::RespReason => {
                if let Some(r) = self.resp.as_deref_mut() {
                    r.reason = Bytes::copy_from_slice(value.as_bytes());
                    r.changed = true;
                    if req.resp_logged && req.log.active() {
                        req.log.bytes(Tag::RespReason, &r.reason);
                    }
                }
            }
            Var::RespBody => {
                if let Some(r) = self.resp.as_deref_mut() {
                    r.body = value.as_bytes().to_vec();
                }
            }
            // The compiler lets no other variable be set on the client
            // side; never a silent no-op if that changes.
            other => return Err(format!("{other:?} cannot be set on the client side").into()),
        }
        Ok(())
    }

    /// `unset req.grace` / `unset req.max_age`: back to no limit.
    fn unset(&mut self, var: Var) {
        match var {
            Var::ReqGrace => self.req.grace = None,
            Var::ReqTtl | Var::ReqMaxAge => self.req.ttl = None,
            _ => {}
        }
    }

    fn header(&mut self, kind: HttpKind, name: &str) -> Option<Bytes> {
        match self.header_ref(kind, name) {
            Lent::Absent => None,
            Lent::Value(v) => Some(v.clone()),
            // A stored object's field, read in place: copied out.
            Lent::Slice(v) => Some(Bytes::copy_from_slice(v)),
            Lent::Owned if kind == HttpKind::Obj => self.obj?.header(name),
            Lent::Owned => match self.resp.as_deref() {
                Some(resp) if resp.own_delivery_headers || !Self::is_delivery_header(name) => {
                    resp.get(self.obj, name)
                }
                _ => self.delivery_header(name),
            },
        }
    }

    fn header_ref(&self, kind: HttpKind, name: &str) -> Lent<'_> {
        match kind {
            HttpKind::ReqTop if self.req.include.is_some() => lend(top(self.req).headers.get(name)),
            HttpKind::Req | HttpKind::ReqTop => lend(self.req.head.headers.get(name)),
            HttpKind::Obj => self.obj_header(name),
            HttpKind::ObjStale => Lent::Absent,
            HttpKind::Resp => {
                let Some(resp) = self.resp.as_deref() else {
                    return Lent::Absent;
                };
                if !resp.own_delivery_headers && Self::is_delivery_header(name) {
                    return Lent::Owned;
                }
                match resp.get_lent(name) {
                    Some(own) => lend(own),
                    // Unedited: the stored object's, read in place.
                    None => self.obj_header(name),
                }
            }
            HttpKind::Bereq | HttpKind::Beresp => Lent::Absent,
        }
    }

    fn str_ref(&self, var: Var) -> Option<&[u8]> {
        match var {
            Var::ReqUrl | Var::ReqTopUrl => Some(&self.req.head.url),
            Var::ReqMethod | Var::ReqTopMethod => Some(&self.req.head.method),
            _ => None,
        }
    }

    fn header_all(&mut self, kind: HttpKind, name: &str) -> Vec<Bytes> {
        match kind {
            HttpKind::ReqTop if self.req.include.is_some() => {
                top(self.req).headers.get_all(name).cloned().collect()
            }
            HttpKind::Req | HttpKind::ReqTop => {
                self.req.head.headers.get_all(name).cloned().collect()
            }
            HttpKind::Resp => self
                .resp
                .as_deref()
                .map(|r| r.get_all(self.obj, name))
                .unwrap_or_default(),
            HttpKind::Obj => self
                .obj
                .map(|o| o.header_refs(name).map(|v| v.to_bytes()).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    fn set_header(&mut self, kind: HttpKind, name: &str, value: Bytes) -> Result<(), VclFailure> {
        self.charge_workspace(name, &value)?;
        match kind {
            HttpKind::Req => {
                let req = &mut *self.req;
                let logging = req.log.active();
                // What it replaces is logged unset first, as Varnish does.
                let kept = req.head.headers.set_named_noting(name, value, |old| {
                    if logging {
                        req.log.header(Tag::ReqUnset, &old.name, &old.value)
                    }
                });
                if logging {
                    req.log.header(Tag::ReqHeader, name.as_bytes(), kept);
                }
            }
            HttpKind::Resp => {
                if Self::is_delivery_header(name) {
                    self.own_delivery_headers();
                }
                let req = &mut *self.req;
                let obj = self.obj;
                if let Some(r) = self.resp.as_deref_mut() {
                    if req.resp_logged && req.log.active() {
                        let log = &mut req.log;
                        r.set_noting(obj, name, Some(value.clone()), |old| {
                            log.header(Tag::RespUnset, old.0, old.1)
                        });
                        log.header(Tag::RespHeader, name.as_bytes(), &value);
                    } else {
                        r.set(name, Some(value));
                    }
                }
            }
            // The compiler lets no other headers be set on the client side;
            // never a silent no-op if that changes.
            other => return Err(format!("{}.http cannot be changed here", other.prefix()).into()),
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
        match kind {
            HttpKind::Req => {
                if self.req.log.active() {
                    self.req.log.header(Tag::ReqHeader, name.as_bytes(), &value);
                }
                self.req
                    .head
                    .headers
                    .append(Bytes::copy_from_slice(name.as_bytes()), value)
            }
            HttpKind::Resp => {
                if Self::is_delivery_header(name) {
                    self.own_delivery_headers();
                }
                if self.req.resp_logged && self.req.log.active() {
                    self.req
                        .log
                        .header(Tag::RespHeader, name.as_bytes(), &value);
                }
                let obj = self.obj;
                if let Some(r) = self.resp.as_deref_mut() {
                    r.append(obj, name, value);
                }
            }
            // The compiler lets no other headers be set on the client side;
            // never a silent no-op if that changes.
            other => return Err(format!("{}.http cannot be changed here", other.prefix()).into()),
        }
        Ok(())
    }

    fn unset_header(&mut self, kind: HttpKind, name: &str) {
        match kind {
            HttpKind::Req => {
                let req = &mut *self.req;
                let logging = req.log.active();
                req.head.headers.remove_noting(name, |old| {
                    if logging {
                        req.log.header(Tag::ReqUnset, &old.name, &old.value)
                    }
                });
            }
            HttpKind::Resp => {
                if Self::is_delivery_header(name) {
                    self.own_delivery_headers();
                }
                let req = &mut *self.req;
                let obj = self.obj;
                if let Some(r) = self.resp.as_deref_mut() {
                    if req.resp_logged && req.log.active() {
                        let log = &mut req.log;
                        r.set_noting(obj, name, None, |old| {
                            log.header(Tag::RespUnset, old.0, old.1)
                        });
                    } else {
                        r.set(name, None);
                    }
                }
            }
            _ => {}
        }
    }

    fn hash_data(&mut self, data: &[u8]) {
        if let Some(h) = self.hash.as_deref_mut() {
            h.extend_from_slice(data);
            h.push(0);
        }
    }

    fn hash_header(&mut self, kind: HttpKind, name: &str) -> bool {
        let value = match kind {
            HttpKind::ReqTop if self.req.include.is_some() => return false,
            HttpKind::Req | HttpKind::ReqTop => self.req.head.headers.get(name),
            _ => return false,
        };
        if let Some(h) = self.hash.as_deref_mut() {
            h.extend_from_slice(value.map_or(&b""[..], |v| &v[..]));
            h.push(0);
        }
        true
    }

    fn hash_var(&mut self, var: Var) -> bool {
        let value = match var {
            Var::ReqUrl => &self.req.head.url,
            _ => return false,
        };
        if let Some(h) = self.hash.as_deref_mut() {
            h.extend_from_slice(value);
            h.push(0);
        }
        true
    }

    fn synthetic(&mut self, data: &[u8]) {
        if let Some(r) = self.resp.as_deref_mut() {
            r.body.extend_from_slice(data);
        }
    }

    fn ban(&mut self, expr: &[u8]) -> Result<(), VclFailure> {
        crate::host::vcl::add_ban(self.sh.cache.bans(), &self.sh.params, expr)?;
        spread::later(self.sh, || crate::host::invalidation::Invalidation::Ban {
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
        self.req.log.bytes(Tag::VCL_Log, msg);
    }

    fn error(&mut self, msg: &str) {
        self.req.log.bytes(Tag::VCL_Error, msg.as_bytes());
        report_error(self.req.xid, msg);
    }

    fn acl_log(&mut self, record: &str) {
        self.req.log.bytes(Tag::VCL_acl, record.as_bytes());
    }

    fn rollback(&mut self, kind: HttpKind) -> Result<(), VclFailure> {
        if kind != HttpKind::Req {
            return Err("std.rollback: only req can be rolled back here".into());
        }
        if let Some(original) = &self.req.original {
            let (method, url, headers) = (**original).clone();
            let head = &mut self.req.head;
            (head.method, head.url, head.headers) = (method, url, headers);
        }
        Ok(())
    }

    fn cache_req_body(&mut self, max: u64) -> bool {
        // Read before vcl_recv, up to the most any call asks for.
        match &self.req.cached_body {
            Some(body) if body.len() as u64 <= max => {
                self.req.body_for_lookup = false;
                true
            }
            _ => {
                self.req
                    .log
                    .bytes(Tag::FetchError, b"Request body too big to cache");
                false
            }
        }
    }

    fn cached_req_body(&self) -> Option<Bytes> {
        self.req
            .cached_body
            .clone()
            .filter(|_| !self.req.body_for_lookup)
    }

    fn task_privs(&mut self) -> Option<&mut lacquer_vcl::vmod::TaskPrivs> {
        Some(&mut self.req.privs)
    }

    fn proxy_field(&self, kind: u8, sub: Option<u8>) -> Option<Vec<u8>> {
        self.conn.proxy_field(kind, sub)
    }

    fn proxy_ssl(&self) -> Option<(u8, u32)> {
        self.conn.proxy_ssl()
    }

    fn cluster_self(&self) -> Option<String> {
        Some(self.sh.cluster.as_ref()?.cluster.me.name.to_string())
    }

    /// By the key looked up, once `vcl_hash` has made it (a pass's
    /// delivery reads it from the request, which kept it for its fetch).
    fn cluster_owner(&mut self) -> Option<(String, bool)> {
        let peers = self.sh.cluster.as_ref()?;
        match self.key {
            Some(key) => peers.owner_of(key),
            None if !self.req.hash_key.is_empty() => peers.owner_of(&self.req.hash_key),
            None => None,
        }
    }

    fn tls_session(&self) -> Option<&lacquer_vcl::TlsSession> {
        self.conn.addrs.tls.as_ref()
    }

    fn peer_credentials(&self) -> Option<lacquer_vcl::PeerCredentials> {
        self.conn.peer_credentials()
    }

    fn client_socket(&self) -> Option<&dyn lacquer_vcl::ClientSocket> {
        self.conn
            .fd
            .as_ref()
            .map(|fd| fd as &dyn lacquer_vcl::ClientSocket)
    }

    fn purge(&mut self, soft: Option<[f64; 3]>) -> i64 {
        let Some(key) = self.key else {
            return 0;
        };
        // A soft purge stays on this node (its lifetimes are its own).
        if soft.is_none() {
            spread::later(self.sh, || crate::host::invalidation::Invalidation::Purge {
                key: Bytes::copy_from_slice(key),
            });
        }
        crate::host::purge::by_key(self.sh, key, soft) as i64
    }

    fn purge_tags(&mut self, keys: &[u8], soft: bool) -> i64 {
        spread::later(self.sh, || crate::host::invalidation::Invalidation::Tags {
            tags: String::from_utf8_lossy(keys).into_owned(),
            soft,
        });
        crate::host::purge::by_tags(self.sh, keys, soft) as i64
    }
}

/// A header value as lent to the interpreter.
fn lend(v: Option<&Bytes>) -> Lent<'_> {
    v.map_or(Lent::Absent, Lent::Value)
}
