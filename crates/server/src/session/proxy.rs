//! The PROXY header a `-a …,PROXY` listener's connections start with:
//! read within `timeout_idle` and `http_req_size`, logged as a `Proxy`
//! record, and made the session's client and server addresses. A
//! connection without a good one is closed unanswered (there is no HTTP
//! to answer in yet), with a `ProxyGarbage` record saying why.

use crate::transport::io::{Client, ReadError};
use crate::Shared;
use lacquer_core::close::CloseReason;
use lacquer_core::params::Params;
use lacquer_http::proxy;
use lacquer_shm::{Tag, Txn};
use std::sync::Arc;
use std::time::Instant;

/// Reads the header off the start of the connection; the bytes after it
/// stay in the read buffer as the first request's.
pub(super) async fn read_header(
    sh: &Shared,
    c: &mut Client,
    log: &mut Txn,
) -> Result<(), CloseReason> {
    let limit = Params::duration(sh.params.timeout_idle());
    let deadline = Instant::now() + limit;
    let max = (sh.params.http_req_size() as usize).max(proxy::V1_MAX);
    let (header, used) = loop {
        match proxy::parse(&c.rbuf, max) {
            Ok(Some(found)) => break found,
            Ok(None) => {}
            Err(e) => {
                garbage(log, &e.to_string());
                return Err(CloseReason::RxJunk);
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match c.read_more(left).await {
            Ok(0) if c.rbuf.is_empty() => return Err(CloseReason::RemClose),
            Ok(0) => {
                garbage(log, "connection closed within the header");
                return Err(CloseReason::RxJunk);
            }
            Ok(_) => {}
            Err(ReadError::Timeout) => return Err(CloseReason::RxTimeout),
            Err(ReadError::Io) => return Err(CloseReason::RemClose),
        }
    };
    let _ = c.rbuf.split_to(used);
    if log.active() {
        match header.addrs {
            Some((client, server)) => log.fmt(
                Tag::Proxy,
                format_args!(
                    "{} {} {} {} {}",
                    header.version,
                    client.ip().to_canonical(),
                    client.port(),
                    server.ip().to_canonical(),
                    server.port()
                ),
            ),
            None => log.fmt(
                Tag::Proxy,
                format_args!("{} local local local local", header.version),
            ),
        }
    }
    match Arc::get_mut(&mut c.addrs) {
        Some(addrs) => addrs.proxied(header),
        None => {
            // Nothing else holds the addresses before the first request;
            // should that change, take a copy rather than lose the header.
            let a = &c.addrs;
            let mut copy = crate::transport::io::SessAddrs::new(
                a.remote,
                a.local,
                a.listener.clone(),
                a.endpoint.clone(),
            );
            copy.peer_cred = a.peer_cred;
            copy.proxied(header);
            c.addrs = Arc::new(copy);
        }
    }
    Ok(())
}

fn garbage(log: &mut Txn, why: &str) {
    if log.active() {
        log.bytes(Tag::ProxyGarbage, why.as_bytes());
    }
}
