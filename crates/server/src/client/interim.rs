//! Interim responses (102 Processing, 103 Early Hints …) on their way to
//! the client: only to an HTTP/1.1 client's own request (never to an
//! HTTP/1.0 client, never into an ESI page), with hop-by-hop fields
//! removed, and never stored. A pass hands on what its connection read
//! before the final response; a cache miss hands them on as the fetch
//! reads them, while its client waits for the object.

use crate::host::req::Req;
use crate::transport::io::Client;
use crate::transport::wire::Transport;
use crate::Shared;
use lacquer_backend::{InterimSink, MAX_INTERIM};
use lacquer_core::params::Params;
use lacquer_http::{ResponseHead, Version};
use std::future::Future;
use std::io::Write;
use std::task::Poll;
use tokio::sync::mpsc;

/// Whether this request's client may be sent interim responses.
pub(crate) fn wanted(c: &Client, req: &Req) -> bool {
    matches!(
        req.head.version,
        Version::Http11 | Version::Http2 | Version::Http3
    ) && !c.wire.part_of_page()
}

/// The wire form of interim response heads.
fn wire(heads: &[ResponseHead]) -> Vec<u8> {
    let mut out = Vec::new();
    for head in heads {
        let mut fields = head.headers.clone();
        fields.remove_hop_by_hop();
        let _ = write!(out, "HTTP/1.1 {} ", head.status);
        out.extend_from_slice(&head.reason);
        out.extend_from_slice(b"\r\n");
        fields.write_to(&mut out);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Sends interim heads to the client; false when the client could not
/// take them.
pub(crate) async fn send(c: &mut Client, sh: &Shared, heads: &[ResponseHead]) -> bool {
    if heads.is_empty() {
        return true;
    }
    let idle = Params::duration(sh.params.idle_send_timeout());
    let texts: Vec<Vec<u8>> = heads
        .iter()
        .map(|h| wire(std::slice::from_ref(h)))
        .collect();
    c.wire.send_interim(&texts, idle).await.is_ok()
}

/// A way for a fetch's interim responses to reach the waiting client.
pub(crate) fn channel() -> (InterimSink, mpsc::Receiver<ResponseHead>) {
    mpsc::channel(MAX_INTERIM)
}

/// What ended a wait for a fetch's answer.
pub(crate) enum Waited<T> {
    /// The answer (interim responses before it were all sent).
    Answer(T),
    /// The client left, or could not take an interim response.
    Gone,
}

/// Waits for `answer` while watching the client (as
/// [`Client::watching`]), sending each interim response from `interim`
/// as it comes.
pub(crate) async fn wait<F: Future + Unpin>(
    c: &mut Client,
    sh: &Shared,
    mut answer: F,
    mut interim: Option<mpsc::Receiver<ResponseHead>>,
) -> Waited<F::Output> {
    let half_closed = sh.params.answer_half_closed();
    loop {
        let next = std::future::poll_fn(|cx| {
            if let Poll::Ready(out) = std::pin::Pin::new(&mut answer).poll(cx) {
                return Poll::Ready(Ok(out));
            }
            match interim.as_mut().map(|rx| rx.poll_recv(cx)) {
                Some(Poll::Ready(head)) => Poll::Ready(Err(head)),
                _ => Poll::Pending,
            }
        });
        match c.watching(next, half_closed).await {
            None => return Waited::Gone,
            Some(Ok(out)) => {
                // Whatever came before the final response goes first.
                let mut rest = Vec::new();
                while let Some(head) = interim.as_mut().and_then(|rx| rx.try_recv().ok()) {
                    rest.push(head);
                }
                if !send(c, sh, &rest).await {
                    return Waited::Gone;
                }
                return Waited::Answer(out);
            }
            Some(Err(Some(head))) => {
                if !send(c, sh, &[head]).await {
                    return Waited::Gone;
                }
            }
            // The fetch is done with interim responses.
            Some(Err(None)) => interim = None,
        }
    }
}
