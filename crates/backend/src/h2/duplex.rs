//! A request body sent on its own while the response is read: the rest
//! of a client's HTTP/2 request body goes from its stream to the
//! backend's, DATA frame by DATA frame under both windows, with its
//! trailers, on a task of its own that ends with the exchange. This is
//! what gRPC's client and bidirectional streaming need (a response that
//! starts before its request has ended); the exchange itself still
//! reads the response as it always does.

use bytes::Bytes;
use h2::{RecvStream, SendStream};
use std::time::Duration;

/// The task forwarding the body; aborted when dropped.
pub(super) struct Pump(tokio::task::JoinHandle<()>);

impl Pump {
    /// Starts forwarding `from` to `to`; each piece (and the window to
    /// send it) is awaited at most `idle`, past which both streams are
    /// reset.
    pub(super) fn start(from: RecvStream, to: SendStream<Bytes>, idle: Duration) -> Pump {
        Pump(tokio::spawn(forward(from, to, idle)))
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn forward(mut from: RecvStream, mut to: SendStream<Bytes>, idle: Duration) {
    loop {
        let next = match tokio::time::timeout(idle, from.data()).await {
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
        let last = from.is_end_stream();
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
        let _ = from.flow_control().release_capacity(taken);
    }
    let trailers = match tokio::time::timeout(idle, from.trailers()).await {
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
