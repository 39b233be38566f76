//! The daemon: client sessions, the client-side request state machine
//! (recv → hash → lookup → hit/miss/pass/pipe → deliver) and the backend
//! side that fills the cache, both driven by the loaded VCL program;
//! delivery to clients; and the start-up that ties them to listening
//! sockets.

#![deny(unsafe_code)]

/// Boxes a future made in its box: the box is allocated first and the
/// future written into it, instead of made on the stack and copied in (a
/// request's steps are several KiB of state).
macro_rules! boxed_in_place {
    ($future:expr) => {
        Box::into_pin(Box::write(Box::new_uninit(), $future))
    };
}

/// Writes a line to standard error as `eprintln!` does, but never panics:
/// a daemon whose standard error is gone (a pipe whose reader left) goes
/// on serving and reporting, and still stops on SIGTERM. `eprintln!`
/// panics when the write fails, which in a request's task ended that
/// request, and in the signal task left the daemon running.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

mod client;
mod daemon;
mod fetch;
mod host;
mod mgmt;
mod session;
mod transport;

pub use daemon::config;
pub use daemon::{describe, serve};
pub use host::vcl::VclSource;

use lacquer_cache::Cache;
use lacquer_core::params::Params;
use lacquer_http::{RequestLimits, ResponseLimits};
use std::sync::{Arc, Mutex};

/// State shared by every session and fetch.
pub(crate) struct Shared {
    pub params: Params,
    pub cache: Arc<Cache>,
    /// The VCL program new requests start with.
    pub active: host::vcl::ActiveVcl,
    /// Every loaded program; `vcl.use` changes `active` under this lock.
    pub vcls: Mutex<host::vcl::Registry>,
    /// `-i`, or the host name.
    pub identity: String,
    /// The value this node adds to `Via`: `1.1 <identity> (Lacquer/x.y)`.
    pub via: String,
    /// The shared-memory log, unless `vsl_enabled` was off at start.
    pub log: Option<&'static lacquer_shm::Log>,
    /// The health probes running, shared by the programs' backends.
    pub probes: lacquer_backend::probe::Probes,
    /// How many requests are at work at once (`thread_pool_max`).
    pub admission: session::admission::Admission,
    /// The `-A` file's certificates, for the `tls.cert.*` commands.
    pub tls: Option<Arc<transport::tls::TlsState>>,
    /// How an ESI page's includes run as requests of their own: the
    /// client steps, which sit above ESI, handed over by the daemon.
    pub includes: host::req::IncludeRunner,
    /// The cluster this node is in (`--cluster-bind`), and its
    /// connections to the other nodes.
    pub cluster: Option<host::peers::Peers>,
    /// What answers a GET for a URL before VCL runs, where something
    /// does: the TLS side's ACME HTTP-01 challenges, registered when the
    /// daemon has certificates (`-A`).
    pub answer_first: Option<AnswerFirst>,
}

/// What answers a GET for a URL before VCL runs (its body), if anything.
pub(crate) type AnswerFirst = fn(&[u8]) -> Option<String>;

/// The machine's host name, as `server.hostname` gives it.
pub(crate) fn hostname() -> String {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(lacquer_core::host::hostname).clone()
}

impl Shared {
    /// A log transaction with this vxid, under the current `vsl_*`
    /// parameters.
    pub fn txn(&self, vxid: u64, side: lacquer_shm::Side) -> lacquer_shm::Txn {
        let p = &self.params;
        let log = self.log.filter(|_| p.vsl_enabled());
        lacquer_shm::Txn::new(
            log,
            vxid,
            side,
            lacquer_shm::Limits {
                reclen: p.vsl_reclen() as usize,
                buffer: p.vsl_buffer() as usize,
                mask: host::vsl::mask(),
            },
        )
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
