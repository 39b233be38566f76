//! End-to-end behaviour of `lacquer serve`: the real binary in front of a
//! real origin server, driven by a raw client.

#![forbid(unsafe_code)]

mod backend_h2;
mod backend_side;
mod bans;
mod cache;
mod cli;
mod client_side;
mod cluster;
mod cluster_dns;
mod daemon;
mod dashboard;
mod encodings;
mod h2_origin;
mod harness;
mod hostile;
mod http2;
mod http3;
mod http3_features;
mod http3_hostile;
mod mgmt;
mod observability;
mod origin;
mod storage;
mod tls;
mod vcl;
mod vtc;
