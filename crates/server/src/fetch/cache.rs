//! The backend side of a cache miss, as a [`FetchMode`] of the one
//! backend state machine (`backend_steps`): the fetch runs in its own task
//! (so it completes even if the client leaves, as every waiting client
//! depends on it), a 304 revalidates the stale object, `stale-if-error`
//! stands in for a failed fetch, `vcl_backend_response` decides what is
//! stored and for how long (or a hit-for-miss / hit-for-pass marker), and
//! `vcl_backend_error`'s answer goes to every waiter. The body streams
//! into storage while clients read it.

use crate::fetch::backend_steps;
use crate::fetch::fill;
use crate::fetch::mode::{BodyFailed, FetchMode};
use crate::fetch::revalidate;
use crate::host::backend_host::{self, Bereq, BereqBody, Beresp};
use crate::host::req::{ConnInfo, Req};
use crate::host::synth;
use crate::host::vcl::Loaded;
use crate::host::vsl;
use crate::Shared;
use bytes::Bytes;
use lacquer_backend::FetchError;
use lacquer_cache::object::{ObjKind, Object, ObjectInit, Timers};
use lacquer_cache::{Body, FetchSlot, VarySpec};
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_http::{Headers, ResponseHead, Version};
use lacquer_shm::{Tag, Txn};
use lacquer_vcl::Action;
use std::future::Future;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::task::Poll;
use tokio::sync::oneshot;

/// What a fetch hands the client that started it.
pub(crate) struct Fetched {
    pub obj: Arc<Object>,
    /// Fields kept out of the stored object (qualified `private` or
    /// `no-cache`): this client's alone.
    pub withheld: Option<Headers>,
}

impl From<Arc<Object>> for Fetched {
    fn from(obj: Arc<Object>) -> Fetched {
        Fetched {
            obj,
            withheld: None,
        }
    }
}

/// How the client side started this fetch.
pub(crate) struct FetchKind {
    pub bgfetch: bool,
    pub hitmiss: bool,
    /// The fetch is given up while it waits for the backend once the
    /// request that started it has gone and no other waits for the
    /// object: a hit-for-miss fetch (its own request's alone) and one an
    /// HTTP/2 stream started (a reset stream must not leave the backend
    /// working for nobody). Other fetches run on for the cache, as in
    /// Varnish.
    pub abandon_when_gone: bool,
    /// Where the backend's interim responses (103 Early Hints …) go as
    /// they arrive: the client that started the fetch, when it can take
    /// them. Nothing keeps them.
    pub interim: Option<lacquer_backend::InterimSink>,
}

/// Starts a fetch for a cache miss (or grace refresh). The receiver gets
/// the object as soon as its headers are in, or the error response.
pub(crate) fn spawn(
    sh: &Arc<Shared>,
    vcl: &Arc<Loaded>,
    req: &mut Req,
    conn: ConnInfo,
    key: &[u8],
    slot: FetchSlot,
    kind: FetchKind,
) -> oneshot::Receiver<Fetched> {
    let (tx, rx) = oneshot::channel();
    let mut headers = req.backend_headers();
    for name in backend_host::NOT_FOR_CACHE_FETCH {
        headers.remove(name);
    }
    let mut added_accept_encoding = false;
    if sh.params.http_gzip_support() {
        // Stored gzip'd whatever this client takes; delivery inflates
        // for the clients that do not.
        added_accept_encoding = headers.get("accept-encoding").is_none();
        headers.set("Accept-Encoding", Bytes::from_static(b"gzip"));
    }
    if let Some(stale) = slot.stale().filter(|s| s.can_revalidate()) {
        // Revalidate what is stored rather than fetch it whole (VCL may
        // still take these away in vcl_backend_fetch).
        if let Some(etag) = stale.header("etag") {
            headers.set("If-None-Match", etag);
        }
        if let Some(lm) = stale.strong_last_modified() {
            headers.set("If-Modified-Since", lm);
        }
    }
    let reason = match kind.bgfetch {
        true => &lacquer_shm::record::txn::BGFETCH,
        false => &lacquer_shm::record::txn::FETCH,
    };
    let mut bereq = Bereq::from_req(sh, vcl, req, headers, conn, reason);
    bereq.forced = Some(crate::host::bereq::Forced {
        method: req.head.method.clone(),
        version: req.head.version,
        added_accept_encoding,
    });
    bereq.method = Bytes::from_static(b"GET");
    bereq.version = Version::Http11;
    bereq.is_bgfetch = kind.bgfetch;
    bereq.is_hitmiss = kind.hitmiss;
    bereq.hash = Bytes::copy_from_slice(key);
    bereq.stale = slot.stale().filter(|s| s.can_revalidate()).cloned();
    // A body read into memory goes with the fetch (unless VCL unsets it,
    // as the built-in VCL does for a GET); any other was left behind. An
    // explicit `Content-Length: 0` stays, as it came.
    let explicit_empty = req.head.framing == lacquer_http::Framing::None
        && req
            .head
            .headers
            .get("content-length")
            .is_some_and(|v| lacquer_http::headers::trim(v) == b"0");
    bereq.body_unset = bereq.cached_body.as_ref().is_none_or(Bytes::is_empty) && !explicit_empty;
    if explicit_empty {
        bereq
            .headers
            .set("Content-Length", Bytes::from_static(b"0"));
    }
    let sh = sh.clone();
    let vcl = vcl.clone();
    let interim = kind.interim;
    let abandon_when_gone = kind.abandon_when_gone && !kind.bgfetch;
    tokio::spawn(async move {
        COUNTERS.inc(Counter::s_fetch);
        fetch_for_cache(sh, vcl, bereq, slot, tx, interim, abandon_when_gone).await;
    });
    rx
}

async fn fetch_for_cache(
    sh: Arc<Shared>,
    vcl: Arc<Loaded>,
    mut bereq: Bereq,
    slot: FetchSlot,
    tx: oneshot::Sender<Fetched>,
    interim: Option<lacquer_backend::InterimSink>,
    abandon_when_gone: bool,
) {
    let mut mode = CacheFetch {
        abandon_when_gone,
        sh: &sh,
        stale: slot.stale().cloned(),
        slot: Some(slot),
        tx: Some(tx),
        interim,
        revalidated: None,
        rfc_timers: Timers {
            t_origin: 0.0,
            ttl: 0.0,
            grace: 0.0,
            keep: 0.0,
        },
    };
    backend_steps::run_fetch(&sh, &vcl, &mut bereq, &mut mode).await;
}

/// A fetch for the cache: its answer fills a cache slot that other
/// requests may be waiting on, and goes to the request that started it.
struct CacheFetch<'s> {
    sh: &'s Shared,
    /// The stored object this fetch refreshes, if any (grace, keep).
    stale: Option<Arc<Object>>,
    slot: Option<FetchSlot>,
    tx: Option<oneshot::Sender<Fetched>>,
    /// The starting client's way for interim responses.
    interim: Option<lacquer_backend::InterimSink>,
    /// The stale object a 304 revalidated: its body is reused.
    revalidated: Option<Arc<Object>>,
    /// See [`FetchKind::abandon_when_gone`].
    abandon_when_gone: bool,
    /// The lifetimes the response itself gave, before VCL.
    rfc_timers: Timers,
}

impl CacheFetch<'_> {
    /// Hands the slot's waiters and the starting request `obj`.
    fn answer(&mut self, obj: Arc<Object>) {
        if let Some(slot) = self.slot.take() {
            slot.abandon(Some(obj.clone()));
        }
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(obj.into());
        }
    }
}

impl FetchMode for CacheFetch<'_> {
    type Done = ();

    fn through_cluster(&self) -> bool {
        true
    }

    /// Waiters look up again; the starting request gets a 503.
    fn abandoned(&mut self, _bereq: &mut Bereq) {}

    fn may_retry(&self) -> bool {
        true
    }

    fn asked_conditionally(&self) -> bool {
        self.stale.as_ref().is_some_and(|s| s.can_revalidate())
    }

    fn forget_invalidated(&mut self, bereq: &mut Bereq) {
        if self.stale.as_ref().is_some_and(|s| s.is_removed()) {
            self.stale = None;
            bereq.stale = None;
            bereq.headers.remove("if-none-match");
            bereq.headers.remove("if-modified-since");
        }
    }

    async fn body(&mut self, bereq: &mut Bereq) -> ControlFlow<(), BereqBody> {
        ControlFlow::Continue(match (&bereq.cached_body, bereq.body_unset) {
            (Some(body), false) if !body.is_empty() => BereqBody::Length(body.len() as u64),
            _ => BereqBody::None,
        })
    }

    async fn exchange<'b>(
        &mut self,
        bereq: &mut Bereq,
        backend: &'b lacquer_backend::Backend,
        head: &[u8],
        body: BereqBody,
        t: &lacquer_backend::Timeouts,
        limits: &lacquer_http::ResponseLimits,
    ) -> ControlFlow<(), Result<(lacquer_backend::Conn<'b>, ResponseHead), FetchError>> {
        let bytes = match (body, &bereq.cached_body) {
            (BereqBody::Length(_), Some(b)) => b.clone(),
            _ => Bytes::new(),
        };
        let ask = lacquer_backend::Ask {
            is_head: bereq.method.eq_ignore_ascii_case(b"HEAD"),
            extra_chance: bereq.retry_connect,
            interim: self.interim.as_ref(),
        };
        let exchange = backend.exchange(head, &bytes, t, limits, ask);
        let Some(tx) = self.tx.as_mut().filter(|_| self.abandon_when_gone) else {
            return ControlFlow::Continue(exchange.await);
        };
        // Once the request that started the fetch has gone (an HTTP/2
        // stream reset, a client that gave up on its hit-for-miss fetch)
        // and no other request waits for the object, the wait for the
        // backend's answer, or for a connection at max_connections, is
        // given up.
        let slot = self.slot.as_ref();
        let nobody = async move {
            tx.closed().await;
            if let Some(slot) = slot {
                slot.unwaited().await;
            }
        };
        let mut exchange = std::pin::pin!(exchange);
        let mut nobody = std::pin::pin!(nobody);
        let answered = std::future::poll_fn(|cx| {
            if let Poll::Ready(r) = exchange.as_mut().poll(cx) {
                return Poll::Ready(Some(r));
            }
            nobody.as_mut().poll(cx).map(|()| None)
        })
        .await;
        match answered {
            Some(answered) => ControlFlow::Continue(answered),
            None => {
                COUNTERS.inc(Counter::fetch_failed);
                bereq.log.fmt(
                    Tag::FetchError,
                    format_args!("abandoned: no request waits for this fetch"),
                );
                ControlFlow::Break(())
            }
        }
    }

    fn response<'b>(
        &mut self,
        sh: &Shared,
        bereq: &mut Bereq,
        conn: lacquer_backend::Conn<'b>,
        resp: ResponseHead,
        came: backend_steps::Came,
    ) -> ControlFlow<(), (lacquer_backend::Conn<'b>, ResponseHead, Beresp)> {
        // A 304 to a conditional fetch stands for the stale object, its
        // headers updated.
        self.revalidated = self
            .stale
            .clone()
            .filter(|s| resp.status == 304 && s.can_revalidate());
        let resp = match &self.revalidated {
            Some(stale) => {
                let merged = revalidate::merged(stale, &resp);
                vsl::numbers(
                    &mut bereq.log,
                    Tag::BerespStatus,
                    &[u64::from(merged.status)],
                );
                merged
            }
            None => resp,
        };
        let mut beresp = backend_steps::beresp_from(sh, &resp, &conn, came.backend, came.at, false);
        beresp.was_304 = self.revalidated.is_some();
        vsl::ttl(
            &mut bereq.log,
            &vsl::TtlRecord {
                source: vsl::TtlSource::Rfc(&resp.headers, sh.params.varnish_compat_ttl()),
                timers: beresp.timers,
                cacheable: true,
            },
        );
        self.rfc_timers = beresp.timers;
        ControlFlow::Continue((conn, resp, beresp))
    }

    async fn respond(
        &mut self,
        bereq: &mut Bereq,
        beresp: Beresp,
        resp: ResponseHead,
        conn: lacquer_backend::Conn<'_>,
        action: Action,
        t: &lacquer_backend::Timeouts,
    ) -> Result<(), BodyFailed> {
        // A 500 to 504 that VCL delivered as it came (after its retries,
        // if it asked for them) is a failed refresh: a stale object that
        // allows it stands in, and the error's body is not read (its
        // connection goes with it).
        if matches!(action, Action::Deliver)
            && (500..=504).contains(&beresp.status.vcl())
            && self.serve_stale_for(bereq, beresp.status.vcl())
        {
            drop(conn);
            return Ok(());
        }
        let hit_for_pass = match action {
            // `pass` without a duration: for beresp.ttl, as VCL left it.
            Action::Pass(ttl) => Some(ttl.unwrap_or(beresp.timers.ttl)),
            _ => None,
        };
        let (Some(slot), Some(tx)) = (self.slot.take(), self.tx.take()) else {
            return Ok(());
        };
        let source = Source {
            conn,
            revalidated: self.revalidated.take(),
            timeouts: t,
        };
        let unfinished = store(
            self.sh,
            bereq,
            beresp,
            resp,
            hit_for_pass,
            (slot, tx),
            source,
        )
        .await;
        match unfinished {
            // The slot and the waiting client go to vcl_backend_error.
            Some((slot, tx)) => {
                self.slot = Some(slot);
                self.tx = Some(tx);
                Err(BodyFailed)
            }
            None => Ok(()),
        }
    }

    fn failed(&mut self, bereq: &mut Bereq, beresp: Beresp) {
        if beresp.status.vcl() >= 500 && self.serve_stale_for(bereq, beresp.status.vcl()) {
            return;
        }
        let sh = self.sh;
        let cached = beresp.timers.ttl > 0.0 && !beresp.uncacheable;
        let store = cached.then(|| sh.cache.transient().clone());
        let obj = backend_steps::error_object(&beresp, bereq.xid, store);
        if cached {
            sh.cache.attach(&obj, obj.head_charge() as u64, 0);
            if let Some(slot) = self.slot.take() {
                slot.insert(&obj, &bereq.headers);
            }
            if let Some(tx) = self.tx.take() {
                let _ = tx.send(obj.into());
            }
        } else {
            self.answer(obj);
        }
    }
}

impl CacheFetch<'_> {
    /// Hands the waiters the stale object in place of a failure with
    /// `status`, where one may stand in now; whether it did.
    fn serve_stale_for(&mut self, bereq: &mut Bereq, status: u16) -> bool {
        let Some(stale) = self.stale_for_error() else {
            return false;
        };
        serve_stale(bereq, &stale, status, self.slot.take(), self.tx.take());
        true
    }

    /// The stale object that may stand in for a failed refresh now
    /// (`stale-if-error`, RFC 5861), where the parameters allow it.
    fn stale_for_error(&self) -> Option<Arc<Object>> {
        let p = &self.sh.params;
        if !p.stale_if_error() || p.varnish_compat_ttl() {
            return None;
        }
        let now = lacquer_core::time::now();
        self.stale
            .clone()
            .filter(|s| lacquer_cache::ttl::stale_if_error(&s.headers(), &s.timers(), now))
    }
}

/// Hands the stale object to the requests waiting on a failed fetch, and
/// leaves it in the cache.
fn serve_stale(
    bereq: &mut Bereq,
    stale: &Arc<Object>,
    status: u16,
    slot: Option<FetchSlot>,
    tx: Option<oneshot::Sender<Fetched>>,
) {
    bereq.log.fmt(
        Tag::Notice,
        format_args!(
            "stale-if-error: {status} not delivered, stale object {} instead",
            stale.xid()
        ),
    );
    if let Some(slot) = slot {
        slot.abandon(Some(stale.clone()));
    }
    if let Some(tx) = tx {
        let _ = tx.send(stale.clone().into());
    }
}

/// Where a stored object's body comes from.
struct Source<'a> {
    conn: lacquer_backend::Conn<'a>,
    /// The stale object a 304 revalidated: its body is reused.
    revalidated: Option<Arc<Object>>,
    timeouts: &'a lacquer_backend::Timeouts,
}

/// Stores what `vcl_backend_response` let through, then streams the body.
async fn store(
    sh: &Shared,
    bereq: &mut Bereq,
    beresp: Beresp,
    resp: ResponseHead,
    hit_for_pass: Option<f64>,
    (slot, tx): (FetchSlot, oneshot::Sender<Fetched>),
    source: Source<'_>,
) -> Option<(FetchSlot, oneshot::Sender<Fetched>)> {
    let now = beresp.t_resp;
    let p = &sh.params;
    let xid = bereq.xid;
    let skip_ae = p.http_gzip_support();
    let vary = VarySpec::build_skipping(beresp.headers.get_all("vary"), &bereq.headers, skip_ae);
    let (vary, vary_star) = match vary {
        Ok(v) => (v, false),
        Err(_) => (None, true),
    };
    let status = beresp.status.wire();
    let mut cacheable = !beresp.uncacheable && hit_for_pass.is_none() && !vary_star;
    if cacheable && status == 206 {
        // Part of a body is never stored as if it were the whole; the
        // client gets it, later requests fetch again.
        bereq
            .log
            .bytes(Tag::Debug, b"Partial content (206) is not stored");
        cacheable = false;
    }
    let mut beresp = beresp;
    // An ESI page is parsed whole before it goes out anyway: read whole
    // first, a broken one is an error page rather than a cut one. A
    // response without a body is "read" at once too, as varnishd stops
    // streaming for it: its connection is back in the pool before the
    // requests waiting on this fetch wake, so that theirs can reuse it.
    let bodyless = matches!(
        resp.framing,
        lacquer_http::Framing::None | lacquer_http::Framing::Length(0)
    );
    let stream = beresp.do_stream && !beresp.do_esi && !bodyless;
    let withheld = if cacheable {
        withhold(&mut bereq.log, &mut beresp.headers, p.varnish_compat_ttl())
    } else {
        None
    };
    let timers = beresp.timers;
    let remaining_life = timers.t_origin + timers.lifetime() - now;
    let shortlived = remaining_life < p.shortlived();
    if !cacheable {
        COUNTERS.inc(Counter::beresp_uncacheable);
    } else if shortlived {
        COUNTERS.inc(Counter::beresp_shortlived);
    }
    let store = sh.cache.store_for(
        !cacheable || shortlived,
        beresp
            .storage
            .as_deref()
            .map(|s| s.strip_prefix("storage.").unwrap_or(s)),
    );
    let Source {
        conn,
        revalidated,
        timeouts: t,
    } = source;
    let (obj, filling) = match &revalidated {
        Some(stale) => {
            let obj = fill::from_stale(sh, bereq, beresp, &resp, vary.clone(), store, stale);
            (obj, None)
        }
        None => match fill::begin(sh, bereq, beresp, &resp, vary.clone(), store) {
            Some(f) => (Some(f.obj().clone()), Some(f)),
            None => (None, None),
        },
    };
    let Some(obj) = obj else {
        let err = synth::fetch_failed(xid);
        slot.abandon(Some(err.clone()));
        let _ = tx.send(err.into());
        return None;
    };
    let mut body = Some((filling, conn));
    if !stream {
        // beresp.do_stream = false: the body is read whole before anyone
        // sees the object; a body that fails hands the slot and the
        // waiting client back, for vcl_backend_error, as in Varnish.
        if let Some((filling, conn)) = body.take() {
            read_body(sh, bereq, filling, conn, t, false).await;
        }
        if !obj.body().is_complete() {
            return Some((slot, tx));
        }
        if !cacheable {
            // An uncacheable body kept whole before it goes out.
            COUNTERS.add(Counter::transit_stored, obj.body().known_len().unwrap_or(0));
        }
    }
    if cacheable {
        slot.insert(&obj, &bereq.headers);
    } else {
        let (kind, ttl) = match hit_for_pass {
            Some(ttl) => (ObjKind::HitPass, ttl),
            None => (ObjKind::HitMiss, timers.t_origin + timers.ttl - now),
        };
        if ttl > 0.0 {
            let marker = Arc::new(Object::new(ObjectInit {
                store: Some(sh.cache.transient().clone()),
                xid,
                kind,
                status,
                head: Bytes::new().into(),
                headers: Headers::new(),
                body: Body::complete(Vec::new()),
                vary,
                timers: Timers {
                    t_origin: now,
                    ttl,
                    grace: 0.0,
                    keep: 0.0,
                },
            }));
            sh.cache.attach(&marker, 0, 0);
            slot.insert(&marker, &bereq.headers);
        } else {
            slot.abandon(None);
        }
    }
    let _ = tx.send(Fetched { obj, withheld });
    if let Some((filling, conn)) = body {
        read_body(sh, bereq, filling, conn, t, !cacheable).await;
    }
    None
}

/// Reads the body into the object being filled (none for a 304, whose
/// body is the stale object's).
async fn read_body(
    sh: &Shared,
    bereq: &mut Bereq,
    filling: Option<fill::Filling<'_>>,
    conn: lacquer_backend::Conn<'_>,
    t: &lacquer_backend::Timeouts,
    private: bool,
) {
    match filling {
        Some(filling) => fill::fill(sh, bereq, filling, conn, t, private).await,
        None => {
            COUNTERS.inc(Counter::fetch_304);
            backend_steps::log_body_end(bereq, &conn, 0, 0, lacquer_core::time::now());
            conn.finish(true);
        }
    }
}

/// Takes out of a response about to be stored the fields it must not be
/// stored with (qualified `private` / `no-cache`, RFC 9111 §5.2.2.4 and
/// §5.2.2.7), for the fetching client alone; logged.
fn withhold(log: &mut Txn, headers: &mut Headers, varnish_compat: bool) -> Option<Headers> {
    let names = lacquer_cache::ttl::withheld_fields(headers, varnish_compat);
    if names.is_empty() {
        return None;
    }
    let mut taken = Headers::new();
    for h in headers.iter() {
        if names
            .iter()
            .any(|n| n.as_bytes().eq_ignore_ascii_case(&h.name))
        {
            taken.append(h.name.clone(), h.value.clone());
        }
    }
    for name in &names {
        headers.remove(name);
    }
    log.fmt(
        Tag::Debug,
        format_args!(
            "Not stored (RFC 9111 private/no-cache): {}",
            names.join(", ")
        ),
    );
    (!taken.is_empty()).then_some(taken)
}
