//! A backend request and response as they are prepared: `Bereq` (the
//! request head, its body, its timeouts and what VCL set on it), the head
//! written for the backend, and `Beresp` (the response as VCL may change
//! it before it is stored, with the fetch filters by Varnish's names).

use crate::host::req::{Acct, ConnInfo, Req};
use crate::host::vcl::Loaded;
use crate::Shared;
use bytes::Bytes;
use lacquer_backend::Timeouts;
use lacquer_cache::object::{Object, Timers};
use lacquer_core::params::Params;
use lacquer_http::{Headers, Status, Version};
use lacquer_shm::record::txn;
use lacquer_shm::{Side, Tag, Txn};
use lacquer_vcl::BackendRef;
use std::sync::Arc;

/// Request headers never sent on a cache fetch: the object fetched must be
/// the whole, unconditional representation.
pub(crate) const NOT_FOR_CACHE_FETCH: &[&str] = &[
    "if-modified-since",
    "if-none-match",
    "if-match",
    "if-unmodified-since",
    "if-range",
    "range",
    "expect",
    "content-length",
    "transfer-encoding",
];

/// The backend request being prepared.
pub(crate) struct Bereq {
    /// Counts it in `n_bereq` while it lives.
    _live: lacquer_core::counters::Held,
    /// The vmods' state for this fetch.
    pub privs: lacquer_vcl::vmod::TaskPrivs,
    pub xid: u64,
    pub method: Bytes,
    pub url: Bytes,
    pub version: Version,
    pub headers: Headers,
    pub backend: BackendRef,
    pub retries: u32,
    pub uncacheable: bool,
    pub is_bgfetch: bool,
    pub is_hitmiss: bool,
    pub is_hitpass: bool,
    /// The client request came from a peer of the cluster (its mark
    /// verified): the fetch goes to the origin, never to a peer again.
    pub from_peer: bool,
    /// What a cache fetch changed of the client's request after copying
    /// it (the method made GET, `Accept-Encoding: gzip` added, the
    /// protocol made HTTP/1.1): its first log shows the copy, then each
    /// change, as varnishd's does.
    pub forced: Option<Forced>,
    /// A reused connection that fails before any response byte may be
    /// retried once on a fresh one (`bereq.retry_connect`).
    pub retry_connect: bool,
    /// Bytes of header values VCL has set, charged to `workspace_backend`
    /// with the request head.
    pub ws_used: u64,
    /// `beresp.transit_buffer`, when VCL set it.
    pub transit_buffer: Option<u64>,
    /// The stale object a conditional fetch revalidates (`obj_stale` in
    /// `vcl_backend_refresh`).
    pub stale: Option<Arc<Object>>,
    pub t_start: f64,
    pub hash: Bytes,
    pub connect_timeout: Option<f64>,
    pub first_byte_timeout: Option<f64>,
    pub between_bytes_timeout: Option<f64>,
    /// `unset bereq.body` ran.
    pub body_unset: bool,
    /// The client's body, when it was read whole into memory: sent from
    /// here (so a retry or a fetch outliving the request can send it).
    pub cached_body: Option<Bytes>,
    /// The request as made, before `vcl_backend_fetch` (for
    /// `std.rollback`), when the program calls it.
    pub original: Option<Box<(Bytes, Bytes, Headers)>>,
    /// `std.rollback(bereq)` ran in vcl_backend_response.
    pub response_dropped: bool,
    pub conn: ConnInfo,
    pub client_identity: Option<Bytes>,
    /// The fetch's log transaction.
    pub log: Txn,
    /// Bytes sent and received, for `BereqAcct`.
    pub acct: Acct,
}

/// What follows a backend request head on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BereqBody {
    None,
    Length(u64),
    Chunked,
}

impl BereqBody {
    /// The body a client request still has to send, framed as it came.
    pub fn of(framing: lacquer_http::Framing) -> BereqBody {
        match framing {
            lacquer_http::Framing::Length(n) => BereqBody::Length(n),
            lacquer_http::Framing::Chunked => BereqBody::Chunked,
            lacquer_http::Framing::None | lacquer_http::Framing::UntilClose => BereqBody::None,
        }
    }
}

/// What a cache fetch changed of the request it copied from the client's.
#[derive(Debug, Clone)]
pub(crate) struct Forced {
    /// The client's method and protocol.
    pub method: Bytes,
    pub version: Version,
    /// `Accept-Encoding: gzip` was added (the client's had none).
    pub added_accept_encoding: bool,
}

/// The backend response as VCL may change it before it is stored.
pub(crate) struct Beresp {
    pub status: Status,
    pub reason: Bytes,
    pub version: Version,
    pub headers: Headers,
    pub timers: Timers,
    pub uncacheable: bool,
    pub do_stream: bool,
    pub do_esi: bool,
    pub do_gzip: bool,
    pub do_gunzip: bool,
    /// `beresp.filters` named `br` or `zstd`: a plain body is stored
    /// compressed so.
    pub encode: Option<lacquer_filters::coding::Coding>,
    /// `beresp.filters` named `unbr` or `unzstd`: a body the backend
    /// sent so is stored decoded.
    pub decode: Option<lacquer_filters::coding::Coding>,
    /// VCL set `beresp.filters`: the `do_*` flags no longer change.
    pub filters_set: bool,
    pub was_304: bool,
    pub backend: BackendRef,
    pub storage: Option<Arc<str>>,
    /// The body of `vcl_backend_error`.
    pub body: Vec<u8>,
    pub t_resp: f64,
    /// What the backend connection's TLS handshake settled (vmod tls in
    /// `vcl_backend_response`); None over plain connections.
    pub tls: Option<lacquer_vcl::TlsSession>,
}

impl Bereq {
    /// How far a private fill may run ahead of its reader: VCL's
    /// `beresp.transit_buffer`, else the parameter.
    pub fn transit_buffer(&self, p: &lacquer_core::params::Params) -> u64 {
        self.transit_buffer.unwrap_or_else(|| p.transit_buffer())
    }

    /// A backend request copied from a client request, with the given
    /// headers; the flags are the caller's to set. It begins a backend
    /// transaction in the log, linked from the request's for `reason`
    /// (`fetch`, `bgfetch`, `pass`, `pipe`).
    pub fn from_req(
        sh: &Shared,
        vcl: &Loaded,
        req: &mut Req,
        headers: Headers,
        conn: ConnInfo,
        reason: &'static lacquer_core::word::Word,
    ) -> Bereq {
        let xid = lacquer_core::ids::next_vxid();
        let now = lacquer_core::time::now();
        let mut log = sh.txn(xid, Side::Backend);
        if log.active() {
            req.log.link(&txn::BEREQ, xid, reason);
            // In varnishd's order: the program, then the start.
            log.begin(&txn::BEREQ, req.xid, reason, now);
            // A pipe's backend side runs no VCL of its own (vcl_pipe is
            // the client's), and varnishd names no program there.
            if reason.as_str() != txn::PIPE.as_str() {
                log.bytes(Tag::VCL_use, vcl.name.as_bytes());
            }
            log.timestamp(&lacquer_shm::packed::stamp::START, now);
        }
        Bereq {
            _live: lacquer_core::counters::COUNTERS.hold(lacquer_core::counters::Counter::n_bereq),
            privs: Default::default(),
            log,
            acct: Acct::default(),
            xid,
            method: req.head.method.clone(),
            url: req.head.url.clone(),
            // bereq.proto is HTTP/1.1 for a request that came over
            // HTTP/2, as in Varnish.
            version: match req.head.version {
                Version::Http2 | Version::Http3 => Version::Http11,
                v => v,
            },
            headers,
            backend: req.backend_hint,
            retries: 0,
            uncacheable: false,
            is_bgfetch: false,
            is_hitmiss: false,
            is_hitpass: false,
            from_peer: req.from_peer,
            forced: None,
            retry_connect: true,
            transit_buffer: None,
            ws_used: 0,
            stale: None,
            t_start: now,
            hash: req.hash_key.clone(),
            connect_timeout: None,
            first_byte_timeout: None,
            between_bytes_timeout: None,
            body_unset: false,
            cached_body: req.cached_body.clone(),
            original: None,
            response_dropped: false,
            conn,
            client_identity: req.identity.clone(),
        }
    }

    /// Starts the fetch over after a `return (retry)`, from
    /// `vcl_backend_response` or `vcl_backend_error`, for a cache fetch or
    /// a pass alike. Not counted in `MAIN.backend_retry`: as in Varnish,
    /// that counts the one automatic retry of a request whose pooled
    /// connection turned out closed.
    ///
    /// As in varnishd, each attempt is a transaction of its own: this one
    /// ends with a `Retry` time and a link to the next (`bereq N retry`),
    /// which logs the request as it stands and gives it its new name
    /// (`X-Varnish`). Objects and their `X-Varnish` name the attempt
    /// that made them.
    pub fn retry(&mut self, sh: &Shared) {
        self.retries += 1;
        let now = lacquer_core::time::now();
        let xid = lacquer_core::ids::next_vxid();
        let mut log = sh.txn(xid, Side::Backend);
        if log.active() {
            log.begin(&txn::BEREQ, self.xid, &txn::RETRY, now);
            log.timestamp(&lacquer_shm::packed::stamp::START, now);
        }
        self.log.timestamp(&lacquer_shm::packed::stamp::RETRY, now);
        self.log.link(&txn::BEREQ, xid, &txn::RETRY);
        let mut done = std::mem::replace(&mut self.log, log);
        done.end();
        self.xid = xid;
        self.acct = Acct::default();
        self.log_as_built();
        let logging = self.log.active();
        let log = &mut self.log;
        let name = self
            .headers
            .set_named_noting("X-Varnish", xid.to_string().into(), |old| {
                if logging {
                    log.header(Tag::BereqUnset, &old.name, &old.value)
                }
            });
        if logging {
            log.header(Tag::BereqHeader, b"X-Varnish", name);
        }
    }

    /// The timeouts of this fetch: the backend's own, else the
    /// parameters, unless VCL set them on `bereq`.
    pub fn timeouts(&self, vcl: &Loaded, backend: usize, p: &Params) -> Timeouts {
        let def = vcl.program.backends.get(backend);
        let pick = |vcl_set: Option<f64>, declared: Option<std::time::Duration>, param: f64| {
            vcl_set
                .map(Params::duration)
                .or(declared)
                .unwrap_or_else(|| Params::duration(param))
        };
        Timeouts {
            connect: pick(
                self.connect_timeout,
                def.and_then(|d| d.connect_timeout),
                p.connect_timeout(),
            ),
            first_byte: pick(
                self.first_byte_timeout,
                def.and_then(|d| d.first_byte_timeout),
                p.first_byte_timeout(),
            ),
            between_bytes: pick(
                self.between_bytes_timeout,
                def.and_then(|d| d.between_bytes_timeout),
                p.between_bytes_timeout(),
            ),
            idle: Params::duration(p.backend_idle_timeout()),
            holddown_local: Params::duration(p.backend_local_error_holddown()),
            holddown_remote: Params::duration(p.backend_remote_error_holddown()),
            proxy_for: Some((self.conn.addrs.client, self.conn.addrs.server)),
            wait: lacquer_backend::WaitPolicy {
                timeout: Params::duration(p.backend_wait_timeout()),
                limit: p.backend_wait_limit(),
            },
        }
    }

    /// Serialises the request head for a backend, adding `Host` when it is
    /// missing and `X-Varnish`. The framing fields say how `body`, what
    /// really follows the head, is delimited: whatever the client sent or
    /// VCL left in `Content-Length` and `Transfer-Encoding` is replaced,
    /// so the backend can never read a body as a request of its own.
    pub fn head(&mut self, host_header: &str, body: BereqBody) -> Vec<u8> {
        match body {
            BereqBody::None => {
                self.headers.remove("transfer-encoding");
                // A bodyless POST keeps its `Content-Length: 0`.
                let zero = self
                    .headers
                    .get_all("content-length")
                    .all(|v| lacquer_http::headers::trim(v) == b"0");
                if !zero {
                    self.headers.remove("content-length");
                }
            }
            BereqBody::Length(n) => {
                self.headers.remove("transfer-encoding");
                self.headers.set("Content-Length", n.to_string());
            }
            BereqBody::Chunked => {
                self.headers.remove("content-length");
                self.headers.set("Transfer-Encoding", "chunked");
            }
        }
        if !self.headers.contains("host") {
            self.headers
                .set("Host", Bytes::copy_from_slice(host_header.as_bytes()));
            self.log.header(
                lacquer_shm::Tag::BereqHeader,
                b"Host",
                host_header.as_bytes(),
            );
        }
        self.headers.set("X-Varnish", self.xid.to_string());
        let mut head = Vec::with_capacity(256 + self.url.len());
        self.write_head(&mut head);
        head
    }

    /// Names itself to the backend (`X-Varnish`) and logs the request as
    /// it stands, as varnishd logs a backend request before
    /// `vcl_backend_fetch` runs: what VCL then changes is logged as it
    /// changes, so the request as sent is not logged again.
    pub fn before_fetch_vcl(&mut self) {
        self.headers.set("X-Varnish", self.xid.to_string());
        self.log_as_built();
    }

    /// Logs the request as it stands (`BereqMethod`, `BereqURL`,
    /// `BereqProtocol`, a `BereqHeader` each); the first time, for a
    /// cache fetch, as copied from the client's and then changed.
    pub fn log_as_built(&mut self) {
        if let Some(forced) = self.forced.take() {
            if self.log.active() {
                self.log_forced(forced);
            }
            return;
        }
        if self.log.active() {
            let mut head = Vec::with_capacity(256 + self.url.len());
            self.write_head(&mut head);
            self.log.head(lacquer_shm::packed::HeadKind::Bereq, &head);
        }
    }

    /// Logs the client's request as a cache fetch copied it, then what
    /// the fetch changed, in varnishd's order, then `X-Varnish`.
    fn log_forced(&mut self, forced: Forced) {
        let mut head = Vec::with_capacity(256 + self.url.len());
        head.extend_from_slice(&forced.method);
        head.push(b' ');
        head.extend_from_slice(&self.url);
        head.extend_from_slice(match forced.version {
            Version::Http10 => b" HTTP/1.0\r\n",
            Version::Http11 => b" HTTP/1.1\r\n",
            Version::Http2 => b" HTTP/2.0\r\n",
            Version::Http3 => b" HTTP/3.0\r\n",
        });
        let mut later = Vec::new();
        for h in self.headers.iter() {
            let added_ae =
                forced.added_accept_encoding && h.name.eq_ignore_ascii_case(b"accept-encoding");
            if added_ae || h.name.eq_ignore_ascii_case(b"x-varnish") {
                later.push((h.name.clone(), h.value.clone()));
                continue;
            }
            head.extend_from_slice(&h.name);
            head.extend_from_slice(b": ");
            head.extend_from_slice(&h.value);
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(b"\r\n");
        self.log.head(lacquer_shm::packed::HeadKind::Bereq, &head);
        if forced.method != self.method {
            self.log.bytes(Tag::BereqMethod, &self.method);
        }
        let (ae, xv): (Vec<_>, Vec<_>) = later
            .into_iter()
            .partition(|(n, _)| n.eq_ignore_ascii_case(b"accept-encoding"));
        for (name, value) in &ae {
            self.log.header(Tag::BereqHeader, name, value);
        }
        if forced.version != Version::Http11 && self.version == Version::Http11 {
            self.log.bytes(Tag::BereqProtocol, b"HTTP/1.1");
        }
        for (name, value) in &xv {
            self.log.header(Tag::BereqHeader, name, value);
        }
    }

    fn write_head(&self, head: &mut Vec<u8>) {
        head.extend_from_slice(&self.method);
        head.push(b' ');
        head.extend_from_slice(&self.url);
        head.extend_from_slice(match self.version {
            Version::Http10 => b" HTTP/1.0\r\n",
            // Backends are spoken to in HTTP/1.1 whatever the client spoke.
            Version::Http11 | Version::Http2 | Version::Http3 => b" HTTP/1.1\r\n",
        });
        self.headers.write_to(head);
        head.extend_from_slice(b"\r\n");
    }
}

/// `beresp.filters` as the `do_*` flags make it: the fetch filters in
/// order, with Varnish's names.
pub(crate) fn filter_list(r: &Beresp) -> String {
    use lacquer_filters::coding::Coding;
    let mut words = Vec::new();
    if r.do_gunzip {
        words.push("gunzip");
    }
    match r.decode {
        Some(Coding::Br) => words.push("unbr"),
        Some(Coding::Zstd) => words.push("unzstd"),
        _ => {}
    }
    if let Some(c) = r.encode {
        words.push(c.token());
    }
    match (r.do_esi, r.do_gzip) {
        (true, true) => words.push("esi_gzip"),
        (true, false) => words.push("esi"),
        (false, true) => words.push("gzip"),
        (false, false) => {}
    }
    words.join(" ")
}

/// The fetch filters as the `Filters` record names them, each after a
/// space as varnishd writes them: those VCL set, else the ones the
/// response and its flags call for, with `testgunzip` (a gzip'd body
/// stored as it came, checked as it passes) and the `gunzip` an ESI
/// parse of a gzip'd body needs first.
pub(crate) fn logged_filter_list(r: &Beresp, p: &lacquer_core::params::Params) -> String {
    if r.filters_set {
        return filter_list(r)
            .split(' ')
            .filter(|w| !w.is_empty())
            .map(|w| format!(" {w}"))
            .collect();
    }
    let encoding = r.headers.get("content-encoding");
    let is_gzip = encoding.is_some_and(|e| e.eq_ignore_ascii_case(b"gzip"));
    let plain = encoding.is_none();
    let support = p.http_gzip_support();
    let gzip = support && r.do_gzip && plain;
    let gunzip = support && r.do_gunzip && is_gzip;
    let mut list = String::new();
    if gunzip || (is_gzip && r.do_esi) {
        list.push_str(" gunzip");
    }
    if r.do_esi && (gzip || (is_gzip && !gunzip)) {
        list.push_str(" esi_gzip");
    } else if r.do_esi {
        list.push_str(" esi");
    } else if gzip {
        list.push_str(" gzip");
    }
    if is_gzip && !gunzip && !r.do_esi {
        list.push_str(" testgunzip");
    }
    let coded = encoding.and_then(|e| lacquer_filters::coding::Coding::from_token(e));
    let (decode, encode) =
        crate::host::coding::recoding(r.do_esi, r.encode, r.decode, coded, plain);
    if let Some(c) = decode {
        list.insert_str(
            0,
            if c.token() == "br" {
                " unbr"
            } else {
                " unzstd"
            },
        );
    }
    if let Some(c) = encode {
        list.push(' ');
        list.push_str(c.token());
    }
    list
}

/// Sets the fetch filters by name: the flags follow, and stay as set.
pub(crate) fn set_filter_list(r: &mut Beresp, list: &[u8]) -> Result<(), lacquer_vcl::VclFailure> {
    use lacquer_filters::coding::Coding;
    let (mut esi, mut gzip, mut gunzip) = (false, false, false);
    let (mut encode, mut decode) = (None, None);
    for word in list
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
    {
        match word {
            b"esi" => esi = true,
            b"esi_gzip" => (esi, gzip) = (true, true),
            b"gzip" => gzip = true,
            b"gunzip" => gunzip = true,
            b"testgunzip" => {}
            b"br" => encode = Some(Coding::Br),
            b"zstd" => encode = Some(Coding::Zstd),
            b"unbr" => decode = Some(Coding::Br),
            b"unzstd" => decode = Some(Coding::Zstd),
            other => {
                return Err(format!("Filter '{}' not found", String::from_utf8_lossy(other)).into())
            }
        }
    }
    (r.do_esi, r.do_gzip, r.do_gunzip, r.filters_set) = (esi, gzip, gunzip, true);
    (r.encode, r.decode) = (encode, decode);
    Ok(())
}

impl Beresp {
    /// The response `vcl_backend_error` starts from.
    pub fn error(status: Status, reason: Option<Bytes>, now: f64, backend: BackendRef) -> Beresp {
        let mut headers = Headers::new();
        lacquer_core::time::with_date(now, |d| {
            headers.append("Date", Bytes::copy_from_slice(d.as_bytes()))
        });
        headers.append("Server", "Lacquer");
        Beresp {
            status,
            reason: reason.unwrap_or_else(|| {
                Bytes::from_static(match status.vcl() {
                    503 => "Backend fetch failed".as_bytes(),
                    _ => status.reason().as_bytes(),
                })
            }),
            version: Version::Http11,
            headers,
            timers: Timers {
                t_origin: now,
                ttl: 0.0,
                grace: 0.0,
                keep: 0.0,
            },
            uncacheable: false,
            do_stream: true,
            do_esi: false,
            do_gzip: false,
            do_gunzip: false,
            encode: None,
            decode: None,
            filters_set: false,
            was_304: false,
            backend,
            storage: None,
            body: Vec::new(),
            t_resp: now,
            tls: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lacquer_core::params::Params;

    /// A backend response with the given `Content-Encoding` and flags.
    fn beresp(encoding: Option<&'static str>, esi: bool, gzip: bool, gunzip: bool) -> Beresp {
        let mut r = Beresp::error(Status::OK, None, 0.0, BackendRef::None);
        if let Some(e) = encoding {
            r.headers.append("Content-Encoding", e);
        }
        (r.do_esi, r.do_gzip, r.do_gunzip) = (esi, gzip, gunzip);
        r
    }

    /// The `Filters` record names what varnishd 7.1 names for each case
    /// (read off its log): a plain body none, `gzip` when compressed here,
    /// `testgunzip` for a gzip'd body stored as it came, `gunzip` before
    /// an ESI parse of a gzip'd body, which is then stored gzip'd again.
    #[test]
    fn the_filters_record_names_what_varnishd_names() {
        let p = Params::default();
        let list = |r: &Beresp| logged_filter_list(r, &p);
        assert_eq!(list(&beresp(None, false, false, false)), "");
        assert_eq!(list(&beresp(None, false, true, false)), " gzip");
        assert_eq!(list(&beresp(None, true, false, false)), " esi");
        assert_eq!(list(&beresp(None, true, true, false)), " esi_gzip");
        assert_eq!(
            list(&beresp(Some("gzip"), false, false, false)),
            " testgunzip"
        );
        assert_eq!(
            list(&beresp(Some("gzip"), true, false, false)),
            " gunzip esi_gzip"
        );
        assert_eq!(list(&beresp(Some("gzip"), false, false, true)), " gunzip");
        // Compressing what is compressed already, or inflating what is
        // not, does nothing.
        assert_eq!(
            list(&beresp(Some("gzip"), false, true, false)),
            " testgunzip"
        );
        assert_eq!(list(&beresp(None, false, false, true)), "");
        let mut set = beresp(Some("gzip"), false, false, false);
        set_filter_list(&mut set, b"gunzip").unwrap();
        assert_eq!(list(&set), " gunzip");
    }
}
