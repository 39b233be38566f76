//! Below the seam: what a client's responses go out on and its requests
//! come in from. `wire` is the interface every transport implements (as
//! Varnish's `struct transport`) and the terms it speaks in; `http1` (a
//! connection speaking HTTP/1), `h2` (one stream of an HTTP/2
//! connection), `h3` (one request stream of an HTTP/3 connection) and
//! `fragment` (an ESI include's channel to its page)
//! implement it; `io` is a client connection's buffers and the transport
//! it holds; `req_body` reads request bodies; `stream` is the byte stream
//! under a connection and its two ends; `tcp` a client's TCP connection,
//! registered with the reactor only when it has to wait; `deadline` the
//! send and read deadlines; `sockopt` socket options (the one module that
//! calls the C library); `tls` TLS; `acme` the certificates ACME keeps.

pub(crate) mod acme;
pub(crate) mod deadline;
pub(crate) mod fragment;
pub(crate) mod h2;
pub(crate) mod h3;
pub(crate) mod http1;
pub(crate) mod io;
pub(crate) mod req_body;
pub(crate) mod sockopt;
pub(crate) mod stream;
pub(crate) mod tcp;
pub(crate) mod tls;
pub(crate) mod wire;
