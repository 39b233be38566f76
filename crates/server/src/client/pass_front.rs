//! What a pass's two ways of sending its response share (through a
//! private object, `pass`, or straight through, `pass_stream`): the client
//! side and the backend side it works with, how it ends, its `Fetch`
//! time and its `vcl_deliver`.

use crate::client::step;
use crate::host::backend_host::Bereq;
use crate::host::client_host::ClientHost;
use crate::host::req::{ConnInfo, Outcome, Req};
use crate::host::vcl::Loaded;
use crate::transport::io::Client;
use crate::Shared;
use bytes::Bytes;
use lacquer_backend::Conn;
use lacquer_cache::object::Object;
use lacquer_http::ResponseHead;
use lacquer_vcl::{Action, Method};
use std::sync::Arc;

/// How a pass ended, and what the client state machine does next.
pub(crate) enum Passed {
    /// The response was streamed to the client.
    Done(Outcome),
    /// No response came through: deliver this error object.
    Object(Arc<Object>),
    /// `vcl_deliver` asked for these instead.
    Synth(u16, Option<Bytes>),
    Restart,
    Fail,
}

/// The client side of a pass, as its response goes out.
pub(crate) struct Front<'a> {
    pub c: &'a mut Client,
    pub sh: &'a Arc<Shared>,
    pub vcl: &'a Arc<Loaded>,
    pub req: &'a mut Req,
    pub conn: ConnInfo,
    /// The connection may be kept after it.
    pub keep: bool,
}

/// The backend side of a response being passed.
pub(crate) struct Backend<'a, 'b> {
    pub bereq: &'a mut Bereq,
    pub resp: &'a ResponseHead,
    pub conn: Conn<'b>,
    pub timeouts: &'a lacquer_backend::Timeouts,
}

/// The response is in: the client side's `Fetch` time, as for a miss.
pub(crate) fn log_fetched(req: &mut Req) {
    req.log.timestamp(
        &lacquer_shm::packed::stamp::FETCH,
        lacquer_core::time::now(),
    );
}

/// Runs `vcl_deliver`: None to deliver, else what it asked for instead.
/// A pass delivers within its own step: under `debug=+req_state` it logs
/// the deliver and transmit steps it takes there.
pub(crate) fn deliver_or(vcl: &Loaded, host: &mut ClientHost<'_>) -> Option<Passed> {
    let trace = host.sh.params.debug_req_state();
    if trace {
        step::log_start(host.req, step::Name::Deliver, &vcl.name);
    }
    let action = crate::host::vsl::run_method(
        &vcl.program,
        Method::Deliver,
        host,
        |h| &mut h.req.log,
        |_, _| {},
    );
    match action {
        Action::Deliver => {
            host.req.log.timestamp(
                &lacquer_shm::packed::stamp::PROCESS,
                lacquer_core::time::now(),
            );
            if trace {
                step::log_start(host.req, step::Name::Transmit, &vcl.name);
            }
            None
        }
        Action::Synth { status, reason } => Some(Passed::Synth(status, reason)),
        Action::Restart => Some(Passed::Restart),
        _ => Some(Passed::Fail),
    }
}
