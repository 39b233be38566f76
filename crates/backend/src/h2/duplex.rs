//! A request body sent on its own while the response is read: the rest
//! of a client's HTTP/2 or HTTP/3 request body ([`StreamedBody`]) goes
//! from its stream to the backend's, DATA frame by DATA frame under both
//! windows, with its trailers, on a task of its own that ends with the
//! exchange. This is
//! what gRPC's client and bidirectional streaming need (a response that
//! starts before its request has ended); the exchange itself still
//! reads the response as it always does.

use bytes::Bytes;
use h2::{RecvStream, SendStream};
use std::future::poll_fn;
use std::task::{Context, Poll};
use std::time::Duration;

/// A client's request body as its stream brings it, piece by piece,
/// for a backend stream to send as it comes.
pub trait StreamedBody: Send + 'static {
    /// The next piece; `None` at the body's end, an error when the
    /// client's stream failed.
    fn poll_piece(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, ()>>>;
    /// Whether the piece just read was the body's last.
    fn ended(&self) -> bool;
    /// Lets the client send `n` more bytes, once the backend took them.
    fn release(&mut self, n: usize);
    /// The trailer section, once the body has ended.
    fn poll_trailers(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<http::HeaderMap>, ()>>;
    /// The body as what it is, for its transport to take back.
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send>;
}

impl StreamedBody for RecvStream {
    fn poll_piece(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, ()>>> {
        self.poll_data(cx).map(|next| next.map(|r| r.map_err(drop)))
    }

    fn ended(&self) -> bool {
        self.is_end_stream()
    }

    fn release(&mut self, n: usize) {
        let _ = self.flow_control().release_capacity(n);
    }

    fn poll_trailers(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<http::HeaderMap>, ()>> {
        RecvStream::poll_trailers(self, cx).map(|r| r.map_err(drop))
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

/// The task forwarding the body; aborted when dropped.
pub(super) struct Pump(tokio::task::JoinHandle<()>);

impl Pump {
    /// Starts forwarding `from` to `to`; each piece (and the window to
    /// send it) is awaited at most `idle`, past which both streams are
    /// reset.
    pub(super) fn start(
        from: Box<dyn StreamedBody>,
        to: SendStream<Bytes>,
        idle: Duration,
    ) -> Pump {
        Pump(tokio::spawn(forward(from, to, idle)))
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn forward(mut from: Box<dyn StreamedBody>, mut to: SendStream<Bytes>, idle: Duration) {
    loop {
        let piece = poll_fn(|cx| from.poll_piece(cx));
        let next = match tokio::time::timeout(idle, piece).await {
            Ok(next) => next,
            Err(_) => return to.send_reset(h2::Reason::CANCEL),
        };
        let mut data = match next {
            Some(Ok(data)) => data,
            Some(Err(_)) => return to.send_reset(h2::Reason::CANCEL),
            None => break,
        };
        let taken = data.len();
        // The client's END_STREAM goes with its last piece.
        let last = from.ended();
        if last && data.is_empty() {
            let _ = to.send_data(Bytes::new(), true);
            return;
        }
        while !data.is_empty() {
            to.reserve_capacity(data.len());
            let room = std::future::poll_fn(|cx| to.poll_capacity(cx));
            let window = match tokio::time::timeout(idle, room).await {
                Ok(Some(Ok(0))) => continue,
                Ok(Some(Ok(n))) => n,
                Ok(Some(Err(_)) | None) => return,
                Err(_) => return to.send_reset(h2::Reason::CANCEL),
            };
            let part = data.split_to(window.min(data.len()));
            if to.send_data(part, last && data.is_empty()).is_err() {
                return;
            }
        }
        if last {
            return;
        }
        // The client may send more once the backend has taken this.
        from.release(taken);
    }
    let trailers = poll_fn(|cx| from.poll_trailers(cx));
    let trailers = match tokio::time::timeout(idle, trailers).await {
        Ok(Ok(trailers)) => trailers,
        _ => return to.send_reset(h2::Reason::CANCEL),
    };
    let mut fields = http::HeaderMap::new();
    for (name, value) in trailers.iter().flatten() {
        if lacquer_http::chunked::forwardable_trailer(name.as_str().as_bytes()) {
            fields.append(name.clone(), value.clone());
        }
    }
    let _ = match fields.is_empty() {
        true => to.send_data(Bytes::new(), true),
        false => to.send_trailers(fields),
    };
}
