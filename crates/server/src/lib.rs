//! The daemon: client sessions, the client-side request state machine
//! (recv → hash → lookup → hit/miss/pass → deliver), the backend side that
//! fills the cache, delivery to clients, and the start-up that ties them to
//! listening sockets. Policy decisions are the built-in VCL's, in
//! `builtin`, until a VCL program can be loaded.

mod builtin;
pub mod config;
mod daemon;
mod deliver;
mod fetch;
mod io;
mod pass;
mod request;
mod session;
mod synth;

pub use daemon::serve;

use lacquer_backend::{Backend, Timeouts};
use lacquer_cache::Cache;
use lacquer_core::params::Params;
use lacquer_http::{RequestLimits, ResponseLimits};
use std::sync::Arc;

/// State shared by every session and fetch.
pub(crate) struct Shared {
    pub params: Params,
    pub cache: Arc<Cache>,
    pub backend: Arc<Backend>,
    /// The value this node adds to `Via`: `1.1 <identity> (Lacquer/x.y)`.
    pub via: String,
}

impl Shared {
    pub fn timeouts(&self) -> Timeouts {
        let p = &self.params;
        Timeouts {
            connect: Params::duration(p.connect_timeout()),
            first_byte: Params::duration(p.first_byte_timeout()),
            between_bytes: Params::duration(p.between_bytes_timeout()),
            idle: Params::duration(p.backend_idle_timeout()),
        }
    }

    pub fn request_limits(&self) -> RequestLimits {
        let p = &self.params;
        RequestLimits {
            max_head: p.http_req_size() as usize,
            max_header_line: p.http_req_hdr_len() as usize,
            max_headers: p.http_max_hdr() as usize,
        }
    }

    pub fn response_limits(&self) -> ResponseLimits {
        let p = &self.params;
        ResponseLimits {
            max_head: p.http_resp_size() as usize,
            max_header_line: p.http_resp_hdr_len() as usize,
            max_headers: p.http_max_hdr() as usize,
        }
    }
}
