//! Body filters: the ESI parser that turns a fetched body into a program
//! of verbatim ranges and includes (`esi`), and the streaming gzip and
//! gunzip steps that fetch and delivery put bodies through (`gzip`).

#![forbid(unsafe_code)]

pub mod esi;
pub mod gzip;
pub mod splice;
