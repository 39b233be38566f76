//! Body filters: the ESI parser that turns a fetched body into a program
//! of verbatim ranges and includes (`esi`), and the streaming gzip and
//! gunzip steps that fetch and delivery put bodies through (`gzip`), and
//! the choice of a content coding with brotli and zstd (`coding`).

#![forbid(unsafe_code)]

pub mod coding;
pub mod esi;
pub mod gzip;
pub mod splice;
