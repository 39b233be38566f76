//! The answers a request gets before VCL runs: an ACME server's HTTP-01
//! challenge, a cluster peer's invalidation or journal read, and a request
//! whose body is too large to keep.

use crate::host::req::{Outcome, Req};
use crate::transport::io::Client;
use crate::Shared;
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::params::Params;
use lacquer_shm::Tag;

/// Answers an ACME server's HTTP-01 request for a pending challenge with
/// its key authorization, before VCL (which has no say in it).
pub(super) async fn acme_answer(
    c: &mut Client,
    sh: &Shared,
    req: &mut Req,
    answer: &str,
) -> Outcome {
    COUNTERS.inc(Counter::tls_acme_challenges);
    req.log
        .bytes(Tag::Debug, b"ACME http-01 challenge answered");
    plain_answer(c, sh, req, 200, answer).await
}

/// Answers a cluster peer's marked request (an invalidation, a journal
/// read), before VCL.
pub(super) async fn peer_answer(
    c: &mut Client,
    sh: &Shared,
    req: &mut Req,
    status: u16,
    body: &str,
) -> Outcome {
    req.log.bytes(Tag::Debug, b"cluster peer request answered");
    plain_answer(c, sh, req, status, body).await
}

/// A plain-text answer with `status` and `body`, once the request's body
/// is read.
async fn plain_answer(
    c: &mut Client,
    sh: &Shared,
    req: &mut Req,
    status: u16,
    body: &str,
) -> Outcome {
    let keep = match req.consume_body(c, sh).await {
        Ok(keep) => keep,
        Err(reason) => return Outcome::Close(reason),
    };
    let reason = lacquer_http::Status::new(status).reason();
    let msg = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n{}\r\n{body}",
        body.len(),
        if keep { "" } else { "Connection: close\r\n" }
    );
    let idle = Params::duration(sh.params.idle_send_timeout());
    match (c.write_small(msg.as_bytes(), idle).await, keep) {
        (Ok(_), true) => Outcome::KeepAlive,
        (Ok(_), false) => Outcome::Close(CloseReason::ReqClose),
        (Err(_), _) => Outcome::Close(CloseReason::RemClose),
    }
}

/// Answers a request whose chunked body went past what the program keeps
/// (it cannot be sent on), and closes.
pub(super) async fn too_large(c: &mut Client, sh: &Shared, req: &mut Req) -> Outcome {
    req.log
        .bytes(Tag::FetchError, b"Request body too big to cache");
    let msg = b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    let idle = Params::duration(sh.params.idle_send_timeout());
    let _ = c.write_small(msg, idle).await;
    Outcome::Close(CloseReason::RxOverflow)
}
