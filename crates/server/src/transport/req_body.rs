//! A client request's body as the steps read it: delimited by its
//! length or by chunks (decoded here), read from the client's buffer and
//! its connection within a time limit, or dropped; a body whose framing
//! is broken is answered 400.

use super::io::Client;
use bytes::Bytes;
use lacquer_http::chunked::{ChunkedDecoder, Decoded};
use lacquer_http::Framing;
use std::time::Duration;

/// Reading position in a client request body.
pub(crate) struct ReqBody {
    state: ReqBodyState,
}

enum ReqBodyState {
    Done,
    Length(u64),
    Chunked(ChunkedDecoder),
}

/// The request body could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyError {
    /// The body's framing is broken (bad chunked coding): the client is
    /// answered 400.
    Malformed,
    /// The client went away or stopped sending.
    Gone,
}

impl Client {
    /// Answers a request whose body could not be read as framed with a
    /// 400 (nothing of a response has been written yet); the caller
    /// closes the connection.
    pub async fn refuse_body(&mut self, sh: &crate::Shared) {
        use lacquer_core::counters::{Counter, COUNTERS};
        COUNTERS.inc(Counter::client_req_400);
        const MSG: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 30\r\nConnection: close\r\n\r\n400 Bad Request: request body\n";
        let idle = lacquer_core::params::Params::duration(sh.params.idle_send_timeout());
        // An include's transport writes nothing of its own.
        let _ = self.write_small(MSG, idle).await;
    }
}

impl ReqBody {
    pub fn new(framing: Framing) -> Self {
        let state = match framing {
            Framing::Length(n) if n > 0 => ReqBodyState::Length(n),
            Framing::Chunked => ReqBodyState::Chunked(ChunkedDecoder::new()),
            _ => ReqBodyState::Done,
        };
        ReqBody { state }
    }

    pub fn is_done(&self) -> bool {
        matches!(self.state, ReqBodyState::Done)
    }

    /// The next piece of the body; `None` at its end.
    pub async fn next(
        &mut self,
        c: &mut Client,
        limit: Duration,
    ) -> Result<Option<Bytes>, BodyError> {
        loop {
            match &mut self.state {
                ReqBodyState::Done => return Ok(None),
                ReqBodyState::Length(left) => {
                    if !c.rbuf.is_empty() {
                        let n = (c.rbuf.len() as u64).min(*left) as usize;
                        *left -= n as u64;
                        if *left == 0 {
                            self.state = ReqBodyState::Done;
                        }
                        return Ok(Some(c.rbuf.split_to(n).freeze()));
                    }
                }
                ReqBodyState::Chunked(dec) => match dec.decode(&mut c.rbuf) {
                    Ok(Some(Decoded::Data(d))) => return Ok(Some(d)),
                    Ok(Some(Decoded::End)) => {
                        self.state = ReqBodyState::Done;
                        return Ok(None);
                    }
                    Ok(None) => {}
                    Err(_) => return Err(BodyError::Malformed),
                },
            }
            match c.read_more(limit).await {
                Ok(0) | Err(_) => return Err(BodyError::Gone),
                Ok(_) => {}
            }
        }
    }

    /// Reads and drops the rest of the body.
    pub async fn discard(&mut self, c: &mut Client, limit: Duration) -> Result<u64, BodyError> {
        let mut n = 0;
        while let Some(piece) = self.next(c, limit).await? {
            n += piece.len() as u64;
        }
        Ok(n)
    }
}
