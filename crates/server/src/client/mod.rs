//! The client side of vcl-step(7) for one request: `request` walks the
//! steps (recv, hash, lookup, hit, miss, pass, pipe, purge, synth,
//! deliver) over the request state (`host::req`); `pass` and `pipe` are
//! the steps that go to the backend for one client (`pass_stream` relays
//! a pass's body straight through, `pass_front` is what both ways of a
//! pass share); `deliver` and `esi`
//! put a response on the wire (`plan` decides, for a delivered object and
//! a relayed pass alike, its 304, framing, ETag and connection's fate;
//! `conditional` judges validators and
//! ranges for it; `encodings` has br and zstd renditions made and
//! compresses or decodes bodies on the way out; `resp_log` logs a
//! response as varnishd does, as built and then changed, and `req_log`
//! a request's start, restarts and lookups); `interim` hands a backend's 1xx responses
//! to the client; `invalidate` removes what a successful
//! unsafe request changed; `req_headers` shapes a request's headers
//! before VCL sees them; `answers` are what a request gets before VCL
//! runs (an ACME challenge, a body too large). `request` uses the others.

pub(crate) mod answers;
pub(crate) mod conditional;
pub(crate) mod deliver;
pub(crate) mod encodings;
pub(crate) mod esi;
pub(crate) mod interim;
pub(crate) mod invalidate;
mod lookup;
pub(crate) mod pass;
pub(crate) mod pass_front;
pub(crate) mod pass_stream;
pub(crate) mod pipe;
pub(crate) mod plan;
pub(crate) mod req_headers;
pub(crate) mod req_log;
pub(crate) mod request;
pub(crate) mod resp_log;
pub(crate) mod step;
mod walk;
