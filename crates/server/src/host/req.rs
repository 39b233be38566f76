//! A client request's state as the steps hand it to each other: the
//! request and what VCL set on it, its byte counts, how it ended for its
//! connection, the connection's facts VCL can read, and what an ESI
//! include knows of its page. Data only: every step imports it, it
//! imports no step.

use crate::host::vcl::Loaded;
use crate::transport::deadline::SessTimeouts;
use crate::transport::io::{BodyError, Client, ReqBody, SendError};
use crate::transport::wire::Transport;
use crate::Shared;
use bytes::Bytes;
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::params::Params;
use lacquer_http::{Headers, RequestHead, Version};
use lacquer_shm::{Tag, Txn};
use lacquer_vcl::BackendRef;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// One client request in flight, with what VCL set on it.
pub(crate) struct Req {
    /// Counts it in `n_req` while it lives.
    _live: lacquer_core::counters::Held,
    /// The vmods' state for this request (cookie, var, …).
    pub privs: lacquer_vcl::vmod::TaskPrivs,
    /// The request body, read whole into memory (`std.cache_req_body`,
    /// or a lookup that may send it): it can then be sent more than
    /// once (retries, a fetch that outlives the request).
    pub cached_body: Option<Bytes>,
    /// What `vcl_hash` fed the lookup key, kept for a pass or a pipe:
    /// their backend request's `bereq.hash`, whose digest
    /// `directors.shard()` reads on the backend side, as for a miss.
    pub hash_key: Bytes,
    /// `cached_body` was read by Lacquer (ahead of `vcl_recv`, or for a
    /// lookup's fetch), not kept by `std.cache_req_body`: as in Varnish,
    /// a body a fetch has taken is gone after a restart.
    pub body_for_lookup: bool,
    /// The head as it came (before `vcl_recv`), kept when the program
    /// calls `std.rollback`.
    pub original: Option<Box<(Bytes, Bytes, Headers)>>,
    /// The request has switched program once already.
    pub switched: bool,
    pub xid: u64,
    pub head: RequestHead,
    pub body: ReqBody,
    pub t_req: f64,
    pub restarts: u32,
    pub backend_hint: BackendRef,
    pub ttl: Option<f64>,
    pub grace: Option<f64>,
    pub hash_always_miss: bool,
    pub hash_ignore_busy: bool,
    /// `req.hash_ignore_vary`: any variant will do.
    pub hash_ignore_vary: bool,
    pub is_hitmiss: bool,
    pub is_hitpass: bool,
    /// It came from a peer of the cluster, its mark verified (see
    /// `lacquer_cluster::peer`).
    pub from_peer: bool,
    /// How far the cluster purge it made went, for its answer.
    pub spread: Option<crate::host::spread::Reach>,
    pub identity: Option<Bytes>,
    pub storage: Option<Arc<str>>,
    /// The session's timeouts as VCL sees and sets them (`sess.*`),
    /// handed back to the connection when the request is done.
    pub sess: SessTimeouts,
    /// The request's log transaction.
    pub log: Txn,
    /// Bytes in and out, for `ReqAcct`.
    pub acct: Acct,
    /// `req.esi` and `resp.do_esi`: whether this delivery runs ESI.
    pub esi_enabled: bool,
    /// Bytes of header values VCL has set, charged to `workspace_client`
    /// with the request head.
    pub ws_used: u64,
    /// `resp.filters` as VCL set them (bits of [`crate::client::deliver::Filters`]).
    pub resp_filters: Option<u8>,
    /// The content coding this client is served in, of `http_encodings`,
    /// chosen from its `Accept-Encoding` as `vcl_recv` left it (identity
    /// until then, and for a pass or a pipe).
    pub coding: lacquer_filters::coding::Coding,
    /// The response was logged as built, before its VCL method (a
    /// synthetic one, as varnishd logs it): VCL's changes are logged as
    /// they are made, and delivery logs only what it adds.
    pub resp_logged: bool,
    /// The object head logged as built is still in the connection's write
    /// buffer: which object's, and its length there. Delivery writes the
    /// head after it rather than write it again, where nothing changed it.
    pub built_head: Option<(usize, usize)>,
    /// The codings its `Accept-Encoding` accepts (bits of
    /// [`crate::host::coding::accepted`]): a body stored br or zstd
    /// goes to it as stored when it takes that coding.
    pub accepted: u8,
    /// Set on an ESI include: its depth, the top request, its ancestors.
    pub include: Option<Arc<IncludeCtx>>,
    /// An include's headers as it began, before `vcl_recv` (what its own
    /// includes start from; the top request re-reads its wire head).
    pub initial: Option<Headers>,
    /// The values of the fields the client's `Connection` named (see
    /// `Headers::connection_named_values`), kept from the backend.
    pub hop_values: Vec<lacquer_http::headers::Header>,
    /// `vcl_hit` returned pass.
    pub passed_from_hit: bool,
}

/// A request's byte counts.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Acct {
    pub hdr_rx: u64,
    pub body_rx: u64,
    pub hdr_tx: u64,
    pub body_tx: u64,
}

impl Req {
    /// The request's headers as they go towards a backend (a fetch, a
    /// pass, a pipe): without the hop-by-hop fields, nor the values the
    /// client's `Connection` named for this hop.
    pub fn backend_headers(&self) -> Headers {
        let mut headers = self.head.headers.clone();
        headers.remove_fixed_hop_by_hop();
        headers.remove_values(&self.hop_values);
        headers
    }

    pub fn new(xid: u64, head: RequestHead, log: Txn, t_req: f64, vcl: &Loaded) -> Req {
        let body = ReqBody::new(head.framing);
        Req {
            _live: COUNTERS.hold(Counter::n_req),
            privs: Default::default(),
            cached_body: None,
            hash_key: Bytes::new(),
            body_for_lookup: false,
            original: None,
            switched: false,
            acct: Acct {
                hdr_rx: head.wire_len as u64,
                ..Acct::default()
            },
            log,
            xid,
            head,
            body,
            t_req,
            restarts: 0,
            backend_hint: vcl.program.default_backend,
            ttl: None,
            grace: None,
            hash_always_miss: false,
            hash_ignore_busy: false,
            hash_ignore_vary: false,
            is_hitmiss: false,
            is_hitpass: false,
            from_peer: false,
            spread: None,
            identity: None,
            storage: None,
            sess: Default::default(),
            esi_enabled: true,
            resp_filters: None,
            coding: lacquer_filters::coding::Coding::Identity,
            accepted: 0,
            resp_logged: false,
            built_head: None,
            ws_used: 0,
            include: None,
            initial: None,
            hop_values: Vec::new(),
            passed_from_hit: false,
        }
    }

    pub fn is_head(&self) -> bool {
        self.head.method_is("HEAD")
    }

    /// `req.esi_level`.
    pub fn esi_level(&self) -> u32 {
        self.include.as_ref().map_or(0, |i| i.level)
    }
}

/// How a request ended for its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    KeepAlive,
    Close(CloseReason),
}

/// Per-connection facts VCL can read.
#[derive(Clone)]
pub(crate) struct ConnInfo {
    /// Where the connection is from and to.
    pub addrs: Arc<crate::transport::io::SessAddrs>,
    /// The client socket's options (an ESI include has its page's
    /// duplicate, or none).
    pub fd: Option<crate::transport::sockopt::ClientFd>,
}

impl ConnInfo {
    /// A client connection's facts (made once a session, and borrowed by
    /// its requests: counting a reference to the addresses for each
    /// request was an atomic write and its undoing).
    pub fn of(c: &crate::transport::io::Client) -> ConnInfo {
        ConnInfo {
            addrs: c.addrs.clone(),
            fd: c.fd.map(crate::transport::sockopt::ClientFd),
        }
    }

    /// The connection's variables: `client.ip`, `server.ip`,
    /// `remote.ip`, `local.ip`, `local.endpoint`, `local.socket`.
    pub fn var(&self, var: lacquer_vcl::Var) -> lacquer_vcl::Value {
        use lacquer_vcl::{Value, Var};
        let a = &self.addrs;
        match var {
            Var::ClientIp => Value::Ip(Some(a.client)),
            Var::ServerIp => Value::Ip(Some(a.server)),
            Var::RemoteIp => Value::Ip(Some(a.remote)),
            Var::LocalIp => Value::Ip(Some(a.local)),
            Var::LocalEndpoint => Value::str(&a.endpoint),
            Var::LocalSocket => Value::str(&a.listener),
            _ => Value::Unset,
        }
    }

    /// A field of the connection's PROXY header (vmod proxy).
    pub fn proxy_field(&self, kind: u8, sub: Option<u8>) -> Option<Vec<u8>> {
        let header = self.addrs.proxy.as_ref()?;
        match sub {
            None => header.tlv(kind).map(<[u8]>::to_vec),
            Some(sub) => header.ssl()?.sub(sub).map(<[u8]>::to_vec),
        }
    }

    /// The PROXY header's SSL flags and verify result (vmod proxy).
    pub fn proxy_ssl(&self) -> Option<(u8, u32)> {
        let ssl = self.addrs.proxy.as_ref()?.ssl()?;
        Some((ssl.client, ssl.verify))
    }

    /// A Unix socket peer's credentials (vmod unix).
    pub fn peer_credentials(&self) -> Option<lacquer_vcl::PeerCredentials> {
        use crate::transport::sockopt;
        let (uid, gid) = self.addrs.peer_cred?;
        Some(lacquer_vcl::PeerCredentials {
            uid,
            gid,
            user: sockopt::user_name(uid),
            group: sockopt::group_name(gid),
        })
    }
}

/// The top request as `req_top.*` shows it to includes.
pub(crate) struct TopReq {
    pub method: Bytes,
    pub url: Bytes,
    pub version: Version,
    pub headers: Headers,
    pub t_req: f64,
    /// A duplicate of the client's socket descriptor for the includes'
    /// socket options (vmod tcp, `std.set_ip_tos`): theirs to use while
    /// any include runs, even after the connection itself has closed.
    /// Made only when the program imports such a vmod.
    pub socket: Option<OwnedFd>,
}

/// Runs an include as a request of its own, through the whole client
/// state machine, as a boxed future (the state machine runs includes
/// inside itself, so its future type must not contain itself).
pub(crate) type IncludeRunner =
    fn(
        crate::transport::io::Client,
        Arc<crate::Shared>,
        Arc<crate::host::vcl::Loaded>,
        lacquer_http::RequestHead,
        Arc<IncludeCtx>,
        u64,
        u64,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'static>>;

/// What an include knows of the page it belongs to.
pub(crate) struct IncludeCtx {
    /// `req.esi_level`.
    pub level: u32,
    pub top: Arc<TopReq>,
    /// The top page goes out gzip'd: hand it deflate data to splice
    /// where the body has it, plain bytes otherwise.
    pub gzip: bool,
    /// The page request's `Accept-Encoding`, which its includes' requests
    /// go without (logged as unset, as varnishd logs it).
    pub dropped_encoding: Option<bytes::Bytes>,
    /// Includes fetched ahead of delivery, for the whole tree of pages
    /// under one top request: `esi_parallel` of them.
    pub ahead: Arc<Semaphore>,
}

/// `X-Forwarded-For` with the client's address appended.
pub(crate) fn forwarded_for(prev: Option<&Bytes>, ip: &str) -> Vec<u8> {
    let ip = ip.as_bytes();
    match prev {
        Some(prev) => {
            let mut v = Vec::with_capacity(prev.len() + 2 + ip.len());
            v.extend_from_slice(prev);
            v.extend_from_slice(b", ");
            v.extend_from_slice(ip);
            v
        }
        None => ip.to_vec(),
    }
}

impl From<SendError> for Outcome {
    /// A write to the client that failed ends its connection.
    fn from(e: SendError) -> Outcome {
        Outcome::Close(match e {
            SendError::Io => CloseReason::TxError,
            SendError::Timeout => CloseReason::SendTimeout,
        })
    }
}

impl Acct {
    /// Counts body bytes that reached a client socket (an include's bytes
    /// are counted by the page that writes them).
    pub fn count_sent(&mut self, c: &Client, n: u64) {
        self.body_tx += n;
        if !c.wire.part_of_page() {
            COUNTERS.add(Counter::s_resp_bodybytes, n);
        }
    }
}

impl Req {
    /// Reads and drops a request body that will not be forwarded. Returns
    /// whether the connection can still be kept.
    /// Reads the body into memory if it is at most `max` bytes. A
    /// length over `max` is not read at all (`TooBig`: the body stays on
    /// the connection); a chunked body found over it on the way has been
    /// read in part and cannot be sent on (`Overflowed`).
    pub async fn cache_body(
        &mut self,
        c: &mut Client,
        sh: &Shared,
        max: u64,
    ) -> Result<BodyCache, CloseReason> {
        if self.cached_body.is_some() {
            return Ok(BodyCache::Cached);
        }
        if self.body.is_done() {
            self.cached_body = Some(Bytes::new());
            return Ok(BodyCache::Cached);
        }
        if let lacquer_http::Framing::Length(n) = self.head.framing {
            if n > max {
                return Ok(BodyCache::TooBig);
            }
        }
        if self.head.expect_continue {
            self.head.expect_continue = false;
            let idle = Params::duration(sh.params.idle_send_timeout());
            if c.write_small(b"HTTP/1.1 100 Continue\r\n\r\n", idle)
                .await
                .is_err()
            {
                return Err(CloseReason::TxError);
            }
        }
        let limit = Params::duration(sh.params.timeout_idle());
        let mut body = Vec::new();
        // Where varnishd keeps a body it reads.
        self.log.bytes(Tag::Storage, b"malloc Transient");
        loop {
            match self.body.next(c, limit).await {
                Ok(Some(piece)) => {
                    COUNTERS.add(Counter::s_req_bodybytes, piece.len() as u64);
                    self.acct.body_rx += piece.len() as u64;
                    if (body.len() + piece.len()) as u64 > max {
                        return Ok(BodyCache::Overflowed);
                    }
                    body.extend_from_slice(&piece);
                }
                Ok(None) => break,
                Err(BodyError::Malformed) => {
                    c.refuse_body(sh).await;
                    return Err(CloseReason::RxBad);
                }
                Err(BodyError::Gone) => return Err(CloseReason::RxBody),
            }
        }
        self.log.timestamp(
            &lacquer_shm::packed::stamp::REQ_BODY,
            lacquer_core::time::now(),
        );
        self.cached_body = Some(Bytes::from(body));
        Ok(BodyCache::Cached)
    }

    pub async fn consume_body(&mut self, c: &mut Client, sh: &Shared) -> Result<bool, CloseReason> {
        let req = self;
        if req.body.is_done() {
            return Ok(req.head.keep_alive());
        }
        if req.head.expect_continue {
            // The client waits for permission we will not give: answer and
            // close rather than read a body nobody wants.
            return Ok(false);
        }
        let limit = Params::duration(sh.params.timeout_idle());
        match req.body.discard(c, limit).await {
            Ok(n) => {
                COUNTERS.add(Counter::s_req_bodybytes, n);
                req.acct.body_rx += n;
                Ok(req.head.keep_alive())
            }
            Err(BodyError::Malformed) => {
                c.refuse_body(sh).await;
                Err(CloseReason::RxBad)
            }
            Err(BodyError::Gone) => Err(CloseReason::RxBody),
        }
    }
}

/// What became of reading a request body into memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyCache {
    Cached,
    /// Its length is over the bound: nothing was read.
    TooBig,
    /// A chunked body went over the bound part way: it is lost.
    Overflowed,
}

/// Whether the client takes gzip (`req.can_gzip`).
pub(crate) fn can_gzip(req: &Headers) -> bool {
    req.get("accept-encoding")
        .is_some_and(|v| lacquer_filters::gzip::accepts_gzip(v))
}
