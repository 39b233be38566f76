//! Below the seam: a client connection's bytes (`io`: reading heads,
//! writing within the send timeouts, an ESI include's channel to its
//! page; `req_body`: request bodies; `stream`: the byte stream under it
//! and its two ends; `tcp`: a client's TCP connection, registered with
//! the reactor only when it has to wait), its deadlines (`deadline`), its socket options (`sockopt`, the one module that calls
//! the C library), TLS (`tls`), the certificates ACME keeps (`acme`),
//! an HTTP/2 stream as a client's wire (`h2`), and the terms every wire
//! shares (`wire`: body framing, read and write errors, an include's
//! pieces).

pub(crate) mod acme;
pub(crate) mod deadline;
pub(crate) mod h2;
pub(crate) mod io;
pub(crate) mod req_body;
pub(crate) mod sockopt;
pub(crate) mod stream;
pub(crate) mod tcp;
pub(crate) mod tls;
pub(crate) mod wire;
