//! The walk of one client request: what its steps share beyond the
//! request itself (the daemon's state, the program it runs, its hash key,
//! what became of its body and connection, whether VCL failed), and the
//! one way a step runs a VCL method.

use crate::host::client_host::{ClientHost, Resp};
use crate::host::req::{ConnInfo, Req};
use crate::host::vcl::Loaded;
use crate::host::vsl;
use crate::transport::io::Client;
use crate::Shared;
use lacquer_cache::object::Object;
use lacquer_core::close::CloseReason;
use lacquer_vcl::{Action, Method};
use std::sync::Arc;

/// The state of one request as it moves between steps, beyond the
/// request itself: what the daemon lends it, the program it runs, its
/// hash key, and what became of its body and connection.
pub(crate) struct Walk<'a> {
    pub sh: &'a Arc<Shared>,
    pub(super) base: &'a Arc<Loaded>,
    /// The program `return (vcl(label))` moved the request to.
    pub(super) switched: Option<Arc<Loaded>>,
    pub conn: &'a ConnInfo,
    /// The hash key `vcl_hash` made (emptied for each pass of `vcl_recv`).
    pub key: Vec<u8>,
    /// Whether the connection can carry another request, once the
    /// request's body has been read or refused.
    pub(super) keep: Option<bool>,
    /// VCL failed: whatever is answered, the connection then closes.
    pub(super) failed: bool,
    /// Each step is logged (`debug=+req_state`).
    pub(super) trace: bool,
}

impl<'a> Walk<'a> {
    /// The program the request runs.
    pub fn vcl(&self) -> &Arc<Loaded> {
        self.switched.as_ref().unwrap_or(self.base)
    }

    /// Runs a client method.
    pub fn call(
        &self,
        method: Method,
        req: &mut Req,
        hash: Option<&mut Vec<u8>>,
        obj: Option<&Object>,
        resp: Option<&mut Resp>,
    ) -> Action {
        // Once hashed, the key is the program's to read (vmod cluster).
        let key = (hash.is_none() && !self.key.is_empty()).then_some(&self.key[..]);
        self.run(method, req, hash, key, obj, resp)
    }

    /// A call that knows the hash key looked up (`vcl_hit`, `vcl_miss`).
    pub fn call_keyed(&self, method: Method, req: &mut Req, obj: Option<&Object>) -> Action {
        self.run(method, req, None, Some(&self.key), obj, None)
    }

    fn run(
        &self,
        method: Method,
        req: &mut Req,
        hash: Option<&mut Vec<u8>>,
        key: Option<&[u8]>,
        obj: Option<&Object>,
        resp: Option<&mut Resp>,
    ) -> Action {
        let vcl = self.vcl();
        let mut host = ClientHost {
            method,
            sh: self.sh,
            vcl,
            req,
            conn: self.conn,
            hash,
            key,
            obj,
            resp,
        };
        vsl::run_method(
            &vcl.program,
            method,
            &mut host,
            |h| &mut h.req.log,
            |_, _| {},
        )
    }

    /// Reads what is left of the request's body (or refuses it), once:
    /// whether the connection can then carry another request.
    pub async fn settle(&mut self, c: &mut Client, req: &mut Req) -> Result<bool, CloseReason> {
        if let Some(keep) = self.keep {
            return Ok(keep);
        }
        let keep = req.consume_body(c, self.sh).await?;
        self.keep = Some(keep);
        Ok(keep)
    }
}
