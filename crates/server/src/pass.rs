//! Pass: the request goes to the backend as the client sent it (less
//! hop-by-hop headers), its body streamed through, and the response
//! streams back to this one client without touching the cache.

use crate::deliver::{self, Delivery, DeliveryHeaders, WireBody};
use crate::io::{Client, SendClock};
use crate::request::{Outcome, Req};
use crate::{fetch, synth, Shared};
use lacquer_backend::{Conn, FetchError};
use lacquer_core::close::CloseReason;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::ids::next_vxid;
use lacquer_core::params::Params;
use lacquer_http::{Framing, ResponseHead, Version};
use std::sync::Arc;

/// Passes one request to the backend and its response to the client.
pub(crate) async fn pass(c: &mut Client, sh: &Arc<Shared>, req: &mut Req) -> Outcome {
    COUNTERS.inc(Counter::s_fetch);
    let xid = next_vxid();
    let mut headers = req.head.headers.clone();
    headers.remove_hop_by_hop();
    headers.remove("expect");
    let chunked_body = req.head.framing == Framing::Chunked && !req.body.is_done();
    if chunked_body {
        headers.set("Transfer-Encoding", "chunked");
    }
    let head = fetch::bereq_head(sh, &req.head.method, &req.head.url, &mut headers, xid);

    let t = sh.timeouts();
    let limits = sh.response_limits();
    let backend = sh.backend.clone();
    let is_head = req.is_head();
    let result: Result<(Conn<'_>, ResponseHead), FetchError> = if req.body.is_done() {
        backend.exchange(&head, &[], &t, &limits, is_head).await
    } else {
        if req.head.expect_continue {
            let idle = Params::duration(sh.params.idle_send_timeout());
            if c.write_small(b"HTTP/1.1 100 Continue\r\n\r\n", idle)
                .await
                .is_err()
            {
                return Outcome::Close(CloseReason::TxError);
            }
        }
        match send_with_body(c, sh, req, &backend, &head, chunked_body).await {
            Ok(r) => r,
            Err(outcome) => return outcome,
        }
    };
    let keep = req.head.keep_alive();
    let (mut conn, resp) = match result {
        Ok(x) => x,
        Err(e) => {
            COUNTERS.inc(Counter::fetch_failed);
            fetch::log_fetch_error(xid, &e);
            let obj = synth::fetch_failed(xid);
            return deliver::object(c, sh, req, &obj, Delivery { hit: false, keep }).await;
        }
    };
    let now = lacquer_core::time::now();
    let skip: &[&str] = if is_head {
        &["age"]
    } else {
        &["content-length", "age"]
    };
    let (block, _) = fetch::stored_head(&resp, now, skip);
    let age = resp
        .headers
        .get("age")
        .map(|v| lacquer_cache::ttl::parse_delta_seconds(lacquer_http::headers::trim(v)) as u64)
        .unwrap_or(0);
    let http10 = req.head.version == Version::Http10;
    let bodyless = resp.status == 204 || resp.status == 304 || resp.status < 200;
    let wire = match resp.framing {
        _ if bodyless => WireBody::Bodyless,
        Framing::Length(n) => WireBody::Length(n),
        Framing::None if is_head => WireBody::HeadUnknown,
        Framing::None => WireBody::Length(0),
        Framing::Chunked | Framing::UntilClose if http10 => WireBody::Close,
        Framing::Chunked | Framing::UntilClose => WireBody::Chunked,
    };
    let keep = keep && wire != WireBody::Close;
    c.wbuf.clear();
    c.wbuf.extend_from_slice(&block);
    deliver::write_delivery_headers(
        &mut c.wbuf,
        sh,
        &DeliveryHeaders {
            xid: req.xid,
            obj_xid: None,
            age,
            accept_ranges: false,
            body: wire,
            keep,
            http10,
        },
    );
    COUNTERS.add(Counter::s_resp_hdrbytes, c.wbuf.len() as u64);
    let clock = SendClock::new(
        Params::duration(sh.params.send_timeout()),
        Params::duration(sh.params.idle_send_timeout()),
    );
    if c.write_head_and(&[], &clock).await.is_err() {
        return Outcome::Close(CloseReason::TxError);
    }
    let chunked = wire == WireBody::Chunked;
    let mut reader = conn.body(resp.framing);
    let mut size_line = Vec::with_capacity(16);
    loop {
        match conn.read_body(&mut reader, &t).await {
            Ok(Some(piece)) => {
                let r = if chunked {
                    size_line.clear();
                    lacquer_http::chunked::chunk_header(piece.len(), &mut size_line);
                    c.write_parts(&[&size_line, &piece, b"\r\n"], &clock).await
                } else {
                    c.write_parts(&[&piece], &clock).await
                };
                if r.is_err() {
                    return Outcome::Close(CloseReason::TxError);
                }
                COUNTERS.add(Counter::s_resp_bodybytes, piece.len() as u64);
            }
            Ok(None) => break,
            Err(e) => {
                COUNTERS.inc(Counter::fetch_failed);
                fetch::log_fetch_error(xid, &e);
                return Outcome::Close(CloseReason::TxError);
            }
        }
    }
    conn.finish(true);
    if chunked
        && c.write_parts(&[lacquer_http::chunked::LAST_CHUNK], &clock)
            .await
            .is_err()
    {
        return Outcome::Close(CloseReason::TxError);
    }
    match (keep, wire) {
        (true, _) => Outcome::KeepAlive,
        (false, WireBody::Close) => Outcome::Close(CloseReason::TxEof),
        (false, _) if http10 => Outcome::Close(CloseReason::ReqHttp10),
        _ => Outcome::Close(CloseReason::ReqClose),
    }
}

/// Sends a request head and streams the client's body after it, then
/// reads the response head. No retry: the body cannot be replayed.
async fn send_with_body<'b>(
    c: &mut Client,
    sh: &Shared,
    req: &mut Req,
    backend: &'b lacquer_backend::Backend,
    head: &[u8],
    chunked: bool,
) -> Result<Result<(Conn<'b>, ResponseHead), FetchError>, Outcome> {
    let t = sh.timeouts();
    let mut conn = match backend.connect(&t, true).await {
        Ok(conn) => conn,
        Err(e) => return Ok(Err(e)),
    };
    backend
        .req
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if let Err(e) = conn.write(head, &t).await {
        return Ok(Err(e));
    }
    let limit = Params::duration(sh.params.timeout_idle());
    let mut frame = Vec::with_capacity(16);
    loop {
        match req.body.next(c, limit).await {
            Ok(Some(piece)) => {
                COUNTERS.add(Counter::s_req_bodybytes, piece.len() as u64);
                let r = if chunked {
                    frame.clear();
                    lacquer_http::chunked::chunk_header(piece.len(), &mut frame);
                    frame.extend_from_slice(&piece);
                    frame.extend_from_slice(b"\r\n");
                    conn.write(&frame, &t).await
                } else {
                    conn.write(&piece, &t).await
                };
                if let Err(e) = r {
                    return Ok(Err(e));
                }
            }
            Ok(None) => break,
            Err(_) => return Err(Outcome::Close(CloseReason::RxBody)),
        }
    }
    if chunked {
        if let Err(e) = conn.write(lacquer_http::chunked::LAST_CHUNK, &t).await {
            return Ok(Err(e));
        }
    }
    let limits = sh.response_limits();
    match conn.read_head(&t, &limits, req.is_head()).await {
        Ok(resp) => Ok(Ok((conn, resp))),
        Err(e) => Ok(Err(e)),
    }
}
