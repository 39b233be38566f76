//! The one backend state machine of vcl-step(7), for cache fetches and
//! passes alike: `vcl_backend_fetch`, a backend picked (through
//! directors), the request sent with its body framed by construction, the
//! response head read, `vcl_backend_response` — or `vcl_backend_error`
//! when anything fails — and `return (retry)` starting over. Counters, log
//! records, retries and timeouts are the same on both paths because they
//! are this one path. What differs is the [`FetchMode`]'s: where the body
//! comes from and who waits for the response (a cache slot and its
//! waiters, or one client streaming its request body), and what becomes of
//! the response (an object in the cache, or a stream to that client).

use crate::backend_host::{self, Bereq, BereqBody, Beresp};
use crate::fetch::{log_exchange, log_fetch_error, pick_backend};
use crate::vcl::Loaded;
use crate::{synth, Shared};
use bytes::Bytes;
use lacquer_backend::{Backend, Conn, FetchError, Timeouts};
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_http::{Framing, ResponseHead, ResponseLimits};
use lacquer_vcl::{Action, Method};

/// What a fetch does where a cache fetch and a pass differ. A method that
/// returns `Err(done)` ends the fetch with `done`.
pub(crate) trait FetchMode {
    /// What the fetch ends with.
    type Done;

    /// VCL abandoned the fetch (`return (abandon)`).
    fn abandoned(&mut self, bereq: &mut Bereq) -> Self::Done;

    /// Whether `return (retry)` may start over (a request body already
    /// streamed to the backend cannot be sent again).
    fn may_retry(&self) -> bool;

    /// Readies the request body once `vcl_backend_fetch` is done: what
    /// follows the head on the wire.
    async fn body(&mut self, bereq: &mut Bereq) -> Result<BereqBody, Self::Done>;

    /// Sends the request head and body, and reads the response head.
    async fn exchange<'b>(
        &mut self,
        bereq: &mut Bereq,
        backend: &'b Backend,
        head: &[u8],
        body: BereqBody,
        t: &Timeouts,
        limits: &ResponseLimits,
    ) -> Result<Result<(Conn<'b>, ResponseHead), FetchError>, Self::Done>;

    /// The response as `vcl_backend_response` sees it, made from the
    /// head the backend sent.
    #[allow(clippy::too_many_arguments)]
    fn response<'b>(
        &mut self,
        sh: &Shared,
        bereq: &mut Bereq,
        conn: Conn<'b>,
        resp: ResponseHead,
        index: usize,
        now: f64,
    ) -> Result<(Conn<'b>, ResponseHead, Beresp), Self::Done>;

    /// `vcl_backend_response` let the response through (`deliver`, or
    /// `pass` with its hit-for-pass lifetime in `action`).
    async fn respond(
        &mut self,
        bereq: &mut Bereq,
        beresp: Beresp,
        resp: ResponseHead,
        conn: Conn<'_>,
        action: Action,
        t: &Timeouts,
    ) -> Self::Done;

    /// What `vcl_backend_error` built, after any retries.
    fn failed(&mut self, bereq: &mut Bereq, beresp: Beresp) -> Self::Done;
}

/// Runs the backend side of one request to its end.
pub(crate) async fn run_fetch<M: FetchMode>(
    sh: &Shared,
    vcl: &Loaded,
    bereq: &mut Bereq,
    mode: &mut M,
) -> M::Done {
    let max_retries = u32::try_from(sh.params.max_retries()).unwrap_or(u32::MAX);
    'fetch: loop {
        let failure: (u16, Option<Bytes>) = 'attempt: {
            match backend_host::call_method(Method::BackendFetch, sh, vcl, bereq, None) {
                Action::Fetch => {}
                Action::Abandon => return mode.abandoned(bereq),
                Action::Error { status, reason } => break 'attempt (status, reason),
                _ => break 'attempt (503, None),
            }
            bereq.log.timestamp("Fetch", lacquer_core::time::now());
            let Some((index, backend)) = pick_backend(sh, vcl, bereq) else {
                COUNTERS.inc(Counter::fetch_failed);
                let e = FetchError::ConnectFailed("no backend".into());
                log_fetch_error(&mut bereq.log, &e);
                break 'attempt (503, None);
            };
            let body = match mode.body(bereq).await {
                Ok(body) => body,
                Err(done) => return done,
            };
            let t = bereq.timeouts(vcl, index, &sh.params);
            let limits = sh.response_limits();
            let head = bereq.head(&backend.host_header, body);
            let answered = match mode
                .exchange(bereq, &backend, &head, body, &t, &limits)
                .await
            {
                Ok(answered) => answered,
                Err(done) => return done,
            };
            let (conn, resp) = match answered {
                Ok(x) => x,
                Err(e) => {
                    COUNTERS.inc(Counter::fetch_failed);
                    log_fetch_error(&mut bereq.log, &e);
                    break 'attempt (503, None);
                }
            };
            let now = lacquer_core::time::now();
            log_exchange(bereq, &backend, &conn, &head, &resp, now);
            let (conn, resp, mut beresp) = match mode.response(sh, bereq, conn, resp, index, now) {
                Ok(x) => x,
                Err(done) => return done,
            };
            let action = backend_host::call_method(
                Method::BackendResponse,
                sh,
                vcl,
                bereq,
                Some(&mut beresp),
            );
            if let Action::Deliver | Action::Pass(_) = action {
                return mode.respond(bereq, beresp, resp, conn, action, &t).await;
            }
            // The response is not used: its connection can carry the next
            // request only if it had no body to read.
            conn.finish(resp.framing == Framing::None);
            match action {
                Action::Retry if bereq.retries < max_retries && mode.may_retry() => {
                    bereq.retry();
                    continue 'fetch;
                }
                Action::Abandon => return mode.abandoned(bereq),
                Action::Error { status, reason } => break 'attempt (status, reason),
                _ => break 'attempt (503, None),
            }
        };
        let now = lacquer_core::time::now();
        let mut beresp = Beresp::error(failure.0, failure.1, now, bereq.backend);
        let action =
            backend_host::call_method(Method::BackendError, sh, vcl, bereq, Some(&mut beresp));
        match action {
            Action::Retry if bereq.retries < max_retries && mode.may_retry() => {
                bereq.retry();
                continue;
            }
            Action::Deliver | Action::Retry => {}
            _ => {
                beresp = Beresp::error(503, None, now, bereq.backend);
                beresp.body = synth::page(503, "Backend fetch failed", bereq.xid).into_bytes();
            }
        }
        return mode.failed(bereq, beresp);
    }
}
