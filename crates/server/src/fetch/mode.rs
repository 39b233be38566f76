//! What a backend fetch does where a cache fetch and a pass differ: the
//! trait the backend steps (`backend_steps`) drive each of them through.

use crate::fetch::step::Came;
use crate::host::backend_host::{Bereq, BereqBody, Beresp};
use crate::Shared;
use lacquer_backend::{Backend, Conn, FetchError, Timeouts};
use lacquer_http::{ResponseHead, ResponseLimits};
use lacquer_vcl::Action;
use std::ops::ControlFlow;

/// A body that had to be read whole could not be.
pub(crate) struct BodyFailed;

/// What a fetch does where a cache fetch and a pass differ. A method that
/// returns `ControlFlow::Break(done)` ends the fetch with `done`.
pub(crate) trait FetchMode {
    /// What the fetch ends with.
    type Done;

    /// VCL abandoned the fetch (`return (abandon)`).
    fn abandoned(&mut self, bereq: &mut Bereq) -> Self::Done;

    /// Whether `return (retry)` may start over (a request body already
    /// streamed to the backend cannot be sent again).
    fn may_retry(&self) -> bool;

    /// Whether a 304 may answer the request: it asked conditionally.
    fn asked_conditionally(&self) -> bool;

    /// A 304 was not merged: when what it revalidates was invalidated
    /// meanwhile (purged or banned), the fetch forgets it and takes its
    /// conditions off the request, so that a retry fetches whole.
    fn forget_invalidated(&mut self, bereq: &mut Bereq);

    /// Readies the request body once `vcl_backend_fetch` is done: what
    /// follows the head on the wire.
    async fn body(&mut self, bereq: &mut Bereq) -> ControlFlow<Self::Done, BereqBody>;

    /// Sends the request head and body, and reads the response head.
    async fn exchange<'b>(
        &mut self,
        bereq: &mut Bereq,
        backend: &'b Backend,
        head: &[u8],
        body: BereqBody,
        t: &Timeouts,
        limits: &ResponseLimits,
    ) -> ControlFlow<Self::Done, Result<(Conn<'b>, ResponseHead), FetchError>>;

    /// The response as `vcl_backend_response` sees it, made from the
    /// head the backend sent.
    fn response<'b>(
        &mut self,
        sh: &Shared,
        bereq: &mut Bereq,
        conn: Conn<'b>,
        resp: ResponseHead,
        came: Came,
    ) -> ControlFlow<Self::Done, (Conn<'b>, ResponseHead, Beresp)>;

    /// `vcl_backend_response` let the response through (`deliver`, or
    /// `pass` with its hit-for-pass lifetime in `action`). `Err` when a
    /// body read whole before anyone saw it (`beresp.do_stream = false`)
    /// failed: the fetch goes on to `vcl_backend_error`.
    async fn respond(
        &mut self,
        bereq: &mut Bereq,
        beresp: Beresp,
        resp: ResponseHead,
        conn: Conn<'_>,
        action: Action,
        t: &Timeouts,
    ) -> Result<Self::Done, BodyFailed>;

    /// What `vcl_backend_error` built, after any retries.
    fn failed(&mut self, bereq: &mut Bereq, beresp: Beresp) -> Self::Done;

    /// Whether the fetch may be answered by the node of the cluster that
    /// owns the object (a cache fetch; a pass goes to the origin).
    fn through_cluster(&self) -> bool {
        false
    }
}
