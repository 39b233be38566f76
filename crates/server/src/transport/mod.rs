//! Below the seam: a client connection's bytes (`io`: reading heads and
//! bodies, writing within the send timeouts, an ESI include's channel to
//! its page), its socket options (`sockopt`, the one module that calls
//! the C library), TLS (`tls`) and the certificates ACME keeps (`acme`).

pub(crate) mod acme;
pub(crate) mod io;
pub(crate) mod sockopt;
pub(crate) mod tls;
